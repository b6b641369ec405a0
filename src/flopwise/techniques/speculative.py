"""Speculative decoding: k cheap guesses, one expensive check.

Each round, a proposer guesses `k` tokens per sequence; the target model then runs ONE step over the k+1
positions (the last accepted token and the k guesses) and keeps the longest agreeing prefix plus one token of
its own (Leviathan et al. 2023, "Fast Inference from Transformers via Speculative Decoding"; Chen et al. 2023,
"Accelerating Large Language Model Decoding with Speculative Sampling"). With an i.i.d. per-token acceptance
rate alpha, the expected tokens per target step (Leviathan et al. 2023, eq. 1; the bonus token counts, so it is
not capped at k):

    E[tokens] = (1 - alpha^(k+1)) / (1 - alpha)          alpha -> 1: k + 1;   alpha = 0: 1

Measured speeds usually quote the mean accepted tokens per step (Spec-Bench's tau, EAGLE's "average acceptance
length"), which is E[tokens] itself: give it instead of alpha.

One round costs, from the cost model (never re-derived here):

    round_s = sum_{j<k} step(proposer, batch x 1 token, context + j)          (Medusa: j = 0 only)
              + step(target, batch x (k+1) new tokens on context, k+1 logits each)

    speculative TPOT = round_s / E[tokens];      speedup = baseline TPOT / speculative TPOT

Proposers:
- `draft`: a separate (smaller) model on the same GPUs, reading its own weights every draft step (vLLM's
  draft-model speculation; Spec-Bench "SpS").
- `eagle` / `mtp`: a one-layer head on the target's features (EAGLE, Li et al. 2024; DeepSeek-V3 multi-token
  prediction): per draft step, one decoder layer plus the target's LM head, modelled as a one-layer copy of
  the target.
- `medusa`: k extra heads (Cai et al. 2024) that all read the target's last hidden state, so they run once
  per round, in parallel, not k times in sequence: one pass of the one-layer head per round. (Each real head
  is a ResBlock plus its own LM head: k * (h^2 + h*V) weights, vs the one-layer head's ~12 h^2 + h*V; close at
  7B scale, e.g. 0.74 vs 0.33 G parameters for Vicuna-7B with k = 5, both small next to the target's 6.7 G.)
- `ngram`: prompt lookup (n-gram matching in the context, Saxena 2023; vLLM `[ngram]`): no draft cost.

Tree drafts (EAGLE, Medusa) verify more than k+1 positions: `verify_tokens` sets that width (EAGLE-1's
default tree `mc_sim_7b_63` has 25 nodes plus the root, i.e. 26 positions).

Because the verify step carries (k+1) x batch tokens, it turns compute-bound as the batch grows: past some
batch the k+1 positions cost more than the E[tokens] decode steps they replace, and speculation stops paying
(`breakeven_batch`). Memory: a draft model's weights and its own KV cache share the GPU with the target, and
each sequence reserves k look-ahead KV slots (`memory_overhead`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from flopwise.cost.batch import batch_shape, decode_shape
from flopwise.cost.layout import layout
from flopwise.cost.memory import kv_bytes_for_sequences
from flopwise.cost.step import step_cost
from flopwise.errors import SpecError
from flopwise.specs.deployment import Deployment, make_deployment
from flopwise.specs.model import ModelSpec
from flopwise.techniques.scenario import Scenario

__all__ = ["METHODS", "Speculation", "SpecRound", "SpecMemory", "expected_tokens", "acceptance_rate",
           "with_speculation", "proposer_deployment", "spec_round", "spec_tpot_s", "best_k", "breakeven_batch", "memory_overhead"]

METHODS = ("draft", "eagle", "mtp", "medusa", "ngram")
HEAD_METHODS = ("eagle", "mtp", "medusa")
K_MAX = 10
_EPS = 1e-12


def expected_tokens(alpha: float, k: int) -> float:
    """Expected tokens per target step, (1 - alpha^(k+1)) / (1 - alpha) (Leviathan et al. 2023, eq. 1)."""
    if not 0.0 <= alpha <= 1.0:
        raise SpecError(f"acceptance rate alpha must be in [0, 1], got {alpha:g}")
    if k < 0:
        raise SpecError(f"k must be >= 0, got {k}")
    if alpha > 1.0 - _EPS:
        return float(k + 1)
    return (1.0 - alpha ** (k + 1)) / (1.0 - alpha)


def acceptance_rate(mean_accepted: float, k: int) -> float:
    """The alpha at which `expected_tokens(alpha, k) == mean_accepted` (increasing in alpha: bisection)."""
    if not 1.0 <= mean_accepted <= k + 1:
        raise SpecError(f"mean accepted tokens per step must be in [1, k+1 = {k + 1}], got {mean_accepted:g}")
    lo, hi = 0.0, 1.0
    for _ in range(60):
        mid = (lo + hi) / 2
        if expected_tokens(mid, k) < mean_accepted:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


@dataclass(frozen=True, slots=True)
class Speculation:
    """A speculative-decoding setup. Give exactly one of `alpha` (per-token acceptance rate) and
    `mean_accepted` (measured tokens per target step, bonus included)."""

    method: str
    k: int
    alpha: float | None = None
    mean_accepted: float | None = None
    draft_model: ModelSpec | None = None
    verify_tokens: int | None = None  # positions verified per sequence (a tree); None: the chain of k + 1

    def __post_init__(self) -> None:
        if self.method not in METHODS:
            raise SpecError(f"unknown speculative method '{self.method}'; use one of {', '.join(METHODS)}")
        if not isinstance(self.k, int) or isinstance(self.k, bool) or not 1 <= self.k <= 64:
            raise SpecError(f"k (tokens proposed per step) must be an integer in [1, 64], got {self.k!r}")
        if (self.alpha is None) == (self.mean_accepted is None):
            raise SpecError("give either alpha (acceptance rate per token) or accepted (mean tokens per step)")
        if self.alpha is not None and not 0.0 <= self.alpha <= 1.0:
            raise SpecError(f"alpha must be in [0, 1], got {self.alpha:g}")
        if self.mean_accepted is not None and not 1.0 <= self.mean_accepted <= self.k + 1:
            raise SpecError(f"accepted tokens per step must be in [1, k+1 = {self.k + 1}], got {self.mean_accepted:g}")
        if (self.method == "draft") != (self.draft_model is not None):
            raise SpecError("a draft model is needed for method 'draft' (and only for it): write draft:<model>")
        if self.verify_tokens is not None and self.verify_tokens < self.k + 1:
            raise SpecError(f"a tree verifies at least k+1 = {self.k + 1} positions, got {self.verify_tokens}")

    @property
    def tokens_per_step(self) -> float:
        """E[tokens] per target step."""
        if self.mean_accepted is not None:
            return self.mean_accepted
        assert self.alpha is not None
        return expected_tokens(self.alpha, self.k)

    @property
    def rate(self) -> float:
        """The per-token acceptance rate, given or implied by `mean_accepted` at this k."""
        return self.alpha if self.alpha is not None else acceptance_rate(self.tokens_per_step, self.k)

    @property
    def positions(self) -> int:
        return self.verify_tokens or self.k + 1

    def with_k(self, k: int) -> Speculation:
        """The same proposer at another k, at the same per-token acceptance rate (a chain: no tree)."""
        return replace(self, k=k, alpha=self.rate, mean_accepted=None, verify_tokens=None)

    def label(self) -> str:
        who = f"draft:{self.draft_model.name}" if self.draft_model else self.method
        acc = f"alpha={self.alpha:g}" if self.alpha is not None else f"accepted={self.mean_accepted:g}"
        tree = f",tree={self.verify_tokens}" if self.verify_tokens else ""
        return f"spec={who},k={self.k},{acc}{tree}"


def with_speculation(scn: Scenario, spec: Speculation) -> Scenario:
    return replace(scn, speculation=spec)


def _one_layer(model: ModelSpec) -> ModelSpec:
    """The target with one decoder layer (a full-attention one where the model has any): an EAGLE/MTP head."""
    i = model.layer_windows.index(None) if None in model.layer_windows else 0
    return replace(model, name=f"{model.name} (1-layer head)", num_layers=1,
                   layer_windows=(model.layer_windows[i],), moe_layers=(model.moe_layers[i],))


def proposer_deployment(dep: Deployment, spec: Speculation) -> Deployment | None:
    """What runs the k draft steps, on the target's GPUs; None for n-gram lookup (no model).

    A draft model keeps the target's TP degree where its heads divide by it (vLLM's default
    draft_tensor_parallel_size), else runs unsharded; it is served in 16-bit with the target's KV format."""
    if spec.method == "ngram":
        return None
    if spec.method in HEAD_METHODS:
        return replace(dep, model=_one_layer(dep.model))
    assert spec.draft_model is not None
    d = spec.draft_model
    tp = dep.tp if d.mla is not None or d.num_heads % dep.tp == 0 else 1
    default16 = "bf16" if dep.hardware.peak_tflops.get("bf16", 0) > 0 else "fp16"
    kv = dep.kv.name if dep.kv.bytes_per_element <= 2 else default16
    return make_deployment(d, dep.hardware, weights=default16, kv=kv, tp=tp,
                           block_size=dep.block_size, gpu_memory_utilization=dep.gpu_memory_utilization)


