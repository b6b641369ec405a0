"""A mock OpenAI-compatible streaming server with a known first-token delay and inter-token delay, and the
faults a real server can have.

Plain asyncio (no web framework), HTTP/1.1 keep-alive, SSE over chunked transfer encoding, like uvicorn.
Routes: POST /v1/completions, POST /v1/chat/completions, POST /tokenize and /detokenize (vLLM's, unless
`MockConfig.tokenize` is off), GET /health, GET /v1/models, GET /metrics.

Timing: for a request parsed at t0, token i (0-based) is produced at t0 + ttft + i * itl, sleeping to absolute
deadlines so that timer overshoot never accumulates. The first chunk carries token 0 alone; later chunks carry
`tokens_per_chunk` tokens each and are written when their last token is produced (like speculative decoding).
On the chat endpoint a role-only chunk (`"delta": {"role": "assistant", "content": ""}`) goes out at once,
before the first token (vLLM sends it with the first token; other servers at once).

Faults, for tests: `MockConfig.fault`, or a directive `[[mock:KIND]]` inside the prompt. Each with the error
kind `flopwise bench` records for it (`FAULTS`):
    500 / 429 / ...   answer with that HTTP status and a JSON error body                http_<status>
    hang, silence     accept the request and never answer                                timeout
    slow_first        the first token after `slow_first_ms`, the rest as usual           (success)
    stall             stream half the tokens, then stop sending                          timeout
    cut               stream half the tokens, then close the connection                  dropped_stream
    reset             stream half the tokens, then reset the connection (RST)            dropped_stream
    garbage           stream two tokens, then a `data:` line that is not JSON            malformed_sse
    garbage_line      stream two tokens, then a line that is not SSE at all              malformed_sse
    choices_str       a chunk with "choices": "abc"                                      malformed_sse
    choices_null      a chunk with "choices": [null]                                     malformed_sse
    delta_str         a chunk whose delta (or text) is the string "tok"                  malformed_sse
    error_event       two tokens, then `data: {"error": {...}}` (with a bearer token in
                      its message) and [DONE]                                            server_error
    early_done        three tokens, their usage and [DONE] (whatever max_tokens)         truncated
    giant_chunk       one 2 MiB chunk after the first token                              oversized
    bad_length        a 200 answer whose Content-Length is not a number                  protocol_error
    huge_usage        every token, but usage says 10^9 completion and prompt tokens      (success; usage rejected)
    no_usage          stream every token but omit the usage chunk                        (success; counted)
    no_done           stream every token and usage but end without `data: [DONE]`        (success: a clean end
                                                                                          after the finish_reason,
                                                                                          as vllm bench serve
                                                                                          counts it)
    clean_cut         half the tokens, then a clean end of the body: no finish_reason,
                      no [DONE]                                                           dropped_stream
    interim           `100 Continue` and `103 Early Hints` before the answer             (success)
    close_after       a complete answer, then close the kept-alive connection            (success; and the next
                                                                                          request on it too)
    empty_I_J_...     tokens I, J, ... (0-based) stream with empty text                  (success)
    all_empty         every token streams with empty text                               (success)
`MockConfig.reject_extensions`: answer HTTP 400 to a body with ignore_eos or min_tokens (as OpenAI's API does).
`MockConfig.log_path`: the server's own log, for exact fault counts: two JSON lines per generation request,
{"prompt": a hash of its prompt, "fault": KIND or null, "event": "received"} when it is parsed and the same with
"event": "done" | "fault" | "aborted" (the server stopped mid-request) when it ends.

Usage counts: prompt_tokens is the number of whitespace-separated words in the prompt plus
`special_tokens` (the mock's tokenizer, which /tokenize shares), completion_tokens the tokens streamed. Run as a
process: `python -m flopwise.bench.mock_server --port 0` prints `listening on PORT` once ready.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import re
import socket
import struct
import subprocess
import sys
import threading
from collections.abc import Callable, Coroutine, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Any

__all__ = ["MockConfig", "MockServer", "serve", "mock_server_thread", "mock_server_process", "FAULTS"]

_FAULT_RE = re.compile(r"\[\[mock:([a-z_0-9]+)\]\]")
_MAX_BODY_BYTES = 64 << 20

# fault -> the error kind a client records (None: the request succeeds)
FAULTS: dict[str, str | None] = {
    "hang": "timeout", "silence": "timeout", "slow_first": None, "stall": "timeout", "cut": "dropped_stream",
    "reset": "dropped_stream", "garbage": "malformed_sse", "garbage_line": "malformed_sse",
    "choices_str": "malformed_sse", "choices_null": "malformed_sse", "delta_str": "malformed_sse",
    "error_event": "server_error", "early_done": "truncated", "giant_chunk": "oversized",
    "bad_length": "protocol_error", "huge_usage": None, "no_usage": None, "no_done": None,
    "clean_cut": "dropped_stream",
    "interim": None, "close_after": None, "all_empty": None,
}
ERROR_EVENT_MESSAGE = "mock engine failure (request auth Bearer sk-mock-secret-0123456789)"


def fault_kind(fault: str | None) -> str | None:
    """The error kind a client records for `fault` (None: success)."""
    if fault is None or fault.startswith("empty_"):
        return None
    if fault.isdigit():
        return f"http_{fault}"
    return FAULTS[fault]


@dataclass(frozen=True, slots=True, kw_only=True)
class MockConfig:
    ttft_ms: float = 100.0
    itl_ms: float = 20.0
    default_max_tokens: int = 16
    tokens_per_chunk: int = 1
    fault: str | None = None
    model: str = "mock"
    special_tokens: int = 0
    tokenize: bool = True
    slow_first_ms: float = 500.0
    log_path: str | None = None
    reject_extensions: bool = False  # answer 400 to ignore_eos / min_tokens, as OpenAI's own API does


@dataclass(slots=True, kw_only=True)
class _Stats:
    """Counters exposed on /metrics in vLLM's names (a small subset)."""

    running: int = 0
    requests: int = 0
    prompt_tokens: int = 0
    generation_tokens: int = 0


