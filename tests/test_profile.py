"""Profiling pieces: discovery parsing, peak estimates, kernel accounting, the hardware file round trip, and
tiny real runs of the microbenchmarks and the model profiler (structure only: timings are never asserted)."""

import json
from dataclasses import replace

import pytest
from typer.testing import CliRunner

from flopwise.calibrate import kernel_time
from flopwise.cli import app
from flopwise.cost.batch import prefill_shape
from flopwise.errors import SpecError
from flopwise.profile import build_hardware, kernel_points_from, profile_table, step_points_from
from flopwise.profile.discover import CudaDevice, cpu_peak_tflops, parse_host
from flopwise.profile.hostfile import dumps_toml, hardware_entry, read_host_file, write_host_file
from flopwise.profile.microbench import MicrobenchConfig, attention_point, copy_point, gemm_point, run_microbenchmarks
from flopwise.profile.model_profile import check_supported, truncate_layers
from flopwise.specs.hardware import get_hardware, load_hardware_file
from flopwise.specs.hf import parse_config
from flopwise.specs.model_catalog import get_model

CPUINFO = """processor\t: 0
vendor_id\t: AuthenticAMD
model name\t: AMD EPYC 9R45
cpu MHz\t\t: 2596.138
siblings\t: 2
cpu cores\t: 2
flags\t\t: fpu sse avx2 fma avx512f avx512_bf16 avx512_vnni

processor\t: 1
model name\t: ignored
"""


def test_parse_host_reads_first_processor_block():
    host = parse_host(CPUINFO, num_cores=2, memory_gib=24.0, max_clock_ghz=3.7)
    assert host.cpu_model == "AMD EPYC 9R45" and host.vendor == "AuthenticAMD"
    assert host.simd == ("avx2", "fma", "avx512f", "avx512_bf16", "avx512_vnni")
    assert host.threads_per_core == 1 and host.num_cores == 2


def test_cpu_peak_estimate_from_flags():
    """2 cores x 3.7 GHz x 64 FP32 FLOP/cycle (AVX-512, 2 FMA pipes) = 0.4736 TFLOP/s; BF16 2x, INT8 4x."""
    host = parse_host(CPUINFO, num_cores=2, memory_gib=24.0, max_clock_ghz=3.7)
    assert cpu_peak_tflops(host) == {"fp32": 0.4736, "bf16": 0.9472, "int8": 1.8944}
    avx2 = parse_host(CPUINFO.replace(" avx512f avx512_bf16 avx512_vnni", ""), 4, 8.0, 2.0)
    assert cpu_peak_tflops(avx2) == {"fp32": 0.256, "bf16": 0.256, "int8": 0.256}


def test_kernel_points_count_flops_and_bytes():
    g = gemm_point(4, 1024, 2048, "bf16", 1e-3)
    assert (g.flops, g.m, g.weight_bytes, g.act_bytes) == (2 * 4 * 1024 * 2048, 4, 2048 * 1024 * 2,
                                                           (4 * 2048 + 4 * 1024) * 2)
    c = copy_point(2**20, 1e-4)
    assert (c.flops, c.act_bytes, c.label) == (0, 2 * 2**20, "copy")
    a = attention_point(1, 1000, 16, 4, 128, "bf16", 1e-4)
    assert (a.flops, a.m, a.kv_bytes) == (4 * 16 * 128 * 1000, 4, 2 * 4 * 1000 * 128 * 2)
    p = attention_point(10, 10, 16, 4, 128, "bf16", 1e-4)
    assert p.flops == 4 * 16 * 128 * 55 and p.m == 40


def test_build_hardware_raises_peaks_to_measurements():
    host = parse_host(CPUINFO, num_cores=2, memory_gib=24.0, max_clock_ghz=3.7)
    fast = gemm_point(1024, 4096, 4096, "bf16", 2 * 1024 * 4096 * 4096 / 2.0e12)  # 2 TFLOP/s: above 0.95
    hw = build_hardware(host, [fast, copy_point(2**30, 2 * 2**30 / 30e9)], hw_id="my-host", base=None)
    assert hw.peak_tflops["bf16"] == pytest.approx(2.0) and hw.memory_bandwidth_gbs == pytest.approx(30.0)
    assert "measured_above_peak" in hw.sources and hw.kind == "cpu"
    based = build_hardware(host, [copy_point(2**30, 2 * 2**30 / 30e9)], hw_id="my-host",
                           base=get_hardware("cpu-epyc-zen5-2c"))
    assert based.peak_tflops == get_hardware("cpu-epyc-zen5-2c").peak_tflops and based.memory_bandwidth_gbs == 40


def test_a_gpu_entry_needs_measurements_or_a_base():
    """On a GPU, only GEMMs timed there or a datasheet (--base) give peaks: nothing measured and no base is refused
    in one line, where it once wrote an entry without peaks that no command could load."""
    host = replace(parse_host(CPUINFO, num_cores=2, memory_gib=24.0, max_clock_ghz=3.7),
                   cuda=(CudaDevice(index=0, name="NVIDIA H200", memory_gib=140.4, compute_capability="9.0",
                                    multiprocessors=132),))
    with pytest.raises(SpecError, match="--base"):
        build_hardware(host, [], hw_id="gpu", base=None, device="cuda")
    gemm = gemm_point(4096, 4096, 4096, "bf16", 2 * 4096**3 / 800e12)
    hw = build_hardware(host, [gemm], hw_id="gpu", base=None, device="cuda")
    assert hw.kind == "gpu" and hw.name == "NVIDIA H200" and hw.peak_tflops == {"bf16": pytest.approx(800.0)}
    based = build_hardware(host, [], hw_id="gpu", base=get_hardware("h200"), device="cuda")
    assert based.peak_tflops == get_hardware("h200").peak_tflops


