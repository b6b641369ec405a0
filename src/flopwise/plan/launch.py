"""Launch commands for a chosen deployment on vLLM, SGLang and TensorRT-LLM, with each engine's real flags.

- vLLM (`vllm serve`, engine args docs): --tensor-parallel-size, --pipeline-parallel-size, --max-num-seqs,
  --max-num-batched-tokens, --gpu-memory-utilization, --kv-cache-dtype {auto,fp8,fp8_e4m3,fp8_e5m2},
  --quantization {awq,gptq,fp8,...}, --enable-prefix-caching / --no-enable-prefix-caching, --block-size,
  --max-model-len, --speculative-config JSON (`vllm/config/speculative.py` methods: ngram, medusa, draft_model,
  eagle, mtp).
- SGLang (`python -m sglang.launch_server`, server arguments docs): --model-path, --tp-size, --pp-size,
  --max-running-requests, --chunked-prefill-size, --mem-fraction-static, --kv-cache-dtype fp8_e4m3,
  --quantization, --disable-radix-cache, --speculative-algorithm/--speculative-num-steps/... (EAGLE also serves
  MTP heads; no Medusa).
- TensorRT-LLM (`trtllm-serve`, PyTorch backend): --tp_size, --pp_size, --max_batch_size, --max_num_tokens,
  --max_seq_len, --kv_cache_free_gpu_memory_fraction, --extra_llm_api_options FILE (YAML: kv_cache_config
  dtype / enable_block_reuse, speculative_config decoding_type Eagle / DraftTarget / NGram / MTP).
Head methods (EAGLE, Medusa) need the head's checkpoint, which a flopwise spec does not name: the commands carry
a `<...>` placeholder for it.
Quantized weights are normally served from a pre-quantized checkpoint (an AWQ/GPTQ/FP8 repo); the flags
below assume the checkpoint named by --model is in the chosen format, and say so in a comment.
"""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass

from flopwise.specs.deployment import Deployment
from flopwise.specs.speculative import SpeculativeSpec

__all__ = ["LaunchCommands", "Speculative", "launch_commands"]

_VLLM_QUANT = {"fp8": "fp8", "int4-awq": "awq", "int4-gptq": "gptq", "int8-w8a8": "compressed-tensors",
               "int8": "compressed-tensors", "w4a8": "compressed-tensors", "nvfp4": "modelopt_fp4",
               "mxfp4": "mxfp4", "q8_0": "gguf", "q4_0": "gguf", "q4_k_m": "gguf"}
_SGLANG_QUANT = {"fp8": "fp8", "int4-awq": "awq", "int4-gptq": "gptq", "int8-w8a8": "w8a8_int8",
                 "w4a8": "w4afp8", "nvfp4": "modelopt_fp4", "mxfp4": "mxfp4", "q4_k_m": "gguf", "q4_0": "gguf",
                 "q8_0": "gguf"}
_TRT_QUANT = {"fp8": "FP8", "int4-awq": "W4A16_AWQ", "int4-gptq": "W4A16_GPTQ", "int8-w8a8": "W8A8_SQ_PER_CHANNEL",
              "int8": "W8A16", "w4a8": "W4A8_AWQ", "nvfp4": "NVFP4"}


_HEAD_PLACEHOLDER = {"eagle": "<EAGLE head checkpoint>", "medusa": "<Medusa heads checkpoint>"}


@dataclass(frozen=True, slots=True)
class Speculative:
    method: str  # "draft", "eagle", "mtp", "medusa", "ngram" (as in specs/speculative.py)
    num_speculative_tokens: int
    draft_model: str | None = None  # a draft model or head checkpoint

    @classmethod
    def of(cls, spec: SpeculativeSpec | None) -> Speculative | None:
        """The launch settings of a deployment's speculative decoding (None: plain decoding)."""
        if spec is None:
            return None
        draft = spec.draft_model.name if spec.draft_model is not None else _HEAD_PLACEHOLDER.get(spec.method)
        return cls(spec.method, spec.k, draft)


@dataclass(frozen=True, slots=True)
class LaunchCommands:
    vllm: str
    sglang: str
    trtllm: str
    trtllm_extra_options_yaml: str

    def to_dict(self) -> dict[str, str]:
        return {"vllm": self.vllm, "sglang": self.sglang, "trtllm": self.trtllm,
                "trtllm_extra_llm_api_options": self.trtllm_extra_options_yaml}


def _join(parts: list[str]) -> str:
    return " \\\n    ".join(parts)


