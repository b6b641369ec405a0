"""A ClusterSpec from the command line's forms: `--replicas N --router NAME`, `--disaggregate "prefill=2xtp2,
decode=1xtp4"`, `--replica-events "down:3@120"`, `--autoscale 2..16 --cold-start auto|SECONDS`."""

from __future__ import annotations

from collections.abc import Callable

from flopwise.errors import WorkloadError
from flopwise.specs.cluster import (
    DEFAULT_ENGINE_START_S,
    DEFAULT_STORAGE_GBS,
    AutoscaleSpec,
    ClusterSpec,
    PoolSpec,
    parse_autoscale,
    parse_disaggregate,
    parse_replica_events,
)
from flopwise.specs.deployment import Deployment

__all__ = ["build_cluster"]


def build_cluster(make: Callable[[int, int], Deployment], *, tp: int, replicas: int | None,
                  router: str = "round-robin",
                  disaggregate: str | None = None, kv_link: str = "auto", layerwise: bool = True,
                  replica_events: str | None = None, autoscale: str | None = None,
                  cold_start: str = "auto", storage_gbs: float = DEFAULT_STORAGE_GBS,
                  engine_start_s: float = DEFAULT_ENGINE_START_S, target_outstanding: float = 32.0,
                  autoscale_interval_s: float = 10.0) -> ClusterSpec:
    """`make(tp, replicas)` builds a pool's deployment (model, GPU, formats and knobs fixed by the caller);
    `replicas` None: the autoscaler's minimum, or one."""
    lo, hi = parse_autoscale(autoscale) if autoscale else (1, None)
    if replicas is None:
        replicas = lo
    elif hi is not None and not disaggregate and not lo <= replicas <= hi:
        raise WorkloadError(f"the fleet would start with {replicas} replicas (--replicas, or --num-gpus / tp), "
                            f"outside --autoscale {lo}..{hi}: start within the range, or leave both out to start at "
                            "its minimum")
    if disaggregate:
        pools = parse_disaggregate(disaggregate)
        spec_pools = tuple(PoolSpec(name=role, role=role, deployment=make(t, n))
                           for role, (n, t) in sorted(pools.items(), key=lambda kv: kv[0] != "prefill"))
    else:
        spec_pools = (PoolSpec(name="mixed", role="mixed", deployment=make(tp, replicas)),)
    scale = None
    if autoscale:
        assert hi is not None
        if cold_start == "auto":
            cold = None
        else:
            try:
                cold = float(cold_start)
            except ValueError:
                raise WorkloadError(f"--cold-start must be auto or seconds, got '{cold_start}'") from None
        scale = AutoscaleSpec(min_replicas=lo, max_replicas=hi, cold_start_s=cold, storage_gbs=storage_gbs,
                              engine_start_s=engine_start_s, target_outstanding=target_outstanding,
                              interval_s=autoscale_interval_s)
    events = parse_replica_events(replica_events) if replica_events else ()
    return ClusterSpec(pools=spec_pools, router=router, kv_link=kv_link, layerwise=layerwise, events=events,
                       autoscale=scale)
