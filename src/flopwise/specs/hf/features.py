"""Feature readers shared by the family readers: each reads one idea from a config.json, the same way for every
family that has it.

- `nested_text_config`: multimodal configs (Gemma 3, Llama 4, Mistral 3, Gemma 3n) nest the language model in
  `text_config`, which omits fields equal to its class defaults;
- `gqa`: a grouped-query attention block of a layer (heads, head_dim, biases, QK norm);
- `layer_kinds`: per-layer attention kinds from `layer_types`, or a family's default pattern;
- `dense_mlp`, `mixtral_moe`, `qwen_moe`, `deepseek_moe`: the MLP of every layer for the common MoE layouts
  (which layers are MoE, expert and shared widths, router bias);
- `layers`: zip attention and MLP specs into LayerSpecs.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from flopwise.errors import ModelConfigError
from flopwise.specs.hf.fields import Fields
from flopwise.specs.model import AttentionSpec, LayerSpec, MLPSpec

__all__ = ["nested_text_config", "gqa", "layer_types", "kinds_from_layer_types", "dense_mlp", "mixtral_moe",
           "qwen_moe", "deepseek_moe", "layers", "effective_window"]

_TOP_LEVEL_KEEP = ("architectures", "quantization_config", "model_type")


def nested_text_config(raw: dict[str, Any], defaults: dict[str, Any] | None = None) -> dict[str, Any]:
    """The language model's fields of a multimodal config: `text_config` over the family's text-class defaults,
    keeping the top-level architectures, model_type and quantization_config (they describe the checkpoint)."""
    text = raw.get("text_config")
    if not isinstance(text, dict):
        return raw
    merged = {**(defaults or {}), **text}
    for k in _TOP_LEVEL_KEEP:
        if raw.get(k) is not None:
            merged[k] = raw[k]
    if "tie_word_embeddings" not in text and "tie_word_embeddings" in raw:
        merged["tie_word_embeddings"] = raw["tie_word_embeddings"]
    return merged


def effective_window(f: Fields, window: int | None) -> int | None:
    """A window at least as long as the model's context is no window (Phi-4-mini's 262144 over 131072 positions)."""
    if window is None:
        return None
    max_pos = f.optional_int("max_position_embeddings")
    if max_pos is not None and window >= max_pos:
        return None
    return int(window)


def gqa(f: Fields, *, kind: str = "full", window: int | None = None, qkv_bias: bool = False,
        o_bias: bool = False, qk_norm: str | None = None, sinks: bool = False, output_gate: bool = False,
        head_dim: int | None = None, shares_kv: bool = False) -> AttentionSpec:
    """One layer's grouped-query attention from the shared fields (an explicit head_dim wins over hidden/heads)."""
    h = f.int("hidden_size")
    n_heads = f.int("num_heads")
    n_kv = f.int("num_kv_heads", default=n_heads)
    d = head_dim if head_dim is not None else f.optional_int("head_dim")
    if d is None:
        if h % n_heads:  # transformers' attention reshapes hidden_size into num_heads equal heads
            raise ModelConfigError(f"{f.name}: hidden_size {h} is not a multiple of num_attention_heads {n_heads}, "
                                   "and no head_dim is given")
        d = h // n_heads
    return AttentionSpec(kind=kind, num_heads=n_heads, num_kv_heads=n_kv, head_dim=d, window=window,
                         qkv_bias=qkv_bias, o_bias=o_bias, qk_norm=qk_norm, sinks=sinks, output_gate=output_gate,
                         shares_kv=shares_kv)


def layer_types(f: Fields, n_layers: int) -> list[str] | None:
    types = f.str_list("layer_types")
    if not types:
        return None
    if len(types) != n_layers:
        raise ModelConfigError(f"{f.name}: layer_types has {len(types)} entries, num_hidden_layers is {n_layers}")
    return list(types)


_TYPE_TO_KIND = {"full_attention": "full", "sliding_attention": "sliding", "chunked_attention": "chunked",
                 "linear_attention": "linear", "attention": "full", "mamba": "linear"}


