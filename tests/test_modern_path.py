"""The fast path of 2026-07-28 tools/call (runtime/modern.py) answers exactly as the SDK's own HTTP entry does.

Every request here goes to two real servers on 127.0.0.1 built from the same Manifest: one with
the fast path (the default) and one with `HttpOptions(fast_path=False)`, where every request takes
the SDK's path. Their answers (status, headers, body) must be the same, up to what differs between
any two calls (trace ids, timings, signed states, the server's own port). Each case also says
whether the fast path answers it: a well-formed call must be served by it (else the comparison
proves nothing), anything unusual must reach the SDK.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2
import mcp_types as types
import pytest
from mcp import Client, MCPError
from mcp.client.streamable_http import streamable_http_client
from starlette.applications import Starlette

from openapi2mcp.manifest import Branch, Manifest, Step
from openapi2mcp.runtime import AuthOptions, HttpOptions, Runtime, RuntimeOptions, auth_config, http_app
from openapi2mcp.runtime.modern import ModernCalls, sdk_checked
from tests.runtime_upstream import fixed, manifest, op, p, serve_in_thread, tool
from tests.runtime_upstream import upstream_server as upstream_server

ROOT = Path(__file__).resolve().parents[1]
MODERN = "2026-07-28"
LEGACY = "2025-11-25"
META = {"io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "0"},
        "io.modelcontextprotocol/clientCapabilities": {}}
PET = json.dumps({"id": 7, "name": "Rex", "tags": [None], "weight": None})
PET_SCHEMA = {"type": "object", "properties": {"id": {"type": "integer"}, "name": {"type": "string"}}}
READER = "reader-token-0123456789"  # pets:read
ADMIN = "admin-token-01234567890"  # every scope
VOLATILE = [
    (re.compile(r"[0-9a-f]{32}"), "<id>"),  # trace ids, session ids
    (re.compile(r'"ms":\s*\d+'), '"ms": 0'),  # upstream timings
    (re.compile(r'"requestState":\s*"[^"]*"'), '"requestState": "<state>"'),  # signed, timed
]


def pets_manifest(base: str) -> Manifest:
    write = op("POST", "/echo/pets")
    return manifest(
        base,
        tool("get_pet", op("GET", "/raw", fixed("body", PET)), output_schema=PET_SCHEMA, permissions=["pets:read"]),
        tool("pet_by_id", op("GET", "/echo/pets/{id}", p("id")), permissions=["pets:read"]),
        tool("missing_pet", op("GET", "/status/404"), permissions=["pets:read"]),
        tool("header_pet", op("GET", "/echo/pets/{id}", p("id")), permissions=["pets:read"], input_schema={
            "type": "object", "properties": {"id": {"type": "string", "x-mcp-header": "Pet-Id"}}, "required": ["id"]}),
        tool("pets_delete", write, permissions=["pets:write"], risk="high").model_copy(update={
            "branches": [Branch(key="default", steps=[Step(id="call", operation=write)], risk="high")]}),
        tool("pets_admin", op("DELETE", "/echo"), risk="forbidden"),
        tool("pets_stepped", op("GET", "/echo/stepped"), permissions=["pets:read"], step_up=True),
    )


@dataclass
class Pair:
    """The same Manifest served with the fast path (`fast`) and without it (`sdk`), each a base URL."""

    fast: str
    sdk: str
    app: Starlette

    @property
    def served(self) -> int:
        """How many calls the fast path has answered itself."""
        node: Any = self.app.middleware_stack
        while node is not None and not isinstance(node, ModernCalls):
            node = getattr(node, "app", None)
        assert isinstance(node, ModernCalls), "the fast path is not in the app's middleware"
        return node.served


@contextlib.contextmanager
def serve_pair(m: Manifest, options: HttpOptions, **runtime: Any) -> Iterator[Pair]:
    fast_app = http_app(Runtime(m, RuntimeOptions(**runtime)), options)
    sdk_app = http_app(Runtime(m, RuntimeOptions(**runtime)), HttpOptions(**{**vars(options), "fast_path": False}))
    with serve_in_thread(fast_app) as fast, serve_in_thread(sdk_app) as sdk:
        yield Pair(fast, sdk, fast_app)


@pytest.fixture(scope="module")
def pair(upstream: str) -> Iterator[Pair]:
    with serve_pair(pets_manifest(upstream), HttpOptions()) as served:
        yield served


@pytest.fixture(scope="module")
def auth_pair(upstream: str) -> Iterator[Pair]:
    config = auth_config(AuthOptions(auth_server="https://auth.example.com"), host="127.0.0.1",
                         environ={"OPENAPI2MCP_AUTH_TOKENS": f"{READER}:pets:read,{ADMIN}:*"})
    with serve_pair(pets_manifest(upstream), HttpOptions(auth=config)) as served:
        yield served


# ============================================================================ the requests


def call(name: str = "get_pet", arguments: Any = None, *, request_id: Any = 7, meta: Any = META,
         **params: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"name": name, "_meta": meta, **params}
    if arguments is not None:
        body["arguments"] = arguments
    if meta is None:
        del body["_meta"]
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": body}


def headers(name: str = "get_pet", *extra: tuple[str, str], **over: str | None) -> list[tuple[str, str]]:
    """A 2026-07-28 tools/call's headers; `over` replaces (None: drops) one by its name, `extra` adds."""
    base = {"content-type": "application/json", "accept": "application/json, text/event-stream",
            "mcp-protocol-version": MODERN, "mcp-method": "tools/call", "mcp-name": name}
    for key, value in over.items():
        base[key.replace("_", "-")] = value  # type: ignore[assignment]
    return [(k, v) for k, v in base.items() if v is not None] + list(extra)


