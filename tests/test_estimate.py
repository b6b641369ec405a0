"""Static-batch estimate, hardware catalog and user files, and the CLI contract."""

import json
from dataclasses import replace

import pytest
from typer.testing import CliRunner

import flopwise
from flopwise.cli import app
from flopwise.cost import decode_shape, prefill_shape, step_time
from flopwise.cost.layout import layout
from flopwise.errors import DoesNotFitError, SpecError, UnknownHardwareError, WorkloadError, suggest
from flopwise.plan.space import default_tps
from flopwise.specs.hardware import get_hardware, hardware_catalog, load_hardware_file

runner = CliRunner()

REQUIRED_GPUS = ["a100-sxm-40gb", "a100-sxm-80gb", "a100-pcie-80gb", "h100-sxm", "h100-pcie", "h100-nvl", "h200",
                 "h20", "b200", "l4", "l40s", "a10g", "rtx-3090", "rtx-4090", "rtx-5090", "rtx-a6000",
                 "rtx-6000-ada", "mi250x", "mi300x", "mi325x", "apple-m1-max", "apple-m2-ultra", "apple-m3-max",
                 "jetson-agx-orin"]


def test_estimate_is_built_on_the_step_function():
    r = flopwise.estimate("llama-3.1-8b", "h100-sxm", batch=4, input_len=512, output_len=9)
    dep = r.deployment
    w = layout(dep).windows
    assert r.ttft_ms == pytest.approx(step_time(dep, prefill_shape(4, 512, w)) * 1e3)
    decode = [step_time(dep, decode_shape(4, 512 + j, w)) for j in range(8)]  # 8 decode steps, exact
    assert r.tpot_ms == pytest.approx(sum(decode) / 8 * 1e3)
    assert r.e2e_ms == pytest.approx(r.ttft_ms + 8 * r.tpot_ms)
    assert r.output_tokens_per_s == pytest.approx(4 * 9 / (r.e2e_ms / 1e3))
    assert r.decode_tokens_per_s_per_user == pytest.approx(1e3 / r.tpot_ms)


def test_long_output_mean_is_close_to_exact():
    r = flopwise.estimate("llama-3.1-8b", "h100-sxm", batch=8, input_len=100, output_len=400)
    dep = r.deployment
    w = layout(dep).windows
    exact = sum(step_time(dep, decode_shape(8, 100 + j, w)) for j in range(399)) / 399
    assert r.tpot_ms == pytest.approx(exact * 1e3, rel=1e-3)


def test_prefill_compute_bound_decode_memory_bound():
    r = flopwise.estimate("llama-3.1-8b", "h100-sxm", batch=1, input_len=2048, output_len=64)
    assert r.prefill.step.bound == "compute"
    assert r.decode.step.bound == "memory"


def test_replicas_multiply_throughput():
    one = flopwise.estimate("llama-3.1-8b", "h100-sxm", batch=8)
    four = flopwise.estimate("llama-3.1-8b", "h100-sxm", batch=8, num_gpus=4)
    assert four.output_tokens_per_s == pytest.approx(4 * one.output_tokens_per_s)
    assert four.output_tokens_per_s_per_gpu == pytest.approx(one.output_tokens_per_s)


def test_does_not_fit_says_what_would():
    with pytest.raises(DoesNotFitError, match=r"needs .* GiB.*Try --tp 2"):
        flopwise.estimate("llama-3.1-70b", "h100-sxm")
    with pytest.raises(DoesNotFitError, match="--weights"):
        flopwise.estimate("llama-3.1-70b", "h100-sxm", tp=1)


def test_a_suggestion_wider_than_one_server_spans_servers():
    """DeepSeek-V3 in FP8 needs 16 H100s: the suggestion is TP 16, priced over the 2 servers it fills (it raised
    on the one-server check, and `plan --max-gpus 8` with it), and the plan goes on to a narrower format."""
    with pytest.raises(DoesNotFitError, match=r"Try --tp 16 or --weights int4-awq"):
        flopwise.estimate("deepseek-ai/DeepSeek-V3", "h100-sxm", tp=8)
    p = flopwise.plan("deepseek-ai/DeepSeek-V3", gpus=["h100-sxm"], max_gpus=8, num_requests=120)
    assert p.ranked and all(r["gpus_per_replica"] <= 8 and r["nodes"] == 1 for r in p.ranked)
    assert {r["weights"] for r in p.ranked} == {"int4-awq"}


