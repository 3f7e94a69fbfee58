"""Paging styles real servers use, and flat arguments for nested request bodies (issue 10, parts 3 and 4).

Against a real upstream on 127.0.0.1 (tests/paging_api: served under /v1, every request validated
by openapi-core, each test ends with `up.assert_no_violations()`):

* the next page's URL in a header (Kinto's `Next-Page`) or a body field (`"@odata.nextLink"`,
  `meta.next_url`, absolute or relative), followed only on the upstream's origin and base path;
* limit/offset and a nested page cursor in the JSON body of POST search endpoints (Prefect's
  `POST /flows/filter`);
* nested body fields as flat arguments (`name_like` -> `{"flows": {"name": {"like_": ...}}}`);
* `max_bytes` held on every page whatever the cursor's length.

The first part runs the Runtime in-process; the second runs `openapi2mcp serve` (stdio and
Streamable HTTP) with the SDK client, as a user would.
"""

from __future__ import annotations

import base64
import json
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import jsonschema
import mcp_types as types
import pytest
from anyio.from_thread import BlockingPortal

from examples import Upstream
from openapi2mcp.compiler import compile_manifest
from openapi2mcp.errors import InputError
from openapi2mcp.loader import load_spec
from openapi2mcp.manifest import CURSOR_MAX_LENGTH, Manifest, ResponseSpec
from openapi2mcp.overlay import read_overlay
from openapi2mcp.overlay.reading import parse_overlay
from openapi2mcp.result import error_of
from openapi2mcp.runtime import Runtime, RuntimeOptions
from openapi2mcp.runtime.paginate import check_link
from openapi2mcp.runtime.signing import Signer
from openapi2mcp.shape import Shaper, dumps
from tests.e2e_support import LEGACY, HttpServer, McpSession, portal
from tests.paging_api.app import FLOWS, RECORDS, SPEC_PATH, serve

OVERLAY = SPEC_PATH.with_name("overlay.yaml")
KEY = "paging-test-signing-key-0123456789abcdef"
TOKEN = "canary-paging-7d1f0c55"
ALL = [r["id"] for r in RECORDS]
PETSTORE = Path(__file__).resolve().parents[1] / "examples" / "petstore" / "openapi.yaml"


@pytest.fixture(scope="module")
def up() -> Iterator[Upstream]:
    with serve(auth=f"bearer:{TOKEN}") as server:
        yield server


@pytest.fixture(autouse=True)
def _clean(up: Upstream) -> Iterator[None]:
    up.reset()
    yield
    up.clear_faults()
    up.assert_no_violations()


@pytest.fixture(scope="module")
def manifest() -> Manifest:
    return compile_manifest(load_spec(str(SPEC_PATH)), [read_overlay(OVERLAY)]).manifest


def env(up: Upstream) -> dict[str, str]:
    return {"PAGING_API_URL": up.base_url, "PAGING_API_TOKEN": TOKEN, "OPENAPI2MCP_SIGNING_KEY": KEY}


@pytest.fixture
async def rt(manifest: Manifest, up: Upstream) -> Any:
    runtime = Runtime(manifest, RuntimeOptions(environ=env(up)))
    yield runtime
    await runtime.aclose()


UPSTREAM = "{base_url: '${PAGING_API_URL}/v1', auth: {type: bearer, value: '${PAGING_API_TOKEN:-}'}}"


def compile_text(text: str, spec: Path = SPEC_PATH, upstream: str = UPSTREAM) -> Manifest:
    overlay = f"openapi2mcp: 1\nupstream: {upstream}\n" + textwrap.dedent(text)
    return compile_manifest(load_spec(str(spec)), [parse_overlay(overlay, "paging.yaml")]).manifest


def compile_error(text: str, spec: Path = SPEC_PATH) -> str:
    with pytest.raises(InputError) as info:
        compile_text(text, spec)
    return str(info.value)


def ok(result: types.CallToolResult) -> dict[str, Any]:
    assert not result.is_error, result.content
    body: dict[str, Any] = result.structured_content
    return body


def err(result: types.CallToolResult) -> dict[str, Any]:
    assert result.is_error, result.structured_content
    body = error_of(result)
    assert body is not None
    return body


Call = Callable[[str, dict[str, Any]], types.CallToolResult]


