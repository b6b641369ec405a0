"""Workloads: lengths, arrivals, named workloads, traces, and bad input."""

from __future__ import annotations

import json
import math
from dataclasses import replace

import numpy as np
import pytest

from flopwise.errors import WorkloadError
from flopwise.workload import NAMED_WORKLOADS, ArrivalProcess, arrival_times, build_workload, load_trace, parse_length
from flopwise.workload.build import fit_context
from flopwise.workload.spec import RequestSpec


def test_length_forms():
    rng = np.random.default_rng(0)
    assert list(parse_length("512").sample(rng, 3)) == [512, 512, 512]
    u = parse_length("uniform:10:20").sample(rng, 1000)
    assert u.min() >= 10 and u.max() <= 20
    assert parse_length("lognormal:100:0.5").mean == pytest.approx(100 * math.exp(0.125))
    assert parse_length("normal:5:100").sample(rng, 1000).min() >= 1  # clipped to >= 1


def test_length_file(tmp_path):
    f = tmp_path / "lens.txt"
    f.write_text("3\n5\n")
    assert set(parse_length(f"file:{f}").sample(np.random.default_rng(0), 50)) == {3, 5}


@pytest.mark.parametrize("bad", ["abc", "uniform:20:10", "normal:0:1", "lognormal:5", "file:/nonexistent"])
def test_bad_lengths(bad):
    with pytest.raises(WorkloadError):
        parse_length(bad)


def test_arrivals():
    rng = np.random.default_rng(0)
    assert list(arrival_times(ArrivalProcess(kind="constant", rate=4.0), 4, rng)) == [0.0, 0.25, 0.5, 0.75]
    assert not arrival_times(ArrivalProcess(kind="poisson", rate=math.inf), 5, rng).any()
    gaps = np.diff(arrival_times(ArrivalProcess(kind="gamma", rate=10.0, burstiness=0.25), 20001, rng))
    assert gaps.mean() == pytest.approx(0.1, rel=0.05)
    assert gaps.std() / gaps.mean() == pytest.approx(2.0, rel=0.05)  # CV = 1 / sqrt(0.25)
    with pytest.raises(WorkloadError):
        ArrivalProcess(kind="poisson", rate=0.0)
    with pytest.raises(WorkloadError):
        ArrivalProcess(kind="weibull", rate=1.0)


def test_named_workloads_and_prefixes():
    assert set(NAMED_WORKLOADS) == {"chat", "rag", "code", "summarize", "batch", "sharegpt"}
    wl = build_workload(num_requests=500, workload="chat", request_rate=2.0, seed=0)
    assert wl.num_requests == 500
    assert {r.prefix_id for r in wl.requests} <= set(range(16))
    assert all(r.prefix_tokens == min(NAMED_WORKLOADS["chat"].prefix_tokens, r.input_tokens) for r in wl.requests)
    batch = build_workload(num_requests=10, workload="batch")
    assert all(r.arrival_at == 0.0 and r.prefix_id is None for r in batch.requests)


def test_common_random_numbers_across_rates():
    a = build_workload(num_requests=50, workload="rag", request_rate=1.0, seed=4)
    b = build_workload(num_requests=50, workload="rag", request_rate=9.0, seed=4)
    assert [r.input_tokens for r in a.requests] == [r.input_tokens for r in b.requests]
    assert a.requests[-1].arrival_at > b.requests[-1].arrival_at


def test_build_errors():
    with pytest.raises(WorkloadError, match="not both.*--max-concurrency"):
        build_workload(request_rate=2.0, concurrency=4)
    with pytest.raises(WorkloadError, match="give one of them"):
        build_workload(concurrency=4, max_concurrency=2)
    with pytest.raises(WorkloadError, match="max-concurrency"):
        build_workload(request_rate=2.0, max_concurrency=0)
    capped = build_workload(num_requests=5, request_rate=2.0, max_concurrency=3)
    assert capped.max_concurrency == 3 and capped.concurrency is None and not capped.is_closed_loop
    assert capped.requests[-1].arrival_at > 0  # the open loop's own arrivals, kept
    with pytest.raises(WorkloadError, match="unknown workload"):
        build_workload(workload="chatty")
    with pytest.raises(WorkloadError):
        build_workload(num_requests=0)


