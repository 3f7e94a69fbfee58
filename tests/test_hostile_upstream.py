"""Issue 11 items 3-7 and the upstream/runtime part of 17, and issue 10's doubled log lines.

Each attack is tried against a real server: the hostile upstream of tests/hostile_upstream.py
(raw asyncio on 127.0.0.1) reflects its whole request in every encoding an ordinary upstream
uses, answers with malformed redirects, over-deep JSON, unknown charsets and NaN. The runtime is
driven in process (`Runtime.call`, the same code the MCP handlers run) and, where the path goes
through MCP, through `openapi2mcp serve` with the SDK client (stdio) or raw JSON-RPC (a client
can send `NaN`; the SDK client cannot).
"""

from __future__ import annotations

import base64
import html
import io
import json
import logging
import re
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal
from urllib.parse import quote, quote_plus

import httpx2
import mcp_types as types
import pytest
from anyio.from_thread import BlockingPortal

from openapi2mcp.manifest import (
    AuthSpec,
    Branch,
    DryRunSpec,
    Manifest,
    PaginationSpec,
    ParamSpec,
    ResourceSpec,
    Step,
    ToolSpec,
)
from openapi2mcp.result import error_of
from openapi2mcp.runtime import Runtime, RuntimeOptions, configure_logging
from openapi2mcp.runtime.calls import sendable
from openapi2mcp.upstream import ConfigError, Redactor
from openapi2mcp.upstream.request import MAX_URL_LENGTH
from openapi2mcp.upstream.response import MAX_JSON_DEPTH, json_depth_exceeds
from tests.e2e_support import (
    LEGACY,
    MODERN,
    HttpServer,
    McpSession,
    child_env,
    cli,
    err,
    no_traceback,
    ok,
    portal,
    run_cli,
)
from tests.hostile_upstream import serve_hostile
from tests.local import ROOT
from tests.runtime_upstream import fixed, manifest, op, p, q, tool

# Canaries with every character the encoders treat differently: + / = (percent, plus, base64),
# a space and a non-ASCII letter (query only: headers are ASCII).
QUERY_KEY = "Qk+y/Zz=9Ab +/==\u00e9x"
HEADER_KEY = "Hk3y+/=Secret/9+"
BEARER = "Bt0ken+/=xyz9/Q=="
PASSWORD = "p@ss:w/rd+=Z9"
COOKIE = "c00kie+/=val/ue9"
SECRETS = {"HOSTILE_KEY": QUERY_KEY, "HOSTILE_HEADER_KEY": HEADER_KEY}


