"""Fit a machine's efficiency profile to measurements: microbenchmarks, model steps, or `flopwise bench` runs.

Modules: `fit.py` (identifiability test and least-squares fit of `EfficiencyProfile` and engine CPU-cost parameters; the
coordinate descent `benchmarks/fit_defaults.py` uses), `observations.py` (measurements and their predictions
under a profile, by the cost model's own formulas), `bench_runs.py` (bench runs replayed through the simulator),
`calibration.py` (the whole fit with before/after errors).
"""

from flopwise.calibrate.bench_runs import BenchRun, load_bench_runs
from flopwise.calibrate.calibration import Calibration, calibrate
from flopwise.calibrate.fit import (
                                    FITTABLE,
                                    CalibrationError,
                                    FitResult,
                                    Tuning,
                                    coordinate_descent,
                                    fit_profile,
                                    identify,
)
from flopwise.calibrate.observations import KernelPoint, StepPoint, kernel_time

__all__ = ["BenchRun", "load_bench_runs", "Calibration", "calibrate", "FITTABLE", "CalibrationError", "FitResult",
           "Tuning", "coordinate_descent", "fit_profile", "identify", "KernelPoint", "StepPoint", "kernel_time"]
