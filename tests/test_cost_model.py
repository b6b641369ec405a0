"""The step-cost model against hand calculations."""

import math
import random
from dataclasses import replace

import pytest

import flopwise
from flopwise.api import deployment
from flopwise.cost import batch_shape, decode_shape, memory_plan, prefill_shape, step_cost, step_time
from flopwise.cost.attention import span_work
from flopwise.cost.batch import BatchShape, causal_pairs
from flopwise.cost.layout import layout
from flopwise.cost.memory import blocks_per_sequence, max_sequences
from flopwise.cost.parallel import allgather_time, allreduce_time
from flopwise.cost.step import (
    _combine,
    _device_s,
    _microbatches,
    _prompt_part,
    _run,
    _share,
    decode_step_time,
    full_step_time,
    host_s,
    roofs,
    round_host_s,
)
from flopwise.errors import SpecError
from flopwise.sim.shape import ShapeBuilder
from flopwise.specs.engine import get_engine
from flopwise.specs.expert_load import experts_touched, routing_shape
from flopwise.specs.hardware import GIB, get_hardware
from flopwise.specs.model_catalog import get_model


def _op(cost, name):
    return next(o for o in cost.ops if o.name == name)


def test_causal_pairs_closed_form_matches_brute_force():
    for c in (0, 3, 10, 50):
        for n in (1, 2, 7, 40):
            for w in (None, 5, 16, 64):
                brute = sum(min(c + j, w) if w else c + j for j in range(1, n + 1))
                assert causal_pairs(c, n, w) == brute


def test_seed_example_7b_fp16_decode_on_a100():
    """A 7B FP16 decode step on A100: ~0.045 ms of compute at peak, ~7 ms of weight traffic: ~150x apart."""
    dep = deployment("llama-2-7b", "a100-sxm-80gb", weights="fp16")
    cost = step_cost(dep, decode_shape(1, 0, layout(dep).windows))
    weights = sum(o.weight_bytes for o in cost.ops)
    # 13.2 GB streamed each step: every weight but the embedding table (only its rows are gathered);
    # the whole model is 13.5 GB ("a 7B FP16 model is 14 GB")
    assert dep.model.total_params * 2 == pytest.approx(13.48e9, rel=1e-3)
    assert weights == pytest.approx(2 * (6.738e9 - 32000 * 4096), rel=1e-3)
    assert cost.peak_memory_s == pytest.approx(weights / 2.039e12, rel=0.01)  # >= 6.6 ms at 2.04 TB/s
    assert cost.peak_compute_s == pytest.approx(2 * (6.738e9 - 32000 * 4096) / 312e12, rel=0.01)  # 42 us
    assert 140 < cost.peak_memory_s / cost.peak_compute_s < 170
    assert cost.bound == "memory"


def test_linear_flops_are_two_per_weight_per_token():
    dep = deployment("llama-3.1-8b", "h100-sxm")
    cost = step_cost(dep, prefill_shape(1, 100, layout(dep).windows))
    mlp = _op(cost, "mlp")
    assert mlp.flops == 2 * 100 * 3 * 4096 * 14336 * 32
    qkvo = _op(cost, "qkv_o_proj")
    assert qkvo.flops == 2 * 100 * (2 * 4096 * 4096 + 2 * 4096 * 1024) * 32
    assert _op(cost, "lm_head").flops == 2 * 1 * 128256 * 4096  # only the last position emits a token


def test_prefill_attention_flops_causal():
    dep = deployment("llama-3.1-8b", "h100-sxm")
    cost = step_cost(dep, prefill_shape(1, 100, layout(dep).windows))
    pairs = 100 * 101 // 2
    assert _op(cost, "attention").flops == pairs * 4 * 32 * 128 * 32


def test_decode_reads_the_whole_kv_cache():
    dep = deployment("llama-3.1-8b", "h100-sxm")
    cost = step_cost(dep, decode_shape(4, 1000, layout(dep).windows))
    # 4 sequences x (1000 cached read + 1 written) x 131,072 bytes per token over 32 layers
    assert _op(cost, "attention").kv_bytes == 4 * 1001 * 131_072


def test_int8_halves_decode_weight_bytes():
    base = deployment("llama-3.1-8b", "a100-sxm-80gb", weights="fp16")
    q8 = deployment("llama-3.1-8b", "a100-sxm-80gb", weights="int8")
    shape = decode_shape(1, 512, layout(base).windows)
    for name in ("qkv_o_proj", "mlp"):
        assert _op(step_cost(q8, shape), name).weight_bytes * 2 == _op(step_cost(base, shape), name).weight_bytes
    assert step_time(q8, shape) < step_time(base, shape)


def test_int4_awq_bytes_include_scales():
    dep = deployment("llama-3.1-8b", "a100-sxm-80gb", weights="int4-awq")
    assert dep.weights.bits_per_weight == pytest.approx(4 + (16 + 4) / 128)


def test_fp8_falls_back_to_16bit_math_on_a100():
    hw = deployment("llama-3.1-8b", "a100-sxm-80gb", weights="fp8").hardware
    assert hw.compute_dtype("fp8", weight_only_fallback=True) == "bf16"
    h100 = deployment("llama-3.1-8b", "h100-sxm", weights="fp8").hardware
    assert h100.compute_dtype("fp8") == "fp8"


def test_mixed_batch_is_one_call():
    dep = deployment("llama-3.1-8b", "h100-sxm")
    w = layout(dep).windows
    mixed = batch_shape([(1, 500), (1, 800), (256, 0)], w)
    assert mixed.num_tokens == 258 and mixed.num_logits == 3
    work = mixed.attention[None]
    assert work.decode_pairs == 501 + 801 and work.prefill_pairs == 256 * 257 // 2
    t = step_time(dep, mixed)
    assert step_time(dep, batch_shape([(256, 0)], w)) < t


def test_moe_touches_expected_distinct_experts():
    dep = deployment("mixtral-8x7b", "h100-sxm", tp=2)
    cost1 = step_cost(dep, decode_shape(1, 100, layout(dep).windows))
    moe1 = _op(cost1, "moe_experts")
    expert_gpu = 3 * 4096 * 14336 / 2
    router = 4096 * 8
    # one token touches exactly k = 2 of 8 experts
    assert moe1.weight_bytes == pytest.approx(32 * (2 * expert_gpu + router) * 2)
    big = _op(step_cost(dep, decode_shape(64, 100, layout(dep).windows)), "moe_experts")
    # 63 more tokens under gamma(2) popularity: 8 - 6 / (1 + 63 * 2 / 16)^2 = 7.924 of 8 (uniform: 8 - 6 * 0.75^63)
    touched = 8 - 6 / (1 + 63 * 2 / (8 * 2)) ** 2
    assert touched == pytest.approx(7.9238, abs=1e-4)
    assert big.weight_bytes == pytest.approx(32 * (touched * expert_gpu + router) * 2)


def test_uneven_routing_touches_fewer_experts_than_uniform():
    """DeepSeek-V3's router (256 experts, top-8): one token reads exactly 8; 32 tokens under gamma(2) popularity
    256 - 248 / (1 + 31 * 8 / 512)^2 = 143.45 (uniform routing: 256 * (1 - (31/32)^32) = 163.3); every expert
    once the batch is large; a very large shape gives back uniform routing."""
    assert experts_touched(256, 8, 1) == pytest.approx(8.0)
    assert experts_touched(256, 8, 32) == pytest.approx(143.45, abs=0.01)
    assert experts_touched(256, 8, 32) < 256 * (1 - (1 - 8 / 256) ** 32)
    assert experts_touched(256, 8, 1e6) == pytest.approx(256, abs=0.01)
    assert experts_touched(256, 8, 32, shape=1e9) == pytest.approx(256 - 248 * math.exp(-31 * 8 / 256), rel=1e-6)


