"""Model specs from config.json: parameter counts against published figures, KV sizes, errors."""

import json

import pytest

from flopwise.errors import ModelConfigError, UnknownModelError
from flopwise.specs.hf import load_config_file, parse_config
from flopwise.specs.model_catalog import get_model, model_catalog

# (catalog id, published total params in billions, published active, tolerance)
PUBLISHED = [
    ("meta-llama/Llama-3.1-8B", 8.03, None, 0.005),
    ("meta-llama/Llama-3.1-70B", 70.6, None, 0.005),
    ("meta-llama/Llama-3.1-405B", 405.9, None, 0.005),
    ("mistralai/Mixtral-8x7B-v0.1", 46.7, 12.9, 0.005),
    ("deepseek-ai/DeepSeek-V3", 671.0, 37.0, 0.02),
    ("Qwen/Qwen2.5-7B", 7.62, None, 0.005),
    ("Qwen/Qwen3-30B-A3B", 30.5, 3.3, 0.02),
    ("meta-llama/Llama-2-7b-hf", 6.74, None, 0.005),
]


@pytest.mark.parametrize("model_id,total,active,tol", PUBLISHED)
def test_parameter_counts_match_published(model_id, total, active, tol):
    m = get_model(model_id)
    assert m.total_params / 1e9 == pytest.approx(total, rel=tol)
    if active is not None:
        assert m.active_params / 1e9 == pytest.approx(active, rel=tol)


def test_llama_3_1_8b_count_by_hand():
    # per layer: q,o 2*4096*4096 + k,v 2*4096*1024 + MLP 3*4096*14336 + 2 norms of 4096
    per_layer = 2 * 4096 * 4096 + 2 * 4096 * 1024 + 3 * 4096 * 14336 + 2 * 4096
    expected = 32 * per_layer + 4096 + 2 * 128256 * 4096  # final norm, embeddings, untied head
    assert get_model("llama-3.1-8b").total_params == expected == 8_030_261_248


def test_mixtral_active_by_hand():
    m = get_model("mixtral-8x7b")
    expert = 3 * 4096 * 14336
    assert m.total_params - m.active_params == 32 * 6 * expert  # 6 idle experts in each of 32 layers


def test_kv_bytes_per_token_gqa():
    # 32 layers x 8 KV heads x 128 dims x 2 (K and V) x 2 bytes = 131,072 bytes (not the often quoted 0.26 MB)
    m = get_model("llama-3.1-8b")
    assert m.kv_elements_per_token * 2 == 131_072
    assert m.kv_elements_for_length(8192) * 2 == 2**30  # an 8K context is exactly 1 GiB


def test_mla_kv_is_the_latent():
    m = get_model("deepseek-v3")
    assert m.kv_elements_per_token_per_layer == 512 + 64
    assert m.mla is not None and m.num_moe_layers == 58  # 3 dense first layers of 61


def test_sliding_windows_per_layer():
    g2 = get_model("gemma-2-9b")
    assert g2.layer_windows[0] == 4096 and g2.layer_windows[1] is None
    g3 = get_model("gemma-3-27b")
    assert g3.layer_windows[5] is None and g3.layer_windows[0] == 1024  # every 6th layer is global
    assert sum(w is None for w in g3.layer_windows) == 62 // 6
    oss = get_model("gpt-oss-20b")
    assert set(oss.layer_windows) == {128, None}
    # a window caps what a sequence holds: 4096 + 4096 tokens for two layers of gemma-2 at 16K
    per = g2.kv_elements_per_token_per_layer
    assert g2.kv_elements_for_length(16384) == per * (21 * 4096 + 21 * 16384)


def test_explicit_head_dim_wins():
    m = get_model("qwen3-32b")
    assert m.head_dim == 128 and m.hidden_size // m.num_heads == 80


def test_qwen2_sliding_window_ignored_unless_enabled():
    m = get_model("qwen2.5-7b")
    assert set(m.layer_windows) == {None}


