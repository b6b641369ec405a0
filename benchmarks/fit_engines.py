"""Fit the engine catalog's "fitted" numbers (`catalog/engines/*.toml`) to the measured dev set.

    python benchmarks/fit_engines.py [--family vllm] [--rounds 2] [--workers 2] [--cases GLOB] [--requests 200]

Each parameter is a family-wide number of one release (a frontend cost, the engine core's per-step CPU cost, a
kernel factor), never a row's: it moves every row of that family (and release range) at once. Coordinate
descent over a multiplicative grid; the objective of a family is the mean over regimes of
    median |log(predicted / expected)| + 0.5 |median log(predicted / expected)|
(spread and bias), over the usable rows of that family (for a release's own parameter, plus the same over the rows
of that release, on a wider grid: a family's regime medians would not see a few new rows move), so no regime
dominates by row count, plus a weak pull
toward each parameter's sourced starting value, PRIOR * |log(value / start)| (a value the rows barely pin stays
near its source). Rows on AMD GPUs are left out of the engine fits: their misses are the ROCm kernels', fitted as
the AMD entries' own efficiency (`hw` group, written to catalog/hardware.toml); rows on Blackwell datacenter GPUs
likewise fit those entries' fixed cost per kernel (the `blackwell` group). Rows are scored in parallel;
the shipped values in the TOML files are these, rounded, and say "fitted".

Rows simulate at most --requests requests while fitting (200: fast), where `accuracy.py` scores each at its source's
count (up to 10,000): a fit at 200 can move a row that queues thousands of requests the other way, so check a
candidate with `accuracy.py --rows` before shipping it (or fit at 0: each row's own count, slow).
"""

from __future__ import annotations

import argparse
import glob
import math
import statistics
import time
from collections import defaultdict
from multiprocessing import Pool
from pathlib import Path

from flopwise.cost.layout import layout
from flopwise.cost.memory import memory_plan
from flopwise.cost.step import roofs
from flopwise.specs import engine as engine_mod
from flopwise.validation import sim_predictor
from flopwise.validation.cases import load_cases, predict_case
from flopwise.validation.engines import case_engine

HERE = Path(__file__).parent
GRID = (0.3, 0.55, 0.75, 1.0, 1.35, 1.8, 3.0)
RELEASE_GRID = (0.1, 0.2, 0.3, 0.55, 0.75, 1.0, 1.35, 1.8, 3.0, 5.0, 10.0)  # a release's own value: less known
PRIOR = 0.005
FIT_REQUESTS = 200
AMD = ("mi250x", "mi300x", "mi325x")  # CDNA2 / CDNA3
# hardware groups whose rows fit the entries' own efficiency profile instead of the engines' numbers
HW_GROUPS = {"amd": AMD, "cdna4": ("mi355x",), "blackwell": ("b200", "b300", "gb200")}
# (family, release "since" or "base", dotted key) -> the parameters fitted, in order
PARAMS: dict[str, list[tuple[str, str]]] = {
    "vllm": [("base", "frontend.output_token_s"), ("base", "host.step_s"), ("base", "host.per_seq_s"),
             ("base", "frontend.request_s"), ("0.6.0", "host.step_s"), ("0.6.0", "host.per_seq_s"),
             ("0.8.0", "host.step_s"), ("0.8.0", "host.per_seq_s"), ("0.8.0", "frontend.latency_s"),
             ("0.8.0", "frontend.request_s"), ("0.8.0", "frontend.output_token_s"),
             ("base", "kernels.moe_bandwidth"), ("base", "kernels.eager_prefill_kernel_s"),
             ("0.8.0", "kernels.eager_prefill_kernel_s")],
    "sglang": [("base", "host.step_s"), ("base", "host.per_seq_s"), ("base", "frontend.request_s"),
               ("base", "frontend.output_token_s"), ("base", "frontend.latency_s"),
               ("base", "kernels.eager_prefill_kernel_s"), ("base", "kernels.moe_bandwidth"),
               ("base", "host.per_worker_s")],
    "trtllm": [("base", "host.step_s"), ("base", "host.per_seq_s"), ("base", "frontend.latency_s"),
               ("base", "frontend.request_s"), ("base", "kernels.moe_bandwidth"),
               ("0.20.0", "host.step_s"), ("0.20.0", "host.per_seq_s"), ("0.20.0", "kernels.eager_prefill_kernel_s")],
    "llamacpp": [("base", "host.step_s"), ("base", "kernels.quantized_gemm_compute"),
                 ("base", "kernels.mmq_compute"), ("base", "kernels.fp16_accumulate_compute"),
                 ("b2900", "kernels.kernel_overhead_scale"), ("b6000", "kernels.kernel_overhead_scale")],
    "pytorch": [("base", "host.step_s")],
    "tgi": [("base", "host.step_s")],
    "amd": [("hw", "bandwidth_max"), ("hw", "compute_max"), ("hw", "kernel_overhead_s")],  # the CDNA2 / 3 entries'
    "cdna4": [("hw", "bandwidth_max"), ("hw", "moe_kernel_overhead_scale")],  # MI355X's own
    "blackwell": [("hw", "kernel_overhead_s")],  # the B200 / B300 / GB200 entries' fixed cost per kernel
}
UPPER = {"kernels.kernel_overhead_scale": 10.0, "kernels.moe_bandwidth": 1.0, "kernels.quantized_gemm_compute": 1.0,
         "kernels.mmq_compute": 1.0,
         "kernels.fp16_accumulate_compute": 1.0, "bandwidth_max": 1.0, "compute_max": 1.0}

