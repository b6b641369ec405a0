"""The load generator against the built-in mock server: metrics, every error kind, store, resume, CLI.

Timing asserts are loose on purpose (a shared 2-core machine); definitions are checked exactly elsewhere."""

import json
import signal
import subprocess
import sys
import time

import pytest
from typer.testing import CliRunner

from flopwise.bench.arrivals import Load
from flopwise.bench.mock_server import MockConfig, mock_server_thread
from flopwise.bench.runner import BenchConfig, PromptConfig, report_run, resume_bench, run_bench
from flopwise.bench.store import load_run
from flopwise.cli import app
from flopwise.errors import WorkloadError

FAST = MockConfig(ttft_ms=20.0, itl_ms=2.0)


@pytest.fixture(scope="module")
def mock_url():
    with mock_server_thread(FAST) as url:
        yield url


def cfg(url, **kw):
    base = dict(url=url, model="mock", load=Load(kind="concurrency", concurrency=4), num_requests=8,
                prompts=PromptConfig(input_len=16, output_len=8), timeout_s=5.0)
    base.update(kw)
    return BenchConfig(**base)


def jsonl_prompts(tmp_path, prompts, output_len=6):
    p = tmp_path / "prompts.jsonl"
    p.write_text("".join(json.dumps({"prompt": t, "output_len": output_len}) + "\n" for t in prompts))
    return str(p)


def test_completions_run_metrics(mock_url, tmp_path):
    rep = run_bench(cfg(mock_url, num_warmup=2), tmp_path / "run")
    s = rep.summary
    assert s["num_requests"] == 8 and s["num_completed"] == 8 and s["errors_by_kind"] == {}
    assert s["output_tokens_source"] == {"usage": 8}
    assert s["ttft_ms"]["p50"] >= 19.0 and s["ttft_ms"]["p50"] < 200
    assert 1.5 < s["tpot_ms"]["mean"] < 20  # mock ITL 2 ms
    assert s["itl_ms"]["mean"] == pytest.approx(s["itl_per_token_ms"]["mean"])
    saved = load_run(tmp_path / "run")
    assert len(saved.records) == 8  # warm-up lines are stored but excluded
    rows = [json.loads(x) for x in (tmp_path / "run" / "requests.jsonl").read_text().splitlines()]
    assert sum(r["is_warmup"] for r in rows) == 2
    assert all(r.input_tokens == 16 and r.num_output_tokens == 8 for r in saved.records)  # from usage
    assert rep.server is not None and rep.server.running_max is not None  # mock's /metrics gauges
    assert json.loads((tmp_path / "run" / "summary.json").read_text())["num_completed"] == 8


def test_chat_endpoint_and_open_loop(mock_url, tmp_path):
    rep = run_bench(cfg(mock_url, endpoint="chat", load=Load(kind="poisson", rate=200.0)), tmp_path / "run")
    assert rep.summary["num_completed"] == 8
    assert rep.summary["send_lag_ms"]["mean"] is not None


def test_duration_limit(mock_url, tmp_path):
    rep = run_bench(cfg(mock_url, num_requests=None, duration_s=0.3, load=Load(kind="constant", rate=20.0)),
                    tmp_path / "r")
    assert 3 <= rep.summary["num_requests"] <= 7  # sends at 0, 0.05, ... < 0.3 s


def test_multi_token_chunks():
    with mock_server_thread(MockConfig(ttft_ms=20.0, itl_ms=5.0, tokens_per_chunk=3)) as url:
        import tempfile
        with tempfile.TemporaryDirectory() as d:
            s = run_bench(cfg(url, load=Load(kind="concurrency", concurrency=1), num_requests=2,
                              prompts=PromptConfig(input_len=8, output_len=7)), d).summary
    # 7 tokens arrive as chunks of 1, 3, 3: chunk gaps ~15 ms, per-token gaps ~5 ms, TPOT ~5 ms.
    assert s["num_completed"] == 2
    assert s["itl_ms"]["mean"] == pytest.approx(3 * s["itl_per_token_ms"]["mean"], rel=1e-6)
    assert s["itl_per_token_ms"]["mean"] >= 4.0 and s["itl_ms"]["mean"] >= 12.0
    assert s["tpot_ms"]["mean"] == pytest.approx(s["itl_per_token_ms"]["mean"], rel=1e-6)


