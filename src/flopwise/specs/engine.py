"""Serving engines as data: what an engine of a given family and version does outside the GPU kernels.

An engine profile (`catalog/engines/<family>.toml`) holds, per family and version range, every number with
its source (or marked fitted):

- the **frontend** (the OpenAI HTTP server in front of the engine), a CPU stage every request passes:
      ingress_s(request) = request_s (+ chat_request_s on the chat endpoint) + prompt_tokens * prompt_token_s
      egress_s(step)     = emitted_tokens * output_token_s         (detokenize + one SSE event per token)
  and, where the server streams every `stream_interval` tokens (--stream-interval N: an event for the first token,
  then one per N), output_token_s * (stream_token_share + (1 - stream_token_share) / N) per token;
  served FIFO by `api_servers` processes (each one CPU), plus a pure delay `latency_s` (IPC hops and process
  wake-ups that hold no CPU); `sim/frontend.py` runs it;
- the **engine core's CPU work per step** (scheduling, input preparation, output processing):
      host_s(step) = step_s + per_seq_s * sequences in the step + per_worker_s * (GPUs - 1)
  which either adds to the device time (a synchronous loop) or overlaps it (`async_scheduling`: the step
  takes max(device, host)); `cost/step.py` prices it;
- **default knobs** (`max_num_seqs`, `max_num_batched_tokens` by device memory, memory fraction, block size,
  chunked prefill, prefix caching) and the **memory policy** that says what the memory fraction means:
      share_of_device      vLLM --gpu-memory-utilization: weights + activations + graphs + KV <= f * device
      static_share         SGLang --mem-fraction-static: weights + KV <= f * device (activations, graphs outside)
      share_of_free        TensorRT-LLM kv_cache_free_gpu_memory_fraction: KV = f * (device - weights - peak)
  (`cost/memory.py` sizes the KV pool by it);
- **kernel factors** where engines differ for the same chip: the share of bandwidth a fused-MoE kernel reaches
  with few tokens per expert, the compute share of quantized (GGUF) matmuls, eager (no CUDA graph) launches.

Versions: a profile is the family's `[base]` table merged with every `[[release]]` whose `since` is at or
below the version asked (a changelog: each release states only what changed). `vllm@0.6.3` takes the base and
the 0.6.0 release; a version above the newest takes the newest; below the oldest, the base.
`offline` (`--frontend none`) removes the frontend: the engine's own benchmark (trtllm-bench, llama-bench,
vLLM's LLM class) with no HTTP server in front.

Launch data: a family's `[launch]` table (flag names, what its memory fraction is called, version-dependent
spellings in `[[launch.release]]`, merged by version like the profile) is read into `EngineProfile.launch`;
`flopwise.launch` renders commands from it. It never changes what is simulated.
"""

from __future__ import annotations

import math
import re
import tomllib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, fields, replace
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

from flopwise.errors import SpecError, suggest
from flopwise.specs.hardware import DEVICE_KINDS, GIB, SM_CLASSES
from flopwise.specs.precision import KV_FORMATS, WEIGHT_FORMATS, WeightFormat, gguf_counterpart, weight_format
from flopwise.specs.speculative import METHODS as SPECULATIVE_METHODS
from flopwise.validate import TABLE_CONFIG, from_table, integer, number, read_text
from flopwise.validate import text as check_text

__all__ = ["FrontendCosts", "HostCosts", "KernelFactors", "DeviceKernels", "BatchDefault", "CHUNKED_FEATURES",
           "EngineProfile", "LaunchTable", "MEMORY_POLICIES", "KvMargin",
           "ENDPOINTS", "EngineKnobs", "MemoryReserve", "engine_families", "engine_releases", "load_engine_file",
           "write_engine_file", "get_engine", "parse_engine_text", "DEFAULT_ENGINE", "SCHEDULERS", "DEVICE_KINDS"]

DEFAULT_ENGINE = "vllm"
SCHEDULERS = ("vllm", "static", "sglang")  # the simulator's policies (sim/)
MEMORY_POLICIES = ("share_of_device", "static_share", "share_of_free")
ENDPOINTS = ("completions", "chat")
DP_FRONTENDS = ("none", "shared", "per_rank")  # FrontendCosts.data_parallel
DP_ATTENTION_CHUNKS = ("whole", "split", "halved")  # EngineProfile.dp_attention_chunk
SYNC_KINDS = ("pp", "speculative", "linear_state", "multinode")  # HostCosts.sync_with
SPEC_SCORINGS = ("batched", "expand", "expand_with_graphs")  # EngineProfile.spec_scoring
PP_MICROBATCHES = ("none", "each", "shared")  # EngineProfile.pp_microbatches
# the engines' flags for a server's API-process count (the catalog's launch flag `api_servers`), for messages
API_SERVER_FLAGS = "vLLM --api-server-count from 0.9.1, SGLang --tokenizer-worker-num from 0.5.2"
# 0.11.2, v0.9, 0.10.1.1 (vLLM's hotfix releases), 0.5.6.post1, 0.11.0rc2, 0.20.0.dev1, llama.cpp build b4000; a
# post release follows its release (SGLang changed defaults in 0.4.6.post2 and 0.4.7.post1); the fourth number and
# the pre/dev tail are not priced
_VERSION = re.compile(r"^[vb]?(\d+)(?:\.(\d+))?(?:\.(\d+))?(?:\.\d+)?(?:\.?(?:rc|dev|a|b)\d*)*(?:\.?post(\d*))?"
                      r"(?:\.?(?:rc|dev|a|b)\d*)*(?:\+[\w.]+)?$", re.I)


def _check_nonneg(owner: str, obj: object) -> None:
    """Every float field of `obj` a finite number >= 0 and every bool field true or false (a TOML string such as
    "false" would otherwise pass as true); int fields are checked by their owner."""
    for f in fields(obj):  # type: ignore[arg-type]
        if f.type in ("float", float):
            number(getattr(obj, f.name), f"engine {owner}: {f.name}", lo=0, error=SpecError)
        elif f.type in ("bool", bool) and not isinstance(getattr(obj, f.name), bool):
            raise SpecError(f"engine {owner}: {f.name} must be true or false, got {getattr(obj, f.name)!r}")


@dataclass(frozen=True, slots=True, kw_only=True)
class FrontendCosts:
    """CPU seconds the API server spends per request, per prompt token and per output token; `latency_s` is
    a delay that holds no CPU. `api_servers` processes share the work (each one CPU); `shared_by` engines (data-
    parallel replicas behind one server) share them, so one replica's stage runs at `speed` = api_servers /
    shared_by (a FIFO shared by R engines fed round-robin, as R stages of 1/R the speed: exact for a burst).
    `data_parallel`: what a server does with several data-parallel engines (`Deployment.replicas_per_server`):
    "none" (it has no such mode), "shared" (one API server for them all: SGLang's TokenizerManager, vLLM 0.9-0.14)
    or "per_rank" (one API server per engine core: vLLM 0.15+, whose api_server_count defaults to the DP size; a
    profile's `api_servers` then counts per engine core, where vLLM's --api-server-count is the total). Sharing R
    ways as R stages of 1/R the speed overstates the wait of a request that arrives alone (it has the server to
    itself); the capacity bound's lone-request TTFT uses the whole server.
    `stream_interval`: the server's --stream-interval N (a run knob, `EngineProfile.with_stream_interval`): one
    SSE event per N tokens (and the last); `stream_first_alone` (a profile fact): whether the first token goes out
    alone first (vLLM, TensorRT-LLM, SGLang 0.4.9+; SGLang before it sent its first event after N tokens);
    `stream_token_share` (a profile fact): the part of `output_token_s` paid for every token however they are
    batched (vLLM's API server detokenizes each one), the rest per event (`token_s`, and `first_event_s` for the
    first token's own event)."""

    __pydantic_config__ = TABLE_CONFIG

    request_s: float
    chat_request_s: float = 0.0
    prompt_token_s: float = 0.0
    output_token_s: float = 0.0
    latency_s: float = 0.0
    api_servers: int = 1
    endpoint: str = "completions"
    shares_engine_cpu: bool = False  # one process runs the HTTP server and the engine loop (vLLM V0 <= 0.5)
    data_parallel: str = "none"
    shared_by: int = 1
    stream_interval: int = 1
    stream_token_share: float = 0.0
    stream_first_alone: bool = True

    def __post_init__(self) -> None:
        _check_nonneg("frontend", self)
        integer(self.api_servers, "engine frontend: api_servers", lo=1, hi=4096, error=SpecError)
        integer(self.stream_interval, "stream interval", lo=1, hi=1_000_000, error=SpecError)
        number(self.stream_token_share, "engine frontend: stream_token_share", lo=0, hi=1, error=SpecError)
        integer(self.shared_by, "engine frontend: shared_by", lo=1, hi=4096, error=SpecError)
        if self.endpoint not in ENDPOINTS:
            raise SpecError(f"unknown endpoint '{self.endpoint}'; use one of {', '.join(ENDPOINTS)}")
        if self.data_parallel not in DP_FRONTENDS:
            raise SpecError(f"engine frontend: data_parallel must be one of {', '.join(DP_FRONTENDS)}, got "
                            f"{self.data_parallel!r}")

    @property
    def speed(self) -> float:
        """API-server processes' worth of CPU one engine gets: api_servers / shared_by."""
        return self.api_servers / self.shared_by

    def for_engines(self, replicas_per_server: int, dp: int) -> FrontendCosts:
        """The stage one replica sees when `replicas_per_server` data-parallel engines (each `dp` attention ranks)
        sit behind one server: "shared" divides the server's processes among them; "per_rank" gives every engine
        core (each replica, each attention-DP rank) its own."""
        if self.data_parallel == "per_rank" and dp > 1:
            return replace(self, api_servers=self.api_servers * dp)
        if self.data_parallel == "shared" and replicas_per_server > 1:
            return replace(self, shared_by=replicas_per_server)
        return self

    def ingress_s(self, prompt_tokens: int) -> float:
        """CPU seconds to accept one request: parse, validate, template (chat), tokenize."""
        chat = self.chat_request_s if self.endpoint == "chat" else 0.0
        return self.request_s + chat + prompt_tokens * self.prompt_token_s

    @property
    def token_s(self) -> float:
        """CPU seconds per streamed token: output_token_s at one event per token; at one event per
        `stream_interval` tokens, output_token_s * (stream_token_share + (1 - stream_token_share) / N)."""
        n = self.stream_interval
        if n == 1:
            return self.output_token_s
        share = self.stream_token_share
        return self.output_token_s * (share + (1.0 - share) / n)

    @property
    def first_event_s(self) -> float:
        """What a request's lone first-token event costs beyond `token_s` (a whole event: output_token_s in all),
        where the server sends one (`stream_first_alone`); 0 at one event per token."""
        if self.stream_interval == 1 or not self.stream_first_alone:
            return 0.0
        return self.output_token_s - self.token_s

    def stream_s(self, batch: int) -> float:
        """Seconds the servers need to stream one token to each of `batch` requests."""
        return batch * self.token_s / self.speed

    def batch_ttft_s(self, batch: int, prompt_tokens: int) -> float:
        """What the server adds to the TTFT of a static batch sent at once: the batch starts when its last
        request is accepted, and its first tokens are streamed out after the prefill (each its own event where the
        first token goes out alone)."""
        first = batch * (self.token_s + self.first_event_s) / self.speed
        return batch * self.ingress_s(prompt_tokens) / self.speed + self.latency_s + first


