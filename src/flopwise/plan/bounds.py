"""Closed-form bounds that prune candidates before simulating them.

- Latency floor: a request alone is the fastest it can ever be served. Its TTFT is at least one prefill step
  of the prompt, and its TPOT at least one batch-1 decode step (both from the cost model). If either already
  breaks the SLA's bound, no load level can meet it: the candidate is infeasible.
- Capacity ceiling: batching makes a step cheaper per sequence (weights are read once per step), and
  continuous batching folds prefill chunks into decode steps that read the weights anyway, so a request
  costs at least the compute of its uncached prompt tokens plus its share of decode steps at the largest
  batch B that fits and keeps a decode step within the TPOT bound:
      t_req >= compute(prefill of a full token budget) / requests in it * (1 - cached share)
               + (out - 1) * decode_step(B) / B
  and rate <= 1 / t_req. It is an optimistic estimate, not a proof (a p95 TPOT bound lets some steps run
  longer), so the search keeps a margin above it; it orders the search and lets it skip candidates that
  cannot beat the best one found so far.
With speculative decoding (`dep.speculative`) a decode step is a round (`cost.speculative.round_time_s`: the
proposer's passes and the verify step) that yields E[tokens] per sequence, so the per-token time is
round_s / E[tokens], and a prefill also runs through the proposer (the round's pass 0, as in the simulator).
"""

from __future__ import annotations

from dataclasses import dataclass

from flopwise.cost.batch import decode_shape, prefill_shape
from flopwise.cost.layout import layout
from flopwise.cost.memory import max_sequences
from flopwise.cost.speculative import proposer_deployment, round_time_s, verify_shape
from flopwise.cost.step import step_cost, step_time
from flopwise.specs.deployment import Deployment
from flopwise.specs.sla import SLA

__all__ = ["Bounds", "bounds"]


@dataclass(frozen=True, slots=True)
class Bounds:
    ttft_floor_ms: float
    tpot_floor_ms: float
    max_rate_ceiling: float  # requests/s for one replica
    feasible: bool
    reason: str | None


def _proposer(dep: Deployment) -> tuple[Deployment | None, tuple[int | None, ...]]:
    prop = proposer_deployment(dep, dep.speculative) if dep.speculative is not None else None
    return prop, layout(prop).windows if prop is not None else ()


def _prefill_s(dep: Deployment, input_len: int) -> float:
    """One prompt alone, prefilled in one step (through the proposer too when speculating)."""
    shape = prefill_shape(1, input_len, layout(dep).windows)
    if dep.speculative is None:
        return step_time(dep, shape)
    _, pw = _proposer(dep)
    return round_time_s(dep, dep.speculative, shape, lambda j: prefill_shape(1, input_len, pw) if j == 0 else None)


def _decode_s(dep: Deployment, batch: int, ctx: int) -> tuple[float, float]:
    """(seconds of one decode step of `batch` sequences at context `ctx`, tokens it yields per sequence)."""
    w = layout(dep).windows
    spec = dep.speculative
    if spec is None:
        return step_time(dep, decode_shape(batch, ctx, w)), 1.0
    _, pw = _proposer(dep)
    verify = verify_shape(batch, ctx, spec.positions, w)
    return round_time_s(dep, spec, verify, lambda j: decode_shape(batch, ctx + j, pw)), spec.tokens_per_step


def _token_s(dep: Deployment, batch: int, ctx: int) -> float:
    """Seconds per output token of each of `batch` decoding sequences at context `ctx`."""
    step_s, tokens = _decode_s(dep, batch, ctx)
    return step_s / tokens


def bounds(dep: Deployment, sla: SLA, input_len: int, output_len: int, cached_share: float = 0.0) -> Bounds:
    w = layout(dep).windows
    ttft = _prefill_s(dep, input_len) * 1e3
    ctx = input_len + output_len // 2
    step_s, tokens = _decode_s(dep, 1, ctx)
    tpot, itl = step_s / tokens * 1e3, step_s * 1e3  # a speculative step's tokens arrive together
    reasons = []
    if (lim := sla.limit("ttft")) is not None and ttft > lim:
        reasons.append(f"a lone request's TTFT is already {ttft:.0f} ms > {lim:g} ms")
    if (lim := sla.limit("tpot")) is not None and tpot > lim:
        reasons.append(f"batch-1 TPOT is already {tpot:.1f} ms > {lim:g} ms")
    if (lim := sla.limit("itl")) is not None and itl > lim:
        reasons.append(f"batch-1 ITL is already {itl:.1f} ms > {lim:g} ms")
    cap = max(1, min(dep.max_num_seqs, max_sequences(dep, input_len + output_len)))
    tpot_lim, itl_lim = sla.limit("tpot"), sla.limit("itl")

    def meets(batch: int) -> bool:
        step_s, tokens = _decode_s(dep, batch, ctx)
        return ((tpot_lim is None or step_s / tokens * 1e3 <= tpot_lim)
                and (itl_lim is None or step_s * 1e3 <= itl_lim))

    b = cap
    if tpot_lim is not None or itl_lim is not None:  # largest batch whose decode step meets the bounds (bisection)
        lo, hi = 1, cap
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if meets(mid):
                lo = mid
            else:
                hi = mid - 1
        b = lo
    per_chunk = max(1, dep.max_num_batched_tokens // input_len)
    prefill_compute = step_cost(dep, prefill_shape(per_chunk, input_len, w)).compute_s / per_chunk
    prop, pw = _proposer(dep)
    if prop is not None:
        prefill_compute += step_cost(prop, prefill_shape(per_chunk, input_len, pw)).compute_s / per_chunk
    t_req = prefill_compute * (1.0 - cached_share) + (output_len - 1) * _token_s(dep, b, ctx) / b
    return Bounds(ttft, tpot, 1.0 / t_req, not reasons, "; ".join(reasons) or None)
