"""Gemma 2, Gemma 3 and Gemma 3n.

- Gemma 2/3: four norms per layer, tied embeddings, sliding-window layers (Gemma 2: even layers; Gemma 3: all but
  every `sliding_window_pattern`-th), Gemma 3 adds QK norms; multimodal Gemma 3 nests the text model in
  text_config, which omits fields equal to Gemma3TextConfig's defaults (vocab 262208, 131072 positions, pattern
  6, 8 q / 4 kv heads of head_dim 256, query_pre_attn_scalar 256: the 4B file gives no head counts, the 12B file
  no head_dim, which is not hidden / heads = 240), and has a SigLIP tower in front.
- Gemma 3n (`Gemma3nForConditionalGeneration`): the text decoder of transformers' Gemma3nTextModel. Per layer:
  attention with q/k norms (v norm has no weights), a gated MLP of its own width (MatFormer: `intermediate_size`
  may be a list), four norms, and three additions counted as layer extras: AltUp (output scale h, correction
  n x n and prediction n x n^2 coefficients, modality router h x n and its norm h; n = altup_num_inputs), LAuReL
  (h x r, r x h, a norm h; r = laurel_rank) and the per-layer input (gate h x p, projection p x h, a norm h;
  p = hidden_size_per_layer_input). Model-wide: per-layer embedding tables (vocab_size_per_layer_input x L*p, read
  one row per token), their projection h x L*p and norm p, and AltUp's 2(n - 1) h x h projections. The last
  `num_kv_shared_layers` layers reuse the cache of the last earlier layer of their type (no cache of their own).
  Activation sparsity (top-k of the first layers' MLP activations) saves no weight reads and is not modelled.
"""

from __future__ import annotations

from typing import Any

from flopwise.specs.hf.decoder import build_model
from flopwise.specs.hf.encoders import gemma3n_encoders, siglip_vision
from flopwise.specs.hf.features import dense_mlp, gqa, kinds_from_layer_types, layers, nested_text_config
from flopwise.specs.hf.fields import Fields
from flopwise.specs.model import LayerSpec, ModelSpec

__all__ = ["FAMILIES"]

_GEMMA3_TEXT_DEFAULTS: dict[str, Any] = {  # transformers Gemma3TextConfig defaults (configuration_gemma3.py)
    "vocab_size": 262208, "hidden_size": 2304, "intermediate_size": 9216, "num_hidden_layers": 26,
    "num_attention_heads": 8, "num_key_value_heads": 4, "head_dim": 256, "query_pre_attn_scalar": 256,
    "max_position_embeddings": 131072, "sliding_window": 4096, "sliding_window_pattern": 6, "rms_norm_eps": 1e-6,
    "rope_theta": 1_000_000.0, "rope_local_base_freq": 10_000.0, "attention_bias": False,
    "hidden_activation": "gelu_pytorch_tanh"}
_GEMMA3N_TEXT_DEFAULTS: dict[str, Any] = {  # transformers Gemma3nTextConfig defaults (the E4B model)
    "vocab_size": 262400, "vocab_size_per_layer_input": 262144, "hidden_size": 2048, "hidden_size_per_layer_input": 256,
    "intermediate_size": 16384, "num_hidden_layers": 35, "num_attention_heads": 8, "num_key_value_heads": 2,
    "head_dim": 256, "sliding_window": 512, "altup_num_inputs": 4, "laurel_rank": 64, "num_kv_shared_layers": 15,
    "max_position_embeddings": 32768}


