"""The runtime: argument validation, dispatch, chains, results, tools/list, and real MCP clients.

MCP is exercised with the SDK `mcp.Client` in-process, over stdio (a spawned `serve_stdio`) and
over Streamable HTTP (uvicorn on a free port), in both protocol eras.
"""

from __future__ import annotations

import base64
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx2
import mcp_types as types
import pytest
from mcp import Client, MCPError, StdioServerParameters

from openapi2mcp.compiler.schemas import tolerant
from openapi2mcp.manifest import (
    AuthSpec,
    BodySpec,
    Branch,
    DryRunSpec,
    Manifest,
    ParamSpec,
    ResponseSpec,
    Step,
    ToolSpec,
)
from openapi2mcp.result import error_of
from openapi2mcp.runtime import HttpOptions, Runtime, RuntimeOptions, http_app, transport_security
from openapi2mcp.upstream import ConfigError
from tests.helpers import compile_example
from tests.runtime_upstream import (
    fixed,
    free_port,
    manifest,
    op,
    p,
    q,
    serve_in_thread,
    tool,
    upstream_server,  # noqa: F401  (the `upstream` fixture)
)

ROOT = Path(__file__).resolve().parents[1]
CANARY = "CANARY-runtime-9c4d2"

SEARCH_SCHEMA = {
    "type": "object",
    "properties": {
        "keyword": {"type": "string", "minLength": 2, "maxLength": 80},
        "limit": {"type": "integer", "minimum": 1, "maximum": 20, "default": 5},
        "since": {"type": "string", "format": "date"},
        "owner": {"type": "string", "format": "email"},
        "filter": {
            "type": "object",
            "properties": {"color": {"type": "string", "enum": ["red", "green"]}},
            "additionalProperties": False,
        },
    },
    "required": ["keyword"],
    "additionalProperties": False,
}


def search_tool() -> ToolSpec:
    operation = op(
        "GET", "/echo/search", q("keyword"), q("limit"), q("since"), q("owner"), q("filter", style="deepObject")
    )
    return tool("search_notes", operation, input_schema=SEARCH_SCHEMA)


def wire(result: types.CallToolResult) -> dict[str, Any]:
    return result.model_dump(mode="json", by_alias=True, exclude_none=True)


def err(result: types.CallToolResult) -> dict[str, Any]:
    assert result.is_error, wire(result)
    assert result.structured_content is None, wire(result)  # errors never claim to fit outputSchema
    body = error_of(result)
    assert body is not None, wire(result)
    assert isinstance(result.content[0], types.TextContent)
    assert json.loads(result.content[0].text) == body
    return body


def ok(result: types.CallToolResult) -> dict[str, Any]:
    assert not result.is_error, wire(result)
    body: dict[str, Any] = result.structured_content
    return body


# ============================================================================ arguments


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("arguments", "field", "message"),
    [
        ({"keyword": "ab", "limit": 50}, "limit", "limit: 50 is greater than the maximum of 20"),
        ({}, "keyword", "keyword: required argument missing"),
        (
            {"keyword": "ab", "filter": {"color": "blue"}},
            "filter.color",
            "filter.color: 'blue' is not one of ['red', 'green']",
        ),
        ({"keyword": "ab", "limt": 3}, "limt", "limt: unknown argument, did you mean 'limit'?"),
        ({"keyword": "ab", "limit": "5"}, "limit", "limit: expected integer, got string"),
        ({"keyword": "ab", "since": "2024-13-45"}, "since", "since: '2024-13-45' is not a 'date'"),
        ({"keyword": "ab", "owner": "nobody"}, "owner", "owner: 'nobody' is not a 'email'"),
    ],
)
async def test_argument_errors_are_short_and_name_the_field(
    upstream: str, arguments: dict[str, Any], field: str, message: str
) -> None:
    runtime = Runtime(manifest(upstream, search_tool()))
    result = await runtime.call("search_notes", arguments)
    body = err(result)
    assert (body["code"], body["field"], body["retryable"]) == ("ARGUMENT_INVALID", field, False)
    assert body["message"] == message
    assert "openapi2mcp/requests" not in (result.meta or {})  # the upstream was never called
    await runtime.aclose()


NULLABLE_SCHEMA = {  # the shape of FastAPI/pydantic `Optional[...]` fields: anyOf [X, {type: null}]
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "concurrency_limit": {"anyOf": [{"type": "integer", "minimum": 1}, {"type": "null"}]},
        "flows": {"anyOf": [{"type": "object", "additionalProperties": False, "properties": {
            "name": {"anyOf": [{"type": "object", "additionalProperties": False,
                                "properties": {"like_": {"type": "string"}}}, {"type": "null"}]}}},
            {"type": "null"}]},
    },
}


