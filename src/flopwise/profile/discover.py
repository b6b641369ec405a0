"""What machine is this: CPU model, cores, SIMD features, memory; CUDA devices where torch sees them.

Read from /proc/cpuinfo, /proc/meminfo, /sys (Linux) and `os.sched_getaffinity` (the cores this process may
use: a container or `taskset` limit, not the host's count). Nothing here times anything.

Peak estimate for a CPU (`cpu_peak_tflops`): cores x clock x FLOP per cycle per core, where FLOP per cycle
follows the widest FMA the flags announce, with two FMA pipes (Zen 4/5, Ice Lake and later server cores):
AVX-512: 2 x 16 fp32 lanes x 2 (FMA) = 64; AVX2: 32; bf16 doubles fp32 with AVX512_BF16 (VDPBF16PS) and is
16x fp32 per core with AMX-BF16 (Intel: 1024 bf16 FLOP/cycle/core); int8 doubles bf16 with AVX512_VNNI.
An estimate; measured GEMM rates replace it where higher.
"""

from __future__ import annotations

import os
import platform
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["CudaDevice", "HostInfo", "discover", "cpu_peak_tflops", "SIMD_FLAGS"]

SIMD_FLAGS = ("avx2", "fma", "avx512f", "avx512_bf16", "avx512_vnni", "avx512_fp16", "amx_bf16", "amx_int8",
              "amx_tile", "asimd", "sve", "sve2")


@dataclass(frozen=True, slots=True, kw_only=True)
class CudaDevice:
    index: int
    name: str
    memory_gib: float
    compute_capability: str
    multiprocessors: int


@dataclass(frozen=True, slots=True, kw_only=True)
class HostInfo:
    cpu_model: str
    vendor: str
    num_cores: int  # usable by this process
    threads_per_core: int
    max_clock_ghz: float | None
    simd: tuple[str, ...]
    memory_gib: float
    l3_cache_kib: int | None
    os: str
    cuda: tuple[CudaDevice, ...] = field(default_factory=tuple)
    torch_version: str | None = None

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["simd"] = list(self.simd)
        d["cuda"] = [asdict(c) for c in self.cuda]
        return d

    def summary(self) -> str:
        clock = f" @ {self.max_clock_ghz:.2f} GHz" if self.max_clock_ghz else ""
        gpus = "; ".join(f"{c.name} ({c.memory_gib:.0f} GiB, sm_{c.compute_capability})" for c in self.cuda)
        return (f"{self.cpu_model}, {self.num_cores} cores{clock}, {', '.join(self.simd) or 'no SIMD flags read'}, "
                f"{self.memory_gib:.1f} GiB" + (f"; CUDA: {gpus}" if gpus else ""))


def _cpuinfo(text: str) -> dict[str, str]:
    """The first processor block of /proc/cpuinfo as key -> value."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        if not line.strip():
            if out:
                break
            continue
        k, _, v = line.partition(":")
        out.setdefault(k.strip(), v.strip())
    return out


def _read(path: str) -> str:
    try:
        return Path(path).read_text()
    except OSError:
        return ""


def _max_clock_ghz(info: dict[str, str]) -> float | None:
    khz = _read("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq").strip()
    if khz.isdigit():
        return int(khz) / 1e6
    try:
        return float(info.get("cpu MHz", "")) / 1e3
    except ValueError:
        return None


def _memory_gib() -> float:
    for line in _read("/proc/meminfo").splitlines():
        if line.startswith("MemTotal:"):
            return int(line.split()[1]) * 1024 / 2**30
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    except (ValueError, OSError):
        return 0.0


def _cuda_devices() -> tuple[tuple[CudaDevice, ...], str | None]:
    try:
        import torch
    except ImportError:
        return (), None
    devs = []
    if torch.cuda.is_available():
        for i in range(torch.cuda.device_count()):
            p = torch.cuda.get_device_properties(i)
            devs.append(CudaDevice(index=i, name=p.name, memory_gib=p.total_memory / 2**30,
                                   compute_capability=f"{p.major}{p.minor}", multiprocessors=p.multi_processor_count))
    return tuple(devs), torch.__version__


def parse_host(cpuinfo: str, num_cores: int, memory_gib: float, max_clock_ghz: float | None = None,
               l3_kib: int | None = None) -> HostInfo:
    """A HostInfo from /proc/cpuinfo text (separate from `discover` so tests can feed any text)."""
    info = _cpuinfo(cpuinfo)
    flags = set((info.get("flags") or info.get("Features") or "").split())
    siblings, cores = info.get("siblings", ""), info.get("cpu cores", "")
    tpc = int(siblings) // int(cores) if siblings.isdigit() and cores.isdigit() and int(cores) else 1
    if max_clock_ghz is None:
        try:
            max_clock_ghz = float(info.get("cpu MHz", "")) / 1e3
        except ValueError:
            max_clock_ghz = None
    return HostInfo(
        cpu_model=info.get("model name") or info.get("Model") or platform.processor() or "unknown CPU",
        vendor=info.get("vendor_id", "unknown"), num_cores=num_cores, threads_per_core=max(tpc, 1),
        max_clock_ghz=max_clock_ghz, simd=tuple(f for f in SIMD_FLAGS if f in flags), memory_gib=memory_gib,
        l3_cache_kib=l3_kib, os=f"{platform.system()} {platform.release()}")


def discover() -> HostInfo:
    text = _read("/proc/cpuinfo")
    info = _cpuinfo(text)
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:
        cores = os.cpu_count() or 1
    l3 = _read("/sys/devices/system/cpu/cpu0/cache/index3/size").strip().upper()
    l3_kib = int(l3[:-1]) * (1024 if l3.endswith("M") else 1) if l3[:-1].isdigit() else None
    host = parse_host(text, cores, _memory_gib(), _max_clock_ghz(info), l3_kib)
    cuda, tv = _cuda_devices()
    return HostInfo(**{**{f: getattr(host, f) for f in host.__slots__}, "cuda": cuda, "torch_version": tv})


def cpu_peak_tflops(host: HostInfo) -> dict[str, float]:
    """Theoretical dense peak per dtype (TFLOP/s) from cores, clock and SIMD flags (see module docstring)."""
    ghz = host.max_clock_ghz or 2.5
    simd = set(host.simd)
    if "avx512f" in simd:
        fp32 = 64
    elif "avx2" in simd or "fma" in simd:
        fp32 = 32
    elif "sve" in simd or "asimd" in simd:
        fp32 = 32
    else:
        fp32 = 8
    bf16 = fp32 * (16 if "amx_bf16" in simd else 2 if "avx512_bf16" in simd else 1)
    int8 = bf16 * 2 if ("avx512_vnni" in simd or "amx_int8" in simd) else bf16
    cores = host.num_cores / max(host.threads_per_core, 1) if host.threads_per_core > 1 else host.num_cores
    scale = cores * ghz * 1e9 / 1e12
    return {"fp32": round(fp32 * scale, 4), "bf16": round(bf16 * scale, 4), "int8": round(int8 * scale, 4)}
