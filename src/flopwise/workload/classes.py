"""Request classes: shares of a stream with their own priority, client timeout and SLA.

    --classes "chat=0.8:sla=p95_ttft<=300ms,p95_tpot<=50ms;batch=0.2:prio=1:timeout=120s"

Classes are separated by ';', a class's fields by ':'. `NAME=SHARE` first (shares are normalised to sum to 1),
then any of `prio=N` (lower runs first under `--scheduling-policy priority`, vLLM's convention; default 0),
`timeout=S` (the client abandons a request not finished S seconds after it was sent; `s` or `ms`), `sla=...`
(the class's objectives, as --sla; default: the run's). Each request is drawn into a class by its share, under
the workload's seed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from flopwise.errors import WorkloadError
from flopwise.specs.sla import SLA, parse_sla
from flopwise.workload.spec import RequestSpec

__all__ = ["RequestClass", "parse_classes", "assign_classes", "parse_timeout"]


@dataclass(frozen=True, slots=True, kw_only=True)
class RequestClass:
    name: str
    share: float
    priority: int = 0
    timeout_s: float | None = None
    sla: SLA | None = None


def parse_timeout(text: str, where: str = "--timeout-s") -> float:
    """Seconds from "120", "120s" or "500ms"; finite and > 0."""
    t = text.strip().lower()
    scale = 1e-3 if t.endswith("ms") else 1.0
    t = t.removesuffix("ms").removesuffix("s")
    try:
        v = float(t) * scale
    except ValueError:
        raise WorkloadError(f"{where}: cannot read '{text}' as a timeout (e.g. 120s or 500ms)") from None
    if not math.isfinite(v) or v <= 0:
        raise WorkloadError(f"{where}: a timeout must be a finite number of seconds > 0, got '{text}'")
    return v


def parse_classes(text: str) -> tuple[RequestClass, ...]:
    if not isinstance(text, str) or not text.strip():
        raise WorkloadError("--classes needs at least one class, e.g. \"chat=0.8;batch=0.2:prio=1\"")
    out: list[RequestClass] = []
    for part in (p for p in text.split(";") if p.strip()):
        head, *fields = part.strip().split(":")
        name, eq, share_text = head.partition("=")
        name = name.strip()
        if not eq or not name:
            raise WorkloadError(f"--classes: '{part.strip()}' must start with NAME=SHARE, e.g. chat=0.8")
        try:
            share = float(share_text)
        except ValueError:
            raise WorkloadError(f"--classes: class '{name}' has share '{share_text}', not a number") from None
        if not math.isfinite(share) or share <= 0:
            raise WorkloadError(f"--classes: class '{name}' needs a share > 0, got {share_text}")
        cls = RequestClass(name=name, share=share)
        for f in fields:
            key, eq, value = f.partition("=")
            key = key.strip().lower()
            if key == "prio" and eq:
                try:
                    cls = replace(cls, priority=int(value))
                except ValueError:
                    raise WorkloadError(f"--classes: class '{name}' has prio '{value}', not an integer") from None
            elif key == "timeout" and eq:
                cls = replace(cls, timeout_s=parse_timeout(value, f"--classes: class '{name}' timeout"))
            elif key == "sla" and eq:
                cls = replace(cls, sla=parse_sla(value))
            else:
                raise WorkloadError(f"--classes: class '{name}' has '{f}'; use prio=N, timeout=S or sla=...")
        if any(c.name == name for c in out):
            raise WorkloadError(f"--classes: class '{name}' is given twice")
        out.append(cls)
    total = sum(c.share for c in out)
    return tuple(replace(c, share=c.share / total) for c in out)


def assign_classes(specs: list[RequestSpec], classes: tuple[RequestClass, ...], timeout_s: float | None,
                   rng: np.random.Generator) -> list[RequestSpec]:
    """Each request drawn into a class by share (its priority, and its timeout or else `timeout_s`); without
    classes, every request gets `timeout_s`."""
    if not classes:
        return [replace(s, timeout_s=timeout_s) for s in specs] if timeout_s is not None else specs
    picks = rng.choice(len(classes), size=len(specs), p=[c.share for c in classes])
    return [replace(s, klass=classes[i].name, priority=classes[i].priority,
                    timeout_s=classes[i].timeout_s if classes[i].timeout_s is not None else timeout_s)
            for s, i in zip(specs, picks, strict=True)]
