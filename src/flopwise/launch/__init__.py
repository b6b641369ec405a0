"""Launch commands for a planned deployment: one dialect per engine, rendered from the engine profile's
[launch] table (`catalog/engines/*.toml`): flag names, what the memory fraction means, version-dependent
spellings. `render(target, engine)` renders one; `plan_launch(result)` the first choice of a plan on its own
engine and on the others.

    vllm.py      vllm serve
    sglang.py    python -m sglang.launch_server
    trtllm.py    trtllm-serve (PyTorch backend) + its --extra_llm_api_options YAML
    llamacpp.py  llama-server (GGUF formats)
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from flopwise.launch import llamacpp, sglang, trtllm, vllm
from flopwise.launch.common import LaunchCommand, LaunchTarget, engine_profile, family_refusal, memory_refusal
from flopwise.plan.search import PlanResult
from flopwise.specs.deployment import device_refusal
from flopwise.specs.engine import EngineProfile
from flopwise.specs.model_catalog import hub_spelling

__all__ = ["LaunchTarget", "LaunchCommand", "render", "plan_launch", "DIALECTS", "launch_model_id"]

DIALECTS = {"vllm": vllm.render, "sglang": sglang.render, "trtllm": trtllm.render, "llamacpp": llamacpp.render}


def render(target: LaunchTarget, engine: EngineProfile | None = None) -> LaunchCommand:
    """The command for `target` on `engine` (default: the engine the deployment was planned with)."""
    eng = engine or target.deployment.engine
    dialect = DIALECTS.get(eng.family)
    if dialect is None:
        return LaunchCommand(engine=eng.name, command=None, reason=f"no launch dialect for {eng.display}")
    refusal = (device_refusal(eng, target.deployment.hardware) or family_refusal(target, eng)
               or eng.server_dp_refusal(target.deployment.replicas_per_server)
               or (memory_refusal(target, eng) if eng.family != "llamacpp" else None))
    if refusal:
        return LaunchCommand(engine=eng.name, command=None, reason=refusal)
    return dialect(target, eng)


def launch_model_id(given: str, model_name: str) -> str:
    """The checkpoint a command loads: a Hugging Face id the user gave (an Instruct id of a catalog shape, a
    published checkpoint), spelt as the catalog spells it, else the catalog id (an alias was given), else the
    path as given."""
    if Path(given).exists():  # a local checkpoint, as given (even where its name is a hub id's)
        return given
    return hub_spelling(given) or (given if "/" in given else model_name)


def plan_launch(result: PlanResult) -> dict[str, Any] | None:
    """The first choice on its planned engine and on the others (the keys `vllm`, `sglang`, `trtllm`,
    `trtllm_extra_llm_api_options`, `llamacpp` hold the command text, None where an engine cannot serve it;
    `commands` every detail, the planned engine first)."""
    best = result.best
    if best is None:
        return None
    dep = best.candidate.deployment
    target = LaunchTarget(deployment=dep, model_id=launch_model_id(result.request.model, result.model.name),
                          max_model_len=result.max_len, max_prompt_len=result.max_prompt_len,
                          prefix_caching=best.candidate.prefix_caching, checkpoint_weights=result.checkpoint_weights,
                          async_scheduling=result.request.space.async_scheduling,
                          cuda_graph_max_bs=result.request.space.cuda_graph_max_bs)
    families = [dep.engine.family] + [f for f in DIALECTS if f != dep.engine.family]
    cmds = {f: render(target, engine_profile(f, dep.engine)) for f in families}
    trt = cmds["trtllm"]
    return {"engine": dep.engine.name, "vllm": cmds["vllm"].command, "sglang": cmds["sglang"].command,
            "trtllm": trt.command, "trtllm_extra_llm_api_options": trt.file("extra-llm-api-options.yml"),
            "llamacpp": cmds["llamacpp"].command,
            "commands": [cmds[f].to_dict() for f in families if cmds[f].command is not None]
            + [cmds[f].to_dict() for f in families if cmds[f].command is None]}
