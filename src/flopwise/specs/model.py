"""Model architecture read from a Hugging Face `config.json`, with exact parameter counts.

Supported families (by `architectures[0]` / `model_type`): Llama 2/3.x (and Vicuna), Mistral, Mixtral, Qwen2/2.5
(and Qwen1.5), Qwen3, Qwen3-MoE, Gemma 2/3, Phi-3, Falcon, DeepSeek-V2/V3 (MLA + MoE), gpt-oss.

Parameter counts follow the modelling code in `transformers` layer by layer:
- attention: q, k, v, o projections (+ biases where the family has them), MLA low-rank projections and norms;
- MLP: 3·h·i when gated (SwiGLU / GeGLU), 2·h·i otherwise (Falcon);
- MoE: router h·E, E experts of 3·h·i_e, shared experts, dense first layers;
- norms, embeddings, and an untied LM head.
`active_params` counts what one token touches: everything except the routed experts it does not use
(the Mixtral convention: embeddings and LM head included).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from flopwise.errors import ModelConfigError

__all__ = ["MLASpec", "MoESpec", "ModelSpec", "SUPPORTED_FAMILIES", "parse_config", "load_config_file"]


@dataclass(frozen=True, slots=True)
class MLASpec:
    """Multi-head latent attention (DeepSeek-V2 §2.1): KV cached as a shared latent of kv_lora_rank plus a
    decoupled RoPE key of qk_rope_head_dim per token and layer."""

    q_lora_rank: int | None
    kv_lora_rank: int
    qk_nope_head_dim: int
    qk_rope_head_dim: int
    v_head_dim: int


@dataclass(frozen=True, slots=True)
class MoESpec:
    num_experts: int
    experts_per_token: int
    expert_intermediate_size: int
    shared_intermediate_size: int  # total width of always-on shared experts (0 if none)
    expert_bias: bool = False  # gpt-oss experts carry biases
    router_bias: bool = False


@dataclass(frozen=True, slots=True)
class ModelSpec:
    """A decoder-only transformer. `layer_windows[i]` is the attention window of layer i (None = full
    causal attention); `moe_layers[i]` says whether layer i's MLP is a mixture of experts."""

    name: str
    family: str
    hidden_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    intermediate_size: int
    vocab_size: int
    tie_embeddings: bool
    mlp_gated: bool = True
    qkv_bias: bool = False
    o_bias: bool = False
    mlp_bias: bool = False
    norm_has_bias: bool = False
    norms_per_layer: int = 2
    qk_norm: bool = False
    attention_sinks: bool = False
    layer_windows: tuple[int | None, ...] = ()
    moe_layers: tuple[bool, ...] = ()
    mla: MLASpec | None = None
    moe: MoESpec | None = None
    max_position_embeddings: int | None = None

    def __post_init__(self) -> None:
        for fname in ("hidden_size", "num_layers", "num_heads", "num_kv_heads", "head_dim", "vocab_size"):
            if getattr(self, fname) <= 0:
                raise ModelConfigError(f"{self.name}: {fname} must be > 0, got {getattr(self, fname)}")
        if self.num_heads % self.num_kv_heads:
            raise ModelConfigError(
                f"{self.name}: num_attention_heads ({self.num_heads}) must be a multiple of "
                f"num_key_value_heads ({self.num_kv_heads})")
        if not self.layer_windows:
            object.__setattr__(self, "layer_windows", (None,) * self.num_layers)
        if not self.moe_layers:
            object.__setattr__(self, "moe_layers", (self.moe is not None,) * self.num_layers)
        if len(self.layer_windows) != self.num_layers or len(self.moe_layers) != self.num_layers:
            raise ModelConfigError(f"{self.name}: per-layer lists must have num_hidden_layers={self.num_layers} entries")

    # ---- per-layer parameter counts -------------------------------------------------------------
    @property
    def q_dim(self) -> int:
        return self.num_heads * self.head_dim

    @property
    def kv_dim(self) -> int:
        return self.num_kv_heads * self.head_dim

    @property
    def attention_params(self) -> int:
        """Projection weights (+ biases, QK norms, sinks) of one attention block."""
        h = self.hidden_size
        if self.mla is not None:
            m = self.mla
            qk_head = m.qk_nope_head_dim + m.qk_rope_head_dim
            if m.q_lora_rank:
                q = h * m.q_lora_rank + m.q_lora_rank + m.q_lora_rank * self.num_heads * qk_head
            else:
                q = h * self.num_heads * qk_head
            kv = h * (m.kv_lora_rank + m.qk_rope_head_dim) + m.kv_lora_rank
            kv += m.kv_lora_rank * self.num_heads * (m.qk_nope_head_dim + m.v_head_dim)
            return q + kv + self.num_heads * m.v_head_dim * h
        n = h * (self.q_dim + 2 * self.kv_dim) + self.q_dim * h
        if self.qkv_bias:
            n += self.q_dim + 2 * self.kv_dim
        if self.o_bias:
            n += h
        if self.qk_norm:
            n += 2 * self.head_dim
        if self.attention_sinks:
            n += self.num_heads
        return n

    @property
    def mla_up_params(self) -> int:
        """MLA kv_b_proj: the latent-to-heads up-projection (absorbed into attention at decode)."""
        if self.mla is None:
            return 0
        m = self.mla
        return m.kv_lora_rank * self.num_heads * (m.qk_nope_head_dim + m.v_head_dim)

    def _mlp(self, inter: int) -> int:
        n = (3 if self.mlp_gated else 2) * self.hidden_size * inter
        if self.mlp_bias:
            n += (2 * inter if self.mlp_gated else inter) + self.hidden_size
        return n

    @property
    def dense_mlp_params(self) -> int:
        return self._mlp(self.intermediate_size)

    @property
    def expert_params(self) -> int:
        """One routed expert."""
        assert self.moe is not None
        n = 3 * self.hidden_size * self.moe.expert_intermediate_size
        if self.moe.expert_bias:
            n += 2 * self.moe.expert_intermediate_size + self.hidden_size
        return n

    @property
    def shared_expert_params(self) -> int:
        if self.moe is None or not self.moe.shared_intermediate_size:
            return 0
        return 3 * self.hidden_size * self.moe.shared_intermediate_size

    @property
    def router_params(self) -> int:
        if self.moe is None:
            return 0
        return self.hidden_size * self.moe.num_experts + (self.moe.num_experts if self.moe.router_bias else 0)

    @property
    def norm_params_per_layer(self) -> int:
        return self.norms_per_layer * self.hidden_size * (2 if self.norm_has_bias else 1)

    @property
    def embedding_params(self) -> int:
        return self.vocab_size * self.hidden_size

    @property
    def lm_head_params(self) -> int:
        return 0 if self.tie_embeddings else self.vocab_size * self.hidden_size

    @property
    def num_moe_layers(self) -> int:
        return sum(self.moe_layers)

    # ---- totals ---------------------------------------------------------------------------------
    @property
    def total_params(self) -> int:
        n_moe = self.num_moe_layers
        n_dense = self.num_layers - n_moe
        per_layer = self.attention_params + self.norm_params_per_layer
        n = self.num_layers * per_layer + n_dense * self.dense_mlp_params
        if self.moe is not None:
            n += n_moe * (self.moe.num_experts * self.expert_params + self.shared_expert_params + self.router_params)
        final_norm = self.hidden_size * (2 if self.norm_has_bias else 1)
        return n + final_norm + self.embedding_params + self.lm_head_params

    @property
    def active_params(self) -> int:
        """Parameters one token uses: all but the routed experts it was not sent to."""
        if self.moe is None:
            return self.total_params
        idle = self.moe.num_experts - self.moe.experts_per_token
        return self.total_params - self.num_moe_layers * idle * self.expert_params

    # ---- KV cache -------------------------------------------------------------------------------
    @property
    def kv_elements_per_token_per_layer(self) -> int:
        """Cached elements per token and layer: 2·kv_heads·head_dim (K and V), or the MLA latent
        kv_lora_rank + qk_rope_head_dim (vLLM's MLA cache layout)."""
        if self.mla is not None:
            return self.mla.kv_lora_rank + self.mla.qk_rope_head_dim
        return 2 * self.kv_dim

    @property
    def kv_elements_per_token(self) -> int:
        """Over all layers, for a context shorter than every window."""
        return self.num_layers * self.kv_elements_per_token_per_layer

    def kv_elements_for_length(self, length: int) -> int:
        """Elements one sequence of `length` tokens holds: sliding-window layers keep only their window."""
        per = self.kv_elements_per_token_per_layer
        return sum(per * (length if w is None else min(length, w)) for w in self.layer_windows)

    def summary(self) -> str:
        kind = "MoE" if self.moe else "dense"
        attn = "MLA" if self.mla else ("MHA" if self.num_kv_heads == self.num_heads else
                                      ("MQA" if self.num_kv_heads == 1 else "GQA"))
        return (f"{self.name}: {self.family}, {kind}, {self.num_layers} layers, hidden {self.hidden_size}, "
                f"{attn} {self.num_heads}/{self.num_kv_heads} heads x {self.head_dim}, "
                f"{self.total_params / 1e9:.2f}B params ({self.active_params / 1e9:.2f}B active)")


