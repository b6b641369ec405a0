"""An ordinal rating with its reason: accuracy risk and engineering complexity in the trade-off ledger."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["LEVELS", "Rating", "worst"]

LEVELS = ("none", "low", "medium", "high")


@dataclass(frozen=True, slots=True)
class Rating:
    """`level` is one of LEVELS; `note` says what is typically seen or needed, `source` where it was reported."""

    level: str
    note: str
    source: str = ""

    def __post_init__(self) -> None:
        if self.level not in LEVELS:
            raise ValueError(f"rating level must be one of {LEVELS}, got {self.level!r}")

    @property
    def rank(self) -> int:
        return LEVELS.index(self.level)

    def to_dict(self) -> dict[str, str]:
        return {"level": self.level, "note": self.note, "source": self.source}


NONE = Rating("none", "")


def worst(ratings: tuple[Rating, ...] | list[Rating]) -> Rating:
    """The highest level; notes of every non-trivial part joined (a combination is as risky as its worst part)."""
    if not ratings:
        return NONE
    top = max(r.rank for r in ratings)
    parts = [r for r in ratings if r.note and r.rank > 0] or [r for r in ratings if r.note]
    return Rating(LEVELS[top], "; ".join(dict.fromkeys(r.note for r in parts)),
                  "; ".join(dict.fromkeys(r.source for r in parts if r.source)))