def test_a_does_not_fit_hint_on_a_server_without_a_nic_skips_the_wider_layouts():
    """An 8-GPU server the catalog gives no NIC: TP 16 cannot be built (it spans 2 servers), so the hint names the
    narrower format instead of failing on the layout it tried."""
    nonic = replace(get_hardware("h100-sxm"), id="nonic8", network="none", network_gbs=0.0)
    with pytest.raises(DoesNotFitError, match=r"Try --weights int4-awq\.$"):
        flopwise.estimate("deepseek-ai/DeepSeek-V3", nonic, tp=8)


def test_plan_tries_every_power_of_two_up_to_max_gpus():
    assert default_tps(8) == (1, 2, 4, 8) and default_tps(72) == (1, 2, 4, 8, 16, 32, 64) and default_tps(1) == (1,)


def test_estimate_json_carries_the_replicas_hosts():
    gb = flopwise.estimate("llama-3.1-405b", "gb200", tp=16, weights="fp8").to_dict()
    assert (gb["nodes"], gb["hosts"]) == (1, 4)
    h = flopwise.estimate("llama-3.1-70b", "l40s", tp=4, weights="fp8").to_dict()
    assert (h["nodes"], h["hosts"]) == (1, 1)


@pytest.mark.parametrize("kw", [{"batch": 0}, {"input_len": -1}, {"output_len": 0}])
def test_bad_lengths(kw):
    with pytest.raises(WorkloadError):
        flopwise.estimate("llama-3.1-8b", "h100-sxm", **kw)


def test_hardware_catalog_has_required_ids_with_sources():
    cat = hardware_catalog()
    for hw_id in REQUIRED_GPUS:
        hw = cat[hw_id]
        assert hw.memory_bandwidth_gbs > 0 and hw.memory_gib > 0
        assert hw.sources.get("compute") and hw.sources.get("memory")
    assert cat["h100-sxm"].peak_tflops["bf16"] == pytest.approx(989.4)  # dense, not the sparsity figure
    assert cat["b200"].peak_tflops.get("fp4", 0) > 0


def test_unknown_gpu_suggests():
    with pytest.raises(UnknownHardwareError, match="h100-sxm"):
        get_hardware("h100-sxn")


def test_user_hardware_file_toml_and_yaml(tmp_path):
    toml = tmp_path / "hw.toml"
    toml.write_text('[[hardware]]\nid = "h100-sxm"\nprice_per_hour_usd = 1.5\n[hardware.efficiency]\n'
                    'bandwidth_max = 0.5\n\n[[hardware]]\nid = "my-npu"\nname = "My NPU"\nvendor = "generic"\n'
                    'kind = "gpu"\nmemory_gib = 32\nmemory_bandwidth_gbs = 1000\n[hardware.peak_tflops]\nbf16 = 100\n')
    cat = load_hardware_file(toml)
    assert cat["h100-sxm"].price_per_hour_usd == 1.5
    assert cat["h100-sxm"].memory_bandwidth_gbs == 3350  # untouched fields kept
    assert cat["h100-sxm"].efficiency.bandwidth_max == 0.5
    slow = flopwise.estimate("llama-3.1-8b", "h100-sxm", hardware_file=toml)
    fast = flopwise.estimate("llama-3.1-8b", "h100-sxm")
    assert slow.tpot_ms > 1.4 * fast.tpot_ms  # half the bandwidth: decode slows by ~1.7x less fixed overheads
    yaml_file = tmp_path / "hw.yaml"
    yaml_file.write_text("hardware:\n  - id: my-npu\n    name: My NPU\n    vendor: generic\n    kind: gpu\n"
                         "    memory_gib: 32\n    memory_bandwidth_gbs: 1000\n    peak_tflops: {bf16: 100}\n")
    assert get_hardware("my-npu", yaml_file).peak_flops("fp8") == 100e12  # falls back to bf16 math


