"""Engine profiles: version selection, defaults, memory policies, host and frontend costs, hand-checked."""

from __future__ import annotations

import json
import math
from dataclasses import replace

import pytest

from flopwise.api import deployment, estimate
from flopwise.cli import run
from flopwise.cost import batch_shape, decode_shape, prefill_shape, step_time
from flopwise.cost.layout import layout
from flopwise.cost.memory import memory_plan
from flopwise.cost.step import decode_step_time, host_s, roofs, step_cost
from flopwise.errors import PrecisionError, SpecError
from flopwise.estimate import estimate_deployment, notes
from flopwise.launch import LaunchTarget, render
from flopwise.plan.space import SearchSpace
from flopwise.sim import SimConfig, simulate
from flopwise.sim.replica import make_scheduler
from flopwise.specs.deployment import weights_note
from flopwise.specs.engine import DeviceKernels, KernelFactors, get_engine
from flopwise.specs.hardware import GIB, get_hardware
from flopwise.specs.speculative import parse_speculative
from flopwise.techniques.scenario import rebuild
from flopwise.validation.engines import case_deployment, case_engine
from flopwise.workload import RequestSpec, Workload, build_workload


def _knobs(engine: str, gpu: str, tp: int = 1, context: int | None = 131072):
    hw = get_hardware(gpu)
    return get_engine(engine).default_knobs(hw_id=hw.id, memory_gib=hw.memory_gib, kind=hw.kind,
                                            context_len=context, tp=tp)


def test_versions_merge_the_releases_at_or_below():
    old, mid, v1, asyn, now = (get_engine(f"vllm@{v}") for v in ("0.4.3", "0.6.3", "0.11", "0.14", "0.32"))
    assert old.frontend.shares_engine_cpu and not mid.frontend.shares_engine_cpu
    assert mid.host == replace(old.host, step_s=mid.host.step_s, per_seq_s=mid.host.per_seq_s)
    assert not old.enable_chunked_prefill and v1.enable_chunked_prefill and v1.enable_prefix_caching
    assert not v1.host.async_scheduling and asyn.host.async_scheduling
    assert (asyn.memory_fraction, now.memory_fraction) == (0.9, 0.92)  # PR #38284, v0.21
    assert get_engine("vllm").version == "0.34" and get_engine("vllm@0.1").host == old.host  # below the oldest: base
    assert get_engine("vllm", frontend="none").frontend is None
    assert get_engine("vllm", endpoint="chat").frontend.endpoint == "chat"


def test_a_case_states_a_pipeline_split():
    """llama.cpp's default layer split over 8 GPUs is a case's pp 8: one replica of 8 stages, not 8 replicas."""
    args = {"model": "meta-llama/Llama-3.1-70B", "gpu": "mi300x", "num_gpus": 8, "tp": 1, "pp": 8, "replicas": 1,
            "weights": "q4_k_m"}
    raw = {"engine": "llama.cpp (llama-bench)", "engine_version": "b6652", "args": args}
    dep, _ = case_deployment(raw, "estimate", args)
    assert (dep.pp, dep.tp, dep.replicas) == (8, 1, 1)


def test_version_keys_order_post_releases_after_their_release():
    from flopwise.specs.engine import _version_key as key

    assert key("0.4.7") < key("0.4.7.post1") < key("0.4.7.post2") < key("0.4.8")
    assert key("0.5.6.post") == key("0.5.6") and key("v0.5.6.post1") == key("0.5.6.post1")
    assert key("0.11.0rc2") == key("0.11.0") == key("0.11.0+cu128") and key("0.20.0.dev1") == key("0.20.0")
    assert key("b4000") < key("b4001")


def test_bad_engine_text_is_one_clear_error():
    with pytest.raises(SpecError, match="unknown engine 'vlm'.*Did you mean: vllm"):
        get_engine("vlm")
    with pytest.raises(SpecError, match="cannot read engine version 'latest'"):
        get_engine("vllm@latest")
    with pytest.raises(SpecError, match="no HTTP server"):
        get_engine("pytorch")
    with pytest.raises(SpecError, match="--frontend must be"):
        get_engine("vllm", frontend="grpc")


def test_default_knobs_follow_each_engine():
    k = _knobs("vllm", "h100-sxm")
    assert (k.max_num_seqs, k.max_num_batched_tokens, k.block_size, k.memory_fraction) == (1024, 8192, 64, 1.0)
    k = _knobs("vllm@0.33", "h100-sxm")
    assert (k.block_size, k.memory_fraction) == (16, 0.92)
    assert (_knobs("vllm", "a100-sxm-80gb").max_num_seqs,
            _knobs("vllm", "a100-sxm-80gb").max_num_batched_tokens) == (256, 2048)
    assert _knobs("vllm", "b200").max_num_batched_tokens == 16384
    cpu = _knobs("vllm", "cpu-epyc-zen5-2c")
    assert (cpu.max_num_seqs, cpu.max_num_batched_tokens, cpu.block_size) == (128, 2048, 128)
    v0 = _knobs("vllm@0.4", "h100-sxm")
    assert (v0.max_num_seqs, v0.max_num_batched_tokens) == (256, 131072)  # no chunking: max(context, 2048)
    assert _knobs("trtllm", "h100-sxm").max_num_seqs == 2048
    # SGLang >= 0.5.3 (PR #10975): H200, TP1, chunk 8192: reserve max(512 + 1.5*8192 + 2*256 + 128, 10240) MB
    h200 = get_hardware("h200")
    reserve = max(512 + 1.5 * 8192 + 2 * 256 + 128, 10240)
    assert _knobs("sglang", "h200").memory_fraction == round(
        (h200.memory_gib * 1024 - reserve) / (h200.memory_gib * 1024), 3)
    assert _knobs("sglang@0.3", "h100-sxm", tp=4).memory_fraction == 0.85  # the old table by TP


def test_vllm_offline_takes_the_llm_class_batch_defaults():
    """vLLM's EngineArgs pick the batch knobs by usage context: the LLM class (offline: `vllm bench throughput`)
    16384 tokens on >= 70 GiB non-A100 GPUs and 8192 elsewhere, the API server 8192 / 2048 (256 sequences off the
    large parts either way); B200-class parts 16384 for both from 0.28."""
    def knobs(gpu, frontend, engine="vllm@0.15.0"):
        d = deployment("llama-3.1-8b", gpu, engine=engine, frontend=frontend)
        return d.max_num_batched_tokens, d.max_num_seqs

    assert (knobs("h100-sxm", "http"), knobs("h100-sxm", "none")) == ((8192, 1024), (16384, 1024))
    assert (knobs("a100-sxm-80gb", "http"), knobs("a100-sxm-80gb", "none")) == ((2048, 256), (8192, 256))
    assert knobs("b200", "none", "vllm@0.32") == knobs("b200", "http", "vllm@0.32") == (16384, 1024)
    # 0.8.0-0.8.4 picked H100 / H200 by name (a B200 got the small budget), 1024 seqs everywhere to 0.8.3; 0.8.5 by
    # memory (the A100 80GB too); 0.9.0 without the A100
    assert [knobs("b200", "http", v) for v in ("vllm@0.8.0", "vllm@0.8.4", "vllm@0.8.5")] == [
        (2048, 1024), (2048, 256), (8192, 1024)]
    assert knobs("gh200", "http", "vllm@0.8.0") == (8192, 1024)
    assert [knobs("a100-sxm-80gb", "http", v) for v in ("vllm@0.8.5", "vllm@0.9.0")] == [(8192, 1024), (2048, 256)]


def test_trtllm_bench_sizes_its_batch_from_the_workload():
    """trtllm-bench's heuristic (bench/build/tuning.py), by hand. Llama-3.1-70B fp8 on one H100 (79.6 GiB), KV fp8,
    128 in / 2048 out, TensorRT engines (fraction 0.95): 70.554e9 elements x 1 byte = 65.708 GiB, (79.6 - 65.708) x
    0.95 = 13.197 GiB of KV at 2 x 80 x 8 x 128 x 1 B = 1.5259e-4 GiB a token x 2176 tokens: 39.7 requests -> 64
    seqs (the floor), 39.7 x (1 + 128 / 2048) tokens -> 2048. Llama-3.1-8B fp8, 128 / 128: 4385 requests -> capped at
    4096 (rounded to 256s), 8192 tokens. DeepSeek-V3 NVFP4 on 4 B200 with attention DP, KV fp8, 1024 / 1024
    (PyTorch backend, 0.9): 669.17e9 packed weights x 0.5625 elements + 1.853e9 = 378.26e9 x 0.5 B = 176.14 GiB,
    (4 x 179.1 - 176.14) x 0.9 = 486.24 GiB at 2 x 61 x 128 x 56 (the config's hidden / heads) x 1 B a token x 2048:
    291.5 requests -> 384 seqs (per rank), 583 tokens -> 2048."""
    def sized(model, gpu, weights, isl, osl, engine="trtllm@0.17", **kw):
        d = deployment(model, gpu, weights=weights, kv="fp8", engine=engine, frontend="none", **kw)
        assert d.batch_from_workload
        s = d.for_workload([isl] * 4, [osl] * 4)
        return s.max_num_seqs, s.max_num_batched_tokens

    assert sized("llama-3.1-70b", "h100-sxm", "fp8", 128, 2048) == (64, 2048)
    assert sized("llama-3.1-8b", "h100-sxm", "fp8", 128, 128) == (4096, 8192)
    assert sized("deepseek-ai/DeepSeek-V3", "b200", "nvfp4", 1024, 1024, engine="trtllm@1.2", tp=1, dp=4,
                 ep=4) == (384, 2048)
    # without chunked prefill the budget holds the longest prompt and a full batch
    d = deployment("llama-3.1-70b", "h100-sxm", weights="fp8", kv="fp8", engine="trtllm@0.17", frontend="none")
    assert d.for_workload([128, 9000], [2048, 2048]).max_num_batched_tokens == 9000 + 64
    # a knob the user gives stays (the other is still the benchmark's); a format trtllm-bench has no tuning for keeps
    # BuildConfig's defaults, floored by the longest prompt + the batch; both given, or trtllm-serve: the user's /
    # the engine's
    def knobs(prompts, **kw):
        d = deployment("llama-3.1-70b", "h100-sxm", engine="trtllm@0.17", frontend="none", **{"weights": "fp8", **kw})
        s = d.for_workload(prompts, [2048] * len(prompts))
        return s.max_num_seqs, s.max_num_batched_tokens

    assert knobs([128], max_num_seqs=512) == (512, 2048) and knobs([128], max_num_batched_tokens=4096) == (64, 4096)
    assert knobs([128], max_num_seqs=512, max_num_batched_tokens=4096) == (512, 4096)
    assert knobs([128], weights="int4-awq") == (2048, 8192) and knobs([10000], weights="int4-awq") == (2048, 12048)
    assert not deployment("llama-3.1-70b", "h100-sxm", weights="fp8", engine="trtllm@1.2").batch_from_workload
    # the PyTorch backend sizes at the run's memory fraction, TensorRT engines at the build's 0.95: Llama-3.1-8B fp8
    # at 0.3, (79.6 - 7.479) x 0.3 / (6.1035e-5 x 256) = 1384.9 requests -> 1536; at 0.9, 4154 -> capped at 4096
    assert knobs([128]) == knobs([128], gpu_memory_utilization=0.3) == (64, 2048)
    d = deployment("llama-3.1-8b", "h100-sxm", weights="fp8", kv="fp8", engine="trtllm@1.2", frontend="none")
    full, low = d.for_workload([128], [128]), replace(d, gpu_memory_utilization=0.3).for_workload([128], [128])
    assert (full.max_num_seqs, low.max_num_seqs) == (4096, 1536)
    # a deployment rebuilt with another parallelism keeps the benchmark's picks; a knob set later is the user's
    base = deployment("llama-3.1-70b", "h100-sxm", weights="fp8", kv="fp8", engine="trtllm@0.17", frontend="none")
    assert rebuild(base, tp=2).bench_knobs == base.bench_knobs == ("max_num_seqs", "max_num_batched_tokens")
    fixed = base.with_knobs(max_num_seqs=16)
    assert fixed.bench_knobs == ("max_num_batched_tokens",) and fixed.for_workload([128], [2048]).max_num_seqs == 16
    # a checkpoint beyond the GPUs' memory, or room for less than one request, is trtllm-bench's own refusal
    with pytest.raises(SpecError, match="at least one"):
        deployment("llama-3.1-70b", "h100-sxm", weights="fp8", kv="fp8", engine="trtllm@0.17",
                   frontend="none").for_workload([120000], [8000])
    # and the simulator runs the workload at the benchmark's knobs
    wl = build_workload(num_requests=8, input_len=128, output_len=2048, request_rate=math.inf)
    r = simulate(deployment("llama-3.1-70b", "h100-sxm", weights="fp8", kv="fp8", engine="trtllm@0.17",
                            frontend="none"), wl)
    assert (r.deployment.max_num_seqs, r.deployment.max_num_batched_tokens) == (64, 2048)
    assert r.summary()["setup"]["batch_knobs_from"] == "trtllm-bench"


def test_sglang_cuda_graph_cap_by_version_memory_and_tp():
    """ServerArgs: ~v0.4 160 (below 25,000 MiB: 8, or 80 at tp >= 4); >= 0.5.3 by memory tier and TP."""
    assert _knobs("sglang@0.4", "h200", tp=4).cuda_graph_max_bs == 160
    assert _knobs("sglang@0.4", "rtx-4090").cuda_graph_max_bs == 8
    assert _knobs("sglang@0.4", "rtx-4090", tp=4).cuda_graph_max_bs == 80
    assert [_knobs("sglang", "h100-sxm", tp=t).cuda_graph_max_bs for t in (1, 2, 4, 8)] == [256, 256, 512, 512]
    assert _knobs("sglang", "b200").cuda_graph_max_bs == 512
    assert _knobs("sglang", "l40s").cuda_graph_max_bs == 32 and _knobs("sglang@0.5.19", "l4").cuda_graph_max_bs == 24
    assert _knobs("sglang", "l4").cuda_graph_max_bs == 48  # 0.5.20's 20-35 GiB tier
    assert _knobs("vllm", "h100-sxm").cuda_graph_max_bs == 512 and _knobs("trtllm", "h100-sxm").cuda_graph_max_bs == 0
    # the reserve counts 2 MB per captured batch: TP8 on H200 adds 2 * (512 - 256) MB to TP1's
    h200 = get_hardware("h200")
    reserve = 512 + 1.5 * 8192 + 2 * 512 + 128 * 8
    assert _knobs("sglang", "h200", tp=8).memory_fraction == round(
        (h200.memory_gib * 1024 - reserve) / (h200.memory_gib * 1024), 3)


