"""Measure this machine: discovery, microbenchmarks, model forward passes, and a hardware entry from them.

    profile_host(...) -> HostProfile      what `flopwise profile` measures (`calibrate.host.fit_host` fits it)
    step_points_from(profile_table, hw)   the model steps a saved `[profile]` table holds, as StepPoints

Modules: `discover.py` (CPU/GPU facts), `timing.py` (repeats, medians), `microbench.py` (GEMM, bandwidth,
attention), `model_profile.py` (random-weight model steps), `hostfile.py` (the TOML file).

Peaks in the written entry: the base catalog entry's (`--base`), else the estimate from discovery (CPU) or the
best measured rate (GPU); raised to the best measured rate where a kernel beat them, so efficiencies stay <= 1.
Bandwidth likewise from the best copy/read rate measured. Each number's origin goes into `sources`.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

from flopwise.errors import SpecError
from flopwise.metrics.measurements import KernelPoint, StepPoint
from flopwise.profile.discover import HostInfo, cpu_peak_tflops, discover
from flopwise.profile.microbench import MicrobenchConfig, run_microbenchmarks
from flopwise.profile.model_profile import ModelProfileConfig, profile_model, step_point, truncate_layers
from flopwise.specs.deployment import make_deployment
from flopwise.specs.hardware import DEFAULT_EFFICIENCY, HardwareSpec
from flopwise.validate import integer

__all__ = ["HostProfile", "profile_host", "build_hardware", "step_points_from", "kernel_points_from",
           "profile_table"]


@dataclass(frozen=True, slots=True, kw_only=True)
class HostProfile:
    """What was measured: the host, its hardware entry before any fit, the kernels and model steps timed."""

    host: HostInfo
    hardware: HardwareSpec
    kernels: tuple[KernelPoint, ...]
    steps: tuple[StepPoint, ...]
    model: str | None
    num_layers: int | None
    wall_s: float


def _best_rates(kernels: Sequence[KernelPoint]) -> tuple[dict[str, float], float]:
    """Best GEMM TFLOP/s per dtype and best memory GB/s (copies and reads) measured."""
    flops: dict[str, float] = {}
    bw = 0.0
    for k in kernels:
        if k.kind == "gemm":
            flops[k.dtype] = max(flops.get(k.dtype, 0.0), k.flops / k.seconds / 1e12)
        elif k.kind in ("copy", "read"):
            bw = max(bw, k.act_bytes / k.seconds / 1e9)
    return flops, bw


def build_hardware(host: HostInfo, kernels: Sequence[KernelPoint], *, hw_id: str, base: HardwareSpec | None,
                   device: str = "cpu", threads: int | None = None) -> HardwareSpec:
    """A hardware entry for this machine from discovery, measurements and an optional base entry. On a CPU
    profiled with `threads` < its cores, compute peaks are those of `threads` cores (the entry describes what
    an engine with that many threads gets, e.g. vLLM CPU's one model core on a 2-core machine)."""
    cpu_share = 1.0
    if not device.startswith("cuda") and threads and threads < host.num_cores:
        cpu_share = threads / host.num_cores
        host = replace(host, num_cores=threads)
    best_flops, best_bw = _best_rates(kernels)
    sources: dict[str, str] = dict(base.sources) if base else {}
    stamp = datetime.now(UTC).strftime("%Y-%m-%d")
    if device.startswith("cuda") and host.cuda:
        gpu = host.cuda[int(device.split(":")[1]) if ":" in device else 0]
        name, vendor, kind, mem = gpu.name, "nvidia", "gpu", gpu.memory_gib
    else:
        name, vendor, kind = f"{host.cpu_model}, {host.num_cores} cores (profiled)", "generic", "cpu"
        mem = host.memory_gib
    if base is not None:
        peaks = {k: round(v * cpu_share, 4) for k, v in base.peak_tflops.items()}
        bw = base.memory_bandwidth_gbs
        share = f" x {cpu_share:g} ({threads} of its cores)" if cpu_share < 1 else ""
        sources["profile"] = (f"peaks{share} and bandwidth from catalog entry '{base.id}', checked against "
                              f"measurements {stamp}")
    elif kind == "cpu":
        peaks, bw = cpu_peak_tflops(host), best_bw or 20.0
        sources["compute"] = (f"ESTIMATE from discovery: {host.num_cores} cores x "
                              f"{host.max_clock_ghz or 2.5:.2f} GHz x FLOP/cycle for {', '.join(host.simd)}")
        sources["memory"] = f"best copy/read bandwidth measured by flopwise profile {stamp}"
    else:
        if not best_flops:
            raise SpecError(f"nothing was measured on the {name} and no --base gives its datasheet peaks: run the "
                            "microbenchmarks, or name its catalog entry with --base (e.g. --base h100-sxm; "
                            "`flopwise hardware` lists them)")
        peaks, bw = {k: v for k, v in best_flops.items()}, best_bw or 100.0
        sources["compute"] = f"best GEMM rates measured by flopwise profile {stamp} (no datasheet given: use --base)"
        sources["memory"] = f"best copy/read bandwidth measured by flopwise profile {stamp}"
    raised = []
    for dt, rate in best_flops.items():
        if rate > peaks.get(dt, 0.0):
            peaks[dt] = round(rate, 4)
            raised.append(f"{dt} {rate:.3f} TFLOP/s")
    if best_bw > bw:
        bw = round(best_bw, 2)
        raised.append(f"bandwidth {best_bw:.1f} GB/s")
    if raised:
        sources["measured_above_peak"] = f"raised to the best measured rate ({', '.join(raised)})"
    eff = base.efficiency if base is not None else DEFAULT_EFFICIENCY[kind]
    if base is not None:
        return replace(base, id=hw_id, peak_tflops=peaks, memory_bandwidth_gbs=bw, sources=sources, efficiency=eff)
    return HardwareSpec(id=hw_id, name=name, vendor=vendor, kind=kind, memory_gib=round(mem, 2),
                        memory_bandwidth_gbs=round(bw, 2), peak_tflops=peaks, sources=sources, efficiency=eff)


def profile_host(*, hw_id: str, base: HardwareSpec | None = None, quick: bool = False, model: str | None = None,
                 num_layers: int | None = None, microbenchmarks: bool = True, device: str | None = None,
                 threads: int | None = None, progress: Callable[[str], None] | None = None) -> HostProfile:
    """Discover and measure this machine (the fit is `calibrate.host.fit_host`'s)."""
    from flopwise.specs.model_catalog import get_model

    if device is not None and not re.fullmatch(r"cpu|cuda(:\d+)?", device):
        raise SpecError(f"--device must be cpu, cuda or cuda:N, got {device!r}")
    if threads is not None:
        integer(threads, "--threads", lo=1, hi=4096, error=SpecError)
    if num_layers is not None:
        integer(num_layers, "--num-layers", lo=1, error=SpecError)
    t0 = time.perf_counter()
    host = discover()
    if device is not None and device.startswith("cuda"):
        index = int(device.partition(":")[2] or 0)
        if index >= len(host.cuda):
            found = f"{len(host.cuda)} CUDA device(s)" if host.cuda else "no CUDA device (or no PyTorch with CUDA)"
            raise SpecError(f"--device {device}: this machine has {found}; use --device cpu")
    dev = device or ("cuda" if host.cuda else "cpu")
    if dev.startswith("cuda") and not microbenchmarks and base is None:
        raise SpecError("--no-microbench on a GPU needs --base (the catalog entry whose datasheet peaks to use, e.g. "
                        "--base h100-sxm): nothing else gives the GPU's peaks; or pass --device cpu")
    say = progress or (lambda s: None)
    say(f"host: {host.summary()}")
    load1 = os.getloadavg()[0] if hasattr(os, "getloadavg") else 0.0
    if load1 > 0.5 * host.num_cores:
        say(f"warning: load average {load1:.1f} on {host.num_cores} cores: other processes will skew timings "
            "(with every core busy, multi-threaded kernels stall on each other; consider --threads 1)")
    cuda = dev.startswith("cuda")
    kernels = run_microbenchmarks(MicrobenchConfig.preset(quick, cuda=cuda), device=dev, threads=threads,
                                  progress=say) if microbenchmarks else []
    hw = build_hardware(host, kernels, hw_id=hw_id, base=base, device=dev, threads=threads)
    steps: list[StepPoint] = []
    if model:
        spec = truncate_layers(get_model(model), num_layers)
        steps = profile_model(spec, hw, ModelProfileConfig.preset(quick, cuda=cuda), device=dev, threads=threads,
                              progress=say)
    return HostProfile(host=host, hardware=hw, kernels=tuple(kernels), steps=tuple(steps), model=model,
                       num_layers=num_layers, wall_s=time.perf_counter() - t0)


def profile_table(p: HostProfile, fit: Sequence[dict[str, Any]] = ()) -> dict[str, Any]:
    """The `[profile]` table of the host file; `fit`: the fit's error rows, where one was made."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        ver = version("flopwise")
    except PackageNotFoundError:
        ver = "unknown"
    table: dict[str, Any] = {
        "hardware": p.hardware.id, "written_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "flopwise_version": ver, "wall_s": round(p.wall_s, 2), "host": p.host.to_dict(),
    }
    if p.model:
        table["model"] = p.model
        if p.num_layers:
            table["num_layers"] = p.num_layers
    table["kernels"] = [k.to_dict() for k in p.kernels]
    table["steps"] = [step_row(s) for s in p.steps]
    if fit:
        table["fit"] = list(fit)
    return {k: v for k, v in table.items() if v not in (None, [])}


def step_row(s: StepPoint) -> dict[str, Any]:
    return {"kind": s.label, "batch": s.batch, "new_tokens": s.new_tokens, "context": s.context, "seconds": s.seconds}


def kernel_points_from(table: dict[str, Any]) -> list[KernelPoint]:
    return [KernelPoint.from_dict(k) for k in table.get("kernels", [])]


def step_points_from(table: dict[str, Any], hw: HardwareSpec) -> list[StepPoint]:
    """The model steps a saved `[profile]` table holds (needs its `model` to be resolvable)."""
    from flopwise.specs.model_catalog import get_model

    rows = table.get("steps", [])
    if not rows:
        return []
    spec = truncate_layers(get_model(table["model"]), table.get("num_layers"))
    dep = make_deployment(spec, hw, weights="bf16", kv="bf16")
    return [step_point(dep, r["kind"], int(r["batch"]), int(r["new_tokens"]), int(r["context"]), float(r["seconds"]))
            for r in rows]
