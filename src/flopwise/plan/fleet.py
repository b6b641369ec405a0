"""Aggregated vs disaggregated serving for a GPU budget: which layout of replicas serves the most within an SLA.

For one GPU type and `total_gpus`, the candidates are
    aggregated      R replicas of TP t (R = total_gpus // t), one mixed pool behind a least-outstanding router;
    disaggregated   a prefill pool of Np x TP tp and a decode pool of Nd x TP td using every GPU
                    (Np tp + Nd td = total_gpus), KV over the catalog's links (`cost/transfer.py`).
Each is simulated as a fleet (`cluster/`), one layout per worker process, and its highest sustained request
rate found by the single-replica planner's rule (`sim.max_rate.find_max_rate` with the fleet as its `run`:
every probe judged after a warm-up, over a window long enough in requests and in time, SLA met and no growing
backlog, `sim/steady.py`), from the pools' closed-form capacity estimate (`capacity_estimate`), never above
the replicas' summed ceilings (`capacity_ceiling`), to within `rate_tolerance`. Two rounds, as the
single-replica planner's adaptive effort:
1. every layout at `SCREEN_EFFORT` (the rule's window halved; warm-up and tail as at full effort);
2. the leader and every layout whose rate interval reaches the leader's (the bootstrap over the window's batches
   alone, `MaxRate.paired_interval`: every layout sees the same stream) again at full effort, starting from its
   first answer.
A layout screened out keeps its first-round rate and interval (`effort` says which).
Candidates are ranked by output tokens/s per GPU at their rate (rate x mean output tokens / GPUs, as the
single-replica planner's goodput). Which constraint binds is read off the first probe above the answer that
failed ("backlog" where only the queue's growth failed it, "ceiling" where the answer is the ceiling). No
layout is pruned: the summed ceilings are far above what prefill/decode splits serve, so there is no cheap
bound to prune by.

This module stands apart from the single-replica planner (`plan/search.py`); `flopwise plan --serving
aggregated,disaggregated` calls it after that planner, for the first GPU given, with that planner's rule.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from flopwise.cluster import FleetResult, simulate_fleet
from flopwise.cluster.build import build_cluster
from flopwise.cost.capacity import bounds
from flopwise.cost.memory import memory_plan
from flopwise.errors import FlopwiseError
from flopwise.plan.runner import Runner
from flopwise.sim.max_rate import RATE_TOLERANCE, find_max_rate
from flopwise.sim.steady import SteadyRule
from flopwise.specs.cluster import ClusterSpec
from flopwise.specs.deployment import Deployment
from flopwise.specs.sla import SLA
from flopwise.workload.spec import Workload

__all__ = ["SERVING_MODES", "SCREEN_EFFORT", "FleetCandidate", "candidate_layouts", "capacity_estimate",
           "capacity_ceiling", "plan_fleet", "fleet_plan_to_dict"]

SERVING_MODES = ("aggregated", "disaggregated")
TPS = (1, 2, 4, 8)
SCREEN_EFFORT = 0.5  # the first round's window, as a multiple of the rule's
SCREEN_TOLERANCE = 3.0  # the first round's bracket, as a multiple of rate_tolerance


@dataclass(frozen=True, slots=True, kw_only=True)
class FleetCandidate:
    serving: str
    layout: str  # "4xtp2" or "prefill=2xtp2,decode=1xtp4"
    num_gpus: int
    max_rate: float  # requests/s meeting the SLA (0: none)
    output_tokens_per_s_per_gpu: float
    tokens_per_s_per_user: float | None
    p95_ttft_ms: float | None
    p95_tpot_ms: float | None
    binding: str  # the SLA objective that fails first above max_rate ("ceiling": it passed there; "infeasible")
    rate_interval: tuple[float, float] = (0.0, 0.0)  # the rate's confidence interval (requests/s)
    # the bootstrap's part of it: layouts probed on one stream share its load, so `_contenders` compares on this
    paired_interval: tuple[float, float] = (0.0, 0.0)
    effort: float = 0.0  # the window multiple of its last search (SCREEN_EFFORT: screened out in round 1)
    num_simulated_requests: int = 0  # over every probe of both rounds
    failed_above: float = math.inf  # the lowest probed rate above max_rate that failed (inf: none did)


def candidate_layouts(total_gpus: int, serving: tuple[str, ...], tps: tuple[int, ...] = TPS,
                      max_disaggregated: int = 12) -> list[tuple[str, str]]:
    """(serving, layout text) pairs: aggregated TPs that divide the budget; disaggregated splits using every GPU,
    prefill pools no wider than decode pools' TP x 2, at most `max_disaggregated` (fewest replicas first)."""
    out: list[tuple[str, str]] = []
    if "aggregated" in serving:
        out += [("aggregated", f"{total_gpus // t}xtp{t}") for t in tps if t <= total_gpus and total_gpus % t == 0]
    if "disaggregated" in serving:
        dis = []
        for tp_p in tps:
            for tp_d in tps:
                if tp_p > 2 * tp_d:
                    continue
                for n_p in range(1, total_gpus // tp_p + 1):
                    rest = total_gpus - n_p * tp_p
                    if rest > 0 and rest % tp_d == 0:
                        dis.append((n_p + rest // tp_d, f"prefill={n_p}xtp{tp_p},decode={rest // tp_d}xtp{tp_d}"))
        dis.sort()
        out += [("disaggregated", text) for _, text in dis[:max_disaggregated]]
    return out


@dataclass(frozen=True, slots=True, kw_only=True)
class _Search:
    """What every layout's jobs share (forked workers inherit it; `workload_at` need not be picklable)."""

    specs: tuple[tuple[str, str, ClusterSpec | None], ...]  # (serving, layout, fleet or None where it cannot fit)
    workload_at: Callable[[float, int | None], Workload]
    sla: SLA
    rule: SteadyRule
    rate_tolerance: float
    mean_in: int
    mean_out: float
    total_gpus: int


_SEARCH: _Search | None = None  # set by plan_fleet while its jobs run


def _search() -> _Search:
    assert _SEARCH is not None, "a fleet-plan job ran outside plan_fleet"
    return _SEARCH


def _infeasible(mode: str, text: str, num_gpus: int) -> FleetCandidate:
    return FleetCandidate(serving=mode, layout=text, num_gpus=num_gpus, max_rate=0.0, output_tokens_per_s_per_gpu=0.0,
                          tokens_per_s_per_user=None, p95_ttft_ms=None, p95_tpot_ms=None, binding="infeasible")


def capacity_estimate(spec: ClusterSpec, sla: SLA, input_len: int, output_len: int) -> float:
    """Requests/s the fleet's pools serve by the closed-form capacity estimate (`cost.capacity`), where the
    search starts: R x one replica's estimate for a mixed pool; for prefill and decode pools the smaller of
    Np / (a prompt's prefill seconds) and Nd / (a request's decode seconds at the decode pool's batch). No bound
    (queueing and the KV hand-off are left out): the search brackets the answer from it."""
    rate = math.inf
    for pool in spec.pools:
        b = bounds(pool.deployment, sla, input_len, output_len)
        if pool.role == "mixed":
            rate = min(rate, pool.num_replicas * b.max_rate_estimate)
            continue
        share = b.prefill_share_s if pool.role == "prefill" else b.decode_share_s
        if share > 0:
            rate = min(rate, pool.num_replicas / share)
    return rate


def capacity_ceiling(spec: ClusterSpec, sla: SLA, input_len: int, output_len: int) -> float:
    """Where the search stops: every replica's closed-form ceiling summed (`cost.capacity`). A bound for a mixed
    pool. For a prefill/decode split it holds as far as the split's shares do (with P and D a request's prefill
    and decode seconds, Np / P and Nd / D cannot both exceed (Np + Nd) / (P + D)), but a pool that only prefills
    escapes limits of the full request (the KV a decode holds, the API server), so a split can pass at it: the
    layout is then reported with binding "ceiling" (`simulate --find-max-rate` on a fleet guards it with a
    burst run instead, at the cost of one more simulation)."""
    return sum(p.num_replicas * bounds(p.deployment, sla, input_len, output_len).max_rate_ceiling for p in spec.pools)


def _search_job(item: tuple[int, float, float | None, int]) -> FleetCandidate:
    """Layout i's sustained rate at window multiple `effort` (`find_max_rate` over fleet simulations), from
    `start` (None: the capacity estimate), and the constraint that fails just above it. `spent`: requests its
    earlier round simulated."""
    i, effort, start, spent = item
    ctx = _search()
    mode, text, spec = ctx.specs[i]
    assert spec is not None
    out = max(1, round(ctx.mean_out))
    ceiling = capacity_ceiling(spec, ctx.sla, ctx.mean_in, out)
    estimate = capacity_estimate(spec, ctx.sla, ctx.mean_in, out)
    estimate = min(estimate, ceiling) if 0 < estimate < math.inf else 0.8 * ceiling
    e2e = max(bounds(p.deployment, ctx.sla, ctx.mean_in, out).e2e_estimate_s for p in spec.pools)
    ttft = ctx.sla.limit("ttft")
    rule = ctx.rule.at_effort(effort)
    size = rule.size(estimate, e2e, ttft / 1e3 if ttft is not None else None)

    def run(wl: Workload) -> FleetResult:
        return simulate_fleet(spec, wl, sla=ctx.sla, metrics="exact")

    try:
        found = find_max_rate(spec.pools[0].deployment, ctx.workload_at, ctx.sla, rule=rule, ceiling=ceiling,
                              size=size, e2e_s=e2e, start=estimate if start is None else start,
                              rate_tolerance=ctx.rate_tolerance * (SCREEN_TOLERANCE if start is None else 1.0),
                              max_probes=9 if start is None else 3, run=run)
    except FlopwiseError:
        return _infeasible(mode, text, ctx.total_gpus)
    assert found.probe is not None
    s = found.probe.summary  # the window's requests
    fails = [p for p in found.trail if not p.ok and p.rate > found.rate]
    binding = "ceiling" if found.capped else ""  # passed at the closed-form ceiling: no probe above it
    first = None
    if fails:
        first = min(fails, key=lambda p: p.rate)
        binding = ",".join(k for k, v in (first.summary.sla_objectives_met or {}).items() if not v) or "backlog"
    tpot = s.tpot_ms.mean
    return FleetCandidate(serving=mode, layout=text, num_gpus=spec.num_gpus, max_rate=found.rate,
                          output_tokens_per_s_per_gpu=found.rate * ctx.mean_out / spec.num_gpus,
                          tokens_per_s_per_user=1e3 / tpot if tpot else None, p95_ttft_ms=s.ttft_ms.p95,
                          p95_tpot_ms=s.tpot_ms.p95, binding=binding, rate_interval=found.interval,
                          paired_interval=found.paired_interval, effort=effort,
                          num_simulated_requests=spent + sum(p.num_requests for p in found.trail),
                          failed_above=first.rate if first is not None else math.inf)


def _contenders(found: dict[int, FleetCandidate]) -> list[int]:
    """The leader (highest output tokens/s per GPU) and every layout that could pass it: whose rate interval's top,
    or the failing probe above its answer (the bracket it was screened to), reaches the leader's interval bottom,
    in output tokens/s per GPU (the paired intervals: every layout sees the same stream)."""
    def per_gpu(c: FleetCandidate, rate: float) -> float:
        return rate * c.output_tokens_per_s_per_gpu / c.max_rate if c.max_rate > 0 else 0.0

    live = {i: c for i, c in found.items() if c.max_rate > 0}
    if not live:
        return []
    lead = max(live.values(), key=lambda c: c.output_tokens_per_s_per_gpu)
    floor = per_gpu(lead, min(lead.paired_interval[0], lead.max_rate))
    def top(c: FleetCandidate) -> float:  # where its crossing could still lie
        return max(c.paired_interval[1], c.max_rate, c.failed_above if math.isfinite(c.failed_above) else 0.0)

    return [i for i, c in live.items() if c is lead or per_gpu(c, top(c)) >= floor]


def _replicas(spec: ClusterSpec | None) -> int:
    return sum(p.num_replicas for p in spec.pools) if spec is not None else 0


def plan_fleet(make: Callable[[int, int], Deployment], total_gpus: int,
               workload_at: Callable[[float, int | None], Workload], sla: SLA,
               serving: tuple[str, ...] = SERVING_MODES, *, rule: SteadyRule | None = None, tps: tuple[int, ...] = TPS,
               rate_tolerance: float = RATE_TOLERANCE, max_disaggregated: int = 12,
               layouts: list[tuple[str, str]] | None = None, workers: int | None = None) -> list[FleetCandidate]:
    """Rank the layouts of `total_gpus` GPUs (`layouts`: these (serving, layout) pairs instead of
    `candidate_layouts`); `make(tp, replicas)` builds a pool's deployment, `workload_at(rate, num_requests)` the
    request stream (one seed; None: its default count), `rule` judges every probe (default `SteadyRule()`). The
    layouts are searched `workers` at a time (default: one per CPU; the answer does not depend on it); those
    that do not fit in memory are left out."""
    global _SEARCH
    sample = workload_at(1.0, None).requests
    mean_out = sum(r.output_tokens for r in sample) / len(sample)
    mean_in = max(1, round(sum(r.input_tokens for r in sample) / len(sample)))
    if layouts is None:
        layouts = candidate_layouts(total_gpus, serving, tps, max_disaggregated)
    specs: list[tuple[str, str, ClusterSpec | None]] = []
    for mode, text in layouts:
        try:
            if mode == "aggregated":
                n, t = (int(x) for x in text.split("xtp"))
                if not memory_plan(make(t, 1)).fits:
                    continue
                spec = build_cluster(make, tp=t, replicas=n, router="least-outstanding")
            else:
                spec = build_cluster(make, tp=1, replicas=1, disaggregate=text, router="least-outstanding")
                if not all(memory_plan(p.deployment).fits for p in spec.pools):
                    continue
        except FlopwiseError:
            specs.append((mode, text, None))
            continue
        specs.append((mode, text, spec))
    _SEARCH = _Search(specs=tuple(specs), workload_at=workload_at, sla=sla, rule=rule or SteadyRule(),
                      rate_tolerance=rate_tolerance,
                      mean_in=mean_in, mean_out=mean_out, total_gpus=total_gpus)
    runner = Runner(max(1, workers or os.cpu_count() or 1))
    # the costliest first (more replicas, more events per probe), so that no worker is left with a long one at
    # the end; the answer does not depend on the order
    jobs = sorted((i for i, (_, _, spec) in enumerate(specs) if spec is not None),
                  key=lambda i: -_replicas(specs[i][2]))
    try:
        searched = dict(zip(jobs, runner.map(_search_job, [(i, SCREEN_EFFORT, None, 0) for i in jobs]), strict=True))
        again = [i for i in jobs if i in set(_contenders(searched))]  # round 2, still costliest first
        items = [(i, 1.0, searched[i].max_rate, searched[i].num_simulated_requests) for i in again]
        for i, c in zip(again, runner.map(_search_job, items), strict=True):
            if c.max_rate <= 0:  # a refinement that finds nothing keeps the screened answer
                continue
            if not c.binding:  # no probe failed above it this round: the constraint that failed in the first
                c = replace(c, binding=searched[i].binding)
            searched[i] = c
    finally:
        runner.close()
        _SEARCH = None
    out = [searched[i] if spec is not None else _infeasible(mode, text, total_gpus)
           for i, (mode, text, spec) in enumerate(specs)]
    out.sort(key=lambda c: -c.output_tokens_per_s_per_gpu)  # stable: ties keep the layouts' order
    return out


def fleet_plan_to_dict(cands: list[FleetCandidate], rate: float | None) -> dict[str, Any]:
    """JSON form: the ranked candidates and, per serving mode, its best and the GPUs it needs for `rate`."""
    def row(c: FleetCandidate) -> dict[str, Any]:
        return {"serving": c.serving, "layout": c.layout, "num_gpus": c.num_gpus, "max_request_rate": c.max_rate,
                "max_request_rate_interval": list(c.rate_interval), "screened": 0 < c.effort < 1,
                "num_simulated_requests": c.num_simulated_requests,
                "output_tokens_per_s_per_gpu": c.output_tokens_per_s_per_gpu,
                "tokens_per_s_per_user": c.tokens_per_s_per_user, "p95_ttft_ms": c.p95_ttft_ms,
                "p95_tpot_ms": c.p95_tpot_ms, "binding": c.binding,
                "gpus_for_rate": (math.ceil(rate / c.max_rate) * c.num_gpus if rate and c.max_rate > 0 else None)}

    best: dict[str, FleetCandidate] = {}
    for mode in SERVING_MODES:
        ok = [c for c in cands if c.serving == mode and c.max_rate > 0]
        if ok:
            best[mode] = ok[0]
    winner = cands[0].serving if cands and cands[0].max_rate > 0 else None
    ratio = None
    if len(best) == 2 and best["aggregated"].output_tokens_per_s_per_gpu:
        ratio = best["disaggregated"].output_tokens_per_s_per_gpu / best["aggregated"].output_tokens_per_s_per_gpu
    return {"candidates": [row(c) for c in cands], "best": {m: row(c) for m, c in best.items()}, "winner": winner,
            "disaggregated_over_aggregated": ratio,
            "screening": {"window_effort": SCREEN_EFFORT, "rate_tolerance": RATE_TOLERANCE * SCREEN_TOLERANCE}}