def forms(secret: str) -> dict[str, str]:
    """`secret` as ordinary upstreams echo it (what must never reach a client)."""
    quoted = quote(secret, safe="")
    out = {
        "raw": secret,
        "quote": quoted,
        "quote_plus": quote_plus(secret, safe=""),
        "quote_default": quote(secret),
        "lower_hex": re.sub("%[0-9A-F]{2}", lambda m: m.group().lower(), quoted),
        "twice": quote(quoted, safe=""),
        "json_ascii": json.dumps(secret)[1:-1],
        "json_slash": json.dumps(secret, ensure_ascii=False)[1:-1].replace("/", "\\/"),
        "html": html.escape(secret).replace("+", "&#43;").replace("/", "&#x2F;"),
        "plus_as_space": secret.replace("+", " "),  # a raw + read back as form data
    }
    raw = secret.encode()
    for k in range(3):  # base64 of a stream holding the secret at each alignment: its stable middle
        for name, encode in (("b64", base64.b64encode), ("b64url", base64.urlsafe_b64encode)):
            encoded = encode(b"\0" * k + raw).decode()
            out[f"{name}{k}"] = encoded[-(-8 * k // 6) + 1: (8 * (k + len(raw))) // 6 - 1]
    return out


def assert_hidden(text: str, *secrets: str) -> None:
    for secret in secrets:
        for name, form in forms(secret).items():
            assert form not in text, f"the secret leaked as {name} ({form!r})"


def dumped(result: types.CallToolResult) -> str:
    return result.model_dump_json(by_alias=True)


@pytest.fixture(scope="module")
def hostile() -> Iterator[str]:
    with serve_hostile() as base:
        yield base


def reflect_tool(name: str = "reflect", path: str = "/reflect", *extra: ParamSpec) -> ToolSpec:
    return tool(name, op("GET", path, q("as"), q("status"), q("ct"), *extra))


def preview_tool() -> ToolSpec:
    """A write with the upstream's own preview switch: a dry run IS a request, and its answer the preview."""
    operation = op("POST", "/reflect", fixed("as", "json"),
                   ParamSpec(name="preview", location="query", arg="$dryRun"), q("note"))
    branch = Branch(key="default", steps=[Step(id="call", operation=operation)], risk="medium",
                    dry_run=DryRunSpec(native=True))
    schema = {"type": "object", "properties": {"dryRun": {"type": "boolean"}, "note": {"type": "string"}}}
    return ToolSpec(name="preview", description="POST /reflect", input_schema=schema, branches=[branch])


def tenant_tool() -> ToolSpec:
    """`raw` fixed by the server; `opts` an exploded object, `prefs` an exploded cookie object."""
    return tool("tenant", op("GET", "/reflect", fixed("raw", "tenant-acme"), q("opts"), q("limit"),
                             q("more", style="form", explode=True),
                             p("prefs", "cookie", explode=True),
                             p("X-Tenant", "header", arg="tenant_header"),
                             p("filter", "query", style="deepObject", explode=True)))


def hostile_manifest(base: str, *, auth: AuthSpec | None = None, headers: dict[str, str] | None = None) -> Manifest:
    tools = [
        reflect_tool(),
        reflect_tool("hop", "/hop"),
        preview_tool(),
        tenant_tool(),
        tool("location", op("GET", "/location", q("v"))),
        tool("deep", op("GET", "/deep", q("n"), q("kind"))),
        tool("charset", op("GET", "/charset", q("cs"), q("latin1"))),
        tool("nan", op("GET", "/nan")),
        tool("ratio", op("GET", "/reflect", q("ratio"), q("opts")),
             input_schema={"type": "object", "properties": {
                 "ratio": {"type": "number", "minimum": 0, "maximum": 1}, "opts": {"type": "object"}}}),
        tool("note", op("GET", "/reflect", p("X-Note", "header", arg="note"))),
        tool("item", op("GET", "/reflect/{id}", p("id"))),
    ]
    m = manifest(base, *tools, auth=auth or AuthSpec(type="query", name="api_key", value="${HOSTILE_KEY}"),
                 headers={"X-Api-Key": "${HOSTILE_HEADER_KEY}", "X-Tenant": "acme"} if headers is None else headers)
    blob = ResourceSpec(name="blob", uri="hostile://blob", operation=op("GET", "/reflect", fixed("as", "octet")))
    return m.model_copy(update={"resources": [blob]}).sealed()


async def run(m: Manifest, calls: list[tuple[str, dict[str, Any]]], env: dict[str, str] | None = None,
              ) -> list[types.CallToolResult]:
    runtime = Runtime(m, RuntimeOptions(environ=SECRETS if env is None else env))
    try:
        return [await runtime.call(name, args) for name, args in calls]
    finally:
        await runtime.aclose()


def error_body(result: types.CallToolResult, code: str) -> dict[str, Any]:
    body = error_of(result)
    assert body is not None, dumped(result)
    assert body["code"] == code, body
    return body


# ============================================================================ 3. every encoding of every secret


REFLECTIONS: list[tuple[str, dict[str, Any]]] = [
    ("reflect", {"as": "json"}),  # raw, decoded, quote, quote_plus, lower hex, JSON escapes, entities, base64
    ("reflect", {"as": "text"}),
    ("reflect", {"as": "html"}),
    ("reflect", {"as": "ndjson"}),  # text by another name: scrubbed, not passed as a blob
    ("reflect", {"as": "json", "status": "400"}),  # the error message quotes the request
    ("reflect", {"as": "json", "status": "401"}),
    ("hop", {"as": "json"}),  # after a same-origin redirect, which keeps the key
    ("preview", {"dryRun": True, "note": "hello"}),  # the dry run's request and the upstream's preview
]


@pytest.mark.anyio
async def test_query_and_header_secrets_never_reach_the_model_in_any_encoding(hostile: str) -> None:
    results = await run(hostile_manifest(hostile), REFLECTIONS)
    for (name, args), result in zip(REFLECTIONS, results, strict=True):
        text = dumped(result)
        assert_hidden(text, QUERY_KEY, HEADER_KEY)
        assert "***" in text, (name, args, text[:500])  # the upstream did echo them, scrubbed
    echoed = results[0].structured_content
    assert echoed is not None
    assert echoed["headers"]["X-Api-Key"] == "***"
    assert echoed["target"].endswith("api_key=***")
    assert echoed["args"]["api_key"] == "***"  # decoded by the upstream, scrubbed by us
    assert error_body(results[4], "ARGUMENT_INVALID")["message"].count("***") >= 2
    preview = results[-1].structured_content
    assert preview is not None and preview["dryRun"] is True
    assert preview["requests"][0]["url"].endswith("api_key=***")
    assert preview["preview"]["headers"]["X-Api-Key"] == "***"


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("auth", "secrets"),
    [
        (AuthSpec(type="bearer", value="${T}"), {"T": BEARER}),
        (AuthSpec(type="basic", username="svc", password="${T}"), {"T": PASSWORD}),
        (AuthSpec(type="cookie", name="sid", value="${T}"), {"T": COOKIE}),
        (AuthSpec(type="header", name="X-Key", value="${T}"), {"T": HEADER_KEY}),
    ],
    ids=["bearer", "basic", "cookie", "header"],
)
async def test_every_auth_placement_is_scrubbed_in_every_encoding(
    hostile: str, auth: AuthSpec, secrets: dict[str, str]
) -> None:
    m = hostile_manifest(hostile, auth=auth, headers={})
    results = await run(m, REFLECTIONS, env=secrets)
    secret = secrets["T"]
    hidden = [secret]
    if auth.type == "basic":  # the Basic token itself, and the password alone
        hidden.append(base64.b64encode(f"svc:{secret}".encode()).decode())
    for result in results:
        assert_hidden(dumped(result), *hidden)


def test_the_redactor_knows_every_form_and_leaves_other_data_alone() -> None:
    redactor = Redactor({QUERY_KEY})
    for name, form in forms(QUERY_KEY).items():
        if name.startswith("b64"):
            continue  # below, in whole streams
        assert redactor.text(f"<{form}>") == "<***>", name
        assert redactor.found(f"<{form}>".encode()), name
    for k in range(3):
        stream = b"x" * k + b"api_key=" + QUERY_KEY.encode() + b"&more"
        for encode in (base64.b64encode, base64.urlsafe_b64encode):
            blob = encode(stream).decode()
            assert_hidden(redactor.text(blob), QUERY_KEY)
    mixed = quote(QUERY_KEY, safe="/")  # one encoder's choice of what to leave alone
    assert redactor.text(mixed) == "***"
    clean = {"items": [{"note": "k%2By %2F 100% & \\u002b", "n": 1.5}]}
    assert redactor.value(clean) is clean  # nothing to replace: no copy is made


@pytest.mark.anyio
async def test_no_library_logger_prints_a_secret(hostile: str) -> None:
    """httpx2's request line, httpcore2's trace, our own lines: at DEBUG, on a handler we do not own."""
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    root = logging.getLogger()
    saved = root.level
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)
    try:
        await run(hostile_manifest(hostile), [("reflect", {"as": "json"}), ("hop", {"as": "json"}),
                                              ("location", {"v": f"http://x/?api_key={QUERY_KEY}"})])
        logging.getLogger("example.client").info("GET https://api.example.com/v1?access_token=abc123def456&x=1 "
                                                 "Authorization: Bearer eyJhbGciOi.payload.sig")
    finally:
        root.removeHandler(handler)
        root.setLevel(saved)
    text = stream.getvalue()
    assert "HTTP Request: GET" in text  # httpx2 did log its request lines
    assert "api_key=***" in text
    assert_hidden(text, QUERY_KEY, HEADER_KEY)
    assert "abc123def456" not in text and "eyJhbGciOi" not in text  # credential-shaped, whoever's


