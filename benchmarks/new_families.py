"""Sanity tables for the model families added with the registry (issue 13): decode at batch 1 against published
measurements, and a 32k-token context beside the same models with every attention layer made full.

    python benchmarks/new_families.py [--json]

Table 1 (batch 1): the SGLang cookbook's latency runs (`--max-concurrency 1`), each row's mean prompt and output
lengths from its reported token totals, against `flopwise.estimate` at batch 1 on the same GPUs and TP degree in
the checkpoint's own weight format. flopwise prices plain decoding: rows served with speculative decoding (MTP) or
data-parallel attention are marked and kept out of the error summary. Table 2 (32k): no published 32k-context
measurement of these models was found; the table gives every new family's batch-1 TPOT at a 1k context and shows
what each layer kind buys: TTFT and TPOT at 32k, KV (and
state) per sequence on one GPU and the 32k sequences that fit, next to the same model with every attention layer full
(windows, chunks, top-k selection, linear state and KV sharing removed).
"""

from __future__ import annotations

import argparse
import json
import statistics
from dataclasses import replace

from rich.console import Console
from rich.table import Table

from flopwise.api import deployment
from flopwise.cost.memory import kv_bytes_for_sequences, max_sequences, memory_plan
from flopwise.errors import FlopwiseError
from flopwise.estimate import estimate_deployment
from flopwise.specs.hardware import GIB
from flopwise.specs.model import AttentionSpec, ModelSpec
from flopwise.specs.model_catalog import get_model

_COOKBOOK = "sgl-project/sgl-cookbook @ 7b5bd9c05e3d86da5161ac2be9b91c19a34bf49d"

# (model, gpu, tp, source doc, prompts, total input tokens, total output tokens, median TTFT ms, median TPOT ms,
#  caveat or "" when the run is plain decoding comparable with flopwise's estimate)
MEASURED = [
    ("qwen3-next", "b200", 8, "docs/autoregressive/Qwen/Qwen3-Next.md §5.1.1 (SGLang 0.5.6, ShareGPT)",
     100, 33839, 21640, 132.88, 6.17, ""),
    ("llama-4-scout", "mi300x", 8, "docs/autoregressive/Llama/Llama4.md §5.1.1 (SGLang 0.5.9, random 1000/1000)",
     10, 6101, 4220, 68.57, 7.40, ""),
    ("llama-4-maverick", "mi300x", 8, "docs/autoregressive/Llama/Llama4.md §5.2.1 (SGLang 0.5.9, random 1000/1000)",
     10, 6101, 4220, 57.45, 5.96, ""),
    ("minimax-m2", "mi300x", 4, "docs/autoregressive/MiniMax/MiniMax-M2.md §5.1.1 (SGLang 0.5.7, random 1000/1000)",
     10, 6101, 4220, 385.23, 22.24, ""),
    ("ernie-4.5-21b-a3b", "mi300x", 1, "docs/autoregressive/Ernie/Ernie4.5.md §5.1.1.1 (random 1000/1000)",
     10, 6101, 4220, 36.81, 4.09, ""),
    ("deepseek-v3.2-exp", "b200", 8, "docs/autoregressive/DeepSeek/DeepSeek-V3_2.md §5.1.1 (SGLang 0.5.6, ShareGPT)",
     10, 1972, 2784, 191.31, 9.25, "served with EAGLE/MTP speculative decoding (3 steps)"),
    ("kimi-k2", "b200", 8, "docs/autoregressive/Moonshotai/Kimi-K2.md §5.1.1 (SGLang 0.5.6.post1, ShareGPT)",
     10, 1951, 2755, 158.28, 15.63, "served with --dp 4 --enable-dp-attention"),
]

# one model per new family (and per new layer kind) for the 32k table, with a TP degree that fits an H200
LONG = [("llama-4-scout", 2), ("llama-4-maverick", 8), ("qwen3-next", 2), ("deepseek-v3.2-exp", 8),
        ("gemma-3n-e4b", 1), ("gemma-3-1b", 1), ("glm-4.5-air", 2), ("minimax-m2", 2), ("hunyuan-a13b", 2),
        ("ernie-4.5-21b-a3b", 1), ("kimi-k2", 8), ("phi-4", 1), ("phi-4-mini", 1), ("mistral-nemo", 1),
        ("mistral-small-24b", 1), ("granite-3.3-8b", 1), ("command-r", 1),
        ("olmo-2-7b", 1), ("qwen2.5-vl-7b", 1), ("mistral-small-3.1", 1)]


def all_full(m: ModelSpec) -> ModelSpec:
    """The model with every attention layer full: softmax layers keep their heads (MLA its latent), linear-state
    layers become the model's full-attention shape, KV sharing and DSA's top-k selection are removed."""
    p = m.primary_attention

    def full(a: AttentionSpec) -> AttentionSpec:
        if a.kind == "linear":
            return replace(p, kind="full", window=None, shares_kv=False)
        return replace(a, kind="mla" if a.mla is not None else "full", window=None, indexer=None, shares_kv=False)
    return m.map_attention(full, f"{m.name} [all full]")


