"""Score flopwise against published measurements: error by regime, source and metric, and what it cannot model.

    python benchmarks/accuracy.py [--rows] [--by-release] [--cases 'benchmarks/data/cases-*.jsonl']

Every row is predicted with the engine, version, frontend and knobs its source states (`validation/engines.py`).
All of these rows are in-sample: the default efficiency profile (`fit_defaults.py`) and the engine catalog's
"fitted" numbers (`fit_engines.py`) were fitted to them, family-wide, never per row.
Targets (engine-profiles issue), per regime: median |error| <= 10%, median signed error within +-5%;
online TTFT (online_rate and online_concurrency rows of ttft_ms) median |error| <= 12%.

A second summary scores the rows from the engine releases and GPUs the issue names for its out-of-sample judgement
(vLLM 0.9+, SGLang 0.5+, TensorRT-LLM 0.20+, llama.cpp; H100, H200, A100, B200, GeForce, Apple): the same in-sample
figures, on the part of the set most like the rows that judge the project.

`--by-release` adds where the two open targets miss: the maximum-load rows and the online TTFT rows by engine
release and frontend (the release a row is priced as, "http" through an API server, "offline" without one), with
each group's median |error|, median signed error and how many rows are within the target.
"""

from __future__ import annotations

import argparse
import glob
import re
import statistics
from collections import defaultdict
from pathlib import Path

from rich.console import Console
from rich.table import Table

from flopwise.errors import SpecError
from flopwise.specs.hardware import get_hardware
from flopwise.validation.cases import Case, Outcome, load_cases, median_abs_error, score_cases
from flopwise.validation.engines import case_engine

HERE = Path(__file__).parent
GROUPS = {
    "decode (tpot_ms, itl_ms, decode tok/s/user)": ("tpot_ms", "itl_ms", "decode_tokens_per_s_per_user"),
    "ttft_ms / prefill tok/s": ("ttft_ms", "prefill_tokens_per_s"),
    "throughput (output tok/s)": ("output_tokens_per_s",),
    "max_batch": ("max_batch",),
    "speedup": ("speedup",),
}

# the engine releases and GPU families of the out-of-sample sources (engine family -> first release)
CURRENT_RELEASES = {"vllm": "0.9.0", "sglang": "0.5.0", "trtllm": "0.20.0", "llamacpp": "b1"}
CURRENT_DATACENTER = ("h100", "h200", "a100", "b200")


def is_current(case: Case) -> bool:
    """Whether a row comes from an engine release and GPU like those of the issue's unseen sources."""
    try:
        hw = get_hardware(str(case.args.get("gpu")))
    except SpecError:
        return False
    if not (hw.id.startswith(CURRENT_DATACENTER) or "GeForce" in hw.name or hw.vendor == "apple"):
        return False
    engine = case_engine(case.raw or {}, case.command).engine
    since = CURRENT_RELEASES.get(engine.family)
    return since is not None and engine.at_least(since)


def regime_table(title: str, scored: list[Outcome]) -> Table:
    t = Table(title=title)
    for c in ("regime", "rows", "median |err|", "median signed", "within 20%"):
        t.add_column(c)
    for regime in sorted({o.case.regime for o in scored}):
        os_ = [o for o in scored if o.case.regime == regime]
        within = sum(abs(o.error) <= 0.2 for o in os_)
        t.add_row(regime, str(len(os_)), f"{median_abs_error(os_):.1%}",
                  f"{statistics.median(o.error for o in os_):+.1%}", f"{within}/{len(os_)}")
    online_ttft = [o for o in scored if o.case.regime.startswith("online") and o.case.metric_key == "ttft_ms"]
    if online_ttft:
        t.add_row("online TTFT (target <= 12%)", str(len(online_ttft)), f"{median_abs_error(online_ttft):.1%}",
                  f"{statistics.median(o.error for o in online_ttft):+.1%}",
                  f"{sum(abs(o.error) <= 0.2 for o in online_ttft)}/{len(online_ttft)}")
    if scored:
        t.add_row("all", str(len(scored)), f"{median_abs_error(scored):.1%}", "", "")
    return t


def release_of(case: Case) -> str:
    """The engine release a row is priced as, and whether through an API server: 'vllm@0.15 http'. A zero patch
    is dropped (rows that write 1.2.0 and 1.2 are one release)."""
    engine = case_engine(case.raw or {}, case.command).engine
    version = re.sub(r"^(\d+\.\d+)\.0(?=$|\.post|rc)", r"\1", engine.version)
    return f"{engine.family}@{version} {'http' if engine.frontend is not None else 'offline'}"