def kinds_from_layer_types(f: Fields, n_layers: int, window: int | None) -> tuple[str, ...] | None:
    """Per-layer attention kinds from `layer_types` (full_attention, sliding_attention, linear_attention, ...)."""
    types = layer_types(f, n_layers)
    if types is None:
        return None
    unknown = sorted({t for t in types if t not in _TYPE_TO_KIND})
    if unknown:
        raise ModelConfigError(f"{f.name}: layer_types has kinds flopwise does not model: {', '.join(unknown)}")
    kinds = tuple(_TYPE_TO_KIND[t] for t in types)
    if window is None and "sliding" in kinds:
        raise ModelConfigError(f"{f.name}: layer_types has sliding_attention layers but no 'sliding_window'")
    return kinds


def dense_mlp(f: Fields, *, inter: int | None = None, gated: bool = True, bias: bool = False) -> MLPSpec:
    return MLPSpec(kind="dense", intermediate_size=inter if inter is not None else f.int("intermediate_size"),
                   gated=gated, bias=bias)


def mixtral_moe(f: Fields, n_layers: int) -> tuple[MLPSpec, ...]:
    """Mixtral: every layer MoE, experts as wide as intermediate_size, no shared expert."""
    moe = MLPSpec(kind="moe", intermediate_size=f.int("intermediate_size"), num_experts=f.int("num_experts"),
                  experts_per_token=f.int("experts_per_token"))
    return (moe,) * n_layers


def qwen_moe(f: Fields, n_layers: int) -> tuple[MLPSpec, ...]:
    """Qwen2-MoE / Qwen3-MoE / Qwen3-Next: MoE every `decoder_sparse_step` layers except `mlp_only_layers`;
    a shared expert of `shared_expert_intermediate_size` behind a sigmoid gate (h -> 1) where the config has
    one (Qwen2-MoE, Qwen3-Next; Qwen3-MoE has none)."""
    shared = f.int("shared_expert_intermediate_size", default=0)
    moe = MLPSpec(kind="moe", intermediate_size=f.int("expert_intermediate_size"), num_experts=f.int("num_experts"),
                  experts_per_token=f.int("experts_per_token"), shared_intermediate_size=shared,
                  shared_gate=shared > 0)
    step = f.int("decoder_sparse_step", default=1)
    dense_only = set(f.int_list("mlp_only_layers") or [])
    dense = dense_mlp(f) if dense_only or step > 1 else None
    out = []
    for i in range(n_layers):
        is_moe = i not in dense_only and (i + 1) % step == 0
        out.append(moe if is_moe else dense)
    return tuple(out)  # type: ignore[arg-type]


def deepseek_moe(f: Fields, n_layers: int) -> tuple[MLPSpec, ...]:
    """DeepSeek-V2/V3 layout (also Kimi-K2, GLM-4.5): `first_k_dense_replace` dense first layers of
    intermediate_size, then MoE every `moe_layer_freq` layers with `n_routed_experts` experts of
    moe_intermediate_size and `n_shared_experts` shared ones; noaux_tc routing adds a per-expert bias
    (e_score_correction_bias)."""
    inter_e = f.int("expert_intermediate_size")
    moe = MLPSpec(kind="moe", intermediate_size=inter_e, num_experts=f.int("n_routed_experts"),
                  experts_per_token=f.int("experts_per_token"),
                  shared_intermediate_size=f.int("n_shared_experts", default=0) * inter_e,
                  router_bias=f.get("topk_method") == "noaux_tc" or f.bool("use_routing_bias"), grouped_routing=True)
    first_dense = f.int("first_k_dense_replace", default=0)
    freq = f.int("moe_layer_freq", default=1)
    dense = dense_mlp(f) if first_dense or freq > 1 else None
    return tuple(moe if i >= first_dense and i % freq == 0 else dense for i in range(n_layers))  # type: ignore[misc]


def layers(attention: Sequence[AttentionSpec], mlp: Sequence[MLPSpec], *, norms: int = 2,
           extra_params: int = 0) -> tuple[LayerSpec, ...]:
    if len(attention) != len(mlp):
        raise ModelConfigError(f"internal: {len(attention)} attention specs for {len(mlp)} MLP specs")
    cache: dict[tuple[AttentionSpec, MLPSpec], LayerSpec] = {}
    out = []
    for a, m in zip(attention, mlp, strict=True):
        key = (a, m)
        if key not in cache:  # equal layers share one object (cheap hashing in the cost caches)
            cache[key] = LayerSpec(attention=a, mlp=m, norms=norms, extra_params=extra_params)
        out.append(cache[key])
    return tuple(out)
