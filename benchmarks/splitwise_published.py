"""Splitwise's single-machine characterization (Llama-2-70B, TP 8 on one DGX-A100 or DGX-H100), estimated beside
the published numbers.

    python benchmarks/splitwise_published.py [--engine vllm@0.2.7]

Published (Patel et al., "Splitwise: Efficient Generative LLM Inference Using Phase Splitting", ISCA'24,
arXiv 2311.18677): the authors ran Llama-2-70B in fp16 with tensor parallelism over the 8 GPUs of a DGX-A100
(80 GB) or a DGX-H100, on their own branch of vLLM (late 2023; version not stated).
- Table IV: P50 TTFT and TBT of requests served alone (no batching) at the traces' median sizes (coding: 1,500
  prompt tokens; conversation: 1,020).
- The authors' profile database (github.com/Mutinifni/splitwise-sim, `data/perf_model.csv`, median ms): the
  prompt phase at batch 1 for 512-2,048 tokens, and one token-phase step at a 512-token context for batches 1-64.
Here each is `flopwise estimate` of the same deployment (the engine alone, no HTTP server): TTFT is the prefill
step, TBT the mean decode step. The cluster-level results (iso-power BLOOM-176B designs under SLOs stated as
slowdowns over an uncontended DGX-A100) are not reproduced here.
"""

from __future__ import annotations

import argparse

import flopwise

MODEL = "meta-llama/Llama-2-70b-hf"
GPUS = {"DGX-A100": "a100-sxm-80gb", "DGX-H100": "h100-sxm"}
# perf_model.csv (median ms): prompt phase at batch 1, by prompt tokens; token phase at a 512-token context, by batch
# (the database goes on to 4,096 and 8,192 tokens, beyond Llama-2's 4,096-token context with an output: left out)
PROMPT_MS = {"DGX-H100": {512: 54, 1024: 78, 2048: 137}, "DGX-A100": {512: 93, 1024: 155, 2048: 274}}
TBT_MS = {"DGX-H100": {1: 30.6, 16: 34.2, 32: 38.6, 64: 50.2}, "DGX-A100": {1: 45.0, 16: 50.4, 32: 53.0, 64: 71.6}}
# Table IV, P50 without batching: (prompt tokens, TTFT ms, TBT ms) per trace
TABLE_IV = {"DGX-A100": {"coding": (1500, 185, 52), "conversation": (1020, 155, 40)},
            "DGX-H100": {"coding": (1500, 95, 31), "conversation": (1020, 84, 28)}}


def _est(engine: str, gpu: str, batch: int, input_len: int) -> flopwise.Estimate:
    return flopwise.estimate(MODEL, gpu, tp=8, weights="fp16", kv="fp16", batch=batch, input_len=input_len,
                             output_len=2, engine=engine)


def _row(label: str, published: float, predicted: float) -> str:
    return f"  {label:34s} {published:9.1f} {predicted:10.1f} {predicted / published - 1:+8.1%}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--engine", default="vllm@0.2.7", help="the vLLM of late 2023 by default")
    args = ap.parse_args()
    print(f"{MODEL} fp16, TP 8, engine {args.engine} (no HTTP server)")
    print(f"  {'':34s} {'published':>9s} {'flopwise':>10s} {'error':>8s}   (ms)")
    for machine, gpu in GPUS.items():
        print(machine)
        for tokens, ms in PROMPT_MS[machine].items():
            print(_row(f"prompt phase, {tokens} tokens", ms, _est(args.engine, gpu, 1, tokens).ttft_ms))
        for batch, ms in TBT_MS[machine].items():
            print(_row(f"token step, batch {batch}, context 512", ms, _est(args.engine, gpu, batch, 512).tpot_ms))
        for trace, (tokens, ttft, tbt) in TABLE_IV[machine].items():
            e = _est(args.engine, gpu, 1, tokens)
            print(_row(f"Table IV {trace}: TTFT", ttft, e.ttft_ms))
            print(_row(f"Table IV {trace}: TBT", tbt, e.tpot_ms))


if __name__ == "__main__":
    main()
