"""Fleets: the replica's steppable interface, the event heap's tie-breaks, routers, disaggregation, replica
events and cold starts, each against a hand-computed number or the one-replica simulator."""

from __future__ import annotations

import json
import math

import pytest

import flopwise
from flopwise.api import deployment, estimate
from flopwise.cluster import simulate_fleet
from flopwise.cluster.autoscale import cold_start_s
from flopwise.cluster.build import build_cluster
from flopwise.cluster.events import ARRIVAL, CONTROL, SCHEDULE, STEP_END, EventHeap
from flopwise.cluster.router import make_router
from flopwise.cost.layout import layout
from flopwise.cost.transfer import KvLink, kv_transfer_bytes, link_between
from flopwise.errors import WorkloadError
from flopwise.sim import SimConfig, simulate
from flopwise.sim.replica import Replica
from flopwise.sim.request import Request
from flopwise.sim.steady import SteadyRule
from flopwise.specs.cluster import ClusterSpec, PoolSpec, parse_disaggregate
from flopwise.specs.hardware import get_hardware
from flopwise.workload import RequestSpec, Workload, build_workload


def _fleet(dep, router="round-robin", **kw):
    return ClusterSpec(pools=(PoolSpec(name="mixed", role="mixed", deployment=dep),), router=router, **kw)


def _strip(s):
    s = dict(s)
    s.pop("sim_wall_s")
    s.pop("fleet", None)
    return json.dumps(s, sort_keys=True)


@pytest.mark.parametrize("dep_kw, wl_kw, cfg", [
    (dict(), dict(workload="chat", num_requests=200, request_rate=8), {}),
    (dict(num_gpus=3), dict(workload="chat", num_requests=300, request_rate=30), {}),
    (dict(frontend="none", num_gpus=2), dict(workload="rag", num_requests=150, request_rate=6), {}),
    (dict(engine="sglang"), dict(workload="chat", num_requests=150, request_rate=10), {}),
    (dict(engine="vllm@0.5"), dict(workload="chat", num_requests=150, request_rate=10), {}),
    (dict(), dict(workload="chat", num_requests=150, request_rate=10), dict(scheduler="static")),
    (dict(speculative="eagle,k=3,accepted=2.6"), dict(workload="chat", num_requests=100, request_rate=8), {}),
])
def test_round_robin_fleet_is_simulate_bit_for_bit(dep_kw, wl_kw, cfg):
    # an open loop split round-robin over independent replicas is exactly simulate's static split
    dep = deployment("llama-3.1-8b", "h100-sxm", **dep_kw)
    wl = build_workload(seed=3, **wl_kw)
    config = SimConfig(**cfg)
    assert _strip(simulate_fleet(_fleet(dep), wl, config).summary()) == _strip(simulate(dep, wl, config).summary())


def test_closed_loop_fleet_of_one_is_simulate_bit_for_bit():
    dep = deployment("llama-3.1-8b", "h100-sxm")
    wl = build_workload(workload="chat", num_requests=120, concurrency=12, seed=1)
    config = SimConfig(client_stagger_s=0.001)
    assert _strip(simulate_fleet(_fleet(dep), wl, config).summary()) == _strip(simulate(dep, wl, config).summary())


def test_event_heap_orders_by_time_rank_then_order():
    h = EventHeap()
    h.push(1.0, SCHEDULE, 0, "schedule r0")
    h.push(1.0, STEP_END, 1, "end r1")
    h.push(1.0, STEP_END, 0, "end r0")
    h.push(1.0, ARRIVAL, 7, "hand-off 7")
    h.push(1.0, CONTROL, 2, "r2 down")
    h.push(0.5, SCHEDULE, 9, "earlier")
    h.push(1.0, STEP_END, 0, "end r0 again")  # same (time, rank, order): push order
    assert [h.pop()[2] for _ in range(len(h))] == ["earlier", "r2 down", "hand-off 7", "end r0", "end r0 again",
                                                   "end r1", "schedule r0"]


