"""Terminal report of a plan: the header (workload, SLA and objective with where they came from, the
sustained-rate window), the ranked table with intervals and ties, the Pareto frontier, trade-offs, and launch
commands printed as plain text (no padding, no wrapping: each line pastes as it is printed)."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table

__all__ = ["render_plan", "fmt_interval"]

_AXIS = {"goodput": ("goodput/GPU (req/s)", "goodput_per_gpu", 2),
         "throughput": ("out tok/s/GPU", "output_tokens_per_s_per_gpu", 0),
         "cost": ("$/1M tok", "cost_per_1m_tokens", 3),
         "latency": ("tok/s/user @load", None, 0)}


def _money(x: float | None) -> str:
    return "-" if x is None else f"${x:.3f}"


def objective_label(key: str) -> str:
    """An SLA objective's column title: "p99_ttft" -> "P99 TTFT", "mean_itl" -> "mean ITL"."""
    stat, metric = key.split("_")
    return f"{stat.upper() if stat != 'mean' else stat} {metric.upper()}"


def objective_value(ms: float | None, key: str) -> str:
    """An SLA objective's value (ms) as the plan tables print it: whole ms for TTFT and E2E, one decimal for the
    per-token latencies, '-' where there is none."""
    return "-" if ms is None else f"{ms:,.{0 if key.endswith(('ttft', 'e2e')) else 1}f}"


def _ms_text(value: str) -> str:
    return value if value == "-" else f"{value} ms"


def _ms(x: float | None, digits: int) -> str:
    """A latency in ms, '-' where there is none (no second token: no TPOT)."""
    return "-" if x is None else f"{x:,.{digits}f} ms"


def fmt_interval(point: float | None, iv: list[float] | None, digits: int, money: bool = False) -> str:
    """'34.9 [34.5-37.4]' (fixed precision)."""
    if point is None:
        return "-"
    pre = "$" if money else ""
    text = f"{pre}{point:,.{digits}f}"
    if iv and iv[0] is not None and iv[1] is not None:
        text += f" [{iv[0]:,.{digits}f}-{iv[1]:,.{digits}f}]"
    return text


def _header(console: Console, d: dict[str, Any]) -> None:
    rate = f", {d['rate']:g} req/s in all" if d["rate"] else ""

    def src(s: str) -> str:
        return "" if s == "given" else f" ({s})"

    console.print(f"[bold]Plan for {d['model']}[/]: workload {d['workload']}{rate}; SLA "
                  f"{d['sla']}{src(d['sla_source'])}; "
                  f"objective {d['objective']}{src(d['objective_source'])}")
    if d.get("workload_note"):
        console.print(f"Note: {d['workload_note']}", highlight=False)
    st = d.get("steady_state") or {}
    console.print(f"{d['num_candidates']} candidates, {d['num_simulated']} simulated "
                  f"({d['num_simulated_requests']:,} requests), {len(d['pruned'])} pruned by closed-form bounds, "
                  f"in {d['wall_s']:.1f} s. Each rate is judged on {st.get('window_requests', 0):,} requests after a "
                  f"warm-up of {st.get('warmup_requests', 0):,} (no growing backlog, never above the capacity "
                  "ceiling); "
                  f"\\[brackets]: {st.get('confidence', 0.9):.0%} intervals, seed {st.get('seed', 0)} (ties are judged "
                  "without the stream's own load, which every candidate shares)")
    if d.get("checkpoint_weights"):
        console.print(f"the checkpoint ships {d['checkpoint_weights']} weights (its quantization_config): planned in "
                      "that format (as the engine's own file holds it) or narrower")
    if d["objective"] == "latency":
        if d.get("reference_load_per_gpu"):
            console.print(f"latency compared at {d['reference_load_per_gpu']:.3g} req/s per GPU for every config (the "
                          "highest load every simulated config sustains); pass --rate for your own load")
        else:
            console.print("latency compared at the --rate split over the replicas each config needs")


