"""The space of deployments the planner searches, and its enumeration.

A candidate is one model replica: GPU type, TP degree (every degree up to `max_gpus` that divides the heads;
PP only where the model fits no TP degree, or, on GPUs whose peers talk over PCIe, wherever the engine keeps a
micro-batch in every stage: there a TP all-reduce crosses PCIe every layer, a pipeline sends one activation per
stage), for MoE models also each group of 2+ GPUs as data-parallel attention
with the experts spread over it ("dep": tp 1, dp = ep = the group, as SGLang, vLLM and TensorRT-LLM serve
DeepSeek-V3; `moe_layouts`), weight format, KV format, engine knobs (`max_num_seqs`,
`max_num_batched_tokens`, prefix caching) and speculative decoding (none, or each `SpeculativeSpec` given, with
its stated acceptance). Replicas come later, from the target rate.

Weight formats: by default 16-bit, fp8, nvfp4 and int4-awq (`PLAN_WEIGHTS`), or, for a pre-quantized checkpoint
(its config.json `quantization_config`, read into `ModelSpec.checkpoint_weights` by `specs/hf/quantization.py`), the
checkpoint's own format and the narrower defaults (never a wider one: gpt-oss is served as its MXFP4 experts with
bf16 attention, mxfp4-moe, DeepSeek-V3 as block-scaled FP8, fp8-block). Formats the hardware cannot run natively are
skipped (fp8 on Ampere would run as a slower weight-only kernel; fp4 only where the chip has fp4 math), except
the checkpoint's own format, which the engines serve with weight-only kernels where the math is missing. Every
candidate must hold at least one sequence of `max_len` tokens (the workload's longest) in its KV cache.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, replace
from typing import Any

from flopwise.cost.fit import fit_suggestions
from flopwise.cost.memory import max_sequences, memory_plan
from flopwise.errors import DoesNotFitError, SpecError
from flopwise.specs.defaults import (
    DEFAULT_ENGINE,
    FRONTEND_SERVING,
    PLAN_GPUS,
    PLAN_KV,
    PLAN_MAX_GPUS,
    PLAN_WEIGHTS,
)
from flopwise.specs.deployment import (
    TRTLLM_MOE_FORMATS,
    Deployment,
    check_cuda_graph_max_bs,
    check_moe_backend,
    check_pdl,
    default_seqs,
    make_deployment,
)
from flopwise.specs.engine import EngineProfile, get_engine
from flopwise.specs.hardware import HardwareSpec
from flopwise.specs.model import ModelSpec
from flopwise.specs.precision import GGUF_STEPS, default16, weight_format
from flopwise.specs.speculative import SpeculativeSpec

__all__ = ["SearchSpace", "Candidate", "enumerate_candidates", "DEFAULT_GPUS", "DEFAULT_WEIGHTS", "default_tps",
           "weight_formats"]

DEFAULT_GPUS = PLAN_GPUS
DEFAULT_WEIGHTS = PLAN_WEIGHTS
GGUF_WEIGHTS = ("bf16", *GGUF_STEPS)  # the same steps for an engine that loads GGUF files (llama.cpp)
_NATIVE = {"fp8": "fp8", "fp8-block": "fp8", "int8-w8a8": "int8", "w4a8": "int8", "nvfp4": "fp4", "nvfp4-mlp": "fp4",
           "mxfp4": "fp4"}


def default_tps(max_gpus: int) -> tuple[int, ...]:
    """The TP degrees (and data-parallel widths) the search tries unless pinned: every power of two up to
    `max_gpus` (72 GB200s: 1 to 64)."""
    return tuple(2**i for i in range(max_gpus.bit_length()) if 2**i <= max_gpus)


@dataclass(frozen=True, slots=True, kw_only=True)
class SearchSpace:
    """Each dimension is a tuple of the values to try; pin a dimension by giving one value."""

    gpus: tuple[str, ...] = DEFAULT_GPUS
    max_gpus: int = PLAN_MAX_GPUS
    tps: tuple[int, ...] | None = None  # None: `default_tps(max_gpus)`
    weights: tuple[str, ...] | None = None  # None: DEFAULT_WEIGHTS, or the checkpoint's format and narrower
    kvs: tuple[str, ...] = tuple(PLAN_KV.split(","))
    max_num_seqs: tuple[int | None, ...] = (None,)  # None: the engine's default for the GPU
    max_num_batched_tokens: tuple[int | None, ...] = (None,)
    engine: str = DEFAULT_ENGINE  # family[@version], behind its HTTP server (frontend)
    frontend: str = FRONTEND_SERVING
    prefix_caching: tuple[bool, ...] = (True,)
    speculative: tuple[SpeculativeSpec | None, ...] = (None,)  # None: plain decoding
    moe_layouts: tuple[str, ...] = ("tp", "dep")  # MoE models: experts sharded by TP; DP attention + EP
    enforce_eager: bool = False  # the engine without CUDA graphs (vLLM --enforce-eager, SGLang --disable-cuda-graph)
    # the server's API processes to try (vLLM --api-server-count, SGLang --tokenizer-worker-num; None: the engine's)
    api_servers: tuple[int | None, ...] = (None,)
    # tokens per streamed event after the first to try (--stream-interval; 1: every token)
    stream_intervals: tuple[int, ...] = (1,)
    # engine switches every candidate runs with (None / False: the engine's default for each device), as
    # `make_deployment` takes them and the launch commands set them
    async_scheduling: bool | None = None
    cuda_graph_max_bs: int | None = None
    moe_backend: str | None = None
    pdl: bool = False
    attention_backend: str | None = None  # the attention kernels the engine is told to run (None: its own choice)

    def __post_init__(self) -> None:
        if self.max_gpus < 1:
            raise SpecError(f"--max-gpus must be >= 1, got {self.max_gpus}")
        for name in ("gpus", "tps", "weights", "kvs", "max_num_seqs", "max_num_batched_tokens", "prefix_caching",
                     "speculative", "moe_layouts", "api_servers", "stream_intervals"):
            if getattr(self, name) is not None and not getattr(self, name):
                raise SpecError(f"the search space has no values for '{name}'")
        bad = set(self.moe_layouts) - {"tp", "dep"}
        if bad:
            raise SpecError(f"unknown MoE layout {sorted(bad)[0]!r}; use tp (experts sharded by TP) or dep "
                            "(data-parallel attention with expert parallelism)")
        eng = self.engine_profile()  # an unknown engine, or --enforce-eager where it has no eager mode: one line, now
        for n in self.api_servers:
            if n is not None:
                eng.with_api_servers(n)  # offline, or an engine without the flag: one line, now
        for n in self.stream_intervals:
            eng.with_stream_interval(n)  # offline, or a server that streams every token: one line, now
        if self.moe_layouts == ("dep",):  # only layouts the release cannot run: one line, now
            eng.check_parallelism(dp=2, ep=2)
        for spec in self.speculative:  # a method the release does not serve: one line, now
            if spec is not None and (why := eng.speculative_refusal(spec.method)) is not None:
                raise SpecError(why)
        if self.cuda_graph_max_bs is not None:
            check_cuda_graph_max_bs(self.cuda_graph_max_bs)
        if check_moe_backend(self.moe_backend, None) and not eng.launch.get("moe_trtllm"):  # priced where launched
            raise SpecError(f"--moe-backend trtllm is launched on TensorRT-LLM and SGLang >= 0.5.6 "
                            f"(--moe-runner-backend flashinfer_trtllm); {eng.display} {eng.version} picks its own "
                            "MoE kernels: drop --moe-backend or change --engine")
        if self.pdl:
            check_pdl(eng, None)  # the engine now; the chip per candidate (`make_deployment`)

    def engine_profile(self) -> EngineProfile:
        """The engine every candidate runs on (`EngineProfile.eager` with `enforce_eager`, `with_attention_backend`
        with `attention_backend`)."""
        eng = get_engine(self.engine, frontend=self.frontend)
        if self.attention_backend is not None:
            eng = eng.with_attention_backend(self.attention_backend)
        return eng.eager() if self.enforce_eager else eng

    def engine_switches(self) -> dict[str, Any]:
        """`make_deployment`'s engine arguments for every candidate."""
        return {"engine": self.engine_profile(), "async_scheduling": self.async_scheduling,
                "cuda_graph_max_bs": self.cuda_graph_max_bs, "moe_backend": self.moe_backend, "pdl": self.pdl}


