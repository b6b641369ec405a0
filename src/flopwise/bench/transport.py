"""Send one streaming request to an OpenAI-compatible server and time it.

One `httpx.AsyncClient` per run, opened and closed by `BenchClient` (an async context manager): one connection
pool (`http11.FastHTTP11Transport`, O(1) per request), no per-request session setup. Instants come from
`time.perf_counter()` (monotonic); every SSE event parsed from one network read gets the instant of that read.

What is timed (as `vllm bench serve` does): every chunk that carries a `choices` entry, whatever its text. A
token that is an incomplete UTF-8 byte sequence streams as a chunk with empty text; it is still a token, so it
is timed (TTFT, ITL, E2E) and counted. Not timed: the usage-only chunk (`"choices": []`) and, on the chat
endpoint, the role-only first chunk (`"delta": {"role": "assistant", "content": ""}`, no text, reasoning or tool
call): it announces the reply and carries no token. vLLM's server sends it in the same step as the first token,
so skipping it changes nothing there; `vllm bench serve` times it, so against a server that sends it at once
(before any token) vLLM's client reports a TTFT of ~0 and flopwise the time to the real first token.

Token counts: the server's `usage.completion_tokens` when it is a count consistent with the stream (at most the
body's `max_tokens`, at least the chunks with text); otherwise the client's tokenizer over the text, or one per
chunk (`RequestRecord.output_tokens_source`, and `usage_rejected` says why usage was not used). Prompt tokens:
`usage.prompt_tokens` when plausible; the client's own count is kept as `input_tokens_requested`.

Bounds: an SSE event over `max_event_bytes`, a body over `max_body_bytes` or more than 2 * max_tokens + 64
timed chunks ends the request as `oversized`, so a faulty server cannot exhaust the client's memory.

Error kinds (`RequestRecord.error_kind`):
    http_<status>    the server answered with a non-2xx status (http_500, http_429, ...)
    timeout          no answer, or a gap between reads, longer than the timeouts
    connect          the connection could not be opened
    dropped_stream   the connection closed before `data: [DONE]` (or a transport error mid-stream)
    protocol_error   the response broke HTTP/1.1 framing (bad status line, Content-Length or chunk size)
    malformed_sse    a line that is not SSE, a `data:` payload that is not JSON, or a chunk of the wrong shape
                     (`"choices": "abc"`, `"choices": [null]`, `"delta": "tok"`)
    server_error     the stream carried an `{"error": ...}` event (its message is kept in `error`)
    truncated        with ignore_eos, the stream ended normally with fewer tokens than max_tokens
    oversized        the response exceeded the client's bounds (see above)
    empty_response   the stream ended normally but carried no chunk with a choice
    client_error     an unexpected exception in the client (a bug: please report it); its type and message
    cancelled        the run was interrupted (Ctrl-C, SIGTERM) while the request was in flight; not a server
                     failure (`metrics.summary` counts it apart)
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass, field
from typing import Any, Literal

import httpx

from flopwise.bench.http11 import FastHTTP11Transport, FramingError
from flopwise.bench.redact import Redactor, redact_url, split_userinfo
from flopwise.bench.tokenize import TokenCounter
from flopwise.metrics.summary import RequestRecord

__all__ = ["Endpoint", "RequestSpec", "BenchClient", "SSEParser", "MalformedSSE", "Oversized", "chunk_token_counts",
           "ERROR_KINDS"]

Endpoint = Literal["completions", "chat"]
_PATHS = {"completions": "/v1/completions", "chat": "/v1/chat/completions"}
ERROR_KINDS = ("timeout", "connect", "dropped_stream", "protocol_error", "malformed_sse", "server_error",
               "truncated", "oversized", "empty_response", "client_error", "cancelled")  # and http_<status>
MAX_EVENT_BYTES = 1 << 20
_ERROR_BODY_BYTES = 4096


class MalformedSSE(Exception):
    """A line that no SSE producer would send, or a chunk that is not an OpenAI completion chunk."""


class Oversized(Exception):
    """The response exceeded a client bound."""


class SSEParser:
    """Incremental Server-Sent Events parser: feed bytes, get the `data` payloads of complete events.

    Comments (`:`), `event:`, `id:` and `retry:` lines are accepted and ignored; any other non-empty line
    raises MalformedSSE. Multi-line `data:` fields are joined with newlines, as the SSE spec says. An event (or
    an unterminated line) longer than `max_event_bytes` raises Oversized."""

    __slots__ = ("_buf", "_data", "_data_bytes", "max_event_bytes")

    def __init__(self, max_event_bytes: int = MAX_EVENT_BYTES) -> None:
        self._buf = b""
        self._data: list[bytes] = []
        self._data_bytes = 0
        self.max_event_bytes = max_event_bytes

    def feed(self, chunk: bytes) -> list[bytes]:
        buf = self._buf + chunk
        *lines, self._buf = buf.split(b"\n")
        if len(self._buf) > self.max_event_bytes:
            raise Oversized(f"an SSE line over {self.max_event_bytes} bytes")
        out: list[bytes] = []
        for raw in lines:
            line = raw[:-1] if raw.endswith(b"\r") else raw
            if not line:
                if self._data:
                    out.append(b"\n".join(self._data))
                    self._data = []
                    self._data_bytes = 0
            elif line.startswith(b"data:"):
                v = line[5:]
                v = v[1:] if v.startswith(b" ") else v
                self._data_bytes += len(v)
                if self._data_bytes > self.max_event_bytes:
                    raise Oversized(f"an SSE event over {self.max_event_bytes} bytes")
                self._data.append(v)
            elif line.startswith((b":", b"event:", b"id:", b"retry:")):
                continue
            else:
                raise MalformedSSE(f"not an SSE line: {line[:80]!r}")
        return out

    def close(self) -> list[bytes]:
        """Events still pending at end of stream (a final event without its blank line)."""
        out = self.feed(b"\n\n") if self._buf or self._data else []
        return out


@dataclass(frozen=True, slots=True, kw_only=True)
class RequestSpec:
    """What to send. `input_tokens` is the client's count, replaced by the server's usage when given."""

    request_id: int
    prompt: str
    input_tokens: int
    max_tokens: int
    messages: list[dict[str, Any]] | None = None


@dataclass(slots=True, kw_only=True)
class _Stream:
    chunk_times: list[float] = field(default_factory=list)
    chunk_texts: list[str] = field(default_factory=list)
    chunk_logprob_tokens: list[int | None] = field(default_factory=list)
    chunk_finishes: list[bool] = field(default_factory=list)
    usage: dict[str, Any] | None = None
    finish_reason: str | None = None
    done: bool = False
    body_bytes: int = 0
    max_chunks: int = 1 << 20


class BenchClient:
    """The run's one HTTP client. Use as `async with BenchClient(...) as c: await c.send(spec, arrival_at)`.

    `ignore_eos` and `min_tokens` (vLLM, SGLang, llama.cpp extensions) ask for exactly `max_tokens` tokens;
    `stream_options.include_usage` asks for the server's token counts. `api_key` goes only into the
    Authorization header; user-info in `base_url` becomes basic auth. `headers` are added to every request;
    `extra_body` is merged into every payload (it may override any field, e.g. temperature). `verify=False` skips
    TLS certificate checks, `ca_bundle` trusts the given PEM file. Every secret is masked (`redact`) in what a
    record keeps."""

    def __init__(self, base_url: str, model: str, *, endpoint: Endpoint = "completions", api_key: str | None = None,
                 timeout_s: float = 600.0, connect_timeout_s: float = 10.0, ignore_eos: bool = True,
                 extra_body: dict[str, Any] | None = None, counter: TokenCounter | None = None,
                 clock: Any = time.perf_counter, headers: dict[str, str] | None = None, verify: bool = True,
                 ca_bundle: str | None = None, max_event_bytes: int = MAX_EVENT_BYTES) -> None:
        url, userinfo = split_userinfo(base_url.rstrip("/"))
        self.base_url = url
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
        self.max_event_bytes = max_event_bytes
        self._headers = dict(headers or {})
        if api_key:
            self._headers["Authorization"] = f"Bearer {api_key}"
        self._auth = httpx.BasicAuth(*userinfo) if userinfo else None
        self.vllm_fields_dropped: str | None = None  # the server's answer when it rejected ignore_eos/min_tokens
        self.redact = Redactor([api_key, *(userinfo or ()), *self._headers.values(), *(v for h in self._headers.values()
                                                                                      for v in h.split()[1:])])
        self._timeout = httpx.Timeout(timeout_s, connect=connect_timeout_s)
        self._verify, self._ca_bundle = verify, ca_bundle
        self._client: httpx.AsyncClient | None = None

    async def __aenter__(self) -> BenchClient:
        self._client = httpx.AsyncClient(base_url=self.base_url, headers=self._headers, timeout=self._timeout,
                                         auth=self._auth, trust_env=False,
                                         transport=FastHTTP11Transport(verify=self._verify, ca_bundle=self._ca_bundle))
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._client is not None:
            await self._client.aclose()
            self._client = None

    @property
    def request_headers(self) -> dict[str, str]:
        """The headers sent with every request (credentials included: never store them)."""
        return dict(self._headers)

    @property
    def auth(self) -> httpx.BasicAuth | None:
        return self._auth

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
        """Send `spec` (scheduled at `arrival_at`) and return its record; never raises for server faults
        (any exception becomes a failed record).

        A server that rejects the vLLM extensions (HTTP 400/422 naming ignore_eos or min_tokens) is asked again
        without them, and they are not sent for the rest of the run (`vllm_fields_dropped`).
        On cancellation the partial record is attached to the CancelledError as `.record` and re-raised."""
        rec = await self._send_once(spec, arrival_at)
        if self.ignore_eos and rec.error_kind in ("http_400", "http_422") and rec.error and \
                any(k in rec.error.lower() for k in ("ignore_eos", "min_tokens")):
            self.ignore_eos = False
            self.vllm_fields_dropped = rec.error[:200]
            rec = await self._send_once(spec, arrival_at)
        return rec

    async def _send_once(self, spec: RequestSpec, arrival_at: float) -> RequestRecord:
        rec = RequestRecord(request_id=spec.request_id, arrival_at=arrival_at, input_tokens=spec.input_tokens,
                            output_tokens=0, input_tokens_requested=spec.input_tokens)
        payload = self.payload(spec)
        max_tokens = _int_or(payload.get("max_completion_tokens", payload.get("max_tokens")), spec.max_tokens)
        st = _Stream(max_chunks=2 * max_tokens + 64)
        max_body = (1 << 20) + 8192 * max_tokens
        body = json.dumps(payload).encode()
        try:
            async with asyncio.timeout(self.timeout_s):
                rec.sent_at = self.clock()
                await self._stream(body, st, rec, max_body)
        except asyncio.CancelledError as e:
            self._finish(rec, st, max_tokens)
            rec.error_kind, rec.error = "cancelled", "run interrupted while the request was in flight"
            e.record = rec  # type: ignore[attr-defined]
            raise
        except (TimeoutError, httpx.TimeoutException) as e:
            rec.error_kind, rec.error = "timeout", f"timed out ({type(e).__name__}) after {self.timeout_s:g} s limit"
        except httpx.ConnectError as e:
            rec.error_kind, rec.error = "connect", f"cannot connect to {redact_url(self.base_url)}: {e}"
        except FramingError as e:
            rec.error_kind, rec.error = "protocol_error", f"invalid HTTP response: {e}"
        except (httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError) as e:
            rec.error_kind, rec.error = "dropped_stream", f"connection lost mid-stream: {e or type(e).__name__}"
        except MalformedSSE as e:
            rec.error_kind, rec.error = "malformed_sse", str(e)
        except Oversized as e:
            rec.error_kind, rec.error = "oversized", str(e)
        except httpx.HTTPError as e:
            rec.error_kind, rec.error = "dropped_stream", f"{type(e).__name__}: {e}"
        except Exception as e:  # noqa: BLE001 - one bad response is one failed request, never a lost run
            rec.error_kind, rec.error = "client_error", f"{type(e).__name__}: {e}"
        self._finish(rec, st, max_tokens)
        if rec.error is not None:
            rec.error = self.redact(rec.error)[:500]
        return rec

    async def _stream(self, body: bytes, st: _Stream, rec: RequestRecord, max_body: int) -> None:
        headers = {"content-type": "application/json", "accept": "text/event-stream"}
        async with self.http.stream("POST", _PATHS[self.endpoint], content=body, headers=headers) as resp:
            if resp.status_code >= 300:
                text = b""
                async for raw in resp.aiter_raw():
                    text += raw
                    if len(text) >= _ERROR_BODY_BYTES:
                        break  # leaving early closes the connection instead of reading a huge body
                msg = text[:300].decode("utf-8", "replace")
                rec.error_kind, rec.error = f"http_{resp.status_code}", f"HTTP {resp.status_code}: {msg}"
                return
            parser = SSEParser(self.max_event_bytes)
            clock = self.clock
            chat = self.endpoint == "chat"
            finished = False
            async for raw in resp.aiter_raw():
                if finished:
                    continue  # drain to the end of the body so the connection goes back to the pool
                now = clock()
                st.body_bytes += len(raw)
                if st.body_bytes > max_body:
                    raise Oversized(f"response body over {max_body} bytes")
                for data in parser.feed(raw):
                    if _on_event(data, now, st, rec, chat):
                        finished = True
                        break
            if not finished:
                for data in parser.close():
                    if _on_event(data, clock(), st, rec, chat):
                        break
        # a body that ended cleanly after the choice's finish_reason is a complete response though the server
        # sent no closing [DONE] (as `vllm bench serve` counts it: it never requires one); without a
        # finish_reason the stream was cut short
        if not st.done and rec.error is None and st.finish_reason is None:
            rec.error_kind = "dropped_stream"
            rec.error = (f"stream ended after {len(st.chunk_times)} chunks without a finish_reason or the closing "
                         "[DONE]")

    def _finish(self, rec: RequestRecord, st: _Stream, max_tokens: int) -> None:
        _finish(rec, st, self.counter, max_tokens, self.ignore_eos)


def _int_or(v: Any, default: int) -> int:
    return v if isinstance(v, int) and not isinstance(v, bool) and v > 0 else default


_TEXT_KEYS = ("content", "reasoning_content", "reasoning")


def _on_event(data: bytes, now: float, st: _Stream, rec: RequestRecord, chat: bool) -> bool:
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
        msg = err.get("message", err) if isinstance(err, dict) else err
        rec.error = f"server error in stream: {str(msg)[:300]}"
        return True
    usage = obj.get("usage")
    if usage is not None:
        if not isinstance(usage, dict):
            raise MalformedSSE(f"usage is not an object: {str(usage)[:80]!r}")
        st.usage = usage
    choices = obj.get("choices")
    if choices is None:
        return False
    if not isinstance(choices, list):
        raise MalformedSSE(f"choices is not a list: {str(choices)[:80]!r}")
    if not choices:
        return False  # the usage-only chunk
    if not chat and len(choices) == 1 and type(ch0 := choices[0]) is dict and "delta" not in ch0:
        # the common completions chunk, handled without the general loop below (the client's hot path)
        text = ch0.get("text")
        if text is None:
            text = ""
        elif type(text) is not str:
            raise MalformedSSE(f"text is not a string: {str(text)[:80]!r}")
        fin = ch0.get("finish_reason")
        if fin is not None:
            st.finish_reason = str(fin)
        lp = ch0.get("logprobs")
        lp = lp.get("tokens") if type(lp) is dict else None
        if len(st.chunk_times) >= st.max_chunks:
            raise Oversized(f"more than {st.max_chunks} chunks for max_tokens {(st.max_chunks - 64) // 2}")
        st.chunk_times.append(now)
        st.chunk_texts.append(text)
        st.chunk_logprob_tokens.append(len(lp) if type(lp) is list else None)
        st.chunk_finishes.append(fin is not None)
        return False
    text_parts: list[str] = []
    n_lp: int | None = 0
    finish = False
    role_only = chat
    for ch in choices:
        if not isinstance(ch, dict):
            raise MalformedSSE(f"a choice is not an object: {str(ch)[:80]!r}")
        if ch.get("finish_reason") is not None:
            finish = True
            st.finish_reason = str(ch["finish_reason"])
        if chat or "delta" in ch:
            delta = ch.get("delta")
            if delta is None:
                delta = {}
            if not isinstance(delta, dict):
                raise MalformedSSE(f"delta is not an object: {str(delta)[:80]!r}")
            text = "".join(t for k in _TEXT_KEYS if isinstance(t := delta.get(k), str))
            if any(delta.get(k) not in (None, "") and not isinstance(delta.get(k), str) for k in _TEXT_KEYS):
                raise MalformedSSE(f"delta content is not a string: {str(delta)[:80]!r}")
            if text or delta.get("tool_calls") or "role" not in delta or ch.get("finish_reason") is not None:
                role_only = False
            lp = ch.get("logprobs")
            lp = lp.get("content") if isinstance(lp, dict) else None
        else:
            text = ch.get("text")
            if text is None:
                text = ""
            if not isinstance(text, str):
                raise MalformedSSE(f"text is not a string: {str(text)[:80]!r}")
            lp = ch.get("logprobs")
            lp = lp.get("tokens") if isinstance(lp, dict) else None
            role_only = False
        text_parts.append(text)
        n_lp = None if n_lp is None or not isinstance(lp, list) else n_lp + len(lp)
    if role_only:
        return False  # the chat role-only first chunk: no token (see the module docstring)
    if len(st.chunk_times) >= st.max_chunks:
        raise Oversized(f"more than {st.max_chunks} chunks for max_tokens {(st.max_chunks - 64) // 2}")
    st.chunk_times.append(now)
    st.chunk_texts.append("".join(text_parts))
    st.chunk_logprob_tokens.append(n_lp)
    st.chunk_finishes.append(finish)
    return False


def _usage_count(usage: dict[str, Any], key: str) -> int | None:
    v = usage.get(key)
    return v if isinstance(v, int) and not isinstance(v, bool) and v >= 0 else None


def _finish(rec: RequestRecord, st: _Stream, counter: TokenCounter | None, max_tokens: int,
            ignore_eos: bool) -> None:
    """Fill token times, counts and their source from the stream; check usage against the stream."""
    rec.token_times = st.chunk_times
    usage = st.usage or {}
    n_text = sum(1 for t in st.chunk_texts if t)
    n: int | None = None
    if "completion_tokens" in usage:
        ct = _usage_count(usage, "completion_tokens")
        if ct is None:
            rec.usage_rejected = f"usage.completion_tokens {str(usage['completion_tokens'])[:40]!r} is not a count"
        elif ct > max_tokens:
            rec.usage_rejected = f"usage.completion_tokens {ct} exceeds max_tokens {max_tokens}"
        elif ct < n_text:
            rec.usage_rejected = f"usage.completion_tokens {ct} is fewer than the {n_text} chunks with text"
        else:
            n, source = ct, "usage"
    if n is None:
        if counter is not None and n_text:
            n, source = max(counter.count("".join(st.chunk_texts)), n_text), "tokenizer"
        else:
            n, source = len(st.chunk_times), "chunks"
    pt = _usage_count(usage, "prompt_tokens")
    if pt is not None:
        req = rec.input_tokens_requested or rec.input_tokens
        if 0 < pt <= 16 * req + 65536:
            rec.input_tokens = pt
        elif rec.usage_rejected is None:
            rec.usage_rejected = f"usage.prompt_tokens {pt} is implausible for a prompt of about {req} tokens"
    rec.output_tokens = n
    rec.output_tokens_source = source
    counts = chunk_token_counts(n, st.chunk_texts, st.chunk_logprob_tokens, st.chunk_finishes)
    rec.chunk_tokens = None if all(c == 1 for c in counts) else counts
    if rec.error is not None:
        return
    if not st.chunk_times:
        rec.error_kind, rec.error = "empty_response", "the stream carried no chunk with a choice"
    elif ignore_eos and st.done and n < max_tokens and (source == "usage" or st.finish_reason not in (None, "length")):
        rec.error_kind = "truncated"
        rec.error = (f"the stream ended after {n} of {max_tokens} tokens (finish_reason {st.finish_reason}) although "
                     "ignore_eos was asked; the server may not honour ignore_eos (try --no-ignore-eos)")


def chunk_token_counts(n: int, texts: list[str], logprob_tokens: list[int | None],
                       finishes: list[bool] | None = None) -> list[int]:
    """Tokens carried by each chunk, summing to `n` (n >= the chunks with text).

    Exact where every chunk lists its logprob tokens; one each when n equals the number of chunks. With fewer
    tokens than chunks, empty-text chunks carry none, finish-only chunks (empty text and a finish_reason) first,
    from the end. With more, the surplus n - len(texts) is spread in proportion to each chunk's characters beyond
    its first (largest remainders), every chunk keeping at least one token."""
    m = len(texts)
    if m == 0:
        return []
    if all(c is not None for c in logprob_tokens) and sum(logprob_tokens) == n:  # type: ignore[arg-type]
        return [int(c) for c in logprob_tokens]  # type: ignore[arg-type]
    if n == m:
        return [1] * m
    if n < m:
        counts = [1] * m
        fin = finishes or [False] * m
        order = [i for i in reversed(range(m)) if not texts[i] and fin[i]] + \
                [i for i in reversed(range(m)) if not texts[i] and not fin[i]]
        for i in order[: m - n]:
            counts[i] = 0
        return counts
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
