"""One benchmark run: prompts -> scheduler -> transport -> store, then the summary rebuilt from the store.

The summary of a run is always computed from its saved files (`report_run`), so a finished run, an interrupted
one and `flopwise bench report` give the same numbers by the same code.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from flopwise.bench.arrivals import Load
from flopwise.bench.diagnosis import Diagnosis, diagnose
from flopwise.bench.prometheus import ServerView, scrape, server_view
from flopwise.bench.prompts import PromptSource, load_dataset
from flopwise.bench.scheduler import Slot, run_load
from flopwise.bench.store import RunStore, load_run, write_summary
from flopwise.bench.tokenize import HFTokenizer, load_counter
from flopwise.bench.transport import BenchClient, Endpoint, RequestSpec
from flopwise.errors import WorkloadError
from flopwise.metrics.summary import RequestRecord, summarize
from flopwise.specs.sla import parse_sla

__all__ = ["PromptConfig", "BenchConfig", "RunReport", "run_bench", "resume_bench", "report_run"]


@dataclass(frozen=True, slots=True)
class PromptConfig:
    input_len: int = 512
    output_len: int = 128
    range_ratio: float = 0.0
    dataset: str | None = None
    shared_prefix_len: int = 0
    num_prefixes: int = 1
    tokenizer: str | None = None


@dataclass(frozen=True, slots=True)
class BenchConfig:
    """Everything a run needs but the API key (which is never stored)."""

    url: str
    model: str
    load: Load
    endpoint: Endpoint = "completions"
    num_requests: int | None = 200
    duration_s: float | None = None
    num_warmup: int = 0
    prompts: PromptConfig = field(default_factory=PromptConfig)
    sla: str | None = None
    timeout_s: float = 600.0
    ignore_eos: bool = True
    scrape_metrics: bool = True
    scrape_interval_s: float = 2.0
    seed: int = 0

    def __post_init__(self) -> None:
        if self.num_requests is None and self.duration_s is None:
            raise WorkloadError("give --num-requests or --duration (or both)")
        if self.num_requests is not None and self.num_requests < 1:
            raise WorkloadError("--num-requests must be >= 1")
        if self.duration_s is not None and self.duration_s <= 0:
            raise WorkloadError("--duration must be > 0")
        if self.sla:
            parse_sla(self.sla)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> BenchConfig:
        d = dict(d)
        return cls(**{**d, "load": Load(**d["load"]), "prompts": PromptConfig(**d["prompts"])})


@dataclass(frozen=True, slots=True)
class RunReport:
    """A run's summary (shared keys with `flopwise simulate`), server view and diagnosis."""

    root: Path
    config: BenchConfig
    summary: dict[str, Any]
    server: ServerView | None
    diagnosis: Diagnosis
    interrupted: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {"run_dir": str(self.root), "load": self.config.load.to_dict(), "label": self.config.load.label,
                **self.summary, "interrupted": self.interrupted,
                "server": self.server.to_dict() if self.server else None, "diagnosis": self.diagnosis.to_dict()}


def report_run(root: str | Path, *, interrupted: bool | None = None) -> RunReport:
    """Rebuild a run's summary and diagnosis from its directory (and rewrite its summary.json)."""
    saved = load_run(root)
    cfg = BenchConfig.from_dict(saved.config)
    summary = summarize(saved.records, parse_sla(cfg.sla) if cfg.sla else None, duration_s=saved.duration_s())
    summary["num_unreadable_lines"] = saved.num_bad_lines
    last = max((s["session"] for s in saved.scrapes), default=None)
    view = server_view([s for s in saved.scrapes if s["session"] == last]) if last is not None else None
    if interrupted is None:
        interrupted = cfg.num_requests is not None and len(saved.done_ids()) < cfg.num_requests
    rep = RunReport(Path(root), cfg, summary, view, diagnose(summary, view), interrupted)
    write_summary(root, rep.to_dict())
    return rep


def _prompt_source(cfg: BenchConfig) -> tuple[PromptSource, HFTokenizer | None]:
    pc = cfg.prompts
    counter = load_counter(pc.tokenizer)
    items = load_dataset(pc.dataset, seed=cfg.seed, counter=counter, output_len=pc.output_len) if pc.dataset else None
    src = PromptSource(input_len=pc.input_len, output_len=pc.output_len, seed=cfg.seed, counter=counter,
                       range_ratio=pc.range_ratio, shared_prefix_len=pc.shared_prefix_len,
                       num_prefixes=pc.num_prefixes, items=items)
    return src, counter if isinstance(counter, HFTokenizer) else None


