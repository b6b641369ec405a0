"""The planner: a toy space with a known answer, Pareto correctness, infeasible SLAs, launch flags, HTML."""

import json
import shutil
import subprocess

import pytest
from typer.testing import CliRunner

from flopwise.api import deployment
from flopwise.cli import app
from flopwise.errors import DoesNotFitError, InfeasibleError
from flopwise.plan.launch import Speculative, launch_commands
from flopwise.plan.pareto import dominates, pareto_front
from flopwise.plan.search import PlanRequest, plan, plan_to_dict
from flopwise.plan.space import SearchSpace

runner = CliRunner()
SMALL = dict(workload="chat", num_requests=60, workers=1)


def test_pareto_front_by_hand():
    pts = [(1, 5), (2, 4), (3, 1), (2, 2), (1, 1), (3, 0.5), (0.5, 6)]
    front = pareto_front(pts, key=lambda p: p)
    assert front == [(3, 1), (2, 4), (1, 5), (0.5, 6)]
    for p in pts:
        if p not in front:
            assert any(dominates(f, p) for f in front)


def test_toy_space_best_is_the_faster_gpu():
    """Same model, format and knobs on an H100 and an A100: the H100 has 1.6x the bandwidth and 3x the FLOP/s,
    so it must serve more requests per GPU within the same SLA and rank first."""
    space = SearchSpace(gpus=("h100-sxm", "a100-sxm-80gb"), tps=(1,), weights=("bf16",), kvs=("bf16",))
    r = plan(PlanRequest(model="llama-3.1-8b", sla="p95_ttft<=2000ms,p95_tpot<=100ms", space=space, **SMALL))
    d = plan_to_dict(r)
    assert d["best"]["gpu"] == "h100-sxm"
    # the A100 is either simulated and ranked lower, or its capacity ceiling already loses to the H100's result
    a100 = [row for row in d["ranked"] if row["gpu"] == "a100-sxm-80gb"]
    if a100:
        assert d["best"]["goodput_per_gpu"] > 1.3 * a100[0]["goodput_per_gpu"]
    else:
        assert any(p["config"].startswith("a100") and "cannot beat h100-sxm" in p["reason"] for p in d["pruned"])
    # no dominated config is ranked above one that dominates it
    rows = d["ranked"]
    for i, a in enumerate(rows):
        for b in rows[i + 1:]:
            assert not dominates((b["goodput_per_gpu"], b["tokens_per_s_per_user"]),
                                 (a["goodput_per_gpu"], a["tokens_per_s_per_user"]))
    assert d["launch"]["vllm"].startswith("vllm serve meta-llama/Llama-3.1-8B")


def test_rate_sizes_replicas():
    space = SearchSpace(gpus=("h100-sxm",), tps=(1,), weights=("fp8",), kvs=("fp8",))
    d = plan_to_dict(plan(PlanRequest(model="llama-3.1-8b", rate=100.0, space=space, **SMALL)))
    best = d["best"]
    assert best["replicas"] == -(-100 // best["max_rate_per_replica"])  # ceil
    assert best["total_gpus"] == best["replicas"] * best["gpus_per_replica"]


def test_infeasible_sla_names_the_closest_and_the_miss():
    space = SearchSpace(gpus=("h100-sxm",), tps=(1,), weights=("bf16",), kvs=("bf16",))
    with pytest.raises(InfeasibleError, match=r"no configuration.*TPOT is already .* > 1 ms"):
        plan(PlanRequest(model="llama-3.1-8b", sla="p95_tpot<=1ms", space=space, **SMALL))


def test_model_that_fits_nowhere_says_what_would():
    space = SearchSpace(gpus=("l4",), max_gpus=1, weights=("bf16",), kvs=("bf16",))
    with pytest.raises(DoesNotFitError, match="fits nowhere"):
        plan(PlanRequest(model="llama-3.1-70b", space=space, **SMALL))


def test_launch_flags_per_engine():
    dep = deployment("llama-3.1-70b", "h100-sxm", tp=4, weights="fp8", kv="fp8", max_num_seqs=128,
                     max_num_batched_tokens=4096)
    cmds = launch_commands(dep, max_model_len=8192, prefix_caching=False,
                           speculative=Speculative("eagle", 3, "yuhuili/EAGLE-LLaMA3.1-Instruct-70B"))
    v = cmds.vllm
    for flag in ("--tensor-parallel-size 4", "--max-num-seqs 128", "--max-num-batched-tokens 4096",
                 "--max-model-len 8192", "--quantization fp8", "--kv-cache-dtype fp8", "--no-enable-prefix-caching",
                 "--speculative-config", '"method": "eagle"', '"num_speculative_tokens": 3'):
        assert flag in v, flag
    s = cmds.sglang
    for flag in ("python -m sglang.launch_server --model-path", "--tp-size 4", "--max-running-requests 128",
                 "--chunked-prefill-size 4096", "--kv-cache-dtype fp8_e4m3", "--quantization fp8",
                 "--disable-radix-cache", "--speculative-algorithm EAGLE", "--speculative-num-steps 3"):
        assert flag in s, flag
    t = cmds.trtllm
    for flag in ("trtllm-serve", "--tp_size 4", "--max_batch_size 128", "--max_num_tokens 4096", "--max_seq_len 8192",
                 "--kv_cache_free_gpu_memory_fraction 0.9", "--extra_llm_api_options"):
        assert flag in t, flag
    y = cmds.trtllm_extra_options_yaml
    assert "enable_block_reuse: false" in y and "dtype: fp8" in y and "decoding_type: Eagle" in y


def test_cli_plan_json(tmp_path):
    res = runner.invoke(app, ["plan", "--model", "llama-3.1-8b", "--gpus", "h100-sxm", "--tp", "1", "--weights", "fp8",
                              "--kv", "fp8", "--num-requests", "60", "--json"])
    assert res.exit_code == 0, res.output
    d = json.loads(res.stdout)
    assert d["best"]["gpu"] == "h100-sxm"
    for key in ("ranked", "pareto_frontier", "launch", "tradeoffs", "latency_vs_rate", "infeasible", "pruned"):
        assert key in d


@pytest.mark.skipif(shutil.which("chromium") is None, reason="Debian chromium not installed (.ci/run installs it)")
def test_html_report_renders_in_headless_chromium(tmp_path):
    out = tmp_path / "plan.html"
    res = runner.invoke(app, ["plan", "--model", "llama-3.1-8b", "--gpus", "h100-sxm,a100-sxm-80gb", "--tp", "1",
                              "--weights", "bf16", "--kv", "bf16", "--num-requests", "60", "--html", str(out), "--json"])
    assert res.exit_code == 0, res.output
    dom = subprocess.run(
        ["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         f"--user-data-dir={tmp_path / 'profile'}", "--virtual-time-budget=5000", "--dump-dom", out.as_uri()],
        capture_output=True, text=True, timeout=120).stdout
    assert dom.count('class="main-svg"') >= 4  # every chart was drawn by plotly.js, offline
    assert "Ranked deployments" in dom and "vllm serve" in dom


def test_cli_plan_bad_list_value_is_one_error():
    res = runner.invoke(app, ["plan", "--tp", "x"])
    assert res.exit_code == 2
    assert "expected comma-separated int values, got 'x'" in res.output
    assert "Traceback" not in res.output