def pages(call: Call, tool: str, limit: int, **arguments: Any) -> list[dict[str, Any]]:
    """Follow next_cursor to the end; every page's structured content, in order."""
    out: list[dict[str, Any]] = []
    cursor = None
    while True:
        args = {**arguments, "limit": limit} | ({"cursor": cursor} if cursor else {})
        page = ok(call(tool, args))
        out.append(page)
        assert page["has_more"] is (page["next_cursor"] is not None)
        cursor = page["next_cursor"]
        if cursor is None:
            return out
        assert len(out) < 60, "the listing does not end"


def ids(listing: list[dict[str, Any]]) -> list[str]:
    return [item["id"] for page in listing for item in page["items"]]


async def apages(runtime: Runtime, tool: str, limit: int, **arguments: Any) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    cursor = None
    while True:
        args = {**arguments, "limit": limit} | ({"cursor": cursor} if cursor else {})
        page = ok(await runtime.call(tool, args))
        out.append(page)
        cursor = page["next_cursor"]
        if cursor is None:
            return out
        assert len(out) < 60, "the listing does not end"


def tamper(cursor: str, **changes: Any) -> str:
    """The cursor with its payload changed and the old signature kept."""
    head, _, mac = cursor.partition(".")
    data = json.loads(base64.urlsafe_b64decode(head + "=" * (-len(head) % 4)))
    data["d"].update(changes)
    forged = base64.urlsafe_b64encode(json.dumps(data).encode()).decode().rstrip("=")
    return f"{forged}.{mac}"


def payload(cursor: str) -> dict[str, Any]:
    head = cursor.partition(".")[0]
    data: dict[str, Any] = json.loads(base64.urlsafe_b64decode(head + "=" * (-len(head) % 4)))
    return data


# ============================================================================ next-page URLs (in-process)


@pytest.mark.anyio
@pytest.mark.parametrize("limit", [2, 5, 7, 20])
@pytest.mark.parametrize(("tool", "arguments"), [
    ("records_list", {}),                      # Next-Page header, absolute URL
    ("records_odata", {}),                     # "@odata.nextLink" in the body
    ("records_relative", {"form": "absolute"}),  # meta.next_url ...
    ("records_relative", {"form": "path"}),    # ... /v1/relative/records?page=2
    ("records_relative", {"form": "query"}),   # ... ?page=2
    ("records_relative", {"form": "segment"}),  # ... records?page=2
])
async def test_next_url_styles_return_every_item_exactly_once(
    rt: Runtime, up: Upstream, tool: str, arguments: dict[str, Any], limit: int
) -> None:
    listing = await apages(rt, tool, limit, **arguments)
    assert ids(listing) == ALL
    assert len(listing) >= 3
    sent = up.requests()
    assert all(r["headers"].get("authorization") == f"Bearer {TOKEN}" for r in sent)  # auth on followed URLs
    assert all(r["headers"].get("x-tenant") == "acme" for r in sent)  # and the fixed headers


@pytest.mark.anyio
async def test_a_followed_url_keeps_the_filters_and_carries_the_paging_position(rt: Runtime, up: Upstream) -> None:
    opened = [r["id"] for r in RECORDS if r["status"] == "open"]
    assert ids(await apages(rt, "records_list", 5, status="open")) == opened
    queries = [r["query"] for r in up.requests("listRecords")]
    assert queries[0] == "status=open&_limit=5"
    assert all(q.startswith("_limit=5&_token=") and q.endswith("&status=open") for q in queries[1:])
    # the cursor holds the next page's path and query only: the origin is always the upstream's
    page = ok(await rt.call("records_list", {"limit": 5}))
    assert payload(page["next_cursor"])["d"]["a"].startswith("/v1/records?_limit=5&_token=")


@pytest.mark.anyio
async def test_total_and_any_jmespath_for_the_next_url(rt: Runtime) -> None:
    page = ok(await rt.call("records_odata", {"limit": 3}))
    assert page["total"] == len(RECORDS) and [i["id"] for i in page["items"]] == ALL[:3]


