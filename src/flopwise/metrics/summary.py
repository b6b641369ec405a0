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
- goodput: requests per second whose own TTFT, TPOT, ITL (each gap) and E2E meet every SLA bound
  (DistServe's definition); sla_attainment: that share of all requests but cancelled ones. Failed requests
  count as missing.
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
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from flopwise.specs.sla import SLA

__all__ = ["RequestRecord", "LatencyStats", "summarize", "delivered_rate", "objectives_met"]


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
        itl = self.itls_ms()
        for o in sla.objectives:
            if o.metric == "itl":
                if itl.size and float(itl.max()) > o.limit_ms:
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


def summarize(records: Sequence[RequestRecord], sla: SLA | None = None, *,
              duration_s: float | None = None, arrival_origin_at: float | None = None) -> dict[str, Any]:
    """The run summary with the stable JSON keys shared by simulate and bench."""
    ok = [r for r in records if r.ok]
    n_total = len(records)
    n_cancelled = sum(1 for r in records if not r.ok and r.is_cancelled)
    n_counted = n_total - n_cancelled
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
    stats = {
        "ttft_ms": LatencyStats.of([r.ttft_ms for r in ok]),
        "tpot_ms": LatencyStats.of([t for r in ok if (t := r.tpot_ms) is not None]),
        "itl_ms": LatencyStats.of(itl),
        "e2e_ms": LatencyStats.of([r.e2e_ms for r in ok]),
        "queue_ms": LatencyStats.of([q for r in ok if (q := r.queue_ms) is not None]),
        "itl_per_token_ms": LatencyStats.of(itl_tok),
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
    out_tokens = sum(r.num_output_tokens for r in ok)
    in_tokens = sum(r.input_tokens for r in ok)
    requested = [r.input_tokens_requested for r in ok if r.input_tokens_requested is not None]
    summary: dict[str, Any] = {k: v.to_dict() for k, v in stats.items()}
    summary.update({
        "num_requests": n_total,
        "num_completed": len(ok),
        "num_failed": n_total - len(ok) - n_cancelled,
        "num_cancelled": n_cancelled,
        "duration_s": duration,
        "request_throughput": len(ok) / duration if duration else 0.0,
        "output_tokens_per_s": out_tokens / duration if duration else 0.0,
        "total_tokens_per_s": (out_tokens + in_tokens) / duration if duration else 0.0,
        "preemptions": sum(r.preemptions for r in records),
        "errors_by_kind": errors,
        "output_tokens_source": sources,
        "delivered_request_rate": delivered_rate([r.arrival_at for r in records], arrival_origin_at),
        "input_tokens_mean": in_tokens / len(ok) if ok else None,
        "input_tokens_requested_mean": sum(requested) / len(requested) if requested else None,
        "num_usage_rejected": sum(1 for r in records if r.usage_rejected is not None),
    })
    if sla is not None:
        good = sum(r.meets(sla) for r in records)
        met = objectives_met(stats, sla)
        good_vllm = sum(r.meets_vllm(sla) for r in records)
        summary.update({"sla": str(sla), "goodput": good / duration if duration else 0.0,
                        "sla_attainment": good / n_counted if n_counted else 0.0,
                        "sla_objectives_met": met, "sla_met": all(met.values()) and bool(ok),
                        "goodput_vllm": good_vllm / duration if duration else 0.0,
                        "sla_attainment_vllm": good_vllm / n_counted if n_counted else 0.0})
    else:
        summary.update({"sla": None, "goodput": summary["request_throughput"],
                        "sla_attainment": len(ok) / n_counted if n_counted else 0.0,
                        "goodput_vllm": summary["request_throughput"],
                        "sla_attainment_vllm": len(ok) / n_counted if n_counted else 0.0})
    return summary
