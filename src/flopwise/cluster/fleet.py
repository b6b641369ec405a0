"""A fleet of replicas in one event loop: routing, disaggregated prefill/decode, replicas leaving, autoscaling.

The fleet drives each replica only through its public interface (`sim.Replica`: admit, next event, step and
read-only queries); it never touches a scheduler. One heap (`events.py`) orders every replica's events, the
arrivals, KV hand-offs and control events.

Aggregated (one "mixed" pool): each arriving request goes to the replica its router picks. With round-robin,
an open loop and every replica up, replica i serves requests i, i + R, ... exactly as `sim.simulate` splits them,
and since the replicas are independent the summary is `simulate`'s, bit for bit.

Disaggregated (a "prefill" and a "decode" pool, as DistServe, Splitwise, SGLang, vLLM's KV connectors, NVIDIA
Dynamo and llm-d run them): a request is first served on a prefill replica as a one-token request (vLLM's
proxy sets max_tokens=1): its prompt is computed and its first token sampled there. When that step ends, the
decode router picks a decode replica and the KV moves over the link between them (`cost/transfer.py`: NVLink
within a node, the network between nodes, queued on the sender's links, layer-wise overlap). The request then
reaches the decode replica (through its API server, if any) carrying its prompt's KV and its first token, which
the client receives at that instant (SGLang's and DistServe's hand-off: TTFT includes the transfer); the
decode replica allocates the KV and decodes the rest. Replicas are placed in order, prefill pool first, on
nodes of `hardware.gpus_per_node` GPUs; two replicas share a node when both lie wholly on it.

Replica events (`specs/cluster.py`): `down` fails the requests it holds (errors_by_kind "replica_down");
`drain` takes it out of routing and switches it off when it is empty; `up` brings a fresh replica (empty
cache) into the slot. Requests that find no replica up wait at the router until one is (scale from zero).
GPU time counts from a replica's start (cold start included) to its stop or the end of the run.
"""

from __future__ import annotations

import gc
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from heapq import heappop, heappush
from typing import Any

import numpy as np

from flopwise.cluster.autoscale import Autoscaler, cold_start_s
from flopwise.cluster.events import ARRIVAL, CONTROL, EventHeap
from flopwise.cluster.metrics import BoundedRecords
from flopwise.cluster.router import Router, make_router
from flopwise.cost.fit import require_fit
from flopwise.cost.transfer import KvLink, LinkSpec, kv_transfer_bytes, link_between
from flopwise.errors import InfeasibleError, WorkloadError
from flopwise.metrics.summary import RequestRecord, RunSummary
from flopwise.sim.arrivals import RequestSource, request_source
from flopwise.sim.breakdown import PHASES
from flopwise.sim.config import SimConfig
from flopwise.sim.engine import STUCK
from flopwise.sim.replica import Replica
from flopwise.sim.request import Request, visible_steps
from flopwise.sim.simulate import SimResult, SimSummary, sim_summary, step_events, stream_events
from flopwise.sim.timeline import Timeline
from flopwise.specs.cluster import ClusterSpec, PoolSpec
from flopwise.specs.sla import SLA
from flopwise.workload.spec import RequestSpec, Workload

__all__ = ["Member", "Fleet", "FleetResult", "METRICS_MODES", "BOUNDED_FROM"]

_REPLICA, _HANDOFF, _CONTROL = 0, 1, 2
METRICS_MODES = ("auto", "exact", "bounded")
BOUNDED_FROM = 100_000  # "auto": runs of at least this many requests keep per-request rows, not token times


@dataclass(slots=True, eq=False, kw_only=True)
class Member:
    """The fleet's bookkeeping of one replica slot: which pool, its state, what it was sent. Routers read
    `num_outstanding`, `kv_usage` and `cached_tokens`, which include requests on their way to it.

    `num_outstanding` (the replica's admitted and unfinished requests plus those in transit to it) is a field
    the fleet keeps, not a property: a router reads it for every candidate at every arrival. It changes where
    the fleet admits, steps (`Replica.step` returns what finished), hands off and replaces the replica."""

    index: int
    pool: PoolSpec
    replica: Replica
    state: str  # "cold" (starting), "up", "draining", "off", "down"
    started_at: float
    node: int  # the node of its first GPU
    spans_nodes: bool
    stopped_at: float | None = None
    version: int = 0
    pushed: tuple[float, int] | None = None
    inflight: dict[int, Request] = field(default_factory=dict)
    num_in_transit: int = 0  # disaggregated requests whose KV is on its way here
    num_outstanding: int = 0  # replica.num_outstanding + num_in_transit
    slot: int | None = None  # its place among its pool's candidates (`Fleet.candidates`), while it is one
    num_routed: int = 0
    link: KvLink = field(default_factory=KvLink)
    past: list[Replica] = field(default_factory=list)  # earlier incarnations (before a down / up)
    past_up_s: float = 0.0  # the earlier incarnations' time up, from start to stop

    def up_seconds(self, end_at: float) -> float:
        """Time up over every incarnation (the current one to its stop, or to `end_at`: the run's end, which a stop
        scheduled after the traffic does not extend)."""
        stop = min(self.stopped_at, end_at) if self.stopped_at is not None else end_at
        return self.past_up_s + max(0.0, stop - self.started_at)

    @property
    def kv_usage(self) -> float:
        return self.replica.kv_usage

    def cached_tokens(self, req: Request) -> int:
        return self.replica.cached_tokens(req)

    def gpu_seconds(self, end_at: float) -> float:
        return self.up_seconds(end_at) * self.pool.deployment.gpus_per_replica


