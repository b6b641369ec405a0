"""Throughput at an SLA from the serving simulator (`flopwise.sim.find_max_rate`): the highest request rate
sustained within the SLA (steady state after a warm-up, no growing backlog: `sim/steady.py`), served by the
vLLM v1 scheduler (continuous batching, chunked
prefill, paged KV), and the output tokens/s at that rate.

The request stream is the named workload's length distributions (or fixed lengths), Poisson arrivals, a
fixed seed (the same requests for every row). A scenario's prefix-hit ratio r becomes one shared prefix of
r x each prompt (prefix caching on); with r = 0 prefix caching is off, so the baseline row has no hits.
Speculative decoding is a setting of the scenario's deployment, which the simulator serves as it is: each decode
step verifies k+1 positions per sequence and emits a random number of tokens (seeded like the stream).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from flopwise.errors import InfeasibleError
from flopwise.specs.sla import SLA
from flopwise.techniques.scenario import Scenario

__all__ = ["SimWorkload", "simulated_throughput", "SIM_METHOD"]

SIM_METHOD = "simulated: highest Poisson request rate meeting the SLA's percentiles (vLLM v1 scheduler)"


@dataclass(frozen=True, slots=True)
class SimWorkload:
    """The stream to simulate: a named workload (lengths from it) or the scenario's fixed lengths."""

    name: str | None = None
    num_requests: int = 300
    seed: int = 0


def simulated_throughput(scn: Scenario, sla: SLA, wl: SimWorkload) -> float:
    """Output tokens/s at the highest rate meeting `sla`; 0 if even a low rate misses it."""
    from flopwise.sim import SimConfig, find_max_rate
    from flopwise.sim.steady import SteadyRule
    from flopwise.workload import build_workload
    from flopwise.workload.spec import Workload

    hit = scn.prefix_hit

    def workload_at(rate: float, n: int) -> Workload:
        lengths: dict[str, Any] = {} if wl.name else {"input_len": scn.input_len, "output_len": scn.output_len}
        w = build_workload(num_requests=n, workload=wl.name, request_rate=rate, seed=wl.seed, **lengths)
        reqs = tuple(replace(r, prefix_id=0 if hit else None, prefix_tokens=int(hit * r.input_tokens))
                     for r in w.requests)
        return Workload(reqs, w.concurrency, w.name)

    rule = SteadyRule(seed=wl.seed, min_window_requests=wl.num_requests)
    try:
        found = find_max_rate(scn.deployment, workload_at, sla, SimConfig(enable_prefix_caching=hit > 0, seed=wl.seed),
                              rule=rule)
    except InfeasibleError:
        return 0.0
    reqs = found.result.workload.requests
    return found.rate * sum(r.output_tokens for r in reqs) / len(reqs)  # at the sustained rate, not the drain
