"""`llama-server` for a planned GGUF deployment, from the llama.cpp profile's [launch] table
(`catalog/engines/llamacpp.toml`).

- the model: a published GGUF file (`--hf-repo` / `--hf-file`), or the file llama.cpp's converter and
  `llama-quantize` make (`prepare`, then `-m`);
- slots (`-np`) = the planned max_num_seqs, at most the sequences of `max_model_len` tokens the KV cache holds;
  `-c` = slots x max_model_len (llama-server gives each slot c / np tokens of context);
- `-b`: the token budget per step; `-ngl 999`: every layer on the GPUs (split by layers across a TP group);
- an 8-bit KV cache is `--cache-type-k/-v q8_0` (llama.cpp has no fp8 cache), with `-fa` (a quantized V cache
  needs flash attention: a switch to b6000, `-fa on` once it took a value);
- `--metrics`: the Prometheus endpoint.
"""

from __future__ import annotations

from flopwise.cost.memory import max_sequences
from flopwise.launch.common import (
    FLOAT_FORMATS,
    GGUF_FORMATS,
    CommandLine,
    LaunchCommand,
    LaunchTarget,
    api_servers,
    attention_backend,
    model_source,
    stream_interval,
)
from flopwise.specs.engine import EngineProfile

__all__ = ["render"]


def render(target: LaunchTarget, engine: EngineProfile) -> LaunchCommand:
    dep = target.deployment
    la, flags = engine.launch, engine.launch.table("flags")
    if dep.weights.name not in (*GGUF_FORMATS, *FLOAT_FORMATS):
        return LaunchCommand(engine=engine.name, command=None,
                             reason=f"llama.cpp serves GGUF formats ({', '.join((*GGUF_FORMATS, *FLOAT_FORMATS))}), "
                                    f"not {dep.weights.name}")
    src = model_source(target, engine)
    if src is None:
        return LaunchCommand(engine=engine.name, command=None, reason="no GGUF file or recipe is known")
    notes = [src.note] if src.note else []
    attention_backend(dep, engine, notes)  # no switch: a note where the plan named one
    if src.file:
        line = CommandLine(la["command"]).flag(la["model_flag"], src.model).flag(la["hf_file_flag"], src.file)
    else:
        line = CommandLine(la["command"]).flag(la["local_model_flag"], src.model)
    slots = max(1, min(dep.max_num_seqs, max_sequences(dep, target.max_model_len)))
    line.flag(flags["ctx"], slots * target.max_model_len).flag(flags["parallel"], slots)
    line.flag(flags["batch"], dep.max_num_batched_tokens).flag(flags["gpu_layers"], 999)
    if dep.kv.bytes_per_element <= 1:
        line.flag(flags["kv_type_k"], "q8_0").flag(flags["kv_type_v"], "q8_0")
        # a quantized V cache needs flash attention: a switch before it was auto, `-fa on` after
        line.flag(flags["flash_attn"], la["flash_attn_on"] or None)
        notes.append("an 8-bit KV cache is q8_0 in llama.cpp, with flash attention on (a quantized V cache needs it)")
    if dep.tp > 1:
        notes.append(f"llama.cpp splits the layers over the {dep.tp} GPUs (--split-mode layer), not tensors")
    api_servers(dep, engine, line, notes)
    stream_interval(dep, engine, line, notes)
    line.flag(la.get("metrics_flag"))
    return LaunchCommand(engine=engine.name, command=line.render(), prepare=src.prepare, checkpoint=src.checkpoint,
                         notes=tuple(notes))
