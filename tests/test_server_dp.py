"""Data-parallel engines behind one server (`Deployment.replicas_per_server`): the API-server stage they share,
as each engine's profile says (`FrontendCosts.data_parallel`), reaching the simulator and the capacity bound."""

from __future__ import annotations

import pytest

from flopwise.api import deployment, simulate
from flopwise.cli import run
from flopwise.cost.capacity import frontend_ceiling
from flopwise.errors import SpecError, WorkloadError
from flopwise.launch import LaunchTarget, render
from flopwise.sim.frontend import Frontend
from flopwise.sim.request import Request
from flopwise.specs.engine import get_engine, write_engine_file
from flopwise.validation.engines import case_deployment


def test_versions_say_who_shares_the_api_server():
    assert get_engine("vllm@0.8.5").frontend.data_parallel == "none"
    assert get_engine("vllm@0.9.0").frontend.data_parallel == "shared"  # one API server for every DP engine
    assert get_engine("vllm@0.15.0").frontend.data_parallel == "per_rank"  # api_server_count = DP size (PR #32525)
    assert get_engine("sglang@0.5.9").frontend.data_parallel == "shared"  # one TokenizerManager
    assert get_engine("trtllm").frontend.data_parallel == "none"


def test_each_engine_gets_its_share_of_the_server():
    sg = deployment("qwen3-8b", "h100-sxm", tp=4, num_gpus=8, replicas_per_server=2, engine="sglang@0.5.9")
    assert sg.replicas == 2 and sg.frontend.speed == 0.5
    vl = deployment("qwen3-8b", "h100-sxm", tp=4, num_gpus=8, replicas_per_server=2, engine="vllm@0.15.0")
    assert vl.frontend.speed == 1.0  # two API servers for two engines
    old = deployment("qwen3-8b", "h100-sxm", tp=4, num_gpus=8, replicas_per_server=2, engine="vllm@0.12.0")
    assert old.frontend.speed == 0.5
    # vLLM 0.15+ with attention DP: one API server per engine core (dp of them), SGLang still one
    moe = dict(tp=1, dp=4, ep=4, weights="fp8")
    assert deployment("qwen3-30b-a3b", "h100-sxm", engine="vllm@0.15.0", **moe).frontend.api_servers == 4
    assert deployment("qwen3-30b-a3b", "h100-sxm", engine="sglang@0.5.9", **moe).frontend.speed == 1.0
    # the request-rate ceiling of one replica's stage halves when two engines share it
    alone = deployment("qwen3-8b", "h100-sxm", tp=4, num_gpus=8, engine="sglang@0.5.9")
    assert frontend_ceiling(sg, 500, 60) == pytest.approx(frontend_ceiling(alone, 500, 60) / 2)


def test_a_shared_stage_queues_a_burst_as_one_server_would():
    """100 requests at once through SGLang's one tokenizer, split round-robin over two engines: each engine's
    stage (half the speed) takes its 50 in 50 x 2w, the last leaving at 100 w, as on one server."""
    fe = deployment("qwen3-8b", "h100-sxm", tp=4, num_gpus=8, replicas_per_server=2, engine="sglang@0.5.9").frontend
    w = fe.request_s + 500 * fe.prompt_token_s  # one request's ingress on one process
    stage = Frontend(fe)
    reqs = [Request(request_id=i, arrival_at=0.0, num_prompt_tokens=500, max_tokens=60) for i in range(50)]
    for r in reqs:
        stage.admit(r, r.arrival_at)
    assert reqs[-1].engine_arrival_at == pytest.approx(100 * w + fe.latency_s)
    assert stage.cpu_s == pytest.approx(100 * w)


def test_the_simulated_burst_waits_at_the_shared_frontend():
    kw = dict(model="qwen3-8b", gpu="h100-sxm", tp=4, num_gpus=8, engine="sglang@0.5.9", concurrency=100,
              num_requests=100, input_len=500, output_len=60)
    own = simulate(**kw).to_dict()
    shared = simulate(replicas_per_server=2, **kw).to_dict()
    fe = get_engine("sglang@0.5.9").frontend
    w = fe.request_s + 500 * fe.prompt_token_s
    # mean time to leave a FIFO for a burst of n = 50 per stage: (n + 1) / 2 ingresses, each w (own server) or 2w
    assert own["time_breakdown_ms"]["frontend_ms"] == pytest.approx((25.5 * w + fe.latency_s) * 1e3)
    assert shared["time_breakdown_ms"]["frontend_ms"] == pytest.approx((51 * w + fe.latency_s) * 1e3)
    assert shared["setup"]["replicas_per_server"] == 2 and shared["setup"]["api_servers_per_replica"] == 0.5
    assert shared["ttft_ms"]["mean"] > own["ttft_ms"]["mean"] + 100
    # the server busy for both engines: each stage's 50 ingresses and 50 x 60 streamed tokens, at half speed
    busy = 2 * (50 * w + 50 * 60 * fe.output_token_s)
    assert shared["frontend_utilization"] == pytest.approx(busy / shared["duration_s"], rel=1e-6)


