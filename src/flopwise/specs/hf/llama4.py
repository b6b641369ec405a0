"""Llama 4 (Scout, Maverick): `Llama4ForConditionalGeneration`, the text model in text_config.

Attention (transformers Llama4TextAttention, vLLM `use_chunked_local_attn`): layers that use RoPE attend only
within chunks of `attention_chunk_size` tokens (chunked local attention); every `no_rope_layer_interval`-th layer
(4; `no_rope_layers[i] == 0` where the config lists them) uses no RoPE and attends globally. Q/K are L2-normalized
(`use_qk_norm`), a norm without weights. MLP: MoE on layers interleave_moe_layer_step - 1, 2*step - 1, ...
(`moe_layers` where given) with `num_local_experts` experts of intermediate_size, top-`num_experts_per_tok`,
one shared expert as wide and a router without bias; the other layers are dense of `intermediate_size_mlp`.
The vision tower is counted apart (`encoders.llama4_vision`).
"""

from __future__ import annotations

from typing import Any

from flopwise.specs.hf.decoder import build_model
from flopwise.specs.hf.encoders import llama4_vision
from flopwise.specs.hf.features import dense_mlp, gqa, layers, nested_text_config
from flopwise.specs.hf.fields import Fields
from flopwise.specs.model import MLPSpec, ModelSpec

__all__ = ["FAMILIES"]


def _read(f: Fields) -> ModelSpec:
    top = f.raw
    f = Fields(nested_text_config(top), f.name, f.family)
    n = f.int("num_layers")
    chunk = f.optional_int("attention_chunk_size")
    rope = f.int_list("no_rope_layers") or []
    if len(rope) != n:
        interval = f.int("no_rope_layer_interval", default=4)
        rope = [int((i + 1) % interval != 0) for i in range(n)]
    chunked = gqa(f, kind="chunked", window=chunk) if chunk else gqa(f)
    full = gqa(f)
    attn = [chunked if rope[i] else full for i in range(n)]
    step = f.int("interleave_moe_layer_step", default=1)
    moe_idx = set(f.int_list("moe_layers") or range(step - 1, n, step))
    inter = f.int("intermediate_size")
    moe = MLPSpec(kind="moe", intermediate_size=inter, num_experts=f.int("num_local_experts"),
                  experts_per_token=f.int("num_experts_per_tok"), shared_intermediate_size=inter)
    dense = dense_mlp(f, inter=f.int("intermediate_size_mlp", default=inter))
    mlps = [moe if i in moe_idx else dense for i in range(n)]
    return build_model(f, layers(attn, mlps), encoders=llama4_vision(top, f))


FAMILIES: tuple[dict[str, Any], ...] = (
    dict(name="llama4", architectures=("Llama4ForConditionalGeneration", "Llama4ForCausalLM"),
         model_types=("llama4", "llama4_text"), read=_read,
         signature=("attention_chunk_size", "interleave_moe_layer_step", "intermediate_size_mlp", "no_rope_layers"),
         description="Llama 4: chunked local attention with global NoPE layers, interleaved MoE + shared expert"),
)