@pytest.mark.anyio
@pytest.mark.parametrize(("where", "message"), [
    ("http://evil.example/v1/records?_limit=5", "points the next page to http://evil.example, which is not the API"),
    ("https://{host}/v1/records?_limit=5", "points the next page to https://127.0.0.1"),
    ("http://{host}/records?_limit=5", "points the next page to a path outside the API (/records)"),
    ("http://{host}/v1/../__admin/state", "a path outside the API (/v1/../__admin/state)"),
    ("http://{host}/v1/%2e%2e/__admin/state", "a path outside the API (/v1/%2e%2e/__admin/state)"),
    ("/__admin/state", "a path outside the API (/__admin/state)"),
    ("//evil.example/v1/records", "http://evil.example, which is not the API"),
    ("http://user:pw@{host}/v1/records", "a URL with credentials"),
])
async def test_a_next_url_off_the_api_is_never_followed(rt: Runtime, up: Upstream, where: str, message: str) -> None:
    host = up.base_url.removeprefix("http://")
    up.fault(operation="listRecords", kind="status", status=200, body={"data": RECORDS[:2]},
             headers={"Next-Page": where.replace("{host}", host)})
    body = err(await rt.call("records_list", {"limit": 5}))
    assert body["code"] == "UPSTREAM_INVALID_RESPONSE"
    assert body["message"].startswith("the upstream's Next-Page header points the next page to ")
    assert message in body["message"] and body["message"].endswith("; not followed")
    assert len(up.requests()) == 1  # nothing else was asked


@pytest.mark.anyio
async def test_a_next_url_that_points_to_its_own_page_ends_with_an_error(rt: Runtime, up: Upstream) -> None:
    first = ok(await rt.call("records_list", {"limit": 5}))
    own = payload(first["next_cursor"])["d"]["a"]
    up.fault(operation="listRecords", kind="status", status=200, body={"data": RECORDS[5:10]},
             headers={"Next-Page": up.base_url + own})
    body = err(await rt.call("records_list", {"limit": 5, "cursor": first["next_cursor"]}))
    assert body["message"] == ("the upstream's Next-Page header points the next page to the page itself; "
                               "the listing cannot go on")


@pytest.mark.anyio
async def test_a_next_url_on_another_port_is_refused_and_that_server_never_asked(rt: Runtime, up: Upstream) -> None:
    with serve() as other:
        port = other.base_url.rsplit(":", 1)[1]
        up.fault(operation="listRecordsOData", kind="status", status=200,
                 body={"value": RECORDS[:2], "@odata.nextLink": f"{other.base_url}/v1/odata/records?$skiptoken=2"})
        body = err(await rt.call("records_odata", {}))
        assert body["code"] == "UPSTREAM_INVALID_RESPONSE"
        assert body["message"] == (
            "the upstream's next-page field '\"@odata.nextLink\"' points the next page to "
            f"http://127.0.0.1:{port}, which is not the API; not followed")
        assert other.requests() == []


@pytest.mark.anyio
async def test_forged_cursors_cannot_point_the_server_anywhere(rt: Runtime, up: Upstream) -> None:
    cursor = ok(await rt.call("records_list", {"limit": 5}))["next_cursor"]
    for forged in (
        tamper(cursor, a="http://evil.example/v1/records"),
        tamper(cursor, a="/__admin/state"),
        tamper(cursor, a="/v1/records?_limit=50"),
        Signer(b"another-key-" + b"x" * 30).sign("cursor", payload(cursor)["d"], ttl=600),
    ):
        body = err(await rt.call("records_list", {"limit": 5, "cursor": forged}))
        assert (body["code"], body["field"]) == ("CURSOR_INVALID", "cursor")
        assert "not a cursor this server issued, or it was changed" in body["message"]
    assert len(up.requests()) == 1


@pytest.mark.anyio
async def test_a_signed_cursor_is_checked_again_on_the_way_back(manifest: Manifest, up: Upstream) -> None:
    """Defence in depth: even a cursor signed with the server's key never leaves the API's base path."""
    signer = Signer(KEY.encode())
    runtime = Runtime(manifest, RuntimeOptions(environ=env(up), signer=signer))
    try:
        good = ok(await runtime.call("records_list", {"limit": 5}))["next_cursor"]
        data = payload(good)["d"]
        for at in ("/__admin/state", "http://evil.example/v1/records", "/v1/%2E%2E/__admin/state"):
            evil = signer.sign("cursor", {**data, "a": at}, ttl=600)
            body = err(await runtime.call("records_list", {"limit": 5, "cursor": evil}))
            assert body["code"] == "UPSTREAM_INVALID_RESPONSE" and "not followed" in body["message"]
        assert len(up.requests()) == 1
    finally:
        await runtime.aclose()


