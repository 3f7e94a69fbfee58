"""The fast path of a well-formed 2026-07-28 `tools/call` POST: the SDK's answer without its generic machinery.

A 2026-07-28 `tools/call` is one self-contained POST. The SDK answers it through Starlette's
`Request`, the pydantic JSON-RPC envelope, the inbound ladder, a `Connection`, a `ServerSession`
and a context per request, its runner with the OpenTelemetry middleware, and a `model_dump` of the
answer (mcp/server/_streamable_http_modern.py, runner.py): about a third of the server's CPU per
call (docs/benchmarks.md, "Server CPU per tool call"). `ModernCalls` answers the plainly
well-formed ones itself: it applies the checks the SDK applies (content type, Host and Origin,
Accept, the routing headers against the body, the `Mcp-Param-*` rule, the body limit, the SDK's
own surface validation of the params), calls the handler the SDK would call with the params the
SDK would type, and shapes the result with the SDK's own `_serialize`, so the bytes on the wire
are the SDK's. Anything not plainly well-formed (another method, a notification, a batch, a
header missing, repeated or not matching, an `Mcp-Param-*` header, a tool whose schema declares
one, `_meta` keys beyond the envelope's three, `inputResponses`/`requestState`, a body over the
limit or not JSON) goes on to the SDK untouched, its body replayed, and is answered as before.

It serves only where what it skips has no effect: JSON answers (not `--sse`), no server middleware
but the SDK's OpenTelemetry one while no tracer provider is set (its span records nothing; with
`--tracing` or `--metrics` our telemetry middleware is there and every request takes the SDK's
path), no cache hint on tools/call, and the SDK release it was checked against
(`CHECKED_SDK`): tests/test_modern_path.py sends the same requests to a server with and without
it. Placed after the auth middleware (the caller is known, a step-up challenge already sent) and
before `SessionCap` (a 2026-07-28 request opens no session) and `WholeBody` (it reads the whole body).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from importlib import metadata
from typing import Any, Final

from mcp.server._otel import OpenTelemetryMiddleware
from mcp.server._streamable_http_modern import _write
from mcp.server.connection import Connection, _typed
from mcp.server.lowlevel import Server
from mcp.server.runner import ServerRunner, modern_error_data
from mcp.server.transport_security import TransportSecuritySettings
from mcp.shared.exceptions import MCPError
from mcp.shared.inbound import find_invalid_x_mcp_header, x_mcp_header_map
from mcp_types import (
    CLIENT_CAPABILITIES_META_KEY,
    CLIENT_INFO_META_KEY,
    PROTOCOL_VERSION_META_KEY,
    ClientCapabilities,
    ErrorData,
    JSONRPCError,
)
from mcp_types import methods as sdk_methods
from mcp_types.version import LATEST_MODERN_VERSION, MODERN_PROTOCOL_VERSIONS
from opentelemetry.trace import ProxyTracerProvider, get_tracer_provider
from pydantic import ValidationError
from starlette.requests import Request

from openapi2mcp.runtime.httpguard import ASGIApp, Receive, Scope, Send, read_body, replaying

CHECKED_SDK: Final = "2.3."  # the mcp releases whose modern HTTP entry this path was checked against
METHOD: Final = "tools/call"
_ENVELOPE: Final = frozenset({"jsonrpc", "id", "method", "params"})
_PARAMS: Final = frozenset({"name", "arguments", "_meta"})
_META: Final = frozenset({PROTOCOL_VERSION_META_KEY, CLIENT_INFO_META_KEY, CLIENT_CAPABILITIES_META_KEY})
_HEADERS: Final = frozenset({b"content-type", b"content-length", b"accept", b"host", b"origin",
                             b"mcp-protocol-version", b"mcp-method", b"mcp-name"})
_SENTINEL: Final = b"=?base64?"  # an Mcp-Name the SDK would decode first (mcp.shared.inbound)
_CACHE_CAP: Final = 256
_NO_CAPABILITIES: Final = ClientCapabilities()  # what `_typed` makes of {}


def sdk_checked() -> bool:
    """Whether the installed mcp SDK is a release this path was checked against."""
    try:
        return metadata.version("mcp").startswith(CHECKED_SDK)
    except metadata.PackageNotFoundError:
        return False


class ModernCalls:
    """Answer well-formed 2026-07-28 `tools/call` POSTs at `path` as the SDK would; pass everything else to `app`."""

    def __init__(self, app: ASGIApp, *, server: Server[Any], path: str, security: TransportSecuritySettings,
                 json_response: bool, enabled: bool = True) -> None:
        self.app = app
        self.server = server
        self.path = path
        self.origins = _Allowed(security.allowed_origins, empty_ok=True)
        self.hosts = _Allowed(security.allowed_hosts, empty_ok=False) if security.enable_dns_rebinding_protection \
            else None
        self.on = enabled and json_response and sdk_checked()
        self.limit = int(server.session_manager.max_request_body_size)  # past it the SDK answers 413
        self.served = 0  # the calls answered here (tests compare them with the SDK's answers)
        self._runner: ServerRunner[Any] | None = None  # its `_serialize` shapes results (built in the event loop)
        self._accepts: dict[bytes, bool] = {}  # Accept header -> has JSON (check_accept_headers)
        self._plain: dict[int, tuple[Any, bool]] = {}  # id(input schema) -> (schema, declares no Mcp-Param header)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if not (self.on and scope["type"] == "http" and scope["method"] == "POST" and scope["path"] == self.path
                and not scope.get("root_path") and self._inert()):
            await self.app(scope, receive, send)
            return
        head = _head(scope["headers"])
        version = self._version(head) if head is not None else None
        if head is None or version is None:
            await self.app(scope, receive, send)
            return
        messages = await read_body(receive, self.limit)
        if messages is None:
            return  # the client went away before its body was in: nothing to answer (httpguard.WholeBody)
        replay = replaying(messages, receive)
        body = b"".join(m.get("body", b"") for m in messages)
        call = self._call(body, version, head) if len(body) <= self.limit else None  # past it: the SDK's 413
        if call is None:
            await self.app(scope, replay, send)
            return
        await self._answer(scope, replay, send, version, *call)

    def _inert(self) -> bool:
        """The SDK serves (its session manager runs) and its runner's middleware would do nothing observable:
        only the SDK's own span, and nothing records it."""
        return (getattr(self.server.session_manager, "_task_group", None) is not None  # else the SDK raises: a 500
                and all(type(m) is OpenTelemetryMiddleware for m in self.server.middleware)
                and isinstance(get_tracer_provider(), ProxyTracerProvider)
                and METHOD not in self.server.cache_hints)

    def _version(self, head: dict[bytes, bytes]) -> str | None:
        """The protocol version of a request whose headers pass every check the SDK makes, else None."""
        content_type = head.get(b"content-type")
        if content_type is None or not content_type.decode("latin-1").lower().startswith("application/json"):
            return None
        if self.hosts is not None and not (self.hosts.allows(head.get(b"host"))
                                           and self.origins.allows(head.get(b"origin"))):
            return None
        if not self._accepts_json(head.get(b"accept", b"")):
            return None
        length = head.get(b"content-length")
        if length is not None and not (length.isdigit() and int(length) <= self.limit):
            return None
        name = head.get(b"mcp-name")
        if head.get(b"mcp-method") != METHOD.encode() or name is None or name.startswith(_SENTINEL):
            return None
        version = head.get(b"mcp-protocol-version", b"").decode("latin-1")
        return version if version in MODERN_PROTOCOL_VERSIONS else None

    def _accepts_json(self, accept: bytes) -> bool:
        """`has_json` of the SDK's check_accept_headers, remembered per header value."""
        known = self._accepts.get(accept)
        if known is None:
            types = [t.strip().split(";")[0].strip().lower() for t in accept.decode("latin-1").split(",")]
            known = "*/*" in types or any(t in ("application/json", "application/*") for t in types)
            if len(self._accepts) >= _CACHE_CAP:
                self._accepts.clear()
            self._accepts[accept] = known
        return known

    def _call(self, body: bytes, version: str, head: dict[bytes, bytes]) -> tuple[Any, Any, dict[str, Any]] | None:
        """(request id, typed params, _meta) of a plainly well-formed tools/call body, else None."""
        try:
            message = json.loads(body)
        except (ValueError, RecursionError):
            return None
        if type(message) is not dict or message.keys() != _ENVELOPE or message["jsonrpc"] != "2.0" \
                or message["method"] != METHOD or type(message["id"]) not in (int, str):
            return None
        params = message["params"]
        if type(params) is not dict or not params.keys() <= _PARAMS:
            return None
        name, arguments, meta = params.get("name"), params.get("arguments", {}), params.get("_meta")
        if type(name) is not str or head[b"mcp-name"].decode("latin-1") != name \
                or type(arguments) is not dict or type(meta) is not dict or not meta.keys() <= _META \
                or PROTOCOL_VERSION_META_KEY not in meta or CLIENT_CAPABILITIES_META_KEY not in meta \
                or meta[PROTOCOL_VERSION_META_KEY] != version:
            return None
        if arguments and not self._no_param_headers(name):
            return None
        entry = self.server.get_request_handler(METHOD)
        if entry is None:
            return None
        try:
            sdk_methods.validate_client_request(METHOD, version, params)  # the runner's surface check
            typed = entry.params_type.model_validate(params, by_name=False)  # what the runner hands the handler
        except ValidationError:
            return None
        return message["id"], typed, meta

    def _no_param_headers(self, name: str) -> bool:
        """The tool's input schema declares no `Mcp-Param-*` header, so the SDK would check none."""
        lookup = self.server.get_tool_input_schema
        if lookup is None:
            return False  # the SDK would list the tools to find the schema
        try:
            schema = lookup(name)
        except Exception:
            return False  # the SDK logs it and serves the call
        if schema is None:
            return True
        known = self._plain.get(id(schema))
        if known is None or known[0] is not schema:
            plain = find_invalid_x_mcp_header(schema) is not None or not x_mcp_header_map(schema)
            if len(self._plain) >= _CACHE_CAP:
                self._plain.clear()
            known = self._plain[id(schema)] = (schema, plain)
        return known[1]

    async def _answer(self, scope: Scope, receive: Receive, send: Send, version: str, request_id: Any,
                      params: Any, meta: dict[str, Any]) -> None:
        """Run the registered handler as the runner does and send its answer as `_write` does."""
        entry = self.server.get_request_handler(METHOD)
        assert entry is not None  # checked in _call
        if self._runner is None:
            self._runner = ServerRunner(self.server, Connection.from_envelope(LATEST_MODERN_VERSION, None, None), None)
        ctx = CallContext(Request(scope, receive), EnvelopeSession(meta), version, request_id)
        handler: Any = entry.handler  # server.py's on_call_tool: it reads only what a CallContext has
        self.served += 1
        try:
            result = await handler(ctx, params)
            if isinstance(result, ErrorData):
                raise MCPError.from_error_data(result)
            wire = self._runner._serialize(METHOD, version, result)
        except Exception as exc:
            await _write(JSONRPCError(jsonrpc="2.0", id=request_id, error=modern_error_data(exc)), scope, receive, send)
            return
        data = json.dumps({"jsonrpc": "2.0", "id": request_id, "result": wire}, separators=(",", ":")).encode()
        await send({"type": "http.response.start", "status": 200, "headers": [
            (b"content-length", str(len(data)).encode("latin-1")), (b"content-type", b"application/json")]})
        await send({"type": "http.response.body", "body": data})


