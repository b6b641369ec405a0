"""Fit a profiled host (`flopwise profile`): the efficiency profile fitted to its kernels and model steps.
Profiling measures (`profile/`); this layer fits, so the measurement code never depends on the fit."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from flopwise.calibrate.calibration import Calibration, calibrate
from flopwise.calibrate.fit import CalibrationError
from flopwise.profile import HostProfile
from flopwise.specs.hardware import HardwareSpec

__all__ = ["HostFit", "fit_host"]


@dataclass(frozen=True, slots=True, kw_only=True)
class HostFit:
    """The hardware entry to write (fitted, or as measured where no fit was made), the calibration, and why
    the fit was refused where it was."""

    hardware: HardwareSpec
    calibration: Calibration | None = None
    refusal: str | None = None

    @property
    def fit_rows(self) -> list[dict[str, Any]]:
        return [e.to_dict() for e in self.calibration.errors] if self.calibration is not None else []


def fit_host(p: HostProfile) -> HostFit:
    """Fit `p.hardware`'s efficiency profile to what was measured (nothing measured: nothing fitted)."""
    if not (p.kernels or p.steps):
        return HostFit(hardware=p.hardware)
    try:
        cal = calibrate(p.hardware, kernels=list(p.kernels), steps=list(p.steps))
    except CalibrationError as e:
        return HostFit(hardware=p.hardware, refusal=str(e))
    return HostFit(hardware=cal.after, calibration=cal)
