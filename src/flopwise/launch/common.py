"""What every engine dialect shares: the target to render, the rendered command, a line builder whose
continuations paste cleanly, the memory fraction in each engine's own terms, and the checkpoint to load.

A command is one program line and one flag per continuation line:

    vllm serve RedHatAI/Meta-Llama-3.1-8B-FP8 \\
        --tensor-parallel-size 1 \\
        ...
        --enable-prefix-caching

Every line but the last ends in exactly " \\" (no trailing space after the backslash, so a pasted command
is one command), values are shell-quoted, and a command that needs a file (TensorRT-LLM's YAML) says so
through `files`.
"""

from __future__ import annotations

import math
import shlex
from dataclasses import dataclass, replace
from typing import Any

from flopwise.cost.memory import max_sequences, memory_fraction_for_pool, memory_plan
from flopwise.launch.checkpoints import Checkpoint, find_checkpoint, loads_as_published, recipe_for
from flopwise.specs.deployment import Deployment
from flopwise.specs.engine import API_SERVER_FLAGS, EngineProfile, get_engine
from flopwise.specs.hardware import GIB
from flopwise.specs.model_catalog import get_model, published_base
from flopwise.specs.precision import GGUF_FORMATS

__all__ = ["LaunchTarget", "LaunchCommand", "CommandLine", "command_argv", "engine_memory_fraction", "ModelSource",
           "model_source", "on_engine", "GGUF_FORMATS", "Switches", "switches", "host_word", "memory_refusal",
           "family_refusal"]

# a 16- or 32-bit checkpoint as it is (llama.cpp: a GGUF of the converter's --outtype)
FLOAT_FORMATS = ("bf16", "fp16", "fp32")


def host_word(dep: Deployment) -> str:
    """What a launch note calls the machines a replica's processes run on: "nodes" where each is a whole node,
    else its hosts within the NVLink domain (GB200 NVL72's 4-GPU trays)."""
    if dep.hosts == dep.nodes:
        return "nodes"
    return f"hosts ({dep.hardware.gpus_per_host} GPUs each, one NVLink domain)"


@dataclass(frozen=True, slots=True, kw_only=True)
class LaunchTarget:
    """A planned replica to launch. `model_id`: the 16-bit checkpoint the plan was made for (Hugging Face id or
    path); `max_model_len`: the context every request needs (the workload's caps within the model's context);
    `max_prompt_len`: its longest prompt; `checkpoint_weights`: the format the checkpoint ships in. Expert
    parallelism, data-parallel attention and nodes are the deployment's own (`dp`, `ep`, `nodes`)."""

    deployment: Deployment
    model_id: str
    max_model_len: int
    max_prompt_len: int | None = None
    prefix_caching: bool = True
    checkpoint_weights: str | None = None
    # engine switches as the plan asked them (None: each engine's default, no flag); the deployment's engine carries
    # the MoE backend and PDL (`KernelFactors.trtllm_moe`, `pdl`)
    async_scheduling: bool | None = None
    cuda_graph_max_bs: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class LaunchCommand:
    """One engine's command for a target. `command` is None when the engine cannot serve it (`reason`);
    `prepare`: the command that makes the checkpoint `command` loads (none is published); `files`: (name,
    contents) the command reads."""

    engine: str
    command: str | None
    files: tuple[tuple[str, str], ...] = ()
    prepare: str | None = None
    checkpoint: str | None = None
    notes: tuple[str, ...] = ()
    reason: str | None = None

    @property
    def family(self) -> str:
        return self.engine.partition("@")[0]

    def argv(self) -> list[str]:
        """The command as the shell splits it (for argument-parser checks)."""
        return command_argv(self.command) if self.command else []

    def file(self, name: str) -> str | None:
        return next((text for n, text in self.files if n == name), None)

    def to_dict(self) -> dict[str, Any]:
        return {"engine": self.engine, "command": self.command, "files": dict(self.files), "prepare": self.prepare,
                "checkpoint": self.checkpoint, "notes": list(self.notes), "reason": self.reason}