def render_plan(console: Console, d: dict[str, Any], top: int = 10) -> None:
    _header(console, d)
    obj = d["objective"]
    name, key, digits = _AXIS[obj]
    t = Table(title="Ranked deployments (per replica, at the highest sustained rate within the SLA; '=' marks a "
                    "statistical tie)")
    cols = ["#", "config", name]
    if obj != "goodput":
        cols.append("goodput/GPU (req/s)")
    # the latencies the SLA bounds, each at its own statistic (P95 TTFT and TPOT where it bounds none)
    first = d["ranked"][0] if d["ranked"] else {}
    bounded = list(first.get("sla_values_ms") or {})
    lat_names = [objective_label(k) for k in bounded] if bounded else ["P95 TTFT", "P95 TPOT"]
    rest = ["out tok/s/GPU", "tok/s/user", "$/1M tok", *lat_names, "KV headroom", "binds"]
    shown = [c != name for c in rest]  # the objective's own column leads the row once
    cols += [c for c, keep in zip(rest, shown, strict=True) if keep]
    if d["rate"]:
        cols += ["replicas", "GPUs"]
    for c in cols:
        t.add_column(c, justify="left" if c in ("config", "binds") else "right")
    front = {r["config"] for r in d["pareto_frontier"]}
    ranks = [r["rank"] for r in d["ranked"]]
    for r in d["ranked"][:top]:
        tied = ranks.count(r["rank"]) > 1
        if obj == "latency":
            al = r.get("at_load") or {}
            lead = fmt_interval(al.get("tokens_per_s_per_user"), al.get("tokens_per_s_per_user_interval"), 0)
        elif obj == "cost":
            lead = fmt_interval(r["cost_per_1m_tokens"], r["cost_per_1m_tokens_interval"], 3, money=True)
        else:
            lead = fmt_interval(r[key], r[f"{key}_interval"], digits)
        cells = [f"{r['rank']}{'=' if tied else ''}", r["config"] + (" *" if r["config"] in front else ""), lead]
        if obj != "goodput":
            cells.append(f"{r['goodput_per_gpu']:.2f}")
        lats = ([_ms_text(objective_value(r["sla_values_ms"][k], k)) for k in bounded] if bounded
                else [_ms(r["p95_ttft_ms"], 0), _ms(r["p95_tpot_ms"], 1)])
        values = [f"{r['output_tokens_per_s_per_gpu']:,.0f}", f"{r['tokens_per_s_per_user']:.0f}",
                  _money(r["cost_per_1m_tokens"]), *lats, f"{r['memory_headroom_gib']:.0f} GiB", r["binds"]]
        cells += [v for v, keep in zip(values, shown, strict=True) if keep]
        if d["rate"]:
            cells += [str(r["replicas"]), str(r["total_gpus"])]
        t.add_row(*cells)
    console.print(t)
    console.print("* on the Pareto frontier of goodput per GPU vs tokens/s per user")
    values = [r["objective_value"] for r in d["ranked"][:top]]
    if any(a < b for a, b in zip(values, values[1:], strict=False)):
        console.print("rows come in tie groups (judged on the paired intervals, JSON 'objective_paired_interval'), "
                      "the group with the best value first; inside a group the order is sample-free (the closed-form "
                      "estimate, then fewer GPUs): a row can show a lower value than a later one",
                      highlight=False)
    if len(d.get("ties", [])) > 1:
        console.print(f"[bold]Statistical tie for first[/] ({', '.join(d['ties'])}): their paired intervals overlap, "
                      "so the first choice is the one the closed-form capacity estimate favours, then fewer GPUs per "
                      "replica and lower accuracy risk; simulate more (--max-effort, --num-requests) to separate them")
    if d["tradeoffs"]:
        console.print("[bold]What the first choice protects and gives up[/]")
        for tr in d["tradeoffs"]:
            console.print(f"  vs {tr['alternative']}: {tr.get('objective', '')}", markup=False)
            for p in tr["protects"]:
                console.print(f"    [green]+ protects[/] {p}")
            for g in tr["gives_up"]:
                console.print(f"    [red]- gives up[/] {g}")
    if d["launch"]:
        first = d["ranked"][0] if d["ranked"] else {}
        _launch(console, d["launch"], first.get("replicas") if d["rate"] else None)
    if d["infeasible"]:
        more = len(d["infeasible"]) - 5
        missed = "; ".join(f"{i['config']} ({i['reason']})" for i in d["infeasible"][:5])
        tail = f"; and {more} more (--json lists them)" if more > 0 else ""
        _plain(console, f"Cannot meet the SLA: {missed}{tail}")
    if d["not_fitting"]:
        console.print("Did not fit: " + "; ".join(d["not_fitting"][:5]))
    if d.get("serving"):
        _render_serving(console, d["serving"])


def _plain(console: Console, text: str) -> None:
    console.print(text, markup=False, highlight=False, soft_wrap=True)


