"""Per-request records and run summaries. Both the simulator and the load generator produce
`RequestRecord`s and call `summarize`, so their JSON has the same keys and definitions.

Definitions (times in ms, instants in seconds on one monotonic clock):
- queue_ms: from arrival to the first scheduled computation of the request.
- ttft_ms: from arrival (the *scheduled* send time) to the first output token (for a streaming client, the
  first chunk that carries a choice, whatever its text; see `bench.transport`); the first token is counted in
  TTFT, not in TPOT. It includes the client's send lag: a client that falls behind its schedule shows it here.
- ttft_from_send_ms: from the instant the request was actually sent to the first output token. This is the
  TTFT of `vllm bench serve` (its clock starts when its request function starts), the one to compare with it.
  e2e_from_send_ms likewise for e2e_ms. send_lag_ms: sent - scheduled (client-side queueing). Only defined
  where the producer records `sent_at` (bench).
- tpot_ms: (e2e_ms - ttft_ms) / (n - 1) for a request with n >= 2 output tokens (not defined for n = 1);
  n is `num_output_tokens` (the server's usage count for bench, with its source in `output_tokens_source`).
- itl_ms: every gap between consecutive output events (tokens, or streamed chunks), pooled over all requests.
- itl_per_token_ms: the same gaps spread per token: a gap ending in a chunk that carries k tokens counts as
  k gaps of gap/k (speculative decoding, multi-token chunks). Equals itl_ms when every chunk is one token.
- e2e_ms: from arrival to the last output token.
- request_throughput: completed requests / duration_s; output_tokens_per_s: output tokens / duration_s,
  with duration_s = last completion - first arrival.
- goodput: requests per second whose own TTFT, TPOT, ITL and E2E meet every SLA bound (DistServe's
  definition); a request's ITL is its own gaps at the objective's statistic (p95_itl: its 95th-percentile gap,
  mean_itl: its mean gap), so one long gap (a prefill chunk beside its decode) does not fail a p95 bound;
  sla_attainment: that share of all requests but cancelled ones. Failed requests count as missing.
- goodput_vllm / sla_attainment_vllm: `vllm bench serve --goodput`'s definition: a completed request is good
  when its TTFT, TPOT and E2E (from the send where recorded, as vLLM measures them) are each <= the bound;
  ITL gaps are not checked and a request of one token has TPOT 0. Percentile objectives bound each request.
- delivered_request_rate: the rate the requests were scheduled at, as measured: sends / (last scheduled send -
  the origin) where an origin is given (vLLM's convention: the phase start, the first send one gap after it),
  else (sends - 1) / (last - first scheduled send). None for fewer than two sends or all at once.
- Percentile objectives of an SLA (e.g. p95_ttft) are checked on the aggregate: `sla_met`.
- errors_by_kind: failed requests counted by `error_kind` ("error" where none is given); they stay in
  num_requests and in the sla_attainment denominator. Requests cancelled by the user (`cancelled`, an
  interrupted run) are listed there too but are not failures: num_requests = num_completed + num_failed +
  num_cancelled, and they are left out of sla_attainment's denominator.
- input_tokens_mean: mean prompt tokens of completed requests (the server's count where it reported one);
  input_tokens_requested_mean: the client's own count of the same prompts (None where not recorded);
  num_usage_rejected: requests whose usage was inconsistent with their stream and not used.
- duration_s may be given by the caller (e.g. the sum of a resumed run's sessions) instead of being derived.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any, ClassVar

import numpy as np

from flopwise.specs.sla import SLA

__all__ = ["RequestRecord", "LatencyStats", "RunSummary", "summarize", "delivered_rate", "objectives_met", "gap_stat"]


@dataclass(slots=True, kw_only=True)
class RequestRecord:
    """One request's timeline. `token_times` are the instants (s) at which each output token arrived, or,
    for a streaming client, each chunk with a choice; `chunk_tokens` then gives the tokens each chunk carried
    (None: one each; 0 for a chunk that carries none, e.g. a finish-only chunk). `sent_at` is when the request
    actually left the client (None where not measured). `input_tokens_requested`: the client's own count of the
    prompt (None where not measured); `usage_rejected`: why the server's usage was not used, if it was not."""

    request_id: int
    arrival_at: float
    input_tokens: int
    output_tokens: int
    first_scheduled_at: float | None = None
    token_times: list[float] = field(default_factory=list)
    preemptions: int = 0
    error: str | None = None
    error_kind: str | None = None
    sent_at: float | None = None
    chunk_tokens: list[int] | None = None
    output_tokens_source: str | None = None
    input_tokens_requested: int | None = None
    usage_rejected: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None and bool(self.token_times)

    @property
    def ttft_ms(self) -> float:
        return (self.token_times[0] - self.arrival_at) * 1e3

    @property
    def e2e_ms(self) -> float:
        return (self.token_times[-1] - self.arrival_at) * 1e3

    @property
    def num_output_tokens(self) -> int:
        """Output tokens: sum(chunk_tokens) when given, else one per entry of token_times."""
        return sum(self.chunk_tokens) if self.chunk_tokens is not None else len(self.token_times)

    @property
    def tpot_ms(self) -> float | None:
        n = self.num_output_tokens
        return (self.e2e_ms - self.ttft_ms) / (n - 1) if n >= 2 and self.token_times else None

    @property
    def ttft_from_send_ms(self) -> float | None:
        return None if self.sent_at is None else (self.token_times[0] - self.sent_at) * 1e3

    @property
    def e2e_from_send_ms(self) -> float | None:
        return None if self.sent_at is None else (self.token_times[-1] - self.sent_at) * 1e3

    @property
    def is_cancelled(self) -> bool:
        return self.error_kind == "cancelled"

    @property
    def send_lag_ms(self) -> float | None:
        return None if self.sent_at is None else (self.sent_at - self.arrival_at) * 1e3

    @property
    def queue_ms(self) -> float | None:
        return None if self.first_scheduled_at is None else (self.first_scheduled_at - self.arrival_at) * 1e3

    def itls_ms(self) -> np.ndarray:
        return np.diff(np.asarray(self.token_times)) * 1e3

    def itls_per_token_ms(self) -> np.ndarray:
        """Each gap between chunks that carry tokens divided by the k tokens of the chunk that ends it, repeated
        k times (a chunk that carries no token is skipped: its gap joins the next one's)."""
        if self.chunk_tokens is None or len(self.token_times) < 2:
            return self.itls_ms()
        k_all = np.asarray(self.chunk_tokens[: len(self.token_times)], dtype=float)
        keep = k_all > 0
        times = np.asarray(self.token_times)[keep]
        k = k_all[keep][1:]
        gaps = np.diff(times) * 1e3
        return np.repeat(gaps / k, k.astype(int))

    def meets_vllm(self, sla: SLA) -> bool:
        """vLLM's goodput test: TTFT, TPOT (0 for one token) and E2E, from the send where recorded, each <=
        its bound; ITL is not checked."""
        if not self.ok:
            return False
        ttft = self.ttft_from_send_ms if self.sent_at is not None else self.ttft_ms
        e2e = self.e2e_from_send_ms if self.sent_at is not None else self.e2e_ms
        values = {"ttft": ttft, "e2e": e2e, "tpot": self.tpot_ms or 0.0}
        return all(values[o.metric] <= o.limit_ms for o in sla.objectives if o.metric in values)  # type: ignore[operator]

    def meets(self, sla: SLA) -> bool:
        if not self.ok:
            return False
        values = {"ttft": self.ttft_ms, "e2e": self.e2e_ms, "tpot": self.tpot_ms}
        for o in sla.objectives:
            if o.metric == "itl":  # its own gaps at the objective's statistic (p95: its 95th-percentile gap)
                itl = self.itls_ms()
                if itl.size and gap_stat(itl, o.stat) > o.limit_ms:
                    return False
                continue
            v = values[o.metric]
            if v is not None and v > o.limit_ms:
                return False
        return True

    def to_row(self) -> dict[str, Any]:
        return {"request_id": self.request_id, "arrival_at": self.arrival_at, "input_tokens": self.input_tokens,
                "output_tokens": self.num_output_tokens, "queue_ms": self.queue_ms,
                "ttft_ms": self.ttft_ms if self.ok else None, "tpot_ms": self.tpot_ms if self.ok else None,
                "e2e_ms": self.e2e_ms if self.ok else None, "preemptions": self.preemptions, "error": self.error}

    def to_dict(self) -> dict[str, Any]:
        """Every field, losslessly (for JSONL storage); `from_dict` reads it back."""
        return {f: getattr(self, f) for f in self.__slots__}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> RequestRecord:
        return cls(**{f: d[f] for f in cls.__slots__ if f in d})


