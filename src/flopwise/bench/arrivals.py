"""When requests are sent: open-loop arrival processes at a rate, or a closed loop at a concurrency.

Open loop (sends regardless of completions, like real users):
    poisson    exponential gaps, mean 1/rate
    gamma      gamma gaps with shape `burstiness` and mean 1/rate (shape < 1 is burstier than Poisson,
               > 1 smoother; shape 1 is Poisson; the coefficient of variation of the gaps is 1/sqrt(shape))
    constant   gaps of exactly 1/rate
    rate = inf sends every request at once (a burst)
`rescale=True` is `vllm bench serve`'s schedule (`workload.arrivals`): gaps drawn in blocks of `num_requests`
and scaled so that the N-th request of a block goes out exactly N / rate after the block's start (the first one
gap after the start, not at it). Without it the first request goes out at the start and the delivered rate of a
run differs from the asked one by the sampling error of the gaps' sum (7% for 200 Poisson requests).
Closed loop: `concurrency` workers, each sending its next request when its previous one finishes. With
`ramp_up_s` = R, worker k (0-based) sends its first request at k * R / concurrency instead of all at once: a
synchronized start is a burst that repeats every round against a server with uniform request times, while a
ramp of one request duration gives the evenly spread sends of a steady state.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Literal

import numpy as np

from flopwise.errors import WorkloadError
from flopwise.workload.arrivals import ArrivalProcess, draw_gaps

__all__ = ["Load", "ArrivalKind", "arrival_gaps"]

ArrivalKind = Literal["poisson", "gamma", "constant", "concurrency"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Load:
    """One load level. `max_concurrency` caps in-flight requests of an open loop (None: no cap);
    `ramp_up_s` staggers the start of a closed loop's workers."""

    kind: ArrivalKind
    rate: float | None = None
    concurrency: int | None = None
    burstiness: float = 1.0
    max_concurrency: int | None = None
    ramp_up_s: float = 0.0
    rescale: bool = False

    def __post_init__(self) -> None:
        if self.kind == "concurrency":
            if not self.concurrency or self.concurrency < 1:
                raise WorkloadError("--concurrency must be >= 1")
        elif self.rate is None or not self.rate > 0:
            raise WorkloadError(f"--request-rate must be > 0 (inf for a burst); got {self.rate}")
        if not self.burstiness > 0:
            raise WorkloadError(f"--burstiness (gamma shape) must be > 0; got {self.burstiness}")
        if self.max_concurrency is not None and self.max_concurrency < 1:
            raise WorkloadError("--max-concurrency must be >= 1")
        if not self.ramp_up_s >= 0 or math.isinf(self.ramp_up_s):
            raise WorkloadError("--ramp-up must be >= 0 seconds")

    @property
    def is_closed(self) -> bool:
        return self.kind == "concurrency"

    @property
    def label(self) -> str:
        if self.is_closed:
            return f"concurrency-{self.concurrency}"
        return "rate-inf" if math.isinf(self.rate or 0) else f"rate-{self.rate:g}"

    def to_dict(self) -> dict[str, object]:
        return {"kind": self.kind, "rate": self.rate, "concurrency": self.concurrency,
                "burstiness": self.burstiness, "max_concurrency": self.max_concurrency, "ramp_up_s": self.ramp_up_s,
                "rescale": self.rescale}


def arrival_gaps(load: Load, seed: int = 0, block: int = 1) -> Iterator[float]:
    """Endless gaps (s) between consecutive sends of an open-loop load, the first measured from the start.

    Without rescaling the first gap is 0 (the first request goes out at the start). With `load.rescale`, gaps
    come in blocks of `block` requests, each block's gaps summing to exactly block / rate."""
    if load.is_closed:
        raise ValueError("a closed loop has no arrival gaps")
    proc = ArrivalProcess(kind=load.kind, rate=float(load.rate), burstiness=load.burstiness, rescale=load.rescale)  # type: ignore[arg-type]
    rng = np.random.default_rng(seed)
    if load.rescale:
        while True:
            yield from (float(g) for g in draw_gaps(proc, max(block, 1), rng))
    yield 0.0
    while True:  # one gap at a time: the stream is endless
        yield float(draw_gaps(proc, 1, rng)[0])