@dataclass(frozen=True, slots=True, kw_only=True)
class HostCosts:
    """The engine core's CPU seconds per step: step_s + per_seq_s * sequences + per_worker_s * (GPUs - 1).
    `async_scheduling`: prepared one step ahead, overlapping the device (step = max(device, host)); `sync_with`:
    what turns that off by default (the engine's own check at startup): "pp" (pipeline parallelism),
    "speculative" (any proposer), "speculative:METHOD" (that proposer), "linear_state" (a model with linear-state
    layers, Mamba / gated delta net) or "multinode" (a tensor or pipeline group spanning machines, nodes or hosts,
    which the engine's launch runs on an executor that schedules synchronously: vLLM's Ray executor); `synced`: a
    deployment's profile whose async scheduling `sync_with` turned off (the release's default is on: a rebuild
    without the feature gets it back)."""

    __pydantic_config__ = TABLE_CONFIG

    step_s: float = 0.0
    per_seq_s: float = 0.0
    per_worker_s: float = 0.0
    async_scheduling: bool = False
    sync_with: tuple[str, ...] = ()
    synced: bool = False

    def __post_init__(self) -> None:
        _check_nonneg("host", self)
        object.__setattr__(self, "sync_with", tuple(self.sync_with))  # a TOML list arrives as a list
        for item in self.sync_with:
            kind, _, method = str(item).partition(":")
            if kind not in SYNC_KINDS or (method and kind != "speculative") or (
                    kind == "speculative" and method and method not in SPECULATIVE_METHODS):
                raise SpecError(f"engine host: sync_with entry '{item}' is not 'pp', 'speculative', "
                                f"'speculative:METHOD' ({', '.join(SPECULATIVE_METHODS)}), 'linear_state' or "
                                "'multinode'")

    def seconds(self, num_seqs: int, num_gpus: int) -> float:
        return self.step_s + self.per_seq_s * num_seqs + self.per_worker_s * (num_gpus - 1)

    def syncs(self, *, pp: int = 1, speculative: str | None = None, linear_state: bool = False,
              spans_hosts: bool = False) -> bool:
        """Whether the engine turns async scheduling off for a deployment of `pp` stages with the `speculative`
        proposer (None: none) of a model with (`linear_state`) or without linear-state layers, whose tensor or
        pipeline group does (`spans_hosts`) or does not span machines (`Deployment.spans_hosts`)."""
        off = set(self.sync_with)
        return (pp > 1 and "pp" in off) or (linear_state and "linear_state" in off) or (
            spans_hosts and "multinode" in off) or (
            speculative is not None and ("speculative" in off or f"speculative:{speculative}" in off))