def test_every_catalog_part_names_its_memory_technology():
    """`memory_kind` from each datasheet: HBM on the datacenter GPUs, GDDR on graphics and L-series cards, LPDDR on
    unified-memory SoCs, DDR on CPU sockets; a user file may leave it out, and an unknown kind is refused."""
    kinds = {h: get_hardware(h).memory_kind for h in hardware_catalog()}
    assert None not in kinds.values()
    assert {kinds[h] for h in ("a100-sxm-80gb", "h100-pcie", "h200", "b200", "mi300x", "v100-sxm-32gb")} == {"hbm"}
    assert {kinds[h] for h in ("l4", "l40s", "a10g", "rtx-4090", "rtx-pro-6000-blackwell", "rx-7900-xtx")} == {"gddr"}
    assert {kinds[h] for h in ("apple-m2-ultra", "jetson-agx-orin", "dgx-spark-gb10")} == {"lpddr"}
    with pytest.raises(SpecError, match="memory_kind"):
        replace(get_hardware("l4"), memory_kind="sram")


def test_bad_hardware_file(tmp_path):
    f = tmp_path / "hw.toml"
    f.write_text('[[hardware]]\nid = "x"\nname = "x"\n')
    with pytest.raises(SpecError, match="missing"):
        load_hardware_file(f)
    f.write_text("[[hardware\n")
    with pytest.raises(SpecError, match="could not be parsed"):
        load_hardware_file(f)


def test_cli_estimate_json_keys():
    res = runner.invoke(app, ["estimate", "--model", "meta-llama/Llama-3.1-8B", "--gpu", "h100-sxm",
                              "--batch", "32", "--input-len", "1024", "--output-len", "256", "--json"])
    assert res.exit_code == 0, res.output
    d = json.loads(res.stdout)
    for key in ("ttft_ms", "tpot_ms", "e2e_ms", "output_tokens_per_s", "output_tokens_per_s_per_gpu",
                "prefill_tokens_per_s", "decode_tokens_per_s_per_user", "max_batch", "fits", "mfu", "mbu"):
        assert isinstance(d[key], int | float | bool), key
    assert set(d["memory"]) >= {"weights_gib", "kv_cache_gib", "activations_gib", "free_gib"}
    for phase in ("prefill", "decode"):
        assert set(d[phase]) >= {"flops", "bytes", "bound", "time_ms"}
    assert d["batch"] == 32 and d["fits"] is True


def test_cli_default_report_runs():
    res = runner.invoke(app, ["estimate"])
    assert res.exit_code == 0, res.output
    assert "TTFT" in res.stdout and "binding roof" in res.stdout


