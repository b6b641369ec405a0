"""`flopwise bench` beside `vllm bench serve` on one vLLM CPU server, with the server's own histograms as the
third opinion.

    .venv/bin/python benchmarks/bench_vs_vllm.py [--pairs 2] [--port 8124] [--keep-server] [--wait-quiet 300]

1. Builds a random-weight Llama-shaped model of 56M parameters (hidden 512, 8 layers, 8 heads, 4 KV heads,
   intermediate 1408, vocab 32000) and a locally trained tokenizer with `scripts/vllm_cpu_server.py` into
   `.cache/bench-vs-vllm/` (git-ignored) and serves it with vLLM's CPU build from `.venv-vllm`.
2. At three loads (concurrency 1, concurrency 8, Poisson 9 req/s; completions endpoint, 128 prompt tokens,
   64 output tokens, ignore_eos, 2 warm-up requests), runs both clients in interleaved pairs (the order alternates
   between pairs; every run draws its prompts from a seed of its own, so no run hits another's prefix cache).
   vLLM's client: its random dataset sized by the served tokenizer; `--request-rate 9` with its default rescaled
   Poisson gaps, or `--max-concurrency C --request-rate inf`. flopwise: `--input-len 128` sized by the server's
   /tokenize (no --tokenizer), `--request-rate 9` (rescaled, its default) or `--concurrency C`.
3. Scrapes the server's /metrics before and after each run: the mean TTFT, inter-token latency, time per output
   token and E2E of that run's requests as the engine measured them.
4. Prints and writes `benchmarks/data/bench_vs_vllm.md`: per load, each metric as the median over pairs [min, max]
   for vLLM's client, flopwise's client and the server, and each client's offset from the server's mean.

TTFT and E2E are both clients' from the send (flopwise's ttft_from_send_ms / e2e_from_send_ms; its ttft_ms, from
the scheduled arrival, is shown too). The server's TTFT runs from the API server's receipt of the request, so a
client's offset from it is the client's own overhead plus the HTTP round trip. Goodput uses vLLM's definition on
both sides (`--goodput ttft:100 tpot:8 e2el:700`, flopwise's goodput_vllm) and flopwise's stricter one beside it.
The machine has 2 cores that the server and the clients share: run it on a quiet machine (load average < 1).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

import httpx

from vllm_cpu import VLLM_PY, build_model, start_server, wait_healthy, wait_quiet

HERE = Path(__file__).parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT / "src"))  # this checkout's flopwise, for the script and (PYTHONPATH) its runs
CACHE = ROOT / ".cache" / "bench-vs-vllm"
if not VLLM_PY.exists():
    VLLM_PY = Path("/work/main/.venv-vllm/bin/python")
FLOPWISE = [sys.executable, "-m", "flopwise"]
SERVED = "bench-llama"
MODEL_CONFIG = {"hidden_size": 512, "num_hidden_layers": 8, "num_attention_heads": 8, "num_key_value_heads": 4,
                "intermediate_size": 1408, "vocab_size": 32000}
INPUT_LEN, OUTPUT_LEN, WARMUP = 128, 64, 2
SLA_MS = {"ttft": 100, "tpot": 8, "e2el": 700}
FLOPWISE_SLA = f"p99_ttft<={SLA_MS['ttft']}ms,p99_tpot<={SLA_MS['tpot']}ms,p99_e2e<={SLA_MS['e2el']}ms"
# (label, flopwise load args, vllm load args, number of requests)
LOADS = [
    ("concurrency 1", ["--concurrency", "1"], ["--max-concurrency", "1", "--request-rate", "inf"], 60),
    ("concurrency 8", ["--concurrency", "8"], ["--max-concurrency", "8", "--request-rate", "inf"], 160),
    ("Poisson 9 req/s", ["--request-rate", "9"], ["--request-rate", "9"], 180),
]
SERVER_HIST = {"ttft": "vllm:time_to_first_token_seconds", "itl": "vllm:inter_token_latency_seconds",
               "tpot": "vllm:request_time_per_output_token_seconds", "e2e": "vllm:e2e_request_latency_seconds"}
VLLM_BENCH = ("import sys; from vllm.utils.argparse_utils import FlexibleArgumentParser; "
              "from vllm.benchmarks.serve import add_cli_args, main; p = FlexibleArgumentParser(); add_cli_args(p); "
              "main(p.parse_args(sys.argv[1:]))")  # `vllm bench serve` without the CLI's package-metadata lookup


def scrape(url: str) -> dict[str, float]:
    from flopwise.bench.prometheus import parse_prometheus

    return parse_prometheus(httpx.get(f"{url}/metrics", timeout=10).text)


def server_means(before: dict[str, float], after: dict[str, float]) -> dict[str, float | None]:
    """Mean (ms) of each histogram over the requests between two scrapes."""
    out: dict[str, float | None] = {}
    for role, fam in SERVER_HIST.items():
        def tot(m: dict[str, float], suf: str, fam: str = fam) -> float:
            return sum(v for k, v in m.items() if k.split("{")[0] == fam + suf)

        n = tot(after, "_count") - tot(before, "_count")
        out[role] = (tot(after, "_sum") - tot(before, "_sum")) / n * 1e3 if n > 0 else None
    return out


def run_flopwise(url: str, out: Path, load: list[str], n: int, seed: int) -> dict:
    if not (out / "summary.json").exists():
        cmd = [*FLOPWISE, "bench", "--url", url, "--model", SERVED, *load, "--num-requests", str(n),
               "--warmup", str(WARMUP), "--input-len", str(INPUT_LEN), "--output-len", str(OUTPUT_LEN),
               "--seed", str(seed), "--sla", FLOPWISE_SLA, "--no-scrape", "--out", str(out), "--json"]
        subprocess.run(cmd, cwd=ROOT, check=True, stdout=subprocess.DEVNULL,
                       env=dict(os.environ, PYTHONPATH=str(ROOT / "src")))
    s = json.loads((out / "summary.json").read_text())
    return {
        "ttft_mean": s["ttft_from_send_ms"]["mean"], "ttft_p50": s["ttft_from_send_ms"]["p50"],
        "ttft_p99": s["ttft_from_send_ms"]["p99"], "ttft_sched_mean": s["ttft_ms"]["mean"],
        "tpot_mean": s["tpot_ms"]["mean"], "itl_mean": s["itl_ms"]["mean"], "itl_p99": s["itl_ms"]["p99"],
        "e2e_mean": s["e2e_from_send_ms"]["mean"], "req_s": s["request_throughput"],
        "tok_s": s["output_tokens_per_s"], "goodput_vllm": s["goodput_vllm"], "goodput": s["goodput"],
        "rate": _send_rate(json.loads((out / "vllm_result.json").read_text())["start_times"]),
        "in_tokens": s["input_tokens_mean"], "failed": s["num_failed"],
    }


def _send_rate(starts: list[float]) -> float | None:
    """(sends - 1) / (last send - first send): one measure for both clients (their actual send instants)."""
    return (len(starts) - 1) / (max(starts) - min(starts)) if len(starts) > 1 and max(starts) > min(starts) else None


def run_vllm(url: str, out: Path, load: list[str], n: int, seed: int, tokenizer: Path) -> dict:
    f = out / "vllm.json"
    if not f.exists():
        out.mkdir(parents=True, exist_ok=True)
        cmd = [str(VLLM_PY), "-c", VLLM_BENCH, "--backend", "openai", "--base-url", url, "--endpoint",
               "/v1/completions", "--model", SERVED, "--tokenizer", str(tokenizer), "--dataset-name", "random",
               "--random-input-len", str(INPUT_LEN), "--random-output-len", str(OUTPUT_LEN), "--ignore-eos",
               "--num-prompts", str(n), "--num-warmups", str(WARMUP), "--seed", str(seed), *load,
               "--percentile-metrics", "ttft,tpot,itl,e2el", "--metric-percentiles", "50,99",
               "--goodput", *(f"{k}:{v}" for k, v in SLA_MS.items()), "--save-result", "--save-detailed",
               "--result-dir", str(out), "--result-filename", f.name, "--disable-tqdm", "--temperature", "0"]
        subprocess.run(cmd, cwd=ROOT, check=True, stdout=(out / "vllm.log").open("w"), stderr=subprocess.STDOUT,
                       env=dict(os.environ, TOKENIZERS_PARALLELISM="false", HF_HUB_OFFLINE="1"))
    d = json.loads(f.read_text())
    dur = d["duration"]
    return {
        "ttft_mean": d["mean_ttft_ms"], "ttft_p50": d["median_ttft_ms"], "ttft_p99": d["p99_ttft_ms"],
        "tpot_mean": d["mean_tpot_ms"], "itl_mean": d["mean_itl_ms"], "itl_p99": d["p99_itl_ms"],
        "e2e_mean": d["mean_e2el_ms"], "req_s": d["request_throughput"], "tok_s": d["output_throughput"],
        "goodput_vllm": d.get("request_goodput"), "in_tokens": statistics.mean(d["input_lens"]),
        "rate": _send_rate(d.get("start_times") or []),
        "failed": d["failed"], "duration": dur,
    }


ROWS = [("TTFT mean (ms)", "ttft_mean", "ttft"), ("TTFT p50 (ms)", "ttft_p50", None),
        ("TTFT p99 (ms)", "ttft_p99", None), ("TTFT from schedule, mean (ms)", "ttft_sched_mean", None),
        ("TPOT mean (ms)", "tpot_mean", "tpot"), ("ITL mean (ms)", "itl_mean", "itl"),
        ("ITL p99 (ms)", "itl_p99", None),
        ("E2E mean (ms)", "e2e_mean", "e2e"), ("throughput (req/s)", "req_s", None),
        ("output tokens/s", "tok_s", None), ("goodput, vLLM's definition (req/s)", "goodput_vllm", None),
        ("goodput, flopwise's (req/s)", "goodput", None), ("send rate, (sends - 1) / send span (req/s)", "rate", None),
        ("prompt tokens (mean)", "in_tokens", None), ("failed requests", "failed", None)]


def cell(vals: list[float | None], fmt: str = ".2f") -> str:
    vals = [v for v in vals if v is not None]
    if not vals:
        return "-"
    med = statistics.median(vals)
    return f"{med:{fmt}}" + (f" [{min(vals):{fmt}}, {max(vals):{fmt}}]" if len(vals) > 1 else "")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pairs", type=int, default=2)
    ap.add_argument("--port", type=int, default=8124)
    ap.add_argument("--keep-server", action="store_true")
    ap.add_argument("--fresh", action="store_true", help="forget earlier runs in .cache/bench-vs-vllm/runs")
    ap.add_argument("--wait-quiet", type=float, default=300.0, help="wait up to this long for load average < 1")
    ap.add_argument("--smoke", action="store_true", help="8 requests per run, one pair, nothing written to data/")
    a = ap.parse_args()
    CACHE.mkdir(parents=True, exist_ok=True)
    runs = CACHE / ("smoke" if a.smoke else "runs")
    loads = [(lab, f, v, 8 if a.smoke else n) for lab, f, v, n in LOADS]
    pairs = 1 if a.smoke else a.pairs
    if (a.fresh or a.smoke) and runs.exists():
        import shutil
        shutil.rmtree(runs)
    model_dir = CACHE / "model"
    build_model(model_dir, MODEL_CONFIG)
    url = f"http://127.0.0.1:{a.port}"
    load_before = wait_quiet(a.wait_quiet)
    print(f"load average {load_before:.2f}; starting vLLM", flush=True)
    proc = start_server(model_dir, a.port, CACHE / "server.log", SERVED)
    loads_seen: list[float] = []
    results: dict[str, dict[str, list[dict]]] = {lab: {"vllm": [], "flopwise": [], "server_vllm": [],
                                                       "server_flopwise": []} for lab, *_ in loads}
    try:
        wait_healthy(url, proc, CACHE / "server.log")
        for pair in range(pairs):
            loads_seen.append(wait_quiet(a.wait_quiet))  # other jobs on the 2 cores would time themselves
            for k, (label, f_load, v_load, n) in enumerate(loads):
                seed = 1000 + 10 * pair + k
                order = ("flopwise", "vllm") if pair % 2 == 0 else ("vllm", "flopwise")
                for client in order:
                    out = runs / f"pair{pair}-load{k}-{client}"
                    before = scrape(url)
                    t0 = time.time()
                    if client == "flopwise":
                        r = run_flopwise(url, out, f_load, n, seed)
                    else:
                        r = run_vllm(url, out, v_load, n, seed + 500, model_dir)
                    sv = server_means(before, scrape(url))
                    results[label][client].append(r)
                    results[label][f"server_{client}"].append(sv)
                    print(f"pair {pair} {label:16} {client:8} {time.time() - t0:5.1f} s  TTFT {r['ttft_mean']:.2f} "
                          f"(server {sv['ttft'] or 0:.2f})  TPOT {r['tpot_mean']:.2f} (server {sv['tpot'] or 0:.2f})",
                          flush=True)
    finally:
        if not a.keep_server:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(60)
    load_after = os.getloadavg()[0]
    lines = ["# `flopwise bench` beside `vllm bench serve` on one vLLM CPU server", "",
             f"Produced by `benchmarks/bench_vs_vllm.py` ({pairs} interleaved pairs per load; 1-minute load "
             f"average {load_before:.2f} before the server started, "
             + ", ".join(f"{x:.2f}" for x in loads_seen) + f" before each pair, {load_after:.2f} at the end). "
             "vLLM CPU 0.32.0 (`.venv-vllm`) serving a "
             "56M-parameter random-weight Llama (hidden 512, 8 layers, vocab 32000) on 2 vCPUs; completions endpoint, "
             f"{INPUT_LEN} prompt tokens, {OUTPUT_LEN} output tokens with ignore_eos, {WARMUP} warm-up requests. "
             "Cells: median over pairs [min, max]. TTFT and E2E from the send for both clients; the server's from "
             "its receipt of the request (its own histograms, means only). Offsets: client mean - server mean, the "
             "client's overhead plus the HTTP round trip (for the server column the requests of the flopwise runs "
             "are used for flopwise and those of the vLLM runs for vLLM). Goodput SLA: TTFT <= "
             f"{SLA_MS['ttft']} ms, TPOT <= {SLA_MS['tpot']} ms, E2E <= {SLA_MS['e2el']} ms per request.", ""]
    for label, *_ in loads:
        r = results[label]
        lines += [f"## {label}", "", "| metric | vllm bench serve | flopwise bench | server (vLLM runs / flopwise "
                                     "runs) "
                  "| vLLM - server | flopwise - server |", "|---|---:|---:|---:|---:|---:|"]
        for name, key, srv in ROWS:
            v = [x.get(key) for x in r["vllm"]]
            f = [x.get(key) for x in r["flopwise"]]
            fmt = ".0f" if key == "failed" else ".1f" if key == "in_tokens" else ".2f"
            if srv:
                sv = [x[srv] for x in r["server_vllm"]]
                sf = [x[srv] for x in r["server_flopwise"]]
                off_v = [a_ - b for a_, b in zip(v, sv, strict=True) if a_ is not None and b is not None]
                off_f = [a_ - b for a_, b in zip(f, sf, strict=True) if a_ is not None and b is not None]
                lines.append(f"| {name} | {cell(v, fmt)} | {cell(f, fmt)} | {cell(sv)} / {cell(sf)} | "
                             f"{cell(off_v, '+.2f')} | {cell(off_f, '+.2f')} |")
            else:
                lines.append(f"| {name} | {cell(v, fmt)} | {cell(f, fmt)} | | | |")
        lines.append("")
    text = "\n".join(lines) + "\n"
    if not a.smoke:
        (HERE / "data" / "bench_vs_vllm.md").write_text(text)
    (CACHE / "results.json").write_text(json.dumps(results, indent=1))
    print(text)


if __name__ == "__main__":
    main()
