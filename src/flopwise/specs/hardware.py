"""Hardware: peak compute per dtype, memory, interconnect, price, and how close real kernels get to peak.

The catalog (`catalog/hardware.toml`) holds datasheet numbers with their sources; users add or override
entries with their own TOML or YAML file of the same shape (`load_hardware_file`).

Efficiency (`EfficiencyProfile`) turns peaks into achievable rates:
    compute_eff(m)   = compute_max   * m / (m + compute_half_m)         m = rows (tokens) of a GEMM
    bandwidth_eff(b) = bandwidth_max * b / (b + bandwidth_half_bytes)   b = bytes one kernel streams
so a batch-1 GEMV or a 4 KB KV read does not get peak, and a 4096-token prefill GEMM gets close to
`compute_max`. For m -> 0 the compute time tends to that of `compute_half_m` rows: tensor-core tiles are
padded (mma tiles are at least 8 rows wide), so a GEMV costs about as much math as a thin GEMM.
8-bit and 4-bit math (fp8, int8, fp4) reaches a smaller share of its (doubled) peak:
`low_precision_compute_factor` (H100 FP8 GEMMs reach ~1.2-1.4 PFLOP/s of 1979 in cuBLASLt benchmarks, vs
~700 of 989 for BF16).
Compute and memory traffic of one kernel do not overlap perfectly; near the ridge point a kernel is
slower than both roofs. The operator time is the smooth maximum
    t = (compute_s^p + memory_s^p)^(1/p)        p = `overlap_exponent` (p -> inf is the ideal roofline)
`kernel_overhead_s` is the fixed cost of one kernel (launch, ramp, tail; with CUDA graphs a few
microseconds); every kernel of a MoE model whose weights are not FP4 costs `moe_kernel_overhead_scale` times that
(above 1 on a chip whose FP4 MoE runs fused, generated kernels while other formats run generic ones);
`moe_compute_half_width`: a MoE layer's grouped GEMMs run each expert sliced over moe_tp GPUs, w = intermediate /
moe_tp wide (the N of gate/up, the K of down: DeepSeek-V3 under TP8 256, Qwen3-235B 192); tiles that narrow spend
much of their time outside the MMA loop, so the compute roof is scaled by w / (w + moe_compute_half_width) (fitted on
the dev set's 718 MoE rows: 0 / 128 / 192 / 256 / 512 half-widths; expert parallelism keeps experts whole for this
reason: LMSYS's large-scale EP blog, 2025-05; CUDA MMA tiles: 0 in the SoC and CPU profiles, fitted apart);
`step_overhead_s` the device's own per-step cost outside the
operators (a graph launch, the sampler's kernels).
The engine's CPU work per step (scheduling, input preparation, output processing) is the engine's, not the chip's:
`specs/engine.py` HostCosts.
Defaults by kind are fitted to `benchmarks/data/measured-dev.csv` (see `benchmarks/accuracy.py`); the
calibrate command fits them per machine.
"""

from __future__ import annotations

import tomllib
from dataclasses import asdict, dataclass, field, fields, replace
from functools import cache
from importlib import resources
from os import PathLike
from pathlib import Path
from typing import Any

from flopwise.errors import SpecError, UnknownHardwareError, suggest
from flopwise.validate import TABLE_CONFIG, from_table, integer, number, read_text, text

__all__ = ["DEVICE_KINDS", "LOW_PRECISION_DTYPES", "MEMORY_KINDS", "SM_CLASSES", "EfficiencyProfile", "HardwareSpec",
           "hardware_catalog", "get_hardware", "load_hardware_file"]

