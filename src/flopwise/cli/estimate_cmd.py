"""`flopwise estimate`: static-batch roofline estimate of one deployment."""

from __future__ import annotations

from typing import Annotated

import typer

from flopwise.cli import _app
from flopwise.cli._app import app, print_json, warn_model_notes
from flopwise.cli.options import (
    AsyncScheduling,
    AttentionBackend,
    CudaGraphMaxBs,
    Dp,
    Endpoint,
    EnforceEager,
    Engine,
    EngineFile,
    Ep,
    ExpertSkew,
    Family,
    Gpu,
    GpuMemoryUtilization,
    HardwareFile,
    InputLen,
    Json,
    Kv,
    Model,
    MoeBackend,
    Nodes,
    NumGpus,
    OutputLen,
    Pdl,
    Pp,
    Tp,
    TwoBatchOverlap,
    Weights,
)
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
    model: Model = DEFAULT_MODEL,
    gpu: Gpu = DEFAULT_GPU,
    num_gpus: NumGpus = None,
    tp: Tp = 1,
    pp: Pp = 1,
    dp: Dp = None,
    ep: Ep = 1,
    nodes: Nodes = None,
    expert_skew: ExpertSkew = None,
    two_batch_overlap: TwoBatchOverlap = False,
    weights: Weights = None,
    kv: Kv = None,
    batch: Annotated[int, typer.Option(help=HELP["batch"])] = 1,
    input_len: InputLen = DEFAULT_INPUT_LEN,
    output_len: OutputLen = DEFAULT_OUTPUT_LEN,
    engine: Engine = DEFAULT_ENGINE,
    enforce_eager: EnforceEager = False,
    async_scheduling: AsyncScheduling = None,
    cuda_graph_max_bs: CudaGraphMaxBs = None,
    moe_backend: MoeBackend = None,
    pdl: Pdl = False,
    attention_backend: AttentionBackend = None,
    frontend: Annotated[str, typer.Option(
        help="none: the engine's offline benchmark (default); http: add its OpenAI API server.")] = FRONTEND_ESTIMATE,
    endpoint: Endpoint = DEFAULT_ENDPOINT,
    gpu_memory_utilization: GpuMemoryUtilization = None,
    engine_file: EngineFile = None,
    hardware_file: HardwareFile = None,
    family: Family = None,
    json_out: Json = False,
) -> None:
    """Time, throughput and memory of a static batch: prefill vs decode, which roof binds, and why."""
    from flopwise.api import estimate  # imported when the command runs: --help and other commands stay fast

    result = estimate(model, gpu, batch=batch, input_len=input_len, output_len=output_len, tp=tp, pp=pp,
                      dp=dp, ep=ep, nodes=nodes, expert_skew=expert_skew,
                          two_batch_overlap=two_batch_overlap,
                      num_gpus=num_gpus, weights=weights, kv=kv, gpu_memory_utilization=gpu_memory_utilization,
                      hardware_file=hardware_file, engine=engine, frontend=frontend, endpoint=endpoint,
                      engine_file=engine_file, family=family, enforce_eager=enforce_eager,
                      async_scheduling=async_scheduling, cuda_graph_max_bs=cuda_graph_max_bs,
                      moe_backend=moe_backend, pdl=pdl, attention_backend=attention_backend)
    warn_model_notes(result.deployment)
    if json_out:
        print_json(result.to_dict())
        return
    from flopwise.report.estimate_report import render_estimate

    render_estimate(_app.console, result)
