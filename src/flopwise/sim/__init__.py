"""A discrete-event simulator of an LLM serving engine, priced step by step by `cost.step_time`.

    workload ──► arrivals ──► scheduler (vLLM/SGLang/static) ──► step shape ──► cost.step_time ──► records
                                  │  ▲
                                  ▼  │
                            block manager (paged KV, prefix cache, LRU eviction)

Modules: `request.py` (one request's state), `block_manager.py` (KV blocks), `base.py` + `scheduler.py` +
`static_scheduler.py` + `sglang_scheduler.py` (what runs next; SGLang's knobs in `sglang_knobs.py`),
`shape.py` (the step record for the cost model), `decode_run.py`
(fast-forwarding identical decode steps), `arrivals.py` (open and closed loops), `replica.py` (one replica as a
steppable engine: admit, next event, step; what `cluster/` drives), `engine.py` (the one-replica loop over it),
`timeline.py` (engine state over time), `simulate.py` (replicas, records, summary), `max_rate.py` (the highest
rate meeting an SLA), `config.py` (scheduler options), `frontend.py` (the API server stage), `breakdown.py`
(where time went), `acceptance.py`
(speculative decoding: the tokens each verified decode emits; its step cost is `cost/speculative.py`).
"""

from flopwise.sim.config import SCHEDULERS, SimConfig
from flopwise.sim.max_rate import MaxRate, find_max_rate
from flopwise.sim.simulate import SimResult, simulate

__all__ = ["SimConfig", "SCHEDULERS", "SimResult", "simulate", "find_max_rate", "MaxRate"]
