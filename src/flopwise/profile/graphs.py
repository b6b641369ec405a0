"""Timing on CUDA as engines run kernels: replayed from a captured CUDA graph.

Timing one call from the host (launch, run, synchronise) measures the launch path (about 10-20 us through
PyTorch) rather than the kernel, so a small GEMM or a decode step looks host-bound where an engine would not
see it: vLLM, SGLang and TensorRT-LLM capture decode steps in CUDA graphs and replay them. Here `calls`
back-to-back invocations are captured in one graph (enough for the replay to run about `target_s`), the replay is
timed like any call (`timing.measure`), and every figure is divided by `calls`: a kernel's time plus the gap a
graph leaves between kernels, which is what `EfficiencyProfile.kernel_overhead_s` describes.

Needs PyTorch with CUDA; importing this module imports torch.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

from flopwise.profile.timing import Timing, measure

__all__ = ["graph_measure"]


def graph_measure(fn: Callable[[], object], *, budget_s: float = 1.0, repeats: int = 7, target_s: float = 2e-3,
                  max_calls: int = 256) -> Timing:
    """Per-call time of `fn` replayed from a CUDA graph of `calls` invocations (see the module docstring)."""
    sync = torch.cuda.synchronize
    eager = measure(fn, repeats=3, budget_s=budget_s / 4, sync=sync)
    calls = max(1, min(max_calls, math.ceil(target_s / max(eager.min_s, 1e-9))))
    side = torch.cuda.Stream()  # type: ignore[no-untyped-call]  # torch leaves Stream.__new__ untyped
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm-up on a side stream, as capture requires
        fn()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(calls):
            fn()
    t = measure(graph.replay, repeats=repeats, budget_s=budget_s, sync=sync)
    del graph
    return Timing(median_s=t.median_s / calls, min_s=t.min_s / calls, max_s=t.max_s / calls, repeats=t.repeats)