@pytest.mark.anyio
async def test_an_api_key_in_the_next_url_never_reaches_the_cursor(up: Upstream) -> None:
    secret = "query-key-SECRET-0042"
    m = compile_text("""\
        tools:
          - name: records_list
            operation: listRecords
            params: {pad: {hidden: true}, detail: {hidden: true}}
            pagination: {style: next_url, header: Next-Page, size_param: _limit, items: data, page_size: 5}
        """, upstream="{base_url: '${PAGING_API_URL}/v1', auth: {type: query, name: api_key, value: '${KEY}'}}")
    runtime = Runtime(m, RuntimeOptions(environ={**env(up), "KEY": secret}))
    up.set_auth(f"query:api_key:{secret}")
    up.fault(operation="listRecords", kind="status", status=200, body={"data": RECORDS[:5]},
             headers={"Next-Page": f"{up.base_url}/v1/records?_limit=5&api_key={secret}&_token=eyJvIjo1fQ%3D%3D"})
    try:
        first = ok(await runtime.call("records_list", {}))
        assert secret not in json.dumps(payload(first["next_cursor"]))
        second = ok(await runtime.call("records_list", {"cursor": first["next_cursor"]}))
        assert [r["id"] for r in second["items"]] == ALL[5:10]
        assert up.last_request("listRecords")["query"].count("api_key=") == 1  # the server's own key, once
    finally:
        up.set_auth(f"bearer:{TOKEN}")
        await runtime.aclose()


@pytest.mark.anyio
async def test_a_credential_echoed_in_a_next_url_never_reaches_a_cursor(rt: Runtime, up: Upstream) -> None:
    up.fault(operation="listRecords", kind="status", status=200, body={"data": RECORDS[:5]}, times=2,
             headers={"Next-Page": f"{up.base_url}/v1/records?_limit=5&session={TOKEN}"})
    body = err(await rt.call("records_list", {}))
    assert body["code"] == "UPSTREAM_INVALID_RESPONSE"
    assert body["message"] == ("the upstream's next-page position holds a credential this server sends upstream "
                               "(it echoes the request); it cannot go into a cursor")
    assert TOKEN not in json.dumps(body)


@pytest.mark.anyio
async def test_a_cursor_style_that_meets_a_url_names_the_fix(up: Upstream) -> None:
    m = compile_text("""\
        tools:
          - name: records_list
            operation: listRecords
            params: {pad: {hidden: true}, detail: {hidden: true}}
            pagination: {style: header_cursor, header: Next-Page, cursor_param: _token, size_param: _limit,
                         items: data}
        """)
    runtime = Runtime(m, RuntimeOptions(environ=env(up) | {"PAGING_API_TOKEN": TOKEN}))
    try:
        body = err(await runtime.call("records_list", {}))
        assert body["code"] == "CONFIGURATION_ERROR"
        assert "Next-Page header holds the next page's URL, not a cursor" in body["message"]
        assert "`pagination: {style: next_url, header: Next-Page}`" in body["message"]
        assert len(up.requests()) == 1  # the URL was never sent back as a token
    finally:
        await runtime.aclose()


@pytest.mark.anyio
async def test_a_position_too_long_for_a_cursor_is_a_clear_error(up: Upstream) -> None:
    m = compile_text("""\
        tools:
          - name: records_huge
            operation: listRecords
            params: {pad: {value: 6000}, detail: {hidden: true}}
            pagination: {style: next_url, header: Next-Page, size_param: _limit, cursor_param: _token, items: data}
        """)
    runtime = Runtime(m, RuntimeOptions(environ=env(up)))
    try:
        body = err(await runtime.call("records_huge", {}))
        assert body["code"] == "UPSTREAM_INVALID_RESPONSE"
        assert "too long to carry in a cursor" in body["message"]
        assert f"at most {CURSOR_MAX_LENGTH}" in body["message"]
    finally:
        await runtime.aclose()


# ============================================================================ paging in the request body


@pytest.mark.anyio
@pytest.mark.parametrize("limit", [1, 2, 3, 10])
async def test_offset_and_limit_in_the_body(rt: Runtime, up: Upstream, limit: int) -> None:
    listing = await apages(rt, "flows_list", limit)
    assert ids(listing) == [f["id"] for f in sorted(FLOWS, key=lambda f: f["name"])]
    assert len(listing) >= 3
    bodies = [json.loads(r["body"]) for r in up.requests("filterFlows")]
    assert bodies[0] == {"flows": {"operator": "and_"}, "sort": "NAME_ASC", "offset": 0, "limit": 3}
    assert all(b["limit"] == 3 for b in bodies) and [b["offset"] for b in bodies] == sorted(b["offset"] for b in bodies)


