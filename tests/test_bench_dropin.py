"""`flopwise bench` as a drop-in for `vllm bench serve` (issue 16): every chunk with a choice is timed, the
open-loop rate is delivered as asked (vLLM's rescaling), prompts are the length the server counts.

Exact numbers come from hand-built streams (the transport's event handler with given instants); the mock-server
runs check structure, never tight timings."""

import math

import numpy as np
import pytest

from flopwise.bench.arrivals import Load
from flopwise.bench.mock_server import MockConfig, mock_server_thread
from flopwise.bench.runner import BenchConfig, PromptConfig, run_bench
from flopwise.bench.scheduler import run_load
from flopwise.bench.store import load_run
from flopwise.bench.transport import _finish, _on_event, _Stream, chunk_token_counts
from flopwise.metrics.summary import RequestRecord, summarize
from flopwise.specs.sla import parse_sla
from flopwise.workload import ArrivalProcess, arrival_times
from flopwise.workload.build import build_workload


def _completion(text, finish=None):
    reason = "null" if finish is None else f'"{finish}"'
    return (f'{{"object":"text_completion","choices":[{{"index":0,"text":{__import__("json").dumps(text)},'
            f'"finish_reason":{reason}}}]}}').encode()


def _usage(prompt, completion):
    return b'{"choices":[],"usage":{"prompt_tokens":%d,"completion_tokens":%d}}' % (prompt, completion)


def _replay(events, *, max_tokens, chat=False, ignore_eos=True, arrival=0.0, sent=0.0):
    """Feed (instant, payload) events through the transport's handler; the finished record."""
    rec = RequestRecord(request_id=0, arrival_at=arrival, input_tokens=10, output_tokens=0, sent_at=sent,
                        input_tokens_requested=10)
    st = _Stream(max_chunks=2 * max_tokens + 64)
    for now, data in events:
        if _on_event(data, now, st, rec, chat):
            break
    _finish(rec, st, None, max_tokens, ignore_eos)
    return rec


def test_empty_text_chunks_at_start_middle_and_end_are_timed():
    # 8 tokens at 100, 110, ..., 170 ms; tokens 0, 4 and 7 are incomplete UTF-8 (empty text). The request was
    # scheduled at 0 and sent at 2 ms.
    times = [0.100 + 0.010 * i for i in range(8)]
    texts = ["", " a", " b", " c", "", " d", " e", ""]
    events = [(t, _completion(x, "length" if i == 7 else None))
              for i, (t, x) in enumerate(zip(times, texts, strict=True))]
    events += [(0.171, _usage(10, 8)), (0.171, b"[DONE]")]
    rec = _replay(events, max_tokens=8, sent=0.002)
    assert rec.ok and rec.error is None
    assert rec.token_times == times  # every chunk timed, the usage chunk not
    assert rec.num_output_tokens == 8 and rec.output_tokens_source == "usage" and rec.chunk_tokens is None
    assert rec.ttft_ms == pytest.approx(100.0)  # not 110: the empty first token counts
    assert rec.ttft_from_send_ms == pytest.approx(98.0)
    assert rec.e2e_ms == pytest.approx(170.0)  # not 160: the empty last token counts
    assert rec.e2e_from_send_ms == pytest.approx(168.0)
    assert rec.tpot_ms == pytest.approx(10.0)  # (170 - 100) / 7
    assert np.allclose(rec.itls_ms(), [10.0] * 7)
    s = summarize([rec])
    assert s.itl_ms.p99 == pytest.approx(10.0) and s.tpot_ms.mean == pytest.approx(10.0)


def test_a_stream_of_only_empty_chunks_with_usage_is_a_success():
    events = [(0.1 + 0.01 * i, _completion("", "length" if i == 3 else None)) for i in range(4)]
    rec = _replay(events + [(0.2, _usage(10, 4)), (0.2, b"[DONE]")], max_tokens=4)
    assert rec.ok and rec.num_output_tokens == 4 and rec.tpot_ms == pytest.approx(10.0)
    # but a stream with no choice at all is empty
    rec = _replay([(0.2, _usage(10, 4)), (0.2, b"[DONE]")], max_tokens=4)
    assert not rec.ok and rec.error_kind == "empty_response"


def test_finish_only_chunk_carries_no_token():
    # 3 tokens, then a chunk with empty text and finish_reason: usage says 3, the last chunk carries none.
    events = [(0.1, _completion(" a")), (0.12, _completion(" b")), (0.14, _completion(" c")),
              (0.15, _completion("", "length")), (0.15, _usage(10, 3)), (0.15, b"[DONE]")]
    rec = _replay(events, max_tokens=3)
    assert rec.ok and rec.chunk_tokens == [1, 1, 1, 0] and rec.num_output_tokens == 3
    assert rec.e2e_ms == pytest.approx(150.0) and rec.tpot_ms == pytest.approx(25.0)  # vLLM: (150 - 100) / 2
    assert np.allclose(rec.itls_per_token_ms(), [20.0, 20.0])  # the zero-token chunk's gap is not a token's
    assert chunk_token_counts(2, ["a", "", ""], [None] * 3, [False, False, True]) == [1, 1, 0]
    assert chunk_token_counts(2, ["a", "", ""], [None] * 3, [False, False, False]) == [1, 1, 0]


