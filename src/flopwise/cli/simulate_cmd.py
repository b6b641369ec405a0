"""`flopwise simulate`: serve a request stream on a deployment with the vLLM v1 (or an SGLang-like, or a static)
scheduler."""

from __future__ import annotations

import csv
from contextlib import nullcontext
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from flopwise.api import DEFAULT_GPU, DEFAULT_MODEL, deployment
from flopwise.cli._app import app, console, err_console, print_json
from flopwise.errors import WorkloadError
from flopwise.sim import SimConfig, find_max_rate, simulate, vllm_server_defaults
from flopwise.sim.sglang_knobs import SglangKnobs
from flopwise.specs.hardware import get_hardware
from flopwise.specs.sla import parse_sla
from flopwise.workload import build_workload


def _rate(text: str | None) -> float | None:
    if text is None:
        return None
    try:
        v = float(text)
    except ValueError:
        raise WorkloadError(f"--request-rate must be a number or inf, got '{text}'") from None
    if not v > 0:
        raise WorkloadError(f"--request-rate must be > 0 (or inf), got {text}")
    return v


def _write_rows(path: Path, rows: list[dict[str, Any]]) -> None:
    if path.suffix.lower() == ".parquet":
        try:
            import pyarrow as pa
            import pyarrow.parquet as pq
        except ImportError:
            raise WorkloadError("writing .parquet needs pyarrow (pip install pyarrow); or write a .csv") from None
        pq.write_table(pa.Table.from_pylist(rows), path)
    elif path.suffix.lower() == ".csv":
        with path.open("w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(rows[0]))
            w.writeheader()
            w.writerows(rows)
    else:
        raise WorkloadError(f"--output '{path}': use a .csv or .parquet file name")


def _fmt(v: float | None, unit: str = "") -> str:
    return "-" if v is None else f"{v:,.1f}{unit}"


def _render(s: dict[str, Any]) -> None:
    st = s["setup"]
    console.print(f"[bold]{st['model']}[/] on {st['num_gpus']}x {st['gpu']} (tp={st['tp']}, replicas={st['replicas']}, "
                  f"{st['weights']}/{st['kv']} KV), scheduler {st['scheduler']}, max_num_seqs={st['max_num_seqs']}, "
                  f"max_num_batched_tokens={st['max_num_batched_tokens']}, KV pool {st['kv_capacity_tokens']:,} tokens")
    if s.get("speculative"):
        sp = s["speculative"]
        tok = sp["tokens_per_verified_decode"]
        console.print(f"speculative {st['speculative']}: {sp['verified_positions']} positions verified per decode, "
                      f"{'-' if tok is None else f'{tok:.2f}'} tokens emitted per verified decode "
                      f"(expected {sp['expected_tokens_per_step']:.2f})")
    if st.get("sglang"):
        console.print("sglang knobs: " + ", ".join(f"{k}={v}" for k, v in st["sglang"].items()))
    t = Table(title=f"{s['num_requests']} requests of '{st['workload']}' over {s['duration_s']:.1f} s")
    t.add_column("ms")
    for c in ("mean", "p50", "p90", "p95", "p99"):
        t.add_column(c, justify="right")
    for key in ("ttft_ms", "tpot_ms", "itl_ms", "e2e_ms", "queue_ms"):
        t.add_row(key.removesuffix("_ms"), *(_fmt(s[key][c]) for c in ("mean", "p50", "p90", "p95", "p99")))
    console.print(t)
    console.print(f"throughput {s['request_throughput']:.2f} req/s, {s['output_tokens_per_s']:,.0f} output tok/s; "
                  f"goodput {s['goodput']:.2f} req/s (SLA attainment {s['sla_attainment']:.1%}); "
                  f"preemptions {s['preemptions']}")
    console.print(f"running batch mean {s['running_batch']['mean']:.1f} (max {s['running_batch']['max']}); KV usage "
                  f"mean {s['kv_utilization']['mean']:.1%} (max {s['kv_utilization']['max']:.1%}); prefix-cache hits "
                  f"{s['prefix_cache_hit_rate']:.1%}; time in prefill {s['time_in_prefill_s']:.1f} s, decode "
                  f"{s['time_in_decode_s']:.1f} s; {s['num_steps']:,} steps simulated in {s['sim_wall_s']:.2f} s")
    if s.get("sla"):
        ok = "[green]met[/]" if s["sla_met"] else "[red]missed[/]"
        console.print(f"SLA {s['sla']}: {ok} " + ", ".join(f"{k} {'ok' if v else 'FAIL'}"
                                                          for k, v in s["sla_objectives_met"].items()))


@app.command("simulate")
def simulate_cmd(
    model: Annotated[str, typer.Option(help="Catalog id or alias, config.json path, or model directory.")] = DEFAULT_MODEL,
    gpu: Annotated[str, typer.Option(help="Hardware id (see `flopwise hardware`).")] = DEFAULT_GPU,
    num_gpus: Annotated[int | None, typer.Option("--num-gpus", help="GPUs in all; the multiple of tp*pp beyond one is replicas.")] = None,
    tp: Annotated[int, typer.Option(help="Tensor-parallel degree.")] = 1,
    pp: Annotated[int, typer.Option(help="Pipeline-parallel stages.")] = 1,
    weights: Annotated[str | None, typer.Option(help="Weight format (bf16, fp8, int4-awq, ...).")] = None,
    kv: Annotated[str | None, typer.Option(help="KV-cache format (bf16, fp8, ...).")] = None,
    gpu_memory_utilization: Annotated[float, typer.Option("--gpu-memory-utilization", help="vLLM's memory share.")] = 0.9,
    hardware_file: Annotated[Path | None, typer.Option("--hardware-file", help="TOML/YAML adding or overriding hardware.")] = None,
    max_num_seqs: Annotated[int | None, typer.Option("--max-num-seqs", help="Most running requests (default: vLLM serve's, 1024 on >=70 GiB GPUs other than A100, else 256).")] = None,
    max_num_batched_tokens: Annotated[int | None, typer.Option("--max-num-batched-tokens", help="Token budget per step (default: vLLM serve's, 8192 or 2048 as above).")] = None,
    block_size: Annotated[int, typer.Option("--block-size", help="Tokens per KV block.")] = 16,
    speculative: Annotated[str | None, typer.Option("--speculative", help="Speculative decoding with a stated acceptance, e.g. 'eagle,k=3,accepted=2.6', 'draft:llama-3.2-1b,k=4,alpha=0.7', 'ngram,k=4,alpha=0.5' (accepted = mean tokens per step; tree=W for tree drafts).")] = None,
    enable_prefix_caching: Annotated[bool, typer.Option("--enable-prefix-caching/--no-enable-prefix-caching", help="Prefix caching (vLLM v1: on).")] = True,
    enable_chunked_prefill: Annotated[bool, typer.Option("--enable-chunked-prefill/--no-enable-chunked-prefill", help="Chunked prefill (vLLM v1: on).")] = True,
    scheduler: Annotated[str, typer.Option(help="vllm (continuous batching, vLLM v1), sglang (SGLang: prefill-first steps, KV reserved for future output, retraction) or static (whole batches).")] = "vllm",
    # --scheduler sglang knobs (SGLang's flag names; see sim/sglang_knobs.py for their defaults)
    chunked_prefill_size: Annotated[int | None, typer.Option("--chunked-prefill-size", help="sglang: new tokens per prefill batch (default by GPU memory: 8192 on H100/H200).")] = None,
    max_prefill_tokens: Annotated[int, typer.Option("--max-prefill-tokens", help="sglang: prompt tokens per prefill batch.")] = 16384,
    max_running_requests: Annotated[int | None, typer.Option("--max-running-requests", help="sglang: most running requests (default from the KV pool, 2048-4096).")] = None,
    schedule_policy: Annotated[str, typer.Option("--schedule-policy", help="sglang: fcfs or lpm (longest cached prefix first).")] = "fcfs",
    schedule_conservativeness: Annotated[float, typer.Option("--schedule-conservativeness", help="sglang: scales the KV reserved for future output.")] = 1.0,
    enable_mixed_chunk: Annotated[bool, typer.Option("--enable-mixed-chunk", help="sglang: decodes join prefill steps.")] = False,
    request_rate: Annotated[str | None, typer.Option("--request-rate", help="Requests/s, or inf (all at once).")] = None,
    arrival: Annotated[str, typer.Option(help="Arrival process at --request-rate: poisson, gamma, constant.")] = "poisson",
    burstiness: Annotated[float, typer.Option(help="Gamma shape for --arrival gamma (1 = Poisson; CV = 1/sqrt).")] = 1.0,
    rescale_arrivals: Annotated[bool, typer.Option("--rescale-arrivals", help="vllm bench serve's schedule: request N of N arrives at exactly N / rate.")] = False,
    concurrency: Annotated[int | None, typer.Option(help="Closed loop: this many clients, each sending on completion.")] = None,
    num_requests: Annotated[int | None, typer.Option("--num-requests", help="Requests to simulate (default 1000, or the whole trace).")] = None,
    workload: Annotated[str | None, typer.Option(help="Named workload: chat, rag, code, summarize, batch.")] = None,
    input_len: Annotated[str | None, typer.Option("--input-len", help="Prompt tokens: N, uniform:LO:HI, normal:M:S, lognormal:MEDIAN:SIGMA, file:PATH.")] = None,
    output_len: Annotated[str | None, typer.Option("--output-len", help="Output tokens, same forms as --input-len.")] = None,
    trace: Annotated[Path | None, typer.Option(help="Trace: .jsonl, Azure .csv, or ShareGPT .json.")] = None,
    tokenizer: Annotated[Path | None, typer.Option(help="tokenizer.json to count ShareGPT tokens (default ~4 chars/token).")] = None,
    seed: Annotated[int, typer.Option(help="Random seed (lengths, prefixes, arrivals, speculative acceptance).")] = 0,
    sla: Annotated[str | None, typer.Option(help='Objectives, e.g. "p95_ttft<=300ms,p95_tpot<=50ms".')] = None,
    find_max_rate_: Annotated[bool, typer.Option("--find-max-rate", help="Bisect for the highest rate meeting --sla.")] = False,
    output: Annotated[Path | None, typer.Option("--output", help="Write per-request rows (.csv or .parquet).")] = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """Queueing, batching and KV capacity under a request stream: TTFT/TPOT/ITL percentiles, goodput, capacity."""
    hw = get_hardware(gpu, hardware_file)
    seqs_default, tokens_default = vllm_server_defaults(hw)
    dep = deployment(model, hw, tp=tp, pp=pp, num_gpus=num_gpus, weights=weights, kv=kv,
                     gpu_memory_utilization=gpu_memory_utilization, block_size=block_size,
                     max_num_seqs=max_num_seqs or seqs_default,
                     max_num_batched_tokens=max_num_batched_tokens or tokens_default, speculative=speculative)
    config = SimConfig(scheduler, enable_prefix_caching, enable_chunked_prefill,
                       SglangKnobs(chunked_prefill_size, max_prefill_tokens, max_running_requests, schedule_policy,
                                   schedule_conservativeness, enable_mixed_chunk), seed=seed)
    objectives = parse_sla(sla) if sla else None
    rate = _rate(request_rate)

    def workload_at(r: float | None):
        return build_workload(num_requests=num_requests, workload=workload, input_len=input_len,
                              output_len=output_len, request_rate=r, arrival=arrival, burstiness=burstiness,
                              concurrency=concurrency, trace=trace, tokenizer=tokenizer, seed=seed,
                              rescale_arrivals=rescale_arrivals)

    if find_max_rate_:
        if objectives is None:
            raise WorkloadError("--find-max-rate needs --sla, e.g. --sla \"p95_ttft<=300ms,p95_tpot<=50ms\"")
        if concurrency is not None:
            raise WorkloadError("--find-max-rate searches a request rate; drop --concurrency")
        with err_console.status("bisecting the request rate", spinner="dots") if not json_out else nullcontext():
            found = find_max_rate(dep, workload_at, objectives, config)
        result = found.result
        summary = result.summary()
        summary["max_rate"] = {"request_rate": found.rate, "upper_bound": found.upper_bound,
                               "probes": [{"request_rate": r, "sla_met": ok} for r, ok in found.probes]}
    else:
        wl = workload_at(rate)
        with Progress(TextColumn("simulating"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                      console=err_console, transient=True, disable=not err_console.is_terminal) as bar:
            task = bar.add_task("requests", total=wl.num_requests)
            result = simulate(dep, wl, config, sla=objectives, progress=lambda n: bar.advance(task, n))
        summary = result.summary()
    if output is not None:
        _write_rows(output, result.rows())
    if json_out:
        print_json(summary)
        return
    _render(summary)
    if find_max_rate_:
        console.print(f"[bold]max rate meeting the SLA: {summary['max_rate']['request_rate']:.3g} req/s[/] "
                      f"(throughput bound {summary['max_rate']['upper_bound']:.3g} req/s)")

