"""vLLM 0.28-0.34 release facts read from their wheels (vllm.toml): Blackwell's larger decode graphs, GB10's batch
tier, which speculative methods still schedule synchronously, and the renamed / removed launch options."""

from flopwise.api import deployment
from flopwise.specs.engine import get_engine


def _knobs(engine: str, gpu: str) -> tuple[int, int, int]:
    d = deployment("meta-llama/Llama-3.1-8B", gpu, engine=engine)
    return d.max_num_seqs, d.max_num_batched_tokens, d.engine.kernels.cuda_graph_max_bs


def test_blackwell_decode_graphs_reach_1024_from_0_28():
    """VllmConfig._set_cudagraph_sizes: min(2 x max_num_seqs, 1024) on compute capability 10.x, 512 elsewhere."""
    assert _knobs("vllm@0.27", "b200") == (1024, 8192, 512)
    assert _knobs("vllm@0.28", "b200") == (1024, 16384, 1024)
    assert _knobs("vllm@0.28", "gb200") == (1024, 16384, 1024)
    assert _knobs("vllm@0.34", "h200") == (1024, 8192, 512)


def test_gb10_takes_the_large_tier_until_0_33():
    assert _knobs("vllm@0.28", "dgx-spark-gb10")[:2] == (1024, 8192)
    assert _knobs("vllm@0.32", "dgx-spark-gb10")[:2] == (1024, 8192)
    assert _knobs("vllm@0.33", "dgx-spark-gb10")[:2] == (256, 2048)


def test_async_scheduling_with_speculation():
    """A draft model stops turning it off in 0.28; from 0.33 Model Runner V2 keeps it on for every method."""
    assert get_engine("vllm@0.27").host.syncs(speculative="draft")
    assert not get_engine("vllm@0.28").host.syncs(speculative="draft")
    assert get_engine("vllm@0.32").host.syncs(speculative="ngram")
    assert not get_engine("vllm@0.33").host.syncs(speculative="ngram")


def test_launch_options_by_release():
    old, new = get_engine("vllm@0.32").launch, get_engine("vllm@0.34").launch
    assert old.table("flags")["prefix_caching_off"] == "--no-enable-prefix-caching"
    assert new.table("flags")["prefix_caching_off"] == "--disable-prefix-caching"
    assert old.table("speculative")["medusa"] == "medusa" and new.table("speculative")["medusa"] == ""
    assert "TREE_ATTN" not in old["attention_backends"] and "TREE_ATTN" in get_engine("vllm@0.20").launch[
        "attention_backends"]
    assert "KIMI_K3_KV_BALANCED_MLA" in new["attention_backends"]
    assert "KIMI_K3_KV_BALANCED_MLA" not in old["attention_backends"]
