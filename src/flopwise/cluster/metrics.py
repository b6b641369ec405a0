"""Memory-bounded run metrics: a fixed-size summary per request, kept as it completes, instead of its token times.

A `RequestRecord` keeps every token's instant (7-8 KiB for a chat request); a million of them do not fit in
2 GB. Here each request leaves, when it completes, one row of numbers (arrival, first and last token, output
tokens, first scheduled, preemptions, its largest gap between tokens, cached tokens, its time breakdown), and
the request objects are dropped. Every summary key of `metrics.summarize` is computed from those rows, with the
same definitions and, for the per-request metrics (TTFT, TPOT, E2E, queue), the same numbers (np.percentile
over the same values).

The pooled inter-token latency (ITL) has one value per token. It is kept exactly but in O(steps), not
O(tokens): a request emitting in steps a .. b-1 of a replica contributes the gaps between consecutive steps of
that range, so each replica keeps a difference array over its steps (+1 at a + 1, -1 at b); its prefix sums
count how many requests saw each step-to-step gap. Gaps between ranges (a preemption, an SGLang prefill pause,
a disaggregated hand-off) are kept one by one. Percentiles of the weighted values equal np.percentile over the
expanded list (linear interpolation between order statistics).

Per-replica latency percentiles are DDSketch quantiles (`ddsketch`, Datadog's relative-error quantile sketch,
1% relative accuracy), one sketch per replica and metric, built from the rows when first asked for: a sketch's
bins count the values of each key, whatever the order they came in, so adding each key's values as one weighted
value gives the quantiles a sketch streamed request by request would.

Cost. `add` runs once per completed request in the fleet's loop, so it does only scalar work: its row is written
through memoryviews of the numpy columns (a numpy scalar store costs several times more), and the largest gap
inside a range of steps, the one per-request reduction over token instants, is left to `close`, which takes the
maxima of every request's ranges on a replica with one `np.maximum.reduceat` over its step gaps.
"""

from __future__ import annotations

import math
from array import array
from typing import Any

import numpy as np

from flopwise.errors import WorkloadError
from flopwise.metrics.summary import LatencyStats, RunSummary, delivered_rate
from flopwise.sim.request import Request, visible_steps
from flopwise.sim.timeline import Timeline
from flopwise.specs.sla import SLA

__all__ = ["BoundedRecords", "weighted_stats", "SKETCH_ACCURACY"]

SKETCH_ACCURACY = 0.01
_FIELDS = ("arrival_at", "first_token_at", "last_token_at", "first_scheduled_at", "max_gap_ms")


def _sketches(names: tuple[str, ...]) -> tuple[dict[str, Any], Any]:
    """A DDSketch per name, and the key mapping they use (imported here: only bounded runs need the dependency,
    so an environment built before it was declared still runs everything else)."""
    try:
        from ddsketch import DDSketch, LogarithmicMapping
    except ImportError:  # pragma: no cover
        raise WorkloadError("bounded fleet metrics need the ddsketch package (pip install ddsketch, or "
                            "reinstall flopwise); or run with fewer requests") from None
    return {k: DDSketch(SKETCH_ACCURACY) for k in names}, LogarithmicMapping(SKETCH_ACCURACY)


def _sketch_keys(mapping: Any, values: np.ndarray) -> np.ndarray:
    """`mapping.key(x)` (the bin `DDSketch.add` puts x in: ceil(log_gamma(x))) of every x > 0 of `values`, in numpy;
    where log_gamma(x) lies within 1e-6 of an integer, numpy's and `math.log`'s last bits could fall on either side,
    so those take the mapping's own key. A sample of the rest is checked against it too (a mapping with an offset,
    or another formula, falls back to it for all)."""
    y = np.log(values) / math.log(mapping.gamma)
    keys: np.ndarray = np.ceil(y).astype(np.int64)
    near = np.flatnonzero(np.abs(y - np.rint(y)) < 1e-6)
    for i in near.tolist():
        keys[i] = mapping.key(float(values[i]))
    sample = np.linspace(0, values.size - 1, min(values.size, 64)).astype(np.int64).tolist()
    if any(mapping.key(float(values[i])) != keys[i] for i in sample):
        keys = np.fromiter(map(mapping.key, values.tolist()), dtype=np.int64, count=values.size)
    return keys