def test_cli_catalogs():
    res = runner.invoke(app, ["models", "--json"])
    ids = [m["id"] for m in json.loads(res.stdout)["models"]]
    assert "meta-llama/Llama-3.1-405B" in ids and "openai/gpt-oss-120b" in ids
    res = runner.invoke(app, ["hardware", "--json"])
    assert {h["id"] for h in json.loads(res.stdout)["hardware"]} >= set(REQUIRED_GPUS)
    # the engine catalog: every family's base row (served at its first published release), then each release's
    res = runner.invoke(app, ["engines", "--json"])
    assert res.exit_code == 0, res.output
    rows = json.loads(res.stdout)["engines"]
    assert {r["engine"] for r in rows if r["since"] == "(base)"} == {"llamacpp", "pytorch", "sglang", "tgi",
                                                                      "trtllm", "vllm"}
    assert any(r["engine"] == "sglang" and r["since"] == "0.4.7" for r in rows)
    res = runner.invoke(app, ["engines"])
    assert res.exit_code == 0 and "engine catalog" in res.stdout
    # one family, or a family at a version: the releases whose changes that profile holds
    one = json.loads(runner.invoke(app, ["engines", "sglang", "--json"]).stdout)["engines"]
    assert one == [r for r in rows if r["engine"] == "sglang"]
    upto = json.loads(runner.invoke(app, ["engines", "sglang@0.4.7", "--json"]).stdout)["engines"]
    assert upto and upto[0]["since"] == "(base)" and upto[-1]["since"] == "0.4.7"
    sinces = [r["since"] for r in one]
    assert [r["since"] for r in upto] == sinces[:sinces.index("0.4.7") + 1]  # 0.4.7.post1 came after it
    assert "note" not in json.loads(runner.invoke(app, ["engines", "sglang@0.4.7", "--json"]).stdout)
    # a version past every known release shows them all, and says what it is priced as
    late = json.loads(runner.invoke(app, ["engines", "sglang@99", "--json"]).stdout)
    assert late["engines"] == one and late["note"].startswith("SGLang 99 is newer than any release")
    res = runner.invoke(app, ["engines", "vllm@"])  # the argument is named as this command's, not --engine
    assert isinstance(res.exception, SpecError) and str(res.exception).startswith("engines 'vllm@': nothing after")
    # models and hardware take a substring to look for (any case) in ids, aliases and names
    res = runner.invoke(app, ["hardware", "H100", "--json"])
    assert [h["id"] for h in json.loads(res.stdout)["hardware"]] == ["h100-sxm", "h100-pcie", "h100-nvl"]
    res = runner.invoke(app, ["models", "gpt-oss", "--json"])
    assert [m["id"] for m in json.loads(res.stdout)["models"]] == ["openai/gpt-oss-20b", "openai/gpt-oss-120b"]
    res = runner.invoke(app, ["hardware", "h1000"])
    assert isinstance(res.exception, UnknownHardwareError) and "no catalog GPU matches 'h1000'" in str(res.exception)
    res = runner.invoke(app, ["engines", "vlm"])  # (`flopwise.cli.main` prints it as one line, exit code 2)
    assert isinstance(res.exception, SpecError) and "unknown engine 'vlm'. Did you mean: vllm?" in str(res.exception)


def test_cli_errors_are_one_line(capfd):
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-m", "flopwise", "estimate", "--gpu", "h100-sxn"],
                         capture_output=True, text=True)
    assert out.returncode == 2
    assert "Traceback" not in out.stderr
    assert "unknown GPU 'h100-sxn'" in out.stderr and "h100-sxm" in out.stderr


def test_a_family_name_suggests_its_parts_first():
    ids = list(hardware_catalog())
    # 'h100' heads three catalog parts; difflib alone ranked h200 and mi100 above h100-sxm
    assert suggest("h100", ids) == " Did you mean: h100-sxm, h100-pcie, h100-nvl?"
    assert suggest("H100", ids) == suggest("h100", ids)
    assert suggest("mi300", ids).startswith(" Did you mean: mi300x")  # no part heads it: difflib's order
    assert suggest("h100-sxn", ids).startswith(" Did you mean: h100-sxm")
    assert suggest("zzzz", ids) == ""


def test_a_pipelined_steps_table_says_it_sums_the_stages():
    res = CliRunner().invoke(app, ["estimate", "--model", "llama-3.1-70b", "--gpu", "h100-sxm", "--pp", "2",
                                   "--batch", "8"])
    assert res.exit_code == 0, res.output
    text = " ".join(res.output.split())
    assert ("One step of each phase (the 2 pipeline stages' work together, as a round of up to 2 micro-batches in "
            "flight: a GPU does 1/2 of it)") in text  # vLLM V1 keeps a micro-batch in every stage
    flat = CliRunner().invoke(app, ["estimate", "--model", "llama-3.1-70b", "--gpu", "h100-sxm", "--pp", "2",
                                    "--batch", "2", "--engine", "llamacpp"])
    assert flat.exit_code == 0, flat.output
    assert ("One step of each phase (the 2 pipeline stages' work together: a GPU does 1/2 of it)"
            in " ".join(flat.output.split()))
    one = CliRunner().invoke(app, ["estimate", "--model", "llama-3.1-8b", "--gpu", "h100-sxm"])
    assert "One step of each phase (per GPU)" in " ".join(one.output.split())


