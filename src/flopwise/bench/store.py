"""The results store: never lose a measurement.

A run directory holds
    run.json               the run's configuration (never the API key) and one entry per session
    requests.jsonl         one line per finished request, appended and flushed as each completes
                           (warm-up and failed requests included, flagged), so Ctrl-C or a crash leaves a
                           complete file up to the last finished request
    server_metrics.jsonl   Prometheus scrapes (before, during and after each session)
    summary.json           the summary, rewritten at the end and by `flopwise bench report`
    requests.csv           per-request latencies as columns (`bench.export`), rewritten with summary.json
    vllm_result.json       the run as `vllm bench serve --save-result` writes one (`bench.export`), likewise

Instants in a session are seconds since that session's start (one monotonic clock). A resumed run adds a
session; its duration is the sum of the sessions' own durations (first arrival to last completion in each), so
the pause between sessions never dilutes throughput. When a request id appears more than once (a cancelled
request sent again on resume), its last line wins.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from flopwise.errors import WorkloadError
from flopwise.metrics.summary import RequestRecord

__all__ = ["RunStore", "SavedRun", "load_run", "find_runs", "write_summary", "json_safe", "RUN_FILE", "REQUESTS_FILE",
           "SUMMARY_FILE"]

RUN_FILE = "run.json"
REQUESTS_FILE = "requests.jsonl"
SERVER_FILE = "server_metrics.jsonl"
SUMMARY_FILE = "summary.json"
ROWS_FILE = "requests.csv"
VLLM_RESULT_FILE = "vllm_result.json"


class RunStore:
    """Appends one run's records. `open` starts a session (a new run, or a resume of a saved one)."""

    def __init__(self, root: Path, config: dict[str, Any], *, resume: bool = False) -> None:
        self.root = Path(root)
        try:
            self.root.mkdir(parents=True, exist_ok=True)
        except OSError as e:  # a path under a file, a read-only or virtual file system: before any request is sent
            raise WorkloadError(f"--out {self.root}: cannot make the results directory ({e.strerror or e}); "
                                "choose a writable path") from e
        run_file = self.root / RUN_FILE
        if run_file.exists() and not resume:
            raise WorkloadError(f"{self.root} already holds a run; pass --resume to continue it, or another --out")
        if resume and not run_file.exists():
            raise WorkloadError(f"--resume: {self.root} holds no run ({RUN_FILE} missing)")
        meta: dict[str, Any] = _read_meta(run_file) if resume else {"config": config, "sessions": []}
        self.config: dict[str, Any] = meta["config"]
        self.session = len(meta["sessions"])
        meta["sessions"].append({"session": self.session, "started_unix_s": time.time()})
        self._meta = meta
        _write_json(run_file, meta)
        self._requests: IO[str] = open(self.root / REQUESTS_FILE, "a", encoding="utf-8")
        self._server: IO[str] = open(self.root / SERVER_FILE, "a", encoding="utf-8")

    def update_session(self, **fields: Any) -> None:
        """Add facts about this session to run.json (measured phase start, client CPU, prompt counter, ...)."""
        self._meta["sessions"][-1].update(fields)
        _write_json(self.root / RUN_FILE, self._meta)

    def append(self, rec: RequestRecord, *, is_warmup: bool = False) -> None:
        row = rec.to_dict()
        row.update(session=self.session, is_warmup=is_warmup)
        self._requests.write(json.dumps(row, separators=(",", ":")) + "\n")
        self._requests.flush()

    def append_scrape(self, at: float, phase: str, metrics: dict[str, float]) -> None:
        row = {"session": self.session, "at": at, "phase": phase, "metrics": metrics}
        self._server.write(json.dumps(row, separators=(",", ":")) + "\n")
        self._server.flush()

    def close(self) -> None:
        self._requests.close()
        self._server.close()


@dataclass(frozen=True, slots=True, kw_only=True)
class SavedRun:
    root: Path
    config: dict[str, Any]
    records: list[RequestRecord]
    sessions: list[int]
    session_of: dict[int, int]
    scrapes: list[dict[str, Any]]
    num_bad_lines: int
    session_meta: tuple[dict[str, Any], ...] = ()

    def meta_of(self, session: int) -> dict[str, Any]:
        """run.json's entry for `session` ({} when absent)."""
        return next((m for m in self.session_meta if m.get("session") == session), {})

    def done_ids(self) -> set[int]:
        """Request ids already measured (anything but cancelled): a resume skips them."""
        return {r.request_id for r in self.records if r.error_kind != "cancelled"}

    def duration_s(self) -> float:
        """Sum over sessions of (last completion - first arrival) within the session."""
        total = 0.0
        for s in self.sessions:
            recs = [r for r in self.records if self.session_of[r.request_id] == s]
            ends = [r.token_times[-1] for r in recs if r.ok]
            if ends:
                total += max(ends) - min(r.arrival_at for r in recs)
        return total


