"""The library's front door: build a deployment from names and estimate it."""

from __future__ import annotations

from pathlib import Path

from flopwise.estimate import Estimate, estimate_deployment
from flopwise.specs.defaults import (DEFAULT_ENDPOINT, DEFAULT_ENGINE, DEFAULT_GPU, DEFAULT_INPUT_LEN, DEFAULT_MODEL,
                                     DEFAULT_OUTPUT_LEN, FRONTEND_ESTIMATE, FRONTEND_SERVING)
from flopwise.specs.deployment import Deployment, make_deployment
from flopwise.specs.engine import EngineProfile, get_engine
from flopwise.specs.hardware import HardwareSpec, get_hardware
from flopwise.specs.model import ModelSpec
from flopwise.specs.model_catalog import get_model
from flopwise.specs.speculative import SpeculativeSpec, parse_speculative

__all__ = ["deployment", "estimate", "engine_profile", "DEFAULT_MODEL", "DEFAULT_GPU", "DEFAULT_ENGINE"]


def engine_profile(engine: str | EngineProfile = DEFAULT_ENGINE, frontend: str = FRONTEND_SERVING,
                   endpoint: str = DEFAULT_ENDPOINT, engine_file: str | Path | None = None) -> EngineProfile:
    """An engine profile from `family[@version]` text (or a profile, returned as given); `engine_file`: a
    calibrated override (`flopwise calibrate --engine-out`)."""
    if isinstance(engine, EngineProfile):
        return engine
    return get_engine(engine, frontend=frontend, endpoint=endpoint,
                      engine_file=str(engine_file) if engine_file is not None else None)


def deployment(model: str | ModelSpec = DEFAULT_MODEL, gpu: str | HardwareSpec = DEFAULT_GPU, *,
               tp: int = 1, pp: int = 1, num_gpus: int | None = None, weights: str | None = None,
               kv: str | None = None, hardware_file: str | Path | None = None,
               speculative: SpeculativeSpec | str | None = None, family: str | None = None,
               engine: str | EngineProfile = DEFAULT_ENGINE, frontend: str = FRONTEND_SERVING,
               endpoint: str = DEFAULT_ENDPOINT, engine_file: str | Path | None = None,
               max_num_seqs: int | None = None, max_num_batched_tokens: int | None = None,
               block_size: int | None = None, gpu_memory_utilization: float | None = None) -> Deployment:
    """A Deployment from a model (catalog id, alias, config path, or ModelSpec) and a GPU (id or spec), served
    by `engine` ("vllm", "sglang@0.4", "trtllm@0.17", "llamacpp", or a profile) behind its HTTP server
    (`frontend="http"`) or offline ("none"). Knobs left None take the engine's defaults.
    `speculative`: a SpeculativeSpec or its text form, e.g. "eagle,k=3,accepted=2.6" (see
    `specs/speculative.py`); None or "none": plain decoding. `family`: read a config file with that registered
    family's reader (the model's notes then say the mapping is assumed). `weights` None: the checkpoint's own
    format (its quantization_config), else 16-bit."""
    m = model if isinstance(model, ModelSpec) else get_model(model, family)
    hw = gpu if isinstance(gpu, HardwareSpec) else get_hardware(gpu, hardware_file)
    spec = parse_speculative(speculative) if isinstance(speculative, str) else speculative
    return make_deployment(m, hw, weights=weights, kv=kv, tp=tp, pp=pp, num_gpus=num_gpus, speculative=spec,
                           engine=engine_profile(engine, frontend, endpoint, engine_file), max_num_seqs=max_num_seqs,
                           max_num_batched_tokens=max_num_batched_tokens, block_size=block_size,
                           gpu_memory_utilization=gpu_memory_utilization)


def estimate(model: str | ModelSpec = DEFAULT_MODEL, gpu: str | HardwareSpec = DEFAULT_GPU, *,
             batch: int = 1, input_len: int = DEFAULT_INPUT_LEN, output_len: int = DEFAULT_OUTPUT_LEN,
             tp: int = 1, pp: int = 1, num_gpus: int | None = None, weights: str | None = None,
             kv: str | None = None, gpu_memory_utilization: float | None = None,
             hardware_file: str | Path | None = None, family: str | None = None,
             engine: str | EngineProfile = DEFAULT_ENGINE, frontend: str = FRONTEND_ESTIMATE,
             endpoint: str = DEFAULT_ENDPOINT, engine_file: str | Path | None = None) -> Estimate:
    """Static-batch estimate of `batch` requests of `input_len` prompt and `output_len` generated tokens, as
    `engine`'s offline benchmark sees it (`frontend="http"` adds its API server).

    >>> r = estimate("llama-3.1-8b", "h100-sxm", batch=32)      # doctest: +SKIP
    >>> r.ttft_ms, r.tpot_ms, r.output_tokens_per_s               # doctest: +SKIP
    """
    dep = deployment(model, gpu, tp=tp, pp=pp, num_gpus=num_gpus, weights=weights, kv=kv,
                     hardware_file=hardware_file, gpu_memory_utilization=gpu_memory_utilization, family=family,
                     engine=engine, frontend=frontend, endpoint=endpoint, engine_file=engine_file)
    return estimate_deployment(dep, batch=batch, input_len=input_len, output_len=output_len)
