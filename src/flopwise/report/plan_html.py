"""Self-contained HTML report of a plan: interactive plotly charts (Pareto frontier with labelled points,
roofline of the chosen config's prefill and decode steps, memory breakdown, latency percentiles vs rate with
the SLA's limits drawn in) and the tables (headers in words with units, fixed-precision numbers, intervals,
ties), laid out to fit a 1280 px window. plotly.js is inlined once, so the file opens offline."""

from __future__ import annotations

import html
from typing import Any

import plotly.graph_objects as go

from flopwise.cost.batch import decode_shape, prefill_shape
from flopwise.cost.layout import layout
from flopwise.cost.memory import memory_plan
from flopwise.cost.step import roofs, step_cost
from flopwise.plan.search import PlanResult, plan_to_dict
from flopwise.report.plan_report import fmt_interval, objective_label, objective_value
from flopwise.specs.hardware import GIB

__all__ = ["plan_html", "plan_figures"]


def _pareto(d: dict[str, Any]) -> go.Figure:
    fig = go.Figure()
    rows = d["ranked"]
    err = [max(0.0, r["goodput_per_gpu_interval"][1] - r["goodput_per_gpu"]) for r in rows]
    err_minus = [max(0.0, r["goodput_per_gpu"] - r["goodput_per_gpu_interval"][0]) for r in rows]
    front_names = {r["config"] for r in d["pareto_frontier"]}
    labels = [r["config"] if r["config"] in front_names or i < 3 else "" for i, r in enumerate(rows)]
    fig.add_scatter(x=[r["goodput_per_gpu"] for r in rows], y=[r["tokens_per_s_per_user"] for r in rows],
                    mode="markers+text", name="simulated configs", text=labels, customdata=[r["config"] for r in rows],
                    textposition="top center", textfont={"size": 10},
                    error_x={"type": "data", "array": err, "arrayminus": err_minus, "visible": True, "thickness": 1},
                    hovertemplate="%{customdata}<br>goodput %{x:.2f} req/s/GPU<br>%{y:.0f} tok/s/user<extra></extra>")
    front = sorted(d["pareto_frontier"], key=lambda r: r["goodput_per_gpu"])
    fig.add_scatter(x=[r["goodput_per_gpu"] for r in front], y=[r["tokens_per_s_per_user"] for r in front],
                    mode="lines", name="Pareto frontier", hoverinfo="skip")
    fig.update_layout(title="Goodput per GPU vs speed per user (bars: intervals)",
                      xaxis_title="goodput per GPU (req/s)", yaxis_title="tokens/s per user", height=460)
    return fig


def _roofline(r: PlanResult) -> go.Figure:
    best = r.best
    assert best is not None
    dep = best.candidate.deployment
    w = layout(dep).windows
    rf = roofs(dep)
    mean_in = max(1, round(r.max_len / 4))
    batch = max(1, round(best.run.engine.running_batch_mean))
    points = {"prefill (1 prompt)": step_cost(dep, prefill_shape(1, mean_in, w, dep.dp)),
              f"decode (batch {batch})": step_cost(dep, decode_shape(batch, mean_in, w))}
    ai = [10 ** (i / 10) for i in range(-10, 51)]
    fig = go.Figure()
    fig.add_scatter(x=ai, y=[min(rf.nominal_peak_linear, a * rf.bw) / 1e12 for a in ai], mode="lines",
                    name="roofline (peak)")
    for name, c in points.items():
        fig.add_scatter(x=[c.flops / c.bytes], y=[c.flops / c.time_s / 1e12], mode="markers+text", text=[name],
                        textposition="top center", name=name, marker={"size": 12})
    fig.update_layout(title=f"Roofline of {best.candidate.label}", xaxis_type="log", yaxis_type="log",
                      xaxis_title="arithmetic intensity (FLOP/byte)", yaxis_title="achieved TFLOP/s per GPU",
                      height=460)
    return fig


def _memory(r: PlanResult) -> go.Figure:
    assert r.best is not None
    p = memory_plan(r.best.candidate.deployment)
    parts = {"weights": p.weight_bytes, "activations": p.activation_bytes, "runtime": p.runtime_bytes,
             "KV cache pool": p.kv_pool_bytes, "kept free (memory fraction, margin)": p.device_bytes - p.budget_bytes}
    if p.proposer_weight_bytes:
        parts = {"weights": p.weight_bytes, "speculative proposer": p.proposer_weight_bytes, **parts}
    fig = go.Figure(go.Bar(x=list(parts), y=[v / GIB for v in parts.values()]))
    fig.update_layout(title="Memory per GPU (GiB)", yaxis_title="GiB", height=460)
    return fig


