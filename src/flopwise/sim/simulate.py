"""The simulator's front door: serve a workload on a deployment and summarise what users would see.

Replicas (`dep.replicas` > 1) are independent engines. Open-loop requests are routed round-robin in arrival
order (request i to replica i mod R); in a closed loop the N clients are split evenly and each keeps to one
replica. With static routing each replica is simulated on its own and the records are merged; replicas behind one
server (`dep.replicas_per_server`) each see their share of its API server (`Deployment.frontend`).
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

import numpy as np

from flopwise.cost.fit import require_fit
from flopwise.cost.memory import memory_plan
from flopwise.metrics.summary import RequestRecord, RunSummary, summarize
from flopwise.sim.breakdown import PHASES, TimeBreakdown, request_phases, time_breakdown
from flopwise.sim.config import SimConfig
from flopwise.sim.engine import run_engine
from flopwise.sim.frontend import hidden_tokens
from flopwise.sim.request import Request, visible_steps
from flopwise.sim.sglang_scheduler import sglang_settings
from flopwise.sim.timeline import EngineState, Timeline, engine_state
from flopwise.specs.deployment import Deployment
from flopwise.specs.sla import SLA
from flopwise.workload.spec import Workload

__all__ = ["SimResult", "SimSummary", "RunResult", "simulate", "sim_summary", "step_events"]


class RunResult(Protocol):
    """What a simulated run gives those who judge it (`steady.py`, `max_rate.py`): one replica's `SimResult` or a
    fleet's (`cluster.FleetResult`, exact metrics): its workload, its records in request-id order, its typed
    summary and JSON."""

    workload: Workload
    records: list[RequestRecord]

    def metrics(self) -> RunSummary: ...

    def report(self) -> SimSummary: ...

    def summary(self) -> dict[str, Any]: ...

    def rows(self) -> list[dict[str, Any]]: ...


@dataclass(frozen=True, slots=True, kw_only=True)
class SimSummary:
    """A simulated run's summary, typed: the latency, throughput and SLA figures (`run`, `metrics.summarize`),
    the engine's state over time, the prefix-cache hit rate (share of prompt tokens), where the time went, the
    setup that was simulated (a JSON-shaped description), what speculation delivered (None without it) and the
    simulator's wall time (s). `to_dict()` is `flopwise simulate --json`'s object."""

    run: RunSummary
    engine: EngineState
    prefix_cache_hit_rate: float
    breakdown: TimeBreakdown
    setup: Mapping[str, Any]
    speculative: Mapping[str, Any] | None
    wall_s: float
    classes: Mapping[str, RunSummary] = field(default_factory=dict)  # per request class, under its own SLA

    def to_dict(self) -> dict[str, Any]:
        out = self.run.to_dict()
        out.update(self.engine.to_dict())
        out["prefix_cache_hit_rate"] = self.prefix_cache_hit_rate
        out.update(self.breakdown.to_dict())
        out["setup"] = copy.deepcopy(dict(self.setup))
        if self.speculative is not None:
            out["speculative"] = dict(self.speculative)
        if self.classes:
            out["classes"] = {name: s.to_dict() for name, s in self.classes.items()}
        out["sim_wall_s"] = self.wall_s
        return out


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
    _summary: tuple[SLA | None, RunSummary] | None = field(default=None, repr=False, compare=False)

    def metrics(self) -> RunSummary:
        """The run's latency, throughput and SLA figures (summarized once per SLA: a planner asks again)."""
        cached = self._summary
        if cached is None or cached[0] != self.sla:
            cached = self._summary = (self.sla, summarize(self.records, self.sla))
        return cached[1]

    def report(self) -> SimSummary:
        """Everything the run's summary holds, typed."""
        prompt = sum(r.num_prompt_tokens for r in self.requests)
        cached = sum(r.num_cached_tokens for r in self.requests)
        out = sim_summary(self.deployment, self.workload, self.config, self.timelines, self.phases, self.metrics(),
                          cached / prompt if prompt else 0.0, self.wall_s)
        return replace(out, classes=class_summaries(self.workload, self.records, self.sla)) if self.workload.classes \
            else out

    def summary(self) -> dict[str, Any]:
        """The `flopwise simulate --json` object: `metrics.summarize` keys, then engine state and the setup."""
        return self.report().to_dict()

    def rows(self) -> list[dict[str, Any]]:
        """One row per request (for --output)."""
        rows = []
        for rec, req in zip(self.records, self.requests, strict=True):
            row = rec.to_row()
            row["cached_tokens"] = req.num_cached_tokens
            rows.append(row)
        return rows


def class_summaries(workload: Workload, records: list[RequestRecord], sla: SLA | None) -> dict[str, RunSummary]:
    """Each request class's summary under its own SLA (the run's where it states none)."""
    by: dict[str, list[RequestRecord]] = {c.name: [] for c in workload.classes}
    for rec in records:
        k = workload.requests[rec.request_id].klass
        if k is not None:
            by[k].append(rec)
    return {c.name: summarize(by[c.name], c.sla if c.sla is not None else sla) for c in workload.classes}


