"""Machinery shared by the example upstream REST APIs.

Every example is a small Starlette app whose routes come from its own hand-written OpenAPI
description: a handler is registered per ``operationId`` and the method and path are read from the
spec, so the two cannot drift apart. Around every handler the machinery

* records the request exactly as it arrived (raw path, raw query string, headers, body),
* injects faults that a test asked for (``POST /__admin/faults``),
* enforces an optional upstream credential (bearer, basic, API key in a header, query or cookie),
* validates the request against the spec with openapi-core and answers 400 when the spec would
  reject it, recording a *violation* (this is what proves that openapi2mcp serialises parameters
  and bodies exactly as the spec says), and
* validates the handler's response against the spec, recording a response violation when the
  example itself does not keep its own contract.

Routing is done on the raw (still percent-encoded) path, one segment per path template variable,
so ``/pets/a%2Fb`` reaches ``getPet`` with ``petId == "a/b"`` while ``/pets/a/b`` matches nothing.

Admin endpoints (not part of any spec, never recorded):

* ``GET  /__admin/state``  -> requests, counters per operationId, violations, faults, auth, domain
* ``POST /__admin/reset``  -> fresh seed data, empty logs, no faults (the auth requirement stays)
* ``POST /__admin/faults`` -> inject a fault (see :class:`Fault`); ``DELETE`` clears them
* ``POST /__admin/auth``   -> set or clear (``null``) the credential the API requires
* ``GET  /openapi.yaml`` and ``GET /openapi.json`` -> the spec with ``servers`` set to this server

:class:`Upstream` starts an example on a free port (in a background thread, or as a subprocess)
and wraps the admin endpoints for tests.
"""

from __future__ import annotations

import asyncio
import base64
import copy
import dataclasses
import functools
import hashlib
import importlib
import json
import logging
import os
import re
import socket
import subprocess
import sys
import threading
import time
import traceback
from collections import Counter, deque
from collections.abc import Awaitable, Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, Generic, Literal, Protocol, TypeVar, cast
from urllib.parse import unquote

import httpx2
import uvicorn
import yaml
from openapi_core import Config, OpenAPI
from openapi_core.datatypes import RequestParameters
from openapi_core.deserializing.media_types.util import json_loads
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

__all__ = [
    "EXAMPLES",
    "Api",
    "ApiError",
    "AuthRequirement",
    "Call",
    "DomainState",
    "Fault",
    "Upstream",
    "UpstreamViolationError",
    "create_example_app",
    "error_body",
    "json_response",
    "load_spec",
]

EXAMPLES: tuple[str, ...] = ("notes", "market", "mailfiles", "petstore")

_PACKAGE = __name__.rpartition(".")[0]
_HTTP_METHODS = ("get", "put", "post", "delete", "options", "head", "patch", "trace")
_MAX_RECORDED_REQUESTS = 500
_MAX_RECORDED_BODY = 4096
_ADMIN_PREFIX = "/__admin/"
_SPEC_ROUTES = ("/openapi.yaml", "/openapi.json")

# Stable error codes by HTTP status, used for machinery-generated and injected error bodies.
_CODE_BY_STATUS = {
    400: "BAD_REQUEST",
    401: "UNAUTHORIZED",
    403: "FORBIDDEN",
    404: "NOT_FOUND",
    405: "METHOD_NOT_ALLOWED",
    409: "CONFLICT",
    413: "PAYLOAD_TOO_LARGE",
    422: "UNPROCESSABLE",
    429: "RATE_LIMITED",
    500: "INTERNAL",
    502: "BAD_GATEWAY",
    503: "UNAVAILABLE",
    504: "GATEWAY_TIMEOUT",
}

_log = logging.getLogger(__name__)


# --------------------------------------------------------------------------------------------
# Spec loading