_CASES: list = []


def _hw_get(group: str, key: str) -> float:
    from flopwise.specs.hardware import hardware_catalog

    cat = hardware_catalog()
    return float(getattr(cat[next(h for h in HW_GROUPS[group] if h in cat)].efficiency, key))


def _hw_put(group: str, key: str, v: float) -> None:
    from dataclasses import replace

    from flopwise.specs.hardware import hardware_catalog

    cat = hardware_catalog()
    for hw_id in HW_GROUPS[group]:
        if hw_id in cat:
            cat[hw_id] = replace(cat[hw_id], efficiency=replace(cat[hw_id].efficiency, **{key: v}))


def _table(family: str, release: str) -> dict:
    fam = engine_mod._families()[family]
    if release == "base":
        return fam.base
    return next(rel for _, since, rel in fam.releases if since == release)


def _get(family: str, release: str, key: str) -> float:
    if release == "hw":
        return _hw_get(family, key)
    t = _table(family, release)
    for part in key.split(".")[:-1]:
        t = t.get(part, {})
    if key.split(".")[-1] in t:
        return float(t[key.split(".")[-1]])
    return engine_value(family, release, key)


def engine_value(family: str, release: str, key: str) -> float:
    """The value in force at `release` (inherited from earlier tables when this one does not set it)."""
    prof = engine_mod.get_engine(f"{family}@{'0' if release == 'base' else release}", frontend="none")
    section, name = key.split(".")
    if section == "frontend":
        fam = engine_mod._families()[family]
        merged: dict = dict(fam.base.get("frontend", {}))
        for _, since, rel in fam.releases:
            if release != "base" and engine_mod._version_key(since) <= engine_mod._version_key(release):
                merged.update(rel.get("frontend", {}))
        return float(merged.get(name, 0.0))
    return float(getattr(getattr(prof, section), name))


_ORIGINAL: dict[tuple[str, str, str], float | None] = {}  # per process: values before any override


def _put(family: str, release: str, key: str, v: float | None) -> None:
    if release == "hw":
        assert v is not None  # a hardware value is always restored to the catalog's (see _set)
        _hw_put(family, key, v)
        return
    t = _table(family, release)
    *path, name = key.split(".")
    for part in path:
        t = t.setdefault(part, {})
    if v is None:
        t.pop(name, None)
    else:
        t[name] = v


def _set(overrides: dict[tuple[str, str, str], float]) -> None:
    """Apply exactly `overrides` on top of the catalog as shipped (earlier overrides are undone first)."""
    for k, orig in _ORIGINAL.items():
        _put(*k, orig)
    for k, v in overrides.items():
        if k not in _ORIGINAL:
            if k[1] == "hw":
                _ORIGINAL[k] = _hw_get(k[0], k[2])  # the catalog entry's own value
            else:
                t = _table(k[0], k[1])
                for part in k[2].split(".")[:-1]:
                    t = t.get(part, {})
                _ORIGINAL[k] = t.get(k[2].split(".")[-1])
        _put(*k, v)
    engine_mod.get_engine.cache_clear()
    layout.cache_clear()
    memory_plan.cache_clear()
    roofs.cache_clear()


def _init(paths: list[str], requests: int = FIT_REQUESTS) -> None:
    if requests:  # shorter runs while fitting (accuracy.py scores at the default)
        sim_predictor.MAX_REQUESTS = requests
    for p in paths:
        _CASES.extend(c for c in load_cases(p) if c.usable)


def _score(job: tuple[int, dict]) -> tuple[int, float | None]:
    i, overrides = job
    _set(overrides)
    o = predict_case(_CASES[i])
    return i, o.error


def _profile_of(job: tuple[int, dict]) -> tuple[int, object]:
    """The engine profile row i is predicted with under `overrides` (to see which rows a parameter moves)."""
    i, overrides = job
    _set(overrides)
    return i, case_engine(_CASES[i].raw, _CASES[i].command).engine