def test_log_lines_are_printed_once_when_the_application_configured_logging() -> None:
    """Issue 10 part 7: a root handler (basicConfig) and ours both printed every record."""
    stream, stderr = io.StringIO(), io.StringIO()
    root = logging.getLogger()
    logger = logging.getLogger("openapi2mcp")
    saved_root, saved_ours = list(root.handlers), list(logger.handlers)
    root.handlers = [logging.StreamHandler(stream)]  # the application's (pytest's own set aside)
    try:
        configure_logging("DEBUG")
        configure_logging("DEBUG")  # twice, as serve and http_app may
        ours = [h for h in logger.handlers if getattr(h, "_openapi2mcp", False)]
        assert len(ours) == 1
        ours[0].setStream(stderr)  # type: ignore[attr-defined]
        logging.getLogger("openapi2mcp.runtime").info("one line, traceId=abc")
        assert stream.getvalue().count("one line") + stderr.getvalue().count("one line") == 1
        root.handlers = []  # nobody else prints: ours does
        logging.getLogger("openapi2mcp.runtime").info("second line")
        assert stderr.getvalue().count("second line") == 1
    finally:
        root.handlers = saved_root
        logger.handlers = saved_ours


def paged_tool(name: str, style: Literal["header_cursor", "link"]) -> ToolSpec:
    paging = PaginationSpec(style=style, header="X-Next-Cursor", items="items", page_size=2, max_items=2,
                            position=ParamSpec(name="after", location="query") if style == "header_cursor" else None)
    branch = Branch(key="default", steps=[Step(id="call", operation=op("GET", "/paged"))], pagination=paging)
    schema = {"type": "object", "properties": {"limit": {"type": "integer"}, "cursor": {"type": "string"}}}
    return ToolSpec(name=name, description="GET /paged", input_schema=schema, branches=[branch])


