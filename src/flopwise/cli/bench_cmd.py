"""`flopwise bench`: measure a real OpenAI-compatible server; `bench selftest`; `bench report DIR`."""

from __future__ import annotations

import sys
import time
import warnings
from pathlib import Path
from typing import Annotated, Any

import typer

from flopwise.bench.export import load_vllm_result, records_from_vllm_result, request_rows, write_rows
from flopwise.bench.options import whole_numbers
from flopwise.bench.redact import redact_url
from flopwise.bench.render import (
    render_comparison,
    render_levels,
    render_run,
    render_selftest,
    render_vllm_result,
    write_sweep_chart,
)
from flopwise.bench.runner import (
    BenchInterrupted,
    Progress,
    RunReport,
    exit_code,
    ignore_signals,
    report_run,
    signals_stay_ignored,
)
from flopwise.bench.selftest import selftest
from flopwise.bench.store import find_runs, json_safe, load_run
from flopwise.cli._app import app, console, err_console, print_json
from flopwise.cli.options import AsyncScheduling, AttentionBackend, CudaGraphMaxBs, Json, MoeBackend, Parquet, Pdl
from flopwise.errors import FlopwiseWarning
from flopwise.metrics.summary import summarize
from flopwise.results import BenchRun
from flopwise.specs.defaults import DEFAULT_ENGINE
from flopwise.specs.sla import parse_sla

bench_app = typer.Typer(help="Measure a real OpenAI-compatible server (vLLM, SGLang, TGI, llama.cpp, ...).",
                        no_args_is_help=False)
app.add_typer(bench_app, name="bench")


class _ProgressLine:
    """One self-rewriting line on a terminal's stderr: requests done, failures, current rate."""

    def __init__(self) -> None:
        self._shown = False

    def __call__(self, p: Progress) -> None:
        total = f"/{p.num_total}" if p.num_total else ""
        sys.stderr.write(f"\r{p.label}: {p.num_done}{total} done, {p.num_failed} failed, {p.rate:.2f} req/s, "
                         f"{p.elapsed_s:.0f} s   ")
        sys.stderr.flush()
        self._shown = True

    def end(self, _rep: Any = None) -> None:
        if self._shown:
            sys.stderr.write("\n")
            sys.stderr.flush()
            self._shown = False


