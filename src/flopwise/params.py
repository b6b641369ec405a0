"""The one description of each parameter that the CLI options and the Python API share: what it means, its unit,
and its default where the default is not a plain value. `--help` shows these texts, and `help(flopwise.simulate)`
lists them under "Parameters" (`documented` appends them to an API function's docstring).

Imports nothing heavy (the weight formats' table only): the CLI reads it before any command runs.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any, TypeVar

from flopwise.specs.precision import WEIGHT_FORMATS

__all__ = ["HELP", "documented"]

F = TypeVar("F", bound=Callable[..., Any])

_FORMATS = ", ".join(WEIGHT_FORMATS)
_LENGTHS = "N, uniform:LO:HI, normal:MEAN:STD, lognormal:MEDIAN:SIGMA or file:PATH (tokens)"

HELP: dict[str, str] = {
    # the deployment
    "model": "Catalog id or alias (flopwise models), a published pre-quantized checkpoint that "
             "catalog/checkpoints.toml lists (e.g. Qwen/Qwen3-32B-FP8), a config.json path, or a model directory.",
    "gpu": "Hardware id (see `flopwise hardware`).",
    "num_gpus": "GPUs in all; a multiple of tp*dp*pp (the rest are replicas). Default: tp*dp*pp.",
    "replicas_per_server": "Run that many of the --num-gpus replicas as data-parallel engines behind one server "
                           "(vllm serve --data-parallel-size, SGLang --dp-size): they share its API server as the "
                           "engine does (SGLang: one tokenizer process; vLLM 0.15+: one API server per engine).",
    "api_servers": "API server processes of each server (vLLM 0.9.1+ --api-server-count, SGLang 0.5.2+ "
                   "--tokenizer-worker-num): they share its "
                   "request parsing, tokenization and streaming. Default: the engine's (one; vLLM 0.15+ one per "
                   "data-parallel engine).",
    "stream_interval": "Output tokens per streamed event after the first (vLLM 0.11.1+ and SGLang --stream-interval, "
                       "TensorRT-LLM 1.0+ stream_interval): the API server handles one event per N tokens, so it "
                       "streams more requests; clients see N-token chunks (ITL per chunk). Default 1: every token.",
    "tp": "Tensor-parallel degree (GPUs per pipeline stage).",
    "pp": "Pipeline-parallel stages.",
    "dp": "Data-parallel attention groups per replica (MoE models: each group of tp GPUs holds the attention "
          "weights and its own requests' KV; the MoE layers span all tp*dp GPUs). Default: ep/tp where ep > tp, "
          "else 1.",
    "ep": "Expert-parallel degree of the MoE layers (E/ep experts per GPU, tokens dispatched by all-to-all); must "
          "divide tp*dp. Default: 1 (experts sharded by tp).",
    "moe_layouts": "MoE models' layouts to search: tp (experts sharded by TP), dep (data-parallel attention with "
                   "the experts spread over the group: tp 1, dp = ep = 2..max-gpus).",
    "expert_skew": "With --ep > 1: the busiest expert-parallel rank's token load over the mean (1: routing spread "
                   "evenly). Default: DeepSeek's router without a load balancer as measured at EP 32 (TensorRT-LLM "
                   "blog 4: 2.56), scaled to the EP size (EP 8: 1.39); 1 for other routers; about 1.11 with EPLB.",
    "timeout_s": "Client timeout, s (e.g. 60 or 500ms): a request not finished this long after it was sent is "
                 "abandoned (the engine drops it at its next step boundary) and counted under errors_by_kind "
                 "'timeout'.",
    "classes": "Request classes, e.g. \"chat=0.8:sla=p95_ttft<=300ms;batch=0.2:prio=1:timeout=120s\": shares "
               "with their own priority, timeout and SLA; each class gets its own summary ('classes').",
    "scheduling_policy": "fcfs, or priority: waiting requests by (priority, arrival), the lowest-priority "
                         "running request preempted first (vLLM's --scheduling-policy; the vllm scheduler).",
    "adp_balance": "TensorRT-LLM 1.0+ with data-parallel attention (--dp 2+): attention_dp_config enable_balance, "
                   "which holds a waiting context back until every rank has one (for at most the engine profile's "
                   "adp_balance_iters, then a few more to batch), trading TTFT for fewer decode stalls.",
    "rate_profile": "A request rate over time instead of --request-rate: DUR:RATE segments repeated "
                    "(\"300s:5,600s:40,300s:5\") or diurnal:LOW:HIGH:PERIOD (\"diurnal:2:20:3600s\"); --arrival "
                    "gamma's --burstiness shapes the arrivals around it.",
    "enforce_eager": "Run the engine without CUDA graphs (vLLM --enforce-eager, SGLang --disable-cuda-graph): every "
                     "step, decode too, is floored by its kernels' eager launches. Refused where the engine's "
                     "profile prices no eager launch (llama.cpp, TensorRT-LLM's C++ runtime).",
    "async_scheduling": "The engine core prepares each step while the GPU runs the one before, so its CPU work "
                        "overlaps the device (step = max(device, host)) instead of adding to it: vLLM "
                        "--async-scheduling (its default from 0.14), SGLang's overlap scheduler (on from 0.4; "
                        "--no-async-scheduling is its --disable-overlap-schedule). Default: the engine's.",
    "moe_backend": "The MoE layers' kernels: auto (the engine's default: Triton / DeepGEMM for BF16 and FP8 "
                   "weights) or trtllm, TensorRT-LLM's fused trtllm-gen kernels on datacenter Blackwell (SGLang "
                   "--moe-runner-backend flashinfer_trtllm, TensorRT-LLM moe_config backend TRTLLM), which pay no "
                   "extra per-kernel cost at small batch.",
    "attention_backend": "The attention kernels the engine is told to run (SGLang --attention-backend, vLLM "
                         "VLLM_ATTENTION_BACKEND / --attention-backend), one of the names the engine takes "
                         "(flashinfer, fa3, triton, ...; FLASHINFER, FLASH_ATTN, ...): flashinfer decodes the GQA "
                         "groups its release keeps off the tensor cores on the CUDA cores on any GPU, any other "
                         "backend on the tensor cores; the launch commands name it. Default: the release's own "
                         "choice per GPU.",
    "pdl": "Launch kernels with programmatic dependent launch (TensorRT-LLM's TRTLLM_ENABLE_PDL=1, off by default; "
           "NVIDIA Hopper and Blackwell): each kernel starts while the one before drains, so the fixed cost per "
           "kernel that decode at small batch pays shrinks. Refused for engines without the switch and on older "
           "chips.",
    "cuda_graph_max_bs": "The largest decode batch the engine runs from a CUDA graph (SGLang --cuda-graph-max-bs, "
                         "vLLM --max-cudagraph-capture-size); larger decode steps launch their kernels eagerly "
                         "(vLLM V1: its compiled pieces one by one, at least its per-layer floor). 0: graphs for "
                         "every batch. Default: the engine's for the GPU and TP.",
    "two_batch_overlap": "With --ep > 1: split each step into two micro-batches so one's all-to-alls run under "
                         "the other's kernels (SGLang --enable-two-batch-overlap, vLLM --enable-dbo): a MoE layer "
                         "takes the larger of its kernels and its collectives, not their sum.",
    "nodes": "Servers one replica spans (its GPUs split evenly; collectives between them use each GPU's NIC, "
             "network_gbs in the hardware catalog); a server is one NVLink / Infinity Fabric domain (gpus_per_node "
             "in the catalog: 8 H100 SXM, 72 GB200 in an NVL72 rack). Default: as many as its GPUs fill (TP 16 on "
             "H100 SXM spans 2).",
    "weights": f"Weight format: {_FORMATS}. Default: the checkpoint's own (its quantization_config), else bf16.",
    "kv": "KV-cache format: bf16, fp16, fp8, int8, int4. Default: the 16-bit activation type.",
    "engine": "Serving engine and version: vllm, vllm@0.11, sglang@0.4, trtllm@0.17, llamacpp (see `flopwise "
              "engines`).",
    "frontend": "http: the engine's OpenAI API server in front (its CPU costs); none: the engine alone (its offline "
                "benchmark).",
    "endpoint": "The API endpoint clients call: completions or chat (chat adds the template).",
    "gpu_memory_utilization": "The engine's memory fraction in (0, 1] (vLLM: share of the device; SGLang: "
                              "--mem-fraction-static; TensorRT-LLM: share of free memory). Default: the engine's.",
    "engine_file": "Engine override written by `flopwise calibrate --engine-out` (calibrated CPU costs).",
    "hardware_file": "TOML/YAML file adding or overriding hardware entries.",
    "family": "Read the config.json with this registered family's reader (an unsupported architecture's nearest "
              "family, as the refusal names it); the mapping is assumed.",
    "max_num_seqs": "Most running requests (default: the engine's for the GPU, e.g. vLLM serve: 1024 on >=70 GiB "
                    "GPUs other than A100, else 256).",
    "max_num_batched_tokens": "Token budget per step, tokens (default: the engine's, e.g. vLLM serve: 8192 on "
                              "H100/H200, 2048 on A100).",
    "block_size": "Tokens per KV block (default: the engine's).",
    "speculative": "Speculative decoding with a stated acceptance, e.g. 'eagle,k=3,accepted=2.6', "
                   "'draft:llama-3.2-1b,k=4,alpha=0.7', 'ngram,k=4,alpha=0.5' (accepted = mean tokens per step; "
                   "tree=W for tree drafts).",
    # a static batch
    "batch": "Requests served together (a static batch).",
    "input_len": "Prompt tokens per request.",
    "output_len": "Generated tokens per request.",
    # the simulator
    "enable_prefix_caching": "Prefix caching (default: the engine's; vLLM v1: on).",
    "enable_chunked_prefill": "Chunked prefill (default: the engine's; vLLM v1: on).",
    "scheduler": "vllm (continuous batching, vLLM v1), sglang (prefill-first steps, KV reserved for future output, "
                 "retraction) or static (whole batches). Default: the engine's.",
    "chunked_prefill_size": "sglang: new tokens per prefill batch (default by GPU memory: 8192 on H100/H200).",
    "max_prefill_tokens": "sglang: prompt tokens per prefill batch.",
    "max_running_requests": "sglang: most running requests (default from the KV pool, 2048-4096).",
    "schedule_policy": "sglang: fcfs or lpm (longest cached prefix first).",
    "schedule_conservativeness": "sglang: scales the KV reserved for future output (> 0).",
    "enable_mixed_chunk": "sglang: decodes join prefill steps.",
    "scheduler_recv_interval": "sglang: new requests are read once every N decode steps (and after each prefill).",
    "sim_ignore_eos": "The clients send ignore_eos (as sglang.bench_serving does): SGLang with its radix cache off "
                      "then admits only what fits if every request runs to max_tokens.",
    "request_rate": "Requests/s (open loop), or inf (all at once).",
    "arrival": "Arrival process at the request rate: poisson, gamma, constant.",
    "burstiness": "Gamma shape for the gamma arrival process (1 = Poisson; CV = 1/sqrt(shape)).",
    "rescale_arrivals": "vllm bench serve's schedule: the drawn gaps are rescaled so request N of N arrives at "
                        "exactly N / rate.",
    "concurrency": "Closed loop: this many clients, each sending its next request on a completion.",
    "max_concurrency": "With --request-rate: the client's cap on requests in flight (vllm bench serve "
                       "--max-concurrency): each request is sent at its arrival or when a completion frees a slot, "
                       "its latency counted from the send.",
    "num_requests": "Requests to simulate (default 1000, or the whole trace; at most 1,000,000).",
    "workload": "Named workload: chat, rag, code, summarize, batch, sharegpt.",
    "lengths": f"Prompt tokens: {_LENGTHS}.",
    "output_lengths": "Output tokens, same forms as the prompt lengths.",
    "trace": "Trace: .jsonl, Azure .csv, or ShareGPT .json.",
    "tokenizer": "tokenizer.json to count ShareGPT tokens (default ~4 characters per token).",
    "seed": "Random seed, an integer >= 0 (lengths, prefixes, arrivals, speculative acceptance).",
    "sla": 'Objectives, e.g. "p95_ttft<=300ms,p95_tpot<=50ms" (stat mean/p50/p90/p95/p99 of ttft, tpot, itl or '
           "e2e; ms or s).",
    "find_max_rate": "Bisect for the highest request rate meeting the SLA.",
    # fleets (simulate --replicas / --disaggregate / --autoscale)
    "replicas": "A fleet of this many replicas (each tp*pp GPUs) behind the router, in one event loop.",
    "router": "Fleet router: round-robin, least-outstanding, least-kv, prefix-aware, session (default "
              "round-robin).",
    "disaggregate": 'Disaggregated prefill/decode pools, e.g. "prefill=2xtp2,decode=1xtp4" (replicas x TP each).',
    "kv_link": "KV hand-off link between pools: auto (NVLink within a node, the catalog's network between "
               "nodes), nvlink, network, infinite.",
    "layerwise": "Send each layer's KV as it is computed (overlapping the prefill).",
    "replica_events": 'Replicas going down, draining or coming up, e.g. "down:3@120,drain:0@60,up:3@300" (s).',
    "autoscale": "Autoscale the (mixed or decode) pool between MIN..MAX replicas on outstanding requests per "
                 "replica, e.g. 1..8.",
    "cold_start": "Seconds until a new replica serves, or auto: weight bytes / storage GB/s + engine start-up.",
    "storage_gbs": "Where a cold start reads the weights from (GB/s).",
    "engine_start_s": "Engine start-up beyond reading the weights (s).",
    "target_outstanding": "Autoscaler target: outstanding requests per replica.",
    "output": "Write per-request rows here (.csv or .parquet); the folder must exist.",
    # compare and explain
    "tries": "Techniques to compare, e.g. weights=int8, kv=fp8, spec=draft:llama-3.2-1b,k=4,alpha=0.7, "
             "spec=eagle,k=4,accepted=3.2, spec=ngram,k=4,alpha=0.5, prefix-cache=0.5, chunked-prefill=512, "
             "cuda-graphs=off, tp=2, gpu=h200, kv-heads=1, window=4096, attention=mla; combine with '+'. One row each.",
    "simulate": "Throughput at the SLA from the simulator (True, the default) or from static batches only (fast).",
    "compare_workload": "Named workload (chat, code, rag, summarize, batch, sharegpt): its mean lengths, and its "
                        "stream for the simulated throughput.",
    "compare_num_requests": "Requests per simulated run.",
    "draft": "Draft model for the speculative example (default: an EAGLE-style one-layer head).",
    "k": "Tokens proposed per speculative step.",
    "alpha": "Per-token acceptance rate in [0, 1] for the speculative example.",
    # plan
    "gpus": "Hardware ids to consider (comma-separated text, or a list).",
    "max_gpus": "Most GPUs one replica may use.",
    "rate": "Total requests/s to serve (sizes the replicas); None: capacity per replica only.",
    "objective": "goodput, cost or latency.",
    "tps": "TP degrees to try (default: the smallest that fits and twice it).",
    "plan_weights": "Weight formats to try.",
    "plan_kv": "KV formats to try.",
    "plan_knob": "Values to try (default: the engine's for each GPU).",
    "plan_api_servers": "API-server process counts to try, e.g. 1,4 (vLLM --api-server-count, SGLang "
                        "--tokenizer-worker-num; default: the engine's).",
    "plan_stream_intervals": "Tokens per streamed event to try, e.g. 1,10 (vLLM 0.11.1+ and SGLang "
                             "--stream-interval, TensorRT-LLM stream_interval; default 1): fewer API-server events "
                             "per token, N-token chunks for the client (an ITL objective in --sla sees them).",
    "prefix_caching": "on, off, or both.",
    "plan_speculative": "Speculative decoding settings to try ('none' for plain decoding).",
    "plan_num_requests": "Simulated requests per probe (>= 20).",
    "html": "Write a self-contained HTML report here; the folder must exist.",
    # bench
    "url": "Server base URL, e.g. http://127.0.0.1:8000.",
    "served_model": "Served model name (default: the first at /v1/models).",
    "bench_rate": "Requests/s (open loop); several sweep; inf = burst.",
    "bench_concurrency": "Closed loop at this concurrency; several (1,4,16) sweep.",
    "bench_num_requests": "Measured requests per level (default 200).",
    "duration": "Stop sending after this many seconds per level.",
    "warmup": "Warm-up requests per level, sent first and excluded.",
    "range_ratio": "Lengths uniform within +- this share, in [0, 1).",
    "dataset": "ShareGPT .json or .jsonl prompts instead of random text.",
    "shared_prefix_len": "Tokens of a shared prefix before each prompt.",
    "num_prefixes": "Distinct shared prefixes.",
    "sweep": "Search for the highest request rate meeting the SLA.",
    "sweep_steps": "Bisection runs after the capacity burst.",
    "out_dir": "Results directory (default results/bench-<time>).",
    "resume": "Continue the run saved in the output directory, skipping measured requests.",
    "api_key": "Bearer token (never saved).",
    "timeout": "Per-request limit, seconds (also the read timeout).",
    "ignore_eos": "Ask for exactly the output length.",
    "scrape": "Scrape the server's /metrics.",
    "predict": "Also simulate the measured workload and compare.",
    "model_config": "Model for the prediction: catalog id or config.json (default: the served model).",
    # calibrate
    "hardware": "Hardware file written by `flopwise profile`, or a catalog id.",
    "from_runs": "`flopwise bench` run or sweep directories.",
    "id": "Entry to calibrate (default: the file's profiled entry); with a catalog id, the id to write.",
    "served": "The served model (catalog id, config.json or model directory): needed with bench runs.",
    "use": "Measurement kinds to fit: kernels, steps, bench (comma-separated text, or a list).",
    "params": "Parameters to fit (default: all that the data identify).",
    "calibrate_engine": "The served engine and version (bench runs are replayed through it).",
    "engine_out": "Write the fitted engine CPU costs here: an override file for --engine-file.",
    "out": "Hardware file to write (default: the --hardware file).",
    "dry_run": "Fit and report; write nothing.",
}


def documented(**names: str) -> Callable[[F], F]:
    """Append a "Parameters" section to the function's docstring: each parameter with its `HELP` text (a
    parameter whose text has another key names it: `input_len="lengths"`)."""
    def wrap(fn: F) -> F:
        lines = []
        for p in inspect.signature(fn).parameters:
            key = names.get(p, p)
            if key in HELP:
                lines.append(f"    {p}: {HELP[key]}")
        if lines:
            fn.__doc__ = inspect.cleandoc(fn.__doc__ or "") + "\n\nParameters:\n" + "\n".join(lines)
        return fn
    return wrap
