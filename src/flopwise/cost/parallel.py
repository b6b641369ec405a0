"""Communication between GPUs of one model replica.

All-reduce takes the faster of two algorithms, as the engines' communicators pick by message size:
- ring (or two-shot) all-reduce (Patarasuk & Yuan 2009; NCCL, the engines' two-shot kernels): each GPU sends and
  receives 2(p-1)/p of the message, t = RING_LATENCY_S + 2 (p - 1) / p * message_bytes / link_bytes_per_s;
- one-shot all-reduce (vLLM / SGLang / TensorRT-LLM custom all-reduce over NVLink or Infinity Fabric, small
  messages): each GPU reads the whole message from each of its p - 1 peers, t = latency + (p - 1) * message_bytes /
  link_bytes_per_s.
Measured on H100 SXM (CUDA graphs, bf16), TP 4: one-shot 10 / 15 / 22 / 38 us and NCCL 17 / 19 / 26 / 37 us at
0.5 / 1 / 2 / 4 MiB (vLLM PR 24111, `benchmark_device_communicators.py`); nccl-tests on 4 x H100 (Ring, NCCL 2.29,
CUDA graph, symmetric registration) 25 / 35 / 50 / 84 us at 2 / 4 / 8 / 16 MiB, a slope of ~375 GB/s busbw over a
~16 us intercept (waynehacking8/nccl-collectives-bench, results/symmetric); SGLang's and vLLM's custom all-reduce on
H100 at TP 8, 17 / 22 / 34 us (SGLang) and 24 / 30 / 45 us (vLLM) at 1 / 2 / 4 MiB (sglang PR 2904), intercepts of
~10 and ~16 us; A100 TP 2 two-shot 17 / 23 / 33 / 54 us at 1 / 2 / 4 / 8 MiB (sglang PR 2688), ~12 us. So the
ring's fixed cost is 10-16 us by implementation (12 taken), above the one-shot's ~8 us small-message latency.
Where there is no fabric (PCIe) the engines fall back to NCCL: the ring alone, at the PCIe latency.
Tensor parallelism (Megatron-LM) all-reduces the hidden states
twice per layer (after attention and after the MLP): message = tokens * hidden * activation bytes.
The vocab-parallel LM head all-gathers its logits (ring all-gather: (p-1)/p of the result per GPU).
Pipeline parallelism sends the hidden states once per stage boundary (point-to-point).
Latencies: NCCL/custom all-reduce of small messages over NVLink ~ 8 us, over PCIe ~ 25 us (measured
small-message all-reduce latencies reported in the TensorRT-LLM custom all-reduce and NCCL tests).
Achieved bus bandwidth is below the link rate: nccl-tests all_reduce_perf reaches ~80% of NVLink's
per-direction rate on DGX/HGX systems (e.g. ~360 of 450 GB/s on H100) and ~60% over PCIe (no NVLink,
traffic through the PCIe switch or host bridge).

Between nodes each GPU has its own NIC (`network_gbs`, InfiniBand / RoCE) at NETWORK_EFFICIENCY of its rate and
NETWORK_LATENCY_S per transfer. Expert parallelism moves tokens with two all-to-alls per MoE layer (dispatch to
the experts' GPUs, combine back: DeepEP, NCCL all-to-all). Each GPU sends each of its tokens (B bytes in all, one
copy each) to the `fanout` GPUs holding its experts, at once: to GPUs of its own node over the peer fabric, and
to each other node that holds any of them once over its NIC, forwarded there over that node's fabric (DeepEP's
node-deduplicated dispatch). With the group's p GPUs over n nodes of `per_node`, under uniform routing a token
reaches (n - 1)(1 - (1 - 1/n)^fanout) other nodes in expectation:
    t = latency + max(intra / link, inter / network)
    intra = B * fanout * (per_node - 1) / p,   inter = B * (n - 1) * (1 - (1 - 1/n)^fanout)
(the network's latency where the group spans nodes). A pipeline boundary between nodes sends over the NIC.
"""

from __future__ import annotations

import math

from flopwise.errors import SpecError
from flopwise.specs.hardware import HardwareSpec

__all__ = ["link_bytes_per_s", "collective_latency_s", "allreduce_time", "RING_LATENCY_S", "allgather_time",
           "alltoall_time", "p2p_time", "network_bytes_per_s", "NETWORK_EFFICIENCY", "NETWORK_LATENCY_S"]

PCIE4_GBS = 32.0
NETWORK_EFFICIENCY = 0.85  # achieved share of a NIC's rate in large transfers (nccl-tests / NIXL over IB)
NETWORK_LATENCY_S = 50e-6  # per transfer between nodes (RDMA setup and completion, plus the NIC hop)
RING_LATENCY_S = 12e-6  # a ring / two-shot all-reduce's fixed cost over NVLink (the module docstring's intercepts)


def _is_fabric(hw: HardwareSpec) -> bool:
    return hw.interconnect.startswith(("nvlink", "infinity"))


