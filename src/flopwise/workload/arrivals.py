"""Open-loop arrival processes, vectorised with numpy (deterministic under a seed).

    poisson    gaps ~ Exponential(mean 1/rate)                       (vllm bench serve, burstiness 1)
    gamma      gaps ~ Gamma(shape k = burstiness, scale 1/(rate*k)): mean 1/rate, CV = 1/sqrt(k);
               k < 1 is burstier than Poisson, k > 1 smoother       (vllm bench serve --burstiness)
    constant   gaps of exactly 1/rate
    inf        every request at t = 0 (a burst; "max load")
By default the first request arrives at t = 0 and each later one one drawn gap after the previous.

`rescale=True` reproduces `vllm bench serve` (vllm/benchmarks/serve.py, `get_request`): n gaps are drawn, the
first measured from the start (so the first request goes out one gap after t = 0), their running sums are
multiplied by n / (rate * sum of the n gaps), so that request k (1-based) goes out at
    t_k = (g_1 + ... + g_k) * n / (rate * (g_1 + ... + g_n)),        t_n = n / rate exactly.
Without it the sum of n gaps is n / rate only on average (its CV is 1/sqrt(n k): 7% for 200 Poisson gaps), so a
run's delivered rate differs from the asked one by that much. The simulator keeps the default (no rescaling).
Closed-loop concurrency is not an arrival process: see `Workload`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from flopwise.errors import WorkloadError
from flopwise.validate import number, text

__all__ = ["ArrivalProcess", "arrival_times", "draw_gaps", "ARRIVAL_KINDS", "RateProfile", "parse_rate_profile",
           "profile_times"]

ARRIVAL_KINDS = ("poisson", "gamma", "constant")
MIN_RATE = 1e-6  # requests/s (one every 11.6 days): slower rates overflow the arrival times
MAX_BURSTINESS = 1e6


@dataclass(frozen=True, slots=True, kw_only=True)
class ArrivalProcess:
    """`rate` in requests/s (math.inf for a burst); `burstiness` is the gamma shape (1 = Poisson);
    `rescale`: vLLM's rescaling of the drawn gaps, so that the n-th of n requests goes out at n / rate."""

    kind: str = "poisson"
    rate: float = math.inf
    burstiness: float = 1.0
    rescale: bool = False

    def __post_init__(self) -> None:
        text(self.kind, "--arrival", choices=ARRIVAL_KINDS)
        number(self.rate, "--request-rate (requests/s; inf sends all at once)", lo=MIN_RATE, allow_inf=True)
        number(self.burstiness, "--burstiness (gamma shape)", lo=0, hi=MAX_BURSTINESS, lo_open=True)

    @property
    def cv(self) -> float:
        """Coefficient of variation of the gaps."""
        return {"poisson": 1.0, "gamma": 1 / math.sqrt(self.burstiness), "constant": 0.0}[self.kind]


def draw_gaps(proc: ArrivalProcess, size: int, rng: np.random.Generator) -> np.ndarray:
    """`size` gaps (s) between consecutive arrivals: exponential (Poisson), gamma with shape `burstiness`
    and the same mean, or exactly 1/rate; all zero for an infinite rate. With `proc.rescale` the gaps are
    scaled to sum to exactly size / rate (vLLM's normalisation; see the module docstring)."""
    if math.isinf(proc.rate) or size <= 0:
        return np.zeros(max(size, 0))
    mean_gap = 1.0 / proc.rate
    if proc.kind == "constant" or math.isinf(proc.burstiness):
        return np.full(size, mean_gap)
    if proc.kind == "poisson":
        gaps = rng.exponential(mean_gap, size=size)
    else:
        gaps = rng.gamma(proc.burstiness, mean_gap / proc.burstiness, size=size)
    if proc.rescale:
        total = float(gaps.sum())
        if total > 0:
            gaps = gaps * (size * mean_gap / total)
    return gaps


def arrival_times(proc: ArrivalProcess, n: int, rng: np.random.Generator) -> np.ndarray:
    """`n` non-decreasing arrival instants (s): the first at 0 and n - 1 gaps after it; with `proc.rescale`
    (vLLM's convention) n gaps from t = 0, the last arrival at exactly n / rate."""
    if n <= 0:
        return np.zeros(0)
    if proc.rescale:
        times = np.cumsum(draw_gaps(proc, n, rng))
        if not math.isinf(proc.rate):
            times[-1] = n / proc.rate  # exact, not a rounded sum
        return times
    return np.concatenate(([0.0], np.cumsum(draw_gaps(proc, n - 1, rng))))


