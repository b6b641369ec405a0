"""A Deployment from names: the one resolver every layer uses (the API's `flopwise.deployment` wraps it with
argument checks). A model is a catalog id, alias, config path or ModelSpec; a GPU an id or HardwareSpec; an
engine `family[@version]` text or an EngineProfile; knobs left None take the engine's defaults for the device
(`make_deployment`)."""

from __future__ import annotations

from os import PathLike

from flopwise.specs.defaults import DEFAULT_ENDPOINT, DEFAULT_ENGINE, DEFAULT_GPU, DEFAULT_MODEL, FRONTEND_SERVING
from flopwise.specs.deployment import Deployment, make_deployment
from flopwise.specs.engine import EngineProfile, get_engine
from flopwise.specs.hardware import HardwareSpec, get_hardware
from flopwise.specs.model import ModelSpec
from flopwise.specs.model_catalog import get_model
from flopwise.specs.speculative import SpeculativeSpec, parse_speculative

__all__ = ["build_deployment", "engine_profile"]

Path_ = str | PathLike[str]


def engine_profile(engine: str | EngineProfile = DEFAULT_ENGINE, frontend: str = FRONTEND_SERVING,
                   endpoint: str = DEFAULT_ENDPOINT, engine_file: Path_ | None = None) -> EngineProfile:
    """An engine profile from `family[@version]` text (or a profile, returned as given); `engine_file`: a
    calibrated override (`flopwise calibrate --engine-out`)."""
    if isinstance(engine, EngineProfile):
        return engine
    return get_engine(engine, frontend=frontend, endpoint=endpoint,
                      engine_file=str(engine_file) if engine_file is not None else None)


def build_deployment(model: str | ModelSpec = DEFAULT_MODEL, gpu: str | HardwareSpec = DEFAULT_GPU, *,
                     tp: int = 1, pp: int = 1, num_gpus: int | None = None, replicas_per_server: int = 1,
                     weights: str | None = None,
                     dp: int | None = None, ep: int = 1, nodes: int | None = None, expert_skew: float | None = None,
                     two_batch_overlap: bool = False,
                     kv: str | None = None, hardware_file: Path_ | None = None,
                     speculative: SpeculativeSpec | str | None = None, family: str | None = None,
                     engine: str | EngineProfile = DEFAULT_ENGINE, frontend: str = FRONTEND_SERVING,
                     endpoint: str = DEFAULT_ENDPOINT, engine_file: Path_ | None = None,
                     max_num_seqs: int | None = None, max_num_batched_tokens: int | None = None,
                     block_size: int | None = None, gpu_memory_utilization: float | None = None,
                     enforce_eager: bool = False, cuda_graph_max_bs: int | None = None,
                     async_scheduling: bool | None = None, moe_backend: str | None = None,
                     attention_backend: str | None = None, pdl: bool = False, api_servers: int | None = None,
                     stream_interval: int | None = None, max_model_len: int | None = None) -> Deployment:
    """See the module docstring and `flopwise.deployment`. `enforce_eager`: the engine without CUDA graphs
    (`EngineProfile.eager`); `cuda_graph_max_bs`: the largest decode batch captured in a graph (SGLang
    --cuda-graph-max-bs, vLLM --max-cudagraph-capture-size; None: the engine's default for the device);
    `async_scheduling`: host work overlapping the device (vLLM --async-scheduling; None: the engine's default);
    `moe_backend`: "trtllm" for TensorRT-LLM's fused MoE kernels (SGLang --moe-runner-backend flashinfer_trtllm);
    `attention_backend`: the attention kernels the engine is told to run (`EngineProfile.with_attention_backend`;
    None or "auto": the release's own choice);
    `pdl`: programmatic dependent launch on (TensorRT-LLM's TRTLLM_ENABLE_PDL=1); `replicas_per_server`: that many
    of the num_gpus / (tp*dp*pp) replicas run as data-parallel engines behind one server; `api_servers`: that
    server's API processes (vLLM --api-server-count; None: the engine's default); `stream_interval`: output tokens
    per streamed event after the first (--stream-interval; None: every token); `max_model_len`: the served context
    (--max-model-len; None: the model's)."""
    m = model if isinstance(model, ModelSpec) else get_model(model, family)
    hw = gpu if isinstance(gpu, HardwareSpec) else get_hardware(gpu, hardware_file)
    spec = parse_speculative(speculative) if isinstance(speculative, str) else speculative
    if dp is None:  # expert parallelism wider than the TP group implies that many data-parallel attention groups
        dp = ep // tp if isinstance(tp, int) and isinstance(ep, int) and 0 < tp < ep and ep % tp == 0 else 1
    eng = engine_profile(engine, frontend, endpoint, engine_file)
    if attention_backend is not None:
        eng = eng.with_attention_backend(attention_backend)
    return make_deployment(m, hw, weights=weights, kv=kv, tp=tp, pp=pp, dp=dp, ep=ep, nodes=nodes,
                           expert_skew=expert_skew, two_batch_overlap=two_batch_overlap,
                           num_gpus=num_gpus, replicas_per_server=replicas_per_server, speculative=spec,
                           engine=eng.eager() if enforce_eager else eng, max_num_seqs=max_num_seqs,
                           max_num_batched_tokens=max_num_batched_tokens, block_size=block_size,
                           gpu_memory_utilization=gpu_memory_utilization, cuda_graph_max_bs=cuda_graph_max_bs,
                           async_scheduling=async_scheduling, moe_backend=moe_backend, pdl=pdl,
                           api_servers=api_servers, stream_interval=stream_interval, max_model_len=max_model_len)