def test_hardware_file_round_trip(tmp_path):
    hw = replace(get_hardware("cpu-epyc-zen5-2c"), id="my-host")
    hw = replace(hw, efficiency=replace(hw.efficiency, compute_max=0.123, step_overhead_s=0.0042, source='fit "x"'))
    kernels = [gemm_point(8, 64, 64, "bf16", 1e-5, spread=0.1), copy_point(2**20, 1e-4)]
    table = {"hardware": "my-host", "host": {"cpu_model": "x", "simd": ["avx2"], "cuda": []},
             "kernels": [k.to_dict() for k in kernels]}
    path = tmp_path / "my-host.toml"
    write_host_file(path, hw, table, others=[hardware_entry(replace(hw, id="other"))])
    loaded = load_hardware_file(path)
    assert loaded["my-host"] == hw and loaded["my-host"].efficiency == hw.efficiency
    assert "other" in loaded and "h100-sxm" in loaded  # the catalog is still there
    hf = read_host_file(path)
    assert hf.hardware_id == "my-host" and kernel_points_from(hf.profile) == kernels
    r = CliRunner().invoke(app, ["estimate", "--hardware-file", str(path), "--gpu", "my-host", "--model",
                                 "qwen2.5-0.5b", "--json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.output)


def test_dumps_toml_nested_tables():
    text = dumps_toml({"a": [{"x": 1, "t": {"k": 2.5}, "arr": [{"y": "z"}, {"y": "w"}]}], "b": {"c": [1, 2]}})
    import tomllib

    assert tomllib.loads(text) == {"a": [{"x": 1, "t": {"k": 2.5}, "arr": [{"y": "z"}, {"y": "w"}]}],
                                   "b": {"c": [1, 2]}}


def test_tiny_microbenchmark_run_has_every_kind():
    cfg = MicrobenchConfig(gemm_m=(1, 8), gemm_nk=((64, 64),), dtypes=("fp32",), copy_mib=(1,),
                           attention_lens=(64,), prefill_attention_lens=(16,), heads=4, kv_heads=2, head_dim=16,
                           budget_s=0.01)
    pts = run_microbenchmarks(cfg, threads=1)
    kinds = {p.kind for p in pts}
    assert {"gemm", "copy", "read"} <= kinds
    assert all(p.seconds > 0 for p in pts)
    hw = get_hardware("cpu-epyc-zen5-2c")
    assert all(kernel_time(hw.efficiency, hw, p) > 0 for p in pts)


def test_model_profile_tiny_model_steps(tmp_path):
    pytest.importorskip("torch")
    from flopwise.profile.model_profile import ModelProfileConfig, profile_model

    model = parse_config({"architectures": ["Qwen2ForCausalLM"], "hidden_size": 64, "num_hidden_layers": 1,
                          "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 128,
                          "vocab_size": 256, "tie_word_embeddings": True}, "qwen2.5-0.5b (first 1 layers)")
    hw = get_hardware("cpu-epyc-zen5-2c")
    pts = profile_model(model, hw, ModelProfileConfig(prefill_lens=(8, 16), decode_batches=(1, 2), decode_contexts=(8,),
                                                      budget_s=0.01), threads=1)
    assert [(p.label, p.batch, p.new_tokens, p.context) for p in pts] == [
        ("prefill", 1, 8, 0), ("prefill", 1, 16, 0), ("decode", 1, 1, 8), ("decode", 2, 1, 8)]
    assert pts[0].shape == prefill_shape(1, 8, (None,))
    assert all(p.seconds > 0 for p in pts)


def test_truncate_and_supported_models():
    m = truncate_layers(get_model("llama-3.2-1b"), 4)
    assert m.num_layers == 4 and len(m.layer_windows) == 4
    check_supported(m)
    from flopwise.errors import SpecError

    with pytest.raises(SpecError, match="MoE"):
        check_supported(get_model("qwen3-30b-a3b"))


def test_step_points_round_trip_through_the_profile_table():
    from flopwise.profile import HostProfile
    from flopwise.profile.model_profile import step_point
    from flopwise.specs.deployment import make_deployment

    hw = get_hardware("cpu-epyc-zen5-2c")
    spec = truncate_layers(get_model("llama-3.2-1b"), 2)
    dep = make_deployment(spec, hw, weights="bf16", kv="bf16")
    steps = (step_point(dep, "prefill", 1, 64, 0, 0.05), step_point(dep, "decode", 4, 1, 128, 0.01))
    host = parse_host(CPUINFO, 2, 24.0, 3.7)
    table = profile_table(HostProfile(host=host, hardware=hw, kernels=(), steps=steps, model="llama-3.2-1b",
                                      num_layers=2, wall_s=1.0))
    back = step_points_from(json.loads(json.dumps(table)), hw)
    assert [(p.label, p.batch, p.new_tokens, p.context, p.seconds, p.shape) for p in back] == \
        [(p.label, p.batch, p.new_tokens, p.context, p.seconds, p.shape) for p in steps]


def test_profile_cli_discovery_only_writes_a_loadable_file(tmp_path):
    """`--no-microbench` without a model measures nothing: the entry has discovery and default efficiency."""
    out = tmp_path / "me.toml"
    r = CliRunner().invoke(app, ["profile", "--no-microbench", "--device", "cpu", "--id", "me", "--out", str(out),
                                 "--json"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.output)
    assert d["hardware"] == "me" and d["num_kernels"] == 0 and d["calibration"] is None and d["notes"] == []
    hw = load_hardware_file(out)["me"]
    assert hw.kind == "cpu" and hw.peak_tflops["fp32"] > 0
    assert read_host_file(out).profile["host"]["num_cores"] >= 1
