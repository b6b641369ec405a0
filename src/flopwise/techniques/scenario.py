"""What a technique transforms: a deployment plus the request shape it serves.

A `Scenario` is a `Deployment` (model, hardware, parallelism, formats, engine knobs) with a static batch of
`batch` equal requests of `input_len` prompt and `output_len` generated tokens, and the one technique that is
a property of the traffic rather than of the deployment: a prefix-cache hit ratio. Speculative decoding is a
deployment setting (`Deployment.speculative`), read here as `speculation`. Every technique is a function
Scenario -> Scenario; nothing is mutated (`dataclasses.replace`).

`rebuild` changes a deployment through `make_deployment`, so a transformed deployment is validated exactly as
one built from the command line (a KV format wider than the activations, a TP degree that does not divide the
heads, ...), and every engine knob is carried over.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from flopwise.cost.batch import check_static_batch
from flopwise.errors import WorkloadError
from flopwise.specs.defaults import DEFAULT_INPUT_LEN, DEFAULT_OUTPUT_LEN
from flopwise.specs.deployment import Deployment, make_deployment
from flopwise.specs.speculative import SpeculativeSpec

__all__ = ["Scenario", "rebuild"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Scenario:
    deployment: Deployment
    input_len: int = DEFAULT_INPUT_LEN
    output_len: int = DEFAULT_OUTPUT_LEN
    batch: int = 1
    prefix_hit: float = 0.0  # share of each prompt served from the prefix cache (see prefix_cache.py)

    def __post_init__(self) -> None:
        check_static_batch(self.batch, self.input_len, self.output_len)
        if not 0.0 <= self.prefix_hit <= 1.0:
            raise WorkloadError(f"the prefix-cache hit ratio must be in [0, 1], got {self.prefix_hit:g}")
        self.deployment.model.check_context(self.input_len + self.output_len, "shorten --input-len / --output-len")

    @property
    def dep(self) -> Deployment:
        return self.deployment

    @property
    def speculation(self) -> SpeculativeSpec | None:
        return self.deployment.speculative

    def with_deployment(self, dep: Deployment) -> Scenario:
        return replace(self, deployment=dep)


def rebuild(dep: Deployment, **changes: Any) -> Deployment:
    """`dep` with some fields changed (model, hardware, weights/kv by name, tp, pp, engine knobs), validated
    by `make_deployment` like any deployment built from names. Its data-parallel attention, expert parallelism,
    expert skew and two-batch overlap carry over; a new tp, pp, dp or GPU spans the servers its GPUs fill
    (`HardwareSpec.servers_for`), else the replica keeps its own."""
    fields: dict[str, Any] = {
        "model": dep.model, "hardware": dep.hardware, "weights": dep.weights.name, "kv": dep.kv.name,
        "tp": dep.tp, "pp": dep.pp, "dp": dep.dp, "ep": dep.ep, "nodes": dep.nodes, "expert_skew": dep.expert_skew,
        "two_batch_overlap": dep.two_batch_overlap,
        "replicas": dep.replicas, "replicas_per_server": dep.replicas_per_server,
        "gpu_memory_utilization": dep.gpu_memory_utilization, "block_size": dep.block_size,
        # a knob the engine's offline benchmark picks stays its pick (None: make_deployment leaves it to it)
        "max_num_seqs": None if "max_num_seqs" in dep.bench_knobs else dep.max_num_seqs,
        "max_num_batched_tokens": None if "max_num_batched_tokens" in dep.bench_knobs else dep.max_num_batched_tokens,
        "speculative": dep.speculative, "engine": dep.engine,
    }
    unknown = set(changes) - set(fields)
    if unknown:
        raise TypeError(f"rebuild() got unknown fields {sorted(unknown)}")
    fields.update(changes)
    model, hardware = fields.pop("model"), fields.pop("hardware")
    if "nodes" not in changes and {"tp", "pp", "dp", "hardware"} & set(changes):
        fields["nodes"] = None
    return make_deployment(model, hardware, **fields)
