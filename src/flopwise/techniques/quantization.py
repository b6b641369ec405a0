"""Quantization: fewer bytes per weight or per cached token, at a risk to quality.

The cost model already knows what a format does (`specs/precision.py`): bytes per weight including scales,
the dtype the GEMM multiplies in (weight-only formats dequantize to 16-bit; W8A8 and FP8 multiply in 8 bits
where the chip can, `HardwareSpec.compute_dtype`), the dequantization cost, and KV bytes per element. This
module only swaps the formats on a deployment and says what is at stake for quality.

Effects, all through the cost model: decode reads ~bits/16 of the 16-bit weight bytes (the layers; GPU
formats keep embeddings and the LM head in 16-bit), so memory-bound steps speed up by up to 16/bits; a larger
KV pool (smaller weights) and fewer bytes per cached token (KV formats) admit more sequences; compute-bound
prefill only gains where the chip multiplies the narrower format natively (FP8 on Hopper/Ada, FP4 on Blackwell).

Accuracy notes are typical published quality deltas, not guarantees: they depend on the model, the calibration
and the task. Check on your own evaluation before shipping.
"""

from __future__ import annotations

from dataclasses import replace

from flopwise.specs.precision import kv_format, weight_format
from flopwise.techniques.rating import Rating
from flopwise.techniques.scenario import Scenario, rebuild

__all__ = ["WEIGHT_RISKS", "KV_RISKS", "weight_risk", "kv_risk", "weight_format_name", "kv_format_name", "quantize",
           "native_compute"]

_AWQ = "Lin et al. 2024, AWQ (MLSys), Table 4"
_LLAMACPP = "llama.cpp tools/quantize/quantize.cpp QUANT_OPTIONS (WikiText-2 perplexity, Llama-3-8B)"
_KURTIC = "Kurtic et al. 2024, 'Give Me BF16 or Give Me Death? Accuracy-Performance Trade-Offs in LLM Quantization'"

WEIGHT_RISKS: dict[str, Rating] = {
    "fp32": Rating("none", "reference precision"),
    "bf16": Rating("none", "the precision models are released in"),
    "fp16": Rating("none", "lossless for bf16-trained models except rare overflow in very large activations"),
    "fp8": Rating("low", "W8A8 FP8 (e4m3) recovers ~99-100% of bf16 scores on Llama-3.1 8B-405B (OpenLLM, Arena-Hard)",
                f"Micikevicius et al. 2022, 'FP8 Formats for Deep Learning'; {_KURTIC}"),
    "int8": Rating("low", "int8 weight-only, per-channel: typically < 0.05 WikiText-2 perplexity",
                 f"Dettmers et al. 2022, LLM.int8(); Frantar et al. 2023, GPTQ; {_LLAMACPP}: q8_0 +0.003"),
    "int8-w8a8": Rating("low", "SmoothQuant W8A8 stays within ~0.1 perplexity / <1% zero-shot of fp16 (OPT, BLOOM, "
                      "Llama-2); naive int8 activations collapse above ~6.7B parameters (outlier channels)",
                      f"Xiao et al. 2023, SmoothQuant (ICML); {_KURTIC}: W8A8-INT 1-3% lower when tuned"),
    "int4-awq": Rating("medium", "Llama-2-7B WikiText-2 perplexity 5.47 -> 5.60, 70B 3.32 -> 3.41 (int4 g128); "
                     "larger drops on Llama-3 and on reasoning/code tasks", _AWQ),
    "int4-gptq": Rating("medium", "Llama-2-7B WikiText-2 perplexity 5.47 -> ~5.6-5.9 (int4 g128; depends on "
                      "act-order and calibration data)", f"Frantar et al. 2023, GPTQ (ICLR); {_AWQ}"),
    "w4a8": Rating("medium", "4-bit weights with 8-bit activations: ~0.1-0.3 WikiText-2 perplexity over fp16 on "
                 "Llama-2 with careful (progressive, g128) quantization", "Lin et al. 2024, QServe (W4A8KV4)"),
    "nvfp4": Rating("medium", "NVFP4 post-training quantization: ~1% lower than FP8 on reasoning benchmarks "
                  "(DeepSeek-R1); smaller models lose more", "NVIDIA 2025, 'Introducing NVFP4' (technical blog)"),
    "nvfp4-mlp": Rating("medium", "NVFP4 on the MLPs with attention kept in bf16, NVIDIA's DeepSeek-R1 FP4 recipe: "
                      "~1% lower than FP8 on reasoning benchmarks",
                      "NVIDIA 2025, 'Introducing NVFP4' (technical blog)"),
    "mxfp4": Rating("high", "direct-cast MXFP4 weights lose noticeably without quantization-aware training (scale "
                  "per 32 is coarse); low only for models trained for it (gpt-oss MoE weights)",
                  "Rouhani et al. 2023, 'Microscaling Data Formats for Deep Learning'; OCP MX spec v1.0"),
    "fp8-block": Rating("none", "the checkpoint's own format where it ships in it (DeepSeek-V3/V3.2, Kimi-K2: trained "
                      "with 128x128 block-scaled FP8); post-training block FP8 of a bf16 model is close to W8A8 FP8",
                      "DeepSeek-AI 2024, DeepSeek-V3 Technical Report §3.3 (FP8 training)"),
    "mxfp4-moe": Rating("none", "gpt-oss's own checkpoint format (experts post-trained in MXFP4); as a cast of another "
                      "model's experts it carries MXFP4's risk", "OpenAI 2025, gpt-oss model card"),
    "mxfp4_moe": Rating("low", "gpt-oss's own MXFP4 experts; its other matrices (attention, embeddings, output) "
                      "re-quantized from bf16 to Q8_0, which costs a Llama-3-8B +0.0026 WikiText-2 perplexity",
                      _LLAMACPP),
    "nf4": Rating("medium", "QLoRA NF4 (4-bit NormalFloat) base weights: used for fine-tuning; as an inference "
                "format about int4-g64 quality", "Dettmers et al. 2023, QLoRA"),
    "nf4-dq": Rating("medium", "NF4 with double-quantized scales: the same values as nf4, 0.37 bits per weight less "
                   "memory", "Dettmers et al. 2023, QLoRA §2"),
    "q8_0": Rating("low", "+0.0026 WikiText-2 perplexity on Llama-3-8B", _LLAMACPP),
    "q4_0": Rating("medium", "+0.4685 WikiText-2 perplexity on Llama-3-8B", _LLAMACPP),
    "q4_k_m": Rating("medium", "+0.1754 WikiText-2 perplexity on Llama-3-8B", _LLAMACPP),
    "q6_k": Rating("low", "+0.0217 WikiText-2 perplexity on Llama-3-8B", _LLAMACPP),
    "q5_k_m": Rating("low", "+0.0569 WikiText-2 perplexity on Llama-3-8B", _LLAMACPP),
    "q5_k_s": Rating("medium", "+0.1049 WikiText-2 perplexity on Llama-3-8B", _LLAMACPP),
    "q4_k_s": Rating("medium", "+0.2689 WikiText-2 perplexity on Llama-3-8B", _LLAMACPP),
    "q3_k_l": Rating("medium", "+0.5562 WikiText-2 perplexity on Llama-3-8B", _LLAMACPP),
    "q3_k_m": Rating("medium", "+0.6569 WikiText-2 perplexity on Llama-3-8B", _LLAMACPP),
    "q3_k_s": Rating("high", "+1.6321 WikiText-2 perplexity on Llama-3-8B", _LLAMACPP),
    "q2_k": Rating("high", "+3.5199 WikiText-2 perplexity on Llama-3-8B", _LLAMACPP),
}