# ================================================================================================
# config.json parsing
# ================================================================================================

SUPPORTED_FAMILIES = ("llama", "mistral", "mixtral", "qwen2", "qwen3", "qwen3-moe", "gemma2", "gemma3",
                      "phi3", "falcon", "deepseek", "gpt-oss")

_ARCH_TO_FAMILY = {
    "LlamaForCausalLM": "llama", "MistralForCausalLM": "mistral", "MixtralForCausalLM": "mixtral",
    "Qwen2ForCausalLM": "qwen2", "Qwen3ForCausalLM": "qwen3", "Qwen3MoeForCausalLM": "qwen3-moe",
    "Gemma2ForCausalLM": "gemma2", "Gemma3ForCausalLM": "gemma3", "Gemma3ForConditionalGeneration": "gemma3",
    "Phi3ForCausalLM": "phi3", "FalconForCausalLM": "falcon", "RWForCausalLM": "falcon",
    "DeepseekV2ForCausalLM": "deepseek", "DeepseekV3ForCausalLM": "deepseek", "GptOssForCausalLM": "gpt-oss",
}
_MODEL_TYPE_TO_FAMILY = {
    "llama": "llama", "mistral": "mistral", "mixtral": "mixtral", "qwen2": "qwen2", "qwen3": "qwen3",
    "qwen3_moe": "qwen3-moe", "gemma2": "gemma2", "gemma3": "gemma3", "gemma3_text": "gemma3", "phi3": "phi3",
    "falcon": "falcon", "RefinedWeb": "falcon", "RefinedWebModel": "falcon", "deepseek_v2": "deepseek",
    "deepseek_v3": "deepseek", "gpt_oss": "gpt-oss",
}


