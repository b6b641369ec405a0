"""Service-level objectives such as "p95_ttft<=300ms,p95_tpot<=50ms".

Grammar: comma-separated `<stat>_<metric><op><number><unit>`, stat in mean, p50, p90, p95, p99;
metric in ttft, tpot, itl, e2e; op `<=` or `<`; unit ms or s (ms when omitted). "none" is the SLA with no
latency bound (an offline batch job: only throughput or cost matters, and a rate counts when it is sustained).
A request meets the SLA when each of its own latencies meets every per-request bound (goodput, as in
DistServe, Zhong et al. 2024); the percentile objectives apply to the whole run.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from flopwise.errors import WorkloadError

__all__ = ["Objective", "SLA", "parse_sla", "STATS", "METRICS"]

STATS = ("mean", "p50", "p90", "p95", "p99")
METRICS = ("ttft", "tpot", "itl", "e2e")
_RE = re.compile(r"^\s*(mean|p50|p90|p95|p99)_(ttft|tpot|itl|e2e)\s*(<=|<)\s*([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)"
                 r"\s*(ms|s)?\s*$")
MAX_LIMIT_MS = 1e12  # 31 years: a larger bound is a typo, and overflows to infinity in the percentile checks


@dataclass(frozen=True, slots=True)
class Objective:
    stat: str
    metric: str
    limit_ms: float

    @property
    def key(self) -> str:
        return f"{self.stat}_{self.metric}"

    def __str__(self) -> str:
        return f"{self.stat}_{self.metric}<={self.limit_ms:g}ms"


@dataclass(frozen=True, slots=True)
class SLA:
    objectives: tuple[Objective, ...]

    def __str__(self) -> str:
        return ",".join(str(o) for o in self.objectives) or "none"

    @property
    def is_empty(self) -> bool:
        return not self.objectives

    @property
    def itl_stats(self) -> tuple[str, ...]:
        """The statistics at which this SLA bounds ITL (each request meets them by its own gaps), in order."""
        return tuple(dict.fromkeys(o.stat for o in self.objectives if o.metric == "itl"))

    def limit(self, metric: str) -> float | None:
        """The tightest per-request bound on `metric` (ms), or None."""
        lims = [o.limit_ms for o in self.objectives if o.metric == metric]
        return min(lims) if lims else None


def parse_sla(text: str) -> SLA:
    if not isinstance(text, str):
        raise WorkloadError(f"an SLA must be text such as \"p95_ttft<=300ms,p95_tpot<=50ms\", got {text!r}")
    if text.strip().lower() == "none":
        return SLA(())
    parts = [p for p in text.split(",") if p.strip()]
    if not parts:
        raise WorkloadError("empty SLA; write e.g. \"p95_ttft<=300ms,p95_tpot<=50ms\", or none for no latency bound")
    objs: list[Objective] = []
    for p in parts:
        m = _RE.match(p)
        shown = p.strip() if len(p.strip()) <= 60 else p.strip()[:57] + "..."
        if not m:
            raise WorkloadError(
                f"cannot read SLA objective '{shown}'; write <stat>_<metric><=<number><ms|s> with stat in "
                f"{', '.join(STATS)} and metric in {', '.join(METRICS)}, e.g. p95_ttft<=300ms")
        stat, metric, _op, num, unit = m.groups()
        value = float(num) * (1000.0 if unit == "s" else 1.0)
        if not (math.isfinite(value) and 0 < value <= MAX_LIMIT_MS):
            raise WorkloadError(f"SLA objective '{shown}' must have a limit in (0, {MAX_LIMIT_MS:g}] ms")
        if any(o.stat == stat and o.metric == metric for o in objs):
            raise WorkloadError(f"SLA names {stat}_{metric} twice; give each objective once")
        objs.append(Objective(stat, metric, value))
    return SLA(tuple(objs))
