"""Calibrate a hardware entry: gather observations, fit its efficiency profile, report before and after.

    calibrate(hw, kernels=[...], steps=[...], runs=[...], dep=...) -> Calibration

`kernels` are microbenchmarks (`profile.microbench`), `steps` timed model steps (`profile.model_profile`),
`runs` `flopwise bench` runs of a server replayed through the simulator on `dep` (the served model on `hw`).
The returned hardware carries the fitted profile and a `source` line saying what it was fitted to; the error
table gives, per metric, the median and worst |error| before and after.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import date
from typing import Any

from flopwise.calibrate.bench_runs import BenchRun, bench_observations
from flopwise.calibrate.fit import FITTABLE, CalibrationError, FitResult, Tuning, fit_profile
from flopwise.calibrate.observations import (
    ErrorRow,
    KernelPoint,
    Observations,
    StepPoint,
    error_table,
    kernel_observations,
    point_errors,
    residual_function,
    step_observations,
)
from flopwise.specs.deployment import Deployment
from flopwise.specs.engine import EngineProfile
from flopwise.specs.hardware import LOW_PRECISION_DTYPES, HardwareSpec

__all__ = ["Calibration", "calibrate"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Calibration:
    """The hardware (and, from bench runs, the served engine) before and after the fit."""

    before: HardwareSpec
    after: HardwareSpec
    fit: FitResult
    errors: tuple[ErrorRow, ...]
    points: tuple[tuple[str, str, float, float, float], ...]  # label, desc, measured, before, after
    engine_before: EngineProfile | None = None
    engine_after: EngineProfile | None = None

    @property
    def tuning_before(self) -> Tuning:
        return Tuning(self.before.efficiency, self.engine_before)

    def to_dict(self) -> dict[str, Any]:
        tb = self.tuning_before
        return {
            "hardware": self.after.id,
            "engine": self.engine_after.name if self.engine_after is not None else None,
            "fitted": {n: {"before": tb.get(n), "after": self.fit.profile.get(n)} for n in self.fit.fitted},
            "refused": dict(self.fit.refused),
            "at_bound": list(self.fit.at_bound),
            "rms_log_error_before": self.fit.rms_before, "rms_log_error_after": self.fit.rms_after,
            "iterations": self.fit.iterations,
            "errors": [e.to_dict() for e in self.errors],
            "points": [{"metric": lab, "point": desc, "measured": m, "predicted_before": b, "predicted_after": a}
                       for lab, desc, m, b, a in self.points],
        }


def calibrate(hw: HardwareSpec, *, kernels: Sequence[KernelPoint] = (), steps: Sequence[StepPoint] = (),
              runs: Sequence[BenchRun] = (), dep: Deployment | None = None, sim_config: Any = None,
              params: Sequence[str] | None = None, min_effect: float = 0.03,
              gemm_dtypes: Sequence[str] | None = None, prior_weight: float = 0.02) -> Calibration:
    """Fit `hw.efficiency` to the measurements (see module docstring). GEMMs count only in `gemm_dtypes`
    (default: bf16 where the hardware has a bf16 peak, the dtype deployments multiply in, and the 8- and 4-bit
    dtypes, which `low_precision_compute_factor` relates to it): one compute_max cannot describe fp32 and bf16
    kernels at once, and the other dtypes stay in the file for reference.
    `prior_weight`: a weak pull toward the starting profile (see `fit_profile`)."""
    groups: list[Observations] = []
    if gemm_dtypes is None:
        gemm_dtypes = ("bf16", *LOW_PRECISION_DTYPES) if hw.peak_tflops.get("bf16", 0) > 0 else tuple(hw.peak_tflops)
    kernels = [k for k in kernels if k.kind != "gemm" or k.dtype in gemm_dtypes]
    if kernels:
        groups.append(kernel_observations(kernels, hw))
    if steps:
        groups.append(step_observations([replace(s, dep=replace(s.dep, hardware=hw)) for s in steps]))
    engine = None
    if runs:
        if dep is None:
            raise CalibrationError("calibrating from bench runs needs the served model: pass --model")
        groups.append(bench_observations(runs, replace(dep, hardware=hw), sim_config))
        engine = dep.engine
    if not groups:
        raise CalibrationError("nothing to calibrate with: give microbenchmarks or model steps (`flopwise profile`) "
                               "or bench runs (--from)")
    start = Tuning(hw.efficiency, engine)
    res = fit_profile(residual_function(groups), start, params or FITTABLE, min_effect=min_effect,
                      prior_weight=prior_weight)
    what = ", ".join(k for k, present in (("microbenchmarks", kernels), ("model steps", steps),
                                           ("bench runs", runs)) if present)
    source = f"fitted by flopwise calibrate on {date.today()} to {what}; fitted {', '.join(res.fitted)}"
    after = replace(hw, efficiency=replace(res.profile.efficiency, source=source))
    before_pts = point_errors(groups, start)
    after_pts = point_errors(groups, res.profile)
    pts = tuple((b[0], b[1], b[2], b[3], a[3]) for b, a in zip(before_pts, after_pts, strict=True))
    eng_after = res.profile.engine
    if eng_after is not None:
        eng_after = replace(eng_after, sources=(*eng_after.sources, ("calibrated", source)))
    return Calibration(before=hw, after=after, fit=res, errors=tuple(error_table(groups, start, res.profile)),
                       points=pts, engine_before=engine, engine_after=eng_after)
