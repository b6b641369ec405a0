"""`flopwise bench` runs as calibration data: the measured workload, replayed through the simulator.

A run directory (`bench.store`) holds each request's arrival, token counts and token times. The simulated
workload is the measured one (as `bench.predict` builds it): the same requests in the same order with the
server's own token counts, the same open-loop send times or closed-loop concurrency. Under a candidate profile
the simulator gives the same summary keys as the run, and the fit compares:

    ttft_ms.p50, ttft_ms.p95, tpot_ms.mean, tpot_ms.p95          (client side, every run)
    server_prefill_ms.mean                                          (vLLM's request_prefill_time histogram,
                                                                     where scraped: scheduled -> first token)

so a run at concurrency 1 pins the prefill and single-sequence decode step, and runs at higher concurrency the
batched steps. Only the deployment's efficiency profile changes between calls: the scheduler and its knobs are
those given (vLLM's server defaults by default).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from flopwise.calibrate.fit import CalibrationError
from flopwise.calibrate.observations import Observations, with_profile
from flopwise.specs.deployment import Deployment
from flopwise.specs.hardware import EfficiencyProfile

__all__ = ["BenchRun", "load_bench_runs", "bench_observations", "measured_workload", "CLIENT_METRICS"]

CLIENT_METRICS = (("ttft_ms", "p50"), ("ttft_ms", "p95"), ("tpot_ms", "mean"), ("tpot_ms", "p95"))


@dataclass(frozen=True, slots=True)
class BenchRun:
    """One measured run: its label, the measured workload, and the values to match by metric name."""

    root: Path
    label: str
    workload: Any  # flopwise.workload.spec.Workload
    measured: dict[str, float]


def measured_workload(saved: Any, cfg: Any) -> Any:
    """The workload of a saved run (bench.store.SavedRun) under its BenchConfig."""
    from flopwise.workload.spec import RequestSpec, Workload

    ok = sorted((r for r in saved.records if r.ok), key=lambda r: r.arrival_at)
    if not ok:
        raise CalibrationError(f"{saved.root} has no completed request to calibrate with")
    t0 = ok[0].arrival_at
    pc = cfg.prompts
    specs = []
    for r in ok:
        prefix = pc.shared_prefix_len if pc.shared_prefix_len and pc.shared_prefix_len <= r.input_tokens else 0
        specs.append(RequestSpec(0.0 if cfg.load.is_closed else r.arrival_at - t0, max(r.input_tokens, 1),
                                 max(r.num_output_tokens, 1), (r.request_id % pc.num_prefixes) if prefix else None,
                                 prefix))
    return Workload(tuple(specs), concurrency=cfg.load.concurrency if cfg.load.is_closed else None,
                    name=f"measured {cfg.load.label}")


def load_bench_runs(paths: Sequence[str | Path]) -> list[BenchRun]:
    """Every run in `paths` (a run directory, or a sweep directory of runs)."""
    from flopwise.bench.prometheus import server_view
    from flopwise.bench.runner import BenchConfig
    from flopwise.bench.store import find_runs, load_run
    from flopwise.metrics.summary import summarize

    out = []
    for p in paths:
        for root in find_runs(p):
            saved = load_run(root)
            cfg = BenchConfig.from_dict(saved.config)
            summary = summarize(saved.records, duration_s=saved.duration_s())
            measured = {}
            for metric, stat in CLIENT_METRICS:
                v = summary[metric][stat]
                if v:
                    measured[f"{metric}.{stat}"] = float(v)
            last = max((s["session"] for s in saved.scrapes), default=None)
            view = server_view([s for s in saved.scrapes if s["session"] == last]) if last is not None else None
            if view is not None and view.prefill_ms_mean:
                measured["server_prefill_ms.mean"] = float(view.prefill_ms_mean)
            out.append(BenchRun(Path(root), cfg.load.label, measured_workload(saved, cfg), measured))
    if not out:
        raise CalibrationError(f"no bench runs under {', '.join(map(str, paths))}")
    return out


def _sim_metrics(dep: Deployment, run: BenchRun, config: Any) -> dict[str, float]:
    from flopwise.sim import simulate

    res = simulate(dep, run.workload, config)
    s = res.summary()
    out = {f"{m}.{st}": s[m][st] for m, st in CLIENT_METRICS if s[m][st] is not None}
    pre = [(rec.token_times[0] - rec.first_scheduled_at) * 1e3 for rec in res.records
           if rec.ok and rec.first_scheduled_at is not None]
    if pre:
        out["server_prefill_ms.mean"] = float(np.mean(pre))
    return out


def bench_observations(runs: Sequence[BenchRun], dep: Deployment, config: Any = None) -> Observations:
    """Observations over all runs; each predict() call simulates every run once."""
    keys = [(i, k) for i, r in enumerate(runs) for k in r.measured]
    measured = np.array([runs[i].measured[k] for i, k in keys])

    def predict(prof: EfficiencyProfile) -> np.ndarray:
        d = with_profile(dep, prof)
        sims = [_sim_metrics(d, r, config) for r in runs]
        return np.array([sims[i].get(k, np.nan) for i, k in keys])

    return Observations(tuple(k for _, k in keys), tuple(f"{runs[i].label} {k}" for i, k in keys), measured,
                        predict)
