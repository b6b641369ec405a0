"""Calibrating from `flopwise bench` run directories: runs whose records the simulator produced under a known
profile are fitted back to it, through the library and the CLI."""

import json
import shutil
from dataclasses import replace

import pytest
from typer.testing import CliRunner

from flopwise.api import deployment
from flopwise.bench.arrivals import Load
from flopwise.bench.runner import BenchConfig, PromptConfig
from flopwise.bench.store import RunStore
from flopwise.calibrate import calibrate, load_bench_runs
from flopwise.calibrate.observations import with_profile
from flopwise.cli import app
from flopwise.errors import CalibrationError, FlopwiseWarning
from flopwise.metrics.summary import RequestRecord
from flopwise.profile.hostfile import read_host_file
from flopwise.sim import simulate
from flopwise.specs.hardware import load_hardware_file
from flopwise.workload.spec import RequestSpec, Workload

HW = "cpu-epyc-zen5-2c"
MODEL = "qwen2.5-0.5b"
TRUE = dict(compute_max=0.3, bandwidth_max=0.45)
ASK = [*TRUE, "step_overhead_s"]  # its true value is the start value; with these runs it is (nearly) confounded


def _write_run(root, dep, concurrency, input_len, n=8, output_len=16):
    specs = tuple(RequestSpec(arrival_at=0.0, input_tokens=input_len, output_tokens=output_len) for _ in range(n))
    wl = Workload(specs, concurrency=concurrency)
    res = simulate(dep, wl)
    cfg = BenchConfig(url="http://127.0.0.1:1", model="m", load=Load(kind="concurrency", concurrency=concurrency),
                      num_requests=n, prompts=PromptConfig(input_len=input_len, output_len=output_len))
    store = RunStore(root, cfg.to_dict())
    for rec in res.records:
        store.append(rec)
    store.close()
    return root


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    dep = deployment(MODEL, HW, max_num_seqs=256, max_num_batched_tokens=2048)
    true_dep = with_profile(dep, replace(dep.hardware.efficiency, **TRUE))
    base = tmp_path_factory.mktemp("sweep")
    # a long prefill (compute), a short one (weights + step overhead), many long decodes (KV traffic): three
    # different mixes of the three parameters, so each is identifiable
    for i, (c, ilen, n) in enumerate(((1, 1024, 4), (1, 32, 4), (16, 1024, 16))):
        _write_run(base / f"{i:02d}-c{c}", true_dep, c, ilen, n)
    return base, dep


def test_bench_runs_recover_profile(runs):
    base, dep = runs
    loaded = load_bench_runs([base])
    assert [r.label for r in loaded] == ["concurrency-1", "concurrency-1", "concurrency-16"]
    assert set(loaded[0].measured) == {"ttft_ms.p50", "ttft_ms.p95", "tpot_ms.mean", "tpot_ms.p95"}
    cal = calibrate(dep.hardware, runs=loaded, dep=dep, params=ASK)
    for k, v in TRUE.items():
        assert getattr(cal.after.efficiency, k) == pytest.approx(v, rel=0.02), k
    start = dep.hardware.efficiency.step_overhead_s
    assert ("step_overhead_s" in cal.fit.refused
            or cal.after.efficiency.step_overhead_s == pytest.approx(start, rel=0.05))
    assert all(r.median_after_pct < 1.0 for r in cal.errors)
    assert max(r.median_before_pct for r in cal.errors) > 20


