"""Pipeline-parallel replicas whose engine keeps a micro-batch in every stage (`EngineProfile.pp_microbatches`):
batch limits per round and a step priced as one round of micro-batches (`cost/step.py` `_round_s`)."""

from dataclasses import replace

import pytest
from rich.console import Console

from flopwise.api import deployment
from flopwise.cost import batch_shape, decode_shape, step_cost, step_time
from flopwise.cost.layout import layout
from flopwise.cost.step import _combine, _device_s, _run, host_s
from flopwise.launch import LaunchTarget, render
from flopwise.report.simulate_report import render_simulation
from flopwise.sim import simulate
from flopwise.sim.config import SimConfig
from flopwise.sim.sglang_scheduler import sglang_settings
from flopwise.specs.engine import get_engine
from flopwise.workload import build_workload


def _none(dep):
    """The same deployment on an engine that runs one batch through its stages in turn."""
    return replace(dep, engine=replace(dep.engine, pp_microbatches="none"))


@pytest.mark.parametrize("engine,kind,limit,budget", [
    ("trtllm@1.0", "each", 2, 2),   # numMicroBatches = pp, capacity max_batch_size x pp
    ("vllm@0.6", "each", 2, 2),     # V0: pp virtual engines, each its own scheduler and max_num_seqs
    ("vllm@0.15", "shared", 1, 2),  # V1: pp batches in flight under one max_num_seqs
    ("sglang@0.5.6", "shared", 1, 2),  # micro-batches of max_running_requests // pp_size
    ("llamacpp", "none", 1, 1),     # the layer split: one batch, its stages in turn
])
def test_batch_limits_of_a_pipelined_replica(engine, kind, limit, budget):
    dep = deployment("llama-3.1-70b", "h100-sxm", tp=4, pp=2, num_gpus=8, engine=engine)
    assert dep.engine.pp_microbatches == kind
    assert dep.pipeline_batches == (1 if kind == "none" else 2)
    assert dep.running_limit == dep.max_num_seqs * limit
    one = deployment("llama-3.1-70b", "h100-sxm", tp=4, pp=1, num_gpus=4, engine=engine)
    assert dep.token_budget == one.engine.rank_tokens(dep.max_num_batched_tokens, 1) * budget


def test_a_round_takes_one_micro_batchs_pass():
    """128 decode rows at pp 2 on TensorRT-LLM (synchronous with pp): two micro-batches of 64, each through both
    stages while the other fills the stage it is not in, so the round costs one pass of 64 rows plus the engine
    core's work for each micro-batch; the stages-in-turn engine pays one pass of all 128."""
    dep = deployment("llama-3.1-70b", "h100-sxm", tp=4, pp=2, num_gpus=8, engine="trtllm@1.0", weights="fp8")
    assert not dep.engine.host.async_scheduling  # sync_with pp
    w = layout(dep).windows
    full, half = decode_shape(128, 2048, w), decode_shape(64, 2048, w)
    device_half = _device_s(dep, half, _run(dep, half, False))
    host_half = dep.engine.host.seconds(64, 8)
    assert host_s(dep, half) == host_half
    assert step_time(dep, full) == pytest.approx(device_half + 2 * host_half, rel=1e-12)
    flat = _none(dep)
    assert step_time(flat, full) == pytest.approx(
        _combine(flat, _device_s(flat, full, _run(flat, full, False)), host_s(flat, full)), rel=1e-12)
    assert step_time(dep, full) < step_time(flat, full)


def test_a_kv_bound_round_nearly_doubles_decode_speed():
    """512 rows of 4096 tokens at pp 2 on the C++ executor (0.9 ms of engine-core work a step): the KV read
    dominates, so the round of 512 costs about what 256 rows in turn cost; the gain stays short of 2x by the
    engine core's work for each micro-batch and the weights each micro-batch streams again."""
    dep = deployment("llama-3.1-70b", "h100-sxm", tp=4, pp=2, num_gpus=8, engine="trtllm@0.17", weights="fp8")
    full = decode_shape(512, 4096, layout(dep).windows)
    assert 1.6 < step_time(_none(dep), full) / step_time(dep, full) < 2.0


def test_one_sequence_goes_through_the_stages_in_turn():
    dep = deployment("llama-3.1-70b", "h100-sxm", tp=4, pp=2, num_gpus=8, engine="trtllm@1.0", weights="fp8")
    one = decode_shape(1, 4096, layout(dep).windows)
    assert step_time(dep, one) == step_time(_none(dep), one)


