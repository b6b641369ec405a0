"""The engine loop of one replica: feed it arrivals and handle its events in time order (`replica.py`).

The loop is event-driven: arrivals (from an open or closed loop), step ends and scheduling decisions, handled
by (time, rank) with arrivals first, then step ends, then scheduling (`replica.py` gives why):
    1. requests that arrived at or before the current instant join the waiting queue (an arrival at the very
       end of a step joins the next step's scheduling);
    2. the scheduler plans the next step from that state;
    3. the step ends at now + step_time; its tokens are stamped with that instant; completions free their
       blocks and, in a closed loop, release their client, whose next request arrives at that same instant.
When nothing runs, time jumps to the next arrival. Runs of identical decode steps are fast-forwarded
(`decode_run.py`), with the same outcome as stepping.

Speculative decoding (`dep.speculative`): the scheduler grants each decode P positions and draws what it emits
(`acceptance.py`, seeded by the run's seed and the replica); a step is priced as a round,
`cost.speculative.round_time_s` of the target's step and the proposer's passes (`shape.DraftShapes`). Decodes
emit random numbers of tokens, so steps are not identical and are never fast-forwarded.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from flopwise.errors import InfeasibleError
from flopwise.sim.arrivals import request_source
from flopwise.sim.config import SimConfig
from flopwise.sim.replica import Replica, make_scheduler
from flopwise.sim.request import Request
from flopwise.sim.timeline import Timeline
from flopwise.specs.deployment import Deployment
from flopwise.workload.spec import RequestSpec

__all__ = ["run_engine", "make_scheduler", "STUCK"]

STUCK = "the scheduler can make no progress (a request cannot fit the KV pool)"


def run_engine(dep: Deployment, items: Sequence[tuple[int, RequestSpec]], concurrency: int | None,
               config: SimConfig, progress: Callable[[int], None] | None = None,
               replica: int = 0, max_concurrency: int | None = None) -> tuple[list[Request], Timeline]:
    """Serve `items` (request id, spec) on one replica (`replica` seeds its own draws); return the requests
    (finished) and the timeline. `config` must be resolved (`SimConfig.resolved`). With an API server in the
    engine profile, requests pass it before the engine and tokens after (`frontend.py`). `concurrency`: a closed
    loop of that many clients; `max_concurrency`: the open-loop arrivals behind a client cap (`CappedLoop`)."""
    rep = Replica(dep, config, index=replica)
    rep.check(s for _, s in items)
    source = request_source(items, concurrency=concurrency, max_concurrency=max_concurrency,
                            stagger_s=config.client_stagger_s)
    requests: list[Request] = []
    admit, step = rep.admit, rep.step
    while True:
        a = source.next_at()
        e = rep.next_at
        if a is not None and (e is None or a <= e):  # arrivals first at a tie
            for req in source.pop_due(a):
                admit(req)
                requests.append(req)
            continue
        if e is None:
            break
        finished = step(source.more_coming)
        if finished:
            source.on_finished(len(finished), rep.last_delivery_at)
            if progress is not None:
                progress(len(finished))
    if rep.has_work:
        raise InfeasibleError(STUCK)
    return requests, rep.timeline()
