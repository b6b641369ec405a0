"""The `sharegpt` workload: vLLM's sharegpt sampling as measured (prompt, output) pairs, drawn together."""

from __future__ import annotations

import numpy as np
import pytest

from flopwise.specs.defaults import workload_defaults
from flopwise.techniques.compare import named_workload_shape
from flopwise.validation.engines import case_engine
from flopwise.validation.sim_predictor import _at_means, _client_cap, _dataset_workload
from flopwise.workload import NAMED_WORKLOADS, build_workload
from flopwise.workload.build import workload_max_len


def test_seed_zero_is_the_order_vllm_draws_them_in():
    """The table's first 1,000 rows total what its source printed for vLLM's 1,000 prompts at --seed 0."""
    wl = build_workload(num_requests=1000, workload="sharegpt", seed=0)
    assert sum(r.input_tokens for r in wl.requests) == 215_196
    assert sum(r.output_tokens for r in wl.requests) == 198_343
    assert (wl.requests[0].input_tokens, wl.requests[0].output_tokens) == (13, 120)
    assert all(r.arrival_at == 0.0 for r in wl.requests)  # that client's default: every request at once


def test_the_pairs_keep_their_joint_law():
    rows = NAMED_WORKLOADS["sharegpt"].pairs.rows()  # type: ignore[union-attr]
    assert rows.shape == (16_384, 2)
    assert rows[:, 0].max() <= 1024 and rows.sum(axis=1).max() <= 2048 and rows.min() >= 4  # vLLM's filter
    assert np.median(rows[:, 0]) == 103 and np.median(rows[:, 1]) == 135
    assert np.corrcoef(np.log(rows[:, 0]), np.log(rows[:, 1]))[0, 1] < -0.4  # long prompts, short answers
    # another seed permutes the same rows: a full pass holds each once
    wl = build_workload(num_requests=16_384, workload="sharegpt", seed=7, request_rate=10.0)
    drawn = np.array([(r.input_tokens, r.output_tokens) for r in wl.requests])
    assert not np.array_equal(drawn, rows)
    assert sorted(map(tuple, drawn.tolist())) == sorted(map(tuple, rows.tolist()))


def test_past_the_end_it_starts_over_and_a_given_side_replaces_its_column():
    wl = build_workload(num_requests=16_386, workload="sharegpt")
    assert (wl.requests[16_384].input_tokens, wl.requests[16_385].input_tokens) == (13, 25)
    fixed = build_workload(num_requests=500, workload="sharegpt", output_len=300)  # --sharegpt-output-len 300
    assert {r.output_tokens for r in fixed.requests} == {300}
    assert [r.input_tokens for r in fixed.requests[:3]] == [13, 25, 27]
    assert workload_max_len(workload="sharegpt") == 2048  # vLLM's filter: what a server for it must hold
    assert workload_max_len(workload="sharegpt", output_len=300) == 1024 + 300


def test_its_mean_shape_and_sla():
    shape = named_workload_shape("sharegpt")
    assert (shape.input_len, shape.output_len) == (220, 199)
    assert workload_defaults("sharegpt").sla == workload_defaults("chat").sla


def test_a_case_scales_the_table_to_its_sources_means_within_its_filter():
    wl = build_workload(num_requests=2000, workload="sharegpt")
    out = _at_means(wl, "sharegpt", 300.0, 180.0)
    ins = np.array([r.input_tokens for r in out.requests])
    outs = np.array([r.output_tokens for r in out.requests])
    assert ins.mean() == pytest.approx(300.0, rel=0.02)  # less a little: prompts stay within 1024
    assert ins.max() <= 1024 and (ins + outs).max() <= 2048
    assert outs.mean() == pytest.approx(180.0, rel=0.02)
    kept = _at_means(wl, "sharegpt", None, 180.0)
    assert [r.input_tokens for r in kept.requests] == [r.input_tokens for r in wl.requests]


def test_a_serving_case_on_the_sharegpt_dataset_draws_the_table():
    """A case whose client used the sharegpt dataset (engine_knobs.dataset) and states mean lengths only is
    simulated on the table; a single request, or a case with its own length law, is not."""

    class Case:
        def __init__(self, regime, knobs, args):
            self.regime, self.raw, self.args = regime, {"engine_knobs": knobs}, args

    means = {"input_len": 230, "output_len": 203}
    assert _dataset_workload(Case("max_load", {"dataset": "sharegpt"}, means)) == "sharegpt"
    assert _dataset_workload(Case("online_rate", {"dataset": "ShareGPT (default)"}, means)) == "sharegpt"
    assert _dataset_workload(Case("single_request", {"dataset": "sharegpt"}, means)) is None
    assert _dataset_workload(Case("max_load", {"dataset": "random"}, means)) is None
    own_law = {**means, "input_dist": "uniform:1:1024"}
    assert _dataset_workload(Case("max_load", {"dataset": "sharegpt"}, own_law)) is None


def test_a_case_whose_client_capped_an_open_loop_is_simulated_so():
    """A rate row whose source states the client's cap (`engine_knobs.max_concurrency` / `max_concurrency_cap`), or a
    concurrency row whose source states the rate it sent at (`engine_knobs.request_rate`), ran `vllm bench serve
    --request-rate R --max-concurrency C`: (cap, rate); an infinite rate, or no stated cap, is not capped."""

    def cap(knobs, args):
        return _client_cap(args, case_engine({"engine": "vLLM", "engine_version": "0.18", "engine_knobs": knobs},
                                             "simulate"))

    assert cap({"max_concurrency_cap": 128}, {"request_rate": 100.0}) == (128, 100.0)
    assert cap({"max_concurrency": 16, "request_rate": 8}, {"concurrency": 16}) == (16, 8.0)
    assert cap({"max_concurrency": 16}, {"concurrency": 16}) is None  # a plain closed loop
    assert cap({"max_concurrency": 16, "request_rate": "inf"}, {"concurrency": 16}) is None
    assert cap({"max_concurrency": 200}, {"request_rate": "inf"}) is None
    assert cap({}, {"request_rate": 4.0}) is None
    assert cap({"max_concurrency": None}, {"request_rate": 4.0}) is None
