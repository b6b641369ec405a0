"""`flopwise bench`: measure a real OpenAI-compatible server; `bench selftest`; `bench report DIR`."""

from __future__ import annotations

import json
import math
import socket
import sys
import time
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import urlsplit

import httpx
import typer

from flopwise.bench.arrivals import Load
from flopwise.bench.export import load_vllm_result, records_from_vllm_result, request_rows, write_rows
from flopwise.bench.predict import predict_run
from flopwise.bench.redact import Redactor, plaintext_credentials_warning, redact_url, split_userinfo
from flopwise.bench.render import (render_comparison, render_levels, render_run, render_selftest,
                                   render_vllm_result, write_sweep_chart)
from flopwise.bench.runner import (BenchConfig, BenchInterrupted, Progress, PromptConfig, RunReport, exit_code,
                                   report_run, resume_bench, run_bench)
from flopwise.bench.selftest import selftest
from flopwise.bench.store import find_runs, load_run
from flopwise.bench.sweep import find_max_rate, run_levels
from flopwise.cli._app import app, console, err_console, print_json
from flopwise.errors import WorkloadError
from flopwise.metrics.summary import summarize
from flopwise.specs.sla import parse_sla

bench_app = typer.Typer(help="Measure a real OpenAI-compatible server (vLLM, SGLang, TGI, llama.cpp, ...).",
                        no_args_is_help=False)
app.add_typer(bench_app, name="bench")

_PREFLIGHT_TIMEOUT_S = 5.0


def _floats(text: str | None) -> list[float]:
    if not text:
        return []
    try:
        vals = [math.inf if p.strip() in ("inf", "max") else float(p) for p in text.split(",") if p.strip()]
    except ValueError:
        raise WorkloadError(f"cannot read '{text}'; write numbers separated by commas, e.g. 1,2,4 or inf") from None
    if any(math.isnan(v) for v in vals):
        raise WorkloadError(f"cannot read '{text}': nan is not a number of anything")
    return vals


def _ints(text: str, option: str) -> list[int]:
    out = []
    for v in _floats(text):
        if not math.isfinite(v) or v != int(v) or v < 1:
            raise WorkloadError(f"{option} takes whole numbers >= 1 (e.g. 1,4,16); got '{text}'")
        out.append(int(v))
    return out


def _loads(rate: str | None, concurrency: str | None, arrival: str, burstiness: float,
           max_concurrency: int | None, rescale: bool = False) -> list[Load]:
    """The load levels asked for. As in `vllm bench serve`, --burstiness alone (with the default Poisson
    arrivals) makes gamma arrivals of that shape, and an infinite burstiness constant gaps."""
    if rate and concurrency:
        raise WorkloadError("give --request-rate (open loop) or --concurrency (closed loop), not both; "
                            "use --max-concurrency to cap an open loop")
    if arrival not in ("poisson", "gamma", "constant"):
        raise WorkloadError(f"unknown --arrival '{arrival}'; use poisson, gamma or constant")
    if not burstiness > 0:
        raise WorkloadError(f"--burstiness must be > 0 (1 = Poisson); got {burstiness}")
    if concurrency:
        return [Load("concurrency", concurrency=c) for c in _ints(concurrency, "--concurrency")]
    if arrival == "poisson" and burstiness != 1.0:
        arrival = "gamma"
    if math.isinf(burstiness):
        arrival, burstiness = "constant", 1.0
    rates = _floats(rate) or [math.inf]
    return [Load(arrival, rate=r, burstiness=burstiness, max_concurrency=max_concurrency, rescale=rescale)  # type: ignore[arg-type]
            for r in rates]


def _check_url(url: str) -> None:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise WorkloadError(f"--url {redact_url(url)}: give an http:// or https:// URL with a host, "
                            "e.g. http://127.0.0.1:8000")
    try:
        parts.port  # noqa: B018 - raises for a bad port
    except ValueError:
        raise WorkloadError(f"--url {redact_url(url)}: the port is not a number in 0-65535") from None


def _headers(values: list[str] | None) -> dict[str, str]:
    out = {}
    for v in values or []:
        k, sep, val = v.partition(":")
        if not sep or not k.strip() or any(c in k for c in " \r\n") or any(c in val for c in "\r\n"):
            raise WorkloadError(f"--header '{v}': write NAME:VALUE, e.g. --header 'X-Team: infra'")
        out[k.strip()] = val.strip()
    return out


