"""Hand-checkable simulator cases: each expected number is computed from the cost model step by step."""

from __future__ import annotations

import math

import pytest

from flopwise.api import deployment, estimate
from flopwise.cost import batch_shape, step_time
from flopwise.cost.layout import layout
from flopwise.sim import SimConfig, simulate
from flopwise.sim import replica as engine_mod
from flopwise.workload import RequestSpec, Workload, build_workload

# hand-checked steps assume an engine that plans each step when the one before ends (vLLM 0.8-0.13); vLLM >= 0.14
# plans a step ahead, so a request that arrives during a step joins the step after the next
# (test_sim_engine.py::test_an_engine_that_schedules_ahead_admits_a_step_later)
SYNC = "vllm@0.13"


@pytest.fixture(scope="module")
def dep():
    return deployment("llama-3.1-8b", "h100-sxm", frontend="none", engine=SYNC)  # the engine alone: hand-checked steps


def _t(dep, rows, logits=None):
    return step_time(dep, batch_shape(rows, layout(dep).windows, logits))


def test_one_request_reproduces_the_static_estimate(dep):
    # <= 33 decode steps: the estimate is exact, and so must the simulator be (up to its 1e-9 interpolation).
    e = estimate("llama-3.1-8b", "h100-sxm", batch=1, input_len=512, output_len=20, engine=SYNC)
    s = simulate(dep, Workload((RequestSpec(arrival_at=0.0, input_tokens=512, output_tokens=20),))).summary()
    assert s["ttft_ms"]["mean"] == e.ttft_ms
    assert s["tpot_ms"]["mean"] == pytest.approx(e.tpot_ms, rel=1e-9)
    assert s["e2e_ms"]["mean"] == pytest.approx(e.e2e_ms, rel=1e-9)
    # longer outputs: the estimate averages 33 sampled contexts (its own error is well under 0.1%)
    e = estimate("llama-3.1-8b", "h100-sxm", batch=1, input_len=512, output_len=400, engine=SYNC)
    s = simulate(dep, Workload((RequestSpec(arrival_at=0.0, input_tokens=512, output_tokens=400),))).summary()
    assert s["tpot_ms"]["mean"] == pytest.approx(e.tpot_ms, rel=1e-4)
    assert s["num_steps"] == 400


def test_two_requests_split_prefill_under_the_token_budget():
    # budget 1000, two 600-token prompts at t=0 (vLLM: running first, then FCFS waiting, chunked):
    #   step 1: A prefills 600, B gets the remaining 400 (chunk; emits no token)
    #   step 2: A decodes 1 (context 600), B prefills its last 200 (context 400) and emits its first token
    dep = deployment("llama-3.1-8b", "h100-sxm", max_num_batched_tokens=1000, frontend="none", engine=SYNC)
    res = simulate(dep, Workload((RequestSpec(arrival_at=0.0, input_tokens=600, output_tokens=3),
                                  RequestSpec(arrival_at=0.0, input_tokens=600, output_tokens=3))))
    s1 = _t(dep, [(600, 0), (400, 0)], 1)  # only A's row produces a token
    s2 = _t(dep, [(1, 600), (200, 400)], 2)
    a, b = res.records
    assert a.token_times[0] == s1
    assert b.token_times[0] == s1 + s2
    assert a.token_times[1] == s1 + s2
    s3 = _t(dep, [(1, 601), (1, 600)])
    assert b.token_times[1] == pytest.approx(s1 + s2 + s3, rel=1e-12)


def test_fully_shared_prefix_skips_its_prefill(dep):
    # Both prompts are one 512-token prefix. The second arrives after the first has finished: its hit is
    # capped at num_tokens - 1 = 511 -> 31 full blocks (496 tokens), so it computes 16 tokens.
    wl = Workload((RequestSpec(arrival_at=0.0, input_tokens=512, output_tokens=4, prefix_id=7, prefix_tokens=512),
                   RequestSpec(arrival_at=10.0, input_tokens=512, output_tokens=4, prefix_id=7, prefix_tokens=512)))
    res = simulate(dep, wl)
    first, second = res.records
    assert first.ttft_ms == pytest.approx(_t(dep, [(512, 0)]) * 1e3, rel=1e-12)
    assert second.ttft_ms == pytest.approx(_t(dep, [(16, 496)]) * 1e3, rel=1e-9)
    assert res.requests[1].num_cached_tokens == 496
    off = simulate(dep, wl, SimConfig(enable_prefix_caching=False)).records[1]
    assert off.ttft_ms == pytest.approx(first.ttft_ms, rel=1e-12)