@pytest.mark.anyio
async def test_a_next_page_position_holding_a_secret_never_becomes_a_cursor(hostile: str) -> None:
    """A cursor is signed, not encrypted: the model can read what is in it."""
    m = manifest(hostile, paged_tool("by_header", "header_cursor"), paged_tool("by_link", "link"),
                 auth=AuthSpec(type="query", name="api_key", value="${HOSTILE_KEY}"))
    by_header, by_link = await run(m, [("by_header", {"limit": 2}), ("by_link", {"limit": 2})])
    assert "holds a credential" in error_body(by_header, "UPSTREAM_INVALID_RESPONSE")["message"]
    page = ok(by_link)  # the Link drops the API key by name: that cursor is fine
    assert page["items"] == [1, 2] and page["next_cursor"]
    for result in (by_header, by_link):
        assert_hidden(dumped(result), QUERY_KEY)


# ============================================================================ 4. binary and unknown media


@pytest.mark.anyio
@pytest.mark.parametrize("form", ["octet", "png"])
async def test_a_binary_echo_of_a_credential_is_withheld(hostile: str, form: str) -> None:
    for auth, secrets in [(None, SECRETS), (AuthSpec(type="bearer", value="${T}"), {"T": BEARER})]:
        m = hostile_manifest(hostile, auth=auth, headers=None if auth is None else {})
        (result,) = await run(m, [("reflect", {"as": form})], env=secrets)
        body = error_body(result, "UPSTREAM_INVALID_RESPONSE")
        assert "holds a credential" in body["message"]
        assert_hidden(dumped(result), *secrets.values())


@pytest.mark.anyio
async def test_a_binary_without_secrets_is_passed_unchanged_and_unknown_text_types_are_text(hostile: str) -> None:
    m = hostile_manifest(hostile, auth=AuthSpec(), headers={})
    png, ndjson = await run(m, [("reflect", {"as": "png"}), ("reflect", {"as": "ndjson"})], env={})
    block = png.content[0]
    assert isinstance(block, types.ImageContent)
    assert base64.b64decode(block.data).startswith(b"\x89PNG\r\n\x1a\nGET /reflect?as=png")
    first = ndjson.content[0]
    assert isinstance(first, types.TextContent) and '"name": "Host"' in first.text


@pytest.mark.anyio
async def test_a_resource_read_of_a_binary_echo_is_withheld(hostile: str) -> None:
    from mcp import MCPError

    runtime = Runtime(hostile_manifest(hostile), RuntimeOptions(environ=SECRETS))
    try:
        with pytest.raises(MCPError) as info:
            await runtime.catalog.read("hostile://blob")
    finally:
        await runtime.aclose()
    assert "holds a credential" in info.value.error.message
    assert_hidden(json.dumps(info.value.error.model_dump(mode="json")), QUERY_KEY, HEADER_KEY)


# ============================================================================ 5. userinfo in the base URL


