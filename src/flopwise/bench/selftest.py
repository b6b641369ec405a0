"""How much the client itself adds: drive the mock server (in its own process) at several concurrencies.

Against a mock with first-token delay T and inter-token delay I, a request of n output tokens ideally takes
L = T + (n - 1) I, so a closed loop at concurrency C ideally completes C / L requests per second.
Workers start staggered over one ideal duration L (`Load.ramp_up_s`), as in a steady state, so the ideal
makespan of N = rounds * C requests is rounds * L + (C - 1) / C * L (first scheduled send to last completion).
    added_ttft_ms        = measured TTFT (from the scheduled send) - T, mean and p99
    achieved_rate_ratio  = achieved / ideal request rate = ideal makespan / measured duration_s
The mock's own timer overshoot (well under a millisecond) is included, so the figures bound the client's cost
from above. Each level runs one warm-up round first (connections opened), excluded.
"""

from __future__ import annotations

import tempfile
from dataclasses import asdict, dataclass

from flopwise.bench.arrivals import Load
from flopwise.bench.mock_server import MockConfig, mock_server_process
from flopwise.bench.runner import BenchConfig, PromptConfig, run_bench

__all__ = ["SelftestLevel", "selftest"]


@dataclass(frozen=True, slots=True, kw_only=True)
class SelftestLevel:
    concurrency: int
    num_requests: int
    added_ttft_ms_mean: float
    added_ttft_ms_p99: float
    added_tpot_ms_mean: float
    achieved_rate_ratio: float
    num_failed: int

    def to_dict(self) -> dict[str, float | int]:
        return asdict(self)


def selftest(concurrencies: tuple[int, ...] = (1, 64, 256), *, ttft_ms: float = 100.0, itl_ms: float = 20.0,
             output_len: int = 32, input_len: int = 32, rounds: int = 5, min_requests: int = 10) -> list[SelftestLevel]:
    ideal_s = (ttft_ms + (output_len - 1) * itl_ms) / 1e3
    levels = []
    with mock_server_process(MockConfig(ttft_ms=ttft_ms, itl_ms=itl_ms)) as url:
        for c in concurrencies:
            n = max(rounds * c, min_requests)
            load = Load(kind="concurrency", concurrency=c, ramp_up_s=ideal_s)
            cfg = BenchConfig(url=url, model="mock", load=load, num_requests=n,
                              num_warmup=c, prompts=PromptConfig(input_len=input_len, output_len=output_len,
                                                                 server_tokenizer=False),
                              scrape_metrics=False, timeout_s=60.0)
            with tempfile.TemporaryDirectory(prefix="flopwise-selftest-") as d:
                s = run_bench(cfg, d).summary
            levels.append(SelftestLevel(
                concurrency=c, num_requests=n,
                added_ttft_ms_mean=(s["ttft_ms"]["mean"] or 0.0) - ttft_ms,
                added_ttft_ms_p99=(s["ttft_ms"]["p99"] or 0.0) - ttft_ms,
                added_tpot_ms_mean=(s["tpot_ms"]["mean"] or 0.0) - itl_ms,
                achieved_rate_ratio=(n / c + (c - 1) / c) * ideal_s / s["duration_s"] if s["duration_s"] else 0.0,
                num_failed=s["num_failed"]))
    return levels
