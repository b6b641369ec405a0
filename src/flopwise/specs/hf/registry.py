"""Hugging Face `config.json` -> `ModelSpec`, through a registry of model families.

A family is one `Family` entry: the `architectures` and `model_type` names it answers to, and a reader
`(Fields) -> ModelSpec`. Most readers are one call to `decoder.decoder_reader` with the family's options (biases,
QK norm, norms per layer, window rule, MoE layout); families with their own layer kinds have a module of their own
(`llama4.py`, `qwen3_next.py`, `deepseek.py`, `gemma.py`, ...). Adding a family is one entry in `FAMILIES`,
plus a module only when it brings something new (see the README's architecture section).

Lookup: the first of `architectures` a family claims, else `model_type`; a config nothing claims is refused
with the nearest family (by name, else by the config fields it shares with each family's signature) and the
`--family NAME` override, which reads it with that family's reader and records that the mapping is assumed.
After the reader, the checkpoint's `quantization_config` sets `checkpoint_weights` (`quantization.py`).
"""

from __future__ import annotations

import difflib
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import cache
from typing import Any

from flopwise.errors import ModelConfigError
from flopwise.specs.hf import deepseek, gemma, llama4, others, qwen3_next
from flopwise.specs.hf.decoder import DECODER_FAMILIES
from flopwise.specs.hf.fields import Fields
from flopwise.specs.hf.quantization import checkpoint_format
from flopwise.specs.model import ModelSpec

