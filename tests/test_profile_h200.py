"""The H200 that `flopwise profile --device cuda` measured (benchmarks/data/profile-h200.toml, 2026-12-04: cuBLAS
bf16 and fp8 GEMMs, HBM reads and FlashAttention through PyTorch 2.11 on one H200 SXM, each kernel replayed from a
CUDA graph): how close the catalog's H200 comes to those kernels, and what a fit to them recovers."""

import statistics
from pathlib import Path

import pytest

from flopwise.calibrate import kernel_time
from flopwise.calibrate.calibration import calibrate
from flopwise.profile import kernel_points_from, step_points_from
from flopwise.profile.hostfile import read_host_file
from flopwise.profile.microbench import MicrobenchConfig
from flopwise.specs.hardware import get_hardware, load_hardware_file

MEASURED = Path(__file__).parents[1] / "benchmarks" / "data" / "profile-h200.toml"


@pytest.fixture(scope="module")
def kernels():
    return kernel_points_from(read_host_file(MEASURED).profile)


def _errors(kernels, hw, kind, dtype):
    return [kernel_time(hw.efficiency, hw, p) / p.seconds - 1 for p in kernels if (p.kind, p.dtype) == (kind, dtype)]


def test_the_file_holds_the_grid_an_engine_runs(kernels):
    gemms = {(p.dtype, p.shape["m"]) for p in kernels if p.kind == "gemm"}
    assert {d for d, _ in gemms} == {"bf16", "fp8"}
    assert {m for _, m in gemms} == {1, 4, 16, 64, 256, 1024, 4096, 8192}
    # peak rates the cost model's efficiencies are shares of: the H200 datasheet's, not raised by any measurement
    hw = load_hardware_file(MEASURED)["h200-profiled"]
    assert hw.peak_tflops["bf16"] == 989.4 and hw.memory_bandwidth_gbs == 4800


def test_catalog_h200_predicts_the_measured_kernels(kernels):
    """The default GPU profile (fitted to whole engine steps) against single kernels: bf16 GEMMs +15.5% median
    (cuBLAS alone is faster than a GEMM inside an engine step), HBM reads +7.2%, FlashAttention 13.4%."""
    hw = get_hardware("h200")
    bf16 = _errors(kernels, hw, "gemm", "bf16")
    assert len(bf16) == 32 and statistics.median(bf16) == pytest.approx(0.155, abs=0.01)
    reads = _errors(kernels, hw, "read", "fp32")
    assert statistics.median(map(abs, reads)) == pytest.approx(0.072, abs=0.01)
    attention = _errors(kernels, hw, "attention", "bf16")
    assert statistics.median(map(abs, attention)) == pytest.approx(0.134, abs=0.01)


def test_fit_recovers_the_fp8_share_of_peak(kernels):
    """fp8 GEMMs count in the fit (through low_precision_compute_factor). Hand check: the best fp8 rate over the
    best bf16 rate, halved (fp8's peak is twice bf16's), is the fp8 share relative to bf16's."""
    best = {d: max(p.flops / p.seconds for p in kernels if (p.kind, p.dtype) == ("gemm", d)) for d in ("bf16", "fp8")}
    ratio = best["fp8"] / best["bf16"] / 2
    assert ratio == pytest.approx(0.90, abs=0.01)
    cal = calibrate(get_hardware("h200"), kernels=kernels)
    eff = cal.after.efficiency
    assert "low_precision_compute_factor" in cal.fit.fitted
    assert eff.low_precision_compute_factor == pytest.approx(ratio, abs=0.04)
    assert cal.fit.rms_after < cal.fit.rms_before
    fp8 = _errors(kernels, cal.after, "gemm", "fp8")
    assert statistics.median(map(abs, fp8)) < 0.08


def test_model_steps_load_as_llama_8b_on_the_profiled_entry():
    hw = load_hardware_file(MEASURED)["h200-profiled"]
    steps = step_points_from(read_host_file(MEASURED).profile, hw)
    assert [(s.label, s.batch, s.new_tokens) for s in steps][:2] == [("prefill", 1, 32), ("prefill", 1, 128)]
    assert len(steps) == 13 and steps[0].dep.model.num_layers == 32


def test_gpu_presets_copy_past_l2_and_time_fp8():
    for quick in (True, False):
        cfg = MicrobenchConfig.preset(quick, cuda=True)
        assert min(cfg.copy_mib) * 2**20 > 2 * 126e6  # B200's L2 is 126 MB
        assert cfg.dtypes == ("bf16", "fp8")
