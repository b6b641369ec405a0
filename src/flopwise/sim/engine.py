"""The engine loop of one replica: admit arrivals, plan a step, price it with `cost.step_time`, apply it.

The loop is step-driven: the only events are arrivals, step ends and completions, and they are handled in a
fixed order that an event heap with ranks would give:
    1. requests that arrived at or before the current instant join the waiting queue (an arrival at the very
       end of a step joins the next step's scheduling);
    2. the scheduler plans the next step from that state;
    3. the step ends at now + step_time; its tokens are stamped with that instant; completions free their
       blocks and, in a closed loop, release their client, whose next request arrives at that same instant.
When nothing runs, time jumps to the next arrival. Runs of identical decode steps are fast-forwarded
(`decode_run.py`), with the same outcome as stepping.

Speculative decoding (`dep.speculative`): the scheduler grants each decode P positions and draws what it emits
(`acceptance.py`, seeded by the run's seed and the replica); a step is priced as a round,
`cost.speculative.round_time_s` of the target's step and the proposer's passes (`shape.DraftShapes`). Decodes
emit random numbers of tokens, so steps are not identical and are never fast-forwarded.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from flopwise.cost.layout import layout
from flopwise.cost.memory import blocks_counter, memory_plan
from flopwise.cost.speculative import proposer_deployment, round_time_s
from flopwise.cost.step import host_s, step_time
from flopwise.errors import InfeasibleError, WorkloadError
from flopwise.sim.acceptance import Acceptance
from flopwise.sim.arrivals import ClosedLoop, OpenLoop
from flopwise.sim.base import BaseScheduler
from flopwise.sim.block_manager import BlockManager
from flopwise.sim.config import SimConfig
from flopwise.sim.decode_run import plan_decode_run, run_durations
from flopwise.sim.frontend import Frontend
from flopwise.sim.request import Request
from flopwise.sim.scheduler import VllmScheduler
from flopwise.sim.sglang_scheduler import make_sglang_scheduler
from flopwise.sim.shape import DraftShapes, ShapeBuilder
from flopwise.sim.static_scheduler import StaticScheduler
from flopwise.sim.timeline import Timeline
from flopwise.specs.deployment import Deployment
from flopwise.workload.spec import RequestSpec

__all__ = ["run_engine", "make_scheduler"]


def make_scheduler(dep: Deployment, config: SimConfig) -> BaseScheduler:
    """A scheduler over a block pool sized by the deployment's memory plan."""
    if config.scheduler == "sglang":  # SGLang-like policy: sglang_scheduler.py
        return make_sglang_scheduler(dep, config)
    windowed = not layout(dep).cache.uniform  # windows, chunks or per-sequence state: blocks by formula
    caching = config.enable_prefix_caching and config.scheduler == "vllm" and not windowed
    blocks_for = blocks_counter(dep) if windowed else None
    kv = BlockManager(memory_plan(dep).num_blocks, dep.block_size, caching, blocks_for)
    cls = VllmScheduler if config.scheduler == "vllm" else StaticScheduler
    return cls(kv, max_num_seqs=dep.max_num_seqs, max_num_batched_tokens=dep.max_num_batched_tokens,
               enable_chunked_prefill=config.enable_chunked_prefill)


def _check(dep: Deployment, sched: BaseScheduler, items: Sequence[tuple[int, RequestSpec]], config: SimConfig) -> None:
    kv = sched.kv
    longest = max(s.input_tokens + s.output_tokens - 1 for _, s in items)
    held = longest + sched.decode_tokens - 1  # speculative guesses hold slots beyond the last token
    if kv.blocks_for(held) > kv.num_blocks:
        raise WorkloadError(
            f"a request of {held} tokens needs more KV cache than the pool holds "
            f"({kv.num_blocks * kv.block_size} tokens on {dep.hardware.id} for {dep.model.name}); shorten the "
            "requests, raise --tp, use --kv fp8, or raise --gpu-memory-utilization")
    dep.model.check_context(longest + 1, "shorten --input-len / --output-len or the trace's requests")
    if config.scheduler == "vllm" and not config.enable_chunked_prefill:
        prompt = max(s.input_tokens for _, s in items)
        if prompt > dep.max_num_batched_tokens:
            raise WorkloadError(f"a {prompt}-token prompt can never be scheduled with chunked prefill off and "
                                f"--max-num-batched-tokens {dep.max_num_batched_tokens}; raise the budget or "
                                "enable chunked prefill")


