"""DeepSeek-V3 with expert parallelism and DP attention, priced beside SGLang's published large-scale EP run.

    python benchmarks/ep_published.py [--no-tbo]

Published (LMSYS blog "Deploying DeepSeek with PD Disaggregation and Large-scale Expert Parallelism on 96 H100
GPUs", 2025-05-05; its layout as secondary summaries of it give it): decode on 9 nodes of 8 x H100 as DP72 + EP72,
22.3k output tokens/s per node for 2000-token inputs with the decode nodes kept saturated, ITL about 100 ms;
prefill on 4 nodes as DP32 + EP32, 52.3k input tokens/s per node. It used DeepEP, DeepGEMM, EPLB (balanced expert
load) and two-batch overlap; flopwise models the overlap (`two_batch_overlap`: a MoE layer takes the larger of
its kernels and its all-to-alls) and the residual imbalance EPLB leaves (`expert_skew` 1.11, TensorRT-LLM's
measurement with its static EPLB: `specs.expert_load.EPLB_SKEW`), not DeepEP's or DeepGEMM's kernels.

This prices one decode step of the decode pool at the batch whose step reaches the published ITL, and a full
prefill batch of the prefill pool (`cost.step`, no serving loop: a saturated pool is one steady step), at FP8
weights (the checkpoint's block FP8) and bf16 KV (SGLang's default for MLA). The comparison is out of sample: no
parameter was fitted to these figures.
"""

from __future__ import annotations

import sys

from flopwise.api import deployment
from flopwise.cost.batch import decode_shape, prefill_shape
from flopwise.cost.layout import layout
from flopwise.cost.memory import max_sequences
from flopwise.cost.step import step_cost
from flopwise.specs.expert_load import EPLB_SKEW

INPUT_LEN = 2000
PUBLISHED_DECODE_PER_NODE = 22_300.0
PUBLISHED_PREFILL_PER_NODE = 52_300.0
PUBLISHED_ITL_MS = 100.0
TBO = "--no-tbo" not in sys.argv  # the published run used two-batch overlap


def main() -> None:
    dec = deployment("deepseek-v3", "h100-sxm", tp=1, dp=72, ep=72, nodes=9, weights="fp8", kv="bf16",
                     engine="sglang", frontend="none", two_batch_overlap=TBO, expert_skew=EPLB_SKEW)
    fits = max_sequences(dec, INPUT_LEN + 100)
    print(f"decode pool: {dec.gpus_per_replica} x H100 (DP{dec.dp} EP{dec.ep}, {dec.nodes} nodes); the KV pool "
          f"holds {fits:,} sequences of {INPUT_LEN + 100} tokens ({fits / dec.gpus_per_replica:.0f} per GPU)")
    print(f"{'batch/GPU':>9} {'step ms':>8} {'tok/s/node':>11}  bound   (published: {PUBLISHED_DECODE_PER_NODE:,.0f} "
          f"tok/s/node at ~{PUBLISHED_ITL_MS:.0f} ms ITL)")
    near = None  # (|step - ITL|, per GPU, tok/s/node)
    for per_gpu in (32, 64, 128, 192, 256, 284):
        batch = per_gpu * dec.gpus_per_replica
        if batch > fits:
            break
        c = step_cost(dec, decode_shape(batch, INPUT_LEN + 50, layout(dec).windows))
        rate = batch / c.time_s / dec.nodes
        print(f"{per_gpu:>9} {c.time_s * 1e3:>8.1f} {rate:>11,.0f}  {c.bound}")
        if near is None or abs(c.time_s * 1e3 - PUBLISHED_ITL_MS) < near[0]:
            near = (abs(c.time_s * 1e3 - PUBLISHED_ITL_MS), per_gpu, rate)
    assert near is not None
    print(f"nearest the published ITL: {near[1]} per GPU, {near[2]:,.0f} tok/s/node "
          f"({near[2] / PUBLISHED_DECODE_PER_NODE - 1:+.0%} vs published)")
    pre = deployment("deepseek-v3", "h100-sxm", tp=1, dp=32, ep=32, nodes=4, weights="fp8", kv="bf16",
                     engine="sglang", frontend="none", two_batch_overlap=TBO, expert_skew=EPLB_SKEW)
    per_rank = pre.max_num_batched_tokens // INPUT_LEN  # prompts per DP rank in one step
    batch = per_rank * pre.dp
    c = step_cost(pre, prefill_shape(batch, INPUT_LEN, layout(pre).windows))
    rate = batch * INPUT_LEN / c.time_s / pre.nodes
    print(f"prefill pool: {pre.gpus_per_replica} x H100 (DP{pre.dp} EP{pre.ep}), {per_rank} prompts of {INPUT_LEN} "
          f"per rank per step: {c.time_s * 1e3:.0f} ms, {rate:,.0f} input tok/s/node (published "
          f"{PUBLISHED_PREFILL_PER_NODE:,.0f}; {rate / PUBLISHED_PREFILL_PER_NODE - 1:+.0%}), {c.bound}-bound")


if __name__ == "__main__":
    main()