GIB = 2**30
# Bounds on a hardware entry's numbers (GiB; GB/s and TFLOP/s): 100 TiB of device memory, a rate between 0.001 and
# 10^6 (PB/s, EFLOP/s); real parts sit orders of magnitude inside them.
MAX_MEMORY_GIB = 1e5
MIN_RATE, MAX_RATE = 1e-3, 1e6
MEMORY_KINDS = ("hbm", "gddr", "lpddr", "ddr")
# The dtypes a peak may be given for (dense TFLOP/s); tf32 and int4 are shown but no format multiplies in them.
PEAK_DTYPES = ("fp32", "tf32", "bf16", "fp16", "fp8", "int8", "fp4", "int4")
# The math dtypes whose GEMMs reach `EfficiencyProfile.low_precision_compute_factor` of their (doubled) peak.
LOW_PRECISION_DTYPES = ("fp8", "int8", "fp4")

# Fallback order when a chip has no native peak for a dtype: the kernel runs in the next one.
_DTYPE_FALLBACK = {
    "fp4": ("fp4", "fp8", "bf16", "fp16", "fp32"),
    "fp8": ("fp8", "bf16", "fp16", "fp32"),
    "int8": ("int8", "bf16", "fp16", "fp32"),
    "bf16": ("bf16", "fp16", "fp32"),
    "fp16": ("fp16", "bf16", "fp32"),
    "fp32": ("fp32",),
}
# fp4 and fp8 weights on a chip without that math run as weight-only kernels multiplying in 16-bit
# (Marlin FP8 / FP4 on Ampere and Hopper); they never use the int8 or fp32 path.
_WEIGHT_ONLY_FALLBACK = {"fp4": ("fp4", "bf16", "fp16", "fp32"), "fp8": ("fp8", "bf16", "fp16", "fp32")}


@dataclass(frozen=True, slots=True, kw_only=True)
class EfficiencyProfile:
    """Fraction of peak real kernels reach, by problem size, plus fixed overheads (see module docstring)."""

    __pydantic_config__ = TABLE_CONFIG

    compute_max: float = 0.75
    compute_half_m: float = 2.0
    low_precision_compute_factor: float = 0.75
    # the share of the FP4 roof a standalone NVFP4 linear layer reaches here behind the kernel that quantizes its
    # activations (bf16 -> e2m1 with an e4m3 scale per 16) before each GEMM; routed experts, whose fused MoE kernels
    # quantize each token once, keep the roof (`cost/step.py` Roofs.dense_rate)
    fp4_linear_factor: float = 1.0
    attention_compute_max: float = 0.70
    overlap_exponent: float = 1.5
    bandwidth_max: float = 0.85
    bandwidth_half_bytes: float = 2.0e6
    kernel_overhead_s: float = 6.0e-6
    moe_kernel_overhead_scale: float = 1.0  # kernel_overhead_s multiplier for a MoE model not in FP4 weights
    moe_kernel_overhead_formats: tuple[str, ...] = ()  # the weights' compute dtypes it applies to (empty: all but fp4)
    moe_compute_half_width: float = 192.0
    step_overhead_s: float = 5.0e-5  # sampler kernels + graph launch; engine CPU work is in the engine profile
    runtime_overhead_gib: float = 1.0  # CUDA context, library workspaces, graphs: outside weights and KV
    source: str = "default GPU profile fitted to benchmarks/data/measured-dev.csv by benchmarks/fit_defaults.py"

    def __post_init__(self) -> None:
        for name in ("compute_max", "attention_compute_max", "bandwidth_max", "low_precision_compute_factor",
                     "fp4_linear_factor"):
            number(getattr(self, name), f"efficiency {name}", lo=0, hi=1, lo_open=True, error=SpecError)
        number(self.overlap_exponent, "efficiency overlap_exponent", lo=1, error=SpecError)
        number(self.moe_kernel_overhead_scale, "efficiency moe_kernel_overhead_scale", lo=0, lo_open=True,
               error=SpecError)
        formats = self.moe_kernel_overhead_formats
        if not isinstance(formats, (list, tuple)) or not all(f in _DTYPE_FALLBACK for f in formats):
            raise SpecError(f"efficiency moe_kernel_overhead_formats must be a list of compute dtypes "
                            f"({', '.join(_DTYPE_FALLBACK)}), got {formats!r}")
        object.__setattr__(self, "moe_kernel_overhead_formats", tuple(formats))
        for name in ("compute_half_m", "bandwidth_half_bytes", "kernel_overhead_s", "step_overhead_s",
                     "runtime_overhead_gib", "moe_compute_half_width"):
            number(getattr(self, name), f"efficiency {name}", lo=0, error=SpecError)

    def linear_factor(self, math: str) -> float:
        """The share of its roof a standalone linear layer computing in `math` reaches beyond the GEMM efficiency:
        `fp4_linear_factor` in FP4 (its activations quantized before each GEMM), else 1."""
        return self.fp4_linear_factor if math == "fp4" else 1.0

    def moe_kernel_scale(self, compute: str) -> float:
        """The fixed cost per kernel of a MoE model whose weights compute in `compute`, over kernel_overhead_s:
        `moe_kernel_overhead_scale` for the formats it names (`moe_kernel_overhead_formats`; none named: every
        format but FP4, whose MoE runs the fused FP4 kernels), else 1."""
        named = self.moe_kernel_overhead_formats
        applies = compute in named if named else compute != "fp4"
        return self.moe_kernel_overhead_scale if applies else 1.0

    def compute_eff(self, m: float) -> float:
        return self.compute_max * m / (m + self.compute_half_m)

    def bandwidth_eff(self, nbytes: float) -> float:
        return self.bandwidth_max * nbytes / (nbytes + self.bandwidth_half_bytes)


