"""The trade-off ledger: what a technique does to the numbers users feel, next to the baseline.

For a scenario (deployment + `batch` equal requests of `input_len` in, `output_len` out), `measure` computes:

- `flops_per_output_token`: (prefill FLOPs + decode FLOPs of one request) / output_len, summed over the GPUs
  of a replica; speculative rounds count draft and verify FLOPs (both go up), prefix hits remove prefill FLOPs.
  `decode_flops_per_output_token` (JSON only) leaves the prefill out.
- `ttft_ms`: the batch's prompts prefilled under the engine's token budget (`batching.prefill_steps`; equals
  `flopwise estimate`'s TTFT while batch * input_len fits `max_num_batched_tokens`), plus the draft model's
  own prefill when speculating.
- `tpot_ms`: the mean decode step over the output (`estimate.mean_decode_step_s`), or the speculative round
  time per expected token (`speculative.spec_tpot_s`).
- `itl_tail_ms`: the longest inter-token gap of `batch` decoding sequences while one new prompt is prefilled
  beside them (`batching.chunked_prefill_point`): what chunked prefill trades TTFT for.
- `max_concurrent_seqs`: sequences of input_len + output_len that fit in the KV pool, sharing a cached prefix,
  after a draft model's weights and KV and with their speculative look-ahead slots (`cost.memory_plan`).
- `output_tokens_per_s_at_sla`: simulated (`sim_throughput.py`: the highest request rate meeting the SLA,
  vLLM v1 scheduler, speculative decoding included) when a request stream is given; otherwise, and always as
  `static_output_tokens_per_s_at_sla`, the static-batch figure `THROUGHPUT_METHOD`; `throughput_method` says
  which.
- `memory_gib`: per GPU, what the technique pins before any request: weights (+ proposer weights) + the
  shared prefix's KV blocks.
Each comes with the baseline value, the change, and whether that is better or worse (relative change beyond
`SAME_WITHIN`); accuracy risk and complexity are ordinal ratings with their reasons.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from flopwise.cost.batch import decode_shape
from flopwise.cost.fit import require_fit
from flopwise.cost.layout import layout
from flopwise.cost.memory import memory_plan
from flopwise.cost.step import step_cost
from flopwise.errors import FlopwiseError
from flopwise.estimate import mean_decode_step_s
from flopwise.sim.config import SPECULATIVE_SCHEDULERS
from flopwise.specs.hardware import GIB
from flopwise.specs.sla import SLA
from flopwise.techniques.batching import chunked_prefill_point, prefill_flops, prefill_time_s
from flopwise.techniques.prefix_cache import cached_tokens, held_bytes, max_sequences_sharing
from flopwise.techniques.rating import Rating
from flopwise.techniques.scenario import Scenario
from flopwise.techniques.sim_throughput import SIM_METHOD, SimWorkload, simulated_throughput
from flopwise.techniques.speculative import proposer_deployment, spec_round, spec_tpot_s

__all__ = ["Metrics", "Change", "LedgerRow", "Ledger", "measure", "request_latency_s", "build_ledger", "METRICS",
           "THROUGHPUT_METHOD",
           "SAME_WITHIN"]

THROUGHPUT_METHOD = ("static batch: the largest batch whose TTFT and TPOT meet the SLA's bounds (percentiles "
                     "read as per-request bounds), its output tokens/s including prefill; not simulated")
# The static figure is what `compare --static` reports; otherwise `compare` simulates (sim_throughput.py).
SAME_WITHIN = 0.005
# key -> (label, unit, True when a larger value is better)
METRICS: dict[str, tuple[str, str, bool]] = {
    "flops_per_output_token": ("FLOPs/out tok", "FLOP", False),
    "ttft_ms": ("TTFT", "ms", False),
    "tpot_ms": ("TPOT", "ms", False),
    "itl_tail_ms": ("ITL tail", "ms", False),
    "max_concurrent_seqs": ("max seqs", "", True),
    "output_tokens_per_s_at_sla": ("tok/s @SLA", "tok/s", True),
    # the same figure per GPU, so that a technique that adds GPUs (tp=2) is judged by what each GPU delivers
    "output_tokens_per_s_per_gpu_at_sla": ("tok/s/GPU @SLA", "tok/s", True),
    "memory_gib": ("memory/GPU", "GiB", False),
}


@dataclass(frozen=True, slots=True, kw_only=True)
class Metrics:
    flops_per_output_token: float
    ttft_ms: float
    tpot_ms: float
    itl_tail_ms: float
    max_concurrent_seqs: int
    output_tokens_per_s_at_sla: float
    output_tokens_per_s_per_gpu_at_sla: float
    batch_at_sla: int  # static: the largest batch meeting the SLA; 0 when not met even one request at a time
    memory_gib: float
    decode_flops_per_output_token: float
    static_output_tokens_per_s_at_sla: float  # always computed, next to the simulated figure
    throughput_method: str = "static"  # or "simulated"

    def to_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in (*METRICS, "batch_at_sla", "decode_flops_per_output_token",
                                              "static_output_tokens_per_s_at_sla", "throughput_method")}


class _Point:
    """TTFT and TPOT of a scenario at any batch, with the pieces that do not depend on the batch cached."""

    def __init__(self, scn: Scenario):
        self.scn = scn
        self.dep = scn.deployment
        self.cached = cached_tokens(self.dep.block_size, scn.input_len, scn.prefix_hit)
        self.spec = scn.speculation
        self.proposer = proposer_deployment(self.dep, self.spec) if self.spec else None

    def ttft_s(self, batch: int) -> float:
        s = self.scn
        t = prefill_time_s(self.dep, batch, s.input_len, self.cached)
        if self.proposer is not None:
            t += prefill_time_s(self.proposer, batch, s.input_len, self.cached)
        fe = self.dep.frontend
        return t if fe is None else t + fe.batch_ttft_s(batch, s.input_len)

    def tpot_s(self, batch: int) -> float:
        s = self.scn
        if self.spec is not None:
            t = spec_tpot_s(self.dep, self.spec, batch, s.input_len, s.output_len)
        else:
            t = mean_decode_step_s(self.dep, batch, s.input_len, s.output_len - 1)
        fe = self.dep.frontend
        return t if fe is None else max(t, fe.stream_s(batch))

    def decode_flops_per_output_token(self) -> float:
        """FLOPs per generated token at the mean decode context (speculative: per expected token)."""
        s, dep = self.scn, self.dep
        mid = s.input_len + max(0, s.output_len - 2) // 2
        if self.spec is not None:
            return spec_round(dep, self.spec, 1, mid).flops_per_token
        return step_cost(dep, decode_shape(1, mid, layout(dep).windows)).flops * dep.tp

    def flops_per_output_token(self) -> float:
        """One request's prefill and decode FLOPs over its output tokens."""
        s = self.scn
        total = prefill_flops(self.dep, 1, s.input_len, self.cached)
        if self.proposer is not None:
            total += prefill_flops(self.proposer, 1, s.input_len, self.cached)
        total += (s.output_len - 1) * self.decode_flops_per_output_token()
        return total / s.output_len


