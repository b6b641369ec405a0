"""The engine's OpenAI API server as a stage in front of the engine: a CPU that every request and every output
token passes through (costs: `specs/engine.py` FrontendCosts).

Jobs are served first come, first served by `servers` = FrontendCosts.speed processes (api_servers over the
data-parallel engines sharing them), modelled as one server of that many times the speed (exact for one process,
the default of vLLM, SGLang and TensorRT-LLM):

    ingress  (a request arriving at a):       ready_at = max(a, busy) + (ingress_s(prompt) + first_event_s) / servers
                                                         + latency_s
             (first_event_s: what its lone first-token event costs beyond token_s, 0 at one event per token)
    egress   (a step ending at t, n tokens):  delivered_at = max(t, busy) + n * token_s / servers
             (token_s = output_token_s, or its per-event part spread over --stream-interval tokens: FrontendCosts)

`busy` is the instant the CPU finishes the work it already has. A request joins the engine at `ready_at`; the
client sees a step's tokens at `delivered_at` (TTFT, ITL and E2E are measured there). When requests or tokens
arrive faster than the CPU serves them, `busy` runs ahead of the engine: the queue forms at the frontend, not
the GPU, and throughput is capped at servers / (ingress_s + output_tokens * token_s) requests/s.

`shares_engine_cpu` (vLLM V0: HTTP server and engine loop in one asyncio process): the engine core's per-step
CPU work runs on the same CPU, so a step starts only when the frontend's queued work is done
(`claim_for_step`), and then holds the CPU for its host time.

The engine loop hands jobs over in time order (arrivals up to a step's end before that step's tokens), which
is what first-come-first-served needs.
"""

from __future__ import annotations

from collections import deque
from collections.abc import MutableSequence

from flopwise.sim.request import Request
from flopwise.specs.deployment import Deployment
from flopwise.specs.engine import FrontendCosts

__all__ = ["Frontend", "hidden_tokens"]


def hidden_tokens(dep: Deployment) -> int:
    """Opening output tokens a client receives no text for: the response header the chat endpoint's parser
    consumes (`ModelSpec.response_header_tokens`; gpt-oss's harmony channel header), behind the HTTP server only."""
    fe = dep.frontend
    return dep.model.response_header_tokens if fe is not None and fe.endpoint == "chat" else 0


class Frontend:
    """FIFO CPU stage; `pending` holds admitted requests until they are ready for the engine (ready times are
    non-decreasing, so a deque suffices)."""

    __slots__ = ("costs", "busy_until", "pending", "speed", "token_s", "first_s", "cpu_s")

    def __init__(self, costs: FrontendCosts):
        self.costs = costs
        self.speed = costs.speed
        self.token_s = costs.token_s / self.speed
        self.first_s = costs.first_event_s  # a lone first-token event's extra, charged with the request's ingress
        self.busy_until = 0.0
        self.pending: deque[Request] = deque()
        self.cpu_s = 0.0  # seconds the stage was busy (for the utilisation report)

    def admit(self, req: Request, at: float) -> None:
        """Accept a request that reaches this server at `at` (its arrival, or later where a fleet's router held it);
        it joins the engine at `req.engine_arrival_at`."""
        work = (self.costs.ingress_s(req.num_prompt_tokens) + self.first_s) / self.speed
        busy = self.busy_until
        done = (busy if busy > at else at) + work  # max(at, busy), without the builtin's call (per request)
        self.busy_until = done
        self.cpu_s += work
        req.engine_arrival_at = done + self.costs.latency_s
        self.pending.append(req)

    def next_ready_at(self) -> float | None:
        return self.pending[0].engine_arrival_at if self.pending else None

    def pop_ready(self, now: float) -> list[Request]:
        out = []
        pending = self.pending
        while pending and pending[0].engine_arrival_at <= now:
            out.append(pending.popleft())
        return out

    def deliver(self, at: float, num_tokens: int) -> float:
        """Stream `num_tokens` produced by a step ending at `at`; returns when the client has them."""
        if num_tokens <= 0:
            return at
        work = num_tokens * self.token_s
        busy = self.busy_until
        done = (busy if busy > at else at) + work  # max(at, busy) (per step)
        self.busy_until = done
        self.cpu_s += work
        return done

    def deliver_steps(self, ends: list[float], start: int, stop: int, num_tokens: int,
                      out: MutableSequence[float]) -> None:
        """`deliver(ends[j], num_tokens)` for j in start..stop-1 (the steps of a decode run), appended to `out`."""
        if num_tokens <= 0:
            out.extend(ends[start:stop])
            return
        work = num_tokens * self.token_s
        busy, cpu = self.busy_until, self.cpu_s
        for j in range(start, stop):
            at = ends[j]
            busy = (at if at > busy else busy) + work
            cpu += work
            out.append(busy)
        self.busy_until, self.cpu_s = busy, cpu

    def claim_for_step(self, now: float, host_s: float) -> float:
        """Shared CPU only: the instant a step can start (after the queued frontend work), holding the CPU for
        the step's `host_s`."""
        start = max(now, self.busy_until)
        self.busy_until = start + host_s
        return start