@bench_app.callback(invoke_without_command=True)
def bench_cmd(
    ctx: typer.Context,
    url: Annotated[str | None, typer.Option(help="Server base URL, e.g. http://127.0.0.1:8000.")] = None,
    model: Annotated[str | None, typer.Option(help="Served model name (default: the first at /v1/models).")] = None,
    endpoint: Annotated[str, typer.Option(
        help="completions (/v1/completions) or chat (/v1/chat/completions).")] = "completions",
    request_rate: Annotated[str | None, typer.Option(
        "--request-rate", help="Requests/s (open loop); a list sweeps; inf = burst.")] = None,
    concurrency: Annotated[str | None, typer.Option(
        help="Closed loop at this concurrency; a list (1,4,16) sweeps.")] = None,
    arrival: Annotated[str, typer.Option(help="Open-loop arrivals: poisson, gamma or constant.")] = "poisson",
    burstiness: Annotated[float, typer.Option(
        help="Gamma shape (1 = Poisson, < 1 burstier; with poisson arrivals it makes them gamma, as in vllm "
             "bench serve).")] = 1.0,
    rescale_arrivals: Annotated[bool, typer.Option(
        "--rescale-arrivals/--no-rescale-arrivals", help="vllm bench serve's schedule: request N of N goes "
                                                         "out at exactly N / rate.")] = True,
    max_concurrency: Annotated[int | None, typer.Option(
        "--max-concurrency", help="Cap on in-flight requests of an open loop.")] = None,
    num_requests: Annotated[int | None, typer.Option("--num-requests", help="Measured requests per level.")] = None,
    duration: Annotated[float | None, typer.Option(help="Stop sending after this many seconds per level.")] = None,
    warmup: Annotated[int, typer.Option(help="Warm-up requests per level, sent first and excluded.")] = 0,
    input_len: Annotated[int, typer.Option("--input-len", help="Prompt tokens (random text).")] = 512,
    output_len: Annotated[int, typer.Option("--output-len", help="Output tokens (max_tokens with ignore_eos).")] = 128,
    range_ratio: Annotated[float, typer.Option("--range-ratio", help="Lengths uniform within +- this share.")] = 0.0,
    dataset: Annotated[Path | None, typer.Option(
        help="ShareGPT .json or .jsonl prompts instead of random text.")] = None,
    shared_prefix_len: Annotated[int, typer.Option(
        "--shared-prefix-len", help="Tokens of a shared prefix before each prompt.")] = 0,
    num_prefixes: Annotated[int, typer.Option("--num-prefixes", help="Distinct shared prefixes.")] = 1,
    tokenizer: Annotated[str | None, typer.Option(help="tokenizer.json (or its directory) for exact lengths.")] = None,
    server_tokenizer: Annotated[bool, typer.Option(
        "--server-tokenizer/--no-server-tokenizer", help="Without --tokenizer, size prompts with the "
                                                         "server's /tokenize when it offers one (vLLM).")] = True,
    sla: Annotated[str | None, typer.Option(help='Objectives, e.g. "p95_ttft<=300ms,p95_tpot<=50ms".')] = None,
    sweep: Annotated[bool, typer.Option(help="Search for the highest request rate meeting --sla.")] = False,
    sweep_steps: Annotated[int, typer.Option("--sweep-steps", help="Bisection runs after the capacity burst.")] = 4,
    out: Annotated[Path | None, typer.Option(help="Results directory (default results/bench-<time>).")] = None,
    resume: Annotated[bool, typer.Option(help="Continue the run saved in --out, skipping measured requests.")] = False,
    api_key: Annotated[str | None, typer.Option(
        "--api-key", envvar="OPENAI_API_KEY", show_envvar=True, help="Bearer token (never saved).")] = None,
    header: Annotated[list[str] | None, typer.Option(
        "--header", help="Extra request header NAME:VALUE (repeatable; values never saved).")] = None,
    insecure: Annotated[bool, typer.Option("--insecure", help="Skip TLS certificate checks (https).")] = False,
    ca_bundle: Annotated[Path | None, typer.Option("--ca-bundle", help="PEM file of CAs to trust (https).")] = None,
    extra_body: Annotated[str | None, typer.Option(
        "--extra-body", help="JSON object (or @file) merged into every request body.")] = None,
    temperature: Annotated[float | None, typer.Option(help="Sampling temperature (default 0).")] = None,
    top_p: Annotated[float | None, typer.Option("--top-p", help="Nucleus sampling top_p.")] = None,
    timeout: Annotated[float, typer.Option(help="Per-request limit in seconds (also the read timeout).")] = 600.0,
    ignore_eos: Annotated[bool, typer.Option(
        "--ignore-eos/--no-ignore-eos", help="Ask for exactly --output-len tokens (dropped if the server "
                                             "rejects it).")] = True,
    scrape: Annotated[bool, typer.Option("--scrape/--no-scrape", help="Scrape the server's /metrics.")] = True,
    seed: Annotated[int, typer.Option(help="Seed for prompts and arrivals.")] = 0,
    predict: Annotated[bool, typer.Option(help="Also simulate the measured workload and compare.")] = False,
    gpu: Annotated[str | None, typer.Option(help="Hardware id for --predict.")] = None,
    tp: Annotated[int, typer.Option(help="Tensor-parallel degree for --predict.")] = 1,
    engine: Annotated[str, typer.Option(
        help="Engine and version serving the run, for --predict (vllm, vllm@0.11, sglang, trtllm, "
             "llamacpp; see `flopwise engines`).")] = DEFAULT_ENGINE,
    weights: Annotated[str | None, typer.Option(
        help="Weight format the server runs, for --predict (default: the checkpoint's, else bf16).")] = None,
    kv: Annotated[str | None, typer.Option(help="KV-cache format the server runs, for --predict.")] = None,
    enforce_eager: Annotated[bool, typer.Option(
        "--enforce-eager", help="The server runs without CUDA graphs (vLLM --enforce-eager, SGLang "
                                "--disable-cuda-graph), for --predict.")] = False,
    async_scheduling: AsyncScheduling = None,
    cuda_graph_max_bs: CudaGraphMaxBs = None,
    moe_backend: MoeBackend = None,
    pdl: Pdl = False,
    attention_backend: AttentionBackend = None,
    stream_interval: Annotated[int | None, typer.Option(
        "--stream-interval", help="Tokens per streamed event the server sends after the first (vLLM / SGLang "
                                  "--stream-interval), for --predict.")] = None,
    model_config: Annotated[str | None, typer.Option(
        "--model-config", help="Model for --predict: catalog id or config.json (default --model).")] = None,
    hardware_file: Annotated[Path | None, typer.Option(
        "--hardware-file", help="Extra hardware TOML/YAML for --predict.")] = None,
    parquet: Parquet = False,
    json_out: Json = False,
) -> None:
    """Load-test a server: open or closed loop, sweeps, SLA goodput, server metrics and a bottleneck diagnosis.

    TTFT and E2E are reported from the scheduled arrival (ttft_ms, e2e_ms: they include the client's send lag)
    and from the send (ttft_from_send_ms, e2e_from_send_ms: what vllm bench serve reports). SIGINT or SIGTERM
    stop the run with every finished request and summary.json saved."""
    if ctx.invoked_subcommand is not None:
        return
    from flopwise.api import bench  # checks every value, then measures (the one implementation of a run)

    progress = _ProgressLine() if sys.stderr.isatty() and not json_out else None
    out_dir = out or Path("results") / time.strftime("bench-%Y%m%d-%H%M%S")

    def on_level(r: RunReport) -> None:
        if progress is not None:
            progress.end()
        if not json_out:
            s = r.summary
            verdict = f", SLA {'met' if s.get('sla_met') else 'missed'}" if s.get("sla") else ""
            err_console.print(f"{r.config.load.label}: {s['request_throughput']:.2f} req/s, p50 TTFT "
                              f"{s['ttft_ms']['p50'] or 0:.0f} ms{verdict}")

    def run() -> BenchRun:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", FlopwiseWarning)
            try:
                return bench(url, model, endpoint=endpoint, request_rate=request_rate, concurrency=concurrency,
                             arrival=arrival, burstiness=burstiness, rescale_arrivals=rescale_arrivals,
                             max_concurrency=max_concurrency, num_requests=num_requests, duration=duration,
                             warmup=warmup, input_len=input_len, output_len=output_len, range_ratio=range_ratio,
                             dataset=dataset, shared_prefix_len=shared_prefix_len, num_prefixes=num_prefixes,
                             tokenizer=tokenizer, server_tokenizer=server_tokenizer, sla=sla, sweep=sweep,
                             sweep_steps=sweep_steps, out=out if resume else out_dir, resume=resume,
                             api_key=api_key, header=header,
                             insecure=insecure, ca_bundle=ca_bundle, extra_body=extra_body,
                             temperature=temperature, top_p=top_p, timeout=timeout, ignore_eos=ignore_eos,
                             scrape=scrape, seed=seed, predict=predict, gpu=gpu, tp=tp, engine=engine, weights=weights,
                             kv=kv, model_config=model_config, enforce_eager=enforce_eager,
                             async_scheduling=async_scheduling, cuda_graph_max_bs=cuda_graph_max_bs,
                             moe_backend=moe_backend, pdl=pdl, attention_backend=attention_backend,
                             stream_interval=stream_interval, hardware_file=hardware_file, parquet=parquet,
                             progress=progress,
                             on_level=on_level)
            finally:
                for w in caught:
                    err_console.print(f"[bold yellow]warning:[/] {w.message}")

    result = _interruptible(run, out_dir, json_out, progress)
    if progress is not None:
        progress.end()
    reports = list(result.reports)
    as_levels = sweep or len(reports) > 1
    if any(r.summary["num_completed"] for r in reports) or json_out:
        _emit(reports, result.max_rate_meeting_sla, json_out, list(result.predictions), as_levels,
              result.to_dict())
    _fail_if_nothing_completed(reports, url or str(out_dir), out_dir)