@pytest.mark.parametrize("fault,kind", [
    ("500", "http_500"), ("429", "http_429"), ("hang", "timeout"), ("stall", "timeout"),
    ("cut", "dropped_stream"), ("garbage", "malformed_sse"), ("clean_cut", "dropped_stream"),
])
def test_error_kinds(mock_url, tmp_path, fault, kind):
    prompts = ["ok one", f"bad [[mock:{fault}]]", "ok two"]
    c = cfg(mock_url, load=Load(kind="concurrency", concurrency=3), num_requests=3, timeout_s=0.5,
            prompts=PromptConfig(output_len=6, dataset=jsonl_prompts(tmp_path, prompts)))
    s = run_bench(c, tmp_path / "run").summary
    assert s["num_requests"] == 3 and s["num_completed"] == 2 and s["num_failed"] == 1
    assert s["errors_by_kind"] == {kind: 1}
    assert s["sla_attainment"] == pytest.approx(2 / 3)  # failures stay in the denominator
    bad = [r for r in load_run(tmp_path / "run").records if not r.ok]
    assert bad[0].error and bad[0].request_id == 1


def test_a_clean_end_after_the_finish_reason_is_complete_without_done(mock_url, tmp_path):
    # vllm bench serve never requires the closing [DONE]: a body that ends cleanly after the choice's finish_reason
    # is a complete response (a cut one, without it, stays dropped_stream: test_error_kinds)
    data = jsonl_prompts(tmp_path, ["x [[mock:no_done]]"], output_len=5)
    c = cfg(mock_url, load=Load(kind="concurrency", concurrency=1), num_requests=1, prompts=PromptConfig(
        output_len=5, dataset=data))
    s = run_bench(c, tmp_path / "run").summary
    assert s["num_completed"] == 1 and s["num_failed"] == 0
    (rec,) = load_run(tmp_path / "run").records
    assert rec.ok and len(rec.token_times) == 5 and rec.num_output_tokens == 5


def test_missing_usage_falls_back_to_a_tokenizer_or_the_chunk_count(mock_url, tmp_path):
    data = jsonl_prompts(tmp_path, ["x [[mock:no_usage]]"], output_len=5)
    c = cfg(mock_url, num_requests=1, prompts=PromptConfig(output_len=5, dataset=data, server_tokenizer=False))
    s = run_bench(c, tmp_path / "run").summary
    assert s["num_completed"] == 1 and s["output_tokens_source"] == {"chunks": 1}
    # with the server's /tokenize the output text is counted by the server's tokenizer
    c = cfg(mock_url, num_requests=1, prompts=PromptConfig(output_len=5, dataset=data))
    s = run_bench(c, tmp_path / "run2").summary
    assert s["num_completed"] == 1 and s["output_tokens_source"] == {"tokenizer": 1}
    assert s["prompt_token_counter"] == "server:/tokenize"


def test_connect_error(tmp_path):
    s = run_bench(cfg("http://127.0.0.1:9", num_requests=2, timeout_s=2.0, scrape_metrics=False),
                  tmp_path / "run").summary
    assert s["errors_by_kind"] == {"connect": 2} and s["num_completed"] == 0


def test_sla_goodput(mock_url, tmp_path):
    s = run_bench(cfg(mock_url, sla="p99_ttft<=5s,p99_tpot<=1s"), tmp_path / "a").summary
    assert s["sla_met"] is True and s["sla_attainment"] == 1.0
    s = run_bench(cfg(mock_url, sla="p50_ttft<=1ms"), tmp_path / "b").summary
    assert s["sla_met"] is False and s["sla_attainment"] == 0.0 and s["goodput"] == 0.0


def test_store_refuses_overwrite_and_skips_a_torn_line(mock_url, tmp_path):
    out = tmp_path / "run"
    run_bench(cfg(mock_url, num_requests=3), out)
    with pytest.raises(WorkloadError, match="--resume"):
        run_bench(cfg(mock_url), out)
    with open(out / "requests.jsonl", "a") as f:
        f.write('{"request_id": 99, "arrival_at": 1.0, "input_to')  # a crash mid-write
    rep = report_run(out)
    assert rep.summary["num_requests"] == 3 and rep.summary["num_unreadable_lines"] == 1