def test_the_measured_router_routes_more_unevenly():
    """DeepSeek's router, the one with a published popularity measurement, takes its own gamma shape (a = 1):
    32 tokens touch 256 - 248 / (1 + 31 * 8 / 256) = 130.03 experts, not gamma(2)'s 143.45; a decode step of 32
    sequences on 8 x H200 reads that many experts' slices per MoE layer. Other routers keep a = 2."""
    assert routing_shape(get_model("deepseek-v3")) == 1.0 and routing_shape(get_model("qwen3-30b-a3b")) == 2.0
    assert experts_touched(256, 8, 32, shape=1.0) == pytest.approx(130.03, abs=0.01)
    dep = deployment("deepseek-v3", "h200", tp=8)
    g = next(x for x in layout(dep).groups if x.is_moe)
    moe = _op(step_cost(dep, decode_shape(32, 2000, layout(dep).windows)), "moe_experts")
    want = g.count * (experts_touched(256, 8, 32, shape=1.0) * g.expert_params * layout(dep).weight_bytes_per_param
                      + g.router_params * layout(dep).dense_weight_bytes_per_param)
    assert moe.weight_bytes == pytest.approx(want, rel=1e-9)


def test_moe_activation_traffic_counts_each_rows_intermediate_and_output():
    """DeepSeek-V3 at tp 8, a 1,000-token prefill: 8,000 token-expert rows, 256 intermediate columns per GPU.
    fused_experts reads each row's token (8000 x 7168), writes and re-reads gate|up (2 x 2 x 8000 x 256), writes and
    re-reads the activated half (2 x 8000 x 256), writes each row's full-width output and moe_sum reads it back
    (2 x 8000 x 7168), then writes each token once (1000 x 7168): 191.5 M elements per MoE layer (11.1 G over 58),
    2 bytes each, about 9x the token in and out plus the intermediates alone."""
    dep = deployment("deepseek-v3", "h200", tp=8)
    moe = _op(step_cost(dep, prefill_shape(1, 1000, layout(dep).windows)), "moe_experts")
    per_layer = 3 * 8000 * 7168 + 6 * 8000 * 256 + 1000 * 7168
    assert per_layer == 191_488_000
    assert moe.act_bytes == pytest.approx(58 * per_layer * 2)
    assert moe.act_bytes / (58 * 1000 * (2 * 7168 + 3 * 8 * 256) * 2) == pytest.approx(9.35, abs=0.01)


def test_moe_compute_factor_slows_only_the_grouped_gemms():
    """KernelFactors.moe_compute = 0.5: the moe_experts operator's compute time doubles (a 4,096-token Mixtral
    prefill, compute-bound), its memory time and every other operator stay."""
    eng = deployment("mixtral-8x7b", "h100-sxm", tp=2).engine
    assert eng.kernels.moe_compute == 0.5  # vLLM's Triton fused_moe (catalog/engines/vllm.toml)
    base = deployment("mixtral-8x7b", "h100-sxm", tp=2,
                      engine=replace(eng, kernels=replace(eng.kernels, moe_compute=1.0)))
    half = deployment("mixtral-8x7b", "h100-sxm", tp=2,
                      engine=replace(eng, kernels=replace(eng.kernels, moe_compute=0.5)))
    shape = prefill_shape(1, 4096, layout(base).windows)
    a, b = step_cost(base, shape), step_cost(half, shape)
    assert _op(b, "moe_experts").compute_s == pytest.approx(2 * _op(a, "moe_experts").compute_s)
    assert _op(b, "moe_experts").memory_s == pytest.approx(_op(a, "moe_experts").memory_s)
    assert _op(b, "qkv_o_proj").time_s == pytest.approx(_op(a, "qkv_o_proj").time_s)
    assert b.time_s > a.time_s * 1.2


def test_a_rate_limited_tensor_path_lifts_only_the_moe_kernels_share():
    """H20: FP8 296 TFLOP/s where its SMs (FP32 44 of H100 SXM's 66.9) would reach 1,301.5 at Hopper's full
    per-SM rate, a throttle of 4.397; L20 over L40S's per-SM rate: 2.0; H100 none. The fused-MoE kernels' fitted
    0.5 of the compute roof is work at the SMs' pace, so on H20 it rises to min(0.5 x 4.397, 1) = 1: a 4,096-token
    Mixtral prefill's moe_experts compute halves there and nowhere else, the projections' does not move."""
    h20, l20, h100 = (get_hardware(g) for g in ("h20", "l20", "h100-sxm"))
    assert h20.tensor_throttle("fp8") == pytest.approx(1301.5 / 296)
    assert h20.tensor_throttle("bf16") == pytest.approx(650.7 / 148)
    assert h20.tensor_throttle("fp8") == pytest.approx((44 / 66.9) * (1978.9 / 296), rel=2e-3)
    assert l20.tensor_throttle("fp8") == pytest.approx((59.8 / 91.6) * (733 / 239), rel=2e-3)
    assert h100.tensor_throttle("fp8") == 1.0
    eng = get_engine("vllm@0.11")
    assert eng.kernels.moe_compute == 0.5
    full = replace(eng, kernels=replace(eng.kernels, moe_compute=1.0))
    shape = prefill_shape(1, 4096, layout(deployment("mixtral-8x7b", "h20", tp=2)).windows)
    for gpu, ratio in (("h20", 1.0), ("h100-sxm", 2.0)):
        a, b = (step_cost(deployment("mixtral-8x7b", gpu, tp=2, engine=e), shape) for e in (full, eng))
        assert _op(b, "moe_experts").compute_s == pytest.approx(ratio * _op(a, "moe_experts").compute_s)
        assert _op(b, "qkv_o_proj").compute_s == pytest.approx(_op(a, "qkv_o_proj").compute_s)
    assert roofs(deployment("mixtral-8x7b", "l20", tp=2, engine=eng)).moe_compute_eff == pytest.approx(
        0.5 * l20.tensor_throttle("bf16"))


