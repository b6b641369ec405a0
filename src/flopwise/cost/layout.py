"""Per-GPU sizes of a deployment, computed once and cached: what each operator of one layer multiplies,
stores and reads on one GPU of the tensor-parallel group.

Tensor parallelism (Megatron-LM, Shoeybi et al. 2019): column/row-parallel projections split q, o and MLP
weights by tp; KV heads split by tp while tp <= kv_heads and are replicated beyond (vLLM); MLA's latent
cache and its down-projections are replicated; embeddings and the LM head are vocab-parallel; MoE experts
are sharded by tp (vLLM's default, no expert parallelism). Pipeline parallelism splits layers into pp stages:
memory per GPU shrinks by pp, while one token still passes every layer in sequence.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from functools import lru_cache

from flopwise.specs.deployment import Deployment

__all__ = ["LayerGroup", "Layout", "layout"]


@dataclass(frozen=True, slots=True)
class LayerGroup:
    """`count` layers sharing an attention window and MLP kind."""

    count: int
    window: int | None
    is_moe: bool


@dataclass(frozen=True, slots=True)
class Layout:
    groups: tuple[LayerGroup, ...]
    windows: tuple[int | None, ...]
    weight_bytes_per_param: float
    embed_bytes_per_param: float
    act_bytes: int
    q_heads: float  # per GPU
    q_per_kv: float  # query heads sharing one cached KV head (MLA: all heads share the latent)
    attn_params: float  # per GPU, one layer
    attn_act_elems: float  # activation elements moved per token by the attention projections, per GPU
    pair_flops_prefill: float  # attention FLOPs per (query, key) pair, per GPU
    pair_flops_decode: float
    kv_bytes_per_token_layer: float  # per GPU
    q_out_elems: float  # per token, per GPU: Q read + O written by the attention kernel
    dense_mlp_params: float  # per GPU
    dense_inter: float  # per GPU intermediate width
    expert_params: float  # per GPU, one routed expert
    expert_inter: float
    shared_params: float  # per GPU
    shared_inter: float
    router_params: int
    num_experts: int
    experts_per_token: int
    embed_params: float  # per GPU
    lm_head_params: float  # per GPU (tied heads still run a GEMM with the embedding matrix)
    hidden: int
    vocab_per_gpu: float
    weight_bytes_per_gpu: float  # all weights one GPU stores (layers / pp)
    # kernels each operator launches per layer (fixed costs at small batch; see `kernel_counts`)
    proj_kernels: int = 2
    attn_kernels: int = 2
    mlp_kernels: int = 2
    moe_kernels: int = 6
    shared_kernels: int = 2


def kernel_counts(dep: Deployment) -> dict[str, int]:
    """Kernels per layer of each operator, as vLLM's model code launches them:
    - GQA attention projections: the fused QKV GEMM and the output GEMM (2); rope + cache write and the
      attention kernel (2);
    - MLA (`deepseek_v2.py` DeepseekV2MLAAttention): q_a_proj, q_a_layernorm, q_b_proj (q_proj without a
      q LoRA), kv_a_proj_with_mqa, kv_a_layernorm, the absorbed W_UK bmm and o_proj (7, or 5 without q LoRA);
      rope + cache write, the attention kernel and the W_UV bmm (3);
    - dense MLP: gate_up GEMM (activation fused) and down GEMM (2); shared experts the same;
    - routed MoE (`fused_moe`): router GEMM, top-k, moe_align_block_size, two grouped GEMMs, silu_and_mul and
      moe_sum (6).
    W8A8 activation quantization is counted as fused into the preceding norm or activation kernel (TensorRT-LLM
    and vLLM's fusion passes do so)."""
    m = dep.model
    if m.mla is not None:
        gemms = 4 if m.mla.q_lora_rank else 3
        proj = gemms + (2 if m.mla.q_lora_rank else 1) + 1
        attn = 3
    else:
        proj, attn = 2, 2
    return {"proj": proj, "attn": attn, "mlp": 2, "moe": 6, "shared": 2}


@lru_cache(maxsize=512)
def layout(dep: Deployment) -> Layout:
    m, tp = dep.model, dep.tp
    h = m.hidden_size
    wf = dep.weights
    embed_bpp = wf.bytes_per_weight if wf.quantizes_embeddings else (4.0 if wf.name == "fp32" else 2.0)
    q_heads = m.num_heads / tp
    if m.mla is not None:
        a = m.mla
        replicated = h * (a.kv_lora_rank + a.qk_rope_head_dim) + a.kv_lora_rank
        if a.q_lora_rank:
            replicated += h * a.q_lora_rank + a.q_lora_rank
        attn_params = replicated + (m.attention_params - replicated) / tp
        pair_prefill = 2 * q_heads * (a.qk_nope_head_dim + a.qk_rope_head_dim + a.v_head_dim)
        pair_decode = 2 * q_heads * (2 * a.kv_lora_rank + a.qk_rope_head_dim)
        kv_tok = m.kv_elements_per_token_per_layer * dep.kv.bytes_per_element
        attn_act = 2 * h + (q_heads * (a.qk_nope_head_dim + a.qk_rope_head_dim) * 2)
        q_out = q_heads * (a.qk_nope_head_dim + a.qk_rope_head_dim + a.v_head_dim)
    else:
        kv_heads = m.num_kv_heads / tp if m.num_kv_heads >= tp else 1.0  # replicated beyond tp > kv_heads
        kv_dim_gpu = kv_heads * m.head_dim
        q_dim_gpu = q_heads * m.head_dim
        attn_params = 2 * h * q_dim_gpu + 2 * h * kv_dim_gpu
        if m.qkv_bias:
            attn_params += q_dim_gpu + 2 * kv_dim_gpu
        attn_params += (m.attention_params - (2 * h * m.q_dim + 2 * h * m.kv_dim)
                        - (m.q_dim + 2 * m.kv_dim if m.qkv_bias else 0)) / tp
        pair_prefill = pair_decode = 4 * q_heads * m.head_dim
        kv_tok = 2 * kv_dim_gpu * dep.kv.bytes_per_element
        attn_act = 2 * h + 2 * (q_dim_gpu + 2 * kv_dim_gpu)
        q_out = 2 * q_dim_gpu
    moe = m.moe
    counts = Counter(zip(m.layer_windows, m.moe_layers, strict=True))
    groups = tuple(LayerGroup(n, w, is_moe) for (w, is_moe), n in sorted(counts.items(), key=str))
    per_gpu_total = m.total_params - m.embedding_params - m.lm_head_params
    weight_bytes = (per_gpu_total / tp / dep.pp) * wf.bytes_per_weight
    weight_bytes += (m.embedding_params + m.lm_head_params) / tp * embed_bpp
    # KV projections replicated beyond tp > kv_heads store more than 1/tp of the attention weights:
    weight_bytes += m.num_layers / dep.pp * (attn_params - m.attention_params / tp) * wf.bytes_per_weight
    return Layout(
        groups=groups, windows=tuple(sorted({g.window for g in groups}, key=lambda w: (w is None, w or 0))),
        weight_bytes_per_param=wf.bytes_per_weight, embed_bytes_per_param=embed_bpp, act_bytes=wf.activation_bytes,
        q_heads=q_heads, q_per_kv=m.num_heads / (m.num_kv_heads if m.mla is None else 1), attn_params=attn_params, attn_act_elems=attn_act,
        pair_flops_prefill=pair_prefill, pair_flops_decode=pair_decode, kv_bytes_per_token_layer=kv_tok,
        q_out_elems=q_out,
        dense_mlp_params=m.dense_mlp_params / tp, dense_inter=m.intermediate_size / tp,
        expert_params=(m.expert_params / tp) if moe else 0.0,
        expert_inter=(moe.expert_intermediate_size / tp) if moe else 0.0,
        shared_params=m.shared_expert_params / tp, shared_inter=(moe.shared_intermediate_size / tp) if moe else 0.0,
        router_params=m.router_params, num_experts=moe.num_experts if moe else 0,
        experts_per_token=moe.experts_per_token if moe else 0,
        embed_params=m.embedding_params / tp, lm_head_params=m.vocab_size * h / tp,
        hidden=h, vocab_per_gpu=m.vocab_size / tp, weight_bytes_per_gpu=weight_bytes,
        **{f"{k}_kernels": v for k, v in kernel_counts(dep).items()},
    )
