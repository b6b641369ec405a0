"""Tokens a response opens with that the chat endpoint streams no text for (gpt-oss's harmony header
`<|channel|>analysis<|message|>`): the client's first token, its TTFT and its token count start after them."""

import pytest

from flopwise.api import deployment
from flopwise.sim import simulate
from flopwise.sim.frontend import hidden_tokens
from flopwise.sim.request import visible_steps
from flopwise.specs.model_catalog import get_model
from flopwise.workload import build_workload


def test_visible_steps_by_hand():
    assert visible_steps([5, 10], 3) == [8, 10]
    assert visible_steps([5, 6, 9, 12], 2) == [10, 12]  # the first range is used up, then one of the second
    assert visible_steps([5, 6, 9, 12], 1) == [9, 12]
    assert visible_steps([5, 7], 3) == [6, 7]  # the last token always shows (the response's final chunk)
    assert visible_steps([5, 6], 3) == [5, 6]
    assert visible_steps([5, 10], 0) == [5, 10]


def test_which_deployments_hide_tokens():
    assert get_model("openai/gpt-oss-20b").response_header_tokens == 3
    assert get_model("llama-3.1-8b").response_header_tokens == 0
    assert hidden_tokens(deployment("openai/gpt-oss-20b", "h100-sxm", endpoint="chat")) == 3
    assert hidden_tokens(deployment("openai/gpt-oss-20b", "h100-sxm")) == 0  # /v1/completions streams raw text
    assert hidden_tokens(deployment("openai/gpt-oss-20b", "h100-sxm", endpoint="chat", frontend="none")) == 0
    assert hidden_tokens(deployment("llama-3.1-8b", "h100-sxm", endpoint="chat")) == 0


def test_chat_ttft_is_the_fourth_tokens_instant():
    """One request alone: the client's TTFT is the instant of the 4th token generated, 3 decode steps after
    the first, and it counts 3 fewer tokens; the engine's own timeline is the same."""
    wl = build_workload(num_requests=1, input_len="500", output_len="40", request_rate=float("inf"), seed=0)
    chat = simulate(deployment("openai/gpt-oss-20b", "h100-sxm", endpoint="chat"), wl)
    req, rec, tl = chat.requests[0], chat.records[0], chat.timelines[0]
    delivered = list(tl.delivered_at)
    a, b = req.token_steps
    assert b - a == 40 and len(rec.token_times) == 37
    assert rec.token_times == delivered[a + 3:b]
    assert rec.ttft_ms == pytest.approx((delivered[a + 3] - req.arrival_at) * 1e3)
    assert delivered[a] < delivered[a + 1] < delivered[a + 2] < delivered[a + 3]  # three decode steps later
