"""The Llama-shaped decoder reader, and the families that are one table entry of it.

A Llama-shaped decoder is `num_hidden_layers` x (GQA attention + MLP) with RMSNorms, an embedding and an
(optionally tied) LM head. What differs between these families is data (`DecoderOptions`): which biases exist,
the QK norm, norms per layer, the tie default, the sliding-window rule, the MoE layout, a nested text_config, the
encoders in front. A new family of this shape is one `_entry(...)` line in `DECODER_FAMILIES`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from flopwise.errors import ModelConfigError
from flopwise.specs.hf import encoders
from flopwise.specs.hf.features import (
    deepseek_moe,
    dense_mlp,
    effective_window,
    gqa,
    kinds_from_layer_types,
    layers,
    mixtral_moe,
    nested_text_config,
    qwen_moe,
)
from flopwise.specs.hf.fields import Fields
from flopwise.specs.model import EncoderSpec, LayerSpec, MLPSpec, ModelSpec

__all__ = ["DecoderOptions", "decoder_reader", "build_model", "DECODER_FAMILIES"]

MoEReader = Callable[[Fields, int], tuple[MLPSpec, ...]]
EncoderReader = Callable[[dict[str, Any], Fields], tuple[EncoderSpec, ...]]


@dataclass(frozen=True, slots=True, kw_only=True)
class DecoderOptions:
    """What a Llama-shaped family does differently.

    qkv_bias: always (Qwen2), or from `attention_bias` (None); o_bias follows attention_bias unless `o_bias` False.
    qk_norm: "head" / "full" (see AttentionSpec), enabled always or only when `qk_norm_flag` is true in the config.
    windows: "config" (layer_types, else sliding_window on every layer), "qwen" (only with use_sliding_window, on
    layers from max_window_layers on), "none" (the family has no sliding window).
    mlp: None (dense, `mlp_bias` from the config) or a MoE layout reader from `features`."""

    qkv_bias: bool | None = None
    o_bias: bool = True
    qk_norm: str | None = None
    qk_norm_flag: str | None = None
    norms: int = 2
    tie_default: bool = False
    windows: str = "config"
    mlp: MoEReader | None = None
    text_config: bool = False
    encoders: EncoderReader | None = None


def build_model(f: Fields, layer_specs: tuple[LayerSpec, ...], *, tie_default: bool = False, **kw: Any) -> ModelSpec:
    """A ModelSpec from a reader's layers and the model-wide fields every family shares."""
    return ModelSpec(name=f.name, family=f.family, hidden_size=f.int("hidden_size"), vocab_size=f.int("vocab_size"),
                     tie_embeddings=f.bool("tie_word_embeddings", tie_default), layers=layer_specs,
                     max_position_embeddings=f.optional_int("max_position_embeddings"), **kw)


def _windows(f: Fields, opts: DecoderOptions, n: int) -> tuple[tuple[str, ...], int | None]:
    """Per-layer attention kinds ('full' / 'sliding') and the window."""
    window = f.optional_int("sliding_window")
    if opts.windows == "none" or (opts.windows == "qwen" and not f.bool("use_sliding_window")):
        window = None
    window = effective_window(f, window)
    kinds = kinds_from_layer_types(f, n, window)
    if kinds is not None:
        return kinds, window
    if window is None:
        return ("full",) * n, None
    if opts.windows == "qwen":  # layers below max_window_layers use full attention
        max_win = f.int("max_window_layers", default=n)
        return tuple("sliding" if i >= max_win else "full" for i in range(n)), window
    return ("sliding",) * n, window


def decoder_reader(opts: DecoderOptions) -> Callable[[Fields], ModelSpec]:
    def read(f: Fields) -> ModelSpec:
        top = f.raw
        if opts.text_config:
            f = Fields(nested_text_config(top), f.name, f.family)
        n = f.int("num_layers")
        bias = f.bool("attention_bias")
        qkv_bias = bias if opts.qkv_bias is None else opts.qkv_bias
        qk_norm = opts.qk_norm if opts.qk_norm_flag is None or f.bool(opts.qk_norm_flag) else None
        kinds, window = _windows(f, opts, n)
        by_kind = {k: gqa(f, kind=k, window=window if k == "sliding" else None, qkv_bias=qkv_bias,
                          o_bias=bias and opts.o_bias, qk_norm=qk_norm) for k in set(kinds)}
        attn = tuple(by_kind[k] for k in kinds)
        mlps = opts.mlp(f, n) if opts.mlp is not None else (dense_mlp(f, bias=f.bool("mlp_bias")),) * n
        enc = opts.encoders(top, f) if opts.encoders is not None else ()
        return build_model(f, layers(attn, mlps, norms=opts.norms), tie_default=opts.tie_default, encoders=enc)
    return read


