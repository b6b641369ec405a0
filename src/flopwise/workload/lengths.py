"""Token-length distributions, sampled as integers >= 1 with numpy's PCG64 (deterministic under a seed).

Text form (the CLI's --input-len / --output-len):
    512                      fixed
    uniform:LO:HI            uniform integers in [LO, HI]
    normal:MEAN:STD          rounded normal, clipped to >= 1
    lognormal:MEDIAN:SIGMA   exp(N(ln MEDIAN, SIGMA)), rounded; mean = MEDIAN * exp(SIGMA^2 / 2)
    file:PATH                resampled with replacement from integers in PATH (one per line, or a JSON list)
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from flopwise.errors import WorkloadError

__all__ = ["LengthDist", "parse_length"]

_KINDS = ("fixed", "uniform", "normal", "lognormal", "file")


@dataclass(frozen=True, slots=True)
class LengthDist:
    """`a`, `b` are the two parameters of `kind` (see the module docstring); `values` backs kind "file"."""

    kind: str
    a: float = 0.0
    b: float = 0.0
    values: tuple[int, ...] = ()
    max_len: int | None = None  # clip samples to this (e.g. the context length)

    def __post_init__(self) -> None:
        if self.kind not in _KINDS:
            raise WorkloadError(f"unknown length distribution '{self.kind}'; use one of {', '.join(_KINDS)}")
        if self.kind == "fixed" and self.a < 1:
            raise WorkloadError(f"a fixed length must be >= 1, got {self.a:g}")
        if self.kind == "uniform" and not 1 <= self.a <= self.b:
            raise WorkloadError(f"uniform:LO:HI needs 1 <= LO <= HI, got {self.a:g}:{self.b:g}")
        if self.kind in ("normal", "lognormal") and (self.a <= 0 or self.b < 0):
            raise WorkloadError(f"{self.kind} needs a positive center and a non-negative spread, "
                                f"got {self.a:g}:{self.b:g}")
        if self.kind == "file" and (not self.values or min(self.values) < 1):
            raise WorkloadError("a length file must hold at least one integer, all >= 1")

    @property
    def mean(self) -> float:
        if self.kind == "fixed":
            return self.a
        if self.kind == "uniform":
            return (self.a + self.b) / 2
        if self.kind == "normal":
            return self.a
        if self.kind == "lognormal":
            return float(self.a * np.exp(self.b**2 / 2))
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
        x = np.maximum(x.astype(np.int64), 1)
        return np.minimum(x, self.max_len) if self.max_len else x

    def __str__(self) -> str:
        if self.kind == "fixed":
            return f"{int(self.a)}"
        if self.kind == "file":
            return f"file({len(self.values)} values)"
        return f"{self.kind}:{self.a:g}:{self.b:g}"


def parse_length(text: str | int) -> LengthDist:
    """A LengthDist from its text form (module docstring)."""
    if isinstance(text, int):
        return LengthDist("fixed", text)
    s = text.strip()
    kind, _, rest = s.partition(":")
    try:
        if not rest:
            return LengthDist("fixed", int(kind))
        if kind == "file":
            return LengthDist("file", values=_read_lengths(Path(rest)))
        a, b = (float(v) for v in rest.split(":"))
        return LengthDist(kind, a, b)
    except ValueError:
        raise WorkloadError(f"cannot read length '{s}'; write 512, uniform:LO:HI, normal:MEAN:STD, "
                            "lognormal:MEDIAN:SIGMA or file:PATH") from None


def _read_lengths(path: Path) -> tuple[int, ...]:
    if not path.is_file():
        raise WorkloadError(f"length file '{path}' does not exist")
    text = path.read_text()
    try:
        vals = json.loads(text) if text.lstrip().startswith("[") else [int(v) for v in text.split()]
        return tuple(int(v) for v in vals)
    except (ValueError, TypeError):
        raise WorkloadError(f"length file '{path}' must hold integers, one per line or as a JSON list") from None