def test_sglang_memory_fraction_by_device_from_0_4_6_to_0_5_2():
    """ServerArgs.__post_init__ of each wheel: 0.4.6 reserves 13 GiB above 81,920 MiB; 0.4.6.post2 takes 0.88 above
    it and reserves 18 GiB above 96 GiB; 0.4.7 takes 0.79 on CUDA parts above 180,000 MiB; 0.4.7.post1 to 0.5.2
    reserve (9.5 + tp / 2) GiB from 35 to 90 GiB, (12 + tp / 2) to 160 GiB, 32 GiB above and (2.8 + tp / 10) GiB
    below 35 GiB. Post releases are versions of their own."""
    assert _knobs("sglang@0.4.5", "h200", tp=8).memory_fraction == 0.81  # the TP table everywhere
    assert _knobs("sglang@0.4.6", "h200", tp=8).memory_fraction == round((140.4 - 13) / 140.4, 3)  # 0.907
    assert _knobs("sglang@0.4.6", "h100-sxm", tp=8).memory_fraction == 0.81  # 79.6 GiB: the TP table
    assert _knobs("sglang@0.4.6.post2", "h20", tp=8).memory_fraction == 0.88  # 95.6 GiB: between 80 and 96
    assert _knobs("sglang@0.4.6.post2", "h200", tp=8).memory_fraction == round((140.4 - 18) / 140.4, 3)  # 0.872
    assert _knobs("sglang@0.4.7", "b200", tp=8).memory_fraction == 0.79
    assert _knobs("sglang@0.4.7", "mi300x", tp=8).memory_fraction == round((191.7 - 18) / 191.7, 3)  # not CUDA
    assert _knobs("sglang@0.4.7", "mi300x").max_num_batched_tokens == 16384
    a100 = _knobs("sglang@0.4.7.post1", "a100-pcie-40gb")
    assert (a100.memory_fraction, a100.max_num_batched_tokens) == (0.75, 8192)  # (40 - 10) / 40
    assert _knobs("sglang@0.4.7.post1", "h100-sxm", tp=8).memory_fraction == round((79.6 - 13.5) / 79.6, 3)
    assert _knobs("sglang@0.5.2", "h200", tp=8).memory_fraction == round((140.4 - 16) / 140.4, 3)
    assert _knobs("sglang@0.5.2", "b200", tp=8).memory_fraction == round((179.1 - 32) / 179.1, 3)
    rtx = _knobs("sglang@0.5.2", "rtx-4090")
    assert (rtx.memory_fraction, rtx.max_num_batched_tokens, rtx.cuda_graph_max_bs) == (round(21.1 / 24, 3), 2048, 8)
    # decode graphs (cuda_graph_runner.py): 256 above 80 GiB at 0.4.6, above 96 GiB at 0.4.6.post2, above 90 GiB
    # and 512 above 160,000 MB at 0.4.7.post1
    assert [_knobs(v, "h20", tp=8).cuda_graph_max_bs for v in ("sglang@0.4.4", "sglang@0.4.6", "sglang@0.4.6.post2",
                                                                "sglang@0.4.7.post1")] == [160, 256, 160, 256]
    assert _knobs("sglang@0.5.2", "b200", tp=8).cuda_graph_max_bs == 512
    assert get_engine("sglang@0.4.7.post1").version == "0.4.7.post1"
    assert _knobs("sglang@0.4.7", "a100-pcie-40gb").memory_fraction == 0.88  # the release before its post1
    # the fraction sizes the pool: (0.75 x 40 GiB - weights) on the A100 40GB
    d = deployment("Qwen/Qwen3-8B", "a100-pcie-40gb", engine="sglang@0.4.7.post1")
    plan = memory_plan(d)
    assert plan.kv_pool_bytes == pytest.approx(0.75 * 40 * GIB - plan.weight_bytes)


def test_sglang_reserves_more_for_dp_attention_and_speculation():
    """SGLang counts every GPU of a DP-attention stage in --tp-size and reserves more with DP attention and with a
    proposer: 0.5.3+ adds cuda_graph_max_bs x dp x (3 + 1.5 above 300) MB before its 10 GiB floor and 2 GiB
    (6 for a draft model, none for n-gram lookup) after it; 0.4.7.post1-0.5.2 add 4 GiB and 2 GiB to the tier's."""
    mib = get_hardware("h200").memory_gib * 1024
    base = 512 + 1.5 * 8192 + 2 * 512 + 128 * 8  # chunk 8192, graphs to 512 (a stage of 8), 8 GPUs

    def frac(reserve_mb: float) -> float:
        return round((mib - reserve_mb) / mib, 3)

    dep8 = deployment("deepseek-v3", "h200", engine="sglang@0.5.6", weights="fp8", tp=1, dp=8, ep=8)
    assert dep8.gpu_memory_utilization == frac(base + 512 * 8 * 3 + 512 * 8 * 1.5)  # 0.769 where TP8 has 0.897
    assert dep8.engine.kernels.cuda_graph_max_bs == 512  # the stage's 8 GPUs pick the tier, not attention TP 1
    assert deployment("deepseek-v3", "h200", engine="sglang@0.5.6", weights="fp8", tp=8).gpu_memory_utilization \
        == frac(base)
    for spec, extra in (("mtp,k=1,accepted=1.8", 2048), ("ngram,k=4,alpha=0.5", 0)):
        d = deployment("deepseek-v3", "h200", engine="sglang@0.5.6", weights="fp8", tp=8, speculative=spec)
        assert d.gpu_memory_utilization == frac(base + extra), spec
    old = {"tp": 1, "dp": 8, "ep": 8}
    assert deployment("deepseek-v3", "h200", engine="sglang@0.5.2", weights="fp8", **old).gpu_memory_utilization \
        == round((140.4 - 12 - 4 - 4) / 140.4, 3)


def test_decode_above_the_graph_cap_is_launch_bound():
    """SGLang 0.4 on H200 captures decode batches up to 160; a batch of 161 runs eagerly: at least one launch of
    eager_prefill_kernel_s per kernel (the fixed step cost on top); 160 keeps the graph's time."""
    dep = deployment("llama-3.1-8b", "h200", engine="sglang@0.4")
    assert dep.engine.kernels.cuda_graph_max_bs == 160
    builder_windows = layout(dep).windows
    graph = step_time(dep, batch_shape([[1, 600]] * 160, builder_windows))
    eager = step_time(dep, batch_shape([[1, 600]] * 161, builder_windows))
    cost = step_cost(dep, batch_shape([[1, 600]] * 161, builder_windows))
    kernels = round(sum(o.overhead_s for o in cost.ops) / roofs(dep).kernel_s)  # tp 1: no collectives
    floor = kernels * 6.75e-5 + dep.hardware.efficiency.step_overhead_s
    assert graph < floor and eager == pytest.approx(floor, rel=1e-9)  # 10.5 ms from a graph, 17.5 ms eagerly
    offline = deployment("llama-3.1-8b", "h200", engine="trtllm")
    assert step_time(offline, batch_shape([[1, 600]] * 161, builder_windows)) < 1.05 * step_time(
        offline, batch_shape([[1, 600]] * 160, builder_windows))


def test_an_engine_without_cuda_graphs_launches_every_decode_step_eagerly():
    """SGLang's --disable-cuda-graph (cases: engine_knobs.disable_cuda_graph): a batch-1 decode of Llama-3.1-8B on an
    H200 takes its kernels' eager launches, kernels x 6.75e-5 s (+ the fixed step cost), not the graph's ~6 ms; the
    per-batch fast path (`decode_step_time`) agrees with the general one."""
    dep = deployment("llama-3.1-8b", "h200", engine="sglang@0.5.6")
    eager = replace(dep, engine=replace(dep.engine, kernels=replace(dep.engine.kernels, cuda_graphs=False)))
    shape = batch_shape([[1, 600]], layout(dep).windows)
    cost = step_cost(eager, shape)
    kernels = round(sum(o.overhead_s for o in cost.ops) / roofs(eager).kernel_s)
    floor = kernels * 6.75e-5 + eager.hardware.efficiency.step_overhead_s
    assert step_time(dep, shape) < 0.7 * floor
    assert step_time(eager, shape) == pytest.approx(floor, rel=1e-9)
    assert decode_step_time(eager, 1, 600) == pytest.approx(step_time(eager, shape), rel=1e-12)
    raw = {"engine": "SGLang", "engine_version": "0.5.6", "args": {"gpu": "h200"},
           "engine_knobs": {"endpoint": "chat", "disable_cuda_graph": True}}
    assert not case_engine(raw, "simulate").engine.kernels.cuda_graphs
    with pytest.raises(SpecError, match="cuda_graphs = false needs an eager launch cost"):
        KernelFactors(cuda_graphs=False)


def test_vllm_v1_enforce_eager_launches_every_step_at_its_eager_cost():
    """vLLM V1 never runs a step eagerly with graphs on (piecewise prefill, graphed decode: eager_prefill_kernel_s
    0), so --enforce-eager (cases: engine_knobs.enforce_eager) prices its launches at eager_kernel_s, 6.0e-5 s per
    modelled kernel (fitted on the only V1 rows that run eagerly; V0's prefill takes 1.11e-4): a batch-1 decode of
    Llama-3.1-8B on an H200 takes kernels x 6.0e-5 s (+ the fixed step cost); with graphs on, the same profile's
    decode has no eager floor."""
    dep = deployment("llama-3.1-8b", "h200", engine="vllm@0.20")
    assert roofs(dep).eager_kernel_s == 0.0
    raw = {"engine": "vLLM", "engine_version": "0.20", "args": {"gpu": "h200"},
           "engine_knobs": {"endpoint": "completions", "enforce_eager": True}}
    eng = case_engine(raw, "simulate").engine
    assert not eng.kernels.cuda_graphs
    eager = replace(dep, engine=replace(dep.engine, kernels=eng.kernels))
    shape = batch_shape([[1, 600]], layout(dep).windows)
    kernels = round(sum(o.overhead_s for o in step_cost(eager, shape).ops) / roofs(eager).kernel_s)
    floor = kernels * 6.0e-5 + eager.hardware.efficiency.step_overhead_s
    assert step_time(eager, shape) == pytest.approx(floor, rel=1e-9)
    assert step_time(dep, shape) < 0.5 * floor


def test_vllm_v0_runs_decode_batches_above_256_eagerly():
    """V0 captures decode graphs for batch sizes up to 256 (`_BATCH_SIZES_TO_CAPTURE`): with --max-num-seqs 512 a
    decode of 257 sequences is launch-bound (1.11e-4 s per modelled kernel); V1 prices no eager launches."""
    v0 = deployment("llama-3.1-8b", "h100-sxm", engine="vllm@0.5", max_num_seqs=512)
    assert v0.engine.kernels.cuda_graph_max_bs == 256
    windows = layout(v0).windows
    graph, eager = (step_time(v0, batch_shape([[1, 500]] * b, windows)) for b in (256, 257))
    cost = step_cost(v0, batch_shape([[1, 500]] * 257, windows))
    kernels = round(sum(o.overhead_s for o in cost.ops) / roofs(v0).kernel_s)
    host = v0.engine.host.seconds(257, 1)  # synchronous V0 loop: the host's work adds to the device's
    assert eager == pytest.approx(kernels * 1.11e-4 + v0.hardware.efficiency.step_overhead_s + host, rel=1e-9)
    assert graph < 0.8 * eager  # one more sequence, a quarter more time: the launches, not the work
    v1 = deployment("llama-3.1-8b", "h100-sxm", engine="vllm@0.11", max_num_seqs=1024)
    assert v1.engine.kernels.cuda_graph_max_bs == 512 and roofs(v1).eager_kernel_s == 0.0


def test_vllm_v1_piecewise_graphs_floor_a_step_by_its_layers():
    """Before 0.11 vLLM V1 replays CUDA graphs in pieces around eager attention ops: a step cannot run faster than
    its launches, 2 ms + 28 layers x 0.075 ms (4.1 ms for Qwen3-0.6B on an A100, whose kernels take ~2.9 ms); from
    0.11 a decode replays one full graph and only steps with prompt tokens keep the floor."""
    old, new = (deployment("qwen/qwen3-0.6b", "a100-sxm-80gb", engine=e) for e in ("vllm@0.10", "vllm@0.11"))
    kf = old.engine.kernels
    assert layout(old).num_layers == 28 and (kf.piecewise_step_s, kf.piecewise_layer_s) == pytest.approx((2e-3, 7.5e-5))
    overhead = old.hardware.efficiency.step_overhead_s
    decode = decode_shape(1, 100, layout(old).windows)
    floor = 2e-3 + 28 * 7.5e-5 + overhead
    host = old.engine.host.seconds(1, 1)  # synchronous before 0.14: the engine core's CPU work adds
    assert step_time(old, decode) == pytest.approx(floor + host, rel=1e-9)
    assert decode_step_time(old, 1, 100) == pytest.approx(floor + host, rel=1e-9)
    assert step_time(new, decode) < 0.8 * step_time(old, decode)  # one full graph: the kernels' own time
    prefill = prefill_shape(1, 16, layout(new).windows)  # 16 prompt tokens: launch-bound, piecewise
    assert step_time(new, prefill) == pytest.approx(floor + new.engine.host.seconds(1, 1), rel=1e-9)


def test_memory_policies_by_hand():
    vllm = memory_plan(deployment("llama-3.1-8b", "h100-sxm"))
    dev = 79.6 * GIB
    sgl = memory_plan(deployment("llama-3.1-8b", "h100-sxm", engine="sglang", gpu_memory_utilization=0.85))
    assert sgl.kv_pool_bytes == pytest.approx(0.85 * dev - sgl.weight_bytes)  # weights + KV = f x device
    trt = memory_plan(deployment("llama-3.1-8b", "h100-sxm", engine="trtllm", gpu_memory_utilization=0.9))
    assert trt.kv_pool_bytes == pytest.approx(0.9 * (dev - trt.weight_bytes - trt.activation_bytes - trt.runtime_bytes))
    assert vllm.kv_pool_bytes == pytest.approx(  # vLLM 0.34: the device less a 1 GiB margin (tests/test_kv_margin.py)
        dev - GIB - vllm.weight_bytes - vllm.activation_bytes - vllm.runtime_bytes)
    v032 = memory_plan(deployment("llama-3.1-8b", "h100-sxm", engine="vllm@0.32"))
    assert v032.kv_pool_bytes == pytest.approx(0.92 * dev - v032.weight_bytes - v032.activation_bytes
                                               - v032.runtime_bytes)


def test_host_cost_adds_to_the_device_or_hides_behind_it():
    base = deployment("llama-3.1-8b", "h100-sxm", frontend="none")
    zero = replace(base, engine=replace(base.engine, host=replace(base.engine.host, step_s=0.0, per_seq_s=0.0,
                                                                     async_scheduling=False)))
    shape = batch_shape([(1, 1000)] * 8, layout(base).windows)
    device = step_time(zero, shape)
    sync = replace(base, engine=replace(base.engine, host=replace(zero.engine.host, step_s=2e-3, per_seq_s=1e-4)))
    assert step_time(sync, shape) == pytest.approx(device + 2e-3 + 8 * 1e-4, rel=1e-12)
    small = replace(sync, engine=replace(sync.engine, host=replace(sync.engine.host, async_scheduling=True)))
    assert step_time(small, shape) == pytest.approx(device, rel=1e-12)  # 2.8 ms of CPU hides behind the step
    big = replace(small, engine=replace(small.engine, host=replace(small.engine.host, step_s=0.1)))
    assert step_time(big, shape) == pytest.approx(0.1 + 8e-4, rel=1e-12)


def _frontend_dep(model: str = "llama-3.1-8b", **costs):
    dep = deployment(model, "h100-sxm")
    fe = replace(dep.engine.frontend, **{"prompt_token_s": 0.0, "output_token_s": 0.0, "latency_s": 0.0, **costs})
    return replace(dep, engine=replace(dep.engine, frontend=fe))


def test_a_stream_above_the_api_servers_ceiling_queues_at_the_frontend():
    # 10 ms of CPU per request (ceiling 100 req/s) under 200 req/s: request i is accepted at 10 (i + 1) ms and
    # has waited 10 (i + 1) - 5 i = 5 i + 10 ms in front of the engine; the engine (a 1B model, ~2 ms steps)
    # itself never queues.
    dep = _frontend_dep("llama-3.2-1b", request_s=0.01)
    wl = Workload(tuple(RequestSpec(arrival_at=0.005 * i, input_tokens=4, output_tokens=2) for i in range(200)))
    res = simulate(dep, wl, SimConfig(enable_prefix_caching=False))
    got = [r.engine_arrival_at - r.arrival_at for r in res.requests]
    assert got == pytest.approx([0.005 * i + 0.01 for i in range(200)], rel=1e-9)
    s = res.summary()
    assert s["bottleneck"] == "frontend" and s["frontend_utilization"] > 0.95
    assert s["request_throughput"] == pytest.approx(100.0, rel=0.02)
    assert s["time_breakdown_ms"]["queue_ms"] < 1.0 < s["time_breakdown_ms"]["frontend_ms"]