class _Cfg:
    """Typed access to config fields with errors that name the missing field."""

    def __init__(self, raw: dict[str, Any], name: str, family: str):
        self.raw, self.name, self.family = raw, name, family

    def get(self, *keys: str, default: Any = None) -> Any:
        for k in keys:
            if k in self.raw and self.raw[k] is not None:
                return self.raw[k]
        return default

    def int(self, *keys: str, default: int | None = None) -> int:
        v = self.get(*keys)
        if v is None:
            if default is not None:
                return default
            raise ModelConfigError(
                f"{self.name}: config.json ({self.family}) is missing required field '{keys[0]}'"
                + (f" (also looked for {', '.join(keys[1:])})" if len(keys) > 1 else ""))
        if isinstance(v, bool) or not isinstance(v, int | float) or int(v) != v:
            raise ModelConfigError(f"{self.name}: config.json field '{keys[0]}' must be an integer, got {v!r}")
        return int(v)


def _family(raw: dict[str, Any], name: str) -> str:
    archs = raw.get("architectures") or []
    for a in archs:
        if a in _ARCH_TO_FAMILY:
            return _ARCH_TO_FAMILY[a]
    mt = raw.get("model_type")
    if mt in _MODEL_TYPE_TO_FAMILY:
        return _MODEL_TYPE_TO_FAMILY[mt]
    seen = f"architectures={archs!r}, model_type={mt!r}"
    raise ModelConfigError(
        f"{name}: unsupported architecture ({seen}). Supported families: {', '.join(SUPPORTED_FAMILIES)}.")