@dataclass(frozen=True, slots=True, kw_only=True)
class KernelFactors:
    """Engine-specific kernel efficiency, multiplying the hardware profile's.

    moe_bandwidth: share of the dense bandwidth roof a fused-MoE kernel reaches while reading the weights of
        the experts a step touches (grouped GEMMs with a few rows each: tile padding, per-expert launch tails);
    moe_compute: share of the dense GEMM compute roof the fused-MoE grouped GEMMs reach once compute-bound
        (hundreds of rows per expert, e.g. a long prefill): per-expert tiles padded to the kernel's M block,
        scattered row gathers, one kernel config per batch-size bucket;
    grouped_topk_kernels: kernels the engine launches to route one layer of a model with group-limited top-k
        routing (`MLPSpec.grouped_routing`: the DeepSeek-V3 layout): 1 for a fused kernel, more where the routing
        runs as separate PyTorch ops (each a fixed per-kernel cost on the GPU, as in a CUDA graph; not counted
        as an eager launch: `eager_prefill_kernel_s` was fitted per modelled kernel);
    quantized_gemm_compute: share of the compute roof a quantized (GGUF) matmul reaches once compute-bound
        when it dequantizes to fp16 for the vendor GEMM (llama.cpp's cuBLAS path);
    mmq_compute: share of the int8 roof a GGUF matmul reaches where it runs int8 dot products on q8_1
        activations (llama.cpp's MMQ kernels: int8 tensor cores on Turing and newer since PR #7676, DP4A on chips
        with no fast fp16 math such as Pascal, which never took the cuBLAS path);
    eager_prefill_kernel_s: host time to launch one modelled kernel (with the eager PyTorch ops around it) of a
        step that runs without CUDA graphs (prefill and mixed steps where the engine captures only decode
        batches, and decode batches above `cuda_graph_max_bs`); such a step takes at least kernels x this
        (`cost/step.py`);
    eager_kernel_s: host time per modelled kernel of a step run with CUDA graphs off altogether (`cuda_graphs`
        false: vLLM V1's --enforce-eager, which also drops torch.compile) in an engine whose steps otherwise never
        run eagerly (`eager_prefill_kernel_s` 0); where `eager_prefill_kernel_s` is set, that cost serves;
    piecewise_layer_s: host time per decoder layer to launch a step whose CUDA graphs run in pieces split at the
        attention ops, which run eagerly between them (a piece's graph launch and the attention op's dispatch): such
        a step takes at least `piecewise_step_s` + layers x this. vLLM V1 runs steps with prompt tokens so (and
        every step in its PIECEWISE mode, `piecewise_decode`, its default before 0.11); 0: no such floor;
    piecewise_step_s: the rest of a piecewise step's launch floor, the same for any depth (the compiled
        wrapper's input preparation, the graph pieces outside the layers, the sampler);
    piecewise_decode: whether decode-only steps run piecewise too (else they replay one full graph);
    piecewise_prefill: whether steps with prompt tokens replay piecewise CUDA graphs (the piecewise floor above)
        while the engine's other uncaptured steps (decode batches above `cuda_graph_max_bs`) still launch eagerly at
        `eager_prefill_kernel_s` (SGLang 0.5.10+); DP attention or speculative decoding turns it off there unless
        `piecewise_dp_attention` / `piecewise_speculative` (`for_deployment`, which `cost/step.py` applies); vLLM V1,
        whose uncaptured steps all run piecewise, prices no eager prefill instead;
    piecewise_mla: whether a model with multi-head latent attention (DeepSeek-V2/V3, Kimi-K2) runs its prompt steps
        piecewise too where `piecewise_prefill` is on; false: they launch eagerly (`for_deployment`);
    piecewise_speculative, piecewise_dp_attention: whether a deployment with speculative decoding, or with
        data-parallel attention, keeps the piecewise prompt graphs (SGLang from 0.5.11 / 0.5.17);
    allreduce_fusion_on, allreduce_fusion_families, allreduce_fusion_exclude, allreduce_fusion_tokens: the NVIDIA
        classes and model families where each layer's two tensor-parallel all-reduces carry the residual add and
        RMSNorm after them in one kernel (FlashInfer's TensorRT-LLM all-reduce fusion, SGLang's default for some
        architectures), on steps of at most `allreduce_fusion_tokens` tokens, in one node, without DP attention or
        expert parallelism, on no device whose hardware id is in `allreduce_fusion_exclude`: those two
        norms cost no launch and no pass over the hidden states of their own;
    trtllm_moe: whether the MoE layers run TensorRT-LLM's fused trtllm-gen kernels (SGLang --moe-runner-backend
        flashinfer_trtllm, TensorRT-LLM's moe_config backend TRTLLM; datacenter Blackwell only), as FP4 MoE
        weights always do: the hardware's `moe_kernel_overhead_scale` (the Triton / DeepGEMM MoE path and its
        unfused neighbours) does not apply;
    cuda_graphs: false where the engine captures no CUDA graphs at all (SGLang's --disable-cuda-graph, vLLM's
        --enforce-eager): every step, decode too, is floored by its kernels' eager launches
        (`eager_prefill_kernel_s` each, else `eager_kernel_s`; a profile with neither refuses it);
    cuda_graph_max_bs: the largest decode batch (per data-parallel rank) the engine captures in a CUDA graph;
        larger decode steps run eagerly. 0: no cap (every decode batch runs from a graph). Resolved per device
        and TP from the engine's batch_defaults rule (`EngineProfile.on_device`);
    fused_dequant: whether the engine's GGUF matmuls dequantize each tile as they load it (llama.cpp's Metal
        `kernel_mul_mm`), so the format's own dequantization penalty (`WeightFormat.gemm_efficiency`: CUDA's
        dequantize-to-fp16 pass before cuBLAS) does not apply;
    quantized_gemm_dtype: the math GGUF matmuls run in: "fp16" (dequantize, then a 16-bit GEMM) or "int8"
        (activations quantized to q8_1, int8 tensor cores: llama.cpp MMQ since PR #7676);
    block_formats: weight formats other than the GGUF block types whose matmuls the engine runs on that same
        quantized-matmul path (`quantized_gemm_dtype`, `mmq_compute`, `fused_dequant`) rather than on the format's
        own tensor-core math: llama.cpp's GGML_TYPE_MXFP4 (gpt-oss), which its CUDA MMQ expands to int8 and its
        Metal kernel_mul_mm dequantizes to half, on any chip;
    fp4_mmq_speedup: how much faster the engine's quantized matmuls on an FP4 block format (`block_formats` whose
        own math is fp4) run on chips with FP4 tensor cores than its int8 MMQ (llama.cpp PR #17906: Blackwell's
        m16n8k64 4-bit MMA); 1: no native FP4 path;
    kernel_overhead_scale: the engine's fixed cost per modelled kernel relative to the hardware profile's
        `kernel_overhead_s` (fitted to whole engine steps): below 1 where the engine fuses neighbouring ops into one
        kernel and replays decode from a CUDA graph (llama.cpp's 2025 CUDA fusions), above 1 where it launches more
        or slower kernels than the profile's engines;
    hbm_kernel_overhead_scale: the engine's fixed cost per kernel on a chip with HBM (`HardwareSpec.memory_kind`)
        relative to its own on other chips: above 1 where the engine's small kernels were tuned on graphics cards and
        pay HBM's longer access latency (and the datacenter parts' lower clocks) at every step (llama.cpp);
    mmq_sm_ops_per_clock: the most int8 operations per SM and clock the engine's quantized matmuls issue
        (`quantized_gemm_dtype` int8), on parts whose SM count and clock the catalog gives: their int8 roof is
        min(the int8 peak, this x SMs x clock) before `mmq_compute` applies. llama.cpp's MMQ kernels multiply with
        mma.sync at the rate GeForce tensor cores run it and do not reach the wider datacenter ones; 0: no cap;
    marlin_weight_read: share of the 16-bit weight-read rate per byte the engine's Marlin kernels reach streaming
        int4 AWQ / GPTQ and 8-bit GPTQ weights (`WeightFormat.marlin`) on NVIDIA GPUs of compute capability 8.0+
        (Marlin needs sm80: vLLM's query_marlin_supported_quant_types); 0: the engine has none, the format's own
        `weight_read_efficiency` applies (measured on gpt-fast's and AWQ's own kernels);
    block_weight_read: share of the 16-bit weight-read rate per byte the engine's mat-vec kernels reach streaming
        the weights of its quantized-matmul path (`quantized_path`: GGUF block types, `block_formats`), where they
        dequantize in registers as they read (llama.cpp's Metal kernel_mul_mv_q*_f32); 0: the format's own
        `weight_read_efficiency` (fitted on CUDA, whose mmvq first quantizes the activations to q8_1);
    fp16_accumulate_compute: share of the chip's FP16-accumulate peak (`fp16_accumulate_tflops`, twice the
        FP32-accumulate rate on GeForce cards) that the engine's FP16 GEMMs reach where they accumulate in FP16
        (llama.cpp's cuBLAS path, CUBLAS_COMPUTE_16F); 0 where they accumulate in FP32. Their roof is the larger of
        the two (a card held at its power limit sustains less than the nominal 2x);
    pdl_kernel_overhead_scale: the fixed cost per kernel with programmatic dependent launch on (TensorRT-LLM's
        TRTLLM_ENABLE_PDL=1, opt-in: each kernel launches and runs its prologue while the one before drains, on
        NVIDIA SM 9.0+, `HardwareSpec.has_pdl`) relative to without; 1: the engine has no such switch;
    pdl: whether programmatic dependent launch is on (set per deployment, `make_deployment(pdl=True)`);
    ubatch_tokens: the most tokens the engine computes in one pass of the model: a step of more (its token budget,
        llama.cpp's logical batch -b) runs as ceil(tokens / this) passes one after the other, each reading the weights
        and paying the fixed per-step cost again (llama.cpp's physical batch -ub, n_ubatch); 0: one pass per step;
    mxfp4_activation: what an MXFP4 weight (`WeightFormat.mx_fp4`) multiplies on datacenter Blackwell, where the
        engines' MXFP4 MoE kernels are trtllm-gen's (`HardwareSpec.has_trtllm_gen`): "fp4" (activations in FP4 too,
        the FP4 rate), "fp8" (MXFP8 activations: the block-scaled e2m1 x e4m3 MMA runs at the FP8 rate) or "bf16"
        (16-bit activations); either way the kernel dequantizes inside its pipeline. Other chips: FP4 math where
        they have it and `mxfp4_fp4_math` says the engine uses it, else weight-only in 16-bit;
    mxfp4_fp4_math: whether the engine multiplies MXFP4 weights with FP4 math on NVIDIA's other chips that have it
        (the SM120 GeForce and RTX PRO parts); false where it runs them weight-only there (vLLM: Marlin or Triton,
        16-bit);
    moe_pair_reads_below: a step (pass) of fewer tokens than this runs its routed experts as one mat-vec per
        token-expert pair, each reading its expert's weights for that token alone: the weights read are T x k
        experts', not the distinct experts the batch touches (llama.cpp's Metal MUL_MAT_ID takes `mul_mv_id` below
        ne21_mm_id_min = 32 tokens); 0: the touched experts are read once per step.
    moe_tile_cols: the widest token tile of a grouped MoE matmul that sizes its tile from the whole pass's token
        count rather than each expert's rows: every touched expert's rows are padded to c = min(T rounded up to 8,
        this) columns (llama.cpp's CUDA / HIP MMQ for MUL_MAT_ID picks mmq_x from ncols_max = the pass's tokens, at
        most mmq_x_max = 128, and runs each expert's tiles at that width); 0: no padding.
    decode_cuda_core_groups: the GQA group sizes (one GPU's query heads // its KV heads) whose decode attention over
        a 16-bit KV cache runs on the CUDA cores, not the tensor cores (FlashInfer's batch decode kernel without
        them): SGLang asked FlashInfer 0.1.6 for the sizes it had compiled, 1 / 2 / 4 / 8, and from FlashInfer 0.2
        keeps them off for groups of 4 or fewer (3 or fewer from 0.5.1), an FP8 cache always on; vLLM V1 0.9.1-0.10.1
        keeps them off for groups of 4 or fewer where FlashInfer is its default (SM 10.0); empty: tensor cores at
        any group;
    decode_cuda_core_fp8: whether an 8-bit KV cache follows the same group rule (SGLang to 0.4.2.post1: FlashInfer
        0.1.6's compiled-group test, which SGLang asks first, does not look at the cache's type, so Llama-3-70B at TP 4
        decodes an FP8 cache on the CUDA cores too; vLLM 0.9.1-0.10.1's `num_qo_heads // num_kv_heads > 4` neither);
        false: an FP8 cache decodes on the tensor cores;
    decode_cuda_core_on: the NVIDIA classes (`HardwareSpec.sm_class`) the group rule is limited to, where FlashInfer
        is the engine's default there alone (vLLM 0.9.1-0.10.1: "sm100"); empty: every part outside `tensor_decode_on`;
    tensor_decode_max_seqs: a decode step of at most this many sequences (one attention group's) over a 16-bit cache
        takes tensor-core kernels instead (vLLM 0.10.0-0.10.1 send such steps to TensorRT-LLM's decode attention); 0:
        none;
    decode_cuda_core_compute: share of the chip's FP32 (CUDA-core) peak that decode runs at where it runs there: each
        thread converts its 16-bit K and V to FP32, multiplies them with the group's queries and sums the dot
        products across lanes by shuffles, so FMAs are well under half of what it issues;
    tensor_decode_on: NVIDIA classes (`HardwareSpec.sm_class`: "sm90", "sm100") where the engine's default attention
        backend is another, tensor-core one and `decode_cuda_core_groups` does not apply (SGLang: FlashAttention 3 on
        Hopper from 0.4.6, TensorRT-LLM's trtllm-gen MHA kernels on datacenter Blackwell from 0.5.7);
    tensor_decode_families: the model families (Hugging Face model_type) that "sm90" in `tensor_decode_on` holds
        for (SGLang's is_fa3_default_architecture before 0.5.8); empty: every family.
    """

    __pydantic_config__ = TABLE_CONFIG

    moe_bandwidth: float = 1.0
    moe_compute: float = 1.0
    grouped_topk_kernels: int = 1
    quantized_gemm_compute: float = 1.0
    mmq_compute: float = 1.0
    eager_prefill_kernel_s: float = 0.0
    eager_kernel_s: float = 0.0
    piecewise_layer_s: float = 0.0
    piecewise_step_s: float = 0.0
    piecewise_decode: bool = False
    piecewise_prefill: bool = False
    piecewise_mla: bool = True
    piecewise_speculative: bool = False
    piecewise_dp_attention: bool = False
    trtllm_moe: bool = False
    cuda_graph_max_bs: int = 0
    cuda_graphs: bool = True
    mxfp4_activation: str = "fp4"
    mxfp4_fp4_math: bool = True
    quantized_gemm_dtype: str = "fp16"
    fp16_accumulate_compute: float = 0.0
    marlin_weight_read: float = 0.0
    block_weight_read: float = 0.0
    fused_dequant: bool = False
    kernel_overhead_scale: float = 1.0
    hbm_kernel_overhead_scale: float = 1.0
    mmq_sm_ops_per_clock: float = 0.0
    block_formats: tuple[str, ...] = ()
    fp4_mmq_speedup: float = 1.0
    pdl_kernel_overhead_scale: float = 1.0
    pdl: bool = False
    ubatch_tokens: int = 0
    moe_pair_reads_below: int = 0
    moe_tile_cols: int = 0
    decode_cuda_core_groups: tuple[int, ...] = ()
    decode_cuda_core_fp8: bool = False
    decode_cuda_core_on: tuple[str, ...] = ()
    tensor_decode_max_seqs: int = 0
    attention_backend: str = ""  # the backend the engine is told to run (`EngineProfile.with_attention_backend`)
    # FlashInfer's batch decode without tensor cores (any engine that runs it): fitted on SGLang's rows (sglang.toml)
    decode_cuda_core_compute: float = 0.3
    tensor_decode_on: tuple[str, ...] = ()
    tensor_decode_families: tuple[str, ...] = ()
    allreduce_fusion_on: tuple[str, ...] = ()
    allreduce_fusion_families: tuple[str, ...] = ()
    allreduce_fusion_exclude: tuple[str, ...] = ()
    allreduce_fusion_tokens: int = 2048

    @property
    def has_pdl_switch(self) -> bool:
        """Whether the engine has a programmatic-dependent-launch switch flopwise prices (a scale below 1)."""
        return self.pdl_kernel_overhead_scale < 1.0

    @property
    def eager_launch_s(self) -> float:
        """Launch cost per modelled kernel of a step run with CUDA graphs off altogether: `eager_prefill_kernel_s`
        where the engine prices its eager steps, else `eager_kernel_s`; 0 where it prices neither."""
        return self.eager_prefill_kernel_s or self.eager_kernel_s

    def for_deployment(self, *, dp_attention: bool, speculative: bool, mla: bool = False) -> KernelFactors:
        """These factors as a deployment with these features runs them: DP attention or speculative decoding turn
        `piecewise_prefill` off where the release does not keep them (`piecewise_dp_attention`,
        `piecewise_speculative`; SGLang's `server_args._handle_piecewise_cuda_graph`), and so does a model with
        multi-head latent attention where `piecewise_mla` is false, so its prompt steps launch eagerly, with no
        piecewise floor. Unchanged otherwise."""
        off = ((dp_attention and not self.piecewise_dp_attention) or (speculative and not self.piecewise_speculative)
               or (mla and not self.piecewise_mla))
        if not (self.piecewise_prefill and off):
            return self
        return replace(self, piecewise_prefill=False, piecewise_layer_s=0.0, piecewise_step_s=0.0)

    def fuses_allreduce(self, *, sm_class: str, hw_id: str, family: str, tp: int, dp: int, ep: int,
                        nodes: int) -> bool:
        """Whether each layer's tensor-parallel all-reduces carry the residual add and RMSNorm after them for this
        device and model (`allreduce_fusion_on` and its peers; the step's token count is the caller's test)."""
        return (sm_class in self.allreduce_fusion_on and family in self.allreduce_fusion_families and tp > 1
                and dp == 1 and ep == 1 and nodes == 1 and hw_id not in self.allreduce_fusion_exclude)

    def decode_cuda_core_groups_on(self, sm_class: str, family: str, kv_bytes: float) -> tuple[int, ...]:
        """The GQA group sizes (query heads // KV heads on one GPU) whose decode attention runs on the CUDA cores on
        a part of `sm_class` for a model of `family` with a KV cache of `kv_bytes` per element; empty: none (an
        8-bit cache unless `decode_cuda_core_fp8`, any other cache, or the device's default backend is a tensor-core
        one)."""
        if kv_bytes != 2 and not (kv_bytes == 1 and self.decode_cuda_core_fp8):
            return ()
        if self.decode_cuda_core_on and sm_class not in self.decode_cuda_core_on:
            return ()
        if sm_class in self.tensor_decode_on and (
                sm_class != "sm90" or not self.tensor_decode_families or family in self.tensor_decode_families):
            return ()
        return self.decode_cuda_core_groups

    def quantized_path(self, weights: WeightFormat) -> bool:
        """Whether the engine multiplies `weights` on its quantized-matmul path (`quantized_gemm_dtype`,
        `mmq_compute`): GGUF block types and the engine's `block_formats`, on any chip."""
        return weights.gguf_type is not None or weights.name in self.block_formats

    def __post_init__(self) -> None:
        _check_nonneg("kernels", self)
        if isinstance(self.block_formats, str) or not isinstance(self.block_formats, (list, tuple)):
            raise SpecError(f"engine kernels: block_formats must be a list of weight formats, got "
                            f"{self.block_formats!r}")
        object.__setattr__(self, "block_formats", tuple(self.block_formats))  # a TOML list
        for name in ("tensor_decode_on", "tensor_decode_families", "decode_cuda_core_groups", "decode_cuda_core_on",
                     "allreduce_fusion_on", "allreduce_fusion_families", "allreduce_fusion_exclude"):
            value = getattr(self, name)
            if isinstance(value, str) or not isinstance(value, (list, tuple)):
                raise SpecError(f"engine kernels: {name} must be a list, got {value!r}")
            object.__setattr__(self, name, tuple(value) if name == "decode_cuda_core_groups"
                               else tuple(str(v) for v in value))
        for g in self.decode_cuda_core_groups:
            integer(g, "engine kernels: decode_cuda_core_groups", lo=1, hi=1024, error=SpecError)
        for name in ("tensor_decode_on", "decode_cuda_core_on", "allreduce_fusion_on"):
            bad = [c for c in getattr(self, name) if c not in SM_CLASSES]
            if bad:
                raise SpecError(f"engine kernels: {name} has unknown NVIDIA class(es) {bad}; known: "
                                f"{', '.join(SM_CLASSES)}")
        integer(self.tensor_decode_max_seqs, "engine kernels: tensor_decode_max_seqs", lo=0, error=SpecError)
        unknown = [f for f in self.block_formats if f not in WEIGHT_FORMATS]
        if unknown:
            raise SpecError(f"engine kernels: block_formats has unknown weight format(s) {unknown}; known: "
                            f"{sorted(WEIGHT_FORMATS)}")
        if not 1 <= self.fp4_mmq_speedup <= 4:
            raise SpecError(f"engine kernels: fp4_mmq_speedup must be in [1, 4], got {self.fp4_mmq_speedup}")
        if not 0 < self.pdl_kernel_overhead_scale <= 1:
            raise SpecError(f"engine kernels: pdl_kernel_overhead_scale must be in (0, 1], got "
                            f"{self.pdl_kernel_overhead_scale}")
        integer(self.cuda_graph_max_bs, "engine kernels: cuda_graph_max_bs", lo=0, error=SpecError)
        integer(self.ubatch_tokens, "engine kernels: ubatch_tokens", lo=0, error=SpecError)
        integer(self.moe_pair_reads_below, "engine kernels: moe_pair_reads_below", lo=0, error=SpecError)
        integer(self.moe_tile_cols, "engine kernels: moe_tile_cols", lo=0, error=SpecError)
        integer(self.allreduce_fusion_tokens, "engine kernels: allreduce_fusion_tokens", lo=1, error=SpecError)
        integer(self.grouped_topk_kernels, "engine kernels: grouped_topk_kernels", lo=1, hi=1000, error=SpecError)
        if self.mxfp4_activation not in ("fp4", "fp8", "bf16"):
            raise SpecError(f"engine kernels: mxfp4_activation must be fp4, fp8 or bf16, got {self.mxfp4_activation!r}")
        if self.quantized_gemm_dtype not in ("fp16", "int8"):
            raise SpecError("engine kernels: quantized_gemm_dtype must be fp16 or int8, got "
                            f"{self.quantized_gemm_dtype!r}")
        for name in ("fp16_accumulate_compute", "marlin_weight_read", "block_weight_read", "decode_cuda_core_compute"):
            if getattr(self, name) > 1:
                raise SpecError(f"engine kernels: {name} must be in [0, 1], got {getattr(self, name)}")
        number(self.mmq_sm_ops_per_clock, "engine kernels: mmq_sm_ops_per_clock", lo=0, hi=1e5, error=SpecError)
        for name in ("kernel_overhead_scale", "hbm_kernel_overhead_scale"):
            if not 0 < getattr(self, name) <= 10:
                raise SpecError(f"engine kernels: {name} must be in (0, 10], got {getattr(self, name)}")
        if not self.cuda_graphs and not self.eager_launch_s:
            raise SpecError("engine kernels: cuda_graphs = false needs an eager launch cost (eager_prefill_kernel_s or "
                            "eager_kernel_s > 0), which this profile does not price")
        for name in ("moe_bandwidth", "moe_compute", "quantized_gemm_compute", "mmq_compute"):
            if not 0 < getattr(self, name) <= 1:
                raise SpecError(f"engine kernels: {name} must be in (0, 1], got {getattr(self, name)}")


