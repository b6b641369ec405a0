"""Expert parallelism, data-parallel attention and replicas across nodes (issue 15), checked by hand."""

from __future__ import annotations

import json
import re
from dataclasses import replace

import pytest

from flopwise.cli import run
from flopwise.cost.batch import AttentionWork, batch_shape, busiest_group, decode_shape, prefill_shape
from flopwise.cost.layout import layout
from flopwise.cost.memory import max_sequences, memory_plan
from flopwise.cost.parallel import NETWORK_EFFICIENCY, NETWORK_LATENCY_S, alltoall_time, collective_latency_s
from flopwise.cost.step import step_cost
from flopwise.errors import SpecError, WorkloadError
from flopwise.sim.base import SchedulerOutput
from flopwise.sim.request import Request
from flopwise.sim.shape import ShapeBuilder
from flopwise.sim.simulate import simulate
from flopwise.specs.build import build_deployment
from flopwise.specs.hardware import get_hardware
from flopwise.specs.model import expert_params
from flopwise.validation.engines import case_parallelism
from flopwise.workload import build_workload

DSV3 = "deepseek-ai/DeepSeek-V3"


def _dep(**kw):
    """DeepSeek-V3 on H200s; balanced routing unless a skew is given (the hand checks assume an even spread)."""
    kw.setdefault("expert_skew", 1.0)
    return build_deployment(DSV3, "h200", weights="fp8", kv="bf16", frontend="none", **kw)


def _by_name(cost):
    """Each operator's count, FLOPs, weight bytes and time summed over the layer groups it appears in."""
    out: dict[str, dict[str, float]] = {}
    for o in cost.ops:
        d = out.setdefault(o.name, {"count": 0, "flops": 0.0, "weight_bytes": 0.0, "time_s": 0.0})
        for k in d:
            d[k] += getattr(o, k)
    return out


def _decode_cost(dep, seqs=64, context=2048):
    return step_cost(dep, decode_shape(seqs, context, layout(dep).windows))


def test_ep_equal_to_tp_moves_the_same_expert_work_but_by_all_to_all():
    tp8, ep8 = _dep(tp=8), _dep(tp=8, ep=8)
    a, b = _by_name(_decode_cost(tp8)), _by_name(_decode_cost(ep8))
    # per GPU: E/8 whole experts instead of every expert's 1/8 shard: the same FLOPs and (in expectation) bytes
    assert b["moe_experts"]["flops"] == pytest.approx(a["moe_experts"]["flops"])
    assert b["moe_experts"]["weight_bytes"] == pytest.approx(a["moe_experts"]["weight_bytes"])
    moe = sum(1 for lay in tp8.model.layers if lay.mlp.is_moe)
    dense = tp8.model.num_layers - moe
    assert (moe, dense) == (58, 3)
    # TP: two all-reduces per layer; EP: one after attention, and dispatch + combine in each MoE layer
    assert a["tp_allreduce"]["count"] == 2 * 61 and "moe_alltoall" not in a
    assert b["tp_allreduce"]["count"] == 2 * dense + moe and b["moe_alltoall"]["count"] == 2 * moe


def test_data_parallel_attention_replicates_attention_and_splits_the_experts():
    m = _dep(tp=8).model
    tp8, dep8 = layout(_dep(tp=8)), layout(_dep(tp=1, dp=8, ep=8))
    experts = sum(lay.mlp.num_experts * expert_params(lay.mlp, m.hidden_size) for lay in m.layers if lay.mlp.is_moe)
    embeds = m.embedding_params + m.lm_head_params
    rest = m.total_params - embeds - experts
    wbpp = tp8.weight_bytes_per_param
    # a DP rank holds every non-expert weight (tp = 1) and 1/8 of the experts; TP8 holds 1/8 of everything
    assert dep8.weight_bytes_per_gpu == pytest.approx((rest + experts / 8) * wbpp + embeds * 2, rel=1e-3)
    # the routed experts per GPU are the same 1/8 either way: every expert's 1/8 shard, or 1/8 of the experts whole
    for lay in (tp8, dep8):
        held = sum(g.count * g.local_experts * g.expert_params for g in lay.groups if g.is_moe)
        assert held == pytest.approx(experts / 8)