def test_jsonl_trace(tmp_path):
    f = tmp_path / "t.jsonl"
    f.write_text("\n".join(json.dumps(r) for r in [
        {"timestamp": 10.5, "input_tokens": 100, "output_tokens": 5, "prefix_id": "sys"},
        {"timestamp": 10.0, "input_len": 80, "output_len": 7},
        {"arrival_at": 12.0, "prompt_tokens": 60, "completion_tokens": 9, "prefix_id": "sys"},
    ]) + "\n")
    tr = load_trace(f)
    assert tr.timed
    assert [(r.arrival_at, r.input_tokens, r.output_tokens) for r in tr.requests] == [
        (0.0, 80, 7), (0.5, 100, 5), (2.0, 60, 9)]
    # the group shares its shortest prompt minus one token
    assert [r.prefix_tokens for r in tr.requests] == [0, 59, 59]
    wl = build_workload(trace=f)
    assert [r.arrival_at for r in wl.requests] == [0.0, 0.5, 2.0]
    assert build_workload(trace=f, request_rate=math.inf).requests[2].arrival_at == 0.0


def test_azure_csv_trace(tmp_path):
    f = tmp_path / "azure.csv"
    f.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n"
                 "2023-11-16 18:15:46.6805900,374,44\n"
                 "2023-11-16 18:15:50.9951690,396,0\n")
    tr = load_trace(f)
    assert [r.input_tokens for r in tr.requests] == [374, 396]
    assert [r.output_tokens for r in tr.requests] == [44, 1]
    assert tr.requests[1].arrival_at == pytest.approx(4.314579, abs=1e-6)


def test_sharegpt_length_estimate(tmp_path):
    f = tmp_path / "sg.json"
    f.write_text(json.dumps([
        {"conversations": [{"from": "human", "value": "x" * 41}, {"from": "gpt", "value": "y" * 400}]},
        {"conversations": [{"from": "human", "value": "hi"}, {"from": "gpt", "value": "y" * 400}]},
        {"conversations": [{"from": "human", "value": "only one turn"}]},
    ]))
    tr = load_trace(f)
    assert not tr.timed
    assert [(r.input_tokens, r.output_tokens) for r in tr.requests] == [(11, 100)]  # ceil(41/4), 400/4


@pytest.mark.parametrize("name,text,match", [
    ("a.jsonl", '{"timestamp": 1, "input_tokens": 3}\n', "output_tokens"),
    ("b.jsonl", "{not json\n", "not valid JSON"),
    ("c.csv", "time,in,out\n1,2,3\n", "TIMESTAMP"),
    ("d.txt", "", "unknown format"),
    ("e.json", '{"a": 1}', "JSON list"),
    ("f.jsonl", '{"timestamp": 0, "input_tokens": 0, "output_tokens": 3}\n', "input"),
])
def test_bad_traces(tmp_path, name, text, match):
    f = tmp_path / name
    f.write_text(text)
    with pytest.raises(WorkloadError, match=match):
        load_trace(f)


def test_missing_trace():
    with pytest.raises(WorkloadError, match="does not exist"):
        load_trace("/nonexistent/trace.jsonl")


def test_a_piecewise_rate_profile_gives_each_segment_its_rate():
    from flopwise.workload.arrivals import parse_rate_profile

    p = parse_rate_profile("300s:5,5m:40,300:5")
    assert p.segments == ((300.0, 5.0), (300.0, 40.0), (300.0, 5.0)) and p.cycle_s == 900.0
    assert [p.rate_at(t) for t in (0, 299, 300, 899, 900 + 450)] == [5, 5, 40, 5, 40]  # repeats after a cycle
    wl = build_workload(num_requests=16700, input_len=10, output_len=10, rate_profile="300s:5,300s:40,300s:5")
    t = np.array([r.arrival_at for r in wl.requests])
    for lo, hi, rate in ((0, 300, 5), (300, 600, 40), (600, 900, 5), (900, 1200, 5)):
        n = ((t >= lo) & (t < hi)).sum()
        assert abs(n - rate * 300) < 4 * math.sqrt(rate * 300), (lo, n)  # Poisson: mean L(t), 4 sigma


