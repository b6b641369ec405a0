"""Microbenchmarks: GEMM over an (M, N, K) grid and dtypes, memory bandwidth, attention over growing KV.

Every kernel becomes a `calibrate.KernelPoint` carrying the FLOPs and bytes the cost model counts for it, so
the fit compares like with like:

- GEMM  C[M,N] = A[M,K] @ W[K,N]: FLOPs 2·M·N·K; bytes: W (K·N, the "weights"), A and C (activations);
  rows m = M. Small M is memory-bound (a decode GEMV), large M compute-bound (a prefill GEMM).
- copy  y <- x of S bytes: 2·S bytes (read + write); read  sum(x): S bytes. No FLOPs counted. Sizes start past
  the last-level cache (64 MiB on CPUs; 256 MiB on GPUs, whose L2 holds 50-126 MB on Hopper and Blackwell): a
  copy that fits in cache runs faster than DRAM, which the cost model's bandwidth efficiency (rising with bytes)
  does not describe; GEMVs of growing weight matrices pin the small-transfer efficiency instead.
- attention  softmax(Q·K^T)·V with Q of `q_rows` rows per sequence over L cached keys, grouped-query heads:
  FLOPs 4·heads·head_dim·pairs (pairs = L per decode row, L(L+1)/2 causal prefill), KV bytes
  2·kv_heads·L·head_dim·b, rows per KV head m = q_rows·heads/kv_heads (as `cost.step` counts them).

PyTorch runs the kernels (CPU: oneDNN/MKL; CUDA: cuBLAS/FlashAttention); without torch, numpy runs fp32 GEMMs
and copies only. `quick=True` keeps the grid small (under 30 s on a 2-core CPU). On CUDA the grid is an
engine's (Llama-3.1-8B/70B projection shapes, 1 to 8192 rows, bf16 and, from compute capability 8.9, fp8 through
`torch._scaled_mm` with per-tensor scales as vLLM's fp8 checkpoints run) and each kernel is timed replayed from
a CUDA graph (`graphs.graph_measure`), as engines replay decode steps.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any, TypedDict

from flopwise.metrics.measurements import KernelPoint
from flopwise.profile.timing import Timing, measure

__all__ = ["MicrobenchConfig", "run_microbenchmarks", "gemm_point", "copy_point", "attention_point"]

_BYTES = {"fp32": 4, "bf16": 2, "fp16": 2, "fp8": 1}


@dataclass(frozen=True, slots=True, kw_only=True)
class MicrobenchConfig:
    gemm_m: tuple[int, ...]
    gemm_nk: tuple[tuple[int, int], ...]
    dtypes: tuple[str, ...]
    copy_mib: tuple[int, ...]
    attention_lens: tuple[int, ...]  # decode rows over L cached tokens
    prefill_attention_lens: tuple[int, ...]
    heads: int = 16
    kv_heads: int = 4
    head_dim: int = 128
    budget_s: float = 0.6

    @classmethod
    def preset(cls, quick: bool, dtypes: Sequence[str] = ("fp32", "bf16"), cuda: bool = False) -> MicrobenchConfig:
        if cuda:  # an engine's shapes: q/o (4096^2), Llama-3.1-8B gate_up and down, a 70B o-projection
            nk = ((4096, 4096), (28672, 4096), (4096, 14336)) + (() if quick else ((8192, 8192),))
            return cls(gemm_m=(1, 16, 256, 4096) if quick else (1, 4, 16, 64, 256, 1024, 4096, 8192),
                       gemm_nk=nk, dtypes=("bf16", "fp8"),
                       copy_mib=(256, 1024) if quick else (256, 1024, 4096),  # past L2 (50-126 MB)
                       attention_lens=(2048, 32768) if quick else (256, 2048, 16384, 131072),
                       prefill_attention_lens=(1024,) if quick else (512, 2048, 8192), heads=32, kv_heads=8,
                       budget_s=0.2 if quick else 0.4)
        if quick:
            return cls(gemm_m=(1, 8, 64, 512), gemm_nk=((2048, 2048),), dtypes=tuple(dtypes),
                       copy_mib=(64, 256), attention_lens=(1024, 8192), prefill_attention_lens=(512,),
                       budget_s=0.3)
        return cls(gemm_m=(1, 4, 16, 64, 256, 1024), gemm_nk=((1024, 1024), (4096, 2048), (2048, 8192)),
                   dtypes=tuple(dtypes), copy_mib=(64, 256, 1024), attention_lens=(256, 2048, 16384),
                   prefill_attention_lens=(256, 1024, 2048))


def gemm_point(m: int, n: int, k: int, dtype: str, seconds: float, **extra: object) -> KernelPoint:
    b = _BYTES[dtype]
    return KernelPoint(kind="gemm", dtype=dtype, flops=2.0 * m * n * k, m=float(m), weight_bytes=float(k * n * b),
                       kv_bytes=0.0, act_bytes=float((m * k + m * n) * b), kernels=1, seconds=seconds,
                       shape={"m": m, "n": n, "k": k, **extra})


def copy_point(nbytes: int, seconds: float, read_only: bool = False, **extra: object) -> KernelPoint:
    return KernelPoint(kind="read" if read_only else "copy", dtype="fp32", flops=0.0, m=1.0, weight_bytes=0.0,
                       kv_bytes=0.0, act_bytes=float(nbytes if read_only else 2 * nbytes), kernels=1,
                       seconds=seconds, shape={"mib": nbytes / 2**20, **extra})


def attention_point(q_rows: int, kv_len: int, heads: int, kv_heads: int, head_dim: int, dtype: str,
                    seconds: float, **extra: object) -> KernelPoint:
    """`q_rows` = 1: one decode row over kv_len cached keys; q_rows = kv_len: a causal prefill of kv_len."""
    b = _BYTES[dtype]
    pairs = kv_len if q_rows == 1 else kv_len * (kv_len + 1) // 2
    return KernelPoint(kind="attention", dtype=dtype, flops=4.0 * heads * head_dim * pairs,
                       m=float(q_rows * heads / kv_heads), weight_bytes=0.0,
                       kv_bytes=float(2 * kv_heads * kv_len * head_dim * b),
                       act_bytes=float(2 * q_rows * heads * head_dim * b), kernels=1, seconds=seconds,
                       shape={"q_rows": q_rows, "kv_len": kv_len, "heads": heads, "kv_heads": kv_heads,
                              "head_dim": head_dim})


class _Extra(TypedDict):
    spread: float
    repeats: int


def _extra(t: Timing) -> _Extra:
    return {"spread": round(t.spread, 3), "repeats": t.repeats}


def run_microbenchmarks(cfg: MicrobenchConfig, *, device: str = "cpu", threads: int | None = None,
                        progress: Callable[[str], None] | None = None) -> list[KernelPoint]:
    """Time the grid; returns one KernelPoint per kernel (median seconds)."""
    try:
        import torch
    except ImportError:
        return _numpy_microbenchmarks(cfg, progress)
    if threads:
        torch.set_num_threads(threads)
    dev = torch.device(device)
    if dev.type == "cuda":
        from flopwise.profile.graphs import graph_measure

        def timed(fn: Callable[[], object]) -> Timing:
            return graph_measure(fn, budget_s=cfg.budget_s)
    else:
        def timed(fn: Callable[[], object]) -> Timing:
            return measure(fn, budget_s=cfg.budget_s)
    tdt = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
    pts: list[KernelPoint] = []
    say = progress or (lambda s: None)
    with torch.inference_mode():
        for dtype in cfg.dtypes:
            if dtype == "fp8" and not (dev.type == "cuda" and torch.cuda.get_device_capability(dev) >= (8, 9)):
                say("fp8 GEMMs skipped: they need a CUDA GPU of compute capability 8.9 or later")
                continue
            for n, k in cfg.gemm_nk:
                w = _weight(torch, dev, n, k, dtype, tdt)  # one weight per shape; only A changes with M
                for m in cfg.gemm_m:
                    t = timed(_gemm(torch, dev, m, w, dtype, tdt))
                    pts.append(gemm_point(m, n, k, dtype, t.median_s, **_extra(t)))
                    say(f"gemm {dtype} M={m} N={n} K={k}: {2 * m * n * k / t.median_s / 1e9:.1f} GFLOP/s")
        for mib in cfg.copy_mib:
            x = torch.ones(mib * 2**20 // 4, device=dev)
            y = torch.empty_like(x)
            t = timed(partial(y.copy_, x))
            pts.append(copy_point(mib * 2**20, t.median_s, **_extra(t)))
            t = timed(x.sum)
            pts.append(copy_point(mib * 2**20, t.median_s, read_only=True, **_extra(t)))
            say(f"copy {mib} MiB: {2 * mib * 2**20 / pts[-2].seconds / 1e9:.1f} GB/s, "
                f"read {mib * 2**20 / t.median_s / 1e9:.1f} GB/s")
            del x, y
        F = torch.nn.functional
        h, kvh, d = cfg.heads, cfg.kv_heads, cfg.head_dim
        adt = "bf16" if "bf16" in cfg.dtypes else cfg.dtypes[0]
        for L in cfg.attention_lens:
            q = torch.randn(1, h, 1, d, device=dev).to(tdt[adt])
            kc = torch.randn(1, kvh, L, d, device=dev).to(tdt[adt])
            vc = torch.randn(1, kvh, L, d, device=dev).to(tdt[adt])
            t = timed(partial(F.scaled_dot_product_attention, q, kc, vc, enable_gqa=True))
            pts.append(attention_point(1, L, h, kvh, d, adt, t.median_s, **_extra(t)))
            say(f"attention decode L={L}: {pts[-1].kv_bytes / t.median_s / 1e9:.1f} GB/s of KV")
        for L in cfg.prefill_attention_lens:
            q = torch.randn(1, h, L, d, device=dev).to(tdt[adt])
            kc = torch.randn(1, kvh, L, d, device=dev).to(tdt[adt])
            vc = torch.randn(1, kvh, L, d, device=dev).to(tdt[adt])
            t = timed(partial(F.scaled_dot_product_attention, q, kc, vc, is_causal=True, enable_gqa=True))
            pts.append(attention_point(L, L, h, kvh, d, adt, t.median_s, **_extra(t)))
            say(f"attention prefill L={L}: {pts[-1].flops / t.median_s / 1e9:.1f} GFLOP/s")
    return pts


def _weight(torch: Any, dev: Any, n: int, k: int, dtype: str, tdt: dict[str, Any]) -> Any:
    """W of a GEMM with N outputs over K inputs: column-major (k, n) in fp8, as cuBLASLt's fp8 path requires."""
    if dtype == "fp8":
        return torch.randn(n, k, device=dev).to(torch.float8_e4m3fn).t()
    return torch.randn(k, n, device=dev).to(tdt[dtype])