@dataclass(slots=True)
class _Leg:
    """One request's passage through one replica (aggregated: the only one; disaggregated: prefill, decode)."""

    req: Request
    replica: Replica
    member: int


class Fleet:
    """Build with a ClusterSpec and a SimConfig; `run(workload)` serves it once."""

    def __init__(self, spec: ClusterSpec, config: SimConfig | None = None, metrics: str = "auto", *,
                 first_replica: int = 0):
        """`metrics`: "exact" keeps every request's token times (summaries as `simulate`'s, bit for bit),
        "bounded" one row per request as it completes (`metrics.py`), "auto" bounded from BOUNDED_FROM
        requests. `first_replica`: this fleet's replicas are replicas first_replica, ... of a larger fleet it is
        a shard of (`shards.py`); each replica's own draws are seeded by that index."""
        if metrics not in METRICS_MODES:
            raise WorkloadError(f"unknown metrics mode '{metrics}'; use one of {', '.join(METRICS_MODES)}")
        self.metrics = metrics
        self.first_replica = first_replica
        self.bounded: BoundedRecords | None = None
        self.spec = spec
        self.config = config or SimConfig()
        for p in spec.pools:
            require_fit(p.deployment)
            if p.role == "decode" and (runs := self.config.resolved(p.deployment).scheduler) != "vllm":
                how = ("drop --scheduler or use --scheduler vllm" if self.config.scheduler is not None else
                       f"{p.deployment.engine.display}'s own policy ({runs}) is not simulated there: add "
                       "--scheduler vllm")
                raise WorkloadError("a disaggregated decode pool runs the vLLM scheduler (it takes KV computed "
                                    f"elsewhere); {how}")
        self.heap = EventHeap()
        self.members: list[Member] = []
        self._candidates: dict[str, list[Member]] = {}  # by role, in pool order; cleared when a state changes
        self._loads: dict[str, list[int]] = {}  # the candidates' num_outstanding, in the same order
        self.routers: dict[str, Router] = {}
        self.pending: dict[str, deque[Request]] = {}
        gpu = 0
        for p in spec.pools:
            self.routers[p.role] = make_router(spec.router)
            self.pending[p.role] = deque()
            for _ in range(p.num_replicas):
                gpu = self._add_member(p, 0.0, "up", gpu)
        self._next_gpu = gpu
        self.links: dict[tuple[int, int], LinkSpec] = {}
        self.legs: dict[int, list[_Leg]] = {}
        self.handoff_at: dict[int, float] = {}
        self.transfer_ms: list[float] = []
        self.transfer_bytes = 0.0
        self.failed: dict[int, str] = {}
        self.specs: Sequence[RequestSpec] = ()
        self.now = 0.0
        self.autoscaler: Autoscaler | None = None
        if spec.autoscale is not None:
            role = "decode" if spec.is_disaggregated else "mixed"
            pool = spec.pool(role)
            cold = spec.autoscale.cold_start_s
            if cold is None:
                cold = cold_start_s(pool.deployment, spec.autoscale.storage_gbs, spec.autoscale.engine_start_s)
            self.autoscaler = Autoscaler(spec.autoscale, role, cold)
            self.heap.push(spec.autoscale.interval_s, CONTROL, -1, (_CONTROL, "tick", None))
        for ev in spec.events:
            if ev.replica >= len(self.members):
                raise WorkloadError(f"replica event for replica {ev.replica}, but the fleet has "
                                    f"{len(self.members)} (0..{len(self.members) - 1})")
            self.heap.push(ev.at, CONTROL, ev.replica, (_CONTROL, ev.kind, ev.replica))

    # ---- membership ----------------------------------------------------------------------------------
    def _add_member(self, pool: PoolSpec, at: float, state: str, gpu: int) -> int:
        dep = pool.deployment
        per = dep.gpus_per_replica
        per_node = max(1, dep.hardware.gpus_per_node)
        node, spans = gpu // per_node, (gpu % per_node) + per > per_node
        rep = Replica(dep, self.config, index=self.first_replica + len(self.members))
        self.members.append(Member(index=len(self.members), pool=pool, replica=rep, state=state, started_at=at,
                                   node=node, spans_nodes=spans))
        self._forget_candidates()
        return gpu + per

    def scale_up(self, role: str, at: float, ready_in_s: float) -> Member:
        """A new replica of `role`'s pool, taking traffic after `ready_in_s` (its cold start)."""
        pool = self.spec.pool(role)
        self._next_gpu = self._add_member(pool, at, "cold", self._next_gpu)
        m = self.members[-1]
        self.heap.push(at + ready_in_s, CONTROL, m.index, (_CONTROL, "ready", m.index))
        return m

    def _sync(self, m: Member) -> None:
        """Push the replica's next event if it moved (entries of an older version are skipped)."""
        if m.state in ("down", "off"):
            return
        rep = m.replica
        at = rep.next_at
        key = None if at is None else (at, rep.next_rank)
        if key != m.pushed:
            m.version += 1
            m.pushed = key
            if key is not None:
                self.heap.push(key[0], rep.next_rank, m.index, (_REPLICA, m, m.version))

    def candidates(self, role: str) -> list[Member]:
        """The members of `role`'s pool that take traffic, in pool order (kept until a member's state changes)."""
        cands = self._candidates.get(role)
        if cands is None:
            cands = self._candidates[role] = [m for m in self.members if m.state == "up" and m.pool.role == role]
            self._loads[role] = [m.num_outstanding for m in cands]
            for i, m in enumerate(cands):
                m.slot = i
        return cands

    def _set_state(self, m: Member, state: str) -> None:
        m.state = state
        self._forget_candidates()

    def _forget_candidates(self) -> None:
        self._candidates.clear()
        self._loads.clear()
        for m in self.members:
            m.slot = None

    def _add_load(self, m: Member, delta: int) -> None:
        """`m.num_outstanding += delta`, and in the loads its router reads."""
        m.num_outstanding += delta
        if m.slot is not None:
            self._loads[m.pool.role][m.slot] = m.num_outstanding

    # ---- the loop ------------------------------------------------------------------------------------
    def bounded_for(self, num_requests: int) -> bool:
        """Whether a run of `num_requests` keeps bounded rows (the `metrics` mode)."""
        return self.metrics == "bounded" or (self.metrics == "auto" and num_requests >= BOUNDED_FROM)

    def check(self, workload: Workload) -> None:
        """Refuse a workload some pool can never serve (`Replica.check`; a prefill pool sees one-token requests)."""
        for p in self.spec.pools:
            reps = [m.replica for m in self.members if m.pool is p]
            if p.role == "prefill":
                reps[0].check(RequestSpec(arrival_at=0.0, input_tokens=s.input_tokens, output_tokens=1)
                              for s in workload.requests)
            elif reps:
                reps[0].check(workload.requests)

    def adopt(self, first: int, timelines: Sequence[Timeline], num_routed: Sequence[int], now: float) -> None:
        """Take the run of replicas first, first + 1, ... simulated as a shard of this fleet in another process
        (`shards.py`): their timelines (end-of-run counters filled in), how many requests each was sent, and the
        shard's last event instant."""
        for m, tl, routed in zip(self.members[first:first + len(timelines)], timelines, num_routed, strict=True):
            m.replica.adopt(tl)
            m.num_routed = routed
        self.now = max(self.now, now)

    def run(self, workload: Workload, progress: Callable[[int], None] | None = None,
            sla: SLA | None = None) -> FleetResult:
        t0 = time.perf_counter()
        items = list(enumerate(workload.requests))
        self.specs = workload.requests
        n = workload.num_requests
        if self.bounded_for(n):
            if any(m.replica.dep.engine.stream_interval > 1 for m in self.members):
                raise WorkloadError(f"a fleet run of {n:,} requests keeps no per-request token times, so its ITL "
                                    "per streamed event cannot be pooled with --stream-interval: run fewer requests "
                                    "or drop --stream-interval")
            self.bounded = BoundedRecords(n, sla.itl_stats if sla is not None else ())
        first = self.spec.pools[0]
        self.check(workload)
        source = request_source(items, concurrency=workload.concurrency, max_concurrency=workload.max_concurrency,
                                stagger_s=self.config.client_stagger_s)
        self.source = source
        self.progress = progress
        # the workload's objects and the fleet's live through the run: frozen, the collector's full passes skip them
        gc.freeze()
        try:
            self._serve(source, first.role)
        finally:
            gc.unfreeze()
        for m in self.members:
            if m.state in ("up", "draining") and m.replica.has_work:
                raise InfeasibleError(STUCK)
        for q in self.pending.values():
            for req in q:
                self._fail(req.request_id, "unavailable")
        return FleetResult(self, workload, sla, time.perf_counter() - t0)

    def _serve(self, source: RequestSource, role: str) -> None:
        """The event loop: arrivals to the `role` pool and the heap's events, in (time, rank, order) order."""
        heap, seq = self.heap.items, self.heap.seq  # (at, rank, order, seq, event), `events.py`
        woken = False
        for m in self.members:
            self._sync(m)
        a = source.next_at()  # read again after anything that may send (a completion, in a closed loop)
        more = source.more_coming  # changes only when requests are sent
        while True:
            if a is not None and (not heap or a < (top := heap[0])[0] or (a == top[0] and top[1] >= ARRIVAL)):
                self.now = a
                for req in source.pop_due(a):
                    self._arrive(role, req)
                more = source.more_coming
                if not more and not woken:
                    woken = True
                    for m in self.members:
                        m.replica.wake(a)
                        self._sync(m)
                a = source.next_at()
                continue
            if not heap:
                break
            at, _, _, _, ev = heappop(heap)
            self.now = at
            kind = ev[0]
            if kind == _REPLICA:
                m = ev[1]
                if ev[2] != m.version:
                    continue
                rep = m.replica
                # the replica's next events (a step's end is followed by a plan at the same instant) are handled
                # here while nothing in the heap or the arrivals comes before them: what pushing and popping each
                # would do. What finished is handled first (a closed-loop client may send at that instant).
                while True:
                    finished = rep.step(more)
                    if finished:
                        self._add_load(m, -len(finished))
                        self._finished(m, finished)
                        a = source.next_at()
                        if m.state == "off":  # a draining replica's last request: stopped, nothing to push
                            break
                    if (nxt := rep.next_at) is None:
                        m.version += 1  # (`_sync`, inlined: its entry was popped)
                        m.pushed = None
                        break
                    rank = rep.next_rank
                    if (heap and (nxt > (top := heap[0])[0] or (nxt == top[0] and (rank, m.index) >= top[1:3]))
                            or a is not None and (a < nxt or (a == nxt and rank >= ARRIVAL))):
                        m.version += 1
                        m.pushed = (nxt, rank)
                        heappush(heap, (nxt, rank, m.index, next(seq), (_REPLICA, m, m.version)))
                        break
                    self.now = nxt
            elif kind == _HANDOFF:
                self._arrive_decode(ev[1], ev[2])
                a = source.next_at()
            elif ev[1] == "tick" or self._live():  # a replica's event after the run (nothing left to arrive or
                self._control(ev[1], ev[2], at)      # to serve) is not part of it: its state stays as it ended
                a = source.next_at()

    def _fail(self, rid: int, kind: str) -> None:
        b = self.bounded
        if b is None:
            self.failed[rid] = kind
            return
        rs = self.specs[rid]
        legs = self.legs.pop(rid, None)
        head = legs[0].req if legs else None
        b.fail(rid, rs.arrival_at, rs.input_tokens, rs.output_tokens, kind,
               head.first_scheduled_at if head is not None else None, head.num_preemptions if head else 0)
        self.handoff_at.pop(rid, None)

    def _complete(self, rid: int) -> None:
        """Bounded metrics: keep the request's row and drop its objects (a request whose last token came after
        its client's deadline is a timeout)."""
        legs = self.legs.pop(rid)
        head = legs[0]
        dl = head.req.deadline_at
        if dl is not None:
            last, tl = legs[-1].req, legs[-1].replica.tl
            delivered = tl.delivered_at if len(tl.delivered_at) else tl.step_end_at
            if last.token_steps and delivered[last.token_steps[-1] - 1] > dl:
                self.legs[rid] = legs  # (`_fail` reads them)
                self._fail(rid, "timeout")
                return
        assert self.bounded is not None
        if len(legs) == 1:
            self.bounded.add(rid, head.req, head.replica.tl, None, None, None, head.member,
                             head.replica.hidden_tokens)
            return
        tail = legs[1]
        self.bounded.add(rid, head.req, head.replica.tl, tail.req, tail.replica.tl, self.handoff_at.pop(rid, None),
                         tail.member, tail.replica.hidden_tokens)

    def _live(self) -> bool:
        """Anything left: arrivals to come, requests waiting at a router, on a link or on a replica."""
        return (self.source.next_at() is not None or any(self.pending.values())
                or any(m.num_outstanding if m.state not in ("down", "off") else m.num_in_transit
                       for m in self.members))

    def _route(self, role: str, req: Request) -> Member | None:
        cands = self.candidates(role)
        if not cands:
            return None
        return self.routers[role].choose(req, cands, self._loads[role])

    def _admit(self, m: Member, req: Request) -> None:
        m.replica.admit(req, self.now)  # a request held at the router reaches the replica now, not at its arrival
        self._add_load(m, 1)
        m.inflight[req.request_id] = req
        m.num_routed += 1
        self._sync(m)

    def _arrive(self, role: str, req: Request) -> None:
        """A client's request reaches the first pool."""
        if role == "prefill":
            leg = Request(request_id=req.request_id, arrival_at=req.arrival_at, num_prompt_tokens=req.num_prompt_tokens,
                          max_tokens=1, prefix_id=req.prefix_id, num_prefix_tokens=req.num_prefix_tokens,
                          priority=req.priority, deadline_at=req.deadline_at)
        else:
            leg = req
        m = self._route(role, leg)
        if m is None:
            self.pending[role].append(leg)
            return
        self.legs[req.request_id] = [_Leg(leg, m.replica, m.index)]
        self._admit(m, leg)

    def _finished(self, m: Member, finished: list[Request]) -> None:
        role = m.pool.role
        for req in finished:
            del m.inflight[req.request_id]
        # (only a replica that was sent a request with a client timeout aborts any)
        gone = [r for r in finished if r.aborted_at is not None] if m.replica.deadlines else None
        if gone:  # their clients gave up (timeouts): failed, and a closed-loop client sends its next request
            for r in gone:
                self._fail(r.request_id, "timeout")
            self.source.on_finished(len(gone), self.now)
            if self.progress is not None:
                self.progress(len(gone))
            finished = [r for r in finished if r.aborted_at is None]
        if role == "prefill":
            for req in finished:
                self._hand_off(m, req)
        else:
            if self.bounded is not None:
                for req in finished:
                    self._complete(req.request_id)
            self.source.on_finished(len(finished), m.replica.last_delivery_at)
            if self.progress is not None:
                self.progress(len(finished))
        if m.state == "draining" and not m.replica.has_work:
            self._stop(m, "off")

    def _hand_off(self, m: Member, req: Request) -> None:
        """A prefill leg finished: move its KV to a decode replica."""
        rid = req.request_id
        spec = self.specs[rid]
        end = req.finished_at
        assert end is not None
        if spec.output_tokens == 1:  # nothing left to decode: the prefill's token is the answer
            if self.bounded is not None:
                self._complete(rid)
            self.source.on_finished(1, m.replica.last_delivery_at)
            if self.progress is not None:
                self.progress(1)
            return
        d = self._route("decode", req)
        if d is None:
            self._fail(rid, "unavailable")
            self.source.on_finished(1, end)
            return
        link = self._link(m, d)
        dep = m.pool.deployment
        nbytes = kv_transfer_bytes(dep, req.num_prompt_tokens)
        gpus = min(dep.gpus_per_replica, d.pool.deployment.gpus_per_replica)
        first = req.first_scheduled_at if req.first_scheduled_at is not None else end
        done = m.link.transfer(link, gpus, dep.model.num_layers, nbytes, first, end)
        self.transfer_ms.append((done - end) * 1e3)
        self.transfer_bytes += nbytes
        d.num_in_transit += 1
        self._add_load(d, 1)
        self.handoff_at[rid] = done
        self.heap.push(done, ARRIVAL, rid, (_HANDOFF, rid, d))

    def _link(self, p: Member, d: Member) -> LinkSpec:
        key = (p.index, d.index)
        spec = self.links.get(key)
        if spec is None:
            same = p.node == d.node and not p.spans_nodes and not d.spans_nodes
            spec = link_between(self.spec.kv_link, p.pool.deployment.hardware, d.pool.deployment.hardware, same,
                                self.spec.layerwise)
            self.links[key] = spec
        return spec

    def _arrive_decode(self, rid: int, d: Member) -> None:
        d.num_in_transit -= 1
        self._add_load(d, -1)
        spec = self.specs[rid]
        done = self.handoff_at[rid]
        leg = Request(request_id=rid, arrival_at=done, num_prompt_tokens=spec.input_tokens,
                      max_tokens=spec.output_tokens, prefix_id=spec.prefix_id, num_prefix_tokens=spec.prefix_tokens,
                      priority=spec.priority, deadline_at=self.legs[rid][0].req.deadline_at)
        leg.num_output_tokens = 1  # sampled on the prefill replica
        leg.num_tokens = spec.input_tokens + 1
        leg.num_external_tokens = spec.input_tokens
        if d.state != "up":  # it left while the KV was on its way: pick another
            other = self._route("decode", leg)
            if other is None:
                self._fail(rid, "unavailable")
                self.source.on_finished(1, done)
                return
            d = other
        self.legs[rid].append(_Leg(leg, d.replica, d.index))
        self._admit(d, leg)

    def _control(self, kind: str, index: int | None, at: float) -> None:
        if kind == "tick":
            assert self.autoscaler is not None
            self.autoscaler.tick(self, at)
            if self._live():  # ticks stop with the run: nothing left to arrive or to serve
                self.heap.push(at + self.autoscaler.spec.interval_s, CONTROL, -1, (_CONTROL, "tick", None))
            return
        assert index is not None
        m = self.members[index]
        if kind == "ready":
            if m.state == "cold":
                self._set_state(m, "up")
                self._drain_pending(m.pool.role)
        elif kind == "down":
            if m.state in ("up", "draining", "cold"):
                for rid in list(m.inflight):
                    self._fail(rid, "replica_down")
                    self.source.on_finished(1, at)
                m.inflight.clear()
                self._stop(m, "down")
        elif kind == "drain":
            self.drain(m)
        elif kind == "up":
            if m.state in ("down", "off"):
                m.past.append(m.replica)
                m.past_up_s = m.up_seconds(at)
                m.replica = Replica(m.pool.deployment, self.config, index=self.first_replica + m.index)
                m.started_at, m.stopped_at, m.pushed = at, None, None
                self._add_load(m, m.num_in_transit - m.num_outstanding)
                self._set_state(m, "up")
                self._drain_pending(m.pool.role)

    def drain(self, m: Member) -> None:
        """Take `m` out of routing; it stops when its last request finishes."""
        if m.state == "up":
            self._set_state(m, "draining")
            if not m.replica.has_work:
                self._stop(m, "off")

    def _stop(self, m: Member, state: str) -> None:
        self._set_state(m, state)
        m.stopped_at = self.now
        m.version += 1  # its pending events are void
        m.pushed = None

    def _drain_pending(self, role: str) -> None:
        q = self.pending[role]
        while q:
            m = self._route(role, q[0])
            if m is None:
                return
            req = q.popleft()
            self.legs[req.request_id] = [_Leg(req, m.replica, m.index)]
            self._admit(m, req)


