"""Fleet simulator speed and memory: chat requests over many replicas behind a router, bounded metrics.

    python benchmarks/fleet_speed.py [--num-requests 1000000] [--replicas 32] [--rate-per-replica 10]
                                     [--router least-outstanding] [--metrics bounded]

Target (issue 15): one million requests over 32 replicas in under 60 s on this 2-core machine, in under 2 GB.
Prints the wall time (build of the workload apart) and the CPU time of the simulation (which other jobs on the
cores stretch less than the wall time), requests simulated per second, engine steps, the peak resident memory
of the process, and the run's headline percentiles.
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
    ap.add_argument("--router", default="least-outstanding")
    ap.add_argument("--metrics", default="bounded", choices=("auto", "exact", "bounded"))
    args = ap.parse_args()
    spec = build_cluster(lambda tp, n: deployment("llama-3.1-8b", "h100-sxm", tp=tp, num_gpus=tp * n), tp=1,
                         replicas=args.replicas, router=args.router)
    t0 = time.perf_counter()
    wl = build_workload(num_requests=args.num_requests, workload="chat",
                        request_rate=args.rate_per_replica * args.replicas, seed=0)
    t1, c1 = time.perf_counter(), time.process_time()
    res = simulate_fleet(spec, wl, metrics=args.metrics)
    t2, c2 = time.perf_counter(), time.process_time()
    s = res.summary()
    t3 = time.perf_counter()
    rss_gib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / 2**30
    print(f"{args.num_requests:,} chat requests over {args.replicas} replicas ({args.router}, {args.metrics} "
          f"metrics): workload {t1 - t0:.1f} s, simulation {t2 - t1:.1f} s ({c2 - c1:.1f} s CPU), "
          f"summary {t3 - t2:.1f} s "
          f"({args.num_requests / (t2 - t1):,.0f} requests/s simulated; {s['num_steps']:,} engine steps, "
          f"{s['duration_s']:,.0f} s simulated); peak RSS {rss_gib:.2f} GiB; p50 TTFT {s['ttft_ms']['p50']:.0f} ms, "
          f"p50 TPOT {s['tpot_ms']['p50']:.1f} ms, p99 ITL {s['itl_ms']['p99']:.1f} ms; "
          f"load average {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