def request_latency_s(scn: Scenario) -> tuple[float, float]:
    """(TTFT, TPOT) in seconds of the scenario's static batch, as the ledger's ttft_ms / tpot_ms columns."""
    point = _Point(scn)
    return point.ttft_s(scn.batch), point.tpot_s(scn.batch)


def _at_sla(point: _Point, sla: SLA, max_batch: int) -> tuple[int, float]:
    """(largest batch meeting the SLA, its output tokens/s) by bisection: TTFT and TPOT grow with the batch."""
    s = point.scn
    ttft_lim, tpot_lim, e2e_lim = sla.limit("ttft"), sla.limit("tpot"), sla.limit("e2e")
    itl_lim = sla.limit("itl")
    if itl_lim is not None:
        tpot_lim = itl_lim if tpot_lim is None else min(tpot_lim, itl_lim)

    def e2e_s(b: int) -> float:
        return point.ttft_s(b) + (s.output_len - 1) * point.tpot_s(b)

    def ok(b: int) -> bool:
        if ttft_lim is not None and point.ttft_s(b) * 1e3 > ttft_lim:
            return False
        if tpot_lim is not None and point.tpot_s(b) * 1e3 > tpot_lim:
            return False
        return e2e_lim is None or e2e_s(b) * 1e3 <= e2e_lim

    if max_batch < 1 or not ok(1):
        return 0, 0.0
    lo, hi = 1, 2  # invariant: ok(lo); hi is not ok or beyond max_batch
    while hi <= max_batch and ok(hi):
        lo, hi = hi, 2 * hi
    hi = min(hi, max_batch + 1)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if ok(mid):
            lo = mid
        else:
            hi = mid
    return lo, s.deployment.replicas * lo * s.output_len / e2e_s(lo)


