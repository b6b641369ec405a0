"""Planner wall time, side by side for one or more source trees, medians with spread.

    python benchmarks/plan_speed.py                          # this checkout, 3 runs per case
    python benchmarks/plan_speed.py --src ../main/src --src src --runs 5 --case default

Each run is a fresh `python -m flopwise plan --json ...` process (import included, as a user runs it) with
PYTHONPATH set to the source tree, so an older checkout is timed through the same command line. Cases:
1. the default plan (Llama-3.1-8B, chat, its default SLA, common GPUs): target < 5 s on the 2-core machine;
2. a large space (5 GPU types, TP 1-8, 3 weight and 2 KV formats, 3 max_num_seqs, 2 token budgets);
3. Qwen3-32B on up to 8 x H200, 4000 in / 500 out, TTFT <= 300 ms, TPOT <= 50 ms: the best config, its tokens/s
   per GPU and per user.
Runs alternate between the trees (a, b, a, b, ...) so that a change in the machine's load hits both; the load
average is printed beside each median, and so is the CPU time of the plan and its worker processes (user +
sys): on a machine shared with other jobs the wall time stretches with the load, the CPU time does not, and
CPU / cores is about the wall time the same plan takes when the cores are free.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CASES = {
    "default": [],
    "large": ["--gpus", "h100-sxm,h200,a100-sxm-80gb,l40s,b200", "--tp", "1,2,4,8", "--weights", "bf16,fp8,int4-awq",
              "--kv", "bf16,fp8", "--max-num-seqs", "64,256,1024", "--max-num-batched-tokens", "2048,8192"],
    "qwen3-32b": ["--model", "qwen3-32b", "--input-len", "4000", "--output-len", "500", "--sla",
                  "p95_ttft<=300ms,p95_tpot<=50ms", "--gpus", "h200", "--max-gpus", "8", "--weights", "bf16,fp8",
                  "--kv", "bf16,fp8"],
}


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def _run(src: Path, args: list[str]) -> tuple[float, float, dict]:
    """(wall s, CPU s of the plan and its worker processes, the plan's JSON)."""
    env = {**os.environ, "PYTHONPATH": str(src)}
    c0, t0 = _cpu(), time.perf_counter()
    res = subprocess.run([sys.executable, "-m", "flopwise", "plan", *args, "--json"], capture_output=True, text=True,
                         env=env, cwd=ROOT)
    wall, cpu = time.perf_counter() - t0, _cpu() - c0
    if res.returncode != 0:
        raise SystemExit(f"{src}: flopwise plan {' '.join(args)} failed:\n{res.stderr[-2000:]}")
    return wall, cpu, json.loads(res.stdout)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--src", action="append", type=Path, help="a source tree (repeat to compare; default: src)")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--case", choices=[*CASES, "all"], default="all")
    a = ap.parse_args()
    srcs = [s.resolve() for s in (a.src or [ROOT / "src"])]
    print(f"cores {os.cpu_count()}; each figure: median [min, max] of {a.runs} runs")
    for case in (CASES if a.case == "all" else [a.case]):
        times: dict[Path, list[float]] = {s: [] for s in srcs}
        cpus: dict[Path, list[float]] = {s: [] for s in srcs}
        loads: list[float] = []
        last: dict[Path, dict] = {}
        for _ in range(a.runs):
            for s in srcs:
                loads.append(os.getloadavg()[0])
                wall, cpu, d = _run(s, CASES[case])
                times[s].append(wall)
                cpus[s].append(cpu)
                last[s] = d
        for s in srcs:
            d, t, c = last[s], times[s], cpus[s]
            b = d["best"]
            print(f"{case:<10} {str(s):<40} wall {statistics.median(t):6.1f} s [{min(t):.1f}, {max(t):.1f}], CPU "
                  f"{statistics.median(c):.1f} s [{min(c):.1f}, {max(c):.1f}]  "
                  f"{d['num_candidates']} candidates, {d['num_simulated']} simulated; best {b['config']} "
                  f"{b['output_tokens_per_s_per_gpu']:,.0f} out tok/s/GPU, {b['tokens_per_s_per_user']:.0f} tok/s/user "
                  f"(load {statistics.median(loads):.1f})")


if __name__ == "__main__":
    main()
