"""The family registry and the 21 current architectures: parameter counts against published figures, layer
kinds, the checkpoint's own weight format, refusals and the --family override."""

import json
import re
from dataclasses import replace

import pytest
from typer.testing import CliRunner

from flopwise.api import deployment, estimate
from flopwise.cli import app
from flopwise.cost.memory import memory_plan
from flopwise.errors import ModelConfigError, UnknownModelError
from flopwise.specs.hf import FAMILIES, parse_config
from flopwise.specs.hf.quantization import checkpoint_format
from flopwise.specs.model import expert_params
from flopwise.specs.model_catalog import checkpoint_catalog, get_model, hub_spelling, model_catalog

runner = CliRunner()

NEW_MODELS = [
    "moonshotai/Kimi-K2-Instruct", "microsoft/phi-4", "microsoft/Phi-4-mini-instruct",
    "mistralai/Mistral-Nemo-Instruct-2407", "mistralai/Mistral-Small-24B-Instruct-2501", "google/gemma-3-1b-it",
    "meta-llama/Llama-4-Scout-17B-16E-Instruct", "meta-llama/Llama-4-Maverick-17B-128E-Instruct",
    "Qwen/Qwen3-Next-80B-A3B-Instruct", "deepseek-ai/DeepSeek-V3.2-Exp", "zai-org/GLM-4.5-Air", "zai-org/GLM-4.7",
    "MiniMaxAI/MiniMax-M2", "tencent/Hunyuan-A13B-Instruct", "baidu/ERNIE-4.5-21B-A3B-PT",
    "ibm-granite/granite-3.3-8b-instruct", "CohereForAI/c4ai-command-r-08-2024", "allenai/OLMo-2-1124-7B",
    "Qwen/Qwen2.5-VL-7B-Instruct", "mistralai/Mistral-Small-3.1-24B-Instruct-2503", "google/gemma-3n-E4B-it",
]
ENTRIES = {e.id: e for e in model_catalog()}


def _tolerance(published: float, precision: float | None) -> float:
    """1%, or the published figure's own rounding where it is a rounded name ("17B": +-0.5B)."""
    return max(0.01, (precision or 0.0) / published)


@pytest.mark.parametrize("model_id", [m for m in NEW_MODELS if m != "moonshotai/Kimi-K2-Instruct"])
def test_counts_match_published_figures(model_id):
    e, m = ENTRIES[model_id], get_model(model_id)
    total = m.checkpoint_params / 1e9  # language model + encoders: what the published figure covers
    assert total == pytest.approx(e.published_params_b, rel=_tolerance(e.published_params_b, e.published_precision_b))
    if e.published_active_params_b is not None:
        basis = (m.active_params_without_embeddings if e.published_active_basis == "without_embeddings"
                 else m.active_params)
        tol = _tolerance(e.published_active_params_b, e.published_active_precision_b)
        assert basis / 1e9 == pytest.approx(e.published_active_params_b, rel=tol)


def test_kimi_k2_count_and_the_reports_figure():
    m = get_model("kimi-k2")
    assert m.active_params / 1e9 == pytest.approx(32.6, rel=0.01)  # tech report: 32.6B activated
    # The config has 60 MoE layers after one dense layer: 1.026T. The report's 1.04T is what 61 MoE layers give.
    dense, moe = m.layers[0], m.layers[1]
    assert not dense.mlp.is_moe and all(lay.mlp.is_moe for lay in m.layers[1:])
    assert m.total_params / 1e12 == pytest.approx(1.026, abs=0.001)
    all_moe = m.total_params - m.layer_params(dense) + m.layer_params(moe)
    assert all_moe / 1e12 == pytest.approx(1.04, rel=0.005)


def test_every_new_model_estimates_on_h200():
    for model_id in NEW_MODELS:
        m = get_model(model_id)
        tp = next(t for t in (1, 2, 4, 8) if m.num_heads % t == 0 and memory_plan(deployment(m, "h200", tp=t)).fits)
        r = estimate(m, "h200", tp=tp, batch=1, input_len=1024, output_len=64)
        assert r.ttft_ms > 0 and r.tpot_ms > 0 and r.max_batch >= 1


