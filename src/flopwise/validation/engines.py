"""Which engine profile, frontend and knobs a published measurement ran with, read from its case.

A case names its engine in free text (`engine`: "TensorRT-LLM (trtllm-bench)", "vLLM (ROCm)", "llama.cpp
(llama-bench)", ...), its version (`engine_version`: "0.6.3", "v0.5.1.post3", "Dec 2023 snapshot", "v4.1
submission"), and the settings the source states (`engine_knobs`). This module maps them onto
`specs/engine.py` names:

- family: the first family whose keywords appear in the engine text; NIM and MLPerf submissions run
  TensorRT-LLM; harness scripts (gpt-fast, TinyChat, QServe, transformers, Spec-Bench) the `pytorch` profile;
- version: the first MAJOR.MINOR[.PATCH] in the version text; MLPerf rounds and NIM releases map to the
  TensorRT-LLM release of their time; otherwise a year in the text picks the family's release of that year;
  else the default;
- frontend: "none" for offline benchmarks (static batches, trtllm-bench, llama-bench, MLPerf LoadGen, the LLM
  class, harness scripts, a load generator driving the engine in-process), "http" for serving runs through an
  OpenAI/Triton/NIM server;
- endpoint: chat when the knobs or engine text say so (llmperf and genai-perf call chat completions);
- knobs: stated values in flopwise's names (each engine's memory fraction keeps its own meaning); a vLLM run
  with `VLLM_USE_V1=0` on a release whose default is V1 is priced with the last V0-default release's profile;
- vLLM 0.8-0.10 ran V0 where the V1 engine did not support the run (`EngineArgs._is_v1_supported_oracle`, which
  falls back unless VLLM_USE_V1=1 was set): for a stated `--num-scheduler-steps` above 1, `--preemption-mode` or
  `--scheduler-delay-factor` the case is priced with the last V0-default release's profile; the device checks
  (compute capability below 8.0, an FP8 KV cache V1 cannot read) are every deployment's (`v1_refusal` in
  `specs/deployment.py`, `EngineProfile.fall_back`), off where VLLM_USE_V1=1 was stated;
- TensorRT-LLM backend: the catalog's releases from 0.20 are the PyTorch backend's (`trtllm-serve --backend
  pytorch`, as flopwise launches it), those before it the C++ TensorRT-engine flow's. A run states its backend
  (`engine_knobs.backend`, or "PyTorch" / "TensorRT engine" in the engine text) or takes its release's default:
  the engine flow before 1.0 (trtllm-bench's `--backend` defaulted to it; the LLM API and trtllm-serve switched to
  PyTorch after the 0.21 branch, PRs #5312 and #5717), PyTorch from 1.0. An engine-flow run from 0.20 on is priced
  with the last engine-flow release's profile; a PyTorch run before 0.20 (the backend's overlap scheduler was
  opt-in then, PR #4174) keeps its release's profile, as the catalog has none for that backend there;
- client schedule: vLLM's own client (`vllm bench serve`, `benchmark_serving.py`) from v0.10.0 rescales its drawn
  gaps so that request N of N goes out at N / rate (PR #21108, merged 2025-07-17), replayed with
  `rescale_arrivals`; its version is the case's `benchmark_version` knob, else the server's where the server is
  vLLM (one install), else unknown (no rescaling).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import Any

from flopwise.cost.memory import memory_fraction_for_pool, memory_plan
from flopwise.errors import SpecError
from flopwise.specs.build import build_deployment
from flopwise.specs.deployment import Deployment
from flopwise.specs.engine import EngineProfile, get_engine
from flopwise.specs.hardware import get_hardware
from flopwise.specs.model_catalog import get_model

__all__ = ["CaseEngine", "case_engine", "case_deployment"]

# (keywords, family), first match wins
_FAMILIES = (
    (("sglang",), "sglang"),
    # Ollama, LM Studio's GGUF runtime, KoboldCpp and llamafile embed llama.cpp
    (("llama.cpp", "llama-bench", "llama-server", "llamacpp", "ollama", "lm studio", "lmstudio", "koboldcpp",
      "llamafile"), "llamacpp"),
    (("tgi", "text-generation-inference"), "tgi"),
    (("tensorrt", "trt-llm", "trtllm", "triton", "nim"), "trtllm"),
    (("vllm",), "vllm"),
    (("gpt-fast", "tinychat", "qserve", "transformers", "spec-bench"), "pytorch"),
)
# MLPerf Inference rounds -> the TensorRT-LLM release their NVIDIA submissions used (round dates)
_MLPERF_TRTLLM = {"4.0": "0.9", "4.1": "0.12", "5.0": "0.17", "5.1": "1.0"}
# NVIDIA NIM for LLMs releases -> the TensorRT-LLM release of the same months (NIM release notes' dates)
_NIM_TRTLLM = {"1.0": "0.10", "1.1": "0.11", "1.2": "0.12", "1.3": "0.13", "1.4": "0.14", "1.5": "0.15",
               "1.6": "0.16", "1.7": "0.16", "1.8": "0.17", "1.9": "0.18", "1.10": "0.19"}
# year -> a release of that year, for version texts that give only a date
_BY_YEAR = {
    "vllm": {2023: "0.2", 2024: "0.5", 2025: "0.9", 2026: "0.14"},
    "sglang": {2024: "0.3", 2025: "0.4", 2026: "0.5.6"},
    "trtllm": {2023: "0.6", 2024: "0.9", 2025: "0.17", 2026: "1.0"},
    "llamacpp": {2023: "b1500", 2024: "b3000", 2025: "b5000", 2026: "b7000"},
    "tgi": {2024: "2.0", 2025: "3.0"},
    "pytorch": {},
}
_OFFLINE_WORDS = ("trtllm-bench", "gptmanagerbenchmark", "gptsessionbenchmark", "llama-bench", "mlperf", "offline",
                  "llm class", "benchmark_throughput", "benchmark_latency", "gpt-fast", "tinychat", "qserve",
                  "transformers", "spec-bench", "in-process")  # an engine driven in-process has no API server
_VLLM_LAST_V0 = "0.7.3"  # the last vLLM release whose default engine was V0 (V1 became the default in 0.8.0)
_VLLM_V0_REMOVED = "0.11.0"  # release notes: V0 removed (no fallback from then on)
# TensorRT-LLM: the first release the catalog prices as the PyTorch backend, the one before it (the C++ engine flow),
# and the first whose tools run PyTorch when no backend is given (PRs #5312, #5717: merged after the 0.21 branch;
# trtllm-bench's --backend defaulted to None, the engine flow, until then)
_TRTLLM_PYTORCH_SINCE = get_engine("trtllm").launch["pytorch_profile_since"]  # the catalog's PyTorch profiles
_TRTLLM_LAST_ENGINE_FLOW = "0.19.0"
_TRTLLM_PYTORCH_DEFAULT_SINCE = "1.0.0"
# SGLang's --num-continuous-decode-steps ran N decode steps per scheduler pass in 0.3.4 and 0.3.5 (managers/
# scheduler.py's event loop); from the 0.3.6 wheel on, the flag is parsed (server_args.py) and never read
_SGLANG_DECODE_STEPS_IGNORED = "0.3.6"
_VLLM_CLIENT_WORDS = ("vllm bench serve", "benchmark_serving")  # vLLM's serving benchmark client (and its copies)
_VLLM_RESCALED_SINCE = "0.10.0"  # PR #21108 (2025-07-17): gaps rescaled so request N of N goes out at N / rate
_SERVER_WORDS = ("serve", "server", "triton", "nim", "llmperf", "genai-perf", "http", "openai")
# llama.cpp builds by month (release tags bNNNN of ggml-org/llama.cpp), for versions given as a date
_LLAMACPP_BY_MONTH = {(2023, 8): 1100, (2023, 9): 1250, (2023, 12): 1650, (2024, 1): 1850, (2024, 5): 2900,
                      (2024, 6): 3150, (2024, 12): 4350, (2025, 6): 5700, (2025, 10): 6800, (2026, 1): 7600}
_MONTHS = {m: i for i, m in enumerate(("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov",
                                       "dec"), 1)}
_MONTH = re.compile(r"\b(jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\.? (20\d\d)\b|\b(20\d\d)-(\d\d)\b")
# a post release is a version of its own (SGLang 0.4.7.post1 changed the memory default)
_VERSION = re.compile(r"(?<![\w.])v?(\d+\.\d+(?:\.\d+)?(?:\.post\d+)?)")
_BUILD = re.compile(r"\bb(\d{3,5})\b")
_YEAR = re.compile(r"\b(20\d\d)\b")

# stated knob -> (flopwise deployment knob, converter)
_DEPLOYMENT_KNOBS = {
    "max_num_seqs": "max_num_seqs", "max_running_requests": "max_num_seqs", "max_batch_size": "max_num_seqs",
    "max_batch_size_per_rank": "max_num_seqs",
    "max_num_batched_tokens": "max_num_batched_tokens", "max_num_tokens": "max_num_batched_tokens",
    "chunked_prefill_size": "max_num_batched_tokens", "block_size": "block_size",
    "gpu_memory_utilization": "gpu_memory_utilization", "mem_fraction_static": "gpu_memory_utilization",
    "kv_cache_free_gpu_mem_fraction": "gpu_memory_utilization",
    "cuda_graph_max_bs": "cuda_graph_max_bs", "cuda_graph_max_batch_size": "cuda_graph_max_bs",
    "max_cudagraph_capture_size": "cuda_graph_max_bs",
}


@dataclass(frozen=True, slots=True, kw_only=True)
class CaseEngine:
    engine: EngineProfile
    knobs: dict[str, Any] = field(default_factory=dict)  # make_deployment keywords
    enable_prefix_caching: bool | None = None
    enable_chunked_prefill: bool | None = None
    ignore_eos: bool = False  # the client asked for exactly max_tokens (SGLang's admission differs)
    rescale_arrivals: bool = False  # the client's schedule puts request N of N at exactly N / rate (vLLM >= 0.10)
    sglang: dict[str, Any] = field(default_factory=dict)  # stated SGLang scheduler flags, as SglangKnobs fields
    client_cap: int | None = None  # the client's stated cap on requests in flight (--max-concurrency)
    client_rate: float | None = None  # the finite rate the client sent at, where stated beside a concurrency
    adp_balance: bool = False  # TensorRT-LLM's attention_dp_config enable_balance, where stated


def _has(text: str, words: tuple[str, ...]) -> bool:
    return any(re.search(rf"(?<![a-z]){re.escape(w)}(?![a-z])", text) for w in words)


def _family(text: str, gpu: str | None = None) -> str:
    """The engine family a source names; one it does not name is the default vLLM, except on a chip vLLM has no
    backend for (Apple silicon: MLX and the like), where llama.cpp's Metal kernels are the nearest modelled."""
    t = text.lower()
    for words, fam in _FAMILIES:
        if _has(t, words):
            return fam
    if gpu:
        try:
            hw = get_hardware(gpu)
        except SpecError:
            return "vllm"
        if not get_engine("vllm").runs_on(hw.vendor, hw.kind):
            return "llamacpp"
    return "vllm"


