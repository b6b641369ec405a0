"""Number formats for weights and the KV cache: bytes moved and the math the hardware actually runs.

Bits per weight include the scale (and zero-point) overhead of each format's grouping:
- int4 AWQ / GPTQ, group 128: 4 bits + one fp16 scale + one 4-bit zero per 128 weights
  = 4 + (16 + 4) / 128 = 4.156 bits (AutoAWQ / AutoGPTQ packing).
- nvfp4: e2m1 values + one fp8 (e4m3) scale per 16 = 4 + 8/16 = 4.5 bits (NVIDIA Blackwell NVFP4).
- mxfp4: e2m1 values + one e8m0 scale per 32 = 4 + 8/32 = 4.25 bits (OCP Microscaling spec v1.0).
- GGUF q8_0: 32 int8 + one fp16 scale = 34 bytes / 32 = 8.5 bits; q4_0: 18 bytes / 32 = 4.5 bits;
  q4_k_m: a mix of q4_K (4.5 bits) and q6_K (6.56 bits) tensors, about 4.85 bits over a Llama model
  (llama.cpp `quantize` reports 4.58 GiB for Llama-3-8B = 4.9 bits including its q6_K output layer).
  The other k-quant mixes from the same table (tools/quantize/quantize.cpp QUANT_OPTIONS, the file size of
  Llama-3-8B's 8.03e9 weights in GiB x 8 x 2^30 / 8.03e9, each mix's wider output and attention tensors
  included): q2_k 2.96 GiB = 3.17 bits, q3_k_s 3.41 = 3.65, q3_k_m 3.74 = 4.00, q3_k_l 4.03 = 4.31, q4_k_s
  4.37 = 4.67, q5_k_s 5.21 = 5.57, q5_k_m 5.33 = 5.70, q6_k 6.14 = 6.57 (q6_K's own 210 bytes / 256 = 6.56).
- int8 weight-only and per-channel fp8 carry one scale per output channel: negligible, counted as 8 bits.
- fp8-block: e4m3 values + one fp32 scale per 128 x 128 block = 8 + 32/16384 bits (DeepSeek-V3's checkpoint
  format, `weight_block_size: [128, 128]`; Kimi-K2, GLM-4.x FP8, Qwen3 FP8 ship the same).
- nvfp4-mlp: NVFP4 on every MLP (routed and shared experts, the dense layers' MLPs), the attention projections
  16-bit: NVIDIA's first ModelOpt FP4 checkpoint of DeepSeek-R1 (nvidia/DeepSeek-R1-FP4: its hf_quant_config
  `exclude_modules` lists the LM head and every layer's `self_attn*`, TensorRT-LLM issue #5766's load log; read so
  from any checkpoint's config, `specs/hf/quantization.py`); the -v2 checkpoints quantize `o_proj` too (two thirds of
  MLA's projection weights) and are priced as `nvfp4`.
- mxfp4-moe: MXFP4 on the routed experts only, every other weight 16-bit (gpt-oss's checkpoint: attention,
  router, embeddings and LM head are in `modules_to_not_convert`).
- mxfp4_moe: llama.cpp's GGUF of the same model (file type MXFP4_MOE, ggml-org's gpt-oss GGUFs: the loader lists
  f32 289 / q8_0 98 / mxfp4 72 tensors for gpt-oss-20b, 11.27 GiB, 4.63 bits per weight): the 72 expert matrices
  MXFP4, the 96 attention matrices, embeddings and output Q8_0 (8.5 bits), norms and biases f32 (negligible).
- nf4 (bitsandbytes `load_in_4bit`): 4-bit NormalFloat + one fp32 absmax per 64 = 4.5 bits; with double
  quantization (`bnb_4bit_use_double_quant`) the absmax is itself 8-bit per 256 blocks: 4 + 8/64 + 32/16384
  = 4.127 bits (Dettmers et al. 2023, QLoRA §2). Dequantized and multiplied in 16-bit, slowly: its GEMM and
  weight-read efficiencies (0.5 each) are assumed, not measured (no bitsandbytes row in the dev set).

`compute` is the dtype whose tensor-core peak multiplies the GEMM: weight-only formats are dequantized
and multiplied in 16-bit (Marlin / AWQ kernels), W8A8 formats multiply in int8 or fp8. Dequantization
costs compute: `gemm_efficiency` scales the compute roof of weight-only formats once a GEMM is
compute-bound (Marlin, Frantar et al. 2024, stays near the ideal 4x only up to batch ~16-32; GGUF
dequantization in llama.cpp is slower still). Memory-bound, the unpacking and scaling work keeps common
dequantizing GEMV kernels below the bandwidth a 16-bit GEMV reaches: `weight_read_efficiency`
(measured batch-1 decode: gpt-fast int4 on A100 ~ 0.45 and int8 ~ 0.75 of the 16-bit rate per byte; AWQ's
own kernels ~ 0.55; llama.cpp q4_0 / q4_K ~ 0.85 on RTX 3090/4090 and Apple M-series; see
benchmarks/data/measured-dev.csv). Engines with Marlin kernels (vLLM from 0.5.3, SGLang) run the int4 AWQ / GPTQ
and 8-bit GPTQ formats (`marlin`) at their own rate, `KernelFactors.marlin_weight_read`, on NVIDIA GPUs of
compute capability 8.0+ (those with bf16 peaks in the catalog). Where the hardware
lacks that peak (fp8 on A100, fp4 on H100), engines fall back to weight-only kernels in 16-bit: see
`HardwareSpec.peak_flops`; such a fallback GEMM reaches 0.85 of the 16-bit rate unless the format says otherwise.
MXFP4 (gpt-oss's experts) on a chip without FP4 math runs OpenAI's triton_kernels matmul_ogs or a Marlin MXFP4
kernel, upcasting e2m1 values and e8m0 scales to bf16 inside the mainloop: `gemm_efficiency` 0.5, fitted on the 140
dev rows of gpt-oss-120b / 20b on H100 / H200 / A100 / MI300X / GeForce under vLLM, SGLang and TensorRT-LLM
(0.85 / 0.6 / 0.5 / 0.45 / 0.4: 10.4 / 8.9 / 9.2 / 9.1 / 9.0% median; their 35 online TTFT rows 26 / 17 / 13 /
10 / 9%, signed -25 / -17 / -10 / -8 / -4%, while TPOT goes +3 / +4 / +6 / +6 / +7%): the prefill and the
prompt chunks of mixed steps are compute-bound, decode is not. Re-checked once the checkpoint's 16-bit GEMMs (the
projections; `experts_only`) ran at their own bf16 rate rather than the experts' (`cost/step.py Roofs.dense_rate`):
0.6 / 0.5 / 0.4 score 7.4 / 7.2 / 7.7% median over the 320 dev rows in MXFP4.
Block-scaled FP8 (`fp8-block`: DeepSeek-V3's 128x128 weight blocks, 1x128 activation groups) applies a scale per
128-deep slice of every dot product: DeepGEMM and the CUTLASS / Triton / AITER block-FP8 GEMMs promote the FP8
tensor-core partial sums to FP32 on the CUDA cores at each block, which costs FP8 tensor-core throughput:
`gemm_efficiency` 0.55 of the FP8 roof, fitted on the 145 dev rows labelled with that format (DeepSeek-V3/R1,
Kimi-K2, MiniMax-M2, Qwen3-Coder-480B, GLM on H100 / H200 / B200 / MI300X / MI355X under SGLang, vLLM and
TensorRT-LLM; 1 / 0.75 / 0.65 / 0.55 / 0.45: 15.1 / 13.1 / 12.6 / 12.6 / 12.5% median; their 41 online TTFT rows
35 / 34 / 33 / 23 / 20%, signed -30 / -23 / -19 / -13 / -5%; their 7 ITL rows 7 / 11 / 11 / 16 / 29%). The 103
DeepSeek rows labelled fp8 run the same block-scaled checkpoint and move with them (all 248: 19.9 -> 18.0%). On a
chip without FP8 math the format runs through a weight-only kernel, which scales nothing in FP8: the generic 0.85.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from flopwise.errors import PrecisionError, suggest

if TYPE_CHECKING:  # annotations only: precision stays importable without the model and hardware specs
    from flopwise.specs.hardware import HardwareSpec
    from flopwise.specs.model import ModelSpec

__all__ = ["WeightFormat", "KVFormat", "WEIGHT_FORMATS", "KV_FORMATS", "GGUF_FORMATS", "GGUF_STEPS", "weight_format",
           "kv_format", "default16", "default_weights", "gguf_counterpart"]


@dataclass(frozen=True, slots=True, kw_only=True)
class WeightFormat:
    name: str
    bits_per_weight: float
    compute: str  # dtype of the multiply: fp32, bf16, fp16, fp8, int8, fp4
    activation_bytes: int  # bytes per activation element moved between kernels
    quantizes_embeddings: bool  # GGUF quantizes embeddings/output; GPU formats keep them 16-bit
    description: str
    # compute-bound GEMM speed vs a plain GEMM in its math: the dequantization of a weight-only format (vs 16-bit),
    # the per-block scaling of a block-scaled W8A8 one (`group_quantizes_activations`, vs per-tensor FP8)
    gemm_efficiency: float = 1.0
    weight_read_efficiency: float = 1.0  # achieved share of the bandwidth roof when streaming these weights
    experts_only: bool = False  # the format covers routed experts; every other weight stays 16-bit
    # where experts_only: the bits of every weight outside the routed experts (a GGUF file's own type for them, e.g.
    # Q8_0's 8.5 in llama.cpp's MXFP4_MOE files); None: 16-bit
    dense_bits_per_weight: float | None = None
    # the attention projections stay 16-bit while every MLP (routed and shared experts, dense MLPs) is in the format:
    # NVIDIA's first ModelOpt NVFP4 checkpoint of DeepSeek-R1, whose hf_quant_config excludes `self_attn*`
    attention_16bit: bool = False
    # activations quantized per 1x128 token group by a kernel of their own before each GEMM (vLLM and SGLang
    # `per_token_group_quant_fp8` for block-scaled FP8): one more launch per GEMM where steps run eagerly
    group_quantizes_activations: bool = False
    # weight-only integer weights that Marlin kernels run (vLLM's awq_marlin / gptq_marlin, SGLang's, on NVIDIA
    # compute capability 8.0+: uint4 with zero points for AWQ, uint4b8 and uint8b128 for GPTQ's 4 and 8 bits): an
    # engine that has them streams these at its own `KernelFactors.marlin_weight_read`
    marlin: bool = False
    # OCP MXFP4 weights (e2m1 + e8m0 per 32): what they multiply on datacenter Blackwell is the engine's choice
    # (`KernelFactors.mxfp4_activation`: FP4, MXFP8 or 16-bit activations)
    mx_fp4: bool = False
    # the GGUF file type this format is (llama.cpp's `llama-quantize` name, e.g. Q4_K_M); None: not a GGUF type
    gguf_type: str | None = None
    # llama.cpp's int8 MMQ rate on this type relative to the legacy types' (q4_0, q8_0): a k-quant tile unpacks 6-bit
    # sub-block scales and mins before its int8 MMAs (`KernelFactors.mmq_compute` is the legacy types' share)
    mmq_rate: float = 1.0

    @property
    def bytes_per_weight(self) -> float:
        """Bytes per weight of the weights the format covers (all, or the routed experts)."""
        return self.bits_per_weight / 8.0

    @property
    def dense_bytes_per_weight(self) -> float:
        """Bytes per weight outside the routed experts (attention, dense MLPs, shared experts, router)."""
        if self.experts_only:
            return 2.0 if self.dense_bits_per_weight is None else self.dense_bits_per_weight / 8.0
        return self.bits_per_weight / 8.0

    @property
    def attention_bytes_per_weight(self) -> float:
        """Bytes per weight of the attention projections: 16-bit where the format leaves them so
        (`attention_16bit`), else as the other weights outside the routed experts."""
        return 2.0 if self.attention_16bit else self.dense_bytes_per_weight

    @property
    def embed_bytes_per_weight(self) -> float:
        """Bytes per weight of the embedding and output matrices: the format's own where it quantizes them (GGUF:
        the type of the file's non-expert matrices), else 16-bit (32 for fp32)."""
        if self.quantizes_embeddings:
            return self.dense_bytes_per_weight
        return 4.0 if self.name == "fp32" else 2.0


