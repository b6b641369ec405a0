"""SSE parsing, arrival processes, prompts, Prometheus parsing and diagnosis: pure functions."""

import math
from pathlib import Path

import numpy as np
import pytest

from flopwise.bench.arrivals import Load, arrival_gaps
from flopwise.bench.diagnosis import diagnose
from flopwise.bench.options import loads
from flopwise.bench.prometheus import ServerView, parse_prometheus, server_view
from flopwise.bench.prompts import PromptSource, load_jsonl, load_sharegpt
from flopwise.bench.runner import BenchConfig, PromptConfig, _warnings
from flopwise.bench.store import RunStore, SavedRun
from flopwise.bench.tokenize import ApproxCounter
from flopwise.bench.transport import MalformedSSE, SSEParser
from flopwise.errors import WorkloadError


def test_sse_parser_split_reads_comments_and_multiline():
    p = SSEParser()
    assert p.feed(b'data: {"a"') == []
    assert p.feed(b': 1}\n\n: keep-alive\n\nevent: x\nid: 3\ndata: [DONE]\r\n\r\n') == [b'{"a": 1}', b"[DONE]"]
    assert p.feed(b"data: line1\ndata: line2\n\n") == [b"line1\nline2"]
    assert p.feed(b"data: tail") == [] and p.close() == [b"tail"]


def test_sse_parser_rejects_garbage_lines():
    with pytest.raises(MalformedSSE):
        SSEParser().feed(b"<html>oops</html>\n")


def test_arrival_gaps():
    def take(load, n):
        return list(__import__("itertools").islice(arrival_gaps(load, seed=1), n))

    assert take(Load(kind="constant", rate=4.0), 4) == [0.0, 0.25, 0.25, 0.25]
    assert take(Load(kind="poisson", rate=math.inf), 3) == [0.0, 0.0, 0.0]
    g = np.array(take(Load(kind="poisson", rate=10.0), 20001)[1:])
    assert abs(g.mean() - 0.1) < 0.005 and abs(g.std() / g.mean() - 1.0) < 0.05
    g = np.array(take(Load(kind="gamma", rate=10.0, burstiness=0.25), 20001)[1:])
    assert abs(g.mean() - 0.1) < 0.01 and abs(g.std() / g.mean() - 2.0) < 0.15  # cv = 1 / sqrt(shape)
    assert take(Load(kind="poisson", rate=3.0), 5) == take(Load(kind="poisson", rate=3.0), 5)  # seeded


def test_load_validation():
    with pytest.raises(WorkloadError):
        Load(kind="poisson", rate=0)
    with pytest.raises(WorkloadError):
        Load(kind="concurrency", concurrency=0)
    assert Load(kind="concurrency", concurrency=8).label == "concurrency-8"
    assert Load(kind="poisson", rate=math.inf).label == "rate-inf"


@pytest.mark.parametrize("kw, named", [({"arrival": "gamma"}, "--arrival"), ({"burstiness": 0.5}, "--burstiness"),
                                       ({"max_concurrency": 4}, "--max-concurrency")])
def test_open_loop_shaping_with_a_closed_loop_is_refused(kw, named):
    args = {"arrival": "poisson", "burstiness": 1.0, "max_concurrency": None} | kw
    with pytest.raises(WorkloadError, match=f"{named} shape.* an open loop"):
        loads(None, "2", args["arrival"], args["burstiness"], args["max_concurrency"])
    assert [x.concurrency for x in loads(None, "2,4", "poisson", 1.0, None)] == [2, 4]


def test_random_prompts_are_deterministic_distinct_and_sized():
    src = PromptSource(input_len=100, output_len=7, seed=3)
    a, b = src(0), src(1)
    assert a == PromptSource(input_len=100, output_len=7, seed=3)(0)
    assert a.text != b.text and a.output_len == 7
    assert a.input_tokens == 100 == ApproxCounter().count(a.text)
    assert src(0, warmup=True).text != a.text