def command_argv(command: str) -> list[str]:
    """A rendered command (continuation lines and all) as the shell splits it."""
    return shlex.split(command.replace("\\\n", " "), comments=True)


class CommandLine:
    """Builds a command one flag per line (see the module docstring)."""

    __slots__ = ("head", "parts")

    def __init__(self, *words: str):
        self.head = " ".join(words)
        self.parts: list[str] = []

    def flag(self, name: str | None, value: object = None) -> CommandLine:
        """`--name value` (value shell-quoted), or a bare switch; nothing when the engine has no such flag."""
        if name:
            self.parts.append(name if value is None else f"{name} {shlex.quote(_text(value))}")
        return self

    def render(self) -> str:
        return " \\\n    ".join([self.head, *self.parts])


def _text(v: object) -> str:
    if isinstance(v, float):
        return f"{v:g}"
    return str(v)


def on_engine(dep: Deployment, engine: EngineProfile) -> Deployment:
    """The same deployment served by another engine (same knobs), to price that engine's memory terms."""
    return dep if dep.engine == engine else replace(dep, engine=engine)


def engine_memory_fraction(dep: Deployment, engine: EngineProfile, notes: list[str] | None = None) -> float:
    """The memory fraction that gives `engine` the KV pool the plan sized for `dep`, in what that engine means by
    it (`cost.memory.memory_fraction_for_pool`), rounded down to 3 decimals and kept within (0, 0.99], or 1 where
    the engine sizes its pool from measured memory and keeps its own margin (vLLM >= 0.34). A plan made on another
    engine asks at most this engine's own default for the deployment, which leaves the room its activations and
    CUDA graphs need (a pool the other engine's sizing allows can exceed it: vLLM 0.34 keeps only a 1 GiB margin
    beyond its measured peak); `notes` says where the pool this engine gets is smaller than planned, capped or not
    (a plan on SGLang whose pool vLLM 0.34's margin cannot give)."""
    f, here, own, capped = _fraction(dep, engine)
    pool = memory_plan(dep).kv_pool_bytes
    got = memory_plan(replace(here, gpu_memory_utilization=f)).kv_pool_bytes
    if notes is not None and got < pool * 0.99:  # rounding aside, this engine holds less than the plan sized
        why = (f"takes at most its own default memory fraction ({own:g}) here, for its activations and CUDA graphs"
               if capped else f"keeps more memory outside its KV cache, at a memory fraction of {f:g}")
        notes.append(f"{engine.display} {engine.version} {why}: a KV pool of {got / GIB:.1f} GiB, not the "
                     f"{pool / GIB:.1f} GiB planned on {dep.engine.name}")
    return f


def _fraction(dep: Deployment, engine: EngineProfile) -> tuple[float, Deployment, float, bool]:
    """(memory fraction, the deployment on `engine`, that engine's own default fraction, whether the default capped
    it) for `engine_memory_fraction`."""
    here = on_engine(dep, engine)
    f = memory_fraction_for_pool(here, memory_plan(dep).kv_pool_bytes)
    measured = engine.measured_margin(dep.hardware.vendor, dep.hardware.kind) is not None
    f = min(1.0 if measured else 0.99, max(0.05, math.floor(f * 1000) / 1000))
    own = dep.engine_defaults(engine).memory_fraction
    capped = (engine.family, engine.version) != (dep.engine.family, dep.engine.version) and f > own
    return (own if capped else f), here, own, capped


def family_refusal(target: LaunchTarget, engine: EngineProfile) -> str | None:
    """Why `engine` cannot load the model at all: its family's every architecture is absent from the model registry
    of this release or of a later one read without it (the profile's [launch] absent_families: family -> the last
    MAJOR.MINOR.PATCH release read without it, in releases with no Transformers fallback; its post-releases with
    it), or None."""
    family = target.deployment.model.family
    last = engine.launch.table("absent_families").get(family)
    if last is None:
        return None
    major, minor, patch = (int(x) for x in last.split("."))
    if engine.at_least(f"{major}.{minor}.{patch + 1}"):
        return None
    return (f"{engine.display} {engine.version} has no {family} model: its architectures are absent from the model "
            f"registry up to release {last} (read in the release wheels); use a later release")