def test_resume_from_partial_file(mock_url, tmp_path):
    out = tmp_path / "run"
    run_bench(cfg(mock_url, num_requests=10), out)
    lines = (out / "requests.jsonl").read_text().splitlines()
    kept = [ln for ln in lines if json.loads(ln)["request_id"] < 4]
    cancelled = json.loads(next(ln for ln in lines if json.loads(ln)["request_id"] == 4))
    cancelled.update(error_kind="cancelled", error="interrupted", token_times=cancelled["token_times"][:2])
    (out / "requests.jsonl").write_text("\n".join(kept + [json.dumps(cancelled)]) + "\n")
    partial = report_run(out)
    assert partial.interrupted and partial.summary["num_requests"] == 5
    assert partial.summary["errors_by_kind"] == {"cancelled": 1}
    rep = resume_bench(out)
    assert not rep.interrupted
    assert rep.summary["num_requests"] == 10 and rep.summary["num_completed"] == 10
    saved = load_run(out)
    assert saved.sessions == [0, 1]
    assert {saved.session_of[i] for i in range(4)} == {0} and saved.session_of[4] == 1
    # throughput counts each session's own span, not the pause between them
    assert rep.summary["duration_s"] < 5.0


def test_ctrl_c_leaves_a_summarisable_file(tmp_path):
    """SIGINT to a running `flopwise bench`: exit 130, complete lines, in-flight requests recorded as cancelled."""
    with mock_server_thread(MockConfig(ttft_ms=50.0, itl_ms=20.0)) as url:
        out = tmp_path / "run"
        cmd = [sys.executable, "-m", "flopwise", "bench", "--url", url, "--model", "mock", "--concurrency", "4",
               "--num-requests", "400", "--input-len", "8", "--output-len", "20", "--out", str(out), "--no-scrape"]
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        req = out / "requests.jsonl"
        deadline = time.time() + 30
        while time.time() < deadline and (not req.exists() or len(req.read_text().splitlines()) < 8):
            time.sleep(0.1)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)
        assert proc.returncode == 130, err
        assert "bench report" in err
        rows = [json.loads(x) for x in req.read_text().splitlines()]  # every line parses
        assert any(r["error_kind"] == "cancelled" for r in rows)
        rep = report_run(out)
        assert rep.interrupted and rep.summary["num_completed"] >= 8
        assert rep.summary["errors_by_kind"].get("cancelled", 0) >= 1


def run_cli(*args):
    return subprocess.run([sys.executable, "-m", "flopwise", *args], capture_output=True, text=True, timeout=120)


def test_cli_json_levels_report_and_errors(mock_url, tmp_path):
    out = tmp_path / "sweep"
    r = run_cli("bench", "--url", mock_url, "--concurrency", "1,4", "--num-requests", "4", "--input-len", "8",
                "--output-len", "4", "--out", str(out), "--json", "--api-key", "sk-secret-123")
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    assert [lv["label"] for lv in data["levels"]] == ["concurrency-1", "concurrency-4"]
    assert data["levels"][0]["ttft_ms"]["p50"] is not None and data["levels"][0]["num_completed"] == 4
    assert (out / "latency_vs_throughput.svg").exists()
    assert not any("sk-secret-123" in p.read_text() for p in out.rglob("*") if p.is_file())  # key never saved
    r = run_cli("bench", "report", str(out), "--json")
    assert r.returncode == 0 and len(json.loads(r.stdout)["levels"]) == 2
    r = run_cli("bench", "report", str(out))
    assert r.returncode == 0 and "load levels" in r.stdout
    r = run_cli("bench", "--url", mock_url, "--request-rate", "1", "--concurrency", "2")
    assert r.returncode == 2 and "not both" in r.stderr
    r = run_cli("bench", "report", str(tmp_path / "nothing"))
    assert r.returncode == 2 and "no bench runs" in r.stderr


def test_cli_single_run_console_and_served_model(mock_url, tmp_path):
    r = run_cli("bench", "--url", mock_url, "--request-rate", "inf", "--num-requests", "3", "--input-len", "8",
                "--output-len", "4", "--out", str(tmp_path / "r"))
    assert r.returncode == 0, r.stderr
    assert "mock @ rate-inf" in r.stdout and "diagnosis" in r.stdout  # model name from /v1/models
    # a sweep's per-level lines give an SLA verdict only where an SLA was asked for
    levels = ("--concurrency", "1,2", "--num-requests", "2", "--input-len", "8", "--output-len", "4")
    r = run_cli("bench", "--url", mock_url, *levels, "--out", str(tmp_path / "s"))
    assert r.returncode == 0 and "concurrency-2:" in r.stderr and "SLA" not in r.stderr, r.stderr
    r = run_cli("bench", "--url", mock_url, *levels, "--out", str(tmp_path / "t"), "--sla", "p99_e2e<=60s")
    assert r.returncode == 0 and r.stderr.count("SLA met") == 2, r.stderr