def test_shared_prefix_prompts():
    src = PromptSource(input_len=20, output_len=5, shared_prefix_len=30, num_prefixes=2)
    p0, p1, p2 = src(0), src(1), src(2)

    def w(p):
        return p.text.split()

    assert w(p0)[:30] == w(p2)[:30] != w(p1)[:30]
    assert w(p0)[30:] != w(p2)[30:]
    assert p0.input_tokens == 50


def test_datasets(tmp_path):
    sg = tmp_path / "sg.json"
    sg.write_text('[{"conversations": [{"from": "human", "value": "hello there friend"}, '
                  '{"from": "gpt", "value": "hi you"}]}, {"conversations": [{"from": "human", "value": "x"}]}]')
    items = load_sharegpt(sg)
    assert len(items) == 1 and items[0].input_tokens == 3 and items[0].output_len == 2
    jl = tmp_path / "p.jsonl"
    jl.write_text('{"prompt": "a b c", "output_len": 4}\n\n{"messages": [{"role": "user", "content": "d e"}]}\n')
    items = load_jsonl(jl, output_len=9)
    assert [(p.input_tokens, p.output_len) for p in items] == [(3, 4), (2, 9)]
    assert items[1].messages is not None
    src = PromptSource(items=items)
    assert src(2) == items[0]
    with pytest.raises(WorkloadError):
        load_jsonl(jl)  # second line has no output length


PROM_BEFORE = """# HELP vllm:num_requests_running x
vllm:num_requests_running{model_name="m"} 0.0
vllm:num_requests_waiting{model_name="m"} 0.0
vllm:kv_cache_usage_perc{model_name="m"} 0.1
vllm:num_preemptions_total{model_name="m"} 0.0
vllm:request_queue_time_seconds_sum{model_name="m"} 1.0
vllm:request_queue_time_seconds_count{model_name="m"} 10.0
vllm:request_prefill_time_seconds_sum{model_name="m"} 1.0
vllm:request_prefill_time_seconds_count{model_name="m"} 10.0
vllm:request_decode_time_seconds_sum{model_name="m"} 1.0
vllm:request_decode_time_seconds_count{model_name="m"} 10.0
vllm:e2e_request_latency_seconds_sum{model_name="m"} 3.0
vllm:e2e_request_latency_seconds_count{model_name="m"} 10.0
vllm:prefix_cache_queries_total{model_name="m"} 100
vllm:prefix_cache_hits_total{model_name="m"} 0
process_cpu_seconds_total 5
"""


def _after(queue_s, prefill_s, decode_s, preempt=0, kv=0.5, waiting=0.0):
    e2e = queue_s + prefill_s + decode_s
    return (PROM_BEFORE.replace("waiting{model_name=\"m\"} 0.0", f"waiting{{model_name=\"m\"}} {waiting}")
            .replace("kv_cache_usage_perc{model_name=\"m\"} 0.1", f"kv_cache_usage_perc{{model_name=\"m\"}} {kv}")
            .replace("preemptions_total{model_name=\"m\"} 0.0", f"preemptions_total{{model_name=\"m\"}} {preempt}")
            .replace("queue_time_seconds_sum{model_name=\"m\"} 1.0", f"queue_time_seconds_sum{{model_name=\"m\"}} "
                                                                     f"{1 + 10 * queue_s}")
            .replace("prefill_time_seconds_sum{model_name=\"m\"} 1.0", f"prefill_time_seconds_sum{{model_name=\"m\"}} "
                                                                       f"{1 + 10 * prefill_s}")
            .replace("decode_time_seconds_sum{model_name=\"m\"} 1.0", f"decode_time_seconds_sum{{model_name=\"m\"}} "
                                                                      f"{1 + 10 * decode_s}")
            .replace("latency_seconds_sum{model_name=\"m\"} 3.0", f"latency_seconds_sum{{model_name=\"m\"}} "
                                                                  f"{3 + 10 * e2e}")
            .replace("_count{model_name=\"m\"} 10.0", "_count{model_name=\"m\"} 20.0")
            .replace("hits_total{model_name=\"m\"} 0", "hits_total{model_name=\"m\"} 25")
            .replace("queries_total{model_name=\"m\"} 100", "queries_total{model_name=\"m\"} 200"))