def _hunyuan_moe(f: Fields, n: int) -> tuple[MLPSpec, ...]:
    """Hunyuan-A13B: per-layer lists (moe_topk, num_shared_expert, moe_intermediate_size) over num_experts experts;
    the shared MLP is intermediate_size x num_shared_expert wide (use_mixed_mlp_moe)."""
    top_k = f.per_layer("moe_topk", n)
    shared = f.per_layer("num_shared_expert", n, default=0)
    inter_e = f.per_layer("moe_intermediate_size", n, default=f.int("intermediate_size"))
    inter = f.int("intermediate_size")
    mixed = f.bool("use_mixed_mlp_moe", True)
    e = f.int("num_experts")
    return tuple(MLPSpec(kind="moe", intermediate_size=inter_e[i], num_experts=e, experts_per_token=top_k[i],
                         shared_intermediate_size=inter * shared[i] if mixed else 0) for i in range(n))


def _ernie_moe(f: Fields, n: int) -> tuple[MLPSpec, ...]:
    """ERNIE-4.5 MoE: MoE from moe_layer_start_index to moe_layer_end_index every moe_layer_interval layers,
    moe_num_shared_experts shared experts of moe_intermediate_size, a per-expert routing bias (moe_statics)."""
    inter_e = f.int("expert_intermediate_size")
    moe = MLPSpec(kind="moe", intermediate_size=inter_e, num_experts=f.int("moe_num_experts"),
                  experts_per_token=f.int("moe_k"),
                  shared_intermediate_size=f.int("moe_num_shared_experts", default=0) * inter_e, router_bias=True)
    start = f.int("moe_layer_start_index", default=0)
    end = f.optional_int("moe_layer_end_index")
    end = n - 1 if end is None or end < 0 else end
    interval = f.int("moe_layer_interval", default=1)
    dense = dense_mlp(f)
    return tuple(moe if start <= i <= end and (i + 1) % interval == 0 else dense for i in range(n))


def _minimax_moe(f: Fields, n: int) -> tuple[MLPSpec, ...]:
    """MiniMax-M2: every layer MoE, experts of intermediate_size, sigmoid routing with a per-expert bias
    (use_routing_bias), no shared expert."""
    types = f.int_list("attn_type_list")
    if types and any(t != 1 for t in types):
        raise ModelConfigError(f"{f.name}: attn_type_list has lightning (linear) attention layers (MiniMax-01 style), "
                               "which flopwise does not model")
    moe = MLPSpec(kind="moe", intermediate_size=f.int("intermediate_size"), num_experts=f.int("num_experts"),
                  experts_per_token=f.int("experts_per_token"), router_bias=f.bool("use_routing_bias"))
    return (moe,) * n


def _glm4_moe(f: Fields, n: int) -> tuple[MLPSpec, ...]:
    """GLM-4.5/4.6/4.7: the DeepSeek layout; its router always carries e_score_correction_bias."""
    return tuple(replace(m, router_bias=True) if m.is_moe else m for m in deepseek_moe(f, n))


def _entry(name: str, archs: tuple[str, ...], types: tuple[str, ...], opts: DecoderOptions, signature: tuple[str, ...],
           description: str) -> dict[str, Any]:
    return dict(name=name, architectures=archs, model_types=types, read=decoder_reader(opts), signature=signature,
                description=description)


_LLAMA_SIG = ("intermediate_size", "num_key_value_heads", "rms_norm_eps", "rope_theta", "hidden_act")
_QWEN_SIG = ("use_sliding_window", "max_window_layers", *_LLAMA_SIG)
_QWEN_MOE_SIG = ("decoder_sparse_step", "moe_intermediate_size", "num_experts", "mlp_only_layers")

