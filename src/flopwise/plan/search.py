"""The planner: enumerate candidates, prune with closed-form bounds, simulate the rest, rank, and explain.

Search (branch and bound over the bounds in `bounds.py`):
1. Enumerate every candidate that fits (`space.py`); drop those whose lone-request latency already breaks
   the SLA.
2. Order the rest by their capacity ceiling on the objective's axis (goodput per GPU, or output tokens per
   dollar) and simulate them in waves of one per CPU core (`find_max_rate`).
3. Skip a candidate when an evaluated one already beats its ceiling on the objective's axis by the bound's
   margin. The Pareto frontier is drawn over the simulated candidates.
Ranking: by the objective's axis, ties by tokens/s per user, so no dominated config ranks above one that
dominates it on the frontier's axes.
"""

from __future__ import annotations

import math
import multiprocessing
import os
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from flopwise.errors import InfeasibleError, WorkloadError
from flopwise.plan.bounds import Bounds, bounds
from flopwise.plan.evaluate import Evaluation, Infeasible, evaluate
from flopwise.plan.launch import LaunchCommands, Speculative, launch_commands
from flopwise.plan.pareto import pareto_front
from flopwise.plan.space import Candidate, SearchSpace, enumerate_candidates, require_candidates
from flopwise.plan.tradeoffs import Tradeoff, tradeoffs
from flopwise.sim.config import SimConfig
from flopwise.sim.simulate import simulate
from flopwise.specs.hardware import get_hardware
from flopwise.specs.model import ModelSpec
from flopwise.specs.model_catalog import get_model
from flopwise.specs.sla import SLA, parse_sla
from flopwise.workload.build import build_workload
from flopwise.workload.spec import Workload

__all__ = ["PlanRequest", "PlanResult", "plan", "plan_to_dict", "OBJECTIVES"]

OBJECTIVES = ("goodput", "cost", "latency")
_BOUND_MARGIN = 1.25  # the capacity ceiling is a heuristic bound: keep candidates within 25% of it


@dataclass(frozen=True, slots=True)
class PlanRequest:
    model: str = "meta-llama/Llama-3.1-8B"
    workload: str = "chat"
    input_len: int | None = None
    output_len: int | None = None
    rate: float | None = None  # total requests/s to serve; None = report per-replica capacity only
    sla: str = "p95_ttft<=300ms,p95_tpot<=50ms"
    objective: str = "goodput"
    space: SearchSpace = field(default_factory=SearchSpace)
    num_requests: int = 200
    seed: int = 0
    hardware_file: str | None = None
    workers: int | None = None  # processes; default: CPU count

    def __post_init__(self) -> None:
        if self.objective not in OBJECTIVES:
            raise WorkloadError(f"unknown objective '{self.objective}'; choose one of {', '.join(OBJECTIVES)}")
        if self.rate is not None and not self.rate > 0:
            raise WorkloadError(f"--rate must be > 0 requests/s, got {self.rate}")
        if self.num_requests < 20:
            raise WorkloadError(f"--num-requests must be >= 20 for stable percentiles, got {self.num_requests}")


@dataclass(slots=True)
class PlanResult:
    request: PlanRequest
    sla: SLA
    model: ModelSpec
    ranked: list[Evaluation]
    frontier: list[Evaluation]
    infeasible: list[Infeasible]
    pruned: list[tuple[Candidate, str]]
    not_fitting: list[str]
    launch: LaunchCommands | None
    max_len: int
    wall_s: float
    tradeoffs: list[Tradeoff] = field(default_factory=list)
    latency_vs_rate: list[dict[str, float]] = field(default_factory=list)  # the chosen config, swept

    @property
    def best(self) -> Evaluation | None:
        return self.ranked[0] if self.ranked else None


def _axes(objective: str) -> Callable[[Evaluation], tuple[float, float]]:
    if objective == "cost":
        return lambda e: (1e6 / e.cost_per_1m_tokens if e.cost_per_1m_tokens else 0.0, e.tokens_per_s_per_user)
    if objective == "latency":
        return lambda e: (e.tokens_per_s_per_user, e.goodput_per_gpu)
    return lambda e: (e.goodput_per_gpu, e.tokens_per_s_per_user)


