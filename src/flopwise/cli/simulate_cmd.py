"""`flopwise simulate`: serve a request stream on a deployment with the vLLM v1 (or an SGLang-like, or a static)
scheduler."""

from __future__ import annotations

import csv
from contextlib import nullcontext
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from flopwise.api import deployment
from flopwise.cluster import ROUTERS, simulate_fleet
from flopwise.cluster.build import build_cluster
from flopwise.cli._app import FAMILY_HELP, app, console, err_console, print_json, warn_model_notes
from flopwise.errors import WorkloadError
from flopwise.sim import SimConfig, find_max_rate, simulate
from flopwise.sim.max_rate import bisect_max_rate
from flopwise.sim.sglang_knobs import SglangKnobs
from flopwise.specs.defaults import DEFAULT_ENDPOINT, DEFAULT_ENGINE, DEFAULT_GPU, DEFAULT_MODEL, FRONTEND_SERVING
from flopwise.specs.hardware import get_hardware
from flopwise.specs.sla import parse_sla
from flopwise.workload import build_workload


def _rate(text: str | None) -> float | None:
    if text is None:
        return None
    try:
        v = float(text)
    except ValueError:
        raise WorkloadError(f"--request-rate must be a number or inf, got '{text}'") from None
    if not v > 0:
        raise WorkloadError(f"--request-rate must be > 0 (or inf), got {text}")
    return v