def _fail_if_nothing_completed(reports: list[RunReport], url: str, out_dir: Path) -> None:
    """Every request failed (a server that is down, a wrong URL or model): the failures are counted and saved
    above; end with one line and a non-zero exit so scripts do not mistake the run for a measurement."""
    if any(r.summary["num_completed"] for r in reports):
        return
    kinds: dict[str, int] = {}
    for r in reports:
        for kind, n in r.summary.get("errors_by_kind", {}).items():
            kinds[kind] = kinds.get(kind, 0) + n
    what = ", ".join(f"{k} {n}" for k, n in sorted(kinds.items())) or "no requests sent"
    err_console.print(f"[bold red]error:[/] no request to {redact_url(url)} completed ({what}); check the URL, the "
                      f"served model name and the server log. The failed attempts are saved in {out_dir}.")
    raise typer.Exit(2)


def _interruptible(fn: Any, out_dir: Path, json_out: bool, progress: _ProgressLine | None) -> Any:
    """Run `fn`; on SIGINT / SIGTERM show (or print as JSON) what was measured, then exit 130 / 143."""
    try:
        with signals_stay_ignored():  # from the run's end to the exit: a second Ctrl-C cannot cut the summary
            return fn()
    except BenchInterrupted as e:
        ignore_signals()  # a second Ctrl-C must not cut the summary short, nor the exit after it
        if progress is not None:
            progress.end()
        reports = [report_run(d) for d in find_runs(out_dir)] if out_dir.exists() else [e.report]
        if json_out:
            print_json(json_safe(reports[0].to_dict() if len(reports) == 1 else
                               {"levels": [r.to_dict() for r in reports], "max_rate_meeting_sla": None}))
        else:
            for r in reports:
                render_run(console, r)
        err_console.print(f"interrupted: every finished request is saved in {out_dir} (summary.json written); "
                          f"`flopwise bench report {out_dir}` summarises it, `--resume --out {out_dir}` continues")
        raise typer.Exit(exit_code(e.signum)) from None


