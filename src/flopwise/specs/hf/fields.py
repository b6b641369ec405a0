"""Typed access to a config.json, with the field aliases every family shares defined once.

Families name the same fact differently (`n_layer` in GPT-2-style configs, `num_layers` in ChatGLM, `d_model` in
OPT/MPT, `multi_query_group_num` in ChatGLM, `num_local_experts` vs `num_experts` vs `n_routed_experts`): a reader
asks for the fact (`f.int("num_layers")`) and `ALIASES` says where to look, in order. Errors name the field
and what else was tried.

Every value is checked as it is read: integers are integers (not booleans, strings or non-finite floats) inside
`RANGES` (a count that divides is >= 1; sizes are capped so that a typo cannot hang the reader or overflow a byte
count to infinity), flags are booleans, lists are lists.
"""

from __future__ import annotations

import builtins
import math
from typing import Any

from flopwise.errors import ModelConfigError

__all__ = ["ALIASES", "RANGES", "MAX_LAYERS", "Fields"]

ALIASES: dict[str, tuple[str, ...]] = {
    "hidden_size": ("hidden_size", "n_embd", "d_model", "dim"),
    "num_layers": ("num_hidden_layers", "n_layer", "num_layers", "n_layers"),
    "num_heads": ("num_attention_heads", "n_head", "n_heads"),
    "num_kv_heads": ("num_key_value_heads", "num_kv_heads", "n_head_kv", "multi_query_group_num", "n_kv_heads"),
    "head_dim": ("head_dim", "attention_head_dim", "kv_channels"),
    "intermediate_size": ("intermediate_size", "ffn_hidden_size", "ffn_dim", "n_inner"),
    "vocab_size": ("vocab_size", "padded_vocab_size"),
    "num_experts": ("num_local_experts", "num_experts", "n_routed_experts", "moe_num_experts"),
    "experts_per_token": ("num_experts_per_tok", "experts_per_token", "moe_topk", "moe_k", "top_k_experts"),
    "expert_intermediate_size": ("moe_intermediate_size", "expert_intermediate_size"),
    "sliding_window": ("sliding_window",),
    "max_position_embeddings": ("max_position_embeddings", "n_positions", "max_sequence_length", "seq_length"),
}

MAX_LAYERS = 10_000  # the deepest published decoders have a few hundred layers
_DIM = (1, 10**7)  # a width, a head count, a rank
_COUNT0 = (0, 10**7)  # a count that may be zero
# Accepted values of the integer fields readers ask for (canonical names; other integer fields: any integer).
RANGES: dict[str, tuple[int, int]] = {
    "num_layers": (1, MAX_LAYERS), "hidden_size": _DIM, "num_heads": _DIM, "num_kv_heads": _DIM, "head_dim": _DIM,
    "intermediate_size": _DIM, "vocab_size": (1, 10**9), "num_experts": _COUNT0, "experts_per_token": _COUNT0,
    "expert_intermediate_size": _DIM, "sliding_window": (1, 10**10), "max_position_embeddings": (1, 10**10),
    "attention_chunk_size": (1, 10**10), "decoder_sparse_step": _DIM, "moe_layer_freq": _DIM,
    "moe_layer_interval": _DIM, "interleave_moe_layer_step": _DIM, "sliding_window_pattern": _DIM,
    "no_rope_layer_interval": _DIM, "first_k_dense_replace": _COUNT0, "n_shared_experts": _COUNT0,
    "shared_expert_intermediate_size": _COUNT0, "n_routed_experts": _COUNT0, "moe_num_experts": _COUNT0,
    "moe_k": _COUNT0, "moe_topk": _COUNT0, "num_shared_expert": _COUNT0, "moe_num_shared_experts": _COUNT0,
    "moe_intermediate_size": _DIM, "kv_lora_rank": _DIM, "q_lora_rank": _DIM, "qk_nope_head_dim": _DIM,
    "qk_rope_head_dim": _DIM, "v_head_dim": _DIM, "index_n_heads": _DIM, "index_head_dim": _DIM,
    "index_topk": (1, 10**10), "max_window_layers": (0, MAX_LAYERS), "num_kv_shared_layers": (0, MAX_LAYERS),
    "moe_layer_start_index": (0, MAX_LAYERS), "num_nextn_predict_layers": (0, MAX_LAYERS),
    "altup_num_inputs": _DIM, "laurel_rank": _COUNT0, "hidden_size_per_layer_input": _COUNT0,
    "intermediate_size_mlp": _DIM, "num_local_experts": _COUNT0, "num_experts_per_tok": _COUNT0,
}


