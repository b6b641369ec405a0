"""The planner: toy spaces whose answer and ties are known by hand, the same first choice across seeds,
the latency objective at one load, workload defaults, checkpoints, traces, Pareto correctness, infeasible
SLAs, JSON keys, HTML."""

import json
import re
import shutil
import subprocess

import pytest
from rich.console import Console
from typer.testing import CliRunner

from flopwise.api import deployment
from flopwise.cli import app
from flopwise.cost import memory_plan
from flopwise.cost.capacity import bounds
from flopwise.errors import DoesNotFitError, InfeasibleError
from flopwise.launch import plan_launch
from flopwise.plan.evaluate import evaluate, measure_at_load
from flopwise.plan.pareto import dominates, pareto_front
from flopwise.plan.search import PlanRequest, _Stream, plan, plan_to_dict
from flopwise.plan.space import SearchSpace, enumerate_candidates, weight_formats
from flopwise.report.plan_report import render_plan
from flopwise.sim import SimConfig
from flopwise.sim.sglang_scheduler import sglang_settings
from flopwise.sim.steady import SteadyRule
from flopwise.specs.hardware import get_hardware
from flopwise.specs.model_catalog import get_model
from flopwise.specs.sla import parse_sla
from flopwise.specs.speculative import parse_speculative

runner = CliRunner()
# a short window: these tests check the search's logic, not its precision
QUICK = SteadyRule(min_window_s=2, window_e2e=0.5, min_window_requests=100, min_warmup_s=1, warmup_e2e=0.5,
                   tail_e2e=0.3, num_bootstrap=100)
SMALL = dict(workers=1, rule=QUICK, max_effort=1.0)


def test_pareto_front_by_hand():
    pts = [(1, 5), (2, 4), (3, 1), (2, 2), (1, 1), (3, 0.5), (0.5, 6)]
    front = pareto_front(pts, key=lambda p: p)
    assert front == [(3, 1), (2, 4), (1, 5), (0.5, 6)]
    for p in pts:
        if p not in front:
            assert any(dominates(f, p) for f in front)


def test_toy_space_best_answer_and_its_tie():
    """H100 with prefix caching on and off, on a stream with no shared prefix: the two simulations are the same
    run, so they tie exactly (one interval), and the tie is broken by the label (same GPUs, same formats, same
    ceiling); the A100 has 1.6x less bandwidth and 3x less FLOP/s, so its interval lies below and it ranks
    third, not tied. (Runs are the same only while no recomputed request finds its own blocks still cached, as
    vLLM's prefix cache lets a preempted request do: the probes above the answer go deep enough past the KV pool
    for that to happen to a few requests, which moves the rates in the fifth digit, not the answer.)"""
    space = SearchSpace(gpus=("h100-sxm", "a100-sxm-80gb"), tps=(1,), weights=("bf16",), kvs=("bf16",),
                        prefix_caching=(True, False))
    r = plan(PlanRequest(model="llama-3.1-8b", workload=None, input_len=512, output_len=128,
                         sla="p95_ttft<=1000ms,p95_tpot<=100ms", space=space, **SMALL))
    d = plan_to_dict(r)
    assert d["ties"] == ["h100-sxm tp1 bf16/kv:bf16", "h100-sxm tp1 bf16/kv:bf16 no-pc"]
    on, off = d["ranked"][0], d["ranked"][1]
    assert on["max_rate_per_replica"] == pytest.approx(off["max_rate_per_replica"], rel=1e-4)
    assert on["goodput_per_gpu_interval"] == pytest.approx(off["goodput_per_gpu_interval"], rel=1e-4)
    assert on["rank"] == off["rank"] == 1 and on["tied_with_first"] and off["tied_with_first"]
    a100 = [row for row in d["ranked"] if row["gpu"] == "a100-sxm-80gb"]
    if a100:  # simulated, or its ceiling already below the H100's interval
        assert all(row["rank"] == 3 and not row["tied_with_first"] for row in a100)
        assert a100[0]["goodput_per_gpu_interval"][1] < on["goodput_per_gpu_interval"][0]
    else:
        assert any(p["config"].startswith("a100") and "cannot reach" in p["reason"] for p in d["pruned"])
    for row in d["ranked"]:
        lo, hi = row["goodput_per_gpu_interval"]
        assert lo <= row["goodput_per_gpu"] <= hi
        assert row["max_rate_per_replica"] <= row["ceiling_rate_per_replica"]
        plo, phi = row["objective_paired_interval"]  # what ties are judged on: inside the full interval
        assert lo <= plo <= row["objective_value"] <= phi <= hi
        assert row["nodes"] == 1  # one GPU per replica: one server
    rows = d["ranked"]  # no dominated config above one that dominates it, unless tied
    for i, a in enumerate(rows):
        for b in rows[i + 1:]:
            if a["rank"] != b["rank"]:
                assert not dominates((b["goodput_per_gpu"], b["tokens_per_s_per_user"]),
                                     (a["goodput_per_gpu"], a["tokens_per_s_per_user"]))