@pytest.mark.parametrize("kw, msg", [
    (dict(engine="trtllm"), "serves one engine per server"),
    (dict(engine="vllm@0.8.5"), "serves one engine per server"),
    (dict(replicas_per_server=3), "must divide the 2 replicas"),
])
def test_refusals(kw, msg):
    args = dict(model="qwen3-8b", gpu="h100-sxm", tp=4, num_gpus=8, replicas_per_server=2) | kw
    with pytest.raises(SpecError, match=msg):
        deployment(**args)


def test_attention_dp_takes_the_engines_dp_flag():
    with pytest.raises(SpecError, match="data-parallel attention"):
        deployment("qwen3-30b-a3b", "h100-sxm", tp=1, dp=4, ep=4, num_gpus=8, replicas_per_server=2)


def test_the_cli_refuses_in_one_line(capsys):
    code = run(["simulate", "--tp", "1", "--num-gpus", "2", "--replicas-per-server", "2", "--engine", "trtllm",
                "--num-requests", "5"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "one engine per server" in err[0]


def test_a_case_with_a_dense_models_dp_size_is_one_server_of_replicas():
    """A published run's `--dp-size 2` (or vLLM --data-parallel-size) on a dense model: two TP replicas behind one
    server, not data-parallel attention (which is for MoE models)."""
    args = {"model": "Qwen/Qwen3-8B", "gpu": "h100-sxm", "tp": 4}
    raw = {"engine": "SGLang", "engine_version": "0.5.9", "engine_knobs": {"dp_size": 2}, "args": args}
    dep, _ = case_deployment(raw, "simulate", args)
    assert (dep.tp, dep.dp, dep.replicas, dep.replicas_per_server, dep.num_gpus) == (4, 1, 2, 2, 8)
    assert dep.frontend.speed == 0.5


def test_a_fleet_or_an_offline_engine_refuses_it():
    kw = dict(model="qwen3-8b", gpu="h100-sxm", tp=4, num_gpus=8, engine="sglang@0.5.9", replicas_per_server=2,
              num_requests=5)
    with pytest.raises(WorkloadError, match="routes to servers of their own"):
        simulate(router="round-robin", **kw)
    with pytest.raises(SpecError, match="offline"):
        deployment("qwen3-8b", "h100-sxm", tp=4, num_gpus=8, engine="trtllm", frontend="none", replicas_per_server=2)


def test_engine_files_neither_pin_nor_set_the_sharing(tmp_path):
    """A calibrated override keeps the release's data-parallel mode (it writes the CPU costs only), and no profile
    table may set the deployment's share."""
    path = tmp_path / "eng.toml"
    write_engine_file(path, get_engine("vllm@0.8.5"), "test")
    assert "data_parallel" not in path.read_text() and "shared_by" not in path.read_text()
    dep = deployment("qwen3-8b", "h100-sxm", tp=4, num_gpus=8, engine="vllm@0.15.0", engine_file=path,
                     replicas_per_server=2)
    assert dep.frontend.data_parallel == "per_rank"
    bad = tmp_path / "bad.toml"
    bad.write_text('name = "vllm"\n\n[override]\nfrontend = { request_s = 1e-3, shared_by = 3 }\n')
    with pytest.raises(SpecError, match="shared_by"):
        deployment("qwen3-8b", "h100-sxm", engine="vllm@0.15.0", engine_file=bad)


def test_more_api_servers_raise_the_frontend_ceiling():
    """vLLM's --api-server-count 4: the server's four processes share its requests, so the API-server ceiling is
    4x one process's; behind one server of two DP engines, each engine's stage gets two of them."""
    one = deployment("llama-3.1-8b", "h100-sxm", engine="vllm@0.12.0")
    four = deployment("llama-3.1-8b", "h100-sxm", engine="vllm@0.12.0", api_servers=4)
    assert frontend_ceiling(four, 128, 16) == pytest.approx(4 * frontend_ceiling(one, 128, 16))
    shared = deployment("llama-3.1-8b", "h100-sxm", num_gpus=2, replicas_per_server=2, engine="vllm@0.15.0",
                        api_servers=4)
    assert shared.frontend.speed == 2.0  # a count given is the server's total, not per engine core


@pytest.mark.parametrize("kw, msg", [
    (dict(engine="sglang@0.5.1"), "no API-server process count"),
    (dict(engine="vllm@0.9.0"), "no API-server process count"),
    (dict(engine="vllm@0.12.0", frontend="none"), "offline"),
    (dict(engine="vllm@0.12.0", api_servers=0), "must be an integer"),
])
def test_api_servers_refusals(kw, msg):
    with pytest.raises(SpecError, match=msg):
        deployment("llama-3.1-8b", "h100-sxm", **({"api_servers": 2} | kw))


def test_the_cli_takes_api_servers(capsys):
    code = run(["simulate", "--model", "llama-3.2-1b", "--engine", "vllm@0.12.0", "--api-servers", "3",
                "--num-requests", "20", "--input-len", "64", "--output-len", "8", "--json"])
    out = capsys.readouterr().out
    assert code == 0 and '"api_servers_per_replica": 3.0' in out


def test_a_case_states_its_api_server_count():
    args = {"model": "meta-llama/Llama-3.1-8B", "gpu": "h100-sxm", "tp": 1}
    raw = {"engine": "vLLM", "engine_version": "0.12.0", "engine_knobs": {"api_server_count": 4}, "args": args}
    dep, _ = case_deployment(raw, "simulate", args)
    assert dep.frontend.api_servers == 4
    old = dict(raw, engine_version="0.8.5")  # no such flag yet: the server ran one
    assert case_deployment(old, "simulate", args)[0].frontend.api_servers == 1


def test_sglang_tokenizer_workers_are_its_api_servers():
    """SGLang 0.5.2's --tokenizer-worker-num N: N tokenizer workers share the server's frontend work (the ceiling
    N x one's), rendered in the launch command; a case stating tokenizer_worker_num reads it."""
    one = deployment("llama-3.1-8b", "h100-sxm", engine="sglang@0.5.2")
    three = deployment("llama-3.1-8b", "h100-sxm", engine="sglang@0.5.2", api_servers=3)
    assert frontend_ceiling(three, 128, 16) == pytest.approx(3 * frontend_ceiling(one, 128, 16))
    cmd = render(LaunchTarget(deployment=three, model_id="meta-llama/Llama-3.1-8B-Instruct", max_model_len=4096,
                              max_prompt_len=2048))
    assert cmd.command is not None and "--tokenizer-worker-num 3" in cmd.command
    args = {"model": "meta-llama/Llama-3.1-8B", "gpu": "h100-sxm", "tp": 1}
    raw = {"engine": "SGLang", "engine_version": "0.5.6", "engine_knobs": {"tokenizer_worker_num": 4}, "args": args}
    assert case_deployment(raw, "simulate", args)[0].frontend.api_servers == 4


def test_one_api_server_asked_behind_a_dp_server_is_written_out():
    """vLLM 0.15+ runs one API server per engine core by default; asking for one in all is a choice of its own:
    priced at half a process per engine, written as --api-server-count 1, told apart from the default."""
    kw = dict(num_gpus=2, replicas_per_server=2, engine="vllm@0.15.0")
    default, one = deployment("llama-3.1-8b", "h100-sxm", **kw), deployment("llama-3.1-8b", "h100-sxm", api_servers=1,
                                                                            **kw)
    assert (default.engine.api_servers_asked(), one.engine.api_servers_asked()) == (None, 1)
    assert (default.frontend.speed, one.frontend.speed) == (1.0, 0.5)

    def cmd(dep):
        return render(LaunchTarget(deployment=dep, model_id="meta-llama/Llama-3.1-8B-Instruct", max_model_len=4096,
                                   max_prompt_len=2048)).command

    assert "--api-server-count 1" in cmd(one) and "--api-server-count" not in cmd(default)


def test_a_dp_attention_budget_is_rendered_in_each_engines_terms():
    """vLLM gives each DP-attention rank its --max-num-batched-tokens, SGLang divides --chunked-prefill-size among
    them: a plan's per-rank budget is written as each engine needs it."""
    def cmds(engine):
        dep = deployment("deepseek-v3", "h200", engine=engine, weights="fp8", tp=1, dp=8, ep=8)
        t = LaunchTarget(deployment=dep, model_id="deepseek-ai/DeepSeek-V3", max_model_len=4096, max_prompt_len=2048)
        return {f: render(t, get_engine(f)).command for f in ("vllm", "sglang")}

    v = cmds("vllm@0.15.0")  # 8,192 per rank
    assert "--max-num-batched-tokens 8192" in v["vllm"] and "--chunked-prefill-size 65536" in v["sglang"]
    s = cmds("sglang@0.5.6")  # 8,192 split over 8 ranks: 1,024 each
    assert "--chunked-prefill-size 8192" in s["sglang"] and "--max-num-batched-tokens 1024" in s["vllm"]
