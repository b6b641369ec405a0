"""What the chosen config protects and what it gives up, against its nearest alternatives, in words a
reviewer can accept or reject. Accuracy risk comes from `techniques.quantization` (published deltas)."""

from __future__ import annotations

from dataclasses import dataclass

from flopwise.plan.evaluate import Evaluation
from flopwise.techniques.quantization import kv_risk, weight_risk

__all__ = ["Tradeoff", "tradeoffs"]


@dataclass(frozen=True, slots=True)
class Tradeoff:
    alternative: str
    protects: tuple[str, ...]
    gives_up: tuple[str, ...]

    def to_dict(self) -> dict[str, object]:
        return {"alternative": self.alternative, "protects": list(self.protects), "gives_up": list(self.gives_up)}


def _pct(a: float, b: float) -> float:
    return (a / b - 1.0) * 100.0 if b else 0.0


def _compare(best: Evaluation, alt: Evaluation) -> Tradeoff:
    protects: list[str] = []
    gives_up: list[str] = []

    def side(good: bool, text: str) -> None:
        (protects if good else gives_up).append(text)

    g = _pct(best.goodput_per_gpu, alt.goodput_per_gpu)
    if abs(g) >= 1:
        side(g > 0, f"goodput per GPU {g:+.0f}% ({best.goodput_per_gpu:.2f} vs {alt.goodput_per_gpu:.2f} req/s)")
    u = _pct(best.tokens_per_s_per_user, alt.tokens_per_s_per_user)
    if abs(u) >= 1:
        side(u > 0, f"per-user speed {u:+.0f}% ({best.tokens_per_s_per_user:.0f} vs {alt.tokens_per_s_per_user:.0f} tok/s)")
    cb, ca = best.cost_per_1m_tokens, alt.cost_per_1m_tokens
    if cb and ca and abs(_pct(cb, ca)) >= 1:
        side(cb < ca, f"cost {_pct(cb, ca):+.0f}% (${cb:.3f} vs ${ca:.3f} per 1M output tokens)")
    for key, label in (("ttft_ms", "P95 TTFT"), ("tpot_ms", "P95 TPOT")):
        vb, va = best.summary[key]["p95"], alt.summary[key]["p95"]
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
            side(rb.rank < ra.rank, f"accuracy risk of {what}: {name_b} is {rb.level} vs {name_a} {ra.level} ({rb.note})")
    if db.gpus_per_replica != da.gpus_per_replica:
        side(db.gpus_per_replica < da.gpus_per_replica,
             f"{db.gpus_per_replica} GPU(s) per replica vs {da.gpus_per_replica} (smaller failure and scaling unit)")
    return Tradeoff(alt.candidate.label, tuple(protects), tuple(gives_up))


def tradeoffs(ranked: list[Evaluation], n: int = 3) -> list[Tradeoff]:
    """The best config against the next `n` in the ranking."""
    if len(ranked) < 2:
        return []
    return [_compare(ranked[0], alt) for alt in ranked[1:n + 1]]
