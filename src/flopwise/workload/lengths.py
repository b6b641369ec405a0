"""Token-length distributions, sampled as integers >= 1 with numpy's PCG64 (deterministic under a seed).

Text form (the CLI's --input-len / --output-len):
    512                      fixed
    uniform:LO:HI            uniform integers in [LO, HI]
    normal:MEAN:STD          rounded normal, clipped to >= 1
    lognormal:MEDIAN:SIGMA   exp(N(ln MEDIAN, SIGMA)), rounded; mean = MEDIAN * exp(SIGMA^2 / 2)
    file:PATH                resampled with replacement from integers in PATH (one per line, or a JSON list)

Lengths are whole tokens: fixed lengths, uniform bounds and file values are integers. Every parameter is finite
and no distribution's mean exceeds `MAX_TOKENS_PER_REQUEST` (samples are clipped to it before they become
integers, so a wide lognormal cannot overflow).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from flopwise.errors import WorkloadError
from flopwise.specs.defaults import MAX_TOKENS_PER_REQUEST
from flopwise.validate import integer, number, read_text

__all__ = ["LengthDist", "parse_length"]

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
