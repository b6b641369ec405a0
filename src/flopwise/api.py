"""The library's front door: every command of the CLI as a function, with the same parameter names and defaults
(`specs/defaults.py`), returning typed, frozen results whose `to_dict()` is the command's `--json` object.

    estimate(model, gpu, ...)    -> Estimate       static-batch roofline
    simulate(model, gpu, ...)    -> Simulation     a serving engine under a request stream
    compare(tries, model, gpu)   -> Ledger         what each technique changes
    explain(model, gpu, ...)     -> Explanation    prefill vs decode, what each optimization moves
    plan(model, ...)             -> Plan           the SLA-driven deployment search
    bench(url, ...)              -> BenchRun       load against a real server (`bench_async` in an event loop)
    calibrate(hardware, ...)     -> Calibrated     fit an efficiency profile to measurements
    deployment(model, gpu, ...)  -> Deployment     the deployment the others build

The CLI commands call these functions, so a command and its function cannot drift apart. Where a CLI option is
not a Python name the parameter is spelled out: `--try` is `tries`, `--from` is `from_runs`; `--json` is
`.to_dict()`. Arguments are checked at the entry (`_checked`): a wrong type is an `ArgumentError` (a
`flopwise.errors.SpecError` and a `TypeError`) naming the function, the parameter and what it takes; values are
checked by the specs they build (a `FlopwiseError` each, one line).

The simulator, the techniques, the planner, the load generator and the calibration are imported inside the
function that needs them: the CLI imports this module for every command, and `flopwise estimate` must not pay
for the load generator's HTTP client or the planner.
"""

from __future__ import annotations

import asyncio
import csv
import functools
import inspect
import math
import numbers
import time
import types
import typing
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import fields, replace
from pathlib import Path
from typing import Any, TypeVar

from flopwise.cost.fit import require_batch_fit
from flopwise.errors import ArgumentError, FlopwiseError, FlopwiseWarning, WorkloadError, suggest
from flopwise.estimate import Estimate, estimate_deployment
from flopwise.params import documented
from flopwise.results import BenchRun, Calibrated, Plan, Simulation
from flopwise.specs.build import build_deployment, engine_profile
from flopwise.specs.cluster import MAX_REPLICAS
from flopwise.specs.defaults import (
    BENCH_INPUT_LEN,
    BENCH_NUM_REQUESTS,
    BENCH_OUTPUT_LEN,
    BENCH_TIMEOUT_S,
    COMPARE_NUM_REQUESTS,
    COMPARE_SLA,
    DEFAULT_ENDPOINT,
    DEFAULT_ENGINE,
    DEFAULT_GPU,
    DEFAULT_INPUT_LEN,
    DEFAULT_MODEL,
    DEFAULT_OUTPUT_LEN,
    FRONTEND_ESTIMATE,
    FRONTEND_SERVING,
    MAX_NUM_REQUESTS,
    PLAN_GPUS,
    PLAN_KV,
    PLAN_MAX_GPUS,
    PLAN_WORKLOAD,
    SPEC_ALPHA,
    SPEC_K,
    workload_defaults,
)
from flopwise.specs.deployment import Deployment, check_moe_backend, check_pdl
from flopwise.specs.engine import EngineProfile
from flopwise.specs.hardware import HardwareSpec, get_hardware
from flopwise.specs.model import ModelSpec
from flopwise.specs.model_catalog import get_model
from flopwise.specs.speculative import SpeculativeSpec, parse_speculative
from flopwise.validate import integer, number, output_path, text

if typing.TYPE_CHECKING:
    from flopwise.cluster import FleetResult
    from flopwise.sim.simulate import RunResult
    from flopwise.techniques.explain import Explanation
    from flopwise.techniques.ledger import Ledger
    from flopwise.workload.spec import Workload

__all__ = ["deployment", "estimate", "simulate", "compare", "explain", "plan", "bench", "bench_async", "calibrate",
           "engine_profile", "DEFAULT_MODEL", "DEFAULT_GPU", "DEFAULT_ENGINE"]

F = TypeVar("F", bound=Callable[..., Any])
PathLike = str | Path


# ------------------------------------------------------------------------------------------------ type checks


def _describe(hint: Any) -> str:
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        return " or ".join(_describe(a) for a in typing.get_args(hint))
    if hint is type(None):
        return "None"
    if origin in (dict, Mapping):
        return "a mapping"
    if origin in (list, tuple, Sequence):
        return f"a list of {_describe(typing.get_args(hint)[0])}"
    if origin is typing.Literal:
        return " or ".join(repr(a) for a in typing.get_args(hint))
    if hint in (Callable,) or origin is Callable:
        return "a function"
    return {int: "an integer", float: "a number", str: "a string", bool: "True or False", Path: "a path"}.get(
        hint, getattr(hint, "__name__", str(hint)))


def _matches(value: Any, hint: Any) -> bool:
    origin = typing.get_origin(hint)
    if hint is Any:
        return True
    if origin in (typing.Union, types.UnionType):
        return any(_matches(value, a) for a in typing.get_args(hint))
    if hint is type(None):
        return value is None
    if hint is float:
        return isinstance(value, numbers.Real) and not isinstance(value, bool)
    if hint is int:
        return isinstance(value, numbers.Integral) and not isinstance(value, bool)
    if origin in (dict, Mapping):
        key, item = typing.get_args(hint) or (Any, Any)
        return isinstance(value, Mapping) and all(_matches(k, key) and _matches(v, item) for k, v in value.items())
    if origin in (list, tuple, Sequence):
        (item, *_rest) = typing.get_args(hint) or (Any,)
        return isinstance(value, list | tuple) and all(_matches(v, item) for v in value)
    if origin is typing.Literal:
        return value in typing.get_args(hint)
    if hint is Callable or origin is Callable:
        return callable(value)
    return isinstance(value, hint)


def _plain(value: Any) -> Any:
    """A numpy (or other numbers-ABC) scalar as the Python int or float it stands for, inside lists, tuples and
    dicts too: the layers below check `int` / `float` and the results must stay JSON-serializable."""
    if isinstance(value, bool) or type(value) in (int, float):
        return value
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        return float(value)
    if isinstance(value, list | tuple):
        return type(value)(_plain(v) for v in value)
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


def _hints(fn: Callable[..., Any]) -> dict[str, Any]:
    """The parameters' annotations of `fn`, evaluated (the return annotation may name a type imported only for
    type checkers, and is not needed)."""
    out = {}
    for name, p in inspect.signature(fn).parameters.items():
        ann = p.annotation
        if isinstance(ann, str):
            ann = eval(ann, fn.__globals__)  # noqa: S307 - the module's own annotations
        out[name] = Any if ann is inspect.Parameter.empty else ann
    return out


# string arguments whose empty value is a setting of its own: no API key (`api_key=os.environ.get(..., "")`)
_EMPTY_MEANS_NONE = frozenset({"api_key"})


