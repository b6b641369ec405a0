"""One replica as a steppable engine: admit a request, report its next event, handle that event.

A driver (`engine.run_engine` for one replica, `cluster/` for a fleet) owns the clock and the arrivals; the
replica owns its scheduler, KV pool, API server and timeline, and is driven only through this interface:

    admit(req, at)   a request reaches the replica at req.arrival_at, or at `at` when a fleet's router held it
                     (no earlier than any event handled so far)
    next_at          the instant of its next event (None: it waits for an arrival), with `next_rank`
    step(more)       handle that event; returns the requests that finished there
    has_work, num_outstanding, num_waiting, num_running, kv_usage, cached_tokens(req)   (queries, no side effects)

Events and their order. An instant can hold arrivals, step ends and scheduling decisions; a driver must
handle them by (time, rank): ARRIVAL (0, the driver's) < STEP_END (1) < SCHEDULE (2). This is the order the
single-replica loop always had: requests that arrive by the end of a step reach the API server before that
step's tokens are streamed, and join the scheduling of the next step, which is planned after the step's
results are applied (and after any closed-loop client, released by a completion, has sent its next request).

    SCHEDULE at t   hand the requests that reached the engine by t to the scheduler (an engine that schedules a
                    step ahead, `async_scheduling`, planned this step when the one that just ended began: only
                    the requests that had arrived by then; the rest join the plan after, unless the engine
                    would otherwise idle), then plan: a run of
                    identical decode steps (`decode_run.py`) or one general step, priced by `cost.step_time`;
                    its end is the next STEP_END (nothing to run: the next request leaving the API server, or
                    None)
    STEP_END at t   apply the step (or the whole run): tokens sampled, completions freed; behind an API server,
                    stream the step's tokens; then SCHEDULE at t

A decode run is planned whole but applied at its end, so a request admitted during the run cuts it at the first
step ending at or after its arrival when the scheduler could admit it (`admission_open` when planned), exactly
as a loop that knew the next arrival would have. Behind an API server each step's tokens pass the server's
FIFO queue in time order with the arrivals: they are streamed lazily, the steps that ended before an arrival
when it is admitted and the rest at the run's end, and the run ends at the first step by whose end a request
has left the server. Only where the server shares the engine's CPU (vLLM V0), whose queued work delays each
step, does a run advance one step per STEP_END. Queries read the state at the last step boundary (a run's KV
growth shows at its end), as a
router's scrape of an engine's metrics would.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Iterable
from itertools import accumulate

from flopwise.cost.batch import BatchShape
from flopwise.cost.layout import layout
from flopwise.cost.memory import blocks_counter, memory_plan
from flopwise.cost.speculative import proposer_deployment, round_time_s
from flopwise.cost.step import full_step_time, round_host_s, step_time
from flopwise.errors import WorkloadError
from flopwise.sim.acceptance import Acceptance
from flopwise.sim.adp_balance import AdpBalance
from flopwise.sim.base import BaseScheduler, SchedulerOutput
from flopwise.sim.block_manager import BlockManager
from flopwise.sim.config import SPECULATIVE_SCHEDULERS, SimConfig
from flopwise.sim.decode_run import plan_decode_run, run_durations
from flopwise.sim.frontend import Frontend, hidden_tokens
from flopwise.sim.request import Request
from flopwise.sim.scheduler import VllmScheduler
from flopwise.sim.sglang_knobs import RECV_PREFILL_WEIGHT
from flopwise.sim.sglang_scheduler import make_sglang_scheduler
from flopwise.sim.shape import DraftShapes, ShapeBuilder
from flopwise.sim.static_scheduler import StaticScheduler
from flopwise.sim.timeline import Timeline
from flopwise.specs.deployment import Deployment
from flopwise.workload.spec import RequestSpec

__all__ = ["Replica", "make_scheduler", "ARRIVAL", "STEP_END", "SCHEDULE"]

ARRIVAL, STEP_END, SCHEDULE = 0, 1, 2  # ranks of simultaneous events (see the module docstring)

_IDLE, _STEP, _RUN, _FE_RUN, _SHARED_RUN = 0, 1, 2, 3, 4  # what the pending STEP_END ends


def make_scheduler(dep: Deployment, config: SimConfig) -> BaseScheduler:
    """A scheduler over a block pool sized by the deployment's memory plan."""
    if config.scheduler == "sglang":  # SGLang-like policy: sglang_scheduler.py
        return make_sglang_scheduler(dep, config)
    windowed = not layout(dep).cache.uniform  # windows, chunks or per-sequence state: blocks by formula
    caching = config.prefix_caching(dep) and config.scheduler == "vllm" and not windowed
    blocks_for = blocks_counter(dep) if windowed else None
    kv = BlockManager(num_blocks=memory_plan(dep).num_blocks, block_size=dep.block_size, enable_prefix_caching=caching,
                      blocks_for=blocks_for)
    cls = VllmScheduler if config.scheduler == "vllm" else StaticScheduler
    sched = cls(kv, max_num_seqs=dep.running_limit, max_num_batched_tokens=dep.token_budget,
                enable_chunked_prefill=config.chunked_prefill(dep))
    sched.reserve_full = dep.engine.reserve_max_tokens and cls is VllmScheduler
    if config.adp_balance and isinstance(sched, VllmScheduler):
        timeout_iters, batching_wait_iters = dep.engine.adp_balance_iters
        sched.adp = AdpBalance(dep.dp, timeout_iters, batching_wait_iters)
    return sched


