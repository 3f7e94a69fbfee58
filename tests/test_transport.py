"""KeepAliveTransport (upstream/transport.py) against real HTTP/1.1 servers on 127.0.0.1.

Each server is a few lines of asyncio that answer exactly as a test needs (chunked, close-delimited,
HEAD, interim 100, gzip, broken, silent, closing idle connections), so the transport's handling of
the wire is checked byte for byte through httpx2's client, as client.py uses it.
"""

from __future__ import annotations

import asyncio
import gzip
import os
import urllib.request
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import httpx2
import pytest

from openapi2mcp.upstream import KeepAliveTransport, Upstream
from openapi2mcp.upstream.transport import PlainRequests, request_head
from tests.runtime_upstream import manifest, op

pytestmark = pytest.mark.anyio

Handler = Callable[[bytes, bytes, asyncio.StreamReader, asyncio.StreamWriter], Awaitable[bool]]


class Server:
    """Reads requests (head and Content-Length or chunked body) and lets `handler` answer; counts connections."""

    def __init__(self, handler: Handler) -> None:
        self.handler = handler
        self.connections = 0
        self.requests: list[tuple[bytes, bytes]] = []
        self.heads: list[bytes] = []  # each request's line and headers, as they arrived

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                self.heads.append(head)
                lines = head.split(b"\r\n")
                fields = {k.strip().lower(): v.strip() for k, _, v in (ln.partition(b":") for ln in lines[1:] if ln)}
                if fields.get(b"transfer-encoding") == b"chunked":
                    body = b""
                    while size := int((await reader.readuntil(b"\r\n")).strip(), 16):
                        body += (await reader.readexactly(size + 2))[:-2]
                    await reader.readuntil(b"\r\n")
                else:
                    body = await reader.readexactly(int(fields.get(b"content-length", b"0")))
                self.requests.append((lines[0], body))
                if not await self.handler(lines[0], body, reader, writer):
                    break
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.CancelledError):  # done, or torn down
            pass
        finally:
            writer.close()


@asynccontextmanager
async def serving(handler: Handler) -> AsyncIterator[tuple[Server, str]]:
    server = Server(handler)
    listener = await asyncio.start_server(server.serve, "127.0.0.1", 0)
    port = listener.sockets[0].getsockname()[1]
    try:
        yield server, f"http://127.0.0.1:{port}"
    finally:
        listener.close()


@asynccontextmanager
async def client(base: str, **limits: Any) -> AsyncIterator[httpx2.AsyncClient]:
    transport = KeepAliveTransport(ssl_context=httpx2.create_ssl_context(),
                                   limits=httpx2.Limits(**{"keepalive_expiry": 4.0, **limits}))
    async with httpx2.AsyncClient(base_url=base, transport=transport, timeout=httpx2.Timeout(2.0)) as c:
        yield c


def answer(status: str, body: bytes, *headers: str) -> bytes:
    extra = "".join(f"{h}\r\n" for h in headers)
    return f"HTTP/1.1 {status}\r\ncontent-length: {len(body)}\r\n{extra}\r\n".encode() + body


async def echo(line: bytes, body: bytes, reader: Any, writer: asyncio.StreamWriter) -> bool:
    writer.write(answer("200 OK", line + b"|" + body, "content-type: text/plain"))
    return True


async def test_keep_alive_reuses_one_connection() -> None:
    async with serving(echo) as (server, base), client(base) as c:
        for i in range(5):
            r = await c.get(f"/item/{i}", params={"q": "a b"})
            assert r.status_code == 200 and r.text == f"GET /item/{i}?q=a+b HTTP/1.1|"
        assert server.connections == 1


async def test_concurrent_requests_each_get_a_connection_and_keep_it() -> None:
    async def slow(line: bytes, body: bytes, reader: Any, writer: asyncio.StreamWriter) -> bool:
        await asyncio.sleep(0.05)
        return await echo(line, body, reader, writer)

    async with serving(slow) as (server, base), client(base) as c:
        for _ in range(3):
            answers = await asyncio.gather(*(c.get(f"/{i}") for i in range(8)))
            assert [r.text for r in answers] == [f"GET /{i} HTTP/1.1|" for i in range(8)]
        assert server.connections == 8


