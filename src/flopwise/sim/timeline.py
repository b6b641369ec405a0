"""What the engine did over time: step end instants (for token times) and time-weighted engine state.

Each general step or decode run adds one sample: its start, duration, running-batch size, waiting-queue
length, KV usage and whether it computed prompt tokens. Time in prefill = steps that carry any prompt tokens
(mixed steps included, as vLLM's chunked prefill mixes them); time in decode = pure decode steps.
"""

from __future__ import annotations

from array import array
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = ["Timeline", "EngineState", "engine_state"]


@dataclass(slots=True, kw_only=True)
class Timeline:
    step_end_at: array[float] = field(default_factory=lambda: array("d"))  # one entry per engine step
    # with an API server in front (sim/frontend.py): when the client received each step's tokens; else empty
    delivered_at: array[float] = field(default_factory=lambda: array("d"))
    sample_at: array[float] = field(default_factory=lambda: array("d"))
    sample_s: array[float] = field(default_factory=lambda: array("d"))
    num_running: array[int] = field(default_factory=lambda: array("q"))
    num_waiting: array[int] = field(default_factory=lambda: array("q"))
    kv_usage: array[float] = field(default_factory=lambda: array("d"))
    prefill_s: float = 0.0
    decode_s: float = 0.0
    num_prompt_tokens: int = 0
    num_verified_decodes: int = 0  # speculative decoding: decodes verified, and the tokens they emitted
    num_verified_tokens: int = 0
    frontend_cpu_s: float = 0.0  # seconds the API-server stage was busy (0 without one)
    budget_stalls: int = 0  # prompts that waited for room in the step budget (`BaseScheduler.num_budget_stalls`)

    @property
    def num_steps(self) -> int:
        return len(self.step_end_at)

    def add(self, start_at: float, duration_s: float, running: int, waiting: int, kv_usage: float,
            prompt_tokens: int) -> None:
        self.sample_at.append(start_at)
        self.sample_s.append(duration_s)
        self.num_running.append(running)
        self.num_waiting.append(waiting)
        self.kv_usage.append(kv_usage)
        if prompt_tokens:
            self.prefill_s += duration_s
            self.num_prompt_tokens += prompt_tokens
        else:
            self.decode_s += duration_s


@dataclass(frozen=True, slots=True, kw_only=True)
class EngineState:
    """What the engine did over a run (summed over replicas): time-weighted means over busy time and maxima of
    KV usage (share of the pool) and of the running batch, steps, the prefill / decode split (s) and the busy
    share of duration_s x replicas."""

    kv_utilization_mean: float
    kv_utilization_max: float
    running_batch_mean: float
    running_batch_max: int
    num_steps: int
    time_in_prefill_s: float
    time_in_decode_s: float
    busy_fraction: float
    budget_stalls: int = 0  # prompts that waited at the queue's head for room in the step budget (unchunked)

    def to_dict(self) -> dict[str, Any]:
        return {"kv_utilization": {"mean": self.kv_utilization_mean, "max": self.kv_utilization_max},
                "running_batch": {"mean": self.running_batch_mean, "max": self.running_batch_max},
                "num_steps": self.num_steps, "time_in_prefill_s": self.time_in_prefill_s,
                "time_in_decode_s": self.time_in_decode_s, "busy_fraction": self.busy_fraction,
                "budget_stalls": self.budget_stalls}


def engine_state(timelines: list[Timeline], duration_s: float) -> EngineState:
    """The engine's state over the run from its step samples."""
    w = np.concatenate([np.frombuffer(t.sample_s, dtype=float) for t in timelines])
    run = np.concatenate([np.frombuffer(t.num_running, dtype=np.int64) for t in timelines]).astype(float)
    kv = np.concatenate([np.frombuffer(t.kv_usage, dtype=float) for t in timelines])
    busy = float(w.sum())
    mean: Callable[[np.ndarray], float] = (lambda a: float((a * w).sum() / busy)) if busy else (lambda a: 0.0)
    return EngineState(
        kv_utilization_mean=mean(kv), kv_utilization_max=float(kv.max()) if kv.size else 0.0,
        running_batch_mean=mean(run), running_batch_max=int(run.max()) if run.size else 0,
        num_steps=sum(t.num_steps for t in timelines), time_in_prefill_s=sum(t.prefill_s for t in timelines),
        time_in_decode_s=sum(t.decode_s for t in timelines),
        busy_fraction=busy / (duration_s * len(timelines)) if duration_s else 0.0,
        budget_stalls=sum(t.budget_stalls for t in timelines))
