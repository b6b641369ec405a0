"""The Python API (issue 17): each function reproduces its CLI command's --json, results are typed and frozen,
tables go to pandas, wrong argument types are one-line `FlopwiseError`s, help() documents units, and the
README's Python snippets run."""

from __future__ import annotations

import contextlib
import dataclasses
import io
import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import flopwise
from flopwise.cli import run
from flopwise.errors import ArgumentError, FlopwiseError

ROOT = Path(__file__).resolve().parents[1]
# wall-clock keys differ between two runs of the same thing
CLOCKS = {"sim_wall_s", "wall_s"}


def cli_json(argv: list[str]) -> dict:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = run([*argv, "--json"])
    assert code == 0, err.getvalue()
    return json.loads(out.getvalue())


def without_clocks(obj):
    if isinstance(obj, dict):
        return {k: without_clocks(v) for k, v in obj.items() if k not in CLOCKS}
    if isinstance(obj, list):
        return [without_clocks(v) for v in obj]
    return obj


def same(api_dict: dict, cli: dict) -> None:
    assert without_clocks(json.loads(json.dumps(api_dict, default=str))) == without_clocks(cli)


def test_estimate_matches_the_cli():
    r = flopwise.estimate("llama-3.1-8b", "a100-sxm-80gb", batch=8, input_len=512, output_len=64, tp=2, kv="fp8")
    same(r.to_dict(), cli_json(["estimate", "--model", "llama-3.1-8b", "--gpu", "a100-sxm-80gb", "--batch", "8",
                                "--input-len", "512", "--output-len", "64", "--tp", "2", "--kv", "fp8"]))
    with pytest.raises(dataclasses.FrozenInstanceError):
        r.ttft_ms = 0.0  # type: ignore[misc]


def test_simulate_matches_the_cli_and_its_rows_round_trip_through_pandas(tmp_path):
    kw = dict(request_rate=8, num_requests=40, workload="chat", sla="p95_ttft<=300ms,p95_tpot<=50ms", seed=3)
    s = flopwise.simulate("llama-3.2-1b", "l4", **kw, output=tmp_path / "rows.csv")
    same(s.to_dict(), cli_json(["simulate", "--model", "llama-3.2-1b", "--gpu", "l4", "--request-rate", "8",
                                "--num-requests", "40", "--workload", "chat", "--sla",
                                "p95_ttft<=300ms,p95_tpot<=50ms", "--seed", "3"]))
    assert s.num_requests == 40 and s.ttft_ms.p95 == s.to_dict()["ttft_ms"]["p95"]
    assert s.request_throughput > 0 and isinstance(s.sla_met, bool)
    pd = pytest.importorskip("pandas")
    df = s.to_pandas()
    assert len(df) == 40 and list(df.columns) == list(s.rows[0])
    back = df.astype(object).where(df.notna(), None).to_dict("records")
    assert back == [dict(r) for r in s.rows]
    on_disk = pd.read_csv(tmp_path / "rows.csv")
    assert on_disk["ttft_ms"].tolist() == pytest.approx(df["ttft_ms"].tolist())
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.summary = {}  # type: ignore[misc]
    with pytest.raises(TypeError):
        s.summary["ttft_ms"] = None  # type: ignore[index]


def test_find_max_rate_matches_the_cli():
    kw = ["--model", "llama-3.2-1b", "--gpu", "l4", "--num-requests", "30", "--input-len", "256", "--output-len", "32",
          "--sla", "p95_ttft<=500ms", "--find-max-rate"]
    s = flopwise.simulate("llama-3.2-1b", "l4", num_requests=30, input_len=256, output_len=32, sla="p95_ttft<=500ms",
                          find_max_rate=True)
    same(s.to_dict(), cli_json(["simulate", *kw]))
    assert s.max_rate is not None and s.max_rate > 0
    # both goodputs are the sustained rate times the measured window's attainment, as both attainments are
    d = flopwise.simulate("llama-3.1-8b", "h100-sxm", weights="fp8", kv="fp8", workload="chat",
                          sla="p95_ttft<=300ms,p95_tpot<=50ms", find_max_rate=True).to_dict()
    window = d["max_rate"]["window_summary"]
    for good, share in (("goodput", "sla_attainment"), ("goodput_vllm", "sla_attainment_vllm")):
        assert 0 < d[share] < 1 and d[share] == window[share]
        assert d[good] == pytest.approx(d["max_rate"]["request_rate"] * d[share], rel=1e-12)


