"""Launch commands for a disaggregated fleet: a prefill pool and a decode pool of one engine, and the router that
sends each request to a prefill instance and then to a decode instance with its KV.

    vllm    each instance: `vllm serve` as planned + `--kv-transfer-config` naming the NIXL connector with role
            kv_both (vLLM's disaggregated-prefill docs); in front, a P/D-aware router (llm-d, NVIDIA Dynamo, or
            vLLM's disaggregated-serving proxy example), named in the notes. Also the same fleet under NVIDIA
            Dynamo (`dynamo`): `python -m dynamo.frontend` and one `python -m dynamo.vllm` worker per instance,
            the instance's vLLM arguments (rendered by `launch/vllm.py` after Dynamo's launcher words) with
            `--disaggregation-mode prefill|decode` and the connector, each worker its own NIXL side-channel port
            (the engine catalog's [launch.dynamo] table). And as llm-d's ModelService Helm values (`llm_d`):
            `prefill:` / `decode:` pods with their replicas, `parallelism.tensor` and the instances' vLLM arguments
            (the chart adds `vllm serve`, the port and the TP), decode pods behind the routing sidecar (chart
            v0.4.x, as llm-d's P/D guide installed it before llm-d 0.7; the [launch.llm_d] table)
    sglang  prefill instances `--disaggregation-mode prefill`, decode instances `--disaggregation-mode decode`, both
            `--disaggregation-transfer-backend` (mooncake; nixl also); the router
            `python -m sglang_router.launch_router --pd-disaggregation --prefill URL --decode URL`
    trtllm  each instance: `trtllm-serve` as planned + `--host/--port`, reading its pool's YAML (context servers:
            the planned options + `disable_overlap_scheduler` + `cache_transceiver_config` with the transfer backend
            and a buffer of the longest prompt; generation servers: the options + `cache_transceiver_config`); in
            front, `trtllm-serve disaggregated -c disagg_config.yaml`, which lists the context and generation
            servers' URLs (the engine catalog's [launch.disaggregated] table; `files` holds the three YAML files)

Each pool's instance is the single-replica command of its deployment (`render`), so TP, formats and knobs are
spelled as everywhere else; ports are 30000 + i for prefill instance i and 31000 + j for decode instance j.
"""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import replace
from typing import Any

from flopwise.launch.common import (
    CommandLine,
    LaunchCommand,
    LaunchTarget,
    command_argv,
    engine_profile,
    switches,
)
from flopwise.launch.sglang import render as render_sglang
from flopwise.launch.trtllm import render as render_trtllm
from flopwise.launch.vllm import render as render_vllm
from flopwise.specs.cluster import ClusterSpec
from flopwise.specs.engine import EngineProfile

__all__ = ["disaggregated_launch", "PREFILL_PORT", "DECODE_PORT"]

PREFILL_PORT = 30000
DECODE_PORT = 31000
ROUTER_PORT = 8000  # where clients send requests: the P/D router, proxy or frontend


def _with_flags(base: LaunchCommand, extra: list[tuple[str, object]]) -> LaunchCommand:
    """`base` with `extra` (flag, value) pairs appended to its command."""
    if base.command is None:
        return base
    line = CommandLine(base.command)
    for flag, value in extra:
        line.flag(flag, value)
    return replace(base, command=line.render())


def _instance(target: LaunchTarget, engine: EngineProfile, extra: list[tuple[str, object]],
              launcher: tuple[str, ...] | None = None) -> LaunchCommand:
    base = render_vllm(target, engine, launcher) if engine.family == "vllm" else render_sglang(target, engine)
    return _with_flags(base, extra)


