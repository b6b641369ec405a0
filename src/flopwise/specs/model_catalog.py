"""Resolve a model argument: a config.json path, a model directory, a Hugging Face repo id or a short alias.

The built-in catalog is `catalog/models/index.toml` plus the config.json files it names. An entry's `also` lists
other repo ids of the same shape, each a string or `{ id = ..., max_position_embeddings = N }` where that
checkpoint's context length differs (Qwen3-2507's 262,144 tokens over Qwen3's 40,960).
"""

from __future__ import annotations

import json
import tomllib
from dataclasses import dataclass, replace
from functools import cache
from importlib import resources
from pathlib import Path

from flopwise.errors import UnknownModelError, suggest
from flopwise.specs.hf import load_config_file, parse_config
from flopwise.specs.model import ModelSpec
from flopwise.validate import text

__all__ = ["CatalogModel", "model_catalog", "get_model"]


@dataclass(frozen=True, slots=True, kw_only=True)
class CatalogModel:
    id: str
    file: str
    aliases: tuple[str, ...]
    also: tuple[str, ...]
    family: str
    source: str
    published_params_b: float | None
    published_active_params_b: float | None
    params_note: str
    published_precision_b: float | None = None  # the published total is given to this precision (a rounded name)
    published_active_precision_b: float | None = None
    published_active_basis: str = "with_embeddings"  # or "without_embeddings" (the card's convention)
    # `also` ids whose checkpoint has the same shape but another context length: (id, max_position_embeddings)
    contexts: tuple[tuple[str, int], ...] = ()

    @property
    def names(self) -> tuple[str, ...]:
        return (self.id, *self.also, *self.aliases)


@cache
def model_catalog() -> tuple[CatalogModel, ...]:
    base = resources.files("flopwise.catalog").joinpath("models")
    data = tomllib.loads(base.joinpath("index.toml").read_text())
    return tuple(
        CatalogModel(
            id=m["id"], file=m["file"], aliases=tuple(m.get("aliases", ())),
            also=tuple(a["id"] if isinstance(a, dict) else a for a in m.get("also", ())),
            contexts=tuple((a["id"], int(a["max_position_embeddings"])) for a in m.get("also", ())
                           if isinstance(a, dict)),
            family=m.get("family", ""), source=m.get("source", ""),
            published_params_b=m.get("published_params_b"),
            published_active_params_b=m.get("published_active_params_b"),
            params_note=m.get("params_note", ""), published_precision_b=m.get("published_precision_b"),
            published_active_precision_b=m.get("published_active_precision_b"),
            published_active_basis=m.get("published_active_basis", "with_embeddings"))
        for m in data["model"])


@cache
def _lookup() -> dict[str, CatalogModel]:
    return {n.lower(): m for m in model_catalog() for n in m.names}


@cache
def _load_catalog_model(entry: CatalogModel) -> ModelSpec:
    text = resources.files("flopwise.catalog").joinpath("models", entry.file).read_text()
    return parse_config(json.loads(text), entry.id)


def get_model(name: str, family: str | None = None) -> ModelSpec:
    """A catalog id or alias (case-insensitive), else a path to a config.json or a model directory. `family`
    reads a config file with that family's reader (the --family override; catalog entries have theirs)."""
    text(name, "model (a catalog id or alias, a config.json or a model directory)", error=UnknownModelError)
    if family is not None:
        text(family, "--family", error=UnknownModelError)
    entry = _lookup().get(name.lower())
    if entry is not None:
        if family is not None:  # it would be ignored: the catalog's entry has its reader
            raise UnknownModelError(f"--family reads a config.json with another family's reader; '{name}' is a "
                                    "catalog model, read by its own: drop --family")
        spec = _load_catalog_model(entry)
        ctx = next((n for i, n in entry.contexts if i.lower() == name.lower()), None)
        return spec if ctx is None else replace(spec, max_position_embeddings=ctx)
    p = Path(name)
    if p.exists():
        return load_config_file(p, family=family)
    raise UnknownModelError(
        f"unknown model '{name}': not a catalog id or alias, and no such file or directory."
        f"{suggest(name, _lookup())} Run `flopwise models` for the catalog, or pass a path to a config.json.")
