"""The SGLang-like scheduler: hand-checkable steps (prefill-first, LPM order, reservation and retraction)."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from flopwise.api import deployment
from flopwise.cli import app
from flopwise.cost import batch_shape, step_time
from flopwise.cost.layout import layout
from flopwise.errors import WorkloadError
from flopwise.sim import SimConfig, simulate
from flopwise.sim import replica as engine_mod
from flopwise.sim.block_manager import BlockManager
from flopwise.sim.request import Request
from flopwise.sim.sglang_knobs import SglangKnobs, sglang_chunked_prefill_size, sglang_max_running_requests
from flopwise.sim.sglang_scheduler import SglangScheduler, _fits_to_the_end, sglang_settings
from flopwise.specs.hardware import get_hardware
from flopwise.workload import RequestSpec, Workload, build_workload

SGLANG = SimConfig(scheduler="sglang")

# hand-checked steps assume an engine that plans each step when the one before ends (vLLM 0.8-0.13); vLLM >= 0.14
# plans a step ahead, so a request that arrives during a step joins the step after the next
# (test_sim_engine.py::test_an_engine_that_schedules_ahead_admits_a_step_later)
SYNC = "vllm@0.13"


@pytest.fixture(scope="module")
def dep():
    return deployment("llama-3.1-8b", "h100-sxm", frontend="none", engine=SYNC)


def _t(dep, rows, logits=None):
    return step_time(dep, batch_shape(rows, layout(dep).windows, logits))


def _sched(num_blocks, *, caching=False, chunk=None, max_prefill=16384, policy="fcfs", conservativeness=1.0):
    kv = BlockManager(num_blocks=num_blocks, block_size=16, enable_prefix_caching=caching)
    return SglangScheduler(kv, max_running_requests=64, chunked_prefill_size=chunk, max_prefill_tokens=max_prefill,
                           schedule_policy=policy, schedule_conservativeness=conservativeness)


def _req(rid, prompt, out, prefix_id=None, prefix=0):
    return Request(request_id=rid, arrival_at=0.0, num_prompt_tokens=prompt, max_tokens=out, prefix_id=prefix_id,
                   num_prefix_tokens=prefix)


def _step(sched, step):
    out = sched.schedule(float(step))
    sched.postprocess(out, step, float(step) + 1.0)
    return out


# ---- prefill-first steps -----------------------------------------------------------------------------

def test_new_prefill_runs_as_its_own_step_before_the_next_decode(dep):
    # A (100 in, 6 out) decodes; B and C (200 in each) arrive half-way through A's first decode step.
    # SGLang: that step ends, then B and C prefill in a step of their own (A pauses), then all three decode.
    # vLLM: the step after the arrival decodes A first and prefills B and C in the same step.
    p0, d1 = _t(dep, [(100, 0)]), _t(dep, [(1, 100)])
    arrive = p0 + 0.5 * d1
    wl = Workload((RequestSpec(arrival_at=0.0, input_tokens=100, output_tokens=6),
                   RequestSpec(arrival_at=arrive, input_tokens=200, output_tokens=3),
                   RequestSpec(arrival_at=arrive, input_tokens=200, output_tokens=3)))
    a, b, c = simulate(dep, wl, SGLANG).records
    prefill = _t(dep, [(200, 0), (200, 0)])
    decode = _t(dep, [(1, 101), (1, 200), (1, 200)])
    assert a.token_times[:2] == pytest.approx([p0, p0 + d1], rel=1e-12)
    assert b.token_times[0] == c.token_times[0] == pytest.approx(p0 + d1 + prefill, rel=1e-12)
    assert a.token_times[2] == pytest.approx(p0 + d1 + prefill + decode, rel=1e-12)  # A's gap holds the prefill
    assert b.token_times[1] == pytest.approx(p0 + d1 + prefill + decode, rel=1e-12)

    va, vb, _ = simulate(dep, wl).records
    mixed = _t(dep, [(1, 101), (200, 0), (200, 0)])
    assert vb.token_times[0] == pytest.approx(p0 + d1 + mixed, rel=1e-12)
    assert va.token_times[2] == pytest.approx(p0 + d1 + mixed, rel=1e-12)
    assert b.ttft_ms < vb.ttft_ms  # the new request's first token is sooner ...
    assert a.token_times[2] - a.token_times[1] > va.token_times[2] - va.token_times[1]  # ... A's gap longer

    # --enable-mixed-chunk puts the decodes in the prefill step: the same step as vLLM's here
    mixed_cfg = SimConfig(scheduler="sglang", sglang=SglangKnobs(enable_mixed_chunk=True))
    ma, mb, _ = simulate(dep, wl, mixed_cfg).records
    assert mb.token_times[0] == pytest.approx(vb.token_times[0], rel=1e-12)
    assert ma.token_times[2] == pytest.approx(va.token_times[2], rel=1e-12)


def test_chunked_prefill_pauses_decodes_until_the_last_chunk(dep):
    # --chunked-prefill-size 512: a 1200-token prompt arriving while A decodes takes three prefill steps
    # (512, 512, 176) in a row; A emits nothing in between.
    p0, d1 = _t(dep, [(100, 0)]), _t(dep, [(1, 100)])
    wl = Workload((RequestSpec(arrival_at=0.0, input_tokens=100, output_tokens=4), RequestSpec(arrival_at=p0 + 0.5 * d1,
                                                                                               input_tokens=1200,
                                                                                               output_tokens=2)))
    cfg = SimConfig(scheduler="sglang", sglang=SglangKnobs(chunked_prefill_size=512))
    a, b = simulate(dep, wl, cfg).records
    chunks = _t(dep, [(512, 0)], 0) + _t(dep, [(512, 512)], 0) + _t(dep, [(176, 1024)])
    assert b.token_times[0] == pytest.approx(p0 + d1 + chunks, rel=1e-12)
    assert a.token_times[2] == pytest.approx(p0 + d1 + chunks + _t(dep, [(1, 101), (1, 1200)]), rel=1e-12)


def test_recv_interval_reads_new_requests_every_nth_decode_step(dep):
    # --scheduler-recv-interval 4: after A's prefill the engine reads at once (nothing there), then only at the
    # plans after its 4th, 8th, ... decode step. B arrives during the 6th: it is read after the 8th (N = 1: after
    # the 6th) and prefills at once.
    p0 = _t(dep, [(100, 0)])
    d = [_t(dep, [(1, 100 + j)]) for j in range(12)]  # A's decode steps 1..12
    ends = [p0 + sum(d[:m]) for m in range(13)]  # ends[m]: the end of decode step m
    wl = Workload((RequestSpec(arrival_at=0.0, input_tokens=100, output_tokens=30),
                   RequestSpec(arrival_at=ends[5] + 0.5 * d[5], input_tokens=200, output_tokens=3)))
    prefill = _t(dep, [(200, 0)])
    for n, read_at in ((1, 6), (4, 8), (3, 6), (5, 10)):
        cfg = SimConfig(scheduler="sglang", sglang=SglangKnobs(scheduler_recv_interval=n))
        a, b = simulate(dep, wl, cfg).records
        assert a.token_times[:read_at + 1] == pytest.approx(ends[:read_at + 1], rel=1e-9)
        assert b.token_times[0] == pytest.approx(ends[read_at] + prefill, rel=1e-9), n
    # after B's prefill the engine reads at the next plan again: C, arriving during that prefill, is read at once
    c_at = ends[8] + 0.5 * prefill
    wl3 = Workload((*wl.requests, RequestSpec(arrival_at=c_at, input_tokens=50, output_tokens=2)))
    _, b, c = simulate(dep, wl3, SimConfig(scheduler="sglang", sglang=SglangKnobs(scheduler_recv_interval=4))).records
    assert c.token_times[0] == pytest.approx(b.token_times[0] + _t(dep, [(50, 0)]), rel=1e-9)
    # above 1000 decode steps a read comes only when the engine idles: B waits for A's last token (A's 30 outputs)
    far = SimConfig(scheduler="sglang", sglang=SglangKnobs(scheduler_recv_interval=1003))
    a2, b2, _ = simulate(dep, wl3, far).records
    assert b2.token_times[0] > a2.token_times[-1]
    with pytest.raises(WorkloadError, match="scheduler-recv-interval"):
        SglangKnobs(scheduler_recv_interval=0)


# ---- queue order ---------------------------------------------------------------------------------------

def _prefix_queue(**policy):
    """W (prefix group 1) has run; then A (group 2), B (group 1), C (group 2) and D (no prefix) wait, under a
    144-token prefill budget with prefix caching."""
    sched = _sched(200, caching=True, chunk=144, **policy)
    sched.add_request(_req(0, 64, 1, 1, 64))
    _step(sched, 0)
    reqs = [_req(1, 64, 4, 2, 64), _req(2, 64, 4, 1, 64), _req(3, 64, 4, 2, 64), _req(4, 64, 4)]
    for r in reqs:
        sched.add_request(r)
    return sched, reqs


def test_lpm_puts_cached_prefixes_first_and_defers_a_shared_uncached_one():
    # W (prefix group 1, 64 tokens) runs first and leaves 4 blocks of group 1 in the cache. Then the queue is
    # A (group 2, cold), B (group 1: hit capped at 63 tokens -> 3 blocks = 48), C (group 2), D (no prefix).
    # LPM: B (-48), A (0), D (0), C last: it shares 64 >= 32 tokens with A, which computes them first.
    # A 144-token prefill budget takes B 16 + A 64 + D 64; next step C hits A's blocks and computes 16.
    sched, (a, b, c, d) = _prefix_queue(policy="lpm")
    out = _step(sched, 1)
    assert out.reqs == [b, a, d] and out.num_new == [16, 64, 64]
    out = _step(sched, 2)
    assert out.reqs == [c] and out.num_new == [16]
    assert c.num_cached_tokens == 48


def test_fcfs_keeps_arrival_order_and_shares_nothing_within_a_batch():
    # Same queue, FCFS: A 64 + B 16 + C 64 fill the 144-token budget; C computes group 2's prefix again
    # because A's blocks are only cached after the batch runs (a radix tree is updated after the forward).
    sched, (a, b, c, d) = _prefix_queue()
    out = _step(sched, 1)
    assert out.reqs == [a, b, c] and out.num_new == [64, 16, 64]
    assert c.num_cached_tokens == 0
    assert list(sched.waiting) == [d]


# ---- reservation and retraction ------------------------------------------------------------------------

def test_reservation_refuses_what_the_ratio_says_will_not_fit():
    # 10 blocks = 160 tokens. A (32 in, 80 out) is admitted: 32 + 80 = 112 < 160. After one decode step
    # (ratio 0.7 - (0.7 - 0.098)/600) B (16 in, 80 out) needs 96 against 7 free blocks (112 tokens) minus
    # 78 x 0.699 = 54.5 reserved for A: refused, and the batch is marked full until A finishes.
    sched = _sched(10)
    a, b = _req(0, 32, 80), _req(1, 16, 80)
    sched.add_request(a)
    _step(sched, 0)
    _step(sched, 1)
    assert sched.new_token_ratio == pytest.approx(0.7 - (0.7 - 0.098) / 600, rel=1e-12)
    sched.add_request(b)
    out = _step(sched, 2)
    assert out.reqs == [a] and sched.batch_is_full and list(sched.waiting) == [b]


def test_no_eviction_check_by_hand():
    """SGLang's ignore_eos admission: sorted by tokens left, (5, 30), (10, 100), (20, 50) with C free tokens:
    C - 5 x 3 > 3, C + 30 - 10 x 2 > 2 and C + 130 - 20 > 1; so C = 19 fits (4 > 3) and C = 18 does not."""
    states = [(10, 100), (20, 50)]
    assert not _fits_to_the_end(states, (5, 30), 18) and states == [(10, 100), (20, 50)]
    assert _fits_to_the_end(states, (5, 30), 19) and states == [(5, 30), (10, 100), (20, 50)]
    assert not _fits_to_the_end([(10, 100)], (0, 7), 10)  # nothing left to generate: only the others' growth counts
    assert _fits_to_the_end([(10, 100)], (10, 0), 23) and not _fits_to_the_end([(10, 100)], (10, 0), 22)


def test_ignore_eos_without_radix_cache_reserves_every_output_in_full():
    # A pool of 300 one-token blocks. A (100 in, 60 out) runs; after its prefill step it holds 101 and has 59
    # left. B (100 in, 60 out) arrives. At --schedule-conservativeness 0.2 the ratio is ~0.14: 100 + 60 < 199 free
    # - 59 x 0.14 reserved, so B is admitted. With ignore_eos (radix cache off) SGLang checks the end instead:
    # 199 - 100 = 99 free after B's prompt, and when A finishes both have grown by 59: 99 - 2 x 59 <= 2, refused
    # (A and B at full length need 320 tokens of the 300).
    outs = {}
    for eos in (False, True):
        kv = BlockManager(num_blocks=300, block_size=1, enable_prefix_caching=False)
        sched = SglangScheduler(kv, max_running_requests=64, chunked_prefill_size=None, max_prefill_tokens=16384,
                                schedule_conservativeness=0.2, ignore_eos=eos)
        a, b = _req(0, 100, 60), _req(1, 100, 60)
        sched.add_request(a)
        _step(sched, 0)
        sched.add_request(b)
        outs[eos] = (_step(sched, 1).reqs, sched.batch_is_full)
    assert outs[False] == ([outs[False][0][0]], False) and outs[False][0][0].request_id == 1
    assert [r.request_id for r in outs[True][0]] == [0] and outs[True][1]  # A decodes; the batch is full
    kv = BlockManager(num_blocks=300, block_size=1, enable_prefix_caching=True)  # radix cache on: the ratio path
    assert not SglangScheduler(kv, max_running_requests=64, chunked_prefill_size=None, max_prefill_tokens=16384,
                               ignore_eos=True).no_eviction_admission


def test_retraction_under_a_tiny_pool_is_counted():
    # The same pool with --schedule-conservativeness 0.2 (ratio 0.14): B is admitted at step 2 (96 < 112 -
    # 78 x 0.1398), though A and B need 7 + 6 blocks at their ends. Blocks are taken when a context reaches a
    # multiple of 16: A (context 33 + j - 3 at step j) at steps 18, 34, 50, B (16 + j - 3) at 3, 19, 35, 51.
    # At step 51 (0-based) the pool is empty and B needs a block: B, with fewer outputs (49 vs 50), is
    # retracted; the ratio becomes (50 + 20) / 80. B cannot return (65 + 31 tokens > 64 free - 29 x 0.875)
    # until A finishes at step 80; it then recomputes its 16 + 49 tokens at step 81 and finishes at 111.
    sched = _sched(10, conservativeness=0.2)
    a, b = _req(0, 32, 80), _req(1, 16, 80)
    sched.add_request(a)
    _step(sched, 0)
    _step(sched, 1)
    sched.add_request(b)
    out = _step(sched, 2)
    assert out.reqs == [b]  # prefill-first: A pauses
    step = 3
    while not sched.num_retractions:
        out = _step(sched, step)
        step += 1
    assert step - 1 == 51 and out.num_preempted == 1 and out.reqs == [a]
    assert b.num_preemptions == 1 and a.num_preemptions == 0
    assert sched.new_token_ratio == pytest.approx((50 + 20) / 80, rel=1e-12)
    assert list(sched.waiting) == [b] and sched.kv.num_free_blocks == 4
    while sched.has_work:
        out = _step(sched, step)
        if b in out.reqs and out.num_new[out.reqs.index(b)] > 1:
            assert step == 81 and out.num_new == [65]
        step += 1
    assert a.token_steps == [0, 2, 3, 81]
    assert b.token_steps == [2, 51, 81, 112]
    assert sched.num_retractions == 1


def test_retractions_count_as_preemptions_in_the_summary_and_runs_match_steps(dep, monkeypatch):
    # A pool of 10,640 tokens under 24 requests of 200 + 300 tokens at once: admission reserves only 0.7 of
    # the running outputs, so a retraction follows (vLLM preempts 4 here); fast-forwarded decode runs
    # (with the ratio's decay caught up afterwards) give the same result as stepping one step at a time.
    small = deployment("llama-3.1-8b", "h100-sxm", gpu_memory_utilization=0.232223, frontend="none",
                       max_num_batched_tokens=8192)  # the server's budget: the pool as sized above
    wl = Workload(tuple(RequestSpec(arrival_at=0.0, input_tokens=200, output_tokens=300) for _ in range(24)))
    fast = simulate(small, wl, SGLANG)
    s = fast.summary()
    assert s["preemptions"] == sum(r.num_preemptions for r in fast.requests) > 0
    assert all(len(r.token_times) == 300 for r in fast.records)
    monkeypatch.setattr(engine_mod, "plan_decode_run", lambda sched, max_decodes: 0)
    slow = simulate(small, wl, SGLANG)
    assert slow.summary()["num_steps"] == s["num_steps"]
    assert [r.num_preemptions for r in slow.requests] == [r.num_preemptions for r in fast.requests]
    for f, w in zip(fast.records, slow.records, strict=True):
        assert f.token_times == pytest.approx(w.token_times, rel=1e-9)


def test_chat_runs_match_step_by_step(dep, monkeypatch):
    wl = build_workload(num_requests=80, workload="chat", request_rate=10.0, seed=5)
    fast = simulate(dep, wl, SGLANG)
    monkeypatch.setattr(engine_mod, "plan_decode_run", lambda sched, max_decodes: 0)
    slow = simulate(dep, wl, SGLANG)
    assert fast.summary()["num_steps"] == slow.summary()["num_steps"]
    for f, s in zip(fast.records, slow.records, strict=True):
        assert f.token_times == pytest.approx(s.token_times, rel=1e-9)


# ---- knobs -----------------------------------------------------------------------------------------------

def test_defaults_follow_sglang_server_args(dep):
    assert sglang_chunked_prefill_size(get_hardware("h100-sxm")) == 8192
    assert sglang_chunked_prefill_size(get_hardware("h200")) == 8192
    assert sglang_chunked_prefill_size(get_hardware("l40s")) == 4096
    assert sglang_chunked_prefill_size(get_hardware("a10g")) == 4096  # 2048 to 0.5.19 (the default is 0.5.23)
    assert sglang_chunked_prefill_size(get_hardware("b200")) == 16384
    # 442,496 KV tokens / 131,072 context x 512 = 1728 -> clamped up to 2048
    assert sglang_max_running_requests(442_496, 131_072) == 2048
    assert sglang_max_running_requests(442_496, 8192) == 4096
    assert sglang_max_running_requests(3000, 8192) == 1500
    st = sglang_settings(dep, SGLANG)
    assert st["chunked_prefill_size"] == 8192 and st["max_prefill_tokens"] == 16384
    assert st["schedule_policy"] == "fcfs" and st["enable_mixed_chunk"] is False
    off = sglang_settings(dep, SimConfig(scheduler="sglang", enable_chunked_prefill=False))
    assert off["chunked_prefill_size"] is None
    with pytest.raises(WorkloadError, match="schedule-policy"):
        SglangKnobs(schedule_policy="lof")
    with pytest.raises(WorkloadError, match="chunked-prefill-size"):
        SglangKnobs(chunked_prefill_size=0)


def test_cli_flags_reach_the_scheduler():
    r = CliRunner().invoke(app, ["simulate", "--scheduler", "sglang", "--gpu", "l40s", "--input-len", "300",
                                 "--output-len", "8", "--num-requests", "20", "--request-rate", "5",
                                 "--schedule-policy", "lpm", "--max-running-requests", "4",
                                 "--schedule-conservativeness", "0.5", "--scheduler-recv-interval", "3", "--ignore-eos",
                                 "--json"],
                           catch_exceptions=False)
    assert r.exit_code == 0
    d = json.loads(r.stdout)
    assert d["setup"]["scheduler"] == "sglang" and d["num_requests"] == 20
    assert d["setup"]["sglang"] == {"max_running_requests": 4, "chunked_prefill_size": 4096,
                                    "max_prefill_tokens": 16384, "schedule_policy": "lpm",
                                    "schedule_conservativeness": 0.5, "enable_mixed_chunk": False, "ignore_eos": True,
                                    "scheduler_recv_interval": 3}
    assert d["running_batch"]["max"] <= 4


def test_dp_attention_splits_sglangs_chunk_and_eases_admission():
    """SGLang --enable-dp-attention (ServerArgs): each rank prefills chunked_prefill_size // dp_size tokens a step
    (// 2 before 0.4.5) and admits at schedule_conservativeness x 0.3; vLLM and TensorRT-LLM ranks keep the whole
    budget each."""
    def dep(engine, ep=8):
        return deployment("deepseek-v3", "h200", engine=engine, weights="fp8", tp=1, dp=8, ep=ep)

    new, old = dep("sglang@0.5.6"), dep("sglang@0.4.4", ep=1)  # 0.4.x: DP attention over TP-sharded experts
    assert (new.token_budget, old.token_budget, dep("vllm@0.15.0").token_budget) == (8192, 4096 * 8, 8192 * 8)
    s = sglang_settings(new, SimConfig())
    assert s["chunked_prefill_size"] == 8192 and s["schedule_conservativeness"] == pytest.approx(0.3)
    tp8 = deployment("deepseek-v3", "h200", engine="sglang@0.5.6", weights="fp8", tp=8)
    assert sglang_settings(tp8, SimConfig())["schedule_conservativeness"] == 1.0
