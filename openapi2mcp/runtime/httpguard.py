"""What the Streamable HTTP transport does against callers that hold resources (docs/access.md).

uvicorn and the SDK leave three holes a caller without a token can use, and one any caller can:

* **Unfinished requests.** uvicorn times out idle keep-alive connections, but not a connection
  that sends half a request line, half its headers or half its body: it stays open for ever.
  `GuardedH11` (uvicorn's h11 protocol, subclassed) gives every request a deadline for its
  headers (`header_timeout`, from the connection's first byte or the request's first byte) and
  one for its body (`body_timeout`, from the end of the headers); an expired request is answered
  `408 Request Timeout` with `Connection: close` and its connection is closed. The deadlines are
  absolute: sending one byte a second does not extend them. uvicorn has no such setting, and an
  ASGI middleware cannot see a request before its headers are complete, so it is done here.
* **Too many connections.** `max_connections` is uvicorn's `limit_concurrency`: past it a new
  request is answered 503. Headers are capped at 16 KiB (h11's limit; 400 past it).
* **Host reflection.** `HostGuard` applies the DNS-rebinding Host check (the SDK's own) to every
  path except `/healthz`, before authentication, so that the 401 challenge and the protected
  resource metadata (auth.py) are never built from a Host this server does not answer to.
* **The session table.** The SDK keeps up to 10,000 stateful sessions for 30 minutes of idleness;
  one caller could open them all. `SessionCap` allows each caller (the token's subject; the
  client address when there is no auth, an IPv6 /64 counting as one address) `sessions_per_caller`
  open sessions: one more is answered `429 Too Many Requests` with a JSON-RPC error saying how to
  free one. Stateless HTTP and 2026-07-28 requests have no sessions and are not counted.
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import logging
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any, Final

import h11
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.transport_security import (
    DEFAULT_MAX_REQUEST_BODY_SIZE,
    TransportSecurityMiddleware,
    TransportSecuritySettings,
)
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from uvicorn.protocols.http.h11_impl import H11Protocol

from openapi2mcp.runtime.access import caller_of_token
from openapi2mcp.runtime.options import HttpLimits

log = logging.getLogger("openapi2mcp.http")

MAX_HEADER_BYTES: Final = 16 * 1024  # h11's default limit on a request's line and headers
MAX_BODY_BYTES: Final = DEFAULT_MAX_REQUEST_BODY_SIZE  # the SDK's request body limit (it answers 413 past it)
SESSION_IDLE_MINUTES: Final = 30  # the SDK's session idle timeout (streamable_http_manager)
_TIMEOUT_BODY: Final = b"the request did not arrive in time\n"
_TIMEOUT_RESPONSE: Final = (b"HTTP/1.1 408 Request Timeout\r\ncontent-type: text/plain; charset=utf-8\r\n"
                            b"content-length: %d\r\nconnection: close\r\n\r\n%s" % (len(_TIMEOUT_BODY), _TIMEOUT_BODY))

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


# ============================================================================ unfinished requests


class _Deadlines:
    """The deadlines of a request's headers and of its body, for either of uvicorn's HTTP protocols."""

    header_timeout: float = HttpLimits.header_timeout
    body_timeout: float = HttpLimits.body_timeout

    _deadline: asyncio.TimerHandle | None = None
    _phase: str | None = None  # "headers" or "body": what the armed deadline waits for
    loop: asyncio.AbstractEventLoop
    transport: asyncio.Transport
    cycle: Any
    client: tuple[str, int] | None

    def _watch(self, phase: str) -> None:
        if self._phase == phase:
            return  # deadlines are absolute: more bytes do not extend them
        self._cancel()
        timeout = self.header_timeout if phase == "headers" else self.body_timeout
        self._phase = phase
        self._deadline = self.loop.call_later(timeout, self._expired, phase)

    def _cancel(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
        self._deadline, self._phase = None, None

    def _expired(self, phase: str) -> None:
        self._deadline, self._phase = None, None
        if self.transport.is_closing():
            return
        cycle = self.cycle if phase == "body" else None  # while headers are due, self.cycle is the last request's
        answered = cycle is not None and cycle.response_started
        if cycle is not None and not cycle.response_complete:
            cycle.disconnected = True  # the app's receive() now says http.disconnect; its sends are dropped
            cycle.message_event.set()
        where = f"from {self.client[0]}:{self.client[1]} " if self.client else ""
        timeout = self.header_timeout if phase == "headers" else self.body_timeout
        log.info("closed the connection %sbecause the request's %s did not arrive within %g s", where, phase, timeout)
        if not answered:
            self.transport.write(_TIMEOUT_RESPONSE)
        self.transport.close()


class GuardedH11(_Deadlines, H11Protocol):
    """uvicorn's h11 protocol with deadlines for a request's headers and for its body."""

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._watch("headers")  # a connection that sends nothing is held no longer than a slow one

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        self._track(data_pending=True)

    def on_response_complete(self) -> None:
        super().on_response_complete()  # arms the keep-alive timeout; may start a pipelined request
        self._track(data_pending=bool(self.conn.trailing_data[0]))

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel()
        super().connection_lost(exc)

    def _track(self, *, data_pending: bool) -> None:
        """Arm the deadline of what the client owes now; the app's own time is not limited here."""
        if self.transport.is_closing():
            self._cancel()
            return
        state = self.conn.their_state
        if state is h11.SEND_BODY:
            self._watch("body")
        elif state is h11.IDLE and data_pending:  # part of a request line or headers
            self._watch("headers")
        else:  # the request is in (the app answers), or the connection idles (keep-alive timeout)
            self._cancel()