@dataclass(frozen=True, slots=True)
class Candidate:
    deployment: Deployment
    prefix_caching: bool

    @property
    def label(self) -> str:
        d = self.deployment
        par = f"tp{d.tp}" + (f"dp{d.dp}" if d.dp > 1 else "") + (f"ep{d.ep}" if d.ep > 1 else "") + \
            (f"pp{d.pp}" if d.pp > 1 else "")
        std = d.engine_defaults()
        knobs = f" seqs{d.max_num_seqs}" if d.max_num_seqs != std.max_num_seqs else ""
        knobs += f" tok{d.max_num_batched_tokens}" if d.max_num_batched_tokens != std.max_num_batched_tokens else ""
        knobs += "" if self.prefix_caching else " no-pc"
        knobs += f" api{api}" if (api := d.engine.api_servers_asked()) is not None else ""
        knobs += f" si{d.engine.stream_interval}" if d.engine.stream_interval > 1 else ""
        knobs += f" {d.speculative.label()}" if d.speculative else ""
        return f"{d.hardware.id} {par} {d.weights.name}/kv:{d.kv.name}{knobs}"


def _runs_natively(hw: HardwareSpec, weights: str) -> bool:
    """Whether `hw` has the math `weights` needs."""
    need = _NATIVE.get(weights)
    return need is None or hw.compute_dtype(need) == need