def _ceiling_axes(objective: str, cand: Candidate, b: Bounds, mean_out: float) -> tuple[float, float]:
    per_user = 1e3 / b.tpot_floor_ms
    gpus = cand.deployment.gpus_per_replica
    if objective == "cost":
        price = cand.deployment.hardware.price_per_hour_usd
        tokens_per_dollar = b.max_rate_ceiling * mean_out * 3600 / (price * gpus) if price else 0.0
        return tokens_per_dollar, per_user
    if objective == "latency":
        return per_user, b.max_rate_ceiling / gpus
    return b.max_rate_ceiling / gpus, per_user


def _workload_at(req: PlanRequest, rate: float) -> Workload:
    return build_workload(num_requests=req.num_requests, workload=req.workload, input_len=req.input_len,
                          output_len=req.output_len, request_rate=rate, seed=req.seed)


def _evaluate_job(req: PlanRequest, sla: SLA, item: tuple[Candidate, float]) -> Evaluation | Infeasible:
    cand, low_rate = item
    return evaluate(cand, partial(_workload_at, req), sla, low_rate, seed=req.seed)


def plan(req: PlanRequest, progress: Callable[[int, int], None] | None = None) -> PlanResult:
    """Search `req.space` for the deployments that serve `req.workload` within `req.sla`."""
    t0 = time.perf_counter()
    sla = parse_sla(req.sla)
    model = get_model(req.model)
    hardware = [get_hardware(g, req.hardware_file) for g in req.space.gpus]
    sample = _workload_at(req, math.inf)
    mean_in = sum(r.input_tokens for r in sample.requests) / len(sample.requests)
    mean_out = sum(r.output_tokens for r in sample.requests) / len(sample.requests)
    max_len = max(r.input_tokens + r.output_tokens for r in sample.requests)
    cached_share = sum(r.prefix_tokens for r in sample.requests) / sum(r.input_tokens for r in sample.requests)
    cands, misses = enumerate_candidates(model, hardware, req.space, max_len)
    require_candidates(cands, misses, model)
    objective = req.objective

    pruned: list[tuple[Candidate, str]] = []
    live: list[tuple[Candidate, Bounds, tuple[float, float]]] = []
    for c in cands:
        b = bounds(c.deployment, sla, round(mean_in), round(mean_out), cached_share if c.prefix_caching else 0.0)
        if not b.feasible:
            pruned.append((c, b.reason or "infeasible"))
        else:
            live.append((c, b, _ceiling_axes(objective, c, b, mean_out)))
    live.sort(key=lambda t: (-t[2][0], -t[2][1]))

    axes = _axes(objective)
    evaluated: list[Evaluation] = []
    infeasible: list[Infeasible] = [Infeasible(c, reason) for c, reason in pruned]
    workers = max(1, req.workers or os.cpu_count() or 1)
    job = partial(_evaluate_job, req, sla)
    pool = (ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork"))
            if workers > 1 and len(live) > 1 else None)
    done = 0
    try:
        queue = list(live)
        while queue:
            wave, queue = queue[:workers], queue[workers:]
            items = [(c, b.max_rate_ceiling / 64) for c, b, _ in wave]
            results = list(pool.map(job, items)) if pool else [job(i) for i in items]
            for r in results:
                (evaluated if isinstance(r, Evaluation) else infeasible).append(r)
            done += len(wave)
            kept = []
            for c, b, ceil in queue:
                beaten = next((e for e in evaluated if axes(e)[0] >= ceil[0] * _BOUND_MARGIN), None)
                if beaten is not None:
                    pruned.append((c, f"bound: cannot beat {beaten.candidate.label}"))
                    done += 1
                else:
                    kept.append((c, b, ceil))
            queue = kept
            if progress:
                progress(done, len(live))
    finally:
        if pool:
            pool.shutdown()

    ranked = sorted(evaluated, key=lambda e: (-axes(e)[0], -axes(e)[1]))
    frontier = pareto_front(evaluated, axes)
    best = ranked[0] if ranked else None
    launch = None
    if best is not None:
        dep = best.candidate.deployment
        launch = launch_commands(dep, max_model_len=max_len, prefix_caching=best.candidate.prefix_caching,
                                 model_id=model.name, speculative=Speculative.of(dep.speculative))
    result = PlanResult(req, sla, model, ranked, frontier, infeasible, pruned, misses, launch, max_len, 0.0)
    if not ranked:
        raise InfeasibleError(_infeasible_message(result))
    result.tradeoffs = tradeoffs(ranked)
    result.latency_vs_rate = _sweep(req, sla, ranked[0])
    result.wall_s = time.perf_counter() - t0
    return result