def test_egress_delays_tokens_and_one_request_matches_the_estimate():
    dep = _frontend_dep(request_s=1e-3, output_token_s=2e-4, latency_s=3e-3)
    e = estimate_deployment(dep, batch=1, input_len=512, output_len=20)
    s = simulate(dep, Workload((RequestSpec(arrival_at=0.0, input_tokens=512, output_tokens=20),))).summary()
    offline = estimate("llama-3.1-8b", "h100-sxm", batch=1, input_len=512, output_len=20)
    assert e.ttft_ms == pytest.approx(offline.ttft_ms + 1.0 + 3.0 + 0.2, rel=1e-12)  # ingress, latency, egress
    assert s["ttft_ms"]["mean"] == pytest.approx(e.ttft_ms, rel=1e-12)
    assert s["tpot_ms"]["mean"] == pytest.approx(e.tpot_ms, rel=1e-9)
    assert s["time_breakdown_ms"]["frontend_ms"] == pytest.approx(4.0, rel=1e-9)
    assert s["time_breakdown_ms"]["stream_ms"] == pytest.approx(0.2, rel=1e-9)


def test_a_shared_cpu_delays_the_engine_step():
    # vLLM V0: one process. Request 2 arrives while request 1's 50 ms ingress runs; the engine's first step
    # cannot start before the CPU is free, and then holds it for its own host time.
    dep = _frontend_dep(request_s=0.05, shares_engine_cpu=True)
    wl = Workload((RequestSpec(arrival_at=0.0, input_tokens=16, output_tokens=2), RequestSpec(arrival_at=0.0,
                                                                                              input_tokens=16,
                                                                                              output_tokens=2)))
    res = simulate(dep, wl, SimConfig(enable_prefix_caching=False))
    a, b = res.requests
    assert (a.engine_arrival_at, b.engine_arrival_at) == pytest.approx((0.05, 0.10))
    assert a.first_scheduled_at == pytest.approx(0.05) and b.first_scheduled_at >= 0.10


def test_offline_runs_have_no_frontend_stage():
    dep = deployment("llama-3.1-8b", "h100-sxm", frontend="none")
    s = simulate(dep, Workload((RequestSpec(arrival_at=0.0, input_tokens=128, output_tokens=8),))).summary()
    assert s["time_breakdown_ms"]["frontend_ms"] == 0.0 and s["frontend_utilization"] is None
    assert s["setup"]["engine"] == "vllm@0.34 (offline)" and s["setup"]["frontend"] == "none"


@pytest.mark.parametrize("raw, command, name, offline", [
    ({"engine": "TensorRT-LLM (trtllm-bench)", "engine_version": "0.17"}, "simulate", "trtllm@0.17", True),
    ({"engine": "TensorRT-LLM + Triton", "engine_version": "0.14.0"}, "simulate", "trtllm@0.14.0", False),
    ({"engine": "vLLM", "engine_version": "0.6.3"}, "simulate", "vllm@0.6.3", False),
    ({"engine": "vLLM", "engine_version": "0.6.3"}, "estimate", "vllm@0.6.3", True),
    ({"engine": "SGLang", "engine_version": "v0.5.1.post3"}, "simulate", "sglang@0.5.1.post3", False),
    ({"engine": "llama.cpp (llama-bench)", "engine_version": "May 2024 snapshot"}, "estimate", "llamacpp@b2900", True),
    ({"engine": "llama.cpp (llama-bench)", "engine_version": "PR 7676 branch, June 2024"}, "estimate", "llamacpp@b3150",
     True),
    ({"engine": "TensorRT-LLM (NVIDIA MLPerf harness)", "engine_version": "v4.1 submission"}, "simulate",
     "trtllm@0.12", True),
    ({"engine": "gpt-fast (PyTorch)", "engine_version": "README @0f925b5"}, "estimate", "pytorch@2.0", True),
    ({"engine": "NVIDIA NIM", "engine_version": "1.8.0"}, "simulate", "trtllm@0.17", False),
    # VLLM_USE_V1=0 on a V1-default release: the V0 engine, priced as the last V0-default release
    ({"engine": "vLLM", "engine_version": "0.9.1", "engine_knobs": {"VLLM_USE_V1": 0}}, "simulate", "vllm@0.7.3",
     False),
    ({"engine": "vLLM", "engine_version": "0.6.3", "engine_knobs": {"VLLM_USE_V1": 0}}, "simulate", "vllm@0.6.3",
     False),
    # vLLM 0.8-0.10's V1 oracle falls back to V0 for multi-step scheduling (its device checks are the deployment's:
    # test_vllm_v1_oracle_sends_a_device_it_cannot_serve_to_v0)
    ({"engine": "vLLM", "engine_version": "0.8.5", "engine_knobs": {"num_scheduler_steps": 8}}, "simulate",
     "vllm@0.7.3", False),
    ({"engine": "vLLM", "engine_version": "0.11.0", "engine_knobs": {"num_scheduler_steps": 8}}, "simulate",
     "vllm@0.11.0", False),
    # TensorRT-LLM's backend: the C++ engine flow by default before 1.0 (the catalog's PyTorch profiles start at
    # 0.20), PyTorch from 1.0; a stated engine flow from 0.20 on is priced as the last engine-flow release
    ({"engine": "TensorRT-LLM (trtllm-bench)", "engine_version": "0.20.0"}, "simulate", "trtllm@0.19.0", True),
    ({"engine": "TensorRT-LLM (trtllm-bench)", "engine_version": "0.21.0", "engine_knobs": {"backend": "pytorch"}},
     "simulate", "trtllm@0.21.0", True),
    ({"engine": "TensorRT-LLM (trtllm-bench, PyTorch backend)", "engine_version": "0.20.0"}, "simulate",
     "trtllm@0.20.0", True),
    ({"engine": "TensorRT-LLM (trtllm-serve)", "engine_version": "1.2.0"}, "simulate", "trtllm@1.2.0", False),
    ({"engine": "TensorRT-LLM (trtllm-serve)", "engine_version": "1.2.0", "engine_knobs": {"backend": "trt"}},
     "simulate", "trtllm@0.19.0", False),
    ({"engine": "TensorRT-LLM (trtllm-bench, TensorRT engine backend)", "engine_version": "1.0.0"}, "simulate",
     "trtllm@0.19.0", True),
    ({"engine": "TensorRT-LLM (trtllm-bench, PyTorch backend)", "engine_version": "0.19.0"}, "simulate",
     "trtllm@0.19.0", True),
])
def test_cases_name_their_engine(raw, command, name, offline):
    ce = case_engine(raw, command)
    assert ce.engine.name == name + (" (offline)" if offline else "")


def test_speculative_methods_a_release_does_not_serve_are_refused():
    """A proposer the release cannot run is refused (one line), not priced and launched without it: EAGLE-3 before
    vLLM 0.9; a draft model on vLLM 0.8-0.10 runs on V0 (V1 had n-gram and the EAGLE family only), is refused by
    0.11-0.14's V1 (NotImplementedError) and runs on V1 from 0.15 (PR #24322); the plan refuses it up front."""
    draft = "draft:llama-3.2-1b,k=4,alpha=0.7"
    old = deployment("llama-3.1-8b", "h100-sxm", engine="vllm@0.9.2", speculative=draft)
    assert (old.engine.name, old.engine.fell_back) == ("vllm@0.9.2 (V0)", "V1 runs no draft-model speculative decoding")
    assert deployment("llama-3.1-8b", "h100-sxm", engine="vllm@0.15", speculative=draft).engine.name == "vllm@0.15"
    for engine, spec in (("vllm@0.12", draft), ("vllm@0.14.1", draft), ("vllm@0.8.0", "eagle3,k=3,accepted=2.6"),
                         ("trtllm@1.2", "eagle,k=3,accepted=2.5")):
        with pytest.raises(SpecError, match=f"does not serve '{spec.partition(',')[0].partition(':')[0]}'"):
            deployment("llama-3.1-8b", "h100-sxm", engine=engine, speculative=spec)
    with pytest.raises(SpecError, match="vLLM 0.8.0 does not serve 'eagle3'"):
        SearchSpace(engine="vllm@0.8.0", speculative=(None, parse_speculative("eagle3,k=3,accepted=2.6")))


def test_a_version_past_the_catalog_or_a_pre_release_says_what_it_is_priced_as(capsys):
    assert get_engine("vllm@99").version_note == ("vLLM 99 is newer than any release flopwise's catalog knows "
                                                  "(0.34): priced as 0.34")
    assert get_engine("trtllm@1.2.0rc1").version_note.endswith("is a pre-release: priced as the release it precedes")
    assert get_engine("vllm@0.32").version_note == get_engine("sglang@0.5.6.post1").version_note == ""
    assert get_engine("llamacpp@b7000").version_note == ""  # a llama.cpp build number, not a beta
    assert run(["estimate", "--engine", "tgi@3.3.0", "--model", "qwen3-0.6b", "--json"]) == 0
    out = capsys.readouterr()
    assert "TGI 3.3.0 is newer than any release" in out.err and "priced as 3.0.0" in json.loads(out.out)["notes"][-1]


