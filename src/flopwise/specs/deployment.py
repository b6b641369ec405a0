"""A deployment: a model on hardware served by an engine, with parallelism, number formats and engine knobs.
Immutable.

`num_gpus = tp * dp * pp * replicas`. Expert parallelism and data-parallel attention (as SGLang, vLLM and
TensorRT-LLM serve DeepSeek-V3): `dp` attention groups of `tp` GPUs each hold the attention and dense weights
(sharded by tp) and their own requests' KV cache; the MoE layers span all `tp * dp` GPUs of a stage, their
experts split over `ep` ranks (E / ep experts each) and each expert sharded over the remaining `tp * dp / ep`
(`moe_tp`); `expert_skew` is the busiest EP rank's load over the mean (it sets the step: the all-to-all waits
for it). `dp = ep = 1` is plain tensor parallelism, experts sharded by tp (vLLM's default). `nodes`: the
servers one replica spans, its GPUs split evenly (collectives between them go over each GPU's NIC).
`replicas_per_server`: how many of the replicas run as data-parallel engines behind one server (`vllm serve
--data-parallel-size R`, SGLang `--dp-size R` without DP attention) rather than as servers of their own; they
share that server's API frontend as its engine profile says (`FrontendCosts.for_engines`, `frontend`).
`max_num_seqs` and `max_num_batched_tokens` are per attention group (per DP rank, as the engines take them): a
replica runs up to `dp` times as many (`running_limit`, `token_budget`), except that SGLang divides its prefill
budget among DP-attention ranks (`EngineProfile.rank_tokens`). `engine` (`specs/engine.py`) is the
serving engine at a version: its frontend and per-step CPU costs, memory policy and defaults. Knob names follow
vLLM (`max_num_seqs`, `max_num_batched_tokens`, `block_size`); `gpu_memory_utilization` is the engine's memory
fraction, read by its memory policy (vLLM: share of the device; SGLang: --mem-fraction-static; TensorRT-LLM:
share of the free memory). `make_deployment` fills every knob not given from the engine's defaults for the
device, so each default has one home: the engine catalog. `speculative` (None: plain decoding) sets speculative
decoding (`specs/speculative.py`): it changes what a decode step verifies and emits, its cost, and the memory
left for the KV cache, never the scheduler.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from flopwise.errors import PrecisionError, SpecError
from flopwise.specs.engine import EngineKnobs, EngineProfile, FrontendCosts, engine_families, get_engine
from flopwise.specs.expert_load import default_expert_skew
from flopwise.specs.hardware import HardwareSpec
from flopwise.specs.model import ModelSpec
from flopwise.specs.precision import (
    GGUF_STEPS,
    KVFormat,
    WeightFormat,
    default16,
    default_weights,
    kv_format,
    weight_format,
)
from flopwise.specs.speculative import SpeculativeSpec

__all__ = ["Deployment", "MOE_BACKENDS", "TRTLLM_MOE_FORMATS", "check_cuda_graph_max_bs", "check_moe_backend",
           "device_refusal", "check_pdl", "make_deployment", "default_seqs", "weights_note", "v1_refusal"]


@dataclass(frozen=True, slots=True, eq=False, kw_only=True)
class Deployment:
    model: ModelSpec
    hardware: HardwareSpec
    weights: WeightFormat
    kv: KVFormat
    engine: EngineProfile
    tp: int = 1
    pp: int = 1
    replicas: int = 1
    replicas_per_server: int = 1  # data-parallel engines behind one server (they share its API frontend)
    dp: int = 1
    ep: int = 1
    nodes: int = 1  # servers one replica spans (its GPUs split evenly); collectives between them use the NIC
    expert_skew: float = 1.0  # with ep > 1: the busiest EP rank's token-expert rows over the mean (1: balanced)
    two_batch_overlap: bool = False  # with ep > 1: collectives of one micro-batch under the other's kernels
    # engine knobs: no defaults here; `make_deployment` fills them from the engine profile (their one home)
    gpu_memory_utilization: float
    block_size: int
    max_num_seqs: int
    max_num_batched_tokens: int
    # prompts split over steps within the token budget (the engine's default for this deployment: vLLM V0 turns it
    # on by itself above 32K tokens of context, `BatchDefault.chunked_above`)
    enable_chunked_prefill: bool
    speculative: SpeculativeSpec | None = None
    # the knobs (max_num_seqs, max_num_batched_tokens) the engine's offline benchmark derives from the workload it
    # runs (`EngineProfile.bench_batch`: trtllm-bench, those the user did not give); `for_workload` sets them
    bench_knobs: tuple[str, ...] = ()
    # the context the server is started for (vLLM --max-model-len, SGLang --context-length, TensorRT-LLM
    # --max_seq_len); None: the model's own. The engine's defaults that depend on it follow it (`context_len`)
    max_model_len: int | None = None
    _hash: int = field(default=0, compare=False, repr=False)
    _k: tuple[object, ...] = field(default=(), compare=False, repr=False)  # `_key()`, kept: deployments key caches

    def __post_init__(self) -> None:
        if self.engine.kernels.ubatch_tokens and self.dp > 1:
            raise SpecError(f"{self.engine.display}: passes of at most ubatch_tokens are priced without data-parallel "
                            "attention; drop --dp or ubatch_tokens")
        for name in ("tp", "pp", "replicas", "replicas_per_server", "dp", "ep", "nodes", "block_size", "max_num_seqs",
                     "max_num_batched_tokens"):
            v = getattr(self, name)
            if not isinstance(v, int) or v < 1:
                raise SpecError(f"{name} must be a positive integer, got {v!r}")
        if not 0 < self.gpu_memory_utilization <= 1:
            raise SpecError(f"gpu_memory_utilization must be in (0, 1], got {self.gpu_memory_utilization}")
        _check_max_model_len(self.max_model_len)
        m = self.model
        if m.mla is None and m.num_heads % self.tp:
            raise SpecError(f"tp={self.tp} does not divide {m.name}'s {m.num_heads} attention heads; "
                            f"choose a divisor of {m.num_heads}")
        if not (isinstance(self.expert_skew, (int, float)) and 1.0 <= self.expert_skew <= 16.0):
            raise SpecError(f"expert_skew must be in [1, 16] (the busiest expert rank's load over the mean), got "
                            f"{self.expert_skew!r}")
        if self.dp > 1 or self.ep > 1:
            experts = max((lay.mlp.num_experts for lay in m.layers if lay.mlp.is_moe), default=0)
            if not experts:
                raise SpecError(f"{m.name} has no MoE layers: expert parallelism (ep={self.ep}) and data-parallel "
                                f"attention (dp={self.dp}) apply to MoE models; serve a dense model with --replicas")
            if (self.tp * self.dp) % self.ep:
                raise SpecError(f"ep={self.ep} must divide tp*dp={self.tp * self.dp} (the GPUs the MoE layers span)")
            if self.ep > experts:
                raise SpecError(f"ep={self.ep} exceeds {m.name}'s {experts} routed experts")
        if self.replicas_per_server > 1:
            self._check_server_dp()
        if self.gpus_per_replica % self.nodes:
            raise SpecError(f"nodes={self.nodes} must divide the replica's tp*dp*pp={self.gpus_per_replica} GPUs")
        gpn = self.hardware.gpus_per_node
        if self.gpus_per_node > 1 and self.hardware.interconnect in SINGLE_DEVICE_LINKS:
            raise SpecError(f"{self.hardware.name} is the one device of its machine (no peer link): tp*dp*pp="
                            f"{self.gpus_per_node} of them in one machine is not a setup; serve with tp=1 (more "
                            f"machines as --num-gpus replicas), or spread the replica over --nodes {self.gpus_per_node}"
                            " machines")
        if self.nodes > 1 and self.hardware.network_gbs <= 0:  # its collectives or stage sends cross the network
            raise SpecError(f"the replica spans {self.nodes} servers, but {self.hardware.id} has no network bandwidth "
                            "in the catalog (network_gbs, each GPU's NIC): give it in --hardware-file, or use fewer "
                            "GPUs per replica")
        if gpn > 1 and self.gpus_per_node > gpn:  # the catalog states the server's peer-fabric domain
            need = self.hardware.servers_for(self.gpus_per_replica)
            if self.nodes == 1:
                raise SpecError(f"tp*dp*pp={self.gpus_per_replica} GPUs in one replica are more than one server "
                                f"holds ({gpn} x {self.hardware.id}, its {self.hardware.interconnect} domain): spread "
                                f"it over --nodes {need} (its collectives then cross the network), or use fewer GPUs "
                                "per replica")
            raise SpecError(f"{self.gpus_per_node} GPUs per node exceed {self.hardware.id}'s {gpn}; use more --nodes "
                            f"({need})")
        if self.pp > m.num_layers:
            raise SpecError(f"pp={self.pp} exceeds {m.name}'s {m.num_layers} layers")
        spec = self.speculative
        draft = spec.draft_model if spec is not None else None
        # the same tokenizer may pad its embedding table differently (Qwen2.5-0.5B 151,936, -7B 152,064): llama.cpp's
        # speculative decoding accepts up to 128 tokens of difference (SPEC_VOCAB_MAX_SIZE_DIFFERENCE), not another
        # vocabulary
        if draft is not None and abs(draft.vocab_size - m.vocab_size) > 128:
            raise SpecError(f"draft model {draft.name} has a vocabulary of {draft.vocab_size:,} tokens, "
                            f"{m.name} {m.vocab_size:,}: a draft must share the target's tokenizer; pick a draft "
                            "of its family")
        # a draft as large as the whole target (the target itself, a 70B for an 8B); a dense draft above a MoE
        # target's active parameters is a real setup (at batch > 1 the target reads far more than them)
        if draft is not None and draft.total_params >= m.total_params:
            raise SpecError(f"draft model {draft.name} ({draft.total_params / 1e9:.1f}B parameters) is not smaller "
                            f"than {m.name} ({m.total_params / 1e9:.1f}B): a draft proposes tokens more cheaply than "
                            "the target verifies them; pick a smaller model of its family")
        if spec is not None and spec.positions > self.max_num_batched_tokens:
            raise SpecError(f"speculative decoding verifies {spec.positions} positions per sequence, more than "
                            f"max_num_batched_tokens={self.max_num_batched_tokens}; raise the token budget")
        key = self._key()
        object.__setattr__(self, "_k", key)
        object.__setattr__(self, "_hash", hash(key))

    def _check_server_dp(self) -> None:
        r = self.replicas_per_server
        if self.replicas % r:
            raise SpecError(f"replicas_per_server={r} must divide the {self.replicas} replicas (--num-gpus / tp*pp)")
        if self.dp > 1:
            raise SpecError(f"replicas_per_server={r} runs dense data-parallel engines behind one server; with "
                            f"data-parallel attention (dp={self.dp}) the engine's DP flag is taken: use "
                            "independent replicas")
        if self.nodes > 1:
            raise SpecError(f"replicas_per_server={r} is modelled for replicas on one node each; drop --nodes")
        refusal = self.engine.server_dp_refusal(r)
        if refusal:
            raise SpecError(refusal)

    @property
    def frontend(self) -> FrontendCosts | None:
        """The API-server stage one replica sees (`FrontendCosts.for_engines`; None offline)."""
        fe = self.engine.frontend
        return None if fe is None else fe.for_engines(self.replicas_per_server, self.dp)

    def __hash__(self) -> int:
        return self._hash

    def _key(self) -> tuple[object, ...]:
        return (self.model, self.hardware, self.weights, self.kv, self.engine, self.tp, self.pp, self.replicas,
                self.replicas_per_server, self.dp, self.ep, self.nodes, self.expert_skew, self.two_batch_overlap,
                self.gpu_memory_utilization, self.block_size, self.max_num_seqs, self.max_num_batched_tokens,
                self.enable_chunked_prefill, self.speculative, self.bench_knobs, self.max_model_len)

    def __eq__(self, other: object) -> bool:
        """Value equality, cheap when unequal (hash first): deployments key the cost caches."""
        if self is other:
            return True
        if not isinstance(other, Deployment) or self._hash != other._hash:
            return False
        return bool(self._k == other._k)

    @property
    def num_gpus(self) -> int:
        return self.gpus_per_replica * self.replicas

    @property
    def gpus_per_replica(self) -> int:
        return self.tp * self.dp * self.pp

    @property
    def moe_tp(self) -> int:
        """GPUs each routed expert is sharded over: tp * dp / ep."""
        return self.tp * self.dp // self.ep

    @property
    def running_limit(self) -> int:
        """Sequences the replica runs at once: max_num_seqs per attention group, and per pipeline micro-batch where
        each has its own (`EngineProfile.pp_microbatches` "each")."""
        each = self.pipeline_batches if self.engine.pp_microbatches == "each" else 1
        return self.max_num_seqs * self.dp * each

    @property
    def token_budget(self) -> int:
        """Tokens the replica schedules per step: max_num_batched_tokens per attention group, or its share of it
        where the engine divides the budget among data-parallel attention ranks (`EngineProfile.dp_attention_chunk`:
        SGLang's chunked_prefill_size // dp_size); a pipelined replica's step is a round of its micro-batches, each
        scheduled within the budget (`pipeline_batches`)."""
        return self.engine.rank_tokens(self.max_num_batched_tokens, self.dp) * self.dp * self.pipeline_batches

    @property
    def pipeline_batches(self) -> int:
        """Batches in flight in the replica's pipeline: pp where the engine keeps a micro-batch in each stage
        (`EngineProfile.pp_microbatches`), else 1 (one batch through the stages in turn)."""
        return self.pp if self.pp > 1 and self.engine.pp_microbatches != "none" else 1

    @property
    def batch_from_workload(self) -> bool:
        """Whether the engine's offline benchmark picks any batch knob from the workload (`bench_knobs`)."""
        return bool(self.bench_knobs)

    def with_knobs(self, *, max_num_seqs: int | None = None, max_num_batched_tokens: int | None = None) -> Deployment:
        """This deployment with the batch knobs given set (None: kept), which the benchmark then no longer picks."""
        given = {k for k, v in (("max_num_seqs", max_num_seqs), ("max_num_batched_tokens", max_num_batched_tokens))
                 if v is not None}
        return replace(self, max_num_seqs=self.max_num_seqs if max_num_seqs is None else max_num_seqs,
                       max_num_batched_tokens=self.max_num_batched_tokens if max_num_batched_tokens is None
                       else max_num_batched_tokens,
                       bench_knobs=tuple(k for k in self.bench_knobs if k not in given))

    def for_workload(self, prompts: Sequence[int], outputs: Sequence[int], *,
                     chunked_prefill: bool | None = None) -> Deployment:
        """This deployment with the batch knobs its engine's offline benchmark picks for a workload of these prompt
        and output lengths (`EngineProfile.bench_batch`; their means, as trtllm-bench's dataset metadata gives them),
        those in `bench_knobs` only, which it then keeps (the benchmark re-derives them per dataset); a weight format
        it has no tuning for keeps the engine's defaults. Without chunked prefill (`chunked_prefill`, default the
        engine's) the token budget holds the longest prompt and a full batch. SpecError where the benchmark refuses
        the model (weights beyond the devices' memory, less than one request's KV)."""
        rule = self.engine.bench_batch
        if not self.bench_knobs or rule is None or not prompts:
            return self
        seqs, tokens = self.max_num_seqs, self.max_num_batched_tokens
        weight_bytes = dict(rule.formats).get(self.weights.name)
        if weight_bytes is not None:
            m, wf = self.model, self.weights
            a = m.primary_attention
            outside = m.embedding_params + m.lm_head_params  # 16-bit in a GPU checkpoint
            packed = wf.bits_per_weight / 8 if wf.bits_per_weight < 8 else 1.0  # uint8 elements of a sub-byte format
            stage = self.tp * self.dp
            kv_bytes = 1.0 if wf.name in rule.fp8_kv_with else dict(rule.kv_bytes).get(self.kv.name, 2.0)
            seqs, tokens = rule.knobs(
                elements=(m.total_params - outside) * packed + outside, weight_bytes=weight_bytes,
                layers=m.num_layers, kv_heads=max(stage, a.num_kv_heads),
                head_size=m.hidden_size // a.num_heads if a.mla is not None else a.head_dim, kv_bytes=kv_bytes,
                gpus=stage * self.pp, pp=self.pp, memory_gib=self.hardware.memory_gib,
                isl=int(sum(prompts) / len(prompts)), osl=max(1, int(sum(outputs) / len(outputs))),
                fraction=self.gpu_memory_utilization if rule.runtime_fraction else None)
        if "max_num_seqs" not in self.bench_knobs:  # the user's
            seqs = self.max_num_seqs
        if "max_num_batched_tokens" not in self.bench_knobs:
            return replace(self, max_num_seqs=seqs)
        chunked = self.enable_chunked_prefill if chunked_prefill is None else chunked_prefill
        if not chunked:
            tokens = max(tokens, max(prompts) + seqs)
        return replace(self, max_num_seqs=seqs, max_num_batched_tokens=tokens)

    def engine_defaults(self, engine: EngineProfile | None = None) -> EngineKnobs:
        """What `engine` (default: the deployment's own) picks by itself for this device, model context,
        parallelism and proposer (`EngineProfile.default_knobs`)."""
        eng, hw = engine or self.engine, self.hardware
        return eng.default_knobs(hw_id=hw.device_text, memory_gib=hw.memory_gib, kind=hw.kind,
                                 context_len=self.context_len, tp=self.tp, pp=self.pp, dp=self.dp,
                                 speculative=self.speculative.method if self.speculative is not None else None,
                                 linear_state=has_linear_state(self.model), spans_hosts=self.spans_hosts,
                                 features=chunked_features(self.model, hw))

    @property
    def context_len(self) -> int | None:
        """The context the server is started for: `max_model_len`, else the model's own (None where unknown)."""
        return served_context(self.model, self.max_model_len)

    @property
    def gpus_per_node(self) -> int:
        """GPUs of one replica in each of its nodes."""
        return self.gpus_per_replica // self.nodes

    def per_node_of(self, group: int) -> int | None:
        """GPUs of a group of `group` GPUs (TP ranks innermost, as the engines number them) in each node where
        the group spans nodes, else None: its collectives then cross the network (`cost.parallel`). A node is
        one peer-fabric domain (`HardwareSpec.gpus_per_node`): GB200 NVL72's 72 GPUs are one, whatever hosts
        hold them."""
        return self.gpus_per_node if group > self.gpus_per_node else None

    @property
    def spans_nodes(self) -> bool:
        """Whether a tensor or pipeline group of the replica spans nodes (`group_spans_nodes`)."""
        return group_spans_nodes(self.nodes, self.dp)

    @property
    def hosts(self) -> int:
        """Machines (operating systems) the replica's processes run on (`replica_hosts`)."""
        return replica_hosts(self.hardware, self.nodes, self.gpus_per_replica)

    @property
    def gpus_per_host(self) -> int:
        """GPUs of one replica on each of its hosts."""
        return self.gpus_per_replica // self.hosts

    @property
    def spans_hosts(self) -> bool:
        """Whether a tensor or pipeline group of the replica spans hosts, so its processes are started on several
        machines (`group_spans_nodes` over hosts): the engine's launch then runs it on a multi-machine executor (vLLM's
        Ray), which its host costs follow (`HostCosts.syncs`); the collectives' pricing asks `spans_nodes`."""
        return group_spans_nodes(self.hosts, self.dp)


def device_refusal(engine: EngineProfile, hardware: HardwareSpec) -> str | None:
    """Why `engine` cannot run on `hardware` at all (no backend for its vendor and kind), or None."""
    if engine.runs_on(hardware.vendor, hardware.kind):
        return None
    return (f"{engine.display} has no backend for {hardware.name} ({hardware.vendor} {hardware.kind}); it runs on "
            f"{', '.join(d.replace('*:', 'any ').replace(':', ' ') for d in engine.devices)}")


def replica_hosts(hardware: HardwareSpec, nodes: int, gpus: int) -> int:
    """Machines (operating systems) a replica of `gpus` GPUs over `nodes` nodes runs on, one launch command each: its
    nodes, or more where the catalog says a node's fabric spans hosts (`HardwareSpec.gpus_per_host`: TP 16 on GB200
    is one NVLink node of 4 hosts; a PCIe box of 4 cards is one host)."""
    per = hardware.gpus_per_host
    return nodes * max(1, -(-(gpus // nodes) // per)) if per else nodes


def group_spans_nodes(nodes: int, dp: int) -> bool:
    """Whether a replica over `nodes` nodes with `dp` data-parallel attention ranks has a tensor or pipeline group
    that spans nodes: unless each node holds whole DP ranks (dp a multiple of nodes), one group crosses a node
    boundary (the launch then runs it on a Ray cluster, `launch/vllm.py`)."""
    return nodes > 1 and dp % nodes != 0


# `HardwareSpec.interconnect` of a chip that is the only device of its machine (an SoC's unified memory, a CPU
# socket): no second one to split a model across within the machine
SINGLE_DEVICE_LINKS = ("unified", "none")

MOE_BACKENDS = ("auto", "trtllm")  # the engine's default MoE kernels; TensorRT-LLM's fused trtllm-gen ones
# the expert formats the trtllm-gen MoE kernels run (others fall back to CUTLASS; SGLang's flashinfer_trtllm runner
# takes --quantization fp8 or modelopt_fp4 only): what `plan --moe-backend trtllm` tries
TRTLLM_MOE_FORMATS = ("fp8", "fp8-block", "nvfp4", "nvfp4-mlp")


def _attention_backend_vendor(name: str) -> str | None:
    """The vendor whose GPUs alone run a named attention backend: FlashInfer's kernels (SGLang's flashinfer, vLLM's
    FLASHINFER / FLASHINFER_MLA) are CUDA-only, AITER's and the ROCm backends (aiter, wave, ROCM_*) AMD's; None for
    a backend with builds for several (Triton, FlashAttention) or none named."""
    low = name.lower()
    if low.startswith("flashinfer"):
        return "nvidia"
    if low.startswith("rocm") or low in ("aiter", "wave"):
        return "amd"
    return None


def check_moe_backend(moe_backend: str | None, hardware: HardwareSpec | None) -> bool:
    """Whether `moe_backend` asks for TensorRT-LLM's fused trtllm-gen MoE kernels (`KernelFactors.trtllm_moe`); a
    SpecError for a name not in MOE_BACKENDS, or for trtllm on a chip without those kernels (None: the name only)."""
    if moe_backend is not None and moe_backend not in MOE_BACKENDS:
        raise SpecError(f"moe_backend must be {' or '.join(MOE_BACKENDS)}, got {moe_backend!r}")
    if moe_backend != "trtllm" or hardware is None:
        return moe_backend == "trtllm"
    if not hardware.has_trtllm_gen:
        raise SpecError(f"--moe-backend trtllm runs TensorRT-LLM's trtllm-gen kernels, built for datacenter "
                        f"Blackwell (B200, GB200, B300); {hardware.name} has no such kernels: use auto")
    return True


def check_cuda_graph_max_bs(value: object) -> int:
    """`value` as the largest CUDA-graph decode batch (0: no cap); a SpecError unless a whole number >= 0."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise SpecError(f"cuda_graph_max_bs must be a whole number >= 0, got {value!r}")
    return value


def check_pdl(engine: EngineProfile, hardware: HardwareSpec | None) -> None:
    """A SpecError where programmatic dependent launch cannot be priced: an engine with no such switch
    (`KernelFactors.pdl_kernel_overhead_scale` 1), or a chip that cannot launch so (`HardwareSpec.has_pdl`; None:
    the engine only)."""
    if not engine.kernels.has_pdl_switch:
        raise SpecError(f"--pdl turns on TensorRT-LLM's programmatic dependent launch (TRTLLM_ENABLE_PDL=1); "
                        f"{engine.display} {engine.version} has no such switch: drop --pdl or use --engine trtllm")
    if hardware is not None and not hardware.has_pdl:
        raise SpecError(f"--pdl needs programmatic dependent launch, NVIDIA SM 9.0 and newer (Hopper, Blackwell); "
                        f"{hardware.name} has none: drop --pdl")


def make_deployment(model: ModelSpec, hardware: HardwareSpec, *, weights: str | None = None,
                    kv: str | None = None, tp: int = 1, pp: int = 1, dp: int = 1, ep: int = 1,
                    nodes: int | None = None,
                    expert_skew: float | None = None, two_batch_overlap: bool = False,
                    num_gpus: int | None = None,
                    replicas: int | None = None, replicas_per_server: int = 1,
                    speculative: SpeculativeSpec | None = None, engine: EngineProfile | None = None,
                    max_num_seqs: int | None = None,
                    max_num_batched_tokens: int | None = None, block_size: int | None = None,
                    gpu_memory_utilization: float | None = None, cuda_graph_max_bs: int | None = None,
                    async_scheduling: bool | None = None, moe_backend: str | None = None,
                    pdl: bool = False, api_servers: int | None = None,
                    stream_interval: int | None = None, max_model_len: int | None = None) -> Deployment:
    """Build a Deployment from names. `nodes` None: the servers one replica's GPUs fill (`HardwareSpec.servers_for`:
    TP 16 on H100 SXM is 2). `num_gpus` (if given) must be a multiple of tp*pp; the quotient is
    the number of replicas (`replicas_per_server` of them data-parallel engines behind one server). Weight format
    defaults to the checkpoint's own (`precision.default_weights`: its
    quantization_config, else bf16, fp16 on chips without bf16), as the engine's file holds it
    (`EngineProfile.file_format`: llama.cpp's GGUF of gpt-oss); KV follows the 16-bit activation dtype unless
    given. `speculative`: speculative decoding (None: plain decoding). `expert_skew` None: the measured
    imbalance of the model's router without a load balancer (`expert_load.default_expert_skew`).
    `engine`: the serving engine (None: the default vLLM); knobs left None take the engine's defaults for
    this device, model context and parallelism (`EngineProfile.default_knobs`); `cuda_graph_max_bs` replaces the
    engine's largest CUDA-graph decode batch for the device (0: graphs for every batch); `async_scheduling` whether
    the engine core prepares each step while the device runs the one before (vLLM --async-scheduling, SGLang's
    overlap scheduler; None: the engine's default for the version and device); `moe_backend` "trtllm": the MoE
    layers run TensorRT-LLM's fused trtllm-gen kernels (`KernelFactors.trtllm_moe`; None or "auto": the engine's
    default MoE kernels); `pdl`: kernels launch with programmatic dependent launch (TensorRT-LLM's
    TRTLLM_ENABLE_PDL=1: `KernelFactors.pdl_kernel_overhead_scale`; refused by `check_pdl` where not priced);
    `api_servers`: the server's API processes in all (`EngineProfile.with_api_servers`; None: the engine's default);
    `stream_interval`: output tokens per streamed event after the first (`EngineProfile.with_stream_interval`;
    None: the engine's 1); `max_model_len`: the context the server is started for (vLLM --max-model-len), which
    some engine defaults follow (None: the model's whole context)."""
    _check_max_model_len(max_model_len)
    for name, v in (("tp", tp), ("pp", pp), ("dp", dp), ("ep", ep), ("nodes", 1 if nodes is None else nodes)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise SpecError(f"{name} must be a positive integer, got {v!r}")
    # a fallback engine (vLLM 0.8-0.10's V0) is this deployment's to decide: re-checked from the release's default
    eng = engine.release_default() if engine is not None else get_engine()
    wf = weight_format(weights or eng.file_format(default_weights(model, hardware)))
    kf = kv_format(kv or ("fp32" if wf.name == "fp32" else default16(hardware)))
    if default16(hardware) == "fp16" and hardware.kind == "gpu" and not eng.gguf_only:
        # a chip without bf16 (V100, T4, Turing) runs the 16-bit formats in fp16, as the engines do (they refuse
        # --dtype bfloat16 there): bf16 asked for is served, priced and launched as fp16
        wf = weight_format("fp16") if wf.name == "bf16" else wf
        kf = kv_format("fp16") if kf.name == "bf16" else kf
    method = speculative.method if speculative is not None else None
    if (why := v1_refusal(eng, hardware, kf, method)) is not None:
        eng = eng.fall_back(why)
    if method is not None and (why := eng.speculative_refusal(method)) is not None:
        raise SpecError(why)
    if api_servers is not None:
        eng = eng.with_api_servers(api_servers)
    if stream_interval is not None:
        eng = eng.with_stream_interval(stream_interval)
    group = tp * dp * pp
    nodes = hardware.servers_for(group) if nodes is None else nodes  # None: the servers the replica fills
    if num_gpus is not None and replicas is not None and num_gpus != group * replicas:
        raise SpecError(f"num_gpus={num_gpus} disagrees with tp*dp*pp*replicas={group * replicas}")
    if replicas is None:
        if num_gpus is None:
            replicas = 1
        elif num_gpus < group or num_gpus % group:
            raise SpecError(f"num_gpus={num_gpus} must be a positive multiple of tp*dp*pp={group}")
        else:
            replicas = num_gpus // group
    if kf.bytes_per_element > 2 and wf.name != "fp32":
        raise PrecisionError(f"KV format {kf.name} is wider than the {wf.name} activations; use bf16 or fp16")
    eng.check_parallelism(tp=tp, pp=pp, dp=dp, ep=ep)
    if two_batch_overlap and not any(lay.mlp.is_moe for lay in model.layers):
        raise SpecError(f"two-batch overlap hides MoE all-to-alls behind compute; {model.name} has no MoE layers")
    for name, given in (("two_batch_overlap", two_batch_overlap),
                        ("expert_skew", expert_skew is not None and expert_skew != 1.0)):
        if given and ep == 1:
            raise SpecError(f"{name} applies with expert parallelism (ep > 1): with ep=1 no GPU holds experts of its "
                            "own, so it would change nothing; add --ep or drop it")
    if (why := device_refusal(eng, hardware)) is not None:
        raise SpecError(f"{why}. Pick another --engine (llamacpp runs everywhere) or --gpu")
    if (why := weights_refusal(eng, hardware, model, wf)) is not None:
        raise PrecisionError(why)
    told = eng.kernels.attention_backend
    if (vendor := _attention_backend_vendor(told)) and vendor != hardware.vendor:
        raise SpecError(f"the {told} attention backend runs on {vendor.upper() if vendor == 'amd' else 'NVIDIA'} "
                        f"GPUs only; {hardware.name} is not one: drop --attention-backend or pick another --gpu")
    if check_moe_backend(moe_backend, hardware):
        if model.moe is None:
            raise SpecError(f"--moe-backend trtllm picks the kernels of MoE layers; {model.name} has none")
        eng = replace(eng, kernels=replace(eng.kernels, trtllm_moe=True))
    if not isinstance(pdl, bool):
        raise SpecError(f"pdl must be true or false, got {pdl!r}")
    if pdl or eng.kernels.pdl:  # asked here, or carried by a profile built for another chip or from a file
        check_pdl(eng, hardware)
        eng = replace(eng, kernels=replace(eng.kernels, pdl=True))
    d = eng.default_knobs(hw_id=hardware.device_text, memory_gib=hardware.memory_gib, kind=hardware.kind,
                          context_len=served_context(model, max_model_len),
                          tp=tp, pp=pp, dp=dp, speculative=method, linear_state=has_linear_state(model),
                          spans_hosts=group_spans_nodes(replica_hosts(hardware, nodes, tp * dp * pp), dp),
                          features=chunked_features(model, hardware))
    if cuda_graph_max_bs is not None:
        d = replace(d, cuda_graph_max_bs=check_cuda_graph_max_bs(cuda_graph_max_bs))
    if async_scheduling is not None:
        if not isinstance(async_scheduling, bool):
            raise SpecError(f"async_scheduling must be true or false, got {async_scheduling!r}")
        d = replace(d, async_scheduling=async_scheduling, synced=False)
    return Deployment(model=model, hardware=hardware, weights=wf, kv=kf,
                      engine=eng.on_device(d, hardware.vendor, hardware.kind), tp=tp, pp=pp,
                      replicas=replicas, replicas_per_server=replicas_per_server, dp=dp, ep=ep, nodes=nodes,
                      expert_skew=default_expert_skew(model, ep) if expert_skew is None else expert_skew,
                      two_batch_overlap=two_batch_overlap,
                      speculative=speculative,
                      max_num_seqs=default_seqs(eng, d.max_num_seqs, max_num_batched_tokens) if max_num_seqs is None
                      else max_num_seqs,
                      max_num_batched_tokens=d.max_num_batched_tokens if max_num_batched_tokens is None
                      else max_num_batched_tokens, enable_chunked_prefill=d.enable_chunked_prefill,
                      bench_knobs=tuple(k for k, v in (("max_num_seqs", max_num_seqs),
                                                       ("max_num_batched_tokens", max_num_batched_tokens))
                                        if v is None and eng.is_offline and eng.bench_batch is not None),
                      block_size=d.block_size if block_size is None else block_size,
                      gpu_memory_utilization=d.memory_fraction if gpu_memory_utilization is None
                      else gpu_memory_utilization, max_model_len=max_model_len)


def served_context(model: ModelSpec, max_model_len: int | None) -> int | None:
    """The context a server of `model` is started for: `max_model_len`, else the model's own (None where unknown)."""
    return model.max_position_embeddings if max_model_len is None else max_model_len


def _check_max_model_len(v: object) -> None:
    if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 1):
        raise SpecError(f"max_model_len must be a positive integer, got {v!r}")


def has_linear_state(model: ModelSpec) -> bool:
    """Whether the model has linear-state layers (Mamba, gated delta net: `HostCosts.sync_with` "linear_state")."""
    return any(lay.attention.kind == "linear" for lay in model.layers)


def chunked_features(model: ModelSpec, hardware: HardwareSpec) -> frozenset[str]:
    """The deployment's `CHUNKED_FEATURES` (what keeps an engine's long-context chunked prefill off) of the model
    and chip: sliding-window layers, encoders, MLA, an AMD GPU, a device that is not a GPU."""
    return frozenset(name for name, has in (
        ("sliding_window", any(lay.attention.kind == "sliding" for lay in model.layers)),
        ("multimodal", bool(model.encoders)), ("mla", model.mla is not None),
        ("rocm", hardware.vendor == "amd" and hardware.kind == "gpu"), ("cpu", hardware.kind != "gpu")) if has)


def v1_refusal(engine: EngineProfile, hardware: HardwareSpec, kv: KVFormat,
               speculative: str | None = None) -> str | None:
    """Why vLLM 0.8-0.10's V1 engine does not take a deployment on `hardware` with a `kv` cache and a `speculative`
    proposer (its method; None: none), so that the release runs it on V0 (`EngineArgs._is_v1_supported_oracle`;
    `EngineProfile.fall_back`); None where V1 takes it or the engine has no fallback. A draft model (V1 ran n-gram
    and the EAGLE family's heads only; from 0.11 V1 refuses it, until 0.15); on NVIDIA GPUs (the ROCm checks
    differ) compute capability below 8.0 (no bf16 tensor cores: V100, T4, Turing), and an FP8 KV cache outside
    FlashAttention 3 on SM 9.0 and SM 10.0 (`CudaPlatform.is_kv_cache_dtype_supported`; those are the HBM parts
    with programmatic dependent launch)."""
    if engine.family != "vllm" or not engine.fallback:
        return None
    if speculative == "draft":
        return "V1 runs no draft-model speculative decoding"
    if hardware.vendor != "nvidia" or hardware.kind != "gpu":
        return None
    if not hardware.peak_tflops.get("bf16"):
        return f"V1 needs compute capability 8.0 or newer, {hardware.name} is older"
    if kv.name == "fp8" and not (hardware.memory_kind == "hbm" and hardware.has_pdl):
        return (f"V1 reads an FP8 KV cache on SM 9.0 (FlashAttention 3) and SM 10.0 only, not on "
                f"{hardware.name}")
    return None


def weights_refusal(engine: EngineProfile, hardware: HardwareSpec, model: ModelSpec, wf: WeightFormat) -> str | None:
    """Why `engine` cannot serve `model` in `wf` on `hardware` (None: it can): an experts-only format on a model
    without routed experts; a format other than a GGUF type where the engine loads GGUF files only; fp8 / fp4
    weights on a chip without that math or a weight-only kernel that widens them to 16 bits."""
    if wf.experts_only and model.moe is None:
        return f"{wf.name} quantizes routed experts only ({wf.description}); {model.name} has none: use another format"
    if wf.gguf_type is not None and not engine.loads_gguf:
        loaders = " or ".join(f for f in engine_families() if get_engine(f, frontend="none").loads_gguf)
        return (f"{engine.display} {engine.version} does not load GGUF files ({wf.name} is llama.cpp's "
                f"{wf.gguf_type}): serve it with {loaders}, or give this engine a format it loads (bf16, fp8, "
                "int4-awq, ...)")
    if wf.gguf_type in engine.gguf_lacks:
        return (f"{engine.display} {engine.version}'s GGUF kernels have no {wf.gguf_type}: serve {wf.name} with "
                "llamacpp, or give this engine another GGUF type (q4_k_m, q8_0, ...)")
    if engine.gguf_only and wf.bits_per_weight < 16 and not engine.kernels.quantized_path(wf):
        return (f"{engine.display} loads GGUF files; {wf.name} is not a GGUF type: use {', '.join(GGUF_STEPS)} or "
                "another GGUF type (q6_k, q5_k_m, q4_0, ...), or bf16 / fp16")
    if wf.compute in ("fp8", "fp4") and not engine.kernels.quantized_path(wf) \
            and not (hardware.peak_tflops.get(wf.compute, 0) > 0 or hardware.peak_tflops.get("bf16", 0) > 0):
        return (f"{wf.name} weights need {wf.compute} math or a weight-only kernel (Marlin, SM 8.0 and newer); "
                f"{hardware.name} has neither: use fp16, int8 or int4 weights")
    return None


def default_seqs(engine: EngineProfile, default: int, budget: int | None) -> int:
    """The engine's default max_num_seqs; vLLM lowers a defaulted one to a token budget the user set below it
    (EngineArgs._set_default_args: max_num_seqs = min(max_num_seqs, max_num_batched_tokens))."""
    if engine.family == "vllm" and isinstance(budget, int) and not isinstance(budget, bool) and 0 < budget < default:
        return budget
    return default


def weights_note(dep: Deployment) -> str:
    """A note where the deployment's weight format is not the checkpoint's own ('' where it is, or where the
    checkpoint is 16-bit)."""
    ckpt = dep.model.checkpoint_weights
    if ckpt is None or ckpt == dep.weights.name:
        return ""
    if dep.engine.file_format(ckpt) == dep.weights.name:
        return (f"{dep.model.name}'s checkpoint ships {ckpt} weights; {dep.engine.display} serves it from its own "
                f"file, priced as {dep.weights.name} ({dep.weights.description})")
    return (f"{dep.model.name}'s checkpoint ships {ckpt} weights ({dep.model.checkpoint_note}); priced as "
            f"{dep.weights.name} as asked (--weights), which needs a checkpoint in that format")
