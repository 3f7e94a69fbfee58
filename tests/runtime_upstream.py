"""A tiny real REST upstream for the runtime tests, plus terse Manifest builders.

The Starlette app echoes exactly what reached it (method, raw path, raw query string, headers,
body) and can answer with chosen statuses, bodies, delays, redirects, binary and huge bodies.
`serve_in_thread` (from tests/local.py) runs any ASGI app with uvicorn on 127.0.0.1 in a thread.
"""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response, StreamingResponse
from starlette.routing import Route

from openapi2mcp.manifest import (
    AuthSpec,
    Branch,
    FailureMode,
    Manifest,
    OperationSpec,
    ParamSpec,
    ResponseSpec,
    ServerSpec,
    Step,
    TimeoutSpec,
    ToolSpec,
    UpstreamSpec,
)
from tests.local import free_port as free_port  # imported from here by test modules
from tests.local import serve_in_thread

# A 1x1 transparent PNG.
PNG = base64.b64decode("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAQAAAC1HAwCAAAAC0lEQVR42mNkYAAAAAYAAjCB0C8AAAAASUVORK5CYII=")

# ----------------------------------------------------------------------------- the app


async def echo(request: Request) -> JSONResponse:
    body = await request.body()
    try:
        text: str | None = body.decode()
    except UnicodeDecodeError:
        text = None
    return JSONResponse(
        {
            "method": request.method,
            "raw_path": request.scope["raw_path"].decode(),
            "path": request.scope["path"],
            "query": request.scope["query_string"].decode(),
            "headers": {k.decode().lower(): v.decode() for k, v in request.scope["headers"]},
            "body": text,
            "body_b64": base64.b64encode(body).decode(),
        }
    )


async def status(request: Request) -> Response:
    code = int(request.path_params["code"])
    q = request.query_params
    headers = {"Retry-After": q["retry_after"]} if "retry_after" in q else {}
    body = q.get("body", json.dumps({"message": f"status {code}"}))
    return Response(body, status_code=code, media_type=q.get("ct", "application/json"), headers=headers)


async def delay(request: Request) -> JSONResponse:
    seconds = float(request.query_params.get("s", "1"))
    await asyncio.sleep(seconds)
    return JSONResponse({"slept": seconds})


async def redirect(request: Request) -> Response:
    q = request.query_params
    return RedirectResponse(q["to"], status_code=int(q.get("code", "302")))


async def loop(request: Request) -> Response:
    return RedirectResponse("/loop", status_code=302)


async def png(request: Request) -> Response:
    return Response(PNG, media_type="image/png")


