"""A lean HTTP/1.1 keep-alive transport for the run's `httpx.AsyncClient`.

Why: httpcore's pool (1.0.x) rescans every connection, with a `poll()` syscall each and a quadratic idle count,
whenever a request starts or ends; at 256 concurrent streams that alone costs the client more CPU than the
streams themselves, and shows up as added TTFT. Here a pool is a stack of idle connections per origin: taking and
returning a connection is O(1). A response body is decoded from whatever one socket read returns (chunked,
Content-Length, or until close), so one network read is one iteration of `aiter_raw()`.

Semantics kept from httpx: connect/read/write timeouts from the request's `timeout` extension raise
httpx.ConnectTimeout / ReadTimeout / WriteTimeout; a connection closed mid-body raises RemoteProtocolError;
a reused keep-alive connection that fails before any response byte (EOF, reset, broken pipe: the server closed
it after its previous response) is retried on another idle connection or a new one, as httpcore does; a new
connection is never retried.

Framing (RFC 9112), each case tested byte by byte in tests/test_bench_http11.py:
- status line `HTTP/1.x NNN reason`. Framing violations raise `FramingError` (an httpx.RemoteProtocolError).
- interim 1xx responses (100 Continue, 103 Early Hints) are read and skipped before the final response;
  101 Switching Protocols (never asked for) is a protocol error.
- HEAD, 1xx, 204 and 304 have no body; `Transfer-Encoding: chunked` (as the last coding) wins over
  Content-Length; otherwise Content-Length, which must be one non-negative decimal (repeated equal values are
  accepted); otherwise the body runs to the end of the connection, which is then not reused.
- a body is never read past its end: the reads of a Content-Length body ask for at most the bytes left, and a
  chunked body followed by stray bytes makes the connection not reusable.
- chunk sizes are hex with optional `;extensions`; trailers are read and dropped; a bad size, a missing CRLF
  after a chunk's data, or EOF inside the body is a RemoteProtocolError.
- `Connection: close` or HTTP/1.0 (without keep-alive) closes the connection after the body.
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import AsyncIterator

import httpx

__all__ = ["FastHTTP11Transport", "FramingError"]

_READ_SIZE = 1 << 16
_MAX_HEAD_BYTES = 1 << 16
_MAX_INTERIM = 16


class FramingError(httpx.RemoteProtocolError):
    """The response breaks HTTP/1.1 framing (status line, Content-Length, chunk sizes): a server bug, not a
    connection lost."""


class _Conn:
    __slots__ = ("reader", "writer", "origin", "is_reused")

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, origin: tuple[str, str, int]):
        self.reader, self.writer, self.origin = reader, writer, origin
        self.is_reused = False  # True once it has carried a complete response

    @property
    def is_usable(self) -> bool:
        return not self.writer.is_closing() and not self.reader.at_eof()

    def close(self) -> None:
        self.writer.close()


class FastHTTP11Transport(httpx.AsyncBaseTransport):
    """HTTP/1.1 only; no proxies. `verify=False` skips TLS certificate checks; `ca_bundle` is a PEM file of
    certificate authorities to trust instead of the system's."""

    def __init__(self, *, verify: bool = True, ca_bundle: str | None = None) -> None:
        self._idle: dict[tuple[str, str, int], list[_Conn]] = {}
        self._busy: set[_Conn] = set()
        try:
            self._ssl = ssl.create_default_context(cafile=ca_bundle)
        except (OSError, ssl.SSLError) as e:
            raise ValueError(f"cannot load the CA bundle {ca_bundle}: {e}") from e
        if not verify:
            self._ssl.check_hostname = False
            self._ssl.verify_mode = ssl.CERT_NONE

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        timeouts = request.extensions.get("timeout", {})
        url = request.url
        origin = (url.scheme, url.host, url.port or (443 if url.scheme == "https" else 80))
        body = await request.aread()
        head = _request_head(request, body)
        idle = self._idle.get(origin)
        while idle:
            conn = idle.pop()
            if not conn.is_usable:
                conn.close()
                continue
            try:
                return await self._exchange(conn, request, head + body, timeouts)
            except _StaleConnection:
                continue  # the server had closed this idle connection: the request never reached it
        conn = await self._connect(origin, timeouts.get("connect"), request)
        try:
            return await self._exchange(conn, request, head + body, timeouts)
        except _StaleConnection as e:
            raise httpx.RemoteProtocolError(f"server closed the connection without a response ({e.__cause__!r})",
                                            request=request) from e

    async def _connect(self, origin: tuple[str, str, int], timeout: float | None, request: httpx.Request) -> _Conn:
        scheme, host, port = origin
        try:
            async with asyncio.timeout(timeout):
                reader, writer = await asyncio.open_connection(
                    host, port, ssl=self._ssl if scheme == "https" else None, limit=_MAX_HEAD_BYTES)
        except TimeoutError as e:
            raise httpx.ConnectTimeout(f"connect to {host}:{port} timed out", request=request) from e
        except OSError as e:
            raise httpx.ConnectError(f"{e}", request=request) from e
        return _Conn(reader, writer, origin)

    async def _exchange(self, conn: _Conn, request: httpx.Request, data: bytes,
                        timeouts: dict[str, float | None]) -> httpx.Response:
        self._busy.add(conn)
        try:
            conn.writer.write(data)
            async with asyncio.timeout(timeouts.get("write")):
                await conn.writer.drain()
        except TimeoutError as e:
            self._drop(conn)
            raise httpx.WriteTimeout("write timed out", request=request) from e
        except OSError as e:
            self._drop(conn)
            if conn.is_reused:
                raise _StaleConnection() from e
            raise httpx.WriteError(f"sending the request failed: {e}", request=request) from e
        read_t = timeouts.get("read")
        for num_heads in range(_MAX_INTERIM + 2):  # interim 1xx responses come before the final one
            if num_heads > _MAX_INTERIM:
                self._drop(conn)
                raise FramingError(f"more than {_MAX_INTERIM} interim 1xx responses", request=request)
            raw_head = await self._read_head(conn, request, read_t, num_heads == 0)
            try:
                status, headers, version = _parse_head(raw_head, request)
            except FramingError:
                self._drop(conn)
                raise
            if status == 101:
                self._drop(conn)
                raise FramingError("unexpected 101 Switching Protocols", request=request)
            if not 100 <= status < 200:
                break
        try:
            mode, length, keep_alive = _framing(request.method, status, headers, version)
        except ValueError as e:
            self._drop(conn)
            raise FramingError(str(e), request=request) from None
        stream = _Body(self, conn, request, mode, length, keep_alive, read_t)
        return httpx.Response(status, headers=headers, stream=stream, request=request,
                              extensions={"http_version": version.encode()})

    async def _read_head(self, conn: _Conn, request: httpx.Request, read_t: float | None, first: bool) -> bytes:
        """One response head. On the first head of a reused connection, EOF or a reset before any byte means
        the server had closed the connection: _StaleConnection (retried on another)."""
        try:
            async with asyncio.timeout(read_t):
                return await conn.reader.readuntil(b"\r\n\r\n")
        except TimeoutError as e:
            self._drop(conn)
            raise httpx.ReadTimeout("timed out waiting for the response", request=request) from e
        except asyncio.IncompleteReadError as e:
            self._drop(conn)
            if not e.partial and first:
                raise _StaleConnection() from e
            raise httpx.RemoteProtocolError("connection closed inside the response head", request=request) from e
        except asyncio.LimitOverrunError as e:
            self._drop(conn)
            raise FramingError(f"response head over {_MAX_HEAD_BYTES} bytes", request=request) from e
        except OSError as e:
            self._drop(conn)
            if first and conn.is_reused:
                raise _StaleConnection() from e
            raise httpx.ReadError(f"reading the response head failed: {e}", request=request) from e

    def _release(self, conn: _Conn, reusable: bool) -> None:
        self._busy.discard(conn)
        if reusable and conn.is_usable:
            conn.is_reused = True
            self._idle.setdefault(conn.origin, []).append(conn)
        else:
            conn.close()

    def _drop(self, conn: _Conn) -> None:
        self._release(conn, False)

    async def aclose(self) -> None:
        for conns in self._idle.values():
            for c in conns:
                c.close()
        for c in self._busy:
            c.close()
        self._idle.clear()
        self._busy.clear()