def _checked(fn: F) -> F:
    """Check every argument of an API call against `fn`'s annotations before it runs (see the module docstring)."""
    sig = inspect.signature(fn)
    hints: dict[str, Any] = {}

    @functools.wraps(fn)
    def call(*args: Any, **kwargs: Any) -> Any:
        if not hints:
            hints.update(_hints(fn))
        try:
            bound = sig.bind(*args, **kwargs)
        except TypeError as e:
            unknown = [k for k in kwargs if k not in sig.parameters]
            hint = suggest(unknown[0], sig.parameters) if unknown else ""
            raise ArgumentError(f"flopwise.{fn.__name__}(): {e}.{hint}") from None
        for name, value in bound.arguments.items():
            hint = hints.get(name, Any)
            if not _matches(value, hint):
                raise ArgumentError(f"flopwise.{fn.__name__}(): {name} must be {_describe(hint)}, got "
                                    f"{value!r:.80} ({type(value).__name__})")
            if isinstance(value, str) and not value.strip() and name not in _EMPTY_MEANS_NONE:
                # an empty name or format would read as the default
                raise ArgumentError(f"flopwise.{fn.__name__}(): {name} (--{name.replace('_', '-')}) is empty; give "
                                    "a value or leave it out for the default")
            bound.arguments[name] = _plain(value)
        return fn(*bound.args, **bound.kwargs)

    return call  # type: ignore[return-value]


def _text_list(value: str | Sequence[str] | None, name: str) -> tuple[str, ...] | None:
    """A comma-separated CLI value or a Python list, as a tuple of non-empty items (None stays None)."""
    if value is None:
        return None
    items = tuple(v.strip() for v in (value.split(",") if isinstance(value, str) else value))
    if not items or not all(items):
        raise WorkloadError(f"{name} must list at least one value and no empty ones, got {value!r}")
    return items


def _int_list(value: str | Sequence[int] | None, name: str) -> tuple[int, ...] | None:
    if value is None:
        return None
    if isinstance(value, str):
        try:
            value = [int(v) for v in _text_list(value, name) or ()]
        except ValueError:
            raise WorkloadError(f"{name} must be comma-separated integers, got {value!r}") from None
    return tuple(integer(v, name, lo=1) for v in value)


def _rate(value: float | str | None, name: str = "--request-rate") -> float | None:
    """A request rate from a number or its text ("4", "inf")."""
    if value is None:
        return None
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            raise WorkloadError(f"{name} must be a number of requests/s or inf, got {value!r}") from None
    return number(value, f"{name} (requests/s; inf sends all at once)", lo=0, lo_open=True, allow_inf=True)


# ------------------------------------------------------------------------------------------------ deployment


@_checked
@documented()
def deployment(model: str | ModelSpec = DEFAULT_MODEL, gpu: str | HardwareSpec = DEFAULT_GPU, *,
               tp: int = 1, pp: int = 1, num_gpus: int | None = None, replicas_per_server: int = 1,
               weights: str | None = None, dp: int | None = None, ep: int = 1, nodes: int | None = None,
               expert_skew: float | None = None, two_batch_overlap: bool = False,
               kv: str | None = None, hardware_file: PathLike | None = None,
               speculative: SpeculativeSpec | str | None = None, family: str | None = None,
               engine: str | EngineProfile = DEFAULT_ENGINE, frontend: str = FRONTEND_SERVING,
               endpoint: str = DEFAULT_ENDPOINT, engine_file: PathLike | None = None,
               max_num_seqs: int | None = None, max_num_batched_tokens: int | None = None,
               block_size: int | None = None, gpu_memory_utilization: float | None = None,
               enforce_eager: bool = False, async_scheduling: bool | None = None,
               cuda_graph_max_bs: int | None = None, moe_backend: str | None = None, pdl: bool = False,
               api_servers: int | None = None, stream_interval: int | None = None,
               max_model_len: int | None = None, attention_backend: str | None = None) -> Deployment:
    """A Deployment from a model (catalog id, alias, config path, or ModelSpec) and a GPU (id or spec), served
    by `engine` ("vllm", "sglang@0.4", "trtllm@0.17", "llamacpp", or a profile) behind its HTTP server
    (`frontend="http"`) or offline ("none"). Knobs left None take the engine's defaults. `speculative`: a
    SpeculativeSpec or its text form (None or "none": plain decoding). `family`: read a config file with that
    registered family's reader (the model's notes then say the mapping is assumed). `max_model_len`: the context
    the server is started for (--max-model-len), which some engine defaults follow (vLLM V0 chunks prompts by
    itself above 32K); None: the model's whole context."""
    return build_deployment(model, gpu, tp=tp, pp=pp, num_gpus=num_gpus, replicas_per_server=replicas_per_server,
                            dp=dp, ep=ep, nodes=nodes,
                            expert_skew=expert_skew, two_batch_overlap=two_batch_overlap, weights=weights,
                            kv=kv, hardware_file=hardware_file, speculative=speculative, family=family, engine=engine,
                            frontend=frontend, endpoint=endpoint, engine_file=engine_file, max_num_seqs=max_num_seqs,
                            max_num_batched_tokens=max_num_batched_tokens, block_size=block_size,
                            gpu_memory_utilization=gpu_memory_utilization, enforce_eager=enforce_eager,
                            async_scheduling=async_scheduling, cuda_graph_max_bs=cuda_graph_max_bs,
                            moe_backend=moe_backend, pdl=pdl, api_servers=api_servers,
                            stream_interval=stream_interval, max_model_len=max_model_len,
                            attention_backend=attention_backend)


# ------------------------------------------------------------------------------------------------ estimate


@_checked
@documented()
def estimate(model: str | ModelSpec = DEFAULT_MODEL, gpu: str | HardwareSpec = DEFAULT_GPU, *,
             batch: int = 1, input_len: int = DEFAULT_INPUT_LEN, output_len: int = DEFAULT_OUTPUT_LEN,
             tp: int = 1, pp: int = 1, num_gpus: int | None = None, weights: str | None = None,
             dp: int | None = None, ep: int = 1, nodes: int | None = None, expert_skew: float | None = None,
             two_batch_overlap: bool = False,
             kv: str | None = None, gpu_memory_utilization: float | None = None,
             hardware_file: PathLike | None = None, family: str | None = None,
             engine: str | EngineProfile = DEFAULT_ENGINE, frontend: str = FRONTEND_ESTIMATE,
             endpoint: str = DEFAULT_ENDPOINT, engine_file: PathLike | None = None,
             enforce_eager: bool = False, async_scheduling: bool | None = None,
             cuda_graph_max_bs: int | None = None, moe_backend: str | None = None, pdl: bool = False,
             attention_backend: str | None = None) -> Estimate:
    """Static-batch estimate (`flopwise estimate`) of `batch` requests of `input_len` prompt and `output_len`
    generated tokens, as `engine`'s offline benchmark sees it (`frontend="http"` adds its API server). Times in
    ms (`ttft_ms`, `tpot_ms`, `e2e_ms`), throughput in tokens/s, memory in GiB; `to_dict()` is the `--json`.

    >>> r = estimate("llama-3.1-8b", "h100-sxm", batch=32)      # doctest: +SKIP
    >>> r.ttft_ms, r.tpot_ms, r.output_tokens_per_s               # doctest: +SKIP"""
    dep = build_deployment(model, gpu, tp=tp, pp=pp, num_gpus=num_gpus, dp=dp, ep=ep, nodes=nodes,
                           expert_skew=expert_skew,
                           two_batch_overlap=two_batch_overlap, weights=weights, kv=kv, hardware_file=hardware_file,
                           gpu_memory_utilization=gpu_memory_utilization,
                           family=family, engine=engine, frontend=frontend, endpoint=endpoint, engine_file=engine_file,
                           enforce_eager=enforce_eager, async_scheduling=async_scheduling,
                           cuda_graph_max_bs=cuda_graph_max_bs, moe_backend=moe_backend, pdl=pdl,
                           attention_backend=attention_backend)
    result = estimate_deployment(dep, batch=batch, input_len=input_len, output_len=output_len)
    require_batch_fit(dep, batch, input_len + output_len)
    return result