def raw(data: Any) -> bytes:
    return data if isinstance(data, bytes) else json.dumps(data).encode()


@dataclass(frozen=True)
class Answer:
    status: int
    headers: tuple[tuple[str, str], ...]
    body: str


def answer(response: httpx2.Response, base: str) -> Answer:
    """What a client sees, with what differs between two calls or two servers made alike."""
    text = response.content.decode("utf-8", "replace").replace(base, "<base>")
    kept = tuple(sorted((k, _steady(v.replace(base, "<base>"))) for k, v in response.headers.items()
                        if k not in ("date", "server", "content-length")))
    return Answer(response.status_code, kept, _steady(text))


def _steady(text: str) -> str:
    for pattern, stand_in in VOLATILE:
        text = pattern.sub(stand_in, text)
    return text


async def both(pair: Pair, body: Any, sent: list[tuple[str, str]], *, method: str = "POST",
               token: str | None = None) -> tuple[Answer, Answer, int]:
    """The same request to both servers: (the fast server's answer, the SDK's, calls the fast path served)."""
    if token:
        sent = [*sent, ("authorization", f"Bearer {token}")]
    before = pair.served
    answers = []
    async with httpx2.AsyncClient(timeout=30, trust_env=False) as http:
        for base in (pair.fast, pair.sdk):
            response = await http.request(method, base + "/mcp", content=raw(body), headers=sent)
            answers.append(answer(response, base))
    return answers[0], answers[1], pair.served - before


# (what, body, headers, answered by the fast path)
WELL_FORMED = [
    ("a call", call(arguments={}), headers()),
    ("a string id", call(arguments={}, request_id="call-1"), headers()),
    ("a huge id", call(arguments={}, request_id=2**70), headers()),
    ("arguments", call("pet_by_id", {"id": "3"}), headers("pet_by_id")),
    ("no arguments key", call(), headers()),
    ("an upstream error (isError)", call("missing_pet", {}), headers("missing_pet")),
    ("invalid arguments (isError)", call("pet_by_id", {"nope": 5}), headers("pet_by_id")),
    ("an unknown tool (JSON-RPC error)", call("nope", {}), headers("nope")),
    ("a forbidden tool", call("pets_admin", {}), headers("pets_admin")),
    ("a confirmation (input required)", call("pets_delete", {}), headers("pets_delete")),
    ("a confirmation, the client can elicit", call("pets_delete", {}, meta={
        **META, "io.modelcontextprotocol/clientCapabilities": {"elicitation": {"form": {}}}}), headers("pets_delete")),
    ("no clientInfo", call(meta={k: v for k, v in META.items() if not k.endswith("clientInfo")}), headers()),
    ("a charset", call(), headers(content_type="application/json; charset=utf-8")),
    ("Accept */*", call(), headers(accept="*/*")),
    ("Accept JSON only", call(), headers(accept="application/json")),
    ("an allowed Origin", call(), headers(origin="http://localhost:9999")),
    ("a declared Mcp-Param header, no arguments", call("header_pet", {}), headers("header_pet")),
    ("a step-up tool without auth", call("pets_stepped", {}), headers("pets_stepped")),
    ("an Mcp-Session-Id (no sessions in 2026-07-28)", call(), headers("get_pet", ("mcp-session-id", "f" * 32))),
    ("the body's keys in another order", {"params": call()["params"], "method": "tools/call", "id": 3,
                                          "jsonrpc": "2.0"}, headers()),
]

