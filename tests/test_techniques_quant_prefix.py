"""Quantization, prefix caching, chunked prefill and KV structure, through the cost model."""

import pytest

from flopwise.api import deployment
from flopwise.cost import batch_shape, decode_shape, step_cost, step_time
from flopwise.cost.batch import causal_pairs
from flopwise.cost.layout import layout
from flopwise.cost.memory import max_sequences
from flopwise.specs.precision import KV_FORMATS, WEIGHT_FORMATS
from flopwise.techniques import batching, kv_structure
from flopwise.techniques.explain import weight_bytes_excluding_lm_head
from flopwise.techniques.ledger import request_latency_s
from flopwise.techniques.prefix_cache import cached_tokens, max_sequences_sharing, with_prefix_cache
from flopwise.techniques.quantization import KV_RISKS, WEIGHT_RISKS, quantize
from flopwise.techniques.scenario import Scenario


def test_int8_halves_the_decode_weight_bytes():
    scn = Scenario(deployment=deployment("llama-3.1-8b", "a100-sxm-80gb"))
    q = quantize(scn, weights="int8").deployment
    shape = decode_shape(8, 1024, layout(scn.deployment).windows)
    a, b = step_cost(scn.deployment, shape), step_cost(q, shape)
    assert weight_bytes_excluding_lm_head(b) == weight_bytes_excluding_lm_head(a) / 2
    # 32 layers x (attention 41,943,040 + MLP 176,160,768) params x 2 bytes in bf16:
    assert weight_bytes_excluding_lm_head(a) == 32 * (41_943_040 + 176_160_768) * 2
    lm = {o.name: o.weight_bytes for o in a.ops}["lm_head"]
    assert {o.name: o.weight_bytes for o in b.ops}["lm_head"] == lm     # GPU formats keep the LM head 16-bit
    assert a.flops == b.flops                                           # weight-only: same math
    assert b.time_s < a.time_s


def test_every_format_has_an_accuracy_note():
    assert set(WEIGHT_RISKS) == set(WEIGHT_FORMATS)
    assert set(KV_RISKS) == set(KV_FORMATS)
    for r in (*WEIGHT_RISKS.values(), *KV_RISKS.values()):
        assert r.level == "none" or r.source, r


def test_gguf_k_quants_weigh_what_llama_quantize_writes_and_have_a_recipe():
    """llama.cpp's QUANT_OPTIONS table: a Llama-3-8B (8.03e9 weights) file of 6.14 GiB in Q6_K is 6.57 bits per weight,
    5.33 GiB in Q5_K_M 5.70, 3.74 GiB in Q3_K_M 4.00; each is a GGUF type llama-quantize is told by its name."""
    from flopwise.launch.checkpoints import recipe_for
    from flopwise.specs.precision import GGUF_FORMATS, weight_format
    for name, gib in (("q6_k", 6.14), ("q5_k_m", 5.33), ("q3_k_m", 3.74), ("q2_k", 2.96)):
        assert WEIGHT_FORMATS[name].bits_per_weight == pytest.approx(gib * 2**30 * 8 / 8.03e9, abs=0.005)
        assert name in GGUF_FORMATS
    assert weight_format("Q5_K").name == "q5_k_m" and weight_format("q3_k").name == "q3_k_m"
    r = recipe_for("q5_k_m", "llamacpp", "meta-llama/Llama-3.1-8B")
    assert r is not None and r.command.endswith("llama-quantize Llama-3.1-8B-BF16.gguf Llama-3.1-8B-Q5_K_M.gguf Q5_K_M")
    assert recipe_for("q5_k_m", "vllm", "meta-llama/Llama-3.1-8B") == r  # vLLM serves the file it makes too
    assert recipe_for("q5_k_m", "trtllm", "meta-llama/Llama-3.1-8B") is None
    # decode streams the file: Q5_K_M reads 5.70 / 4.85 of Q4_K_M's bytes per weight
    q4, q5 = (deployment("llama-3.1-8b", "rtx-4090", engine="llamacpp", weights=w) for w in ("q4_k_m", "q5_k_m"))
    shape = decode_shape(1, 512, layout(q4).windows)
    b4, b5 = (sum(o.weight_bytes for o in step_cost(d, shape).ops) for d in (q4, q5))
    assert b5 / b4 == pytest.approx(5.70 / 4.85, rel=1e-9)


