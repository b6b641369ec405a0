"""A fingerprint of fixed-seed simulations, to check that a speed change leaves every simulated number as it was.

    python benchmarks/fleet_fingerprint.py [--scale 1.0] > before.txt   # then, after the change:
    python benchmarks/fleet_fingerprint.py [--scale 1.0] | diff before.txt -

Each case prints its summary (every key, floats at full precision: `repr`), its engine step count and digests
(SHA-256, first 16 hex digits) of every request's token instants and every replica's timeline, and per-request
sums. Cases: fleets of 8 replicas (20,000 chat requests) under each router with exact metrics, and with bounded
metrics (least outstanding; disaggregated), a replica going down; one replica (`sim.simulate`) at a moderate and
a saturating rate, with and without the API server, prefix caching on a shared-prefix workload under KV
pressure (preemptions), vLLM's timeouts, and the SGLang scheduler. The wall time of each case goes to stderr,
so that stdout compares byte for byte.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import struct
import sys
import time
from array import array
from collections.abc import Iterable
from typing import Any

import numpy as np

from flopwise.api import deployment
from flopwise.cluster import simulate_fleet
from flopwise.cluster.build import build_cluster
from flopwise.cluster.fleet import FleetResult
from flopwise.sim import SimConfig, simulate
from flopwise.sim.simulate import SimResult
from flopwise.sim.timeline import Timeline
from flopwise.specs.sla import parse_sla
from flopwise.workload import build_workload

SLA_TEXT = "p95_ttft<=500ms,p95_tpot<=50ms"


def _digest(chunks: Iterable[bytes]) -> str:
    h = hashlib.sha256()
    for c in chunks:
        h.update(c)
    return h.hexdigest()[:16]


def _clean(obj: Any) -> Any:
    """The summary without wall times (which vary run to run)."""
    if isinstance(obj, dict):
        return {k: _clean(v) for k, v in obj.items() if "wall" not in k}
    if isinstance(obj, list | tuple):
        return [_clean(v) for v in obj]
    if isinstance(obj, float) and not math.isfinite(obj):
        return repr(obj)
    return obj


def _timelines(tls: list[Timeline]) -> str:
    def chunks() -> Iterable[bytes]:
        for tl in tls:
            for a in (tl.step_end_at, tl.delivered_at, tl.sample_at, tl.sample_s, tl.num_running, tl.num_waiting,
                      tl.kv_usage):
                yield struct.pack("q", len(a))
                yield a.tobytes()
            yield struct.pack("dddq", tl.prefill_s, tl.decode_s, tl.frontend_cpu_s, tl.num_prompt_tokens)
    return _digest(chunks())


def _records(res: SimResult | FleetResult) -> list[str]:
    recs = res.records
    times = _digest(array("d", r.token_times).tobytes() + struct.pack("q", r.request_id) for r in recs)
    meta = _digest(repr((r.arrival_at, r.first_scheduled_at, r.preemptions, r.error_kind, r.output_tokens))
                   .encode() for r in recs)
    total = math.fsum(t for r in recs for t in r.token_times)
    first = math.fsum(r.token_times[0] for r in recs if r.token_times)
    cached = sum(q.num_cached_tokens for q in res.requests)
    phases = _digest([np.ascontiguousarray(res.phases).tobytes()])
    return [f"  token times {times}, record fields {meta}, phases {phases}",
            f"  sum of token times {total!r}, of first token times {first!r}, cached tokens {cached}, "
            f"tokens {sum(len(r.token_times) for r in recs)}"]


def _bounded(res: FleetResult) -> list[str]:
    b = res.bounded
    assert b is not None
    cols = _digest(np.ascontiguousarray(b.cols[f]).tobytes() for f in sorted(b.cols))
    rest = _digest([b.input_tokens.tobytes(), b.output_tokens.tobytes(), b.preemptions.tobytes(), b.ok.tobytes(),
                    np.ascontiguousarray(b.phases).tobytes(), array("d", b.loose_gaps).tobytes(),
                    repr(sorted(b.error_kind.items())).encode()])
    gaps = []
    for st in b.steps.values():
        g, w = st.gaps()
        gaps.append(g.tobytes() + w.tobytes())
    pct = [b.replica_percentiles(m.index) for m in res.fleet.members]
    return [f"  bounded columns {cols}, other rows {rest}, step gaps {_digest(sorted(gaps))}, "
            f"cached {b.num_cached_tokens}/{b.num_prompt_tokens}",
            f"  replica sketches {_digest([repr(pct).encode()])}"]


def _print(name: str, res: SimResult | FleetResult, wall: float) -> None:
    s = res.summary()
    tls = res.timelines if isinstance(res, SimResult) else res.timelines()
    print(f"== {name}: {sum(t.num_steps for t in tls)} steps, timelines {_timelines(tls)}")
    print("  summary " + json.dumps(_clean(s), sort_keys=True))
    if isinstance(res, FleetResult) and res.bounded is not None:
        lines = _bounded(res)
    else:
        lines = _records(res)
    print("\n".join(lines))
    if isinstance(res, FleetResult) and res.bounded is None:
        print("  rows " + _digest(repr(r).encode() for r in res.rows()))
    sys.stdout.flush()
    print(f"{name}: {wall:.2f} s", file=sys.stderr)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--scale", type=float, default=1.0, help="multiply every case's request count")
    args = ap.parse_args()
    n = lambda k: max(10, round(k * args.scale))  # noqa: E731
    sla = parse_sla(SLA_TEXT)

    def make(tp: int, count: int, **kw: Any) -> Any:
        return deployment("llama-3.1-8b", "h100-sxm", tp=tp, num_gpus=tp * count, **kw)

    def fleet(name: str, num: int, rate: float, router: str, metrics: str, **kw: Any) -> None:
        spec = build_cluster(make, tp=1, replicas=8, router=router, **kw)
        wl = build_workload(num_requests=num, workload="chat", request_rate=rate, seed=0)
        t0 = time.perf_counter()
        res = simulate_fleet(spec, wl, sla=sla, metrics=metrics)
        _print(name, res, time.perf_counter() - t0)

    for router in ("round-robin", "least-outstanding", "least-kv", "prefix-aware", "session"):
        fleet(f"fleet 8x {router}, exact", n(20_000), 80.0, router, "exact")
    fleet("fleet 8x least-outstanding, bounded", n(20_000), 80.0, "least-outstanding", "bounded")
    fleet("fleet 8x least-outstanding, bounded, overloaded", n(20_000), 200.0, "least-outstanding", "bounded")
    fleet("fleet 8x least-outstanding, down:2@60, exact", n(10_000), 80.0, "least-outstanding", "exact",
          replica_events="down:2@60,up:2@90")
    for metrics in ("exact", "bounded"):
        spec = build_cluster(make, tp=1, replicas=4, router="least-outstanding",
                             disaggregate="prefill=2xtp1,decode=2xtp1")
        wl = build_workload(num_requests=n(5_000), workload="chat", request_rate=25.0, seed=1)
        t0 = time.perf_counter()
        res = simulate_fleet(spec, wl, sla=sla, metrics=metrics)
        _print(f"disaggregated 2+2, {metrics}", res, time.perf_counter() - t0)

    def one(name: str, num: int, rate: float, workload: str = "chat", config: SimConfig | None = None,
            timeout_s: float | None = None, seed: int = 0, **kw: Any) -> None:
        dep = deployment("llama-3.1-8b", "h100-sxm", **kw)
        wl = build_workload(num_requests=num, workload=workload, request_rate=rate, seed=seed, timeout_s=timeout_s)
        t0 = time.perf_counter()
        res = simulate(dep, wl, config, sla=sla)
        _print(name, res, time.perf_counter() - t0)

    one("one replica, chat 4 req/s", n(3_000), 4.0)
    one("one replica, chat 30 req/s (saturating)", n(5_000), 30.0)
    one("one replica, chat 30 req/s, no API server", n(5_000), 30.0, frontend="none")
    one("one replica, chat at once", n(2_000), math.inf)
    one("one replica, code, prefix caching, KV pressure", n(3_000), 20.0, workload="code",
        config=SimConfig(enable_prefix_caching=True), gpu_memory_utilization=0.3)
    one("one replica, rag, prefix caching, preemptions", n(2_000), 12.0, workload="rag",
        config=SimConfig(enable_prefix_caching=True), gpu_memory_utilization=0.25, frontend="none")
    one("one replica, chat, timeouts", n(3_000), 25.0, timeout_s=8.0)
    one("one replica, chat, sglang", n(3_000), 20.0, engine="sglang")
    one("one replica, chat, sglang, no API server", n(3_000), 30.0, engine="sglang", frontend="none")


if __name__ == "__main__":
    main()
