"""Console tables for calibration: fitted parameters, refusals, before/after error per metric, model steps."""

from __future__ import annotations

from collections.abc import Sequence

from rich.console import Console
from rich.table import Table

from flopwise.calibrate.calibration import Calibration
from flopwise.calibrate.observations import StepPoint, with_profile
from flopwise.cost.step import step_cost

__all__ = ["render_calibration", "render_steps"]


def _fmt(v: float) -> str:
    return f"{v:.4g}"


def render_calibration(console: Console, cal: Calibration) -> None:
    engine = f" and engine {cal.engine_after.name}" if cal.engine_after is not None else ""
    t = Table(title=f"efficiency profile of {cal.after.id}{engine}", title_justify="left")
    t.add_column("parameter")
    t.add_column("before", justify="right")
    t.add_column("after", justify="right")
    t.add_column("note")
    before, after = cal.tuning_before, cal.fit.profile
    for n in cal.fit.fitted:
        note = "fitted, at its bound: suspect noisy or unmodelled data" if n in cal.fit.at_bound else "fitted"
        t.add_row(n, _fmt(before.get(n)), _fmt(after.get(n)), note)
    for n, why in cal.fit.refused.items():
        t.add_row(n, _fmt(before.get(n)), _fmt(after.get(n)), f"kept: {why}")
    console.print(t)
    e = Table(title="prediction error per metric, |predicted - measured| / measured", title_justify="left")
    for c, j in (("metric", "left"), ("n", "right"), ("median before", "right"), ("max before", "right"),
                 ("median after", "right"), ("max after", "right")):
        e.add_column(c, justify=j)  # type: ignore[arg-type]
    for r in cal.errors:
        e.add_row(r.label, str(r.n), f"{r.median_before_pct:.1f}%", f"{r.max_before_pct:.1f}%",
                  f"{r.median_after_pct:.1f}%", f"{r.max_after_pct:.1f}%")
    console.print(e)
    console.print(f"rms log error {cal.fit.rms_before:.3f} -> {cal.fit.rms_after:.3f} "
                  f"({cal.fit.iterations} iterations)")


def render_steps(console: Console, steps: Sequence[StepPoint], cal: Calibration | None) -> None:
    """Model steps measured beside the cost model (default and fitted profiles), with the rates they imply."""
    t = Table(title="model steps: measured vs cost model", title_justify="left")
    for c in ("step", "measured ms", "model ms (before)", "model ms (after)", "GFLOP/s", "GB/s", "bound"):
        t.add_column(c, justify="left" if c == "step" else "right")
    for s in steps:
        before = step_cost(with_profile(s.dep, cal.before.efficiency) if cal else s.dep, s.shape)
        after = step_cost(with_profile(s.dep, cal.after.efficiency), s.shape) if cal else None
        t.add_row(s.desc, f"{s.seconds * 1e3:.2f}", f"{before.time_s * 1e3:.2f}",
                  f"{after.time_s * 1e3:.2f}" if after else "-", f"{before.flops / s.seconds / 1e9:.1f}",
                  f"{before.bytes / s.seconds / 1e9:.1f}", (after or before).bound)
    console.print(t)
