"""`flopwise compare` and `flopwise explain`: the ledger, the --try grammar, JSON keys and bad input."""

import json
import sys

import pytest
from typer.testing import CliRunner

from flopwise.api import deployment
from flopwise.cli import app, main
from flopwise.errors import FlopwiseError
from flopwise.specs.sla import parse_sla
from flopwise.techniques.compare import compare, default_tries
from flopwise.techniques.ledger import METRICS, Change
from flopwise.techniques.scenario import Scenario
from flopwise.techniques.tries import parse_try

runner = CliRunner()
SLA = parse_sla("p95_ttft<=2s,p95_tpot<=50ms")


def test_try_grammar():
    t = parse_try("weights=int8+kv=fp8")
    assert [x.label for x in t.techniques] == ["weights=int8", "kv=fp8"]
    scn = t.apply(Scenario(deployment=deployment("llama-3.1-8b", "h100-sxm")))
    assert (scn.deployment.weights.name, scn.deployment.kv.name) == ("int8", "fp8")
    base = Scenario(deployment=deployment("llama-3.1-8b", "h100-sxm"))
    spec = parse_try("spec=draft:llama-3.2-1b,k=4,alpha=0.7").apply(base)
    assert spec.speculation.k == 4 and spec.speculation.draft_model.name == "meta-llama/Llama-3.2-1B"
    assert parse_try("spec=eagle,k=4,accepted=3.2").techniques[0].label == "spec=eagle,k=4,accepted=3.2"
    assert parse_try("tp=2").apply(Scenario(deployment=deployment("llama-3.1-8b", "h100-sxm"))).deployment.tp == 2
    assert parse_try("chunked-prefill=512").apply(
        Scenario(deployment=deployment("llama-3.1-8b", "h100-sxm"))).deployment.max_num_batched_tokens == 512
    assert parse_try("weights=int4-awq").accuracy_risk.level == "medium"
    assert parse_try("kv-heads=1").accuracy_risk.level == "high"


def test_a_chunked_prefill_try_turns_chunking_on():
    """TensorRT-LLM chunks no prompt by default: chunked-prefill=512 turns chunking on with a 512-token budget (a
    1,024-token prompt 'could never be scheduled' under the budget before)."""
    base = Scenario(deployment=deployment("llama-3.1-8b", "h100-sxm", engine="trtllm"))
    assert not base.deployment.engine.enable_chunked_prefill
    tried = parse_try("chunked-prefill=512").apply(base).deployment
    assert tried.engine.enable_chunked_prefill and tried.max_num_batched_tokens == 512
    res = runner.invoke(app, ["compare", "--engine", "trtllm", "--try", "chunked-prefill=512", "--input-len", "1024",
                              "--output-len", "64"])
    assert res.exit_code == 0, res.output


def test_a_speculative_try_on_sglang_keeps_its_static_throughput():
    """SGLang's scheduler policy builds no speculative decodes in the simulator: a spec= row of a simulated ledger
    takes its static-batch figure and says so (the whole command failed with '--scheduler' advice compare has no
    flag for)."""
    res = runner.invoke(app, ["compare", "--engine", "sglang", "--try", "spec=eagle,k=3,accepted=2.5",
                              "--input-len", "512", "--output-len", "64"])
    assert res.exit_code == 0, res.output
    assert "the static-batch figure instead" in res.output


def test_cuda_graphs_off_try_floors_decode_at_its_launches():
    from flopwise.cost.step import decode_step_time
    base = Scenario(deployment=deployment("llama-3.1-8b", "h100-sxm", engine="vllm@0.11"))
    eager = parse_try("cuda-graphs=off").apply(base).deployment
    k = eager.engine.kernels
    assert base.deployment.engine.kernels.cuda_graphs and not k.cuda_graphs
    assert "(eager)" in eager.engine.name
    # a batch-1 decode step: at least every modelled kernel's eager launch (eager_launch_s each), where with graphs
    # the same step is a few ms of weight reads
    graphs_s, eager_s = decode_step_time(base.deployment, 1, 1024), decode_step_time(eager, 1, 1024)
    assert eager_s > 2 * graphs_s
    with pytest.raises(FlopwiseError, match=r"^--try 'cuda-graphs=off': .*no eager"):
        parse_try("cuda-graphs=off").apply(Scenario(deployment=deployment("llama-3.1-8b", "rtx-4090",
                                                                           engine="llamacpp")))