def test_a_small_decode_batch_pays_whole_64_row_mmas_where_tensor_cores_are_slow():
    """Hopper's wgmma multiplies at least 64 rows: a batch-1 decode step's dense GEMMs cost 64x their FLOPs at the
    tensor rate (peak x compute_max = 148 x 0.75 TFLOP/s on H20). Qwen3-32B's MLP (64 layers x 2 x 5120 x 25600 x 3
    FLOPs per token) then takes 64 x 50.3 GFLOP / 111 TFLOP/s = 29.0 ms on H20, twice its 14.8 ms weight read; on
    H100 the same 64 rows take 4.3 ms under a 17.7 ms read, so its figure is the roofline's as before."""
    flops = 64 * 2 * 5120 * 25600 * 3
    for gpu, bound in (("h20", True), ("h100-sxm", False)):
        dep = deployment("Qwen/Qwen3-32B", gpu)
        mlp = _op(step_cost(dep, decode_shape(1, 1000, layout(dep).windows)), "mlp")
        assert mlp.flops == pytest.approx(flops)
        padded = 64 * flops / (dep.hardware.peak_tflops["bf16"] * 1e12 * 0.75)
        if bound:
            assert mlp.compute_s == pytest.approx(padded) == pytest.approx(29.0e-3, rel=2e-3)
            assert mlp.time_s == pytest.approx(padded + mlp.overhead_s)
            assert mlp.memory_s == pytest.approx(14.84e-3, rel=2e-3)
        else:
            assert padded < mlp.memory_s and mlp.compute_s == pytest.approx(3 * flops / roofs(dep).dense_rate)
    assert roofs(deployment("Qwen/Qwen3-32B", "a100-sxm-80gb")).min_mma_rows == 0  # Ampere: mma.sync, 16 rows
    # FP32 weights multiply on the CUDA cores: nothing to pad, so H100's batch-1 decode is its weight read (30.3 GB)
    fp32 = deployment("llama-3.1-8b", "h100-sxm", weights="fp32")
    assert roofs(fp32).min_mma_rows == 0
    dec = flopwise.estimate("llama-3.1-8b", "h100-sxm", weights="fp32").to_dict()["decode"]
    assert dec["bound"] == "memory" and dec["compute_ms"] < 0.1 * dec["memory_ms"]


def test_unthrottled_rates_must_exceed_the_peak():
    with pytest.raises(SpecError, match="unthrottled_tflops.fp8"):
        replace(get_hardware("h20"), unthrottled_tflops={"fp8": 100.0})
    with pytest.raises(SpecError, match="unthrottled_tflops.fp4 needs a peak_tflops.fp4"):
        replace(get_hardware("h20"), unthrottled_tflops={"fp4": 1000.0})


def test_grouped_routing_as_pytorch_ops_costs_six_more_kernels_per_moe_layer():
    """vLLM before 0.10.2 routes the DeepSeek layout (group-limited top-k) with PyTorch ops, 7 launches where the
    fused kernel of PR #23274 is one: a DeepSeek-V3 decode step at TP 8 pays 58 MoE layers x 6 kernels x the
    H200's 6 us more, on the GPU only (a V0 prefill's eager floor counts modelled kernels and is unchanged);
    Mixtral's softmax top-k does not change."""
    old, new = get_engine("vllm@0.10.1"), get_engine("vllm@0.10.2")
    assert (old.kernels.grouped_topk_kernels, new.kernels.grouped_topk_kernels) == (7, 1)
    a, b = (deployment("deepseek-v3", "h200", tp=8, engine=e) for e in (old, new))
    shape = decode_shape(4, 1000, layout(a).windows)
    kernel_s = a.hardware.efficiency.kernel_overhead_s
    assert step_time(a, shape) - step_time(b, shape) == pytest.approx(58 * 6 * kernel_s, rel=1e-9)
    assert decode_step_time(a, 4, 4000) - decode_step_time(b, 4, 4000) == pytest.approx(58 * 6 * kernel_s, rel=1e-9)
    m_old, m_new = (deployment("mixtral-8x7b", "h100-sxm", tp=2, engine=e) for e in (old, new))
    mixtral = decode_shape(4, 1000, layout(m_old).windows)
    assert _op(step_cost(m_old, mixtral), "moe_experts").time_s == _op(step_cost(m_new, mixtral), "moe_experts").time_s


def test_an_engines_kernel_overhead_scale_reaches_every_kernel():
    """`KernelFactors.kernel_overhead_scale` multiplies the hardware's fixed cost per kernel: a Llama-3.1-8B decode
    step of one sequence on an H100 runs 32 layers x (2 projection + 2 attention + 2 MLP + 2 norm kernels) + the
    embedding's and the LM head's = 258 kernels, so halving the scale takes 258 x 6 us / 2 = 774 us off the step,
    in the general and the decode fast path alike, and nothing else moves."""
    base = get_engine("vllm@0.11")
    half = replace(base, kernels=replace(base.kernels, kernel_overhead_scale=0.5))
    a, b = (deployment("llama-3.1-8b", "h100-sxm", engine=e) for e in (base, half))
    kernel_s = a.hardware.efficiency.kernel_overhead_s
    assert roofs(b).kernel_s == pytest.approx(0.5 * kernel_s, rel=1e-12)
    shape = decode_shape(1, 1000, layout(a).windows)
    assert step_time(a, shape) - step_time(b, shape) == pytest.approx(258 * kernel_s / 2, rel=1e-9)
    assert decode_step_time(a, 1, 1000) - decode_step_time(b, 1, 1000) == pytest.approx(258 * kernel_s / 2, rel=1e-9)


def test_llamacpp_kernels_cost_more_on_hbm_parts():
    """llama.cpp's fixed cost per kernel on a chip with HBM (`memory_kind` hbm) is its hbm_kernel_overhead_scale
    (2.75, fitted) times its cost elsewhere: at b7000 (kernel_overhead_scale 0.5) 6 us x 0.5 x 2.75 = 8.25 us on an
    H100 PCIe and 3 us on an L4 (GDDR6) or an RTX 4090; vLLM's kernels keep the hardware's 6 us on the H100, so a
    Llama-2-7B Q4_0 decode step on the H100 PCIe gains 1.75 x its llama.cpp kernels' 3 us each, nothing else."""
    ll = get_engine("llamacpp@b7000", frontend="none")
    assert ll.kernels.hbm_kernel_overhead_scale == 2.75 and ll.kernels.kernel_overhead_scale == 0.5
    h100, l4, g4090 = (deployment("llama-2-7b", gpu, weights="q4_0", engine=ll) for gpu in
                       ("h100-pcie", "l4", "rtx-4090"))
    assert (h100.hardware.memory_kind, l4.hardware.memory_kind) == ("hbm", "gddr")
    assert roofs(h100).kernel_s == pytest.approx(6e-6 * 0.5 * 2.75, rel=1e-12)
    assert roofs(l4).kernel_s == roofs(g4090).kernel_s == pytest.approx(3e-6, rel=1e-12)
    assert roofs(deployment("llama-3.1-8b", "h100-pcie", engine="vllm@0.11")).kernel_s == pytest.approx(6e-6)
    flat = replace(ll, kernels=replace(ll.kernels, hbm_kernel_overhead_scale=1.0))
    other = deployment("llama-2-7b", "h100-pcie", weights="q4_0", engine=flat)
    shape = decode_shape(1, 600, layout(h100).windows)
    kernels = round(sum(o.overhead_s for o in step_cost(other, shape).ops) / roofs(other).kernel_s)
    assert step_time(h100, shape) - step_time(other, shape) == pytest.approx(kernels * 3e-6 * 1.75, rel=1e-9)
    with pytest.raises(SpecError, match="hbm_kernel_overhead_scale must be in"):
        replace(ll.kernels, hbm_kernel_overhead_scale=0.0)


