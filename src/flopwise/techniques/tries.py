"""The `--try` grammar of `flopwise compare`: one technique, or several joined by '+'.

    weights=int8 | weights=int4-awq | kv=fp8                 quantization (formats as in `flopwise estimate`)
    spec=draft:llama-3.2-1b,k=4,alpha=0.7                    speculative decoding with a draft model
    spec=eagle,k=4,accepted=3.2                              EAGLE / mtp / medusa heads; accepted = mean tokens/step
    spec=ngram,k=4,alpha=0.5[,tree=26]                       prompt lookup; tree = positions verified per step
    prefix-cache=0.5                                         share of each prompt found in the prefix cache
    chunked-prefill=512                                      per-step token budget (vLLM --max-num-batched-tokens)
    cuda-graphs=off                                          no CUDA graphs (vLLM --enforce-eager, SGLang
                                                             --disable-cuda-graph): every step pays its launches
    tp=2 | gpu=h200                                          parallelism and hardware
    kv-heads=1 | window=4096 | attention=mla                 KV-structure what-ifs (need a retrained model)
    weights=int8+kv=fp8                                      a combination, applied left to right

Each parsed item is a `Technique`: a transform of a Scenario with its accuracy risk and complexity.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from flopwise.errors import FlopwiseError, SpecError
from flopwise.specs.hardware import get_hardware
from flopwise.specs.speculative import parse_speculative
from flopwise.techniques import batching, kv_structure, parallelism, prefix_cache, quantization, speculative
from flopwise.techniques.rating import Rating, worst
from flopwise.techniques.scenario import Scenario

__all__ = ["Technique", "Trial", "parse_try", "EXAMPLES"]

EXAMPLES = "'weights=int8', 'kv=fp8', 'spec=draft:llama-3.2-1b,k=4,alpha=0.7', 'prefix-cache=0.5', 'tp=2'"
KEYS = ("weights", "kv", "spec", "prefix-cache", "chunked-prefill", "cuda-graphs", "tp", "gpu", "kv-heads", "window",
        "attention")

_NO_RISK = Rating("none", "exact: the same outputs up to floating-point order")
_RETRAIN = Rating("high", "a different attention structure than the model was trained with: needs uptraining or "
                  "conversion and fine-tuning", "Ainslie et al. 2023 (GQA); Ji et al. 2025 (MHA2MLA); "
                  "Xiao et al. 2024 (StreamingLLM)")
_RETRAIN_CX = Rating("high", "retrain or convert the model, then re-evaluate it")
_WEIGHT_CX = {
    "low": Rating("low", "load a pre-quantized checkpoint (or quantize on load); one engine flag"),
    "medium": Rating("medium", "calibrate and quantize (or find a trusted checkpoint); kernel support varies by "
                     "GPU and engine"),
}
_SPEC_CX = {
    "draft": Rating("medium", "a draft model sharing the tokenizer, tuning k, extra memory on every GPU"),
    "eagle": Rating("medium", "heads trained for this exact model (EAGLE checkpoints); engine support"),
    "eagle3": Rating("medium", "EAGLE-3 heads trained for this exact model; vLLM >= 0.9, SGLang, TensorRT-LLM"),
    "mtp": Rating("medium", "needs a model trained with multi-token-prediction modules (DeepSeek-V3 style)"),
    "medusa": Rating("medium", "heads trained for this exact model (Medusa checkpoints); tree-attention support"),
    "ngram": Rating("low", "one engine flag; pays only when outputs copy the prompt (code edits, RAG, summaries)"),
}
_SPEC_RISK = Rating("none", "lossless: rejection sampling keeps the target's output distribution",
                    "Leviathan et al. 2023; Chen et al. 2023")


@dataclass(frozen=True, slots=True, kw_only=True)
class Technique:
    label: str
    apply: Callable[[Scenario], Scenario]
    accuracy_risk: Rating
    complexity: Rating


@dataclass(frozen=True, slots=True)
class Trial:
    """One `--try` string: its techniques, applied left to right."""

    text: str
    techniques: tuple[Technique, ...]

    def apply(self, scn: Scenario) -> Scenario:
        """The transformed scenario; a transform the deployment refuses (tp=3 on 32 heads) names this --try."""
        try:
            for t in self.techniques:
                scn = t.apply(scn)
        except FlopwiseError as e:
            raise type(e)(f"--try '{self.text}': {e}") from None
        return scn

    @property
    def accuracy_risk(self) -> Rating:
        return worst([t.accuracy_risk for t in self.techniques])

    @property
    def complexity(self) -> Rating:
        return worst([t.complexity for t in self.techniques])


def _int(key: str, v: str) -> int:
    try:
        n = int(v)
    except ValueError:
        raise SpecError(f"{key} needs a whole number, got '{v}'") from None
    if n < 1:
        raise SpecError(f"{key} must be >= 1, got {n}")
    return n


def _float(key: str, v: str, lo: float, hi: float) -> float:
    try:
        x = float(v)
    except ValueError:
        raise SpecError(f"{key} needs a number, got '{v}'") from None
    if not lo <= x <= hi:
        raise SpecError(f"{key} must be in [{lo:g}, {hi:g}], got {x:g}")
    return x


def _technique(key: str, value: str, hardware_file: str | Path | None) -> Technique:
    if key == "weights":
        fmt = quantization.weight_format_name(value)
        risk = quantization.weight_risk(fmt)
        cx = _WEIGHT_CX["low" if risk.rank <= 1 or fmt.startswith("q") else "medium"]
        return Technique(label=f"weights={fmt}", apply=partial(quantization.quantize, weights=fmt), accuracy_risk=risk,
                         complexity=cx)
    if key == "kv":
        fmt = quantization.kv_format_name(value)
        cx = Rating("low", "one engine flag (vLLM --kv-cache-dtype fp8)") if fmt == "fp8" else Rating(
            "medium", "engine support varies (LMDeploy, TensorRT-LLM)")
        return Technique(label=f"kv={fmt}", apply=partial(quantization.quantize, kv=fmt),
                         accuracy_risk=quantization.kv_risk(fmt), complexity=cx)
    if key == "spec":
        spec = parse_speculative(value)
        if spec is None:
            return Technique(label="spec=none", apply=partial(speculative.with_speculation, spec=None),
                             accuracy_risk=_NO_RISK, complexity=Rating("none", "plain decoding"))
        return Technique(label=spec.label(), apply=partial(speculative.with_speculation, spec=spec),
                         accuracy_risk=_SPEC_RISK, complexity=_SPEC_CX[spec.method])
    if key == "prefix-cache":
        hit = _float("prefix-cache", value, 0.0, 1.0)
        return Technique(label=f"prefix-cache={hit:g}", apply=partial(prefix_cache.with_prefix_cache, hit=hit),
                         accuracy_risk=_NO_RISK, complexity=Rating("low", "on by default in vLLM v1 / SGLang; pays "
                                                                   "only if prompts share prefixes"))
    if key == "chunked-prefill":
        n = _int("chunked-prefill", value)
        return Technique(label=f"chunked-prefill={n}", apply=partial(batching.with_chunked_prefill, chunk=n),
                         accuracy_risk=_NO_RISK, complexity=Rating("low", "one engine knob (--max-num-batched-tokens)"))
    if key == "cuda-graphs":
        if value.lower() != "off":
            raise SpecError(f"cuda-graphs={value}: the baseline already runs with the engine's CUDA graphs; only "
                            "cuda-graphs=off is a try")
        return Technique(label="cuda-graphs=off", apply=batching.without_cuda_graphs, accuracy_risk=_NO_RISK,
                         complexity=Rating("low", "one engine flag (vLLM --enforce-eager, SGLang --disable-cuda-graph);"
                                           " saves the start-up capture time; the memory graphs hold is not "
                                           "modelled, so the KV pool is the same"))
    if key == "tp":
        n = _int("tp", value)
        return Technique(label=f"tp={n}", apply=partial(parallelism.with_tp, tp=n), accuracy_risk=_NO_RISK,
                         complexity=Rating("medium", f"{n} GPUs per replica with a fast interconnect"))
    if key == "gpu":
        hw = get_hardware(value, hardware_file)
        return Technique(label=f"gpu={hw.id}", apply=partial(parallelism.with_gpu, gpu=hw), accuracy_risk=_NO_RISK,
                         complexity=Rating("low", "a different instance type; same software"))
    if key == "kv-heads":
        n = _int("kv-heads", value)
        return Technique(label=f"kv-heads={n}", apply=partial(kv_structure.with_kv_heads, n=n), accuracy_risk=_RETRAIN,
                         complexity=_RETRAIN_CX)
    if key == "window":
        n = _int("window", value)
        return Technique(label=f"window={n}", apply=partial(kv_structure.with_window, window=n), accuracy_risk=_RETRAIN,
                         complexity=_RETRAIN_CX)
    if key == "attention":
        if value.lower() != "mla":
            raise SpecError(f"attention={value}: only attention=mla is a what-if (use kv-heads=N for GQA/MQA)")
        return Technique(label="attention=mla", apply=kv_structure.with_mla, accuracy_risk=_RETRAIN,
                         complexity=_RETRAIN_CX)
    raise SpecError(f"unknown technique '{key}'; use one of {', '.join(KEYS)}")


def parse_try(text: str, hardware_file: str | Path | None = None) -> Trial:
    """Parse one --try string; any error names the string and shows examples, on one line."""
    parts = [p.strip() for p in text.split("+")]
    try:
        if not text.strip() or not all(parts):
            raise SpecError("empty technique")
        techniques = []
        seen: set[str] = set()
        for p in parts:
            key, eq, value = p.partition("=")
            if not eq or not value.strip():
                raise SpecError(f"'{p}' is not key=value")
            if (key := key.strip().lower()) in seen:  # the last would win silently under the first's label
                raise SpecError(f"{key} is given twice; one value per technique in a combination")
            seen.add(key)
            techniques.append(_technique(key, value.strip(), hardware_file))
    except FlopwiseError as e:
        msg = str(e)
        sep = " " if msg.endswith((".", "?")) else ". "
        raise type(e)(f"cannot read --try '{text}': {msg}{sep}Write e.g. {EXAMPLES}; join several with '+'") from None
    return Trial(text, tuple(techniques))
