"""The single home of flopwise's own defaults (what a command uses when the user gives nothing).

Engine knobs (max_num_seqs, token budget, memory fraction, block size, chunked prefill, prefix caching) are not
here: they are the engine's, in `catalog/engines/*.toml`, resolved by `EngineProfile.default_knobs`.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["DEFAULT_MODEL", "DEFAULT_GPU", "DEFAULT_ENGINE", "FRONTEND_ESTIMATE", "FRONTEND_SERVING",
           "DEFAULT_ENDPOINT", "DEFAULT_INPUT_LEN", "DEFAULT_OUTPUT_LEN", "DEFAULT_NUM_REQUESTS",
           "COMPARE_SLA", "COMPARE_NUM_REQUESTS", "SPEC_K", "SPEC_ALPHA", "PLAN_GPUS", "PLAN_MAX_GPUS",
           "PLAN_WORKLOAD", "PLAN_WEIGHTS",
           "PLAN_KV", "BENCH_INPUT_LEN", "BENCH_OUTPUT_LEN",
           "BENCH_NUM_REQUESTS", "BENCH_TIMEOUT_S", "MAX_NUM_REQUESTS", "MAX_TOKENS_PER_REQUEST",
           "DEFAULT_WORKLOAD", "DEFAULT_OBJECTIVE", "KV_FULL", "WorkloadDefaults", "WORKLOAD_DEFAULTS",
           "workload_defaults"]

DEFAULT_MODEL = "meta-llama/Llama-3.1-8B"
DEFAULT_GPU = "h100-sxm"
DEFAULT_ENGINE = "vllm"  # the family's default_version in the engine catalog: a current vLLM
# `estimate` prices a static batch as the engine's offline benchmark sees it; serving commands (simulate, plan,
# compare, bench --predict) put the engine's OpenAI HTTP server in front.
FRONTEND_ESTIMATE = "none"
FRONTEND_SERVING = "http"
DEFAULT_ENDPOINT = "completions"
DEFAULT_INPUT_LEN = 1024
DEFAULT_OUTPUT_LEN = 256
# KV usage at or above this share of the pool counts as full (a bench diagnosis; a plan's "KV capacity" binding)
KV_FULL = 0.95

# ---- per-workload SLA and objective (what `plan` uses when --sla / --objective are not given) -------------
# Interactive workloads get a latency SLA sized to what a user of that kind of app feels, and are ranked by
# goodput per GPU; an offline batch job has no latency bound (its requests wait in a queue by design) and is
# ranked by output tokens/s per GPU. Sources: MLPerf Inference v5.0 server scenario (Llama-2-70B interactive:
# p99 TTFT <= 450 ms, p99 TPOT <= 40 ms; Llama-3.1-405B: 6 s / 175 ms); DistServe (Zhong et al., OSDI 2024,
# Table 1: chatbot, code completion with a tight TTFT, summarization with a loose TTFT). The chat values are
# flopwise's long-standing default; the others scale its TTFT with the prompt a workload sends.
DEFAULT_WORKLOAD = "chat"
DEFAULT_OBJECTIVE = "goodput"


@dataclass(frozen=True, slots=True)
class WorkloadDefaults:
    sla: str  # `specs/sla.py` text; "none": no latency bound
    objective: str  # a planner objective: goodput, throughput, cost, latency
    why: str


WORKLOAD_DEFAULTS: dict[str, WorkloadDefaults] = {
    "chat": WorkloadDefaults("p95_ttft<=300ms,p95_tpot<=50ms", "goodput",
                             "interactive chat: first token within a blink, streaming faster than reading"),
    "code": WorkloadDefaults("p95_ttft<=250ms,p95_tpot<=50ms", "goodput",
                             "code completion: the suggestion must appear while the user types"),
    "rag": WorkloadDefaults("p95_ttft<=1000ms,p95_tpot<=50ms", "goodput",
                            "retrieval QA: ~3.5k-token prompts, an answer streamed at reading speed"),
    "summarize": WorkloadDefaults("p95_ttft<=5000ms,p95_tpot<=100ms", "goodput",
                                  "document summaries: a long prompt, a user who waits a few seconds"),
    "batch": WorkloadDefaults("none", "throughput",
                              "offline batch job: no latency bound, output tokens/s per GPU"),
    "sharegpt": WorkloadDefaults("p95_ttft<=300ms,p95_tpot<=50ms", "goodput",
                                 "ShareGPT conversations (vllm bench serve's dataset): chat's SLA"),
}


def workload_defaults(workload: str | None) -> WorkloadDefaults:
    """The SLA and objective of a named workload (chat's for a trace or explicit lengths)."""
    return WORKLOAD_DEFAULTS.get(workload or DEFAULT_WORKLOAD, WORKLOAD_DEFAULTS[DEFAULT_WORKLOAD])

DEFAULT_NUM_REQUESTS = 1000  # `simulate` without a trace

# `compare`: its throughput column is the rate at this SLA, over runs of this many requests
COMPARE_SLA = "p95_ttft<=2s,p95_tpot<=50ms"
COMPARE_NUM_REQUESTS = 300
# the speculative decoding `explain` shows and `compare` weighs when not told: 4 guesses per step, each accepted
# with probability 0.7 (EAGLE-2-class heads on chat prompts: 2.77 expected tokens per step)
SPEC_K = 4
SPEC_ALPHA = 0.7

# `plan`: the search space and the stream each candidate is simulated on
PLAN_GPUS = ("h100-sxm", "h200", "a100-sxm-80gb", "l40s")
PLAN_MAX_GPUS = 8
PLAN_WORKLOAD = DEFAULT_WORKLOAD
PLAN_KV = "bf16,fp8"
# the weight formats `plan` tries (each where the GPU runs it natively: fp8 from Ada / Hopper on, nvfp4 on Blackwell;
# a pre-quantized checkpoint: its own format and the narrower of these)
PLAN_WEIGHTS = ("bf16", "fp8", "nvfp4", "int4-awq")

# `bench`: random prompts of these lengths, this many measured requests per level, each at most this long (s)
BENCH_INPUT_LEN = 512
BENCH_OUTPUT_LEN = 128
BENCH_NUM_REQUESTS = 200
BENCH_TIMEOUT_S = 600.0

# Limits on what a user may ask for, so that a typo fails at once instead of allocating gigabytes or running for
# hours: requests in one simulated (or benchmarked) run, and tokens in one request (longer than any model's context).
MAX_NUM_REQUESTS = 1_000_000
MAX_TOKENS_PER_REQUEST = 10_000_000
