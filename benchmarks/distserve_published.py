"""DistServe's worked example of disaggregation (OPT-13B on A100s), simulated beside the published numbers.

    python benchmarks/distserve_published.py [--engine vllm@0.3.0] [--frontends none,http]

Published (DistServe, Zhong et al., OSDI'24, Figure 1 and its text; the authors' blog post
hao-ai-lab.github.io/blogs/distserve): a 13B model (OPT-13B, FP16) on A100-80GB GPUs, every request 512 tokens in
and 64 out, Poisson arrivals, SLO P90 TTFT <= 0.4 s and P90 TPOT <= 0.04 s. Served colocated (vLLM, one GPU) it
meets both up to about 1.6 req/s (the TPOT bound binds; about 3 req/s would meet the TTFT bound alone). One GPU
that only prefills serves about 5.6 req/s within the TTFT bound and one that only decodes about 10 within the TPOT
bound, so 2 prefill + 1 decode GPUs (2P1D) serve min(2 x 5.6, 10) = 10 req/s: 3.3 req/s per GPU, 2.1x the
colocated GPU.

Here each layout's highest sustained rate is found by the sustained-rate rule (`simulate --find-max-rate`: after
a warm-up, over a window long enough in requests and time, SLA met and no growing backlog) on
    colocated   one replica of TP 1 (`--engine`, by default the vLLM of early 2024 that DistServe compared with);
    1P1D        one prefill and one decode replica: the prefill GPU binds, so its rate is the prefill worker's;
    2P1D        two prefill replicas and one decode replica: the decode GPU binds, so its rate is the decode
                worker's;
with the KV moved over the node's NVLink. Each published figure is a read-off of the paper's plot (about 5-10%).
"""

from __future__ import annotations

import argparse
import time

import flopwise
from flopwise.specs.sla import parse_sla

MODEL, GPU = "opt-13b", "a100-sxm-80gb"
SLA = "p90_ttft<=400ms,p90_tpot<=40ms"
PUBLISHED = {"colocated": (1, 1.6), "prefill=1xtp1,decode=1xtp1": (2, 5.6), "prefill=2xtp1,decode=1xtp1": (3, 10.0)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--engine", default="vllm@0.3.0")
    ap.add_argument("--frontends", default="none,http", help="comma-separated: none (the engine alone), http")
    args = ap.parse_args()
    for frontend in args.frontends.split(","):
        run(args.engine, frontend.strip())


def run(engine: str, frontend: str) -> None:
    print(f"OPT-13B fp16 on A100-80GB, 512 in / 64 out, Poisson, {SLA}, engine {engine}, frontend {frontend}")
    print(f"{'layout':30s} {'GPUs':>4s} {'published req/s':>15s} {'simulated req/s':>22s} {'per GPU':>16s}  binds")
    per_gpu = {}
    for layout, (gpus, published) in PUBLISHED.items():
        t0 = time.perf_counter()
        kw = {} if layout == "colocated" else {"disaggregate": layout}
        sim = flopwise.simulate(MODEL, GPU, weights="fp16", kv="fp16", engine=engine, frontend=frontend,
                                input_len=512, output_len=64, sla=SLA, find_max_rate=True, seed=0, **kw)
        found = sim.summary["max_rate"]
        rate = found["request_rate"]
        lo, hi = found["request_rate_interval"]
        met = sim.summary.get("sla_objectives_met") or {}
        fails = [p for p in found["probe_details"] if not p["sustained"] and p["request_rate"] > rate]
        binds = "-"
        if fails:  # the objectives over their limits in the first failing probe above the answer
            first = min(fails, key=lambda p: p["request_rate"])
            over = [k for k, v in first["objectives_ms"].items()
                    if v is not None and v > parse_sla(k).objectives[0].limit_ms]
            binds = ",".join(over) or "backlog"
        per_gpu[layout] = (rate / gpus, published / gpus)
        print(f"{layout:30s} {gpus:4d} {published:15.1f} {rate:8.2f} [{lo:5.2f}, {hi:5.2f}] "
              f"{rate / gpus:6.2f} ({published / gpus:4.2f})  {binds}  ({time.perf_counter() - t0:.0f} s)"
              + ("" if all(met.values()) else "  (window misses the SLA)"))
    sim_ratio = per_gpu["prefill=2xtp1,decode=1xtp1"][0] / per_gpu["colocated"][0]
    pub_ratio = per_gpu["prefill=2xtp1,decode=1xtp1"][1] / per_gpu["colocated"][1]
    print(f"2P1D per GPU / colocated per GPU: simulated {sim_ratio:.2f}x, published {pub_ratio:.2f}x")


if __name__ == "__main__":
    main()