def sim_summary(d: Deployment, workload: Workload, config: SimConfig, timelines: list[Timeline], phases: np.ndarray,
                run: RunSummary, prefix_cache_hit_rate: float, wall_s: float) -> SimSummary:
    """A run's typed summary from its latency figures and what the engine recorded (shared with `cluster/`)."""
    engine = engine_state(timelines, run.duration_s)
    plan = memory_plan(d)
    setup: dict[str, Any] = {
        "model": d.model.name, "gpu": d.hardware.id, "num_gpus": d.num_gpus, "tp": d.tp, "pp": d.pp, "dp": d.dp,
        # micro-batches a step runs as at most (pp where the engine keeps one in every stage: a round of them)
        "pipeline_batches": d.pipeline_batches,
        "ep": d.ep, "expert_skew": d.expert_skew, "nodes": d.nodes, "hosts": d.hosts,
        "replicas": d.replicas, "replicas_per_server": d.replicas_per_server, "weights": d.weights.name,
        "kv": d.kv.name, "workload": workload.name,
        "concurrency": workload.concurrency, "max_concurrency": workload.max_concurrency,
        "scheduler": config.scheduler,
        "engine": d.engine.name, "frontend": "none" if d.engine.frontend is None else "http",
        "endpoint": None if d.engine.frontend is None else d.engine.frontend.endpoint,
        "api_servers_per_replica": None if (fe := d.frontend) is None else fe.speed,
        "stream_interval": None if fe is None else fe.stream_interval,
        "gpu_memory_utilization": d.gpu_memory_utilization,
        "max_num_seqs": d.max_num_seqs, "max_num_batched_tokens": d.max_num_batched_tokens,
        # who picked those two where the user did not: the engine's offline benchmark for this workload, or None
        # (the engine's defaults)
        "batch_knobs_from": d.engine.bench_batch.tool if d.batch_from_workload and d.engine.bench_batch else None,
        "block_size": d.block_size, "enable_prefix_caching": config.enable_prefix_caching,
        "enable_chunked_prefill": config.enable_chunked_prefill,
        "async_scheduling": d.engine.host.async_scheduling, "cuda_graph_max_bs": d.engine.kernels.cuda_graph_max_bs,
        "moe_backend": "trtllm" if d.engine.kernels.trtllm_moe else "auto", "pdl": d.engine.kernels.pdl,
        "attention_backend": d.engine.kernels.attention_backend or "auto",
        "adp_balance": config.adp_balance,
        "num_kv_blocks": plan.num_blocks,
        "kv_capacity_tokens": plan.kv_capacity_tokens,
        "speculative": d.speculative.text() if d.speculative else None,
    }
    if config.scheduler == "sglang":  # its own knobs stand in for max_num_seqs / max_num_batched_tokens
        setup["sglang"] = sglang_settings(d, config)
    return SimSummary(run=run, engine=engine, prefix_cache_hit_rate=prefix_cache_hit_rate,
                      breakdown=time_breakdown(phases, timelines, d, run.duration_s, engine.busy_fraction,
                                               run.input_tokens_mean or 0.0),
                      setup=setup, speculative=_speculative_summary(timelines, d) if d.speculative else None,
                      wall_s=wall_s)


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


def stream_events(times: list[float], interval: int, *, first_alone: bool = True, hidden: int = 0,
                  complete: bool = True) -> tuple[list[float], list[int]]:
    """The events a server streaming every `interval` tokens sends for output tokens produced at `times` (every
    one the engine produced, opening tokens too): the first token alone, then one event per `interval` tokens
    (vLLM's OutputProcessor once that many have gathered, SGLang 0.4.9+'s scheduler at len(output_ids) % interval
    == 1), or, without `first_alone` (SGLang before 0.4.9: len(output_ids) % interval == 0), the first event after
    `interval` tokens; and the last token's (where the request `complete`d: a client that stopped reading at its
    deadline got no more than the events before it). Each event's instant and the tokens it carries the client
    text for: events carrying only the `hidden` opening tokens (`frontend.hidden_tokens`) show nothing and are
    dropped. (TensorRT-LLM's executor counts its iterations from 1, so its second event carries interval - 1
    tokens and the rest interval: the same events per request, one token apart.)"""
    last = len(times) - 1
    if last < 0:
        return [], []
    step = max(1, interval)
    idx = list(range(0 if first_alone or step == 1 else step - 1, last + 1, step))
    if complete and (not idx or idx[-1] != last):
        idx.append(last)
    at, tokens, prev = [], [], -1
    for i in idx:
        if i >= hidden:
            at.append(times[i])
            tokens.append(i - max(prev, hidden - 1))
        prev = i
    return at, tokens