def test_qwen3_next_gated_deltanet_by_hand():
    m = get_model("qwen3-next")
    h, kd, vd, kh, vh = 2048, 128, 128, 16, 32
    key_dim, value_dim = kh * kd, vh * vd
    conv = 2 * key_dim + value_dim
    mixer = h * (2 * key_dim + 2 * value_dim) + h * 2 * vh + conv * 4 + 2 * vh + vd + value_dim * h
    linear = [lay for lay in m.layers if lay.attention.kind == "linear"]
    assert len(linear) == 36 and [i for i, lay in enumerate(m.layers) if lay.attention.kind == "full"][:3] == [3, 7, 11]
    assert linear[0].attention.linear.params == mixer
    full = next(lay.attention for lay in m.layers if lay.attention.kind == "full")
    assert full.output_gate and full.qk_norm == "head"
    # the same totals a third-party count of the same architecture's safetensors headers gives
    assert (m.total_params, m.active_params) == (79_674_391_296, 3_874_929_408)


def test_llama4_chunked_nope_layers_and_interleaved_moe():
    scout, maverick = get_model("llama-4-scout"), get_model("llama-4-maverick")
    kinds = [lay.attention.kind for lay in scout.layers]
    assert kinds[3] == kinds[7] == "full" and kinds.count("full") == 12  # every 4th layer: global, no RoPE
    assert all(lay.attention.window == 8192 for lay in scout.layers if lay.attention.kind == "chunked")
    assert scout.num_moe_layers == 48 and maverick.num_moe_layers == 24 and maverick.layers[1].mlp.is_moe
    dense = maverick.layers[0].mlp
    assert not dense.is_moe and dense.intermediate_size == 16384
    moe = scout.layers[0].mlp
    assert (moe.num_experts, moe.experts_per_token, moe.shared_intermediate_size) == (16, 1, 8192)
    # per MoE layer: 16 experts of 3*5120*8192, one shared expert as wide, router 5120 x 16
    assert scout.layer_params(scout.layers[0]) - scout.layer_active_params(scout.layers[0]) == 15 * 3 * 5120 * 8192
    assert scout.encoders[0].params == pytest.approx(0.872e9, rel=0.01)


def test_deepseek_v32_indexer_by_hand():
    m = get_model("deepseek-v3.2-exp")
    a = m.layers[0].attention
    assert a.kind == "sparse" and a.indexer.top_k == 2048
    # wq_b q_lora x (64 heads * 128) + wk h x 128 + LayerNorm(128) weight and bias + weights_proj h x 64
    assert a.indexer.params == 1536 * 64 * 128 + 7168 * 128 + 2 * 128 + 7168 * 64 == 13_959_424
    v3 = get_model("deepseek-v3")
    assert m.total_params - v3.total_params == 61 * 13_959_424  # otherwise the DeepSeek-V3 shape


def test_moe_variants_per_layer():
    hunyuan = get_model("hunyuan-a13b")
    mlp = hunyuan.layers[0].mlp
    assert (mlp.num_experts, mlp.experts_per_token, mlp.shared_intermediate_size) == (64, 8, 3072)
    ernie = get_model("ernie-4.5-21b-a3b")
    assert not ernie.layers[0].mlp.is_moe and ernie.num_moe_layers == 27
    assert ernie.layers[1].mlp.router_bias and ernie.layers[1].mlp.shared_intermediate_size == 2 * 1536
    glm = get_model("glm-4.5-air")
    assert not glm.layers[0].mlp.is_moe and glm.num_moe_layers == 45 and glm.layers[1].mlp.router_bias
    assert glm.layers[0].attention.qkv_bias and not glm.layers[0].attention.o_bias
    minimax = get_model("minimax-m2")
    assert minimax.layers[0].attention.qk_norm == "full" and minimax.layers[0].mlp.router_bias
    # MiniMax-M2's router: 3072 x 256 weights + 256 biases; an expert 3 x 3072 x 1536
    assert expert_params(minimax.layers[0].mlp, 3072) == 3 * 3072 * 1536


