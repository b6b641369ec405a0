"""Runs in other shapes: per-request columns (CSV, Parquet) and `vllm bench serve`'s result JSON, both ways.

Per-request columns (`request_rows`), one row per measured request, failed ones included (latencies empty):
    request_id, arrival_at, sent_at (s, the run's clock), input_tokens (server's count), input_tokens_requested
    (client's), output_tokens, output_tokens_source, num_chunks, ttft_ms (from the scheduled arrival),
    ttft_from_send_ms, tpot_ms, itl_ms_mean, itl_ms_max, e2e_ms, e2e_from_send_ms, send_lag_ms, error_kind, error

`vllm bench serve --save-result` JSON (`to_vllm_result`, `records_from_vllm_result`), its keys as vLLM writes
them: duration, completed, failed, total_input_tokens, total_output_tokens, request_throughput, request_goodput,
output_throughput, total_token_throughput, per-request lists (input_lens, output_lens, ttfts, itls, latencies,
start_times, errors; seconds), and mean_/median_/std_/p50_/p90_/p95_/p99_ for ttft, tpot, itl and e2el (ms).
vLLM's definitions, as its `calculate_metrics` computes them: TTFT and latency (E2E) from the send; TPOT =
(latency - ttft) / (output_len - 1) over requests with more than one token; ITL every chunk gap; totals over
completed requests; `failed` counts every request that did not complete (flopwise's failed and cancelled).
Written from a flopwise run, `duration` is flopwise's (first scheduled send to last token); read into flopwise,
a vLLM request's arrival is its send (vLLM keeps no schedule), so ttft_ms equals ttft_from_send_ms.
"""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from flopwise.bench.transport import chunk_token_counts
from flopwise.errors import WorkloadError
from flopwise.metrics.summary import RequestRecord, RunSummary

__all__ = ["request_rows", "write_rows", "to_vllm_result", "records_from_vllm_result", "load_vllm_result",
           "VLLM_PERCENTILES"]

VLLM_PERCENTILES = (50, 90, 95, 99)


def _ms(v: float | None) -> float | None:
    return None if v is None else round(v, 6)


def request_rows(records: Sequence[RequestRecord]) -> list[dict[str, Any]]:
    """One dict per record, the columns above."""
    rows = []
    for r in records:
        ok = r.ok
        itl = r.itls_ms() if ok else np.empty(0)
        rows.append({
            "request_id": r.request_id, "arrival_at": r.arrival_at, "sent_at": r.sent_at,
            "input_tokens": r.input_tokens, "input_tokens_requested": r.input_tokens_requested,
            "output_tokens": r.num_output_tokens if ok else r.output_tokens,
            "output_tokens_source": r.output_tokens_source, "num_chunks": len(r.token_times),
            "ttft_ms": _ms(r.ttft_ms) if ok else None, "ttft_from_send_ms": _ms(r.ttft_from_send_ms) if ok else None,
            "tpot_ms": _ms(r.tpot_ms) if ok else None,
            "itl_ms_mean": _ms(float(itl.mean())) if itl.size else None,
            "itl_ms_max": _ms(float(itl.max())) if itl.size else None,
            "e2e_ms": _ms(r.e2e_ms) if ok else None, "e2e_from_send_ms": _ms(r.e2e_from_send_ms) if ok else None,
            "send_lag_ms": _ms(r.send_lag_ms), "error_kind": r.error_kind, "error": r.error,
        })
    return rows


def write_rows(path: str | Path, rows: list[dict[str, Any]]) -> Path:
    """`rows` as .csv, or .parquet (needs the `parquet` extra: pyarrow)."""
    path = Path(path)
    if path.suffix.lower() == ".parquet":
        try:
            import pyarrow as pa  # optional extra `parquet`
            import pyarrow.parquet as pq
        except ImportError:
            raise WorkloadError("writing .parquet needs pyarrow (pip install 'flopwise[parquet]'); "
                                "requests.csv has the same columns") from None
        pq.write_table(pa.Table.from_pylist(rows), path)
    elif path.suffix.lower() == ".csv":
        with path.open("w", newline="", encoding="utf-8") as f:
            w = csv.DictWriter(f, fieldnames=list(rows[0]) if rows else ["request_id"])
            w.writeheader()
            w.writerows(rows)
    else:
        raise WorkloadError(f"'{path}': use a .csv or .parquet file name")
    return path


def _stats(prefix: str, values_s: Sequence[float], out: dict[str, Any]) -> None:
    a = np.asarray(values_s, dtype=float) * 1e3 if len(values_s) else np.zeros(1)
    out[f"mean_{prefix}_ms"] = float(a.mean())
    out[f"median_{prefix}_ms"] = float(np.median(a))
    out[f"std_{prefix}_ms"] = float(a.std())
    for p in VLLM_PERCENTILES:
        out[f"p{p}_{prefix}_ms"] = float(np.percentile(a, p))