def test_decode_runs_match_step_by_step(dep, monkeypatch):
    wl = build_workload(num_requests=60, workload="chat", request_rate=8.0, seed=3)
    fast = simulate(dep, wl)
    monkeypatch.setattr(engine_mod, "plan_decode_run", lambda sched, max_decodes: 0)
    slow = simulate(dep, wl)
    for f, s in zip(fast.records, slow.records, strict=True):
        assert len(f.token_times) == len(s.token_times)
        assert f.token_times == pytest.approx(s.token_times, rel=1e-9)
    assert fast.summary()["num_steps"] == slow.summary()["num_steps"]


def test_littles_law_on_a_long_poisson_run(dep):
    # L = lambda * W: the engine's own time-averaged occupancy (running + waiting, from its step samples)
    # against the arrival rate times the mean time in system (from the request records).
    res = simulate(dep, build_workload(num_requests=1500, workload="chat", request_rate=6.0, seed=1))
    s = res.summary()
    occupancy = sum(sum(r * d for r, d in zip(tl.num_running, tl.sample_s, strict=True)) +
                    sum(w * d for w, d in zip(tl.num_waiting, tl.sample_s, strict=True)) for tl in res.timelines)
    L = occupancy / s["duration_s"]
    lam = s["num_requests"] / s["duration_s"]
    W = s["e2e_ms"]["mean"] / 1e3
    assert L == pytest.approx(lam * W, rel=0.03)


def test_seed_determinism(dep):
    a = simulate(dep, build_workload(num_requests=200, workload="chat", request_rate=5.0, seed=11)).summary()
    b = simulate(dep, build_workload(num_requests=200, workload="chat", request_rate=5.0, seed=11)).summary()
    c = simulate(dep, build_workload(num_requests=200, workload="chat", request_rate=5.0, seed=12)).summary()
    for k in ("ttft_ms", "tpot_ms", "e2e_ms", "duration_s", "num_steps"):
        assert a[k] == b[k]
    assert a["ttft_ms"] != c["ttft_ms"]


def test_static_batching_waits_for_a_full_batch():
    dep = deployment("llama-3.1-8b", "h100-sxm", max_num_seqs=4, frontend="none", engine=SYNC)
    wl = Workload(tuple(RequestSpec(arrival_at=float(i), input_tokens=100, output_tokens=5) for i in range(4)))
    res = simulate(dep, wl, SimConfig(scheduler="static"))
    assert [r.first_scheduled_at for r in res.records] == [3.0] * 4
    prefill = _t(dep, [(100, 0)] * 4)
    assert [r.token_times[0] for r in res.records] == [3.0 + prefill] * 4
    cont = simulate(dep, wl).summary()
    assert cont["ttft_ms"]["mean"] < res.summary()["ttft_ms"]["mean"]


def test_closed_loop_keeps_concurrency_clients_busy(dep):
    wl = build_workload(num_requests=12, input_len=128, output_len=8, concurrency=3)
    res = simulate(dep, wl)
    s = res.summary()
    assert s["running_batch"]["max"] == 3
    # the 4th request is sent when the first completes
    recs = res.records
    assert recs[3].arrival_at == pytest.approx(min(r.token_times[-1] for r in recs[:3]))


def test_staggered_closed_loop_sends_prefill_the_first_request_alone(dep):
    """client_stagger_s: sends of one instant reach the engine that far apart, so an idle engine prefills the
    first request alone and the others together in the next step (vLLM's 1 + (N - 1) waves); a request sent
    on a completion misses the step scheduled at that completion."""
    wl = Workload(tuple(RequestSpec(arrival_at=0.0, input_tokens=128, output_tokens=4) for _ in range(6)),
                  concurrency=3)
    d = 1e-3
    res = simulate(dep, wl, SimConfig(client_stagger_s=d))
    recs = res.records
    assert [r.arrival_at for r in recs[:3]] == [0.0, d, 2 * d]
    one, two = _t(dep, [(128, 0)]), _t(dep, [(1, 128), (128, 0), (128, 0)])
    assert recs[0].token_times[0] == pytest.approx(one)
    assert recs[0].token_times[1] == recs[1].token_times[0] == recs[2].token_times[0] == pytest.approx(one + two)
    # the first request is a token ahead and completes a step before the others; its successor arrives d later,
    # after the next step (the others' last decode) was scheduled without it
    done = recs[0].token_times[-1]
    assert recs[3].arrival_at == pytest.approx(done + d)
    assert recs[3].first_scheduled_at == pytest.approx(recs[1].token_times[-1])
    # 0 (the default) keeps simultaneous sends together: one prefill step of three
    plain = simulate(dep, wl).records
    assert [r.arrival_at for r in plain[:3]] == [0.0] * 3
    assert plain[0].token_times[0] == plain[2].token_times[0] == pytest.approx(_t(dep, [(128, 0)] * 3))


