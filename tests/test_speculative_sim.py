"""Speculative decoding as a deployment setting: the spec, its memory, the simulator serving it, the planner
searching it."""

import json
from dataclasses import replace

import numpy as np
import pytest
from typer.testing import CliRunner

from flopwise.api import deployment
from flopwise.cli import app
from flopwise.cost import decode_shape, step_time
from flopwise.cost.layout import layout
from flopwise.cost.memory import max_sequences, memory_plan
from flopwise.cost.speculative import proposer_deployment, spec_round, verify_shape
from flopwise.errors import SpecError
from flopwise.launch import plan_launch
from flopwise.plan.search import PlanRequest, plan, plan_to_dict
from flopwise.plan.space import SearchSpace
from flopwise.sim import SimConfig, simulate
from flopwise.sim.acceptance import Acceptance
from flopwise.specs.engine import get_engine
from flopwise.specs.sla import parse_sla
from flopwise.specs.speculative import SpeculativeSpec, expected_tokens, parse_speculative
from flopwise.techniques.compare import compare
from flopwise.techniques.scenario import Scenario
from flopwise.techniques.sim_throughput import SimWorkload
from flopwise.workload import build_workload

V032 = "vllm@0.32"  # the hand counts below: 16-token blocks, Medusa served, n-gram scheduled in step
DRAFT = "draft:llama-3.2-1b,k=4,alpha=0.7"
runner = CliRunner()


# ---- the spec on the deployment ---------------------------------------------------------------------------
def test_deployment_hash_and_eq_include_speculative():
    plain = deployment("llama-3.1-8b", "h100-sxm", frontend="none")
    eagle = deployment("llama-3.1-8b", "h100-sxm", speculative="eagle,k=3,accepted=2.6", frontend="none")
    assert eagle.speculative == SpeculativeSpec(method="eagle", k=3, mean_accepted=2.6)
    assert plain != eagle and hash(plain) != hash(eagle)
    again = deployment("llama-3.1-8b", "h100-sxm", speculative=SpeculativeSpec(method="eagle", k=3, mean_accepted=2.6),
                       frontend="none")
    assert again == eagle and hash(again) == hash(eagle)
    assert deployment("llama-3.1-8b", "h100-sxm", speculative="eagle,k=3,accepted=2.5", frontend="none") != eagle
    assert replace(eagle, speculative=None) == plain and hash(replace(eagle, speculative=None)) == hash(plain)
    assert deployment("llama-3.1-8b", "h100-sxm", speculative="none", frontend="none") == plain


def test_parse_speculative_forms_and_errors():
    s = parse_speculative("draft:llama-3.2-1b,k=4,alpha=0.7")
    assert (s.method, s.k, s.alpha, s.draft_model.name) == ("draft", 4, 0.7, "meta-llama/Llama-3.2-1B")
    assert s.text() == "draft:meta-llama/Llama-3.2-1B,k=4,alpha=0.7"
    assert parse_speculative("medusa,k=5,accepted=2.5,tree=64").positions == 64
    for bad, msg in (("eagle,k=3", "either alpha"), ("foo,k=3,alpha=0.5", "not one of"),
                     ("eagle,alpha=0.5", "needs k="), ("eagle,k=x,alpha=0.5", "k needs a whole number"),
                     ("draft,k=3,alpha=0.5", "draft:<model>")):
        with pytest.raises(SpecError, match=msg):
            parse_speculative(bad)
    with pytest.raises(SpecError, match="max_num_batched_tokens"):  # (vLLM 0.33 dropped Medusa)
        deployment("llama-3.1-8b", "h100-sxm", speculative="medusa,k=5,accepted=2.5,tree=64",
                   max_num_batched_tokens=32, frontend="none", engine="vllm@0.32")