DECODER_FAMILIES: tuple[dict[str, Any], ...] = (
    _entry("llama", ("LlamaForCausalLM",), ("llama",), DecoderOptions(), _LLAMA_SIG,
           "Llama 2/3.x, Vicuna: GQA, SwiGLU, optional attention/MLP biases"),
    _entry("mistral", ("MistralForCausalLM",), ("mistral",), DecoderOptions(), ("sliding_window", *_LLAMA_SIG),
           "Mistral 7B, Nemo, Small 24B: Llama shape, optional sliding window"),
    _entry("mixtral", ("MixtralForCausalLM",), ("mixtral",), DecoderOptions(mlp=mixtral_moe),
           ("num_local_experts", "num_experts_per_tok", *_LLAMA_SIG), "Mixtral: every layer 8 experts, top-2"),
    _entry("qwen2", ("Qwen2ForCausalLM",), ("qwen2",), DecoderOptions(qkv_bias=True, windows="qwen"), _QWEN_SIG,
           "Qwen1.5/2/2.5: QKV biases, windows only with use_sliding_window"),
    _entry("qwen3", ("Qwen3ForCausalLM",), ("qwen3",), DecoderOptions(qk_norm="head", windows="qwen"), _QWEN_SIG,
           "Qwen3 dense: QK norm"),
    _entry("qwen3-moe", ("Qwen3MoeForCausalLM", "Qwen2MoeForCausalLM"), ("qwen3_moe", "qwen2_moe"),
           DecoderOptions(qk_norm="head", windows="qwen", mlp=qwen_moe), (*_QWEN_MOE_SIG, *_QWEN_SIG),
           "Qwen3-MoE (and Qwen2-MoE): routed experts every decoder_sparse_step layers"),
    _entry("phi3", ("Phi3ForCausalLM",), ("phi3",), DecoderOptions(), ("original_max_position_embeddings",
           "resid_pdrop", "embd_pdrop", *_LLAMA_SIG), "Phi-3, Phi-4, Phi-4-mini (fused qkv/gate_up, same counts)"),
    _entry("granite", ("GraniteForCausalLM",), ("granite",), DecoderOptions(),
           ("embedding_multiplier", "residual_multiplier", "attention_multiplier", "logits_scaling", *_LLAMA_SIG),
           "IBM Granite 3.x dense: Llama shape with scaling multipliers (no extra weights)"),
    _entry("olmo2", ("Olmo2ForCausalLM",), ("olmo2",), DecoderOptions(qk_norm="full", windows="none"),
           ("rms_norm_eps", "rope_theta", "intermediate_size"),
           "OLMo 2: post-norms (2 per layer), QK norm over the whole q and k projections"),
    _entry("cohere", ("CohereForCausalLM",), ("cohere",),
           DecoderOptions(qk_norm="full", qk_norm_flag="use_qk_norm", norms=1, tie_default=True, windows="none"),
           ("logit_scale", "layer_norm_eps", "use_qk_norm"),
           "Cohere Command-R: parallel attention and MLP after one LayerNorm, tied embeddings"),
    _entry("hunyuan-moe", ("HunYuanMoEV1ForCausalLM",), ("hunyuan_v1_moe", "hunyuan"),
           DecoderOptions(qk_norm="head", qk_norm_flag="use_qk_norm", tie_default=True, windows="none",
                          mlp=_hunyuan_moe),
           ("moe_topk", "num_shared_expert", "use_mixed_mlp_moe", "use_cla"),
           "Hunyuan-A13B: per-layer top-k and shared-expert counts, QK norm, tied embeddings"),
    _entry("ernie4.5-moe", ("Ernie4_5_MoeForCausalLM",), ("ernie4_5_moe",),
           DecoderOptions(qkv_bias=False, o_bias=False, tie_default=True, windows="none", mlp=_ernie_moe),
           ("moe_num_experts", "moe_k", "moe_layer_start_index", "moe_num_shared_experts"),
           "ERNIE-4.5 MoE (text): dense first layer, 2 shared experts, routing bias"),
    _entry("minimax-m2", ("MiniMaxM2ForCausalLM",), ("minimax_m2",),
           DecoderOptions(qk_norm="full", qk_norm_flag="use_qk_norm", windows="none", mlp=_minimax_moe),
           ("use_routing_bias", "num_local_experts", "rotary_dim", "qk_norm_type", "attn_type_list"),
           "MiniMax-M2: full attention, 256 experts top-8 with routing bias, QK norm over heads"),
    _entry("glm4-moe", ("Glm4MoeForCausalLM",), ("glm4_moe",),
           DecoderOptions(o_bias=False, qk_norm="head", qk_norm_flag="use_qk_norm", windows="none", mlp=_glm4_moe),
           ("n_routed_experts", "first_k_dense_replace", "partial_rotary_factor", "use_qk_norm"),
           "GLM-4.5/4.6/4.7 (and -Air): QKV biases, DeepSeek-style MoE with dense first layers"),
    _entry("qwen2.5-vl", ("Qwen2_5_VLForConditionalGeneration", "Qwen2VLForConditionalGeneration"),
           ("qwen2_5_vl", "qwen2_vl"),
           DecoderOptions(qkv_bias=True, windows="qwen", text_config=True, encoders=encoders.qwen2_5_vl_vision),
           ("vision_config", "rope_scaling", *_QWEN_SIG), "Qwen2/2.5-VL: Qwen2 text model + ViT (priced per image)"),
    _entry("mistral3", ("Mistral3ForConditionalGeneration",), ("mistral3",),
           DecoderOptions(text_config=True, encoders=encoders.pixtral_vision),
           ("vision_config", "spatial_merge_size", "multimodal_projector_bias"),
           "Mistral Small 3.1/3.2: Mistral text model + Pixtral vision tower"),
)