def _view(after):
    return server_view([{"phase": "before", "metrics": parse_prometheus(PROM_BEFORE)},
                        {"phase": "after", "metrics": parse_prometheus(after)}])


def test_prometheus_parse_and_view():
    m = parse_prometheus(PROM_BEFORE)
    assert "process_cpu_seconds_total" not in m
    assert m['vllm:kv_cache_usage_perc{model_name="m"}'] == 0.1
    v = _view(_after(0.5, 0.1, 0.4, preempt=3, kv=0.97, waiting=4))
    assert round(v.queue_ms_mean, 6) == 500.0 and round(v.prefill_ms_mean, 6) == 100.0
    assert round(v.decode_ms_mean, 6) == 400.0 and round(v.e2e_ms_mean, 6) == 1000.0
    assert v.preemptions == 3 and v.kv_usage_max == 0.97 and v.waiting_mean == 4
    assert v.prefix_cache_hit_rate == 0.25


def _summary(ttft, e2e, failed=0, lag_p99=0.0):
    return {"num_requests": 10, "num_failed": failed, "errors_by_kind": {"timeout": failed} if failed else {},
            "ttft_ms": {"mean": ttft}, "e2e_ms": {"mean": e2e}, "send_lag_ms": {"p99": lag_p99}}


@pytest.mark.parametrize("q,p,d,kw,expected", [
    (0.5, 0.1, 0.4, {}, "queueing"),
    (0.0, 0.7, 0.3, {}, "prefill_bound"),
    (0.0, 0.1, 0.9, {}, "decode_bound"),
    (0.0, 0.1, 0.9, {"preempt": 2}, "kv_bound"),
])
def test_diagnosis_from_server_view(q, p, d, kw, expected):
    dg = diagnose(_summary(100, 1000), _view(_after(q, p, d, **kw)))
    assert dg.source == "server" and dg.bottleneck == expected


def test_diagnosis_client_only_and_errors():
    dg = diagnose(_summary(800, 1000, failed=2, lag_p99=30.0), None)
    kinds = [f.kind for f in dg.findings]
    assert dg.source == "client" and kinds[:2] == ["errors", "client_lag"] and dg.bottleneck == "prefill_bound"
    assert diagnose(_summary(100, 1000), ServerView()).bottleneck == "decode_bound"


def test_a_chat_prompt_longer_on_the_server_than_its_own_tokenizer_counted_is_the_template():
    summary = {"input_tokens_requested_mean": 99.6, "input_tokens_mean": 114.6,
               "prompt_token_counter": "server:/tokenize"}
    load = Load(kind="concurrency", concurrency=1)
    chat = BenchConfig(url="http://x", model="m", load=load, endpoint="chat", prompts=PromptConfig(input_len=100))
    saved = SavedRun(root=Path("."), config={}, records=[], sessions=[], session_of={}, scrapes=[], num_bad_lines=0,
                     session_meta=())
    (w,) = _warnings(summary, chat, saved)
    assert "the 15.0 more are its chat template's tokens" in w and "--tokenizer" not in w
    # counted by an approximation, or on the completions endpoint: the tokenizer is the suspect
    completions = BenchConfig(url="http://x", model="m", load=load, prompts=PromptConfig(input_len=100))
    (w,) = _warnings(summary, completions, saved)
    assert "pass --tokenizer" in w


def test_a_results_directory_that_cannot_be_made_is_one_clear_error(tmp_path):
    blocker = tmp_path / "a_file"
    blocker.write_text("x")
    with pytest.raises(WorkloadError, match=r"--out .*a_file/run: cannot make the results directory \(Not a "):
        RunStore(blocker / "run", {"model": "m"})
