"""Parallelism and hardware: more GPUs per replica, or a different GPU.

Tensor parallelism over p GPUs (Megatron-LM, Shoeybi et al. 2019) splits every layer's weights, so each GPU
reads 1/p of the bytes per step, and adds two all-reduces of the hidden states per layer (`cost/parallel.py`):
decode gets faster where the weights dominate and the links are fast; memory per GPU falls, so the KV pool
and concurrency grow; FLOPs per token stay the same (split, not removed). Cost: p times the GPUs.

A different GPU moves three roofs at once: memory bandwidth (decode), peak FLOP/s (prefill, large batches) and
capacity (concurrency). The machine balance peak FLOP/s / bandwidth (FLOP per byte) says how much data reuse a
kernel needs to be compute-bound on it (Williams et al. 2009, roofline).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from flopwise.specs.hardware import GIB, HardwareSpec, get_hardware
from flopwise.techniques.scenario import Scenario, rebuild

__all__ = ["with_tp", "with_gpu", "Roofs", "roofs"]


def with_tp(scn: Scenario, tp: int) -> Scenario:
    return scn.with_deployment(rebuild(scn.deployment, tp=tp))


def with_gpu(scn: Scenario, gpu: str | HardwareSpec, hardware_file: str | Path | None = None) -> Scenario:
    hw = gpu if isinstance(gpu, HardwareSpec) else get_hardware(gpu, hardware_file)
    return scn.with_deployment(rebuild(scn.deployment, hardware=hw))


@dataclass(frozen=True, slots=True, kw_only=True)
class Roofs:
    gpu: str
    peak_flops: float  # FLOP/s for the deployment's compute dtype
    bandwidth_bytes_per_s: float
    capacity_gib: float

    @property
    def balance_flop_per_byte(self) -> float:
        """Arithmetic intensity at which the compute and memory roofs meet (the ridge point)."""
        return self.peak_flops / self.bandwidth_bytes_per_s


def roofs(hw: HardwareSpec, compute_dtype: str) -> Roofs:
    return Roofs(gpu=hw.id,
                 peak_flops=hw.peak_flops(compute_dtype, weight_only_fallback=compute_dtype in ("fp8", "fp4")),
                 bandwidth_bytes_per_s=hw.bandwidth_bytes_per_s, capacity_gib=hw.memory_bytes / GIB)
