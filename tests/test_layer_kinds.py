"""Each new layer kind's cache, reads and pairs, by hand: chunked local attention (Llama 4), linear state (Gated
DeltaNet), sparse attention with an indexer (DeepSeek-V3.2), KV sharing (Gemma 3n); and the spans' sums."""

import pytest

from flopwise.api import deployment
from flopwise.cost import batch_shape, decode_shape, prefill_shape, step_cost
from flopwise.cost.attention import Chunk, causal_pairs, chunked_pairs, held_blocks, span_work
from flopwise.cost.layout import layout
from flopwise.cost.memory import blocks_per_sequence, memory_plan
from flopwise.sim.shape import ShapeBuilder


def _op(cost, name):
    return [o for o in cost.ops if o.name == name]


def test_chunked_pairs_closed_form_matches_brute_force():
    for size in (1, 4, 7):
        for c in range(0, 20):
            for n in range(1, 15):
                brute = sum((p % size) + 1 for p in range(c, c + n))
                assert chunked_pairs(c, n, size) == brute
    work = span_work([(1, 10_000), (3000, 7000)], Chunk(8192))
    assert (work.decode_pairs, work.decode_kv_read) == (10_000 % 8192 + 1, 10_000 % 8192)
    assert (work.prefill_pairs, work.prefill_kv_read) == (chunked_pairs(7000, 3000, 8192), 7000)