def weight_formats(model: ModelSpec, space: SearchSpace) -> tuple[tuple[str, ...], str | None]:
    """(formats to try, the checkpoint's own format or None). Given formats are kept as given."""
    native = model.checkpoint_weights
    if space.weights is not None:
        return space.weights, native
    engine = space.engine_profile()
    steps = GGUF_WEIGHTS if engine.gguf_only else DEFAULT_WEIGHTS
    if native is None:
        return steps, None
    bits = weight_format(native).bits_per_weight
    narrower = (w for w in steps if weight_format(w).bits_per_weight < bits - 1 and w != native)
    own = engine.file_format(native)  # the checkpoint as the engine's own file holds it (llama.cpp: mxfp4_moe)
    return (own, *narrower), native  # "narrower": a bit or more (not a 4-bit format re-quantized to 4 bits)


def _holds(dep: Deployment, max_len: int) -> bool:
    """The deployment fits its devices with room for at least one sequence of `max_len` tokens."""
    return memory_plan(dep).fits and max_sequences(dep, max_len) >= 1


def _fitting(model: ModelSpec, hw: HardwareSpec, weights: str, kv: str, space: SearchSpace,
             max_len: int) -> tuple[list[Deployment], Deployment | None, str]:
    """The (tp, pp) layouts to try for one GPU and format: TP alone first (every degree of `space.tps`, default
    `default_tps`, within `max_gpus`); pipeline stages only when no TP degree fits, or, on a PCIe part, those the
    engine pipelines as well (`_pcie_pipelines`). Also the largest layout that was built (for fit suggestions) and
    why a layout could not be built at all (the first SpecError: the one of TP alone, which names a refusal of the
    chip itself before the pipeline layouts' own)."""
    tps = sorted(t for t in (space.tps or default_tps(space.max_gpus)) if t <= space.max_gpus)
    last: Deployment | None = None
    why = ""
    for pps in ((1,), (2, 4, 8)):
        found: list[Deployment] = []
        for tp in tps:
            for pp in pps:
                if tp * pp > space.max_gpus:
                    continue
                try:
                    dep = make_deployment(model, hw, weights=weights, kv=kv, tp=tp, pp=pp, max_model_len=max_len,
                                          **space.engine_switches())
                except SpecError as e:
                    why = why or str(e)
                    continue
                last = dep
                if _holds(dep, max_len):
                    found.append(dep)
                    break  # the fewest stages that fit at this TP
        if found:
            moe = any(lay.mlp.is_moe for lay in model.layers)
            tp_layouts = found if "tp" in space.moe_layouts or not moe or found[0].pp > 1 else []
            if found[0].pp == 1 and tp_layouts:
                tp_layouts += _pcie_pipelines(model, hw, weights, kv, space, max_len, tps)
            return tp_layouts + _dep_layouts(model, hw, weights, kv, space, max_len, tps), last, why
    return [], last, why


