"""Fleets of replicas above `sim/`: routers, disaggregated prefill/decode, replicas leaving, autoscaling.

    workload ──► router ──► replica (sim.Replica: admit / next event / step) ──► records ──► summary
                   │            ▲ one event heap over every replica (events.py)
                   └─ disaggregated: prefill pool ──► KV over a link (cost/transfer.py) ──► decode pool

Modules: `events.py` (the heap and its ranks), `router.py` (round-robin, least outstanding, least KV,
prefix-aware, session affinity), `fleet.py` (the loop, hand-offs, replica events, the fleet's summary),
`autoscale.py` (the autoscaler and cold starts), `build.py` (a ClusterSpec from command-line forms),
`shards.py` (`simulate_fleet`: a fleet whose routing is fixed in advance split over several cores).
"""

from flopwise.cluster.fleet import Fleet, FleetResult
from flopwise.cluster.router import ROUTERS
from flopwise.cluster.shards import simulate_fleet

__all__ = ["Fleet", "FleetResult", "simulate_fleet", "ROUTERS"]
