"""vLLM v1 vs SGLang-like vs static batching on the `chat` workload: the same request stream at a few Poisson
rates, each scheduler with its own server's default knobs on the deployment.

    .venv/bin/python benchmarks/scheduler_compare.py [--num-requests 2000] [--rates 4,10,16,20]

Columns: TTFT p50/p95 and ITL p95 (ms, every inter-token gap of every request), output tokens/s, retractions
or preemptions, and the mean running batch. `sglang-lpm` is SGLang with `--schedule-policy lpm` (its
default in older releases), `sglang-mixed` with `--enable-mixed-chunk`.
"""

from __future__ import annotations

import argparse

from flopwise.api import deployment
from flopwise.sim import SimConfig, simulate
from flopwise.sim.sglang_knobs import SglangKnobs
from flopwise.specs.hardware import get_hardware
from flopwise.workload import build_workload

CONFIGS = {
    "vllm": SimConfig(),
    "sglang": SimConfig(scheduler="sglang"),
    "sglang-lpm": SimConfig(scheduler="sglang", sglang=SglangKnobs(schedule_policy="lpm")),
    "sglang-mixed": SimConfig(scheduler="sglang", sglang=SglangKnobs(enable_mixed_chunk=True)),
    "static": SimConfig(scheduler="static"),
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="llama-3.1-8b")
    ap.add_argument("--gpu", default="h100-sxm")
    ap.add_argument("--num-requests", type=int, default=2000)
    ap.add_argument("--rates", default="4,10,16,20", help="comma-separated request rates (req/s)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    hw = get_hardware(args.gpu)
    dep = deployment(args.model, hw)
    print(f"{args.model} on {args.gpu}, {args.num_requests} chat requests per rate (seed {args.seed})")
    print("| rate | scheduler    | TTFT p50 ms | TTFT p95 ms | ITL p95 ms | output tok/s | preemptions | batch |")
    print("|-----:|--------------|------------:|------------:|-----------:|-------------:|------------:|------:|")
    for text in args.rates.split(","):
        rate = float(text)
        wl = build_workload(num_requests=args.num_requests, workload="chat", request_rate=rate, seed=args.seed)
        for name, config in CONFIGS.items():
            s = simulate(dep, wl, config).summary()
            print(f"| {rate:4g} | {name:<12} | {s['ttft_ms']['p50']:11,.0f} | {s['ttft_ms']['p95']:11,.0f} | "
                  f"{s['itl_ms']['p95']:10,.1f} | {s['output_tokens_per_s']:12,.0f} | {s['preemptions']:11d} | "
                  f"{s['running_batch']['mean']:5.0f} |")


if __name__ == "__main__":
    main()