# ------------------------------------------------------------------------------------------------ simulate


_ROW_SUFFIXES = (".csv", ".parquet")


def _check_output(output: PathLike | None) -> Path | None:
    """`--output` checked before the run: a .csv or .parquet file in an existing folder (and pyarrow for .parquet)."""
    if output is None:
        return None
    p = output_path(output, "--output", suffixes=_ROW_SUFFIXES)
    if p.suffix.lower() == ".parquet":
        try:
            import pyarrow  # noqa: F401  (only .parquet output needs it)
        except ImportError:
            raise WorkloadError("writing .parquet needs pyarrow (pip install pyarrow); or write a .csv") from None
    return p


def _write_rows(path: Path, rows: Sequence[dict[str, Any]]) -> None:
    if path.suffix.lower() == ".parquet":
        import pyarrow as pa  # checked by _check_output
        import pyarrow.parquet as pq

        pq.write_table(pa.Table.from_pylist(list(rows)), path)
        return
    with path.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)


def _steady_rule(seed: int, num_requests: int | None) -> Any:
    """The sustained-rate rule of a --find-max-rate search: --num-requests sets its smallest measured window."""
    from flopwise.sim.steady import SteadyRule

    if num_requests is None:
        return SteadyRule(seed=seed)
    return SteadyRule(seed=seed, min_window_requests=max(20, num_requests), max_window_requests=max(3000, num_requests))


@_checked
@documented(input_len="lengths", output_len="output_lengths")
def simulate(model: str | ModelSpec = DEFAULT_MODEL, gpu: str | HardwareSpec = DEFAULT_GPU, *,
             num_gpus: int | None = None, tp: int = 1, pp: int = 1, replicas_per_server: int = 1,
             weights: str | None = None, dp: int | None = None, ep: int = 1, nodes: int | None = None,
             expert_skew: float | None = None, two_batch_overlap: bool = False,
             kv: str | None = None, engine: str | EngineProfile = DEFAULT_ENGINE, frontend: str = FRONTEND_SERVING,
             endpoint: str = DEFAULT_ENDPOINT, gpu_memory_utilization: float | None = None,
             engine_file: PathLike | None = None, hardware_file: PathLike | None = None, family: str | None = None,
             max_num_seqs: int | None = None, max_num_batched_tokens: int | None = None,
             block_size: int | None = None, enforce_eager: bool = False, async_scheduling: bool | None = None,
             cuda_graph_max_bs: int | None = None, moe_backend: str | None = None, pdl: bool = False,
             attention_backend: str | None = None,
             api_servers: int | None = None, stream_interval: int | None = None,
             speculative: str | SpeculativeSpec | None = None,
             enable_prefix_caching: bool | None = None, enable_chunked_prefill: bool | None = None,
             scheduler: str | None = None, chunked_prefill_size: int | None = None, max_prefill_tokens: int = 16384,
             max_running_requests: int | None = None, schedule_policy: str = "fcfs",
             schedule_conservativeness: float = 1.0, enable_mixed_chunk: bool = False,
             scheduler_recv_interval: int = 1, ignore_eos: bool = False,
             request_rate: float | str | None = None, arrival: str = "poisson", burstiness: float = 1.0,
             rescale_arrivals: bool = False, concurrency: int | None = None, max_concurrency: int | None = None,
             num_requests: int | None = None, workload: str | None = None,
             input_len: str | int | None = None, output_len: str | int | None = None, trace: PathLike | None = None,
             tokenizer: PathLike | None = None, seed: int = 0, sla: str | None = None,
             find_max_rate: bool = False, output: PathLike | None = None, replicas: int | None = None,
             router: str | None = None, disaggregate: str | None = None, kv_link: str = "auto",
             layerwise: bool = True, replica_events: str | None = None, autoscale: str | None = None,
             cold_start: str | float = "auto", storage_gbs: float = 2.0, engine_start_s: float = 30.0,
             target_outstanding: float = 32.0, timeout_s: float | str | None = None, classes: str | None = None,
             scheduling_policy: str = "fcfs", rate_profile: str | None = None, adp_balance: bool = False,
             progress: Callable[[int], None] | None = None) -> Simulation:
    """Serve a request stream on a deployment (`flopwise simulate`): TTFT/TPOT/ITL/E2E percentiles (ms), request
    and token throughput, goodput under `sla`, preemptions, where the time went; with `find_max_rate`, the highest
    request rate meeting `sla`. Any fleet option (`replicas`, `router`, `disaggregate`, `replica_events`,
    `autoscale`) runs a fleet of replicas in one event loop (`flopwise.cluster`) and adds a "fleet" block.
    `progress(n)`: called as n more requests complete."""
    from flopwise.sim import SimConfig  # the simulator
    from flopwise.sim import find_max_rate as search_max_rate
    from flopwise.sim import simulate as run
    from flopwise.sim.sglang_knobs import SglangKnobs
    from flopwise.specs.sla import parse_sla
    from flopwise.workload import build_workload

    out = _check_output(output)
    rate = _rate(request_rate)
    if num_requests is not None:
        integer(num_requests, "--num-requests", lo=1, hi=MAX_NUM_REQUESTS)
    objectives = parse_sla(sla) if sla is not None else None
    if find_max_rate:
        if objectives is None:
            raise WorkloadError("--find-max-rate needs --sla, e.g. --sla \"p95_ttft<=300ms,p95_tpot<=50ms\"")
        if concurrency is not None or rate_profile is not None:
            raise WorkloadError("--find-max-rate searches a request rate; drop --concurrency and --rate-profile")
    is_fleet = any(v is not None for v in (replicas, router, disaggregate, replica_events, autoscale))
    if is_fleet and replicas_per_server != 1:  # before the deployment, whose own check would name --num-gpus
        raise WorkloadError("--replicas-per-server runs the --num-gpus replicas behind one server, round-robin; "
                            "a fleet (--replicas, --router, --disaggregate, --replica-events, --autoscale) "
                            "routes to servers of their own: drop one")
    def build(t: int, **sized: Any) -> Deployment:  # the run's deployment at tp t (`sized`: its GPU count)
        return build_deployment(model, gpu, tp=t, pp=pp, dp=dp, ep=ep, nodes=nodes, expert_skew=expert_skew,
                                two_batch_overlap=two_batch_overlap, weights=weights, kv=kv,
                                gpu_memory_utilization=gpu_memory_utilization, block_size=block_size,
                                max_num_seqs=max_num_seqs, max_num_batched_tokens=max_num_batched_tokens,
                                speculative=speculative, engine=engine, frontend=frontend, endpoint=endpoint,
                                engine_file=engine_file, family=family, hardware_file=hardware_file,
                                enforce_eager=enforce_eager, async_scheduling=async_scheduling,
                                cuda_graph_max_bs=cuda_graph_max_bs, moe_backend=moe_backend, pdl=pdl,
                                attention_backend=attention_backend, api_servers=api_servers,
                                stream_interval=stream_interval, **sized)

    dep = build(tp, num_gpus=num_gpus, replicas_per_server=replicas_per_server)
    knobs = SglangKnobs(chunked_prefill_size=chunked_prefill_size, max_prefill_tokens=max_prefill_tokens,
                        max_running_requests=max_running_requests, schedule_policy=schedule_policy,
                        schedule_conservativeness=schedule_conservativeness, enable_mixed_chunk=enable_mixed_chunk,
                        scheduler_recv_interval=integer(scheduler_recv_interval, "--scheduler-recv-interval", lo=1))
    sglang_knobs = [f"--{f.name.replace('_', '-')}" for f in fields(SglangKnobs)
                    if getattr(knobs, f.name) != getattr(SglangKnobs(), f.name)]  # set away from SGLang's defaults
    if sglang_knobs and (runs := scheduler or dep.engine.scheduler) != "sglang":
        raise WorkloadError(f"{', '.join(sglang_knobs)}: SGLang's scheduler knobs; the {runs} scheduler "
                            f"({dep.engine.display}) would ignore them: add --scheduler sglang or use --engine sglang")
    config = SimConfig(scheduler=scheduler, enable_prefix_caching=enable_prefix_caching,
                       enable_chunked_prefill=enable_chunked_prefill,
                       sglang=knobs, seed=seed,
                       scheduling_policy=scheduling_policy, ignore_eos=ignore_eos, adp_balance=adp_balance)

    def workload_at(r: float | None, n: int | None = num_requests) -> Any:
        return build_workload(num_requests=n, workload=workload, input_len=input_len,
                              output_len=output_len, request_rate=r, arrival=arrival, burstiness=burstiness,
                              concurrency=concurrency, max_concurrency=max_concurrency, trace=trace,
                              tokenizer=tokenizer, seed=seed,
                              rescale_arrivals=rescale_arrivals, timeout_s=timeout_s, classes=classes,
                              rate_profile=rate_profile, context_len=dep.model.max_position_embeddings)

    if is_fleet:
        if num_gpus is not None and replicas is not None:
            raise WorkloadError("give --num-gpus (independent replicas) or --replicas (a fleet), not both")
        if replicas is not None:
            integer(replicas, "--replicas", lo=1, hi=MAX_REPLICAS)
        sized = [flag for flag, given in (("--replicas", replicas is not None), ("--num-gpus", num_gpus is not None),
                                          ("--tp", tp != 1)) if given]
        if disaggregate is not None and sized:  # each would be ignored: the pools' own sizes win
            raise WorkloadError(f"--disaggregate sizes each pool itself (prefill=NxtpT,decode=NxtpT); drop "
                                f"{', '.join(sized)}")
        from flopwise.cluster import simulate_fleet
        from flopwise.cluster.build import build_cluster
        from flopwise.sim.max_rate import capacity_bounds

        def make(t: int, count: int) -> Deployment:  # `count` replicas of tp t, with the run's dp / ep / nodes
            return replace(build(t), replicas=count)

        fleet = build_cluster(make, tp=tp, replicas=replicas or (dep.replicas if num_gpus is not None else None),
                              router=router or "round-robin", disaggregate=disaggregate, kv_link=kv_link,
                              layerwise=layerwise, replica_events=replica_events, autoscale=autoscale,
                              cold_start=str(cold_start), storage_gbs=storage_gbs, engine_start_s=engine_start_s,
                              target_outstanding=target_outstanding)
        result: RunResult
        if find_max_rate:
            workload_at(None)
            assert objectives is not None

            def on_fleet(wl: Workload) -> FleetResult:
                return simulate_fleet(fleet, wl, config, sla=objectives, metrics="exact")

            # the ceiling: the replicas' closed-form ceilings summed, or twice what the fleet completes when every
            # request arrives at once, whichever is higher (a pool that only prefills or only decodes can outrun
            # its full-request ceiling)
            sample = workload_at(math.inf)
            pc = config.prefix_caching(dep)
            per_replica = sum(p.num_replicas * capacity_bounds(p.deployment, sample, objectives, pc).max_rate_ceiling
                              for p in fleet.pools)
            burst = on_fleet(sample).metrics().request_throughput
            found = search_max_rate(dep, workload_at, objectives, config, rule=_steady_rule(seed, num_requests),
                                    ceiling=max(per_replica, 2 * burst), run=on_fleet)
            result = found.result
            summary = found.summary()  # latencies and SLA over the measured window
            summary["max_rate"] = {**found.to_dict(), "search": "sustained-rate rule over the fleet"}
        else:
            result = simulate_fleet(fleet, workload_at(rate), config, sla=objectives, progress=progress)
            summary = result.summary()
    elif find_max_rate:
        workload_at(None)  # a bad workload is an error before the first probe
        # --num-requests here sets the smallest measured window (the rule sizes each probe from it)
        found = search_max_rate(dep, workload_at, objectives, config,  # type: ignore[arg-type]
                                rule=_steady_rule(seed, num_requests))
        result = found.result
        summary = found.summary()  # latencies and SLA over the measured window
        summary["max_rate"] = found.to_dict()
    else:
        result = run(dep, workload_at(rate), config, sla=objectives, progress=progress)
        summary = result.summary()
    rows = result.rows()
    if out is not None:
        _write_rows(out, rows)
    return Simulation.of(summary, rows, dep)


