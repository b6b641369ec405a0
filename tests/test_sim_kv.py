"""Block manager and scheduler, without the cost model: block counts, LRU order, hits, preemption."""

from __future__ import annotations

from flopwise.sim.block_manager import NO_HIT, BlockManager
from flopwise.sim.decode_run import _chord_fill
from flopwise.sim.request import Request, RequestStatus
from flopwise.sim.scheduler import VllmScheduler


def _req(rid, prompt, out, prefix_id=None, prefix_tokens=0):
    return Request(request_id=rid, arrival_at=0.0, num_prompt_tokens=prompt, max_tokens=out, prefix_id=prefix_id,
                   num_prefix_tokens=prefix_tokens)


def test_allocate_counts_blocks_and_frees_them():
    kv = BlockManager(num_blocks=10, block_size=16, enable_prefix_caching=False)
    r = _req(0, 40, 5)
    assert kv.blocks_needed(r, 40) == 3  # ceil(40 / 16)
    assert kv.can_allocate(r, 40)
    kv.allocate(r, 40)
    assert (r.num_blocks, r.num_slots, kv.num_free_blocks) == (3, 48, 7)
    assert not kv.can_allocate(_req(1, 200, 1), 200)  # 13 blocks > 7 free
    kv.free(r, reusable=False)
    assert kv.num_free_blocks == 10


def test_prefix_hits_are_whole_blocks_capped_below_the_last_token():
    kv = BlockManager(num_blocks=100, block_size=16)
    a = _req(0, 64, 4, prefix_id=1, prefix_tokens=64)
    kv.allocate(a, 64)  # registers the 4 full prefix blocks
    assert kv.num_cached_prefix_blocks() == 4
    b = _req(1, 64, 4, prefix_id=1, prefix_tokens=64)
    hit = kv.get_computed_blocks(b)
    assert hit.num_tokens == 48  # (64 - 1) // 16 = 3 blocks: the last token is always computed
    assert hit.num_evictable == 0  # a still holds them
    c = _req(2, 100, 4, prefix_id=1, prefix_tokens=40)  # shares 40 tokens: 2 full blocks
    assert kv.get_computed_blocks(c).num_tokens == 32
    assert kv.get_computed_blocks(_req(3, 64, 4, prefix_id=2, prefix_tokens=64)) is NO_HIT


def test_lru_evicts_the_oldest_freed_blocks_tail_first():
    kv = BlockManager(num_blocks=6, block_size=16)
    a = _req(0, 48, 1, prefix_id=1, prefix_tokens=48)
    b = _req(1, 48, 1, prefix_id=2, prefix_tokens=48)
    kv.allocate(a, 48)
    kv.allocate(b, 48)
    kv.free(a, reusable=False)  # queue: (1,2) (1,1) (1,0)
    kv.free(b, reusable=False)  # then (2,2) (2,1) (2,0)
    c = _req(2, 64, 1)
    kv.allocate(c, 64)  # takes 4 blocks from the head: all of a's, then b's last
    assert kv.get_computed_blocks(_req(3, 64, 1, prefix_id=1, prefix_tokens=48)) is NO_HIT
    hit = kv.get_computed_blocks(_req(4, 64, 1, prefix_id=2, prefix_tokens=48))
    assert hit.prefix_keys == ((2, 0), (2, 1)) and hit.num_evictable == 2


def test_a_prefix_freed_by_holders_of_different_lengths_is_evicted_in_free_order():
    kv = BlockManager(num_blocks=8, block_size=16)
    a = _req(0, 64, 1, prefix_id=1, prefix_tokens=64)
    kv.allocate(a, 64)  # caches (1, 0) .. (1, 3)
    b = _req(1, 40, 1, prefix_id=1, prefix_tokens=32)
    hit = kv.get_computed_blocks(b)
    assert hit.prefix_keys == ((1, 0), (1, 1)) and hit.num_evictable == 0
    kv.allocate(b, 8, hit)  # + 1 private block: 3 never used left
    kv.free(a, reusable=False)  # blocks 3, 2 (b still holds 0, 1)
    kv.free(b, reusable=False)  # its private block, then blocks 1, 0
    assert kv.num_free_blocks == 8 and kv.num_cached_prefix_blocks() == 4
    probe = _req(2, 80, 1, prefix_id=1, prefix_tokens=64)
    assert kv.get_computed_blocks(probe).num_evictable == 4
    kv.allocate(_req(3, 80, 1), 80)  # 5 blocks: the 3 never used, then (1, 3) and (1, 2)
    assert kv.get_computed_blocks(probe).prefix_keys == ((1, 0), (1, 1))
    kv.allocate(_req(4, 32, 1), 32)  # b's private block, then (1, 1)
    hit = kv.get_computed_blocks(probe)
    assert hit.prefix_keys == ((1, 0),) and hit.num_evictable == 1 and kv.num_free_blocks == 1


