"""Encoders in front of a language model (vision towers, an audio encoder): parameter counts from their configs,
and the forward FLOPs of one item where the config fixes its size. flopwise counts these weights apart from the
language model (`ModelSpec.encoder_params`) and does not put them in the memory plan or the step cost; the estimate
reports each encoder's weights and its prefill cost per item.

Counts follow `transformers` (layer by layer, biases and norms included):
- SigLIP (Gemma 3): conv patch embedding (+ bias), learned positions, L x [q,k,v,o + biases, 2 LayerNorms,
  fc1/fc2 + biases], post LayerNorm; Gemma 3's projector (d x text hidden + a norm of d).
- Qwen2.5-VL ViT: Conv3d patch embedding (no bias), L x [2 RMSNorms, fused qkv + bias, proj + bias, gated MLP with
  biases], merger (RMSNorm, Linear(4d, 4d) + bias, Linear(4d, text hidden) + bias).
- Pixtral (Mistral 3): conv patch embedding, ln_pre, L x [2 RMSNorms, q,k,v,o, gated MLP], projector (RMSNorm,
  patch merger Linear(4d, d), Linear(d, text) and Linear(text, text) with `multimodal_projector_bias`).
- Llama 4 vision: unfold patch embedding, class embedding, positions, 2 LayerNorms, L x [q,k,v,o + biases,
  fc1/fc2 + biases, 2 LayerNorms], pixel-shuffle MLP (intermediate x projector_input, projector_output^2), the
  projector to the text hidden size.
- Gemma 3n: the MobileNet-v5 tower is a timm model named in the config; its size comes from the name (e.g.
  `mobilenetv5_300m_enc`: 300M, approximate). The USM conformer audio encoder: subsampling convs and projection,
  L x [2 macaron FFNs (4x), attention (q,k,v, relative positions, post), light conv (start 2x, depthwise, end),
  norms]; each modality's embedder (a 128-row table, norms, a projection to the text hidden size).

FLOPs per item: 2 x (weights the positions multiply) x positions + 4 x d x positions^2 x layers (full attention
over the item's patches; windowed towers attend less, so this is an upper bound for Qwen2.5-VL).
"""

from __future__ import annotations

import re
from typing import Any

from flopwise.specs.hf.fields import Fields
from flopwise.specs.model import EncoderSpec

__all__ = ["siglip_vision", "qwen2_5_vl_vision", "pixtral_vision", "llama4_vision", "gemma3n_encoders"]


def _vit_flops(block_params: int, layers: int, d: int, positions: int) -> float:
    return 2.0 * block_params * positions + 4.0 * d * positions * positions * layers