def test_llamacpp_mmq_int8_rate_is_capped_per_sm_and_clock():
    """llama.cpp's MMQ issues int8 MMAs at most at 2,048 ops per SM and clock (`mmq_sm_ops_per_clock`): on an A100
    (108 SMs at 1.41 GHz) its int8 roof is 2,048 x 108 x 1.41e9 = 311.9 TOPS, not the 624 of the datasheet, and on
    an H100 PCIe 2,048 x 114 x 1.755e9 = 409.7 TOPS, not 1,513; a part the catalog gives no SM count keeps its int8
    peak (an RTX 4090's 660.6, which is the same rate); vLLM's int8 GEMMs keep the A100's 624; a Q4_0 7B prompt on
    the A100 takes about twice as long as uncapped."""
    ll = get_engine("llamacpp@b7000", frontend="none")
    a100, h100, g4090 = (deployment("llama-2-7b", gpu, weights="q4_0", engine=ll) for gpu in
                         ("a100-sxm-80gb", "h100-pcie", "rtx-4090"))
    assert roofs(a100).nominal_peak_linear == pytest.approx(2048 * 108 * 1.41e9, rel=1e-12)
    assert roofs(h100).nominal_peak_linear == pytest.approx(2048 * 114 * 1.755e9, rel=1e-12)
    assert get_hardware("rtx-4090").sm_count is None
    assert roofs(g4090).nominal_peak_linear == pytest.approx(get_hardware("rtx-4090").peak_tflops["int8"] * 1e12)
    vllm = deployment("llama-2-7b", "a100-sxm-80gb", weights="int8-w8a8", engine="vllm@0.11")
    assert roofs(vllm).nominal_peak_linear == pytest.approx(624e12)
    free = deployment("llama-2-7b", "a100-sxm-80gb", weights="q4_0",
                      engine=replace(ll, kernels=replace(ll.kernels, mmq_sm_ops_per_clock=0.0)))
    shape = prefill_shape(1, 512, layout(a100).windows)
    assert 1.7 < step_time(a100, shape) / step_time(free, shape) < 2.0
    with pytest.raises(SpecError, match="sm_count"):
        replace(get_hardware("h100-pcie"), sm_count=0)
    # the HIP build's tiles on a compute unit: an MI300X (304 CUs at 2.1 GHz) 2,048 x 304 x 2.1e9 = 1,307.4 TOPS, half
    # its 2,614.9 MFMA int8 peak; an MI355X 2,048 x 256 x 2.4e9 = 1,258.3, a quarter of 5,033; an MI250X GCD's own
    # 191.5 is below its cap (2,048 x 110 x 1.7e9)
    mi300, mi355, mi250 = (deployment("llama-2-7b", gpu, weights="q4_0", engine=ll) for gpu in
                           ("mi300x", "mi355x", "mi250x"))
    assert roofs(mi300).nominal_peak_linear == pytest.approx(2048 * 304 * 2.1e9, rel=1e-12)
    assert roofs(mi355).nominal_peak_linear == pytest.approx(2048 * 256 * 2.4e9, rel=1e-12)
    assert roofs(mi250).nominal_peak_linear == pytest.approx(191.5e12, rel=1e-12)


def test_experts_only_formats_run_the_other_gemms_at_the_16_bit_rate():
    """gpt-oss's MXFP4 checkpoint quantizes the routed experts alone: its attention projections are bf16, so on an
    H100 (no FP4 math) they do not pay MXFP4's dequantization (gemm_efficiency 0.5), and on an MI355X (native MXFP4)
    they do not run at the 10,066 TFLOPS FP4 peak. By hand, a 4,096-token prompt of gpt-oss-120b at tp 1: the
    projections' compute time is 2 x 4,096 x params x 36 layers (18 sliding, 18 full, the same projections) / (bf16
    peak x compute_max x m / (m + half_m)), m = 4,096, the routed experts still at the format's own rate."""
    for gpu in ("h100-sxm", "mi355x"):
        dep = deployment("gpt-oss-120b", gpu, engine="vllm@0.11")
        r, hw = roofs(dep), get_hardware(gpu)
        assert r.nominal_peak_dense == pytest.approx(hw.peak_tflops["bf16"] * 1e12)
        assert r.dense_rate == pytest.approx(hw.peak_tflops["bf16"] * 1e12 * hw.efficiency.compute_max)
        shape = prefill_shape(1, 4096, layout(dep).windows)
        proj = [o for o in step_cost(dep, shape).ops if o.name == "qkv_o_proj"]  # one per layer group
        groups = layout(dep).groups
        assert [g.count for g in groups] == [18, 18] and groups[0].attn.params == groups[1].attn.params
        m, half = 4096, hw.efficiency.compute_half_m
        flops = 2 * 4096 * groups[0].attn.params * 36
        assert sum(o.flops for o in proj) == pytest.approx(flops)
        assert sum(o.compute_s for o in proj) == pytest.approx(flops * (m + half) / (m * r.dense_rate), rel=1e-9)
        assert r.linear_rate != pytest.approx(r.dense_rate)  # the experts: MXFP4's own rate
    h100 = roofs(deployment("gpt-oss-120b", "h100-sxm", engine="vllm@0.11"))
    assert h100.linear_rate == pytest.approx(0.5 * h100.dense_rate)  # weight-only MXFP4 in bf16, gemm_efficiency 0.5
    dense = roofs(deployment("llama-3.1-8b", "h100-sxm", weights="fp8"))  # a format that covers every GEMM
    assert dense.dense_rate == dense.linear_rate and dense.nominal_peak_dense == dense.nominal_peak_linear


def test_nvfp4_mlp_keeps_the_attention_projections_16_bit():
    """nvfp4-mlp (nvidia/DeepSeek-R1-FP4) holds DeepSeek-V3's MLA projections in bf16 and every MLP in NVFP4. By hand
    on 8 x B200 at tp 8: the weights a GPU holds grow by its projections' parameters x (2 - 4.5 / 8) bytes, a
    decode step reads them at 2 bytes a parameter, and a 4,096-token prompt multiplies them at the bf16 peak
    (2 x 4,096 x params / (bf16 peak x compute_max x m / (m + half_m))); the routed experts are priced as nvfp4's."""
    mlp, fp4 = (deployment("deepseek-v3", "b200", num_gpus=8, tp=8, weights=w, engine="sglang@0.5.6")
                for w in ("nvfp4-mlp", "nvfp4"))
    lm, lf = layout(mlp), layout(fp4)
    proj = sum(g.count * g.attn.params for g in lm.groups)
    assert lm.attn_weight_bytes_per_param == 2.0 and lf.attn_weight_bytes_per_param == 4.5 / 8
    assert lm.weight_bytes_per_gpu - lf.weight_bytes_per_gpu == pytest.approx(proj * (2 - 4.5 / 8), rel=1e-12)
    hw = get_hardware("b200")
    r = roofs(mlp)
    assert r.proj_rate == pytest.approx(hw.peak_tflops["bf16"] * 1e12 * hw.efficiency.compute_max)
    assert r.linear_rate == roofs(fp4).linear_rate  # the routed experts: NVFP4's rate
    # the dense and shared MLPs: NVFP4's standalone linear layers (`fp4_linear_factor`, 0.72 on B200)
    assert r.dense_rate == pytest.approx(r.linear_rate * hw.efficiency.fp4_linear_factor, rel=1e-12)
    shape = prefill_shape(1, 4096, lm.windows)
    ops = [o for o in step_cost(mlp, shape).ops if o.name == "qkv_o_proj"]
    m, half = 4096, hw.efficiency.compute_half_m
    assert sum(o.weight_bytes for o in ops) == pytest.approx(proj * 2.0, rel=1e-12)
    assert sum(o.compute_s for o in ops) == pytest.approx(2 * 4096 * proj * (m + half) / (m * r.proj_rate), rel=1e-9)
    moe = [[o.time_s for o in step_cost(d, shape).ops if o.name == "moe_experts"] for d in (mlp, fp4)]
    assert moe[0] == moe[1]
    # a decode step of 64 sequences reads the projections at 2 bytes: slower than nvfp4's at 4.5 bits
    dec = decode_shape(64, 2048, lm.windows)
    assert step_time(mlp, dec) > step_time(fp4, dec)


