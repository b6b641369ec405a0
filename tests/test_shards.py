"""A fleet that splits exactly (round-robin, open loop, one pool, replicas up throughout, bounded rows) run as
shards in forked processes gives the one-process run's summary and rows, bit for bit."""

from __future__ import annotations

import json
import multiprocessing

import numpy as np
import pytest

from flopwise.api import deployment
from flopwise.cluster import simulate_fleet
from flopwise.cluster.fleet import Fleet
from flopwise.cluster.shards import _rows, default_workers, shard_bounds, splits_exactly
from flopwise.errors import WorkloadError
from flopwise.specs.cluster import ClusterSpec, PoolSpec, ReplicaEvent
from flopwise.workload import RequestSpec, Workload, build_workload

pytestmark = pytest.mark.skipif("fork" not in multiprocessing.get_all_start_methods(),
                                reason="shards run in forked processes")


def _spec(replicas: int, router: str = "round-robin", **kw) -> ClusterSpec:
    dep = deployment("llama-3.1-8b", "h100-sxm", num_gpus=replicas, **kw)
    return ClusterSpec(pools=(PoolSpec(name="mixed", role="mixed", deployment=dep),), router=router)


def _same(a, b) -> None:
    sa, sb = a.summary(), b.summary()
    sa.pop("sim_wall_s")
    sb.pop("sim_wall_s")
    assert json.dumps(sa, sort_keys=True) == json.dumps(sb, sort_keys=True)
    assert a.rows() == b.rows()


def test_shard_bounds_and_rows():
    assert shard_bounds(32, 2) == [(0, 16), (16, 32)]
    assert shard_bounds(5, 3) == [(0, 2), (2, 4), (4, 5)]
    # replicas 1 and 2 of 4 serve positions 1, 2, 5, 6, 9
    assert _rows(10, 4, 1, 3).tolist() == [1, 2, 5, 6, 9]


@pytest.mark.parametrize("workers", [2, 3])
def test_sharded_run_is_the_one_process_run(workers):
    spec = _spec(5)
    wl = build_workload(num_requests=1500, workload="chat", request_rate=40.0, seed=3)
    one = simulate_fleet(spec, wl, metrics="bounded", workers=1)
    many = simulate_fleet(spec, wl, metrics="bounded", workers=workers)
    _same(one, many)
    per = [r["num_requests"] for r in many.summary()["fleet"]["replicas"]]
    assert per == [300] * 5
    assert many.bounded is not None and int(many.bounded.replica[many.bounded.ok].max()) == 4


def test_speculative_draws_follow_the_replica_not_the_shard():
    """Each replica's acceptance draws are seeded by its index in the whole fleet."""
    spec = _spec(4, speculative="eagle,k=3,accepted=2.6")
    wl = build_workload(num_requests=600, workload="chat", request_rate=30.0, seed=1)
    _same(simulate_fleet(spec, wl, metrics="bounded", workers=1),
          simulate_fleet(spec, wl, metrics="bounded", workers=2))


def test_progress_counts_every_request_once():
    spec = _spec(4)
    wl = build_workload(num_requests=800, workload="chat", request_rate=30.0, seed=0)
    seen: list[int] = []
    simulate_fleet(spec, wl, metrics="bounded", workers=2, progress=seen.append)
    assert sum(seen) == 800 and all(n > 0 for n in seen)


def test_what_does_not_split():
    wl = build_workload(num_requests=400, workload="chat", request_rate=30.0, seed=0)
    closed = build_workload(num_requests=400, workload="chat", concurrency=8, seed=0)

    def splits(spec, w, metrics="bounded"):
        return splits_exactly(Fleet(spec, None, metrics), w)

    assert splits(_spec(4), wl)
    assert not splits(_spec(4, "least-outstanding"), wl)  # reads every replica's load
    assert not splits(_spec(4), closed)  # a client's next request follows a completion anywhere
    assert not splits(_spec(4), wl, "exact")  # token times stay in this process
    assert not splits(ClusterSpec(pools=_spec(4).pools, events=(ReplicaEvent(at=1.0, kind="down", replica=1),)), wl)
    assert not splits(_spec(8), Workload(requests=wl.requests[:5]))  # fewer requests than replicas
    assert default_workers(1000, 32) == 1  # below SHARDS_FROM: not worth the processes


def test_a_request_no_replica_can_hold_is_refused_before_any_fork():
    spec = _spec(2)
    reqs = tuple(RequestSpec(arrival_at=0.01 * i, input_tokens=100, output_tokens=10) for i in range(40))
    huge = RequestSpec(arrival_at=0.3, input_tokens=600_000, output_tokens=10)
    wl = Workload(requests=reqs[:30] + (huge,) + reqs[31:])
    with pytest.raises(WorkloadError) as one:
        simulate_fleet(spec, wl, metrics="bounded", workers=1)
    with pytest.raises(WorkloadError) as many:
        simulate_fleet(spec, wl, metrics="bounded", workers=2)
    assert str(one.value) == str(many.value)


def test_merged_rows_sit_where_the_one_process_run_puts_them():
    spec = _spec(3)
    wl = build_workload(num_requests=900, workload="chat", request_rate=30.0, seed=2)
    res = simulate_fleet(spec, wl, metrics="bounded", workers=2)
    b = res.bounded
    assert b is not None and b.ok.all()
    np.testing.assert_array_equal(b.replica, np.arange(900) % 3)  # request i on replica i mod 3
    np.testing.assert_array_equal(b.cols["arrival_at"], [r.arrival_at for r in wl.requests])


def _in_a_pool_worker(_: int) -> int:
    spec = _spec(2)
    wl = build_workload(num_requests=300, workload="chat", request_rate=20.0, seed=0)
    return simulate_fleet(spec, wl, metrics="bounded", workers=2).summary()["num_completed"]


def test_a_pool_worker_runs_its_fleet_in_itself():
    """A daemonic pool worker may not start processes: its fleet runs in one process."""
    with multiprocessing.get_context("fork").Pool(1) as pool:
        assert pool.map(_in_a_pool_worker, [0]) == [300]