class Fields:
    """One config dict (a text_config already merged in by the reader that needs it), its model name and the
    family reading it."""

    __slots__ = ("raw", "name", "family")

    def __init__(self, raw: dict[str, Any], name: str, family: str):
        self.raw, self.name, self.family = raw, name, family

    def _keys(self, key: str) -> tuple[str, ...]:
        return ALIASES.get(key, (key,))

    def has(self, key: str) -> bool:
        return any(self.raw.get(k) is not None for k in self._keys(key))

    def get(self, key: str, default: Any = None) -> Any:
        for k in self._keys(key):
            v = self.raw.get(k)
            if v is not None:
                return v
        return default

    def bool(self, key: str, default: bool = False) -> bool:
        v = self.get(key, default)
        if not isinstance(v, bool):
            raise ModelConfigError(f"{self.name}: config.json field '{self._keys(key)[0]}' must be true or false, "
                                   f"got {v!r}")
        return v

    def _missing(self, key: str) -> ModelConfigError:
        keys = self._keys(key)
        also = f" (also looked for {', '.join(keys[1:])})" if len(keys) > 1 else ""
        return ModelConfigError(f"{self.name}: config.json ({self.family}) is missing required field '{keys[0]}'{also}")

    def _as_int(self, key: str, v: Any) -> int:
        lo, hi = RANGES.get(key, (None, None))
        what = "an integer" if lo is None else f"an integer in [{lo:,}, {hi:,}]"
        if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v) or int(v) != v:
            raise ModelConfigError(f"{self.name}: config.json field '{self._keys(key)[0]}' must be {what}, got {v!r}")
        n = int(v)
        if lo is not None and hi is not None and not lo <= n <= hi:
            raise ModelConfigError(f"{self.name}: config.json field '{self._keys(key)[0]}' must be {what}, got {n:,}")
        return n

    def int(self, key: str, default: int | None = None) -> int:
        v = self.get(key)
        if v is None:
            if default is not None:
                return default
            raise self._missing(key)
        return self._as_int(key, v)

    def optional_int(self, key: str) -> builtins.int | None:
        """An integer field that may be absent or null (a sliding window, a context length, a LoRA rank)."""
        v = self.get(key)
        return None if v is None else self._as_int(key, v)

    def _list(self, key: str) -> list[Any] | None:
        v = self.get(key)
        if v is None:
            return None
        if not isinstance(v, list):
            raise ModelConfigError(f"{self.name}: config.json field '{self._keys(key)[0]}' must be a list, got {v!r}")
        return v

    def int_list(self, key: str) -> list[builtins.int] | None:
        """A list of integers (layer indices, per-layer flags), or None where absent."""
        v = self._list(key)
        return None if v is None else [self._as_int(key, x) for x in v]

    def str_list(self, key: str) -> list[str] | None:
        v = self._list(key)
        if v is not None and not all(isinstance(x, str) for x in v):
            raise ModelConfigError(f"{self.name}: config.json field '{self._keys(key)[0]}' must be a list of strings")
        return v

    def per_layer(self, key: str, num_layers: builtins.int,
                  default: builtins.int | None = None) -> tuple[builtins.int, ...]:
        """A field that is one integer for every layer or a list with one per layer (Hunyuan's `moe_topk`,
        Gemma 3n's `intermediate_size`)."""
        v = self.get(key)
        if v is None:
            if default is None:
                raise self._missing(key)
            return (default,) * num_layers
        if isinstance(v, list):
            if len(v) == 1:
                return (self._as_int(key, v[0]),) * num_layers
            if len(v) != num_layers:
                raise ModelConfigError(f"{self.name}: config.json field '{self._keys(key)[0]}' has {len(v)} entries, "
                                       f"num_hidden_layers is {num_layers}")
            return tuple(self._as_int(key, x) for x in v)
        return (self._as_int(key, v),) * num_layers
