"""Calibration: the fit recovers known parameters from data the cost model generated, refuses what the data
cannot identify, and writes a hardware file `estimate --hardware-file` reads back. No timing is asserted."""

import math
from dataclasses import replace

import numpy as np
import pytest

from flopwise.api import deployment
from flopwise.calibrate import (
    CalibrationError,
    Tuning,
    calibrate,
    coordinate_descent,
    fit_profile,
    identify,
    kernel_time,
)
from flopwise.calibrate.observations import (
    Observations,
    StepPoint,
    kernel_observations,
    residual_function,
    step_observations,
    with_profile,
)
from flopwise.cost.batch import decode_shape, prefill_shape
from flopwise.cost.layout import layout
from flopwise.cost.step import step_cost, step_time
from flopwise.profile.microbench import attention_point, copy_point, gemm_point
from flopwise.specs.hardware import get_hardware

HW = "cpu-epyc-zen5-2c"


@pytest.fixture(scope="module")
def dep():
    return deployment("qwen2.5-0.5b", HW)


def _steps(dep, true):
    """Prefills of 8..4096 tokens and decodes at batch 1..64 over 128..4096 cached tokens, timed by the model."""
    w = layout(dep).windows
    td = with_profile(dep, true)
    shapes = [("prefill", f"prefill {n}", prefill_shape(1, n, w)) for n in (8, 32, 128, 512, 2048, 4096)]
    shapes += [("decode", f"decode {b}x{c}", decode_shape(b, c, w)) for b in (1, 4, 16, 64) for c in (128, 1024, 4096)]
    return [StepPoint(dep=dep, shape=s, seconds=step_time(td, s), label=lab, desc=desc) for lab, desc, s in shapes]


def test_fit_recovers_known_profile_from_step_times(dep):
    start = dep.hardware.efficiency
    true = replace(start, compute_max=0.35, bandwidth_max=0.8, step_overhead_s=3e-3, attention_compute_max=0.2,
                   overlap_exponent=2.0)
    res = fit_profile(residual_function([step_observations(_steps(dep, true))]), Tuning(start),
                      ["compute_max", "bandwidth_max", "step_overhead_s", "attention_compute_max",
                       "overlap_exponent"])
    assert set(res.fitted) == {"compute_max", "bandwidth_max", "step_overhead_s", "attention_compute_max",
                               "overlap_exponent"}
    for name in res.fitted:
        assert res.profile.get(name) == pytest.approx(getattr(true, name), rel=1e-3), name
    assert res.rms_after < 1e-6 < res.rms_before


def test_fit_recovers_kernel_parameters_from_microbenchmarks():
    hw = get_hardware(HW)
    true = replace(hw.efficiency, compute_max=0.3, compute_half_m=12.0, bandwidth_max=0.7,
                   bandwidth_half_bytes=3e6, kernel_overhead_s=4e-5, attention_compute_max=0.15,
                   overlap_exponent=2.5)
    shapes = [gemm_point(m, n, k, "bf16", 1.0) for m in (1, 4, 16, 64, 256, 1024)
              for n, k in ((1024, 1024), (4096, 2048), (2048, 8192))]
    shapes += [copy_point(mib * 2**20, 1.0) for mib in (0.0625, 0.25, 1, 4, 16, 64, 256)]
    shapes += [attention_point(q, L, 16, 4, 128, "bf16", 1.0)
               for q, L in ((1, 256), (1, 16384), (256, 256), (2048, 2048))]
    pts = [replace(p, seconds=kernel_time(true, hw, p)) for p in shapes]
    names = ["compute_max", "compute_half_m", "bandwidth_max", "bandwidth_half_bytes", "kernel_overhead_s",
             "attention_compute_max", "overlap_exponent"]
    res = fit_profile(residual_function([kernel_observations(pts, hw)]), Tuning(hw.efficiency), names)
    assert set(res.fitted) == set(names), res.refused
    for name in names:
        assert res.profile.get(name) == pytest.approx(getattr(true, name), rel=1e-2), name


def _mlp(dep, T: int = 64):
    """cost.step's MLP operator of a T-token prefill step, and the layout it was priced on."""
    lay = layout(dep)
    cost = step_cost(dep, prefill_shape(1, T, lay.windows))
    return next(o for o in cost.ops if o.name == "mlp"), lay


