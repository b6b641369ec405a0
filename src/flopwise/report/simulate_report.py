"""Terminal report of a simulated run: setup, latency percentiles, throughput and goodput, where the time went."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table

from flopwise.specs.sla import parse_sla
from flopwise.units import fmt_rate

__all__ = ["render_simulation"]


def _fmt(v: float | None, unit: str = "") -> str:
    return "-" if v is None else f"{v:,.1f}{unit}"


def _ep(st: dict[str, Any]) -> str:
    """Pipeline stages (and the micro-batches the engine keeps in them), expert parallelism, data-parallel attention
    and nodes where used (older summaries have no such keys)."""
    parts = [f"{k}={st[k]:g}" for k in ("pp", "dp", "ep", "expert_skew", "nodes") if st.get(k, 1) != 1]
    if st.get("hosts", 1) != st.get("nodes", 1):  # a node of several hosts (GB200 NVL72's trays)
        parts.append(f"hosts={st['hosts']:g}")
    if (mb := st.get("pipeline_batches", 1)) > 1:
        parts.append(f"{mb} micro-batches in flight")
    return ", " + ", ".join(parts) if parts else ""


def render_simulation(console: Console, s: dict[str, Any]) -> None:
    """The CLI's report of a simulated run from its `--json` summary."""
    st = s["setup"]
    rps = st.get("replicas_per_server", 1)
    pools = (s.get("fleet") or {}).get("pools") or []
    if len(pools) > 1:  # pools of their own shapes (disaggregated prefill / decode): each as it is
        layout = " + ".join(f"{p['name']} {p['replicas']}x tp={p['tp']}" for p in pools)
    else:
        layout = f"tp={st['tp']}{_ep(st)}, replicas={st['replicas']}{'' if rps == 1 else f' ({rps} per server)'}"
    console.print(f"[bold]{st['model']}[/] on {st['num_gpus']}x {st['gpu']} ({layout}, "
                  f"{st['weights']}/{st['kv']} KV), engine {st['engine']}"
                  f"{'' if st['frontend'] == 'none' else ' behind its HTTP server (' + str(st['endpoint']) + ')'}"
                  f"{f' streaming every {si} tokens' if (si := st.get('stream_interval') or 1) > 1 else ''}, "
                  f"scheduler {st['scheduler']}, max_num_seqs={st['max_num_seqs']}, "
                  f"max_num_batched_tokens={st['max_num_batched_tokens']}"
                  f"{f' (picked by {by} for this workload)' if (by := st.get('batch_knobs_from')) else ''}, "
                  f"KV pool {st['kv_capacity_tokens']:,} tokens")
    if s.get("speculative"):
        sp = s["speculative"]
        tok = sp["tokens_per_verified_decode"]
        console.print(f"speculative {st['speculative']}: {sp['verified_positions']} positions verified per decode, "
                      f"{'-' if tok is None else f'{tok:.2f}'} tokens emitted per verified decode "
                      f"(expected {sp['expected_tokens_per_step']:.2f})")
    if st.get("sglang"):
        console.print("sglang knobs: " + ", ".join(f"{k}={v}" for k, v in st["sglang"].items()))
    window = f" (figures: the {s['window']['num_requests']} after the warm-up)" if s.get("window") else ""
    t = Table(title=f"{s['num_requests']} requests of '{st['workload']}' over {s['duration_s']:.1f} s{window}")
    t.add_column("ms")
    for c in ("mean", "p50", "p90", "p95", "p99"):
        t.add_column(c, justify="right")
    # queue_ms runs from arrival to the first scheduled computation (the API server's part included); the
    # breakdown below splits it into the frontend and the engine's own queue
    for key, label in (("ttft_ms", "ttft"), ("tpot_ms", "tpot"), ("itl_ms", "itl"), ("e2e_ms", "e2e"),
                       ("queue_ms", "queue (arrival to scheduled)")):
        t.add_row(label, *(_fmt(s[key][c]) for c in ("mean", "p50", "p90", "p95", "p99")))
    console.print(t)
    goodput = (f"goodput {fmt_rate(s['goodput'])} req/s (SLA attainment {s['sla_attainment']:.1%})" if s.get("sla")
               else "no SLA given (--sla for goodput)")
    console.print(f"throughput {fmt_rate(s['request_throughput'])} req/s, {s['output_tokens_per_s']:,.0f} output "
                  f"tok/s; {goodput}; preemptions {s['preemptions']}")
    if s.get("num_failed"):
        kinds = ", ".join(f"{k} {n:,}" for k, n in sorted((s.get("errors_by_kind") or {}).items()))
        console.print(f"[bold red]{s['num_failed']:,} of {s['num_requests']:,} requests failed[/]"
                      + (f" ({kinds})" if kinds else "") + ": the figures above count the completed ones")
    br = s["time_breakdown_ms"]
    if br["frontend_ms"] is not None:
        util = s["frontend_utilization"]
        names = {"queue_ms": "engine queue"}  # after the API server (the table's queue includes it)
        console.print("where the time went (mean ms): " + ", ".join(
            f"{names.get(k, k.removesuffix('_ms'))} {v:,.1f}" for k, v in br.items() if v is not None)
            + ("" if util is None else f"; API server CPU busy {util:.0%}") + f"; bottleneck: {s['bottleneck']}")
    console.print(f"running batch mean {s['running_batch']['mean']:.1f} (max {s['running_batch']['max']}); KV usage "
                  f"mean {s['kv_utilization']['mean']:.1%} (max {s['kv_utilization']['max']:.1%}); prefix-cache hits "
                  f"{s['prefix_cache_hit_rate']:.1%}; time in prefill {s['time_in_prefill_s']:.1f} s, decode "
                  f"{s['time_in_decode_s']:.1f} s; {s['num_steps']:,} steps simulated in {s['sim_wall_s']:.2f} s")
    if s.get("budget_stalls"):
        n = s["budget_stalls"]
        console.print(f"[yellow]{n:,} prompt{'s' if n > 1 else ''} waited at the head of the queue[/] for the running "
                      f"requests to leave room for {'them' if n > 1 else 'it'} in the "
                      f"{s['setup']['max_num_batched_tokens']:,}-token step budget, and every request behind "
                      "waited too: without chunked prefill the engine schedules a prompt whole or not at all (turn "
                      "chunked prefill on, or raise the budget to the longest prompt plus the running batch)",
                      highlight=False)
    if s.get("fleet"):
        render_fleet(console, s["fleet"])
    if s.get("sla"):
        ok = "[green]met[/]" if s["sla_met"] else "[red]missed[/]"
        console.print(f"SLA {s['sla']}: {ok} on the run's percentiles: " + ", ".join(
            f"{k} {'ok' if v else 'FAIL'}" for k, v in s["sla_objectives_met"].items()))
        if s["sla_met"] and s["sla_attainment"] < 0.99:  # the two tests differ: say which the goodput counts
            metrics = dict.fromkeys(o.metric for o in parse_sla(s["sla"]).objectives)
            own = [m.upper() for m in metrics if m != "itl"]
            parts = [f"their own {' and '.join(own)}"] if own else []
            bounded = " and ".join(parts + (["each of their token gaps"] if "itl" in metrics else []))
            console.print(f"  per request, {s['sla_attainment']:.1%} meet the bounds on {bounded} (the "
                          "goodput above, DistServe's test): a percentile over all requests can hold while many of "
                          "them miss", highlight=False)
    if s.get("max_rate"):
        mr = s["max_rate"]
        lo, hi = mr["request_rate_interval"]
        w = mr["window_summary"]
        console.print(f"[bold]sustained rate meeting the SLA: {mr['request_rate']:.3g} req/s[/] "
                      f"({lo:.3g}-{hi:.3g} at 90% confidence; closed-form ceiling {mr['upper_bound']:.3g} req/s"
                      f"{', reached' if mr['capped_by_ceiling'] else ''}), measured on {w['num_requests']} requests "
                      f"after the warm-up: P95 TTFT {_fmt(w['ttft_ms']['p95'])} ms, P95 TPOT "
                      f"{_fmt(w['tpot_ms']['p95'])} ms")


