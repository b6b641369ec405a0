"""Measured beside predicted: replay a run's own requests through flopwise's simulator.

The simulated workload is the measured one: the same requests in the same order with the server's own token
counts (usage prompt and completion tokens), the same open-loop send times (scheduled, relative to the first) or
the same closed-loop concurrency, and the shared prefix (if any). Rows compare mean / p50 / p99 of TTFT, TPOT,
ITL and E2E and the throughputs; error_pct = 100 * (predicted - measured) / measured.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from flopwise.bench.runner import RunReport
from flopwise.bench.store import load_run
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
    """Simulate `report`'s run on (model config, gpu, tp) and compare with what was measured."""
    from flopwise.api import deployment
    from flopwise.sim import simulate
    from flopwise.workload.spec import RequestSpec, Workload

    saved = load_run(report.root)
    ok = [r for r in saved.records if r.ok]
    if not ok:
        from flopwise.errors import WorkloadError
        raise WorkloadError(f"{report.root} has no completed request to compare with")
    cfg = report.config
    t0 = min(r.arrival_at for r in ok)
    pc = cfg.prompts
    specs = []
    for r in sorted(ok, key=lambda r: r.arrival_at):
        prefix = pc.shared_prefix_len if pc.shared_prefix_len and pc.shared_prefix_len <= r.input_tokens else 0
        specs.append(RequestSpec(0.0 if cfg.load.is_closed else r.arrival_at - t0, max(r.input_tokens, 1),
                                 max(r.num_output_tokens, 1),
                                 (r.request_id % pc.num_prefixes) if prefix else None, prefix))
    wl = Workload(tuple(specs), concurrency=cfg.load.concurrency if cfg.load.is_closed else None, name="measured")
    dep = deployment(model, gpu, tp=tp, hardware_file=hardware_file, **knobs)
    sim = simulate(dep, wl, sla=parse_sla(cfg.sla) if cfg.sla else None).summary()
    rows = []
    for metric, stat in _ROWS:
        a = report.summary[metric][stat] if stat else report.summary[metric]
        b = sim[metric][stat] if stat else sim[metric]
        err = 100.0 * (b - a) / a if a and b is not None else None
        rows.append((f"{metric}.{stat}" if stat else metric, a, b, err))
    return Comparison({"model": model, "gpu": gpu, "tp": tp, "run_dir": str(report.root),
                       "load": cfg.load.label}, tuple(rows))
