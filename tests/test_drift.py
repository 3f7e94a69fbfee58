"""The drift tier: a real upstream that lies, `openapi2mcp serve`, the SDK client (issue 10 part 1).

The upstream (tests/drift: the examples' machinery, routes from its spec, every request
validated) answers each operation in one of the ways real servers drift from their specs: null
for non-nullable fields, required fields left out, extra properties, unlisted enum values,
strings that fail format/pattern/length, numbers out of range, numbers sent as strings (and the
other way round), an object where an array is documented, a bare array where an object is,
drift inside nullable and polymorphic fields, HTML where JSON is documented, and a paginated
list whose items drift. `openapi2mcp serve` runs as a subprocess in each `response.validate`
mode, and the mcp SDK client calls every tool over stdio and Streamable HTTP in both protocol
eras. The SDK client validates every result's structured content against the tool's listed
outputSchema itself (it raises when it does not conform); the tests also check it again, and
assert exactly what the model receives:

* tolerant (the default): never an error; the structured content holds what fits (values that
  do not fit left out, null, or converted), the text holds what the upstream sent, `_meta` and a
  notice name every repaired path; the audit line counts them and the log says so once;
* strict: UPSTREAM_INVALID_RESPONSE naming the first place the answer breaks the spec's own schema;
* off: no outputSchema; the structured content is the body as shaped.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import jsonschema
import mcp_types as types
import pytest
from anyio.from_thread import BlockingPortal

from examples import Upstream
from tests.drift.app import BODIES, EXACT, HTML, PAGE_ITEMS, SPEC_PATH, create_app
from tests.e2e_support import LEGACY, MODERN, HttpServer, McpSession, err, portal

OVERLAY = Path(__file__).parent / "drift" / "overlay.yaml"
KEY = "drift-tier-signing-key-0123456789abcdef"
TRANSPORTS: dict[str, tuple[str, str, str]] = {
    "stdio-2025-11-25": ("stdio", "legacy", LEGACY),
    "stdio-2026-07-28": ("stdio", "auto", MODERN),
    "http-2025-11-25": ("http", "legacy", LEGACY),
    "http-2026-07-28": ("http", "auto", MODERN),
}
MODES = ("tolerant", "strict", "off")
TOOLS = {  # tool -> the operation (BODIES key) behind it
    "record_exact": "getExact", "record_nulls": "getNulls", "record_missing": "getMissing",
    "record_extra": "getExtra", "record_enum": "getEnum", "record_formats": "getFormats",
    "record_ranges": "getRanges", "record_strings": "getStrings", "record_shapes": "getShapes",
    "record_nested": "getNested", "record_html": "getHtml", "records_list": "listRecords",
}


def _without(value: dict[str, Any], *keys: str) -> dict[str, Any]:
    return {k: v for k, v in value.items() if k not in keys}


def _r(path: str, expected: str, got: str, action: str) -> dict[str, str]:
    return {"path": path, "expected": expected, "got": got, "action": action}


# tolerant: tool -> (structured content the model gets, _meta repairs); the text is always BODIES[op]
TOLERANT: dict[str, tuple[dict[str, Any], list[dict[str, str]]]] = {
    "record_exact": (EXACT, []),
    "record_nulls": (BODIES["getNulls"], []),  # null is accepted everywhere: nothing to repair
    "record_missing": ({**BODIES["getMissing"], "name": None, "hash_algorithm": None},
                       [_r("hash_algorithm", "string", "missing", "null"), _r("name", "string", "missing", "null")]),
    "record_extra": (BODIES["getExtra"], []),  # extra properties are kept: no closed objects
    "record_enum": (BODIES["getEnum"], []),  # an unlisted value is a value
    "record_formats": (BODIES["getFormats"], []),  # format, pattern, lengths are not asserted
    "record_ranges": (BODIES["getRanges"], []),  # nor ranges, maxItems, uniqueItems
    "record_strings": ({**_without(BODIES["getStrings"], "ratio"), "count": 42, "name": "12345",
                        "created": "1768469400"},
                       [_r("count", "integer", "string", "converted"), _r("created", "string", "integer", "converted"),
                        _r("name", "string", "integer", "converted"), _r("ratio", "number", "string", "removed")]),
    "record_shapes": (_without(BODIES["getShapes"], "tags", "owner"),
                      [_r("owner", "object", "string", "removed"), _r("tags", "array", "object", "removed")]),
    "record_nested": ({**BODIES["getNested"], "reviewer": {"login": "42"}, "ident": {"login": "7", "email": None}},
                      [_r("ident.login", "string", "integer", "converted"),
                       _r("reviewer.login", "string", "integer", "converted")]),
    "record_html": (dict.fromkeys(("id", "name", "status", "count", "hash_algorithm", "created")),
                    [_r("", "JSON", "text/html", "removed")]
                    + [_r(k, t, "missing", "null") for k, t in (("count", "integer"), ("created", "string"),
                       ("hash_algorithm", "string"), ("id", "string"), ("name", "string"), ("status", "string"))]),
    "records_list": ({"items": None}, [_r("", "object", "array", "removed"), _r("items", "array", "missing", "null")]),
}

# strict: tool -> what the error message says (the first place the answer breaks the spec's schema)
STRICT: dict[str, str] = {
    "record_nulls": "at tags: expected array, got null",
    "record_missing": "at the top level: 'name' is a required property",
    "record_extra": "Additional properties are not allowed ('etag', 'internal' were unexpected)",
    "record_enum": "at status: 'archived' is not one of ['active', 'retired']",
    "record_formats": "at name: 'UPPER Case, and far too long for it' is too long",
    "record_ranges": "at tags: ['a', 'a', 'a', 'a', 'a'] is too long",
    "record_strings": "at ratio: expected number, got string",
    "record_shapes": "at tags: expected array, got object",
    "record_nested": "at reviewer.login: expected string, got integer",
    "record_html": "the upstream sent text/html where the documented JSON was expected",
    "records_list": "at the top level: expected object, got array",
}


# ============================================================================ fixtures


@pytest.fixture(scope="module")
def logs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("drift-logs")


@pytest.fixture(scope="module")
def loop() -> Iterator[BlockingPortal]:
    with portal() as p:
        yield p


@pytest.fixture(scope="module")
def drift_up() -> Iterator[Upstream]:
    with Upstream.serve(create_app(), name="drift", spec_path=SPEC_PATH) as up:
        yield up


@pytest.fixture(autouse=True)
def requests_stay_valid(drift_up: Upstream) -> Iterator[None]:
    """Only the answers lie: every request openapi2mcp sent must fit the spec."""
    yield
    assert [v for v in drift_up.violations() if v["kind"] != "response"] == []


def overlay_for(mode: str, logs: Path) -> Path:
    if mode == "tolerant":
        return OVERLAY  # the default: the overlay says nothing about validation
    path = logs / f"overlay-{mode}.yaml"
    path.write_text(OVERLAY.read_text() + f"defaults:\n  response: {{validate: \"{mode}\"}}\n")
    return path


def serve_args(mode: str, logs: Path) -> list[str]:
    return [str(SPEC_PATH), "--overlay", str(overlay_for(mode, logs)), "--log-level", "info"]


def env_for(up: Upstream) -> dict[str, str]:
    return {"DRIFT_API_URL": up.base_url, "OPENAPI2MCP_SIGNING_KEY": KEY}


@pytest.fixture(scope="module")
def http_servers(drift_up: Upstream, logs: Path) -> Iterator[dict[str, HttpServer]]:
    """One `serve --transport http` per mode (started concurrently); the tolerant one writes an audit log."""
    def start(mode: str) -> HttpServer:
        extra = ["--audit-log", str(logs / "audit.jsonl")] if mode == "tolerant" else []
        return HttpServer.start([*serve_args(mode, logs), *extra], log_dir=logs, env=env_for(drift_up))

    with ThreadPoolExecutor(max_workers=3) as pool:
        servers = dict(zip(MODES, pool.map(start, MODES), strict=True))
    try:
        yield servers
    finally:
        for server in servers.values():
            server.stop()


@pytest.fixture(scope="module", params=[(m, t) for m in MODES for t in TRANSPORTS], ids=lambda p: f"{p[0]}-{p[1]}")
def session(
    request: pytest.FixtureRequest, loop: BlockingPortal, drift_up: Upstream, http_servers: dict[str, HttpServer],
    logs: Path,
) -> Iterator[tuple[str, McpSession]]:
    mode, transport = request.param
    kind, client_mode, protocol = TRANSPORTS[transport]
    if kind == "http":
        s = McpSession.http(loop, http_servers[mode].url, mode=client_mode, label=f"{mode}-{transport}")
    else:
        s = McpSession.stdio(loop, serve_args(mode, logs), mode=client_mode, label=f"{mode}-{transport}",
                             log_dir=logs, env=env_for(drift_up))
    try:
        assert s.protocol_version == protocol
        yield mode, s
    finally:
        s.close()


def listed(s: McpSession) -> dict[str, types.Tool]:
    return {t.name: t for t in s.list_tools()}


def conforms(tool: types.Tool, result: types.CallToolResult) -> None:
    """What the SDK client already checked, once more: structured content fits the listed outputSchema."""
    if tool.output_schema is not None:
        assert result.structured_content is not None
        jsonschema.Draft202012Validator(tool.output_schema).validate(result.structured_content)


# ============================================================================ the tool list


def test_the_output_schemas_each_mode_advertises(session: tuple[str, McpSession]) -> None:
    mode, s = session
    tools = listed(s)
    assert sorted(tools) == sorted([*TOOLS, "records_page"])
    record = tools["record_exact"].output_schema
    if mode == "off":
        assert all(t.output_schema is None for t in tools.values())
        return
    assert record is not None
    status = record["properties"]["status"]
    if mode == "tolerant":  # structure and types, null accepted, the enum as documentation only
        assert status == {"type": ["string", "null"],
                          "description": "active: in use; retired: kept for history. One of: active, retired."}
        assert "additionalProperties" not in record and "format" not in json.dumps(record)
    else:  # the spec's own schema
        assert status["enum"] == ["active", "retired"]
        assert record["additionalProperties"] is False
        assert record["properties"]["id"] == {"type": "string", "format": "uuid",
                                              "description": "Assigned by the server."}
    assert record["required"] == ["id", "name", "status", "count", "hash_algorithm", "created"]


# ============================================================================ each way of drifting


@pytest.mark.parametrize("name", list(TOOLS))
def test_what_the_model_receives(session: tuple[str, McpSession], name: str) -> None:
    mode, s = session
    tool = listed(s)[name]
    result = s.call(name)  # the SDK client raises if the structured content does not fit the schema
    sent = BODIES.get(TOOLS[name])
    if mode == "strict" and name != "record_exact":
        body = err(result, "UPSTREAM_INVALID_RESPONSE")
        assert STRICT[name] in body["message"], body["message"]
        return
    assert not result.is_error, result.model_dump_json()
    conforms(tool, result)
    meta = result.meta or {}
    text = result.content[0]
    assert isinstance(text, types.TextContent)
    if mode == "off":
        assert "openapi2mcp/repairs" not in meta
        if name == "record_html":
            assert (result.structured_content, text.text) == (None, HTML)
        else:
            shaped = sent if isinstance(sent, dict) else {"result": sent}
            assert result.structured_content == shaped and json.loads(text.text) == shaped
        return
    expected, repairs = TOLERANT[name] if mode == "tolerant" else (EXACT, [])
    assert result.structured_content == expected
    # the text keeps exactly what the upstream sent, so nothing is lost to the model
    assert (text.text if name == "record_html" else json.loads(text.text)) == (HTML if name == "record_html" else sent)
    assert meta.get("openapi2mcp/repairs", []) == repairs
    notices = [c.text for c in result.content[1:] if isinstance(c, types.TextContent)]
    if repairs:
        assert len(notices) == 1 and notices[0].startswith(f"Note: {len(repairs)} value")
        for r in repairs:
            assert f"{r['path'] or 'the whole result'}: expected {r['expected']}, got {r['got']}" in notices[0]
    else:
        assert notices == []


def test_a_page_whose_items_drift(session: tuple[str, McpSession]) -> None:
    mode, s = session
    tool = listed(s)["records_page"]
    if mode == "strict":
        body = err(s.call("records_page", {"limit": 2}), "UPSTREAM_INVALID_RESPONSE")
        assert re.search(r"at items\[\d\]\.id: 'p-\d' is not a 'uuid'", body["message"]), body  # format: uuid
        return
    seen: list[Any] = []
    repairs: list[list[dict[str, str]]] = []
    cursor: str | None = None
    while True:
        result = s.call("records_page", {"limit": 2, **({"cursor": cursor} if cursor else {})})
        assert not result.is_error, result.model_dump_json()
        conforms(tool, result)
        page = result.structured_content
        assert page is not None
        assert isinstance(result.content[0], types.TextContent)
        sent = json.loads(result.content[0].text)
        seen += sent["items"]
        repairs.append((result.meta or {}).get("openapi2mcp/repairs", []))
        if mode == "tolerant":
            assert [i["id"] for i in page["items"]] == [i["id"] for i in sent["items"]]
        else:
            assert page == sent  # off: as shaped, unchecked
        cursor = page["next_cursor"]
        if not page["has_more"]:
            break
    assert seen == PAGE_ITEMS  # every item once, in order, as the upstream sent it
    if mode == "tolerant":
        assert repairs == [
            [_r("items[1].count", "integer", "string", "converted")],  # p-1: "7"
            [_r("items[0].name", "string", "missing", "null"), _r("items[1].tags", "array", "object", "removed")],
            [],  # p-4: an unlisted status is a value
        ]
    else:
        assert repairs == [[], [], []]


# ============================================================================ what an operator sees


def test_repairs_are_counted_in_the_audit_line_and_logged_once(
    loop: BlockingPortal, http_servers: dict[str, HttpServer], logs: Path
) -> None:
    server = http_servers["tolerant"]
    s = McpSession.http(loop, server.url, mode="auto", label="audit")
    try:
        for _ in range(3):
            assert not s.call("record_strings").is_error
        assert not s.call("record_exact").is_error
    finally:
        s.close()
    lines = [json.loads(line) for line in (logs / "audit.jsonl").read_text().splitlines()]
    drifted = [line for line in lines if line["tool"] == "record_strings" and line["phase"] == "result"]
    assert len(drifted) >= 3 and all(line["outcome"] == "ok" for line in drifted)
    assert drifted[-1]["repairs"] == {"count": 4, "paths": [
        {**_r("count", "integer", "string", "converted"), "count": 1},
        {**_r("created", "string", "integer", "converted"), "count": 1},
        {**_r("name", "string", "integer", "converted"), "count": 1},
        {**_r("ratio", "number", "string", "removed"), "count": 1},
    ]}
    exact = [line for line in lines if line["tool"] == "record_exact" and line["phase"] == "result"]
    assert exact and "repairs" not in exact[-1]
    stderr = server.stderr()
    warning = "tool record_strings: the upstream's response does not match its documented schema at count"
    assert stderr.count(warning) == 1, stderr  # once per tool and path, however often it drifts
    calls = [line for line in stderr.splitlines() if "tool=record_strings traceId=" in line]
    assert len(calls) >= 3 and all(line.endswith(" repairs=4") for line in calls), calls  # each call's log line
    assert not any("repairs=" in line for line in stderr.splitlines() if "tool=record_exact traceId=" in line)
    health = server.health()
    assert health["repairs"]["record_strings"] >= 12  # 3 calls x 4 values here, more from other tests