def to_vllm_result(records: Sequence[RequestRecord], summary: RunSummary, *, model: str,
                   request_rate: float | None, burstiness: float, max_concurrency: int | None,
                   endpoint: str) -> dict[str, Any]:
    """A flopwise run as `vllm bench serve --save-result` writes its own (see the module docstring)."""
    ok = [r for r in records if r.ok]

    def start(r: RequestRecord) -> float:
        return r.sent_at if r.sent_at is not None else r.arrival_at

    ttfts = [r.token_times[0] - start(r) for r in ok]
    lats = [r.token_times[-1] - start(r) for r in ok]
    tpots = [(lat - t) / (r.num_output_tokens - 1) for r, t, lat in zip(ok, ttfts, lats,
                                                                        strict=True) if r.num_output_tokens > 1]
    itls = [g for r in ok for g in np.diff(r.token_times).tolist()]
    total_in = sum(r.input_tokens for r in ok)
    total_out = sum(r.num_output_tokens for r in ok)
    dur = summary.duration_s or 0.0
    out: dict[str, Any] = {
        "backend": "openai-chat" if endpoint == "chat" else "openai", "endpoint_type": endpoint,
        "label": "flopwise", "model_id": model, "num_prompts": len(records),
        "request_rate": request_rate if request_rate is not None and math.isfinite(request_rate) else "inf",
        "burstiness": burstiness, "max_concurrency": max_concurrency,
        "duration": dur, "completed": len(ok), "failed": len(records) - len(ok),
        "total_input_tokens": total_in, "total_output_tokens": total_out,
        "request_throughput": len(ok) / dur if dur else 0.0,
        "request_goodput": summary.goodput_vllm if summary.sla else None,
        "output_throughput": total_out / dur if dur else 0.0,
        "total_token_throughput": (total_in + total_out) / dur if dur else 0.0,
        "input_lens": [r.input_tokens for r in records],
        "output_lens": [r.num_output_tokens if r.ok else 0 for r in records],
        "ttfts": [r.token_times[0] - start(r) if r.ok else 0.0 for r in records],
        "itls": [np.diff(r.token_times).tolist() if r.ok else [] for r in records],
        "latencies": [r.token_times[-1] - start(r) if r.ok else 0.0 for r in records],
        "start_times": [start(r) for r in records],
        "errors": ["" if r.ok else f"{r.error_kind}: {r.error}" for r in records],
    }
    _stats("ttft", ttfts, out)
    _stats("tpot", tpots, out)
    _stats("itl", itls, out)
    _stats("e2el", lats, out)
    return out


def records_from_vllm_result(d: dict[str, Any]) -> list[RequestRecord]:
    """The per-request lists of a vLLM result as flopwise records (arrival = send; see the module docstring).
    A request failed where its error is non-empty or it has no TTFT."""
    try:
        n = len(d["ttfts"])
        cols = [d[k] for k in ("ttfts", "itls", "latencies", "input_lens", "output_lens")]
        starts = d.get("start_times") or [0.0] * n
        errors = d.get("errors") or [""] * n
    except (KeyError, TypeError) as e:
        raise WorkloadError(f"not a `vllm bench serve` result with per-request lists ({e}); "
                            "save it with --save-result (and without --save-detailed off)") from None
    if any(len(c) != n for c in (*cols, starts, errors)):
        raise WorkloadError("the vLLM result's per-request lists have different lengths")
    recs = []
    for i, (ttft, itl, _lat, n_in, n_out) in enumerate(zip(*cols, strict=True)):
        st = float(starts[i] or 0.0)
        failed = bool(errors[i]) or not ttft
        times = [] if failed else (st + ttft + np.concatenate(([0.0], np.cumsum(itl or [])))).tolist()
        m = len(times)
        counts = chunk_token_counts(int(n_out or 0), [""] * m, [None] * m) if m and n_out and n_out != m else None
        recs.append(RequestRecord(request_id=i, arrival_at=st, input_tokens=int(n_in or 0),
                                  output_tokens=int(n_out or 0), token_times=times, sent_at=st, chunk_tokens=counts,
                                  error=str(errors[i]) if failed else None,
                                  error_kind=("vllm_error" if errors[i] else "empty_response") if failed else None,
                                  output_tokens_source="usage"))
    return recs


def load_vllm_result(path: str | Path) -> dict[str, Any]:
    try:
        d = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise WorkloadError(f"cannot read the vLLM result {path}: {e}") from None
    if not isinstance(d, dict):
        raise WorkloadError(f"{path} is not a `vllm bench serve` result (expected a JSON object)")
    return d