@pytest.mark.parametrize("text", ["weights=int9", "foo=1", "spec=draft,k=4,alpha=0.7", "spec=eagle,k=4", "tp=x",
                                  "", "weights=int8+", "prefix-cache=1.5", "spec=ngram,k=4,alpha=0.5,q=1",
                                  "attention=linear", "gpu=tpu9", "cuda-graphs=on", "tp=2+tp=4",
                                  "weights=int8+kv=fp8+WEIGHTS=fp8"])
def test_bad_try_strings_are_one_clear_error(text):
    with pytest.raises(FlopwiseError, match=r"^cannot read --try '.*': .*Write e\.g\. 'weights=int8'") as e:
        parse_try(text)
    assert "\n" not in str(e.value)


def test_ledger_verdicts():
    assert Change("tpot_ms", 8.0, 10.0).verdict == "better"
    assert Change("output_tokens_per_s_at_sla", 8.0, 10.0).verdict == "worse"
    assert Change("ttft_ms", 10.02, 10.0).verdict == "same"           # within 0.5%
    base = Scenario(deployment=deployment("llama-3.1-8b", "a100-sxm-80gb"), input_len=1024, output_len=128)
    led = compare(base, ["weights=int8", "prefix-cache=0.5", "spec=ngram,k=4,alpha=0.6"], SLA)
    rows = {r.label: r.changes(led.baseline.metrics) for r in led.rows}
    assert rows["weights=int8"]["tpot_ms"].verdict == "better"
    assert rows["weights=int8"]["memory_gib"].verdict == "better"
    assert rows["weights=int8"]["flops_per_output_token"].verdict == "same"
    assert rows["prefix-cache=0.5"]["flops_per_output_token"].verdict == "better"
    assert rows["prefix-cache=0.5"]["ttft_ms"].verdict == "better"
    spec = rows["spec=ngram,k=4,alpha=0.6"]
    assert spec["flops_per_output_token"].verdict == "worse" and spec["tpot_ms"].verdict == "better"


def test_without_try_compare_weighs_the_techniques_that_apply():
    def defaults(model, gpu="h100-sxm", **kw):
        return default_tries(Scenario(deployment=deployment(model, gpu, **kw), input_len=1024, output_len=128))

    spec = "spec=eagle,k=4,alpha=0.7"
    assert defaults("llama-3.1-8b") == ("weights=fp8", "kv=fp8", spec, "prefix-cache=0.5")
    assert defaults("llama-3.1-8b", "a100-sxm-80gb")[0] == "weights=int4-awq"  # no FP8 math: 4-bit AWQ instead
    assert defaults("llama-3.1-8b", kv="fp8") == ("weights=fp8", spec, "prefix-cache=0.5")
    assert defaults("gpt-oss-120b") == ("kv=fp8", spec, "prefix-cache=0.5")  # MXFP4 experts: nothing narrower
    assert defaults("llama-3.1-8b", "rtx-4090", engine="llamacpp", weights="q8_0") == ("weights=q4_k_m",
                                                                                         "prefix-cache=0.5")
    # a default this engine cannot run is left out with its reason; named with --try, it is an error
    base = Scenario(deployment=deployment("llama-3.1-8b", "h100-sxm", engine="sglang@0.3.0"), input_len=1024,
                    output_len=128)
    led = compare(base, None, SLA)
    assert [r.label for r in led.rows] == ["weights=fp8", "kv=fp8", "prefix-cache=0.5"]
    assert led.skipped == (f"{spec}: SGLang 0.3.0 does not serve 'eagle' speculative decoding (it serves none): "
                           "drop --speculative, or pick another method, release or engine",)
    with pytest.raises(FlopwiseError, match="SGLang 0.3.0 does not serve 'eagle'"):
        compare(base, [spec], SLA)
    res = runner.invoke(app, ["compare", "--model", "llama-3.1-8b", "--engine", "sglang@0.3.0", "--static", "--json"])
    assert res.exit_code == 0, res.output
    d = json.loads(res.output)
    assert [r["technique"] for r in d["rows"]] == ["weights=fp8", "kv=fp8", "prefix-cache=0.5"]
    assert len(d["skipped"]) == 1 and d["skipped"][0].startswith(spec)