def objective(errors: list[tuple[str, float]]) -> float:
    by: dict[str, list[float]] = defaultdict(list)
    for regime, e in errors:
        by[regime].append(math.log1p(max(e, -0.99)))
    parts = [statistics.median(abs(x) for x in v) + 0.5 * abs(statistics.median(v)) for v in by.values()]
    return sum(parts) / len(parts) if parts else math.inf


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--family", action="append", help="fit only these families (repeat)")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--cases", default=str(HERE / "data" / "cases-*.jsonl"))
    ap.add_argument("--requests", type=int, default=FIT_REQUESTS,
                    help="most requests a row simulates while fitting (0: as accuracy.py scores it)")
    args = ap.parse_args()
    paths = sorted(glob.glob(args.cases))
    _init(paths, args.requests)
    rows_of: dict[str, list[int]] = defaultdict(list)
    for i, c in enumerate(_CASES):
        gpu = str(c.args.get("gpu", "")).lower()
        hw_group = next((g for g, ids in HW_GROUPS.items() if gpu in ids), None)
        group = hw_group or case_engine(c.raw, c.command).engine.family
        rows_of[group].append(i)
    overrides: dict[tuple[str, str, str], float] = {}
    with Pool(args.workers, initializer=_init, initargs=(paths, args.requests)) as pool:
        errors: dict[int, float | None] = {}  # per row, under `overrides`

        def predict(rows: list[int], over: dict) -> dict[int, float | None]:
            return dict(pool.map(_score, [(i, over) for i in rows]))

        starts: dict[tuple[str, str, str], float] = {}

        def score(family: str, errs: dict[int, float | None], over: dict | None = None,
                  only: list[int] | None = None) -> float:
            fit = objective([(_CASES[i].regime, errs[i]) for i in rows_of[family] if errs.get(i) is not None])
            if only:  # a release's own rows as well as the family's: neither may be traded for the other
                fit += objective([(_CASES[i].regime, errs[i]) for i in only if errs.get(i) is not None])
            prior = sum(abs(math.log(v / starts[k])) for k, v in (over or overrides).items()
                        if k[0] == family and k in starts and starts[k] > 0 and v > 0)
            return fit + PRIOR * prior

        for family in args.family or list(PARAMS):
            if not rows_of.get(family):
                print(f"{family}: no usable rows")
                continue
            t0 = time.time()
            errors.update(predict(rows_of[family], overrides))
            best = score(family, errors)
            print(f"{family}: {len(rows_of[family])} rows, start objective {best:.4f}", flush=True)
            for _ in range(args.rounds):
                for release, key in PARAMS[family]:
                    k = (family, release, key)
                    v0 = overrides.get(k, _get(family, release, key))
                    starts.setdefault(k, v0)
                    # the rows whose engine profile this parameter changes (a release's value is overridden later)
                    if release == "hw":
                        rows = list(rows_of[family])
                    else:
                        now = dict(pool.map(_profile_of, [(i, overrides) for i in rows_of[family]]))
                        probe = v0 * 1.5 if v0 * 1.5 <= UPPER.get(key, math.inf) else v0 * 0.7
                        moved = dict(pool.map(_profile_of, [(i, {**overrides, k: probe}) for i in rows_of[family]]))
                        rows = [i for i in rows_of[family] if now[i] != moved[i]]
                    # a release's own value is judged on the rows of that release (the family's regime medians
                    # would not see a few new rows move), over a wider grid; a base value on the whole family
                    own = rows if release not in ("base", "hw") else None
                    grid = GRID if own is None else RELEASE_GRID
                    cands = sorted({min(v0 * g, UPPER.get(key, math.inf)) for g in grid})
                    here = score(family, errors, only=own)
                    scores, trial = {v0: here}, {}
                    for v in cands:
                        if v != v0 and rows:
                            trial[v] = {**errors, **predict(rows, {**overrides, k: v})}
                            scores[v] = score(family, trial[v], {**overrides, k: v}, only=own)
                    v_best = min(scores, key=scores.__getitem__)
                    if scores[v_best] < here - 1e-4:
                        overrides[k] = v_best
                        errors = trial[v_best]
                        best = score(family, errors)
                    print(f"  {release:>6s} {key:32s} {v0:.3g} -> {overrides.get(k, v0):.3g}   objective {best:.4f}"
                          f"   ({len(rows)} rows move)", flush=True)
            print(f"{family}: objective {score(family, errors):.4f} in {time.time() - t0:.0f} s")
    print("\nfitted values (write them into catalog/engines/*.toml):")
    for (family, release, key), v in sorted(overrides.items()):
        print(f"  {family:9s} {release:>6s} {key:32s} {v:.3g}")


if __name__ == "__main__":
    main()
