"""Decides when to call `send`; knows nothing about LLMs or HTTP.

`run_load` sends a warm-up phase (its slots flagged, waited for), then the measured phase, until the indices
run out or `duration_s` has passed since the measured phase began (requests in flight then still finish).
Each send gets its *scheduled* instant, so a client that falls behind shows it as send lag instead of hiding it.
On cancellation (Ctrl-C) every in-flight send is cancelled and awaited before the CancelledError propagates,
so each can record itself.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass

from flopwise.bench.arrivals import Load, arrival_gaps

__all__ = ["Slot", "PhaseTimes", "run_load"]


@dataclass(frozen=True, slots=True)
class Slot:
    index: int
    scheduled_at: float
    is_warmup: bool = False


@dataclass(frozen=True, slots=True)
class PhaseTimes:
    """Instants (clock seconds) bounding the measured phase: first scheduled send to last completion."""

    started_at: float
    ended_at: float
    num_sent: int


SendFn = Callable[[Slot], Awaitable[None]]


async def run_load(load: Load, indices: Iterable[int], send: SendFn, *, num_warmup: int = 0,
                   duration_s: float | None = None, seed: int = 0,
                   clock: Callable[[], float] = time.perf_counter, block: int = 1,
                   on_measured_start: Callable[[float], None] | None = None,
                   after_warmup: Callable[[], Awaitable[None]] | None = None) -> PhaseTimes:
    """`block`: the number of requests a rescaled open loop spreads over block / rate (`arrivals`).
    `after_warmup()` is awaited once every warm-up request has finished, before the measured phase's clock starts
    (the runner's baseline /metrics scrape); `on_measured_start(instant)` is called when the measured phase
    starts."""
    if num_warmup:
        await _phase(load, range(num_warmup), send, None, seed + 1, clock, num_warmup, warmup=True)
        if after_warmup is not None:
            await after_warmup()
    start = clock()
    if on_measured_start is not None:
        on_measured_start(start)
    return await _phase(load, indices, send, duration_s, seed, clock, block, warmup=False, start=start)


async def _phase(load: Load, indices: Iterable[int], send: SendFn, duration_s: float | None, seed: int,
                 clock: Callable[[], float], block: int, *, warmup: bool, start: float | None = None) -> PhaseTimes:
    start = clock() if start is None else start
    if load.is_closed:
        n = await _closed(load.concurrency or 1, load.ramp_up_s, iter(indices), send, start, duration_s, clock,
                          warmup)
    else:
        n = await _open(load, indices, send, start, duration_s, seed, clock, warmup, block)
    return PhaseTimes(start, clock(), n)


async def _closed(concurrency: int, ramp_up_s: float, it: Iterable[int], send: SendFn, start: float,
                  duration_s: float | None, clock: Callable[[], float], warmup: bool) -> int:
    sent = 0
    iterator = iter(it)

    async def worker(k: int) -> None:
        nonlocal sent
        at = start + k * ramp_up_s / concurrency
        if at > clock():
            await asyncio.sleep(at - clock())
        else:
            at = clock()
        while duration_s is None or at - start < duration_s:
            idx = next(iterator, None)
            if idx is None:
                return
            sent += 1
            await send(Slot(idx, at, warmup))
            at = clock()

    workers = [asyncio.create_task(worker(k)) for k in range(concurrency)]
    await _await_all(workers)
    return sent


async def _open(load: Load, indices: Iterable[int], send: SendFn, start: float, duration_s: float | None,
                seed: int, clock: Callable[[], float], warmup: bool, block: int) -> int:
    cap = asyncio.Semaphore(load.max_concurrency) if load.max_concurrency else None
    tasks: set[asyncio.Task[None]] = set()

    async def one(slot: Slot) -> None:
        try:
            await send(slot)
        finally:
            if cap is not None:
                cap.release()

    sent = 0
    at = start
    try:
        for idx, gap in zip(indices, arrival_gaps(load, seed, block), strict=False):
            at += gap
            # a schedule rescaled to end at the duration (request N of N at N / rate) puts its last request on the
            # boundary, give or take the gaps' rounding: it is sent
            if duration_s is not None and at - start > duration_s * (1 + 1e-9):
                break
            delay = at - clock()
            if delay > 0:
                await asyncio.sleep(delay)
            if cap is not None:
                await cap.acquire()
            t = asyncio.create_task(one(Slot(idx, at, warmup)))
            tasks.add(t)
            t.add_done_callback(tasks.discard)
            sent += 1
    except asyncio.CancelledError:
        await _cancel_all(list(tasks))
        raise
    await _await_all(list(tasks))
    return sent


async def _await_all(tasks: list[asyncio.Task[None]]) -> None:
    try:
        await asyncio.gather(*tasks)
    except asyncio.CancelledError:
        await _cancel_all(tasks)
        raise


async def _cancel_all(tasks: list[asyncio.Task[None]]) -> None:
    for t in tasks:
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
