"""The server's own view, from its Prometheus `/metrics`: scraped before, during and after a run.

Histograms give means over the run as delta(_sum) / delta(_count) between the first scrape before the run and
the last one after it; gauges give the mean and max over the scrapes taken during the run; counters give deltas.
Metric names are vLLM's (v1) and SGLang's; where an engine exposes none of them the view is empty.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import httpx

__all__ = ["parse_prometheus", "scrape", "ServerView", "server_view"]

_LINE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+(\S+)")
# Families kept from a scrape (others are dropped to keep the file small).
_KEEP = re.compile(r"^(vllm|sglang|llamacpp|tgi)[:_]")

# role -> alternative family names (histograms without the _sum/_count suffix)
_HIST = {
    "queue": ("vllm:request_queue_time_seconds", "sglang:queue_time_seconds"),
    "prefill": ("vllm:request_prefill_time_seconds",),
    "decode": ("vllm:request_decode_time_seconds",),
    "ttft": ("vllm:time_to_first_token_seconds", "sglang:time_to_first_token_seconds"),
    "itl": ("vllm:inter_token_latency_seconds", "vllm:time_per_output_token_seconds",
            "sglang:inter_token_latency_seconds", "sglang:time_per_output_token_seconds"),
    "e2e": ("vllm:e2e_request_latency_seconds", "sglang:e2e_request_latency_seconds"),
}
_GAUGE = {
    "running": ("vllm:num_requests_running", "sglang:num_running_reqs", "llamacpp:requests_processing"),
    "waiting": ("vllm:num_requests_waiting", "sglang:num_queue_reqs", "llamacpp:requests_deferred"),
    "kv_usage": ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc", "sglang:token_usage",
                 "llamacpp:kv_cache_usage_ratio"),
}
_COUNTER = {
    "preemptions": ("vllm:num_preemptions_total", "vllm:num_preemptions"),
    "prefix_queries": ("vllm:prefix_cache_queries_total", "vllm:gpu_prefix_cache_queries_total"),
    "prefix_hits": ("vllm:prefix_cache_hits_total", "vllm:gpu_prefix_cache_hits_total"),
}


def parse_prometheus(text: str) -> dict[str, float]:
    """Prometheus text format -> {series: value}, series = name{labels} as written; kept families only."""
    out: dict[str, float] = {}
    for line in text.splitlines():
        if not line or line[0] == "#":
            continue
        m = _LINE.match(line)
        if not m or not _KEEP.match(m.group(1)):
            continue
        try:
            out[m.group(1) + (m.group(2) or "")] = float(m.group(3))
        except ValueError:
            continue
    return out


async def scrape(client: httpx.AsyncClient, path: str = "/metrics") -> dict[str, float] | None:
    """One scrape, or None when the server has no usable /metrics."""
    try:
        r = await client.get(path, timeout=5.0)
    except httpx.HTTPError:
        return None
    if r.status_code != 200:
        return None
    return parse_prometheus(r.text)


def _family_total(sample: dict[str, float], name: str) -> float | None:
    """Sum over label sets of the series of one family (exact name, any labels)."""
    vals = [v for k, v in sample.items() if k == name or k.startswith(name + "{")]
    return sum(vals) if vals else None


def _first(sample: dict[str, float], names: Sequence[str]) -> tuple[str | None, float | None]:
    for n in names:
        v = _family_total(sample, n)
        if v is not None:
            return n, v
    return None, None


@dataclass(frozen=True, slots=True)
class ServerView:
    """Server-side means over the run (ms), gauge mean/max during it, and counter deltas. None: not exposed."""

    queue_ms_mean: float | None = None
    prefill_ms_mean: float | None = None
    decode_ms_mean: float | None = None
    ttft_ms_mean: float | None = None
    itl_ms_mean: float | None = None
    e2e_ms_mean: float | None = None
    running_mean: float | None = None
    running_max: float | None = None
    waiting_mean: float | None = None
    waiting_max: float | None = None
    kv_usage_mean: float | None = None
    kv_usage_max: float | None = None
    preemptions: float | None = None
    prefix_cache_hit_rate: float | None = None
    num_scrapes: int = 0

    @property
    def is_empty(self) -> bool:
        return all(v is None for k, v in asdict(self).items() if k != "num_scrapes")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def server_view(scrapes: Sequence[dict[str, Any]]) -> ServerView | None:
    """The view over one session's scrapes ({"phase": before|during|after, "metrics": {...}}); None if none."""
    before = next((s["metrics"] for s in scrapes if s["phase"] == "before"), None)
    after = next((s["metrics"] for s in reversed(scrapes) if s["phase"] == "after"), None)
    during = [s["metrics"] for s in scrapes if s["phase"] in ("during", "after")]
    if before is None or after is None:
        return None
    out: dict[str, Any] = {"num_scrapes": len(scrapes)}
    for role, names in _HIST.items():
        for n in names:
            s0, s1 = _family_total(before, n + "_sum"), _family_total(after, n + "_sum")
            c0, c1 = _family_total(before, n + "_count"), _family_total(after, n + "_count")
            if None not in (s0, s1, c0, c1) and c1 - c0 > 0:  # type: ignore[operator]
                out[f"{role}_ms_mean"] = (s1 - s0) / (c1 - c0) * 1e3  # type: ignore[operator]
                break
    for role, names in _GAUGE.items():
        vals = [v for m in during if (v := _first(m, names)[1]) is not None]
        if vals:
            out[f"{role}_mean"], out[f"{role}_max"] = sum(vals) / len(vals), max(vals)
    deltas: dict[str, float] = {}
    for role, names in _COUNTER.items():
        for n in names:
            a, b = _family_total(before, n), _family_total(after, n)
            if a is not None and b is not None:
                deltas[role] = b - a
                break
    if "preemptions" in deltas:
        out["preemptions"] = deltas["preemptions"]
    if deltas.get("prefix_queries"):
        out["prefix_cache_hit_rate"] = deltas.get("prefix_hits", 0.0) / deltas["prefix_queries"]
    elif (hr := _first(after, ("sglang:cache_hit_rate",))[1]) is not None:
        out["prefix_cache_hit_rate"] = hr
    return ServerView(**out)
