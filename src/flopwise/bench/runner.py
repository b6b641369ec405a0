"""One benchmark run: prompts -> scheduler -> transport -> store, then the summary rebuilt from the store.

The summary of a run is always computed from its saved files (`report_run`), so a finished run, an interrupted
one and `flopwise bench report` give the same numbers by the same code.

Interruption: SIGINT (Ctrl-C) and SIGTERM (what `timeout`, Docker and Kubernetes send) cancel the run: every
in-flight request is recorded as `cancelled`, the final /metrics scrape is attempted, and summary.json is
written; a second signal skips the final scrape, and signals that arrive while summary.json is being written
wait until it is complete. `run_bench` then raises `BenchInterrupted` (a KeyboardInterrupt) carrying the report.

The client watches itself: its process CPU time over the measured phase (an asyncio client is one thread, so
1.0 is a saturated core) and the event loop's lag (how late a 50 ms sleep wakes up, a direct measure of how late
every timestamp can be). When either is high the client, not the server, may be the bottleneck
(`summary["client"]`, a warning and the diagnosis' `client_bound`).
"""

from __future__ import annotations

import asyncio
import itertools
import math
import signal
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from flopwise.bench.arrivals import Load
from flopwise.bench.diagnosis import Diagnosis, diagnose
from flopwise.bench.export import request_rows, to_vllm_result, write_rows
from flopwise.bench.prometheus import ServerView, scrape, server_view
from flopwise.bench.prompts import PromptSource, load_dataset
from flopwise.bench.redact import MASK, redact_url, split_userinfo
from flopwise.bench.scheduler import Slot, run_load
from flopwise.bench.store import ROWS_FILE, VLLM_RESULT_FILE, RunStore, SavedRun, load_run, write_json, write_summary
from flopwise.bench.tokenize import HFTokenizer, ServerTokenizer, TokenCounter, load_counter
from flopwise.bench.transport import BenchClient, Endpoint, RequestSpec
from flopwise.errors import WorkloadError
from flopwise.metrics.summary import RequestRecord, RunSummary, summarize
from flopwise.specs.sla import parse_sla

__all__ = ["PromptConfig", "BenchConfig", "RunReport", "Progress", "BenchInterrupted", "deferred_signals",
           "signals_stay_ignored", "run_bench",
           "resume_bench", "report_run"]

# A client whose process used >= this share of one core over the measured phase, or whose event loop woke
# >= CLIENT_LAG_MS late at p99, is reported as saturated.
CLIENT_CPU_SATURATED = 0.85
CLIENT_LAG_MS = 10.0
_LAG_PROBE_S = 0.05
# a measured phase shorter than this many lag probes (0.5 s) is not judged: its CPU share is mostly setup (a run
# whose requests all fail at once), and it has too few wake-ups for a p99
_MIN_LAG_SAMPLES = 10
_MAX_LAG_SAMPLES = 100_000
# Prompt lengths: warn when the server's count differs from the client's by more than this share on average.
PROMPT_MISMATCH = 0.02
# Delivered vs asked rate: warn when they differ by more than this share.
RATE_MISMATCH = 0.02


@dataclass(frozen=True, slots=True, kw_only=True)
class PromptConfig:
    """`server_tokenizer`: without `tokenizer`, count prompt tokens with the server's own /tokenize when it
    offers one (vLLM), so prompts are exactly `input_len` tokens as the server counts them."""

    input_len: int = 512
    output_len: int = 128
    range_ratio: float = 0.0
    dataset: str | None = None
    shared_prefix_len: int = 0
    num_prefixes: int = 1
    tokenizer: str | None = None
    server_tokenizer: bool = True


