"""`flopwise compare`: the trade-off ledger of optimization techniques against a baseline deployment."""

from __future__ import annotations

from typing import Annotated

import typer

from flopwise.cli import _app
from flopwise.cli._app import app, print_json, warn_model_notes
from flopwise.cli.options import Endpoint, Engine, Family, Frontend, Gpu, HardwareFile, Json, Kv, Model, Weights
from flopwise.params import HELP
from flopwise.specs.defaults import (
    COMPARE_NUM_REQUESTS,
    COMPARE_SLA,
    DEFAULT_ENDPOINT,
    DEFAULT_ENGINE,
    DEFAULT_GPU,
    DEFAULT_MODEL,
    FRONTEND_SERVING,
)


@app.command("compare")
def compare_cmd(
    tries: Annotated[list[str] | None, typer.Option("--try", help=HELP["tries"] + " Repeat for more rows. Default: "
                                                    "a narrower weight format, an FP8 KV cache, EAGLE speculation "
                                                    "and a 50% prefix-cache hit, each where it applies.")] = None,
    model: Model = DEFAULT_MODEL,
    gpu: Gpu = DEFAULT_GPU,
    tp: Annotated[int, typer.Option(help="Tensor-parallel degree of the baseline.")] = 1,
    weights: Weights = None,
    kv: Kv = None,
    workload: Annotated[str | None, typer.Option(help=HELP["compare_workload"])] = None,
    input_len: Annotated[int | None, typer.Option("--input-len", help=HELP["input_len"] + " Default: the workload's "
                                                  "mean, else 1024.")] = None,
    output_len: Annotated[int | None, typer.Option("--output-len", help=HELP["output_len"] + " Default: the "
                                                   "workload's mean, else 256.")] = None,
    batch: Annotated[int, typer.Option(help="Requests served together for the TTFT/TPOT columns.")] = 1,
    sla: Annotated[str | None, typer.Option(help="Objectives for the throughput column. Default: the --workload's "
                                                 f"SLA (as plan takes it), else {COMPARE_SLA}.")] = None,
    simulate: Annotated[bool, typer.Option(
        "--simulate/--static", help="Throughput at the SLA from the simulator (default) or from static "
                                    "batches only (fast).")] = True,
    num_requests: Annotated[int, typer.Option("--num-requests",
                                              help=HELP["compare_num_requests"])] = COMPARE_NUM_REQUESTS,
    hardware_file: HardwareFile = None,
    engine: Engine = DEFAULT_ENGINE,
    frontend: Frontend = FRONTEND_SERVING,
    endpoint: Endpoint = DEFAULT_ENDPOINT,
    family: Family = None,
    json_out: Json = False,
) -> None:
    """What each technique does to FLOPs, TTFT, TPOT, concurrency, throughput at an SLA, memory, accuracy
    risk and complexity, next to the baseline."""
    from flopwise.api import compare  # imported when the command runs: --help and other commands stay fast

    ledger = compare(tries, model, gpu, tp=tp, weights=weights, kv=kv, workload=workload, input_len=input_len,
                     output_len=output_len, batch=batch, sla=sla, simulate=simulate, num_requests=num_requests,
                     hardware_file=hardware_file, engine=engine, frontend=frontend, endpoint=endpoint, family=family)
    warn_model_notes(ledger.baseline.scenario.deployment)
    if json_out:
        print_json(ledger.to_dict())
        return
    from flopwise.report.compare_report import render_ledger

    render_ledger(_app.console, ledger)