@pytest.mark.parametrize(
    ("base", "env"),
    [
        ("http://svc:PASSWORD-1234@127.0.0.1:9", {}),
        ("${OPENAPI2MCP_BASE_URL}", {"OPENAPI2MCP_BASE_URL": "https://svc:PASSWORD-1234@api.example.com/v1"}),
        ("http://PASSWORD-1234@127.0.0.1:9/v1", {}),
    ],
)
def test_userinfo_in_the_base_url_is_refused_at_start_up(base: str, env: dict[str, str]) -> None:
    with pytest.raises(ConfigError) as info:
        Runtime(manifest(base, tool("me", op("GET", "/x"))), RuntimeOptions(environ=env))
    message = str(info.value)
    assert "auth: {type: basic" in message
    assert "PASSWORD-1234" not in message


def test_serve_refuses_userinfo_in_base_url(tmp_path: Path) -> None:
    path = tmp_path / "m.json"
    path.write_text(manifest("http://127.0.0.1:9", tool("me", op("GET", "/x"))).to_json())
    for args, env in [(["--base-url", "http://svc:PASSWORD-1234@127.0.0.1:9"], {}),
                      ([], {"OPENAPI2MCP_BASE_URL": "http://svc:PASSWORD-1234@127.0.0.1:9"})]:
        if not args:  # the env var applies where the Manifest's base URL reads it
            m = manifest("${OPENAPI2MCP_BASE_URL}", tool("me", op("GET", "/x")))
            path.write_text(m.to_json())
        proc = run_cli("serve", "--manifest", str(path), *args, env=env)
        assert proc.returncode == 2, proc.stderr
        assert "auth: {type: basic" in proc.stderr and "PASSWORD-1234" not in proc.stderr
        no_traceback(proc.stderr)


@pytest.mark.anyio
async def test_a_credential_in_the_base_url_query_is_a_secret(hostile: str) -> None:
    m = manifest(hostile + "/?sig=${SIG}&region=eu", reflect_tool())
    (result,) = await run(m, [("reflect", {"as": "json"})], env={"SIG": "s1gn4ture+/=xyz"})
    assert_hidden(dumped(result), "s1gn4ture+/=xyz")
    assert "region=eu" in dumped(result)


@pytest.mark.anyio
async def test_credentials_from_the_environment_are_sent_as_http_can_carry_them(hostile: str) -> None:
    """A token read with `$(cat file)` keeps its newline; one with a line break inside fails every call."""
    m = manifest(hostile, reflect_tool(), auth=AuthSpec(type="bearer", value="${T}"))
    (result,) = await run(m, [("reflect", {"as": "json"})], env={"T": BEARER + "\n"})
    assert ok(result)["headers"]["Authorization"] == "Bearer ***"
    assert_hidden(dumped(result), BEARER)
    for auth, headers in [(AuthSpec(type="bearer", value="${T}"), {}), (AuthSpec(), {"X-Api-Key": "${T}"}),
                          (AuthSpec(type="cookie", name="sid", value="${T}"), {})]:
        with pytest.raises(ConfigError) as info:
            Runtime(manifest(hostile, reflect_tool(), auth=auth, headers=headers),
                    RuntimeOptions(environ={"T": "abc\ndef;ghi"}))
        assert "cannot carry" in str(info.value) and "abc" not in str(info.value)


# ============================================================================ 6. exploded objects cannot add values


COLLISIONS: list[tuple[dict[str, Any], str, str]] = [
    ({"opts": {"raw": "tenant-evil"}}, "opts.raw", "a value fixed by this server"),
    ({"opts": {"RAW": "tenant-evil"}}, "opts.RAW", "a value fixed by this server"),  # case-insensitive servers
    ({"opts": {"raw[]": "tenant-evil"}}, "opts.raw[]", "a value fixed by this server"),  # PHP/Rails arrays
    ({"opts": {"api_key": "mine"}}, "opts.api_key", "sets itself"),  # the credential
    ({"opts": {"limit": "1000"}}, "opts.limit", "the argument limit"),  # another argument's checks skipped
    ({"opts": {"a": "1"}, "more": {"a": "2"}}, "more.a", "a key of the argument opts"),
    ({"tenant_header": "evil"}, "tenant_header", "set by this server"),  # X-Tenant is a static header
]


