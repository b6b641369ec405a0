"""Do `--find-max-rate`'s 90% intervals hold across request streams? Each case is searched once per seed (a
different stream: lengths, prefixes, arrivals); the spread of the answers across seeds is the sampling error an
interval claims to cover. Printed per case: the answers' mean and standard deviation, the width a 90% interval
would need (2 x 1.645 sd), the median width reported, and how many seeds' intervals contain the mean of all
seeds (about 90% of them should). `offline` has no TTFT bound: its answer is the saturated rate (every request at
once), the others' a rate search.

    python benchmarks/interval_coverage.py [--seeds 40] [--cases chat,code,...] [--json out.json]

The cases run in turn, each seed in its own process (two at a time); the chat case takes about half a minute
on 2 cores.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CASES: dict[str, list[str]] = {
    "chat": ["--gpu", "h200", "--weights", "fp8", "--kv", "fp8", "--workload", "chat",
             "--sla", "p95_ttft<=300ms,p95_tpot<=50ms"],
    "code": ["--gpu", "h100-sxm", "--weights", "fp8", "--workload", "code", "--sla", "p95_ttft<=500ms,p95_tpot<=40ms"],
    "fixed": ["--gpu", "h200", "--weights", "fp8", "--input-len", "1000", "--output-len", "130",
              "--sla", "p95_ttft<=300ms,p95_tpot<=50ms"],
    "rag": ["--model", "qwen3-32b", "--gpu", "h100-sxm", "--tp", "2", "--workload", "rag",
            "--sla", "p95_ttft<=1000ms,p95_tpot<=60ms"],
    "bursty": ["--gpu", "h200", "--weights", "fp8", "--kv", "fp8", "--workload", "chat", "--arrival", "gamma",
               "--burstiness", "0.5", "--sla", "p95_ttft<=300ms,p95_tpot<=50ms"],
    "offline": ["--gpu", "h200", "--weights", "fp8", "--kv", "fp8", "--workload", "chat", "--sla", "p95_tpot<=500ms"],
    "chat-1600": ["--gpu", "h200", "--weights", "fp8", "--kv", "fp8", "--workload", "chat", "--num-requests", "1600",
                  "--sla", "p95_ttft<=300ms,p95_tpot<=50ms"],
}


def _one(args: list[str], seed: int) -> tuple[float, list[float]] | None:
    """One seed's answer and interval; None (with the error's last line printed) where the run failed."""
    cmd = [sys.executable, "-m", "flopwise", "simulate", "--find-max-rate", "--json", *args, "--seed", str(seed)]
    out = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    if out.returncode != 0:
        last = (out.stderr.strip().splitlines() or ["(no message)"])[-1]
        print(f"    seed {seed} failed (exit {out.returncode}): {last}", flush=True)
        return None
    found = json.loads(out.stdout)["max_rate"]
    return float(found["request_rate"]), [float(x) for x in found["request_rate_interval"]]


def run(case: str, seeds: int) -> dict[str, object] | None:
    with ThreadPoolExecutor(2) as pool:
        found = [f for f in pool.map(lambda s: _one(CASES[case], s), range(seeds)) if f is not None]
    if len(found) < 3:
        print(f"  {case}: {len(found)} of {seeds} seeds ran, too few to compare", flush=True)
        return None
    seeds = len(found)
    rates = [r for r, _ in found]
    mean, sd = statistics.mean(rates), statistics.stdev(rates)
    covered = sum(lo <= mean <= hi for _, (lo, hi) in found)
    widths = [hi - lo for _, (lo, hi) in found]
    row = {"case": case, "seeds": seeds, "mean": mean, "sd": sd, "needed_width": 2 * 1.645 * sd,
           "median_width": statistics.median(widths), "covered": covered}
    print(f"  {case:<10} {seeds} seeds: {mean:.2f} req/s, sd {sd:.2f} ({sd / mean:.1%}); a 90% interval needs width "
          f"{row['needed_width']:.2f}, median reported {row['median_width']:.2f}; covers the mean in "
          f"{covered}/{seeds}", flush=True)
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=int, default=40)
    ap.add_argument("--cases", default=",".join(CASES))
    ap.add_argument("--json", type=Path)
    a = ap.parse_args()
    cases = [c for c in a.cases.split(",") if c]
    unknown = [c for c in cases if c not in CASES]
    if unknown or not cases:
        sys.exit(f"error: unknown case(s) {', '.join(unknown) or '(none given)'}; the cases are {', '.join(CASES)}")
    if a.seeds < 3:
        sys.exit(f"error: --seeds needs at least 3, got {a.seeds}")
    rows: list[dict[str, object]] = []
    for c in cases:
        row = run(c, a.seeds)
        if row is not None:
            rows.append(row)
        if a.json:  # after every case: a run stopped part way keeps what it measured
            a.json.write_text(json.dumps(rows, indent=1) + "\n")
    total, hit = sum(r["seeds"] for r in rows), sum(r["covered"] for r in rows)  # type: ignore[misc]
    if total:
        print(f"  => the intervals cover the seeds' mean in {hit}/{total} ({hit / total:.0%}; nominal 90%)")


if __name__ == "__main__":
    main()
