"""`vllm serve` for a planned deployment, from the vLLM profile's [launch] table (`catalog/engines/vllm.toml`).

- the model: the published checkpoint in the planned weight format, or the 16-bit one with `--quantization fp8`
  (vLLM quantizes FP8 at load), or the output of a recipe (`prepare`); never `--quantization awq` on a 16-bit
  repository (a pre-quantized checkpoint's quantization_config picks the kernels by itself); a GGUF format: the
  local file (a published one downloaded, or llama.cpp's converter and llama-quantize), with the 16-bit
  repository's tokenizer, on releases with a GGUF loader (in-tree 0.5.5-0.23, vllm-gguf-plugin from 0.24);
- `--max-model-len`: the workload's longest request within the model's context (the plan's `max_model_len`);
- `--gpu-memory-utilization`: the share of the whole device that gives the KV pool the plan sized;
- chunked prefill: always on in V1; V0 needs `--enable-chunked-prefill` when a prompt exceeds the token budget, or
  where the plan priced the chunking V0 turns on by itself above 32K of context, for a shorter `--max-model-len`;
- speculative decoding: `--speculative-config` JSON (V1) with the method named per version (EAGLE-1 `eagle`,
  EAGLE-3 `eagle3`, `mtp`, `draft_model`, `ngram` with a prompt-lookup window), or V0's two flags;
- expert parallelism: `--enable-expert-parallel` when the deployment uses it (vLLM spreads the experts over all
  tp x dp GPUs, so a narrower EP is noted); data-parallel attention: `--data-parallel-size` (max_num_seqs and the
  token budget are per DP rank, as the deployment's); across nodes, the head node's command with
  `--data-parallel-size-local` and `--data-parallel-address`, and the note for the others.
"""

from __future__ import annotations

import json

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
from flopwise.specs.deployment import weights_refusal
from flopwise.specs.engine import EngineProfile

__all__ = ["render"]


def _speculative(target: LaunchTarget, engine: EngineProfile, notes: list[str]) -> dict[str, object] | None:
    spec = target.deployment.speculative
    if spec is None:
        return None
    method = engine.speculative_method(spec.method)
    if method is None:
        notes.append(f"{engine.display} {engine.version} has no '{spec.method}' speculation; served without it")
        return None
    cfg: dict[str, object] = {"method": method, "num_speculative_tokens": spec.k}
    if spec.method == "ngram":
        cfg.update(prompt_lookup_max=4, prompt_lookup_min=2)
    elif spec.method == "draft":
        cfg["model"] = spec.draft_model.name if spec.draft_model else target.model_id
    elif spec.method in ("eagle", "eagle3", "medusa"):
        head = find_head(target.model_id, spec.method)
        if head is None:
            head = f"<{spec.method.upper()} head for {target.model_id}>"
            notes.append(f"no published {spec.method} head for {target.model_id} is known: train one (SpecForge, "
                         "the EAGLE repository) and put its path in the speculative config")
        cfg["model"] = head
    return cfg


def _release_refusal(target: LaunchTarget, engine: EngineProfile) -> str | None:
    """Why this release cannot start what the plan priced, in its own terms: no flag for prefix caching (before
    0.4.0) or an FP8 cache (before 0.3.0), or an FP8 cache beside prefix caching (CacheConfig refuses it in
    0.5.3-0.5.4); None where it can."""
    dep, la, flags = target.deployment, engine.launch, engine.launch.table("flags")
    fp8 = dep.kv.name == "fp8"
    if target.prefix_caching and not flags["prefix_caching_on"]:
        return (f"vLLM {engine.version} has no prefix caching (--enable-prefix-caching from 0.4.0): plan with "
                "--prefix-caching off")
    if fp8 and not la["kv_fp8"]:
        return f"vLLM {engine.version} has no FP8 KV cache (--kv-cache-dtype from 0.3.0): plan with --kv bf16"
    if fp8 and target.prefix_caching and not la["kv_fp8_prefix_caching"]:
        return (f"vLLM {engine.version} refuses an FP8 KV cache with prefix caching (CacheConfig: 'Prefix caching "
                "is not supported for fp8 cache_dtype'): plan with --kv bf16 or --prefix-caching off")
    return None


