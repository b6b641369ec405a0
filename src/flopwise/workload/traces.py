"""Request traces from files.

- JSONL: one object per line with `timestamp` (s; alias `arrival_at`), `input_tokens` (aliases `input_len`,
  `prompt_tokens`), `output_tokens` (aliases `output_len`, `completion_tokens`), optional `prefix_id` and
  `prefix_tokens`. A `prefix_id` without `prefix_tokens` shares the group's shortest prompt minus one token.
- Azure LLM inference trace CSV (Patel et al. 2024; github.com/Azure/AzurePublicDataset):
  `TIMESTAMP,ContextTokens,GeneratedTokens`, TIMESTAMP an ISO date-time (7 fractional digits are cut to 6)
  or seconds. Zero generated tokens count as one.
- ShareGPT JSON (a list of {"conversations": [{"from": "human", "value": ...}, {"from": "gpt", ...}]}):
  the first human turn is the prompt and the reply that follows gives the output length, as in
  `vllm bench serve --dataset-name sharegpt`; pairs under 4 tokens on either side are dropped as vLLM does.
  Without a tokenizer, tokens = ceil(characters / 4) (OpenAI's rule of thumb for English text; code and
  non-Latin scripts run denser). With `tokenizer` (a tokenizer.json path) the `tokenizers` library counts.
Timestamps are shifted so the first request arrives at 0 and sorted; ShareGPT has none (`timed` is False), so
the arrival process re-times it.

Every row is checked as it is read, and a bad one is an error naming its line: timestamps are finite numbers (NaN,
what pandas writes for a missing value, would stall the simulator's clock), token counts whole numbers (an
integral float such as 12.0 is accepted), at least 1 (the Azure trace's 0 generated tokens count as one).
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from flopwise.errors import WorkloadError
from flopwise.specs.defaults import MAX_TOKENS_PER_REQUEST
from flopwise.validate import read_text
from flopwise.workload.spec import RequestSpec

__all__ = ["Trace", "load_trace", "check_span", "CHARS_PER_TOKEN"]

CHARS_PER_TOKEN = 4.0
_TS = ("timestamp", "arrival_at")
_IN = ("input_tokens", "input_len", "prompt_tokens")
_OUT = ("output_tokens", "output_len", "completion_tokens")


@dataclass(frozen=True, slots=True)
class Trace:
    requests: tuple[RequestSpec, ...]
    timed: bool  # whether arrival_at comes from the file


def load_trace(path: str | Path, tokenizer: str | Path | None = None) -> Trace:
    """Read a trace; the format follows the extension (.jsonl, .csv, .json)."""
    p = Path(path)
    if p.is_dir():
        raise WorkloadError(f"trace file '{p}' is a directory; give the file itself")
    if not p.is_file():
        raise WorkloadError(f"trace file '{p}' " + ("is not a regular file" if p.exists() else "does not exist"))
    suffix = p.suffix.lower()
    if suffix == ".jsonl":
        return _load_jsonl(p)
    if suffix == ".csv":
        return _load_azure_csv(p)
    if suffix == ".json":
        return _load_sharegpt(p, _counter(tokenizer))
    raise WorkloadError(f"trace '{p}': unknown format '{suffix}'; use .jsonl, .csv (Azure) or .json (ShareGPT)")


MAX_TRACE_SPAN_S = 366 * 86400.0  # a year: the public traces span an hour (Azure 2023) to a few months (BurstGPT)


def check_span(name: str, requests: Sequence[RequestSpec]) -> None:
    """Trace rows whose arrivals, replayed as given, span more than a year: timestamps in another unit (ms, ns) or a
    stray value, which would replay as a near-empty run at ~0 requests/s. (Not checked where a rate or a
    concurrency replaces the timestamps.)"""
    times = [r.arrival_at for r in requests]
    span = max(times) - min(times) if times else 0.0
    if span > MAX_TRACE_SPAN_S:
        raise WorkloadError(f"trace '{name}': its timestamps span {span:.3g} s ({span / 86400:.3g} days), more than "
                            "a year; flopwise reads seconds: convert milliseconds or nanoseconds, or drop stray rows")


def _pick(row: dict[str, Any], keys: tuple[str, ...], where: str, required: bool = True) -> Any:
    for k in keys:
        if k in row and row[k] is not None:
            return row[k]
    if required:
        raise WorkloadError(f"{where}: missing field '{keys[0]}' (aliases: {', '.join(keys[1:]) or 'none'})")
    return None


def _seconds(v: Any, where: str, name: str) -> float:
    if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
        raise WorkloadError(f"{where}: {name} must be a finite number of seconds, got {v!r}")
    return float(v)


def _tokens(v: Any, where: str, name: str, lo: int = 1) -> int:
    if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v) or v != int(v):
        raise WorkloadError(f"{where}: {name} must be a whole number of tokens, got {v!r}")
    if not lo <= v <= MAX_TOKENS_PER_REQUEST:
        raise WorkloadError(f"{where}: {name} must be in [{lo}, {MAX_TOKENS_PER_REQUEST:,}], got {int(v)}")
    return int(v)


def _load_jsonl(p: Path) -> Trace:
    rows = []
    for i, line in enumerate(read_text(p, "trace file", error=WorkloadError).splitlines(), 1):
        if not line.strip():
            continue
        where = f"{p.name}:{i}"
        try:
            row = json.loads(line)
        except json.JSONDecodeError as e:
            raise WorkloadError(f"{where}: not valid JSON ({e.msg})") from None
        except RecursionError:
            raise WorkloadError(f"{where}: nests too deeply to be a trace row") from None
        if not isinstance(row, dict):
            raise WorkloadError(f"{where}: each line must be a JSON object with timestamp, input_tokens and "
                                f"output_tokens, got {type(row).__name__}")
        pid, ptok = row.get("prefix_id"), row.get("prefix_tokens")
        if pid is not None and (isinstance(pid, bool) or not isinstance(pid, int | str)):
            raise WorkloadError(f"{where}: prefix_id must be a string or an integer, got {pid!r}")
        rows.append((_seconds(_pick(row, _TS, where), where, "timestamp"),
                     _tokens(_pick(row, _IN, where), where, "input_tokens"),
                     _tokens(_pick(row, _OUT, where), where, "output_tokens"), pid,
                     None if ptok is None else _tokens(ptok, where, "prefix_tokens", lo=0)))
    if not rows:
        raise WorkloadError(f"trace '{p}' has no requests")
    groups: dict[Any, int] = {}
    shortest: dict[Any, int] = {}
    for _, n_in, _, pid, _ in rows:
        if pid is not None:
            groups.setdefault(pid, len(groups))
            shortest[pid] = min(shortest.get(pid, n_in), n_in)
    specs: list[tuple[float, int, int, int | None, int]] = []
    for ts, n_in, n_out, pid, ptok in rows:
        if pid is None:
            specs.append((ts, n_in, n_out, None, 0))
        else:
            specs.append((ts, n_in, n_out, groups[pid], int(ptok) if ptok is not None else max(0, shortest[pid] - 1)))
    return _timed(specs, p)


def _parse_ts(text: str, where: str) -> tuple[float, str]:
    """(seconds, "seconds" or "date-time"): a TIMESTAMP in seconds or as an ISO date-time."""
    try:
        v = float(text)
    except ValueError:
        pass
    else:
        return _seconds(v, where, "TIMESTAMP"), "seconds"
    s = text.strip()
    head, dot, frac = s.partition(".")
    if dot:
        digits = "".join(c for c in frac if c.isdigit())
        s = f"{head}.{digits[:6]}{frac[len(digits):]}"
    try:
        return datetime.fromisoformat(s).timestamp(), "date-time"
    except ValueError:
        raise WorkloadError(f"{where}: cannot read TIMESTAMP '{text}'; use ISO date-time or seconds") from None


def _load_azure_csv(p: Path) -> Trace:
    content = read_text(p, "trace file", error=WorkloadError)
    try:
        reader = csv.DictReader(io.StringIO(content, newline=""))
        need = {"TIMESTAMP", "ContextTokens", "GeneratedTokens"}
        if not reader.fieldnames or not need <= set(reader.fieldnames):
            raise WorkloadError(f"{p.name}: an Azure trace CSV needs the columns TIMESTAMP,ContextTokens,"
                                f"GeneratedTokens; found {reader.fieldnames}")
        specs: list[tuple[float, int, int, int | None, int]] = []
        first_kind = ""
        for i, row in enumerate(reader, 2):
            where = f"{p.name}:{i}"
            ts, kind = _parse_ts(row["TIMESTAMP"] or "", where)
            first_kind = first_kind or kind
            if kind != first_kind:  # mixing the two would put decades between requests
                raise WorkloadError(f"{where}: TIMESTAMP '{row['TIMESTAMP']}' is in {kind} but the first row's is in "
                                    f"{first_kind}; use one form for every row")
            try:
                n_in, n_out = int(row["ContextTokens"]), int(row["GeneratedTokens"])
            except (TypeError, ValueError):
                raise WorkloadError(f"{where}: ContextTokens and GeneratedTokens must be integers, got "
                                    f"{row['ContextTokens']!r}, {row['GeneratedTokens']!r}") from None
            # zero tokens count as one (the trace has requests that generated nothing); negative ones are errors
            specs.append((ts, _tokens(n_in or 1, where, "ContextTokens"),
                          _tokens(n_out or 1, where, "GeneratedTokens"), None, 0))
    except csv.Error as e:
        raise WorkloadError(f"{p.name}: not a readable CSV ({e})") from None
    if not specs:
        raise WorkloadError(f"trace '{p}' has no requests")
    return _timed(specs, p)


def _timed(rows: list[tuple[float, int, int, int | None, int]], p: Path) -> Trace:
    rows.sort(key=lambda r: r[0])
    t0 = rows[0][0]
    try:
        return Trace(tuple(RequestSpec(arrival_at=ts - t0, input_tokens=n_in, output_tokens=n_out, prefix_id=pid,
                                       prefix_tokens=ptok) for ts, n_in, n_out, pid, ptok in rows), True)
    except WorkloadError as e:
        raise WorkloadError(f"trace '{p}': {e}") from None


def _counter(tokenizer: str | Path | None) -> Callable[[str], int]:
    if tokenizer is None:
        return lambda text: math.ceil(len(text) / CHARS_PER_TOKEN)
    try:
        from tokenizers import Tokenizer
    except ImportError:
        raise WorkloadError("--tokenizer needs the `tokenizers` package (pip install tokenizers); "
                            "leave it out to use the ~4 characters per token estimate") from None
    tok_path = Path(tokenizer)
    if tok_path.is_dir():
        tok_path = tok_path / "tokenizer.json"
    if not tok_path.is_file():
        raise WorkloadError(f"tokenizer '{tokenizer}' not found; pass a tokenizer.json file or its directory")
    try:
        tok = Tokenizer.from_file(str(tok_path))
    except Exception as e:  # tokenizers raises a bare Exception for a file it cannot read
        raise WorkloadError(f"tokenizer '{tok_path}' could not be loaded ({str(e).splitlines()[0][:120]}); pass a "
                            "Hugging Face tokenizer.json") from None
    return lambda text: len(tok.encode(text, add_special_tokens=False).ids)


def _load_sharegpt(p: Path, count: Callable[[str], int]) -> Trace:
    try:
        data = json.loads(read_text(p, "trace file", error=WorkloadError))
    except json.JSONDecodeError as e:
        raise WorkloadError(f"{p.name}: not valid JSON ({e.msg} at line {e.lineno})") from None
    except RecursionError:
        raise WorkloadError(f"{p.name}: nests too deeply to be a ShareGPT file") from None
    if not isinstance(data, list):
        raise WorkloadError(f"{p.name}: a ShareGPT file is a JSON list of objects with 'conversations'")
    specs = []
    for k, item in enumerate(data):
        conv = item.get("conversations") if isinstance(item, dict) else None
        if conv is not None and not (isinstance(conv, list) and all(isinstance(t, dict) for t in conv)):
            raise WorkloadError(f"{p.name}: item {k}: 'conversations' must be a list of objects with 'from' and "
                                f"'value', got {str(conv)[:60]!r}")
        if not conv or len(conv) < 2:
            continue
        n_in, n_out = count(str(conv[0].get("value", ""))), count(str(conv[1].get("value", "")))
        if n_in >= 4 and n_out >= 4:
            specs.append(RequestSpec(arrival_at=0.0, input_tokens=n_in, output_tokens=n_out))
    if not specs:
        raise WorkloadError(f"{p.name}: no conversation with a prompt and a reply of >= 4 tokens each")
    return Trace(tuple(specs), False)