def test_kernel_time_is_the_cost_models_operator_formula(dep):
    """One MLP operator priced by calibrate.kernel_time equals cost.step's own breakdown for it."""
    T = 64
    mlp, lay = _mlp(dep, T)
    h = lay.hidden
    a = lay.act_bytes
    p = gemm_point(T, 1, 1, "bf16", 1.0)
    g = lay.groups[0]
    p = replace(p, flops=2 * T * g.dense_mlp_params, m=T, weight_bytes=g.dense_mlp_params * 2,
                act_bytes=T * a * (2 * h + 3 * g.dense_inter), kernels=2)
    assert kernel_time(dep.hardware.efficiency, dep.hardware, p) == pytest.approx(mlp.time_s / mlp.count, rel=1e-12)


def test_kernel_time_applies_the_fp4_linear_factor_as_the_cost_model_does():
    """An NVFP4 MLP on B200 (fp4_linear_factor 0.72) timed as an FP4 GEMM: kernel_time and cost.step agree, and
    the factor is what slows a compute-bound one (a 4096-token prefill: between 1.25x and 1 / 0.72 the roof's)."""
    dep = deployment(model="meta-llama/Llama-3.1-8B", gpu="b200", weights="nvfp4")
    hw = dep.hardware
    assert hw.efficiency.fp4_linear_factor == 0.72
    for T in (64, 4096):
        mlp, lay = _mlp(dep, T)
        n = mlp.count
        p = replace(gemm_point(T, 1, 1, "bf16", 1.0), dtype="fp4", flops=mlp.flops / n, m=T,
                    weight_bytes=mlp.weight_bytes / n, act_bytes=mlp.act_bytes / n, kernels=2)
        assert kernel_time(hw.efficiency, hw, p) == pytest.approx(mlp.time_s / n, rel=1e-12)
    plain = kernel_time(replace(hw.efficiency, fp4_linear_factor=1.0), hw, p)
    assert 1.25 < kernel_time(hw.efficiency, hw, p) / plain < 1 / 0.72


def test_refuses_compute_max_when_every_point_is_memory_bound():
    hw = get_hardware(HW)
    pts = [replace(p, seconds=kernel_time(hw.efficiency, hw, p)) for p in
           [copy_point(mib * 2**20, 1.0, read_only=r) for mib in (1, 16, 256) for r in (False, True)]]
    ident = identify(residual_function([kernel_observations(pts, hw)]), Tuning(hw.efficiency),
                     ["compute_max", "bandwidth_max"])
    assert ident.accepted == ("bandwidth_max",)
    assert "no measurement depends on it" in ident.refused["compute_max"]
    assert "compute-bound" in ident.refused["compute_max"]


def test_refuses_kernel_overhead_confounded_with_step_overhead(dep):
    """One model has the same number of kernels in every step: per-kernel and per-step costs are one number."""
    ident = identify(residual_function([step_observations(_steps(dep, dep.hardware.efficiency))]),
                     Tuning(dep.hardware.efficiency), ["step_overhead_s", "kernel_overhead_s"])
    assert len(ident.accepted) == 1
    refused = next(iter(ident.refused))
    assert "cannot be told apart" in ident.refused[refused]


def test_fit_raises_when_nothing_is_identifiable():
    hw = get_hardware(HW)
    pts = [replace(copy_point(2**28, 1.0), seconds=0.01)]
    with pytest.raises(CalibrationError, match="identify none"):
        fit_profile(residual_function([kernel_observations(pts, hw)]), Tuning(hw.efficiency),
                    ["compute_max", "low_precision_compute_factor"])


def test_unknown_parameter_is_an_error():
    hw = get_hardware(HW)
    with pytest.raises(CalibrationError, match="fittable"):
        identify(lambda p: np.zeros(1), Tuning(hw.efficiency), ["runtime_overhead_gib"])


