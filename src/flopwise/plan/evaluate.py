"""Evaluate one candidate: its capacity under the SLA (simulated), cost, and what binds.

    max_rate            highest request rate per replica whose simulated percentiles meet the SLA
                        (`flopwise.sim.find_max_rate`)
    goodput_per_gpu     max_rate * SLA attainment at that rate / GPUs of the replica: requests per second that
                        meet every per-request bound, at the offered load (a finite run's own
                        completions-over-wall-time would count its drain tail against it)
    output tok/s / GPU  max_rate * mean output tokens / GPUs
    replicas            ceil(target_rate / max_rate), for the requested total rate
    cost_per_1m_tokens  price_per_hour * gpus_per_replica / 3600 / output_tokens_per_s_per_replica * 1e6 (USD)
    binds               "KV capacity" if the run preempted or filled the KV cache (> 95%), "compute" if the SLA
                        still held at an unbounded rate (throughput-bound), else the SLA objective nearest to its
                        limit at the operating point (TTFT or TPOT); "compute" when every objective keeps
                        more than 20% headroom (the engine saturates before latency does)
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from flopwise.cost.memory import memory_plan
from flopwise.errors import InfeasibleError
from flopwise.plan.space import Candidate
from flopwise.sim.config import SimConfig
from flopwise.sim.max_rate import find_max_rate
from flopwise.sim.simulate import simulate
from flopwise.specs.hardware import GIB
from flopwise.specs.sla import SLA
from flopwise.workload.spec import Workload

__all__ = ["Evaluation", "evaluate", "Infeasible"]


@dataclass(frozen=True, slots=True)
class Infeasible:
    candidate: Candidate
    reason: str
    # for "closest configs": how far each failed objective was from its limit at the lowest rate probed
    misses: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Evaluation:
    candidate: Candidate
    max_rate: float
    upper_bound_rate: float
    summary: dict[str, Any]
    mean_output_tokens: float

    @property
    def gpus(self) -> int:
        return self.candidate.deployment.gpus_per_replica

    @property
    def goodput_per_gpu(self) -> float:
        return self.max_rate * self.summary["sla_attainment"] / self.gpus

    @property
    def output_tokens_per_s(self) -> float:
        """Per replica, at the operating point."""
        return self.max_rate * self.mean_output_tokens

    @property
    def output_tokens_per_s_per_gpu(self) -> float:
        return self.output_tokens_per_s / self.gpus

    @property
    def tokens_per_s_per_user(self) -> float:
        tpot = self.summary["tpot_ms"]["mean"]
        return 1e3 / tpot if tpot else 0.0

    @property
    def cost_per_1m_tokens(self) -> float | None:
        price = self.candidate.deployment.hardware.price_per_hour_usd
        tps = self.output_tokens_per_s
        if price is None or not tps:
            return None
        return price * self.gpus / 3600.0 / tps * 1e6

    def replicas_for(self, rate: float | None) -> int:
        return 1 if not rate else max(1, math.ceil(rate / self.max_rate - 1e-9))

    @property
    def memory_headroom_gib(self) -> float:
        plan = memory_plan(self.candidate.deployment)
        used = self.summary.get("kv_utilization", {}).get("max", 0.0) * plan.kv_pool_bytes
        return (plan.kv_pool_bytes - used) / GIB

    def binds(self, sla: SLA) -> str:
        s = self.summary
        if s.get("preemptions", 0) > 0 or s.get("kv_utilization", {}).get("max", 0.0) > 0.95:
            return "KV capacity"
        ratios = {}
        for o in sla.objectives:
            v = s[f"{o.metric}_ms"].get(o.stat)
            if v is not None:
                ratios[o.metric.upper()] = v / o.limit_ms
        if not ratios or max(ratios.values()) < 0.8:
            return "compute"
        return max(ratios, key=ratios.__getitem__)


def evaluate(cand: Candidate, workload_at: Callable[[float], Workload], sla: SLA, low_rate: float,
             iterations: int = 5, seed: int = 0) -> Evaluation | Infeasible:
    """Simulated capacity of one candidate; when even a light load (`low_rate`) misses the SLA, how far each
    objective is from its limit there (value / limit)."""
    config = SimConfig(enable_prefix_caching=cand.prefix_caching, seed=seed)
    try:
        mr = find_max_rate(cand.deployment, workload_at, sla, config, iterations=iterations)
    except InfeasibleError as e:
        s = simulate(cand.deployment, workload_at(low_rate), config, sla=sla).summary()
        misses = {str(o): s[f"{o.metric}_ms"].get(o.stat) / o.limit_ms for o in sla.objectives
                  if s[f"{o.metric}_ms"].get(o.stat) is not None}
        return Infeasible(cand, str(e), misses)
    reqs = mr.result.workload.requests
    return Evaluation(cand, mr.rate, mr.upper_bound, mr.result.summary(),
                      sum(r.output_tokens for r in reqs) / len(reqs))