def test_chat_role_only_chunk_is_not_timed():
    role = b'{"choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}'

    def tok(x):
        return f'{{"choices":[{{"index":0,"delta":{{"content":"{x}"}},"finish_reason":null}}]}}'.encode()

    events = [(0.001, role), (0.1, tok(" a")), (0.11, tok("")), (0.12, tok(" b")), (0.12, _usage(10, 3)),
              (0.12, b"[DONE]")]
    rec = _replay(events, max_tokens=3, chat=True)
    assert rec.ok and rec.token_times == [0.1, 0.11, 0.12] and rec.ttft_ms == pytest.approx(100.0)


def test_rescaled_arrivals_put_request_n_at_n_over_rate():
    rng = np.random.default_rng(0)
    t = arrival_times(ArrivalProcess(kind="poisson", rate=9.0, rescale=True), 200, rng)
    assert t[-1] == 200 / 9.0 and t[0] > 0 and np.all(np.diff(t) >= 0)
    g = arrival_times(ArrivalProcess(kind="gamma", rate=4.0, burstiness=0.5, rescale=True), 50, rng)
    assert g[-1] == pytest.approx(50 / 4.0, rel=1e-12)
    # the default (simulator) schedule is unchanged: first at 0, drawn gaps, sum only near n / rate
    plain = arrival_times(ArrivalProcess(kind="poisson", rate=9.0), 200, np.random.default_rng(0))
    assert plain[0] == 0.0 and plain[-1] != pytest.approx(200 / 9.0, rel=1e-3)
    w = build_workload(num_requests=20, input_len=8, output_len=4, request_rate=5.0, rescale_arrivals=True)
    assert w.requests[-1].arrival_at == pytest.approx(20 / 5.0, rel=1e-12)


def test_scheduler_sends_the_nth_rescaled_request_at_n_over_rate():
    import asyncio

    sent = []

    async def send(slot):
        sent.append(slot.scheduled_at)

    phase = asyncio.run(run_load(Load(kind="poisson", rate=400.0, rescale=True), range(40), send, block=40,
                                 clock=__import__("time").perf_counter))
    assert len(sent) == 40
    assert sent[-1] - phase.started_at == pytest.approx(40 / 400.0, rel=1e-9)
    # --duration of exactly the rescaled span: its last request, on the boundary, is sent whatever the seed
    for seed in range(8):
        sent.clear()
        asyncio.run(run_load(Load(kind="poisson", rate=400.0, rescale=True), range(10_000), send, block=40,
                             duration_s=40 / 400.0, seed=seed, clock=__import__("time").perf_counter))
        assert len(sent) == 40, seed


FAST = MockConfig(ttft_ms=10.0, itl_ms=2.0)


@pytest.fixture(scope="module")
def mock_url():
    with mock_server_thread(FAST) as url:
        yield url


def _cfg(url, **kw):
    base = dict(url=url, model="mock", load=Load(kind="concurrency", concurrency=2), num_requests=6,
                prompts=PromptConfig(input_len=16, output_len=8), timeout_s=5.0, scrape_metrics=False)
    base.update(kw)
    return BenchConfig(**base)


def test_delivered_rate_equals_the_asked_rate_when_rescaled(mock_url, tmp_path):
    rep = run_bench(_cfg(mock_url, load=Load(kind="poisson", rate=100.0, rescale=True), num_requests=12),
                    tmp_path / "a")
    s = rep.summary
    assert s["num_completed"] == 12 and s["asked_request_rate"] == 100.0
    assert s["delivered_request_rate"] == pytest.approx(100.0, rel=1e-9)
    assert not any("delivered" in w for w in rep.warnings)
    # without rescaling the delivered rate is what the drawn gaps gave, and the summary says so
    rep = run_bench(_cfg(mock_url, load=Load(kind="poisson", rate=100.0), num_requests=12), tmp_path / "b")
    got = rep.summary["delivered_request_rate"]
    assert got is not None and got != pytest.approx(100.0, rel=0.02)
    assert any("delivered" in w and "--rescale-arrivals" in w for w in rep.warnings)
    # a closed loop has no asked rate but a delivered one
    s = run_bench(_cfg(mock_url), tmp_path / "c").summary
    assert s["asked_request_rate"] is None and s["delivered_request_rate"] > 0