def _sweep(req: PlanRequest, sla: SLA, e: Evaluation) -> list[dict[str, float]]:
    """Latency percentiles of the chosen config at 25%..125% of its max rate (same request sample)."""
    out = []
    config = SimConfig(enable_prefix_caching=e.candidate.prefix_caching, seed=req.seed)
    for f in (0.25, 0.5, 0.75, 1.0, 1.25):
        s = simulate(e.candidate.deployment, _workload_at(req, e.max_rate * f), config, sla=sla).summary()
        out.append({"rate": e.max_rate * f, **{f"{st}_{m}": s[f"{m}_ms"][st] for m in ("ttft", "tpot")
                                               for st in ("p50", "p95", "p99")}})
    return out


def _infeasible_message(r: PlanResult) -> str:
    """No config meets the SLA: name the closest ones and which objective failed by how much."""
    scored = [i for i in r.infeasible if i.misses]
    scored.sort(key=lambda i: max(i.misses.values()))
    lines = [f"no configuration in the space meets {r.sla} for {r.model.name}."]
    for i in scored[:3]:
        worst = ", ".join(f"{k} missed by {(v - 1) * 100:.0f}%" for k, v in i.misses.items() if v > 1)
        lines.append(f"closest: {i.candidate.label} ({worst})")
    if not scored:
        for i in r.infeasible[:3]:
            lines.append(f"{i.candidate.label}: {i.reason}")
    lines.append("Relax the SLA, allow more GPUs (--max-gpus) or faster GPUs (--gpus).")
    return " ".join(lines)


def plan_to_dict(r: PlanResult) -> dict[str, Any]:
    rate = r.request.rate

    def row(e: Evaluation) -> dict[str, Any]:
        d = e.candidate.deployment
        s = e.summary
        reps = e.replicas_for(rate)
        return {
            "config": e.candidate.label, "gpu": d.hardware.id, "tp": d.tp, "pp": d.pp, "weights": d.weights.name,
            "kv": d.kv.name, "max_num_seqs": d.max_num_seqs, "max_num_batched_tokens": d.max_num_batched_tokens,
            "enable_prefix_caching": e.candidate.prefix_caching, "gpus_per_replica": e.gpus,
            "speculative": d.speculative.text() if d.speculative else None,
            "max_rate_per_replica": e.max_rate, "goodput_per_gpu": e.goodput_per_gpu,
            "output_tokens_per_s_per_gpu": e.output_tokens_per_s_per_gpu,
            "tokens_per_s_per_user": e.tokens_per_s_per_user, "cost_per_1m_tokens": e.cost_per_1m_tokens,
            "p95_ttft_ms": s["ttft_ms"]["p95"], "p95_tpot_ms": s["tpot_ms"]["p95"],
            "memory_headroom_gib": e.memory_headroom_gib, "binds": e.binds(r.sla),
            "replicas": reps, "total_gpus": reps * e.gpus,
        }

    return {
        "model": r.model.name, "workload": r.request.workload, "sla": str(r.sla), "objective": r.request.objective,
        "rate": rate, "max_model_len": r.max_len,
        "best": row(r.best) if r.best else None,
        "ranked": [row(e) for e in r.ranked],
        "pareto_frontier": [row(e) for e in r.frontier],
        "infeasible": [{"config": i.candidate.label, "reason": i.reason, "misses": i.misses} for i in r.infeasible],
        "pruned": [{"config": c.label, "reason": why} for c, why in r.pruned],
        "not_fitting": r.not_fitting,
        "launch": r.launch.to_dict() if r.launch else None,
        "tradeoffs": [t.to_dict() for t in r.tradeoffs],
        "latency_vs_rate": r.latency_vs_rate,
        "num_candidates": len(r.ranked) + len(r.infeasible) + len(r.pruned),
        "num_simulated": len(r.ranked) + sum(1 for i in r.infeasible if i.misses),
        "wall_s": r.wall_s,
    }
