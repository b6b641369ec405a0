"""One request of a stream, and the stream itself."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from flopwise.errors import WorkloadError
from flopwise.validate import integer

if TYPE_CHECKING:
    from flopwise.workload.classes import RequestClass

__all__ = ["RequestSpec", "Workload"]


@dataclass(frozen=True, slots=True, kw_only=True)
class RequestSpec:
    """What a client sends. The first `prefix_tokens` prompt tokens are shared by every request with the same
    `prefix_id` (a system prompt, a RAG template, an earlier turn of a conversation); the rest are unique.
    `arrival_at` (s) is ignored in a closed loop, where a request is sent when a client is free."""

    arrival_at: float
    input_tokens: int
    output_tokens: int
    prefix_id: int | None = None
    prefix_tokens: int = 0
    klass: str | None = None  # its request class (`workload/classes.py`), if the stream has classes
    priority: int = 0  # lower runs first under a priority scheduling policy (vLLM's convention)
    timeout_s: float | None = None  # the client abandons it this long after sending it, unless finished

    def __post_init__(self) -> None:
        for name in ("input_tokens", "output_tokens", "prefix_tokens"):
            if isinstance(getattr(self, name), bool) or not isinstance(getattr(self, name), int):
                raise WorkloadError(f"a request's {name} must be an integer, got {getattr(self, name)!r}")
        if self.input_tokens < 1 or self.output_tokens < 1:
            raise WorkloadError(f"a request needs >= 1 input and output token, got {self.input_tokens} in, "
                                f"{self.output_tokens} out")
        if not 0 <= self.prefix_tokens <= self.input_tokens:
            raise WorkloadError(f"prefix_tokens must be in [0, input_tokens={self.input_tokens}], "
                                f"got {self.prefix_tokens}")
        if self.timeout_s is not None and not (isinstance(self.timeout_s, int | float) and math.isfinite(self.timeout_s)
                                               and self.timeout_s > 0):
            raise WorkloadError(f"a request's timeout must be a finite number of seconds > 0, got {self.timeout_s!r}")
        if not (isinstance(self.arrival_at, int | float) and math.isfinite(self.arrival_at) and self.arrival_at >= 0):
            raise WorkloadError(f"arrival times must be finite numbers >= 0 (s), got {self.arrival_at!r}")


    def sent_at(self, arrival_at: float) -> RequestSpec:
        """This request sent at `arrival_at` (a copy: only the new time is checked, the rest was checked once;
        `dataclasses.replace` would re-check every field, per request of every stream built)."""
        if not (isinstance(arrival_at, int | float) and math.isfinite(arrival_at) and arrival_at >= 0):
            raise WorkloadError(f"arrival times must be finite numbers >= 0 (s), got {arrival_at!r}")
        new = object.__new__(RequestSpec)
        for name in RequestSpec.__slots__:  # a field-by-field copy: `copy.copy` goes through __reduce_ex__, 4x slower
            object.__setattr__(new, name, getattr(self, name))
        object.__setattr__(new, "arrival_at", arrival_at)
        return new


@dataclass(frozen=True, slots=True)
class Workload:
    """A request stream in send order. Open loop: each request arrives at its `arrival_at` (non-decreasing).
    Closed loop (`concurrency` = N): N clients each send the next unsent request as soon as their previous one
    completes (zero think time), as `vllm bench serve --max-concurrency N` at an infinite rate does. Capped open
    loop (`max_concurrency` = C): requests drawn at their `arrival_at`, each sent once fewer than C are in flight,
    as `vllm bench serve --request-rate R --max-concurrency C` does (`sim/arrivals.py` CappedLoop)."""

    requests: tuple[RequestSpec, ...]
    concurrency: int | None = None
    name: str = "custom"
    classes: tuple[RequestClass, ...] = ()  # the request classes its requests were drawn into, if any
    max_concurrency: int | None = None  # a capped open loop: the client's most requests in flight

    def __post_init__(self) -> None:
        if not self.requests:
            raise WorkloadError("the workload has no requests; raise --num-requests or check the trace file")
        if self.concurrency is not None:
            integer(self.concurrency, "--concurrency", lo=1)
            if self.max_concurrency is not None:
                raise WorkloadError("a closed loop has no separate client cap: its clients are the cap")
        if self.max_concurrency is not None:
            integer(self.max_concurrency, "--max-concurrency", lo=1)
        if self.concurrency is None:
            prev = 0.0
            for r in self.requests:
                if r.arrival_at < prev:
                    raise WorkloadError("arrival times must be non-decreasing in send order")
                prev = r.arrival_at

    @property
    def is_closed_loop(self) -> bool:
        return self.concurrency is not None

    @property
    def num_requests(self) -> int:
        return len(self.requests)
