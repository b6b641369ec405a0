"""Measure real servers: a load generator for OpenAI-compatible streaming endpoints.

Modules, one role each (GuideLLM's seams):
- `transport`: one request, timed (one httpx.AsyncClient per run over `http11`'s O(1) keep-alive pool;
  SSE parsing; what is timed; usage checks; error kinds). `http11`: the HTTP/1.1 framing, byte-level tested.
- `redact`: credentials out of everything saved or printed.
- `arrivals`, `scheduler`: when to send (Poisson, gamma, constant, closed loop; warm-up; count/duration limits).
- `prompts`, `tokenize`: what to send (random text of a token length, ShareGPT, JSONL, shared prefixes).
- `store`: append-only per-request JSONL; `runner`: one run (signals, client self-monitoring), summarised from
  its saved files; `sweep`: levels; `export`: per-request CSV / Parquet and `vllm bench serve` result JSON.
- `prometheus`, `diagnosis`: the server's /metrics and where the time went.
- `predict`: the measured run replayed through `flopwise.sim`.
- `mock_server`, `selftest`: a mock OpenAI server (with every fault mode the tests inject) and the client's own
  overhead.
- `render`: console tables and the sweep chart.
Metric definitions live in `flopwise.metrics.summary` (shared with `flopwise simulate`).
"""

from flopwise.bench.arrivals import Load
from flopwise.bench.diagnosis import Diagnosis, Finding, diagnose
from flopwise.bench.runner import (
                                   BenchConfig,
                                   BenchInterrupted,
                                   PromptConfig,
                                   RunReport,
                                   report_run,
                                   resume_bench,
                                   run_bench,
)
from flopwise.bench.sweep import SweepResult, find_max_rate, run_levels

__all__ = ["Load", "Diagnosis", "Finding", "diagnose", "BenchConfig", "BenchInterrupted", "PromptConfig", "RunReport",
           "report_run",
           "resume_bench", "run_bench", "SweepResult", "find_max_rate", "run_levels"]