def link_bytes_per_s(hw: HardwareSpec) -> float:
    """Achievable collective bandwidth per direction (link rate x bus efficiency)."""
    efficiency = 0.8 if _is_fabric(hw) else 0.6
    return (hw.interconnect_gbs or PCIE4_GBS) * 1e9 * efficiency


def collective_latency_s(hw: HardwareSpec) -> float:
    return 8e-6 if _is_fabric(hw) else 25e-6


def allreduce_time(hw: HardwareSpec, p: int, message_bytes: float,
                   per_node: int | None = None) -> tuple[float, float]:
    """(seconds, bytes each GPU sends) for an all-reduce over p GPUs: the faster of ring and one-shot (see the
    module docstring); over n = p / per_node nodes where the group spans them (`per_node` < p), hierarchically:
    a reduce-scatter and an all-gather inside each node around an all-reduce of each GPU's 1/per_node share
    between the nodes over its own NIC (NCCL across nodes, one NIC per GPU), with a network latency per level of
    its tree (`_network_hops`):
        t = ring(per_node, message) + hops(n) * NETWORK_LATENCY_S + 2 (n - 1) / n * message / per_node / network"""
    if p <= 1 or message_bytes <= 0:
        return 0.0, 0.0
    if per_node is not None and 0 < per_node < p:
        n = p / per_node
        inside, sent = allreduce_time(hw, per_node, message_bytes) if per_node > 1 else (0.0, 0.0)
        between = 2 * (n - 1) / n * message_bytes / per_node
        return inside + _network_hops(n) * NETWORK_LATENCY_S + between / _network(hw), sent + between
    link = link_bytes_per_s(hw)
    sent = 2 * (p - 1) / p * message_bytes
    if not _is_fabric(hw):
        return collective_latency_s(hw) + sent / link, sent
    ring = RING_LATENCY_S + sent / link
    one_shot = collective_latency_s(hw) + (p - 1) * message_bytes / link
    return (ring, sent) if ring < one_shot else (one_shot, (p - 1) * message_bytes)


def network_bytes_per_s(hw: HardwareSpec) -> float:
    """Achievable per-GPU bandwidth between nodes; 0 where the catalog gives no NIC."""
    return hw.network_gbs * 1e9 * NETWORK_EFFICIENCY


def _network(hw: HardwareSpec) -> float:
    rate = network_bytes_per_s(hw)
    if rate <= 0:
        raise SpecError(f"{hw.id} has no network bandwidth in the catalog (network_gbs): a deployment across "
                        "nodes needs it; give it in --hardware-file")
    return rate


def p2p_time(hw: HardwareSpec, message_bytes: float, *, between_nodes: bool = False) -> float:
    if message_bytes <= 0:
        return 0.0
    if between_nodes:
        return NETWORK_LATENCY_S + message_bytes / _network(hw)
    return collective_latency_s(hw) + message_bytes / link_bytes_per_s(hw)


def alltoall_time(hw: HardwareSpec, p: int, token_bytes: float, fanout: float,
                  per_node: int | None = None) -> tuple[float, float]:
    """(seconds, bytes each GPU sends) for a dispatch (or combine) over p GPUs, `per_node` of them in each node
    (None: all in one), of `token_bytes` per GPU to `fanout` GPUs per token (see the module docstring)."""
    if p <= 1 or token_bytes <= 0:
        return 0.0, 0.0
    local = min(p, per_node or p)
    n = p / local
    intra = token_bytes * fanout * (local - 1) / p
    inter = token_bytes * (n - 1) * (1 - (1 - 1 / n) ** fanout) if n > 1 else 0.0
    t = intra / link_bytes_per_s(hw)
    if inter > 0:
        return NETWORK_LATENCY_S + max(t, inter / _network(hw)), intra + inter
    return collective_latency_s(hw) + t, intra


def _network_hops(n: float) -> int:
    """Network latencies a collective over n nodes pays in sequence: one per level of a binary tree (NCCL's
    small-message algorithm across nodes), 1 between 2 nodes."""
    return max(1, math.ceil(math.log2(n)))


def allgather_time(hw: HardwareSpec, p: int, total_bytes: float, per_node: int | None = None) -> tuple[float, float]:
    """(seconds, bytes each GPU sends) for a ring all-gather whose result is `total_bytes`: (p-1)/p of it. Where
    the group spans n = p / per_node nodes, hierarchically as the all-reduce: each GPU first gathers its peers'
    1/p shares from the other nodes over its own NIC ((n - 1) / p of the result), then the node all-gathers
    those n / p slices over its fabric ((per_node - 1) / per_node of the result): half an all-reduce's traffic."""
    if p <= 1 or total_bytes <= 0:
        return 0.0, 0.0
    if per_node is not None and 0 < per_node < p:
        n = p / per_node
        between = (n - 1) / p * total_bytes
        inside, sent = allgather_time(hw, per_node, total_bytes) if per_node > 1 else (0.0, 0.0)
        return inside + _network_hops(n) * NETWORK_LATENCY_S + between / _network(hw), sent + between
    sent = (p - 1) / p * total_bytes
    return collective_latency_s(hw) + sent / link_bytes_per_s(hw), sent