def test_empty_chunks_through_the_mock(mock_url, tmp_path):
    data = tmp_path / "p.jsonl"
    data.write_text("".join(__import__("json").dumps({"prompt": t, "output_len": 8}) + "\n"
                            for t in ["a [[mock:empty_0_3_7]]", "b [[mock:all_empty]]", "c"]))
    data = str(data)
    rep = run_bench(_cfg(mock_url, num_requests=3, prompts=PromptConfig(output_len=8, dataset=data)), tmp_path / "r")
    assert rep.summary["num_completed"] == 3 and rep.summary["errors_by_kind"] == {}
    recs = load_run(tmp_path / "r").records
    assert all(len(r.token_times) == 8 and r.num_output_tokens == 8 and r.chunk_tokens is None for r in recs)


def test_prompts_are_sized_by_the_servers_tokenizer(tmp_path):
    """The mock's tokenizer adds 3 special tokens (like a BOS): with /tokenize prompts are exact, without it
    the server's count differs from the client's and the summary warns."""
    with mock_server_thread(MockConfig(ttft_ms=5.0, itl_ms=1.0, special_tokens=3)) as url:
        rep = run_bench(_cfg(url), tmp_path / "a")
        recs = load_run(tmp_path / "a").records
        assert rep.summary["prompt_token_counter"] == "server:/tokenize"
        assert all(r.input_tokens == 16 == r.input_tokens_requested for r in recs)
        assert not any("prompts were built" in w for w in rep.warnings)
    with mock_server_thread(MockConfig(ttft_ms=5.0, itl_ms=1.0, special_tokens=3, tokenize=False)) as url:
        rep = run_bench(_cfg(url), tmp_path / "b")
        assert rep.summary["prompt_token_counter"] == "approx"
        assert rep.summary["input_tokens_mean"] == 19.0 and rep.summary["input_tokens_requested_mean"] == 16.0
        assert any("prompts were built as 16.0 tokens" in w and "counted 19.0" in w for w in rep.warnings)


def test_vllm_goodput_beside_flopwise_goodput():
    # two requests: both meet TTFT/TPOT/E2E; the second has one 300 ms gap, which only flopwise's test sees
    a = RequestRecord(request_id=0, arrival_at=0.0, input_tokens=10, output_tokens=0,
                      token_times=[0.1, 0.12, 0.14, 0.16], sent_at=0.0)
    b = RequestRecord(request_id=1, arrival_at=0.0, input_tokens=10, output_tokens=0,
                      token_times=[0.1, 0.4, 0.42, 0.44], sent_at=0.0)
    s = summarize([a, b], parse_sla("p99_ttft<=200ms,p99_tpot<=200ms,p99_itl<=100ms"))
    assert s.sla_attainment == 0.5 and s.sla_attainment_vllm == 1.0
    assert s.goodput_vllm == pytest.approx(2 / 0.44)


def test_a_request_meets_an_itl_objective_at_its_statistic_not_by_its_longest_gap():
    # 40 gaps of 5 ms and one of 60 ms (a prefill chunk beside the decode): its 95th-percentile gap is 5 ms
    times = [0.1 + 0.005 * i for i in range(21)] + [0.26 + 0.005 * i for i in range(21)]
    r = RequestRecord(request_id=0, arrival_at=0.0, input_tokens=10, output_tokens=0, token_times=times)
    assert max(r.itls_ms()) == pytest.approx(60.0)
    assert summarize([r], parse_sla("p95_itl<=15ms")).sla_attainment == 1.0
    assert summarize([r], parse_sla("p99_itl<=15ms")).sla_attainment == 0.0  # 41 gaps: p99 reaches into the 60
    assert summarize([r], parse_sla("mean_itl<=6.5ms")).sla_attainment == 1.0  # (40 x 5 + 60) / 41 = 6.34 ms
    assert summarize([r], parse_sla("mean_itl<=6ms")).sla_attainment == 0.0


def test_cancelled_requests_are_not_failures():
    ok = RequestRecord(request_id=0, arrival_at=0.0, input_tokens=10, output_tokens=0, token_times=[0.1, 0.2])
    bad = RequestRecord(request_id=1, arrival_at=0.0, input_tokens=10, output_tokens=0, error="x",
                        error_kind="http_500")
    cancel = RequestRecord(request_id=2, arrival_at=0.0, input_tokens=10, output_tokens=0, token_times=[0.1],
                           error="interrupted", error_kind="cancelled")
    s = summarize([ok, bad, cancel], parse_sla("p99_ttft<=1s"))
    assert s.num_requests == 3 and s.num_completed == 1 and s.num_failed == 1 and s.num_cancelled == 1
    assert s.sla_attainment == 0.5  # of the two requests that were not cancelled
    assert s.errors_by_kind == {"http_500": 1, "cancelled": 1}


def test_burstiness_alone_gives_gamma_arrivals_like_vllm():
    from flopwise.bench.options import loads

    (load,) = loads("4", None, "poisson", 0.5, None, True)
    assert load.kind == "gamma" and load.burstiness == 0.5 and load.rescale
    (load,) = loads("4", None, "poisson", math.inf, None, False)
    assert load.kind == "constant"