@pytest.mark.anyio
async def test_exploded_object_keys_never_collide_with_fixed_values_or_credentials(hostile: str) -> None:
    m = hostile_manifest(hostile)
    cookie_auth = hostile_manifest(hostile, auth=AuthSpec(type="cookie", name="sid", value="${T}"), headers={})
    results = await run(m, [("tenant", args) for args, _, _ in COLLISIONS])
    results += await run(cookie_auth, [("tenant", {"prefs": {"theme": "dark", "sid": "forged"}})], env={"T": COOKIE})
    expected = [*COLLISIONS, ({}, "prefs.sid", "sets itself")]  # the auth cookie
    for (args, field, reason), result in zip(expected, results, strict=True):
        body = error_body(result, "ARGUMENT_INVALID")
        assert body["field"] == field, (args, body)
        assert reason in body["message"], (args, body)
        assert not (result.meta or {}).get("openapi2mcp/requests"), "nothing may be sent"
    (fine,) = await run(m, [("tenant", {"opts": {"color": "red"}, "filter": {"x][raw": "1"}})])
    echoed = ok(fine)
    # the key's brackets are encoded: it cannot add a level to `filter`, nor be read as `raw`
    assert echoed["target"] == "/reflect?raw=tenant-acme&color=red&filter[x%5D%5Braw]=1&api_key=***"


@pytest.mark.anyio
async def test_query_auth_name_cannot_be_fed_by_an_argument(hostile: str) -> None:
    m = manifest(hostile, tool("me", op("GET", "/reflect", q("api_key"))),
                 auth=AuthSpec(type="query", name="api_key", value="${HOSTILE_KEY}"))
    (result,) = await run(m, [("me", {"api_key": "mine"})])
    assert error_body(result, "ARGUMENT_INVALID")["field"] == "api_key"


# ============================================================================ 7. NaN and Infinity


@pytest.mark.anyio
async def test_non_finite_numbers_are_refused_wherever_they_are(hostile: str) -> None:
    nan, inf = float("nan"), float("inf")
    m = hostile_manifest(hostile)
    results = await run(m, [("ratio", {"ratio": nan}), ("ratio", {"ratio": -inf}),
                            ("ratio", {"ratio": 0.5, "opts": {"deep": [1, inf]}})])
    for result, field in zip(results, ["ratio", "ratio", "opts.deep[1]"], strict=True):
        body = error_body(result, "ARGUMENT_INVALID")
        assert body["field"] == field
        assert "NaN and Infinity" in body["message"]
        assert not (result.meta or {}).get("openapi2mcp/requests")


@pytest.mark.anyio
async def test_nan_from_the_upstream_becomes_null_never_invalid_json(hostile: str) -> None:
    (result,) = await run(hostile_manifest(hostile), [("nan", {})])
    assert ok(result) == {"ratio": None, "big": None, "small": None, "ok": 1}
    first = result.content[0]
    assert isinstance(first, types.TextContent)
    assert json.loads(first.text, parse_constant=lambda c: pytest.fail(f"{c} in the text"))


def test_a_resource_uri_number_that_overflows_is_refused() -> None:
    from openapi2mcp.runtime.resources import coerce_variable

    assert coerce_variable("1e999", {"type": "number"}) == "1e999"  # text: the schema check refuses it
    assert coerce_variable("2.5", {"type": "number"}) == 2.5


# ============================================================================ 17. stable codes, not INTERNAL_ERROR


@pytest.mark.anyio
async def test_what_http_cannot_carry_and_what_upstreams_get_wrong_has_a_stable_code(hostile: str) -> None:
    calls: list[tuple[str, dict[str, Any], str, str]] = [
        ("note", {"note": "a\x0bb"}, "ARGUMENT_INVALID", "control characters"),
        ("note", {"note": "caf\u00e9"}, "ARGUMENT_INVALID", "ASCII"),
        ("note", {"note": "x" * 100_000}, "ARGUMENT_INVALID", "too long for an HTTP header"),
        ("item", {"id": "x" * 3_000_000}, "ARGUMENT_INVALID", f"over the limit of {MAX_URL_LENGTH}"),
        ("location", {}, "UPSTREAM_ERROR", "without a Location header"),
        ("location", {"v": "http://[::1"}, "UPSTREAM_ERROR", "not an http(s) URL"),
        ("location", {"v": "mailto:x@example.com"}, "UPSTREAM_ERROR", "not an http(s) URL"),
        ("deep", {"n": "100000"}, "UPSTREAM_INVALID_RESPONSE", f"deeper than {MAX_JSON_DEPTH} levels"),
        ("deep", {"n": "900", "kind": "object"}, "UPSTREAM_INVALID_RESPONSE", f"deeper than {MAX_JSON_DEPTH}"),
        ("deep", {"n": "129"}, "UPSTREAM_INVALID_RESPONSE", f"deeper than {MAX_JSON_DEPTH}"),
        ("charset", {"cs": "x-unknown", "latin1": "1"}, "UPSTREAM_INVALID_RESPONSE", "'x-unknown'"),
    ]
    results = await run(hostile_manifest(hostile), [(name, args) for name, args, _, _ in calls])
    for (name, _, code, words), result in zip(calls, results, strict=True):
        body = error_body(result, code)
        assert words in body["message"], (name, body)
    fields = [error_of(r)["field"] for r in results[:4]]  # type: ignore[index]
    assert fields == ["note", "note", "note", "id"]

    fine = await run(hostile_manifest(hostile), [("note", {"note": "  padded\t"}), ("deep", {"n": str(MAX_JSON_DEPTH)}),
                                                 ("charset", {"cs": "x-unknown"})])
    assert ok(fine[0])["headers"]["X-Note"] == "padded"  # HTTP drops the spaces around a value
    ok(fine[1])
    assert isinstance(fine[2].content[0], types.TextContent) and fine[2].content[0].text == "caf\u00e9 ok"


