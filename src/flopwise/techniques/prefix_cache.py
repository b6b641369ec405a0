"""Prefix caching: prompt tokens whose KV is already cached are not prefilled again.

One of the few techniques that removes FLOPs. With a hit ratio r, each prompt of L tokens has

    cached = floor(min(r * L, L - 1) / block) * block

tokens read from the cache, as vLLM does it: hits are whole KV blocks (block hashes), and when every prompt
token hits, the last one is recomputed anyway to produce the first token's logits (vLLM v1
`KVCacheManager.get_computed_blocks`, max hit length = prompt length - 1). The prefill then computes L - cached
new tokens attending to `cached` cached ones: the cached part's projections, MLP and its own causal attention
are gone; attention from the new tokens to the cached ones remains (cost model: `batch_shape([(L - cached,
cached)])`).

Memory: the cached prefix is held once and shared by every sequence that uses it (paged blocks with
reference counts), so concurrent sequences sharing one prefix each need only their own blocks:

    max sequences = (pool blocks - prefix blocks) // (blocks per sequence - prefix blocks)

Beyond what running sequences hold, the engine keeps freed prefix blocks as an LRU cache that yields to new
allocations; `held_bytes` is the one shared copy. Here a hit ratio stands for one common prefix (a system
prompt, a template); different prefixes per request would each hold their own blocks.
"""

from __future__ import annotations

from dataclasses import replace

from flopwise.cost.memory import blocks_per_sequence, memory_plan
from flopwise.techniques.scenario import Scenario

__all__ = ["cached_tokens", "with_prefix_cache", "held_bytes", "max_sequences_sharing"]


def cached_tokens(block_size: int, input_len: int, hit: float) -> int:
    """Prompt tokens served from the cache at hit ratio `hit` (whole blocks, never the last token)."""
    want = min(int(hit * input_len + 1e-9), input_len - 1)
    return want // block_size * block_size


def with_prefix_cache(scn: Scenario, hit: float) -> Scenario:
    return replace(scn, prefix_hit=hit)


def held_bytes(scn: Scenario) -> float:
    """Per GPU: the shared prefix's KV blocks (one copy)."""
    dep = scn.deployment
    cached = cached_tokens(dep.block_size, scn.input_len, scn.prefix_hit)
    return cached // dep.block_size * memory_plan(dep).block_bytes


def max_sequences_sharing(scn: Scenario) -> int:
    """Sequences of input_len + output_len tokens (plus speculative look-ahead slots) that fit at once when they
    share the cached prefix (a draft model's weights and KV are in the memory plan, `cost/memory.py`)."""
    dep = scn.deployment
    plan = memory_plan(dep)
    length = scn.input_len + scn.output_len + plan.lookahead_tokens
    shared = cached_tokens(dep.block_size, scn.input_len, scn.prefix_hit) // dep.block_size
    own_bytes = (blocks_per_sequence(dep, length) - shared) * plan.block_bytes
    free = plan.kv_pool_bytes - shared * plan.block_bytes
    if free <= 0 or own_bytes <= 0:
        return 0
    return int(free // own_bytes)