@dataclass(frozen=True, slots=True, kw_only=True)
class KVFormat:
    name: str
    bytes_per_element: float
    description: str


# llama.cpp's MMQ on a k-quant against Q4_0, the same model, card and build: Q5_K_S / Q4_0 = 11,099 / 12,014 = 0.92
# (ubatch 1024) and 10,063 / 10,706 = 0.94 (ubatch 2048), Llama-3-8B pp2048 on an RTX 4090 (PR #8495's tables)
_K_QUANT_MMQ = 0.93

_GGUF_NOTE = ("GGUF block quantization (llama.cpp); dequantized and multiplied in 16-bit, or in int8 where the "
              "engine's kernels do (KernelFactors.quantized_gemm_dtype: llama.cpp's MMQ since PR #7676)")

WEIGHT_FORMATS: dict[str, WeightFormat] = {
    f.name: f
    for f in (
        WeightFormat(name="fp32", bits_per_weight=32, compute="fp32", activation_bytes=4, quantizes_embeddings=False,
                     description="full precision"),
        WeightFormat(name="bf16", bits_per_weight=16, compute="bf16", activation_bytes=2, quantizes_embeddings=False,
                     description="bfloat16"),
        WeightFormat(name="fp16", bits_per_weight=16, compute="fp16", activation_bytes=2, quantizes_embeddings=False,
                     description="float16"),
        WeightFormat(name="fp8", bits_per_weight=8, compute="fp8", activation_bytes=2, quantizes_embeddings=False,
                     description="FP8 e4m3 weights and activations (W8A8), per-tensor scales"),
        WeightFormat(name="fp8-block", bits_per_weight=8 + 32 / 16384, compute="fp8", activation_bytes=2,
                     quantizes_embeddings=False, group_quantizes_activations=True, gemm_efficiency=0.55,
                     description="FP8 e4m3 weights and activations, one fp32 scale per 128x128 weight block and "
                                 "per 1x128 activation group (DeepSeek-V3 checkpoints)"),
        WeightFormat(name="int8", bits_per_weight=8, compute="fp16", activation_bytes=2, quantizes_embeddings=False,
                     description="int8 weight-only, per-channel scales (W8A16)", gemm_efficiency=0.85,
                     weight_read_efficiency=0.75, marlin=True),
        WeightFormat(name="int8-w8a8", bits_per_weight=8, compute="int8", activation_bytes=2,
                     quantizes_embeddings=False, description="int8 weights and activations (SmoothQuant W8A8)"),
        WeightFormat(name="int4-awq", bits_per_weight=4 + 20 / 128, compute="fp16", activation_bytes=2,
                     quantizes_embeddings=False, description="AWQ int4 weight-only, group 128 (W4A16)",
                     gemm_efficiency=0.8, weight_read_efficiency=0.55, marlin=True),
        WeightFormat(name="int4-gptq", bits_per_weight=4 + 20 / 128, compute="fp16", activation_bytes=2,
                     quantizes_embeddings=False, description="GPTQ int4 weight-only, group 128 (W4A16)",
                     gemm_efficiency=0.8, weight_read_efficiency=0.55, marlin=True),
        WeightFormat(name="w4a8", bits_per_weight=4 + 20 / 128, compute="int8", activation_bytes=2,
                     quantizes_embeddings=False, description="int4 weights, int8 activations (QServe W4A8)",
                     gemm_efficiency=0.85, weight_read_efficiency=0.8),
        WeightFormat(name="nvfp4", bits_per_weight=4.5, compute="fp4", activation_bytes=2, quantizes_embeddings=False,
                     description="NVFP4: e2m1 + fp8 scale per 16 (Blackwell)"),
        WeightFormat(name="nvfp4-mlp", bits_per_weight=4.5, compute="fp4", activation_bytes=2,
                     quantizes_embeddings=False, attention_16bit=True,
                     description="NVFP4 MLPs (routed and shared experts, dense layers), attention projections bf16 "
                                 "(nvidia/DeepSeek-R1-FP4)"),
        WeightFormat(name="mxfp4", bits_per_weight=4.25, compute="fp4", activation_bytes=2, quantizes_embeddings=False,
                     description="MXFP4: e2m1 + e8m0 scale per 32 (OCP MX)", gemm_efficiency=0.5, mx_fp4=True),
        WeightFormat(name="mxfp4-moe", bits_per_weight=4.25, compute="fp4", activation_bytes=2,
                     quantizes_embeddings=False, gemm_efficiency=0.5, mx_fp4=True,
                     description="MXFP4 routed experts, other weights bf16 (gpt-oss checkpoints)", experts_only=True),
        WeightFormat(name="mxfp4_moe", bits_per_weight=4.25, compute="fp4", activation_bytes=2,
                     quantizes_embeddings=True, experts_only=True, dense_bits_per_weight=8.5,
                     description="GGUF MXFP4 MoE (llama.cpp file type MXFP4_MOE, ggml-org's gpt-oss GGUFs): routed "
                                 "experts MXFP4, every other matrix Q8_0, embeddings and output too",
                     gemm_efficiency=0.7, weight_read_efficiency=0.85, gguf_type="MXFP4_MOE"),
        WeightFormat(name="nf4", bits_per_weight=4.5, compute="fp16", activation_bytes=2, quantizes_embeddings=False,
                     description="bitsandbytes NF4, fp32 absmax per 64 (W4A16)", gemm_efficiency=0.5,
                     weight_read_efficiency=0.5),
        WeightFormat(name="nf4-dq", bits_per_weight=4 + 8 / 64 + 32 / 16384, compute="fp16", activation_bytes=2,
                     quantizes_embeddings=False, description="bitsandbytes NF4 with double-quantized absmax (QLoRA)",
                     gemm_efficiency=0.5, weight_read_efficiency=0.5),
        WeightFormat(name="q8_0", bits_per_weight=8.5, compute="fp16", activation_bytes=2, quantizes_embeddings=True,
                     description=_GGUF_NOTE, gemm_efficiency=0.7, weight_read_efficiency=0.85, gguf_type="Q8_0"),
        WeightFormat(name="q4_0", bits_per_weight=4.5, compute="fp16", activation_bytes=2, quantizes_embeddings=True,
                     description=_GGUF_NOTE, gemm_efficiency=0.7, weight_read_efficiency=0.85, gguf_type="Q4_0"),
        WeightFormat(name="q4_k_m", bits_per_weight=4.85, compute="fp16", activation_bytes=2, quantizes_embeddings=True,
                     description=_GGUF_NOTE, gemm_efficiency=0.6, weight_read_efficiency=0.85, gguf_type="Q4_K_M",
                     mmq_rate=_K_QUANT_MMQ),
        # the other k-quant mixes run the same k-quant kernels as q4_k_m: its efficiencies (not fitted apart)
        *(WeightFormat(name=gguf.lower(), bits_per_weight=bits, compute="fp16", activation_bytes=2,
                       quantizes_embeddings=True, description=_GGUF_NOTE, gemm_efficiency=0.6,
                       weight_read_efficiency=0.85, gguf_type=gguf, mmq_rate=_K_QUANT_MMQ)
          for gguf, bits in (("Q6_K", 6.57), ("Q5_K_M", 5.70), ("Q5_K_S", 5.57), ("Q4_K_S", 4.67),
                             ("Q3_K_L", 4.31), ("Q3_K_M", 4.00), ("Q3_K_S", 3.65), ("Q2_K", 3.17))),
    )
}

