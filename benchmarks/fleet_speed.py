"""Fleet simulator speed and memory: chat requests over many replicas behind a router, bounded metrics.

    python benchmarks/fleet_speed.py [--num-requests 1000000] [--replicas 32] [--rate-per-replica 10]
                                     [--router round-robin,least-outstanding] [--metrics bounded] [--workers N]

Target (issue 15): one million requests over 32 replicas in under 60 s on this 2-core machine, in under 2 GB.
Runs each router in turn: round-robin (the fleet's default) splits exactly into shards simulated on every core
(`cluster/shards.py`; --workers 1 runs it in one process), least-outstanding reads every replica's load at each
arrival and runs in one process. Prints the wall time (build of the workload apart) and the CPU time of this
process during the simulation, requests simulated per second, engine steps, the peak resident memory of this
process and of the largest shard process, and the run's headline percentiles.
"""

from __future__ import annotations

import argparse
import os
import resource
import time

from flopwise.api import deployment
from flopwise.cluster import simulate_fleet
from flopwise.cluster.build import build_cluster
from flopwise.workload import build_workload


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--num-requests", type=int, default=1_000_000)
    ap.add_argument("--replicas", type=int, default=32)
    ap.add_argument("--rate-per-replica", type=float, default=10.0, help="req/s offered per replica")
    ap.add_argument("--router", default="round-robin,least-outstanding", help="comma-separated, run in turn")
    ap.add_argument("--metrics", default="bounded", choices=("auto", "exact", "bounded"))
    ap.add_argument("--workers", type=int, default=None, help="processes (default: one per core where it splits)")
    args = ap.parse_args()
    for router in args.router.split(","):
        run(args, router.strip())


def run(args: argparse.Namespace, router: str) -> None:
    spec = build_cluster(lambda tp, n: deployment("llama-3.1-8b", "h100-sxm", tp=tp, num_gpus=tp * n), tp=1,
                         replicas=args.replicas, router=router)
    t0 = time.perf_counter()
    wl = build_workload(num_requests=args.num_requests, workload="chat",
                        request_rate=args.rate_per_replica * args.replicas, seed=0)
    t1, c1 = time.perf_counter(), time.process_time()
    res = simulate_fleet(spec, wl, metrics=args.metrics, workers=args.workers)
    t2, c2 = time.perf_counter(), time.process_time()
    s = res.summary()
    t3 = time.perf_counter()
    rss_gib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / 2**30
    child_gib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024 / 2**30
    print(f"{args.num_requests:,} chat requests over {args.replicas} replicas ({router}, {args.metrics} "
          f"metrics): workload {t1 - t0:.1f} s, simulation {t2 - t1:.1f} s ({c2 - c1:.1f} s CPU), "
          f"summary {t3 - t2:.1f} s "
          f"({args.num_requests / (t2 - t1):,.0f} requests/s simulated; {s['num_steps']:,} engine steps, "
          f"{s['duration_s']:,.0f} s simulated); peak RSS so far {rss_gib:.2f} GiB (shard processes: "
          f"{child_gib:.2f} GiB); p50 TTFT {s['ttft_ms']['p50']:.0f} ms, "
          f"p50 TPOT {s['tpot_ms']['p50']:.1f} ms, p99 ITL {s['itl_ms']['p99']:.1f} ms; "
          f"load average {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
