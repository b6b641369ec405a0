"""Measured beside predicted: replay a run's own requests through flopwise's simulator.

The replay is the one `flopwise calibrate` fits on (`calibrate.bench_runs.measured_workload` and
`replay_config`: one saved-run replay, not two copies): the same requests in the same order with the server's own
token counts (usage prompt and completion tokens), the same open-loop send times (scheduled, relative to the first)
or the same closed-loop concurrency with its sends a millisecond apart, the shared prefix (if any), and prompts cut
to their uncached part where the server reports prefix-cache hits the prompts do not explain. Rows compare mean /
p50 / p99 of TTFT, TPOT, ITL and E2E and the throughputs; error_pct = 100 * (predicted - measured) / measured.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from flopwise.bench.runner import RunReport
from flopwise.bench.store import load_run
from flopwise.errors import WorkloadError
from flopwise.specs.sla import parse_sla

__all__ = ["Comparison", "predict_run"]

_ROWS = [(m, s) for m in ("ttft_ms", "tpot_ms", "itl_ms", "e2e_ms") for s in ("mean", "p50", "p99")] + [
    ("request_throughput", None), ("output_tokens_per_s", None)]


@dataclass(frozen=True, slots=True)
class Comparison:
    setup: dict[str, Any]
    rows: tuple[tuple[str, float | None, float | None, float | None], ...]  # (metric, measured, predicted, err%)

    def to_dict(self) -> dict[str, Any]:
        return {"setup": self.setup, "rows": [{"metric": m, "measured": a, "predicted": b, "error_pct": e}
                                              for m, a, b, e in self.rows]}


def predict_run(report: RunReport, *, model: str, gpu: str, tp: int = 1,
                hardware_file: str | Path | None = None, **knobs: Any) -> Comparison:
    """Simulate `report`'s run on (model config, gpu, tp, and `knobs`: engine, weights, kv, ... as
    `flopwise.deployment` takes them) behind the engine's HTTP server at the run's endpoint, and compare with
    what was measured."""
    from flopwise.api import deployment  # orchestration above bench: the simulator and the calibration replay
    from flopwise.calibrate.bench_runs import measured_workload, replay_config
    from flopwise.sim import simulate

    saved = load_run(report.root)
    if not any(r.ok for r in saved.records):
        raise WorkloadError(f"{report.root} has no completed request to compare with")
    cfg = report.config
    wl = measured_workload(saved, cfg)
    dep = deployment(model, gpu, tp=tp, hardware_file=hardware_file, endpoint=cfg.endpoint, **knobs)
    sim = simulate(dep, wl, replay_config(), sla=parse_sla(cfg.sla) if cfg.sla else None).summary()
    rows = []
    for metric, stat in _ROWS:
        a = report.summary[metric][stat] if stat else report.summary[metric]
        b = sim[metric][stat] if stat else sim[metric]
        err = 100.0 * (b - a) / a if a and b is not None else None
        rows.append((f"{metric}.{stat}" if stat else metric, a, b, err))
    return Comparison({"model": model, "gpu": gpu, "tp": tp, "engine": f"{dep.engine.family}@{dep.engine.version}",
                       "run_dir": str(report.root),
                       "load": cfg.load.label}, tuple(rows))