def _launch(console: Console, launch: dict[str, Any], replicas: int | None = None) -> None:
    console.print(f"[bold]Launch the first choice[/] (simulated on {launch['engine']}; the other engines get the "
                  "same knobs, and each memory fraction is computed for what that engine means by it)")
    if replicas and replicas > 1:  # the --rate needs that many: one server each, a load balancer in front
        console.print(f"{replicas} replicas carry the --rate: start the command {replicas} times, each on GPUs of "
                      "its own (another host, or CUDA_VISIBLE_DEVICES and --port apart), behind a load balancer")
    for c in launch["commands"]:
        if c["command"] is None:
            console.print(f"  {c['engine']}: not rendered ({c['reason']})", markup=False)
            continue
        console.print(f"[bold]# {c['engine']}[/]")
        for note in c["notes"]:
            _plain(console, f"# {note}")
        if c["prepare"]:
            _plain(console, "# make the checkpoint first:")
            _plain(console, c["prepare"])
        for name, text in c["files"].items():
            _plain(console, f"cat > {name} <<'EOF'\n{text}EOF")
        _plain(console, c["command"])


def _render_serving(console: Console, s: dict[str, Any]) -> None:
    """The aggregated-vs-disaggregated fleet comparison (`plan --serving aggregated,disaggregated`)."""
    sc = s["screening"]
    t = Table(title=f"fleets of {s['total_gpus']}x {s['gpu']} ({s['weights']}/{s['kv']} KV), each at its highest "
                    f"sustained rate meeting the SLA (* screened: {sc['window_effort']:g} x the window, to "
                    f"{sc['rate_tolerance']:.0%})")
    for c in ("serving", "layout", "req/s", "interval", "out tok/s/GPU", "tok/s/user", "p95 TTFT ms", "p95 TPOT ms",
              "binds"):
        t.add_column(c)
    for r in s["candidates"]:
        lo, hi = r["max_request_rate_interval"]
        mark = "*" if r["screened"] else ""
        t.add_row(r["serving"], r["layout"], f"{r['max_request_rate']:.2f}{mark}",
                  f"{lo:.0f}-{hi:.0f}" if r["max_request_rate"] > 0 else "-",
                  f"{r['output_tokens_per_s_per_gpu']:,.0f}",
                  "-" if r["tokens_per_s_per_user"] is None else f"{r['tokens_per_s_per_user']:.0f}",
                  "-" if r["p95_ttft_ms"] is None else f"{r['p95_ttft_ms']:.0f}",
                  "-" if r["p95_tpot_ms"] is None else f"{r['p95_tpot_ms']:.1f}", r["binding"] or "-")
    console.print(t)
    if s.get("note"):
        _plain(console, s["note"])
    if s.get("disaggregated_over_aggregated") is not None:
        console.print(f"[bold]{s['winner']} wins[/]: best disaggregated / best aggregated output tokens/s per GPU = "
                      f"{s['disaggregated_over_aggregated']:.2f}")
    best = s.get("best", {}).get("disaggregated")
    for family, launch in (s.get("disaggregated_launch") or {}).items():
        if "reason" in launch:
            _plain(console, f"  {launch.get('engine', family)}: disaggregated fleet not rendered ({launch['reason']})")
            continue
        console.print(f"[bold]Launch the best disaggregated fleet ({best['layout'] if best else ''}) on {family}[/]")
        _disaggregated(console, launch)
        if launch.get("dynamo"):
            d = launch["dynamo"]
            console.print(f"[bold]# the same fleet under NVIDIA Dynamo {d['version']}[/]")
            _disaggregated(console, d, router=d["frontend"], label="frontend (the OpenAI API; it finds the workers)")
        if launch.get("llm_d"):
            d = launch["llm_d"]
            console.print(f"[bold]# the same fleet on Kubernetes with llm-d ({d['chart']})[/]")
            for note in d["notes"]:
                _plain(console, f"# {note}")
            for name, text in d["files"].items():
                _plain(console, f"cat > {name} <<'EOF'\n{text}EOF")
            for cmd in d["commands"]:
                _plain(console, cmd)


def _disaggregated(console: Console, launch: dict[str, Any], router: str | None = None, label: str = "router") -> None:
    for note in launch["notes"]:
        _plain(console, f"# {note}")
    for name, text in (launch.get("files") or {}).items():
        _plain(console, f"cat > {name} <<'EOF'\n{text}EOF")
    for pool in launch["pools"]:
        _plain(console, f"# {pool['role']}: {pool['replicas']} x TP {pool['tp']}")
        for cmd in pool["commands"]:
            _plain(console, cmd)
    if router or launch.get("router"):
        _plain(console, f"# {label}")
        _plain(console, router or launch["router"])
