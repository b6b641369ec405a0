"""Qwen3-Next (`Qwen3NextForCausalLM`): 3 Gated DeltaNet layers to 1 gated full-attention layer, every layer MoE.

Full-attention layers (every `full_attention_interval`-th, or `layer_types`): GQA with head_dim 256, QK norms of
head_dim, and an output gate (`attn_output_gate`: q_proj emits q and a sigmoid gate, h x 2 q_dim). Linear layers
(transformers Qwen3NextGatedDeltaNet): in_proj_qkvz h x (2 key_dim + 2 value_dim), in_proj_ba h x 2 v_heads, a
depthwise causal conv of `linear_conv_kernel_dim` taps over 2 key_dim + value_dim channels (no bias), dt_bias and
A_log (v_heads each), a gated RMSNorm of head_v_dim and out_proj value_dim x h, where key_dim =
linear_num_key_heads x linear_key_head_dim and value_dim = linear_num_value_heads x linear_value_head_dim. Each
sequence keeps, per linear layer, a v_heads x head_k_dim x head_v_dim state and (kernel - 1) x conv channels. MoE:
`features.qwen_moe` (a gated shared expert). The multi-token-prediction layer is not counted.
"""

from __future__ import annotations

from typing import Any

from flopwise.specs.hf.decoder import build_model
from flopwise.specs.hf.features import gqa, kinds_from_layer_types, layers, qwen_moe
from flopwise.specs.hf.fields import Fields
from flopwise.specs.model import AttentionSpec, LinearStateSpec, ModelSpec

__all__ = ["FAMILIES", "gated_deltanet"]


def gated_deltanet(f: Fields) -> LinearStateSpec:
    h = f.int("hidden_size")
    kh, kd = f.int("linear_num_key_heads"), f.int("linear_key_head_dim")
    vh, vd = f.int("linear_num_value_heads"), f.int("linear_value_head_dim")
    kernel = f.int("linear_conv_kernel_dim", default=4)
    key_dim, value_dim = kh * kd, vh * vd
    conv = 2 * key_dim + value_dim
    params = h * (2 * key_dim + 2 * value_dim) + h * 2 * vh + conv * kernel + 2 * vh + vd + value_dim * h
    state_bpe = 4.0 if str(f.get("mamba_ssm_dtype", "")).endswith("float32") else 2.0
    return LinearStateSpec(kind="gated_deltanet", num_heads=vh, key_dim=kd, value_dim=vd, conv_channels=conv,
                           conv_kernel=kernel, params=params, state_bytes_per_element=state_bpe)


def _read(f: Fields) -> ModelSpec:
    n = f.int("num_layers")
    kinds = kinds_from_layer_types(f, n, None)
    if kinds is None:
        interval = f.int("full_attention_interval", default=4)
        kinds = tuple("full" if (i + 1) % interval == 0 else "linear" for i in range(n))
    full = gqa(f, qk_norm="head", output_gate=f.bool("attn_output_gate", True), qkv_bias=f.bool("attention_bias"))
    linear = AttentionSpec(kind="linear", linear=gated_deltanet(f))
    return build_model(f, layers([full if k == "full" else linear for k in kinds], qwen_moe(f, n)),
                       notes=("the checkpoint's multi-token-prediction weights (mtp.*) are not counted",))


FAMILIES: tuple[dict[str, Any], ...] = (
    dict(name="qwen3-next", architectures=("Qwen3NextForCausalLM",), model_types=("qwen3_next",), read=_read,
         signature=("linear_num_value_heads", "linear_key_head_dim", "full_attention_interval",
                    "linear_conv_kernel_dim"),
         description="Qwen3-Next: Gated DeltaNet linear layers (fixed state) + gated full attention, sparse MoE"),
)
