"""Static-batch estimate: `batch` equal requests prefilled together, then decoded together to the end.

    TTFT  = step(batch prompts of input_len, nothing cached)
    TPOT  = mean over the decode steps j = 1..output_len-1 of step(batch x 1 token, context input_len + j - 1)
    E2E   = TTFT + (output_len - 1) * TPOT
    output tokens/s (total)     = replicas * batch * output_len / E2E      (prefill time included, as
                                  TensorRT-LLM's static "peak throughput" tables count it)
    prefill tokens/s            = batch * input_len / TTFT
    decode tokens/s per user    = 1 / TPOT
    MFU / MBU = FLOPs (bytes) one GPU moved over the request / (E2E * peak FLOP/s (bandwidth))

Behind the engine's API server (`dep.frontend`, `sim/frontend.py`), the batch starts once its last request
is accepted and every step's tokens are streamed out by the same CPU:
    TTFT += batch * ingress_s / servers + latency_s + batch * (token_s + first_event_s) / servers
    TPOT  = max(TPOT, batch * token_s / servers)                (the stream cannot outpace the server)
(token_s: the per-token cost at the server's stream interval, `FrontendCosts`; a server whose first event
carries N tokens moves the client's first token N - 1 steps later)
(one request reproduces the simulator exactly).

The mean decode step is exact for up to 17 decode steps; beyond, the step time (piecewise linear in the
context length) is averaged over 17 evenly spaced contexts (trapezoid rule; error well under 0.1%).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from flopwise.cost.batch import check_static_batch, decode_shape, prefill_shape
from flopwise.cost.fit import require_fit
from flopwise.cost.layout import layout
from flopwise.cost.memory import MemoryPlan, kv_bytes_for_sequences, max_sequences, memory_plan
from flopwise.cost.step import StepCost, decode_on_cuda_cores, op_time_s, roofs, step_cost, step_time
from flopwise.specs.defaults import DEFAULT_INPUT_LEN, DEFAULT_OUTPUT_LEN
from flopwise.specs.deployment import Deployment, weights_note
from flopwise.specs.hardware import GIB

__all__ = ["PhaseEstimate", "Estimate", "estimate_deployment", "mean_decode_step_s", "model_facts", "notes"]

_EXACT_DECODE_STEPS = 17


@dataclass(frozen=True, slots=True)
class PhaseEstimate:
    """One representative step of a phase: the prefill step, or a decode step at the mean context."""

    step: StepCost
    label: str

    @property
    def time_ms(self) -> float:
        return self.step.time_s * 1e3

    def to_dict(self) -> dict[str, Any]:
        s = self.step
        return {"flops": s.flops, "bytes": s.bytes, "bound": s.bound, "time_ms": self.time_ms,
                "compute_ms": s.compute_s * 1e3, "memory_ms": s.memory_s * 1e3,
                "peak_compute_ms": s.peak_compute_s * 1e3, "peak_memory_ms": s.peak_memory_s * 1e3,
                "arithmetic_intensity": s.flops / s.bytes if s.bytes else 0.0}


@dataclass(frozen=True, slots=True, kw_only=True)
class Estimate:
    deployment: Deployment
    batch: int
    input_len: int
    output_len: int
    ttft_ms: float
    tpot_ms: float
    e2e_ms: float
    output_tokens_per_s: float
    prefill_tokens_per_s: float
    max_batch: int
    memory: MemoryPlan
    kv_needed_bytes: float
    prefill: PhaseEstimate
    decode: PhaseEstimate
    mfu: float
    mbu: float

    @property
    def output_tokens_per_s_per_gpu(self) -> float:
        return self.output_tokens_per_s / self.deployment.num_gpus

    @property
    def decode_tokens_per_s_per_user(self) -> float:
        return 1e3 / self.tpot_ms if self.tpot_ms else 0.0

    @property
    def batch_fits(self) -> bool:
        return self.batch <= self.max_batch

    @property
    def fits(self) -> bool:
        return self.memory.fits and self.batch_fits

    def _repr_html_(self) -> str:
        """Jupyter: the report `flopwise estimate` prints."""
        from flopwise.display import html_of
        from flopwise.report.estimate_report import render_estimate  # display only (report sits above this layer)

        return html_of(lambda c: render_estimate(c, self))

    def to_dict(self) -> dict[str, Any]:
        d, m = self.deployment, self.memory
        return {
            "model": d.model.name, "gpu": d.hardware.id, "engine": d.engine.name,
            "frontend": "none" if d.engine.frontend is None else "http", "num_gpus": d.num_gpus, "tp": d.tp, "pp": d.pp,
            "dp": d.dp, "ep": d.ep, "expert_skew": d.expert_skew, "nodes": d.nodes, "hosts": d.hosts,
            "replicas": d.replicas, "replicas_per_server": d.replicas_per_server, "weights": d.weights.name,
            "kv": d.kv.name, "batch": self.batch,
            "input_len": self.input_len, "output_len": self.output_len,
            # one output token: no decode step, so no TPOT (None, as the simulator's records give it)
            "ttft_ms": self.ttft_ms, "tpot_ms": self.tpot_ms if self.output_len > 1 else None, "e2e_ms": self.e2e_ms,
            "output_tokens_per_s": self.output_tokens_per_s,
            "output_tokens_per_s_per_gpu": self.output_tokens_per_s_per_gpu,
            "prefill_tokens_per_s": self.prefill_tokens_per_s,
            "decode_tokens_per_s_per_user": self.decode_tokens_per_s_per_user if self.output_len > 1 else None,
            "max_batch": self.max_batch, "fits": self.fits,
            "memory": {
                "device_gib": m.device_bytes / GIB, "budget_gib": m.budget_bytes / GIB,
                "weights_gib": m.weight_bytes / GIB, "activations_gib": m.activation_bytes / GIB,
                "runtime_gib": m.runtime_bytes / GIB, "kv_pool_gib": m.kv_pool_bytes / GIB,
                "kv_cache_gib": self.kv_needed_bytes / GIB,
                "free_gib": (m.kv_pool_bytes - self.kv_needed_bytes) / GIB,
                "kv_capacity_tokens": m.kv_capacity_tokens,
                "kv_bytes_per_token": layout(d).kv_bytes_per_token / d.pp,
            },
            "prefill": self.prefill.to_dict(), "decode": self.decode.to_dict(),
            "mfu": self.mfu, "mbu": self.mbu,
            **model_facts(d), "notes": notes(d) + self._batch_notes(),
        }

    def _batch_notes(self) -> list[str]:
        """A static batch above the engine's max_num_seqs, which a server would split (the estimate prices it as
        one step, as asked)."""
        d = self.deployment
        out = []
        replica_seqs = d.max_num_seqs * d.dp
        if self.batch > replica_seqs:
            out.append(f"a batch of {self.batch:,} is priced as one step; {d.engine.display} runs at most "
                       f"{replica_seqs:,} sequences at a time here (max_num_seqs), so a server would queue the "
                       "rest: simulate it for that")
        return out


def model_facts(dep: Deployment) -> dict[str, Any]:
    """What the estimate's JSON says about the model: parameter counts, layers by kind, the cache each kind leaves
    per token (bytes on one GPU, over the layers it holds) and per sequence (linear-state layers), and the
    encoders in front, each with its prefill time per item where the config fixes the item's size."""
    m, lay = dep.model, layout(dep)
    kinds: dict[str, int] = {}
    for layer in m.layers:
        kinds[layer.attention.kind] = kinds.get(layer.attention.kind, 0) + 1
    encoders = []
    for e in m.encoders:
        item_ms = None
        if e.flops_per_item is not None and e.patches_per_item:
            item_ms = 1e3 * op_time_s(dep, e.flops_per_item, e.patches_per_item, 2.0 * e.params,
                                      4.0 * e.patches_per_item * lay.hidden * lay.act_bytes)
        encoders.append({"modality": e.modality, "name": e.name, "params": e.params, "approximate": e.approximate,
                         "item": e.item, "tokens_per_item": e.tokens_per_item, "prefill_ms_per_item": item_ms,
                         "in_memory_plan": False})
    return {
        "family": m.family, "checkpoint_weights": m.checkpoint_weights,
        "params": {"total": m.total_params, "active": m.active_params,
                   "active_without_embeddings": m.active_params_without_embeddings,
                   "encoders": m.encoder_params, "checkpoint": m.checkpoint_params},
        "layers_by_attention_kind": kinds,
        "kv_bytes_per_token_by_kind": {k: b / dep.pp for k, b in lay.cache.bytes_per_token_by_kind},
        "state_bytes_per_sequence": lay.cache.state_bytes / dep.pp,
        "encoders": encoders,
    }