def test_compare_and_explain_match_the_cli():
    ledger = flopwise.compare(["kv=fp8", "weights=int8+kv=fp8"], "llama-3.1-8b", "h100-sxm", simulate=False)
    same(ledger.to_dict(), cli_json(["compare", "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--try", "kv=fp8",
                                     "--try", "weights=int8+kv=fp8", "--static"]))
    pytest.importorskip("pandas")
    table = ledger.to_pandas()
    assert table["technique"].tolist() == ["baseline", "kv=fp8", "weights=int8 + kv=fp8"]
    ex = flopwise.explain("qwen3-8b", "h200", batch=4, k=3, alpha=0.6)
    same(ex.to_dict(), cli_json(["explain", "--model", "qwen3-8b", "--gpu", "h200", "--batch", "4", "--k", "3",
                                 "--alpha", "0.6"]))


def test_plan_matches_the_cli_and_has_figures(tmp_path):
    args = dict(gpus="h100-sxm", tp="1", weights="fp8", kv="fp8", num_requests=40, workload="chat")
    p = flopwise.plan("llama-3.1-8b", **args, html=tmp_path / "plan.html")
    cli = cli_json(["plan", "--model", "llama-3.1-8b", "--gpus", "h100-sxm", "--tp", "1", "--weights", "fp8", "--kv",
                    "fp8", "--num-requests", "40", "--workload", "chat", "--html", str(tmp_path / "cli.html")])
    d = p.to_dict()
    assert d.pop("html").endswith("plan.html") and cli.pop("html").endswith("cli.html")
    same(d, cli)
    assert set(p.figures()) == {"pareto", "roofline", "memory", "latency"}
    pytest.importorskip("pandas")
    assert len(p.to_pandas()) == len(d["ranked"]) and "goodput_per_gpu" in p.to_pandas().columns


def test_plan_with_enforce_eager_prices_and_launches_without_cuda_graphs():
    args = dict(gpus="h100-sxm", tp="1", weights="fp8", kv="fp8", num_requests=40, workload="chat")
    graphs = flopwise.plan("llama-3.1-8b", **args).summary
    eager = flopwise.plan("llama-3.1-8b", **args, enforce_eager=True).summary
    assert "--enforce-eager" in eager["launch"]["vllm"] and "--enforce-eager" not in graphs["launch"]["vllm"]
    assert "--disable-cuda-graph" in eager["launch"]["sglang"]
    # eager decode pays every kernel's launch: the same deployment sustains less goodput per GPU
    assert eager["ranked"][0]["goodput_per_gpu"] < graphs["ranked"][0]["goodput_per_gpu"]
    assert eager["ranked"][0]["engine"] == eager["launch"]["engine"] and eager["launch"]["engine"].endswith("(eager)")
    with pytest.raises(FlopwiseError, match="no eager"):
        flopwise.plan("llama-3.1-8b", **args, engine="llamacpp", enforce_eager=True)
    cli = cli_json(["plan", "--model", "llama-3.1-8b", "--gpus", "h100-sxm", "--tp", "1", "--weights", "fp8", "--kv",
                    "fp8", "--num-requests", "40", "--workload", "chat", "--enforce-eager"])
    same(eager, cli)


