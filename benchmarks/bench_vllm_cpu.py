"""Measured vs predicted for the vLLM CPU server at several request rates.

    .venv/bin/python benchmarks/bench_vllm_cpu.py [--url http://127.0.0.1:PORT --model-dir DIR]

Without --url it builds the tiny random-weight Llama and starts vLLM CPU with scripts/vllm_cpu_server.py (needs
.venv-vllm). Each rate is a `flopwise bench` run (Poisson, 40 requests, 128-token prompts, 64 output tokens);
each is replayed through `flopwise.sim` on benchmarks/data/cpu-2core-zen5.toml. Writes
benchmarks/data/vllm_cpu_predicted_vs_measured.md.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

from flopwise.bench.arrivals import Load
from flopwise.bench.runner import BenchConfig, PromptConfig, run_bench
from flopwise.calibrate.predict import predict_run

HERE = Path(__file__).parent
ROOT = HERE.parent


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--url")
    ap.add_argument("--model-dir", type=Path)
    ap.add_argument("--rates", default="2,8,32,inf")
    a = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="flopwise-vllm-"))
    proc = None
    url, model_dir = a.url, a.model_dir
    if url is None:
        model_dir = tmp / "model"
        proc = subprocess.Popen([str(ROOT / ".venv-vllm/bin/python"), str(ROOT / "scripts/vllm_cpu_server.py"),
                                 "serve", str(model_dir), "--port", "8123"], stdout=subprocess.DEVNULL,
                                stderr=subprocess.STDOUT)
        url = "http://127.0.0.1:8123"
        for _ in range(300):
            try:
                if httpx.get(url + "/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(1)
    try:
        rows = []
        for r in a.rates.split(","):
            rate = float(r)
            cfg = BenchConfig(url=url, model="tiny-llama", load=Load(kind="poisson", rate=rate), num_requests=40,
                              num_warmup=4, prompts=PromptConfig(input_len=128, output_len=64), timeout_s=120)
            rep = run_bench(cfg, tmp / f"rate-{r}")
            cmp = predict_run(rep, model=str(model_dir / "config.json"), gpu="cpu-2core-zen5",
                              hardware_file=HERE / "data" / "cpu-2core-zen5.toml")
            rows.append((r, {m: (x, y, e) for m, x, y, e in cmp.rows}, rep.diagnosis.bottleneck))
            print(r, "done", file=sys.stderr)
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait(30)
    keys = ["ttft_ms.p50", "tpot_ms.p50", "e2e_ms.p50", "output_tokens_per_s"]
    lines = ["# vLLM CPU (tiny random-weight Llama, 2 vCPU): measured vs predicted", "",
             "Poisson arrivals, 40 requests per rate, 128 prompt tokens, 64 output tokens (ignore_eos). "
             "Predicted: `flopwise.sim` replaying the measured requests on `cpu-2core-zen5.toml`. "
             "Cells: measured / predicted (error %).", "",
             "| rate req/s | " + " | ".join(keys) + " | bottleneck (server view) |",
             "|---|" + "---|" * (len(keys) + 1)]
    for r, d, b in rows:
        cells = [f"{d[k][0]:.1f} / {d[k][1]:.1f} ({d[k][2]:+.0f}%)" if d[k][2] is not None else "-" for k in keys]
        lines.append(f"| {r} | " + " | ".join(cells) + f" | {b} |")
    out = HERE / "data" / "vllm_cpu_predicted_vs_measured.md"
    out.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
