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
"""

from __future__ import annotations

from dataclasses import dataclass

from flopwise.cost.batch import decode_shape, prefill_shape
from flopwise.cost.layout import layout
from flopwise.cost.memory import max_sequences
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


def bounds(dep: Deployment, sla: SLA, input_len: int, output_len: int, cached_share: float = 0.0) -> Bounds:
    w = layout(dep).windows
    ttft = step_time(dep, prefill_shape(1, input_len, w)) * 1e3
    ctx = input_len + output_len // 2
    tpot = step_time(dep, decode_shape(1, ctx, w)) * 1e3
    reasons = []
    if (lim := sla.limit("ttft")) is not None and ttft > lim:
        reasons.append(f"a lone request's TTFT is already {ttft:.0f} ms > {lim:g} ms")
    if (lim := sla.limit("tpot")) is not None and tpot > lim:
        reasons.append(f"batch-1 TPOT is already {tpot:.1f} ms > {lim:g} ms")
    if (lim := sla.limit("itl")) is not None and tpot > lim:
        reasons.append(f"batch-1 ITL is already {tpot:.1f} ms > {lim:g} ms")
    cap = max(1, min(dep.max_num_seqs, max_sequences(dep, input_len + output_len)))
    tpot_lim = sla.limit("tpot") or sla.limit("itl")
    b = cap
    if tpot_lim is not None:  # largest batch whose decode step meets the TPOT bound (binary search)
        lo, hi = 1, cap
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if step_time(dep, decode_shape(mid, ctx, w)) * 1e3 <= tpot_lim:
                lo = mid
            else:
                hi = mid - 1
        b = lo
    per_chunk = max(1, dep.max_num_batched_tokens // input_len)
    prefill_compute = step_cost(dep, prefill_shape(per_chunk, input_len, w)).compute_s / per_chunk
    t_req = prefill_compute * (1.0 - cached_share) + (output_len - 1) * step_time(dep, decode_shape(b, ctx, w)) / b
    return Bounds(ttft, tpot, 1.0 / t_req, not reasons, "; ".join(reasons) or None)
