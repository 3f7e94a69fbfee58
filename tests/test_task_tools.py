"""Task-level tools (issue 4): actions, variants, chains, pagination, projection, units.

Everything runs against the real example pet store (`examples.Upstream`), which validates every
request against its spec; each test ends with `up.assert_no_violations()`.
"""

from __future__ import annotations

import base64
import json
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import mcp_types as types
import pytest
from mcp import Client

from examples import Upstream
from openapi2mcp.compiler import compile_manifest
from openapi2mcp.errors import InputError
from openapi2mcp.loader import load_spec
from openapi2mcp.manifest import Manifest
from openapi2mcp.overlay import read_overlay
from openapi2mcp.overlay.reading import parse_overlay
from openapi2mcp.result import error_of
from openapi2mcp.runtime import Runtime, RuntimeOptions
from openapi2mcp.runtime.signing import Signer, SigningKeyError, TokenError

ROOT = Path(__file__).resolve().parents[1]
SPEC = ROOT / "examples" / "petstore" / "openapi.yaml"
OVERLAY = ROOT / "examples" / "petstore" / "overlay-tasks.yaml"
KEY = "test-signing-key-0123456789-abcdefghijklmnop"
ALL_IDS = [str(i) for i in range(1, 13)]
AVAILABLE = ["1", "2", "5", "6", "9", "10", "12"]


@pytest.fixture(scope="module")
def up() -> Iterator[Upstream]:
    with Upstream.start("petstore") as server:
        yield server


@pytest.fixture(autouse=True)
def _clean(up: Upstream) -> Iterator[None]:
    up.reset()
    yield
    up.assert_no_violations()


@pytest.fixture(scope="module")
def manifest() -> Manifest:
    return compile_manifest(load_spec(str(SPEC)), [read_overlay(OVERLAY)]).manifest


def runtime_for(m: Manifest, up: Upstream, *, signer: Signer | None = None, key: str = KEY) -> Runtime:
    env = {"PETSTORE_URL": up.base_url, "OPENAPI2MCP_SIGNING_KEY": key}
    return Runtime(m, RuntimeOptions(environ=env, signer=signer))


@pytest.fixture
async def runtime(manifest: Manifest, up: Upstream) -> Any:
    rt = runtime_for(manifest, up)
    yield rt
    await rt.aclose()


def compile_overlay(text: str) -> Manifest:
    overlay = "openapi2mcp: 1\nupstream: {base_url: '${PETSTORE_URL}'}\n" + textwrap.dedent(text)
    return compile_manifest(load_spec(str(SPEC)), [parse_overlay(overlay, "tasks.yaml")]).manifest


def compile_error(text: str) -> str:
    with pytest.raises(InputError) as info:
        compile_overlay(text)
    return str(info.value)


def ok(result: types.CallToolResult) -> dict[str, Any]:
    assert not result.is_error, result.structured_content
    body: dict[str, Any] = result.structured_content
    return body


def err(result: types.CallToolResult) -> dict[str, Any]:
    assert result.is_error, result.structured_content
    body = error_of(result)
    assert body is not None
    return body


async def list_all(rt: Runtime, tool: str, limit: int, **arguments: Any) -> tuple[list[str], int]:
    """Follow next_cursor to the end; returns the ids in order and the number of calls."""
    ids: list[str] = []
    cursor, calls = None, 0
    while True:
        args = {**arguments, "limit": limit} | ({"cursor": cursor} if cursor else {})
        page = ok(await rt.call(tool, args))
        calls += 1
        ids += [item["id"] for item in page["items"]]
        assert page["has_more"] is (page["next_cursor"] is not None)
        cursor = page["next_cursor"]
        if cursor is None:
            return ids, calls
        assert calls < 40, "the listing does not end"


# ============================================================================ pagination