@dataclass(frozen=True, slots=True, kw_only=True)
class BenchConfig:
    """Everything a run needs but the API key (which is never stored). `headers` are sent with every request
    (saved with their values masked); `extra_body` is merged into every request body (sampling settings, ...);
    `verify_tls=False` skips certificate checks, `ca_bundle` trusts a PEM file. The saved URL has its user-info
    masked."""

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
    headers: dict[str, str] = field(default_factory=dict)
    extra_body: dict[str, Any] = field(default_factory=dict)
    verify_tls: bool = True
    ca_bundle: str | None = None

    def __post_init__(self) -> None:
        if self.num_requests is None and self.duration_s is None:
            raise WorkloadError("give --num-requests or --duration (or both)")
        if self.num_requests is not None and self.num_requests < 1:
            raise WorkloadError("--num-requests must be >= 1")
        if self.duration_s is not None and not (0 < self.duration_s < math.inf):
            raise WorkloadError("--duration must be a finite number of seconds > 0")
        if not (0 < self.timeout_s < math.inf):
            raise WorkloadError(f"--timeout must be a finite number of seconds > 0; got {self.timeout_s}")
        if self.num_warmup < 0:
            raise WorkloadError("--warmup must be >= 0")
        if self.sla:
            parse_sla(self.sla)

    def to_dict(self) -> dict[str, Any]:
        """As saved in run.json: the URL's user-info and header values masked."""
        d = asdict(self)
        d["url"] = redact_url(self.url)
        d["headers"] = {k: MASK for k in self.headers}
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> BenchConfig:
        """From run.json (non-finite numbers are saved as strings: "inf")."""
        d = dict(d)
        load: dict[str, Any] = {k: float(v) if k in ("rate", "burstiness") and isinstance(v, str) else v
                                for k, v in d["load"].items()}
        return cls(**{**d, "load": Load(**load), "prompts": PromptConfig(**d["prompts"])})


@dataclass(frozen=True, slots=True, kw_only=True)
class RunReport:
    """A run's summary (`metrics`, typed; `summary`, its JSON with the bench's own keys added: the client's
    lag, the asked rate, unreadable lines), server view and diagnosis."""

    root: Path
    config: BenchConfig
    metrics: RunSummary
    summary: dict[str, Any]
    server: ServerView | None
    diagnosis: Diagnosis
    interrupted: bool = False
    warnings: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {"run_dir": str(self.root), "load": self.config.load.to_dict(), "label": self.config.load.label,
                **self.summary, "interrupted": self.interrupted,
                "server": self.server.to_dict() if self.server else None, "diagnosis": self.diagnosis.to_dict(),
                "warnings": list(self.warnings)}


class BenchInterrupted(KeyboardInterrupt):
    """The run was stopped by a signal; its records and summary.json are saved. `report` is its report."""

    def __init__(self, report: RunReport, signum: int) -> None:
        super().__init__(f"interrupted by signal {signum}")
        self.report, self.signum = report, signum


@dataclass(frozen=True, slots=True, kw_only=True)
class Progress:
    """Where a running level stands (for a progress line)."""

    label: str
    num_done: int
    num_failed: int
    num_total: int | None
    elapsed_s: float

    @property
    def rate(self) -> float:
        return self.num_done / self.elapsed_s if self.elapsed_s > 0 else 0.0


def report_run(root: str | Path, *, interrupted: bool | None = None) -> RunReport:
    """Rebuild a run's summary and diagnosis from its directory (and rewrite its summary.json)."""
    saved = load_run(root)
    try:
        cfg = BenchConfig.from_dict(saved.config)
    except (TypeError, KeyError, ValueError) as e:
        raise WorkloadError(f"{root}/run.json has a damaged configuration ({e})") from None
    metrics = summarize(saved.records, parse_sla(cfg.sla) if cfg.sla else None, duration_s=saved.duration_s())
    summary = metrics.to_dict()
    summary["num_unreadable_lines"] = saved.num_bad_lines
    summary["asked_request_rate"] = (cfg.load.rate if not cfg.load.is_closed and cfg.load.rate is not None
                                     and math.isfinite(cfg.load.rate) else None)
    summary["delivered_request_rate"] = _delivered_rate(saved, cfg.load)
    summary["client"] = _client_stats(saved)
    summary["prompt_token_counter"] = next((m["prompt_token_counter"] for m in reversed(saved.session_meta)
                                            if "prompt_token_counter" in m), None)
    last = max((s["session"] for s in saved.scrapes), default=None)
    view = server_view([s for s in saved.scrapes if s["session"] == last]) if last is not None else None
    if interrupted is None:
        interrupted = cfg.num_requests is not None and len(saved.done_ids()) < cfg.num_requests
    rep = RunReport(root=Path(root), config=cfg, metrics=metrics, summary=summary, server=view,
                    diagnosis=diagnose(summary, view), interrupted=interrupted,
                    warnings=tuple(_warnings(summary, cfg, saved)))
    write_summary(root, rep.to_dict())
    write_rows(Path(root) / ROWS_FILE, request_rows(saved.records))
    write_json(Path(root) / VLLM_RESULT_FILE, to_vllm_result(
        saved.records, metrics, model=cfg.model, request_rate=cfg.load.rate if not cfg.load.is_closed else math.inf,
        burstiness=cfg.load.burstiness, max_concurrency=cfg.load.concurrency or cfg.load.max_concurrency,
        endpoint=cfg.endpoint))
    return rep