@pytest.mark.anyio
@pytest.mark.parametrize("limit", [2, 5, 9])
async def test_a_nested_page_cursor_in_the_body(rt: Runtime, up: Upstream, limit: int) -> None:
    expected = [r["id"] for r in RECORDS if "beta" in r["title"]]
    listing = await apages(rt, "records_search", limit, text="BETA")
    assert ids(listing) == expected and len(listing) >= 3
    bodies = [json.loads(r["body"]) for r in up.requests("searchRecords")]
    assert bodies[0] == {"query": {"text": "BETA"}, "page": {"size": 5}}
    assert {b["page"]["size"] for b in bodies} == {5} and all(b["page"].get("after") for b in bodies[1:] if
                                                               b != bodies[0])


@pytest.mark.anyio
async def test_nested_arguments_build_the_nested_body(rt: Runtime, up: Upstream) -> None:
    page = ok(await rt.call("flows_list", {"name_like": "marvin", "tags": ["ai"], "sort": "NAME_DESC", "limit": 10}))
    assert [f["name"] for f in page["items"]] == ["sad-Marvin", "marvin-robot", "marvin"]
    assert json.loads(up.last_request("filterFlows")["body"]) == {
        "flows": {"operator": "and_", "name": {"like_": "marvin"}, "tags": {"all_": ["ai"]}},
        "sort": "NAME_DESC", "offset": 0, "limit": 3,
    }
    # null means "not given": the field is not sent
    ok(await rt.call("flows_list", {"name_like": None}))
    assert json.loads(up.last_request("filterFlows")["body"])["flows"] == {"operator": "and_"}
    # the nested field's own schema checks the argument before anything is sent
    before = len(up.requests())
    bad = err(await rt.call("flows_list", {"name_like": "x" * 101}))
    assert bad["code"] == "ARGUMENT_INVALID" and bad["field"] == "name_like"
    assert len(up.requests()) == before


@pytest.mark.anyio
async def test_a_container_named_in_params_is_merged_with_its_nested_arguments(up: Upstream) -> None:
    m = compile_text("""\
        tools:
          - name: flows_find
            operation: filterFlows
            params:
              flows: {description: A raw FlowFilter.}
              name_like: {rename: body.flows.name.like_}
        """)
    tool = m.tool("flows_find")
    assert tool is not None and {"flows", "name_like"} <= set(tool.input_schema["properties"])
    runtime = Runtime(m, RuntimeOptions(environ=env(up)))
    try:
        ok(await runtime.call("flows_find", {"flows": {"tags": {"all_": ["ai"]}}, "name_like": "robot"}))
        assert json.loads(up.last_request("filterFlows")["body"]) == {
            "flows": {"tags": {"all_": ["ai"]}, "name": {"like_": "robot"}}, "offset": 0, "sort": "NAME_ASC"}
        clash = err(await runtime.call("flows_find", {"flows": {"name": {"like_": "a"}}, "name_like": "b"}))
        assert clash["code"] == "ARGUMENT_INVALID" and clash["field"] == "name_like"
        assert clash["message"] == ("name_like and flows both set flows.name.like_ in the request body, to "
                                    "different values; give only one of them")
        ok(await runtime.call("flows_find", {"flows": {"name": None}, "name_like": "b"}))  # null: nothing there
        assert json.loads(up.last_request("filterFlows")["body"])["flows"] == {"name": {"like_": "b"}}
        wrong = err(await runtime.call("flows_find", {"flows": {"name": ["x"]}, "name_like": "b"}))
        assert (wrong["code"], wrong["field"]) == ("ARGUMENT_INVALID", "flows.name")  # named where it breaks
    finally:
        await runtime.aclose()


def test_nested_fields_never_overwrite_what_an_argument_gave() -> None:
    """Where a schema lets a container hold anything, the body builder still refuses to guess."""
    from openapi2mcp.errors import ToolFailure
    from openapi2mcp.manifest import BodyField, BodySpec
    from openapi2mcp.upstream.request import body_value

    spec = BodySpec(media_type="application/json", properties={"flows": "flows"},
                    fields=[BodyField(path=["flows", "name", "like_"], arg="name_like"),
                            BodyField(path=["flows", "operator"], value="and_")])
    given = {"flows": {"name": {"any_": ["a"]}}, "name_like": "b"}
    assert body_value(spec, given, lambda e: None) == {
        "flows": {"name": {"any_": ["a"], "like_": "b"}, "operator": "and_"}}
    assert given == {"flows": {"name": {"any_": ["a"]}}, "name_like": "b"}  # the arguments are not changed
    for flows, message in (
        ({"name": ["x"]}, "name_like goes into the request body at flows.name.like_, but flows sets flows.name to "
                          "a list, not an object; give only one of them"),
        ({"operator": "or_"}, "a fixed value and flows both set flows.operator in the request body, to different "
                              "values; give only one of them"),
    ):
        with pytest.raises(ToolFailure) as info:
            body_value(spec, {"flows": flows, "name_like": "b"}, lambda e: None)
        assert info.value.error.code == "ARGUMENT_INVALID" and info.value.error.message == message


