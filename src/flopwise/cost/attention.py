"""Every attention kind's formulas, in one place: the (query, key) pairs a step computes, the cached tokens it
reads, what each token (or each sequence) leaves in memory, and the per-GPU sizes the step cost reads.
`cost/batch.py`, `cost/layout.py`, `cost/memory.py`, `cost/step.py` and `sim/shape.py` all read these.

Spans: which earlier tokens a query attends, keyed in `BatchShape.attention`:

    None        full causal attention (and MLA)            query at position p attends p + 1 tokens
    w (int)     sliding window w (Mistral, Gemma 2/3, gpt-oss), and DeepSeek sparse attention's top-k, which
                attends min(p + 1, k) selected tokens (the same count as a window of k)
    Chunk(C)    chunked local attention (Llama 4: attention_chunk_size C): position p attends the
                (p mod C) + 1 tokens of its own chunk

For a sequence with c cached tokens computing n new ones (positions c .. c+n-1):

    pairs(c, n, None)     = n*c + n(n+1)/2
    pairs(c, n, w)        = sum_{j=1..n} min(c + j, w)
    pairs(c, n, Chunk(C)) = F(c + n) - F(c),  F(x) = q*C(C+1)/2 + r(r+1)/2 with q, r = divmod(x, C)
    kv_read(c, span)      = c, min(c, w), c mod C     cached tokens the step reads

What stays in memory per sequence of `length` tokens, in blocks of `block_size` (vLLM v1's KV managers):

    full / MLA / sparse   ceil(length / bs)               every token (sparse attention selects, it does not evict)
    sliding window w      min(that, ceil(w / bs) + 1)     blocks that leave the window are freed
    chunked C             min(that, ceil(C / bs))         blocks before the current chunk are freed
    linear-state          no per-token cache: a fixed state per sequence (below)

Per GPU of a tensor-parallel group (`attention_layout`), one layer of each kind:

- GQA/MHA/MQA (full, sliding, chunked): KV heads split by tp while tp <= kv_heads, replicated beyond (vLLM);
  FLOPs per pair 4 * q_heads * head_dim (QK^T and PV); cache 2 * kv_heads * head_dim elements per token.
- MLA (DeepSeek-V2 §2.1): the latent (kv_lora_rank + qk_rope_head_dim elements per token) and the down
  projections replicated; prefill attends expanded heads (2 * q_heads * (d_nope + d_rope + d_v) per pair), decode
  the absorbed latent (2 * q_heads * (2 * kv_lora_rank + d_rope)), as vLLM's MLA backend does.
- sparse (DeepSeek Sparse Attention, DeepSeek-V3.2-Exp): MLA over the top-k keys, plus the lightning indexer,
  which scores every cached key: 2 * index_heads * index_head_dim FLOPs per (query, key) pair, multiplied in fp8
  where the chip has it (DeepGEMM's fp8 MQA logits; its index heads share one key, like MQA), its projections
  replicated on every GPU (vLLM), and an index key of index_head_dim fp8 values plus one fp32 scale per 128
  cached per token (vLLM's indexer cache: 128 + 4 = 132 bytes for index_head_dim 128), whatever the KV format. An
  fp8 latent cache is FlashMLA's sparse format (vLLM `fp8_ds_mla`, `MLAAttentionSpec.real_page_size_bytes`): the
  kv_lora_rank values in fp8 with an fp32 scale per 128, the rope dims in bf16: 512 + 16 + 128 = 656 bytes.
- linear-state (Gated DeltaNet, Yang et al. 2024; Mamba2, Dao & Gu 2024): per sequence a recurrent state of
  heads * key_dim * value_dim elements and a causal-conv state of (kernel - 1) * channels, read and written once
  per step; per token 6 * heads * key_dim * value_dim FLOPs (the state update S += beta (v - S k) k^T costs two
  key_dim x value_dim products, the output S q a third) plus 2 * kernel * channels for the convolution. The chunked
  prefill form (flash-linear-attention) does the same order of work per token. Heads split by tp.
- a layer that reuses an earlier layer's cache (Gemma 3n KV sharing) reads it but keeps and writes none.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

from flopwise.specs.model import AttentionSpec, attention_params

__all__ = ["Chunk", "Span", "AttentionWork", "causal_pairs", "chunked_pairs", "span_work", "decode_work",
           "prefill_work", "attention_span", "retention_span", "held_blocks", "sort_spans", "AttentionLayout",
           "attention_layout", "INDEX_SCALE_GROUP"]

INDEX_SCALE_GROUP = 128  # vLLM's DSA indexer cache: one fp32 scale per 128 fp8 key values
LATENT_SCALE_GROUP = 128  # FlashMLA's sparse fp8 latent cache (vLLM fp8_ds_mla): one fp32 scale per 128 values


@dataclass(frozen=True, slots=True)
class Chunk:
    """Chunked local attention: a query attends only the tokens of its own chunk of `size` positions."""

    size: int


Span = int | Chunk | None


@dataclass(frozen=True, slots=True)
class AttentionWork:
    """Attention sums for one span, split into prefill rows (n > 1) and decode rows (n = 1)."""

    prefill_pairs: int = 0
    prefill_kv_read: int = 0
    decode_pairs: int = 0
    decode_kv_read: int = 0


def causal_pairs(c: int, n: int, w: int | None) -> int:
    """sum_{j=1..n} min(c + j, w), in closed form."""
    if w is None or c + n <= w:
        return n * c + n * (n + 1) // 2
    if c >= w:
        return n * w
    j0 = w - c  # positions 1..j0 are below the window
    return j0 * c + j0 * (j0 + 1) // 2 + (n - j0) * w


def _chunk_prefix(x: int, size: int) -> int:
    q, r = divmod(x, size)
    return q * size * (size + 1) // 2 + r * (r + 1) // 2


def chunked_pairs(c: int, n: int, size: int) -> int:
    """sum over positions p = c .. c+n-1 of (p mod size) + 1."""
    return _chunk_prefix(c + n, size) - _chunk_prefix(c, size)


def span_work(rows: Iterable[tuple[int, int]], span: Span) -> AttentionWork:
    """The sums of (new tokens n, cached context c) rows for one span: the one loop every batch builder runs."""
    pp = pk = dp = dk = 0
    if isinstance(span, Chunk):
        size = span.size
        for n, c in rows:
            r = c % size
            if n == 1:
                dp += r + 1
                dk += r
            else:
                pp += chunked_pairs(c, n, size)
                pk += r
        return AttentionWork(pp, pk, dp, dk)
    w = span
    for n, c in rows:
        if n == 1:
            if w is None or c < w:
                dp += c + 1
                dk += c
            else:
                dp += w
                dk += w
        else:
            pp += causal_pairs(c, n, w)
            pk += c if w is None or c < w else w
    return AttentionWork(pp, pk, dp, dk)


def decode_work(batch: int, context: int, span: Span) -> AttentionWork:
    """`batch` rows each decoding one token after `context` cached tokens."""
    if isinstance(span, Chunk):
        r = context % span.size
        return AttentionWork(decode_pairs=batch * (r + 1), decode_kv_read=batch * r)
    c = context if span is None else min(context, span)
    p = context + 1 if span is None or context < span else span
    return AttentionWork(decode_pairs=batch * p, decode_kv_read=batch * c)


def prefill_work(batch: int, input_len: int, span: Span) -> AttentionWork:
    """`batch` prompts of `input_len` tokens, nothing cached (a one-token prompt is a decode row)."""
    if input_len == 1:
        return AttentionWork(decode_pairs=batch)
    if isinstance(span, Chunk):
        return AttentionWork(prefill_pairs=batch * chunked_pairs(0, input_len, span.size))
    return AttentionWork(prefill_pairs=batch * causal_pairs(0, input_len, span))


def attention_span(a: AttentionSpec) -> Span:
    """The span a layer's queries attend (None also for linear-state layers, which have no pairs)."""
    if a.kind == "sliding":
        return a.window
    if a.kind == "chunked":
        return Chunk(a.window)  # type: ignore[arg-type]
    if a.kind == "sparse":
        return a.indexer.top_k  # type: ignore[union-attr]
    return None