@pytest.mark.anyio
async def test_null_means_not_given_and_nullable_errors_name_the_nested_field(upstream: str) -> None:
    nullable = tool("filter_flows", op("POST", "/echo/filter"), input_schema=NULLABLE_SCHEMA)
    runtime = Runtime(manifest(upstream, search_tool(), nullable))
    given = ok(await runtime.call("search_notes", {"keyword": "mcp", "limit": None, "since": None, "owner": None}))
    assert given["query"] == "keyword=mcp&limit=5"  # null: not given, so the default is sent
    missing = err(await runtime.call("search_notes", {"keyword": None}))
    assert (missing["field"], missing["message"]) == ("keyword", "keyword: required, got null")
    nested = err(await runtime.call("filter_flows", {"flows": {"name": {"like_": 5}}}))
    assert nested["field"] == "flows.name.like_"
    assert nested["message"] == "flows.name.like_: expected string, got integer"
    low = err(await runtime.call("filter_flows", {"concurrency_limit": -3}))
    assert low["message"] == "concurrency_limit: -3 is less than the minimum of 1"
    await runtime.aclose()


@pytest.mark.anyio
async def test_several_argument_problems_are_all_reported_bounded(upstream: str) -> None:
    runtime = Runtime(manifest(upstream, search_tool()))
    arguments = {"keyword": "a", "limit": 0, "since": "x", "owner": "y", "filter": {"color": 1}, "zz": 1, "yy": 2}
    body = err(await runtime.call("search_notes", arguments))
    assert body["message"].count(";") == 4
    assert body["message"].endswith("(and 2 more)")
    assert body["field"] == "filter.color"  # sorted by path
    await runtime.aclose()


@pytest.mark.anyio
async def test_defaults_are_sent_and_valid_calls_reach_the_upstream(upstream: str) -> None:
    runtime = Runtime(manifest(upstream, search_tool()))
    result = await runtime.call("search_notes", {"keyword": "mcp", "filter": {"color": "red"}}, trace_id="t-1")
    assert ok(result)["query"] == "keyword=mcp&limit=5&filter[color]=red"
    assert result.meta is not None
    assert result.meta["openapi2mcp/traceId"] == "t-1"
    assert result.meta["openapi2mcp/requests"][0]["operation"] == "GET /echo/search"
    assert result.meta["openapi2mcp/requests"][0]["status"] == 200
    assert isinstance(result.content[0], types.TextContent)
    assert json.loads(result.content[0].text) == result.structured_content
    await runtime.aclose()


# ============================================================================ dispatch and chains


def pets_tool(dispatch: str) -> ToolSpec:
    get = Branch(
        key="get",
        when=["id"] if dispatch == "presence" else [],
        requires=["id"] if dispatch == "action" else [],
        steps=[Step(id="get", operation=op("GET", "/echo/pets/{id}", p("id")))],
    )
    find = Branch(key="find", when=["name"], steps=[Step(id="find", operation=op("GET", "/echo/pets", q("name")))])
    listing = Branch(key="list", steps=[Step(id="list", operation=op("GET", "/echo/pets"))])
    gone = Branch(key="purge", risk="forbidden", steps=[Step(id="purge", operation=op("DELETE", "/echo/pets"))])
    schema = {"type": "object", "properties": {"action": {"type": "string"}, "id": {}, "name": {}}}
    branches = [get, find, listing, gone] if dispatch == "action" else [get, find, listing]
    return ToolSpec(name="pets", description="pets", input_schema=schema, dispatch=dispatch, branches=branches)  # type: ignore[arg-type]


@pytest.mark.anyio
async def test_action_dispatch(upstream: str) -> None:
    runtime = Runtime(manifest(upstream, pets_tool("action")))
    assert ok(await runtime.call("pets", {"action": "get", "id": 7}))["raw_path"] == "/echo/pets/7"
    assert ok(await runtime.call("pets", {"action": "list"}))["raw_path"] == "/echo/pets"
    missing = err(await runtime.call("pets", {"action": "get"}))
    assert (missing["message"], missing["field"]) == ("action 'get' needs id", "id")
    unknown = err(await runtime.call("pets", {"action": "purge"}))  # a forbidden branch does not exist
    assert unknown["message"] == "action: unknown action 'purge' (one of: get, find, list)"
    assert err(await runtime.call("pets", {}))["field"] == "action"
    await runtime.aclose()


