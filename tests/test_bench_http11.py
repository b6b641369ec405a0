"""The hand-written HTTP/1.1 transport (`bench.http11`), byte by byte: every framing case, split at every
position a socket read could split it, and the connection-reuse rules.

A fake connection (an asyncio.StreamReader fed with the response bytes, a writer that records the request)
stands in for the socket, so each case is exact and needs no server."""

import asyncio

import httpx
import pytest

from flopwise.bench.http11 import FastHTTP11Transport, FramingError, _Conn

ORIGIN = ("http", "test", 80)


class FakeWriter:
    def __init__(self, fail_write=None):
        self.data = b""
        self.closed = False
        self.fail_write = fail_write

    def write(self, b):
        if self.fail_write:
            raise self.fail_write
        self.data += b

    async def drain(self):
        pass

    def is_closing(self):
        return self.closed

    def close(self):
        self.closed = True


def conn(pieces, *, eof=True, reused=False, fail_write=None):
    reader = asyncio.StreamReader(limit=1 << 16)
    for p in pieces:
        reader.feed_data(p)
    if eof:
        reader.feed_eof()
    c = _Conn(reader, FakeWriter(fail_write), ORIGIN)
    c.is_reused = reused
    return c


async def exchange(transport, c, method="POST"):
    req = httpx.Request(method, "http://test/v1/completions", content=b"{}")
    resp = await transport._exchange(c, req, b"GET / HTTP/1.1\r\n\r\n", {"read": 1.0, "write": 1.0})
    body = b""
    parts = []
    async for part in resp.stream:
        parts.append(part)
        body += part
    return resp, body, parts


@pytest.fixture(autouse=True)
def event_loop_for_readers():
    """One loop per test, current while the fake connections (StreamReaders) are built and used."""
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    yield loop
    asyncio.set_event_loop(None)
    loop.close()


def run(coro):
    return asyncio.get_event_loop().run_until_complete(coro)


def splits(data):
    """`data` as one piece, as single bytes, and cut in two at every position."""
    yield [data]
    yield [data[i:i + 1] for i in range(len(data))]
    for i in range(1, len(data)):
        yield [data[:i], data[i:]]


CHUNKED = (b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n"
           b"5\r\nhello\r\n6;ext=1\r\n world\r\n0\r\nx-trailer: 1\r\n\r\n")


@pytest.mark.parametrize("pieces", list(splits(CHUNKED)))
def test_chunked_body_split_anywhere(pieces):
    t = FastHTTP11Transport()
    c = conn(pieces, eof=False)
    resp, body, _ = run(exchange(t, c))
    assert resp.status_code == 200 and body == b"hello world"
    assert t._idle[ORIGIN] == [c] and c.is_reused  # complete: back to the pool


LENGTH = b"HTTP/1.1 200 OK\r\ncontent-length: 11\r\n\r\nhello world"


@pytest.mark.parametrize("pieces", list(splits(LENGTH)))
def test_content_length_body_split_anywhere(pieces):
    t = FastHTTP11Transport()
    resp, body, _ = run(exchange(t, conn(pieces, eof=False)))
    assert body == b"hello world" and len(t._idle[ORIGIN]) == 1


def test_content_length_never_reads_past_the_body():
    t = FastHTTP11Transport()
    c = conn([LENGTH + b"HTTP/1.1 200 OK\r\n"], eof=False)
    _, body, _ = run(exchange(t, c))
    assert body == b"hello world"
    assert c.reader._buffer == bytearray(b"HTTP/1.1 200 OK\r\n")  # left for the next response, not eaten


def test_stray_bytes_after_a_chunked_body_make_the_connection_unusable():
    t = FastHTTP11Transport()
    c = conn([CHUNKED + b"garbage"], eof=False)
    _, body, _ = run(exchange(t, c))
    assert body == b"hello world" and not t._idle.get(ORIGIN) and c.writer.closed


@pytest.mark.parametrize("value", [b"abc", b"-1", b"1.5", b"", b"10, 12", b"0x10", b"99999999999999999999"])
def test_invalid_content_length_is_a_framing_error(value):
    t = FastHTTP11Transport()
    c = conn([b"HTTP/1.1 200 OK\r\ncontent-length: " + value + b"\r\n\r\n{}"])
    with pytest.raises(FramingError, match="Content-Length"):
        run(exchange(t, c))
    assert c.writer.closed


