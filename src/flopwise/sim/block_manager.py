"""Paged KV blocks with prefix caching, after vLLM v1's KVCacheManager and BlockPool.

The pool holds `num_blocks` blocks of `block_size` tokens (sized by `cost.memory_plan`). A request holds
ceil(tokens / block_size) blocks (sliding-window models: `cost.memory.blocks_per_sequence`).

Free queue and eviction (vLLM's FreeKVCacheBlockQueue). Free blocks form one LRU queue: never-used blocks
first, then freed blocks in the order they were freed; allocation takes from the head, evicting whatever
cached content a block held. A request frees its blocks tail-first, so the end of a prompt is evicted before
its beginning. A cache hit takes a block out of the middle of the queue. Here the queue is an `OrderedDict`
(a C doubly linked list: O(1) pop from the head, removal from the middle, append at the tail), and its
entries are extents rather than single blocks:

    [ never used (a count) ][ own(req 7): 5 blocks ][ prefix 2: blocks 3, 2, 1, 0 ][ private: 1 ] ...
      ^ allocation takes here first, then from the head extent's tail end

Prefix groups. A chat request holds a few dozen shared-prefix blocks, and every admission, completion and
eviction touched each of them (a dict entry per block under a tuple key, in the reference counts and in the
queue). But a request nearly always holds blocks 0 .. h-1 of its group and no other: so a group counts its
holders by h (`_Group.lengths`), a block's holders are those with a larger h, and an admission or completion
changes one count; a request whose blocks have a gap (a private copy among them, where another request had
cached that content first) is counted block by block (`_Group.gapped`). The blocks a completion leaves with no
holder go to the queue as one entry per run of consecutive blocks (`_PrefixRun`, in the order the blocks were
freed: highest first). A run then loses blocks only at its two ends: eviction takes from its head (its highest
blocks), a hit from its tail (a hit covers blocks 0 .. n-1, so it takes a run's lowest blocks up to n). The
queue's order, and so every eviction, is the per-block queue's.

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
    """`size` free private blocks in one queue entry; the first `hashed` can still be hit (its owner's, after a
    preemption)."""

    size: int
    hashed: int


@dataclass(slots=True, eq=False)
class _Group:
    """One prefix group's blocks. Block i is held by the `lengths[h]` requests holding blocks 0 .. h-1 for each
    h > i (`top`: the largest such h, 0 if none) and by `gapped[i]` requests whose blocks have gaps
    (`num_gapped` of them). `cached[i]`: whether block i holds the group's content; a cached block nobody holds
    is free and sits in one of `runs` (queue entries, by first block). `keys`: the block keys (pid, i);
    `version`: bumped when a block is cached, evicted, or leaves or joins the free queue (what a lookup reads),
    `lookups` the hit per region at a version, and `hits` the hits made so far by (blocks, free blocks among
    them): a lookup that finds the same again reuses it. (Per-block lists: their slices are read in C.)"""

    pid: int
    cached: list[bool] = field(default_factory=list)
    gapped: list[int] = field(default_factory=list)
    lengths: dict[int, int] = field(default_factory=dict)
    top: int = 0
    num_gapped: int = 0
    runs: dict[int, _PrefixRun] = field(default_factory=dict)
    keys: tuple[tuple[int, int], ...] = ()
    version: int = 0
    lookups: dict[int, tuple[int, CacheHit]] = field(default_factory=dict)
    hits: dict[tuple[int, int], CacheHit] = field(default_factory=dict)

    def num_free(self, lo: int, hi: int) -> int:
        """Free blocks among lo .. hi-1 (all cached): those at or above `top` that no gapped request holds."""
        if lo < self.top:
            lo = self.top
        if hi <= lo:
            return 0
        return self.gapped[lo:hi].count(0) if self.num_gapped else hi - lo


@dataclass(slots=True, eq=False)
class _PrefixRun:
    """Free blocks lo .. hi-1 of one group as one queue entry (keyed `key`), in LRU order hi-1 first."""

    group: _Group
    lo: int
    hi: int
    key: int


@dataclass(slots=True, kw_only=True)
class BlockManager:
    num_blocks: int
    block_size: int
    enable_prefix_caching: bool = True
    blocks_for: Callable[[int], int] | None = None  # blocks held by a sequence of n tokens; default ceil(n / bs)
    num_unused: int = field(init=False)  # never-used blocks: the head of the free queue
    _free: OrderedDict[object, _Extent | _PrefixRun] = field(init=False, default_factory=OrderedDict)
    num_free_used: int = field(init=False, default=0)  # freed blocks in the queue (num_free_blocks: + num_unused)
    _groups: dict[int, _Group] = field(init=False, default_factory=dict)  # prefix group -> its blocks
    # requests holding blocks 0 .. h-1 of their group (h), and those whose blocks have gaps (`_Group`)
    _holders: dict[Request, int] = field(init=False, default_factory=dict)
    _gapped: set[Request] = field(init=False, default_factory=set)
    # the queue's head entry, kept while `_take` trims it (most takes are a decode's block or two from a freed
    # request's extent); cleared whenever an entry leaves the queue, the only way the head can change
    _head: tuple[object, _Extent | _PrefixRun] | None = field(init=False, default=None)
    # the queue's last entry while it is blocks that can never hit (`_free_private`): the next such blocks join
    # it instead of queueing an entry of their own (the same blocks in the same order; a request finishing
    # after another nearly always frees only these)
    _tail: _Extent | None = field(init=False, default=None)
    _anon: count[int] = field(init=False, default_factory=count)
    _ceil_blocks: bool = field(init=False, default=False)  # blocks_for is the default ceil(n / block_size)
    _blocks_for: Callable[[int], int] = field(init=False)  # blocks_for, or the default when it is None

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
        return self.num_unused + self.num_free_used

    @property
    def usage(self) -> float:
        """Share of blocks held by requests (vLLM's kv_cache_usage: cached-but-free blocks count as free)."""
        return 1.0 - (self.num_unused + self.num_free_used) / self.num_blocks

    def num_cached_prefix_blocks(self) -> int:
        return sum(g.cached.count(True) for g in self._groups.values())

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
        region = req.num_prefix_tokens // bs if pid is not None else 0
        if region > max_blocks:
            region = max_blocks
        hit = NO_HIT
        g = self._groups.get(pid) if region else None  # type: ignore[arg-type]
        if g is not None:  # what a lookup reads changes only with the group's version: keep the hit until then
            seen = g.lookups.get(region)
            if seen is not None and seen[0] == g.version:
                hit = seen[1]
            else:
                cached = g.cached[:region]
                n = cached.index(False) if False in cached else len(cached)  # the run of cached blocks from 0
                if n:
                    key = (n, g.num_free(0, n))
                    hit = g.hits.get(key) or g.hits.setdefault(
                        key, CacheHit(num_tokens=n * bs, prefix_keys=g.keys[:n], num_evictable=key[1]))
                g.lookups[region] = (g.version, hit)
        # its own private blocks, kept after a preemption (`free(reusable=True)` under its next preemption count)
        if not req.num_preemptions or hit.num_blocks != region:
            return hit
        own_key = ("own", req.request_id, req.num_preemptions)
        ext = self._free.get(own_key)
        own = min(ext.hashed, max_blocks - region) if isinstance(ext, _Extent) else 0
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
        return self.blocks_needed(req, num_new_tokens, hit) <= self.num_unused + self.num_free_used

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
        if new > self.num_unused + self.num_free_used:
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
                    self._free_private(req.num_own_blocks)
            if req.prefix_blocks:
                self._free_prefix(req)
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
        if n > self.num_unused + self.num_free_used:
            raise AssertionError(f"{n} decode blocks asked of a pool with {self.num_free_blocks} free")
        self._take(n)

    # ---- internals -----------------------------------------------------------------------------------
    def _group(self, pid: int, blocks: int) -> _Group:
        """Prefix group `pid`'s state, covering at least its first `blocks` blocks."""
        g = self._groups.get(pid)
        if g is None:
            g = self._groups[pid] = _Group(pid)
        if len(g.cached) < blocks:
            more = blocks - len(g.cached)
            g.cached.extend([False] * more)
            g.gapped.extend([0] * more)
            g.keys = tuple((pid, i) for i in range(blocks))
        return g

    def _push(self, key: object, ext: _Extent) -> None:
        self._free[key] = ext
        self.num_free_used += ext.size
        self._tail = None

    def _free_private(self, n: int) -> None:
        """`n` blocks whose content can never hit (a finished request's, a private copy) join the queue's tail."""
        tail = self._tail
        if tail is None:
            tail = _Extent(0, 0)
            self._push(next(self._anon), tail)
            self._tail = tail
        tail.size += n
        self.num_free_used += n

    def _queue_run(self, g: _Group, lo: int, hi: int) -> None:
        """Blocks lo .. hi-1 of `g` (cached, now held by nobody) join the free queue's tail, hi-1 first."""
        key = next(self._anon)
        self._free[key] = g.runs[lo] = _PrefixRun(g, lo, hi, key)
        self.num_free_used += hi - lo
        self._tail = None
        g.version += 1

    def _queue_free(self, g: _Group, lo: int, hi: int) -> None:
        """Blocks lo .. hi-1 of `g`, which no request holds as part of its first blocks any more, join the queue
        where no gapped request holds them either: runs, highest first."""
        if not g.num_gapped:
            self._queue_run(g, lo, hi)
            return
        gapped = g.gapped
        i = hi - 1
        while i >= lo:
            if gapped[i]:
                i -= 1
                continue
            end = i + 1
            while i >= lo and gapped[i] == 0:
                i -= 1
            self._queue_run(g, i + 1, end)

    def _drop_holder(self, g: _Group, h: int) -> None:
        """One request fewer holds blocks 0 .. h-1 of `g` (as its first blocks); `top` follows."""
        lengths = g.lengths
        left = lengths[h] - 1
        if left:
            lengths[h] = left
        else:
            del lengths[h]
            if h == g.top:
                g.top = max(lengths) if lengths else 0

    def _free_prefix(self, req: Request) -> None:
        """Return `req`'s shared-prefix-region blocks, tail first: blocks left with no holder join the free queue
        (runs of consecutive blocks), its private copies (None) as extents of their own."""
        pb = req.prefix_blocks
        g = self._groups.get(req.prefix_id)  # type: ignore[arg-type]
        if req not in self._gapped:  # it holds blocks 0 .. h-1 (h = 0: none), then private copies
            h = self._holders.pop(req, 0)
            if len(pb) > h:
                self._free_private(len(pb) - h)
            if h:
                assert g is not None
                self._drop_holder(g, h)
                if g.top < h:  # nobody else held blocks top .. h-1 as their first blocks
                    self._queue_free(g, g.top, h)
            return
        self._gapped.remove(req)
        assert g is not None
        g.num_gapped -= 1
        gapped, top = g.gapped, g.top
        i = len(pb) - 1
        while i >= 0:  # block by block, tail first: private copies among its keys
            if pb[i] is None:
                j = i - 1
                while j >= 0 and pb[j] is None:
                    j -= 1
                self._free_private(i - j)
                i = j
                continue
            gapped[i] -= 1
            if gapped[i] or i < top:  # still held
                i -= 1
                continue
            end = i + 1
            i -= 1
            while i >= top and pb[i] is not None and gapped[i] == 1:
                gapped[i] = 0
                i -= 1
            self._queue_run(g, i + 1, end)

    def _touch(self, req: Request, hit: CacheHit) -> None:
        keys = hit.prefix_keys
        if keys:  # it holds blocks 0 .. n-1 of its group now: those that were free leave the queue
            assert not req.prefix_blocks  # (a request is looked up once per admission, holding none)
            n = len(keys)
            g = self._groups[keys[0][0]]
            if n > g.top:
                if g.num_free(g.top, n):
                    self._unqueue(g, g.top, n)
                g.top = n
            g.lengths[n] = g.lengths.get(n, 0) + 1
            self._holders[req] = n
            req.prefix_blocks.extend(keys)
        if hit.num_own:
            ext = self._free[hit.own_key]
            assert isinstance(ext, _Extent)
            ext.size -= hit.num_own  # the hit takes the extent's front; what is left can never hit again
            ext.hashed = 0
            self.num_free_used -= hit.num_own
            if ext.size == 0:
                del self._free[hit.own_key]
                self._head = None
            req.num_own_blocks += hit.num_own
        req.num_cached_tokens += hit.num_tokens
        req.num_slots = (len(req.prefix_blocks) + req.num_own_blocks) * self.block_size

    def _unqueue(self, g: _Group, lo: int, n: int) -> None:
        """Take the free blocks among blocks lo .. n-1 of `g` (lo >= top) out of the queue. Each run of them starts
        a queue entry (a run's lower blocks are free too, and the scan reaches them first), which loses its
        blocks below n."""
        free, runs, gapped = self._free, g.runs, g.gapped
        taken = 0
        i = lo
        while i < n:
            if g.num_gapped and gapped[i]:  # held by a gapped request: not free
                i += 1
                continue
            run = runs.pop(i)
            if run.hi <= n:
                del free[run.key]
                self._head = None
                end = run.hi
            else:
                run.lo = end = n
                runs[n] = run
            taken += end - i
            i = end
        self.num_free_used -= taken
        g.version += 1

    def _take(self, n: int) -> None:
        """Pop `n` blocks from the head of the free queue, evicting their cached content."""
        unused = self.num_unused
        if n <= unused:
            self.num_unused = unused - n
            return
        self.num_unused = 0
        n -= unused
        free = self._free
        while n:
            head = self._head
            if head is None:
                key = next(iter(free))
                ext = free[key]
            else:
                key, ext = head
            if isinstance(ext, _PrefixRun):  # cached prefix blocks, evicted from the run's head (its highest)
                g = ext.group
                size = ext.hi - ext.lo
                taken = min(size, n)
                g.cached[ext.hi - taken:ext.hi] = [False] * taken
                if taken == size:
                    del free[key]
                    del g.runs[ext.lo]
                    self._head = None
                else:
                    ext.hi -= taken
                    self._head = (key, ext)
                g.version += 1
            elif ext.size <= n:
                del free[key]
                self._head = None
                if ext is self._tail:
                    self._tail = None
                taken = ext.size
            else:  # evict from the extent's tail (freed first, so least recently useful)
                taken = n
                ext.size -= n
                if ext.hashed > ext.size:
                    ext.hashed = ext.size
                self._head = (key, ext)
            n -= taken
            self.num_free_used -= taken

    def _cache_prefix(self, req: Request, prefix_id: int, before: int, total: int) -> None:
        """Cache the shared-prefix blocks of `req` (whose prefix_id is `prefix_id`) that become full as tokens
        before..total are computed (private blocks need no bookkeeping: `free` counts the full ones); `req` holds
        them from now on."""
        bs = self.block_size
        region = self._prefix_region(req)
        lo, hi = before // bs, min(total // bs, region)
        if lo >= hi:
            return
        g = self._group(prefix_id, region)
        cached, keys, pb = g.cached, g.keys, req.prefix_blocks
        new = [i for i in range(lo, hi) if pb[i] is None and not cached[i]]  # (cached by another: a private copy)
        if not new:
            return
        for i in new:
            cached[i] = True
            pb[i] = keys[i]
        g.version += 1
        if req in self._gapped:
            for i in new:
                g.gapped[i] += 1
            return
        h = self._holders.get(req, 0)
        if new[0] == h and new[-1] == h + len(new) - 1:  # still its first blocks: 0 .. h + len(new) - 1
            if h:
                self._drop_holder(g, h)
            h += len(new)
            g.lengths[h] = g.lengths.get(h, 0) + 1
            g.top = max(g.top, h)
            self._holders[req] = h
            return
        gapped = g.gapped  # a gap: it is counted block by block from now on
        for i in range(h):
            gapped[i] += 1
        for i in new:
            gapped[i] += 1
        if h:
            del self._holders[req]
            self._drop_holder(g, h)  # (its blocks stay held: they count in `gapped` already)
        self._gapped.add(req)
        g.num_gapped += 1