def test_replica_interface_by_hand():
    # one 512-token request on an idle replica: admit -> SCHEDULE at its arrival -> STEP_END after the prefill
    dep = deployment("llama-3.1-8b", "h100-sxm", frontend="none")
    rep = Replica(dep, SimConfig())
    assert rep.next_at is None and not rep.has_work
    req = Request(request_id=0, arrival_at=2.0, num_prompt_tokens=512, max_tokens=3)
    rep.admit(req)
    assert (rep.next_at, rep.next_rank, rep.num_outstanding, rep.num_waiting) == (2.0, SCHEDULE, 1, 1)
    assert rep.step(more_coming=False) == []
    e = estimate("llama-3.1-8b", "h100-sxm", batch=1, input_len=512, output_len=3)
    assert rep.next_rank == STEP_END and rep.next_at == pytest.approx(2.0 + e.ttft_ms / 1e3, rel=1e-12)
    assert rep.num_running == 1 and rep.kv_usage > 0
    rep.step(False)  # the prefill's step ends: first token
    assert rep.next_rank == SCHEDULE and req.num_output_tokens == 1
    rep.step(False)  # plans a decode run of the 2 remaining tokens (one event)
    finished = rep.step(False)
    assert finished == [req] and not rep.has_work and req.num_output_tokens == 3


def test_an_arrival_cuts_a_pending_decode_run_at_the_step_it_lands_in():
    dep = deployment("llama-3.1-8b", "h100-sxm", frontend="none")
    rep = Replica(dep, SimConfig())
    rep.admit(Request(request_id=0, arrival_at=0.0, num_prompt_tokens=128, max_tokens=100))
    rep.step(False)
    rep.step(False)  # prefill done
    rep.step(False)  # a 99-step decode run planned
    run_end = rep.next_at
    late = Request(request_id=1, arrival_at=run_end / 2, num_prompt_tokens=128, max_tokens=4)
    rep.admit(late)
    assert rep.next_at < run_end and rep.next_at >= late.arrival_at  # the first step ending at or after it


def test_identical_replicas_at_n_times_the_rate_match_one_replica():
    # round-robin over 4 replicas hands each every 4th arrival of a Poisson stream: Erlang-4 gaps at a quarter
    # of the rate (gamma, shape 4), smoother than Poisson; so one replica fed that stream is the reference
    dep1 = deployment("llama-3.1-8b", "h100-sxm")
    one = simulate(dep1, build_workload(workload="chat", num_requests=1500, request_rate=5, arrival="gamma",
                                        burstiness=4, seed=4)).summary()
    four = simulate_fleet(_fleet(deployment("llama-3.1-8b", "h100-sxm", num_gpus=4)),
                          build_workload(workload="chat", num_requests=6000, request_rate=20, seed=4)).summary()
    for key in ("ttft_ms", "tpot_ms", "e2e_ms"):
        for stat in ("p50", "p90"):
            assert four[key][stat] == pytest.approx(one[key][stat], rel=0.1), (key, stat)


def _shared_prefix_workload():
    # 12 requests 1 s apart (each done long before the next), prefix groups 0,1,2,0,1,2,...: 512 shared
    # tokens (32 blocks) + 64 own
    return Workload(tuple(RequestSpec(arrival_at=float(i), input_tokens=576, output_tokens=8, prefix_id=i % 3,
                                      prefix_tokens=512) for i in range(12)))


def test_prefix_aware_routing_raises_the_hit_rate_by_hand():
    dep = deployment("llama-3.1-8b", "h100-sxm", num_gpus=2, frontend="none")
    wl = _shared_prefix_workload()
    # round-robin: replica 0 sees groups 0,2,1,0,2,1, replica 1 sees 1,0,2,1,0,2: each misses 3 times -> 6 hits
    rr = simulate_fleet(_fleet(dep), wl).summary()
    assert rr["prefix_cache_hit_rate"] == pytest.approx(6 * 512 / (12 * 576))
    # prefix-aware: a group's first request misses everywhere (ties: least outstanding, the first replica); every
    # later one finds its 512 tokens there -> 9 hits
    pa = simulate_fleet(_fleet(dep, "prefix-aware"), wl).summary()
    assert pa["prefix_cache_hit_rate"] == pytest.approx(9 * 512 / (12 * 576))


class _Stub:
    def __init__(self, outstanding, kv=0.0, cached=0):
        self.num_outstanding, self.kv_usage, self._cached = outstanding, kv, cached

    def cached_tokens(self, req):
        return self._cached


