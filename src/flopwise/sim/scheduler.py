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

Lazy decodes (`lazy_decodes`, set by the replica where a step's cost reads decodes only as a count and a
context sum: full attention, no speculation, FCFS). A busy step is mostly decode rows that each take one token
and give one, so touching every running request twice per step makes the simulator O(batch) per step. Instead
a decoding request's counters and token_steps are left as they were at step `decode_since` and advance by one
per step implicitly; what changes per request is kept apart: a heap of the steps at which they finish, and a
count per residue mod block_size of the steps at which their next token needs a new block (one every block_size
steps). A step then costs O(prompt rows + requests that finish), and a decode run's blocks a sum over the
residues, with the same outcome as the loop above, provided that:
- every running request gets all it asks for (its tokens fit the budget; only the newest may be cut to what is
  left), so no decode is skipped, and
- the blocks the step needs fit the free pool (no preemption), and, where a prompt row still fills shared-prefix
  blocks, the never-used blocks (no eviction, whose order against the prefix's caching would matter).
Otherwise the lagging counters are brought up to date and the step is planned by the loop above. Requests
finishing in one step are freed in running order (`run_seq`), as the loop frees them.
"""

from __future__ import annotations

from heapq import heapify, heappop, heappush

from flopwise.sim.adp_balance import AdpBalance
from flopwise.sim.base import BaseScheduler, SchedulerOutput
from flopwise.sim.block_manager import NO_HIT, BlockManager, most_steps_within
from flopwise.sim.request import Request, RequestStatus

__all__ = ["VllmScheduler"]


_Due = tuple[int, int, int, Request]  # (step, run_seq, decode_since when pushed, request): a lazy decode's event


class VllmScheduler(BaseScheduler):
    def __init__(self, kv: BlockManager, *, max_num_seqs: int, max_num_batched_tokens: int,
                 enable_chunked_prefill: bool = True):
        super().__init__(kv, max_num_seqs=max_num_seqs, max_num_batched_tokens=max_num_batched_tokens,
                         enable_chunked_prefill=enable_chunked_prefill)
        self.lazy_decodes = False  # count steady decodes lazily (see the module docstring)
        self._lazy = False  # the lazy state below describes `running`
        # running requests that are not counted lazily (prompt rows, and any decode with a block's room or more
        # left), in running order
        self._active: list[Request] = []
        self._num_lazy = 0
        self._lazy_context = 0  # sum over lazy requests of (computed tokens - decode_since): + num_lazy * step
        self._finishes: list[_Due] = []  # (step of its last token, run_seq, decode_since, request)
        # lazy decodes by the residue mod block_size of the steps at which their next token needs a new block
        self._needs = [0] * kv.block_size
        # TensorRT-LLM's attention-DP balance (`adp_balance.py`): waiting contexts held back some iterations; while
        # one waits, every step is planned here (`admission_open` stays true), so each iteration is asked
        self.adp: AdpBalance | None = None

    def schedule(self, now: float, more_coming: bool = True) -> SchedulerOutput:
        out = self.new_output()
        budget = self._schedule_lazily(out) if self.lazy_decodes else None
        if budget is None:
            self.bring_up_to_date()
            budget = self._schedule_running(out, self.max_num_batched_tokens)
        adp = self.adp
        if not out.num_preempted and not (adp is not None and self.waiting and adp.hold(
                self.next_step, len(self.waiting), len(self.running), self.max_num_seqs)):
            self._schedule_waiting(out, budget, now)
        return out

    # ---- lazy decodes --------------------------------------------------------------------------------
    # A lazy request r counted from step since = r.decode_since keeps its counters (c computed tokens, its
    # slots) as they were then; at step s it has computed c + (s - since) tokens, and its token at step t needs
    # a new block when t = e, e + bs, e + 2 bs, ... for e = since + slots - c (its room then, < bs, so e is
    # its first such step). So a step's new blocks are the lazy count of its residue, and a run's a sum over
    # residues.
    def _go_lazy(self) -> None:
        """Count every decoding running request lazily from the next step; the others are active."""
        if self._lazy:
            return
        self._lazy = True
        self._active = []
        s = self.next_step
        for r in self.running:
            self._add_lazy(r, s)
        heapify(self._finishes)

    def _add_lazy(self, r: Request, s: int, push: bool = False) -> None:
        """Count `r` lazily from step s if it is decoding with less than a block's room, else make it active."""
        c = r.num_computed_tokens
        room = r.num_slots - c
        bs = self.kv.block_size
        if c != r.num_tokens - 1 or not r.num_output_tokens or room >= bs:
            self._active.append(r)
            return
        r.decode_since = s
        self._num_lazy += 1
        self._lazy_context += c - s
        self._needs[(s + room) % bs] += 1
        due = (s + r.max_tokens - r.num_output_tokens - 1, r.run_seq, s, r)
        if push:
            heappush(self._finishes, due)
        else:
            self._finishes.append(due)

    def _catch_up(self, r: Request, s: int) -> None:
        """Apply a lazy request's decode steps decode_since .. s-1 (one token each, and the blocks they took) and
        stop counting it lazily."""
        since = r.decode_since
        bs = self.kv.block_size
        first = since + r.num_slots - r.num_computed_tokens  # the first step that took a block
        self._needs[first % bs] -= 1
        self._num_lazy -= 1
        self._lazy_context -= r.num_computed_tokens - since
        if s > first:
            taken = (s - first - 1) // bs + 1
            r.num_own_blocks += taken
            r.num_slots += taken * bs
        k = s - since
        if k > 0:  # k decode steps: k tokens sampled, k more computed
            r.sample(since, k)
            r.num_computed_tokens += k
        r.decode_since = -1

    def bring_up_to_date(self) -> None:
        if not self._lazy:
            return
        s = self.next_step
        for r in self.running:
            if r.decode_since >= 0:
                self._catch_up(r, s)
        self._active, self._finishes = [], []
        self._lazy = False

    def _blocks_due(self, start: int, steps: int) -> int:
        """New blocks the lazy decodes take at steps start .. start+steps-1."""
        bs, needs = self.kv.block_size, self._needs
        whole, part = divmod(steps, bs)
        total = whole * self._num_lazy
        if part:  # the residues first .. first+part-1, wrapping around
            first = start % bs
            end = first + part
            total += sum(needs[first:end]) if end <= bs else sum(needs[first:]) + sum(needs[:end - bs])
        return total

    def _finish_lazy(self, before: int) -> list[Request]:
        """Bring the lazy decodes that sample their last token at a step < before up to date; returns them, in
        running order."""
        done = []
        heap = self._finishes
        while heap and heap[0][0] < before:
            step, _, since, r = heappop(heap)
            if r.decode_since == since:  # (else it left the lazy count since)
                self._catch_up(r, step + 1)
                done.append(r)
        return done

    def _schedule_lazily(self, out: SchedulerOutput) -> int | None:
        """`_schedule_running` with the lazy decodes counted, not visited; None, with nothing changed, where its
        conditions (module docstring) fail."""
        if not self._lazy:
            self._go_lazy()
        s, kv, active = self.next_step, self.kv, self._active
        budget = self.max_num_batched_tokens
        used = num_lazy = self._num_lazy
        grants = []
        if active:
            newest = active[-1] is self.running[-1]
            for a in active:
                n = a.num_tokens - a.num_computed_tokens
                if newest and a is active[-1]:
                    if used >= budget:
                        return None
                    n = min(n, budget - used)
                grants.append(n)
                used += n
        if used > budget:
            return None
        due = self._needs[s % kv.block_size]  # lazy decodes whose token needs a block now
        blocks = due
        prefix = False
        if active:
            for a, n in zip(active, grants, strict=True):
                blocks += kv.blocks_needed(a, n)
                prefix = prefix or a.num_computed_tokens < a.num_prefix_tokens
        unused = kv.num_unused
        if blocks > unused + kv.num_free_used or (prefix and kv.enable_prefix_caching and blocks > unused):
            return None
        if due:
            kv.take_decode_blocks(due)
        if active:
            for a, n in zip(active, grants, strict=True):
                c = a.num_computed_tokens
                if c + n > a.num_slots or c < a.num_prefix_tokens:
                    kv.allocate(a, n)
                out.add(a, n)
        out.num_lazy = num_lazy
        out.num_decodes += num_lazy
        out.decode_context_sum += self._lazy_context + num_lazy * s
        out.lazy = True
        return budget - used

    def postprocess(self, out: SchedulerOutput, step: int, end_at: float) -> list[Request]:
        """`BaseScheduler.postprocess`; for a lazily planned step, the listed rows only, then the lazy decodes
        that finish at `step`, and the listed rows now decoding join the lazy count."""
        if not out.lazy:
            return super().postprocess(out, step, end_at)
        finished = self._apply_rows(out, step)
        s1 = step + 1
        done = self._finish_lazy(s1)
        self.num_emitted += out.num_lazy
        self._active = []
        for r in out.reqs:
            if r.num_output_tokens != r.max_tokens:  # (else finished)
                self._add_lazy(r, s1, push=True)
        self.next_step = s1
        if done:
            finished = sorted(finished + done, key=_run_seq) if finished else done
        if finished:
            self.finish(finished, end_at)
        return finished

    def run_horizon(self) -> int:
        if not self.lazy_decodes:
            return super().run_horizon()
        if not self._lazy:
            self._go_lazy()
        if self._active:
            return 0
        f = self._finishes
        while f[0][3].decode_since != f[0][2]:  # every running request is lazy, so a live entry remains
            heappop(f)
        return f[0][0] - self.next_step + 1

    def decode_context_sum(self) -> int:
        if not self._lazy:
            return super().decode_context_sum()
        total = self._lazy_context + self._num_lazy * self.next_step
        return total + sum(a.num_computed_tokens for a in self._active) if self._active else total

    def decode_contexts(self) -> list[int]:
        self.bring_up_to_date()
        return super().decode_contexts()

    def decode_steps_that_fit(self, k: int) -> int:
        if not self._lazy:
            return super().decode_steps_that_fit(k)
        s, free = self.next_step, self.kv.num_unused + self.kv.num_free_used  # every running request is lazy
        if self._num_lazy * -(-k // self.kv.block_size) <= free:
            return k  # cheap bound: ceil(k / block_size) new blocks each at most
        return most_steps_within(lambda steps: self._blocks_due(s, steps), k, free)

    def apply_run(self, k: int, step0: int) -> list[Request]:
        if not self._lazy:
            return super().apply_run(k, step0)
        end = step0 + k
        bs = self.kv.block_size
        if k < bs:  # (`_blocks_due`, inlined for a run shorter than a block: the residues of its steps)
            first = step0 % bs
            stop = first + k
            needs = self._needs
            taken = sum(needs[first:stop]) if stop <= bs else sum(needs[first:]) + sum(needs[:stop - bs])
        else:
            taken = self._blocks_due(step0, k)
        if taken:
            self.kv.take_decode_blocks(taken)
        finished = self._finish_lazy(end)
        self.next_step = end
        return finished

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
        room = budget  # what the running requests left of the step budget, before this step admits any
        while waiting and budget > 0 and len(running) < self.max_num_seqs:
            req = waiting[0]
            hit = kv.get_computed_blocks(req)
            computed = hit.num_tokens
            if req.num_external_tokens:  # KV that came with the request (disaggregated prefill)
                computed = max(computed, min(req.num_external_tokens, req.num_tokens - 1))
            n = req.num_tokens - computed
            if n > budget:
                if not self.enable_chunked_prefill:
                    self._stall(req, n, room)
                    return
                n = budget
            held = n + computed - hit.num_tokens  # the external tokens need blocks too
            if not kv.can_allocate(req, held, hit) or (self.reserve_full and not self.reservation_fits(req)):
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
        head, kv = self.waiting[0], self.kv
        if (head.num_computed_tokens == 0 and not head.prefix_blocks and not head.num_own_blocks
                and kv.blocks_for is None and not self.reserve_full
                and (self.enable_chunked_prefill or head.num_tokens <= budget)
                and -(-head.num_tokens // kv.block_size) <= kv.num_unused + kv.num_free_used):
            # the blocks of its whole sequence are free: whatever its prefix-cache hit, the allocation below
            # needs at most that many (new blocks for the rest, plus hit blocks that sit in the free queue), so
            # the lookup can be skipped (most arrivals find the pool far from full)
            return True
        hit = self.kv.get_computed_blocks(head) if head.num_computed_tokens == 0 else NO_HIT
        computed = hit.num_tokens
        if head.num_external_tokens:
            computed = max(computed, min(head.num_external_tokens, head.num_tokens - 1))
        n = head.num_tokens - computed
        if n > budget:
            if not self.enable_chunked_prefill:
                self._stall(head, n, budget)
                return False
            n = budget
        return self.kv.can_allocate(head, n + computed - hit.num_tokens, hit) and self.reservation_fits(head)

    def _stall(self, req: Request, n: int, room: int) -> None:
        """`req`, at the head of the queue, cannot take its whole prompt (`n` tokens) into the step budget (chunked
        prefill off: TensorRT-LLM's MicroBatchScheduler stops there, as this loop does). Where even the `room` the
        running requests leave before any admission is too little, it and everything behind it wait for some of
        them to finish: counted once per request (`num_budget_stalls`); a prompt that waits only behind others
        admitted in the same step is not."""
        if self.running and not req.budget_stalled and n > room:
            req.budget_stalled = True
            self.num_budget_stalls += 1


def _run_seq(req: Request) -> int:
    return req.run_seq