def test_falcon_multi_query():
    assert get_model("falcon-7b").num_kv_heads == 1
    assert get_model("falcon-180b").num_kv_heads == 8


def test_every_catalog_entry_parses_and_aliases_resolve():
    for entry in model_catalog():
        m = get_model(entry.id)
        assert m.total_params > 0
        for alias in entry.aliases:
            assert get_model(alias) is m


def test_malformed_json(tmp_path):
    p = tmp_path / "config.json"
    p.write_text("{ not json")
    with pytest.raises(ModelConfigError, match="not valid JSON"):
        load_config_file(tmp_path)


def test_missing_field_is_named():
    raw = {"architectures": ["LlamaForCausalLM"], "hidden_size": 4096, "num_hidden_layers": 32,
           "num_attention_heads": 32, "vocab_size": 32000}
    with pytest.raises(ModelConfigError, match="intermediate_size"):
        parse_config(raw, "x")


def test_unknown_architecture_lists_families():
    with pytest.raises(ModelConfigError, match="Supported families: llama"):
        parse_config({"architectures": ["BertModel"], "model_type": "bert"}, "bert")


def test_bad_head_ratio():
    raw = {"architectures": ["LlamaForCausalLM"], "hidden_size": 64, "num_hidden_layers": 2,
           "num_attention_heads": 6, "num_key_value_heads": 4, "intermediate_size": 128, "vocab_size": 100}
    with pytest.raises(ModelConfigError, match="multiple"):
        parse_config(raw, "x")


def test_unknown_model_suggests():
    with pytest.raises(UnknownModelError, match="llama-3.1-8b"):
        get_model("llama-3.1-8")


def test_config_from_directory(tmp_path):
    raw = {"architectures": ["LlamaForCausalLM"], "hidden_size": 64, "num_hidden_layers": 2,
           "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 128, "vocab_size": 100,
           "tie_word_embeddings": True}
    (tmp_path / "config.json").write_text(json.dumps(raw))
    m = get_model(str(tmp_path))
    # per layer: q,o 2*64*64 + k,v 2*64*32 + mlp 3*64*128 + norms 2*64; final norm; tied embeddings
    assert m.total_params == 2 * (2 * 64 * 64 + 2 * 64 * 32 + 3 * 64 * 128 + 128) + 64 + 100 * 64


def test_opt_13b_parameters_by_hand():
    """OPT-13B (OPTForCausalLM): per layer q/k/v/o of h x h with biases, an ungated ReLU MLP h -> 20480 -> h with
    biases, two LayerNorms (weight + bias); tied embeddings, learned positions of 2048 + 2 rows, a final LayerNorm:
    12.85B, the OPT paper's "13B"."""
    m = get_model("opt-13b")
    h, f, layers, vocab = 5120, 20480, 40, 50272
    per_layer = 4 * (h * h + h) + (h * f + f) + (f * h + h) + 2 * 2 * h
    total = layers * per_layer + vocab * h + (2048 + 2) * h + 2 * h
    assert m.total_params == total == 12_853_473_280
    a = m.layers[0].attention
    assert (a.num_heads, a.num_kv_heads, a.head_dim) == (40, 40, 128) and m.layers[0].mlp.gated is False
    assert m.tie_embeddings and m.per_layer_embedding_params == 2050 * h


def test_opt_with_projected_embeddings_is_refused():
    from flopwise.errors import ModelConfigError
    from flopwise.specs.hf import parse_config

    cfg = {"architectures": ["OPTForCausalLM"], "model_type": "opt", "hidden_size": 1024, "ffn_dim": 4096,
           "num_attention_heads": 16, "num_hidden_layers": 24, "vocab_size": 50272, "max_position_embeddings": 2048,
           "word_embed_proj_dim": 512, "do_layer_norm_before": False}
    with pytest.raises(ModelConfigError, match="word_embed_proj_dim"):
        parse_config(cfg, "facebook/opt-350m")
