"""`flopwise explain`: why this model on this GPU behaves as it does, and what each technique moves."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from flopwise.api import deployment
from flopwise.cli._app import FAMILY_HELP, app, console, print_json, warn_model_notes
from flopwise.specs.defaults import DEFAULT_ENGINE, DEFAULT_GPU, DEFAULT_MODEL, FRONTEND_ESTIMATE
from flopwise.report.explain_report import render_explanation
from flopwise.specs.model_catalog import get_model
from flopwise.techniques.explain import explain
from flopwise.techniques.scenario import Scenario


@app.command("explain")
def explain_cmd(
    model: Annotated[str, typer.Option(help="Catalog id or alias, config.json path, or model directory.")] = DEFAULT_MODEL,
    gpu: Annotated[str, typer.Option(help="Hardware id (see `flopwise hardware`).")] = DEFAULT_GPU,
    tp: Annotated[int, typer.Option(help="Tensor-parallel degree.")] = 1,
    weights: Annotated[str | None, typer.Option(help="Weight format (default: the checkpoint's own, else bf16).")] = None,
    kv: Annotated[str | None, typer.Option(help="KV-cache format.")] = None,
    batch: Annotated[int, typer.Option(help="Sequences decoding together.")] = 1,
    input_len: Annotated[int, typer.Option("--input-len", help="Prompt tokens per request.")] = 1024,
    output_len: Annotated[int, typer.Option("--output-len", help="Generated tokens per request.")] = 256,
    draft: Annotated[str | None, typer.Option(help="Draft model for the speculative example (default: an "
                                              "EAGLE-style one-layer head).")] = None,
    k: Annotated[int, typer.Option(help="Tokens proposed per speculative step.")] = 4,
    alpha: Annotated[float, typer.Option(help="Per-token acceptance rate for the speculative example.")] = 0.7,
    hardware_file: Annotated[Path | None, typer.Option("--hardware-file", help="TOML/YAML file adding or overriding hardware.")] = None,
    engine: Annotated[str, typer.Option(help="Serving engine and version (its per-step CPU cost and kernels; see `flopwise engines`).")] = DEFAULT_ENGINE,
    family: Annotated[str | None, typer.Option("--family", help=FAMILY_HELP)] = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """Prefill vs decode on the roofline, the FLOPs-vs-time gap, and what batching, speculative decoding,
    quantization, prefix caching, KV structure and chunked prefill each move, in numbers."""
    dep = deployment(model, gpu, tp=tp, weights=weights, kv=kv, hardware_file=hardware_file, engine=engine,
                     frontend=FRONTEND_ESTIMATE, family=family)
    warn_model_notes(dep.model)
    ex = explain(Scenario(dep, input_len, output_len, batch), get_model(draft) if draft else None, k, alpha)
    if json_out:
        print_json(ex.to_dict())
    else:
        render_explanation(console, ex)