def test_compare_json_keys():
    res = runner.invoke(app, ["compare", "--model", "llama-3.1-8b", "--gpu", "a100-sxm-80gb", "--static",
                              "--try", "weights=int8", "--try", "spec=draft:llama-3.2-1b,k=4,alpha=0.7",
                              "--try", "kv=fp8+prefix-cache=0.5", "--json"])
    assert res.exit_code == 0, res.output
    d = json.loads(res.output)
    assert {"model", "gpu", "workload", "sla", "throughput_methods", "baseline", "rows"} <= set(d)
    assert set(METRICS) <= set(d["baseline"])
    assert [r["technique"] for r in d["rows"]] == ["weights=int8", "spec=draft:meta-llama/Llama-3.2-1B,k=4,alpha=0.7",
                                                   "kv=fp8 + prefix-cache=0.5"]
    for r in d["rows"]:
        assert set(r["metrics"]) == set(METRICS)
        for m in r["metrics"].values():
            assert set(m) == {"value", "baseline", "delta", "delta_pct", "change"}
            assert m["change"] in ("better", "worse", "same")
        assert {"level", "note", "source", "change"} == set(r["accuracy_risk"]) == set(r["complexity"])
    assert d["rows"][1]["notes"] and "best k" in d["rows"][1]["notes"][0]


def test_compare_table_and_explain_json():
    res = runner.invoke(app, ["compare", "--static", "--try", "tp=2", "--input-len", "256", "--output-len", "32"])
    assert res.exit_code == 0, res.output
    assert "Trade-off ledger" in res.output and "tp=2" in res.output and "SLA (" not in res.output
    # a row that misses the SLA even one request at a time is named, not left as a bare 0 (TTFT at 1024 tokens:
    # ~34 ms on one H100, ~25 ms over two); when every row misses, the note says to loosen the SLA
    res = runner.invoke(app, ["compare", "--static", "--try", "tp=2", "--sla", "p95_ttft<=30ms"])
    assert res.exit_code == 0 and "baseline misses the SLA (p95_ttft<=30ms) even one request at a time" in res.output
    res = runner.invoke(app, ["compare", "--static", "--try", "tp=2", "--sla", "p95_ttft<=1ms"])
    assert res.exit_code == 0 and "no row meets the SLA (p95_ttft<=1ms)" in res.output and "loosen" in res.output
    res = runner.invoke(app, ["explain", "--model", "llama-2-7b", "--gpu", "a100-sxm-80gb", "--draft", "vicuna-68m",
                              "--json"])
    assert res.exit_code == 0, res.output
    d = json.loads(res.output)
    keys = [s["key"] for s in d["sections"]]
    assert keys == ["roofline", "gap", "batching", "speculative", "quantization", "prefix_cache", "kv_structure",
                    "chunked_prefill"]
    spec = d["sections"][3]["numbers"]
    assert spec["round_flops"] > spec["plain_flops_k_tokens"] and spec["tpot_ms"] < spec["baseline_tpot_ms"]
    layer = d["sections"][4]["numbers"]
    assert layer["layer_weight_bytes_int8"] * 2 == layer["layer_weight_bytes"]


