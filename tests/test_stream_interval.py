"""--stream-interval: a server that streams one event per N output tokens after the first (vLLM 0.11.1+, SGLang,
TensorRT-LLM 1.0+) does less API-server work per token (`FrontendCosts.token_s`), and its clients see N-token
chunks (`sim.simulate.stream_events`)."""

from __future__ import annotations

import pytest

from flopwise.api import deployment, simulate
from flopwise.cli import run
from flopwise.cost.capacity import frontend_ceiling
from flopwise.errors import SpecError
from flopwise.launch import LaunchTarget, render
from flopwise.sim.simulate import stream_events
from flopwise.specs.engine import get_engine
from flopwise.validation.engines import case_engine


def test_the_per_token_cost_keeps_only_its_per_token_share():
    # vLLM 0.15: 60 us per token at one event each, 0.47 of it per token (measured), the rest per event:
    # 60 x (0.47 + 0.53 / 10) = 31.38 us at --stream-interval 10. SGLang's scheduler batches everything: 25 / 10.
    v = get_engine("vllm@0.15.0")
    assert v.frontend.token_s == pytest.approx(6.0e-5)
    assert v.with_stream_interval(10).frontend.token_s == pytest.approx(3.138e-5, rel=1e-12)
    assert get_engine("sglang@0.5.6").with_stream_interval(10).frontend.token_s == pytest.approx(2.5e-6, rel=1e-12)
    assert get_engine("trtllm@1.2.0").with_stream_interval(20).frontend.token_s == pytest.approx(1.5e-6, rel=1e-12)
    assert v.with_stream_interval(1) == v


def test_an_interval_raises_the_api_servers_ceiling():
    # SGLang 0.5.6, 128 in / 128 out: ingress 3.6 ms + 128 x 2.5 us = 3.92 ms; streaming 128 x 25 us = 3.2 ms at
    # one event per token; at ten 128 x 2.5 us and the lone first event's 25 - 2.5 us more = 0.3425 ms:
    # 1 / 7.12 ms = 140.4 req/s -> 1 / 4.2625 ms = 234.6 req/s
    one = deployment("llama-3.1-8b", "h100-sxm", engine="sglang@0.5.6")
    ten = deployment("llama-3.1-8b", "h100-sxm", engine="sglang@0.5.6", stream_interval=10)
    assert frontend_ceiling(one, 128, 128) == pytest.approx(1 / 7.12e-3, rel=1e-9)
    assert frontend_ceiling(ten, 128, 128) == pytest.approx(1 / 4.2625e-3, rel=1e-9)


def test_events_carry_the_first_token_alone_then_every_n():
    times = [0.1 * i for i in range(10)]  # tokens 0..9: events after tokens 0, 4, 8 and the last, 9
    at, tokens = stream_events(times, 4)
    assert at == pytest.approx([0.0, 0.4, 0.8, 0.9]) and tokens == [1, 4, 4, 1]
    assert stream_events(times, 1) == (times, [1] * 10)
    assert stream_events([0.5], 8) == ([0.5], [1])
    # SGLang before 0.4.9: the first event once 4 tokens are out (after tokens 3, 7, and the last)
    at, tokens = stream_events(times, 4, first_alone=False)
    assert at == pytest.approx([0.3, 0.7, 0.9]) and tokens == [4, 4, 2]
    # 3 opening tokens with no text (gpt-oss's chat header): the event after token 0 shows nothing, the next
    # carries tokens 3..4
    at, tokens = stream_events(times, 4, hidden=3)
    assert at == pytest.approx([0.4, 0.8, 0.9]) and tokens == [2, 4, 1]
    # a client that stopped reading at its deadline after token 5 got the events after tokens 0 and 4 only
    assert stream_events(times[:6], 4, complete=False) == (pytest.approx([0.0, 0.4]), [1, 4])