def test_the_depth_check_is_exact_at_the_limit() -> None:
    limit = MAX_JSON_DEPTH
    assert not json_depth_exceeds(b"[" * limit + b"]" * limit)
    assert json_depth_exceeds(b"[" * (limit + 1) + b"]" * (limit + 1))
    comb = b"".join(b"[[]" for _ in range(limit)) + b"]" * limit  # a leaf at every level: depth limit + 1
    assert json_depth_exceeds(comb)
    assert not json_depth_exceeds(b'["' + b"[" * 1000 + b'"]')  # brackets in strings are text
    assert not json_depth_exceeds(b'["\\\\", "\\"[[[", ' + b"{}" * 1000 + b"]")
    wide = json.dumps([{"a": [{"b": [1, {"c": "[{"}]}]} for _ in range(5000)]).encode()
    assert not json_depth_exceeds(wide)


def test_a_result_the_sdk_cannot_serialise_is_not_sent() -> None:
    deep: Any = "leaf"
    for _ in range(300):
        deep = {"a": deep}
    assert not sendable(types.CallToolResult(content=[], structured_content={"x": deep}))
    assert sendable(types.CallToolResult(content=[], structured_content={"x": [[1]]}))


# ============================================================================ through `openapi2mcp serve`


@pytest.fixture(scope="module")
def loop() -> Iterator[BlockingPortal]:
    with portal() as p_:
        yield p_