# ------------------------------------------------------------------------------------------------ compare, explain


@_checked
@documented(workload="compare_workload", num_requests="compare_num_requests")
def compare(tries: str | Sequence[str] | None = None, model: str | ModelSpec = DEFAULT_MODEL,
            gpu: str | HardwareSpec = DEFAULT_GPU,
            *, tp: int = 1, weights: str | None = None, kv: str | None = None, workload: str | None = None,
            input_len: int | None = None, output_len: int | None = None, batch: int = 1, sla: str | None = None,
            simulate: bool = True, num_requests: int = COMPARE_NUM_REQUESTS, hardware_file: PathLike | None = None,
            engine: str | EngineProfile = DEFAULT_ENGINE, frontend: str = FRONTEND_SERVING,
            endpoint: str = DEFAULT_ENDPOINT, family: str | None = None) -> Ledger:
    """The trade-off ledger (`flopwise compare`): what each technique does to FLOPs, TTFT and TPOT (ms),
    concurrency, throughput at the SLA (tokens/s), memory (GiB), accuracy risk and complexity, next to the
    baseline. `input_len` / `output_len` default to the named workload's means, else 1024 / 256; `tries` None:
    the techniques that apply here (`techniques.compare.default_tries`), those the deployment cannot run listed
    in `Ledger.skipped`. `sla` None: the named workload's (as `plan` takes it), else COMPARE_SLA."""
    from flopwise.specs.sla import parse_sla
    from flopwise.techniques.compare import compare as run
    from flopwise.techniques.compare import named_workload_shape
    from flopwise.techniques.scenario import Scenario
    from flopwise.techniques.sim_throughput import SimWorkload

    try_list = None if tries is None else list(_text_list([tries] if isinstance(tries, str) else tries, "--try")
                                               or ())
    integer(num_requests, "--num-requests", lo=1, hi=MAX_NUM_REQUESTS)
    shape = named_workload_shape(workload) if workload is not None else None  # (an unknown name: one line)
    objectives = parse_sla(sla if sla is not None else workload_defaults(workload).sla if workload is not None
                           else COMPARE_SLA)
    lin = input_len if input_len is not None else (shape.input_len if shape else DEFAULT_INPUT_LEN)
    lout = output_len if output_len is not None else (shape.output_len if shape else DEFAULT_OUTPUT_LEN)
    dep = build_deployment(model, gpu, tp=tp, weights=weights, kv=kv, hardware_file=hardware_file, engine=engine,
                           frontend=frontend, endpoint=endpoint, family=family)
    base = Scenario(deployment=dep, input_len=lin, output_len=lout, batch=batch)
    named = workload if workload and input_len is None and output_len is None else None
    sim = SimWorkload(named, num_requests) if simulate else None
    return run(base, try_list, objectives, hardware_file, sim)