UNUSUAL = [
    ("an unsupported version", call(meta={**META, "io.modelcontextprotocol/protocolVersion": "2099-01-01"}),
     headers(mcp_protocol_version="2099-01-01")),
    ("the header's version is not the body's", call(meta={**META, "io.modelcontextprotocol/protocolVersion": LEGACY}),
     headers()),
    ("no version header", call(), headers(mcp_protocol_version=None)),
    ("a handshake version header", call(), headers(mcp_protocol_version=LEGACY)),
    ("a mismatched Mcp-Name", call(), headers(mcp_name="pet_by_id")),
    ("no Mcp-Name", call(), headers(mcp_name=None)),
    ("a base64 Mcp-Name", call(), headers(mcp_name="=?base64?Z2V0X3BldA==?=")),
    ("no Mcp-Method", call(), headers(mcp_method=None)),
    ("another Mcp-Method", call(), headers(mcp_method="tools/list")),
    ("a repeated Mcp-Name", call(), headers("get_pet", ("mcp-name", "get_pet"))),
    ("a repeated Content-Type", call(), headers("get_pet", ("content-type", "application/json"))),
    ("no _meta", call(meta=None), headers()),
    ("_meta without capabilities", call(meta={k: v for k, v in META.items() if not k.endswith("Capabilities")}),
     headers()),
    ("_meta with a traceparent", call(meta={**META, "traceparent": "00-" + "1" * 32 + "-" + "2" * 16 + "-01"}),
     headers()),
    ("_meta not an object", call(meta=[1]), headers()),
    ("a malformed clientInfo", call(meta={**META, "io.modelcontextprotocol/clientInfo": {"name": 1}}), headers()),
    ("malformed capabilities", call(meta={**META, "io.modelcontextprotocol/clientCapabilities": []}), headers()),
    ("a batch", [call()], headers()),
    ("a notification", {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}},
     headers()),
    ("bad JSON", b'{"jsonrpc": "2.0", "id": 1,', headers()),
    ("not UTF-8", b'\xff\xfe{}', headers()),
    ("text/plain", call(), headers(content_type="text/plain")),
    ("no Content-Type", call(), headers(content_type=None)),
    ("Accept SSE only", call(), headers(accept="text/event-stream")),
    ("an empty Accept", call(), headers(accept="")),  # (httpx2 sends */* when none is given)
    ("another Host", call(), headers(host="evil.example")),
    ("another Origin", call(), headers(origin="http://evil.example")),
    ("a float id", call(request_id=1.5), headers()),
    ("a boolean id", call(request_id=True), headers()),
    ("a null id", call(request_id=None), headers()),
    ("JSON-RPC 1.0", {**call(), "jsonrpc": "1.0"}, headers()),
    ("an extra envelope key", {**call(), "extra": 1}, headers()),
    ("tools/list", {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": META}},
     headers(mcp_method="tools/list", mcp_name=None)),
    ("a requestState", call("pets_delete", {}, requestState="forged"), headers("pets_delete")),
    ("inputResponses", call("pets_delete", {}, inputResponses={"confirm": {"action": "accept"}}),
     headers("pets_delete")),
    ("null arguments", {**call(), "params": {**call()["params"], "arguments": None}}, headers()),
    ("a list of arguments", call(arguments=[1]), headers()),
    ("a tool name that is not a string", call(name=7), headers(mcp_name="7")),  # type: ignore[arg-type]
    ("a declared Mcp-Param header missing", call("header_pet", {"id": "3"}), headers("header_pet")),
    ("a declared Mcp-Param header sent", call("header_pet", {"id": "3"}),
     headers("header_pet", ("mcp-param-pet-id", "3"))),
    ("an undeclared Mcp-Param header", call(arguments={}), headers("get_pet", ("mcp-param-x", "1"))),
    ("a body over the limit", {**call(), "pad": "x" * (4 * 2**20)}, headers()),
]


