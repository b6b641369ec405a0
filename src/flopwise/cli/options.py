"""The options several commands share, spelled once: name, type and help (`params.HELP`). A command writes
`tp: Tp = 1`; its default comes from `specs/defaults.py` or the engine catalog at the call site, as before.

Deployment: Model, Gpu, NumGpus, ReplicasPerServer, Tp, Pp, Dp, Ep, Nodes, ExpertSkew, Weights, Kv, Engine,
Frontend, Endpoint, GpuMemoryUtilization, EngineFile, HardwareFile, Family. Workload: InputLen, OutputLen.
Output: Json, Parquet.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from flopwise.params import HELP

__all__ = ["Model", "Gpu", "NumGpus", "ReplicasPerServer", "Tp", "Pp", "Dp", "Ep", "Nodes", "ExpertSkew", "Weights",
           "Kv", "Engine",
           "TwoBatchOverlap", "Frontend", "Endpoint", "GpuMemoryUtilization", "EngineFile", "HardwareFile", "Family",
           "InputLen",
           "OutputLen", "Json", "Parquet"]

Model = Annotated[str, typer.Option(help=HELP["model"])]
Gpu = Annotated[str, typer.Option(help=HELP["gpu"])]
NumGpus = Annotated[int | None, typer.Option("--num-gpus", help=HELP["num_gpus"])]
ReplicasPerServer = Annotated[int, typer.Option("--replicas-per-server", help=HELP["replicas_per_server"])]
Tp = Annotated[int, typer.Option(help=HELP["tp"])]
Pp = Annotated[int, typer.Option(help=HELP["pp"])]
Dp = Annotated[int | None, typer.Option(help=HELP["dp"])]
Ep = Annotated[int, typer.Option(help=HELP["ep"])]
Nodes = Annotated[int | None, typer.Option(help=HELP["nodes"], show_default=False)]
ExpertSkew = Annotated[float | None, typer.Option(help=HELP["expert_skew"], show_default="measured")]
TwoBatchOverlap = Annotated[bool, typer.Option("--two-batch-overlap", help=HELP["two_batch_overlap"])]
EnforceEager = Annotated[bool, typer.Option("--enforce-eager", help=HELP["enforce_eager"])]
AsyncScheduling = Annotated[bool | None, typer.Option("--async-scheduling/--no-async-scheduling",
                                                      help=HELP["async_scheduling"], show_default="the engine's")]
CudaGraphMaxBs = Annotated[int | None, typer.Option("--cuda-graph-max-bs", help=HELP["cuda_graph_max_bs"],
                                                    show_default="the engine's")]
MoeBackend = Annotated[str | None, typer.Option("--moe-backend", help=HELP["moe_backend"], show_default="auto")]
Pdl = Annotated[bool, typer.Option("--pdl", help=HELP["pdl"])]
AttentionBackend = Annotated[str | None, typer.Option("--attention-backend", help=HELP["attention_backend"],
                                                      show_default="the engine's")]
Weights = Annotated[str | None, typer.Option(help=HELP["weights"])]
Kv = Annotated[str | None, typer.Option(help=HELP["kv"])]
Engine = Annotated[str, typer.Option(help=HELP["engine"])]
Frontend = Annotated[str, typer.Option(help=HELP["frontend"])]
Endpoint = Annotated[str, typer.Option(help=HELP["endpoint"])]
GpuMemoryUtilization = Annotated[float | None, typer.Option("--gpu-memory-utilization",
                                                            help=HELP["gpu_memory_utilization"])]
EngineFile = Annotated[Path | None, typer.Option("--engine-file", help=HELP["engine_file"])]
HardwareFile = Annotated[Path | None, typer.Option("--hardware-file", help=HELP["hardware_file"])]
Family = Annotated[str | None, typer.Option("--family", help=HELP["family"])]
InputLen = Annotated[int, typer.Option("--input-len", help=HELP["input_len"])]
OutputLen = Annotated[int, typer.Option("--output-len", help=HELP["output_len"])]
Json = Annotated[bool, typer.Option("--json", help="Print one JSON object.")]
Parquet = Annotated[bool, typer.Option("--parquet", help="Also write requests.parquet (needs pyarrow).")]