@_checked
@documented()
def explain(model: str | ModelSpec = DEFAULT_MODEL, gpu: str | HardwareSpec = DEFAULT_GPU, *, tp: int = 1,
            weights: str | None = None, kv: str | None = None, batch: int = 1, input_len: int = DEFAULT_INPUT_LEN,
            output_len: int = DEFAULT_OUTPUT_LEN, draft: str | None = None, k: int = SPEC_K, alpha: float = SPEC_ALPHA,
            hardware_file: PathLike | None = None, engine: str | EngineProfile = DEFAULT_ENGINE,
            family: str | None = None) -> Explanation:
    """Why this model on this GPU behaves as it does (`flopwise explain`): prefill vs decode on the roofline, the
    FLOPs-vs-time gap, and what batching, speculative decoding, quantization, prefix caching, KV structure and
    chunked prefill each move (times in ms, throughput in tokens/s)."""
    from flopwise.techniques.explain import explain as run
    from flopwise.techniques.scenario import Scenario

    dep = build_deployment(model, gpu, tp=tp, weights=weights, kv=kv, hardware_file=hardware_file, engine=engine,
                           frontend=FRONTEND_ESTIMATE, family=family)
    return run(Scenario(deployment=dep, input_len=input_len, output_len=output_len, batch=batch),
               get_model(draft) if draft else None, k, alpha)


# ------------------------------------------------------------------------------------------------ plan


@_checked
@documented(tp="tps", weights="plan_weights", kv="plan_kv", max_num_seqs="plan_knob",
            api_servers="plan_api_servers", stream_intervals="plan_stream_intervals",
            max_num_batched_tokens="plan_knob", speculative="plan_speculative",
            num_requests="plan_num_requests", input_len="input_len", output_len="output_len")
def plan(model: str = DEFAULT_MODEL, *, gpus: str | Sequence[str] = PLAN_GPUS, max_gpus: int = PLAN_MAX_GPUS,
         workload: str = PLAN_WORKLOAD, trace: PathLike | None = None, input_len: int | None = None,
         output_len: int | None = None, rate: float | None = None, sla: str | None = None,
         objective: str | None = None, tp: str | Sequence[int] | None = None,
         weights: str | Sequence[str] | None = None, kv: str | Sequence[str] = PLAN_KV,
         max_num_seqs: str | Sequence[int] | None = None, max_num_batched_tokens: str | Sequence[int] | None = None,
         engine: str = DEFAULT_ENGINE, prefix_caching: str = "on", speculative: str | Sequence[str] | None = None,
         num_requests: int | None = None, max_effort: float = 2.0, seed: int = 0,
         hardware_file: PathLike | None = None, html: PathLike | None = None,
         serving: str | Sequence[str] = "aggregated", moe_layouts: str | Sequence[str] = "tp,dep",
         enforce_eager: bool = False, async_scheduling: bool | None = None, cuda_graph_max_bs: int | None = None,
         moe_backend: str | None = None, pdl: bool = False, api_servers: str | Sequence[int] | None = None,
         stream_intervals: str | Sequence[int] | None = None, attention_backend: str | None = None,
         progress: Callable[[int, int], None] | None = None) -> Plan:
    """The SLA-driven deployment search (`flopwise plan`): the deployments that serve `workload` within `sla` (None:
    the workload's default) with the most goodput per GPU (or throughput, dollar, or per-user speed at one load:
    `objective`, None: the workload's), each at its sustained rate with a 90% interval, ties shown as ties, with
    the Pareto frontier, trade-offs and launch commands. Every value is checked before the search starts.
    With `serving` "aggregated,disaggregated" it also compares fleets of `max_gpus` GPUs of the first GPU type:
    aggregated replicas against prefill/decode pools, each at its highest rate meeting the SLA ("serving" block).
    `enforce_eager`, `async_scheduling`, `cuda_graph_max_bs`, `moe_backend`, `pdl`, `attention_backend`: engine
    switches every candidate
    runs with, as `simulate` takes them (None / False: the engine's defaults), set in the launch commands too.
    `api_servers`: the server's API-process counts to try, e.g. "1,4" (vLLM --api-server-count, SGLang
    --tokenizer-worker-num; None: the engine's default), in the launch commands too; `stream_intervals`: the
    tokens per streamed event to try, e.g. "1,10" (--stream-interval; None: 1), likewise.
    `progress(done, total)`: called as candidates finish."""
    from flopwise.launch import launch_model_id, plan_launch
    from flopwise.plan.fleet import SERVING_MODES
    from flopwise.plan.search import OBJECTIVES, PlanRequest, plan_to_dict
    from flopwise.plan.search import plan as run
    from flopwise.plan.space import SearchSpace
    from flopwise.specs.precision import kv_format, weight_format
    from flopwise.specs.sla import parse_sla

    html_path = output_path(html, "--html", suffixes=(".html", ".htm")) if html is not None else None
    modes = _text_list(serving, "--serving") or ("aggregated",)
    bad = [m for m in modes if m not in SERVING_MODES]
    if bad:
        raise WorkloadError(f"--serving takes {', '.join(SERVING_MODES)}, got {', '.join(bad)}")
    gpu_ids = _text_list(gpus, "--gpus")
    for g in gpu_ids or ():
        get_hardware(g, hardware_file)  # an unknown id is named here, not as "fits nowhere"
    weight_names, kv_names = _text_list(weights, "--weights"), _text_list(kv, "--kv")
    for w in weight_names or ():
        weight_format(w)
    for f in kv_names or ():
        kv_format(f)
    integer(max_gpus, "--max-gpus", lo=1, hi=4096)
    tps = _int_list(tp, "--tp")
    spec = get_model(model) if tps else None
    for t in tps or ():
        if t > max_gpus:
            raise WorkloadError(f"--tp {t} is more than --max-gpus {max_gpus}")
        if spec is not None and spec.mla is None and spec.num_heads % t:
            raise WorkloadError(f"--tp {t} does not divide {spec.name}'s {spec.num_heads} attention heads; choose "
                                f"a divisor of {spec.num_heads}")
    if rate is not None:
        # the fleet is sized as rate / per-replica rate: a million requests/s is far beyond any real service
        number(rate, "--rate (requests/s)", lo=0, hi=1e6, lo_open=True)
    if num_requests is not None:
        integer(num_requests, "--num-requests", lo=40, hi=MAX_NUM_REQUESTS)
    number(max_effort, "--max-effort", lo=1.0)
    integer(seed, "--seed", lo=0, hi=2**63 - 1)
    for name, v in (("--input-len", input_len), ("--output-len", output_len)):
        if v is not None:
            integer(v, name, lo=1)
    if sla is not None:
        parse_sla(sla)
    if objective is not None and objective not in OBJECTIVES:
        raise WorkloadError(f"unknown --objective '{objective}'; choose one of {', '.join(OBJECTIVES)}")
    pc = {"on": (True,), "off": (False,), "both": (True, False)}.get(prefix_caching)
    if pc is None:
        raise WorkloadError(f"--prefix-caching must be on, off or both, got {prefix_caching!r}")
    specs = _text_list([speculative] if isinstance(speculative, str) else speculative, "--speculative")
    layouts = _text_list(moe_layouts, "--moe-layouts") or ("tp",)
    space = SearchSpace(gpus=gpu_ids, max_gpus=max_gpus, tps=tps, weights=weight_names, kvs=kv_names,  # type: ignore[arg-type]
                        max_num_seqs=_int_list(max_num_seqs, "--max-num-seqs") or (None,),
                        max_num_batched_tokens=_int_list(max_num_batched_tokens, "--max-num-batched-tokens") or (None,),
                        engine=engine, prefix_caching=pc,
                        speculative=tuple(parse_speculative(t) for t in specs) if specs else (None,),
                        moe_layouts=layouts, enforce_eager=enforce_eager, async_scheduling=async_scheduling,
                        cuda_graph_max_bs=cuda_graph_max_bs, moe_backend=moe_backend, pdl=pdl,
                        attention_backend=attention_backend,
                        api_servers=_int_list(api_servers, "--api-servers") or (None,),
                        stream_intervals=_int_list(stream_intervals, "--stream-intervals") or (1,))
    if "disaggregated" in modes:  # the fleets run on the first GPU type: a switch it cannot run is named now
        fleet_hw = get_hardware((gpu_ids or PLAN_GPUS)[0], hardware_file)
        check_moe_backend(moe_backend, fleet_hw)
        if pdl:
            check_pdl(space.engine_profile(), fleet_hw)
    req = PlanRequest(model=model, workload=workload, input_len=input_len, output_len=output_len, rate=rate, sla=sla,
                      objective=objective, space=space, num_requests=num_requests, seed=seed,
                      hardware_file=str(hardware_file) if hardware_file else None,
                      trace=str(trace) if trace else None, max_effort=max_effort)
    result = run(req, progress=progress)
    d = plan_to_dict(result, launch=plan_launch(result))
    if "disaggregated" in modes:
        d["serving"] = _fleet_plan(model, (gpu_ids or PLAN_GPUS)[0], max_gpus, modes, req, result.sla, result.rule,
                                   engine, hardware_file, weight_names, kv_names,
                                   (launch_model_id(model, result.model.name), result.max_len, result.max_prompt_len),
                                   {"enforce_eager": enforce_eager, "async_scheduling": async_scheduling,
                                    "cuda_graph_max_bs": cuda_graph_max_bs, "moe_backend": moe_backend, "pdl": pdl,
                                    "attention_backend": attention_backend})
        if any(n is not None for n in space.api_servers) or space.stream_intervals != (1,):
            d["serving"]["note"] = ("--api-servers and --stream-intervals are searched for the aggregated replicas "
                                    "above only; these fleets run each engine's default API servers and stream "
                                    "every token")
    if html_path is not None:
        from flopwise.report.plan_html import plan_html  # plotly is imported only for --html

        html_path.write_text(plan_html(result, d))
        d["html"] = str(html_path)
    return Plan(summary=d, result=result)


