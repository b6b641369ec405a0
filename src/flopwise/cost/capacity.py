"""Closed-form bounds on what one replica can serve: the latency floor and the capacity ceiling.

The planner prunes candidates with them before simulating, and the sustained-rate rule
(`sim/max_rate.py`) never reports a rate above the ceiling.

- Latency floor: a request alone is the fastest it can ever be served. Its TTFT is at least one prefill step
  of the prompt, and its TPOT at least one batch-1 decode step (both from the cost model). If either already
  breaks the SLA's bound, no load level can meet it: the candidate is infeasible.
- Capacity ceiling: batching makes a step cheaper per sequence (weights are read once per step), and
  continuous batching folds prefill chunks into decode steps that read the weights anyway. With B the largest
  batch that fits and keeps a decode step within the TPOT bound, a request's share of the engine's time is at
  least
      t_req >= max((out - 1) * decode_step(B) / B,
                   (out - 1) * decode_compute(B) / B + (1 - cached share) * compute(prefill of a full token
                   budget) / requests in it)
  (a step costs at least the larger of its memory and its compute time, so a prefill chunk that rides on a
  memory-bound decode step costs only the compute the step had to spare: the first term; the second counts
  every FLOP of the request at the efficiency of its own shapes),
  and rate <= 1 / t_req. Behind an API server (`specs/engine.py` FrontendCosts) every request also passes one
  CPU stage, so the rate is at most speed / (ingress_s(prompt) + first_event_s + out * token_s) as well; the
  ceiling is the smaller of the two (`binding` says which).
  It is a bound, not a forecast: a simulated rate that passes above it is a transient the run was too short
  to see, so the sustained-rate rule caps its answer here.
- Capacity estimate: the same request priced with its prefill compute added to its decode steps,
      t_est = (out - 1) * decode_step(B) / B + (1 - cached share) * compute(prefill chunk) / requests in it,
  the capacity of a replica whose prefills never overlap the memory-bound decode (lengths at their means). It
  is no bound (it overcharges a prefill that hides under a memory-bound step, and ignores queueing, which an
  SLA on TTFT makes the binding constraint), but it tracks the simulated capacity within about 20% on the dev
  workloads, so the planner orders candidates by it, starts each search from it and sizes the probes with it,
  and skips a candidate whose min(ceiling, 1.25 x estimate) cannot reach the best result's interval.
- Latency at capacity: a request's E2E near the ceiling is about TTFT floor + (out - 1) * the per-token time
  at batch B (`e2e_estimate_s`); the sustained-rate rule sizes its warm-up and window with it.
With speculative decoding (`dep.speculative`) a decode step is a round (`cost.speculative.round_time_s`: the
proposer's passes and the verify step) that yields E[tokens] per sequence, so the per-token time is
round_s / E[tokens], and a prefill also runs through the proposer (the round's pass 0, as in the simulator).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from flopwise.cost.attention import Span
from flopwise.cost.batch import decode_shape, prefill_shape
from flopwise.cost.layout import layout
from flopwise.cost.memory import max_sequences
from flopwise.cost.speculative import proposer_deployment, round_time_s, verify_shape
from flopwise.cost.step import step_cost, step_time
from flopwise.specs.deployment import Deployment
from flopwise.specs.sla import SLA

__all__ = ["Bounds", "bounds", "frontend_ceiling"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Bounds:
    ttft_floor_ms: float
    tpot_floor_ms: float
    max_rate_ceiling: float  # requests/s for one replica
    feasible: bool
    reason: str | None
    max_rate_estimate: float = math.inf  # requests/s: the capacity estimate (<= max_rate_ceiling)
    engine_ceiling: float = math.inf  # requests/s the GPUs allow
    frontend_ceiling: float = math.inf  # requests/s the API server's CPU allows (inf offline)
    e2e_estimate_s: float = 0.0  # one request's latency near the ceiling
    prefill_share_s: float = 0.0  # t_est's prefill part: engine seconds per request in prefill chunks
    decode_share_s: float = 0.0  # t_est's decode part: (out - 1) x per-token time at batch B / B

    @property
    def binding(self) -> str:
        """Which stage sets the ceiling: "engine" or "frontend"."""
        return "frontend" if self.frontend_ceiling < self.engine_ceiling else "engine"


def _proposer(dep: Deployment) -> tuple[Deployment | None, tuple[Span, ...]]:
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
    verify = verify_shape(batch, ctx, spec.positions, w, dep.engine.expands_verify)
    return round_time_s(dep, spec, verify, lambda j: decode_shape(batch, ctx + j, pw)), spec.tokens_per_step


def _token_s(dep: Deployment, batch: int, ctx: int) -> float:
    """Seconds per output token of each of `batch` decoding sequences at context `ctx`."""
    step_s, tokens = _decode_s(dep, batch, ctx)
    return step_s / tokens


def frontend_ceiling(dep: Deployment, input_len: float, output_len: float) -> float:
    """Requests/s the API server's CPU can pass: speed / (ingress + output tokens * per-token egress)."""
    fe = dep.frontend
    if fe is None:
        return math.inf
    work = fe.ingress_s(round(input_len)) + fe.first_event_s + output_len * fe.token_s
    return fe.speed / work if work > 0 else math.inf


