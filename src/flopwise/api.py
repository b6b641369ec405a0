"""The library's front door: build a deployment from names and estimate it."""

from __future__ import annotations

from pathlib import Path

from flopwise.estimate import Estimate, estimate_deployment
from flopwise.specs.deployment import Deployment, make_deployment
from flopwise.specs.hardware import HardwareSpec, get_hardware
from flopwise.specs.model import ModelSpec
from flopwise.specs.model_catalog import get_model
from flopwise.specs.speculative import SpeculativeSpec, parse_speculative

__all__ = ["deployment", "estimate", "DEFAULT_MODEL", "DEFAULT_GPU"]

DEFAULT_MODEL = "meta-llama/Llama-3.1-8B"
DEFAULT_GPU = "h100-sxm"


def deployment(model: str | ModelSpec = DEFAULT_MODEL, gpu: str | HardwareSpec = DEFAULT_GPU, *,
               tp: int = 1, pp: int = 1, num_gpus: int | None = None, weights: str | None = None,
               kv: str | None = None, hardware_file: str | Path | None = None,
               speculative: SpeculativeSpec | str | None = None, family: str | None = None,
               **knobs: int | float) -> Deployment:
    """A Deployment from a model (catalog id, alias, config path, or ModelSpec) and a GPU (id or spec).
    `speculative`: a SpeculativeSpec or its text form, e.g. "eagle,k=3,accepted=2.6" (see
    `specs/speculative.py`); None or "none": plain decoding. `family`: read a config file with that registered
    family's reader (the model's notes then say the mapping is assumed). `weights` None: the checkpoint's own
    format (its quantization_config), else 16-bit."""
    m = model if isinstance(model, ModelSpec) else get_model(model, family)
    hw = gpu if isinstance(gpu, HardwareSpec) else get_hardware(gpu, hardware_file)
    spec = parse_speculative(speculative) if isinstance(speculative, str) else speculative
    return make_deployment(m, hw, weights=weights, kv=kv, tp=tp, pp=pp, num_gpus=num_gpus, speculative=spec,
                           **knobs)


def estimate(model: str | ModelSpec = DEFAULT_MODEL, gpu: str | HardwareSpec = DEFAULT_GPU, *,
             batch: int = 1, input_len: int = 1024, output_len: int = 256, tp: int = 1, pp: int = 1,
             num_gpus: int | None = None, weights: str | None = None, kv: str | None = None,
             gpu_memory_utilization: float = 0.9, hardware_file: str | Path | None = None,
             family: str | None = None) -> Estimate:
    """Static-batch estimate of `batch` requests of `input_len` prompt and `output_len` generated tokens.

    >>> r = estimate("llama-3.1-8b", "h100-sxm", batch=32)      # doctest: +SKIP
    >>> r.ttft_ms, r.tpot_ms, r.output_tokens_per_s               # doctest: +SKIP
    """
    dep = deployment(model, gpu, tp=tp, pp=pp, num_gpus=num_gpus, weights=weights, kv=kv,
                     hardware_file=hardware_file, gpu_memory_utilization=gpu_memory_utilization, family=family)
    return estimate_deployment(dep, batch=batch, input_len=input_len, output_len=output_len)
