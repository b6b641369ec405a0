"""What one engine step computes, reduced to the sums the cost model needs.

A step serves a batch of sequences, each as (new tokens this step, tokens already cached). Prefill
(context 0, n = prompt), decode (n = 1) and chunked-prefill chunks are all the same record. For attention the
cost model needs, per attention span (None = full, an int = a sliding window or a sparse top-k, `Chunk(C)` =
chunked local attention), the query-key pairs and the cached tokens read, with their formulas in
`cost/attention.py`:

    pairs(c, n, span)    query-key pairs, causal (each new token attends to the cached context and the new tokens
                         before it, within its window or chunk)
    kv_read(c, span)     cached tokens read from the KV cache

Sequences with n = 1 are decode rows; MLA attention uses a different (absorbed) form for them, so decode
and prefill sums are kept apart. Linear-state layers need only the token and sequence counts.

        cached c tokens           n new tokens
    |=======================|-------------|
     <- read from KV cache -> <- written ->
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

from flopwise.cost.attention import AttentionWork, Span, causal_pairs, decode_work, prefill_work, span_work
from flopwise.specs.defaults import MAX_NUM_REQUESTS, MAX_TOKENS_PER_REQUEST
from flopwise.validate import integer

__all__ = ["AttentionWork", "BatchShape", "batch_shape", "prefill_shape", "decode_shape", "causal_pairs",
           "check_static_batch", "busiest_group"]


def check_static_batch(batch: object, input_len: object, output_len: object) -> None:
    """A static batch's numbers as `estimate` and `explain` take them: whole, positive and bounded (at most
    MAX_NUM_REQUESTS sequences of at most MAX_TOKENS_PER_REQUEST tokens each way); else a WorkloadError."""
    integer(batch, "batch", lo=1, hi=MAX_NUM_REQUESTS)
    integer(input_len, "input_len", lo=1, hi=MAX_TOKENS_PER_REQUEST)
    integer(output_len, "output_len", lo=1, hi=MAX_TOKENS_PER_REQUEST)


@dataclass(frozen=True, slots=True)
class BatchShape:
    num_tokens: int
    num_seqs: int
    num_logits: int  # positions that produce a token (LM head rows)
    attention: dict[Span, AttentionWork]  # by span
    # with data-parallel attention, the attention group with the most tokens where whole prompt chunks make the
    # groups uneven (`busiest_group`); None: the groups share the step evenly (the cost model splits it 1/dp)
    busiest: BatchShape | None = None

    def __post_init__(self) -> None:
        if self.num_tokens < 0 or self.num_seqs < 0 or self.num_logits < 0:
            raise ValueError("batch counts must be >= 0")


def batch_shape(seqs: Iterable[Sequence[int]], windows: Iterable[Span],
                num_logits: int | None = None) -> BatchShape:
    """Reduce (new_tokens, context_len) pairs to a BatchShape. Every sequence emits one token unless
    `num_logits` says otherwise (a chunk that does not finish its prompt emits none)."""
    rows = [(int(s[0]), int(s[1])) for s in seqs]
    for n, c in rows:
        if n < 1 or c < 0:
            raise ValueError(f"each sequence needs new_tokens >= 1 and context >= 0, got ({n}, {c})")
    work = {w: span_work(rows, w) for w in set(windows)}
    return BatchShape(sum(n for n, _ in rows), len(rows), len(rows) if num_logits is None else num_logits, work)


def prefill_shape(batch: int, input_len: int, windows: Iterable[Span], groups: int = 1) -> BatchShape:
    """`batch` prompts of `input_len` tokens, prefilled in one step (over `groups` data-parallel attention groups,
    each prompt whole on one of them)."""
    spans = set(windows)
    shape = BatchShape(batch * input_len, batch, batch, {w: prefill_work(batch, input_len, w) for w in spans})
    if groups > 1 and batch % groups:
        return replace(shape, busiest=prefill_shape(-(-batch // groups), input_len, spans))
    return shape


def busiest_group(decodes: int, decode_context_sum: int, chunks: Sequence[tuple[int, int, bool]], groups: int,
                  windows: Iterable[Span]) -> BatchShape | None:
    """With data-parallel attention over `groups` groups, the group that takes the most tokens this step, which the
    others wait for (every group meets at the MoE layers' collectives): the decode rows spread as evenly as whole
    rows go, each prompt chunk (new tokens, cached context, whether it ends its prompt) whole on one group, largest
    first to the group with the fewest tokens so far. A request runs on the rank its server sent it to (TensorRT-LLM's
    attention DP, SGLang's --enable-dp-attention), so a lone context makes its rank the slow one (TensorRT-LLM tech
    blog 10, 'ADP Balance Strategy': the iteration time is dominated by the slowest rank). Each group's decode rows
    carry the mean context. None where the step has no chunks (the groups are even: the cost model splits it
    1/groups)."""
    if groups < 2 or not chunks:
        return None
    q, extra = divmod(decodes, groups)
    rows = [q + (g < extra) for g in range(groups)]
    load = list(rows)
    mine: list[list[tuple[int, int, bool]]] = [[] for _ in range(groups)]
    for chunk in sorted(chunks, key=lambda ch: -ch[0]):
        g = min(range(groups), key=load.__getitem__)
        load[g] += chunk[0]
        mine[g].append(chunk)
    g = max(range(groups), key=load.__getitem__)
    b = rows[g]
    mean = decode_context_sum // decodes if decodes else 0
    prompts = [(n, c) for n, c, _ in mine[g]]
    work = {}
    for w in set(windows):
        p, d = span_work(prompts, w), decode_work(b, mean, w)
        work[w] = AttentionWork(p.prefill_pairs, p.prefill_kv_read, p.decode_pairs + d.decode_pairs,
                                p.decode_kv_read + d.decode_kv_read)
    logits = b + sum(1 for _, _, last in mine[g] if last)
    return BatchShape(load[g], b + len(prompts), logits, work)


def decode_shape(batch: int, context_len: int, windows: Iterable[Span]) -> BatchShape:
    """`batch` sequences each decoding one token after `context_len` cached tokens."""
    return BatchShape(batch, batch, batch, {w: decode_work(batch, context_len, w) for w in set(windows)})