@dataclass(frozen=True, slots=True)
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


def _draft_steps(dep: Deployment, spec: Speculation, batch: int, context: int) -> tuple[float, float]:
    """(seconds, FLOPs) of the k draft steps (Medusa: one pass of its parallel heads)."""
    prop = proposer_deployment(dep, spec)
    if prop is None:
        return 0.0, 0.0
    windows = layout(prop).windows
    secs = flops = 0.0
    for j in range(1 if spec.method == "medusa" else spec.k):
        c = step_cost(prop, decode_shape(batch, context + j, windows))
        secs += c.time_s
        flops += c.flops * prop.tp
    return secs, flops


def spec_round(dep: Deployment, spec: Speculation, batch: int, context: int) -> SpecRound:
    windows = layout(dep).windows
    n = spec.positions
    verify = step_cost(dep, batch_shape([(n, context)] * batch, windows, num_logits=batch * n))
    base = step_cost(dep, decode_shape(batch, context, windows))
    draft_s, draft_flops = _draft_steps(dep, spec, batch, context)
    return SpecRound(batch=batch, context=context, k=spec.k, tokens_per_step=spec.tokens_per_step,
                     draft_s=draft_s, verify_s=verify.time_s, draft_flops=draft_flops,
                     verify_flops=verify.flops * dep.tp, baseline_s=base.time_s, baseline_flops=base.flops * dep.tp)


