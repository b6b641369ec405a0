"""The weight format a checkpoint ships in, from its config.json `quantization_config`.

A pre-quantized checkpoint (gpt-oss: MXFP4 experts; DeepSeek-V3 / Kimi-K2: FP8 blocks; an AWQ or GPTQ repo)
is served in that format: the engines read `quantization_config` and pick the kernels, so a planner should
price and launch it that way, and never plan it at a wider format than it ships.

This is the one place flopwise reads that table for planning and launching; it maps the Hugging Face
`quant_method` (and, where one method covers several formats, its bits or scheme) to a flopwise weight format
(`specs/precision.py`). Kept behind `checkpoint_weights` so that it can defer to the model spec once
`ModelSpec` carries the table itself.
"""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

from flopwise.specs.hf.quantization import modelopt_keeps_attention
from flopwise.specs.model import ModelSpec
from flopwise.specs.model_catalog import model_catalog

__all__ = ["checkpoint_weights", "quantization_config"]


@cache
def _catalog_files() -> dict[str, str]:
    return {n.lower(): m.file for m in model_catalog() for n in m.names}


def quantization_config(model: ModelSpec | str) -> dict[str, Any] | None:
    """The checkpoint's `quantization_config` (None: a 16-bit checkpoint), for a catalog model or a
    config.json path / model directory."""
    name = model.name if isinstance(model, ModelSpec) else model
    file = _catalog_files().get(name.lower())
    if file is not None:
        raw = json.loads(resources.files("flopwise.catalog").joinpath("models", file).read_text())
    else:
        p = Path(name)
        p = p / "config.json" if p.is_dir() else p
        if not p.is_file():
            return None
        try:
            raw = json.loads(p.read_text())
        except (OSError, ValueError):
            return None
    q = raw.get("quantization_config") if isinstance(raw, dict) else None
    return q if isinstance(q, dict) else None


def _compressed_tensors(q: dict[str, Any]) -> str | None:
    """llm-compressor's format: the first config group's weight and input-activation schemes."""
    for group in (q.get("config_groups") or {}).values():
        w, a = group.get("weights") or {}, group.get("input_activations") or {}
        bits, kind = w.get("num_bits"), w.get("type")
        if kind == "float" and bits == 8:
            return "fp8"
        if kind == "float" and bits == 4:
            return "nvfp4"
        if kind == "int" and bits == 8:
            return "int8-w8a8" if a else "int8"
        if kind == "int" and bits == 4:
            return "w4a8" if a else "int4-gptq"
    return None


def checkpoint_weights(model: ModelSpec | str) -> str | None:
    """The flopwise weight format of a pre-quantized checkpoint, or None for a 16-bit one (or a method
    flopwise does not price)."""
    q = quantization_config(model)
    if q is None:
        return None
    method = str(q.get("quant_method", "")).lower()
    bits = q.get("bits") or q.get("w_bit")
    if method == "fp8" or method == "fbgemm_fp8":
        return "fp8"
    if method == "mxfp4":
        return "mxfp4"
    if method == "awq":
        return "int4-awq" if bits in (None, 4) else None
    if method == "gptq":
        return {4: "int4-gptq", 8: "int8"}.get(bits or 4)
    if method == "compressed-tensors":
        return _compressed_tensors(q)
    if method == "modelopt":
        algo = str(q.get("quant_algo", "")).upper()
        if algo == "NVFP4" and modelopt_keeps_attention(q):
            return "nvfp4-mlp"
        return {"FP8": "fp8", "NVFP4": "nvfp4"}.get(algo)
    return None
