"""What the chosen config protects and what it gives up, against its nearest alternatives, in words a
reviewer can accept or reject. Accuracy risk comes from `techniques.quantization` (published deltas).

Differences in simulated figures are stated with the objective's intervals; an alternative tied with the first
choice (overlapping intervals) is said to be tied, and the first choice was picked by what does not depend on
the sample (GPUs per replica, accuracy risk, the closed-form ceiling): `search.py`. Every figure is per GPU, so
a config with more GPUs per replica is compared by what each GPU delivers."""

from __future__ import annotations

from dataclasses import dataclass

from flopwise.plan.evaluate import Evaluation
from flopwise.techniques.quantization import kv_risk, weight_risk

__all__ = ["Tradeoff", "tradeoffs"]


_AXIS = {"goodput": ("goodput per GPU", "req/s", 2), "throughput": ("output tokens/s per GPU", "tok/s", 0),
         "cost": ("output tokens per dollar", "tok/$", 0), "latency": ("tokens/s per user at the same load", "tok/s",
                                                                       0)}


@dataclass(frozen=True, slots=True, kw_only=True)
class Tradeoff:
    alternative: str
    protects: tuple[str, ...]
    gives_up: tuple[str, ...]
    tied: bool = False  # the objective's intervals overlap: a statistical tie
    objective_note: str = ""

    def to_dict(self) -> dict[str, object]:
        return {"alternative": self.alternative, "protects": list(self.protects), "gives_up": list(self.gives_up),
                "tied": self.tied, "objective": self.objective_note}


def _pct(a: float, b: float) -> float:
    return (a / b - 1.0) * 100.0 if b else 0.0


def _fmt(v: float, digits: int) -> str:
    return f"{v:,.{digits}f}"


def _compare(best: Evaluation, alt: Evaluation, objective: str, tied: bool) -> Tradeoff:
    protects: list[str] = []
    gives_up: list[str] = []

    def side(good: bool, text: str) -> None:
        (protects if good else gives_up).append(text)

    name, unit, dg = _AXIS[objective]
    (bp, bl, bh), (ap, al, ah) = best.value(objective), alt.value(objective)
    note = (f"{name}: {_fmt(bp, dg)} [{_fmt(bl, dg)}, {_fmt(bh, dg)}] vs {_fmt(ap, dg)} [{_fmt(al, dg)}, "
            f"{_fmt(ah, dg)}] {unit}")
    note += (" - tied (the paired intervals overlap): chosen by the closed-form capacity estimate, then fewer GPUs and "
             "lower accuracy risk" if tied else "")
    g = _pct(best.goodput_per_gpu, alt.goodput_per_gpu)
    if abs(g) >= 1 and not (tied and objective == "goodput"):
        side(g > 0, f"goodput per GPU {g:+.0f}% ({best.goodput_per_gpu:.2f} vs {alt.goodput_per_gpu:.2f} req/s)")
    u = _pct(best.tokens_per_s_per_user, alt.tokens_per_s_per_user)
    if abs(u) >= 1:
        side(u > 0, f"per-user speed {u:+.0f}% ({best.tokens_per_s_per_user:.0f} vs {alt.tokens_per_s_per_user:.0f} "
                    "tok/s)")
    cb, ca = best.cost_per_1m_tokens, alt.cost_per_1m_tokens
    if cb and ca and abs(_pct(cb, ca)) >= 1:
        side(cb < ca, f"cost {_pct(cb, ca):+.0f}% (${cb:.3f} vs ${ca:.3f} per 1M output tokens)")
    for key, label in (("ttft_ms", "P95 TTFT"), ("tpot_ms", "P95 TPOT")):
        vb, va = best.window.latency(key).p95, alt.window.latency(key).p95
        if vb and va and abs(_pct(vb, va)) >= 5:
            side(vb < va, f"{label} {vb:.0f} vs {va:.0f} ms at the operating point")
    hb, ha = best.memory_headroom_gib, alt.memory_headroom_gib
    if abs(hb - ha) >= 1:
        side(hb > ha, f"KV headroom {hb:.0f} vs {ha:.0f} GiB")
    db, da = best.candidate.deployment, alt.candidate.deployment
    for what, rb, ra in (("weights", weight_risk(db.weights.name), weight_risk(da.weights.name)),
                         ("KV cache", kv_risk(db.kv.name), kv_risk(da.kv.name))):
        if rb.rank != ra.rank:
            name_b = db.weights.name if what == "weights" else db.kv.name
            name_a = da.weights.name if what == "weights" else da.kv.name
            side(rb.rank < ra.rank, f"accuracy risk of {what}: {name_b} is {rb.level} vs {name_a} {ra.level} "
                                    f"({rb.note})")
    if db.gpus_per_replica != da.gpus_per_replica:
        side(db.gpus_per_replica < da.gpus_per_replica,
             f"{db.gpus_per_replica} GPU(s) per replica vs {da.gpus_per_replica} (smaller failure and scaling unit)")
    return Tradeoff(alternative=alt.candidate.label, protects=tuple(protects), gives_up=tuple(gives_up), tied=tied,
                    objective_note=note)


def tradeoffs(ranked: list[Evaluation], objective: str = "goodput", tied: set[str] | frozenset[str] = frozenset(),
              n: int = 3) -> list[Tradeoff]:
    """The best config against the next `n` in the ranking; `tied`: the labels of the first choice's tie group."""
    if len(ranked) < 2:
        return []
    return [_compare(ranked[0], alt, objective, alt.candidate.label in tied) for alt in ranked[1:n + 1]]
