"""Autoscaling a pool on its load, and what a cold start costs.

Cold start (a new replica until it serves):

    cold_start_s = weight bytes of the replica / storage_gbs + engine_start_s

The weights are read once per replica (each GPU its shard, all shards through one storage or network path of
`storage_gbs`, e.g. 2 GB/s from a network volume or object store); `engine_start_s` covers process start, CUDA
context, graph capture and warm-up (vLLM and SGLang report 20-60 s on H100 for 8-70B models beyond loading).
So a 140 GB model over a 2 GB/s link takes 70 s plus start-up.

The rule (a concurrency target, as KServe / Knative's and the llm-d and AIBrix autoscalers' "outstanding
requests per replica"): every `interval_s`, desired = ceil(outstanding requests of the pool, those waiting at
the router included / target_outstanding), clamped to [min, max]. Above the replicas up or starting, new ones
start at once (cold); below, the least loaded replica is drained (takes no new request, stops when empty) once
desired has stayed below for `scale_down_delay_s`. Scale to zero: min 0; requests then wait at the router for a
cold start.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from flopwise.cost.layout import layout
from flopwise.specs.cluster import DEFAULT_ENGINE_START_S, AutoscaleSpec
from flopwise.specs.deployment import Deployment

if TYPE_CHECKING:  # the fleet imports this module; the type only
    from flopwise.cluster.fleet import Fleet

__all__ = ["cold_start_s", "Autoscaler", "DEFAULT_ENGINE_START_S"]


def cold_start_s(dep: Deployment, storage_gbs: float, engine_start_s: float = DEFAULT_ENGINE_START_S) -> float:
    """Seconds from asking for a replica to its serving: its weights over `storage_gbs` plus engine start-up."""
    weight_bytes = layout(dep).weight_bytes_per_gpu * dep.gpus_per_replica
    return weight_bytes / (storage_gbs * 1e9) + engine_start_s


class Autoscaler:
    """Scales the pool of `role`; `history` records (time, replicas up or starting, of them serving, desired)."""

    def __init__(self, spec: AutoscaleSpec, role: str, cold_s: float):
        self.spec = spec
        self.role = role
        self.cold_s = cold_s
        self.below_since: float | None = None
        self.history: list[tuple[float, int, int, int]] = []
        self.num_started = 0
        self.num_drained = 0

    def tick(self, fleet: Fleet, at: float) -> None:
        spec = self.spec
        members = [m for m in fleet.members if m.pool.role == self.role and m.state in ("up", "cold")]
        outstanding = sum(m.num_outstanding for m in members) + len(fleet.pending[self.role])
        desired = min(spec.max_replicas, max(spec.min_replicas, math.ceil(outstanding / spec.target_outstanding)))
        have = len(members)
        self.history.append((at, have, sum(m.state == "up" for m in members), desired))
        if desired > have:
            self.below_since = None
            for _ in range(desired - have):
                fleet.scale_up(self.role, at, self.cold_s)
                self.num_started += 1
        elif desired < have:
            if self.below_since is None:
                self.below_since = at
            if at - self.below_since >= spec.scale_down_delay_s:
                up = [m for m in members if m.state == "up"]
                for m in sorted(up, key=lambda m: (m.num_outstanding, -m.index))[: have - desired]:
                    fleet.drain(m)
                    self.num_drained += 1
                self.below_since = None
        else:
            self.below_since = None

    def summary(self, end: float) -> dict[str, Any]:
        """The run's scaling up to its `end` (a tick after the last request is not the run's): replicas used are
        those serving (up), not those still starting."""
        seen = [h for h in self.history if h[0] <= end]
        return {"min_replicas": self.spec.min_replicas, "max_replicas": self.spec.max_replicas,
                "target_outstanding": self.spec.target_outstanding, "cold_start_s": self.cold_s,
                "replicas_started": self.num_started, "replicas_drained": self.num_drained,
                "max_replicas_used": max((h[2] for h in seen), default=0),
                "max_replicas_asked": max((h[1] for h in seen), default=0),
                "history": [{"at_s": t, "replicas": n, "serving": up, "desired": d} for t, n, up, d in seen]}