def test_a_version_before_the_family_s_first_release_is_refused(capsys):
    with pytest.raises(SpecError, match=r"SGLang 0.0.1 predates SGLang's first release \(0.1.3\)"):
        get_engine("sglang@0.0.1")
    with pytest.raises(SpecError, match=r"predates TensorRT-LLM's first release \(0.5.0\)"):
        get_engine("trtllm@0.4.9")
    assert get_engine("sglang@0.1.3").version == "0.1.3" and get_engine("trtllm@0.5.0").version == "0.5.0"
    assert get_engine("vllm@0.2.7").version_note == ""  # the V0 base prices it
    assert run(["estimate", "--engine", "sglang@0.0.1", "--model", "qwen3-0.6b"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "predates SGLang's first release" in err[0]


def test_vllm_v0_chunks_long_contexts_by_itself():
    """vLLM V0 from 0.5.3 turns chunked prefill on for max_model_len > 32K (EngineArgs.create_engine_config) with a
    512-token budget (2048 from 0.6.5), unless a sliding window, speculative decoding, a CPU backend, encoders (from
    0.6.2), ROCm (from 0.6.5) or MLA (from 0.7.1) keep it off; otherwise its budget covers the context. The launch
    says so where its --max-model-len would not."""
    def knobs(model, gpu="a100-sxm-80gb", engine="vllm@0.7.3", **kw):
        d = deployment(model, gpu, engine=engine, **kw)
        return d.enable_chunked_prefill, d.max_num_batched_tokens
    assert knobs("llama-3.1-8b", engine="vllm@0.5.2") == (False, 131_072)
    assert knobs("llama-3.1-8b", engine="vllm@0.6.3") == (True, 512)
    assert knobs("llama-3.1-8b") == (True, 2048)
    assert knobs("Qwen/Qwen3-0.6B") == (True, 2048)  # 40,960 tokens of context
    assert knobs("Qwen/Qwen3-0.6B", max_model_len=8192) == (False, 8192)
    assert knobs("Qwen/Qwen3-0.6B", max_model_len=1024) == (False, 2048)
    assert knobs("Qwen/Qwen3-0.6B", gpu="mi300x") == (False, 40_960)  # ROCm from 0.6.5
    assert knobs("Qwen/Qwen3-0.6B", gpu="mi300x", engine="vllm@0.6.3") == (True, 512)
    assert knobs("openai/gpt-oss-20b", gpu="h100-sxm") == (False, 131_072)  # sliding-window layers
    assert knobs("llama-3.1-8b", speculative="ngram,k=4,alpha=0.5") == (False, 131_072)
    assert knobs("llama-3.1-8b", gpu="cpu-xeon-spr-56c") == (False, 131_072)
    assert knobs("llama-3.1-8b", engine="vllm@0.11") == (True, 2048)  # V1: always chunked
    long = deployment("llama-3.1-8b", "a100-sxm-80gb", engine="vllm@0.7.3")
    assert rebuild(long, model=deployment("llama-3-8b", "a100-sxm-80gb").model).enable_chunked_prefill is False
    with pytest.raises(SpecError, match="max_model_len must be a positive integer"):
        deployment("llama-3.1-8b", "a100-sxm-80gb", max_model_len=0)
    target = LaunchTarget(deployment=long, model_id="meta-llama/Llama-3.1-8B", max_model_len=10240,
                          max_prompt_len=2048)
    assert "--enable-chunked-prefill" in render(target, long.engine).command  # 10,240 alone would not chunk


def test_vllm_v1_oracle_sends_a_device_it_cannot_serve_to_v0(tmp_path):
    """vLLM 0.8-0.10 run V0 where V1 cannot (EngineArgs._is_v1_supported_oracle): compute capability below 8.0, an
    FP8 KV cache off SM 9.0 / 10.0. Every deployment re-checks it: priced with 0.7.3's V0 profile under the asked
    release's name and launch flags, back on V1 once rebuilt where V1 runs; never from 0.11 (V0 removed), on AMD, or
    where VLLM_USE_V1=1 was stated."""
    v0 = get_engine("vllm@0.7.3")
    a100 = deployment("Qwen/Qwen3-0.6B", "a100-sxm-80gb", engine="vllm@0.9.2", kv="fp8")
    assert a100.engine.name == "vllm@0.9.2 (V0)" and a100.engine.launch == get_engine("vllm@0.9.2").launch
    assert (a100.engine.host, a100.engine.frontend, a100.engine.batch_defaults) == (v0.host, v0.frontend,
                                                                                    v0.batch_defaults)
    assert a100.engine.kernels.eager_prefill_kernel_s == 1.11e-4  # V0 launches its prefill eagerly
    assert "V1 reads an FP8 KV cache on SM 9.0" in notes(a100)[-1]
    t4 = deployment("Qwen/Qwen3-0.6B", "t4", engine="vllm@0.10.1", frontend="none", enforce_eager=True)
    assert t4.engine.name == "vllm@0.10.1 (V0) (offline) (eager)"
    assert t4.engine.fell_back == "V1 needs compute capability 8.0 or newer, NVIDIA T4 16GB is older"
    for gpu, engine, kv in (("h100-sxm", "vllm@0.9.2", "fp8"), ("b200", "vllm@0.10.1", "fp8"),
                            ("a100-sxm-80gb", "vllm@0.9.2", None), ("a100-sxm-80gb", "vllm@0.11.0", "fp8"),
                            ("mi300x", "vllm@0.9.2", "fp8"), ("t4", "vllm@0.7.3", None), ("t4", "sglang@0.4.9", None)):
        assert not deployment("Qwen/Qwen3-0.6B", gpu, engine=engine, kv=kv).engine.fell_back, (gpu, engine, kv)
    assert rebuild(a100, kv="bf16").engine == deployment("Qwen/Qwen3-0.6B", "a100-sxm-80gb", engine="vllm@0.9.2").engine
    assert rebuild(a100, hardware=get_hardware("h100-sxm")).engine.name == "vllm@0.9.2"
    with pytest.raises(SpecError, match="V0 engine .* one API server"):
        deployment("Qwen/Qwen3-0.6B", "a100-sxm-80gb", engine="vllm@0.9.2", kv="fp8", api_servers=2)
    forced, _ = case_deployment({"engine": "vLLM", "engine_version": "0.9.2", "engine_knobs": {"VLLM_USE_V1": 1}},
                                "simulate", {"model": "Qwen/Qwen3-0.6B", "gpu": "a100-sxm-80gb", "kv": "fp8"})
    assert forced.engine.name == "vllm@0.9.2"
    told = tmp_path / "v092.toml"  # a calibrated profile was measured on whichever engine ran: not swapped
    told.write_text('name = "vllm"\n[override]\nhost = { step_s = 1.0e-3 }\n')
    assert not deployment("Qwen/Qwen3-0.6B", "t4", engine="vllm@0.9.2", engine_file=told).engine.fell_back


@pytest.mark.parametrize("engine, kw, overlapped", [
    ("sglang@0.5.9", {}, True),
    ("sglang@0.5.9", {"speculative": "eagle,k=3,accepted=2.6"}, False),  # ServerArgs: overlap off with EAGLE
    ("sglang@0.5.9", {"pp": 2, "num_gpus": 2}, False),  # _handle_pipeline_parallelism
    ("vllm@0.15.0", {"speculative": "eagle,k=3,accepted=2.6"}, True),  # the EAGLE family keeps it
    ("vllm@0.15.0", {"speculative": "ngram,k=4,alpha=0.5"}, False),
    ("vllm@0.15.0", {"speculative": "draft:llama-3.2-1b,k=4,alpha=0.7"}, False),
    ("vllm@0.15.0", {"pp": 2, "num_gpus": 2}, True),
    ("vllm@0.14.0", {"pp": 2, "num_gpus": 2}, False),  # VllmConfig at 0.14: not with pipeline_parallel_size > 1
    ("vllm@0.14.0", {"tp": 2, "num_gpus": 2}, True),
    # a TP group over two nodes runs on the Ray executor, which 0.14-0.20 do not schedule asynchronously
    ("vllm@0.15.0", {"tp": 16, "num_gpus": 16, "nodes": 2}, False),
    ("vllm@0.20.2", {"tp": 8, "pp": 2, "num_gpus": 16, "nodes": 2}, False),
    ("vllm@0.21.0", {"tp": 16, "num_gpus": 16, "nodes": 2}, True),  # RayExecutorV2 by default
    ("sglang@0.5.9", {"speculative": "eagle,k=3,accepted=2.6", "async_scheduling": True}, True),  # stated wins
])
def test_engines_turn_async_scheduling_off_where_they_do(engine, kw, overlapped):
    d = deployment("meta-llama/Llama-3.1-8B", "h100-sxm", engine=engine, **kw)
    assert d.engine.host.async_scheduling is overlapped
    if "speculative" in kw:  # the switch-off belongs to the deployment: without the proposer it overlaps again
        assert rebuild(d, speculative=None).engine.host.async_scheduling


def test_vllm_schedules_asynchronously_where_each_node_holds_whole_groups():
    """Data-parallel ranks of tp GPUs, whole on each node, run on vLLM's multiprocessing executor (--data-parallel-
    size-local per node): async scheduling stays on; the launch names Ray only for a group that spans nodes."""
    d = deployment("Qwen/Qwen3-30B-A3B", "h100-sxm", engine="vllm@0.15.0", tp=8, dp=2, ep=16, num_gpus=16, nodes=2)
    assert not d.spans_nodes and d.engine.host.async_scheduling
    assert deployment("Qwen/Qwen3-30B-A3B", "h100-sxm", engine="vllm@0.15.0", tp=8, pp=2, num_gpus=16,
                      nodes=2).spans_nodes


@pytest.mark.parametrize("engine, overlapped", [("sglang@0.5.5", True), ("sglang@0.5.6", False),
                                                ("sglang@0.5.10", False), ("vllm@0.15.0", True)])
def test_sglang_runs_hybrid_linear_attention_models_without_overlap(engine, overlapped):
    """SGLang 0.5.6+ serves a gated-delta-net hybrid (Qwen3-Next) with its MambaRadixCache, which turns the overlap
    scheduler off (server_args.py); 0.5.5 had no such rule, vLLM none at all; a dense model keeps it."""
    d = deployment("Qwen/Qwen3-Next-80B-A3B-Instruct", "b200", tp=8, num_gpus=8, engine=engine)
    assert d.engine.host.async_scheduling is overlapped
    assert deployment("Qwen/Qwen3-8B", "b200", engine=engine).engine.host.async_scheduling


def test_a_sync_with_entry_outside_the_vocabulary_is_refused():
    from flopwise.errors import SpecError
    from flopwise.specs.engine import HostCosts
    with pytest.raises(SpecError, match="sync_with entry 'speculative:lookahead'"):
        HostCosts(sync_with=("speculative:lookahead",))
    with pytest.raises(SpecError, match="sync_with entry 'tp'"):
        HostCosts(sync_with=("tp",))
    assert HostCosts(sync_with=("pp",)).syncs(pp=2) and not HostCosts(sync_with=("pp",)).syncs(pp=1)
    assert HostCosts(sync_with=("multinode",)).syncs(spans_hosts=True)
    assert not HostCosts(sync_with=("multinode",)).syncs(pp=2)


def test_a_trtllm_engine_flow_behind_trtllm_serve_keeps_the_servers_frontend():
    """trtllm-serve 1.2 driving a TensorRT engine: the engine flow's costs (0.19's C++ executor, no eager prompt
    launches) behind 1.2's own FastAPI server."""
    raw = {"engine": "TensorRT-LLM (trtllm-serve)", "engine_version": "1.2.0", "engine_knobs": {"backend": "tensorrt"}}
    eng = case_engine(raw, "simulate").engine
    flow, served = get_engine("trtllm@0.19.0"), get_engine("trtllm@1.2.0", frontend="http")
    assert eng.host == flow.host and not eng.host.async_scheduling
    assert eng.kernels.eager_prefill_kernel_s == 0.0 and served.kernels.eager_prefill_kernel_s == 1.25e-4
    assert eng.frontend == served.frontend and eng.frontend.request_s == 1.5e-3


def test_a_load_generator_driving_the_engine_in_process_is_offline():
    """A source whose client runs the engine in the same process (AccelMark's loadgen on vLLM's AsyncLLMEngine) has
    no API server in front: its case is simulated with frontend none, as a serving client's is not."""
    inproc = {"engine": "vLLM (in-process AsyncLLMEngine)", "engine_version": "0.7.3",
              "engine_knobs": {"benchmark": "loadgen online scenario (Poisson, in-process AsyncLLMEngine)"}}
    assert case_engine(inproc, "simulate").engine.frontend is None
    served = {"engine": "vLLM", "engine_version": "0.7.3", "engine_knobs": {"benchmark": "vllm bench serve"}}
    assert case_engine(served, "simulate").engine.frontend is not None


def test_case_knobs_keep_each_engines_meaning():
    ce = case_engine({"engine": "vLLM", "engine_version": "0.6.0",
                      "engine_knobs": {"num_scheduler_steps": 10, "max_num_seqs": "256",
                                       "enable_prefix_caching": "False", "gpu_memory_utilization": 0.95}}, "simulate")
    assert ce.engine.host.step_s == pytest.approx(get_engine("vllm@0.6.0").host.step_s / 10)
    assert ce.knobs == {"max_num_seqs": 256, "gpu_memory_utilization": 0.95} and ce.enable_prefix_caching is False
    # a server told --async-scheduling before it was the default (vLLM 0.13) overlaps its host work; SGLang told
    # --disable-overlap-schedule does not; --num-continuous-decode-steps amortizes it like multi-step scheduling in
    # SGLang 0.3.4-0.3.5 only (later releases parse the flag and never read it); --scheduler-recv-interval is read
    args = {"model": "meta-llama/Llama-3.1-8B", "gpu": "h100-sxm", "tp": 1}
    assert not get_engine("vllm@0.13").host.async_scheduling
    told = {"engine": "vLLM", "engine_version": "0.13.0", "engine_knobs": {"async_scheduling": True}}
    assert case_engine(told, "simulate").knobs == {"async_scheduling": True}
    assert case_deployment(told, "simulate", args)[0].engine.host.async_scheduling
    off = {"engine": "SGLang", "engine_version": "0.5.6",
           "engine_knobs": {"disable_overlap_schedule": True, "num_continuous_decode_steps": 4}}
    assert get_engine("sglang@0.5.6").host.async_scheduling
    assert not case_deployment(off, "simulate", args)[0].engine.host.async_scheduling
    assert case_engine(off, "simulate").engine.host.per_seq_s == get_engine("sglang@0.5.6").host.per_seq_s
    old = {"engine": "SGLang", "engine_version": "0.3.5", "engine_knobs": {"num_continuous_decode_steps": 4}}
    assert case_engine(old, "simulate").engine.host.per_seq_s == pytest.approx(
        get_engine("sglang@0.3.5").host.per_seq_s / 4)
    # vLLM 0.6-0.7 told --disable-frontend-multiprocessing runs its API server and engine on one CPU, as before 0.6
    args8 = {"model": "meta-llama/Llama-3.1-8B", "gpu": "h100-sxm", "tp": 1}
    inproc = {"engine": "vLLM", "engine_version": "0.6.3", "engine_knobs": {"disable_frontend_multiprocessing": True}}
    assert not get_engine("vllm@0.6.3").frontend.shares_engine_cpu
    assert case_deployment(inproc, "simulate", args8)[0].engine.frontend.shares_engine_cpu
    v1 = dict(inproc, engine_version="0.10.0")  # V1 keeps its engine core in a process of its own
    assert not case_deployment(v1, "simulate", args8)[0].engine.frontend.shares_engine_cpu
    # llama-server's -np slots cap the requests decoded together (one slot by default before b6850's four)
    slots = {"engine": "llama.cpp (llama-server)", "engine_version": "b6800",
             "engine_knobs": {"n_parallel": 32, "flash_attn": True}}
    assert case_engine(slots, "simulate").knobs == {"max_num_seqs": 32}
    assert case_deployment(slots, "simulate", {"model": "meta-llama/Llama-3.1-8B", "gpu": "rtx-4090", "tp": 1,
                                                "weights": "q4_k_m"})[0].max_num_seqs == 32
    recv = {"engine": "SGLang", "engine_version": "0.5.6", "engine_knobs": {"scheduler_recv_interval": "10"}}
    assert case_engine(recv, "simulate").sglang == {"scheduler_recv_interval": 10}
    # a KV pool the run's log reports (TensorRT-LLM's 42,668 blocks x 64 tokens per rank) is the one simulated, whatever
    # memory fraction gave it there
    trt = {"engine": "TensorRT-LLM", "engine_version": "0.16.0",
           "engine_knobs": {"kv_cache_free_gpu_mem_fraction": 0.9, "kv_cache_tokens": 42668 * 64}}
    args70 = {"model": "meta-llama/Llama-3.1-70B", "gpu": "h100-sxm", "tp": 8, "weights": "fp8", "kv": "fp8"}
    dep, _ = case_deployment(trt, "simulate", args70)
    assert memory_plan(dep).kv_capacity_tokens == pytest.approx(42668 * 64, rel=1e-4)
    plain, _ = case_deployment({**trt, "engine_knobs": {"kv_cache_free_gpu_mem_fraction": 0.9}}, "simulate", args70)
    assert memory_plan(plain).kv_capacity_tokens > 1.1 * 42668 * 64
    # vLLM's 'Available KV cache memory: 9.70 GiB' for Qwen2.5-32B (64 layers x 8 KV heads x 128 x 2 x 2 bytes =
    # 256 KiB a token): 9.7 x 2^30 / 2^18 = 39,731 tokens, in whole 16-token blocks
    told = {"engine": "vLLM", "engine_version": "0.10.1", "engine_knobs": {"kv_cache_gib_available": 9.7}}
    dep, _ = case_deployment(told, "simulate", {"model": "Qwen/Qwen2.5-32B", "gpu": "a100-sxm-80gb", "tp": 1})
    assert memory_plan(dep).kv_capacity_tokens == pytest.approx(39731, abs=16)
    # llama.cpp -ub 2048: a 2,048-token prompt is one pass (512 by default)
    ub = {"engine": "llama.cpp (llama-bench)", "engine_version": "b7000", "engine_knobs": {"n_ubatch": 2048}}
    assert case_engine(ub, "estimate").engine.kernels.ubatch_tokens == 2048
    assert case_engine({**ub, "engine_knobs": {}}, "estimate").engine.kernels.ubatch_tokens == 512
    # a stated CUDA-graph batch cap replaces the engine's default for the device (SGLang on an H100 at TP 1: 256)
    sgl = {"engine": "SGLang", "engine_version": "0.5.6"}
    assert case_deployment(sgl, "simulate", args)[0].engine.kernels.cuda_graph_max_bs == 256
    dep, _ = case_deployment({**sgl, "engine_knobs": {"cuda_graph_max_bs": 512}}, "simulate", args)
    assert dep.engine.kernels.cuda_graph_max_bs == 512
    stated = case_engine({**sgl, "engine_knobs": {"enable_mixed_chunk": "True", "max_prefill_tokens": "32768",
                                                  "schedule_policy": "LPM", "tp": 8}}, "simulate")
    assert stated.sglang == {"enable_mixed_chunk": True, "max_prefill_tokens": 32768, "schedule_policy": "lpm"}
    assert case_engine({**sgl, "engine_knobs": {"tp": 8}}, "simulate").sglang == {}  # nothing stated: defaults

@pytest.mark.parametrize(("engine", "version", "knobs", "rescaled"), [
    ("vLLM", "0.19.0", {"benchmark": "vllm bench serve"}, True),  # PR #21108 is in 0.10.0
    ("vLLM", "0.10.0", {"benchmark": "benchmarks/benchmark_serving.py"}, True),
    ("vLLM", "0.9.2", {"benchmark": "vllm bench serve"}, False),  # before it: gaps as drawn
    ("vLLM", "0.19.0", {"benchmark": "sglang.bench_serving"}, False),  # SGLang's client never rescaled
    ("SGLang", "0.5.6", {"benchmark": "vllm bench serve"}, False),  # client release unknown
    ("SGLang", "0.5.6", {"benchmark": "vllm bench serve", "benchmark_version": "0.11.0"}, True),
    ("vLLM", "0.19.0", {}, False),  # client not named
])
def test_vllms_client_rescales_its_schedule_from_0_10(engine, version, knobs, rescaled):
    ce = case_engine({"engine": engine, "engine_version": version, "engine_knobs": knobs}, "simulate")
    assert ce.rescale_arrivals is rescaled



def test_vllm_06_multi_step_scheduling_lifts_an_engine_bound_ceiling():
    """vLLM 0.6 (MQLLMEngine): the engine process does the per-sequence output work, detokenization included, that
    --num-scheduler-steps amortizes; the API server only streams. At max load (Llama-3.1-8B fp8, one H100, 256
    sequences) the engine binds, not the API server, and 10 scheduler steps raise throughput: Lambda measured
    3,958 -> 8,088 output tok/s (benchmarks/data rows 1048 and 1049)."""
    eng = get_engine("vllm@0.6.0")
    assert eng.frontend.output_token_s == pytest.approx(3.0e-5) and eng.host.per_seq_s == pytest.approx(1.75e-4)
    args = {"model": "meta-llama/Llama-3.1-8B", "gpu": "h100-sxm", "tp": 1, "weights": "fp8"}
    wl = build_workload(num_requests=1500, workload="sharegpt", request_rate=float("inf"), seed=0)
    out = {}
    for steps in (1, 10):
        raw = {"engine": "vLLM", "engine_version": "0.6.0",
               "engine_knobs": {"num_scheduler_steps": steps, "max_num_seqs": 256, "max_model_len": 2048}}
        dep, ce = case_deployment(raw, "simulate", args)
        out[steps] = simulate(dep, wl, SimConfig(enable_chunked_prefill=ce.enable_chunked_prefill)).summary()
    assert out[10]["bottleneck"] != "frontend" and out[10]["frontend_utilization"] < 0.8
    assert 1.6 < out[10]["output_tokens_per_s"] / out[1]["output_tokens_per_s"] < 2.6


def test_llamacpp_fp16_gemms_accumulate_in_fp16_on_geforce_only():
    """llama.cpp's cuBLAS GEMMs accumulate in FP16 (CUBLAS_COMPUTE_16F): on an RTX 4090 their roof is
    max(165.2, 330.3 x fp16_accumulate_compute) TFLOP/s; on an H100 (no separate FP16-accumulate rate) and under
    vLLM (FP32 accumulate) it stays the FP16 peak."""
    lcpp = deployment("llama-2-7b", "rtx-4090", engine="llamacpp@b2000", weights="fp16")
    share = lcpp.engine.kernels.fp16_accumulate_compute
    assert 0.5 < share < 1
    assert roofs(lcpp).nominal_peak_linear == pytest.approx(max(165.2, 330.3 * share) * 1e12)
    assert roofs(deployment("llama-2-7b", "rtx-4090", weights="fp16")).nominal_peak_linear == pytest.approx(165.2e12)
    h100 = deployment("llama-2-7b", "h100-sxm", engine="llamacpp@b2000", weights="fp16")
    assert roofs(h100).nominal_peak_linear == pytest.approx(h100.hardware.peak_tflops["fp16"] * 1e12)
    # quantized weights before MMQ's int8 tensor cores (b3100) are dequantized to fp16 and take the same path
    q4 = deployment("llama-2-7b", "rtx-4090", engine="llamacpp@b2000", weights="q4_0")
    assert roofs(q4).nominal_peak_linear == pytest.approx(max(165.2, 330.3 * share) * 1e12)


def test_marlin_engines_stream_int4_weights_at_their_own_rate_on_sm80_and_newer():
    """vLLM from 0.5.3 (awq_marlin, PR #6612) and SGLang run int4 AWQ / GPTQ weights on Marlin kernels: they stream
    at the engine's marlin_weight_read (0.9 of the 16-bit rate per byte), not the format's 0.55 (AWQ's own kernels,
    gpt-fast), on NVIDIA GPUs with bf16 tensor cores (compute capability 8.0+, which Marlin needs). In a batch-1 decode
    step of Qwen2.5-7B the int4 layers' memory time scales by 0.55 / 0.9; the 16-bit LM head reads at the plain rate."""
    def dep(gpu, engine, weights="int4-awq"):
        return deployment("qwen2.5-7b", gpu, engine=engine, weights=weights)

    assert roofs(dep("a100-sxm-40gb", "vllm@0.5.3")).weight_read_eff == 0.9
    assert roofs(dep("a100-sxm-40gb", "vllm@0.20")).weight_read_eff == 0.9
    assert roofs(dep("a100-sxm-40gb", "sglang@0.5.6", weights="int4-gptq")).weight_read_eff == 0.9
    assert roofs(dep("a100-sxm-40gb", "vllm@0.20", weights="int8")).weight_read_eff == 0.9  # GPTQ 8-bit
    assert roofs(dep("a100-sxm-40gb", "vllm@0.5.2")).weight_read_eff == 0.55  # before awq_marlin
    assert roofs(dep("v100-pcie-32gb", "vllm@0.20")).weight_read_eff == 0.55  # sm70: no Marlin
    assert roofs(dep("mi300x", "vllm@0.20")).weight_read_eff == 0.55  # ROCm: no Marlin
    assert roofs(dep("a100-sxm-40gb", "vllm@0.20", weights="nf4")).weight_read_eff == 0.5  # bitsandbytes kernels
    old, new = ({o.name: o for o in step_cost(d, decode_shape(1, 128, layout(d).windows)).ops}
                for d in (dep("a100-sxm-40gb", "vllm@0.5.2"), dep("a100-sxm-40gb", "vllm@0.5.3")))
    for name in ("qkv_o_proj", "mlp"):  # the same int4 bytes, read faster
        assert new[name].weight_bytes == old[name].weight_bytes
        assert new[name].memory_s / old[name].memory_s == pytest.approx(0.55 / 0.9, rel=2e-3)
    # the 16-bit LM head (152,064 x 3,584 x 2 bytes) streams as a plain GEMV under both: 1.09 GB at 0.85 x 1,555 GB/s
    head = new["lm_head"]
    assert head.weight_bytes == 152064 * 3584 * 2 and head.memory_s == old["lm_head"].memory_s
    assert head.memory_s == pytest.approx(152064 * 3584 * 2 / (0.85 * 1555e9), rel=0.01)


def test_llamacpp_metal_multiplies_gguf_tiles_at_the_f16_roof():
    """On Apple silicon llama.cpp runs Metal's kernel_mul_mm for f16 and GGUF weights alike (tiles dequantized into
    threadgroup memory): q4_0 and q4_k_m prompt matmuls get the f16 roof, 27.2 TFLOP/s x compute_max on an M2 Ultra,
    at a build whose CUDA path uses MMQ (int8 x 0.45); on an RTX 4090 the same build keeps MMQ."""
    f16 = roofs(deployment("llama-2-7b", "apple-m2-ultra", engine="llamacpp@b7000", weights="fp16"))
    for w in ("q4_0", "q4_k_m"):
        r = roofs(deployment("llama-2-7b", "apple-m2-ultra", engine="llamacpp@b7000", weights=w))
        assert r.nominal_peak_linear == pytest.approx(27.2e12)
        assert r.gemm_eff == 1.0
        assert r.linear_rate == pytest.approx(f16.linear_rate)
    cuda = deployment("llama-2-7b", "rtx-4090", engine="llamacpp@b7000", weights="q4_0")
    assert (cuda.engine.kernels.quantized_gemm_dtype, cuda.engine.kernels.fused_dequant) == ("int8", False)
    assert roofs(cuda).nominal_peak_linear == pytest.approx(660.6e12)
    assert roofs(cuda).gemm_eff == pytest.approx(0.45)
    # before MMQ (b2000) CUDA dequantizes to fp16 in its own pass: q4_0's gemm_efficiency (0.7) applies there only
    assert roofs(deployment("llama-2-7b", "rtx-4090", engine="llamacpp@b2000", weights="q4_0")).gemm_eff == 0.7
    assert roofs(deployment("llama-2-7b", "apple-m2-ultra", engine="llamacpp@b2000", weights="q4_0")).gemm_eff == 1.0


def test_llamacpp_metal_streams_gguf_weights_at_its_own_mat_vec_rate():
    """Metal's kernel_mul_mv_q*_f32 unpack GGUF blocks in registers as they read them: llama.cpp's Apple profile
    streams q4_0 / q8_0 / mxfp4 weights at block_weight_read (0.95 of the 16-bit rate per byte), not the formats'
    CUDA-fitted 0.85. Hand check, Llama-2-7B q4_0 on an M2 Ultra, batch-1 decode: an MLP layer's weights (3 x 4096 x
    11008 x 4.5 bits = 76.1 MB) take 76.1 MB / (800 GB/s x 0.90 x 0.95) = 0.111 ms; on an RTX 4090 the same build
    keeps 0.85."""
    metal = deployment("llama-2-7b", "apple-m2-ultra", engine="llamacpp@b7000", weights="q4_0")
    assert metal.engine.kernels.block_weight_read == 0.95
    assert roofs(metal).weight_read_eff == 0.95
    assert roofs(deployment("llama-2-7b", "apple-m2-ultra", engine="llamacpp@b7000", weights="q8_0")).weight_read_eff \
        == 0.95
    assert roofs(deployment("llama-2-7b", "rtx-4090", engine="llamacpp@b7000", weights="q4_0")).weight_read_eff == 0.85
    assert roofs(deployment("llama-2-7b", "apple-m2-ultra", engine="llamacpp@b7000", weights="fp16")).weight_read_eff \
        == 1.0  # 16-bit weights: the plain rate
    mlp = {o.name: o for o in step_cost(metal, decode_shape(1, 128, layout(metal).windows)).ops}["mlp"]
    assert mlp.weight_bytes == pytest.approx(32 * 3 * 4096 * 11008 * 4.5 / 8)
    assert mlp.memory_s == pytest.approx(32 * 3 * 4096 * 11008 * 4.5 / 8 / (800e9 * 0.90 * 0.95), rel=0.01)


def test_llamacpp_metal_reads_an_expert_per_token_expert_pair_below_32_tokens():
    """ggml-metal's MUL_MAT_ID runs one mat-vec per token-expert pair (kernel_mul_mv_id) below ne21_mm_id_min = 32
    tokens: a decode batch of B reads B x k experts' weights, repeats included. Hand check, gpt-oss-20b (MXFP4
    experts, 4.25 bits: 24,891,840 x 0.53125 = 13.22 MB each, top-4 of 32) on an M2 Ultra: one group of 12 layers
    reads 12 x 4 x B experts at B = 1, 4 and 31, so B = 4 reads 4x what B = 1 does; at 32 tokens the grouped
    kernel reads each touched expert once (gamma(2) popularity: 32 - 28 / (1 + 31 x 4 / 64)^2 = 28.96); CUDA's
    build reads the touched experts at every size (B = 4: 32 - 28 / (1 + 3 x 4 / 64)^2 = 12.14)."""
    expert = 24891840 * 4.25 / 8
    metal = deployment("gpt-oss-20b", "apple-m2-ultra", engine="llamacpp@b7000")
    cuda = deployment("gpt-oss-20b", "rtx-4090", engine="llamacpp@b7000")
    assert metal.engine.kernels.moe_pair_reads_below == 32 and cuda.engine.kernels.moe_pair_reads_below == 0

    def experts_read(dep, b):
        ops = {o.name: o for o in step_cost(dep, decode_shape(b, 128, layout(dep).windows)).ops}
        return ops["moe_experts"].weight_bytes

    router = experts_read(metal, 1) - 12 * 4 * expert
    assert 0 < router < 0.1 * expert  # the 12 routers (2,880 x 32 each)
    for b in (1, 4, 31):
        assert experts_read(metal, b) == pytest.approx(12 * 4 * b * expert + router)
    assert experts_read(metal, 32) == pytest.approx(12 * (32 - 28 / (1 + 31 * 4 / 64) ** 2) * expert + router)
    assert experts_read(cuda, 4) == pytest.approx(12 * (32 - 28 / (1 + 3 * 4 / 64) ** 2) * expert + router)
    assert experts_read(cuda, 1) == experts_read(metal, 1)
    with pytest.raises(SpecError, match="moe_pair_reads_below"):
        KernelFactors(moe_pair_reads_below=-1)


def test_llamacpp_mmq_pads_each_touched_experts_rows_to_the_passs_tile():
    """llama.cpp's CUDA / HIP MUL_MAT_ID (one MMQ launch for all experts) sizes its tile from the pass's token count:
    mmq_x = the fewest column tiles for T tokens, at most 128, so every touched expert computes whole tiles. By hand
    for gpt-oss-120b (128 experts, 4 per token, 18 layers per attention group) with gamma(2) popularity, touched(T) =
    128 - 124 / (1 + (T - 1) x 4 / 256)^2: T = 512 gives 126.46 experts of 16.2 rows, each padded to 128 columns
    (8x the rows' FLOPs); T = 100 a 104-wide tile (3.7 rows each); T = 8 an 8-wide one. Metal's mul_mm_id (the Apple
    build) keeps 2 x T x 4 x P."""
    cuda = deployment("gpt-oss-120b", "rtx-pro-6000-blackwell", engine="llamacpp@b7000")
    metal = deployment("gpt-oss-120b", "apple-m3-ultra", engine="llamacpp@b7000")
    assert cuda.engine.kernels.moe_tile_cols == 128 and metal.engine.kernels.moe_tile_cols == 0
    params = 24891840  # one expert's gate, up and down (2,880 x 2,880 x 3)

    def moe_flops(dep, tokens):
        ops = [o for o in step_cost(dep, prefill_shape(1, tokens, layout(dep).windows)).ops if o.name == "moe_experts"]
        assert [o.count for o in ops] == [18, 18]
        return ops[0].flops

    for tokens, tile in ((512, 128), (100, 104), (8, 8)):
        touched = 128 - 124 / (1 + (tokens - 1) * 4 / 256) ** 2
        cols = math.ceil(tokens * 4 / touched / tile) * tile
        assert cols == tile
        assert moe_flops(cuda, tokens) == pytest.approx(18 * 2 * touched * cols * params, rel=1e-9)
        assert moe_flops(metal, tokens) == pytest.approx(18 * 2 * tokens * 4 * params, rel=1e-9)
    assert moe_flops(cuda, 512) / moe_flops(metal, 512) == pytest.approx(126.46 * 128 / 2048, rel=1e-4)
    with pytest.raises(SpecError, match="moe_tile_cols"):
        KernelFactors(moe_tile_cols=-1)


def test_llamacpp_metal_streams_experts_at_its_moe_share():
    """Metal's kernel_mul_mv_id streams each token-expert pair's expert at moe_bandwidth = 0.75 of the dense
    mat-vec's rate (fitted on the Apple MoE decode rows; CUDA's mmvq at 0.8, fitted on its own): the routed experts'
    weight bytes of a 4-sequence gpt-oss-20b decode step take 1/0.75 as long to read as at 1.0, every other
    operator's memory time unchanged."""
    metal = deployment("gpt-oss-20b", "apple-m2-ultra", engine="llamacpp@b7000")
    assert metal.engine.kernels.moe_bandwidth == 0.75
    assert deployment("gpt-oss-20b", "rtx-4090", engine="llamacpp@b7000").engine.kernels.moe_bandwidth == 0.8
    flat = replace(metal, engine=replace(metal.engine, kernels=replace(metal.engine.kernels, moe_bandwidth=1.0)))
    shape = decode_shape(4, 128, layout(metal).windows)
    ops = [(a, b) for a, b in zip(step_cost(metal, shape).ops, step_cost(flat, shape).ops, strict=True)]
    moe = [(a, b) for a, b in ops if a.name == "moe_experts"]
    assert len(moe) == 2
    for a, b in moe:  # the weight bytes dominate; the router and activations are a sliver
        assert a.memory_s / b.memory_s == pytest.approx(1 / 0.75, rel=0.01)
    assert all(a.memory_s == pytest.approx(b.memory_s) for a, b in ops if a.name != "moe_experts")


def test_llamacpp_amd_discrete_gpus_read_gguf_blocks_at_their_own_share():
    """llama.cpp's device rule for AMD is limited to discrete GPUs (kind gpu): an RX 7900 XTX and an MI300X read GGUF
    blocks at 0.65 of the bandwidth roof (fitted on their decode rows), a Strix Halo APU (kind soc) keeps its SoC
    profile's rate and Apple its Metal rule. By hand, Llama-2-7B Q4_0 at batch 1: the dense layers' weight bytes
    take 0.85 / 0.65 as long to stream as under the format's own CUDA-fitted rate."""
    def read_eff(gpu):
        return deployment("llama-2-7b", gpu, engine="llamacpp@b5882", weights="q4_0").engine.kernels.block_weight_read

    assert read_eff("rx-7900-xtx") == read_eff("mi300x") == 0.65
    assert read_eff("strix-halo-395") == 0.0 and read_eff("rtx-4090") == 0.0
    assert read_eff("apple-m2-ultra") == 0.95
    amd = deployment("llama-2-7b", "rx-7900-xtx", engine="llamacpp@b5882", weights="q4_0")
    cuda_rate = replace(amd, engine=replace(amd.engine, kernels=replace(amd.engine.kernels, block_weight_read=0.0)))
    shape = decode_shape(1, 128, layout(amd).windows)
    mlp = next(o for o in step_cost(amd, shape).ops if o.name == "mlp")
    mlp_cuda = next(o for o in step_cost(cuda_rate, shape).ops if o.name == "mlp")
    assert mlp.memory_s / mlp_cuda.memory_s == pytest.approx(0.85 / 0.65, rel=0.01)
    with pytest.raises(SpecError, match="kind must be one of cpu, gpu, soc, got 'dgpu'"):
        DeviceKernels(vendor="amd", kernels=(("block_weight_read", 0.65),), kind="dgpu")


def test_sglang_rocm_builds_launch_their_eager_prefill_faster():
    """SGLang's ROCm images (AITER's fused kernels, HIP_FORCE_DEV_KERNARG=1) launch an eager prefill at 4e-5 s per
    modelled kernel (fitted on the AMD SGLang rows), the CUDA build at 6.75e-5. By hand, a 32-token Llama-3.1-8B
    prompt launches 8 kernels in each of 32 layers + 2 = 258, more slowly than they run on either GPU: its step is
    that floor + the 0.05 ms fixed step cost, 258 x 40 us = 10.32 ms on an MI300X, 258 x 67.5 us = 17.415 ms on an
    H100."""
    for gpu, per_kernel in (("mi300x", 4.0e-5), ("mi355x", 4.0e-5), ("h100-sxm", 6.75e-5), ("b200", 6.75e-5)):
        dep = deployment("llama-3.1-8b", gpu, engine="sglang@0.5.6")
        assert dep.engine.kernels.eager_prefill_kernel_s == per_kernel
    for gpu, floor in (("mi300x", 10.32e-3), ("h100-sxm", 17.415e-3)):
        dep = deployment("llama-3.1-8b", gpu, engine="sglang@0.5.6")
        assert step_time(dep, prefill_shape(1, 32, layout(dep).windows)) == pytest.approx(floor + 0.05e-3)


def test_sglang_0_5_10_replays_its_prompt_steps_as_piecewise_graphs():
    """SGLang 0.5.10 turned piecewise CUDA graphs for prefill on by default (server_args: disable_piecewise_cuda_graph
    False), except on ROCm and with DP attention or speculative decoding. By hand, a 32-token Qwen3-0.6B prompt (28
    layers, 8 modelled kernels each + 2 = 226) on an H100: 0.5.9 launches it eagerly, 226 x 67.5 us + the 0.05 ms
    fixed step cost = 15.305 ms; 0.5.10 replays it piecewise, 2 ms + 28 x 75 us + 0.05 ms = 4.15 ms (its kernels
    take less); an MI300X stays eager on both, 226 x 40 us + 0.05 ms = 9.09 ms; speculative decoding or DP attention
    on 0.5.10 falls back to the eager launches (speculative decoding also turns the overlap scheduler off, so the
    step's host work, 1.5 ms + 43 us for its one sequence, adds: 15.305 + 1.543 = 16.848 ms), and a decode batch above
    the graph cap still launches eagerly. An MLA model (DeepSeek-V3) is priced eagerly on 0.5.10 as on 0.5.9
    (`piecewise_mla` false: its prompts measured far slower than the piecewise floor), even at TP 8."""
    def prompt_ms(gpu: str, engine: str, **kw: object) -> float:
        dep = deployment("qwen3-0.6b", gpu, engine=engine, **kw)
        return step_time(dep, prefill_shape(1, 32, layout(dep).windows)) * 1e3

    assert prompt_ms("h100-sxm", "sglang@0.5.9") == pytest.approx(15.305)
    assert prompt_ms("h100-sxm", "sglang@0.5.10") == pytest.approx(4.15)
    assert prompt_ms("mi300x", "sglang@0.5.9") == pytest.approx(9.09)
    assert prompt_ms("mi300x", "sglang@0.5.10") == pytest.approx(9.09)
    assert prompt_ms("h100-sxm", "sglang@0.5.10", speculative="ngram,k=4,alpha=0.6") == pytest.approx(16.848)
    assert prompt_ms("h100-sxm", "sglang@0.5.10", enforce_eager=True) == pytest.approx(15.305)
    dp = roofs(deployment("qwen3-30b-a3b", "h200", engine="sglang@0.5.10", tp=1, dp=2, ep=2))
    tp = roofs(deployment("qwen3-30b-a3b", "h200", engine="sglang@0.5.10", tp=2))
    assert (dp.piecewise_prefill, dp.piecewise_layer_s, dp.eager_kernel_s) == (False, 0.0, 6.75e-5)
    assert (tp.piecewise_prefill, tp.piecewise_layer_s, tp.eager_kernel_s) == (True, 7.5e-5, 6.75e-5)
    mla = roofs(deployment("deepseek-v3", "h200", engine="sglang@0.5.10", tp=8, weights="fp8"))
    assert (mla.piecewise_prefill, mla.piecewise_layer_s, mla.eager_kernel_s) == (False, 0.0, 6.75e-5)
    mla = {v: deployment("deepseek-v3", "h200", engine=f"sglang@{v}", tp=8, weights="fp8") for v in ("0.5.9", "0.5.10")}
    prompt = prefill_shape(1, 1024, layout(mla["0.5.9"]).windows)
    assert step_time(mla["0.5.10"], prompt) == pytest.approx(step_time(mla["0.5.9"], prompt), rel=1e-12)
    # its 1,205 modelled kernels' eager launches + the fixed 0.05 ms, not 2 ms + 61 layers x 75 us (1,327 less the
    # 2 x 61 norms the all-reduce fusion carries from 0.5.7: tests/test_allreduce_fusion.py)
    assert step_time(mla["0.5.10"], prompt) == pytest.approx((1327 - 2 * 61) * 6.75e-5 + 0.05e-3)
    assert step_time(deployment("deepseek-v3", "h200", engine="sglang@0.5.6", tp=8, weights="fp8"),
                     prompt) == pytest.approx(1327 * 6.75e-5 + 0.05e-3)
    # a decode batch of 257 above the H100's graph cap of 256: eager launches, 226 x 67.5 us (no collectives at tp 1)
    dep = deployment("qwen3-0.6b", "h100-sxm", engine="sglang@0.5.10")
    assert dep.engine.kernels.cuda_graph_max_bs == 256
    over = batch_shape([[1, 100]] * 257, layout(dep).windows)
    assert step_time(dep, over) == pytest.approx(226 * 6.75e-5 + 0.05e-3)
    assert decode_step_time(dep, 257, 257 * 100) == pytest.approx(step_time(dep, over), rel=1e-9)
    # the deployment keeps the engine's own factors (a rebuild without speculation gets the graphs back), and
    # vLLM's profile has no such switch: its piecewise prompt steps stay with speculative decoding
    spec = deployment("qwen3-0.6b", "h100-sxm", engine="sglang@0.5.10", speculative="ngram,k=4,alpha=0.6")
    assert spec.engine.kernels.piecewise_prefill
    assert step_time(rebuild(spec, speculative=None), prefill_shape(1, 32, layout(spec).windows)) \
        == pytest.approx(4.15e-3)
    assert roofs(deployment("qwen3-0.6b", "h100-sxm", engine="vllm@0.15", speculative="ngram,k=4,alpha=0.6")) \
        .piecewise_layer_s == 7.5e-5


def test_llamacpp_on_pascal_runs_gguf_prompts_as_int8_dot_products():
    """A Tesla P40 has no fast fp16 (1/64 rate, so the catalog lists fp32 11.8 and int8 47 TOPS): llama.cpp never
    took its cuBLAS path there (only Volta and newer, PR #3776) but MMQ's DP4A int8 dot products, at every build.
    Hand check for Llama-2-7B q4_0 at b1850: 47 TOPS x low-precision 0.75 x compute_max 0.75 x mmq 0.45 =
    11.9 TOP/s; the old fp16-fallback pricing was 11.8 TFLOP/s x 0.75 x q4_0's 0.7 = 6.2 (measured pp512 935
    t/s = 12.6 TOP/s, PR #4766)."""
    r = roofs(deployment("llama-2-7b", "tesla-p40", engine="llamacpp@b1850", weights="q4_0"))
    assert r.nominal_peak_linear == pytest.approx(47e12)
    assert r.gemm_eff == pytest.approx(0.45)
    assert r.linear_rate == pytest.approx(47e12 * 0.75 * 0.75 * 0.45)
    # fp16 weights keep the fp32 fallback, and a card with fp16 math keeps the cuBLAS path before b3100
    assert roofs(deployment("llama-2-7b", "tesla-p40", engine="llamacpp@b1850", weights="fp16")).nominal_peak_linear \
        == pytest.approx(11.8e12)
    assert roofs(deployment("llama-2-7b", "rtx-4090", engine="llamacpp@b1850", weights="q4_0")).gemm_eff == 0.7


def test_block_fp8_adds_a_group_quant_launch_per_gemm_input_in_eager_steps():
    """Block-scaled FP8 quantizes each GEMM's input per 1x128 token group in a kernel of its own. DeepSeek-V3 (61
    layers: 3 dense, 58 MoE with a shared expert, MLA with a q LoRA) by hand: 61 x 4 projection inputs (q_a, q_b,
    kv_a, o) + 58 x (2 routed + 2 shared) + 3 x 2 dense MLP = 482 launches. A short prompt under SGLang (prefill
    without CUDA graphs) is launch-bound, so it takes exactly 482 x eager_prefill_kernel_s longer than with
    per-tensor FP8; vLLM V1, which compiles prefill into graphs, is not launch-bound: it pays the block scaling's
    compute (`gemm_efficiency` 0.55 of the FP8 roof) and, without that, would match per-tensor FP8."""
    def prefill_s(weights: str, engine: str, gemm_efficiency: float | None = None) -> float:
        dep = deployment("deepseek-v3", "b200", tp=8, weights=weights, engine=engine)
        if gemm_efficiency is not None:
            dep = replace(dep, weights=replace(dep.weights, gemm_efficiency=gemm_efficiency))
        return step_time(dep, prefill_shape(1, 610, layout(dep).windows))

    eager_s = get_engine("sglang@0.5.6").kernels.eager_prefill_kernel_s
    assert prefill_s("fp8-block", "sglang@0.5.6") - prefill_s("fp8", "sglang@0.5.6") == pytest.approx(482 * eager_s)
    assert prefill_s("fp8-block", "vllm@0.11", 1.0) == pytest.approx(prefill_s("fp8", "vllm@0.11"), rel=1e-3)
    assert prefill_s("fp8-block", "vllm@0.11") > 1.03 * prefill_s("fp8", "vllm@0.11")
    assert roofs(deployment("deepseek-v3", "h200", tp=8, weights="fp8-block", frontend="none")).linear_rate == \
        pytest.approx(1978.9e12 * 0.75 * 0.75 * 0.55)  # FP8 roof x low-precision factor x compute_max x scaling
    # an A100 (no FP8 math) runs it through a weight-only kernel, which scales nothing in FP8: the generic 0.85
    assert roofs(deployment("qwen3-8b", "a100-sxm-80gb", weights="fp8-block", frontend="none")).gemm_eff == 0.85


def test_trtllm_reserves_whole_sequences_and_vllm_does_not():
    """TensorRT-LLM's default capacity policy (GUARANTEED_NO_EVICT) is the profile's `reserve_max_tokens`, which
    the simulator's scheduler takes; vLLM and SGLang allocate as tokens come."""
    for engine, reserves in (("trtllm", True), ("trtllm@0.17", True), ("vllm", False), ("sglang", False)):
        dep = deployment("llama-3.1-8b", "h100-sxm", engine=engine)
        assert dep.engine.reserve_max_tokens is reserves
        assert getattr(make_scheduler(dep, SimConfig().resolved(dep)), "reserve_full", False) is reserves


def test_fit_advice_prices_a_larger_tp_at_the_engines_fraction_for_it():
    """SGLang before 0.5.3 lowers --mem-fraction-static as TP grows (0.88 at tp 1, 0.81 at tp 8): a suggested TP
    degree is checked at the fraction SGLang would take there, and a fraction the user set stays as set."""
    from flopwise.cost.fit import _at_tp

    d = deployment("llama-3.1-70b", "h100-sxm", engine="sglang@0.4")
    assert (d.gpu_memory_utilization, _at_tp(d, 8).gpu_memory_utilization) == (0.88, 0.81)
    mine = deployment("llama-3.1-70b", "h100-sxm", engine="sglang@0.4", gpu_memory_utilization=0.5)
    assert _at_tp(mine, 8).gpu_memory_utilization == 0.5


def test_a_source_without_a_known_engine_on_apple_silicon_is_priced_as_llama_cpp():
    """Ollama, LM Studio, KoboldCpp and llamafile embed llama.cpp; an engine the catalog does not model (MLX) on a
    chip vLLM has no backend for takes llama.cpp's Metal profile rather than failing; elsewhere the default vLLM."""
    def family(engine: str, gpu: str) -> str:
        return case_engine({"engine": engine, "engine_version": "", "args": {"gpu": gpu}}, "estimate").engine.family

    assert family("Ollama 0.5.7", "rtx-4090") == family("LM Studio", "apple-m3-max") == "llamacpp"
    assert family("mlx-lm", "apple-m4") == "llamacpp"
    assert family("an unnamed server", "h100-sxm") == "vllm"


def test_a_draft_padded_to_another_vocab_size_is_accepted_and_another_tokenizer_is_not():
    """Qwen2.5-0.5B (151,936 rows) drafting Qwen2.5-7B (152,064): the same tokenizer, padded differently, within
    llama.cpp's 128-token tolerance; Llama-3.2-1B (128,256) for Mistral-7B (32,000) is another vocabulary."""
    assert deployment("qwen2.5-7b", "h100-sxm", speculative="draft:qwen2.5-0.5b,k=4,alpha=0.7").speculative
    with pytest.raises(SpecError, match="tokenizer"):
        deployment("mistral-7b", "h100-sxm", speculative="draft:llama-3.2-1b,k=4,alpha=0.7")


def test_blackwell_prices_kernels_of_non_fp4_moe_models_at_their_own_fixed_cost():
    """On B200 the kernels of a MoE model whose weights are not FP4 cost moe_kernel_overhead_scale (2) x 4.5 us
    each, the FP4 (trtllm-gen) runs and dense models the chip's kernel_overhead_s (4.5 us); a chip without the
    field (H100) keeps its own 6 us for all. A batch-1 decode step of MiniMax-M2 in block FP8 grows by exactly its
    kernels' fixed cost at 4.5 us (it doubles)."""
    def dep(model, gpu, weights):
        return deployment(model, gpu, tp=8, weights=weights, engine="sglang@0.5.6")

    minimax = dep("MiniMaxAI/MiniMax-M2", "b200", "fp8-block")
    assert roofs(minimax).kernel_s == pytest.approx(9.0e-6)
    assert roofs(dep("openai/gpt-oss-120b", "b200", "mxfp4")).kernel_s == pytest.approx(4.5e-6)
    assert roofs(dep("meta-llama/Llama-3.1-70B", "b200", "bf16")).kernel_s == pytest.approx(4.5e-6)
    assert roofs(dep("MiniMaxAI/MiniMax-M2", "h100-sxm", "fp8-block")).kernel_s == pytest.approx(6.0e-6)
    shape = decode_shape(1, 1024, layout(minimax).windows)
    generic = replace(minimax, hardware=replace(
        minimax.hardware, efficiency=replace(minimax.hardware.efficiency, moe_kernel_overhead_scale=1.0)))
    new, old = step_cost(minimax, shape), step_cost(generic, shape)
    fixed_new, fixed_old = (sum(o.overhead_s for o in c.ops) for c in (new, old))
    assert fixed_old > 0 and fixed_new == pytest.approx(2 * fixed_old, rel=1e-9)  # every kernel: 4.5 -> 9 us
    assert new.time_s - old.time_s == pytest.approx(fixed_new - fixed_old, rel=1e-9)


def test_mxfp4_experts_upcast_on_chips_without_fp4_math():
    """gpt-oss's MXFP4 experts on an H100 (no FP4 math) multiply in bf16 after an in-kernel upcast: the compute
    roof is 989.4 TFLOP/s x compute_max 0.75 x the format's gemm_efficiency 0.5 = 371 TFLOP/s; on a B200 they run
    on the FP4 tensor cores with no such penalty (gemm_eff 1). Decode at batch 1 is memory-bound and does not
    see it; a 4k-token prefill does."""
    h100 = roofs(deployment("openai/gpt-oss-120b", "h100-sxm", frontend="none"))
    assert (h100.gemm_eff, h100.nominal_peak_linear) == pytest.approx((0.5, 989.4e12))
    assert h100.linear_rate == pytest.approx(989.4e12 * 0.75 * 0.5)
    assert roofs(deployment("openai/gpt-oss-120b", "b200", frontend="none")).gemm_eff == 1.0
    dep = deployment("openai/gpt-oss-120b", "h100-sxm", frontend="none")
    at85 = replace(dep, weights=replace(dep.weights, gemm_efficiency=0.85))
    roofs.cache_clear()
    prefill = prefill_shape(1, 4096, layout(dep).windows)
    decode = decode_shape(1, 4096, layout(dep).windows)
    assert step_time(dep, prefill) > 1.2 * step_time(at85, prefill)
    assert step_time(dep, decode) == pytest.approx(step_time(at85, decode), rel=0.01)


def test_llamacpp_runs_mxfp4_on_its_int8_mmq_path_and_natively_on_blackwell_from_b7532():
    """llama.cpp multiplies GGML_TYPE_MXFP4 like any GGUF block type: MMQ int8 tiles on CUDA (an RTX 5090's 838
    TOPS int8 roof x mmq 0.45, as q4_0), not its 1676 TFLOP/s FP4 tensor cores (nor does vLLM, whose SM120 path is
    Marlin's: 16-bit weight-only, the 209.5 TFLOP/s bf16 roof);
    from b7532 (PR #17906) Blackwell's 4-bit MMA runs it 1.26x faster than that int8 path, a chip without FP4 math
    (RTX 4090) keeps int8. A V100 (no FP4, no bf16) runs it through llama.cpp and is refused by vLLM."""
    def dep(gpu, engine, weights="mxfp4"):
        return deployment("openai/gpt-oss-20b", gpu, weights=weights, engine=engine)

    mx, q4 = roofs(dep("rtx-5090", "llamacpp@b7000")), roofs(dep("rtx-5090", "llamacpp@b7000", "q4_0"))
    assert mx.nominal_peak_linear == pytest.approx(838e12)
    assert (mx.gemm_eff, mx.linear_rate) == pytest.approx((0.45, q4.linear_rate))
    assert roofs(dep("rtx-5090", "vllm@0.11")).nominal_peak_linear == pytest.approx(209.5e12)
    native = roofs(dep("rtx-5090", "llamacpp@b7532"))
    assert native.linear_rate == pytest.approx(1.26 * mx.linear_rate)
    assert roofs(dep("rtx-5090", "llamacpp@b7531")).linear_rate == pytest.approx(mx.linear_rate)
    assert roofs(dep("rtx-4090", "llamacpp@b7532")).gemm_eff == pytest.approx(0.45)  # no fp4 math: int8 MMQ
    assert roofs(dep("v100-pcie-32gb", "llamacpp@b7000")).gemm_eff == pytest.approx(0.45)
    v100_gguf = deployment("openai/gpt-oss-20b", "v100-pcie-32gb", engine="llamacpp@b7000")  # its default: the GGUF
    assert v100_gguf.weights.name == "mxfp4_moe" and roofs(v100_gguf).gemm_eff == pytest.approx(0.45)
    with pytest.raises(PrecisionError, match="need fp4 math"):
        dep("v100-pcie-32gb", "vllm@0.11")


def test_llamacpp_moe_prompt_matmuls_run_at_its_moe_share_on_cuda_only():
    """llama.cpp's mul_mat_id (MoE) prompt matmuls get moe_compute = 0.6 of its MMQ rate on CUDA: a 2048-token
    gpt-oss-20b prefill's routed-expert compute time is 1/0.6 of the same step's at 1.0, every other operator
    unchanged; Metal keeps the dense rate (1.0)."""
    cuda = deployment("openai/gpt-oss-20b", "rtx-5090", weights="mxfp4", engine="llamacpp@b7000")
    assert cuda.engine.kernels.moe_compute == pytest.approx(0.6)
    metal = deployment("openai/gpt-oss-20b", "apple-m2-ultra", weights="mxfp4", engine="llamacpp@b7000")
    assert metal.engine.kernels.moe_compute == 1.0
    flat = replace(cuda, engine=replace(cuda.engine, kernels=replace(cuda.engine.kernels, moe_compute=1.0)))
    shape = prefill_shape(1, 2048, layout(cuda).windows)
    ops = {o.name: o for o in step_cost(cuda, shape).ops}
    ops_flat = {o.name: o for o in step_cost(flat, shape).ops}
    assert ops["moe_experts"].compute_s == pytest.approx(ops_flat["moe_experts"].compute_s / 0.6)
    assert all(ops[n].compute_s == pytest.approx(ops_flat[n].compute_s) for n in ops if n != "moe_experts")


def test_engine_kernel_block_formats_are_checked():
    assert KernelFactors(block_formats=["mxfp4"]).block_formats == ("mxfp4",)
    for bad in (["mxfp5"], "mxfp4"):
        with pytest.raises(SpecError, match="block_formats"):
            KernelFactors(block_formats=bad)
    with pytest.raises(SpecError, match="fp4_mmq_speedup"):
        KernelFactors(fp4_mmq_speedup=0.5)


def test_llamacpp_serves_gpt_oss_from_its_gguf_with_q8_0_outside_the_experts():
    """llama.cpp runs gpt-oss from ggml-org's GGUF (file type MXFP4 MoE: 72 MXFP4 expert tensors, 98 Q8_0 ones,
    289 f32; 11.27 GiB for gpt-oss-20b), not the safetensors checkpoint (bf16 outside the experts, 12.8 GiB as priced):
    by default a llama.cpp deployment gets mxfp4_moe, whose weights come to the file's size (f32 norms and biases
    aside), and an estimate says why; vLLM keeps the checkpoint's mxfp4-moe."""
    gguf = deployment("openai/gpt-oss-20b", "rtx-4090", engine="llamacpp@b7000")
    assert gguf.weights.name == "mxfp4_moe"
    assert (gguf.weights.dense_bytes_per_weight, gguf.weights.embed_bytes_per_weight) == (8.5 / 8, 8.5 / 8)
    assert layout(gguf).weight_bytes_per_gpu == pytest.approx(11.27 * GIB, rel=0.01)
    ckpt = deployment("openai/gpt-oss-20b", "rtx-4090", engine="vllm@0.11")
    assert ckpt.weights.name == "mxfp4-moe"
    assert layout(ckpt).weight_bytes_per_gpu > 1.1 * layout(gguf).weight_bytes_per_gpu
    assert "llama.cpp serves it from its own file, priced as mxfp4_moe" in weights_note(gguf)
    raw = {"engine": "llama.cpp (llama-bench)", "engine_version": "b6210", "args": {"gpu": "rtx-4090"}}
    dep, _ = case_deployment(raw, "estimate", {"model": "openai/gpt-oss-20b", "gpu": "rtx-4090", "weights": "mxfp4"})
    assert dep.weights.name == "mxfp4_moe"
    with pytest.raises(SpecError, match="checkpoint_formats"):
        replace(gguf.engine, checkpoint_formats=(("mxfp4-moe", "mxfp5"),))


def test_enforce_eager_flag_prices_every_step_eagerly_and_says_so(capsys):
    """`--enforce-eager` (API enforce_eager): the engine runs without CUDA graphs (`EngineProfile.eager`), so the CLI's
    batch-1 decode of Llama-3.1-8B on an H200 under vLLM 0.20 is its kernels x 6.0e-5 s (+ the fixed step cost), as
    the case knob gives it; the engine is named "(eager)" in the estimate; llama.cpp, which prices no eager launch,
    is refused with one line and exit code 2."""
    flag = estimate("llama-3.1-8b", "h200", engine="vllm@0.20", enforce_eager=True)
    dep = deployment("llama-3.1-8b", "h200", engine="vllm@0.20")
    eager = replace(dep, engine=dep.engine.eager())
    shape = batch_shape([[1, 600]], layout(dep).windows)
    kernels = round(sum(o.overhead_s for o in step_cost(eager, shape).ops) / roofs(eager).kernel_s)
    assert flag.deployment.engine == replace(dep.engine.eager(), frontend=None)
    assert decode_step_time(flag.deployment, 1, 600) == pytest.approx(
        kernels * 6.0e-5 + dep.hardware.efficiency.step_overhead_s, rel=1e-9)
    assert flag.to_dict()["engine"] == "vllm@0.20 (offline) (eager)"
    assert run(["estimate", "--model", "llama-3.1-8b", "--gpu", "h200", "--engine", "vllm@0.20",
                "--enforce-eager"]) == 0
    assert "engine vllm@0.20 (offline) (eager)" in capsys.readouterr().out
    code = run(["simulate", "--model", "llama-3.1-8b", "--engine", "llamacpp", "--enforce-eager",
                "--num-requests", "5"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and err.startswith("error: ") and "\n" not in err and "has no eager (no CUDA graph) mode" in err


def test_async_scheduling_and_graph_cap_flags_replace_the_engines_defaults(capsys):
    """`--async-scheduling` / `--no-async-scheduling` and `--cuda-graph-max-bs` (API async_scheduling,
    cuda_graph_max_bs) replace the engine's defaults for the deployment. vLLM 0.11 runs its host work after the
    device's (opt-in async before 0.14): told --async-scheduling, a batch-64 decode step is max(device, host)
    instead of device + host, so it is shorter by exactly min(device, host). SGLang 0.5.6 on an H100 captures decode
    batches up to 256; capped at 64, a batch-100 decode step launches its kernels eagerly (6.75e-5 s each) and takes
    at least kernels x that; vLLM V1, whose model is compiled, runs it piece by piece (its per-layer floor). The
    simulate setup reports both; a negative cap is one line and exit code 2."""
    sync = deployment("llama-3.1-8b", "h100-sxm", engine="vllm@0.11", frontend="none")
    ahead = deployment("llama-3.1-8b", "h100-sxm", engine="vllm@0.11", frontend="none", async_scheduling=True)
    assert not sync.engine.host.async_scheduling and ahead.engine.host.async_scheduling
    shape = decode_shape(64, 1024, layout(sync).windows)
    host = host_s(sync, shape)
    device = step_time(sync, shape) - host
    assert host == pytest.approx(6.0e-4 + 64 * 4.5e-5)  # step_s + per_seq_s x 64 (one GPU: no worker to reach)
    assert step_time(ahead, shape) == pytest.approx(max(device, host), rel=1e-12)
    assert step_time(sync, shape) - step_time(ahead, shape) == pytest.approx(min(device, host), rel=1e-9)
    sgl = deployment("llama-3.1-8b", "h100-sxm", engine="sglang@0.5.6", frontend="none")
    capped = deployment("llama-3.1-8b", "h100-sxm", engine="sglang@0.5.6", frontend="none", cuda_graph_max_bs=64)
    assert (sgl.engine.kernels.cuda_graph_max_bs, capped.engine.kernels.cuda_graph_max_bs) == (256, 64)
    s100 = decode_shape(100, 1024, layout(sgl).windows)
    kernels = round(sum(o.overhead_s for o in step_cost(capped, s100).ops) / roofs(capped).kernel_s)
    assert step_time(sgl, s100) < kernels * 6.75e-5 <= step_time(capped, s100)
    # vLLM V1 runs compiled code beyond its capture sizes, piece by piece: a decode batch of 100 above a cap of 64
    # takes at least its layers' piecewise floor, as a step with prompt tokens does. Qwen3-0.6B, vLLM 0.11
    # (synchronous host): device max(kernels, 2 ms + 28 layers x 0.075 ms) + 0.05 ms step overhead, + host 0.6 ms +
    # 100 x 45 us = 4.1 + 0.05 + 5.1 = 9.25 ms; under its default cap (512) the full graph's kernels alone, 2.8 ms
    small = deployment("qwen3-0.6b", "h100-sxm", engine="vllm@0.11", frontend="none", cuda_graph_max_bs=64)
    q100 = decode_shape(100, 192, layout(small).windows)
    assert step_time(small, q100) == pytest.approx(2e-3 + 28 * 7.5e-5 + 5e-5 + 6e-4 + 100 * 4.5e-5, rel=1e-9)
    assert step_time(small, q100) == pytest.approx(step_cost(small, q100).time_s, rel=1e-12)  # fast path = full
    default = deployment("qwen3-0.6b", "h100-sxm", engine="vllm@0.11", frontend="none")
    assert step_time(default, q100) < 2e-3 + 28 * 7.5e-5 + 5e-5 + 5.1e-3
    assert run(["simulate", "--model", "llama-3.1-8b", "--engine", "sglang@0.5.6", "--num-requests", "20",
                "--request-rate", "5", "--no-async-scheduling", "--cuda-graph-max-bs", "32", "--json"]) == 0
    setup = json.loads(capsys.readouterr().out)["setup"]
    assert (setup["engine"], setup["async_scheduling"], setup["cuda_graph_max_bs"]) == ("sglang@0.5.6", False, 32)
    assert run(["estimate", "--cuda-graph-max-bs", "-3"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == "error: cuda_graph_max_bs must be a whole number >= 0, got -3"


def test_trtllm_moe_kernels_pay_no_moe_kernel_surcharge(capsys):
    """On a B200 the fixed cost of a kernel is 4.5 us, and 2x that in a BF16 / FP8 MoE model's step, whose Triton /
    DeepGEMM MoE kernels and unfused neighbours cost more (hardware `moe_kernel_overhead_scale`). With
    TensorRT-LLM's fused trtllm-gen MoE kernels (SGLang --moe-runner-backend flashinfer_trtllm) the surcharge
    goes, as for FP4 weights, and a MoE layer launches 3 kernels (router GEMM, activation quantization, one
    runner op: fused_moe_trtllm_gen.py), not fused_moe's 6; the kernels' own bytes and FLOPs stay."""
    auto = deployment("deepseek-v3", "b200", tp=8, weights="fp8-block", engine="sglang@0.5.6", frontend="none")
    fused = deployment("deepseek-v3", "b200", tp=8, weights="fp8-block", engine="sglang@0.5.6", frontend="none",
                       moe_backend="trtllm")
    assert (roofs(auto).kernel_s, roofs(fused).kernel_s) == pytest.approx((9e-6, 4.5e-6))
    shape = decode_shape(4, 4 * 1400, layout(auto).windows)
    a, f = step_cost(auto, shape), step_cost(fused, shape)
    for x, y in zip(a.ops, f.ops, strict=True):
        assert y.overhead_s == pytest.approx((0.25 if x.name == "moe_experts" else 0.5) * x.overhead_s, rel=1e-9)
    assert sum(o.memory_s for o in f.ops) == pytest.approx(sum(o.memory_s for o in a.ops), rel=1e-12)
    assert step_time(fused, shape) < 0.8 * step_time(auto, shape)
    # the engine's stated runner reaches the dev-set reader only where the kernels exist
    raw = {"args": {"model": "deepseek-ai/DeepSeek-V3", "gpu": "b200"}, "engine": "SGLang", "engine_version": "0.5.6",
           "engine_knobs": {"moe_runner_backend": "flashinfer_trtllm"}}
    assert case_engine(raw, "simulate").knobs["moe_backend"] == "trtllm"
    raw_h200 = {**raw, "args": {"model": "deepseek-ai/DeepSeek-V3", "gpu": "h200"}}
    assert "moe_backend" not in case_engine(raw_h200, "simulate").knobs
    with pytest.raises(SpecError, match="datacenter Blackwell"):
        deployment("deepseek-v3", "h200", tp=8, moe_backend="trtllm")
    with pytest.raises(SpecError, match="has none"):
        deployment("llama-3.1-8b", "b200", moe_backend="trtllm")
    with pytest.raises(SpecError, match="auto or trtllm"):
        deployment("deepseek-v3", "b200", tp=8, moe_backend="cutlass")
    assert run(["simulate", "--model", "qwen3-30b-a3b", "--gpu", "b200", "--moe-backend", "trtllm",
                "--num-requests", "10", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["setup"]["moe_backend"] == "trtllm"
    assert run(["estimate", "--model", "qwen3-30b-a3b", "--gpu", "h100-sxm", "--moe-backend", "trtllm"]) == 2
    assert "datacenter Blackwell" in capsys.readouterr().err


def test_pdl_shrinks_the_fixed_cost_per_kernel(capsys):
    """TensorRT-LLM with TRTLLM_ENABLE_PDL=1 (--pdl): each kernel launches while the one before drains, so the
    fixed cost per kernel is 0.6x (the profile's fitted pdl_kernel_overhead_scale): on an H100, 6 us -> 3.6 us.
    A decode step of Llama-3.1-8B at batch 1 loses 0.4 x its kernels' overhead and nothing else. Refused for an
    engine with no such switch and on a chip without programmatic dependent launch (SM 9.0+)."""
    plain = deployment("llama-3.1-8b", "h100-sxm", engine="trtllm@1.2", frontend="none")
    pdl = deployment("llama-3.1-8b", "h100-sxm", engine="trtllm@1.2", frontend="none", pdl=True)
    assert (roofs(plain).kernel_s, roofs(pdl).kernel_s) == pytest.approx((6e-6, 3.6e-6), rel=1e-12)
    shape = decode_shape(1, 1024, layout(plain).windows)
    a, b = step_cost(plain, shape), step_cost(pdl, shape)
    overhead = sum(o.overhead_s for o in a.ops)
    assert sum(o.overhead_s for o in b.ops) == pytest.approx(0.6 * overhead, rel=1e-9)
    assert sum(o.memory_s for o in b.ops) == pytest.approx(sum(o.memory_s for o in a.ops), rel=1e-12)
    assert step_time(plain, shape) - step_time(pdl, shape) == pytest.approx(0.4 * overhead, rel=1e-6)
    # the dev-set reader turns the stated env var on where it is priced and the chip can launch so
    raw = {"args": {"model": "openai/gpt-oss-120b", "gpu": "b200"}, "engine": "TensorRT-LLM (trtllm-serve)",
           "engine_version": "1.2.0rc2", "engine_knobs": {"TRTLLM_ENABLE_PDL": 1}}
    assert case_engine(raw, "simulate").knobs["pdl"] is True
    assert "pdl" not in case_engine({**raw, "args": {"model": "openai/gpt-oss-120b", "gpu": "a100-sxm-80gb"}},
                                    "simulate").knobs
    assert "pdl" not in case_engine({**raw, "engine": "vLLM", "engine_version": "0.13.0"}, "simulate").knobs
    with pytest.raises(SpecError, match="no such switch"):
        deployment("llama-3.1-8b", "h100-sxm", engine="vllm", pdl=True)
    with pytest.raises(SpecError, match="SM 9.0"):
        deployment("llama-3.1-8b", "a100-sxm-80gb", engine="trtllm", pdl=True)
    with pytest.raises(SpecError, match="SM 9.0"):
        deployment("llama-3.1-8b", "rtx-4090", engine="trtllm", pdl=True)  # Ada is SM 8.9
    with pytest.raises(SpecError, match="SM 9.0"):  # a profile carrying PDL is checked on the chip it lands on
        deployment("llama-3.1-8b", "a100-sxm-80gb", engine=pdl.engine)
    assert run(["simulate", "--model", "llama-3.1-8b", "--engine", "trtllm@1.2", "--pdl", "--num-requests", "10",
                "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["setup"]["pdl"] is True
    assert run(["estimate", "--pdl"]) == 2
    assert "no such switch" in capsys.readouterr().err


def test_mi300x_fp8_moe_kernels_cost_more_than_bf16_ones():
    """MI300X's FP8 MoE models pay 3x the 6 us fixed cost per kernel (block-scaled fused MoE through AITER /
    Triton); its BF16 MoE models and its dense FP8 models pay the plain 6 us. A B200 names no format: every MoE
    model not in FP4 pays its 2x of 4.5 us."""
    def kernel_s(model, gpu, weights, **kw):
        return roofs(deployment(model, gpu, weights=weights, frontend="none", **kw)).kernel_s
    assert kernel_s("deepseek-v3", "mi300x", "fp8-block", tp=8) == pytest.approx(18e-6)
    assert kernel_s("qwen3-30b-a3b", "mi300x", "bf16") == pytest.approx(6e-6)
    assert kernel_s("llama-3.1-8b", "mi300x", "fp8") == pytest.approx(6e-6)
    assert kernel_s("qwen3-30b-a3b", "b200", "bf16") == pytest.approx(9e-6)
    assert kernel_s("qwen3-30b-a3b", "b200", "nvfp4") == pytest.approx(4.5e-6)
    eff = get_hardware("mi300x").efficiency
    assert (eff.moe_kernel_overhead_formats, eff.moe_kernel_scale("fp8"), eff.moe_kernel_scale("bf16")) == (
        ("fp8",), 3.0, 1.0)
    for bad in ("fp8", 8, ["fp-8"]):  # a string, a number, a typo that would silently never apply
        with pytest.raises(SpecError, match="list of compute dtypes"):
            replace(eff, moe_kernel_overhead_formats=bad)


def test_mxfp4_weights_multiply_what_each_engines_blackwell_kernels_take():
    """gpt-oss's MXFP4 experts on a B200 (trtllm-gen's kernels): TensorRT-LLM and SGLang quantize the activations to
    MXFP8 (the FP8 rate, 4,500 x 0.75 low-precision = 3,375 TFLOPS), vLLM multiplies BF16 by default (2,250) and
    MXFP8 only when told (VLLM_USE_FLASHINFER_MOE_MXFP4_MXFP8=1); none at the FP4 rate, and no dequantization cost
    in those kernels. On an H100 (no FP4) every engine runs them weight-only in BF16 at the format's dequantization
    efficiency (0.5); other FP4 chips (MI355X) keep the FP4 rate."""
    from flopwise.cost.step import roofs

    def rate(engine, gpu="b200"):
        r = roofs(deployment("gpt-oss-120b", gpu, engine=engine))
        return r.peak_linear / 1e12, r.gemm_eff

    assert rate("trtllm@1.2.0") == pytest.approx((3375.0, 1.0))
    assert rate("sglang@0.5.6") == pytest.approx((3375.0, 1.0))
    assert rate("vllm@0.15.0") == pytest.approx((2250.0, 1.0))
    assert rate("vllm@0.15.0", "h100-sxm") == pytest.approx((989.4, 0.5), rel=1e-3)
    assert rate("sglang@0.5.6", "mi355x")[0] > 2 * rate("sglang@0.5.6")[0]  # not trtllm-gen's: FP4 as before
    args = {"model": "openai/gpt-oss-120b", "gpu": "b200", "tp": 1, "weights": "mxfp4"}
    told = {"engine": "vLLM", "engine_version": "0.13.0", "engine_knobs": {"VLLM_USE_FLASHINFER_MOE_MXFP4_MXFP8": "1"}}
    dep = case_deployment(told, "simulate", args)[0]
    assert dep.engine.kernels.mxfp4_activation == "fp8" and roofs(dep).peak_linear == pytest.approx(3375e12)


def test_a_named_attention_backend_decides_where_decode_runs():
    """SGLang's --attention-backend / vLLM's VLLM_ATTENTION_BACKEND (a case's engine_knobs): FlashInfer decodes by
    the release's group rule on any device, where the release defaults to another backend (SGLang 0.4.6's FA3 for
    Llama on Hopper, vLLM 0.9.2's FlashAttention off SM 10.0: Llama-3.1-8B, a group of 4, on the CUDA cores); any
    other backend decodes on the tensor cores (SGLang 0.4.7's FlashInfer default for Mistral on an H100); FlashInfer
    on ROCm is refused (CUDA-only kernels)."""
    from flopwise.cost.step import decode_on_cuda_cores

    def cuda_cores(engine: str, gpu: str, backend: str | None, model: str = "llama-3.1-8b") -> bool:
        knobs = {"attention_backend": backend} if backend else {}
        name, _, version = engine.partition("@")
        case = {"engine": name, "engine_version": version, "engine_knobs": knobs}
        return decode_on_cuda_cores(case_deployment(case, "simulate", {"model": model, "gpu": gpu, "tp": 1})[0])

    assert not cuda_cores("sglang@0.4.6", "h200", None)  # FA3 by default
    assert cuda_cores("sglang@0.4.6", "h200", "flashinfer")  # SGLang PR 6168's A/B runs
    assert not cuda_cores("sglang@0.4.4", "a100-sxm-80gb", "triton")
    mistral = "mistralai/Mistral-7B-Instruct-v0.3"
    assert cuda_cores("sglang@0.4.7", "h100-sxm", None, mistral)
    assert not cuda_cores("sglang@0.4.7", "h100-sxm", "fa3 (default)", mistral)  # the first word names it
    assert cuda_cores("vLLM@0.9.2", "h100-sxm", "FLASHINFER")
    assert not cuda_cores("vLLM@0.9.2", "h100-sxm", None)
    with pytest.raises(SpecError, match="runs on NVIDIA GPUs only"):  # no FlashInfer on ROCm
        cuda_cores("sglang@0.4.4", "mi300x", "flashinfer")
    told = get_engine("sglang@0.4.6").with_attention_backend("FlashInfer")
    assert told.kernels.tensor_decode_on == () and told.kernels.decode_cuda_core_groups == (1, 2, 3, 4)
    assert told.kernels.attention_backend == "flashinfer"  # the engine's spelling, for its launch command
    with pytest.raises(SpecError,
                       match=r"SGLang 0\.4\.6 has no attention backend 'flashinfr'\. Did you mean: flashinfer"):
        get_engine("sglang@0.4.6").with_attention_backend("flashinfr")
    with pytest.raises(SpecError, match="TensorRT-LLM .* has no attention-backend switch"):
        get_engine("trtllm").with_attention_backend("flashinfer")
    for spec in ("trtllm", "sglang@0.4.6", "vllm@0.15"):  # "auto": the release's own choice, on any engine
        assert get_engine(spec).with_attention_backend(" Auto") == get_engine(spec)


def test_attention_backend_names_are_those_of_the_release():
    """Each release takes the names its own wheel lists (SGLang's --attention-backend choices, vLLM's backend enum):
    a name from a later release is refused in one line, not rendered into a command that fails at start."""
    takes = {("sglang@0.4.5", "fa3"): False, ("sglang@0.4.6", "fa3"): True, ("sglang@0.4.9", "trtllm_mla"): False,
             ("sglang@0.5.0", "trtllm_mla"): True, ("sglang@0.5.2", "fa4"): False, ("sglang@0.5.3", "fa4"): True,
             ("vllm@0.7.3", "FLASHMLA"): False, ("vllm@0.8.0", "FLASHMLA"): True,
             ("vllm@0.10.0", "CUTLASS_MLA"): False, ("vllm@0.10.1", "CUTLASS_MLA"): True,
             ("vllm@0.11.0", "XFORMERS"): True, ("vllm@0.12.0", "XFORMERS"): False,
             ("vllm@0.11.0", "ROCM_AITER_UNIFIED_ATTN"): False, ("vllm@0.12.0", "ROCM_AITER_UNIFIED_ATTN"): True,
             ("vllm@0.14.0", "FLASH_ATTN_DIFFKV"): False, ("vllm@0.15.0", "FLASH_ATTN_DIFFKV"): True}
    for (spec, name), ok in takes.items():
        eng = get_engine(spec)
        if ok:
            assert eng.with_attention_backend(name.lower()).kernels.attention_backend == name, (spec, name)
        else:
            with pytest.raises(SpecError, match=f"{eng.version} has no attention backend '{name.lower()}'"):
                eng.with_attention_backend(name.lower())
    with pytest.raises(SpecError, match=r"SGLang 0\.4\.5 has no attention backend 'fa3'\. It takes: flashinfer, "
                       r"triton, torch_native$"):
        get_engine("sglang@0.4.5").with_attention_backend("fa3")


def test_cuda_core_decode_factors_are_checked():
    """The backend rule's data is validated where it is read: a class the hardware catalog does not define, a group
    below 0, a share of the FP32 peak above 1, a family list given as one string."""
    with pytest.raises(SpecError, match="tensor_decode_on has unknown NVIDIA class.*'sm80'.*sm90, sm100"):
        KernelFactors(tensor_decode_on=["sm80"])
    with pytest.raises(SpecError, match="decode_cuda_core_groups"):
        KernelFactors(decode_cuda_core_groups=[0])
    with pytest.raises(SpecError, match="decode_cuda_core_groups must be a list"):
        KernelFactors(decode_cuda_core_groups=4)
    with pytest.raises(SpecError, match="decode_cuda_core_compute must be in"):
        KernelFactors(decode_cuda_core_compute=1.5)
    with pytest.raises(SpecError, match="tensor_decode_families must be a list"):
        KernelFactors(tensor_decode_families="llama")
    k = KernelFactors(decode_cuda_core_groups=[1, 2, 3, 4], decode_cuda_core_compute=0.3, tensor_decode_on=["sm90"],
                      tensor_decode_families=["llama"])
    assert k.decode_cuda_core_groups_on("sm90", "llama", 2) == ()  # FA3 for a listed family on Hopper
    assert k.decode_cuda_core_groups_on("sm90", "mistral", 2) == (1, 2, 3, 4)
    assert k.decode_cuda_core_groups_on("", "llama", 2) == (1, 2, 3, 4)
    assert k.decode_cuda_core_groups_on("", "llama", 1) == ()  # an FP8 cache
    fp8_too = KernelFactors(decode_cuda_core_groups=[1, 2, 4, 8], decode_cuda_core_fp8=True)  # FlashInfer 0.1.6
    assert fp8_too.decode_cuda_core_groups_on("", "llama", 1) == (1, 2, 4, 8)
    assert fp8_too.decode_cuda_core_groups_on("", "llama", 0.5) == ()  # no 4-bit cache on that path
    with pytest.raises(SpecError, match="decode_cuda_core_fp8 must be true or false, got 'true'"):
        KernelFactors(decode_cuda_core_fp8="true")  # a TOML string, which would pass as truthy
    with pytest.raises(SpecError, match="engine kernels: cuda_graphs must be true or false, got 'false'"):
        KernelFactors(cuda_graphs="false")
    sm100_only = KernelFactors(decode_cuda_core_groups=[1, 2, 3, 4], decode_cuda_core_on=["sm100"])  # vLLM 0.9.1
    assert sm100_only.decode_cuda_core_groups_on("sm100", "llama", 2) == (1, 2, 3, 4)
    assert sm100_only.decode_cuda_core_groups_on("", "llama", 2) == ()  # FlashAttention off SM 10.0
    with pytest.raises(SpecError, match="decode_cuda_core_on has unknown NVIDIA class"):
        KernelFactors(decode_cuda_core_on=["sm80"])
    with pytest.raises(SpecError, match="tensor_decode_max_seqs"):
        KernelFactors(tensor_decode_max_seqs=-1)


def test_llamacpp_splits_tensors_over_gpus_only_before_b9890():
    """PR #24216 (b9890) removed --split-mode row on CUDA and HIP: from there llama.cpp splits layers only (pp), and a
    tensor-parallel deployment is refused with the engine's own words."""
    assert get_engine("llamacpp@b9889").parallelism == ("tp", "pp")
    assert get_engine("llamacpp@b9890").parallelism == ("pp",)
    deployment("llama-3.1-70b", "h100-sxm", engine="llamacpp@b9890", pp=2, weights="q4_k_m")
    with pytest.raises(SpecError, match=r"llama.cpp b9890 has no TP \(tp=2\); it implements PP"):
        deployment("llama-3.1-70b", "h100-sxm", engine="llamacpp@b9890", tp=2, weights="q4_k_m")
