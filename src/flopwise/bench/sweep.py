"""Several load levels in one directory: a list of rates or concurrencies, or a search for the highest
request rate whose run meets an SLA.

The search first sends a burst (rate = inf) to measure capacity R, then bisects the rate in (0, R] for
`steps` runs: a run that meets every SLA objective (`sla_met`) raises the lower bound, one that misses lowers the
upper bound. The answer is the highest rate measured to meet the SLA (None if none did); where the burst itself
meets it, the server met the SLA at its capacity, and that (its measured request throughput) is the answer, with no
bisection.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from flopwise.bench.arrivals import Load
from flopwise.bench.runner import BenchConfig, Progress, RunReport, run_bench
from flopwise.errors import WorkloadError

__all__ = ["SweepResult", "run_levels", "find_max_rate"]


@dataclass(frozen=True, slots=True)
class SweepResult:
    levels: tuple[RunReport, ...]
    max_rate_meeting_sla: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"levels": [r.to_dict() for r in self.levels], "max_rate_meeting_sla": self.max_rate_meeting_sla}


def _level_dir(out: Path, k: int, load: Load) -> Path:
    return out / f"{k:02d}-{load.label}"


def run_levels(cfg: BenchConfig, loads: Sequence[Load], out: str | Path, *, api_key: str | None = None,
               on_level: Callable[[RunReport], None] | None = None,
               progress: Callable[[Progress], None] | None = None) -> SweepResult:
    reports = []
    for k, load in enumerate(loads):
        rep = run_bench(replace(cfg, load=load), _level_dir(Path(out), k, load), api_key=api_key, progress=progress)
        reports.append(rep)
        if on_level:
            on_level(rep)
    return SweepResult(tuple(reports))


def find_max_rate(cfg: BenchConfig, out: str | Path, *, steps: int = 4, api_key: str | None = None,
                  on_level: Callable[[RunReport], None] | None = None,
                  progress: Callable[[Progress], None] | None = None) -> SweepResult:
    if not cfg.sla:
        raise WorkloadError("--sweep searches for the highest rate meeting an SLA; pass --sla too")
    out = Path(out)
    kind = cfg.load.kind if not cfg.load.is_closed else "poisson"
    reports = []

    def run(k: int, load: Load) -> RunReport:
        rep = run_bench(replace(cfg, load=load), _level_dir(out, k, load), api_key=api_key, progress=progress)
        reports.append(rep)
        if on_level:
            on_level(rep)
        return rep

    rescale = cfg.load.rescale
    burst = run(0, Load(kind=kind, rate=math.inf, burstiness=cfg.load.burstiness, rescale=rescale))
    capacity = burst.summary["request_throughput"]
    if not capacity:
        raise WorkloadError("the burst run completed no request; check the server before sweeping")
    if burst.summary.get("sla_met"):  # met at capacity: no slower rate can show a higher one
        return SweepResult(tuple(reports), capacity)
    lo, hi, best = 0.0, capacity, None
    for k in range(1, steps + 1):
        rate = round((lo + hi) / 2, 4)
        rep = run(k, Load(kind=kind, rate=rate, burstiness=cfg.load.burstiness, rescale=rescale))
        if rep.summary.get("sla_met"):
            lo, best = rate, rate
        else:
            hi = rate
    return SweepResult(tuple(reports), best)