def _extra_body(text: str | None, temperature: float | None, top_p: float | None) -> dict[str, Any]:
    body: dict[str, Any] = {}
    if text:
        src = Path(text[1:]).read_text() if text.startswith("@") else text
        try:
            body = json.loads(src)
        except (OSError, ValueError) as e:
            raise WorkloadError(f"--extra-body: not a JSON object ({e}); e.g. --extra-body '{{\"top_k\": 20}}'") from None
        if not isinstance(body, dict):
            raise WorkloadError("--extra-body must be a JSON object, e.g. '{\"top_k\": 20}'")
    if temperature is not None:
        body["temperature"] = temperature
    if top_p is not None:
        body["top_p"] = top_p
    return body


def _http_kwargs(url: str, api_key: str | None, headers: dict[str, str], insecure: bool,
                 ca_bundle: Path | None) -> dict[str, Any]:
    clean, userinfo = split_userinfo(url)
    h = dict(headers)
    if api_key:
        h["Authorization"] = f"Bearer {api_key}"
    return {"headers": h, "auth": httpx.BasicAuth(*userinfo) if userinfo else None,
            "verify": False if insecure else (str(ca_bundle) if ca_bundle else True), "trust_env": False}


def _base(url: str) -> str:
    base = split_userinfo(url.rstrip("/"))[0]
    for suffix in ("/v1/completions", "/v1/chat/completions", "/v1"):
        base = base.removesuffix(suffix)
    return base


def _preflight(url: str) -> None:
    """Fail in seconds, before any measurement, when nothing listens at the URL."""
    parts = urlsplit(split_userinfo(url)[0])
    host, port = parts.hostname or "", parts.port or (443 if parts.scheme == "https" else 80)
    try:
        with socket.create_connection((host, port), timeout=_PREFLIGHT_TIMEOUT_S):
            pass
    except OSError as e:
        why = "timed out" if isinstance(e, TimeoutError) else (e.strerror or type(e).__name__)
        raise WorkloadError(f"nothing answers at {redact_url(url)} ({host}:{port}: {why}); start the server or "
                            "fix --url") from None


