"""Conventions users compare against (issue 12): `vllm bench serve` result JSON both ways, per-request columns,
server metric names of other engines, damaged run folders, and `bench --predict` on the calibration replay."""

import asyncio
import csv
import json
import subprocess
import sys

import pytest

from flopwise.bench.arrivals import Load
from flopwise.bench.export import records_from_vllm_result, request_rows, to_vllm_result, write_rows
from flopwise.bench.mock_server import MockConfig, mock_server_thread
from flopwise.bench.prometheus import parse_prometheus, server_view
from flopwise.bench.runner import BenchConfig, PromptConfig, report_run, run_bench
from flopwise.bench.scheduler import run_load
from flopwise.errors import WorkloadError
from flopwise.metrics.summary import RequestRecord, summarize
from flopwise.specs.sla import parse_sla


def _records():
    a = RequestRecord(request_id=0, arrival_at=0.0, input_tokens=12, output_tokens=3, token_times=[0.1, 0.12, 0.15],
                      sent_at=0.002, output_tokens_source="usage")
    b = RequestRecord(request_id=1, arrival_at=0.05, input_tokens=10, output_tokens=2, token_times=[0.2, 0.25],
                      sent_at=0.05, output_tokens_source="usage")
    c = RequestRecord(request_id=2, arrival_at=0.1, input_tokens=9, output_tokens=0, error="HTTP 500: x",
                      error_kind="http_500", sent_at=0.1)
    return [a, b, c]


def test_vllm_result_keys_and_definitions():
    recs = _records()
    s = summarize(recs, parse_sla("p99_ttft<=99ms"))
    d = to_vllm_result(recs, s, model="m", request_rate=4.0, burstiness=1.0, max_concurrency=None,
                       endpoint="completions")
    for k in ("duration", "completed", "failed", "total_input_tokens", "total_output_tokens", "request_throughput",
              "request_goodput", "output_throughput", "total_token_throughput", "input_lens", "output_lens", "ttfts",
              "itls", "latencies", "start_times", "errors", "mean_ttft_ms", "median_ttft_ms", "std_ttft_ms",
              "p99_ttft_ms", "mean_tpot_ms", "p99_itl_ms", "mean_e2el_ms", "p50_e2el_ms"):
        assert k in d, k
    assert d["completed"] == 2 and d["failed"] == 1 and d["total_input_tokens"] == 22 and d["total_output_tokens"] == 5
    # vLLM's definitions: from the send; TPOT over requests with > 1 token; every chunk gap
    assert d["mean_ttft_ms"] == pytest.approx((98.0 + 150.0) / 2)
    assert d["mean_tpot_ms"] == pytest.approx((25.0 + 50.0) / 2)  # (148 - 98) / 2 and (200 - 150) / 1
    assert d["mean_e2el_ms"] == pytest.approx((148.0 + 200.0) / 2)
    assert sorted(round(x * 1e3, 6) for x in sum(d["itls"], [])) == [20.0, 30.0, 50.0]
    assert d["request_goodput"] == pytest.approx(1 / s.duration_s)  # only request 0 has TTFT <= 99 ms
    assert d["errors"][2].startswith("http_500")


def test_vllm_result_round_trips_into_the_same_summary():
    recs = _records()
    s = summarize(recs)
    d = json.loads(json.dumps(to_vllm_result(recs, s, model="m", request_rate=None, burstiness=1.0,
                                             max_concurrency=4, endpoint="chat")))
    back = records_from_vllm_result(d)
    s2 = summarize(back, duration_s=d["duration"])
    assert s2.num_completed == 2 and s2.num_failed == 1
    assert s2.ttft_ms.mean == pytest.approx(s.ttft_from_send_ms.mean)  # arrival = send
    assert s2.tpot_ms.mean == pytest.approx(s.tpot_ms.mean)
    assert s2.itl_ms.p99 == pytest.approx(s.itl_ms.p99)
    assert s2.output_tokens_per_s == pytest.approx(s.output_tokens_per_s)
    with pytest.raises(WorkloadError, match="per-request"):
        records_from_vllm_result({"duration": 1.0})


def test_per_request_columns(tmp_path):
    rows = request_rows(_records())
    assert rows[0]["ttft_ms"] == pytest.approx(100.0) and rows[0]["ttft_from_send_ms"] == pytest.approx(98.0)
    assert rows[0]["e2e_from_send_ms"] == pytest.approx(148.0) and rows[0]["itl_ms_max"] == pytest.approx(30.0)
    assert rows[2]["ttft_ms"] is None and rows[2]["error_kind"] == "http_500"
    write_rows(tmp_path / "r.csv", rows)
    back = list(csv.DictReader((tmp_path / "r.csv").open()))
    assert len(back) == 3 and back[1]["request_id"] == "1"
    try:
        import pyarrow  # noqa: F401
    except ImportError:  # the optional extra is absent: one clear error naming it
        with pytest.raises(WorkloadError, match="pyarrow"):
            write_rows(tmp_path / "r.parquet", rows)
    else:
        write_rows(tmp_path / "r.parquet", rows)
        assert (tmp_path / "r.parquet").stat().st_size > 0
    with pytest.raises(WorkloadError, match=".csv or .parquet"):
        write_rows(tmp_path / "r.txt", rows)