def disaggregated_launch(spec: ClusterSpec, *, model_id: str, max_model_len: int, max_prompt_len: int | None,
                         family: str, async_scheduling: bool | None = None,
                         cuda_graph_max_bs: int | None = None) -> dict[str, Any]:
    """The prefill and decode instance commands and the router for `spec` on the engine `family` (vllm, sglang
    or trtllm); {"reason": ...} where that engine has no such launch here. `async_scheduling`, `cuda_graph_max_bs`:
    the engine switches the fleet was planned with (`LaunchTarget`)."""
    if family == "trtllm":
        return _trtllm(spec, model_id=model_id, max_model_len=max_model_len, max_prompt_len=max_prompt_len,
                       async_scheduling=async_scheduling, cuda_graph_max_bs=cuda_graph_max_bs)
    if family not in ("vllm", "sglang"):
        return {"engine": family, "reason": f"disaggregated launch is rendered for vllm, sglang and trtllm, not "
                                            f"{family}"}
    eng0 = engine_profile(family, spec.pools[0].deployment.engine)  # the fleet's engine (its release's flags)
    since = eng0.launch.get("disaggregation_since")
    if since and not eng0.at_least(since):
        return {"engine": eng0.name, "reason": f"{eng0.display} {eng0.version} has no prefill/decode "
                                               f"disaggregation flags (from {since})"}
    out: dict[str, Any] = {"engine": family, "pools": []}
    urls: dict[str, list[str]] = {"prefill": [], "decode": []}
    notes: list[str] = []
    dynamo_pools: list[dict[str, Any]] = []
    for pool in spec.pools:
        dep = pool.deployment
        eng = engine_profile(family, dep.engine)
        flags = eng.launch.table("flags")
        one = LaunchTarget(deployment=dep, model_id=model_id, max_model_len=max_model_len,
                           max_prompt_len=max_prompt_len, async_scheduling=async_scheduling,
                           cuda_graph_max_bs=cuda_graph_max_bs)
        if family == "vllm":
            first = sum(p["replicas"] for p in dynamo_pools)  # workers numbered across the fleet
            dynamo_pools.append(_dynamo_pool(pool.role, pool.num_replicas, one, eng, first))
        commands = []
        for i in range(pool.num_replicas):
            port = (PREFILL_PORT if pool.role == "prefill" else DECODE_PORT) + i
            launcher: tuple[str, ...] | None = None
            if family == "vllm":
                extra: list[tuple[str, object]] = [(flags["kv_transfer_config"], _connector(eng)),
                                                   (flags["port"], port)]
                # the NIXL side channel each instance advertises: its own host, a port of its own (fleet-wide)
                la = eng.launch
                n = len(urls["prefill"]) + len(urls["decode"])
                launcher = (f"{la['nixl_host_env']}={shlex.quote(f'<{pool.role}-{i}-host>')}",
                            f"{la['nixl_port_env']}={int(la['nixl_port']) + n}", la["command"])
            else:
                extra = [(flags["disaggregation_mode"], pool.role),
                         (flags["disaggregation_backend"], eng.launch["disaggregation_backend"]), (flags["port"], port)]
            cmd = _instance(one, eng, extra, launcher)
            if cmd.command is None:
                return {"engine": family, "reason": cmd.reason}
            commands.append(cmd.command)
            notes += [n for n in cmd.notes if n not in notes]
            urls[pool.role].append(f"http://<{pool.role}-{i}-host>:{port}")
        out["pools"].append({"role": pool.role, "replicas": pool.num_replicas, "tp": dep.tp, "commands": commands})
    notes.append("instances that share a host need GPUs of their own and " + (
        "distinct --base-gpu-id and --disaggregation-bootstrap-port values (the router then takes each prefill URL "
        "with its port)" if family == "sglang" else "CUDA_VISIBLE_DEVICES set apart (their NIXL side-channel ports "
        "already differ)"))
    if family == "sglang":
        router = CommandLine(eng0.launch["pd_router"])
        for u in urls["prefill"]:
            router.flag("--prefill", u)
        for u in urls["decode"]:
            router.flag("--decode", u)
        out["router"] = router.flag("--host", "0.0.0.0").flag("--port", ROUTER_PORT).render()
    else:
        out["router"] = None
        notes.append("route requests with a prefill/decode-aware router (llm-d, NVIDIA Dynamo, or vLLM's "
                     "disaggregated-serving proxy example) over the instances above: "
                     + ", ".join(shlex.quote(u) for u in urls["prefill"] + urls["decode"]))
        out["dynamo"] = _dynamo(dynamo_pools, eng0)
        out["llm_d"] = _llm_d(spec, out["pools"], eng0)
    out["notes"] = notes
    return out


def _connector(engine: EngineProfile) -> str:
    """vLLM's --kv-transfer-config: the NIXL connector, each instance both sending and receiving."""
    return json.dumps({"kv_connector": engine.launch["kv_connector"], "kv_role": "kv_both"}, separators=(",", ":"))


