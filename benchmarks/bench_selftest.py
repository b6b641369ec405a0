"""The client's own overhead: `flopwise bench selftest` repeated, medians with spread, saved as JSON.

    .venv/bin/python benchmarks/bench_selftest.py [--repeats 3]

Writes benchmarks/data/bench_selftest.json. Targets (issue 5): at concurrency 256 against a 100 ms TTFT / 20 ms
ITL mock, mean added TTFT < 5 ms and achieved request rate within 3% of ideal. The machine has 2 cores shared by
client and mock server; check it is quiet first (other processes' CPU time inflates every figure).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path

from flopwise.bench.selftest import selftest


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", type=Path, default=Path(__file__).parent / "data" / "bench_selftest.json")
    a = ap.parse_args()
    runs = []
    for _ in range(a.repeats):
        t = time.perf_counter()
        runs.append(([lv.to_dict() for lv in selftest()], time.perf_counter() - t))
    levels = []
    for i, lv in enumerate(runs[0][0]):
        row = {"concurrency": lv["concurrency"]}
        for k in ("added_ttft_ms_mean", "added_ttft_ms_p99", "achieved_rate_ratio"):
            vals = [r[0][i][k] for r in runs]
            row[k] = {"median": statistics.median(vals), "min": min(vals), "max": max(vals)}
        levels.append(row)
    out = {"mock": {"ttft_ms": 100.0, "itl_ms": 20.0, "output_len": 32}, "repeats": a.repeats,
           "wall_s": [round(w, 1) for _, w in runs], "load_average_1min": os.getloadavg()[0], "levels": levels}
    a.out.write_text(json.dumps(out, indent=2) + "\n")
    print(f"{'C':>5} {'added TTFT mean ms':>20} {'added TTFT p99 ms':>19} {'achieved/ideal':>15}   (median [min, max])")
    for r in levels:
        def f(k: str, fmt: str, r: dict = r) -> str:
            return f"{format(r[k]['median'], fmt)} [{format(r[k]['min'], fmt)}, {format(r[k]['max'], fmt)}]"

        print(f"{r['concurrency']:>5} {f('added_ttft_ms_mean', '.2f'):>20} {f('added_ttft_ms_p99', '.1f'):>19} "
              f"{f('achieved_rate_ratio', '.3f'):>15}")


if __name__ == "__main__":
    main()
