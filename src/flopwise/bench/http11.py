"""A lean HTTP/1.1 keep-alive transport for the run's `httpx.AsyncClient`.

Why: httpcore's pool (1.0.x) rescans every connection, with a `poll()` syscall each and a quadratic idle count,
whenever a request starts or ends; at 256 concurrent streams that alone costs the client more CPU than the
streams themselves, and shows up as added TTFT. Here a pool is a stack of idle connections per origin: taking and
returning a connection is O(1). A response body is decoded from whatever one socket read returns (chunked,
Content-Length, or until close), so one network read is one iteration of `aiter_raw()`.

Semantics kept from httpx: connect/read/write timeouts from the request's `timeout` extension raise
httpx.ConnectTimeout / ReadTimeout / WriteTimeout; a connection closed mid-body raises RemoteProtocolError;
a stale idle connection that fails before any response byte is retried once on a new connection.
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import AsyncIterator

import httpx

__all__ = ["FastHTTP11Transport"]

_READ_SIZE = 1 << 16
_MAX_HEAD_BYTES = 1 << 16


class _Conn:
    __slots__ = ("reader", "writer", "origin")

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, origin: tuple[str, str, int]):
        self.reader, self.writer, self.origin = reader, writer, origin

    @property
    def is_usable(self) -> bool:
        return not self.writer.is_closing() and not self.reader.at_eof()

    def close(self) -> None:
        self.writer.close()


class FastHTTP11Transport(httpx.AsyncBaseTransport):
    """HTTP/1.1 only; no proxies. `verify=False` skips TLS certificate checks."""

    def __init__(self, *, verify: bool = True) -> None:
        self._idle: dict[tuple[str, str, int], list[_Conn]] = {}
        self._busy: set[_Conn] = set()
        self._ssl = ssl.create_default_context()
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
                continue
        conn = await self._connect(origin, timeouts.get("connect"), request)
        try:
            return await self._exchange(conn, request, head + body, timeouts)
        except _StaleConnection as e:
            raise httpx.RemoteProtocolError("server closed the connection without a response",
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
            raise _StaleConnection() from e
        read_t = timeouts.get("read")
        try:
            async with asyncio.timeout(read_t):
                raw_head = await conn.reader.readuntil(b"\r\n\r\n")
        except TimeoutError as e:
            self._drop(conn)
            raise httpx.ReadTimeout("timed out waiting for the response", request=request) from e
        except asyncio.IncompleteReadError as e:
            self._drop(conn)
            if not e.partial:
                raise _StaleConnection() from e
            raise httpx.RemoteProtocolError("connection closed inside the response head", request=request) from e
        except (asyncio.LimitOverrunError, OSError) as e:
            self._drop(conn)
            raise httpx.ReadError(f"reading the response head failed: {e}", request=request) from e
        status, headers, version = _parse_head(raw_head, request)
        hmap = {k.lower(): v for k, v in headers}
        keep_alive = version == "HTTP/1.1" and hmap.get(b"connection", b"").lower() != b"close"
        if request.method == "HEAD" or status in (204, 304) or 100 <= status < 200:
            mode, length = "length", 0
        elif b"chunked" in hmap.get(b"transfer-encoding", b"").lower():
            mode, length = "chunked", 0
        elif b"content-length" in hmap:
            mode, length = "length", int(hmap[b"content-length"])
        else:
            mode, length, keep_alive = "eof", 0, False
        stream = _Body(self, conn, request, mode, length, keep_alive, read_t)
        return httpx.Response(status, headers=headers, stream=stream, request=request,
                              extensions={"http_version": version.encode()})

    def _release(self, conn: _Conn, reusable: bool) -> None:
        self._busy.discard(conn)
        if reusable and conn.is_usable:
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

    async def _read(self) -> bytes:
        try:
            async with asyncio.timeout(self._read_timeout):
                return await self._conn.reader.read(_READ_SIZE)
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
                    data = await self._read()
                    if not data:
                        raise httpx.RemoteProtocolError(
                            f"connection closed with {left} body bytes missing", request=self._request)
                    left -= len(data)
                    yield data
            else:
                while data := await self._read():
                    yield data
            self._finish(self._keep)
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
                        break
                    try:
                        size_left = int(bytes(buf[:i]).split(b";", 1)[0].strip(), 16)
                    except ValueError:
                        raise httpx.RemoteProtocolError("bad chunk size in chunked body",
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


def _parse_head(raw: bytes, request: httpx.Request) -> tuple[int, list[tuple[bytes, bytes]], str]:
    lines = raw[:-4].split(b"\r\n")
    parts = lines[0].split(b" ", 2)
    try:
        version, status = parts[0].decode("ascii"), int(parts[1])
    except (IndexError, ValueError, UnicodeDecodeError):
        raise httpx.RemoteProtocolError(f"bad status line {lines[0][:80]!r}", request=request) from None
    headers = []
    for ln in lines[1:]:
        k, sep, v = ln.partition(b":")
        if sep:
            headers.append((k.strip(), v.strip()))
    return status, headers, version
