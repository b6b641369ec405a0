"""What every scheduling policy shares: the queues, the step record, and applying a finished step."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from flopwise.sim.block_manager import BlockManager
from flopwise.sim.request import Request, RequestStatus

__all__ = ["SchedulerOutput", "BaseScheduler"]


@dataclass(slots=True)
class SchedulerOutput:
    """One step's plan: request `reqs[i]` computes `num_new[i]` more tokens (read by `ShapeBuilder.step`).

    Decode rows (one token for a request whose only uncomputed token is its last sampled one) dominate a busy
    step, so they are summed as they are added (`num_decodes`, `decode_context_sum`) and only the other rows'
    positions are listed (`chunk_rows`): the step's shape then costs O(chunks), not O(rows)."""

    reqs: list[Request] = field(default_factory=list)
    num_new: list[int] = field(default_factory=list)
    num_preempted: int = 0
    num_decodes: int = 0
    decode_context_sum: int = 0  # contexts (computed tokens) of the decode rows, read when scheduled
    chunk_rows: list[int] = field(default_factory=list)  # positions in `reqs` of the rows that are not decodes

    def add(self, req: Request, n: int) -> None:
        if n == 1 and req.is_decoding:
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
        news = [1] * m
        for i, n in chunks:
            news[i] = n
            self.chunk_rows.append(i)
        self.num_new.extend(news)
        self.num_decodes += num_decodes
        self.decode_context_sum += decode_context_sum

    @property
    def is_empty(self) -> bool:
        return not self.reqs


class BaseScheduler:
    """`waiting` is a deque (FCFS, preempted requests go back to its front); `running` a list in admission
    order (preemption pops its end, the newest)."""

    def __init__(self, kv: BlockManager, *, max_num_seqs: int, max_num_batched_tokens: int,
                 enable_chunked_prefill: bool = True):
        self.kv = kv
        self.max_num_seqs = max_num_seqs
        self.max_num_batched_tokens = max_num_batched_tokens
        self.enable_chunked_prefill = enable_chunked_prefill
        self.waiting: deque[Request] = deque()
        self.running: list[Request] = []

    def add_request(self, req: Request) -> None:
        self.waiting.append(req)

    @property
    def has_work(self) -> bool:
        return bool(self.running or self.waiting)

    def schedule(self, now: float, more_coming: bool = True) -> SchedulerOutput:  # pragma: no cover
        raise NotImplementedError

    def admission_open(self) -> bool:  # pragma: no cover
        raise NotImplementedError

    def _start(self, req: Request, now: float) -> None:
        req.status = RequestStatus.RUNNING
        if req.first_scheduled_at is None:
            req.first_scheduled_at = now
        self.running.append(req)

    def postprocess(self, out: SchedulerOutput, step: int, end_at: float) -> list[Request]:
        """Apply a finished step: computed tokens advance; a request that caught up with its tokens samples
        one (recorded at `step`); those that reach `max_tokens` finish and free their blocks."""
        finished = []
        for req, n in zip(out.reqs, out.num_new):
            c = req.num_computed_tokens + n
            req.num_computed_tokens = c
            if c == req.num_tokens:
                req.sample(step)
                if req.num_output_tokens == req.max_tokens:
                    finished.append(req)
        if finished:
            self.finish(finished, end_at)
        return finished

    def finish(self, finished: list[Request], end_at: float) -> None:
        for req in finished:
            req.status = RequestStatus.FINISHED
            req.finished_at = end_at
            self.kv.free(req, reusable=False)
        self.running = [r for r in self.running if r.finished_at is None]
