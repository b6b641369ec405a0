"""The time of one engine step: the one cost function the estimator, simulator and planner share.

For each operator of each layer (per GPU of the tensor-parallel group):

    compute_s = FLOPs / (peak(dtype) * compute_eff(m))          m = GEMM rows (tokens)
                (dtype: the weight format's math; a format that covers the routed experts alone, gpt-oss's MXFP4,
                leaves the other GEMMs, projections, dense and shared MLPs, the LM head, in 16-bit: `Roofs.dense_rate`;
                one that leaves the attention projections alone in 16-bit, nvfp4-mlp, those: `Roofs.proj_rate`;
                the LM head in 16-bit unless the format quantizes it, as GGUF does: `Roofs.head_rate`)
    memory_s  = bytes / (bandwidth * bandwidth_eff(bytes))      weights + KV + activations
    time_s    = (compute_s^p + memory_s^p)^(1/p) + kernels * kernel_overhead_s
                (roofline, Williams et al. 2009, with imperfect overlap p; see specs/hardware.py)

plus tensor-parallel all-reduces and pipeline sends (`parallel.py`) and the hardware's fixed device-side
`step_overhead_s`. That is the device time; the engine core's CPU work for the step (`specs/engine.py`
HostCosts: step_s + per_seq_s * sequences + per_worker_s * (GPUs - 1)) adds to it, or, with async scheduling,
hides behind it:

    step_s = device_s + host_s                  (synchronous loop)
    step_s = max(device_s, host_s)              (async scheduling: the next step is prepared during this one)

A pipelined replica whose engine keeps a micro-batch in every stage (`EngineProfile.pp_microbatches`) runs a step
of S sequences as a round of m = min(pp, S) micro-batches, each through every stage while the others fill the rest:

    device_s = max(device_s(S / m), device_s(its prompt chunks, whole, over min(chunks, m) micro-batches))
    host_s   = m * host_s(S / m)                (the engine core prepares each micro-batch in turn)

Engine kernel factors (`KernelFactors`): fused-MoE expert weights stream at `moe_bandwidth` of the dense
rate and their grouped GEMMs compute at `moe_compute` of the dense GEMM rate, times w / (w + w_half) for an expert
sliced w wide on each GPU (intermediate / moe_tp; `EfficiencyProfile.moe_compute_half_width`); AWQ / GPTQ weights
stream at `marlin_weight_read` where the engine runs them on Marlin kernels (else the format's own rate), GGUF weights
at `block_weight_read` where the engine's mat-vec kernels dequantize in registers (Metal); GGUF matmuls reach
`quantized_gemm_compute` of the compute roof (`mmq_compute` of the int8 roof where they run int8, that roof at most
`mmq_sm_ops_per_clock` x SMs x clock on parts whose SM count the catalog gives; so do the engine's `block_formats`,
llama.cpp's MXFP4, times `fp4_mmq_speedup` on chips with FP4 tensor cores); the fixed cost per kernel is the
hardware's `kernel_overhead_s` x the engine's `kernel_overhead_scale` (x `hbm_kernel_overhead_scale` on HBM
parts); where the engine runs prefill without CUDA graphs, a step with prompt tokens, or a decode of more sequences
per DP rank than the largest batch the engine captured in a CUDA graph (`cuda_graph_max_bs`: SGLang's
--cuda-graph-max-bs), or any step whose graphs run in pieces around eager attention ops (`piecewise_step_s` +
`piecewise_layer_s` per layer: vLLM V1's prefill, and its decode before 0.11), cannot go faster than the host can
launch it:
    device_s = max(kernels_s, kernels * eager_prefill_kernel_s)      (launches overlap execution; a short
                                                                      prompt is launch-bound, a long one is not)
where block-scaled FP8 (`WeightFormat.group_quantizes_activations`) adds one group-quantization launch per GEMM
input to the kernels counted (DeepSeek-V3: 482 per step); an engine that computes at most `ubatch_tokens` tokens in
one pass of the model (llama.cpp's n_ubatch) runs a step of T > u tokens as n = ceil(T / u) passes, each with 1/n of
the tokens, sequences and attention sums and the logits in the last:
    step_s = combine(sum of the passes' device_s, host_s)                (`_passes`, `_pass_shapes`);
FLOPs per operator:

- linear layer with P weights on T tokens: 2·T·P (one multiply-add per weight per token);
- attention (flash-style: scores never written to memory): FLOPs = pairs · 4·heads·head_dim
  (QK^T and PV, 2 FLOPs each per pair and dimension); bytes = cached KV read + new KV written + Q, O;
  its compute efficiency grows with the query rows sharing one KV head in a tile (new tokens per sequence
  × heads per KV head: GQA decode kernels such as XQA and FlashInfer pack the group into the M dimension);
  MLA prefill uses the expanded heads (2·heads·(d_nope + d_rope + d_v) per pair), MLA decode the absorbed
  latent form (2·heads·(2·kv_lora + d_rope)) as in DeepSeek-V2 §2.1.3 and vLLM's MLA backend;
- MoE: each token runs k experts (2·T·k·P_expert FLOPs); the weights read are those of the distinct
  experts the batch touches, touched(T) = E - (E - k)·(1 + (T - 1)·k/(E·a))^(-a) in expectation under
  gamma-distributed expert popularity of shape a (`specs/expert_load.py`: uneven routing touches fewer experts than
  uniform routing's E·(1 - (1 - k/E)^T)), or T·k where the engine runs a step of so few tokens as one mat-vec per
  token-expert pair (`KernelFactors.moe_pair_reads_below`: llama.cpp's Metal mul_mv_id); each of the T·k
  token-expert rows carries its intermediate and its full-width output through memory (`_moe_act_elems`); where
  the grouped matmul sizes its token tile from the whole pass (`KernelFactors.moe_tile_cols`: llama.cpp's CUDA /
  HIP MMQ, mmq_x from the pass's T), each touched expert computes whole tiles of c = min(T rounded up to 8, tile)
  columns: 2·touched·ceil(rows / c)·c·P_expert FLOPs at the efficiency of a c-wide tile, rows = T·k / touched;
- expert parallelism with data-parallel attention (`Deployment.dp`, `ep`): a decode batch is spread evenly over
  the dp attention groups, so every operator but the routed experts runs on 1/dp of its tokens, pairs and KV
  reads; a step with prompt chunks runs each chunk whole on one group, and the step waits for the group with the
  most tokens (`BatchShape.busiest`, `cost.batch.busiest_group`), whose rows every operator but the routed experts
  then runs; the routed experts see the whole batch: a GPU runs T·k/ep token-expert rows of its E/ep experts
  (2·(T·k/ep)·P_expert FLOPs, P_expert its moe_tp shard) and reads the ones touched, touched(T)/ep;
  with a stated `expert_skew` s the busiest rank runs s times the mean rows, and the step waits for it.
  Tokens reach the experts by two all-to-alls per MoE layer (dispatch, combine: `parallel.alltoall_time`), each
  GPU sending its (T/dp)/tp tokens' activations to k·moe_tp GPUs (at most the group), which replace the
  MoE layer's all-reduce; with dp > 1 and ep = 1 the MoE layer all-gathers the groups' tokens and
  reduce-scatters them back (SGLang's DP attention over a TP MoE); with two-batch overlap (SGLang's
  --enable-two-batch-overlap, DeepSeek's inference system) a MoE layer takes max(kernels, collectives);
- LM head: only the rows that produce a token (2·logits·V·h); its weights are 16-bit in every format but GGUF's
  and stream at the plain rate, not the format's dequantizing one;
- norms, residuals and activations: bytes only;
- per layer kind (`cost/attention.py`): sliding and chunked layers attend their window or chunk; a DSA layer
  attends its top-k keys and runs its indexer over every cached index key ("indexer"); a linear-state layer
  replaces attention with its recurrence ("linear_attention": per-token state FLOPs, each sequence's state read
  and written once); family extras per layer ("layer_extras", Gemma 3n) are GEMMs of their weights.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from functools import lru_cache

from flopwise.cost.attention import AttentionLayout, AttentionWork, Span
from flopwise.cost.batch import BatchShape
from flopwise.cost.layout import LayerGroup, layout
from flopwise.cost.parallel import allgather_time, allreduce_time, alltoall_time, p2p_time
from flopwise.specs.deployment import Deployment
from flopwise.specs.engine import HostCosts
from flopwise.specs.expert_load import experts_touched
from flopwise.specs.hardware import LOW_PRECISION_DTYPES, SM_CLASSES
from flopwise.specs.precision import default16

__all__ = ["OpCost", "StepCost", "Roofs", "roofs", "step_cost", "step_time", "full_step_time", "decode_step_time",
           "decode_step_timer", "decode_on_cuda_cores", "host_s", "op_time_s"]

# Routed MoE per layer (vLLM `fused_moe`): router GEMM, top-k, moe_align_block_size, two grouped GEMMs,
# silu_and_mul and moe_sum (group-limited routing adds the engine's grouped_topk_kernels - 1).
MOE_KERNELS = 6
# TensorRT-LLM's fused trtllm-gen MoE (`KernelFactors.trtllm_moe`): the router GEMM, the activations' block
# quantization and one runner op (fused_moe_trtllm_gen.py: torch.ops.trtllm.fp4_block_scale_moe_runner /
# mxe4m3_mxe2m1_block_scale_moe_runner covers routing, both grouped GEMMs, the activation and the combine)
TRTLLM_MOE_KERNELS = 3
# Share of min(kernels, collectives) that two-batch overlap hides. Not 1: each micro-batch's GEMMs run at half the
# rows, DeepEP's kernels take SMs from the compute, and the halves synchronise. SGLang's large-scale EP blog
# (LMSYS, 2025-05-05) measures +27-35% throughput from it where kernels and all-to-alls take about as long, i.e.
# about half of the smaller hidden (1 / (1 - h / 2) = 1.3 at h = 0.46).
TBO_OVERLAP = 0.5
# The fewest rows (tokens) one tensor-core MMA instruction multiplies on NVIDIA's datacenter Hopper and Blackwell
# (`HardwareSpec.sm_class`): wgmma.mma_async's shapes are m64nNk16 (PTX ISA, warpgroup-level MMA), tcgen05.mma's M
# is 64 or 128 (PTX ISA, tcgen05 shapes). A GEMM of fewer rows (a small decode batch) pays for 64.
MIN_MMA_ROWS = 64


@dataclass(frozen=True, slots=True, kw_only=True)
class OpCost:
    """One operator summed over the layers it appears in (`count`), per GPU."""

    name: str
    count: int
    flops: float
    weight_bytes: float
    kv_bytes: float
    act_bytes: float
    comm_bytes: float
    peak_compute_s: float  # FLOPs / peak FLOP/s: the ideal, before efficiency
    peak_memory_s: float  # bytes / peak bandwidth
    compute_s: float  # at the efficiency profile
    memory_s: float
    comm_s: float
    overhead_s: float
    time_s: float

    @property
    def bytes(self) -> float:
        return self.weight_bytes + self.kv_bytes + self.act_bytes

    @property
    def bound(self) -> str:
        """Which roof sets this operator's time."""
        top = max(self.compute_s, self.memory_s, self.comm_s, self.overhead_s)
        if top == self.comm_s and self.comm_s > 0:
            return "communication"
        if top == self.overhead_s:
            return "overhead"
        return "compute" if self.compute_s >= self.memory_s else "memory"

    @property
    def arithmetic_intensity(self) -> float:
        return self.flops / self.bytes if self.bytes else 0.0


