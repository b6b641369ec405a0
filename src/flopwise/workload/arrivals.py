"""Open-loop arrival processes, vectorised with numpy (deterministic under a seed).

    poisson    gaps ~ Exponential(mean 1/rate)                       (vllm bench serve, burstiness 1)
    gamma      gaps ~ Gamma(shape k = burstiness, scale 1/(rate*k)): mean 1/rate, CV = 1/sqrt(k);
               k < 1 is burstier than Poisson, k > 1 smoother       (vllm bench serve --burstiness)
    constant   gaps of exactly 1/rate
    inf        every request at t = 0 (a burst; "max load")
The first request arrives at t = 0. Closed-loop concurrency is not an arrival process: see `Workload`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from flopwise.validate import number, text

__all__ = ["ArrivalProcess", "arrival_times", "draw_gaps", "ARRIVAL_KINDS"]

ARRIVAL_KINDS = ("poisson", "gamma", "constant")
MIN_RATE = 1e-6  # requests/s (one every 11.6 days): slower rates overflow the arrival times
MAX_BURSTINESS = 1e6


@dataclass(frozen=True, slots=True)
class ArrivalProcess:
    """`rate` in requests/s (math.inf for a burst); `burstiness` is the gamma shape (1 = Poisson)."""

    kind: str = "poisson"
    rate: float = math.inf
    burstiness: float = 1.0

    def __post_init__(self) -> None:
        text(self.kind, "--arrival", choices=ARRIVAL_KINDS)
        number(self.rate, "--request-rate (requests/s; inf sends all at once)", lo=MIN_RATE, allow_inf=True)
        number(self.burstiness, "--burstiness (gamma shape)", lo=0, hi=MAX_BURSTINESS, lo_open=True)

    @property
    def cv(self) -> float:
        """Coefficient of variation of the gaps."""
        return {"poisson": 1.0, "gamma": 1 / math.sqrt(self.burstiness), "constant": 0.0}[self.kind]


def draw_gaps(proc: ArrivalProcess, size: int, rng: np.random.Generator) -> np.ndarray:
    """`size` gaps (s) between consecutive arrivals: exponential (Poisson), gamma with shape `burstiness`
    and the same mean, or exactly 1/rate; all zero for an infinite rate."""
    if math.isinf(proc.rate):
        return np.zeros(size)
    mean_gap = 1.0 / proc.rate
    if proc.kind == "constant":
        return np.full(size, mean_gap)
    if proc.kind == "poisson":
        return rng.exponential(mean_gap, size=size)
    return rng.gamma(proc.burstiness, mean_gap / proc.burstiness, size=size)


def arrival_times(proc: ArrivalProcess, n: int, rng: np.random.Generator) -> np.ndarray:
    """`n` non-decreasing arrival instants (s), the first at 0."""
    return np.concatenate(([0.0], np.cumsum(draw_gaps(proc, n - 1, rng))))
