"""`flopwise explain`: why, for this model on this GPU, in numbers.

Sections, each prose plus the numbers behind it (all from the cost model):
1. roofline: one prefill step and one decode step: FLOPs, bytes, arithmetic intensity against the machine
   balance (peak FLOP/s / bandwidth), which roof binds.
2. gap: FLOPs per generated token against the time it takes: how idle the tensor cores are while decoding.
3. batching: the same weights serve more tokens per read; the batch at which decode turns compute-bound.
4. speculative: FLOPs up, memory passes down (k draft steps + one k+1-position verify vs k plain steps).
5. quantization: int8 weights halve the layer bytes each decode step reads.
6. prefix cache, 7. KV structure, 8. chunked prefill: what each moves.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from flopwise.cost.batch import decode_shape
from flopwise.cost.fit import require_batch_fit, require_fit
from flopwise.cost.layout import layout
from flopwise.cost.memory import max_sequences
from flopwise.cost.step import StepCost, step_cost
from flopwise.specs.defaults import SPEC_ALPHA, SPEC_K
from flopwise.specs.model import ModelSpec
from flopwise.techniques import batching, kv_structure, parallelism, prefix_cache, quantization, speculative
from flopwise.techniques.scenario import Scenario
from flopwise.units import fmt_bytes, fmt_flops, fmt_s

__all__ = ["Section", "Explanation", "explain", "weight_bytes_excluding_lm_head"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Section:
    key: str
    title: str
    text: str
    numbers: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"key": self.key, "title": self.title, "text": self.text, "numbers": self.numbers}


@dataclass(frozen=True, slots=True)
class Explanation:
    scenario: Scenario
    sections: tuple[Section, ...]

    def to_dict(self) -> dict[str, Any]:
        s, d = self.scenario, self.scenario.deployment
        return {"model": d.model.name, "gpu": d.hardware.id, "tp": d.tp, "weights": d.weights.name,
                "kv": d.kv.name, "batch": s.batch, "input_len": s.input_len, "output_len": s.output_len,
                "sections": [x.to_dict() for x in self.sections]}

    def _repr_html_(self) -> str:
        """Jupyter: the report `flopwise explain` prints."""
        from flopwise.display import html_of
        from flopwise.report.explain_report import render_explanation  # display only

        return html_of(lambda c: render_explanation(c, self))


def weight_bytes_excluding_lm_head(step: StepCost) -> float:
    """Weight bytes a step reads in the decoder layers (the LM head stays 16-bit in GPU formats)."""
    return sum(o.weight_bytes for o in step.ops if o.name != "lm_head")


def _ai(s: StepCost) -> float:
    return s.flops / s.bytes if s.bytes else 0.0


def _roofline(scn: Scenario, balance: float) -> Section:
    dep = scn.deployment
    w = layout(dep).windows
    pre = step_cost(dep, batching.prefill_steps(dep, 1, scn.input_len)[0])
    dec = step_cost(dep, decode_shape(scn.batch, scn.input_len, w))
    each = f"On each of the {dep.tp} GPUs (its share of the step), prefill" if dep.tp > 1 else "Prefill"
    text = (f"The GPU's ridge point is {balance:,.0f} FLOP per byte: a step with less arithmetic per byte moved "
            f"waits on memory. {each} of one {scn.input_len}-token prompt does {fmt_flops(pre.flops)} over "
            f"{fmt_bytes(pre.bytes)} ({_ai(pre):,.0f} FLOP/B): {pre.bound}-bound, {fmt_s(pre.time_s)}. A decode "
            f"step of {scn.batch} sequence(s) does {fmt_flops(dec.flops)} over {fmt_bytes(dec.bytes)} "
            f"({_ai(dec):,.1f} FLOP/B): {dec.bound}-bound, {fmt_s(dec.time_s)}: at peak its math would take "
            f"{fmt_s(dec.peak_compute_s)}, its memory traffic {fmt_s(dec.peak_memory_s)}.")
    return Section(key="roofline", title="Prefill vs decode on the roofline", text=text, numbers={
        "balance_flop_per_byte": balance,
        "prefill": {"flops": pre.flops, "bytes": pre.bytes, "intensity": _ai(pre), "bound": pre.bound,
                    "time_ms": pre.time_s * 1e3},
        "decode": {"flops": dec.flops, "bytes": dec.bytes, "intensity": _ai(dec), "bound": dec.bound,
                   "time_ms": dec.time_s * 1e3, "peak_compute_ms": dec.peak_compute_s * 1e3,
                   "peak_memory_ms": dec.peak_memory_s * 1e3}})


def _gap(scn: Scenario, peak: float) -> Section:
    dep = scn.deployment
    dec = step_cost(dep, decode_shape(1, scn.input_len, layout(dep).windows))
    used = dec.flops / dec.time_s / peak
    gpus = f" over its {dep.tp} GPUs" if dep.tp > 1 else ""
    why = ("Decode time is set by bytes (every weight read once per step), not by FLOPs: techniques that cut bytes "
           "or share each read among more tokens pay; techniques that only cut FLOPs barely move decode."
           if dec.bound != "compute" else
           "Here even a batch of one is bound by compute, not the bytes: "
           + ("each GEMM pays for whole MMA instructions (64 rows on Hopper and Blackwell), which on a chip whose "
              "tensor rate is low for its bandwidth outweighs the weight read; " if dep.hardware.sm_class else
              "the kernels reach little of peak at this batch; ")
           + "cutting bytes (narrower weights) barely moves it, and more sequences per step come nearly free.")
    text = (f"Generating one token of one sequence costs {fmt_flops(dec.flops * dep.tp)} in all{gpus}, yet takes "
            f"{fmt_s(dec.time_s)} alone (batch 1): the tensor cores run at {used:.1%} of peak. {why}")
    return Section(key="gap", title="FLOPs vs time", text=text, numbers={"flops_per_token": dec.flops * dep.tp,
                                                   "time_ms": dec.time_s * 1e3, "share_of_peak_flops": used})


def _batching(scn: Scenario) -> Section:
    dep = scn.deployment
    w = layout(dep).windows
    cap = max(1, max_sequences(dep, scn.input_len + scn.output_len))
    rows = []
    for b in sorted({1, 8, 32, 128, cap} & set(range(1, cap + 1))):
        s = step_cost(dep, decode_shape(b, scn.input_len, w))
        rows.append({"batch": b, "step_ms": s.time_s * 1e3, "tokens_per_s": b / s.time_s, "intensity": _ai(s),
                     "bound": s.bound})
    cross = 1 if rows[0]["bound"] == "compute" else next(
        (b for b in range(1, cap + 1)
         if (s := step_cost(dep, decode_shape(b, scn.input_len, w))).peak_compute_s >= s.peak_memory_s), None)
    one, last = rows[0], rows[-1]
    text = (f"A decode step reads the weights once whatever the batch, so more sequences share each read: from "
            f"batch {one['batch']} to {last['batch']} the step grows {one['step_ms']:.1f} -> {last['step_ms']:.1f} ms "
            f"while tokens/s grow {one['tokens_per_s']:,.0f} -> {last['tokens_per_s']:,.0f} (intensity "
            f"{one['intensity']:.1f} -> {last['intensity']:.1f} FLOP/B). "
            + ("Decode is compute-bound from batch 1 here (section 2)."
               if cross == 1 and rows[0]["bound"] == "compute" else
               f"At batch {cross} the math at peak outweighs the memory traffic: decode turns compute-bound."
               if cross else f"Even at the {cap} sequences that fit, decode stays memory-bound (the KV cache "
                             f"grows with the batch too)."))
    return Section(key="batching", title="Batching raises arithmetic intensity", text=text,
                   numbers={"rows": rows, "compute_bound_from_batch": cross, "max_sequences": cap})


def _speculative(scn: Scenario, spec: speculative.SpeculativeSpec) -> Section:
    dep, k = scn.deployment, spec.k
    ctx = scn.input_len
    r = speculative.spec_round(dep, spec, scn.batch, ctx)
    plain = k * r.baseline_flops
    prop = speculative.proposer_deployment(dep, spec)
    who = f"the {spec.draft_model.name} draft" if spec.draft_model else f"the {spec.method} proposer"
    best, best_s = speculative.best_k(dep, spec, scn.batch, ctx)
    stop = speculative.breakeven_batch(dep, spec, ctx, limit=max(1, max_sequences(dep, ctx + scn.output_len)))
    text = (f"With {who} and k = {k}: plain decoding of {k} tokens costs {k} x "
            f"{fmt_flops(r.baseline_flops / scn.batch)}"
            f" = {fmt_flops(plain / scn.batch)} per sequence; one speculative round costs "
            f"{fmt_flops(r.draft_flops / scn.batch)}"
            f" (k draft steps) + {fmt_flops(r.verify_flops / scn.batch)} (verifying k+1 = {spec.positions} positions) "
            "= "
            f"{fmt_flops(r.flops / scn.batch)}, for {r.tokens_per_step:.2f} tokens expected at alpha {spec.rate:.2f}. "
            f"More FLOPs ({fmt_flops(r.flops_per_token)} vs {fmt_flops(r.baseline_flops_per_token)} per token), yet "
            f"the target's weights are read once per {r.tokens_per_step:.2f} tokens instead of once per token"
            + (f" (plus {k} reads of the proposer's)" if prop is not None else "")
            + f": {fmt_s(r.time_per_token_s)} per token vs {fmt_s(r.baseline_s)}, {r.speedup:.2f}x. Best k here: "
            f"{best} ({best_s:.2f}x). "
            + (f"From batch {stop} the verify step is compute-bound enough that speculation is slower."
               if stop else "It pays at every batch that fits: long contexts make the shared KV reads dominate."))
    title = "Speculative decoding: more FLOPs, fewer memory passes"
    return Section(key="speculative", title=title, text=text, numbers={
        "k": k, "tokens_per_step": r.tokens_per_step, "alpha": spec.rate,
        "plain_flops_k_tokens": plain / scn.batch, "draft_flops": r.draft_flops / scn.batch,
        "verify_flops": r.verify_flops / scn.batch, "round_flops": r.flops / scn.batch,
        "flops_per_token": r.flops_per_token, "baseline_flops_per_token": r.baseline_flops_per_token,
        "tpot_ms": r.time_per_token_s * 1e3, "baseline_tpot_ms": r.baseline_s * 1e3, "speedup": r.speedup,
        "best_k": best, "best_k_speedup": best_s, "breakeven_batch": stop})


def _quantization(scn: Scenario) -> Section:
    dep = scn.deployment
    # the engine's 8-bit format: weight-only int8, or Q8_0 where the engine loads GGUF files (llama.cpp)
    name = "q8_0" if dep.engine.gguf_only else "int8"
    q = quantization.quantize(scn, weights=name).deployment
    shape = decode_shape(scn.batch, scn.input_len, layout(dep).windows)
    a, b = step_cost(dep, shape), step_cost(q, shape)
    wa, wb = weight_bytes_excluding_lm_head(a), weight_bytes_excluding_lm_head(b)
    how = ("Q8_0 blocks, 8-bit weights with a scale per 32, multiplied on llama.cpp's quantized path" if name == "q8_0"
           else "weight-only int8 is dequantized and multiplied in 16-bit")
    text = (f"{name} weights: a decode step reads {fmt_bytes(wb)} of layer weights instead of {fmt_bytes(wa)} "
            f"({wb / wa:.0%}); FLOPs are unchanged ({fmt_flops(b.flops)}: {how}). The step goes "
            f"{fmt_s(a.time_s)} -> {fmt_s(b.time_s)}; the KV pool gains what the weights free. Risk: "
            f"{quantization.weight_risk(name).note}.")
    return Section(key="quantization", title="Quantization: half the bytes", text=text, numbers={
        "layer_weight_bytes": wa, "layer_weight_bytes_int8": wb, "decode_ms": a.time_s * 1e3,
        "decode_ms_int8": b.time_s * 1e3, "flops": a.flops, "flops_int8": b.flops})


def _prefix(scn: Scenario) -> Section:
    dep = scn.deployment
    c = prefix_cache.cached_tokens(dep.block_size, scn.input_len, 0.5)
    f0, f1 = batching.prefill_flops(dep, 1, scn.input_len), batching.prefill_flops(dep, 1, scn.input_len, c)
    t0, t1 = batching.prefill_time_s(dep, 1, scn.input_len), batching.prefill_time_s(dep, 1, scn.input_len, c)
    gpus = f" (all {dep.tp} GPUs)" if dep.tp > 1 else ""
    text = (f"A prefix cache hit on half the prompt ({c} tokens) removes their prefill: {fmt_flops(f0)} -> "
            f"{fmt_flops(f1)}{gpus}, TTFT {fmt_s(t0)} -> {fmt_s(t1)}. One of the few techniques that cuts FLOPs; it "
            f"holds the prefix's KV blocks while they are shared, and decode is unchanged.")
    return Section(key="prefix_cache", title="Prefix caching: fewer FLOPs, held memory", text=text, numbers={
        "cached_tokens": c, "prefill_flops": f0, "prefill_flops_cached": f1, "ttft_ms": t0 * 1e3,
        "ttft_ms_cached": t1 * 1e3})


def _kv(scn: Scenario) -> Section:
    length = scn.input_len + scn.output_len
    rows = kv_structure.attention_variants(scn.deployment, length)
    cur = next(v for v in rows if v.is_current)
    parts = ", ".join(f"{v.name} {fmt_bytes(v.kv_bytes_per_token)}/token -> {v.max_sequences:,}" for v in rows)
    text = (f"KV structure sets how many {length}-token sequences fit (FLOPs barely change): {parts}. This model "
            f"is {cur.name}. Changing it means a different (retrained) model.")
    return Section(key="kv_structure", title="KV structure and concurrency", text=text, numbers={
        "length": length, "variants": [{"name": v.name, "kv_bytes_per_token": v.kv_bytes_per_token,
                                        "max_sequences": v.max_sequences, "is_current": v.is_current} for v in rows]})


def _chunked(scn: Scenario) -> Section:
    running = max(scn.batch, 8)
    pts = batching.chunk_sweep(scn.deployment, running, scn.input_len, scn.input_len)
    parts = "; ".join(f"{p.chunk if p.steps > 1 else 'unchunked'}: TTFT {fmt_s(p.ttft_s)}, ITL tail "
                      f"{fmt_s(p.itl_tail_s)}" for p in pts)
    text = (f"While {running} sequences decode (step {fmt_s(pts[0].decode_step_s)}), a new {scn.input_len}-token "
            f"prompt either stalls them for one long step or is cut into chunks: by token budget, {parts}. "
            f"Smaller chunks bound the stall and cost TTFT (each chunk re-reads the weights).")
    return Section(key="chunked_prefill", title="Chunked prefill: TTFT vs ITL tail", text=text, numbers={
        "running": running, "points": [{"chunk": p.chunk, "ttft_ms": p.ttft_s * 1e3, "itl_tail_ms": p.itl_tail_s * 1e3}
                                       for p in pts]})


def explain(scn: Scenario, draft: ModelSpec | None = None, k: int = SPEC_K, alpha: float = SPEC_ALPHA) -> Explanation:
    """The walk-through for `scn`; the speculative section uses `draft` (else an EAGLE-style head)."""
    dep = scn.deployment
    require_fit(dep)
    require_batch_fit(dep, scn.batch, scn.input_len + scn.output_len)
    r = parallelism.roofs(dep.hardware, dep.weights.compute)
    spec = speculative.SpeculativeSpec(method="draft" if draft else "eagle", k=k, alpha=alpha, draft_model=draft)
    sections = [_roofline(scn, r.balance_flop_per_byte), _gap(scn, r.peak_flops), _batching(scn),
                _speculative(speculative.with_speculation(scn, spec), spec)]
    if dep.weights.bits_per_weight >= 16:
        sections.append(_quantization(scn))
    sections += [_prefix(scn), _kv(scn), _chunked(scn)]
    return Explanation(scn, tuple(sections))