@dataclass(frozen=True, slots=True)
class StepCost:
    time_s: float
    ops: tuple[OpCost, ...]
    step_overhead_s: float

    def _sum(self, attr: str) -> float:
        values: Iterator[float] = (getattr(o, attr) for o in self.ops)  # `attr` names one of OpCost's floats
        return sum(values)

    @property
    def flops(self) -> float:
        return self._sum("flops")

    @property
    def bytes(self) -> float:
        return sum(o.bytes for o in self.ops)

    @property
    def compute_s(self) -> float:
        return self._sum("compute_s")

    @property
    def peak_compute_s(self) -> float:
        return self._sum("peak_compute_s")

    @property
    def peak_memory_s(self) -> float:
        return self._sum("peak_memory_s")

    @property
    def memory_s(self) -> float:
        return self._sum("memory_s")

    @property
    def bound(self) -> str:
        """The roof that accounts for most of the step's time."""
        share: dict[str, float] = {}
        for o in self.ops:
            share[o.bound] = share.get(o.bound, 0.0) + o.time_s
        share["overhead"] = share.get("overhead", 0.0) + self.step_overhead_s
        return max(share, key=share.__getitem__)


@dataclass(frozen=True, slots=True, kw_only=True)
class Roofs:
    """The rates one deployment's kernels run at (cached per deployment).

    `peak_linear` is the GEMM peak of the dtype the hardware really multiplies in, times the low-precision
    factor for 8/4-bit math; `gemm_eff` the format's GEMM penalty once compute-bound (`WeightFormat.gemm_efficiency`:
    a weight-only format's dequantization, block-scaled FP8's per-block scaling on FP8 math; a format run through
    a weight-only kernel on a chip without its math pays its own dequantization figure, else 0.85)."""

    bw: float
    peak_linear: float
    nominal_peak_linear: float
    nominal_peak_dense: float  # the GEMM peak of the weights outside the routed experts (see dense_rate)
    nominal_peak_proj: float  # and of the attention projections (see proj_rate)
    nominal_peak_head: float  # and of the LM head (see head_rate)
    peak_attn: float
    gemm_eff: float
    weight_read_eff: float
    head_weight_eff: float  # the LM head's weight_eff: 1 / weight_read_eff where the format keeps it 16-bit
    p: float
    moe_weight_eff: float  # engine's fused-MoE share of the bandwidth roof (KernelFactors.moe_bandwidth)
    moe_compute_eff: float  # and of the compute roof (KernelFactors.moe_compute)
    moe_half_width: float  # a GPU's expert slice width at which that halves (EfficiencyProfile.moe_compute_half_width)
    eager_kernel_s: float  # launch time per kernel of a step run eagerly (KernelFactors.eager_prefill_kernel_s, or
    #                        its eager_kernel_s where CUDA graphs are off altogether)
    act_quant: bool  # block-scaled formats: a group-quantization launch before each GEMM (eager steps)
    graph_max_bs: int  # decode batches per DP rank above this run eagerly (KernelFactors.cuda_graph_max_bs; 0: none)
    all_eager: bool  # no CUDA graphs at all (KernelFactors.cuda_graphs false): every step runs eagerly
    piecewise_layer_s: float  # a piecewise step's launch work per layer (KernelFactors.piecewise_layer_s)
    piecewise_step_s: float  # and per step, whatever its depth (KernelFactors.piecewise_step_s)
    piecewise_decode: bool  # decode-only steps run piecewise too
    piecewise_prefill: bool  # prompt steps run piecewise, other uncaptured steps eagerly (KernelFactors)
    grouped_topk_kernels: int  # launches of one grouped-routing layer's top-k (KernelFactors.grouped_topk_kernels)
    moe_kernels: int  # modelled kernels of one routed-MoE layer (MOE_KERNELS, TRTLLM_MOE_KERNELS)
    moe_pair_reads_below: int  # fewer tokens: each token-expert pair reads its expert (KernelFactors, same name)
    moe_tile_cols: int  # a grouped MoE matmul's widest token tile, sized from the pass (KernelFactors, same name)
    fused_norm_tokens: int  # steps of at most this many tokens fuse the norms after the all-reduces (0: none;
    #                         KernelFactors.fuses_allreduce, allreduce_fusion_tokens)
    # folded constants of the hot path (see _Acc.add)
    linear_rate: float  # peak_linear * compute_max * gemm_eff
    dense_rate: float  # linear_rate (times the device's `fp4_linear_factor` in FP4 math), or, where the format
    #                    covers the routed experts alone (experts_only: gpt-oss's MXFP4 checkpoints), the 16-bit rate
    #                    the other GEMMs (projections, dense and shared MLPs, the LM head) run at: their weights and
    #                    activations are 16-bit, no dequantization
    head_rate: float  # the 16-bit rate where the format leaves the LM head 16-bit (every GPU format: checkpoints
    #                   keep it unquantized), dense_rate where it quantizes it too (GGUF's output tensor)
    proj_rate: float  # dense_rate, or the 16-bit rate where the format leaves the attention projections 16-bit
    #                   (attention_16bit: NVIDIA's first DeepSeek-R1 NVFP4 checkpoint)
    attention_rate: float  # peak_attn * attention_compute_max
    decode_cc_rate: float  # FP32 peak * decode_cuda_core_compute where decode attention runs on CUDA cores, else 0
    decode_cc_groups: tuple[int, ...]  # the GQA group sizes (query heads // KV heads per GPU) that do (none: ())
    decode_tensor_max_seqs: int  # a decode step of at most this many sequences takes the tensor cores anyway (0: none)
    peak_cc: float  # the FP32 peak those decode FLOPs are shown against (the breakdown's peak_compute_s)
    peak_index: float  # the DSA indexer's logits run in fp8 where the chip has it (DeepGEMM fp8 MQA logits)
    index_rate: float  # peak_index * attention_compute_max
    bandwidth_rate: float  # bw * bandwidth_max
    half_m: float
    half_bytes: float
    kernel_s: float  # fixed GPU time per modelled kernel: the hardware's, times the engine's kernel_overhead_scale
    # (and its hbm_kernel_overhead_scale on HBM parts, its pdl_kernel_overhead_scale with programmatic dependent
    # launch on)
    # the fewest rows one tensor-core MMA instruction multiplies (Hopper's wgmma and Blackwell's UMMA: 64; 0 where
    # not modelled) and the rates the dense, projection and LM-head GEMMs' tensor cores alone allow
    # (peak x low-precision factor x compute_max): a GEMM of fewer rows pays whole instructions (`_Acc.add`)
    min_mma_rows: int = 0
    tile_rates: tuple[float, float, float] = (0.0, 0.0, 0.0)


