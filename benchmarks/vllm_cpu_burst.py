"""How a burst of simultaneous requests passes vLLM's API server, measured on its CPU build and predicted.

    .venv/bin/python benchmarks/vllm_cpu_burst.py [--port 8133] [--sizes 16,32,64,128] [--repeats 3]

The micro model of `vllm_cpu_frontend.py` is served as there (API server and load generator on core 0, the
engine on core 1). For each size N a burst of N requests (8 prompt tokens, 1 output token: the model's forward
pass is well under a millisecond, so the time is the API server's) is sent at once with `flopwise bench
--request-rate inf`, and each request's TTFT read from the run's requests.jsonl.

What it tells apart: a server that takes requests one at a time (first come, first served: request i is ready
after i x the CPU per request, so the TTFTs spread evenly up to N x that, mean / max = 1/2) from one whose event
loop interleaves them (processor sharing: asyncio runs each request's awaits in turn, so the burst's requests all
finish near the end, mean / max -> 1). flopwise's frontend stage (`sim/frontend.py`) is first come, first served;
its prediction (the simulator on the measured costs, `benchmarks/data/vllm-cpu-frontend-engine.toml`) is printed
beside the measurement. Writes benchmarks/data/vllm_cpu_burst.json and prints the table.
"""

from __future__ import annotations

import argparse
import json
import os
import time

import numpy as np

from vllm_cpu_frontend import CACHE, OUT, bench, start

PERCENTILES = (0, 10, 50, 90, 100)


def ttfts_ms(run: os.PathLike) -> np.ndarray:
    """Each measured request's TTFT (ms) from a `flopwise bench` run's requests.jsonl (warm-up rows left out)."""
    with open(os.path.join(run, "requests.jsonl"), encoding="utf-8") as f:
        rows = [json.loads(line) for line in f]
    return np.array([(r["token_times"][0] - r["arrival_at"]) * 1e3 for r in rows
                     if not r["is_warmup"] and r["token_times"]])


def predicted_ms(n: int) -> np.ndarray:
    """The simulator's TTFTs (ms) for a burst of n (8 in, 1 out) on the measured API-server costs."""
    from flopwise.api import deployment
    from flopwise.sim import simulate
    from flopwise.workload import RequestSpec, Workload

    dep = deployment(str(CACHE / "model"), "cpu-epyc-zen5-2c", engine="vllm@0.32",
                     engine_file=OUT / "vllm-cpu-frontend-engine.toml")
    wl = Workload(tuple(RequestSpec(arrival_at=0.0, input_tokens=8, output_tokens=1) for _ in range(n)))
    return np.array([r["ttft_ms"] for r in simulate(dep, wl).rows()])


def shape(t: np.ndarray) -> dict:
    p = np.percentile(t, PERCENTILES)
    return {"min_ms": p[0], "p10_ms": p[1], "p50_ms": p[2], "p90_ms": p[3], "max_ms": p[4], "mean_ms": t.mean(),
            "mean_over_max": t.mean() / p[4]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--port", type=int, default=8133)
    ap.add_argument("--sizes", default="16,32,64,128")
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    url, proc, _, load1 = start(args.port, "server-burst.log")
    measured: dict[int, list[dict]] = {}
    try:
        for n in (int(x) for x in args.sizes.split(",")):
            for rep in range(args.repeats):
                run = CACHE / f"burst-{n}-{rep}"
                bench(url, run, "completions", 8, 1, n, ["--request-rate", "inf"])
                measured.setdefault(n, []).append(shape(ttfts_ms(run)))
    finally:
        os.killpg(proc.pid, 15)
        proc.wait(timeout=60)
    rows = []
    print("| burst | measured TTFT ms p10 / p50 / max (mean / max), per repeat | predicted p10 / p50 / max "
          "(mean / max) |\n|---:|---|---|")
    for n, reps in measured.items():
        pred = shape(predicted_ms(n))
        rows.append({"requests": n, "measured": reps, "predicted": pred})
        meas = "; ".join(f"{r['p10_ms']:.0f} / {r['p50_ms']:.0f} / {r['max_ms']:.0f} ({r['mean_over_max']:.2f})"
                         for r in reps)
        print(f"| {n} | {meas} | {pred['p10_ms']:.0f} / {pred['p50_ms']:.0f} / {pred['max_ms']:.0f} "
              f"({pred['mean_over_max']:.2f}) |")
    result = {"date": time.strftime("%Y-%m-%d %H:%M"), "load_average_at_start": load1, "prompt_tokens": 8,
              "output_tokens": 1, "rows": rows}
    (OUT / "vllm_cpu_burst.json").write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