def render(target: LaunchTarget, engine: EngineProfile, launcher: tuple[str, ...] | None = None) -> LaunchCommand:
    """`vllm serve MODEL` (`python -m vllm.entrypoints.openai.api_server --model MODEL` before 0.5.2) with the
    deployment's flags; `launcher`: other words before the model (a program that
    takes vLLM's engine arguments, e.g. NVIDIA Dynamo's `python -m dynamo.vllm --model`)."""
    dep = target.deployment
    la, flags = engine.launch, engine.launch.table("flags")
    gguf = dep.weights.name in GGUF_FORMATS
    if gguf and (why := weights_refusal(engine, dep.hardware, dep.model, dep.weights)) is not None:
        return LaunchCommand(engine=engine.name, command=None, reason=why)  # (no GGUF loader, or not this type)
    src = model_source(target, engine)
    if src is None:
        return LaunchCommand(engine=engine.name, command=None,
                             reason=f"no {dep.weights.name} checkpoint or recipe for vLLM is known")
    if (why := _release_refusal(target, engine)) is not None:
        return LaunchCommand(engine=engine.name, command=None, reason=why)
    notes = [src.note] if src.note else []
    model, prepare = src.model, src.prepare
    if gguf:  # a local file: vLLM loads one GGUF file, not a repository of them
        if src.file:
            prepare = f"huggingface-cli download {src.model} {src.file} --local-dir ."
            model = src.file
        model = f"./{model}"
        if la["gguf_loader"] != "in-tree":
            prepare = " && ".join(p for p in (f"pip install {la['gguf_loader']}", prepare) if p)
            notes.append(f"vLLM {engine.version} loads GGUF through {la['gguf_loader']}, out of tree")
    by_flag = bool(la["model_flag"]) and launcher is None  # releases before the `vllm` script: --model
    backend_flag, backend = attention_backend(dep, engine, notes)
    env = (backend,) if backend and not backend_flag else ()  # VLLM_ATTENTION_BACKEND=NAME before the command
    line = CommandLine(*env, *(launcher or (la["command"],)), *(() if by_flag else (model,)))
    if by_flag:
        line.flag(la["model_flag"], model)
    line.flag(backend_flag, backend)
    if engine.fell_back:  # the release picks its fallback engine by itself: nothing to launch differently
        notes.append(engine.fallback_note)
    if gguf:
        line.flag(flags["tokenizer"], target.model_id)
    line.flag(flags["tp"], dep.tp)
    if dep.pp > 1:
        line.flag(flags["pp"], dep.pp)
    hosts = dep.hosts
    if dep.spans_hosts:  # a TP or PP group spans hosts: vLLM runs it on a Ray cluster
        line.flag(flags["executor_backend"], "ray")
        hw = dep.hardware
        part = (f" with {dep.gpus_per_host} GPUs of each (`--num-gpus {dep.gpus_per_host}` to each `ray start`)"
                if dep.gpus_per_host < (hw.gpus_per_host or hw.gpus_per_node) else "")
        notes.append(f"start a Ray cluster over the {hosts} {host_word(dep)}{part} first (`ray start --head` on one, "
                     "`ray start --address <head-ip>:6379` on the others), then run this on the head node")
    if dep.dp > 1:
        line.flag(flags["dp"], dep.dp)
        if dep.spans_hosts:  # each DP engine's tensor group over several hosts: Ray places the engines too
            notes.append("each data-parallel engine's tensor group spans hosts: start it with vLLM's Ray "
                         "data-parallel backend (`--data-parallel-backend ray`, docs/serving/"
                         "data_parallel_deployment.md) on the Ray cluster above, not one engine per host")
        elif hosts > 1 and not dep.dp % hosts:
            local = dep.dp // hosts
            line.flag(flags["dp_local"], local).flag(flags["dp_address"], "<head-node-ip>")
            notes.append(f"run on each of the {hosts} {host_word(dep)}: the same command with "
                         f"{flags['dp_start_rank']} {local} x host index and --headless on all but the head")
    elif dep.replicas_per_server > 1:  # dense data parallel: that many engine cores behind one endpoint
        line.flag(flags["dp"], dep.replicas_per_server)
    api_servers(dep, engine, line, notes)
    stream_interval(dep, engine, line, notes)
    if dep.ep > 1:
        line.flag(flags["ep"])
        if dep.two_batch_overlap:
            line.flag(flags["two_batch_overlap"])
        if dep.ep != dep.tp * dep.dp:
            notes.append(f"vLLM spreads the experts over all {dep.tp * dep.dp} GPUs (EP {dep.tp * dep.dp}), not the "
                         f"planned EP {dep.ep}")
    line.flag(flags["max_num_seqs"], dep.max_num_seqs)
    line.flag(flags["max_num_batched_tokens"], budget_flag(dep, engine))
    line.flag(flags["max_model_len"], target.max_model_len)
    line.flag(flags["memory_fraction"], engine_memory_fraction(dep, engine, notes))
    if not engine.kernels.cuda_graphs:
        line.flag(flags["enforce_eager"])
    sw = switches(target, engine)
    if sw.async_scheduling is not None:
        name = flags.get("async_scheduling_on" if sw.async_scheduling else "async_scheduling_off")
        if name:
            line.flag(name)
        else:
            notes.append(f"vLLM {engine.version} has no flag to turn async scheduling "
                         f"{'on' if sw.async_scheduling else 'off'}; it runs as its release does")
    if sw.cuda_graph_max_bs is not None and engine.kernels.cuda_graphs:
        notes.append(f"the plan priced CUDA graphs up to decode batch {sw.cuda_graph_max_bs}; vLLM sets its capture "
                     "sizes in --compilation-config, left at the release's default here")
    if sw.trtllm_moe:
        notes.append("the plan priced TensorRT-LLM's fused MoE kernels (--moe-backend trtllm); vLLM picks its MoE "
                     "kernels itself and runs its own here")
    if sw.pdl:
        notes.append("the plan priced TensorRT-LLM's programmatic dependent launch; vLLM has no such switch")
    if src.quantization:
        line.flag(flags["quantization"], src.quantization)
    if dep.kv.name == "fp8":
        line.flag(flags["kv_cache_dtype"], la["kv_fp8"])
    # V0 chunks prompts by itself only above 32K of --max-model-len (`BatchDefault.chunked_above`): told otherwise
    long_prompts = target.max_prompt_len is not None and target.max_prompt_len > dep.max_num_batched_tokens
    if not engine.released().enable_chunked_prefill and (dep.enable_chunked_prefill or long_prompts):
        line.flag(flags["chunked_prefill_on"])
    if target.prefix_caching:
        line.flag(flags["prefix_caching_on"])
    else:
        line.flag(flags["prefix_caching_off"])
    cfg = _speculative(target, engine, notes)
    if cfg is not None:
        if la.get("speculative_style") == "json":
            line.flag(flags["speculative_config"], json.dumps(cfg, separators=(",", ":")))
        else:
            line.flag(flags["speculative_model"], cfg.get("model", "[ngram]"))
            line.flag(flags["num_speculative_tokens"], cfg["num_speculative_tokens"])
            if "prompt_lookup_max" in cfg:  # V0's n-gram proposer refuses a lookup window of 0 (its default)
                line.flag(flags["ngram_prompt_lookup_max"], cfg["prompt_lookup_max"])
            line.flag(flags["use_v2_block_manager"])  # V0 to 0.6.2: speculation refuses the default block manager
    return LaunchCommand(engine=engine.name, command=line.render(), prepare=prepare, checkpoint=src.checkpoint,
                         notes=tuple(notes))