def _version(family: str, engine_text: str, version_text: str) -> str | None:
    v = version_text.lower()
    if "mlperf" in engine_text.lower() or "submission" in v:
        m = _VERSION.search(v)
        return _MLPERF_TRTLLM.get(m.group(1)) if m and family == "trtllm" else None
    if family == "trtllm" and _has(engine_text.lower(), ("nim",)):
        m = _VERSION.search(v)
        if m:
            major_minor = ".".join(m.group(1).split(".")[:2])
            return _NIM_TRTLLM.get(major_minor)
    if family == "llamacpp":
        m = _BUILD.search(v)
        if m:
            return f"b{m.group(1)}"
        d = _MONTH.search(v)
        if d:
            year, month = (int(d.group(2)), _MONTHS[d.group(1)]) if d.group(1) else (int(d.group(3)), int(d.group(4)))
            known = sorted(_LLAMACPP_BY_MONTH)
            at = max((k for k in known if k <= (year, month)), default=known[0])
            return f"b{_LLAMACPP_BY_MONTH[at]}"
    elif family != "pytorch":
        m = _VERSION.search(v)
        if m:
            return m.group(1)
    y = _YEAR.search(v)
    if y:
        years = _BY_YEAR.get(family, {})
        year = int(y.group(1))
        if years:
            return years.get(year) or years[min(years, key=lambda k: abs(k - year))]
    return None


