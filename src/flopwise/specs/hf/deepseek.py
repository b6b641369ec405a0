"""DeepSeek-V2/V3 (and Kimi-K2, which ships as DeepseekV3ForCausalLM) and DeepSeek-V3.2.

MLA attention (every head reads one shared latent: num_kv_heads = num_heads, head_dim = d_nope + d_rope) and the
DeepSeek MoE layout (`features.deepseek_moe`). DeepSeek-V3.2 (`DeepseekV32ForCausalLM`) adds DeepSeek Sparse
Attention: a lightning indexer per layer (vLLM's `Indexer`: wq_b q_lora_rank x (index_n_heads * index_head_dim),
wk h x index_head_dim, a LayerNorm of index_head_dim with bias, weights_proj h x index_n_heads) picks the
`index_topk` tokens each query attends. The multi-token-prediction layers (`num_nextn_predict_layers`) are not part
of the served model and are not counted (the published 671B excludes them; the checkpoint's 685B includes them).
"""

from __future__ import annotations

from typing import Any

from flopwise.specs.hf.decoder import build_model
from flopwise.specs.hf.features import deepseek_moe, layers
from flopwise.specs.hf.fields import Fields
from flopwise.specs.model import AttentionSpec, IndexerSpec, MLASpec, ModelSpec

__all__ = ["FAMILIES"]


def _read(f: Fields, sparse: bool) -> ModelSpec:
    n, h = f.int("num_layers"), f.int("hidden_size")
    heads = f.int("num_heads")
    q_lora = f.optional_int("q_lora_rank")
    mla = MLASpec(q_lora_rank=q_lora, kv_lora_rank=f.int("kv_lora_rank"), qk_nope_head_dim=f.int("qk_nope_head_dim"),
                  qk_rope_head_dim=f.int("qk_rope_head_dim"), v_head_dim=f.int("v_head_dim"))
    indexer = None
    if sparse:
        ih, idim = f.int("index_n_heads"), f.int("index_head_dim")
        q_in = q_lora or h
        indexer = IndexerSpec(num_heads=ih, head_dim=idim, top_k=f.int("index_topk"),
                              params=q_in * ih * idim + h * idim + 2 * idim + h * ih)
    attn = AttentionSpec(kind="sparse" if sparse else "mla", num_heads=heads, num_kv_heads=heads,
                         head_dim=mla.qk_nope_head_dim + mla.qk_rope_head_dim, mla=mla, indexer=indexer)
    notes: tuple[str, ...] = ()
    if f.int("num_nextn_predict_layers", default=0):
        notes = (f"{f.int('num_nextn_predict_layers')} multi-token-prediction layer(s) in the checkpoint are not "
                 "counted (use them as a speculative `mtp` proposer)",)
    return build_model(f, layers([attn] * n, deepseek_moe(f, n)), notes=notes)


_SIG = ("kv_lora_rank", "q_lora_rank", "qk_rope_head_dim", "n_routed_experts", "first_k_dense_replace")

FAMILIES: tuple[dict[str, Any], ...] = (
    dict(name="deepseek", architectures=("DeepseekV2ForCausalLM", "DeepseekV3ForCausalLM"),
         model_types=("deepseek_v2", "deepseek_v3", "kimi_k2"), read=lambda f: _read(f, False), signature=_SIG,
         description="DeepSeek-V2/V3, Kimi-K2: MLA, shared experts, dense first layers, routing bias"),
    dict(name="deepseek-v3.2", architectures=("DeepseekV32ForCausalLM",), model_types=("deepseek_v32",),
         read=lambda f: _read(f, True), signature=("index_topk", "index_n_heads", "index_head_dim", *_SIG),
         description="DeepSeek-V3.2(-Exp): MLA with DeepSeek Sparse Attention (indexer + top-k)"),
)
