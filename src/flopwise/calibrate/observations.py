"""Measurements as the cost model sees them, and their predictions under a candidate efficiency profile.

Three kinds of measurement feed a fit:

- `KernelPoint`: one timed kernel (a GEMM, a copy, an attention read) with the FLOPs and bytes the cost model
  would count for it. `kernel_time` prices it with the same per-operator formula as `cost.step` (one
  operator of `_Acc.add`: compute and memory roofs at the profile's efficiencies, smooth maximum with exponent
  p, plus kernel overhead); a test checks the two agree.
- `StepPoint`: one timed engine step (a model forward pass) of a deployment on a batch shape, priced by
  `cost.step.step_time` itself.
- bench runs (`calibrate.bench_runs`): a served workload, replayed through the simulator.

Each becomes an `Observations` group: measured values, labels (the metric each value belongs to) and a
`predict(profile)` function. The fit minimises the weighted log ratios predicted / measured; each label gets the
same total weight (1/sqrt(n) per value), so a grid of 60 GEMMs does not drown 6 decode steps.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from flopwise.calibrate.fit import Tuning
from flopwise.cost.step import step_time
from flopwise.metrics.measurements import KernelPoint, StepPoint
from flopwise.specs.deployment import Deployment
from flopwise.specs.hardware import LOW_PRECISION_DTYPES, EfficiencyProfile, HardwareSpec

__all__ = ["KernelPoint", "StepPoint", "Observations", "kernel_time", "kernel_observations", "with_profile",
           "point_errors",
           "step_observations", "residual_function", "error_table", "ErrorRow"]

def kernel_time(prof: EfficiencyProfile, hw: HardwareSpec, p: KernelPoint) -> float:
    """Seconds the cost model gives one kernel (the formula of one operator in `cost.step`)."""
    if p.flops > 0:
        if p.kind == "attention":
            eff = prof.attention_compute_max * p.m / (p.m + prof.compute_half_m)
            compute_s = p.flops / (hw.peak_flops("bf16") * eff)
        else:
            dtype = hw.compute_dtype(p.dtype)
            factor = prof.low_precision_compute_factor if dtype in LOW_PRECISION_DTYPES else 1.0
            if p.kind == "gemm":  # a standalone linear layer (`cost.step` Roofs.dense_rate)
                factor *= prof.linear_factor(dtype)
            compute_s = p.flops / (hw.peak_tflops[dtype] * 1e12 * factor * prof.compute_eff(p.m))
    else:
        compute_s = 0.0
    nbytes = p.weight_bytes + p.kv_bytes + p.act_bytes
    memory_s = nbytes / (hw.bandwidth_bytes_per_s * prof.bandwidth_eff(nbytes)) if nbytes > 0 else 0.0
    q = prof.overlap_exponent
    return float((compute_s**q + memory_s**q) ** (1.0 / q) + p.kernels * prof.kernel_overhead_s)


@dataclass(frozen=True, slots=True, kw_only=True)
class Observations:
    """Measured values and a function giving their predictions under a profile."""

    labels: tuple[str, ...]
    descs: tuple[str, ...]
    measured: np.ndarray
    predict: Callable[[Tuning], np.ndarray]


def kernel_observations(points: Sequence[KernelPoint], hw: HardwareSpec) -> Observations:
    pts = tuple(points)

    def predict(prof: Tuning) -> np.ndarray:
        return np.array([kernel_time(prof.efficiency, hw, p) for p in pts])

    return Observations(labels=tuple(p.label for p in pts), descs=tuple(p.desc for p in pts),
                        measured=np.array([p.seconds for p in pts]), predict=predict)


def with_profile(dep: Deployment, prof: Tuning | EfficiencyProfile) -> Deployment:
    """`dep` on the tuning's efficiency profile, served by its engine (when it carries one)."""
    if isinstance(prof, EfficiencyProfile):
        return replace(dep, hardware=replace(dep.hardware, efficiency=prof))
    dep = replace(dep, hardware=replace(dep.hardware, efficiency=prof.efficiency))
    return dep if prof.engine is None else replace(dep, engine=prof.engine)


def step_observations(points: Sequence[StepPoint]) -> Observations:
    pts = tuple(points)

    def predict(prof: Tuning) -> np.ndarray:
        return np.array([step_time(with_profile(p.dep, prof), p.shape) for p in pts])

    return Observations(labels=tuple(p.label for p in pts), descs=tuple(p.desc for p in pts),
                        measured=np.array([p.seconds for p in pts]), predict=predict)


class WeightedResiduals:
    """profile -> weighted log(predicted / measured), each label weighing the same in total (weight 1/sqrt(n) on
    each of a label's n measurements). `num_labels` is the sum of the squared weights: r @ r / num_labels is the
    mean over labels of each label's mean squared log error, the same however many times a run is given."""

    def __init__(self, groups: Sequence[Observations]) -> None:
        self.groups = tuple(groups)
        labels = [lab for g in self.groups for lab in g.labels]
        counts: dict[str, int] = {}
        for lab in labels:
            counts[lab] = counts.get(lab, 0) + 1
        self.weights = np.array([1.0 / math.sqrt(counts[lab]) for lab in labels])
        self.num_labels = len(counts)
        self.measured = np.concatenate([g.measured for g in self.groups])

    def __call__(self, prof: Tuning) -> np.ndarray:
        pred = np.concatenate([g.predict(prof) for g in self.groups])
        with np.errstate(divide="ignore", invalid="ignore"):
            out: np.ndarray = self.weights * np.log(pred / self.measured)
        return out


def residual_function(groups: Sequence[Observations]) -> WeightedResiduals:
    """profile -> weighted log(predicted / measured), each label weighing the same in total."""
    return WeightedResiduals(groups)


@dataclass(frozen=True, slots=True, kw_only=True)
class ErrorRow:
    """Error of one metric: median and worst |predicted - measured| / measured (%), before and after."""

    label: str
    n: int
    median_before_pct: float
    max_before_pct: float
    median_after_pct: float
    max_after_pct: float

    def to_dict(self) -> dict[str, Any]:
        return {"metric": self.label, "n": self.n, "median_abs_error_before_pct": self.median_before_pct,
                "max_abs_error_before_pct": self.max_before_pct, "median_abs_error_after_pct": self.median_after_pct,
                "max_abs_error_after_pct": self.max_after_pct}


def point_errors(groups: Sequence[Observations], prof: Tuning) -> list[tuple[str, str, float, float, float]]:
    """(label, desc, measured, predicted, error %) of every value."""
    out = []
    for g in groups:
        pred = g.predict(prof)
        for lab, desc, m, p in zip(g.labels, g.descs, g.measured, pred, strict=True):
            out.append((lab, desc, float(m), float(p), 100.0 * (p - m) / m))
    return out


def error_table(groups: Sequence[Observations], before: Tuning, after: Tuning) -> list[ErrorRow]:
    b, a = point_errors(groups, before), point_errors(groups, after)
    rows = []
    for lab in dict.fromkeys(x[0] for x in b):
        eb = np.abs([x[4] for x in b if x[0] == lab])
        ea = np.abs([x[4] for x in a if x[0] == lab])
        rows.append(ErrorRow(label=lab, n=int(eb.size), median_before_pct=float(np.median(eb)),
                             max_before_pct=float(eb.max()), median_after_pct=float(np.median(ea)),
                             max_after_pct=float(ea.max())))
    return rows