__all__ = ["Family", "FAMILIES", "SUPPORTED_FAMILIES", "family_for", "nearest_family", "parse_config"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Family:
    """A model family: the names it answers to, its reader, and the config fields that mark it (for the
    nearest-family suggestion)."""

    name: str
    architectures: tuple[str, ...]
    model_types: tuple[str, ...]
    read: Callable[[Fields], ModelSpec]
    signature: tuple[str, ...] = ()
    description: str = ""


FAMILIES: tuple[Family, ...] = tuple(
    Family(**entry) for entry in (*DECODER_FAMILIES, *gemma.FAMILIES, *deepseek.FAMILIES, *llama4.FAMILIES,
                                  *qwen3_next.FAMILIES, *others.FAMILIES))

SUPPORTED_FAMILIES: tuple[str, ...] = tuple(f.name for f in FAMILIES)


@cache
def _index() -> tuple[dict[str, Family], dict[str, Family], dict[str, Family]]:
    by_arch = {a: f for f in FAMILIES for a in f.architectures}
    by_type = {t: f for f in FAMILIES for t in f.model_types}
    by_name = {f.name: f for f in FAMILIES}
    return by_arch, by_type, by_name


def _check_names(raw: dict[str, Any], name: str) -> None:
    """The fields the registry looks families up by have the types Hugging Face writes."""
    archs = raw.get("architectures")
    if archs is not None and not (isinstance(archs, list) and all(isinstance(a, str) for a in archs)):
        raise ModelConfigError(f"{name}: config.json field 'architectures' must be a list of strings, got {archs!r}")
    for key in ("model_type",):
        if raw.get(key) is not None and not isinstance(raw[key], str):
            raise ModelConfigError(f"{name}: config.json field '{key}' must be a string, got {raw[key]!r}")
    for key in ("text_config", "vision_config", "audio_config", "quantization_config"):
        if raw.get(key) is not None and not isinstance(raw[key], dict):
            raise ModelConfigError(f"{name}: config.json field '{key}' must be an object, got {raw[key]!r}")


def family_for(raw: dict[str, Any]) -> Family | None:
    by_arch, by_type, _ = _index()
    for a in raw.get("architectures") or []:
        if a in by_arch:
            return by_arch[a]
    mt = raw.get("model_type")
    if isinstance(mt, str) and mt in by_type:
        return by_type[mt]
    text = raw.get("text_config")
    if isinstance(text, dict) and text.get("model_type") in by_type:
        return by_type[text["model_type"]]
    return None


_ARCH_SUFFIXES = ("ForConditionalGeneration", "ForCausalLM", "LMHeadModel", "Model")


def _stem(arch: str) -> str:
    for suffix in _ARCH_SUFFIXES:
        if arch.endswith(suffix):
            return arch[: -len(suffix)].lower()
    return arch.lower()


def nearest_family(raw: dict[str, Any]) -> tuple[Family, str]:
    """The registered family closest to an unsupported config, and why: an architecture or model_type name close
    to a family's (the common ForCausalLM-style suffixes ignored), else the most signature fields shared."""
    names: dict[str, Family] = {}
    for f in FAMILIES:
        for a in f.architectures:
            names.setdefault(_stem(a), f)
        for t in f.model_types:
            names.setdefault(t.lower(), f)
    asked = [_stem(str(a)) for a in raw.get("architectures") or []]
    if isinstance(raw.get("model_type"), str):
        asked.append(raw["model_type"].lower())
    for name in asked:
        close = difflib.get_close_matches(name, list(names), n=1, cutoff=0.75)
        if close:
            return names[close[0]], f"its name is close to '{close[0]}'"
    fields = set(raw) | set(raw.get("text_config") or {})
    scored = [(len(fields & set(f.signature)) / len(f.signature), f) for f in FAMILIES if f.signature]
    share, best = max(scored, key=lambda t: t[0])
    shared = sorted(fields & set(best.signature))
    return best, f"it has {share:.0%} of that family's signature fields: {', '.join(shared) or 'none'}"


def _refusal(raw: dict[str, Any], name: str) -> ModelConfigError:
    archs, mt = raw.get("architectures") or [], raw.get("model_type")
    best, why = nearest_family(raw)
    return ModelConfigError(
        f"{name}: unsupported architecture (architectures={archs!r}, model_type={mt!r}). Nearest supported family: "
        f"{best.name} ({why}); to read it as {best.name} anyway pass --family {best.name} (the mapping is assumed: "
        f"check the parameter count against the model card). Supported families: {', '.join(SUPPORTED_FAMILIES)}.")


def parse_config(raw: dict[str, Any], name: str = "model", family: str | None = None) -> ModelSpec:
    """Build a ModelSpec from the dict of a Hugging Face config.json. `family` forces a registered family's reader
    (the `--family` override); the spec then carries a note that the mapping is assumed."""
    if not isinstance(raw, dict):
        raise ModelConfigError(f"{name}: config.json must be a JSON object, got {type(raw).__name__}")
    _check_names(raw, name)
    text = raw.get("text_config")
    if isinstance(text, dict):
        _check_names(text, f"{name} (text_config)")
    notes: list[str] = []
    if family is not None:
        fam = _index()[2].get(family)
        if fam is None:
            close = difflib.get_close_matches(family, SUPPORTED_FAMILIES, n=3, cutoff=0.5)
            hint = f" Did you mean: {', '.join(close)}?" if close else ""
            raise ModelConfigError(f"unknown family '{family}' for --family.{hint} Supported families: "
                                   f"{', '.join(SUPPORTED_FAMILIES)}.")
        claimed = family_for(raw)
        if claimed is None or claimed.name != fam.name:
            notes.append(f"read as family {fam.name} by --family (architectures={raw.get('architectures')!r}, "
                         f"model_type={raw.get('model_type')!r}): the mapping is assumed, check the parameter count "
                         "against the model card")
    else:
        found = family_for(raw)
        if found is None:
            raise _refusal(raw, name)
        fam = found
    try:
        spec = fam.read(Fields(raw, name, fam.name))
    except (TypeError, ValueError, KeyError, IndexError, AttributeError, ZeroDivisionError, OverflowError) as e:
        # every field the readers share is checked as it is read (`Fields`); this names what a family-specific
        # field broke instead of a traceback
        raise ModelConfigError(f"{name}: config.json ({fam.name}) has a field flopwise cannot read: "
                               f"{type(e).__name__}: {e}") from None
    except ModelConfigError as e:  # a spec's own check (MLPSpec, AttentionSpec) does not know the model's name
        if str(e).startswith(f"{name}:"):
            raise
        raise ModelConfigError(f"{name}: {e}") from None
    try:
        fmt, qnote = checkpoint_format(raw)
    except ModelConfigError as e:
        raise ModelConfigError(f"{name}: {e}") from None
    if fmt is None and qnote:
        notes.append(qnote)
    return replace(spec, checkpoint_weights=fmt, checkpoint_note=qnote if fmt else "", notes=(*spec.notes, *notes))