def _token_times(s: list[int], tl: Timeline) -> list[float]:
    """The instants (delivered, or step ends without an API server) of the steps in ranges `s` (`token_steps`)."""
    ends = tl.delivered_at if len(tl.delivered_at) else tl.step_end_at
    out: list[float] = []
    for a, b in zip(s[::2], s[1::2], strict=False):
        out.extend(ends[a:b])
    return out


class FleetResult:
    """What a fleet run produced: `summary()` has every `simulate` key (over the whole fleet) plus `fleet`."""

    def __init__(self, fleet: Fleet, workload: Workload, sla: SLA | None, wall_s: float):
        self.fleet = fleet
        self.sla = sla
        self.workload = workload
        self.wall_s = wall_s
        spec = fleet.spec
        self.bounded = fleet.bounded
        records: list[RequestRecord] = []
        firsts: list[Request] = []
        phases = np.full((workload.num_requests, len(PHASES)), np.nan)
        for rid, rs in enumerate(workload.requests if fleet.bounded is None else ()):
            legs = fleet.legs.get(rid)
            error = fleet.failed.get(rid)
            if legs is None:
                req = Request(request_id=rid, arrival_at=rs.arrival_at, num_prompt_tokens=rs.input_tokens,
                              max_tokens=rs.output_tokens, prefix_id=rs.prefix_id, num_prefix_tokens=rs.prefix_tokens)
                firsts.append(req)
                records.append(RequestRecord(request_id=rid, arrival_at=rs.arrival_at, input_tokens=rs.input_tokens,
                                             output_tokens=rs.output_tokens, error=error or "unavailable",
                                             error_kind=error or "unavailable"))
                continue
            head = legs[0].req
            firsts.append(head)
            if error is not None:
                records.append(RequestRecord(request_id=rid, arrival_at=head.arrival_at, input_tokens=rs.input_tokens,
                                             output_tokens=rs.output_tokens, first_scheduled_at=head.first_scheduled_at,
                                             token_times=[], preemptions=head.num_preemptions, error=error,
                                             error_kind=error))
                continue
            tl0 = legs[0].replica.tl
            # opening tokens its client receives no text for (`frontend.hidden_tokens`), as `BoundedRecords.add`
            # drops them: the last one always shows; after a hand-off, the hand-off's token is the first of them
            hidden = legs[-1].replica.hidden_tokens
            fe = legs[-1].replica.dep.engine.frontend  # the server the client streams from
            interval = 1 if fe is None else fe.stream_interval
            shown = 0 if interval > 1 else hidden  # chunked: the events are cut on the engine's own count first
            pre = head.num_preemptions
            if spec.is_disaggregated and rs.output_tokens > 1:
                dec = legs[1].req
                handoff = fleet.handoff_at[rid]
                tl1 = legs[1].replica.tl
                times = (_token_times(visible_steps(dec.token_steps, shown - 1), tl1) if shown
                         else [handoff] + _token_times(dec.token_steps, tl1))
                pre += dec.num_preemptions
                last = dec.token_steps[-1] - 1
                delivered = tl1.delivered_at if len(tl1.delivered_at) else tl1.step_end_at
                scheduled = head.first_scheduled_at
                assert scheduled is not None  # it produced its first token, so it was scheduled
                phases[rid] = np.array([*head.entry_s(scheduled), handoff - scheduled, tl1.step_end_at[last] - handoff,
                                        delivered[last] - tl1.step_end_at[last]], dtype=float) * 1e3
            else:
                times = _token_times(visible_steps(head.token_steps, shown), tl0)
                if head.token_steps and head.first_scheduled_at is not None:
                    ends = tl0.step_end_at
                    delivered = tl0.delivered_at if len(tl0.delivered_at) else ends
                    s = head.token_steps
                    first, last = s[0], s[-1] - 1
                    at = head.first_scheduled_at
                    phases[rid] = np.array((*head.entry_s(at), ends[first] - at, ends[last] - ends[first],
                                            delivered[last] - ends[last])) * 1e3
            dl = head.deadline_at
            late = dl is not None and bool(times) and times[-1] > dl  # finished within the step that passed it
            if late:
                times = [t for t in times if dl is None or t <= dl]
            chunks = None
            if interval > 1:
                assert fe is not None
                times, chunks = stream_events(times, interval, first_alone=fe.stream_first_alone, hidden=hidden,
                                              complete=not late)
            elif legs[-1].replica.dep.speculative is not None and times:  # a step's tokens: one event (simulate's)
                times, chunks = step_events(times)
            records.append(RequestRecord(request_id=rid, arrival_at=head.arrival_at,
                                         input_tokens=head.num_prompt_tokens, output_tokens=rs.output_tokens,
                                         first_scheduled_at=head.first_scheduled_at, token_times=times,
                                         preemptions=pre, error="timeout" if late else None,
                                         error_kind="timeout" if late else None, chunk_tokens=chunks))
        self.records = records
        self.requests = firsts
        self.phases = phases

    def timelines(self) -> list[Timeline]:
        out = []
        for m in self.fleet.members:
            for rep in (*m.past, m.replica):
                out.append(rep.timeline())
        return out

    def _sim_result(self) -> SimResult:
        main = self.fleet.spec.pool("decode") if self.fleet.spec.is_disaggregated else self.fleet.spec.pools[0]
        return SimResult(deployment=main.deployment, workload=self.workload,
                         config=self.fleet.config.resolved(main.deployment), records=self.records,
                         timelines=self.timelines(), requests=self.requests, phases=self.phases, sla=self.sla,
                         wall_s=self.wall_s)

    def metrics(self) -> RunSummary:
        """The fleet's latency, throughput and SLA figures over every request."""
        return self._sim_result().metrics() if self.bounded is None else self.bounded.summarize(self.sla)

    def report(self) -> SimSummary:
        """`simulate`'s typed summary over the whole fleet (the decode pool's deployment as its setup); request
        classes are summarised with exact metrics only."""
        b = self.bounded
        if b is None:
            return self._sim_result().report()
        spec = self.fleet.spec
        main = spec.pool("decode") if spec.is_disaggregated else spec.pools[0]
        hit = b.num_cached_tokens / b.num_prompt_tokens if b.num_prompt_tokens else 0.0
        return sim_summary(main.deployment, self.workload, self.fleet.config.resolved(main.deployment),
                           self.timelines(), b.phases, b.summarize(self.sla), hit, self.wall_s)

    def summary(self) -> dict[str, Any]:
        fleet, spec = self.fleet, self.fleet.spec
        b = self.bounded
        out = self.report().to_dict()
        # the run: to its last completion, its last arrival or the last step a replica ran (requests that timed
        # out after the last completion kept the replicas busy), whichever is latest; not to the fleet's clock,
        # which a replica still cold when the traffic ended carries on to its ready time
        end = self.workload.requests[0].arrival_at + out["duration_s"] if self.records else 0.0
        last_step = max((r.tl.step_end_at[-1] for m in fleet.members for r in (*m.past, m.replica)
                         if len(r.tl.step_end_at)), default=0.0)
        end = max(end, self.workload.requests[-1].arrival_at, last_step)
        gpu_s = sum(m.gpu_seconds(end) for m in fleet.members)
        cost = sum(m.gpu_seconds(end) / 3600 * (m.pool.deployment.hardware.price_per_hour_usd or 0.0)
                   for m in fleet.members)
        out["setup"]["num_gpus"] = spec.num_gpus
        out["setup"]["replicas"] = spec.num_replicas
        out["fleet"] = {
            "router": spec.router,
            "serving": "disaggregated" if spec.is_disaggregated else "aggregated",
            "pools": [_pool_summary(p, fleet, end) for p in spec.pools],
            "replicas": [_member_summary(m, self, end) for m in fleet.members],
            "gpu_hours": gpu_s / 3600,
            "cost_usd": cost,
            "cost_per_million_output_tokens_usd": cost / (out["output_tokens_per_s"] * out["duration_s"]) * 1e6
            if out["output_tokens_per_s"] else None,
            "kv_transfer": _transfer_summary(fleet) if spec.is_disaggregated else None,
            "autoscale": fleet.autoscaler.summary(end) if fleet.autoscaler is not None else None,
            "metrics": "exact" if b is None else "bounded",
        }
        return out

    def rows(self) -> list[dict[str, Any]]:
        if self.bounded is not None:
            return self.bounded.rows()
        rows = []
        for rec, req in zip(self.records, self.requests, strict=True):
            row = rec.to_row()
            row["cached_tokens"] = req.num_cached_tokens
            legs = self.fleet.legs.get(rec.request_id)
            row["replica"] = legs[-1].member if legs else None
            rows.append(row)
        return rows