# the GGUF types, in the order above (what llama.cpp serves beside 16- and 32-bit floats)
GGUF_FORMATS = tuple(name for name, f in WEIGHT_FORMATS.items() if f.gguf_type is not None)

KV_FORMATS: dict[str, KVFormat] = {
    f.name: f
    for f in (
        KVFormat(name="fp32", bytes_per_element=4, description="float32"),
        KVFormat(name="bf16", bytes_per_element=2, description="bfloat16"),
        KVFormat(name="fp16", bytes_per_element=2, description="float16"),
        KVFormat(name="fp8", bytes_per_element=1, description="FP8 e4m3/e5m2, per-tensor scale"),
        KVFormat(name="int8", bytes_per_element=1, description="int8, per-head scale"),
        KVFormat(name="int4", bytes_per_element=0.5 + 2 / 64, description="int4, one fp16 scale per 64 values"),
    )
}

# Aliases users type for the same thing.
_WEIGHT_ALIASES = {"float16": "fp16", "bfloat16": "bf16", "float32": "fp32", "awq": "int4-awq",
                   "gptq": "int4-gptq", "w8a8": "int8-w8a8", "int4": "int4-awq", "w4a16": "int4-awq",
                   "w8a16": "int8", "q4_k": "q4_k_m", "q5_k": "q5_k_m", "q3_k": "q3_k_m", "auto": "bf16"}
