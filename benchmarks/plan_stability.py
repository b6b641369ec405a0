"""Does the plan's first choice depend on the random seed? The default plan and Qwen3-32B on up to 8 x H200
under 5 seeds each: the first choice, its objective value with its interval, its tie group, the wall time.

    python benchmarks/plan_stability.py [--seeds 5] [--case default|qwen3-32b] [--json out.json]

What to look for: one first choice for every seed whenever its tie group is that config alone (the intervals
separate); where a seed shows a tie, the tie group's sample-free order (GPUs per replica, accuracy risk,
closed-form ceiling) picks the first choice, so it should still agree. Each seed is a different request stream
(lengths, prefixes, arrivals), so the point values move by about the intervals' width.
Runs one plan at a time with every core; the load average is printed because other jobs on a 2-core machine
slow every wall time.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from flopwise.plan.search import PlanRequest, plan, plan_to_dict  # noqa: E402
from flopwise.plan.space import SearchSpace  # noqa: E402

CASES = {
    "default": lambda seed: PlanRequest(seed=seed),
    "qwen3-32b": lambda seed: PlanRequest(model="qwen3-32b", workload=None, input_len=4000, output_len=500,
                                          sla="p95_ttft<=300ms,p95_tpot<=50ms", seed=seed,
                                          space=SearchSpace(gpus=("h200",), max_gpus=8, weights=("bf16", "fp8"),
                                                            kvs=("bf16", "fp8"))),
}


def _fmt(v: float, iv: list[float], digits: int) -> str:
    return f"{v:.{digits}f} [{iv[0]:.{digits}f}, {iv[1]:.{digits}f}]"


def run(case: str, seeds: int) -> dict:
    rows = []
    for seed in range(seeds):
        load = os.getloadavg()[0]
        t0 = time.perf_counter()
        d = plan_to_dict(plan(CASES[case](seed)))
        wall = time.perf_counter() - t0
        b = d["best"]
        digits = 2 if d["objective"] == "goodput" else 0
        rows.append({"seed": seed, "first": b["config"], "objective": d["objective"], "value": b["objective_value"],
                     "interval": b["objective_interval"], "ties": d["ties"], "wall_s": wall, "load": load,
                     "simulated": d["num_simulated"], "requests": d["num_simulated_requests"],
                     "text": _fmt(b["objective_value"], b["objective_interval"], digits)})
        print(f"  {case} seed {seed}: {b['config']:<28} {d['objective']} {rows[-1]['text']:<26} "
              f"tie group {len(d['ties'])} {'(' + ', '.join(d['ties'][1:]) + ')' if len(d['ties']) > 1 else ''} "
              f"| {wall:.1f} s, {d['num_simulated']} simulated, {d['num_simulated_requests']:,} requests, "
              f"load {load:.1f}", flush=True)
    firsts = {r["first"] for r in rows}
    walls = [r["wall_s"] for r in rows]
    lo = max(r["interval"][0] for r in rows)
    hi = min(r["interval"][1] for r in rows)
    summary = {"case": case, "first_choices": sorted(firsts), "same_first_choice": len(firsts) == 1,
               "separated_seeds": sum(len(r["ties"]) == 1 for r in rows),
               "intervals_share_a_point": lo <= hi,
               "wall_s_median": statistics.median(walls), "wall_s_min": min(walls), "wall_s_max": max(walls)}
    print(f"  => {case}: first choice {'the same for every seed' if summary['same_first_choice'] else 'differs'} "
          f"({', '.join(sorted(firsts))}); intervals separate in {summary['separated_seeds']}/{seeds} seeds; the first "
          f"choices' intervals {'share' if lo <= hi else 'do not share'} a point; wall median "
          f"{summary['wall_s_median']:.1f} s [{min(walls):.1f}, {max(walls):.1f}]")
    return {"summary": summary, "seeds": rows}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--case", choices=[*CASES, "all"], default="all")
    ap.add_argument("--json", type=Path)
    a = ap.parse_args()
    print(f"cores {os.cpu_count()}, load average {os.getloadavg()[0]:.1f}")
    out = {c: run(c, a.seeds) for c in (CASES if a.case == "all" else [a.case])}
    if a.json:
        a.json.write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