def test_plan_engine_switches_price_and_launch():
    """--pdl and --moe-backend trtllm on TensorRT-LLM: every candidate is priced with them (less fixed cost per
    kernel, so more goodput per GPU) and the launch command sets them; an engine without the switch is refused
    before the search."""
    args = dict(gpus="b200", tp="1", weights="fp8", kv="fp8", num_requests=40, workload="chat", engine="trtllm")
    base = flopwise.plan("qwen3-30b-a3b", **args).summary
    fast = flopwise.plan("qwen3-30b-a3b", **args, pdl=True, moe_backend="trtllm").summary
    sync = flopwise.plan("qwen3-30b-a3b", **args, pdl=True, moe_backend="trtllm", async_scheduling=False).summary
    assert fast["launch"]["trtllm"].startswith("TRTLLM_ENABLE_PDL=1 trtllm-serve")
    assert not base["launch"]["trtllm"].startswith("TRTLLM_ENABLE_PDL")
    assert "backend: TRTLLM" in fast["launch"]["trtllm_extra_llm_api_options"]
    assert "disable_overlap_scheduler: true" in sync["launch"]["trtllm_extra_llm_api_options"]
    assert "disable_overlap_scheduler" not in fast["launch"]["trtllm_extra_llm_api_options"]
    assert "--moe-runner-backend flashinfer_trtllm" in fast["launch"]["sglang"]
    goodput = [p["ranked"][0]["goodput_per_gpu"] for p in (base, fast, sync)]
    assert goodput[1] > goodput[0] and goodput[2] < goodput[1]  # host work no longer hidden behind the device
    cli = cli_json(["plan", "--model", "qwen3-30b-a3b", "--gpus", "b200", "--tp", "1", "--weights", "fp8", "--kv",
                    "fp8", "--num-requests", "40", "--workload", "chat", "--engine", "trtllm", "--pdl",
                    "--moe-backend", "trtllm", "--no-async-scheduling"])
    same(sync, cli)
    with pytest.raises(FlopwiseError, match="no such switch"):
        flopwise.plan("llama-3.1-8b", pdl=True)
    with pytest.raises(FlopwiseError, match="moe_backend must be auto or trtllm"):
        flopwise.plan("llama-3.1-8b", moe_backend="cutlass")
    with pytest.raises(FlopwiseError, match="picks its own MoE kernels"):  # vLLM: priced only where launched
        flopwise.plan("qwen3-30b-a3b", moe_backend="trtllm")
    with pytest.raises(FlopwiseError, match="MoE kernels run fp8"):  # a BF16 expert format is not tried
        flopwise.plan("qwen3-30b-a3b", **{**args, "weights": "bf16"}, moe_backend="trtllm")
    with pytest.raises(FlopwiseError, match="datacenter Blackwell"):  # the fleet's GPU, named before the search
        flopwise.plan("qwen3-30b-a3b", **{**args, "gpus": "h100-sxm,b200"}, moe_backend="trtllm",
                      serving="aggregated,disaggregated")


def test_plan_names_bad_values_before_searching():
    for kw, text in ((dict(gpus=""), "--gpus"), (dict(tp="3", gpus="h100-sxm"), None), (dict(weights="foo"), "foo"),
                     (dict(gpus="h100-sxm,nope"), "nope"), (dict(rate=math.inf), "--rate"),
                     (dict(num_requests=5), "--num-requests")):
        try:
            flopwise.plan("llama-3.1-8b", **{"num_requests": 40, **kw})
        except FlopwiseError as e:
            assert text is None or text in str(e), (kw, e)
            assert "fits nowhere in the search space: ." not in str(e)


def test_bench_matches_the_cli_and_has_records(tmp_path):
    from flopwise.bench.mock_server import MockConfig, mock_server_thread

    with mock_server_thread(MockConfig(ttft_ms=5.0, itl_ms=1.0)) as url:
        r = flopwise.bench(url, "mock", concurrency=2, num_requests=6, input_len=16, output_len=4, out=tmp_path / "a",
                           scrape=False, timeout=5.0)
        cli = cli_json(["bench", "--url", url, "--model", "mock", "--concurrency", "2", "--num-requests", "6",
                        "--input-len", "16", "--output-len", "4", "--out", str(tmp_path / "b"), "--no-scrape",
                        "--timeout", "5"])
        levels = flopwise.bench(url, "mock", concurrency=[1, 2], num_requests=4, input_len=16, output_len=4,
                                out=tmp_path / "c", scrape=False, timeout=5.0)
    d = r.to_dict()
    assert set(d) == set(cli) and d["num_requests"] == cli["num_requests"] == 6
    assert d["label"] == cli["label"] == "concurrency-2"
    assert [lv["label"] for lv in levels.to_dict()["levels"]] == ["concurrency-1", "concurrency-2"]
    pytest.importorskip("pandas")
    assert len(r.to_pandas()) == 6 and set(levels.to_pandas()["level"]) == {"concurrency-1", "concurrency-2"}