def _latency(d: dict[str, Any], r: PlanResult) -> go.Figure:
    fig = go.Figure()
    pts = d["latency_vs_rate"]
    names = {"p50_ttft": "P50 TTFT", "p95_ttft": "P95 TTFT", "p50_tpot": "P50 TPOT", "p95_tpot": "P95 TPOT"}
    for key, label in names.items():
        fig.add_scatter(x=[p["rate"] for p in pts], y=[p[key] for p in pts], mode="lines+markers", name=f"{label} (ms)")
    xs = [p["rate"] for p in pts] or [0.0, 1.0]
    for o in r.sla.objectives:  # the SLA's limits as lines (a shape's y is log10 on a log axis; a trace's is not)
        label = f"SLA {o.stat.upper()} {o.metric.upper()} <= {o.limit_ms:g} ms"
        fig.add_scatter(x=[min(xs), max(xs)], y=[o.limit_ms, o.limit_ms], mode="lines+text", name=label,
                        text=[label, ""], textposition="top right", line={"dash": "dash", "color": "#b3261e"})
    if d["best"]:
        fig.add_vline(x=d["best"]["max_rate_per_replica"], line_dash="dot", line_color="#137333",
                      annotation_text="sustained rate", annotation_position="bottom right")
    fig.update_layout(title="Latency vs request rate (first choice, one replica)",
                      xaxis_title="requests/s per replica", yaxis_title="ms", yaxis_type="log", height=460)
    return fig


# (header, how to format a row): headers in words with units; numbers at fixed precision, intervals in brackets
_COLUMNS: list[tuple[str, Any]] = [
    ("#", lambda r, ranks: f"{r['rank']}{'=' if ranks.count(r['rank']) > 1 else ''}"),
    ("Config", lambda r, _: r["config"]),
    ("Goodput per GPU (req/s)", lambda r, _: fmt_interval(r["goodput_per_gpu"], r["goodput_per_gpu_interval"], 2)),
    ("Output tokens/s per GPU", lambda r, _: f"{r['output_tokens_per_s_per_gpu']:,.0f}"),
    ("Tokens/s per user", lambda r, _: f"{r['tokens_per_s_per_user']:.0f}"),
    ("Cost ($ per 1M output tokens)", lambda r, _: "-" if r["cost_per_1m_tokens"] is None
     else f"{r['cost_per_1m_tokens']:.3f}"),
    ("P95 TTFT (ms)", lambda r, _: f"{r['p95_ttft_ms']:,.0f}"),
    ("P95 TPOT (ms)", lambda r, _: f"{r['p95_tpot_ms']:.1f}"),
    ("KV headroom (GiB)", lambda r, _: f"{r['memory_headroom_gib']:.0f}"),
    ("Binds", lambda r, _: r["binds"]),
    ("Replicas", lambda r, _: str(r["replicas"])),
    ("GPUs in all", lambda r, _: str(r["total_gpus"])),
]


def _columns(rows: list[dict[str, Any]]) -> list[tuple[str, Any]]:
    """The table's columns, the fixed latency pair replaced by each latency the SLA bounds at its own statistic
    (as the terminal table: `plan_report.render_plan`)."""
    bounded = list((rows[0].get("sla_values_ms") or {}) if rows else {})
    if not bounded:
        return _COLUMNS

    def cell(key: str) -> Any:
        return lambda r, _: objective_value(r["sla_values_ms"][key], key)

    lat = [(f"{objective_label(k)} (ms)", cell(k)) for k in bounded]
    out = [c for c in _COLUMNS if not c[0].startswith(("P95 TTFT", "P95 TPOT"))]
    at = next(i for i, c in enumerate(out) if c[0] == "KV headroom (GiB)")
    return out[:at] + lat + out[at:]


