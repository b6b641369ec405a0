"""CLI start-up: wall time of `flopwise <command> --help` and of each command's first result, and the import time
of `flopwise` and `flopwise.cli`, each the best of N runs in a fresh interpreter.

    python benchmarks/startup.py [--repeat 5] [--src src] [--json]

`--src` points at the `src` folder to measure (run it once on a checkout of the version before a change and once
after: the numbers compare only on the same machine, and a busy machine inflates all of them; the load average is
printed). "first result" runs a small, fast invocation of each command with --json and includes its work.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

HELP = ("estimate", "simulate", "compare", "explain", "plan", "bench", "profile", "calibrate", "models")
FIRST = {
    "estimate": ["estimate", "--json"],
    "simulate": ["simulate", "--num-requests", "20", "--input-len", "128", "--output-len", "16", "--json"],
    "explain": ["explain", "--json"],
    "compare": ["compare", "--try", "kv=fp8", "--static", "--json"],
    "models": ["models", "--json"],
}


def _best(cmd: list[str], env: dict[str, str], repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
        best = min(best, time.perf_counter() - t0)
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--src", default=str(ROOT / "src"), help="the src folder of the version to measure")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    env = {**os.environ, "PYTHONPATH": str(Path(args.src).resolve())}
    py = sys.executable
    out: dict[str, dict[str, float]] = {"import_s": {}, "help_s": {}, "first_result_s": {}}
    out["import_s"]["python"] = _best([py, "-c", "pass"], env, args.repeat)
    for mod in ("flopwise", "flopwise.cli"):
        out["import_s"][mod] = _best([py, "-c", f"import {mod}"], env, args.repeat)
    for name in HELP:
        out["help_s"][name] = _best([py, "-m", "flopwise", name, "--help"], env, args.repeat)
    for name, argv in FIRST.items():
        out["first_result_s"][name] = _best([py, "-m", "flopwise", *argv], env, max(1, args.repeat // 2))
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    if args.json:
        print(json.dumps({"src": args.src, "load_average": load, **out}, indent=2))
        return
    print(f"src {args.src}; load average {load:.2f} on {os.cpu_count()} CPUs; best of {args.repeat}")
    for group, rows in out.items():
        print(f"{group}:")
        for k, v in rows.items():
            print(f"  {k:12s} {v:6.3f} s")


if __name__ == "__main__":
    main()