# Metal's recommendedMaxWorkingSetSize: the share of an Apple SoC's RAM its GPU may wire by default (~75% on the
# larger machines; raisable with `sudo sysctl iogpu.wired_limit_mb=...`; catalog/hardware.toml's Apple notes)
METAL_DEFAULT_WORKING_SET = 0.75


def notes(dep: Deployment) -> list[str]:
    """What the numbers assume that the user should know: the model reader's notes, a weight format that is not
    the checkpoint's, an engine's fallback (vLLM 0.8-0.10's V0), decode attention priced on the CUDA cores,
    encoders left out of the memory plan."""
    out = list(dep.model.notes)
    out += [n for n in (weights_note(dep), dep.engine.fallback_note, dep.engine.version_note) if n]
    hw = dep.hardware
    metal_share = METAL_DEFAULT_WORKING_SET * hw.memory_bytes
    if hw.vendor == "apple" and (weights := memory_plan(dep).weight_bytes) > metal_share:
        out.append(f"the weights alone ({weights / GIB:.0f} GiB) exceed the ~{METAL_DEFAULT_WORKING_SET:.0%} of "
                   f"{hw.memory_gib:.0f} GiB that macOS lets the GPU use by default: raise it first (sudo sysctl "
                   "iogpu.wired_limit_mb=...)")
    if decode_on_cuda_cores(dep):
        fp8_cache = dep.kv.bytes_per_element == 1
        if fp8_cache:
            advice = ""
        elif dep.engine.kernels.decode_cuda_core_groups_on(hw.sm_class, dep.model.family, 1):
            advice = "; an FP8 KV cache would too (this release decides by group alone)"
        else:
            advice = ": an FP8 KV cache (--kv fp8) runs it on the tensor cores"
        small = roofs(dep).decode_tensor_max_seqs
        steps = f" when a step decodes more than {small} sequences (tensor-core kernels below that)" if small else ""
        told = dep.engine.kernels.attention_backend
        which = f"attention backend ({told}, as told)" if told else "default attention backend"
        out.append(f"{dep.engine.display}'s {which} here decodes this model's GQA group from "
                   f"{'an FP8' if fp8_cache else 'a 16-bit'} KV cache on the CUDA cores in FP32 (FlashInfer without "
                   f"tensor cores at this group size){steps}, priced so{advice}")
    if dep.model.encoders:
        names = ", ".join(f"{e.name} ({e.params / 1e9:.2f}B)" for e in dep.model.encoders)
        out.append(f"encoders not in the memory plan or the step cost (text-only serving): {names}; "
                   "encoder prefill per item is reported apart")
    return out