def test_routers_choose_by_hand():
    req = Request(request_id=0, arrival_at=0.0, num_prompt_tokens=100, max_tokens=10, prefix_id=5, num_prefix_tokens=80)
    a, b, c = _Stub(3, 0.5, 0), _Stub(1, 0.9, 60), _Stub(1, 0.2, 0)
    assert make_router("least-outstanding").choose(req, [a, b, c]) is b  # ties: first in pool order
    assert make_router("least-kv").choose(req, [a, b, c]) is c
    assert make_router("prefix-aware").choose(req, [a, b, c]) is b  # 60 > 0.5 x 100 cached
    assert make_router("prefix-aware").choose(req, [a, _Stub(1, 0.1, 40), c]).num_outstanding == 1
    # imbalance (40 - 1 > 32): the least outstanding, whatever the cache says
    assert make_router("prefix-aware").choose(req, [_Stub(40, 0, 90), c]) is c
    rr = make_router("round-robin")
    assert [rr.choose(req, [a, b, c]) for _ in range(4)] == [a, b, c, a]
    s = make_router("session")
    first = s.choose(req, [a, b, c])
    assert first is b and s.choose(req, [a, _Stub(0), b, c]) is b  # sticks to its replica
    assert s.choose(req, [a, c]) is c  # its replica left: the least outstanding of the rest


def test_disaggregated_with_infinite_link_is_prefill_alone_then_decode_alone():
    def make(tp, n):
        return deployment("qwen3-32b", "h200", tp=tp, num_gpus=tp * n, frontend="none")

    spec = build_cluster(make, tp=1, replicas=1, disaggregate="prefill=2xtp2,decode=1xtp4", kv_link="infinite")
    s = simulate_fleet(spec, Workload((RequestSpec(arrival_at=0.0, input_tokens=4000, output_tokens=50),))).summary()
    assert s["ttft_ms"]["mean"] == estimate("qwen3-32b", "h200", tp=2, batch=1, input_len=4000).ttft_ms
    tpot = estimate("qwen3-32b", "h200", tp=4, batch=1, input_len=4000, output_len=50).tpot_ms
    assert s["tpot_ms"]["mean"] == pytest.approx(tpot, rel=1e-6)
    assert s["fleet"]["kv_transfer"]["ms_mean"] == 0.0
    assert s["setup"]["num_gpus"] == 8


def test_kv_transfer_time_by_hand():
    h200 = get_hardware("h200")
    dep = deployment("qwen3-32b", "h200", tp=2, frontend="none")
    # Qwen3-32B: 64 layers x 8 KV heads x 128 x (K, V) x 2 bytes = 262,144 B per token
    assert kv_transfer_bytes(dep, 4000) == 4000 * 262_144
    b = 4000 * 262_144
    net = link_between("auto", h200, h200, same_node=False, layerwise=False)
    assert net.kind == "network" and net.rate_gbs == 50
    # two GPUs send in parallel at 50 GB/s x 0.85 each, after the prefill ends at 1.0 s, plus 50 us
    assert KvLink().transfer(net, 2, 64, b, 0.8, 1.0) == pytest.approx(1.0 + b / (2 * 50e9 * 0.85) + 50e-6)
    nv = link_between("auto", h200, h200, same_node=True)
    assert nv.kind == "nvlink" and nv.layerwise
    wire = b / (2 * 450e9 * 0.8)
    # layer-wise from the first scheduled instant 0.8: only the last layer's share follows the prefill's end
    assert KvLink().transfer(nv, 2, 64, b, 0.8, 1.0) == pytest.approx(1.0 + wire / 64 + 20e-6)
    link = KvLink()  # the second transfer queues behind the first on the sender's links
    link.transfer(net, 2, 64, b, 1.0, 1.0)
    assert link.transfer(net, 2, 64, b, 1.0, 1.0) == pytest.approx(1.0 + 2 * b / (2 * 50e9 * 0.85) + 50e-6)


def test_cold_start_of_a_140_gb_model_over_2_gbs():
    dep = deployment("llama-3.1-70b", "h100-sxm", tp=2, weights="bf16")
    weight_bytes = layout(dep).weight_bytes_per_gpu * 2
    assert 140e9 < weight_bytes < 142e9  # 70.6B parameters in bf16
    assert cold_start_s(dep, 2.0, 30.0) == pytest.approx(weight_bytes / 2e9 + 30.0)
    assert 70.0 < cold_start_s(dep, 2.0, 0.0) < 71.0


def test_a_replica_down_fails_its_requests_and_a_drained_one_gets_no_more():
    dep = deployment("llama-3.1-8b", "h100-sxm", num_gpus=2, frontend="none")
    wl = build_workload(input_len=256, output_len=64, num_requests=200, request_rate=20, seed=0)
    s = simulate_fleet(_fleet(dep, events=_events("down:1@3")), wl).summary()
    assert s["errors_by_kind"].get("replica_down", 0) > 0
    assert s["num_completed"] + s["num_failed"] == 200
    rep1 = s["fleet"]["replicas"][1]
    assert rep1["state"] == "down" and rep1["stopped_at"] == 3.0
    d = simulate_fleet(_fleet(dep, events=_events("drain:0@2")), wl).summary()
    assert d["num_completed"] == 200
    r0, r1 = d["fleet"]["replicas"]
    assert r0["state"] == "off" and r0["num_requests"] < r1["num_requests"]
    assert r0["num_requests"] == sum(1 for i, r in enumerate(wl.requests) if r.arrival_at < 2 and i % 2 == 0)