def _httptools_protocol() -> type[asyncio.Protocol] | None:
    """uvicorn's httptools protocol with the same deadlines and header cap as GuardedH11; None without httptools.

    httptools (llhttp, in C) parses a request in a fraction of h11's time. Its parser calls back at
    each step, which is where the deadlines are armed: the first byte of a request starts its
    headers' deadline, the end of the headers its body's, the whole request stops the clock.
    """
    try:
        from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
    except ImportError:  # httptools is not installed
        return None

    class GuardedHttpTools(_Deadlines, HttpToolsProtocol):
        _head_bytes = 0  # of the request line and headers so far (capped like h11's at MAX_HEADER_BYTES)

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            self._watch("headers")  # a connection that sends nothing is held no longer than a slow one

        def connection_lost(self, exc: Exception | None) -> None:
            self._cancel()
            super().connection_lost(exc)

        def on_message_begin(self) -> None:
            super().on_message_begin()
            self._head_bytes = 0
            self._watch("headers")

        def on_url(self, url: bytes) -> None:
            self._count(len(url))
            super().on_url(url)

        def on_header(self, name: bytes, value: bytes) -> None:
            self._count(len(name) + len(value) + 4)
            super().on_header(name, value)

        def on_headers_complete(self) -> None:
            super().on_headers_complete()
            self._watch("body")

        def on_message_complete(self) -> None:
            super().on_message_complete()
            self._cancel()  # the request is in: the app answers in its own time

        def _count(self, n: int) -> None:
            self._head_bytes += n
            if self._head_bytes > MAX_HEADER_BYTES:  # raised in a parser callback: answered 400 and closed
                raise ValueError("request line and headers too large")

    return GuardedHttpTools


GuardedHttpTools: Final = _httptools_protocol()
GuardedHttp: Final[type[asyncio.Protocol]] = GuardedHttpTools or GuardedH11  # what uvicorn_settings serves with


def uvicorn_settings(limits: HttpLimits) -> dict[str, Any]:
    """The `uvicorn.Config` keyword arguments that apply `limits`, on httptools when it is installed."""
    protocol = type(GuardedHttp.__name__, (GuardedHttp,), {"header_timeout": limits.header_timeout,
                                             "body_timeout": limits.body_timeout})
    return {
        "http": protocol,
        "timeout_keep_alive": limits.keep_alive_timeout,
        "limit_concurrency": limits.max_connections or None,
        "h11_max_incomplete_event_size": MAX_HEADER_BYTES,
    }


class WholeBody:
    """Hand a request to the app only once its body is in (or past `limit`, for the app to refuse).

    A request whose client goes away (or whose body deadline expires, `GuardedH11`) before the
    body is complete ends here quietly: the MCP app never starts on half a body, so it does not log
    a traceback per abandoned request.
    """

    def __init__(self, app: ASGIApp, *, limit: int = MAX_BODY_BYTES) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        messages = await read_body(receive, self.limit)
        if messages is None:
            return  # nothing to answer: the client is gone
        await self.app(scope, replaying(messages, receive), send)


async def read_body(receive: Receive, limit: int) -> list[Message] | None:
    """A request's messages until its body is complete or past `limit` bytes; None if the client left first."""
    messages: list[Message] = []
    size = 0
    while size <= limit:
        message = await receive()
        if message["type"] == "http.disconnect":
            return None
        messages.append(message)
        size += len(message.get("body", b""))
        if not message.get("more_body", False):
            break
    return messages


def replaying(messages: list[Message], receive: Receive) -> Receive:
    """A `receive` that gives the read messages again, then the connection's."""
    pending = list(messages)

    async def replay() -> Message:
        return pending.pop(0) if pending else await receive()

    return replay


# ============================================================================ Host


