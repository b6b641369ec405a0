"""Checks for the values that enter flopwise: CLI options, Python API arguments, config.json, hardware and engine
files, traces and length files. Each check fails with one line that names the input, the value given and what
would be accepted, as a `flopwise.errors` exception (the CLI prints it and exits with 2).

- `number`, `integer`, `boolean`, `text`: one scalar. Booleans are not numbers here, NaN is never a number, and
  infinities only where the caller allows them (a request rate of inf is a burst).
- `read_text`: a user's file as UTF-8 text (missing, a directory, unreadable or binary: one line each).
- `output_path`: a file a command will write, checked before the work starts (its folder exists and is
  writable, it is not a directory, its suffix is one the writer knows).
- `from_table`: a dataclass built from a file's table by pydantic from the dataclass's own annotations (strict
  types, finite numbers, tables where tables belong); the dataclass's `__post_init__` still checks the ranges, so
  each rule has one home whether a spec comes from a file or from Python.
"""

from __future__ import annotations

import json
import math
import numbers
import os
from functools import cache
from pathlib import Path
from typing import Any, TypeVar
from typing import cast as typing_cast

from flopwise.errors import FlopwiseError, SpecError, WorkloadError

__all__ = ["describe_range", "number", "integer", "boolean", "text", "read_text", "output_path", "from_table",
           "TABLE_CONFIG"]

# A spec dataclass that `from_table` builds sets `__pydantic_config__ = TABLE_CONFIG`: a key the dataclass does not
# have is an error, not ignored (a plain dict: pydantic reads it only when a file is validated).
TABLE_CONFIG = {"extra": "forbid"}

T = TypeVar("T")
Error = type[FlopwiseError]


def _fmt(v: float | int) -> str:
    return f"{v:g}" if isinstance(v, float) else f"{v:,}" if abs(v) >= 10**6 else str(v)


def describe_range(lo: float | None = None, hi: float | None = None, *, lo_open: bool = False,
                   hi_open: bool = False, kind: str = "a finite number") -> str:
    """'an integer >= 1', 'a finite number in (0, 1]', ... (what `number` / `integer` accept)."""
    if lo is not None and hi is not None:
        return f"{kind} in {'(' if lo_open else '['}{_fmt(lo)}, {_fmt(hi)}{')' if hi_open else ']'}"
    if lo is not None:
        return f"{kind} {'>' if lo_open else '>='} {_fmt(lo)}"
    if hi is not None:
        return f"{kind} {'<' if hi_open else '<='} {_fmt(hi)}"
    return kind


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def number(value: Any, name: str, *, lo: float | None = None, hi: float | None = None, lo_open: bool = False,
           hi_open: bool = False, allow_inf: bool = False, error: Error = WorkloadError) -> float:
    """`value` as a float if it is a real number (not a bool, not NaN; infinite only with `allow_inf`) within
    [lo, hi] (open ends with lo_open / hi_open); else `error`."""
    kind = "a number" if allow_inf else "a finite number"
    accepted = describe_range(lo, hi, lo_open=lo_open, hi_open=hi_open, kind=kind)
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise error(f"{name} must be {accepted}, got {_show(value)}")
    v = float(value)
    if math.isnan(v) or (math.isinf(v) and not allow_inf):
        raise error(f"{name} must be {accepted}, got {v}")
    if (lo is not None and (v < lo or (lo_open and v == lo))) or (hi is not None and (v > hi or (hi_open and v == hi))):
        raise error(f"{name} must be {accepted}, got {_show(value)}")
    return v


def integer(value: Any, name: str, *, lo: int | None = None, hi: int | None = None,
            error: Error = WorkloadError) -> int:
    """`value` if it is an integer (not a bool, not a float) in [lo, hi]; else `error`."""
    accepted = describe_range(lo, hi, kind="an integer")
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise error(f"{name} must be {accepted}, got {_show(value)}")
    v = int(value)
    if (lo is not None and v < lo) or (hi is not None and v > hi):
        raise error(f"{name} must be {accepted}, got {_fmt(v)}")
    return v


def boolean(value: Any, name: str, *, error: Error = WorkloadError) -> bool:
    if not isinstance(value, bool):
        raise error(f"{name} must be true or false, got {_show(value)}")
    return value


