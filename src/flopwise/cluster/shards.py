"""A fleet whose routing is fixed in advance, simulated as independent shards on several cores.

With round-robin routing, an open loop, one mixed pool whose replicas are all up for the whole run (no replica
events, no autoscaler, an API server per replica) and bounded metrics, replica i serves requests i, i + R, ...
whatever the others do (`fleet.py`), and nothing one replica does reaches another. Such a fleet splits exactly
into shards of consecutive replicas: replicas lo .. hi-1 serve the requests at positions p with lo <= p mod R
< hi, and round-robin over those alone, in order, sends them to the same replicas. Each shard is a fleet of its
own (replica draws seeded by their index in the whole fleet) run in a process forked from this one (it inherits
the workload: nothing is copied up front); it sends back its replicas' timelines and its rows, which go back in
their places. The summary and the rows are the one-process run's, bit for bit (tests/test_shards.py).
"""

from __future__ import annotations

import multiprocessing as mp
import os
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import numpy as np

from flopwise.cluster.fleet import Fleet, FleetResult
from flopwise.cluster.metrics import BoundedRecords
from flopwise.sim.config import SimConfig
from flopwise.sim.timeline import Timeline
from flopwise.specs.cluster import ClusterSpec, PoolSpec
from flopwise.specs.sla import SLA
from flopwise.workload.spec import Workload

__all__ = ["SHARDS_FROM", "simulate_fleet", "splits_exactly", "default_workers", "shard_bounds", "simulate_sharded"]

SHARDS_FROM = 20_000  # requests from which a fleet that splits exactly runs on several cores by default


def splits_exactly(fleet: Fleet, workload: Workload) -> bool:
    """Whether the run of `workload` on `fleet` splits into independent shards."""
    spec = fleet.spec
    return (spec.router == "round-robin" and not spec.is_disaggregated and not spec.events
            and spec.autoscale is None and spec.frontend_at == "replica" and workload.concurrency is None
            and workload.max_concurrency is None
            and fleet.bounded_for(workload.num_requests) and spec.num_replicas <= workload.num_requests)


def default_workers(num_requests: int, num_replicas: int) -> int:
    """Processes for a fleet that splits exactly: one per core this process may run on (none where processes
    cannot be forked), none below SHARDS_FROM requests."""
    if num_requests < SHARDS_FROM or sys.platform != "linux" or "fork" not in mp.get_all_start_methods():
        return 1
    return max(1, min(len(os.sched_getaffinity(0)), num_replicas))


def shard_bounds(num_replicas: int, workers: int) -> list[tuple[int, int]]:
    """`workers` runs of consecutive replicas (lo, hi), as even as can be, the larger first."""
    size, extra = divmod(num_replicas, workers)
    out, lo = [], 0
    for k in range(workers):
        hi = lo + size + (k < extra)
        out.append((lo, hi))
        lo = hi
    return out


@dataclass(frozen=True, slots=True, kw_only=True)
class _ShardRun:
    """What a shard sends back: its replicas' timelines and routed counts, its closed rows and last instant."""

    timelines: tuple[Timeline, ...]
    num_routed: tuple[int, ...]
    records: BoundedRecords
    now: float


@dataclass(frozen=True, slots=True, kw_only=True)
class _Job:
    """The run the forked shards inherit (a module global set before the fork, so nothing is pickled for them)."""

    spec: ClusterSpec
    config: SimConfig
    workload: Workload
    bounds: tuple[tuple[int, int], ...]
    done: Sequence[int]  # completions per shard so far (shared memory; the parent reports them)
    sla: SLA | None  # the run's (its ITL bounds decide what each shard's records keep per request)


_job: _Job | None = None


def _rows(num_requests: int, num_replicas: int, lo: int, hi: int) -> np.ndarray:
    """The positions p < num_requests with lo <= p mod num_replicas < hi, in order."""
    pos = np.arange(num_requests)
    m = pos % num_replicas
    return pos[(m >= lo) & (m < hi)]