# ============================================================================ the tests


def test_the_fast_path_serves_with_the_installed_sdk() -> None:
    """On another SDK release the fast path turns itself off (and these comparisons prove nothing): check it again."""
    assert sdk_checked()


CASES = [(*c, True) for c in WELL_FORMED] + [(*c, False) for c in UNUSUAL]


@pytest.mark.anyio
@pytest.mark.parametrize(("what", "body", "sent", "fast_path"), CASES, ids=[c[0] for c in CASES])
async def test_the_fast_path_answers_the_well_formed_calls_as_the_sdk_and_leaves_it_the_rest(
        pair: Pair, what: str, body: Any, sent: list[tuple[str, str]], fast_path: bool) -> None:
    fast, sdk, served = await both(pair, body, sent)
    assert fast == sdk
    assert served == int(fast_path), f"{what}: {'not ' if fast_path else ''}answered by the fast path"
    if fast_path:
        assert fast.status in (200, 400)


@pytest.mark.anyio
@pytest.mark.parametrize("method", ["GET", "DELETE", "PUT"])
async def test_other_methods_reach_the_sdk(pair: Pair, method: str) -> None:
    fast, sdk, served = await both(pair, b"", headers(), method=method)
    assert fast == sdk and fast.status == 405 and served == 0


@pytest.mark.anyio
async def test_the_answers_are_the_sdks_bytes(pair: Pair) -> None:
    """Not only the same JSON: the same encoding, key order and headers (the SDK's `_write`)."""
    fast, sdk, served = await both(pair, call("pet_by_id", {"id": "ünï €"}), headers("pet_by_id"))
    assert served == 1 and fast == sdk
    assert "\\u00fcn\\u00ef \\u20ac" in fast.body  # json.dumps' ASCII escapes, as the SDK sends them
    assert dict(fast.headers)["content-type"] == "application/json"
    result = json.loads(fast.body)["result"]
    assert result["resultType"] == "complete"
    assert result["_meta"]["io.modelcontextprotocol/serverInfo"] == {"name": "test-api", "version": "1.2.3"}


@contextlib.asynccontextmanager
async def client(url: str, token: str | None = None) -> AsyncIterator[Client]:
    sent = {"Authorization": f"Bearer {token}"} if token else {}
    async with (httpx2.AsyncClient(headers=sent, timeout=30, trust_env=False) as http,
                Client(streamable_http_client(url, http_client=http), mode="auto") as c):
        yield c


async def session(url: str, token: str | None = None) -> list[Any]:
    """What the SDK client sees of a few calls (and errors), with what differs between two calls blanked."""
    seen: list[Any] = []
    async with client(url + "/mcp", token) as c:
        assert c.protocol_version == MODERN
        seen.append([t.name for t in (await c.list_tools()).tools])
        for name, arguments in (("get_pet", {}), ("pet_by_id", {"id": "9"}), ("missing_pet", {}),
                                ("pets_delete", {}), ("nope", {}), ("pets_admin", {})):
            try:
                result = await c.call_tool(name, arguments)
            except MCPError as e:
                seen.append(("error", e.code, e.error.message))
                continue
            text = json.dumps(result.model_dump(mode="json", by_alias=True), sort_keys=True).replace(url, "<base>")
            seen.append(json.loads(_steady(text)))
    return seen


@pytest.mark.anyio
async def test_the_sdk_client_sees_the_same_server(pair: Pair) -> None:
    before = pair.served
    fast = await session(pair.fast)
    assert pair.served - before == 6  # every call went through the fast path (tools/list did not)
    assert fast == await session(pair.sdk)
    assert fast[1]["structuredContent"] == {"id": 7, "name": "Rex", "tags": [None], "weight": None}
    assert fast[-1] == ("error", types.INVALID_PARAMS, "Unknown tool: pets_admin")


