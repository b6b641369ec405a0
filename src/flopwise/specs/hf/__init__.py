"""Hugging Face config.json readers: `parse_config` (a dict), `load_config_file` (a file or model directory)."""

from __future__ import annotations

import json
from pathlib import Path

from flopwise.errors import ModelConfigError
from flopwise.specs.hf.registry import FAMILIES, SUPPORTED_FAMILIES, Family, family_for, nearest_family, parse_config
from flopwise.specs.model import ModelSpec
from flopwise.validate import read_text

__all__ = ["FAMILIES", "SUPPORTED_FAMILIES", "Family", "family_for", "nearest_family", "parse_config",
           "load_config_file"]


def load_config_file(path: str | Path, name: str | None = None, family: str | None = None) -> ModelSpec:
    """Read a config.json file or a model directory containing one (`family`: the --family override)."""
    p = Path(path)
    if p.is_dir():
        p = p / "config.json"
    if not p.exists():
        raise ModelConfigError(f"no config.json at '{path}'")
    try:
        raw = json.loads(read_text(p, "model config", error=ModelConfigError))
    except RecursionError:
        raise ModelConfigError(f"'{p}' nests too deeply to be a config.json") from None
    except json.JSONDecodeError as e:
        raise ModelConfigError(f"'{p}' is not valid JSON: {e.msg} at line {e.lineno} column {e.colno}") from None
    return parse_config(raw, name or (p.parent.name if p.name == "config.json" else p.stem), family)
