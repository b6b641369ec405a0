"""Request-level latency records and their summary, shared by `simulate` and `bench` (same JSON keys)."""

from flopwise.metrics.summary import LatencyStats, RequestRecord, RunSummary, summarize

__all__ = ["LatencyStats", "RequestRecord", "RunSummary", "summarize"]
