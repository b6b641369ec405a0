"""Measured beside predicted: one bench run's summary next to the simulator's for the same requests.

Rows compare mean / p50 / p99 of TTFT, TPOT, ITL and E2E and the throughputs; error_pct = 100 * (predicted -
measured) / measured. The prediction itself is made above this layer (`calibrate/predict.py`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from flopwise.metrics.summary import RunSummary

__all__ = ["Comparison", "compare_summaries"]

_ROWS = [(m, s) for m in ("ttft_ms", "tpot_ms", "itl_ms", "e2e_ms") for s in ("mean", "p50", "p99")] + [
    ("request_throughput", None), ("output_tokens_per_s", None)]


@dataclass(frozen=True, slots=True, kw_only=True)
class Comparison:
    setup: dict[str, Any]
    rows: tuple[tuple[str, float | None, float | None, float | None], ...]  # (metric, measured, predicted, err%)

    def to_dict(self) -> dict[str, Any]:
        return {"setup": self.setup, "rows": [{"metric": m, "measured": a, "predicted": b, "error_pct": e}
                                              for m, a, b, e in self.rows]}


def _value(s: RunSummary, metric: str, stat: str | None) -> float | None:
    if stat:
        return s.latency(metric).get(stat)
    return s.request_throughput if metric == "request_throughput" else s.output_tokens_per_s


def compare_summaries(measured: RunSummary, predicted: RunSummary, setup: dict[str, Any]) -> Comparison:
    """The comparison rows of two run summaries (`metrics.summarize`)."""
    rows = []
    for metric, stat in _ROWS:
        a, b = _value(measured, metric, stat), _value(predicted, metric, stat)
        err = 100.0 * (b - a) / a if a and b is not None else None
        rows.append((f"{metric}.{stat}" if stat else metric, a, b, err))
    return Comparison(setup=setup, rows=tuple(rows))
