"""SGLang 0.5.10-0.5.23 release facts read from their wheels (sglang.toml): which deployments keep the overlap
scheduler and the piecewise prompt graphs, the speculative memory reserve, the 20-35 GiB device tier, and the
renamed CUDA-graph option."""

import pytest

from flopwise.api import deployment
from flopwise.specs.engine import get_engine

EAGLE = "eagle,k=3,accepted=2.6"


def test_overlap_scheduler_with_speculation_and_linear_state():
    """Spec v2 by default from 0.5.11 (overlapped), extra_buffer hybrids from 0.5.14; pipelines stay synchronous."""
    host = {v: get_engine(f"sglang@{v}").host for v in ("0.5.10", "0.5.11", "0.5.14", "0.5.23")}
    assert host["0.5.10"].syncs(speculative="eagle") and not host["0.5.11"].syncs(speculative="eagle")
    assert host["0.5.11"].syncs(speculative="ngram") and not host["0.5.14"].syncs(speculative="ngram")
    assert host["0.5.11"].syncs(linear_state=True) and not host["0.5.14"].syncs(linear_state=True)
    assert all(h.syncs(pp=2) for h in host.values())


@pytest.mark.parametrize("version,speculative,dp", [
    ("0.5.10", False, False), ("0.5.11", True, False), ("0.5.14", False, False), ("0.5.15", True, False),
    ("0.5.17", True, True), ("0.5.23", True, True)])
def test_piecewise_prompt_graphs_by_release(version, speculative, dp):
    """Which deployments keep the prompt graphs (True) or launch their prompt steps eagerly (False)."""
    k = get_engine(f"sglang@{version}").kernels
    assert k.piecewise_prefill and k.for_deployment(dp_attention=False, speculative=False).piecewise_prefill
    assert k.for_deployment(dp_attention=False, speculative=True).piecewise_prefill is speculative
    assert k.for_deployment(dp_attention=True, speculative=False).piecewise_prefill is dp
    assert not k.for_deployment(dp_attention=False, speculative=False, mla=True).piecewise_prefill  # priced eagerly


def test_speculative_memory_reserve():
    """H200 (140.4 GiB), TP1, chunk 8192: 0.5.10 keeps 4 GiB more for an EAGLE head (0.907 -> 0.878 of the
    device); from 0.5.14 no reserve (the draft's weights count inside the static share)."""
    mib = 140.4 * 1024
    for version, extra_mb in (("0.5.10", 4096), ("0.5.14", 0)):
        plain = deployment("meta-llama/Llama-3.1-8B", "h200", engine=f"sglang@{version}")
        spec = deployment("meta-llama/Llama-3.1-8B", "h200", engine=f"sglang@{version}", speculative=EAGLE)
        reserve = max(512 + 1.5 * 8192 + 2 * 256 + 128, 10240)  # below the 10 GiB floor above 60 GiB
        assert plain.gpu_memory_utilization == round((mib - reserve) / mib, 3) == 0.907
        assert spec.gpu_memory_utilization == round((mib - reserve - extra_mb) / mib, 3)


def test_small_devices_take_a_larger_chunk_from_0_5_20():
    """RTX 4090 (24 GiB): chunk 2048 and decode graphs to 24 until 0.5.19; 4096 and 48 from 0.5.20, whose larger
    activation reserve (512 + 1.5 x 4096 + 2 x 48 + 128 MB) leaves 0.72 of the device for weights and KV."""
    old = deployment("meta-llama/Llama-3.1-8B", "rtx-4090", engine="sglang@0.5.19")
    new = deployment("meta-llama/Llama-3.1-8B", "rtx-4090", engine="sglang@0.5.20")
    assert (old.max_num_batched_tokens, old.engine.kernels.cuda_graph_max_bs) == (2048, 24)
    assert (new.max_num_batched_tokens, new.engine.kernels.cuda_graph_max_bs) == (4096, 48)
    mib = new.hardware.memory_gib * 1024
    assert new.gpu_memory_utilization == round((mib - (512 + 1.5 * 4096 + 2 * 48 + 128)) / mib, 3) == 0.72


def test_the_cuda_graph_option_is_renamed():
    assert get_engine("sglang@0.5.13").launch.table("flags")["cuda_graph_max_bs"] == "--cuda-graph-max-bs"
    assert get_engine("sglang@0.5.14").launch.table("flags")["cuda_graph_max_bs"] == "--cuda-graph-max-bs-decode"
    assert "cutlass_mla" in get_engine("sglang@0.5.19").launch["attention_backends"]
    assert "cutlass_mla" not in get_engine("sglang@0.5.20").launch["attention_backends"]
    assert get_engine("sglang").version == "0.5.23" and get_engine("sglang").version_note == ""