# ---- memory -----------------------------------------------------------------------------------------------
def test_memory_plan_holds_the_draft_and_its_kv():
    """On vLLM 0.32 (16-token blocks)."""
    plain = memory_plan(deployment("llama-3.1-8b", "h100-sxm", frontend="none", engine=V032))
    dep = deployment("llama-3.1-8b", "h100-sxm", speculative=DRAFT, frontend="none", engine=V032)
    draft = proposer_deployment(dep, dep.speculative)
    lay = layout(draft)
    plan = memory_plan(dep)
    # Llama-3.2-1B in bf16 on the same GPU: 1,235,814,400 params x 2 bytes (tied embeddings stored once)
    assert plan.proposer_weight_bytes == lay.weight_bytes_per_gpu == 2_471_628_800
    assert plan.kv_pool_bytes == plain.kv_pool_bytes - 2_471_628_800
    # a block of 16 tokens: target 32 layers x 4,096 B (K and V: 8 KV heads x 128 x 2 B) + draft 16 layers x
    # 2,048 B (8 KV heads x 64 x 2 x 2 B)
    assert plain.block_bytes == 16 * 32 * 4_096
    assert plan.block_bytes == plain.block_bytes + 16 * 16 * 2_048
    assert plan.lookahead_tokens == 4
    assert plan.needed_bytes == plain.needed_bytes + 2_471_628_800 + 16 * 16 * 2_048
    assert max_sequences(dep, 1020) == plan.num_blocks // 64  # 1020 + 4 look-ahead slots = 64 blocks
    assert max_sequences(dep, 1020) < max_sequences(plain_dep := deployment("llama-3.1-8b", "h100-sxm",
                                                                            frontend="none", engine=V032), 1020)
    assert memory_plan(plain_dep) == plain


def test_memory_plan_of_heads_and_ngram():
    """On vLLM 0.32 (16-token blocks; Medusa, gone from 0.33)."""
    plain = memory_plan(deployment("llama-3.1-8b", "h100-sxm", frontend="none", engine=V032))
    ngram = memory_plan(deployment("llama-3.1-8b", "h100-sxm", speculative="ngram,k=4,alpha=0.5", frontend="none",
                                   engine=V032))
    assert (ngram.kv_pool_bytes, ngram.block_bytes) == (plain.kv_pool_bytes, plain.block_bytes)
    assert ngram.lookahead_tokens == 4
    eagle = memory_plan(deployment("llama-3.1-8b", "h100-sxm", speculative="eagle,k=3,accepted=2.6", frontend="none",
                                   engine=V032))
    # one Llama-3.1-8B decoder layer: 4096 x (4096 + 2 x 1024 + 4096) + 3 x 4096 x 14336 + 2 x 4096 = 218,112,000
    assert eagle.proposer_weight_bytes == 2 * 218_112_000
    assert eagle.block_bytes == plain.block_bytes + 16 * 4_096  # the head's one layer
    medusa = memory_plan(deployment("llama-3.1-8b", "h100-sxm", speculative="medusa,k=5,accepted=2.5,tree=26",
                                    frontend="none", engine=V032))
    assert medusa.block_bytes == plain.block_bytes and medusa.lookahead_tokens == 25


# ---- acceptance draws -------------------------------------------------------------------------------------
def test_acceptance_is_the_truncated_geometric():
    acc = Acceptance(SpeculativeSpec(method="ngram", k=4, alpha=0.7), seed=(0, 0))
    draws = np.array(acc.draw(100) + acc.draw(5000) + acc.draw(194_900))
    freq = np.bincount(draws, minlength=6)[1:] / draws.size
    p = [0.3, 0.7 * 0.3, 0.7**2 * 0.3, 0.7**3 * 0.3, 0.7**4]  # P(J = j) = alpha^j (1 - alpha), P(J = k) = alpha^k
    assert np.abs(freq - p).max() < 0.004
    assert draws.mean() == pytest.approx(expected_tokens(0.7, 4), abs=4 * draws.std() / draws.size**0.5)
    again = Acceptance(SpeculativeSpec(method="ngram", k=4, alpha=0.7), seed=(0, 0))
    assert again.draw(200_000) == draws.tolist()  # seeded, and independent of how the draws are grouped
    assert Acceptance(SpeculativeSpec(method="ngram", k=3, alpha=1.0), 0).draw(5) == [4] * 5
    assert Acceptance(SpeculativeSpec(method="ngram", k=3, alpha=0.0), 0).draw(5) == [1] * 5


