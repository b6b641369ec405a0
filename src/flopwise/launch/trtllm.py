"""`trtllm-serve` (PyTorch backend) for a planned deployment, from the TensorRT-LLM profile's [launch] table
(`catalog/engines/trtllm.toml`), and the YAML it reads through `--extra_llm_api_options`.

- weights: a published pre-quantized (ModelOpt) checkpoint, or the ModelOpt command that makes one (the PyTorch
  backend does not quantize at load);
- `--kv_cache_free_gpu_memory_fraction`: the share of the memory left after weights and activations that gives
  the KV pool the plan sized;
- `--max_seq_len`: the workload's longest request; `enable_chunked_prefill: true` whenever a prompt can exceed
  `--max_num_tokens` (otherwise TensorRT-LLM rejects it);
- `kv_cache_config`: `enable_block_reuse` (prefix caching) and `dtype: fp8`;
- `speculative_config`: `decoding_type` per version (EAGLE-3 is `Eagle`, later `Eagle3`; EAGLE-1/2 heads are
  not served by the PyTorch backend), `DraftTarget`, `NGram`, `MTP`;
- `--ep_size`: given for every MoE model (1 = experts sharded by TP, which is what the plan priced).
"""

from __future__ import annotations

from flopwise.launch.checkpoints import find_head
from flopwise.launch.common import (
    GGUF_FORMATS,
    CommandLine,
    LaunchCommand,
    LaunchTarget,
    Switches,
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


def _yaml(target: LaunchTarget, engine: EngineProfile, sw: Switches, fraction: float, notes: list[str]) -> str:
    dep = target.deployment
    y = engine.launch.table("yaml")
    # the memory fraction inside the options file too: before PR #9262 (2025-11) its kv_cache_config replaced the
    # one --kv_cache_free_gpu_memory_fraction built (a shallow merge), and the flag's value was lost
    lines = [f"{y['kv_cache']}:", f"  {y['block_reuse']}: {'true' if target.prefix_caching else 'false'}",
             f"  {y['kv_fraction']}: {fraction}"]
    if dep.kv.name == "fp8":
        if y.get("kv_dtype_top"):  # 0.20-0.21: TorchLlmArgs.kv_cache_dtype, not a KvCacheConfig field yet
            lines.append(f"{y['kv_dtype_top']}: {engine.launch['kv_fp8']}")
        else:
            lines.append(f"  {y['kv_dtype']}: {engine.launch['kv_fp8']}")
    if target.max_prompt_len is None or target.max_prompt_len > dep.max_num_batched_tokens:
        lines.append(f"{y['chunked_prefill']}: true")
    if y.get("graph_switch"):  # 0.20-0.21: a bool, off by default, and the cap beside it
        lines.append(f"{y['cuda_graphs']}: {'true' if engine.kernels.cuda_graphs else 'false'}")
        if engine.kernels.cuda_graphs and sw.cuda_graph_max_bs is not None:
            lines.append(f"{y['graph_batch_flat']}: {sw.cuda_graph_max_bs}")
    elif not engine.kernels.cuda_graphs:
        lines.append(f"{y['cuda_graphs']}: null")
    elif sw.cuda_graph_max_bs is not None:
        if "graph_batch" in y:
            lines += [f"{y['cuda_graphs']}:", f"  {y['graph_batch']}: {sw.cuda_graph_max_bs}"]
        else:
            notes.append(f"the plan priced CUDA graphs up to decode batch {sw.cuda_graph_max_bs}; not rendered for "
                         f"TensorRT-LLM {engine.version} (cuda_graph_config.max_batch_size came in 1.0)")
    if sw.async_scheduling is False:
        lines.append(f"{y['overlap_off']}: true")
    elif sw.async_scheduling:
        notes.append(f"TensorRT-LLM {engine.version}'s PyTorch backend predates its overlap scheduler; it runs "
                     "synchronously")
    if sw.trtllm_moe:
        if "moe" in y:
            lines += [f"{y['moe']}:", f"  {y['moe_backend']}: {engine.launch['moe_trtllm']}"]
        else:
            notes.append(f"TensorRT-LLM's trtllm-gen MoE kernels are not rendered for {engine.version} (moe_config "
                         "came in 1.0); served with its default MoE backend")
    if dep.dp > 1:
        lines.append(f"{y['attention_dp']}: true")
    if dep.engine.stream_interval > 1 and "stream_interval" in y:  # where it is not, `stream_interval` notes it
        lines.append(f"{y['stream_interval']}: {dep.engine.stream_interval}")
    spec = dep.speculative
    if spec is not None:
        kind = engine.speculative_method(spec.method)
        if kind is None:
            notes.append(f"TensorRT-LLM's PyTorch backend has no '{spec.method}' speculation"
                         + (" (EAGLE-1/2 heads; it serves EAGLE-3: use eagle3)" if spec.method == "eagle" else "")
                         + "; served without it")
        else:
            lines += [f"{y['speculative']}:", f"  {y['decoding_type']}: {kind}", f"  {y['max_draft_len']}: {spec.k}"]
            if spec.method == "mtp":
                lines.append(f"  {y['mtp_layers']}: {spec.k}")
            elif spec.method == "ngram":
                lines.append(f"  {y['ngram_match']}: 4")
            elif spec.method == "draft" and spec.draft_model is not None:
                lines.append(f"  {y['speculative_model']}: {spec.draft_model.name}")
            elif spec.method == "eagle3":
                head = find_head(target.model_id, "eagle3")
                if head is None:
                    head = f"<EAGLE3 head for {target.model_id}>"
                    notes.append(f"no published EAGLE-3 head for {target.model_id} is known")
                lines.append(f"  {y['speculative_model']}: \"{head}\"")
    return "\n".join(lines) + "\n"


def render(target: LaunchTarget, engine: EngineProfile, *, options_file: str | None = None,
           extra_yaml: str = "") -> LaunchCommand:
    """The deployment's `trtllm-serve` command and its YAML; `options_file` names the YAML instead of the profile's
    file and `extra_yaml` is appended to it (a disaggregated instance's role: `launch/disaggregated.py`)."""
    dep = target.deployment
    la, flags = engine.launch, engine.launch.table("flags")
    if dep.weights.name in GGUF_FORMATS:
        return LaunchCommand(engine=engine.name, command=None, reason="TensorRT-LLM does not load GGUF")
    src = model_source(target, engine)
    if src is None:
        return LaunchCommand(engine=engine.name, command=None,
                             reason=f"no {dep.weights.name} checkpoint or ModelOpt recipe for TensorRT-LLM is known")
    notes = [src.note] if src.note else []
    attention_backend(dep, engine, notes)  # no switch: a note where the plan named one
    if not engine.at_least(la["pytorch_profile_since"]):
        notes.append(f"TensorRT-LLM {engine.version} is priced as its C++ TensorRT-engine flow (the C++ executor); "
                     f"this command starts trtllm-serve's PyTorch backend, whose Python executor runs differently "
                     f"(priced from {la['pytorch_profile_since']}): for the priced runtime build an engine with "
                     "trtllm-build and serve that (not rendered)")
    sw = switches(target, engine)
    env = (f"{la['pdl_env']}=1",) if sw.pdl else ()  # an environment variable, no flag
    line = CommandLine(*env, la["command"], src.model).flag(flags["backend"], la["backend"])
    line.flag(flags["tp"], dep.tp * dep.dp)  # trtllm-serve's --tp_size counts every GPU of a stage
    if dep.pp > 1:
        line.flag(flags["pp"], dep.pp)
    if dep.model.moe is not None:
        line.flag(flags["ep"], dep.ep)
    if dep.dp > 1 and dep.tp > 1:
        notes.append(f"TensorRT-LLM's attention DP gives every rank its own attention (DP {dep.tp * dep.dp}), not "
                     f"{dep.dp} groups of TP {dep.tp}")
    if dep.hosts > 1:  # one MPI world over the hosts (examples/llm-api: trtllm-llmapi-launch under srun or mpirun)
        notes.append(f"the replica spans {dep.hosts} {host_word(dep)}: start this command in one MPI world of "
                     f"{dep.gpus_per_replica} ranks, {dep.gpus_per_host} per host, through trtllm-llmapi-launch "
                     f"(e.g. `srun -N {dep.hosts} --ntasks-per-node {dep.gpus_per_host} --mpi=pmix "
                     "trtllm-llmapi-launch trtllm-serve ...`)")
    api_servers(dep, engine, line, notes)
    stream_interval(dep, engine, line, notes)
    line.flag(flags["max_num_seqs"], dep.max_num_seqs)
    line.flag(flags["max_num_batched_tokens"], budget_flag(dep, engine))
    line.flag(flags["max_model_len"], target.max_model_len)
    fraction = engine_memory_fraction(dep, engine, notes)
    line.flag(flags["memory_fraction"], fraction)
    name = options_file or la["extra_options_file"]
    line.flag(flags["extra_options"], name)
    yaml = _yaml(target, engine, sw, fraction, notes) + extra_yaml
    return LaunchCommand(engine=engine.name, command=line.render(), files=((name, yaml),), prepare=src.prepare,
                         checkpoint=src.checkpoint, notes=tuple(notes))