@dataclass(frozen=True, slots=True, kw_only=True)
class DeviceKernels:
    """Kernel factors that differ on one vendor's devices because the engine runs another backend there (llama.cpp's
    Metal kernels on Apple silicon, not its CUDA ones): `kernels` are (KernelFactors field, value) pairs applied
    over the version's own factors on a device of `vendor`, and of `kind` (gpu, soc, cpu) where one is given
    (`EngineProfile.on_device`; the first matching rule wins)."""

    __pydantic_config__ = TABLE_CONFIG

    vendor: str
    kernels: tuple[tuple[str, str | bool | int | float | tuple[str | int, ...]], ...]
    kind: str = ""
    source: str = ""

    def __post_init__(self) -> None:
        check_text(self.vendor, "engine device_kernels: vendor", error=SpecError)
        # a TOML list (block_formats, decode_cuda_core_groups) held as a tuple, so the rule stays hashable
        object.__setattr__(self, "kernels", tuple((k, tuple(v) if isinstance(v, list) else v)
                                                  for k, v in self.kernels))
        if self.kind:  # a device kind as the hardware catalog has them (its efficiency profiles' keys)
            check_text(self.kind, f"engine device_kernels ({self.vendor}): kind", choices=DEVICE_KINDS, error=SpecError)
        names = {f.name for f in fields(KernelFactors)}
        for key, _ in self.kernels:
            if key not in names:
                raise SpecError(f"engine device_kernels ({self.vendor}): unknown kernel factor '{key}'."
                                f"{suggest(key, names)}")
        # each value's type and range, as KernelFactors' own annotations and checks have them
        from_table(KernelFactors, dict(self.kernels), f"engine device_kernels ({self.vendor}): kernels")

    def apply(self, kernels: KernelFactors) -> KernelFactors:
        return replace(kernels, **dict(self.kernels))  # type: ignore[arg-type]


# what keeps an engine's long-context chunked prefill off (`BatchDefault.chunked_unless`): a model with sliding-
# window layers, one with encoders (multimodal), DeepSeek's MLA, speculative decoding, an AMD GPU (ROCm), a device
# that is not a GPU (a CPU backend)
CHUNKED_FEATURES = ("sliding_window", "multimodal", "mla", "speculative", "rocm", "cpu")


@dataclass(frozen=True, slots=True, kw_only=True)
class BatchDefault:
    """One rule of an engine's default batch knobs: applies to devices with at least `min_memory_gib` whose id or
    name (`HardwareSpec.device_text`) contains none of `exclude` (and one of `only`, where given); the first
    matching rule wins."""

    __pydantic_config__ = TABLE_CONFIG

    max_num_seqs: int  # every rule states both knobs (no fallback value outside the catalog)
    max_num_batched_tokens: int
    # the knobs where the engine runs without its HTTP server (vLLM's LLM class, UsageContext.LLM_CLASS, as
    # `vllm bench throughput` / benchmark_throughput.py run it); None: the server's
    offline_max_num_seqs: int | None = None
    offline_max_num_batched_tokens: int | None = None
    min_memory_gib: float = 0.0
    exclude: tuple[str, ...] = ()
    only: tuple[str, ...] = ()  # devices whose id or name contains one of these (vLLM 0.8.0-0.8.4: H100 / H200)
    kind: str | None = None  # "gpu", "cpu", "soc": only that kind of device
    at_least_context: bool = False  # the budget is max(model context, max_num_batched_tokens) (no chunking)
    # chunked prefill turned on by the engine itself for a context above `chunked_above` tokens, with a budget of
    # `chunked_tokens`, unless the deployment has one of `chunked_unless` (`CHUNKED_FEATURES`; vLLM V0 from 0.5.3,
    # EngineArgs.create_engine_config: "Chunked prefill is enabled by default for models with max_model_len > 32K");
    # 0: never
    chunked_above: int = 0
    chunked_tokens: int = 0
    chunked_unless: tuple[str, ...] = ()
    block_size: int | None = None  # overrides the engine's block size on these devices (vLLM CPU: 128)
    async_scheduling: bool | None = None  # overrides the engine's on these devices (vLLM >= 0.14: not on CPU)
    # (min tp, largest decode batch captured in a CUDA graph), first match; () keeps the kernels' value
    cuda_graph_max_bs: tuple[tuple[int, int], ...] = ()
    # the default memory fraction on these devices, where the engine picks it by device (SGLang 0.4.6 - 0.5.2):
    # `memory_fraction` as is, or (device - memory_reserve_gib - reserve_per_gpu_gib x tp x pp) / device, rounded
    # to 3 places; neither: the profile's own (`EngineProfile.default_knobs`)
    memory_fraction: float | None = None
    memory_reserve_gib: float | None = None
    reserve_per_gpu_gib: float = 0.0
    reserve_dp_attention_gib: float = 0.0  # more with data-parallel attention
    reserve_speculative_gib: float = 0.0  # more with speculative decoding (its proposer and larger graph buffers)

    def __post_init__(self) -> None:
        number(self.min_memory_gib, "engine batch_defaults: min_memory_gib", lo=0, error=SpecError)
        if self.memory_fraction is not None:
            number(self.memory_fraction, "engine batch_defaults: memory_fraction", lo=0.05, hi=1.0, error=SpecError)
        if self.memory_reserve_gib is not None:
            number(self.memory_reserve_gib, "engine batch_defaults: memory_reserve_gib", lo=0, error=SpecError)
        for name in ("reserve_per_gpu_gib", "reserve_dp_attention_gib", "reserve_speculative_gib"):
            number(getattr(self, name), f"engine batch_defaults: {name}", lo=0, error=SpecError)
        if self.memory_fraction is not None and self.memory_reserve_gib is not None:
            raise SpecError("engine batch_defaults: give memory_fraction or memory_reserve_gib, not both")
        for min_tp, bs in self.cuda_graph_max_bs:
            integer(min_tp, "engine batch_defaults: cuda_graph_max_bs tp", lo=1, error=SpecError)
            integer(bs, "engine batch_defaults: cuda_graph_max_bs", lo=0, error=SpecError)
        if self.kind is not None:
            check_text(self.kind, "engine batch_defaults: kind", choices=DEVICE_KINDS, error=SpecError)
        for name in ("max_num_seqs", "max_num_batched_tokens"):
            integer(getattr(self, name), f"engine batch_defaults: {name}", lo=1, error=SpecError)
        for name in ("offline_max_num_seqs", "offline_max_num_batched_tokens"):
            if getattr(self, name) is not None:
                integer(getattr(self, name), f"engine batch_defaults: {name}", lo=1, error=SpecError)
        if self.block_size is not None:
            integer(self.block_size, "engine batch_defaults: block_size", lo=1, error=SpecError)
        if self.chunked_above:
            integer(self.chunked_tokens, "engine batch_defaults: chunked_tokens", lo=1, error=SpecError)
        for name in self.chunked_unless:
            check_text(name, "engine batch_defaults: chunked_unless", choices=CHUNKED_FEATURES, error=SpecError)

    def chunks_context(self, context_len: int | None, features: frozenset[str]) -> bool:
        """Whether the engine turns chunked prefill on by itself for a served context of `context_len` tokens and a
        deployment with `features` (`CHUNKED_FEATURES`)."""
        return bool(self.chunked_above and context_len and context_len > self.chunked_above
                    and not features.intersection(self.chunked_unless))

    def fraction(self, memory_gib: float, tp: int, pp: int, *, dp_attention: bool = False,
                 speculative: str | None = None) -> float | None:
        """The rule's memory fraction on a device of `memory_gib` (None: the rule sets none); `tp` counts every GPU
        of a stage, `speculative` is the proposer's method (None: none)."""
        if self.memory_fraction is not None:
            return self.memory_fraction
        if self.memory_reserve_gib is None:
            return None
        reserve = (self.memory_reserve_gib + self.reserve_per_gpu_gib * tp * pp
                   + (self.reserve_dp_attention_gib if dp_attention else 0.0)
                   + (self.reserve_speculative_gib if speculative else 0.0))
        return round(max(0.05, (memory_gib - reserve) / memory_gib), 3)

    def graph_max_bs(self, tp: int) -> int | None:
        """The rule's CUDA-graph batch cap at this TP (None: the rule sets none)."""
        return next((bs for min_tp, bs in self.cuda_graph_max_bs if tp >= min_tp), None)

    def matches(self, hw_id: str, memory_gib: float, kind: str) -> bool:
        if self.kind is not None and kind != self.kind:
            return False
        hw = hw_id.lower()
        return (memory_gib >= self.min_memory_gib and not any(x in hw for x in self.exclude)
                and (not self.only or any(x in hw for x in self.only)))


def _check_devices(devices: tuple[str, ...], where: str) -> None:
    """A SpecError unless each entry is VENDOR:KIND (KIND one of DEVICE_KINDS, VENDOR a name or *)."""
    for d in devices:
        vendor, _, kind = d.partition(":")
        if not vendor or kind not in DEVICE_KINDS:
            raise SpecError(f"{where}: devices entries are VENDOR:KIND (KIND one of {', '.join(DEVICE_KINDS)}, "
                            f"VENDOR or *), got '{d}'")


def _on_devices(devices: tuple[str, ...], vendor: str, kind: str) -> bool:
    """Whether a `vendor` device of this `kind` is one of `devices` ("vendor:kind", "*:kind"); empty: any."""
    return not devices or any(d in (f"{vendor}:{kind}", f"*:{kind}") for d in devices)


@dataclass(frozen=True, slots=True, kw_only=True)
class KvMargin:
    """A KV cache sized from the memory measured free after warmup and CUDA-graph capture (vLLM >= 0.34's extensible
    KV cache, v1/worker/extensible_kv_cache.py measure_kv_cache_bytes), not from a share of the device alone:
        peak   = profiled activations + the CUDA-graph estimate (`EngineProfile.activation_reserve_gib`), a transient
                 the pool leaves room for on top of the graphs it already holds
        margin = max(floor_gib, peak_share * peak), kept free below the device's whole memory
        pool   = min(f * device, device - margin) - weights - runtime (graphs included) - peak"""

    __pydantic_config__ = TABLE_CONFIG

    floor_gib: float
    peak_share: float
    devices: tuple[str, ...] = ()  # "vendor:kind" where the engine sizes so (vLLM: CUDA and ROCm); empty: anywhere

    def __post_init__(self) -> None:
        number(self.floor_gib, "engine kv_margin: floor_gib", lo=0, error=SpecError)
        number(self.peak_share, "engine kv_margin: peak_share", lo=0, hi=1, error=SpecError)
        object.__setattr__(self, "devices", tuple(self.devices))  # a TOML list
        _check_devices(self.devices, "engine kv_margin")

    def on(self, vendor: str, kind: str) -> bool:
        """Whether the engine sizes its pool from measured memory on a `vendor` device of this `kind`."""
        return _on_devices(self.devices, vendor, kind)

    def bytes(self, peak_bytes: float) -> float:
        """The margin kept free for a transient peak of `peak_bytes`: max(floor_gib, peak_share x peak)."""
        return max(self.floor_gib * GIB, self.peak_share * peak_bytes)


@dataclass(frozen=True, slots=True, kw_only=True)
class MemoryReserve:
    """SGLang's default --mem-fraction-static (PR #10975): (device - reserve) / device with
        reserve_mb = fixed_mb + per_chunk_token_mb * max(chunk, 2048) + per_graph_batch_mb * graph_batches
                     + per_gpu_mb * tp * pp
                     + with DP attention over dp ranks: graph_batches * dp * (per_dp_graph_batch_mb
                       + per_dp_graph_batch_mb_above_300 where graph_batches > 300),
        at least min_mb_above_60gb on devices above 60 GiB, then + draft_model_mb for a draft model or
        + speculative_mb for another proposer (n-gram lookup: nothing)."""

    __pydantic_config__ = TABLE_CONFIG

    fixed_mb: float
    per_chunk_token_mb: float
    per_graph_batch_mb: float
    graph_batches: int
    per_gpu_mb: float
    min_mb_above_60gb: float
    per_dp_graph_batch_mb: float = 0.0
    per_dp_graph_batch_mb_above_300: float = 0.0
    speculative_mb: float = 0.0
    draft_model_mb: float = 0.0

    def __post_init__(self) -> None:
        _check_nonneg("memory_reserve", self)
        integer(self.graph_batches, "engine memory_reserve: graph_batches", lo=0, error=SpecError)

    def fraction(self, memory_gib: float, chunk_tokens: int, tp: int, pp: int, graph_batches: int | None = None,
                 *, dp: int = 1, speculative: str | None = None) -> float:
        """`graph_batches`: the deployment's CUDA-graph batch cap where the engine's rule gives one, else the
        table's `graph_batches`; `tp` counts every GPU of a stage; `dp` > 1: data-parallel attention over that
        many ranks; `speculative`: the proposer's method (None: none)."""
        mb = memory_gib * 1024
        graphs = self.graph_batches if graph_batches is None else graph_batches
        reserve = (self.fixed_mb + self.per_chunk_token_mb * max(chunk_tokens, 2048)
                   + self.per_graph_batch_mb * graphs + self.per_gpu_mb * tp * pp)
        if dp > 1:
            reserve += graphs * dp * (self.per_dp_graph_batch_mb
                                      + (self.per_dp_graph_batch_mb_above_300 if graphs > 300 else 0.0))
        if mb > 60 * 1024:
            reserve = max(reserve, self.min_mb_above_60gb)
        if speculative == "draft":
            reserve += self.draft_model_mb
        elif speculative and speculative != "ngram":
            reserve += self.speculative_mb
        return round(max(0.05, (mb - reserve) / mb), 3)