def test_replicas_split_the_stream(dep):
    two = deployment("llama-3.1-8b", "h100-sxm", num_gpus=2, frontend="none", engine=SYNC)
    wl = build_workload(num_requests=100, input_len=256, output_len=32, request_rate=math.inf)
    s1, s2 = simulate(dep, wl).summary(), simulate(two, wl).summary()
    assert s2["num_requests"] == 100
    assert s2["duration_s"] < s1["duration_s"]
    assert len(simulate(two, wl).timelines) == 2


def test_an_engine_that_schedules_ahead_admits_a_step_later():
    """vLLM >= 0.14 (async scheduling) plans step k+1 when step k starts: A (128 in) arrives at an idle engine and
    prefills alone; B and C arrive 1 and 2 ms later, during that prefill, which the plan of step 2 (A's first
    decode, alone) had already been made without them; they prefill in step 3, with A's second decode. A
    synchronous engine (vLLM 0.13) prefills them in step 2."""
    wl = Workload((RequestSpec(arrival_at=0.0, input_tokens=128, output_tokens=4),
                   RequestSpec(arrival_at=1e-3, input_tokens=128, output_tokens=4),
                   RequestSpec(arrival_at=2e-3, input_tokens=128, output_tokens=4)))
    ahead = deployment("llama-3.1-8b", "h100-sxm", frontend="none")
    assert ahead.engine.host.async_scheduling
    p0 = _t(ahead, [(128, 0)])
    assert p0 > 2e-3
    d1 = _t(ahead, [(1, 128)])
    s3 = _t(ahead, [(1, 129), (128, 0), (128, 0)])
    a, b, c = simulate(ahead, wl).records
    assert a.token_times[:3] == pytest.approx([p0, p0 + d1, p0 + d1 + s3], rel=1e-12)
    assert b.token_times[0] == c.token_times[0] == pytest.approx(p0 + d1 + s3, rel=1e-12)
    sync = deployment("llama-3.1-8b", "h100-sxm", frontend="none", engine=SYNC)
    sa, sb, _ = simulate(sync, wl).records
    s2 = _t(sync, [(1, 128), (128, 0), (128, 0)])
    assert sb.token_times[0] == sa.token_times[1] == pytest.approx(_t(sync, [(128, 0)]) + s2, rel=1e-12)


