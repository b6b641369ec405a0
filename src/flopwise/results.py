"""What the Python API returns where the library's own result is not yet a typed record: frozen wrappers whose
`to_dict()` is exactly the matching CLI command's `--json` object, `to_pandas()` where the result is a table (pandas
is an optional extra: `pip install 'flopwise[pandas]'`), and `_repr_html_` for Jupyter (the tables the CLI prints,
rendered by the same report functions).

    Simulation     flopwise.simulate      per-request rows (`to_pandas`), the run summary, the max-rate search
    Plan           flopwise.plan          ranked deployments (`to_pandas`), the plan's charts (`figures`)
    BenchRun       flopwise.bench         one run or the levels of a sweep; per-request records (`to_pandas`)
    Calibrated     flopwise.calibrate     the fit, before/after errors per metric (`to_pandas`), files written

`flopwise.estimate`, `compare` and `explain` return the library's records (`Estimate`, `Ledger`, `Explanation`),
which have the same methods.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from flopwise.display import frame, html_of
from flopwise.metrics.summary import LatencyStats

__all__ = ["Simulation", "Plan", "BenchRun", "Calibrated"]


def _frozen(d: Mapping[str, Any]) -> Mapping[str, Any]:
    return MappingProxyType(copy.deepcopy(dict(d)))


def _stats(d: Mapping[str, Any], key: str) -> LatencyStats:
    v = d[key]
    return LatencyStats(mean=v["mean"], p50=v["p50"], p90=v["p90"], p95=v["p95"], p99=v["p99"])


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class Simulation:
    """A simulated run (`flopwise simulate`). Latencies in ms, percentiles over requests (ITL over token gaps);
    `request_throughput` and `goodput` in requests/s, `output_tokens_per_s` in tokens/s; `max_rate` (requests/s)
    where the run was a max-rate search. `summary` is the `--json` object, `rows` one mapping per request."""

    summary: Mapping[str, Any]
    rows: tuple[Mapping[str, Any], ...]
    deployment: Any  # flopwise.Deployment

    @classmethod
    def of(cls, summary: Mapping[str, Any], rows: Iterable[Mapping[str, Any]], deployment: Any) -> Simulation:
        return cls(summary=_frozen(summary), rows=tuple(MappingProxyType(dict(r)) for r in rows),
                   deployment=deployment)

    ttft_ms = property(lambda self: _stats(self.summary, "ttft_ms"), doc="Time to first token, ms.")
    tpot_ms = property(lambda self: _stats(self.summary, "tpot_ms"), doc="Time per output token after the first, ms.")
    itl_ms = property(lambda self: _stats(self.summary, "itl_ms"), doc="Gaps between consecutive tokens, ms.")
    e2e_ms = property(lambda self: _stats(self.summary, "e2e_ms"), doc="Arrival to last token, ms.")
    queue_ms = property(lambda self: _stats(self.summary, "queue_ms"), doc="Arrival to first scheduled step, ms.")
    request_throughput = property(lambda self: float(self.summary["request_throughput"]), doc="Requests/s.")
    output_tokens_per_s = property(lambda self: float(self.summary["output_tokens_per_s"]), doc="Tokens/s.")
    goodput = property(lambda self: float(self.summary["goodput"]), doc="Requests/s meeting every SLA bound.")
    sla_attainment = property(lambda self: float(self.summary["sla_attainment"]), doc="Share of requests in SLA.")
    sla_met = property(lambda self: self.summary.get("sla_met"), doc="Every SLA objective met (None: no SLA).")
    num_requests = property(lambda self: int(self.summary["num_requests"]))
    preemptions = property(lambda self: int(self.summary["preemptions"]))
    duration_s = property(lambda self: float(self.summary["duration_s"]), doc="First arrival to last token, s.")
    bottleneck = property(lambda self: self.summary.get("bottleneck"), doc="Where the time went, in one word.")
    max_rate = property(lambda self: (self.summary.get("max_rate") or {}).get("request_rate"),
                        doc="The highest request rate meeting the SLA (requests/s), where searched.")

    def to_dict(self) -> dict[str, Any]:
        """The `flopwise simulate --json` object."""
        return copy.deepcopy(dict(self.summary))

    def to_pandas(self) -> Any:
        """One row per request: request_id, arrival_at (s), input/output tokens, queue_ms, ttft_ms, tpot_ms,
        e2e_ms, preemptions, error, cached_tokens (the `--output` columns)."""
        return frame(self.rows)

    def _repr_html_(self) -> str:
        from flopwise.report.simulate_report import render_simulation  # display only

        return html_of(lambda c: render_simulation(c, self.to_dict()))


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class Plan:
    """A deployment plan (`flopwise plan`): `ranked` deployments per replica at the highest rate meeting the SLA
    (goodput_per_gpu in requests/s per GPU, p95 latencies in ms, cost_per_1m_tokens in USD), the Pareto frontier,
    trade-offs and launch commands. `result` is the planner's own record (`flopwise.plan.search.PlanResult`)."""

    summary: Mapping[str, Any]
    result: Any

    ranked = property(lambda self: tuple(self.summary["ranked"]), doc="Deployments meeting the SLA, best first.")
    best = property(lambda self: self.summary["ranked"][0] if self.summary["ranked"] else None)

    def to_dict(self) -> dict[str, Any]:
        """The `flopwise plan --json` object."""
        return copy.deepcopy(dict(self.summary))

    def to_pandas(self) -> Any:
        """The ranked deployments, one row each (the columns of the CLI's ranked table and more)."""
        return frame(self.summary["ranked"])

    def figures(self) -> dict[str, Any]:
        """The HTML report's plotly figures: pareto, roofline, memory, latency (show one with `.show()`)."""
        from flopwise.report.plan_html import plan_figures  # plotly is imported here

        return plan_figures(self.result)

    def _repr_html_(self) -> str:
        from flopwise.report.plan_report import render_plan  # display only

        return html_of(lambda c: render_plan(c, self.to_dict()))


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class BenchRun:
    """A measured run of a real server (`flopwise bench`), or the levels of a sweep: `reports` the load
    generator's records (`flopwise.bench.runner.RunReport`, one per level), `summary` the `--json` object
    (latencies in ms; request_throughput in requests/s; output_tokens_per_s in tokens/s)."""

    summary: Mapping[str, Any]
    reports: tuple[Any, ...]
    max_rate_meeting_sla: float | None = None
    predictions: tuple[Any, ...] = ()  # with predict=True: one `calibrate.predict` comparison per completed level

    def to_dict(self) -> dict[str, Any]:
        """The `flopwise bench --json` object: one run, or {"levels": [...], "max_rate_meeting_sla": ...}."""
        return copy.deepcopy(dict(self.summary))

    def to_pandas(self) -> Any:
        """One row per request of every level (`level` names the load), as the run directories store them."""
        from flopwise.bench.store import load_run  # the saved records live in each run's directory

        rows = []
        for rep in self.reports:
            for rec in load_run(rep.root).records:
                rows.append({"level": rep.config.load.label, **rec.to_row()})
        return frame(rows)

    def _repr_html_(self) -> str:
        from flopwise.bench.render import render_levels, render_run  # display only

        if len(self.reports) == 1:
            return html_of(lambda c: render_run(c, self.reports[0]))
        return html_of(lambda c: render_levels(c, list(self.reports), self.max_rate_meeting_sla))


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class Calibrated:
    """A fitted efficiency profile (`flopwise calibrate`): `calibration` holds the hardware before and after,
    each fitted parameter, the refused ones and why, and the error per metric; `hardware_file` and `engine_file`
    are what was written (None: nothing)."""

    calibration: Any  # flopwise.calibrate.calibration.Calibration
    hardware_file: str | None
    engine_file: str | None

    def to_dict(self) -> dict[str, Any]:
        """The `flopwise calibrate --json` object."""
        return {"hardware_file": self.hardware_file, "engine_file": self.engine_file, **self.calibration.to_dict()}

    def to_pandas(self) -> Any:
        """Error per metric before and after the fit, one row each."""
        return frame(e.to_dict() for e in self.calibration.errors)

    def _repr_html_(self) -> str:
        from flopwise.calibrate.report import render_calibration  # display only

        return html_of(lambda c: render_calibration(c, self.calibration))
