"""A reverse proxy that checks every request against an OpenAPI document before passing it on.

The example upstreams validate what they receive with openapi-core themselves; a third-party
server does not (or not against the document openapi2mcp serves). Put this proxy between
openapi2mcp and such a server, and every request openapi2mcp sends is checked by openapi-core
against the same document openapi2mcp compiled (after its OAI Overlay patches), then forwarded
unchanged; the answer comes back unchanged. A request the document does not allow is recorded
in `violations` (and still forwarded: the server's own answer is part of what is being tested).

    with SpecProxy.start(document, target="http://127.0.0.1:8888", base_path="/v1") as proxy:
        ...  # point openapi2mcp at proxy.url + the API's base path
        assert not proxy.violations
"""

from __future__ import annotations

import contextlib
import copy
import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import httpx2
from openapi_core import OpenAPI
from openapi_core.datatypes import RequestParameters
from starlette.applications import Starlette
from starlette.datastructures import Headers, ImmutableMultiDict
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from tests.local import serve_in_thread

_HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade", "host", "content-length"}


class _Checked:
    """openapi-core's request protocol over the bytes that arrived (it finds the operation itself)."""

    def __init__(self, request: Request, body: bytes) -> None:
        self.host_url = f"{request.url.scheme}://{request.url.netloc}"
        self.path = _raw_path(request)  # as sent: `%2F` inside a value must not split a segment
        self.method = request.method.lower()
        self.body: bytes | None = body or None
        self.content_type = request.headers.get("content-type", "application/octet-stream").lower()
        self.parameters = RequestParameters(
            query=ImmutableMultiDict(request.query_params.multi_items()),
            header=Headers(raw=request.headers.raw),
            cookie=request.cookies,
        )


def _raw_path(request: Request) -> str:
    return bytes(request.scope.get("raw_path") or request.url.path.encode()).decode("latin-1").split("?")[0]


def _relaxed(document: Mapping[str, Any], base_path: str) -> dict[str, Any]:
    """The document as openapi2mcp reads it: servers as the proxy's own path (any host validates),
    `oneOf` as `anyOf` (docs/compile.md: overlapping branches are common in real specs, so a value
    valid for two of them, like `[]` for "array of strings or array of arrays", is not refused),
    no `deprecated` (openapi-core warns on every use of a deprecated parameter)."""
    doc = copy.deepcopy(dict(document))
    doc["servers"] = [{"url": base_path or "/"}]

    def strip(node: Any) -> None:
        if isinstance(node, dict):
            if isinstance(node.get("deprecated"), bool):
                del node["deprecated"]
            if isinstance(node.get("oneOf"), list) and "anyOf" not in node:
                node["anyOf"] = node.pop("oneOf")
            for value in node.values():
                strip(value)
        elif isinstance(node, list):
            for value in node:
                strip(value)

    strip(doc)
    return doc


@dataclass
class SpecProxy:
    url: str
    violations: list[dict[str, Any]] = field(default_factory=list)
    seen: int = 0

    @classmethod
    @contextlib.contextmanager
    def start(cls, document: Mapping[str, Any], *, target: str, base_path: str = "") -> Iterator[SpecProxy]:
        """Serve the proxy on 127.0.0.1 in a thread; `target` is the server's origin (no path),
        `base_path` the path the API's operations are under (`/v1`), as requests arrive."""
        openapi = OpenAPI.from_dict(_relaxed(document, base_path), config=None)
        proxy = cls(url="")
        client = httpx2.AsyncClient(base_url=target, trust_env=False, timeout=60.0)

        async def relay(request: Request) -> Response:
            body = await request.body()
            proxy.seen += 1
            try:
                result = openapi.unmarshal_request(_Checked(request, body))
                errors = [str(e) + (f": {e.__cause__}" if e.__cause__ else "") for e in result.errors]
            except Exception as e:  # a crash of the validator on odd input is a request worth seeing too
                errors = [f"could not be validated: {e!r}"]
            if errors:
                proxy.violations.append({
                    "method": request.method, "path": _raw_path(request), "query": request.url.query,
                    "body": body[:500].decode("utf-8", "replace"), "errors": errors,
                })
            headers = [(k, v) for k, v in request.headers.items() if k.lower() not in _HOP_BY_HOP]
            raw = _raw_path(request) + (f"?{request.url.query}" if request.url.query else "")
            answer = await client.request(request.method, raw, headers=headers, content=body)
            kept = {k: v for k, v in answer.headers.items() if k.lower() not in _HOP_BY_HOP | {"content-encoding"}}
            return Response(answer.content, status_code=answer.status_code, headers=kept)

        app = Starlette(routes=[Route("/{rest:path}", relay, methods=["GET", "POST", "PUT", "PATCH", "DELETE",
                                                                       "HEAD", "OPTIONS"])])
        try:
            with serve_in_thread(app) as url:
                proxy.url = url
                yield proxy
        finally:
            with contextlib.suppress(Exception):
                import anyio

                anyio.run(client.aclose)

    def describe(self, since: int = 0) -> str:
        return json.dumps(self.violations[since:][:3], indent=1)[:3000]
