"""`flopwise calibrate`: fit a hardware entry's efficiency profile to measurements and write it back."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from flopwise.cli._app import app, console, print_json
from flopwise.calibrate.report import render_calibration

_SOURCES = ("kernels", "steps", "bench")


@app.command("calibrate")
def calibrate_cmd(
    hardware: Annotated[str, typer.Option("--hardware", help="Hardware file written by `flopwise profile`, or a catalog id.")],
    from_runs: Annotated[list[Path] | None, typer.Option("--from", help="`flopwise bench` run or sweep directory (repeatable).")] = None,
    hw_id: Annotated[str | None, typer.Option("--id", help="Entry to calibrate (default: the file's profiled entry); with a catalog id, the id to write.")] = None,
    model: Annotated[str | None, typer.Option(help="The served model (catalog id, config.json or model directory): needed with --from.")] = None,
    use: Annotated[str, typer.Option(help="Comma-separated measurement kinds to fit: kernels, steps, bench.")] = "kernels,steps,bench",
    params: Annotated[str | None, typer.Option(help="Comma-separated parameters to fit (default: all that the data identify).")] = None,
    max_num_seqs: Annotated[int | None, typer.Option("--max-num-seqs", help="Server knob for replaying bench runs (default: vLLM's).")] = None,
    max_num_batched_tokens: Annotated[int | None, typer.Option("--max-num-batched-tokens", help="Server knob (default: vLLM's).")] = None,
    block_size: Annotated[int | None, typer.Option("--block-size", help="Server KV block size (default: the engine's; vLLM CPU: 128).")] = None,
    engine: Annotated[str, typer.Option(help="The served engine and version (bench runs are replayed through it).")] = "vllm",
    engine_out: Annotated[Path | None, typer.Option("--engine-out", help="Write the fitted engine CPU costs (API server, engine core) here: an override file for --engine-file.")] = None,
    out: Annotated[Path | None, typer.Option("--out", help="Hardware file to write (default: the --hardware file).")] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Fit and report; write nothing.")] = False,
    json_out: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """Fit compute / bandwidth efficiency by shape and per-kernel / per-step overheads to microbenchmarks, model
    steps or bench runs; print before/after error per metric; refuse parameters the data cannot identify."""
    from flopwise.calibrate.api import run_calibration

    kinds = tuple(k.strip() for k in use.split(",") if k.strip())
    bad = [k for k in kinds if k not in _SOURCES]
    if bad:
        raise typer.BadParameter(f"--use: unknown kind(s) {bad}; choose from {', '.join(_SOURCES)}")
    result = run_calibration(hardware, hw_id=hw_id, runs=from_runs or [], model=model, kinds=kinds,
                             params=[p.strip() for p in params.split(",")] if params else None,
                             knobs={"max_num_seqs": max_num_seqs, "max_num_batched_tokens": max_num_batched_tokens,
                                    "block_size": block_size, "engine": engine},
                             out=None if dry_run else out, default_out=not dry_run,
                             engine_out=None if dry_run else engine_out)
    if json_out:
        print_json({"hardware_file": str(result.written) if result.written else None,
                    "engine_file": str(result.engine_written) if result.engine_written else None,
                    **result.calibration.to_dict()})
        return
    render_calibration(console, result.calibration)
    if result.written:
        console.print(f"wrote {result.written}: `flopwise estimate --hardware-file {result.written} "
                      f"--gpu {result.calibration.after.id}`")
    if result.engine_written:
        console.print(f"wrote {result.engine_written}: `flopwise simulate --engine {engine} --engine-file "
                      f"{result.engine_written} ...`")
