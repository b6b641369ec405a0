"""Where each simulated request's time went, and which stage limits the run.

Per request (ms), summing to its E2E latency:
    frontend_ms  arrival -> reaching the engine: the API server's queue, its ingress work (parse, template,
                 tokenize) and its IPC latency (0 offline)
    queue_ms     reaching the engine -> first scheduled (waiting for a batch slot or KV blocks), and the time a
                 fleet's router held it while no replica could take it
    prefill_ms   first scheduled -> the step that samples the first token ends (chunks, preemptions)
    decode_ms    first token's step -> last token's step
    stream_ms    last token's step -> the client has it (the API server's egress backlog; 0 offline)

The run's bottleneck: "frontend" when the API server's CPU is busy at least 90% of the run and requests wait
longer in its queue (frontend_ms less a request's own ingress work and IPC latency) than for the engine
(queue_ms), or it is busier than the engine; "engine" when the engine steps at least 90% of the time and
requests wait for it longer than their prefill takes (a continuous-batching engine is busy at any load, a small
model's at a batch of a few; a queue says it is saturated); otherwise "none" (the offered load is below
capacity). Utilisations are shares of duration_s x replicas (x API servers for the frontend).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from flopwise.sim.request import Request
from flopwise.sim.timeline import Timeline
from flopwise.specs.deployment import Deployment

__all__ = ["PHASES", "TimeBreakdown", "request_phases", "time_breakdown"]

PHASES = ("frontend_ms", "queue_ms", "prefill_ms", "decode_ms", "stream_ms")
BUSY = 0.9


@dataclass(frozen=True, slots=True, kw_only=True)
class TimeBreakdown:
    """Each phase's mean over the requests that produced tokens (ms, by `PHASES`; None with no such request),
    the API server's CPU utilisation (None offline) and the run's bottleneck: "frontend", "engine" or "none"."""

    phases_ms: Mapping[str, float | None]
    frontend_utilization: float | None
    bottleneck: str

    def to_dict(self) -> dict[str, Any]:
        return {"time_breakdown_ms": dict(self.phases_ms), "frontend_utilization": self.frontend_utilization,
                "bottleneck": self.bottleneck}


def request_phases(requests: list[Request], tl: Timeline) -> np.ndarray:
    """(n, 5) phase durations in ms, one row per request (NaN for a request that produced no token)."""
    ends = tl.step_end_at
    delivered = tl.delivered_at if len(tl.delivered_at) else ends
    out = np.full((len(requests), len(PHASES)), np.nan)
    for i, r in enumerate(requests):
        s = r.token_steps
        if not s or r.first_scheduled_at is None:
            continue
        first, last = s[0], s[-1] - 1
        out[i] = (*r.entry_s(r.first_scheduled_at), ends[first] - r.first_scheduled_at, ends[last] - ends[first],
                  delivered[last] - ends[last])
    return out * 1e3


def time_breakdown(phases: np.ndarray, timelines: list[Timeline], dep: Deployment, duration_s: float,
                   busy_fraction: float, prompt_tokens: float = 0.0) -> TimeBreakdown:
    """Mean of each phase over the requests that produced tokens, the frontend's CPU utilisation and the
    bottleneck (see the module docstring); `prompt_tokens`: the mean prompt, for the ingress work."""
    ok = phases[~np.isnan(phases).any(axis=1)] if phases.size else phases
    means = {k: float(ok[:, j].mean()) if len(ok) else None for j, k in enumerate(PHASES)}
    fe = dep.frontend
    util = None
    if fe is not None and duration_s > 0:
        # each stage's busy time over the run (a stage of `speed` processes busy for t keeps them all busy for t);
        # at most all of it: the run's span ends at the last completion, and requests that failed (timed out, or
        # turned away by a fleet with no replica up) kept the API server busy after it
        util = min(1.0, sum(t.frontend_cpu_s for t in timelines) / (duration_s * len(timelines)))
    waiting = 0.0 if fe is None else ((means["frontend_ms"] or 0.0)
                                      - 1e3 * ((fe.ingress_s(round(prompt_tokens)) + fe.first_event_s) / fe.speed
                                               + fe.latency_s))
    if util is not None and util >= BUSY and (util > busy_fraction or waiting > (means["queue_ms"] or 0.0)):
        bottleneck = "frontend"
    elif busy_fraction >= BUSY and (means["queue_ms"] or 0.0) > (means["prefill_ms"] or 0.0):
        bottleneck = "engine"
    else:
        bottleneck = "none"
    return TimeBreakdown(phases_ms=means, frontend_utilization=util, bottleneck=bottleneck)
