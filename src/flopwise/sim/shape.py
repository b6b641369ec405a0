"""The step record for the cost model, built without per-step allocation.

`cost.batch_shape` validates and copies a list of (new_tokens, context) pairs; at 256 rows that costs ~90 us,
ten times the step cost itself. The builders here compute the same sums (`cost/attention.py`: `span_work` for
each span) straight from the scheduled requests. On a model whose attention layers all attend every token (full,
MLA; linear-state layers need no sums) the decode rows enter only through their count and context sum, which the
scheduler keeps as it adds them, so a step costs O(non-decode rows):

    decode rows, full attention, B rows with context sum C:   pairs = C + B,   kv_read = C
    the same verifying P positions each (speculative decoding): pairs = P·C + B·P(P+1)/2,   kv_read = C
    (rows of P > 1 new tokens, counted with the prefill rows as `cost.batch_shape` does)
    the same expanded (`expand`: vLLM V0's batch-expansion scorer): B·P decode rows, the same pairs,
    kv_read = P·C + B·P(P-1)/2

`DraftShapes` gives a speculative step's proposer passes (`cost/speculative.py`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from flopwise.cost.attention import AttentionWork, Span, span_work
from flopwise.cost.batch import BatchShape, busiest_group
from flopwise.sim.base import SchedulerOutput
from flopwise.sim.request import Request

__all__ = ["ShapeBuilder", "DraftShapes"]


class ShapeBuilder:
    """Builds BatchShapes for one model's attention spans, over `groups` data-parallel attention groups (a step
    with prompt chunks then carries its busiest group: `cost.batch.busiest_group`)."""

    __slots__ = ("windows", "full_only", "groups", "expand")

    def __init__(self, windows: Sequence[Span], groups: int = 1, expand: bool = False):
        self.windows = tuple(windows)
        self.full_only = self.windows == (None,)
        self.groups = groups
        self.expand = expand  # a decode verifying P > 1 positions is P single-token rows (`cost.verify_shape`)

    def step(self, out: SchedulerOutput, decode_tokens: int | None = None) -> tuple[BatchShape, int]:
        """The shape of one scheduled step (contexts read before it is applied), and its prompt tokens
        (tokens granted to requests that are not decoding). Full attention needs only the decode rows' count
        and context sum, which the scheduler keeps; windowed attention reads every row's context. Each decode
        row carries `decode_tokens` new tokens, all producing logits (default: as scheduled)."""
        reqs, news = out.reqs, out.num_new
        p = out.decode_tokens if decode_tokens is None else decode_tokens
        busiest = None
        if self.groups > 1 and p == 1 and out.chunk_rows:
            busiest = busiest_group(out.num_decodes, out.decode_context_sum,
                                    [(news[i], reqs[i].num_computed_tokens,
                                      reqs[i].num_computed_tokens + news[i] == reqs[i].num_tokens)
                                     for i in out.chunk_rows], self.groups, self.windows)
        if self.full_only and p == 1:
            tokens, seqs, logits, sums, prompt = self.counts(out)
            return BatchShape(tokens, seqs, logits, {None: AttentionWork(*sums)}, busiest), prompt
        chunks = [(news[i], reqs[i]) for i in out.chunk_rows]
        prompt = sum(n for n, _ in chunks)
        b = out.num_decodes
        logits = b * p + sum(1 for n, r in chunks if r.num_computed_tokens + n == r.num_tokens)
        work: dict[Span, AttentionWork]
        if p > 1 and self.expand:
            return self._expanded(out, chunks, prompt, p, logits), prompt
        if self.full_only:
            w = span_work([(n, r.num_computed_tokens) for n, r in chunks], None)
            ctx = out.decode_context_sum
            if p == 1:
                work = {None: AttentionWork(w.prefill_pairs, w.prefill_kv_read, w.decode_pairs + ctx + b,
                                            w.decode_kv_read + ctx)}
            else:
                work = {None: AttentionWork(w.prefill_pairs + p * ctx + b * p * (p + 1) // 2,
                                            w.prefill_kv_read + ctx, w.decode_pairs, w.decode_kv_read)}
        else:
            if p == out.decode_tokens:
                rows = [(n, r.num_computed_tokens) for r, n in zip(reqs, news, strict=True)]
            else:
                is_chunk = set(out.chunk_rows)
                rows = [(news[i] if i in is_chunk else p, r.num_computed_tokens) for i, r in enumerate(reqs)]
            work = {w: span_work(rows, w) for w in self.windows}
        return BatchShape(b * p + prompt, out.num_rows, logits, work, busiest), prompt

    def _expanded(self, out: SchedulerOutput, chunks: list[tuple[int, Request]], prompt: int, p: int,
                  logits: int) -> BatchShape:
        """`step` with each decode row's `p` positions as single-token rows at its context + 0 .. p - 1."""
        b, ctx = out.num_decodes, out.decode_context_sum
        work: dict[Span, AttentionWork]
        if self.full_only:
            w = span_work([(n, r.num_computed_tokens) for n, r in chunks], None)
            work = {None: AttentionWork(w.prefill_pairs, w.prefill_kv_read,
                                        w.decode_pairs + p * ctx + b * p * (p + 1) // 2,
                                        w.decode_kv_read + p * ctx + b * p * (p - 1) // 2)}
        else:
            is_chunk = set(out.chunk_rows)
            rows = [(n, r.num_computed_tokens) for n, r in chunks]
            rows += [(1, r.num_computed_tokens + j) for i, r in enumerate(out.reqs) if i not in is_chunk
                     for j in range(p)]
            work = {w: span_work(rows, w) for w in self.windows}
        return BatchShape(b * p + prompt, out.num_rows + b * (p - 1), logits, work)

    def counts(self, out: SchedulerOutput) -> tuple[int, int, int, tuple[int, int, int, int], int]:
        """`step(out)` of a full-attention model whose decode rows take one token each, as the shape's numbers
        (tokens, sequences, logits, attention work: `cost.full_step_time`'s arguments) and the prompt tokens,
        without building it: `span_work` over the chunk rows, inlined (the simulator's every general step)."""
        reqs, news = out.reqs, out.num_new
        prompt = finishing = pp = pk = dp = dk = 0
        for i in out.chunk_rows:
            n, r = news[i], reqs[i]
            c = r.num_computed_tokens
            prompt += n
            if c + n == r.num_tokens:
                finishing += 1
            if n == 1:
                dp += c + 1
                dk += c
            else:
                pp += n * c + n * (n + 1) // 2  # attention.causal_pairs(c, n, None)
                pk += c
        b, ctx = out.num_decodes, out.decode_context_sum
        return b + prompt, len(reqs) + out.num_lazy, b + finishing, (pp, pk, dp + ctx + b, dk + ctx), prompt

    def decode(self, num_seqs: int, context_sum: int) -> BatchShape:
        """`num_seqs` decode rows whose contexts sum to `context_sum` (full attention only)."""
        return BatchShape(num_seqs, num_seqs, num_seqs,
                          {None: AttentionWork(0, 0, context_sum + num_seqs, context_sum)})

    def decode_rows(self, contexts: Sequence[int]) -> BatchShape:
        """Decode rows with the given contexts (any spans)."""
        rows = [(1, c) for c in contexts]
        n = len(rows)
        return BatchShape(n, n, n, {w: span_work(rows, w) for w in self.windows})


class DraftShapes:
    """The proposer's batch in each pass of a speculative step (`cost.speculative.round_time_s`): pass 0 runs
    the step's prompt chunks (the proposer's own prefill) and one token per decode row at its context c; pass
    j > 0 one token per decode row at c + j (none when the step has no decode rows)."""

    __slots__ = ("builder",)

    def __init__(self, windows: Sequence[Span]):
        self.builder = ShapeBuilder(windows)

    def passes(self, out: SchedulerOutput) -> Callable[[int], BatchShape | None]:
        builder, b = self.builder, out.num_decodes
        contexts: list[int] = []
        if b and not builder.full_only:
            is_chunk = set(out.chunk_rows)
            contexts = [r.num_computed_tokens for i, r in enumerate(out.reqs) if i not in is_chunk]

        def shape(j: int) -> BatchShape | None:
            if j == 0:
                return builder.step(out, decode_tokens=1)[0]
            if not b:
                return None
            if builder.full_only:
                return builder.decode(b, out.decode_context_sum + b * j)
            return builder.decode_rows([c + j for c in contexts])

        return shape
