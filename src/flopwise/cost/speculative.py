"""The time of one speculative-decoding round: the one implementation the techniques and the simulator share.

A round serves every decoding sequence of a batch with k proposals and one verification (`specs/speculative.py`
for the method and the acceptance model). From the step cost function, never re-derived here:

    round_s = sum_{j < passes} step(proposer, pass j)          passes = k (draft, eagle, mtp), 1 (medusa), 0 (ngram)
              + step(target, each decoding sequence verifying P = k + 1 (or the tree's width) new tokens, P logits)

Pass j proposes one token per decoding sequence at context c + j. In the simulator the first pass also runs
the step's prompt chunks through the proposer (a draft model keeps its own KV cache of the prompt; an EAGLE head
reads the target's features of every token), which is the draft prefill the ledger adds to TTFT.

Proposers (`proposer_deployment`):
- `draft`: a separate model on the target's GPUs, reading its own weights every pass. It keeps the target's TP
  degree where its heads divide by it (vLLM's default draft_tensor_parallel_size), else runs unsharded, in 16-bit
  with the target's KV format.
- `eagle` / `mtp`: one decoder layer plus the target's LM head, modelled as a one-layer copy of the target (a
  full-attention layer where the model has any).
- `medusa`: k heads that all read the target's last hidden state, so they run once per round, in parallel (each
  real head is a ResBlock plus its own LM head: k * (h^2 + h*V) weights, vs the one-layer head's ~12 h^2 + h*V;
  close at 7B scale, e.g. 0.74 vs 0.33 G parameters for Vicuna-7B with k = 5, both small next to the target's
  6.7 G); costed as one pass of the one-layer head.
- `ngram`: prompt lookup, no model: None.

Because the verify step carries P x batch tokens, it turns compute-bound as the batch grows: past some batch the
P positions cost more than the E[tokens] plain decode steps they replace, and speculation stops paying.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import TypeVar

from flopwise.cost.attention import Span
from flopwise.cost.batch import BatchShape, batch_shape, decode_shape
from flopwise.cost.layout import layout
from flopwise.cost.step import StepCost, step_cost, step_time
from flopwise.specs.deployment import Deployment, make_deployment
from flopwise.specs.model import ModelSpec
from flopwise.specs.precision import default16
from flopwise.specs.speculative import HEAD_METHODS, SpeculativeSpec

__all__ = ["proposer_deployment", "draft_passes", "verify_shape", "round_time_s", "SpecRound", "spec_round"]


def _one_layer(model: ModelSpec, method: str) -> ModelSpec:
    """The target with one decoder layer (one that attends every token where the model has any: full, MLA or
    sparse, not a window, chunk or linear state): an EAGLE head takes the first such layer (dense where the model
    has dense layers), an MTP module the last (DeepSeek-V3's and GLM-4.5's MTP block is a full decoder layer with
    the model's MoE, as its last layers are: config num_nextn_predict_layers)."""
    full = [lay for lay in model.layers if lay.attention.kind in ("full", "mla",
                                                                  "sparse") and not lay.attention.shares_kv]
    pick = (full or model.layers)[-1 if method == "mtp" else 0]
    return model.with_layers((pick,), f"{model.name} (1-layer head)")


@lru_cache(maxsize=256)
def proposer_deployment(dep: Deployment, spec: SpeculativeSpec) -> Deployment | None:
    """What runs the proposer passes, on the target's GPUs (itself plain: no speculation of its own); None for
    n-gram lookup (no model). Cached: the simulator asks every step."""
    if spec.method == "ngram":
        return None
    if spec.method in HEAD_METHODS:
        return replace(dep, model=_one_layer(dep.model, spec.method), speculative=None)
    assert spec.draft_model is not None
    d = spec.draft_model
    tp = dep.tp if d.mla is not None or d.num_heads % dep.tp == 0 else 1
    half = default16(dep.hardware)
    kv = dep.kv.name if dep.kv.bytes_per_element <= 2 else half
    return make_deployment(d, dep.hardware, weights=half, kv=kv, tp=tp,
                           block_size=dep.block_size, gpu_memory_utilization=dep.gpu_memory_utilization)


def draft_passes(spec: SpeculativeSpec) -> int:
    """Proposer passes per round, one after another: k, 1 for Medusa's parallel heads, 0 for n-gram lookup."""
    return 0 if spec.method == "ngram" else 1 if spec.method == "medusa" else spec.k


def verify_shape(batch: int, context: int, positions: int, windows: tuple[Span, ...],
                 expand: bool = False) -> BatchShape:
    """`batch` sequences at `context` cached tokens each verifying `positions` new tokens (all logits); `expand`:
    as `positions` single-token decode rows per sequence at contexts context .. context + positions - 1, each
    reading its own context (`EngineProfile.expands_verify`: vLLM V0's batch-expansion scorer)."""
    if expand:
        return batch_shape([(1, context + j) for j in range(positions)] * batch, windows)
    return batch_shape([(positions, context)] * batch, windows, num_logits=batch * positions)


DraftPass = Callable[[int], BatchShape | None]  # the proposer's batch in pass j (None: nothing to propose)
_Price = TypeVar("_Price", float, StepCost)  # what a step is priced as: seconds (step_time) or a StepCost


def _priced(dep: Deployment, spec: SpeculativeSpec, verify: BatchShape, draft_pass: DraftPass,
            price: Callable[[Deployment, BatchShape], _Price]) -> list[_Price]:
    """The round's steps, each priced by `price` (step_time or step_cost): [verify, pass 0, pass 1, ...]."""
    prop = proposer_deployment(dep, spec)
    steps = [price(dep, verify)]
    if prop is not None:
        for j in range(draft_passes(spec)):
            shape = draft_pass(j)
            if shape is not None:
                steps.append(price(prop, shape))
    return steps


def round_time_s(dep: Deployment, spec: SpeculativeSpec, verify: BatchShape, draft_pass: DraftPass) -> float:
    """Seconds of one round: the target's `verify` step plus the proposer's passes, `draft_pass(j)` being the
    proposer's batch in pass j (fast path: no breakdown)."""
    verify_s, *drafts = _priced(dep, spec, verify, draft_pass, step_time)
    return sum(drafts) + verify_s  # the order of SpecRound.time_s: the same float for the same round


@dataclass(frozen=True, slots=True, kw_only=True)
class SpecRound:
    """One speculative round of `batch` sequences at `context` cached tokens, next to one plain decode step.
    FLOPs are totals over the GPUs of one replica."""

    batch: int
    context: int
    k: int
    tokens_per_step: float
    draft_s: float
    verify_s: float
    draft_flops: float
    verify_flops: float
    baseline_s: float  # one plain decode step of the same batch
    baseline_flops: float

    @property
    def time_s(self) -> float:
        return self.draft_s + self.verify_s

    @property
    def flops(self) -> float:
        return self.draft_flops + self.verify_flops

    @property
    def time_per_token_s(self) -> float:
        return self.time_s / self.tokens_per_step

    @property
    def speedup(self) -> float:
        return self.baseline_s / self.time_per_token_s

    @property
    def flops_per_token(self) -> float:
        return self.flops / (self.batch * self.tokens_per_step)

    @property
    def baseline_flops_per_token(self) -> float:
        return self.baseline_flops / self.batch


def spec_round(dep: Deployment, spec: SpeculativeSpec, batch: int, context: int) -> SpecRound:
    """The round of `batch` equal sequences at `context`, with its breakdown (same steps as `round_time_s`)."""
    windows = layout(dep).windows
    verify = verify_shape(batch, context, spec.positions, windows, dep.engine.expands_verify)
    prop = proposer_deployment(dep, spec)
    prop_windows = layout(prop).windows if prop is not None else windows
    v, *drafts = _priced(dep, spec, verify, lambda j: decode_shape(batch, context + j, prop_windows), step_cost)
    base = step_cost(dep, decode_shape(batch, context, windows))
    tp = prop.tp if prop is not None else 1
    return SpecRound(batch=batch, context=context, k=spec.k, tokens_per_step=spec.tokens_per_step,
                     draft_s=sum(d.time_s for d in drafts), verify_s=v.time_s,
                     draft_flops=sum(d.flops for d in drafts) * tp, verify_flops=v.flops * dep.tp,
                     baseline_s=base.time_s, baseline_flops=base.flops * dep.tp)
