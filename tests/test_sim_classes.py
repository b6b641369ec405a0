"""Client timeouts, request classes and priority scheduling in the simulator (issue 15), checked by hand."""

from __future__ import annotations

import pytest

import flopwise
from flopwise.errors import WorkloadError
from flopwise.sim import SimConfig, simulate
from flopwise.specs.build import build_deployment
from flopwise.workload import build_workload
from flopwise.workload.classes import parse_classes


def _offline():
    return build_deployment("meta-llama/Llama-3.1-8B", "h100-sxm", frontend="none")


def test_a_request_past_its_timeout_is_abandoned_with_the_tokens_it_had():
    dep = _offline()
    wl = build_workload(num_requests=1, input_len=128, output_len=400, request_rate=1.0)
    full = simulate(dep, wl, SimConfig())
    e2e_s = full.records[0].e2e_ms / 1e3
    cut = build_workload(num_requests=1, input_len=128, output_len=400, request_rate=1.0, timeout_s=e2e_s / 2)
    res = simulate(dep, cut, SimConfig())
    rec = res.records[0]
    deadline = rec.arrival_at + e2e_s / 2
    assert not rec.ok and rec.error_kind == "timeout"
    assert rec.token_times and max(rec.token_times) <= deadline
    # the tokens it had are the ones the full run had delivered by then (same steps until the abort)
    assert rec.token_times == [t for t in full.records[0].token_times if t <= deadline]
    s = res.metrics()
    assert s.num_failed == 1 and s.errors_by_kind == {"timeout": 1} and s.num_completed == 0


def test_under_overload_timeouts_free_the_engine_and_every_completion_beats_its_deadline():
    dep = build_deployment("meta-llama/Llama-3.1-8B", "h100-sxm")
    wl = build_workload(num_requests=600, input_len=1024, output_len=256, request_rate=30.0, timeout_s=5)
    res = simulate(dep, wl, SimConfig())
    ok = [r for r in res.records if r.ok]
    late = [r for r in res.records if r.error_kind == "timeout"]
    assert ok and late and len(ok) + len(late) == 600
    assert max(r.e2e_ms for r in ok) <= 5_000
    # abandoned requests stop holding the engine: the ones that are served finish sooner than with no timeout
    plain = simulate(dep, build_workload(num_requests=600, input_len=1024, output_len=256, request_rate=30.0),
                     SimConfig())
    assert res.metrics().e2e_ms.p95 < plain.metrics().e2e_ms.p95


def test_priority_scheduling_serves_the_urgent_class_first():
    dep = build_deployment("meta-llama/Llama-3.1-8B", "h100-sxm")
    classes = "chat=0.5:sla=p95_ttft<=2000ms;batch=0.5:prio=1"
    wl = build_workload(num_requests=800, input_len=1024, output_len=256, request_rate=30.0, classes=classes)
    fcfs = simulate(dep, wl, SimConfig()).report().classes
    prio = simulate(dep, wl, SimConfig(scheduling_policy="priority")).report().classes
    assert fcfs["chat"].num_requests + fcfs["batch"].num_requests == 800
    # FCFS: both classes queue alike; priority: chat jumps the queue, batch waits longer
    assert fcfs["chat"].ttft_ms.p95 == pytest.approx(fcfs["batch"].ttft_ms.p95, rel=0.2)
    assert prio["chat"].ttft_ms.p95 < 0.2 * fcfs["chat"].ttft_ms.p95
    assert prio["batch"].ttft_ms.p95 > 1.5 * fcfs["batch"].ttft_ms.p95
    # each class is judged by its own SLA (batch has none: every completed request counts)
    assert prio["chat"].sla == "p95_ttft<=2000ms" and prio["chat"].sla_met is True
    assert fcfs["chat"].sla_met is False and prio["batch"].sla is None


