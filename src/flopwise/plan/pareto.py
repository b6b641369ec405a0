"""Pareto frontier of (throughput per GPU, tokens per second per user): both higher is better.

A point is on the frontier when no other point is at least as good on both axes and strictly better on one.
Sorting by the first axis (descending, ties by the second) and sweeping once keeps a point iff its second
coordinate beats every point before it: O(n log n).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

T = TypeVar("T")

__all__ = ["pareto_front", "dominates"]


def dominates(a: tuple[float, float], b: tuple[float, float]) -> bool:
    return a[0] >= b[0] and a[1] >= b[1] and a != b


def pareto_front(items: Sequence[T], key: Callable[[T], tuple[float, float]]) -> list[T]:
    """The non-dominated items, by descending first coordinate."""
    order = sorted(items, key=lambda it: (-key(it)[0], -key(it)[1]))
    front: list[T] = []
    best_y = float("-inf")
    for it in order:
        x, y = key(it)
        if y > best_y:
            front.append(it)
            best_y = y
    return front