def test_a_frontend_bound_server_streams_more_and_in_chunks():
    """256 clients of 16 in / 128 out on a 1B model behind vLLM 0.15: its API server binds at one request per
    1.5 ms + 16 x 2.5 us + 128 x 60 us = 9.22 ms (108.5 req/s); at --stream-interval 10 a request costs
    1.54 ms + 28.6 us (its lone first event's extra) + 128 x 31.38 us = 5.59 ms. The client sees events after
    tokens 0, 10, ..., 120 and 127: 13 gaps for 127 token gaps, so ITL per event = 127 / 13 = 9.77 TPOTs and per
    token one TPOT."""
    kw = dict(engine="vllm@0.15.0", num_requests=2000, input_len="16", output_len="128", concurrency=256, seed=1)
    one = simulate("llama-3.2-1b", "h100-sxm", **kw).summary
    ten = simulate("llama-3.2-1b", "h100-sxm", stream_interval=10, **kw).summary
    assert one["bottleneck"] == "frontend" and one["setup"]["stream_interval"] == 1
    assert one["request_throughput"] == pytest.approx(1 / 9.22e-3, rel=0.01)
    assert ten["setup"]["stream_interval"] == 10 and ten["frontend_utilization"] < one["frontend_utilization"]
    assert ten["request_throughput"] > 1.4 * one["request_throughput"]
    assert ten["ttft_ms"]["mean"] < 0.5 * one["ttft_ms"]["mean"]  # the queue in front of the API server shrinks
    tpot = ten["tpot_ms"]["mean"]
    assert ten["itl_ms"]["mean"] == pytest.approx(127 / 13 * tpot, rel=0.02)
    assert ten["itl_per_token_ms"]["mean"] == pytest.approx(tpot, rel=0.02)
    assert one["itl_ms"]["mean"] == pytest.approx(one["tpot_ms"]["mean"], rel=0.02)


@pytest.mark.parametrize("kw, msg", [
    (dict(engine="vllm@0.11.0"), "no stream-interval option"),
    (dict(engine="llamacpp"), "no stream-interval option"),
    (dict(engine="trtllm@0.21.0"), "no stream-interval option"),
    (dict(engine="sglang@0.5.6", frontend="none"), "offline"),
    (dict(engine="sglang@0.5.6", stream_interval=0), "must be an integer"),
])
def test_stream_interval_refusals(kw, msg):
    with pytest.raises(SpecError, match=msg):
        deployment("llama-3.1-8b", "h100-sxm", **({"stream_interval": 8} | kw))


def test_the_cli_takes_a_stream_interval(capsys):
    code = run(["simulate", "--model", "llama-3.2-1b", "--engine", "sglang@0.5.6", "--stream-interval", "4",
                "--num-requests", "20", "--input-len", "64", "--output-len", "9", "--json"])
    assert code == 0 and '"stream_interval": 4' in capsys.readouterr().out
    assert run(["simulate", "--model", "llama-3.2-1b", "--engine", "sglang@0.5.6", "--stream-interval", "4",
                "--num-requests", "5", "--input-len", "64", "--output-len", "9"]) == 0
    assert "streaming every 4 tokens" in " ".join(capsys.readouterr().out.split())
    assert run(["simulate", "--model", "llama-3.2-1b", "--engine", "llamacpp", "--stream-interval", "4",
                "--num-requests", "2", "--json"]) == 2
    assert "no stream-interval option" in capsys.readouterr().err


def test_launch_commands_write_the_interval_where_the_release_has_it():
    def cmd(engine, render_as=None):
        dep = deployment("llama-3.1-8b", "h100-sxm", engine=engine, stream_interval=8)
        t = LaunchTarget(deployment=dep, model_id="meta-llama/Llama-3.1-8B-Instruct", max_model_len=4096,
                         max_prompt_len=2048)
        return render(t) if render_as is None else render(t, get_engine(render_as))

    assert "--stream-interval 8" in cmd("vllm@0.15.0").command
    assert "--stream-interval 8" in cmd("sglang@0.5.6").command
    trt = cmd("trtllm@1.2.0")
    assert "stream_interval: 8" in trt.file("extra-llm-api-options.yml")
    old = cmd("vllm@0.15.0", "vllm@0.10.2")  # the plan's interval on a release without the flag: a note
    assert "--stream-interval" not in old.command and any("streams every token" in n for n in old.notes)