def test_gemma3n_kv_sharing_and_extras():
    m = get_model("gemma-3n-e4b")
    shared = [i for i, lay in enumerate(m.layers) if lay.attention.shares_kv]
    assert shared == list(range(20, 35))
    assert m.kv_elements_per_token == 20 * 2 * 2 * 256  # only the 20 layers before the shared ones keep a cache
    h, p = 2048, 256
    assert m.per_layer_embedding_params == 262144 * 35 * p
    assert m.layers[0].extra_params == (6 * h + 16 + 64) + (2 * 64 * h + h) + (2 * p * h + h)
    assert {e.modality for e in m.encoders} == {"vision", "audio"}


def test_vision_towers_counted_apart():
    vl = get_model("qwen2.5-vl-7b")
    assert vl.total_params == 7_615_616_512  # the Qwen2.5-7B language model with its 152064-row head
    assert vl.encoder_params / 1e9 == pytest.approx(0.676, abs=0.002)
    g3 = get_model("gemma-3-27b")  # an existing entry: the SigLIP tower is now reported, the counts unchanged
    assert g3.total_params == 27_009_346_304 and g3.encoders[0].tokens_per_item == 256


def test_checkpoint_weight_formats():
    assert get_model("deepseek-v3").checkpoint_weights == "fp8-block"
    assert get_model("kimi-k2").checkpoint_weights == "fp8-block"
    assert get_model("gpt-oss-120b").checkpoint_weights == "mxfp4-moe"
    assert get_model("llama-3.1-8b").checkpoint_weights is None
    ct = {"quant_method": "compressed-tensors", "config_groups": {"group_0": {
        "weights": {"num_bits": 4, "type": "int", "group_size": 128}, "input_activations": None}}}
    assert checkpoint_format({"quantization_config": ct})[0] == "int4-gptq"
    ct_fp8 = {"quant_method": "compressed-tensors", "config_groups": {"group_0": {
        "weights": {"num_bits": 8, "type": "float"}, "input_activations": {"num_bits": 8, "type": "float"}}}}
    assert checkpoint_format({"quantization_config": ct_fp8})[0] == "fp8"
    awq = {"quant_method": "awq", "bits": 4, "group_size": 128}
    assert checkpoint_format({"quantization_config": awq})[0] == "int4-awq"
    assert checkpoint_format({"quantization_config": {"quant_method": "gptq", "bits": 4}})[0] == "int4-gptq"
    # ModelOpt NVFP4: nvidia/DeepSeek-R1-FP4's exclude_modules names every layer's self_attn (TensorRT-LLM #5766)
    r1 = {"quant_method": "modelopt", "quant_algo": "NVFP4",
          "exclude_modules": ["lm_head", "model.layers.0.self_attn*", "model.layers.1.self_attn*"]}
    assert checkpoint_format({"quantization_config": r1})[0] == "nvfp4-mlp"
    r1["exclude_modules"] = ["lm_head"]
    assert checkpoint_format({"quantization_config": r1})[0] == "nvfp4"
    bnb = {"quant_method": "bitsandbytes", "load_in_4bit": True, "bnb_4bit_use_double_quant": True}
    assert checkpoint_format({"quantization_config": bnb})[0] == "nf4-dq"
    fmt, note = checkpoint_format({"quantization_config": {"quant_method": "exotic", "bits": 3}})
    assert fmt is None and "--weights" in note


def test_checkpoint_format_is_the_default_and_weights_overrides_with_a_note():
    r = estimate("gpt-oss-120b", "h100-sxm")  # fits one 80 GB GPU as it does in practice
    assert r.deployment.weights.name == "mxfp4-moe" and r.max_batch > 0
    m = get_model("gpt-oss-120b")
    experts = sum(lay.mlp.num_experts * expert_params(lay.mlp, m.hidden_size) for lay in m.layers)
    rest = m.total_params - experts
    assert r.memory.weight_bytes == pytest.approx(experts * 4.25 / 8 + rest * 2)
    assert r.to_dict()["notes"] == []
    forced = estimate("deepseek-v3", "h200", tp=8, weights="fp8").to_dict()
    assert forced["checkpoint_weights"] == "fp8-block" and any("fp8-block" in n for n in forced["notes"])
    assert estimate("kimi-k2", "h200", tp=8).deployment.weights.name == "fp8-block"