def text(value: Any, name: str, *, choices: tuple[str, ...] | None = None, empty: bool = False,
         error: Error = WorkloadError) -> str:
    """`value` if it is a string (non-empty unless `empty`; one of `choices` where given)."""
    if not isinstance(value, str):
        want = f"one of {', '.join(choices)}" if choices else "a string"
        raise error(f"{name} must be {want}, got {_show(value)}")
    if choices is not None and value not in choices:
        raise error(f"{name} must be one of {', '.join(choices)}, got {_show(value)}")
    if not empty and not value.strip():
        raise error(f"{name} must not be empty")
    return value


def read_text(path: str | Path, what: str, *, error: Error = SpecError) -> str:
    """The file at `path` as text (UTF-8, a byte-order mark allowed). `what` names it in errors ("trace file")."""
    p = Path(path)
    if p.is_dir():
        raise error(f"{what} '{path}' is a directory; give the file itself")
    if not p.is_file():
        raise error(f"{what} '{path}' " + ("is not a regular file" if p.exists() else "does not exist"))
    try:
        data = p.read_bytes()
    except OSError as e:
        raise error(f"{what} '{path}' cannot be read: {e.strerror or e}") from None
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise error(f"{what} '{path}' is not UTF-8 text (byte {e.start} is 0x{data[e.start]:02x}); is it a "
                    "binary or compressed file?") from None


def output_path(path: str | Path, option: str, *, suffixes: tuple[str, ...] | None = None,
                error: Error = WorkloadError) -> Path:
    """`path` if a command can write a file there: not a directory, a known suffix (where `suffixes` is given), in
    an existing writable folder. Called before the work starts, so a typo does not cost a finished run."""
    p = Path(path)
    want = f" ({' or '.join(suffixes)})" if suffixes else ""
    if p.is_dir():
        raise error(f"{option} '{path}' is a directory; give a file name{want}")
    if suffixes is not None and p.suffix.lower() not in suffixes:
        raise error(f"{option} '{path}': use a {' or '.join(suffixes)} file name")
    folder = p.parent
    if not folder.is_dir():
        raise error(f"{option} '{path}': folder '{folder}' does not exist; create it first")
    if not os.access(folder, os.W_OK | os.X_OK) or (p.exists() and not os.access(p, os.W_OK)):
        raise error(f"{option} '{path}' is not writable")
    existed = p.exists()
    try:  # the permission bits do not tell everything (root, read-only or virtual file systems such as /proc)
        with p.open("a"):
            pass
    except OSError as e:
        raise error(f"{option} '{path}' cannot be written: {e.strerror or e}") from None
    if not existed:
        p.unlink(missing_ok=True)
    return p


@cache
def _adapter(cls: type) -> Any:
    # pydantic is imported here, not at the top: only a user's file needs it, and it costs a tenth of a second
    from pydantic import TypeAdapter

    return TypeAdapter(cls)


def _location(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "the table"


def from_table(cls: type[T], table: Any, where: str, *, file: str | None = None, error: Error = SpecError) -> T:
    """A `cls` dataclass from a file's table, validated by pydantic from the dataclass's annotations in strict JSON
    mode: no strings for numbers, tables where tables belong, no unknown keys. The dataclass's `__post_init__`
    checks finiteness and ranges. Type errors get `where` (the file and the entry) in front, the dataclass's own
    errors (which name the entry) `file`."""
    from pydantic import ValidationError

    try:
        payload = json.dumps(table, default=str)
    except (TypeError, ValueError) as e:  # a recursive YAML anchor, keys that are not strings or numbers
        raise error(f"{where}: cannot read the table ({e})") from None
    try:
        out: T = _adapter(typing_cast(Any, cls)).validate_json(payload, strict=True)
        return out
    except ValidationError as e:
        problems = []
        for err in e.errors()[:3]:
            msg = err["msg"]
            if err["type"] == "unexpected_keyword_argument":
                msg = "unknown key"
            got = "" if err["type"] in ("missing_argument", "missing") else f", got {_show(err.get('input'))}"
            problems.append(f"{_location(err['loc'])}: {msg[0].lower() + msg[1:]}{got}")
        more = f" (and {e.error_count() - 3} more)" if e.error_count() > 3 else ""
        raise error(f"{where}: {'; '.join(problems)}{more}") from None
    except FlopwiseError as e:
        raise type(e)(f"{file or where}: {e}") from None
