"""`flopwise explain`: why this model on this GPU behaves as it does, and what each technique moves."""

from __future__ import annotations

from typing import Annotated

import typer

from flopwise.cli import _app
from flopwise.cli._app import app, print_json, warn_model_notes
from flopwise.cli.options import Family, Gpu, HardwareFile, InputLen, Json, Kv, Model, OutputLen, Tp, Weights
from flopwise.params import HELP
from flopwise.specs.defaults import (
    DEFAULT_ENGINE,
    DEFAULT_GPU,
    DEFAULT_INPUT_LEN,
    DEFAULT_MODEL,
    DEFAULT_OUTPUT_LEN,
    SPEC_ALPHA,
    SPEC_K,
)


@app.command("explain")
def explain_cmd(
    model: Model = DEFAULT_MODEL,
    gpu: Gpu = DEFAULT_GPU,
    tp: Tp = 1,
    weights: Weights = None,
    kv: Kv = None,
    batch: Annotated[int, typer.Option(help="Sequences decoding together.")] = 1,
    input_len: InputLen = DEFAULT_INPUT_LEN,
    output_len: OutputLen = DEFAULT_OUTPUT_LEN,
    draft: Annotated[str | None, typer.Option(help=HELP["draft"])] = None,
    k: Annotated[int, typer.Option(help=HELP["k"])] = SPEC_K,
    alpha: Annotated[float, typer.Option(help=HELP["alpha"])] = SPEC_ALPHA,
    hardware_file: HardwareFile = None,
    engine: Annotated[str, typer.Option(
        help="Serving engine and version (its per-step CPU cost and kernels; see `flopwise "
             "engines`).")] = DEFAULT_ENGINE,
    family: Family = None,
    json_out: Json = False,
) -> None:
    """Prefill vs decode on the roofline, the FLOPs-vs-time gap, and what batching, speculative decoding,
    quantization, prefix caching, KV structure and chunked prefill each move, in numbers."""
    from flopwise.api import explain  # imported when the command runs: --help and other commands stay fast

    ex = explain(model, gpu, tp=tp, weights=weights, kv=kv, batch=batch, input_len=input_len, output_len=output_len,
                 draft=draft, k=k, alpha=alpha, hardware_file=hardware_file, engine=engine, family=family)
    warn_model_notes(ex.scenario.deployment)
    if json_out:
        print_json(ex.to_dict())
        return
    from flopwise.report.explain_report import render_explanation

    render_explanation(_app.console, ex)