def retention_span(a: AttentionSpec) -> Span:
    """What a layer's cache keeps: sparse attention keeps every token (its top-k span is for reading)."""
    return None if a.kind == "sparse" else attention_span(a)


def held_blocks(length: int, span: Span, block_size: int) -> int:
    """Blocks one layer holds for a sequence of `length` tokens (the most over its lifetime for windows)."""
    full = math.ceil(length / block_size)
    if span is None:
        return full
    if isinstance(span, Chunk):
        return min(full, math.ceil(span.size / block_size))
    return min(full, math.ceil(span / block_size) + 1)


def sort_spans(spans: Iterable[Span]) -> tuple[Span, ...]:
    """Distinct spans in a stable order: windows by size, then chunks by size, then full."""
    def key(s: Span) -> tuple[int, int]:
        if s is None:
            return (2, 0)
        if isinstance(s, Chunk):
            return (1, s.size)
        return (0, s)
    return tuple(sorted(set(spans), key=key))


@dataclass(frozen=True, slots=True, kw_only=True)
class AttentionLayout:
    """Per-GPU sizes of one attention layer of a kind (what `cost.step` prices). Elements and bytes per token
    unless named otherwise."""

    kind: str
    span: Span  # the BatchShape.attention key its pairs come from (None for linear-state layers too)
    has_pairs: bool  # softmax attention over cached tokens (not a linear-state layer)
    params: float  # projection weights (+ norms, gates, indexer) multiplied as GEMMs
    params_full: int  # the same layer's weights before tensor parallelism
    act_elems: float  # activation elements the projections move per token
    q_heads: float
    q_per_kv: float  # query heads sharing one cached KV head (MLA: all heads share the latent)
    pair_flops_prefill: float
    pair_flops_decode: float
    kv_bytes_per_token: float  # read per cached token and written per new token (MLA: the latent)
    writes_kv: bool  # False where the layer reads another layer's cache (KV sharing)
    cache_bytes_per_token: float  # what the layer keeps per token in memory (0 for shared / linear layers)
    q_out_elems: float  # Q read + O written by the attention kernel
    index_pair_flops: float = 0.0  # DSA indexer, per (query, cached key) pair
    index_heads: int = 0  # index heads sharing each cached index key (the GEMM rows per query)
    index_bytes_per_token: float = 0.0
    state_bytes: float = 0.0  # linear-state layers: recurrent + conv state per sequence
    state_flops_per_token: float = 0.0
    state_act_elems: float = 0.0  # activation elements the recurrence reads and writes per token
    # kernels per layer (fixed costs at small batch): GQA: QKV and output GEMMs; rope + cache write, attention
    proj_kernels: int = 2
    attn_kernels: int = 2
    proj_gemms: int = 2  # projection GEMMs with an activation input of their own (GQA: QKV, output)


