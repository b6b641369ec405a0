"""Predictions for the `simulate` validation cases (online serving and max-load rows).

Each case runs the simulator with vLLM's server defaults for the GPU (`sim.knobs`), fixed input and output
lengths, Poisson arrivals at `request_rate` ("inf": all at once) or a closed loop at `concurrency`, seed 0.
TensorRT-LLM's `kv_cache_free_gpu_mem_fraction` f (a share of the memory left after weights and
activations) maps to the vLLM-style share of the whole device that leaves the same KV pool:
util = 1 - (1 - f) * free(util = 1) / device. `num_requests` is capped (`MAX_REQUESTS`) so a case takes about a second: the steady state of these
fixed-length streams is reached within a few hundred requests, and the published runs' own start-up and drain
are a small part of theirs. Latency keys read the case's `stat` (mean when absent).
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

from flopwise.api import deployment
from flopwise.cost.memory import memory_plan
from flopwise.errors import WorkloadError
from flopwise.sim import SimConfig, simulate, vllm_server_defaults
from flopwise.specs.hardware import get_hardware
from flopwise.workload import build_workload

__all__ = ["predict_simulate", "MAX_REQUESTS"]

MAX_REQUESTS = 400


def _rate(v: Any) -> float | None:
    if v is None:
        return None
    return math.inf if str(v).lower() == "inf" else float(v)


def predict_simulate(case: Any) -> float:
    a = case.args
    if not a.get("input_len") or not a.get("output_len"):
        raise WorkloadError("the case gives no input/output length")
    hw = get_hardware(a["gpu"])
    seqs, tokens = vllm_server_defaults(hw)
    dep = deployment(a["model"], hw, tp=int(a.get("tp") or 1), num_gpus=a.get("num_gpus"),
                     weights=a.get("weights"), kv=a.get("kv"), max_num_seqs=seqs, max_num_batched_tokens=tokens)
    frac = ((case.raw or {}).get("engine_knobs") or {}).get("kv_cache_free_gpu_mem_fraction")
    if frac:
        plan = memory_plan(replace(dep, gpu_memory_utilization=1.0))
        free = plan.device_bytes - plan.weight_bytes - plan.activation_bytes - plan.runtime_bytes
        if free > 0:
            dep = replace(dep, gpu_memory_utilization=1.0 - (1.0 - float(frac)) * free / plan.device_bytes)
    conc = a.get("concurrency")
    n = min(int(a.get("num_requests") or MAX_REQUESTS), MAX_REQUESTS)
    if conc:
        n = min(int(a.get("num_requests") or n), max(n, 4 * int(conc)))
    wl = build_workload(num_requests=n, input_len=int(a["input_len"]), output_len=int(a["output_len"]),
                        request_rate=None if conc else _rate(a.get("request_rate")) or math.inf,
                        concurrency=int(conc) if conc else None, seed=0)
    summary = simulate(dep, wl, SimConfig()).summary()
    v = summary[case.metric_key]
    return float(v[case.stat or "mean"] if isinstance(v, dict) else v)