def _write_rows(path: Path, rows: list[dict[str, Any]]) -> None:
    if path.suffix.lower() == ".parquet":
        try:
            import pyarrow as pa
            import pyarrow.parquet as pq
        except ImportError:
            raise WorkloadError("writing .parquet needs pyarrow (pip install pyarrow); or write a .csv") from None
        pq.write_table(pa.Table.from_pylist(rows), path)
    elif path.suffix.lower() == ".csv":
        with path.open("w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(rows[0]))
            w.writeheader()
            w.writerows(rows)
    else:
        raise WorkloadError(f"--output '{path}': use a .csv or .parquet file name")


def _fmt(v: float | None, unit: str = "") -> str:
    return "-" if v is None else f"{v:,.1f}{unit}"


def _render(s: dict[str, Any]) -> None:
    st = s["setup"]
    console.print(f"[bold]{st['model']}[/] on {st['num_gpus']}x {st['gpu']} (tp={st['tp']}, replicas={st['replicas']}, "
                  f"{st['weights']}/{st['kv']} KV), engine {st['engine']}"
                  f"{'' if st['frontend'] == 'none' else ' behind its HTTP server (' + str(st['endpoint']) + ')'}, "
                  f"scheduler {st['scheduler']}, max_num_seqs={st['max_num_seqs']}, "
                  f"max_num_batched_tokens={st['max_num_batched_tokens']}, KV pool {st['kv_capacity_tokens']:,} tokens")
    if s.get("speculative"):
        sp = s["speculative"]
        tok = sp["tokens_per_verified_decode"]
        console.print(f"speculative {st['speculative']}: {sp['verified_positions']} positions verified per decode, "
                      f"{'-' if tok is None else f'{tok:.2f}'} tokens emitted per verified decode "
                      f"(expected {sp['expected_tokens_per_step']:.2f})")
    if st.get("sglang"):
        console.print("sglang knobs: " + ", ".join(f"{k}={v}" for k, v in st["sglang"].items()))
    t = Table(title=f"{s['num_requests']} requests of '{st['workload']}' over {s['duration_s']:.1f} s")
    t.add_column("ms")
    for c in ("mean", "p50", "p90", "p95", "p99"):
        t.add_column(c, justify="right")
    for key in ("ttft_ms", "tpot_ms", "itl_ms", "e2e_ms", "queue_ms"):
        t.add_row(key.removesuffix("_ms"), *(_fmt(s[key][c]) for c in ("mean", "p50", "p90", "p95", "p99")))
    console.print(t)
    console.print(f"throughput {s['request_throughput']:.2f} req/s, {s['output_tokens_per_s']:,.0f} output tok/s; "
                  f"goodput {s['goodput']:.2f} req/s (SLA attainment {s['sla_attainment']:.1%}); "
                  f"preemptions {s['preemptions']}")
    br = s["time_breakdown_ms"]
    if br["frontend_ms"] is not None:
        util = s["frontend_utilization"]
        console.print("where the time went (mean ms): " + ", ".join(
            f"{k.removesuffix('_ms')} {v:,.1f}" for k, v in br.items() if v is not None)
            + ("" if util is None else f"; API server CPU busy {util:.0%}") + f"; bottleneck: {s['bottleneck']}")
    console.print(f"running batch mean {s['running_batch']['mean']:.1f} (max {s['running_batch']['max']}); KV usage "
                  f"mean {s['kv_utilization']['mean']:.1%} (max {s['kv_utilization']['max']:.1%}); prefix-cache hits "
                  f"{s['prefix_cache_hit_rate']:.1%}; time in prefill {s['time_in_prefill_s']:.1f} s, decode "
                  f"{s['time_in_decode_s']:.1f} s; {s['num_steps']:,} steps simulated in {s['sim_wall_s']:.2f} s")
    if s.get("fleet"):
        _render_fleet(s["fleet"])
    if s.get("sla"):
        ok = "[green]met[/]" if s["sla_met"] else "[red]missed[/]"
        console.print(f"SLA {s['sla']}: {ok} " + ", ".join(f"{k} {'ok' if v else 'FAIL'}"
                                                          for k, v in s["sla_objectives_met"].items()))


def _render_fleet(f: dict[str, Any]) -> None:
    pools = "; ".join(f"{p['role']} {p['replicas']}x {p['gpu']} tp{p['tp']}" for p in f["pools"])
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
                      f"{a['replicas_drained']} drained, at most {a['max_replicas_used']} replicas; cold start "
                      f"{a['cold_start_s']:.0f} s")
    if f.get("expert_parallel"):
        e = f["expert_parallel"]
        console.print(f"expert parallelism: ep={e['ep']} over {e['nodes']} node(s), all-to-all "
                      f"{e['all_to_all_ms_per_step_decode']:.2f} ms per decode step, skew {e['skew']}")
    t = Table(title="replicas")
    for c in ("#", "pool", "state", "requests", "busy", "KV mean", "TTFT mean ms", "TTFT p95 ms"):
        t.add_column(c, justify="right")
    for r in f["replicas"][:64]:
        t.add_row(str(r["index"]), r["pool"], r["state"], str(r["num_requests"]), f"{r['busy_fraction']:.0%}",
                  f"{r['kv_utilization_mean']:.0%}", _fmt(r["ttft_ms_mean"]), _fmt(r["ttft_ms_p95"]))
    console.print(t)


