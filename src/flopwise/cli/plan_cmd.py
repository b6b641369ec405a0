"""`flopwise plan`: the cheapest deployments that meet an SLA, why, and how to launch them."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.progress import Progress

from rich.table import Table

from flopwise.api import deployment
from flopwise.cli._app import app, console, err_console, print_json
from flopwise.plan.fleet import SERVING_MODES, fleet_plan_to_dict, plan_fleet
from flopwise.plan.search import OBJECTIVES, PlanRequest, plan, plan_to_dict
from flopwise.plan.space import DEFAULT_GPUS, SearchSpace
from flopwise.report.plan_report import render_plan
from flopwise.specs.defaults import DEFAULT_ENGINE
from flopwise.specs.hardware import get_hardware
from flopwise.specs.sla import parse_sla
from flopwise.specs.speculative import parse_speculative
from flopwise.workload import build_workload


def _csv(text: str | None, cast=str) -> tuple | None:
    """A comma-separated option as a tuple; a value that is not of the option's type is one clear error."""
    if not text:
        return None
    try:
        return tuple(cast(x.strip()) for x in text.split(",") if x.strip())
    except ValueError:
        raise typer.BadParameter(f"expected comma-separated {cast.__name__} values, got '{text}'") from None


@app.command("plan")
def plan_cmd(
    model: Annotated[str, typer.Option(help="Catalog id or alias, or a config.json path.")] = "meta-llama/Llama-3.1-8B",
    gpus: Annotated[str, typer.Option(help="Comma-separated hardware ids to consider.")] = ",".join(DEFAULT_GPUS),
    max_gpus: Annotated[int, typer.Option("--max-gpus", help="Most GPUs one replica may use.")] = 8,
    workload: Annotated[str, typer.Option(help="Named workload: chat, rag, code, summarize, batch.")] = "chat",
    input_len: Annotated[int | None, typer.Option("--input-len", help="Fixed prompt tokens (overrides the workload).")] = None,
    output_len: Annotated[int | None, typer.Option("--output-len", help="Fixed output tokens (overrides the workload).")] = None,
    rate: Annotated[float | None, typer.Option(help="Total requests/s to serve (sizes the replicas).")] = None,
    sla: Annotated[str, typer.Option(help='Objectives, e.g. "p95_ttft<=300ms,p95_tpot<=50ms".')] = "p95_ttft<=300ms,p95_tpot<=50ms",
    objective: Annotated[str, typer.Option(help=f"One of {', '.join(OBJECTIVES)}.")] = "goodput",
    tp: Annotated[str | None, typer.Option(help="Pin TP degrees, e.g. 1,2,4 (default: smallest that fits and 2x).")] = None,
    weights: Annotated[str, typer.Option(help="Weight formats to try.")] = "bf16,fp8,int4-awq",
    kv: Annotated[str, typer.Option(help="KV formats to try.")] = "bf16,fp8",
    max_num_seqs: Annotated[str | None, typer.Option("--max-num-seqs", help="Values to try (default: the engine's for each GPU).")] = None,
    max_num_batched_tokens: Annotated[str | None, typer.Option("--max-num-batched-tokens", help="Values to try (default: the engine's).")] = None,
    engine: Annotated[str, typer.Option(help="Serving engine and version, e.g. vllm, vllm@0.11, sglang, trtllm (see `flopwise engines`).")] = DEFAULT_ENGINE,
    prefix_caching: Annotated[str, typer.Option("--prefix-caching", help="on, off, or both")] = "on",
    speculative: Annotated[list[str] | None, typer.Option("--speculative", help="Speculative decoding to try, with a stated acceptance: 'eagle,k=3,accepted=2.6', 'draft:llama-3.2-1b,k=4,alpha=0.7', 'ngram,k=4,alpha=0.5', or 'none'. Repeat for more (default: none).")] = None,
    num_requests: Annotated[int, typer.Option("--num-requests", help="Simulated requests per probe.")] = 200,
    seed: Annotated[int, typer.Option(help="Random seed of the request sample.")] = 0,
    hardware_file: Annotated[Path | None, typer.Option("--hardware-file", help="TOML/YAML adding or overriding hardware.")] = None,
    serving: Annotated[str, typer.Option("--serving", help="aggregated (the search above), or aggregated,disaggregated: also compare fleets of --max-gpus GPUs of the first --gpus type, aggregated replicas vs prefill/decode pools, each at its highest rate meeting --sla.")] = "aggregated",
    html_out: Annotated[Path | None, typer.Option("--html", help="Write a self-contained HTML report here.")] = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """Search GPUs, parallelism, formats, engine knobs and speculative decoding for the most goodput per GPU (or
    dollar) inside an SLA."""
    pc = {"on": (True,), "off": (False,), "both": (True, False)}.get(prefix_caching)
    if pc is None:
        raise typer.BadParameter("--prefix-caching must be on, off or both")
    space = SearchSpace(gpus=_csv(gpus), max_gpus=max_gpus, tps=_csv(tp, int), weights=_csv(weights), kvs=_csv(kv),
                        max_num_seqs=_csv(max_num_seqs, int) or (None,),
                        max_num_batched_tokens=_csv(max_num_batched_tokens, int) or (None,), engine=engine,
                        prefix_caching=pc,
                        speculative=tuple(parse_speculative(t) for t in speculative) if speculative else (None,))
    req = PlanRequest(model=model, workload=workload, input_len=input_len, output_len=output_len, rate=rate, sla=sla,
                      objective=objective, space=space, num_requests=num_requests, seed=seed,
                      hardware_file=str(hardware_file) if hardware_file else None)
    if err_console.is_terminal and not json_out:
        with Progress(console=err_console, transient=True) as bar:
            task = bar.add_task("planning", total=None)
            result = plan(req, progress=lambda done, total: bar.update(task, completed=done, total=total))
    else:
        result = plan(req)
    d = plan_to_dict(result)
    modes = _csv(serving) or ("aggregated",)
    bad = [m for m in modes if m not in SERVING_MODES]
    if bad:
        raise typer.BadParameter(f"--serving takes {', '.join(SERVING_MODES)}, got {', '.join(bad)}")
    if "disaggregated" in modes:
        d["serving"] = _fleet_plan(model, (_csv(gpus) or DEFAULT_GPUS)[0], max_gpus, modes, req, engine,
                                   hardware_file, _csv(weights), _csv(kv))
    if html_out:
        from flopwise.report.plan_html import plan_html

        html_out.write_text(plan_html(result))
        d["html"] = str(html_out)
    if json_out:
        print_json(d)
    else:
        render_plan(console, d)
        if "serving" in d:
            _render_serving(d["serving"])
        if html_out:
            console.print(f"HTML report: {html_out}")


def _fleet_plan(model: str, gpu: str, total: int, modes: tuple, req: PlanRequest, engine: str,
                hardware_file: Path | None, weights: tuple | None, kvs: tuple | None) -> dict:
    """Aggregated vs disaggregated fleets of `total` GPUs (plan/fleet.py), in the first weight and KV format."""
    hw = get_hardware(gpu, hardware_file)
    w, k = (weights or ("bf16",))[0], (kvs or ("bf16",))[0]

    def make(t: int, n: int):
        return deployment(model, hw, tp=t, num_gpus=t * n, weights=w, kv=k, engine=engine)

    def workload_at(r: float):
        return build_workload(num_requests=req.num_requests, workload=req.workload, input_len=req.input_len,
                              output_len=req.output_len, request_rate=r, seed=req.seed)

    out = fleet_plan_to_dict(plan_fleet(make, total, workload_at, parse_sla(req.sla), modes), req.rate)
    out.update({"gpu": gpu, "total_gpus": total, "weights": w, "kv": k})
    return out


def _render_serving(s: dict) -> None:
    t = Table(title=f"fleets of {s['total_gpus']}x {s['gpu']} ({s['weights']}/{s['kv']} KV), each at its highest "
                    "rate meeting the SLA")
    for c in ("serving", "layout", "req/s", "out tok/s/GPU", "tok/s/user", "p95 TTFT ms", "p95 TPOT ms", "binds"):
        t.add_column(c)
    for r in s["candidates"]:
        t.add_row(r["serving"], r["layout"], f"{r['max_request_rate']:.2f}", f"{r['output_tokens_per_s_per_gpu']:,.0f}",
                  "-" if r["tokens_per_s_per_user"] is None else f"{r['tokens_per_s_per_user']:.0f}",
                  "-" if r["p95_ttft_ms"] is None else f"{r['p95_ttft_ms']:.0f}",
                  "-" if r["p95_tpot_ms"] is None else f"{r['p95_tpot_ms']:.1f}", r["binding"] or "-")
    console.print(t)
    if s.get("disaggregated_over_aggregated") is not None:
        console.print(f"[bold]{s['winner']} wins[/]: best disaggregated / best aggregated output tokens/s per GPU = "
                      f"{s['disaggregated_over_aggregated']:.2f}")
