"""Moving a request's KV cache from a prefill replica to a decode replica (disaggregated serving).

A link is its kind, per-GPU per-direction rate, achievable share of that rate and per-transfer latency:

    kind      where                         rate (per GPU)                  efficiency   latency
    nvlink    both replicas in one node     hardware.interconnect_gbs       0.8          20 us
    network   different nodes (IB / RoCE)   hardware.network_gbs            0.85         50 us
    infinite  (a bound: no transfer cost)   -                               -            0

Each GPU of the sending replica holds its shard of the KV and sends it over its own link, in parallel with the
others (NIXL / Mooncake transfer engines move each rank's blocks rank to rank; with unequal TP the receiver's
shards are gathered from several senders), so a transfer of B bytes takes

    t = latency + B / (min(sender GPUs, receiver GPUs) * rate * efficiency)

B is the request's KV as one copy of the model's cache, n tokens x kv bytes per token at tp = 1 (MLA's latent is
stored once per GPU but sent once; sliding windows are not capped here: an upper bound).
Layer-wise overlap (`layerwise`, as the transfer engines of DistServe, Mooncake, SGLang and vLLM's NIXL connector
do): layer l's KV is sent as soon as it is computed, so only the last layer's share waits for the prefill's end:

    done = max(prefill_end + B / L / bw, start + B / bw) + latency,   start = max(first_scheduled, link free)

and without it done = max(prefill_end, link free) + B / bw + latency. Transfers queue first come, first served on
the sending replica's links (`KvLink`).

Sources and assumptions: the efficiencies follow the bus efficiencies of `cost/parallel.py` (NCCL reaches ~80% of
NVLink's rate); RDMA writes of large blocks reach 85-90% of a 400 Gb/s NIC in NIXL/UCX and Mooncake's published
transfer-engine benchmarks; latencies are the order of magnitude of an RDMA write plus the transfer engine's
bookkeeping (tens of microseconds), far below a prefill. Per-request control messages (the bootstrap handshake)
are not modelled.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from functools import lru_cache

from flopwise.cost.layout import layout
from flopwise.cost.parallel import NETWORK_EFFICIENCY, NETWORK_LATENCY_S
from flopwise.errors import SpecError
from flopwise.specs.deployment import Deployment
from flopwise.specs.hardware import HardwareSpec

__all__ = ["LINK_KINDS", "LinkSpec", "link_between", "kv_transfer_bytes", "KvLink"]

LINK_KINDS = ("auto", "nvlink", "network", "infinite")
NVLINK_EFFICIENCY = 0.8
NVLINK_LATENCY_S = 20e-6


@dataclass(frozen=True, slots=True, kw_only=True)
class LinkSpec:
    """One path between two replicas: per-GPU rate (GB/s per direction), achievable share, latency, overlap."""

    kind: str
    rate_gbs: float = 0.0
    efficiency: float = 1.0
    latency_s: float = 0.0
    layerwise: bool = True

    def __post_init__(self) -> None:
        if self.kind not in LINK_KINDS[1:]:
            raise SpecError(f"unknown KV link '{self.kind}'; use one of {', '.join(LINK_KINDS)}")
        if self.kind != "infinite" and not self.rate_gbs > 0:
            raise SpecError(f"a {self.kind} KV link needs a rate > 0 GB/s; give the hardware's "
                            f"{'interconnect_gbs' if self.kind == 'nvlink' else 'network_gbs'} in --hardware-file "
                            "or use --kv-link infinite")

    @property
    def is_infinite(self) -> bool:
        return self.kind == "infinite"

    def bytes_per_s(self, num_gpus: int) -> float:
        return num_gpus * self.rate_gbs * 1e9 * self.efficiency


def link_between(kind: str, sender: HardwareSpec, receiver: HardwareSpec, same_node: bool,
                 layerwise: bool = True) -> LinkSpec:
    """The link of `kind` ("auto": NVLink within a node, the network between nodes) between two GPUs; a path's
    rate is the slower end's."""
    if kind == "auto":
        kind = "nvlink" if same_node and sender.id == receiver.id else "network"
    if kind == "infinite":
        return LinkSpec(kind="infinite", layerwise=layerwise)
    if kind == "nvlink":
        rate = min(sender.interconnect_gbs, receiver.interconnect_gbs)
        return LinkSpec(kind="nvlink", rate_gbs=rate, efficiency=NVLINK_EFFICIENCY, latency_s=NVLINK_LATENCY_S,
                        layerwise=layerwise)
    if kind != "network":
        raise SpecError(f"unknown KV link '{kind}'; use one of {', '.join(LINK_KINDS)}")
    rate = min(sender.network_gbs, receiver.network_gbs)
    if not rate > 0:
        raise SpecError(f"no network bandwidth in the catalog for {sender.id} / {receiver.id} (network_gbs); give "
                        "it in a --hardware-file, put the pools in one node, or use --kv-link infinite")
    return LinkSpec(kind="network", rate_gbs=rate, efficiency=NETWORK_EFFICIENCY, latency_s=NETWORK_LATENCY_S,
                    layerwise=layerwise)


def kv_transfer_bytes(dep: Deployment, num_tokens: int) -> float:
    """Bytes of one copy of `num_tokens` tokens' KV cache (all layers, tp = pp = 1 sizes)."""
    return num_tokens * _kv_bytes_per_token(dep)


@lru_cache(maxsize=256)
def _kv_bytes_per_token(dep: Deployment) -> float:
    whole = dep.tp == dep.pp == dep.dp == dep.nodes == dep.replicas == 1
    one = dep if whole else replace(dep, tp=1, pp=1, dp=1, ep=1, nodes=1, replicas=1, replicas_per_server=1)
    return layout(one).kv_bytes_per_token


@dataclass(slots=True)
class KvLink:
    """A sending replica's links as one first-come-first-served server (`free_at`: when the last queued
    transfer leaves them; `busy_s`: seconds they carried data)."""

    free_at: float = 0.0
    busy_s: float = field(default=0.0)

    def transfer(self, spec: LinkSpec, num_gpus: int, num_layers: int, num_bytes: float,
                 first_scheduled_at: float, prefill_end_at: float) -> float:
        """Queue one transfer of `num_bytes` over `num_gpus` parallel GPU links (min of the two replicas'
        GPUs) for a model of `num_layers` layers; returns when the KV is all on the receiver."""
        if spec.is_infinite or num_bytes <= 0:
            return prefill_end_at
        wire = num_bytes / spec.bytes_per_s(num_gpus)
        if spec.layerwise:
            start = max(first_scheduled_at, self.free_at)
            end = max(prefill_end_at + wire / num_layers, start + wire)
        else:
            start = max(prefill_end_at, self.free_at)
            end = start + wire
        self.free_at = end
        self.busy_s += wire
        return end + spec.latency_s