def weighted_stats(values: np.ndarray, weights: np.ndarray) -> LatencyStats:
    """mean, p50, p90, p95, p99 of `values` each repeated `weights` times (np.percentile's linear method)."""
    keep = weights > 0
    v, w = values[keep], weights[keep].astype(np.int64)
    n = int(w.sum())
    if n == 0:
        return LatencyStats(mean=None, p50=None, p90=None, p95=None, p99=None)
    order = np.lexsort((w, v))  # by value, then weight: the same sums whatever order the rows came in
    v, w = v[order], w[order]
    cum = np.cumsum(w)  # cum[i] - 1 is the last expanded index holding v[i]

    def at(k: int) -> float:
        return float(v[int(np.searchsorted(cum, k + 1))])

    def pct(q: float) -> float:
        h = (n - 1) * q / 100
        lo = int(np.floor(h))
        a = at(lo)
        if lo + 1 >= n:
            return a
        b = at(lo + 1)
        return a + (h - lo) * (b - a)

    return LatencyStats(mean=float((v * w).sum() / n), p50=pct(50), p90=pct(90), p95=pct(95), p99=pct(99))


class _Steps:
    """One replica's step-to-step gap weights (a difference array over its steps), and the ranges of steps its
    requests emitted in (request id, first step, end step: three flat arrays), whose largest gaps `close` reads."""

    __slots__ = ("tl", "diff", "rids", "starts", "stops")

    def __init__(self, tl: Timeline):
        self.tl = tl
        self.diff = array("q")
        self.rids, self.starts, self.stops = array("q"), array("q"), array("q")

    def add_range(self, rid: int, a: int, b: int) -> None:
        """Request `rid` emitted at steps a .. b-1 (b - a >= 2: at least one gap)."""
        d = self.diff
        if len(d) <= b:
            d.extend(array("q", bytes(8 * max(b + 1 - len(d), len(d)))))
        d[a + 1] += 1
        d[b] -= 1
        self.rids.append(rid)
        self.starts.append(a)
        self.stops.append(b)

    def _ends(self) -> np.ndarray:
        tl = self.tl
        return np.frombuffer(tl.delivered_at if len(tl.delivered_at) else tl.step_end_at, dtype=float)

    def gaps(self) -> tuple[np.ndarray, np.ndarray]:
        ends = self._ends()
        if ends.size < 2:
            return np.empty(0), np.empty(0, dtype=np.int64)
        w = np.cumsum(np.frombuffer(self.diff, dtype=np.int64))
        weights = np.zeros(ends.size, dtype=np.int64)
        m = min(w.size, ends.size)
        weights[:m] = w[:m]
        return np.diff(ends) * 1e3, weights[1:]

    def take_range_maxima(self) -> tuple[np.ndarray, np.ndarray]:
        """The ranges added since the last call: their request ids and largest gaps (ms), max(diff(ends[a:b]))."""
        rids = np.frombuffer(self.rids, dtype=np.int64).copy()
        if not rids.size:
            return rids, np.empty(0)
        # reduceat over [a0, b0-1, a1, b1-1, ...] reduces gaps[a:b-1] at the even positions (a < b - 1); the
        # appended 0 keeps the index b - 1 = len(gaps) of a range ending at the last step in bounds
        g = np.append(np.diff(self._ends()), 0.0)
        idx = np.empty(2 * rids.size, dtype=np.int64)
        idx[0::2] = np.frombuffer(self.starts, dtype=np.int64)
        idx[1::2] = np.frombuffer(self.stops, dtype=np.int64) - 1
        maxima = np.maximum.reduceat(g, idx)[0::2] * 1e3
        self.rids, self.starts, self.stops = array("q"), array("q"), array("q")
        return rids, maxima


