"""Property-based tests (hypothesis) over every parser of user input and over the CLI: whatever the input, the
result is a value that makes sense (finite, in range) or one `FlopwiseError` line; never another exception, a
hang or a non-finite number in the output."""

from __future__ import annotations

import contextlib
import copy
import io
import json
import math
import os
from pathlib import Path

import numpy as np
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from flopwise.cli import run
from flopwise.errors import FlopwiseError
from flopwise.estimate import estimate_deployment
from flopwise.specs.defaults import MAX_TOKENS_PER_REQUEST
from flopwise.specs.deployment import make_deployment
from flopwise.specs.engine import get_engine
from flopwise.specs.hardware import get_hardware, load_hardware_file
from flopwise.specs.hf import load_config_file, parse_config
from flopwise.specs.hf.fields import ALIASES
from flopwise.specs.sla import parse_sla
from flopwise.workload.lengths import parse_length
from flopwise.workload.traces import load_trace

CATALOG = Path(__file__).resolve().parents[1] / "src/flopwise/catalog/models"
CONFIGS = {name: json.loads((CATALOG / f"{name}.json").read_text()) for name in (
    "meta-llama--Llama-3.2-1B", "mistralai--Mixtral-8x7B-v0.1", "Qwen--Qwen3-30B-A3B", "deepseek-ai--DeepSeek-V2-Lite",
    "google--gemma-3-1b-it", "openai--gpt-oss-20b", "Qwen--Qwen3-Next-80B-A3B-Instruct",
    "meta-llama--Llama-4-Scout-17B-16E-Instruct", "tencent--Hunyuan-A13B-Instruct", "tiiuae--falcon-7b",
    "google--gemma-3n-E4B-it", "baidu--ERNIE-4.5-21B-A3B-PT")}
H100 = get_hardware("h100-sxm")

# A fixed sample in the suite (derandomized: the same examples every run); FLOPWISE_HYPOTHESIS_EXAMPLES=2000 hunts
# with fresh random examples.
_HUNT = int(os.environ.get("FLOPWISE_HYPOTHESIS_EXAMPLES", "0"))
SETTINGS = settings(max_examples=_HUNT or 60, deadline=None, derandomize=not _HUNT,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
CLI_SETTINGS = settings(SETTINGS, max_examples=_HUNT or 25)

scalars = st.one_of(
    st.none(), st.booleans(), st.integers(-3, 3), st.integers(-(10**12), 10**12),
    st.sampled_from([0, 1, 2**63, 10**30]),
    st.floats(allow_nan=True, allow_infinity=True), st.sampled_from([0.5, 1.5, -0.0, 1e308]),
    st.text(max_size=8), st.sampled_from(["16", "abc", "", "full_attention", "noaux_tc"]))
json_values = st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                            st.dictionaries(st.text(max_size=6), inner, max_size=3)),
                           max_leaves=8)


def finite(obj: object) -> bool:
    """Every number in a JSON-like structure is finite."""
    if isinstance(obj, float):
        return math.isfinite(obj)
    if isinstance(obj, dict):
        return all(finite(v) for v in obj.values())
    if isinstance(obj, list | tuple):
        return all(finite(v) for v in obj)
    return True


def config_keys(raw: dict) -> list[str]:
    keys = set(raw) | {a for names in ALIASES.values() for a in names}
    if isinstance(raw.get("text_config"), dict):
        keys |= {f"text_config.{k}" for k in raw["text_config"]}
    return sorted(keys)


# ------------------------------------------------------------------------------------------------ config.json


@st.composite
def mutated_configs(draw):
    name = draw(st.sampled_from(sorted(CONFIGS)))
    raw = copy.deepcopy(CONFIGS[name])
    for key in draw(st.lists(st.sampled_from(config_keys(raw)), min_size=1, max_size=3)):
        value = draw(json_values)
        if key.startswith("text_config."):
            raw["text_config"][key.split(".", 1)[1]] = value
        else:
            raw[key] = value
    return name, raw


@SETTINGS
@given(mutated_configs())
def test_config_fields_of_any_value(case):
    name, raw = case
    try:
        spec = parse_config(raw, name)
    except FlopwiseError as e:
        assert "\n" not in str(e)
        return
    assert spec.total_params > 0 and spec.active_params > 0 and spec.kv_elements_per_token >= 0
    assert all(lay.mlp.intermediate_size > 0 for lay in spec.layers)
    assert spec.max_position_embeddings is None or spec.max_position_embeddings >= 1
    try:
        est = estimate_deployment(make_deployment(spec, H100, weights="bf16", kv="bf16"), batch=1, input_len=64,
                                  output_len=8)
    except FlopwiseError:
        return
    assert finite(est.to_dict()), est.to_dict()


# ------------------------------------------------------------------------------------------------ hardware files