def _emit(reports: list[RunReport], max_rate: float | None, json_out: bool, predictions: list[Any] | None = None,
          as_levels: bool = False, summary: dict[str, Any] | None = None) -> None:
    """Print the run (`summary`: the --json object where the API made it, each level's prediction inside it)."""
    if json_out:
        if summary is None:
            dicts = [r.to_dict() for r in reports]
            summary = {"levels": dicts, "max_rate_meeting_sla": max_rate} if as_levels else dicts[0]
        print_json(json_safe(summary))
        return
    for r in reports if not as_levels else []:
        render_run(console, r)
    if as_levels:
        render_levels(console, reports, max_rate)
    for p in predictions or []:
        render_comparison(console, p)


@bench_app.command("selftest")
def selftest_cmd(
    concurrency: Annotated[str, typer.Option(help="Concurrency levels.")] = "1,64,256",
    ttft_ms: Annotated[float, typer.Option("--ttft-ms", help="Mock first-token delay.")] = 100.0,
    itl_ms: Annotated[float, typer.Option("--itl-ms", help="Mock inter-token delay.")] = 20.0,
    output_len: Annotated[int, typer.Option("--output-len", help="Tokens per request.")] = 32,
    json_out: Json = False,
) -> None:
    """Measure the client's own overhead against the built-in mock server (in its own process)."""
    levels = selftest(tuple(whole_numbers(concurrency, "--concurrency")), ttft_ms=ttft_ms, itl_ms=itl_ms,
                      output_len=output_len)
    if json_out:
        print_json({"mock": {"ttft_ms": ttft_ms, "itl_ms": itl_ms, "output_len": output_len},
                    "levels": [lv.to_dict() for lv in levels]})
    else:
        render_selftest(console, levels)


@bench_app.command("report")
def report_cmd(
    run_dir: Annotated[Path, typer.Argument(help="A run directory, a sweep directory holding runs, or a "
                                                  "`vllm bench serve` result JSON.")],
    sla: Annotated[str | None, typer.Option(
        help="Objectives for a vLLM result's goodput (its own runs keep theirs).")] = None,
    parquet: Parquet = False,
    json_out: Json = False,
) -> None:
    """Rebuild summaries, diagnosis, tables (and a sweep's latency-vs-throughput chart) from saved runs; or
    summarise a `vllm bench serve --save-result` JSON with flopwise's definitions."""
    if run_dir.is_file() and run_dir.suffix == ".json":
        d = load_vllm_result(run_dir)
        summary = summarize(records_from_vllm_result(d), parse_sla(sla) if sla else None,
                            duration_s=float(d.get("duration") or 0.0) or None).to_dict()
        if json_out:
            scalars = {k: v for k, v in d.items() if not isinstance(v, list)}
            print_json(json_safe({"source": str(run_dir), "vllm": scalars, **summary}))
        else:
            render_vllm_result(console, run_dir, d, summary)
        return
    reports = [report_run(d) for d in find_runs(run_dir)]
    if parquet:
        for r in reports:
            write_rows(r.root / "requests.parquet", request_rows(load_run(r.root).records))
    if len(reports) > 1:
        write_sweep_chart(reports, run_dir / "latency_vs_throughput.svg")
    _emit(reports, None, json_out, None, len(reports) > 1)
