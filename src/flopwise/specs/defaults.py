"""The single home of flopwise's own defaults (what a command uses when the user gives nothing).

Engine knobs (max_num_seqs, token budget, memory fraction, block size, chunked prefill, prefix caching) are not
here: they are the engine's, in `catalog/engines/*.toml`, resolved by `EngineProfile.default_knobs`.
"""

from __future__ import annotations

__all__ = ["DEFAULT_MODEL", "DEFAULT_GPU", "DEFAULT_ENGINE", "FRONTEND_ESTIMATE", "FRONTEND_SERVING",
           "DEFAULT_ENDPOINT", "DEFAULT_INPUT_LEN", "DEFAULT_OUTPUT_LEN", "DEFAULT_NUM_REQUESTS",
           "DEFAULT_SLA", "COMPARE_SLA", "COMPARE_NUM_REQUESTS", "PLAN_GPUS", "PLAN_MAX_GPUS", "PLAN_WORKLOAD",
           "PLAN_WEIGHTS", "PLAN_KV", "PLAN_NUM_REQUESTS", "BENCH_INPUT_LEN", "BENCH_OUTPUT_LEN",
           "BENCH_NUM_REQUESTS", "BENCH_TIMEOUT_S", "MAX_NUM_REQUESTS", "MAX_TOKENS_PER_REQUEST"]

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
DEFAULT_NUM_REQUESTS = 1000  # `simulate` without a trace
DEFAULT_SLA = "p95_ttft<=300ms,p95_tpot<=50ms"  # `plan`'s target (an interactive chat service)

# `compare`: its throughput column is the rate at this SLA, over runs of this many requests
COMPARE_SLA = "p95_ttft<=2s,p95_tpot<=50ms"
COMPARE_NUM_REQUESTS = 300

# `plan`: the search space and the stream each candidate is simulated on
PLAN_GPUS = ("h100-sxm", "h200", "a100-sxm-80gb", "l40s")
PLAN_MAX_GPUS = 8
PLAN_WORKLOAD = "chat"
PLAN_WEIGHTS = "bf16,fp8,int4-awq"
PLAN_KV = "bf16,fp8"
PLAN_NUM_REQUESTS = 200

# `bench`: random prompts of these lengths, this many measured requests per level, each at most this long (s)
BENCH_INPUT_LEN = 512
BENCH_OUTPUT_LEN = 128
BENCH_NUM_REQUESTS = 200
BENCH_TIMEOUT_S = 600.0

# Limits on what a user may ask for, so that a typo fails at once instead of allocating gigabytes or running for
# hours: requests in one simulated (or benchmarked) run, and tokens in one request (longer than any model's context).
MAX_NUM_REQUESTS = 1_000_000
MAX_TOKENS_PER_REQUEST = 10_000_000
