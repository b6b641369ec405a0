"""`flopwise estimate`: static-batch roofline estimate of one deployment."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from flopwise.api import estimate
from flopwise.cli._app import FAMILY_HELP, app, console, print_json, warn_model_notes
from flopwise.specs.defaults import (DEFAULT_ENDPOINT, DEFAULT_ENGINE, DEFAULT_GPU, DEFAULT_INPUT_LEN, DEFAULT_MODEL,
                                     DEFAULT_OUTPUT_LEN, FRONTEND_ESTIMATE)
from flopwise.report.estimate_report import render_estimate


@app.command("estimate")
def estimate_cmd(
    model: Annotated[str, typer.Option(help="Catalog id or alias, config.json path, or model directory.")] = DEFAULT_MODEL,
    gpu: Annotated[str, typer.Option(help="Hardware id (see `flopwise hardware`).")] = DEFAULT_GPU,
    num_gpus: Annotated[int | None, typer.Option("--num-gpus", help="GPUs in all; a multiple of tp*pp (the rest are replicas).")] = None,
    tp: Annotated[int, typer.Option(help="Tensor-parallel degree.")] = 1,
    pp: Annotated[int, typer.Option(help="Pipeline-parallel stages.")] = 1,
    weights: Annotated[str | None, typer.Option(help="Weight format: bf16, fp16, fp8, fp8-block, int8, int8-w8a8, int4-awq, int4-gptq, w4a8, nvfp4, mxfp4, mxfp4-moe, nf4, q8_0, q4_0, q4_k_m. Default: the checkpoint's own (its quantization_config), else bf16.")] = None,
    kv: Annotated[str | None, typer.Option(help="KV-cache format: bf16, fp16, fp8, int8, int4.")] = None,
    batch: Annotated[int, typer.Option(help="Requests in the static batch.")] = 1,
    input_len: Annotated[int, typer.Option("--input-len", help="Prompt tokens per request.")] = DEFAULT_INPUT_LEN,
    output_len: Annotated[int, typer.Option("--output-len", help="Generated tokens per request.")] = DEFAULT_OUTPUT_LEN,
    engine: Annotated[str, typer.Option(help="Serving engine and version: vllm, vllm@0.11, sglang@0.4, trtllm@0.17, llamacpp (see `flopwise engines`).")] = DEFAULT_ENGINE,
    frontend: Annotated[str, typer.Option(help="none: the engine's offline benchmark (default); http: add its OpenAI API server.")] = FRONTEND_ESTIMATE,
    endpoint: Annotated[str, typer.Option(help="With --frontend http: completions or chat.")] = DEFAULT_ENDPOINT,
    gpu_memory_utilization: Annotated[float | None, typer.Option("--gpu-memory-utilization", help="The engine's memory fraction (vLLM: share of the device; SGLang: --mem-fraction-static; TensorRT-LLM: share of free memory). Default: the engine's.")] = None,
    engine_file: Annotated[Path | None, typer.Option("--engine-file", help="Engine override written by `flopwise calibrate --engine-out` (calibrated CPU costs).")] = None,
    hardware_file: Annotated[Path | None, typer.Option("--hardware-file", help="TOML/YAML file adding or overriding hardware.")] = None,
    family: Annotated[str | None, typer.Option("--family", help=FAMILY_HELP)] = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """Time, throughput and memory of a static batch: prefill vs decode, which roof binds, and why."""
    result = estimate(model, gpu, batch=batch, input_len=input_len, output_len=output_len, tp=tp, pp=pp,
                      num_gpus=num_gpus, weights=weights, kv=kv, gpu_memory_utilization=gpu_memory_utilization,
                      hardware_file=hardware_file, engine=engine, frontend=frontend, endpoint=endpoint,
                      engine_file=engine_file, family=family)
    warn_model_notes(result.deployment.model)
    if json_out:
        print_json(result.to_dict())
    else:
        render_estimate(console, result)
