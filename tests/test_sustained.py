"""The sustained-rate rule (sim/steady.py, sim/max_rate.py): window sizes and backlog slopes by hand, a short
burst above capacity that passes the SLA but not the rule, the closed-form ceiling as a cap, intervals."""

import math

import numpy as np
import pytest

from flopwise.api import deployment
from flopwise.errors import InfeasibleError
from flopwise.metrics.summary import RequestRecord
from flopwise.sim import SimConfig, simulate
from flopwise.sim.max_rate import _widen, capacity_bounds, find_max_rate
from flopwise.sim.steady import ProbeSize, SteadyRule, _backlog_slope, _row_stat, load_cv2
from flopwise.specs.sla import parse_sla
from flopwise.workload import build_workload

SLA = parse_sla("p95_ttft<=2000ms,p95_tpot<=100ms")


def stream(rate, n):
    return build_workload(num_requests=n, input_len=512, output_len=128, request_rate=rate, seed=0)


def test_probe_size_by_hand():
    rule = SteadyRule()
    # warm-up max(50, 40 * max(2 s, 0.75 x 5 s)) = 150; window clamp(40 * max(6 s, 1 x 5 s), 400, 3000) = 400;
    # tail max(20, 40 * 0.5 x 5 s) = 100
    assert rule.size(40.0, 5.0) == ProbeSize(warmup_requests=150, window_requests=400, tail_requests=100)
    # a fast replica: the window in time wins (100 req/s * 8 s), then effort doubles it; a 2 s TTFT bound needs
    # 20 s of arrivals to see a 10% overload break it
    assert rule.at_effort(2.0).size(100.0, 8.0) == ProbeSize(warmup_requests=600, window_requests=1600,
                                                              tail_requests=400)
    assert rule.size(40.0, 5.0, 2.0).window_requests == 800
    assert rule.size(40.0, 5.0).num_requests == 650
    assert rule.size(40.0, 5.0).scaled(0.5).window_requests == 200


def _records(first_token_delay_s):
    """Arrivals at 0, 1, 2, ... s; each request's first (and only) token `first_token_delay_s` later."""
    return [RequestRecord(request_id=i, arrival_at=float(i), input_tokens=10, output_tokens=1,
                          first_scheduled_at=float(i), token_times=[float(i) + d])
            for i, d in enumerate(first_token_delay_s)]


def test_backlog_slope_by_hand():
    # a request prefilled 0.5 s after it arrives: every arrival sees exactly itself waiting -> slope 0
    recs = _records([0.5] * 40)
    assert _backlog_slope(recs, recs, 10) == (0.0, 0.0)
    # nothing ever gets its first token: arrival i sees i + 1 waiting, one more per second -> slope 1 req/s exactly
    recs = [RequestRecord(request_id=i, arrival_at=float(i), input_tokens=10, output_tokens=1, first_scheduled_at=None,
                          token_times=[]) for i in range(40)]
    slope, se = _backlog_slope(recs, recs, 10)
    assert slope == pytest.approx(1.0) and se == pytest.approx(0.0, abs=1e-12)