def _read_gemma(f: Fields, gemma3: bool) -> ModelSpec:
    top = f.raw
    if gemma3 and isinstance(top.get("text_config"), dict):
        f = Fields(nested_text_config(top, _GEMMA3_TEXT_DEFAULTS), f.name, f.family)
    n = f.int("num_layers")
    window = f.int("sliding_window")
    kinds = kinds_from_layer_types(f, n, window)
    if kinds is None:
        if not gemma3:  # even layers slide (transformers Gemma2DecoderLayer: not layer_idx % 2)
            kinds = tuple("sliding" if i % 2 == 0 else "full" for i in range(n))
        else:  # every `sliding_window_pattern`-th layer is global
            pattern = f.int("sliding_window_pattern", default=6)
            kinds = tuple("full" if (i + 1) % pattern == 0 else "sliding" for i in range(n))
    bias = f.bool("attention_bias")
    by_kind = {k: gqa(f, kind=k, window=window if k == "sliding" else None, qkv_bias=bias, o_bias=bias,
                      qk_norm="head" if gemma3 else None) for k in set(kinds)}
    mlp = dense_mlp(f)
    enc = siglip_vision(top, f) if gemma3 else ()
    return build_model(f, layers([by_kind[k] for k in kinds], [mlp] * n, norms=4), tie_default=True, encoders=enc)


def _read_gemma3n(f: Fields) -> ModelSpec:
    top = f.raw
    f = Fields(nested_text_config(top, _GEMMA3N_TEXT_DEFAULTS), f.name, f.family)
    n, h = f.int("num_layers"), f.int("hidden_size")
    window = f.int("sliding_window")
    kinds = kinds_from_layer_types(f, n, window) or tuple("full" if (i + 1) % 5 == 0 else "sliding" for i in range(n))
    first_shared = n - f.int("num_kv_shared_layers", default=0)
    inter = f.per_layer("intermediate_size", n)
    altup = f.int("altup_num_inputs", default=4)
    rank = f.int("laurel_rank", default=64)
    p = f.int("hidden_size_per_layer_input", default=256)
    extra = ((2 + altup) * h + altup * altup + altup ** 3) + (2 * rank * h + h) + (2 * p * h + h)
    out = []
    for i, k in enumerate(kinds):
        a = gqa(f, kind=k, window=window if k == "sliding" else None, qk_norm="head", shares_kv=i >= first_shared)
        out.append(LayerSpec(attention=a, mlp=dense_mlp(f, inter=inter[i]), norms=4, extra_params=extra))
    ple = f.int("vocab_size_per_layer_input", default=f.int("vocab_size")) * n * p
    model_extra = h * n * p + p + 2 * (altup - 1) * h * h
    return build_model(f, tuple(out), tie_default=True, per_layer_embedding_params=ple, extra_params=model_extra,
                       encoders=gemma3n_encoders(top, f),
                       notes=("Gemma 3n: per-layer embeddings counted as embeddings (lookups, no GEMM); activation "
                              "sparsity and MatFormer sub-models are not modelled",))


FAMILIES: tuple[dict[str, Any], ...] = (
    dict(name="gemma2", architectures=("Gemma2ForCausalLM",), model_types=("gemma2",),
         read=lambda f: _read_gemma(f, False), signature=("query_pre_attn_scalar", "attn_logit_softcapping",
                                                          "final_logit_softcapping", "sliding_window"),
         description="Gemma 2: alternating sliding-window layers, 4 norms per layer"),
    dict(name="gemma3", architectures=("Gemma3ForCausalLM", "Gemma3ForConditionalGeneration"),
         model_types=("gemma3", "gemma3_text"), read=lambda f: _read_gemma(f, True),
         signature=("query_pre_attn_scalar", "sliding_window_pattern", "rope_local_base_freq", "sliding_window"),
         description="Gemma 3: 5 sliding to 1 global layers, QK norm, SigLIP vision tower (multimodal)"),
    dict(name="gemma3n", architectures=("Gemma3nForConditionalGeneration", "Gemma3nForCausalLM"),
         model_types=("gemma3n", "gemma3n_text"), read=_read_gemma3n,
         signature=("altup_num_inputs", "laurel_rank", "hidden_size_per_layer_input", "num_kv_shared_layers"),
         description="Gemma 3n: AltUp, LAuReL, per-layer embeddings, KV sharing; vision and audio encoders"),
)