def _v1_unsupported(knobs: dict[str, Any]) -> bool:
    """Whether vLLM 0.8-0.10's oracle sends this run to the V0 engine for a stated knob (see the module docstring;
    its device checks are the deployment's, `specs/deployment.py` `v1_refusal`)."""
    steps = _number(knobs.get("num_scheduler_steps"))
    return bool(steps and steps > 1) or "preemption_mode" in knobs or "scheduler_delay_factor" in knobs


def _trtllm_backend(engine_text: str, knobs: dict[str, Any]) -> str | None:
    """The TensorRT-LLM backend a case states: "pytorch", "tensorrt" (the C++ engine flow) or None."""
    stated = str(knobs.get("backend", "")).strip().lower()
    if stated.startswith(("pytorch", "torch")):
        return "pytorch"
    if stated.startswith(("tensorrt", "trt", "cpp")):
        return "tensorrt"
    t = engine_text.lower()
    if "pytorch" in t:
        return "pytorch"
    if "tensorrt engine" in t or "engine backend" in t or "trtllm-build" in t:
        return "tensorrt"
    return None


def _trtllm_version(version: str | None, backend: str | None) -> str | None:
    """The release whose profile prices a TensorRT-LLM run of `version` on `backend` (see the module docstring)."""
    release = get_engine(f"trtllm@{version}" if version else "trtllm")
    if backend is None:
        backend = "pytorch" if release.at_least(_TRTLLM_PYTORCH_DEFAULT_SINCE) else "tensorrt"
    return _TRTLLM_LAST_ENGINE_FLOW if backend == "tensorrt" and release.at_least(_TRTLLM_PYTORCH_SINCE) else version


