"""Token-length distributions, sampled as integers >= 1 with numpy's PCG64 (deterministic under a seed).

Text form (the CLI's --input-len / --output-len):
    512                      fixed
    uniform:LO:HI            uniform integers in [LO, HI]
    normal:MEAN:STD          rounded normal, clipped to >= 1
    lognormal:MEDIAN:SIGMA   exp(N(ln MEDIAN, SIGMA)), rounded; mean = MEDIAN * exp(SIGMA^2 / 2)
    file:PATH                resampled with replacement from integers in PATH (one per line, or a JSON list)

A named workload may instead draw prompt and output lengths together, as pairs from a catalog table
(`LengthPairs`: `catalog/workloads/NAME.csv`), which keeps their joint law (ShareGPT's long prompts get short
answers).

Lengths are whole tokens: fixed lengths, uniform bounds and file values are integers. Every parameter is finite
and no distribution's mean exceeds `MAX_TOKENS_PER_REQUEST` (samples are clipped to it before they become
integers, so a wide lognormal cannot overflow).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path

import numpy as np

from flopwise.errors import WorkloadError
from flopwise.specs.defaults import MAX_TOKENS_PER_REQUEST
from flopwise.validate import integer, number, read_text

__all__ = ["LengthDist", "LengthPairs", "parse_length"]

_KINDS = ("fixed", "uniform", "normal", "lognormal", "file")


@dataclass(frozen=True, slots=True, kw_only=True)
class LengthDist:
    """`a`, `b` are the two parameters of `kind` (see the module docstring); `values` backs kind "file"."""

    kind: str
    a: float = 0.0
    b: float = 0.0
    values: tuple[int, ...] = ()
    max_len: int | None = None  # clip samples to this (e.g. the context length)

    def __post_init__(self) -> None:
        if self.kind not in _KINDS:
            raise WorkloadError(f"unknown length distribution {self.kind!r}; use one of {', '.join(_KINDS)}")
        top = MAX_TOKENS_PER_REQUEST
        if self.kind == "fixed":
            _whole(self.a, "a fixed length", 1, top)
        elif self.kind == "uniform":
            lo = _whole(self.a, "uniform:LO:HI's LO", 1, top)
            if _whole(self.b, "uniform:LO:HI's HI", 1, top) < lo:
                raise WorkloadError(f"uniform:LO:HI needs LO <= HI, got {self.a:g}:{self.b:g}")
        elif self.kind in ("normal", "lognormal"):
            center = "MEAN" if self.kind == "normal" else "MEDIAN"
            spread = "STD" if self.kind == "normal" else "SIGMA"
            number(self.a, f"{self.kind}:{center}:{spread}'s {center}", lo=0, hi=top, lo_open=True)
            number(self.b, f"{self.kind}:{center}:{spread}'s {spread}", lo=0, hi=top if self.kind == "normal" else 20)
            if not self.mean <= top:
                raise WorkloadError(f"{self} has a mean of {self.mean:.3g} tokens, more than any context "
                                    f"({top:,}); lower its {spread}")
        elif not self.values:
            raise WorkloadError("a length file must hold at least one integer")
        else:
            for v in self.values:
                integer(v, "every length in a length file", lo=1, hi=top)
        if self.max_len is not None:
            integer(self.max_len, "the length cap", lo=1, hi=top)

    @property
    def mean(self) -> float:
        """Mean length (tokens), before rounding and clipping."""
        if self.kind == "fixed":
            return self.a
        if self.kind == "uniform":
            return (self.a + self.b) / 2
        if self.kind == "normal":
            return self.a
        if self.kind == "lognormal":
            return self.a * math.exp(min(self.b**2 / 2, 700.0))
        return float(np.mean(self.values))

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        if self.kind == "fixed":
            x = np.full(n, int(self.a))
        elif self.kind == "uniform":
            x = rng.integers(int(self.a), int(self.b) + 1, size=n)
        elif self.kind == "normal":
            x = np.rint(rng.normal(self.a, self.b, size=n))
        elif self.kind == "lognormal":
            x = np.rint(rng.lognormal(np.log(self.a), self.b, size=n))
        else:
            x = rng.choice(np.asarray(self.values), size=n, replace=True)
        out: np.ndarray = np.clip(x, 1, self.max_len or MAX_TOKENS_PER_REQUEST).astype(np.int64)
        return out

    def __str__(self) -> str:
        if self.kind == "fixed":
            return f"{int(self.a)}"
        if self.kind == "file":
            return f"file({len(self.values)} values)"
        return f"{self.kind}:{self.a:g}:{self.b:g}"


@dataclass(frozen=True, slots=True, kw_only=True)
class LengthPairs:
    """(prompt, output) token counts drawn together from the catalog table `catalog/workloads/{table}.csv` (its
    header names the source; `#` lines are notes). A run of n requests takes n of its rows: seed 0 the first n
    in the table's order (the order the source's client drew them), another seed a seeded permutation of them;
    past the end it starts over. `max_input` / `max_total`: the longest prompt and request its client keeps (its
    filter), what a server for it must hold."""

    table: str
    max_input: int
    max_total: int

    def rows(self) -> np.ndarray:
        """The table as an (n, 2) integer array, read and checked against the filter once."""
        return _table(self.table, self.max_input, self.max_total)

    def sample(self, rng: np.random.Generator, n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
        """Prompt and output lengths of n requests (`rng` draws the permutation for a seed other than 0)."""
        rows = self.rows()
        order = np.arange(len(rows)) if seed == 0 else rng.permutation(len(rows))
        picked = rows[order[np.arange(n) % len(rows)]]
        return picked[:, 0].copy(), picked[:, 1].copy()

    def __str__(self) -> str:
        return f"pairs({self.table})"


@cache
def _table(name: str, max_input: int, max_total: int) -> np.ndarray:
    text = resources.files("flopwise.catalog").joinpath("workloads", f"{name}.csv").read_text()
    lines = [ln for ln in text.splitlines() if ln and not ln.startswith("#")][1:]  # (the column names)
    rows = np.array([[int(v) for v in ln.split(",")] for ln in lines], dtype=np.int64)
    if rows.ndim != 2 or rows.shape[1] != 2 or not len(rows) or rows.min() < 1:
        raise WorkloadError(f"catalog table '{name}' must hold rows of two whole token counts >= 1")
    if rows[:, 0].max() > max_input or rows.sum(axis=1).max() > max_total:
        raise WorkloadError(f"catalog table '{name}' holds requests beyond its filter ({max_input} prompt / "
                            f"{max_total} total tokens)")
    return rows


def _whole(v: float, name: str, lo: int, hi: int) -> int:
    """A whole number of tokens given as an int or a float (the text form is parsed as floats)."""
    if isinstance(v, bool) or not isinstance(v,
                                             int | float) or not (math.isfinite(v) and v == int(v) and lo <= v <= hi):
        shown = f"{v:g}" if isinstance(v, float) else repr(v)
        raise WorkloadError(f"{name} must be a whole number of tokens in [{lo}, {hi:,}], got {shown}")
    return int(v)


_FORMS = "write 512, uniform:LO:HI, normal:MEAN:STD, lognormal:MEDIAN:SIGMA or file:PATH"


def parse_length(text: str | int) -> LengthDist:
    """A LengthDist from its text form (module docstring), or a fixed length from an int."""
    if isinstance(text, int) and not isinstance(text, bool):
        return LengthDist(kind="fixed", a=text)
    if not isinstance(text, str):
        raise WorkloadError(f"a length must be an integer or text ({_FORMS}), got {text!r}")
    s = text.strip()
    kind, _, rest = s.partition(":")
    if kind == "file" and rest:
        return LengthDist(kind="file", values=_read_lengths(Path(rest)))
    try:
        if not rest:
            return LengthDist(kind="fixed", a=_whole(float(kind), "a fixed length", 1, MAX_TOKENS_PER_REQUEST))
        a, b = (float(v) for v in rest.split(":"))
    except ValueError:
        raise WorkloadError(f"cannot read length {s!r}; {_FORMS}") from None
    if kind not in _KINDS or kind == "fixed":
        raise WorkloadError(f"cannot read length {s!r}: unknown distribution {kind!r}; {_FORMS}")
    return LengthDist(kind=kind, a=a, b=b)


def _read_lengths(path: Path) -> tuple[int, ...]:
    content = read_text(path, "length file", error=WorkloadError)
    bad = WorkloadError(f"length file '{path}' must hold whole numbers, one per line or as a JSON list")
    try:
        vals = json.loads(content) if content.lstrip().startswith("[") else [int(v) for v in content.split()]
    except (ValueError, RecursionError):
        raise bad from None
    if not isinstance(vals, list) or any(isinstance(v, bool) or not isinstance(v, int) for v in vals):
        raise bad
    return tuple(vals)