def test_cached_tokens_are_whole_blocks_and_never_the_last_token():
    assert cached_tokens(16, 1024, 0.5) == 512
    assert cached_tokens(16, 1682, 0.5) == 832       # 841 -> 52 blocks
    assert cached_tokens(16, 1024, 1.0) == 1008      # at most 1023, in whole blocks
    assert cached_tokens(16, 1024, 0.0) == 0


def test_prefix_hit_removes_the_prefix_prefill():
    dep = deployment("llama-3.1-8b", "h100-sxm", frontend="none")
    full = batching.prefill_flops(dep, 1, 1024)
    half = batching.prefill_flops(dep, 1, 1024, cached=512)
    # Saved: the 512-token prefix's own prefill (pairs 1024*1025/2 - (512*512 + 512*513/2) = 512*513/2), less
    # the one LM-head row (2 x 128256 x 4096 FLOPs) a prefill of the prefix alone would add for its logits.
    assert causal_pairs(0, 1024, None) - causal_pairs(512, 512, None) == causal_pairs(0, 512, None)
    assert full - half == batching.prefill_flops(dep, 1, 512) - 2 * 128256 * 4096
    # A hit ratio of 1: only the last block (vLLM 0.34's 64 tokens on 960 cached) is computed; TTFT is that step.
    scn = with_prefix_cache(Scenario(deployment=dep, input_len=1024, output_len=32), 1.0)
    ttft, _ = request_latency_s(scn)
    assert ttft == step_time(dep, batch_shape([(64, 960)], layout(dep).windows))
    plain = Scenario(deployment=dep, input_len=1024, output_len=32)
    assert ttft < request_latency_s(plain)[0] / 3  # one memory-bound step


def test_shared_prefix_blocks_admit_more_sequences():
    dep = deployment("llama-3.1-8b", "a100-sxm-80gb")
    base = Scenario(deployment=dep, input_len=1024, output_len=256)
    assert max_sequences_sharing(base) == max_sequences(dep, 1280)
    assert max_sequences_sharing(with_prefix_cache(base, 0.5)) > max_sequences(dep, 1280)


def test_baseline_ttft_matches_estimate_and_chunking_splits_prefill():
    from flopwise.estimate import estimate_deployment
    dep = deployment("llama-3.1-8b", "h100-sxm")
    ttft, tpot = request_latency_s(Scenario(deployment=dep, input_len=512, output_len=64, batch=4))
    est = estimate_deployment(dep, batch=4, input_len=512, output_len=64)
    assert ttft * 1e3 == pytest.approx(est.ttft_ms) and tpot * 1e3 == pytest.approx(est.tpot_ms)
    steps = batching.prefill_steps(batching.with_chunked_prefill(Scenario(deployment=dep), 512).deployment, 3, 700)
    assert [s.num_tokens for s in steps] == [512, 512, 512, 512, 52]    # 2100 tokens, FCFS
    assert [s.num_logits for s in steps] == [0, 1, 1, 0, 1]             # prompts end at 700, 1400, 2100


def test_small_chunks_cut_the_itl_tail_and_cost_ttft():
    dep = deployment("llama-3.1-8b", "h100-sxm")
    small = batching.chunked_prefill_point(dep, 8, 2048, 1024, chunk=256)
    whole = batching.chunked_prefill_point(dep, 8, 2048, 1024, chunk=8 + 2048)
    assert whole.steps == 1 and small.steps == 9                        # 248 prompt tokens per chunk
    assert small.itl_tail_s < whole.itl_tail_s / 3
    assert small.ttft_s > whole.ttft_s


def test_kv_structure_what_ifs():
    dep = deployment("llama-3.1-8b", "a100-sxm-80gb")
    rows = {v.name: v for v in kv_structure.attention_variants(dep, 2048)}
    assert rows["GQA-8"].is_current
    # per token: 2 (K, V) x kv_heads x 128 x 2 bytes x 32 layers
    assert rows["GQA-8"].kv_bytes_per_token == 2 * 8 * 128 * 2 * 32 == 131_072
    assert rows["MHA"].kv_bytes_per_token == 4 * rows["GQA-8"].kv_bytes_per_token
    assert rows["MQA"].max_sequences > rows["GQA-8"].max_sequences > rows["MHA"].max_sequences