async def _session(cfg: BenchConfig, store: RunStore, api_key: str | None, done: set[int]) -> None:
    source, tokenizer = _prompt_source(cfg)
    t0 = time.perf_counter()

    def clock() -> float:
        return time.perf_counter() - t0

    def spec(i: int, warmup: bool) -> RequestSpec:
        p = source(i, warmup)
        return RequestSpec(i, p.text, p.input_tokens, p.output_len, list(p.messages) if p.messages else None)

    if cfg.num_requests is not None:
        todo = [i for i in range(cfg.num_requests) if i not in done]
        specs = {i: spec(i, False) for i in todo}
        indices: Any = todo
    else:
        specs = {}
        indices = (i for i in itertools.count() if i not in done)

    async with BenchClient(cfg.url, cfg.model, endpoint=cfg.endpoint, api_key=api_key, timeout_s=cfg.timeout_s,
                           ignore_eos=cfg.ignore_eos, counter=tokenizer, clock=clock) as client:

        async def send(slot: Slot) -> None:
            s = spec(slot.index, True) if slot.is_warmup else (specs.pop(slot.index, None) or spec(slot.index, False))
            try:
                rec = await client.send(s, slot.scheduled_at)
            except asyncio.CancelledError as e:
                partial: RequestRecord | None = getattr(e, "record", None)
                if partial is not None:
                    store.append(partial, is_warmup=slot.is_warmup)
                raise
            store.append(rec, is_warmup=slot.is_warmup)

        scraping = cfg.scrape_metrics and await _scrape_into(client, store, clock, "before")
        scraper = asyncio.create_task(_scrape_loop(client, store, clock, cfg.scrape_interval_s)) if scraping else None
        try:
            await run_load(cfg.load, indices, send, num_warmup=cfg.num_warmup, duration_s=cfg.duration_s,
                           seed=cfg.seed, clock=clock)
        finally:
            if scraper is not None:
                scraper.cancel()
                await asyncio.gather(scraper, return_exceptions=True)
                await asyncio.shield(_scrape_into(client, store, clock, "after"))


async def _scrape_into(client: BenchClient, store: RunStore, clock: Any, phase: str) -> bool:
    m = await scrape(client.http)
    if m:
        store.append_scrape(clock(), phase, m)
    return bool(m)


async def _scrape_loop(client: BenchClient, store: RunStore, clock: Any, interval_s: float) -> None:
    while True:
        await asyncio.sleep(interval_s)
        await _scrape_into(client, store, clock, "during")


def run_bench(cfg: BenchConfig, out_dir: str | Path, *, api_key: str | None = None) -> RunReport:
    """Run one load level, saving into `out_dir` (which must not hold a run yet); returns its report.

    On Ctrl-C the records so far are saved and summarised, then KeyboardInterrupt propagates."""
    return _run(cfg, RunStore(Path(out_dir), cfg.to_dict()), set(), api_key)


def resume_bench(out_dir: str | Path, *, api_key: str | None = None) -> RunReport:
    """Continue the run saved in `out_dir` with its saved configuration, sending only the requests not yet
    measured (cancelled ones are sent again)."""
    saved = load_run(out_dir)
    cfg = BenchConfig.from_dict(saved.config)
    return _run(cfg, RunStore(Path(out_dir), cfg.to_dict(), resume=True), saved.done_ids(), api_key)


def _run(cfg: BenchConfig, store: RunStore, done: set[int], api_key: str | None) -> RunReport:
    try:
        _run_async(_session(cfg, store, api_key, done))
    except KeyboardInterrupt:
        store.close()
        report_run(store.root, interrupted=True)
        raise
    store.close()
    return report_run(store.root)


def _run_async(coro: Any) -> None:
    """asyncio.run, on uvloop when it is installed (lower per-event overhead)."""
    try:
        import uvloop  # type: ignore[import-not-found]
    except ImportError:
        asyncio.run(coro)
    else:
        uvloop.run(coro)