class HostGuard:
    """The DNS-rebinding Host check on every path but `/healthz`, before anything reads the Host.

    The SDK checks Host inside the MCP app; the auth layer answers before it gets there and names
    this server's URL in its 401 and in the metadata document. Checking here first means those
    URLs are built from an allowed Host only (or from `--resource-url`).
    """

    def __init__(self, app: ASGIApp, *, settings: TransportSecuritySettings, open_paths: frozenset[str]) -> None:
        self.app = app
        self.check = TransportSecurityMiddleware(settings)  # one Host rule: the SDK's
        self.enabled = settings.enable_dns_rebinding_protection
        self.open_paths = open_paths

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if not self.enabled or scope["type"] != "http" or scope.get("path") in self.open_paths:
            await self.app(scope, receive, send)
            return
        host = next((v.decode("latin-1") for k, v in scope.get("headers", []) if k == b"host"), None)
        if self.check._validate_host(host):
            await self.app(scope, receive, send)
            return
        await _json(send, 421, {"error": "invalid_host",
                                "error_description": "this server does not answer to that Host (--allowed-host)"})


# ============================================================================ sessions per caller


class SessionCap:
    """At most `limit` open stateful MCP sessions per caller; one more is answered 429.

    `live(session_id)` says whether the SDK still holds a session (it forgets one on DELETE, after
    the idle timeout, or when it fails); sessions it forgot free their slot.
    """

    def __init__(self, app: ASGIApp, *, path: str, limit: int, live: Callable[[str], bool]) -> None:
        self.app = app
        self.path = path
        self.limit = limit
        self.live = live
        self._open: dict[str, set[str]] = {}  # caller key -> session ids it opened
        self._opening: dict[str, int] = {}  # caller key -> requests that may open one right now

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if not self.limit or not _opens_session(scope, self.path):
            await self.app(scope, receive, send)
            return
        key = _caller_key(scope)
        if self._count(key) >= self.limit:
            log.warning("refused a new MCP session for %s: it has %d open (the cap per caller)", key, self.limit)
            await _json(send, 429, {"jsonrpc": "2.0", "id": None, "error": {
                "code": -32000,
                "message": f"too many open sessions: this caller has {self.limit}, the most this server allows one "
                f"caller; end one (HTTP DELETE with its Mcp-Session-Id) or let one idle for "
                f"{SESSION_IDLE_MINUTES} minutes, then retry",
                "data": {"reason": "too_many_sessions", "limit": self.limit}}})
            return
        self._opening[key] = self._opening.get(key, 0) + 1
        opened: list[str] = []

        async def watch(message: Message) -> None:
            if message["type"] == "http.response.start" and message.get("status", 500) < 400:
                sid = next((v.decode("latin-1") for k, v in message.get("headers", []) if k == b"mcp-session-id"), None)
                if sid:
                    opened.append(sid)
            await send(message)

        try:
            await self.app(scope, receive, watch)
        finally:
            self._opening[key] -= 1
            if not self._opening[key]:
                del self._opening[key]
            if opened:
                self._open.setdefault(key, set()).update(opened)
                if sum(map(len, self._open.values())) > 20_000:  # twice the SDK's table: forget the ended ones
                    for k in list(self._open):
                        self._count(k)

    def _count(self, key: str) -> int:
        """Open sessions (and openings under way) of one caller; ended sessions are forgotten."""
        ids = self._open.get(key)
        if ids is not None:
            ids.intersection_update({s for s in ids if self.live(s)})
            if not ids:
                del self._open[key]
        return len(ids or ()) + self._opening.get(key, 0)


def sdk_sessions(manager: Any) -> Callable[[str], bool]:
    """`live(session_id)` over the SDK session manager's table (it has no public one; a test pins this)."""
    table = getattr(manager, "_server_instances", None)
    if not isinstance(table, dict):
        raise RuntimeError("the MCP SDK's session manager has no session table: the per-caller session cap "
                           "needs updating for this SDK version")
    return table.__contains__


def _opens_session(scope: Scope, path: str) -> bool:
    """A POST to the MCP endpoint without a session id in a session-based protocol era."""
    if scope["type"] != "http" or scope.get("method") != "POST" or scope.get("path") != path:
        return False
    headers = dict(scope.get("headers", []))
    if b"mcp-session-id" in headers:
        return False
    version = headers.get(b"mcp-protocol-version")
    return version is None or version.decode("latin-1") in HANDSHAKE_PROTOCOL_VERSIONS


def _caller_key(scope: Scope) -> str:
    """The token's subject; without auth the client address (an IPv6 /64 is one address)."""
    user = scope.get("user")
    if isinstance(user, AuthenticatedUser):
        return "caller " + caller_of_token(user.access_token).id
    client = scope.get("client")
    host = str(client[0]) if client else "unknown"
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return "client " + host
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return f"client {address.ipv4_mapped}"
        return "client " + str(ipaddress.ip_network(f"{address}/64", strict=False))
    return f"client {address}"


async def _json(send: Send, status: int, body: Any) -> None:
    data = json.dumps(body).encode()
    await send({"type": "http.response.start", "status": status, "headers": [
        (b"content-type", b"application/json"), (b"content-length", str(len(data)).encode()),
        (b"cache-control", b"no-store")]})
    await send({"type": "http.response.body", "body": data})