def test_same_first_choice_across_seeds_when_intervals_separate():
    space = SearchSpace(gpus=("h100-sxm", "a100-sxm-80gb"), tps=(1,), weights=("bf16",), kvs=("bf16",))
    firsts = set()
    for seed in (0, 1):
        d = plan_to_dict(plan(PlanRequest(model="llama-3.1-8b", workload=None, input_len=512, output_len=128, seed=seed,
                                          sla="p95_ttft<=2000ms,p95_tpot<=100ms", space=space, **SMALL)))
        firsts.add(d["best"]["config"])
        assert d["ties"] == [d["best"]["config"]]
    assert firsts == {"h100-sxm tp1 bf16/kv:bf16"}


def test_latency_objective_compares_at_the_same_load():
    """A100 tp2 int4-awq sustains ~8 req/s, H200 tp2 int4-awq ~40: at their own maximum rates the A100's users
    see ~3x the tokens/s of the H200's (a light load), but at the same offered load (6 req/s on one replica
    each) the H200 is faster, and that is how the latency objective ranks them (the A100 is simulated, or
    skipped because its batch-1 speed cannot reach the H200's interval)."""
    space = SearchSpace(gpus=("h200", "a100-sxm-80gb"), tps=(2,), weights=("int4-awq",), kvs=("fp8",))
    sla = "p95_ttft<=1000ms,p95_tpot<=50ms"
    r = plan(PlanRequest(model="llama-3.1-8b", objective="latency", rate=6.0, sla=sla, space=space, **SMALL))
    d = plan_to_dict(r)
    assert d["best"]["gpu"] == "h200"
    assert d["best"]["at_load"]["replicas"] == 1 and d["best"]["at_load"]["request_rate_per_replica"] == 6.0
    # the requests simulated count the rate search's probes and both probes at the load
    best = r.ranked[0]
    assert best.at_load is not None and d["best"]["at_load"]["num_simulated_requests"] > 0
    assert d["best"]["num_simulated_requests"] == best.num_simulated_requests > best.at_load.num_simulated_requests
    a100_rows = [row for row in d["ranked"] if row["gpu"] == "a100-sxm-80gb"]
    assert a100_rows or any(p["config"].startswith("a100") and "per-user ceiling" in p["reason"] for p in d["pruned"])
    # the flip, measured directly under chat's SLA (TTFT-bound on the A100: it can only take a light load):
    # each at its own max rate vs both at 2.5 req/s (within the A100's capacity)
    cands, _ = enumerate_candidates(get_model("llama-3.1-8b"), [get_hardware("h200"), get_hardware("a100-sxm-80gb")],
                                    space, r.max_len)
    chat, rule = parse_sla("p95_ttft<=300ms,p95_tpot<=50ms"), SteadyRule()
    stream = _Stream(workload="chat", input_len=None, output_len=None, seed=0)
    own, same = {}, {}
    for c in cands:
        b = bounds(c.deployment, chat, 1681, 193, 0.25)
        size = rule.size(b.max_rate_estimate, b.e2e_estimate_s, 0.3)
        e = evaluate(c, stream, chat, rule=rule, size=size, ceiling=b.max_rate_ceiling, e2e_s=b.e2e_estimate_s,
                     start=0.85 * b.max_rate_estimate)
        own[c.deployment.hardware.id] = e.tokens_per_s_per_user
        same[c.deployment.hardware.id] = measure_at_load(e, stream, chat, rule=rule, size=size, rate_per_replica=2.5,
                                                         replicas=1)
    assert own["a100-sxm-80gb"] > 2 * own["h200"]
    assert same["h200"].interval[0] > same["a100-sxm-80gb"].interval[1] and same["a100-sxm-80gb"].sustained
    for pt in same.values():  # the reported interval adds the window's load (chat: Poisson, lognormal lengths)
        (lo, hi), (plo, phi) = pt.interval, pt.paired_interval
        assert 0 < lo < plo <= pt.tokens_per_s_per_user <= phi < hi
        assert pt.num_simulated_requests >= 2 * size.num_requests  # the load and 1.1x it, one probe each
    # without --rate: a stated load, half the goodput leader's sustained rate per GPU
    d = plan_to_dict(plan(PlanRequest(model="llama-3.1-8b", objective="latency", sla=sla, space=space, **SMALL)))
    assert d["best"]["gpu"] == "h200"
    assert d["reference_load_per_gpu"] == pytest.approx(d["best"]["at_load"]["request_rate_per_replica"] / 2)


