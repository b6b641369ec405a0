"""The planners' process pool: jobs mapped over `workers` forked processes, or run inline with one worker.

Forked workers inherit the parent's memory, so a job may read state the parent set before the first `map`
(the fleet planner's layouts); `map` keeps the order of its items, so results never depend on the number of
workers.
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from typing import Any

__all__ = ["Runner"]


class Runner:
    """Runs jobs in a process pool of `workers` (fork; the processes start at the first `map`), or inline."""

    def __init__(self, workers: int):
        self.workers = workers
        self.pool = (ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork"))
                     if workers > 1 else None)

    def map(self, fn: Callable[[Any], Any], items: list[Any]) -> list[Any]:
        if self.pool is None or len(items) < 2:
            return [fn(i) for i in items]
        return list(self.pool.map(fn, items))

    def close(self) -> None:
        if self.pool is not None:
            self.pool.shutdown()
