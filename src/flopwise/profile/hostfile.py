"""The hardware file `flopwise profile` writes and `flopwise calibrate` reads and rewrites.

It is an ordinary hardware file (`[[hardware]]` entries with `[hardware.efficiency]`, read by
`specs.hardware.load_hardware_file` and `--hardware-file`), plus a top-level `[profile]` table that the
hardware loader ignores: the host description and every raw measurement (kernels and model steps), so a later
`calibrate` can refit without measuring again, and a reader can see what the numbers rest on.

    [[hardware]]            id, name, kind, memory, measured peaks, sources
    [hardware.peak_tflops]
    [hardware.sources]
    [hardware.efficiency]   the fitted profile
    [profile]               hardware = id, written_at, flopwise version
    [profile.host]          discovery (CPU model, cores, SIMD flags, memory, CUDA devices)
    [[profile.kernels]]     one per microbenchmark (calibrate.KernelPoint fields)
    [[profile.steps]]       one per model step: model, num_layers, kind, batch, new_tokens, context, seconds
    [[profile.fit]]         before/after error per metric of the last fit
"""

from __future__ import annotations

import json
import math
import tomllib
from dataclasses import fields
from pathlib import Path
from typing import Any

from flopwise.errors import SpecError
from flopwise.specs.hardware import EfficiencyProfile, HardwareSpec
from flopwise.validate import read_text

__all__ = ["hardware_entry", "dumps_toml", "write_host_file", "read_host_file", "HostFile"]


def hardware_entry(hw: HardwareSpec) -> dict[str, Any]:
    """A `[[hardware]]` table for `hw`, efficiency included, that `load_hardware_file` reads back to `hw`."""
    out: dict[str, Any] = {}
    for f in fields(HardwareSpec):
        v = getattr(hw, f.name)
        if f.name == "efficiency":
            out["efficiency"] = {e.name: getattr(v, e.name) for e in fields(EfficiencyProfile)}
        elif v is not None:
            out[f.name] = dict(v) if isinstance(v, dict) else v
    return out


def _scalar(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if math.isnan(v) or math.isinf(v):
            raise SpecError(f"cannot write {v} to TOML")
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v, ensure_ascii=False)
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_scalar(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{_key(k)} = {_scalar(x)}" for k, x in v.items()) + "}"
    raise SpecError(f"cannot write {type(v).__name__} to TOML")


def _key(k: str) -> str:
    return k if k.replace("_", "").replace("-", "").isalnum() else json.dumps(k)


def _table(lines: list[str], path: str, table: dict[str, Any], array: bool = False) -> None:
    """Write scalars first, then sub-tables ([path.sub]) and arrays of tables ([[path.sub]])."""
    lines.append(f"[[{path}]]" if array else f"[{path}]")
    subs: list[tuple[str, Any, bool]] = []
    for k, v in table.items():
        if v is None:
            continue
        if isinstance(v, dict) and (v and any(isinstance(x, dict) for x in v.values()) or k in _TABLES):
            subs.append((k, v, False))
        elif isinstance(v, list) and v and all(isinstance(x, dict) for x in v):
            subs.append((k, v, True))
        else:
            lines.append(f"{_key(k)} = {_scalar(v)}")
    for k, v, is_array in subs:
        lines.append("")
        if is_array:
            for i, item in enumerate(v):
                if i:
                    lines.append("")
                _table(lines, f"{path}.{_key(k)}", item, array=True)
        else:
            _table(lines, f"{path}.{_key(k)}", v)


_TABLES = {"peak_tflops", "sources", "efficiency", "host"}


def dumps_toml(doc: dict[str, Any], header: str = "") -> str:
    """TOML for our documents: top-level keys are tables or arrays of tables."""
    lines = [f"# {line}" for line in header.splitlines()]
    for k, v in doc.items():
        if lines:
            lines.append("")
        if isinstance(v, list):
            for i, item in enumerate(v):
                if i:
                    lines.append("")
                _table(lines, _key(k), item, array=True)
        else:
            _table(lines, _key(k), v)
    return "\n".join(lines) + "\n"


class HostFile:
    """What a host file holds: its hardware entries (raw tables) and the `[profile]` table."""

    def __init__(self, hardware: list[dict[str, Any]], profile: dict[str, Any]):
        self.hardware = hardware
        self.profile = profile

    @property
    def hardware_id(self) -> str | None:
        return self.profile.get("hardware") or (self.hardware[0]["id"] if self.hardware else None)


def read_host_file(path: str | Path) -> HostFile:
    p = Path(path)
    if not p.exists():
        raise SpecError(f"hardware file '{path}' does not exist; write one with `flopwise profile --out {path}`")
    try:
        data = tomllib.loads(read_text(p, "hardware file"))
    except tomllib.TOMLDecodeError as e:
        raise SpecError(f"hardware file '{path}' could not be parsed: {e}") from None
    entries, profile = data.get("hardware", []), data.get("profile", {})
    if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
        raise SpecError(f"hardware file '{path}': expected a list of [[hardware]] tables")
    if not isinstance(profile, dict):
        raise SpecError(f"hardware file '{path}': [profile] must be a table")
    return HostFile(entries, profile)


def write_host_file(path: str | Path, hw: HardwareSpec, profile: dict[str, Any],
                    others: list[dict[str, Any]] | None = None) -> None:
    """Write `hw` (replacing an entry of the same id among `others`) and the `[profile]` table."""
    entries = [e for e in (others or []) if e.get("id") != hw.id] + [hardware_entry(hw)]
    header = (f"Hardware file written by `flopwise profile` / `flopwise calibrate` for '{hw.id}'.\n"
              f"Use it with: flopwise estimate --hardware-file {Path(path).name} --gpu {hw.id}")
    text = dumps_toml({"hardware": entries, "profile": profile}, header)
    tomllib.loads(text)  # never write a file we cannot read back
    tmp = Path(str(path) + ".tmp")
    tmp.write_text(text)
    tmp.replace(path)
