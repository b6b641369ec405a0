"""Evaluate one candidate: its sustained capacity under the SLA (simulated), with an interval, its cost, and
what binds.

    max_rate            the highest request rate per replica that the sustained-rate rule accepts
                        (`flopwise.sim.find_max_rate`: steady state after a warm-up, no growing backlog, never
                        above the closed-form ceiling), with `rate_interval` (a block bootstrap over the
                        measured window widened by its own load, `sim/steady.py`) and `paired_rate_interval` (the
                        bootstrap's part: candidates probed on one stream share its load, so they are compared on
                        this one)
    goodput_per_gpu     max_rate * SLA attainment over the window / GPUs of the replica: requests per second that
                        meet every per-request bound, at the offered load
    output tok/s / GPU  max_rate * mean output tokens / GPUs
    replicas            ceil(target_rate / max_rate), for the requested total rate
    cost_per_1m_tokens  price_per_hour * gpus_per_replica / 3600 / output_tokens_per_s_per_replica * 1e6 (USD)
    binds               "KV capacity" if the run preempted or filled the KV cache (> 95%), else the SLA objective
                        nearest to its limit on the window (TTFT or TPOT); when every objective keeps more than
                        20% headroom, what saturates first: "API server" (the frontend stage, `sim/breakdown.py`;
                        more API processes, `--api-servers`, lift it) or "compute" (the engine)
    at_load             the latency objective: tokens/s per user at a stated offered load (`LoadPoint`)
Every figure that scales with the rate carries the rate's interval (`value`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from flopwise.cost.memory import memory_plan
from flopwise.errors import InfeasibleError
from flopwise.metrics.summary import RequestRecord, RunSummary
from flopwise.plan.space import Candidate
from flopwise.sim.config import SimConfig
from flopwise.sim.max_rate import find_max_rate, probe_rate, widen_log
from flopwise.sim.simulate import SimSummary
from flopwise.sim.steady import Probe, ProbeSize, SteadyRule, load_cv2
from flopwise.specs.defaults import KV_FULL
from flopwise.specs.hardware import GIB
from flopwise.specs.sla import SLA
from flopwise.workload.spec import Workload

AT_LOAD_STEP = 1.1  # the latency objective's second probe, x the stated load: the speed's local elasticity to it

__all__ = ["Evaluation", "evaluate", "Infeasible", "LoadPoint", "measure_at_load", "latency_point", "OBJECTIVES"]

OBJECTIVES = ("goodput", "throughput", "cost", "latency")
WorkloadAt = Callable[[float, int], Workload]


@dataclass(frozen=True, slots=True)
class Infeasible:
    candidate: Candidate
    reason: str
    # for "closest configs": how far each failed objective was from its limit at the lowest rate probed
    misses: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True, slots=True, kw_only=True)
class LoadPoint:
    """One candidate at a stated offered load, per replica (the latency objective)."""

    rate_per_replica: float
    replicas: int
    tokens_per_s_per_user: float
    interval: tuple[float, float]  # of tokens_per_s_per_user (`measure_at_load`)
    # the bootstrap's part of it: candidates measured on one stream share its load, so they are compared on this
    paired_interval: tuple[float, float]
    p95_ttft_ms: float | None
    p95_tpot_ms: float | None
    sustained: bool  # the rule accepted the load (else the replica cannot carry it)
    num_simulated_requests: int = 0  # over both probes (the load and AT_LOAD_STEP x it)

    def to_dict(self) -> dict[str, Any]:
        return {"request_rate_per_replica": self.rate_per_replica, "replicas": self.replicas,
                "tokens_per_s_per_user": self.tokens_per_s_per_user,
                "tokens_per_s_per_user_interval": list(self.interval),
                "tokens_per_s_per_user_paired_interval": list(self.paired_interval), "p95_ttft_ms": self.p95_ttft_ms,
                "p95_tpot_ms": self.p95_tpot_ms, "sustained": self.sustained,
                "num_simulated_requests": self.num_simulated_requests}


@dataclass(frozen=True, slots=True, kw_only=True)
class Evaluation:
    candidate: Candidate
    max_rate: float
    upper_bound_rate: float
    window: RunSummary  # latencies, goodput and SLA figures over the measured window at max_rate
    run: SimSummary  # the whole run at max_rate: engine state, preemptions, where the time went
    mean_output_tokens: float
    rate_interval: tuple[float, float] = (0.0, 0.0)
    paired_rate_interval: tuple[float, float] = (0.0, 0.0)  # the bootstrap's part (`MaxRate.paired_interval`)
    effort: float = 1.0
    capped: bool = False  # the rule still held at the closed-form ceiling
    num_probes: int = 0
    num_simulated_requests: int = 0
    at_load: LoadPoint | None = None
    trail: tuple[dict[str, Any], ...] = ()  # each probe of the search: rate, latency percentiles, sustained

    @property
    def gpus(self) -> int:
        return self.candidate.deployment.gpus_per_replica

    @property
    def attainment(self) -> float:
        return self.window.sla_attainment

    @property
    def goodput_per_gpu(self) -> float:
        return self.max_rate * self.attainment / self.gpus

    @property
    def output_tokens_per_s(self) -> float:
        """Per replica, at the operating point."""
        return self.max_rate * self.mean_output_tokens

    @property
    def output_tokens_per_s_per_gpu(self) -> float:
        return self.output_tokens_per_s / self.gpus

    @property
    def tokens_per_s_per_user(self) -> float:
        tpot = self.window.tpot_ms.mean
        return 1e3 / tpot if tpot else 0.0

    @property
    def price_per_hour(self) -> float | None:
        return self.candidate.deployment.hardware.price_per_hour_usd

    @property
    def cost_per_1m_tokens(self) -> float | None:
        price, tps = self.price_per_hour, self.output_tokens_per_s
        if price is None or not tps:
            return None
        return price * self.gpus / 3600.0 / tps * 1e6

    def replicas_for(self, rate: float | None) -> int:
        return 1 if not rate else max(1, math.ceil(rate / self.max_rate - 1e-9))

    def _per_rate(self, objective: str) -> float:
        """The objective's axis per request/s of max_rate (every capacity axis is proportional to it)."""
        if objective == "goodput":
            return self.attainment / self.gpus
        if objective == "throughput":
            return self.mean_output_tokens / self.gpus
        if objective == "cost":  # output tokens per dollar
            price = self.price_per_hour
            return self.mean_output_tokens * 3600.0 / (price * self.gpus) if price else 0.0
        raise ValueError(objective)

    def value(self, objective: str, *, paired: bool = False) -> tuple[float, float, float]:
        """(point, low, high) on the objective's axis, higher is better: goodput per GPU (req/s), output tok/s
        per GPU, output tokens per dollar, or tokens/s per user at the stated load (latency). `paired`: the
        interval that compares candidates probed on the same stream (`paired_rate_interval`)."""
        if objective == "latency":
            if self.at_load is None:
                return (0.0, 0.0, 0.0)
            lo, hi = self.at_load.paired_interval if paired else self.at_load.interval
            return (self.at_load.tokens_per_s_per_user, lo, hi)
        k = self._per_rate(objective)
        lo, hi = self.paired_rate_interval if paired else self.rate_interval
        return (self.max_rate * k, lo * k, hi * k)

    @property
    def memory_headroom_gib(self) -> float:
        plan = memory_plan(self.candidate.deployment)
        used = self.run.engine.kv_utilization_max * plan.kv_pool_bytes
        return (plan.kv_pool_bytes - used) / GIB

    def binds(self, sla: SLA) -> str:
        if self.run.run.preemptions > 0 or self.run.engine.kv_utilization_max >= KV_FULL:
            return "KV capacity"
        ratios = {}
        for o in sla.objectives:
            v = self.window.latency(o.metric).get(o.stat)
            if v is not None:
                ratios[o.metric.upper()] = v / o.limit_ms
        if not ratios or max(ratios.values()) < 0.8:
            return "API server" if self.run.breakdown.bottleneck == "frontend" else "compute"
        return max(ratios, key=ratios.__getitem__)