def _pcie_pipelines(model: ModelSpec, hw: HardwareSpec, weights: str, kv: str, space: SearchSpace, max_len: int,
                    tps: list[int]) -> list[Deployment]:
    """On a GPU whose peers talk over PCIe, every tp x pp layout (pp 2, 4, 8 within `max_gpus`) whose engine keeps
    a micro-batch in every stage (`Deployment.pipeline_batches`) and that fits: a pipeline's stages send one
    activation per stage boundary where TP all-reduces twice a layer, so on PCIe it can serve more per GPU
    (TensorRT-LLM's perf overview runs Llama-3.3-70B on RTX PRO 6000 cards as TP1 x PP2-8)."""
    if not hw.interconnect.lower().startswith("pcie"):
        return []
    out = []
    for tp in tps:
        for pp in (2, 4, 8):
            if tp * pp > space.max_gpus:
                continue
            try:
                dep = make_deployment(model, hw, weights=weights, kv=kv, tp=tp, pp=pp, max_model_len=max_len,
                                      **space.engine_switches())
            except SpecError:
                continue
            if dep.pipeline_batches > 1 and _holds(dep, max_len):
                out.append(dep)
    return out


def _dep_layouts(model: ModelSpec, hw: HardwareSpec, weights: str, kv: str, space: SearchSpace, max_len: int,
                 tps: list[int]) -> list[Deployment]:
    """For a MoE model, each group of 2+ GPUs as data-parallel attention with expert parallelism over it."""
    if "dep" not in space.moe_layouts or not any(lay.mlp.is_moe for lay in model.layers):
        return []
    out = []
    for n in tps:
        if n < 2:
            continue
        try:
            dep = make_deployment(model, hw, weights=weights, kv=kv, tp=1, dp=n, ep=n, max_model_len=max_len,
                                  **space.engine_switches())
        except SpecError:
            continue
        if _holds(dep, max_len):
            out.append(dep)
    return out


