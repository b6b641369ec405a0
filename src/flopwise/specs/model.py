"""A model's architecture, one `LayerSpec` per decoder layer, with exact parameter counts.

`ModelSpec` is built by one small reader per Hugging Face family (`specs/hf/`, registered by `model_type` and
`architectures`); this module holds only the arithmetic. A layer is an attention kind times an MLP kind:

    attention  full | sliding (window) | chunked (local chunks, Llama 4) | linear (a fixed per-sequence state:
               Gated DeltaNet, Mamba2) | mla (DeepSeek latent) | sparse (MLA over a top-k selected by an indexer,
               DeepSeek-V3.2)
    mlp        dense (gated or not) | moe (routed experts, shared experts, router bias, per layer)

Parameter counts follow the modelling code in `transformers` layer by layer:
- attention: q, k, v, o projections (+ biases, QK norms, sinks, an output gate), MLA low-rank projections and
  norms, a DSA indexer, or a linear-state mixer's projections, convolution and decay parameters;
- MLP: 3·h·i when gated (SwiGLU / GeGLU), 2·h·i otherwise (Falcon); MoE: router h·E (+ E biases), E experts of
  3·h·i_e, shared experts (+ a sigmoid gate h where the family has one);
- norms, family extras per layer (Gemma 3n's AltUp, LAuReL and per-layer-input weights), embeddings (and
  per-layer embedding tables), an untied LM head; encoders in front of the language model (vision, audio) are
  counted apart (`encoder_params`).
`active_params` counts what one token touches: everything except the routed experts it does not use
(the Mixtral convention: embeddings and LM head included).

KV cache elements per token and layer: 2·kv_heads·head_dim (K and V), the MLA latent kv_lora_rank +
qk_rope_head_dim, none for linear-state layers (their state is per sequence, `LinearStateSpec`) and for layers that
reuse an earlier layer's cache. Bytes per GPU, windows, chunks and the DSA index keys: `cost/attention.py`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace

from flopwise.errors import ModelConfigError, WorkloadError

__all__ = ["ATTENTION_KINDS", "MLP_KINDS", "MLASpec", "LinearStateSpec", "IndexerSpec", "AttentionSpec", "MLPSpec",
           "MoESpec", "LayerSpec", "EncoderSpec", "ModelSpec", "attention_params", "mlp_params"]

ATTENTION_KINDS = ("full", "sliding", "chunked", "linear", "mla", "sparse")
MLP_KINDS = ("dense", "moe")


@dataclass(frozen=True, slots=True, kw_only=True)
class MLASpec:
    """Multi-head latent attention (DeepSeek-V2 §2.1): KV cached as a shared latent of kv_lora_rank plus a
    decoupled RoPE key of qk_rope_head_dim per token and layer."""

    q_lora_rank: int | None
    kv_lora_rank: int
    qk_nope_head_dim: int
    qk_rope_head_dim: int
    v_head_dim: int


@dataclass(frozen=True, slots=True, kw_only=True)
class LinearStateSpec:
    """A mixer that keeps a fixed-size state per sequence instead of a growing KV cache.

    Gated DeltaNet (Qwen3-Next; Yang et al. 2024, "Gated Delta Networks"): `num_heads` value heads, each a
    key_dim x value_dim state (head_k_dim x head_v_dim); Mamba2 (Dao & Gu 2024, SSD): `num_heads` SSM heads of
    head_dim x d_state (key_dim = d_state, value_dim = head_dim). Both run a causal depthwise convolution of
    `conv_kernel` taps over `conv_channels` channels first, whose last kernel - 1 inputs are kept too. `params` are
    the mixer's weights (projections, convolution, decay and norm parameters), counted by the family's reader.
    State dtype: the model's 16-bit dtype unless the config asks for fp32 (`mamba_ssm_dtype`), as in vLLM."""

    kind: str  # "gated_deltanet" | "mamba2"
    num_heads: int
    key_dim: int
    value_dim: int
    conv_channels: int
    conv_kernel: int
    params: int
    state_bytes_per_element: float = 2.0
    conv_bytes_per_element: float = 2.0

    @property
    def state_elements(self) -> int:
        return self.num_heads * self.key_dim * self.value_dim

    @property
    def conv_state_elements(self) -> int:
        return (self.conv_kernel - 1) * self.conv_channels

    @property
    def state_bytes(self) -> float:
        """Recurrent plus convolution state one sequence keeps in this layer."""
        return (self.state_elements * self.state_bytes_per_element
                + self.conv_state_elements * self.conv_bytes_per_element)