def test_max_load_throughput_of_a_pipelined_replica():
    """Offline max load, 800 requests of 128 in / 512 out on 4 stages: the pipelined replica keeps all four GPUs
    busy with its micro-batches, so it outruns the stages-in-turn model of the same GPUs, though by less than the
    stage count (each micro-batch still pays the engine core's work, synchronous under pipeline parallelism)."""
    dep = deployment("llama-3.1-70b", "h100-sxm", tp=1, pp=4, num_gpus=4, engine="trtllm@1.0", weights="fp8")
    wl = build_workload(num_requests=800, input_len=128, output_len=512, request_rate=float("inf"))
    piped = simulate(dep, wl).metrics().output_tokens_per_s
    flat = simulate(_none(dep), wl).metrics().output_tokens_per_s
    assert 1.5 < piped / flat < 4.0


def test_the_report_names_the_stages_and_their_micro_batches():
    dep = deployment("llama-3.1-70b", "h100-sxm", tp=4, pp=2, num_gpus=8, engine="trtllm@1.0", weights="fp8")
    wl = build_workload(num_requests=20, input_len=128, output_len=16, request_rate=float("inf"))
    summary = simulate(dep, wl).summary()
    assert summary["setup"]["pp"] == 2 and summary["setup"]["pipeline_batches"] == 2
    console = Console(record=True, width=200)
    render_simulation(console, summary)
    assert "tp=4, pp=2, 2 micro-batches in flight" in console.export_text()
    flat = simulate(_none(dep), wl).summary()
    assert flat["setup"]["pipeline_batches"] == 1
    console = Console(record=True, width=200)
    render_simulation(console, flat)
    assert "tp=4, pp=2, replicas=1" in console.export_text()


@pytest.mark.parametrize("engine,flag", [
    ("vllm@0.15", "--max-num-batched-tokens 8192"),
    ("sglang@0.5.6", "--chunked-prefill-size 8192"),
])
def test_a_pipelined_launch_keeps_the_budget_per_micro_batch(engine, flag):
    """The round holds a budget per micro-batch (`token_budget` doubles at pp 2), but the flag the engine takes is
    the budget of one micro-batch: the launch command renders that, not the round's."""
    dep = deployment("llama-3.1-70b", "h100-sxm", tp=4, pp=2, num_gpus=8, engine=engine, max_num_batched_tokens=8192)
    assert dep.token_budget == 16384
    t = LaunchTarget(deployment=dep, model_id="meta-llama/Llama-3.1-70B", max_model_len=4096, max_prompt_len=2048)
    cmd = render(t, get_engine(engine)).command
    assert flag in cmd and "16384" not in cmd


def test_a_prompt_chunk_stays_whole_in_its_micro_batch():
    """An 8,192-token prompt alone runs its stages in turn; with one decode row beside it the round is two
    micro-batches, but the prompt's is the whole chunk: the round is no faster than the prompt alone (a share of
    the chunk per micro-batch would have halved it)."""
    for engine in ("trtllm@1.0", "vllm@0.15"):
        dep = deployment("llama-3.1-70b", "h100-sxm", tp=4, pp=2, num_gpus=8, engine=engine, weights="fp8")
        w = layout(dep).windows
        alone = batch_shape([(8192, 0)], w)
        beside = batch_shape([(8192, 0), (1, 1000)], w)
        assert step_time(dep, beside) >= step_time(dep, alone)
        # many prompts spread over the micro-batches: eight 1,024-token prompts run as two micro-batches of four
        eight = batch_shape([(1024, 0)] * 8, w)
        assert step_time(dep, eight) < 0.75 * step_time(_none(dep), eight)


def test_a_rounds_breakdown_counts_every_micro_batchs_work():
    """`step_cost` of a round: the FLOPs of the whole step (its micro-batches' together, as the stages-in-turn
    breakdown counts them), the round's time, and an overhead of what the round takes beyond a GPU's share."""
    dep = deployment("llama-3.1-70b", "h100-sxm", tp=4, pp=2, num_gpus=8, engine="trtllm@1.0", weights="fp8")
    shape = decode_shape(128, 2048, layout(dep).windows)
    piped, flat = step_cost(dep, shape), step_cost(_none(dep), shape)
    assert piped.flops == pytest.approx(flat.flops, rel=1e-9)
    assert piped.time_s == pytest.approx(step_time(dep, shape), rel=1e-12)
    assert piped.step_overhead_s == pytest.approx(piped.time_s - sum(o.time_s for o in piped.ops) / 2, rel=1e-9)


def test_sglangs_chunk_is_per_micro_batch():
    dep = deployment("llama-3.1-70b", "h100-sxm", tp=4, pp=2, num_gpus=8, engine="sglang@0.5.6")
    one = deployment("llama-3.1-70b", "h100-sxm", tp=4, num_gpus=4, engine="sglang@0.5.6")
    chunk = sglang_settings(dep, SimConfig())["chunked_prefill_size"]
    assert chunk == 2 * sglang_settings(one, SimConfig())["chunked_prefill_size"]
