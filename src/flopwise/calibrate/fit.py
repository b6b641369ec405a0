"""The fitting core: choose efficiency and engine parameters that make predictions match measurements.

A fit is given a starting `Tuning` (the hardware's `EfficiencyProfile` and, for bench runs, the served engine's
profile), the names of the parameters it may change, and a residual function `tuning -> log(predicted /
measured)` per measurement (weighted). Engine parameters are the engine's CPU costs (`specs/engine.py`):
`host_step_s`, `host_per_seq_s` (engine core per step), `frontend_request_s`, `frontend_prompt_token_s`,
`frontend_output_token_s`, `frontend_latency_s` (the API server). It

1. checks that the data can identify each parameter (`identify`), refusing the ones it cannot, with a reason:
   - *insensitive*: moving the parameter `spread` (10) times down and up changes no prediction by more than
     `min_effect` (3%)
     (e.g. all points memory-bound: compute_max moves nothing);
   - *confounded*: less than `min_independent` of its effect on the predictions is independent of the effects
     of the parameters already accepted (accepted in order of influence) (e.g. compute_max and compute_half_m
     when every GEMM has the same number of rows);
2. fits the accepted ones by Levenberg-Marquardt least squares on the log residuals (Levenberg 1944,
   Marquardt 1963), in a transformed space (log of each parameter, clipped to `BOUNDS`) so that multiplicative
   errors weigh the same at every scale, with forward-difference Jacobians (predictions are cheap and smooth).

`coordinate_descent` is the gradient-free grid search `benchmarks/fit_defaults.py` uses for objectives that are
not sums of squares (a median of errors).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from flopwise.errors import CalibrationError
from flopwise.specs.engine import EngineProfile
from flopwise.specs.hardware import EfficiencyProfile

__all__ = ["BOUNDS", "FITTABLE", "ENGINE_PARAMS", "HINTS", "CalibrationError", "Identification", "FitResult",
           "Tuning", "identify", "fit_profile", "coordinate_descent"]

# (lower, upper) of each fittable parameter. Fractions of peak are capped at 1.
BOUNDS: dict[str, tuple[float, float]] = {
    "compute_max": (0.01, 1.0),
    "compute_half_m": (0.01, 4096.0),
    "low_precision_compute_factor": (0.05, 1.0),
    "attention_compute_max": (0.005, 1.0),
    "overlap_exponent": (1.0, 16.0),
    "bandwidth_max": (0.02, 1.0),
    "bandwidth_half_bytes": (1.0, 1e10),
    "kernel_overhead_s": (1e-9, 1e-2),
    "step_overhead_s": (1e-7, 1.0),
    "host_step_s": (1e-7, 1.0),
    "host_per_seq_s": (1e-9, 0.1),
    "frontend_request_s": (1e-6, 1.0),
    "frontend_prompt_token_s": (1e-10, 1e-2),
    "frontend_output_token_s": (1e-8, 0.1),
    "frontend_latency_s": (1e-7, 1.0),
}
# engine parameter -> (section of EngineProfile, field)
ENGINE_PARAMS: dict[str, tuple[str, str]] = {
    "host_step_s": ("host", "step_s"), "host_per_seq_s": ("host", "per_seq_s"),
    "frontend_request_s": ("frontend", "request_s"), "frontend_prompt_token_s": ("frontend", "prompt_token_s"),
    "frontend_output_token_s": ("frontend", "output_token_s"), "frontend_latency_s": ("frontend", "latency_s"),
}
FITTABLE = tuple(BOUNDS)

# What to measure so that a refused parameter becomes identifiable.
HINTS: dict[str, str] = {
    "compute_max": "measure compute-bound points: prefills of hundreds of tokens, or GEMMs with M >= 256",
    "compute_half_m": "vary the GEMM rows (tokens per step) among compute-bound points, e.g. M = 16..1024",
    "low_precision_compute_factor": "measure 8-bit (int8/fp8) or 4-bit GEMMs",
    "attention_compute_max": "measure long prefills (attention FLOPs grow with length squared) or attention "
                             "kernels with many query rows",
    "overlap_exponent": "measure shapes near the ridge point, where compute and memory time are about equal "
                        "(GEMMs with M around peak FLOP/s / bandwidth)",
    "bandwidth_max": "measure memory-bound points: decode at batch 1, large copies, GEMV",
    "bandwidth_half_bytes": "vary the bytes one kernel streams, from small (100 KB) to large (100 MB) matrices",
    "kernel_overhead_s": "measure tiny kernels, or a small model where per-kernel cost dominates",
    "step_overhead_s": "measure whole engine steps (model profile or `flopwise bench` runs); kernels alone "
                       "have no step",
    "host_step_s": "measure `flopwise bench` runs at concurrency 1 and at higher concurrency (steps of one and "
                   "of many sequences)",
    "host_per_seq_s": "measure `flopwise bench` runs at several concurrencies with short prompts (decode steps "
                      "of 1 to 100+ sequences)",
    "frontend_request_s": "measure short requests at a high rate (e.g. 8-token prompts, 1 output token, "
                          "--request-rate inf): the API server's ceiling",
    "frontend_prompt_token_s": "measure single requests with short and long prompts (TTFT vs prompt length)",
    "frontend_output_token_s": "measure high concurrency with long outputs (the server streams every token)",
    "frontend_latency_s": "measure TTFT of single short requests (the fixed hops between processes)",
}


@dataclass(frozen=True, slots=True)
class Tuning:
    """What a calibration may change: the hardware's efficiency profile and the served engine's CPU costs
    (None: calibrating kernels or model steps only)."""

    efficiency: EfficiencyProfile
    engine: EngineProfile | None = None

    def get(self, name: str) -> float:
        if name in ENGINE_PARAMS:
            section, field_name = ENGINE_PARAMS[name]
            part = getattr(self.engine, section) if self.engine is not None else None
            if part is None:
                raise CalibrationError(f"cannot fit {name}: the deployment has no {section} "
                                       "(an offline engine has no API server)")
            return float(getattr(part, field_name))
        return float(getattr(self.efficiency, name))

    def with_values(self, values: Mapping[str, float]) -> Tuning:
        eff: dict[str, Any] = {k: v for k, v in values.items() if k not in ENGINE_PARAMS}
        out = replace(self, efficiency=replace(self.efficiency, **eff)) if eff else self
        by_section: dict[str, dict[str, float]] = {}
        for k, v in values.items():
            if k in ENGINE_PARAMS:
                section, field_name = ENGINE_PARAMS[k]
                by_section.setdefault(section, {})[field_name] = v
        if by_section and out.engine is not None:
            eng = out.engine
            for section, vals in by_section.items():
                eng = replace(eng, **{section: replace(getattr(eng, section), **vals)})
            out = replace(out, engine=eng)
        return out

    def usable(self, name: str) -> bool:
        """Whether `name` exists for this tuning (engine parameters need the engine, and its frontend)."""
        if name not in ENGINE_PARAMS:
            return True
        return self.engine is not None and getattr(self.engine, ENGINE_PARAMS[name][0]) is not None


Residuals = Callable[[Tuning], np.ndarray]


def _set(prof: Tuning, values: Mapping[str, float]) -> Tuning:
    clipped = {k: min(max(v, BOUNDS[k][0]), BOUNDS[k][1]) for k, v in values.items()}
    return prof.with_values(clipped)


def _start(prof: Tuning, name: str) -> float:
    lo, hi = BOUNDS[name]
    return min(max(prof.get(name), lo), hi)


@dataclass(frozen=True, slots=True)
class Identification:
    """Which parameters the data can pin down: `accepted` in order of influence, `refused` name -> reason,
    `effect` name -> largest |change of log prediction| over a move `spread` times down and up."""

    accepted: tuple[str, ...]
    refused: dict[str, str]
    effect: dict[str, float]


def identify(residuals: Residuals, start: Tuning, names: Sequence[str], *,
             min_effect: float = 0.03, min_independent: float = 0.1, spread: float = 10.0) -> Identification:
    """Sensitivity and collinearity test of each parameter at `start` (see module docstring)."""
    unknown = [n for n in names if n not in BOUNDS]
    if unknown:
        raise CalibrationError(f"cannot fit {unknown}; fittable parameters: {', '.join(FITTABLE)}")
    base = _set(start, {n: _start(start, n) for n in names})
    effect: dict[str, float] = {}
    cols: dict[str, np.ndarray] = {}
    refused: dict[str, str] = {}
    for n in names:
        lo, hi = BOUNDS[n]
        v = _start(base, n)
        if n == "overlap_exponent":
            a, b = 1.0, 8.0
        else:
            a, b = max(v / spread, lo), min(v * spread, hi)
        if b <= a:
            refused[n] = "its bounds leave no room to move"
            continue
        ra, rb = residuals(_set(base, {n: a})), residuals(_set(base, {n: b}))
        diff = rb - ra
        effect[n] = float(np.max(np.abs(diff))) if diff.size else 0.0
        if effect[n] < min_effect:
            refused[n] = (f"no measurement depends on it (moving it from {a:.3g} to {b:.3g} changes every "
                          f"prediction by less than {100 * (math.exp(min_effect) - 1):.0f}%); "
                          f"to fit it, {HINTS[n]}")
            continue
        cols[n] = diff / math.log(b / a)
    accepted: list[str] = []
    basis: list[np.ndarray] = []
    for n in sorted(cols, key=lambda k: -effect[k]):
        c = cols[n]
        resid = c.copy()
        for q in basis:
            resid -= (q @ resid) * q
        independent = float(np.linalg.norm(resid)) / float(np.linalg.norm(c))
        if basis and independent < min_independent:
            best = max(accepted, key=lambda k: abs(cols[k] @ c) / (np.linalg.norm(cols[k]) * np.linalg.norm(c)))
            refused[n] = (f"its effect on these measurements cannot be told apart from that of {best} "
                          f"(only {100 * independent:.0f}% of it is independent of the parameters fitted "
                          f"before it); to fit it, {HINTS[n]}")
            continue
        accepted.append(n)
        basis.append(resid / np.linalg.norm(resid))
    return Identification(tuple(accepted), refused, effect)


@dataclass(frozen=True, slots=True, kw_only=True)
class FitResult:
    """The fitted profile, what was fitted, what was refused and why, and the cost before and after
    (root mean square of the weighted log residuals)."""

    profile: Tuning
    fitted: tuple[str, ...]
    refused: dict[str, str]
    rms_before: float
    rms_after: float
    iterations: int
    effect: dict[str, float] = field(default_factory=dict)

    @property
    def at_bound(self) -> tuple[str, ...]:
        """Fitted parameters that ended on a bound of `BOUNDS`: the data push them past the model's range (a
        noisy machine, or a measurement the cost model does not describe); read their values with suspicion."""
        out = []
        for n in self.fitted:
            v, (lo, hi) = self.profile.get(n), BOUNDS[n]
            if v <= lo * 1.0001 or (v >= hi * 0.9999 and n not in ("compute_max", "bandwidth_max",
                                                                   "attention_compute_max")):
                out.append(n)
        return tuple(out)


def _to_u(name: str, v: float) -> float:
    return math.log(v)


def _from_u(name: str, u: float) -> float:
    lo, hi = BOUNDS[name]
    return min(max(math.exp(u), lo), hi)


def fit_profile(residuals: Residuals, start: Tuning, names: Iterable[str], *,
                min_effect: float = 0.03, max_iter: int = 100, tol: float = 1e-9,
                prior_weight: float = 0.0) -> FitResult:
    """Identify, then fit the identifiable parameters of `names` by Levenberg-Marquardt. Raises
    CalibrationError when none can be fitted (the message lists each parameter's reason).

    `prior_weight` > 0 adds a residual prior_weight * log(value / start value) per fitted parameter (ridge
    regression toward the starting profile, a Gaussian prior in log space): with few or noisy measurements it
    keeps parameters the data only weakly pin near their defaults instead of letting them wander to wherever
    the noise points. 0.02 costs a 2x move as much as a 1.4% misfit of one measurement."""
    names = [n for n in dict.fromkeys(names) if start.usable(n)]
    r0 = residuals(start)
    if r0.size == 0:
        raise CalibrationError("no measurements to fit")
    if not np.all(np.isfinite(r0)):
        raise CalibrationError("some predictions or measurements are not finite (zero or negative times?)")
    ident = identify(residuals, start, names, min_effect=min_effect)
    if not ident.accepted:
        reasons = "; ".join(f"{k}: {v}" for k, v in ident.refused.items())
        raise CalibrationError(f"the measurements identify none of the parameters asked for. {reasons}")
    prof, c, it = _levenberg_marquardt(residuals, start, list(ident.accepted), max_iter, tol, prior_weight)
    # Sensitivity is local: a parameter that did not matter at the start may matter at the fit (a half-size
    # that only bites once the peak share has moved). Identify again there and refit if the set grew.
    again = identify(residuals, prof, names, min_effect=min_effect)
    if set(again.accepted) > set(ident.accepted):
        ident = again
        prof, c, it2 = _levenberg_marquardt(residuals, prof, list(ident.accepted), max_iter, tol, prior_weight,
                                            prior=start)
        it += it2
    r = residuals(prof)
    # the root mean square over labels where the residuals weigh each label the same (`WeightedResiduals`);
    # over the residuals where they do not
    n = getattr(residuals, "num_labels", None) or r.size
    return FitResult(profile=prof, fitted=ident.accepted, refused=ident.refused,
                     rms_before=math.sqrt(cost_of(r0) / n), rms_after=math.sqrt(cost_of(r) / n),
                     iterations=it, effect=ident.effect)


def cost_of(r: np.ndarray) -> float:
    return float(r @ r)


def _levenberg_marquardt(residuals: Residuals, start: Tuning, fit: list[str], max_iter: int,
                         tol: float, prior_weight: float = 0.0,
                         prior: Tuning | None = None) -> tuple[Tuning, float, int]:
    data_residuals = residuals
    if prior_weight > 0:
        u0 = np.array([math.log(_start(prior or start, n)) for n in fit])

        def residuals(p: Tuning) -> np.ndarray:  # noqa: F811 - the data plus the prior
            u_p = np.array([math.log(_start(p, n)) for n in fit])
            return np.concatenate([data_residuals(p), prior_weight * (u_p - u0)])
    u = np.array([_to_u(n, _start(start, n)) for n in fit])
    lo = np.array([math.log(BOUNDS[n][0]) for n in fit])
    hi = np.array([math.log(BOUNDS[n][1]) for n in fit])

    def prof_of(uu: np.ndarray) -> Tuning:
        return _set(start, {n: _from_u(n, x) for n, x in zip(fit, uu, strict=True)})

    cost = cost_of
    r = residuals(prof_of(u))
    c = cost(r)
    lam = 1e-2
    it = 0
    h = 1e-4
    for it in range(1, max_iter + 1):  # noqa: B007 - the count is reported after the loop
        J = np.empty((r.size, len(fit)))
        for j in range(len(fit)):
            du = h if u[j] + h <= hi[j] else -h
            uj = u.copy()
            uj[j] += du
            J[:, j] = (residuals(prof_of(uj)) - r) / du
        A = J.T @ J
        g = J.T @ r
        improved = False
        for _ in range(12):
            step = np.linalg.solve(A + lam * (np.diag(np.diag(A)) + 1e-12 * np.eye(len(fit))), -g)
            u_new = np.clip(u + step, lo, hi)
            r_new = residuals(prof_of(u_new))
            c_new = cost(r_new) if np.all(np.isfinite(r_new)) else math.inf
            if c_new < c:
                improved = True
                rel = (c - c_new) / max(c, 1e-300)
                u, r, c = u_new, r_new, c_new
                lam = max(lam / 3, 1e-9)
                break
            lam *= 4
        if not improved or rel < tol:
            break
    return prof_of(u), c, it


def coordinate_descent(objective: Callable[[EfficiencyProfile], float], start: EfficiencyProfile,
                       grid: Mapping[str, Sequence[float]], *, rounds: int = 2,
                       on_param: Callable[[str, EfficiencyProfile, float], None] | None = None,
                       ) -> tuple[EfficiencyProfile, float]:
    """Minimise `objective` over a grid, one parameter at a time, `rounds` passes. Returns (best, score)."""
    prof, best = start, objective(start)
    for _ in range(rounds):
        for name, values in grid.items():
            for v in values:
                change: dict[str, Any] = {name: v}
                trial = replace(prof, **change)
                score = objective(trial)
                if score < best - 1e-6:
                    best, prof = score, trial
            if on_param:
                on_param(name, prof, best)
    return prof, best
