"""Measured beside predicted: one bench run's summary next to the simulator's for the same requests.

Rows compare mean / p50 / p99 of TTFT, TPOT, ITL and E2E and the throughputs; error_pct = 100 * (predicted -
measured) / measured. The prediction itself is made above this layer (`calibrate/predict.py`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

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


def compare_summaries(measured: Mapping[str, Any], predicted: Mapping[str, Any],
                      setup: dict[str, Any]) -> Comparison:
    """The comparison rows of two run summaries with the shared keys (`metrics.summarize`)."""
    rows = []
    for metric, stat in _ROWS:
        a = measured[metric][stat] if stat else measured[metric]
        b = predicted[metric][stat] if stat else predicted[metric]
        err = 100.0 * (b - a) / a if a and b is not None else None
        rows.append((f"{metric}.{stat}" if stat else metric, a, b, err))
    return Comparison(setup=setup, rows=tuple(rows))