@pytest.mark.anyio
async def test_presence_dispatch(upstream: str) -> None:
    runtime = Runtime(manifest(upstream, pets_tool("presence")))
    assert ok(await runtime.call("pets", {"id": 3}))["raw_path"] == "/echo/pets/3"
    assert ok(await runtime.call("pets", {"name": "rex"}))["query"] == "name=rex"
    assert ok(await runtime.call("pets", {}))["raw_path"] == "/echo/pets"
    assert ok(await runtime.call("pets", {"id": None, "name": "x"}))["query"] == "name=x"
    await runtime.aclose()


def chain_tool(second_path: str = "/echo/step2/{method}") -> ToolSpec:
    first = Step(
        id="first",
        operation=op("POST", "/echo/step1", body=BodySpec(media_type="application/json", properties={"name": "name"})),
    )
    second = Step(
        id="second",
        operation=op(
            "GET",
            second_path,
            ParamSpec(name="method", location="path", expr="steps.first.method", required=True),
            ParamSpec(name="len", location="query", expr="length(steps.first.body)"),
        ),
    )
    third = Step(id="third", when="inputs.extra", operation=op("GET", "/echo/step3"))
    branch = Branch(
        key="default",
        steps=[first, second, third],
        output="{first: steps.first.raw_path, second: steps.second.raw_path, query: steps.second.query, "
        "third: steps.third.raw_path}",
    )
    schema = {"type": "object", "properties": {"name": {"type": "string"}, "extra": {"type": "boolean"}}}
    return ToolSpec(name="chain", description="a chain", input_schema=schema, branches=[branch])


@pytest.mark.anyio
async def test_chain_runs_steps_with_expressions_and_conditions(upstream: str) -> None:
    runtime = Runtime(manifest(upstream, chain_tool()))
    result = await runtime.call("chain", {"name": "rex"})
    assert ok(result) == {"first": "/echo/step1", "second": "/echo/step2/POST", "query": "len=14", "third": None}
    assert result.meta is not None
    assert [r["step"] for r in result.meta["openapi2mcp/requests"]] == ["first", "second"]
    both = ok(await runtime.call("chain", {"name": "rex", "extra": True}))
    assert both["third"] == "/echo/step3"
    await runtime.aclose()


@pytest.mark.anyio
async def test_chain_step_failure_names_the_step(upstream: str) -> None:
    runtime = Runtime(manifest(upstream, chain_tool("/status/404")))
    body = err(await runtime.call("chain", {"name": "rex"}))
    assert (body["code"], body["step"], body["status"]) == ("NOT_FOUND", "second", 404)
    await runtime.aclose()


@pytest.mark.anyio
async def test_a_dry_run_reports_the_reads_it_sent(upstream: str) -> None:
    """A dry run of a chain runs its read step (the write needs it) and says so in `_meta`, like any result."""
    look = Step(id="look", operation=op("GET", "/echo/look"))
    change = Step(id="change", operation=op("POST", "/echo/change/{method}", ParamSpec(
        name="method", location="path", expr="steps.look.method", required=True)))
    branch = Branch(key="default", steps=[look, change], dry_run=DryRunSpec(), risk="medium")
    schema = {"type": "object", "properties": {"dryRun": {"type": "boolean"}}}
    runtime = Runtime(manifest(upstream, ToolSpec(name="change", description="d", input_schema=schema,
                                                  branches=[branch])))
    result = await runtime.call("change", {"dryRun": True})
    await runtime.aclose()
    body = ok(result)
    assert [(r["step"], r["method"], r["url"].rsplit("/echo", 1)[1]) for r in body["requests"]] == [
        ("look", "GET", "/look"), ("change", "POST", "/change/GET")]
    assert result.meta is not None
    sent = result.meta["openapi2mcp/requests"]
    assert [(r["operation"], r["step"], r["status"]) for r in sent] == [("GET /echo/look", "look", 200)]


# ============================================================================ results


