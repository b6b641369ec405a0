"""`flopwise estimate`: static-batch roofline estimate of one deployment."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from flopwise.cli import _app
from flopwise.cli._app import app, print_json, warn_model_notes
from flopwise.params import HELP
from flopwise.specs.defaults import (
    DEFAULT_ENDPOINT,
    DEFAULT_ENGINE,
    DEFAULT_GPU,
    DEFAULT_INPUT_LEN,
    DEFAULT_MODEL,
    DEFAULT_OUTPUT_LEN,
    FRONTEND_ESTIMATE,
)


@app.command("estimate")
def estimate_cmd(
    model: Annotated[str, typer.Option(help=HELP["model"])] = DEFAULT_MODEL,
    gpu: Annotated[str, typer.Option(help=HELP["gpu"])] = DEFAULT_GPU,
    num_gpus: Annotated[int | None, typer.Option("--num-gpus", help=HELP["num_gpus"])] = None,
    tp: Annotated[int, typer.Option(help=HELP["tp"])] = 1,
    pp: Annotated[int, typer.Option(help=HELP["pp"])] = 1,
    dp: Annotated[int | None, typer.Option(help=HELP["dp"])] = None,
    ep: Annotated[int, typer.Option(help=HELP["ep"])] = 1,
    nodes: Annotated[int, typer.Option(help=HELP["nodes"])] = 1,
    expert_skew: Annotated[float, typer.Option(help=HELP["expert_skew"])] = 1.0,
    weights: Annotated[str | None, typer.Option(help=HELP["weights"])] = None,
    kv: Annotated[str | None, typer.Option(help=HELP["kv"])] = None,
    batch: Annotated[int, typer.Option(help=HELP["batch"])] = 1,
    input_len: Annotated[int, typer.Option("--input-len", help=HELP["input_len"])] = DEFAULT_INPUT_LEN,
    output_len: Annotated[int, typer.Option("--output-len", help=HELP["output_len"])] = DEFAULT_OUTPUT_LEN,
    engine: Annotated[str, typer.Option(help=HELP["engine"])] = DEFAULT_ENGINE,
    frontend: Annotated[str, typer.Option(
        help="none: the engine's offline benchmark (default); http: add its OpenAI API server.")] = FRONTEND_ESTIMATE,
    endpoint: Annotated[str, typer.Option(help=HELP["endpoint"])] = DEFAULT_ENDPOINT,
    gpu_memory_utilization: Annotated[float | None, typer.Option("--gpu-memory-utilization",
                                                                 help=HELP["gpu_memory_utilization"])] = None,
    engine_file: Annotated[Path | None, typer.Option("--engine-file", help=HELP["engine_file"])] = None,
    hardware_file: Annotated[Path | None, typer.Option("--hardware-file", help=HELP["hardware_file"])] = None,
    family: Annotated[str | None, typer.Option("--family", help=HELP["family"])] = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """Time, throughput and memory of a static batch: prefill vs decode, which roof binds, and why."""
    from flopwise.api import estimate  # imported when the command runs: --help and other commands stay fast

    result = estimate(model, gpu, batch=batch, input_len=input_len, output_len=output_len, tp=tp, pp=pp,
                      dp=dp, ep=ep, nodes=nodes, expert_skew=expert_skew,
                      num_gpus=num_gpus, weights=weights, kv=kv, gpu_memory_utilization=gpu_memory_utilization,
                      hardware_file=hardware_file, engine=engine, frontend=frontend, endpoint=endpoint,
                      engine_file=engine_file, family=family)
    warn_model_notes(result.deployment.model)
    if json_out:
        print_json(result.to_dict())
        return
    from flopwise.report.estimate_report import render_estimate

    render_estimate(_app.console, result)