def test_a_hit_on_a_free_block_takes_it_out_of_the_queue():
    kv = BlockManager(num_blocks=4, block_size=16)
    a = _req(0, 32, 1, prefix_id=1, prefix_tokens=32)
    kv.allocate(a, 32)
    kv.free(a, reusable=False)
    b = _req(1, 40, 1, prefix_id=1, prefix_tokens=32)
    hit = kv.get_computed_blocks(b)
    assert (hit.num_tokens, hit.num_evictable) == (32, 2)
    assert kv.blocks_needed(b, 8, hit) == 3  # 1 new block + 2 hit blocks leaving the free queue
    kv.allocate(b, 8, hit)
    assert kv.num_free_blocks == 1 and b.num_cached_tokens == 32


def _step(sched, step):
    out = sched.schedule(float(step))
    sched.postprocess(out, step, float(step + 1))
    return out


def test_tiny_pool_preempts_the_newest_request_at_a_predictable_step():
    # 4 blocks of 16. A and B: 16-token prompts. Step 1 prefills both (1 block each); steps 2..17 decode,
    # taking a 2nd block each at step 2 (slot 17). After step 17 each has computed 32 tokens; at step 18
    # A needs a 3rd block, none is free, so B (the newest) is preempted and A gets one of B's blocks.
    kv = BlockManager(num_blocks=4, block_size=16, enable_prefix_caching=False)
    sched = VllmScheduler(kv, max_num_seqs=8, max_num_batched_tokens=64)
    a, b = _req(0, 16, 40), _req(1, 16, 40)
    sched.add_request(a)
    sched.add_request(b)
    for step in range(1, 18):
        assert _step(sched, step).num_preempted == 0
    assert kv.num_free_blocks == 0 and a.num_computed_tokens == 32
    out = _step(sched, 18)
    assert out.num_preempted == 1 and out.reqs == [a]
    assert b.status == RequestStatus.PREEMPTED and b.num_preemptions == 1 and b.num_computed_tokens == 0
    assert list(sched.waiting) == [b] and b.num_output_tokens == 17
    assert kv.num_free_blocks == 1  # B's 2 blocks back, 1 taken by A
    assert a.num_output_tokens == 18


def test_reserving_admission_never_preempts_and_starts_b_when_a_finishes():
    """The same pool and requests under TensorRT-LLM's GUARANTEED_NO_EVICT (`reserve_full`): A's whole sequence
    is 16 + 40 - 1 = 55 tokens = 4 blocks, the whole pool, so B waits (no preemption, ever) until A has sampled
    its 40 tokens at step 40 and freed its blocks; B then starts at step 41."""
    kv = BlockManager(num_blocks=4, block_size=16, enable_prefix_caching=False)
    sched = VllmScheduler(kv, max_num_seqs=8, max_num_batched_tokens=64)
    sched.reserve_full = True
    a, b = _req(0, 16, 40), _req(1, 16, 40)
    sched.add_request(a)
    sched.add_request(b)
    for step in range(1, 41):
        out = _step(sched, step)
        assert out.num_preempted == 0 and out.reqs == [a]
    assert a.status == RequestStatus.FINISHED and a.num_output_tokens == 40 and sched.num_reserved_blocks == 0
    out = _step(sched, 41)
    assert out.reqs == [b] and sched.num_reserved_blocks == 4 and b.num_reserved_blocks == 4


def test_a_preempted_request_hits_its_own_blocks():
    kv = BlockManager(num_blocks=10, block_size=16)
    r = _req(0, 40, 10)
    kv.allocate(r, 40)
    r.num_computed_tokens = 40
    r.sample(0)
    r.num_preemptions = 1
    kv.free(r, reusable=True)  # 2 full private blocks cached, 1 partial
    r.num_computed_tokens = 0
    hit = kv.get_computed_blocks(r)
    assert (hit.num_tokens, hit.num_own, hit.num_evictable) == (32, 2, 2)


def test_chord_fill_is_exact_on_lines_and_close_on_convex_curves():
    assert _chord_fill(lambda j: 2.0 + 0.5 * j, 9) == [2.0 + 0.5 * j for j in range(1, 10)]
    calls = []

    def f(j):  # a decode step's cost: affine in the context, slightly convex
        calls.append(j)
        return 1e-2 + 1e-6 * j + 1e-14 * j * j

    vals = _chord_fill(f, 200)
    assert len(calls) < 40  # a few evaluations instead of 200
    assert max(abs(v - f(j)) / f(j) for j, v in enumerate(vals, 1)) < 2e-9