@pytest.mark.anyio
async def test_result_kinds(upstream: str) -> None:
    wrapped = {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}
    m = manifest(
        upstream,
        tool("png", op("GET", "/png")),
        tool("pdf", op("GET", "/pdf")),
        tool("text", op("GET", "/raw", fixed("body", "hello"), fixed("ct", "text/plain"))),
        tool("text_wrapped", op("GET", "/raw", fixed("body", "hello"), fixed("ct", "text/csv")), output_schema=wrapped),
        tool("empty", op("DELETE", "/empty")),
        tool("bad_json", op("GET", "/raw", fixed("body", "{nope"))),
        tool("png_but_json", op("GET", "/png"), output_schema={"type": "object"},
             response=ResponseSpec(validate_="strict")),
        tool("png_but_json_tolerant", op("GET", "/png"), output_schema={"type": "object"}),
    )
    runtime = Runtime(m)
    image = await runtime.call("png", {})
    assert isinstance(image.content[0], types.ImageContent)
    assert image.content[0].mime_type == "image/png"
    assert image.structured_content is None
    pdf = await runtime.call("pdf", {})
    assert isinstance(pdf.content[0], types.EmbeddedResource)
    assert isinstance(pdf.content[0].resource, types.BlobResourceContents)
    assert base64.b64decode(pdf.content[0].resource.blob).startswith(b"%PDF")
    assert pdf.content[0].resource.uri.endswith("/pdf")
    text = await runtime.call("text", {})
    assert (text.structured_content, text.is_error) == (None, False)
    assert text.content[0] == types.TextContent(text="hello")
    assert ok(await runtime.call("text_wrapped", {})) == {"text": "hello"}
    assert ok(await runtime.call("empty", {})) == {"status": 204}
    assert err(await runtime.call("bad_json", {}))["code"] == "UPSTREAM_INVALID_RESPONSE"
    assert err(await runtime.call("png_but_json", {}))["code"] == "UPSTREAM_INVALID_RESPONSE"
    drifted = await runtime.call("png_but_json_tolerant", {})  # tolerant: the image, and an empty object
    assert isinstance(drifted.content[0], types.ImageContent) and drifted.structured_content == {}
    assert drifted.meta is not None
    assert drifted.meta["openapi2mcp/repairs"] == [
        {"path": "", "expected": "JSON", "got": "image/png", "action": "removed"}]
    await runtime.aclose()


@pytest.mark.anyio
async def test_binary_over_the_cap_is_a_clear_error(upstream: str) -> None:
    runtime = Runtime(manifest(upstream, tool("pdf", op("GET", "/pdf"))), RuntimeOptions(max_binary_bytes=100))
    body = err(await runtime.call("pdf", {}))
    assert body["code"] == "RESPONSE_TOO_LARGE"
    assert "application/pdf" in body["message"]
    await runtime.aclose()


@pytest.mark.anyio
async def test_internal_errors_never_leak(upstream: str, caplog: pytest.LogCaptureFixture) -> None:
    runtime = Runtime(manifest(upstream, tool("t", op("GET", "/echo"))), RuntimeOptions(environ={}))

    def boom(body: Any) -> Any:
        raise RuntimeError("internal detail that must stay on the server")

    runtime.tools["t"].shaper.json = boom  # type: ignore[method-assign]
    body = err(await runtime.call("t", {}))
    assert body["code"] == "INTERNAL_ERROR"
    assert body["message"] == f"internal error; see the server log, traceId {body['traceId']}"
    assert "internal detail" in caplog.text
    assert body["traceId"] in caplog.text
    await runtime.aclose()


# ============================================================================ tools/list


def many_tools(base: str) -> Manifest:
    tools = [tool(f"t{i}", op("GET", f"/echo/{i}")) for i in range(5)]
    tools.insert(2, tool("secret_admin", op("DELETE", "/echo/all"), risk="forbidden"))
    return manifest(base, *tools)


@pytest.mark.anyio
async def test_pagination_order_and_forbidden_tools(upstream: str) -> None:
    runtime = Runtime(many_tools(upstream), RuntimeOptions(page_size=2))
    names, cursor, pages = [], None, 0
    while True:
        page = runtime.list_tools(cursor)
        names += [t.name for t in page.tools]
        pages += 1
        cursor = page.next_cursor
        if cursor is None:
            break
    assert (names, pages) == (["t0", "t1", "t2", "t3", "t4"], 3)
    for bad in ("garbage", base64.urlsafe_b64encode(b'{"o": 99, "m": "x"}').decode()):
        with pytest.raises(MCPError) as info:
            runtime.list_tools(bad)
        assert info.value.code == types.INVALID_PARAMS
    other = Runtime(manifest(upstream, tool("x", op("GET", "/echo")), tool("y", op("GET", "/echo"))),
                    RuntimeOptions(page_size=1))
    with pytest.raises(MCPError):
        runtime.list_tools(other.list_tools().next_cursor)  # a cursor of another manifest
    for name in ("secret_admin", "nope"):
        with pytest.raises(MCPError) as info:
            await runtime.call(name, {})
        assert (info.value.code, info.value.message) == (types.INVALID_PARAMS, f"Unknown tool: {name}")


