"""Terminal report of an Estimate: memory, prefill vs decode side by side, and the compute/memory gap."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from flopwise.estimate import Estimate
from flopwise.units import fmt_bytes, fmt_flops, fmt_s


def render_estimate(console: Console, r: Estimate) -> None:
    d = r.to_dict()
    dep = r.deployment
    console.print(f"[bold]{dep.model.summary()}[/]")
    par = "".join(f", {k}={v:.3g}" for k, v in (("dp", dep.dp), ("ep", dep.ep), ("expert_skew", dep.expert_skew),
                                                ("nodes", dep.nodes)) if v != 1)
    if dep.hosts != dep.nodes:  # a node of several hosts (GB200 NVL72's trays)
        par += f", hosts={dep.hosts}"
    console.print(f"on {dep.num_gpus} x {dep.hardware.name} (tp={dep.tp}, pp={dep.pp}{par}, replicas={dep.replicas}), "
                  f"weights {dep.weights.name}, KV {dep.kv.name}; batch {r.batch} x "
                  f"({r.input_len} in, {r.output_len} out); engine {dep.engine.name}", markup=False)

    mem = d["memory"]
    mt = Table(title="Memory per GPU (GiB)")
    for c in ("device", "budget", "weights", "activations", "runtime", "KV pool", "KV for batch", "free"):
        mt.add_column(c, justify="right")
    mt.add_row(*(f"{mem[k]:.2f}" for k in ("device_gib", "budget_gib", "weights_gib", "activations_gib",
                                           "runtime_gib", "kv_pool_gib", "kv_cache_gib", "free_gib")))
    console.print(mt)
    by_kind = ", ".join(f"{k} {b:,.0f}" for k, b in d["kv_bytes_per_token_by_kind"].items())
    state = d["state_bytes_per_sequence"]
    console.print(f"KV cache: {mem['kv_bytes_per_token']:,.0f} bytes/token/GPU ({by_kind})"
                  + (f" + {state / 2**20:,.1f} MiB of linear-attention state per sequence" if state else "")
                  + f", capacity {mem['kv_capacity_tokens']:,} tokens -> max batch {r.max_batch} at "
                  f"{r.input_len + r.output_len} tokens" + ("" if r.batch_fits else
                  f"  [bold red](batch {r.batch} does not fit)[/]"))
    for e in d["encoders"]:
        per = (f", prefill {e['prefill_ms_per_item']:.1f} ms per {e['item']}" if e["prefill_ms_per_item"] is not None
               else ", prefill per item not priced (dynamic resolution, or a tower flopwise does not count layer by "
                    "layer)")
        console.print(f"{e['modality']} encoder {e['name']}: {e['params'] / 1e9:.2f}B params"
                      + (" (approximate)" if e["approximate"] else "") + per, markup=False)
    for note in d["notes"]:
        console.print(f"note: {note}", markup=False)

    stages = r.deployment.pp  # a step passes every pipeline stage: its figures are the stages' sum
    rounds = r.deployment.pipeline_batches > 1  # a round of micro-batches in flight (step time: the round's)
    pt = Table(title=f"One step of each phase (the {stages} pipeline stages' work together"
                     + (f", as a round of up to {stages} micro-batches in flight" if rounds else "")
                     + f": a GPU does 1/{stages} of it)" if stages > 1 else "One step of each phase (per GPU)")
    pt.add_column("")
    pt.add_column("prefill (whole batch)", justify="right")
    pt.add_column("decode (mean context)", justify="right")
    p, q = r.prefill.step, r.decode.step
    pt.add_row("FLOPs", fmt_flops(p.flops), fmt_flops(q.flops))
    pt.add_row("bytes moved", fmt_bytes(p.bytes), fmt_bytes(q.bytes))
    pt.add_row("arithmetic intensity", f"{d['prefill']['arithmetic_intensity']:.1f} FLOP/B",
               f"{d['decode']['arithmetic_intensity']:.1f} FLOP/B")
    pt.add_row("compute time at peak", fmt_s(p.peak_compute_s), fmt_s(q.peak_compute_s))
    pt.add_row("memory time at peak", fmt_s(p.peak_memory_s), fmt_s(q.peak_memory_s))
    pt.add_row("compute time (achievable)", fmt_s(p.compute_s), fmt_s(q.compute_s))
    pt.add_row("memory time (achievable)", fmt_s(p.memory_s), fmt_s(q.memory_s))
    pt.add_row("step time", fmt_s(p.time_s), fmt_s(q.time_s))
    pt.add_row("binding roof", p.bound, q.bound)
    console.print(pt)
    gap = q.peak_memory_s / q.peak_compute_s if q.peak_compute_s else float("inf")
    mma = (" (a GEMM of fewer rows than one MMA instruction takes pays for whole instructions, which on tensor cores "
           "slow for their bandwidth outweighs the weight read)" if dep.hardware.sm_class else "")
    tail = ("Batching more requests raises the FLOPs per byte." if q.bound != "compute" or gap <= 1 else
            f"Yet its achievable compute ({fmt_s(q.compute_s)}) binds: the kernels reach little of peak at this "
            f"batch{mma}, so more requests per step come nearly free.")
    console.print(f"At peak, a decode step needs {fmt_s(q.peak_compute_s)} of compute but {fmt_s(q.peak_memory_s)} "
                  f"of memory traffic: {gap:,.0f}x apart. {tail}")

    rt = Table(title="Results")
    for c in ("TTFT", "TPOT", "E2E", "output tok/s", "per GPU", "prefill tok/s", "tok/s per user", "MFU", "MBU"):
        rt.add_column(c, justify="right")
    one = r.output_len < 2  # one output token: no decode step, no TPOT
    rt.add_row(f"{r.ttft_ms:.1f} ms", "-" if one else f"{r.tpot_ms:.2f} ms", f"{r.e2e_ms / 1e3:.2f} s",
               f"{r.output_tokens_per_s:,.0f}", f"{r.output_tokens_per_s_per_gpu:,.0f}",
               f"{r.prefill_tokens_per_s:,.0f}", "-" if one else f"{r.decode_tokens_per_s_per_user:.1f}",
               f"{r.mfu:.1%}", f"{r.mbu:.1%}")
    console.print(rt)
