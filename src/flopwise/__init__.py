"""flopwise: what a model, hardware, workload and latency target will give you, and where the bottleneck is."""

from flopwise.api import deployment, estimate
from flopwise.errors import FlopwiseError
from flopwise.estimate import Estimate
from flopwise.specs.deployment import Deployment
from flopwise.specs.hardware import HardwareSpec, get_hardware
from flopwise.specs.model import ModelSpec
from flopwise.specs.model_catalog import get_model

__version__ = "0.1.0"
__all__ = ["estimate", "deployment", "Estimate", "Deployment", "HardwareSpec", "ModelSpec", "get_model",
           "get_hardware", "FlopwiseError", "__version__"]