@pytest.mark.anyio
async def test_a_cookie_an_upstream_sets_for_one_caller_never_reaches_another(upstream: str) -> None:
    """One upstream client serves every caller: a Set-Cookie in one caller's answer is not kept."""
    from openapi2mcp.runtime.access import Caller

    runtime = Runtime(manifest(upstream, tool("login", op("GET", "/login", q("who"))), tool("echo", op("GET", "/echo")),
                               tool("redirected", op("GET", "/redirect", fixed("to", "/login?who=bob")))))
    alice, bob = Caller("alice", frozenset(), all_scopes=True), Caller("bob", frozenset(), all_scopes=True)
    assert ok(await runtime.call("login", {"who": "alice"}, caller=alice)) == {"logged_in": "alice"}
    assert ok(await runtime.call("redirected", {}, caller=alice)) == {"logged_in": "bob"}  # via httpx2's objects
    seen = ok(await runtime.call("echo", {}, caller=bob))
    assert "cookie" not in seen["headers"], seen["headers"]
    assert len(runtime.upstream.client.cookies.jar) == 0
    await runtime.aclose()


def test_an_unsealed_manifest_is_hashed_when_health_first_asks(upstream: str) -> None:
    """`serve SPEC` compiles without the content hash (compile_manifest(seal=False)); /healthz still shows it."""
    from openapi2mcp.compiler import compile_manifest
    from openapi2mcp.loader import load_spec
    from openapi2mcp.overlay import read_overlay

    sealed = compile_example("petstore").manifest
    example = ROOT / "examples" / "petstore"
    unsealed = compile_manifest(load_spec(str(example / "openapi.yaml")), [read_overlay(example / "overlay.yaml")],
                                seal=False).manifest
    assert unsealed.content_hash == "" and unsealed == sealed.model_copy(update={"content_hash": ""})
    runtime = Runtime(unsealed, RuntimeOptions(environ={"OPENAPI2MCP_BASE_URL": upstream}, page_size=3))
    assert runtime.health()["manifest"] == sealed.content_hash
    # cursors name the list by what it holds: one from the sealed Manifest's server pages the unsealed one's
    other = Runtime(sealed, RuntimeOptions(environ={"OPENAPI2MCP_BASE_URL": upstream}, page_size=3))
    cursor = other.list_tools().next_cursor
    assert [t.name for t in runtime.list_tools(cursor).tools] == [t.name for t in other.list_tools(cursor).tools]


def test_definitions_are_built_when_first_listed(upstream: str) -> None:
    """A big API starts without building every tool's definition: each page builds its own, once."""
    runtime = Runtime(many_tools(upstream), RuntimeOptions(page_size=2))
    built = lambda: [name for name, t in runtime.tools.items() if "definition" in vars(t)]  # noqa: E731
    assert built() == []
    first = runtime.list_tools()
    assert built() == ["t0", "t1"]
    assert runtime.list_tools().tools[0] is first.tools[0]  # built once
    runtime.list_tools(first.next_cursor)
    assert built() == ["t0", "t1", "t2", "t3"]
    runtime.check_tools()  # --check: all of them now
    assert built() == ["t0", "t1", "t2", "t3", "t4"]
    checked = Runtime(many_tools(upstream), RuntimeOptions(check_schemas=True))  # a hand-built Manifest, checked
    assert all("definition" in vars(t) for t in checked.tools.values())


def test_bad_manifests_are_config_errors(upstream: str) -> None:
    bad_hint = tool("t", op("GET", "/echo"), annotations={"readOnlyHint": "maybe"})
    with pytest.raises(ConfigError, match=r"(?s)tool t: invalid tool definition: .*readOnlyHint"):
        Runtime(manifest(upstream, bad_hint))  # at start-up, though definitions are built when listed
    bad_schema = tool("t", op("GET", "/echo"), input_schema={"type": "nonsense"})
    with pytest.raises(ConfigError, match="tool t: invalid JSON Schema"):
        # compiled manifests skip this check
        Runtime(manifest(upstream, bad_schema), RuntimeOptions(check_schemas=True))
    bad_expr = tool("t", op("GET", "/echo"), response=ResponseSpec(select="items[?"))
    with pytest.raises(ConfigError, match="tool t: invalid JMESPath"):
        Runtime(manifest(upstream, bad_expr))
    with pytest.raises(ConfigError, match="allowed_hosts"):
        http_app(Runtime(manifest(upstream, tool("t", op("GET", "/echo")))), HttpOptions(host="0.0.0.0"))


