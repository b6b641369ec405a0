"""`flopwise plan`: the deployments that serve a workload within an SLA with the most goodput per GPU (or
throughput, or per dollar, or per-user speed at one load), with intervals, why, and how to launch them."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.progress import Progress

from flopwise.cli._app import app, console, err_console, print_json
from flopwise.cli.options import (
    AsyncScheduling,
    AttentionBackend,
    CudaGraphMaxBs,
    EnforceEager,
    Json,
    MoeBackend,
    Pdl,
)
from flopwise.params import HELP
from flopwise.plan.search import OBJECTIVES
from flopwise.report.plan_report import render_plan
from flopwise.specs.defaults import (
    DEFAULT_ENGINE,
    DEFAULT_MODEL,
    DEFAULT_WORKLOAD,
    PLAN_GPUS,
    PLAN_KV,
    PLAN_MAX_GPUS,
    PLAN_WEIGHTS,
)


@app.command("plan")
def plan_cmd(
    model: Annotated[str, typer.Option(help=HELP["model"])] = DEFAULT_MODEL,
    gpus: Annotated[str, typer.Option("--gpus", "--gpu", help="Comma-separated hardware ids to consider (--gpu, the "
                                      "other commands' spelling, works too).")] = ",".join(PLAN_GPUS),
    max_gpus: Annotated[int, typer.Option("--max-gpus", help="Most GPUs one replica may use.")] = PLAN_MAX_GPUS,
    workload: Annotated[str, typer.Option(
        help="Named workload: chat, rag, code, summarize, batch, sharegpt (sets the default SLA and "
             "objective).")] = DEFAULT_WORKLOAD,
    trace: Annotated[Path | None, typer.Option(
        help="Plan for a recorded trace (.jsonl, Azure .csv, ShareGPT .json): its lengths, and its mean rate "
             "as --rate.")] = None,
    input_len: Annotated[int | None, typer.Option(
        "--input-len", help="Fixed prompt tokens (overrides the workload).")] = None,
    output_len: Annotated[int | None, typer.Option(
        "--output-len", help="Fixed output tokens (overrides the workload).")] = None,
    rate: Annotated[float | None, typer.Option(
        help="Total requests/s to serve (sizes the replicas; the latency objective's load).")] = None,
    sla: Annotated[str | None, typer.Option(
        help='Objectives, e.g. "p95_ttft<=300ms,p95_tpot<=50ms", or none (default: the workload\'s).')] = None,
    objective: Annotated[str | None, typer.Option(
        help=f"One of {', '.join(OBJECTIVES)} (default: the workload's).")] = None,
    tp: Annotated[str | None, typer.Option(
        help="Pin TP degrees, e.g. 1,2,4 (default: every degree up to --max-gpus).")] = None,
    weights: Annotated[str | None, typer.Option(
        help=f"Weight formats to try (default: {','.join(PLAN_WEIGHTS)}, each where the GPU runs it natively, or "
             "a pre-quantized checkpoint's format and the narrower of those).")] = None,
    kv: Annotated[str, typer.Option(help="KV formats to try.")] = PLAN_KV,
    max_num_seqs: Annotated[str | None, typer.Option(
        "--max-num-seqs", help="Values to try (default: the engine's for each GPU).")] = None,
    max_num_batched_tokens: Annotated[str | None, typer.Option(
        "--max-num-batched-tokens", help="Values to try (default: the engine's).")] = None,
    engine: Annotated[str, typer.Option(
        help="Serving engine and version, e.g. vllm, vllm@0.11, sglang, trtllm (see `flopwise "
             "engines`).")] = DEFAULT_ENGINE,
    prefix_caching: Annotated[str, typer.Option("--prefix-caching", help="on, off, or both")] = "on",
    speculative: Annotated[list[str] | None, typer.Option(
        "--speculative", help="Speculative decoding to try, with a stated acceptance: "
                              "'eagle3,k=3,accepted=2.6', 'draft:llama-3.2-1b,k=4,alpha=0.7', "
                              "'ngram,k=4,alpha=0.5', or 'none'. Repeat for more (default: none).")] = None,
    num_requests: Annotated[int | None, typer.Option(
        "--num-requests", help="Smallest measured window per probe, in requests (default: the sustained-rate "
                               "rule's, 400 or more).")] = None,
    max_effort: Annotated[float, typer.Option(
        "--max-effort", help="Largest window multiple spent on candidates whose intervals overlap the "
                             "leader's (2, 4, ...).")] = 2.0,
    seed: Annotated[int, typer.Option(help="Random seed of the request stream (common to every candidate).")] = 0,
    hardware_file: Annotated[Path | None, typer.Option(
        "--hardware-file", help="TOML/YAML adding or overriding hardware.")] = None,
    serving: Annotated[str, typer.Option(
        "--serving", help="aggregated (the search above), or aggregated,disaggregated: also compare "
                          "fleets of --max-gpus GPUs of the first --gpus type, aggregated replicas "
                          "vs prefill/decode pools, each at its highest rate meeting --sla.")] = "aggregated",
    moe_layouts: Annotated[str, typer.Option("--moe-layouts", help=HELP["moe_layouts"])] = "tp,dep",
    enforce_eager: EnforceEager = False,
    async_scheduling: AsyncScheduling = None,
    cuda_graph_max_bs: CudaGraphMaxBs = None,
    moe_backend: MoeBackend = None,
    pdl: Pdl = False,
    attention_backend: AttentionBackend = None,
    api_servers: Annotated[str | None, typer.Option("--api-servers", help=HELP["plan_api_servers"])] = None,
    stream_intervals: Annotated[str | None, typer.Option("--stream-intervals",
                                                         help=HELP["plan_stream_intervals"])] = None,
    html_out: Annotated[Path | None, typer.Option("--html", help="Write a self-contained HTML report here.")] = None,
    json_out: Json = False,
) -> None:
    """Search GPUs, parallelism, formats, engine knobs and speculative decoding for the most goodput per GPU (or
    throughput, dollar, or per-user speed at one load) inside an SLA, with intervals and ties."""
    from flopwise.api import plan  # checks every value before the search (flopwise.validate)

    kw: dict[str, Any] = dict(gpus=gpus, max_gpus=max_gpus, workload=workload, trace=trace, input_len=input_len,
                              output_len=output_len,
                              rate=rate, sla=sla, objective=objective, tp=tp, weights=weights, kv=kv,
                              max_num_seqs=max_num_seqs, max_num_batched_tokens=max_num_batched_tokens, engine=engine,
                              prefix_caching=prefix_caching, speculative=speculative, num_requests=num_requests,
                              max_effort=max_effort, seed=seed, hardware_file=hardware_file, html=html_out,
                              serving=serving, moe_layouts=moe_layouts, enforce_eager=enforce_eager,
                              async_scheduling=async_scheduling, cuda_graph_max_bs=cuda_graph_max_bs,
                              moe_backend=moe_backend, pdl=pdl, api_servers=api_servers,
                              stream_intervals=stream_intervals, attention_backend=attention_backend)
    if err_console.is_terminal and not json_out:
        with Progress(console=err_console, transient=True) as bar:
            task = bar.add_task("planning", total=None)
            d = plan(model, progress=lambda done, total: bar.update(task, completed=done, total=total), **kw).summary
    else:
        d = plan(model, **kw).summary
    if json_out:
        print_json(d)
    else:
        render_plan(console, dict(d))
        if html_out:
            console.print(f"HTML report: {html_out}")