def test_calibrate_reports_before_and_after_per_metric(dep):
    hw = dep.hardware
    true = replace(hw.efficiency, compute_max=0.3, bandwidth_max=0.5, step_overhead_s=8e-3)
    cal = calibrate(hw, steps=_steps(dep, true), params=["compute_max", "bandwidth_max", "step_overhead_s"],
                    prior_weight=0.0)
    rows = {r.label: r for r in cal.errors}
    assert set(rows) == {"prefill", "decode"}
    assert rows["decode"].n == 12 and rows["prefill"].n == 6
    assert all(r.max_after_pct < 0.01 < r.median_before_pct for r in rows.values())
    assert cal.after.efficiency.compute_max == pytest.approx(0.3, rel=1e-3)
    assert "fitted by flopwise calibrate" in cal.after.efficiency.source
    d = cal.to_dict()
    assert set(d["fitted"]) == {"compute_max", "bandwidth_max", "step_overhead_s"}
    assert len(d["points"]) == 18


def test_calibrate_fits_bf16_gemms_only_by_default():
    """fp32 GEMMs reach another share of their own peak; one compute_max cannot describe both."""
    hw = get_hardware(HW)
    true = replace(hw.efficiency, compute_max=0.3)
    fp32 = replace(hw.efficiency, compute_max=0.9)
    pts = [replace(p, seconds=kernel_time(true, hw, p)) for p in
           (gemm_point(m, 4096, 4096, "bf16", 1.0) for m in (64, 256, 1024))]
    pts += [replace(p, seconds=kernel_time(fp32, hw, p)) for p in
            (gemm_point(m, 4096, 4096, "fp32", 1.0) for m in (64, 256, 1024))]
    cal = calibrate(hw, kernels=pts, params=["compute_max"], prior_weight=0.0)
    assert cal.after.efficiency.compute_max == pytest.approx(0.3, rel=1e-4)
    assert [r.label for r in cal.errors] == ["gemm bf16"]


def test_coordinate_descent_finds_grid_minimum():
    hw = get_hardware(HW)
    prof, score = coordinate_descent(lambda p: (p.compute_max - 0.6) ** 2 + (p.bandwidth_max - 0.7) ** 2,
                                     hw.efficiency, {"compute_max": (0.4, 0.6, 0.8), "bandwidth_max": (0.5, 0.7)})
    assert (prof.compute_max, prof.bandwidth_max) == (0.6, 0.7)
    assert score == pytest.approx(0.0)


def test_prior_keeps_weakly_identified_parameters_near_the_start(dep):
    """Two noisy-looking points that disagree: without a prior the fit chases them; with one it stays closer."""
    hw = dep.hardware
    w = layout(dep).windows
    pts = [StepPoint(dep=dep, shape=decode_shape(1, 128, w), seconds=0.2, label="decode", desc="a"),
           StepPoint(dep=dep, shape=prefill_shape(1, 512, w), seconds=0.5, label="prefill", desc="b")]
    free = calibrate(hw, steps=pts, params=["compute_max", "bandwidth_max"], prior_weight=0.0)
    held = calibrate(hw, steps=pts, params=["compute_max", "bandwidth_max"], prior_weight=1.0)
    for n in ("compute_max", "bandwidth_max"):
        moved_free = abs(np.log(getattr(free.after.efficiency, n) / getattr(hw.efficiency, n)))
        moved_held = abs(np.log(getattr(held.after.efficiency, n) / getattr(hw.efficiency, n)))
        assert moved_held < moved_free


def test_the_rms_log_error_is_per_label_and_the_same_for_a_run_given_twice():
    """Residuals weigh each label the same in total (1/sqrt(n) each); the reported RMS divides by the labels, not
    the residuals: two labels missed by log 0.1 and 0.3 give sqrt((0.01 + 0.09) / 2) whether the run is given
    once or twice (it was 0.268 once, 0.190 twice on one bench run)."""
    def obs(values):
        return Observations(labels=("ttft", "ttft", "tpot"), descs=("a", "b", "c"), measured=np.ones(3),
                            predict=lambda prof: np.exp(np.array(values)))

    once = residual_function([obs([0.1, 0.1, 0.3])])
    twice = residual_function([obs([0.1, 0.1, 0.3]), obs([0.1, 0.1, 0.3])])
    expected = math.sqrt((0.1**2 + 0.3**2) / 2)
    for res in (once, twice):
        r = res(None)
        assert math.sqrt(float(r @ r) / res.num_labels) == pytest.approx(expected)
