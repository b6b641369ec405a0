"""Memory per GPU and KV-cache capacity, sized by the engine's memory policy (`specs/engine.py`).

With f the engine's memory fraction (`dep.gpu_memory_utilization`):
    share_of_device (vLLM)   kv_pool = f * device - weights - peak activations - runtime - graph reserve
                             (`gpu_worker.determine_available_memory`: everything inside f x total memory);
                             from vLLM 0.34 (`EngineProfile.kv_margin`, the extensible KV cache) the budget is
                             min(f * device, device - margin), margin = max(1 GiB, 0.75 x peak), and the peak
                             counts the graph reserve a second time (peak = activations + graph estimate)
    static_share (SGLang)    kv_pool = f * device - weights
                             (--mem-fraction-static = (weights + KV pool) / device; activations outside)
    share_of_free (TRT-LLM)  kv_pool = f * (device - weights - peak activations - runtime)
                             (kv_cache_free_gpu_memory_fraction of the memory free after the profiling run)
    blocks    = floor(kv_pool / (block_size * kv bytes per token))

KV bytes per token and GPU = sum over layers of each layer's cache bytes per token (`cost/attention.py`: 2·kv_heads·
head_dim or the MLA latent, times bytes per element, split by tp; a DSA layer adds its index key; linear-state and
KV-sharing layers none). A sequence of length s holds ceil(s / block) blocks in full-attention layers, at most
ceil(window / block) + 1 in sliding-window layers and ceil(chunk / block) in chunked ones (vLLM's hybrid KV
manager frees blocks that leave the window or chunk), and linear-state layers keep a fixed state per sequence
(vLLM gives it a page of its own in the same pool). A sequence's bytes are counted in whole-model blocks, rounded
up: blocks = ceil((sum over layers of held blocks x bytes per block + state bytes) / block_bytes).
Activations: the profile run of `max_num_batched_tokens` tokens keeps about 4·h + 2·intermediate/tp
elements per token alive (hidden states, residual, gate/up output); the sampler run that follows it holds fp32
logits and sampler buffers for min(max_num_seqs, max_num_batched_tokens) rows (2 · rows · vocab · 4 bytes).
The forward pass's activations are freed before the sampler runs, so the peak is the larger of the two
(vLLM `profile_run`: `_dummy_run` then `_dummy_sampler_run` on the last hidden states).

Speculative decoding (`dep.speculative`, see `cost/speculative.py` for the proposer):
    kv_pool  -= proposer weights per GPU       a draft model's whole weights (at its own TP degree); an EAGLE/MTP
                                               head's one layer (its embeddings and LM head are the target's)
    block    += the proposer's KV for the same block_size tokens (a draft model's layers, a head's one layer;
                Medusa's feed-forward heads and n-gram lookup keep none): vLLM v1 gives the drafter's layers
                their own KV cache in the same block table, so every block covers both
    a sequence of s tokens reserves s + P - 1 slots while it is verified (P positions per step, P - 1 = k for a
    chain): `lookahead_tokens`, counted by `max_sequences` (the simulator allocates the slots itself).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache

from flopwise.cost.attention import held_blocks
from flopwise.cost.layout import layout
from flopwise.cost.speculative import proposer_deployment
from flopwise.specs.deployment import Deployment
from flopwise.specs.hardware import GIB

__all__ = ["MemoryPlan", "memory_plan", "blocks_counter", "blocks_per_sequence", "kv_bytes_for_sequences",
           "max_sequences", "memory_fraction_for_pool"]


@dataclass(frozen=True, slots=True, kw_only=True)
class MemoryPlan:
    """Per-GPU memory of one deployment. All sizes in bytes. `num_blocks` and `kv_capacity_tokens` are the
    replica's: with data-parallel attention each of its `kv_groups` attention groups keeps its own requests' KV
    (a GPU's pool holds one group's share), so the replica holds kv_groups times one GPU's blocks."""

    device_bytes: float
    budget_bytes: float
    weight_bytes: float
    activation_bytes: float
    runtime_bytes: float
    kv_pool_bytes: float
    block_bytes: float  # one block of block_size tokens over every layer held by this GPU (proposer's too)
    block_size: int
    proposer_weight_bytes: float = 0.0  # speculative decoding's draft model or head
    lookahead_tokens: int = 0  # KV slots a sequence holds beyond its tokens while verified (P - 1)
    kv_groups: int = 1  # attention groups (Deployment.dp), each with its own KV pool

    @property
    def fits(self) -> bool:
        """Weights, activations and runtime fit in the budget with room for at least one KV block."""
        return self.kv_pool_bytes >= self.block_bytes

    @property
    def num_blocks(self) -> int:
        return max(0, int(self.kv_pool_bytes // self.block_bytes)) * self.kv_groups

    @property
    def kv_capacity_tokens(self) -> int:
        return self.num_blocks * self.block_size

    @property
    def needed_bytes(self) -> float:
        return (self.weight_bytes + self.proposer_weight_bytes + self.activation_bytes + self.runtime_bytes
                + self.block_bytes)


def blocks_counter(dep: Deployment) -> Callable[[int], int]:
    """`blocks_per_sequence` for one deployment as a function of the length, with everything else worked out
    once (the simulator asks it at every allocation)."""
    bs = dep.block_size
    cache = layout(dep).cache
    if cache.uniform:
        return lambda length: math.ceil(length / bs)
    spans = tuple((span, n) for span, n, _ in cache.spans)
    if not cache.state_bytes and len({b for _, _, b in cache.spans}) == 1:
        layers = sum(n for _, n in spans)

        def mean_blocks(length: int) -> int:  # equal bytes per layer: the mean of the layers' blocks, exact
            held = 0
            for span, n in spans:
                held += n * held_blocks(length, span, bs)
            return -(-held // layers)
        return mean_blocks
    per_block = bs * cache.bytes_per_token
    if not per_block:  # no per-token cache at all: one block is one sequence's state
        return lambda length: 1
    weighted = tuple((span, n * b * bs) for span, n, b in cache.spans)
    state = cache.state_bytes

    def by_bytes(length: int) -> int:
        held = state
        for span, w in weighted:
            held += w * held_blocks(length, span, bs)
        return math.ceil(held / per_block)
    return by_bytes


def blocks_per_sequence(dep: Deployment, length: int) -> int:
    """KV blocks (each `block_size` tokens over all layers, as counted in MemoryPlan.block_bytes) that one
    sequence of `length` tokens holds: windows and chunks capped, linear-state layers' state added."""
    return blocks_counter(dep)(length)


def kv_bytes_for_sequences(dep: Deployment, num_seqs: int, length: int) -> float:
    return num_seqs * blocks_per_sequence(dep, length) * memory_plan(dep).block_bytes


@lru_cache(maxsize=512)
def memory_plan(dep: Deployment) -> MemoryPlan:
    lay = layout(dep)
    hw, m = dep.hardware, dep.model
    device = hw.memory_bytes
    f = dep.gpu_memory_utilization
    inter = max(g.activation_inter for g in lay.groups)
    forward = dep.max_num_batched_tokens * lay.act_bytes * (4 * m.hidden_size + 2 * inter)
    sampler = 2 * min(dep.max_num_seqs, dep.max_num_batched_tokens) * m.vocab_size * 4  # full vocab on rank 0
    act = max(forward, sampler)
    eng = dep.engine
    runtime = hw.efficiency.runtime_overhead_gib * GIB + eng.activation_reserve_gib * GIB
    kv_per_token = lay.kv_bytes_per_token / m.num_layers  # a mean over layers, split over pp stages as layers are
    block = dep.block_size * kv_per_token * (m.num_layers / dep.pp)
    if not block:  # no per-token cache (an all-linear-state model): a block is one sequence's state
        block = lay.cache.state_bytes / dep.pp
    prop_weights, prop_kv_per_token, lookahead = _proposer_memory(dep)
    block += dep.block_size * prop_kv_per_token
    weights = lay.weight_bytes_per_gpu + prop_weights
    if eng.memory_policy == "static_share":
        budget = device * f
        pool = budget - weights
    elif eng.memory_policy == "share_of_free":
        budget = device
        pool = f * (device - weights - act - runtime)
    elif (margin := eng.measured_margin(hw.vendor, hw.kind)) is not None:  # measured after warmup: the
        # transient peak holds the graph estimate again
        act += eng.activation_reserve_gib * GIB
        budget = min(device * f, device - margin.bytes(act))
        pool = budget - weights - act - runtime
    else:
        budget = device * f
        pool = budget - weights - act - runtime
    return MemoryPlan(device_bytes=device, budget_bytes=budget, weight_bytes=lay.weight_bytes_per_gpu,
                      activation_bytes=act, runtime_bytes=runtime, kv_pool_bytes=max(0.0, pool),
                      block_bytes=block, block_size=dep.block_size, proposer_weight_bytes=prop_weights,
                      lookahead_tokens=lookahead, kv_groups=dep.dp)


def _proposer_memory(dep: Deployment) -> tuple[float, float, int]:
    """(proposer weight bytes, proposer KV bytes per token, look-ahead slots) per GPU; zeros without speculation."""
    spec = dep.speculative
    if spec is None:
        return 0.0, 0.0, 0
    lookahead = spec.positions - 1
    prop = proposer_deployment(dep, spec)
    if prop is None:
        return 0.0, 0.0, lookahead
    lay = layout(prop)
    if spec.method == "draft":
        return lay.weight_bytes_per_gpu, lay.kv_bytes_per_token, lookahead
    m = prop.model  # a one-layer head: its layer's weights, at the target's format and TP degree
    weights = (m.total_params - m.embedding_params - m.lm_head_params - m.hidden_size) / dep.tp
    kv = 0.0 if spec.method == "medusa" else lay.kv_bytes_per_token
    return weights * dep.weights.bytes_per_weight, kv, lookahead


def max_sequences(dep: Deployment, length: int) -> int:
    """How many sequences of `length` tokens fit in the KV pool at once (paged, no fragmentation
    beyond each sequence's last partial block), with their speculative look-ahead slots; with data-parallel
    attention, each group's pool holds whole sequences of its own."""
    plan = memory_plan(dep)
    per_group = plan.num_blocks // plan.kv_groups  # each attention group holds its own requests in its own pool
    return plan.kv_groups * (per_group // blocks_per_sequence(dep, length + plan.lookahead_tokens))


def memory_fraction_for_pool(dep: Deployment, kv_pool_bytes: float) -> float:
    """The memory fraction `dep`'s engine needs for a KV pool of `kv_pool_bytes`: the policies of
    `memory_plan` solved for f (weights include a speculative proposer's):
        share_of_device   f = (weights + activations + runtime + pool) / device (1 where an engine that sizes
                          from measured memory, `kv_margin`, gives that pool by its own margin)
        static_share      f = (weights + pool) / device
        share_of_free     f = pool / (device - weights - activations - runtime)
    Launch commands use it to give each engine the pool the plan sized, in the engine's own terms."""
    p = memory_plan(dep)
    weights = p.weight_bytes + p.proposer_weight_bytes
    policy = dep.engine.memory_policy
    if policy == "static_share":
        return (weights + kv_pool_bytes) / p.device_bytes
    if policy == "share_of_free":
        free = p.device_bytes - weights - p.activation_bytes - p.runtime_bytes
        return kv_pool_bytes / free if free > 0 else 1.0
    need = weights + p.activation_bytes + p.runtime_bytes + kv_pool_bytes
    margin = dep.engine.measured_margin(dep.hardware.vendor, dep.hardware.kind)
    if margin is not None and need >= p.device_bytes - margin.bytes(p.activation_bytes) - 1.0:
        return 1.0  # the measured sizing's own budget (device - margin): every fraction above it gives that
    return need / p.device_bytes
