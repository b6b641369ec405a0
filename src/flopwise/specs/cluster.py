"""A fleet: pools of replicas of deployments behind a router, with the KV link between disaggregated pools.

    ClusterSpec
    ├── pools: (PoolSpec, ...)   role "mixed" (prefill and decode in one engine: aggregated serving), or a
    │                            "prefill" pool and a "decode" pool (disaggregated); each a Deployment whose
    │                            `replicas` is the pool's size, with its own GPU type, TP and knobs
    ├── router                   how each pool picks a replica (cluster/router.py)
    ├── kv_link / layerwise      how KV moves from prefill to decode (cost/transfer.py)
    ├── events                   replicas going down or draining at given instants
    └── autoscale                a replica-count range and the rule that moves within it (cluster/autoscale.py)

Text forms: `parse_disaggregate("prefill=2xtp2,decode=1xtp4")` gives (role, replicas, tp) per pool;
`parse_autoscale("2..16")` the range.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from flopwise.errors import SpecError, WorkloadError
from flopwise.specs.deployment import Deployment
from flopwise.validate import integer, number

__all__ = ["ROLES", "MAX_REPLICAS", "DEFAULT_STORAGE_GBS", "DEFAULT_ENGINE_START_S", "PoolSpec", "ReplicaEvent",
           "AutoscaleSpec", "ClusterSpec", "parse_disaggregate",
           "parse_autoscale", "parse_replica_events"]

ROLES = ("mixed", "prefill", "decode")
MAX_REPLICAS = 4096  # replicas in one pool (a bound on the simulator's work, far above any real fleet)
DEFAULT_STORAGE_GBS = 2.0  # weights read at a cold start: a network volume / object store, GB/s
DEFAULT_ENGINE_START_S = 30.0  # engine start-up beyond reading the weights (process, CUDA graphs, warm-up)
EVENT_KINDS = ("down", "drain", "up")


@dataclass(frozen=True, slots=True, kw_only=True)
class PoolSpec:
    """`deployment.replicas` replicas of one deployment, serving `role`."""

    name: str
    role: str
    deployment: Deployment

    def __post_init__(self) -> None:
        if self.role not in ROLES:
            raise SpecError(f"pool '{self.name}': role must be one of {', '.join(ROLES)}, got '{self.role}'")

    @property
    def num_replicas(self) -> int:
        return self.deployment.replicas

    @property
    def num_gpus(self) -> int:
        return self.deployment.num_gpus


@dataclass(frozen=True, slots=True)
class ReplicaEvent:
    """At `at` (s), replica `replica` (its index in the fleet) goes `down` (its requests fail), starts to
    `drain` (takes no new request, finishes what it has) or comes back `up`."""

    at: float
    replica: int
    kind: str

    def __post_init__(self) -> None:
        if self.kind not in EVENT_KINDS:
            raise SpecError(f"replica event kind must be one of {', '.join(EVENT_KINDS)}, got '{self.kind}'")
        if self.at < 0 or self.replica < 0:
            raise SpecError(f"replica event needs at >= 0 and a replica index >= 0, got {self.at}, {self.replica}")


@dataclass(frozen=True, slots=True, kw_only=True)
class AutoscaleSpec:
    """Keep between `min_replicas` and `max_replicas` replicas of the (mixed or decode) pool. Every
    `interval_s` the autoscaler compares the mean outstanding requests per ready replica with
    `target_outstanding` (a KServe/Knative-style concurrency target) and asks for
    ceil(outstanding / target) replicas, scaling down only after `scale_down_delay_s` below target. A new
    replica serves after `cold_start_s` (None: priced from the weights, `cluster/autoscale.py`)."""

    min_replicas: int
    max_replicas: int
    target_outstanding: float = 32.0
    interval_s: float = 10.0
    scale_down_delay_s: float = 60.0
    cold_start_s: float | None = None
    storage_gbs: float = DEFAULT_STORAGE_GBS
    engine_start_s: float = DEFAULT_ENGINE_START_S

    def __post_init__(self) -> None:
        if not 0 <= self.min_replicas <= self.max_replicas or self.max_replicas < 1:
            raise SpecError(f"--autoscale needs 0 <= min <= max and max >= 1, got {self.min_replicas}.."
                            f"{self.max_replicas}")
        integer(self.max_replicas, "--autoscale MAX", lo=1, hi=MAX_REPLICAS, error=SpecError)
        for name in ("target_outstanding", "interval_s", "storage_gbs"):
            number(getattr(self, name), f"autoscale {name}", lo=0, lo_open=True, error=SpecError)
        number(self.scale_down_delay_s, "autoscale scale_down_delay_s", lo=0, error=SpecError)
        number(self.engine_start_s, "--engine-start-s", lo=0, error=SpecError)
        if self.cold_start_s is not None:
            number(self.cold_start_s, "--cold-start", lo=0, error=SpecError)


@dataclass(frozen=True, slots=True, kw_only=True)
class ClusterSpec:
    pools: tuple[PoolSpec, ...]
    router: str = "round-robin"
    kv_link: str = "auto"
    layerwise: bool = True
    events: tuple[ReplicaEvent, ...] = ()
    autoscale: AutoscaleSpec | None = None
    frontend_at: str = "replica"  # the API server: one per replica, or one in front of the router ("router")

    def __post_init__(self) -> None:
        roles = [p.role for p in self.pools]
        if not self.pools:
            raise SpecError("a fleet needs at least one pool")
        if "mixed" in roles and len(roles) > 1:
            raise SpecError("a fleet is either one mixed pool (aggregated) or a prefill and a decode pool")
        if "mixed" not in roles and sorted(roles) != ["decode", "prefill"]:
            raise SpecError(f"a disaggregated fleet needs exactly one prefill and one decode pool, got {roles}")
        if self.frontend_at not in ("replica", "router"):
            raise SpecError(f"frontend_at must be 'replica' or 'router', got '{self.frontend_at}'")

    @property
    def is_disaggregated(self) -> bool:
        return self.pools[0].role != "mixed"

    def pool(self, role: str) -> PoolSpec:
        for p in self.pools:
            if p.role == role:
                return p
        raise KeyError(role)

    @property
    def num_gpus(self) -> int:
        return sum(p.num_gpus for p in self.pools)

    @property
    def num_replicas(self) -> int:
        return sum(p.num_replicas for p in self.pools)


_POOL = re.compile(r"^\s*(prefill|decode)\s*=\s*(\d+)\s*x\s*tp(\d+)\s*$", re.I)


def parse_disaggregate(text: str) -> dict[str, tuple[int, int]]:
    """'prefill=2xtp2,decode=1xtp4' -> {'prefill': (2, 2), 'decode': (1, 4)} (replicas, tp)."""
    out: dict[str, tuple[int, int]] = {}
    for part in text.split(","):
        m = _POOL.match(part)
        if not m:
            raise WorkloadError(f"--disaggregate part '{part.strip()}' is not ROLE=NxtpT (e.g. "
                                "'prefill=2xtp2,decode=1xtp4')")
        role, n, tp = m.group(1).lower(), int(m.group(2)), int(m.group(3))
        if role in out:
            raise WorkloadError(f"--disaggregate names the {role} pool twice ('{text}'); give each pool once")
        integer(n, f"--disaggregate {role} replicas", lo=1, hi=MAX_REPLICAS)
        integer(tp, f"--disaggregate {role} tp", lo=1, hi=1024)
        out[role] = (n, tp)
    if set(out) != {"prefill", "decode"}:
        raise WorkloadError("--disaggregate needs both a prefill and a decode pool, e.g. 'prefill=2xtp2,decode=1xtp4'")
    return out


def parse_autoscale(text: str) -> tuple[int, int]:
    """'2..16' -> (2, 16)."""
    m = re.match(r"^\s*(\d+)\s*\.\.\s*(\d+)\s*$", text)
    if not m:
        raise WorkloadError(f"--autoscale must be MIN..MAX (e.g. 2..16), got '{text}'")
    lo, hi = int(m.group(1)), int(m.group(2))
    if lo > hi or hi < 1:
        raise WorkloadError(f"--autoscale {text}: need MIN <= MAX and MAX >= 1")
    return lo, hi


def parse_replica_events(text: str) -> tuple[ReplicaEvent, ...]:
    """'down:3@120,drain:0@60' -> replica 3 goes down at 120 s, replica 0 drains from 60 s."""
    out = []
    for part in filter(None, (p.strip() for p in text.split(","))):
        m = re.match(r"^(down|drain|up):(\d+)@([0-9.]+)$", part)
        if not m:
            raise WorkloadError(f"replica event '{part}' is not KIND:REPLICA@SECONDS (e.g. down:3@120)")
        out.append(ReplicaEvent(float(m.group(3)), int(m.group(2)), m.group(1)))
    return tuple(sorted(out, key=lambda e: e.at))