class Replica:
    """One engine (model replica) behind its API server when the engine profile has one."""

    __slots__ = ("dep", "config", "index", "sched", "kv", "spec", "builder", "drafts", "max_decodes", "fe",
                 "shared_cpu", "tl", "inbox", "next_at", "next_rank", "num_outstanding", "last_delivery_at",
                 "deadlines", "_aborted", "hidden_tokens",
                 "_phase", "_out", "_step", "_run_k", "_run_ends", "_run_cut", "_run_start", "_run_step0",
                 "_run_durations", "_run_j", "_run_batch", "_run_host", "_run_t", "ahead", "_cutoff", "_step_start",
                 "priced_by_counts", "_adopted", "recv_every", "since_recv")

    def __init__(self, dep: Deployment, config: SimConfig, *, index: int = 0):
        """`config` is resolved against the deployment here; `index` seeds the replica's own draws."""
        config = config.resolved(dep)
        self.dep, self.config, self.index = dep, config, index
        self.sched = sched = make_scheduler(dep, config)
        if config.scheduling_policy == "priority":
            if config.scheduler != "vllm":
                raise WorkloadError(f"--scheduling-policy priority is modelled for the vllm scheduler, not "
                                    f"'{config.scheduler}'; use --scheduler vllm or fcfs")
            sched.by_priority = True
        self.deadlines = False  # some admitted request has a client timeout: abort at deadlines
        self._aborted: list[Request] = []
        self.spec = spec = dep.speculative
        if spec is not None:
            sched.use_speculation(Acceptance(spec, (config.seed, index)))
        self.kv = sched.kv
        self.builder = ShapeBuilder(layout(dep).windows, dep.dp, expand=dep.engine.expands_verify)
        if isinstance(sched, VllmScheduler):  # a step reads its decodes as a count and a context sum only
            sched.lazy_decodes = (spec is None and not sched.by_priority and self.builder.full_only
                                  and sched.kv.blocks_for is None)
        prop = proposer_deployment(dep, spec) if spec is not None else None
        self.drafts = DraftShapes(layout(prop).windows if prop is not None else ())
        self.max_decodes = dep.token_budget if config.scheduler == "vllm" else dep.running_limit
        fe = dep.frontend
        self.fe = Frontend(fe) if fe is not None else None
        self.hidden_tokens = hidden_tokens(dep)  # opening tokens its clients get no text for (once, not per request)
        self.shared_cpu = self.fe is not None and self.fe.costs.shares_engine_cpu
        # a step is priced from its counts (`ShapeBuilder.counts`, `cost.full_step_time`): full attention, one
        # token per decode row, and no host time to claim from a shared CPU
        self.priced_by_counts = spec is None and self.builder.full_only and not self.shared_cpu and dep.dp == 1
        self.tl = Timeline()
        self._adopted = False  # its timeline is a run simulated elsewhere (`adopt`)
        self.inbox: list[Request] = []  # without an API server: admitted, not yet handed to the scheduler
        self.next_at: float | None = None
        self.next_rank = SCHEDULE
        self.num_outstanding = 0  # admitted and not finished
        self.last_delivery_at = 0.0  # when the client received the last applied step's tokens
        self._phase = _IDLE
        self._out: SchedulerOutput | None = None
        self._step = 0
        self._run_k = 0
        self._run_ends: list[float] = []
        self._run_cut = False
        self._run_start = self._run_t = 0.0
        self._run_step0 = self._run_j = self._run_batch = 0
        self._run_durations: list[float] = []
        self._run_host: float | None = None
        # an engine that schedules a step ahead (async scheduling) plans step k+1 when step k starts: a request
        # that reaches the engine while step k runs joins step k+2, so the next plan admits only those that had
        # arrived when the step that just ended began (`_cutoff`; None: the engine was idle, no lag)
        self.ahead = dep.engine.host.async_scheduling and not self.shared_cpu
        # an engine that reads new requests only every R decode steps (SGLang --scheduler-recv-interval), while idle,
        # and after a prefill step where R <= RECV_PREFILL_WEIGHT: `since_recv` decode steps since its last read
        # (R: read at the next plan)
        self.recv_every = self.since_recv = sched.recv_interval
        self._cutoff: float | None = None
        self._step_start = 0.0

    # ---- queries -------------------------------------------------------------------------------------
    def check(self, specs: Iterable[RequestSpec]) -> None:
        """Refuse requests this replica can never serve (longer than its KV pool or the model's context)."""
        specs = list(specs)
        if not specs:
            return
        dep, kv, config = self.dep, self.kv, self.config
        longest = max(s.input_tokens + s.output_tokens - 1 for s in specs)
        held = longest + self.sched.decode_tokens - 1  # speculative guesses hold slots beyond the last token
        group = kv.num_blocks // dep.dp  # with data-parallel attention a request lives in one group's pool
        if kv.blocks_held(held) > group:
            raise WorkloadError(
                f"a request of {held} tokens needs more KV cache than the pool holds "
                f"({group * kv.block_size} tokens on {dep.hardware.id} for {dep.model.name}"
                + (f", each of {dep.dp} attention groups" if dep.dp > 1 else "") + "); shorten the "
                "requests, raise --tp, use --kv fp8, or raise --gpu-memory-utilization where it is below 1")
        dep.model.check_context(longest + 1, "shorten --input-len / --output-len or the trace's requests")
        if config.scheduler == "vllm" and not config.enable_chunked_prefill:
            prompt = max(s.input_tokens for s in specs)
            if prompt > dep.max_num_batched_tokens:
                raise WorkloadError(f"a {prompt}-token prompt can never be scheduled with chunked prefill off "
                                    f"and a step budget of {dep.max_num_batched_tokens} tokens "
                                    f"(--max-num-batched-tokens, or {dep.engine.display}'s default where it is not "
                                    "given); raise the budget or enable chunked prefill")

    @property
    def has_work(self) -> bool:
        """Anything admitted and not finished (queued at the API server, waiting, running or mid-step)."""
        return self.num_outstanding > 0

    @property
    def num_waiting(self) -> int:
        """Requests not yet running: at the API server, in the inbox or in the scheduler's queue."""
        fe = len(self.fe.pending) if self.fe is not None else 0
        return fe + len(self.inbox) + len(self.sched.waiting)

    @property
    def num_running(self) -> int:
        return len(self.sched.running)

    @property
    def kv_usage(self) -> float:
        """Share of the KV pool's blocks held by requests (at the last step boundary)."""
        return self.kv.usage

    @property
    def kv_capacity_tokens(self) -> int:
        return self.kv.num_blocks * self.kv.block_size

    def cached_tokens(self, req: Request) -> int:
        """Prompt tokens of `req` this replica's prefix cache would serve now (a KV-aware router's score)."""
        return self.kv.get_computed_blocks(req).num_tokens

    # ---- actions -------------------------------------------------------------------------------------
    def admit(self, req: Request, at: float | None = None) -> None:
        """`req` reaches this replica at `req.arrival_at`, or at `at` when later (a request a fleet held until a
        replica came up); every event before that instant has been handled."""
        t = req.arrival_at if at is None or at <= req.arrival_at else at
        req.held_s = t - req.arrival_at
        self.num_outstanding += 1
        if req.deadline_at is not None:
            self.deadlines = True
        fe = self.fe
        if fe is not None:
            if self._phase == _FE_RUN:  # stream the run's steps that ended before this arrival first
                self._deliver_run(t, strictly_before=True)
            fe.admit(req, t)
            if self.next_at is None:
                self.next_at, self.next_rank = fe.next_ready_at(), SCHEDULE
            elif self._run_cut and self._phase == _FE_RUN:  # the run ends at the first step by whose end a
                ready = fe.next_ready_at()  # request has left the API server
                assert ready is not None
                ends = self._run_ends
                k = self._read_after(max(bisect_left(ends, ready), self._run_j) + 1 + self.ahead)
                if k < self._run_k:
                    self._run_k = k
                    self.next_at = ends[k - 1]
                self._run_cut = False
            return
        req.engine_arrival_at = t  # no API server: it reaches the engine as it reaches the replica
        self.inbox.append(req)
        if self.next_at is None:
            self.next_at, self.next_rank = t, SCHEDULE
        elif self._run_cut:  # cut the pending decode run at the first step ending at or after the arrival
            ends = self._run_ends  # (scheduling a step ahead: the step after that one)
            k = self._read_after(bisect_left(ends, t) + 1 + self.ahead)
            if k < self._run_k:
                self._run_k = k
                self.next_at = ends[k - 1]
            self._run_cut = False  # a later arrival cannot cut it shorter

    def wake(self, at: float) -> None:
        """Schedule at `at` if the replica waits with work (a driver whose arrivals have ended calls this, so a
        static batch that waited for more requests starts)."""
        if self.next_at is None and self.has_work:
            self.next_at, self.next_rank = at, SCHEDULE

    def step(self, more_coming: bool) -> list[Request]:
        """Handle the event at `next_at`. `more_coming`: whether the driver may still send requests (a static
        scheduler waits for a full batch while it is true). Returns the requests that finished."""
        if self.next_rank == STEP_END:
            finished = self._end_step()
            self.num_outstanding -= len(finished)
            return finished
        self._schedule(more_coming)
        if self._aborted:  # requests whose clients gave up: they end here (a closed-loop client sends its next)
            gone, self._aborted = self._aborted, []
            self.num_outstanding -= len(gone)
            return gone
        return []

    def timeline(self) -> Timeline:
        """The replica's timeline with its end-of-run counters filled in."""
        tl, sched = self.tl, self.sched
        if self._adopted:
            return tl
        if sched.acceptance is not None:
            tl.num_verified_decodes = sched.acceptance.num_rows
            tl.num_verified_tokens = sched.acceptance.num_tokens
        if self.fe is not None:
            tl.frontend_cpu_s = self.fe.cpu_s
        tl.budget_stalls = sched.num_budget_stalls
        return tl

    def adopt(self, tl: Timeline) -> None:
        """Take `tl`, this replica's timeline from a run simulated in another process (its end-of-run counters
        filled in by that process's `timeline()`), as its own; `timeline()` returns it unchanged."""
        self.tl = tl
        self._adopted = True

    # ---- events --------------------------------------------------------------------------------------
    def _schedule(self, more_coming: bool) -> None:
        now = self.next_at
        assert now is not None
        sched, fe = self.sched, self.fe
        cutoff = now if self._cutoff is None else self._cutoff
        self._cutoff = None
        held = False  # requests that reached the engine after the cutoff (or between reads) wait for a later plan
        if self.since_recv < self.recv_every > 1 and (sched.running or sched.waiting):  # not a read: all wait
            if fe is None:
                held = bool(self.inbox)  # (admitted by now)
            else:
                held = bool(fe.pending) and fe.pending[0].engine_arrival_at <= now
        elif fe is None:
            self.since_recv = 0
            if self.inbox:  # in arrival order
                inbox = self.inbox
                n = bisect_right(inbox, cutoff, key=_arrival_at)
                for req in inbox[:n]:
                    sched.add_request(req)
                self.inbox = inbox[n:]
                held = n < len(inbox)
        else:  # `fe.pop_ready(cutoff)` and `fe.next_ready_at()`, inlined: every plan reads them
            self.since_recv = 0
            pending = fe.pending
            while pending and pending[0].engine_arrival_at <= cutoff:
                sched.add_request(pending.popleft())
            held = bool(pending) and pending[0].engine_arrival_at <= now
        if self.deadlines:
            gone = sched.abort_expired(now)
            if gone:
                self._aborted.extend(gone)
                self.last_delivery_at = max(self.last_delivery_at, now)
        if not (sched.running or sched.waiting):  # (`sched.has_work`)
            if held:  # the engine would be idle: it takes them now
                self.next_at, self.next_rank, self._phase = now, SCHEDULE, _IDLE
                return
            self._wait(fe)
            return
        dep, tl = self.dep, self.tl
        k = plan_decode_run(sched, self.max_decodes) if self.spec is None else 0
        if k and held:
            k = min(k, self.recv_every - self.since_recv)  # a held request joins the plan after the next read
        if k:
            durations = run_durations(dep, self.builder, sched, k)
            self._run_start = now
            self._run_step0 = len(tl.step_end_at)
            deadline = sched.next_deadline() if self.deadlines else None
            if fe is None:
                ends = list(accumulate(durations, initial=now))[1:]  # now + d1, + d2, ... in order
                if deadline is not None:  # end the run at the first step by whose end a client gives up
                    k = min(k, bisect_left(ends, deadline) + 1)
                self._run_k, self._run_ends, self._run_cut = k, ends, sched.admission_open()
                self._phase, self.next_at, self.next_rank = _RUN, ends[k - 1], STEP_END
                return
            batch = len(sched.running)
            if deadline is not None:
                t = now
                for j, d in enumerate(durations):
                    t += d
                    if t >= deadline:
                        k = min(k, j + 1)
                        break
            self._run_k, self._run_durations, self._run_j, self._run_batch = k, durations, 0, batch
            self._run_cut = sched.admission_open()
            if self.shared_cpu:  # each step waits for the API server's queued work: one event per step
                self._run_host = round_host_s(dep, BatchShape(batch, batch, batch, {}))
                self._phase = _SHARED_RUN
                self._start_run_step(now)
                return
            ends = list(accumulate(durations, initial=now))[1:]
            if self._run_cut:  # a request already on its way through the API server may cut the run
                ready = fe.next_ready_at()
                if ready is not None:
                    k = min(k, self._read_after(bisect_left(ends, ready) + 1 + (self.ahead and ready > now)))
                    self._run_k, self._run_cut = k, False
            self._run_ends = ends
            self._phase, self.next_at, self.next_rank = _FE_RUN, ends[k - 1], STEP_END
            return
        out = sched.schedule(now, more_coming or bool(fe and fe.pending) or held)
        if out.is_empty:
            if held:  # an idle pass: the engine reads at once
                self.since_recv = self.recv_every
                self.next_at, self.next_rank, self._phase = now, SCHEDULE, _IDLE
                return
            self._wait(fe)
            return
        spec = self.spec
        if self.priced_by_counts:  # (`builder.step` and `step_time`, without building the shape)
            tokens, seqs, logits, work, prompt = self.builder.counts(out)
            dt = full_step_time(dep, tokens, seqs, logits, work)
        else:
            shape, prompt = self.builder.step(out)
            if spec is None:
                dt = step_time(dep, shape)
            elif out.decode_tokens == sched.decode_tokens:
                dt = round_time_s(dep, spec, shape, self.drafts.passes(out))
            else:  # a policy that builds its records without `new_output()` would silently decode plainly
                raise WorkloadError(f"the '{self.config.scheduler}' scheduler does not serve speculative "
                                    f"decoding; use --scheduler {' or '.join(SPECULATIVE_SCHEDULERS)}, or drop "
                                    "--speculative")
            if self.shared_cpu:
                now = fe.claim_for_step(now, round_host_s(dep, shape))  # type: ignore[union-attr]
        step_ends = tl.step_end_at
        self._step = len(step_ends)
        self._step_start = now
        step_ends.append(now + dt)
        tl.add(now, dt, len(sched.running), len(sched.waiting), self.kv.usage, prompt)
        self._out = out
        self._phase, self.next_at, self.next_rank = _STEP, now + dt, STEP_END

    def _wait(self, fe: Frontend | None) -> None:
        """Nothing to run now: wake when the next request leaves the API server, or on an admission."""
        self._phase = _IDLE
        self.next_rank = SCHEDULE
        self.next_at = fe.next_ready_at() if fe is not None else None

    def _start_run_step(self, t: float) -> None:
        if self._run_host is not None:
            t = self.fe.claim_for_step(t, self._run_host)  # type: ignore[union-attr]
        self.next_at = t + self._run_durations[self._run_j]
        self.next_rank = STEP_END

    def _deliver_run(self, until: float, strictly_before: bool) -> None:
        """Stream the tokens of the pending run's steps that end before `until` (or at it), in order."""
        fe, ends = self.fe, self._run_ends
        assert fe is not None
        j, k = self._run_j, self._run_k
        stop = bisect_left(ends, until, j, k) if strictly_before else bisect_right(ends, until, j, k)
        if stop > j:
            fe.deliver_steps(ends, j, stop, self._run_batch, self.tl.delivered_at)
        self._run_j = stop

    def _read_after(self, k: int) -> int:
        """The first step count >= k of the pending decode run after which the engine reads new requests (every
        step's, or with a read interval R every R-th decode step's since the last read)."""
        return k + (-(self.since_recv + k)) % self.recv_every

    def _count_decodes(self, n: int) -> None:
        """n decode steps ran since the last plan: the read counter advances (reset at each read a run passed)."""
        if self.recv_every > 1:
            self.since_recv = (self.since_recv + n - 1) % self.recv_every + 1

    def _cut_after_run(self, k: int) -> None:
        """Scheduling ahead, the plan after a run of k steps was made when its last step began (at the end of the
        one before it)."""
        if self.ahead:
            self._cutoff = self._run_ends[k - 2] if k >= 2 else self._run_start

    def _end_step(self) -> list[Request]:
        t = self.next_at
        assert t is not None
        sched, tl, fe, phase = self.sched, self.tl, self.fe, self._phase
        if phase == _STEP:
            out = self._out
            self._out = None
            finished = sched.postprocess(out, self._step, t)  # type: ignore[arg-type]
            if out.chunk_rows:  # type: ignore[union-attr]  # a prefill pass weighs RECV_PREFILL_WEIGHT decode steps
                self.since_recv = min(self.recv_every, self.since_recv + RECV_PREFILL_WEIGHT)
            else:
                self._count_decodes(1)
            if fe is not None:
                tl.delivered_at.append(fe.deliver(t, sched.num_emitted))
            if self.ahead:
                self._cutoff = self._step_start
        elif phase == _RUN:
            k = self._run_k
            self._count_decodes(k)
            self._cut_after_run(k)
            tl.step_end_at.extend(self._run_ends[:k])
            finished = _apply_run(sched, tl, k, self._run_step0, self._run_start, t)
            self._run_ends = []
            self._run_cut = False
        elif phase == _FE_RUN:  # (`_cut_after_run`, `_deliver_run(t, strictly_before=False)`, `_apply_run`)
            k, ends, j = self._run_k, self._run_ends, self._run_j
            self._count_decodes(k)
            if self.ahead:
                self._cutoff = ends[k - 2] if k >= 2 else self._run_start
            stop = bisect_right(ends, t, j, k)
            if stop > j:
                fe.deliver_steps(ends, j, stop, self._run_batch, tl.delivered_at)  # type: ignore[union-attr]
            self._run_j = stop
            tl.step_end_at.extend(ends[:k])
            finished = sched.apply_run(k, self._run_step0)
            start = self._run_start
            tl.add(start, t - start, len(sched.running), len(sched.waiting), self.kv.usage, 0)
            if finished:
                sched.finish(finished, t)
            self._run_ends = []
            self._run_cut = False
        else:  # a decode run behind the API server, one step per event
            assert fe is not None
            tl.step_end_at.append(t)
            tl.delivered_at.append(fe.deliver(t, self._run_batch))
            self._run_j = j = self._run_j + 1
            ready = fe.next_ready_at() if self._run_cut else None
            if j < self._run_k and (ready is None or ready > t):
                self._start_run_step(t)
                return []
            self._count_decodes(j)
            finished = _apply_run(sched, tl, j, self._run_step0, self._run_start, t)
            self._run_durations = []
        self.last_delivery_at = tl.delivered_at[-1] if fe is not None else t
        self._phase, self.next_rank = _IDLE, SCHEDULE  # next_at stays t: plan the next step there
        return finished


def _arrival_at(req: Request) -> float:
    return req.arrival_at


def _apply_run(sched: BaseScheduler, tl: Timeline, k: int, step0: int, start: float,
               end: float) -> list[Request]:
    """Advance every running request by the run's k decode steps (their tokens at steps step0 .. step0+k-1)."""
    finished = sched.apply_run(k, step0)
    tl.add(start, end - start, len(sched.running), len(sched.waiting), sched.kv.usage, 0)
    if finished:
        sched.finish(finished, end)
    return finished