def test_capped_open_loop_sends_at_arrival_or_at_the_completion_that_frees_a_slot():
    """`vllm bench serve --request-rate R --max-concurrency C` (`Workload.max_concurrency`, `CappedLoop`): request i
    is sent at max(its arrival, the completion that frees a slot), in arrival order, and the server sees it then.
    Hand trace, cap 2, arrivals 0 / 0.1 / 0.2 / 0.3 s: r0 and r1 go at their arrivals; r2 (arrived 0.2) waits for
    the completion at 0.5 s; r3 (arrived 0.3) for the one at 0.6 s."""
    from flopwise.sim.arrivals import CappedLoop, ClosedLoop, OpenLoop, request_source

    items = [(k, RequestSpec(arrival_at=0.1 * k, input_tokens=8, output_tokens=4)) for k in range(4)]
    src = CappedLoop(items, 2)
    assert [r.request_id for r in src.pop_due(0.0)] == [0] and src.next_at() == pytest.approx(0.1)
    assert [(r.request_id, r.arrival_at) for r in src.pop_due(0.1)] == [(1, pytest.approx(0.1))]
    assert src.next_at() is None and src.more_coming  # both slots taken: the next send waits on a completion
    src.on_finished(1, 0.5)
    assert src.next_at() == 0.5 and src.pop_due(0.45) == []
    assert [(r.request_id, r.arrival_at) for r in src.pop_due(0.5)] == [(2, 0.5)]
    src.on_finished(1, 0.6)
    assert [(r.request_id, r.arrival_at) for r in src.pop_due(0.6)] == [(3, 0.6)]
    assert src.next_at() is None and not src.more_coming
    # a completion reported ahead of the driver's clock (its last token reaches the client after the step ended)
    # holds back only the requests that find no free slot: cap 3, r0's slot frees at 0.35 s; r1 and r2 take the
    # spare slots at their arrivals, r3 (arrived 0.3) waits for r0's
    early = CappedLoop(items, 3)
    assert [r.request_id for r in early.pop_due(0.0)] == [0]
    early.on_finished(1, 0.35)
    assert [(r.request_id, r.arrival_at) for r in early.pop_due(0.3)] == [
        (1, pytest.approx(0.1)), (2, pytest.approx(0.2))]
    assert early.next_at() == 0.35 and [(r.request_id, r.arrival_at) for r in early.pop_due(0.35)] == [(3, 0.35)]
    assert isinstance(request_source(items, concurrency=2), ClosedLoop)
    assert isinstance(request_source(items), OpenLoop)
    # in a simulation: never more than the cap in flight; a cap of 1 sends as a closed loop of one client does;
    # a cap no run reaches changes nothing
    dep = deployment("llama-3.1-8b", "h100-sxm")
    capped = build_workload(num_requests=60, input_len=256, output_len=64, request_rate=40.0, max_concurrency=4,
                            seed=3)
    s = simulate(dep, capped).summary()
    assert s["running_batch"]["max"] <= 4 and s["setup"]["max_concurrency"] == 4 and s["num_completed"] == 60
    free = simulate(dep, build_workload(num_requests=60, input_len=256, output_len=64, request_rate=40.0,
                                        seed=3)).summary()
    assert free["running_batch"]["max"] > 4
    one = simulate(dep, build_workload(num_requests=20, input_len=256, output_len=64, request_rate=1000.0,
                                       max_concurrency=1, seed=3)).summary()
    closed = simulate(dep, build_workload(num_requests=20, input_len=256, output_len=64, concurrency=1,
                                          seed=3)).summary()
    assert one["ttft_ms"]["mean"] == pytest.approx(closed["ttft_ms"]["mean"], rel=0.02)
    assert one["e2e_ms"]["mean"] == pytest.approx(closed["e2e_ms"]["mean"], rel=0.02)
    wide = simulate(dep, build_workload(num_requests=60, input_len=256, output_len=64, request_rate=40.0,
                                        max_concurrency=1000, seed=3)).summary()
    assert wide["ttft_ms"] == free["ttft_ms"] and wide["output_tokens_per_s"] == free["output_tokens_per_s"]


def test_an_unchunked_prompt_waits_for_the_running_decodes_to_leave_budget_room():
    # budget 1000, chunked prefill off (TensorRT-LLM's default): A (300 in, 5 out) and B (1,000 in) at t=0
    #   step 1: A prefills 300; B does not fit the 700 left and, unchunked, waits (behind A's admission: not counted)
    #   steps 2-5: A decodes (1 token each), leaving 999 < 1,000: B waits for A to finish (one stall)
    #   step 6: B prefills its 1,000 tokens alone and emits its first token
    dep = deployment("llama-3.1-8b", "h100-sxm", max_num_batched_tokens=1000, frontend="none", engine=SYNC)
    res = simulate(dep, Workload((RequestSpec(arrival_at=0.0, input_tokens=300, output_tokens=5),
                                  RequestSpec(arrival_at=0.0, input_tokens=1000, output_tokens=2))),
                   SimConfig(enable_chunked_prefill=False))
    steps = [_t(dep, [(300, 0)])] + [_t(dep, [(1, 300 + i)]) for i in range(4)] + [_t(dep, [(1000, 0)])]
    a, b = res.records
    assert a.token_times[-1] == pytest.approx(sum(steps[:5]), rel=1e-12)
    assert b.token_times[0] == pytest.approx(sum(steps), rel=1e-12)
    s = res.summary()
    assert s["budget_stalls"] == 1
    # with B one token shorter it only waits for step 2 (999 fits beside A's decode): no stall
    res = simulate(dep, Workload((RequestSpec(arrival_at=0.0, input_tokens=300, output_tokens=5),
                                  RequestSpec(arrival_at=0.0, input_tokens=999, output_tokens=2))),
                   SimConfig(enable_chunked_prefill=False))
    assert res.summary()["budget_stalls"] == 0
    assert res.records[1].token_times[0] == pytest.approx(steps[0] + _t(dep, [(1, 300), (999, 0)], 2), rel=1e-12)
    # with A done after its prefill (one output token), B waits one step behind A's admission only: no stall
    res = simulate(dep, Workload((RequestSpec(arrival_at=0.0, input_tokens=300, output_tokens=1),
                                  RequestSpec(arrival_at=0.0, input_tokens=1000, output_tokens=2))),
                   SimConfig(enable_chunked_prefill=False))
    assert res.summary()["budget_stalls"] == 0
    assert res.records[1].token_times[0] == pytest.approx(steps[0] + steps[5], rel=1e-12)