def batch1_rows() -> list[dict]:
    rows = []
    for model, gpu, tp, doc, n, tin, tout, ttft, tpot, caveat in MEASURED:
        lin, lout = round(tin / n), round(tout / n)
        r = estimate_deployment(deployment(model, gpu, tp=tp), batch=1, input_len=lin, output_len=lout)
        rows.append({"model": model, "gpu": gpu, "tp": tp, "weights": r.deployment.weights.name, "input_len": lin,
                     "output_len": lout, "measured_tpot_ms": tpot, "predicted_tpot_ms": r.tpot_ms,
                     "tpot_error": r.tpot_ms / tpot - 1, "measured_ttft_ms": ttft, "predicted_ttft_ms": r.ttft_ms,
                     "ttft_error": r.ttft_ms / ttft - 1, "caveat": caveat, "source": f"{_COOKBOOK} {doc}"})
    return rows


def long_rows(context: int = 32768, output: int = 256) -> list[dict]:
    rows = []
    for model, tp in LONG:
        m = get_model(model)
        row: dict = {"model": model, "tp": tp, "kinds": "/".join(m.attention_kinds),
                     "tpot_1k_ms": estimate_deployment(deployment(m, "h200", tp=tp), batch=1, input_len=1024,
                                                       output_len=output).tpot_ms}
        for tag, spec in (("", m), ("full_", all_full(m))):
            try:
                dep = deployment(spec, "h200", tp=tp)
                r = estimate_deployment(dep, batch=1, input_len=context, output_len=output)
            except FlopwiseError as e:
                row[f"{tag}error"] = str(e)
                continue
            row.update({f"{tag}ttft_ms": r.ttft_ms, f"{tag}tpot_ms": r.tpot_ms,
                        f"{tag}cache_gib_per_seq_per_gpu": kv_bytes_for_sequences(dep, 1, context + output) / GIB,
                        f"{tag}max_seqs": max_sequences(dep, context + output),
                        f"{tag}fits": memory_plan(dep).fits})
        rows.append(row)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    b1, lr = batch1_rows(), long_rows()
    if args.json:
        print(json.dumps({"batch1": b1, "long_context_32k": lr}, indent=2))
        return
    con = Console(width=170)
    t = Table(title="Decode at batch 1: flopwise vs published SGLang latency runs (median TPOT / TTFT)")
    for c in ("model", "GPUs", "weights", "in/out", "TPOT meas.", "TPOT pred.", "err", "TTFT meas.", "TTFT pred.",
              "err", "caveat"):
        t.add_column(c)
    for r in b1:
        t.add_row(r["model"], f"{r['tp']}x {r['gpu']}", r["weights"], f"{r['input_len']}/{r['output_len']}",
                  f"{r['measured_tpot_ms']:.2f}", f"{r['predicted_tpot_ms']:.2f}", f"{r['tpot_error']:+.0%}",
                  f"{r['measured_ttft_ms']:.0f}", f"{r['predicted_ttft_ms']:.0f}", f"{r['ttft_error']:+.0%}",
                  r["caveat"])
    con.print(t)
    plain = [r for r in b1 if not r["caveat"]]
    con.print(f"plain-decoding rows: median |TPOT error| {statistics.median(abs(r['tpot_error']) for r in plain):.0%}, "
              f"median |TTFT error| {statistics.median(abs(r['ttft_error']) for r in plain):.0%} ({len(plain)} rows; "
              "TTFT includes the server's queueing and tokenization, which the estimate does not)")
    t = Table(title="Batch 1 on H200: decode at a 1k context, and a 32k-token context (no published measurement "
                    "found) as configured vs every attention layer full")
    for c in ("model", "tp", "layer kinds", "TPOT @1k ms", "TTFT ms", "all-full", "TPOT ms", "all-full",
              "cache GiB/seq/GPU", "all-full", "32k seqs", "all-full"):
        t.add_column(c)

    def f(r: dict, k: str, fmt: str) -> str:
        return format(r[k], fmt) if k in r else "does not fit"
    for r in lr:
        t.add_row(r["model"], str(r["tp"]), r["kinds"], f(r, "tpot_1k_ms", ".2f"), f(r, "ttft_ms", ".0f"),
                  f(r, "full_ttft_ms", ".0f"), f(r, "tpot_ms", ".2f"), f(r, "full_tpot_ms", ".2f"),
                  f(r, "cache_gib_per_seq_per_gpu", ".2f"), f(r, "full_cache_gib_per_seq_per_gpu", ".2f"),
                  f(r, "max_seqs", ","), f(r, "full_max_seqs", ","))
    con.print(t)


if __name__ == "__main__":
    main()
