"""Per-GPU sizes of a deployment, computed once and cached: what each operator of each kind of layer multiplies,
stores and reads on one GPU of the tensor-parallel group.

Layers are grouped by their LayerSpec (attention kind x MLP kind); each group's attention sizes come from
`cost/attention.py`. Tensor parallelism (Megatron-LM, Shoeybi et al. 2019): column/row-parallel projections split
q, o and MLP weights by tp; KV heads split by tp while tp <= kv_heads and are replicated beyond (vLLM); MLA's
latent cache and its down-projections are replicated; embeddings and the LM head are vocab-parallel; MoE experts
are sharded by tp (vLLM's default, no expert parallelism). With expert parallelism and data-parallel attention
(`Deployment.dp`, `ep`) every size here is of one GPU of one attention group except the routed experts: E / ep
experts per GPU, each sharded over moe_tp = tp * dp / ep GPUs, so a GPU stores E / (tp * dp) experts' weights;
where ep does not divide E a GPU holds up to ceil(E / ep) (redundant copies fill the rest, as SGLang's EPLB does
for DeepSeek-V3's 256 experts over 72 GPUs: 288 slots, 4 per GPU) and stores that many.
Pipeline parallelism splits layers into pp stages:
memory per GPU shrinks by pp, while one token still passes every layer in sequence. A weight format that covers
only the routed experts (`mxfp4-moe`) stores every other weight in 16-bit.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from functools import lru_cache

from flopwise.cost.attention import AttentionLayout, Span, attention_layout, retention_span, sort_spans
from flopwise.specs.deployment import Deployment
from flopwise.specs.expert_load import ROUTING_SHAPE, routing_shape
from flopwise.specs.model import LayerSpec, ModelSpec, expert_params, mlp_params, router_params, shared_expert_params

__all__ = ["LayerGroup", "CacheLayout", "Layout", "layout"]


@dataclass(frozen=True, slots=True, kw_only=True)
class LayerGroup:
    """`count` layers sharing a LayerSpec, with their per-GPU sizes."""

    count: int
    window: Span  # the BatchShape.attention key of its attention pairs (see cost/attention.py)
    is_moe: bool
    attn: AttentionLayout
    norms: int
    extra_params: float  # per GPU: family-specific weights outside attention and MLP (Gemma 3n)
    dense_mlp_params: float  # per GPU
    dense_inter: float  # per GPU intermediate width
    expert_params: float  # per GPU, one routed expert
    expert_inter: float
    shared_params: float  # per GPU
    shared_inter: float
    router_params: int
    num_experts: int
    experts_per_token: int
    local_experts: float  # routed experts one GPU holds a shard of: E / ep
    grouped_routing: bool  # group-limited top-k routing (MLPSpec.grouped_routing)
    routing_shape: float = ROUTING_SHAPE  # gamma shape of its experts' popularity (`specs.expert_load.routing_shape`)

    @property
    def activation_inter(self) -> float:
        """Intermediate width per token (a MoE layer's k experts and shared experts side by side)."""
        if self.is_moe:
            return self.experts_per_token * self.expert_inter + self.shared_inter
        return self.dense_inter


@dataclass(frozen=True, slots=True, kw_only=True)
class CacheLayout:
    """What one GPU keeps per token and per sequence, over all layers (before pipeline stages split them).
    `spans`: (retention span, layers, bytes per token per layer) for the layers that keep a per-token cache;
    `uniform`: every such layer keeps every token and nothing is kept per sequence, so a sequence of s tokens
    holds exactly ceil(s / block_size) blocks."""

    bytes_per_token: float
    bytes_per_token_by_kind: tuple[tuple[str, float], ...]
    spans: tuple[tuple[Span, int, float], ...]
    state_bytes: float
    uniform: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class Layout:
    groups: tuple[LayerGroup, ...]
    windows: tuple[Span, ...]  # every span a step's BatchShape must carry
    weight_bytes_per_param: float  # routed experts (all weights unless the format covers experts only)
    dense_weight_bytes_per_param: float  # attention, dense MLPs, shared experts, router
    attn_weight_bytes_per_param: float  # the attention projections (16-bit where the format leaves them so)
    embed_bytes_per_param: float
    act_bytes: int
    embed_params: float  # per GPU
    lm_head_params: float  # per GPU (tied heads still run a GEMM with the embedding matrix)
    hidden: int
    vocab_per_gpu: float
    weight_bytes_per_gpu: float  # all weights one GPU stores (layers / pp; under pp, the busier end stage's)
    cache: CacheLayout

    @property
    def kv_bytes_per_token(self) -> float:
        """KV (and index-key) bytes one token leaves on one GPU over every layer."""
        return self.cache.bytes_per_token

    @property
    def num_layers(self) -> int:
        """Decoder layers one step runs on this GPU (its pipeline stage's)."""
        return sum(g.count for g in self.groups)


def _group(m: ModelSpec, layer: LayerSpec, count: int, tp: int, kv_bpe: float, ep: int, moe_tp: int) -> LayerGroup:
    h = m.hidden_size
    a = attention_layout(layer.attention, h, tp, kv_bpe)
    mlp = layer.mlp
    if mlp.is_moe:
        return LayerGroup(count=count, window=a.span, is_moe=True, attn=a, norms=layer.norms,
                          extra_params=layer.extra_params / tp, dense_mlp_params=0.0, dense_inter=0.0,
                          expert_params=expert_params(mlp, h) / moe_tp,
                          expert_inter=mlp.intermediate_size / moe_tp,
                          shared_params=shared_expert_params(mlp, h) / tp,
                          shared_inter=mlp.shared_intermediate_size / tp, router_params=router_params(mlp, h),
                          num_experts=mlp.num_experts, experts_per_token=mlp.experts_per_token,
                          local_experts=mlp.num_experts / ep, grouped_routing=mlp.grouped_routing,
                          routing_shape=routing_shape(m))
    return LayerGroup(count=count, window=a.span, is_moe=False, attn=a, norms=layer.norms,
                      extra_params=layer.extra_params / tp, dense_mlp_params=mlp_params(mlp, h) / tp,
                      dense_inter=mlp.intermediate_size / tp, expert_params=0.0, expert_inter=0.0, shared_params=0.0,
                      shared_inter=0.0, router_params=0, num_experts=0, experts_per_token=0, local_experts=0.0,
                      grouped_routing=False)


def _cache(m: ModelSpec, groups: tuple[LayerGroup, ...], specs: tuple[LayerSpec, ...]) -> CacheLayout:
    per_token = 0.0
    by_kind: dict[str, float] = {}
    spans: dict[tuple[Span, float], int] = {}
    state = 0.0
    for g, spec in zip(groups, specs, strict=True):
        a = g.attn
        b = a.cache_bytes_per_token + a.index_bytes_per_token
        if b:
            per_token += g.count * b
            kind = spec.attention.kind
            by_kind[kind] = by_kind.get(kind, 0.0) + g.count * b
            key = (retention_span(spec.attention), b)
            spans[key] = spans.get(key, 0) + g.count
        state += g.count * a.state_bytes
    span_list = tuple((s, n, b) for (s, b), n in spans.items())
    uniform = state == 0 and all(s is None for s, _, _ in span_list)
    return CacheLayout(bytes_per_token=per_token, bytes_per_token_by_kind=tuple(by_kind.items()), spans=span_list,
                       state_bytes=state, uniform=uniform)


@lru_cache(maxsize=512)
def layout(dep: Deployment) -> Layout:
    m, tp = dep.model, dep.tp
    h = m.hidden_size
    wf = dep.weights
    embed_bpp = wf.embed_bytes_per_weight
    counts = Counter(m.layers)
    specs = tuple(sorted(counts, key=lambda lay: (str((lay.attention.window, lay.mlp.is_moe)), lay.attention.kind)))
    groups = tuple(_group(m, lay, counts[lay], tp, dep.kv.bytes_per_element, dep.ep, dep.moe_tp) for lay in specs)
    spans = [g.window for g in groups if g.attn.has_pairs]
    spans += [None for g in groups if g.attn.index_pair_flops]
    wbpp, dense_bpp = wf.bytes_per_weight, wf.dense_bytes_per_weight
    per_gpu_total = m.total_params - m.embedding_params - m.lm_head_params - m.per_layer_embedding_params
    if wf.experts_only:
        experts = sum(g.count * g.num_experts * g.expert_params * dep.moe_tp for g in groups)
        weight_bytes = ((per_gpu_total - experts) * dense_bpp + experts * wbpp) / tp / dep.pp
    else:
        weight_bytes = (per_gpu_total / tp / dep.pp) * wbpp
    if dep.dp > 1:  # the routed experts span the dp attention groups: 1 / (tp * dp) of them per GPU, not 1 / tp
        experts = sum(g.count * g.num_experts * g.expert_params * dep.moe_tp for g in groups)
        weight_bytes -= experts * wbpp * (1 / tp - 1 / (tp * dep.dp)) / dep.pp
    if dep.ep > 1:  # slots beyond E / ep where ep does not divide E
        weight_bytes += sum(g.count * (math.ceil(g.num_experts / dep.ep) - g.local_experts) * g.expert_params
                            for g in groups if g.is_moe) * wbpp / dep.pp
    ends = m.embedding_params + m.lm_head_params + m.per_layer_embedding_params
    if dep.pp > 1:  # the embeddings sit on the first stage, the LM head on the last (vLLM's PPMissingLayer on the
        # others; a tied head loads its own copy of the embedding there): the busier end stage sizes the GPU
        ends = max(m.embedding_params + m.per_layer_embedding_params, m.lm_head_params or m.embedding_params)
    weight_bytes += ends / tp * embed_bpp
    # KV projections replicated beyond tp > kv_heads store more than 1/tp of the attention weights:
    extra: dict[tuple[float, int], int] = {}
    for g in groups:
        key = (g.attn.params, g.attn.params_full)
        extra[key] = extra.get(key, 0) + g.count
    for (params, full), n in extra.items():
        weight_bytes += n / dep.pp * (params - full / tp) * dense_bpp
    attn_bpp = wf.attention_bytes_per_weight
    if attn_bpp != dense_bpp:  # the attention projections held at their own width (`attention_16bit`)
        weight_bytes += sum(g.count * g.attn.params for g in groups) / dep.pp * (attn_bpp - dense_bpp)
    return Layout(
        groups=groups, windows=sort_spans(spans), weight_bytes_per_param=wbpp, dense_weight_bytes_per_param=dense_bpp,
        attn_weight_bytes_per_param=attn_bpp,
        embed_bytes_per_param=embed_bpp, act_bytes=wf.activation_bytes, embed_params=m.embedding_params / tp,
        lm_head_params=m.vocab_size * h / tp, hidden=h, vocab_per_gpu=m.vocab_size / tp,
        weight_bytes_per_gpu=weight_bytes, cache=_cache(m, groups, specs))