def test_a_published_checkpoint_repository_is_its_base_model_in_its_format():
    base, fp8 = get_model("Qwen/Qwen3-32B"), get_model("qwen/qwen3-32b-fp8")  # case-insensitive, as the hub
    assert fp8.name == "Qwen/Qwen3-32B-FP8" and fp8.checkpoint_weights == "fp8" and base.checkpoint_weights is None
    assert fp8.layers == base.layers and fp8.total_params == base.total_params
    assert "catalog/checkpoints.toml" in fp8.checkpoint_note
    r = estimate("Qwen/Qwen3-32B-FP8", "h100-sxm")  # the checkpoint's format is the default, as for DeepSeek-V3
    # by hand: 8 bits for every matrix but the untied embedding and head (2 x 151,936 x 5,120), which stay 16-bit
    embed = 2 * 151_936 * 5_120
    assert r.deployment.weights.name == "fp8"
    assert r.memory.weight_bytes == (base.total_params - embed) * 1 + embed * 2 == 34_317_947_904
    assert get_model("Qwen/Qwen3-32B-AWQ").checkpoint_weights == "int4-awq"
    # a GGUF repository holds one file per format (even where the catalog lists one): the base model, and a note
    # that --weights picks the file
    for repo, base in (("Qwen/Qwen3-32B-GGUF", "Qwen/Qwen3-32B"), ("ggml-org/gpt-oss-20b-GGUF", "openai/gpt-oss-20b")):
        gguf = get_model(repo)
        assert gguf.name == base and gguf.checkpoint_weights == get_model(base).checkpoint_weights
        assert any(f"{repo} publishes {base} as GGUF files" in n and "--weights" in n for n in gguf.notes)
    # a listed repository that is also a catalog id of the same shape takes its published format all the same
    q = get_model("qwen/qwen3-235b-a22b-fp8")
    assert q.name == "Qwen/Qwen3-235B-A22B-FP8" and q.checkpoint_weights == "fp8"
    assert get_model("Qwen/Qwen3-235B-A22B").checkpoint_weights is None
    with pytest.raises(UnknownModelError, match="drop --family"):  # read by its base's reader, as a catalog model
        get_model("Qwen/Qwen3-32B-FP8", family="qwen3")
    with pytest.raises(UnknownModelError, match="Did you mean: .*Qwen/Qwen3-32B-FP8"):
        get_model("Qwen/Qwen3-32B-FP9")
    # a GPU given where the model goes (estimate("h100", "qwen3-8b")) says so
    with pytest.raises(UnknownModelError, match="'h100': that names a GPU .*give the model as --model"):
        estimate("h100", "qwen3-8b")


def test_every_listed_checkpoint_resolves_to_its_base_in_its_format():
    for c in checkpoint_catalog()["checkpoint"]:
        base, m = get_model(c["base"]), get_model(c["repo"])
        assert m.layers == base.layers, c["repo"]
        if "file" in c:  # GGUF: the base, its file picked by --weights
            assert m.name == base.name and m.checkpoint_weights == base.checkpoint_weights, c["repo"]
        else:
            assert m.name == c["repo"] and m.checkpoint_weights == c["weights"], c["repo"]


def test_a_catalog_id_named_for_a_quantized_format_is_priced_in_it():
    # Meta's FP8 releases are catalog `also` ids of their 16-bit models: listed in checkpoints.toml, they take
    # their published format (they were priced bf16)
    suffix = re.compile(r"-(FP8|FP4|NVFP4|MXFP4|AWQ|GPTQ|INT4|INT8|W4A16|W8A8)\b", re.IGNORECASE)
    tagged = [i for m in model_catalog() for i in m.also if suffix.search(i)]
    assert "meta-llama/Llama-3.1-405B-Instruct-FP8" in tagged
    for i in tagged:
        assert get_model(i).checkpoint_weights not in (None, "bf16"), i
    r = estimate("meta-llama/Llama-3.1-405B-Instruct-FP8", "h200", num_gpus=8, tp=8)
    assert r.deployment.weights.name == "fp8"


