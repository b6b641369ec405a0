"""How long one estimate takes after import (target: well under 1 ms), and one step-cost call.

    python benchmarks/speed.py
"""

from __future__ import annotations

import time
from statistics import median

from rich.console import Console
from rich.table import Table

import flopwise
from flopwise.cost import decode_shape, step_time
from flopwise.cost.layout import layout

CASES = [
    ("llama-3.1-8b", "h100-sxm", {}, dict(batch=32, input_len=1024, output_len=256)),
    ("llama-3.1-70b", "h200", {"tp": 2, "weights": "fp8", "kv": "fp8"},
     dict(batch=64, input_len=2048, output_len=2048)),
    ("deepseek-v3", "h200", {"tp": 8, "weights": "fp8"}, dict(batch=16, input_len=4096, output_len=1024)),
    ("gemma-3-27b", "a100-sxm-80gb", {}, dict(batch=8, input_len=8192, output_len=512)),
]


def _time(fn, repeat: int = 200) -> float:
    fn()  # warm caches (catalog parse, layout)
    samples = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - t0)
    return median(samples)


def main() -> None:
    t = Table(title="flopwise speed (median of 200 calls, after import and first call)")
    for c in ("model", "gpu", "estimate (us)", "one step_time (us)"):
        t.add_column(c)
    for model, gpu, dep_kw, est_kw in CASES:
        dep = flopwise.deployment(model, gpu, **dep_kw)
        shape = decode_shape(est_kw["batch"], est_kw["input_len"], layout(dep).windows)
        est = _time(lambda model=model, gpu=gpu, dep_kw=dep_kw, est_kw=est_kw:
                    flopwise.estimate(model, gpu, **dep_kw, **est_kw))
        step = _time(lambda dep=dep, shape=shape: step_time(dep, shape), repeat=2000)
        t.add_row(model, gpu, f"{est * 1e6:,.0f}", f"{step * 1e6:,.1f}")
    Console().print(t)


if __name__ == "__main__":
    main()
