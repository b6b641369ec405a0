"""The fleet's one event heap: (time, rank, order, sequence number, event), popped in that order.

Ranks at one instant, lowest first:
    CONTROL (-1)   a replica goes down, drains, becomes ready after a cold start; an autoscaler tick
    ARRIVAL (0)    a request reaches a pool: from the clients (before any hand-off at the same instant), or a
                   disaggregated request's KV reaching the decode pool
    STEP_END (1)   a replica's step (or decode run) ends: its results are applied
    SCHEDULE (2)   a replica plans its next step
So a state change is seen by every arrival at its instant, an arrival at the end of a step joins the next
step's plan (as in the one-replica loop, `sim/replica.py`), and a closed-loop client released by a completion
sends before any replica plans. Within a rank, `order` decides (a replica's index in the fleet, a request's
id), then the push order. A replica's entries carry its version; an entry whose version is stale (the replica's
next event moved: a decode run cut by an arrival) is skipped when popped.

`items` is the heap list itself (`heapq` order, entries as above) and `seq` the sequence numbers: the fleet's loop
reads the head, pops it and pushes a replica's next event directly, the one place where a method call per event
shows in the run time.
"""

from __future__ import annotations

import heapq
from itertools import count
from typing import Any

from flopwise.sim.replica import ARRIVAL, SCHEDULE, STEP_END

__all__ = ["CONTROL", "ARRIVAL", "STEP_END", "SCHEDULE", "EventHeap"]

CONTROL = -1


class EventHeap:
    __slots__ = ("items", "seq")

    def __init__(self) -> None:
        self.items: list[tuple[float, int, int, int, Any]] = []
        self.seq = count()

    def push(self, at: float, rank: int, order: int, event: Any) -> None:
        heapq.heappush(self.items, (at, rank, order, next(self.seq), event))

    def peek(self) -> tuple[float, int, int] | None:
        if not self.items:
            return None
        at, rank, order, _, _ = self.items[0]
        return at, rank, order

    def pop(self) -> tuple[float, int, Any]:
        at, rank, _, _, event = heapq.heappop(self.items)
        return at, rank, event

    def __len__(self) -> int:
        return len(self.items)
