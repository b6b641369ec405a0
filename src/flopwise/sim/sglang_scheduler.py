"""An SGLang-like scheduler (`python/sglang/srt/managers/scheduler.py`, `schedule_policy.py`,
`schedule_batch.py`), reduced to what decides timing. Where SGLang's default differs from vLLM v1:

1. Prefill first, in its own forward pass (`Scheduler.get_next_batch_to_run`). Each step first tries to
   build a prefill batch from the waiting queue (the request in the middle of a chunked prefill first, then
   the queue in policy order); only if none can be built do the running requests decode, one token each.
   A prefill step pauses every decode (vLLM mixes decodes first, then prefill chunks, in one step), so a
   new request's first token comes sooner under load and running requests see a long inter-token gap.
   With `--enable-mixed-chunk` (off by default) the decodes join the prefill step instead, and each takes
   one token of its budgets.
2. Prefill budgets (`PrefillAdder`): a batch takes at most `--chunked-prefill-size` new tokens (one
   request may be cut to fill it, and it continues first in the next steps) and `--max-prefill-tokens`;
   with chunked prefill off, a prompt larger than what is left waits unless it comes first.
3. Admission reserves KV for future output (`PrefillAdder.rem_total_tokens`): a request is admitted only if
   its uncached prompt + min(max_tokens, 4096) is below the free (and evictable) KV tokens minus what is
   already reserved: the prompts and full outputs of those admitted in this step, and, for every running
   request, min(remaining output, 4096) x `new_token_ratio`. The ratio starts at 0.7 x
   `--schedule-conservativeness`, falls by (0.7 - 0.098) / 600 per decode step to 0.098 and returns to 0.7
   when the server idles. A refusal (or `--max-running-requests`) marks the batch full: no admission is
   tried again until a running request finishes or is retracted (`running_batch.batch_is_full`).
4. Retraction instead of preemption (`ScheduleBatch.retract_decode`): when a decode step's KV does not fit,
   running requests are retracted, fewest output tokens first (ties: the longest prompt), at least one and
   until 20 free tokens remain per request left (and the step fits); they go to the back of the queue and
   recompute prompt + output later (their prompt stays in the prefix cache until evicted; their output
   KV is freed). Each counts as a preemption. The ratio becomes (tokens decoded + 20 per request) /
   (max_tokens summed), over the requests left, capped at 1.
5. Queue order (`SchedulePolicy.calc_priority`): `fcfs`, SGLang's current default (older releases used
   `lpm`), keeps arrival order, retracted requests at the back; `lpm` sorts, stably, by the longest cached
   prefix while at most 128 requests wait (FCFS above). Under `lpm` a request whose cached prefix is at most
   32 tokens but which shares at least 32 tokens with a request earlier in the queue goes to the back
   (in-batch prefix caching: requests in one prefill batch do not share KV, so the first computes the
   prefix and the rest hit it later).

Simplified: KV is counted in this simulator's blocks (SGLang's default page is one token), so hits are whole
blocks, chunks are not page-aligned, and the reservation is checked in tokens but allocated in blocks (a
request the reservation admits but whose blocks do not fit marks the batch full too); a hit is the block
manager's prefix-cache lookup standing in for the radix tree (shared prefixes are named by `prefix_id`; the
blocks a group gains in a prefill batch are hidden from the rest of that batch, with the group's boundary
taken from the first request that extends it); `batch_is_full` is cleared at the step where a request
finishes, not one step later; a chunk that cannot get its blocks waits a step while the others decode; the
overlap scheduler, CUDA-graph padding, priority scheduling and preemption, and hierarchical cache are not
modelled; sliding-window models run without prefix caching, as `make_scheduler` does for vLLM.

6. Clients that send `ignore_eos` (sglang.bench_serving does by default) to a server whose radix cache is off
   take another admission path (`PrefillAdder.add_one_req_ignore_eos`): no new-token ratio, but a check that KV
   never runs out if every request runs to its max_tokens. The running requests, those admitted in this step
   and the candidate are sorted by the output tokens each has left, L_1 <= L_2 <= ... <= L_n; with C the free KV
   less this step's prompts and the candidate's, and O_j the tokens request j holds now (prompt + output), the
   candidate is refused (and the batch marked full) if for some i
       C + sum_{j<i} O_j - L_i * (n - i + 1) <= n - i + 1
   (when request i finishes, the n - i + 1 still running have each grown by L_i; one token of slack each,
   IGNORE_EOS_RESERVE_TOKENS), or if its prompt exceeds the free KV. Every output is reserved in full (the
   ratio reserves 0.7 of it at first, 0.098 after 600 decode steps), but its end-of-life peaks are lower than a
   sum of full lengths: which path admits more depends on the mix. As in current SGLang; releases of late 2024
   compared with the next request's L_{i+1}, slightly more conservative (not modelled).

7. `--scheduler-recv-interval N` (default 1; `managers/scheduler_recv_skipper.py`): the event loop reads the
   tokenizer's socket only when a counter reaches N; it adds 1 per decode (or verify, or idle) pass and 1000 per
   other pass, and is reset at each read. Under steady decoding a request reaches the scheduler at the next
   multiple of N decode steps (N/2 steps later on average), at once while idle or, for N <= 1000, after a prefill
   step (`RECV_PREFILL_WEIGHT`).

Runs of decode steps are fast-forwarded by the engine (`decode_run.py`); the ratio's decay over such a run
is caught up at the next call into the scheduler from how far a reference request advanced.
"""

