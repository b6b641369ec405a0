"""Does a deployment fit, and if not, what would make it fit."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from flopwise.cost.memory import max_sequences, memory_plan
from flopwise.errors import DoesNotFitError, SpecError
from flopwise.specs.deployment import Deployment, weights_refusal
from flopwise.specs.hardware import GIB
from flopwise.specs.precision import GGUF_STEPS, weight_format

__all__ = ["require_fit", "require_batch_fit", "fit_suggestions"]

_SMALLER_FORMATS = ("fp8", "int8", "int4-awq")
_ONE_DEVICE = ("soc", "cpu")  # parts flopwise prices one at a time: no tensor-parallel suggestion


def _reshaped(dep: Deployment, tp: int | None = None, pp: int | None = None) -> Deployment:
    """`dep` at another TP degree or pipeline depth, over the servers its GPUs then fill (as `--tp N` builds it:
    TP 16 on H100 SXM is 2 servers)."""
    tp, pp = tp or dep.tp, pp or dep.pp
    return replace(dep, tp=tp, pp=pp, nodes=dep.hardware.servers_for(tp * dep.dp * pp))


def _at_tp(dep: Deployment, tp: int) -> Deployment:
    """`dep` at another TP degree (`_reshaped`); a memory fraction the engine defaulted follows its default at that
    degree (SGLang's shrinks with TP: 0.88 at tp 1, 0.81 at tp 8 to 0.4.5, by device memory tier and TP after)."""
    moved = _reshaped(dep, tp=tp)
    if dep.gpu_memory_utilization != dep.engine_defaults().memory_fraction:  # set by the user: kept
        return moved
    return replace(moved, gpu_memory_utilization=moved.engine_defaults().memory_fraction)


def _fits(make: Callable[..., Deployment], dep: Deployment, **changes: int) -> bool:
    """Whether `make(dep, **changes)` fits; False where it cannot be built at all (a layout wider than one server on
    a part the catalog gives no NIC)."""
    try:
        return memory_plan(make(dep, **changes)).fits
    except SpecError:
        return False


def _pipelined(dep: Deployment, tp: int, pp: int) -> Deployment:
    return _reshaped(_at_tp(dep, tp), pp=pp)


def fit_suggestions(dep: Deployment) -> list[str]:
    """Cheapest changes that make the weights fit: a larger TP degree (more pipeline stages where the engine splits
    layers only), or a smaller weight format."""
    out: list[str] = []
    one_device = dep.hardware.kind in _ONE_DEVICE
    if "tp" not in dep.engine.parallelism and not one_device:  # an engine that splits layers only (llama.cpp b9890+)
        for pp in (2, 4, 8):
            if pp > dep.pp and _fits(_reshaped, dep, pp=pp):
                out.append(f"--pp {pp}")
                break
    for tp in () if one_device or "tp" not in dep.engine.parallelism else (2, 4, 8, 16, 32):
        if tp <= dep.tp or (dep.model.mla is None and dep.model.num_heads % tp):
            continue
        if _fits(_at_tp, dep, tp=tp):
            out.append(f"--tp {tp}")
            break
    ckpt = dep.model.checkpoint_weights
    smaller = GGUF_STEPS if dep.engine.gguf_only else _SMALLER_FORMATS
    for name in ((dep.engine.file_format(ckpt),) if ckpt else ()) + smaller:
        wf = weight_format(name)
        if wf.bits_per_weight < dep.weights.bits_per_weight \
                and weights_refusal(dep.engine, dep.hardware, dep.model, wf) is None \
                and memory_plan(replace(dep, weights=wf)).fits:
            out.append(f"--weights {name}")
            break
    if not out and dep.pp == 1 and not one_device and "tp" in dep.engine.parallelism:
        for pp in (2, 4, 8):
            if _fits(_pipelined, dep, tp=max(dep.tp, 8), pp=pp):
                out.append(f"--tp {max(dep.tp, 8)} with {pp} pipeline stages")
                break
    return out


def require_fit(dep: Deployment) -> None:
    plan = memory_plan(dep)
    if plan.fits:
        return
    ideas = fit_suggestions(dep)
    hint = f" Try {' or '.join(ideas)}." if ideas else " No single GPU count or weight format in reach fits it."
    raise DoesNotFitError(
        f"{dep.model.name} ({dep.weights.name}, tp={dep.tp}) does not fit on {dep.hardware.id}: each GPU needs "
        f"{plan.needed_bytes / GIB:.1f} GiB (weights {plan.weight_bytes / GIB:.1f}"
        + (f", draft {plan.proposer_weight_bytes / GIB:.1f}" if plan.proposer_weight_bytes else "")
        + f", activations "
        f"{plan.activation_bytes / GIB:.1f}, runtime {plan.runtime_bytes / GIB:.1f}, one KV block) but has "
        f"{plan.budget_bytes / GIB:.1f} GiB at gpu_memory_utilization={dep.gpu_memory_utilization}.{hint}")


def require_batch_fit(dep: Deployment, batch: int, length: int) -> None:
    """A static batch of `batch` sequences of `length` tokens held in the KV pools at once (`max_sequences`: the
    replica's, every dp attention group's pool); a DoesNotFitError naming the most that fit (its numbers would price
    memory the GPU does not have)."""
    most = max_sequences(dep, length)
    if batch <= most:
        return
    raise DoesNotFitError(
        f"batch {batch} does not fit: {dep.hardware.id} (tp={dep.tp}{f', dp={dep.dp}' if dep.dp > 1 else ''}, "
        f"{dep.weights.name} weights, {dep.kv.name} KV) holds at most {most:,} sequences of {length:,} tokens in its "
        "KV pool; lower --batch, or try --kv fp8, a larger --tp or shorter sequences")