def _delivered_rate(saved: SavedRun, load: Load) -> float | None:
    """Scheduled sends per second over all sessions (metrics.summary.delivered_rate, per session, summed):
    from the measured phase's start where the schedule is vLLM's (rescaled), else from the first send."""
    n, span = 0, 0.0
    for s in saved.sessions:
        arr = [r.arrival_at for r in saved.records if saved.session_of[r.request_id] == s]
        origin = saved.meta_of(s).get("phase_started_at") if load.rescale else None
        if origin is not None:
            n, span = n + len(arr), span + max(arr) - origin
        elif len(arr) >= 2:
            n, span = n + len(arr) - 1, span + max(arr) - min(arr)
    return n / span if n and span > 0 else None


def _client_stats(saved: SavedRun) -> dict[str, Any] | None:
    stats = [m["client"] for m in saved.session_meta if isinstance(m.get("client"), dict)]
    return stats[-1] if stats else None


def _warnings(summary: dict[str, Any], cfg: BenchConfig, saved: SavedRun) -> list[str]:
    out = []
    asked, got = summary.get("asked_request_rate"), summary.get("delivered_request_rate")
    if asked and got and abs(got - asked) > RATE_MISMATCH * asked:
        why = ("an interrupted session's schedule, cut short, beside the resumed one's" if len(saved.sessions) > 1
               and cfg.load.rescale else "the drawn gaps' sampling error")
        out.append(f"delivered {got:.3g} req/s of the {asked:g} asked ({why}"
                   + ("" if cfg.load.rescale else "; --rescale-arrivals sends request N at exactly N / rate, "
                      "as vllm bench serve does") + ")")
    want, seen = summary.get("input_tokens_requested_mean"), summary.get("input_tokens_mean")
    if want and seen and abs(seen - want) > max(PROMPT_MISMATCH * want, 1.0):
        counter = str(summary.get("prompt_token_counter") or "")
        if cfg.endpoint == "chat" and seen > want and counter.startswith("server"):
            # counted by the served model's own tokenizer: the rest is the chat template the server wraps them in
            out.append(f"prompts were built as {want:.1f} tokens on average ({counter}) and the server counted "
                       f"{seen:.1f}: the {seen - want:.1f} more are its chat template's tokens around each message")
        else:
            out.append(f"prompts were built as {want:.1f} tokens on average ({counter}) but the server counted "
                       f"{seen:.1f}; pass --tokenizer with the served model's tokenizer (or use a server with "
                       "/tokenize) for exact lengths")
    if summary.get("num_usage_rejected"):
        reasons = {r.usage_rejected for r in saved.records if r.usage_rejected}
        out.append(f"{summary['num_usage_rejected']} requests reported usage inconsistent with their stream, counted "
                   f"from the stream instead ({'; '.join(sorted(reasons))[:300]})")
    client = summary.get("client") or {}
    if client.get("saturated"):
        out.append(f"the client was saturated (CPU {100 * client['cpu_util']:.0f}% of a core, event loop up to "
                   f"{client['loop_lag_ms_p99']:.1f} ms late at p99): latencies include client delay; run the "
                   "client on another machine, lower the concurrency, or split the load over processes")
    if summary.get("num_cancelled"):
        out.append(f"{summary['num_cancelled']} requests were cancelled by the interruption (not server failures)")
    dropped = [m.get("vllm_fields_dropped") for m in saved.session_meta if m.get("vllm_fields_dropped")]
    if dropped:
        out.append(f"the server rejected ignore_eos/min_tokens ({dropped[-1]}); they were not sent, so output "
                   "lengths are the model's own")
    return out


