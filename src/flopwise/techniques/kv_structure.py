"""Attention/KV-structure what-ifs: how many bytes each token leaves in the cache, and the concurrency that buys.

KV bytes per token and layer (per GPU before tensor parallelism; `cost/attention.py` holds the formulas):

    MHA    2 * heads * head_dim * bytes            (Vaswani et al. 2017)
    GQA    2 * kv_heads * head_dim * bytes         (Ainslie et al. 2023; MQA: kv_heads = 1, Shazeer 2019)
    MLA    (kv_lora_rank + rope_dim) * bytes       (DeepSeek-V2, 2024: one shared latent per token)
    sliding window w: at most w tokens per layer are kept (Mistral 7B; Gemma 2 alternates window/full)

None of these change FLOPs much (attention FLOPs depend on query heads, not KV heads); they change KV bytes
read per decode step and how many sequences fit. They are properties of how a model was trained: turning an MHA
model into GQA needs uptraining (~5% of pretraining compute, Ainslie et al. 2023), MLA needs conversion and
fine-tuning (MHA2MLA, Ji et al. 2025), and a window imposed on a full-attention model loses long-range recall
(StreamingLLM, Xiao et al. 2024). They are what-ifs for choosing a model, not switches on a deployment.

The MLA variant of a non-MLA model uses DeepSeek-V2's proportions: latent = 4 * head_dim, decoupled RoPE key =
head_dim / 2 (DeepSeek-V2: 512 and 64 for head_dim 128).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from flopwise.cost.memory import max_sequences, memory_plan
from flopwise.errors import SpecError
from flopwise.specs.deployment import Deployment
from flopwise.specs.model import AttentionSpec, MLASpec, ModelSpec
from flopwise.techniques.scenario import Scenario, rebuild

__all__ = ["kv_bytes_per_token", "with_kv_heads", "with_window", "with_mla", "AttentionVariant",
           "attention_variants"]


def kv_bytes_per_token(dep: Deployment) -> float:
    """KV bytes one token holds on one GPU, over the layers that GPU serves (no window reached)."""
    return memory_plan(dep).block_bytes / dep.block_size


def _kv_heads_model(m: ModelSpec, n: int) -> ModelSpec:
    if m.mla is not None:
        raise SpecError(f"{m.name} uses MLA (a shared latent, no KV heads); kv-heads=N applies to MHA/GQA models")
    if n < 1 or m.num_heads % n:
        raise SpecError(f"kv-heads={n} must divide {m.name}'s {m.num_heads} attention heads")
    return m.map_attention(lambda a: a if a.kind == "linear" else replace(a, num_kv_heads=n),
                           f"{m.name} [kv_heads={n}]")


def _window_model(m: ModelSpec, w: int) -> ModelSpec:
    if w < 1:
        raise SpecError(f"window must be a positive number of tokens, got {w}")

    def slide(a: AttentionSpec) -> AttentionSpec:
        if a.kind in ("full", "sliding", "chunked"):
            return replace(a, kind="sliding", window=w)
        return a  # MLA, sparse and linear-state layers keep their kind
    return m.map_attention(slide, f"{m.name} [window={w}]")


def _mla_model(m: ModelSpec) -> ModelSpec:
    if m.mla is not None:
        return m
    d = m.head_dim
    mla = MLASpec(q_lora_rank=None, kv_lora_rank=4 * d, qk_nope_head_dim=d, qk_rope_head_dim=d // 2, v_head_dim=d)

    def latent(a: AttentionSpec) -> AttentionSpec:  # windows and chunks stay: the latent replaces K and V only
        if a.kind == "linear":
            return a
        windowed = a.kind in ("sliding", "chunked")
        return AttentionSpec(kind=a.kind if windowed else "mla", num_heads=a.num_heads, num_kv_heads=a.num_heads,
                             head_dim=a.head_dim, window=a.window if windowed else None, mla=mla)
    return m.map_attention(latent, f"{m.name} [MLA]")


def with_kv_heads(scn: Scenario, n: int) -> Scenario:
    return scn.with_deployment(rebuild(scn.deployment, model=_kv_heads_model(scn.deployment.model, n)))


def with_window(scn: Scenario, window: int) -> Scenario:
    return scn.with_deployment(rebuild(scn.deployment, model=_window_model(scn.deployment.model, window)))


def with_mla(scn: Scenario) -> Scenario:
    return scn.with_deployment(rebuild(scn.deployment, model=_mla_model(scn.deployment.model)))


@dataclass(frozen=True, slots=True, kw_only=True)
class AttentionVariant:
    name: str
    kv_bytes_per_token: float  # per GPU
    max_sequences: int  # of `length` tokens
    is_current: bool


def _kind(m: ModelSpec) -> str:
    if m.mla is not None:
        return "MLA"
    if m.num_kv_heads == m.num_heads:
        return "MHA"
    return "MQA" if m.num_kv_heads == 1 else f"GQA-{m.num_kv_heads}"


def attention_variants(dep: Deployment, length: int) -> list[AttentionVariant]:
    """The deployment's model as configured, then its MHA, GQA-8, MQA and MLA versions, side by side."""
    m = dep.model
    models = [m]
    if m.mla is None:
        models += [_kv_heads_model(m, n) for n in (m.num_heads, 8, 1) if m.num_heads % n == 0 and n != m.num_kv_heads]
        models.append(_mla_model(m))
    out = []
    for model in models:
        d = dep if model is m else rebuild(dep, model=model)
        out.append(AttentionVariant(name=_kind(model), kv_bytes_per_token=kv_bytes_per_token(d),
                                    max_sequences=max_sequences(d, length), is_current=model is m))
    return out
