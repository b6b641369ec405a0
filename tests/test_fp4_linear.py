"""NVFP4 linear layers on datacenter Blackwell run behind their activations' quantization
(`EfficiencyProfile.fp4_linear_factor`): the standalone GEMMs' rate is scaled, the fused MoE experts' is not."""

import pytest

from flopwise.api import deployment
from flopwise.cost.step import roofs
from flopwise.specs.hardware import get_hardware

LLAMA_70B = "meta-llama/Llama-3.3-70B-Instruct"


def test_b200_nvfp4_linear_layers_run_at_the_kernel_benchmarks_share():
    """vLLM PR 20578's B200 table: NVFP4 with quantization at a median 2.14x BF16's TFLOP/s, where the roofs give
    3x (9,000 x 0.75 over 2,250): 0.72 of the FP4 roof."""
    hw = get_hardware("b200")
    assert hw.efficiency.fp4_linear_factor == 0.72
    assert 9000 * 0.75 * 0.72 / 2250 == pytest.approx(2.16)
    r = roofs(deployment(LLAMA_70B, "b200", weights="nvfp4", engine="trtllm@1.0"))
    assert r.linear_rate == pytest.approx(9000e12 * 0.75 * hw.efficiency.compute_max)
    assert r.dense_rate == pytest.approx(r.linear_rate * 0.72) and r.proj_rate == r.dense_rate


def test_fused_moe_experts_and_other_math_keep_the_roof():
    moe = roofs(deployment("deepseek-v3", "b200", tp=8, num_gpus=8, weights="nvfp4", engine="trtllm@1.0"))
    assert moe.linear_rate == pytest.approx(9000e12 * 0.75 * get_hardware("b200").efficiency.compute_max)
    assert moe.dense_rate == pytest.approx(moe.linear_rate * 0.72)
    fp8 = roofs(deployment(LLAMA_70B, "b200", weights="fp8", engine="trtllm@1.0"))
    assert fp8.dense_rate == fp8.linear_rate  # FP8 math: no FP4 quantization step
    rtx = roofs(deployment(LLAMA_70B, "rtx-pro-6000-blackwell", weights="nvfp4", engine="trtllm@1.0"))
    assert rtx.dense_rate == rtx.linear_rate  # sm120: not set
    hopper = roofs(deployment("llama-3.1-8b", "h100-sxm", weights="nvfp4"))
    assert hopper.dense_rate == hopper.linear_rate  # no FP4 math: a weight-only kernel in 16-bit


@pytest.mark.parametrize("weights", ["fp8", "nvfp4", "int4-awq"])
def test_the_lm_head_multiplies_in_16_bit(weights):
    """Checkpoints keep the LM head unquantized (ModelOpt's exclude_modules, vLLM's ParallelLMHead): a 4,096-row
    prefill's head runs at the 16-bit rate whatever the format, its weights read at 2 bytes a parameter."""
    from flopwise.cost import prefill_shape, step_cost
    from flopwise.cost.layout import layout

    dep = deployment(LLAMA_70B, "b200", weights=weights, engine="vllm@0.15")
    r = roofs(dep)
    hw = get_hardware("b200")
    assert r.head_rate == pytest.approx(hw.peak_tflops["bf16"] * 1e12 * hw.efficiency.compute_max)
    head = next(o for o in step_cost(dep, prefill_shape(1, 4096, layout(dep).windows)).ops if o.name == "lm_head")
    assert head.peak_compute_s == pytest.approx(head.flops / (hw.peak_tflops["bf16"] * 1e12))
