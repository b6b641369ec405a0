"""What a machine was measured doing: one timed kernel (`KernelPoint`, from `flopwise profile`'s
microbenchmarks) and one timed engine step (`StepPoint`, from its model steps or a bench replay). Records only:
`profile/` produces them, `calibrate/` fits the cost model to them (`calibrate/observations.py` predicts them).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from flopwise.cost.batch import BatchShape
from flopwise.specs.deployment import Deployment

__all__ = ["KernelPoint", "StepPoint"]


@dataclass(frozen=True, slots=True, kw_only=True)
class KernelPoint:
    """One timed kernel. `kind`: gemm | copy | attention. `m`: GEMM rows (attention: query rows per KV head),
    bytes split as the cost model splits them (weights, KV cache, activations), `seconds`: the median time.
    `shape` records the sizes that were run (for the hardware file and reports)."""

    kind: str
    dtype: str
    flops: float
    m: float
    weight_bytes: float
    kv_bytes: float
    act_bytes: float
    kernels: int
    seconds: float
    shape: dict[str, Any]

    @property
    def label(self) -> str:
        return f"{self.kind} {self.dtype}" if self.kind != "copy" else "copy"

    @property
    def desc(self) -> str:
        return f"{self.kind} {self.dtype} " + " ".join(f"{k}={v}" for k, v in self.shape.items())

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "dtype": self.dtype, "flops": self.flops, "m": self.m,
                "weight_bytes": self.weight_bytes, "kv_bytes": self.kv_bytes, "act_bytes": self.act_bytes,
                "kernels": self.kernels, "seconds": self.seconds, "shape": dict(self.shape)}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> KernelPoint:
        return cls(kind=str(d["kind"]), dtype=str(d["dtype"]), flops=float(d["flops"]), m=float(d["m"]),
                   weight_bytes=float(d["weight_bytes"]), kv_bytes=float(d["kv_bytes"]),
                   act_bytes=float(d["act_bytes"]), kernels=int(d["kernels"]), seconds=float(d["seconds"]),
                   shape=dict(d.get("shape", {})))


@dataclass(frozen=True, slots=True, kw_only=True)
class StepPoint:
    """One timed engine step: `dep` (its hardware's efficiency is replaced when predicting) on `shape`; for
    a uniform step (every sequence alike) `batch` sequences of `new_tokens` after `context` cached ones."""

    dep: Deployment
    shape: BatchShape
    seconds: float
    label: str  # "prefill" or "decode"
    desc: str
    batch: int = 0
    new_tokens: int = 0
    context: int = 0
