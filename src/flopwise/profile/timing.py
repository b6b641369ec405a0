"""Timing on a shared machine: warm up, repeat, keep the median and the spread.

Each measurement runs the function once to warm up (allocations, oneDNN/cuBLAS kernel selection, caches),
then `repeats` times or until `budget_s` is spent, whichever comes first (at least `min_repeats`). The median
resists the interference of other processes; the spread (max/min - 1 over the repeats) says how noisy the
machine was. On CUDA the function must synchronise before returning (`sync`).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["Timing", "measure"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Timing:
    median_s: float
    min_s: float
    max_s: float
    repeats: int

    @property
    def spread(self) -> float:
        return self.max_s / self.min_s - 1.0 if self.min_s > 0 else 0.0


def measure(fn: Callable[[], object], *, repeats: int = 7, min_repeats: int = 3, budget_s: float = 1.0,
            sync: Callable[[], None] | None = None, warmup: int = 1) -> Timing:
    for _ in range(warmup):
        fn()
        if sync:
            sync()
    times: list[float] = []
    start = time.perf_counter()
    while len(times) < repeats and (len(times) < min_repeats or time.perf_counter() - start < budget_s):
        t0 = time.perf_counter()
        fn()
        if sync:
            sync()
        times.append(time.perf_counter() - t0)
    return Timing(median_s=statistics.median(times), min_s=min(times), max_s=max(times), repeats=len(times))