def evaluate(cand: Candidate, workload_at: WorkloadAt, sla: SLA, *, rule: SteadyRule, size: ProbeSize,
             ceiling: float, e2e_s: float, start: float | None = None, seed: int = 0,
             max_probes: int = 9) -> Evaluation | Infeasible:
    """Sustained capacity of one candidate; when even a light load misses the SLA, how far each objective is
    from its limit there (value / limit)."""
    config = SimConfig(enable_prefix_caching=cand.prefix_caching, seed=seed)
    try:
        mr = find_max_rate(cand.deployment, workload_at, sla, config, rule=rule, ceiling=ceiling, size=size,
                           e2e_s=e2e_s, start=start, max_probes=max_probes)
    except InfeasibleError as e:
        low = probe_rate(cand.deployment, workload_at, sla, config, rule, ceiling / 64, size)
        misses = {k: v / o.limit_ms for o in sla.objectives if (v := low.values.get(k := str(o))) is not None}
        return Infeasible(cand, str(e), misses)
    reqs = mr.result.workload.requests
    run = mr.result.report()
    window = mr.probe.summary if mr.probe is not None else run.run
    return Evaluation(candidate=cand, max_rate=mr.rate, upper_bound_rate=mr.upper_bound, window=window, run=run,
                      mean_output_tokens=sum(r.output_tokens for r in reqs) / len(reqs), rate_interval=mr.interval,
                      paired_rate_interval=mr.paired_interval, effort=rule.effort, capped=mr.capped,
                      num_probes=len(mr.trail),
                      num_simulated_requests=sum(p.num_requests for p in mr.trail),
                      trail=tuple(latency_point(p.rate, p.summary, p.ok) for p in mr.trail))