def test_long_run_emits_expected_tokens_per_step():
    """300 requests of 1000 output tokens, 64 at a time: 108,169 verified decodes. The mean emitted tokens
    per verified decode is E[tokens] = (1 - 0.7^5) / 0.3 = 2.7731 within its sampling error (s.d. 1.6 / sqrt(N)
    = 0.005), minus a little for each request's last round, cut at its 1000th token."""
    dep = deployment("llama-3.1-8b", "h100-sxm", speculative="ngram,k=4,alpha=0.7", frontend="none", engine=V032)
    wl = build_workload(num_requests=300, input_len="64", output_len="1000", concurrency=64, seed=0)
    s = simulate(dep, wl).summary()
    sp = s["speculative"]
    assert sp["expected_tokens_per_step"] == pytest.approx(2.7731)
    assert sp["num_verified_decodes"] == 108_169
    assert sp["tokens_per_verified_decode"] == 299_700 / 108_169 == pytest.approx(2.770664)  # all but first tokens
    assert abs(sp["tokens_per_verified_decode"] - 2.7731) < 0.01
    assert s["setup"]["speculative"] == "ngram,k=4,alpha=0.7"
    other = simulate(dep, wl, SimConfig(seed=1)).summary()["speculative"]
    assert other["num_verified_decodes"] != 108_169  # the seed drives the draws (108,245 at seed 1)
    assert simulate(dep, wl).summary()["speculative"] == sp  # ... deterministically


# ---- the simulator ----------------------------------------------------------------------------------------
def test_lone_request_at_alpha_one_emits_k_plus_one_per_round():
    """EAGLE head, k = 3, alpha = 1: every round verifies 4 positions and keeps them all. After the prefill's
    token, 80 more come in 20 rounds at contexts 512, 516, ..., 588; the 4 tokens of a round arrive at its end as
    one event (a chunk of 4), so ITL is the round's time and ITL per token a quarter of it, never 0; TPOT = the
    rounds' time / 80: round_time / (k + 1) per round."""
    dep = deployment("llama-3.1-8b", "h100-sxm", speculative="eagle,k=3,alpha=1.0", frontend="none")
    res = simulate(dep, build_workload(num_requests=1, input_len="512", output_len="81", seed=0))
    rec = res.records[0]
    assert len(rec.token_times) == 21 and rec.chunk_tokens == [1] + [4] * 20 and rec.num_output_tokens == 81
    round_s = [spec_round(dep, dep.speculative, 1, 512 + 4 * i).time_s for i in range(20)]
    assert np.diff(rec.token_times[1:]).tolist() == pytest.approx(round_s[1:], rel=1e-12)
    s = res.summary()
    assert s["tpot_ms"]["mean"] == pytest.approx(sum(round_s) / 80 * 1e3, rel=1e-12)
    gaps = np.diff(rec.token_times) * 1e3
    assert s["itl_ms"]["p50"] == pytest.approx(np.median(gaps), rel=1e-12) and s["itl_ms"]["p50"] > 0
    assert s["itl_per_token_ms"]["mean"] == pytest.approx(np.mean(np.repeat(gaps / 4, 4)), rel=1e-12)
    assert s["num_steps"] == 21  # one prefill step, 20 rounds


def test_spec_pays_at_batch_one_and_not_at_a_large_batch():
    """Llama-3.1-8B with a Llama-3.2-1B draft, k = 4, alpha = 0.7 on an H100 (closed loops, 128 in / 256 out):
    alone, TPOT falls ~11% (7.93 -> 7.03 ms); 256 at a time, the verify step is compute-bound and TPOT rises
    ~27% (15.9 -> 20.2 ms): the cost model's break-even batch (68 at context 256) shows in the simulator."""
    plain = deployment("llama-3.1-8b", "h100-sxm", frontend="none")
    spec = deployment("llama-3.1-8b", "h100-sxm", speculative=DRAFT, frontend="none")

    def tpot(dep, conc):
        wl = build_workload(num_requests=max(8, 2 * conc), input_len="128", output_len="256", concurrency=conc, seed=0)
        return simulate(dep, wl).summary()["tpot_ms"]["mean"]

    assert tpot(spec, 1) < 0.9 * tpot(plain, 1)
    assert tpot(spec, 256) > 1.2 * tpot(plain, 256)