def test_data_parallel_attention_keeps_one_copy_of_the_mla_latent_per_request():
    tp8, dep8 = _dep(tp=8), _dep(tp=1, dp=8, ep=8)
    # MLA's latent is replicated on every TP rank: per GPU it costs the same per token in both layouts
    assert layout(tp8).kv_bytes_per_token == layout(dep8).kv_bytes_per_token
    a, b = memory_plan(tp8), memory_plan(dep8)
    # but each DP rank keeps only its own requests: the replica holds 8 GPUs' pools, TP8 one
    assert a.num_blocks == int(a.kv_pool_bytes // a.block_bytes)
    assert b.num_blocks == 8 * int(b.kv_pool_bytes // b.block_bytes)
    assert b.kv_capacity_tokens > 4 * a.kv_capacity_tokens
    assert dep8.running_limit == 8 * dep8.max_num_seqs and dep8.token_budget == 8 * dep8.max_num_batched_tokens


def test_all_to_all_within_and_across_nodes():
    hw = get_hardware("h200")
    link = 450e9 * 0.8
    b = 1e6  # one copy of this GPU's tokens
    # 8 GPUs of one node, 8 experts per token: 8 copies, 7/8 of them to other GPUs, over NVLink
    t, sent = alltoall_time(hw, 8, b, fanout=8)
    assert t == pytest.approx(collective_latency_s(hw) + b * 8 * 7 / 8 / link) and sent == pytest.approx(b * 7)
    # 16 GPUs over 2 nodes: 8 copies x 7/16 to this node's GPUs; the other node gets one copy when any of the 8
    # experts is there (1 - 1/2^8), over the 50 GB/s NIC, which is slower
    t, sent = alltoall_time(hw, 16, b, fanout=8, per_node=8)
    inter = b * (1 - 0.5**8)
    assert t == pytest.approx(NETWORK_LATENCY_S + inter / (50e9 * NETWORK_EFFICIENCY))
    assert sent == pytest.approx(b * 8 * 7 / 16 + inter)


def test_two_nodes_price_the_dispatch_over_the_network():
    wide = _dep(tp=8, dp=2, ep=16, nodes=2)
    # the same 16 GPUs in one peer-fabric domain (an H200 server holds 8: a made-up 16-GPU one)
    one = _by_name(_decode_cost(replace(wide, nodes=1, hardware=replace(wide.hardware, gpus_per_node=16))))
    two = _by_name(_decode_cost(wide))
    assert two["moe_alltoall"]["time_s"] > 3 * one["moe_alltoall"]["time_s"]  # 50 GB/s NIC vs 450 GB/s NVLink


def test_ep_wider_than_tp_implies_data_parallel_groups():
    d = _dep(tp=8, ep=16, nodes=2)
    assert (d.tp, d.dp, d.ep, d.moe_tp, d.gpus_per_replica, d.gpus_per_node) == (8, 2, 16, 1, 16, 8)


@pytest.mark.parametrize("kw,msg", [
    (dict(tp=8, ep=3), "must divide tp*dp"),
    (dict(tp=1, dp=8, ep=8, nodes=3), "nodes=3 must divide"),
    (dict(tp=8, dp=2, ep=16, nodes=1),
     "more than one server holds (8 x h200, its nvlink4 domain): spread it over --nodes 2"),
    (dict(tp=8, dp=2, ep=16), None),  # the 2 servers its 16 GPUs fill
    (dict(tp=8, dp=2, ep=16, nodes=2), None),
])
def test_parallel_layouts_are_checked(kw, msg):
    if msg is None:
        assert _dep(**kw).gpus_per_replica == 16
        return
    with pytest.raises(SpecError, match=re.escape(msg)):
        _dep(**kw)


def test_dense_models_refuse_expert_parallelism_in_one_line(capsys):
    code = run(["simulate", "--model", "meta-llama/Llama-3.1-8B", "--ep", "2", "--num-requests", "4"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and err.startswith("error: ") and "\n" not in err and "no MoE layers" in err


def test_case_knobs_in_each_engines_terms():
    # TensorRT-LLM's DEP8: tp counts every GPU, one attention group per rank
    assert case_parallelism({"tp": 8, "ep": 8, "enable_attention_dp": True}, 8) == {"tp": 1, "dp": 8, "ep": 8}
    # SGLang --tp 8 --dp 4 --enable-dp-attention: 4 groups of 2
    assert case_parallelism({"dp": 4, "enable_dp_attention": True}, 8) == {"tp": 2, "dp": 4, "ep": 1}
    # vLLM --tensor-parallel-size 4 --data-parallel-size 2 --enable-expert-parallel
    assert case_parallelism({"data_parallel_size": 2, "enable_expert_parallel": True}, 4) == {"tp": 4, "dp": 2, "ep": 8}
    # TensorRT-LLM MoE TP4 x EP2 under TP8 attention
    assert case_parallelism({"tp": 8, "ep": 2}, 8) == {"tp": 8, "dp": 1, "ep": 2}


def test_a_stated_expert_skew_slows_the_busiest_rank_only_under_ep():
    even, skewed = _by_name(_decode_cost(_dep(tp=8, ep=8))), _by_name(_decode_cost(_dep(tp=8, ep=8, expert_skew=1.5)))
    assert skewed["moe_experts"]["flops"] == pytest.approx(1.5 * even["moe_experts"]["flops"])
    assert skewed["moe_experts"]["weight_bytes"] == pytest.approx(even["moe_experts"]["weight_bytes"])
    with pytest.raises(SpecError, match="expert_skew applies with expert parallelism"):
        _dep(tp=8, expert_skew=1.5)  # every GPU holds a shard of every expert: no busiest rank to slow
    with pytest.raises(SpecError, match="expert_skew"):
        _dep(tp=8, ep=8, expert_skew=0.5)


def test_two_batch_overlap_hides_half_of_the_smaller_of_kernels_and_all_to_alls():
    from flopwise.cost.step import TBO_OVERLAP, step_time

    plain, tbo = _dep(tp=8, ep=8), _dep(tp=8, ep=8, two_batch_overlap=True)
    c_plain, c_tbo = _decode_cost(plain), _decode_cost(tbo)
    moe = _by_name(c_plain)
    a2a = moe["moe_alltoall"]["time_s"]
    assert 0 < c_tbo.time_s < c_plain.time_s
    # what is hidden is at most TBO_OVERLAP x the MoE layers' collectives (all-to-alls + the attention all-reduce)
    comm = a2a + moe["tp_allreduce"]["time_s"]
    assert c_plain.time_s - c_tbo.time_s <= TBO_OVERLAP * comm + 1e-12
    # the breakdown still adds up, and the fast path agrees with it
    shape = decode_shape(64, 2048, layout(tbo).windows)
    assert step_time(tbo, shape) == pytest.approx(c_tbo.time_s)
    assert sum(o.time_s for o in c_tbo.ops) + c_tbo.step_overhead_s == pytest.approx(c_tbo.time_s)
    # at tp 1 (DP attention) there is no all-reduce: only the all-to-alls give up their hidden share
    dep8 = _dep(tp=1, dp=8, ep=8, two_batch_overlap=True)
    c = _decode_cost(dep8)
    assert sum(o.time_s for o in c.ops) + c.step_overhead_s == pytest.approx(c.time_s)
    assert _by_name(c)["norms_residual"]["time_s"] == _by_name(_decode_cost(_dep(tp=1, dp=8, ep=8)))[
        "norms_residual"]["time_s"]
    # plain tensor parallelism has no all-to-all to hide: refused rather than priced as nothing
    with pytest.raises(SpecError, match="two_batch_overlap applies with expert parallelism"):
        _dep(tp=8, two_batch_overlap=True)


def test_default_expert_skew_is_the_measured_deepseek_imbalance_scaled_to_the_ep_size():
    """TensorRT-LLM blog 4: DeepSeek-R1 at EP 32 without EPLB, the hottest rank gets 1.564x more than the mean
    (8 experts per rank). The excess scales as 1 / (experts per rank): EP 8 (32 per rank) 1 + 1.564 / 4; one
    expert per rank at EP 256 would be 1 + 1.564 x 8 = 13.5 (under top-8's bound of 256 x 1 / 8 = 32). Other
    routers have no measurement (1); a stated skew wins; TP-sharded experts have no busiest rank."""
    from flopwise.specs.expert_load import default_expert_skew
    from flopwise.specs.model_catalog import get_model

    ds = get_model(DSV3)
    assert default_expert_skew(ds, 1) == 1.0
    assert default_expert_skew(ds, 8) == pytest.approx(1 + 1.564 / 4)
    assert default_expert_skew(ds, 32) == pytest.approx(2.564)
    assert default_expert_skew(ds, 256) == pytest.approx(1 + 1.564 * 8)
    assert default_expert_skew(get_model("qwen3-30b-a3b"), 8) == 1.0
    auto = build_deployment(DSV3, "h200", weights="fp8", kv="bf16", frontend="none", tp=8, ep=8)
    assert auto.expert_skew == pytest.approx(1.391)
    assert build_deployment(DSV3, "h200", weights="fp8", tp=8, ep=8, expert_skew=1.11).expert_skew == 1.11
    even = _by_name(_decode_cost(_dep(tp=8, ep=8)))
    assert _by_name(_decode_cost(auto))["moe_experts"]["flops"] == pytest.approx(1.391 * even["moe_experts"]["flops"])


def test_busiest_group_by_hand():
    # 10 decodes over 4 groups: 3, 3, 2, 2 rows; chunks of 500 and 300 tokens go, largest first, to the lightest
    # groups (2 rows each): 502 and 302 tokens; the 500-token chunk's group is the busiest
    g = busiest_group(10, 10_000, [(500, 0, True), (300, 0, False)], 4, [None])
    assert g is not None
    assert (g.num_tokens, g.num_seqs, g.num_logits) == (502, 3, 3)
    # its two decode rows at the mean context 1000 (pairs c + 1 each) and the chunk's causal pairs 500 * 501 / 2
    assert g.attention[None] == AttentionWork(125_250, 0, 2 * 1001, 2 * 1000)
    assert busiest_group(10, 10_000, [], 4, [None]) is None  # decodes alone: the groups are even
    assert busiest_group(10, 10_000, [(500, 0, True)], 1, [None]) is None
    # one prompt over 4 groups lands whole on one; 8 prompts spread evenly (no busiest)
    one = prefill_shape(1, 1000, [None], groups=4)
    assert one.busiest is not None and one.busiest.num_tokens == 1000
    assert prefill_shape(8, 1000, [None], groups=4).busiest is None
    assert prefill_shape(5, 1000, [None], groups=4).busiest.num_tokens == 2000


def test_a_lone_prompt_under_data_parallel_attention_runs_on_one_group():
    """The prompt's attention-group operators run its 2048 tokens on one group (not 2048 / 8 on each); the routed
    experts see the same tokens either way."""
    dep = _dep(tp=1, dp=8, ep=8)
    w = layout(dep).windows
    even = batch_shape([(2048, 0)], w)  # no busiest: the cost model splits it 1/8
    whole = prefill_shape(1, 2048, w, groups=8)
    a, b = _by_name(step_cost(dep, even)), _by_name(step_cost(dep, whole))
    assert b["qkv_o_proj"]["flops"] == pytest.approx(8 * a["qkv_o_proj"]["flops"])
    assert b["attention"]["flops"] == pytest.approx(8 * a["attention"]["flops"])
    assert b["moe_experts"]["flops"] == pytest.approx(a["moe_experts"]["flops"])
    assert step_cost(dep, whole).time_s > step_cost(dep, even).time_s


def test_the_simulators_step_carries_its_busiest_group():
    """A step of 6 decodes and one 900-token prompt over 3 groups: 2 decodes each, the prompt on one of them."""
    out = SchedulerOutput()
    for i in range(6):
        r = Request(request_id=i, arrival_at=0.0, num_prompt_tokens=100, max_tokens=10, num_output_tokens=1,
                    num_computed_tokens=100)
        r.num_tokens = 101
        out.add(r, 1)
    out.add(Request(request_id=6, arrival_at=0.0, num_prompt_tokens=900, max_tokens=10), 900)
    shape, prompt = ShapeBuilder((None,), groups=3).step(out)
    assert (shape.num_tokens, prompt) == (906, 900)
    assert shape.busiest is not None
    assert (shape.busiest.num_tokens, shape.busiest.num_seqs, shape.busiest.num_logits) == (902, 3, 3)
    assert ShapeBuilder((None,)).step(out)[0].busiest is None


def test_an_estimates_batch_limit_counts_each_attention_groups_pool_once(capsys):
    """max_sequences is the replica's (every dp group's pool); the memory table's KV for the batch is one GPU's
    share (its group's requests)."""
    dep = build_deployment("qwen3-30b-a3b", "h100-sxm", tp=1, dp=2, ep=2, frontend="none")
    most = max_sequences(dep, 1280)
    plan = memory_plan(dep)
    assert most == 2 * (plan.num_blocks // 2 // -(-1280 // plan.block_size))  # each group's pool holds its own
    assert run(["estimate", "--model", "qwen3-30b-a3b", "--gpu", "h100-sxm", "--dp", "2", "--ep", "2", "--batch",
                str(most), "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["max_batch"] == most and 0 <= d["memory"]["free_gib"] < d["memory"]["kv_pool_gib"]
    assert run(["estimate", "--model", "qwen3-30b-a3b", "--gpu", "h100-sxm", "--dp", "2", "--ep", "2", "--batch",
                str(most + 1)]) == 2
    assert f"holds at most {most:,} sequences" in capsys.readouterr().err


def test_a_request_longer_than_one_attention_groups_pool_is_refused():
    """With data-parallel attention a request lives in one group's KV pool: Qwen3-30B-A3B FP8 on 2 x L40S at a 0.42
    memory fraction holds 34,816 tokens per group (69,632 in all), so a 37,000-token prompt cannot be served, as
    `max_sequences` (whole sequences per group) and the planner's fit test already say."""
    dep = build_deployment("qwen3-30b-a3b", "l40s", tp=1, dp=2, ep=2, weights="fp8", kv="fp8",
                           gpu_memory_utilization=0.42)
    plan = memory_plan(dep)
    assert (plan.num_blocks // 2 * dep.block_size, plan.num_blocks * dep.block_size) == (34_816, 69_632)
    assert max_sequences(dep, 37_016) == 0
    with pytest.raises(WorkloadError, match="34816 tokens on l40s .*each of 2 attention groups"):
        simulate(dep, build_workload(num_requests=1, input_len="37000", output_len="16", seed=0))
