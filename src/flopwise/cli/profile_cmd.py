"""`flopwise profile`: measure this machine and write a hardware file with its fitted efficiency profile."""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Annotated

import typer

from flopwise.cli import _app
from flopwise.cli._app import app, print_json
from flopwise.cli.options import Json

# On a GPU the model steps time a plain PyTorch decoder (README, "Calibrate to this machine": on an H200 its
# Llama-3.1-8B decode ran 20% slower than the catalog's engine-step estimate): a fit to them describes that decoder.
GPU_STEPS_NOTE = ("the model steps time a plain PyTorch decoder (rotary embeddings, cache writes and activations as "
                  "separate kernels), slower than an engine's fused ones: the step costs fitted to them describe it; "
                  "for an engine, fit to `flopwise bench` runs (`flopwise calibrate --from`) or profile without "
                  "--model")


@app.command("profile")
def profile_cmd(
    out: Annotated[Path, typer.Option(
        "--out", help="Hardware file (TOML) to write: entry, fitted profile, raw "
                      "measurements.")] = Path("my-host.toml"),
    hw_id: Annotated[str | None, typer.Option(
        "--id", help="Id of the written hardware entry (default: my-<hostname>).")] = None,
    base: Annotated[str | None, typer.Option(
        "--base", help="Catalog entry whose peaks and sources to start from (e.g. cpu-epyc-zen5-2c).")] = None,
    quick: Annotated[bool, typer.Option("--quick", help="Reduced grid: under 30 s on a 2-core CPU.")] = False,
    model: Annotated[str | None, typer.Option(
        help="Also time prefill and decode steps of this model (catalog id or config.json), built with "
             "random weights.")] = None,
    random_weights: Annotated[bool, typer.Option(
        "--random-weights/--no-random-weights", help="Model weights are random (the only mode: nothing is "
                                                     "downloaded).")] = True,
    num_layers: Annotated[int | None, typer.Option(
        "--num-layers", help="Profile only the first N layers of --model (faster; per-layer cost is "
                             "unchanged).")] = None,
    microbenchmarks: Annotated[bool, typer.Option(
        "--microbench/--no-microbench", help="Run the GEMM / bandwidth / attention microbenchmarks.")] = True,
    device: Annotated[str | None, typer.Option(help="cpu, cuda or cuda:N (default: cuda where available).")] = None,
    threads: Annotated[int | None, typer.Option(
        help="CPU threads for PyTorch, >= 1 (default: the cores this process may use).")] = None,
    fit: Annotated[bool, typer.Option("--fit/--no-fit", help="Fit the efficiency profile to the measurements.")] = True,
    json_out: Json = False,
) -> None:
    """Microbenchmarks of this machine (GEMM, memory bandwidth, attention), optional model steps, and a fitted
    hardware entry that `estimate --hardware-file` reads."""
    # imported when the command runs: --help and other commands stay fast
    from flopwise.calibrate.host import HostFit, fit_host
    from flopwise.calibrate.report import render_calibration, render_steps
    from flopwise.errors import SpecError
    from flopwise.profile import profile_host, profile_table
    from flopwise.profile.hostfile import read_host_file, write_host_file
    from flopwise.specs.hardware import get_hardware
    from flopwise.specs.model_catalog import get_model
    from flopwise.validate import output_path

    if not random_weights:
        raise typer.BadParameter("only random weights are supported (timing does not depend on their values)")
    output_path(out, "--out", suffixes=(".toml",), error=SpecError)  # before the measurements, not after
    others = read_host_file(out).hardware if out.exists() else []
    if model is not None:
        get_model(model)  # an unknown model is named before the microbenchmarks run
    if hw_id is not None and not hw_id.strip():
        raise SpecError("--id is empty; give the hardware entry's id, or leave it out for my-<hostname>")
    hid = hw_id or f"my-{socket.gethostname().split('.')[0].lower() or 'host'}"
    base_hw = get_hardware(base) if base else None
    err = _app.err_console
    say = None if json_out else (lambda s: err.print(f"  {s}", highlight=False))
    prof = profile_host(hw_id=hid, base=base_hw, quick=quick, model=model, num_layers=num_layers,
                        microbenchmarks=microbenchmarks, device=device, threads=threads, progress=say)
    fitted = fit_host(prof) if fit else HostFit(hardware=prof.hardware)
    hw = fitted.hardware
    write_host_file(out, hw, profile_table(prof, fitted.fit_rows), others)
    notes = [GPU_STEPS_NOTE] if prof.steps and hw.kind == "gpu" else []
    if json_out:
        print_json({"hardware_file": str(out), "hardware": hw.id, "host": prof.host.to_dict(), "notes": notes,
                    "peak_tflops": hw.peak_tflops, "memory_bandwidth_gbs": hw.memory_bandwidth_gbs,
                    "num_kernels": len(prof.kernels), "num_steps": len(prof.steps), "wall_s": prof.wall_s,
                    "refused": fitted.refusal,
                    "calibration": fitted.calibration.to_dict() if fitted.calibration else None})
        return
    console = _app.console
    console.print(f"[bold]{hw.id}[/]: {prof.host.summary()}")
    peaks = ", ".join(f"{k} {v:g}" for k, v in hw.peak_tflops.items())
    console.print(f"peaks (TFLOP/s): {peaks}; memory bandwidth {hw.memory_bandwidth_gbs:g} GB/s; "
                  f"{len(prof.kernels)} kernels, {len(prof.steps)} model steps in {prof.wall_s:.1f} s")
    if prof.steps:
        render_steps(console, prof.steps, fitted.calibration)
    if fitted.calibration is not None:
        render_calibration(console, fitted.calibration)
    elif fitted.refusal:
        console.print(f"[yellow]not fitted:[/] {fitted.refusal}")
    for note in notes:
        console.print(f"[yellow]note:[/] {note}")
    console.print(f"wrote {out}: use it with `flopwise estimate --hardware-file {out} --gpu {hw.id}`")