def _dynamo_pool(role: str, replicas: int, target: LaunchTarget, engine: EngineProfile,
                 first: int) -> dict[str, Any]:
    """One pool's NVIDIA Dynamo workers: `python -m dynamo.vllm --model MODEL` with the instance's vLLM arguments
    (no HTTP port: the frontend serves HTTP), the connector and the worker's role; worker i of the fleet (from
    `first` on) gets NIXL side-channel port side_channel_port + i, so that any may share a host."""
    d, flags = engine.launch.table("dynamo"), engine.launch.table("flags")
    commands = []
    for i in range(first, first + replicas):
        launcher = (f"{d['side_channel_env']}={int(d['side_channel_port']) + i}", d["worker"], d["model_flag"])
        cmd = _instance(target, engine, [(flags["kv_transfer_config"], _connector(engine)), (d["role_flag"], role)],
                        launcher)
        if cmd.command is not None:
            commands.append(cmd.command)
    return {"role": role, "replicas": replicas, "tp": target.deployment.tp, "commands": commands}


def _dynamo(pools: list[dict[str, Any]], engine: EngineProfile) -> dict[str, Any]:
    """The fleet's vLLM instances as NVIDIA Dynamo workers (`_dynamo_pool`) behind its frontend."""
    d = engine.launch.table("dynamo")
    frontend = CommandLine(d["frontend"]).flag(d["http_port_flag"], ROUTER_PORT).render()
    return {"version": f">= {d['since']}", "frontend": frontend, "pools": pools,
            "notes": [f"Dynamo discovers its workers through etcd by default: start etcd first, or set "
                      f"{d['discovery_env']}=file on the frontend and every worker (one host or a shared directory)",
                      f"{d['router_mode_flag']} kv on the frontend routes by KV-cache overlap (the workers must "
                      "then publish KV events, --kv-events-config); the default is round-robin"]}


def _trtllm(spec: ClusterSpec, *, model_id: str, max_model_len: int, max_prompt_len: int | None,
            async_scheduling: bool | None, cuda_graph_max_bs: int | None) -> dict[str, Any]:
    """TensorRT-LLM's disaggregated serving: context (prefill) and generation (decode) `trtllm-serve` instances,
    each pool's YAML naming its KV transceiver, and `trtllm-serve disaggregated` over them."""
    eng = engine_profile("trtllm", spec.pools[0].deployment.engine)
    d, flags = eng.launch.table("disaggregated"), eng.launch.table("flags")
    if not eng.at_least(d["since"]):
        return {"engine": eng.name, "reason": f"TensorRT-LLM's disaggregated launch is rendered for >= {d['since']} "
                                              f"({d['transceiver']} with {d['backend_key']}), not {eng.version}"}
    buffer = max_prompt_len or max_model_len  # the transceiver's buffer: at least the longest prompt
    out: dict[str, Any] = {"engine": "trtllm", "pools": []}
    files: dict[str, str] = {}
    notes: list[str] = []
    urls: dict[str, list[str]] = {"prefill": [], "decode": []}
    for pool in spec.pools:
        role = "context" if pool.role == "prefill" else "generation"
        one = LaunchTarget(deployment=pool.deployment, model_id=model_id, max_model_len=max_model_len,
                           max_prompt_len=max_prompt_len, async_scheduling=async_scheduling,
                           cuda_graph_max_bs=cuda_graph_max_bs)
        # a context server runs without the overlap scheduler (once: a plan made with it off writes the same key)
        off = role == "context" and switches(one, eng).async_scheduling is not False
        extra = f"{d['overlap_key']}: true\n" if off else ""
        extra += f"{d['transceiver']}:\n  {d['backend_key']}: {d['backend']}\n  {d['buffer_key']}: {buffer}\n"
        commands = []
        for i in range(pool.num_replicas):
            port = (PREFILL_PORT if pool.role == "prefill" else DECODE_PORT) + i
            base = _with_flags(render_trtllm(one, eng, options_file=d[f"{role}_options_file"], extra_yaml=extra),
                               [(flags["host"], "0.0.0.0"), (flags["port"], port)])
            if base.command is None:
                return {"engine": "trtllm", "reason": base.reason}
            files.update(base.files)
            notes += [n for n in base.notes if n not in notes]
            if base.prepare is not None and f"make the checkpoint first: {base.prepare}" not in notes:
                notes.append(f"make the checkpoint first: {base.prepare}")
            commands.append(base.command)
            urls[pool.role].append(f"<{pool.role}-{i}-host>:{port}")
        out["pools"].append({"role": pool.role, "replicas": pool.num_replicas, "tp": pool.deployment.tp,
                             "commands": commands})
    config = ["hostname: 0.0.0.0", f"port: {ROUTER_PORT}"]
    for role in ("prefill", "decode"):
        config += [f"{d[role + '_servers']}:", f"  num_instances: {len(urls[role])}", "  urls:"]
        config += [f'    - "{u}"' for u in urls[role]]
    files[d["config_file"]] = "\n".join(config) + "\n"
    out["files"] = files
    out["router"] = CommandLine(d["proxy"]).flag(d["config_flag"], d["config_file"]).render()
    out["notes"] = notes
    return out


