"""`flopwise bench` runs as calibration data: the measured workload, replayed through the simulator.

A run directory (`bench.store`) holds each request's arrival, token counts and token times. The simulated
workload is the measured one (as `calibrate.predict` builds it): the same requests in the same order with the
server's own token counts, the same open-loop send times or closed-loop concurrency. Under a candidate profile
the simulator gives the same summary keys as the run, and the fit compares:

    ttft_ms.p50, ttft_ms.p95, tpot_ms.mean, tpot_ms.p95          (client side, every run)
    server_prefill_ms.mean                                          (vLLM's request_prefill_time histogram,
                                                                     where scraped: scheduled -> first token)

so a run at concurrency 1 pins the prefill and single-sequence decode step, and runs at higher concurrency the
batched steps. Only the deployment's efficiency profile changes between calls: the scheduler and its knobs are
those given (vLLM's server defaults by default). Two things the replay takes from the run, so that the
simulator prices what the server did:
- prefix-cache hits the server counted but the prompts do not explain (prompts that begin like an earlier
  run's on the same server): each prompt is replayed as its uncached part (`unmodelled_cache_hit_rate`);
- closed-loop sends reach the engine a millisecond apart (`replay_config`): an idle vLLM engine prefills the
  first request of a wave alone and the rest together, and a request sent on a completion misses the step
  already scheduled.
vLLM's request_decode_time histogram is not fitted: its mean is (output tokens - 1) x the client's mean TPOT
(within 0.2% in the runs of `benchmarks/validate_vllm_cpu.py`), so it would count the same number twice.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from flopwise.bench.prometheus import ServerView, server_view
from flopwise.bench.runner import BenchConfig
from flopwise.bench.store import SavedRun, find_runs, load_run
from flopwise.calibrate.fit import CalibrationError, Tuning
from flopwise.calibrate.observations import Observations, with_profile
from flopwise.errors import FlopwiseWarning
from flopwise.metrics.summary import summarize
from flopwise.sim import simulate
from flopwise.sim.config import SimConfig
from flopwise.specs.deployment import Deployment
from flopwise.workload.spec import RequestSpec, Workload

__all__ = ["BenchRun", "load_bench_runs", "bench_observations", "measured_workload", "unmodelled_cache_hit_rate",
           "replay_config", "REPLAY_CLIENT_STAGGER_S", "CLIENT_METRICS"]

CLIENT_METRICS = (("ttft_ms", "p50"), ("ttft_ms", "p95"), ("tpot_ms", "mean"), ("tpot_ms", "p95"))


@dataclass(frozen=True, slots=True, kw_only=True)
class BenchRun:
    """One measured run: its label, the measured workload, and the values to match by metric name."""

    root: Path
    label: str
    workload: Workload
    measured: dict[str, float]


def _server(saved: SavedRun) -> ServerView | None:
    """The server's view of the run's last session, or None."""
    last = max((s["session"] for s in saved.scrapes), default=None)
    return server_view([s for s in saved.scrapes if s["session"] == last]) if last is not None else None


def unmodelled_cache_hit_rate(saved: SavedRun, cfg: BenchConfig) -> float:
    """The share of prompt tokens the server took from its prefix cache (its own counters) when the run has no
    shared prefix the replay could model: prompts that begin like those of an earlier run on the same server
    (e.g. the same prompt seed at a longer length). 0 when the run declares a shared prefix or the server
    exposes no counters."""
    if cfg.prompts.shared_prefix_len:
        return 0.0
    view = _server(saved)
    rate = view.prefix_cache_hit_rate if view is not None else None
    return min(max(float(rate or 0.0), 0.0), 0.99)


def measured_workload(saved: SavedRun, cfg: BenchConfig) -> Workload:
    """The workload of a saved run under its BenchConfig: an open loop's scheduled arrivals (under its client cap,
    `--max-concurrency`, where it had one), or a closed loop's concurrency.

    Where the server reports prefix-cache hits that the run's prompts do not explain (`unmodelled_cache_hit_rate`
    h > 0), each prompt is replayed as its uncached part, (1 - h) of its tokens: the replay starts from an
    empty cache and would otherwise price tokens the server never computed."""
    ok = sorted((r for r in saved.records if r.ok), key=lambda r: r.arrival_at)
    if not ok:
        raise CalibrationError(f"{saved.root} has no completed request to calibrate with")
    t0 = ok[0].arrival_at
    pc = cfg.prompts
    keep = 1.0 - unmodelled_cache_hit_rate(saved, cfg)
    specs = []
    for r in ok:
        prefix = pc.shared_prefix_len if pc.shared_prefix_len and pc.shared_prefix_len <= r.input_tokens else 0
        specs.append(RequestSpec(arrival_at=0.0 if cfg.load.is_closed else r.arrival_at - t0,
                                 input_tokens=max(round(r.input_tokens * keep), 1),
                                 output_tokens=max(r.num_output_tokens, 1),
                                 prefix_id=(r.request_id % pc.num_prefixes) if prefix else None, prefix_tokens=prefix))
    closed = cfg.load.is_closed
    return Workload(tuple(specs), concurrency=cfg.load.concurrency if closed else None,
                    max_concurrency=None if closed else cfg.load.max_concurrency, name=f"measured {cfg.load.label}")


def load_bench_runs(paths: Sequence[str | Path]) -> list[BenchRun]:
    """Every run in `paths` (a run directory, or a sweep directory of runs)."""

    out = []
    empty: list[str] = []  # runs in which no request completed (a server that failed them all): left out
    for p in paths:
        for root in find_runs(p):
            try:
                saved = load_run(root)
                cfg = BenchConfig.from_dict(saved.config)
            except (ValueError, KeyError, TypeError, AttributeError, UnicodeDecodeError) as e:
                # a damaged run directory (truncated run.json, a record missing fields): name it, not a traceback
                raise CalibrationError(f"bench run {root} cannot be read ({type(e).__name__}: {e}); re-run it or "
                                       "leave it out of --from") from None
            if not any(r.ok for r in saved.records):
                empty.append(str(root))
                continue
            if saved.num_bad_lines:  # skipped and counted by load_run (a crash mid-write), said here
                warnings.warn(f"bench run {root}: {saved.num_bad_lines} unreadable line(s) skipped; the fit uses the "
                              f"{len(saved.records)} readable requests", FlopwiseWarning, stacklevel=2)
            summary = summarize(saved.records, duration_s=saved.duration_s())
            measured = {}
            for metric, stat in CLIENT_METRICS:
                v = summary.latency(metric).get(stat)
                if v:
                    measured[f"{metric}.{stat}"] = float(v)
            view = _server(saved)
            if view is not None and view.prefill_ms_mean:
                measured["server_prefill_ms.mean"] = float(view.prefill_ms_mean)
            out.append(BenchRun(root=Path(root), label=cfg.load.label, workload=measured_workload(saved, cfg),
                                measured=measured))
    if empty and out:
        warnings.warn(f"{len(empty)} bench run(s) with no completed request left out of the fit: {', '.join(empty)}",
                      FlopwiseWarning, stacklevel=2)
    if not out:
        if empty:
            raise CalibrationError(f"{empty[0]} has no completed request to calibrate with" if len(empty) == 1 else
                                   f"none of the {len(empty)} bench runs under {', '.join(map(str, paths))} has a "
                                   "completed request to calibrate with")
        raise CalibrationError(f"no bench runs under {', '.join(map(str, paths))}")
    return out


# A closed-loop client's simultaneous sends reach vLLM's engine milliseconds apart, and an idle engine starts a
# step with the first alone: at concurrency N a wave is prefilled as 1 + (N - 1) requests, whose first request
# then waits out the others' prefill between its first and second token (visible in the measured token times).
REPLAY_CLIENT_STAGGER_S = 1e-3


def replay_config(config: SimConfig | None = None) -> SimConfig:
    """The simulator options a bench run is replayed with: `config` (default SimConfig()) with closed-loop sends
    staggered by REPLAY_CLIENT_STAGGER_S unless it sets its own."""


    config = config or SimConfig()
    return config if config.client_stagger_s else replace(config, client_stagger_s=REPLAY_CLIENT_STAGGER_S)


def _sim_metrics(dep: Deployment, run: BenchRun, config: SimConfig | None) -> dict[str, float]:

    res = simulate(dep, run.workload, replay_config(config))
    s = res.metrics()
    out = {f"{m}.{st}": v for m, st in CLIENT_METRICS if (v := s.latency(m).get(st)) is not None}
    pre = [(rec.token_times[0] - rec.first_scheduled_at) * 1e3 for rec in res.records
           if rec.ok and rec.first_scheduled_at is not None]
    if pre:
        out["server_prefill_ms.mean"] = float(np.mean(pre))
    return out


def bench_observations(runs: Sequence[BenchRun], dep: Deployment, config: SimConfig | None = None) -> Observations:
    """Observations over all runs; each predict() call simulates every run once."""
    keys = [(i, k) for i, r in enumerate(runs) for k in r.measured]
    measured = np.array([runs[i].measured[k] for i, k in keys])

    def predict(prof: Tuning) -> np.ndarray:
        d = with_profile(dep, prof)
        sims = [_sim_metrics(d, r, config) for r in runs]
        return np.array([sims[i].get(k, np.nan) for i, k in keys])

    return Observations(labels=tuple(k for _, k in keys), descs=tuple(f"{runs[i].label} {k}" for i, k in keys),
                        measured=measured, predict=predict)
