"""Put a workload together from a named workload, explicit lengths, a trace and an arrival process.

Precedence: a trace gives lengths (and arrival times, unless a rate or a concurrency is given); otherwise a
named workload gives lengths and shared prefixes, overridden by explicit --input-len / --output-len; with
neither, lengths default to 1024 in / 256 out. Arrivals: --concurrency (closed loop) > --request-rate >
the trace's timestamps > the named workload's default rate > inf.

Each random choice (input lengths, output lengths, prefix groups, arrival gaps) draws from its own child of
`numpy.random.SeedSequence(seed)`, so a run is reproducible, and changing the rate keeps the same lengths
(common random numbers: a rate sweep compares like with like).
"""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import numpy as np

from flopwise.errors import WorkloadError
from flopwise.workload.arrivals import ArrivalProcess, arrival_times
from flopwise.workload.lengths import LengthDist, parse_length
from flopwise.workload.named import NAMED_WORKLOADS, NamedWorkload
from flopwise.workload.spec import RequestSpec, Workload
from flopwise.workload.traces import load_trace

__all__ = ["build_workload", "DEFAULT_INPUT_LEN", "DEFAULT_OUTPUT_LEN"]

DEFAULT_INPUT_LEN = 1024
DEFAULT_OUTPUT_LEN = 256


def _named(name: str) -> NamedWorkload:
    try:
        return NAMED_WORKLOADS[name]
    except KeyError:
        raise WorkloadError(f"unknown workload '{name}'; choose one of {', '.join(NAMED_WORKLOADS)}") from None


def build_workload(*, num_requests: int | None = None, workload: str | None = None,
                   input_len: str | int | LengthDist | None = None, output_len: str | int | LengthDist | None = None,
                   request_rate: float | None = None, arrival: str = "poisson", burstiness: float = 1.0,
                   concurrency: int | None = None, trace: str | Path | None = None,
                   tokenizer: str | Path | None = None, seed: int = 0, rescale_arrivals: bool = False) -> Workload:
    """A deterministic request stream (see the module docstring for precedence). `rescale_arrivals`: the
    schedule of `vllm bench serve` (request N of N at exactly N / rate; `workload.arrivals`)."""
    if num_requests is not None and num_requests < 1:
        raise WorkloadError(f"--num-requests must be >= 1, got {num_requests}")
    if concurrency is not None and request_rate is not None and not math.isinf(request_rate):
        raise WorkloadError("give either --request-rate (open loop) or --concurrency (closed loop), not both")
    rng_in, rng_out, rng_prefix, rng_arrival = (np.random.default_rng(s) for s in np.random.SeedSequence(seed).spawn(4))
    named = _named(workload) if workload else None
    if trace is not None:
        tr = load_trace(trace, tokenizer)
        specs = list(tr.requests[:num_requests] if num_requests else tr.requests)
        name = Path(trace).name
        timed = tr.timed
    else:
        n = num_requests or 1000
        if named is None and input_len is None and output_len is None:
            named = _named("chat")
        in_d = _dist(input_len, named.input_len if named else None, DEFAULT_INPUT_LEN)
        out_d = _dist(output_len, named.output_len if named else None, DEFAULT_OUTPUT_LEN)
        ins, outs = in_d.sample(rng_in, n), out_d.sample(rng_out, n)
        if named and named.prefix_tokens > 0:
            groups = rng_prefix.integers(named.num_prefixes, size=n)
            specs = [RequestSpec(0.0, int(i), int(o), int(g), min(named.prefix_tokens, int(i)))
                     for i, o, g in zip(ins, outs, groups, strict=True)]
        else:
            specs = [RequestSpec(0.0, int(i), int(o)) for i, o in zip(ins, outs, strict=True)]
        name = named.name if named else f"in={in_d},out={out_d}"
        timed = False
    if concurrency is not None:
        return Workload(tuple(specs), concurrency=concurrency, name=name)
    if request_rate is None and timed:
        return Workload(tuple(specs), name=name)
    if request_rate is None:
        proc = named.arrivals if named else ArrivalProcess("poisson", math.inf)
        proc = replace(proc, rescale=rescale_arrivals)
    else:
        proc = ArrivalProcess(arrival, request_rate, burstiness, rescale_arrivals)
    times = arrival_times(proc, len(specs), rng_arrival)
    specs = [RequestSpec(float(t), s.input_tokens, s.output_tokens, s.prefix_id, s.prefix_tokens)
             for t, s in zip(times, specs, strict=True)]
    return Workload(tuple(specs), name=name)


def _dist(given: str | int | LengthDist | None, named: LengthDist | None, default: int) -> LengthDist:
    if isinstance(given, LengthDist):
        return given
    if given is not None:
        return parse_length(given)
    return named if named is not None else LengthDist("fixed", default)
