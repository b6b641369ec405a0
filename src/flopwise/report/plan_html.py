"""Self-contained HTML report of a plan: interactive plotly charts (Pareto frontier, roofline of the chosen
config's prefill and decode steps, memory breakdown, latency percentiles vs rate) and the tables.
plotly.js is inlined once, so the file opens offline."""

from __future__ import annotations

import html
from typing import Any

import plotly.graph_objects as go

from flopwise.cost.batch import decode_shape, prefill_shape
from flopwise.cost.layout import layout
from flopwise.cost.memory import memory_plan
from flopwise.cost.step import roofs, step_cost
from flopwise.plan.search import PlanResult, plan_to_dict
from flopwise.specs.hardware import GIB

__all__ = ["plan_html", "plan_figures"]


def _pareto(d: dict[str, Any]) -> go.Figure:
    fig = go.Figure()
    rows = d["ranked"]
    fig.add_scatter(x=[r["goodput_per_gpu"] for r in rows], y=[r["tokens_per_s_per_user"] for r in rows],
                    mode="markers", name="simulated configs", text=[r["config"] for r in rows])
    front = sorted(d["pareto_frontier"], key=lambda r: r["goodput_per_gpu"])
    fig.add_scatter(x=[r["goodput_per_gpu"] for r in front], y=[r["tokens_per_s_per_user"] for r in front],
                    mode="lines+markers", name="Pareto frontier", text=[r["config"] for r in front])
    fig.update_layout(title="Throughput per GPU vs speed per user", xaxis_title="goodput per GPU (req/s)",
                      yaxis_title="tokens/s per user")
    return fig


def _roofline(r: PlanResult) -> go.Figure:
    best = r.best
    assert best is not None
    dep = best.candidate.deployment
    w = layout(dep).windows
    rf = roofs(dep)
    mean_in = max(1, round(r.max_len / 4))
    batch = max(1, round(best.summary.get("running_batch", {}).get("mean", 1)))
    points = {"prefill (1 prompt)": step_cost(dep, prefill_shape(1, mean_in, w)),
              f"decode (batch {batch})": step_cost(dep, decode_shape(batch, mean_in, w))}
    ai = [10 ** (i / 10) for i in range(-10, 51)]
    fig = go.Figure()
    fig.add_scatter(x=ai, y=[min(rf.nominal_peak_linear, a * rf.bw) / 1e12 for a in ai], mode="lines",
                    name="roofline (peak)")
    for name, c in points.items():
        fig.add_scatter(x=[c.flops / c.bytes], y=[c.flops / c.time_s / 1e12], mode="markers+text", text=[name],
                        textposition="top center", name=name, marker={"size": 12})
    fig.update_layout(title=f"Roofline of {best.candidate.label}", xaxis_type="log", yaxis_type="log",
                      xaxis_title="arithmetic intensity (FLOP/byte)", yaxis_title="achieved TFLOP/s per GPU")
    return fig


def _memory(r: PlanResult) -> go.Figure:
    assert r.best is not None
    p = memory_plan(r.best.candidate.deployment)
    parts = {"weights": p.weight_bytes, "activations": p.activation_bytes, "runtime": p.runtime_bytes,
             "KV cache pool": p.kv_pool_bytes, "reserve (1 - utilization)": p.device_bytes - p.budget_bytes}
    if p.proposer_weight_bytes:
        parts = {"weights": p.weight_bytes, "speculative proposer": p.proposer_weight_bytes, **parts}
    fig = go.Figure(go.Bar(x=list(parts), y=[v / GIB for v in parts.values()]))
    fig.update_layout(title="Memory per GPU (GiB)", yaxis_title="GiB")
    return fig


def _latency(d: dict[str, Any]) -> go.Figure:
    fig = go.Figure()
    pts = d["latency_vs_rate"]
    for key in ("p50_ttft", "p95_ttft", "p50_tpot", "p95_tpot"):
        fig.add_scatter(x=[p["rate"] for p in pts], y=[p[key] for p in pts], mode="lines+markers", name=key + " (ms)")
    fig.update_layout(title="Latency percentiles vs request rate (chosen config, one replica)",
                      xaxis_title="requests/s", yaxis_title="ms", yaxis_type="log")
    return fig


def _table(rows: list[dict[str, Any]], cols: list[str]) -> str:
    head = "".join(f"<th>{html.escape(c)}</th>" for c in cols)
    body = []
    for r in rows:
        cells = []
        for c in cols:
            v = r.get(c)
            cells.append(f"<td>{html.escape(f'{v:.3g}' if isinstance(v, float) else str(v))}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def plan_figures(r: PlanResult) -> dict[str, go.Figure]:
    """The report's charts: the Pareto frontier, the roofline, memory per GPU, latency vs rate."""
    d = plan_to_dict(r)
    return {"pareto": _pareto(d), "roofline": _roofline(r), "memory": _memory(r), "latency": _latency(d)}


def plan_html(r: PlanResult) -> str:
    d = plan_to_dict(r)
    figs = list(plan_figures(r).values())
    charts = [f.to_html(full_html=False, include_plotlyjs=(i == 0), div_id=f"chart{i}") for i, f in enumerate(figs)]
    cols = ["config", "goodput_per_gpu", "output_tokens_per_s_per_gpu", "tokens_per_s_per_user", "cost_per_1m_tokens",
            "p95_ttft_ms", "p95_tpot_ms", "memory_headroom_gib", "binds", "replicas", "total_gpus"]
    trade = "".join(
        f"<h3>vs {html.escape(t['alternative'])}</h3><ul>"
        + "".join(f"<li class='good'>protects {html.escape(p)}</li>" for p in t["protects"])
        + "".join(f"<li class='bad'>gives up {html.escape(g)}</li>" for g in t["gives_up"]) + "</ul>"
        for t in d["tradeoffs"])
    launch = "".join(f"<h3>{k}</h3><pre>{html.escape(v)}</pre>" for k, v in (d["launch"] or {}).items())
    return f"""<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>flopwise plan: {html.escape(d['model'])}</title>
<style>body{{font-family:system-ui,sans-serif;margin:2em;max-width:1200px}}table{{border-collapse:collapse}}
td,th{{border:1px solid #ccc;padding:3px 6px;font-size:13px}}.good{{color:#137333}}.bad{{color:#b3261e}}
pre{{background:#f4f4f4;padding:8px}}</style></head><body>
<h1>flopwise plan: {html.escape(d['model'])}</h1>
<p>Workload <b>{html.escape(d['workload'])}</b>, SLA <b>{html.escape(d['sla'])}</b>, objective
<b>{html.escape(d['objective'])}</b>. {d['num_candidates']} candidates, {d['num_simulated']} simulated,
{len(d['pruned'])} pruned by closed-form bounds, in {d['wall_s']:.1f} s.</p>
<h2>Ranked deployments</h2>{_table(d['ranked'], cols)}
<h2>Charts</h2>{''.join(charts)}
<h2>Trade-offs of the first choice</h2>{trade or '<p>Only one config met the SLA.</p>'}
<h2>Launch commands</h2>{launch}
</body></html>
"""