class BoundedRecords:
    """Per-request rows, filled as requests complete (`add`) or fail (`fail`); `close` once the run is over."""

    def __init__(self, num_requests: int):
        n = num_requests
        self.num_requests = n
        self.cols = {f: np.full(n, np.nan) for f in _FIELDS}
        self.input_tokens = np.zeros(n, dtype=np.int64)
        self.output_tokens = np.zeros(n, dtype=np.int64)
        self.preemptions = np.zeros(n, dtype=np.int64)
        self.ok = np.zeros(n, dtype=bool)
        self.replica = np.zeros(n, dtype=np.int64)  # where it completed (rows with `ok` only)
        self.error_kind: dict[int, str] = {}
        self.phases = np.full((n, 5), np.nan)
        self.num_prompt_tokens = 0
        self.num_cached_tokens = 0
        self.steps: dict[int, _Steps] = {}
        self.loose_gaps: list[float] = []
        self.sketches: dict[int, dict[str, Any]] = {}
        self._views = self._make_views()

    def _make_views(self) -> tuple[Any, ...]:
        """What `add` writes through (one row per completed request; memoryviews of the columns, typed by format)."""
        c = self.cols
        return tuple(a.data for a in (
            c["arrival_at"], c["first_token_at"], c["last_token_at"], c["first_scheduled_at"], c["max_gap_ms"],
            self.input_tokens, self.output_tokens, self.preemptions, self.ok, self.replica, self.phases.reshape(-1)))

    def __getstate__(self) -> dict[str, Any]:  # (a shard's records travel between processes: `shards.py`)
        state = dict(self.__dict__)
        del state["_views"]
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._views = self._make_views()

    def merge(self, part: BoundedRecords, rows: np.ndarray, first_replica: int) -> None:
        """Take the closed records of a shard of this run (`shards.py`): its row i is this run's row rows[i], its
        replica j this run's replica first_replica + j."""
        c, pc = self.cols, part.cols
        for f in _FIELDS:
            c[f][rows] = pc[f]
        self.input_tokens[rows] = part.input_tokens
        self.output_tokens[rows] = part.output_tokens
        self.preemptions[rows] = part.preemptions
        self.ok[rows] = part.ok
        self.replica[rows] = part.replica + first_replica
        self.phases[rows] = part.phases
        for i, kind in part.error_kind.items():
            self.error_kind[int(rows[i])] = kind
        self.num_prompt_tokens += part.num_prompt_tokens
        self.num_cached_tokens += part.num_cached_tokens
        self.loose_gaps.extend(part.loose_gaps)
        for st in part.steps.values():  # (closed: only the step weights are left to read)
            self.steps[id(st.tl)] = st

    def _steps(self, tl: Timeline) -> _Steps:
        s = self.steps.get(id(tl))
        if s is None:
            s = self.steps[id(tl)] = _Steps(tl)
        return s

    def fail(self, rid: int, arrival_at: float, input_tokens: int, output_tokens: int, kind: str,
             first_scheduled_at: float | None = None, preemptions: int = 0) -> None:
        c = self.cols
        c["arrival_at"][rid] = arrival_at
        if first_scheduled_at is not None:
            c["first_scheduled_at"][rid] = first_scheduled_at
        self.input_tokens[rid], self.output_tokens[rid] = input_tokens, output_tokens
        self.preemptions[rid] = preemptions
        self.error_kind[rid] = kind

    def add(self, rid: int, head: Request, tl_head: Timeline, tail: Request | None, tl_tail: Timeline | None,
            handoff_at: float | None, replica: int, hidden: int = 0) -> None:
        """A completed request: `head` its first leg (prompt computed there) on `tl_head`; `tail` its decode
        leg on `tl_tail` after a hand-off at `handoff_at` (disaggregated), else None. Its largest gap inside a
        range of steps is filled in by `close`. `hidden`: opening tokens its client receives no text for
        (`sim.frontend.hidden_tokens`; with a hand-off, the hand-off's token is the first of them)."""
        self.num_prompt_tokens += head.num_prompt_tokens
        self.num_cached_tokens += head.num_cached_tokens
        leg, tl = (tail, tl_tail) if tail is not None else (head, tl_head)
        assert tl is not None and leg is not None
        ends = tl.step_end_at
        delivered = tl.delivered_at if len(tl.delivered_at) else ends
        engine_steps = leg.token_steps  # the phases are the engine's; what the client times may start later
        s, shown_handoff = engine_steps, handoff_at
        if hidden and tail is None:
            s = visible_steps(engine_steps, hidden)
        elif hidden and engine_steps:  # the hand-off's token is the first hidden one
            s, shown_handoff = visible_steps(engine_steps, hidden - 1), None
        steps = self._steps(tl)
        max_gap = 0.0  # the gaps between ranges here; those inside a range at `close`
        if len(s) == 2:  # one range of steps: the common case
            a, b = s
            if b - a >= 2:
                steps.add_range(rid, a, b)
            n_out = b - a
        else:
            n_out = 0
            for i in range(0, len(s), 2):
                a, b = s[i], s[i + 1]
                if i:  # the gap between two ranges
                    g = (delivered[a] - delivered[s[i - 1] - 1]) * 1e3
                    self.loose_gaps.append(g)
                    if g > max_gap:
                        max_gap = g
                if b - a >= 2:
                    steps.add_range(rid, a, b)
                n_out += b - a
        if tail is not None and shown_handoff is not None:
            first = shown_handoff
            if s:
                g = (delivered[s[0]] - shown_handoff) * 1e3
                self.loose_gaps.append(g)
                if g > max_gap:
                    max_gap = g
            n_out += 1
            last = delivered[s[-1] - 1] if s else shown_handoff
        else:
            first = delivered[s[0]]
            last = delivered[s[-1] - 1]
        arrival, first_token, last_token, first_scheduled, gap, inputs, outputs, preemptions, ok, where, phases = \
            self._views
        arrival[rid] = head.arrival_at
        first_token[rid] = first
        last_token[rid] = last
        scheduled = head.first_scheduled_at
        assert scheduled is not None  # it produced tokens, so it was scheduled
        first_scheduled[rid] = scheduled
        gap[rid] = max_gap
        inputs[rid] = head.num_prompt_tokens
        outputs[rid] = n_out
        preemptions[rid] = head.num_preemptions + (tail.num_preemptions if tail is not None else 0)
        ok[rid] = True
        where[rid] = replica
        step_end_last = ends[s[-1] - 1] if s else first
        if tail is None:
            started = ends[engine_steps[0]]
        else:
            assert handoff_at is not None  # a decode leg follows a hand-off
            started = handoff_at
        k = 5 * rid
        phases[k] = (head.engine_arrival_at - head.arrival_at) * 1e3
        phases[k + 1] = (scheduled - head.engine_arrival_at) * 1e3
        phases[k + 2] = (started - scheduled) * 1e3
        phases[k + 3] = (step_end_last - started) * 1e3
        phases[k + 4] = (last - step_end_last) * 1e3

    def close(self) -> None:
        """Fill in the largest gap inside each range of steps added so far (each replica's step instants are final
        up to its last completion); `summarize` and the other readers call it too."""
        col = self.cols["max_gap_ms"]
        for st in self.steps.values():
            rids, maxima = st.take_range_maxima()
            if rids.size:
                np.maximum.at(col, rids, maxima)

    # ---- the summary ---------------------------------------------------------------------------------
    def itl(self) -> LatencyStats:
        vals, weights = [np.asarray(self.loose_gaps)], [np.ones(len(self.loose_gaps), dtype=np.int64)]
        for st in self.steps.values():
            g, w = st.gaps()
            vals.append(g)
            weights.append(w)
        return weighted_stats(np.concatenate(vals), np.concatenate(weights))

    def summarize(self, sla: SLA | None) -> RunSummary:
        """`metrics.summarize`'s keys and definitions from the rows (ITL pooled exactly, by step weights)."""
        self.close()
        c, ok = self.cols, self.ok
        n_total = self.num_requests
        arrival = c["arrival_at"]
        if ok.any():
            start = float(np.nanmin(arrival))
            end = float(c["last_token_at"][ok].max())
            duration = max(end - start, 1e-12)
        else:
            duration = 0.0
        ttft = (c["first_token_at"][ok] - arrival[ok]) * 1e3
        e2e = (c["last_token_at"][ok] - arrival[ok]) * 1e3
        n_out = self.output_tokens[ok]
        multi = n_out >= 2
        tpot = (e2e[multi] - ttft[multi]) / (n_out[multi] - 1)
        fs = c["first_scheduled_at"][ok]
        queue = (fs[~np.isnan(fs)] - arrival[ok][~np.isnan(fs)]) * 1e3
        itl = self.itl()
        empty = LatencyStats(mean=None, p50=None, p90=None, p95=None, p99=None)
        stats = {"ttft_ms": LatencyStats.of(ttft), "tpot_ms": LatencyStats.of(tpot), "itl_ms": itl,
                 "e2e_ms": LatencyStats.of(e2e), "queue_ms": LatencyStats.of(queue), "itl_per_token_ms": itl,
                 "ttft_from_send_ms": empty, "send_lag_ms": empty, "e2e_from_send_ms": empty}
        errors: dict[str, int] = {}
        for kind in self.error_kind.values():
            errors[kind] = errors.get(kind, 0) + 1
        missing = n_total - int(ok.sum()) - len(self.error_kind)
        if missing:
            errors["unavailable"] = errors.get("unavailable", 0) + missing
        n_ok = int(ok.sum())
        g = gv = 0
        if sla is not None:
            good = np.ones(n_ok, dtype=bool)
            tpot_all = np.full(n_ok, -np.inf)
            tpot_all[multi] = tpot
            values = {"ttft": ttft, "e2e": e2e, "tpot": tpot_all, "itl": c["max_gap_ms"][ok]}
            tpot_vllm = np.zeros(n_ok)  # vLLM's goodput: TPOT 0 for one token, ITL gaps not checked
            tpot_vllm[multi] = tpot
            good_vllm = np.ones(n_ok, dtype=bool)
            vllm_values = {"ttft": ttft, "e2e": e2e, "tpot": tpot_vllm}
            for o in sla.objectives:
                good &= values[o.metric] <= o.limit_ms
                if o.metric in vllm_values:
                    good_vllm &= vllm_values[o.metric] <= o.limit_ms
            g, gv = int(good.sum()), int(good_vllm.sum())
        return RunSummary.of(
            stats=stats, num_requests=n_total, num_completed=n_ok, num_cancelled=0, duration_s=duration,
            output_tokens=int(n_out.sum()), input_tokens=int(self.input_tokens[ok].sum()),
            preemptions=int(self.preemptions.sum()), errors_by_kind=errors,
            delivered_request_rate=delivered_rate(arrival[~np.isnan(arrival)].tolist()), sla=sla,
            num_good=g, num_good_vllm=gv)

    def replica_percentiles(self, replica: int) -> dict[str, float | None]:
        sk = self._sketches().get(replica)
        if sk is None:
            return {"ttft_ms_p50": None, "ttft_ms_p95": None, "e2e_ms_p95": None}
        return {"ttft_ms_p50": sk["ttft_ms"].get_quantile_value(0.5),
                "ttft_ms_p95": sk["ttft_ms"].get_quantile_value(0.95),
                "e2e_ms_p95": sk["e2e_ms"].get_quantile_value(0.95)}

    def _sketches(self) -> dict[int, dict[str, Any]]:
        """Each replica's TTFT and E2E sketches over its completed rows (built once): each key's values go in as
        one value weighted by their count (module docstring), the first of them in request order."""
        if self.sketches or not self.ok.any():
            return self.sketches
        c, ok = self.cols, self.ok
        where = self.replica[ok]
        values = {"ttft_ms": np.maximum((c["first_token_at"][ok] - c["arrival_at"][ok]) * 1e3, 1e-9),
                  "e2e_ms": np.maximum((c["last_token_at"][ok] - c["arrival_at"][ok]) * 1e3, 1e-9)}
        mapping = None
        for r in np.unique(where).tolist():
            self.sketches[r], mapping = _sketches(tuple(values))
        assert mapping is not None
        for name, v in values.items():
            keys = _sketch_keys(mapping, v)
            low = int(keys.min())
            span = int(keys.max()) - low + 1
            found, first, counts = np.unique(where * span + (keys - low), return_index=True, return_counts=True)
            for code, i, n in zip(found.tolist(), first.tolist(), counts.tolist(), strict=True):  # by replica, key
                self.sketches[code // span][name].add(float(v[i]), float(n))
        return self.sketches

    def rows(self) -> list[dict[str, Any]]:
        c = self.cols
        out = []
        for rid in range(self.num_requests):
            ok = bool(self.ok[rid])
            a = c["arrival_at"][rid]
            ttft = (c["first_token_at"][rid] - a) * 1e3 if ok else None
            e2e = (c["last_token_at"][rid] - a) * 1e3 if ok else None
            n = int(self.output_tokens[rid])
            fs = c["first_scheduled_at"][rid]
            out.append({"request_id": rid, "arrival_at": float(a), "input_tokens": int(self.input_tokens[rid]),
                        "output_tokens": n, "queue_ms": None if np.isnan(fs) else float((fs - a) * 1e3),
                        "ttft_ms": ttft,
                        "tpot_ms": (e2e - ttft) / (n - 1) if e2e is not None and ttft is not None and n >= 2 else None,
                        "e2e_ms": e2e, "preemptions": int(self.preemptions[rid]),
                        "error": self.error_kind.get(rid)})
        return out
