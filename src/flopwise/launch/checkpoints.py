"""Published pre-quantized checkpoints, speculative heads and quantization recipes (`catalog/checkpoints.toml`).

`find_checkpoint(model, weights, engine)` names a repository that `engine` loads as published for `model`'s
16-bit checkpoint in `weights`; `find_head(model, method)` an EAGLE head trained for it; `recipe_for` the
command that makes a checkpoint where none is published (llm-compressor, AutoAWQ, ModelOpt, llama.cpp's
converter), with its output name.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from flopwise.specs.model_catalog import checkpoint_catalog, published_base
from flopwise.specs.precision import WEIGHT_FORMATS

__all__ = ["Checkpoint", "Recipe", "find_checkpoint", "find_head", "loads_as_published", "recipe_for"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Checkpoint:
    base: str
    weights: str
    repo: str
    engines: tuple[str, ...]
    file: str | None = None
    note: str | None = None


@dataclass(frozen=True, slots=True)
class Recipe:
    tool: str
    command: str
    out: str  # what the command writes: a directory, or a GGUF file


def find_checkpoint(model: str, weights: str, engine: str) -> Checkpoint | None:
    """The first listed checkpoint of `model` (a 16-bit Hugging Face id, case-insensitive) in `weights` that
    `engine` (a family) loads."""
    for c in checkpoint_catalog().get("checkpoint", []):
        if c["base"].lower() == model.lower() and c["weights"] == weights and engine in c["engines"]:
            return Checkpoint(base=c["base"], weights=c["weights"], repo=c["repo"], engines=tuple(c["engines"]),
                              file=c.get("file"), note=c.get("source"))
    return None


def loads_as_published(repo: str, engine: str) -> bool:
    """Whether `engine` (a family) loads repository `repo` as it ships: True unless `repo` is a listed checkpoint
    whose `engines` leave that family out (Meta's fbgemm_fp8 checkpoints load in vLLM and SGLang, not in
    TensorRT-LLM)."""
    listed = [c for c in checkpoint_catalog().get("checkpoint", []) if c["repo"].lower() == repo.lower()]
    return not listed or any(engine in c["engines"] for c in listed)


def find_head(model: str, method: str) -> str | None:
    """A published speculative head (`eagle`, `eagle3`) for `model`, or None."""
    model = published_base(model) or model  # a head trained for the base serves its pre-quantized checkpoints
    for h in checkpoint_catalog().get("head", []):
        if h["base"].lower() == model.lower() and h["method"] == method:
            return str(h["repo"])
    return None


def _gguf_types(recipe: dict[str, Any]) -> dict[str, str]:
    """The formats a recipe makes as GGUF files -> the file type its tool is given: its own table (gguf_type), or
    every GGUF weight format's (gguf = true)."""
    if recipe.get("gguf"):
        return {name: f.gguf_type for name, f in WEIGHT_FORMATS.items() if f.gguf_type is not None}
    return dict(recipe.get("gguf_type", {}))


def recipe_for(weights: str, engine: str, model: str) -> Recipe | None:
    """The command that makes `model` in `weights` for `engine`, or None where no recipe is listed."""
    recipes = checkpoint_catalog().get("recipe", {})
    name = model.rstrip("/").rsplit("/", 1)[-1]
    # a GGUF recipe lists the formats it makes (gguf_type) or makes every GGUF type (gguf); any other recipe is named
    # by its format
    key = next((k for k, rec in recipes.items() if weights in _gguf_types(rec) and engine in rec["engines"]), weights)
    r = recipes.get(key)
    if r is None or engine not in r["engines"]:
        mo = recipes.get("modelopt", {})
        if weights in mo.get("qformat", {}) and engine in mo.get("engines", []):
            r = mo
        else:
            return None
    fill = {"model": model, "name": name, "qformat": r.get("qformat", {}).get(weights, weights),
            "gguf_type": _gguf_types(r).get(weights, weights)}
    out = r["out"].format(**fill)
    return Recipe(r["tool"], r["command"].format(out=out, **fill), out)