def _prompt_source(cfg: BenchConfig, client: BenchClient) -> tuple[PromptSource, TokenCounter | None, str]:
    """The prompt source, the counter for output text (a real tokenizer only), and the prompt counter's name."""
    pc = cfg.prompts
    counter: TokenCounter = load_counter(pc.tokenizer)
    if pc.tokenizer is None and pc.server_tokenizer:
        remote = ServerTokenizer.probe(client.base_url, cfg.model, headers=client.request_headers,
                                       auth=client.auth, verify=cfg.ca_bundle or cfg.verify_tls,
                                       timeout_s=min(cfg.timeout_s, 10.0))
        if remote is not None:
            counter = remote
    items = load_dataset(pc.dataset, seed=cfg.seed, counter=counter, output_len=pc.output_len) if pc.dataset else None
    src = PromptSource(input_len=pc.input_len, output_len=pc.output_len, seed=cfg.seed, counter=counter,
                       range_ratio=pc.range_ratio, shared_prefix_len=pc.shared_prefix_len,
                       num_prefixes=pc.num_prefixes, items=items)
    real = counter if isinstance(counter, (HFTokenizer, ServerTokenizer)) else None
    return src, real, counter.name


class _ClientMonitor:
    """Process CPU time and event-loop lag over the measured phase."""

    def __init__(self) -> None:
        self.lags_ms: list[float] = []
        self._cpu0 = self._wall0 = 0.0

    def start(self) -> None:
        self._cpu0, self._wall0 = time.process_time(), time.perf_counter()

    async def probe(self) -> None:
        while True:
            t = time.perf_counter()
            await asyncio.sleep(_LAG_PROBE_S)
            if len(self.lags_ms) < _MAX_LAG_SAMPLES:
                self.lags_ms.append(max(time.perf_counter() - t - _LAG_PROBE_S, 0.0) * 1e3)

    def stats(self) -> dict[str, Any]:
        wall = time.perf_counter() - self._wall0
        cpu = time.process_time() - self._cpu0
        util = cpu / wall if wall > 0 else 0.0
        lags = np.asarray(self.lags_ms) if self.lags_ms else np.zeros(1)
        p99 = float(np.percentile(lags, 99))
        judged = len(self.lags_ms) >= _MIN_LAG_SAMPLES
        return {"cpu_s": cpu, "wall_s": wall, "cpu_util": util, "loop_lag_ms_p99": p99,
                "loop_lag_ms_max": float(lags.max()),
                "saturated": judged and bool(util >= CLIENT_CPU_SATURATED or p99 >= CLIENT_LAG_MS)}


@dataclass(slots=True)
class _Counts:
    done: int = 0
    failed: int = 0


async def _session(cfg: BenchConfig, store: RunStore, api_key: str | None, done: set[int],
                   progress: Callable[[Progress], None] | None) -> None:
    t0 = time.perf_counter()

    def clock() -> float:
        return time.perf_counter() - t0

    async with BenchClient(cfg.url, cfg.model, endpoint=cfg.endpoint, api_key=api_key, timeout_s=cfg.timeout_s,
                           ignore_eos=cfg.ignore_eos, clock=clock, headers=cfg.headers, extra_body=cfg.extra_body,
                           verify=cfg.verify_tls, ca_bundle=cfg.ca_bundle) as client:
        source, tokenizer, counter_name = _prompt_source(cfg, client)
        client.counter = tokenizer
        store.update_session(prompt_token_counter=counter_name)
        remote = isinstance(tokenizer, ServerTokenizer)

        def spec(i: int, warmup: bool) -> RequestSpec:
            p = source(i, warmup)
            return RequestSpec(request_id=i, prompt=p.text, input_tokens=p.input_tokens, max_tokens=p.output_len,
                               messages=list(p.messages) if p.messages else None)

        if cfg.num_requests is not None:
            todo = [i for i in range(cfg.num_requests) if i not in done]
            specs = {i: spec(i, False) for i in todo}
            indices: Any = todo
        else:
            specs = {}
            indices = (i for i in itertools.count() if i not in done)
        counts = _Counts()

        async def send(slot: Slot) -> None:
            s = specs.pop(slot.index, None) if not slot.is_warmup else None
            if s is None:  # warm-up, or a duration-limited run: built now (the server's /tokenize in a thread)
                s = await asyncio.to_thread(spec, slot.index, slot.is_warmup) if remote else \
                    spec(slot.index, slot.is_warmup)
            try:
                rec = await client.send(s, slot.scheduled_at)
            except asyncio.CancelledError as e:
                partial: RequestRecord | None = getattr(e, "record", None)
                if partial is not None:
                    store.append(partial, is_warmup=slot.is_warmup)
                raise
            store.append(rec, is_warmup=slot.is_warmup)
            if not slot.is_warmup:
                counts.done += 1
                counts.failed += not rec.ok

        scraping = cfg.scrape_metrics and await _scrape_into(client, store, clock, "before")
        monitor = _ClientMonitor()
        helpers = [asyncio.create_task(_scrape_loop(client, store, clock, cfg.scrape_interval_s))] if scraping else []
        helpers.append(asyncio.create_task(monitor.probe()))
        if progress is not None:
            helpers.append(asyncio.create_task(_progress_loop(progress, cfg, counts, clock)))
        # a rescaled schedule spans this session's requests (a resumed run's remaining ones) over their count / rate
        block = 1
        if not cfg.load.is_closed and cfg.load.rate and math.isfinite(cfg.load.rate):
            block = (max(1, len(todo)) if cfg.num_requests is not None
                     else max(1, math.ceil(cfg.load.rate * (cfg.duration_s or 1.0))))

        def on_measured_start(started_at: float) -> None:
            monitor.start()
            store.update_session(phase_started_at=started_at)

        async def baseline() -> None:  # the server's histograms from here on: the warm-up requests left out
            await _scrape_into(client, store, clock, "before")

        try:
            phase = await run_load(cfg.load, indices, send, num_warmup=cfg.num_warmup, duration_s=cfg.duration_s,
                                   seed=cfg.seed, clock=clock, block=block, on_measured_start=on_measured_start,
                                   after_warmup=baseline if scraping else None)
            store.update_session(phase_ended_at=phase.ended_at, num_sent=phase.num_sent)
        finally:
            try:
                store.update_session(client=monitor.stats(), vllm_fields_dropped=client.vllm_fields_dropped)
            finally:
                for h in helpers:
                    h.cancel()
                await asyncio.gather(*helpers, return_exceptions=True)
                if scraping:
                    await asyncio.shield(_scrape_into(client, store, clock, "after"))
                if remote:
                    tokenizer.close()  # type: ignore[union-attr]


