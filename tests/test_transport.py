"""KeepAliveTransport (upstream/transport.py) against real HTTP/1.1 servers on 127.0.0.1.

Each server is a few lines of asyncio that answer exactly as a test needs (chunked, close-delimited,
HEAD, interim 100, gzip, broken, silent, closing idle connections), so the transport's handling of
the wire is checked byte for byte through httpx2's client, as client.py uses it.
"""

from __future__ import annotations

import asyncio
import gzip
import os
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import httpx2
import pytest

from openapi2mcp.upstream import KeepAliveTransport

pytestmark = pytest.mark.anyio

Handler = Callable[[bytes, bytes, asyncio.StreamReader, asyncio.StreamWriter], Awaitable[bool]]


class Server:
    """Reads requests (head and Content-Length or chunked body) and lets `handler` answer; counts connections."""

    def __init__(self, handler: Handler) -> None:
        self.handler = handler
        self.connections = 0
        self.requests: list[tuple[bytes, bytes]] = []

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
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