def enumerate_candidates(model: ModelSpec, hardware: list[HardwareSpec], space: SearchSpace,
                         max_len: int) -> tuple[list[Candidate], list[str]]:
    """All candidates that fit, and for each (GPU, format) that fits nowhere, why."""
    out: list[Candidate] = []
    misses: list[str] = []
    formats, native = weight_formats(model, space)
    tried: set[tuple[str, str, str]] = set()
    for hw, weights, kv in itertools.product(hardware, formats, space.kvs):
        # a chip without bf16 (V100, T4) runs the 16-bit formats in fp16 (`make_deployment`): named so here first,
        # that bf16 and fp16 are tried once
        weights, kv = (default16(hw) if f == "bf16" else f for f in (weights, kv))
        if (hw.id, weights, kv) in tried:
            continue
        tried.add((hw.id, weights, kv))
        if space.moe_backend == "trtllm" and weights not in TRTLLM_MOE_FORMATS:
            why = f"{hw.id} {weights}: TensorRT-LLM's MoE kernels run {', '.join(TRTLLM_MOE_FORMATS)} experts"
            if why not in misses:
                misses.append(why)
            continue
        # NVFP4 (NVIDIA's ModelOpt format: its checkpoints and kernels) on NVIDIA parts only, asked for or not; the
        # search's own formats are those the chip has the math for; a format asked for by name is priced as
        # `estimate` prices it there (FP8 on an A100: weight-only, dequantized to 16-bit in the GEMM)
        if weights != native and weights.startswith("nvfp4") and hw.vendor != "nvidia":
            why = f"{hw.id} {weights}: NVIDIA's NVFP4 runs on NVIDIA GPUs (AMD's FP4 parts run mxfp4)"
            if space.weights is not None and why not in misses:
                misses.append(why)
            continue
        if weights != native and space.weights is None and not _runs_natively(hw, weights):
            continue
        layouts, last, why = _fitting(model, hw, weights, kv, space, max_len)
        for base in layouts:
            # each proposer's deployment, built once: what the engine makes of it (its memory reserve: SGLang; its
            # fallback engine: vLLM 0.8-0.10's V0 for a draft model; its defaults without chunking: V0)
            with_spec: dict[SpeculativeSpec | None, Deployment | None] = {None: base}
            for spec in space.speculative:
                if spec is not None:
                    try:
                        with_spec[spec] = make_deployment(model, hw, weights=base.weights.name, kv=base.kv.name,
                                                          tp=base.tp, pp=base.pp, dp=base.dp, ep=base.ep,
                                                          nodes=base.nodes, speculative=spec, max_model_len=max_len,
                                                          **space.engine_switches())
                    except SpecError:
                        with_spec[spec] = None
            for seqs, tokens, pc, spec, api, si in itertools.product(
                    space.max_num_seqs, space.max_num_batched_tokens, space.prefix_caching, space.speculative,
                    space.api_servers, space.stream_intervals):
                b = with_spec[spec]
                if b is None:
                    continue
                eng = b.engine if api is None else b.engine.with_api_servers(api)
                dep = replace(b.with_knobs(max_num_seqs=seqs, max_num_batched_tokens=tokens),
                              max_num_seqs=default_seqs(b.engine, b.max_num_seqs, tokens) if seqs is None else seqs,
                              max_num_batched_tokens=b.max_num_batched_tokens if tokens is None else tokens,
                              engine=eng.with_stream_interval(si))
                if _holds(dep, max_len):
                    out.append(Candidate(dep, pc))
        if not layouts and last is not None:
            if memory_plan(last).fits:  # the weights fit; a whole sequence's KV does not
                misses.append(f"{hw.id} {weights}/{kv}: does not fit one {max_len}-token sequence's KV next to the "
                              f"weights in {space.max_gpus} GPUs")
                continue
            ideas = [i for i in fit_suggestions(last)
                     if not (i.startswith("--tp ") and i[5:].isdigit() and int(i[5:]) <= space.max_gpus)]
            misses.append(f"{hw.id} {weights}/{kv}: does not fit in {space.max_gpus} GPUs"
                          + (f" (would with {', '.join(ideas)})" if ideas else ""))
        elif not layouts and not any(m.startswith(f"{hw.id} ") and m.endswith(why) for m in misses):
            misses.append(f"{hw.id} {weights}/{kv}: {why or 'no layout within --max-gpus'}")
    return out, misses


def require_candidates(cands: list[Candidate], misses: list[str], model: ModelSpec) -> None:
    if not cands:
        hint = ("Allow more GPUs (--max-gpus), larger TP, or smaller weight formats" if
                any("does not fit" in m for m in misses) else "Try other --gpus, --weights or --engine")
        raise DoesNotFitError(f"{model.name} fits nowhere in the search space: " + "; ".join(misses[:6])
                              + f". {hint}.")