def bounds(dep: Deployment, sla: SLA, input_len: int, output_len: int, cached_share: float = 0.0) -> Bounds:
    """The latency floor, the capacity ceiling and the latency near it, at mean lengths (see the module
    docstring)."""
    w = layout(dep).windows
    fe = dep.frontend
    front_s = 0.0 if fe is None else fe.ingress_s(input_len) / fe.api_servers + fe.latency_s
    ttft = (_prefill_s(dep, input_len) + front_s) * 1e3
    ctx = input_len + output_len // 2
    step_s, tokens = _decode_s(dep, 1, ctx)

    def event_steps(tokens: float) -> float:
        """Decode steps between two events the client sees: one (a speculative step's tokens arrive together), or
        the server's stream interval's worth of tokens (`FrontendCosts.stream_interval`)."""
        n = 1 if fe is None else min(fe.stream_interval, max(1, output_len - 1))
        return max(1.0, n / tokens)

    tpot, itl = step_s / tokens * 1e3, step_s * event_steps(tokens) * 1e3
    reasons = []
    if (lim := sla.limit("ttft")) is not None and ttft > lim:
        reasons.append(f"a lone request's TTFT is already {ttft:.0f} ms > {lim:g} ms")
    if (lim := sla.limit("tpot")) is not None and tpot > lim:
        reasons.append(f"batch-1 TPOT is already {tpot:.1f} ms > {lim:g} ms")
    if (lim := sla.limit("itl")) is not None and itl > lim:
        reasons.append(f"batch-1 ITL is already {itl:.1f} ms > {lim:g} ms")
    cap = max(1, min(dep.running_limit, max_sequences(dep, input_len + output_len)))
    tpot_lim, itl_lim = sla.limit("tpot"), sla.limit("itl")

    def meets(batch: int) -> bool:
        step_s, tokens = _decode_s(dep, batch, ctx)
        return ((tpot_lim is None or step_s / tokens * 1e3 <= tpot_lim)
                and (itl_lim is None or step_s * event_steps(tokens) * 1e3 <= itl_lim))

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
    per_chunk = max(1, dep.token_budget // input_len)
    prefill_compute = step_cost(dep, prefill_shape(per_chunk, input_len, w)).compute_s / per_chunk
    prop, pw = _proposer(dep)
    if prop is not None:
        prefill_compute += step_cost(prop, prefill_shape(per_chunk, input_len, pw)).compute_s / per_chunk
    token_s = _token_s(dep, b, ctx)
    prefill = prefill_compute * (1.0 - cached_share)
    decode = (output_len - 1) * token_s / b
    share = token_s / b  # at least its share of one step: a one-token reply to a fully cached prompt takes a slot
    t_est = max(prefill + decode, share)
    if dep.speculative is None:
        dec_compute = step_cost(dep, decode_shape(b, ctx, w)).compute_s / b
        t_req = max((output_len - 1) * share, (output_len - 1) * dec_compute + prefill, share)
    else:  # a round's passes are priced whole: the estimate is the bound
        t_req = t_est
    engine, front = 1.0 / t_req, frontend_ceiling(dep, input_len, output_len)
    e2e = ttft / 1e3 + (output_len - 1) * token_s
    ceiling = min(engine, front)
    return Bounds(ttft_floor_ms=ttft, tpot_floor_ms=tpot, max_rate_ceiling=ceiling, feasible=not reasons,
                  reason="; ".join(reasons) or None, max_rate_estimate=min(1.0 / t_est, ceiling), engine_ceiling=engine,
                  frontend_ceiling=front, e2e_estimate_s=e2e, prefill_share_s=prefill, decode_share_s=decode)