_KV_ALIASES = {"float16": "fp16", "bfloat16": "bf16", "fp8_e4m3": "fp8", "fp8_e5m2": "fp8", "auto": "bf16"}


def weight_format(name: str) -> WeightFormat:
    key = _WEIGHT_ALIASES.get(name.lower(), name.lower())
    try:
        return WEIGHT_FORMATS[key]
    except KeyError:
        raise PrecisionError(
            f"unknown weight format '{name}'. Known: {', '.join(WEIGHT_FORMATS)}.{suggest(name, WEIGHT_FORMATS)}"
        ) from None


def kv_format(name: str) -> KVFormat:
    key = _KV_ALIASES.get(name.lower(), name.lower())
    try:
        return KV_FORMATS[key]
    except KeyError:
        raise PrecisionError(
            f"unknown KV-cache format '{name}'. Known: {', '.join(KV_FORMATS)}.{suggest(name, KV_FORMATS)}"
        ) from None


def default16(hardware: HardwareSpec) -> str:
    """The 16-bit format a chip runs: bf16, or fp16 on chips without bf16 (V100, T4)."""
    return "bf16" if hardware.peak_tflops.get("bf16", 0) > 0 else "fp16"


# the GGUF types a model is shrunk to, widest first (llama.cpp's Q8_0 and Q4_K_M): what plan tries and fit
# suggestions name for an engine that loads GGUF files, and what such an engine serves a GPU checkpoint from
GGUF_STEPS = ("q8_0", "q4_k_m")


def gguf_counterpart(name: str) -> str:
    """The GGUF type a GGUF-only engine serves a checkpoint of format `name` from when it cannot load that format:
    Q8_0 for an 8-bit one (fp8, int8), Q4_K_M for a narrower one (AWQ, GPTQ, NVFP4); 16-bit floats stay as they are
    (a bf16 / fp16 GGUF)."""
    bits = weight_format(name).bits_per_weight
    if bits >= 16:
        return name
    return GGUF_STEPS[0] if bits > 6 else GGUF_STEPS[1]


def default_weights(model: ModelSpec, hardware: HardwareSpec) -> str:
    """The weight format a deployment gets unless one is named: the checkpoint's own (its config's
    `quantization_config`, e.g. fp8-block for DeepSeek-V3 and Kimi-K2, mxfp4-moe for gpt-oss), else 16-bit."""
    return model.checkpoint_weights or default16(hardware)
