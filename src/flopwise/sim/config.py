"""Simulator options that are not part of the deployment (engine knobs sized in bytes or tokens live on
`Deployment`: max_num_seqs, max_num_batched_tokens, block_size, gpu_memory_utilization)."""

from __future__ import annotations

from dataclasses import dataclass

from flopwise.errors import WorkloadError
from flopwise.sim.sglang_knobs import SglangKnobs

__all__ = ["SimConfig", "SCHEDULERS"]

SCHEDULERS = ("vllm", "static", "sglang")


@dataclass(frozen=True, slots=True)
class SimConfig:
    """`scheduler`: "vllm" (continuous batching, vLLM v1), "static" (whole batches) or "sglang" (SGLang's
    prefill-first policy; its own knobs in `sglang`). Prefix caching and chunked prefill default on, as in
    vLLM v1 (and SGLang)."""

    scheduler: str = "vllm"
    enable_prefix_caching: bool = True
    enable_chunked_prefill: bool = True
    sglang: SglangKnobs = SglangKnobs()  # read by scheduler="sglang" only
    seed: int = 0  # the run's random draws: with speculative decoding, the tokens each verified decode accepts
    # closed loop: requests sent at one instant reach the engine this far apart (arrivals.ClosedLoop); 0: together
    client_stagger_s: float = 0.0

    def __post_init__(self) -> None:
        if self.scheduler not in SCHEDULERS:
            raise WorkloadError(f"unknown scheduler '{self.scheduler}'; use one of {', '.join(SCHEDULERS)}")