def measure(scn: Scenario, sla: SLA, sim: SimWorkload | None = None) -> Metrics:
    """The ledger metrics of one scenario; throughput at the SLA from the simulator when `sim` is given, else
    the static-batch figure."""
    dep = scn.deployment
    require_fit(dep)
    point = _Point(scn)
    max_seqs = max_sequences_sharing(scn)
    batch_sla, tput = _at_sla(point, sla, max_seqs)
    tail = chunked_prefill_point(dep, scn.batch, scn.input_len, scn.input_len, point.cached)
    # simulated where the engine's scheduler policy serves the row (the SGLang policy builds no speculative
    # decodes: such a row keeps its static figure, and says so in throughput_method)
    simulable = dep.speculative is None or dep.engine.scheduler in SPECULATIVE_SCHEDULERS
    simulated = simulated_throughput(scn, sla, sim) if sim is not None and simulable else None
    plan = memory_plan(dep)
    return Metrics(
        flops_per_output_token=point.flops_per_output_token(),
        ttft_ms=point.ttft_s(scn.batch) * 1e3,
        tpot_ms=point.tpot_s(scn.batch) * 1e3,
        itl_tail_ms=tail.itl_tail_s * 1e3,
        max_concurrent_seqs=max_seqs,
        output_tokens_per_s_at_sla=tput if simulated is None else simulated,
        output_tokens_per_s_per_gpu_at_sla=(tput if simulated is None else simulated) / dep.num_gpus,
        batch_at_sla=batch_sla,
        memory_gib=(plan.weight_bytes + plan.proposer_weight_bytes + held_bytes(scn)) / GIB,
        decode_flops_per_output_token=point.decode_flops_per_output_token(),
        static_output_tokens_per_s_at_sla=tput,
        throughput_method="static" if simulated is None else "simulated",
    )


@dataclass(frozen=True, slots=True)
class Change:
    key: str
    value: float
    baseline: float

    @property
    def delta(self) -> float:
        return self.value - self.baseline

    @property
    def relative(self) -> float | None:
        return self.delta / self.baseline if self.baseline else None

    @property
    def verdict(self) -> str:
        """'better', 'worse' or 'same' (within SAME_WITHIN of the baseline)."""
        rel = self.relative
        if rel is None:
            if self.value == self.baseline:
                return "same"
            rel = 1.0 if self.value > self.baseline else -1.0
        if abs(rel) <= SAME_WITHIN:
            return "same"
        higher_better = METRICS[self.key][2]
        return "better" if (rel > 0) == higher_better else "worse"

    def to_dict(self) -> dict[str, Any]:
        return {"value": self.value, "baseline": self.baseline, "delta": self.delta,
                "delta_pct": None if self.relative is None else 100 * self.relative, "change": self.verdict}


@dataclass(frozen=True, slots=True, kw_only=True)
class LedgerRow:
    label: str
    scenario: Scenario
    metrics: Metrics
    accuracy_risk: Rating
    complexity: Rating
    notes: tuple[str, ...] = ()

    def changes(self, baseline: Metrics) -> dict[str, Change]:
        """Each metric against the baseline (every row of a ledger uses the same throughput method)."""
        return {k: Change(k, float(getattr(self.metrics, k)), float(getattr(baseline, k))) for k in METRICS}

    def rating_verdicts(self, base: LedgerRow) -> dict[str, str]:
        out = {}
        for key in ("accuracy_risk", "complexity"):
            a, b = getattr(self, key).rank, getattr(base, key).rank
            out[key] = "same" if a == b else ("worse" if a > b else "better")
        return out


