"""The single home of flopwise's own defaults (what a command uses when the user gives nothing).

Engine knobs (max_num_seqs, token budget, memory fraction, block size, chunked prefill, prefix caching) are not
here: they are the engine's, in `catalog/engines/*.toml`, resolved by `EngineProfile.default_knobs`.
"""

from __future__ import annotations

__all__ = ["DEFAULT_MODEL", "DEFAULT_GPU", "DEFAULT_ENGINE", "FRONTEND_ESTIMATE", "FRONTEND_SERVING",
           "DEFAULT_ENDPOINT", "DEFAULT_INPUT_LEN", "DEFAULT_OUTPUT_LEN", "DEFAULT_NUM_REQUESTS",
           "MAX_NUM_REQUESTS", "MAX_TOKENS_PER_REQUEST"]

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

# Limits on what a user may ask for, so that a typo fails at once instead of allocating gigabytes or running for
# hours: requests in one simulated (or benchmarked) run, and tokens in one request (longer than any model's context).
MAX_NUM_REQUESTS = 1_000_000
MAX_TOKENS_PER_REQUEST = 10_000_000
