"""Metric definitions, checked on hand-built records (no timing)."""

import pytest

from flopwise.bench.transport import chunk_token_counts
from flopwise.metrics.summary import RequestRecord, RunSummary, summarize
from flopwise.specs.sla import parse_sla


def rec(i, arrival, times, *, sent=None, chunks=None, error_kind=None, source="usage"):
    return RequestRecord(request_id=i, arrival_at=arrival, input_tokens=10, output_tokens=0, token_times=list(times),
                         sent_at=sent, chunk_tokens=chunks, error=None if error_kind is None else "x",
                         error_kind=error_kind, output_tokens_source=source)


def test_ttft_tpot_e2e_itl_definitions():
    r = rec(0, 1.0, [1.1, 1.12, 1.16], sent=1.004)
    assert r.ttft_ms == 100.0 or abs(r.ttft_ms - 100.0) < 1e-9  # from the scheduled send
    assert abs(r.ttft_from_send_ms - 96.0) < 1e-9
    assert abs(r.send_lag_ms - 4.0) < 1e-9
    assert abs(r.e2e_ms - 160.0) < 1e-9
    assert abs(r.tpot_ms - 30.0) < 1e-9  # (160 - 100) / (3 - 1)
    assert [round(x, 6) for x in r.itls_ms()] == [20.0, 40.0]


def test_multi_token_chunks_count_per_token():
    # 3 chunks carrying 1, 2, 3 tokens: n = 6; TPOT = (e2e - ttft) / 5; per-token ITL spreads each gap.
    r = rec(0, 0.0, [0.1, 0.14, 0.2], chunks=[1, 2, 3])
    assert r.num_output_tokens == 6
    assert abs(r.tpot_ms - 20.0) < 1e-9
    assert [round(x, 6) for x in r.itls_ms()] == [40.0, 60.0]
    assert [round(x, 6) for x in r.itls_per_token_ms()] == [20.0, 20.0, 20.0, 20.0, 20.0]


def test_summary_counts_failures_by_kind_and_in_denominators():
    recs = [rec(0, 0.0, [0.1, 0.2]), rec(1, 0.0, [0.1, 0.3]), rec(2, 0.0, [], error_kind="http_500"),
            rec(3, 0.0, [0.1], error_kind="dropped_stream")]
    s = summarize(recs, parse_sla("p95_ttft<=1000ms"))
    assert s.num_requests == 4 and s.num_completed == 2 and s.num_failed == 2
    assert s.errors_by_kind == {"http_500": 1, "dropped_stream": 1}
    assert s.sla_attainment == 0.5
    assert abs(s.duration_s - 0.3) < 1e-12
    assert abs(s.request_throughput - 2 / 0.3) < 1e-9
    assert s.output_tokens_source == {"usage": 2}
    # stable JSON keys shared with simulate
    for k in ("ttft_ms", "tpot_ms", "itl_ms", "e2e_ms", "goodput", "output_tokens_per_s"):
        assert k in s.to_dict()


def test_summary_takes_a_given_duration():
    s = summarize([rec(0, 0.0, [0.1, 0.2])], duration_s=2.0)
    assert s.duration_s == 2.0 and s.request_throughput == 0.5


def test_record_round_trips_through_dict():
    r = rec(7, 0.5, [0.6, 0.7], sent=0.51, chunks=[1, 3])
    assert RequestRecord.from_dict(r.to_dict()) == r


def test_chunk_token_counts():
    assert chunk_token_counts(3, ["a", "b", "c"], [None] * 3) == [1, 1, 1]
    assert chunk_token_counts(5, ["ab", "cd", "e"], [2, 2, 1]) == [2, 2, 1]  # exact from logprobs
    # surplus 3 spread by characters beyond the first: weights 0, 3, 0 -> all to the middle chunk
    assert chunk_token_counts(6, ["a", "bcde", "f"], [None] * 3) == [1, 4, 1]
    assert sum(chunk_token_counts(10, ["ab", "abc", "a"], [None] * 3)) == 10
    assert chunk_token_counts(0, [], []) == []


def test_run_summary_is_typed_and_its_json_keeps_the_stable_keys_in_order():
    recs = [rec(0, 0.0, [0.1, 0.2]), rec(1, 0.0, [0.1, 0.3]), rec(2, 0.0, [], error_kind="http_500")]
    s = summarize(recs, parse_sla("p95_ttft<=1000ms,p95_tpot<=150ms"))
    # by SLA name or by key; an unknown metric is an error, not a None
    assert s.latency("tpot") is s.tpot_ms and s.latency("tpot_ms").mean == pytest.approx(150.0)
    with pytest.raises(KeyError):
        s.latency("ttlt")
    # request 1's TPOT is 200 ms: over the bound; p95 of (100, 200) = 195 ms misses the aggregate objective
    assert s.sla_attainment == pytest.approx(1 / 3) and s.goodput == pytest.approx(1 / 0.3)
    assert s.sla_objectives_met == {"p95_ttft<=1000ms": True, "p95_tpot<=150ms": False} and s.sla_met is False
    d = s.to_dict()
    assert list(d)[:9] == list(RunSummary.LATENCY_KEYS)
    assert list(d)[-7:] == ["sla", "goodput", "sla_attainment", "sla_objectives_met", "sla_met", "goodput_vllm",
                            "sla_attainment_vllm"]
    assert d["tpot_ms"] == {"mean": 150.0, "p50": 150.0, "p90": pytest.approx(190.0), "p95": pytest.approx(195.0),
                            "p99": pytest.approx(199.0)}
    # without an SLA every completed request is good and the SLA verdicts are left out of the JSON
    n = summarize(recs).to_dict()
    assert n["goodput"] == n["request_throughput"] == pytest.approx(2 / 0.3)
    assert "sla_met" not in n and "sla_objectives_met" not in n and n["sla"] is None
