"""Families whose readers are short and unlike the Llama shape: Falcon, OPT and gpt-oss.

- Falcon (RW): an ungated GELU MLP of ffn_hidden_size (4h), LayerNorms with bias, multi-query attention in the
  old architecture (one KV head unless the config names more), one norm per layer when attention and MLP run in
  parallel off the same input (`parallel_attn`), two in the new decoder architecture (Falcon-40B/180B).
- OPT (Zhang et al. 2022; `OPTForCausalLM`): multi-head attention and an ungated ReLU MLP of `ffn_dim`, biased
  (`enable_bias`), pre-LayerNorms with bias, tied embeddings, and learned positions: a table of
  max_position_embeddings + 2 rows (the HF offset of 2), read one row per token like the token embedding.
  OPT-350m's projected embeddings (`word_embed_proj_dim` != hidden) are not modelled.
- gpt-oss: alternating sliding (first) and full layers, biased attention with learned sinks, every layer MoE with
  biased experts and a biased router.
"""

from __future__ import annotations

from typing import Any

from flopwise.errors import ModelConfigError
from flopwise.specs.hf.decoder import build_model
from flopwise.specs.hf.features import dense_mlp, gqa, kinds_from_layer_types, layers
from flopwise.specs.hf.fields import Fields
from flopwise.specs.model import AttentionSpec, MLPSpec, ModelSpec

__all__ = ["FAMILIES"]


def _read_falcon(f: Fields) -> ModelSpec:
    n, h = f.int("num_layers"), f.int("hidden_size")
    new_arch = f.bool("new_decoder_architecture")
    raw = f.raw
    n_kv = None
    if not new_arch and f.bool("multi_query", True) and "num_kv_heads" not in raw and "n_head_kv" not in raw:
        n_kv = 1
    bias = f.bool("bias")
    a = gqa(f, qkv_bias=bias, o_bias=bias)
    if n_kv is not None:
        a = AttentionSpec(kind="full", num_heads=a.num_heads, num_kv_heads=n_kv, head_dim=a.head_dim,
                          qkv_bias=bias, o_bias=bias)
    mlp = dense_mlp(f, inter=f.int("intermediate_size", default=4 * h), gated=False, bias=bias)
    norms = 2 if new_arch or not f.bool("parallel_attn", True) else 1
    return build_model(f, layers([a] * n, [mlp] * n, norms=norms), tie_default=True, norm_has_bias=True)


OPT_POSITION_OFFSET = 2  # OPTLearnedPositionalEmbedding keeps two rows before position 0


def _read_opt(f: Fields) -> ModelSpec:
    n, h = f.int("num_layers"), f.int("hidden_size")
    if f.int("word_embed_proj_dim", default=h) != h:
        raise ModelConfigError(f"{f.name}: word_embed_proj_dim != hidden_size (projected embeddings, as OPT-350m) "
                               "is not modelled")
    if not f.bool("do_layer_norm_before", True):
        raise ModelConfigError(f"{f.name}: post-LayerNorm OPT (do_layer_norm_before false, OPT-350m) is not modelled")
    bias = f.bool("enable_bias", True)
    a = gqa(f, qkv_bias=bias, o_bias=bias)
    mlp = dense_mlp(f, inter=f.int("ffn_dim"), gated=False, bias=bias)
    positions = (f.int("max_position_embeddings") + OPT_POSITION_OFFSET) * h
    return build_model(f, layers([a] * n, [mlp] * n), tie_default=True, norm_has_bias=True,
                       per_layer_embedding_params=positions)


# gpt-oss answers in OpenAI's harmony format (cookbook.openai.com/articles/openai-harmony): after the prompt's
# `<|start|>assistant` it generates `<|channel|>analysis<|message|>`, 3 tokens, before any reasoning text. vLLM's
# chat endpoint parses every gpt-oss response with the harmony parser and streams a delta only for a channel's
# content (`extract_harmony_streaming_delta`), so those 3 steps pass without text; SGLang and TensorRT-LLM do the
# same with their gpt-oss reasoning parser (without one, the special tokens are skipped and "analysis" streams as
# text after 1 step: not modelled).
HARMONY_HEADER_TOKENS = 3


def _read_gpt_oss(f: Fields) -> ModelSpec:
    n = f.int("num_layers")
    window = f.optional_int("sliding_window")
    kinds = kinds_from_layer_types(f, n, window)
    if kinds is None:  # alternating, sliding first (gpt-oss reference)
        kinds = tuple("sliding" if i % 2 == 0 and window else "full" for i in range(n))
    bias = f.bool("attention_bias", True)
    by_kind = {k: gqa(f, kind=k, window=window if k == "sliding" else None, qkv_bias=bias, o_bias=bias, sinks=True)
               for k in set(kinds)}
    moe = MLPSpec(kind="moe", intermediate_size=f.int("intermediate_size"), num_experts=f.int("num_experts"),
                  experts_per_token=f.int("experts_per_token"), expert_bias=True, router_bias=True)
    return build_model(f, layers([by_kind[k] for k in kinds], [moe] * n),
                       response_header_tokens=HARMONY_HEADER_TOKENS)


FAMILIES: tuple[dict[str, Any], ...] = (
    dict(name="falcon", architectures=("FalconForCausalLM", "RWForCausalLM"),
         model_types=("falcon", "RefinedWeb", "RefinedWebModel"), read=_read_falcon,
         signature=("new_decoder_architecture", "parallel_attn", "multi_query", "alibi", "bias"),
         description="Falcon 7B/40B/180B: ungated MLP, LayerNorm with bias, multi-query / grouped KV"),
    dict(name="opt", architectures=("OPTForCausalLM",), model_types=("opt",), read=_read_opt,
         signature=("ffn_dim", "word_embed_proj_dim", "do_layer_norm_before", "enable_bias"),
         description="OPT 1.3B-66B: MHA, ungated ReLU MLP, biased, learned positions"),
    dict(name="gpt-oss", architectures=("GptOssForCausalLM",), model_types=("gpt_oss",), read=_read_gpt_oss,
         signature=("experts_per_token", "num_local_experts", "swiglu_limit", "sliding_window"),
         description="gpt-oss: alternating 128-token windows, attention sinks, biased MoE"),
)