def _number(v: Any) -> float | None:
    m = re.match(r"\s*([0-9]*\.?[0-9]+)", str(v))
    return float(m.group(1)) if m else None


def _truthy(v: Any) -> bool | None:
    t = str(v).strip().lower()
    if t in ("true", "1", "yes", "on"):
        return True
    if t in ("false", "0", "no", "off"):
        return False
    return None


def case_engine(raw: dict[str, Any], command: str) -> CaseEngine:
    """The engine profile, frontend and stated knobs of one case (a cases-*.jsonl object)."""
    engine_text = str(raw.get("engine") or "")
    version_text = str(raw.get("engine_version") or "")
    knobs_in = raw.get("engine_knobs") or {}
    family = _family(engine_text, str(raw.get("args", {}).get("gpu") or "") or None)
    version = _version(family, engine_text, version_text)
    text = " ".join((engine_text, version_text, str(raw.get("args", {}).get("request_rate", "")),
                     str(knobs_in.get("benchmark", "")), str(knobs_in.get("endpoint", "")))).lower()
    offline = family == "pytorch" or _has(text, _OFFLINE_WORDS)
    if command == "estimate" and not _has(engine_text.lower(), _SERVER_WORDS):
        offline = True
    endpoint = "chat" if ("chat" in str(knobs_in.get("endpoint", "")).lower() or "llmperf" in text
                          or "genai-perf" in text) else "completions"
    if family == "vllm" and _truthy(knobs_in.get("VLLM_USE_V1")) is False and (
            version is None or get_engine(f"vllm@{version}").at_least("0.8")):
        version = _VLLM_LAST_V0  # VLLM_USE_V1=0: the V0 engine, as its last default release ran it
    elif (family == "vllm" and version is not None and _truthy(knobs_in.get("VLLM_USE_V1")) is not True
          and _v1_unsupported(knobs_in)):
        release = get_engine(f"vllm@{version}")
        if release.at_least("0.8") and not release.at_least(_VLLM_V0_REMOVED):
            version = _VLLM_LAST_V0  # the V1 oracle's fallback
    served = family if version is None else f"{family}@{version}"  # the release that ran (its API server)
    if family == "trtllm":
        version = _trtllm_version(version, _trtllm_backend(engine_text, knobs_in))
    spec = family if version is None else f"{family}@{version}"
    eng = get_engine(spec, frontend="none" if offline else "http", endpoint=endpoint)
    if family == "vllm" and _truthy(knobs_in.get("VLLM_USE_V1")):
        eng = replace(eng, fallback="")  # VLLM_USE_V1=1: V1 whatever the oracle would say
    if spec != served and eng.frontend is not None:  # a TensorRT-LLM engine flow behind the release's own server
        # (trtllm-serve's FastAPI frontend from 0.20, whichever backend it drives)
        eng = replace(eng, frontend=get_engine(served, frontend="http", endpoint=endpoint).frontend)
    if (family == "vllm" and eng.frontend is not None and _truthy(knobs_in.get("disable_frontend_multiprocessing"))
            and not eng.at_least("0.8")):
        # V0's --disable-frontend-multiprocessing (0.6-0.7): the API server runs the engine in its own process
        # (AsyncLLMEngine), as before 0.6: one CPU for both (V1 keeps its engine core in a process of its own)
        eng = replace(eng, frontend=replace(eng.frontend, shares_engine_cpu=True))
    if family == "vllm" and _truthy(knobs_in.get("VLLM_USE_FLASHINFER_MOE_MXFP4_MXFP8")):
        # FlashInfer's MXFP4 x MXFP8 MoE on Blackwell, not vLLM's default MXFP4 x BF16 (quantization/mxfp4.py)
        eng = replace(eng, kernels=replace(eng.kernels, mxfp4_activation="fp8"))
    backend = str(knobs_in.get("attention_backend", knobs_in.get("VLLM_ATTENTION_BACKEND", ""))).strip()
    if backend:  # the backend the run names ("fa3 (default)", "FLASH_ATTN (FA3)": its first word)
        try:
            eng = eng.with_attention_backend(backend.split()[0])
        except SpecError:  # a description, not a name the release's switch takes ("FlashAttention-3"): its default
            pass
    if _truthy(knobs_in.get("disable_cuda_graph")) or _truthy(knobs_in.get("enforce_eager")):
        # no CUDA graphs: every step launches eagerly (refused where the profile prices no eager launch)
        eng = eng.eager()
    ubatch = _number(knobs_in.get("n_ubatch"))
    if family == "llamacpp" and ubatch:  # llama.cpp -ub: the most tokens one pass of the model computes
        eng = replace(eng, kernels=replace(eng.kernels, ubatch_tokens=int(ubatch)))
    stated_async = _truthy(knobs_in["async_scheduling"]) if "async_scheduling" in knobs_in else None
    if _truthy(knobs_in.get("disable_overlap_schedule")):  # SGLang's switch for its overlapped scheduler
        stated_async = False
    steps = _number(knobs_in.get("num_scheduler_steps", knobs_in.get("num_continuous_decode_steps")))
    if family == "sglang" and eng.at_least(_SGLANG_DECODE_STEPS_IGNORED):
        steps = None
    if steps and steps > 1:  # vLLM multi-step scheduling, SGLang --num-continuous-decode-steps: one scheduling
        # pass serves `steps` decode steps
        h = eng.host
        eng = replace(eng, host=replace(h, step_s=h.step_s / steps, per_seq_s=h.per_seq_s / steps))
    knobs: dict[str, Any] = {}
    if stated_async is not None:
        # vLLM --async-scheduling (opt-in before 0.14), SGLang --disable-overlap-schedule: the step's host work
        # overlaps the device or adds to it, as the server was told
        knobs["async_scheduling"] = stated_async
    # SGLang --moe-runner-backend flashinfer_trtllm, TensorRT-LLM moe_config backend TRTLLM: the fused trtllm-gen MoE
    # kernels, where they exist (datacenter Blackwell; elsewhere the engine falls back to its others)
    moe = str(knobs_in.get("moe_runner_backend", knobs_in.get("moe_backend", ""))).strip().lower()
    gpu = raw.get("args", {}).get("gpu")
    if moe in ("flashinfer_trtllm", "trtllm") and gpu and get_hardware(str(gpu)).has_trtllm_gen:
        knobs["moe_backend"] = "trtllm"
    # TensorRT-LLM's TRTLLM_ENABLE_PDL=1: kernels launch with programmatic dependent launch where it is priced
    if (_truthy(knobs_in.get("TRTLLM_ENABLE_PDL")) and eng.kernels.has_pdl_switch and gpu
            and get_hardware(str(gpu)).has_pdl):
        knobs["pdl"] = True
    for name, target in _DEPLOYMENT_KNOBS.items():
        v = _number(knobs_in.get(name)) if name in knobs_in else None
        if v is not None:
            knobs[target] = v if target == "gpu_memory_utilization" else int(v)
    slots = _number(knobs_in.get("n_parallel", knobs_in.get("parallel")))
    if family == "llamacpp" and slots and "max_num_seqs" not in knobs:
        knobs["max_num_seqs"] = int(slots)  # llama-server -np: its slots, decoded together (the rest wait for one)
    interval = _number(knobs_in.get("stream_interval"))
    if interval and interval > 1 and eng.frontend is not None and eng.has_stream_interval:
        knobs["stream_interval"] = int(interval)  # the server's --stream-interval (where this release has one)
    mml = _number(knobs_in.get("max_model_len"))
    if mml and any(r.at_least_context or r.chunked_above for r in eng.batch_defaults):
        knobs["max_model_len"] = int(mml)  # the engine's defaults follow the served context (vLLM V0)
    elif mml and "max_num_batched_tokens" not in knobs and not eng.enable_chunked_prefill:
        # no chunking: the budget covers the served context
        knobs["max_num_batched_tokens"] = max(int(mml), 2048)
    prefix = _truthy(knobs_in["enable_prefix_caching"]) if "enable_prefix_caching" in knobs_in else None
    if _truthy(knobs_in.get("disable_radix_cache")):
        prefix = False
    chunked = _truthy(knobs_in["enable_chunked_prefill"]) if "enable_chunked_prefill" in knobs_in else None
    # SGLang's scheduler flags (--max-prefill-tokens, --enable-mixed-chunk, --schedule-policy,
    # --schedule-conservativeness); its chunk size and running cap are the token budget and max_num_seqs above
    sglang: dict[str, Any] = {}
    if _number(knobs_in.get("max_prefill_tokens")) is not None:
        sglang["max_prefill_tokens"] = int(_number(knobs_in["max_prefill_tokens"]) or 0)
    if _truthy(knobs_in.get("enable_mixed_chunk")) is not None:
        sglang["enable_mixed_chunk"] = _truthy(knobs_in["enable_mixed_chunk"])
    if knobs_in.get("schedule_policy") is not None:
        sglang["schedule_policy"] = str(knobs_in["schedule_policy"]).strip().lower()
    if _number(knobs_in.get("schedule_conservativeness")) is not None:
        sglang["schedule_conservativeness"] = _number(knobs_in["schedule_conservativeness"])
    if _number(knobs_in.get("scheduler_recv_interval")) is not None:
        sglang["scheduler_recv_interval"] = max(1, int(_number(knobs_in["scheduler_recv_interval"]) or 1))
    # the client's cap on requests in flight and the rate it sent at (vllm bench serve --max-concurrency C
    # --request-rate R); _number reads no number from "inf" or "none"
    cap = _number(knobs_in.get("max_concurrency", knobs_in.get("max_concurrency_cap")))
    return CaseEngine(engine=eng, knobs=knobs, enable_prefix_caching=prefix, enable_chunked_prefill=chunked,
                      ignore_eos=bool(_truthy(knobs_in.get("ignore_eos"))),
                      rescale_arrivals=_client_rescales(knobs_in, family, version), sglang=sglang,
                      client_cap=int(cap) if cap and cap >= 1 else None,
                      client_rate=_number(knobs_in.get("request_rate")) or None,
                      adp_balance=bool(_truthy(knobs_in.get("attention_dp_enable_balance")))
                      and bool(_truthy(knobs_in.get("enable_attention_dp"))) and bool(eng.adp_balance_iters))