@dataclass(frozen=True, slots=True, kw_only=True)
class IndexerSpec:
    """DeepSeek Sparse Attention's lightning indexer (DeepSeek-V3.2-Exp): each query scores every cached index key
    with `num_heads` heads of `head_dim` and attends only the `top_k` best; `params` its projections and norm."""

    num_heads: int
    head_dim: int
    top_k: int
    params: int


@dataclass(frozen=True, slots=True, kw_only=True)
class AttentionSpec:
    """One layer's token mixer. `window` is the sliding window (sliding) or the chunk size (chunked); a sliding or
    chunked layer with an `mla` spec caches the latent (the MLA what-if of a windowed model).
    `qk_norm`: None, "head" (one norm of head_dim on q and on k, Qwen3/Gemma 3) or "full" (over the whole q and k
    projections, OLMo 2 / MiniMax-M2). `output_gate`: q_proj also emits a sigmoid gate per channel (Qwen3-Next).
    `shares_kv`: the layer reads an earlier layer's cache and keeps none (Gemma 3n)."""

    kind: str = "full"
    num_heads: int = 0
    num_kv_heads: int = 0
    head_dim: int = 0
    window: int | None = None
    qkv_bias: bool = False
    o_bias: bool = False
    qk_norm: str | None = None
    sinks: bool = False
    output_gate: bool = False
    mla: MLASpec | None = None
    linear: LinearStateSpec | None = None
    indexer: IndexerSpec | None = None
    shares_kv: bool = False

    def __post_init__(self) -> None:
        k = self.kind
        if k not in ATTENTION_KINDS:
            raise ModelConfigError(f"attention kind '{k}' is not one of {', '.join(ATTENTION_KINDS)}")
        if k in ("sliding", "chunked") and not (self.window and self.window > 0):
            raise ModelConfigError(f"{k} attention needs a positive window (chunk) size, got {self.window!r}")
        if k == "linear" and self.linear is None:
            raise ModelConfigError("linear attention needs its LinearStateSpec")
        if k in ("mla", "sparse") and self.mla is None:
            raise ModelConfigError(f"{k} attention needs its MLASpec")
        if k == "sparse" and self.indexer is None:
            raise ModelConfigError("sparse attention needs its IndexerSpec (the indexer that picks the top-k)")
        if k != "linear":
            if self.num_heads <= 0 or self.num_kv_heads <= 0 or self.head_dim <= 0:
                raise ModelConfigError(f"attention heads, KV heads and head_dim must be > 0, got "
                                       f"{self.num_heads}/{self.num_kv_heads} x {self.head_dim}")
            if self.num_heads % self.num_kv_heads:
                raise ModelConfigError(
                    f"num_attention_heads ({self.num_heads}) must be a multiple of num_key_value_heads "
                    f"({self.num_kv_heads})")

    @property
    def q_dim(self) -> int:
        return self.num_heads * self.head_dim

    @property
    def kv_dim(self) -> int:
        return self.num_kv_heads * self.head_dim

    @property
    def cache_elements_per_token(self) -> int:
        """Elements one token leaves in this layer's cache: 2·kv_heads·head_dim (K and V), or the MLA latent
        kv_lora_rank + qk_rope_head_dim (vLLM's MLA layout); none for linear-state and KV-sharing layers.
        (The DSA indexer's keys are counted in bytes in cost/attention.py.)"""
        if self.kind == "linear" or self.shares_kv:
            return 0
        if self.mla is not None:
            return self.mla.kv_lora_rank + self.mla.qk_rope_head_dim
        return 2 * self.kv_dim