@lru_cache(maxsize=512)
def roofs(dep: Deployment) -> Roofs:
    hw, wf = dep.hardware, dep.weights
    kf = dep.engine.kernels
    kf = kf.for_deployment(dp_attention=dep.dp > 1, speculative=dep.speculative is not None,
                           mla=dep.model.mla is not None)
    compute = wf.compute
    block = kf.quantized_path(wf)
    native_mx = wf.mx_fp4 and hw.has_trtllm_gen and not block
    if native_mx:  # the activations the engine's MXFP4 kernels take on datacenter Blackwell
        compute = kf.mxfp4_activation
    elif wf.mx_fp4 and not block and not kf.mxfp4_fp4_math and hw.vendor == "nvidia":
        compute = "bf16"  # weight-only in 16-bit, whatever FP4 math the chip has
    if block:  # GGUF block formats (and MXFP4 in llama.cpp): the math the engine's quantized matmuls run in
        compute = kf.quantized_gemm_dtype
        if compute == "fp16" and hw.compute_dtype("fp16") == "fp32" and hw.peak_tflops.get("int8", 0) > 0:
            compute = "int8"  # no fast fp16 (Pascal): MMQ's int8 dot products (cuBLAS only from Volta, PR #3776)
    linear_dtype = hw.compute_dtype(compute, weight_only_fallback=compute in ("fp8", "fp4"))
    nominal = hw.peak_tflops[linear_dtype] * 1e12
    if block and linear_dtype == "int8" and kf.mmq_sm_ops_per_clock and hw.sm_count and hw.boost_clock_ghz:
        # the engine's quantized matmuls issue int8 MMAs at most at this rate per SM and clock, whatever wider tensor
        # cores the part has (A100's 4,096 ops per SM and clock, Hopper's through wgmma)
        nominal = min(nominal, kf.mmq_sm_ops_per_clock * hw.sm_count * hw.boost_clock_ghz * 1e9)
    if linear_dtype == "fp16" and kf.fp16_accumulate_compute and hw.fp16_accumulate_tflops:
        nominal = max(nominal, hw.fp16_accumulate_tflops * 1e12 * kf.fp16_accumulate_compute)
    factor = hw.efficiency.low_precision_compute_factor if linear_dtype in LOW_PRECISION_DTYPES else 1.0
    weight_only = compute != linear_dtype or (wf.bits_per_weight < 16 and compute in ("fp16", "bf16"))
    # a weight-only format's dequantization, a block-scaled W8A8 format's per-block scaling on its own FP8 math
    # (WeightFormat.gemm_efficiency); block-scaled FP8 through a weight-only kernel (no FP8 math) scales nothing
    # in FP8 and pays the generic weight-only 0.85, as any format with no dequantization figure of its own
    scaled = wf.group_quantizes_activations
    # (an MXFP4 kernel built for FP4-capable chips dequantizes inside its block-scaled pipeline: no such cost)
    gemm_eff = wf.gemm_efficiency if weight_only != scaled and not native_mx else 1.0
    if compute != linear_dtype and (wf.gemm_efficiency == 1.0 or scaled):
        gemm_eff = 0.85
    if block:
        native_fp4 = wf.compute == "fp4" and hw.peak_tflops.get("fp4", 0) > 0
        gemm_eff = (kf.mmq_compute * wf.mmq_rate * (kf.fp4_mmq_speedup if native_fp4 else 1.0) if compute == "int8" else
                    (1.0 if kf.fused_dequant else gemm_eff) * kf.quantized_gemm_compute)
    weight_read_eff = kf.block_weight_read if block and kf.block_weight_read > 0 else wf.weight_read_efficiency
    if wf.marlin and kf.marlin_weight_read > 0 and hw.vendor == "nvidia" and hw.peak_tflops.get("bf16", 0) > 0:
        weight_read_eff = kf.marlin_weight_read  # bf16 tensor cores came with sm80, which Marlin needs
    e = hw.efficiency
    kernel_s = e.kernel_overhead_s * kf.kernel_overhead_scale
    if hw.memory_kind == "hbm":
        kernel_s *= kf.hbm_kernel_overhead_scale
    if dep.model.moe is not None and not kf.trtllm_moe:
        kernel_s *= e.moe_kernel_scale(wf.compute)
    if kf.pdl:  # each kernel launches while the one before drains (programmatic dependent launch)
        kernel_s *= kf.pdl_kernel_overhead_scale
    peak_attn = hw.peak_flops("bf16")
    peak_cc = hw.peak_tflops.get("fp32", 0.0) * 1e12
    cc_groups = kf.decode_cuda_core_groups_on(hw.sm_class, dep.model.family, dep.kv.bytes_per_element)
    cc_rate = peak_cc * kf.decode_cuda_core_compute if cc_groups else 0.0
    peak_index = hw.peak_flops("fp8", weight_only_fallback=True)
    linear_rate = nominal * factor * e.compute_max * gemm_eff
    # FP4 math in standalone linear layers, each behind its activations' quantization (`fp4_linear_factor`)
    quant = e.linear_factor(linear_dtype) if compute == linear_dtype and not block else 1.0
    nominal_dense, dense_rate = nominal, linear_rate * quant
    peak16 = hw.peak_flops(default16(hw))
    if wf.experts_only and not block:  # (a GGUF file's other matrices are Q8_0, run by the same quantized matmuls)
        nominal_dense, dense_rate = peak16, peak16 * e.compute_max
    nominal_proj, proj_rate = (peak16, peak16 * e.compute_max) if wf.attention_16bit else (nominal_dense, dense_rate)
    unquantized_head = (peak16, peak16 * e.compute_max)
    nominal_head, head_rate = (nominal_dense, dense_rate) if wf.quantizes_embeddings else unquantized_head
    tensor_dense = (peak16 * e.compute_max if wf.experts_only and not block
                    else nominal * factor * e.compute_max)  # the dense GEMMs' rate less the format's own derates
    tensor_proj = peak16 * e.compute_max if wf.attention_16bit else tensor_dense
    tensor_head = tensor_dense if wf.quantizes_embeddings else peak16 * e.compute_max
    return Roofs(bw=hw.bandwidth_bytes_per_s, peak_linear=nominal * factor, nominal_peak_linear=nominal,
                 nominal_peak_dense=nominal_dense, dense_rate=dense_rate, nominal_peak_proj=nominal_proj,
                 proj_rate=proj_rate, nominal_peak_head=nominal_head, head_rate=head_rate,
                 peak_attn=peak_attn, gemm_eff=gemm_eff, weight_read_eff=weight_read_eff,
                 head_weight_eff=1.0 if wf.quantizes_embeddings else 1.0 / weight_read_eff,
                 p=e.overlap_exponent, moe_weight_eff=kf.moe_bandwidth,
                 # the fused-MoE kernels' fitted share of the compute roof is work at the SMs' pace (gathering,
                 # permuting, scheduling around the MMAs): where the tensor path is rate-limited below the SMs
                 # (HardwareSpec.tensor_throttle: H20, L20) the MMAs bound it far later, up to the GEMM's own rate
                 moe_compute_eff=min(kf.moe_compute * hw.tensor_throttle(linear_dtype), 1.0),
                 moe_half_width=e.moe_compute_half_width,
                 eager_kernel_s=kf.eager_prefill_kernel_s if kf.cuda_graphs else kf.eager_launch_s,
                 act_quant=wf.group_quantizes_activations and not weight_only,
                 graph_max_bs=kf.cuda_graph_max_bs, all_eager=not kf.cuda_graphs,
                 piecewise_layer_s=kf.piecewise_layer_s, piecewise_step_s=kf.piecewise_step_s,
                 piecewise_decode=kf.piecewise_decode, piecewise_prefill=kf.piecewise_prefill,
                 grouped_topk_kernels=kf.grouped_topk_kernels,
                 moe_kernels=TRTLLM_MOE_KERNELS if kf.trtllm_moe else MOE_KERNELS,
                 moe_pair_reads_below=kf.moe_pair_reads_below, moe_tile_cols=kf.moe_tile_cols,
                 fused_norm_tokens=kf.allreduce_fusion_tokens if kf.fuses_allreduce(
                     sm_class=hw.sm_class, hw_id=hw.id, family=dep.model.family, tp=dep.tp, dp=dep.dp,
                     ep=dep.ep, nodes=dep.nodes) else 0,
                 linear_rate=linear_rate,
                 attention_rate=peak_attn * e.attention_compute_max, peak_index=peak_index,
                 decode_cc_rate=cc_rate, decode_cc_groups=cc_groups if cc_rate else (), peak_cc=peak_cc,
                 decode_tensor_max_seqs=kf.tensor_decode_max_seqs if dep.kv.bytes_per_element == 2 else 0,
                 index_rate=peak_index * e.attention_compute_max,
                 bandwidth_rate=hw.bandwidth_bytes_per_s * e.bandwidth_max, half_m=e.compute_half_m,
                 half_bytes=e.bandwidth_half_bytes, kernel_s=kernel_s,
                 # (an FP32 model's GEMMs run on the CUDA cores: no MMA to pad)
                 min_mma_rows=MIN_MMA_ROWS if hw.sm_class in SM_CLASSES and not block and linear_dtype != "fp32"
                 else 0,
                 tile_rates=(tensor_dense, tensor_proj, tensor_head))