HW_FIELDS = ("name", "vendor", "kind", "memory_gib", "memory_bandwidth_gbs", "peak_tflops", "interconnect",
             "interconnect_gbs", "tdp_w", "price_per_hour_usd", "released", "sources", "efficiency")
EFF_FIELDS = ("compute_max", "compute_half_m", "bandwidth_max", "overlap_exponent", "kernel_overhead_s",
              "step_overhead_s", "runtime_overhead_gib")


@st.composite
def hardware_files(draw):
    entry = {"id": draw(st.sampled_from(["h100-sxm", "my-gpu", 5, ""]))}
    for key in draw(st.lists(st.sampled_from(HW_FIELDS), max_size=5, unique=True)):
        if key == "peak_tflops":
            entry[key] = draw(st.one_of(json_values, st.dictionaries(st.sampled_from(["bf16", "fp8", "x"]), scalars)))
        elif key == "efficiency":
            entry[key] = draw(st.one_of(json_values, st.dictionaries(st.sampled_from(EFF_FIELDS), scalars)))
        else:
            entry[key] = draw(json_values)
    shape = draw(st.sampled_from(["entries", "entry", "list", "scalar"]))
    return {"entries": {"hardware": [entry]}, "entry": {"hardware": entry}, "list": [entry], "scalar": 5}[shape]


@SETTINGS
@given(hardware_files())
def test_hardware_files_of_any_shape(tmp_path_factory, data):
    path = tmp_path_factory.mktemp("hw") / "hw.yaml"
    path.write_text(yaml.safe_dump(data))
    try:
        catalog = load_hardware_file(path)
    except FlopwiseError as e:
        assert "\n" not in str(e)
        return
    for hw in catalog.values():
        assert hw.memory_gib > 0 and hw.memory_bandwidth_gbs > 0 and hw.interconnect_gbs >= 0
        assert all(math.isfinite(v) and v >= 0 for v in hw.peak_tflops.values())
        assert hw.price_per_hour_usd is None or hw.price_per_hour_usd >= 0
    hw = next(iter(v for k, v in catalog.items() if k in ("h100-sxm", "my-gpu")), None)
    if hw is not None:
        try:
            est = estimate_deployment(make_deployment(CONFIG_1B, hw, weights="bf16", kv="bf16"), input_len=64,
                                      output_len=8)
        except FlopwiseError:
            return
        assert finite(est.to_dict())


CONFIG_1B = parse_config(CONFIGS["meta-llama--Llama-3.2-1B"], "llama-3.2-1b")


# ------------------------------------------------------------------------------------------------ engine files


def toml_value(v: object) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf") if math.isinf(v) else repr(v)
    if isinstance(v, int):
        return str(max(min(v, 2**63 - 1), -(2**63)))
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, list):
        return "[" + ", ".join(toml_value(x) for x in v if x is not None) + "]"
    if isinstance(v, dict):
        return "{ " + ", ".join(f"{json.dumps(k)} = {toml_value(x)}" for k, x in v.items() if x is not None) + " }"
    return '""'


OVERRIDE_KEYS = {"host": ("step_s", "per_seq_s", "per_worker_s", "async_scheduling"),
                 "frontend": ("request_s", "prompt_token_s", "output_token_s", "latency_s", "api_servers"),
                 "kernels": ("moe_bandwidth", "quantized_gemm_compute", "eager_prefill_kernel_s")}


@st.composite
def engine_files(draw):
    lines = ['name = "vllm"', "[override]"]
    for key in draw(st.lists(st.sampled_from([*OVERRIDE_KEYS, "memory_fraction", "block_size", "batch_defaults",
                                              "scheduler", "bogus"]), min_size=1, max_size=3, unique=True)):
        if key in OVERRIDE_KEYS:
            value = draw(st.one_of(scalars.filter(lambda v: v is not None),
                                   st.dictionaries(st.sampled_from(OVERRIDE_KEYS[key]), scalars, min_size=1)))
        elif key == "batch_defaults":
            value = draw(st.lists(st.dictionaries(st.sampled_from(["max_num_seqs", "max_num_batched_tokens",
                                                                   "min_memory_gib"]), scalars), max_size=2))
        else:
            value = draw(scalars.filter(lambda v: v is not None))
        lines.append(f"{key} = {toml_value(value)}")
    return "\n".join(lines) + "\n"


@SETTINGS
@given(engine_files())
def test_engine_files_of_any_value(tmp_path_factory, text):
    path = tmp_path_factory.mktemp("eng") / "engine.toml"
    path.write_text(text)
    try:
        prof = get_engine("vllm", engine_file=str(path))
    except FlopwiseError as e:
        assert "\n" not in str(e)
        return
    assert 0 < prof.memory_fraction <= 1 and prof.block_size >= 1
    assert all(math.isfinite(getattr(prof.host, f)) and getattr(prof.host, f) >= 0
               for f in ("step_s", "per_seq_s", "per_worker_s"))


