"""flopwise: what a model, hardware, workload and latency target will give you, and where the bottleneck is.

    import flopwise
    r = flopwise.estimate("llama-3.1-8b", "h100-sxm", batch=32)
    s = flopwise.simulate("llama-3.1-8b", "h100-sxm", request_rate=4, num_requests=500, workload="chat")
    s.to_pandas()                       # one row per request (pandas: pip install 'flopwise[pandas]')

Every command of the CLI is a function here with the same parameters (`flopwise.api`); results are typed and
frozen, with `to_dict()` equal to the command's `--json`. Bad input raises `flopwise.FlopwiseError` (one line).

Names are imported on first use (PEP 562), so `import flopwise` and the CLI's start-up stay fast.
"""

from __future__ import annotations

import importlib
import sys
import types
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

# name -> module that defines it
_EXPORTS = {
    "estimate": "flopwise.api", "simulate": "flopwise.api", "compare": "flopwise.api", "explain": "flopwise.api",
    "plan": "flopwise.api", "bench": "flopwise.api", "bench_async": "flopwise.api", "calibrate": "flopwise.api",
    "deployment": "flopwise.api",
    "Estimate": "flopwise.estimate", "Simulation": "flopwise.results", "Plan": "flopwise.results",
    "BenchRun": "flopwise.results", "Calibrated": "flopwise.results",
    "Ledger": "flopwise.techniques.ledger", "Explanation": "flopwise.techniques.explain",
    "Deployment": "flopwise.specs.deployment", "HardwareSpec": "flopwise.specs.hardware",
    "ModelSpec": "flopwise.specs.model", "get_model": "flopwise.specs.model_catalog",
    "get_hardware": "flopwise.specs.hardware",
    "FlopwiseError": "flopwise.errors", "ArgumentError": "flopwise.errors",
    "FlopwiseWarning": "flopwise.errors",
}

__all__ = ["estimate", "simulate", "compare", "explain", "plan", "bench", "bench_async", "calibrate", "deployment",
           "Estimate", "Simulation", "Plan", "BenchRun", "Calibrated", "Ledger", "Explanation", "Deployment",
           "HardwareSpec", "ModelSpec", "get_model", "get_hardware", "FlopwiseError", "ArgumentError",
           "FlopwiseWarning", "__version__"]

if TYPE_CHECKING:
    from flopwise.api import bench, bench_async, calibrate, compare, deployment, estimate, explain, plan, simulate
    from flopwise.errors import ArgumentError, FlopwiseError, FlopwiseWarning
    from flopwise.estimate import Estimate
    from flopwise.results import BenchRun, Calibrated, Plan, Simulation
    from flopwise.specs.deployment import Deployment
    from flopwise.specs.hardware import HardwareSpec, get_hardware
    from flopwise.specs.model import ModelSpec
    from flopwise.specs.model_catalog import get_model
    from flopwise.techniques.explain import Explanation
    from flopwise.techniques.ledger import Ledger


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'flopwise' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)


class _Package(types.ModuleType):
    """`flopwise.estimate` is the function, and `flopwise/estimate.py` a module of the same name: importing the
    module binds it as an attribute of the package, which would hide the function. The package keeps its exported
    names (the module stays importable: `from flopwise.estimate import Estimate`)."""

    def __setattr__(self, name: str, value: Any) -> None:
        if name in _EXPORTS and isinstance(value, types.ModuleType):
            return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package