def test_weights_past_metals_default_working_set_are_noted():
    """macOS lets an Apple SoC's GPU wire ~75% of its RAM by default: 54 GiB of weights on a 64 GiB M1 Max need the
    limit raised first; 16 GiB on the same machine do not."""
    big = flopwise.estimate("llama-3.1-70b", "apple-m1-max", engine="llamacpp", weights="q6_k").to_dict()["notes"]
    assert any("exceed the ~75% of 64 GiB that macOS lets the GPU use by default" in n for n in big)
    small = flopwise.estimate("llama-3.1-8b", "apple-m1-max", engine="llamacpp", weights="q8_0").to_dict()["notes"]
    assert not any("macOS" in n for n in small)


def test_decode_on_cuda_cores_is_noted_with_what_moves_it():
    """SGLang 0.4.4 on an A100 decodes Llama-3.1-8B (a GQA group of 4) from a 16-bit cache on the CUDA cores: the
    estimate says so and names the FP8 cache that takes the tensor cores; with that cache, or on an H100 under
    0.5.6 (FlashAttention 3), the note is gone."""
    def noted(**kw: object) -> bool:
        return any("CUDA cores" in n for n in flopwise.estimate("llama-3.1-8b", **kw).to_dict()["notes"])

    assert noted(gpu="a100-sxm-80gb", engine="sglang@0.4.4")
    assert not noted(gpu="a100-sxm-80gb", engine="sglang@0.4.4", kv="fp8")
    assert not noted(gpu="h100-sxm", engine="sglang@0.5.6")
    assert not noted(gpu="a100-sxm-80gb", engine="vllm")


def test_cuda_core_note_follows_the_releases_cache_rule():
    """SGLang 0.4.0 (FlashInfer 0.1.6, which decides by group size alone) decodes Llama-3.1-8B on the CUDA cores
    from an FP8 cache as from a 16-bit one: the note does not offer --kv fp8 as the way out there, and says which
    cache it prices; 0.4.4 (FlashInfer 0.2) offers it."""
    def note(**kw: object) -> str:
        return next(n for n in flopwise.estimate("llama-3.1-8b", **kw).to_dict()["notes"] if "CUDA cores" in n)

    assert note(gpu="h100-sxm", engine="sglang@0.4.0").endswith(
        "priced so; an FP8 KV cache would too (this release decides by group alone)")
    fp8 = note(gpu="h100-sxm", engine="sglang@0.4.0", kv="fp8")
    assert "from an FP8 KV cache" in fp8 and fp8.endswith("priced so")
    assert note(gpu="a100-sxm-80gb", engine="sglang@0.4.4").endswith(
        ": an FP8 KV cache (--kv fp8) runs it on the tensor cores")


def test_one_output_token_has_no_tpot_in_the_json_or_the_report():
    import subprocess
    import sys

    from flopwise.api import estimate as est

    d = est("llama-3.1-8b", "h100-sxm", input_len=1000, output_len=1).to_dict()
    assert d["tpot_ms"] is None and d["decode_tokens_per_s_per_user"] is None and d["e2e_ms"] == d["ttft_ms"]
    assert est("llama-3.1-8b", "h100-sxm", input_len=1000, output_len=2).to_dict()["tpot_ms"] > 0
    out = subprocess.run([sys.executable, "-m", "flopwise", "estimate", "--model", "llama-3.1-8b", "--output-len", "1"],
                         capture_output=True, text=True, check=True).stdout
    assert "0.00 ms" not in out


def test_a_batch_above_the_engines_max_num_seqs_says_a_server_would_queue_the_rest():
    from flopwise.api import estimate as est

    big = est("llama-3.2-1b", "h100-sxm", batch=3000, input_len=512, output_len=128).to_dict()
    assert any("a batch of 3,000 is priced as one step" in n and "at most 1,024 sequences" in n for n in big["notes"])
    small = est("llama-3.2-1b", "h100-sxm", batch=64, input_len=512, output_len=128).to_dict()
    assert not any("priced as one step" in n for n in small["notes"])
