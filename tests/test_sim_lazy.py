"""The vLLM scheduler's lazy decode count (`sim/scheduler.py`) changes how fast a run is simulated, never what it
gives: on random request streams, engines and pool sizes (chunked prefill on and off, shared prefixes, preemption,
budget cuts, an API server or none), every request's token instants, preemptions and cache hits, and every step's
end, equal those of the exact per-request loop, to the bit."""

from __future__ import annotations

from functools import cache

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from flopwise.api import deployment
from flopwise.errors import WorkloadError
from flopwise.sim import SimConfig, simulate
from flopwise.sim import replica as replica_mod
from flopwise.specs.deployment import Deployment
from flopwise.workload import RequestSpec, Workload


@cache
def _dep(kind: str) -> Deployment:
    if kind == "roomy":  # no memory pressure, API server, a step planned ahead (vLLM >= 0.14)
        return deployment("llama-3.1-8b", "h100-sxm", max_num_batched_tokens=2048)
    if kind == "tight":  # 343 blocks (5,488 tokens) on an L4: preemption by recompute, chunking budget cuts
        return deployment("llama-3.1-8b", "l4", gpu_memory_utilization=0.74, max_num_batched_tokens=256,
                          max_num_seqs=16, frontend="none", engine="vllm@0.13")
    return deployment("llama-3.1-8b", "a100-sxm-80gb", max_num_batched_tokens=512, max_num_seqs=8, engine="vllm@0.13")


@st.composite
def _streams(draw: st.DrawFn) -> tuple[str, Workload, SimConfig]:
    kind = draw(st.sampled_from(["roomy", "tight", "few-seqs"]))
    n = draw(st.integers(1, 40))
    groups = draw(st.integers(0, 3))
    prefix = draw(st.integers(0, 600))
    rate = draw(st.one_of(st.just(0.0), st.floats(2.0, 200.0)))
    gaps = draw(st.lists(st.floats(0.0, 1.0), min_size=n, max_size=n))
    t, specs = 0.0, []
    for i in range(n):
        inp = draw(st.integers(1, 1500))
        out = draw(st.integers(1, 300))
        t += gaps[i] / rate if rate else 0.0
        g = draw(st.integers(0, groups - 1)) if groups else None
        specs.append(RequestSpec(arrival_at=t, input_tokens=inp, output_tokens=out, prefix_id=g,
                                 prefix_tokens=min(prefix, inp) if g is not None else 0))
    config = SimConfig(enable_chunked_prefill=draw(st.booleans()), enable_prefix_caching=draw(st.booleans()))
    return kind, Workload(tuple(specs)), config


def _outcome(dep: Deployment, wl: Workload, config: SimConfig) -> object:
    try:
        res = simulate(dep, wl, config)
    except WorkloadError as e:  # a request the pool or the budget can never serve: both must refuse it alike
        return str(e)
    timelines = [(list(tl.step_end_at), list(tl.sample_at), list(tl.sample_s), list(tl.num_running),
                  list(tl.num_waiting), list(tl.kv_usage)) for tl in res.timelines]
    return ([(r.token_times, r.preemptions, r.first_scheduled_at) for r in res.records],
            [q.num_cached_tokens for q in res.requests], timelines)


def _exact_outcome(dep: Deployment, wl: Workload, config: SimConfig) -> object:
    original = replica_mod.Replica.__init__

    def exact(self: replica_mod.Replica, *args: object, **kwargs: object) -> None:
        original(self, *args, **kwargs)  # type: ignore[arg-type]
        self.sched.lazy_decodes = False  # type: ignore[attr-defined]

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(replica_mod.Replica, "__init__", exact)
        return _outcome(dep, wl, config)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_streams())
def test_lazy_decodes_change_nothing(case: tuple[str, Workload, SimConfig]) -> None:
    kind, wl, config = case
    dep = _dep(kind)
    assert _outcome(dep, wl, config) == _exact_outcome(dep, wl, config)


def test_lazy_decodes_are_on_for_a_plain_vllm_replica_and_off_under_speculation() -> None:
    assert replica_mod.Replica(_dep("roomy"), SimConfig()).sched.lazy_decodes  # type: ignore[attr-defined]
    spec = deployment("llama-3.1-8b", "h100-sxm", speculative="eagle,k=3,accepted=2.6")
    assert not replica_mod.Replica(spec, SimConfig()).sched.lazy_decodes  # type: ignore[attr-defined]


@pytest.mark.parametrize("big", range(4920, 5400, 120))  # 5,160 and 5,280 evict part of the prefixes
def test_requests_finishing_together_free_their_prefixes_in_running_order(big: int) -> None:
    # A (prefix group 0) and B (group 1) finish in the same step, A first in running order, so A's cached prefix
    # goes to the free queue first; C's prompt then evicts some of those blocks, and D (group 0) and E (group 1)
    # show by their cache hits which prefix was evicted first (lazy and exact must agree for every size of C)
    dep = _dep("tight")
    wl = Workload((RequestSpec(arrival_at=0.0, input_tokens=160, output_tokens=6, prefix_id=0, prefix_tokens=160),
                   RequestSpec(arrival_at=0.0, input_tokens=160, output_tokens=5, prefix_id=1, prefix_tokens=160),
                   RequestSpec(arrival_at=1.0, input_tokens=big, output_tokens=2),
                   RequestSpec(arrival_at=5.0, input_tokens=200, output_tokens=2, prefix_id=0, prefix_tokens=160),
                   RequestSpec(arrival_at=5.0, input_tokens=200, output_tokens=2, prefix_id=1, prefix_tokens=160)))
    lazy = _outcome(dep, wl, SimConfig())
    assert lazy == _exact_outcome(dep, wl, SimConfig())