def test_repeated_equal_content_lengths_are_accepted():
    t = FastHTTP11Transport()
    _, body, _ = run(exchange(t, conn([b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\ncontent-length: 2\r\n\r\nok"])))
    assert body == b"ok"


def test_chunked_wins_over_content_length():
    t = FastHTTP11Transport()
    data = b"HTTP/1.1 200 OK\r\ncontent-length: 3\r\ntransfer-encoding: gzip, chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n"
    _, body, _ = run(exchange(t, conn([data], eof=False)))
    assert body == b"ok"


@pytest.mark.parametrize("bad", [b"zz\r\n", b"-5\r\n", b"\r\n", b" \r\n"])
def test_bad_chunk_size(bad):
    t = FastHTTP11Transport()
    with pytest.raises(FramingError, match="chunk size"):
        run(exchange(t, conn([b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n" + bad])))


def test_chunk_data_longer_than_its_size():
    t = FastHTTP11Transport()
    with pytest.raises(FramingError, match="CRLF"):
        run(exchange(t, conn([b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n2\r\nokay\r\n0\r\n\r\n"])))


def test_eof_inside_bodies_is_a_dropped_connection_not_a_framing_error():
    t = FastHTTP11Transport()
    for data in (b"HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\nhalf",
                 b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n5\r\nhel"):
        with pytest.raises(httpx.RemoteProtocolError) as e:
            run(exchange(t, conn([data])))
        assert not isinstance(e.value, FramingError)


def test_interim_1xx_responses_are_skipped():
    """100 Continue and 103 Early Hints come before the real answer; the next request on the connection
    reads its own response, not the previous one's body (the desynchronisation the old code had)."""
    t = FastHTTP11Transport()
    data = (b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nlink: </a>\r\n\r\n" + LENGTH
            + b"HTTP/1.1 201 Created\r\ncontent-length: 6\r\n\r\nsecond")
    c = conn([data], eof=False)
    resp, body, _ = run(exchange(t, c))
    assert resp.status_code == 200 and body == b"hello world"
    resp, body, _ = run(exchange(t, t._idle[ORIGIN].pop()))
    assert resp.status_code == 201 and body == b"second"


def test_101_and_endless_interim_responses_are_framing_errors():
    t = FastHTTP11Transport()
    with pytest.raises(FramingError, match="101"):
        run(exchange(t, conn([b"HTTP/1.1 101 Switching Protocols\r\n\r\n"])))
    with pytest.raises(FramingError, match="interim"):
        run(exchange(t, conn([b"HTTP/1.1 100 Continue\r\n\r\n" * 40])))


@pytest.mark.parametrize("line", [b"HTTP/1.1 2000 OK", b"HTTP/1.1 OK", b"SPDY/3 200 OK", b"HTTP/1.1 20 OK",
                                  b"\xff\xfe 200 OK"])
def test_bad_status_lines(line):
    t = FastHTTP11Transport()
    c = conn([line + b"\r\ncontent-length: 0\r\n\r\n"])
    with pytest.raises(FramingError, match="status line"):
        run(exchange(t, c))
    assert c.writer.closed


def test_head_over_the_limit():
    t = FastHTTP11Transport()
    with pytest.raises(FramingError, match="head over"):
        run(exchange(t, conn([b"HTTP/1.1 200 OK\r\nx: " + b"a" * (1 << 17) + b"\r\n\r\n"], eof=False)))


@pytest.mark.parametrize("status", [204, 304])
def test_no_body_statuses(status):
    t = FastHTTP11Transport()
    resp, body, _ = run(exchange(t, conn([b"HTTP/1.1 %d X\r\ncontent-length: 5\r\n\r\n" % status], eof=False)))
    assert resp.status_code == status and body == b"" and len(t._idle[ORIGIN]) == 1


def test_head_request_has_no_body():
    t = FastHTTP11Transport()
    resp, body, _ = run(exchange(t, conn([b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\n"], eof=False), "HEAD"))
    assert body == b""


def test_body_until_close_and_connection_close_are_not_reused():
    t = FastHTTP11Transport()
    _, body, _ = run(exchange(t, conn([b"HTTP/1.1 200 OK\r\n\r\nall of it"])))
    assert body == b"all of it" and not t._idle.get(ORIGIN)
    _, body, _ = run(exchange(t, conn([b"HTTP/1.1 200 OK\r\nconnection: keep-alive, close\r\ncontent-length: "
                                       b"2\r\n\r\nok"],
                                      eof=False)))
    assert body == b"ok" and not t._idle.get(ORIGIN)


def test_http10_keep_alive_rules():
    t = FastHTTP11Transport()
    run(exchange(t, conn([b"HTTP/1.0 200 OK\r\ncontent-length: 2\r\n\r\nok"], eof=False)))
    assert not t._idle.get(ORIGIN)  # 1.0 closes by default
    run(exchange(t, conn([b"HTTP/1.0 200 OK\r\nconnection: keep-alive\r\ncontent-length: 2\r\n\r\nok"], eof=False)))
    assert len(t._idle[ORIGIN]) == 1


def test_a_reused_connection_closed_by_the_server_is_retried():
    """The server closed an idle keep-alive connection after its last response: EOF or a reset before any
    byte of the next response means the request never reached it; the transport tries another connection."""
    t = FastHTTP11Transport()
    fresh = conn([LENGTH], eof=False)

    async def fake_connect(origin, timeout, request):
        return fresh

    t._connect = fake_connect  # type: ignore[method-assign]
    t._idle[ORIGIN] = [conn([], reused=True), conn([], reused=True, fail_write=ConnectionResetError(104, "reset"))]

    async def go():
        req = httpx.Request("POST", "http://test/v1/completions", content=b"{}",
                            extensions={"timeout": {"read": 1.0, "write": 1.0, "connect": 1.0}})
        resp = await t.handle_async_request(req)
        return resp.status_code, b"".join([p async for p in resp.stream])

    assert run(go()) == (200, b"hello world")


def test_a_new_connection_that_fails_is_not_retried():
    t = FastHTTP11Transport()

    async def fake_connect(origin, timeout, request):
        return conn([])

    t._connect = fake_connect  # type: ignore[method-assign]

    async def go():
        req = httpx.Request("POST", "http://test/v1/completions", content=b"{}",
                            extensions={"timeout": {"read": 1.0}})
        await t.handle_async_request(req)

    with pytest.raises(httpx.RemoteProtocolError, match="without a response"):
        run(go())


def test_request_head_framing():
    from flopwise.bench.http11 import _request_head

    req = httpx.Request("POST", "http://test:8000/v1/x?a=1", content=b"abc", headers={"x-k": "v"})
    head = _request_head(req, b"abc")
    assert head.startswith(b"POST /v1/x?a=1 HTTP/1.1\r\n") and head.endswith(b"\r\n\r\n")
    assert b"\r\nContent-Length: 3\r\n" in head or b"\r\ncontent-length: 3\r\n" in head
    assert b"transfer-encoding" not in head.lower()