KV_RISKS: dict[str, Rating] = {
    "fp32": Rating("none", "reference precision"),
    "bf16": Rating("none", "the activation precision"),
    "fp16": Rating("none", "the activation precision"),
    "fp8": Rating("low", "FP8 KV cache with per-tensor scales: within noise of bf16 on common benchmarks",
                "vLLM docs, 'Quantized KV Cache'; TensorRT-LLM FP8 KV cache"),
    "int8": Rating("low", "int8 KV with per-head scales: near-identical scores (LMDeploy evaluation)",
                 "LMDeploy docs, 'INT4/INT8 KV Cache'"),
    "int4": Rating("medium", "4-bit KV: < 0.1-0.3 perplexity with per-channel keys and per-token values; simple "
                 "per-token groups lose more, especially at long context",
                 "Liu et al. 2024, KIVI; Hooper et al. 2024, KVQuant"),
}


def weight_risk(name: str) -> Rating:
    return WEIGHT_RISKS.get(name, Rating("medium", f"no published delta on file for {name}: evaluate it"))


def kv_risk(name: str) -> Rating:
    return KV_RISKS.get(name, Rating("medium", f"no published delta on file for KV format {name}: evaluate it"))


def weight_format_name(name: str) -> str:
    """The canonical name of a weight format (aliases resolved; unknown names raise PrecisionError)."""
    return weight_format(name).name


def kv_format_name(name: str) -> str:
    return kv_format(name).name


def quantize(scn: Scenario, *, weights: str | None = None, kv: str | None = None) -> Scenario:
    """`scn` with its weight and/or KV format changed (names as in `flopwise estimate --weights/--kv`)."""
    changes = {k: v for k, v in (("weights", weights), ("kv", kv)) if v is not None}
    return replace(scn, deployment=rebuild(scn.deployment, **changes))


def native_compute(scn: Scenario) -> bool:
    """Whether the chip multiplies the weight format's compute dtype natively (False: a weight-only fallback
    kernel dequantizes to 16-bit, e.g. FP8 on A100 or FP4 on H100)."""
    dep = scn.deployment
    want = dep.weights.compute
    return dep.hardware.compute_dtype(want) == want
