"""TensorRT-LLM's attention-DP balance (`sim/adp_balance.py`): the hold rule by hand, the profile's numbers, the
simulator's use of them and the refusals."""

from __future__ import annotations

import pytest

from flopwise.api import simulate
from flopwise.cli import run
from flopwise.errors import WorkloadError
from flopwise.sim.adp_balance import AdpBalance
from flopwise.specs.engine import get_engine


def test_a_lone_context_waits_out_the_timeout():
    b = AdpBalance(4, timeout_iters=5, batching_wait_iters=2)
    # one context waiting (fewer than 4 ranks have one), every rank generating: held at steps 1..4, out at 5
    held = [b.hold(s, num_waiting=1, num_running=40, max_running=512) for s in range(1, 7)]
    assert held == [True, True, True, True, False, True]


def test_contexts_on_every_rank_wait_for_batching_then_go():
    b = AdpBalance(4, timeout_iters=50, batching_wait_iters=2)
    held = [b.hold(s, num_waiting=4, num_running=40, max_running=512) for s in range(1, 5)]
    assert held == [True, True, False, True]  # two iterations to batch, then scheduled, and the count restarts


def test_no_rank_waits_behind_one_with_nothing_to_generate():
    b = AdpBalance(4, timeout_iters=50, batching_wait_iters=10)
    assert not b.hold(1, num_waiting=1, num_running=3, max_running=512)  # a rank is idle
    assert not b.hold(2, num_waiting=4, num_running=0, max_running=512)  # all have contexts, none generates


def test_the_counter_keeps_cycling_while_nothing_waits():
    b = AdpBalance(2, timeout_iters=10, batching_wait_iters=0)
    assert not b.hold(0, num_waiting=2, num_running=8, max_running=64)  # restart at 0
    # nothing waits for steps 1..22; at 23 the counter is 3 into its third cycle: 7 more iterations to go
    assert [b.hold(s, num_waiting=1, num_running=8, max_running=64) for s in range(23, 31)] == [True] * 7 + [False]


def test_the_profile_has_it_from_1_0():
    assert get_engine("trtllm@1.2").adp_balance_iters == (50, 10)
    assert get_engine("trtllm@0.21").adp_balance_iters == ()
    assert get_engine("vllm").adp_balance_iters == ()


def test_balance_trades_ttft_for_decode_stalls():
    """gpt-oss-120b over 4 B200s with attention DP, uneven lengths (InferenceMAX's 1k/1k): held contexts raise
    TTFT; batched ones, one per rank, stall the decodes less."""
    kw = dict(num_gpus=4, tp=1, dp=4, ep=4, weights="mxfp4", kv="fp8", engine="trtllm@1.2", concurrency=64,
              num_requests=320, input_len="uniform:819:1024", output_len="uniform:819:1024")
    off = simulate("openai/gpt-oss-120b", "b200", **kw).summary
    on = simulate("openai/gpt-oss-120b", "b200", adp_balance=True, **kw).summary
    assert on["setup"]["adp_balance"] and not off["setup"]["adp_balance"]
    assert on["ttft_ms"]["mean"] > 1.2 * off["ttft_ms"]["mean"]
    assert on["tpot_ms"]["mean"] < 0.85 * off["tpot_ms"]["mean"]


@pytest.mark.parametrize("args,msg", [
    (["--engine", "vllm", "--dp", "2", "--ep", "2", "--num-gpus", "2"], "has no such option"),
    (["--engine", "trtllm@1.2"], "needs --dp 2 or more"),
])
def test_refused_in_one_line(capsys, args, msg):
    code = run(["simulate", "--model", "openai/gpt-oss-120b", "--gpu", "b200", "--adp-balance",
                "--num-requests", "4", *args])
    err = capsys.readouterr().err.strip()
    assert code == 2 and err.startswith("error: ") and "\n" not in err and msg in err


def test_the_api_refuses_it_too():
    with pytest.raises(WorkloadError, match="needs --dp 2"):
        simulate("openai/gpt-oss-120b", "b200", engine="trtllm@1.2", adp_balance=True, num_requests=4)