@pytest.mark.anyio
async def test_pattern_properties_are_not_unknown_arguments(upstream: str) -> None:
    schema = {
        "type": "object",
        "properties": {"a": {}},
        "patternProperties": {"^x-": {"type": "string"}},
        "additionalProperties": False,
    }
    runtime = Runtime(manifest(upstream, tool("t", op("GET", "/echo"), input_schema=schema)))
    assert not (await runtime.call("t", {"a": 1, "x-tag": "v"})).is_error
    body = err(await runtime.call("t", {"a": 1, "x-tag": 2, "b": 1}))
    assert body["message"] == "b: unknown argument (valid: a); x-tag: expected string, got integer"
    body = err(await runtime.call("t", {"a": 1, "": 1}))  # a name that does not show is quoted, and named
    assert (body["message"], body["field"]) == ("unknown argument '' (valid: a)", "")
    await runtime.aclose()


def test_transport_security_defaults() -> None:
    loopback = transport_security("127.0.0.1", None, None)
    assert loopback.enable_dns_rebinding_protection
    assert "localhost:*" in loopback.allowed_hosts
    assert "http://localhost:*" in loopback.allowed_origins
    public = transport_security("0.0.0.0", ["mcp.example.com"], None)
    assert public.allowed_hosts == ["mcp.example.com", "mcp.example.com:*"]
    assert "https://mcp.example.com" in public.allowed_origins
    assert transport_security("0.0.0.0", ["mcp.example.com:8443"], ["https://app.example.com"]).allowed_origins == [
        "https://app.example.com"
    ]
    assert not transport_security("0.0.0.0", ["*"], None).enable_dns_rebinding_protection
    with pytest.raises(ConfigError, match="allowed_hosts"):
        transport_security("10.0.0.5", None, None)


# ============================================================================ real MCP clients

PET_SCHEMA = {
    "type": "object",
    "properties": {"id": {"type": "integer"}, "name": {"type": "string"}},
    "required": ["id", "name"],
}


def mcp_manifest(base: str) -> Manifest:
    good = json.dumps({"id": 7, "name": "Rex"})
    lying = json.dumps({"id": "seven", "name": "Rex"})
    return manifest(
        base,
        tool("get_pet", op("GET", "/raw", fixed("body", good)), output_schema=PET_SCHEMA),
        tool("get_pet_lying", op("GET", "/raw", fixed("body", lying)), output_schema=PET_SCHEMA,
             response=ResponseSpec(validate_="strict")),
        tool("get_pet_drifting", op("GET", "/raw", fixed("body", lying)), output_schema=tolerant(PET_SCHEMA)),
        tool("missing_pet", op("GET", "/status/404"), output_schema=PET_SCHEMA),
        tool(
            "list_pets",
            op("GET", "/items", q("n")),
            input_schema={"type": "object", "properties": {"n": {"type": "integer", "maximum": 100}}},
            output_schema={"type": "object", "properties": {"pets": {"type": "array"}}, "required": ["pets"]},
            response=ResponseSpec(select="items", wrap="pets", max_items=3),
        ),
        tool("whoami", op("GET", "/echo/me")),
        tool("admin_wipe", op("DELETE", "/echo"), risk="forbidden"),
        auth=AuthSpec(type="bearer", value="${PET_TOKEN}"),
    )