DEFAULT_EFFICIENCY = {
    "gpu": EfficiencyProfile(),
    # fitted (`fit_defaults.py --kind soc`) to the SoC estimate rows of every case file (llama-bench on Apple M1-M4,
    # 2023-2026): decode streams at ~0.9 of the unified-memory bandwidth at any matrix size (the fit's half-size is
    # 0; 10 kB here, negligible at MB-sized weight reads), with ~2 ms per token outside the kernels (graph build
    # and command-buffer encoding)
    "soc": EfficiencyProfile(compute_max=0.60, compute_half_m=1.0, bandwidth_max=0.90, bandwidth_half_bytes=1.0e4,
                             kernel_overhead_s=1.0e-5, step_overhead_s=2.0e-3, runtime_overhead_gib=2.0,
                             moe_compute_half_width=0.0,
                             source="default SoC profile (Apple / Jetson unified memory, llama.cpp-class kernels), "
                                    "fitted by benchmarks/fit_defaults.py --kind soc"),
    "cpu": EfficiencyProfile(compute_max=0.50, compute_half_m=1.0, attention_compute_max=0.3,
                             bandwidth_max=0.60, bandwidth_half_bytes=2.0e5, kernel_overhead_s=2.0e-5,
                             step_overhead_s=5.0e-3, runtime_overhead_gib=1.0, moe_compute_half_width=0.0,
                             source="default CPU profile (oneDNN/vLLM-CPU class kernels)"),
}


DEVICE_KINDS = tuple(sorted(DEFAULT_EFFICIENCY))  # the kinds a hardware entry (and an engine's device rule) names
SM_CLASSES = ("sm90", "sm100")  # HardwareSpec.sm_class's NVIDIA datacenter classes (an engine's backend rules)


