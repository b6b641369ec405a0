"""Routers: which replica of a pool gets a request, from what the replicas report (`sim.Replica` queries).

Each router sees the replicas that take traffic (not down, not draining, not cold), in pool order, and returns
one of them. Ties always go to the first in pool order, so every choice is deterministic.

    round-robin        request i of the pool to candidate i mod n (with every replica up: simulate's split)
    least-outstanding  the fewest requests admitted and not finished (vLLM production-stack, llm-d's "queue")
    least-kv           the lowest KV-pool usage at the last step boundary, then the fewest outstanding
    prefix-aware       SGLang router's cache-aware policy over the engines' real caches (as NVIDIA Dynamo's KV
                       router and llm-d's prefix scorer learn them from KV events): when the load is balanced,
                       the replica whose prefix cache holds the longest run of the request's prompt, if that
                       covers more than `cache_threshold` (0.5) of it; otherwise (no such hit, or the load
                       imbalanced: max - min outstanding > 32 and max > 1.0001 x min, SGLang's
                       balance_abs/rel thresholds) the least outstanding
    session            session affinity: a session (the request's prefix group, e.g. a conversation) sticks to
                       the replica that served it first (least outstanding at first sight); requests without a
                       session, and sessions whose replica left, go to the least outstanding
"""

from __future__ import annotations

from collections.abc import Sequence
from operator import attrgetter
from typing import Protocol, TypeVar

from flopwise.errors import WorkloadError
from flopwise.sim.request import Request

__all__ = ["ROUTERS", "Router", "Routable", "make_router"]


class Routable(Protocol):
    """What a router reads of a replica (the fleet's `Member`, or a `sim.Replica` itself)."""

    @property
    def num_outstanding(self) -> int: ...

    @property
    def kv_usage(self) -> float: ...

    def cached_tokens(self, req: Request) -> int: ...


R = TypeVar("R", bound=Routable)

ROUTERS = ("round-robin", "least-outstanding", "least-kv", "prefix-aware", "session")
CACHE_THRESHOLD = 0.5
BALANCE_ABS = 32
BALANCE_REL = 1.0001


# a router reads every candidate's load at every arrival: attrgetter reads it without a Python call per candidate
_outstanding = attrgetter("num_outstanding")


def _least_outstanding(cands: Sequence[R]) -> R:
    """The first candidate with the fewest outstanding requests (`min` keeps the first of equals)."""
    return min(cands, key=_outstanding)


class Router:
    """Base: `choose(req, candidates, loads)` returns one of the candidates (a non-empty sequence); `loads`, when
    the caller keeps them, are the candidates' outstanding counts in the same order (a fleet updates them as they
    change, so a router reading loads need not ask each candidate at each arrival)."""

    name = "base"

    def choose(self, req: Request, cands: Sequence[R], loads: Sequence[int] | None = None) -> R:  # pragma: no cover
        raise NotImplementedError


class RoundRobin(Router):
    name = "round-robin"

    def __init__(self) -> None:
        self.i = 0

    def choose(self, req: Request, cands: Sequence[R], loads: Sequence[int] | None = None) -> R:
        r = cands[self.i % len(cands)]
        self.i += 1
        return r


class LeastOutstanding(Router):
    name = "least-outstanding"

    def choose(self, req: Request, cands: Sequence[R], loads: Sequence[int] | None = None) -> R:
        if loads is not None:  # the first of the least loaded, as `min` picks
            return cands[loads.index(min(loads))]
        return _least_outstanding(cands)


class LeastKv(Router):
    name = "least-kv"

    def choose(self, req: Request, cands: Sequence[R], loads: Sequence[int] | None = None) -> R:
        return min(cands, key=lambda r: (r.kv_usage, r.num_outstanding))


class PrefixAware(Router):
    name = "prefix-aware"

    def choose(self, req: Request, cands: Sequence[R], loads: Sequence[int] | None = None) -> R:
        loads = [r.num_outstanding for r in cands]
        lo, hi = min(loads), max(loads)
        if hi - lo > BALANCE_ABS and hi > lo * BALANCE_REL:
            return _least_outstanding(cands)
        if req.prefix_id is None:
            return _least_outstanding(cands)
        best, hit = cands[0], -1
        for r in cands:
            h = r.cached_tokens(req)
            if h > hit:
                best, hit = r, h
        if hit > CACHE_THRESHOLD * req.num_prompt_tokens:
            return best
        return _least_outstanding(cands)


class SessionAffinity(Router):
    name = "session"

    def __init__(self) -> None:
        self.home: dict[int, object] = {}  # session -> the replica that served it first

    def choose(self, req: Request, cands: Sequence[R], loads: Sequence[int] | None = None) -> R:
        key = req.prefix_id
        if key is None:
            return _least_outstanding(cands)
        home = self.home.get(key)
        for c in cands:
            if c is home:
                return c
        r = _least_outstanding(cands)
        self.home[key] = r
        return r


def make_router(name: str) -> Router:
    classes = {c.name: c for c in (RoundRobin, LeastOutstanding, LeastKv, PrefixAware, SessionAffinity)}
    try:
        return classes[name]()
    except KeyError:
        raise WorkloadError(f"unknown router '{name}'; use one of {', '.join(ROUTERS)}") from None
