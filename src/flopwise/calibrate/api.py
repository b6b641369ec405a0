"""Calibration from files: a hardware file (or catalog id) plus bench run directories -> a fitted file."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from flopwise.calibrate.bench_runs import load_bench_runs
from flopwise.calibrate.calibration import Calibration, calibrate
from flopwise.calibrate.fit import CalibrationError
from flopwise.specs.build import build_deployment
from flopwise.specs.deployment import Deployment
from flopwise.specs.engine import write_engine_file
from flopwise.specs.hardware import HardwareSpec, get_hardware

__all__ = ["CalibrationRun", "run_calibration", "served_deployment"]


@dataclass(frozen=True, slots=True)
class CalibrationRun:
    calibration: Calibration
    written: Path | None
    engine_written: Path | None = None


def served_deployment(model: str, hw: HardwareSpec, knobs: dict[str, Any]) -> Deployment:
    """The deployment a bench run measured: `model` on one `hw`, bf16, the engine's server knobs unless given
    (`knobs` may name `engine`, e.g. "vllm@0.32")."""
    return build_deployment(model, hw, **{n: v for n, v in knobs.items() if v is not None})


def run_calibration(hardware: str, *, hw_id: str | None = None, runs: Sequence[str | Path] = (),
                    model: str | None = None, kinds: Sequence[str] = ("kernels", "steps", "bench"),
                    params: Sequence[str] | None = None, knobs: dict[str, Any] | None = None,
                    out: str | Path | None = None, default_out: bool = True,
                    engine_out: str | Path | None = None) -> CalibrationRun:
    """Fit the entry of `hardware` (file, or catalog id) to the measurements the file holds and to `runs`;
    write the result to `out` (default: back into the hardware file; a catalog id needs `out`)."""
    from flopwise.profile import kernel_points_from, step_points_from
    from flopwise.profile.hostfile import read_host_file, write_host_file

    path = Path(hardware)
    if path.is_file():
        hf = read_host_file(path)
        hid = hw_id or hf.hardware_id
        if hid is None:
            raise CalibrationError(f"{path} holds no [[hardware]] entry; give --id")
        hw = get_hardware(hid, path)
        table = hf.profile if hf.profile.get("hardware", hid) == hid else {}
        others = hf.hardware
    else:
        hw = get_hardware(hardware)
        if hw_id:
            from dataclasses import replace

            hw = replace(hw, id=hw_id)
        table, others = {}, []
    kernels = kernel_points_from(table) if "kernels" in kinds else []
    steps = step_points_from(table, hw) if "steps" in kinds and table.get("steps") else []
    bench = load_bench_runs(runs) if runs and "bench" in kinds else []
    dep = None
    if bench:
        if not model:
            raise CalibrationError("calibrating from bench runs needs the served model: pass --model "
                                   "(a catalog id, or the served model's config.json / directory)")
        dep = served_deployment(model, hw, knobs or {})
    cal = calibrate(hw, kernels=kernels, steps=steps, runs=bench, dep=dep, params=params)
    target = Path(out) if out else (path if path.is_file() and default_out else None)
    if target is None and default_out and not path.is_file():
        raise CalibrationError(f"'{hardware}' is a catalog id: give --out FILE to write the calibrated entry")
    if target is not None:
        new_table = dict(table) if target == path else {}
        new_table["hardware"] = cal.after.id
        new_table["fit"] = [e.to_dict() for e in cal.errors]
        if bench:
            new_table["bench_runs"] = [str(r.root) for r in bench]
            new_table["served_model"] = model
        keep = others if target == path else (read_host_file(target).hardware if target.exists() else [])
        write_host_file(target, cal.after, new_table, keep)
    engine_target = None
    if engine_out is not None and cal.engine_after is not None:
        engine_target = Path(engine_out)
        write_engine_file(engine_target, cal.engine_after, dict(cal.engine_after.sources).get("calibrated", ""))
    return CalibrationRun(cal, target, engine_target)