def memory_refusal(target: LaunchTarget, engine: EngineProfile) -> str | None:
    """Why `engine` cannot start the target at the memory fraction it gets (`engine_memory_fraction`): its KV pool
    there holds not one `max_model_len`-token sequence (a plan made on another engine, whose default fraction leaves
    no room beside the weights), or None."""
    dep = target.deployment
    f, here, own, capped = _fraction(dep, engine)
    if max_sequences(replace(here, gpu_memory_utilization=f), target.max_model_len) >= 1:
        return None
    why = f"its own default memory fraction ({own:g})" if capped else f"a memory fraction of {f:g}"
    return (f"{engine.display} {engine.version} holds no {target.max_model_len}-token sequence's KV cache beside the "
            f"weights at {why} (planned on {dep.engine.name})")


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelSource:
    """Where an engine's weights come from: `model` (what the command loads), `quantization` (a flag value for an
    engine that quantizes a 16-bit checkpoint at load; None: the checkpoint's quantization_config decides),
    `prepare` (the command that makes `model`), `checkpoint` (a published repository, when one is used),
    `file` (a GGUF file inside the repository)."""

    model: str
    quantization: str | None = None
    prepare: str | None = None
    checkpoint: str | None = None
    file: str | None = None
    note: str | None = None


def model_source(target: LaunchTarget, engine: EngineProfile) -> ModelSource | None:
    """The weights `engine` loads for the target's format: the checkpoint itself when it ships in that format (and,
    for a listed pre-quantized repository, `engine` loads it as published); else a published pre-quantized
    checkpoint; else the 16-bit one quantized at load (where the engine does
    that); else the output of a recipe (`prepare`). None: no way is known."""
    dep = target.deployment
    w = dep.weights.name
    family = engine.family
    if w == target.checkpoint_weights and not engine.gguf_only and loads_as_published(target.model_id, family):
        return ModelSource(model=target.model_id)
    # another format of a published pre-quantized checkpoint comes from the model it was made from: as that model
    # ships (16-bit, or its own format: DeepSeek-V3's block-scaled FP8 under nvidia/DeepSeek-V3-0324-FP4), else
    # from its published checkpoints and recipes below
    origin = published_base(target.model_id) or target.model_id
    if (w in FLOAT_FORMATS or (origin != target.model_id and w == get_model(origin).checkpoint_weights)) \
            and not engine.gguf_only:
        return ModelSource(model=origin)
    ck: Checkpoint | None = find_checkpoint(origin, w, family)
    if ck is not None:
        return ModelSource(model=ck.repo, checkpoint=ck.repo, file=ck.file,
                           note=f"{w} weights from the pre-quantized checkpoint {ck.repo}"
                           + (f" ({ck.note})" if ck.note else ""))
    if w in engine.launch.get("online_quantization", []):
        return ModelSource(model=origin, quantization=w,
                           note=f"{w} weights quantized at load from the 16-bit checkpoint")
    recipe = recipe_for(w, family, origin)
    if recipe is None:
        return None
    return ModelSource(model=recipe.out, prepare=recipe.command,
                       note=f"no published {w} checkpoint for {origin} is known: make one with {recipe.tool}")


@dataclass(frozen=True, slots=True, kw_only=True)
class Switches:
    """What a command must change from what `engine`'s release does by itself on the deployment's device:
    `async_scheduling` (None: nothing to change), `cuda_graph_max_bs` (None: nothing; 0: graphs for every batch the
    server admits, `max_num_seqs`), `trtllm_moe` and `pdl`."""

    async_scheduling: bool | None
    cuda_graph_max_bs: int | None
    trtllm_moe: bool
    pdl: bool


