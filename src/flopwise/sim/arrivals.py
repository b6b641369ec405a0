"""Feeding requests to an engine: open loop (at their arrival instants), closed loop (N clients), or open loop
behind a client's concurrency cap (`vllm bench serve --request-rate R --max-concurrency C`)."""

from __future__ import annotations

import heapq
from collections.abc import Sequence

from flopwise.sim.request import Request
from flopwise.workload.spec import RequestSpec

__all__ = ["OpenLoop", "ClosedLoop", "CappedLoop", "RequestSource", "make_request", "request_source"]


def make_request(request_id: int, spec: RequestSpec, arrival_at: float) -> Request:
    return Request(request_id=request_id, arrival_at=arrival_at, num_prompt_tokens=spec.input_tokens,
                   max_tokens=spec.output_tokens, prefix_id=spec.prefix_id, num_prefix_tokens=spec.prefix_tokens,
                   priority=spec.priority,
                   deadline_at=None if spec.timeout_s is None else arrival_at + spec.timeout_s)


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
    """`concurrency` clients: each sends the next unsent request the moment its previous one completes.

    `stagger_s` > 0: a request sent on a completion reaches the engine `stagger_s` later, and requests sent at
    the same instant reach it `stagger_s` apart, in order (a real client learns of the completion from the
    stream, sends one request after another, and the server's front end hands them over one by one). So, as
    in vLLM, the step that follows a completion has already been scheduled without the new request, and an
    idle engine starts its step with the first request alone (its loop schedules as soon as one is in) while
    the others wait for the next step. 0: they arrive at the completion instant, all together."""

    __slots__ = ("items", "i", "ready", "stagger_s")

    def __init__(self, items: Sequence[tuple[int, RequestSpec]], concurrency: int, stagger_s: float = 0.0):
        self.items = items
        self.stagger_s = stagger_s
        self.i = min(concurrency, len(items))
        self.ready = [make_request(rid, spec, k * stagger_s) for k, (rid, spec) in enumerate(items[: self.i])]

    def next_at(self) -> float | None:
        # sends happen only at completions, which the engine reports; staggered sends may still be on their way
        return self.ready[0].arrival_at if self.ready else None

    @property
    def more_coming(self) -> bool:
        return False  # an idle engine has no client left waiting on it

    def pop_due(self, now: float) -> list[Request]:
        """Requests sent by now (a client sends when its previous request's last token reached it)."""
        k = 0
        while k < len(self.ready) and self.ready[k].arrival_at <= now:
            k += 1
        out, self.ready = self.ready[:k], self.ready[k:]
        return out

    def on_finished(self, count: int, at: float) -> None:
        t = at
        for _ in range(count):
            if self.i >= len(self.items):
                return
            if self.stagger_s:
                t = max(t, self.ready[-1].arrival_at if self.ready else at) + self.stagger_s
            rid, spec = self.items[self.i]
            self.ready.append(make_request(rid, spec, t))
            self.i += 1


class CappedLoop(OpenLoop):
    """Requests drawn at their `arrival_at` (open loop) that a client sends only while fewer than `max_concurrency`
    of its requests are in flight, as `vllm bench serve --request-rate R --max-concurrency C` and SGLang's
    `bench_serving` do: each request task waits on a semaphore before it sends, so request i goes out at
    max(its arrival, the instant a slot is free), in arrival order (`free`: when each slot frees, a completion's
    instant once its request is done). The request reaches the server then (`Request.arrival_at` is the send
    instant): the client's clock for TTFT and latency starts there too, and the wait for a slot is the client's,
    not the server's. With slots to spare it sends exactly as `OpenLoop`."""

    __slots__ = ("free",)

    def __init__(self, items: Sequence[tuple[int, RequestSpec]], max_concurrency: int):
        super().__init__(items)  # `i`: the next request not yet sent
        self.free = [0.0] * max_concurrency  # a min-heap of the instants the free slots became free

    def next_at(self) -> float | None:
        if self.i >= len(self.items) or not self.free:
            return None  # all sent, or every slot taken: the next send waits on a completion
        a, f = self.items[self.i][1].arrival_at, self.free[0]
        return a if a > f else f

    def pop_due(self, now: float) -> list[Request]:
        """Requests sent by `now`, in arrival order, each on the slot that was free first."""
        out = []
        items, free = self.items, self.free
        while self.i < len(items) and free:
            rid, spec = items[self.i]
            at = spec.arrival_at if spec.arrival_at > free[0] else free[0]
            if at > now:
                break
            heapq.heappop(free)
            out.append(make_request(rid, spec, at))
            self.i += 1
        return out

    def on_finished(self, count: int, at: float) -> None:
        """`count` requests completed at `at` (their last token reached the client): their slots free then."""
        for _ in range(count):
            heapq.heappush(self.free, at)


RequestSource = OpenLoop | ClosedLoop


def request_source(items: Sequence[tuple[int, RequestSpec]], *, concurrency: int | None = None,
                   max_concurrency: int | None = None, stagger_s: float = 0.0) -> RequestSource:
    """The feeder of a workload's requests: a closed loop of `concurrency` clients, an open loop capped at
    `max_concurrency` requests in flight, or a plain open loop."""
    if concurrency is not None:
        return ClosedLoop(items, concurrency, stagger_s)
    if max_concurrency is not None:
        return CappedLoop(items, max_concurrency)
    return OpenLoop(items)