def test_llamacpp_mmq_runs_k_quants_at_their_own_rate():
    """A k-quant tile unpacks its sub-block scales before the int8 MMAs: MMQ multiplies Q4_K_M at 0.93 of Q4_0's rate
    (PR #8495: Q5_K_S / Q4_0 0.92-0.94 on an RTX 4090), so a compute-bound prompt's MLP takes 1 / 0.93 as long; on
    Metal (dequantize-in-tile at the f16 roof) the two are alike."""
    ll = get_engine("llamacpp@b7000", frontend="none")
    shape = prefill_shape(1, 512, layout(deployment("llama-3.1-8b", "rtx-4090", engine=ll)).windows)

    def mlp_compute(gpu, weights):
        d = deployment("llama-3.1-8b", gpu, weights=weights, engine=ll)
        return next(o.compute_s for o in step_cost(d, shape).ops if o.name == "mlp")
    assert mlp_compute("rtx-4090", "q4_k_m") / mlp_compute("rtx-4090", "q4_0") == pytest.approx(1 / 0.93, rel=1e-9)
    assert mlp_compute("apple-m2-ultra", "q4_k_m") == pytest.approx(mlp_compute("apple-m2-ultra", "q4_0"), rel=1e-9)


def test_llamacpp_computes_a_long_prompt_in_ubatches():
    """llama.cpp runs a batch in passes of at most n_ubatch (512) tokens: a 2,048-token prompt is 4 passes of 512,
    each pricing its operators again (every weight read 4 times), its logit row in the last; the host's step cost
    once. The attention pairs (2048 x 2049 / 2) are shared evenly. Other engines keep one pass."""
    ll = deployment("llama-3.1-8b", "rtx-4090", engine="llamacpp@b7000", weights="q4_0", frontend="none")
    assert ll.engine.kernels.ubatch_tokens == 512
    lay = layout(ll)
    shape = prefill_shape(1, 2048, lay.windows)
    pairs = 2048 * 2049 // 2
    assert shape.attention[None].prefill_pairs == pairs
    work = {None: replace(shape.attention[None], prefill_pairs=pairs // 4)}
    first, last = BatchShape(512, 1, 0, work), BatchShape(512, 1, 1, work)
    a, b = _run(ll, first, False), _run(ll, last, False)
    device = 3 * _device_s(ll, first, a) + _device_s(ll, last, b)
    assert step_time(ll, shape) == pytest.approx(_combine(ll, device, host_s(ll, shape)), rel=1e-12)
    cost = step_cost(ll, shape)
    assert cost.time_s == pytest.approx(step_time(ll, shape), rel=1e-12)
    assert full_step_time(ll, 2048, 1, 1, (pairs, 0, 0, 0)) == pytest.approx(cost.time_s, rel=1e-12)
    one = {o.name: o for o in step_cost(ll, first).ops}
    ops = {o.name: o for o in cost.ops}
    assert ops["mlp"].weight_bytes == pytest.approx(4 * one["mlp"].weight_bytes, rel=1e-12)
    assert ops["lm_head"].weight_bytes == pytest.approx(step_cost(ll, last).ops[-1].weight_bytes, rel=1e-12)
    # 512 tokens are one pass; vLLM has no ubatch
    p512 = prefill_shape(1, 512, lay.windows)
    assert step_time(ll, p512) == pytest.approx(_combine(ll, _device_s(ll, p512, _run(ll, p512, False)),
                                                         host_s(ll, p512)), rel=1e-12)
    vl = deployment("llama-3.1-8b", "rtx-4090", engine="vllm@0.11", frontend="none")
    assert vl.engine.kernels.ubatch_tokens == 0
    assert step_time(vl, shape) == pytest.approx(
        _combine(vl, _device_s(vl, shape, _run(vl, shape, False)), host_s(vl, shape)), rel=1e-12)


def test_tensor_parallel_splits_weights_and_adds_allreduce():
    one = deployment("llama-3.1-70b", "h100-sxm", tp=4)
    shape = decode_shape(1, 100, layout(one).windows)
    cost = step_cost(one, shape)
    ar = _op(cost, "tp_allreduce")
    assert ar.count == 2 * 80
    assert ar.comm_bytes == pytest.approx(160 * 3 * 8192 * 2)  # one-shot: each GPU's 16 KiB read by its 3 peers
    assert _op(cost, "mlp").weight_bytes == pytest.approx(80 * 3 * 8192 * 28672 / 4 * 2)


def test_allreduce_takes_the_faster_of_one_shot_and_ring_by_hand():
    h100 = get_hardware("h100-sxm")  # NVLink 450 GB/s at 0.8: 360 GB/s
    link = 450e9 * 0.8
    small = 512 * 1024  # one-shot: 8 us + 3 peers x 0.5 MiB; the ring would take 12 us + 1.5 x 0.5 MiB
    t, sent = allreduce_time(h100, 4, small)
    assert t == pytest.approx(8e-6 + 3 * small / link) and sent == pytest.approx(3 * small)
    assert t * 1e6 == pytest.approx(12.37, abs=0.01)  # measured: vLLM one-shot 10 us, NCCL 17 us (vLLM PR 24111)
    big = 4 * 1024 * 1024  # ring: 12 us + 1.5 x 4 MiB = 29.5 us (one-shot 43 us); measured NCCL 37 us, symmetric 29-35
    t, sent = allreduce_time(h100, 4, big)
    assert t == pytest.approx(12e-6 + 1.5 * big / link) and sent == pytest.approx(1.5 * big)
    pcie = get_hardware("l40s")  # no fabric: NCCL's ring at the PCIe latency
    t, _ = allreduce_time(pcie, 4, small)
    assert t == pytest.approx(25e-6 + 1.5 * small / (pcie.interconnect_gbs * 1e9 * 0.6))
    assert allreduce_time(h100, 1, big) == (0.0, 0.0)


def test_the_export_hopper_and_ampere_parts_differ_from_theirs_only_in_nvlink():
    """H800 and A800 are H100 SXM and A100 SXM 80GB with NVLink cut to 400 GB/s both ways (200 per direction): the
    same peaks, memory and bandwidth; a 16 MiB ring all-reduce over 8 takes 12 us + 2 x 7/8 x 16 MiB / (200 GB/s x
    0.8) = 195.5 us on either, against 93.6 us on H100's 450 GB/s."""
    for export, base in (("h800", "h100-sxm"), ("a800-sxm-80gb", "a100-sxm-80gb")):
        e, b = get_hardware(export), get_hardware(base)
        assert (e.peak_tflops, e.memory_gib, e.memory_bandwidth_gbs, e.sm_class) == (
            b.peak_tflops, b.memory_gib, b.memory_bandwidth_gbs, b.sm_class)
        assert e.interconnect_gbs == 200
        m = 16 * 1024 * 1024
        t, _ = allreduce_time(e, 8, m)
        assert t == pytest.approx(12e-6 + 2 * 7 / 8 * m / (200e9 * 0.8)) == pytest.approx(195.5e-6, rel=1e-3)
    assert allreduce_time(get_hardware("h100-sxm"), 8, 16 * 1024 * 1024)[0] == pytest.approx(93.56e-6, rel=1e-3)


def test_a_tensor_group_across_servers_all_reduces_over_the_network_by_hand():
    h100 = get_hardware("h100-sxm")  # 8 per server over NVLink (360 GB/s achieved), a 50 GB/s NIC per GPU at 0.85
    link, nic = 450e9 * 0.8, 50e9 * 0.85
    m = 16 * 1024 * 1024  # a 1024-token prefill's hidden states of Llama-3.1-70B (1024 x 8192 x 2 B)
    t, sent = allreduce_time(h100, 16, m, per_node=8)
    inside = 12e-6 + 2 * 7 / 8 * m / link  # ring over the server's 8 (one-shot would read 7 x 16 MiB)
    between = 2 * (1 / 2) * m / 8  # each GPU's eighth, all-reduced between the 2 servers over its own NIC
    assert t == pytest.approx(inside + 50e-6 + between / nic) and sent == pytest.approx(2 * 7 / 8 * m + between)
    assert t * 1e6 == pytest.approx(192.9, abs=0.1)  # vs 99 us had the 16 shared one NVLink domain
    # a replica wider than one server spans the servers it fills unless told to fit one; spread, its decode pays
    # the NIC per all-reduce (160 a step) and is slower than TP 8 inside one server
    with pytest.raises(SpecError, match=r"more than one server holds \(8 x h100-sxm.*--nodes 2"):
        deployment("llama-3.1-70b", "h100-sxm", tp=16, nodes=1)
    assert deployment("llama-3.1-70b", "h100-sxm", tp=16).nodes == 2
    assert deployment("llama-3.1-405b", "gb200", tp=16).nodes == 1  # one NVL72 NVLink domain
    # the all-gather the same way, at half the all-reduce's traffic: each GPU gathers the other node's 1/16 shares
    # over its NIC, then the server all-gathers the 2/16 slices over NVLink
    g, g_sent = allgather_time(h100, 16, m, per_node=8)
    assert g == pytest.approx(8e-6 + 7 / 8 * m / link + 50e-6 + m / 16 / nic) and g < t
    assert g_sent == pytest.approx(7 / 8 * m + m / 16)
    # a node is one NVLink domain: GB200 NVL72's 72 GPUs are one, so TP 16 there never touches the NIC; TP 8 split
    # over two H100 servers does
    nvl = deployment("llama-3.1-405b", "gb200", tp=16, weights="fp8")
    assert nvl.nodes == 1 and nvl.per_node_of(16) is None
    assert deployment("llama-3.1-70b", "h100-sxm", tp=8, nodes=2).per_node_of(8) == 4
    deps = [deployment("llama-3.1-70b", "h100-sxm", tp=tp) for tp in (16, 8)]
    wide, narrow = (step_cost(d, decode_shape(1, 1000, layout(d).windows)) for d in deps)
    ar = _op(wide, "tp_allreduce")
    assert ar.count == 160 and ar.time_s / 160 == pytest.approx(allreduce_time(h100, 16, 8192 * 2, 8)[0])
    assert wide.time_s > narrow.time_s


def test_pipeline_stages_hold_the_embedding_first_and_the_head_last_by_hand():
    m = get_model("llama-3.1-8b")  # untied: embedding and head 128,256 x 4,096 each
    ends = 128_256 * 4_096
    body = m.total_params - 2 * ends
    assert layout(deployment("llama-3.1-8b", "h100-sxm")).weight_bytes_per_gpu == pytest.approx(m.total_params * 2)
    # two stages: half the layers each, the busier end one of the two matrices (not both, on every stage)
    two = layout(deployment("llama-3.1-8b", "h100-sxm", pp=2)).weight_bytes_per_gpu
    assert two == pytest.approx((body / 2 + ends) * 2)
    tied = get_model("Qwen/Qwen3-0.6B")  # a tied head: the last stage loads its own copy of the embedding
    assert tied.lm_head_params == 0
    w = layout(deployment("Qwen/Qwen3-0.6B", "h100-sxm", pp=2)).weight_bytes_per_gpu
    assert w == pytest.approx(((tied.total_params - tied.embedding_params) / 2 + tied.embedding_params) * 2)


def test_memory_plan_by_hand():
    dep = deployment("llama-3.1-8b", "h100-sxm", engine="vllm@0.32")  # 0.92 of the device, 1024 seqs / 8192 tokens
    plan = memory_plan(dep)
    assert plan.weight_bytes == pytest.approx(8.030e9 * 2, rel=1e-3)
    budget = 79.6 * GIB * 0.92
    assert plan.budget_bytes == pytest.approx(budget)
    forward = 8192 * 2 * (4 * 4096 + 2 * 14336)  # hidden states, residual, gate/up of the profile run
    sampler = 2 * 1024 * 128_256 * 4  # fp32 logits + sampler buffers of 1024 rows: the larger peak
    assert plan.activation_bytes == max(forward, sampler) == sampler
    assert plan.runtime_bytes == pytest.approx((1.0 + 0.25) * GIB)  # CUDA context + profiled CUDA graphs (>= 0.21)
    assert plan.kv_pool_bytes == pytest.approx(budget - plan.weight_bytes - plan.activation_bytes - plan.runtime_bytes)
    assert plan.block_bytes == 16 * 131_072
    assert plan.num_blocks == math.floor(plan.kv_pool_bytes / (16 * 131_072))
    assert blocks_per_sequence(dep, 1280) == 80
    assert max_sequences(dep, 1280) == plan.num_blocks // 80


def test_fp8_kv_doubles_capacity():
    a = memory_plan(deployment("llama-3.1-8b", "h100-sxm", kv="bf16"))
    b = memory_plan(deployment("llama-3.1-8b", "h100-sxm", kv="fp8"))
    assert b.block_bytes * 2 == a.block_bytes
    assert b.num_blocks in (2 * a.num_blocks, 2 * a.num_blocks + 1)


def test_sliding_window_caps_blocks():
    dep = deployment("mistral-7b", "h100-sxm", engine="vllm@0.32")  # 16-token blocks (64 from 0.34)
    assert blocks_per_sequence(dep, 2048) == 128
    assert blocks_per_sequence(dep, 100_000) == 4096 // 16 + 1


def test_step_time_equals_breakdown_sum():
    dep = deployment("qwen3-30b-a3b", "h100-sxm", tp=2, weights="fp8", kv="fp8")
    shape = batch_shape([(1, 3000), (1, 10), (512, 1024)], layout(dep).windows, num_logits=2)
    cost = step_cost(dep, shape)
    assert cost.time_s == pytest.approx(step_time(dep, shape), rel=1e-12)
    assert cost.time_s == pytest.approx(sum(o.time_s for o in cost.ops) + cost.step_overhead_s, rel=1e-12)


@pytest.mark.parametrize("model,gpu,kw", [
    ("llama-3.1-8b", "h100-sxm", {}),
    ("llama-3.1-70b", "h200", {"tp": 4, "pp": 2, "num_gpus": 8}),  # a round of two micro-batches (vLLM V1)
    ("qwen3-30b-a3b", "h100-sxm", {"tp": 2}),
    ("gemma-3-27b", "h100-sxm", {}),  # sliding-window groups
    ("deepseek-v3", "h200", {"tp": 8, "weights": "fp8"}),  # MLA, block-FP8 activation quantization launches
    ("deepseek-v3", "h200", {"tp": 1, "dp": 8, "ep": 8, "num_gpus": 8}),  # dp/ep: the full path
    ("qwen3-next-80b-a3b", "h200", {"tp": 2}),  # linear-state layers: the full path
    ("llama-3.1-8b", "h200", {"engine": "sglang@0.4"}),
    ("qwen/qwen3-0.6b", "a100-sxm-80gb", {"engine": "vllm@0.10"}),  # piecewise graphs: every step's launch floor
    ("llama-3.1-8b", "h100-sxm", {"engine": "vllm@0.11"}),  # piecewise prefill only
    ("llama-3.1-8b", "h100-sxm", {"engine": "trtllm@0.21"}),  # eager context steps, a host floor
    ("gemma-3-27b", "a100-sxm-80gb", {"engine": "sglang@0.5.6"}),  # two groups decoding on the CUDA cores
    ("llama-3.1-8b", "b200", {"engine": "vllm@0.10.1"}),  # CUDA-core decode above 256 sequences a step
])
def test_step_time_by_token_count_is_the_full_cost_to_the_bit(model, gpu, kw):
    """`step_time` looks its non-attention operators up by token count and logits; its total is `_run`'s, bit for
    bit, on prefill, mixed and decode steps (a pipelined replica's: `_run`'s of one micro-batch, the engine core's
    work once per micro-batch)."""
    dep = deployment(model, gpu, **kw)
    windows = layout(dep).windows
    rnd = random.Random(0)
    for _ in range(60):
        rows = [(1, rnd.randint(0, 6000)) for _ in range(rnd.choice((0, 1, 7, 64, 300)))]
        rows += [(rnd.randint(2, 4000), rnd.choice((0, rnd.randint(0, 3000)))) for _ in range(rnd.choice((0, 1, 2)))]
        if not rows:
            continue
        logits = len(rows) - rnd.choice((0, 0, 1)) if len(rows) > 1 else 1
        shape = BatchShape(sum(n for n, _ in rows), len(rows), logits, {w: span_work(rows, w) for w in windows})
        m = _microbatches(dep, shape.num_seqs)
        parts = [_share(shape, m), _prompt_part(shape, m)] if m > 1 else [shape]
        device = max(_device_s(dep, p, _run(dep, p, False)) for p in parts if p is not None)
        assert step_time(dep, shape) == _combine(dep, device, round_host_s(dep, shape))


@pytest.mark.parametrize("model,gpu,kw", [
    ("llama-3.1-8b", "h100-sxm", {}),
    ("qwen3-30b-a3b", "h100-sxm", {"tp": 2}),
    ("deepseek-v3", "h200", {"tp": 8}),
    ("deepseek-v3", "h200", {"tp": 1, "dp": 8, "ep": 8, "num_gpus": 8}),
    ("deepseek-v3", "h200", {"tp": 1, "dp": 8, "ep": 8, "num_gpus": 8, "two_batch_overlap": True}),
    ("qwen3-next-80b-a3b", "h200", {"tp": 2}),  # linear-state layers: no context read, priced once per batch size
    ("llama-3.1-70b", "h200", {"tp": 4, "pp": 2, "num_gpus": 8}),
    ("llama-3.1-8b", "h200", {"engine": "sglang@0.4"}),  # batches above 160 run eagerly: the launch floor
    ("mistralai/Mistral-7B-Instruct-v0.3", "a100-pcie-40gb", {"engine": "sglang@0.4.7"}),  # decode on CUDA cores
])
def test_decode_step_time_is_step_time_of_the_decode_shape(model, gpu, kw):
    """The simulator's decode-run path (other operators once per batch size, attention per step) prices the
    same step as the full cost function, to rounding."""
    dep = deployment(model, gpu, **kw)
    builder = ShapeBuilder((None,))
    for b, c in ((1, 0), (1, 4095), (7, 7 * 1234), (64, 64 * 3000), (256, 256 * 900)):
        assert decode_step_time(dep, b, c) == pytest.approx(step_time(dep, builder.decode(b, c)), rel=1e-12)


def test_narrow_expert_slices_reach_less_of_the_compute_roof():
    """Qwen3-30B-A3B's experts are 768 wide: whole on one GPU, 192 wide each under TP4. A 4096-token prefill's
    grouped GEMMs compute at w / (w + 192) of the MoE roof: 768/960 = 0.8 whole, 192/384 = 0.5 sliced, so TP4's
    expert compute per FLOP takes 1.6x as long (same rows per expert, same chip)."""
    assert get_hardware("h100-sxm").efficiency.moe_compute_half_width == 192.0
    per_flop = {}
    for tp in (1, 4):
        dep = deployment("qwen3-30b-a3b", "h100-sxm", tp=tp)
        op = next(o for o in step_cost(dep, prefill_shape(1, 4096, layout(dep).windows)).ops if o.name == "moe_experts")
        assert op.compute_s > op.memory_s  # compute-bound, where the slice width matters
        per_flop[tp] = op.compute_s / op.flops
    assert per_flop[4] / per_flop[1] == pytest.approx(0.8 / 0.5, rel=1e-9)


def test_flashinfer_decode_on_cuda_cores_by_hand():
    """SGLang 0.4.4 (FlashInfer, no tensor cores below a GQA group of 5) decodes Llama-3.1-8B (32 query heads over
    8 KV heads: a group of 4) on an A100 at the FP32 rate: 8 sequences over 2,000 cached tokens each are 16,008
    (query, key) pairs per layer of 4 x 32 x 128 FLOPs, computed at 19.5 TFLOP/s x decode_cuda_core_compute (0.3)
    instead of the tensor cores' 312 x attention_compute_max (0.7) x 4 / (4 + compute_half_m); an FP8 cache (tensor
    cores always) and vLLM (FlashAttention) keep the tensor-core rate, and the KV read is the same."""
    dep = deployment("llama-3.1-8b", "a100-sxm-80gb", engine="sglang@0.4.4")
    shape = decode_shape(8, 2000, layout(dep).windows)
    att = next(o for o in step_cost(dep, shape).ops if o.name == "attention")
    pairs = 8 * 2000 + 8
    flops = pairs * 4 * 32 * 128
    assert att.flops == pytest.approx(32 * flops, rel=1e-12)
    assert att.compute_s == pytest.approx(32 * flops / (19.5e12 * 0.3), rel=1e-12)
    for other in (deployment("llama-3.1-8b", "a100-sxm-80gb", engine="sglang@0.4.4", kv="fp8"),
                  deployment("llama-3.1-8b", "a100-sxm-80gb", engine="vllm@0.8")):
        o = next(o for o in step_cost(other, shape).ops if o.name == "attention")
        per_flop = (4 + 2.0) / (4 * 312e12 * 0.70)
        assert o.compute_s == pytest.approx(32 * flops * per_flop, rel=1e-12)
    bf16 = next(o for o in step_cost(deployment("llama-3.1-8b", "a100-sxm-80gb", engine="vllm@0.8"), shape).ops
                if o.name == "attention")
    assert att.kv_bytes == bf16.kv_bytes and att.memory_s == bf16.memory_s
    assert att.time_s > bf16.time_s


def test_flashinfer_016_decodes_an_fp8_cache_on_cuda_cores_by_hand():
    """SGLang 0.4.0 (FlashInfer 0.1.6: CUDA-core decode for the compiled group sizes whatever the cache's type)
    runs Llama-3.1-70B at TP 4 (16 query heads over 2 KV heads per GPU: a group of 8) from an FP8 cache on an H100
    at the FP32 rate: 16 sequences over 4,000 cached tokens are 64,016 (query, key) pairs per layer of
    4 x 16 x 128 FLOPs (the GPU's 16 query heads), at 66.9 TFLOP/s x 0.3; the cache read is half the 16-bit
    one's, and 0.4.2.post2 (FlashInfer 0.2) takes the tensor cores for the same FP8 cache."""
    shape = decode_shape(16, 4000, layout(deployment("llama-3.1-70b", "h100-sxm", tp=4)).windows)

    def attention(engine: str, kv: str):
        dep = deployment("llama-3.1-70b", "h100-sxm", engine=engine, tp=4, kv=kv)
        return next(o for o in step_cost(dep, shape).ops if o.name == "attention")

    fp8, bf16 = attention("sglang@0.4.0", "fp8"), attention("sglang@0.4.0", "bf16")
    flops = (16 * 4000 + 16) * 4 * 16 * 128
    assert fp8.compute_s == pytest.approx(80 * flops / (66.9e12 * 0.3), rel=1e-12)
    assert fp8.compute_s == pytest.approx(bf16.compute_s, rel=1e-12)
    assert fp8.kv_bytes == pytest.approx(bf16.kv_bytes / 2, rel=1e-12)
    assert attention("sglang@0.4.2.post2", "fp8").compute_s < fp8.compute_s / 10


def test_vllm_010_decodes_small_steps_on_tensor_cores_by_hand():
    """vLLM 0.10.1 on a B200 sends a decode step of at most 256 sequences over a 16-bit cache to TensorRT-LLM's
    kernels (tensor cores) and a larger one to FlashInfer's decode without them: Llama-3.1-8B (a group of 4) at 257
    sequences of 2,000 cached tokens computes its (query, key) pairs, 4 x 32 x 128 FLOPs each, at the FP32 peak
    (75 TFLOP/s) x 0.3, at 256 at the tensor-core rate; an FP8 cache goes to FlashInfer at any batch. The simulator's
    decode path and the step-time lookup price both sides of the edge as the full cost function does."""
    dep = deployment("llama-3.1-8b", "b200", engine="vllm@0.10.1")
    windows = layout(dep).windows

    def attention(d, b: int):
        return next(o for o in step_cost(d, decode_shape(b, 2000, windows)).ops if o.name == "attention")

    big, small = attention(dep, 257), attention(dep, 256)
    assert big.compute_s == pytest.approx(32 * (257 * 2001) * 4 * 32 * 128 / (75e12 * 0.3), rel=1e-12)
    assert small.compute_s < small.flops / (75e12 * 0.3) / 10
    fp8 = deployment("llama-3.1-8b", "b200", engine="vllm@0.10.1", kv="fp8")
    assert attention(fp8, 64).compute_s == pytest.approx(32 * (64 * 2001) * 4 * 32 * 128 / (75e12 * 0.3), rel=1e-12)
    builder = ShapeBuilder((None,))
    for b in (256, 257):
        shape = builder.decode(b, b * 2000)
        full = _combine(dep, _device_s(dep, shape, _run(dep, shape, False)), host_s(dep, shape))
        assert step_time(dep, shape) == full
        assert decode_step_time(dep, b, b * 2000) == pytest.approx(full, rel=1e-12)


@pytest.mark.parametrize("model,gpu,engine,cuda_cores", [
    ("llama-3.1-70b", "h100-sxm", "sglang@0.4.0", True),  # FlashInfer 0.1.6's compiled groups: 8 at TP 4
    ("llama-3.1-70b", "h100-sxm", "sglang@0.4.2.post2", False),  # FlashInfer 0.2: groups above 4 on tensor cores
    ("qwen/qwen2.5-7b", "a100-sxm-80gb", "sglang@0.4.0", False),  # a group of 7: not compiled, tensor cores
    ("llama-3.1-8b", "h100-sxm", "sglang@0.4.5", True),  # FlashInfer everywhere before 0.4.6
    ("llama-3.1-8b", "h100-sxm", "sglang@0.4.6", False),  # FA3 on Hopper for the listed architectures
    ("mistralai/Mistral-7B-Instruct-v0.3", "h100-sxm", "sglang@0.4.6", False),
    ("mistralai/Mistral-7B-Instruct-v0.3", "h100-sxm", "sglang@0.4.7", True),  # dropped from the list in 0.4.7
    ("mistralai/Mistral-7B-Instruct-v0.3", "h100-sxm", "sglang@0.5.8", False),  # FA3 for every family
    ("qwen/qwen3-8b", "a100-sxm-80gb", "sglang@0.5.0", True),  # FlashInfer off Hopper and SM100
    ("qwen/qwen3-8b", "a100-sxm-80gb", "sglang@0.5.1", False),  # tensor cores from a group of 4 on
    ("gemma-3-27b", "a100-sxm-80gb", "sglang@0.5.8", True),  # a group of 2
    ("gemma-3-27b", "b200", "sglang@0.5.6", True),
    ("gemma-3-27b", "b200", "sglang@0.5.7", False),  # trtllm_mha on SM100
    ("llama-3.1-8b", "mi300x", "sglang@0.4.4", False),  # ROCm: aiter / triton
    ("llama-3.1-8b", "a100-sxm-80gb", "vllm@0.6.0", False),
    ("llama-3.1-70b", "h100-sxm", "sglang@0.4.0/fp8", True),  # FlashInfer 0.1.6's test ignores the cache's type
    ("llama-3.1-70b", "h100-sxm", "sglang@0.4.2.post1/fp8", True),
    ("llama-3.1-8b", "a100-sxm-80gb", "sglang@0.4.2.post2/fp8", False),  # FlashInfer 0.2: an FP8 cache, tensor cores
    ("llama-3.1-8b", "a100-sxm-80gb", "sglang@0.4.4/fp8", False),
    ("llama-3.1-8b", "b200", "vllm@0.9.0", False),  # FlashInfer only when asked for
    ("llama-3.1-8b", "b200", "vllm@0.9.1", True),  # V1's default on SM 10.0: groups of 4 or fewer on CUDA cores
    ("llama-3.1-8b", "h100-sxm", "vllm@0.9.2", False),  # FlashAttention off SM 10.0
    ("llama-3.1-8b", "b200", "vllm@0.9.2/fp8", True),  # no cache-type condition
    ("llama-3.1-70b", "b200", "vllm@0.9.2", False),  # a group of 8 at TP 4: tensor cores
    ("llama-3.1-8b", "b200", "vllm@0.10.1", True),  # above 256 sequences a step (below: TensorRT-LLM's kernels)
    ("llama-3.1-8b", "b200", "vllm@0.10.2", False),  # use_tensor_cores=True
])
def test_which_decode_runs_on_cuda_cores(model, gpu, engine, cuda_cores):
    """The engine's backend rule by release, device class, model family and cache type
    (`KernelFactors.decode_cuda_core_groups`, `decode_cuda_core_fp8`); "/fp8": an FP8 KV cache."""
    engine, _, kv = engine.partition("/")
    dep = deployment(model, gpu, engine=engine, tp=4 if "70b" in model else 1, kv=kv or None)
    at = layout(dep).groups[0].attn
    r = roofs(dep)
    assert (r.decode_cc_rate > 0 and int(min(at.q_per_kv, at.q_heads)) in r.decode_cc_groups) is cuda_cores
