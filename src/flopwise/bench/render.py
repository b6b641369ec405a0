"""Console tables for bench results, and the latency-vs-throughput chart (SVG) of a sweep."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from flopwise.bench.comparison import Comparison
from flopwise.bench.runner import RunReport
from flopwise.bench.selftest import SelftestLevel
from flopwise.units import fmt_rate

__all__ = ["render_run", "render_levels", "render_selftest", "render_comparison", "render_vllm_result",
           "write_sweep_chart"]


def _f(v: float | None, fmt: str = ".1f") -> str:
    return "-" if v is None else format(v, fmt)


def render_run(console: Console, rep: RunReport) -> None:
    s = rep.summary
    t = Table(title=f"{rep.config.model} @ {rep.config.load.label}: {s['num_completed']}/{s['num_requests']} ok"
                    f" in {s['duration_s']:.1f} s" + ("  (interrupted)" if rep.interrupted else ""))
    t.add_column("metric")
    for c in ("mean", "p50", "p90", "p95", "p99"):
        t.add_column(c, justify="right")
    for key in ("ttft_ms", "ttft_from_send_ms", "tpot_ms", "itl_ms", "itl_per_token_ms", "e2e_ms", "e2e_from_send_ms",
                "send_lag_ms"):
        if key in s:
            t.add_row(key, *(_f(s[key][c]) for c in ("mean", "p50", "p90", "p95", "p99")))
    console.print(t)
    console.print("ttft_ms / e2e_ms run from the scheduled arrival (send lag included); *_from_send_ms from the "
                  "send, as vllm bench serve measures")
    asked = s.get("asked_request_rate")
    console.print(f"request rate: {_f(s.get('delivered_request_rate'), '.3f')} req/s delivered"
                  + (f" of {asked:g} asked" if asked else " (closed loop)" if rep.config.load.is_closed
                     else " (asked: all at once)"))
    console.print(f"throughput {fmt_rate(s['request_throughput'])} req/s, {s['output_tokens_per_s']:.1f} output tok/s, "
                  + (f"goodput {fmt_rate(s['goodput'])} req/s, SLA attainment {100 * s['sla_attainment']:.1f}%, SLA "
                     f"{'met' if s.get('sla_met') else 'missed'} ({s['sla']})" if s.get("sla")
                     else "no SLA given (--sla for goodput)"))
    if s.get("sla"):
        console.print(f"goodput as vllm bench serve defines it (TTFT, TPOT, E2E; no ITL): "
                      f"{fmt_rate(s['goodput_vllm'])} req/s, attainment {100 * s['sla_attainment_vllm']:.1f}%")
    if s["errors_by_kind"]:
        console.print("errors: " + ", ".join(f"{k} {v}" for k, v in sorted(s["errors_by_kind"].items()))
                      + (f" ({s['num_cancelled']} cancelled by the interruption, not failures)"
                         if s.get("num_cancelled") else ""))
    for w in rep.warnings:
        console.print(f"[bold yellow]warning:[/] {w}")
    if s["output_tokens_source"]:
        console.print("output token counts from: " + ", ".join(f"{k} ({v})" for k,
                                                               v in s["output_tokens_source"].items()))
    d = rep.diagnosis
    shares = ", ".join(f"{k} {100 * v:.0f}%" for k, v in d.shares.items()) or "none: no request completed"
    console.print(f"[bold]diagnosis[/] ({d.source} view; shares of e2e: {shares})")
    for f in d.findings:
        console.print(f"  [bold]{f.kind}[/]: {f.evidence}\n    try: {f.advice}")
    console.print(f"saved in {rep.root}")


def render_levels(console: Console, reps: Sequence[RunReport], max_rate: float | None = None) -> None:
    t = Table(title="load levels")
    for c in ("level", "ok/all", "sent req/s", "req/s", "out tok/s", "p50 ttft ms", "p95 ttft ms", "p50 tpot ms",
              "p95 tpot ms", "goodput", "SLA", "bottleneck"):
        t.add_column(c, justify="right" if c not in ("level", "bottleneck") else "left")
    for r in reps:
        s = r.summary
        t.add_row(r.config.load.label, f"{s['num_completed']}/{s['num_requests']}",
                  _f(s.get("delivered_request_rate"), ".2f"), _f(s["request_throughput"], ".2f"),
                  _f(s["output_tokens_per_s"]), _f(s["ttft_ms"]["p50"]), _f(s["ttft_ms"]["p95"]),
                  _f(s["tpot_ms"]["p50"]), _f(s["tpot_ms"]["p95"]), _f(s["goodput"], ".2f"),
                  "-" if s.get("sla") is None else ("met" if s.get("sla_met") else "missed"),
                  r.diagnosis.bottleneck or "-")
    console.print(t)
    if max_rate is not None:
        at_burst = len(reps) == 1 and math.isinf(reps[0].config.load.rate or 0.0)
        console.print(f"highest request rate measured to meet the SLA: {max_rate:g} req/s"
                      + (" (the burst's throughput: the server met the SLA at its capacity)" if at_burst else ""))


def render_selftest(console: Console, levels: Sequence[SelftestLevel]) -> None:
    t = Table(title="client self-test against the mock server")
    for c in ("concurrency", "requests", "added TTFT mean ms", "added TTFT p99 ms", "added TPOT ms",
              "achieved/ideal rate", "failed"):
        t.add_column(c, justify="right")
    for lv in levels:
        t.add_row(str(lv.concurrency), str(lv.num_requests), f"{lv.added_ttft_ms_mean:.2f}",
                  f"{lv.added_ttft_ms_p99:.2f}", f"{lv.added_tpot_ms_mean:.2f}", f"{lv.achieved_rate_ratio:.3f}",
                  str(lv.num_failed))
    console.print(t)


def render_vllm_result(console: Console, path: Path, vllm: dict[str, Any], summary: dict[str, Any]) -> None:
    """A `vllm bench serve` result beside flopwise's summary of the same requests."""
    t = Table(title=f"{path.name}: {summary['num_completed']}/{summary['num_requests']} ok (vllm bench serve result)")
    for c in ("metric", "vLLM mean", "vLLM p99", "flopwise mean", "flopwise p99"):
        t.add_column(c, justify="right" if c != "metric" else "left")
    for v_key, f_key in (("ttft", "ttft_from_send_ms"), ("tpot", "tpot_ms"), ("itl", "itl_ms"), ("e2el", "e2e_ms")):
        t.add_row(f_key, _f(vllm.get(f"mean_{v_key}_ms"), ".2f"), _f(vllm.get(f"p99_{v_key}_ms"), ".2f"),
                  _f(summary[f_key]["mean"], ".2f"), _f(summary[f_key]["p99"], ".2f"))
    console.print(t)
    console.print(f"throughput {summary['request_throughput']:.2f} req/s (vLLM "
                  f"{vllm.get('request_throughput', 0):.2f}), "
                  f"{summary['output_tokens_per_s']:.1f} output tok/s (vLLM {vllm.get('output_throughput', 0):.1f})")