async def test_request_bodies_fixed_and_chunked() -> None:
    async def chunks() -> AsyncIterator[bytes]:
        for part in (b"one ", b"", b"two"):
            yield part

    async with serving(echo) as (server, base), client(base) as c:
        assert (await c.post("/a", content=b"x" * 300_000)).text == "POST /a HTTP/1.1|" + "x" * 300_000
        assert (await c.post("/b", content=chunks())).text == "POST /b HTTP/1.1|one two"
        assert (await c.post("/c", json={"k": 1})).text == 'POST /c HTTP/1.1|{"k":1}'
        assert server.connections == 1


async def test_chunked_gzip_and_large_answers() -> None:
    big = os.urandom(3_000_000)
    packed = gzip.compress(b'{"ok": true}')

    async def odd(line: bytes, body: bytes, reader: Any, writer: asyncio.StreamWriter) -> bool:
        if b"/chunked" in line:
            writer.write(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n")
        elif b"/gzip" in line:
            writer.write(answer("200 OK", packed, "content-encoding: gzip", "content-type: application/json"))
        else:
            writer.write(answer("200 OK", big))
        return True

    async with serving(odd) as (server, base), client(base) as c:
        assert (await c.get("/chunked")).text == "hello world"
        assert (await c.get("/gzip")).json() == {"ok": True}
        async with c.stream("GET", "/big") as r:
            got = b"".join([chunk async for chunk in r.aiter_raw()])
        assert got == big
        assert (await c.get("/chunked")).text == "hello world"
        assert server.connections == 1


async def test_head_interim_no_content_and_close_delimited_answers() -> None:
    async def kinds(line: bytes, body: bytes, reader: Any, writer: asyncio.StreamWriter) -> bool:
        if line.startswith(b"HEAD"):
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 1234\r\n\r\n")  # no body follows a HEAD answer
        elif b"/continue" in line:
            writer.write(b"HTTP/1.1 100 Continue\r\n\r\n" + answer("201 Created", b"made"))
        elif b"/empty" in line:
            writer.write(b"HTTP/1.1 204 No Content\r\n\r\n")
        else:  # neither a length nor chunks: the body ends with the connection
            writer.write(b"HTTP/1.1 200 OK\r\nconnection: close\r\n\r\nuntil the end")
            return False
        return True

    async with serving(kinds) as (server, base), client(base) as c:
        head = await c.head("/thing")
        assert head.status_code == 200 and head.content == b"" and head.headers["content-length"] == "1234"
        created = await c.post("/continue", content=b"x")
        assert created.status_code == 201 and created.text == "made"
        assert (await c.get("/empty")).status_code == 204
        assert (await c.get("/close")).text == "until the end"
        assert (await c.get("/empty")).status_code == 204  # a new connection after the close
        assert server.connections == 3  # HEAD's connection is not kept (its answer's length is not the body's)


async def test_an_idle_connection_the_upstream_closed_is_not_reused() -> None:
    async def once(line: bytes, body: bytes, reader: Any, writer: asyncio.StreamWriter) -> bool:
        await echo(line, body, reader, writer)
        await writer.drain()
        return False  # answered with keep-alive, then closed while idle

    async with serving(once) as (server, base), client(base) as c:
        assert (await c.get("/1")).status_code == 200
        await asyncio.sleep(0.1)  # the close arrives: the pool drops the connection without probing it
        assert (await c.get("/2")).status_code == 200
        assert server.connections == 2


async def test_expired_connections_are_replaced() -> None:
    async with serving(echo) as (server, base), client(base, keepalive_expiry=0.05) as c:
        await c.get("/1")
        await asyncio.sleep(0.1)
        await c.get("/2")
        assert server.connections == 2


async def test_failures_are_httpx2_errors() -> None:
    async def broken(line: bytes, body: bytes, reader: Any, writer: asyncio.StreamWriter) -> bool:
        if b"/garbage" in line:
            writer.write(b"NOT HTTP AT ALL\r\n\r\n")
        elif b"/silent" in line:
            await asyncio.sleep(5)
        elif b"/cut" in line:
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\nonly this")
        return False  # hang up (at once, or after the partial answer)

    async with serving(broken) as (_, base), client(base) as c:
        with pytest.raises(httpx2.RemoteProtocolError):
            await c.get("/garbage")
        with pytest.raises(httpx2.RemoteProtocolError, match="without sending an answer"):
            await c.get("/nothing")
        with pytest.raises(httpx2.RemoteProtocolError, match="before its answer was complete"):
            await c.get("/cut")
        with pytest.raises(httpx2.ReadTimeout):
            await c.get("/silent", timeout=0.2)
    listener = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
    port = listener.sockets[0].getsockname()[1]
    listener.close()
    await listener.wait_closed()
    async with client(f"http://127.0.0.1:{port}") as c:
        with pytest.raises(httpx2.ConnectError):
            await c.get("/")


async def test_the_pool_limit_waits_then_times_out() -> None:
    release = asyncio.Event()

    async def held(line: bytes, body: bytes, reader: Any, writer: asyncio.StreamWriter) -> bool:
        await release.wait()
        return await echo(line, body, reader, writer)

    async with serving(held) as (_, base), client(base, max_connections=1) as c:
        first = asyncio.create_task(c.get("/1"))
        await asyncio.sleep(0.05)
        with pytest.raises(httpx2.PoolTimeout):
            await c.get("/2", timeout=httpx2.Timeout(2.0, pool=0.1))
        release.set()
        assert (await first).status_code == 200
        assert (await c.get("/3")).status_code == 200


# ============================================================================ plain requests (no httpx2 objects)

URLS = ["http://127.0.0.1:8000/a/b?x=1&y=%20z&e=", "https://api.example.com/p", "http://[::1]:9000/x",
        "http://example.com:80/", "http://h/p%C3%A9/q?s=a+b", "https://example.com:443/a//b/../c"]
HEADER_SETS: list[dict[str, str]] = [
    {}, {"Accept": "application/json"}, {"accept": "text/plain", "Accept": "application/json"},
    {"User-Agent": "me/1", "X-Api-Key": "k"}, {"Connection": "close", "ACCEPT-ENCODING": "identity"},
    {"Cookie": "a=b; c=d", "Content-Type": "application/json", "Idempotency-Key": "\tk 1 "},
]
CONTENTS = [None, b"", b'{"a": 1}']


def built(c: httpx2.AsyncClient, method: str, url: str, headers: dict[str, str], content: bytes | None) -> bytes:
    """What KeepAliveTransport writes for the request httpx2 builds (client.py's httpx2 path)."""
    request = c.build_request(method, url, headers=headers, content=content)
    return request_head(request.method, request.url.raw_path, request.headers.raw) + request.read()


async def test_a_plain_request_is_the_bytes_httpx2_would_write() -> None:
    async with client("http://unused") as c:
        plain = PlainRequests(c, c._transport)  # type: ignore[arg-type]
        for method in ("GET", "HEAD", "DELETE", "OPTIONS", "POST", "PUT", "PATCH", "post"):
            for url in URLS:
                for headers in HEADER_SETS:
                    for content in CONTENTS:
                        made = plain.prepare(method, url, headers, content)
                        assert made is not None, (method, url, headers)
                        assert made.data == built(c, method, url, headers, content), (method, url, headers, content)


async def test_what_is_not_plain_is_left_to_httpx2() -> None:
    async with client("http://unused") as c:
        plain = PlainRequests(c, c._transport)  # type: ignore[arg-type]
        for headers in ({"Host": "other"}, {"content-length": "3"}, {"Transfer-Encoding": "chunked"},
                        {"X-Note": "caf\u00e9"}, {"X-Bad": "a\r\nb"}, {"Bad Name": "x"}):
            assert plain.prepare("POST", "http://h/x", headers, b"abc") is None, headers
        assert plain.prepare("GET", "http://user:pw@h/x", {}, None) is None  # httpx2 sends it as Basic auth
        assert plain.prepare("GET", "ftp://h/x", {}, None) is None
        c.cookies.set("session", "s-1", domain="h.local")
        assert plain.prepare("GET", "http://h/x", {}, None) is None  # the jar's cookies are httpx2's to merge


async def test_a_plain_exchange_answers_as_httpx2s_response() -> None:
    async def kinds(line: bytes, body: bytes, reader: Any, writer: asyncio.StreamWriter) -> bool:
        if b"/chunked" in line:
            writer.write(b"HTTP/1.1 201 Made It\r\ntransfer-encoding: chunked\r\nx-a: 1\r\nX-A: 2\r\n\r\n"
                         b"5\r\nhello\r\n0\r\n\r\n")
            return True
        return await echo(line, body, reader, writer)

    async with serving(kinds) as (server, base), client(base) as c:
        plain = PlainRequests(c, c._transport)  # type: ignore[arg-type]
        cases = (("GET", "/chunked", None), ("POST", "/echo?q=1", b"payload"), ("PUT", "/e", None))
        for method, path, content in cases:
            made = plain.prepare(method, base + path, {"Accept": "application/json"}, content)
            assert made is not None
            answer = await plain.send(made)
            got = b"".join([chunk async for chunk in answer.body])
            await answer.body.aclose()
            response = await c.request(method, base + path, headers={"Accept": "application/json"}, content=content)
            assert server.heads[-1] == server.heads[-2]  # the same request on the wire
            assert (answer.status, answer.headers, got) == (response.status_code, response.headers.raw,
                                                             response.content)
            assert answer.reason.decode() == response.reason_phrase
        assert server.connections == 1  # both kinds of request share the pool


async def test_the_upstream_client_answers_alike_on_both_paths() -> None:
    """Upstream.send on the plain path and on httpx2's: the same requests on the wire, the same answers,
    and what only httpx2 does (a redirect, a compressed body) still done by it; a cookie set is kept by neither."""
    packed = gzip.compress(b'{"packed": true}')

    async def site(line: bytes, body: bytes, reader: Any, writer: asyncio.StreamWriter) -> bool:
        if b"/moved" in line:
            writer.write(answer("302 Found", b"", "location: /items/9"))
        elif b"/gzip" in line:
            writer.write(answer("200 OK", packed, "content-encoding: gzip", "content-type: application/json"))
        elif b"/login" in line:
            writer.write(answer("200 OK", b"{}", "set-cookie: sid=s-1; Path=/", "content-type: application/json"))
        else:
            writer.write(answer("200 OK", b'{"line": "%s"}' % line, "content-type: application/json"))
        return True

    def spec(base: str) -> Any:
        return manifest(base).upstream

    if urllib.request.getproxies():
        pytest.skip("a proxy is configured: client.py sends through httpx2's own transport")
    paths = ["/items/1", "/moved", "/gzip", "/items/2", "/login", "/items/3"]
    seen: dict[bool, list[tuple[Any, ...]]] = {}
    async with serving(site) as (server, base):
        for plain in (True, False):
            up = Upstream(spec(base), {})
            client = up.client
            if not plain:
                up._plain = None  # every request through httpx2's objects, as before the plain path
            assert (up._plain is not None) == plain
            start = len(server.heads)
            got = []
            for path in paths:
                r = await up.send(op("GET", path), {}, lambda expr: None)
                got.append((r.status, r.reason, r.headers.raw, r.body, r.url, r.method))
            assert dict(client.cookies) == {}  # the cookie was not kept, on either path (one client, every caller)
            seen[plain] = [*got, *server.heads[start:]]
            await up.aclose()
    assert seen[True] == seen[False]
    assert b"cookie:" not in seen[True][-1].lower()  # nor sent on the next request
    assert seen[True][2][3] == b'{"packed": true}'