def test_bench_async_in_a_running_loop(tmp_path):
    import asyncio

    from flopwise.bench.mock_server import MockConfig, mock_server_thread

    async def main(url: str) -> flopwise.BenchRun:
        return await flopwise.bench_async(url, "mock", concurrency=2, num_requests=4, input_len=8, output_len=2,
                                          out=tmp_path / "run", scrape=False, timeout=5.0)

    with mock_server_thread(MockConfig(ttft_ms=5.0, itl_ms=1.0)) as url:
        r = asyncio.run(main(url))
    assert r.to_dict()["num_completed"] == 4


def test_calibrate_matches_the_cli(tmp_path):
    from flopwise.calibrate.observations import with_profile
    from test_calibrate_bench import HW, MODEL, _write_run

    dep = flopwise.deployment(MODEL, HW, max_num_seqs=256, max_num_batched_tokens=2048)
    true = with_profile(dep, dataclasses.replace(dep.hardware.efficiency, compute_max=0.3, bandwidth_max=0.45))
    for i, (c, n_in, n) in enumerate(((1, 1024, 4), (1, 32, 4), (16, 1024, 16))):
        _write_run(tmp_path / "runs" / f"{i}", true, c, n_in, n)
    kw = dict(from_runs=[tmp_path / "runs"], model=MODEL, params="compute_max,bandwidth_max",
              max_num_batched_tokens=2048, max_num_seqs=256, dry_run=True)
    c = flopwise.calibrate(HW, **kw)
    cli = cli_json(["calibrate", "--hardware", HW, "--from", str(tmp_path / "runs"), "--model", MODEL, "--params",
                    "compute_max,bandwidth_max", "--max-num-batched-tokens", "2048", "--max-num-seqs", "256",
                    "--dry-run"])
    same(c.to_dict(), cli)
    assert c.to_dict()["fitted"]["compute_max"]["after"] == pytest.approx(0.3, rel=0.05)
    pytest.importorskip("pandas")
    assert len(c.to_pandas()) == len(c.to_dict()["errors"])


@pytest.mark.parametrize("call,text", [
    (lambda: flopwise.estimate(tp=None), "tp must be an integer, got None"),
    (lambda: flopwise.estimate(model=None), "model must be a string or ModelSpec"),
    (lambda: flopwise.estimate(weights=123), "weights must be a string or None, got 123"),
    (lambda: flopwise.estimate(batch=2.5), "batch must be an integer"),
    (lambda: flopwise.estimate(tpp=2), "unexpected keyword argument 'tpp'. Did you mean: tp"),
    (lambda: flopwise.simulate(num_requests="10"), "num_requests must be an integer or None"),
    (lambda: flopwise.simulate(request_rate=[1]), "request_rate must be"),
    (lambda: flopwise.compare(5), "tries must be a string or a list of a string"),
    (lambda: flopwise.plan(gpus=3), "gpus must be"),
    (lambda: flopwise.bench(url=5), "url must be a string or None"),
    (lambda: flopwise.calibrate(None), "hardware must be a string"),
])
def test_wrong_argument_types_are_one_line_errors(call, text):
    with pytest.raises(ArgumentError) as e:
        call()
    assert text in str(e.value) and "\n" not in str(e.value)
    assert isinstance(e.value, FlopwiseError) and isinstance(e.value, TypeError)


