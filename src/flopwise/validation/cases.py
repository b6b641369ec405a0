"""Normalised validation cases and the flopwise prediction for each.

A case (one line of cases-dev.jsonl) names the flopwise `command`, its `args` in flopwise's own names, the
JSON `metric_key` to read and the `expected` value (or an `expected_range` for configured batch sizes).
Predictors are registered per command; a command without one is counted as not modelled, with the reason.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from flopwise.cost.memory import max_sequences
from flopwise.errors import FlopwiseError
from flopwise.estimate import estimate_deployment
from flopwise.validation.engines import case_deployment
from flopwise.validation.sim_predictor import predict_simulate
from flopwise.validation.spec_predictor import predict_speculative

__all__ = ["Case", "Outcome", "load_cases", "predict_case", "score_cases", "median_abs_error", "PREDICTORS"]


@dataclass(frozen=True, kw_only=True)
class Case:
    row_id: int
    usable: bool
    reason: str | None
    regime: str
    command: str
    args: dict[str, Any]
    metric_key: str
    stat: str | None
    expected: float | None
    expected_range: tuple[float, float] | None
    source_family: str
    clean: bool = True
    baseline_args: dict[str, Any] | None = None
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)


@dataclass(frozen=True, kw_only=True)
class Outcome:
    case: Case
    predicted: float | None
    error: float | None  # signed relative error; 0 inside an expected_range
    skipped: str | None  # why no prediction


def load_cases(path: str | Path) -> list[Case]:
    out = []
    for line in Path(path).read_text().splitlines():
        if not line.strip():
            continue
        r = json.loads(line)
        rng = r.get("expected_range")
        out.append(Case(
            row_id=r["row_id"], usable=bool(r.get("usable")), reason=r.get("reason"), regime=r.get("regime", ""),
            command=r.get("command", ""), args=r.get("args") or {}, metric_key=r.get("metric_key", ""),
            stat=r.get("stat"), expected=r.get("expected"), expected_range=tuple(rng) if rng else None,
            source_family=r.get("source_family", ""), clean=bool(r.get("clean", True)),
            baseline_args=r.get("baseline_args"), raw=r))
    return out


def _estimate_value(case: Case, args: dict[str, Any], key: str) -> float:
    dep, _ = case_deployment(case.raw, "estimate", args)
    r = estimate_deployment(dep, batch=int(args.get("batch") or 1), input_len=int(round(float(args["input_len"]))),
                            output_len=int(round(float(args["output_len"]))))
    return float(r.to_dict()[key])


def _predict_estimate(case: Case) -> float:
    if case.metric_key == "max_batch":
        a = case.args
        dep, _ = case_deployment(case.raw, "estimate", a)
        return float(max_sequences(dep, int(a["input_len"]) + int(a["output_len"])))
    if case.metric_key == "speedup" and case.baseline_args:
        return (_estimate_value(case, case.args, "output_tokens_per_s")
                / _estimate_value(case, case.baseline_args, "output_tokens_per_s"))
    return _estimate_value(case, case.args, case.metric_key)


PREDICTORS: dict[str, Callable[[Case], float]] = {"estimate": _predict_estimate, "simulate": predict_simulate}
PREDICTORS["speculative"] = predict_speculative


def predict_case(case: Case) -> Outcome:
    if not case.usable:
        return Outcome(case=case, predicted=None, error=None, skipped=f"unusable: {case.reason}")
    fn = PREDICTORS.get(case.command)
    if fn is None:
        return Outcome(case=case, predicted=None, error=None,
                       skipped=f"not modelled yet: needs `flopwise {case.command}`")
    try:
        pred = fn(case)
    except FlopwiseError as e:
        return Outcome(case=case, predicted=None, error=None, skipped=f"flopwise refused: {e}")
    except (KeyError, ValueError, TypeError) as e:  # a case whose args flopwise cannot read: count it, go on
        return Outcome(case=case, predicted=None, error=None, skipped=f"cannot read the case: {type(e).__name__}: {e}")
    if case.expected_range is not None:
        lo, hi = case.expected_range
        err = 0.0 if lo <= pred <= hi else ((pred - lo) / lo if pred < lo else (pred - hi) / hi)
    elif case.expected is not None:
        err = (pred - case.expected) / case.expected
    else:
        return Outcome(case=case, predicted=pred, error=None, skipped="the case gives no expected value")
    return Outcome(case=case, predicted=pred, error=err, skipped=None)


def score_cases(cases: Iterable[Case]) -> list[Outcome]:
    return [predict_case(c) for c in cases]


def median_abs_error(outcomes: Iterable[Outcome]) -> float | None:
    errs = [abs(o.error) for o in outcomes if o.error is not None]
    return statistics.median(errs) if errs else None