def render_fleet(console: Console, f: dict[str, Any]) -> None:
    """A fleet's pools, cost, KV hand-off, autoscaling and per-replica table (`summary["fleet"]`)."""
    pools = "; ".join(f"{p['role']} {p['replicas']}x {p['gpu']} tp{p['tp']}"
                      + "".join(f" {k}{p[k]}" for k in ("pp", "dp", "ep") if p.get(k, 1) != 1) for p in f["pools"])
    console.print(f"fleet ({f['serving']}, router {f['router']}): {pools}; {f['gpu_hours']:.2f} GPU-hours"
                  + ("" if not f["cost_usd"] else f", ${f['cost_usd']:.2f}")
                  + ("" if f["cost_per_million_output_tokens_usd"] is None
                     else f" (${f['cost_per_million_output_tokens_usd']:.2f} per million output tokens)"))
    kv = f.get("kv_transfer")
    if kv:
        console.print(f"KV hand-off over {kv['link']}: {kv['num_transfers']} transfers of "
                      f"{kv['bytes_mean'] / 1e6:,.1f} MB mean, {_fmt(kv['ms_mean'])} ms mean, "
                      f"p95 {_fmt(kv['ms_p95'])} ms{' (layer-wise overlap)' if kv['layerwise'] else ''}")
    if f.get("autoscale"):
        a = f["autoscale"]
        console.print(f"autoscale {a['min_replicas']}..{a['max_replicas']}: {a['replicas_started']} started, "
                      f"{a['replicas_drained']} drained, at most {a['max_replicas_used']} replicas serving "
                      f"({a['max_replicas_asked']} up or starting); cold start {a['cold_start_s']:.0f} s")
    t = Table(title="replicas")
    for c in ("#", "pool", "state", "requests", "busy", "KV mean", "TTFT mean ms", "TTFT p95 ms"):
        t.add_column(c, justify="right")
    for r in f["replicas"][:64]:
        t.add_row(str(r["index"]), r["pool"], r["state"], str(r["num_requests"]), f"{r['busy_fraction']:.0%}",
                  f"{r['kv_utilization_mean']:.0%}", _fmt(r["ttft_ms_mean"]), _fmt(r["ttft_ms_p95"]))
    console.print(t)
