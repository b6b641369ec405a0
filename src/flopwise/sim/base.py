"""What every scheduling policy shares: the queues, the step record, and applying a finished step."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from flopwise.sim.acceptance import Acceptance
from flopwise.sim.block_manager import BlockManager
from flopwise.sim.request import Request, RequestStatus

__all__ = ["SchedulerOutput", "BaseScheduler"]


@dataclass(slots=True, kw_only=True)
class SchedulerOutput:
    """One step's plan: request `reqs[i]` computes `num_new[i]` more tokens (read by `ShapeBuilder.step`).

    Decode rows (a request whose only uncomputed token is its last sampled one) dominate a busy step, so they
    are summed as they are added (`num_decodes`, `decode_context_sum`) and only the other rows' positions are
    listed (`chunk_rows`): the step's shape then costs O(chunks), not O(rows). Every decode row is granted
    `decode_tokens`: 1, or with speculative decoding the positions it verifies (its last token and k guesses)."""

    decode_tokens: int = 1
    reqs: list[Request] = field(default_factory=list)
    num_new: list[int] = field(default_factory=list)
    num_preempted: int = 0
    num_decodes: int = 0
    decode_context_sum: int = 0  # contexts (computed tokens) of the decode rows, read when scheduled
    chunk_rows: list[int] = field(default_factory=list)  # positions in `reqs` of the rows that are not decodes
    # decode rows not listed in `reqs` (counted in num_decodes and decode_context_sum): a scheduler that advances
    # its steady decodes lazily (`scheduler.py`) plans and applies them as one count; `lazy`: it built this record
    num_lazy: int = 0
    lazy: bool = False

    def add(self, req: Request, n: int) -> None:
        if req.is_decoding:  # granted decode_tokens
            self.num_decodes += 1
            self.decode_context_sum += req.num_computed_tokens
        else:
            self.chunk_rows.append(len(self.reqs))
        self.reqs.append(req)
        self.num_new.append(n)

    def add_prefix_of(self, running: list[Request], num_decodes: int, decode_context_sum: int,
                      chunks: list[tuple[int, int]]) -> None:
        """Add the first num_decodes + len(chunks) requests of `running` (to an empty record): decodes with
        the given count and context sum, and the (position, tokens) `chunks`."""
        m = num_decodes + len(chunks)
        self.reqs.extend(running[:m])
        news = [self.decode_tokens] * m
        for i, n in chunks:
            news[i] = n
            self.chunk_rows.append(i)
        self.num_new.extend(news)
        self.num_decodes += num_decodes
        self.decode_context_sum += decode_context_sum

    @property
    def num_rows(self) -> int:
        return len(self.reqs) + self.num_lazy

    @property
    def is_empty(self) -> bool:
        return not self.reqs and not self.num_lazy


class BaseScheduler:
    """`waiting` is a deque (FCFS, preempted requests go back to its front); `running` a list in admission
    order (preemption pops its end, the newest).

    Speculative decoding (`use_speculation`) changes two numbers, not the policy: a decode is granted
    `decode_tokens` = P tokens (and KV slots) instead of 1, and applying the step emits a random number of
    tokens per decode (`postprocess`). Policies build their step records with `new_output()` and grant each
    decode `decode_tokens`."""

    def __init__(self, kv: BlockManager, *, max_num_seqs: int, max_num_batched_tokens: int,
                 enable_chunked_prefill: bool = True):
        self.kv = kv
        self.max_num_seqs = max_num_seqs
        self.max_num_batched_tokens = max_num_batched_tokens
        self.enable_chunked_prefill = enable_chunked_prefill
        # requests that headed the waiting queue with a prompt the step's token budget could not take whole beside
        # the running requests (chunked prefill off): each waited for the running ones to leave room
        self.num_budget_stalls = 0
        self.acceptance: Acceptance | None = None
        self.decode_tokens = 1
        self.waiting: deque[Request] = deque()
        self.running: list[Request] = []
        self.num_emitted = 0  # tokens the last applied step sampled (what the API server streams out)
        # the priority policy keeps `waiting` and `running` ordered by (priority, arrival): the waiting head
        # is the most urgent and preemption, which pops the end of `running`, takes the least urgent
        self.by_priority = False
        # reserving admission (`reserve_max_tokens`): the blocks the running requests hold at their full length
        self.reserve_full = False
        self.num_reserved_blocks = 0
        self.next_step = 0  # the index of the next step (the last applied one's + 1)
        # decode steps between the engine's reads of new requests (SGLang --scheduler-recv-interval; the replica
        # gates them, `Replica._schedule`); 1: before every step
        self.recv_interval = 1
        self._num_started = 0

    def full_blocks(self, req: Request) -> int:
        """Blocks `req` holds at its last step: prompt + max_tokens - 1 computed tokens, plus speculative slots."""
        return self.kv.blocks_held(req.num_prompt_tokens + req.max_tokens - 1 + self.decode_tokens - 1)

    def reservation_fits(self, req: Request) -> bool:
        """Whether `req` may start under reserving admission (always without it)."""
        return not self.reserve_full or self.num_reserved_blocks + self.full_blocks(req) <= self.kv.num_blocks

    def _release(self, req: Request) -> None:
        self.num_reserved_blocks -= req.num_reserved_blocks
        req.num_reserved_blocks = 0

    def use_speculation(self, acceptance: Acceptance) -> None:
        """Serve decodes speculatively from now on (call before the first step)."""
        self.acceptance = acceptance
        self.decode_tokens = acceptance.positions

    def new_output(self) -> SchedulerOutput:
        """An empty step record whose decode rows get `decode_tokens` each."""
        return SchedulerOutput(decode_tokens=self.decode_tokens)

    def add_request(self, req: Request) -> None:
        if self.by_priority:
            _insort(self.waiting, req)
        else:
            self.waiting.append(req)

    def abort_expired(self, now: float) -> list[Request]:
        """Drop the waiting and running requests whose client gave up by `now` (their deadline), freeing their
        KV as vLLM's abort does; returns them."""
        gone = [r for r in (*self.waiting, *self.running) if r.deadline_at is not None and r.deadline_at <= now]
        if gone:
            self.bring_up_to_date()
            ids = {id(r) for r in gone}
            self.waiting = deque(r for r in self.waiting if id(r) not in ids)
            self.running = [r for r in self.running if id(r) not in ids]
            for r in gone:
                r.status = RequestStatus.FINISHED
                r.aborted_at = now
                if r.num_blocks:
                    self.kv.free(r, reusable=False)
                if r.num_reserved_blocks:
                    self._release(r)
            self._forget(ids)
        return gone

    def bring_up_to_date(self) -> None:
        """Make every running request's counters and token_steps exact (a policy that defers them); none here."""

    def _forget(self, ids: set[int]) -> None:
        """Drop a policy's own references to aborted requests (by `id`); none here."""

    def next_deadline(self) -> float | None:
        """The earliest deadline of a request waiting or running, or None."""
        return min((r.deadline_at for r in (*self.waiting, *self.running) if r.deadline_at is not None),
                   default=None)

    @property
    def has_work(self) -> bool:
        return bool(self.running or self.waiting)

    def schedule(self, now: float, more_coming: bool = True) -> SchedulerOutput:  # pragma: no cover
        raise NotImplementedError

    def admission_open(self) -> bool:  # pragma: no cover
        raise NotImplementedError

    def _start(self, req: Request, now: float) -> None:
        if self.reserve_full:
            req.num_reserved_blocks = n = self.full_blocks(req)
            self.num_reserved_blocks += n
        req.status = RequestStatus.RUNNING
        self._num_started += 1
        req.run_seq = self._num_started
        if req.first_scheduled_at is None:
            req.first_scheduled_at = now
        if self.by_priority:
            _insort(self.running, req)
        else:
            self.running.append(req)

    def postprocess(self, out: SchedulerOutput, step: int, end_at: float) -> list[Request]:
        """Apply a finished step (`_apply_rows`); the requests that reach `max_tokens` finish and free their blocks."""
        finished = self._apply_rows(out, step)
        self.next_step = step + 1
        if finished:
            self.finish(finished, end_at)
        return finished

    def _apply_rows(self, out: SchedulerOutput, step: int) -> list[Request]:
        """Apply the listed rows of a finished step: computed tokens advance; a request that caught up with its
        tokens samples one (recorded at `step`); returns those that reach `max_tokens`, in row order.

        Speculative decoding: a decode verified P positions and keeps e = accepted + 1 tokens (drawn by
        `acceptance`, capped at what the request still lacks), all sampled at `step`. Its computed tokens
        advance by e (the rejected guesses' KV is overwritten later), so it is decoding again, and its unused
        slots stay allocated for the next round."""
        finished = []
        acceptance = draws = None
        emitted_total = 0
        if out.decode_tokens > 1 and out.num_decodes:
            acceptance = self.acceptance
            assert acceptance is not None
            draws = iter(acceptance.draw(out.num_decodes))
            emitted = 0
        if draws is None:  # no speculation this step: the common path, per request per step
            reqs, news, end = out.reqs, out.num_new, step + 1
            start = 0
            for pos in (*out.chunk_rows, len(reqs)):  # the decode rows between the chunk rows, then that chunk row
                for i in range(start, pos):  # a decode row: its one token computed, so it samples (Request.sample)
                    req = reqs[i]
                    c = req.num_tokens
                    req.num_computed_tokens = c
                    req.num_tokens = c + 1
                    o = req.num_output_tokens + 1
                    req.num_output_tokens = o
                    ranges = req.token_steps
                    if ranges and ranges[-1] == step:  # (empty where its first token came from elsewhere)
                        ranges[-1] = end
                    else:
                        ranges.append(step)
                        ranges.append(end)
                    if o == req.max_tokens:
                        finished.append(req)
                emitted_total += pos - start
                if pos == len(reqs):
                    break
                req = reqs[pos]
                c = req.num_computed_tokens + news[pos]
                req.num_computed_tokens = c
                if c == req.num_tokens:  # its prompt (or recomputation) done: it samples its next token
                    req.sample(step)
                    emitted_total += 1
                    if req.num_output_tokens == req.max_tokens:
                        finished.append(req)
                start = pos + 1
            self.num_emitted = emitted_total
            return finished
        for req, n in zip(out.reqs, out.num_new, strict=True):
            if req.is_decoding:
                e = min(next(draws), req.max_tokens - req.num_output_tokens)
                req.num_computed_tokens += e
                req.emit(step, e)
                emitted += e
                emitted_total += e
                if req.num_output_tokens == req.max_tokens:
                    finished.append(req)
                continue
            c = req.num_computed_tokens + n
            req.num_computed_tokens = c
            if c == req.num_tokens:
                req.sample(step)
                emitted_total += 1
                if req.num_output_tokens == req.max_tokens:
                    finished.append(req)
        self.num_emitted = emitted_total
        if acceptance is not None:  # speculating this step (draws were drawn)
            acceptance.count(out.num_decodes, emitted)
        return finished

    # ---- decode runs (`decode_run.py`): every running request decoding, k steps alike -----------------
    def run_horizon(self) -> int:
        """Steps until the first running request finishes if every one is decoding, else 0."""
        k = 1 << 62
        for r in self.running:
            out = r.num_output_tokens
            if not out or r.num_computed_tokens != r.num_tokens - 1:
                return 0
            if r.max_tokens - out < k:
                k = r.max_tokens - out
        return k

    def decode_context_sum(self) -> int:
        """The running requests' computed tokens, summed."""
        return sum(r.num_computed_tokens for r in self.running)

    def decode_contexts(self) -> list[int]:
        """Each running request's computed tokens, in running order."""
        return [r.num_computed_tokens for r in self.running]

    def decode_steps_that_fit(self, k: int) -> int:
        """The most decode steps of the running batch, up to k, whose blocks fit the free pool."""
        return self.kv.decode_steps_that_fit(self.running, k)

    def apply_run(self, k: int, step0: int) -> list[Request]:
        """Advance every running request by a run's k decode steps (their tokens at steps step0 .. step0+k-1);
        returns those that finished, in running order (the caller records the step, then `finish`es them)."""
        kv, running = self.kv, self.running
        kv.allocate_decode_run(running, k)
        finished = []
        end_step = step0 + k
        for r in running:  # r.sample(step0, k) and k more computed tokens, inlined: per request per run
            n = r.num_output_tokens + k
            r.num_output_tokens = n
            r.num_tokens += k
            r.num_computed_tokens += k
            ranges = r.token_steps
            if ranges and ranges[-1] == step0:
                ranges[-1] = end_step
            else:
                ranges.append(step0)
                ranges.append(end_step)
            if n == r.max_tokens:
                finished.append(r)
        self.next_step = end_step
        return finished

    def finish(self, finished: list[Request], end_at: float) -> None:
        for req in finished:
            req.status = RequestStatus.FINISHED
            req.finished_at = end_at
            self.kv.free(req, reusable=False)
            if req.num_reserved_blocks:
                self._release(req)
        if len(finished) == 1:  # the usual case: one request leaves, the others keep their order
            self.running.remove(finished[0])
        else:
            self.running = [r for r in self.running if r.finished_at is None]


def _insort(queue: deque[Request] | list[Request], req: Request) -> None:
    """Insert `req` after every request at least as urgent: (priority, arrival) order, FIFO among equals."""
    key = (req.priority, req.arrival_at)
    i = len(queue)
    while i > 0 and (queue[i - 1].priority, queue[i - 1].arrival_at) > key:
        i -= 1
    queue.insert(i, req)