def _op_seconds(r: Roofs, rate: float, flops: float, m: float, weight_b: float, kv_b: float, act_b: float,
                kernels: int, weight_eff: float = 1.0, compute_eff: float = 1.0,
                cc_flops: float = 0.0) -> tuple[float, float, float, float]:
    """(time, compute, memory, overhead) seconds of one operator: compute_s = FLOPs / (rate * compute_eff *
    m / (m + half_m)); memory_s = bytes / (bandwidth_rate * b / (b + half_bytes)) with weight bytes inflated by
    1 / (weight_read_eff * weight_eff) (EfficiencyProfile and the engine's kernel factors, written with folded
    constants), plus cc_flops / decode_cc_rate for decode attention on the CUDA cores (`_cc_rate`); time =
    (compute_s^p + memory_s^p)^(1/p) + kernels * kernel_s. `decode_step_time` repeats this
    formula inline for attention, with its constants hoisted per batch size, and `step_time` for attention by
    token count; a change here must go there too (tests/test_cost_model.py holds the first equal to 1e-12 and the
    second to the bit)."""
    compute_s = flops * (m + r.half_m) / (m * rate * compute_eff) if flops > 0 else 0.0
    if cc_flops > 0:
        compute_s += cc_flops / r.decode_cc_rate
    nbytes = weight_b + kv_b + act_b
    if nbytes > 0:
        streamed = weight_b / (r.weight_read_eff * weight_eff) + kv_b + act_b
        memory_s = streamed * (nbytes + r.half_bytes) / (nbytes * r.bandwidth_rate)
    else:
        memory_s = 0.0
    overhead_s = kernels * r.kernel_s
    p = r.p
    return (compute_s**p + memory_s**p) ** (1.0 / p) + overhead_s, compute_s, memory_s, overhead_s


class _Acc:
    """Accumulates operator times; keeps the breakdown only when asked (the simulator does not), and, for
    `step_time`'s lookup by token count (`_token_terms`), each addition to the total (`terms`: None for attention)."""

    __slots__ = ("r", "detail", "ops", "total", "kernels", "terms")

    def __init__(self, dep: Deployment, detail: bool, terms: bool = False):
        self.r, self.detail = roofs(dep), detail
        self.ops: list[OpCost] = []
        self.total = 0.0
        self.kernels = 0
        self.terms: list[float | None] | None = [] if terms else None

    def add(self, name: str, count: int, flops: float, m: float, weight_b: float, kv_b: float, act_b: float,
            kernels: int, attention: bool = False, index: bool = False, weight_eff: float = 1.0,
            compute_eff: float = 1.0, gpu_kernels: int = 0, dense: bool = False, proj: bool = False,
            head: bool = False, cc_flops: float = 0.0) -> None:
        """One operator (`_op_seconds`) `count` times; `gpu_kernels` more kernels cost their fixed GPU-side time
        but are not counted as eager launches (they stand for single PyTorch ops, not modelled kernels); `dense`: a
        GEMM outside the routed experts (`Roofs.dense_rate`), `proj`: the attention projections (`proj_rate`),
        `head`: the LM head (`head_rate`);
        `cc_flops`: decode attention FLOPs run on the CUDA cores (`_cc_rate`), besides `flops`."""
        r = self.r
        self.kernels += count * kernels
        rate = (r.index_rate if index else r.attention_rate if attention else r.proj_rate if proj else
                r.head_rate if head else r.dense_rate if dense else r.linear_rate)
        t, compute_s, memory_s, overhead_s = _op_seconds(r, rate, flops, m, weight_b, kv_b, act_b,
                                                         kernels + gpu_kernels, weight_eff, compute_eff, cc_flops)
        if r.min_mma_rows and 0 < m < r.min_mma_rows and (dense or proj or head) and flops > 0:
            # a dense GEMM of fewer rows than one MMA instruction takes pays for whole instructions: on a part whose
            # tensor cores are slow for its bandwidth (H20) that, not the weight read, binds a small-batch decode
            padded_s = flops * r.min_mma_rows / (m * r.tile_rates[2 if head else 1 if proj else 0])
            if padded_s > t - overhead_s:
                t, compute_s = padded_s + overhead_s, padded_s
        self.total += count * t
        if self.terms is not None:
            self.terms.append(None if attention else count * t)
        if self.detail:
            peak = (r.peak_index if index else r.peak_attn if attention else r.nominal_peak_proj if proj else
                    r.nominal_peak_head if head else r.nominal_peak_dense if dense else r.nominal_peak_linear)
            self.ops.append(OpCost(name=name, count=count, flops=count * (flops + cc_flops),
                                   weight_bytes=count * weight_b, kv_bytes=count * kv_b, act_bytes=count * act_b,
                                   comm_bytes=0.0,
                                   peak_compute_s=count * flops / peak + (count * cc_flops / r.peak_cc if cc_flops
                                                                          else 0.0),
                                   peak_memory_s=count * (weight_b + kv_b + act_b) / r.bw,
                                   compute_s=count * compute_s, memory_s=count * memory_s, comm_s=0.0,
                                   overhead_s=count * overhead_s, time_s=count * t))

    def hide(self, compute: float, comm: float, first_op: int) -> None:
        """Two-batch overlap: two micro-batches alternate, each one's collectives running under the other's
        kernels; TBO_OVERLAP of the smaller of the two is hidden (1 would make a layer max(compute, comm)). The
        operators recorded from `first_op` on (the layer group's collectives) keep their share of what stays
        visible."""
        hidden = TBO_OVERLAP * min(compute, comm)
        if hidden <= 0:
            return
        self.total -= hidden
        if self.detail and comm > 0:
            keep = 1 - hidden / comm
            for i in range(first_op, len(self.ops)):
                o = self.ops[i]
                self.ops[i] = replace(o, comm_s=o.comm_s * keep, time_s=o.time_s * keep)

    def add_comm(self, name: str, count: int, seconds: float, sent: float) -> None:
        """A collective (one kernel each, counted for eager launches)."""
        self.total += count * seconds
        if self.terms is not None:
            self.terms.append(count * seconds)
        if seconds > 0:
            self.kernels += count
        if self.detail and seconds > 0:
            self.ops.append(OpCost(name=name, count=count, flops=0.0, weight_bytes=0.0, kv_bytes=0.0, act_bytes=0.0,
                                   comm_bytes=count * sent, peak_compute_s=0.0, peak_memory_s=0.0, compute_s=0.0,
                                   memory_s=0.0, comm_s=count * seconds, overhead_s=0.0, time_s=count * seconds))