def _served_model(url: str, http: dict[str, Any]) -> str:
    """The first model the server lists at /v1/models."""
    base = _base(url)
    try:
        r = httpx.get(base + "/v1/models", timeout=10, **http)
        return str(r.json()["data"][0]["id"])
    except (httpx.HTTPError, ValueError, KeyError, IndexError, TypeError) as e:
        msg = Redactor([*(http["headers"].values())])(str(e))
        raise WorkloadError(f"--model not given and {redact_url(base)}/v1/models did not name one ({msg}); "
                            "pass --model") from e


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
    endpoint: Annotated[str, typer.Option(help="completions (/v1/completions) or chat (/v1/chat/completions).")] = "completions",
    request_rate: Annotated[str | None, typer.Option("--request-rate", help="Requests/s (open loop); a list sweeps; inf = burst.")] = None,
    concurrency: Annotated[str | None, typer.Option(help="Closed loop at this concurrency; a list (1,4,16) sweeps.")] = None,
    arrival: Annotated[str, typer.Option(help="Open-loop arrivals: poisson, gamma or constant.")] = "poisson",
    burstiness: Annotated[float, typer.Option(help="Gamma shape (1 = Poisson, < 1 burstier; with poisson arrivals it makes them gamma, as in vllm bench serve).")] = 1.0,
    rescale_arrivals: Annotated[bool, typer.Option("--rescale-arrivals/--no-rescale-arrivals", help="vllm bench serve's schedule: request N of N goes out at exactly N / rate.")] = True,
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
    server_tokenizer: Annotated[bool, typer.Option("--server-tokenizer/--no-server-tokenizer", help="Without --tokenizer, size prompts with the server's /tokenize when it offers one (vLLM).")] = True,
    sla: Annotated[str | None, typer.Option(help='Objectives, e.g. "p95_ttft<=300ms,p95_tpot<=50ms".')] = None,
    sweep: Annotated[bool, typer.Option(help="Search for the highest request rate meeting --sla.")] = False,
    sweep_steps: Annotated[int, typer.Option("--sweep-steps", help="Bisection runs after the capacity burst.")] = 4,
    out: Annotated[Path | None, typer.Option(help="Results directory (default results/bench-<time>).")] = None,
    resume: Annotated[bool, typer.Option(help="Continue the run saved in --out, skipping measured requests.")] = False,
    api_key: Annotated[str | None, typer.Option("--api-key", envvar="OPENAI_API_KEY", show_envvar=True,
                                                help="Bearer token (never saved).")] = None,
    header: Annotated[list[str] | None, typer.Option("--header", help="Extra request header NAME:VALUE (repeatable; values never saved).")] = None,
    insecure: Annotated[bool, typer.Option("--insecure", help="Skip TLS certificate checks (https).")] = False,
    ca_bundle: Annotated[Path | None, typer.Option("--ca-bundle", help="PEM file of CAs to trust (https).")] = None,
    extra_body: Annotated[str | None, typer.Option("--extra-body", help="JSON object (or @file) merged into every request body.")] = None,
    temperature: Annotated[float | None, typer.Option(help="Sampling temperature (default 0).")] = None,
    top_p: Annotated[float | None, typer.Option("--top-p", help="Nucleus sampling top_p.")] = None,
    timeout: Annotated[float, typer.Option(help="Per-request limit in seconds (also the read timeout).")] = 600.0,
    ignore_eos: Annotated[bool, typer.Option("--ignore-eos/--no-ignore-eos", help="Ask for exactly --output-len tokens (dropped if the server rejects it).")] = True,
    scrape: Annotated[bool, typer.Option("--scrape/--no-scrape", help="Scrape the server's /metrics.")] = True,
    seed: Annotated[int, typer.Option(help="Seed for prompts and arrivals.")] = 0,
    predict: Annotated[bool, typer.Option(help="Also simulate the measured workload and compare.")] = False,
    gpu: Annotated[str | None, typer.Option(help="Hardware id for --predict.")] = None,
    tp: Annotated[int, typer.Option(help="Tensor-parallel degree for --predict.")] = 1,
    model_config: Annotated[str | None, typer.Option("--model-config", help="Model for --predict: catalog id or config.json (default --model).")] = None,
    hardware_file: Annotated[Path | None, typer.Option("--hardware-file", help="Extra hardware TOML/YAML for --predict.")] = None,
    parquet: Annotated[bool, typer.Option("--parquet", help="Also write requests.parquet (needs pyarrow).")] = False,
    json_out: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """Load-test a server: open or closed loop, sweeps, SLA goodput, server metrics and a bottleneck diagnosis.

    TTFT and E2E are reported from the scheduled arrival (ttft_ms, e2e_ms: they include the client's send lag)
    and from the send (ttft_from_send_ms, e2e_from_send_ms: what vllm bench serve reports). SIGINT or SIGTERM
    stop the run with every finished request and summary.json saved."""
    if ctx.invoked_subcommand is not None:
        return
    if url is None and not resume:
        raise WorkloadError("pass --url http://HOST:PORT (or use `flopwise bench selftest` / `bench report DIR`)")
    if endpoint not in ("completions", "chat"):
        raise WorkloadError(f"unknown --endpoint '{endpoint}'; use completions or chat")
    if predict and not gpu:
        raise WorkloadError("--predict needs --gpu (a hardware id; see `flopwise hardware`)")
    if ca_bundle is not None and not ca_bundle.is_file():
        raise WorkloadError(f"--ca-bundle {ca_bundle}: no such file")
    headers = _headers(header)
    body = _extra_body(extra_body, temperature, top_p)
    progress = _ProgressLine() if sys.stderr.isatty() and not json_out else None
    out_dir = out or Path("results") / time.strftime("bench-%Y%m%d-%H%M%S")
    if url is not None:
        _check_url(url)
        warning = plaintext_credentials_warning(url, bool(api_key or headers))
        if warning:
            err_console.print(f"[bold yellow]warning:[/] {warning}")
        _preflight(url)
    if resume:
        if out is None:
            raise WorkloadError("--resume needs --out DIR (the run to continue)")
        reports = _interruptible(lambda: [resume_bench(out, api_key=api_key, url=url, headers=headers or None,
                                                       progress=progress)], out, json_out, progress)
        _finish(reports, None, json_out, None, False, url or str(out), out, parquet)
        return
    assert url is not None
    loads = _loads(request_rate, concurrency, arrival, burstiness, max_concurrency, rescale_arrivals)
    served = model or _served_model(url, _http_kwargs(url, api_key, headers, insecure, ca_bundle))
    cfg = BenchConfig(url=url, model=served, load=loads[0], endpoint=endpoint,  # type: ignore[arg-type]
                      num_requests=num_requests if num_requests or duration else 200, duration_s=duration,
                      num_warmup=warmup, sla=sla, timeout_s=timeout, ignore_eos=ignore_eos, scrape_metrics=scrape,
                      seed=seed, headers=headers, extra_body=body, verify_tls=not insecure,
                      ca_bundle=str(ca_bundle) if ca_bundle else None,
                      prompts=PromptConfig(input_len, output_len, range_ratio, str(dataset) if dataset else None,
                                           shared_prefix_len, num_prefixes, tokenizer, server_tokenizer))

    def on_level(r: RunReport) -> None:
        if progress is not None:
            progress.end()
        if not json_out:
            err_console.print(f"{r.config.load.label}: {r.summary['request_throughput']:.2f} req/s, p50 TTFT "
                              f"{r.summary['ttft_ms']['p50'] or 0:.0f} ms, SLA "
                              f"{'met' if r.summary.get('sla_met') else 'missed'}")

    max_rate = None
    if sweep:
        res = _interruptible(lambda: find_max_rate(cfg, out_dir, steps=sweep_steps, api_key=api_key,
                                                   on_level=on_level, progress=progress), out_dir, json_out, progress)
        reports, max_rate = list(res.levels), res.max_rate_meeting_sla
    elif len(loads) > 1:
        reports = list(_interruptible(lambda: run_levels(cfg, loads, out_dir, api_key=api_key, on_level=on_level,
                                                         progress=progress), out_dir, json_out, progress).levels)
    else:
        reports = [_interruptible(lambda: run_bench(cfg, out_dir, api_key=api_key, progress=progress), out_dir,
                                  json_out, progress)]
        if progress is not None:
            progress.end()
    predictions = None
    if predict and any(r.summary["num_completed"] for r in reports):
        predictions = [predict_run(r, model=model_config or served, gpu=gpu, tp=tp,  # type: ignore[arg-type]
                                   hardware_file=hardware_file) for r in reports if r.summary["num_completed"]]
    _finish(reports, max_rate, json_out, predictions, sweep or len(reports) > 1, url, out_dir, parquet)


