"""Measured beside predicted: replay a bench run's own requests through the simulator (`bench --predict`).

The replay is the one `flopwise calibrate` fits on (`calibrate.bench_runs.measured_workload` and
`replay_config`: one saved-run replay, not two copies): the same requests in the same order with the server's own
token counts (usage prompt and completion tokens), the same open-loop send times (scheduled, relative to the first)
or the same closed-loop concurrency with its sends a millisecond apart, the shared prefix (if any), and prompts cut
to their uncached part where the server reports prefix-cache hits the prompts do not explain. The rows are
`bench.comparison`'s.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from flopwise.bench.comparison import Comparison, compare_summaries
from flopwise.bench.runner import RunReport
from flopwise.bench.store import load_run
from flopwise.calibrate.bench_runs import measured_workload, replay_config
from flopwise.errors import WorkloadError
from flopwise.sim import simulate
from flopwise.specs.build import build_deployment
from flopwise.specs.sla import parse_sla

__all__ = ["predict_run"]


def predict_run(report: RunReport, *, model: str, gpu: str, tp: int = 1,
                hardware_file: str | Path | None = None, **knobs: Any) -> Comparison:
    """Simulate `report`'s run on (model config, gpu, tp, and `knobs`: engine, weights, kv, ... as
    `flopwise.deployment` takes them) behind the engine's HTTP server at the run's endpoint, and compare with
    what was measured."""
    saved = load_run(report.root)
    if not any(r.ok for r in saved.records):
        raise WorkloadError(f"{report.root} has no completed request to compare with")
    cfg = report.config
    wl = measured_workload(saved, cfg)
    dep = build_deployment(model, gpu, tp=tp, hardware_file=hardware_file, endpoint=cfg.endpoint, **knobs)
    sim = simulate(dep, wl, replay_config(), sla=parse_sla(cfg.sla) if cfg.sla else None).metrics()
    setup = {"model": model, "gpu": gpu, "tp": tp, "engine": dep.engine.name,
             "run_dir": str(report.root), "load": cfg.load.label}
    return compare_summaries(report.metrics, sim, setup)
