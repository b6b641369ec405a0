"""`flopwise simulate`: serve a request stream on a deployment with the vLLM v1 (or an SGLang-like, or a static)
scheduler."""

from __future__ import annotations

from contextlib import nullcontext
from pathlib import Path
from typing import Annotated

import typer

from flopwise.cli import _app
from flopwise.cli._app import app, print_json, warn_model_notes
from flopwise.cli.options import (
    AsyncScheduling,
    AttentionBackend,
    CudaGraphMaxBs,
    Dp,
    Endpoint,
    EnforceEager,
    Engine,
    EngineFile,
    Ep,
    ExpertSkew,
    Family,
    Frontend,
    Gpu,
    GpuMemoryUtilization,
    HardwareFile,
    Json,
    Kv,
    Model,
    MoeBackend,
    Nodes,
    NumGpus,
    Pdl,
    Pp,
    ReplicasPerServer,
    Tp,
    TwoBatchOverlap,
    Weights,
)
from flopwise.params import HELP
from flopwise.specs.defaults import DEFAULT_ENDPOINT, DEFAULT_ENGINE, DEFAULT_GPU, DEFAULT_MODEL, FRONTEND_SERVING


@app.command("simulate")
def simulate_cmd(
    model: Model = DEFAULT_MODEL,
    gpu: Gpu = DEFAULT_GPU,
    num_gpus: NumGpus = None,
    replicas_per_server: ReplicasPerServer = 1,
    api_servers: Annotated[int | None, typer.Option("--api-servers", help=HELP["api_servers"],
                                                    show_default="the engine's")] = None,
    stream_interval: Annotated[int | None, typer.Option("--stream-interval", help=HELP["stream_interval"],
                                                        show_default="1")] = None,
    tp: Tp = 1,
    pp: Pp = 1,
    dp: Dp = None,
    ep: Ep = 1,
    nodes: Nodes = None,
    expert_skew: ExpertSkew = None,
    two_batch_overlap: TwoBatchOverlap = False,
    weights: Weights = None,
    kv: Kv = None,
    engine: Engine = DEFAULT_ENGINE,
    frontend: Frontend = FRONTEND_SERVING,
    endpoint: Endpoint = DEFAULT_ENDPOINT,
    gpu_memory_utilization: GpuMemoryUtilization = None,
    engine_file: EngineFile = None,
    hardware_file: HardwareFile = None,
    family: Family = None,
    max_num_seqs: Annotated[int | None, typer.Option("--max-num-seqs", help=HELP["max_num_seqs"])] = None,
    max_num_batched_tokens: Annotated[int | None, typer.Option("--max-num-batched-tokens",
                                                               help=HELP["max_num_batched_tokens"])] = None,
    block_size: Annotated[int | None, typer.Option("--block-size", help=HELP["block_size"])] = None,
    enforce_eager: EnforceEager = False,
    async_scheduling: AsyncScheduling = None,
    cuda_graph_max_bs: CudaGraphMaxBs = None,
    moe_backend: MoeBackend = None,
    pdl: Pdl = False,
    attention_backend: AttentionBackend = None,
    speculative: Annotated[str | None, typer.Option("--speculative", help=HELP["speculative"])] = None,
    enable_prefix_caching: Annotated[bool | None, typer.Option("--enable-prefix-caching/--no-enable-prefix-caching",
                                                               help=HELP["enable_prefix_caching"])] = None,
    enable_chunked_prefill: Annotated[bool | None, typer.Option("--enable-chunked-prefill/--no-enable-chunked-prefill",
                                                                help=HELP["enable_chunked_prefill"])] = None,
    scheduler: Annotated[str | None, typer.Option(help=HELP["scheduler"])] = None,
    # --scheduler sglang knobs (SGLang's flag names; see sim/sglang_knobs.py for their defaults)
    chunked_prefill_size: Annotated[int | None, typer.Option("--chunked-prefill-size",
                                                             help=HELP["chunked_prefill_size"])] = None,
    max_prefill_tokens: Annotated[int, typer.Option("--max-prefill-tokens", help=HELP["max_prefill_tokens"])] = 16384,
    max_running_requests: Annotated[int | None, typer.Option("--max-running-requests",
                                                             help=HELP["max_running_requests"])] = None,
    schedule_policy: Annotated[str, typer.Option("--schedule-policy", help=HELP["schedule_policy"])] = "fcfs",
    schedule_conservativeness: Annotated[float, typer.Option("--schedule-conservativeness",
                                                             help=HELP["schedule_conservativeness"])] = 1.0,
    enable_mixed_chunk: Annotated[bool, typer.Option("--enable-mixed-chunk", help=HELP["enable_mixed_chunk"])] = False,
    scheduler_recv_interval: Annotated[int, typer.Option("--scheduler-recv-interval",
                                                         help=HELP["scheduler_recv_interval"])] = 1,
    ignore_eos: Annotated[bool, typer.Option("--ignore-eos", help=HELP["sim_ignore_eos"])] = False,
    request_rate: Annotated[str | None, typer.Option("--request-rate", help=HELP["request_rate"])] = None,
    arrival: Annotated[str, typer.Option(help=HELP["arrival"])] = "poisson",
    burstiness: Annotated[float, typer.Option(help=HELP["burstiness"])] = 1.0,
    rescale_arrivals: Annotated[bool, typer.Option("--rescale-arrivals", help=HELP["rescale_arrivals"])] = False,
    concurrency: Annotated[int | None, typer.Option(help=HELP["concurrency"])] = None,
    max_concurrency: Annotated[int | None, typer.Option("--max-concurrency", help=HELP["max_concurrency"])] = None,
    num_requests: Annotated[int | None, typer.Option("--num-requests", help=HELP["num_requests"])] = None,
    workload: Annotated[str | None, typer.Option(help=HELP["workload"])] = None,
    input_len: Annotated[str | None, typer.Option("--input-len", help=HELP["lengths"])] = None,
    output_len: Annotated[str | None, typer.Option("--output-len", help=HELP["output_lengths"])] = None,
    trace: Annotated[Path | None, typer.Option(help=HELP["trace"])] = None,
    tokenizer: Annotated[Path | None, typer.Option(help=HELP["tokenizer"])] = None,
    seed: Annotated[int, typer.Option(help=HELP["seed"])] = 0,
    replicas: Annotated[int | None, typer.Option("--replicas", help=HELP["replicas"])] = None,
    router: Annotated[str | None, typer.Option("--router", help=HELP["router"])] = None,
    disaggregate: Annotated[str | None, typer.Option("--disaggregate", help=HELP["disaggregate"])] = None,
    kv_link: Annotated[str, typer.Option("--kv-link", help=HELP["kv_link"])] = "auto",
    layerwise: Annotated[bool, typer.Option("--layerwise/--no-layerwise", help=HELP["layerwise"])] = True,
    replica_events: Annotated[str | None, typer.Option("--replica-events", help=HELP["replica_events"])] = None,
    autoscale: Annotated[str | None, typer.Option("--autoscale", help=HELP["autoscale"])] = None,
    cold_start: Annotated[str, typer.Option("--cold-start", help=HELP["cold_start"])] = "auto",
    storage_gbs: Annotated[float, typer.Option("--storage-gbs", help=HELP["storage_gbs"])] = 2.0,
    engine_start_s: Annotated[float, typer.Option("--engine-start-s", help=HELP["engine_start_s"])] = 30.0,
    target_outstanding: Annotated[float, typer.Option("--target-outstanding",
                                                      help=HELP["target_outstanding"])] = 32.0,
    timeout_s: Annotated[str | None, typer.Option("--timeout-s", help=HELP["timeout_s"])] = None,
    classes: Annotated[str | None, typer.Option("--classes", help=HELP["classes"])] = None,
    scheduling_policy: Annotated[str, typer.Option("--scheduling-policy", help=HELP["scheduling_policy"])] = "fcfs",
    rate_profile: Annotated[str | None, typer.Option("--rate-profile", help=HELP["rate_profile"])] = None,
    adp_balance: Annotated[bool, typer.Option("--adp-balance", help=HELP["adp_balance"])] = False,
    sla: Annotated[str | None, typer.Option(help=HELP["sla"])] = None,
    find_max_rate: Annotated[bool, typer.Option("--find-max-rate", help=HELP["find_max_rate"])] = False,
    output: Annotated[Path | None, typer.Option("--output", help=HELP["output"])] = None,
    json_out: Json = False,
) -> None:
    """Queueing, batching and KV capacity under a request stream: TTFT/TPOT/ITL percentiles, goodput, capacity."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from flopwise.api import simulate  # imported when the command runs: --help and other commands stay fast
    from flopwise.report.simulate_report import render_simulation

    err = _app.err_console
    live = err.is_terminal and not json_out
    if find_max_rate:
        bar = err.status("bisecting the request rate", spinner="dots") if live else nullcontext()
        advance = None
    else:
        bar = Progress(TextColumn("simulating"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                       console=err, transient=True, disable=not live)
        task = bar.add_task("requests", total=None)
        advance = lambda n: bar.advance(task, n)  # noqa: E731
    with bar:
        result = simulate(model, gpu, num_gpus=num_gpus, replicas_per_server=replicas_per_server, tp=tp, pp=pp,
                          dp=dp, ep=ep, nodes=nodes, expert_skew=expert_skew,
                          two_batch_overlap=two_batch_overlap, weights=weights, kv=kv, engine=engine,
                          frontend=frontend, endpoint=endpoint, gpu_memory_utilization=gpu_memory_utilization,
                          engine_file=engine_file, hardware_file=hardware_file, family=family,
                          max_num_seqs=max_num_seqs, max_num_batched_tokens=max_num_batched_tokens,
                          block_size=block_size, enforce_eager=enforce_eager, async_scheduling=async_scheduling,
                          cuda_graph_max_bs=cuda_graph_max_bs, moe_backend=moe_backend, pdl=pdl,
                          attention_backend=attention_backend, api_servers=api_servers,
                          stream_interval=stream_interval, speculative=speculative,
                          enable_prefix_caching=enable_prefix_caching,
                          enable_chunked_prefill=enable_chunked_prefill, scheduler=scheduler,
                          chunked_prefill_size=chunked_prefill_size, max_prefill_tokens=max_prefill_tokens,
                          max_running_requests=max_running_requests, schedule_policy=schedule_policy,
                          schedule_conservativeness=schedule_conservativeness, enable_mixed_chunk=enable_mixed_chunk,
                          scheduler_recv_interval=scheduler_recv_interval, ignore_eos=ignore_eos,
                          request_rate=request_rate, arrival=arrival, burstiness=burstiness,
                          rescale_arrivals=rescale_arrivals, concurrency=concurrency,
                          max_concurrency=max_concurrency,
                          num_requests=num_requests, workload=workload, input_len=input_len, output_len=output_len,
                          trace=trace, tokenizer=tokenizer, seed=seed, sla=sla, find_max_rate=find_max_rate,
                          output=output, replicas=replicas, router=router, disaggregate=disaggregate,
                          kv_link=kv_link, layerwise=layerwise, replica_events=replica_events, autoscale=autoscale,
                          cold_start=cold_start, storage_gbs=storage_gbs, engine_start_s=engine_start_s,
                          target_outstanding=target_outstanding, timeout_s=timeout_s, classes=classes,
                          scheduling_policy=scheduling_policy, rate_profile=rate_profile, adp_balance=adp_balance,
                          progress=advance)
    warn_model_notes(result.deployment)
    if json_out:
        print_json(result.to_dict())
    else:
        render_simulation(_app.console, result.to_dict())