def _run_shard(job: _Job, k: int, progress: Callable[[int], None] | None) -> _ShardRun:
    lo, hi = job.bounds[k]
    pool = job.spec.pools[0]
    sub_pool = PoolSpec(name=pool.name, role=pool.role, deployment=replace(pool.deployment, replicas=hi - lo))
    sub_spec = replace(job.spec, pools=(sub_pool,))
    reqs = job.workload.requests
    rows = _rows(len(reqs), job.spec.num_replicas, lo, hi)
    sub = replace(job.workload, requests=tuple(reqs[i] for i in rows.tolist()))
    fleet = Fleet(sub_spec, job.config, "bounded", first_replica=lo)
    fleet.run(sub, progress, job.sla)
    assert fleet.bounded is not None
    return _ShardRun(timelines=tuple(m.replica.timeline() for m in fleet.members),
                     num_routed=tuple(m.num_routed for m in fleet.members), records=fleet.bounded, now=fleet.now)


def _forked_shard(k: int) -> _ShardRun:
    """Shard k in a forked process: its completions counted where the parent reads them."""
    job = _job
    assert job is not None
    done = job.done

    def count(n: int) -> None:
        done[k] += n  # type: ignore[index]

    return _run_shard(job, k, count)


def simulate_sharded(fleet: Fleet, workload: Workload, workers: int, *, sla: SLA | None = None,
                     progress: Callable[[int], None] | None = None) -> FleetResult:
    """`fleet.run(workload)` for a fleet that `splits_exactly`, in `workers` processes (this one runs the first
    shard); `fleet` (not run) takes the shards' timelines and rows."""
    global _job
    t0 = time.perf_counter()
    spec = fleet.spec
    fleet.check(workload)
    bounds = shard_bounds(spec.num_replicas, workers)
    ctx = mp.get_context("fork")
    done = ctx.RawArray("q", workers)
    job = _Job(spec=spec, config=fleet.config, workload=workload, bounds=tuple(bounds), done=done, sla=sla)
    own = reported = 0

    def report(n: int) -> None:  # this process's completions, and the others' since the last call
        nonlocal own, reported
        own += n
        total = own + sum(done[1:])
        if progress is not None and total > reported:
            progress(total - reported)
        reported = total

    _job = job
    try:
        with ctx.Pool(workers - 1) as pool:
            others = pool.map_async(_forked_shard, range(1, workers))
            first = _run_shard(job, 0, report if progress is not None else None)
            runs = [first, *others.get()]
    finally:
        _job = None
    report(0)
    records = BoundedRecords(workload.num_requests, sla.itl_stats if sla is not None else ())
    for (lo, hi), run in zip(bounds, runs, strict=True):
        records.merge(run.records, _rows(workload.num_requests, spec.num_replicas, lo, hi), lo)
        fleet.adopt(lo, run.timelines, run.num_routed, run.now)
    fleet.bounded = records
    return FleetResult(fleet, workload, sla, time.perf_counter() - t0)


def simulate_fleet(spec: ClusterSpec, workload: Workload, config: SimConfig | None = None, *,
                   sla: SLA | None = None, progress: Callable[[int], None] | None = None,
                   metrics: str = "auto", workers: int | None = None) -> FleetResult:
    """Serve `workload` on the fleet `spec` (one run); `metrics` as `Fleet`'s. A fleet that `splits_exactly`
    runs in `workers` processes (None: `default_workers`); any other, or workers 1, in this one."""
    fleet = Fleet(spec, config, metrics)
    if workers is None:
        workers = default_workers(workload.num_requests, spec.num_replicas)
    workers = min(workers, spec.num_replicas)
    if mp.current_process().daemon:  # (a pool's worker process may not start processes of its own)
        workers = 1
    if workers > 1 and splits_exactly(fleet, workload):
        return simulate_sharded(fleet, workload, workers, sla=sla, progress=progress)
    return fleet.run(workload, progress, sla)
