"""Put a workload together from a named workload, explicit lengths, a trace and an arrival process.

Precedence: a trace gives lengths (and arrival times, unless a rate or a concurrency is given); otherwise a
named workload gives lengths and shared prefixes, overridden by explicit --input-len / --output-len; with
neither, lengths default to 1024 in / 256 out. Arrivals: --concurrency (closed loop) > --request-rate >
the trace's timestamps > the named workload's default rate > inf; --max-concurrency caps an open loop's requests in
flight (`vllm bench serve --request-rate R --max-concurrency C`: `Workload.max_concurrency`).

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
from flopwise.specs.defaults import DEFAULT_INPUT_LEN, DEFAULT_NUM_REQUESTS, DEFAULT_OUTPUT_LEN, MAX_NUM_REQUESTS
from flopwise.validate import integer, number, text
from flopwise.workload.arrivals import ArrivalProcess, RateProfile, arrival_times, parse_rate_profile, profile_times
from flopwise.workload.classes import RequestClass, assign_classes, parse_classes, parse_timeout
from flopwise.workload.lengths import LengthDist, parse_length
from flopwise.workload.named import NAMED_WORKLOADS, NamedWorkload
from flopwise.workload.spec import RequestSpec, Workload
from flopwise.workload.traces import check_span, load_trace

__all__ = ["build_workload", "workload_max_len", "fit_context",
           "DEFAULT_INPUT_LEN", "DEFAULT_OUTPUT_LEN", "DEFAULT_NUM_REQUESTS"]


def _named(name: str) -> NamedWorkload:
    text(name, "--workload")
    try:
        return NAMED_WORKLOADS[name]
    except KeyError:
        raise WorkloadError(f"unknown workload '{name}'; choose one of {', '.join(NAMED_WORKLOADS)}") from None


def build_workload(*, num_requests: int | None = None, workload: str | None = None,
                   input_len: str | int | LengthDist | None = None, output_len: str | int | LengthDist | None = None,
                   request_rate: float | None = None, arrival: str = "poisson", burstiness: float = 1.0,
                   concurrency: int | None = None, max_concurrency: int | None = None,
                   trace: str | Path | None = None,
                   tokenizer: str | Path | None = None, seed: int = 0, cycle_trace: bool = False,
                   rescale_arrivals: bool = False, timeout_s: float | str | None = None,
                   classes: str | tuple[RequestClass, ...] | None = None,
                   rate_profile: str | RateProfile | None = None, context_len: int | None = None) -> Workload:
    """A deterministic request stream (see the module docstring for precedence). `cycle_trace`: a trace shorter
    than `num_requests` is repeated in order (its lengths and prefixes; arrivals then come from the rate).
    `rescale_arrivals`: the schedule of `vllm bench serve` (request N of N at exactly N / rate;
    `workload.arrivals`). `timeout_s`: every request's client timeout; `classes`: request classes
    (`workload/classes.py`), drawn under the seed; `rate_profile`: a rate that changes over time
    (`arrivals.RateProfile`) instead of `request_rate`. `context_len`: the model's context; a request a named
    workload (or the default chat one) draws longer than it is shortened to fit, its prompt first (as a chat client
    keeps the latest turns), then its output, and the workload's name says how many were (`fit_context`);
    lengths given explicitly and traces are left as they are (the engine refuses what does not fit)."""
    if num_requests is not None:
        integer(num_requests, "--num-requests", lo=1, hi=MAX_NUM_REQUESTS)
    if concurrency is not None:
        integer(concurrency, "--concurrency", lo=1, hi=MAX_NUM_REQUESTS)
    if request_rate is not None:
        number(request_rate, "--request-rate (requests/s; inf sends all at once)", lo=0, lo_open=True, allow_inf=True)
    integer(seed, "--seed", lo=0, hi=2**63 - 1)
    if concurrency is not None and request_rate is not None and not math.isinf(request_rate):
        raise WorkloadError("give either --request-rate (open loop) or --concurrency (closed loop), not both; "
                            "use --max-concurrency to cap an open loop's requests in flight")
    if max_concurrency is not None:
        integer(max_concurrency, "--max-concurrency", lo=1, hi=MAX_NUM_REQUESTS)
        if concurrency is not None:
            raise WorkloadError("--max-concurrency caps an open loop (--request-rate); a closed loop's --concurrency "
                                "is already its cap: give one of them")
    profile = parse_rate_profile(rate_profile) if isinstance(rate_profile, str) else rate_profile
    if profile is not None and (request_rate is not None or concurrency is not None or rescale_arrivals):
        raise WorkloadError("--rate-profile sets the rate over time: drop --request-rate, --concurrency and "
                            "--rescale-arrivals")
    rng_in, rng_out, rng_prefix, rng_arrival = (np.random.default_rng(s) for s in np.random.SeedSequence(seed).spawn(4))
    named = _named(workload) if workload else None
    if trace is not None:
        tr = load_trace(trace, tokenizer)
        specs = list(tr.requests[:num_requests] if num_requests else tr.requests)
        if cycle_trace and num_requests and len(specs) < num_requests:
            specs = [tr.requests[i % len(tr.requests)] for i in range(num_requests)]
        name = Path(trace).name
        timed = tr.timed
    else:
        n = num_requests or DEFAULT_NUM_REQUESTS
        if named is None and input_len is None and output_len is None:
            named = _named("chat")
        in_d = _dist(input_len, named.input_len if named else None, DEFAULT_INPUT_LEN)
        out_d = _dist(output_len, named.output_len if named else None, DEFAULT_OUTPUT_LEN)
        if named is not None and named.pairs is not None:  # drawn together; a given side replaces its column
            ins, outs = named.pairs.sample(rng_in, n, seed)
            if input_len is not None:
                ins = in_d.sample(rng_in, n)
            if output_len is not None:
                outs = out_d.sample(rng_out, n)
        else:
            ins, outs = in_d.sample(rng_in, n), out_d.sample(rng_out, n)
        shortened = 0
        if named is not None and context_len is not None:
            ins, outs, shortened = fit_context(ins, outs, context_len, prompts=input_len is None,
                                               outputs=output_len is None)
        if named and named.prefix_tokens > 0:
            groups = rng_prefix.integers(named.num_prefixes, size=n)
            specs = [RequestSpec(arrival_at=0.0, input_tokens=int(i), output_tokens=int(o), prefix_id=int(g),
                                 prefix_tokens=min(named.prefix_tokens, int(i)))
                     for i, o, g in zip(ins, outs, groups, strict=True)]
        else:
            specs = [RequestSpec(arrival_at=0.0, input_tokens=int(i), output_tokens=int(o))
                     for i, o in zip(ins, outs, strict=True)]
        name = named.name if named else f"in={in_d},out={out_d}"
        if shortened:
            name += f" ({shortened:,} of {n:,} requests shortened to the {context_len:,}-token context)"
        timed = False
    timeout = parse_timeout(timeout_s) if isinstance(timeout_s, str) else timeout_s
    if timeout is not None:
        number(timeout, "--timeout-s (s)", lo=0, lo_open=True)
    kinds = parse_classes(classes) if isinstance(classes, str) else (classes or ())
    if kinds or timeout is not None:
        rng_class = np.random.default_rng(np.random.SeedSequence(seed).spawn(5)[4])
        specs = assign_classes(specs, kinds, timeout, rng_class)
    if concurrency is not None:
        return Workload(tuple(specs), concurrency=concurrency, name=name, classes=kinds)
    if profile is not None:
        number(burstiness, "--burstiness (gamma shape)", lo=0, lo_open=True)
        times = profile_times(profile, len(specs), burstiness, rng_arrival)
        specs = [s.sent_at(float(t)) for t, s in zip(times, specs, strict=True)]
        return Workload(tuple(specs), name=name, classes=kinds, max_concurrency=max_concurrency)
    if request_rate is None and timed:  # the trace's own timestamps set the arrivals
        check_span(name, specs)
        return Workload(tuple(specs), name=name, classes=kinds, max_concurrency=max_concurrency)
    if request_rate is None:
        proc = named.arrivals if named else ArrivalProcess(kind="poisson", rate=math.inf)
        proc = replace(proc, rescale=rescale_arrivals)
    else:
        proc = ArrivalProcess(kind=arrival, rate=request_rate, burstiness=burstiness, rescale=rescale_arrivals)
    times = arrival_times(proc, len(specs), rng_arrival)
    specs = [s.sent_at(float(t)) for t, s in zip(times, specs, strict=True)]
    return Workload(tuple(specs), name=name, classes=kinds, max_concurrency=max_concurrency)


def fit_context(ins: np.ndarray, outs: np.ndarray, context_len: int, *, prompts: bool = True,
                outputs: bool = True) -> tuple[np.ndarray, np.ndarray, int]:
    """(prompt lengths, output lengths, how many requests changed): each request longer than `context_len` keeps
    its output and loses the start of its prompt (at least 1 token stays), then, if still too long, loses the end
    of its output; `prompts` / `outputs`: which side may change (the other was given by the user)."""
    integer(context_len, "the context length", lo=2)
    over = ins + outs > context_len
    if not over.any():
        return ins, outs, 0
    if prompts:
        ins = np.where(over, np.maximum(context_len - outs, 1), ins)
    if outputs:
        outs = np.where(ins + outs > context_len, np.maximum(context_len - ins, 1), outs)
    return ins, outs, int(over.sum())


def _dist(given: str | int | LengthDist | None, named: LengthDist | None, default: int) -> LengthDist:
    if isinstance(given, LengthDist):
        return given
    if given is not None:
        return parse_length(given)
    return named if named is not None else LengthDist(kind="fixed", a=default)


def _cap(d: LengthDist) -> int | None:
    if d.kind == "fixed":
        return int(d.a)
    if d.kind == "uniform":
        return int(d.b)
    if d.kind == "file":
        return max(d.values)
    return d.max_len


def workload_max_len(*, workload: str | None = None, input_len: str | int | LengthDist | None = None,
                     output_len: str | int | LengthDist | None = None, trace: str | Path | None = None,
                     tokenizer: str | Path | None = None) -> int | None:
    """The longest request (prompt + output tokens) the workload can send: the caps of its length laws, or a
    trace's longest request; None where a law is unbounded. A server for the workload needs this context."""
    if trace is not None:
        return max(r.input_tokens + r.output_tokens for r in load_trace(trace, tokenizer).requests)
    named = _named(workload) if workload else None
    if named is None and input_len is None and output_len is None:
        named = _named("chat")
    if named is not None and named.pairs is not None and input_len is None and output_len is None:
        return named.pairs.max_total
    caps = (_cap(_dist(input_len, named.input_len if named else None, DEFAULT_INPUT_LEN)),
            _cap(_dist(output_len, named.output_len if named else None, DEFAULT_OUTPUT_LEN)))
    return None if None in caps else sum(caps)  # type: ignore[arg-type]