from __future__ import annotations

from bisect import insort
from collections import deque
from dataclasses import dataclass
from typing import TypedDict

from flopwise.cost.layout import layout
from flopwise.cost.memory import blocks_counter, memory_plan
from flopwise.errors import InfeasibleError
from flopwise.sim.base import BaseScheduler, SchedulerOutput
from flopwise.sim.block_manager import BlockManager, CacheHit
from flopwise.sim.config import SimConfig
from flopwise.sim.request import Request, RequestStatus
from flopwise.sim.sglang_knobs import (
    CLIP_MAX_NEW_TOKENS,
    IGNORE_EOS_RESERVE_TOKENS,
    IN_BATCH_PREFIX_TOKENS,
    INIT_NEW_TOKEN_RATIO,
    LPM_MAX_QUEUE,
    MIN_NEW_TOKEN_RATIO_FACTOR,
    NEW_TOKEN_RATIO_DECAY_STEPS,
    RETRACT_DECODE_STEPS,
    sglang_chunked_prefill_size,
    sglang_max_running_requests,
)
from flopwise.specs.deployment import Deployment
from flopwise.specs.engine import get_engine

__all__ = ["SglangScheduler", "SglangSettings", "make_sglang_scheduler", "sglang_settings"]


@dataclass(slots=True, kw_only=True)
class _PrefillBudget:
    """One prefill batch's budgets, in tokens (`PrefillAdder`): `total` is free KV minus reservations,
    `current` free KV minus this batch's prompts, `input` and `chunk` the two compute budgets (`chunk` None:
    chunked prefill off)."""

    total: float
    current: int
    input: int
    chunk: int | None

    def charge(self, num_new: int, reserve: int) -> None:
        self.total -= num_new + reserve
        self.current -= num_new
        self.input -= num_new
        if self.chunk is not None:
            self.chunk -= num_new

    @property
    def is_out_of_kv(self) -> bool:
        return self.total <= 0 or self.current <= 0

    @property
    def is_spent(self) -> bool:
        return self.input <= 0 or (self.chunk is not None and self.chunk <= 0)


