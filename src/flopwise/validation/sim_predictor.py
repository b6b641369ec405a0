"""Predictions for the `simulate` validation cases (online serving and max-load rows).

Each case runs the simulator with the engine, version, frontend and knobs its source states
(`validation/engines.py`; the engine's defaults for the rest), its input and output lengths (fixed at
`input_len` / `output_len`, or drawn from `input_dist` / `output_dist` where the case states how the source's
client sampled them, in flopwise's length syntax, e.g. "uniform:1:1025" for SGLang's `bench_serving --dataset-name
random` at its default `--random-range-ratio 0`: uniform in [1, L]; or, where the case names a built-in `workload`
such as "sharegpt" (or, for a serving run, whose `engine_knobs.dataset` is plainly "sharegpt": the client's
default ShareGPT sampling), that workload's lengths, scaled so their means are the case's `input_len` /
`output_len` (the source's tokenizer counts the same texts denser or sparser) within its client's filter (longest
prompt and request), a side with a `*_dist` taking that instead), Poisson arrivals
at `request_rate` ("inf": all at once; rescaled as the source's client did it, `CaseEngine.rescale_arrivals`) or a
closed loop at `concurrency` (a client that sent at a finite rate behind a cap, `vllm bench serve --request-rate R
--max-concurrency C`, as that: the case's stated `engine_knobs` `max_concurrency` / `max_concurrency_cap` with a
rate row, or `engine_knobs.request_rate` with a concurrency row), seed 0, with the number of requests the
source ran (`num_requests`, 400 where it is not stated), up to `MAX_REQUESTS`: a run of fewer requests than
the engine can hold at once never reaches its largest batch (a 400-request run of a pool that fits 2,000
sequences measures a smaller batch than the source's 3,000 requests did), and the published figure includes its
own ramp and drain. Latency keys read the case's `stat` (mean when absent).
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

import numpy as np

from flopwise.errors import WorkloadError
from flopwise.sim import SimConfig, simulate
from flopwise.sim.sglang_knobs import SglangKnobs
from flopwise.validation.engines import CaseEngine, case_deployment
from flopwise.workload import NAMED_WORKLOADS, Workload, build_workload

__all__ = ["predict_simulate", "MAX_REQUESTS"]

MAX_REQUESTS = 10_000  # the most requests one case simulates (30,000-request sources reach steady state well before)
DEFAULT_REQUESTS = 400  # where the source does not say how many it sent


def _rate(v: Any) -> float | None:
    if v is None:
        return None
    return math.inf if str(v).lower() == "inf" else float(v)


def predict_simulate(case: Any) -> float:
    a = case.args
    if not a.get("input_len") or not a.get("output_len"):
        raise WorkloadError("the case gives no input/output length")
    dep, ce = case_deployment(case.raw or {}, "simulate", a)
    conc = a.get("concurrency")
    n = min(int(a.get("num_requests") or DEFAULT_REQUESTS), MAX_REQUESTS)
    if conc:
        n = min(int(a.get("num_requests") or n), max(n, 4 * int(conc)))
    rate = None if conc else _rate(a.get("request_rate")) or math.inf
    stated, cap = _client_cap(a, ce), None
    if stated is not None:  # the client sent at a finite rate behind a cap on requests in flight
        cap, rate, conc = stated[0], stated[1], None
    named = a.get("workload") or _dataset_workload(case)
    wl = build_workload(num_requests=n, workload=named,
                        input_len=a.get("input_dist") or (None if named else int(round(float(a["input_len"])))),
                        output_len=a.get("output_dist") or (None if named else int(round(float(a["output_len"])))),
                        request_rate=rate, concurrency=int(conc) if conc else None,
                        max_concurrency=cap, seed=0,
                        rescale_arrivals=ce.rescale_arrivals and not conc and rate != math.inf)
    if named:
        wl = _at_means(wl, named, None if a.get("input_dist") else float(a["input_len"]),
                       None if a.get("output_dist") else float(a["output_len"]))
    config = SimConfig(enable_prefix_caching=ce.enable_prefix_caching, enable_chunked_prefill=ce.enable_chunked_prefill,
                       ignore_eos=ce.ignore_eos, sglang=SglangKnobs(**ce.sglang), adp_balance=ce.adp_balance)
    summary = simulate(dep, wl, config).summary()
    v = summary[case.metric_key]
    return float(v[case.stat or "mean"] if isinstance(v, dict) else v)


def _client_cap(args: dict[str, Any], ce: CaseEngine) -> tuple[int, float] | None:
    """(cap, rate) of a client that sent at a finite rate behind a cap on requests in flight: a rate row's stated
    client cap (`CaseEngine.client_cap`, from `engine_knobs.max_concurrency` / `max_concurrency_cap`) with the row's
    own rate, or a concurrency row with its client's stated rate (`CaseEngine.client_rate`); None where the source
    sent otherwise or does not say."""
    if args.get("concurrency"):
        return (int(args["concurrency"]), ce.client_rate) if ce.client_rate else None
    rate = _rate(args.get("request_rate"))
    if rate is None or math.isinf(rate) or ce.client_cap is None:
        return None
    return ce.client_cap, rate


def _dataset_workload(case: Any) -> str | None:
    """"sharegpt" for a serving run (not a single request) whose client drew the ShareGPT dataset as vLLM's and
    SGLang's benchmark clients do (`engine_knobs.dataset` "sharegpt" or "sharegpt (default)") and whose case gives
    no length law of its own; else None."""
    knobs = (case.raw or {}).get("engine_knobs") or {}
    a = case.args
    if (str(knobs.get("dataset", "")).strip().lower() in ("sharegpt", "sharegpt (default)")
            and case.regime != "single_request" and not a.get("input_dist") and not a.get("output_dist")):
        return "sharegpt"
    return None


def _at_means(wl: Workload, named: str, input_mean: float | None, output_mean: float | None) -> Workload:
    """`wl`'s prompt and output lengths each scaled to the given mean (None: kept), rounded, then kept within the
    named workload's pairs' filter (longest prompt and request; its client applies it in the source's tokenizer)."""
    ins = np.array([r.input_tokens for r in wl.requests], dtype=float)
    outs = np.array([r.output_tokens for r in wl.requests], dtype=float)
    if input_mean is not None:
        ins *= input_mean / ins.mean()
    if output_mean is not None:
        outs *= output_mean / outs.mean()
    pairs = NAMED_WORKLOADS[named].pairs
    i = np.maximum(np.rint(ins), 1).astype(np.int64)
    if pairs is not None:
        i = np.minimum(i, pairs.max_input)
        o = np.clip(np.rint(outs), 1, np.maximum(pairs.max_total - i, 1)).astype(np.int64)
    else:
        o = np.maximum(np.rint(outs), 1).astype(np.int64)
    reqs = tuple(replace(r, input_tokens=int(x), output_tokens=int(y))
                 for r, x, y in zip(wl.requests, i.tolist(), o.tolist(), strict=True))
    return replace(wl, requests=reqs)
