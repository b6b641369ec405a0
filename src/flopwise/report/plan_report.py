"""Terminal report of a plan: ranked table, Pareto frontier, trade-offs, launch commands."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.syntax import Syntax
from rich.table import Table


def _money(x: float | None) -> str:
    return "-" if x is None else f"${x:.3f}"


def render_plan(console: Console, d: dict[str, Any], top: int = 10) -> None:
    rate = f", {d['rate']:g} req/s in all" if d["rate"] else ""
    console.print(f"[bold]Plan for {d['model']}[/]: workload {d['workload']}{rate}, SLA {d['sla']}, "
                  f"objective {d['objective']}; {d['num_candidates']} candidates, {d['num_simulated']} simulated, "
                  f"{len(d['pruned'])} pruned by bounds, in {d['wall_s']:.1f} s")
    t = Table(title="Ranked deployments (per replica, at the highest rate meeting the SLA)")
    cols = ("#", "config", "goodput/GPU (req/s)", "out tok/s/GPU", "tok/s/user", "$/1M tok", "P95 TTFT", "P95 TPOT",
            "KV headroom", "binds")
    if d["rate"]:
        cols += ("replicas", "GPUs")
    for c in cols:
        t.add_column(c, justify="left" if c in ("config", "binds") else "right")
    front = {r["config"] for r in d["pareto_frontier"]}
    for i, r in enumerate(d["ranked"][:top], 1):
        cells = [str(i), r["config"] + (" *" if r["config"] in front else ""), f"{r['goodput_per_gpu']:.2f}",
                 f"{r['output_tokens_per_s_per_gpu']:,.0f}", f"{r['tokens_per_s_per_user']:.0f}",
                 _money(r["cost_per_1m_tokens"]), f"{r['p95_ttft_ms']:.0f} ms", f"{r['p95_tpot_ms']:.1f} ms",
                 f"{r['memory_headroom_gib']:.0f} GiB", r["binds"]]
        if d["rate"]:
            cells += [str(r["replicas"]), str(r["total_gpus"])]
        t.add_row(*cells)
    console.print(t)
    console.print("* on the Pareto frontier of throughput per GPU vs tokens/s per user")
    if d["tradeoffs"]:
        console.print("[bold]What the first choice protects and gives up[/]")
        for tr in d["tradeoffs"]:
            console.print(f"  vs {tr['alternative']}:")
            for p in tr["protects"]:
                console.print(f"    [green]+ protects[/] {p}")
            for g in tr["gives_up"]:
                console.print(f"    [red]- gives up[/] {g}")
    if d["launch"]:
        console.print("[bold]Launch the first choice[/]")
        for key in ("vllm", "sglang", "trtllm"):
            console.print(Syntax(d["launch"][key], "bash", word_wrap=True))
        console.print(Syntax("# extra-llm-api-options.yml\n" + d["launch"]["trtllm_extra_llm_api_options"], "yaml"))
    if d["not_fitting"]:
        console.print("Did not fit: " + "; ".join(d["not_fitting"][:5]))
