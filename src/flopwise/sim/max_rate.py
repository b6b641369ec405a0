"""The highest request rate whose latency percentiles meet an SLA: the capacity figure a planner needs.

1. Simulate at an infinite rate: the completed-request throughput X estimates capacity (it includes the
   drain at the end, so a finite sample can sustain a little more).
2. Probe X / 64 (if that fails, no rate does); then X, 2X, 4X, ... while they pass, to bracket the answer.
3. Bisect the bracket for `iterations` rounds. Every probe uses the same seed, so it sees the same request
   lengths (common random numbers); a probe passes when all the SLA's percentile objectives hold (`sla_met`).
Latency grows with rate only statistically, so the answer is that of this request sample; raise
--num-requests for a steadier figure.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from flopwise.errors import InfeasibleError
from flopwise.sim.config import SimConfig
from flopwise.sim.simulate import SimResult, simulate
from flopwise.specs.deployment import Deployment
from flopwise.specs.sla import SLA
from flopwise.workload.spec import Workload

__all__ = ["MaxRate", "find_max_rate", "bisect_max_rate"]


@dataclass(frozen=True, slots=True)
class MaxRate:
    rate: float  # requests/s
    result: SimResult  # the run at that rate (a fleet's result for `bisect_max_rate` over a fleet)
    upper_bound: float  # throughput at an infinite rate (a capacity estimate)
    probes: tuple[tuple[float, bool], ...]


def find_max_rate(dep: Deployment, workload_at: Callable[[float], Workload], sla: SLA,
                  config: SimConfig | None = None, *, iterations: int = 8) -> MaxRate:
    """`workload_at(rate)` builds the request stream at a rate (math.inf for the bound)."""
    return bisect_max_rate(lambda rate: simulate(dep, workload_at(rate), config, sla=sla), iterations=iterations)


def bisect_max_rate(run_at: Callable[[float], Any], *, iterations: int = 8) -> MaxRate:
    """The search above over any simulation: `run_at(rate)` returns a result whose `summary()` has
    `request_throughput`, `sla_met` and `sla_objectives_met` (a SimResult, or a fleet's result)."""
    bound = run_at(math.inf).summary()["request_throughput"]
    probes: list[tuple[float, bool]] = []

    def probe(rate: float) -> tuple[bool, Any]:
        res = run_at(rate)
        ok = bool(res.summary()["sla_met"])
        probes.append((rate, ok))
        return ok, res

    lo = bound / 64
    ok, best = probe(lo)
    if not ok:
        s = best.summary()
        failed = ", ".join(k for k, v in s["sla_objectives_met"].items() if not v)
        raise InfeasibleError(f"the SLA fails even at {lo:.3g} req/s ({failed}); relax it or use a faster "
                              "deployment (more GPUs, a smaller weight format)")
    lo_res, hi = best, bound
    for _ in range(6):
        ok, res = probe(hi)
        if not ok:
            break
        lo, lo_res, hi = hi, res, 2 * hi
    else:
        return MaxRate(lo, lo_res, bound, tuple(probes))
    best = lo_res
    for _ in range(iterations):
        mid = (lo + hi) / 2
        ok, res = probe(mid)
        if ok:
            lo, best = mid, res
        else:
            hi = mid
    return MaxRate(lo, best, bound, tuple(probes))