def _contexts(input_len: int, output_len: int, points: int = 9) -> list[int]:
    """Evenly spaced contexts over the decode phase (first decode step sees input_len cached tokens)."""
    last = input_len + max(0, output_len - 2)
    if points <= 1 or last == input_len:
        return [input_len]
    return sorted({input_len + round((last - input_len) * i / (points - 1)) for i in range(points)})


def spec_tpot_s(dep: Deployment, spec: Speculation, batch: int, input_len: int, output_len: int) -> float:
    """Mean time per output token after the first, over the decode phase (round time / E[tokens], averaged
    over evenly spaced contexts: the round time is close to linear in the context)."""
    ctxs = _contexts(input_len, output_len)
    return sum(spec_round(dep, spec, batch, c).time_per_token_s for c in ctxs) / len(ctxs)


def best_k(dep: Deployment, spec: Speculation, batch: int, context: int, k_max: int = K_MAX) -> tuple[int, float]:
    """The k in 1..k_max with the highest speedup at this batch and context, at `spec`'s per-token
    acceptance rate (derived from its mean accepted tokens at its own k when that is what was given)."""
    best = (1, 0.0)
    for k in range(1, k_max + 1):
        s = spec_round(dep, spec.with_k(k), batch, context).speedup
        if s > best[1]:
            best = (k, s)
    return best


def breakeven_batch(dep: Deployment, spec: Speculation, context: int, limit: int = 4096) -> int | None:
    """The smallest batch at which speculation is slower than plain decoding (speedup < 1), or None if it
    still pays at `limit`. Speedup falls as the batch grows (the verify step turns compute-bound), so a
    doubling search then bisection finds the crossing."""
    def slower(b: int) -> bool:
        return spec_round(dep, spec, b, context).speedup < 1.0

    if slower(1):
        return 1
    lo, hi = 1, 2
    while not slower(hi):
        if hi >= limit:
            return None
        lo, hi = hi, min(2 * hi, limit)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if slower(mid):
            hi = mid
        else:
            lo = mid
    return hi


@dataclass(frozen=True, slots=True)
class SpecMemory:
    """Per GPU: proposer weights (an EAGLE/MTP head's layer; a draft model's whole weights) and the bytes each
    sequence of the given length adds (the proposer's KV cache, and k look-ahead slots in the target's)."""

    weight_bytes: float
    kv_bytes_per_seq: float


def memory_overhead(dep: Deployment, spec: Speculation, length: int) -> SpecMemory:
    prop = proposer_deployment(dep, spec)
    lookahead = kv_bytes_for_sequences(dep, 1, length + spec.k) - kv_bytes_for_sequences(dep, 1, length)
    if prop is None:
        return SpecMemory(0.0, lookahead)
    if spec.method in HEAD_METHODS:  # embeddings and LM head are the target's own
        m = prop.model
        layer = (m.total_params - m.embedding_params - m.lm_head_params - m.hidden_size) / dep.tp
        weights = layer * dep.weights.bytes_per_weight
    else:
        weights = layout(prop).weight_bytes_per_gpu
    return SpecMemory(weights, lookahead + kv_bytes_for_sequences(prop, 1, length + spec.k))