def _gqa(a: AttentionSpec, h: int, tp: int, kv_bpe: float) -> AttentionLayout:
    q_heads = a.num_heads / tp
    kv_heads = a.num_kv_heads / tp if a.num_kv_heads >= tp else 1.0  # replicated beyond tp > kv_heads
    kv_dim_gpu = kv_heads * a.head_dim
    q_dim_gpu = q_heads * a.head_dim
    q_dim, kv_dim = a.num_heads * a.head_dim, a.num_kv_heads * a.head_dim
    full = attention_params(a, h)
    if a.output_gate:  # q_proj also emits a per-channel gate: h x 2q, plus o_proj q x h
        params = 3 * h * q_dim_gpu + 2 * h * kv_dim_gpu
        split = 3 * h * q_dim + 2 * h * kv_dim
    else:
        params = 2 * h * q_dim_gpu + 2 * h * kv_dim_gpu
        split = 2 * h * q_dim + 2 * h * kv_dim
    if a.qkv_bias:
        params += q_dim_gpu + 2 * kv_dim_gpu
        split += q_dim + 2 * kv_dim
    params += (full - split) / tp
    kv_tok = 2 * kv_dim_gpu * kv_bpe
    keeps = not a.shares_kv
    return AttentionLayout(
        kind=a.kind, span=attention_span(a), has_pairs=True, params=params, params_full=full,
        act_elems=2 * h + 2 * (q_dim_gpu + 2 * kv_dim_gpu), q_heads=q_heads, q_per_kv=a.num_heads / a.num_kv_heads,
        pair_flops_prefill=4 * q_heads * a.head_dim, pair_flops_decode=4 * q_heads * a.head_dim,
        kv_bytes_per_token=kv_tok, writes_kv=keeps, cache_bytes_per_token=kv_tok if keeps else 0.0,
        q_out_elems=2 * q_dim_gpu)