def test_runs_write_csv_and_vllm_json_and_bench_report_reads_vllm_json(tmp_path):
    with mock_server_thread(MockConfig(ttft_ms=5.0, itl_ms=1.0)) as url:
        cfg = BenchConfig(url=url, model="mock", load=Load(kind="poisson", rate=200.0, rescale=True), num_requests=6,
                          prompts=PromptConfig(input_len=8, output_len=4), timeout_s=5.0, scrape_metrics=False,
                          sla="p99_ttft<=10s")
        rep = run_bench(cfg, tmp_path / "run")
    d = json.loads((tmp_path / "run" / "vllm_result.json").read_text())
    assert d["completed"] == 6 and d["request_rate"] == 200.0 and d["request_goodput"] is not None
    assert len(list(csv.DictReader((tmp_path / "run" / "requests.csv").open()))) == 6
    r = subprocess.run([sys.executable, "-m", "flopwise", "bench", "report", str(tmp_path / "run" / "vllm_result.json"),
                        "--json"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    s = json.loads(r.stdout)
    assert s["num_completed"] == 6 and s["tpot_ms"]["mean"] == pytest.approx(rep.summary["tpot_ms"]["mean"])
    assert s["vllm"]["completed"] == 6
    r = subprocess.run([sys.executable, "-m", "flopwise", "bench", "report",
                        str(tmp_path / "run" / "vllm_result.json")], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and "vLLM mean" in r.stdout


def _scrape(text):
    return parse_prometheus(text)


def test_data_parallel_gauges_are_averaged_and_rank_copies_collapsed():
    before = _scrape('vllm:kv_cache_usage_perc{engine="0"} 0.1\nvllm:kv_cache_usage_perc{engine="1"} 0.1\n'
                     'vllm:num_requests_running{engine="0"} 0\nvllm:num_requests_running{engine="1"} 0\n')
    after = _scrape('vllm:kv_cache_usage_perc{engine="0"} 0.6\nvllm:kv_cache_usage_perc{engine="1"} 0.8\n'
                    'vllm:num_requests_running{engine="0"} 3\nvllm:num_requests_running{engine="1"} 5\n')
    v = server_view([{"phase": "before", "metrics": before}, {"phase": "after", "metrics": after}])
    assert v.kv_usage_max == pytest.approx(0.7)  # the mean of two engines, not 140%
    assert v.running_max == 8  # requests add up
    sg = _scrape('sglang:num_running_reqs{tp_rank="0"} 4\nsglang:num_running_reqs{tp_rank="1"} 4\n'
                 'sglang:token_usage{tp_rank="0"} 0.5\nsglang:token_usage{tp_rank="1"} 0.5\n')
    v = server_view([{"phase": "before", "metrics": sg}, {"phase": "after", "metrics": sg}])
    assert v.running_max == 4 and v.kv_usage_max == 0.5 and v.engine == "sglang"  # tensor-parallel copies


def _hist(name, s, c, labels=""):
    return f"{name}_sum{labels} {s}\n{name}_count{labels} {c}\n"


@pytest.mark.parametrize("engine,text0,text1,expect", [
    ("sglang",
     _hist("sglang:queue_time_seconds", 0, 0)
     + _hist("sglang:per_stage_req_latency_seconds", 0, 0, '{stage="prefill_forward"}')
     + _hist("sglang:time_to_first_token_seconds", 0, 0) + _hist("sglang:e2e_request_latency_seconds", 0, 0)
     + "sglang:num_retracted_requests_total 1\n",
     _hist("sglang:queue_time_seconds", 1.0, 10)
     + _hist("sglang:per_stage_req_latency_seconds", 2.0, 10, '{stage="prefill_forward"}')
     + _hist("sglang:per_stage_req_latency_seconds", 50.0, 10, '{stage="decode_loop"}')
     + _hist("sglang:time_to_first_token_seconds", 3.0, 10) + _hist("sglang:e2e_request_latency_seconds", 10.0, 10)
     + "sglang:num_retracted_requests_total 4\n",
     {"queue_ms_mean": 100.0, "prefill_ms_mean": 200.0, "decode_ms_mean": 700.0, "preemptions": 3.0}),
    ("tgi",
     _hist("tgi_request_queue_duration", 0, 0) + _hist("tgi_request_duration", 0, 0)
     + _hist("tgi_request_mean_time_per_token_duration", 0, 0) + "tgi_queue_size 0\ntgi_batch_current_size 0\n",
     _hist("tgi_request_queue_duration", 0.5, 10) + _hist("tgi_request_duration", 10.0, 10)
     + _hist("tgi_request_mean_time_per_token_duration", 0.2, 10) + "tgi_queue_size 3\ntgi_batch_current_size 7\n",
     {"queue_ms_mean": 50.0, "e2e_ms_mean": 1000.0, "itl_ms_mean": 20.0, "running_max": 7, "waiting_max": 3}),
    ("tensorrt-llm",
     _hist("trtllm_request_queue_time_seconds", 0, 0) + _hist("trtllm_request_prefill_time_seconds", 0, 0)
     + _hist("trtllm_request_decode_time_seconds", 0, 0) + _hist("trtllm_time_to_first_token_seconds", 0, 0),
     _hist("trtllm_request_queue_time_seconds", 1.0, 10) + _hist("trtllm_request_prefill_time_seconds", 1.5, 10)
     + _hist("trtllm_request_decode_time_seconds", 6.0, 10) + _hist("trtllm_time_to_first_token_seconds", 2.5, 10)
     + 'trtllm_kv_cache_utilization{model_name="m"} 0.4\n',
     {"queue_ms_mean": 100.0, "prefill_ms_mean": 150.0, "decode_ms_mean": 600.0, "kv_usage_max": 0.4}),
])
def test_server_metric_names_of_other_engines(engine, text0, text1, expect):
    v = server_view([{"phase": "before", "metrics": _scrape(text0)}, {"phase": "after", "metrics": _scrape(text1)}])
    assert v.engine == engine
    for k, want in expect.items():
        assert getattr(v, k) == pytest.approx(want), k


def test_llamacpp_kv_ratio_is_no_longer_read():
    m = _scrape("llamacpp:kv_cache_usage_ratio 0.9\nllamacpp:requests_processing 2\n")
    v = server_view([{"phase": "before", "metrics": m}, {"phase": "after", "metrics": m}])
    assert v.kv_usage_max is None and v.running_max == 2


def test_tensorrt_llm_metrics_path_is_tried():
    import asyncio

    import httpx

    def handler(req):
        if req.url.path == "/prometheus/metrics":
            return httpx.Response(200, text="trtllm_num_requests_running 2\n")
        return httpx.Response(404)

    async def go():
        from flopwise.bench.prometheus import scrape
        async with httpx.AsyncClient(transport=httpx.MockTransport(handler), base_url="http://x") as c:
            return await scrape(c)

    assert asyncio.run(go()) == {"trtllm_num_requests_running": 2.0}


@pytest.mark.parametrize("damage", ['{"config": ', "[1, 2]", '{"config": [], "sessions": []}', "\xff\xfe"])
def test_damaged_run_json_is_one_clear_error(tmp_path, damage):
    d = tmp_path / "run"
    d.mkdir()
    (d / "run.json").write_bytes(damage.encode("latin-1"))
    with pytest.raises(WorkloadError, match="damaged"):
        report_run(d)


def test_damaged_records_are_skipped_and_counted(tmp_path):
    with mock_server_thread(MockConfig(ttft_ms=5.0, itl_ms=1.0)) as url:
        cfg = BenchConfig(url=url, model="mock", load=Load(kind="concurrency", concurrency=2), num_requests=3,
                          prompts=PromptConfig(input_len=8, output_len=4), timeout_s=5.0, scrape_metrics=False)
        run_bench(cfg, tmp_path / "run")
    with open(tmp_path / "run" / "requests.jsonl", "a") as f:
        f.write('[1, 2]\n{"request_id": 7}\n{"request_id": 8, "arrival_at": "x", "input_tokens": 1, '
                '"output_tokens": 1}\n\xff\n')
    rep = report_run(tmp_path / "run")
    assert rep.summary["num_requests"] == 3 and rep.summary["num_unreadable_lines"] == 4


def test_predict_uses_the_calibration_replay(tmp_path):
    with mock_server_thread(MockConfig(ttft_ms=5.0, itl_ms=1.0)) as url:
        cfg = BenchConfig(url=url, model="mock", load=Load(kind="concurrency", concurrency=2), num_requests=4,
                          prompts=PromptConfig(input_len=32, output_len=8), timeout_s=5.0, scrape_metrics=False)
        rep = run_bench(cfg, tmp_path / "run")
    from flopwise.calibrate.predict import predict_run

    cmp = predict_run(rep, model="llama-3.2-1b", gpu="h100-sxm")
    rows = {m: (a, b) for m, a, b, _ in cmp.rows}
    assert rows["ttft_ms.mean"][1] > 0 and rows["request_throughput"][1] > 0
    # the engine named for the prediction is the one simulated: SGLang's HTTP server and step costs differ
    other = predict_run(rep, model="llama-3.2-1b", gpu="h100-sxm", engine="sglang")
    assert cmp.setup["engine"].startswith("vllm@") and other.setup["engine"].startswith("sglang@")
    assert dict((m, b) for m, _, b, _ in other.rows)["ttft_ms.mean"] != rows["ttft_ms.mean"][1]
    # a server run with --enforce-eager is predicted without CUDA graphs: its decode steps pay their launches
    eager = predict_run(rep, model="llama-3.2-1b", gpu="h100-sxm", enforce_eager=True)
    assert eager.setup["engine"] == cmp.setup["engine"] + " (eager)"
    assert dict((m, b) for m, _, b, _ in eager.rows)["tpot_ms.mean"] > 2 * rows["tpot_ms.mean"][1]
    # and one run with the engine core's scheduling not overlapped (--no-async-scheduling) pays its CPU per step
    sync = predict_run(rep, model="llama-3.2-1b", gpu="h100-sxm", engine="vllm@0.14", async_scheduling=False)
    overlapped = predict_run(rep, model="llama-3.2-1b", gpu="h100-sxm", engine="vllm@0.14")
    tpot = [dict((m, b) for m, _, b, _ in c.rows)["tpot_ms.mean"] for c in (sync, overlapped)]
    assert tpot[0] > tpot[1]
    # a B200 MoE run served with TensorRT-LLM's fused MoE kernels (--moe-backend trtllm) decodes faster
    runs = [predict_run(rep, model="qwen3-30b-a3b", gpu="b200", **kw) for kw in ({}, {"moe_backend": "trtllm"})]
    fused = [dict((m, b) for m, _, b, _ in c.rows)["tpot_ms.mean"] for c in runs]
    assert fused[1] < fused[0]
    # an SGLang 0.4.6 server told --attention-backend flashinfer decodes Llama-3.1-8B's group of 4 on the CUDA
    # cores (FA3 by default on an H100), so its predicted decode is slower
    backends = [predict_run(rep, model="llama-3.1-8b", gpu="h100-sxm", engine="sglang@0.4.6", **kw)
                for kw in ({}, {"attention_backend": "flashinfer"})]
    told = [dict((m, b) for m, _, b, _ in c.rows)["tpot_ms.mean"] for c in backends]
    assert told[1] > told[0]
    # a server streaming every 4 tokens (--stream-interval 4): its 8-token answers reach the client as events after
    # tokens 0, 4 and 7, so the predicted ITL is per event (7 token gaps over 2 events), TPOT per token as before
    chunked = dict((m, b) for m, _, b, _ in predict_run(rep, model="llama-3.2-1b", gpu="h100-sxm",
                                                         engine="sglang", stream_interval=4).rows)
    assert chunked["itl_ms.mean"] == pytest.approx(3.5 * chunked["tpot_ms.mean"], rel=0.05)


def test_the_server_view_leaves_the_warm_up_out():
    """The runner scrapes /metrics again once the warm-up requests have finished; histogram means run from that
    last 'before' scrape, so two slow warm-ups (10 s each) do not enter the measured requests' mean (1 s)."""
    start = _scrape(_hist("vllm:e2e_request_latency_seconds", 0.0, 0))
    warmed = _scrape(_hist("vllm:e2e_request_latency_seconds", 20.0, 2))
    end = _scrape(_hist("vllm:e2e_request_latency_seconds", 30.0, 12))
    v = server_view([{"phase": "before", "metrics": start}, {"phase": "before", "metrics": warmed},
                     {"phase": "after", "metrics": end}])
    assert v.e2e_ms_mean == pytest.approx(1000.0)


def test_the_server_view_gauges_leave_the_warm_up_out():
    """A gauge scraped while the warm-up ran (64 running) is not averaged into the measured phase's (4 and 8)."""
    def running(n):
        return _scrape(_hist("vllm:e2e_request_latency_seconds", 0.0, 0) + f"vllm:num_requests_running {n}\n")
    v = server_view([{"phase": "before", "metrics": running(0)}, {"phase": "during", "metrics": running(64)},
                     {"phase": "before", "metrics": running(0)}, {"phase": "during", "metrics": running(4)},
                     {"phase": "after", "metrics": running(8)}])
    assert (v.running_mean, v.running_max) == (6.0, 8.0)


def test_run_load_calls_the_after_warm_up_hook_between_the_phases():
    order = []

    async def send(slot):
        order.append("warmup" if slot.is_warmup else "measured")

    async def hook():
        order.append("hook")

    asyncio.run(run_load(Load(kind="concurrency", concurrency=1), range(2), send, num_warmup=2, after_warmup=hook))
    assert order == ["warmup", "warmup", "hook", "measured", "measured"]
