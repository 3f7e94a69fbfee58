"""`KeepAliveTransport`: the upstream's HTTP/1.1 connections, on asyncio protocols and httptools' parser.

httpx2's own transport (httpcore2 over anyio streams) spends more CPU per request than the rest
of a tool call together: its pool probes every idle connection's socket for readability on each
request (twice), and parses responses with h11 in Python. This transport keeps httpx2's client
(request building, auth, redirects off, decoding, the exceptions client.py maps) and replaces
only the wire: one `asyncio.Protocol` per connection, whose `connection_lost` tells the pool that
the upstream closed it (no probe), and httptools (llhttp, in C) to read the answers.

What it does, like httpx2's default: HTTP/1.1 with keep-alive, `Limits` (at most
`max_connections` requests in flight, `max_keepalive_connections` idle connections kept, each
for `keepalive_expiry` s), the client's connect/read/write/pool timeouts (httpx2's timeout
exceptions), TLS with the client's SSL context, streamed bodies both ways (flow-controlled).
What it does not: proxies (client.py uses httpx2's transport when a proxy variable is set),
HTTP/2, upgrades. A HEAD answer, or one after which the upstream closes, is not kept alive.

`PlainRequests` and `KeepAliveTransport.exchange` skip httpx2's objects for a plain request (ASCII
headers, bytes or no body, no cookie jar to merge): `PlainRequests.head` writes the bytes that
`client.build_request(...)` would put on the wire here (tests/test_transport.py holds it to that),
and the answer comes back as an `Answer` (status, headers, body stream) for client.py to read or
to turn into the httpx2 `Response` that `client.send` would have made.
"""

from __future__ import annotations

import asyncio
import re
import ssl
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

import httptools
import httpx2

_DEFAULT_PORTS: Final = {"http": 80, "https": 443}
_READ_HIGH_WATER: Final = 256 * 1024  # bytes of body buffered before the socket stops being read

Origin = tuple[str, str, int]


def request_head(method: str, target: bytes, headers: list[tuple[bytes, bytes]]) -> bytes:
    """A request's line and header fields as they go on the wire."""
    head = [method.encode("ascii"), b" ", target, b" HTTP/1.1\r\n"]
    for name, value in headers:
        head += [name, b": ", value, b"\r\n"]
    head.append(b"\r\n")
    return b"".join(head)


