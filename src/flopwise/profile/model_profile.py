"""Model profiling: time real forward passes of a random-weight model of a catalog architecture.

Weights do not change timing, so the model is built with random bf16 weights from its `ModelSpec` (no download):
a small hand-written PyTorch decoder with the Llama/Qwen/Mistral layout (RMSNorm, rotary embeddings,
grouped-query attention with optional QKV bias, SwiGLU MLP, LM head on the positions that emit a token) and a
preallocated KV cache. Mixture-of-experts, MLA and sliding-window models are refused: this module does not
reproduce their kernels, and a wrong model would calibrate the wrong thing.

Two named code paths, as an engine runs them:
- prefill: one sequence of n tokens after c cached ones (c = 0: a fresh prompt);
- decode: b sequences, each one new token after c cached tokens.
Each timing becomes a `calibrate.StepPoint` (the deployment and `BatchShape` the cost model prices) and is
printed beside the cost model's prediction, with the FLOP/s and bandwidth it implies. On CUDA each step is timed
replayed from a CUDA graph (`graphs.graph_measure`): the GPU's time, which the cost model prices, without
PyTorch's eager launch path (an engine's own host costs are its engine profile's).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

from flopwise.cost.batch import batch_shape
from flopwise.cost.layout import layout
from flopwise.cost.step import step_cost
from flopwise.errors import SpecError
from flopwise.metrics.measurements import StepPoint
from flopwise.profile.timing import Timing, measure
from flopwise.specs.deployment import Deployment, make_deployment
from flopwise.specs.hardware import HardwareSpec
from flopwise.specs.model import ModelSpec

__all__ = ["ModelProfileConfig", "truncate_layers", "check_supported", "profile_model", "step_point"]


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelProfileConfig:
    prefill_lens: tuple[int, ...]
    decode_batches: tuple[int, ...]
    decode_contexts: tuple[int, ...]
    budget_s: float = 1.0

    @classmethod
    def preset(cls, quick: bool, cuda: bool = False) -> ModelProfileConfig:
        if cuda:  # an engine's range: chunk-sized prefills, decode batches up to 64 over 512-2048 cached tokens
            if quick:
                return cls(prefill_lens=(128, 1024), decode_batches=(1, 16), decode_contexts=(512,), budget_s=0.3)
            return cls(prefill_lens=(32, 128, 512, 2048, 4096), decode_batches=(1, 4, 16, 64),
                       decode_contexts=(512, 2048), budget_s=0.5)
        if quick:
            return cls(prefill_lens=(32, 256), decode_batches=(1, 8), decode_contexts=(256,), budget_s=0.3)
        return cls(prefill_lens=(16, 64, 256, 1024), decode_batches=(1, 4, 16), decode_contexts=(128, 1024))


def truncate_layers(model: ModelSpec, num_layers: int | None) -> ModelSpec:
    """The model with its first `num_layers` layers (a faster profile; per-layer cost is unchanged)."""
    if num_layers is None or num_layers >= model.num_layers:
        return model
    if num_layers < 1:
        raise SpecError(f"--num-layers must be >= 1, got {num_layers}")
    return model.with_layers(model.layers[:num_layers], f"{model.name} (first {num_layers} layers)")


def check_supported(model: ModelSpec) -> None:
    if (model.moe is not None or model.attention_kinds != ("full",) or not model.mlp_gated or model.qk_norm
            or model.extra_params or any(lay.extra_params for lay in model.layers)):
        raise SpecError(f"{model.name}: model profiling builds dense full-attention decoders (Llama, Qwen, "
                        "Mistral shapes); MoE, MLA, sliding-window, chunked, linear-state, QK-norm and ungated-MLP "
                        "models are not supported. Profile a dense "
                        "model, or calibrate from `flopwise bench` runs of a real server instead")


def step_point(dep: Deployment, kind: str, batch: int, new_tokens: int, context: int, seconds: float) -> StepPoint:
    shape = batch_shape([(new_tokens, context)] * batch, layout(dep).windows)
    desc = f"prefill {new_tokens} tok" + (f" after {context}" if context else "") if kind == "prefill" else \
        f"decode batch {batch} ctx {context}"
    return StepPoint(dep=dep, shape=shape, seconds=seconds, label=kind, desc=desc, batch=batch, new_tokens=new_tokens,
                     context=context)


def _build(model: ModelSpec, max_batch: int, max_ctx: int,
           device: str) -> Callable[[Any, int], Any]:  # pragma: no cover - needs torch
    import torch
    import torch.nn.functional as F

    dt = torch.bfloat16
    dev = torch.device(device)
    h, nh, nkv, d = model.hidden_size, model.num_heads, model.num_kv_heads, model.head_dim
    inter = model.intermediate_size
    gen = torch.Generator(device="cpu").manual_seed(0)

    def w(*shape: int) -> torch.Tensor:
        return (torch.randn(*shape, generator=gen) * 0.02).to(dt).to(dev)

    layers: list[dict[str, Any]] = []
    for _ in range(model.num_layers):
        layers.append({
            "qkv": w((nh + 2 * nkv) * d, h), "qkv_b": w((nh + 2 * nkv) * d) if model.qkv_bias else None,
            "o": w(h, nh * d), "gate_up": w(2 * inter, h), "down": w(h, inter),
            "n1": torch.ones(h, dtype=dt, device=dev), "n2": torch.ones(h, dtype=dt, device=dev),
            "k": torch.zeros(max_batch, nkv, max_ctx, d, dtype=dt, device=dev),
            "v": torch.zeros(max_batch, nkv, max_ctx, d, dtype=dt, device=dev),
        })
    embed = w(model.vocab_size, h)
    head = embed if model.tie_embeddings else w(model.vocab_size, h)
    norm = torch.ones(h, dtype=dt, device=dev)
    inv = 1.0 / (10000.0 ** (torch.arange(0, d, 2, device=dev).float() / d))  # timing does not depend on theta
    eps = 1e-6

    def rope(x: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
        f = pos[:, None].float() * inv[None, :]
        cos = torch.cat([f.cos(), f.cos()], -1).to(dt)[:, None, :]
        sin = torch.cat([f.sin(), f.sin()], -1).to(dt)[:, None, :]
        x1, x2 = x[..., : d // 2], x[..., d // 2:]
        return x * cos + torch.cat([-x2, x1], -1) * sin

    def forward(tokens: torch.Tensor, context: int) -> torch.Tensor:
        """tokens [b, n] after `context` cached tokens (all sequences alike); returns last-position logits."""
        b, n = tokens.shape
        x = F.embedding(tokens, embed)
        pos = torch.arange(context, context + n, device=dev)
        for L in layers:
            y = F.rms_norm(x, (h,), L["n1"], eps)
            qkv = F.linear(y, L["qkv"], L["qkv_b"])
            q, k, v = torch.split(qkv, [nh * d, nkv * d, nkv * d], -1)
            q = rope(q.view(b, n, nh, d), pos).transpose(1, 2)
            k = rope(k.view(b, n, nkv, d), pos).transpose(1, 2)
            L["k"][:b, :, context:context + n] = k
            L["v"][:b, :, context:context + n] = v.view(b, n, nkv, d).transpose(1, 2)
            kc, vc = L["k"][:b, :, :context + n], L["v"][:b, :, :context + n]
            if n == 1:
                a = F.scaled_dot_product_attention(q, kc, vc, enable_gqa=True)
            elif context == 0:
                a = F.scaled_dot_product_attention(q, kc, vc, is_causal=True, enable_gqa=True)
            else:
                mask = torch.ones(n, context + n, dtype=torch.bool, device=dev).tril(context)
                a = F.scaled_dot_product_attention(q, kc, vc, attn_mask=mask, enable_gqa=True)
            x = x + F.linear(a.transpose(1, 2).reshape(b, n, nh * d), L["o"])
            y = F.rms_norm(x, (h,), L["n2"], eps)
            g, u = F.linear(y, L["gate_up"]).chunk(2, -1)
            x = x + F.linear(F.silu(g) * u, L["down"])
        x = F.rms_norm(x[:, -1:], (h,), norm, eps)
        return F.linear(x, head)

    return forward


def profile_model(model: ModelSpec, hw: HardwareSpec, cfg: ModelProfileConfig, *, device: str = "cpu",
                  threads: int | None = None, progress: Callable[[str], None] | None = None) -> list[StepPoint]:
    """Time prefill and decode steps of `model` with random weights; returns StepPoints on (model, hw, bf16)."""
    check_supported(model)
    try:
        import torch
    except ImportError:
        raise SpecError("model profiling needs PyTorch: pip install 'flopwise[profile]'") from None
    if threads:
        torch.set_num_threads(threads)
    dep = make_deployment(model, hw, weights="bf16", kv="bf16")
    max_ctx = max([*cfg.prefill_lens, *(c + 1 for c in cfg.decode_contexts)])
    max_batch = max(cfg.decode_batches, default=1)
    say = progress or (lambda s: None)
    if device.startswith("cuda"):
        from flopwise.profile.graphs import graph_measure

        def timed(fn: Callable[[], object], repeats: int) -> Timing:
            return graph_measure(fn, budget_s=cfg.budget_s, repeats=repeats)
    else:
        def timed(fn: Callable[[], object], repeats: int) -> Timing:
            return measure(fn, budget_s=cfg.budget_s, repeats=repeats)
    forward = _build(model, max_batch, max_ctx, device)
    pts: list[StepPoint] = []
    gen = torch.Generator(device="cpu").manual_seed(1)
    with torch.inference_mode():
        for n in cfg.prefill_lens:
            toks = torch.randint(0, model.vocab_size, (1, n), generator=gen).to(device)
            t = timed(partial(forward, toks, 0), 5)
            pts.append(step_point(dep, "prefill", 1, n, 0, t.median_s))
            say(_line(pts[-1], t.spread))
        for c in cfg.decode_contexts:
            for b in cfg.decode_batches:
                toks = torch.randint(0, model.vocab_size, (b, 1), generator=gen).to(device)
                t = timed(partial(forward, toks, c), 7)
                pts.append(step_point(dep, "decode", b, 1, c, t.median_s))
                say(_line(pts[-1], t.spread))
    return pts


def _line(p: StepPoint, spread: float) -> str:
    sc = step_cost(p.dep, p.shape)
    return (f"{p.desc:28s} {p.seconds * 1e3:9.2f} ms (spread {100 * spread:.0f}%)  model {sc.time_s * 1e3:9.2f} ms  "
            f"{sc.flops / p.seconds / 1e9:7.1f} GFLOP/s  {sc.bytes / p.seconds / 1e9:6.1f} GB/s")


def summarize_points(points: Sequence[StepPoint]) -> list[dict[str, float | str]]:
    """Rows for reports: measured vs the cost model at the deployment's current profile."""
    rows: list[dict[str, float | str]] = []
    for p in points:
        sc = step_cost(p.dep, p.shape)
        rows.append({"step": p.desc, "measured_ms": p.seconds * 1e3, "predicted_ms": sc.time_s * 1e3,
                     "error_pct": 100 * (sc.time_s - p.seconds) / p.seconds,
                     "achieved_gflops": sc.flops / p.seconds / 1e9, "achieved_gbs": sc.bytes / p.seconds / 1e9,
                     "bound": sc.bound})
    return rows

