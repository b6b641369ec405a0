"""The step record for the cost model, built without per-step allocation.

`cost.batch_shape` validates and copies a list of (new_tokens, context) pairs; at 256 rows that costs ~90 us,
ten times the step cost itself. The builders here compute the same sums (see `cost/batch.py` for the
formulas) straight from the scheduled requests. On a full-attention model the decode rows enter only through
their count and context sum, which the scheduler keeps as it adds them, so a step costs O(non-decode rows):

    decode rows, full attention, B rows with context sum C:   pairs = C + B,   kv_read = C
"""

from __future__ import annotations

from collections.abc import Sequence

from flopwise.cost.batch import AttentionWork, BatchShape, causal_pairs
from flopwise.sim.base import SchedulerOutput

__all__ = ["ShapeBuilder"]


class ShapeBuilder:
    """Builds BatchShapes for one model's attention windows."""

    __slots__ = ("windows", "full_only")

    def __init__(self, windows: Sequence[int | None]):
        self.windows = tuple(windows)
        self.full_only = self.windows == (None,)

    def step(self, out: SchedulerOutput) -> tuple[BatchShape, int]:
        """The shape of one scheduled step (contexts read before it is applied), and its prompt tokens
        (tokens granted to requests that are not decoding). Full attention needs only the decode rows' count
        and context sum, which the scheduler keeps; windowed attention reads every row's context."""
        reqs, news = out.reqs, out.num_new
        chunks = [(news[i], reqs[i]) for i in out.chunk_rows]
        prompt = sum(n for n, _ in chunks)
        logits = out.num_decodes + sum(1 for n, r in chunks if r.num_computed_tokens + n == r.num_tokens)
        if self.full_only:
            w = self._work([(n, r.num_computed_tokens) for n, r in chunks], None)
            b, ctx = out.num_decodes, out.decode_context_sum
            work = {None: AttentionWork(w.prefill_pairs, w.prefill_kv_read, w.decode_pairs + ctx + b,
                                        w.decode_kv_read + ctx)}
        else:
            rows = [(n, r.num_computed_tokens) for r, n in zip(reqs, news)]
            work = {w: self._work(rows, w) for w in self.windows}
        return BatchShape(out.num_decodes + prompt, len(reqs), logits, work), prompt

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