def _finish(reports: list[RunReport], max_rate: float | None, json_out: bool, predictions: list | None,
            as_levels: bool, url: str, out_dir: Path, parquet: bool) -> None:
    if parquet:
        for r in reports:
            write_rows(r.root / "requests.parquet", request_rows(load_run(r.root).records))
    completed = any(r.summary["num_completed"] for r in reports)
    if len(reports) > 1 and completed:
        write_sweep_chart(reports, out_dir / "latency_vs_throughput.svg")
    if completed or json_out:
        _emit(reports, max_rate, json_out, predictions, as_levels)
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
    err_console.print(f"[bold red]error:[/] no request to {redact_url(url)} completed ({what}); check the URL, the "
                      f"served model name and the server log. The failed attempts are saved in {out_dir}.")
    raise typer.Exit(2)


def _interruptible(fn: Any, out_dir: Path, json_out: bool, progress: _ProgressLine | None) -> Any:
    """Run `fn`; on SIGINT / SIGTERM show (or print as JSON) what was measured, then exit 130 / 143."""
    try:
        return fn()
    except BenchInterrupted as e:
        if progress is not None:
            progress.end()
        reports = [report_run(d) for d in find_runs(out_dir)] if out_dir.exists() else [e.report]
        if json_out:
            print_json(_finite(reports[0].to_dict() if len(reports) == 1 else
                               {"levels": [r.to_dict() for r in reports], "max_rate_meeting_sla": None}))
        else:
            for r in reports:
                render_run(console, r)
        err_console.print(f"interrupted: every finished request is saved in {out_dir} (summary.json written); "
                          f"`flopwise bench report {out_dir}` summarises it, `--resume --out {out_dir}` continues")
        raise typer.Exit(exit_code(e.signum)) from None


def _finite(obj: Any) -> Any:
    """`obj` with non-finite floats as strings ("inf"), so that --json is valid JSON."""
    if isinstance(obj, float) and not math.isfinite(obj):
        return str(obj)
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_finite(v) for v in obj]
    return obj


def _emit(reports: list[RunReport], max_rate: float | None, json_out: bool, predictions: list | None = None,
          as_levels: bool = False) -> None:
    if json_out:
        dicts = [r.to_dict() for r in reports]
        for d, p in zip(dicts, predictions or []):
            d["prediction"] = p.to_dict()
        print_json(_finite({"levels": dicts, "max_rate_meeting_sla": max_rate} if as_levels else dicts[0]))
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
    run_dir: Annotated[Path, typer.Argument(help="A run directory, a sweep directory holding runs, or a "
                                                  "`vllm bench serve` result JSON.")],
    sla: Annotated[str | None, typer.Option(help="Objectives for a vLLM result's goodput (its own runs keep theirs).")] = None,
    parquet: Annotated[bool, typer.Option("--parquet", help="Also write requests.parquet (needs pyarrow).")] = False,
    json_out: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """Rebuild summaries, diagnosis, tables (and a sweep's latency-vs-throughput chart) from saved runs; or
    summarise a `vllm bench serve --save-result` JSON with flopwise's definitions."""
    if run_dir.is_file() and run_dir.suffix == ".json":
        d = load_vllm_result(run_dir)
        summary = summarize(records_from_vllm_result(d), parse_sla(sla) if sla else None,
                            duration_s=float(d.get("duration") or 0.0) or None)
        if json_out:
            print_json(_finite({"source": str(run_dir), "vllm": {k: v for k, v in d.items() if not isinstance(v, list)},
                                **summary}))
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
