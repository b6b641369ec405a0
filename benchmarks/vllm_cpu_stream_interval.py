"""What vLLM's --stream-interval saves in the API server, measured on its CPU build.

    .venv/bin/python benchmarks/vllm_cpu_stream_interval.py [--port 8132] [--intervals 1,8,32] [--out-len 128]

For each interval N the micro model of `vllm_cpu_frontend.py` is served with `--stream-interval N` (the API
server's core and the engine's pinned apart as there) and probed with `flopwise bench` at concurrency 4:
short requests (8 tokens in, 1 out) and long outputs (8 in, --out-len out). The API server's CPU seconds per
request (its /proc utime + stime) less the short probe's is the output side of a request:

    out_cpu(N) = out_len * token_s + events(N) * event_s,   events(N) = 1 + ceil((out_len - 1) / N)

(vLLM's OutputProcessor detokenizes every token and builds a RequestOutput, hence one SSE event, for the first
token, then once N tokens have gathered, and for the last: v1/engine/output_processor.py, 0.11.1+). Least
squares over the intervals gives token_s and event_s; the profile's `stream_token_share` is token_s / (token_s +
event_s), the share of the per-token cost (`output_token_s`, measured at N = 1) that batching cannot save.
Writes benchmarks/data/vllm_cpu_stream_interval.json and prints the table.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import time

import numpy as np

from vllm_cpu_frontend import CACHE, OUT, output_side, prepare, serve_pinned


def measure(url: str, port: int, interval: int, out_len: int, n_short: int, n_long: int) -> dict:
    log = CACHE / f"server-si{interval}.log"
    proc, _ = serve_pinned(url, port, log, ("--stream-interval", str(interval)))
    try:
        return output_side(url, proc.pid, f"si{interval}", ["--concurrency", "4"], out_len, n_short, n_long)
    finally:
        os.killpg(proc.pid, 15)
        proc.wait(timeout=60)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--port", type=int, default=8132)
    ap.add_argument("--intervals", default="1,8,32")
    ap.add_argument("--out-len", type=int, default=128)
    ap.add_argument("--short", type=int, default=300, help="requests in the short probe")
    ap.add_argument("--long", type=int, default=120, help="requests in the long-output probe")
    args = ap.parse_args()
    prepare()
    url = f"http://127.0.0.1:{args.port}"
    intervals = [int(x) for x in args.intervals.split(",")]
    rows = []
    load1 = os.getloadavg()[0]
    for n in intervals:
        m = measure(url, args.port, n, args.out_len, args.short, args.long)
        events = 1 + math.ceil((args.out_len - 1) / n)
        out_cpu = m["long"] - m["short"]
        rows.append({"stream_interval": n, "events_per_request": events, "api_cpu_ms_short": m["short"] * 1e3,
                     "api_cpu_ms_long": m["long"] * 1e3, "output_cpu_ms": out_cpu * 1e3,
                     "itl_ms_mean_long": m["long_itl_ms"], "date": time.strftime("%Y-%m-%d %H:%M")})
        print(f"  N={n:3d}: {events:4d} events, output side {out_cpu * 1e3:7.3f} ms per request "
              f"({out_cpu / args.out_len * 1e6:5.1f} us per token)", flush=True)
    a = np.array([[args.out_len, r["events_per_request"]] for r in rows], dtype=float)
    y = np.array([r["output_cpu_ms"] / 1e3 for r in rows])
    (token_s, event_s), *_ = np.linalg.lstsq(a, y, rcond=None)
    token_s, event_s = max(float(token_s), 0.0), max(float(event_s), 0.0)
    share = token_s / (token_s + event_s) if token_s + event_s > 0 else 0.0
    result = {"load_average_at_start": load1, "out_len": args.out_len, "rows": rows,
              "token_s": token_s, "event_s": event_s, "stream_token_share": share}
    (OUT / "vllm_cpu_stream_interval.json").write_text(json.dumps(result, indent=2))
    print(f"\nper token {token_s * 1e6:.1f} us + per event {event_s * 1e6:.1f} us: "
          f"stream_token_share {share:.2f}")


if __name__ == "__main__":
    main()