def _client_rescales(knobs: dict[str, Any], family: str, version: str | None) -> bool:
    """Whether the case's client is vLLM's serving benchmark at a release that rescales its Poisson gaps
    (`_VLLM_RESCALED_SINCE`); the client's release is `benchmark_version` where stated, else the server's where
    the server is vLLM."""
    client = str(knobs.get("benchmark", "")).lower()
    if "sglang" in client or not any(w in client for w in _VLLM_CLIENT_WORDS):
        return False  # SGLang's bench_serving (and copies of it) never rescaled
    stated = knobs.get("benchmark_version")
    client_version = str(stated) if stated else (version if family == "vllm" else None)
    if not client_version:
        return False
    return get_engine(f"vllm@{client_version}").at_least(_VLLM_RESCALED_SINCE)


def case_parallelism(knobs: dict[str, Any], tp: int) -> dict[str, int]:
    """tp, dp and ep in flopwise's terms (`specs/deployment.py`) from a case's stated knobs and its tp.
    TensorRT-LLM's `enable_attention_dp` and SGLang's `enable_dp_attention` count every GPU in tp and run one
    attention group per DP rank (dp = their --dp, or tp); vLLM's `data_parallel_size` adds dp groups of tp GPUs,
    and its `enable_expert_parallel` spreads the experts over all of them; `ep` / `ep_size` / `moe_ep_size`
    state the expert-parallel degree."""
    ep = next((int(v) for k in ("ep", "ep_size", "moe_ep_size", "expert_parallel_size")
               if (v := _number(knobs.get(k))) is not None), 1)
    dp = next((int(v) for k in ("dp", "dp_size", "data_parallel_size") if (v := _number(knobs.get(k))) is not None), 1)
    if any(_truthy(knobs.get(k)) for k in ("enable_attention_dp", "enable_dp_attention", "dp_attention")):
        groups = dp if dp > 1 else tp
        return {"tp": max(1, tp // groups), "dp": groups, "ep": ep}
    if _truthy(knobs.get("enable_expert_parallel")):
        ep = tp * dp
    return {"tp": tp, "dp": dp, "ep": ep}


def case_deployment(raw: dict[str, Any], command: str, args: dict[str, Any],
                    **extra: Any) -> tuple[Deployment, CaseEngine]:
    """The deployment a case measured (`args` in flopwise names), served by its engine with its stated knobs;
    `extra` adds deployment keywords (e.g. speculative)."""
    ce = case_engine(raw, command)
    model = get_model(args["model"])
    weights = args.get("weights")
    ckpt = model.checkpoint_weights
    if weights and ckpt and ckpt != weights and ckpt.startswith(weights):
        # "fp8" of a block-scaled fp8 checkpoint, "mxfp4" of gpt-oss's experts-only mxfp4, as the engine's file has it
        weights = ce.engine.file_format(ckpt)
    knobs = raw.get("engine_knobs") or {}
    par = case_parallelism(knobs, int(args.get("tp") or 1))
    # SGLang --dp-size / vLLM --data-parallel-size without DP attention: the replicas are engines behind one server
    server_dp = next((int(v) for k in ("sglang_dp_size", "vllm_data_parallel_size")
                      if (v := _number(knobs.get(k))) is not None), 1)
    num_gpus = args.get("num_gpus")
    if par["dp"] > 1 and model.moe is None:  # a dense model's DP ranks are whole replicas behind the one server
        server_dp, par = par["dp"], {"tp": par["tp"], "dp": 1, "ep": 1}
        num_gpus = num_gpus or par["tp"] * server_dp
    # vLLM's --api-server-count, SGLang's --tokenizer-worker-num, where stated (and the release has the flag)
    api = next((n for k in ("api_server_count", "tokenizer_worker_num") if (n := _number(knobs.get(k))) is not None),
               None)
    api_servers = int(api) if api and api >= 1 and ce.engine.launch.table("flags").get("api_servers") else None
    dep = build_deployment(model, args["gpu"], tp=par["tp"], pp=int(args.get("pp") or 1), dp=par["dp"], ep=par["ep"],
                           num_gpus=num_gpus,
                           replicas_per_server=server_dp if par["dp"] == 1 else 1, api_servers=api_servers,
                           weights=weights, kv=args.get("kv"), engine=ce.engine, **ce.knobs, **extra)
    pool = _number(knobs.get("kv_cache_tokens"))
    gib = _number(knobs.get("kv_cache_gib_available"))
    if pool or gib:  # the KV pool the run's own log reports (tokens each GPU of a replica holds, or vLLM's 'Available
        # KV cache memory' in GiB per GPU), the outcome of its stated memory fraction: the fraction that gives it
        # here, where that is one the engine could take
        plan = memory_plan(dep)
        f = memory_fraction_for_pool(dep, pool / dep.block_size * plan.block_bytes if pool else (gib or 0) * 2**30)
        if 0 < f <= 1:
            dep = replace(dep, gpu_memory_utilization=f)
    return dep, ce