def _fleet_plan(model: str, gpu: str, total: int, modes: tuple[str, ...], req: Any, sla: Any, rule: Any, engine: str,
                hardware_file: PathLike | None, weights: Sequence[str] | None,
                kvs: Sequence[str] | None, launch_for: tuple[str, int, int | None],
                switches: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Aggregated vs disaggregated fleets of `total` GPUs (plan/fleet.py), in the first weight and KV format, and
    the launch commands of the best disaggregated one (`launch_for`: the checkpoint, its context and longest
    prompt); `switches`: `build_deployment`'s engine switches for every instance (enforce_eager, ...)."""
    from flopwise.cluster.build import build_cluster
    from flopwise.launch.disaggregated import disaggregated_launch
    from flopwise.plan.fleet import fleet_plan_to_dict, plan_fleet
    from flopwise.workload import build_workload

    hw = get_hardware(gpu, hardware_file)
    w, k = (weights or ("bf16",))[0], (kvs or ("bf16",))[0]

    def make(t: int, n: int) -> Deployment:
        return build_deployment(model, hw, tp=t, num_gpus=t * n, weights=w, kv=k, engine=engine, **(switches or {}))

    context = get_model(model).max_position_embeddings

    def workload_at(r: float, n: int | None = None) -> Any:
        return build_workload(num_requests=n or req.num_requests, workload=req.workload if req.trace is None else None,
                              input_len=req.input_len, output_len=req.output_len, trace=req.trace,
                              request_rate=r, seed=req.seed, context_len=context)

    out = fleet_plan_to_dict(plan_fleet(make, total, workload_at, sla, modes, rule=rule), req.rate)
    out.update({"gpu": gpu, "total_gpus": total, "weights": w, "kv": k})
    best = out["best"].get("disaggregated")
    if best is not None:
        spec = build_cluster(make, tp=1, replicas=1, disaggregate=best["layout"], router="least-outstanding")
        model_id, max_len, max_prompt = launch_for
        family = spec.pools[0].deployment.engine.family
        sw = switches or {}
        out["disaggregated_launch"] = {f: disaggregated_launch(spec, model_id=model_id, max_model_len=max_len,
                                                               max_prompt_len=max_prompt, family=f,
                                                               async_scheduling=sw.get("async_scheduling"),
                                                               cuda_graph_max_bs=sw.get("cuda_graph_max_bs"))
                                       for f in dict.fromkeys((family, "vllm", "sglang", "trtllm"))}
    return out


# ------------------------------------------------------------------------------------------------ bench


def _check_resume(out: PathLike | None, options: Any, **given: Any) -> None:
    """`bench --resume` continues the run saved in `out` with the settings saved with it: a run setting given
    with it that differs both from its default and from the saved run's would be ignored, and is refused (the
    same command line re-run with --resume passes)."""
    from flopwise.bench.store import load_run

    try:
        saved = load_run(out).config if out is not None else None
    except FlopwiseError:
        return  # resume_bench says what is wrong with the directory
    if saved is None:
        return
    load, prompts = saved.get("load") or {}, saved.get("prompts") or {}
    rate = load.get("rate")

    def same_rate(v: Any) -> bool:
        vals = options.numbers(v, "--request-rate")
        return len(vals) == 1 and load.get("kind") != "concurrency" and vals[0] == (
            math.inf if rate in ("inf", None) else float(rate))

    # flag, value given, its default, whether it equals the saved run's
    checks = (("--model", given["model"], None, lambda v: v == saved.get("model")),
              ("--endpoint", given["endpoint"], DEFAULT_ENDPOINT, lambda v: v == saved.get("endpoint")),
              ("--request-rate", given["request_rate"], None, same_rate),
              ("--concurrency", given["concurrency"], None,
               lambda v: options.whole_numbers(v, "--concurrency") == [load.get("concurrency")]),
              ("--max-concurrency", given["max_concurrency"], None, lambda v: v == load.get("max_concurrency")),
              ("--num-requests", given["num_requests"], None, lambda v: v == saved.get("num_requests")),
              ("--duration", given["duration"], None, lambda v: v == saved.get("duration_s")),
              ("--warmup", given["warmup"], 0, lambda v: v == saved.get("num_warmup")),
              ("--input-len", given["input_len"], BENCH_INPUT_LEN, lambda v: v == prompts.get("input_len")),
              ("--output-len", given["output_len"], BENCH_OUTPUT_LEN, lambda v: v == prompts.get("output_len")),
              ("--range-ratio", given["range_ratio"], 0.0, lambda v: v == prompts.get("range_ratio")),
              ("--dataset", given["dataset"], None, lambda v: str(v) == prompts.get("dataset")),
              ("--shared-prefix-len", given["shared_prefix_len"], 0,
               lambda v: v == prompts.get("shared_prefix_len")),
              ("--num-prefixes", given["num_prefixes"], 1, lambda v: v == prompts.get("num_prefixes")),
              ("--sla", given["sla"], None, lambda v: v == saved.get("sla")),
              ("--seed", given["seed"], 0, lambda v: v == saved.get("seed")),
              ("--timeout", given["timeout"], BENCH_TIMEOUT_S, lambda v: v == saved.get("timeout_s")),
              ("--ignore-eos", given["ignore_eos"], True, lambda v: v == saved.get("ignore_eos")),
              ("--sweep", given["sweep"], False, lambda v: False),
              ("--extra-body", given["extra_body"], None, lambda v: False),
              ("--temperature", given["temperature"], None, lambda v: False),
              ("--top-p", given["top_p"], None, lambda v: False))
    changed = [flag for flag, value, default, same in checks if value != default and not same(value)]
    if changed:
        raise WorkloadError(f"--resume continues the run saved in {out} with its own settings; {', '.join(changed)} "
                            f"differ{'s' if len(changed) == 1 else ''} from it and would be ignored: drop "
                            f"{'it' if len(changed) == 1 else 'them'}, or start a new run in another --out")


@_checked
@documented(model="served_model", request_rate="bench_rate", concurrency="bench_concurrency",
            num_requests="bench_num_requests", out="out_dir")
def bench(url: str | None = None, model: str | None = None, *, endpoint: str = DEFAULT_ENDPOINT,
          request_rate: float | str | Sequence[float] | None = None,
          concurrency: int | str | Sequence[int] | None = None, arrival: str = "poisson", burstiness: float = 1.0,
          rescale_arrivals: bool = True, max_concurrency: int | None = None, num_requests: int | None = None,
          duration: float | None = None, warmup: int = 0, input_len: int = BENCH_INPUT_LEN,
          output_len: int = BENCH_OUTPUT_LEN, range_ratio: float = 0.0, dataset: PathLike | None = None,
          shared_prefix_len: int = 0, num_prefixes: int = 1, tokenizer: str | None = None,
          server_tokenizer: bool = True, sla: str | None = None, sweep: bool = False, sweep_steps: int = 4,
          out: PathLike | None = None, resume: bool = False, api_key: str | None = None,
          header: Sequence[str] | Mapping[str, str] | None = None, insecure: bool = False,
          ca_bundle: PathLike | None = None, extra_body: str | Mapping[str, Any] | None = None,
          temperature: float | None = None, top_p: float | None = None, timeout: float = BENCH_TIMEOUT_S,
          ignore_eos: bool = True, scrape: bool = True, seed: int = 0, predict: bool = False,
          gpu: str | None = None, tp: int = 1, engine: str = DEFAULT_ENGINE, weights: str | None = None,
          kv: str | None = None, model_config: str | None = None, enforce_eager: bool = False,
          async_scheduling: bool | None = None, cuda_graph_max_bs: int | None = None, moe_backend: str | None = None,
          pdl: bool = False, stream_interval: int | None = None, hardware_file: PathLike | None = None,
          attention_backend: str | None = None, parquet: bool = False, progress: Callable[[Any], None] | None = None,
          on_level: Callable[[Any], None] | None = None) -> BenchRun:
    """Load-test a real OpenAI-compatible server (`flopwise bench`): open loop at `request_rate` (requests/s) or
    closed loop at `concurrency`; several values sweep; `sweep=True` searches the highest rate meeting `sla`. Runs
    are saved in `out` (a sweep also gets latency_vs_throughput.svg). Credentials sent over plain HTTP to a remote
    host draw a `FlopwiseWarning`. `progress(p)`: called with the runner's `Progress` as requests finish;
    `on_level(report)`: as each level of a sweep ends. A run that is interrupted (SIGINT, SIGTERM) raises
    `flopwise.bench.runner.BenchInterrupted` with every finished request saved. Blocks until done: in a running
    event loop (Jupyter), `await flopwise.bench_async(...)`."""
    from flopwise.bench import options
    from flopwise.bench.export import request_rows, write_rows
    from flopwise.bench.redact import plaintext_credentials_warning
    from flopwise.bench.render import write_sweep_chart
    from flopwise.bench.runner import BenchConfig, PromptConfig, resume_bench, run_bench
    from flopwise.bench.store import load_run
    from flopwise.bench.sweep import find_max_rate, run_levels
    from flopwise.bench.tokenize import load_counter
    from flopwise.calibrate.predict import predict_run
    from flopwise.specs.sla import parse_sla

    text(endpoint, "--endpoint", choices=("completions", "chat"))
    number(timeout, "--timeout (s)", lo=0, lo_open=True)
    if num_requests is not None:
        integer(num_requests, "--num-requests", lo=1, hi=MAX_NUM_REQUESTS)
    if duration is not None:
        number(duration, "--duration (s)", lo=0, lo_open=True)
    if max_concurrency is not None:
        integer(max_concurrency, "--max-concurrency", lo=1)
    number(range_ratio, "--range-ratio", lo=0, hi=1, hi_open=True)
    for name, v, lo in (("--warmup", warmup, 0), ("--input-len", input_len, 1), ("--output-len", output_len, 1),
                        ("--shared-prefix-len", shared_prefix_len, 0), ("--num-prefixes", num_prefixes, 1),
                        ("--sweep-steps", sweep_steps, 0), ("--seed", seed, 0)):
        integer(v, name, lo=lo)
    if predict and not gpu:
        raise WorkloadError("--predict needs --gpu (a hardware id; see `flopwise hardware`)")
    if not predict and (gpu or model_config or weights or kv or tp != 1 or engine != DEFAULT_ENGINE or enforce_eager
                        or async_scheduling is not None or cuda_graph_max_bs is not None or moe_backend is not None
                        or pdl or stream_interval is not None or attention_backend is not None):
        raise WorkloadError("--gpu, --tp, --engine, --enforce-eager, --async-scheduling, --cuda-graph-max-bs, "
                            "--moe-backend, --pdl, --attention-backend, --stream-interval, --weights, --kv and "
                            "--model-config describe the deployment --predict simulates; add --predict or drop them")
    knobs: dict[str, Any] = {"engine": engine, "weights": weights, "kv": kv, "enforce_eager": enforce_eager,
                             "async_scheduling": async_scheduling, "cuda_graph_max_bs": cuda_graph_max_bs,
                             "moe_backend": moe_backend, "pdl": pdl, "stream_interval": stream_interval,
                             "attention_backend": attention_backend}
    if predict:  # a bad deployment is an error before the run, not after it
        assert gpu is not None
        if model_config is not None or model is not None:
            build_deployment(model_config or model, gpu, tp=tp, hardware_file=hardware_file,  # type: ignore[arg-type]
                             endpoint=endpoint, **knobs)
        else:  # the served model is asked of the server later: check what is known now
            hw = get_hardware(gpu, hardware_file)
            eng = engine_profile(engine)
            if enforce_eager:
                eng.eager()  # refused in one line where the engine has no eager mode
            if cuda_graph_max_bs is not None:
                integer(cuda_graph_max_bs, "cuda_graph_max_bs", lo=0)
            check_moe_backend(moe_backend, hw)
            if pdl:
                check_pdl(eng, hw)
            if stream_interval is not None:
                eng.with_stream_interval(stream_interval)  # refused in one line where the server has none
            if attention_backend is not None:
                eng.with_attention_backend(attention_backend)  # a name the engine does not take: one line, now
    if ca_bundle is not None:
        if not Path(ca_bundle).is_file():
            raise WorkloadError(f"--ca-bundle {ca_bundle}: no such file")
        options.check_ca_bundle(ca_bundle)
    if tokenizer:
        load_counter(tokenizer)  # a malformed tokenizer.json is an error before the run
    extra_headers = options.headers(header)
    body = options.extra_body(extra_body, temperature, top_p)
    out_dir = Path(out) if out is not None else Path("results") / time.strftime("bench-%Y%m%d-%H%M%S")
    if out_dir.exists() and not out_dir.is_dir():
        raise WorkloadError(f"--out '{out_dir}' is a file; give a directory for the run")
    if url is None and not resume:
        raise WorkloadError("pass --url http://HOST:PORT (or use `flopwise bench selftest` / `bench report DIR`)")
    # what can be told without the server, before asking it anything
    if sla is not None:
        parse_sla(sla)
    if sweep and not sla and not resume:
        raise WorkloadError("--sweep searches for the highest rate meeting an SLA; pass --sla too")
    if dataset is not None and not Path(dataset).is_file():
        raise WorkloadError(f"--dataset {dataset}: no such file")
    if resume and out is None:
        raise WorkloadError("--resume needs --out DIR (the run to continue)")
    if resume:
        _check_resume(out, options, model=model, endpoint=endpoint, request_rate=request_rate,
                      concurrency=concurrency, max_concurrency=max_concurrency, num_requests=num_requests,
                      duration=duration, warmup=warmup, input_len=input_len, output_len=output_len,
                      range_ratio=range_ratio, dataset=dataset, shared_prefix_len=shared_prefix_len,
                      num_prefixes=num_prefixes, sla=sla, seed=seed, timeout=timeout, ignore_eos=ignore_eos,
                      sweep=sweep, extra_body=extra_body, temperature=temperature, top_p=top_p)
    loads = [] if resume else options.loads(request_rate, concurrency, arrival, burstiness, max_concurrency,
                                            rescale_arrivals)
    if url is not None:
        options.check_url(url)
        warning = plaintext_credentials_warning(url, bool(api_key or extra_headers))
        if warning:
            warnings.warn(warning, FlopwiseWarning, stacklevel=2)
        options.preflight(url)
    max_rate = None
    if resume:
        reports = [resume_bench(out_dir, api_key=api_key, url=url, headers=extra_headers or None, progress=progress)]
        model = reports[0].config.model
    else:
        assert url is not None
        if model is None:
            model = options.served_model(url, options.http_kwargs(url, api_key, extra_headers, insecure, ca_bundle))
        cfg = BenchConfig(url=url, model=model, load=loads[0], endpoint=endpoint,  # type: ignore[arg-type]
                          num_requests=num_requests if num_requests or duration else BENCH_NUM_REQUESTS,
                          duration_s=duration, num_warmup=warmup, sla=sla, timeout_s=timeout, ignore_eos=ignore_eos,
                          scrape_metrics=scrape, seed=seed, headers=extra_headers, extra_body=body,
                          verify_tls=not insecure, ca_bundle=str(ca_bundle) if ca_bundle else None,
                          prompts=PromptConfig(input_len=input_len, output_len=output_len, range_ratio=range_ratio,
                                               dataset=str(dataset) if dataset else None,
                                               shared_prefix_len=shared_prefix_len, num_prefixes=num_prefixes,
                                               tokenizer=tokenizer, server_tokenizer=server_tokenizer))
        if sweep:
            res = find_max_rate(cfg, out_dir, steps=sweep_steps, api_key=api_key, on_level=on_level,
                                progress=progress)
            reports, max_rate = list(res.levels), res.max_rate_meeting_sla
        elif len(loads) > 1:
            reports = list(run_levels(cfg, loads, out_dir, api_key=api_key, on_level=on_level,
                                      progress=progress).levels)
        else:
            reports = [run_bench(cfg, out_dir, api_key=api_key, progress=progress)]
    dicts = [r.to_dict() for r in reports]
    predictions = []
    if predict:
        for d, r in zip(dicts, reports, strict=True):
            if r.summary["num_completed"]:
                p = predict_run(r, model=model_config or model, gpu=gpu, tp=tp,  # type: ignore[arg-type]
                                hardware_file=hardware_file, **knobs)
                predictions.append(p)
                d["prediction"] = p.to_dict()
    if parquet:
        for r in reports:
            write_rows(r.root / "requests.parquet", request_rows(load_run(r.root).records))
    if len(reports) > 1 and any(r.summary["num_completed"] for r in reports):
        write_sweep_chart(reports, out_dir / "latency_vs_throughput.svg")
    as_levels = sweep or len(reports) > 1
    summary = {"levels": dicts, "max_rate_meeting_sla": max_rate} if as_levels else dicts[0]
    return BenchRun(summary=summary, reports=tuple(reports), max_rate_meeting_sla=max_rate,
                    predictions=tuple(predictions))


@functools.wraps(bench)
async def bench_async(*args: Any, **kwargs: Any) -> BenchRun:
    """`bench` for code that runs in an event loop (Jupyter, an async pipeline): the run goes in a worker thread
    with an event loop of its own, and this coroutine returns its BenchRun."""
    return await asyncio.to_thread(bench, *args, **kwargs)


bench_async.__doc__ = (inspect.cleandoc(bench_async.__doc__ or "").split("\n\nParameters:")[0] + "\n\n"
                       + "`bench` for code that runs in an event loop (Jupyter, an async pipeline): the same "
                         "parameters, awaited; the run goes in a worker thread with its own event loop.")


# ------------------------------------------------------------------------------------------------ calibrate


@_checked
@documented(model="served", engine="calibrate_engine")
def calibrate(hardware: str, *, from_runs: Sequence[PathLike] | None = None, id: str | None = None,
              model: str | None = None, use: str | Sequence[str] = "kernels,steps,bench",
              params: str | Sequence[str] | None = None, max_num_seqs: int | None = None,
              max_num_batched_tokens: int | None = None, block_size: int | None = None, engine: str = DEFAULT_ENGINE,
              engine_out: PathLike | None = None, out: PathLike | None = None, dry_run: bool = False) -> Calibrated:
    """Fit a hardware entry's efficiency profile (`flopwise calibrate`) to microbenchmarks, model steps and bench
    runs; refuse the parameters the data cannot identify; write the fitted entry to `out` (default: back into the
    `hardware` file) and, with `engine_out`, the fitted engine CPU costs."""
    from flopwise.calibrate.api import run_calibration

    sources = ("kernels", "steps", "bench")
    kinds = _text_list(use, "--use") or ()
    bad = [k for k in kinds if k not in sources]
    if bad:
        raise WorkloadError(f"--use: unknown kind(s) {bad}; choose from {', '.join(sources)}")
    hw_path = Path(hardware)
    if hw_path.suffix.lower() in (".toml", ".yaml", ".yml", ".json") and not hw_path.is_file():
        raise WorkloadError(f"--hardware file '{hardware}' does not exist; write one with `flopwise profile --out "
                            f"{hardware}`, or give a catalog id")
    for opt, p in (("--out", out), ("--engine-out", engine_out)):
        if p is not None and not dry_run:
            output_path(p, opt)
    result = run_calibration(hardware, hw_id=id, runs=list(from_runs or []), model=model, kinds=kinds,
                             params=list(_text_list(params, "--params") or ()) or None,
                             knobs={"max_num_seqs": max_num_seqs, "max_num_batched_tokens": max_num_batched_tokens,
                                    "block_size": block_size, "engine": engine},
                             out=None if dry_run else out, default_out=not dry_run,
                             engine_out=None if dry_run else engine_out)
    return Calibrated(calibration=result.calibration,
                      hardware_file=str(result.written) if result.written else None,
                      engine_file=str(result.engine_written) if result.engine_written else None)

