"""Request streams for the simulator: who arrives when, with how many prompt and output tokens.

- `spec.py`: `RequestSpec` (one request) and `Workload` (a stream, open or closed loop).
- `lengths.py`: token-length distributions (fixed, uniform, normal, lognormal, sampled from a file).
- `arrivals.py`: arrival processes (poisson, gamma, constant, inf) and closed-loop concurrency.
- `named.py`: built-in workloads (chat, rag, code, summarize, batch, sharegpt) with documented distributions.
- `traces.py`: JSONL traces, the Azure LLM inference trace CSV, ShareGPT conversations.
- `build.py`: `build_workload`, which puts the pieces together, deterministically under a seed.
"""

from flopwise.workload.arrivals import ArrivalProcess, arrival_times
from flopwise.workload.build import build_workload
from flopwise.workload.lengths import LengthDist, parse_length
from flopwise.workload.named import NAMED_WORKLOADS, NamedWorkload
from flopwise.workload.spec import RequestSpec, Workload
from flopwise.workload.traces import load_trace

__all__ = ["ArrivalProcess", "arrival_times", "build_workload", "LengthDist", "parse_length",
           "NAMED_WORKLOADS", "NamedWorkload", "RequestSpec", "Workload", "load_trace"]