@dataclass(frozen=True, slots=True, kw_only=True)
class LatencyStats:
    mean: float | None
    p50: float | None
    p90: float | None
    p95: float | None
    p99: float | None

    @classmethod
    def of(cls, values: Sequence[float] | np.ndarray) -> LatencyStats:
        a = np.asarray(values, dtype=float)
        if a.size == 0:
            return cls(mean=None, p50=None, p90=None, p95=None, p99=None)
        p50, p90, p95, p99 = np.percentile(a, [50, 90, 95, 99])
        return cls(mean=float(a.mean()), p50=float(p50), p90=float(p90), p95=float(p95), p99=float(p99))

    def get(self, stat: str) -> float | None:
        value: float | None = getattr(self, stat)  # `stat` names one of the fields above
        return value

    def to_dict(self) -> dict[str, float | None]:
        return {"mean": self.mean, "p50": self.p50, "p90": self.p90, "p95": self.p95, "p99": self.p99}


def gap_stat(gaps: np.ndarray, stat: str) -> float:
    """One request's inter-token gaps (non-empty, ms) at an SLA objective's statistic: the mean, or the pNN
    percentile by linear interpolation between order statistics (np.percentile's default method, from a partial
    sort: this runs once per request where an SLA bounds ITL). The simulator's records and the bounded fleet
    records (`cluster/metrics.py`) both test a request's ITL with it."""
    if stat == "mean":
        return float(gaps.mean())
    n = gaps.size
    h = (n - 1) * float(stat[1:]) / 100
    lo = int(h)
    if lo + 1 >= n:
        return float(gaps.max())
    part = np.partition(gaps, (lo, lo + 1))
    a, b = float(part[lo]), float(part[lo + 1])
    return a + (h - lo) * (b - a)


