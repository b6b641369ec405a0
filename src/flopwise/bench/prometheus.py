"""The server's own view, from its Prometheus `/metrics`: scraped before, during and after a run.

Histograms give means over the measured requests as delta(_sum) / delta(_count) between the last scrape before
the measured phase (taken after the warm-up requests have finished, so they are left out) and the last one after
it; gauges give the mean and max over the scrapes taken during the run; counters give deltas.

Names by engine (role: family; a `{label="value"}` suffix keeps only the series with that label):
    vLLM (v1)       vllm:request_queue_time_seconds, request_prefill_time_seconds, request_decode_time_seconds,
                    time_to_first_token_seconds, inter_token_latency_seconds, e2e_request_latency_seconds;
                    num_requests_running / waiting, kv_cache_usage_perc; num_preemptions_total, prefix cache
    SGLang          sglang:queue_time_seconds, per_stage_req_latency_seconds{stage="prefill_forward"},
                    time_to_first_token_seconds, inter_token_latency_seconds, e2e_request_latency_seconds;
                    num_running_reqs, num_queue_reqs, token_usage; num_retracted_requests_total (retractions,
                    its preemptions); cache_hit_rate
    TensorRT-LLM    trtllm_request_queue_time_seconds, request_prefill_time_seconds, request_decode_time_seconds,
                    time_to_first_token_seconds, time_per_output_token_seconds, e2e_request_latency_seconds;
                    num_requests_running / waiting, kv_cache_utilization (trtllm-serve serves them at
                    /prometheus/metrics, tried when /metrics is absent)
    TGI             tgi_request_queue_duration, tgi_request_mean_time_per_token_duration, tgi_request_duration;
                    tgi_batch_current_size (running), tgi_queue_size (waiting)
    llama.cpp       llamacpp:requests_processing / requests_deferred (its KV-usage gauge was removed upstream)
Where an engine exposes no prefill or decode histogram, they are derived from the others: decode = e2e - TTFT,
prefill = TTFT - queue (server-side means).

Several label sets of one family are data-parallel engines (vLLM's `engine`, SGLang's `dp_rank`) or copies of
one value reported by every tensor/pipeline rank (`tp_rank`, `pp_rank`, `pid`). Copies are collapsed (max);
then counts (requests, counters, histogram sums and counts) add up across engines, and ratio gauges (KV usage,
hit rate) are averaged, so that two half-full engines read 50%, not 100%.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import httpx

__all__ = ["parse_prometheus", "scrape", "ServerView", "server_view", "METRICS_PATHS"]

_LINE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+(\S+)")
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')
# Families kept from a scrape (others are dropped to keep the file small).
_KEEP = re.compile(r"^(vllm:|sglang:|llamacpp:|tgi_|trtllm_|trtllm:)")
METRICS_PATHS = ("/metrics", "/prometheus/metrics")
_REPLICA_LABELS = frozenset({"tp_rank", "pp_rank", "pid", "le"})

# role -> alternative family names (histograms without the _sum/_count suffix)
_HIST = {
    "queue": ("vllm:request_queue_time_seconds", "sglang:queue_time_seconds", "trtllm_request_queue_time_seconds",
              "tgi_request_queue_duration"),
    "prefill": ("vllm:request_prefill_time_seconds", 'sglang:per_stage_req_latency_seconds{stage="prefill_forward"}',
                "trtllm_request_prefill_time_seconds"),
    "decode": ("vllm:request_decode_time_seconds", "trtllm_request_decode_time_seconds"),
    "ttft": ("vllm:time_to_first_token_seconds", "sglang:time_to_first_token_seconds",
             "trtllm_time_to_first_token_seconds"),
    "itl": ("vllm:inter_token_latency_seconds", "vllm:time_per_output_token_seconds",
            "sglang:inter_token_latency_seconds", "sglang:time_per_output_token_seconds",
            "trtllm_time_per_output_token_seconds", "tgi_request_mean_time_per_token_duration"),
    "e2e": ("vllm:e2e_request_latency_seconds", "sglang:e2e_request_latency_seconds",
            "trtllm_e2e_request_latency_seconds", "tgi_request_duration"),
}
_GAUGE = {
    "running": ("vllm:num_requests_running", "sglang:num_running_reqs", "trtllm_num_requests_running",
                "tgi_batch_current_size", "llamacpp:requests_processing"),
    "waiting": ("vllm:num_requests_waiting", "sglang:num_queue_reqs", "trtllm_num_requests_waiting",
                "tgi_queue_size", "llamacpp:requests_deferred"),
    "kv_usage": ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc", "sglang:token_usage",
                 "trtllm_kv_cache_utilization"),
}
_RATIO_GAUGES = ("kv_usage",)
_COUNTER = {
    "preemptions": ("vllm:num_preemptions_total", "vllm:num_preemptions", "sglang:num_retracted_requests_total"),
    "prefix_queries": ("vllm:prefix_cache_queries_total", "vllm:gpu_prefix_cache_queries_total"),
    "prefix_hits": ("vllm:prefix_cache_hits_total", "vllm:gpu_prefix_cache_hits_total"),
}
_ENGINES = (("vllm:", "vllm"), ("sglang:", "sglang"), ("trtllm", "tensorrt-llm"), ("tgi_", "tgi"),
            ("llamacpp:", "llama.cpp"))


def parse_prometheus(text: str) -> dict[str, float]:
    """Prometheus text format -> {series: value}, series = name{labels} as written; kept families only;
    non-finite values are dropped."""
    out: dict[str, float] = {}
    for line in text.splitlines():
        if not line or line[0] == "#":
            continue
        m = _LINE.match(line)
        if not m or not _KEEP.match(m.group(1)):
            continue
        try:
            v = float(m.group(3))
        except ValueError:
            continue
        if math.isfinite(v):
            out[m.group(1) + (m.group(2) or "")] = v
    return out


async def scrape(client: httpx.AsyncClient, path: str | None = None) -> dict[str, float] | None:
    """One scrape (of `path`, else the first of METRICS_PATHS that answers), or None when the server has no
    usable metrics."""
    for p in (path,) if path else METRICS_PATHS:
        try:
            r = await client.get(p, timeout=5.0)
        except httpx.HTTPError:
            return None
        if r.status_code == 200:
            return parse_prometheus(r.text)
    return None


def _split(name: str) -> tuple[str, dict[str, str]]:
    """'fam{a="1"}' -> ('fam', {'a': '1'})."""
    if "{" not in name:
        return name, {}
    fam, rest = name.split("{", 1)
    return fam, dict(_LABEL.findall(rest))


def _family(sample: dict[str, float], name: str, *, average: bool = False) -> float | None:
    """One family's value over its label sets (see the module docstring): copies from tensor/pipeline ranks
    collapsed by max, then engines summed (or averaged for ratios). `name` may carry a label filter."""
    fam, want = _split(name)
    groups: dict[tuple[tuple[str, str], ...], float] = {}
    for series, v in sample.items():
        if not (series == fam or series.startswith(fam + "{")):
            continue
        labels = _split(series)[1] if "{" in series else {}
        if any(labels.get(k) != w for k, w in want.items()):
            continue
        key = tuple(sorted((k, x) for k, x in labels.items() if k not in _REPLICA_LABELS))
        groups[key] = max(groups.get(key, -math.inf), v)
    if not groups:
        return None
    total = sum(groups.values())
    return total / len(groups) if average else total


def _first(sample: dict[str, float], names: Sequence[str], *, average: bool = False) -> tuple[str | None, float | None]:
    for n in names:
        v = _family(sample, n, average=average)
        if v is not None:
            return n, v
    return None, None


def _hist_name(name: str, suffix: str) -> str:
    fam, _, labels = name.partition("{")
    return fam + suffix + ("{" + labels if labels else "")


@dataclass(frozen=True, slots=True, kw_only=True)
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
    engine: str | None = None

    @property
    def is_empty(self) -> bool:
        return all(v is None for k, v in asdict(self).items() if k not in ("num_scrapes", "engine"))

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def server_view(scrapes: Sequence[dict[str, Any]]) -> ServerView | None:
    """The view over one session's scrapes, in the order taken ({"phase": before|during|after, "metrics": {...}});
    None if none. Counters and histograms are deltas from the last "before" scrape (taken again once the warm-up
    has finished), gauges the mean and max of the scrapes after it."""
    last = max((i for i, s in enumerate(scrapes) if s["phase"] == "before"), default=None)
    before = scrapes[last]["metrics"] if last is not None else None
    after = next((s["metrics"] for s in reversed(scrapes) if s["phase"] == "after"), None)
    # gauges from the measured phase only: scrapes taken before the last baseline saw the warm-up requests
    during = [s["metrics"] for s in scrapes[(last or 0) + 1:] if s["phase"] in ("during", "after")]
    if before is None or after is None:
        return None
    out: dict[str, Any] = {"num_scrapes": len(scrapes)}
    out["engine"] = next((e for prefix, e in _ENGINES if any(k.startswith(prefix) for k in after)), None)
    for role, names in _HIST.items():
        for n in names:
            s0, s1 = _family(before, _hist_name(n, "_sum")), _family(after, _hist_name(n, "_sum"))
            c0, c1 = _family(before, _hist_name(n, "_count")), _family(after, _hist_name(n, "_count"))
            if None not in (s0, s1, c0, c1) and c1 - c0 > 0:  # type: ignore[operator]
                out[f"{role}_ms_mean"] = (s1 - s0) / (c1 - c0) * 1e3  # type: ignore[operator]
                break
    if "decode_ms_mean" not in out and "e2e_ms_mean" in out and "ttft_ms_mean" in out:
        out["decode_ms_mean"] = max(out["e2e_ms_mean"] - out["ttft_ms_mean"], 0.0)
    if "prefill_ms_mean" not in out and "ttft_ms_mean" in out and "queue_ms_mean" in out:
        out["prefill_ms_mean"] = max(out["ttft_ms_mean"] - out["queue_ms_mean"], 0.0)
    for role, names in _GAUGE.items():
        vals = [v for m in during if (v := _first(m, names, average=role in _RATIO_GAUGES)[1]) is not None]
        if vals:
            out[f"{role}_mean"], out[f"{role}_max"] = sum(vals) / len(vals), max(vals)
    deltas: dict[str, float] = {}
    for role, names in _COUNTER.items():
        for n in names:
            a, b = _family(before, n), _family(after, n)
            if a is not None and b is not None:
                deltas[role] = max(b - a, 0.0)  # a counter that went down: the server restarted
                break
    if "preemptions" in deltas:
        out["preemptions"] = deltas["preemptions"]
    if deltas.get("prefix_queries"):
        out["prefix_cache_hit_rate"] = deltas.get("prefix_hits", 0.0) / deltas["prefix_queries"]
    elif (hr := _first(after, ("sglang:cache_hit_rate",), average=True)[1]) is not None:
        out["prefix_cache_hit_rate"] = hr
    return ServerView(**out)
