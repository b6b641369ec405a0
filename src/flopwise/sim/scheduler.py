"""The vLLM v1 scheduler (`vllm/v1/core/sched/scheduler.py`), reduced to what decides timing.

Each step has a token budget (`max_num_batched_tokens`) and grants each request some of the tokens it still
lacks (`num_tokens - num_computed_tokens`):

1. Running requests, in admission order (`_schedule_running`). Decodes take 1 token (with speculative
   decoding, the P positions they verify, `decode_tokens`; a decode that does not fit the budget waits, where
   vLLM would trim its guesses), a request in the middle of a chunked prefill takes min(rest of its prompt,
   budget). If its KV blocks cannot be allocated, the newest
   running request is preempted (recompute: its blocks are freed, its computed tokens reset to 0, and it goes
   to the front of the waiting queue, counted) until the allocation fits; if the request itself is the newest,
   it is preempted and the loop stops.
2. Only if nobody was preempted in this step: waiting requests in FCFS order (`_schedule_waiting`), while
   the budget lasts and fewer than `max_num_seqs` run (and, with reserving admission, `reserve_max_tokens`,
   while the blocks of every running sequence at its full length and its own fit the pool: TensorRT-LLM's
   GUARANTEED_NO_EVICT, which never preempts). Each first looks up its prefix-cache hit, then asks for
   min(uncached tokens, budget) tokens (chunked prefill) and stops the loop at the first that cannot get its
   blocks. With chunked prefill off, a prompt larger than the remaining budget waits (the loop stops).
   A request with KV computed elsewhere (`num_external_tokens`, disaggregated serving) counts those tokens as
   computed (and allocates their blocks) at its first admission, as vLLM's KV connector does.

Planning (`schedule`) allocates blocks and preempts, as vLLM does; applying a finished step (`postprocess`,
in `base.py`) advances computed tokens, samples tokens and frees finished requests.
"""

from __future__ import annotations

from flopwise.sim.base import BaseScheduler, SchedulerOutput
from flopwise.sim.block_manager import NO_HIT
from flopwise.sim.request import Request, RequestStatus

__all__ = ["VllmScheduler"]


class VllmScheduler(BaseScheduler):
    def schedule(self, now: float, more_coming: bool = True) -> SchedulerOutput:
        out = self.new_output()
        budget = self._schedule_running(out, self.max_num_batched_tokens)
        if not out.num_preempted:
            self._schedule_waiting(out, budget, now)
        return out

    def _schedule_running(self, out: SchedulerOutput, budget: int) -> int:
        """Grant each running request its tokens in admission order; returns the budget left.

        This loop is the simulator's hottest (every running request, every step), so decodes cost only a
        count and a context sum: the rows it schedules are always the first m of `running` (it stops at the
        first request it cannot serve, and preemption pops from the end), so `out` gets them as one slice,
        with one token each except the listed chunks."""
        running, kv = self.running, self.kv
        d = self.decode_tokens
        chunks: list[tuple[int, int]] = []  # (position, tokens) of the rows that are not decodes
        num_decodes = context_sum = 0
        for req in running:  # preemption pops from the end, which the iterator then never reaches
            if budget <= 0:
                break
            c = req.num_computed_tokens
            n = req.num_tokens - c
            if n == 1 and req.num_output_tokens:  # a decode (Request.is_decoding); past its prompt and prefix
                if d > budget or (c + d > req.num_slots and not kv.extend_decode(req, d)
                                  and not self._make_room(out, req, d)):
                    break
                num_decodes += 1
                context_sum += c
                budget -= d
            else:
                if n > budget:
                    n = budget
                # a prefix block that fills must be cached even when the held blocks have room
                if (c + n > req.num_slots or c < req.num_prefix_tokens) and not self._make_room(out, req, n):
                    break
                chunks.append((num_decodes + len(chunks), n))
                budget -= n
        out.add_prefix_of(running, num_decodes, context_sum, chunks)
        return budget

    def _make_room(self, out: SchedulerOutput, req: Request, n: int) -> bool:
        """Allocate `req`'s blocks for `n` more tokens, preempting the newest running requests until they fit;
        False if `req` itself had to be preempted."""
        kv, running = self.kv, self.running
        while not kv.can_allocate(req, n):
            victim = running.pop()
            self._preempt(victim)
            out.num_preempted += 1
            if victim is req:
                return False
        kv.allocate(req, n)
        return True

    def _schedule_waiting(self, out: SchedulerOutput, budget: int, now: float) -> None:
        kv, waiting, running = self.kv, self.waiting, self.running
        while waiting and budget > 0 and len(running) < self.max_num_seqs:
            req = waiting[0]
            hit = kv.get_computed_blocks(req)
            computed = hit.num_tokens
            if req.num_external_tokens:  # KV that came with the request (disaggregated prefill)
                computed = max(computed, min(req.num_external_tokens, req.num_tokens - 1))
            n = req.num_tokens - computed
            if n > budget:
                if not self.enable_chunked_prefill:
                    return
                n = budget
            held = n + computed - hit.num_tokens  # the external tokens need blocks too
            if not kv.can_allocate(req, held, hit) or not self.reservation_fits(req):
                return
            waiting.popleft()
            kv.allocate(req, held, hit)
            req.num_computed_tokens = computed
            req.num_external_tokens = 0  # a preempted request recomputes here
            self._start(req, now)
            out.add(req, n)
            budget -= n

    def _preempt(self, req: Request) -> None:
        req.status = RequestStatus.PREEMPTED
        req.num_preemptions += 1
        self.kv.free(req, reusable=True)
        if req.num_reserved_blocks:
            self._release(req)
        req.num_computed_tokens = 0
        if self.by_priority:  # back among the waiting by its key (vLLM's priority queue)
            self.add_request(req)
        else:
            self.waiting.appendleft(req)

    def admission_open(self) -> bool:
        """Could the next step admit a request, were one waiting at its head? Assumes every running request
        is decoding (`decode_tokens` each)."""
        running = self.running
        budget = self.max_num_batched_tokens - len(running) * self.decode_tokens
        if len(running) >= self.max_num_seqs or budget <= 0:
            return False
        if not self.waiting:
            return True
        head = self.waiting[0]
        hit = self.kv.get_computed_blocks(head) if head.num_computed_tokens == 0 else NO_HIT
        computed = hit.num_tokens
        if head.num_external_tokens:
            computed = max(computed, min(head.num_external_tokens, head.num_tokens - 1))
        n = head.num_tokens - computed
        if n > budget:
            if not self.enable_chunked_prefill:
                return False
            n = budget
        return self.kv.can_allocate(head, n + computed - hit.num_tokens, hit) and self.reservation_fits(head)