def test_static_scheduler_reserves_the_lookahead():
    dep = deployment("llama-3.1-8b", "h100-sxm", speculative="ngram,k=4,alpha=0.5", frontend="none")
    wl = build_workload(num_requests=16, input_len="100", output_len="50", concurrency=8, seed=0)
    s = simulate(dep, wl, SimConfig(scheduler="static")).summary()
    assert s["num_completed"] == 16 and s["preemptions"] == 0
    assert s["speculative"]["tokens_per_verified_decode"] > 1.5


# ---- techniques and planner -------------------------------------------------------------------------------
def test_compare_simulates_speculative_rows():
    base = Scenario(deployment=deployment("llama-3.1-8b", "h100-sxm", frontend="none"), input_len=256, output_len=64)
    led = compare(base, ["spec=ngram,k=4,alpha=0.6"], parse_sla("p95_ttft<=2s,p95_tpot<=50ms"),
                  sim=SimWorkload(None, 40))
    row = led.rows[0]
    assert row.metrics.throughput_method == "simulated" == led.baseline.metrics.throughput_method
    assert row.scenario.deployment.speculative == parse_speculative("ngram,k=4,alpha=0.6")
    assert row.metrics.output_tokens_per_s_at_sla > 0


def test_plan_searches_speculative_and_launches_it():
    eagle = parse_speculative("eagle,k=3,accepted=2.6")
    space = SearchSpace(gpus=("h100-sxm",), tps=(1,), weights=("bf16",), kvs=("bf16",), speculative=(None, eagle))
    r = plan(PlanRequest(model="llama-3.1-8b", sla="p95_ttft<=300ms,p95_tpot<=12ms", space=space, workload="chat",
                         num_requests=60, workers=1, max_effort=1.0))
    d = plan_to_dict(r, launch=plan_launch(r))
    assert d["best"]["speculative"] == "eagle,k=3,accepted=2.6"
    assert d["best"]["config"].endswith("spec=eagle,k=3,accepted=2.6")
    assert {row["speculative"] for row in d["ranked"]} == {None, "eagle,k=3,accepted=2.6"}
    v = d["launch"]["vllm"]
    assert "--speculative-config" in v and '"method":"eagle"' in v and '"num_speculative_tokens":3' in v
    assert "--speculative-algorithm EAGLE" in d["launch"]["sglang"]


def test_cli_simulate_and_plan_take_speculative():
    res = runner.invoke(app, ["simulate", "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--num-requests", "20",
                              "--input-len", "128", "--output-len", "64", "--concurrency", "4",
                              "--speculative", "ngram,k=3,alpha=0.6", "--json"])
    assert res.exit_code == 0, res.output
    d = json.loads(res.stdout)
    assert d["setup"]["speculative"] == "ngram,k=3,alpha=0.6" and d["speculative"]["verified_positions"] == 4
    res = runner.invoke(app, ["simulate", "--num-requests", "5", "--speculative", "eagle,k=3", "--json"])
    assert res.exit_code != 0
    res = runner.invoke(app, ["plan", "--speculative", "none", "--speculative", "medusa,k=5,alpha=2", "--json"])
    assert res.exit_code != 0 and "alpha must be in [0, 1]" in str(res.exception)