class _Connection(asyncio.Protocol):
    """One HTTP/1.1 connection: writes a request, parses its answer (httptools calls back)."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.parser = httptools.HttpResponseParser(self)
        self.closed = False
        self.idle_since = 0.0
        self._changed: asyncio.Future[None] | None = None
        self._writable = asyncio.Event()
        self._writable.set()
        self._begin(head=False)

    def _begin(self, *, head: bool) -> None:
        self.head = head  # a HEAD request's answer has no body, whatever its headers say
        self.status = 0
        self.reason = b""
        self.headers: list[tuple[bytes, bytes]] = []
        self.headers_done = False
        self.keep_alive = False
        self.complete = False
        self.chunks: list[bytes] = []
        self.buffered = 0
        self.error: Exception | None = None

    # ---------------------------------------------------------------- asyncio.Protocol

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            self._fail(httpx2.RemoteProtocolError("the upstream switched protocols"))
        except httptools.HttpParserError as e:
            self._fail(httpx2.RemoteProtocolError(f"the upstream sent an invalid HTTP response ({e})"))
        self._wake()

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self._writable.set()
        if not self.complete and self.error is None:
            if self.headers_done and self._until_close():  # a body that ends with the connection is complete now
                self.complete = True
            else:
                got = "before its answer was complete" if self.headers_done else "without sending an answer"
                self.error = (httpx2.ReadError(f"the upstream closed the connection {got} ({exc})") if exc else
                              httpx2.RemoteProtocolError(f"the upstream closed the connection {got}"))
        self._wake()

    def _until_close(self) -> bool:
        """Whether the answer's body has neither a length nor chunks: it ends when the connection does."""
        names = {name.lower() for name, _ in self.headers}
        return b"content-length" not in names and b"transfer-encoding" not in names

    def pause_writing(self) -> None:
        self._writable.clear()

    def resume_writing(self) -> None:
        self._writable.set()

    # ---------------------------------------------------------------- httptools callbacks

    def on_status(self, reason: bytes) -> None:
        self.reason += reason

    def on_header(self, name: bytes, value: bytes) -> None:
        self.headers.append((name, value))

    def on_headers_complete(self) -> None:
        status = self.parser.get_status_code()
        if 100 <= status < 200:  # an interim answer (100 Continue, 103 Early Hints): the real one follows
            self.reason, self.headers = b"", []
            return
        self.status = status
        self.headers_done = True
        self.keep_alive = self.parser.should_keep_alive()  # llhttp forgets it once the message is complete
        if self.head:
            self.complete = True

    def on_body(self, body: bytes) -> None:
        if self.head:
            return
        self.chunks.append(body)
        self.buffered += len(body)
        if self.buffered > _READ_HIGH_WATER and self.transport is not None:
            self.transport.pause_reading()

    def on_message_complete(self) -> None:
        if self.headers_done:
            self.complete = True

    # ---------------------------------------------------------------- the request's side

    def _fail(self, error: Exception) -> None:
        if self.error is None:
            self.error = error
        if self.transport is not None:
            self.transport.close()

    def _wake(self) -> None:
        if self._changed is not None and not self._changed.done():
            self._changed.set_result(None)

    async def _wait(self, seconds: float | None) -> None:
        """Until the parser or the connection has news, or `timeout` (a ReadTimeout)."""
        self._changed = asyncio.get_running_loop().create_future()
        try:
            async with asyncio.timeout(seconds):
                await self._changed
        except TimeoutError:
            raise httpx2.ReadTimeout("the upstream did not answer in time") from None
        finally:
            self._changed = None

    def reusable(self) -> bool:
        return not self.closed and self.complete and not self.head and self.error is None and self.keep_alive

    async def send(self, request: httpx2.Request, write_timeout: float | None) -> None:
        self._begin(head=request.method == "HEAD")
        chunked = any(name.lower() == b"transfer-encoding" and b"chunked" in value.lower()
                      for name, value in request.headers.raw)
        assert self.transport is not None
        self.transport.write(request_head(request.method, request.url.raw_path, request.headers.raw))
        stream: Any = request.stream
        async for chunk in stream:
            if chunk:
                self.transport.write(b"%x\r\n%s\r\n" % (len(chunk), chunk) if chunked else chunk)
                await self._drain(write_timeout)
        if chunked:
            self.transport.write(b"0\r\n\r\n")
        await self._drain(write_timeout)

    async def send_bytes(self, data: bytes, *, head: bool, write_timeout: float | None) -> None:
        """A whole request already on the wire's terms (`PlainRequests.head` and the body), in one write."""
        self._begin(head=head)
        assert self.transport is not None
        self.transport.write(data)
        await self._drain(write_timeout)

    async def _drain(self, seconds: float | None) -> None:
        if self.closed:
            raise self.error or httpx2.WriteError("the upstream closed the connection")
        if self._writable.is_set():
            return
        try:
            async with asyncio.timeout(seconds):
                await self._writable.wait()
        except TimeoutError:
            raise httpx2.WriteTimeout("the upstream did not take the request in time") from None
        if self.closed:
            raise self.error or httpx2.WriteError("the upstream closed the connection")

    async def answer_head(self, read_timeout: float | None) -> None:
        while not self.headers_done:
            if self.error is not None:
                raise self.error
            await self._wait(read_timeout)

    async def body(self, read_timeout: float | None) -> AsyncIterator[bytes]:
        while True:
            if self.chunks:
                chunks, self.chunks, self.buffered = self.chunks, [], 0
                if self.transport is not None and not self.closed:
                    self.transport.resume_reading()
                yield b"".join(chunks)
                continue
            if self.complete:
                return
            if self.error is not None:
                raise self.error
            await self._wait(read_timeout)

    def close(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.close()


class _Body(httpx2.AsyncByteStream):
    """A response's body as it arrives; closing it gives the connection back to the pool (or closes it)."""

    def __init__(self, pool: KeepAliveTransport, origin: Origin, conn: _Connection, read_timeout: float | None):
        self._pool, self._origin, self._conn, self._timeout = pool, origin, conn, read_timeout
        self._released = False

    async def __aiter__(self) -> AsyncIterator[bytes]:
        try:
            async for chunk in self._conn.body(self._timeout):
                yield chunk
        except BaseException:
            self._release(keep=False)
            raise

    async def aclose(self) -> None:
        self._release(keep=self._conn.reusable())

    def _release(self, *, keep: bool) -> None:
        if not self._released:
            self._released = True
            self._pool.release(self._origin, self._conn, keep=keep)


class KeepAliveTransport(httpx2.AsyncBaseTransport):
    """httpx2's transport interface over pooled `_Connection`s (the module docstring says what it covers)."""

    def __init__(self, *, ssl_context: ssl.SSLContext, limits: httpx2.Limits) -> None:
        self._ssl = ssl_context
        self._max_idle = limits.max_keepalive_connections  # None: no cap (httpx2's meaning)
        self._expiry = limits.keepalive_expiry
        self._max_connections = limits.max_connections
        self._idle: dict[Origin, list[_Connection]] = {}
        self._slots: asyncio.Semaphore | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        timeouts = request.extensions.get("timeout", {})
        origin = _origin(request.url)
        conn = await self._exchange(origin, timeouts, lambda c: c.send(request, timeouts.get("write")))
        return httpx2.Response(
            conn.status, headers=conn.headers, stream=_Body(self, origin, conn, timeouts.get("read")),
            extensions={"http_version": b"HTTP/1.1", "reason_phrase": conn.reason},
        )

    async def exchange(self, origin: Origin, data: bytes, *, head: bool,
                       timeouts: Mapping[str, float | None]) -> Answer:
        """Send `data` (a whole request: PlainRequests.head and the body) and wait for the answer's head."""
        conn = await self._exchange(origin, timeouts,
                                    lambda c: c.send_bytes(data, head=head, write_timeout=timeouts.get("write")))
        return Answer(conn.status, conn.reason, conn.headers, _Body(self, origin, conn, timeouts.get("read")))

    async def _exchange(self, origin: Origin, timeouts: Mapping[str, float | None],
                        write: Callable[[_Connection], Awaitable[None]]) -> _Connection:
        """A connection (a pool slot held) that has sent a request and read its answer's head."""
        await self._acquire(timeouts.get("pool"))
        try:
            conn = self._idle_connection(origin) or await self._connect(origin, timeouts.get("connect"))
            try:
                await write(conn)
                await conn.answer_head(timeouts.get("read"))
            except BaseException:
                conn.close()
                raise
        except BaseException:
            self._free()
            raise
        return conn

    async def _acquire(self, seconds: float | None) -> None:
        loop = asyncio.get_running_loop()
        if self._loop is not loop:  # first use, or a new event loop (connections do not cross loops)
            self._loop, self._idle = loop, {}
            self._slots = asyncio.Semaphore(self._max_connections) if self._max_connections else None
        if self._slots is None:
            return
        try:
            async with asyncio.timeout(seconds):
                await self._slots.acquire()
        except TimeoutError:
            raise httpx2.PoolTimeout("no upstream connection was free in time") from None

    def _free(self) -> None:
        if self._slots is not None:
            self._slots.release()

    def _idle_connection(self, origin: Origin) -> _Connection | None:
        idle = self._idle.get(origin)
        now = time.monotonic()
        while idle:
            conn = idle.pop()  # the most recently used: the least likely to have been closed by the upstream
            if not conn.closed and (self._expiry is None or now - conn.idle_since < self._expiry):
                return conn
            conn.close()
        return None

    async def _connect(self, origin: Origin, seconds: float | None) -> _Connection:
        scheme, host, port = origin
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(seconds):
                _, conn = await loop.create_connection(
                    _Connection, host, port, ssl=self._ssl if scheme == "https" else None,
                    server_hostname=host if scheme == "https" else None,
                )
        except TimeoutError:
            raise httpx2.ConnectTimeout("the upstream did not accept a connection in time") from None
        except (OSError, ssl.SSLError) as e:
            raise httpx2.ConnectError(str(e) or type(e).__name__) from None
        return conn

    def release(self, origin: Origin, conn: _Connection, *, keep: bool) -> None:
        self._free()
        idle = self._idle.setdefault(origin, [])
        if keep and (self._max_idle is None or len(idle) < self._max_idle):
            conn.idle_since = time.monotonic()
            idle.append(conn)
        else:
            conn.close()

    async def aclose(self) -> None:
        for idle in self._idle.values():
            for conn in idle:
                conn.close()
        self._idle = {}


def _origin(url: httpx2.URL) -> Origin:
    scheme = url.scheme
    if scheme not in _DEFAULT_PORTS:
        raise httpx2.UnsupportedProtocol(f"unsupported URL scheme {scheme!r}")
    return scheme, url.host, url.port or _DEFAULT_PORTS[scheme]


# ============================================================================ plain requests, without httpx2's objects


@dataclass
class Answer:
    """The head of the upstream's answer to `exchange`, and its body as it arrives (`aclose` frees the connection)."""

    status: int
    reason: bytes
    headers: list[tuple[bytes, bytes]]
    body: _Body

    def has(self, name: bytes) -> bool:
        return any(key.lower() == name for key, _ in self.headers)


@dataclass(frozen=True)
class Plain:
    """A request `PlainRequests.prepare` accepted: where it goes and the bytes that make it."""

    method: str
    url: httpx2.URL
    origin: Origin
    data: bytes


# what a plain request's header fields may hold: visible ASCII, spaces and tabs (anything else: httpx2 decides)
_FIELD: Final = re.compile(r"[\t\x20-\x7e]*")
_TOKEN: Final = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
# headers httpx2 sets itself or merges from elsewhere when given: left to it
_OWN: Final = frozenset({"host", "content-length", "transfer-encoding"})
_SENDS_LENGTH: Final = frozenset({"POST", "PUT", "PATCH", "QUERY"})  # an empty one gets Content-Length: 0


class PlainRequests:
    """The bytes `client.build_request(...)` puts on a KeepAliveTransport's wire, for plain requests, built directly.

    httpx2 builds a `Request` (URL merging, its `Headers` merged with the client's defaults, the
    Host and Content-Length it adds) and then a `Response` per request, which cost as much CPU as
    the rest of the upstream request. A plain request is written from `client.headers` (the
    defaults, in httpx2's merge order) and its own: `prepare` answers None for anything else, and
    client.py builds the httpx2 request as before.
    """

    def __init__(self, client: httpx2.AsyncClient, transport: KeepAliveTransport) -> None:
        self.client = client
        self.transport = transport
        self.defaults = [(name, name.lower(), value) for name, value in client.headers.raw]
        self.timeouts: dict[str, float | None] = client.timeout.as_dict()

    def prepare(self, method: str, url: str, headers: Mapping[str, str], content: bytes | None) -> Plain | None:
        """The request, if plain: bytes or no body, headers of visible ASCII, a URL without credentials, no cookies."""
        if len(self.client.cookies.jar) or not all(
                _TOKEN.fullmatch(name) and _FIELD.fullmatch(value) and name.lower() not in _OWN
                for name, value in headers.items()):
            return None
        parsed = httpx2.URL(url)
        if parsed.userinfo or parsed.scheme not in _DEFAULT_PORTS or not parsed.host:
            return None
        method = method.upper()
        head = self.head(method, parsed, headers, content)
        return Plain(method, parsed, _origin(parsed), head + content if content else head)

    def head(self, method: str, url: httpx2.URL, headers: Mapping[str, str], content: bytes | None) -> bytes:
        """httpx2's merge: the client's defaults not given, then the given ones; Host first, a body's length last."""
        given = [(name.encode("ascii"), name.lower().encode("ascii"), value.encode("ascii"))
                 for name, value in headers.items()]
        names = {lower for _, lower, _ in given}
        fields = [(name, value) for name, lower, value in self.defaults if lower not in names]
        fields += [(name, value) for name, _, value in given]
        if content:
            fields.append((b"Content-Length", str(len(content)).encode("ascii")))
        auto = [(b"Host", _host(url))]
        if not content and method in _SENDS_LENGTH:
            auto.append((b"Content-Length", b"0"))
        return request_head(method, url.raw_path, auto + fields)

    async def send(self, plain: Plain) -> Answer:
        return await self.transport.exchange(plain.origin, plain.data, head=plain.method == "HEAD",
                                             timeouts=self.timeouts)


def _host(url: httpx2.URL) -> bytes:
    """httpx2's Host header: the URL's netloc, an IPv6 zone left out."""
    netloc = url.netloc
    if netloc.startswith(b"["):
        host, bracket, port = netloc.partition(b"]")
        netloc = host.partition(b"%")[0] + bracket + port
    return netloc