def test_hub_ids_are_spelt_as_the_catalog_spells_them():
    assert hub_spelling("qwen/qwen3-32b-fp8") == "Qwen/Qwen3-32B-FP8"
    assert hub_spelling("QWEN/QWEN3-8B") == "Qwen/Qwen3-8B"
    assert hub_spelling("meta-llama/llama-3.1-8b-instruct") == "meta-llama/Llama-3.1-8B-Instruct"  # an `also` id
    assert hub_spelling("llama-3.1-8b") is None and hub_spelling("./config.json") is None  # an alias, a path


TINY = {"architectures": ["SuperNewForCausalLM"], "model_type": "supernew", "hidden_size": 64, "num_hidden_layers": 2,
        "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 128, "vocab_size": 100,
        "rms_norm_eps": 1e-6, "rope_theta": 10000, "hidden_act": "silu"}


def test_refusal_names_the_nearest_family_and_the_override():
    with pytest.raises(ModelConfigError, match=r"Nearest supported family: llama .*--family llama"):
        parse_config(TINY, "x")
    near = dict(TINY, architectures=["Glm4MoeLiteForCausalLM"], model_type="glm4_moe_lite")
    with pytest.raises(ModelConfigError, match="Nearest supported family: glm4-moe"):
        parse_config(near, "x")
    m = parse_config(TINY, "x", family="llama")
    assert m.total_params == 2 * (2 * 64 * 64 + 2 * 64 * 32 + 3 * 64 * 128 + 128) + 64 + 2 * 100 * 64
    assert any("mapping is assumed" in n for n in m.notes)
    with pytest.raises(ModelConfigError, match="Did you mean: llama"):
        parse_config(TINY, "x", family="lama")


def test_cli_family_override_warns(tmp_path):
    p = tmp_path / "config.json"
    p.write_text(json.dumps(TINY))
    res = runner.invoke(app, ["estimate", "--model", str(p), "--json"])
    assert isinstance(res.exception, ModelConfigError) and "--family llama" in str(res.exception)
    res = runner.invoke(app, ["estimate", "--model", str(p), "--family", "llama", "--json"])
    assert res.exit_code == 0
    assert "warning: read as family llama" in res.stderr
    assert json.loads(res.stdout)["family"] == "llama"