def test_calibrate_cli_from_bench_runs_writes_a_usable_file(runs, tmp_path):
    base, _ = runs
    out = tmp_path / "host.toml"
    r = CliRunner().invoke(app, ["calibrate", "--hardware", HW, "--id", "my-cpu", "--from", str(base), "--model",
                                 MODEL, "--params", ",".join(ASK), "--max-num-batched-tokens", "2048",
                                 "--out", str(out), "--json"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.output)
    assert d["hardware"] == "my-cpu" and set(TRUE) <= set(d["fitted"])
    hw = load_hardware_file(out)["my-cpu"]
    assert hw.efficiency.bandwidth_max == pytest.approx(TRUE["bandwidth_max"], rel=0.02)
    assert read_host_file(out).profile["served_model"] == MODEL


def test_calibrate_cli_without_model_explains(runs):
    base, _ = runs
    r = CliRunner().invoke(app, ["calibrate", "--hardware", HW, "--from", str(base), "--out", "/dev/null"])
    assert r.exit_code != 0
    assert "--model" in str(r.exception) or "--model" in r.output


def test_calibrate_cli_refuses_unidentifiable(tmp_path):
    """A file holding only copies cannot identify compute_max: the CLI says so and writes nothing."""
    from flopwise.profile.hostfile import write_host_file
    from flopwise.profile.microbench import copy_point
    from flopwise.specs.hardware import get_hardware

    hw = replace(get_hardware(HW), id="my-host")
    path = tmp_path / "h.toml"
    write_host_file(path, hw, {"hardware": "my-host", "kernels": [copy_point(2**24, 1e-3).to_dict()]})
    before = path.read_text()
    r = CliRunner().invoke(app, ["calibrate", "--hardware", str(path), "--params", "compute_max"])
    assert r.exit_code != 0
    assert "compute-bound" in str(r.exception)
    assert path.read_text() == before


def test_prefix_cache_hits_the_run_does_not_explain_shrink_the_replayed_prompts(tmp_path):
    """A server that took a quarter of the prompt tokens from its prefix cache (prompts that begin like those of
    an earlier run) computed only three quarters of each prompt: the replay prices that part, not the whole."""
    from flopwise.bench.store import load_run
    from flopwise.calibrate.bench_runs import measured_workload, unmodelled_cache_hit_rate

    dep = deployment(MODEL, HW, max_num_seqs=256, max_num_batched_tokens=2048)
    root = _write_run(tmp_path / "hits", dep, 1, 512, n=4)
    plain = load_bench_runs([root])[0]
    assert {s.input_tokens for s in plain.workload.requests} == {512}
    store = RunStore(root, json.loads((root / "run.json").read_text())["config"], resume=True)
    store.append_scrape(0.0, "before", {"vllm:prefix_cache_queries_total": 1000.0,
                                        "vllm:prefix_cache_hits_total": 0.0})
    store.append_scrape(9.0, "after", {"vllm:prefix_cache_queries_total": 3048.0,
                                       "vllm:prefix_cache_hits_total": 512.0})
    store.close()
    saved = load_run(root)
    cfg = BenchConfig.from_dict(saved.config)
    assert unmodelled_cache_hit_rate(saved, cfg) == pytest.approx(0.25)
    assert {s.input_tokens for s in measured_workload(saved, cfg).requests} == {384}
    assert {s.input_tokens for s in load_bench_runs([root])[0].workload.requests} == {384}
    # a declared shared prefix is the replay's own to model: the counters are not applied on top
    shared = BenchConfig.from_dict({**saved.config, "prompts": {**saved.config["prompts"], "shared_prefix_len": 128}})
    assert unmodelled_cache_hit_rate(saved, shared) == 0.0


def test_bench_runs_recover_engine_cpu_costs(tmp_path):
    """Runs made by the simulator with a known API server (4 ms per request) and engine core (60 us per sequence
    per step) are fitted back to those numbers from a start 3x off, beside nothing else."""
    from flopwise.calibrate.bench_runs import replay_config

    dep = deployment(MODEL, HW, max_num_seqs=256, max_num_batched_tokens=2048)
    eng = dep.engine
    eng = replace(eng, frontend=replace(eng.frontend, latency_s=1e-3))  # this test's own, not the catalog's
    dep = replace(dep, engine=eng)
    true_eng = replace(eng, frontend=replace(eng.frontend, request_s=4e-3), host=replace(eng.host, per_seq_s=6e-5))
    true_dep = replace(dep, engine=true_eng)
    for i, (c, ilen, n) in enumerate(((1, 32, 4), (32, 32, 64))):
        wl = Workload(tuple(RequestSpec(arrival_at=0.0, input_tokens=ilen, output_tokens=16) for _ in range(n)),
                      concurrency=c)
        res = simulate(true_dep, wl, replay_config())
        cfg = BenchConfig(url="http://127.0.0.1:1", model="m", load=Load(kind="concurrency", concurrency=c),
                          num_requests=n, prompts=PromptConfig(input_len=ilen, output_len=16))
        store = RunStore(tmp_path / f"{i:02d}", cfg.to_dict())
        for rec in res.records:
            store.append(rec)
        store.close()
    start = replace(eng, frontend=replace(eng.frontend, request_s=12e-3), host=replace(eng.host, per_seq_s=2e-5))
    cal = calibrate(dep.hardware, runs=load_bench_runs([tmp_path]), dep=replace(dep, engine=start),
                    params=["frontend_request_s", "host_per_seq_s"], prior_weight=0.0)
    assert cal.engine_after.frontend.request_s == pytest.approx(4e-3, rel=0.03)
    assert cal.engine_after.host.per_seq_s == pytest.approx(6e-5, rel=0.05)
    assert replace(cal.after.efficiency, source="") == replace(dep.hardware.efficiency, source="")  # not asked to move


def test_a_capped_open_loop_run_is_replayed_under_its_cap(tmp_path):
    """`bench --request-rate inf --max-concurrency 2`: eight requests scheduled at once but sent two at a time.
    The replay keeps the client's cap, so it predicts the queue at the client, not eight requests batched at once:
    the same times as a closed loop of two clients."""
    from flopwise.bench.store import load_run
    from flopwise.calibrate.bench_runs import measured_workload

    dep = deployment(MODEL, HW, max_num_seqs=256, max_num_batched_tokens=2048, frontend="none")
    capped = Workload(tuple(RequestSpec(arrival_at=0.0, input_tokens=256, output_tokens=32) for _ in range(8)),
                      max_concurrency=2)
    res = simulate(dep, capped)
    cfg = BenchConfig(url="http://127.0.0.1:1", model="m", num_requests=8,
                      load=Load(kind="poisson", rate=float("inf"), max_concurrency=2),
                      prompts=PromptConfig(input_len=256, output_len=32))
    root = tmp_path / "capped"
    store = RunStore(root, cfg.to_dict())
    for rec in res.records:  # the client records each request's scheduled arrival, before the cap holds it back
        store.append(replace(rec, arrival_at=0.0))
    store.close()
    wl = measured_workload(load_run(root), BenchConfig.from_dict(load_run(root).config))
    assert (wl.concurrency, wl.max_concurrency, len(wl.requests)) == (None, 2, 8)
    replay = simulate(dep, wl).metrics()
    closed = simulate(dep, Workload(capped.requests, concurrency=2)).metrics()
    uncapped = simulate(dep, replace(wl, max_concurrency=None)).metrics()
    assert replay.duration_s == pytest.approx(closed.duration_s, rel=1e-9)
    assert uncapped.duration_s < 0.6 * replay.duration_s  # eight at once: one batch, not four waves of two


def test_a_run_with_unreadable_lines_is_fitted_on_the_rest_and_says_so(tmp_path):
    dep = deployment(MODEL, HW, max_num_seqs=256, max_num_batched_tokens=2048)
    root = _write_run(tmp_path / "run", dep, 1, 64, n=4)
    clean = load_bench_runs([root])[0]
    with (root / "requests.jsonl").open("a", encoding="utf-8") as f:
        f.write('{"request_id": 9, "arrival_at": 0.')  # a crash mid-write
    with pytest.warns(FlopwiseWarning, match=r"1 unreadable line\(s\) skipped; the fit uses the 4 readable requests"):
        damaged = load_bench_runs([root])[0]
    assert damaged.measured == clean.measured
    res = CliRunner().invoke(app, ["calibrate", "--hardware", HW, "--from", str(root), "--model", MODEL,
                                   "--use", "bench", "--params", "compute_max", "--dry-run"])
    assert "warning: bench run" in res.output and "1 unreadable line(s) skipped" in res.output


def test_a_run_with_no_completed_request_is_left_out_and_said(runs, tmp_path):
    base, _ = runs
    sweep = tmp_path / "sweep"
    shutil.copytree(base, sweep)
    failed = sweep / "99-failed"  # a server that answered every request with HTTP 500
    cfg = BenchConfig(url="http://127.0.0.1:1", model="m", load=Load(kind="concurrency", concurrency=1),
                      num_requests=2, prompts=PromptConfig(input_len=32, output_len=4))
    store = RunStore(failed, cfg.to_dict())
    for i in range(2):
        store.append(RequestRecord(request_id=i, arrival_at=0.0, input_tokens=32, output_tokens=4, token_times=[],
                                   error="HTTP 500: boom", error_kind="http_500"))
    store.close()
    with pytest.warns(FlopwiseWarning, match="1 bench run.* with no completed request left out of the fit"):
        loaded = load_bench_runs([sweep])
    assert len(loaded) == 3  # the three good runs, fitted as before
    with pytest.raises(CalibrationError, match="99-failed has no completed request to calibrate with"):
        load_bench_runs([failed])
