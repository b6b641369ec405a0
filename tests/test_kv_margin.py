"""vLLM 0.34's KV cache sized from measured memory (`EngineProfile.kv_margin`), checked by hand against 0.32's
share of the device: the budget is the whole device less max(1 GiB, 0.75 x peak), the peak (activations + the
CUDA-graph estimate) leaves room for the graphs a second time, and a launch command gives that back as 1."""

import pytest

from flopwise.api import deployment
from flopwise.cost.memory import memory_fraction_for_pool, memory_plan
from flopwise.errors import SpecError
from flopwise.launch.common import engine_memory_fraction
from flopwise.specs.engine import KvMargin, get_engine
from flopwise.specs.hardware import GIB

GRAPHS = 0.25 * GIB  # vllm.toml's activation_reserve_gib (0.21+): the CUDA-graph estimate


def test_the_release_entries():
    old, new = get_engine("vllm@0.33"), get_engine("vllm@0.34")
    assert (old.memory_fraction, old.block_size, old.kv_margin) == (0.92, 16, None)
    assert (new.memory_fraction, new.block_size) == (1.0, 64)
    assert new.kv_margin == KvMargin(floor_gib=1.0, peak_share=0.75, devices=("nvidia:gpu", "nvidia:soc", "amd:gpu"))
    assert get_engine("vllm").version == "0.34"


def test_llama_8b_on_h100_gains_the_device_share_less_the_floor_and_the_graphs_again():
    """Llama-3.1-8B bf16 on one H100 (1024 sequences, 8192 tokens a step): the sampler's peak, 2 x 1024 x 128256 x 4
    bytes = 1.05 GB, beats the forward pass's 8192 x 2 x (4 x 4096 + 2 x 14336) = 0.74 GB; with the graphs the peak
    is 1.32 GB, whose 0.75 (0.99 GB) is below the 1 GiB floor. So 0.34's pool is 0.32's + 0.08 x device - 1 GiB -
    0.25 GiB (the graphs counted again)."""
    old = memory_plan(deployment("meta-llama/Llama-3.1-8B", "h100-sxm", engine="vllm@0.32"))
    new = memory_plan(deployment("meta-llama/Llama-3.1-8B", "h100-sxm", engine="vllm@0.34"))
    assert old.activation_bytes == 2 * 1024 * 128256 * 4
    assert new.activation_bytes == 2 * 1024 * 128256 * 4 + GRAPHS
    assert new.budget_bytes == pytest.approx(new.device_bytes - GIB)
    assert new.kv_pool_bytes - old.kv_pool_bytes == pytest.approx(0.08 * old.device_bytes - GIB - GRAPHS)
    assert new.kv_pool_bytes / GIB == pytest.approx(61.16, abs=0.01)  # 56.05 GiB at 0.92


def test_a_large_peak_sets_the_margin():
    """Gemma-3-27B (262,208-token vocabulary) on one H200 at 1024 sequences: the sampler's 2 x 1024 x 262208 x 4 =
    2.15 GB plus the graphs is the peak, and 0.75 of it (1.81 GB) is the margin, above the 1 GiB floor."""
    dep = deployment("google/gemma-3-27b-it", "h200", engine="vllm@0.34")
    p = memory_plan(dep)
    peak = 2 * 1024 * 262208 * 4 + GRAPHS
    assert p.activation_bytes == peak
    assert p.budget_bytes == pytest.approx(p.device_bytes - 0.75 * peak)


def test_an_explicit_fraction_still_caps_the_budget():
    dep = deployment("meta-llama/Llama-3.1-8B", "h100-sxm", engine="vllm@0.34", gpu_memory_utilization=0.8)
    p = memory_plan(dep)
    assert p.budget_bytes == pytest.approx(0.8 * p.device_bytes)
    assert p.kv_pool_bytes == pytest.approx(p.budget_bytes - p.weight_bytes - p.activation_bytes - p.runtime_bytes)
    assert memory_fraction_for_pool(dep, p.kv_pool_bytes) == pytest.approx(0.8)


def test_the_launch_fraction_for_the_default_pool_is_one():
    """1.0 asks vLLM 0.34 for its own measured sizing (min(1.0 x device, device - margin)), which is the plan's
    pool; a smaller planned pool is asked for by its share of the device, as before."""
    dep = deployment("meta-llama/Llama-3.1-8B", "h100-sxm", engine="vllm@0.34")
    assert memory_fraction_for_pool(dep, memory_plan(dep).kv_pool_bytes) == 1.0
    assert engine_memory_fraction(dep, dep.engine) == 1.0
    small = deployment("meta-llama/Llama-3.1-8B", "h100-sxm", engine="vllm@0.34", gpu_memory_utilization=0.7)
    assert engine_memory_fraction(small, small.engine) == 0.7


def test_only_a_share_of_device_engine_takes_a_margin():
    with pytest.raises(SpecError, match="kv_margin sizes a share_of_device pool"):
        get_engine("sglang").__class__(**{**{f: getattr(get_engine("sglang"), f) for f in
                                              get_engine("sglang").__dataclass_fields__},
                                          "kv_margin": KvMargin(floor_gib=1.0, peak_share=0.75)})
    with pytest.raises(SpecError, match="peak_share"):
        KvMargin(floor_gib=1.0, peak_share=1.5)


def test_the_cpu_backend_keeps_the_estimate():
    """The extensible KV cache is on by default on CUDA and ROCm only: vLLM 0.34 on a CPU sizes at 0.92, as 0.33."""
    old = memory_plan(deployment("qwen2.5-0.5b", "cpu-xeon-spr-56c", engine="vllm@0.33"))
    new = deployment("qwen2.5-0.5b", "cpu-xeon-spr-56c", engine="vllm@0.34")
    assert new.gpu_memory_utilization == 0.92 and memory_plan(new).budget_bytes == old.budget_bytes


def test_enforce_eager_holds_no_graph_memory():
    """--enforce-eager captures no CUDA graphs: neither the resident graphs nor their estimate in the peak."""
    graphs = deployment("meta-llama/Llama-3.1-8B", "h100-sxm", engine="vllm@0.34")
    eager = deployment("meta-llama/Llama-3.1-8B", "h100-sxm", engine="vllm@0.34", enforce_eager=True)
    assert memory_plan(eager).kv_pool_bytes - memory_plan(graphs).kv_pool_bytes == pytest.approx(2 * GRAPHS)


def test_a_plan_on_sglang_launched_on_vllm_0_34_says_its_pool_is_smaller():
    """SGLang keeps activations outside its static share, vLLM 0.34 inside its budget with a 1 GiB margin: the
    SGLang plan's pool for Gemma-3-27B on an H100 is more than vLLM can hold even at 1.0, and the command says so."""
    dep = deployment("google/gemma-3-27b-it", "h100-sxm", engine="sglang")
    notes: list[str] = []
    assert engine_memory_fraction(dep, get_engine("vllm@0.34"), notes) == 1.0
    assert len(notes) == 1 and "vLLM 0.34 keeps more memory outside its KV cache" in notes[0]
    assert "planned on sglang@0.5.23" in notes[0]