def test_cli_bad_try_is_one_line_and_exit_2(monkeypatch, capsys):
    monkeypatch.setattr(sys, "argv", ["flopwise", "compare", "--static", "--try", "spec=eagle,k=four,alpha=0.5"])
    with pytest.raises(SystemExit) as e:
        main()
    assert e.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: cannot read --try 'spec=eagle,k=four,alpha=0.5': k needs a whole number")
    assert "\n" not in err


def test_a_try_keeps_the_layout_and_a_wider_replica_spans_servers():
    # a try rebuilds the deployment: data-parallel attention and expert parallelism carry over (they were dropped)
    moe = deployment("deepseek-v3", "h200", tp=1, dp=8, ep=8)
    kv = parse_try("kv=fp8").apply(Scenario(deployment=moe))
    assert (kv.deployment.dp, kv.deployment.ep, kv.deployment.kv.name) == (8, 8, "fp8")
    # tp=16 on H100 SXM needs two 8-GPU servers: priced with its all-reduces over the NIC, slower per token
    base = Scenario(deployment=deployment("llama-3.1-70b", "h100-sxm", tp=8))
    wide = parse_try("tp=16").apply(base).deployment
    assert (wide.tp, wide.nodes, wide.spans_nodes) == (16, 2, True)
    led = compare(base, ["tp=16"], parse_sla("p95_ttft<=2000ms,p95_tpot<=50ms"))
    assert led.rows[0].metrics.tpot_ms > led.baseline.metrics.tpot_ms
    # back to tp=8 from a 2-server baseline: one server again; two-batch overlap carries over
    narrow = parse_try("tp=8").apply(Scenario(deployment=wide)).deployment
    assert (narrow.tp, narrow.nodes) == (8, 1)
    tbo = deployment("deepseek-v3", "h200", tp=1, dp=8, ep=8, two_batch_overlap=True)
    assert parse_try("kv=fp8").apply(Scenario(deployment=tbo)).deployment.two_batch_overlap
    # a GPU without bf16 runs the baseline's bf16 as fp16, as the planner does (the try was refused)
    t4 = parse_try("gpu=t4").apply(Scenario(deployment=deployment("qwen3-0.6b", "h100-sxm"))).deployment
    assert (t4.weights.name, t4.kv.name) == ("fp16", "fp16")


def test_compare_takes_the_named_workloads_sla_as_plan_does():
    import flopwise
    from flopwise.specs.defaults import COMPARE_SLA, workload_defaults

    def sla(**kw):
        return flopwise.compare(["kv=fp8"], "llama-3.1-8b", "a100-sxm-80gb", simulate=False, **kw).to_dict()["sla"]

    assert sla(workload="chat") == workload_defaults("chat").sla == "p95_ttft<=300ms,p95_tpot<=50ms"
    assert sla(workload="batch") == "none"
    assert sla() == str(parse_sla(COMPARE_SLA))
    assert sla(workload="chat", sla="p99_ttft<=1s") == "p99_ttft<=1000ms"


@pytest.mark.parametrize("tries, tp, says", [
    (["gpu=h100-sxm"], 1, "'gpu=h100-sxm': changes nothing here"),
    (["weights=bf16"], 1, "'weights=bf16': changes nothing here"),
    (["tp=2"], 2, "'tp=2': changes nothing here"),
    (["kv=fp8", "kv=fp8"], 1, "'kv=fp8': the same deployment as --try 'kv=fp8'"),
])
def test_a_try_that_adds_no_row_of_its_own_is_refused(tries, tp, says):
    from flopwise.techniques.scenario import Scenario

    base = Scenario(deployment=deployment("llama-3.1-8b", "h100-sxm", tp=tp), input_len=1024, output_len=256)
    with pytest.raises(FlopwiseError, match=says):
        compare(base, tries, SLA)
    assert len(compare(base, ["kv=fp8"], SLA).rows) == 1  # a real change stays a row