class _StaleConnection(Exception):
    """A reused keep-alive connection was already closed by the server; retry on a new one."""


class _Body(httpx.AsyncByteStream):
    """The response body, decoded per socket read; returns the connection to the pool when fully read."""

    def __init__(self, pool: FastHTTP11Transport, conn: _Conn, request: httpx.Request, mode: str, length: int,
                 keep_alive: bool, read_timeout: float | None) -> None:
        self._pool, self._conn, self._request = pool, conn, request
        self._mode, self._length, self._keep = mode, length, keep_alive
        self._read_timeout = read_timeout
        self._released = False
        self._clean = True  # False when bytes followed the end of the body: the connection is not reused

    async def _read(self, n: int = _READ_SIZE) -> bytes:
        try:
            async with asyncio.timeout(self._read_timeout):
                return await self._conn.reader.read(n)
        except TimeoutError as e:
            raise httpx.ReadTimeout("timed out reading the response body", request=self._request) from e
        except OSError as e:
            raise httpx.ReadError(str(e), request=self._request) from e

    async def __aiter__(self) -> AsyncIterator[bytes]:
        try:
            if self._mode == "chunked":
                async for part in self._chunked():
                    yield part
            elif self._mode == "length":
                left = self._length
                while left > 0:
                    data = await self._read(min(left, _READ_SIZE))
                    if not data:
                        raise httpx.RemoteProtocolError(
                            f"connection closed with {left} body bytes missing", request=self._request)
                    left -= len(data)
                    yield data
            else:
                while data := await self._read():
                    yield data
            self._finish(self._keep and self._clean)
        finally:
            self._finish(False)

    async def _chunked(self) -> AsyncIterator[bytes]:
        buf = bytearray()
        size_left = 0  # data bytes left in the current chunk
        state = "size"  # size -> data -> crlf -> size ... -> trailer -> done
        while True:
            out = []
            while True:
                if state == "size":
                    i = buf.find(b"\r\n")
                    if i < 0:
                        if len(buf) > 1024:
                            raise FramingError("chunk-size line over 1024 bytes", request=self._request)
                        break
                    try:
                        size_left = _chunk_size(bytes(buf[:i]))
                    except ValueError:
                        raise FramingError("bad chunk size in chunked body",
                                                        request=self._request) from None
                    del buf[: i + 2]
                    state = "data" if size_left else "trailer"
                elif state == "data":
                    take = min(size_left, len(buf))
                    if not take:
                        break
                    out.append(bytes(buf[:take]))
                    del buf[:take]
                    size_left -= take
                    if not size_left:
                        state = "crlf"
                elif state == "crlf":
                    if len(buf) < 2:
                        break
                    if buf[:2] != b"\r\n":
                        raise FramingError("chunk data not followed by CRLF (wrong chunk size)",
                                                        request=self._request)
                    del buf[:2]
                    state = "size"
                else:  # trailer lines until an empty one
                    i = buf.find(b"\r\n")
                    if i < 0:
                        break
                    empty = i == 0
                    del buf[: i + 2]
                    if empty:
                        state = "done"
                        break
            if out:
                yield out[0] if len(out) == 1 else b"".join(out)
            if state == "done":
                self._clean = not buf
                return
            data = await self._read()
            if not data:
                raise httpx.RemoteProtocolError("peer closed connection without sending complete message body "
                                                "(incomplete chunked read)", request=self._request)
            buf += data

    def _finish(self, reusable: bool) -> None:
        if not self._released:
            self._released = True
            self._pool._release(self._conn, reusable)

    async def aclose(self) -> None:
        self._finish(False)