_ENV_WORD = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")  # NAME=value before a command


def _llm_d(spec: ClusterSpec, pools: list[dict[str, Any]], engine: EngineProfile) -> dict[str, Any]:
    """The fleet as llm-d's ModelService Helm values (the [launch.llm_d] table): the checkpoint the instances load,
    each pool's replicas and tensor parallelism, and the vLLM arguments of its instances (as rendered, less what
    the chart adds: the program, the model, --port and --tensor-parallel-size)."""
    d, flags = engine.launch.table("llm_d"), engine.launch.table("flags")
    def after_env(argv: list[str]) -> list[str]:  # the command less the environment assignments before it
        return argv[next(i for i, w in enumerate(argv) if not _ENV_WORD.match(w)):]
    program = len(shlex.split(engine.launch["command"]))
    served = after_env(command_argv(pools[0]["commands"][0]))[program]  # the checkpoint the pods load
    lines = ["modelArtifacts:", f"  uri: hf://{served}", f"  name: {served}", "routing:",
             f"  servicePort: {d['service_port']}", "  proxy:", f"    connector: {d['proxy_connector']}"]
    for pool, rendered in zip(spec.pools, pools, strict=True):
        argv = after_env(command_argv(rendered["commands"][0]))
        args: list[str] = []
        skip = False
        for a in argv[program + 1:]:  # after the program and the model
            if not skip and a in (flags["tp"], flags["port"]):
                skip = True  # the flag and its value
            elif skip:
                skip = False
            else:
                args.append(a)
        port = d["decode_port"] if pool.role == "decode" else d["service_port"]
        lines += [f"{pool.role}:", "  create: true", f"  replicas: {pool.num_replicas}", "  parallelism:",
                  f"    tensor: {pool.deployment.tp}", "  containers:", "  - name: vllm", f"    image: {d['image']}",
                  f"    modelCommand: {d['model_command']}", "    args:"]
        lines += [f"      - {json.dumps(a)}" for a in args]
        lines += ["    env:", f"      - name: {d['side_channel_host_env']}", "        valueFrom:",
                  "          fieldRef:", "            fieldPath: status.podIP", "    ports:",
                  f"      - containerPort: {port}", "        name: vllm", f"      - containerPort: {d['nixl_port']}",
                  "        name: nixl", "    mountModelVolume: true"]
    name = d["values_file"]
    repo = d["chart"].split("/")[0]
    return {"chart": f"{d['chart']} {d['chart_version']}", "files": {name: "\n".join(lines) + "\n"},
            "commands": [f"helm repo add {repo} {d['repo_url']}",
                         CommandLine(f"helm install {d['release']} {d['chart']}").flag("--version", d["chart_version"])
                         .flag("-f", name).render()],
            "notes": ["llm-d's P/D guide (before llm-d 0.7) installs this chart beside the llm-d infra (gateway) and "
                      "an InferencePool release with the P/D-aware scheduler; llm-d 0.7 deploys the same pods through "
                      "Kustomize overlays instead",
                      f"decode pods serve vLLM on {d['decode_port']} behind the routing sidecar on "
                      f"{d['service_port']}; prefill pods serve on {d['service_port']}",
                      f"the image ({d['image']}) brings its own vLLM build, not necessarily the planned "
                      f"{engine.name}; the arguments above are long-standing vLLM flags"]}