@dataclass(frozen=True, slots=True, kw_only=True)
class RateProfile:
    """A request rate that changes over time (requests/s against seconds from the start):

        piecewise   `segments` of (duration_s, rate), in order, repeated until the stream ends
                    ("300s:5,600s:40,300s:5")
        diurnal     a sinusoid from `low` (at t = 0) up to `high` and back over `period_s`
                    ("diurnal:2:20:3600s": a day compressed into an hour)

    Arrivals follow it by time-rescaling (Cinlar): a unit-rate process (Poisson, or gamma of the stream's
    burstiness) in operational time u, mapped to t = L^-1(u) with L(t) the cumulative rate (integral of the
    rate from 0 to t), so the count by time t has mean L(t) and the instantaneous rate is the profile's."""

    kind: str
    segments: tuple[tuple[float, float], ...] = ()
    low: float = 0.0
    high: float = 0.0
    period_s: float = 0.0

    @property
    def cycle_s(self) -> float:
        return self.period_s if self.kind == "diurnal" else sum(d for d, _ in self.segments)

    def rate_at(self, t: float) -> float:
        t = t % self.cycle_s
        if self.kind == "diurnal":
            return self.low + (self.high - self.low) * (1 - math.cos(2 * math.pi * t / self.period_s)) / 2
        for d, r in self.segments:
            if t < d:
                return r
            t -= d
        return self.segments[-1][1]

    def _cycle(self) -> tuple[np.ndarray, np.ndarray]:
        """(times, cumulative rate) over one cycle, exact at the knots (piecewise) or on a fine grid (diurnal,
        whose integral low t + (high - low)(t / 2 - P sin(2 pi t / P) / (4 pi)) is exact there too)."""
        if self.kind == "diurnal":
            t = np.linspace(0.0, self.period_s, 4001)
            lam = self.low * t + (self.high - self.low) * (t / 2 - self.period_s * np.sin(2 * np.pi * t / self.period_s)
                                                           / (4 * np.pi))
            return t, lam
        t = np.concatenate(([0.0], np.cumsum([d for d, _ in self.segments])))
        lam = np.concatenate(([0.0], np.cumsum([d * r for d, r in self.segments])))
        return t, lam

    def invert(self, u: np.ndarray) -> np.ndarray:
        """The instants at which the cumulative rate reaches `u` (non-decreasing)."""
        t, lam = self._cycle()
        per_cycle = float(lam[-1])
        k = np.floor(u / per_cycle)
        out: np.ndarray = k * self.cycle_s + np.interp(u - k * per_cycle, lam, t)
        return out


def parse_rate_profile(spec: str) -> RateProfile:
    """"DUR:RATE,DUR:RATE,..." (piecewise; durations in s, m or h) or "diurnal:LOW:HIGH:PERIOD"."""
    if not isinstance(spec, str) or not spec.strip():
        raise WorkloadError("--rate-profile needs segments such as 300s:5,600s:40 or diurnal:2:20:3600s")
    s = spec.strip().lower()
    if s.startswith("diurnal:"):
        parts = s.split(":")[1:]
        if len(parts) != 3:
            raise WorkloadError(f"--rate-profile '{spec}': diurnal takes LOW:HIGH:PERIOD, e.g. diurnal:2:20:3600s")
        low, high = (_rate(p, spec) for p in parts[:2])
        if high < low:
            raise WorkloadError(f"--rate-profile '{spec}': HIGH must be at least LOW")
        if high <= 0:
            raise WorkloadError(f"--rate-profile '{spec}': the rate must be above 0 somewhere")
        return RateProfile(kind="diurnal", low=low, high=high, period_s=_duration(parts[2], spec))
    segments = []
    for part in (p for p in s.split(",") if p.strip()):
        d, sep, r = part.partition(":")
        if not sep:
            raise WorkloadError(f"--rate-profile '{spec}': each segment is DURATION:RATE, e.g. 300s:5")
        segments.append((_duration(d, spec), _rate(r, spec)))
    if not segments or not any(r > 0 for _, r in segments):
        raise WorkloadError(f"--rate-profile '{spec}': the rate must be above 0 in some segment")
    return RateProfile(kind="piecewise", segments=tuple(segments))


def _duration(text_: str, spec: str) -> float:
    t = text_.strip()
    scale = {"h": 3600.0, "m": 60.0, "s": 1.0}.get(t[-1:], None)
    try:
        v = float(t[:-1] if scale is not None else t) * (scale or 1.0)
    except ValueError:
        raise WorkloadError(f"--rate-profile '{spec}': cannot read the duration '{text_}' (e.g. 300s, 10m, 1h)") \
            from None
    if not math.isfinite(v) or v <= 0:
        raise WorkloadError(f"--rate-profile '{spec}': durations must be finite and > 0, got '{text_}'")
    return v


def _rate(text_: str, spec: str) -> float:
    try:
        v = float(text_)
    except ValueError:
        raise WorkloadError(f"--rate-profile '{spec}': cannot read the rate '{text_}' (requests/s)") from None
    if not math.isfinite(v) or v < 0:
        raise WorkloadError(f"--rate-profile '{spec}': rates must be finite and >= 0, got '{text_}'")
    return v


def profile_times(profile: RateProfile, n: int, burstiness: float, rng: np.random.Generator) -> np.ndarray:
    """`n` arrival instants following `profile` (see RateProfile), the first at t = 0 as for a constant rate."""
    unit = ArrivalProcess(kind="poisson" if burstiness == 1.0 else "gamma", rate=1.0, burstiness=burstiness)
    return profile.invert(arrival_times(unit, n, rng))