def run_engine(dep: Deployment, items: Sequence[tuple[int, RequestSpec]], concurrency: int | None,
               config: SimConfig, progress: Callable[[int], None] | None = None,
               replica: int = 0) -> tuple[list[Request], Timeline]:
    """Serve `items` (request id, spec) on one replica (`replica` seeds its own draws); return the requests
    (finished) and the timeline. `config` must be resolved (`SimConfig.resolved`). With an API server in the
    engine profile, requests pass it before the engine and tokens after (`frontend.py`)."""
    sched = make_scheduler(dep, config)
    spec = dep.speculative
    if spec is not None:
        sched.use_speculation(Acceptance(spec, (config.seed, replica)))
    _check(dep, sched, items, config)
    kv = sched.kv
    builder = ShapeBuilder(layout(dep).windows)
    prop = proposer_deployment(dep, spec) if spec is not None else None
    drafts = DraftShapes(layout(prop).windows if prop is not None else ())
    max_decodes = dep.max_num_batched_tokens if config.scheduler == "vllm" else dep.max_num_seqs
    source = OpenLoop(items) if concurrency is None else ClosedLoop(items, concurrency, config.client_stagger_s)
    fe = Frontend(dep.engine.frontend) if dep.engine.frontend is not None else None
    shared_cpu = fe is not None and fe.costs.shares_engine_cpu
    tl = Timeline()
    ends = tl.step_end_at
    requests: list[Request] = []
    now = 0.0
    while True:
        if fe is None:
            ready = source.pop_due(now)
            requests.extend(ready)
        else:
            _ingest(source, fe, requests, now)
            ready = fe.pop_ready(now)
        for req in ready:
            sched.add_request(req)
        if not sched.has_work:
            t = _next_event(source, fe)
            if t is None:
                break
            now = t
            continue
        k = plan_decode_run(sched, max_decodes) if spec is None else 0
        if k:
            if fe is None:
                finished, now = _decode_run(dep, builder, sched, tl, k, now, source.next_at())
            else:
                finished, now = _decode_run_frontend(dep, builder, sched, tl, k, now, source, fe, requests)
        else:
            out = sched.schedule(now, source.more_coming or bool(fe and fe.pending))
            if out.is_empty:
                t = _next_event(source, fe)
                if t is None:
                    raise InfeasibleError("the scheduler can make no progress (a request cannot fit the KV pool)")
                now = t
                continue
            shape, prompt = builder.step(out)
            if spec is None:
                dt = step_time(dep, shape)
            elif out.decode_tokens == sched.decode_tokens:
                dt = round_time_s(dep, spec, shape, drafts.passes(out))
            else:  # a policy that builds its records without `new_output()` would silently decode plainly
                raise WorkloadError(f"the '{config.scheduler}' scheduler does not serve speculative decoding; "
                                    "use --scheduler vllm or static, or drop --speculative")
            if shared_cpu:
                now = fe.claim_for_step(now, host_s(dep, shape))  # type: ignore[union-attr]
            step = len(ends)
            ends.append(now + dt)
            tl.add(now, dt, len(sched.running), len(sched.waiting), kv.usage, prompt)
            now += dt
            finished = sched.postprocess(out, step, now)
            if fe is not None:
                _ingest(source, fe, requests, now)  # arrivals during the step are served before its tokens
                tl.delivered_at.append(fe.deliver(now, sched.num_emitted))
        if finished:
            source.on_finished(len(finished), tl.delivered_at[-1] if fe is not None else now)
            if progress is not None:
                progress(len(finished))
    if sched.acceptance is not None:
        tl.num_verified_decodes = sched.acceptance.num_rows
        tl.num_verified_tokens = sched.acceptance.num_tokens
    if fe is not None:
        tl.frontend_cpu_s = fe.cpu_s
    return requests, tl


def _ingest(source: OpenLoop | ClosedLoop, fe: Frontend, requests: list[Request], now: float) -> None:
    """Hand the requests sent by `now` to the API server."""
    for req in source.pop_due(now):
        fe.admit(req)
        requests.append(req)


def _next_event(source: OpenLoop | ClosedLoop, fe: Frontend | None) -> float | None:
    """The next instant something reaches the engine: an arrival, or a request leaving the API server."""
    t = source.next_at()
    if fe is None:
        return t
    r = fe.next_ready_at()
    if r is None:
        return t
    return r if t is None else min(r, t)


def _decode_run(dep: Deployment, builder: ShapeBuilder, sched: BaseScheduler, tl: Timeline, k: int, now: float,
                next_arrival_at: float | None) -> tuple[list[Request], float]:
    durations = run_durations(dep, builder, sched, k)
    cut_at = next_arrival_at if sched.admission_open() else None
    ends = tl.step_end_at
    step0 = len(ends)
    t = now
    for j, d in enumerate(durations, 1):
        t += d
        ends.append(t)
        if cut_at is not None and t >= cut_at:
            k = j
            break
    return _apply_run(sched, tl, k, step0, now, t)


def _decode_run_frontend(dep: Deployment, builder: ShapeBuilder, sched: BaseScheduler, tl: Timeline, k: int,
                         now: float, source: OpenLoop | ClosedLoop, fe: Frontend,
                         requests: list[Request]) -> tuple[list[Request], float]:
    """A decode run behind the API server: each step's tokens are streamed out in time order with the arrivals
    it must serve first; the run ends at the first step by whose end a request has left the server (when the
    scheduler could admit it). A shared CPU (V0) also delays each step until the server's queued work is done."""
    durations = run_durations(dep, builder, sched, k)
    batch = len(sched.running)
    host = dep.engine.host.seconds(batch, dep.gpus_per_replica) if fe.costs.shares_engine_cpu else None
    admit = sched.admission_open()
    ends, delivered = tl.step_end_at, tl.delivered_at
    step0 = len(ends)
    t = now
    for j, d in enumerate(durations, 1):
        if host is not None:
            t = fe.claim_for_step(t, host)
        t += d
        ends.append(t)
        _ingest(source, fe, requests, t)
        delivered.append(fe.deliver(t, batch))
        if admit:
            ready = fe.next_ready_at()
            if ready is not None and ready <= t:
                k = j
                break
    return _apply_run(sched, tl, k, step0, now, t)


def _apply_run(sched: BaseScheduler, tl: Timeline, k: int, step0: int, start: float,
               end: float) -> tuple[list[Request], float]:
    """Advance every running request by the run's k decode steps (their tokens at steps step0 .. step0+k-1)."""
    kv, running = sched.kv, sched.running
    kv.allocate_decode_run(running, k)
    for r in running:
        r.sample(step0, k)
        r.num_computed_tokens += k
    tl.add(start, end - start, len(running), len(sched.waiting), kv.usage, 0)
    finished = [r for r in running if r.num_output_tokens == r.max_tokens]
    if finished:
        sched.finish(finished, end)
    return finished, end