@pytest.mark.anyio
async def test_body_paging_found_by_its_default_names(up: Upstream) -> None:
    """`style: offset` alone finds a body's top-level `offset` and `limit` (Prefect's names)."""
    m = compile_text("""\
        tools:
          - name: flows_all
            operation: filterFlows
            pagination: {style: offset, page_size: 4}
        """)
    tool = m.tool("flows_all")
    assert tool is not None and set(tool.input_schema["properties"]) == {"flows", "sort", "limit", "cursor"}
    runtime = Runtime(m, RuntimeOptions(environ=env(up)))
    try:
        assert len(ids(await apages(runtime, "flows_all", 4))) == len(FLOWS)
        assert json.loads(up.last_request("filterFlows")["body"]) == {"sort": "NAME_ASC", "offset": 12, "limit": 4}
    finally:
        await runtime.aclose()


# ============================================================================ max_bytes on every page


@pytest.mark.anyio
async def test_max_bytes_holds_on_every_page_with_long_cursors(rt: Runtime) -> None:
    listing, cursor = [], None
    while True:
        result = await rt.call("records_long", {"limit": 30} | ({"cursor": cursor} if cursor else {}))
        page = ok(result)
        text = result.content[0]
        assert isinstance(text, types.TextContent) and len(text.text.encode()) <= 4500, len(text.text.encode())
        listing.append(page)
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert ids(listing) == ALL
    assert max(len(p["next_cursor"] or "") for p in listing) > 2500  # the cursors really are long


def test_shaper_page_fits_any_max_bytes_whatever_the_cursor_lengths() -> None:
    """Many budgets, item sizes and cursor lengths: never over max_bytes, and the cut resumes exactly there."""
    items = [{"id": str(i), "text": "t" * (7 * i % 90)} for i in range(40)]
    for cursor_len in (0, 40, 700, 3000):
        def cursor_at(k: int, n: int = cursor_len) -> str | None:
            if k >= len(items):
                return None  # the last page: no `after`, yet a cut needs a long cursor
            return f"{k:04d}" + "c" * n
        for max_bytes in range(cursor_len + 300, cursor_len + 4000, 97):
            shaped = Shaper(ResponseSpec(max_bytes=max_bytes), None).page(items, 40, cursor_at)
            assert shaped.structured is not None
            assert len(shaped.text.encode()) <= max_bytes and shaped.text == dumps(shaped.structured)
            kept = shaped.structured["items"]
            assert kept == items[:len(kept)] and kept
            assert shaped.structured["next_cursor"] == cursor_at(len(kept))


# ============================================================================ compile time


def test_bad_body_paths_are_compile_errors_with_suggestions() -> None:
    msg = compile_error("""\
        tools:
          - name: flows_list
            operation: filterFlows
            params:
              name_like: {rename: body.flows.name.lik_}
              tags: {rename: body.flow.tags.all_}
              body.sort.order: {value: 1}
        """)
    assert ("paging.yaml:7:7 at tools[0](flows_list).params.name_like: operation 'filterFlows': "
            "body.flows.name.lik_: body.flows.name has no field 'lik_'; did you mean 'like_'?") in msg
    assert "hint: its fields: any_, like_" in msg
    assert "params.tags: operation 'filterFlows': body.flow: the request body has no field 'flow'; did you mean " \
           "'flows'?" in msg
    assert "body.sort.order: body.sort is string, not an object; it has no fields" in msg
    msg = compile_error("""\
        tools:
          - name: flows_list
            operation: filterFlows
            params: {a: {rename: body.flows..name}, b: {rename: 'body."flows'}, c: {rename: body.flows.color}}
        """)
    assert "params.a: operation 'filterFlows': 'body.flows..name' has an empty field name" in msg
    assert "params.b: operation 'filterFlows': 'body.\"flows': a quoted field name is not closed" in msg
    assert "params.c: operation 'filterFlows': body.flows.color: body.flows has no field 'color'" in msg
    assert "hint: its fields: name, operator, tags" in msg


