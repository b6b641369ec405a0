"""`flopwise calibrate`: fit a hardware entry's efficiency profile to measurements and write it back."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Annotated

import typer

from flopwise.cli import _app
from flopwise.cli._app import app, print_json
from flopwise.cli.options import Json
from flopwise.errors import FlopwiseWarning
from flopwise.params import HELP
from flopwise.specs.defaults import DEFAULT_ENGINE


@app.command("calibrate")
def calibrate_cmd(
    hardware: Annotated[str, typer.Option("--hardware", help=HELP["hardware"])],
    from_runs: Annotated[list[Path] | None, typer.Option("--from", help=HELP["from_runs"] + " Repeatable.")] = None,
    hw_id: Annotated[str | None, typer.Option("--id", help=HELP["id"])] = None,
    model: Annotated[str | None, typer.Option(help=HELP["served"])] = None,
    use: Annotated[str, typer.Option(help=HELP["use"])] = "kernels,steps,bench",
    params: Annotated[str | None, typer.Option(help=HELP["params"] + " Comma-separated.")] = None,
    max_num_seqs: Annotated[int | None, typer.Option(
        "--max-num-seqs", help="Server knob for replaying bench runs (default: the engine's).")] = None,
    max_num_batched_tokens: Annotated[int | None, typer.Option(
        "--max-num-batched-tokens", help="Server knob (default: the engine's).")] = None,
    block_size: Annotated[int | None, typer.Option(
        "--block-size", help="Server KV block size (default: the engine's; vLLM CPU: 128).")] = None,
    engine: Annotated[str, typer.Option(help=HELP["calibrate_engine"])] = DEFAULT_ENGINE,
    engine_out: Annotated[Path | None, typer.Option("--engine-out", help=HELP["engine_out"])] = None,
    out: Annotated[Path | None, typer.Option("--out", help=HELP["out"])] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help=HELP["dry_run"])] = False,
    json_out: Json = False,
) -> None:
    """Fit compute / bandwidth efficiency by shape and per-kernel / per-step overheads to microbenchmarks, model
    steps or bench runs; print before/after error per metric; refuse parameters the data cannot identify."""
    from flopwise.api import calibrate  # imported when the command runs: --help and other commands stay fast

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", FlopwiseWarning)
        try:
            result = calibrate(hardware, from_runs=from_runs, id=hw_id, model=model, use=use, params=params,
                               max_num_seqs=max_num_seqs, max_num_batched_tokens=max_num_batched_tokens,
                               block_size=block_size, engine=engine, engine_out=engine_out, out=out, dry_run=dry_run)
        finally:
            for w in caught:  # one line each (a bench run's unreadable lines, ...)
                typer.echo(f"warning: {w.message}", err=True)
    if json_out:
        print_json(result.to_dict())
        return
    from flopwise.calibrate.report import render_calibration

    console = _app.console
    render_calibration(console, result.calibration)
    if result.hardware_file:
        console.print(f"wrote {result.hardware_file}: `flopwise estimate --hardware-file {result.hardware_file} "
                      f"--gpu {result.calibration.after.id}`")
    if result.engine_file:
        console.print(f"wrote {result.engine_file}: `flopwise simulate --engine {engine} --engine-file "
                      f"{result.engine_file} ...`")
