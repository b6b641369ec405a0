"""Simulator options that are not part of the deployment (engine knobs sized in bytes or tokens live on
`Deployment`: max_num_seqs, max_num_batched_tokens, block_size, gpu_memory_utilization)."""

from __future__ import annotations

from dataclasses import dataclass

from flopwise.errors import WorkloadError

__all__ = ["SimConfig", "SCHEDULERS"]

SCHEDULERS = ("vllm", "static")


@dataclass(frozen=True, slots=True)
class SimConfig:
    """`scheduler`: "vllm" (continuous batching, vLLM v1) or "static" (whole batches). Prefix caching and
    chunked prefill default on, as in vLLM v1."""

    scheduler: str = "vllm"
    enable_prefix_caching: bool = True
    enable_chunked_prefill: bool = True

    def __post_init__(self) -> None:
        if self.scheduler not in SCHEDULERS:
            raise WorkloadError(f"unknown scheduler '{self.scheduler}'; use one of {', '.join(SCHEDULERS)}")
