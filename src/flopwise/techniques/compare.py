"""`flopwise compare` as a library call: a baseline scenario, a list of `--try` strings, one ledger."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from flopwise.cost.memory import max_sequences
from flopwise.errors import WorkloadError, suggest
from flopwise.specs.sla import SLA
from flopwise.techniques import speculative
from flopwise.techniques.ledger import Ledger, build_ledger
from flopwise.techniques.prefix_cache import cached_tokens
from flopwise.techniques.quantization import native_compute
from flopwise.techniques.scenario import Scenario
from flopwise.techniques.sim_throughput import SimWorkload
from flopwise.techniques.tries import Trial, parse_try

__all__ = ["compare", "trial_notes", "WorkloadShape", "named_workload_shape"]


@dataclass(frozen=True, slots=True, kw_only=True)
class WorkloadShape:
    """A named workload reduced to the equal requests a static comparison needs: its mean lengths."""

    name: str
    input_len: int
    output_len: int
    prefix_ratio: float


def named_workload_shape(name: str) -> WorkloadShape:
    from flopwise.workload.named import NAMED_WORKLOADS

    w = NAMED_WORKLOADS.get(name)
    if w is None:
        raise WorkloadError(f"unknown workload '{name}'; use one of {', '.join(NAMED_WORKLOADS)}."
                            f"{suggest(name, NAMED_WORKLOADS)}")
    return WorkloadShape(name=name, input_len=max(1, round(w.mean_input)),
                         output_len=max(1, round(w.mean_output)), prefix_ratio=w.prefix_ratio)


def trial_notes(base: Scenario, scn: Scenario) -> tuple[str, ...]:
    """What a reader should know about one row beyond its numbers."""
    notes = []
    dep = scn.deployment
    if dep.weights != base.deployment.weights and not native_compute(scn):
        notes.append(f"{dep.hardware.id} has no {dep.weights.compute} tensor cores: a weight-only kernel "
                     f"multiplies in 16-bit (bytes saved, no faster math)")
    if scn.prefix_hit != base.prefix_hit:
        c = cached_tokens(dep.block_size, scn.input_len, scn.prefix_hit)
        notes.append(f"{c} of {scn.input_len} prompt tokens come from the prefix cache (whole blocks of "
                     f"{dep.block_size})")
    spec = scn.speculation
    if spec is not None and spec != base.speculation:
        ctx = scn.input_len + scn.output_len // 2
        r = speculative.spec_round(dep, spec, scn.batch, ctx)
        k, s = speculative.best_k(dep, spec, scn.batch, ctx)
        cap = max(1, max_sequences(dep, scn.input_len + scn.output_len))
        stop = speculative.breakeven_batch(dep, spec, ctx, limit=cap)
        notes.append(f"{r.tokens_per_step:.2f} tokens per target step, {r.speedup:.2f}x at batch {scn.batch}; "
                     f"best k at alpha {spec.rate:.2f}: {k} ({s:.2f}x); "
                     + ("slower than plain decoding from batch 1" if stop == 1 else
                        f"slower than plain decoding from batch {stop}" if stop else
                        f"still pays at every batch that fits ({cap}): KV reads shared by k+1 positions"))
    if dep.max_num_batched_tokens != base.deployment.max_num_batched_tokens:
        notes.append(f"token budget {dep.max_num_batched_tokens} per step (was "
                     f"{base.deployment.max_num_batched_tokens}): shorter decode stalls, more prefill steps")
    return tuple(notes)


def compare(base: Scenario, tries: list[str], sla: SLA, hardware_file: str | Path | None = None,
            sim: SimWorkload | None = None) -> Ledger:
    """The ledger of each --try string against `base` (throughput at the SLA simulated over `sim`'s stream
    when given). Every string is parsed before any is evaluated."""
    trials: list[Trial] = [parse_try(t, hardware_file) for t in tries]
    rows = []
    for tr in trials:
        scn = tr.apply(base)
        label = " + ".join(t.label for t in tr.techniques)
        rows.append((label, scn, tr.accuracy_risk, tr.complexity, trial_notes(base, scn)))
    return build_ledger(base, rows, sla, sim)
