"""Where the time went and what to try, from the client's summary and (when exposed) the server's view.

Shares of a request's mean end-to-end time, E = mean e2e (server's histogram when exposed, else the client's):
    queue share    = mean queue time / E          (server)            waiting for a batch slot
    prefill share  = mean prefill time / E        (server)            computing the prompt
    decode share   = mean decode time / E         (server)            generating after the first token
Without server metrics the client splits E into TTFT (queue + prefill, inseparable from outside) and
E - TTFT (decode).

Findings, each with its evidence and advice (a run can have several; the first is the main bottleneck):
    errors        some requests failed (cancelled ones are not   -> read errors_by_kind
                  failures: an interrupted run is not a server fault)
    client_bound  the client itself was saturated (CPU >= 85% of -> the measurement is the client's limit, not the
                  a core, or its event loop >= 10 ms late at p99)  server's: run it elsewhere or split the load;
                                                                  this is then the bottleneck
    client_lag    sends left later than scheduled              -> the client is overloaded; its TTFT is inflated
    kv_bound      preemptions, or KV cache >= 95 % full        -> KV quantization (fp8), more TP, shorter max length
    queueing      queue share >= 20 % or requests waiting      -> add replicas, raise max_num_seqs /
                                                                  max_num_batched_tokens, or lower the rate
    prefill_bound prefill >= decode                            -> chunked prefill, prefix caching, more compute
    decode_bound  decode > prefill                             -> weight quantization, speculative decoding,
                                                                  more memory bandwidth
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from flopwise.bench.prometheus import ServerView
from flopwise.specs.defaults import KV_FULL

__all__ = ["Finding", "Diagnosis", "diagnose"]

QUEUE_SHARE = 0.2
SEND_LAG_MS = 5.0


@dataclass(frozen=True, slots=True, kw_only=True)
class Finding:
    kind: str
    share: float | None
    evidence: str
    advice: str


@dataclass(frozen=True, slots=True)
class Diagnosis:
    source: str  # "server" or "client"
    shares: dict[str, float]
    findings: tuple[Finding, ...]

    @property
    def bottleneck(self) -> str | None:
        for f in self.findings:
            if f.kind not in ("errors", "client_lag"):
                return f.kind
        return None

    @property
    def is_client_bound(self) -> bool:
        return any(f.kind == "client_bound" for f in self.findings)

    def to_dict(self) -> dict[str, Any]:
        return {"source": self.source, "bottleneck": self.bottleneck, "shares": self.shares,
                "findings": [asdict(f) for f in self.findings]}


def diagnose(summary: dict[str, Any], server: ServerView | None = None) -> Diagnosis:
    findings: list[Finding] = []
    n_fail = summary.get("num_failed", 0)
    if n_fail:
        kinds = ", ".join(f"{k} {v}" for k, v in sorted(summary.get("errors_by_kind", {}).items()) if k != "cancelled")
        findings.append(Finding(kind="errors", share=n_fail / max(summary["num_requests"], 1),
                                evidence=f"{n_fail} of {summary['num_requests']} requests failed ({kinds})",
                                advice="check the server log; failed requests count against goodput and attainment"))
    client = summary.get("client") or {}
    if client.get("saturated"):
        findings.append(Finding(kind="client_bound", share=None,
                                evidence=f"the client used {100 * client.get('cpu_util', 0):.0f}% of a core and its "
                                f"event loop woke {client.get('loop_lag_ms_p99', 0):.1f} ms late at p99 (max "
                                f"{client.get('loop_lag_ms_max', 0):.0f} ms)",
                                advice="the client, not the server, limits this run: TTFT and ITL include client "
                                "delay; run the client on another machine, lower the concurrency, or split the load"))
    lag = (summary.get("send_lag_ms") or {}).get("p99")
    if lag is not None and lag > SEND_LAG_MS:
        findings.append(Finding(kind="client_lag", share=None, evidence=f"p99 send lag {lag:.1f} ms behind schedule",
                                advice="the client could not keep up: TTFT includes this lag; run the client on "
                                "another machine or lower the load per client"))

    use_server = server is not None and None not in (server.queue_ms_mean, server.prefill_ms_mean,
                                                       server.decode_ms_mean)
    ranked: list[Finding] = []
    if use_server:
        assert server is not None
        q, p, d = server.queue_ms_mean or 0.0, server.prefill_ms_mean or 0.0, server.decode_ms_mean or 0.0
        e2e = server.e2e_ms_mean or (q + p + d) or 1.0
        shares = {"queue": q / e2e, "prefill": p / e2e, "decode": d / e2e}
        kv_full = server.kv_usage_max is not None and server.kv_usage_max >= KV_FULL
        if (server.preemptions or 0) > 0 or kv_full:
            ranked.append(Finding(kind="kv_bound", share=None,
                                  evidence=f"{server.preemptions or 0:g} preemptions, KV cache max "
                                  f"{100 * (server.kv_usage_max or 0):.0f}% full",
                                  advice="KV-cache quantization (fp8), more tensor parallelism, a smaller max model "
                                  "length, or fewer concurrent sequences"))
        waiting = server.waiting_mean or 0.0
        if shares["queue"] >= QUEUE_SHARE or waiting >= 1.0:
            ranked.append(Finding(kind="queueing", share=shares["queue"],
                                  evidence=f"queue {q:.0f} ms of {e2e:.0f} ms e2e; {waiting:.1f} requests waiting "
                                  "on average",
                                  advice="add replicas, raise max_num_seqs / max_num_batched_tokens if KV memory "
                                  "allows, or lower the request rate"))
        ranked.append(_compute_finding(shares["prefill"], shares["decode"],
                                       f"prefill {p:.0f} ms, decode {d:.0f} ms of {e2e:.0f} ms e2e (server)"))
        source = "server"
    else:
        ttft = (summary.get("ttft_ms") or {}).get("mean")
        e2e_mean = (summary.get("e2e_ms") or {}).get("mean")
        if ttft is None or not e2e_mean:
            return Diagnosis("client", {}, tuple(findings))
        e2e = float(e2e_mean)
        shares = {"ttft": ttft / e2e, "decode": (e2e - ttft) / e2e}
        ranked.append(_compute_finding(shares["ttft"], shares["decode"],
                                       f"TTFT {ttft:.0f} ms of {e2e:.0f} ms e2e (client; queue and prefill "
                                       "cannot be told apart without server metrics)"))
        source = "client"
    ranked.sort(key=lambda f: -1.0 if f.kind == "kv_bound" else -(f.share or 0.0))
    return Diagnosis(source, {k: round(v, 4) for k, v in shares.items()}, tuple(findings + ranked))


def _compute_finding(prefill_share: float, decode_share: float, evidence: str) -> Finding:
    if prefill_share >= decode_share:
        return Finding(kind="prefill_bound", share=prefill_share, evidence=evidence,
                       advice="long prompts dominate: chunked prefill, prefix caching, or more compute (FLOP/s)")
    return Finding(kind="decode_bound", share=decode_share, evidence=evidence,
                   advice="token generation dominates: weight quantization, speculative decoding, or more memory "
                   "bandwidth")
