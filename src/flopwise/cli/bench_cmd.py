"""`flopwise bench`: measure a real OpenAI-compatible server; `bench selftest`; `bench report DIR`."""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Annotated, Any

import httpx
import typer

from flopwise.bench.arrivals import Load
from flopwise.bench.predict import predict_run
from flopwise.bench.render import (render_comparison, render_levels, render_run, render_selftest,
                                   write_sweep_chart)
from flopwise.bench.runner import BenchConfig, PromptConfig, RunReport, report_run, resume_bench, run_bench
from flopwise.bench.selftest import selftest
from flopwise.bench.store import find_runs
from flopwise.bench.sweep import find_max_rate, run_levels
from flopwise.cli._app import app, console, err_console, print_json
from flopwise.errors import WorkloadError

bench_app = typer.Typer(help="Measure a real OpenAI-compatible server (vLLM, SGLang, TGI, llama.cpp, ...).",
                        no_args_is_help=False)
app.add_typer(bench_app, name="bench")


def _floats(text: str | None) -> list[float]:
    if not text:
        return []
    try:
        return [math.inf if p.strip() in ("inf", "max") else float(p) for p in text.split(",") if p.strip()]
    except ValueError:
        raise WorkloadError(f"cannot read '{text}'; write numbers separated by commas, e.g. 1,2,4 or inf") from None


def _loads(rate: str | None, concurrency: str | None, arrival: str, burstiness: float,
           max_concurrency: int | None) -> list[Load]:
    if rate and concurrency:
        raise WorkloadError("give --request-rate (open loop) or --concurrency (closed loop), not both; "
                            "use --max-concurrency to cap an open loop")
    if arrival not in ("poisson", "gamma", "constant"):
        raise WorkloadError(f"unknown --arrival '{arrival}'; use poisson, gamma or constant")
    if concurrency:
        return [Load("concurrency", concurrency=int(c)) for c in _floats(concurrency)]
    rates = _floats(rate) or [math.inf]
    return [Load(arrival, rate=r, burstiness=burstiness, max_concurrency=max_concurrency) for r in rates]  # type: ignore[arg-type]


def _served_model(url: str, api_key: str | None) -> str:
    """The first model the server lists at /v1/models."""
    base = url.rstrip("/").removesuffix("/v1")
    try:
        r = httpx.get(base + "/v1/models", timeout=10,
                      headers={"Authorization": f"Bearer {api_key}"} if api_key else None)
        return r.json()["data"][0]["id"]
    except (httpx.HTTPError, ValueError, KeyError, IndexError) as e:
        raise WorkloadError(f"--model not given and {base}/v1/models did not name one ({e}); pass --model") from e