async def exercise(client: Client, protocol: str) -> None:
    """What every transport must show a client."""
    assert client.protocol_version == protocol
    names, cursor = [], None
    while True:
        page = await client.list_tools(cursor=cursor)
        names += [t.name for t in page.tools]
        cursor = page.next_cursor
        if cursor is None:
            break
    assert names == ["get_pet", "get_pet_lying", "get_pet_drifting", "missing_pet", "list_pets", "whoami"]

    pet = await client.call_tool("get_pet", {})  # the SDK client validates against outputSchema
    assert (pet.is_error, pet.structured_content) == (False, {"id": 7, "name": "Rex"})
    lying = err(await client.call_tool("get_pet_lying", {}))  # must not crash the client
    assert lying["code"] == "UPSTREAM_INVALID_RESPONSE"
    assert "at id: expected integer, got string" in lying["message"]
    for _ in range(2):  # logged once (test_stdio_client), counted each time (health)
        drifting = await client.call_tool("get_pet_drifting", {})  # tolerant: repaired, the SDK validated it
    assert (drifting.is_error, drifting.structured_content) == (False, {"id": None, "name": "Rex"})
    assert json.loads(drifting.content[0].text) == {"id": "seven", "name": "Rex"}  # as the upstream sent it
    assert drifting.meta is not None
    assert drifting.meta["openapi2mcp/repairs"] == [
        {"path": "id", "expected": "integer", "got": "string", "action": "null"}]
    assert err(await client.call_tool("missing_pet", {}))["code"] == "NOT_FOUND"
    pets = await client.call_tool("list_pets", {"n": 10})
    assert len(pets.structured_content["pets"]) == 3
    assert pets.meta is not None
    assert pets.meta["openapi2mcp/truncated"][0]["total"] == 10
    assert err(await client.call_tool("list_pets", {"n": 500}))["field"] == "n"
    me = await client.call_tool("whoami", {})
    assert CANARY not in me.model_dump_json(by_alias=True)
    assert me.structured_content["headers"]["authorization"] == "Bearer ***"
    for name in ("admin_wipe", "nope"):
        with pytest.raises(MCPError) as info:
            await client.call_tool(name, {})
        assert info.value.code == types.INVALID_PARAMS
    with pytest.raises(MCPError) as info:
        await client.list_tools(cursor="not-a-cursor")
    assert info.value.code == types.INVALID_PARAMS


MODERN = "2026-07-28"
LEGACY = "2025-11-25"


@pytest.mark.anyio
@pytest.mark.parametrize(("mode", "protocol"), [("legacy", LEGACY), ("auto", MODERN)])
async def test_in_process_client(upstream: str, mode: str, protocol: str) -> None:
    runtime = Runtime(mcp_manifest(upstream), RuntimeOptions(environ={"PET_TOKEN": CANARY}, page_size=2))
    async with Client(runtime.build_server(), mode=mode) as client:  # type: ignore[arg-type]
        await exercise(client, protocol)
    await runtime.aclose()


STDIO_SERVER = (
    "import functools, sys, anyio\n"
    "from openapi2mcp.manifest import Manifest\n"
    "from openapi2mcp.runtime import Runtime, RuntimeOptions, serve_stdio\n"
    "runtime = Runtime(Manifest.read(sys.argv[1]), RuntimeOptions(page_size=2))\n"
    "anyio.run(functools.partial(serve_stdio, runtime, log_level='DEBUG'))\n"
)


@pytest.mark.anyio
@pytest.mark.parametrize(("mode", "protocol"), [("legacy", LEGACY), ("auto", MODERN)])
async def test_stdio_client(upstream: str, tmp_path: Path, mode: str, protocol: str) -> None:
    path = tmp_path / "manifest.json"
    path.write_text(mcp_manifest(upstream).to_json())
    errlog = (tmp_path / "stderr.log").open("w")
    params = StdioServerParameters(
        command=sys.executable,
        args=["-c", STDIO_SERVER, str(path)],
        env={"PYTHONPATH": str(ROOT), "PET_TOKEN": CANARY},
        cwd=str(ROOT),
    )
    from mcp.client.stdio import stdio_client

    async with Client(stdio_client(params, errlog=errlog), mode=mode) as client:  # type: ignore[arg-type]
        await exercise(client, protocol)
    errlog.close()
    logs = (tmp_path / "stderr.log").read_text()
    assert "tool=get_pet traceId=" in logs  # logs go to stderr, and stdout stayed protocol-only
    drift = "tool get_pet_drifting: the upstream's response does not match its documented schema at id"
    assert logs.count(drift) == 1, logs  # a warning the first time, not on every call
    assert CANARY not in logs


LAZY_START = (
    "import asyncio, json, sys\n"
    "from openapi2mcp.manifest import Manifest\n"
    "from openapi2mcp.runtime import Runtime, RuntimeOptions, serve_stdio\n"
    "env = {'OPENAPI2MCP_BASE_URL': 'http://127.0.0.1:9'}\n"
    "runtime = Runtime(Manifest.read(sys.argv[1]), RuntimeOptions(environ=env, require_secrets=False))\n"
    "listed = runtime.list_tools()\n"
    "before = sorted({m.split('.')[0] for m in sys.modules} & {'jsonschema', 'difflib', 'prance'})\n"
    "result = asyncio.run(runtime.call('pets_get', {'petId': {'not': 'an id'}}))\n"
    "print(json.dumps({'tools': len(listed.tools), 'before': before, 'after': 'jsonschema' in sys.modules,\n"
    "                  'error': result.is_error, 'text': result.content[0].text}))\n"
)