def _decode_contexts(first: int, steps: int) -> list[int]:
    if steps <= _EXACT_DECODE_STEPS:
        return list(range(first, first + steps))
    span = steps - 1
    return [first + round(span * i / (_EXACT_DECODE_STEPS - 1)) for i in range(_EXACT_DECODE_STEPS)]


def mean_decode_step_s(dep: Deployment, batch: int, first_context: int, steps: int) -> float:
    """Mean step time of `steps` decode steps of `batch` sequences whose context starts at `first_context`."""
    if steps <= 0:
        return 0.0
    windows = layout(dep).windows
    ctxs = _decode_contexts(first_context, steps)
    times = [step_time(dep, decode_shape(batch, c, windows)) for c in ctxs]
    if steps <= _EXACT_DECODE_STEPS:
        return sum(times) / len(times)
    return (sum(times) - (times[0] + times[-1]) / 2) / (len(times) - 1)


def estimate_deployment(dep: Deployment, *, batch: int = 1, input_len: int = DEFAULT_INPUT_LEN,
                        output_len: int = DEFAULT_OUTPUT_LEN) -> Estimate:
    check_static_batch(batch, input_len, output_len)
    dep.model.check_context(input_len + output_len, "shorten --input-len / --output-len")
    require_fit(dep)
    lay = layout(dep)
    prefill = step_cost(dep, prefill_shape(batch, input_len, lay.windows, dep.dp))
    ttft_s = prefill.time_s
    tpot_s = mean_decode_step_s(dep, batch, input_len, output_len - 1)
    fe = dep.frontend
    if fe is not None:
        ttft_s += fe.batch_ttft_s(batch, input_len)
        if output_len > 1:
            tpot_s = max(tpot_s, fe.stream_s(batch))
    mid = step_cost(dep, decode_shape(batch, input_len + max(0, output_len - 2) // 2, lay.windows))
    e2e_s = ttft_s + (output_len - 1) * tpot_s
    prefill_s = ttft_s
    if fe is not None and not fe.stream_first_alone and fe.stream_interval > 1 and output_len > 1:
        # a server whose first event carries N tokens (SGLang before 0.4.9): the client's first token comes
        # N - 1 steps later, its TPOT spreads what is left
        ttft_s += (min(fe.stream_interval, output_len) - 1) * tpot_s
        tpot_s = (e2e_s - ttft_s) / (output_len - 1)
    hw = dep.hardware
    peak = hw.peak_flops(dep.weights.compute, weight_only_fallback=dep.weights.compute in ("fp8", "fp4"))
    total_flops = prefill.flops + (output_len - 1) * mid.flops
    total_bytes = prefill.bytes + (output_len - 1) * mid.bytes
    mem = memory_plan(dep)
    return Estimate(
        deployment=dep, batch=batch, input_len=input_len, output_len=output_len,
        ttft_ms=ttft_s * 1e3, tpot_ms=tpot_s * 1e3, e2e_ms=e2e_s * 1e3,
        output_tokens_per_s=dep.replicas * batch * output_len / e2e_s,
        prefill_tokens_per_s=dep.replicas * batch * input_len / prefill_s,
        max_batch=max_sequences(dep, input_len + output_len), memory=mem,  # the replica's: every dp group's pool
        # per GPU, as the memory table: a GPU holds its attention group's share of the batch
        kv_needed_bytes=kv_bytes_for_sequences(dep, -(-batch // dep.dp), input_len + output_len),
        prefill=PhaseEstimate(prefill, "prefill"), decode=PhaseEstimate(mid, "decode"),
        mfu=total_flops / dep.pp / (e2e_s * peak), mbu=total_bytes / dep.pp / (e2e_s * hw.bandwidth_bytes_per_s),
    )
