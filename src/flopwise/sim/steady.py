"""When does a request rate count as sustained? The rule `find_max_rate` (and so the planner) applies to every
probe, and the statistics it reports with it.

A run starts empty, so its first requests see a small batch and no queue, and its last ones a draining engine;
a short run at an overload ends before the queue has grown. So a probe is judged on a window of requests, by
their index in the stream (arrival order):

    index  0 ....... warm-up ....... | ............. window ............. | .... tail .... | drain
           sent before the window      requests measured                    sent after it:   no arrivals
                                                                            the window's
                                                                            requests finish
                                                                            under load

sized for a rate r (`size`; the probes of one search, and the candidates of one plan, share one size, so that
the same requests are measured at every rate and on every deployment):

    warm-up = max(min_warmup_requests, r * max(min_warmup_s, warmup_e2e * E2E))
    window  = effort * clamp(r * max(min_window_s, window_e2e * E2E, TTFT limit / detect_overload),
                             min_window_requests, max_window_requests)
    tail    = max(min_tail_requests, r * tail_e2e * E2E)

with E2E one request's latency near capacity (`cost.capacity.Bounds.e2e_estimate_s`: the batch fills in about
one E2E). An overload of `detect_overload` (10%) makes the queue's wait grow by 0.1 s per second, so a window
of TTFT limit / 0.1 is long enough for it to break a TTFT bound. A search sizes every probe for the larger
of its design rate and the probe's own rate (`ProbeSize.at_least`): at a lower rate the same counts span more
time, so the time minimums hold at every rate probed. The probe passes
when both hold on the window's requests:

1. every SLA objective (p95 TTFT, ...) is within its limit: ratio = max over objectives of value / limit <= 1;
2. the backlog does not grow: the number of requests waiting for their first token (arrived, not yet
   prefilled: the API server's queue, the scheduler's waiting queue and prompts being chunked), seen by each
   arrival in the window, is averaged over `num_batches` consecutive batches (batch means, so that one burst
   does not count as growth); the least-squares slope of those means over time (requests/s) fails the probe
   when it exceeds `backlog_tolerance * r` and is significant (more than z standard errors of the slope at
   the rule's confidence). A stable queue fluctuates around a small mean; an overloaded one grows at the rate
   by which arrivals exceed service. (The count of all requests in the system would be the textbook choice,
   but with heavy-tailed output lengths it keeps rising for several E2E after the start even when stable,
   M/G/inf-like; an engine that lets its batch grow instead of queueing shows the overload in TPOT, and in
   this count once the batch is full.)
The probe's score is the SLA ratio, or max(ratio, slope / (backlog_tolerance * r)) when the backlog fails:
it passes at <= 1.

Uncertainty: the window's requests are cut into `num_batches` contiguous batches (neighbours in time share a
queue, so single requests are not independent, batches nearly are) and resampled with replacement,
`num_bootstrap` times (a block bootstrap): each resample gives the objectives' percentiles, hence a ratio.
The draws are seeded by the rule's `seed` alone, so two deployments probed on the same request stream are
resampled with the same batch indices (common random numbers down to the bootstrap).
What the batches cannot show is the stream's own load: the queue and the running batch integrate every arrival
and every token, so a window whose requests came denser or larger than the rate's average raises the level of
all its batches together. Over the window's n requests the offered work's relative variance is
(CV_gap^2 + CV_work^2) / n (a compound renewal process: CV_gap of its inter-arrival gaps, CV_work of the requests'
input + output tokens), `Probe.load_cv2` / n; a stream whose load runs a fraction e above its rate crosses an SLA
at a rate e lower, so `find_max_rate` widens its interval by that much (`max_rate._widen`, for the rate search
and the saturated rate alike). Where a TTFT objective binds the probe, the work is each request's prompt tokens
squared instead: a wait grows with lambda E[S^2] (Pollaczek-Khinchine), S a request's prefill time, so a window
with a few more long prompts queues the others longer than its token count says (40 seeds of the chat workload at
a 1,600-request window: the answer correlates -0.83 with the window's squared prompt tokens per second, -0.73 with
its tokens per second; benchmarks/interval_coverage.py).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from statistics import NormalDist
from typing import Any

import numpy as np

from flopwise.errors import WorkloadError
from flopwise.metrics.summary import RequestRecord, RunSummary, summarize
from flopwise.sim.simulate import RunResult
from flopwise.specs.sla import SLA, Objective

__all__ = ["SteadyRule", "ProbeSize", "Probe", "LOAD_WORKS", "load_cv2", "measure"]

LOAD_WORKS = ("tokens", "prompt_tokens_squared")  # `load_cv2`'s work per request, indexed by `waiting`

_FLOOR = 1e-3  # scores below this are "far from any limit" (log-interpolation needs a positive number)


@dataclass(frozen=True, slots=True, kw_only=True)
class SteadyRule:
    """The sustained-rate rule (module docstring). `effort` scales the window (adaptive effort: more requests
    for candidates whose intervals overlap the leader's)."""

    warmup_e2e: float = 0.75
    min_warmup_s: float = 2.0
    min_warmup_requests: int = 50
    window_e2e: float = 1.0
    min_window_s: float = 6.0
    min_window_requests: int = 400
    max_window_requests: int = 3000
    tail_e2e: float = 0.5
    min_tail_requests: int = 20
    detect_overload: float = 0.1
    backlog_tolerance: float = 0.05
    num_batches: int = 10
    num_bootstrap: int = 150
    confidence: float = 0.9
    effort: float = 1.0
    seed: int = 0

    def __post_init__(self) -> None:
        if not self.effort > 0:
            raise WorkloadError(f"effort must be > 0, got {self.effort}")
        if self.num_batches < 2 or self.min_window_requests < 2 * self.num_batches:
            raise WorkloadError("the window needs at least 2 batches of at least 2 requests")
        if not 0.5 < self.confidence < 1:
            raise WorkloadError(f"confidence must be in (0.5, 1), got {self.confidence}")

    def at_effort(self, effort: float) -> SteadyRule:
        return replace(self, effort=effort)

    def size(self, rate: float, e2e_s: float, ttft_limit_s: float | None = None) -> ProbeSize:
        """The request counts of a probe sized for `rate` (module docstring); `ttft_limit_s`: the SLA's TTFT
        bound, if any."""
        if not rate > 0 or math.isinf(rate):
            raise WorkloadError(f"a probe needs a finite rate > 0, got {rate}")
        warm = max(self.min_warmup_requests, rate * max(self.min_warmup_s, self.warmup_e2e * e2e_s))
        detect = ttft_limit_s / self.detect_overload if ttft_limit_s else 0.0
        want = rate * max(self.min_window_s, self.window_e2e * e2e_s, detect)
        window = self.effort * min(max(want, self.min_window_requests), self.max_window_requests)
        tail = max(self.min_tail_requests, rate * self.tail_e2e * e2e_s)
        return ProbeSize(warmup_requests=math.ceil(warm), window_requests=math.ceil(window),
                         tail_requests=math.ceil(tail))

    @property
    def z(self) -> float:
        """The two-sided normal quantile of `confidence` (1.645 at 90%)."""
        return NormalDist().inv_cdf(0.5 + self.confidence / 2)


@dataclass(frozen=True, slots=True, kw_only=True)
class ProbeSize:
    """Request counts by index: the first `warmup_requests`, the measured `window_requests`, then `tail_requests`
    more sent so that the window finishes under load."""

    warmup_requests: int
    window_requests: int
    tail_requests: int

    @property
    def num_requests(self) -> int:
        return self.warmup_requests + self.window_requests + self.tail_requests

    def window(self, records: list[RequestRecord]) -> list[RequestRecord]:
        """The measured window of a probe's records (in request-id order): those after the warm-up."""
        return records[self.warmup_requests:self.warmup_requests + self.window_requests]

    def scaled(self, effort: float) -> ProbeSize:
        """The same warm-up and tail with the window scaled by `effort`."""
        return replace(self, window_requests=max(2, math.ceil(self.window_requests * effort)))

    def at_least(self, other: ProbeSize) -> ProbeSize:
        """Each count the larger of the two."""
        return ProbeSize(warmup_requests=max(self.warmup_requests, other.warmup_requests),
                         window_requests=max(self.window_requests, other.window_requests),
                         tail_requests=max(self.tail_requests, other.tail_requests))


@dataclass(frozen=True, slots=True, kw_only=True)
class Probe:
    """One rate, judged by the rule. `ratio`: max over the SLA's objectives of value / limit on the window
    (0 without objectives); `values`: each objective's value there (ms); `ratio_samples`: its bootstrap
    replicates; `backlog_growth_per_s`: the batch-means slope of requests in the system."""

    rate: float
    num_requests: int
    window_s: tuple[float, float]
    num_window_requests: int
    ratio: float
    values: dict[str, float | None]
    backlog_growth_per_s: float
    backlog_growth_se: float
    backlog_tolerance: float
    z: float
    ratio_samples: np.ndarray = field(repr=False, compare=False)
    summary: RunSummary = field(repr=False, compare=False)  # the window's requests (metrics.summarize)
    # CV^2 of the window's inter-arrival gaps + CV^2 of its requests' input + output tokens, or of their prompt
    # tokens squared where a TTFT objective binds the probe (module docstring, `load_cv2`)
    load_cv2: float
    load_work: str = "tokens"  # the work load_cv2 measured: "tokens" or "prompt_tokens_squared" (LOAD_WORKS)
    result: RunResult = field(repr=False, compare=False)

    @property
    def backlog_score(self) -> float:
        return max(0.0, self.backlog_growth_per_s) / (self.backlog_tolerance * self.rate)

    @property
    def sla_ok(self) -> bool:
        return self.ratio <= 1.0

    @property
    def backlog_ok(self) -> bool:
        """Fails only on growth both above the tolerance and significant."""
        return self.backlog_score <= 1.0 or self.backlog_growth_per_s <= self.z * self.backlog_growth_se

    @property
    def ok(self) -> bool:
        return self.sla_ok and self.backlog_ok

    @property
    def _backlog_part(self) -> float:
        return 0.0 if self.backlog_ok else self.backlog_score

    @property
    def score(self) -> float:
        """The SLA ratio, or the backlog score where the backlog fails: the probe passes at <= 1."""
        return max(self.ratio, self._backlog_part, _FLOOR)

    def score_samples(self) -> np.ndarray:
        """Bootstrap replicates of the score (the backlog part is a point estimate: resampling would scramble
        the time order it is measured on)."""
        samples: np.ndarray = np.maximum(np.maximum(self.ratio_samples, self._backlog_part), _FLOOR)
        return samples

    def to_dict(self) -> dict[str, Any]:
        return {"request_rate": self.rate, "sla_met": self.sla_ok, "sustained": self.ok,
                "num_requests": self.num_requests, "num_window_requests": self.num_window_requests,
                "window_s": list(self.window_s), "sla_ratio": self.ratio,
                "backlog_growth_per_s": self.backlog_growth_per_s, "backlog_growth_se": self.backlog_growth_se,
                "backlog_ok": self.backlog_ok, "objectives_ms": self.values, "load_cv2": self.load_cv2,
                "load_work": self.load_work}


def _backlog_slope(records: list[RequestRecord], window: list[RequestRecord],
                   num_batches: int) -> tuple[float, float]:
    """Least-squares slope (requests/s) of the batch means of the number of requests waiting for their first
    token, seen by each arrival of the window (PASTA: Poisson arrivals see time averages), and its standard
    error."""
    if len(window) < 2 * num_batches or num_batches < 3:
        return 0.0, 0.0
    ends = np.sort(np.fromiter((r.token_times[0] if r.ok else math.inf for r in records), float, len(records)))
    arrivals = np.sort(np.fromiter((r.arrival_at for r in records), float, len(records)))
    at = np.fromiter((r.arrival_at for r in window), float, len(window))
    in_system = np.searchsorted(arrivals, at, "right") - np.searchsorted(ends, at, "right")
    t = np.array([b.mean() for b in np.array_split(at, num_batches)])
    n = np.array([b.mean() for b in np.array_split(in_system.astype(float), num_batches)])
    dt = t - t.mean()
    denom = float((dt * dt).sum())
    if denom <= 0:
        return 0.0, 0.0
    slope = float((dt * (n - n.mean())).sum() / denom)
    resid = n - n.mean() - slope * dt
    return slope, float(np.sqrt((resid * resid).sum() / (num_batches - 2) / denom))


def _cv2(x: np.ndarray) -> float:
    """Squared coefficient of variation (population variance / mean^2; 0 for fewer than two values or a zero
    mean)."""
    if len(x) < 2:
        return 0.0
    m = float(x.mean())
    return float(x.var()) / (m * m) if m > 0 else 0.0


def load_cv2(window: list[RequestRecord], waiting: bool = False) -> float:
    """The window's CV_gap^2 + CV_work^2 (module docstring): the gaps between its arrivals (in time order, whatever
    the records' order) and each request's work, its input + output tokens, or, where a TTFT objective binds
    (`waiting`), its prompt tokens squared (Pollaczek-Khinchine: the mean wait grows with lambda E[S^2], S a
    request's prefill time, about proportional to its prompt). An E2E bound keeps the tokens: its p95 is mostly
    decode (40 chat seeds under p95_e2e <= 8 s: tokens cover the mean in 38, squares in 40 at 1.67x the width).
    The squares are dominated by a window's longest prompts: a trace with a rare prompt far longer than the rest
    gets a wide interval. Where two objectives bind nearly alike, the one a hair higher at the probe decides."""
    arrivals = np.sort(np.fromiter((r.arrival_at for r in window), float, len(window)))
    if waiting:
        work = np.fromiter((float(r.input_tokens) ** 2 for r in window), float, len(window))
    else:
        work = np.fromiter((r.input_tokens + r.output_tokens for r in window), float, len(window))
    return _cv2(np.diff(arrivals)) + _cv2(work)


def _per_request(window: list[RequestRecord], metric: str) -> np.ndarray:
    """One value per request of the window (ms): NaN where undefined (TPOT of a one-token output), +inf for a
    failed request (it misses every bound)."""
    def one(r: RequestRecord) -> float:
        if not r.ok:
            return math.inf
        v = r.ttft_ms if metric == "ttft" else r.e2e_ms if metric == "e2e" else r.tpot_ms
        return math.nan if v is None else v
    return np.fromiter((one(r) for r in window), float, len(window))


def _row_stat(mat: np.ndarray, stat: str) -> np.ndarray:
    """The statistic of each row, ignoring NaNs (numpy's linear-interpolation percentile), vectorised."""
    valid = ~np.isnan(mat)
    n = valid.sum(axis=1)
    if stat == "mean":
        return np.where(n > 0, np.where(valid, mat, 0.0).sum(axis=1) / np.maximum(n, 1), 0.0)
    srt = np.sort(mat, axis=1)  # NaNs last
    pos = float(stat[1:]) / 100.0 * np.maximum(n - 1, 0)
    lo = np.floor(pos).astype(int)
    hi = np.minimum(lo + 1, np.maximum(n - 1, 0))
    a = np.take_along_axis(srt, lo[:, None], axis=1)[:, 0]
    b = np.take_along_axis(srt, hi[:, None], axis=1)[:, 0]
    with np.errstate(invalid="ignore"):
        out = a + (pos - lo) * (b - a)
    out = np.where(np.isinf(a) | np.isinf(b), np.maximum(a, b), out)
    return np.where(n > 0, out, 0.0)


def _objective(window: list[RequestRecord], o: Objective, picks: np.ndarray) -> tuple[float | None, np.ndarray]:
    """The objective's value on the window and its block-bootstrap replicates (`picks`: batch indices)."""
    k = picks.shape[1]
    if o.metric == "itl":  # pooled gaps: batches of unequal sizes
        batches = [np.concatenate([r.itls_ms() if r.ok else np.array([math.inf]) for r in b] or [np.empty(0)])
                   for b in np.array_split(np.asarray(window, dtype=object), k)]
        pooled = np.concatenate(batches)
        point = _row_stat(pooled[None, :], o.stat)[0] if pooled.size else None
        boot = np.array([_row_stat(np.concatenate([batches[j] for j in row])[None, :], o.stat)[0] for row in picks])
        return (None if point is None else float(point)), boot
    v = _per_request(window, o.metric)
    if np.isnan(v).all():
        return None, np.zeros(picks.shape[0])
    parts = np.array_split(v, k)
    width = max(len(x) for x in parts)
    mat = np.full((k, width), np.nan)
    for i, x in enumerate(parts):
        mat[i, :len(x)] = x
    point = float(_row_stat(v[None, :], o.stat)[0])
    boot = _row_stat(mat[picks].reshape(picks.shape[0], -1), o.stat)
    return point, boot


def measure(result: RunResult, sla: SLA, rate: float, size: ProbeSize, rule: SteadyRule) -> Probe:
    """Judge one simulated probe by the rule (module docstring)."""
    records = result.records  # in request-id order: the stream's send order
    window = size.window(records)
    if len(window) < 2:
        raise WorkloadError(f"a probe at {rate:.3g} req/s has {len(records)} requests, too few for a warm-up of "
                            f"{size.warmup_requests} and a measured window; give a longer stream (or trace)")
    k = min(rule.num_batches, max(1, len(window) // 2))
    picks = np.random.default_rng(rule.seed).integers(k, size=(rule.num_bootstrap, k))
    ratio, values, binding = 0.0, {}, None
    samples = np.zeros(rule.num_bootstrap)
    for o in sla.objectives:
        point, boot = _objective(window, o, picks)
        values[str(o)] = point
        if point is None:
            continue
        if binding is None or point / o.limit_ms > ratio:
            binding = o
        ratio = max(ratio, point / o.limit_ms)
        samples = np.maximum(samples, boot / o.limit_ms)
    summary = summarize(window, sla)
    slope, se = _backlog_slope(records, window, rule.num_batches)
    waiting = binding is not None and binding.metric == "ttft"
    return Probe(rate=rate, num_requests=len(records), window_s=(window[0].arrival_at, window[-1].arrival_at),
                 load_cv2=load_cv2(window, waiting=waiting), load_work=LOAD_WORKS[waiting],
                 num_window_requests=len(window), ratio=ratio, values=values, backlog_growth_per_s=slope,
                 backlog_growth_se=se, backlog_tolerance=rule.backlog_tolerance, z=rule.z, ratio_samples=samples,
                 summary=summary, result=result)