class MockServer:
    """One server; `start()` binds, `serve_forever()` runs until cancelled."""

    def __init__(self, config: MockConfig, host: str = "127.0.0.1", port: int = 0) -> None:
        self.config = config
        self.host = host
        self.port = port
        self._server: asyncio.base_events.Server | None = None
        self._stats = _Stats()
        self._handlers: set[asyncio.Task[None]] = set()
        self._vocab: dict[str, int] = {}
        self._words: list[str] = []

    async def start(self) -> int:
        self._server = await asyncio.start_server(self._handle, self.host, self.port, backlog=4096,
                                                  reuse_address=True)
        self.port = self._server.sockets[0].getsockname()[1]
        return self.port

    async def serve_forever(self) -> None:
        """Serve until cancelled; then stop every open connection's handler."""
        assert self._server is not None
        try:
            async with self._server:
                await self._server.serve_forever()
        finally:
            for t in list(self._handlers):
                t.cancel()
            await asyncio.gather(*self._handlers, return_exceptions=True)

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._handlers.add(task)
        task.add_done_callback(self._handlers.discard)
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                lines = head.decode("latin-1").split("\r\n")
                method, path, _ = lines[0].split(" ", 2)
                headers = {k.strip().lower(): v.strip() for k, _, v in (ln.partition(":") for ln in lines[1:] if ln)}
                length = int(headers.get("content-length", "0"))
                if length > _MAX_BODY_BYTES:
                    return
                body = await reader.readexactly(length) if length else b""
                keep = await self._route(method, path.split("?", 1)[0], body, writer)
                if not keep or headers.get("connection", "").lower() == "close":
                    return
        except (asyncio.IncompleteReadError, ConnectionError, ValueError, asyncio.LimitOverrunError):
            return
        except asyncio.CancelledError:  # the server is stopping: end this connection quietly
            return
        finally:
            writer.close()

    async def _route(self, method: str, path: str, body: bytes, writer: asyncio.StreamWriter) -> bool:
        if method == "GET" and path == "/health":
            return await _respond(writer, 200, b"{}")
        if method == "GET" and path == "/v1/models":
            return await _respond(writer, 200, json.dumps(
                {"object": "list", "data": [{"id": self.config.model, "object": "model"}]}).encode())
        if method == "GET" and path == "/metrics":
            return await _respond(writer, 200, self._metrics_text().encode(), "text/plain; version=0.0.4")
        if method == "POST" and path in ("/v1/completions", "/v1/chat/completions", "/tokenize", "/detokenize"):
            try:
                payload = json.loads(body)
            except ValueError:
                return await _respond(writer, 400, b'{"error": {"message": "body is not JSON"}}')
            if path == "/tokenize" and self.config.tokenize:
                return await self._tokenize(payload, writer)
            if path == "/detokenize" and self.config.tokenize:
                return await self._detokenize(payload, writer)
            if path.startswith("/v1/"):
                is_chat = path.endswith("chat/completions")
                fault = self._fault(payload, is_chat)
                key = hashlib.sha1(_prompt_text(payload, is_chat).encode()).hexdigest()[:12] \
                    if self.config.log_path else ""
                self._log(key, fault, "received")
                outcome = "aborted"
                try:
                    keep, outcome = await self._generate(payload, is_chat, writer, fault)
                    return keep
                finally:
                    self._log(key, fault, outcome)
        return await _respond(writer, 404, b'{"error": {"message": "not found"}}')

    def _fault(self, payload: dict[str, Any], is_chat: bool) -> str | None:
        m = _FAULT_RE.search(_prompt_text(payload, is_chat))
        return m.group(1) if m else self.config.fault

    def _log(self, prompt: str, fault: str | None, event: str) -> None:
        if self.config.log_path:
            with open(self.config.log_path, "a", encoding="utf-8") as f:
                f.write(json.dumps({"prompt": prompt, "fault": fault, "event": event}) + "\n")

    async def _tokenize(self, payload: dict[str, Any], writer: asyncio.StreamWriter) -> bool:
        """vLLM's /tokenize: {"prompt", "add_special_tokens" (default true)} -> {"count", "tokens", ...}."""
        text = payload.get("prompt")
        if not isinstance(text, str):
            return await _respond(writer, 400, b'{"error": {"message": "prompt must be a string"}}')
        ids = []
        for w in text.split():
            if w not in self._vocab:
                self._vocab[w] = len(self._words)
                self._words.append(w)
            ids.append(self._vocab[w] + self.config.special_tokens)
        if payload.get("add_special_tokens", True):
            ids = list(range(self.config.special_tokens)) + ids
        return await _respond(writer, 200, json.dumps({"count": len(ids), "max_model_len": 1 << 20,
                                                       "tokens": ids}).encode())

    async def _detokenize(self, payload: dict[str, Any], writer: asyncio.StreamWriter) -> bool:
        k = self.config.special_tokens
        try:
            words = [self._words[i - k] for i in payload["tokens"] if i >= k]
        except (KeyError, IndexError, TypeError):
            return await _respond(writer, 400, b'{"error": {"message": "unknown token ids"}}')
        return await _respond(writer, 200, json.dumps({"prompt": " ".join(words)}).encode())

    async def _generate(self, payload: dict[str, Any], is_chat: bool, writer: asyncio.StreamWriter,
                        fault: str | None) -> tuple[bool, str]:
        """Answer one generation request; (keep the connection, outcome for the log)."""
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        cfg = self.config
        if fault is not None and fault.isdigit():
            body = json.dumps({"error": {"message": f"mock fault {fault}"}}).encode()
            return await _respond(writer, int(fault), body), "fault"
        if cfg.reject_extensions and ("ignore_eos" in payload or "min_tokens" in payload):
            body = b'{"error": {"message": "Unrecognized request argument supplied: ignore_eos"}}'
            return await _respond(writer, 400, body), "rejected"
        if fault in ("hang", "silence"):
            await asyncio.sleep(3600)
            return False, "fault"
        if fault == "bad_length":
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: abc\r\n\r\n{}")
            await writer.drain()
            return False, "fault"
        n = int(payload.get("max_tokens") or payload.get("max_completion_tokens") or cfg.default_max_tokens)
        n_prompt = len(_prompt_text(payload, is_chat).split()) + cfg.special_tokens
        if not payload.get("stream"):
            await asyncio.sleep(max(0.0, t0 + (cfg.ttft_ms + (n - 1) * cfg.itl_ms) / 1e3 - loop.time()))
            text = " tok" * n
            reply: dict[str, Any] = ({"index": 0, "message": {"role": "assistant", "content": text}} if is_chat
                                     else {"index": 0, "text": text})
            usage = {"prompt_tokens": n_prompt, "completion_tokens": n, "total_tokens": n_prompt + n}
            return await _respond(writer, 200, json.dumps({"choices": [reply], "usage": usage}).encode()), "done"

        self._stats.running += 1
        self._stats.requests += 1
        self._stats.prompt_tokens += n_prompt
        try:
            if fault == "interim":
                writer.write(b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nlink: </x>\r\n\r\n")
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\n"
                         b"transfer-encoding: chunked\r\n\r\n")
            obj = "chat.completion.chunk" if is_chat else "text_completion"
            if is_chat:
                _write_chunk(writer, _event({"object": obj, "choices": [{"index": 0, "delta": {"role": "assistant",
                                                                                               "content": ""}}]}))
            stop_after = {"stall": n // 2, "cut": n // 2, "reset": n // 2, "clean_cut": n // 2, "garbage": 2,
                          "garbage_line": 2,
                          "error_event": 2, "early_done": 3, "choices_str": 1, "choices_null": 1, "delta_str": 1,
                          "giant_chunk": 1}.get(fault or "", n)
            empty = _empty_positions(fault, n)
            first_ms = cfg.slow_first_ms if fault == "slow_first" else cfg.ttft_ms
            k = max(1, cfg.tokens_per_chunk)
            frames: dict[tuple[int, bool, bool], bytes] = {}  # (tokens, is_last, empty) -> framed event, built once
            sent = 0
            while sent < min(n, stop_after):
                m_tok = 1 if sent == 0 else min(k, n - sent)
                deadline = t0 + (first_ms + (sent + m_tok - 1) * cfg.itl_ms) / 1e3
                delay = deadline - loop.time()
                if delay > 0:
                    await asyncio.sleep(delay)
                last = sent + m_tok == n
                blank = empty is not None and all(i in empty for i in range(sent, sent + m_tok))
                frame = frames.get((m_tok, last, blank))
                if frame is None:
                    text = "" if blank else " tok" * m_tok
                    choice: dict[str, Any] = ({"index": 0, "delta": {"content": text}} if is_chat
                                              else {"index": 0, "text": text})
                    choice["finish_reason"] = "length" if last else None
                    frame = frames[(m_tok, last, blank)] = _frame(_event({"object": obj, "choices": [choice]}))
                writer.write(frame)
                sent += m_tok
                self._stats.generation_tokens += m_tok
                if writer.transport.get_write_buffer_size() > 1 << 16:
                    await writer.drain()
            if fault == "stall":
                await writer.drain()
                await asyncio.sleep(3600)
                return False, "fault"
            if fault == "cut":
                await writer.drain()
                return False, "fault"
            if fault == "reset":
                await writer.drain()
                sock = writer.get_extra_info("socket")
                if sock is not None:  # SO_LINGER 0: close() sends RST instead of FIN
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                writer.transport.abort()
                return False, "fault"
            if fault is not None:
                bad = _bad_event(fault, obj, is_chat)
                if bad is not None:
                    _write_chunk(writer, bad)
            include_usage = bool((payload.get("stream_options") or {}).get("include_usage"))
            if include_usage and fault != "no_usage":
                usage = {"prompt_tokens": n_prompt, "completion_tokens": sent, "total_tokens": n_prompt + sent}
                if fault == "huge_usage":
                    usage = {"prompt_tokens": 10**9, "completion_tokens": 10**9, "total_tokens": 2 * 10**9}
                _write_chunk(writer, _event({"object": obj, "choices": [], "usage": usage}))
            if fault not in ("no_done", "clean_cut"):
                _write_chunk(writer, b"data: [DONE]\n\n")
            writer.write(b"0\r\n\r\n")
            await writer.drain()
            if fault == "close_after":
                return False, "done"
            return True, "fault" if fault_kind(fault) else "done"
        finally:
            self._stats.running -= 1

    def _metrics_text(self) -> str:
        s = self._stats
        return (f'vllm:num_requests_running{{model_name="{self.config.model}"}} {s.running}\n'
                f'vllm:num_requests_waiting{{model_name="{self.config.model}"}} 0\n'
                f'vllm:prompt_tokens_total{{model_name="{self.config.model}"}} {s.prompt_tokens}\n'
                f'vllm:generation_tokens_total{{model_name="{self.config.model}"}} {s.generation_tokens}\n'
                f'vllm:request_success_total{{model_name="{self.config.model}"}} {s.requests}\n')