def _mla(a: AttentionSpec, h: int, tp: int, kv_bpe: float) -> AttentionLayout:
    m = a.mla
    assert m is not None
    q_heads = a.num_heads / tp
    full = attention_params(a, h)
    replicated = h * (m.kv_lora_rank + m.qk_rope_head_dim) + m.kv_lora_rank
    if m.q_lora_rank:
        replicated += h * m.q_lora_rank + m.q_lora_rank
    ix = a.indexer
    index_flops = index_bytes = 0.0
    index_heads = 0
    if ix is not None:  # the indexer runs whole on every GPU
        index_heads = ix.num_heads
        replicated += ix.params
        index_flops = 2.0 * ix.num_heads * ix.head_dim
        index_bytes = ix.head_dim + 4.0 * math.ceil(ix.head_dim / INDEX_SCALE_GROUP)
    kv_tok = (m.kv_lora_rank + m.qk_rope_head_dim) * kv_bpe
    if ix is not None and kv_bpe == 1:  # DSA's fp8 latent (FlashMLA's sparse format, vLLM fp8_ds_mla): the latent in
        # fp8 with an fp32 scale per 128 values, the rope part in bf16 (656 bytes for 512 + 64)
        kv_tok = m.kv_lora_rank + 4.0 * math.ceil(m.kv_lora_rank / LATENT_SCALE_GROUP) + 2.0 * m.qk_rope_head_dim
    return AttentionLayout(
        kind=a.kind, span=attention_span(a), has_pairs=True, params=replicated + (full - replicated) / tp,
        params_full=full, act_elems=2 * h + (q_heads * (m.qk_nope_head_dim + m.qk_rope_head_dim) * 2),
        q_heads=q_heads, q_per_kv=a.num_heads / 1,
        pair_flops_prefill=2 * q_heads * (m.qk_nope_head_dim + m.qk_rope_head_dim + m.v_head_dim),
        pair_flops_decode=2 * q_heads * (2 * m.kv_lora_rank + m.qk_rope_head_dim),
        kv_bytes_per_token=kv_tok, writes_kv=True, cache_bytes_per_token=kv_tok,
        q_out_elems=q_heads * (m.qk_nope_head_dim + m.qk_rope_head_dim + m.v_head_dim),
        index_pair_flops=index_flops, index_heads=index_heads, index_bytes_per_token=index_bytes,
        # vLLM DeepseekV2MLAAttention: q_a_proj, q_a_layernorm, q_b_proj (q_proj without a q LoRA), kv_a_proj,
        # kv_a_layernorm, the absorbed W_UK bmm, o_proj; then rope + cache write, attention and the W_UV bmm
        proj_kernels=7 if m.q_lora_rank else 5, attn_kernels=3,
        proj_gemms=4 if m.q_lora_rank else 3)  # q_a, q_b (or q), kv_a, o


def _linear(a: AttentionSpec, h: int, tp: int) -> AttentionLayout:
    s = a.linear
    assert s is not None
    full = attention_params(a, h)
    heads = s.num_heads / tp
    state = heads * s.key_dim * s.value_dim * s.state_bytes_per_element
    conv = (s.conv_kernel - 1) * (s.conv_channels / tp) * s.conv_bytes_per_element
    return AttentionLayout(
        kind=a.kind, span=None, has_pairs=False, params=full / tp, params_full=full,
        act_elems=2 * h + (s.conv_channels + 2 * s.num_heads * s.value_dim) / tp, q_heads=heads, q_per_kv=1.0,
        pair_flops_prefill=0.0, pair_flops_decode=0.0, kv_bytes_per_token=0.0, writes_kv=False,
        cache_bytes_per_token=0.0, q_out_elems=0.0, state_bytes=state + conv,
        state_flops_per_token=6.0 * heads * s.key_dim * s.value_dim + 2.0 * s.conv_kernel * s.conv_channels / tp,
        state_act_elems=(s.conv_channels + s.num_heads * s.value_dim) / tp)


def attention_layout(a: AttentionSpec, h: int, tp: int, kv_bytes_per_element: float) -> AttentionLayout:
    """Per-GPU sizes of one layer of attention `a` at tensor-parallel degree `tp` (formulas in the module doc)."""
    if a.kind == "linear":
        return _linear(a, h, tp)
    if a.mla is not None:
        return _mla(a, h, tp, kv_bytes_per_element)
    return _gqa(a, h, tp, kv_bytes_per_element)