def _request_head(request: httpx.Request, body: bytes) -> bytes:
    target = request.url.raw_path
    lines = [request.method.encode() + b" " + target + b" HTTP/1.1"]
    has_length = False
    for k, v in request.headers.raw:
        lk = k.lower()
        if lk == b"transfer-encoding":
            continue
        if lk == b"content-length":
            has_length = True
            v = str(len(body)).encode()
        lines.append(k + b": " + v)
    if body and not has_length:
        lines.append(b"Content-Length: " + str(len(body)).encode())
    return b"\r\n".join(lines) + b"\r\n\r\n"


def _chunk_size(line: bytes) -> int:
    """The size of a chunk from its size line (`1a;ext=1`): hex digits only, no sign."""
    size = line.split(b";", 1)[0].strip()
    if not size or size.strip(b"0123456789abcdefABCDEF") or len(size) > 16:  # hex digits only (strip: C speed)
        raise ValueError(f"bad chunk size {line[:40]!r}")
    return int(size, 16)


def _framing(method: str, status: int, headers: list[tuple[bytes, bytes]], version: str) -> tuple[str, int, bool]:
    """(mode, content length, keep-alive) of a final response; ValueError for an invalid Content-Length."""
    keep_alive = version == "HTTP/1.1"
    lengths: set[bytes] = set()
    chunked = False
    for k, v in headers:
        lk = k.lower()
        if lk == b"connection":
            tokens = {t.strip().lower() for t in v.split(b",")}
            if b"close" in tokens:
                keep_alive = False
            elif b"keep-alive" in tokens and version == "HTTP/1.0":
                keep_alive = True
        elif lk == b"transfer-encoding":
            chunked = v.split(b",")[-1].strip().lower() == b"chunked"
        elif lk == b"content-length":
            lengths.update(p.strip() for p in v.split(b","))
    if method == "HEAD" or status in (204, 304) or 100 <= status < 200:
        return "length", 0, keep_alive
    if chunked:
        return "chunked", 0, keep_alive
    if lengths:
        if len(lengths) > 1 or not all(x.isdigit() for x in lengths) or len(next(iter(lengths))) > 18:
            raise ValueError(f"invalid Content-Length {b', '.join(sorted(lengths))[:60]!r}")
        return "length", int(next(iter(lengths))), keep_alive
    return "eof", 0, False


def _parse_head(raw: bytes, request: httpx.Request) -> tuple[int, list[tuple[bytes, bytes]], str]:
    lines = raw[:-4].split(b"\r\n")
    parts = lines[0].split(b" ", 2)
    try:
        version, status = parts[0].decode("ascii"), int(parts[1])
        if not version.startswith("HTTP/1.") or len(parts[1]) != 3 or not 100 <= status <= 999:
            raise ValueError
    except (IndexError, ValueError, UnicodeDecodeError):
        raise FramingError(f"bad status line {lines[0][:80]!r}", request=request) from None
    headers = []
    for ln in lines[1:]:
        k, sep, v = ln.partition(b":")
        if sep:
            headers.append((k.strip(), v.strip()))
    return status, headers, version