def _run(dep: Deployment, shape: BatchShape, detail: bool, attention: bool = True, terms: bool = False) -> _Acc:
    """The operators of one step; `attention=False` leaves out those that read the cached context (attention
    and the DSA indexer), which `decode_step_time` adds per step; `terms`: record each addition (`_Acc`)."""
    lay = layout(dep)
    acc = _Acc(dep, detail, terms)
    T: float = shape.num_tokens
    if T == 0:
        return acc
    a = lay.act_bytes
    wbpp = lay.weight_bytes_per_param
    dbpp = lay.dense_weight_bytes_per_param
    abpp = lay.attn_weight_bytes_per_param
    h = lay.hidden
    hw = dep.hardware
    dp, ep = dep.dp, dep.ep
    T_all = T  # the whole batch, which the routed experts see
    S: float = shape.num_seqs
    L: float = shape.num_logits
    mine = shape.busiest if dp > 1 else None  # the slowest attention group's own rows, where the groups are uneven
    if mine is not None:  # every operator below but the routed experts runs that group's rows
        T, S, L = mine.num_tokens, mine.num_seqs, mine.num_logits
        share = 1.0
        shape = mine
        kv_tokens: float = T
    else:
        if dp > 1:  # one attention group's share: every operator below but the routed experts
            T, S, L = T / dp, S / dp, L / dp
        share = 1.0 / dp  # of the batch's attention pairs and KV reads
        kv_tokens = T_all  # KV written (times the share)

    acc.add("embedding", 1, 0.0, T, 0.0, 0.0, 2 * T * h * a, 1)
    ar_s, ar_sent = allreduce_time(hw, dep.tp, T * h * a, dep.per_node_of(dep.tp))
    moe_comm = _moe_comm(dep, T_all, T, h * a, lay.groups) if dp > 1 or ep > 1 else None
    for g in lay.groups:
        n = g.count
        at = g.attn
        start = acc.total
        acc.add("qkv_o_proj", n, 2 * T * at.params, T, at.params * abpp, 0.0, T * at.act_elems * a, at.proj_kernels,
                proj=True)
        work = shape.attention[g.window] if attention and at.has_pairs else None
        if work is not None:
            flops, cc_flops, m, kv_b, act_b = _attention_op(at, work, share, T, S, kv_tokens, a,
                                                            _cc_rate(acc.r, at, S) > 0)
            acc.add("attention", n, flops, m, 0.0, kv_b, act_b, at.attn_kernels, attention=True, cc_flops=cc_flops)
            if at.index_pair_flops:  # DSA indexer: every query scores every cached index key
                iw = shape.attention[None]
                acc.add("indexer", n, share * (iw.prefill_pairs + iw.decode_pairs) * at.index_pair_flops,
                        T / S * at.index_heads, 0.0,
                        share * (iw.prefill_kv_read + iw.decode_kv_read + kv_tokens) * at.index_bytes_per_token, 0.0, 2,
                        index=True)
        elif not at.has_pairs:  # linear-state layer: each sequence's state is read and written once per step
            acc.add("linear_attention", n, T * at.state_flops_per_token, T / S, 0.0, 2 * S * at.state_bytes,
                    T * at.state_act_elems * a, 3, attention=True)
        if g.is_moe:
            E, k = g.num_experts, g.experts_per_token
            # the experts' weights read: each distinct expert once, or, where the engine runs a few tokens as one
            # mat-vec per token-expert pair, every pair's expert (repeats included)
            touched = T_all * k if T_all < acc.r.moe_pair_reads_below else experts_touched(E, k, T_all, g.routing_shape)
            routing = acc.r.grouped_topk_kernels - 1 if g.grouped_routing else 0  # beyond the one top-k kernel
            rows_per_expert = T_all * k / touched
            w = g.expert_inter  # this GPU's slice of an expert: the N of gate/up, the K of down
            compute_eff = acc.r.moe_compute_eff * w / (w + acc.r.moe_half_width)
            if ep == 1 and dp == 1:
                flops, m = 2 * T * k * g.expert_params, rows_per_expert
                if acc.r.moe_tile_cols and T_all > 1:  # every touched expert computes whole tiles of the pass's width
                    m = min(-(-T_all // 8) * 8, acc.r.moe_tile_cols)
                    flops = 2 * touched * (-(-rows_per_expert // m) * m) * g.expert_params
                acc.add("moe_experts", n, flops, m,
                        touched * g.expert_params * wbpp + g.router_params * dbpp, 0.0,
                        _moe_act_elems(T, T * k, h, g.expert_inter) * a, acc.r.moe_kernels,
                        weight_eff=acc.r.moe_weight_eff, compute_eff=compute_eff, gpu_kernels=routing)
            else:  # the busiest GPU's experts: T_all * k / ep rows (times the skew), touched / ep of its experts read
                rows = T_all * k / ep * (dep.expert_skew if ep > 1 else 1.0)
                acc.add("moe_experts", n, 2 * rows * g.expert_params, rows_per_expert,
                        touched / ep * g.expert_params * wbpp + g.router_params * dbpp, 0.0,
                        _moe_act_elems(T, rows, h, g.expert_inter) * a, acc.r.moe_kernels,
                        weight_eff=acc.r.moe_weight_eff, compute_eff=compute_eff, gpu_kernels=routing)
            if g.shared_params:
                acc.add("shared_experts", n, 2 * T * g.shared_params, T, g.shared_params * dbpp, 0.0,
                        T * a * (2 * h + 3 * g.shared_inter), 2, dense=True)
        else:
            acc.add("mlp", n, 2 * T * g.dense_mlp_params, T, g.dense_mlp_params * dbpp, 0.0,
                    T * a * (2 * h + 3 * g.dense_inter), 2, dense=True)
        if g.extra_params:
            acc.add("layer_extras", n, 2 * T * g.extra_params, T, g.extra_params * dbpp, 0.0, 2 * T * h * a, 2,
                    dense=True)
        # the residual add and RMSNorm after each of the layer's two all-reduces ride in the all-reduce kernel
        norms = g.norms - 2 if T_all <= acc.r.fused_norm_tokens and moe_comm is None else g.norms
        if norms > 0:
            acc.add("norms_residual", n, 0.0, T, 0.0, 0.0, T * h * a * 2 * norms, norms)
        if acc.r.act_quant:  # one quantization launch per GEMM input: projections, the (routed or dense) MLP's
            acc.kernels += n * (at.proj_gemms + 2 + 2 * bool(g.shared_params))  # two, a shared expert's two
        if g.is_moe and moe_comm is not None:
            name, count, seconds, sent = moe_comm
            compute, first_comm = acc.total - start, len(acc.ops)
            acc.add_comm("tp_allreduce", n, ar_s, ar_sent)  # after attention, within the attention group (none at tp 1)
            acc.add_comm(name, count * n, seconds, sent)
            if dep.two_batch_overlap:
                acc.hide(compute, acc.total - start - compute, first_comm)
        else:
            acc.add_comm("tp_allreduce", 2 * n, ar_s, ar_sent)
    if dep.pp > 1:
        crossing = min(dep.pp - 1, dep.nodes - 1)  # stage boundaries between nodes (stages fill nodes in turn)
        if crossing:
            acc.add_comm("pp_send", crossing, p2p_time(hw, T_all * h * a, between_nodes=True), T_all * h * a)
        if dep.pp - 1 - crossing:
            acc.add_comm("pp_send", dep.pp - 1 - crossing, p2p_time(hw, T_all * h * a), T_all * h * a)
    if L:
        acc.add("lm_head", 1, 2 * L * lay.lm_head_params, L, lay.lm_head_params * lay.embed_bytes_per_param, 0.0,
                L * (h * a + lay.vocab_per_gpu * 4), 1, weight_eff=acc.r.head_weight_eff, head=True)
        s, sent = allgather_time(hw, dep.tp, L * lay.vocab_per_gpu * dep.tp * 4, dep.per_node_of(dep.tp))
        acc.add_comm("logits_gather", 1, s, sent)
    return acc


def _moe_act_elems(tokens: float, rows: float, h: int, inter: float) -> float:
    """Activation elements a routed-MoE layer moves through memory for `tokens` tokens that become `rows`
    token-expert rows (T·k, or a GPU's share under expert parallelism), `inter` the expert's intermediate width on
    this GPU. The grouped-GEMM path of vLLM's and SGLang's `fused_experts` (and TensorRT-LLM's CUTLASS MoE with its
    finalize step) keeps each row's intermediate and output in memory between kernels:
        first GEMM   reads each row's token (gathered through the sorted ids): rows·h;  writes gate|up: 2·rows·i
        silu_and_mul reads 2·rows·i, writes rows·i;   second GEMM reads rows·i, writes each row's output: rows·h
        moe_sum      reads the k outputs of each token (rows·h), writes the token once: tokens·h
    = 3·rows·h + 6·rows·i + tokens·h. For fine-grained experts (DeepSeek-V3: k = 8, h = 7168, i = 256 per GPU at
    tp 8) the k full-width output rows dominate: ~9x the 2·h + 3·k·i of the token and intermediates alone."""
    return 3 * rows * h + 6 * rows * inter + tokens * h


def _attention_op(at: AttentionLayout, work: AttentionWork, share: float, T: float, S: float, T_all: float,
                  a: int, cuda_cores: bool = False) -> tuple[float, float, float, float, float]:
    """One layer's attention over `work` on one GPU of an attention group holding `share` of the batch (T of its
    tokens, S sequences; T_all tokens in the whole batch write KV): (tensor-core FLOPs, CUDA-core FLOPs, GEMM
    rows, KV bytes, activation bytes). The decode pairs' FLOPs are the CUDA cores' where `cuda_cores`
    (`_cc_rate`), else the tensor cores' with the prompt pairs'."""
    kv_b = (work.prefill_kv_read + work.decode_kv_read + (T_all if at.writes_kv else 0)) * at.kv_bytes_per_token
    if cuda_cores:
        return (share * (work.prefill_pairs * at.pair_flops_prefill),
                share * (work.decode_pairs * at.pair_flops_decode), T / S * at.q_per_kv, share * kv_b,
                T * at.q_out_elems * a)
    pairs_flops = work.prefill_pairs * at.pair_flops_prefill + work.decode_pairs * at.pair_flops_decode
    return share * pairs_flops, 0.0, T / S * at.q_per_kv, share * kv_b, T * at.q_out_elems * a


def _cc_rate(r: Roofs, at: AttentionLayout, seqs: float | None = None) -> float:
    """The FLOP rate of this layer's decode attention where it runs on the CUDA cores (the engine's
    `KernelFactors.decode_cuda_core_groups`: a GQA group size among `decode_cc_groups`, a cache and a device whose
    backend decodes without tensor cores), else 0 (tensor cores); a step of `seqs` sequences (one attention group's)
    at most `decode_tensor_max_seqs` takes the tensor cores too (None: the rule alone, for any step). One GPU's group
    is min(q_per_kv, its query heads), floored: a KV head replicated beyond tp > KV heads serves that GPU's heads
    alone (SGLang's heads // tp // max(1, kv_heads // tp))."""
    if seqs is not None and seqs <= r.decode_tensor_max_seqs:
        return 0.0
    return r.decode_cc_rate if int(min(at.q_per_kv, at.q_heads)) in r.decode_cc_groups else 0.0


def decode_on_cuda_cores(dep: Deployment) -> bool:
    """Whether some attention layer of this deployment decodes on the CUDA cores (`_cc_rate`)."""
    r = roofs(dep)
    return any(_cc_rate(r, g.attn) > 0 for g in layout(dep).groups if g.attn.has_pairs)


def _moe_comm(dep: Deployment, tokens: float, group_tokens: float, token_bytes: float,
              groups: tuple[LayerGroup, ...]) -> tuple[str, int, float, float] | None:
    """A MoE layer's collective where it is not the attention group's all-reduce: (name, per layer, seconds,
    bytes sent) for the two all-to-alls of expert parallelism, or the all-gather and reduce-scatter of data-parallel
    attention over a TP MoE; None for plain tensor parallelism."""
    if dep.ep == 1 and dep.dp == 1:
        return None
    p = dep.tp * dep.dp
    if dep.ep == 1:  # every GPU needs every group's tokens: all-gather, then reduce-scatter the outputs
        s, sent = allgather_time(dep.hardware, p, tokens * token_bytes, dep.per_node_of(p))
        return ("moe_allgather_scatter", 2, s, sent)
    k = max(g.experts_per_token for g in groups if g.is_moe)
    share = group_tokens / dep.tp * token_bytes  # this GPU's slice of its group's tokens, one copy each
    # a stage's tp*dp GPUs sit in one node unless the replica has fewer stages than nodes
    per_node = p if dep.pp >= dep.nodes else dep.gpus_per_node
    s, sent = alltoall_time(dep.hardware, p, share, fanout=min(k * dep.moe_tp, p), per_node=per_node)
    return ("moe_alltoall", 2, s, sent)


def has_prompt(tokens: float, seqs: float, logits: float) -> bool:
    """Whether a step carries prompt tokens: more tokens than sequences, not all of them scored. A speculative
    verify step (every position scored) is a decode step, replayed in the engines' CUDA graphs (SGLang's and
    TensorRT-LLM's target-verify graphs, vLLM's uniform decode; vLLM V0's default batch-expansion scorer, which
    spec_decode_worker.py picks whenever CUDA graphs are on, expands each sequence into k + 1 single-token decodes
    that its model runner replays in the captured graphs: the v0.7.3 wheel; `EngineProfile.spec_scoring`), not
    launched as a prompt step."""
    return tokens > seqs and logits < tokens


def _runs_eagerly(r: Roofs, dep: Deployment, shape: BatchShape) -> bool:
    """Whether the engine runs this step without CUDA graphs: it has prompt tokens, it captures none (SGLang's
    --disable-cuda-graph, vLLM's --enforce-eager), or it decodes more sequences per data-parallel rank than the
    largest captured graph."""
    if not r.eager_kernel_s:
        return False
    if (has_prompt(shape.num_tokens, shape.num_seqs, shape.num_logits) and not r.piecewise_prefill) or r.all_eager:
        return True
    return 0 < r.graph_max_bs < -(-shape.num_seqs // dep.dp)


def _launch_floor_s(r: Roofs, dep: Deployment, shape: BatchShape, kernels: int) -> float:
    """The least time the host needs to launch this step: its kernels one by one where it runs eagerly
    (`_runs_eagerly`), its layers' graph pieces and eager attention ops where it runs piecewise; 0 where it
    replays one CUDA graph. An engine that compiles its model (vLLM V1) runs a decode batch above its largest
    captured graph as it runs a step with prompt tokens beyond its capture sizes: piece by piece from the host,
    priced at the same floor (a fixed part and one per layer)."""
    floor = kernels * r.eager_kernel_s if _runs_eagerly(r, dep, shape) else 0.0
    if r.piecewise_layer_s and (r.piecewise_decode or has_prompt(shape.num_tokens, shape.num_seqs, shape.num_logits)
                                or 0 < r.graph_max_bs < -(-shape.num_seqs // dep.dp)):
        floor = max(floor, r.piecewise_step_s + layout(dep).num_layers * r.piecewise_layer_s)
    return floor


def _device_s(dep: Deployment, shape: BatchShape, acc: _Acc) -> float:
    """Kernels (or, where the host launches the step more slowly, its launch floor) + the hardware's fixed
    per-step cost."""
    t = max(acc.total, _launch_floor_s(acc.r, dep, shape, acc.kernels))
    return t + dep.hardware.efficiency.step_overhead_s


def host_s(dep: Deployment, shape: BatchShape) -> float:
    """The engine core's CPU seconds for a step of `shape` (scheduling, input preparation, output handling); with
    data-parallel attention, of one DP rank's share (its own scheduler over its tp * pp GPUs)."""
    if not shape.num_tokens:
        return 0.0
    if dep.dp > 1:  # each DP rank's scheduler prepares its own share of the batch, in parallel with the others
        return dep.engine.host.seconds(-(-shape.num_seqs // dep.dp), dep.tp * dep.pp)
    return dep.engine.host.seconds(shape.num_seqs, dep.gpus_per_replica)


def _combine(dep: Deployment, device: float, host: float) -> float:
    return max(device, host) if dep.engine.host.async_scheduling else device + host


def _passes(dep: Deployment, num_tokens: int) -> int:
    """How many passes of the model a step of `num_tokens` tokens runs as: ceil(tokens / `ubatch_tokens`) where
    the engine computes at most that many at once (llama.cpp's ubatches), else 1."""
    u = dep.engine.kernels.ubatch_tokens
    return -(-num_tokens // u) if u and num_tokens > u else 1


def _share(shape: BatchShape, n: int) -> BatchShape:
    """One of `n` even parts of `shape`: ceil(x / n) of its tokens, sequences (at least one), logits and each span's
    attention sums (and of its busiest attention group's, where data-parallel attention groups are uneven)."""
    def part(v: int) -> int:
        return -(-v // n)
    work = {w: AttentionWork(part(a.prefill_pairs), part(a.prefill_kv_read), part(a.decode_pairs),
                             part(a.decode_kv_read)) for w, a in shape.attention.items()}
    busiest = _share(shape.busiest, n) if shape.busiest is not None else None
    return BatchShape(part(shape.num_tokens), max(1, part(shape.num_seqs)), part(shape.num_logits), work, busiest)


def _pass_shapes(shape: BatchShape, n: int) -> tuple[BatchShape, BatchShape]:
    """A step run as `n` passes (llama.cpp's ubatches), as two shapes: each of the first n - 1 passes, and the last.
    Every pass takes ceil(x / n) of the step's tokens, sequences and each span's attention sums x (one prompt's
    causal pairs grow from pass to pass; their sum is the step's); the logits are all in the last pass (a prompt's
    output row is its last token, and a pass without outputs skips the LM head)."""
    each = _share(shape, n)
    return replace(each, num_logits=0), replace(each, num_logits=shape.num_logits)


def _pass_device_s(dep: Deployment, shape: BatchShape) -> float:
    """Device seconds of one pass of `shape` (`step_time` without the host)."""
    fast = _by_tokens(dep)
    if fast is None:
        return _device_s(dep, shape, _run(dep, shape, False))
    works = [shape.attention[window] for _, _, window in fast.groups]
    return _fast_device_s(dep, fast, shape.num_tokens, shape.num_seqs, shape.num_logits,
                          [(w.prefill_pairs, w.prefill_kv_read, w.decode_pairs, w.decode_kv_read) for w in works])


def _passes_step_s(dep: Deployment, shape: BatchShape, n: int) -> float:
    """A step of `n` passes: their device seconds one after the other, the engine's host work once."""
    first, last = _pass_shapes(shape, n)
    device = (n - 1) * _pass_device_s(dep, first) + _pass_device_s(dep, last)
    return _combine(dep, device, host_s(dep, shape))


def _microbatches(dep: Deployment, num_seqs: int) -> int:
    """Micro-batches a step of `num_seqs` sequences runs as on a pipelined replica (`Deployment.pipeline_batches`):
    min(pp, num_seqs), else 1. A sequence is in one micro-batch at a time (it needs its last token to go on)."""
    k = dep.pipeline_batches
    return min(k, num_seqs) if k > 1 and num_seqs > 1 else 1


def _prompt_part(shape: BatchShape, m: int) -> BatchShape | None:
    """The heaviest micro-batch the step's prompt chunks make where a chunk stays whole (a sequence is in one
    micro-batch): its n_p chunks over min(n_p, m) micro-batches, each ceil(1 / min(n_p, m)) of the chunks' tokens,
    logits and prefill sums. The decode rows D are what a full-attention span's decode sums tell apart (pairs - KV
    read: c + 1 against c per row), so n_p = S - D chunks hold T - D tokens; None without prompt tokens or without a
    full-attention span to count by."""
    full = shape.attention.get(None)
    if full is None:
        return None
    d = full.decode_pairs - full.decode_kv_read
    chunks = shape.num_seqs - d
    if chunks < 1 or shape.num_tokens <= d:
        return None
    work = {w: AttentionWork(a.prefill_pairs, a.prefill_kv_read, 0, 0) for w, a in shape.attention.items()}
    prompts = BatchShape(shape.num_tokens - d, chunks, max(0, shape.num_logits - d), work)
    return _share(prompts, min(chunks, m))


def round_host_s(dep: Deployment, shape: BatchShape) -> float:
    """The engine core's CPU seconds for a step of `shape`: `host_s`, or on a pipelined replica (`_microbatches`
    m > 1) the round's, its work for each of the m micro-batches in turn: m x host_s(one micro-batch)."""
    m = _microbatches(dep, shape.num_seqs)
    return m * host_s(dep, _share(shape, m)) if m > 1 else host_s(dep, shape)


def _round_s(dep: Deployment, shape: BatchShape, m: int) -> float:
    """A step of a pipelined replica (`_microbatches` m > 1) as one round of m micro-batches: each goes through
    every stage (the device seconds of the whole model at its share, p2p sends included) while the others fill the
    stages it is not in, so the round takes its heaviest micro-batch's pass: max(an even share, the heaviest the
    prompt chunks make kept whole, `_prompt_part`); the engine core prepares each micro-batch in turn
    (`round_host_s`). Pipeline fill (the first micro-batch waiting for the stages before it) is not priced."""
    device = _pass_device_s(dep, _share(shape, m))
    prompts = _prompt_part(shape, m)
    if prompts is not None:
        device = max(device, _pass_device_s(dep, prompts))
    return _combine(dep, device, round_host_s(dep, shape))


def step_time(dep: Deployment, shape: BatchShape) -> float:
    """Seconds for one engine step (fast path: no breakdown). Where every operator but attention depends on the
    step's tokens or logits alone (`_token_terms`), those are looked up per token count and only attention is
    priced: the same operators added in the same order, so the same float as `_run`'s total. A step of more tokens
    than the engine computes at once runs as several passes (`_passes`); a pipelined replica's as one round of its
    micro-batches (`_round_s`)."""
    m = _microbatches(dep, shape.num_seqs)
    if m > 1:
        return _round_s(dep, shape, m)
    T = shape.num_tokens
    n = _passes(dep, T)
    if n > 1:  # (a deployment with passes has one attention group: `Deployment` refuses them with dp > 1)
        return _passes_step_s(dep, shape, n)
    fast = _by_tokens(dep)
    if fast is None or not T:
        acc = _run(dep, shape, False)
        return _combine(dep, _device_s(dep, shape, acc), host_s(dep, shape))
    works = [shape.attention[window] for _, _, window in fast.groups]
    return _fast_step_s(dep, fast, T, shape.num_seqs, shape.num_logits,
                        [(w.prefill_pairs, w.prefill_kv_read, w.decode_pairs, w.decode_kv_read) for w in works])


def full_step_time(dep: Deployment, num_tokens: int, num_seqs: int, num_logits: int,
                   work: tuple[int, int, int, int]) -> float:
    """`step_time` of BatchShape(num_tokens, num_seqs, num_logits, {None: AttentionWork(*work)}) on a model whose
    attention layers all attend every token, without building the shape (the simulator prices every step that
    is not a plain decode run this way)."""
    fast = _by_tokens(dep)
    if fast is None or not num_tokens or 0 < fast.ubatch < num_tokens or _microbatches(dep, num_seqs) > 1:
        # (`_passes` > 1, a round of micro-batches: the general path)
        return step_time(dep, BatchShape(num_tokens, num_seqs, num_logits, {None: AttentionWork(*work)}))
    return _fast_step_s(dep, fast, num_tokens, num_seqs, num_logits, [work] * len(fast.groups))


def _fast_step_s(dep: Deployment, fast: _ByTokens, T: int, S: int, L: int,
                 works: list[tuple[int, int, int, int]]) -> float:
    """`step_time` where `_by_tokens` applies: T tokens, S sequences, L logits, and each layer group's attention
    work (prefill pairs, prefill KV read, decode pairs, decode KV read), in group order."""
    device = _fast_device_s(dep, fast, T, S, L, works)
    host = fast.host.seconds(S, fast.gpus)  # `host_s` at dp 1
    return max(device, host) if fast.host.async_scheduling else device + host  # `_combine`


def _fast_device_s(dep: Deployment, fast: _ByTokens, T: int, S: int, L: int,
                   works: list[tuple[int, int, int, int]]) -> float:
    """The device seconds of `_fast_step_s`."""
    found = fast.by_tokens.get(T)
    if found is None:
        found = _token_terms(dep, T)
        if len(fast.by_tokens) < _MAX_LOOKUPS:
            fast.by_tokens[T] = found
    terms, kernels = found
    groups, ccs, r, a = fast.groups, fast.cc_rates, fast.roofs, fast.act_bytes
    rate, half_m, wre, half_bytes, bw_rate, p = (r.attention_rate, r.half_m, r.weight_read_eff, r.half_bytes,
                                                 r.bandwidth_rate, r.p)
    total = 0.0
    i = 0
    for t in terms:
        if t is None:  # the next group's attention: `_run`'s acc.add("attention", ...) at dp 1, whose
            count, at, _ = groups[i]  # `_attention_op` and `_op_seconds` are inlined here, operation for
            prefill_pairs, prefill_kv_read, decode_pairs, decode_kv_read = works[i]  # operation (weight bytes
            cc = ccs[i] if S > r.decode_tensor_max_seqs else 0.0  # 0, efficiencies 1, share 1): the same float
            i += 1
            m = T / S * at.q_per_kv
            if cc:  # decode on the CUDA cores (`_cc_rate`): the prompt pairs' FLOPs, then the decode pairs' at cc
                flops = 1.0 * (prefill_pairs * at.pair_flops_prefill)
                compute_s = flops * (m + half_m) / (m * rate * 1.0) if flops > 0 else 0.0
                cc_flops = 1.0 * (decode_pairs * at.pair_flops_decode)
                if cc_flops > 0:
                    compute_s += cc_flops / cc
            else:
                flops = 1.0 * (prefill_pairs * at.pair_flops_prefill + decode_pairs * at.pair_flops_decode)
                compute_s = flops * (m + half_m) / (m * rate * 1.0) if flops > 0 else 0.0
            kv_b = 1.0 * ((prefill_kv_read + decode_kv_read + (T if at.writes_kv else 0)) * at.kv_bytes_per_token)
            act_b = T * at.q_out_elems * a
            nbytes = 0.0 + kv_b + act_b
            if nbytes > 0:
                memory_s = (0.0 / (wre * 1.0) + kv_b + act_b) * (nbytes + half_bytes) / (nbytes * bw_rate)
            else:
                memory_s = 0.0
            t = count * ((compute_s**p + memory_s**p) ** (1.0 / p) + at.attn_kernels * r.kernel_s)
        total += t
    if L:
        found_logits = fast.by_logits.get(L)
        if found_logits is None:
            found_logits = _logit_terms(dep, L)
            if len(fast.by_logits) < _MAX_LOOKUPS:
                fast.by_logits[L] = found_logits
        logit_terms, logit_kernels = found_logits
        for t in logit_terms:
            total += t
        kernels += logit_kernels
    prompt = has_prompt(T, S, L)
    eager_prompt = prompt and not r.piecewise_prefill
    if r.eager_kernel_s and (eager_prompt or r.all_eager or 0 < r.graph_max_bs < S):  # `_launch_floor_s` at dp 1
        total = max(total, kernels * r.eager_kernel_s)
    if r.piecewise_layer_s and (r.piecewise_decode or prompt or 0 < r.graph_max_bs < S):
        total = max(total, r.piecewise_step_s + fast.num_layers * r.piecewise_layer_s)
    return total + fast.step_overhead_s


_MAX_LOOKUPS = 1 << 16  # token counts (and logit counts) whose terms one deployment keeps


@dataclass(frozen=True, slots=True)
class _ByTokens:
    """What `step_time` reads for one deployment: (layers, attention layout, span) of each layer group, the roofs,
    the activation bytes, the hardware's fixed per-step cost, and the terms found so far by token count and by
    logit count (`_token_terms`, `_logit_terms`; dicts keyed by int: the simulator asks every step)."""

    groups: tuple[tuple[int, AttentionLayout, Span], ...]
    cc_rates: tuple[float, ...]  # each group's `_cc_rate` (0: its decode runs on the tensor cores)
    roofs: Roofs
    act_bytes: int
    step_overhead_s: float
    host: HostCosts
    gpus: int  # per replica (the host's per-worker cost)
    num_layers: int  # the layers a piecewise step launches (`_launch_floor_s`)
    ubatch: int  # the most tokens one pass computes (`KernelFactors.ubatch_tokens`; 0: no limit)
    by_tokens: dict[int, tuple[tuple[float | None, ...], int]] = field(default_factory=dict)
    by_logits: dict[int, tuple[tuple[float, ...], int]] = field(default_factory=dict)


@lru_cache(maxsize=512)
def _by_tokens(dep: Deployment) -> _ByTokens | None:
    """Where `step_time` may look up every operator but attention by token count: one attention group (dp 1, so
    no expert-parallel collectives or two-batch overlap) and every layer attending by pairs (no linear-state layer,
    whose cost reads the sequences, nor a DSA indexer); else None."""
    lay = layout(dep)
    if dep.dp > 1 or dep.ep > 1 or any(not g.attn.has_pairs or g.attn.index_pair_flops for g in lay.groups):
        return None
    r = roofs(dep)
    return _ByTokens(groups=tuple((g.count, g.attn, g.window) for g in lay.groups),
                     cc_rates=tuple(_cc_rate(r, g.attn) for g in lay.groups), roofs=r,
                     act_bytes=lay.act_bytes, step_overhead_s=dep.hardware.efficiency.step_overhead_s,
                     host=dep.engine.host, gpus=dep.gpus_per_replica, num_layers=lay.num_layers,
                     ubatch=dep.engine.kernels.ubatch_tokens)


def _token_terms(dep: Deployment, num_tokens: int) -> tuple[tuple[float | None, ...], int]:
    """What `_run` adds to a step of `num_tokens` tokens before its logits, operator by operator (None where a
    group's attention goes), and the kernels it counts: recorded from a step of that many tokens."""
    shape = BatchShape(num_tokens, 1, 0, {g.window: AttentionWork(0, 0, 0, 0) for g in layout(dep).groups})
    acc = _run(dep, shape, False, terms=True)
    assert acc.terms is not None
    return tuple(acc.terms), acc.kernels


def _logit_terms(dep: Deployment, num_logits: int) -> tuple[tuple[float, ...], int]:
    """What `_run` adds for `num_logits` logits (the LM head and the logits' gather), and the kernels they count."""
    work = {g.window: AttentionWork(0, 0, 0, 0) for g in layout(dep).groups}
    without = _run(dep, BatchShape(1, 1, 0, work), False, terms=True)
    acc = _run(dep, BatchShape(1, 1, num_logits, work), False, terms=True)
    assert acc.terms is not None and without.terms is not None
    terms = acc.terms[len(without.terms):]
    assert None not in terms  # (no attention among them)
    return tuple(t for t in terms if t is not None), acc.kernels - without.kernels


@dataclass(frozen=True, slots=True)
class _DecodeBase:
    """A decode step of b rows apart from what reads the context sum C: the device seconds of every other
    operator plus the fixed per-step cost, the host seconds, and for each layer group with attention the
    constants of its `_attention_op` and `_op_seconds` (`terms`: count, FLOPs per pair, the compute-time factors
    (m + half_m) and m * rate, or 1 and the CUDA cores' rate, the tokens that write KV, KV bytes per token,
    activation bytes, launch overhead, the group's share of the batch), with the roofs' p, half_bytes and
    bandwidth rate: C enters
    only through the pairs (C + b) and the KV read (C + writes), so `decode_step_time` is a few float operations
    per group, in the same order as the general path's (the same result to the last bit)."""

    rest_s: float
    eager_s: float  # a step the host launches more slowly than it runs (eager, piecewise): that floor + the fixed cost
    host_s: float
    overlap: bool  # async scheduling: max(device, host), else their sum
    p: float
    half_bytes: float
    bandwidth_rate: float
    terms: tuple[tuple[int, float, float, float, int, float, float, float, float], ...]


@lru_cache(maxsize=8192)
def _decode_base(dep: Deployment, b: int) -> _DecodeBase | None:
    """None where attention is not the only operator that reads the context (a DSA indexer), where two-batch
    overlap ties the collectives' hidden share to it, or where the step is a round of micro-batches."""
    lay = layout(dep)
    if any(g.attn.index_pair_flops for g in lay.groups) or _passes(dep, b) > 1 or _microbatches(dep, b) > 1 or (
            dep.two_batch_overlap and (dep.dp > 1 or dep.ep > 1) and any(g.is_moe for g in lay.groups)):
        return None
    shape = BatchShape(b, b, b, {None: AttentionWork(0, 0, b, 0)})
    acc = _run(dep, shape, False, attention=False)
    rows = b / dep.dp if dep.dp > 1 else b  # one attention group's tokens and sequences (as `_run`)
    share = 1.0 / dep.dp
    r = roofs(dep)
    terms = []
    kernels = acc.kernels  # those of the operators `_run` left out are added below (attention: attn_kernels each)
    for g in lay.groups:
        at = g.attn
        if not at.has_pairs:
            continue
        kernels += g.count * at.attn_kernels
        m = rows / rows * at.q_per_kv  # `_attention_op`'s GEMM rows, T / S * q_per_kv
        cc = _cc_rate(r, at, rows)  # on the CUDA cores: FLOPs * 1 / rate, as `_op_seconds`'s 0 + cc_flops / rate
        mh, mr = (1.0, cc) if cc else (m + r.half_m, m * r.attention_rate)
        terms.append((g.count, at.pair_flops_decode, mh, mr, b if at.writes_kv else 0,
                      at.kv_bytes_per_token, rows * at.q_out_elems * lay.act_bytes, at.attn_kernels * r.kernel_s,
                      share))
    overhead = dep.hardware.efficiency.step_overhead_s
    floor = _launch_floor_s(r, dep, shape, kernels)
    eager = floor + overhead if floor else 0.0
    return _DecodeBase(rest_s=acc.total + overhead, eager_s=eager, host_s=host_s(dep, shape),
                       overlap=dep.engine.host.async_scheduling, p=r.p, half_bytes=r.half_bytes,
                       bandwidth_rate=r.bandwidth_rate, terms=tuple(terms))


def decode_step_time(dep: Deployment, num_seqs: int, context_sum: int) -> float:
    """`step_time` of `num_seqs` decode rows whose contexts sum to `context_sum` on a model whose attention layers
    all attend every token (`ShapeBuilder.full_only`), with the
    operators that do not read the context computed once per batch size: attention's pairs are C + B and its KV
    read C (`sim/shape.py`)."""
    return decode_step_timer(dep, num_seqs)(context_sum)


@lru_cache(maxsize=8192)
def decode_step_timer(dep: Deployment, num_seqs: int) -> Callable[[int], float]:
    """`decode_step_time(dep, num_seqs, C)` as a function of C alone, its per-batch-size constants bound once (a
    decode run prices several steps of one batch)."""
    base = _decode_base(dep, num_seqs)
    if base is None:
        def general(context_sum: int) -> float:
            return step_time(dep, BatchShape(num_seqs, num_seqs, num_seqs,
                                             {None: AttentionWork(0, 0, context_sum + num_seqs, context_sum)}))
        return general
    rest, eager, host, overlap, terms = base.rest_s, base.eager_s, base.host_s, base.overlap, base.terms
    p, hb, bwr = base.p, base.half_bytes, base.bandwidth_rate
    inv = 1.0 / p
    if len(terms) == 1:  # one attention group (most models): the loop below, unrolled
        (count, pair_flops, mh, mr, writes, kv_per_token, act_b, overhead, share), = terms

        def timed_one(context_sum: int) -> float:
            flops = share * ((context_sum + num_seqs) * pair_flops)
            compute_s = flops * mh / mr if flops > 0 else 0.0
            kv_b = share * ((context_sum + writes) * kv_per_token)
            nbytes = kv_b + act_b
            memory_s = nbytes * (nbytes + hb) / (nbytes * bwr) if nbytes > 0 else 0.0
            device: float = rest + count * ((compute_s**p + memory_s**p) ** inv + overhead)
            if eager > device:
                device = eager
            if overlap:  # max(device, host), without the builtin's call: several per decode run
                return host if host > device else device
            return device + host

        return timed_one

    def timed(context_sum: int) -> float:
        device = rest
        pairs = context_sum + num_seqs
        for count, pair_flops, mh, mr, writes, kv_per_token, act_b, overhead, share in terms:
            flops = share * (pairs * pair_flops)
            compute_s = flops * mh / mr if flops > 0 else 0.0
            kv_b = share * ((context_sum + writes) * kv_per_token)
            nbytes = kv_b + act_b
            memory_s = nbytes * (nbytes + hb) / (nbytes * bwr) if nbytes > 0 else 0.0
            device += count * ((compute_s**p + memory_s**p) ** inv + overhead)
        if eager > device:
            device = eager
        return max(device, host) if overlap else device + host

    return timed


def step_cost(dep: Deployment, shape: BatchShape) -> StepCost:
    """Seconds for one engine step with its per-operator breakdown. `step_overhead_s` is everything outside
    the operators: the hardware's fixed per-step cost, eager launches and the engine core's CPU time that the
    device does not hide. A pipelined replica's step (`_round_s`): the round's time and the operators of its m
    micro-batches (an even share's, m times: the stages' work together, as a pass through the stages in turn
    reports it), each GPU doing 1/pp of them; its overhead is what the round takes beyond a GPU's share
    (pipeline bubbles and a prompt chunk's longer pass included)."""
    m = _microbatches(dep, shape.num_seqs)
    if m > 1:
        acc = _run(dep, _share(shape, m), True)
        total = _round_s(dep, shape, m)
        ops = tuple(replace(o, **{a: m * getattr(o, a) for a in _OP_SUMS}) for o in acc.ops)
        return StepCost(time_s=total, ops=ops, step_overhead_s=total - m * acc.total / dep.pp)
    n = _passes(dep, shape.num_tokens)
    if n > 1:  # several passes (`_passes`): their operators summed
        first, last = _pass_shapes(shape, n)
        a, b = _run(dep, first, True), _run(dep, last, True)
        total = _combine(dep, (n - 1) * _device_s(dep, first, a) + _device_s(dep, last, b), host_s(dep, shape))
        return StepCost(time_s=total, ops=_summed_ops(a.ops, b.ops, n - 1),
                        step_overhead_s=total - ((n - 1) * a.total + b.total))
    acc = _run(dep, shape, True)
    device = _device_s(dep, shape, acc)
    total = _combine(dep, device, host_s(dep, shape))
    return StepCost(time_s=total, ops=tuple(acc.ops), step_overhead_s=total - acc.total)


_OP_SUMS = ("flops", "weight_bytes", "kv_bytes", "act_bytes", "comm_bytes", "peak_compute_s", "peak_memory_s",
            "compute_s", "memory_s", "comm_s", "overhead_s", "time_s")


def _summed_ops(first: list[OpCost], last: list[OpCost], k: int) -> tuple[OpCost, ...]:
    """The operators of k passes like `first` and one like `last`, summed operator by operator: the same list, but
    for the LM head's, which only the last pass (the one with logits) runs, at its end."""
    assert [o.name for o in first] == [o.name for o in last[:len(first)]]
    summed = (replace(o, **{a: k * getattr(f, a) + getattr(o, a) for a in _OP_SUMS})
              for f, o in zip(first, last[:len(first)], strict=True))
    return (*summed, *last[len(first):])


def op_time_s(dep: Deployment, flops: float, m: float, weight_bytes: float, act_bytes: float,
              kernels: int = 1) -> float:
    """One operator outside the decoder (an encoder's forward pass) on the deployment's roofs, by the same
    formula as every step operator."""
    acc = _Acc(dep, False)
    acc.add("op", 1, flops, m, weight_bytes, 0.0, act_bytes, kernels)
    return acc.total
