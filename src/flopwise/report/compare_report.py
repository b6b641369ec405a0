"""Terminal report of a trade-off ledger: one row per technique, each cell the value and its change from the
baseline, green when better and red when worse."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from flopwise.techniques.ledger import METRICS, THROUGHPUT_METHOD, Change, Ledger, LedgerRow
from flopwise.techniques.sim_throughput import SIM_METHOD
from flopwise.units import fmt_flops

_STYLE = {"better": "green", "worse": "red", "same": "dim"}


def _value(key: str, v: float) -> str:
    if key == "flops_per_output_token":
        return fmt_flops(v)
    if key == "max_concurrent_seqs":
        return f"{v:,.0f}"
    if key in ("output_tokens_per_s_at_sla", "output_tokens_per_s_per_gpu_at_sla"):
        return f"{v:,.0f}"
    if key == "memory_gib":
        return f"{v:.1f} GiB"
    return f"{v:.1f} ms" if v >= 10 else f"{v:.2f} ms"


def _cell(c: Change) -> str:
    text = _value(c.key, c.value)
    rel = c.relative
    if c.verdict == "same" or rel is None:
        return text
    arrow = "▲" if c.verdict == "better" else "▼"
    return f"{text}\n[{_STYLE[c.verdict]}]{arrow} {rel:+.0%}[/]"


def _rating(level: str, verdict: str) -> str:
    return f"[{_STYLE[verdict]}]{level}[/]" if verdict != "same" else level


def ledger_table(ledger: Ledger) -> Table:
    base = ledger.baseline
    t = Table(title="Trade-off ledger (change vs baseline: [green]better[/], [red]worse[/])", show_lines=True)
    t.add_column("technique", overflow="fold", max_width=28)
    for key, (label, _unit, _hb) in METRICS.items():
        t.add_column(label + ("*" if key.startswith("output_tokens_per_s") else ""), justify="right")
    t.add_column("accuracy risk")
    t.add_column("complexity")
    m = base.metrics
    t.add_row("baseline", *(_value(k, float(getattr(m, k))) for k in METRICS), "none", "none")
    for r in ledger.rows:
        changes = r.changes(m)
        cells = [_cell(changes[k]) for k in METRICS]
        v = r.rating_verdicts(base)
        t.add_row(r.label, *cells, _rating(r.accuracy_risk.level, v["accuracy_risk"]),
                  _rating(r.complexity.level, v["complexity"]))
    return t


def _notes(r: LedgerRow) -> list[str]:
    out = list(r.notes)
    if r.accuracy_risk.rank:
        src = f" [dim]({r.accuracy_risk.source})[/]" if r.accuracy_risk.source else ""
        out.append(f"accuracy: {r.accuracy_risk.note}{src}")
    if r.complexity.note:
        out.append(f"complexity: {r.complexity.note}")
    return out


def render_ledger(console: Console, ledger: Ledger) -> None:
    s = ledger.baseline.scenario
    dep = s.deployment
    console.print(f"[bold]{dep.model.name}[/] on {dep.num_gpus} x {dep.hardware.name} (tp={dep.tp}), weights "
                  f"{dep.weights.name}, KV {dep.kv.name}; batch {s.batch} x ({s.input_len} in, {s.output_len} out); "
                  f"SLA {ledger.sla}")
    console.print(ledger_table(ledger))
    method = SIM_METHOD if ledger.simulated else THROUGHPUT_METHOD
    console.print(f"* throughput at the SLA: {method}.")
    static = [r.label for r in ledger.rows if ledger.simulated and r.metrics.throughput_method == "static"]
    if static:
        console.print(f"  {', '.join(static)}: the static-batch figure instead ({THROUGHPUT_METHOD}): the engine's "
                      "scheduler policy is not simulated with speculative decoding", highlight=False)
    missed = [r.label for r in (ledger.baseline, *ledger.rows) if not r.metrics.output_tokens_per_s_at_sla]
    if len(missed) == len(ledger.rows) + 1:
        console.print(f"[bold red]no row meets the SLA[/] ({ledger.sla}) at any load, not even one request at a "
                      "time: throughput at the SLA is 0 in every row; loosen --sla", highlight=False)
    elif missed:
        many = len(missed) > 1
        console.print(f"[bold red]{', '.join(missed)}[/] {'miss' if many else 'misses'} the SLA ({ledger.sla}) even "
                      f"one request at a time: {'their' if many else 'its'} throughput at the SLA is 0",
                      highlight=False)
    fe = dep.engine.frontend
    served = ("through the engine's HTTP server (estimate's --frontend http; its default is none)" if fe is not None
              else "offline, no HTTP server")
    console.print(f"TTFT/TPOT: a static batch as in `flopwise estimate`, {served}; ITL tail: the longest token gap "
                  "of running requests while a new prompt is prefilled; memory: weights and pinned blocks per GPU.",
                  highlight=False)
    for r in ledger.rows:
        notes = _notes(r)
        if notes:
            console.print(f"[bold]{r.label}[/]")
            for n in notes:
                console.print(f"  - {n}", highlight=False)
    for why in ledger.skipped:
        console.print(f"[yellow]left out[/] {why}", highlight=False)