def test_a_case_states_its_stream_interval():
    knobs = {"stream_interval": "10 (inferred from ITL/TPOT)", "benchmark": "bench_serving"}
    assert case_engine({"engine": "SGLang", "engine_version": "0.5.7", "engine_knobs": knobs},
                       "simulate").knobs == {"stream_interval": 10}
    # vLLM 0.10 has no such flag: a stated interval cannot have been served; the knob is not read
    assert case_engine({"engine": "vLLM", "engine_version": "0.10.1", "engine_knobs": knobs},
                       "simulate").knobs == {}


def test_where_the_first_event_waits_so_does_the_client():
    """The first token the client can read comes with the first event that carries text: SGLang before 0.4.9 sends
    its first after N tokens (4 here: 3 steps later), and gpt-oss's 3 header tokens on the chat endpoint go out
    with the first token alone, so its text waits for the event after token 10 (7 steps later)."""
    def run_one(model, engine, interval, endpoint="completions"):
        s = simulate(model, "h100-sxm", engine=engine, endpoint=endpoint, stream_interval=interval, num_requests=1,
                     input_len="256", output_len="64").summary
        return s["ttft_ms"]["mean"], s["tpot_ms"]["mean"]

    (t1, p1), (t4, _) = run_one("llama-3.1-8b", "sglang@0.4.8", 1), run_one("llama-3.1-8b", "sglang@0.4.8", 4)
    assert t4 - t1 == pytest.approx(3 * p1, rel=0.05)
    (t1, p1), (t10, _) = (run_one("gpt-oss-20b", "sglang@0.5.6", n, "chat") for n in (1, 10))
    assert t10 - t1 == pytest.approx(7 * p1, rel=0.1)


def test_the_first_event_is_a_whole_one():
    """A lone first token costs the API server a whole event (output_token_s), the rest token_s each: vLLM 0.15 at
    N = 10 adds 60 - 31.38 = 28.62 us per request to its ingress; a server whose first event waits adds none."""
    fe = get_engine("vllm@0.15.0").with_stream_interval(10).frontend
    assert fe.first_event_s == pytest.approx(6.0e-5 - 3.138e-5, rel=1e-12)
    assert fe.batch_ttft_s(4, 100) == pytest.approx(4 * (1.5e-3 + 100 * 2.5e-6) + 5e-3 + 4 * 6.0e-5, rel=1e-12)
    assert get_engine("sglang@0.4.8").with_stream_interval(10).frontend.first_event_s == 0.0


def test_an_itl_bound_counts_steps_between_events():
    """The capacity bound's ITL is the gap between two events the client sees: ten decode steps at
    --stream-interval 10, so an ITL objective one step met fails there (`bounds`)."""
    from flopwise.cost.capacity import bounds
    from flopwise.specs.sla import parse_sla

    one = deployment("llama-3.1-8b", "h100-sxm", engine="vllm@0.15.0")
    ten = deployment("llama-3.1-8b", "h100-sxm", engine="vllm@0.15.0", stream_interval=10)
    step = bounds(one, parse_sla("p95_tpot<=100ms"), 512, 128).tpot_floor_ms
    sla = parse_sla(f"p95_itl<={3 * step:.3f}ms")
    assert bounds(one, sla, 512, 128).feasible
    b = bounds(ten, sla, 512, 128)
    assert not b.feasible and "batch-1 ITL" in (b.reason or "")


def test_a_bounded_fleet_refuses_an_interval():
    from flopwise.errors import WorkloadError

    with pytest.raises(WorkloadError, match="per streamed event"):
        simulate("llama-3.2-1b", "h100-sxm", engine="sglang@0.5.6", stream_interval=8, replicas=2,
                 num_requests=100_000, input_len="16", output_len="4", request_rate="inf")