@bench_app.callback(invoke_without_command=True)
def bench_cmd(
    ctx: typer.Context,
    url: Annotated[str | None, typer.Option(help="Server base URL, e.g. http://127.0.0.1:8000.")] = None,
    model: Annotated[str | None, typer.Option(help="Served model name (default: the first at /v1/models).")] = None,
    endpoint: Annotated[str, typer.Option(help="completions (/v1/completions) or chat (/v1/chat/completions).")] = "completions",
    request_rate: Annotated[str | None, typer.Option("--request-rate", help="Requests/s (open loop); a list sweeps; inf = burst.")] = None,
    concurrency: Annotated[str | None, typer.Option(help="Closed loop at this concurrency; a list (1,4,16) sweeps.")] = None,
    arrival: Annotated[str, typer.Option(help="Open-loop arrivals: poisson, gamma or constant.")] = "poisson",
    burstiness: Annotated[float, typer.Option(help="Gamma shape (1 = Poisson, < 1 burstier).")] = 1.0,
    max_concurrency: Annotated[int | None, typer.Option("--max-concurrency", help="Cap on in-flight requests of an open loop.")] = None,
    num_requests: Annotated[int | None, typer.Option("--num-requests", help="Measured requests per level.")] = None,
    duration: Annotated[float | None, typer.Option(help="Stop sending after this many seconds per level.")] = None,
    warmup: Annotated[int, typer.Option(help="Warm-up requests per level, sent first and excluded.")] = 0,
    input_len: Annotated[int, typer.Option("--input-len", help="Prompt tokens (random text).")] = 512,
    output_len: Annotated[int, typer.Option("--output-len", help="Output tokens (max_tokens with ignore_eos).")] = 128,
    range_ratio: Annotated[float, typer.Option("--range-ratio", help="Lengths uniform within +- this share.")] = 0.0,
    dataset: Annotated[Path | None, typer.Option(help="ShareGPT .json or .jsonl prompts instead of random text.")] = None,
    shared_prefix_len: Annotated[int, typer.Option("--shared-prefix-len", help="Tokens of a shared prefix before each prompt.")] = 0,
    num_prefixes: Annotated[int, typer.Option("--num-prefixes", help="Distinct shared prefixes.")] = 1,
    tokenizer: Annotated[str | None, typer.Option(help="tokenizer.json (or its directory) for exact lengths.")] = None,
    sla: Annotated[str | None, typer.Option(help='Objectives, e.g. "p95_ttft<=300ms,p95_tpot<=50ms".')] = None,
    sweep: Annotated[bool, typer.Option(help="Search for the highest request rate meeting --sla.")] = False,
    sweep_steps: Annotated[int, typer.Option("--sweep-steps", help="Bisection runs after the capacity burst.")] = 4,
    out: Annotated[Path | None, typer.Option(help="Results directory (default results/bench-<time>).")] = None,
    resume: Annotated[bool, typer.Option(help="Continue the run saved in --out, skipping measured requests.")] = False,
    api_key: Annotated[str | None, typer.Option("--api-key", envvar="OPENAI_API_KEY", show_envvar=True,
                                                help="Bearer token (never saved).")] = None,
    timeout: Annotated[float, typer.Option(help="Per-request limit in seconds (also the read timeout).")] = 600.0,
    ignore_eos: Annotated[bool, typer.Option("--ignore-eos/--no-ignore-eos", help="Ask for exactly --output-len tokens.")] = True,
    scrape: Annotated[bool, typer.Option("--scrape/--no-scrape", help="Scrape the server's /metrics.")] = True,
    seed: Annotated[int, typer.Option(help="Seed for prompts and arrivals.")] = 0,
    predict: Annotated[bool, typer.Option(help="Also simulate the measured workload and compare.")] = False,
    gpu: Annotated[str | None, typer.Option(help="Hardware id for --predict.")] = None,
    tp: Annotated[int, typer.Option(help="Tensor-parallel degree for --predict.")] = 1,
    model_config: Annotated[str | None, typer.Option("--model-config", help="Model for --predict: catalog id or config.json (default --model).")] = None,
    hardware_file: Annotated[Path | None, typer.Option("--hardware-file", help="Extra hardware TOML/YAML for --predict.")] = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """Load-test a server: open or closed loop, sweeps, SLA goodput, server metrics and a bottleneck diagnosis."""
    if ctx.invoked_subcommand is not None:
        return
    if url is None and not resume:
        raise WorkloadError("pass --url http://HOST:PORT (or use `flopwise bench selftest` / `bench report DIR`)")
    if predict and not gpu:
        raise WorkloadError("--predict needs --gpu (a hardware id; see `flopwise hardware`)")
    out_dir = out or Path("results") / time.strftime("bench-%Y%m%d-%H%M%S")
    if resume:
        if out is None:
            raise WorkloadError("--resume needs --out DIR (the run to continue)")
        reports = [_interruptible(lambda: resume_bench(out, api_key=api_key), out)]
        _emit(reports, None, json_out)
        return
    loads = _loads(request_rate, concurrency, arrival, burstiness, max_concurrency)
    served = model or _served_model(url, api_key)  # type: ignore[arg-type]
    cfg = BenchConfig(url=url, model=served, load=loads[0], endpoint=endpoint,  # type: ignore[arg-type]
                      num_requests=num_requests if num_requests or duration else 200, duration_s=duration,
                      num_warmup=warmup, sla=sla, timeout_s=timeout, ignore_eos=ignore_eos, scrape_metrics=scrape,
                      seed=seed, prompts=PromptConfig(input_len, output_len, range_ratio, str(dataset) if dataset else None,
                                                      shared_prefix_len, num_prefixes, tokenizer))
    progress = None if json_out else (lambda r: err_console.print(
        f"{r.config.load.label}: {r.summary['request_throughput']:.2f} req/s, p50 TTFT "
        f"{r.summary['ttft_ms']['p50'] or 0:.0f} ms, SLA {'met' if r.summary.get('sla_met') else 'missed'}"))
    max_rate = None
    if sweep:
        res = _interruptible(lambda: find_max_rate(cfg, out_dir, steps=sweep_steps, api_key=api_key,
                                                   on_level=progress), out_dir)
        reports, max_rate = list(res.levels), res.max_rate_meeting_sla
    elif len(loads) > 1:
        reports = list(_interruptible(lambda: run_levels(cfg, loads, out_dir, api_key=api_key), out_dir).levels)
    else:
        reports = [_interruptible(lambda: run_bench(cfg, out_dir, api_key=api_key), out_dir)]
    predictions = None
    if predict:
        predictions = [predict_run(r, model=model_config or served, gpu=gpu, tp=tp,  # type: ignore[arg-type]
                                   hardware_file=hardware_file) for r in reports]
    if len(reports) > 1:
        write_sweep_chart(reports, out_dir / "latency_vs_throughput.svg")
    _emit(reports, max_rate, json_out, predictions, sweep or len(reports) > 1)
    _fail_if_nothing_completed(reports, url, out_dir)


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
    err_console.print(f"[bold red]error:[/] no request to {url} completed ({what}); check the URL, the served "
                      f"model name and the server log. The failed attempts are saved in {out_dir}.")
    raise typer.Exit(2)


def _interruptible(fn: Any, out_dir: Path) -> Any:
    try:
        return fn()
    except KeyboardInterrupt:
        err_console.print(f"interrupted: every finished request is saved in {out_dir}; "
                          f"`flopwise bench report {out_dir}` summarises it, `--resume --out {out_dir}` continues")
        raise typer.Exit(130) from None


def _emit(reports: list[RunReport], max_rate: float | None, json_out: bool, predictions: list | None = None,
          as_levels: bool = False) -> None:
    if json_out:
        dicts = [r.to_dict() for r in reports]
        for d, p in zip(dicts, predictions or []):
            d["prediction"] = p.to_dict()
        print_json({"levels": dicts, "max_rate_meeting_sla": max_rate} if as_levels else dicts[0])
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
    json_out: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """Measure the client's own overhead against the built-in mock server (in its own process)."""
    levels = selftest(tuple(int(c) for c in _floats(concurrency)), ttft_ms=ttft_ms, itl_ms=itl_ms,
                      output_len=output_len)
    if json_out:
        print_json({"mock": {"ttft_ms": ttft_ms, "itl_ms": itl_ms, "output_len": output_len},
                    "levels": [lv.to_dict() for lv in levels]})
    else:
        render_selftest(console, levels)


@bench_app.command("report")
def report_cmd(
    run_dir: Annotated[Path, typer.Argument(help="A run directory, or a sweep directory holding runs.")],
    json_out: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """Rebuild summaries, diagnosis, tables (and a sweep's latency-vs-throughput chart) from saved runs."""
    reports = [report_run(d) for d in find_runs(run_dir)]
    if len(reports) > 1:
        write_sweep_chart(reports, run_dir / "latency_vs_throughput.svg")
    _emit(reports, None, json_out, None, len(reports) > 1)
