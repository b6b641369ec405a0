"""Memory-bounded run metrics: a fixed-size summary per request, kept as it completes, instead of its token times.

A `RequestRecord` keeps every token's instant (7-8 KiB for a chat request); a million of them do not fit in
2 GB. Here each request leaves, when it completes, one row of numbers (arrival, first and last token, output
tokens, first scheduled, preemptions, cached tokens, its time breakdown, and, where the SLA bounds ITL, its own
gaps at each bounded statistic), and the request objects are dropped. Every summary key of `metrics.summarize`
is computed from those rows, with the same definitions and, for the per-request metrics (TTFT, TPOT, E2E, queue,
a bounded ITL statistic), the same numbers.

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
through memoryviews of the numpy columns (a numpy scalar store costs several times more). The one exception is an
SLA that bounds ITL: a request meets it by its own gaps at the objective's statistic (`metrics.summary.gap_stat`,
p95_itl: its 95th-percentile gap), so `add` then reads the request's gaps off its replica's step instants, which
are final once it completes (one np.diff and one partition per request: a few microseconds).
"""

from __future__ import annotations

import math
from array import array
from typing import Any

import numpy as np

from flopwise.errors import WorkloadError
from flopwise.metrics.summary import LatencyStats, RunSummary, delivered_rate, gap_stat
from flopwise.sim.request import Request, visible_steps
from flopwise.sim.timeline import Timeline
from flopwise.specs.sla import SLA

__all__ = ["BoundedRecords", "weighted_stats", "SKETCH_ACCURACY"]

SKETCH_ACCURACY = 0.01
_FIELDS = ("arrival_at", "first_token_at", "last_token_at", "first_scheduled_at")


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
    """One replica's step-to-step gap weights: a difference array over its steps (+1 at a + 1, -1 at b for a request
    that emitted in steps a .. b-1), whose prefix sums count the requests that saw each gap."""

    __slots__ = ("tl", "diff")

    def __init__(self, tl: Timeline):
        self.tl = tl
        self.diff = array("q")

    def add_range(self, a: int, b: int) -> None:
        """A request emitted at steps a .. b-1 (b - a >= 2: at least one gap)."""
        d = self.diff
        if len(d) <= b:
            d.extend(array("q", bytes(8 * max(b + 1 - len(d), len(d)))))
        d[a + 1] += 1
        d[b] -= 1

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


class BoundedRecords:
    """Per-request rows, filled as requests complete (`add`) or fail (`fail`). `itl_stats`: the statistics at which
    the run's SLA bounds ITL (`SLA.itl_stats`), each kept per request (its own gaps at it; NaN: fewer than two
    tokens)."""

    def __init__(self, num_requests: int, itl_stats: tuple[str, ...] = ()):
        n = num_requests
        self.num_requests = n
        self.cols = {f: np.full(n, np.nan) for f in _FIELDS}
        self.itl_stats = itl_stats
        self.itl_at = {stat: np.full(n, np.nan) for stat in itl_stats}
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
            c["arrival_at"], c["first_token_at"], c["last_token_at"], c["first_scheduled_at"], self.input_tokens,
            self.output_tokens, self.preemptions, self.ok, self.replica, self.phases.reshape(-1)))

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
        for stat, col in self.itl_at.items():
            col[rows] = part.itl_at[stat]
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
        for st in part.steps.values():
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
        leg on `tl_tail` after a hand-off at `handoff_at` (disaggregated), else None. `hidden`: opening tokens its
        client receives no text for (`sim.frontend.hidden_tokens`; with a hand-off, the hand-off's token is the
        first of them)."""
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
        loose: list[float] = []  # its gaps between ranges (a preemption, a pause, a hand-off), in token order
        if len(s) == 2:  # one range of steps: the common case
            a, b = s
            if b - a >= 2:
                steps.add_range(a, b)
            n_out = b - a
        else:
            n_out = 0
            for i in range(0, len(s), 2):
                a, b = s[i], s[i + 1]
                if i:  # the gap between two ranges
                    loose.append((delivered[a] - delivered[s[i - 1] - 1]) * 1e3)
                if b - a >= 2:
                    steps.add_range(a, b)
                n_out += b - a
        if tail is not None and shown_handoff is not None:
            first = shown_handoff
            if s:
                loose.insert(0, (delivered[s[0]] - shown_handoff) * 1e3)
            n_out += 1
            last = delivered[s[-1] - 1] if s else shown_handoff
        else:
            first = delivered[s[0]]
            last = delivered[s[-1] - 1]
        self.loose_gaps.extend(loose)
        if self.itl_stats:
            self._request_itl(rid, delivered, s, loose, tail is not None and shown_handoff is not None)
        arrival, first_token, last_token, first_scheduled, inputs, outputs, preemptions, ok, where, phases = \
            self._views
        arrival[rid] = head.arrival_at
        first_token[rid] = first
        last_token[rid] = last
        scheduled = head.first_scheduled_at
        assert scheduled is not None  # it produced tokens, so it was scheduled
        first_scheduled[rid] = scheduled
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

    def _request_itl(self, rid: int, delivered: Any, s: Any, loose: list[float], handed_off: bool) -> None:
        """Request `rid`'s own gaps, in token order as its RequestRecord would hold them (the hand-off's gap, then
        each range's gaps with the gap before the next range between them), at each of `itl_stats`."""
        ends = np.frombuffer(delivered, dtype=float)
        if len(s) == 2 and not handed_off:  # one range of steps: the common case
            gaps = np.diff(ends[s[0]:s[1]]) * 1e3
        else:
            parts: list[np.ndarray] = []
            pending = iter(loose)
            if handed_off and s:
                parts.append(np.array([next(pending)]))
            for i in range(0, len(s), 2):
                if i:
                    parts.append(np.array([next(pending)]))
                parts.append(np.diff(ends[s[i]:s[i + 1]]) * 1e3)
            gaps = np.concatenate(parts) if parts else np.empty(0)
        if gaps.size:
            for stat, col in self.itl_at.items():
                col[rid] = gap_stat(gaps, stat)

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
            values = {"ttft": ttft, "e2e": e2e, "tpot": tpot_all}
            tpot_vllm = np.zeros(n_ok)  # vLLM's goodput: TPOT 0 for one token, ITL gaps not checked
            tpot_vllm[multi] = tpot
            good_vllm = np.ones(n_ok, dtype=bool)
            vllm_values = {"ttft": ttft, "e2e": e2e, "tpot": tpot_vllm}
            for o in sla.objectives:
                if o.metric == "itl":  # its own gaps at the statistic (NaN, fewer than two tokens: no gap to miss)
                    if o.stat not in self.itl_at:
                        raise WorkloadError(f"these fleet records kept no per-request {o.stat} ITL: build them with "
                                            "the SLA they are summarized under")
                    mine = self.itl_at[o.stat][ok]
                    good &= np.isnan(mine) | (mine <= o.limit_ms)
                    continue
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