def _windows_from_layer_types(cfg: _Cfg, n_layers: int, window: int | None) -> tuple[int | None, ...] | None:
    types = cfg.get("layer_types")
    if not types:
        return None
    if len(types) != n_layers:
        raise ModelConfigError(f"{cfg.name}: layer_types has {len(types)} entries, num_hidden_layers is {n_layers}")
    if window is None and any(t == "sliding_attention" for t in types):
        raise ModelConfigError(f"{cfg.name}: layer_types has sliding_attention layers but no 'sliding_window'")
    return tuple(window if t == "sliding_attention" else None for t in types)


def parse_config(raw: dict[str, Any], name: str = "model") -> ModelSpec:
    """Build a ModelSpec from the dict of a Hugging Face config.json."""
    if not isinstance(raw, dict):
        raise ModelConfigError(f"{name}: config.json must be a JSON object, got {type(raw).__name__}")
    family = _family(raw, name)
    if family == "gemma3" and isinstance(raw.get("text_config"), dict):
        # Multimodal Gemma 3 nests the language model; its text_config omits fields equal to the
        # Gemma3TextConfig defaults (transformers): vocab 262208, 131072 positions, pattern 6.
        raw = {"vocab_size": 262208, "max_position_embeddings": 131072, "sliding_window_pattern": 6,
               **raw["text_config"], "architectures": raw.get("architectures")}
    c = _Cfg(raw, name, family)

    h = c.int("hidden_size", "n_embd", "d_model")
    n_layers = c.int("num_hidden_layers", "n_layer", "num_layers")
    n_heads = c.int("num_attention_heads", "n_head")
    n_kv = c.int("num_key_value_heads", "num_kv_heads", "n_head_kv", default=n_heads)
    head_dim = c.int("head_dim", default=h // n_heads)  # an explicit head_dim wins over hidden/heads
    vocab = c.int("vocab_size")
    tie = bool(c.get("tie_word_embeddings", default=False))
    kw: dict[str, Any] = {}
    window = c.get("sliding_window")
    windows: tuple[int | None, ...] | None = None

    if family in ("llama", "mistral", "mixtral", "qwen2", "qwen3", "qwen3-moe", "phi3"):
        inter = c.int("intermediate_size")
        bias = bool(c.get("attention_bias", default=False))
        kw.update(qkv_bias=bias or family == "qwen2", o_bias=bias, mlp_bias=bool(c.get("mlp_bias", default=False)),
                  qk_norm=family in ("qwen3", "qwen3-moe"))
        if family == "qwen2" or family.startswith("qwen3"):
            if not c.get("use_sliding_window", default=False):
                window = None
        windows = _windows_from_layer_types(c, n_layers, window)
        if windows is None and window:
            if family.startswith("qwen"):
                max_win = c.int("max_window_layers", default=n_layers)
                windows = tuple(window if i >= max_win else None for i in range(n_layers))
            else:
                windows = (int(window),) * n_layers
        if family == "mixtral":
            kw["moe"] = MoESpec(c.int("num_local_experts"), c.int("num_experts_per_tok"), inter, 0)
        elif family == "qwen3-moe":
            e = c.int("num_experts")
            kw["moe"] = MoESpec(e, c.int("num_experts_per_tok"), c.int("moe_intermediate_size"),
                                c.int("shared_expert_intermediate_size", default=0))
            step = c.int("decoder_sparse_step", default=1)
            dense_only = set(c.get("mlp_only_layers", default=[]) or [])
            kw["moe_layers"] = tuple(i not in dense_only and (i + 1) % step == 0 for i in range(n_layers))
    elif family in ("gemma2", "gemma3"):
        inter = c.int("intermediate_size")
        tie = bool(c.get("tie_word_embeddings", default=True))
        kw.update(norms_per_layer=4, qk_norm=family == "gemma3",
                  qkv_bias=bool(c.get("attention_bias", default=False)),
                  o_bias=bool(c.get("attention_bias", default=False)))
        if window is None:
            raise ModelConfigError(f"{name}: config.json ({family}) is missing required field 'sliding_window'")
        windows = _windows_from_layer_types(c, n_layers, int(window))
        if windows is None:
            if family == "gemma2":  # even layers slide (transformers Gemma2DecoderLayer: not layer_idx % 2)
                windows = tuple(int(window) if i % 2 == 0 else None for i in range(n_layers))
            else:  # every `sliding_window_pattern`-th layer is global
                pattern = c.int("sliding_window_pattern", default=6)
                windows = tuple(None if (i + 1) % pattern == 0 else int(window) for i in range(n_layers))
    elif family == "falcon":
        inter = c.int("ffn_hidden_size", default=4 * h)
        new_arch = bool(c.get("new_decoder_architecture", default=False))
        if not new_arch and c.get("multi_query", default=True) and "num_kv_heads" not in raw and "n_head_kv" not in raw:
            n_kv = 1
        bias = bool(c.get("bias", default=False))
        kw.update(mlp_gated=False, qkv_bias=bias, o_bias=bias, mlp_bias=bias, norm_has_bias=True,
                  norms_per_layer=2 if new_arch or not c.get("parallel_attn", default=True) else 1)
        tie = bool(c.get("tie_word_embeddings", default=True))
    elif family == "deepseek":
        inter = c.int("intermediate_size")
        mla = MLASpec(c.get("q_lora_rank"), c.int("kv_lora_rank"), c.int("qk_nope_head_dim"),
                      c.int("qk_rope_head_dim"), c.int("v_head_dim"))
        head_dim = mla.qk_nope_head_dim + mla.qk_rope_head_dim
        n_kv = n_heads  # MLA: every head reads the shared latent; KV size comes from the latent
        shared = c.int("n_shared_experts", default=0) * c.int("moe_intermediate_size")
        kw["mla"] = mla
        kw["moe"] = MoESpec(c.int("n_routed_experts"), c.int("num_experts_per_tok"), c.int("moe_intermediate_size"),
                            shared, router_bias=c.get("topk_method") == "noaux_tc")
        first_dense = c.int("first_k_dense_replace", default=0)
        freq = c.int("moe_layer_freq", default=1)
        kw["moe_layers"] = tuple(i >= first_dense and i % freq == 0 for i in range(n_layers))
    elif family == "gpt-oss":
        inter = c.int("intermediate_size")
        kw["moe"] = MoESpec(c.int("num_local_experts", "num_experts"), c.int("num_experts_per_tok", "experts_per_token"),
                            inter, 0, expert_bias=True, router_bias=True)
        kw.update(qkv_bias=bool(c.get("attention_bias", default=True)), o_bias=bool(c.get("attention_bias", default=True)),
                  attention_sinks=True)
        windows = _windows_from_layer_types(c, n_layers, int(window) if window else None)
        if windows is None and window:  # alternating, sliding first (gpt-oss reference)
            windows = tuple(int(window) if i % 2 == 0 else None for i in range(n_layers))
    else:  # pragma: no cover - _family() only returns supported names
        raise ModelConfigError(f"{name}: family {family} has no parser")

    if windows is not None:
        kw["layer_windows"] = windows
    return ModelSpec(
        name=name, family=family, hidden_size=h, num_layers=n_layers, num_heads=n_heads, num_kv_heads=n_kv,
        head_dim=head_dim, intermediate_size=inter, vocab_size=vocab, tie_embeddings=tie,
        max_position_embeddings=c.get("max_position_embeddings"), **kw)


def load_config_file(path: str | Path, name: str | None = None) -> ModelSpec:
    """Read a config.json file or a model directory containing one."""
    p = Path(path)
    if p.is_dir():
        p = p / "config.json"
    if not p.is_file():
        raise ModelConfigError(f"no config.json at '{path}'")
    try:
        raw = json.loads(p.read_text())
    except json.JSONDecodeError as e:
        raise ModelConfigError(f"'{p}' is not valid JSON: {e.msg} at line {e.lineno} column {e.colno}") from None
    return parse_config(raw, name or (p.parent.name if p.name == "config.json" else p.stem))