@functools.lru_cache(maxsize=16)
def _load_spec_cached(path: str) -> dict[str, Any]:
    with open(path, encoding="utf-8") as fh:
        data = yaml.load(fh, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    if not isinstance(data, dict):
        raise ValueError(f"{path}: not an OpenAPI document")
    return cast(dict[str, Any], data)


def load_spec(path: str | Path) -> dict[str, Any]:
    """The parsed spec (a deep copy: callers may modify it)."""
    return copy.deepcopy(_load_spec_cached(str(path)))


@functools.lru_cache(maxsize=16)
def _openapi_for(path: str) -> OpenAPI:
    """openapi-core over the spec, with servers relaxed to "/" so any host and port validate.

    Spec validation is skipped here for start-up speed; the test-suite validates every spec once.
    """
    spec = load_spec(path)
    spec["servers"] = [{"url": "/"}]
    _strip_deprecated(spec)
    config = Config(
        spec_validator_cls=None,  # type: ignore[arg-type]  # documented: None skips spec validation
        extra_media_type_deserializers={"application/merge-patch+json": json_loads},
    )
    return OpenAPI.from_dict(spec, config=config)


def _strip_deprecated(node: Any) -> None:
    """Drop ``deprecated`` flags: openapi-core warns on every use, but using them is allowed."""
    if isinstance(node, dict):
        if isinstance(node.get("deprecated"), bool):
            del node["deprecated"]
        for value in node.values():
            _strip_deprecated(value)
    elif isinstance(node, list):
        for value in node:
            _strip_deprecated(value)


# --------------------------------------------------------------------------------------------
# Routing from the spec


@dataclasses.dataclass(frozen=True)
class _Route:
    operation_id: str
    method: str  # upper case
    pattern: str  # "/pets/{petId}"
    segments: tuple[tuple[bool, str], ...]  # (is_variable, literal or variable name)
    secured: bool  # False when the operation opts out with `security: []`
    query_names: frozenset[str]

    @property
    def variables(self) -> int:
        return sum(1 for is_var, _ in self.segments if is_var)

    def match(self, raw_segments: list[str]) -> dict[str, str] | None:
        if len(raw_segments) != len(self.segments):
            return None
        params: dict[str, str] = {}
        for (is_var, text), raw in zip(self.segments, raw_segments, strict=True):
            value = unquote(raw, errors="strict") if "%" in raw else raw
            if is_var:
                if not value:
                    return None
                params[text] = value
            elif value != text:
                return None
        return params


_TEMPLATE_SEGMENT = re.compile(r"^\{([^{}]+)\}$")


def _build_routes(spec: Mapping[str, Any]) -> list[_Route]:
    routes: list[_Route] = []
    root_security = spec.get("security", [])
    api_key_query_names = {
        scheme["name"]
        for scheme in spec.get("components", {}).get("securitySchemes", {}).values()
        if scheme.get("type") == "apiKey" and scheme.get("in") == "query"
    }
    for pattern, item in spec.get("paths", {}).items():
        common = item.get("parameters", [])
        for method in _HTTP_METHODS:
            op = item.get(method)
            if op is None:
                continue
            op_id = op.get("operationId")
            if not op_id:
                raise ValueError(f"{method.upper()} {pattern}: every example operation needs an operationId")
            segments: list[tuple[bool, str]] = []
            for seg in pattern.split("/")[1:]:
                m = _TEMPLATE_SEGMENT.match(seg)
                segments.append((True, m.group(1)) if m else (False, seg))
            params = [_deref(spec, p) for p in [*common, *op.get("parameters", [])]]
            query_names = {p["name"] for p in params if p.get("in") == "query"} | api_key_query_names
            security = op.get("security", root_security)
            routes.append(
                _Route(
                    operation_id=op_id,
                    method=method.upper(),
                    pattern=pattern,
                    segments=tuple(segments),
                    secured=bool(security),
                    query_names=frozenset(query_names),
                )
            )
    # Literal segments win over variables ("/pets/search-form" before "/pets/{petId}").
    routes.sort(key=lambda r: (r.variables, r.pattern))
    return routes


def _deref(spec: Mapping[str, Any], node: Any) -> Any:
    """Follow local ``$ref``s (``#/a/b``) until a node without one."""
    seen: set[str] = set()
    while isinstance(node, Mapping) and isinstance(node.get("$ref"), str):
        ref = node["$ref"]
        if not ref.startswith("#/") or ref in seen:
            raise ValueError(f"unsupported or circular $ref {ref!r}")
        seen.add(ref)
        node = spec
        for part in ref[2:].split("/"):
            node = node[part.replace("~1", "/").replace("~0", "~")]
    return node


def _split_raw_path(raw_path: str) -> list[str]:
    return raw_path.split("/")[1:] if raw_path.startswith("/") else [raw_path]


# --------------------------------------------------------------------------------------------
# openapi-core adapters


class _OpenAPIRequest:
    """openapi-core's request protocol over a Starlette request, routed by us (path_pattern)."""

    def __init__(self, request: Request, body: bytes, route: _Route, path_params: dict[str, str]) -> None:
        self.parameters = RequestParameters(
            query=request.query_params,
            header=request.headers,
            cookie=request.cookies,
            path=path_params,
        )
        self.host_url = str(request.base_url)
        self.path = route.pattern
        self.path_pattern = route.pattern
        self.method = route.method.lower()
        self.body: bytes | None = body
        self.content_type = request.headers.get("content-type") or "application/octet-stream"


class _OpenAPIResponse:
    def __init__(self, response: Response) -> None:
        self.status_code = response.status_code
        self.headers = response.headers
        self.content_type = response.headers.get("content-type") or ""
        body = response.body
        self.data: bytes = body if isinstance(body, bytes) else bytes(body)


def _describe_error(err: BaseException) -> str:
    """One readable line for an openapi-core error: its headline plus the schema errors behind it."""
    chain: list[BaseException] = []
    current: BaseException | None = err
    while current is not None and len(chain) < 6:
        chain.append(current)
        current = current.__cause__
    for link in chain:
        schema_errors = getattr(link, "schema_errors", None)
        if schema_errors:
            details = []
            for schema_error in schema_errors:
                location = "/".join(str(p) for p in getattr(schema_error, "absolute_path", ()))
                message = getattr(schema_error, "message", str(schema_error))
                details.append(f"{location}: {message}" if location else message)
            headline = str(chain[0])
            cut = headline.find(": Value ")  # openapi-core repeats the whole value in the headline
            headline = headline[:cut] if cut > 0 else headline
            return f"{headline}: {'; '.join(details)}"
    texts: list[str] = []
    for link in chain:
        text = str(link) or type(link).__name__
        if text not in texts:
            texts.append(text)
    return ": ".join(texts)


def _field_of(err: BaseException) -> str | None:
    name = getattr(err, "name", None)
    if isinstance(name, str):
        return name
    for schema_error in getattr(err.__cause__, "schema_errors", ()) or ():
        path = list(getattr(schema_error, "absolute_path", ()))
        if path:
            return ".".join(str(p) for p in path)
    return None


# --------------------------------------------------------------------------------------------
# Responses and errors for handlers


def json_response(data: Any, status: int = 200, headers: Mapping[str, str] | None = None) -> Response:
    """Compact UTF-8 JSON (non-ASCII kept as is)."""
    body = json.dumps(data, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    return Response(body, status_code=status, headers=dict(headers or {}), media_type="application/json")


def error_body(code: str, message: str, field: str | None = None) -> dict[str, Any]:
    error: dict[str, Any] = {"code": code, "message": message}
    if field:
        error["field"] = field
    return {"error": error}


class ApiError(Exception):
    """Raised by a handler to answer with the JSON error shape ``{error: {code, message}}``."""

    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        *,
        field: str | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.field = field
        self.headers = dict(headers or {})

    def response(self) -> Response:
        return json_response(error_body(self.code, self.message, self.field), self.status, self.headers)


# --------------------------------------------------------------------------------------------
# Auth requirement

AuthKind = Literal["bearer", "basic", "header", "query", "cookie"]


@dataclasses.dataclass(frozen=True)
class AuthRequirement:
    """The credential an example insists on (401 otherwise). Operations with `security: []` are exempt.

    Text form (CLI ``--auth`` and :meth:`parse`): ``bearer:TOKEN``, ``basic:USER:PASSWORD``,
    ``header:X-API-Key:VALUE``, ``query:api_key:VALUE``, ``cookie:NAME:VALUE``.
    """

    kind: AuthKind
    secret: str
    name: str = ""  # header / query / cookie name; the user name for basic

    @classmethod
    def bearer(cls, token: str) -> AuthRequirement:
        return cls("bearer", token)

    @classmethod
    def basic(cls, username: str, password: str) -> AuthRequirement:
        return cls("basic", password, username)

    @classmethod
    def api_key_header(cls, value: str, name: str = "X-API-Key") -> AuthRequirement:
        return cls("header", value, name)

    @classmethod
    def api_key_query(cls, value: str, name: str = "api_key") -> AuthRequirement:
        return cls("query", value, name)

    @classmethod
    def api_key_cookie(cls, value: str, name: str = "api_key") -> AuthRequirement:
        return cls("cookie", value, name)

    @classmethod
    def parse(cls, text: str) -> AuthRequirement:
        kind, _, rest = text.partition(":")
        if kind == "bearer" and rest:
            return cls.bearer(rest)
        if kind in ("basic", "header", "query", "cookie"):
            name, sep, secret = rest.partition(":")
            if sep and name:
                return cls(cast(AuthKind, kind), secret, name)
        raise ValueError(
            f"bad auth {text!r}: expected bearer:TOKEN, basic:USER:PASSWORD, header:NAME:VALUE, "
            "query:NAME:VALUE or cookie:NAME:VALUE"
        )

    @classmethod
    def coerce(cls, value: AuthRequirement | str | Mapping[str, Any] | None) -> AuthRequirement | None:
        if value is None or isinstance(value, AuthRequirement):
            return value
        if isinstance(value, str):
            return cls.parse(value)
        kind = value.get("kind")
        if kind not in ("bearer", "basic", "header", "query", "cookie"):
            raise ValueError(f"bad auth kind {kind!r}")
        return cls(cast(AuthKind, kind), str(value.get("secret", "")), str(value.get("name", "")))

    def to_dict(self) -> dict[str, str]:
        return {"kind": self.kind, "name": self.name, "secret": self.secret}

    def presented(self, request: Request) -> str | None:
        """The credential as it arrived in the place this requirement looks, or None."""
        if self.kind in ("bearer", "basic"):
            return request.headers.get("authorization")
        if self.kind == "header":
            return request.headers.get(self.name)
        if self.kind == "query":
            return request.query_params.get(self.name)
        return request.cookies.get(self.name)

    def accepts(self, presented: str | None) -> bool:
        if presented is None:
            return False
        if self.kind == "bearer":
            scheme, _, token = presented.partition(" ")
            return scheme.lower() == "bearer" and token.strip() == self.secret
        if self.kind == "basic":
            scheme, _, encoded = presented.partition(" ")
            if scheme.lower() != "basic":
                return False
            try:
                decoded = base64.b64decode(encoded.strip(), validate=True).decode("utf-8")
            except ValueError:
                return False
            return decoded == f"{self.name}:{self.secret}"
        return presented == self.secret

    def challenge(self) -> dict[str, str]:
        if self.kind == "bearer":
            return {"WWW-Authenticate": 'Bearer realm="openapi2mcp-examples"'}
        if self.kind == "basic":
            return {"WWW-Authenticate": 'Basic realm="openapi2mcp-examples"'}
        return {}


# --------------------------------------------------------------------------------------------
# Faults

FaultKind = Literal["status", "delay", "close", "truncate", "lie", "huge", "binary", "redirect"]
_FAULT_KINDS = ("status", "delay", "close", "truncate", "lie", "huge", "binary", "redirect")


@dataclasses.dataclass
class Fault:
    """A misbehaviour injected for matching requests, ``times`` times (None = until cleared).

    Matching (all given criteria must hold): ``operation`` (operationId), ``path_prefix`` (raw or
    decoded path), ``method``, ``query_contains`` (substring of the raw query). ``skip`` lets that
    many matching requests through first. ``delay`` (seconds) is applied before any kind.
    ``after``: the request is handled first (its effects happen, counters move), then its answer is
    replaced by the fault: a lost response, e.g. ``kind="close", after=True`` on a create.

    Kinds: ``status`` (answer ``status``, default 503, with ``body``: dict/list -> JSON, str -> text,
    None -> the JSON error shape; 429/503 get ``Retry-After: 1`` unless ``headers`` say otherwise),
    ``delay`` (wait, then answer normally), ``close`` (drop the connection without a response),
    ``truncate`` (send headers and part of the body, then drop), ``lie`` (a 200 whose JSON body does
    not match the response schema), ``huge`` (a ``size``-byte JSON body, default 5 MB; ``stream``
    sends it chunked without Content-Length), ``binary`` (``size`` bytes of
    ``application/octet-stream``), ``redirect`` (``status`` 302 to ``location``, by default another
    origin: http://127.0.0.1:9/evil).
    """

    kind: FaultKind = "status"
    operation: str | None = None
    path_prefix: str | None = None
    method: str | None = None
    query_contains: str | None = None
    status: int | None = None
    body: Any = None
    headers: dict[str, str] = dataclasses.field(default_factory=dict)
    content_type: str | None = None
    delay: float = 0.0
    times: int | None = 1
    skip: int = 0
    size: int | None = None
    stream: bool = False
    location: str = "http://127.0.0.1:9/evil"
    after: bool = False
    id: int = 0
    fired: int = 0

    @classmethod
    def from_json(cls, data: Mapping[str, Any], fault_id: int) -> Fault:
        known = {f.name for f in dataclasses.fields(cls)} - {"id", "fired"}
        unknown = set(data) - known
        if unknown:
            raise ValueError(f"unknown fault keys {sorted(unknown)}; known: {sorted(known)}")
        values = dict(data)
        if "kind" not in values:
            values["kind"] = "delay" if values.get("delay") and values.get("status") is None else "status"
        if values["kind"] not in _FAULT_KINDS:
            raise ValueError(f"unknown fault kind {values['kind']!r}; known: {list(_FAULT_KINDS)}")
        if values.get("times", 1) is not None and int(values.get("times", 1)) < 0:
            values["times"] = None
        if values.get("method"):
            values["method"] = str(values["method"]).upper()
        values["headers"] = {str(k): str(v) for k, v in (values.get("headers") or {}).items()}
        return cls(**values, id=fault_id)

    @property
    def exhausted(self) -> bool:
        return self.times is not None and self.fired >= self.times

    def matches(self, method: str, raw_path: str, path: str, operation: str | None, query: str) -> bool:
        if self.operation is not None and self.operation != operation:
            return False
        if self.method is not None and self.method != method:
            return False
        if self.path_prefix is not None and not (
            raw_path.startswith(self.path_prefix) or path.startswith(self.path_prefix)
        ):
            return False
        return self.query_contains is None or self.query_contains in query

    def to_json(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["remaining"] = None if self.times is None else max(self.times - self.fired, 0)
        return data


class _DeliberateDisconnectError(Exception):
    """Raised to make the ASGI server drop a connection when the transport is not reachable."""


class _DropConnection(Response):
    """Drop the TCP connection, optionally after the headers and part of a body (``truncate``)."""

    def __init__(self, partial: bytes | None = None) -> None:
        super().__init__(b"")
        self.partial = partial

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        raw_send = scope.get("upstream.raw_send")
        transport = getattr(getattr(raw_send, "__self__", None), "transport", None)
        if self.partial is not None:
            await send(
                {
                    "type": "http.response.start",
                    "status": 200,
                    "headers": [
                        (b"content-type", b"application/json"),
                        (b"content-length", str(len(self.partial) * 4).encode()),
                    ],
                }
            )
            await send({"type": "http.response.body", "body": self.partial, "more_body": True})
        if transport is None:
            raise _DeliberateDisconnectError("fault: drop connection")
        transport.close()
        # Let the server notice the lost connection so it does not answer on its own.
        for _ in range(20):
            await asyncio.sleep(0.005)
            if getattr(raw_send.__self__, "disconnected", True):  # type: ignore[union-attr]
                break


class _QuietDisconnects(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        return not isinstance(exc, _DeliberateDisconnectError)


logging.getLogger("uvicorn.error").addFilter(_QuietDisconnects())


def _fault_response(fault: Fault) -> Response:
    kind = fault.kind
    headers = dict(fault.headers)
    if kind == "status":
        status = fault.status or 503
        if status in (429, 503) and not any(k.lower() == "retry-after" for k in headers):
            headers["Retry-After"] = "1"
        headers = {k: v for k, v in headers.items() if v != ""}
        if fault.body is None:
            body = error_body(_CODE_BY_STATUS.get(status, "ERROR"), f"injected fault: HTTP {status}")
            return json_response(body, status, headers)
        if isinstance(fault.body, str):
            return Response(
                fault.body, status_code=status, headers=headers, media_type=fault.content_type or "text/plain"
            )
        resp = json_response(fault.body, status, headers)
        if fault.content_type:
            resp.headers["content-type"] = fault.content_type
        return resp
    if kind == "close":
        return _DropConnection()
    if kind == "truncate":
        return _DropConnection(partial=b'{"items":[{"id":"1","name":"Rex"},')
    if kind == "lie":
        body = fault.body
        if body is None:
            body = {"unexpected": "this body does not match the response schema", "items": "not-a-list"}
        return json_response(body, fault.status or 200, headers)
    if kind == "huge":
        size = fault.size or 5_000_000
        chunk = b'"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",'  # 65 bytes
        count = max(size // len(chunk), 1)
        head, tail = b'{"items":[', b'"end"]}'
        if fault.stream:

            async def chunks() -> Any:
                yield head
                for _ in range(0, count, 1000):
                    yield chunk * 1000
                yield tail

            return StreamingResponse(
                chunks(), status_code=fault.status or 200, headers=headers, media_type="application/json"
            )
        return Response(
            head + chunk * count + tail,
            status_code=fault.status or 200,
            headers=headers,
            media_type="application/json",
        )
    if kind == "binary":
        size = fault.size or 2048
        seed = hashlib.sha256(b"openapi2mcp-binary-fault").digest()
        data = b"\x89\xff\xfe\x00" + (seed * (size // len(seed) + 1))
        return Response(
            data[:size],
            status_code=fault.status or 200,
            headers=headers,
            media_type=fault.content_type or "application/octet-stream",
        )
    if kind == "redirect":
        headers["Location"] = fault.location
        return Response(b"", status_code=fault.status or 302, headers=headers)
    raise AssertionError(kind)  # "delay" never gets here


# --------------------------------------------------------------------------------------------
# The per-app runtime: state, admin endpoints, dispatch


class DomainState(Protocol):
    """The in-memory data of one example. ``summary()`` is shown as ``domain`` in the admin state."""

    def summary(self) -> dict[str, Any]: ...


S = TypeVar("S", bound=DomainState)


@dataclasses.dataclass
class Call(Generic[S]):
    """What a handler gets: the request and its parameters as openapi-core unmarshalled them."""

    request: Request
    state: S
    operation_id: str
    path: dict[str, Any]
    query: dict[str, Any]
    headers: dict[str, Any]
    cookies: dict[str, Any]
    body: Any
    raw_body: bytes

    @property
    def base_url(self) -> str:
        """``http://host:port`` of this server (no trailing slash)."""
        return str(self.request.base_url).rstrip("/")


Handler = Callable[[Call[Any]], Awaitable[Response]]


class Api(Generic[S]):
    """The handlers of one example, keyed by operationId. ``create_app`` gives a fresh server."""

    def __init__(self, name: str, spec_path: Path, state_factory: Callable[[], S]) -> None:
        self.name = name
        self.spec_path = spec_path
        self.state_factory = state_factory
        self.handlers: dict[str, Handler] = {}

    def operation(self, operation_id: str) -> Callable[[Callable[[Call[S]], Awaitable[Response]]], Handler]:
        def register(func: Callable[[Call[S]], Awaitable[Response]]) -> Handler:
            if operation_id in self.handlers:
                raise ValueError(f"{self.name}: two handlers for {operation_id}")
            self.handlers[operation_id] = cast(Handler, func)
            return cast(Handler, func)

        return register

    def create_app(self, *, auth: AuthRequirement | str | None = None, validate_responses: bool = True) -> Starlette:
        """A fresh server (fresh seed data). ``validate_responses=False`` saves ~1-10 ms per call."""
        return _Runtime(self, AuthRequirement.coerce(auth), validate_responses).app


class _UpstreamStarlette(Starlette):
    """Starlette that keeps the server's own ``send`` in the scope (needed to drop connections)."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        scope["upstream.raw_send"] = send
        await super().__call__(scope, receive, send)


class _Runtime:
    def __init__(self, api: Api[Any], auth: AuthRequirement | None, validate_responses: bool) -> None:
        self.api = api
        self.auth = auth
        self.validate_responses = validate_responses
        self.spec = load_spec(api.spec_path)
        self.openapi = _openapi_for(str(api.spec_path))
        self.routes = _build_routes(self.spec)
        known = {r.operation_id for r in self.routes}
        missing = known - set(api.handlers)
        extra = set(api.handlers) - known
        if missing or extra:
            raise ValueError(f"{api.name}: operations without handler {sorted(missing)}, unknown {sorted(extra)}")
        self._reset()
        self.app = _UpstreamStarlette(
            routes=[
                Route("/__admin/state", self.admin_state, methods=["GET"]),
                Route("/__admin/reset", self.admin_reset, methods=["POST"]),
                Route("/__admin/faults", self.admin_faults, methods=["GET", "POST", "DELETE"]),
                Route("/__admin/auth", self.admin_auth, methods=["GET", "POST"]),
                Route("/openapi.yaml", self.serve_spec, methods=["GET"]),
                Route("/openapi.json", self.serve_spec, methods=["GET"]),
                Route("/{rest:path}", self.dispatch, methods=[m.upper() for m in _HTTP_METHODS]),
            ]
        )
        self.app.state.upstream = self

    def _reset(self) -> None:
        self.domain: DomainState = self.api.state_factory()
        self.requests: deque[dict[str, Any]] = deque(maxlen=_MAX_RECORDED_REQUESTS)
        self.counters: Counter[str] = Counter()
        self.violations: list[dict[str, Any]] = []
        self.faults: list[Fault] = []
        self.fault_seq = 0
        self.request_seq = 0
        self.auth_accepted = 0
        self.auth_rejected = 0

    # ---- admin

    async def admin_state(self, request: Request) -> Response:
        return json_response(
            {
                "name": self.api.name,
                "requests": list(self.requests),
                "counters": dict(self.counters),
                "violations": self.violations,
                "faults": [f.to_json() for f in self.faults],
                "auth": {
                    "required": self.auth.to_dict() if self.auth else None,
                    "accepted": self.auth_accepted,
                    "rejected": self.auth_rejected,
                },
                "domain": self.domain.summary(),
            }
        )

    async def admin_reset(self, request: Request) -> Response:
        self._reset()
        return json_response({"ok": True})

    async def admin_faults(self, request: Request) -> Response:
        if request.method == "DELETE":
            self.faults.clear()
        elif request.method == "POST":
            try:
                data = json.loads(await request.body() or b"{}")
                if not isinstance(data, dict):
                    raise ValueError("a fault is a JSON object")
                self.fault_seq += 1
                fault = Fault.from_json(data, self.fault_seq)
            except (ValueError, TypeError) as exc:
                return json_response(error_body("BAD_FAULT", str(exc)), 400)
            self.faults.append(fault)
            return json_response(fault.to_json(), 201)
        return json_response([f.to_json() for f in self.faults])

    async def admin_auth(self, request: Request) -> Response:
        if request.method == "POST":
            try:
                data = json.loads(await request.body() or b"null")
                self.auth = AuthRequirement.coerce(data)
            except (ValueError, TypeError, AttributeError) as exc:
                return json_response(error_body("BAD_AUTH", str(exc)), 400)
        return json_response({"required": self.auth.to_dict() if self.auth else None})

    async def serve_spec(self, request: Request) -> Response:
        spec = load_spec(self.api.spec_path)
        spec["servers"] = [
            {"url": str(request.base_url).rstrip("/"), "description": f"this running '{self.api.name}' example"}
        ]
        if request.url.path.endswith(".json"):
            return json_response(spec)
        text = yaml.safe_dump(spec, sort_keys=False, allow_unicode=True)
        return Response(text, media_type="application/yaml")

    # ---- dispatch

    def _violation(self, kind: str, record: dict[str, Any], error: str) -> None:
        record["violation"] = True
        self.violations.append(
            {
                "kind": kind,
                "seq": record["seq"],
                "method": record["method"],
                "path": record["path"],
                "query": record["query"],
                "operation": record["operation"],
                "error": error,
            }
        )

    def _find_route(self, method: str, raw_path: str) -> tuple[_Route | None, dict[str, str], bool]:
        """(route, path params, path_matched_some_route)."""
        segments = _split_raw_path(raw_path)
        path_matched = False
        for route in self.routes:
            try:
                params = route.match(segments)
            except UnicodeDecodeError:
                params = None
            if params is None:
                continue
            path_matched = True
            if route.method == method:
                return route, params, True
        return None, {}, path_matched

    def _next_fault(self, method: str, raw_path: str, path: str, op: str | None, query: str) -> Fault | None:
        for fault in self.faults:
            if fault.exhausted or not fault.matches(method, raw_path, path, op, query):
                continue
            if fault.skip > 0:
                fault.skip -= 1
                continue
            fault.fired += 1
            return fault
        return None

    async def dispatch(self, request: Request) -> Response:
        scope = request.scope
        method = request.method
        raw_path = scope.get("raw_path", scope["path"].encode()).decode("latin-1")
        query = scope.get("query_string", b"").decode("latin-1")
        body = await request.body()
        route, path_params, path_matched = self._find_route(method, raw_path)
        self.request_seq += 1
        record: dict[str, Any] = {
            "seq": self.request_seq,
            "time": time.time(),
            "method": method,
            "path": raw_path,
            "decoded_path": scope["path"],
            "query": query,
            "headers": _headers_dict(request),
            "body": body[:_MAX_RECORDED_BODY].decode("utf-8", errors="replace"),
            "body_size": len(body),
            "operation": route.operation_id if route else None,
            "path_params": path_params,
            "status": None,
            "fault": None,
            "auth": None,
            "violation": False,
        }
        self.requests.append(record)
        if route is not None:
            self.counters[route.operation_id] += 1
        response = await self._handle(request, record, route, path_params, path_matched, body)
        record["status"] = None if isinstance(response, _DropConnection) else response.status_code
        return response

    async def _handle(
        self,
        request: Request,
        record: dict[str, Any],
        route: _Route | None,
        path_params: dict[str, str],
        path_matched: bool,
        body: bytes,
    ) -> Response:
        op = route.operation_id if route else None
        fault = self._next_fault(record["method"], record["path"], record["decoded_path"], op, record["query"])
        if fault is not None:
            record["fault"] = fault.kind
            if fault.delay:
                await asyncio.sleep(fault.delay)
            if fault.kind != "delay" and not fault.after:
                return _fault_response(fault)

        if route is None:
            status = 405 if path_matched else 404
            what = "method not allowed for" if path_matched else "no operation matches"
            message = f"{what} {record['method']} {record['path']}"
            self._violation("route", record, message)
            return json_response(error_body(_CODE_BY_STATUS[status], message), status)

        if self.auth is not None and route.secured:
            presented = self.auth.presented(request)
            ok = self.auth.accepts(presented)
            record["auth"] = {"required": self.auth.kind, "presented": presented, "ok": ok}
            if not ok:
                self.auth_rejected += 1
                reason = "missing" if presented is None else "wrong"
                return json_response(
                    error_body("UNAUTHORIZED", f"{reason} credentials ({self.auth.kind})"),
                    401,
                    self.auth.challenge(),
                )
            self.auth_accepted += 1

        allowed = route.query_names
        if self.auth is not None and self.auth.kind == "query":
            allowed = allowed | {self.auth.name}
        unknown = sorted({key for key in request.query_params if key.split("[", 1)[0] not in allowed})
        oa_request = _OpenAPIRequest(request, body, route, path_params)
        try:
            result = self.openapi.unmarshal_request(oa_request)
        except Exception as exc:  # a validator crash on odd input is still a request the spec rejects
            self._violation("request", record, f"request could not be validated: {exc!r}")
            return json_response(error_body("REQUEST_INVALID", f"request could not be validated: {exc}"), 400)
        request_errors = list(result.errors)
        errors = [_describe_error(e) for e in request_errors]
        errors += [f"unknown query parameter {name!r}" for name in unknown]
        if errors:
            message = "request does not match the OpenAPI description: " + " | ".join(errors)
            self._violation("request", record, message)
            field = _field_of(request_errors[0]) if request_errors else unknown[0]
            return json_response(error_body("REQUEST_INVALID", message, field), 400)

        params = result.parameters
        call: Call[Any] = Call(
            request=request,
            state=self.domain,
            operation_id=route.operation_id,
            path=dict(params.path),
            query=dict(params.query),
            headers=dict(params.header),
            cookies=dict(params.cookie),
            body=result.body,
            raw_body=body,
        )
        try:
            response = await self.api.handlers[route.operation_id](call)
        except ApiError as exc:
            response = exc.response()
        except Exception:
            text = traceback.format_exc()
            self._violation("server_error", record, text)
            return json_response(error_body("INTERNAL", "the example handler crashed"), 500)

        if self.validate_responses and not isinstance(response, StreamingResponse):
            # Validation only: openapi-core's unmarshalling of a response is ~50x slower.
            try:
                found = [
                    _describe_error(e)
                    for e in self.openapi.response_validator.iter_errors(oa_request, _OpenAPIResponse(response))
                ]
            except Exception as exc:
                found = [f"response could not be validated: {exc!r}"]
            if found:
                self._violation(
                    "response", record, "response does not match the OpenAPI description: " + " | ".join(found)
                )
        if fault is not None and fault.after and fault.kind != "delay":
            return _fault_response(fault)  # handled, but the client never sees the answer
        return response


def _headers_dict(request: Request) -> dict[str, str]:
    headers: dict[str, str] = {}
    for key, value in request.headers.items():
        key = key.lower()
        headers[key] = f"{headers[key]}, {value}" if key in headers else value
    return headers


# --------------------------------------------------------------------------------------------
# Loading examples by name


def _example_module(name: str) -> Any:
    if name not in EXAMPLES:
        raise ValueError(f"unknown example {name!r}; known: {', '.join(EXAMPLES)}")
    return importlib.import_module(f"{_PACKAGE}.{name}.app")


def create_example_app(
    name: str, *, auth: AuthRequirement | str | None = None, validate_responses: bool = True
) -> Starlette:
    """A fresh server for the example ``name`` (one of :data:`EXAMPLES`)."""
    return cast(Starlette, _example_module(name).create_app(auth=auth, validate_responses=validate_responses))


def spec_path_of(name: str) -> Path:
    return cast(Path, _example_module(name).SPEC_PATH)


# --------------------------------------------------------------------------------------------
# Serving


class _Server(uvicorn.Server):
    """uvicorn without signal handling when not in the main thread, with a started callback."""

    def __init__(self, config: uvicorn.Config, on_started: Callable[[], None] | None = None) -> None:
        super().__init__(config)
        self._on_started = on_started

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        if self._on_started is not None and not self.should_exit:
            self._on_started()


def _bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # IPPROTO_TCP explicitly: asyncio only sets TCP_NODELAY on accepted sockets whose proto is TCP,
    # and without it every response on a kept-alive connection waits ~40 ms for a delayed ACK.
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.set_inheritable(True)
    return sock


def _url(host: str, port: int) -> str:
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def _uvicorn_config(app: Starlette, log_level: str) -> uvicorn.Config:
    return uvicorn.Config(
        app,
        lifespan="off",
        http="h11",
        log_level=log_level,
        access_log=False,
        timeout_graceful_shutdown=1,
        timeout_keep_alive=5,
    )


def serve_forever(
    name: str,
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    auth: AuthRequirement | str | None = None,
    validate_responses: bool = True,
    log_level: str = "warning",
    on_started: Callable[[str], None] | None = None,
) -> None:
    """Serve one example in this thread until interrupted (used by ``python -m examples``)."""
    app = create_example_app(name, auth=auth, validate_responses=validate_responses)
    sock = _bind(host, port)
    url = _url(host, sock.getsockname()[1])
    server = _Server(_uvicorn_config(app, log_level), on_started=(lambda: on_started(url)) if on_started else None)
    server.run(sockets=[sock])


class UpstreamViolationError(AssertionError):
    pass


class Upstream:
    """A running example upstream, for tests and the demo.

    ``Upstream.start(name)`` serves it in a background thread (fast, same process);
    ``Upstream.spawn(name)`` runs ``python -m <package> name`` in a subprocess. Both bind a free
    port on 127.0.0.1 and are context managers that stop the server on exit.
    """

    def __init__(self, name: str, base_url: str, spec_path: Path) -> None:
        self.name = name
        self.base_url = base_url
        self.spec_path = spec_path
        self._client = httpx2.Client(base_url=base_url, timeout=10.0, trust_env=False)
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        self._process: subprocess.Popen[bytes] | None = None

    # ---- lifecycle

    @classmethod
    def start(
        cls,
        name: str,
        *,
        auth: AuthRequirement | str | None = None,
        validate_responses: bool = True,
        host: str = "127.0.0.1",
        port: int = 0,
        log_level: str = "warning",
        timeout: float = 10.0,
    ) -> Upstream:
        """Serve the example ``name`` in a background thread of this process."""
        app = create_example_app(name, auth=auth, validate_responses=validate_responses)
        return cls.serve(
            app, name=name, spec_path=spec_path_of(name), host=host, port=port, log_level=log_level, timeout=timeout
        )

    @classmethod
    def serve(
        cls,
        app: Starlette,
        *,
        name: str,
        spec_path: Path,
        host: str = "127.0.0.1",
        port: int = 0,
        log_level: str = "warning",
        timeout: float = 10.0,
    ) -> Upstream:
        """Serve any app built with :class:`Api` (``api.create_app()``) in a background thread."""
        sock = _bind(host, port)
        url = _url(host, sock.getsockname()[1])
        started = threading.Event()
        server = _Server(_uvicorn_config(app, log_level), on_started=started.set)
        failure: list[BaseException] = []

        def run() -> None:
            try:
                asyncio.run(server.serve(sockets=[sock]))
            except BaseException as exc:  # surfaced by start() below
                failure.append(exc)
                started.set()
            finally:
                sock.close()

        thread = threading.Thread(target=run, name=f"upstream-{name}", daemon=True)
        thread.start()
        if not started.wait(timeout) or failure or not server.started:
            server.should_exit = True
            thread.join(timeout)
            raise RuntimeError(f"example {name!r} did not start: {failure[0] if failure else 'timeout'}")
        upstream = cls(name, url, spec_path)
        upstream._server, upstream._thread = server, thread
        return upstream

    @classmethod
    def spawn(
        cls,
        name: str,
        *,
        auth: AuthRequirement | str | None = None,
        validate_responses: bool = True,
        host: str = "127.0.0.1",
        port: int = 0,
        env: Mapping[str, str] | None = None,
        timeout: float = 20.0,
    ) -> Upstream:
        """Run ``python -m <package> name`` in a subprocess (own interpreter, own GIL)."""
        requirement = AuthRequirement.coerce(auth)
        package_dir = Path(__file__).resolve().parent
        command = [sys.executable, "-m", _PACKAGE, name, "--host", host, "--port", str(port)]
        if requirement is not None:
            command += ["--auth-json", json.dumps(requirement.to_dict())]
        if not validate_responses:
            command.append("--no-response-validation")
        child_env = dict(os.environ if env is None else env)
        child_env["PYTHONPATH"] = os.pathsep.join(
            p for p in (str(package_dir.parents[len(_PACKAGE.split(".")) - 1]), child_env.get("PYTHONPATH")) if p
        )
        child_env.setdefault("PYTHONUNBUFFERED", "1")
        process = subprocess.Popen(command, stdout=subprocess.PIPE, env=child_env)
        assert process.stdout is not None
        line: list[bytes] = []
        reader = threading.Thread(target=lambda: line.append(process.stdout.readline()), daemon=True)  # type: ignore[union-attr]
        reader.start()
        reader.join(timeout)
        url = line[0].decode().strip() if line else ""
        if not url.startswith("http"):
            process.kill()
            process.wait()
            raise RuntimeError(f"example {name!r} subprocess did not start (exit code {process.poll()})")
        upstream = cls(name, url, spec_path_of(name))
        upstream._process = process
        return upstream

    def stop(self) -> None:
        if self._server is not None and self._thread is not None:
            self._server.should_exit = True
            self._thread.join(10)
            self._server = self._thread = None
        if self._process is not None:
            if self._process.poll() is None:
                self._process.terminate()
                try:
                    self._process.wait(5)
                except subprocess.TimeoutExpired:
                    self._process.kill()
                    self._process.wait()
            if self._process.stdout is not None:
                self._process.stdout.close()
            self._process = None
        self._client.close()

    def __enter__(self) -> Upstream:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    @property
    def running(self) -> bool:
        if self._process is not None:
            return self._process.poll() is None
        return self._thread is not None and self._thread.is_alive()

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    @property
    def spec_url(self) -> str:
        """The spec served by the running example, with ``servers`` pointing at it."""
        return f"{self.base_url}/openapi.yaml"

    def spec(self) -> dict[str, Any]:
        """The spec (parsed) with ``servers`` set to this running server."""
        spec = load_spec(self.spec_path)
        spec["servers"] = [{"url": self.base_url}]
        return spec

    # ---- admin

    def _admin(self, method: str, path: str, payload: Any = None) -> Any:
        content = None if payload is None and method == "GET" else json.dumps(payload).encode()
        response = self._client.request(
            method, _ADMIN_PREFIX + path, content=content, headers={"content-type": "application/json"}
        )
        if response.status_code >= 400:
            raise ValueError(f"{method} {_ADMIN_PREFIX}{path}: {response.status_code} {response.text}")
        return response.json()

    def state(self) -> dict[str, Any]:
        return cast(dict[str, Any], self._admin("GET", "state"))

    def requests(self, operation: str | None = None) -> list[dict[str, Any]]:
        items = self.state()["requests"]
        return [r for r in items if operation is None or r["operation"] == operation]

    def last_request(self, operation: str | None = None) -> dict[str, Any]:
        items = self.requests(operation)
        if not items:
            raise AssertionError(f"{self.name}: no request{' for ' + operation if operation else ''} recorded")
        return items[-1]

    def counters(self) -> dict[str, int]:
        return cast(dict[str, int], self.state()["counters"])

    def count(self, operation: str) -> int:
        return self.counters().get(operation, 0)

    def violations(self) -> list[dict[str, Any]]:
        return cast(list[dict[str, Any]], self.state()["violations"])

    def domain(self) -> dict[str, Any]:
        return cast(dict[str, Any], self.state()["domain"])

    def fault(self, **fault: Any) -> dict[str, Any]:
        """Inject a fault; see :class:`Fault` for the keys. Returns it as stored (with its id)."""
        return cast(dict[str, Any], self._admin("POST", "faults", fault))

    def clear_faults(self) -> None:
        self._admin("DELETE", "faults")

    def reset(self) -> None:
        self._admin("POST", "reset", {})

    def set_auth(self, auth: AuthRequirement | str | None) -> None:
        requirement = AuthRequirement.coerce(auth)
        self._admin("POST", "auth", requirement.to_dict() if requirement else None)

    def assert_no_violations(self) -> None:
        found = self.violations()
        if found:
            lines = "\n".join(
                f"  [{v['kind']}] {v['method']} {v['path']}{'?' + v['query'] if v['query'] else ''}"
                f" ({v['operation']}): {v['error']}"
                for v in found
            )
            raise UpstreamViolationError(f"{self.name}: {len(found)} OpenAPI violation(s):\n{lines}")

    def __repr__(self) -> str:
        return f"Upstream({self.name!r}, {self.base_url!r})"


def iter_examples() -> Iterator[tuple[str, Path]]:
    for name in EXAMPLES:
        yield name, spec_path_of(name)