def _pooled_gaps_ms(records: Sequence[RequestRecord]) -> np.ndarray:
    """Every gap between consecutive tokens of each record, pooled: one diff over all token times with the
    gaps that straddle two records dropped (one numpy pass instead of one per record)."""
    if not records:
        return np.empty(0)
    lengths = np.fromiter((len(r.token_times) for r in records), dtype=np.int64, count=len(records))
    times = np.fromiter(itertools.chain.from_iterable(r.token_times for r in records), dtype=float,
                        count=int(lengths.sum()))
    gaps = np.diff(times) * 1e3
    keep = np.ones(gaps.size, dtype=bool)
    keep[np.cumsum(lengths)[:-1] - 1] = False  # the gap from one record's last token to the next's first
    return gaps[keep]


def objectives_met(stats: Mapping[str, LatencyStats], sla: SLA) -> dict[str, bool]:
    """Each percentile objective of `sla` checked on the aggregate (`stats` by "<metric>_ms"): `sla_objectives_met`."""
    met = {}
    for o in sla.objectives:
        v = stats[f"{o.metric}_ms"].get(o.stat)
        met[str(o)] = v is not None and v <= o.limit_ms
    return met


def delivered_rate(arrivals: Sequence[float], origin_at: float | None = None) -> float | None:
    """Scheduled sends per second (see the module docstring); None when it is not defined."""
    if not arrivals:
        return None
    last = max(arrivals)
    if origin_at is not None:
        span, n = last - origin_at, len(arrivals)
    else:
        span, n = last - min(arrivals), len(arrivals) - 1
    return n / span if n >= 1 and span > 0 else None