AUTH_CASES = [
    # (what, token, tool, the HTTP status, answered by the fast path)
    ("no token", None, "get_pet", 401, False),
    ("a wrong token", READER[::-1], "get_pet", 401, False),
    ("a reader's call", READER, "get_pet", 200, True),
    ("a tool the reader may not see", READER, "pets_delete", 400, True),
    ("a step-up tool without its scope", READER, "pets_stepped", 403, False),
    ("a step-up tool with every scope", ADMIN, "pets_stepped", 200, True),
]


@pytest.mark.anyio
@pytest.mark.parametrize(("what", "token", "name", "status", "fast_path"), AUTH_CASES, ids=[c[0] for c in AUTH_CASES])
async def test_auth_is_applied_before_the_fast_path(
        auth_pair: Pair, what: str, token: str | None, name: str, status: int, fast_path: bool) -> None:
    fast, sdk, served = await both(auth_pair, call(name, {}), headers(name), token=token)
    assert fast == sdk
    assert (fast.status, served) == (status, int(fast_path)), what


@pytest.mark.anyio
async def test_the_sdk_client_with_a_token(auth_pair: Pair) -> None:
    before = auth_pair.served
    fast = await session(auth_pair.fast, ADMIN)
    assert auth_pair.served - before == 6
    assert fast == await session(auth_pair.sdk, ADMIN)


@pytest.mark.anyio
async def test_with_telemetry_on_every_request_takes_the_sdk_path(upstream: str) -> None:
    """Our telemetry middleware sees every MCP request: with metrics on, the fast path stands aside."""
    m = pets_manifest(upstream)
    runtime = Runtime(m, RuntimeOptions(metrics=True))
    app = http_app(runtime, HttpOptions())
    with serve_in_thread(app) as base:
        served = Pair(base, base, app)
        async with httpx2.AsyncClient(timeout=30, trust_env=False) as http:
            response = await http.post(base + "/mcp", content=raw(call()), headers=headers())
        assert response.status_code == 200 and "Rex" in response.text
        assert served.served == 0
        assert runtime.telemetry.metrics is not None
        exposition = runtime.telemetry.metrics.registry
        from prometheus_client import generate_latest

        assert 'method="tools/call"' in generate_latest(exposition).decode()


def test_without_the_apps_lifespan_both_paths_fail_alike(upstream: str) -> None:
    """Served without its lifespan the SDK's session manager does not run and every MCP request is a 500."""
    for fast_path in (True, False):
        app = http_app(Runtime(pets_manifest(upstream)), HttpOptions(fast_path=fast_path))
        with serve_in_thread(app, lifespan="off") as base:
            response = httpx2.post(base + "/mcp", content=raw(call()), headers=headers(), trust_env=False)
            assert response.status_code == 500, fast_path
            assert Pair(base, base, app).served == 0


def test_sse_answers_take_the_sdk_path(upstream: str) -> None:
    app = http_app(Runtime(pets_manifest(upstream)), HttpOptions(json_response=False))
    with serve_in_thread(app) as base:
        response = httpx2.post(base + "/mcp", content=raw(call()), headers=headers(), trust_env=False)
        assert response.status_code == 200 and "Rex" in response.text
        assert Pair(base, base, app).served == 0


GLOBAL_TRACER = """
import json, sys
import httpx2
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from openapi2mcp.runtime import HttpOptions, Runtime, http_app
from tests.test_modern_path import Pair, call, headers, pets_manifest, raw
from tests.runtime_upstream import serve_in_thread

exported = InMemorySpanExporter()
provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(exported))
trace.set_tracer_provider(provider)  # the process's own tracing: the SDK's middleware records a span per request
app = http_app(Runtime(pets_manifest(sys.argv[1])), HttpOptions())
with serve_in_thread(app) as base:
    response = httpx2.post(base + "/mcp", content=raw(call()), headers=headers(), trust_env=False)
    print(json.dumps({"status": response.status_code, "served": Pair(base, base, app).served,
                      "spans": [s.name for s in exported.get_finished_spans()]}))
"""


def test_a_global_tracer_provider_sees_every_request(upstream: str) -> None:
    """With a tracer provider set in the process, the SDK's span records something: the fast path stands aside."""
    out = subprocess.run([sys.executable, "-c", GLOBAL_TRACER, upstream], capture_output=True, text=True,
                         cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=120, check=True)
    report = json.loads(out.stdout.strip().splitlines()[-1])
    assert report == {"status": 200, "served": 0, "spans": ["tools/call get_pet"]}
