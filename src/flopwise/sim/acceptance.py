"""How many tokens a speculative decode emits in one step: its accepted guesses plus the target's own token.

Under the i.i.d. acceptance model (`specs/speculative.py`), the accepted guesses J out of k satisfy
P(J >= j) = alpha^j for j = 0..k. With U uniform on [0, 1),

    J = #{ j in 1..k : U < alpha^j }        emitted = J + 1,        E[emitted] = (1 - alpha^(k+1)) / (1 - alpha)

(a truncated geometric: P(J = j) = alpha^j (1 - alpha) for j < k, P(J = k) = alpha^k). One numpy Generator per
engine, seeded by the run's seed and the replica, draws in blocks of `_BLOCK` that verified decodes consume in
step order, so a run is deterministic. A tree (`verify_tokens`) widens what is verified, not what is accepted:
its mean is the spec's.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from flopwise.specs.speculative import SpeculativeSpec

__all__ = ["Acceptance"]

_BLOCK = 4096  # draws per numpy call (one call per step would cost more than the draw)


class Acceptance:
    """Draws emitted tokens per verified decode, and counts what was emitted (for the run's summary)."""

    __slots__ = ("positions", "k", "_thresholds", "_rng", "_drawn", "_next", "num_rows", "num_tokens")

    def __init__(self, spec: SpeculativeSpec, seed: int | Sequence[int]):
        self.positions = spec.positions  # tokens a decode is granted (and KV slots it takes) per step
        self.k = spec.k
        alpha = spec.rate
        self._thresholds = np.array([alpha**j for j in range(spec.k, 0, -1)])  # alpha^k <= ... <= alpha^1
        self._rng = np.random.default_rng(seed)
        self._drawn: list[int] = []
        self._next = 0
        self.num_rows = 0  # verified decodes
        self.num_tokens = 0  # tokens they emitted (after the cap at each request's max_tokens)

    def draw(self, n: int) -> list[int]:
        """Emitted tokens (1..k+1) for the next `n` verified decodes: k - #{thresholds <= U} accepted, plus one."""
        i = self._next
        while i + n > len(self._drawn):
            u = self._rng.random(max(_BLOCK, n))
            fresh = (self.k + 1 - np.searchsorted(self._thresholds, u, side="right")).tolist()
            self._drawn = self._drawn[i:] + fresh
            i = 0
        self._next = i + n
        return self._drawn[i:i + n]

    def count(self, rows: int, tokens: int) -> None:
        self.num_rows += rows
        self.num_tokens += tokens
