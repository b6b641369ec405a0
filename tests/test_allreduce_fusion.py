"""SGLang's default FlashInfer all-reduce fusion (sglang.toml, 0.5.7+ on Hopper): each layer's two tensor-parallel
all-reduces carry the residual add and RMSNorm after them, so the step has no norms of its own, on steps of at
most 2048 tokens, without DP attention or expert parallelism, not on H20 before 0.5.13."""

import pytest

from flopwise.api import deployment
from flopwise.cost.batch import decode_shape, prefill_shape
from flopwise.cost.layout import layout
from flopwise.cost.step import step_cost


def _step(engine, gpu="h200", tokens=None, **kw):
    """DeepSeek-V3 at TP 8 (and `kw`): a decode step of 4 sequences at 1000 cached tokens, or one prompt of
    `tokens`; its operators by name (each name's layer groups summed) and its time."""
    dep = deployment("deepseek-ai/DeepSeek-V3", gpu, **{"tp": 8, **kw}, engine=engine)
    w = layout(dep).windows
    cost = step_cost(dep, decode_shape(4, 1000, w) if tokens is None else prefill_shape(1, tokens, w))
    ops: dict[str, list] = {}
    for o in cost.ops:
        ops.setdefault(o.name, []).append(o)
    return ops, cost.time_s


def test_fused_norms_leave_the_step_by_hand():
    """DeepSeek-V3 on 8 x H200 at concurrency 4: 0.5.6 launches 2 norm kernels in each of the 61 layers (hidden 7168,
    bf16, read and written: 4 tokens x 7168 x 2 bytes x 2 x 2 norms a layer), 0.5.7 none; the 122 all-reduces
    stay, and the step is shorter by exactly the norms' time."""
    old, t_old = _step("sglang@0.5.6")
    new, t_new = _step("sglang@0.5.7")
    assert sum(o.count for o in old["norms_residual"]) == 3 + 58  # the dense and the MoE layer groups
    assert sum(o.act_bytes for o in old["norms_residual"]) == 61 * 4 * 7168 * 2 * 2 * 2
    assert "norms_residual" not in new
    assert sum(o.count for o in new["tp_allreduce"]) == sum(o.count for o in old["tp_allreduce"]) == 2 * 61
    assert t_old - t_new == pytest.approx(sum(o.time_s for o in old["norms_residual"]), rel=1e-9)


@pytest.mark.parametrize("engine,gpu,shape,kw,fused", [
    ("sglang@0.5.7", "h200", 2048, {}, True),            # a prompt step of 2048 tokens still fuses
    ("sglang@0.5.7", "h200", 2049, {}, False),           # above the fusion's token limit
    ("sglang@0.5.7", "h20", "decode", {}, False),        # H20 excluded to 0.5.12
    ("sglang@0.5.13", "h20", "decode", {}, True),
    ("sglang@0.5.12", "b200", "decode", {}, False),      # priced on Hopper only (see sglang.toml)
    ("sglang@0.5.12", "h200", "decode", {"tp": 2, "dp": 4, "ep": 8}, False),  # DP attention (TP 2 groups)
    ("sglang@0.5.12", "h200", "decode", {"tp": 8, "ep": 8}, False),           # expert parallelism
    ("sglang@0.5.12", "h200", "decode", {"tp": 16, "nodes": 2}, False),       # across nodes
    ("vllm@0.34", "h200", "decode", {}, False),
])
def test_where_the_fusion_applies(engine, gpu, shape, kw, fused):
    ops, _ = _step(engine, gpu, None if shape == "decode" else shape, **kw)
    assert ("norms_residual" not in ops) is fused
