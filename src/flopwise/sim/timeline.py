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

__all__ = ["Timeline", "timeline_summary"]


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
    frontend_cpu_s: float = 0.0  # CPU seconds the API server worked (0 without one)

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


def timeline_summary(timelines: list[Timeline], duration_s: float) -> dict[str, Any]:
    """Time-weighted means over busy time, maxima, and the prefill / decode split (summed over replicas)."""
    w = np.concatenate([np.frombuffer(t.sample_s, dtype=float) for t in timelines])
    run = np.concatenate([np.frombuffer(t.num_running, dtype=np.int64) for t in timelines]).astype(float)
    kv = np.concatenate([np.frombuffer(t.kv_usage, dtype=float) for t in timelines])
    busy = float(w.sum())
    mean: Callable[[np.ndarray], float] = (lambda a: float((a * w).sum() / busy)) if busy else (lambda a: 0.0)
    prefill = sum(t.prefill_s for t in timelines)
    decode = sum(t.decode_s for t in timelines)
    return {
        "kv_utilization": {"mean": mean(kv), "max": float(kv.max()) if kv.size else 0.0},
        "running_batch": {"mean": mean(run), "max": int(run.max()) if run.size else 0},
        "num_steps": sum(t.num_steps for t in timelines),
        "time_in_prefill_s": prefill,
        "time_in_decode_s": decode,
        "busy_fraction": busy / (duration_s * len(timelines)) if duration_s else 0.0,
    }