@pytest.fixture(scope="module")
def served(hostile: str, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    folder = tmp_path_factory.mktemp("hostile")
    path = folder / "hostile.manifest.json"
    path.write_text(hostile_manifest("${HOSTILE_URL}").to_json())
    return {"manifest": path, "folder": folder, "env": {"HOSTILE_URL": hostile, **SECRETS}}


def test_over_stdio_nothing_leaks_logs_print_once_and_the_audit_tells_the_truth(
    served: dict[str, Any], loop: BlockingPortal
) -> None:
    audit = served["folder"] / "audit.jsonl"
    args = ["--manifest", str(served["manifest"]), "--log-level", "debug", "--audit-log", str(audit)]
    session = McpSession.stdio(loop, args, mode="legacy", label="hostile", log_dir=served["folder"],
                               env=served["env"])
    try:
        traces = []
        for name, arguments in [*REFLECTIONS, ("reflect", {"as": "octet"})]:
            result = session.call(name, arguments)
            traces.append((result.meta or {}).get("openapi2mcp/traceId"))
        deep = session.call("deep", {"n": "900"})
        err(deep, "UPSTREAM_INVALID_RESPONSE")
        ok(session.call("reflect", {"as": "json"}))  # the server is alive and well
        stderr = session.stderr()
    finally:
        session.close()
    everything = "\n".join(session.seen) + stderr + audit.read_text() + \
        (session.stdout_copy.read_text() if session.stdout_copy else "")
    assert_hidden(everything, QUERY_KEY, HEADER_KEY)
    no_traceback(stderr)
    for trace in traces:  # issue 10 part 7: each line once
        assert stderr.count(f"traceId={trace} outcome=") == 1, stderr[-3000:]
    lines = [json.loads(line) for line in audit.read_text().splitlines()]
    deep_line = next(line for line in lines if line["tool"] == "deep")
    assert (deep_line["outcome"], deep_line["error"]) == ("error", "UPSTREAM_INVALID_RESPONSE")


def _rpc(method: str, params: dict[str, Any], ident: int | None) -> str:
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": method, "params": params}
    if ident is not None:
        message["id"] = ident
    return json.dumps(message)


def test_raw_json_rpc_with_nan_over_stdio_is_an_argument_error(served: dict[str, Any]) -> None:
    """Python's json accepts NaN: a client that writes it reaches the server (the SDK client cannot)."""
    init = {"protocolVersion": LEGACY, "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}
    lines = [
        _rpc("initialize", init, 1),
        _rpc("notifications/initialized", {}, None),
        '{"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "ratio", "arguments": '
        '{"ratio": NaN}}}',
        '{"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "ratio", "arguments": '
        '{"ratio": 0.5, "opts": {"x": -Infinity}}}}',
    ]
    proc = subprocess.Popen(cli("serve", "--manifest", str(served["manifest"])), stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=child_env(served["env"]), cwd=ROOT,
                            text=True)
    watchdog = threading.Timer(120, proc.kill)
    watchdog.start()
    answers: dict[int, Any] = {}
    try:
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write("\n".join(lines) + "\n")
        proc.stdin.flush()
        while not {2, 3} <= set(answers):
            line = proc.stdout.readline()
            assert line, "the server closed stdout before answering"
            message = json.loads(line)
            answers[message.get("id")] = message
        _, stderr = proc.communicate(timeout=60)  # closes stdin: the server ends
    finally:
        watchdog.cancel()
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    for ident, field in [(2, "ratio"), (3, "opts.x")]:
        body = answers[ident]["result"]["_meta"]["openapi2mcp/error"]
        assert (body["code"], body["field"]) == ("ARGUMENT_INVALID", field), body
        assert "openapi2mcp/requests" not in answers[ident]["result"]["_meta"]  # nothing was sent
    no_traceback(stderr)


def test_over_http_nan_is_refused_and_deep_json_is_a_parse_error_not_a_500(served: dict[str, Any]) -> None:
    token = "hostile-test-token-0123456789"
    tokens = served["folder"] / "tokens.yaml"
    tokens.write_text(f"{token}: {{subject: tester, scopes: '*'}}\n")
    args = ["--manifest", str(served["manifest"]), "--auth-tokens", str(tokens), "--log-level", "info"]
    with HttpServer.start(args, log_dir=served["folder"], env=served["env"]) as server:
        base_headers = {"authorization": f"Bearer {token}", "content-type": "application/json",
                        "accept": "application/json, text/event-stream"}
        envelope = {"io.modelcontextprotocol/protocolVersion": MODERN,
                    "io.modelcontextprotocol/clientCapabilities": {}}
        body = ('{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "ratio", '
                '"arguments": {"ratio": NaN}, "_meta": ' + json.dumps(envelope) + "}}")
        modern = {**base_headers, "mcp-protocol-version": MODERN, "mcp-method": "tools/call", "mcp-name": "ratio"}
        answer = httpx2.post(server.url, content=body, headers=modern, timeout=30, trust_env=False)
        error = answer.json()["result"]["_meta"]["openapi2mcp/error"]
        assert (error["code"], error["field"]) == ("ARGUMENT_INVALID", "ratio")

        for depth in (100_000, 900):
            deep = "[" * depth + "]" * depth
            tool_call = ('{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "ratio", '
                         '"arguments": {"opts": ' + "{" + '"a": ' + deep + "}}}}")
            for headers in (base_headers, {**base_headers, "mcp-protocol-version": MODERN}):
                for content in (deep, tool_call):
                    reply = httpx2.post(server.url, content=content, headers=headers, timeout=30, trust_env=False)
                    assert reply.status_code == 400, (depth, reply.status_code, reply.text[:300])
                    assert reply.json()["error"]["code"] in (-32700, -32600, -32602), reply.text[:300]
        # uvicorn's access log prints the request line: a credential in a client's query is scrubbed
        httpx2.get(server.base + "/healthz?access_token=inbound-secret-4711", timeout=30, trust_env=False)
        stderr = server.stderr()
    access = server.stdout_path.read_text()  # uvicorn writes its access log to stdout
    no_traceback(stderr)
    assert "Exception in ASGI application" not in stderr
    assert "GET /healthz?access_token=***" in access and "inbound-secret-4711" not in access + stderr