def test_estimate_json_gives_counts_and_cache_by_kind():
    d = estimate("qwen3-next", "h200", tp=2).to_dict()
    assert d["params"]["total"] == 79_674_391_296 and d["params"]["active"] == 3_874_929_408
    assert d["layers_by_attention_kind"] == {"linear": 36, "full": 12}
    assert d["kv_bytes_per_token_by_kind"] == {"full": 12 * 2 * (2 // 2) * 256 * 2}  # kv heads split over tp=2
    assert d["state_bytes_per_sequence"] == 36 * (16 * 128 * 128 * 2 + 3 * 4096 * 2)  # v heads and channels / tp


def test_every_family_is_registered_once():
    names = [f.name for f in FAMILIES]
    assert len(names) == len(set(names))
    archs = [a for f in FAMILIES for a in f.architectures]
    assert len(archs) == len(set(archs))
    used = {get_model(e.id).family for e in model_catalog()}
    assert used == set(names)  # every registered family reads at least one catalog config


# Added with their Hub safetensors counts (exact, to the weight) and the ids listed under `also` because they
# share a catalog entry's shape (each checked against a copy of its config; see the entry's source).
EXACT_HUB_COUNTS = {
    "Qwen/Qwen3-Coder-480B-A35B-Instruct": 480_154_875_392,
    "deepseek-ai/DeepSeek-R1-Distill-Qwen-1.5B": 1_777_088_000,  # untied head (tie_word_embeddings false)
    "google/gemma-3-4b-it": 4_300_079_472,  # with the SigLIP tower; text only 3,880,263,168
    "google/gemma-3-12b-it": 12_187_325_040,  # with the SigLIP tower; text only 11,766,034,176
    "mistralai/Mistral-Large-Instruct-2407": 122_610_069_504,
}
SHARED_SHAPES = {
    "Qwen/QwQ-32B": "Qwen/Qwen2.5-32B",
    "deepseek-ai/DeepSeek-R1-Distill-Qwen-7B": "Qwen/Qwen2.5-7B",
    "deepseek-ai/DeepSeek-R1-Distill-Llama-8B": "meta-llama/Llama-3.1-8B",
    "deepseek-ai/DeepSeek-R1-Distill-Llama-70B": "meta-llama/Llama-3.3-70B-Instruct",
    "Qwen/Qwen3-Coder-30B-A3B-Instruct": "Qwen/Qwen3-30B-A3B",
}


@pytest.mark.parametrize("model_id", list(EXACT_HUB_COUNTS))
def test_exact_hub_counts(model_id):
    e, m = ENTRIES[model_id], get_model(model_id)
    assert m.checkpoint_params == EXACT_HUB_COUNTS[model_id]
    assert m.checkpoint_params / 1e9 == pytest.approx(
        e.published_params_b, rel=_tolerance(e.published_params_b, e.published_precision_b))
    if e.published_active_params_b is not None:
        tol = _tolerance(e.published_active_params_b, e.published_active_precision_b)
        assert m.active_params / 1e9 == pytest.approx(e.published_active_params_b, rel=tol)


def test_gemma3_text_config_defaults():
    """The multimodal Gemma 3 files leave Gemma3TextConfig's defaults out of text_config: the 4B file has no head
    counts (8 q / 4 kv), the 12B file no head_dim (256, not hidden / heads = 240); the 27B file sets its own."""
    g4, g12, g27 = get_model("gemma-3-4b"), get_model("gemma-3-12b"), get_model("gemma-3-27b")
    assert (g4.num_heads, g4.num_kv_heads, g4.head_dim) == (8, 4, 256)
    assert (g12.num_heads, g12.num_kv_heads, g12.head_dim) == (16, 8, 256)
    assert (g27.num_heads, g27.num_kv_heads, g27.head_dim) == (32, 16, 128)
    assert g4.total_params == 3_880_263_168 and g12.total_params == 11_766_034_176  # text only
    assert g4.encoder_params == 419_816_304 and g12.encoder_params == 421_290_864  # SigLIP tower + projector
    assert g12.layer_windows[0] == 1024 and g12.layer_windows[5] is None


@pytest.mark.parametrize("alias,entry", list(SHARED_SHAPES.items()))
def test_shared_shape_aliases(alias, entry):
    assert alias in ENTRIES[entry].also
    a, e = get_model(alias), get_model(entry)
    assert a is e or replace(a, max_position_embeddings=e.max_position_embeddings) == e  # the shape is the entry's


@pytest.mark.parametrize("model_id", list(EXACT_HUB_COUNTS))
def test_cli_estimate_runs_for_added_models(model_id):
    m = get_model(model_id)
    tp = next(t for t in (1, 2, 4, 8) if m.num_heads % t == 0 and memory_plan(deployment(m, "h200", tp=t)).fits)
    res = runner.invoke(app, ["estimate", "--model", model_id, "--gpu", "h200", "--tp", str(tp), "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["params"]["total"] == m.total_params


def test_an_also_id_can_carry_its_own_context_length():
    """Same shape, other context: Qwen3-2507 checkpoints take 262,144 positions where Qwen3-30B-A3B has 40,960, and
    QwQ-32B 40,960 where Qwen2.5-32B has 131,072 (each checkpoint's config.json); the shapes stay the entry's."""
    from flopwise.specs.model_catalog import get_model

    base, coder = get_model("Qwen/Qwen3-30B-A3B"), get_model("qwen/qwen3-coder-30b-a3b-instruct")
    assert (base.max_position_embeddings, coder.max_position_embeddings) == (40960, 262144)
    assert coder.total_params == base.total_params
    assert get_model("Qwen/QwQ-32B").max_position_embeddings == 40960
    assert get_model("Qwen/Qwen2.5-32B").max_position_embeddings == 131072
    assert get_model("Qwen/Qwen3-30B-A3B-Base").max_position_embeddings == 40960