@dataclass(frozen=True, slots=True, kw_only=True)
class Ledger:
    """The baseline and one row per technique; `skipped`: the default techniques that did not apply to this
    deployment, each with the reason (a technique the user named fails the call instead)."""

    baseline: LedgerRow
    rows: tuple[LedgerRow, ...]
    sla: SLA
    simulated: bool = False
    skipped: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        b = self.baseline
        dep = b.scenario.deployment

        def row(r: LedgerRow) -> dict[str, Any]:
            verdicts = r.rating_verdicts(b)
            d = r.scenario.deployment
            return {
                "technique": r.label,
                "deployment": {"model": d.model.name, "gpu": d.hardware.id, "tp": d.tp, "num_gpus": d.num_gpus,
                               "weights": d.weights.name,
                               "kv": d.kv.name, "max_num_batched_tokens": d.max_num_batched_tokens},
                "metrics": {k: c.to_dict() for k, c in r.changes(b.metrics).items()},
                "batch_at_sla": r.metrics.batch_at_sla,
                "throughput_method": r.metrics.throughput_method,
                "accuracy_risk": {**r.accuracy_risk.to_dict(), "change": verdicts["accuracy_risk"]},
                "complexity": {**r.complexity.to_dict(), "change": verdicts["complexity"]},
                "notes": list(r.notes),
            }

        s = b.scenario
        return {
            "model": dep.model.name, "gpu": dep.hardware.id, "num_gpus": dep.num_gpus, "tp": dep.tp,
            "weights": dep.weights.name, "kv": dep.kv.name,
            "workload": {"batch": s.batch, "input_len": s.input_len, "output_len": s.output_len},
            "sla": str(self.sla),
            "throughput_methods": {"simulated": SIM_METHOD, "static": THROUGHPUT_METHOD} if self.simulated
            else {"static": THROUGHPUT_METHOD},
            "baseline": {**b.metrics.to_dict(), "accuracy_risk": b.accuracy_risk.level,
                         "complexity": b.complexity.level},
            "rows": [row(r) for r in self.rows],
            "skipped": list(self.skipped),
        }

    def to_pandas(self) -> Any:
        """One row per technique (the baseline first): each metric's value and, for the techniques, its
        `<metric>_delta`, `<metric>_delta_pct` and `<metric>_change` (the verdict) against the baseline, then the
        accuracy risk and complexity levels."""
        from flopwise.display import frame  # pandas is optional

        d = self.to_dict()
        rows = [{"technique": "baseline", **{k: v for k, v in d["baseline"].items()}}]
        for r in d["rows"]:
            row: dict[str, Any] = {"technique": r["technique"]}
            for metric, change in r["metrics"].items():
                row.update({f"{metric}_{k}" if k != "value" else metric: v for k, v in change.items()
                            if k != "baseline"})
            row["accuracy_risk"], row["complexity"] = r["accuracy_risk"]["level"], r["complexity"]["level"]
            rows.append(row)
        return frame(rows)

    def _repr_html_(self) -> str:
        """Jupyter: the ledger `flopwise compare` prints."""
        from flopwise.display import html_of
        from flopwise.report.compare_report import render_ledger  # display only

        return html_of(lambda c: render_ledger(c, self))


def build_ledger(baseline: Scenario, candidates: list[tuple[str, Scenario, Rating, Rating, tuple[str, ...]]],
                 sla: SLA, sim: SimWorkload | None = None, skipped: tuple[str, ...] = (),
                 optional: bool = False) -> Ledger:
    """`candidates`: (label, transformed scenario, accuracy risk, complexity, notes) for each row; `sim`: the
    request stream to simulate for throughput at the SLA (None: static-batch figures only). With `optional` (the
    default techniques), a row the deployment cannot run (it does not fit) joins `skipped`, after those given."""
    base = LedgerRow(label="baseline", scenario=baseline, metrics=measure(baseline, sla, sim),
                     accuracy_risk=Rating("none", "as deployed"), complexity=Rating("none", "as deployed"))
    rows, left_out = [], list(skipped)
    for label, scn, risk, cx, notes in candidates:
        try:
            metrics = measure(scn, sla, sim)
        except FlopwiseError as e:
            if not optional:
                raise
            left_out.append(f"{label}: {e}")
            continue
        rows.append(LedgerRow(label=label, scenario=scn, metrics=metrics, accuracy_risk=risk, complexity=cx,
                              notes=notes))
    return Ledger(baseline=base, rows=tuple(rows), sla=sla, simulated=sim is not None, skipped=tuple(left_out))
