"""`flopwise compare` as a library call: a baseline scenario, a list of `--try` strings, one ledger."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from flopwise.cost.memory import max_sequences
from flopwise.errors import FlopwiseError, WorkloadError, suggest
from flopwise.specs.defaults import SPEC_ALPHA, SPEC_K
from flopwise.specs.sla import SLA
from flopwise.techniques import speculative
from flopwise.techniques.ledger import Ledger, build_ledger
from flopwise.techniques.prefix_cache import cached_tokens
from flopwise.techniques.quantization import native_compute
from flopwise.techniques.scenario import Scenario
from flopwise.techniques.sim_throughput import SimWorkload
from flopwise.techniques.tries import Trial, parse_try

__all__ = ["compare", "default_tries", "trial_notes", "WorkloadShape", "named_workload_shape"]


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


def default_tries(base: Scenario) -> tuple[str, ...]:
    """What `flopwise compare` weighs when no --try is given, each where it applies to `base`: weights one step
    narrower (fp8 from 16-bit on a chip with FP8 math, else 4-bit AWQ; Q4_K_M from a wider GGUF type on a
    GGUF-only engine), an FP8 KV cache from a 16-bit one, EAGLE speculation (`SPEC_K`, `SPEC_ALPHA`) and half of
    each prompt from the prefix cache."""
    dep = base.deployment
    gguf_only, w = dep.engine.gguf_only, dep.weights
    out = []
    if gguf_only and w.bits_per_weight > 5:
        out.append("weights=q4_k_m")
    elif not gguf_only and w.bits_per_weight >= 16:
        out.append("weights=fp8" if dep.hardware.compute_dtype("fp8") == "fp8" else "weights=int4-awq")
    if not gguf_only and dep.kv.bytes_per_element >= 2:
        out.append("kv=fp8")
    if not gguf_only and base.speculation is None:
        out.append(f"spec=eagle,k={SPEC_K},alpha={SPEC_ALPHA}")
    if not base.prefix_hit:
        out.append("prefix-cache=0.5")
    return tuple(out)


def compare(base: Scenario, tries: list[str] | None, sla: SLA, hardware_file: str | Path | None = None,
            sim: SimWorkload | None = None) -> Ledger:
    """The ledger of each --try string against `base` (throughput at the SLA simulated over `sim`'s stream
    when given). Every string is parsed before any is evaluated. `tries` None: `default_tries(base)`, each left
    out with its reason (`Ledger.skipped`) where this deployment cannot run it."""
    optional = tries is None
    trials: list[Trial] = [parse_try(t, hardware_file) for t in (default_tries(base) if tries is None else tries)]
    rows, skipped = [], []
    seen: dict[Scenario, str] = {}
    for tr in trials:
        label = " + ".join(t.label for t in tr.techniques)
        try:
            scn = tr.apply(base)
            # a try that lands on the baseline, or on another try's deployment, would be a row that says nothing
            if scn == base:
                raise WorkloadError(f"--try {tr.text!r}: changes nothing here (the baseline already runs it); "
                                    "drop it or change the baseline's options")
            if scn in seen:
                raise WorkloadError(f"--try {tr.text!r}: the same deployment as --try {seen[scn]!r}; give it once")
        except FlopwiseError as e:
            if not optional:
                raise
            skipped.append(f"{label}: {str(e).removeprefix(f'--try {tr.text!r}: ')}")
            continue
        seen[scn] = tr.text
        rows.append((label, scn, tr.accuracy_risk, tr.complexity, trial_notes(base, scn)))
    return build_ledger(base, rows, sla, sim, skipped=tuple(skipped), optional=optional)