def switches(target: LaunchTarget, engine: EngineProfile) -> Switches:
    """The target's engine switches that `engine` (at its version) would not pick on its own."""
    dep = target.deployment
    own = dep.engine_defaults(engine.released())
    a, g = target.async_scheduling, target.cuda_graph_max_bs
    # 0 (graphs for every batch) is always written out: an engine's own 0 may stand for a default cap
    graphs = g is not None and (g == 0 or g != own.cuda_graph_max_bs)
    return Switches(async_scheduling=a if a is not None and a != own.async_scheduling else None,
                    cuda_graph_max_bs=(g or dep.max_num_seqs) if graphs else None,
                    trtllm_moe=dep.engine.kernels.trtllm_moe, pdl=dep.engine.kernels.pdl)


def budget_flag(dep: Deployment, engine: EngineProfile) -> int:
    """The token-budget flag that gives `engine` the planned prefill budget per attention rank and micro-batch
    (`Deployment.token_budget` / dp / pipeline_batches: a pipelined replica's round holds a budget per micro-batch):
    under data-parallel attention SGLang divides its flag among the ranks (`EngineProfile.dp_attention_chunk`),
    vLLM and TensorRT-LLM give each rank the whole of theirs."""
    per_rank = dep.token_budget // (dep.dp * dep.pipeline_batches)
    if dep.dp == 1 or engine.dp_attention_chunk == "whole":
        return per_rank
    return per_rank * (dep.dp if engine.dp_attention_chunk == "split" else 2)


def api_servers(dep: Deployment, engine: EngineProfile, line: CommandLine, notes: list[str]) -> None:
    """The planned API-server processes (`--api-servers`, in the deployment's frontend) in `engine`'s flag
    (`API_SERVER_FLAGS`), or a note that it runs its own."""
    planned = dep.engine.api_servers_asked()
    if planned is None:
        return
    flag = engine.launch.table("flags").get("api_servers")
    if flag:
        line.flag(flag, planned)
    else:
        notes.append(f"{engine.display} {engine.version} has no API-server process count ({API_SERVER_FLAGS}): "
                     f"it runs its own, not the planned {planned}")


def stream_interval(dep: Deployment, engine: EngineProfile, line: CommandLine, notes: list[str]) -> None:
    """The planned stream interval (`--stream-interval`, in the deployment's frontend) in `engine`'s flag, or a
    note where this release streams every token (TensorRT-LLM's is a YAML key: `launch/trtllm.py`)."""
    planned = dep.engine.stream_interval
    if planned == 1:
        return
    flag = engine.launch.table("flags").get("stream_interval")
    if flag:
        line.flag(flag, planned)
    elif not engine.has_stream_interval:
        notes.append(f"{engine.display} {engine.version} streams every token (no stream-interval option): the "
                     f"planned interval of {planned} tokens is not rendered, and its API server does more work")


def attention_backend(dep: Deployment, engine: EngineProfile, notes: list[str]) -> tuple[str | None, str | None]:
    """How `engine` is told the attention backend the deployment was priced with (`KernelFactors.attention_backend`,
    in `engine`'s spelling): (SGLang's --attention-backend or vLLM's from 0.13, the name), or (None, vLLM's
    VLLM_ATTENTION_BACKEND=NAME word before the command, to 0.14); (None, None) where none was named, or with a note
    where `engine` cannot be told it (no such backend, no switch)."""
    named = dep.engine.kernels.attention_backend
    if not named:
        return None, None
    la = engine.launch
    spelled = engine.attention_backend_spelling(named)
    if spelled is not None:  # (the same backend under another engine's spelling: vLLM's FLASHINFER, SGLang's)
        flag = la.table("flags").get("attention_backend")
        if flag:
            return flag, spelled
        if la.get("attention_backend_env"):
            return None, f"{la['attention_backend_env']}={spelled}"
    notes.append(f"the plan priced the {named} attention backend; {engine.display} {engine.version} runs its own "
                 "choice here")
    return None, None


def engine_profile(family: str, like: EngineProfile) -> EngineProfile:
    """`family`'s profile at its default version (`like` itself when it is that family), without CUDA graphs
    where `like` runs without them and `family` has an eager mode to price (llama.cpp has none: as it is)."""
    if like.family == family:
        return like
    eng = get_engine(family)
    return eng.eager() if not like.kernels.cuda_graphs and eng.kernels.eager_launch_s else eng
