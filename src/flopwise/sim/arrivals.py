"""Feeding requests to one engine: open loop (at their arrival instants) or closed loop (N clients)."""

from __future__ import annotations

from collections.abc import Sequence

from flopwise.sim.request import Request
from flopwise.workload.spec import RequestSpec

__all__ = ["OpenLoop", "ClosedLoop", "make_request"]


def make_request(request_id: int, spec: RequestSpec, arrival_at: float) -> Request:
    return Request(request_id, arrival_at, spec.input_tokens, spec.output_tokens, spec.prefix_id,
                   spec.prefix_tokens)


class OpenLoop:
    """Requests arrive at their `arrival_at`, whatever the engine does."""

    __slots__ = ("items", "i")

    def __init__(self, items: Sequence[tuple[int, RequestSpec]]):
        self.items = items
        self.i = 0

    def next_at(self) -> float | None:
        return self.items[self.i][1].arrival_at if self.i < len(self.items) else None

    @property
    def more_coming(self) -> bool:
        return self.i < len(self.items)

    def pop_due(self, now: float) -> list[Request]:
        """Requests arriving at or before `now` (an arrival at a step's end joins the next step)."""
        out = []
        items, i = self.items, self.i
        while i < len(items) and items[i][1].arrival_at <= now:
            rid, spec = items[i]
            out.append(make_request(rid, spec, spec.arrival_at))
            i += 1
        self.i = i
        return out

    def on_finished(self, count: int, at: float) -> None:
        pass


class ClosedLoop:
    """`concurrency` clients: each sends the next unsent request the moment its previous one completes."""

    __slots__ = ("items", "i", "ready")

    def __init__(self, items: Sequence[tuple[int, RequestSpec]], concurrency: int):
        self.items = items
        self.i = min(concurrency, len(items))
        self.ready = [make_request(rid, spec, 0.0) for rid, spec in items[: self.i]]

    def next_at(self) -> float | None:
        return None  # sends happen only at completions, which the engine reports

    @property
    def more_coming(self) -> bool:
        return False  # an idle engine has no client left waiting on it

    def pop_due(self, now: float) -> list[Request]:
        out, self.ready = self.ready, []
        return out

    def on_finished(self, count: int, at: float) -> None:
        for _ in range(count):
            if self.i >= len(self.items):
                return
            rid, spec = self.items[self.i]
            self.ready.append(make_request(rid, spec, at))
            self.i += 1