@pytest.mark.parametrize("kw", [dict(replicas=3, router="least-outstanding",
                                     replica_events="down:1@3,up:1@6,drain:2@8"),
                                dict(replicas=1, disaggregate="prefill=1xtp1,decode=2xtp1", router="least-outstanding",
                                     replica_events="down:2@4")])
def test_members_keep_their_outstanding_count_through_handoffs_and_replica_events(kw):
    # the fleet keeps Member.num_outstanding itself, and its candidates' loads (routers read them at every
    # arrival); at every completion it is the replica's own count plus the requests in transit to it
    from flopwise.cluster import Fleet

    spec = build_cluster(lambda t, n: deployment("llama-3.1-8b", "h100-sxm", tp=t, num_gpus=t * n), tp=1, **kw)
    wl = build_workload(workload="chat", num_requests=300, request_rate=20, seed=2)
    fleet = Fleet(spec)
    seen = []

    def check(n):
        seen.append(n)
        for m in fleet.members:
            if m.state in ("up", "draining", "cold"):
                assert m.num_outstanding == m.replica.num_outstanding + m.num_in_transit
        for role, cands in fleet._candidates.items():  # and the loads its routers read
            assert fleet._loads[role] == [m.num_outstanding for m in cands]

    s = fleet.run(wl, progress=check).summary()
    assert sum(seen) == s["num_completed"] + s["errors_by_kind"].get("timeout", 0) > 0
    assert all(m.num_outstanding == 0 for m in fleet.members if m.state == "up")


def _events(text):
    from flopwise.specs.cluster import parse_replica_events
    return parse_replica_events(text)


def test_replicas_still_starting_when_the_run_ends_are_not_counted_as_used():
    spec = build_cluster(lambda t, n: deployment("llama-3.1-8b", "h100-sxm", tp=t, num_gpus=t * n, frontend="none"),
                         tp=1, replicas=1, autoscale="1..4", cold_start="38")
    wl = build_workload(workload="chat", num_requests=600, request_rate=30, seed=0)
    s = simulate_fleet(spec, wl).summary()
    a = s["fleet"]["autoscale"]
    assert (a["replicas_started"], a["max_replicas_asked"], a["max_replicas_used"]) == (3, 4, 1)
    assert all(h["at_s"] <= s["duration_s"] + wl.requests[0].arrival_at for h in a["history"])


def test_autoscale_starts_replicas_after_a_cold_start():
    dep = deployment("llama-3.1-8b", "h100-sxm", frontend="none")
    spec = build_cluster(lambda t, n: deployment("llama-3.1-8b", "h100-sxm", tp=t, num_gpus=t * n, frontend="none"),
                         tp=1, replicas=1, autoscale="1..4", cold_start="20", target_outstanding=8,
                         autoscale_interval_s=5)
    wl = build_workload(workload="chat", num_requests=1500, request_rate=25, seed=0)
    s = simulate_fleet(spec, wl).summary()
    a = s["fleet"]["autoscale"]
    assert a["replicas_started"] >= 1 and a["max_replicas_used"] <= a["max_replicas_asked"] <= 4
    # replicas used are those serving, not those still starting; the history ends with the run
    assert a["max_replicas_used"] == max(h["serving"] for h in a["history"])
    assert all(h["serving"] <= h["replicas"] for h in a["history"])
    assert a["history"][-1]["at_s"] <= s["duration_s"] + wl.requests[0].arrival_at
    started = [r for r in s["fleet"]["replicas"][1:]]
    assert started and all(r["started_at"] % 5 == 0 for r in started)
    # each new replica takes its first request no earlier than its cold start allows
    assert s["fleet"]["gpu_hours"] > dep.num_gpus * s["duration_s"] / 3600
    assert s["num_completed"] == 1500


def test_parse_disaggregate():
    assert parse_disaggregate("prefill=2xtp2,decode=1xtp4") == {"prefill": (2, 2), "decode": (1, 4)}
    with pytest.raises(WorkloadError):
        parse_disaggregate("prefill=2xtp2")
    with pytest.raises(WorkloadError):
        parse_disaggregate("prefill=2tp2,decode=1xtp4")


