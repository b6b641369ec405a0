"""One request's state inside the engine.

As in vLLM v1 there is no prefill or decode phase: a request has `num_tokens` (prompt + tokens generated so
far) and `num_computed_tokens` (tokens whose KV is in the cache); each step the scheduler grants it some of
the difference. A step that brings `num_computed_tokens` up to `num_tokens` samples one new token.

    prompt (num_prompt_tokens)            output so far
    |==========================|~~~~~~~~~~~~~~~~~~~~~~~|
    |<-- num_computed_tokens -->|<- granted this step ->|
                                                        ^ num_tokens: reaching it samples a token

Preemption by recompute sets `num_computed_tokens` to 0: the request later prefills prompt + output again
(minus prefix-cache hits) and then samples its next token.

A request handed over from a disaggregated prefill replica arrives with its prompt's KV
(`num_external_tokens`) and its first token already sampled: it is decoding from its first step here.

Token instants are kept as ranges of global step indices (`token_steps` = [start0, end0, start1, end1, ...]):
a running request emits one token per step, so a whole decode run costs one update, and the instants are
looked up in the engine's step timeline once, at the end. A speculative step emits several tokens at once
(`emit`): each extra token is a one-step range of the same step, so it gets the same instant.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import IntEnum

__all__ = ["RequestStatus", "Request", "visible_steps"]


class RequestStatus(IntEnum):
    """Ordered as vLLM's: everything after PREEMPTED is finished."""

    WAITING = 0
    RUNNING = 1
    PREEMPTED = 2
    FINISHED = 3


@dataclass(slots=True, eq=False, kw_only=True)
class Request:
    request_id: int
    arrival_at: float
    num_prompt_tokens: int
    max_tokens: int  # output tokens to generate (ignore_eos)
    prefix_id: int | None = None
    num_prefix_tokens: int = 0
    # KV computed elsewhere (a disaggregated prefill replica) that arrives with the request: the scheduler
    # takes these tokens as computed at its first admission (vLLM's KV connector, num_external_computed_tokens)
    num_external_tokens: int = 0
    priority: int = 0  # lower first under the priority policy (vLLM's --scheduling-policy priority)
    deadline_at: float | None = None  # the client abandons it then unless finished (its timeout)
    aborted_at: float | None = None  # when the engine dropped it at its deadline
    status: RequestStatus = RequestStatus.WAITING
    num_computed_tokens: int = 0
    num_output_tokens: int = 0
    num_preemptions: int = 0
    num_cached_tokens: int = 0  # prefix-cache hits, summed over admissions
    budget_stalled: bool = False  # it waited at the queue's head for the running requests to leave budget room
    first_scheduled_at: float | None = None
    finished_at: float | None = None
    # when the engine got it: arrival_at, or later after the API server (sim/frontend.py)
    engine_arrival_at: float = field(init=False)
    held_s: float = 0.0  # time a fleet's router held it before any replica could take it (counted as queue)
    token_steps: list[int] = field(default_factory=list)
    num_tokens: int = 0  # prompt + output so far (kept in step with num_output_tokens by `sample`)
    # KV held: block keys of the shared-prefix region (None: a private copy), a count of private blocks, and
    # the tokens they can store (block_size each; maintained by the BlockManager).
    prefix_blocks: list[tuple[int, int] | None] = field(default_factory=list)
    num_own_blocks: int = 0
    num_slots: int = 0
    num_reserved_blocks: int = 0  # blocks set aside for its whole sequence (a reserving scheduler), while running
    # set by the scheduler: its place in the running order (rises with each start), and, while its decode steps
    # are counted lazily (`scheduler.py`), the step from which its counters and token_steps lag (-1: up to date)
    run_seq: int = 0
    decode_since: int = -1

    def __post_init__(self) -> None:
        self.num_tokens = self.num_prompt_tokens + self.num_output_tokens
        self.engine_arrival_at = self.arrival_at

    def entry_s(self, scheduled_at: float) -> tuple[float, float]:
        """(frontend, queue) seconds before its first step at `scheduled_at`: arrival -> reaching the engine, less
        the time a fleet's router held it; reaching the engine -> scheduled, plus that hold."""
        return (self.engine_arrival_at - self.arrival_at - self.held_s,
                scheduled_at - self.engine_arrival_at + self.held_s)

    @property
    def num_blocks(self) -> int:
        return len(self.prefix_blocks) + self.num_own_blocks

    @property
    def is_finished(self) -> bool:
        return self.status > RequestStatus.PREEMPTED

    @property
    def is_decoding(self) -> bool:
        """Only the last sampled token is uncomputed: the next step grants exactly one token."""
        return self.num_computed_tokens == self.num_tokens - 1 and self.num_output_tokens > 0

    def emit(self, step: int, count: int) -> None:
        """`count` tokens sampled together at `step` (a speculative round): ranges [step, step+1) repeated."""
        self.sample(step)
        if count > 1:
            self.num_output_tokens += count - 1
            self.num_tokens += count - 1
            self.token_steps.extend((step, step + 1) * (count - 1))

    def sample(self, step: int, count: int = 1) -> None:
        """`count` tokens sampled at steps step .. step+count-1."""
        self.num_output_tokens += count
        self.num_tokens += count
        r = self.token_steps
        if r and r[-1] == step:
            r[-1] = step + count
        else:
            r.append(step)
            r.append(step + count)


def visible_steps(ranges: list[int], hidden: int) -> list[int]:
    """`ranges` (a request's `token_steps`) without its first `hidden` tokens, the last token always kept: the
    steps a client that times text receives something at, where the server streams nothing for the response's
    opening tokens (`ModelSpec.response_header_tokens`; `frontend.hidden_tokens`). [5, 10] less 3 is [8, 10];
    [5, 6, 9, 12] less 2 is [10, 12]."""
    drop = min(hidden, sum(ranges[1::2]) - sum(ranges[0::2]) - 1)
    if drop <= 0:
        return ranges
    out = list(ranges)
    i = 0
    while drop:
        n = out[i + 1] - out[i]
        if n > drop:
            out[i] += drop
            break
        drop -= n
        i += 2
    return out[i:]
