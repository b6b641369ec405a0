"""Simulator options that are not part of the deployment (engine knobs sized in bytes or tokens live on
`Deployment`: max_num_seqs, max_num_batched_tokens, block_size, gpu_memory_utilization)."""

from __future__ import annotations

from dataclasses import dataclass, replace

from flopwise.errors import WorkloadError
from flopwise.sim.sglang_knobs import SglangKnobs
from flopwise.specs.deployment import Deployment
from flopwise.specs.engine import SCHEDULERS

__all__ = ["SimConfig", "SCHEDULERS", "SCHEDULING_POLICIES", "SPECULATIVE_SCHEDULERS"]

SCHEDULING_POLICIES = ("fcfs", "priority")
SPECULATIVE_SCHEDULERS = ("vllm", "static")  # the policies that build speculative decodes (sim/scheduler.py)


@dataclass(frozen=True, slots=True, kw_only=True)
class SimConfig:
    """`scheduler`: "vllm" (continuous batching, vLLM v1), "static" (whole batches) or "sglang" (SGLang's
    prefill-first policy; its own knobs in `sglang`). None (scheduler, prefix caching, chunked prefill): the
    deployment decides (its engine's `scheduler` and `enable_prefix_caching`, `Deployment.enable_chunked_prefill`);
    `resolved` fills them in."""

    scheduler: str | None = None
    enable_prefix_caching: bool | None = None
    enable_chunked_prefill: bool | None = None
    sglang: SglangKnobs = SglangKnobs()  # read by scheduler="sglang" only
    seed: int = 0  # the run's random draws: with speculative decoding, the tokens each verified decode accepts
    # closed loop: requests sent at one instant reach the engine this far apart (arrivals.ClosedLoop); 0: together
    client_stagger_s: float = 0.0
    # "fcfs", or "priority": waiting requests by (priority, arrival), the lowest-priority running one preempted
    # first (vLLM's --scheduling-policy; the vllm scheduler only)
    scheduling_policy: str = "fcfs"
    # the clients send ignore_eos (every simulated request runs to its max_tokens either way): SGLang then admits
    # by its no-eviction check while its radix cache is off (sglang_scheduler.py, 6); other engines ignore it
    ignore_eos: bool = False
    # TensorRT-LLM's attention-DP balance (attention_dp_config enable_balance): waiting contexts held back until
    # every attention-DP rank has one (sim/adp_balance.py); needs an engine that has it and dp > 1
    adp_balance: bool = False

    def __post_init__(self) -> None:
        if self.scheduler is not None and self.scheduler not in SCHEDULERS:
            raise WorkloadError(f"unknown scheduler '{self.scheduler}'; use one of {', '.join(SCHEDULERS)}")
        if self.scheduling_policy not in SCHEDULING_POLICIES:
            raise WorkloadError(f"unknown --scheduling-policy '{self.scheduling_policy}'; use "
                                f"{' or '.join(SCHEDULING_POLICIES)}")

    def check(self, dep: Deployment) -> None:
        """Refuse options the deployment's engine or layout cannot run, in one line."""
        if self.adp_balance:
            if not dep.engine.adp_balance_iters:
                raise WorkloadError(f"--adp-balance is TensorRT-LLM's attention_dp_config (1.0+); "
                                    f"{dep.engine.family}@{dep.engine.version} has no such option")
            if dep.dp < 2:
                raise WorkloadError("--adp-balance balances data-parallel attention ranks; it needs --dp 2 or more "
                                    "(TensorRT-LLM's enable_attention_dp)")

    def resolved(self, dep: Deployment) -> SimConfig:
        """This config with every None taken from the deployment's engine (after `check`)."""
        self.check(dep)
        return replace(self, scheduler=self.scheduler or dep.engine.scheduler,
                       enable_prefix_caching=self.prefix_caching(dep), enable_chunked_prefill=self.chunked_prefill(dep))

    def prefix_caching(self, dep: Deployment) -> bool:
        """`enable_prefix_caching`, or the deployment's engine default where None (as `resolved` fills it)."""
        return dep.engine.enable_prefix_caching if self.enable_prefix_caching is None else self.enable_prefix_caching

    def chunked_prefill(self, dep: Deployment) -> bool:
        """`enable_chunked_prefill`, or the deployment's (its engine's default) where None (as `resolved` fills it)."""
        return dep.enable_chunked_prefill if self.enable_chunked_prefill is None else self.enable_chunked_prefill
