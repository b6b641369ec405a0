"""`python -m sglang.launch_server` for a planned deployment, from the SGLang profile's [launch] table
(`catalog/engines/sglang.toml`).

- `--mem-fraction-static`: weights plus the KV pool the plan sized, as a share of the device (activations and
  CUDA graphs are outside it in SGLang's accounting, so the number is lower than vLLM's for the same pool);
- `--context-length`: the workload's longest request within the model's context;
- `--enable-metrics`: Prometheus /metrics, which `flopwise bench` scrapes;
- speculative decoding: `--speculative-algorithm` EAGLE (EAGLE-2 decoding over EAGLE-1/2 heads), EAGLE3,
  NEXTN (MTP), STANDALONE (a draft model) or NGRAM, with steps = k, top-k 1 (a chain; wider for a tree) and
  k + 1 draft tokens;
- expert parallelism: `--ep-size` when the target uses it.
"""

from __future__ import annotations

import math

from flopwise.launch.checkpoints import find_head
from flopwise.launch.common import (
    GGUF_FORMATS,
    CommandLine,
    LaunchCommand,
    LaunchTarget,
    api_servers,
    attention_backend,
    budget_flag,
    engine_memory_fraction,
    host_word,
    model_source,
    stream_interval,
    switches,
)
from flopwise.specs.engine import EngineProfile

__all__ = ["render"]


def render(target: LaunchTarget, engine: EngineProfile) -> LaunchCommand:
    dep = target.deployment
    la, flags = engine.launch, engine.launch.table("flags")
    if dep.weights.name in GGUF_FORMATS:
        return LaunchCommand(engine=engine.name, command=None,
                             reason="GGUF is planned for llama.cpp (llama-server); SGLang's GGUF loader is not "
                                    "modelled")
    src = model_source(target, engine)
    if src is None:
        return LaunchCommand(engine=engine.name, command=None,
                             reason=f"no {dep.weights.name} checkpoint or recipe for SGLang is known")
    notes = [src.note] if src.note else []
    line = CommandLine(la["command"]).flag(la["model_flag"], src.model)
    line.flag(flags["tp"], dep.tp * dep.dp)  # SGLang's --tp-size counts every GPU of a stage
    if dep.pp > 1:
        line.flag(flags["pp"], dep.pp)
    if dep.dp > 1:
        line.flag(flags["dp"], dep.dp).flag(flags["dp_attention"])
    elif dep.replicas_per_server > 1:  # dense data parallel: that many TP groups behind the one tokenizer
        line.flag(flags["dp"], dep.replicas_per_server)
    api_servers(dep, engine, line, notes)
    stream_interval(dep, engine, line, notes)
    if dep.ep > 1:
        line.flag(flags["ep"], dep.ep)
        if dep.two_batch_overlap:
            line.flag(flags["two_batch_overlap"])
    if dep.hosts > 1:
        line.flag(flags["nnodes"], dep.hosts).flag(flags["node_rank"], 0)
        line.flag(flags["dist_init_addr"], "<node0-ip>:5000")
        notes.append(f"run the same command on each of the {dep.hosts} {host_word(dep)} with {flags['node_rank']} "
                     f"0...{dep.hosts - 1}")
    line.flag(flags["max_num_seqs"], dep.max_num_seqs)
    line.flag(flags["max_num_batched_tokens"], budget_flag(dep, engine))
    line.flag(flags["max_model_len"], target.max_model_len)
    line.flag(flags["memory_fraction"], engine_memory_fraction(dep, engine, notes))
    if not engine.kernels.cuda_graphs:
        line.flag(flags["enforce_eager"])
    backend_flag, backend = attention_backend(dep, engine, notes)
    line.flag(backend_flag, backend)
    sw = switches(target, engine)
    if sw.async_scheduling is False:
        line.flag(flags["async_scheduling_off"])
    elif sw.async_scheduling:
        notes.append(f"SGLang {engine.version} has no overlap scheduler (it came in 0.4.0); it runs synchronously")
    if sw.cuda_graph_max_bs is not None and engine.kernels.cuda_graphs:
        line.flag(flags["cuda_graph_max_bs"], sw.cuda_graph_max_bs)
    quantization = src.quantization
    if sw.trtllm_moe:
        if flags.get("moe_runner_backend"):
            line.flag(flags["moe_runner_backend"], engine.launch["moe_trtllm"])
            quantization = quantization or engine.launch.table("moe_trtllm_quantization").get(dep.weights.name)
        else:
            notes.append(f"TensorRT-LLM's fused MoE kernels are not rendered for SGLang {engine.version} (its "
                         "--moe-runner-backend came later); served with its default MoE kernels")
    if sw.pdl:
        notes.append("the plan priced TensorRT-LLM's programmatic dependent launch; SGLang has no such switch")
    if quantization:
        line.flag(flags["quantization"], quantization)
    if dep.kv.name == "fp8":
        line.flag(flags["kv_cache_dtype"], la["kv_fp8"])
    if not target.prefix_caching:
        line.flag(flags["prefix_caching_off"])
    spec = dep.speculative
    if spec is not None:
        algo = engine.speculative_method(spec.method)
        if algo is None:
            notes.append(f"SGLang {engine.version} has no '{spec.method}' speculation; served without it")
        else:
            line.flag(flags["speculative_algorithm"], algo)
            if spec.method != "ngram":
                topk = 1 if spec.verify_tokens is None else max(1, math.ceil((spec.positions - 1) / spec.k))
                line.flag(flags["speculative_steps"], spec.k).flag(flags["speculative_topk"], topk)
            line.flag(flags["speculative_draft_tokens"], spec.positions)
            if spec.method == "draft" and spec.draft_model is not None:
                line.flag(flags["speculative_draft_model"], spec.draft_model.name)
            elif spec.method in ("eagle", "eagle3"):
                head = find_head(target.model_id, spec.method)
                if head is None:
                    head = f"<{spec.method.upper()} head for {target.model_id}>"
                    notes.append(f"no published {spec.method} head for {target.model_id} is known")
                line.flag(flags["speculative_draft_model"], head)
    line.flag(la.get("metrics_flag"))
    return LaunchCommand(engine=engine.name, command=line.render(), prepare=src.prepare, checkpoint=src.checkpoint,
                         notes=tuple(notes))
