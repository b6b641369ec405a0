"""Resolve a model argument: a config.json path, a model directory, a Hugging Face repo id or a short alias.

The built-in catalog is `catalog/models/index.toml` plus the config.json files it names. An entry's `also` lists
other repo ids of the same shape, each a string or `{ id = ..., max_position_embeddings = N }` where that
checkpoint's context length differs (Qwen3-2507's 262,144 tokens over Qwen3's 40,960). A published pre-quantized
checkpoint that `catalog/checkpoints.toml` lists (`checkpoint_catalog`, also read by `launch.checkpoints`) names
its 16-bit base model in the weight format it ships in: `Qwen/Qwen3-32B-FP8` is Qwen3-32B with fp8 weights.
"""

from __future__ import annotations

import json
import tomllib
from dataclasses import dataclass, replace
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

from flopwise.errors import UnknownModelError, suggest
from flopwise.specs.hardware import hardware_catalog
from flopwise.specs.hf import load_config_file, parse_config
from flopwise.specs.model import ModelSpec
from flopwise.validate import text

__all__ = ["CatalogModel", "model_catalog", "checkpoint_catalog", "get_model", "hub_spelling", "published_base"]


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
def checkpoint_catalog() -> dict[str, Any]:
    """`catalog/checkpoints.toml`, parsed: its published checkpoints, speculative heads and recipes."""
    return tomllib.loads(resources.files("flopwise.catalog").joinpath("checkpoints.toml").read_text())


def _published(repo: str) -> tuple[str, str | None] | None:
    """(base model, weight format) of a listed pre-quantized checkpoint repository (case-insensitive), the format
    None for a GGUF repository (one file per format: the user's --weights picks); None when it is not listed."""
    found = [c for c in checkpoint_catalog().get("checkpoint", []) if c["repo"].lower() == repo.lower()]
    if not found:
        return None
    formats = {c["weights"] for c in found}
    gguf = any("file" in c for c in found)
    return found[0]["base"], (formats.pop() if len(formats) == 1 and not gguf else None)


def _as_published(spec: ModelSpec, name: str, base: str, weights: str | None) -> ModelSpec:
    """`spec` (the base model's) as the listed repository `name` publishes it."""
    if weights is None:
        return replace(spec, notes=(*spec.notes, f"{name} publishes {base} as GGUF files, one per format: --weights "
                                                  "names the one served (16-bit where not given)"))
    return replace(spec, name=hub_spelling(name) or name, checkpoint_weights=weights,
                   checkpoint_note=f"published from {base}, whose checkpoint the other formats come from; "
                                   "catalog/checkpoints.toml")


def published_base(repo: str) -> str | None:
    """The 16-bit model a listed pre-quantized checkpoint repository was made from, or None."""
    published = _published(repo)
    return None if published is None else published[0]


def hub_spelling(name: str) -> str | None:
    """The Hugging Face id `name` is, as the catalog spells it (a catalog id, an `also` id or a listed checkpoint
    repository, matched case-insensitively), or None where it names none of those (an alias, a path)."""
    key = name.lower()
    ids = [i for m in model_catalog() for i in (m.id, *m.also)]
    ids += [c["repo"] for c in checkpoint_catalog().get("checkpoint", [])]
    return next((i for i in ids if i.lower() == key), None)


@cache
def _load_catalog_model(entry: CatalogModel) -> ModelSpec:
    text = resources.files("flopwise.catalog").joinpath("models", entry.file).read_text()
    return parse_config(json.loads(text), entry.id)


def get_model(name: str, family: str | None = None) -> ModelSpec:
    """A catalog id or alias (case-insensitive), a pre-quantized checkpoint repository `catalog/checkpoints.toml`
    lists (its base model in the format it ships in; a GGUF repository: the base model, its file picked by
    --weights), else a path to a config.json or a model directory. `family` reads a config file with that family's
    reader (the --family override; catalog entries have theirs). A GPU id is refused as such."""
    text(name, "model (a catalog id or alias, a config.json or a model directory)", error=UnknownModelError)
    if family is not None:
        text(family, "--family", error=UnknownModelError)
    entry = _lookup().get(name.lower())
    published = _published(name)
    if (entry is not None or published is not None) and family is not None:  # ignored: the catalog has its reader
        raise UnknownModelError(f"--family reads a config.json with another family's reader; '{name}' is a "
                                "catalog model, read by its own: drop --family")
    if entry is not None:
        spec = _load_catalog_model(entry)
        ctx = next((n for i, n in entry.contexts if i.lower() == name.lower()), None)
        spec = spec if ctx is None else replace(spec, max_position_embeddings=ctx)
        return spec if published is None else _as_published(spec, name, *published)
    p = Path(name)
    if p.exists():
        return load_config_file(p, family=family)
    if published is not None:
        return _as_published(get_model(published[0]), name, *published)
    key = name.lower()
    if any(h == key or h.startswith(key + "-") for h in hardware_catalog()):  # the arguments swapped
        raise UnknownModelError(f"unknown model '{name}': that names a GPU (flopwise hardware {name}); give the model "
                                "as --model, the GPU as --gpu (in Python: estimate(model, gpu))")
    names = [n for m in model_catalog() for n in m.names]
    names += dict.fromkeys(c["repo"] for c in checkpoint_catalog().get("checkpoint", []))  # (GGUF repos: once)
    raise UnknownModelError(
        f"unknown model '{name}': not a catalog id or alias, and no such file or directory.{suggest(name, names)} "
        "Run `flopwise models` for the catalog, or pass a path to a config.json.")