@dataclass(frozen=True, slots=True, kw_only=True)
class RunSummary:
    """A run's summary, typed (see the module docstring for every definition); `to_dict()` is the JSON object
    with the stable keys shared by `simulate` and `bench`. Built by `RunSummary.of`, the one home of the rates,
    the goodput and the SLA figures, from per-request records (`summarize`) or from bounded per-request rows
    (`cluster.metrics`)."""

    ttft_ms: LatencyStats
    tpot_ms: LatencyStats
    itl_ms: LatencyStats
    e2e_ms: LatencyStats
    queue_ms: LatencyStats
    itl_per_token_ms: LatencyStats
    ttft_from_send_ms: LatencyStats
    send_lag_ms: LatencyStats
    e2e_from_send_ms: LatencyStats
    num_requests: int
    num_completed: int
    num_failed: int
    num_cancelled: int
    duration_s: float
    request_throughput: float
    output_tokens_per_s: float
    total_tokens_per_s: float
    preemptions: int
    errors_by_kind: Mapping[str, int]
    output_tokens_source: Mapping[str, int]
    delivered_request_rate: float | None
    input_tokens_mean: float | None
    input_tokens_requested_mean: float | None
    num_usage_rejected: int
    sla: str | None
    goodput: float
    sla_attainment: float
    sla_objectives_met: Mapping[str, bool] | None = None  # each percentile objective on the aggregate
    sla_met: bool | None = None  # None without an SLA
    goodput_vllm: float
    sla_attainment_vllm: float

    LATENCY_KEYS: ClassVar[tuple[str, ...]] = (
        "ttft_ms", "tpot_ms", "itl_ms", "e2e_ms", "queue_ms", "itl_per_token_ms", "ttft_from_send_ms",
        "send_lag_ms", "e2e_from_send_ms")

    @classmethod
    def of(cls, *, stats: Mapping[str, LatencyStats], num_requests: int, num_completed: int, num_cancelled: int,
           duration_s: float, output_tokens: int, input_tokens: int, preemptions: int,
           errors_by_kind: Mapping[str, int], delivered_request_rate: float | None, sla: SLA | None,
           num_good: int, num_good_vllm: int, output_tokens_source: Mapping[str, int] | None = None,
           input_tokens_requested_mean: float | None = None, num_usage_rejected: int = 0) -> RunSummary:
        """The summary from the latency statistics (`LATENCY_KEYS`) and the run's counts. `num_good` /
        `num_good_vllm`: requests meeting every SLA bound by DistServe's / vLLM's test (ignored without an SLA:
        every completed request is then good). Rates are per `duration_s` (0 when it is 0); attainment leaves
        cancelled requests out of its denominator."""
        d = duration_s
        counted = num_requests - num_cancelled
        if sla is None:
            num_good = num_good_vllm = num_completed
        met = objectives_met(stats, sla) if sla is not None else None
        return cls(
            **{k: stats[k] for k in cls.LATENCY_KEYS},
            num_requests=num_requests, num_completed=num_completed,
            num_failed=num_requests - num_completed - num_cancelled, num_cancelled=num_cancelled, duration_s=d,
            request_throughput=num_completed / d if d else 0.0, output_tokens_per_s=output_tokens / d if d else 0.0,
            total_tokens_per_s=(output_tokens + input_tokens) / d if d else 0.0, preemptions=preemptions,
            errors_by_kind=dict(errors_by_kind), output_tokens_source=dict(output_tokens_source or {}),
            delivered_request_rate=delivered_request_rate,
            input_tokens_mean=input_tokens / num_completed if num_completed else None,
            input_tokens_requested_mean=input_tokens_requested_mean, num_usage_rejected=num_usage_rejected,
            sla=None if sla is None else str(sla), goodput=num_good / d if d else 0.0,
            sla_attainment=num_good / counted if counted else 0.0, goodput_vllm=num_good_vllm / d if d else 0.0,
            sla_attainment_vllm=num_good_vllm / counted if counted else 0.0, sla_objectives_met=met,
            sla_met=None if met is None else all(met.values()) and num_completed > 0)

    def latency(self, metric: str) -> LatencyStats:
        """The statistics of one latency metric, by SLA name ("ttft", "tpot", "itl", "e2e") or key ("ttft_ms")."""
        key = metric if metric.endswith("_ms") else f"{metric}_ms"
        if key not in self.LATENCY_KEYS:
            raise KeyError(metric)
        stats: LatencyStats = getattr(self, key)
        return stats

    def to_dict(self) -> dict[str, Any]:
        """The JSON object (`sla_objectives_met` and `sla_met` only where an SLA was given)."""
        out: dict[str, Any] = {k: self.latency(k).to_dict() for k in self.LATENCY_KEYS}
        for f in fields(self):
            if f.name in self.LATENCY_KEYS or (f.name in ("sla_objectives_met", "sla_met") and self.sla is None):
                continue
            v = getattr(self, f.name)
            out[f.name] = dict(v) if isinstance(v, Mapping) else v
        return out