def test_start_up_loads_no_validator_until_a_call_needs_one(tmp_path: Path) -> None:
    """jsonschema (and its format checkers) load with the first call, not to list tools; the call is still checked."""
    path = tmp_path / "manifest.json"
    path.write_text(compile_example("petstore").manifest.to_json())
    out = subprocess.run([sys.executable, "-c", LAZY_START, str(path)], capture_output=True, text=True, check=True,
                         env={**os.environ, "PYTHONPATH": str(ROOT)}, cwd=str(ROOT), timeout=120)
    report = json.loads(out.stdout)
    assert report["tools"] > 0 and report["before"] == []
    assert report["after"] is True and report["error"] is True  # the validator ran on the call
    assert "ARGUMENT_INVALID" in report["text"] and "petId" in report["text"]


@pytest.mark.anyio
@pytest.mark.parametrize("stateless", [False, True])
async def test_streamable_http_both_eras(upstream: str, stateless: bool) -> None:
    m = mcp_manifest(upstream)
    runtime = Runtime(m, RuntimeOptions(environ={"PET_TOKEN": CANARY}, page_size=2))
    app = http_app(runtime, HttpOptions(stateless=stateless))
    with serve_in_thread(app) as base:
        for mode, protocol in (("legacy", LEGACY), ("auto", MODERN)):
            async with Client(base + "/mcp", mode=mode) as client:  # type: ignore[arg-type]
                await exercise(client, protocol)
        async with httpx2.AsyncClient() as http:
            health = await http.get(base + "/healthz")
            # four calls of the drifting tool (two per era), one repaired value each: an operator sees it
            assert health.json() == {"status": "ok", "tools": 6, "manifest": m.content_hash,
                                     "repairs": {"get_pet_drifting": 4}}
            init = {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "initialize",
                "params": {
                    "protocolVersion": LEGACY,
                    "capabilities": {},
                    "clientInfo": {"name": "raw", "version": "0"},
                },
            }
            headers = {"Accept": "application/json, text/event-stream"}
            good = await http.post(base + "/mcp", json=init, headers=headers)
            assert good.status_code == 200
            assert good.headers["content-type"].startswith("application/json")  # JSON responses by default
            rebinding = await http.post(base + "/mcp", json=init, headers={**headers, "Host": "evil.example"})
            assert rebinding.status_code == 421
            foreign = await http.post(base + "/mcp", json=init, headers={**headers, "Origin": "http://evil.example"})
            assert foreign.status_code == 403


def test_serve_http_starts_and_shuts_down_gracefully(upstream: str, tmp_path: Path) -> None:
    path = tmp_path / "manifest.json"
    path.write_text(mcp_manifest(upstream).to_json())
    port = free_port()
    code = (
        "import functools, sys, anyio\n"
        "from openapi2mcp.manifest import Manifest\n"
        "from openapi2mcp.runtime import HttpOptions, Runtime, serve_http\n"
        "runtime = Runtime(Manifest.read(sys.argv[1]))\n"
        f"anyio.run(functools.partial(serve_http, runtime, HttpOptions(port={port}), log_level='info'))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PET_TOKEN": CANARY}
    proc = subprocess.Popen([sys.executable, "-c", code, str(path)], env=env, cwd=ROOT, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                health = httpx2.get(f"http://127.0.0.1:{port}/healthz", timeout=1)
                break
            except httpx2.TransportError:
                assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
                assert time.monotonic() < deadline
                time.sleep(0.1)
        assert health.json()["tools"] == 6
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(15) in (0, -signal.SIGTERM)  # uvicorn re-raises the signal after a clean exit
        assert proc.stderr is not None
        assert "Application shutdown complete" in proc.stderr.read().decode()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_missing_secret_exits_before_serving(tmp_path: Path) -> None:
    path = tmp_path / "manifest.json"
    path.write_text(mcp_manifest("http://127.0.0.1:9").to_json())
    env = {k: v for k, v in os.environ.items() if k != "PET_TOKEN"} | {"PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [sys.executable, "-c", STDIO_SERVER, str(path)], env=env, cwd=ROOT, capture_output=True, text=True, timeout=30
    )
    assert proc.returncode != 0
    assert proc.stdout == ""
    assert "ConfigError: environment variable PET_TOKEN is not set; upstream.auth.value needs it" in proc.stderr
