"""The planner: enumerate candidates, prune with closed-form bounds, simulate the rest, rank with intervals, and
explain.

Search (branch and bound over `cost.capacity` with statistics):
1. Enumerate every candidate that fits (`space.py`); drop those whose lone-request latency already breaks the
   SLA (`cost.capacity.bounds`).
2. One request stream for every candidate (common random numbers: one seed; each candidate reads as much of
   it as the sustained-rate rule asks at its estimated capacity, `sim/steady.py`), so that differences between
   candidates are not differences between samples.
3. Order the rest by their closed-form capacity on the objective's axis and simulate them in waves of one per
   CPU core (`evaluate`: the sustained-rate rule, which never reports a rate above the ceiling, a bound).
   Skip a candidate once what it can reach is below the lower end of the leader's interval: the smaller of
   its ceiling and its capacity estimate times a margin (1.25 before any simulation; then 1.1 x the largest
   ratio of simulated capacity to estimate seen so far, at least 0.9), so it can neither beat nor tie it.
4. Adaptive effort: when candidates' intervals overlap the leader's and that tie would put another config
   first (its sample-free order, below, does not start with the leader), they are simulated again with a
   window of 2x, then 4x the requests (up to `max_effort`), starting from their previous answer, until the
   intervals separate, a doubling separates none of them, or the effort is spent. What still overlaps is a
   statistical tie.
5. Rank by the objective's point value, but never on a difference smaller than the noise: candidates whose
   intervals overlap the best one form its tie group, ordered by what does not depend on the sample (the
   closed-form capacity estimate on the objective's axis, then fewer GPUs per replica, lower accuracy risk of
   the formats, the label). The first choice is the head of that order, so it is the same for every seed
   whenever the intervals separate, and whenever the candidate the estimate favours is in the tie.
Objectives: goodput (requests/s per GPU within the SLA), throughput (output tokens/s per GPU), cost (output
tokens per dollar) and latency: tokens/s per user at the same offered load for everyone, never at each
config's own maximum rate: the user's --rate split over the replicas each config needs, or, without --rate, a
stated load per GPU (half the sustained rate per GPU of the goodput leader, found first), scaled by each
config's GPUs; a config that cannot sustain it is left out, saying so.
The search builds no command strings: `flopwise.launch` renders the first choice per engine.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from flopwise.cost.capacity import Bounds, bounds
from flopwise.errors import InfeasibleError, WorkloadError
from flopwise.plan.evaluate import (
    OBJECTIVES,
    Evaluation,
    Infeasible,
    LoadPoint,
    evaluate,
    latency_point,
    measure_at_load,
)
from flopwise.plan.pareto import pareto_front
from flopwise.plan.runner import Runner
from flopwise.plan.space import Candidate, SearchSpace, enumerate_candidates, require_candidates, weight_formats
from flopwise.plan.tradeoffs import Tradeoff, tradeoffs
from flopwise.sim.config import SimConfig
from flopwise.sim.max_rate import CEILING_SAMPLE, probe_rate
from flopwise.sim.steady import ProbeSize, SteadyRule
from flopwise.specs.defaults import DEFAULT_MODEL, DEFAULT_WORKLOAD, workload_defaults
from flopwise.specs.hardware import get_hardware
from flopwise.specs.model import ModelSpec
from flopwise.specs.model_catalog import get_model
from flopwise.specs.sla import SLA, parse_sla
from flopwise.techniques.quantization import kv_risk, weight_risk
from flopwise.workload.arrivals import ArrivalProcess, arrival_times
from flopwise.workload.build import build_workload, workload_max_len
from flopwise.workload.spec import RequestSpec, Workload
from flopwise.workload.traces import check_span, load_trace

__all__ = ["PlanRequest", "PlanResult", "plan", "plan_to_dict", "OBJECTIVES"]

_MAX_WARMUP, _MAX_TAIL = 1500, 800  # requests: bounds on a candidate's warm-up and tail when its E2E is long


@dataclass(frozen=True, slots=True, kw_only=True)
class PlanRequest:
    model: str = DEFAULT_MODEL
    workload: str | None = DEFAULT_WORKLOAD  # None with input_len/output_len: fixed lengths, no shared prefix
    input_len: int | None = None
    output_len: int | None = None
    rate: float | None = None  # total requests/s to serve; None = report per-replica capacity only
    sla: str | None = None  # None: the workload's default (`specs/defaults.py`)
    objective: str | None = None  # None: the workload's default
    space: SearchSpace = field(default_factory=SearchSpace)
    num_requests: int | None = None  # the smallest measured window (requests); None: the rule's default
    seed: int = 0
    hardware_file: str | None = None
    workers: int | None = None  # processes; default: CPU count
    trace: str | None = None  # plan for a recorded trace's lengths (and its mean rate, without --rate)
    max_effort: float = 2.0  # the largest window multiple adaptive effort may spend on a near-tie
    rule: SteadyRule | None = None  # the sustained-rate rule (None: SteadyRule's defaults, seeded by `seed`)

    def __post_init__(self) -> None:
        if self.objective is not None and self.objective not in OBJECTIVES:
            raise WorkloadError(f"unknown objective '{self.objective}'; choose one of {', '.join(OBJECTIVES)}")
        if self.rate is not None and not self.rate > 0:
            raise WorkloadError(f"--rate must be > 0 requests/s, got {self.rate}")
        if self.num_requests is not None and self.num_requests < 40:
            raise WorkloadError(f"--num-requests must be >= 40 for stable percentiles, got {self.num_requests}")
        if self.max_effort < 1:
            raise WorkloadError(f"max_effort must be >= 1, got {self.max_effort}")

    @property
    def sla_text(self) -> str:
        return self.sla if self.sla is not None else workload_defaults(self._named).sla

    @property
    def objective_name(self) -> str:
        return self.objective if self.objective is not None else workload_defaults(self._named).objective

    @property
    def _named(self) -> str | None:
        return None if self.trace else self.workload


@dataclass(slots=True, kw_only=True)
class PlanResult:
    request: PlanRequest
    sla: SLA
    model: ModelSpec
    ranked: list[Evaluation]
    frontier: list[Evaluation]
    infeasible: list[Infeasible]
    pruned: list[tuple[Candidate, str]]
    not_fitting: list[str]
    max_len: int  # the context a server needs: the workload's longest request, within the model's context
    wall_s: float
    tradeoffs: list[Tradeoff] = field(default_factory=list)
    latency_vs_rate: list[dict[str, float]] = field(default_factory=list)  # the chosen config, swept
    objective: str = "goodput"
    ties: list[Evaluation] = field(default_factory=list)  # the first choice's tie group (itself first)
    ranks: dict[str, int] = field(default_factory=dict)  # label -> rank (tied candidates share one)
    reference_load_per_gpu: float | None = None  # latency objective without --rate
    rate: float | None = None  # the total rate served (--rate, or a trace's mean rate)
    size: ProbeSize | None = None  # the first choice's probe size (effort 1)
    workload_note: str | None = None  # a named workload shortened to the model's context
    rule: SteadyRule | None = None
    checkpoint_weights: str | None = None
    max_prompt_len: int | None = None

    @property
    def best(self) -> Evaluation | None:
        return self.ranked[0] if self.ranked else None


# ------------------------------------------------------------------------------------------- the stream


@dataclass(frozen=True, slots=True, kw_only=True)
class _Stream:
    """The plan's request stream at any rate and length: a named workload (or fixed lengths), or a trace's
    requests repeated in order with Poisson arrivals at the rate. One seed for every call."""

    workload: str | None
    input_len: int | None
    output_len: int | None
    seed: int
    trace_specs: tuple[RequestSpec, ...] | None = None
    context_len: int | None = None  # the model's: a named workload's longer draws are shortened to it

    def __call__(self, rate: float, n: int) -> Workload:
        if self.trace_specs is None:
            return build_workload(num_requests=n, workload=self.workload, input_len=self.input_len,
                                  output_len=self.output_len, request_rate=rate, seed=self.seed,
                                  context_len=self.context_len)
        specs = self.trace_specs
        rng = np.random.default_rng(np.random.SeedSequence(self.seed).spawn(4)[3])
        times = arrival_times(ArrivalProcess(kind="poisson", rate=rate), n, rng)
        reqs = tuple(replace(specs[i % len(specs)], arrival_at=float(t)) for i, t in enumerate(times))
        return Workload(reqs, name="trace")


def _stream(req: PlanRequest, context_len: int | None) -> tuple[_Stream, float | None, int | None, int | None]:
    """(stream, the trace's mean rate, the longest request, the longest prompt)."""
    if req.trace is None:
        s = _Stream(workload=req.workload, input_len=req.input_len, output_len=req.output_len, seed=req.seed,
                    context_len=context_len)
        cap = workload_max_len(workload=req.workload, input_len=req.input_len, output_len=req.output_len)
        prompt = workload_max_len(workload=req.workload, input_len=req.input_len, output_len=1)
        return s, None, cap, (prompt - 1) if prompt else None
    tr = load_trace(Path(req.trace))
    reqs = tr.requests
    rate = None
    if tr.timed and req.rate is None:  # the trace's own timestamps give the rate to plan for
        check_span(Path(req.trace).name, reqs)
    if tr.timed and len(reqs) > 1 and reqs[-1].arrival_at > reqs[0].arrival_at:
        rate = (len(reqs) - 1) / (reqs[-1].arrival_at - reqs[0].arrival_at)
    return (_Stream(workload=None, input_len=None, output_len=None, seed=req.seed, trace_specs=tuple(reqs)), rate,
            max(r.input_tokens + r.output_tokens for r in reqs), max(r.input_tokens for r in reqs))


# ------------------------------------------------------------------------------------------- ranking


def _risk(e: Evaluation) -> int:
    d = e.candidate.deployment
    return weight_risk(d.weights.name).rank + kv_risk(d.kv.name).rank


def _tie_key(e: Evaluation, tie_axis: dict[str, float]) -> tuple[float, int, int, str]:
    """The order inside a tie, none of it from the sample: the closed-form capacity estimate on the objective's
    axis (higher first: what the cost model predicts where the simulation cannot tell them apart), then fewer
    GPUs per replica, lower accuracy risk, the label."""
    return (-round(tie_axis.get(e.candidate.label, 0.0), 9), e.gpus, _risk(e), e.candidate.label)


def _overlap(a: tuple[float, float, float], b: tuple[float, float, float]) -> bool:
    return a[2] >= b[1] and b[2] >= a[1]


def _rank(evaluated: list[Evaluation], objective: str,
          ceiling_axis: dict[str, float]) -> tuple[list[Evaluation], dict[str, int], list[Evaluation]]:
    """Tie groups in order of their best point value; inside a group the sample-free order (module docstring).
    Returns (ranked, label -> rank, the first group)."""
    rest = sorted(evaluated, key=lambda e: -e.value(objective)[0])
    ranked: list[Evaluation] = []
    ranks: dict[str, int] = {}
    first: list[Evaluation] = []
    while rest:
        head = rest[0].value(objective, paired=True)
        group = [e for e in rest if _overlap(e.value(objective, paired=True), head)]
        group.sort(key=lambda e: _tie_key(e, ceiling_axis))
        rank = len(ranked) + 1
        for e in group:
            ranks[e.candidate.label] = rank
        if not ranked:
            first = group
        ranked.extend(group)
        rest = [e for e in rest if e not in group]
    return ranked, ranks, first


_PRUNE_MARGIN = 1.25  # the capacity estimate is not a bound: before any simulation, up to 1.25x it is credited
_LEARNED_SLACK = 1.1  # once some are simulated: 1.1x the largest simulated / estimated ratio seen
_START = 0.85  # the first rate probed, as a share of the capacity estimate (simulated / estimated is 0.75-0.97)


def _reach(b: Bounds, margin: float = _PRUNE_MARGIN) -> float:
    """The most capacity (requests/s) a candidate is credited with when deciding whether to simulate it: the
    smaller of the ceiling (a bound) and `margin` x the estimate."""
    return min(b.max_rate_ceiling, margin * b.max_rate_estimate)


def _margin(fractions: list[float]) -> float:
    """How far above its estimate a candidate may turn out: learned from the simulated ones (module docstring)."""
    if not fractions:
        return _PRUNE_MARGIN
    return min(_PRUNE_MARGIN, max(0.9, _LEARNED_SLACK * max(fractions)))


def _ceiling_axis(objective: str, cand: Candidate, b: Bounds, mean_out: float, margin: float = _PRUNE_MARGIN) -> float:
    gpus = cand.deployment.gpus_per_replica
    rate = _reach(b, margin)
    if objective == "cost":
        price = cand.deployment.hardware.price_per_hour_usd
        return rate * mean_out * 3600 / (price * gpus) if price else 0.0
    if objective == "latency":
        return 1e3 / b.tpot_floor_ms
    if objective == "throughput":
        return rate * mean_out / gpus
    return rate / gpus


def _frontier_axes(e: Evaluation) -> tuple[float, float]:
    return (e.goodput_per_gpu, e.tokens_per_s_per_user)


# ------------------------------------------------------------------------------------------- jobs


@dataclass(frozen=True, slots=True, kw_only=True)
class _Context:
    stream: _Stream
    sla: SLA
    rule: SteadyRule
    sizes: dict[str, ProbeSize]  # per candidate label: the rule's size at its estimated capacity
    e2e_s: dict[str, float]  # per candidate label: the latency near capacity (sizes probes above the estimate)
    seed: int

    def size(self, cand: Candidate, effort: float = 1.0) -> ProbeSize:
        return self.sizes[cand.label].scaled(effort)


def _evaluate_job(ctx: _Context, item: tuple[Candidate, float, float | None, float]) -> Evaluation | Infeasible:
    cand, ceiling, start, effort = item
    # a refinement (effort > 1) starts at the previous answer, so it needs fewer probes to bracket it again
    return evaluate(cand, ctx.stream, ctx.sla, rule=ctx.rule.at_effort(effort), size=ctx.size(cand, effort),
                    ceiling=ceiling, e2e_s=ctx.e2e_s[cand.label], start=start, seed=ctx.seed,
                    max_probes=9 if effort <= 1 else 3)


def _load_job(ctx: _Context, item: tuple[Evaluation, float, int]) -> LoadPoint:
    e, rate, replicas = item
    return measure_at_load(e, ctx.stream, ctx.sla, rule=ctx.rule, size=ctx.size(e.candidate), rate_per_replica=rate,
                           replicas=replicas, seed=ctx.seed)


def _sweep_job(ctx: _Context, item: tuple[Evaluation, float]) -> dict[str, Any]:
    """A light load for the latency chart, simulated with half the window."""
    e, rate = item
    config = SimConfig(enable_prefix_caching=e.candidate.prefix_caching, seed=ctx.seed)
    p = probe_rate(e.candidate.deployment, ctx.stream, ctx.sla, config, ctx.rule, rate, ctx.size(e.candidate, 0.5))
    return latency_point(rate, p.summary, p.ok)


# ------------------------------------------------------------------------------------------- the search


def _sizes(rule: SteadyRule, live: list[tuple[Candidate, Bounds]], sla: SLA) -> dict[str, ProbeSize]:
    """Each candidate's probe size: the rule's at its estimated capacity (warm-up and tail bounded). Every
    candidate reads the same request stream from its start (one seed: common random numbers), so a shorter
    stream is the first part of a longer one."""
    out = {}
    ttft = sla.limit("ttft")
    for c, b in live:
        s = rule.size(b.max_rate_estimate, b.e2e_estimate_s, ttft / 1e3 if ttft is not None else None)
        out[c.label] = replace(s, warmup_requests=min(_MAX_WARMUP, s.warmup_requests),
                               tail_requests=min(_MAX_TAIL, s.tail_requests))
    return out


def plan(req: PlanRequest, progress: Callable[[int, int], None] | None = None) -> PlanResult:
    """Search `req.space` for the deployments that serve the workload within the SLA (module docstring)."""
    t0 = time.perf_counter()
    objective = req.objective_name
    sla = parse_sla(req.sla_text)
    model = get_model(req.model)
    hardware = [get_hardware(g, req.hardware_file) for g in req.space.gpus]
    if objective == "cost" and (unpriced := [h.id for h in hardware if not (h.price_per_hour_usd or 0) > 0]):
        one = len(unpriced) == 1
        raise WorkloadError(f"--objective cost ranks by output tokens per dollar; {', '.join(unpriced)} "
                            f"{'has' if one else 'have'} no price: give price_per_hour_usd (> 0) in a "
                            f"--hardware-file, or leave {'it' if one else 'them'} out of --gpus")
    stream, trace_rate, cap, prompt_cap = _stream(req, model.max_position_embeddings)
    rate = req.rate if req.rate is not None else trace_rate
    # the closed-form bounds price the stream's mean lengths from a large sample of seed 0, the same for every
    # seed, so that everything the search derives from them (order, pruning, tie-breaks) is sample-free
    sample = replace(stream, seed=0)(math.inf, CEILING_SAMPLE).requests
    mean_in = sum(r.input_tokens for r in sample) / len(sample)
    mean_out = sum(r.output_tokens for r in sample) / len(sample)
    cached_share = sum(r.prefix_tokens for r in sample) / sum(r.input_tokens for r in sample)
    ctx_len = model.max_position_embeddings
    longest = max(r.input_tokens + r.output_tokens for r in sample)
    max_len = min(x for x in (cap or longest, ctx_len) if x) if (cap or ctx_len) else longest
    cands, misses = enumerate_candidates(model, hardware, req.space, max_len)
    require_candidates(cands, misses, model)
    shortened = sum(r.input_tokens + r.output_tokens >= max_len for r in sample) if cap and cap > max_len else 0
    workload_note = (f"{shortened / len(sample):.1%} of the {req.workload or 'chat'} workload's requests are longer "
                     f"than {model.name}'s {max_len:,}-token context and are shortened to fit it (prompt first)"
                     if shortened and req.trace is None else None)

    pruned: list[tuple[Candidate, str]] = []
    live: list[tuple[Candidate, Bounds]] = []
    ceil_axis: dict[str, float] = {}
    for c in cands:
        b = bounds(c.deployment, sla, round(mean_in), round(mean_out), cached_share if c.prefix_caching else 0.0)
        if not b.feasible:
            pruned.append((c, b.reason or "infeasible"))
        else:
            live.append((c, b))
            ceil_axis[c.label] = _ceiling_axis(objective, c, b, mean_out)
    infeasible: list[Infeasible] = [Infeasible(c, reason) for c, reason in pruned]
    pruned = []
    if not live:
        raise InfeasibleError(_infeasible_message(req, sla, model, infeasible))
    live.sort(key=lambda t: (-ceil_axis[t[0].label], t[0].label))
    rule = replace(req.rule or SteadyRule(), seed=req.seed)
    if req.num_requests:
        rule = replace(rule, min_window_requests=req.num_requests,
                       max_window_requests=max(rule.max_window_requests, req.num_requests))
    runner = Runner(max(1, req.workers or os.cpu_count() or 1))
    sizes = _sizes(rule, live, sla)
    ctx = _Context(stream=stream, sla=sla, rule=rule, sizes=sizes, e2e_s={c.label: b.e2e_estimate_s for c, b in live},
                   seed=req.seed)
    bound_of = {c.label: b for c, b in live}
    tie_axis = {c.label: _ceiling_axis(objective, c, b, mean_out, 1.0) for c, b in live}  # the estimate's axis
    evaluated: dict[str, Evaluation] = {}
    reference = None
    try:
        # capacity: by the objective's axis (goodput for the latency objective, whose load comes from it)
        cap_objective = "goodput" if objective == "latency" else objective
        cap_axis = ceil_axis if objective != "latency" else {
            c.label: _ceiling_axis("goodput", c, b, mean_out) for c, b in live}
        order = [c for c, _ in sorted(live, key=lambda t: (-cap_axis[t[0].label], t[0].label))]
        _capacity_pass(runner, ctx, order, evaluated, infeasible, pruned, cap_objective, cap_axis, bound_of,
                       mean_out, progress, len(live))
        if not evaluated:
            raise InfeasibleError(_infeasible_message(req, sla, model, infeasible))
        if objective != "latency":
            _refine(runner, ctx, evaluated, objective, bound_of, req.max_effort, ceil_axis, pruned, tie_axis)
        else:
            reference = _latency_pass(runner, ctx, live, evaluated, infeasible, pruned, bound_of, ceil_axis, rate)
        if not evaluated:
            raise InfeasibleError(_infeasible_message(req, sla, model, infeasible))
        ranked, ranks, first = _rank(list(evaluated.values()), objective, tie_axis)
        best = ranked[0]
        # latency vs rate: the search's own probes (near the answer, and above it), and two light loads
        # simulated with half the window (a chart)
        light = runner.map(partial(_sweep_job, ctx), [(best, best.max_rate * f) for f in (0.25, 0.5)])
        sweep = sorted([*light, *best.trail], key=lambda p: p["rate"])
    finally:
        runner.close()
    result = PlanResult(request=req, sla=sla, model=model, ranked=ranked, frontier=pareto_front(ranked, _frontier_axes),
                        infeasible=infeasible, pruned=pruned, not_fitting=misses, max_len=max_len, wall_s=0.0,
                        workload_note=workload_note,
                        objective=objective, ties=first, ranks=ranks, reference_load_per_gpu=reference, rate=rate,
                        size=sizes[best.candidate.label], rule=rule,
                        checkpoint_weights=weight_formats(model, req.space)[1],
                        max_prompt_len=min(prompt_cap, max_len) if prompt_cap else None)
    result.tradeoffs = tradeoffs(ranked, objective, {e.candidate.label for e in first})
    result.latency_vs_rate = sweep
    result.wall_s = time.perf_counter() - t0
    return result


def _capacity_pass(runner: Runner, ctx: _Context, queue: list[Candidate], evaluated: dict[str, Evaluation],
                   infeasible: list[Infeasible], pruned: list[tuple[Candidate, str]], objective: str,
                   axis: dict[str, float], bound_of: dict[str, Bounds], mean_out: float,
                   progress: Callable[[int, int], None] | None, total: int) -> None:
    """Sustained capacity of the candidates in `queue` order, in waves, skipping what cannot reach the leader."""
    fractions: list[float] = []
    done = 0
    while queue:
        wave, queue = queue[:runner.workers], queue[runner.workers:]
        # each search starts at 0.85 x its own estimate: a candidate's answer never depends on which others were
        # simulated before it, or on the number of workers
        items = [(c, bound_of[c.label].max_rate_ceiling, _START * bound_of[c.label].max_rate_estimate, 1.0)
                 for c in wave]
        for c, r in zip(wave, runner.map(partial(_evaluate_job, ctx), items), strict=True):
            if isinstance(r, Evaluation):
                evaluated[c.label] = r
                fractions.append(r.max_rate / bound_of[c.label].max_rate_estimate)
            else:
                infeasible.append(r)
        done += len(wave)
        m = _margin(fractions)
        axis.update({c.label: _ceiling_axis(objective, c, bound_of[c.label], mean_out, m) for c in queue})
        queue = _prune(queue, evaluated, objective, axis, pruned)
        if progress:
            progress(done + len(pruned), total)


def _latency_pass(runner: Runner, ctx: _Context, live: list[tuple[Candidate, Bounds]],
                  evaluated: dict[str, Evaluation], infeasible: list[Infeasible], pruned: list[tuple[Candidate, str]],
                  bound_of: dict[str, Bounds], user_ceiling: dict[str, float], rate: float | None) -> float | None:
    """The latency objective: every candidate at one offered load (module docstring), in order of its per-user
    ceiling (batch-1 decode speed), skipping what cannot reach the leader's interval. Without a rate the load
    is half the goodput leader's sustained rate per GPU. Returns that stated load (per GPU), or None."""
    leader = max(evaluated.values(), key=lambda e: e.goodput_per_gpu)
    per_gpu = 0.5 * leader.max_rate / leader.gpus if rate is None else None
    pruned[:] = [(c, why) for c, why in pruned if not why.startswith("bound")]  # reconsidered on this axis
    queue = [c for c, _ in sorted(live, key=lambda t: (-user_ceiling[t[0].label], t[0].label))
             if c.label not in {i.candidate.label for i in infeasible}]
    best: Evaluation | None = None
    scored: dict[str, Evaluation] = {}
    while queue:
        wave, queue = queue[:runner.workers], queue[runner.workers:]
        items = [(c, evaluated.get(c.label), bound_of[c.label].max_rate_ceiling,
                  _START * bound_of[c.label].max_rate_estimate, per_gpu, rate) for c in wave]
        for c, r in zip(wave, runner.map(partial(_latency_job, ctx), items), strict=True):
            if isinstance(r, Evaluation) and r.at_load is not None and r.at_load.sustained:
                scored[c.label] = r
            elif isinstance(r, Evaluation):
                infeasible.append(Infeasible(c, f"cannot sustain {r.at_load.rate_per_replica:.3g} req/s per replica, "
                                                "the load the latency objective compares at" if r.at_load else
                                             "no load measured"))
            else:
                infeasible.append(r)
        if scored:
            best = max(scored.values(), key=lambda e: e.value("latency")[0])
            floor = best.value("latency", paired=True)[1]
            kept = []
            for c in queue:
                if user_ceiling[c.label] < floor:
                    pruned.append((c, "bound: its per-user ceiling cannot reach the interval of "
                                      f"{best.candidate.label}"))
                else:
                    kept.append(c)
            queue = kept
    evaluated.clear()
    evaluated.update(scored)
    return per_gpu


def _latency_job(ctx: _Context, item: tuple[Candidate, Evaluation | None, float, float, float | None, float | None]
                 ) -> Evaluation | Infeasible:
    """A candidate's capacity (unless known) and its latency at the load: `per_gpu` x its GPUs, or `rate` split
    over the replicas it needs."""
    cand, e, ceiling, start, per_gpu, rate = item
    if e is None:
        r = _evaluate_job(ctx, (cand, ceiling, start, 0.5))
        if not isinstance(r, Evaluation):
            return r
        e = r
    if per_gpu is not None:
        load, reps = per_gpu * e.gpus, 1
    else:
        assert rate is not None  # the job is given a per-GPU load or a target rate
        reps = e.replicas_for(rate)
        load = rate / reps
    point = _load_job(ctx, (e, load, reps))
    return replace(e, at_load=point, num_simulated_requests=e.num_simulated_requests + point.num_simulated_requests)


def _prune(queue: list[Candidate], evaluated: dict[str, Evaluation], objective: str, ceil_axis: dict[str, float],
           pruned: list[tuple[Candidate, str]]) -> list[Candidate]:
    """Drop the queued candidates whose ceiling is below the leader's interval."""
    if not evaluated:
        return queue
    leader = max(evaluated.values(), key=lambda e: e.value(objective)[0])
    floor = leader.value(objective, paired=True)[1]
    kept = []
    for c in queue:
        if ceil_axis[c.label] < floor:
            pruned.append((c, f"bound: its ceiling cannot reach the interval of {leader.candidate.label}"))
        else:
            kept.append(c)
    return kept


def _refine(runner: Runner, ctx: _Context, evaluated: dict[str, Evaluation], objective: str,
            bound_of: dict[str, Bounds], max_effort: float, ceil_axis: dict[str, float],
            pruned: list[tuple[Candidate, str]], tie_axis: dict[str, float]) -> None:
    """Adaptive effort: simulate the leader and whatever overlaps it again with a longer window, when the
    overlap can change the first choice (the tie's sample-free order would put another config first). A
    candidate skipped earlier whose reach is no longer below the (new) leader's interval is simulated after
    all."""
    effort = 1.0
    last: set[str] | None = None
    while effort * 2 <= max_effort + 1e-9:
        effort *= 2
        leader = max(evaluated.values(), key=lambda e: e.value(objective)[0])
        lv = leader.value(objective, paired=True)
        close = [e for e in evaluated.values() if e is leader or _overlap(e.value(objective, paired=True), lv)]
        group = {e.candidate.label for e in close}
        if len(close) < 2 or group == last:  # nothing overlaps, or the last doubling separated nothing
            break
        if min(close, key=lambda e: _tie_key(e, tie_axis)) is leader:
            break  # the leader also heads the tie's order: more requests cannot change the first choice
        last = group
        items = [(e.candidate, bound_of[e.candidate.label].max_rate_ceiling, e.max_rate, effort) for e in close]
        for e, r in zip(close, runner.map(partial(_evaluate_job, ctx), items), strict=True):
            if isinstance(r, Evaluation):
                evaluated[e.candidate.label] = r
            else:  # a longer window found the SLA unmet at every rate
                del evaluated[e.candidate.label]
        if not evaluated:
            return
    if not evaluated:
        return
    leader = max(evaluated.values(), key=lambda e: e.value(objective)[0])
    floor = leader.value(objective, paired=True)[1]
    revive = [c for c, why in pruned if why.startswith("bound") and ceil_axis[c.label] >= floor]
    if revive:
        pruned[:] = [(c, why) for c, why in pruned if c not in revive]
        items = [(c, bound_of[c.label].max_rate_ceiling, _START * bound_of[c.label].max_rate_estimate, 1.0)
                 for c in revive]
        for c, r in zip(revive, runner.map(partial(_evaluate_job, ctx), items), strict=True):
            if isinstance(r, Evaluation):
                evaluated[c.label] = r


def _infeasible_message(req: PlanRequest, sla: SLA, model: ModelSpec, infeasible: list[Infeasible]) -> str:
    """No config meets the SLA: name the closest ones and which objective failed by how much."""
    scored = [i for i in infeasible if i.misses]
    scored.sort(key=lambda i: max(i.misses.values()))
    if scored:
        def missed(i: Infeasible) -> str:
            return ", ".join(f"{k} missed by {(v - 1) * 100:.0f}%" for k, v in i.misses.items() if v > 1)
        why = "closest: " + "; ".join(f"{i.candidate.label} ({missed(i)})" for i in scored[:3])
    else:
        why = "; ".join(f"{i.candidate.label}: {i.reason}" for i in infeasible[:3])
    return (f"no configuration in the space meets {sla} for {model.name}; {why}. Relax the SLA, allow more GPUs "
            "(--max-gpus) or faster GPUs (--gpus).")


# ------------------------------------------------------------------------------------------- JSON edge


def _interval(v: tuple[float, float, float]) -> list[float]:
    return [v[1], v[2]]


def plan_to_dict(r: PlanResult, launch: dict[str, Any] | None = None) -> dict[str, Any]:
    """The plan's stable JSON. `launch`: the first choice's commands (`flopwise.launch.plan_launch`), which the
    search itself does not build."""
    rate = r.rate
    named = DEFAULT_WORKLOAD if r.request.trace or r.request.workload is None else r.request.workload
    first = {e.candidate.label for e in r.ties}

    def row(e: Evaluation) -> dict[str, Any]:
        d = e.candidate.deployment
        reps = e.replicas_for(rate)
        lo, hi = e.rate_interval
        cost = e.cost_per_1m_tokens
        cost_iv = [cost * e.max_rate / hi if hi else None, cost * e.max_rate / lo if lo else None] if cost else None
        return {
            "config": e.candidate.label, "gpu": d.hardware.id, "tp": d.tp, "pp": d.pp, "dp": d.dp, "ep": d.ep,
            "nodes": d.nodes,  # the servers one replica spans (`HardwareSpec.servers_for`)
            "hosts": d.hosts,  # the machines its launch command runs on (GB200: 4-GPU trays of one node)
            "weights": d.weights.name,
            "kv": d.kv.name, "max_num_seqs": d.max_num_seqs, "max_num_batched_tokens": d.max_num_batched_tokens,
            "enable_prefix_caching": e.candidate.prefix_caching, "gpus_per_replica": e.gpus,
            "engine": d.engine.name,
            # the server's API processes in all (vLLM 0.15+: one per engine core by default); None offline
            "api_servers": None if d.frontend is None else d.frontend.api_servers * d.replicas_per_server
            // d.frontend.shared_by,
            "stream_interval": d.engine.stream_interval,  # tokens per streamed event after the first
            "speculative": d.speculative.text() if d.speculative else None,
            "max_rate_per_replica": e.max_rate, "max_rate_interval": [lo, hi],
            # the bootstrap's part alone: what ties and pruning compare (every candidate sees the same stream)
            "max_rate_paired_interval": list(e.paired_rate_interval),
            "ceiling_rate_per_replica": e.upper_bound_rate, "capped_by_ceiling": e.capped,
            "goodput_per_gpu": e.goodput_per_gpu, "goodput_per_gpu_interval": _interval(e.value("goodput")),
            "output_tokens_per_s_per_gpu": e.output_tokens_per_s_per_gpu,
            "output_tokens_per_s_per_gpu_interval": _interval(e.value("throughput")),
            "tokens_per_s_per_user": e.tokens_per_s_per_user, "cost_per_1m_tokens": cost,
            "cost_per_1m_tokens_interval": cost_iv,
            "p95_ttft_ms": e.window.ttft_ms.p95, "p95_tpot_ms": e.window.tpot_ms.p95,
            # each SLA objective's value over the measured window at that rate, in ms ({"p99_ttft": 212.0, ...})
            "sla_values_ms": {o.key: getattr(e.window, f"{o.metric}_ms").get(o.stat) for o in r.sla.objectives},
            "memory_headroom_gib": e.memory_headroom_gib, "binds": e.binds(r.sla),
            "bottleneck": e.run.breakdown.bottleneck,
            "replicas": reps, "total_gpus": reps * e.gpus,
            "replicas_at_interval_low": (e.replicas_for(rate) if not rate or not lo
                                         else max(1, math.ceil(rate / lo - 1e-9))),
            "rank": r.ranks.get(e.candidate.label), "tied_with_first": e.candidate.label in first,
            "objective_value": e.value(r.objective)[0], "objective_interval": _interval(e.value(r.objective)),
            "objective_paired_interval": _interval(e.value(r.objective, paired=True)),
            "effort": e.effort, "num_simulated_requests": e.num_simulated_requests,
            "at_load": e.at_load.to_dict() if e.at_load else None,
        }

    return {
        "model": r.model.name,
        "workload": ("trace" if r.request.trace
                     else r.request.workload or f"in={r.request.input_len},out={r.request.output_len}"),
        "trace": r.request.trace, "workload_note": r.workload_note, "sla": str(r.sla),
        "sla_source": "given" if r.request.sla is not None else f"{named} workload default",
        "objective": r.objective,
        "objective_source": "given" if r.request.objective is not None else f"{named} workload default",
        "rate": rate, "max_model_len": r.max_len, "max_prompt_len": r.max_prompt_len,
        "checkpoint_weights": r.checkpoint_weights,
        "reference_load_per_gpu": r.reference_load_per_gpu,
        "steady_state": None if r.size is None or r.rule is None else {
            "warmup_requests": r.size.warmup_requests, "window_requests": r.size.window_requests,
            "tail_requests": r.size.tail_requests, "confidence": r.rule.confidence,
            "backlog_tolerance": r.rule.backlog_tolerance, "num_batches": r.rule.num_batches,
            "seed": r.request.seed},
        "best": row(r.best) if r.best else None,
        "ties": [e.candidate.label for e in r.ties],
        "ranked": [row(e) for e in r.ranked],
        "pareto_frontier": [row(e) for e in r.frontier],
        "infeasible": [{"config": i.candidate.label, "reason": i.reason, "misses": i.misses} for i in r.infeasible],
        "pruned": [{"config": c.label, "reason": why} for c, why in r.pruned],
        "not_fitting": r.not_fitting,
        "launch": launch,
        "tradeoffs": [t.to_dict() for t in r.tradeoffs],
        "latency_vs_rate": r.latency_vs_rate,
        "num_candidates": len(r.ranked) + len(r.infeasible) + len(r.pruned),
        "num_simulated": len(r.ranked) + sum(1 for i in r.infeasible if i.misses),
        "num_simulated_requests": sum(e.num_simulated_requests for e in r.ranked),
        "wall_s": r.wall_s,
    }