@pytest.mark.anyio
@pytest.mark.parametrize("tool", ["pages_offset", "pages_body_cursor", "pages_header_cursor", "pages_link"])
@pytest.mark.parametrize("limit", [1, 3, 5, 12])
async def test_every_paging_style_returns_every_item_exactly_once(runtime: Runtime, tool: str, limit: int) -> None:
    ids, calls = await list_all(runtime, tool, limit)
    assert ids == ALL_IDS
    assert calls >= -(-12 // limit)


@pytest.mark.anyio
async def test_page_style_with_filter_and_total(runtime: Runtime, up: Upstream) -> None:
    ids, _ = await list_all(runtime, "pets_find", 2, status="available")
    assert ids == AVAILABLE
    first = ok(await runtime.call("pets_find", {"status": "available", "limit": 2}))
    assert first["total"] == len(AVAILABLE)
    # the upstream page size is the overlay's (5); `limit` only says how many come back
    query = sorted(up.last_request("listPets")["query"].split("&"))
    assert query == ["page=1", "per_page=5", "sort=id", "status=available"]


@pytest.mark.anyio
async def test_auto_follow_stops_at_the_budget(runtime: Runtime, up: Upstream) -> None:
    page = ok(await runtime.call("pages_link", {"limit": 20}))  # page_size 3, max_pages 5
    assert [p["id"] for p in page["items"]] == ALL_IDS
    assert up.count("listPetsLinked") == 4 and page["has_more"] is False
    up.reset()
    tight = compile_overlay("""\
        tools:
          - name: pages_link
            operation: listPetsLinked
            pagination: {style: link, page_size: 2, auto: true, max_pages: 2, max_items: 20}
        """)
    rt = runtime_for(tight, up)
    page = ok(await rt.call("pages_link", {"limit": 20}))
    assert len(page["items"]) == 4 and page["has_more"] is True and up.count("listPetsLinked") == 2
    rest = ok(await rt.call("pages_link", {"limit": 20, "cursor": page["next_cursor"]}))
    assert [p["id"] for p in rest["items"]] == ALL_IDS[4:8]
    await rt.aclose()


@pytest.mark.anyio
async def test_a_result_cut_to_max_bytes_resumes_at_the_first_item_left_out(up: Upstream) -> None:
    m = compile_overlay("""\
        tools:
          - name: pets_all
            operation: listPetsOffset
            pagination: {style: offset, total: total, page_size: 12}
            response: {max_bytes: 700}
        """)
    rt = runtime_for(m, up)
    first = await rt.call("pets_all", {"limit": 12})
    body = ok(first)
    assert 0 < len(body["items"]) < 12 and body["has_more"]
    assert len(first.content[0].text.encode()) <= 700  # type: ignore[union-attr]
    note = first.content[1]
    assert isinstance(note, types.TextContent)
    assert f"items: {len(body['items'])} of 12 items returned" in note.text
    assert "call again with cursor = next_cursor" in note.text
    assert first.meta is not None and first.meta["openapi2mcp/truncated"][0]["resume"] == "next_cursor"
    ids, _ = await list_all(rt, "pets_all", 12)
    assert ids == ALL_IDS
    await rt.aclose()


def tamper(cursor: str) -> str:
    head, _, mac = cursor.partition(".")
    data = json.loads(base64.urlsafe_b64decode(head + "=" * (-len(head) % 4)))
    data["d"]["a"] = 0  # rewind
    forged = base64.urlsafe_b64encode(json.dumps(data).encode()).decode().rstrip("=")
    return f"{forged}.{mac}"


@pytest.mark.anyio
async def test_tampered_expired_and_foreign_cursors_are_refused(manifest: Manifest, up: Upstream) -> None:
    now = [1_000_000.0]
    rt = runtime_for(manifest, up, signer=Signer(KEY.encode(), clock=lambda: now[0]))
    page = ok(await rt.call("pages_offset", {"limit": 2}))
    cursor = page["next_cursor"]
    assert ok(await rt.call("pages_offset", {"limit": 2, "cursor": cursor}))["items"][0]["id"] == "3"

    other = runtime_for(manifest, up, key="another-server-key-" + "x" * 30)  # a server with another key
    foreign_key = ok(await other.call("pages_offset", {}))["next_cursor"]
    available = ok(await rt.call("pets_find", {"status": "available", "limit": 1}))["next_cursor"]
    forged = "not a cursor this server issued, or it was changed"
    cases = {
        "tampered": (("pages_offset", {"cursor": tamper(cursor)}), forged),
        "garbage": (("pages_offset", {"cursor": "page=2"}), forged),
        "other key": (("pages_offset", {"cursor": foreign_key}), forged),
        "other tool": (("pages_body_cursor", {"cursor": cursor}), "this cursor belongs to the tool 'pages_offset'"),
        "other arguments": (("pets_find", {"cursor": available, "status": "pending"}),
                            "issued for different arguments"),
    }
    for name, ((tool, arguments), message) in cases.items():
        body = err(await rt.call(tool, arguments))
        assert (body["code"], body["field"]) == ("CURSOR_INVALID", "cursor"), name
        assert body["message"].startswith("cursor: ") and message in body["message"], (name, body["message"])
    now[0] += 3601
    expired = err(await rt.call("pages_offset", {"cursor": cursor}))
    assert (expired["code"], expired["field"]) == ("CURSOR_INVALID", "cursor")
    assert "expired (cursors are valid for 60 minutes)" in expired["message"]
    assert up.count("listPetsCursor") == 0  # refused before anything was sent
    await other.aclose()
    await rt.aclose()


@pytest.mark.anyio
async def test_replicas_sharing_the_key_accept_each_others_cursors(manifest: Manifest, up: Upstream) -> None:
    a, b = runtime_for(manifest, up), runtime_for(manifest, up)
    page = ok(await a.call("pages_header_cursor", {"limit": 4}))
    assert ok(await b.call("pages_header_cursor", {"limit": 4, "cursor": page["next_cursor"]}))["items"][0]["id"] == "5"
    await a.aclose()
    await b.aclose()


@pytest.mark.anyio
async def test_a_link_to_another_host_is_never_followed(runtime: Runtime, up: Upstream) -> None:
    pets = [{"id": "1", "name": "Rex"}]
    up.fault(operation="listPetsLinked", kind="status", status=200, body=pets,
             headers={"Link": '<http://evil.example/pets-linked?page=2&per_page=3>; rel="next"'})
    body = err(await runtime.call("pages_link", {"limit": 10}))
    assert body["code"] == "UPSTREAM_INVALID_RESPONSE"
    assert "Link header points the next page to http://evil.example, which is not the API; not followed" in (
        body["message"]
    )
    assert up.count("listPetsLinked") == 1


@pytest.mark.anyio
async def test_an_api_key_echoed_in_a_link_never_reaches_the_cursor(up: Upstream) -> None:
    secret = "query-key-SECRET-4711"
    overlay = textwrap.dedent("""\
        openapi2mcp: 1
        upstream: {base_url: '${PETSTORE_URL}', auth: {type: query, name: api_key, value: '${PET_KEY}'}}
        tools:
          - name: pages_link
            operation: listPetsLinked
            pagination: {style: link, page_size: 3}
        """)
    m = compile_manifest(load_spec(str(SPEC)), [parse_overlay(overlay, "tasks.yaml")]).manifest
    env = {"PETSTORE_URL": up.base_url, "PET_KEY": secret, "OPENAPI2MCP_SIGNING_KEY": KEY}
    rt = Runtime(m, RuntimeOptions(environ=env))
    link = f'<{up.base_url}/pets-linked?page=2&per_page=3&api_key={secret}>; rel="next"'
    up.fault(operation="listPetsLinked", kind="status", status=200, body=[{"id": "1", "name": "Rex"}],
             headers={"Link": link})
    up.set_auth(f"query:api_key:{secret}")
    try:
        first = ok(await rt.call("pages_link", {}))
        head = first["next_cursor"].split(".")[0]
        assert secret not in base64.urlsafe_b64decode(head + "=" * (-len(head) % 4)).decode()
        second = ok(await rt.call("pages_link", {"cursor": first["next_cursor"]}))
        assert [p["id"] for p in second["items"]] == ["4", "5", "6"]  # followed, with the server's own key
        assert up.last_request("listPetsLinked")["query"].count("api_key=") == 1
    finally:
        up.set_auth(None)
        await rt.aclose()


@pytest.mark.anyio
async def test_a_lying_upstream_is_repaired_or_a_clear_error(runtime: Runtime, up: Upstream) -> None:
    up.fault(operation="listPetsOffset", kind="lie")
    paged = err(await runtime.call("pages_offset", {}))  # no list to page through: nothing to repair
    assert paged["code"] == "UPSTREAM_INVALID_RESPONSE" and "no list at 'items'" in paged["message"]
    up.fault(operation="getPet", kind="lie")
    single = await runtime.call("pets_find", {"petId": "1"})  # tolerant: not an error
    assert not single.is_error and single.structured_content is not None
    # its `select` names the fields: JMESPath gives null for the missing ones, which the schema allows
    assert (single.structured_content["id"], single.structured_content["name"]) == (None, None)
    up.fault(operation="getOrder", kind="lie")
    chained = err(await runtime.call("orders_get_full", {"orderId": "o-1001"}))
    assert (chained["code"], chained["step"]) == ("UPSTREAM_INVALID_RESPONSE", "items")
    assert "parameter orderId came out empty (expression 'steps.order.id')" in chained["message"]


# ============================================================================ chains


@pytest.mark.anyio
async def test_chain_gets_an_order_with_items_and_customer(runtime: Runtime, manifest: Manifest) -> None:
    result = await runtime.call("orders_get_full", {"orderId": "o-1003"})
    body = ok(result)
    assert body["order"] == {"id": "o-1003", "status": "placed", "totalCents": 11097, "currency": "EUR",
                             "placedAt": "2026-11-28T08:05:00Z"}
    assert [i["description"] for i in body["items"]] == ["Reservation deposit: Luna", "Cat carrier", "Litter, 10 kg"]
    assert body["customer"] == {"name": "Anna Schmidt", "email": "anna@example.com", "tier": "gold"}
    assert result.meta is not None
    assert [(r["step"], r["url"].split("/", 3)[-1]) for r in result.meta["openapi2mcp/requests"]] == [
        ("order", "orders/o-1003"), ("items", "orders/o-1003/items"), ("customer", "customers/c-1")]
    tool = manifest.tool("orders_get_full")
    assert tool is not None and tool.output_schema is not None
    jsonschema.validate(body, tool.output_schema)
    assert tool.input_schema["required"] == ["orderId"]  # derived from getOrder's path parameter
    assert "pattern" in tool.input_schema["properties"]["orderId"]


@pytest.mark.anyio
async def test_chain_failure_in_step_two_names_the_step(runtime: Runtime, up: Upstream) -> None:
    up.fault(operation="listOrderItems", kind="status", status=503)
    body = err(await runtime.call("orders_get_full", {"orderId": "o-1001"}))
    assert (body["code"], body["step"], body["status"], body["retryable"]) == ("UPSTREAM_ERROR", "items", 503, True)
    assert "GET /orders/{orderId}/items returned 503" in body["message"]
    assert up.count("getCustomer") == 0  # the chain stopped at the failing step


@pytest.mark.anyio
async def test_chain_with_a_body_a_condition_and_declared_inputs(up: Upstream) -> None:
    m = compile_overlay("""\
        tools:
          - name: pets_clone
            risk: medium
            inputs:
              type: object
              properties:
                petId: {type: string, description: The pet to copy.}
                name: {type: string, minLength: 1, description: The copy's name.}
                withNotes: {type: boolean}
              required: [petId, name]
            steps:
              - stepId: source
                operationId: getPet
                parameters: [{name: petId, value: $inputs.petId}]
              - stepId: copy
                operationId: createPet
                requestBody:
                  payload: {name: $inputs.name, tag: $steps.source.tag, tags: $steps.source.tags, status: pending}
              - stepId: notes
                operationId: getPetNotes
                when: $inputs.withNotes
                parameters: [{name: petId, value: $steps.source.id}]
            outputs: {id: $steps.copy.id, tag: $steps.copy.tag, status: $steps.copy.status, notes: $steps.notes}
        """)
    tool = m.tool("pets_clone")
    assert tool is not None and tool.input_schema["required"] == ["petId", "name"]
    assert tool.annotations["readOnlyHint"] is False and tool.risk == "medium"
    rt = runtime_for(m, up)
    plain = ok(await rt.call("pets_clone", {"petId": "1", "name": "Rex II"}))
    assert plain == {"id": "13", "tag": "dog", "status": "pending", "notes": None}
    sent = json.loads(up.last_request("createPet")["body"])
    assert sent == {"name": "Rex II", "tag": "dog", "tags": ["dog", "large", "friendly"], "status": "pending"}
    assert up.count("getPetNotes") == 0
    noted = ok(await rt.call("pets_clone", {"petId": "1", "name": "Rex III", "withNotes": True}))
    assert noted["notes"].startswith("Loves long walks.")
    duplicate = err(await rt.call("pets_clone", {"petId": "1", "name": "Rex II"}))
    assert (duplicate["code"], duplicate["step"]) == ("CONFLICT", "copy")
    await rt.aclose()


SESSIONS = {
    "openapi": "3.0.3", "info": {"title": "vault", "version": "1"}, "servers": [{"url": "https://vault.example"}],
    "paths": {
        "/sessions": {"post": {
            "operationId": "login",
            "requestBody": {"required": True, "content": {"application/json": {"schema": {
                "type": "object", "required": ["username", "passcode"],
                "properties": {"username": {"type": "string"}, "passcode": {"type": "string", "format": "password"}},
            }}}},
            "responses": {"200": {"description": "ok", "content": {"application/json": {"schema": {
                "type": "object", "properties": {"session": {"type": "string"}}}}}}},
        }},
        "/notes": {"get": {
            "operationId": "listNotes",
            "parameters": [{"name": "session", "in": "query", "required": True, "schema": {"type": "string"}},
                           {"name": "page_token", "in": "query", "schema": {"type": "string"}}],
            "responses": {"200": {"description": "ok", "content": {"application/json": {"schema": {
                "type": "array", "items": {"type": "string"}}}}}},
        }},
    },
}


def test_sensitive_arguments_follow_one_rule_in_every_kind_of_tool(tmp_path: Path) -> None:
    """A secret is known by its argument (format password, writeOnly, `sensitive: true`, its name), also in a
    chain, whose arguments are its inputs: one that feeds a secret is one. (Chains used to go by the input's
    name alone, so `code` and `pin` below were written to the audit log; actions and variants listed hidden
    arguments too, which the model never gives.)"""
    from tests.helpers import compile_text

    m = compile_text(tmp_path, SESSIONS, """\
        openapi2mcp: 1
        tools:
          - name: sessions_open
            operation: login
          - name: notes_browse
            actions:
              open: {operation: login}
              list: {operation: listNotes, params: {page_token: {hidden: true}}}
          - name: notes_mine
            steps:
              - stepId: login
                operationId: login
                requestBody: {payload: {username: $inputs.user, passcode: $inputs.code}}
              - stepId: notes
                operationId: listNotes
                parameters: [{name: session, value: $steps.login.session}]
          - name: notes_mine_declared
            inputs:
              type: object
              properties:
                user: {type: string}
                pin: {type: string}
                otp: {type: string, format: password}
                api_key: {type: string}
            steps:
              - stepId: login
                operationId: login
                requestBody: {payload: {username: $inputs.user, passcode: "join('-', [$inputs.pin, $inputs.user])"}}
              - stepId: notes
                operationId: listNotes
                parameters: [{name: session, value: $steps.login.session}]
        """).manifest
    sensitive = {t.name: t.sensitive for t in m.tools}
    assert sensitive["sessions_open"] == ["passcode"]  # format: password
    assert sensitive["notes_browse"] == ["passcode"]  # not the hidden page_token
    assert sensitive["notes_mine"] == ["code"]  # feeds passcode
    # pin and user feed the passcode through an expression; otp by its format; api_key by its name
    assert sensitive["notes_mine_declared"] == ["api_key", "otp", "pin", "user"]


# ============================================================================ actions and variants


@pytest.mark.anyio
async def test_actions_check_their_own_required_arguments(runtime: Runtime, manifest: Manifest, up: Upstream) -> None:
    missing = err(await runtime.call("pets_manage", {"action": "delete"}))
    assert (missing["code"], missing["field"], missing["message"]) == (
        "ARGUMENT_INVALID", "petId", "action 'delete' needs petId")
    extra = err(await runtime.call("pets_manage", {"action": "create", "name": "Tom", "petId": "1"}))
    assert extra["field"] == "petId"
    assert extra["message"].startswith("action 'create' does not take petId (it takes: ")
    unknown = err(await runtime.call("pets_manage", {"action": "adopt"}))
    assert unknown["field"] == "action" and "'adopt' is not one of ['create', 'update', 'delete']" in unknown["message"]
    assert up.count("deletePet") == up.count("createPet") == 0
    created = ok(await runtime.call("pets_manage", {"action": "create", "name": "Tom", "tag": "cat"}))
    assert created == {"id": "13", "name": "Tom", "status": "available"}
    sold = ok(await runtime.call("pets_manage", {"action": "update", "petId": "13", "status": "sold"}))
    assert sold["status"] == "sold"
    # delete is high risk (confirmation per action, docs/safety.md): no way to ask here, so nothing is sent
    refused = err(await runtime.call("pets_manage", {"action": "delete", "petId": "13"}))
    assert refused["code"] == "CONFIRMATION_REQUIRED" and up.count("deletePet") == 0
    runtime.policy.auto_approve = frozenset({"high"})
    assert ok(await runtime.call("pets_manage", {"action": "delete", "petId": "13"})) == {"status": 204}
    tool = manifest.tool("pets_manage")
    assert tool is not None
    assert "- create: Add a pet; names are unique (case-insensitive). Requires name." in tool.description
    assert "- delete: Remove a pet and its photo for good. Requires petId. Risk: high." in tool.description
    schema = tool.input_schema
    assert schema["required"] == ["action"] and "oneOf" not in schema and "anyOf" not in schema
    assert "default" not in schema["properties"]["status"]  # create's default must not leak into update
    assert (tool.risk, [b.risk for b in tool.branches]) == ("high", ["medium", "medium", "high"])
    assert tool.annotations["destructiveHint"] is True and tool.annotations["readOnlyHint"] is False


@pytest.mark.anyio
async def test_a_forbidden_action_is_invisible_and_uncallable(up: Upstream) -> None:
    m = compile_overlay("""\
        tools:
          - name: pets_admin
            actions:
              get: {operation: getPet}
              wipe: {operation: deletePet, risk: forbidden}
        """)
    tool = m.tool("pets_admin")
    assert tool is not None
    assert tool.input_schema["properties"]["action"]["enum"] == ["get"] and "wipe" not in tool.description
    assert tool.risk == "low" and tool.annotations["readOnlyHint"] is True
    rt = runtime_for(m, up)
    body = err(await rt.call("pets_admin", {"action": "wipe", "petId": "1"}))
    assert body["field"] == "action" and "'wipe' is not one of ['get']" in body["message"]
    assert up.count("deletePet") == 0
    await rt.aclose()


@pytest.mark.anyio
async def test_variants_pick_by_the_arguments_given(runtime: Runtime, up: Upstream) -> None:
    one = ok(await runtime.call("pets_find", {"petId": "1"}))
    assert one == {"id": "1", "name": "Rex", "status": "available", "tag": "dog", "age": 3, "weight_kg": 28.5,
                   "category": "Dogs"}  # category.name: a nested field, projected
    listing = ok(await runtime.call("pets_find", {"status": "sold"}))
    assert [p["name"] for p in listing["items"]] == ["Bubbles", "Bella"]
    wrong = err(await runtime.call("pets_find", {"petId": "1", "status": "sold"}))
    assert wrong["message"] == "getPet (chosen because petId is given) does not take status (it takes: petId)"
    assert up.count("getPet") == 1 and up.count("listPets") == 1


@pytest.mark.anyio
async def test_null_arguments_mean_not_given_in_every_kind_of_tool(runtime: Runtime, up: Upstream) -> None:
    # models send null for the optional arguments they do not use: variants, paging, actions, chains
    listing = ok(await runtime.call("pets_find", {"petId": None, "status": "sold", "limit": None, "cursor": None,
                                                  "sort": None}))
    assert [p["name"] for p in listing["items"]] == ["Bubbles", "Bella"]  # petId null: the list variant
    assert up.count("getPet") == 0
    ok(await runtime.call("pets_manage", {"action": "update", "petId": "1", "status": "pending", "name": None,
                                          "age": None, "weight_kg": None}))
    assert json.loads(up.last_request("updatePet")["body"]) == {"status": "pending"}
    chained = err(await runtime.call("orders_get_full", {"orderId": None}))
    assert (chained["field"], chained["message"]) == ("orderId", "orderId: required, got null")
    assert up.count("getOrder") == 0


@pytest.mark.anyio
async def test_projection_of_a_nested_response_validates(up: Upstream) -> None:
    m = compile_overlay("""\
        tools:
          - name: categories_path
            operation: getCategory
            response:
              select: "{name: name, parent: parent.name, grandparent: parent.parent.name}"
        """)
    tool = m.tool("categories_path")
    assert tool is not None and tool.output_schema is not None
    assert tool.output_schema["properties"]["grandparent"]["type"] == ["string", "null"]
    rt = runtime_for(m, up)
    dogs = ok(await rt.call("categories_path", {"categoryId": 3}))
    assert dogs == {"name": "Dogs", "parent": "Mammals", "grandparent": "Animals"}
    root = ok(await rt.call("categories_path", {"categoryId": 1}))  # no parent: nulls, still valid
    assert root == {"name": "Animals", "parent": None, "grandparent": None}
    for body in (dogs, root):
        jsonschema.validate(body, tool.output_schema)
    await rt.aclose()


def test_units_reach_the_model_in_every_place(manifest: Manifest) -> None:
    tool = manifest.tool("pets_find")
    assert tool is not None and tool.output_schema is not None
    assert "Units: weight_kg = kilograms; age = whole years." in tool.description
    props = tool.output_schema["properties"]
    # a description that already states the unit is left alone (the spec says "Weight in kilograms.")
    assert props["weight_kg"]["description"] == "Weight in kilograms."
    assert props["items"]["items"]["properties"]["weight_kg"]["description"] == "Weight in kilograms."
    assert props["items"]["items"]["properties"]["age"]["description"] == "Age in whole years."
    manage = manifest.tool("pets_manage")
    assert manage is not None
    assert manage.input_schema["properties"]["weight_kg"]["description"] == "Weight in kilograms."
    assert "Units: weight_kg = kilograms." in manage.description
    chain = manifest.tool("orders_get_full")
    assert chain is not None and chain.output_schema is not None
    assert "Units: totalCents = cents (1/100 of currency)" in chain.description
    item = chain.output_schema["properties"]["items"]["items"]["properties"]["unitPriceCents"]
    assert item["description"].endswith("Unit: cents (1/100 of currency).")


# ============================================================================ through a real MCP client


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_through_the_sdk_client(manifest: Manifest, up: Upstream, mode: str) -> None:
    rt = runtime_for(manifest, up)

    async def confirm(ctx: Any, params: types.ElicitRequestParams) -> types.ElicitResult:  # the user says yes
        return types.ElicitResult(action="accept", content={"confirm": True})

    async with Client(rt.build_server(), mode=mode, elicitation_callback=confirm) as client:  # type: ignore[arg-type]
        listed = {t.name: t for t in (await client.list_tools()).tools}
        assert set(listed) == {"pets_find", "pets_manage", "orders_get_full", "pages_offset", "pages_body_cursor",
                               "pages_header_cursor", "pages_link"}
        for t in listed.values():
            assert t.input_schema["type"] == "object" and t.output_schema is not None
            assert t.output_schema["type"] == "object"
        # the client validates every structured result against the tool's outputSchema
        ids, cursor = [], None
        while True:
            args: dict[str, Any] = {"limit": 5} | ({"cursor": cursor} if cursor else {})
            page = await client.call_tool("pages_link", args)
            assert not page.is_error
            ids += [p["id"] for p in page.structured_content["items"]]
            cursor = page.structured_content["next_cursor"]
            if not cursor:
                break
        assert ids == ALL_IDS
        one = await client.call_tool("pets_find", {"petId": "2"})
        assert one.structured_content["name"] == "Mittens"
        full = await client.call_tool("orders_get_full", {"orderId": "o-1002"})
        assert full.structured_content["customer"]["name"] == "王小明"
        deleted = await client.call_tool("pets_manage", {"action": "delete", "petId": "12"})
        assert deleted.structured_content == {"status": 204}
        bad = await client.call_tool("pets_manage", {"action": "update", "name": "X"})
        assert err(bad)["message"] == "action 'update' needs petId"
        forged = await client.call_tool("pages_offset", {"cursor": "eyJ9.AAAA"})
        assert err(forged)["code"] == "CURSOR_INVALID"
        up.fault(operation="getCustomer", kind="status", status=404)
        failed = await client.call_tool("orders_get_full", {"orderId": "o-1001"})
        assert err(failed)["step"] == "customer"
    await rt.aclose()


# ============================================================================ compile errors


def test_unknown_action_operation() -> None:
    msg = compile_error("""\
        tools:
          - name: pets_manage
            actions:
              get: {operation: getPet}
              remove: {operation: deletPet}
        """)
    assert "tasks.yaml:7:16 at tools[0](pets_manage).actions.remove.operation: unknown operation 'deletPet'; " \
           "did you mean 'deletePet'?" in msg


def test_action_argument_clash() -> None:
    msg = compile_error("""\
        tools:
          - name: things_get
            actions:
              pet: {operation: getPet}
              category: {operation: getCategory, params: {categoryId: {rename: petId}}}
        """)
    assert "argument 'petId' means different things in action 'pet' and action 'category' (at type: \"string\" " \
           "vs \"integer\")" in msg
    assert "a collapsed tool has one flat set of arguments" in msg
    assert "hint: rename it in one of them, e.g. params: {petId: {rename: category_petId}}" in msg


@pytest.mark.parametrize(
    ("variants", "message"),
    [
        ("""\
              - {when: [petId], operation: getPet}
              - {when: [petId, status], operation: getPet, name: again}
              - {operation: listPets, params: {limit: {hidden: true}}}
         """, "variant 2 (when: [petId, status]) can never run: variant 1 (when: [petId]) is taken whenever petId "
              "is given"),
        ("""\
              - {operation: listPets}
              - {when: [petId], operation: getPet}
         """, "variant 2 can never run: the fallback variant 1 (no `when`) comes before it"),
        ("""\
              - {when: [petId], operation: getPet}
              - {when: [petId], operation: deletePet}
         """, "exactly one variant must have no `when` (the fallback, taken when no other matches); this tool has 0"),
        ("""\
              - {when: [id], operation: getPet}
              - {operation: listPets}
         """, "`when` names 'id', which is not an argument of 'getPet'"),
    ],
)
def test_bad_variants(variants: str, message: str) -> None:
    msg = compile_error("tools:\n  - name: pets_find\n    variants:\n" + textwrap.indent(
        textwrap.dedent(variants), "      "))
    assert message in msg


CHAIN = """\
    tools:
      - name: orders_get_full
        steps:
          - stepId: order
            operationId: getOrder
            parameters: [{{name: orderId, value: $inputs.orderId}}]
          - stepId: customer
            operationId: getCustomer
            parameters: [{{name: customerId, value: "{value}"}}]
        outputs: {{customer: "{output}"}}
    """


@pytest.mark.parametrize(
    ("value", "output", "message"),
    [
        ("$steps.order.customerID", "$steps.customer",
         "step 'customer' parameter 'customerId' names field 'customerID', which `steps.order` does not have; "
         "did you mean 'customerId'?"),
        ("$steps.ordr.customerId", "$steps.customer",
         "step 'customer' parameter 'customerId' refers to step 'ordr', which does not exist; did you mean 'order'?"),
        ("$steps.customer.id", "$steps.customer", "refers to its own step 'customer'"),
        ("$steps.order.customerId", "$steps.customer.nme",
         "`outputs` names field 'nme', which `steps.customer` does not have; did you mean 'name'?"),
        ("$steps.order.customerId[?", "$steps.customer", "invalid JMESPath expression 'steps.order.customerId[?'"),
        ("$steps.order.itemIds", "$steps.customer",
         "step 'customer' parameter 'customerId' takes scalar values, but 'steps.order.itemIds' gives array"),
        ("$response.body#/customerId", "$steps.customer",
         "$response is not supported here: expressions read $inputs and $steps.<stepId>"),
    ],
)
def test_bad_chain_expressions(value: str, output: str, message: str) -> None:
    msg = compile_error(CHAIN.format(value=value, output=output))
    assert message in msg


def test_chain_forward_reference() -> None:
    msg = compile_error("""\
        tools:
          - name: orders_get_full
            steps:
              - stepId: customer
                operationId: getCustomer
                parameters: [{name: customerId, value: $steps.order.customerId}]
              - stepId: order
                operationId: getOrder
                parameters: [{name: orderId, value: $inputs.orderId}]
        """)
    assert "tools[0](orders_get_full).steps[0].parameters[0].value: step 'customer' parameter 'customerId' refers " \
           "to step 'order', which runs later (forward reference)" in msg


@pytest.mark.parametrize(
    ("pagination", "message"),
    [
        ("{style: page, page_param: pg}", "operation 'listPets' has no parameter 'pg' for `page_param`; did you mean "
                                          "'page'?"),
        ("{style: page, page_size: 80}", "page_size 80 is above the API's maximum page size of 50"),
        ("{style: page, next: next_cursor}", "`next` does not apply to pagination style 'page'"),
        ("{style: page, total: totl}", "`pagination.total` names field 'totl', which the response schema does not "
                                       "have; did you mean 'total'?"),
    ],
)
def test_bad_pagination(pagination: str, message: str) -> None:
    assert message in compile_error(f"tools:\n  - name: pets_list\n    operation: listPets\n"
                                    f"    params: {{limit: {{hidden: true}}}}\n    pagination: {pagination}\n")


def test_paging_arguments_must_not_clash() -> None:
    msg = compile_error("tools:\n  - name: pets_list\n    operation: listPets\n    pagination: {style: page}\n")
    assert "argument 'limit' of 'listPets' clashes with the paging argument `limit` every paginated tool has" in msg
    assert "hint: hide it (params: {limit: {hidden: true}}) or rename it" in msg


def test_a_tool_is_exactly_one_kind() -> None:
    msg = compile_error("tools:\n  - name: a.b\n    operation: getPet\n    steps: []\n")
    assert "a tool has exactly one of operation, actions, variants, steps; this one has operation and steps" in msg


# ============================================================================ signing


def test_signer_purposes_keys_and_expiry() -> None:
    now = [100.0]
    signer = Signer(KEY.encode(), clock=lambda: now[0])
    token = signer.sign("cursor", {"a": 1}, ttl=10)
    assert signer.verify("cursor", token) == {"a": 1}
    with pytest.raises(TokenError) as info:
        signer.verify("confirmation", token)
    assert info.value.reason == "purpose" and "this is a cursor token, not a confirmation" in str(info.value)
    with pytest.raises(TokenError) as info:
        Signer(b"another key of enough length").verify("cursor", token)
    assert info.value.reason == "signature"
    now[0] = 111
    with pytest.raises(TokenError) as info:
        signer.verify("cursor", token)
    assert info.value.reason == "expired"
    with pytest.raises(SigningKeyError, match="at least 32 characters"):
        Signer.from_environ({"OPENAPI2MCP_SIGNING_KEY": "short"})
    assert Signer.from_environ({}).generated and not Signer.from_environ({"OPENAPI2MCP_SIGNING_KEY": KEY}).generated


# ============================================================================ the GitHub overlay


def test_github_overlay_is_small_and_complete(corpus: Path) -> None:
    from openapi2mcp.overlay import read_overlay as read

    spec = load_spec(str(corpus / "github" / "api.github.com.json"))
    curated = compile_manifest(spec, [read(ROOT / "overlays" / "github.yaml")]).manifest
    raw = compile_manifest(spec, [], all_operations=True).manifest

    def size(m: Manifest) -> int:
        return len(json.dumps({"tools": [t.definition() for t in m.tools]}, separators=(",", ":")).encode())

    names = [t.name for t in curated.tools]
    assert len(names) <= 15
    for area in ("issues_", "pulls_", "repos_content", "search_", "actions_runs"):
        assert any(n.startswith(area) for n in names), area
    assert size(raw) >= 100 * size(curated)
    kinds = {t.dispatch for t in curated.tools}
    assert kinds == {"single", "action", "presence"}
    assert any(b.pagination and b.pagination.style == "link" for t in curated.tools for b in t.branches)
    for t in curated.tools:  # flat inputs, object outputs: what every MCP client accepts
        assert t.input_schema["type"] == "object" and "anyOf" not in t.input_schema
        assert t.output_schema is None or t.output_schema["type"] == "object"