@pytest.mark.parametrize("call,text", [
    (lambda: flopwise.simulate(num_requests=0), "--num-requests"),
    (lambda: flopwise.simulate(num_requests=10**9), "--num-requests"),
    (lambda: flopwise.simulate(max_num_seqs=0, num_requests=5), "max_num_seqs"),
    (lambda: flopwise.compare("kv=fp8", input_len=0, simulate=False), "input_len"),
    (lambda: flopwise.estimate(gpu_memory_utilization=math.nan), "gpu_memory_utilization"),
    (lambda: flopwise.simulate(output="/nonexistent/rows.csv", num_requests=5), "does not exist"),
    (lambda: flopwise.bench("ftp://127.0.0.1:1", "m"), "http://"),
    (lambda: flopwise.bench("http://127.0.0.1:1", "m", concurrency=2.5), "concurrency must be"),
    (lambda: flopwise.bench("http://127.0.0.1:1", "m", timeout=0), "--timeout"),
])
def test_bad_values_are_refused_before_the_work(call, text):
    with pytest.raises(FlopwiseError) as e:
        call()
    assert text in str(e.value)


def test_help_lists_parameters_with_units():
    for fn in (flopwise.estimate, flopwise.simulate, flopwise.compare, flopwise.explain, flopwise.plan, flopwise.bench,
               flopwise.calibrate):
        doc = fn.__doc__ or ""
        assert "Parameters:" in doc, fn.__name__
        listed = re.findall(r"^    (\w+): ", doc.split("Parameters:")[1], re.M)
        assert len(listed) >= 5, fn.__name__
    assert "requests/s" in flopwise.simulate.__doc__.lower() and "ms" in flopwise.simulate.__doc__
    assert "tokens" in flopwise.estimate.__doc__ and "seconds" in flopwise.bench.__doc__
    assert "Parameters:" in flopwise.bench_async.__doc__ or "same parameters" in flopwise.bench_async.__doc__


def test_top_level_names():
    assert set(flopwise.__all__) >= {"estimate", "simulate", "compare", "explain", "plan", "bench", "bench_async",
                                     "calibrate", "FlopwiseError"}
    for name in flopwise.__all__:
        assert getattr(flopwise, name) is not None
    import flopwise.estimate as _module  # noqa: F401  (binding the submodule keeps the function)

    assert callable(flopwise.estimate) and flopwise.estimate.__module__ == "flopwise.api"


def test_jupyter_display_renders_the_cli_tables():
    r = flopwise.estimate("llama-3.2-1b", "l4")
    html = r._repr_html_()
    assert html.lstrip().startswith("<pre") and "TTFT" in html
    s = flopwise.simulate("llama-3.2-1b", "l4", num_requests=10, input_len=64, output_len=4)
    assert "ttft" in s._repr_html_()


def _snippets() -> list[str]:
    """The README's Python examples (the ```python blocks that use flopwise; the architecture section's blocks are
    fragments of the source)."""
    text = (ROOT / "README.md").read_text()
    return [s for s in re.findall(r"```python\n(.*?)```", text, re.S) if "import flopwise" in s]


def test_readme_has_python_snippets():
    assert len(_snippets()) >= 3


@pytest.mark.parametrize("index", range(len(_snippets())))
def test_readme_python_snippet_runs(index, tmp_path):
    code = _snippets()[index]
    path = os.pathsep.join(p for p in (str(ROOT / "src"), os.environ.get("PYTHONPATH")) if p)  # keep the caller's
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=900,
                          env={**os.environ, "PYTHONPATH": path})
    assert proc.returncode == 0, proc.stderr[-3000:]