@dataclass(frozen=True, slots=True, kw_only=True)
class BenchBatch:
    """The batch knobs an engine's offline benchmark picks from the workload where the user gives none
    (trtllm-bench: bench/build/tuning.py calc_engine_setting and finetune_setting, called by `trtllm-bench build` and,
    on the PyTorch backend, by `throughput` itself). With G GPUs (tp x pp) of M GiB each, the checkpoint's E
    safetensors elements (a sub-byte format packs its weights and block scales into uint8 elements, bits / 8 per
    weight) at b bytes each, and the config's L layers, max(tp, kv_heads) KV heads of head_size h (its head_dim, else
    hidden / heads: an MLA config's 56-wide heads for DeepSeek-V3) at k bytes:
        requests = memory_fraction * (G * M - E * b / GiB) / (2 * L * max(tp, kv_heads) * h * k / GiB * (isl + osl))
        seqs   = min(requests, max_requests) / pp, rounded up: to max(min_seqs, multiple of 32) below 256, to 128s below
                 1024, to 256s above
        tokens = min(seqs * (1 + isl / osl), max_tokens), rounded up: to max(min_tokens, 256s) below 4096, to 512s
                 below 8192, to 1024s above
    isl / osl are the workload's mean prompt and output lengths; weight formats outside `formats` keep the engine's
    batch defaults (BuildConfig's), as trtllm-bench does for quantizations it has no tuning for; without chunked
    prefill the token budget is at least the longest prompt + seqs (`benchmark/utils/general.py` get_settings)."""

    __pydantic_config__ = TABLE_CONFIG

    tool: str  # the benchmark that picks them (shown beside the knobs)
    memory_fraction: float
    # weight format -> the bytes per safetensors element trtllm-bench assumes (its BYTES_PER_ELEM by quantization)
    formats: tuple[tuple[str, float], ...]
    kv_bytes: tuple[tuple[str, float], ...]  # KV format -> bytes per element (any other: 2)
    fp8_kv_with: tuple[str, ...] = ()  # weight formats whose engine the benchmark builds with an FP8 KV cache
    # the heuristic's fraction is the run's own memory fraction (trtllm-bench throughput's
    # --kv_cache_free_gpu_mem_fraction), not `memory_fraction` (the engine build's default)
    runtime_fraction: bool = False
    max_requests: int = 4096
    max_tokens: int = 32768
    min_seqs: int = 64
    min_tokens: int = 2048
    seq_steps: tuple[tuple[int, int], ...] = ((256, 32), (1024, 128), (0, 256))  # (below, step), 0: above the rest
    token_steps: tuple[tuple[int, int], ...] = ((4096, 256), (8192, 512), (0, 1024))

    def __post_init__(self) -> None:
        check_text(self.tool, "engine bench_batch: tool", error=SpecError)
        number(self.memory_fraction, "engine bench_batch: memory_fraction", lo=0.05, hi=1.0, error=SpecError)
        for name in ("max_requests", "max_tokens", "min_seqs", "min_tokens"):
            integer(getattr(self, name), f"engine bench_batch: {name}", lo=1, error=SpecError)
        for name, known in (("formats", WEIGHT_FORMATS), ("kv_bytes", KV_FORMATS)):  # TOML tables arrive as dicts
            pairs = tuple((str(k), float(b)) for k, b in dict(getattr(self, name)).items())
            for key, b in pairs:
                if key not in known:
                    raise SpecError(f"engine bench_batch: {name} names an unknown format '{key}'.{suggest(key, known)}")
                number(b, f"engine bench_batch: bytes of {key}", lo=0.01, hi=8, error=SpecError)
            object.__setattr__(self, name, pairs)
        object.__setattr__(self, "fp8_kv_with", tuple(self.fp8_kv_with))
        for f in self.fp8_kv_with:
            if f not in WEIGHT_FORMATS:
                raise SpecError(f"engine bench_batch: fp8_kv_with names an unknown format '{f}'."
                                f"{suggest(f, WEIGHT_FORMATS)}")
        for name in ("seq_steps", "token_steps"):
            steps = tuple((integer(a, f"engine bench_batch: {name} threshold", lo=0, error=SpecError),
                           integer(b, f"engine bench_batch: {name} step", lo=1, error=SpecError))
                          for a, b in getattr(self, name))
            bounds = [a for a, _ in steps[:-1]]
            if not steps or steps[-1][0] != 0 or 0 in bounds or bounds != sorted(set(bounds)):
                raise SpecError(f"engine bench_batch: {name} must be [below, step] pairs with increasing thresholds "
                                "above 0, ending with [0, step] (the step above the rest)")
            object.__setattr__(self, name, steps)

    @staticmethod
    def _round_up(x: float, steps: tuple[tuple[int, int], ...]) -> int:
        step = next(s for below, s in steps if below == 0 or x < below)
        return step * math.ceil(x / step)

    def knobs(self, *, elements: float, weight_bytes: float, layers: int, kv_heads: int, head_size: int,
              kv_bytes: float, gpus: int, pp: int, memory_gib: float, isl: int, osl: int,
              fraction: float | None = None) -> tuple[int, int]:
        """(max_num_seqs, max_num_batched_tokens) as the formula above gives them (before the no-chunking floor), at
        `fraction` where given (else `memory_fraction`); SpecError where the benchmark itself gives up: weights
        beyond the devices' memory, or less than one request's KV."""
        gib = 1024 ** 3
        engine_gib = elements * weight_bytes / gib
        if engine_gib >= gpus * memory_gib:
            raise SpecError(f"{self.tool} sizes the checkpoint at {engine_gib:.1f} GiB, beyond the {gpus} GPU(s)' "
                            f"{gpus * memory_gib:.1f} GiB: use more GPUs or a smaller format")
        per_token = 2 * layers * kv_heads * head_size * kv_bytes / gib
        requests = (self.memory_fraction if fraction is None else fraction) * (gpus * memory_gib - engine_gib) \
            / (per_token * (isl + osl))
        if requests < 1:
            raise SpecError(f"{self.tool} finds KV memory for {requests:.2f} requests of {isl} + {osl} tokens (it "
                            "needs at least one): use more GPUs, a smaller format or shorter requests")
        raw_seqs = min(requests, self.max_requests) / pp
        raw_tokens = min(raw_seqs * (1 + isl / max(osl, 1)), self.max_tokens)
        seqs = self._round_up(raw_seqs, self.seq_steps)
        tokens = self._round_up(raw_tokens, self.token_steps)
        if raw_seqs < self.seq_steps[0][0]:
            seqs = max(self.min_seqs, seqs)
        if raw_tokens < self.token_steps[0][0]:
            tokens = max(self.min_tokens, tokens)
        return max(seqs, 1), max(tokens, 1)


class LaunchTable(Mapping[str, Any]):
    """A read-only view of an engine's resolved [launch] table (picklable, unlike MappingProxyType, so that
    profiles can travel to the planner's worker processes)."""

    __slots__ = ("_data",)

    def __init__(self, data: Mapping[str, Any]):
        self._data = dict(data)

    def __getitem__(self, key: str) -> Any:
        return self._data[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def table(self, key: str) -> dict[str, Any]:
        """A sub-table ({} when absent)."""
        v = self._data.get(key, {})
        return dict(v) if isinstance(v, Mapping) else {}

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: Any) -> Any:
        """A user's engine file never sets [launch]: validation keeps whatever table it is given."""
        from pydantic_core import core_schema  # only when a user's file is validated

        return core_schema.no_info_plain_validator_function(lambda v: v if isinstance(v, LaunchTable) else cls(v or {}))


@dataclass(frozen=True, slots=True, kw_only=True)
class EngineKnobs:
    """The knobs an engine resolves for one deployment when the user gives none (its defaults)."""

    max_num_seqs: int
    max_num_batched_tokens: int
    block_size: int
    memory_fraction: float
    enable_chunked_prefill: bool
    enable_prefix_caching: bool
    async_scheduling: bool
    cuda_graph_max_bs: int  # 0: no cap
    synced: bool = False  # async scheduling off because the deployment has a feature in `HostCosts.sync_with`