def test_a_diurnal_profile_rises_from_low_to_high_and_back():
    from flopwise.workload.arrivals import parse_rate_profile

    p = parse_rate_profile("diurnal:2:20:1h")
    assert p.rate_at(0) == 2 and p.rate_at(1800) == pytest.approx(20) and p.rate_at(3600) == pytest.approx(2)
    # the cumulative rate over a cycle is the mean rate x the period: (2 + 20) / 2 x 3600 arrivals
    assert p.invert(np.array([11 * 3600.0]))[0] == pytest.approx(3600.0)
    # and a quarter-cycle holds low T/4 + (high - low)(T/8 - T / (4 pi)) of them
    quarter = 2 * 900 + 18 * (450 - 3600 / (4 * math.pi))
    assert p.invert(np.array([quarter]))[0] == pytest.approx(900.0, rel=1e-4)
    wl = build_workload(num_requests=39600, input_len=10, output_len=10, rate_profile="diurnal:2:20:3600s")
    t = np.array([r.arrival_at for r in wl.requests])
    assert t[-1] == pytest.approx(3600.0, rel=0.02)
    assert ((t >= 1500) & (t < 2100)).sum() > 4 * ((t < 600) | (t >= 3000)).sum() / 2  # the peak vs the troughs


@pytest.mark.parametrize("spec,msg", [("", "needs segments"), ("300s", "DURATION:RATE"), ("0s:5", "> 0"),
                                      ("300s:-1", ">= 0"), ("300s:0", "above 0"), ("diurnal:5:2:60s", "HIGH"),
                                      ("diurnal:1:2", "LOW:HIGH:PERIOD"), ("10x:5", "duration")])
def test_bad_rate_profiles_are_one_clear_error(spec, msg):
    with pytest.raises(WorkloadError, match=msg):
        build_workload(num_requests=5, input_len=10, output_len=10, rate_profile=spec)


def test_a_rate_profile_excludes_a_fixed_rate():
    with pytest.raises(WorkloadError, match="drop --request-rate"):
        build_workload(num_requests=5, input_len=10, output_len=10, request_rate=3.0, rate_profile="60s:5")


def test_request_sent_at_copies_and_checks_only_the_time():
    r = RequestSpec(arrival_at=0.0, input_tokens=10, output_tokens=5, prefix_id=3, prefix_tokens=4, priority=2)
    assert r.sent_at(1.5) == replace(r, arrival_at=1.5) and r.arrival_at == 0.0
    for bad in (-1.0, float("inf"), float("nan")):
        with pytest.raises(WorkloadError, match="arrival times"):
            r.sent_at(bad)


def test_a_named_workload_is_shortened_to_the_models_context_prompt_first():
    ins, outs, n = fit_context(np.array([100, 3000, 500, 10]), np.array([50, 2000, 4000, 5000]), 4096)
    assert n == 3  # 4,500 / 5,000 / 4,500 + ... the first fits as it is
    assert ins.tolist() == [100, 2096, 96, 1] and outs.tolist() == [50, 2000, 4000, 4095]
    kept_out = fit_context(np.array([3000]), np.array([2000]), 4096, outputs=False)
    assert kept_out[0].tolist() == [2096] and kept_out[1].tolist() == [2000]
    wl = build_workload(workload="chat", num_requests=400, seed=1, context_len=4096)
    assert max(r.input_tokens + r.output_tokens for r in wl.requests) <= 4096
    assert wl.name.startswith("chat (") and "requests shortened to the 4,096-token context" in wl.name
    assert build_workload(workload="chat", num_requests=400, seed=1).name == "chat"
    fixed = build_workload(input_len=5000, output_len=10, num_requests=3, context_len=4096)  # given: left alone
    assert fixed.requests[0].input_tokens == 5000


def test_simulate_and_plan_run_a_4k_model_on_their_default_workload():
    import flopwise

    s = flopwise.simulate("llama-2-7b", "a100-sxm-80gb", request_rate=2, num_requests=200).to_dict()
    assert s["num_completed"] == 200 and "shortened to the 4,096-token context" in s["setup"]["workload"]
    p = flopwise.plan("llama-2-7b", gpus=["a100-sxm-80gb"], tp=[1], num_requests=40).to_dict()
    assert p["max_model_len"] == 4096 and "shortened to fit it (prompt first)" in p["workload_note"]
