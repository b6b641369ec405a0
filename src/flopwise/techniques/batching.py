"""Batching: prompts under a per-step token budget, and chunked prefill's TTFT-vs-ITL trade.

This module analyses chunked prefill from the one step-cost function (no simulator): vLLM v1 always schedules
by a token budget per step (`max_num_batched_tokens`; decodes first, then prompt chunks in arrival order), so
"chunked-prefill=C" is that budget set to C.

Static batch (`prefill_steps`): `batch` prompts arriving together are cut into steps of at most C tokens,
FCFS; a request's chunk attends to everything before it (context = cached prefix + earlier chunks)

    prompts:  |---- r0 ----|---- r1 ----|---- r2 ----|
    steps:    |  step 0  |  step 1  |  step 2  | s3 |       (C tokens each, the last one shorter)

    TTFT (the batch's last first token) = sum of the steps' times

Mixed batch (`chunked_prefill_point`): one new prompt joins `running` sequences that are decoding. Each step
carries the running decodes plus a chunk of min(C - running, remaining) prompt tokens, so

    TTFT of the newcomer = sum over its chunks of step(running decodes + chunk)
    ITL tail of the others = the longest of those steps (their token waits for it)

A small C bounds the decode stall (ITL tail) but spends more steps, each re-reading the weights, on the
prompt (TTFT); C >= prompt + running gives the unchunked behaviour: one long step that stalls every decode.
Static vs continuous batching under a request stream needs the simulator (`flopwise simulate`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from flopwise.cost.batch import BatchShape, batch_shape
from flopwise.cost.layout import layout
from flopwise.cost.step import step_cost, step_time
from flopwise.errors import WorkloadError
from flopwise.specs.deployment import Deployment
from flopwise.techniques.scenario import Scenario, rebuild

__all__ = ["prefill_steps", "prefill_time_s", "prefill_flops", "ChunkPoint", "chunked_prefill_point",
           "chunk_sweep", "with_chunked_prefill", "without_cuda_graphs"]


def prefill_steps(dep: Deployment, batch: int, input_len: int, cached: int = 0) -> list[BatchShape]:
    """The steps that prefill `batch` prompts of `input_len` tokens (the first `cached` of each already in the
    KV cache) under the deployment's token budget."""
    if not 0 <= cached < input_len:
        raise WorkloadError(f"cached prompt tokens must be in [0, input_len), got {cached}")
    budget = dep.max_num_batched_tokens
    windows = layout(dep).windows
    new = input_len - cached
    steps: list[BatchShape] = []
    rows: list[tuple[int, int]] = []
    used = logits = 0
    for _ in range(batch):
        done = 0
        while done < new:
            take = min(new - done, budget - used)
            rows.append((take, cached + done))
            done += take
            used += take
            logits += done == new
            if used == budget:
                steps.append(batch_shape(rows, windows, num_logits=logits))
                rows, used, logits = [], 0, 0
    if rows:
        steps.append(batch_shape(rows, windows, num_logits=logits))
    return steps


def prefill_time_s(dep: Deployment, batch: int, input_len: int, cached: int = 0) -> float:
    return sum(step_time(dep, s) for s in prefill_steps(dep, batch, input_len, cached))


def prefill_flops(dep: Deployment, batch: int, input_len: int, cached: int = 0) -> float:
    """FLOPs of the whole prefill, summed over the tensor-parallel group."""
    return sum(step_cost(dep, s).flops for s in prefill_steps(dep, batch, input_len, cached)) * dep.tp


@dataclass(frozen=True, slots=True, kw_only=True)
class ChunkPoint:
    """One new prompt joining `running` decoding sequences under a token budget of `chunk` tokens."""

    chunk: int
    running: int
    steps: int
    ttft_s: float  # the newcomer's prefill, step by step
    itl_tail_s: float  # the longest step the running sequences wait through
    decode_step_s: float  # a step with no prompt in it, for reference


def chunked_prefill_point(dep: Deployment, running: int, input_len: int, context: int, cached: int = 0,
                          chunk: int | None = None) -> ChunkPoint:
    """`running` sequences at `context` cached tokens decode while one prompt of `input_len` (of which
    `cached` are prefix hits) is prefilled in chunks of at most `chunk` - running tokens (default: the
    deployment's budget)."""
    budget = chunk or dep.max_num_batched_tokens
    room = budget - running
    if room < 1:
        raise WorkloadError(f"a token budget of {budget} leaves no room for a prompt chunk beside {running} "
                            f"running decodes; raise chunked-prefill / max_num_batched_tokens above {running}")
    windows = layout(dep).windows
    decodes = [(1, context)] * running
    new = input_len - cached
    times = []
    done = 0
    while done < new:
        take = min(room, new - done)
        rows = [*decodes, (take, cached + done)]
        done += take
        times.append(step_time(dep, batch_shape(rows, windows, num_logits=running + (done == new))))
    plain = step_time(dep, batch_shape(decodes, windows)) if running else 0.0
    return ChunkPoint(chunk=budget, running=running, steps=len(times), ttft_s=sum(times),
                      itl_tail_s=max(times) if running else 0.0, decode_step_s=plain)


def chunk_sweep(dep: Deployment, running: int, input_len: int, context: int,
                chunks: tuple[int, ...] = (256, 512, 1024, 2048, 4096, 8192)) -> list[ChunkPoint]:
    """The TTFT-vs-ITL-tail trade over chunk sizes, plus the unchunked case (one step for the whole prompt)."""
    unchunked = running + input_len
    sizes = sorted({c for c in chunks if c > running and c < unchunked} | {unchunked})
    return [chunked_prefill_point(dep, running, input_len, context, chunk=c) for c in sizes]


def with_chunked_prefill(scn: Scenario, chunk: int) -> Scenario:
    """Chunked prefill with chunks of `chunk` tokens: the engine's per-step token budget (vLLM
    `--max-num-batched-tokens`), which also sizes the activation memory the KV pool gives up."""
    if chunk < 1:
        raise WorkloadError(f"chunked-prefill size must be a positive number of tokens, got {chunk}")
    # switched on where the engine's default is off (TensorRT-LLM's enable_chunked_prefill, TGI 2): a budget
    # below the prompt is chunking, not a prompt that can never be scheduled
    engine = replace(scn.deployment.engine, enable_chunked_prefill=True)
    return replace(scn, deployment=rebuild(scn.deployment, max_num_batched_tokens=chunk, engine=engine))


def without_cuda_graphs(scn: Scenario) -> Scenario:
    """The engine without CUDA graphs (`EngineProfile.eager`): every step, decode too, takes at least its kernels'
    eager launches, which small-batch decode feels most (the launches, not the GPU, set its pace)."""
    return replace(scn, deployment=rebuild(scn.deployment, engine=scn.deployment.engine.eager()))