def _table(rows: list[dict[str, Any]]) -> str:
    columns = _columns(rows)
    head = "".join(f"<th>{html.escape(c)}</th>" for c, _ in columns)
    ranks = [r["rank"] for r in rows]
    body = []
    for r in rows:
        cells = "".join(f"<td>{html.escape(fmt(r, ranks))}</td>" for _, fmt in columns)
        tied = r["tied_with_first"] and ranks.count(r["rank"]) > 1
        body.append(f"<tr class='{'tie' if tied else ''}'>{cells}</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def _launch_html(launch: dict[str, Any] | None) -> str:
    if not launch:
        return ""
    out = []
    for c in launch["commands"]:
        if c["command"] is None:
            out.append(f"<p><b>{html.escape(c['engine'])}</b>: not rendered ({html.escape(c['reason'] or '')})</p>")
            continue
        text = "".join(f"# {n}\n" for n in c["notes"])
        if c["prepare"]:
            text += f"# make the checkpoint first:\n{c['prepare']}\n"
        text += "".join(f"cat > {n} <<'EOF'\n{body}EOF\n" for n, body in c["files"].items())
        out.append(f"<h3>{html.escape(c['engine'])}</h3><pre>{html.escape(text + c['command'])}</pre>")
    return "".join(out)


def plan_figures(r: PlanResult, d: dict[str, Any] | None = None) -> dict[str, go.Figure]:
    """The report's charts: the Pareto frontier, the roofline, memory per GPU, latency vs rate (`d`: the plan's
    JSON form, `plan_to_dict(r)` when not given)."""
    d = plan_to_dict(r) if d is None else d
    return {"pareto": _pareto(d), "roofline": _roofline(r), "memory": _memory(r), "latency": _latency(d, r)}


def plan_html(r: PlanResult, d: dict[str, Any] | None = None) -> str:
    """The report of `r`; `d` is its JSON form with launch commands (`plan_to_dict(r, launch=...)`)."""
    d = plan_to_dict(r) if d is None else d
    figs = list(plan_figures(r, d).values())
    charts = [f.to_html(full_html=False, include_plotlyjs=(i == 0), div_id=f"chart{i}",
                        default_width="100%") for i, f in enumerate(figs)]
    trade = "".join(
        f"<h3>vs {html.escape(t['alternative'])}</h3><p>{html.escape(t.get('objective', ''))}</p><ul>"
        + "".join(f"<li class='good'>protects {html.escape(p)}</li>" for p in t["protects"])
        + "".join(f"<li class='bad'>gives up {html.escape(g)}</li>" for g in t["gives_up"]) + "</ul>"
        for t in d["tradeoffs"])
    st = d.get("steady_state") or {}
    ties = (f"<p class='tie'>Statistical tie for first: {html.escape(', '.join(d['ties']))} (overlapping paired "
            "intervals: judged without the stream's own load, which every candidate shares); the first choice is "
            "the one the closed-form capacity estimate favours, then fewer GPUs, lower accuracy risk.</p>"
            if len(d.get("ties", [])) > 1 else "")
    return f"""<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>flopwise plan: {html.escape(d['model'])}</title>
<style>body{{font-family:system-ui,sans-serif;margin:1.5em auto;max-width:1240px;padding:0 12px;box-sizing:border-box}}
table{{border-collapse:collapse;width:100%;table-layout:auto}}
td,th{{border:1px solid #ccc;padding:3px 5px;font-size:12px}}
th{{background:#f0f0f0;text-align:left}}td{{font-variant-numeric:tabular-nums;white-space:nowrap}}
tr.tie td{{background:#fff8e1}}.good{{color:#137333}}.bad{{color:#b3261e}}.tie{{color:#8a5a00}}
pre{{background:#f4f4f4;padding:8px;overflow-x:auto;font-size:12px}}
.charts{{display:grid;grid-template-columns:1fr 1fr;gap:8px}}
</style></head><body>
<h1>flopwise plan: {html.escape(d['model'])}</h1>
<p>Workload <b>{html.escape(d['workload'])}</b>, SLA <b>{html.escape(d['sla'])}</b> ({html.escape(d['sla_source'])}),
objective <b>{html.escape(d['objective'])}</b> ({html.escape(d['objective_source'])}). {d['num_candidates']} candidates,
{d['num_simulated']} simulated ({d['num_simulated_requests']:,} requests), {len(d['pruned'])} pruned by closed-form
bounds, in {d['wall_s']:.1f} s. Each rate is judged on {st.get('window_requests', 0):,} requests after a warm-up of
{st.get('warmup_requests', 0):,}; brackets are {st.get('confidence', 0.9):.0%} intervals.</p>
<h2>Ranked deployments</h2>{_table(d['ranked'])}{ties}
<h2>Charts</h2><div class="charts">{''.join(f'<div>{c}</div>' for c in charts)}</div>
<h2>Trade-offs of the first choice</h2>{trade or '<p>Only one config met the SLA.</p>'}
<h2>Launch commands</h2>{_launch_html(d['launch'])}
</body></html>
"""