def test_candidates_are_priced_for_the_context_the_launch_serves():
    """The plan launches with --max-model-len = its longest request, so its candidates are priced with the engine's
    defaults for that context, not the model's: vLLM 0.6.5 turns chunked prefill on by itself only above 32,768
    tokens of served context (2,048-token chunks), and unchunked takes a budget of at least the context. For
    Llama-3.1-8B (131,072 tokens) served at 4,096: unchunked, a 4,096-token budget; at the whole context it would
    have been chunked at 2,048. SGLang's default running-request cap follows the served context too."""
    model, hw = get_model("llama-3.1-8b"), get_hardware("h100-sxm")
    space = SearchSpace(gpus=("h100-sxm",), tps=(1,), weights=("bf16",), kvs=("bf16",), engine="vllm@0.6.5")
    (c,), _ = enumerate_candidates(model, [hw], space, 4096)
    d = c.deployment
    assert d.max_model_len == d.context_len == 4096
    assert not d.enable_chunked_prefill and d.max_num_batched_tokens == 4096
    whole = deployment("llama-3.1-8b", "h100-sxm", engine="vllm@0.6.5")
    assert whole.context_len == 131072 and whole.enable_chunked_prefill and whole.max_num_batched_tokens == 2048
    assert d.engine_defaults().max_num_batched_tokens == 4096  # the launch's flags are written against these
    # SGLang: --max-running-requests defaults to KV tokens / served context x 512, clamped to 2,048..4,096
    sgl = SearchSpace(gpus=("h100-sxm",), tps=(1,), weights=("bf16",), kvs=("bf16",), engine="sglang@0.5.6")
    (c,), _ = enumerate_candidates(model, [hw], sgl, 4096)
    kv = memory_plan(c.deployment).kv_capacity_tokens
    assert kv / 131072 * 512 < 2048 < 4096 < kv / 4096 * 512
    assert sglang_settings(c.deployment, SimConfig(scheduler="sglang"))["max_running_requests"] == 4096
    whole = deployment("llama-3.1-8b", "h100-sxm", engine="sglang@0.5.6")
    assert sglang_settings(whole, SimConfig(scheduler="sglang"))["max_running_requests"] == 2048