@dataclass(frozen=True, slots=True, kw_only=True)
class HardwareSpec:
    """One accelerator (or CPU socket slice). Units: TFLOP/s dense, GiB, decimal GB/s, W, USD/h."""

    __pydantic_config__ = TABLE_CONFIG

    id: str
    name: str
    vendor: str
    kind: str
    memory_gib: float
    memory_bandwidth_gbs: float
    peak_tflops: dict[str, float]
    # the device memory's technology (datasheet): hbm (stacked, datacenter GPUs), gddr (graphics cards, L4/L40/A10),
    # lpddr (unified memory of SoCs), ddr (CPU sockets); None where a user's file does not say
    memory_kind: str | None = None
    # streaming multiprocessors (NVIDIA; compute units on AMD) and their boost clock, where a cost depends on them
    # rather than on a peak
    # (llama.cpp's MMQ int8 rate: KernelFactors.mmq_sm_ops_per_clock); None where not given
    sm_count: int | None = None
    boost_clock_ghz: float | None = None
    # dense FP16 tensor TFLOP/s with FP16 accumulate, where it exceeds peak_tflops.fp16 (GeForce cards run the FP32
    # accumulate that peak_tflops assumes at half rate); a GEMM that accumulates in FP16 (KernelFactors) gets it
    fp16_accumulate_tflops: float | None = None
    # dense tensor TFLOP/s by dtype that the part's SMs would reach at their architecture's full per-SM tensor rate,
    # where the tensor path is rate-limited below it (export parts: H20, L20; `tensor_throttle`)
    unthrottled_tflops: dict[str, float] = field(default_factory=dict)
    interconnect: str = "none"
    interconnect_gbs: float = 0.0
    gpus_per_node: int = 1  # GPUs in one server's peer fabric (NVLink / Infinity Fabric domain)
    # GPUs one host (one operating system, where a launch command runs) drives, where the fabric spans several hosts
    # (a GB200 NVL72 rack: 18 trays of 4); None: a node is one host (`specs.deployment.replica_hosts`)
    gpus_per_host: int | None = None
    network: str = "none"  # the scale-out NIC of each GPU (ib-ndr400, roce-400, ...)
    network_gbs: float = 0.0  # its per-direction bandwidth, GB/s
    tdp_w: float | None = None
    price_per_hour_usd: float | None = None
    released: int | None = None
    sources: dict[str, str] = field(default_factory=dict)
    efficiency: EfficiencyProfile = field(default_factory=EfficiencyProfile)

    def __post_init__(self) -> None:
        where = f"hardware '{self.id}'"
        for name in ("id", "name", "vendor", "interconnect"):
            text(getattr(self, name), f"{where}: {name}", error=SpecError)
        text(self.kind, f"{where}: kind", choices=DEVICE_KINDS, error=SpecError)
        # physical bounds, far outside any real part, so that a typo cannot overflow the cost model
        number(self.memory_gib, f"{where}: memory_gib", lo=0, hi=MAX_MEMORY_GIB, lo_open=True, error=SpecError)
        number(self.memory_bandwidth_gbs, f"{where}: memory_bandwidth_gbs", lo=MIN_RATE, hi=MAX_RATE, error=SpecError)
        number(self.interconnect_gbs, f"{where}: interconnect_gbs", lo=0, hi=MAX_RATE, error=SpecError)
        if self.tdp_w is not None:
            number(self.tdp_w, f"{where}: tdp_w", lo=0, lo_open=True, error=SpecError)
        if self.price_per_hour_usd is not None:
            number(self.price_per_hour_usd, f"{where}: price_per_hour_usd", lo=0, error=SpecError)
        if self.sm_count is not None:
            integer(self.sm_count, f"{where}: sm_count", lo=1, hi=100_000, error=SpecError)
        if self.boost_clock_ghz is not None:
            number(self.boost_clock_ghz, f"{where}: boost_clock_ghz", lo=0.1, hi=10, error=SpecError)
        if self.memory_kind is not None:
            text(self.memory_kind, f"{where}: memory_kind", choices=MEMORY_KINDS, error=SpecError)
        if self.fp16_accumulate_tflops is not None:
            number(self.fp16_accumulate_tflops, f"{where}: fp16_accumulate_tflops", lo=0, lo_open=True,
                   error=SpecError)
        for dtype, v in self.unthrottled_tflops.items():
            if dtype not in PEAK_DTYPES:
                raise SpecError(f"{where}: unthrottled_tflops has unknown dtype '{dtype}'."
                                f"{suggest(str(dtype), PEAK_DTYPES)} Known: {', '.join(PEAK_DTYPES)}")
            if not self.peak_tflops.get(dtype):
                raise SpecError(f"{where}: unthrottled_tflops.{dtype} needs a peak_tflops.{dtype} to exceed")
            number(v, f"{where}: unthrottled_tflops.{dtype}", lo=self.peak_tflops[dtype], hi=MAX_RATE, error=SpecError)
        integer(self.gpus_per_node, f"{where}: gpus_per_node", lo=1, hi=100_000, error=SpecError)
        if self.gpus_per_host is not None:
            integer(self.gpus_per_host, f"{where}: gpus_per_host", lo=1, hi=self.gpus_per_node, error=SpecError)
            if self.gpus_per_node % self.gpus_per_host:
                raise SpecError(f"{where}: gpus_per_host={self.gpus_per_host} must divide gpus_per_node="
                                f"{self.gpus_per_node}")
        if self.released is not None:
            integer(self.released, f"{where}: released", lo=1950, hi=2100, error=SpecError)
        if not isinstance(self.peak_tflops, dict) or not self.peak_tflops:
            raise SpecError(f"{where}: peak_tflops must be a table of dense TFLOP/s by dtype, e.g. {{bf16 = 989}}")
        for dtype, v in self.peak_tflops.items():
            if dtype not in PEAK_DTYPES:
                raise SpecError(f"{where}: peak_tflops has unknown dtype '{dtype}'.{suggest(str(dtype), PEAK_DTYPES)} "
                                f"Known: {', '.join(PEAK_DTYPES)}")
            number(v, f"{where}: peak_tflops.{dtype}", lo=0, hi=MAX_RATE, error=SpecError)
            if 0 < v < MIN_RATE:
                raise SpecError(f"{where}: peak_tflops.{dtype} must be 0 (absent) or at least {MIN_RATE:g}, got {v:g}")
        if not any(v > 0 for v in self.peak_tflops.values()):
            raise SpecError(f"{where}: peak_tflops needs at least one dtype > 0")
        if not isinstance(self.efficiency, EfficiencyProfile):
            raise SpecError(f"{where}: efficiency must be an EfficiencyProfile, got {type(self.efficiency).__name__}")

    def __hash__(self) -> int:  # dict fields are not hashable; ids are unique within a catalog
        return hash((self.id, self.memory_gib, self.memory_bandwidth_gbs, self.memory_kind, self.sm_count,
                     self.boost_clock_ghz, self.efficiency))

    @property
    def memory_bytes(self) -> float:
        return self.memory_gib * GIB

    @property
    def bandwidth_bytes_per_s(self) -> float:
        return self.memory_bandwidth_gbs * 1e9

    def tensor_throttle(self, dtype: str) -> float:
        """How far the tensor path's rate in `dtype` sits below what the SMs would reach unthrottled:
        unthrottled_tflops / peak_tflops (1 on a part at its architecture's full rate). Work beside the MMAs runs at
        the SMs' pace, not the tensor cores' (`cost.step.roofs`: the fused-MoE kernels' fitted share)."""
        full = self.unthrottled_tflops.get(dtype)
        return full / self.peak_tflops[dtype] if full else 1.0

    @property
    def has_trtllm_gen(self) -> bool:
        """Whether TensorRT-LLM's trtllm-gen kernels (fused MoE, MLA; through FlashInfer in vLLM and SGLang) run
        here: NVIDIA's datacenter Blackwell (SM100: FP4 tensor cores with HBM; not the SM120 GeForce and RTX PRO
        parts)."""
        return self.vendor == "nvidia" and self.memory_kind == "hbm" and self.peak_tflops.get("fp4", 0) > 0

    @property
    def sm_class(self) -> str:
        """The NVIDIA datacenter class engines pick attention backends by: "sm90" (Hopper: FP8 tensor cores with HBM,
        no FP4; H100, H200, H20, GH200), "sm100" (datacenter Blackwell, `has_trtllm_gen`), "" for any other part
        (Ampere, the SM 8.9 / 12.x GeForce and RTX parts, other vendors)."""
        if self.has_trtllm_gen:
            return "sm100"
        fp = self.peak_tflops
        if self.vendor == "nvidia" and self.memory_kind == "hbm" and fp.get("fp8", 0) > 0 and not fp.get("fp4", 0):
            return "sm90"
        return ""

    @property
    def has_pdl(self) -> bool:
        """Whether kernels can launch with programmatic dependent launch (CUDA's programmatic stream
        serialization: a kernel starts its prologue while the one before drains): NVIDIA SM 9.0 and newer, i.e.
        the Hopper and Blackwell datacenter parts (FP8 tensor cores with HBM: not Ampere, not the SM 8.9 Ada cards)
        and every part with FP4 tensor cores (Blackwell, the SM 12.x GeForce and RTX PRO parts included)."""
        return bool(self.sm_class) or (self.vendor == "nvidia" and self.peak_tflops.get("fp4", 0) > 0)

    @property
    def device_text(self) -> str:
        """The id and the device name, lower case: what engines match a device by (vLLM reads the CUDA device
        name, 'h100' / 'a100'; `BatchDefault.only` / `exclude`)."""
        return f"{self.id} {self.name}".lower()

    def servers_for(self, gpus: int) -> int:
        """The servers `gpus` of this chip fill: one, or as many as it takes where the catalog states how many one
        server's peer fabric holds (`gpus_per_node`: 16 H100 SXM are two 8-GPU servers)."""
        per = self.gpus_per_node
        return -(-gpus // per) if per > 1 and gpus > per else 1

    def compute_dtype(self, dtype: str, weight_only_fallback: bool = False) -> str:
        """The dtype a kernel asked to multiply in `dtype` really uses on this chip."""
        chain = (_WEIGHT_ONLY_FALLBACK if weight_only_fallback else _DTYPE_FALLBACK).get(dtype, (dtype,))
        for d in chain:
            if self.peak_tflops.get(d, 0) > 0:
                return d
        return max(self.peak_tflops, key=lambda d: self.peak_tflops[d])

    def peak_flops(self, dtype: str, weight_only_fallback: bool = False) -> float:
        """Dense peak FLOP/s for a multiply in `dtype`, after falling back to what the chip has."""
        return self.peak_tflops[self.compute_dtype(dtype, weight_only_fallback)] * 1e12


def _build(entry: dict[str, Any], origin: str, base: HardwareSpec | None = None) -> HardwareSpec:
    """A built-in catalog entry (trusted: built directly), or a user file's entry (`base`: the entry of the same
    id it overrides, field by field), validated by `from_table` against HardwareSpec's own annotations."""
    if not isinstance(entry, dict):
        raise SpecError(f"{origin}: each [[hardware]] entry must be a table, got {entry!r}")
    entry = dict(entry)
    hw_id = entry.get("id")
    if not hw_id or not isinstance(hw_id, str):
        raise SpecError(f"{origin}: every [[hardware]] entry needs an 'id' (a string), got {hw_id!r}")
    where = f"{origin}: hardware '{hw_id}'"
    eff_in = entry.pop("efficiency", None) or {}
    if not isinstance(eff_in, dict):
        raise SpecError(f"{where}: efficiency must be a table ([hardware.efficiency]), got {eff_in!r}")
    allowed = {f.name for f in fields(HardwareSpec)} - {"efficiency"}
    unknown = set(entry) - allowed
    if unknown:
        raise SpecError(f"{where} has unknown field(s) {sorted(map(str, unknown))}; allowed: {sorted(allowed)}")
    eff_fields = {f.name for f in fields(EfficiencyProfile)}
    bad_eff = set(eff_in) - eff_fields
    if bad_eff:
        raise SpecError(f"{where}: efficiency has unknown field(s) {sorted(map(str, bad_eff))}; allowed: "
                        f"{sorted(eff_fields)}")
    for name in ("peak_tflops", "sources"):
        if name in entry and not isinstance(entry[name], dict):
            raise SpecError(f"{where}: {name} must be a table ([hardware.{name}]), got {entry[name]!r}")
    if origin == _CATALOG:
        kind = entry.get("kind", "gpu")
        return HardwareSpec(**entry, efficiency=replace(DEFAULT_EFFICIENCY[kind], **eff_in))
    if base is not None:
        table = {**asdict(base), **entry, "peak_tflops": {**base.peak_tflops, **entry.get("peak_tflops", {})},
                 "sources": {**base.sources, **entry.get("sources", {})}}
        table["efficiency"] = {**table["efficiency"], **eff_in}
    else:
        required = ("name", "vendor", "kind", "memory_gib", "memory_bandwidth_gbs", "peak_tflops")
        missing = [k for k in required if k not in entry]
        if missing:
            raise SpecError(f"{where} is missing {missing}")
        kind = entry["kind"]
        if kind not in DEFAULT_EFFICIENCY:
            raise SpecError(f"{where}: kind must be one of {sorted(DEFAULT_EFFICIENCY)}, got {kind!r}")
        table = {**entry, "efficiency": {**asdict(DEFAULT_EFFICIENCY[kind]), **eff_in}}
    return from_table(HardwareSpec, table, where, file=origin)


def _parse_entries(data: Any, origin: str) -> list[dict[str, Any]]:
    entries = data.get("hardware") if isinstance(data, dict) else None
    if not isinstance(entries, list):
        raise SpecError(f"{origin}: expected a list of [[hardware]] tables (YAML: a 'hardware:' list of mappings)")
    return entries


_CATALOG = "built-in hardware catalog"


@cache
def hardware_catalog() -> dict[str, HardwareSpec]:
    """The built-in catalog, keyed by id."""
    text = resources.files("flopwise.catalog").joinpath("hardware.toml").read_text()
    data = tomllib.loads(text)
    return {e["id"]: _build(e, _CATALOG) for e in _parse_entries(data, _CATALOG)}


def load_hardware_file(path: str | PathLike[str],
                       base: dict[str, HardwareSpec] | None = None) -> dict[str, HardwareSpec]:
    """Read a user's TOML or YAML hardware file; entries whose id exists in `base` override only the
    fields they give. Returns the merged catalog."""
    p = Path(path)
    content = read_text(p, "hardware file")
    try:
        if p.suffix.lower() in (".yaml", ".yml"):
            import yaml  # only YAML hardware files need it

            data = yaml.safe_load(content) or {}
        else:
            data = tomllib.loads(content)
    except Exception as e:  # tomllib.TOMLDecodeError, yaml.YAMLError
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise SpecError(f"hardware file '{path}' could not be parsed: {first}") from None
    merged = dict(hardware_catalog() if base is None else base)
    seen: set[str] = set()
    for entry in _parse_entries(data, str(path)):
        hw_id = entry.get("id", "") if isinstance(entry, dict) else ""
        if isinstance(hw_id, str) and hw_id in seen:  # the second would silently replace the first
            raise SpecError(f"hardware file '{path}' defines '{hw_id}' twice; give each id once")
        spec = _build(entry, str(path), merged.get(hw_id) if isinstance(hw_id, str) else None)
        seen.add(spec.id)
        merged[spec.id] = spec
    return merged


def get_hardware(hw_id: str, hardware_file: str | PathLike[str] | None = None) -> HardwareSpec:
    text(hw_id, "gpu (a hardware id)", error=UnknownHardwareError)
    catalog = load_hardware_file(hardware_file) if hardware_file else hardware_catalog()
    key = hw_id.lower()
    if key in catalog:
        return catalog[key]
    raise UnknownHardwareError(
        f"unknown GPU '{hw_id}'.{suggest(key, catalog)} Run `flopwise hardware` for the catalog, "
        "or describe it in a --hardware-file."
    )