# ------------------------------------------------------------------------------------------------ traces

TRACE_KEYS = ("timestamp", "arrival_at", "input_tokens", "input_len", "output_tokens", "completion_tokens",
              "prefix_id", "prefix_tokens")


@st.composite
def jsonl_traces(draw):
    rows = []
    for _ in range(draw(st.integers(1, 4))):
        row = {"timestamp": draw(st.floats(0, 100)), "input_tokens": draw(st.integers(1, 100)),
               "output_tokens": draw(st.integers(1, 100))}
        for key in draw(st.lists(st.sampled_from(TRACE_KEYS), max_size=2)):
            row[key] = draw(json_values)
        rows.append(draw(st.one_of(st.just(row), json_values)) if draw(st.booleans()) else row)
    return "\n".join(json.dumps(r) for r in rows) + "\n"


def check_trace(path: Path) -> None:
    try:
        tr = load_trace(path)
    except FlopwiseError as e:
        assert "\n" not in str(e)
        return
    for r in tr.requests:
        assert math.isfinite(r.arrival_at) and r.arrival_at >= 0
        assert 1 <= r.input_tokens <= MAX_TOKENS_PER_REQUEST and r.output_tokens >= 1


@SETTINGS
@given(jsonl_traces())
def test_jsonl_traces_of_any_row(tmp_path_factory, text):
    path = tmp_path_factory.mktemp("trace") / "t.jsonl"
    path.write_text(text)
    check_trace(path)


cells = st.one_of(st.integers(-5, 10**6).map(str),
                  st.sampled_from(["nan", "inf", "-inf", "", "x", "2024-01-01T00:00:00", "1e400", "3.5"]))


@SETTINGS
@given(st.lists(st.tuples(cells, cells, cells), min_size=1, max_size=4), st.booleans())
def test_azure_traces_of_any_cell(tmp_path_factory, rows, header):
    path = tmp_path_factory.mktemp("trace") / "t.csv"
    head = "TIMESTAMP,ContextTokens,GeneratedTokens\n" if header else "a,b,c\n"
    path.write_text(head + "".join(",".join(r) + "\n" for r in rows))
    check_trace(path)


@SETTINGS
@given(json_values)
def test_sharegpt_files_of_any_shape(tmp_path_factory, data):
    path = tmp_path_factory.mktemp("trace") / "t.json"
    path.write_text(json.dumps([{"conversations": data}, data]))
    check_trace(path)


# ------------------------------------------------------------------------------------------------ lengths and SLAs

numbers_text = st.one_of(st.floats(allow_nan=True, allow_infinity=True).map(repr), st.integers(-10, 10**9).map(str),
                         st.sampled_from(["nan", "inf", "-1", "0", "1e999", "x", ""]))


@SETTINGS
@given(st.one_of(
    st.tuples(st.sampled_from(["uniform", "normal", "lognormal", "fixed", "zipf", ""]), numbers_text, numbers_text)
    .map(lambda t: ":".join(t)), numbers_text, st.text(max_size=12)))
def test_length_distributions_of_any_text(text):
    try:
        dist = parse_length(text)
    except FlopwiseError as e:
        assert "\n" not in str(e)
        return
    assert math.isfinite(dist.mean) and dist.mean <= MAX_TOKENS_PER_REQUEST
    x = dist.sample(np.random.default_rng(0), 64)
    assert x.dtype.kind == "i" and x.min() >= 1 and x.max() <= MAX_TOKENS_PER_REQUEST


@SETTINGS
@given(st.one_of(
    st.lists(st.tuples(st.sampled_from(["p95_ttft", "p99_tpot", "mean_e2e", "p50_itl", "p96_ttft", "ttft"]),
                       st.sampled_from(["<=", "<", "=", ">="]), numbers_text, st.sampled_from(["ms", "s", "", "us"])),
             min_size=1, max_size=3).map(lambda parts: ",".join("".join(p) for p in parts)),
    st.text(max_size=20)))
def test_sla_strings_of_any_text(text):
    try:
        sla = parse_sla(text)
    except FlopwiseError as e:
        assert "\n" not in str(e)
        return
    assert sla.objectives and all(math.isfinite(o.limit_ms) and o.limit_ms > 0 for o in sla.objectives)


@SETTINGS
@given(st.binary(max_size=64))
def test_binary_files_anywhere(tmp_path_factory, data):
    d = tmp_path_factory.mktemp("bin")
    for name, read in (("config.json", load_config_file), ("hw.toml", load_hardware_file),
                       ("hw.yaml", load_hardware_file), ("t.jsonl", load_trace), ("t.csv", load_trace),
                       ("t.json", load_trace), ("e.toml", lambda p: get_engine("vllm", engine_file=str(p)))):
        (d / name).write_bytes(data)
        try:
            read(d / name)
        except FlopwiseError as e:
            assert "\n" not in str(e)