@dataclass(frozen=True, slots=True, kw_only=True)
class EngineProfile:
    """One engine family at one version, resolved from the catalog (see the module docstring)."""

    __pydantic_config__ = TABLE_CONFIG

    family: str
    version: str
    display: str
    scheduler: str  # the simulator's policy: vllm, sglang, static
    memory_policy: str
    frontend: FrontendCosts | None  # None: offline (no HTTP server)
    host: HostCosts
    kernels: KernelFactors
    batch_defaults: tuple[BatchDefault, ...]
    memory_fraction: float
    block_size: int
    enable_chunked_prefill: bool
    enable_prefix_caching: bool
    activation_reserve_gib: float = 0.0  # memory kept outside the KV pool beyond the profiled peak (graphs, ...)
    # admit a request only while the KV blocks of every running sequence at its full length (prompt + max tokens)
    # and its own fit the pool, so nothing is ever preempted (TensorRT-LLM's GUARANTEED_NO_EVICT capacity policy)
    reserve_max_tokens: bool = False
    # attention-DP balance (TensorRT-LLM's attention_dp_config enable_balance, opt-in): (timeout_iters,
    # batching_wait_iters), the iterations a waiting context is held back for the other ranks' (sim/scheduler.py,
    # `AdpBalance`); empty where the engine has no such option
    adp_balance_iters: tuple[int, ...] = ()
    # each data-parallel attention rank's share of the prefill token budget: "whole" (every rank schedules the
    # full max_num_batched_tokens: vLLM, TensorRT-LLM), "split" (divided among the dp ranks: SGLang >= 0.4.5's
    # chunked_prefill_size // dp_size), "halved" (SGLang <= 0.4.4's // 2)
    dp_attention_chunk: str = "whole"
    # the scheduler's admission conservativeness under data-parallel attention, relative to the flag's (SGLang x 0.3)
    dp_attention_conservativeness: float = 1.0
    # how the target scores a speculative round's P positions per sequence: "batched" (one row of P query tokens
    # reading the sequence's KV once: vLLM V1, SGLang, TensorRT-LLM), "expand" (P single-token decode rows, each
    # reading its own context: vLLM V0's batch-expansion scorer), "expand_with_graphs" (expand where the engine
    # captures CUDA graphs, batched where it runs eagerly: vLLM 0.6.3-0.7's MQA scorer, eager only)
    spec_scoring: str = "batched"
    # what a replica of pp > 1 pipeline stages keeps in flight: "none" (one batch, its stages in turn: llama.cpp's
    # layer split), "each" (pp micro-batches, each with the engine's batch limits: TensorRT-LLM's numMicroBatches =
    # pp with a capacity of max_batch_size x pp, vLLM V0's pp virtual engines each with its own scheduler and
    # max_num_seqs), "shared" (pp batches under one running limit: vLLM V1's batch queue of max_concurrent_batches =
    # pp, SGLang's micro-batches of max_running_requests // pp_size). `cost/step.py` prices a step of such an engine
    # as one round of its micro-batches (`_round_s`)
    pp_microbatches: str = "none"
    # (min tp, fraction), first match (SGLang to 0.5.2 where no by-device rule sets one)
    memory_fraction_by_tp: tuple[tuple[int, float], ...] = ()
    memory_reserve: MemoryReserve | None = None  # SGLang >= 0.5.3: the fraction from a reserve formula
    kv_margin: KvMargin | None = None  # vLLM >= 0.34: the pool sized from measured memory (share_of_device only)
    # the batch knobs the engine's offline benchmark derives from the workload (trtllm-bench); None: its defaults
    bench_batch: BenchBatch | None = None
    device_kernels: tuple[DeviceKernels, ...] = ()  # per-vendor backends' kernel factors (first match)
    devices: tuple[str, ...] = ()  # where the engine runs, "vendor:kind" ("*" any vendor); empty: anywhere
    # (checkpoint format, the format of the file this engine serves it from): llama.cpp runs gpt-oss from a GGUF
    # (mxfp4_moe, Q8_0 outside the experts), not the safetensors checkpoint (mxfp4-moe, bf16 outside them)
    checkpoint_formats: tuple[tuple[str, str], ...] = ()
    # the engine loads GGUF files only: 16- and 32-bit floats and the block types of its quantized path
    # (`KernelFactors.quantized_path`), not GPU checkpoint formats (fp8, int4-awq, nvfp4, ...)
    gguf_only: bool = False
    # the engine can load a GGUF file at all (llama.cpp; vLLM's and SGLang's GGUF loaders), else it refuses the GGUF
    # types (TensorRT-LLM, TGI's CUDA server, a PyTorch script that would dequantize the file to 16-bit at load)
    loads_gguf: bool = True
    gguf_lacks: tuple[str, ...] = ()  # GGUF file types (`WeightFormat.gguf_type`) the engine's GGUF kernels do not run
    parallelism: tuple[str, ...] = ("tp", "pp", "dp", "ep")  # the forms of parallelism the engine implements
    # the release whose profile prices the engine this release falls back to for a deployment its default engine
    # does not support (vLLM 0.8-0.10's V1 oracle sends it to V0: 0.7.3's profile), named `fallback_label`;
    # "": no fallback (`fall_back`)
    fallback: str = ""  # (on a fallback profile: the release whose profile prices it)
    fallback_label: str = ""
    fell_back: str = ""  # why this profile is its release's fallback engine ("": the release's default engine)
    sources: tuple[tuple[str, str], ...] = field(default=(), compare=False)
    launch: LaunchTable = field(default_factory=lambda: LaunchTable({}), compare=False, repr=False)

    def rank_tokens(self, tokens: int, dp: int) -> int:
        """Each of `dp` data-parallel attention ranks' prefill token budget when the flag says `tokens`
        (`dp_attention_chunk`)."""
        if dp == 1 or self.dp_attention_chunk == "whole":
            return tokens
        return max(1, tokens // (dp if self.dp_attention_chunk == "split" else 2))

    def check_parallelism(self, **degrees: int) -> None:
        """A SpecError naming the first degree above 1 (tp=, pp=, dp=, ep=) the engine does not implement."""
        for name, n in degrees.items():
            if n > 1 and name not in self.parallelism:
                raise SpecError(f"{self.display} {self.version} has no {name.upper()} ({name}={n}); it implements "
                                f"{', '.join(p.upper() for p in self.parallelism)}")

    def measured_margin(self, vendor: str, kind: str) -> KvMargin | None:
        """`kv_margin` where this engine sizes its KV pool from measured memory on a `vendor` device of this `kind`
        (vLLM >= 0.34 on CUDA and ROCm), else None: the pool is a share of the device."""
        m = self.kv_margin
        return m if m is not None and m.on(vendor, kind) else None

    def runs_on(self, vendor: str, kind: str) -> bool:
        """Whether the engine has a backend for a `vendor` chip of this `kind` (gpu, soc, cpu)."""
        return _on_devices(self.devices, vendor, kind)

    def file_format(self, checkpoint: str) -> str:
        """The weight format this engine serves a checkpoint of format `checkpoint` from: its own file's
        (`checkpoint_formats`), or where it loads GGUF files only and cannot load that format, the GGUF type a
        conversion makes of it (`precision.gguf_counterpart`: an FP8 DeepSeek-V3 from a Q8_0 GGUF)."""
        own = dict(self.checkpoint_formats).get(checkpoint, checkpoint)
        if self.gguf_only and not self.kernels.quantized_path(weight_format(own)):
            return gguf_counterpart(own)
        return own

    def at_least(self, version: str) -> bool:
        """Whether this profile's version is `version` or later (MAJOR.MINOR[.PATCH])."""
        return _version_key(self.version) >= _version_key(version)

    def __post_init__(self) -> None:
        if self.memory_policy not in MEMORY_POLICIES:
            raise SpecError(f"engine {self.family}: memory_policy must be one of {', '.join(MEMORY_POLICIES)}, "
                            f"got '{self.memory_policy}'")
        check_text(self.scheduler, f"engine {self.family}: scheduler", choices=SCHEDULERS, error=SpecError)
        number(self.memory_fraction, f"engine {self.family}: memory_fraction", lo=0, hi=1, lo_open=True,
               error=SpecError)
        unknown = [f for pair in self.checkpoint_formats for f in pair if f not in WEIGHT_FORMATS]
        if unknown:
            raise SpecError(f"engine {self.family}: checkpoint_formats names unknown weight format(s) {unknown}")
        integer(self.block_size, f"engine {self.family}: block_size", lo=1, error=SpecError)
        number(self.activation_reserve_gib, f"engine {self.family}: activation_reserve_gib", lo=0, error=SpecError)
        if self.kv_margin is not None and self.memory_policy != "share_of_device":
            raise SpecError(f"engine {self.family}: kv_margin sizes a share_of_device pool (vLLM's), not "
                            f"{self.memory_policy}")
        for min_tp, f in self.memory_fraction_by_tp:
            integer(min_tp, f"engine {self.family}: memory_fraction_by_tp tp", lo=1, error=SpecError)
            number(f, f"engine {self.family}: memory_fraction_by_tp fraction", lo=0, hi=1, lo_open=True,
                   error=SpecError)
        if not self.batch_defaults:
            raise SpecError(f"engine {self.family}: needs at least one [[batch_defaults]] rule")
        check_text(self.dp_attention_chunk, f"engine {self.family}: dp_attention_chunk",
                   choices=DP_ATTENTION_CHUNKS, error=SpecError)
        check_text(self.spec_scoring, f"engine {self.family}: spec_scoring", choices=SPEC_SCORINGS, error=SpecError)
        check_text(self.pp_microbatches, f"engine {self.family}: pp_microbatches", choices=PP_MICROBATCHES,
                   error=SpecError)
        number(self.dp_attention_conservativeness, f"engine {self.family}: dp_attention_conservativeness", lo=0,
               lo_open=True, error=SpecError)
        if self.adp_balance_iters:
            if len(self.adp_balance_iters) != 2:
                raise SpecError(f"engine {self.family}: adp_balance_iters is [timeout_iters, batching_wait_iters], "
                                f"got {list(self.adp_balance_iters)}")
            for it in self.adp_balance_iters:
                integer(it, f"engine {self.family}: adp_balance_iters", lo=0, hi=100_000, error=SpecError)
        if self.fallback and not self.fallback_label:
            raise SpecError(f"engine {self.family}: fallback = '{self.fallback}' needs a fallback_label (the engine's "
                            "name, e.g. V0)")
        if not self.parallelism or not set(self.parallelism) <= {"tp", "pp", "dp", "ep"}:  # one GPU per stage: no tp
            raise SpecError(f"engine {self.family}: parallelism must list some of tp, pp, dp, ep, got "
                            f"{list(self.parallelism)}")
        _check_devices(self.devices, f"engine {self.family}")

    @property
    def name(self) -> str:
        """`family@version`, with `(offline)` when no HTTP server is modelled and `(eager)` when the engine runs
        without CUDA graphs."""
        return (f"{self.family}@{self.version}" + (f" ({self.fallback_label})" if self.fell_back else "")
                + ("" if self.frontend is not None else " (offline)")
                + ("" if self.kernels.cuda_graphs else " (eager)"))

    @property
    def is_offline(self) -> bool:
        return self.frontend is None

    def server_dp_refusal(self, replicas_per_server: int) -> str | None:
        """Why this engine cannot run `replicas_per_server` data-parallel engines behind one API server (None: it
        can, or there is one)."""
        if replicas_per_server <= 1:
            return None
        if self.frontend is None:
            return (f"replicas_per_server={replicas_per_server} puts engines behind one API server; offline "
                    "(--frontend none) replicas are independent: drop --replicas-per-server")
        if self.frontend.data_parallel == "none":
            return (f"{self.display} {self.version} serves one engine per server: start {replicas_per_server} "
                    "servers behind a router instead (drop --replicas-per-server)")
        return None

    def default_knobs(self, *, hw_id: str, memory_gib: float, kind: str, context_len: int | None, tp: int = 1,
                      pp: int = 1, dp: int = 1, speculative: str | None = None,
                      linear_state: bool = False, spans_hosts: bool = False,
                      features: frozenset[str] = frozenset()) -> EngineKnobs:
        """Every knob this engine picks by default for a deployment (see the catalog entry's sources). `dp` > 1:
        data-parallel attention over that many ranks of `tp` GPUs each, whose stage the TP-sized defaults count
        whole (SGLang's --tp-size is tp x dp); `speculative`: the proposer's method, None without one;
        `linear_state`: the model has linear-state layers; `spans_hosts`: a tensor or pipeline group spans machines;
        `features`: the deployment's `CHUNKED_FEATURES`
        (speculative decoding added from `speculative`)."""
        rule = next((r for r in self.batch_defaults if r.matches(hw_id, memory_gib, kind)), self.batch_defaults[-1])
        offline = self.frontend is None
        tokens = rule.offline_max_num_batched_tokens if offline and rule.offline_max_num_batched_tokens \
            else rule.max_num_batched_tokens
        seqs = rule.offline_max_num_seqs if offline and rule.offline_max_num_seqs else rule.max_num_seqs
        if speculative and self.speculative_refusal(speculative):
            speculative = None  # another engine's deployment, served without it (launch's note): nothing to reserve
        chunked = self.enable_chunked_prefill
        if not chunked and rule.chunks_context(context_len, features | ({"speculative"} if speculative else set())):
            chunked, tokens = True, rule.chunked_tokens
        elif rule.at_least_context and context_len:
            tokens = max(tokens, context_len)
        fraction = self.memory_fraction
        stage = tp * dp
        graph_bs = rule.graph_max_bs(stage)
        if (by_device := rule.fraction(memory_gib, stage, pp, dp_attention=dp > 1,
                                       speculative=speculative)) is not None:
            fraction = by_device
        elif self.memory_reserve is not None:
            fraction = self.memory_reserve.fraction(memory_gib, tokens, stage, pp, graph_bs, dp=dp,
                                                    speculative=speculative)
        else:
            fraction = next((f for min_tp, f in self.memory_fraction_by_tp if stage >= min_tp), fraction)
        async_on = (self.host.async_scheduling or self.host.synced) if rule.async_scheduling is None \
            else rule.async_scheduling
        synced = async_on and self.host.syncs(pp=pp, speculative=speculative, linear_state=linear_state,
                                              spans_hosts=spans_hosts)
        return EngineKnobs(max_num_seqs=min(seqs, max(tokens, 1)), max_num_batched_tokens=tokens,
                           block_size=rule.block_size or self.block_size, memory_fraction=fraction,
                           enable_chunked_prefill=chunked,
                           enable_prefix_caching=self.enable_prefix_caching,
                           async_scheduling=async_on and not synced, synced=synced,
                           cuda_graph_max_bs=self.kernels.cuda_graph_max_bs if graph_bs is None else graph_bs)

    def on_device(self, knobs: EngineKnobs, vendor: str | None = None, kind: str | None = None) -> EngineProfile:
        """This profile as it runs on a device whose rules change a behaviour (async scheduling, the CUDA-graph
        batch cap, the kernels of the backend the engine runs on that `vendor`'s devices of that `kind`)."""
        out = self
        rule = next((r for r in self.device_kernels if r.vendor == vendor and r.kind in ("", kind)), None)
        if rule is not None:
            out = replace(out, kernels=rule.apply(self.kernels))
        if (knobs.async_scheduling, knobs.synced) != (self.host.async_scheduling, self.host.synced):
            out = replace(out, host=replace(self.host, async_scheduling=knobs.async_scheduling, synced=knobs.synced))
        if knobs.cuda_graph_max_bs != out.kernels.cuda_graph_max_bs:
            out = replace(out, kernels=replace(out.kernels, cuda_graph_max_bs=knobs.cuda_graph_max_bs))
        return out

    def offline(self) -> EngineProfile:
        return replace(self, frontend=None)

    @property
    def expands_verify(self) -> bool:
        """Whether the target scores a speculative round's positions as single-token decode rows (`spec_scoring`)."""
        return self.spec_scoring == "expand" or (self.spec_scoring == "expand_with_graphs" and self.kernels.cuda_graphs)

    def fall_back(self, reason: str) -> EngineProfile:
        """This release as it runs a deployment its default engine does not support (`reason`): on its fallback
        engine (`fallback`), priced with that release's frontend, host, kernels and defaults, under this release's
        version and launch flags (the engine picks it at startup: nothing to launch differently). Offline, eager
        and the endpoint carry over. Self where the release has no fallback, or where the profile comes from a
        user's engine file (measured on whichever engine ran)."""
        if not self.fallback or self.fell_back or any(tag == "override" for tag, _ in self.sources):
            return self
        if (self.api_servers_asked() or 1) > 1:
            raise self._one_api_server(reason)
        return replace(self._release_like(self.fallback), version=self.version, launch=self.launch,
                       fallback=self.fallback, fallback_label=self.fallback_label, fell_back=reason,
                       sources=(*self.sources, (self.fallback, f"{self.fallback_label}: {reason}")))

    def _release_like(self, version: str) -> EngineProfile:
        """The catalog's profile of this family at `version`, with this profile's frontend (or none), endpoint and
        CUDA graphs (or none)."""
        own = get_engine(f"{self.family}@{version}", frontend="none" if self.frontend is None else "http",
                         endpoint=self.frontend.endpoint if self.frontend is not None else "completions")
        return own if self.kernels.cuda_graphs else own.eager()

    @property
    def fallback_note(self) -> str:
        """What a fallback profile prices ('' for a release on its default engine)."""
        if not self.fell_back:
            return ""
        return (f"{self.display} {self.version} runs this deployment on its {self.fallback_label} engine "
                f"({self.fell_back}): priced with {self.family}@{self.fallback}'s profile")

    def speculative_method(self, method: str) -> str | None:
        """The engine's own name for flopwise's speculative `method` (its [launch.speculative] table: vLLM
        "draft_model", SGLang "EAGLE3", TensorRT-LLM "MTP"), None where this release does not serve it (absent, or ""
        where a release dropped it)."""
        return self.launch.table("speculative").get(method) or None

    def speculative_refusal(self, method: str) -> str | None:
        """Why this release cannot serve speculative decoding by `method` (None: it can, or the catalog lists no
        methods for the engine: the PyTorch harnesses, llama.cpp)."""
        if self.launch.get("speculative") is None or self.speculative_method(method) is not None:
            return None
        served = sorted(m for m in self.launch.table("speculative") if self.speculative_method(m))
        return (f"{self.display} {self.version} does not serve '{method}' speculative decoding (it serves "
                f"{', '.join(served) or 'none'}): drop --speculative, or pick another method, release or engine")

    @property
    def version_note(self) -> str:
        """Where the version asked is past every release the catalog knows, or a pre-release: what it is priced as
        ('' otherwise)."""
        newest = _newest_release(self.family)
        if _version_key(self.version) > _version_key(newest):
            return (f"{self.display} {self.version} is newer than any release flopwise's catalog knows ({newest}): "
                    f"priced as {newest}")
        if _PRERELEASE.search(self.version):
            return f"{self.display} {self.version} is a pre-release: priced as the release it precedes"
        return ""

    def _one_api_server(self, reason: str) -> SpecError:
        # vLLM's serve: "api_server_count > 1 is only supported for V1"
        return SpecError(f"{self.display} {self.version} runs this deployment on its {self.fallback_label} engine "
                         f"({reason}), which has one API server: drop --api-servers")

    def released(self) -> EngineProfile:
        """The catalog's profile of this release on the engine this profile runs (its fallback included), without
        a deployment's or a user's changes: what the release picks by itself."""
        own = get_engine(f"{self.family}@{self.version}")
        return own.fall_back(self.fell_back) if self.fell_back else own

    def release_default(self) -> EngineProfile:
        """A fallback profile's release on its default engine again (the frontend, endpoint and CUDA graphs as
        they were), for a deployment that re-checks the fallback (`make_deployment`); self for any other."""
        return self._release_like(self.version) if self.fell_back else self

    def eager(self) -> EngineProfile:
        """This engine with CUDA graphs off altogether (vLLM's --enforce-eager, SGLang's --disable-cuda-graph,
        TensorRT-LLM's PyTorch backend without cuda_graph_config): every step, decode too, is floored by its
        kernels' eager launches (`KernelFactors.cuda_graphs`), and no memory is kept for graphs
        (`activation_reserve_gib`, vLLM's profiled CUDA graphs). A SpecError where the profile prices no eager
        launch (the engine runs no PyTorch steps eagerly: llama.cpp, TensorRT-LLM's C++ runtime)."""
        k = self.kernels
        if not k.eager_launch_s:
            raise SpecError(f"{self.display} {self.version} has no eager (no CUDA graph) mode flopwise can price: its "
                            "profile gives no eager launch cost, so it is priced with its CUDA graphs (or its own "
                            "runtime) only")
        return replace(self, kernels=replace(k, cuda_graphs=False), activation_reserve_gib=0.0)  # no graphs held

    def attention_backend_spelling(self, backend: str) -> str | None:
        """`backend` as this release's launch table spells it (`attention_backends`, matched in any case), or None
        where the release has no such backend."""
        known = {str(n).lower(): str(n) for n in self.launch.get("attention_backends", ())}
        return known.get(str(backend).strip().lower())

    def with_attention_backend(self, backend: str) -> EngineProfile:
        """This engine told which attention backend to run (SGLang's --attention-backend, vLLM's
        VLLM_ATTENTION_BACKEND, --attention-backend from 0.13), one of the names its launch table lists
        (`attention_backends`, any case): FlashInfer decodes by the release's group rule on every device, wherever
        the release defaults to another backend (`KernelFactors.tensor_decode_on`, `decode_cuda_core_on`); any
        other backend decodes on the tensor cores (FlashAttention, TensorRT-LLM's, Triton's, AITER's kernels). The
        launch commands name it (`KernelFactors.attention_backend`). "auto" is the engine's own choice (this profile).
        A SpecError for an engine without the switch or a name this release does not know."""
        if str(backend).strip().lower() == "auto":
            return self
        la = self.launch
        if not (la.table("flags").get("attention_backend") or la.get("attention_backend_env")):
            raise SpecError(f"{self.display} {self.version} has no attention-backend switch flopwise prices; drop "
                            "the attention backend or pick another engine")
        name = self.attention_backend_spelling(backend)
        if name is None:
            known = [str(n) for n in la.get("attention_backends", ())]
            raise SpecError(f"{self.display} {self.version} has no attention backend {backend!r}."
                            f"{suggest(str(backend), known) or ' It takes: ' + ', '.join(known)}")
        k = replace(self.kernels, attention_backend=name)
        if name.lower() == "flashinfer":
            return replace(self, kernels=replace(k, tensor_decode_on=(), tensor_decode_families=(),
                                                 decode_cuda_core_on=()))
        return replace(self, kernels=replace(k, decode_cuda_core_groups=()))

    def with_api_servers(self, count: int) -> EngineProfile:
        """This engine with `count` API server processes in all (`API_SERVER_FLAGS`): they share the server's
        frontend work (`FrontendCosts.api_servers`); a count given replaces the per-engine default (`per_rank`
        becomes `shared` among the server's engines). A SpecError offline or where the catalog has no flag for it
        at this version."""
        integer(count, "--api-servers", lo=1, hi=256, error=SpecError)
        fe = self.frontend
        if fe is None:
            raise SpecError("--api-servers sizes the HTTP server; offline (--frontend none) there is none")
        if self.fell_back and count > 1:
            raise self._one_api_server(self.fell_back)
        if not self.launch.table("flags").get("api_servers"):
            raise SpecError(f"{self.display} {self.version} has no API-server process count flopwise knows of "
                            f"({API_SERVER_FLAGS}); drop --api-servers")
        mode = "shared" if fe.data_parallel == "per_rank" else fe.data_parallel
        return replace(self, frontend=replace(fe, api_servers=count, data_parallel=mode))

    def api_servers_asked(self) -> int | None:
        """The API-server count `with_api_servers` set (the server's total), None where the release's own default
        stands: what a launch command must write and a plan label show (vLLM 0.15+'s default is one per engine
        core, so a count of 1 behind a DP server is a choice too)."""
        fe = self.frontend
        if fe is None:
            return None
        own = self.released().frontend
        if own is not None and (own.api_servers, own.data_parallel) == (fe.api_servers, fe.data_parallel):
            return None
        return fe.api_servers

    def with_stream_interval(self, tokens: int) -> EngineProfile:
        """This engine streaming one SSE event per `tokens` output tokens after the first (vLLM 0.11.1+ and SGLang
        --stream-interval, TensorRT-LLM's stream_interval option): the frontend's per-token cost becomes
        `FrontendCosts.token_s`. 1 is every engine's default (and the only choice where the server has no such
        option); a SpecError offline, or for a larger interval the server cannot be told."""
        integer(tokens, "--stream-interval", lo=1, hi=1_000_000, error=SpecError)
        fe = self.frontend
        if fe is None:
            if tokens == 1:
                return self
            raise SpecError("--stream-interval sets how the HTTP server streams; offline (--frontend none) there "
                            "is none")
        if tokens > 1 and not self.has_stream_interval:
            raise SpecError(f"{self.display} {self.version} streams every token: it has no stream-interval option "
                            "flopwise knows of (vLLM 0.11.1+ and SGLang --stream-interval, TensorRT-LLM 1.0+ "
                            "stream_interval); drop --stream-interval")
        return replace(self, frontend=replace(fe, stream_interval=tokens))

    @property
    def has_stream_interval(self) -> bool:
        """Whether this release's server can be told to stream every N tokens: a launch flag (vLLM, SGLang) or an
        options-file key (TensorRT-LLM) for it."""
        return bool(self.launch.table("flags").get("stream_interval")
                    or self.launch.table("yaml").get("stream_interval"))

    @property
    def stream_interval(self) -> int:
        """Output tokens per streamed event after the first (1 offline: there is no stream)."""
        return 1 if self.frontend is None else self.frontend.stream_interval

    def with_endpoint(self, endpoint: str) -> EngineProfile:
        if self.frontend is None:
            return self
        return replace(self, frontend=replace(self.frontend, endpoint=endpoint))


# --------------------------------------------------------------------------------------------------- catalog


def _version_key(text: str) -> tuple[int, int, int, int]:
    m = _VERSION.match(text.strip())
    if not m:
        raise SpecError(f"cannot read engine version '{text}'; write it as MAJOR.MINOR[.PATCH] (e.g. 0.11, "
                        "0.5.6.post1) or a llama.cpp build (b4000)")
    return tuple(int(g) if g else 0 for g in m.groups())  # type: ignore[return-value]


def _merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for k, v in over.items():
        out[k] = _merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


@dataclass(frozen=True, slots=True, kw_only=True)
class _Family:
    name: str
    aliases: tuple[str, ...]
    base: dict[str, Any]
    releases: tuple[tuple[tuple[int, int, int, int], str, dict[str, Any]], ...]  # (key, since text, table)
    default_version: str
    launch: dict[str, Any] = field(default_factory=dict)  # [launch], its `release` list included
    first_release: str | None = None  # the family's earliest published release (None: not stated)


_FAMILY_KEYS = {"name", "aliases", "default_version", "first_release", "base", "release", "launch"}
_PROFILE_KEYS = {"display", "scheduler", "memory_policy", "frontend", "host", "kernels", "batch_defaults",
                 "memory_fraction", "block_size", "enable_chunked_prefill", "enable_prefix_caching",
                 "activation_reserve_gib", "reserve_max_tokens", "adp_balance_iters", "memory_fraction_by_tp",
                 "dp_attention_chunk", "dp_attention_conservativeness", "spec_scoring", "pp_microbatches",
                 "memory_reserve", "kv_margin", "bench_batch", "device_kernels", "devices", "parallelism", "loads_gguf",
                 "gguf_lacks", "fallback", "fallback_label", "sources", "since", "source"}


@cache
def _families() -> dict[str, _Family]:
    out: dict[str, _Family] = {}
    base_dir = resources.files("flopwise.catalog").joinpath("engines")
    for entry in sorted(base_dir.iterdir(), key=lambda p: p.name):
        if not entry.name.endswith(".toml"):
            continue
        data = tomllib.loads(entry.read_text())
        where = f"engine catalog {entry.name}"
        unknown = set(data) - _FAMILY_KEYS
        if unknown:
            raise SpecError(f"{where}: unknown keys {sorted(unknown)}")
        releases = []
        for rel in data.get("release", []):
            bad = set(rel) - _PROFILE_KEYS
            if bad or "since" not in rel:
                raise SpecError(f"{where}: release needs 'since' and known keys, got {sorted(rel)}")
            releases.append((_version_key(rel["since"]), rel["since"], rel))
        releases.sort(key=lambda r: r[0])
        fam = _Family(name=data["name"], aliases=tuple(data.get("aliases", ())), base=data["base"],
                      releases=tuple(releases), default_version=data["default_version"], launch=data.get("launch", {}),
                      first_release=data.get("first_release"))
        for key in (fam.name, *fam.aliases):
            out[key.lower()] = fam
    return out


_PRERELEASE = re.compile(r"\d\.?(rc|dev|a|b)\d*(\+[\w.]+)?$", re.I)  # after the version's digits (not b7000)


@cache
def _newest_release(family: str) -> str:
    """The newest version the family's catalog names (its default, a profile release or a launch release)."""
    fam = _families()[family]
    names = [fam.default_version, *(since for _, since, _ in fam.releases),
             *(str(r["since"]) for r in fam.launch.get("release", []))]
    return max(names, key=_version_key)


def engine_families() -> tuple[str, ...]:
    """Family names in the catalog (aliases excluded)."""
    return tuple(sorted({f.name for f in _families().values()}))


def engine_releases(family: str, upto: str | None = None) -> tuple[str, ...]:
    """The versions at which `family`'s profile changes ("0" stands for its base: anything older), up to and
    including `upto` where given (the changes a profile at that version holds)."""
    fam = _families()[family]
    out = ("0", *dict.fromkeys(since for _, since, _ in fam.releases))  # (a version several releases name: once)
    return out if upto is None else tuple(v for v in out if v == "0" or _version_key(v) <= _version_key(upto))


def engine_base_version(family: str) -> str:
    """A version `family`'s base profile is served at: its first published release (`first_release`; an older
    version is refused), "0" where the catalog states none."""
    return _families()[family].first_release or "0"


def parse_engine_text(text: str, what: str = "--engine") -> tuple[str, str | None]:
    """'vllm@0.11' -> ('vllm', '0.11'); 'sglang' -> ('sglang', None). `what` names the value in errors."""
    text = text.strip()
    if not text:
        raise SpecError(f"empty {what}; use one of {', '.join(engine_families())}, optionally @VERSION")
    name, at, version = text.partition("@")
    if at and not version.strip():
        raise SpecError(f"{what} '{text}': nothing after '@'; give a version (e.g. {name.strip()}@0.11) or drop "
                        "the '@'")
    return name.strip().lower(), (version.strip() or None)


def load_engine_file(path: str | Path) -> tuple[str, dict[str, Any]]:
    """A user's engine override file (what `flopwise calibrate` writes): `name = "<family>"` and an
    `[override]` table of profile keys (e.g. `host = { step_s = ... }`), applied on top of the catalog's
    profile at any version. Returns (family, override table)."""
    content = read_text(path, "engine file")
    try:
        data = tomllib.loads(content)
    except tomllib.TOMLDecodeError as e:
        raise SpecError(f"engine file '{path}' could not be parsed: {e}") from None
    name, over = data.get("name"), data.get("override")
    if not isinstance(name, str) or not isinstance(over, dict):
        raise SpecError(f"engine file '{path}' needs name = \"<engine family>\" and an [override] table")
    bad = set(over) - _PROFILE_KEYS
    if bad:
        raise SpecError(f"engine file '{path}': unknown override keys {sorted(bad)}")
    return name.lower(), over


def write_engine_file(path: str | Path, profile: EngineProfile, note: str) -> None:
    """Write `profile`'s CPU costs (host, frontend) as an override file of its family (see load_engine_file)."""
    def table(obj: object) -> str:
        # the endpoint, DP mode, API-server count, stream interval and async switch-offs are the release's or the
        # deployment's, not CPU costs
        items = [f"{f.name} = {_toml_value(getattr(obj, f.name))}" for f in fields(obj)  # type: ignore[arg-type]
                 if f.name not in ("endpoint", "data_parallel", "shared_by", "api_servers", "stream_interval",
                                   "sync_with", "synced")]
        return "{ " + ", ".join(items) + " }"
    lines = [f"# flopwise engine override for {profile.name}: {note}", f'name = "{profile.family}"', "",
             "[override]", f"host = {table(profile.host)}"]
    if profile.frontend is not None:
        lines.append(f"frontend = {table(profile.frontend)}")
    Path(path).write_text("\n".join(lines) + "\n", encoding="utf-8")


def _toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    return repr(v)


def _launch_table(fam: _Family, key: tuple[int, int, int, int]) -> LaunchTable:
    """The family's [launch] table at a version: the base merged with every [[launch.release]] at or below it."""
    table = {k: v for k, v in fam.launch.items() if k != "release"}
    rels = sorted(fam.launch.get("release", []), key=lambda r: _version_key(r["since"]))
    for rel in rels:
        if _version_key(rel["since"]) <= key:
            table = _merge(table, {k: v for k, v in rel.items() if k not in ("since", "source")})
    return LaunchTable(table)


def _build(fam: _Family, version: str, override: tuple[tuple[str, Any], ...] = ()) -> EngineProfile:
    key = _version_key(version)
    table = dict(fam.base)
    sources = [("base", str(fam.base.get("source", "")))]
    for rel_key, since, rel in fam.releases:
        if rel_key <= key:
            table = _merge(table, {k: v for k, v in rel.items() if k not in ("since", "source")})
            sources.append((since, str(rel.get("source", ""))))
    if override:
        table = _merge(table, dict(override))
        sources.append(("override", "user engine file"))
    if isinstance(table.get("frontend"), dict) and "shared_by" in table["frontend"]:
        raise SpecError("engine frontend: shared_by is the deployment's (replicas_per_server), not a profile's")
    if override:
        return _validated(fam, version, table, tuple(sources))
    try:
        frontend = FrontendCosts(**table["frontend"]) if table.get("frontend") else None
        rules = tuple(BatchDefault(**{**r, "exclude": tuple(r.get("exclude", ())), "only": tuple(r.get("only", ())),
                                      "chunked_unless": tuple(r.get("chunked_unless", ())),
                                      "cuda_graph_max_bs": tuple(tuple(x) for x in r.get("cuda_graph_max_bs", ()))})
                      for r in table["batch_defaults"])
        return EngineProfile(
            family=fam.name, version=version, display=table.get("display", fam.name), scheduler=table["scheduler"],
            memory_policy=table["memory_policy"], frontend=frontend, host=HostCosts(**table.get("host", {})),
            kernels=KernelFactors(**table.get("kernels", {})), batch_defaults=rules,
            memory_fraction=float(table["memory_fraction"]), block_size=int(table["block_size"]),
            enable_chunked_prefill=bool(table["enable_chunked_prefill"]),
            enable_prefix_caching=bool(table["enable_prefix_caching"]),
            activation_reserve_gib=float(table.get("activation_reserve_gib", 0.0)),
            reserve_max_tokens=bool(table.get("reserve_max_tokens", False)),
            adp_balance_iters=tuple(int(x) for x in table.get("adp_balance_iters", ())),
            dp_attention_chunk=str(table.get("dp_attention_chunk", "whole")),
            dp_attention_conservativeness=float(table.get("dp_attention_conservativeness", 1.0)),
            spec_scoring=str(table.get("spec_scoring", "batched")),
            pp_microbatches=str(table.get("pp_microbatches", "none")),
            memory_fraction_by_tp=tuple((int(t), float(f)) for t, f in table.get("memory_fraction_by_tp", ())),
            memory_reserve=MemoryReserve(**table["memory_reserve"]) if table.get("memory_reserve") else None,
            kv_margin=KvMargin(**table["kv_margin"]) if table.get("kv_margin") else None,
            bench_batch=BenchBatch(**table["bench_batch"]) if table.get("bench_batch") else None,
            device_kernels=tuple(DeviceKernels(vendor=r["vendor"], kernels=tuple(r["kernels"].items()),
                                               kind=r.get("kind", ""), source=r.get("source", ""))
                                 for r in table.get("device_kernels", ())),
            devices=tuple(table.get("devices", ())),
            checkpoint_formats=tuple(table.get("checkpoint_formats", {}).items()),
            gguf_only=bool(table.get("gguf_only", False)), loads_gguf=bool(table.get("loads_gguf", True)),
            gguf_lacks=tuple(table.get("gguf_lacks", ())),
            parallelism=tuple(table.get("parallelism", ("tp", "pp", "dp", "ep"))),
            fallback=str(table.get("fallback", "")), fallback_label=str(table.get("fallback_label", "")),
            sources=tuple(sources),
            launch=_launch_table(fam, key))
    except (KeyError, TypeError) as e:
        raise SpecError(f"engine catalog {fam.name}@{version}: {type(e).__name__}: {e}") from None


def _validated(fam: _Family, version: str, table: dict[str, Any], sources: tuple[tuple[str, str],
                                                                                 ...]) -> EngineProfile:
    """A profile whose table a user's engine file changed: every value checked against EngineProfile's own
    annotations (`validate.from_table`) and ranges (its `__post_init__`s)."""
    where = f"engine file for {fam.name}@{version}"
    for key in ("frontend", "host", "kernels", "memory_reserve", "kv_margin", "bench_batch"):
        if table.get(key) is not None and not isinstance(table[key], dict):
            raise SpecError(f"{where}: {key} must be a table, got {table[key]!r}")
    rules = table.get("batch_defaults")
    if not isinstance(rules, list) or not all(isinstance(r, dict) for r in rules):
        raise SpecError(f"{where}: batch_defaults must be a list of tables, got {rules!r}")
    dev = table.get("device_kernels", [])
    if not isinstance(dev, list) or not all(isinstance(r, dict) and isinstance(r.get("kernels"), dict) for r in dev):
        raise SpecError(f"{where}: device_kernels must be a list of tables, each with a kernels table, got {dev!r}")
    formats = table.get("checkpoint_formats", {})
    if not isinstance(formats, dict):
        raise SpecError(f"{where}: checkpoint_formats must be a table (checkpoint format = file format), got "
                        f"{formats!r}")
    if isinstance(bb := table.get("bench_batch"), dict):  # its format tables as pairs, as the dataclass holds them
        table = {**table, "bench_batch": {**bb, **{k: list(dict(bb[k]).items()) for k in ("formats", "kv_bytes")
                                                   if isinstance(bb.get(k), dict)}}}
    table = {**table, "device_kernels": [{**r, "kernels": list(r["kernels"].items())} for r in dev],
             "checkpoint_formats": [list(kv) for kv in formats.items()]}
    kwargs = {k: v for k, v in table.items() if k not in ("since", "source", "sources", "launch")}
    kwargs.update(family=fam.name, version=version, display=table.get("display", fam.name),
                  frontend=table.get("frontend") or None, sources=[list(s) for s in sources])
    return replace(from_table(EngineProfile, kwargs, where), launch=_launch_table(fam, _version_key(version)))


@cache
def get_engine(text: str = DEFAULT_ENGINE, *, frontend: str = "http", endpoint: str = "completions",
               engine_file: str | None = None) -> EngineProfile:
    """The profile for `family[@version]` (default version: the family's `default_version`).

    `frontend`: "http" (the OpenAI server in front) or "none" (offline); `endpoint`: completions or chat;
    `engine_file`: a user override file (`load_engine_file`) whose family must match."""
    check_text(text, "--engine", empty=True, error=SpecError)
    name, version = parse_engine_text(text)
    fams = _families()
    fam = fams.get(name)
    if fam is None:
        raise SpecError(f"unknown engine '{name}'.{suggest(name, fams)} Use one of {', '.join(engine_families())}, "
                        "optionally with @VERSION (e.g. vllm@0.11)")
    if frontend not in ("http", "none"):
        raise SpecError(f"--frontend must be 'http' or 'none', got {frontend!r}")
    if endpoint not in ENDPOINTS:
        raise SpecError(f"unknown --endpoint {endpoint!r}; use one of {', '.join(ENDPOINTS)}")
    override: tuple[tuple[str, Any], ...] = ()
    if engine_file is not None:
        fam_name, table = load_engine_file(engine_file)
        if fams.get(fam_name) is not fam:
            raise SpecError(f"engine file '{engine_file}' overrides '{fam_name}', not '{fam.name}'; use --engine "
                            f"{fam_name}")
        override = tuple(table.items())
    if version and fam.first_release and _version_key(version) < _version_key(fam.first_release):
        display = fam.base.get("display", fam.name)
        raise SpecError(f"{display} {version} predates {display}'s first release ({fam.first_release}); name a release "
                        f"from {fam.first_release} on (e.g. {fam.name}@{fam.default_version})")
    prof = _build(fam, version or fam.default_version, override)
    if frontend == "none":
        return prof.offline()
    if prof.frontend is None:
        raise SpecError(f"{prof.family}@{prof.version} has no HTTP server in the catalog; use --frontend none")
    return prof.with_endpoint(endpoint)
