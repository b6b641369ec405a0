"""Communication between GPUs of one model replica.

Ring all-reduce (Patarasuk & Yuan 2009; NCCL): each GPU sends and receives 2(p-1)/p of the message,
    t = latency + 2 (p - 1) / p * message_bytes / link_bytes_per_s
with the link's per-direction bandwidth. Tensor parallelism (Megatron-LM) all-reduces the hidden states
twice per layer (after attention and after the MLP): message = tokens * hidden * activation bytes.
The vocab-parallel LM head all-gathers its logits (ring all-gather: (p-1)/p of the result per GPU).
Pipeline parallelism sends the hidden states once per stage boundary (point-to-point).
Latencies: NCCL/custom all-reduce of small messages over NVLink ~ 8 us, over PCIe ~ 25 us (measured
small-message all-reduce latencies reported in the TensorRT-LLM custom all-reduce and NCCL tests).
Achieved bus bandwidth is below the link rate: nccl-tests all_reduce_perf reaches ~80% of NVLink's
per-direction rate on DGX/HGX systems (e.g. ~360 of 450 GB/s on H100) and ~60% over PCIe (no NVLink,
traffic through the PCIe switch or host bridge).
"""

from __future__ import annotations

from flopwise.specs.hardware import HardwareSpec

__all__ = ["link_bytes_per_s", "collective_latency_s", "allreduce_time", "allgather_time", "p2p_time"]

PCIE4_GBS = 32.0


def _is_fabric(hw: HardwareSpec) -> bool:
    return hw.interconnect.startswith(("nvlink", "infinity"))


def link_bytes_per_s(hw: HardwareSpec) -> float:
    """Achievable collective bandwidth per direction (link rate x bus efficiency)."""
    efficiency = 0.8 if _is_fabric(hw) else 0.6
    return (hw.interconnect_gbs or PCIE4_GBS) * 1e9 * efficiency


def collective_latency_s(hw: HardwareSpec) -> float:
    return 8e-6 if _is_fabric(hw) else 25e-6


def allreduce_time(hw: HardwareSpec, p: int, message_bytes: float) -> tuple[float, float]:
    """(seconds, bytes each GPU sends) for a ring all-reduce over p GPUs."""
    if p <= 1 or message_bytes <= 0:
        return 0.0, 0.0
    sent = 2 * (p - 1) / p * message_bytes
    return collective_latency_s(hw) + sent / link_bytes_per_s(hw), sent


def p2p_time(hw: HardwareSpec, message_bytes: float) -> float:
    return collective_latency_s(hw) + message_bytes / link_bytes_per_s(hw) if message_bytes > 0 else 0.0


def allgather_time(hw: HardwareSpec, p: int, total_bytes: float) -> tuple[float, float]:
    """(seconds, bytes each GPU sends) for a ring all-gather whose result is `total_bytes`: (p-1)/p of it."""
    if p <= 1 or total_bytes <= 0:
        return 0.0, 0.0
    sent = (p - 1) / p * total_bytes
    return collective_latency_s(hw) + sent / link_bytes_per_s(hw), sent