def test_chunked_cache_llama4():
    dep = deployment("llama-4-scout", "h200", tp=2)  # bf16 KV, 8 KV heads split over 2 GPUs
    per_layer = 2 * (8 // 2) * 128 * 2  # K and V x 4 heads x 128 x 2 bytes = 2048 bytes per token and layer
    assert layout(dep).kv_bytes_per_token == 48 * per_layer
    assert dict(layout(dep).cache.bytes_per_token_by_kind) == {"chunked": 36 * per_layer, "full": 12 * per_layer}
    # 20,000 tokens in 16-token blocks (vLLM to 0.33): full layers 1250 blocks, chunked at most 8192 / 16 = 512
    assert held_blocks(20_000, Chunk(8192), 16) == 512
    v033 = deployment("llama-4-scout", "h200", tp=2, engine="vllm@0.33")
    assert blocks_per_sequence(v033, 20_000) == -(-(12 * 1250 + 36 * 512) // 48) == 697
    # in 64-token blocks (0.34): full layers ceil(20000 / 64) = 313, chunked 8192 / 64 = 128
    assert blocks_per_sequence(dep, 20_000) == -(-(12 * 313 + 36 * 128) // 48) == 175
    # decode at 10,000 cached tokens: chunked layers read the 1,808 tokens of the current chunk, full layers all
    cost = step_cost(dep, decode_shape(1, 10_000, layout(dep).windows))
    kv = {o.count: o.kv_bytes for o in _op(cost, "attention")}
    assert kv == {36: 36 * (1808 + 1) * per_layer, 12: 12 * (10_000 + 1) * per_layer}


def test_linear_state_qwen3_next():
    dep = deployment("qwen3-next", "h200")  # tp 1, bf16
    state = 32 * 128 * 128 * 2 + (4 - 1) * (2 * 16 * 128 + 32 * 128) * 2  # recurrent + conv state, one layer
    assert state == 1_097_728
    lay = layout(dep)
    assert lay.cache.state_bytes == 36 * state == 39_518_208
    assert lay.kv_bytes_per_token == 12 * 2 * 2 * 256 * 2 == 24_576  # only the 12 full-attention layers
    assert lay.windows == (None,)  # the simulator's full-attention fast path still applies
    # a sequence of 1000 tokens: 16 blocks of KV plus the state in 64-token blocks of 24,576 bytes per token
    block = 64 * 24_576
    assert memory_plan(dep).block_bytes == block
    assert blocks_per_sequence(dep, 1000) == -(-(16 * block + 36 * state) // block) == 42
    v033 = deployment("qwen3-next", "h200", engine="vllm@0.33")  # 16-token blocks: 63 of KV
    assert blocks_per_sequence(v033, 1000) == -(-(63 * 16 * 24_576 + 36 * state) // (16 * 24_576)) == 164
    cost = step_cost(dep, decode_shape(4, 1000, lay.windows))
    (lin,) = _op(cost, "linear_attention")
    assert lin.count == 36 and lin.kv_bytes == 36 * 2 * 4 * state  # each sequence's state read and written
    assert lin.flops == 36 * 4 * (6 * 32 * 128 * 128 + 2 * 4 * 8192)
    (attn,) = _op(cost, "attention")
    assert attn.count == 12 and attn.kv_bytes == 12 * (4 * 1000 + 4) * 2 * 2 * 256 * 2


def test_sparse_attention_deepseek_v32():
    dep = deployment("deepseek-v3.2-exp", "h200", tp=8)  # fp8-block weights, bf16 KV
    per_layer = (512 + 64) * 2 + (128 + 4)  # the bf16 latent + an fp8 index key with its fp32 scale
    assert layout(dep).kv_bytes_per_token == 61 * per_layer == 78_324
    assert layout(dep).windows == (2048, None)  # top-k pairs, and the indexer over every cached key
    cost = step_cost(dep, decode_shape(2, 10_000, layout(dep).windows))
    attn = {o.count: o for o in _op(cost, "attention")}
    index = {o.count: o for o in _op(cost, "indexer")}
    heads = 128 // 8
    assert attn[58].flops == 58 * 2 * 2048 * 2 * heads * (2 * 512 + 64)  # absorbed MLA over the top 2048
    assert attn[58].kv_bytes == 58 * (2 * 2048 + 2) * (512 + 64) * 2
    assert index[58].flops == 58 * 2 * 10_001 * 2 * 64 * 128  # 64 index heads of 128, on every GPU
    assert index[58].kv_bytes == 58 * (2 * 10_000 + 2) * 132
    # sparse attention selects keys, it does not evict them: a sequence keeps every token (ceil(20000 / 64) blocks)
    assert blocks_per_sequence(dep, 20_000) == 313
    # an fp8 latent is FlashMLA's sparse format (vLLM fp8_ds_mla): 512 fp8 values, 4 fp32 scales, 64 bf16 rope dims
    fp8 = deployment("deepseek-v3.2-exp", "h200", tp=8, kv="fp8")
    assert layout(fp8).kv_bytes_per_token == 61 * ((512 + 4 * 4 + 64 * 2) + (128 + 4)) == 48_068
    assert layout(deployment("deepseek-v3", "h200", tp=8, kv="fp8")).kv_bytes_per_token == 61 * (512 + 64)


def test_kv_sharing_gemma3n():
    dep = deployment("gemma-3n-e4b", "h200")
    per_layer = 2 * 2 * 256 * 2
    assert layout(dep).kv_bytes_per_token == 20 * per_layer  # 16 sliding + 4 full layers keep a cache
    cost = step_cost(dep, decode_shape(1, 100, layout(dep).windows))
    shared = [o for o in _op(cost, "attention") if o.count in (12, 3)]
    assert {o.count: o.kv_bytes for o in shared} == {12: 12 * 100 * per_layer, 3: 3 * 100 * per_layer}  # read only
    assert sum(o.count for o in _op(cost, "layer_extras")) == 35  # AltUp, LAuReL, per-layer inputs: every layer


def test_shape_builders_agree_across_spans():
    """The simulator's builder, batch_shape, prefill_shape and decode_shape give the same sums for every span."""
    spans = (512, Chunk(8192), None)
    rows = [(1, 9000), (1, 300), (700, 8000)]
    direct = batch_shape(rows, spans)
    for s in spans:
        assert direct.attention[s] == span_work(rows, s)
    assert prefill_shape(2, 9000, spans).attention[Chunk(8192)].prefill_pairs == 2 * chunked_pairs(0, 9000, 8192)
    assert decode_shape(3, 9000, spans).attention[512].decode_pairs == 3 * 512
    assert prefill_shape(1, 600, spans).attention[512].prefill_pairs == causal_pairs(0, 600, 512)
    b = ShapeBuilder(spans)
    assert b.decode_rows([9000, 300]).attention == batch_shape([(1, 9000), (1, 300)], spans).attention


def test_new_families_simulate():
    """A short chat run on each new layer kind goes through the scheduler and block manager."""
    from flopwise.sim import simulate
    from flopwise.workload import build_workload
    wl = build_workload(num_requests=40, workload="chat", request_rate=4, seed=3)
    for model, tp in (("qwen3-next", 2), ("llama-4-scout", 2), ("deepseek-v3.2-exp", 8), ("gemma-3n-e4b", 1)):
        s = simulate(deployment(model, "h200", tp=tp), wl).summary()
        assert s["num_completed"] == 40 and s["tpot_ms"]["p50"] > 0


@pytest.mark.parametrize("model,tp", [("llama-3.1-8b", 1), ("gemma-2-9b", 2), ("deepseek-v3", 8)])
def test_existing_kinds_unchanged(model, tp):
    """Full, sliding and MLA caches as before: 2 x kv_heads x head_dim (split by tp) or the latent."""
    dep = deployment(model, "h200", tp=tp, weights="bf16")
    per_layer = {"llama-3.1-8b": 2 * 8 * 128 * 2, "gemma-2-9b": 2 * (8 // 2) * 256 * 2,
                 "deepseek-v3": (512 + 64) * 2}[model]
    assert layout(dep).kv_bytes_per_token == dep.model.num_layers * per_layer
