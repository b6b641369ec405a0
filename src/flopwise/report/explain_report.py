"""Terminal rendering of `flopwise explain`: one titled paragraph per section."""

from __future__ import annotations

from rich.console import Console

from flopwise.techniques.explain import Explanation


def render_explanation(console: Console, ex: Explanation) -> None:
    s, d = ex.scenario, ex.scenario.deployment
    console.print(f"[bold]{d.model.summary()}[/]")
    console.print(f"on {d.num_gpus} x {d.hardware.name} (tp={d.tp}), weights {d.weights.name}, KV {d.kv.name}; "
                  f"batch {s.batch}, {s.input_len} in / {s.output_len} out\n")
    for i, sec in enumerate(ex.sections, 1):
        console.print(f"[bold cyan]{i}. {sec.title}[/]")
        console.print(sec.text, highlight=False)
        console.print()