def latency_point(rate: float, s: RunSummary, sustained: bool) -> dict[str, Any]:
    """One point of a latency-vs-rate sweep: the window's TTFT and TPOT percentiles (ms) at `rate`."""
    return {"rate": rate,
            **{f"{st}_{m}": s.latency(m).get(st) for m in ("ttft", "tpot") for st in ("p50", "p95", "p99")},
            "sustained": sustained}


def measure_at_load(e: Evaluation, workload_at: WorkloadAt, sla: SLA, *, rule: SteadyRule, size: ProbeSize,
                    rate_per_replica: float, replicas: int, seed: int = 0) -> LoadPoint:
    """Tokens/s per user (1000 / mean TPOT over the window) at one offered load per replica, with a block
    bootstrap interval of the mean TPOT (`paired_interval`) widened by the window's own load in tokens (the speed
    follows the decode batch; `sim/steady.py`): the speed moves with the load by its elasticity
    eta = -dlog(speed) / dlog(load),
    measured by a second probe at `AT_LOAD_STEP` x the load on the same stream, so the widening is
    z * eta * sqrt(load_cv2 / n) in log space."""
    cand = e.candidate
    config = SimConfig(enable_prefix_caching=cand.prefix_caching, seed=seed)
    p = probe_rate(cand.deployment, workload_at, sla, config, rule, rate_per_replica, size)
    window = _window(p, size)
    tpots = _tpots(window)
    if not tpots:
        return LoadPoint(rate_per_replica=rate_per_replica, replicas=replicas, tokens_per_s_per_user=0.0,
                         interval=(0.0, 0.0), paired_interval=(0.0, 0.0), p95_ttft_ms=None, p95_tpot_ms=None,
                         sustained=p.ok, num_simulated_requests=p.num_requests)
    point = _per_user(tpots)
    k = min(rule.num_batches, max(1, len(tpots) // 2))
    parts = np.array_split(np.asarray(tpots), k)
    sums, counts = np.array([x.sum() for x in parts]), np.array([len(x) for x in parts], float)
    picks = np.random.default_rng(rule.seed).integers(k, size=(rule.num_bootstrap, k))
    boot = 1e3 * counts[picks].sum(axis=1) / sums[picks].sum(axis=1)
    tail = (1 - rule.confidence) / 2 * 100
    lo, hi = np.percentile(boot, [tail, 100 - tail])
    paired = (float(min(lo, point)), float(max(hi, point)))
    step = probe_rate(cand.deployment, workload_at, sla, config, rule, rate_per_replica * AT_LOAD_STEP, size)
    stepped = _tpots(_window(step, size))
    eta = max(0.0, math.log(point / _per_user(stepped)) / math.log(AT_LOAD_STEP)) if stepped else 0.0
    # the speed follows the decode batch, so the window's load in tokens (not the prompts' squares a TTFT bound uses)
    widened = widen_log(point, *paired, rule.z * eta * math.sqrt(load_cv2(window) / max(1, len(window))))
    return LoadPoint(rate_per_replica=rate_per_replica, replicas=replicas, tokens_per_s_per_user=point,
                     interval=widened, paired_interval=paired,
                     p95_ttft_ms=p.summary.ttft_ms.p95, p95_tpot_ms=p.summary.tpot_ms.p95,
                     sustained=p.ok, num_simulated_requests=p.num_requests + step.num_requests)


def _window(p: Probe, size: ProbeSize) -> list[RequestRecord]:
    """The probe's measured window (the records `steady.measure` judged)."""
    return size.window(p.result.records)


def _tpots(window: list[RequestRecord]) -> list[float]:
    """The TPOT (ms) of each completed request of the window that has one."""
    return [t for r in window if r.ok and (t := r.tpot_ms) is not None]


def _per_user(tpots: list[float]) -> float:
    """Tokens/s per user: 1000 / the mean of these TPOTs (ms; at least one)."""
    return 1e3 * len(tpots) / sum(tpots)