@pytest.mark.parametrize(("pagination", "message"), [
    ("{style: offset, offset_param: body.ofset}",
     "pagination.offset_param: operation 'filterFlows': body.ofset: the request body has no field 'ofset'; "
     "did you mean 'offset'?"),
    ("{style: next_url}", "style next_url needs exactly one of `header`"),
    ("{style: next_url, header: Next-Page, next: links.next}", "style next_url needs exactly one of `header`"),
    ("{style: offset, header: Next-Page}", "`header` does not apply to pagination style 'offset'"),
    ("{style: body_cursor, cursor_param: body.page.after}",
     "pagination.cursor_param: operation 'filterFlows': body.page: the request body has no field 'page'"),
    ("{style: next_url, next: meta.next_url}", "`pagination.next` asks for field 'meta' of a array value"),
])
def test_bad_body_paging_is_a_compile_error(pagination: str, message: str) -> None:
    msg = compile_error(f"tools:\n  - name: flows\n    operation: filterFlows\n    pagination: {pagination}\n")
    assert message in msg, msg


def test_nested_fields_need_a_json_body_and_a_body() -> None:
    msg = compile_error("tools:\n  - name: t\n    operation: listRecords\n    params: {x: {rename: body.a.b}}\n")
    assert "operation 'listRecords': body.a.b: the operation takes no request body" in msg
    form = compile_error("tools:\n  - name: t\n    operation: searchPetsForm\n    params: {x: {rename: body.name.a}}\n",
                         PETSTORE)
    assert "body.name.a: a nested body field needs a JSON request body; this operation sends " \
           "application/x-www-form-urlencoded" in form


def test_nested_arguments_get_the_fields_schema_and_keep_old_manifests_unchanged(manifest: Manifest) -> None:
    tool = manifest.tool("flows_list")
    assert tool is not None
    props = tool.input_schema["properties"]
    assert set(props) == {"sort", "name_like", "tags", "limit", "cursor"}  # `flows` is no argument of its own
    assert props["name_like"]["anyOf"][0] == {"type": "string", "minLength": 1, "maxLength": 100}
    assert props["name_like"]["description"].startswith("A case-insensitive partial match")
    assert props["tags"]["description"] == "Only flows having all these tags."
    body = tool.branches[0].steps[0].operation.body
    assert body is not None and [(f.path, f.arg, f.value) for f in body.fields] == [
        (["flows", "name", "like_"], "name_like", None), (["flows", "tags", "all_"], "tags", None),
        (["flows", "operator"], None, "and_")]
    paging = tool.branches[0].pagination
    assert paging is not None and (paging.position_path, paging.size_path) == (["offset"], ["limit"])
    # quoted keys, and an overlay without the new features: no new key in its Manifest (same hash as before)
    quoted = compile_text('tools:\n  - name: t\n    operation: filterFlows\n'
                          '    params: {x: {rename: body."flows".name.any_}}\n').tool("t")
    assert quoted is not None and "x" in quoted.input_schema["properties"]
    plain = compile_manifest(load_spec(str(PETSTORE)), [read_overlay(PETSTORE.with_name("overlay-tasks.yaml"))])
    text = plain.manifest.to_json()
    assert '"fields"' not in text and '"position_path"' not in text and '"query": ' not in text


def test_paged_sentence_in_actions_and_variants(manifest: Manifest) -> None:
    for name in ("records_browse", "records_find"):
        tool = manifest.tool(name)
        assert tool is not None
        lines = [line for line in tool.description.splitlines() if line.startswith("- ")]
        assert len(lines) == 2 and all("Paged: returns up to `limit` items (default 5, at most 100)" in line
                                       for line in lines), tool.description


def test_check_link_rules() -> None:
    import httpx2

    base = httpx2.URL("https://api.example.com/v1")
    check_link("https://api.example.com:443/v1/items?page=2", base)
    check_link("https://API.example.com/v1", base)
    for bad in ("http://api.example.com/v1/items", "https://api.example.com:8443/v1/items",
                "https://api.example.com/v10/items", "https://api.example.com/v1/a/../../admin",
                "https://api.example.com/v1/%2E%2E/admin", "https://api.example.com/v1\\..\\admin",
                "https://u@api.example.com/v1/items", "https://api.example.com/v1/{id}"):
        with pytest.raises(Exception, match="not followed"):
            check_link(bad, base)