# ------------------------------------------------------------------------------------------------ the CLI


def cli(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = run(argv)
    return code, out.getvalue(), err.getvalue()


def no_nan(text: str) -> object:
    def refuse(c: str) -> float:
        raise AssertionError(f"non-finite number {c} in the JSON")
    return json.loads(text, parse_constant=refuse)


def check_cli(argv: list[str]) -> None:
    code, out, err = cli(argv)
    if code == 0:
        assert finite(no_nan(out))
    else:
        assert code == 2, err
        assert err.startswith("error: ") and err.count("\n") == 1, err


option_values = st.one_of(st.integers(-2, 4).map(str), st.integers(-(10**12), 10**12).map(str), numbers_text,
                          st.sampled_from(["fp8", "int4-awq", "bf16", "vllm@0.11", "sglang", "foo", "http", "none",
                                           "mixtral-8x7b"]))
ESTIMATE_OPTIONS = ("--tp", "--pp", "--num-gpus", "--batch", "--input-len", "--output-len", "--weights", "--kv",
                    "--gpu-memory-utilization", "--engine", "--frontend", "--endpoint", "--gpu", "--model", "--dp",
                    "--ep", "--nodes", "--expert-skew")


@CLI_SETTINGS
@given(st.dictionaries(st.sampled_from(ESTIMATE_OPTIONS), option_values, max_size=3))
def test_cli_estimate_with_any_options(opts):
    check_cli(["estimate", *[x for kv in opts.items() for x in kv], "--json"])


SIMULATE_OPTIONS = ("--request-rate", "--burstiness", "--concurrency", "--max-num-seqs", "--max-num-batched-tokens",
                    "--block-size", "--seed", "--input-len", "--output-len", "--sla", "--arrival", "--scheduler",
                    "--workload", "--speculative", "--timeout-s", "--classes", "--scheduling-policy", "--rate-profile")
sim_values = st.one_of(option_values, st.sampled_from(["uniform:1:64", "normal:32:8", "lognormal:16:1", "inf",
                                                       "p95_ttft<=300ms", "gamma", "static", "chat",
                                                       "ngram,k=2,alpha=0.5", "500ms", "a=1;b=2:prio=1:timeout=1s",
                                                       "priority", "10s:5,10s:0", "diurnal:1:5:20s"]))


@CLI_SETTINGS
@given(st.dictionaries(st.sampled_from(SIMULATE_OPTIONS), sim_values, max_size=3))
def test_cli_simulate_with_any_options(opts):
    argv = ["simulate", "--model", "llama-3.2-1b", "--num-requests", "8", *[x for kv in opts.items() for x in kv]]
    if "--input-len" not in opts:
        argv += ["--input-len", "64"]
    if "--output-len" not in opts:
        argv += ["--output-len", "4"]
    check_cli([*argv, "--json"])


@CLI_SETTINGS
@given(st.dictionaries(st.sampled_from(("--batch", "--input-len", "--output-len", "--tp", "--k", "--alpha")),
                       option_values, max_size=3))
def test_cli_explain_with_any_options(opts):
    check_cli(["explain", "--model", "llama-3.2-1b", *[x for kv in opts.items() for x in kv], "--json"])


@CLI_SETTINGS
@given(st.lists(st.one_of(st.sampled_from(["kv=fp8", "weights=int8", "tp=2", "prefix-cache=0.5", "window=512",
                                           "kv-heads=1", "spec=ngram,k=2,alpha=0.5", "chunked-prefill=512"]),
                          st.tuples(st.sampled_from(["tp", "kv", "window", "prefix-cache", "gpu", "spec", ""]),
                                    option_values).map("=".join)), min_size=1, max_size=2),
       st.dictionaries(st.sampled_from(("--batch", "--input-len", "--output-len")), option_values, max_size=2))
def test_cli_compare_with_any_tries(tries, opts):
    argv = ["compare", "--model", "llama-3.2-1b", "--static", *[x for t in tries for x in ("--try", t)],
            *[x for kv in opts.items() for x in kv], "--json"]
    check_cli(argv)


@pytest.mark.parametrize("argv", [["estimate", "--gpu-memory-utilization", "nan"],
                                  ["simulate", "--request-rate", "nan"], ["simulate", "--num-requests", "-5"],
                                  ["explain", "--alpha", "inf"]])
def test_cli_examples_hypothesis_found_first(argv):
    """Regressions kept from the properties' first runs."""
    check_cli([*argv, "--json"])