class CallContext:
    """What server.py's tools/call handler reads of the SDK's `ServerRequestContext`, for one fast-path call."""

    __slots__ = ("protocol_version", "request", "request_id", "session")

    def __init__(self, request: Request, session: EnvelopeSession, protocol_version: str, request_id: Any) -> None:
        self.request = request  # the caller (scope["user"]), forwarded headers, the caller's token (access.py)
        self.session = session  # check_client_capability (policy.Asker)
        self.protocol_version = protocol_version
        self.request_id = request_id


class EnvelopeSession:
    """`check_client_capability` as the SDK's `ServerSession` answers it for the request's envelope."""

    __slots__ = ("client_capabilities",)

    def __init__(self, meta: Mapping[str, Any]) -> None:
        raw = meta.get(CLIENT_CAPABILITIES_META_KEY)
        # Connection.from_envelope's `_typed`: a mis-shaped value counts as none (the surface check refused it anyway)
        self.client_capabilities = _NO_CAPABILITIES if raw == {} else _typed(ClientCapabilities, raw)

    def check_client_capability(self, capability: ClientCapabilities) -> bool:
        # the SDK's own rule, which reads only `client_capabilities` (a whole Connection costs 4% of a call)
        return Connection.check_capability(self, capability)  # type: ignore[arg-type]


class _Allowed:
    """The SDK's Host or Origin rule (TransportSecurityMiddleware) without its warning: the SDK logs a refusal."""

    def __init__(self, allowed: list[str], *, empty_ok: bool) -> None:
        self.exact = frozenset(allowed)
        self.prefixes = tuple(a[:-2] + ":" for a in allowed if a.endswith(":*"))
        self.empty_ok = empty_ok  # an absent Origin is a same-origin request; an absent Host is refused

    def allows(self, raw: bytes | None) -> bool:
        if not raw:
            return self.empty_ok
        value = raw.decode("latin-1")
        return value in self.exact or value.startswith(self.prefixes)


def _head(raw: list[tuple[bytes, bytes]]) -> dict[bytes, bytes] | None:
    """The headers the checks read; None when one is repeated or an `Mcp-Param-*` header is present."""
    head: dict[bytes, bytes] = {}
    for name, value in raw:
        if name in _HEADERS:
            if name in head:
                return None  # the SDK reads the first copy or refuses a repeated routing header: it answers
            head[name] = value
        elif name.startswith(b"mcp-param-"):
            return None
    return head