def release_table(title: str, outcomes: list[Outcome], target: float) -> Table:
    """`outcomes` by engine release (`release_of`), most rows outside `target` first."""
    by = defaultdict(list)
    for o in outcomes:
        by[release_of(o.case)].append(o)
    t = Table(title=title)
    for c in ("release", "rows", "median |err|", "median signed", f"within {target:.0%}"):
        t.add_column(c)
    for release, os_ in sorted(by.items(), key=lambda kv: (-sum(abs(o.error) > target for o in kv[1]), kv[0])):
        t.add_row(release, str(len(os_)), f"{median_abs_error(os_):.1%}",
                  f"{statistics.median(o.error for o in os_):+.1%}",
                  f"{sum(abs(o.error) <= target for o in os_)}/{len(os_)}")
    return t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--cases", default=str(HERE / "data" / "cases-*.jsonl"), help="file or glob of case files")
    ap.add_argument("--rows", action="store_true", help="print every scored row")
    ap.add_argument("--by-release", action="store_true",
                    help="the maximum-load and online TTFT rows by engine release and frontend")
    args = ap.parse_args()
    outcomes = [o for path in sorted(glob.glob(args.cases)) for o in score_cases(load_cases(path))]
    con = Console(width=160)
    scored = [o for o in outcomes if o.error is not None]

    if args.rows:
        t = Table(title="Rows")
        for c in ("row", "source", "regime", "metric", "expected", "predicted", "error"):
            t.add_column(c)
        for o in sorted(scored, key=lambda o: (o.case.source_family, o.case.row_id)):
            c = o.case
            exp = f"{c.expected_range}" if c.expected_range else f"{c.expected:g}"
            t.add_row(str(c.row_id), c.source_family, c.regime, c.metric_key, exp, f"{o.predicted:.4g}",
                      f"{o.error:+.1%}")
        con.print(t)

    by = defaultdict(list)
    for o in scored:
        by[(o.case.source_family, o.case.metric_key)].append(o)
    t = Table(title="Error by source and metric")
    for c in ("source", "metric", "rows", "median |err|", "mean signed"):
        t.add_column(c)
    for (src, metric), os_ in sorted(by.items()):
        t.add_row(src, metric, str(len(os_)), f"{median_abs_error(os_):.1%}",
                  f"{statistics.mean(o.error for o in os_):+.1%}")
    con.print(t)

    con.print(regime_table("Summary by regime (targets: median |err| <= 10%, median signed within +-5%)", scored))
    con.print(regime_table("Current releases and GPUs (vLLM 0.9+, SGLang 0.5+, TensorRT-LLM 0.20+, llama.cpp; "
                           "H100 / H200 / A100 / B200 / GeForce / Apple)", [o for o in scored if is_current(o.case)]))
    if args.by_release:
        max_load = [o for o in scored if o.case.regime == "max_load"]
        online_ttft = [o for o in scored if o.case.regime.startswith("online") and o.case.metric_key == "ttft_ms"]
        for title, os_, target in (("Maximum load by engine release (target: median |err| <= 10%)", max_load, 0.10),
                                   ("Online TTFT by engine release (target: median |err| <= 12%)", online_ttft, 0.12)):
            if os_:
                con.print(release_table(title, os_, target))

    t = Table(title="Summary by metric group")
    for c in ("group", "rows", "median |err|", "within 20%"):
        t.add_column(c)
    for name, keys in GROUPS.items():
        os_ = [o for o in scored if o.case.metric_key in keys]
        if os_:
            within = sum(abs(o.error) <= 0.2 for o in os_)
            t.add_row(name, str(len(os_)), f"{median_abs_error(os_):.1%}", f"{within}/{len(os_)}")
    con.print(t)

    skipped = defaultdict(int)
    for o in outcomes:
        if o.skipped:
            skipped[o.skipped if not o.skipped.startswith("unusable")
                    else "unusable in the dataset (see its reason)"] += 1
    t = Table(title=f"Rows not scored ({sum(skipped.values())} of {len(outcomes)})")
    t.add_column("reason")
    t.add_column("rows")
    for reason, n in sorted(skipped.items(), key=lambda kv: -kv[1]):
        t.add_row(reason, str(n))
    con.print(t)
    con.print(f"scored {len(scored)} of {len(outcomes)} rows; overall median |error| {median_abs_error(scored):.1%}")


if __name__ == "__main__":
    main()
