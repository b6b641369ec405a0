"""Simulator speed: 10,000 `chat` requests on one H100 (Llama-3.1-8B, vLLM server defaults).

    python benchmarks/sim_speed.py [--num-requests 10000] [--rates 4,20,inf] [--repeats 3]

Target (issue 3): under 2 s per run on a 2-core machine. Prints wall time, requests simulated per second,
engine steps and the cost-model calls saved by fast-forwarding decode runs. On a shared machine the wall time
is the minimum of --repeats runs, printed with the 1-minute load average.
"""

from __future__ import annotations

import argparse
import math
import os
import time

from flopwise.api import deployment
from flopwise.sim import simulate
from flopwise.specs.hardware import get_hardware
from flopwise.workload import build_workload


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--num-requests", type=int, default=10_000)
    ap.add_argument("--rates", default="4,20,inf", help="comma-separated request rates (req/s, or inf)")
    ap.add_argument("--repeats", type=int, default=3, help="runs per rate; the fastest is reported")
    args = ap.parse_args()
    hw = get_hardware("h100-sxm")
    dep = deployment("llama-3.1-8b", hw)
    simulate(dep, build_workload(num_requests=50, workload="chat", seed=0))  # warm the layout caches
    for text in args.rates.split(","):
        rate = math.inf if text.strip() == "inf" else float(text)
        wl = build_workload(num_requests=args.num_requests, workload="chat", request_rate=rate, seed=0)
        wall = math.inf
        for _ in range(args.repeats):
            t0 = time.perf_counter()
            s = simulate(dep, wl).summary()
            wall = min(wall, time.perf_counter() - t0)
        print(f"rate {text:>4} req/s: {args.num_requests} chat requests in {wall:5.2f} s "
              f"({args.num_requests / wall:,.0f} requests/s simulated; {s['num_steps']:,} engine steps, "
              f"{s['duration_s']:,.0f} s simulated; p50 TTFT {s['ttft_ms']['p50']:.0f} ms, "
              f"p50 TPOT {s['tpot_ms']['p50']:.1f} ms; load average {os.getloadavg()[0]:.1f})")


if __name__ == "__main__":
    main()
