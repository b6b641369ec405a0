"""Paged KV blocks with prefix caching, after vLLM v1's KVCacheManager and BlockPool.

The pool holds `num_blocks` blocks of `block_size` tokens (sized by `cost.memory_plan`). A request holds
ceil(tokens / block_size) blocks (sliding-window models: `cost.memory.blocks_per_sequence`).

Free queue and eviction (vLLM's FreeKVCacheBlockQueue). Free blocks form one LRU queue: never-used blocks
first, then freed blocks in the order they were freed; allocation takes from the head, evicting whatever
cached content a block held. A request frees its blocks tail-first, so the end of a prompt is evicted before
its beginning. A cache hit takes a block out of the middle of the queue. Here the queue is an `OrderedDict`
(a C doubly linked list: O(1) pop from the head, removal from the middle, append at the tail), and its
entries are extents rather than single blocks:

    [ never used (a count) ][ own(req 7): 5 blocks ][ (prefix 2, block 3) ][ (prefix 2, block 2) ] ...
      ^ allocation takes here first, then from the head extent's tail end

Content identity. A block's hash in vLLM chains the hashes of all tokens before it. The simulator has no
token ids, so it names content instead: block i of the first `prefix_tokens // block_size` blocks of a request
with `prefix_id` p is `(p, i)`, shared by every request of that group; every other block is private to its
request. Private blocks can still hit after a preemption (recompute finds its own prompt and output blocks
until they are evicted): they are freed as one extent keyed by (request, preemption number).

Rules mirrored from vLLM (v1 `kv_cache_manager.py`, `block_pool.py`):
- hits are the longest run of cached full blocks from the start, capped at num_tokens - 1 tokens (the last
  token is always recomputed to produce logits);
- full blocks are cached when allocated for the tokens that fill them (so a request admitted later in the same
  step already hits them); a block whose content is already cached stays a private duplicate;
- allocation needs new blocks + hit blocks that sit in the free queue <= free blocks, else it fails with no
  side effect (`can_allocate` / `allocate` are the check and the act).
Prefix caching is off for sliding-window models (vLLM's hybrid allocator caches per layer group; not modelled).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import count

import numpy as np

from flopwise.sim.request import Request

__all__ = ["CacheHit", "NO_HIT", "BlockManager", "most_steps_within"]


@dataclass(frozen=True, slots=True, kw_only=True)
class CacheHit:
    """A prefix-cache lookup: `num_tokens` computed tokens found (whole blocks), which blocks they are, and how
    many of them currently sit in the free queue (taking them there costs free blocks)."""

    num_tokens: int = 0
    prefix_keys: tuple[tuple[int, int], ...] = ()
    num_own: int = 0
    own_key: object = None
    num_evictable: int = 0

    @property
    def num_blocks(self) -> int:
        return len(self.prefix_keys) + self.num_own


NO_HIT = CacheHit()


def most_steps_within(need: Callable[[int], int], k: int, free: int) -> int:
    """The most steps s <= k whose blocks need(s) (non-decreasing in s, need(0) = 0) fit `free` blocks."""
    if need(k) <= free:
        return k
    lo, hi = 0, k  # need(lo) <= free < need(hi)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if need(mid) <= free:
            lo = mid
        else:
            hi = mid
    return lo


@dataclass(slots=True)
class _Extent:
    """`size` free blocks in one queue entry; the first `hashed` can still be hit."""

    size: int
    hashed: int


# one-block entries are never changed in place (`_take` trims only an extent larger than what it takes, `_touch`
# only a request's own extent), so every freed prefix block shares one of these
_ONE_CACHED = _Extent(1, 1)
_ONE_PRIVATE = _Extent(1, 0)


@dataclass(slots=True, kw_only=True)
class BlockManager:
    num_blocks: int
    block_size: int
    enable_prefix_caching: bool = True
    blocks_for: Callable[[int], int] | None = None  # blocks held by a sequence of n tokens; default ceil(n / bs)
    num_unused: int = field(init=False)  # never-used blocks: the head of the free queue
    _free: OrderedDict[object, _Extent] = field(init=False, default_factory=OrderedDict)
    _num_free_used: int = field(init=False, default=0)
    _refs: dict[tuple[int, int], int] = field(init=False, default_factory=dict)  # cached prefix block -> users
    _anon: count[int] = field(init=False, default_factory=count)
    _ceil_blocks: bool = field(init=False, default=False)  # blocks_for is the default ceil(n / block_size)
    _blocks_for: Callable[[int], int] = field(init=False)  # blocks_for, or the default when it is None
    _keys: dict[int, tuple[tuple[int, int], ...]] = field(init=False, default_factory=dict)  # a prefix's block keys
    # what a lookup reads of a prefix group's blocks (which are cached, which sit in the free queue) changes only
    # when one is cached, evicted, or taken from or returned to the free queue: each bumps the group's version,
    # and a lookup's hit for (group, region) is kept until it does
    _versions: dict[int, int] = field(init=False, default_factory=dict)
    _lookups: dict[tuple[int, int], tuple[int, CacheHit]] = field(init=False, default_factory=dict)

    def __post_init__(self) -> None:
        self.num_unused = self.num_blocks
        if self.blocks_for is None:
            self._ceil_blocks = True
            bs = self.block_size
            self._blocks_for = lambda n: -(-n // bs)
        else:
            self._blocks_for = self.blocks_for

    # ---- queries -------------------------------------------------------------------------------------
    @property
    def num_free_blocks(self) -> int:
        return self.num_unused + self._num_free_used

    @property
    def usage(self) -> float:
        """Share of blocks held by requests (vLLM's kv_cache_usage: cached-but-free blocks count as free)."""
        return 1.0 - self.num_free_blocks / self.num_blocks

    def num_cached_prefix_blocks(self) -> int:
        return len(self._refs)

    def blocks_held(self, num_tokens: int) -> int:
        """Blocks a sequence of `num_tokens` tokens holds (`blocks_for`, by default ceil(n / block_size))."""
        return self._blocks_for(num_tokens)

    def _prefix_region(self, req: Request) -> int:
        """Blocks of `req` whose content is shared with its prefix group."""
        if not self.enable_prefix_caching or req.prefix_id is None:
            return 0
        return req.num_prefix_tokens // self.block_size

    def get_computed_blocks(self, req: Request) -> CacheHit:
        """Longest cached run of full blocks at the start of `req` (no side effects)."""
        if not self.enable_prefix_caching:
            return NO_HIT
        bs = self.block_size
        max_blocks = (req.num_tokens - 1) // bs
        pid = req.prefix_id
        region = min(req.num_prefix_tokens // bs, max_blocks) if pid is not None else 0
        hit = NO_HIT
        if pid is not None and region:
            version = self._versions.get(pid, 0)
            seen = self._lookups.get((pid, region))
            if seen is not None and seen[0] == version:
                hit = seen[1]
            else:
                every = self._keys.get(pid)
                if every is None or len(every) < region:
                    every = self._keys[pid] = tuple((pid, i) for i in range(region))
                refs = self._refs
                n = evictable = 0
                for k in every[:region]:
                    r = refs.get(k)
                    if r is None:
                        break
                    n += 1
                    evictable += r == 0
                if n:
                    hit = CacheHit(num_tokens=n * bs, prefix_keys=every[:n], num_evictable=evictable)
                self._lookups[(pid, region)] = (version, hit)
        # its own private blocks, kept after a preemption (`free(reusable=True)` under its next preemption count)
        if not req.num_preemptions or hit.num_blocks != region:
            return hit
        own_key = ("own", req.request_id, req.num_preemptions)
        ext = self._free.get(own_key)
        own = min(ext.hashed, max_blocks - region) if ext is not None else 0
        if not own:
            return hit
        return CacheHit(num_tokens=(region + own) * bs, prefix_keys=hit.prefix_keys, num_own=own, own_key=own_key,
                        num_evictable=hit.num_evictable + own)

    def blocks_needed(self, req: Request, num_new_tokens: int, hit: CacheHit = NO_HIT) -> int:
        """Free blocks that granting `num_new_tokens` more tokens to `req` would take."""
        total = req.num_computed_tokens + hit.num_tokens + num_new_tokens
        new = self._blocks_for(total) - len(req.prefix_blocks) - req.num_own_blocks - hit.num_blocks
        return (new if new > 0 else 0) + hit.num_evictable

    # ---- check / act ---------------------------------------------------------------------------------
    def can_allocate(self, req: Request, num_new_tokens: int, hit: CacheHit = NO_HIT) -> bool:
        return self.blocks_needed(req, num_new_tokens, hit) <= self.num_free_blocks

    def allocate(self, req: Request, num_new_tokens: int, hit: CacheHit = NO_HIT) -> None:
        """Take the hit blocks and the new blocks for `num_new_tokens` tokens after the computed (and hit)
        ones, and cache the shared-prefix blocks they fill. Call only after `can_allocate` said yes."""
        if hit is not NO_HIT:
            self._touch(req, hit)
        before = req.num_computed_tokens + hit.num_tokens
        total = before + num_new_tokens
        new = self._blocks_for(total) - len(req.prefix_blocks) - req.num_own_blocks
        if new > 0:
            self._take(new)
            region = self._prefix_region(req)
            in_region = min(new, max(0, region - len(req.prefix_blocks)))
            if in_region:
                req.prefix_blocks.extend([None] * in_region)
            req.num_own_blocks += new - in_region
            req.num_slots = (len(req.prefix_blocks) + req.num_own_blocks) * self.block_size
        pid = req.prefix_id
        if pid is not None and before < req.num_prefix_tokens and self.enable_prefix_caching:
            self._cache_prefix(req, pid, before, total)

    def extend_decode(self, req: Request, num_new_tokens: int) -> bool:
        """`allocate(req, num_new_tokens)` for a decoding request (past its shared prefix, so its new blocks are
        private and nothing is cached) when the free pool holds them; False, with nothing taken, when it does not
        (the scheduler then preempts). The decode path of `can_allocate` + `allocate`, in one call."""
        new = self._blocks_for(req.num_computed_tokens + num_new_tokens) - len(req.prefix_blocks) - req.num_own_blocks
        if new <= 0:
            return True
        if new > self.num_unused + self._num_free_used:
            return False
        self._take(new)
        req.num_own_blocks += new
        req.num_slots = (len(req.prefix_blocks) + req.num_own_blocks) * self.block_size
        return True

    def free(self, req: Request, reusable: bool) -> None:
        """Return all of `req`'s blocks, tail first. `reusable`: a preempted request may hit its own private
        blocks when it comes back; a finished one never will."""
        if not self.enable_prefix_caching:
            self.num_unused += req.num_blocks
        else:
            if req.num_own_blocks:
                if reusable:  # its full private blocks were cached as their tokens were computed
                    full = min(req.num_computed_tokens, req.num_tokens) // self.block_size - self._prefix_region(req)
                    ext = _Extent(req.num_own_blocks, max(0, min(full, req.num_own_blocks)))
                    self._push(("own", req.request_id, req.num_preemptions), ext)
                else:
                    self._push(next(self._anon), _Extent(req.num_own_blocks, 0))
            refs, free_q = self._refs, self._free
            pushed = returned = 0
            for k in reversed(req.prefix_blocks):  # `_push`, inlined: every freed request's prefix, block by block
                if k is None:
                    free_q[next(self._anon)] = _ONE_PRIVATE
                    pushed += 1
                    continue
                r = refs[k] - 1
                refs[k] = r
                if r == 0:
                    free_q[k] = _ONE_CACHED
                    returned += 1
            self._num_free_used += pushed + returned
            if returned:
                self._bump(req.prefix_id)
        req.prefix_blocks = []
        req.num_own_blocks = 0
        req.num_slots = 0

    def decode_steps_that_fit(self, reqs: list[Request], k: int) -> int:
        """The most steps, up to k, that every request of `reqs` (all decoding) can decode before the blocks
        they need exceed the free pool. The blocks a request needs after s steps are
        ceil((s - room) / block_size) for room = num_slots - num_computed_tokens (0 while s <= room), so
        with the default blocks_for one array of rooms prices every probe of the bisection in C."""
        free = self.num_free_blocks
        bs = self.block_size
        if len(reqs) * -(-k // bs) < free:
            return k  # cheap bound: no request can need more than ceil(k / block_size) new blocks
        need: Callable[[int], int]
        if self._ceil_blocks:
            room = np.fromiter((r.num_slots - r.num_computed_tokens for r in reqs), dtype=np.int64, count=len(reqs))
            room -= bs - 1  # ceil((s - room) / bs) = floor((s - room + bs - 1) / bs)
            need = lambda steps: int((np.maximum(steps - room, 0) // bs).sum())  # noqa: E731
        else:
            need = lambda steps: sum(self.blocks_needed(r, steps) for r in reqs)  # noqa: E731
        return most_steps_within(need, k, free)

    def allocate_decode_run(self, reqs: list[Request], k: int) -> None:
        """`allocate(r, k)` for every request of `reqs` (all decoding, so past their shared prefix: new blocks
        are private and nothing is cached), taking the blocks from the free queue in one go (the same blocks
        as one request after another would). Call only after `decode_steps_that_fit` allowed k."""
        blocks_for, bs = self._blocks_for, self.block_size
        total = 0
        for r in reqs:
            c = r.num_computed_tokens + k
            if c > r.num_slots:
                new = blocks_for(c) - len(r.prefix_blocks) - r.num_own_blocks
                if new > 0:
                    r.num_own_blocks += new
                    r.num_slots = (len(r.prefix_blocks) + r.num_own_blocks) * bs
                    total += new
        if total:
            self._take(total)

    def take_decode_blocks(self, n: int) -> None:
        """Take `n` private blocks for decoding requests whose counts the caller raised (a lazy scheduler's
        `extend_decode`, batched: the same blocks leave the free queue as one call per request would take)."""
        if n > self.num_unused + self._num_free_used:
            raise AssertionError(f"{n} decode blocks asked of a pool with {self.num_free_blocks} free")
        self._take(n)

    # ---- internals -----------------------------------------------------------------------------------
    def _bump(self, prefix_id: int | None) -> None:
        """A block of prefix group `prefix_id` was cached, evicted, taken from or returned to the free queue."""
        if prefix_id is not None:
            self._versions[prefix_id] = self._versions.get(prefix_id, 0) + 1

    def _push(self, key: object, ext: _Extent) -> None:
        self._free[key] = ext
        self._num_free_used += ext.size

    def _touch(self, req: Request, hit: CacheHit) -> None:
        refs = self._refs
        taken = 0
        for k in hit.prefix_keys:
            r = refs[k]
            if r == 0:
                del self._free[k]
                taken += 1
            refs[k] = r + 1
        if taken:
            self._num_free_used -= taken
            self._bump(hit.prefix_keys[0][0])
        req.prefix_blocks.extend(hit.prefix_keys)
        if hit.num_own:
            ext = self._free[hit.own_key]
            ext.size -= hit.num_own  # the hit takes the extent's front; what is left can never hit again
            ext.hashed = 0
            self._num_free_used -= hit.num_own
            if ext.size == 0:
                del self._free[hit.own_key]
            req.num_own_blocks += hit.num_own
        req.num_cached_tokens += hit.num_tokens
        req.num_slots = (len(req.prefix_blocks) + req.num_own_blocks) * self.block_size

    def _take(self, n: int) -> None:
        """Pop `n` blocks from the head of the free queue, evicting their cached content."""
        t = min(n, self.num_unused)
        self.num_unused -= t
        n -= t
        free = self._free
        while n:
            key = next(iter(free))
            ext = free[key]
            if ext.size <= n:
                del free[key]
                n -= ext.size
                self._num_free_used -= ext.size
                if type(key) is tuple and len(key) == 2:
                    del self._refs[key]  # an evicted shared-prefix block
                    self._bump(key[0])
            else:
                ext.size -= n  # evict from the extent's tail (freed first, so least recently useful)
                ext.hashed = min(ext.hashed, ext.size)
                self._num_free_used -= n
                n = 0

    def _cache_prefix(self, req: Request, prefix_id: int, before: int, total: int) -> None:
        """Cache the shared-prefix blocks of `req` (whose prefix_id is `prefix_id`) that become full as tokens
        before..total are computed (private blocks need no bookkeeping: `free` counts the full ones)."""
        bs = self.block_size
        region = self._prefix_region(req)
        pb = req.prefix_blocks
        refs = self._refs
        for i in range(before // bs, min(total // bs, region)):
            if pb[i] is None:
                k = (prefix_id, i)
                if k not in refs:
                    refs[k] = 1
                    pb[i] = k
                    self._bump(prefix_id)