@dataclass(frozen=True, slots=True, kw_only=True)
class MLPSpec:
    """One layer's feed-forward block. Dense: `intermediate_size` is its width. MoE: `intermediate_size` is each
    routed expert's width, `shared_intermediate_size` the total width of the always-on shared experts."""

    kind: str = "dense"
    intermediate_size: int = 0
    gated: bool = True
    bias: bool = False
    num_experts: int = 0
    experts_per_token: int = 0
    shared_intermediate_size: int = 0
    shared_gate: bool = False  # a sigmoid gate (h -> 1) scales the shared expert (Qwen2-MoE, Qwen3-Next)
    router_bias: bool = False  # a per-expert routing bias (DeepSeek noaux_tc's e_score_correction_bias, gpt-oss)
    expert_bias: bool = False  # biased expert projections (gpt-oss)
    # group-limited top-k routing (DeepSeek-V2/V3's n_group / topk_group; vLLM's `use_grouped_topk` for the
    # DeepSeek layout, Kimi-K2 and GLM-4.5): its cost per layer is the engine's (KernelFactors.grouped_topk_kernels)
    grouped_routing: bool = False

    def __post_init__(self) -> None:
        if self.kind not in MLP_KINDS:
            raise ModelConfigError(f"MLP kind '{self.kind}' is not one of {', '.join(MLP_KINDS)}")
        if self.intermediate_size <= 0:
            raise ModelConfigError(f"MLP intermediate size must be > 0, got {self.intermediate_size}")
        if self.kind == "moe" and not 0 < self.experts_per_token <= self.num_experts:
            raise ModelConfigError(f"MoE needs 0 < experts per token ({self.experts_per_token}) <= experts "
                                   f"({self.num_experts})")

    @property
    def is_moe(self) -> bool:
        return self.kind == "moe"


@dataclass(frozen=True, slots=True, kw_only=True)
class MoESpec:
    """A summary of a model's (first) MoE layer, for reports."""

    num_experts: int
    experts_per_token: int
    expert_intermediate_size: int
    shared_intermediate_size: int
    expert_bias: bool = False
    router_bias: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class LayerSpec:
    """A decoder layer: its mixer, its MLP, its norms, and family-specific weights outside both."""

    attention: AttentionSpec
    mlp: MLPSpec
    norms: int = 2
    extra_params: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class EncoderSpec:
    """An encoder in front of the language model (a vision tower, an audio encoder). `params` from its config
    (`approximate` when only a published nominal size was available). Where the config fixes the input size:
    `patches_per_item` the positions one item (an image, a tile, a clip) runs through the encoder, `tokens_per_item`
    the language-model tokens it becomes and `flops_per_item` its forward pass (2 FLOPs per weight per position
    plus 4·d per attention pair); None where the resolution is dynamic."""

    modality: str
    name: str
    params: int
    item: str = "image"
    patches_per_item: int | None = None
    tokens_per_item: int | None = None
    flops_per_item: float | None = None
    approximate: bool = False


def attention_params(a: AttentionSpec, h: int) -> int:
    """Weights of one attention block (the formulas in the module docstring)."""
    if a.kind == "linear":
        assert a.linear is not None
        return a.linear.params
    if a.mla is not None:
        m = a.mla
        qk_head = m.qk_nope_head_dim + m.qk_rope_head_dim
        if m.q_lora_rank:
            q = h * m.q_lora_rank + m.q_lora_rank + m.q_lora_rank * a.num_heads * qk_head
        else:
            q = h * a.num_heads * qk_head
        kv = h * (m.kv_lora_rank + m.qk_rope_head_dim) + m.kv_lora_rank
        kv += m.kv_lora_rank * a.num_heads * (m.qk_nope_head_dim + m.v_head_dim)
        n = q + kv + a.num_heads * m.v_head_dim * h
        return n + (a.indexer.params if a.indexer is not None else 0)
    q_out = a.q_dim * (2 if a.output_gate else 1)
    n = h * (q_out + 2 * a.kv_dim) + a.q_dim * h
    if a.qkv_bias:
        n += a.q_dim + 2 * a.kv_dim
    if a.o_bias:
        n += h
    if a.qk_norm == "head":
        n += 2 * a.head_dim
    elif a.qk_norm == "full":
        n += a.q_dim + a.kv_dim
    if a.sinks:
        n += a.num_heads
    return n


