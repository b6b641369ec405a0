"""The step record for the cost model, built without per-step allocation.

`cost.batch_shape` validates and copies a list of (new_tokens, context) pairs; at 256 rows that costs ~90 us,
ten times the step cost itself. The builders here compute the same sums (see `cost/batch.py` for the
formulas) straight from the scheduled requests, and in O(1) for a decode step of a full-attention model:

    decode rows, full attention, B rows with context sum C:   pairs = C + B,   kv_read = C
"""

from __future__ import annotations

from collections.abc import Sequence

from flopwise.cost.batch import AttentionWork, BatchShape, causal_pairs
from flopwise.sim.request import Request

__all__ = ["ShapeBuilder"]


class ShapeBuilder:
    """Builds BatchShapes for one model's attention windows."""

    __slots__ = ("windows", "full_only")

    def __init__(self, windows: Sequence[int | None]):
        self.windows = tuple(windows)
        self.full_only = self.windows == (None,)

    def step(self, reqs: Sequence[Request], num_new: Sequence[int]) -> tuple[BatchShape, int]:
        """The shape of one scheduled step (contexts read before it is applied), and its prompt tokens
        (tokens granted to requests that are not decoding)."""
        tokens = logits = prompt = 0
        rows = []
        for req, n in zip(reqs, num_new):
            c = req.num_computed_tokens
            t = req.num_tokens
            tokens += n
            if c + n == t:
                logits += 1
                if n == 1 and req.num_output_tokens:
                    rows.append((1, c))
                    continue
            prompt += n
            rows.append((n, c))
        work = {w: self._work(rows, w) for w in self.windows}
        return BatchShape(tokens, len(rows), logits, work), prompt

    @staticmethod
    def _work(rows: list[tuple[int, int]], w: int | None) -> AttentionWork:
        pp = pk = dp = dk = 0
        for n, c in rows:
            if n == 1:
                if w is None or c < w:
                    dp += c + 1
                    dk += c
                else:
                    dp += w
                    dk += w
            else:
                pp += causal_pairs(c, n, w)
                pk += c if w is None or c < w else w
        return AttentionWork(pp, pk, dp, dk)

    def decode(self, num_seqs: int, context_sum: int) -> BatchShape:
        """`num_seqs` decode rows whose contexts sum to `context_sum` (full attention only)."""
        return BatchShape(num_seqs, num_seqs, num_seqs,
                          {None: AttentionWork(0, 0, context_sum + num_seqs, context_sum)})

    def decode_rows(self, contexts: Sequence[int]) -> BatchShape:
        """Decode rows with the given contexts (any windows)."""
        rows = [(1, c) for c in contexts]
        n = len(rows)
        return BatchShape(n, n, n, {w: self._work(rows, w) for w in self.windows})
