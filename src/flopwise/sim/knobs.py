"""vLLM's default batch knobs for its OpenAI-compatible server (`EngineArgs.get_batch_defaults`, vLLM >= 0.10):

    GPUs with >= 70 GiB that are not A100 (H100, H200, MI300X, B200):  max_num_seqs 1024, max_num_batched_tokens 8192
    all others (A100, L40S, A10G, ...):                                 max_num_seqs  256, max_num_batched_tokens 2048

(`vllm serve` context; the offline `LLM` class uses 16384 / 8192 tokens.) The simulator CLI uses these when the
flags are not given; `Deployment` itself keeps fixed defaults (256 / 8192).
"""

from __future__ import annotations

from flopwise.specs.hardware import HardwareSpec

__all__ = ["vllm_server_defaults"]


def vllm_server_defaults(hw: HardwareSpec) -> tuple[int, int]:
    """(max_num_seqs, max_num_batched_tokens) vLLM's API server picks on `hw`."""
    big = hw.memory_gib >= 70 and "a100" not in hw.id.lower() and hw.kind == "gpu"
    return (1024, 8192) if big else (256, 2048)
