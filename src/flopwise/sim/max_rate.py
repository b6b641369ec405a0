"""The highest request rate one replica sustains within an SLA: the capacity figure a planner needs.

Every probe is judged by the sustained-rate rule (`steady.py`: after a warm-up, over a window long enough in
requests and in time, SLA objectives met and no growing backlog), and the answer never exceeds the closed-form
capacity ceiling (`cost.capacity`): a rate above it only passes in a run too short to see the queue grow.

Search (on the probe's score s(r) = max(SLA ratio, backlog score), which passes at <= 1 and grows with r):
1. Probe `start` (default 0.9 x the closed-form capacity estimate). While probes pass, step up by s^-1/2 (at
   least 5%), never past the ceiling: passing at the ceiling, the answer is the ceiling (`capped`). While they
   fail, step down by s^-1/2 (at most 0.9x, at least 0.3x) until one passes; below ceiling / 64 no rate does
   (InfeasibleError, naming the objectives that failed).
2. Shrink the bracket [passing lo, failing hi] by interpolating log s linearly in r (regula falsi, kept at
   least 20% inside the bracket) until (hi - lo) / lo <= `rate_tolerance` or `max_probes` are spent.
3. The answer is lo, the highest rate that passed. Its interval (a delta method): each bootstrap replicate b
   of the two bracketing probes (the same batch indices for both: `steady.py`) gives the level of log s at
   the bracket's middle; divided by the local slope d log s / dr (least squares over the probes near the
   bracket) it is a crossing rate; the interval is the replicates' central `confidence` range, widened to
   contain lo, then on each side by the window's own load, which the bootstrap cannot see (`steady.py`): in log
   space, in quadrature with z * sqrt(load_cv2 / n), never above the ceiling. The bootstrap's part alone is kept
   as `paired_interval`: candidates probed on one stream share that load, so the planner compares them on it.
Without a TTFT or E2E objective (an offline job: `--sla none`, or TPOT bounds only) queueing costs nothing, so
the sustained rate is the engine's saturated service rate: all requests are sent at once (the engine runs at
its largest batch) and the rate is the completions per second over a window of completions after the first
batch-full, with batch-means bootstrap replicates for its interval, widened by the window's load as above
(`saturated_rate`). If a TPOT objective
fails there, the rate search above runs instead (a smaller batch may meet it).
Every probe sees the same request stream at a different rate (`workload_at(rate, n)` with one seed: lengths
and unit-rate arrival gaps are common random numbers), so s(r) is close to monotone.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from flopwise.cost.capacity import Bounds, bounds
from flopwise.cost.memory import max_sequences
from flopwise.errors import InfeasibleError
from flopwise.metrics.summary import summarize
from flopwise.sim.config import SimConfig
from flopwise.sim.simulate import RunResult, simulate
from flopwise.sim.steady import Probe, ProbeSize, SteadyRule, load_cv2, measure
from flopwise.specs.deployment import Deployment
from flopwise.specs.sla import SLA
from flopwise.workload.spec import Workload

__all__ = ["MaxRate", "find_max_rate", "capacity_bounds", "probe_rate", "saturated_rate", "RATE_TOLERANCE"]

WorkloadAt = Callable[[float, int], Workload]
Runner = Callable[[Workload], RunResult]  # simulates a stream on something other than one deployment (a fleet)
_WINDOW_KEYS = ("ttft_ms", "tpot_ms", "itl_ms", "e2e_ms", "queue_ms", "itl_per_token_ms", "goodput", "sla_attainment",
                "sla_attainment_vllm",
                "sla_objectives_met", "sla_met")
RATE_TOLERANCE = 0.04  # both planners stop when the bracket (hi - lo) / lo is this narrow
CEILING_SAMPLE = 8_000  # requests whose mean lengths price the ceiling (a sample mean within ~2% of the law's)


@dataclass(frozen=True, slots=True, kw_only=True)
class MaxRate:
    rate: float  # requests/s: the highest probed rate the rule accepted (<= upper_bound)
    result: RunResult  # the run at that rate
    upper_bound: float  # the closed-form capacity ceiling (requests/s)
    probes: tuple[tuple[float, bool], ...]  # (rate, passed) in probe order
    interval: tuple[float, float] = (0.0, 0.0)  # the rate's confidence interval (requests/s)
    # the bootstrap's part of it alone: what separates candidates probed on the same stream (module docstring)
    paired_interval: tuple[float, float] = (0.0, 0.0)
    capped: bool = False  # the rule still held at the ceiling: the answer is the ceiling
    probe: Probe | None = field(default=None, repr=False)  # the accepted probe (window statistics)
    trail: tuple[Probe, ...] = field(default=(), repr=False)  # every probe, in order

    def summary(self) -> dict[str, object]:
        """The run at the sustained rate as users of it see it: engine state and time breakdown over the whole run,
        latencies and SLA figures over the measured window (after the warm-up, before the drain), throughput and
        goodput at the sustained rate (rate x the window's tokens per request and SLA attainment)."""
        out = self.result.summary()
        if self.probe is not None:
            w = self.probe.summary.to_dict()
            for k in _WINDOW_KEYS:
                if k in w:
                    out[k] = w[k]
            # rates at the sustained rate, per request as the window's requests ran: the whole run's throughput
            # (warm-up ramp and drain included) or the window's own (its requests over the span to the last one's
            # end) would stand beside the sustained rate and disagree with it
            done, sent = w.get("num_completed") or 0, self.probe.num_window_requests
            if done and w.get("duration_s"):
                per_request = w["duration_s"] / done  # tokens per completed request, as rates over the window
                completed = self.rate * min(1.0, done / sent)  # the window's failed requests are not served
                out["request_throughput"] = completed
                for k in ("output_tokens_per_s", "total_tokens_per_s"):
                    out[k] = completed * w[k] * per_request
                for k, share in (("goodput", "sla_attainment"), ("goodput_vllm", "sla_attainment_vllm")):
                    if w.get(share) is not None:
                        out[k] = self.rate * w[share]
            out["window"] = {"num_requests": self.probe.num_window_requests, "arrivals_s": list(self.probe.window_s)}
        return out

    def to_dict(self) -> dict[str, object]:
        """The `max_rate` block of `simulate --find-max-rate --json`."""
        lo, hi = self.interval
        return {"request_rate": self.rate, "upper_bound": self.upper_bound,
                "request_rate_interval": [lo, hi], "capped_by_ceiling": self.capped,
                "probes": [{"request_rate": r, "sla_met": ok} for r, ok in self.probes],
                "probe_details": [p.to_dict() for p in self.trail],
                "window_summary": self.probe.summary.to_dict() if self.probe is not None else None}


def capacity_bounds(dep: Deployment, workload: Workload, sla: SLA, prefix_caching: bool = True) -> Bounds:
    """The closed-form bounds at the stream's mean lengths (and its shared-prefix share when caching)."""
    reqs = workload.requests
    mean_in = sum(r.input_tokens for r in reqs) / len(reqs)
    mean_out = sum(r.output_tokens for r in reqs) / len(reqs)
    cached = sum(r.prefix_tokens for r in reqs) / max(1, sum(r.input_tokens for r in reqs))
    return bounds(dep, sla, max(1, round(mean_in)), max(1, round(mean_out)), cached if prefix_caching else 0.0)


def probe_rate(dep: Deployment, workload_at: WorkloadAt, sla: SLA, config: SimConfig | None, rule: SteadyRule,
               rate: float, size: ProbeSize, run: Runner | None = None) -> Probe:
    """Simulate one rate on a stream of `size` (on `dep`, or by `run`: a fleet) and judge it by the rule."""
    wl = workload_at(rate, size.num_requests)
    res = run(wl) if run is not None else simulate(dep, wl, config, sla=sla)
    return measure(res, sla, rate, size, rule)


def _crossing(lo: float, s_lo: float, hi: float, s_hi: float) -> float:
    """Where log s crosses 0 on the line through (lo, log s_lo) and (hi, log s_hi)."""
    a, b = math.log(s_lo), math.log(s_hi)
    return lo + (0.0 - a) * (hi - lo) / (b - a) if b != a else (lo + hi) / 2


def find_max_rate(dep: Deployment, workload_at: WorkloadAt, sla: SLA, config: SimConfig | None = None, *,
                  rule: SteadyRule | None = None, ceiling: float | None = None, size: ProbeSize | None = None,
                  e2e_s: float | None = None, start: float | None = None, rate_tolerance: float = RATE_TOLERANCE,
                  max_probes: int = 9, run: Runner | None = None) -> MaxRate:
    """`workload_at(rate, num_requests)` builds the request stream (one seed for every call). `ceiling`
    defaults to the closed-form bound of the stream (`cost.capacity`), `size` to the rule's size at the
    capacity estimate, `e2e_s` to the bounds' latency near capacity (a probe above the design rate of `size`
    is sized for its own rate); `start` is the first rate probed (a previous answer, when refining). `run`:
    simulate each probe with it instead of on `dep` (a fleet; give its `ceiling`, `dep` is then the deployment
    whose bounds size the probes)."""
    rule = rule or SteadyRule()
    config = config or SimConfig()
    if dep.batch_from_workload:  # the benchmark's knobs for this stream, fixed for the bounds and every probe
        sample = workload_at(math.inf, CEILING_SAMPLE).requests
        sized = dep.for_workload([r.input_tokens for r in sample], [r.output_tokens for r in sample],
                                 chunked_prefill=config.chunked_prefill(dep))
        dep = sized.with_knobs(max_num_seqs=sized.max_num_seqs, max_num_batched_tokens=sized.max_num_batched_tokens)
    if run is None and not any(o.metric in ("ttft", "e2e") for o in sla.objectives):
        sat = saturated_rate(dep, workload_at, sla, config, rule, ceiling=ceiling)
        if sat is not None:
            return sat
    default_start = 0.8 * ceiling if ceiling is not None else 0.0
    ttft = sla.limit("ttft")
    ttft_s = ttft / 1e3 if ttft is not None else None
    if ceiling is None or size is None or e2e_s is None:
        pc = (config.enable_prefix_caching if config.enable_prefix_caching is not None
              else dep.engine.enable_prefix_caching)
        b = capacity_bounds(dep, workload_at(math.inf, CEILING_SAMPLE), sla, pc)
        n_rep = dep.replicas if run is None else 1  # the bounds are one replica's; `dep` runs `replicas` of them
        if ceiling is None:
            ceiling, default_start = n_rep * b.max_rate_ceiling, 0.9 * n_rep * b.max_rate_estimate
        e2e_s = b.e2e_estimate_s if e2e_s is None else e2e_s
        if size is None:
            size = rule.size(min(ceiling, n_rep * b.max_rate_estimate), e2e_s, ttft_s)
    trail: list[Probe] = []

    def probe(rate: float) -> Probe:
        p = probe_rate(dep, workload_at, sla, config, rule, rate, size.at_least(rule.size(rate, e2e_s, ttft_s)), run)
        trail.append(p)
        return p

    def done(lo: Probe, hi: Probe | None, capped: bool) -> MaxRate:
        paired = _interval(lo, hi, ceiling, rule, trail)
        return MaxRate(rate=lo.rate, result=lo.result, upper_bound=ceiling, probes=tuple((p.rate, p.ok) for p in trail),
                       interval=_widen(lo, rule, ceiling, *paired), paired_interval=paired, capped=capped, probe=lo,
                       trail=tuple(trail))

    first = probe(min(start if start is not None else default_start, ceiling))
    lo: Probe | None = first if first.ok else None
    hi: Probe | None = None if first.ok else first
    while hi is None:  # passing: step up by s^-1/2 (at least 5%), up to the ceiling
        assert lo is not None
        if lo.rate >= ceiling * (1 - 1e-9):
            return done(lo, None, True)
        if len(trail) >= max_probes:
            return done(lo, None, False)
        p = probe(min(ceiling, lo.rate * max(1.05, lo.score ** -0.5)))
        if p.ok:
            lo = p
        else:
            hi = p
    while lo is None:  # failing: step down by s^-1/2 (0.3x to 0.9x)
        nxt = hi.rate * min(0.9, max(0.3, hi.score ** -0.5))
        if nxt < ceiling / 64:
            met = hi.summary.sla_objectives_met or {}
            failed = ", ".join(k for k, v in met.items() if not v) or "backlog grows"
            raise InfeasibleError(f"the SLA fails even at {hi.rate:.3g} req/s ({failed}); relax it or use a faster "
                                  "deployment (more GPUs, a smaller weight format)")
        p = probe(nxt)
        if p.ok:
            lo = p
        else:
            hi = p
    while hi is not None and (hi.rate - lo.rate) / lo.rate > rate_tolerance and len(trail) < max_probes:
        d = hi.rate - lo.rate
        r = min(max(_crossing(lo.rate, lo.score, hi.rate, hi.score), lo.rate + 0.2 * d), hi.rate - 0.2 * d)
        p = probe(r)
        if p.ok:
            lo = p
        else:
            hi = p
    return done(lo, hi, False)


def saturated_rate(dep: Deployment, workload_at: WorkloadAt, sla: SLA, config: SimConfig, rule: SteadyRule, *,
                   ceiling: float | None = None) -> MaxRate | None:
    """The saturated service rate (module docstring), or None when the SLA's objectives fail at saturation."""
    pc = config.enable_prefix_caching if config.enable_prefix_caching is not None else dep.engine.enable_prefix_caching
    b = capacity_bounds(dep, workload_at(math.inf, CEILING_SAMPLE), sla, pc)
    ceiling = dep.replicas * b.max_rate_ceiling if ceiling is None else ceiling  # one replica's bound, x replicas
    reqs = workload_at(math.inf, CEILING_SAMPLE).requests
    mean_len = sum(r.input_tokens + r.output_tokens for r in reqs) / len(reqs)
    # the batch when saturated, on every replica
    full = dep.replicas * max(1, min(dep.running_limit, max_sequences(dep, round(mean_len))))
    size = rule.size(ceiling, b.e2e_estimate_s)
    warm, window = max(size.warmup_requests, full), size.window_requests
    n = warm + window + full  # the window's completions happen while the engine is still full
    res = simulate(dep, workload_at(math.inf, n), config, sla=sla)
    order = sorted(res.records, key=lambda r: r.token_times[-1] if r.ok else math.inf)
    done = order[warm:warm + window]
    ends = np.array([r.token_times[-1] for r in done if r.ok])
    if ends.size < 2 * rule.num_batches or not np.isfinite(ends).all():
        return None
    k = rule.num_batches
    parts = np.array_split(ends, k)
    counts = np.array([len(p) for p in parts], float)
    starts = np.concatenate([[order[warm - 1].token_times[-1] if warm else ends[0]], [p[-1] for p in parts[:-1]]])
    spans = np.array([p[-1] for p in parts]) - starts
    mu = float(counts.sum() / spans.sum())
    rng = np.random.default_rng(rule.seed)
    picks = rng.integers(k, size=(rule.num_bootstrap, k))
    boot = counts[picks].sum(axis=1) / np.maximum(spans[picks].sum(axis=1), 1e-12)
    summary = summarize(done, sla)
    ratio = max((summary.latency(o.metric).get(o.stat) or 0.0) / o.limit_ms for o in sla.objectives) \
        if sla.objectives else 0.0
    if ratio > 1.0:
        return None
    rate = min(mu, ceiling)
    tail = (1 - rule.confidence) / 2 * 100
    lo, hi = (float(v) for v in np.percentile(boot, [tail, 100 - tail]))
    paired = (min(lo, rate), min(ceiling, max(hi, rate)))
    probe = Probe(rate=rate, num_requests=n, window_s=(float(starts[0]), float(ends[-1])),
                  num_window_requests=len(done), ratio=ratio, load_cv2=load_cv2(done),
                  values={str(o): summary.latency(o.metric).get(o.stat) for o in sla.objectives},
                  backlog_growth_per_s=0.0, backlog_growth_se=0.0, backlog_tolerance=rule.backlog_tolerance,
                  z=rule.z, ratio_samples=np.full(rule.num_bootstrap, ratio), summary=summary, result=res)
    return MaxRate(rate=rate, result=res, upper_bound=ceiling, probes=((math.inf, True),),
                   interval=_widen(probe, rule, ceiling, *paired), paired_interval=paired, capped=mu >= ceiling,
                   probe=probe, trail=(probe,))


def _slope(trail: tuple[Probe, ...] | list[Probe], lo: Probe, hi: Probe) -> float:
    """d log(score) / d rate near the answer: least squares over the probes within [0.7 lo, 1.3 hi] whose score
    is above the floor (at least lo and hi)."""
    pts = [(p.rate, math.log(p.score)) for p in trail
           if 0.7 * lo.rate <= p.rate <= 1.3 * hi.rate and p.score > 0.05] or [(lo.rate, math.log(lo.score))]
    if len(pts) < 2:
        pts.append((hi.rate, math.log(hi.score)))
    r = np.array([x for x, _ in pts])
    y = np.array([v for _, v in pts])
    dr = r - r.mean()
    denom = float((dr * dr).sum())
    return float((dr * (y - y.mean())).sum() / denom) if denom > 0 else 0.0


def _interval(lo: Probe, hi: Probe | None, ceiling: float, rule: SteadyRule,
              trail: tuple[Probe, ...] | list[Probe] = ()) -> tuple[float, float]:
    """The bootstrap's part of the rate's confidence interval: the spread of log(score) at the bracketing probes,
    turned into rates by the local slope of log(score) over rate (a delta method). Capped at the ceiling, the
    interval reaches below it only as far as the share of replicates that fail there says. (`_widen` adds the
    window's load.)"""
    tail = (1 - rule.confidence) / 2 * 100
    if hi is None:
        logs = np.log(lo.score_samples())
        return (float(min(lo.rate, lo.rate * math.exp(min(0.0, -np.percentile(logs, 100 - tail))))), lo.rate)
    slope = _slope(trail or (lo, hi), lo, hi)
    if not slope > 0:
        return (lo.rate, hi.rate)
    # each replicate b: the level of log(score) at the bracket's middle, from both ends, crossed at that slope
    level = (np.log(lo.score_samples()) + np.log(hi.score_samples())) / 2
    mid = (lo.rate + hi.rate) / 2
    cross = np.clip(mid - level / slope, lo.rate / 2, min(ceiling, 2 * hi.rate))
    q_lo, q_hi = np.percentile(cross, [tail, 100 - tail])
    return (float(min(q_lo, lo.rate)), float(min(max(q_hi, lo.rate), ceiling)))


def _widen(lo: Probe, rule: SteadyRule, ceiling: float, a: float, b: float) -> tuple[float, float]:
    """The interval [a, b] around lo's rate r (a <= r <= b, a > 0) widened by the window's load: in log space,
    each side's log(r / a) or log(b / r) in quadrature with e = z * sqrt(load_cv2 / n) (a stream whose load ran
    a fraction e denser crosses the SLA that much lower: `steady.py`), so the bottom stays above 0; the top never
    above the ceiling."""
    return widen_log(lo.rate, a, b, rule.z * math.sqrt(lo.load_cv2 / max(1, lo.num_window_requests)), ceiling)


def widen_log(point: float, a: float, b: float, e: float, top: float = math.inf) -> tuple[float, float]:
    """[a, b] around `point` (a <= point <= b) widened in log space: each side's log ratio in quadrature with `e`
    (a relative error the interval did not count), the top never above `top`."""
    down = math.log(point / a) if 0 < a < point else 0.0
    up = math.log(b / point) if b > point else 0.0
    return (point * math.exp(-math.hypot(down, e)), min(top, point * math.exp(math.hypot(up, e))))