async def _scrape_into(client: BenchClient, store: RunStore, clock: Any, phase: str) -> bool:
    m = await scrape(client.http)
    if m:
        store.append_scrape(clock(), phase, m)
    return bool(m)


async def _scrape_loop(client: BenchClient, store: RunStore, clock: Any, interval_s: float) -> None:
    while True:
        await asyncio.sleep(interval_s)
        await _scrape_into(client, store, clock, "during")


async def _progress_loop(progress: Callable[[Progress], None], cfg: BenchConfig, counts: _Counts,
                         clock: Callable[[], float], interval_s: float = 0.5) -> None:
    start = clock()
    while True:
        await asyncio.sleep(interval_s)
        progress(Progress(label=cfg.load.label, num_done=counts.done, num_failed=counts.failed,
                          num_total=cfg.num_requests, elapsed_s=clock() - start))


def run_bench(cfg: BenchConfig, out_dir: str | Path, *, api_key: str | None = None,
              progress: Callable[[Progress], None] | None = None) -> RunReport:
    """Run one load level, saving into `out_dir` (which must not hold a run yet); returns its report.

    On SIGINT or SIGTERM the records so far are saved and summarised, then BenchInterrupted propagates."""
    return _run(cfg, RunStore(Path(out_dir), cfg.to_dict()), set(), api_key, progress)


def resume_bench(out_dir: str | Path, *, api_key: str | None = None, url: str | None = None,
                 headers: dict[str, str] | None = None,
                 progress: Callable[[Progress], None] | None = None) -> RunReport:
    """Continue the run saved in `out_dir` with its saved configuration, sending only the requests not yet
    measured (cancelled ones are sent again). Credentials are never saved: give `url` (with its user-info)
    and `headers` again where they carry them."""
    saved = load_run(out_dir)
    cfg = BenchConfig.from_dict(saved.config)
    if url is not None:
        if split_userinfo(url)[0].rstrip("/") != split_userinfo(cfg.url.replace(MASK + "@", ""))[0].rstrip("/"):
            raise WorkloadError(f"--url {redact_url(url)} is not the saved run's server ({cfg.url})")
        cfg = replace(cfg, url=url)
    elif MASK + "@" in cfg.url:
        cfg = replace(cfg, url=cfg.url.replace(MASK + "@", ""))
    if headers is not None:
        cfg = replace(cfg, headers=headers)
    else:
        cfg = replace(cfg, headers={k: v for k, v in cfg.headers.items() if v != MASK})
    store = RunStore(Path(out_dir), cfg.to_dict(), resume=True)
    return _run(cfg, store, saved.done_ids(), api_key, progress)