def test_load_cv2_by_hand():
    # arrivals 0, 1, 3, 4 s: gaps 1, 2, 1 (mean 4/3, variance 2/9 -> CV^2 1/8); tokens 10+2, 20+4, 10+2, 20+4 =
    # 12, 24, 12, 24 (mean 18, variance 36 -> CV^2 1/9)
    recs = [RequestRecord(request_id=i, arrival_at=t, input_tokens=n, output_tokens=n // 5)
            for i, (t, n) in enumerate(((0.0, 10), (1.0, 20), (3.0, 10), (4.0, 20)))]
    assert load_cv2(recs) == pytest.approx(1 / 8 + 1 / 9)
    # evenly spaced, equal requests: no load variance; one request: none measurable
    assert load_cv2(_records([0.5] * 10)) == 0.0 and load_cv2(recs[:1]) == 0.0
    # where a waiting time binds, the work is the prompt squared (Pollaczek-Khinchine): 100, 400, 100, 400 (mean 250,
    # variance 22,500 -> CV^2 0.36)
    assert load_cv2(recs, waiting=True) == pytest.approx(1 / 8 + 0.36)


def test_probe_takes_the_prompts_squares_where_ttft_binds():
    """A probe's load variance follows its binding objective: with a TTFT bound only, the window's prompts squared;
    with a TPOT bound only, its input + output tokens (chat's lognormal lengths: the squares vary far more)."""
    from flopwise.sim.max_rate import probe_rate

    dep = deployment("llama-3.1-8b", "h100-sxm", weights="fp8", kv="fp8")
    size = ProbeSize(warmup_requests=50, window_requests=200, tail_requests=20)

    def chat(rate, n):
        return build_workload(num_requests=n, workload="chat", request_rate=rate, seed=0)

    got = {}
    for bound in ("p95_ttft<=2000ms", "p95_tpot<=100ms"):
        p = probe_rate(dep, chat, parse_sla(bound), SimConfig(), SteadyRule(), 5.0, size)
        window = p.result.records[50:250]
        got[bound] = (p.load_cv2, load_cv2(window, waiting=True), load_cv2(window))
        # the probe's JSON says which work it measured
        assert p.to_dict()["load_work"] == ("prompt_tokens_squared" if "ttft" in bound else "tokens")
    ttft, tpot = got["p95_ttft<=2000ms"], got["p95_tpot<=100ms"]
    assert ttft[0] == pytest.approx(ttft[1]) and tpot[0] == pytest.approx(tpot[2])
    assert ttft[0] > 2 * tpot[0]
    # with both bounds, the one nearer its limit decides: a tight TTFT bound, then a tight TPOT bound
    for bound, waiting in (("p95_ttft<=1ms,p95_tpot<=100000ms", True), ("p95_ttft<=100000ms,p95_tpot<=1ms", False)):
        p = probe_rate(dep, chat, parse_sla(bound), SimConfig(), SteadyRule(), 5.0, size)
        assert p.load_cv2 == pytest.approx(load_cv2(p.result.records[50:250], waiting=waiting))


def test_the_interval_widens_by_the_windows_load_in_quadrature():
    """In log space: each side's log ratio in quadrature with e = z * sqrt(load_cv2 / n); capped at the ceiling,
    never at or below 0."""
    class Lo:  # the fields `_widen` reads of a Probe
        rate, num_window_requests, load_cv2 = 40.0, 400, 1.0
    rule = SteadyRule()  # 90%: z = 1.6449
    e = rule.z * math.sqrt(1.0 / 400)  # 0.0822
    lo, hi = _widen(Lo(), rule, 100.0, 37.0, 44.0)  # type: ignore[arg-type]
    assert lo == pytest.approx(40.0 * math.exp(-math.hypot(math.log(40 / 37), e)))
    assert hi == pytest.approx(40.0 * math.exp(math.hypot(math.log(44 / 40), e)))
    assert lo == pytest.approx(35.715, abs=1e-3) and hi == pytest.approx(45.366, abs=1e-3)
    assert _widen(Lo(), rule, 42.0, 37.0, 41.0)[1] == 42.0  # never above the ceiling
    Lo.load_cv2 = 0.0
    lo, hi = _widen(Lo(), rule, 100.0, 37.0, 44.0)  # type: ignore[arg-type]
    assert (lo, hi) == pytest.approx((37.0, 44.0))  # a load without variance adds nothing
    Lo.num_window_requests, Lo.load_cv2 = 20, 5.0  # a tiny, very bursty window: wide, still above 0
    lo, hi = _widen(Lo(), rule, 1e9, 40.0, 40.0)  # type: ignore[arg-type]
    assert lo == pytest.approx(40.0 * math.exp(-rule.z * 0.5)) and 0 < lo < 40.0 < hi


def test_row_percentile_matches_numpy_and_skips_nan():
    rng = np.random.default_rng(3)
    m = rng.normal(size=(4, 23))
    m[1, 5] = np.nan
    for stat, q in (("p95", 95), ("p50", 50), ("p99", 99)):
        assert np.allclose(_row_stat(m, stat), [np.nanpercentile(r, q) for r in m])
    assert np.allclose(_row_stat(m, "mean"), np.nanmean(m, axis=1))


def test_short_burst_above_capacity_passes_the_sla_but_not_the_rule():
    """200 requests at twice the sustained rate end before the queue builds: their percentiles meet the SLA.
    The rule, measuring after a warm-up over a long window, sees the TTFT and the backlog grow and rejects it;
    the sustained rate is below the closed-form ceiling. (The engine alone: behind vLLM's API server this stream is
    capped by the server's CPU at its closed-form ceiling, which the search never probes above.)"""
    dep = deployment("llama-3.1-8b", "h100-sxm", weights="fp8", kv="fp8", frontend="none")
    found = find_max_rate(dep, stream, SLA, SimConfig())
    assert found.rate <= found.upper_bound
    burst = simulate(dep, stream(2 * found.rate, 200), SimConfig(), sla=SLA).summary()
    assert burst["sla_met"]  # the old 200-request probe would have accepted 2x the capacity
    over = [p for p in found.trail if p.rate > found.rate]
    assert over and not any(p.ok for p in over)  # every probe above the answer failed the rule
    from flopwise.sim.max_rate import probe_rate

    rule = SteadyRule()
    b = capacity_bounds(dep, stream(math.inf, 2000), SLA)
    # sized for that rate: a window of TTFT limit / 10% overload = 20 s of arrivals, at most 3000 requests
    size = rule.size(2 * found.rate, b.e2e_estimate_s, 2.0)
    assert size.window_requests == min(3000, math.ceil(2 * found.rate * 20.0))
    p = probe_rate(dep, stream, SLA, SimConfig(), rule, 2 * found.rate, size)
    assert not p.ok and not p.sla_ok and not p.backlog_ok
    lo, hi = found.interval
    assert lo <= found.rate <= hi <= found.upper_bound
    # the reported interval is the bootstrap's widened by the window's load (Poisson gaps: CV^2 about 1)
    pr, n = found.probe, found.probe.num_window_requests
    assert 0.8 < pr.load_cv2 < 1.2
    e = rule.z * math.sqrt(pr.load_cv2 / n)
    a, b = found.paired_interval
    assert lo <= min(a, found.rate * math.exp(-e)) + 1e-9 and hi >= min(found.upper_bound, found.rate * math.exp(e))
    assert lo < a and (hi > b or hi == found.upper_bound)


def test_never_above_the_ceiling():
    """A ceiling below the true capacity caps the answer (the rule still holds there)."""
    dep = deployment("llama-3.1-8b", "h100-sxm", weights="fp8", kv="fp8")
    found = find_max_rate(dep, stream, SLA, SimConfig(), ceiling=10.0)
    assert found.capped and found.rate == 10.0 and found.interval[1] == 10.0
    assert found.to_dict()["capped_by_ceiling"] is True


def test_infeasible_sla_names_the_objective():
    dep = deployment("llama-3.1-8b", "l4", weights="bf16")
    with pytest.raises(InfeasibleError, match="ttft"):
        find_max_rate(dep, stream, parse_sla("p95_ttft<=20ms"), SimConfig())


def test_no_latency_bound_is_the_saturated_rate():
    """`--sla none`: the sustained rate is the engine's throughput with every request sent at once, at or below
    the ceiling, with an interval around it."""
    dep = deployment("llama-3.1-8b", "h100-sxm", weights="fp8", kv="fp8")
    found = find_max_rate(dep, stream, parse_sla("none"), SimConfig())
    assert found.probes == ((math.inf, True),)
    lo, hi = found.interval
    assert 0 < lo < found.rate < hi <= found.upper_bound  # both sides: another stream may run faster or slower
    assert not found.capped and found.probe.load_cv2 == 0.0  # fixed lengths, all at once: no load variance
    chat = find_max_rate(dep, lambda r, n: build_workload(num_requests=n, workload="chat", request_rate=r, seed=0),
                         parse_sla("none"), SimConfig())
    assert chat.probes == ((math.inf, True),) and chat.probe.load_cv2 > 0.5  # lognormal lengths (capped)
    lo, hi = chat.interval  # here the saturated rate reaches the ceiling: the top stays there
    assert chat.capped and lo < chat.rate == hi == chat.upper_bound
    e = SteadyRule().z * math.sqrt(chat.probe.load_cv2 / chat.probe.num_window_requests)
    assert lo <= chat.rate * math.exp(-e) + 1e-9 and lo < chat.paired_interval[0]  # widened by the window's load


def test_capacity_estimate_splits_into_prefill_and_decode_shares():
    """The estimate's request time is its prefill share plus its decode share (where no ceiling caps it), and a
    fleet's estimate is R x one replica's, or the slower of the prefill and decode pools."""
    from flopwise.cluster.build import build_cluster
    from flopwise.cost.capacity import bounds
    from flopwise.plan.fleet import capacity_estimate

    sla = parse_sla("p95_ttft<=300ms,p95_tpot<=50ms")

    def make(t, n):
        return deployment("llama-3.1-8b", "h100-sxm", tp=t, num_gpus=t * n, frontend="none")

    b = bounds(make(1, 1), sla, 1000, 200)
    assert b.max_rate_estimate < b.max_rate_ceiling
    assert 1.0 / b.max_rate_estimate == pytest.approx(b.prefill_share_s + b.decode_share_s, rel=1e-12)
    agg = build_cluster(make, tp=1, replicas=4)
    assert capacity_estimate(agg, sla, 1000, 200) == pytest.approx(4 * b.max_rate_estimate, rel=1e-12)
    dis = build_cluster(make, tp=1, replicas=1, disaggregate="prefill=2xtp1,decode=3xtp2")
    bp, bd = bounds(make(1, 2), sla, 1000, 200), bounds(make(2, 3), sla, 1000, 200)
    assert capacity_estimate(dis, sla, 1000, 200) == pytest.approx(
        min(2 / bp.prefill_share_s, 3 / bd.decode_share_s), rel=1e-12)




def test_capacity_ceiling_sums_the_replicas_and_bounds_the_estimate():
    """The fleet's ceiling is every replica's closed-form ceiling summed, and no split's estimate exceeds it."""
    from flopwise.cluster.build import build_cluster
    from flopwise.cost.capacity import bounds
    from flopwise.plan.fleet import capacity_ceiling, capacity_estimate

    sla = parse_sla("p95_ttft<=300ms,p95_tpot<=50ms")

    def make(t, n):
        return deployment("llama-3.1-8b", "h100-sxm", tp=t, num_gpus=t * n, frontend="none")

    dis = build_cluster(make, tp=1, replicas=1, disaggregate="prefill=2xtp1,decode=3xtp2")
    c1, c2 = bounds(make(1, 2), sla, 1000, 200).max_rate_ceiling, bounds(make(2, 3), sla, 1000, 200).max_rate_ceiling
    assert capacity_ceiling(dis, sla, 1000, 200) == pytest.approx(2 * c1 + 3 * c2, rel=1e-12)
    for text in ("prefill=1xtp1,decode=7xtp1", "prefill=6xtp1,decode=1xtp2", "prefill=2xtp2,decode=2xtp2"):
        spec = build_cluster(make, tp=1, replicas=1, disaggregate=text)
        assert capacity_estimate(spec, sla, 1000, 200) <= capacity_ceiling(spec, sla, 1000, 200)


def test_fleet_contenders_are_the_leader_and_what_reaches_it():
    """Round 2 refines the leader and each layout whose paired interval's top, or the failing probe above its answer
    (in tokens/s per GPU), reaches the leader's paired interval bottom; a layout with no rate never is."""
    from flopwise.plan.fleet import FleetCandidate, _contenders

    def cand(rate, lo, hi, gpus=8, failed=math.inf):
        return FleetCandidate(serving="aggregated", layout=f"{rate}", num_gpus=gpus, max_rate=rate,
                              output_tokens_per_s_per_gpu=rate * 100 / gpus, tokens_per_s_per_user=None,
                              p95_ttft_ms=None, p95_tpot_ms=None, binding="", paired_interval=(lo, hi),
                              rate_interval=(lo / 2, hi * 2), failed_above=failed)  # reported: the wider one

    found = {0: cand(100, 95, 104), 1: cand(90, 85, 96), 2: cand(90, 85, 94), 3: cand(0, 0, 0), 4: cand(50, 40, 200),
             5: cand(90, 85, 94, failed=97.0), 6: cand(45, 40, 48, gpus=4)}
    assert sorted(_contenders(found)) == [0, 1, 4, 5, 6]  # 6: 96 req/s per 8 GPUs at its interval's top
    assert _contenders({3: cand(0, 0, 0)}) == []


def test_independent_replicas_search_up_to_their_summed_ceiling():
    """--num-gpus 2 at tp 1 runs two replicas: the search's ceiling is twice one replica's bound (it was one
    replica's, and every --num-gpus answered the same 'ceiling reached' rate)."""
    import flopwise

    one, two = (flopwise.simulate(num_gpus=n, find_max_rate=True, sla="p95_ttft<=300ms,p95_tpot<=50ms",
                                  num_requests=200).to_dict()["max_rate"] for n in (1, 2))
    assert two["upper_bound"] == pytest.approx(2 * one["upper_bound"])
    assert two["request_rate"] > 1.5 * one["request_rate"]