def _records(requests: list[Request], tl: Timeline, hidden: int = 0, interval: int = 1,
             first_alone: bool = True, multi_token: bool = False) -> list[RequestRecord]:
    """Token instants looked up in the step timeline (a list: slicing it is cheaper than numpy per request):
    when the client received each step's tokens (behind an API server) or the step's end (offline), less the
    `hidden` opening tokens it receives no text for (`frontend.hidden_tokens`); a server streaming every
    `interval` tokens sends them in events (`stream_events`), which the records keep as chunks. `multi_token`
    (speculative decoding): a step's accepted tokens reach the client together, one event carrying them (a chunk
    of several tokens), so ITL is the gap between events and ITL per token that gap split over its tokens, as a
    streaming client times them, never zero-length gaps between tokens of one step."""
    ends = (tl.delivered_at if len(tl.delivered_at) else tl.step_end_at).tolist()
    chunked = interval > 1
    shown = 0 if chunked else hidden  # chunked: the events are cut on the engine's own token count first
    out = []
    for r in requests:
        s = visible_steps(r.token_steps, shown) if shown else r.token_steps
        if len(s) == 2:
            times = ends[s[0]:s[1]]
        else:
            times = [t for a, b in zip(s[::2], s[1::2], strict=False) for t in ends[a:b]]
        error = kind = None
        dl = r.deadline_at
        late = dl is not None and (r.aborted_at is not None or bool(times and times[-1] > dl))
        if dl is not None and late:
            times = [t for t in times if t <= dl]  # the client stopped reading at its deadline
            error, kind = f"no complete response within the client's {dl - r.arrival_at:g} s timeout", "timeout"
        chunks = None
        if chunked:
            times, chunks = stream_events(times, interval, first_alone=first_alone, hidden=hidden,
                                          complete=not late)
        elif multi_token and times:
            times, chunks = step_events(times)
        out.append(RequestRecord(request_id=r.request_id, arrival_at=r.arrival_at, input_tokens=r.num_prompt_tokens,
                                 output_tokens=r.max_tokens, first_scheduled_at=r.first_scheduled_at, token_times=times,
                                 preemptions=r.num_preemptions, error=error, error_kind=kind, chunk_tokens=chunks))
    return out


def step_events(times: list[float]) -> tuple[list[float], list[int] | None]:
    """Token instants grouped by the step that delivered them: (one instant per event, tokens per event), or the
    instants as they are (None) where no step delivered more than one."""
    events, counts = [times[0]], [1]
    for t in times[1:]:
        if t == events[-1]:
            counts[-1] += 1
        else:
            events.append(t)
            counts.append(1)
    return (events, counts) if len(events) < len(times) else (times, None)


def simulate(dep: Deployment, workload: Workload, config: SimConfig | None = None, *, sla: SLA | None = None,
             progress: Callable[[int], None] | None = None) -> SimResult:
    """Serve `workload` on `dep`. `progress(n)` is called as n more requests complete. An engine whose offline
    benchmark sizes its batch from the workload (trtllm-bench) gets those knobs first (`Deployment.for_workload`)."""
    config = (config or SimConfig()).resolved(dep)
    if dep.batch_from_workload:
        dep = dep.for_workload([r.input_tokens for r in workload.requests],
                               [r.output_tokens for r in workload.requests],
                               chunked_prefill=config.enable_chunked_prefill)
        config = config.resolved(dep)
    require_fit(dep)
    t0 = time.perf_counter()
    items = list(enumerate(workload.requests))
    first_alone = dep.engine.frontend is None or dep.engine.frontend.stream_first_alone
    n_rep = dep.replicas
    requests: list[Request] = []
    records: list[RequestRecord] = []
    phases: list[np.ndarray] = []
    timelines = []
    for rep in range(n_rep):
        part = items[rep::n_rep]
        if not part:
            continue
        conc = cap = None
        if workload.concurrency is not None:  # the clients split evenly over the replicas
            conc = workload.concurrency // n_rep + (rep < workload.concurrency % n_rep)
            if conc == 0:
                continue
        if workload.max_concurrency is not None:  # and the client's cap with them, at least one slot each
            cap = max(1, workload.max_concurrency // n_rep + (rep < workload.max_concurrency % n_rep))
        reqs, tl = run_engine(dep, part, conc, config, progress, replica=rep, max_concurrency=cap)
        requests.extend(reqs)
        records.extend(_records(reqs, tl, hidden_tokens(dep), dep.engine.stream_interval, first_alone,
                                multi_token=dep.speculative is not None))
        phases.append(request_phases(reqs, tl))
        timelines.append(tl)
    order = sorted(range(len(requests)), key=lambda i: requests[i].request_id)
    table = np.concatenate(phases)[order] if phases else np.empty((0, len(PHASES)))
    return SimResult(deployment=dep, workload=workload, config=config, records=[records[i] for i in order],
                     timelines=timelines, requests=[requests[i] for i in order], phases=table, sla=sla,
                     wall_s=time.perf_counter() - t0)
