"""Fit the default GPU (or SoC) efficiency profile to the measured dev set by coordinate descent.

    python benchmarks/fit_defaults.py            # GPUs: the estimate rows of cases-dev.jsonl
    python benchmarks/fit_defaults.py --kind soc # unified-memory SoCs (Apple, Jetson): their estimate rows in
                                                 # every case file (llama.cpp's llama-bench tables)

The objective is the mean over metric groups (decode, TTFT/prefill, throughput) of the median
|log(predicted / expected)|, over the rows `estimate` can model, so no group dominates by row count.
Prints the fitted parameters next to the shipped defaults; the shipped values in
`flopwise/specs/hardware.py` are these, rounded.
"""

from __future__ import annotations

import argparse
import glob
import math
import statistics
from dataclasses import replace
from pathlib import Path

import flopwise.specs.hardware as hwmod
from flopwise.calibrate.fit import coordinate_descent
from flopwise.cost.layout import layout
from flopwise.cost.memory import memory_plan
from flopwise.specs.model_catalog import _load_catalog_model  # noqa: F401  (warm the catalog cache)
from flopwise.validation.cases import load_cases, predict_case

HERE = Path(__file__).parent
GROUPS = (("tpot_ms", "itl_ms", "decode_tokens_per_s_per_user"), ("ttft_ms", "prefill_tokens_per_s"),
          ("output_tokens_per_s",))
GRID = {
    "compute_max": (0.55, 0.6, 0.65, 0.7, 0.75, 0.8),
    "compute_half_m": (1.0, 2.0, 4.0, 8.0, 16.0),
    "low_precision_compute_factor": (0.6, 0.65, 0.7, 0.75, 0.8, 0.9, 1.0),
    "attention_compute_max": (0.3, 0.4, 0.5, 0.6, 0.7),
    "overlap_exponent": (1.5, 2.0, 3.0, 4.0, 8.0),
    "bandwidth_max": (0.7, 0.75, 0.8, 0.85, 0.9),
    "kernel_overhead_s": (0.0, 2e-6, 4e-6, 6e-6, 1e-5),
    "step_overhead_s": (0.0, 1e-4, 2e-4, 5e-4, 1e-3, 2e-3),
}
SOC_GRID = {
    "compute_max": (0.4, 0.45, 0.5, 0.55, 0.6, 0.65, 0.7),
    "compute_half_m": (1.0, 4.0, 16.0, 64.0),
    "bandwidth_max": (0.7, 0.75, 0.8, 0.85, 0.9, 0.95),
    "bandwidth_half_bytes": (0.0, 2.5e5, 5e5, 1e6, 2e6),
    "kernel_overhead_s": (0.0, 5e-6, 1e-5, 1.5e-5, 2e-5, 3e-5),
    "step_overhead_s": (0.0, 2.5e-4, 5e-4, 1e-3, 2e-3),
}


def _objective(cases) -> float:
    layout.cache_clear()
    memory_plan.cache_clear()
    outs = [predict_case(c) for c in cases]
    meds = []
    for keys in GROUPS:
        errs = [abs(math.log1p(o.error)) for o in outs if o.error is not None and o.case.metric_key in keys]
        if errs:
            meds.append(statistics.median(errs))
    return sum(meds) / len(meds)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--kind", choices=("gpu", "soc"), default="gpu")
    kind = ap.parse_args().kind
    catalog = hwmod.hardware_catalog()
    gpus = [k for k, v in catalog.items() if v.kind == kind]
    files = [HERE / "data" / "cases-dev.jsonl"] if kind == "gpu" else sorted(glob.glob(str(HERE / "data" /
                                                                                        "cases-*.jsonl")))
    cases = [c for f in files for c in load_cases(f)
             if c.usable and c.command == "estimate" and c.metric_key != "max_batch"
             and (kind == "gpu" or c.args.get("gpu") in gpus)]
    grid = GRID if kind == "gpu" else SOC_GRID
    prof = hwmod.DEFAULT_EFFICIENCY[kind]
    print(f"{len(cases)} rows on {kind} hardware")

    def apply(p: hwmod.EfficiencyProfile) -> None:
        for k in gpus:
            catalog[k] = replace(catalog[k], efficiency=p)

    def objective(p: hwmod.EfficiencyProfile) -> float:
        apply(p)
        return _objective(cases)

    print(f"start: {objective(prof):.4f}")
    prof, best = coordinate_descent(
        objective, prof, grid, rounds=2,
        on_param=lambda name, p, score: print(f"  {name:30s} -> {getattr(p, name)!r:10}  objective {score:.4f}"))
    apply(prof)
    print(f"fitted {kind} profile (objective {best:.4f}):")
    for name in grid:
        print(f"  {name} = {getattr(prof, name)!r}  (shipped {getattr(hwmod.DEFAULT_EFFICIENCY[kind], name)!r})")


if __name__ == "__main__":
    main()