# ============================================================================ through `openapi2mcp serve`


@pytest.fixture(scope="module")
def loop() -> Iterator[BlockingPortal]:
    with portal() as p:
        yield p


@pytest.fixture(scope="module", params=["stdio-legacy", "http-modern"])
def session(request: pytest.FixtureRequest, loop: BlockingPortal, up: Upstream,
            tmp_path_factory: pytest.TempPathFactory) -> Iterator[McpSession]:
    logs = tmp_path_factory.mktemp("paging-logs")
    args = [str(SPEC_PATH), "--overlay", str(OVERLAY)]
    if request.param == "stdio-legacy":
        s = McpSession.stdio(loop, args, mode="legacy", label="stdio", log_dir=logs, env=env(up))
        assert s.protocol_version == LEGACY
        yield s
        s.close()
        return
    with HttpServer.start(args, log_dir=logs, env=env(up)) as server:
        s = McpSession.http(loop, server.url, mode="auto", label="http")
        yield s
        s.close()


def test_served_every_new_style_pages_through_everything_once(session: McpSession, up: Upstream) -> None:
    tools = {t.name: t for t in session.list_tools()}
    for name in ("records_list", "records_odata", "records_relative", "flows_list", "records_search"):
        assert "Paged: returns up to `limit` items" in (tools[name].description or "")
    for tool, arguments, expected in (
        ("records_list", {}, ALL),
        ("records_odata", {}, ALL),
        ("records_relative", {"form": "query"}, ALL),
        ("records_relative", {"form": "path"}, ALL),
        ("flows_list", {}, [f["id"] for f in sorted(FLOWS, key=lambda f: f["name"])]),
        ("records_search", {"status": "open"}, [r["id"] for r in RECORDS if r["status"] == "open"]),
        ("records_find", {}, ALL),
        ("records_browse", {"action": "search"}, ALL),
    ):
        listing = pages(session.call, tool, 4, **arguments)
        assert ids(listing) == expected, tool
        assert len(listing) > 2, tool
        schema = tools[tool].output_schema
        assert schema is not None
        for page in listing:
            jsonschema.validate(page, schema)


def test_served_nested_arguments_reach_the_upstream_nested(session: McpSession, up: Upstream) -> None:
    page = ok(session.call("flows_list", {"name_like": "etl", "tags": ["prod"], "limit": 10}))
    assert [f["name"] for f in page["items"]] == ["etl-daily", "etl-hourly", "etl-monthly"]
    assert json.loads(up.last_request("filterFlows")["body"]) == {
        "flows": {"operator": "and_", "name": {"like_": "etl"}, "tags": {"all_": ["prod"]}},
        "sort": "NAME_ASC", "offset": 0, "limit": 3}


def test_served_foreign_next_urls_and_forged_cursors_are_refused(session: McpSession, up: Upstream) -> None:
    with serve() as other:
        up.fault(operation="listRecords", kind="status", status=200, body={"data": RECORDS[:2]},
                 headers={"Next-Page": f"{other.base_url}/v1/records?_limit=5"})
        body = error_of(session.call("records_list", {}))
        assert body is not None and body["code"] == "UPSTREAM_INVALID_RESPONSE"
        assert body["message"] == (f"the upstream's Next-Page header points the next page to {other.base_url}, "
                                   "which is not the API; not followed")
        assert other.requests() == []
    cursor = ok(session.call("records_list", {}))["next_cursor"]
    before = len(up.requests())
    for forged in (tamper(cursor, a=f"{up.base_url}/__admin/state"), tamper(cursor, k=0, a=None), cursor + "x"):
        refused = error_of(session.call("records_list", {"cursor": forged}))
        assert refused is not None and (refused["code"], refused["field"]) == ("CURSOR_INVALID", "cursor")
    assert len(up.requests()) == before


def test_served_max_bytes_holds_on_every_page_with_long_cursors(session: McpSession) -> None:
    listing, cursor, longest = [], None, 0
    while True:
        result = session.call("records_long", {"limit": 30} | ({"cursor": cursor} if cursor else {}))
        page = ok(result)
        block = result.content[0]
        assert isinstance(block, types.TextContent) and len(block.text.encode()) <= 4500
        listing.append(page)
        cursor = page["next_cursor"]
        longest = max(longest, len(cursor or ""))
        if cursor is None:
            break
    assert ids(listing) == ALL and longest > 2500
