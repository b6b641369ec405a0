"""SGLang's scheduling knobs, their defaults, and the constants its scheduler hard-codes.

Sources (sgl-project/sglang, `python/sglang/srt/`; names are the server flags):

    --chunked-prefill-size        by total GPU memory (`ServerArgs._handle_gpu_memory_settings`), from the
                                  engine catalog (`catalog/engines/sglang.toml`)
    --max-prefill-tokens          16384 (`ServerArgs`)
    --max-running-requests        min(clamp(kv_tokens / context_len * 512, 2048, 4096), kv_tokens // 2)
                                  (`ModelRunner` sizes the request pool, `TpModelWorker` takes the min)
    --schedule-policy             "fcfs" in current SGLang ("lpm" in older releases)
    --schedule-conservativeness   1.0; scales the initial new-token ratio
    --enable-mixed-chunk          off
    --scheduler-recv-interval     1: the scheduler polls for new requests before every step; N > 1: only once
                                  every N decode steps, and after a prefill step where N <= 1000
                                  (`managers/scheduler_recv_skipper.py` in the v0.5.6 wheel: a counter adds 1 per
                                  decode, verify or idle pass and 1000 per other pass, and receives at >= N)

Constants (`managers/schedule_policy.py`, `global_config.py` / `environ.py`): the new-token ratio starts at
0.7 x conservativeness, decays linearly over 600 decode steps to 0.14 of that, and resets when the server
idles; remaining outputs are clipped at 4096 when reserving; a retraction keeps 20 decode steps of headroom
per remaining request; with ignore_eos and the radix cache off, admission keeps one free token per request to
the end (IGNORE_EOS_RESERVE_TOKENS); LPM falls back to FCFS above 128 waiting requests; the in-batch prefix
check uses 32 tokens for both of its thresholds.
"""

from __future__ import annotations

from dataclasses import dataclass

from flopwise.errors import WorkloadError
from flopwise.specs.engine import get_engine
from flopwise.specs.hardware import HardwareSpec

__all__ = ["SglangKnobs", "SCHEDULE_POLICIES", "sglang_chunked_prefill_size", "sglang_max_running_requests",
           "INIT_NEW_TOKEN_RATIO", "MIN_NEW_TOKEN_RATIO_FACTOR", "NEW_TOKEN_RATIO_DECAY_STEPS",
           "CLIP_MAX_NEW_TOKENS", "RETRACT_DECODE_STEPS", "IGNORE_EOS_RESERVE_TOKENS", "LPM_MAX_QUEUE",
           "IN_BATCH_PREFIX_TOKENS", "RECV_PREFILL_WEIGHT"]

SCHEDULE_POLICIES = ("fcfs", "lpm")

INIT_NEW_TOKEN_RATIO = 0.7
MIN_NEW_TOKEN_RATIO_FACTOR = 0.14
NEW_TOKEN_RATIO_DECAY_STEPS = 600
CLIP_MAX_NEW_TOKENS = 4096
RETRACT_DECODE_STEPS = 20
IGNORE_EOS_RESERVE_TOKENS = 1  # free tokens per request the ignore_eos admission check keeps (`schedule_policy.py`)
LPM_MAX_QUEUE = 128
IN_BATCH_PREFIX_TOKENS = 32
# the read counter's weight of a prefill (extend) pass, against 1 for a decode pass (SGLANG_SCHEDULER_RECV_SKIPPER_
# WEIGHT_DEFAULT in the v0.5.6 wheel's environ.py): with --scheduler-recv-interval above it a prefill forces no read
RECV_PREFILL_WEIGHT = 1000


@dataclass(frozen=True, slots=True, kw_only=True)
class SglangKnobs:
    """SGLang server flags read by `--scheduler sglang` (ignored by the others). None: SGLang's default for
    the deployment (see the module docstring). Chunked prefill and the radix cache are switched by
    `SimConfig.enable_chunked_prefill` / `enable_prefix_caching` (SGLang: `--chunked-prefill-size -1`,
    `--disable-radix-cache`)."""

    chunked_prefill_size: int | None = None
    max_prefill_tokens: int = 16384
    max_running_requests: int | None = None
    schedule_policy: str = "fcfs"
    schedule_conservativeness: float = 1.0
    enable_mixed_chunk: bool = False
    scheduler_recv_interval: int = 1

    def __post_init__(self) -> None:
        for name in ("chunked_prefill_size", "max_running_requests"):
            v = getattr(self, name)
            if v is not None and v < 1:
                hint = " (turn chunked prefill off with --no-enable-chunked-prefill)" \
                    if name == "chunked_prefill_size" else ""
                raise WorkloadError(f"--{name.replace('_', '-')} must be >= 1, got {v}{hint}")
        if self.max_prefill_tokens < 1:
            raise WorkloadError(f"--max-prefill-tokens must be >= 1, got {self.max_prefill_tokens}")
        if self.schedule_policy not in SCHEDULE_POLICIES:
            raise WorkloadError(f"unknown --schedule-policy '{self.schedule_policy}'; use one of "
                                f"{', '.join(SCHEDULE_POLICIES)}")
        if self.scheduler_recv_interval < 1:
            raise WorkloadError(f"--scheduler-recv-interval must be >= 1, got {self.scheduler_recv_interval}")
        if not self.schedule_conservativeness > 0:
            raise WorkloadError(f"--schedule-conservativeness must be > 0, got {self.schedule_conservativeness}")


def sglang_chunked_prefill_size(hw: HardwareSpec) -> int:
    """SGLang's default `--chunked-prefill-size` on `hw`: the current SGLang profile's token budget for the
    device (`catalog/engines/sglang.toml`), used when the deployment's own engine is not SGLang."""
    knobs = get_engine("sglang").default_knobs(hw_id=hw.device_text, memory_gib=hw.memory_gib, kind=hw.kind,
                                               context_len=None)
    return knobs.max_num_batched_tokens


def sglang_max_running_requests(kv_tokens: int, context_len: int | None) -> int:
    """SGLang's default `--max-running-requests` for a KV pool of `kv_tokens` and a model context length."""
    pool = 2048 if not context_len else min(max(int(kv_tokens / context_len * 512), 2048), 4096)
    return max(1, min(pool, kv_tokens // 2))