def siglip_vision(raw: dict[str, Any], f: Fields) -> tuple[EncoderSpec, ...]:
    v = raw.get("vision_config")
    if not isinstance(v, dict):
        return ()
    d, i, L = v.get("hidden_size", 768), v.get("intermediate_size", 3072), v.get("num_hidden_layers", 12)
    p, img, c = v.get("patch_size", 16), v.get("image_size", 224), v.get("num_channels", 3)
    patches = (img // p) ** 2
    layer = 4 * (d * d + d) + 4 * d + (d * i + i) + (i * d + d)
    n = c * p * p * d + d + patches * d + L * layer + 2 * d
    if v.get("vision_use_head", True):
        n += d + 3 * d * d + 3 * d + d * d + d + 2 * d + (d * i + i) + (i * d + d)
    n += d * f.int("hidden_size") + d  # Gemma 3 multi_modal_projector: input projection and soft-embedding norm
    return (EncoderSpec(modality="vision", name="SigLIP", params=n, patches_per_item=patches,
                        tokens_per_item=raw.get("mm_tokens_per_image"), flops_per_item=_vit_flops(L * layer, L, d,
                                                                                                  patches)),)


def qwen2_5_vl_vision(raw: dict[str, Any], f: Fields) -> tuple[EncoderSpec, ...]:
    v = raw.get("vision_config")
    if not isinstance(v, dict):
        return ()
    d, i, L = v["hidden_size"], v["intermediate_size"], v["depth"]
    p, t, c = v.get("patch_size", 14), v.get("temporal_patch_size", 2), v.get("in_chans", v.get("in_channels", 3))
    m2 = v.get("spatial_merge_size", 2) ** 2
    out = v.get("out_hidden_size", f.int("hidden_size"))
    block = 2 * d + (3 * d * d + 3 * d) + (d * d + d) + 2 * (d * i + i) + (i * d + d)
    merger = d + (d * m2 * d * m2 + d * m2) + (d * m2 * out + out)
    n = c * t * p * p * d + L * block + merger
    return (EncoderSpec(modality="vision", name="Qwen2.5-VL ViT", params=n),)


def pixtral_vision(raw: dict[str, Any], f: Fields) -> tuple[EncoderSpec, ...]:
    v = raw.get("vision_config")
    if not isinstance(v, dict):
        return ()
    d, i, L = v["hidden_size"], v["intermediate_size"], v["num_hidden_layers"]
    p, c = v.get("patch_size", 14), v.get("num_channels", 3)
    s2 = raw.get("spatial_merge_size", 2) ** 2
    text = f.int("hidden_size")
    bias = bool(raw.get("multimodal_projector_bias", False))
    block = 4 * d * d + 3 * d * i + 2 * d
    projector = d + d * s2 * d + (d * text + (text if bias else 0)) + (text * text + (text if bias else 0))
    n = c * p * p * d + d + L * block + projector
    return (EncoderSpec(modality="vision", name="Pixtral", params=n),)


def llama4_vision(raw: dict[str, Any], f: Fields) -> tuple[EncoderSpec, ...]:
    v = raw.get("vision_config")
    if not isinstance(v, dict):
        return ()
    d, i, L = v["hidden_size"], v["intermediate_size"], v["num_hidden_layers"]
    p, img, c = v["patch_size"], v["image_size"], v.get("num_channels", 3)
    patches = (img // p) ** 2
    layer = 4 * (d * d + d) + (d * i + i) + (i * d + d) + 4 * d
    adapter = i * v["projector_input_dim"] + v["projector_output_dim"] ** 2
    n = (c * p * p * d + d + (patches + 1) * d + 4 * d + L * layer + adapter
         + v["vision_output_dim"] * f.int("hidden_size"))
    ratio = v.get("pixel_shuffle_ratio", 0.5)
    return (EncoderSpec(modality="vision", name="Llama 4 vision", params=n, item="336px tile",
                        patches_per_item=patches + 1, tokens_per_item=int(patches * ratio * ratio),
                        flops_per_item=_vit_flops(L * layer, L, d, patches + 1)),)


def _conformer(a: dict[str, Any]) -> int:
    d, L = a.get("hidden_size", 1536), a.get("conf_num_hidden_layers", 12)
    k = a.get("conf_conv_kernel_size", 5)
    ch = a.get("sscp_conv_channel_size", [128, 32])
    ks = a.get("sscp_conv_kernel_size", [[3, 3], [3, 3]])
    strides = a.get("sscp_conv_stride_size", [[2, 2], [2, 2]])
    feat = a.get("input_feat_size", 128)
    for s in strides:
        feat = -(-feat // s[1])
    sub = ch[0] * ks[0][0] * ks[0][1] + ch[0] + ch[1] * ch[0] * ks[1][0] * ks[1][1] + ch[1] + ch[1] * feat * d
    heads = a.get("conf_num_attention_heads", 8)
    ffn = 2 * d + 2 * 4 * d * d  # pre/post norms, up 4x and down
    attn = 2 * d + 3 * d * d + d * d + d * d + d // heads  # norms, q/k/v, relative positions, post, per-dim scale
    lconv = 2 * d + 2 * d * d + d * k + d * d  # norms, linear_start (2x, GLU), depthwise, linear_end
    params: int = sub + L * (2 * ffn + attn + lconv + d)  # the raw config's integers (read unvalidated)
    return params


def gemma3n_encoders(raw: dict[str, Any], f: Fields) -> tuple[EncoderSpec, ...]:
    out = []
    text = f.int("hidden_size")
    v = raw.get("vision_config")
    if isinstance(v, dict):
        arch = str(v.get("architecture", ""))
        size = re.search(r"_(\d+)m_", arch + "_")
        if size:
            vd = v.get("hidden_size", 2048)
            embedder = v.get("vocab_size", 128) * vd + 2 * vd + vd * text
            out.append(EncoderSpec(modality="vision", name=f"timm {arch}", params=int(size.group(1)) * 10**6 + embedder,
                                   tokens_per_item=raw.get("vision_soft_tokens_per_image"), approximate=True))
    a = raw.get("audio_config")
    if isinstance(a, dict):
        ad = a.get("hidden_size", 1536)
        embedder = a.get("vocab_size", 128) * ad + 2 * ad + ad * text
        out.append(EncoderSpec(modality="audio", name="USM conformer", params=_conformer(a) + embedder, item="clip",
                               tokens_per_item=raw.get("audio_soft_tokens_per_image")))
    return tuple(out)