def summarize(records: Sequence[RequestRecord], sla: SLA | None = None, *,
              duration_s: float | None = None, arrival_origin_at: float | None = None) -> RunSummary:
    """The run summary of per-request records (simulated or measured)."""
    ok = [r for r in records if r.ok]
    n_cancelled = sum(1 for r in records if not r.ok and r.is_cancelled)
    if duration_s is not None:
        duration = duration_s if ok else 0.0
    elif ok:
        start = min(r.arrival_at for r in records)
        end = max(r.token_times[-1] for r in ok)
        duration = max(end - start, 1e-12)
    else:
        duration = 0.0
    itl = _pooled_gaps_ms(ok)
    chunked = [r for r in ok if r.chunk_tokens is not None]
    if chunked:  # multi-token chunks: split each gap over its tokens
        itl_tok = np.concatenate([_pooled_gaps_ms([r for r in ok if r.chunk_tokens is None])]
                                 + [r.itls_per_token_ms() for r in chunked])
    else:
        itl_tok = itl
    itl_stats = LatencyStats.of(itl)
    stats = {
        "ttft_ms": LatencyStats.of([r.ttft_ms for r in ok]),
        "tpot_ms": LatencyStats.of([t for r in ok if (t := r.tpot_ms) is not None]),
        "itl_ms": itl_stats,
        "e2e_ms": LatencyStats.of([r.e2e_ms for r in ok]),
        "queue_ms": LatencyStats.of([q for r in ok if (q := r.queue_ms) is not None]),
        "itl_per_token_ms": itl_stats if itl_tok is itl else LatencyStats.of(itl_tok),
        "ttft_from_send_ms": LatencyStats.of([t for r in ok if (t := r.ttft_from_send_ms) is not None]),
        "send_lag_ms": LatencyStats.of([t for r in records if (t := r.send_lag_ms) is not None]),
        "e2e_from_send_ms": LatencyStats.of([t for r in ok if (t := r.e2e_from_send_ms) is not None]),
    }
    errors: dict[str, int] = {}
    for r in records:
        if not r.ok:
            kind = r.error_kind or "error"
            errors[kind] = errors.get(kind, 0) + 1
    sources: dict[str, int] = {}
    for r in ok:
        if r.output_tokens_source is not None:
            sources[r.output_tokens_source] = sources.get(r.output_tokens_source, 0) + 1
    requested = [r.input_tokens_requested for r in ok if r.input_tokens_requested is not None]
    return RunSummary.of(
        stats=stats, num_requests=len(records), num_completed=len(ok), num_cancelled=n_cancelled,
        duration_s=duration, output_tokens=sum(r.num_output_tokens for r in ok),
        input_tokens=sum(r.input_tokens for r in ok), preemptions=sum(r.preemptions for r in records),
        errors_by_kind=errors, output_tokens_source=sources,
        delivered_request_rate=delivered_rate([r.arrival_at for r in records], arrival_origin_at),
        input_tokens_requested_mean=sum(requested) / len(requested) if requested else None,
        num_usage_rejected=sum(1 for r in records if r.usage_rejected is not None), sla=sla,
        num_good=sum(r.meets(sla) for r in records) if sla is not None else 0,
        num_good_vllm=sum(r.meets_vllm(sla) for r in records) if sla is not None else 0)