def test_cli_resume_refuses_settings_it_would_ignore(mock_url, tmp_path):
    """--resume continues a saved run with the settings saved with it: another --num-requests or --input-len is
    refused in one line (it was ignored without a word), and a plain --resume goes on."""
    out = str(tmp_path / "r")
    r = run_cli("bench", "--url", mock_url, "--num-requests", "3", "--input-len", "8", "--output-len", "4",
                "--out", out)
    assert r.returncode == 0, r.stderr
    r = run_cli("bench", "--url", mock_url, "--resume", "--out", out, "--num-requests", "5", "--input-len", "32")
    assert r.returncode == 2 and "--num-requests, --input-len differ from it and would be ignored" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    r = run_cli("bench", "--url", mock_url, "--resume", "--out", out)
    assert r.returncode == 0, r.stderr
    # the same command line re-run with --resume: its settings are the saved run's, nothing to refuse
    r = run_cli("bench", "--url", mock_url, "--num-requests", "3", "--input-len", "8", "--output-len", "4",
                "--resume", "--out", out)
    assert r.returncode == 0, r.stderr


def test_sweep_finds_max_rate(mock_url, tmp_path):
    from flopwise.bench.sweep import find_max_rate
    # the burst meets the SLA: the server met it at its capacity, which is the answer (no slower rate can beat it)
    res = find_max_rate(cfg(mock_url, load=Load(kind="poisson", rate=1.0), num_requests=6,
                            sla="p99_e2e<=10s"), tmp_path / "s", steps=2)
    assert len(res.levels) == 1 and res.levels[0].config.load.label == "rate-inf"
    assert res.max_rate_meeting_sla == res.levels[0].summary["request_throughput"] > 0
    # an SLA nothing meets: the burst, then the bisection's runs, and no answer
    res = find_max_rate(cfg(mock_url, load=Load(kind="poisson", rate=1.0), num_requests=6,
                            sla="p99_ttft<=1ms"), tmp_path / "t", steps=2)
    assert len(res.levels) == 3 and res.max_rate_meeting_sla is None


def test_cli_unreachable_server_is_one_error_line_and_exit_2(tmp_path):
    """Nothing listens: checked before any measurement, one error line, exit code 2, in seconds."""
    t = time.perf_counter()
    r = run_cli("bench", "--url", "http://127.0.0.1:1", "--model", "x", "--num-requests", "2",
                "--out", str(tmp_path / "run"))
    assert r.returncode == 2 and r.stdout == ""
    assert "nothing answers at http://127.0.0.1:1" in r.stderr and "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    assert time.perf_counter() - t < 60  # (seconds; never 2 min 20 s)
    assert not (tmp_path / "run").exists()


def test_cli_every_request_failing_is_one_error_line_and_exit_2(mock_url, tmp_path):
    """The server answers but every request fails: the failures are counted and saved, no table, exit 2."""
    r = run_cli("bench", "--url", mock_url, "--model", "mock", "--num-requests", "2", "--input-len", "4",
                "--output-len", "4", "--dataset", jsonl_prompts(tmp_path, ["a [[mock:500]]"]),
                "--out", str(tmp_path / "run"))
    assert r.returncode == 2 and "no request to" in r.stderr and "(http_500 2)" in r.stderr
    assert "diagnosis" not in r.stdout
    assert (tmp_path / "run" / "requests.jsonl").read_text().count("\n") == 2


def test_report_refuses_a_run_without_its_requests_file_and_keeps_its_results(mock_url, tmp_path):
    c = cfg(mock_url, load=Load(kind="concurrency", concurrency=2), num_requests=4,
            prompts=PromptConfig(output_len=4, dataset=jsonl_prompts(tmp_path, ["a", "b", "c", "d"], output_len=4)))
    run_bench(c, tmp_path / "run")
    saved = (tmp_path / "run" / "summary.json").read_text()
    (tmp_path / "run" / "requests.jsonl").unlink()
    res = CliRunner().invoke(app, ["bench", "report", str(tmp_path / "run")])
    assert isinstance(res.exception, WorkloadError) and "has no requests.jsonl" in str(res.exception)
    assert (tmp_path / "run" / "summary.json").read_text() == saved  # nothing rebuilt from nothing
