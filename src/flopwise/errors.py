"""One exception family for everything a user can get wrong.

    FlopwiseError
    ├── SpecError               a spec could not be built
    │   ├── ModelConfigError    config.json malformed, missing a field, unknown architecture
    │   ├── UnknownModelError   not a file, directory or catalog id
    │   ├── UnknownHardwareError
    │   ├── PrecisionError      unknown weight/KV format, or one the hardware cannot run
    │   ├── WorkloadError       bad lengths, rates, SLA strings, traces, output paths
    │   └── ArgumentError       a Python API argument of the wrong type (also a TypeError)
    ├── DoesNotFitError         the deployment's weights (or one sequence) exceed memory
    ├── InfeasibleError         no configuration can meet the request (e.g. an impossible SLA)
    └── CalibrationError        no parameter could be fitted, or the measurements are unusable
    FlopwiseWarning             (a UserWarning) something worth knowing that does not stop the work

Every message says what was wrong and how to fix it; the CLI prints it as one line and exits non-zero.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable

__all__ = [
    "FlopwiseError",
    "SpecError",
    "ModelConfigError",
    "UnknownModelError",
    "UnknownHardwareError",
    "PrecisionError",
    "WorkloadError",
    "ArgumentError",
    "DoesNotFitError",
    "InfeasibleError",
    "CalibrationError",
    "FlopwiseWarning",
    "suggest",
]


class FlopwiseError(Exception):
    """Base class: a problem with the user's input, explained in one line (a value the message quotes may hold a
    newline or a tab: whitespace runs become one space)."""

    def __init__(self, message: str = "", *args: object) -> None:
        super().__init__(" ".join(str(message).split()), *args)


class SpecError(FlopwiseError):
    pass


class ModelConfigError(SpecError):
    pass


class UnknownModelError(SpecError):
    pass


class UnknownHardwareError(SpecError):
    pass


class PrecisionError(SpecError):
    pass


class WorkloadError(SpecError):
    pass


class ArgumentError(SpecError, TypeError):
    pass


class DoesNotFitError(FlopwiseError):
    pass


class InfeasibleError(FlopwiseError):
    pass


class CalibrationError(FlopwiseError):
    pass


class FlopwiseWarning(UserWarning):
    """A warning from flopwise (e.g. credentials over plain HTTP); the CLI prints it as one line."""


def suggest(name: str, choices: Iterable[str], n: int = 3) -> str:
    """' Did you mean: a, b?' for the closest names, or '' when nothing is close. Names the given one heads as a
    whole dash-separated part come first ('h100' -> h100-sxm, h100-pcie, h100-nvl), then difflib's closest."""
    key, pool = name.lower(), list(dict.fromkeys(choices))
    spelt = {c.lower(): c for c in reversed(pool)}  # matched case-insensitively, shown as the catalog spells them
    heads = [c for c in pool if key and c.lower().startswith(key + "-")]
    close = heads[:n] + [spelt[c] for c in difflib.get_close_matches(key, list(spelt), n=n, cutoff=0.5)
                         if spelt[c] not in heads]
    return f" Did you mean: {', '.join(close[:n])}?" if close else ""