def launch_commands(dep: Deployment, *, max_model_len: int, prefix_caching: bool = True,
                    speculative: Speculative | None = None, model_id: str | None = None) -> LaunchCommands:
    model = shlex.quote(model_id or dep.model.name)
    kv_fp8 = dep.kv.name == "fp8"
    w = dep.weights.name
    # vLLM
    v = [f"vllm serve {model}", f"--tensor-parallel-size {dep.tp}"]
    if dep.pp > 1:
        v.append(f"--pipeline-parallel-size {dep.pp}")
    v += [f"--max-num-seqs {dep.max_num_seqs}", f"--max-num-batched-tokens {dep.max_num_batched_tokens}",
          f"--max-model-len {max_model_len}", f"--gpu-memory-utilization {dep.gpu_memory_utilization:g}"]
    if w in _VLLM_QUANT:
        v.append(f"--quantization {_VLLM_QUANT[w]}")
    if kv_fp8:
        v.append("--kv-cache-dtype fp8")
    v.append("--enable-prefix-caching" if prefix_caching else "--no-enable-prefix-caching")
    if speculative:
        cfg: dict[str, object] = {"num_speculative_tokens": speculative.num_speculative_tokens}
        if speculative.method == "ngram":
            cfg.update(method="ngram", prompt_lookup_max=4)
        else:
            cfg.update(method={"draft": "draft_model"}.get(speculative.method, speculative.method))
            if speculative.draft_model:
                cfg["model"] = speculative.draft_model
        v.append(f"--speculative-config {shlex.quote(json.dumps(cfg))}")
    # SGLang
    s = [f"python -m sglang.launch_server --model-path {model}", f"--tp-size {dep.tp}"]
    if dep.pp > 1:
        s.append(f"--pp-size {dep.pp}")
    s += [f"--max-running-requests {dep.max_num_seqs}", f"--chunked-prefill-size {dep.max_num_batched_tokens}",
          f"--context-length {max_model_len}", f"--mem-fraction-static {dep.gpu_memory_utilization:g}"]
    if w in _SGLANG_QUANT:
        s.append(f"--quantization {_SGLANG_QUANT[w]}")
    if kv_fp8:
        s.append("--kv-cache-dtype fp8_e4m3")
    if not prefix_caching:
        s.append("--disable-radix-cache")
    if speculative and speculative.method in ("eagle", "mtp", "draft"):
        s += ["--speculative-algorithm STANDALONE" if speculative.method == "draft" else "--speculative-algorithm EAGLE",
              f"--speculative-num-steps {speculative.num_speculative_tokens}", "--speculative-eagle-topk 1",
              f"--speculative-num-draft-tokens {speculative.num_speculative_tokens + 1}"]
        if speculative.draft_model and speculative.method != "mtp":
            s.append(f"--speculative-draft-model-path {shlex.quote(speculative.draft_model)}")
    # TensorRT-LLM
    t = [f"trtllm-serve {model}", "--backend pytorch", f"--tp_size {dep.tp}"]
    if dep.pp > 1:
        t.append(f"--pp_size {dep.pp}")
    t += [f"--max_batch_size {dep.max_num_seqs}", f"--max_num_tokens {dep.max_num_batched_tokens}",
          f"--max_seq_len {max_model_len}", f"--kv_cache_free_gpu_memory_fraction {dep.gpu_memory_utilization:g}",
          "--extra_llm_api_options extra-llm-api-options.yml"]
    yaml_lines = ["kv_cache_config:", f"  enable_block_reuse: {'true' if prefix_caching else 'false'}"]
    if kv_fp8:
        yaml_lines.append("  dtype: fp8")
    kind = {"eagle": "Eagle", "draft": "DraftTarget", "ngram": "NGram", "mtp": "MTP"}.get(
        speculative.method if speculative else "")
    if speculative and kind == "MTP":
        yaml_lines += ["speculative_config:", "  decoding_type: MTP",
                       f"  num_nextn_predict_layers: {speculative.num_speculative_tokens}"]
    elif speculative and kind:
        yaml_lines += ["speculative_config:", f"  decoding_type: {kind}",
                       f"  max_draft_len: {speculative.num_speculative_tokens}"]
        if speculative.draft_model:
            yaml_lines.append(f"  speculative_model_dir: {speculative.draft_model}")
    note = ""
    if w in _TRT_QUANT:
        note = f"  # serve a checkpoint quantized to {_TRT_QUANT[w]} (e.g. with TensorRT Model Optimizer)"
    return LaunchCommands(vllm=_join(v), sglang=_join(s), trtllm=_join(t) + note,
                          trtllm_extra_options_yaml="\n".join(yaml_lines) + "\n")