@app.command("simulate")
def simulate_cmd(
    model: Annotated[str, typer.Option(help="Catalog id or alias, config.json path, or model directory.")] = DEFAULT_MODEL,
    gpu: Annotated[str, typer.Option(help="Hardware id (see `flopwise hardware`).")] = DEFAULT_GPU,
    num_gpus: Annotated[int | None, typer.Option("--num-gpus", help="GPUs in all; the multiple of tp*pp beyond one is replicas.")] = None,
    tp: Annotated[int, typer.Option(help="Tensor-parallel degree.")] = 1,
    pp: Annotated[int, typer.Option(help="Pipeline-parallel stages.")] = 1,
    weights: Annotated[str | None, typer.Option(help="Weight format (bf16, fp8, int4-awq, ...).")] = None,
    kv: Annotated[str | None, typer.Option(help="KV-cache format (bf16, fp8, ...).")] = None,
    engine: Annotated[str, typer.Option(help="Serving engine and version: vllm, vllm@0.11, sglang@0.4, trtllm@0.17, llamacpp (see `flopwise engines`).")] = DEFAULT_ENGINE,
    frontend: Annotated[str, typer.Option(help="http: the engine's OpenAI API server in front (its CPU costs); none: the engine alone (offline benchmark).")] = FRONTEND_SERVING,
    endpoint: Annotated[str, typer.Option(help="API endpoint the clients call: completions or chat (chat adds the template).")] = DEFAULT_ENDPOINT,
    gpu_memory_utilization: Annotated[float | None, typer.Option("--gpu-memory-utilization", help="The engine's memory fraction (vLLM: share of the device; SGLang: --mem-fraction-static; TensorRT-LLM: share of free memory). Default: the engine's.")] = None,
    engine_file: Annotated[Path | None, typer.Option("--engine-file", help="Engine override written by `flopwise calibrate --engine-out` (calibrated CPU costs).")] = None,
    hardware_file: Annotated[Path | None, typer.Option("--hardware-file", help="TOML/YAML adding or overriding hardware.")] = None,
    family: Annotated[str | None, typer.Option("--family", help=FAMILY_HELP)] = None,
    max_num_seqs: Annotated[int | None, typer.Option("--max-num-seqs", help="Most running requests (default: the engine's for the GPU, e.g. vLLM serve: 1024 on >=70 GiB GPUs other than A100, else 256).")] = None,
    max_num_batched_tokens: Annotated[int | None, typer.Option("--max-num-batched-tokens", help="Token budget per step (default: the engine's, e.g. vLLM serve: 8192 on H100/H200, 2048 on A100).")] = None,
    block_size: Annotated[int | None, typer.Option("--block-size", help="Tokens per KV block (default: the engine's).")] = None,
    speculative: Annotated[str | None, typer.Option("--speculative", help="Speculative decoding with a stated acceptance, e.g. 'eagle,k=3,accepted=2.6', 'draft:llama-3.2-1b,k=4,alpha=0.7', 'ngram,k=4,alpha=0.5' (accepted = mean tokens per step; tree=W for tree drafts).")] = None,
    enable_prefix_caching: Annotated[bool | None, typer.Option("--enable-prefix-caching/--no-enable-prefix-caching", help="Prefix caching (default: the engine's; vLLM v1: on).")] = None,
    enable_chunked_prefill: Annotated[bool | None, typer.Option("--enable-chunked-prefill/--no-enable-chunked-prefill", help="Chunked prefill (default: the engine's; vLLM v1: on).")] = None,
    scheduler: Annotated[str | None, typer.Option(help="vllm (continuous batching, vLLM v1), sglang (SGLang: prefill-first steps, KV reserved for future output, retraction) or static (whole batches). Default: the engine's.")] = None,
    # --scheduler sglang knobs (SGLang's flag names; see sim/sglang_knobs.py for their defaults)
    chunked_prefill_size: Annotated[int | None, typer.Option("--chunked-prefill-size", help="sglang: new tokens per prefill batch (default by GPU memory: 8192 on H100/H200).")] = None,
    max_prefill_tokens: Annotated[int, typer.Option("--max-prefill-tokens", help="sglang: prompt tokens per prefill batch.")] = 16384,
    max_running_requests: Annotated[int | None, typer.Option("--max-running-requests", help="sglang: most running requests (default from the KV pool, 2048-4096).")] = None,
    schedule_policy: Annotated[str, typer.Option("--schedule-policy", help="sglang: fcfs or lpm (longest cached prefix first).")] = "fcfs",
    schedule_conservativeness: Annotated[float, typer.Option("--schedule-conservativeness", help="sglang: scales the KV reserved for future output.")] = 1.0,
    enable_mixed_chunk: Annotated[bool, typer.Option("--enable-mixed-chunk", help="sglang: decodes join prefill steps.")] = False,
    request_rate: Annotated[str | None, typer.Option("--request-rate", help="Requests/s, or inf (all at once).")] = None,
    arrival: Annotated[str, typer.Option(help="Arrival process at --request-rate: poisson, gamma, constant.")] = "poisson",
    burstiness: Annotated[float, typer.Option(help="Gamma shape for --arrival gamma (1 = Poisson; CV = 1/sqrt).")] = 1.0,
    concurrency: Annotated[int | None, typer.Option(help="Closed loop: this many clients, each sending on completion.")] = None,
    num_requests: Annotated[int | None, typer.Option("--num-requests", help="Requests to simulate (default 1000, or the whole trace).")] = None,
    workload: Annotated[str | None, typer.Option(help="Named workload: chat, rag, code, summarize, batch.")] = None,
    input_len: Annotated[str | None, typer.Option("--input-len", help="Prompt tokens: N, uniform:LO:HI, normal:M:S, lognormal:MEDIAN:SIGMA, file:PATH.")] = None,
    output_len: Annotated[str | None, typer.Option("--output-len", help="Output tokens, same forms as --input-len.")] = None,
    trace: Annotated[Path | None, typer.Option(help="Trace: .jsonl, Azure .csv, or ShareGPT .json.")] = None,
    tokenizer: Annotated[Path | None, typer.Option(help="tokenizer.json to count ShareGPT tokens (default ~4 chars/token).")] = None,
    seed: Annotated[int, typer.Option(help="Random seed (lengths, prefixes, arrivals, speculative acceptance).")] = 0,
    replicas: Annotated[int | None, typer.Option("--replicas", help="A fleet of this many replicas (each tp*pp GPUs) behind --router, in one event loop.")] = None,
    router: Annotated[str | None, typer.Option("--router", help=f"Fleet router: {', '.join(ROUTERS)} (default round-robin).")] = None,
    disaggregate: Annotated[str | None, typer.Option("--disaggregate", help='Disaggregated prefill/decode pools, e.g. "prefill=2xtp2,decode=1xtp4" (replicas x TP each).')] = None,
    kv_link: Annotated[str, typer.Option("--kv-link", help="KV hand-off link between pools: auto (NVLink within a node, the catalog's network between nodes), nvlink, network, infinite.")] = "auto",
    layerwise: Annotated[bool, typer.Option("--layerwise/--no-layerwise", help="Send each layer's KV as it is computed (overlapping the prefill).")] = True,
    replica_events: Annotated[str | None, typer.Option("--replica-events", help='Replicas going down, draining or coming up, e.g. "down:3@120,drain:0@60,up:3@300".')] = None,
    autoscale: Annotated[str | None, typer.Option("--autoscale", help="Autoscale the (mixed or decode) pool between MIN..MAX replicas on outstanding requests per replica.")] = None,
    cold_start: Annotated[str, typer.Option("--cold-start", help="Seconds until a new replica serves, or auto: weight bytes / --storage-gbs + --engine-start-s.")] = "auto",
    storage_gbs: Annotated[float, typer.Option("--storage-gbs", help="Where a cold start reads the weights from (GB/s).")] = 2.0,
    engine_start_s: Annotated[float, typer.Option("--engine-start-s", help="Engine start-up beyond reading the weights (s).")] = 30.0,
    target_outstanding: Annotated[float, typer.Option("--target-outstanding", help="Autoscaler target: outstanding requests per replica.")] = 32.0,
    sla: Annotated[str | None, typer.Option(help='Objectives, e.g. "p95_ttft<=300ms,p95_tpot<=50ms".')] = None,
    find_max_rate_: Annotated[bool, typer.Option("--find-max-rate", help="Bisect for the highest rate meeting --sla.")] = False,
    output: Annotated[Path | None, typer.Option("--output", help="Write per-request rows (.csv or .parquet).")] = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """Queueing, batching and KV capacity under a request stream: TTFT/TPOT/ITL percentiles, goodput, capacity."""
    hw = get_hardware(gpu, hardware_file)
    dep = deployment(model, hw, tp=tp, pp=pp, num_gpus=num_gpus, weights=weights, kv=kv,
                     gpu_memory_utilization=gpu_memory_utilization, block_size=block_size,
                     max_num_seqs=max_num_seqs, max_num_batched_tokens=max_num_batched_tokens,
                     speculative=speculative, engine=engine, frontend=frontend, endpoint=endpoint,
                     engine_file=engine_file, family=family)
    warn_model_notes(dep.model)
    config = SimConfig(scheduler=scheduler, enable_prefix_caching=enable_prefix_caching,
                       enable_chunked_prefill=enable_chunked_prefill,
                       sglang=SglangKnobs(chunked_prefill_size, max_prefill_tokens, max_running_requests,
                                          schedule_policy, schedule_conservativeness, enable_mixed_chunk), seed=seed)
    objectives = parse_sla(sla) if sla else None
    rate = _rate(request_rate)

    def workload_at(r: float | None):
        return build_workload(num_requests=num_requests, workload=workload, input_len=input_len,
                              output_len=output_len, request_rate=r, arrival=arrival, burstiness=burstiness,
                              concurrency=concurrency, trace=trace, tokenizer=tokenizer, seed=seed)

    fleet = None
    if any(v is not None for v in (replicas, router, disaggregate, replica_events, autoscale)):
        if num_gpus is not None and replicas is not None:
            raise WorkloadError("give --num-gpus (independent replicas) or --replicas (a fleet), not both")
        n = replicas or (dep.replicas if num_gpus is not None else 1)

        def make(t: int, count: int):
            return deployment(model, hw, tp=t, pp=pp, num_gpus=t * pp * count, weights=weights, kv=kv,
                              gpu_memory_utilization=gpu_memory_utilization, block_size=block_size,
                              max_num_seqs=max_num_seqs, max_num_batched_tokens=max_num_batched_tokens,
                              speculative=speculative, engine=engine, frontend=frontend, endpoint=endpoint,
                              engine_file=engine_file, family=family)

        fleet = build_cluster(make, tp=tp, replicas=n, router=router or "round-robin", disaggregate=disaggregate,
                              kv_link=kv_link, layerwise=layerwise, replica_events=replica_events,
                              autoscale=autoscale, cold_start=cold_start, storage_gbs=storage_gbs,
                              engine_start_s=engine_start_s, target_outstanding=target_outstanding)

    def run(wl, progress=None):
        if fleet is not None:
            return simulate_fleet(fleet, wl, config, sla=objectives, progress=progress)
        return simulate(dep, wl, config, sla=objectives, progress=progress)

    if find_max_rate_:
        if objectives is None:
            raise WorkloadError("--find-max-rate needs --sla, e.g. --sla \"p95_ttft<=300ms,p95_tpot<=50ms\"")
        if concurrency is not None:
            raise WorkloadError("--find-max-rate searches a request rate; drop --concurrency")
        with err_console.status("bisecting the request rate", spinner="dots") if not json_out else nullcontext():
            found = bisect_max_rate(lambda r: run(workload_at(r))) if fleet is not None else \
                find_max_rate(dep, workload_at, objectives, config)
        result = found.result
        summary = result.summary()
        summary["max_rate"] = {"request_rate": found.rate, "upper_bound": found.upper_bound,
                               "probes": [{"request_rate": r, "sla_met": ok} for r, ok in found.probes]}
    else:
        wl = workload_at(rate)
        with Progress(TextColumn("simulating"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                      console=err_console, transient=True, disable=not err_console.is_terminal) as bar:
            task = bar.add_task("requests", total=wl.num_requests)
            result = run(wl, progress=lambda n: bar.advance(task, n))
        summary = result.summary()
    if output is not None:
        _write_rows(output, result.rows())
    if json_out:
        print_json(summary)
        return
    _render(summary)
    if find_max_rate_:
        console.print(f"[bold]max rate meeting the SLA: {summary['max_rate']['request_rate']:.3g} req/s[/] "
                      f"(throughput bound {summary['max_rate']['upper_bound']:.3g} req/s)")

