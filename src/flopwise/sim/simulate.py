"""The simulator's front door: serve a workload on a deployment and summarise what users would see.

Replicas (`dep.replicas` > 1) are independent engines. Open-loop requests are routed round-robin in arrival
order (request i to replica i mod R); in a closed loop the N clients are split evenly and each keeps to one
replica. With static routing each replica is simulated on its own and the records are merged.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from flopwise.cost.fit import require_fit
from flopwise.cost.memory import memory_plan
from flopwise.metrics.summary import RequestRecord, summarize
from flopwise.sim.breakdown import PHASES, request_phases, time_breakdown
from flopwise.sim.config import SimConfig
from flopwise.sim.engine import run_engine
from flopwise.sim.request import Request
from flopwise.sim.sglang_scheduler import sglang_settings
from flopwise.sim.timeline import Timeline, timeline_summary
from flopwise.specs.deployment import Deployment
from flopwise.specs.sla import SLA
from flopwise.workload.spec import Workload

__all__ = ["SimResult", "simulate", "run_summary"]


@dataclass(slots=True, kw_only=True)
class SimResult:
    deployment: Deployment
    workload: Workload
    config: SimConfig
    records: list[RequestRecord]
    timelines: list[Timeline]
    requests: list[Request]
    phases: np.ndarray  # (requests, 5): where each request's time went (sim/breakdown.py), ms
    sla: SLA | None
    wall_s: float

    def summary(self) -> dict[str, Any]:
        """`metrics.summarize` keys, then engine state over time and the run's setup."""
        out = summarize(self.records, self.sla)
        prompt = sum(r.num_prompt_tokens for r in self.requests)
        cached = sum(r.num_cached_tokens for r in self.requests)
        out.update(run_summary(self.deployment, self.workload, self.config, self.timelines, self.phases,
                               out["duration_s"], cached / prompt if prompt else 0.0))
        out["sim_wall_s"] = self.wall_s
        return out

    def rows(self) -> list[dict[str, Any]]:
        """One row per request (for --output)."""
        rows = []
        for rec, req in zip(self.records, self.requests, strict=True):
            row = rec.to_row()
            row["cached_tokens"] = req.num_cached_tokens
            rows.append(row)
        return rows


def run_summary(d: Deployment, workload: Workload, config: SimConfig, timelines: list[Timeline], phases: np.ndarray,
                duration_s: float, prefix_cache_hit_rate: float) -> dict[str, Any]:
    """Everything a summary has beyond the latency keys of `metrics.summarize`: engine state over time, the
    prefix-cache hit rate, where the time went, the setup (shared with `cluster/`)."""
    out = timeline_summary(timelines, duration_s)
    out["prefix_cache_hit_rate"] = prefix_cache_hit_rate
    out.update(time_breakdown(phases, timelines, d, duration_s, out["busy_fraction"]))
    plan = memory_plan(d)
    out["setup"] = {
        "model": d.model.name, "gpu": d.hardware.id, "num_gpus": d.num_gpus, "tp": d.tp, "pp": d.pp,
        "replicas": d.replicas, "weights": d.weights.name, "kv": d.kv.name, "workload": workload.name,
        "concurrency": workload.concurrency, "scheduler": config.scheduler,
        "engine": d.engine.name, "frontend": "none" if d.engine.frontend is None else "http",
        "endpoint": None if d.engine.frontend is None else d.engine.frontend.endpoint,
        "gpu_memory_utilization": d.gpu_memory_utilization,
        "max_num_seqs": d.max_num_seqs, "max_num_batched_tokens": d.max_num_batched_tokens,
        "block_size": d.block_size, "enable_prefix_caching": config.enable_prefix_caching,
        "enable_chunked_prefill": config.enable_chunked_prefill, "num_kv_blocks": plan.num_blocks,
        "kv_capacity_tokens": plan.kv_capacity_tokens,
        "speculative": d.speculative.text() if d.speculative else None,
    }
    if d.speculative is not None:
        out["speculative"] = _speculative_summary(timelines, d)
    if config.scheduler == "sglang":  # its own knobs stand in for max_num_seqs / max_num_batched_tokens
        out["setup"]["sglang"] = sglang_settings(d, config)
    return out


def _speculative_summary(timelines: list[Timeline], dep: Deployment) -> dict[str, Any]:
    """What speculation delivered: tokens per verified decode (the measured mean acceptance length, bonus
    token included; capped at each request's end) next to the model's E[tokens]."""
    spec = dep.speculative
    assert spec is not None
    rows = sum(t.num_verified_decodes for t in timelines)
    tokens = sum(t.num_verified_tokens for t in timelines)
    return {"method": spec.method, "k": spec.k, "verified_positions": spec.positions, "alpha": spec.rate,
            "expected_tokens_per_step": spec.tokens_per_step, "num_verified_decodes": rows,
            "tokens_per_verified_decode": tokens / rows if rows else None}


def _records(requests: list[Request], tl: Timeline) -> list[RequestRecord]:
    """Token instants looked up in the step timeline (a list: slicing it is cheaper than numpy per request):
    when the client received each step's tokens (behind an API server) or the step's end (offline)."""
    ends = (tl.delivered_at if len(tl.delivered_at) else tl.step_end_at).tolist()
    out = []
    for r in requests:
        s = r.token_steps
        if len(s) == 2:
            times = ends[s[0]:s[1]]
        else:
            times = [t for a, b in zip(s[::2], s[1::2], strict=False) for t in ends[a:b]]
        out.append(RequestRecord(request_id=r.request_id, arrival_at=r.arrival_at, input_tokens=r.num_prompt_tokens,
                                 output_tokens=r.max_tokens, first_scheduled_at=r.first_scheduled_at, token_times=times,
                                 preemptions=r.num_preemptions))
    return out


def simulate(dep: Deployment, workload: Workload, config: SimConfig | None = None, *, sla: SLA | None = None,
             progress: Callable[[int], None] | None = None) -> SimResult:
    """Serve `workload` on `dep`. `progress(n)` is called as n more requests complete."""
    config = (config or SimConfig()).resolved(dep)
    require_fit(dep)
    t0 = time.perf_counter()
    items = list(enumerate(workload.requests))
    n_rep = dep.replicas
    requests: list[Request] = []
    records: list[RequestRecord] = []
    phases: list[np.ndarray] = []
    timelines = []
    for rep in range(n_rep):
        part = items[rep::n_rep]
        if not part:
            continue
        conc = None
        if workload.concurrency is not None:
            conc = workload.concurrency // n_rep + (rep < workload.concurrency % n_rep)
            if conc == 0:
                continue
        reqs, tl = run_engine(dep, part, conc, config, progress, replica=rep)
        requests.extend(reqs)
        records.extend(_records(reqs, tl))
        phases.append(request_phases(reqs, tl))
        timelines.append(tl)
    order = sorted(range(len(requests)), key=lambda i: requests[i].request_id)
    table = np.concatenate(phases)[order] if phases else np.empty((0, len(PHASES)))
    return SimResult(deployment=dep, workload=workload, config=config, records=[records[i] for i in order],
                     timelines=timelines, requests=[requests[i] for i in order], phases=table, sla=sla,
                     wall_s=time.perf_counter() - t0)
