"""Send one streaming request to an OpenAI-compatible server and time it.

One `httpx.AsyncClient` per run, opened and closed by `BenchClient` (an async context manager): one connection
pool (`http11.FastHTTP11Transport`, O(1) per request), no per-request session setup. Instants come from `time.perf_counter()` (monotonic); every SSE event
parsed from one network read gets the instant of that read.

Error kinds (`RequestRecord.error_kind`):
    http_<status>    the server answered with a non-2xx status (http_500, http_429, ...)
    timeout          no answer, or a gap between reads, longer than the timeouts
    connect          the connection could not be opened
    dropped_stream   the connection closed before `data: [DONE]` (or a transport error mid-stream)
    malformed_sse    a line that is not SSE, or a `data:` payload that is not JSON
    server_error     the stream carried an `{"error": ...}` object
    empty_response   the stream ended normally but carried no content
    cancelled        the run was interrupted (Ctrl-C) while the request was in flight
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass, field
from typing import Any, Literal

import httpx

from flopwise.bench.http11 import FastHTTP11Transport
from flopwise.bench.tokenize import TokenCounter
from flopwise.metrics.summary import RequestRecord

__all__ = ["Endpoint", "RequestSpec", "BenchClient", "SSEParser", "MalformedSSE", "chunk_token_counts"]

Endpoint = Literal["completions", "chat"]
_PATHS = {"completions": "/v1/completions", "chat": "/v1/chat/completions"}


class MalformedSSE(Exception):
    """A line that no SSE producer would send."""


class SSEParser:
    """Incremental Server-Sent Events parser: feed bytes, get the `data` payloads of complete events.

    Comments (`:`), `event:`, `id:` and `retry:` lines are accepted and ignored; any other non-empty line
    raises MalformedSSE. Multi-line `data:` fields are joined with newlines, as the SSE spec says."""

    __slots__ = ("_buf", "_data")

    def __init__(self) -> None:
        self._buf = b""
        self._data: list[bytes] = []

    def feed(self, chunk: bytes) -> list[bytes]:
        buf = self._buf + chunk
        *lines, self._buf = buf.split(b"\n")
        out: list[bytes] = []
        for raw in lines:
            line = raw[:-1] if raw.endswith(b"\r") else raw
            if not line:
                if self._data:
                    out.append(b"\n".join(self._data))
                    self._data = []
            elif line.startswith(b"data:"):
                v = line[5:]
                self._data.append(v[1:] if v.startswith(b" ") else v)
            elif line.startswith((b":", b"event:", b"id:", b"retry:")):
                continue
            else:
                raise MalformedSSE(f"not an SSE line: {line[:80]!r}")
        return out

    def close(self) -> list[bytes]:
        """Events still pending at end of stream (a final event without its blank line)."""
        out = self.feed(b"\n\n") if self._buf or self._data else []
        return out


@dataclass(frozen=True, slots=True)
class RequestSpec:
    """What to send. `input_tokens` is the client's estimate, replaced by the server's usage when given."""

    request_id: int
    prompt: str
    input_tokens: int
    max_tokens: int
    messages: list[dict[str, Any]] | None = None


@dataclass(slots=True)
class _Stream:
    chunk_times: list[float] = field(default_factory=list)
    chunk_texts: list[str] = field(default_factory=list)
    chunk_logprob_tokens: list[int | None] = field(default_factory=list)
    usage: dict[str, Any] | None = None
    done: bool = False


class BenchClient:
    """The run's one HTTP client. Use as `async with BenchClient(...) as c: await c.send(spec, arrival_at)`.

    `ignore_eos` and `min_tokens` (vLLM, SGLang, llama.cpp extensions) ask for exactly `max_tokens` tokens;
    `stream_options.include_usage` asks for the server's token counts. `api_key` goes only into the
    Authorization header. `extra_body` is merged into every payload."""

    def __init__(self, base_url: str, model: str, *, endpoint: Endpoint = "completions", api_key: str | None = None,
                 timeout_s: float = 600.0, connect_timeout_s: float = 10.0, ignore_eos: bool = True,
                 extra_body: dict[str, Any] | None = None, counter: TokenCounter | None = None,
                 clock: Any = time.perf_counter) -> None:
        self.base_url = base_url.rstrip("/")
        for suffix in ("/v1/completions", "/v1/chat/completions", "/v1"):
            if self.base_url.endswith(suffix):
                self.base_url = self.base_url[: -len(suffix)]
        self.model = model
        self.endpoint: Endpoint = endpoint
        self.timeout_s = timeout_s
        self.ignore_eos = ignore_eos
        self.extra_body = dict(extra_body or {})
        self.counter = counter
        self.clock = clock
        self._headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._timeout = httpx.Timeout(timeout_s, connect=connect_timeout_s)
        self._client: httpx.AsyncClient | None = None

    async def __aenter__(self) -> BenchClient:
        self._client = httpx.AsyncClient(base_url=self.base_url, headers=self._headers, timeout=self._timeout,
                                         transport=FastHTTP11Transport(), trust_env=False)
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._client is not None:
            await self._client.aclose()
            self._client = None

    @property
    def http(self) -> httpx.AsyncClient:
        if self._client is None:
            raise RuntimeError("BenchClient used outside `async with`")
        return self._client

    def payload(self, spec: RequestSpec) -> dict[str, Any]:
        body: dict[str, Any] = {"model": self.model, "max_tokens": spec.max_tokens, "stream": True,
                                "stream_options": {"include_usage": True}, "temperature": 0.0}
        if self.ignore_eos:
            body.update(ignore_eos=True, min_tokens=spec.max_tokens)
        if self.endpoint == "chat":
            body["messages"] = spec.messages or [{"role": "user", "content": spec.prompt}]
        else:
            body["prompt"] = spec.prompt
        body.update(self.extra_body)
        return body

    async def send(self, spec: RequestSpec, arrival_at: float) -> RequestRecord:
        """Send `spec` (scheduled at `arrival_at`) and return its record; never raises for server faults.

        On cancellation the partial record is attached to the CancelledError as `.record` and re-raised."""
        rec = RequestRecord(request_id=spec.request_id, arrival_at=arrival_at, input_tokens=spec.input_tokens,
                            output_tokens=0)
        st = _Stream()
        body = json.dumps(self.payload(spec)).encode()
        try:
            async with asyncio.timeout(self.timeout_s):
                rec.sent_at = self.clock()
                await self._stream(body, st, rec)
        except asyncio.CancelledError as e:
            _finish(rec, st, self.counter)
            rec.error_kind, rec.error = "cancelled", "run interrupted while the request was in flight"
            e.record = rec  # type: ignore[attr-defined]
            raise
        except (TimeoutError, httpx.TimeoutException) as e:
            rec.error_kind, rec.error = "timeout", f"timed out ({type(e).__name__}) after {self.timeout_s:g} s limit"
        except httpx.ConnectError as e:
            rec.error_kind, rec.error = "connect", f"cannot connect to {self.base_url}: {e}"
        except (httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError) as e:
            rec.error_kind, rec.error = "dropped_stream", f"connection lost mid-stream: {e or type(e).__name__}"
        except MalformedSSE as e:
            rec.error_kind, rec.error = "malformed_sse", str(e)
        except httpx.HTTPError as e:
            rec.error_kind, rec.error = "dropped_stream", f"{type(e).__name__}: {e}"
        _finish(rec, st, self.counter)
        return rec

    async def _stream(self, body: bytes, st: _Stream, rec: RequestRecord) -> None:
        headers = {"content-type": "application/json", "accept": "text/event-stream"}
        async with self.http.stream("POST", _PATHS[self.endpoint], content=body, headers=headers) as resp:
            if resp.status_code >= 300:
                text = (await resp.aread())[:300].decode("utf-8", "replace")
                rec.error_kind, rec.error = f"http_{resp.status_code}", f"HTTP {resp.status_code}: {text}"
                return
            parser = SSEParser()
            clock = self.clock
            finished = False
            async for raw in resp.aiter_raw():
                if finished:
                    continue  # drain to the end of the body so the connection goes back to the pool
                now = clock()
                for data in parser.feed(raw):
                    if _on_event(data, now, st, rec):
                        finished = True
                        break
            if not finished:
                for data in parser.close():
                    if _on_event(data, clock(), st, rec):
                        break
        if not st.done:
            rec.error_kind = "dropped_stream"
            rec.error = f"stream ended without [DONE] after {len(st.chunk_times)} content chunks"


def _on_event(data: bytes, now: float, st: _Stream, rec: RequestRecord) -> bool:
    """Apply one SSE data payload; True when the stream is finished (or failed)."""
    if data == b"[DONE]":
        st.done = True
        return True
    try:
        obj = json.loads(data)
    except ValueError:
        raise MalformedSSE(f"data is not JSON: {data[:80]!r}") from None
    if not isinstance(obj, dict):
        raise MalformedSSE(f"data is not a JSON object: {data[:80]!r}")
    if obj.get("error"):
        err = obj["error"]
        rec.error_kind = "server_error"
        rec.error = str(err.get("message", err) if isinstance(err, dict) else err)[:300]
        return True
    if obj.get("usage"):
        st.usage = obj["usage"]
    for ch in obj.get("choices") or ():
        text = ch.get("text")
        n_lp: int | None = None
        if text is None:
            delta = ch.get("delta") or {}
            text = delta.get("content") or delta.get("reasoning_content") or delta.get("reasoning") or ""
            lp = (ch.get("logprobs") or {}).get("content")
            n_lp = len(lp) if isinstance(lp, list) else None
        else:
            lp = (ch.get("logprobs") or {}).get("tokens")
            n_lp = len(lp) if isinstance(lp, list) else None
        if text:
            st.chunk_times.append(now)
            st.chunk_texts.append(text)
            st.chunk_logprob_tokens.append(n_lp)
    return False


def _finish(rec: RequestRecord, st: _Stream, counter: TokenCounter | None) -> None:
    """Fill token times, counts and their source from the stream."""
    rec.token_times = st.chunk_times
    usage = st.usage or {}
    if isinstance(usage.get("prompt_tokens"), int):
        rec.input_tokens = usage["prompt_tokens"]
    if isinstance(usage.get("completion_tokens"), int):
        n, source = usage["completion_tokens"], "usage"
    elif counter is not None and st.chunk_texts:
        n, source = counter.count("".join(st.chunk_texts)), "tokenizer"
    else:
        n, source = len(st.chunk_times), "chunks"
    rec.output_tokens = n
    rec.output_tokens_source = source
    counts = chunk_token_counts(n, st.chunk_texts, st.chunk_logprob_tokens)
    rec.chunk_tokens = None if all(c == 1 for c in counts) else counts
    if rec.error is None and not st.chunk_times:
        rec.error_kind, rec.error = "empty_response", "the stream carried no content"


def chunk_token_counts(n: int, texts: list[str], logprob_tokens: list[int | None]) -> list[int]:
    """Tokens carried by each chunk, summing to `n` when n >= len(texts).

    Exact where every chunk lists its logprob tokens; one each when n equals the number of chunks; otherwise
    the surplus n - len(texts) is spread in proportion to each chunk's characters beyond its first (largest
    remainders), every chunk keeping at least one token."""
    m = len(texts)
    if m == 0:
        return []
    if all(c is not None for c in logprob_tokens) and sum(logprob_tokens) == n:  # type: ignore[arg-type]
        return [int(c) for c in logprob_tokens]  # type: ignore[arg-type]
    if n <= m:
        return [1] * m
    extra = n - m
    weights = [max(len(t) - 1, 0) for t in texts]
    total = sum(weights) or m
    if not sum(weights):
        weights = [1] * m
    shares = [extra * w / total for w in weights]
    counts = [1 + int(s) for s in shares]
    rest = n - sum(counts)
    for i in sorted(range(m), key=lambda i: shares[i] - int(shares[i]), reverse=True)[:rest]:
        counts[i] += 1
    return counts
