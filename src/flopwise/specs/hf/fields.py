"""Typed access to a config.json, with the field aliases every family shares defined once.

Families name the same fact differently (`n_layer` in GPT-2-style configs, `num_layers` in ChatGLM, `d_model` in
OPT/MPT, `multi_query_group_num` in ChatGLM, `num_local_experts` vs `num_experts` vs `n_routed_experts`): a reader
asks for the fact (`f.int("num_layers")`) and `ALIASES` says where to look, in order. Errors name the field
and what else was tried.
"""

from __future__ import annotations

from typing import Any

from flopwise.errors import ModelConfigError

__all__ = ["ALIASES", "Fields"]

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
        return bool(self.get(key, default))

    def _missing(self, key: str) -> ModelConfigError:
        keys = self._keys(key)
        also = f" (also looked for {', '.join(keys[1:])})" if len(keys) > 1 else ""
        return ModelConfigError(f"{self.name}: config.json ({self.family}) is missing required field '{keys[0]}'{also}")

    def _as_int(self, key: str, v: Any) -> int:
        if isinstance(v, bool) or not isinstance(v, int | float) or int(v) != v:
            raise ModelConfigError(f"{self.name}: config.json field '{self._keys(key)[0]}' must be an integer, got {v!r}")
        return int(v)

    def int(self, key: str, default: int | None = None) -> int:
        v = self.get(key)
        if v is None:
            if default is not None:
                return default
            raise self._missing(key)
        return self._as_int(key, v)

    def per_layer(self, key: str, num_layers: int, default: int | None = None) -> tuple[int, ...]:
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