def render_comparison(console: Console, cmp: Comparison) -> None:
    s = cmp.setup
    t = Table(title=f"measured vs predicted ({s['model']} on {s['gpu']} tp={s['tp']}, {s['load']})")
    for c in ("metric", "measured", "predicted", "error %"):
        t.add_column(c, justify="right" if c != "metric" else "left")
    for m, a, b, e in cmp.rows:
        t.add_row(m, _f(a, ".2f"), _f(b, ".2f"), _f(e, "+.0f"))
    console.print(t)


def write_sweep_chart(reps: Sequence[RunReport], path: str | Path) -> Path:
    """Two panels, x = output tokens/s: p50 and p95 TTFT (left), p50 and p95 TPOT (right)."""
    pts = sorted((r.summary["output_tokens_per_s"], r.summary) for r in reps if r.summary["num_completed"])
    W, H, P = 360, 260, 48
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{2 * W}" height="{H}" font-family="sans-serif" '
             f'font-size="11">', f'<rect width="{2 * W}" height="{H}" fill="white"/>']
    for panel, key in enumerate(("ttft_ms", "tpot_ms")):
        x0 = panel * W
        xs = [p[0] for p in pts]
        ys = [v for _, s in pts for v in (s[key]["p50"], s[key]["p95"]) if v is not None]
        xmax, ymax = (max(xs) if xs else 1.0) * 1.05 or 1.0, (max(ys) if ys else 1.0) * 1.1 or 1.0

        def px(x: float, x0: float = x0, xmax: float = xmax) -> float:
            return x0 + P + (W - 1.5 * P) * x / xmax

        def py(y: float, ymax: float = ymax) -> float:
            return H - P + (-(H - 1.5 * P) * y / ymax)

        parts.append(f'<line x1="{x0 + P}" y1="{H - P}" x2="{x0 + W - P / 2}" y2="{H - P}" stroke="black"/>')
        parts.append(f'<line x1="{x0 + P}" y1="{H - P}" x2="{x0 + P}" y2="{P / 2}" stroke="black"/>')
        parts.append(f'<text x="{x0 + W / 2}" y="{H - 12}" text-anchor="middle">output tokens/s</text>')
        parts.append(f'<text x="{x0 + 12}" y="{H / 2}" transform="rotate(-90 {x0 + 12} {H / 2})" '
                     f'text-anchor="middle">{key.replace("_ms", "")} (ms)</text>')
        for frac in (0.0, 0.5, 1.0):
            parts.append(f'<text x="{x0 + P - 4}" y="{py(frac * ymax) + 4}" text-anchor="end">{frac * ymax:.0f}</text>')
            parts.append(f'<text x="{px(frac * xmax)}" y="{H - P + 14}" text-anchor="middle">{frac * xmax:.0f}</text>')
        for stat, color in (("p50", "#1f77b4"), ("p95", "#d62728")):
            xy = [(px(x), py(s[key][stat])) for x, s in pts if s[key][stat] is not None]
            if xy:
                parts.append(f'<polyline fill="none" stroke="{color}" stroke-width="2" points="'
                             + " ".join(f"{a:.1f},{b:.1f}" for a, b in xy) + '"/>')
                parts += [f'<circle cx="{a:.1f}" cy="{b:.1f}" r="3" fill="{color}"/>' for a, b in xy]
            parts.append(f'<text x="{x0 + W - P}" y="{P / 2 + (14 if stat == "p95" else 0)}" fill="{color}" '
                         f'text-anchor="end">{stat}</text>')
    parts.append("</svg>")
    out = Path(path)
    out.write_text("\n".join(parts))
    return out