async def pdf(request: Request) -> Response:
    return Response(b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n" + bytes(range(256)), media_type="application/pdf")


async def huge(request: Request) -> Response:
    n = int(request.query_params.get("n", str(50_000_000)))
    chunk = b"x" * 65536

    async def gen() -> AsyncIterator[bytes]:
        sent = 0
        while sent < n:
            part = chunk[: n - sent]
            sent += len(part)
            yield part

    headers = {"content-length": str(n)} if request.query_params.get("length") == "1" else {}
    return StreamingResponse(gen(), media_type="application/json", headers=headers)


async def items(request: Request) -> JSONResponse:
    n = int(request.query_params.get("n", "10"))
    rows = [{"id": i, "name": f"item {i}"} for i in range(n)]
    if request.query_params.get("top") == "list":
        return JSONResponse(rows)
    return JSONResponse({"items": rows, "total": n})


async def raw(request: Request) -> Response:
    """Answer 200 with `body` as-is and content type `ct` (default application/json)."""
    q = request.query_params
    return Response(q.get("body", ""), media_type=q.get("ct", "application/json"))


async def empty(request: Request) -> Response:
    return Response(status_code=204)


async def login(request: Request) -> JSONResponse:
    """Sets a session cookie for whoever asked (`who`), as a web API's login would."""
    response = JSONResponse({"logged_in": request.query_params.get("who", "")})
    response.set_cookie("session", request.query_params.get("who", ""), path="/")
    return response


def make_app() -> Starlette:
    methods = ["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"]
    return Starlette(
        routes=[
            Route("/echo{rest:path}", echo, methods=methods),
            Route("/status/{code:int}", status, methods=methods),
            Route("/delay", delay),
            Route("/redirect", redirect, methods=["GET", "HEAD", "POST"]),
            Route("/loop", loop),
            Route("/png", png),
            Route("/pdf", pdf),
            Route("/huge", huge),
            Route("/items", items),
            Route("/raw", raw, methods=methods),
            Route("/empty", empty, methods=methods),
            Route("/login", login, methods=methods),
        ]
    )


# ----------------------------------------------------------------------------- serving


@pytest.fixture(scope="session", name="upstream")
def upstream_server() -> Iterator[str]:
    """The `upstream` fixture: base URL of the echo upstream, shared by the whole session."""
    with serve_in_thread(make_app()) as url:
        yield url


# ----------------------------------------------------------------------------- manifest builders


def q(name: str, arg: str | None = None, **kw: Any) -> ParamSpec:
    """A query parameter fed by the argument of the same name (or `arg`)."""
    return ParamSpec(name=name, location="query", arg=arg or name, **kw)


def p(name: str, location: str = "path", arg: str | None = None, **kw: Any) -> ParamSpec:
    kw.setdefault("required", location == "path")
    kw.setdefault("style", "simple" if location in ("path", "header") else "form")
    return ParamSpec(name=name, location=location, arg=arg or name, **kw)  # type: ignore[arg-type]


def fixed(name: str, value: Any, location: str = "query") -> ParamSpec:
    return ParamSpec(name=name, location=location, fixed=True, value=value)  # type: ignore[arg-type]


def op(method: str, path: str, *params: ParamSpec, **kw: Any) -> OperationSpec:
    return OperationSpec(id=kw.pop("id", f"{method} {path}"), method=method, path=path, params=list(params), **kw)


def schema_for(operation: OperationSpec) -> dict[str, Any]:
    """A permissive input schema naming the operation's arguments (required ones required)."""
    props: dict[str, Any] = {}
    required: list[str] = []
    for param in operation.params:
        if param.arg:
            props[param.arg] = {}
            if param.required:
                required.append(param.arg)
    body = operation.body
    if body is not None:
        if body.arg:
            props[body.arg] = {}
            if body.required:
                required.append(body.arg)
        props.update({arg: {} for arg in body.properties})
    out: dict[str, Any] = {"type": "object", "properties": props}
    if required:
        out["required"] = required
    return out


def tool(
    name: str,
    operation: OperationSpec,
    *,
    input_schema: dict[str, Any] | None = None,
    output_schema: dict[str, Any] | None = None,
    response: ResponseSpec | None = None,
    failure_modes: dict[str, FailureMode] | None = None,
    **kw: Any,
) -> ToolSpec:
    """A one-operation tool."""
    return ToolSpec(
        name=name,
        description=f"{operation.method} {operation.path}",
        input_schema=input_schema if input_schema is not None else schema_for(operation),
        output_schema=output_schema,
        branches=[Branch(key="default", steps=[Step(id="call", operation=operation)])],
        response=response or ResponseSpec(),
        failure_modes=failure_modes or {},
        **kw,
    )


def manifest(
    base_url: str,
    *tools: ToolSpec,
    auth: AuthSpec | None = None,
    headers: dict[str, str] | None = None,
    timeout: TimeoutSpec | None = None,
    max_response_bytes: int = 10_000_000,
) -> Manifest:
    return Manifest(
        server=ServerSpec(name="test-api", version="1.2.3"),
        upstream=UpstreamSpec(
            base_url=base_url,
            auth=auth or AuthSpec(),
            headers=headers or {},
            timeout=timeout or TimeoutSpec(),
            max_response_bytes=max_response_bytes,
        ),
        tools=list(tools),
    ).sealed()
