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

Per-replica latency percentiles are streamed into DDSketches (`ddsketch`, Datadog's relative-error quantile
sketch, 1% relative accuracy), one per replica and metric, so a replica's report costs O(1) memory whatever the
run's length.
"""

from __future__ import annotations

from array import array
from typing import Any

import numpy as np

from flopwise.errors import WorkloadError
from flopwise.metrics.summary import LatencyStats, RunSummary, delivered_rate
from flopwise.sim.request import Request
from flopwise.sim.timeline import Timeline
from flopwise.specs.sla import SLA

__all__ = ["BoundedRecords", "weighted_stats", "SKETCH_ACCURACY"]

SKETCH_ACCURACY = 0.01
_FIELDS = ("arrival_at", "first_token_at", "last_token_at", "first_scheduled_at", "max_gap_ms")


def _sketch() -> Any:
    """A DDSketch (imported here: only bounded runs need the dependency, so an environment built before it was
    declared still runs everything else)."""
    try:
        from ddsketch import DDSketch
    except ImportError:  # pragma: no cover
        raise WorkloadError("bounded fleet metrics need the ddsketch package (pip install ddsketch, or "
                            "reinstall flopwise); or run with fewer requests") from None
    return DDSketch(SKETCH_ACCURACY)


def weighted_stats(values: np.ndarray, weights: np.ndarray) -> LatencyStats:
    """mean, p50, p90, p95, p99 of `values` each repeated `weights` times (np.percentile's linear method)."""
    keep = weights > 0
    v, w = values[keep], weights[keep].astype(np.int64)
    n = int(w.sum())
    if n == 0:
        return LatencyStats(mean=None, p50=None, p90=None, p95=None, p99=None)
    order = np.argsort(v, kind="stable")
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
    """One replica's step-to-step gap weights (a difference array over its steps)."""

    __slots__ = ("tl", "diff")

    def __init__(self, tl: Timeline):
        self.tl = tl
        self.diff = array("q")

    def add_range(self, a: int, b: int) -> None:
        if b - a < 2:
            return
        d = self.diff
        if len(d) <= b:
            d.extend(array("q", bytes(8 * max(b + 1 - len(d), len(d)))))
        d[a + 1] += 1
        d[b] -= 1

    def gaps(self) -> tuple[np.ndarray, np.ndarray]:
        tl = self.tl
        ends = np.frombuffer(tl.delivered_at if len(tl.delivered_at) else tl.step_end_at, dtype=float)
        if ends.size < 2:
            return np.empty(0), np.empty(0, dtype=np.int64)
        w = np.cumsum(np.frombuffer(self.diff, dtype=np.int64))
        weights = np.zeros(ends.size, dtype=np.int64)
        m = min(w.size, ends.size)
        weights[:m] = w[:m]
        return np.diff(ends) * 1e3, weights[1:]


class BoundedRecords:
    """Per-request rows, filled as requests complete (`add`) or fail (`fail`)."""

    def __init__(self, num_requests: int):
        n = num_requests
        self.num_requests = n
        self.cols = {f: np.full(n, np.nan) for f in _FIELDS}
        self.input_tokens = np.zeros(n, dtype=np.int64)
        self.output_tokens = np.zeros(n, dtype=np.int64)
        self.preemptions = np.zeros(n, dtype=np.int64)
        self.ok = np.zeros(n, dtype=bool)
        self.error_kind: dict[int, str] = {}
        self.phases = np.full((n, 5), np.nan)
        self.num_prompt_tokens = 0
        self.num_cached_tokens = 0
        self.steps: dict[int, _Steps] = {}
        self.loose_gaps: list[float] = []
        self.sketches: dict[int, dict[str, Any]] = {}

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
            handoff_at: float | None, replica: int) -> None:
        """A completed request: `head` its first leg (prompt computed there) on `tl_head`; `tail` its decode
        leg on `tl_tail` after a hand-off at `handoff_at` (disaggregated), else None."""
        c = self.cols
        self.num_prompt_tokens += head.num_prompt_tokens
        self.num_cached_tokens += head.num_cached_tokens
        leg, tl = (tail, tl_tail) if tail is not None else (head, tl_head)
        assert tl is not None and leg is not None
        ends = tl.step_end_at
        delivered = tl.delivered_at if len(tl.delivered_at) else ends
        s = leg.token_steps
        steps = self._steps(tl)
        max_gap = 0.0
        prev_last = -1
        for i in range(0, len(s), 2):
            a, b = s[i], s[i + 1]
            if prev_last >= 0:  # the gap between two ranges
                g = (delivered[a] - delivered[prev_last]) * 1e3
                self.loose_gaps.append(g)
                if g > max_gap:
                    max_gap = g
            if b - a >= 2:
                steps.add_range(a, b)
                g = float(np.diff(np.frombuffer(delivered, dtype=float)[a:b]).max()) * 1e3
                if g > max_gap:
                    max_gap = g
            prev_last = b - 1
        n_out = len(s) // 2 and sum(s[i + 1] - s[i] for i in range(0, len(s), 2))
        if tail is not None:
            assert handoff_at is not None
            first = handoff_at
            if s:
                g = (delivered[s[0]] - handoff_at) * 1e3
                self.loose_gaps.append(g)
                max_gap = max(max_gap, g)
            n_out += 1
            last = delivered[s[-1] - 1] if s else handoff_at
        else:
            first = delivered[s[0]]
            last = delivered[s[-1] - 1]
        c["arrival_at"][rid] = head.arrival_at
        c["first_token_at"][rid] = first
        c["last_token_at"][rid] = last
        if head.first_scheduled_at is not None:
            c["first_scheduled_at"][rid] = head.first_scheduled_at
        c["max_gap_ms"][rid] = max_gap
        self.input_tokens[rid] = head.num_prompt_tokens
        self.output_tokens[rid] = n_out
        self.preemptions[rid] = head.num_preemptions + (tail.num_preemptions if tail is not None else 0)
        self.ok[rid] = True
        e_ms = (last - head.arrival_at) * 1e3
        t_ms = (first - head.arrival_at) * 1e3
        step_end_last = ends[s[-1] - 1] if s else first
        scheduled = head.first_scheduled_at
        assert scheduled is not None  # it produced tokens, so it was scheduled
        to_first = (ends[s[0]] if tail is None else first) - scheduled
        after = step_end_last - (ends[s[0]] if tail is None else first)
        self.phases[rid] = np.array([head.engine_arrival_at - head.arrival_at, scheduled - head.engine_arrival_at,
                                     to_first, after, last - step_end_last], dtype=float) * 1e3
        sk = self.sketches.get(replica)
        if sk is None:
            sk = self.sketches[replica] = {k: _sketch() for k in ("ttft_ms", "e2e_ms")}
        sk["ttft_ms"].add(max(t_ms, 1e-9))
        sk["e2e_ms"].add(max(e_ms, 1e-9))

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
            delivered_request_rate=delivered_rate([float(a) for a in arrival if not np.isnan(a)]), sla=sla,
            num_good=g, num_good_vllm=gv)

    def replica_percentiles(self, replica: int) -> dict[str, float | None]:
        sk = self.sketches.get(replica)
        if sk is None:
            return {"ttft_ms_p50": None, "ttft_ms_p95": None, "e2e_ms_p95": None}
        return {"ttft_ms_p50": sk["ttft_ms"].get_quantile_value(0.5),
                "ttft_ms_p95": sk["ttft_ms"].get_quantile_value(0.95),
                "e2e_ms_p95": sk["e2e_ms"].get_quantile_value(0.95)}

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