def test_cli_fleet_and_num_gpus(tmp_path):
    from typer.testing import CliRunner

    from flopwise.cli import app

    r = CliRunner().invoke(app, ["simulate", "--replicas", "2", "--router", "least-outstanding", "--num-requests",
                                 "60", "--request-rate", "8", "--json"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.output)
    assert out["fleet"]["router"] == "least-outstanding" and len(out["fleet"]["replicas"]) == 2
    assert out["setup"]["num_gpus"] == 2
    r = CliRunner().invoke(app, ["simulate", "--num-gpus", "2", "--num-requests", "60", "--request-rate", "8",
                                 "--json"])
    assert r.exit_code == 0 and "fleet" not in json.loads(r.output)
    r = CliRunner().invoke(app, ["simulate", "--router", "nope", "--num-requests", "10", "--json"])
    assert isinstance(r.exception, WorkloadError) and "unknown router" in str(r.exception)
    assert math.isfinite(out["ttft_ms"]["p95"])


@pytest.mark.parametrize("model,endpoint", [("llama-3.1-8b", "completions"), ("openai/gpt-oss-20b", "chat")])
@pytest.mark.parametrize("kw", [dict(tp=1, replicas=3, router="least-outstanding"),
                                dict(tp=1, replicas=1, disaggregate="prefill=1xtp1,decode=1xtp1")])
def test_bounded_metrics_give_the_exact_summary(kw, model, endpoint):
    """gpt-oss on the chat endpoint: its clients time text from the 4th token (the harmony header is not
    streamed), in both bookkeepings, aggregated and disaggregated."""
    from flopwise.specs.sla import parse_sla

    sla = parse_sla("p95_ttft<=300ms,p95_tpot<=50ms,p99_itl<=100ms")
    spec = build_cluster(lambda t, n: deployment(model, "h100-sxm", tp=t, num_gpus=t * n, endpoint=endpoint), **kw)
    wl = build_workload(workload="chat", num_requests=400, request_rate=12, seed=5)
    a = simulate_fleet(spec, wl, sla=sla, metrics="exact").summary()
    b = simulate_fleet(spec, wl, sla=sla, metrics="bounded").summary()
    assert b["fleet"]["metrics"] == "bounded"
    for key in a:
        if key in ("sim_wall_s", "fleet"):
            continue
        if key in ("itl_ms", "itl_per_token_ms"):  # pooled by step weights: the mean's summation order differs
            assert b[key] == pytest.approx(a[key], rel=1e-12)
            continue
        assert b[key] == a[key], key


def test_bounded_records_test_itl_at_each_objectives_statistic_as_the_exact_records_do():
    """Two ITL statistics at once on a disaggregated fleet (each request's hand-off gap leads its gaps): the same
    goodput as the per-request records, and an ITL objective the records were not built for is refused."""
    from flopwise.specs.sla import parse_sla

    sla = parse_sla("p95_itl<=12ms,mean_itl<=11ms,p99_ttft<=2s")
    assert sla.itl_stats == ("p95", "mean")
    spec = build_cluster(lambda t, n: deployment("llama-3.1-8b", "h100-sxm", tp=t, num_gpus=t * n),
                         tp=1, replicas=1, disaggregate="prefill=1xtp1,decode=1xtp1")
    wl = build_workload(workload="chat", num_requests=300, request_rate=20, seed=2)
    a = simulate_fleet(spec, wl, sla=sla, metrics="exact").summary()
    res = simulate_fleet(spec, wl, sla=sla, metrics="bounded")
    b = res.summary()
    assert 0.0 < a["sla_attainment"] < 1.0  # the bounds split the requests
    assert (b["goodput"], b["sla_attainment"]) == (a["goodput"], a["sla_attainment"])
    with pytest.raises(WorkloadError, match="kept no per-request p90 ITL"):
        res.bounded.summarize(parse_sla("p90_itl<=12ms"))
    # round-robin replicas split over worker processes: each shard keeps the statistics, the merge carries them
    spec = build_cluster(lambda t, n: deployment("llama-3.1-8b", "h100-sxm", tp=t, num_gpus=t * n), tp=1,
                         replicas=4, router="round-robin")
    wl = build_workload(workload="chat", num_requests=800, request_rate=60, seed=2)
    a = simulate_fleet(spec, wl, sla=sla, metrics="exact", workers=1).summary()
    b = simulate_fleet(spec, wl, sla=sla, metrics="bounded", workers=2).summary()
    assert 0.0 < a["sla_attainment"] < 1.0 and (b["goodput"], b["sla_attainment"]) == (a["goodput"],
                                                                                        a["sla_attainment"])


def test_sketch_keys_in_numpy_are_the_mappings_own_at_bin_boundaries_too():
    import numpy as np
    from ddsketch import LogarithmicMapping

    from flopwise.cluster.metrics import SKETCH_ACCURACY, _sketch_keys

    m = LogarithmicMapping(SKETCH_ACCURACY)
    edges = np.array([m.gamma ** k for k in range(-400, 400)])
    v = np.concatenate([np.exp(np.random.default_rng(0).uniform(-20, 15, 20000)), edges, np.nextafter(edges, 0),
                        np.nextafter(edges, np.inf), [1e-9]])
    assert _sketch_keys(m, v).tolist() == [m.key(float(x)) for x in v]


def test_weighted_percentiles_equal_numpy_on_the_expanded_values():
    import numpy as np

    from flopwise.cluster.metrics import weighted_stats

    v = np.array([5.0, 1.0, 3.0, 2.0])
    w = np.array([2, 0, 3, 1])
    expanded = np.repeat(v, w)
    s = weighted_stats(v, w)
    assert [s.p50, s.p90, s.p95, s.p99] == list(np.percentile(expanded, [50, 90, 95, 99]))
    assert s.mean == pytest.approx(expanded.mean())


def test_fleet_plan_layouts_by_hand():
    from flopwise.plan.fleet import candidate_layouts

    assert candidate_layouts(4, ("aggregated",)) == [("aggregated", "4xtp1"), ("aggregated", "2xtp2"),
                                                      ("aggregated", "1xtp4")]
    dis = [t for _, t in candidate_layouts(4, ("disaggregated",), max_disaggregated=100)]
    # every GPU used, prefill TP at most twice decode TP
    assert "prefill=1xtp2,decode=1xtp2" in dis and "prefill=3xtp1,decode=1xtp1" in dis
    assert "prefill=1xtp4,decode=0xtp1" not in dis and all("tp4,decode=1xtp1" not in t for t in dis)
    assert len(dis) == len(set(dis))


_SMALL_RULE = SteadyRule(min_warmup_requests=10, min_warmup_s=0.2, min_window_requests=40, min_window_s=0.5,
                         detect_overload=0.5, num_batches=4, num_bootstrap=40)  # probes of a few hundred requests


def _fleet_stream(rate, n=None):
    return build_workload(num_requests=n or 40, input_len=1024, output_len=64, request_rate=rate, seed=0)


def test_fleet_plan_ranks_aggregated_and_disaggregated():
    from flopwise.plan.fleet import fleet_plan_to_dict, plan_fleet
    from flopwise.specs.sla import parse_sla

    def make(t, n):
        return deployment("llama-3.1-8b", "h100-sxm", tp=t, num_gpus=t * n, frontend="none")

    cands = plan_fleet(make, 2, _fleet_stream, parse_sla("p95_ttft<=300ms,p95_tpot<=50ms"), rule=_SMALL_RULE,
                       tps=(1, 2), rate_tolerance=0.25)
    d = fleet_plan_to_dict(cands, rate=100.0)
    assert {c["serving"] for c in d["candidates"]} == {"aggregated", "disaggregated"}
    rates = [c["output_tokens_per_s_per_gpu"] for c in d["candidates"]]
    assert rates == sorted(rates, reverse=True) and d["winner"] in ("aggregated", "disaggregated")
    best = d["candidates"][0]
    assert best["gpus_for_rate"] == math.ceil(100.0 / best["max_request_rate"]) * 2
    # the leader is searched again at full effort; every rate lies in its interval, under the summed ceilings
    assert best["screened"] is False and cands[0].effort == 1.0
    for c in cands:
        lo, hi = c.rate_interval
        assert lo <= c.max_rate <= hi and c.num_simulated_requests > 0


def test_fleet_plan_does_not_depend_on_its_workers():
    """Layouts are searched one per worker process: one worker or two give the same ranked candidates."""
    from flopwise.plan.fleet import plan_fleet
    from flopwise.specs.sla import parse_sla

    def make(t, n):
        return deployment("llama-3.1-8b", "h100-sxm", tp=t, num_gpus=t * n, frontend="none")

    def run(workers):
        return plan_fleet(make, 2, _fleet_stream, parse_sla("p95_ttft<=300ms,p95_tpot<=50ms"), rule=_SMALL_RULE,
                          tps=(1, 2), rate_tolerance=0.25, workers=workers)

    one, two = run(1), run(2)
    assert one == two and len(one) >= 3 and one[0].max_rate > 0


def test_router_help_names_every_router():
    """The CLI help lists the routers (params.py imports nothing heavy, so it restates them): the lists agree."""
    from flopwise.cluster import ROUTERS
    from flopwise.params import HELP

    assert all(name in HELP["router"] for name in ROUTERS)


def test_api_simulate_fleet_and_bad_serving():
    import flopwise
    from flopwise.errors import WorkloadError

    sim = flopwise.simulate("llama-3.1-8b", "h100-sxm", replicas=2, router="least-outstanding", request_rate=8,
                            num_requests=200, seed=1)
    fleet = sim.to_dict()["fleet"]
    assert [r["num_requests"] for r in fleet["replicas"]] and sum(r["num_requests"] for r in fleet["replicas"]) == 200
    with pytest.raises(WorkloadError, match="not both"):
        flopwise.simulate("llama-3.1-8b", "h100-sxm", replicas=2, num_gpus=2)
    with pytest.raises(WorkloadError, match="--serving takes"):
        flopwise.plan(serving="colocated")
    # a comma-separated string is split as the CLI gives it (it was once read as one mode)
    with pytest.raises(WorkloadError, match="got colocated$"):
        flopwise.plan(serving="aggregated,colocated")


def test_fleet_max_rate_is_a_sustained_rate_with_an_interval():
    sla = "p95_ttft<=500ms,p95_tpot<=50ms"
    one = flopwise.simulate(find_max_rate=True, sla=sla).to_dict()["max_rate"]
    two = flopwise.simulate(replicas=2, router="round-robin", find_max_rate=True, sla=sla).to_dict()["max_rate"]
    assert two["search"] == "sustained-rate rule over the fleet" and not two["capped_by_ceiling"]
    lo, hi = two["request_rate_interval"]
    assert lo <= two["request_rate"] <= hi and hi > lo
    # two replicas carry about twice one's sustained rate (round-robin smooths each replica's arrivals a little)
    assert 1.8 * one["request_rate"] <= two["request_rate"] <= 2.4 * one["request_rate"]
    assert two["window_summary"]["sla_met"] is True


def test_a_fleet_keeps_the_runs_data_and_expert_parallelism():
    """--dp / --ep with a fleet option (--replicas, --router) build each replica with them: they were dropped, and
    a DP2 x EP2 MoE replica ran as one TP1 GPU (same numbers as without them)."""
    d = flopwise.simulate(model="qwen3-30b-a3b", gpu="h100-sxm", dp=2, ep=2, replicas=2, request_rate=10.0,
                          num_requests=40).to_dict()
    pool = d["fleet"]["pools"][0]
    assert (pool["dp"], pool["ep"], pool["gpus_per_replica"], pool["replicas"]) == (2, 2, 2, 2)
    assert d["setup"]["num_gpus"] == 4 and d["setup"]["dp"] == 2


def test_a_replica_down_and_up_is_billed_and_busy_over_both_incarnations():
    """Down at 100 s, up at 101 s: busy is over both incarnations' time up (it divided every step by the second's,
    610%) and the GPU-hours count both (the first 100 s were dropped)."""
    kw = dict(replicas=2, request_rate=5.0, num_requests=600)
    plain = flopwise.simulate(**kw).to_dict()["fleet"]
    bounced = flopwise.simulate(replica_events="down:0@100,up:0@101", **kw).to_dict()["fleet"]
    assert all(r["busy_fraction"] <= 1.0 for r in bounced["replicas"])
    assert bounced["gpu_hours"] == pytest.approx(plain["gpu_hours"], rel=0.03)


def test_requests_held_at_the_router_are_served_once_a_replica_is_up():
    """The only replica is down from 2 s to 10 s: what arrived meanwhile waits at the router and gets its first
    token after 10 s (it was served from its arrival, before the replica was back: busy 180%)."""
    r = flopwise.simulate(replicas=1, replica_events="down:0@2,up:0@10", request_rate=5.0, num_requests=100)
    held = [row for row in r.rows if 2.0 < row["arrival_at"] < 10.0 and not row["error"]]
    assert held and min(row["arrival_at"] + row["ttft_ms"] / 1e3 for row in held) >= 10.0
    assert r.summary["fleet"]["replicas"][0]["busy_fraction"] <= 1.0


def test_autoscale_starts_at_its_minimum_and_bills_the_run_not_the_cold_starts_after_it():
    """--autoscale 2..4 starts two replicas (it started one); --replicas outside the range is refused; a replica
    still cold when the traffic ends is billed to the end of the run, not to its ready time (1e9 s of cold start
    billed a million GPU-hours)."""
    d = flopwise.simulate(autoscale="2..4", request_rate=20.0, num_requests=300).to_dict()["fleet"]
    assert d["autoscale"]["history"][0]["replicas"] == 2
    with pytest.raises(flopwise.FlopwiseError, match="start with 8 replicas .* outside --autoscale 2..4"):
        flopwise.simulate(autoscale="2..4", replicas=8, num_requests=30)
    d = flopwise.simulate(autoscale="1..4", cold_start=1e9, request_rate=20.0, num_requests=400).to_dict()
    hours = d["duration_s"] * len(d["fleet"]["replicas"]) / 3600
    assert d["fleet"]["gpu_hours"] <= hours + 1e-9


def test_the_run_ends_at_the_last_work_and_a_later_stop_does_not_bill_past_it():
    """Requests that time out after the last completion kept the replicas stepping: the run (and its billing) ends
    at their last step, so busy stays within 100% (it was 142%); a drain scheduled long after the traffic bills
    no more than the run (it billed 1000 s for a 41 s run)."""
    d = flopwise.simulate(replicas=2, timeout_s=3.0, request_rate=200.0, num_requests=1500, input_len=2000,
                          output_len=200).to_dict()
    assert all(r["busy_fraction"] <= 1.0 for r in d["fleet"]["replicas"])
    d = flopwise.simulate(replicas=2, request_rate=10.0, num_requests=400, replica_events="drain:0@1000").to_dict()
    assert d["fleet"]["gpu_hours"] <= 2 * d["duration_s"] / 3600 * 1.01


def test_a_replica_event_after_the_run_is_not_part_of_it():
    """Replica 1 goes down at 1 s and is set to come back at 500 s, long after the 10 s of traffic: it ends the run
    down (it showed 'up' with nothing served after its return); one back while requests remain serves them."""
    kw = dict(replicas=2, request_rate=5.0, num_requests=50, input_len=100, output_len=20)
    late = flopwise.simulate(replica_events="down:1@1,up:1@500", **kw).to_dict()["fleet"]["replicas"]
    assert [r["state"] for r in late] == ["up", "down"]
    back = flopwise.simulate(replica_events="down:1@1,up:1@5", **kw).to_dict()["fleet"]["replicas"]
    assert [r["state"] for r in back] == ["up", "up"]
    # a request whose KV is on the link to a decode replica that is down is still part of the run: the replica's return
    # before the KV lands is applied and the request served (it failed when that return was taken for after the run)
    pd = dict(disaggregate="prefill=1xtp1,decode=1xtp1", num_requests=1, input_len=8000, output_len=10,
              request_rate="inf", kv_link="network", layerwise=False)
    d = flopwise.simulate(replica_events="down:1@0.215,up:1@0.225", **pd).to_dict()
    assert d["num_failed"] == 0 and [r["state"] for r in d["fleet"]["replicas"]] == ["up", "up"]


def test_time_held_at_the_router_is_queue_time_not_api_server_time():
    """The only replica is down from 5 s to 20 s: the held requests' wait is queue time in the breakdown, behind
    an API server or not (it read as 2.4 s of frontend time with one)."""
    kw = dict(replicas=1, replica_events="down:0@5,up:0@20", request_rate=2.0, num_requests=100)
    http = flopwise.simulate(**kw).to_dict()["time_breakdown_ms"]
    offline = flopwise.simulate(frontend="none", **kw).to_dict()["time_breakdown_ms"]
    assert http["frontend_ms"] < 100 and offline["frontend_ms"] == 0.0
    assert http["queue_ms"] > 2000 and offline["queue_ms"] > 2000


def test_a_disaggregated_pool_wider_than_one_server_spans_servers():
    # a TP 16 prefill pool on H100 SXM fills 2 servers while its TP 8 decode pool fits one: each pool's replica
    # spans its own (the KV hand-off sizes one copy of the KV as one GPU holds it)
    r = flopwise.simulate(model="llama-3.1-70b", gpu="h100-sxm", disaggregate="prefill=1xtp16,decode=1xtp8",
                          num_requests=20, seed=0)
    assert r.summary["num_completed"] == 20


def test_the_simulate_header_names_each_disaggregated_pool():
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-m", "flopwise", "simulate", "--model", "qwen3-32b", "--gpu", "h200",
                          "--disaggregate", "prefill=2xtp2,decode=1xtp4", "--request-rate", "2", "--num-requests",
                          "30"], capture_output=True, text=True, check=True).stdout
    head = " ".join(out.split("\n")[:2])
    assert "8x h200 (prefill 2x tp=2 + decode 1x tp=4," in head and "replicas=3" not in head
