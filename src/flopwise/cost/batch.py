"""What one engine step computes, reduced to the sums the cost model needs.

A step serves a batch of sequences, each as (new tokens this step, tokens already cached). Prefill
(context 0, n = prompt), decode (n = 1) and chunked-prefill chunks are all the same record. For attention
the cost model needs, per attention window w (None = full):

    pairs(c, n, w)   = sum_{j=1..n} min(c + j, w)     query-key pairs, causal (each new token attends to
                                                        the cached context and the new tokens before it)
    kv_read(c, w)    = min(c, w)                       cached tokens read from the KV cache

Sequences with n = 1 are decode rows; MLA attention uses a different (absorbed) form for them, so decode
and prefill sums are kept apart.

        cached c tokens           n new tokens
    |=======================|-------------|
     <- read from KV cache -> <- written ->
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

__all__ = ["AttentionWork", "BatchShape", "batch_shape", "prefill_shape", "decode_shape", "causal_pairs"]


def causal_pairs(c: int, n: int, w: int | None) -> int:
    """sum_{j=1..n} min(c + j, w), in closed form."""
    if w is None or c + n <= w:
        return n * c + n * (n + 1) // 2
    if c >= w:
        return n * w
    j0 = w - c  # positions 1..j0 are below the window
    return j0 * c + j0 * (j0 + 1) // 2 + (n - j0) * w


@dataclass(frozen=True, slots=True)
class AttentionWork:
    """Attention sums for one window size, split into prefill rows (n > 1) and decode rows (n = 1)."""

    prefill_pairs: int = 0
    prefill_kv_read: int = 0
    decode_pairs: int = 0
    decode_kv_read: int = 0


@dataclass(frozen=True, slots=True)
class BatchShape:
    num_tokens: int
    num_seqs: int
    num_logits: int  # positions that produce a token (LM head rows)
    attention: dict[int | None, AttentionWork]  # by window

    def __post_init__(self) -> None:
        if self.num_tokens < 0 or self.num_seqs < 0 or self.num_logits < 0:
            raise ValueError("batch counts must be >= 0")


def batch_shape(seqs: Iterable[Sequence[int]], windows: Iterable[int | None],
                num_logits: int | None = None) -> BatchShape:
    """Reduce (new_tokens, context_len) pairs to a BatchShape. Every sequence emits one token unless
    `num_logits` says otherwise (a chunk that does not finish its prompt emits none)."""
    rows = [(int(s[0]), int(s[1])) for s in seqs]
    for n, c in rows:
        if n < 1 or c < 0:
            raise ValueError(f"each sequence needs new_tokens >= 1 and context >= 0, got ({n}, {c})")
    work = {}
    for w in set(windows):
        pp = pk = dp = dk = 0
        for n, c in rows:
            if n == 1:
                dp += c + 1 if w is None or c < w else w
                dk += c if w is None else min(c, w)
            else:
                pp += causal_pairs(c, n, w)
                pk += c if w is None else min(c, w)
        work[w] = AttentionWork(pp, pk, dp, dk)
    return BatchShape(sum(n for n, _ in rows), len(rows), len(rows) if num_logits is None else num_logits, work)


def prefill_shape(batch: int, input_len: int, windows: Iterable[int | None]) -> BatchShape:
    """`batch` prompts of `input_len` tokens, prefilled in one step."""
    work = {w: AttentionWork(prefill_pairs=batch * causal_pairs(0, input_len, w)) for w in set(windows)}
    if input_len == 1:
        work = {w: AttentionWork(decode_pairs=batch) for w in set(windows)}
    return BatchShape(batch * input_len, batch, batch, work)


def decode_shape(batch: int, context_len: int, windows: Iterable[int | None]) -> BatchShape:
    """`batch` sequences each decoding one token after `context_len` cached tokens."""
    work = {}
    for w in set(windows):
        c = context_len if w is None else min(context_len, w)
        p = context_len + 1 if w is None or context_len < w else w
        work[w] = AttentionWork(decode_pairs=batch * p, decode_kv_read=batch * c)
    return BatchShape(batch, batch, batch, work)