@dataclass(slots=True)
class _Stop:
    signum: int | None = None
    # after the first signal, the handlers to put back once the run's summary is saved (until then further
    # signals are ignored: one landing in the event loop's teardown would print a traceback)
    previous: dict[int, Any] = field(default_factory=dict)


_SIGNALS_STAY_IGNORED: ContextVar[bool] = ContextVar("signals_stay_ignored", default=False)


@contextmanager
def signals_stay_ignored() -> Iterator[None]:
    """Inside the block, a run stopped by a signal leaves SIGINT / SIGTERM ignored instead of putting the caller's
    handlers back: the CLI, which prints the summary and exits next (`ignore_signals`), so a second Ctrl-C landing
    between the run's end and that print cannot cut it short. A Python caller outside it gets its handlers back."""
    token = _SIGNALS_STAY_IGNORED.set(True)
    try:
        yield
    finally:
        _SIGNALS_STAY_IGNORED.reset(token)


def _run(cfg: BenchConfig, store: RunStore, done: set[int], api_key: str | None,
         progress: Callable[[Progress], None] | None) -> RunReport:
    stop = _Stop()
    try:
        _run_async(_guarded(_session(cfg, store, api_key, done, progress), stop))
    except KeyboardInterrupt:  # a signal the loop's handlers did not see (e.g. before the loop started)
        stop.signum = stop.signum or signal.SIGINT
    finally:
        with deferred_signals():
            store.close()
            rep = report_run(store.root, interrupted=True if stop.signum else None)
        if not (stop.signum and _SIGNALS_STAY_IGNORED.get()):
            for sig, handler in stop.previous.items():
                signal.signal(sig, handler)
    if stop.signum:
        raise BenchInterrupted(rep, stop.signum)
    return rep


async def _guarded(coro: Any, stop: _Stop) -> None:
    """Run `coro`; SIGINT / SIGTERM cancel it (recorded in `stop`); a second signal cancels the clean-up too."""
    loop = asyncio.get_running_loop()
    task = asyncio.ensure_future(coro)
    installed = []

    def on_signal(signum: int) -> None:
        if stop.signum is None:
            stop.signum = signum
        task.cancel()

    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGINT, signal.SIGTERM):
            try:
                loop.add_signal_handler(sig, on_signal, sig)
                installed.append(sig)
            except (NotImplementedError, RuntimeError, ValueError):  # not on this platform or loop
                pass
    try:
        await task
    except asyncio.CancelledError:
        if stop.signum is None:
            raise
    finally:
        for sig in installed:
            loop.remove_signal_handler(sig)
        if stop.signum is not None:
            stop.previous = {sig: signal.signal(sig, signal.SIG_IGN) for sig in installed}


@contextmanager
def deferred_signals() -> Iterator[None]:
    """SIGINT / SIGTERM that arrive inside the block are held back until it is done (the summary is written
    whole, and the CLI prints it whole); then the run ends as interrupted anyway."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    held: list[int] = []
    old = {sig: signal.signal(sig, lambda s, _f: held.append(s)) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, h in old.items():
            signal.signal(sig, h)


def ignore_signals() -> None:
    """Ignore SIGINT / SIGTERM from here to the process's exit: an interrupted run's summary is printed whole and the
    exit status stays 130 / 143 even when another signal lands while the interpreter shuts down (where a handler
    other than SIG_IGN is reset to the default action, and the process would die of the signal)."""
    if threading.current_thread() is not threading.main_thread():
        return
    for sig in (signal.SIGINT, signal.SIGTERM):
        try:
            signal.signal(sig, signal.SIG_IGN)
        except KeyboardInterrupt:  # one already pending ran its old handler first: ignore it too
            signal.signal(sig, signal.SIG_IGN)


def _run_async(coro: Any) -> None:
    """asyncio.run, on uvloop when it is installed (lower per-event overhead)."""
    try:
        import uvloop  # optional extra: a faster event loop
    except ImportError:
        asyncio.run(coro)
    else:
        uvloop.run(coro)


def exit_code(signum: int) -> int:
    """The shell's exit status for a run stopped by `signum` (130 for SIGINT, 143 for SIGTERM)."""
    return 128 + int(signum)