def _gemm(torch: Any, dev: Any, m: int, w: Any, dtype: str, tdt: dict[str, Any]) -> Callable[[], object]:
    """C = A @ W with A of m rows, as an engine runs it: fp8 through `torch._scaled_mm` (A row-major, per-tensor
    scales, bf16 out), else a plain matmul in `dtype`."""
    k = w.shape[0]
    if dtype == "fp8":
        a = torch.randn(m, k, device=dev).to(torch.float8_e4m3fn)
        one = torch.ones((), device=dev)
        return partial(torch._scaled_mm, a, w, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)
    return partial(operator.matmul, torch.randn(m, k, device=dev).to(tdt[dtype]), w)


def _numpy_microbenchmarks(cfg: MicrobenchConfig, progress: Callable[[str], None] | None) -> list[KernelPoint]:
    import numpy as np

    say = progress or (lambda s: None)
    say("torch is not installed (pip install 'flopwise[profile]'): numpy fp32 GEMMs and copies only")
    pts: list[KernelPoint] = []
    rng = np.random.default_rng(0)
    for n, k in cfg.gemm_nk:
        w = rng.standard_normal((k, n), dtype=np.float32)
        for m in cfg.gemm_m:
            a = rng.standard_normal((m, k), dtype=np.float32)
            t = measure(partial(operator.matmul, a, w), budget_s=cfg.budget_s)
            pts.append(gemm_point(m, n, k, "fp32", t.median_s, **_extra(t)))
    for mib in cfg.copy_mib:
        x = np.ones(mib * 2**20 // 4, dtype=np.float32)
        y = np.empty_like(x)
        t = measure(partial(np.copyto, y, x), budget_s=cfg.budget_s)
        pts.append(copy_point(mib * 2**20, t.median_s, **_extra(t)))
        t = measure(x.sum, budget_s=cfg.budget_s)
        pts.append(copy_point(mib * 2**20, t.median_s, read_only=True, **_extra(t)))
    return pts
