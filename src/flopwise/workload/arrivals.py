"""Open-loop arrival processes, vectorised with numpy (deterministic under a seed).

    poisson    gaps ~ Exponential(mean 1/rate)                       (vllm bench serve, burstiness 1)
    gamma      gaps ~ Gamma(shape k = burstiness, scale 1/(rate*k)): mean 1/rate, CV = 1/sqrt(k);
               k < 1 is burstier than Poisson, k > 1 smoother       (vllm bench serve --burstiness)
    constant   gaps of exactly 1/rate
    inf        every request at t = 0 (a burst; "max load")
By default the first request arrives at t = 0 and each later one one drawn gap after the previous.

`rescale=True` reproduces `vllm bench serve` (vllm/benchmarks/serve.py, `get_request`): n gaps are drawn, the
first measured from the start (so the first request goes out one gap after t = 0), their running sums are
multiplied by n / (rate * sum of the n gaps), so that request k (1-based) goes out at
    t_k = (g_1 + ... + g_k) * n / (rate * (g_1 + ... + g_n)),        t_n = n / rate exactly.
Without it the sum of n gaps is n / rate only on average (its CV is 1/sqrt(n k): 7% for 200 Poisson gaps), so a
run's delivered rate differs from the asked one by that much. The simulator keeps the default (no rescaling).
Closed-loop concurrency is not an arrival process: see `Workload`.
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


@dataclass(frozen=True, slots=True, kw_only=True)
class ArrivalProcess:
    """`rate` in requests/s (math.inf for a burst); `burstiness` is the gamma shape (1 = Poisson);
    `rescale`: vLLM's rescaling of the drawn gaps, so that the n-th of n requests goes out at n / rate."""

    kind: str = "poisson"
    rate: float = math.inf
    burstiness: float = 1.0
    rescale: bool = False

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
    and the same mean, or exactly 1/rate; all zero for an infinite rate. With `proc.rescale` the gaps are
    scaled to sum to exactly size / rate (vLLM's normalisation; see the module docstring)."""
    if math.isinf(proc.rate) or size <= 0:
        return np.zeros(max(size, 0))
    mean_gap = 1.0 / proc.rate
    if proc.kind == "constant" or math.isinf(proc.burstiness):
        return np.full(size, mean_gap)
    if proc.kind == "poisson":
        gaps = rng.exponential(mean_gap, size=size)
    else:
        gaps = rng.gamma(proc.burstiness, mean_gap / proc.burstiness, size=size)
    if proc.rescale:
        total = float(gaps.sum())
        if total > 0:
            gaps = gaps * (size * mean_gap / total)
    return gaps


def arrival_times(proc: ArrivalProcess, n: int, rng: np.random.Generator) -> np.ndarray:
    """`n` non-decreasing arrival instants (s): the first at 0 and n - 1 gaps after it; with `proc.rescale`
    (vLLM's convention) n gaps from t = 0, the last arrival at exactly n / rate."""
    if n <= 0:
        return np.zeros(0)
    if proc.rescale:
        times = np.cumsum(draw_gaps(proc, n, rng))
        if not math.isinf(proc.rate):
            times[-1] = n / proc.rate  # exact, not a rounded sum
        return times
    return np.concatenate(([0.0], np.cumsum(draw_gaps(proc, n - 1, rng))))
