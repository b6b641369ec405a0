"""Speculative decoding as a technique: k cheap guesses, one expensive check, and when it pays.

The setting itself (`SpeculativeSpec`: method, k, acceptance; the formula E[tokens] = (1 - alpha^(k+1)) /
(1 - alpha), Leviathan et al. 2023) lives in `specs/speculative.py`, and the price of one round (k proposer
passes + one target step verifying k+1 positions per sequence) in `cost/speculative.py`, which the simulator
shares. This module asks the questions a reader of the ledger has:

    speculative TPOT = round_s / E[tokens];      speedup = baseline TPOT / speculative TPOT

- `spec_tpot_s`: the mean time per output token over a request's decode phase;
- `best_k`: the k with the highest speedup at a batch and context, at the same per-token acceptance rate;
- `breakeven_batch`: the batch beyond which the verify step is compute-bound enough that speculation is slower.
Memory (a draft model's weights and KV, k look-ahead slots per sequence) is `cost/memory.py`'s `memory_plan`
of the speculative deployment.
"""

from __future__ import annotations

from flopwise.cost.speculative import SpecRound, proposer_deployment, spec_round
from flopwise.specs.deployment import Deployment
from flopwise.specs.speculative import METHODS, SpeculativeSpec, acceptance_rate, expected_tokens
from flopwise.techniques.scenario import Scenario, rebuild

__all__ = ["METHODS", "SpeculativeSpec", "SpecRound", "expected_tokens", "acceptance_rate",
           "with_speculation", "proposer_deployment", "spec_round", "spec_tpot_s", "best_k", "breakeven_batch"]

K_MAX = 10


def with_speculation(scn: Scenario, spec: SpeculativeSpec | None) -> Scenario:
    """The scenario served with speculative decoding `spec` (None: plain decoding): a deployment setting."""
    return scn.with_deployment(rebuild(scn.deployment, speculative=spec))


def _contexts(input_len: int, output_len: int, points: int = 9) -> list[int]:
    """Evenly spaced contexts over the decode phase (first decode step sees input_len cached tokens)."""
    last = input_len + max(0, output_len - 2)
    if points <= 1 or last == input_len:
        return [input_len]
    return sorted({input_len + round((last - input_len) * i / (points - 1)) for i in range(points)})


def spec_tpot_s(dep: Deployment, spec: SpeculativeSpec, batch: int, input_len: int, output_len: int) -> float:
    """Mean time per output token after the first, over the decode phase (round time / E[tokens], averaged
    over evenly spaced contexts: the round time is close to linear in the context)."""
    ctxs = _contexts(input_len, output_len)
    return sum(spec_round(dep, spec, batch, c).time_per_token_s for c in ctxs) / len(ctxs)


def best_k(dep: Deployment, spec: SpeculativeSpec, batch: int, context: int, k_max: int = K_MAX) -> tuple[int, float]:
    """The k in 1..k_max with the highest speedup at this batch and context, at `spec`'s per-token
    acceptance rate (derived from its mean accepted tokens at its own k when that is what was given)."""
    best = (1, 0.0)
    for k in range(1, k_max + 1):
        s = spec_round(dep, spec.with_k(k), batch, context).speedup
        if s > best[1]:
            best = (k, s)
    return best


def breakeven_batch(dep: Deployment, spec: SpeculativeSpec, context: int, limit: int = 4096) -> int | None:
    """The smallest batch at which speculation is slower than plain decoding (speedup < 1), or None if it
    still pays at `limit`. Speedup falls as the batch grows (the verify step turns compute-bound), so a
    doubling search then bisection finds the crossing."""
    def slower(b: int) -> bool:
        return spec_round(dep, spec, b, context).speedup < 1.0

    if slower(1):
        return 1
    lo, hi = 1, 2
    while not slower(hi):
        if hi >= limit:
            return None
        lo, hi = hi, min(2 * hi, limit)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if slower(mid):
            hi = mid
        else:
            lo = mid
    return hi
