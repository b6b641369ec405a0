"""Planner timing and the side-by-side case.

    python benchmarks/plan_speed.py

1. The default plan (Llama-3.1-8B, chat, p95 TTFT <= 300 ms and TPOT <= 50 ms, common GPUs): target < 5 s.
2. A large space (5 GPU types, TP 1-8, 3 weight and 2 KV formats, 3 max_num_seqs, 2 token budgets: hundreds of
   candidates): target < 60 s.
3. Qwen3-32B on up to 8 x H200, input 4000 / output 500 tokens, TTFT <= 300 ms, TPOT <= 50 ms (aggregated
   serving): the best config, its tokens/s per GPU and per user, and the wall time.
"""

from __future__ import annotations

import time

from rich.console import Console
from rich.table import Table

from flopwise.plan.search import PlanRequest, plan, plan_to_dict
from flopwise.plan.space import SearchSpace

CASES = {
    "default plan": PlanRequest(),
    "large space": PlanRequest(space=SearchSpace(gpus=("h100-sxm", "h200", "a100-sxm-80gb", "l40s", "b200"),
                                                 tps=(1, 2, 4, 8), weights=("bf16", "fp8", "int4-awq"),
                                                 kvs=("bf16", "fp8"), max_num_seqs=(64, 256, 1024),
                                                 max_num_batched_tokens=(2048, 8192))),
    "qwen3-32b 8xH200 4000/500": PlanRequest(model="qwen3-32b", input_len=4000, output_len=500,
                                             sla="p95_ttft<=300ms,p95_tpot<=50ms",
                                             space=SearchSpace(gpus=("h200",), max_gpus=8, tps=(1, 2, 4, 8),
                                                               weights=("bf16", "fp8"), kvs=("bf16", "fp8"))),
}


def main() -> None:
    t = Table(title="flopwise plan speed (this machine)")
    for c in ("case", "candidates", "simulated", "wall (s)", "best", "out tok/s/GPU", "tok/s/user", "P95 TTFT", "P95 TPOT"):
        t.add_column(c)
    for name, req in CASES.items():
        t0 = time.perf_counter()
        d = plan_to_dict(plan(req))
        wall = time.perf_counter() - t0
        b = d["best"]
        t.add_row(name, str(d["num_candidates"]), str(d["num_simulated"]), f"{wall:.1f}", b["config"],
                  f"{b['output_tokens_per_s_per_gpu']:,.0f}", f"{b['tokens_per_s_per_user']:.0f}",
                  f"{b['p95_ttft_ms']:.0f} ms", f"{b['p95_tpot_ms']:.1f} ms")
    Console(width=200).print(t)


if __name__ == "__main__":
    main()