def test_a_verify_step_replays_the_engines_graphs_and_deepseeks_mtp_module_is_an_moe_layer():
    """A verify step scores every position: a decode step the engines capture in CUDA graphs, not a prompt step
    launched kernel by kernel (TensorRT-LLM's eager floor took DeepSeek-V3's MTP TPOT from 14 ms to 95 ms).
    DeepSeek-V3's MTP module is a decoder layer with the model's MoE (so it runs under DP attention + EP); an
    EAGLE head is a dense one where the model has dense layers."""
    dep = deployment("deepseek-v3", "h200", tp=8, weights="fp8", engine="trtllm@1.2")
    windows = layout(dep).windows
    verify = verify_shape(16, 2000, 2, windows)
    assert step_time(dep, verify) < 1.5 * step_time(dep, decode_shape(16, 2000, windows))
    mtp = deployment("deepseek-v3", "h200", tp=1, dp=8, ep=8, weights="fp8", engine="trtllm@1.2",
                     speculative="mtp,k=1,accepted=1.8")
    head = proposer_deployment(mtp, mtp.speculative)
    assert head is not None and head.model.num_layers == 1 and head.model.layers[0].mlp.is_moe
    eagle = deployment("deepseek-v3", "h200", tp=8, weights="fp8", speculative="eagle3,k=3,accepted=2.6")
    eagle_head = proposer_deployment(eagle, eagle.speculative)
    assert eagle_head is not None and not eagle_head.model.layers[0].mlp.is_moe


def test_vllm_v0_scores_a_round_by_batch_expansion():
    """vLLM V0 (spec_decode/batch_expansion.py; the MQA scorer from 0.6.3 runs only eagerly) turns each sequence's
    P positions into P single-token decodes: 2 sequences at 100 cached tokens verifying 3 positions are 6 rows
    with the same pairs, 2 x (101 + 102 + 103) = 612, but reading 2 x (100 + 101 + 102) = 606 cached tokens, not
    the batched row's 2 x 100 = 200. V1 scores the row whole."""
    expanded, batched = verify_shape(2, 100, 3, (None,), expand=True), verify_shape(2, 100, 3, (None,))
    assert (expanded.num_tokens, expanded.num_seqs, expanded.num_logits) == (6, 6, 6)
    assert (batched.num_tokens, batched.num_seqs, batched.num_logits) == (6, 2, 6)
    e, b = expanded.attention[None], batched.attention[None]
    assert (e.decode_pairs, e.decode_kv_read, e.prefill_pairs) == (612, 606, 0)
    assert (b.prefill_pairs, b.prefill_kv_read) == (612, 200)
    v0 = deployment("llama-3.1-8b", "h100-sxm", engine="vllm@0.7.3", speculative=DRAFT)
    assert v0.engine.expands_verify and not v0.engine.eager().expands_verify  # --enforce-eager: the MQA scorer
    assert get_engine("vllm@0.6.2").eager().expands_verify  # before 0.6.3 there was no other scorer
    assert not deployment("llama-3.1-8b", "h100-sxm", engine="vllm@0.15.0").engine.expands_verify
    # at 8k cached tokens the expanded round reads the KV five times: its verify step costs more than V1's
    long = spec_round(v0, v0.speculative, 8, 8192).verify_s
    assert long > spec_round(replace(v0, engine=replace(v0.engine, spec_scoring="batched")), v0.speculative, 8,
                             8192).verify_s


def test_the_simulator_expands_verify_rows_as_the_cost_model_does():
    """A simulated V0 step of B decodes verifying P positions has the shape `verify_shape(..., expand=True)`
    gives (uniform contexts), for full and windowed attention alike."""
    from flopwise.cost.batch import batch_shape
    from flopwise.sim.base import SchedulerOutput
    from flopwise.sim.request import Request
    from flopwise.sim.shape import ShapeBuilder
    for spans in ((None,), (512, None)):
        out = SchedulerOutput(decode_tokens=3)
        for i in range(2):
            r = Request(request_id=i, arrival_at=0.0, num_prompt_tokens=100, max_tokens=50)
            r.num_computed_tokens, r.num_output_tokens, r.num_tokens = 100, 1, 101
            out.add(r, 3)
        shape, prompt = ShapeBuilder(spans, expand=True).step(out)
        want = batch_shape([(1, 100 + j) for _ in range(2) for j in range(3)], spans)
        assert prompt == 0 and (shape.num_tokens, shape.num_seqs, shape.num_logits) == (6, 6, 6)
        assert shape.attention == want.attention
