"""`flopwise compare`: the trade-off ledger of optimization techniques against a baseline deployment."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from flopwise.api import deployment
from flopwise.cli._app import FAMILY_HELP, app, console, print_json, warn_model_notes
from flopwise.specs.defaults import DEFAULT_ENDPOINT, DEFAULT_ENGINE, DEFAULT_GPU, DEFAULT_MODEL, FRONTEND_SERVING
from flopwise.errors import WorkloadError
from flopwise.report.compare_report import render_ledger
from flopwise.specs.sla import parse_sla
from flopwise.techniques.compare import compare, named_workload_shape
from flopwise.techniques.scenario import Scenario
from flopwise.techniques.sim_throughput import SimWorkload

DEFAULT_SLA = "p95_ttft<=2s,p95_tpot<=50ms"


@app.command("compare")
def compare_cmd(
    tries: Annotated[list[str], typer.Option("--try", help="A technique to compare, e.g. weights=int8, kv=fp8, "
                                              "spec=draft:llama-3.2-1b,k=4,alpha=0.7, spec=eagle,k=4,accepted=3.2, "
                                              "spec=ngram,k=4,alpha=0.5, prefix-cache=0.5, chunked-prefill=512, "
                                              "tp=2, gpu=h200, kv-heads=1, window=4096, attention=mla; combine "
                                              "with '+'. Repeat for more rows.")],
    model: Annotated[str, typer.Option(help="Catalog id or alias, config.json path, or model directory.")] = DEFAULT_MODEL,
    gpu: Annotated[str, typer.Option(help="Hardware id (see `flopwise hardware`).")] = DEFAULT_GPU,
    tp: Annotated[int, typer.Option(help="Tensor-parallel degree of the baseline.")] = 1,
    weights: Annotated[str | None, typer.Option(help="Baseline weight format (default: the checkpoint's own, else bf16).")] = None,
    kv: Annotated[str | None, typer.Option(help="Baseline KV-cache format.")] = None,
    workload: Annotated[str | None, typer.Option(help="Named workload (chat, code, rag, summarize, batch): its mean "
                                                 "lengths, and its stream for the simulated throughput.")] = None,
    input_len: Annotated[int | None, typer.Option("--input-len", help="Prompt tokens per request (default 1024).")] = None,
    output_len: Annotated[int | None, typer.Option("--output-len", help="Generated tokens per request (default 256).")] = None,
    batch: Annotated[int, typer.Option(help="Requests served together for the TTFT/TPOT columns.")] = 1,
    sla: Annotated[str, typer.Option(help="Objectives for the throughput column.")] = DEFAULT_SLA,
    simulate: Annotated[bool, typer.Option("--simulate/--static", help="Throughput at the SLA from the simulator "
                                           "(default) or from static batches only (fast).")] = True,
    num_requests: Annotated[int, typer.Option("--num-requests", help="Requests per simulated run.")] = 300,
    hardware_file: Annotated[Path | None, typer.Option("--hardware-file", help="TOML/YAML file adding or overriding hardware.")] = None,
    engine: Annotated[str, typer.Option(help="Serving engine and version, e.g. vllm, vllm@0.11, sglang, trtllm (see `flopwise engines`).")] = DEFAULT_ENGINE,
    frontend: Annotated[str, typer.Option(help="http: behind the engine's OpenAI API server; none: the engine alone.")] = FRONTEND_SERVING,
    endpoint: Annotated[str, typer.Option(help="completions or chat.")] = DEFAULT_ENDPOINT,
    family: Annotated[str | None, typer.Option("--family", help=FAMILY_HELP)] = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """What each technique does to FLOPs, TTFT, TPOT, concurrency, throughput at an SLA, memory, accuracy
    risk and complexity, next to the baseline."""
    shape = named_workload_shape(workload) if workload else None
    lin = input_len or (shape.input_len if shape else 1024)
    lout = output_len or (shape.output_len if shape else 256)
    if num_requests < 1:
        raise WorkloadError(f"--num-requests must be >= 1, got {num_requests}")
    dep = deployment(model, gpu, tp=tp, weights=weights, kv=kv, hardware_file=hardware_file, engine=engine,
                     frontend=frontend, endpoint=endpoint, family=family)
    warn_model_notes(dep.model)
    base = Scenario(dep, lin, lout, batch)
    named = workload if workload and input_len is None and output_len is None else None
    sim = SimWorkload(named, num_requests) if simulate else None
    ledger = compare(base, tries, parse_sla(sla), hardware_file, sim)
    if json_out:
        print_json(ledger.to_dict())
    else:
        render_ledger(console, ledger)