def test_numpy_scalars_are_the_numbers_they_stand_for():
    """A numpy int or float passes the entry check as a number and reaches the layers below, and the result's
    to_dict(), as a Python int / float: the same figures as plain numbers, and valid JSON."""
    plain = flopwise.simulate("llama-3.1-8b", "h100-sxm", request_rate=4, num_requests=20, tp=2, num_gpus=2)
    numpy = flopwise.simulate("llama-3.1-8b", "h100-sxm", request_rate=np.float32(4), num_requests=np.int64(20),
                              tp=np.int64(2), num_gpus=np.int64(2))
    assert numpy.to_dict()["ttft_ms"] == plain.to_dict()["ttft_ms"]
    est = flopwise.estimate("llama-3.1-8b", "h100-sxm", batch=np.int64(8), input_len=np.int64(512))
    assert json.loads(json.dumps(est.to_dict()))["batch"] == 8
    assert json.dumps(flopwise.explain("llama-3.1-8b", "h100-sxm", batch=np.int64(8)).to_dict())


def test_attention_backend_prices_and_launches_through_every_entry_point():
    """--attention-backend / attention_backend=: SGLang 0.4.6 on an H200 runs Llama-3.1-8B on FA3 by default; told
    FlashInfer it decodes the group of 4 on the CUDA cores, so the estimate's decode is slower and says so, the
    CLI gives the API's numbers, `plan` prices every candidate with it and its launch command sets it; an unknown
    name or an engine without the switch is one line before any work."""
    args = dict(gpu="h200", engine="sglang@0.4.6", batch=64, input_len=4000, output_len=500)
    default = flopwise.estimate("llama-3.1-8b", **args)
    told = flopwise.estimate("llama-3.1-8b", **args, attention_backend="flashinfer")
    assert told.tpot_ms > default.tpot_ms
    assert any("(flashinfer, as told)" in n for n in told.to_dict()["notes"])
    same(told.to_dict(), cli_json(["estimate", "--model", "llama-3.1-8b", "--gpu", "h200", "--engine", "sglang@0.4.6",
                                   "--batch", "64", "--input-len", "4000", "--output-len", "500",
                                   "--attention-backend", "flashinfer"]))
    assert flopwise.deployment("llama-3.1-8b", "h200", engine="sglang@0.4.6",
                               attention_backend="FlashInfer").engine.kernels.attention_backend == "flashinfer"
    sim = flopwise.simulate("llama-3.1-8b", "h200", engine="sglang@0.4.6", attention_backend="flashinfer",
                            num_requests=20, request_rate=2.0)
    assert sim.to_dict()["setup"]["attention_backend"] == "flashinfer"
    plan = flopwise.plan("llama-3.1-8b", gpus="h200", tp="1", weights="bf16", kv="bf16", num_requests=40,
                         workload="chat", engine="sglang@0.4.6", attention_backend="flashinfer").summary
    assert "--attention-backend flashinfer" in plan["launch"]["sglang"]
    with pytest.raises(FlopwiseError, match="no attention backend 'flashinfr'. Did you mean: flashinfer"):
        flopwise.estimate("llama-3.1-8b", **args, attention_backend="flashinfr")
    with pytest.raises(FlopwiseError, match="no attention-backend switch"):
        flopwise.plan("llama-3.1-8b", engine="trtllm", attention_backend="flashinfer")
    with pytest.raises(FlopwiseError, match="the flashinfer attention backend runs on NVIDIA GPUs only"):
        flopwise.estimate("llama-3.1-8b", gpu="mi300x", engine="sglang", attention_backend="flashinfer")
    with pytest.raises(FlopwiseError, match="the aiter attention backend runs on AMD GPUs only"):
        flopwise.estimate("llama-3.1-8b", gpu="h100-sxm", engine="sglang", attention_backend="aiter")
    assert flopwise.estimate("llama-3.1-8b", gpu="mi300x", engine="sglang", attention_backend="aiter").tpot_ms > 0
    mixed = flopwise.plan("llama-3.1-8b", gpus="h100-sxm,mi300x", tp="1", weights="bf16", kv="bf16",
                          num_requests=40, workload="chat", engine="sglang@0.4.6", attention_backend="flashinfer")
    assert [r["gpu"] for r in mixed.summary["ranked"]] == ["h100-sxm"]  # the MI300X is skipped, with that reason
    assert any("runs on NVIDIA GPUs only" in why for why in mixed.summary["not_fitting"])