def _pool_summary(p: PoolSpec, fleet: Fleet, end: float) -> dict[str, Any]:
    d = p.deployment
    members = [m for m in fleet.members if m.pool is p]
    return {"name": p.name, "role": p.role, "gpu": d.hardware.id, "tp": d.tp, "pp": d.pp, "dp": d.dp, "ep": d.ep,
            "replicas": len(members), "gpus_per_replica": d.gpus_per_replica,
            "max_num_seqs": d.max_num_seqs, "max_num_batched_tokens": d.max_num_batched_tokens,
            "gpu_hours": sum(m.gpu_seconds(end) for m in members) / 3600}


def _member_summary(m: Member, res: FleetResult, end: float) -> dict[str, Any]:
    reps = (*m.past, m.replica)
    busy = sum(float(np.frombuffer(r.tl.sample_s, dtype=float).sum()) for r in reps)
    up = m.up_seconds(end)
    kv = [np.frombuffer(r.tl.kv_usage, dtype=float) for r in reps]
    w = [np.frombuffer(r.tl.sample_s, dtype=float) for r in reps]
    kvv, ww = np.concatenate(kv), np.concatenate(w)
    if res.bounded is not None:
        pct = res.bounded.replica_percentiles(m.index)
        ttft_mean, ttft_p95 = None, pct["ttft_ms_p95"]
    else:
        ttft = [rec.ttft_ms for rec in res.records if rec.ok and (legs := res.fleet.legs.get(rec.request_id))
                and legs[-1].member == m.index]
        ttft_mean = float(np.mean(ttft)) if ttft else None
        ttft_p95 = float(np.percentile(ttft, 95)) if ttft else None
    return {"index": m.index, "pool": m.pool.role, "state": m.state, "num_requests": m.num_routed,
            "started_at": m.started_at, "stopped_at": m.stopped_at,
            "busy_fraction": busy / up if up else 0.0,
            "kv_utilization_mean": float((kvv * ww).sum() / ww.sum()) if ww.sum() else 0.0,
            "num_steps": sum(r.tl.num_steps for r in reps),
            "ttft_ms_mean": ttft_mean, "ttft_ms_p95": ttft_p95}


def _transfer_summary(fleet: Fleet) -> dict[str, Any]:
    t = np.asarray(fleet.transfer_ms)
    kinds = sorted({s.kind for s in fleet.links.values()})
    return {"link": ",".join(kinds) or None, "num_transfers": int(t.size),
            "bytes_mean": fleet.transfer_bytes / t.size if t.size else 0.0,
            "ms_mean": float(t.mean()) if t.size else None,
            "ms_p95": float(np.percentile(t, 95)) if t.size else None,
            "layerwise": fleet.spec.layerwise}
