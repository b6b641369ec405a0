"""`flopwise simulate` end to end: clean JSON on stdout, rows files, one-line errors."""

from __future__ import annotations

import csv
import json

import pytest
from typer.testing import CliRunner

from flopwise.cli import app
from flopwise.errors import FlopwiseError

runner = CliRunner()
KEYS = ("ttft_ms", "tpot_ms", "itl_ms", "e2e_ms", "request_throughput", "output_tokens_per_s", "goodput",
        "sla_attainment", "preemptions", "num_requests", "duration_s")


def _run(*args):
    return runner.invoke(app, ["simulate", *args], catch_exceptions=False)


def test_json_has_the_stable_keys(tmp_path):
    rows = tmp_path / "rows.csv"
    r = _run("--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--request-rate", "4", "--num-requests", "50",
             "--workload", "chat", "--sla", "p95_ttft<=300ms,p95_tpot<=50ms", "--output", str(rows), "--json")
    assert r.exit_code == 0
    d = json.loads(r.stdout)
    for k in KEYS:
        assert k in d
    assert set(d["ttft_ms"]) == {"mean", "p50", "p90", "p95", "p99"}
    assert d["num_requests"] == 50 and d["setup"]["max_num_seqs"] == 1024  # vLLM serve default on H100
    assert len(list(csv.DictReader(rows.open()))) == 50


def test_vllm_knob_flags_and_static(tmp_path):
    r = _run("--gpu", "a100-sxm-80gb", "--concurrency", "8", "--input-len", "256", "--output-len", "16",
             "--num-requests", "16", "--scheduler", "static", "--no-enable-prefix-caching", "--json")
    d = json.loads(r.stdout)
    assert d["setup"]["max_num_seqs"] == 256 and d["setup"]["max_num_batched_tokens"] == 2048
    assert d["setup"]["scheduler"] == "static" and d["running_batch"]["max"] == 8


def test_max_concurrency_caps_an_open_loop():
    """--request-rate with --max-concurrency (vllm bench serve's pair): never more than the cap in flight, reported
    in the setup; --request-rate with --concurrency is one line naming --max-concurrency."""
    r = _run("--request-rate", "40", "--max-concurrency", "6", "--input-len", "256", "--output-len", "32",
             "--num-requests", "40", "--json")
    d = json.loads(r.stdout)
    assert r.exit_code == 0 and d["setup"]["max_concurrency"] == 6 and d["setup"]["concurrency"] is None
    assert d["running_batch"]["max"] <= 6 and d["num_completed"] == 40
    with pytest.raises(FlopwiseError, match="use --max-concurrency to cap an open loop"):
        _run("--request-rate", "2", "--concurrency", "3")


def test_find_max_rate():
    r = _run("--input-len", "512", "--output-len", "64", "--num-requests", "60",
             "--sla", "p95_ttft<=200ms", "--find-max-rate", "--json")
    d = json.loads(r.stdout)
    assert d["max_rate"]["request_rate"] > 0 and d["sla_met"]
    # every rate printed beside the sustained rate is at that rate: throughput = rate, goodput = rate x attainment,
    # output tokens/s = rate x the window's output tokens per request (64 here, fixed lengths)
    rate = d["max_rate"]["request_rate"]
    assert d["request_throughput"] == pytest.approx(rate)
    assert d["goodput"] == pytest.approx(rate * d["sla_attainment"]) and d["goodput"] <= d["request_throughput"]
    assert d["output_tokens_per_s"] == pytest.approx(rate * 64, rel=0.02)


def test_one_token_replies_have_no_tpot_and_still_report():
    """A one-token reply has no TPOT: the reports print '-' (they raised a TypeError), and a plan for one-token
    replies to one-token, fully cached prompts has a finite capacity (its bound divided by zero)."""
    r = _run("--input-len", "64", "--output-len", "1", "--num-requests", "60", "--sla", "p95_ttft<=300ms",
             "--find-max-rate")
    assert r.exit_code == 0 and "P95 TPOT - ms" in r.output
    r = runner.invoke(app, ["plan", "--gpus", "h100-sxm", "--weights", "bf16", "--kv", "bf16", "--tp", "1",
                            "--input-len", "1", "--output-len", "1", "--num-requests", "100"], catch_exceptions=False)
    assert r.exit_code == 0 and "h100-sxm tp1 bf16/kv:bf16" in r.output


def test_failed_requests_are_reported_and_the_api_server_is_never_over_busy():
    """Requests past --timeout-s are counted on screen (the line showed throughput 0 without saying why), and the
    API server's utilisation stays within 100% when failed requests kept it busy after the last completion."""
    r = _run("--replicas", "2", "--timeout-s", "500ms", "--replica-events", "down:0@3", "--request-rate", "40",
             "--num-requests", "400")
    assert r.exit_code == 0 and "of 400 requests failed (" in r.output and "timeout" in r.output
    d = json.loads(_run("--replicas", "2", "--timeout-s", "500ms", "--replica-events", "down:0@3", "--request-rate",
                        "40", "--num-requests", "400", "--json").stdout)
    assert d["num_failed"] > 300 and 0 < d["frontend_utilization"] <= 1.0


@pytest.mark.parametrize("args,match", [
    (["--request-rate", "fast"], "request-rate"),
    (["--request-rate", "2", "--concurrency", "3"], "not both"),
    (["--find-max-rate"], "needs --sla"),
    (["--output", "rows.parquet", "--num-requests", "3"], "parquet|csv"),
    (["--input-len", "200000", "--num-requests", "2"], "KV|context"),
    (["--scheduler", "fifo"], "unknown scheduler"),
])
def test_errors_are_flopwise_errors(args, match, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    try:
        import pyarrow  # noqa: F401
        if "rows.parquet" in args:
            pytest.skip("pyarrow installed")
    except ImportError:
        pass
    with pytest.raises(FlopwiseError, match=match):
        _run(*args)


def test_rates_below_a_hundredth_keep_their_digits():
    from flopwise.units import fmt_rate
    assert [fmt_rate(x) for x in (0.0019, 0.004, 0.0067, 1.234, 0.0)] == ["0.0019", "0.004", "0.01", "1.23", "0.00"]


def test_a_prompt_stalled_on_the_unchunked_budget_is_explained():
    # TensorRT-LLM schedules prompts whole by default; chat's longest prompts (8,192 tokens, its cap) fill the whole
    # 8,192-token budget, so each waits for the running decodes to finish
    res = runner.invoke(app, ["simulate", "--model", "qwen3-8b", "--gpu", "h100-sxm", "--engine", "trtllm",
                              "--request-rate", "inf", "--num-requests", "300"])
    assert res.exit_code == 0, res.output
    text = " ".join(res.output.split())
    assert "6 prompts waited at the head of the queue for the running requests to leave room for them in the " \
           "8,192-token step budget" in text and "turn chunked prefill on" in text
    res = runner.invoke(app, ["simulate", "--model", "qwen3-8b", "--gpu", "h100-sxm", "--request-rate", "inf",
                              "--num-requests", "300"])  # vLLM V1 chunks prompts: nothing waits so
    assert res.exit_code == 0 and "waited at the head" not in res.output