def load_run(root: str | Path) -> SavedRun:
    """Read a run directory; a trailing partial line (a crash mid-write) is skipped and counted."""
    root = Path(root)
    run_file = root / RUN_FILE
    if not run_file.exists():
        raise WorkloadError(f"{root} is not a bench run ({RUN_FILE} missing)")
    meta = _read_meta(run_file)
    latest: dict[int, tuple[RequestRecord, int]] = {}
    bad = 0
    req_file = root / REQUESTS_FILE
    if not req_file.is_file():  # a run writes it as it starts: without it nothing can be rebuilt (nor overwritten)
        raise WorkloadError(f"{root} has no {REQUESTS_FILE}: not a complete bench run (every summary is rebuilt from "
                            "its per-request records)")
    for line in _lines(req_file):
        try:
            row = json.loads(line)
            if not isinstance(row, dict):
                raise ValueError("not an object")
            if row.get("is_warmup"):
                continue
            rec = RequestRecord.from_dict(row)
            _check_record(rec)
            latest[int(rec.request_id)] = (rec, int(row.get("session", 0)))
        except (ValueError, TypeError, KeyError, OverflowError):
            bad += 1
    scrapes = []
    srv = root / SERVER_FILE
    for line in _lines(srv):
        try:
            row = json.loads(line)
            if not isinstance(row, dict) or not isinstance(row.get("metrics"), dict) or \
                    not isinstance(row.get("session"), int) or row.get("phase") not in ("before", "during", "after"):
                raise ValueError("not a scrape")
            scrapes.append(row)
        except ValueError:
            bad += 1
    ids = sorted(latest)
    return SavedRun(root=root, config=meta["config"], records=[latest[i][0] for i in ids],
                    sessions=sorted({s for _, s in latest.values()}), session_of={i: latest[i][1] for i in ids},
                    scrapes=scrapes, num_bad_lines=bad,
                    session_meta=tuple(m for m in meta["sessions"] if isinstance(m, dict)))


def _read_meta(run_file: Path) -> dict[str, Any]:
    """run.json, checked: an object with a "config" object and a "sessions" list."""
    try:
        meta = json.loads(run_file.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise WorkloadError(f"{run_file} is damaged ({e}); it is not a readable bench run") from None
    if not isinstance(meta, dict) or not isinstance(meta.get("config"), dict) or \
            not isinstance(meta.get("sessions"), list):
        raise WorkloadError(f"{run_file} is damaged (expected an object with \"config\" and \"sessions\")")
    return meta


def _lines(path: Path) -> list[str]:
    if not path.exists():
        return []
    return path.read_bytes().decode("utf-8", "replace").splitlines()


def _check_record(rec: RequestRecord) -> None:
    """Raise ValueError for a stored record whose fields have the wrong type (a damaged or foreign file)."""
    nums = (rec.arrival_at, *(t for t in rec.token_times))
    if not isinstance(rec.token_times, list) or not all(isinstance(x, (int, float)) and x == x for x in nums):
        raise ValueError("bad times")
    if not isinstance(rec.input_tokens, int) or not isinstance(rec.output_tokens, int):
        raise ValueError("bad token counts")
    if rec.sent_at is not None and not isinstance(rec.sent_at, (int, float)):
        raise ValueError("bad sent_at")
    if rec.chunk_tokens is not None and (not isinstance(rec.chunk_tokens, list) or
                                         len(rec.chunk_tokens) != len(rec.token_times)):
        raise ValueError("bad chunk_tokens")


def find_runs(root: str | Path) -> list[Path]:
    """`root` itself if it is a run, else the runs directly under it (a sweep), in name order."""
    root = Path(root)
    if (root / RUN_FILE).exists():
        return [root]
    runs = sorted(p for p in root.iterdir() if (p / RUN_FILE).exists()) if root.is_dir() else []
    if not runs:
        raise WorkloadError(f"no bench runs in {root} (looked for {RUN_FILE} there and one level down)")
    return runs


def write_summary(root: str | Path, summary: dict[str, Any]) -> None:
    _write_json(Path(root) / SUMMARY_FILE, summary)


def write_json(path: str | Path, obj: Any) -> None:
    """`obj` as JSON at `path`, atomically (a temporary file renamed)."""
    _write_json(Path(path), obj)


def _write_json(path: Path, obj: Any) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(obj, indent=2, default=_json_default, allow_nan=False) if _finite(obj)
                   else json.dumps(json_safe(obj), indent=2, default=_json_default, allow_nan=False))
    tmp.replace(path)


def _json_default(o: Any) -> Any:
    return str(o)


def _finite(obj: Any) -> bool:
    if isinstance(obj, float):
        return obj == obj and obj not in (float("inf"), float("-inf"))
    if isinstance(obj, dict):
        return all(_finite(v) for v in obj.values())
    if isinstance(obj, (list, tuple)):
        return all(_finite(v) for v in obj)
    return True


def json_safe(obj: Any) -> Any:
    """`obj` with every non-finite float as a string ("inf", "nan"): the files stay valid JSON."""
    if isinstance(obj, float) and not _finite(obj):
        return str(obj)
    if isinstance(obj, dict):
        return {k: json_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [json_safe(v) for v in obj]
    return obj
