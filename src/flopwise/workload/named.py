"""Built-in workloads: length distributions, shared-prefix ratios and a default arrival process.

Lengths are lognormal (median, sigma) unless stated, clipped to the given maximum. Sources and assumptions:
- chat: Azure LLM inference "conversation" trace (Splitwise, Patel et al., ISCA 2024): median prompt ~1020,
  median output ~129 tokens. 25% of the mean prompt is one of 16 system prompts (assumption).
- code: the same paper's "coding" trace: median prompt ~1500, median output ~13 tokens (completions are short).
  10% shared among 4 templates (assumption).
- rag: retrieved passages plus a question: prompt ~3500 (5 passages of ~600 tokens + instructions),
  answers ~200 (assumption, typical of LlamaIndex/LangChain defaults); a 10% instruction template, 4 variants.
- summarize: long documents (~6000 tokens, arXiv/CNN-DM-style), summaries ~300; one 2% instruction prefix.
- batch: offline jobs, normal(1024, 256) in and normal(256, 64) out (clipped at 4 sigma: 2048 and 512, so that
  a server's --max-model-len can be set), no shared prefix, all sent at once.
- sharegpt: `vllm bench serve --dataset-name sharegpt` (and SGLang's bench_serving, which filters the same way):
  the (prompt, output) lengths of 16,384 requests as vLLM draws them at --seed 0 with a Llama-3.1 tokenizer
  (`catalog/workloads/sharegpt.csv`, its header gives the source): mean 220 in / 199 out, medians 103 / 135,
  prompts at most 1024 and requests 2048 tokens, long prompts with short answers; no shared prefix, all at once
  unless a rate is given (as that client's default --request-rate inf).
Every length is clipped to a cap (`max_len`): a server launched for the workload sets its context to the sum.
Real traffic differs: pass a trace (--trace) or explicit --input-len / --output-len to override.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from flopwise.workload.arrivals import ArrivalProcess
from flopwise.workload.lengths import LengthDist, LengthPairs

__all__ = ["NamedWorkload", "NAMED_WORKLOADS"]


@dataclass(frozen=True, slots=True, kw_only=True)
class NamedWorkload:
    """`prefix_ratio` of the mean prompt is shared within one of `num_prefixes` groups (uniformly chosen).
    With `pairs`, prompt and output lengths are drawn together from its table and `input_len` / `output_len`
    are its columns' ranges (what a server's context must hold); an explicit --input-len or --output-len
    replaces that side alone."""

    name: str
    input_len: LengthDist
    output_len: LengthDist
    prefix_ratio: float
    num_prefixes: int
    arrivals: ArrivalProcess
    description: str
    pairs: LengthPairs | None = None

    @property
    def mean_input(self) -> float:
        """Mean prompt length (tokens): its pairs table's where it has one."""
        return float(self.pairs.rows()[:, 0].mean()) if self.pairs is not None else self.input_len.mean

    @property
    def mean_output(self) -> float:
        """Mean output length (tokens): its pairs table's where it has one."""
        return float(self.pairs.rows()[:, 1].mean()) if self.pairs is not None else self.output_len.mean

    @property
    def prefix_tokens(self) -> int:
        return round(self.prefix_ratio * self.mean_input)


# vLLM's and SGLang's sharegpt filter: a prompt of at most 1024 tokens, a request of at most 2048
# (benchmark_serving.py sample_sharegpt_requests; the table's header)
_SHAREGPT_PROMPT, _SHAREGPT_TOTAL = 1024, 2048


def _logn(median: float, sigma: float, cap: int) -> LengthDist:
    return LengthDist(kind="lognormal", a=median, b=sigma, max_len=cap)


NAMED_WORKLOADS: dict[str, NamedWorkload] = {w.name: w for w in (
    NamedWorkload(name="chat", input_len=_logn(1020, 1.0, 8192), output_len=_logn(129, 0.9, 2048),
                  prefix_ratio=0.25, num_prefixes=16, arrivals=ArrivalProcess(kind="poisson", rate=1.0),
                  description="conversations (Azure/Splitwise conversation trace medians), 16 system prompts"),
    NamedWorkload(name="code", input_len=_logn(1500, 0.8, 8192), output_len=_logn(13, 1.0, 1024),
                  prefix_ratio=0.10, num_prefixes=4, arrivals=ArrivalProcess(kind="poisson", rate=1.0),
                  description="code completion (Azure/Splitwise coding trace medians): long context, short output"),
    NamedWorkload(name="rag", input_len=_logn(3500, 0.4, 16384), output_len=_logn(200, 0.6, 1024),
                  prefix_ratio=0.10, num_prefixes=4, arrivals=ArrivalProcess(kind="poisson", rate=1.0),
                  description="retrieval-augmented QA: 5 passages + question in, a short answer out"),
    NamedWorkload(name="summarize", input_len=_logn(6000, 0.5, 32768), output_len=_logn(300, 0.4, 1024),
                  prefix_ratio=0.02, num_prefixes=1, arrivals=ArrivalProcess(kind="poisson", rate=1.0),
                  description="long document in, summary out"),
    NamedWorkload(name="batch", input_len=LengthDist(kind="normal", a=1024, b=256, max_len=2048),
                  output_len=LengthDist(kind="normal", a=256, b=64, max_len=512), prefix_ratio=0.0, num_prefixes=1,
                  arrivals=ArrivalProcess(kind="poisson", rate=math.inf),
                  description="offline batch job, all requests at once"),
    NamedWorkload(name="sharegpt", input_len=LengthDist(kind="uniform", a=4, b=_SHAREGPT_PROMPT),
                  output_len=LengthDist(kind="uniform", a=4, b=_SHAREGPT_TOTAL - 4), prefix_ratio=0.0, num_prefixes=1,
                  arrivals=ArrivalProcess(kind="poisson", rate=math.inf),
                  pairs=LengthPairs(table="sharegpt", max_input=_SHAREGPT_PROMPT, max_total=_SHAREGPT_TOTAL),
                  description="ShareGPT as vllm bench serve samples it (16,384 measured prompt/output pairs)"),
)}