def test_classes_are_parsed_and_drawn_by_share():
    cs = parse_classes("a=3:prio=2:timeout=500ms;b=1:sla=p95_ttft<=1s")
    assert [(c.name, c.share, c.priority, c.timeout_s) for c in cs] == [("a", 0.75, 2, 0.5), ("b", 0.25, 0, None)]
    wl = build_workload(num_requests=4000, input_len=10, output_len=10, request_rate=10.0,
                        classes="a=3:prio=2:timeout=500ms;b=1", timeout_s=30)
    a = [r for r in wl.requests if r.klass == "a"]
    assert abs(len(a) / 4000 - 0.75) < 0.03
    assert {(r.priority, r.timeout_s) for r in a} == {(2, 0.5)}
    assert {(r.priority, r.timeout_s) for r in wl.requests if r.klass == "b"} == {(0, 30)}  # the run's timeout
    # the same seed draws the same classes; the lengths and arrivals are those of the stream without classes
    again = build_workload(num_requests=4000, input_len=10, output_len=10, request_rate=10.0,
                           classes="a=3:prio=2:timeout=500ms;b=1", timeout_s=30)
    bare = build_workload(num_requests=4000, input_len=10, output_len=10, request_rate=10.0)
    assert again == wl and [r.arrival_at for r in bare.requests] == [r.arrival_at for r in wl.requests]


@pytest.mark.parametrize("kw,msg", [
    (dict(timeout_s=0), "timeout"),
    (dict(timeout_s="soon"), "cannot read 'soon'"),
    (dict(classes="a=1;b"), "NAME=SHARE"),
    (dict(classes="a=0"), "share > 0"),
    (dict(classes="a=1:prio=x"), "not an integer"),
    (dict(classes="a=1:colour=red"), "prio=N, timeout=S or sla"),
    (dict(scheduling_policy="lifo"), "--scheduling-policy"),
])
def test_bad_timeouts_classes_and_policies_are_one_clear_error(kw, msg):
    with pytest.raises(WorkloadError, match=msg):
        flopwise.simulate(num_requests=5, input_len=16, output_len=4, request_rate=1.0, **kw)


def test_classes_and_priorities_run_in_fleets_too():
    def run(policy):
        return flopwise.simulate(replicas=2, router="least-outstanding", num_requests=800, input_len=1024,
                                 output_len=256, request_rate=100.0, classes="chat=0.5;batch=0.5:prio=1",
                                 scheduling_policy=policy).to_dict()["classes"]

    fcfs, prio = run("fcfs"), run("priority")
    assert prio["chat"]["num_requests"] + prio["batch"]["num_requests"] == 800
    assert prio["chat"]["ttft_ms"]["p95"] < 0.5 * fcfs["chat"]["ttft_ms"]["p95"]
    assert prio["batch"]["ttft_ms"]["p95"] > fcfs["batch"]["ttft_ms"]["p95"]


def test_fleets_abandon_timed_out_requests_like_one_replica_and_bounded_metrics_agree():
    from flopwise.cluster import simulate_fleet
    from flopwise.cluster.build import build_cluster

    def make(tp, n):
        return build_deployment("meta-llama/Llama-3.1-8B", "h100-sxm", tp=tp, num_gpus=tp * n)

    one = simulate(make(1, 1), build_workload(num_requests=600, input_len=1024, output_len=256, request_rate=30.0,
                                              timeout_s=5), SimConfig()).metrics()
    wl = build_workload(num_requests=1200, input_len=1024, output_len=256, request_rate=60.0, timeout_s=5)
    spec = build_cluster(make, tp=1, replicas=2, router="round-robin")
    exact = simulate_fleet(spec, wl, metrics="exact").metrics()
    bounded = simulate_fleet(spec, wl, metrics="bounded").metrics()
    late = exact.errors_by_kind.get("timeout", 0)
    assert late > 0 and exact.num_completed + late == 1200
    assert bounded.errors_by_kind == exact.errors_by_kind and bounded.num_completed == exact.num_completed
    # two replicas at twice the rate abandon about the same share as one (round-robin smooths arrivals a little)
    assert late / 1200 == pytest.approx(one.errors_by_kind["timeout"] / 600, abs=0.08)
    assert exact.e2e_ms.p99 <= 5000
    # disaggregated: a prefill or decode leg past its deadline is dropped and counted the same way
    pd = build_cluster(make, tp=1, replicas=1, disaggregate="prefill=1xtp1,decode=1xtp1")
    d = simulate_fleet(pd, wl, metrics="exact").metrics()
    assert d.errors_by_kind.get("timeout", 0) > 0 and d.num_completed + d.errors_by_kind["timeout"] == 1200


def test_the_sglang_policy_drops_timed_out_requests_too():
    d = flopwise.simulate(engine="sglang", request_rate=30.0, num_requests=600, input_len=1024, output_len=256,
                          timeout_s=5).to_dict()
    late = d["errors_by_kind"]["timeout"]
    assert late > 0 and d["num_completed"] + late == 600 and d["e2e_ms"]["p99"] <= 5000
