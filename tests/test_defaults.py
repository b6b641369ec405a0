"""One home per default: every command and the Python API read the same values (`specs/defaults.py` for
flopwise's own, the engine catalog for engine knobs), so the same deployment comes out of each of them."""

from __future__ import annotations

import importlib
import inspect

import pytest
from typer.main import get_command

import flopwise
from flopwise.cli._app import COMMANDS, app
from flopwise.plan.space import SearchSpace, enumerate_candidates
from flopwise.specs import defaults as D
from flopwise.specs.hardware import get_hardware
from flopwise.specs.model_catalog import get_model

KNOBS = ("max_num_seqs", "max_num_batched_tokens", "gpu_memory_utilization", "block_size")


def _cli_defaults(name: str) -> dict[str, object]:
    importlib.import_module(f"flopwise.cli.{COMMANDS[name][0]}")  # registers the command on `app`
    cmd = get_command(app).commands[name]  # type: ignore[attr-defined]
    return {p.name: p.default for p in cmd.params}


def _api_defaults(fn: object) -> dict[str, object]:
    """The API function's parameters that have a default (a required one, e.g. compare's tries, has none)."""
    params = inspect.signature(fn).parameters.items()  # type: ignore[arg-type]
    return {n: p.default for n, p in params if p.default is not inspect.Parameter.empty}


@pytest.mark.parametrize("name", ["estimate", "simulate", "compare", "explain", "plan"])
def test_cli_and_api_share_their_defaults(name):
    """Every option a command shares with its API function has the same default, and the shared names
    (model, gpu, engine, lengths, endpoint) have specs/defaults.py's values."""
    cli, api = _cli_defaults(name), _api_defaults(getattr(flopwise, name))
    shared = sorted(set(cli) & set(api) - {"gpus"})  # plan's GPU list: text on the CLI, a tuple in Python
    assert len(shared) >= 5
    assert [(k, cli[k]) for k in shared] == [(k, api[k]) for k in shared]
    expected = {"model": D.DEFAULT_MODEL, "gpu": D.DEFAULT_GPU, "engine": D.DEFAULT_ENGINE,
                "endpoint": D.DEFAULT_ENDPOINT, "input_len": D.DEFAULT_INPUT_LEN, "output_len": D.DEFAULT_OUTPUT_LEN}
    for key, value in expected.items():
        if api.get(key) is not None:  # None: taken from the workload (simulate, compare, plan)
            assert api[key] == value, (name, key)


def test_the_plan_defaults_come_from_one_place():
    cli = _cli_defaults("plan")
    space = SearchSpace()
    assert cli["gpus"] == ",".join(D.PLAN_GPUS) and space.gpus == D.PLAN_GPUS
    assert cli["max_gpus"] == D.PLAN_MAX_GPUS == space.max_gpus
    assert cli["kv"] == D.PLAN_KV and space.kvs == tuple(D.PLAN_KV.split(","))
    assert cli["workload"] == D.PLAN_WORKLOAD == _api_defaults(flopwise.plan)["workload"]


def test_every_path_builds_the_same_deployment():
    """estimate, simulate, compare and plan, left to their defaults on one model and GPU, serve it with the same
    engine knobs (the engine catalog's for that GPU); estimate prices the engine offline (its LLM class: vLLM's
    offline token budget), as `deployment(..., frontend="none")` does."""
    model, gpu = "llama-3.1-8b", "h100-sxm"
    api = flopwise.deployment(model, gpu)
    est = flopwise.estimate(model, gpu).deployment
    offline = flopwise.deployment(model, gpu, frontend="none")
    assert [getattr(est, k) for k in KNOBS] == [getattr(offline, k) for k in KNOBS]
    assert (offline.max_num_seqs, offline.max_num_batched_tokens) == (1024, 16384)
    sim = flopwise.simulate(model, gpu, num_requests=5, request_rate=1).deployment
    ledger = flopwise.compare(["kv=fp8"], model, gpu, simulate=False).baseline.scenario.deployment
    cands, _ = enumerate_candidates(get_model(model), [get_hardware(gpu)],
                                    SearchSpace(gpus=(gpu,), tps=(1,), weights=("bf16",), kvs=("bf16",)), 4096)
    plan = cands[0].deployment
    for dep in (sim, ledger, plan):
        assert dep.engine.family == api.engine.family and dep.engine.version == api.engine.version
        assert [getattr(dep, k) for k in KNOBS] == [getattr(api, k) for k in KNOBS]
    assert api.max_num_seqs == 1024 and api.max_num_batched_tokens == 8192  # vLLM serve on an 80 GiB H100