def _bad_event(fault: str, obj: str, is_chat: bool) -> bytes | None:
    """The faulty event of a fault mode (built only for that mode: giant_chunk's is 2 MiB)."""
    if fault == "garbage":
        return b"data: {this is not json\n\n"
    if fault == "garbage_line":
        return b"<html>oops</html>\n\n"
    if fault == "choices_str":
        return _event({"object": obj, "choices": "abc"})
    if fault == "choices_null":
        return _event({"object": obj, "choices": [None]})
    if fault == "delta_str":
        return _event({"object": obj, "choices": [{"index": 0, "delta": "tok"} if is_chat else {"index": 0,
                                                                                                "text": ["tok"]}]})
    if fault == "error_event":
        return _event({"error": {"message": ERROR_EVENT_MESSAGE, "code": 500}})
    if fault == "giant_chunk":
        return _event({"object": obj, "choices": [{"index": 0, "text": "x" * (2 << 20)}]})
    return None


def _empty_positions(fault: str | None, n: int) -> set[int] | None:
    """Token positions that stream with empty text: `empty_0_3_7` -> {0, 3, 7}, `all_empty` -> all."""
    if fault == "all_empty":
        return set(range(n))
    if fault and fault.startswith("empty_"):
        return {int(x) for x in fault[6:].split("_") if x.isdigit()}
    return None