def _ffn(h: int, inter: int, gated: bool, bias: bool) -> int:
    n = (3 if gated else 2) * h * inter
    if bias:
        n += (2 * inter if gated else inter) + h
    return n


def expert_params(m: MLPSpec, h: int) -> int:
    """One routed expert (gated; biased for gpt-oss)."""
    n = 3 * h * m.intermediate_size
    if m.expert_bias:
        n += 2 * m.intermediate_size + h
    return n


def shared_expert_params(m: MLPSpec, h: int) -> int:
    if not m.shared_intermediate_size:
        return 0
    return 3 * h * m.shared_intermediate_size + (h if m.shared_gate else 0)


def router_params(m: MLPSpec, h: int) -> int:
    return h * m.num_experts + (m.num_experts if m.router_bias else 0)


def mlp_params(m: MLPSpec, h: int) -> int:
    if m.kind == "dense":
        return _ffn(h, m.intermediate_size, m.gated, m.bias)
    return m.num_experts * expert_params(m, h) + shared_expert_params(m, h) + router_params(m, h)


def _plain(value: object) -> object:
    """A spec as nested tuples of plain values (compared in C, not through generated __eq__ methods)."""
    if hasattr(value, "__dataclass_fields__"):
        return (type(value).__name__, *(_plain(getattr(value, f)) for f in value.__dataclass_fields__))
    if isinstance(value, tuple):
        return tuple(_plain(v) for v in value)
    return value


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class ModelSpec:
    """A decoder-only language model: model-wide sizes plus one LayerSpec per layer.

    `per_layer_embedding_params`: lookup tables beside the token embedding (Gemma 3n's per-layer embeddings),
    stored like embeddings and read one row per token. `extra_params`: model-level weights outside the layers
    (Gemma 3n's AltUp projections). `checkpoint_weights`: the weight format the checkpoint ships in (from its
    `quantization_config`; None: 16-bit), with `checkpoint_note` saying how it was read. `notes`: what the reader
    assumed or did not model. `response_header_tokens`: tokens every response opens with that an OpenAI server's
    chat endpoint streams no text for (its response-format parser consumes them), so a client that times the first
    text sees it that many steps after the first token generated (`sim.request.visible_steps`)."""

    name: str
    family: str
    hidden_size: int
    vocab_size: int
    tie_embeddings: bool
    layers: tuple[LayerSpec, ...]
    norm_has_bias: bool = False
    per_layer_embedding_params: int = 0
    extra_params: int = 0
    encoders: tuple[EncoderSpec, ...] = ()
    checkpoint_weights: str | None = None
    checkpoint_note: str = ""
    max_position_embeddings: int | None = None
    notes: tuple[str, ...] = ()
    response_header_tokens: int = 0
    _key: tuple[object, ...] = field(default=(), init=False, compare=False, repr=False)
    _hash: int = field(default=0, init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        for fname in ("hidden_size", "vocab_size"):
            if getattr(self, fname) <= 0:
                raise ModelConfigError(f"{self.name}: {fname} must be > 0, got {getattr(self, fname)}")
        if not self.layers:
            raise ModelConfigError(f"{self.name}: a model needs at least one layer")
        distinct: dict[LayerSpec, int] = {}  # the layers as a few distinct specs and one index per layer
        order = tuple(distinct.setdefault(lay, len(distinct)) for lay in self.layers)
        layers = (tuple(_plain(lay) for lay in distinct), order)
        key = (self.name, self.family, self.hidden_size, self.vocab_size, self.tie_embeddings, layers,
               self.norm_has_bias, self.per_layer_embedding_params, self.extra_params, _plain(self.encoders),
               self.checkpoint_weights, self.checkpoint_note, self.max_position_embeddings, self.notes,
               self.response_header_tokens)
        object.__setattr__(self, "_key", key)
        object.__setattr__(self, "_hash", hash(key))

    def __hash__(self) -> int:
        """Hashed once (a model keys every cost cache; its layer tuple is long)."""
        return self._hash

    def __eq__(self, other: object) -> bool:
        """Value equality on the spec's plain-value key: cheap for copies of one model (a deployment sent to a
        worker process and back compares equal without walking its layers' specs)."""
        if self is other:
            return True
        if not isinstance(other, ModelSpec) or self._hash != other._hash:
            return NotImplemented if not isinstance(other, ModelSpec) else False
        return self._key == other._key

    # ---- model-wide views -------------------------------------------------------------------------
    @property
    def num_layers(self) -> int:
        return len(self.layers)

    @property
    def primary_attention(self) -> AttentionSpec:
        """The first softmax-attention layer's spec (the model's attention shape); a linear-state-only model's
        first layer."""
        for layer in self.layers:
            if layer.attention.kind != "linear":
                return layer.attention
        return self.layers[0].attention

    @property
    def num_heads(self) -> int:
        return self.primary_attention.num_heads

    @property
    def num_kv_heads(self) -> int:
        return self.primary_attention.num_kv_heads

    @property
    def head_dim(self) -> int:
        return self.primary_attention.head_dim

    @property
    def mla(self) -> MLASpec | None:
        return next((lay.attention.mla for lay in self.layers if lay.attention.mla is not None), None)

    @property
    def moe(self) -> MoESpec | None:
        for lay in self.layers:
            m = lay.mlp
            if m.is_moe:
                return MoESpec(num_experts=m.num_experts, experts_per_token=m.experts_per_token,
                               expert_intermediate_size=m.intermediate_size,
                               shared_intermediate_size=m.shared_intermediate_size, expert_bias=m.expert_bias,
                               router_bias=m.router_bias)
        return None

    @property
    def intermediate_size(self) -> int:
        """The dense MLP width (the first dense layer's; an all-MoE model's expert width)."""
        return next((lay.mlp.intermediate_size for lay in self.layers if not lay.mlp.is_moe),
                    self.layers[0].mlp.intermediate_size)

    @property
    def mlp_gated(self) -> bool:
        return all(lay.mlp.gated for lay in self.layers)

    @property
    def qkv_bias(self) -> bool:
        return self.primary_attention.qkv_bias

    @property
    def qk_norm(self) -> bool:
        return any(lay.attention.qk_norm for lay in self.layers)

    @property
    def norms_per_layer(self) -> int:
        return self.layers[0].norms

    @property
    def attention_kinds(self) -> tuple[str, ...]:
        """Distinct attention kinds, in layer order."""
        return tuple(dict.fromkeys(lay.attention.kind for lay in self.layers))

    @property
    def layer_windows(self) -> tuple[int | None, ...]:
        """Sliding window per layer (None: the layer keeps every token or has no per-token cache)."""
        return tuple(lay.attention.window if lay.attention.kind == "sliding" else None for lay in self.layers)

    @property
    def moe_layers(self) -> tuple[bool, ...]:
        return tuple(lay.mlp.is_moe for lay in self.layers)

    @property
    def num_moe_layers(self) -> int:
        return sum(self.moe_layers)

    def check_context(self, tokens: int, fix: str) -> None:
        """Refuse a request of `tokens` (prompt + output) longer than the model's context, as the engines do
        (vLLM: "the decoder prompt is longer than the maximum model length"); `fix` says what to shorten."""
        ctx = self.max_position_embeddings
        if ctx and tokens > ctx:
            raise WorkloadError(f"a request of {tokens:,} tokens exceeds {self.name}'s context length {ctx:,}; "
                                   f"{fix}")

    def with_layers(self, layers: tuple[LayerSpec, ...], name: str) -> ModelSpec:
        return replace(self, name=name, layers=tuple(layers))

    def map_attention(self, fn: Callable[[AttentionSpec], AttentionSpec], name: str) -> ModelSpec:
        """The model with every layer's attention replaced by fn(attention) (what-if variants)."""
        return self.with_layers(tuple(replace(lay, attention=fn(lay.attention)) for lay in self.layers), name)

    # ---- parameter counts -------------------------------------------------------------------------
    @property
    def norm_params(self) -> int:
        """One norm of the hidden size."""
        return self.hidden_size * (2 if self.norm_has_bias else 1)

    def layer_params(self, layer: LayerSpec) -> int:
        h = self.hidden_size
        return (attention_params(layer.attention, h) + mlp_params(layer.mlp, h) + layer.norms * self.norm_params
                + layer.extra_params)

    def layer_active_params(self, layer: LayerSpec) -> int:
        m = layer.mlp
        if not m.is_moe:
            return self.layer_params(layer)
        return self.layer_params(layer) - (m.num_experts - m.experts_per_token) * expert_params(m, self.hidden_size)

    @property
    def embedding_params(self) -> int:
        return self.vocab_size * self.hidden_size

    @property
    def lm_head_params(self) -> int:
        return 0 if self.tie_embeddings else self.vocab_size * self.hidden_size

    @property
    def total_params(self) -> int:
        """The language model's weights (encoders apart: `encoder_params`)."""
        n = sum(self.layer_params(lay) for lay in self.layers)
        return (n + self.norm_params + self.embedding_params + self.per_layer_embedding_params + self.lm_head_params
                + self.extra_params)

    @property
    def active_params(self) -> int:
        """Parameters one token uses: all but the routed experts it was not sent to."""
        idle = sum(self.layer_params(lay) - self.layer_active_params(lay) for lay in self.layers)
        return self.total_params - idle

    @property
    def active_params_without_embeddings(self) -> int:
        """The convention some model cards use (GLM-4.5, MiniMax-M2): no embedding, per-layer embedding or LM head."""
        return self.active_params - self.embedding_params - self.per_layer_embedding_params - self.lm_head_params

    @property
    def encoder_params(self) -> int:
        return sum(e.params for e in self.encoders)

    @property
    def checkpoint_params(self) -> int:
        """Everything the checkpoint holds that flopwise counts: the language model and its encoders."""
        return self.total_params + self.encoder_params

    # ---- cache ------------------------------------------------------------------------------------
    @property
    def kv_elements_per_token_per_layer(self) -> int:
        """Cache elements per token of one layer of the model's attention shape (`primary_attention`)."""
        return self.primary_attention.cache_elements_per_token

    @property
    def kv_elements_per_token(self) -> int:
        """KV elements one token leaves over all layers, for a context shorter than every window."""
        return sum(lay.attention.cache_elements_per_token for lay in self.layers)

    def kv_elements_for_length(self, length: int) -> int:
        """Elements one sequence of `length` tokens holds: sliding layers keep their window, chunked layers
        their current chunk (at most `window` tokens)."""
        total = 0
        for lay in self.layers:
            a = lay.attention
            kept = length if a.kind not in ("sliding", "chunked") or a.window is None else min(length, a.window)
            total += a.cache_elements_per_token * kept
        return total

    @property
    def state_bytes_per_sequence(self) -> float:
        """Linear-state layers' recurrent and convolution state, one sequence, all layers."""
        return sum(lay.attention.linear.state_bytes for lay in self.layers if lay.attention.linear is not None)

    def summary(self) -> str:
        kind = "MoE" if self.moe else "dense"
        a = self.primary_attention
        if a.mla is not None:
            attn = "MLA" + (" + DSA" if a.indexer is not None else "")
        else:
            attn = ("MHA" if a.num_kv_heads == a.num_heads else ("MQA" if a.num_kv_heads == 1 else "GQA"))
        kinds = "/".join(self.attention_kinds)
        return (f"{self.name}: {self.family}, {kind}, {self.num_layers} layers ({kinds}), hidden {self.hidden_size}, "
                f"{attn} {a.num_heads}/{a.num_kv_heads} heads x {a.head_dim}, "
                f"{self.total_params / 1e9:.2f}B params ({self.active_params / 1e9:.2f}B active)")
