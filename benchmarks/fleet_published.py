"""Aggregated vs disaggregated Qwen3-32B on 8 x H200 (4000 in / 500 out), beside the published answers.

    python benchmarks/fleet_published.py [--tpot-ms 50] [--num-requests 200] [--layouts all|short]

Published: NVIDIA's aiconfigurator README (32 x H200, TTFT <= 300 ms, TPOT <= 10 ms, 500-token prefix):
disaggregated 1.64x the tokens/s per GPU of aggregated; on 8 x H200 at >= 60 tokens/s per user (TPOT <= 16.7
ms), aiconfigurator 0.4.0 predicts 739 vs 687 tokens/s/GPU (1.08x; a Dynamo tuning guide claims 2.0-2.5x);
DistServe (OSDI'24) 4.48x more requests within SLO (or 10.2x tighter SLOs), Splitwise (ISCA'24) 1.4x throughput
at 20% lower cost (or 2.35x at the same cost and power). Every fleet here runs FP8 weights and KV, the vLLM
profile behind its API server, a least-outstanding router, KV over NVLink within the 8-GPU node.
"""

from __future__ import annotations

import argparse
import time

from flopwise.api import deployment
from flopwise.plan.fleet import candidate_layouts, fleet_plan_to_dict, plan_fleet
from flopwise.specs.sla import parse_sla
from flopwise.workload import build_workload

EXTRA = ("prefill=6xtp1,decode=1xtp2", "prefill=5xtp1,decode=3xtp1", "prefill=4xtp1,decode=2xtp2",
         "prefill=3xtp2,decode=2xtp1")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--tpot-ms", type=float, default=50.0)
    ap.add_argument("--ttft-ms", type=float, default=300.0)
    ap.add_argument("--num-requests", type=int, default=200)
    args = ap.parse_args()

    def make(tp: int, n: int):
        return deployment("qwen3-32b", "h200", tp=tp, num_gpus=tp * n, weights="fp8", kv="fp8")

    def workload_at(rate: float, n: int | None = None):
        return build_workload(num_requests=n or args.num_requests, input_len=4000, output_len=500, request_rate=rate,
                              seed=0)

    sla = parse_sla(f"p95_ttft<={args.ttft_ms:g}ms,p95_tpot<={args.tpot_ms:g}ms")
    t0 = time.perf_counter()
    layouts = candidate_layouts(8, ("aggregated", "disaggregated"), max_disaggregated=10)
    layouts += [("disaggregated", t) for t in EXTRA if ("disaggregated", t) not in layouts]  # prefill-heavy splits
    cands = plan_fleet(make, 8, workload_at, sla, layouts=layouts)
    cands.sort(key=lambda c: -c.output_tokens_per_s_per_gpu)
    d = fleet_plan_to_dict(cands, None)
    print(f"Qwen3-32B fp8 on 8 x H200, 4000 in / 500 out, {sla}: ({time.perf_counter() - t0:.0f} s)")
    for r in d["candidates"]:
        user = r["tokens_per_s_per_user"]
        print(f"  {r['serving']:13s} {r['layout']:28s} {r['max_request_rate']:6.2f} req/s "
              f"{r['output_tokens_per_s_per_gpu']:7.1f} tok/s/GPU {'-' if user is None else f'{user:5.1f}'} tok/s/user "
              f"binds {r['binding'] or '-'}")
    ratio = d["disaggregated_over_aggregated"]
    print(f"winner: {d['winner']}; best disaggregated / best aggregated = "
          f"{'-' if ratio is None else f'{ratio:.2f}'}")


if __name__ == "__main__":
    main()