def _prompt_text(payload: dict[str, Any], is_chat: bool) -> str:
    if not is_chat:
        p = payload.get("prompt", "")
        return p if isinstance(p, str) else " ".join(map(str, p))
    parts = []
    for msg in payload.get("messages", []):
        c = msg.get("content", "")
        parts.append(c if isinstance(c, str) else " ".join(x.get("text", "") for x in c if isinstance(x, dict)))
    return " ".join(parts)


def _event(obj: dict[str, Any]) -> bytes:
    return b"data: " + json.dumps(obj, separators=(",", ":")).encode() + b"\n\n"


def _frame(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


def _write_chunk(writer: asyncio.StreamWriter, data: bytes) -> None:
    writer.write(_frame(data))


async def _respond(writer: asyncio.StreamWriter, status: int, body: bytes, ctype: str = "application/json") -> bool:
    reason = {200: "OK", 400: "Bad Request", 404: "Not Found", 429: "Too Many Requests"}.get(status, "Error")
    head = f"HTTP/1.1 {status} {reason}\r\ncontent-type: {ctype}\r\ncontent-length: {len(body)}\r\n\r\n"
    writer.write(head.encode() + body)
    await writer.drain()
    return True


async def serve(config: MockConfig, host: str = "127.0.0.1", port: int = 0,
                ready: threading.Event | None = None, port_out: list[int] | None = None) -> None:
    server = MockServer(config, host, port)
    bound = await server.start()
    if port_out is not None:
        port_out.append(bound)
    if ready is not None:
        ready.set()
    await server.serve_forever()


@contextmanager
def mock_server_thread(config: MockConfig = MockConfig()) -> Iterator[str]:
    """Run the mock on its own event loop in a daemon thread; yields its base URL. For tests."""
    loop = asyncio.new_event_loop()
    ready = threading.Event()
    port: list[int] = []
    task: list[asyncio.Task[None]] = []

    def run() -> None:
        asyncio.set_event_loop(loop)
        task.append(loop.create_task(serve(config, ready=ready, port_out=port)))
        try:
            loop.run_until_complete(task[0])
        except asyncio.CancelledError:
            pass
        finally:
            loop.close()

    th = threading.Thread(target=run, name="flopwise-mock", daemon=True)
    th.start()
    if not ready.wait(10):
        raise RuntimeError("mock server did not start")
    try:
        yield f"http://127.0.0.1:{port[0]}"
    finally:
        loop.call_soon_threadsafe(task[0].cancel)
        th.join(5)


@contextmanager
def mock_server_process(config: MockConfig = MockConfig(), port: int = 0) -> Iterator[str]:
    """Run the mock in a separate process (its own core and event loop); yields its base URL."""
    cmd = [sys.executable, "-m", "flopwise.bench.mock_server", "--port", str(port), "--ttft-ms", str(config.ttft_ms),
           "--itl-ms", str(config.itl_ms), "--tokens-per-chunk", str(config.tokens_per_chunk),
           "--special-tokens", str(config.special_tokens)]
    if config.fault:
        cmd += ["--fault", config.fault]
    if config.log_path:
        cmd += ["--log", config.log_path]
    if not config.tokenize:
        cmd += ["--no-tokenize"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        if not line.startswith("listening on "):
            raise RuntimeError(f"mock server failed to start: {line!r}")
        yield f"http://127.0.0.1:{int(line.split()[-1])}"
    finally:
        proc.terminate()
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description="Mock OpenAI-compatible streaming server.")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=8000)
    ap.add_argument("--ttft-ms", type=float, default=100.0)
    ap.add_argument("--itl-ms", type=float, default=20.0)
    ap.add_argument("--tokens-per-chunk", type=int, default=1)
    ap.add_argument("--fault", default=None)
    ap.add_argument("--special-tokens", type=int, default=0)
    ap.add_argument("--log", default=None)
    ap.add_argument("--no-tokenize", action="store_true")
    a = ap.parse_args(argv)
    cfg = replace(MockConfig(), ttft_ms=a.ttft_ms, itl_ms=a.itl_ms, tokens_per_chunk=a.tokens_per_chunk, fault=a.fault,
                  special_tokens=a.special_tokens, log_path=a.log, tokenize=not a.no_tokenize)

    async def run() -> None:
        server = MockServer(cfg, a.host, a.port)
        port = await server.start()
        print(f"listening on {port}", flush=True)
        await server.serve_forever()

    try:
        import uvloop
        runner: Callable[[Coroutine[Any, Any, None]], None] = uvloop.run
    except ImportError:
        runner = asyncio.run
    try:
        runner(run())
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
