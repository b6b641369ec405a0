"""The weight format a checkpoint ships in, read from its `quantization_config` (Hugging Face `quant_method`s).

    quant_method            reads                                                     format
    fp8                     weight_block_size [128, 128] (DeepSeek-V3, Kimi-K2)        fp8-block
                            no block size (per-tensor / per-channel)                  fp8
    mxfp4                   modules_to_not_convert covers attention (gpt-oss)         mxfp4-moe
                            otherwise                                                 mxfp4
    compressed-tensors      config_groups[*].weights / input_activations:
                              4-bit float, group 16 (NVFP4)                           nvfp4
                              8-bit float weights and activations                    fp8
                              8-bit int weights and activations                      int8-w8a8
                              8-bit int weights only                                  int8
                              4-bit int weights, 8-bit int activations                w4a8
                              4-bit int weights only                                  int4-gptq
    awq / gptq              bits 4 (8 for gptq int8)                                  int4-awq / int4-gptq (int8)
    bitsandbytes            load_in_4bit (bnb_4bit_use_double_quant)                  nf4 (nf4-dq)
                            load_in_8bit                                              int8
    modelopt (hf_quant)     quant_algo NVFP4 / FP8                                    nvfp4 / fp8
                            NVFP4 with exclude_modules naming self_attn (DeepSeek-R1)  nvfp4-mlp

Anything else is priced as 16-bit with a note naming the fields it saw; `--weights` names the format instead.
"""

from __future__ import annotations

from typing import Any

from flopwise.errors import ModelConfigError

__all__ = ["checkpoint_format"]


def _compressed_tensors(qc: dict[str, Any]) -> tuple[str | None, str]:
    groups = qc.get("config_groups") or {}
    if not groups:
        return None, "compressed-tensors without config_groups"
    g = next(iter(groups.values()))
    w = g.get("weights") or {}
    a = g.get("input_activations") or {}
    bits, wtype = w.get("num_bits"), w.get("type", "int")
    abits = a.get("num_bits") if a else None
    desc = f"compressed-tensors {bits}-bit {wtype} weights" + (f", {abits}-bit activations" if abits else "")
    if w.get("group_size"):
        desc += f", group {w['group_size']}"
    if bits == 4 and wtype == "float":
        return "nvfp4", desc
    if bits == 8 and wtype == "float":
        return "fp8", desc
    if bits == 8:
        return ("int8-w8a8" if abits == 8 else "int8"), desc
    if bits == 4:
        return ("w4a8" if abits == 8 else "int4-gptq"), desc
    return None, desc


def _unread(what: str) -> tuple[None, str]:
    return None, (f"quantization_config ({what}) is not a format flopwise reads: priced as 16-bit; "
                  "pass --weights to name the checkpoint's format")


def _skips_attention(skipped: object) -> bool:
    """Whether a checkpoint's list of unquantized modules names attention ones: gpt-oss's mxfp4
    `modules_to_not_convert`, the `exclude_modules` of nvidia/DeepSeek-R1-FP4's ModelOpt config (every layer's
    `self_attn*`)."""
    return isinstance(skipped, list) and any("attn" in str(m) for m in skipped)


def checkpoint_format(raw: dict[str, Any]) -> tuple[str | None, str]:
    """(weight format name, how it was read) for a config.json; (None, "") for a 16-bit checkpoint, (None, a note)
    for a quantization_config flopwise cannot read; a ModelConfigError for a malformed one of a format it reads."""
    qc = raw.get("quantization_config")
    if qc is not None and not isinstance(qc, dict):
        return _unread(f"quantization_config is {type(qc).__name__} {qc!r}, not an object")
    if not qc:
        return None, ""
    method = str(qc.get("quant_method", qc.get("quant_algo", ""))).lower()
    if method == "fp8":
        block = qc.get("weight_block_size")
        if block is not None and not (isinstance(block, list) and len(block) == 2 and all(
                isinstance(b, int) and not isinstance(b, bool) and b > 0 for b in block)):
            raise ModelConfigError(f"quantization_config: fp8 weight_block_size must be two positive whole "
                                   f"numbers, got {block!r}")
        if block:
            return "fp8-block", f"quantization_config: fp8 {qc.get('fmt', 'e4m3')}, {block[0]}x{block[1]} block scales"
        return "fp8", f"quantization_config: fp8 {qc.get('activation_scheme', '')} scales".strip()
    if method == "mxfp4":
        if _skips_attention(qc.get("modules_to_not_convert")):
            return "mxfp4-moe", "quantization_config: mxfp4 experts; attention, router, embeddings and LM head bf16"
        return "mxfp4", "quantization_config: mxfp4"
    if method == "compressed-tensors":
        fmt, desc = _compressed_tensors(qc)
        return (fmt, f"quantization_config: {desc}") if fmt else _unread(desc)
    if method in ("awq", "gptq"):
        bits = qc.get("bits", qc.get("w_bit", 4))
        group = qc.get("group_size", qc.get("q_group_size", 128))
        if isinstance(bits, bool) or not isinstance(bits, int):
            raise ModelConfigError(f"quantization_config: {method} bits must be a whole number, got {bits!r}")
        if isinstance(group, bool) or not isinstance(group, int) or not (group > 0 or group == -1):
            raise ModelConfigError(f"quantization_config: {method} group_size must be a positive whole number (or "
                                   f"-1: one group per row), got {group!r}")
        if bits == 4:
            return f"int4-{method}", f"quantization_config: {method} 4-bit, group {group}"
        if bits == 8 and method == "gptq":
            return "int8", "quantization_config: gptq 8-bit"
        return _unread(f"{method} {bits}-bit")
    if method == "bitsandbytes":
        if qc.get("load_in_4bit"):
            dq = bool(qc.get("bnb_4bit_use_double_quant"))
            return ("nf4-dq" if dq else "nf4"), ("quantization_config: bitsandbytes 4-bit"
                                                 + (" (double quant)" if dq else ""))
        if qc.get("load_in_8bit"):
            return "int8", "quantization_config: bitsandbytes LLM.int8() (priced as int8 weight-only)"
    if method in ("modelopt", "nvfp4", "fp4"):
        algo = str(qc.get("quant_algo", method)).upper()
        if "FP4" in algo and _skips_attention(qc.get("exclude_modules") or qc.get("ignore")):
            return "nvfp4-mlp", f"quantization_config: modelopt {algo}; attention projections excluded (bf16)"
        if "FP4" in algo:
            return "nvfp4", f"quantization_config: modelopt {algo}"
        if "FP8" in algo:
            return "fp8", f"quantization_config: modelopt {algo}"
    return _unread(f"quant_method={method or '?'}; fields {', '.join(sorted(qc))}")