def test_rate_sizes_replicas():
    space = SearchSpace(gpus=("h100-sxm",), tps=(1,), weights=("fp8",), kvs=("fp8",))
    d = plan_to_dict(plan(PlanRequest(model="llama-3.1-8b", rate=100.0, space=space, **SMALL)))
    best = d["best"]
    assert best["replicas"] == -(-100 // best["max_rate_per_replica"])  # ceil
    assert best["total_gpus"] == best["replicas"] * best["gpus_per_replica"]
    assert best["replicas_at_interval_low"] >= best["replicas"]


def test_workload_defaults_batch_has_no_latency_bound():
    space = SearchSpace(gpus=("h100-sxm",), tps=(1,), weights=("fp8",), kvs=("fp8",))
    d = plan_to_dict(plan(PlanRequest(model="llama-3.1-8b", workload="batch", space=space, **SMALL)))
    assert d["sla"] == "none" and d["sla_source"] == "batch workload default"
    assert d["objective"] == "throughput" and d["objective_source"] == "batch workload default"
    assert d["max_model_len"] == 2048 + 512  # the batch workload's caps
    b = d["best"]
    assert b["objective_value"] == pytest.approx(b["output_tokens_per_s_per_gpu"])
    console = Console(record=True, width=250)
    render_plan(console, d)
    header = next(line for line in console.export_text().splitlines() if "config" in line)
    assert header.count("out tok/s/GPU") == 1  # the objective's column leads, and is not repeated


def test_every_tp_degree_by_default_and_max_model_len_is_the_workload_cap():
    model = get_model("qwen3-32b")
    cands, _ = enumerate_candidates(model, [get_hardware("h200")], SearchSpace(gpus=("h200",), max_gpus=8,
                                                                               weights=("bf16",), kvs=("bf16",)), 10240)
    assert sorted({c.deployment.tp for c in cands}) == [1, 2, 4, 8]
    space = SearchSpace(gpus=("h100-sxm",), tps=(1,), weights=("fp8",), kvs=("fp8",))
    r = plan(PlanRequest(model="llama-3.1-8b", space=space, **SMALL))
    assert r.max_len == 8192 + 2048  # chat's prompt and output caps
    launch = plan_launch(r)
    assert "--max-model-len 10240" in launch["vllm"] and "--context-length 10240" in launch["sglang"]
    assert "--max_seq_len 10240" in launch["trtllm"]


def test_checkpoint_format_is_planned_not_a_wider_one():
    """gpt-oss ships MXFP4 experts with bf16 attention (quantization_config's modules_to_not_convert): planned as
    that checkpoint, mxfp4-moe, not as MXFP4 everywhere, even on Hopper (weight-only kernels), so gpt-oss-120b fits
    one H100; DeepSeek-V3 ships block-scaled FP8 (weight_block_size 128 x 128): planned as fp8-block, which the
    engines run with block-scaled kernels, not as per-tensor fp8, and never at bf16. The format is the one the model
    spec read from the checkpoint (`ModelSpec.checkpoint_weights`): one reader of quantization_config."""
    gpt = get_model("gpt-oss-120b")
    assert weight_formats(gpt, SearchSpace())[0] == ("mxfp4-moe",) == (gpt.checkpoint_weights,)
    cands, _ = enumerate_candidates(gpt, [get_hardware("h100-sxm")], SearchSpace(gpus=("h100-sxm",), kvs=("bf16",)),
                                    8192)
    assert min(c.deployment.tp for c in cands) == 1 and {c.deployment.weights.name for c in cands} == {"mxfp4-moe"}
    formats, native = weight_formats(get_model("deepseek-v3"), SearchSpace())
    assert native == "fp8-block" and formats == ("fp8-block", "nvfp4", "int4-awq")
    # nvfp4 is tried where the chip has FP4 math only, and NVIDIA's: a B200 plans it, an H200 and an MI355X do not
    for gpu, fp4 in (("b200", True), ("h200", False), ("mi355x", False)):
        cands, _ = enumerate_candidates(get_model("llama-3.1-70b"), [get_hardware(gpu)],
                                        SearchSpace(gpus=(gpu,), tps=(4,), kvs=("fp8",)), 8192)
        assert {c.deployment.weights.name for c in cands} == {"bf16", "fp8", "int4-awq"} | ({"nvfp4"} if fp4 else set())
    # on llama.cpp gpt-oss is planned as the GGUF it serves (experts MXFP4, the rest Q8_0); the checkpoint stays
    assert weight_formats(get_model("gpt-oss-20b"), SearchSpace(engine="llamacpp")) == (("mxfp4_moe",), "mxfp4-moe")
    # llama.cpp loads GGUF files: a 16-bit checkpoint is planned at bf16, Q8_0 and Q4_K_M, an FP8 one from the Q8_0
    # GGUF a conversion makes of it and narrower (never as fp8 or AWQ, which it cannot load)
    assert weight_formats(get_model("llama-3.1-8b"), SearchSpace(engine="llamacpp")) == (
        ("bf16", "q8_0", "q4_k_m"), None)
    assert weight_formats(get_model("deepseek-v3"), SearchSpace(engine="llamacpp")) == (("q8_0", "q4_k_m"),
                                                                                         "fp8-block")


def test_plan_for_a_trace(tmp_path):
    trace = tmp_path / "t.jsonl"
    trace.write_text("".join(json.dumps({"timestamp": i * 0.1, "input_tokens": 300 + 7 * (i % 9),
                                         "output_tokens": 60 + (i % 5)}) + "\n" for i in range(80)))
    space = SearchSpace(gpus=("h100-sxm",), tps=(1,), weights=("fp8",), kvs=("fp8",))
    d = plan_to_dict(plan(PlanRequest(model="llama-3.1-8b", trace=str(trace), space=space, **SMALL)))
    assert d["workload"] == "trace" and d["rate"] == pytest.approx(10.0)  # the trace's mean rate
    assert d["max_model_len"] == 356 + 64 and d["best"]["replicas"] >= 1


def test_infeasible_sla_names_the_closest_and_the_miss():
    space = SearchSpace(gpus=("h100-sxm",), tps=(1,), weights=("bf16",), kvs=("bf16",))
    with pytest.raises(InfeasibleError, match=r"no configuration.*TPOT is already .* > 1 ms\. Relax") as e:
        plan(PlanRequest(model="llama-3.1-8b", sla="p95_tpot<=1ms", space=space, **SMALL))
    assert str(e.value).startswith("no configuration in the space meets p95_tpot<=1ms for meta-llama/Llama-3.1-8B; "
                                   "h100-sxm tp1 bf16/kv:bf16: ")


def test_model_that_fits_nowhere_says_what_would():
    space = SearchSpace(gpus=("l4",), max_gpus=1, weights=("bf16",), kvs=("bf16",))
    with pytest.raises(DoesNotFitError, match="fits nowhere"):
        plan(PlanRequest(model="llama-3.1-70b", space=space, **SMALL))


def test_a_rate_that_needs_replicas_says_how_many_to_start():
    res = runner.invoke(app, ["plan", "--model", "llama-3.1-8b", "--gpus", "h100-sxm", "--max-gpus", "4", "--tp", "1",
                              "--weights", "bf16", "--kv", "bf16", "--num-requests", "100", "--rate", "40"])
    assert res.exit_code == 0, res.output
    m = re.search(r"(\d+) replicas carry the --rate: start the command (\d+) times", " ".join(res.output.split()))
    assert m is not None and int(m.group(1)) == int(m.group(2)) >= 2, res.output


def test_cli_plan_json_keys_and_header(tmp_path):
    # --gpu, the spelling of every other command, names the same option
    res = runner.invoke(app, ["plan", "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--tp", "1", "--weights", "fp8",
                              "--kv", "fp8", "--num-requests", "100", "--json"])
    assert res.exit_code == 0, res.output
    d = json.loads(res.stdout)
    assert d["best"]["gpu"] == "h100-sxm" and {r["gpu"] for r in d["ranked"]} == {"h100-sxm"}
    for key in ("ranked", "pareto_frontier", "launch", "tradeoffs", "latency_vs_rate", "infeasible", "pruned", "ties",
                "steady_state", "sla_source", "objective_source", "max_model_len"):
        assert key in d
    for key in ("vllm", "sglang", "trtllm", "trtllm_extra_llm_api_options", "commands"):
        assert key in d["launch"]
    row = d["best"]
    for key in ("goodput_per_gpu", "goodput_per_gpu_interval", "max_rate_interval", "max_rate_paired_interval",
                "rank", "tied_with_first",
                "output_tokens_per_s_per_gpu", "cost_per_1m_tokens", "p95_ttft_ms", "binds", "replicas", "dp", "ep"):
        assert key in row
    (lo, hi), (plo, phi) = row["max_rate_interval"], row["max_rate_paired_interval"]
    assert 0 < lo < plo <= row["max_rate_per_replica"] <= phi <= hi  # the reported one adds the window's load
    text = runner.invoke(app, ["plan", "--model", "llama-3.1-8b", "--gpus", "h100-sxm", "--tp", "1", "--weights",
                               "fp8", "--kv", "fp8", "--num-requests", "100"]).output
    assert "(chat workload default)" in text and "SLA p95_ttft<=300ms,p95_tpot<=50ms" in text
    assert "vllm serve" in text and " \\ \n" not in text  # no space after a line continuation


@pytest.mark.skipif(shutil.which("chromium") is None, reason="Debian chromium not installed (.ci/run installs it)")
def test_html_report_renders_in_headless_chromium(tmp_path):
    out = tmp_path / "plan.html"
    res = runner.invoke(app, ["plan", "--model", "llama-3.1-8b", "--gpus", "h100-sxm,a100-sxm-80gb", "--tp", "1",
                              "--weights", "bf16", "--kv", "bf16", "--num-requests", "100", "--html", str(out),
                              "--json"])
    assert res.exit_code == 0, res.output
    dom = subprocess.run(
        ["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         f"--user-data-dir={tmp_path / 'profile'}", "--virtual-time-budget=5000", "--window-size=1280,900",
         "--dump-dom", out.as_uri()],
        capture_output=True, text=True, timeout=120).stdout
    assert dom.count('class="main-svg"') >= 4  # every chart was drawn by plotly.js, offline
    assert "Ranked deployments" in dom and "vllm serve" in dom
    assert "Goodput per GPU (req/s)" in dom and "goodput_per_gpu" not in dom.split("<script")[0]
    assert "SLA P95 TTFT" in dom  # the SLA's limits are drawn on the latency chart


def test_cli_plan_bad_list_value_is_one_error(capsys):
    from flopwise.cli import run

    assert run(["plan", "--tp", "x"]) == 2
    err = capsys.readouterr().err
    assert "--tp must be comma-separated integers, got 'x'" in err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_plan_searches_api_server_counts_where_the_frontend_binds(capsys):
    """A 1B model with 64-token prompts and 16-token answers on an H100: one API server's CPU caps the rate far
    below the GPU's, so four API processes (vLLM --api-server-count 4) serve about 4x the requests per GPU
    (the frontend ceiling scales with the processes; the GPU has room) and rank first; the one-server row says
    the API server binds. The launch command carries the count; engines without the flag are refused at once."""
    def run_plan(counts):
        space = SearchSpace(gpus=("h100-sxm",), tps=(1,), weights=("bf16",), kvs=("bf16",), api_servers=counts)
        r = plan(PlanRequest(model="llama-3.2-1b", workload=None, input_len=64, output_len=16, space=space, **SMALL))
        return plan_to_dict(r, launch=plan_launch(r))

    d = run_plan((None, 4))
    four = d["ranked"][0]
    assert four["config"].endswith(" api4") and four["api_servers"] == 4
    # the one-server config's closed-form ceiling (its API server's) is below the four-server interval
    assert [p["config"] for p in d["pruned"]] == ["h100-sxm tp1 bf16/kv:bf16"]
    assert "--api-server-count 4" in d["launch"]["vllm"] and "--tokenizer-worker-num 4" in d["launch"]["sglang"]
    one = run_plan((None,))["ranked"][0]
    assert one["api_servers"] == 1 and one["binds"] == "API server" and one["bottleneck"] == "frontend"
    assert 3.0 < four["max_rate_per_replica"] / one["max_rate_per_replica"] <= 4.0
    from flopwise.cli import run

    assert run(["plan", "--engine", "trtllm", "--api-servers", "2"]) == 2
    err = capsys.readouterr().err
    assert "no API-server process count" in err and len(err.strip().splitlines()) == 1


def test_plan_searches_stream_intervals_where_the_frontend_binds(capsys):
    """The same 1B model answering 128 tokens: vLLM's API server costs 1.5 ms + 64 x 2.5 us + 128 x 60 us = 9.34 ms
    per request streaming every token, 1.66 + 28.6 us (the lone first event's extra) + 128 x 31.38 us = 5.71 ms
    at ten tokens per event (1.64x the ceiling): si10 ranks first and is launched with --stream-interval 10
    (TensorRT-LLM: stream_interval in its options file); a server that streams every token is refused at once."""
    def run_plan(intervals):
        space = SearchSpace(gpus=("h100-sxm",), tps=(1,), weights=("bf16",), kvs=("bf16",),
                            stream_intervals=intervals)
        r = plan(PlanRequest(model="llama-3.2-1b", workload=None, input_len=64, output_len=128, space=space, **SMALL))
        return plan_to_dict(r, launch=plan_launch(r))

    d = run_plan((1, 10))
    ten = d["ranked"][0]
    assert ten["config"].endswith(" si10") and ten["stream_interval"] == 10
    assert "--stream-interval 10" in d["launch"]["vllm"] and "--stream-interval 10" in d["launch"]["sglang"]
    one = run_plan((1,))["ranked"][0]
    assert one["stream_interval"] == 1 and one["bottleneck"] == "frontend"
    assert one["ceiling_rate_per_replica"] == pytest.approx(1 / 9.34e-3, rel=1e-3)
    assert 1.3 < ten["max_rate_per_replica"] / one["max_rate_per_replica"] <= 1.7
    from flopwise.cli import run

    assert run(["plan", "--engine", "llamacpp", "--stream-intervals", "1,8"]) == 2
    err = capsys.readouterr().err
    assert "streams every token" in err and len(err.strip().splitlines()) == 1


def test_speculative_candidates_take_the_engines_memory_default_with_the_proposer():
    """SGLang reserves 2 GiB more with a proposer: a plan candidate with EAGLE-3 carries the fraction
    `deployment(..., speculative=...)` gives, not the one without it."""
    spec = "eagle3,k=3,accepted=2.6"
    space = SearchSpace(gpus=("h100-sxm",), tps=(1,), weights=("bf16",), kvs=("bf16",), engine="sglang@0.5.6",
                        speculative=(None, parse_speculative(spec)))
    cands, _ = enumerate_candidates(get_model("llama-3.1-8b"), [get_hardware("h100-sxm")], space, 4096)
    by_spec = {c.deployment.speculative is not None: c.deployment.gpu_memory_utilization for c in cands}
    assert by_spec[True] == deployment("llama-3.1-8b", "h100-sxm", engine="sglang@0.5.6", speculative=spec
                                       ).gpu_memory_utilization < by_spec[False]


def test_pcie_parts_also_try_pipelines_their_engine_keeps_full():
    """On GPUs whose peers talk over PCIe the space holds the tp x pp layouts an engine that keeps a micro-batch in
    every stage serves (a TP all-reduce crosses PCIe twice a layer, a pipeline one activation per stage boundary);
    over NVLink, or on an engine that runs its stages in turn, pipelines stay for models no TP degree fits."""
    model = get_model("meta-llama/Llama-3.3-70B-Instruct")

    def layouts(gpu, engine, weights):
        space = SearchSpace(gpus=(gpu,), weights=(weights,), kvs=("fp8",), engine=engine)
        cands, _ = enumerate_candidates(model, [get_hardware(gpu)], space, 4096)
        return {(c.deployment.tp, c.deployment.pp) for c in cands}

    rtx = layouts("rtx-pro-6000-blackwell", "trtllm@1.0", "nvfp4")
    assert {(1, 1), (2, 1), (1, 2), (1, 4), (1, 8), (2, 2), (2, 4), (4, 2)} <= rtx
    assert all(tp * pp <= 8 for tp, pp in rtx)
    assert all(pp == 1 for _, pp in layouts("h100-sxm", "trtllm@1.0", "fp8"))  # NVLink: TP alone fits
    assert all(pp == 1 for _, pp in layouts("rtx-pro-6000-blackwell", "llamacpp", "q4_k_m"))  # stages in turn


def test_a_replica_wider_than_one_server_is_planned_over_servers():
    # 16 H100 SXM are two 8-GPU servers: the TP 16 candidate spans 2 nodes, its all-reduces over the NIC
    assert [get_hardware(g).servers_for(16) for g in ("h100-sxm", "gb200", "l40s")] == [2, 1, 1]
    space = SearchSpace(gpus=("h100-sxm",), max_gpus=16, weights=("fp8",), kvs=("fp8",),
                        speculative=(None, parse_speculative("ngram,k=4,alpha=0.5")))
    cands, _ = enumerate_candidates(get_model("llama-3.1-405b"), [get_hardware("h100-sxm")], space, 4096)
    got = {(c.deployment.tp, c.deployment.nodes, c.deployment.spans_nodes, c.deployment.speculative is not None)
           for c in cands}
    assert got == {(8, 1, False, False), (8, 1, False, True), (16, 2, True, False), (16, 2, True, True)}


def test_a_format_asked_for_by_name_is_planned_as_estimate_prices_it():
    # the search's own formats need the chip's math; --weights fp8 on an A100 is planned as estimate prices it there
    # (weight-only, dequantized to 16-bit in the GEMM), not refused as "no fp8 math"
    model, a100 = get_model("llama-3.1-8b"), get_hardware("a100-sxm-80gb")
    asked = SearchSpace(gpus=("a100-sxm-80gb",), max_gpus=1, weights=("fp8",), kvs=("bf16",))
    (c,), misses = enumerate_candidates(model, [a100], asked, 4096)
    assert c.deployment.weights.name == "fp8" and not misses
    own = SearchSpace(gpus=("a100-sxm-80gb",), max_gpus=1, kvs=("bf16",))
    assert "fp8" not in {c.deployment.weights.name for c in enumerate_candidates(model, [a100], own, 4096)[0]}
    # NVFP4 stays on NVIDIA parts even by name: MI355X has FP4 math, for MXFP4
    nv = SearchSpace(gpus=("mi355x",), max_gpus=1, weights=("nvfp4",), kvs=("bf16",))
    cands, misses = enumerate_candidates(model, [get_hardware("mi355x")], nv, 4096)
    assert not cands and misses == ["mi355x nvfp4: NVIDIA's NVFP4 runs on NVIDIA GPUs (AMD's FP4 parts run mxfp4)"]


def test_the_plan_tables_show_the_latencies_the_sla_bounds():
    """Terminal and HTML tables alike: each SLA objective's value at its own statistic (JSON sla_values_ms), in
    place of the fixed P95 TTFT / TPOT pair, which stays where the SLA bounds no latency."""
    from flopwise.report.plan_html import _columns

    row = {"sla_values_ms": {"p99_ttft": 212.4, "p95_itl": 14.81}}
    names = [c for c, _ in _columns([row])]
    assert "P99 TTFT (ms)" in names and "P95 ITL (ms)" in names and "P95 TPOT (ms)" not in names
    assert names.index("P95 ITL (ms)") + 1 == names.index("KV headroom (GiB)")
    cells = dict((c, f(row, [1])) for c, f in _columns([row]) if c.endswith("(ms)"))
    assert cells == {"P99 TTFT (ms)": "212", "P95 ITL (ms)": "14.8"}
    assert [c for c, _ in _columns([{"sla_values_ms": {}}])].count("P95 TTFT (ms)") == 1