class SglangScheduler(BaseScheduler):
    """`running` holds the decoding requests and the one being chunk-prefilled (`chunked`), in admission
    order; `waiting` is kept in the policy's order between steps."""

    def __init__(self, kv: BlockManager, *, max_running_requests: int, chunked_prefill_size: int | None,
                 max_prefill_tokens: int, schedule_policy: str = "fcfs", schedule_conservativeness: float = 1.0,
                 enable_mixed_chunk: bool = False, ignore_eos: bool = False, scheduler_recv_interval: int = 1):
        super().__init__(kv, max_num_seqs=max_running_requests,
                         max_num_batched_tokens=chunked_prefill_size or max_prefill_tokens,
                         enable_chunked_prefill=chunked_prefill_size is not None)
        self.chunked_prefill_size = chunked_prefill_size
        self.max_prefill_tokens = max_prefill_tokens
        self.schedule_policy = schedule_policy
        self.enable_mixed_chunk = enable_mixed_chunk and chunked_prefill_size is not None
        self.init_new_token_ratio = min(INIT_NEW_TOKEN_RATIO * schedule_conservativeness, 1.0)
        self.min_new_token_ratio = min(self.init_new_token_ratio * MIN_NEW_TOKEN_RATIO_FACTOR, 1.0)
        self.new_token_ratio_decay = ((self.init_new_token_ratio - self.min_new_token_ratio)
                                      / NEW_TOKEN_RATIO_DECAY_STEPS)
        self.new_token_ratio = self.init_new_token_ratio
        # the clients' ignore_eos with the radix cache off: the no-eviction admission check (module docstring, 6)
        self.no_eviction_admission = ignore_eos and not kv.enable_prefix_caching
        self.recv_interval = scheduler_recv_interval  # (module docstring, 7)
        self.chunked: Request | None = None
        self.batch_is_full = False
        self.num_retractions = 0
        self._anchor: tuple[Request, int] | None = None  # (request, its output count) when last seen

    def _forget(self, ids: set[int]) -> None:
        """An aborted request is no longer the one mid chunked prefill, nor the anchor of the decay."""
        if self.chunked is not None and id(self.chunked) in ids:
            self.chunked = None
        if self._anchor is not None and id(self._anchor[0]) in ids:
            self._anchor = None

    # ---- one step ------------------------------------------------------------------------------------
    def schedule(self, now: float, more_coming: bool = True) -> SchedulerOutput:
        self._catch_up()
        out = SchedulerOutput()
        if not self._schedule_prefill(out, now):
            self._schedule_decode(out)
        return out

    def postprocess(self, out: SchedulerOutput, step: int, end_at: float) -> list[Request]:
        finished = BaseScheduler.postprocess(self, out, step, end_at)
        self._anchor_to_running()
        return finished

    def finish(self, finished: list[Request], end_at: float) -> None:
        self._catch_up()  # a decode run that ends here decayed the ratio first
        BaseScheduler.finish(self, finished, end_at)
        self.batch_is_full = False
        if not self.running and not self.waiting:
            self.new_token_ratio = self.init_new_token_ratio  # the server idles

    def admission_open(self) -> bool:
        """Would the next step try to admit a waiting request? (It then may still find no KV for it.)"""
        self._catch_up()
        self._anchor_to_running()
        return (self.chunked is None and not self.batch_is_full
                and len(self.running) < self.max_num_seqs)

    # ---- prefill (`get_new_batch_prefill`) ------------------------------------------------------------
    def _schedule_prefill(self, out: SchedulerOutput, now: float) -> bool:
        """Build a prefill batch into `out`; False if there is none to run."""
        chunked = self.chunked
        if chunked is None and (self.batch_is_full or not self.waiting):
            return False
        num_running = len(self.running) - (chunked is not None)
        if chunked is None and num_running >= self.max_num_seqs:
            self.batch_is_full = True
            return False
        decodes = [r for r in self.running if r is not chunked] if self.enable_mixed_chunk else []
        budget = self._budget(len(decodes))
        fresh: dict[int, int] = {}  # prefix group -> its blocks cached before this step, once one of its
        #                             requests caches more in this step (the rest may not hit those)
        if chunked is not None:
            self._add_chunk(out, chunked, budget, fresh)
        if chunked is None or self.chunked is None:  # no chunk left unfinished: the queue may follow
            self._order_waiting()
            self._add_waiting(out, budget, fresh, num_running + len(out.reqs), now)
        if out.is_empty:
            return False
        if decodes:
            self._mix_decodes(out, decodes)
        return True

    def _budget(self, num_mixed: int) -> _PrefillBudget:
        """Free KV (free + evictable blocks, in tokens) less the running requests' expected output."""
        clip = CLIP_MAX_NEW_TOKENS
        reserved: float = 0  # tokens (an int) until scaled by the ratio below
        for r in self.running:  # once per prefill step, over the whole batch: kept to plain arithmetic
            left = r.max_tokens - r.num_output_tokens
            reserved += left if left < clip else clip
        if self.chunked is not None:
            reserved -= min(self.chunked.max_tokens - self.chunked.num_output_tokens, clip)
        reserved *= self.new_token_ratio
        free = self.kv.num_free_blocks * self.kv.block_size
        chunk = None if self.chunked_prefill_size is None else self.chunked_prefill_size - num_mixed
        return _PrefillBudget(total=free - num_mixed - reserved, current=free - num_mixed,
                              input=self.max_prefill_tokens - num_mixed, chunk=chunk)

    def _add_chunk(self, out: SchedulerOutput, req: Request, budget: _PrefillBudget,
                   fresh: dict[int, int]) -> None:
        """The next chunk of the request being chunk-prefilled (`PrefillAdder.add_chunked_req`)."""
        left = req.num_tokens - req.num_computed_tokens
        chunk = budget.chunk
        assert chunk is not None  # only chunked prefill leaves a request being chunk-prefilled
        n = max(1, min(left, chunk))
        if not self.kv.can_allocate(req, n):
            return  # no room this step; the decodes run (and may retract) instead
        self._note_fresh(req, req.num_computed_tokens, n, fresh)
        self.kv.allocate(req, n)
        out.add(req, n)
        done = n == left
        budget.charge(n, min(req.max_tokens - req.num_output_tokens, CLIP_MAX_NEW_TOKENS) if done else 0)
        if done:
            self.chunked = None

    def _add_waiting(self, out: SchedulerOutput, budget: _PrefillBudget, fresh: dict[int, int],
                     num_taken: int, now: float) -> None:
        """Admit waiting requests in queue order while the budgets last (`PrefillAdder.add_one_req`);
        `num_taken`: running requests plus the finishing chunk, against `--max-running-requests`."""
        kv, waiting = self.kv, self.waiting
        admitted: list[Request] = []
        states: list[tuple[int, int]] | None = None  # the no-eviction check's (tokens left, tokens held), sorted
        for req in waiting:
            if budget.is_spent:
                break
            if num_taken + len(admitted) >= self.max_num_seqs:
                self.batch_is_full = True
                break
            hit = self._hit(req, fresh)
            extend = req.num_tokens - hit.num_tokens
            reserve = min(req.max_tokens - req.num_output_tokens, CLIP_MAX_NEW_TOKENS)
            if self.no_eviction_admission:
                if states is None:
                    states = sorted(_state(r) for r in self.running if r.max_tokens > r.num_output_tokens)
                if extend > min(budget.current, budget.total) or not _fits_to_the_end(
                        states, _state(req), budget.current - extend):
                    self.batch_is_full = True  # NO_TOKEN
                    break
            elif extend + reserve >= budget.total:
                self.batch_is_full = True  # NO_TOKEN
                break
            if budget.chunk is None:
                if admitted and extend >= budget.input and not self.no_eviction_admission:
                    break
                n = extend
            elif extend <= budget.chunk:
                n = extend
            else:
                n, reserve = budget.chunk, 0
            if not kv.can_allocate(req, n, hit):
                self.batch_is_full = True  # the reservation passed but the blocks do not fit
                break
            self._note_fresh(req, hit.num_tokens, n, fresh)
            kv.allocate(req, n, hit)
            req.num_computed_tokens = hit.num_tokens
            self._start(req, now)
            out.add(req, n)
            admitted.append(req)
            budget.charge(n, reserve)
            if n < extend:
                self.chunked = req
                break
            if budget.is_out_of_kv:
                self.batch_is_full = True
                break
        for _ in admitted:  # the loop admits a prefix of the queue, so they leave from its front
            waiting.popleft()

    def _hit(self, req: Request, fresh: dict[int, int]) -> CacheHit:
        """The prefix-cache hit SGLang's radix tree would give: blocks cached in this same step by another
        request of the group are not visible yet."""
        hit = self.kv.get_computed_blocks(req)
        limit = fresh.get(req.prefix_id) if req.prefix_id is not None else None
        if limit is None or len(hit.prefix_keys) <= limit:
            return hit
        bs = self.kv.block_size
        return CacheHit(num_tokens=limit * bs, prefix_keys=hit.prefix_keys[:limit], num_own=0, own_key=None,
                        num_evictable=min(hit.num_evictable, limit))

    def _note_fresh(self, req: Request, before: int, n: int, fresh: dict[int, int]) -> None:
        """Record the group's cached-block boundary if computing tokens before..before+n caches new blocks."""
        if req.prefix_id is None or not self.kv.enable_prefix_caching:
            return
        bs = self.kv.block_size
        if min((before + n) // bs, req.num_prefix_tokens // bs) > before // bs:
            b = before // bs
            fresh[req.prefix_id] = min(b, fresh.get(req.prefix_id, b))

    def _mix_decodes(self, out: SchedulerOutput, decodes: list[Request]) -> None:
        """Mixed chunked prefill: every running request decodes in the prefill step, if their KV fits."""
        kv = self.kv
        if self._decode_blocks(decodes) > kv.num_free_blocks:
            return
        for r in decodes:
            if r.num_computed_tokens >= r.num_slots:
                kv.allocate(r, 1)
            out.add(r, 1)

    # ---- queue order (`SchedulePolicy.calc_priority`) --------------------------------------------------
    def _order_waiting(self) -> None:
        waiting = self.waiting
        if self.schedule_policy != "lpm" or len(waiting) > LPM_MAX_QUEUE or len(waiting) < 2:
            return
        kv = self.kv
        seen: dict[int, int] = {}  # prefix group -> longest shared prefix among the requests kept in place
        keys = {}
        for r in waiting:
            m = kv.get_computed_blocks(r).num_tokens
            key = -m
            if m <= IN_BATCH_PREFIX_TOKENS and r.prefix_id is not None:
                shared = min(r.num_prefix_tokens, seen.get(r.prefix_id, 0))
                if shared >= IN_BATCH_PREFIX_TOKENS:
                    key = 1 << 62  # deprioritized: another request in the queue computes the prefix first
                else:
                    seen[r.prefix_id] = max(seen.get(r.prefix_id, 0), r.num_prefix_tokens)
            keys[r] = key
        self.waiting = deque(sorted(waiting, key=keys.__getitem__))

    # ---- decode (`update_running_batch`) ---------------------------------------------------------------
    def _schedule_decode(self, out: SchedulerOutput) -> None:
        """Every running request but a stalled chunked prefill decodes one token; retract if the KV does not
        fit, else decay the ratio."""
        decoding = self._decoding()
        if not decoding:
            return
        kv = self.kv
        if self._decode_blocks(decoding) > kv.num_free_blocks:
            out.num_preempted += self._retract(decoding)
            decoding = self._decoding()
        else:
            self.new_token_ratio = max(self.new_token_ratio - self.new_token_ratio_decay, self.min_new_token_ratio)
        context_sum = 0
        for r in decoding:
            c = r.num_computed_tokens
            if c >= r.num_slots:
                kv.allocate(r, 1)
            context_sum += c
        out.add_prefix_of(decoding, len(decoding), context_sum, [])

    def _decode_blocks(self, decoding: list[Request]) -> int:
        """Free blocks one decode step of `decoding` takes (only a request whose blocks are full needs one)."""
        kv = self.kv
        return sum(kv.blocks_needed(r, 1) for r in decoding if r.num_computed_tokens >= r.num_slots)

    def _decoding(self) -> list[Request]:
        chunked = self.chunked
        return self.running if chunked is None else [r for r in self.running if r is not chunked]

    def _retract(self, decoding: list[Request]) -> int:
        """Retract decoding requests until the step fits with 20 tokens of headroom per request left (at
        least one, never the last; the stalled chunked prefill only if the last still does not fit);
        returns how many."""
        kv, bs = self.kv, self.kv.block_size
        order = sorted(decoding, key=lambda r: (r.num_output_tokens, -r.num_prompt_tokens), reverse=True)
        retracted: list[Request] = []
        while len(order) > 1 and (not retracted
                                  or kv.num_free_blocks * bs < len(order) * RETRACT_DECODE_STEPS
                                  or self._decode_blocks(order) > kv.num_free_blocks):
            victim = order.pop()
            self._retract_one(victim)
            retracted.append(victim)
        if self.chunked is not None and self._decode_blocks(order) > kv.num_free_blocks:
            self._retract_one(self.chunked)
            retracted.append(self.chunked)
            self.chunked = None
        if self._decode_blocks(order) > kv.num_free_blocks:
            raise InfeasibleError("a single request's KV no longer fits the pool; raise "
                                  "--gpu-memory-utilization or shorten the requests")
        gone = set(retracted)
        self.running = [r for r in self.running if r not in gone]
        self.waiting.extend(retracted)
        decoded = sum(r.num_output_tokens for r in order)
        budget = sum(r.max_tokens for r in order)
        self.new_token_ratio = min(1.0, (decoded + RETRACT_DECODE_STEPS * len(order)) / budget)
        self.batch_is_full = False
        self.num_retractions += len(retracted)
        return len(retracted)

    def _retract_one(self, req: Request) -> None:
        req.status = RequestStatus.PREEMPTED
        req.num_preemptions += 1
        # SGLang keeps the prompt in the radix tree (unlocked, evictable) and frees the decoded tokens: free
        # as computed up to the prompt, so only the prompt's blocks stay hittable.
        req.num_computed_tokens = min(req.num_computed_tokens, req.num_prompt_tokens)
        self.kv.free(req, reusable=True)
        req.num_computed_tokens = 0

    # ---- decode runs fast-forwarded by the engine ------------------------------------------------------
    def _anchor_to_running(self) -> None:
        running = self.running
        self._anchor = (running[0], running[0].num_output_tokens) if running else None

    def _catch_up(self) -> None:
        """Apply the ratio's decay for decode steps the engine ran without calling `schedule`."""
        if self._anchor is None:
            return
        req, count = self._anchor
        k = req.num_output_tokens - count
        if k > 0:
            self.new_token_ratio = max(self.new_token_ratio - k * self.new_token_ratio_decay, self.min_new_token_ratio)
        self._anchor = None


def _state(req: Request) -> tuple[int, int]:
    """(output tokens left, tokens held now) of a request the no-eviction check counts."""
    return req.max_tokens - req.num_output_tokens, req.num_prompt_tokens + req.num_output_tokens


def _fits_to_the_end(states: list[tuple[int, int]], candidate: tuple[int, int], free: int) -> bool:
    """SGLang's ignore_eos check (module docstring, 6): whether `free` KV tokens last until the requests of
    `states` (sorted by tokens left) and the candidate have all run to their ends, one token of slack each. The
    candidate joins `states` when it fits (it is admitted)."""
    trial = list(states)
    if candidate[0] > 0:
        insort(trial, candidate)
    freed = 0
    n = len(trial)
    for i, (left, held) in enumerate(trial):
        bs = n - i
        if free + freed - left * bs <= IGNORE_EOS_RESERVE_TOKENS * bs:
            return False
        freed += held
    states[:] = trial
    return True


class SglangSettings(TypedDict):
    """`SglangScheduler`'s keyword arguments, as `sglang_settings` resolves them."""

    max_running_requests: int
    chunked_prefill_size: int | None
    max_prefill_tokens: int
    schedule_policy: str
    schedule_conservativeness: float
    enable_mixed_chunk: bool
    ignore_eos: bool
    scheduler_recv_interval: int


def sglang_settings(dep: Deployment, config: SimConfig) -> SglangSettings:
    """The knobs `make_sglang_scheduler` uses: `config.sglang` with SGLang's defaults for the deployment filled
    in (`chunked_prefill_size` None: chunked prefill off)."""
    config = config.resolved(dep)
    knobs = config.sglang
    chunk: int | None = None
    if config.enable_chunked_prefill:
        own = dep.engine.family == "sglang"
        flag = knobs.chunked_prefill_size or (dep.max_num_batched_tokens if own
                                              else sglang_chunked_prefill_size(dep.hardware))
        # every attention rank's chunk, summed, as SGLang splits its flag; a pipelined replica's round, one chunk per
        # micro-batch (`Deployment.pipeline_batches`)
        chunk = (dep.engine if own else get_engine("sglang")).rank_tokens(flag, dep.dp) * dep.dp * dep.pipeline_batches
    max_running = knobs.max_running_requests or sglang_max_running_requests(
        memory_plan(dep).kv_capacity_tokens, dep.context_len)
    return {"max_running_requests": max_running, "chunked_prefill_size": chunk,
            "max_prefill_tokens": knobs.max_prefill_tokens, "schedule_policy": knobs.schedule_policy,
            # SGLang scales the flag's conservativeness under DP attention (x 0.3: admits more eagerly)
            "schedule_conservativeness": knobs.schedule_conservativeness
            * (dep.engine.dp_attention_conservativeness if dep.dp > 1 else 1.0),
            "enable_mixed_chunk": knobs.enable_mixed_chunk, "ignore_eos": config.ignore_eos,
            "scheduler_recv_interval": knobs.scheduler_recv_interval}


def make_sglang_scheduler(dep: Deployment, config: SimConfig) -> SglangScheduler:
    """An SGLang scheduler over the deployment's block pool, with SGLang's defaults for unset knobs."""
    windowed = not layout(dep).cache.uniform  # windows, chunks or per-sequence state: blocks by formula
    blocks_for = blocks_counter(dep) if windowed else None
    kv = BlockManager(num_blocks=memory_plan(dep).num_blocks, block_size=dep.block_size,
                      enable_prefix_caching=config.prefix_caching(dep) and not windowed, blocks_for=blocks_for)
    return SglangScheduler(kv, **sglang_settings(dep, config))
