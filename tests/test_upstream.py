"""Forwarding: parameter serialisation, bodies, auth, secrets, redirects, limits, error mapping.

Serialisation is tested twice: the pure functions against the OpenAPI style tables, and the raw
wire form a real upstream saw (`tests/runtime_upstream.py` echoes raw path, query and headers).
"""

from __future__ import annotations

import base64
import email.utils
import json
import time
from typing import Any

import httpx2
import pytest

from openapi2mcp.errors import ToolFailure
from openapi2mcp.manifest import AuthSpec, BodySpec, FailureMode, Manifest, ParamSpec, TimeoutSpec
from openapi2mcp.result import error_of
from openapi2mcp.runtime import Runtime, RuntimeOptions
from openapi2mcp.upstream import ConfigError, Redactor, Upstream
from openapi2mcp.upstream.request import (
    cookie_pairs,
    encode_body,
    header_value,
    path_value,
    query_pairs,
    render_path,
)
from tests.helpers import compile_example, compile_text
from tests.helpers import tool as compiled_tool
from tests.runtime_upstream import (
    PNG,
    fixed,
    free_port,
    manifest,
    op,
    p,
    q,
    tool,
    upstream_server,  # noqa: F401  (the `upstream` fixture)
)

CANARY = "CANARY-s3cr3t-7f1e9"
ARRAY = [3, 4, 5]
OBJECT = {"role": "admin", "firstName": "Alex"}


def P(style: str, explode: bool = False, location: str = "path", **kw: Any) -> ParamSpec:
    return ParamSpec(name="id", location=location, arg="id", style=style, explode=explode, **kw)  # type: ignore[arg-type]


def qs(pairs: list[tuple[str, str]]) -> str:
    return "&".join(f"{k}={v}" for k, v in pairs)


async def call(m: Manifest, name: str, args: dict[str, Any], env: dict[str, str] | None = None) -> dict[str, Any]:
    """Call a tool on a fresh Runtime; the result as the wire JSON a client would see."""
    runtime = Runtime(m, RuntimeOptions(environ=env or {}))
    try:
        result = await runtime.call(name, args)
    finally:
        await runtime.aclose()
    return result.model_dump(mode="json", by_alias=True, exclude_none=True)


def seen(result: dict[str, Any]) -> dict[str, Any]:
    """What the echo upstream received."""
    assert not result.get("isError"), result
    return result["structuredContent"]  # type: ignore[no-any-return]


def error(result: dict[str, Any]) -> dict[str, Any]:
    assert result.get("isError"), result
    assert "structuredContent" not in result, result  # errors never claim to fit outputSchema
    body: dict[str, Any] = result["_meta"]["openapi2mcp/error"]
    assert json.loads(result["content"][0]["text"]) == body
    assert body["traceId"]
    return body


# ============================================================================ pure serialisation


@pytest.mark.parametrize(
    ("style", "explode", "value", "expected"),
    [
        ("simple", False, 5, "5"),
        ("simple", False, ARRAY, "3,4,5"),
        ("simple", True, ARRAY, "3,4,5"),
        ("simple", False, OBJECT, "role,admin,firstName,Alex"),
        ("simple", True, OBJECT, "role=admin,firstName=Alex"),
        ("label", False, 5, ".5"),
        ("label", False, ARRAY, ".3,4,5"),
        ("label", True, ARRAY, ".3.4.5"),
        ("label", False, OBJECT, ".role,admin,firstName,Alex"),
        ("label", True, OBJECT, ".role=admin.firstName=Alex"),
        ("matrix", False, 5, ";id=5"),
        ("matrix", False, ARRAY, ";id=3,4,5"),
        ("matrix", True, ARRAY, ";id=3;id=4;id=5"),
        ("matrix", False, OBJECT, ";id=role,admin,firstName,Alex"),
        ("matrix", True, OBJECT, ";role=admin;firstName=Alex"),
        ("simple", False, True, "true"),
        ("simple", False, 1.5, "1.5"),
    ],
)
def test_path_styles(style: str, explode: bool, value: Any, expected: str) -> None:
    assert path_value(P(style, explode), value) == expected


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("../admin", "..%2Fadmin"),
        ("a/b", "a%2Fb"),
        ("x?y=1", "x%3Fy%3D1"),
        ("#f", "%23f"),
        ("%2e%2e", "%252e%252e"),
        ("a,b;c=d", "a%2Cb%3Bc%3Dd"),
        ("ünï", "%C3%BCn%C3%AF"),
    ],
)
def test_path_values_are_fully_encoded(value: str, expected: str) -> None:
    assert path_value(P("simple"), value) == expected


@pytest.mark.parametrize("dots", [".", ".."])
def test_dot_segments_are_encoded(dots: str) -> None:
    encoded = path_value(P("simple"), dots)
    assert render_path("/files/{id}/raw", {"id": encoded}) == "/files/" + "%2E" * len(dots) + "/raw"


@pytest.mark.parametrize(
    ("style", "explode", "value", "expected"),
    [
        ("form", True, 5, "id=5"),
        ("form", True, ARRAY, "id=3&id=4&id=5"),
        ("form", False, ARRAY, "id=3,4,5"),
        ("form", True, OBJECT, "role=admin&firstName=Alex"),
        ("form", False, OBJECT, "id=role,admin,firstName,Alex"),
        ("spaceDelimited", False, ARRAY, "id=3%204%205"),
        ("spaceDelimited", True, ARRAY, "id=3&id=4&id=5"),
        ("pipeDelimited", False, ARRAY, "id=3%7C4%7C5"),
        ("deepObject", True, OBJECT, "id[role]=admin&id[firstName]=Alex"),
        ("deepObject", True, {"a": {"b": 1}, "c": [1, 2]}, "id[a][b]=1&id[c]=1&id[c]=2"),
        ("form", True, False, "id=false"),
        ("form", True, "a b&c=d+e", "id=a%20b%26c%3Dd%2Be"),
        ("form", True, [], ""),
    ],
)
def test_query_styles(style: str, explode: bool, value: Any, expected: str) -> None:
    assert qs(query_pairs(P(style, explode, "query"), value)) == expected


def test_query_allow_reserved_keeps_reserved_but_not_separators() -> None:
    value = "/a/b:c,d&e=f#g"
    assert qs(query_pairs(P("form", True, "query"), value)) == "id=%2Fa%2Fb%3Ac%2Cd%26e%3Df%23g"
    assert qs(query_pairs(P("form", True, "query", allow_reserved=True), value)) == "id=/a/b:c,d%26e%3Df%23g"


def test_query_content_param_is_json() -> None:
    param = P("form", True, "query", content_type="application/json")
    assert qs(query_pairs(param, {"a": 1})) == "id=%7B%22a%22%3A1%7D"


@pytest.mark.parametrize(
    ("explode", "value", "expected"),
    [
        (False, 5, "5"),
        (False, ARRAY, "3,4,5"),
        (False, OBJECT, "role,admin,firstName,Alex"),
        (True, OBJECT, "role=admin,firstName=Alex"),
        (False, True, "true"),
    ],
)
def test_header_simple(explode: bool, value: Any, expected: str) -> None:
    assert header_value(P("simple", explode, "header"), value) == expected


def test_header_line_breaks_are_refused() -> None:
    with pytest.raises(ToolFailure) as info:
        header_value(P("simple", False, "header"), "a\r\nX-Evil: 1")
    assert info.value.error.code == "ARGUMENT_INVALID"
    assert info.value.error.field == "id"


@pytest.mark.parametrize(
    ("explode", "value", "expected"),
    [
        (True, 5, ["id=5"]),
        (False, ARRAY, ["id=3,4,5"]),
        (True, ARRAY, ["id=3", "id=4", "id=5"]),
        (True, OBJECT, ["role=admin", "firstName=Alex"]),
        (True, "a b;c", ["id=a%20b%3Bc"]),
    ],
)
def test_cookie_form(explode: bool, value: Any, expected: list[str]) -> None:
    assert cookie_pairs(P("form", explode, "cookie"), value) == expected


def test_body_encodings() -> None:
    assert encode_body(BodySpec(media_type="application/json"), {"a": 1}).content == b'{"a":1}'
    assert encode_body(BodySpec(media_type="application/merge-patch+json"), [1]).content == b"[1]"
    form = encode_body(BodySpec(media_type="application/x-www-form-urlencoded"), {"a": "x y", "b": [1, 2]})
    assert form.content == b"a=x+y&b=1&b=2"
    assert encode_body(BodySpec(media_type="text/plain"), "hi there").content == b"hi there"
    octets = encode_body(BodySpec(media_type="application/octet-stream", arg="data"), "AAEC")
    assert octets.content == b"\x00\x01\x02"
    assert encode_body(BodySpec(media_type="application/xml"), "<a/>").content == b"<a/>"
    with pytest.raises(ToolFailure) as info:
        encode_body(BodySpec(media_type="application/octet-stream", arg="data"), "not base64!")
    assert info.value.error.field == "data"


# ============================================================================ the wire


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("value", "raw"),
    [
        ("../admin", "/echo/..%2Fadmin"),
        ("a/b", "/echo/a%2Fb"),
        ("x?y=1", "/echo/x%3Fy%3D1"),
        ("#f", "/echo/%23f"),
        ("%2e%2e", "/echo/%252e%252e"),
        ("..", "/echo/%2E%2E"),
    ],
)
async def test_path_injection_never_changes_the_route(upstream: str, value: str, raw: str) -> None:
    m = manifest(upstream, tool("get", op("GET", "/echo/{id}", p("id"))))
    got = seen(await call(m, "get", {"id": value}))
    assert got["raw_path"] == raw
    assert got["query"] == ""
    assert got["path"].startswith("/echo/")


@pytest.mark.anyio
async def test_empty_path_value_is_an_argument_error(upstream: str) -> None:
    m = manifest(upstream, tool("get", op("GET", "/echo/{id}", p("id"))))
    body = error(await call(m, "get", {"id": ""}))
    assert body["code"] == "ARGUMENT_INVALID"
    assert body["field"] == "id"
    assert "empty" in body["message"]


@pytest.mark.anyio
async def test_base_url_path_prefix_and_query_on_the_wire(upstream: str) -> None:
    m = manifest(
        upstream + "/echo/v1?api-version=2024",
        tool(
            "list",
            op(
                "GET",
                "/things/{kind}",
                p("kind", style="label"),
                q("ids", explode=False),
                q("tag"),
                q("filter", style="deepObject"),
                q("sp", style="spaceDelimited", explode=False),
                fixed("fixed", "yes"),
            ),
        ),
    )
    args = {"kind": "big", "ids": [1, 2], "tag": ["a", "b"], "filter": {"color": "red"}, "sp": ["x", "y"]}
    got = seen(await call(m, "list", args))
    assert got["raw_path"] == "/echo/v1/things/.big"
    assert got["query"] == "api-version=2024&ids=1,2&tag=a&tag=b&filter[color]=red&sp=x%20y&fixed=yes"


@pytest.mark.anyio
async def test_headers_cookies_and_accept_on_the_wire(upstream: str) -> None:
    operation = op(
        "GET",
        "/echo",
        p("X-Ids", "header", arg="ids"),
        p("Authorization", "header", arg="spoof"),  # ignored, as OpenAPI says
        p("session", "cookie", arg="session"),
        p("prefs", "cookie", arg="prefs", explode=False),
        accept="application/json",
    )
    m = manifest(upstream, tool("h", operation), headers={"X-Client": "tests"})
    got = seen(await call(m, "h", {"ids": [1, 2], "spoof": "Bearer evil", "session": "s 1", "prefs": ["a", "b"]}))
    headers = got["headers"]
    assert headers["x-ids"] == "1,2"
    assert "authorization" not in headers
    assert headers["cookie"] == "session=s%201; prefs=a,b"
    assert headers["accept"] == "application/json"
    assert headers["x-client"] == "tests"
    assert headers["user-agent"].startswith("openapi2mcp/")


@pytest.mark.anyio
async def test_json_body_properties_and_fixed(upstream: str) -> None:
    body = BodySpec(media_type="application/json", properties={"petName": "name", "tag": "tag"}, fixed={"kind": "dog"})
    m = manifest(upstream, tool("create", op("POST", "/echo/pets", body=body)))
    got = seen(await call(m, "create", {"petName": "Rex"}))
    assert got["method"] == "POST"
    assert json.loads(got["body"]) == {"name": "Rex", "kind": "dog"}
    assert got["headers"]["content-type"] == "application/json"


@pytest.mark.anyio
async def test_whole_body_argument(upstream: str) -> None:
    body = BodySpec(media_type="application/json", arg="pet", required=True)
    m = manifest(upstream, tool("create", op("PUT", "/echo/pets", body=body)))
    got = seen(await call(m, "create", {"pet": {"name": "Rex", "tags": ["a"]}}))
    assert json.loads(got["body"]) == {"name": "Rex", "tags": ["a"]}
    missing = error(await call(m, "create", {}))
    assert missing["code"] == "ARGUMENT_INVALID"
    assert missing["field"] == "pet"


@pytest.mark.anyio
async def test_form_body(upstream: str) -> None:
    body = BodySpec(media_type="application/x-www-form-urlencoded", properties={"q": "q", "n": "n"})
    m = manifest(upstream, tool("form", op("POST", "/echo", body=body)))
    got = seen(await call(m, "form", {"q": "a b&c", "n": [1, 2]}))
    assert got["body"] == "q=a+b%26c&n=1&n=2"
    assert got["headers"]["content-type"] == "application/x-www-form-urlencoded"


@pytest.mark.anyio
async def test_multipart_body(upstream: str) -> None:
    body = BodySpec(
        media_type="multipart/form-data",
        properties={"file": "file", "title": "title", "meta": "meta", "tags": "tags"},
        binary=["file"],
    )
    m = manifest(upstream, tool("upload", op("POST", "/echo/upload", body=body)))
    args = {"file": base64.b64encode(b"\x00\x01hello").decode(), "title": "T", "meta": {"a": 1}, "tags": ["x", "y"]}
    got = seen(await call(m, "upload", args))
    raw = base64.b64decode(got["body_b64"])
    assert got["headers"]["content-type"].startswith("multipart/form-data; boundary=")
    assert b'name="title"\r\n\r\nT\r\n' in raw
    assert raw.count(b'name="tags"') == 2
    assert b'name="meta"\r\nContent-Type: application/json\r\n\r\n{"a":1}\r\n' in raw
    assert b'name="file"; filename="file"\r\nContent-Type: application/octet-stream\r\n\r\n\x00\x01hello' in raw
    bad = error(await call(m, "upload", {"file": "%%%"}))
    assert bad["code"] == "ARGUMENT_INVALID"
    assert bad["field"] == "file"


@pytest.mark.anyio
async def test_text_octet_and_other_bodies(upstream: str) -> None:
    text = op("POST", "/echo", body=BodySpec(media_type="text/plain", arg="text"))
    octets = op("POST", "/echo", body=BodySpec(media_type="application/octet-stream", arg="data"))
    xml = op("POST", "/echo", body=BodySpec(media_type="application/xml", arg="doc"))
    m = manifest(upstream, tool("text", text), tool("octets", octets), tool("xml", xml))
    assert seen(await call(m, "text", {"text": "héllo"}))["body"] == "héllo"
    got = seen(await call(m, "octets", {"data": base64.b64encode(PNG).decode()}))
    assert base64.b64decode(got["body_b64"]) == PNG
    assert got["headers"]["content-type"] == "application/octet-stream"
    got = seen(await call(m, "xml", {"doc": "<a>1</a>"}))
    assert got["body"] == "<a>1</a>"
    assert got["headers"]["content-type"] == "application/xml"


@pytest.mark.anyio
async def test_fixed_whole_body_and_multipart_part_types(upstream: str) -> None:
    fixed_body = BodySpec(media_type="application/json", value={"op": "ping", "n": [1]})
    parts = BodySpec(
        media_type="multipart/form-data",
        properties={"doc": "doc", "note": "note"},
        binary=["doc"],
        content_types={"doc": "application/pdf", "note": "text/markdown"},
    )
    m = manifest(
        upstream, tool("ping", op("POST", "/echo", body=fixed_body)), tool("up", op("POST", "/echo", body=parts))
    )
    assert json.loads(seen(await call(m, "ping", {}))["body"]) == {"op": "ping", "n": [1]}
    raw = base64.b64decode(seen(await call(m, "up", {"doc": "JVBERg==", "note": "# hi"}))["body_b64"])
    assert b'name="doc"; filename="doc"\r\nContent-Type: application/pdf\r\n\r\n%PDF' in raw
    assert b'name="note"\r\nContent-Type: text/markdown\r\n\r\n# hi' in raw


@pytest.mark.anyio
async def test_lone_surrogates_in_upstream_json_become_replacement_characters(upstream: str) -> None:
    """Valid JSON, invalid Unicode (an emoji cut in half): the call answers, as with bad UTF-8 in text."""
    raw = '{"title": "cut \\ud83d", "whole": "\\ud83d\\ude00", "\\udc00": 1}'
    m = manifest(upstream, tool("t", op("GET", "/raw", fixed("body", raw))),
                 tool("e", op("GET", "/status/400", fixed("body", '{"message": "bad \\ud800 value"}'))))
    assert seen(await call(m, "t", {})) == {"title": "cut \ufffd", "whole": "\U0001f600", "\ufffd": 1}
    assert "bad \ufffd value" in error(await call(m, "e", {}))["message"]


@pytest.mark.anyio
async def test_values_http_cannot_carry_are_argument_errors(upstream: str) -> None:
    form = BodySpec(media_type="application/x-www-form-urlencoded", properties={"note": "note"})
    m = manifest(upstream, tool("q", op("GET", "/echo", q("name"), p("X-Note", "header", arg="note"))),
                 tool("form", op("POST", "/echo", body=BodySpec(media_type="multipart/form-data",
                                                                properties={"note": "note"}))),
                 tool("urlencoded", op("POST", "/echo", body=form)))
    for name, args, field, says in [
        ("q", {"name": "cut \ud83d"}, "name", "lone surrogate"),  # valid JSON, no UTF-8
        ("form", {"note": "\udc00 x"}, "note", "lone surrogate"),
        ("urlencoded", {"note": "\udc00 x"}, "note", "lone surrogate"),
        ("q", {"name": "ok", "note": "café"}, "note", "header values are ASCII text only"),
    ]:
        body = error(await call(m, name, args))
        assert (body["code"], body["field"]) == ("ARGUMENT_INVALID", field), body
        assert says in body["message"]
    assert seen(await call(m, "q", {"name": "café ☕", "note": "plain"}))["query"] == "name=caf%C3%A9%20%E2%98%95"


# ============================================================================ auth and secrets


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("auth", "where", "expected"),
    [
        (AuthSpec(type="bearer", value="${TOKEN}"), "authorization", f"Bearer {CANARY}"),
        (AuthSpec(type="header", name="X-API-Key", value="${TOKEN}"), "x-api-key", CANARY),
        (AuthSpec(type="cookie", name="sid", value="${TOKEN}"), "cookie", f"sid={CANARY}"),
        (
            AuthSpec(type="basic", username="${USER}", password="${TOKEN}"),
            "authorization",
            "Basic " + base64.b64encode(f"bob:{CANARY}".encode()).decode(),
        ),
    ],
)
async def test_auth_kinds_reach_the_upstream_and_are_redacted(
    upstream: str, auth: AuthSpec, where: str, expected: str
) -> None:
    m = manifest(upstream, tool("me", op("GET", "/echo/me")), auth=auth)
    runtime = Runtime(m, RuntimeOptions(environ={"TOKEN": CANARY, "USER": "bob"}))
    try:
        prepared_headers = runtime.upstream.settings.headers
        cookies = runtime.upstream.settings.cookies
        assert expected in (*prepared_headers.values(), *cookies)
        result = await runtime.call("me", {})
    finally:
        await runtime.aclose()
    dumped = result.model_dump_json(by_alias=True)
    assert CANARY not in dumped
    assert base64.b64encode(f"bob:{CANARY}".encode()).decode() not in dumped
    assert result.structured_content is not None
    assert "***" in result.structured_content["headers"][where]  # the echo saw it; the client does not


@pytest.mark.anyio
async def test_query_auth_is_sent_and_shown_as_stars(upstream: str) -> None:
    m = manifest(
        upstream, tool("me", op("GET", "/echo/me", q("x"))), auth=AuthSpec(type="query", name="key", value="${TOKEN}")
    )
    result = await call(m, "me", {"x": "1"}, {"TOKEN": CANARY})
    assert CANARY not in json.dumps(result)
    assert result["structuredContent"]["query"] == "x=1&key=***"  # scrubbed echo
    assert result["_meta"]["openapi2mcp/requests"][0]["url"].endswith("/echo/me?x=1&key=***")


@pytest.mark.anyio
async def test_secret_echoed_in_an_upstream_error_is_redacted(upstream: str, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level("DEBUG", logger="openapi2mcp")
    body = json.dumps({"message": f"token {CANARY} is expired"})
    m = manifest(
        upstream,
        tool("me", op("GET", "/status/401", fixed("body", body))),
        auth=AuthSpec(type="bearer", value="${TOKEN}"),
    )
    err = error(await call(m, "me", {"who": CANARY[:3]}, {"TOKEN": CANARY}))
    assert err["code"] == "UNAUTHORIZED"
    assert "token *** is expired" in err["message"]
    assert CANARY not in caplog.text


def test_redactor_finds_secrets_in_keys_values_and_json_escapes() -> None:
    quoted = 'pa"ss\\word/ü-123'
    redactor = Redactor({CANARY, quoted})
    body = {"items": [{"note": f"key {CANARY}!", "n": 1}], "x": None}
    assert redactor.value(body) == {"items": [{"note": "key ***!", "n": 1}], "x": None}
    escaped = {quoted: [f"<{quoted}>", None, True]}  # found although serialised JSON escapes " and \\
    assert redactor.value(escaped) == {"***": ["<***>", None, True]}
    clean = {"items": [{"note": "nothing secret", "n": 1.5}]}
    assert redactor.value(clean) is clean  # nothing to replace: no copy is made
    assert Redactor(set()).value(body) is body


def test_missing_secret_blocks_start_up_naming_variable_and_key(upstream: str) -> None:
    m = manifest(upstream, tool("me", op("GET", "/echo")), auth=AuthSpec(type="bearer", value="${API_TOKEN}"))
    with pytest.raises(ConfigError) as info:
        Runtime(m, RuntimeOptions(environ={}))
    assert "API_TOKEN" in str(info.value)
    assert "upstream.auth.value" in str(info.value)
    with pytest.raises(ConfigError, match=r"upstream\.auth\.value is empty"):
        Runtime(m, RuntimeOptions(environ={"API_TOKEN": ""}))
    m2 = manifest(upstream, tool("me", op("GET", "/echo")), headers={"X-Api-Key": "${KEY}"})
    with pytest.raises(ConfigError, match=r"KEY.*upstream\.headers\.X-Api-Key"):
        Runtime(m2, RuntimeOptions(environ={}))


@pytest.mark.anyio
async def test_missing_secret_can_be_deferred_to_calls(upstream: str) -> None:
    m = manifest(upstream, tool("me", op("GET", "/echo")), auth=AuthSpec(type="bearer", value="${API_TOKEN}"))
    runtime = Runtime(m, RuntimeOptions(environ={}, require_secrets=False))
    assert [t.name for t in runtime.list_tools().tools] == ["me"]
    result = await runtime.call("me", {})
    body = error_of(result)
    assert body is not None
    assert body["code"] == "CONFIGURATION_ERROR"
    assert "API_TOKEN" in body["message"]


@pytest.mark.parametrize(
    ("base", "pattern"),
    [
        ("${API_URL}", "API_URL.*upstream.base_url"),
        ("ftp://example.com", "absolute http"),
        ("/relative/path", "absolute http"),
    ],
)
def test_bad_base_url_is_a_config_error(base: str, pattern: str) -> None:
    with pytest.raises(ConfigError, match=pattern):
        Runtime(manifest(base, tool("me", op("GET", "/echo"))), RuntimeOptions(environ={}))


@pytest.mark.anyio
async def test_base_url_default_from_template(upstream: str) -> None:
    m = manifest("${API_URL:-" + upstream + "}", tool("me", op("GET", "/echo/x")))
    assert seen(await call(m, "me", {}))["raw_path"] == "/echo/x"


# ============================================================================ status -> error


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("status", "code", "retryable"),
    [
        (400, "ARGUMENT_INVALID", False),
        (422, "ARGUMENT_INVALID", False),
        (401, "UNAUTHORIZED", False),
        (403, "FORBIDDEN", False),
        (404, "NOT_FOUND", False),
        (409, "CONFLICT", False),
        (412, "PRECONDITION_FAILED", False),
        (413, "PAYLOAD_TOO_LARGE", False),
        (429, "RATE_LIMITED", True),
        (418, "UPSTREAM_ERROR", False),
        (500, "UPSTREAM_ERROR", False),
        (502, "UPSTREAM_ERROR", True),
        (503, "UPSTREAM_ERROR", True),
        (504, "UPSTREAM_ERROR", True),
    ],
)
async def test_status_codes_map_to_stable_errors(upstream: str, status: int, code: str, retryable: bool) -> None:
    m = manifest(upstream, tool("t", op("GET", f"/status/{status}")))
    err = error(await call(m, "t", {}))
    assert (err["code"], err["retryable"], err["status"]) == (code, retryable, status)
    assert f"status {status}" in err["message"]  # the upstream's own message is quoted
    assert f"GET /status/{status} returned {status}" in err["message"]


@pytest.mark.anyio
async def test_retry_after_seconds_and_http_date(upstream: str) -> None:
    m = manifest(
        upstream,
        tool("secs", op("GET", "/status/429", fixed("retry_after", "7"))),
        tool(
            "date",
            op("GET", "/status/503", fixed("retry_after", email.utils.formatdate(time.time() + 120, usegmt=True))),
        ),
    )
    assert error(await call(m, "secs", {}))["retryAfter"] == 7.0
    later = error(await call(m, "date", {}))["retryAfter"]
    assert 100 <= later <= 121


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("body", "ct", "quoted"),
    [
        (
            {"type": "about:blank", "title": "Not Found", "detail": "pet 7 does not exist"},
            "application/problem+json",
            "Not Found: pet 7 does not exist",
        ),
        ({"error": {"message": "no such pet", "code": 1}}, "application/json", "no such pet"),
        ({"errors": [{"message": "first problem"}, {"message": "2nd"}, {"message": "3rd"}, {"message": "second"}]},
         "application/json", "first problem; 2nd; 3rd (and 1 more)"),
        ({"detail": [{"loc": ["query", "limit"], "msg": "value too large"}]}, "application/json", "value too large"),
        ({"error": "invalid_grant", "error_description": "code expired"}, "application/json", "code expired"),
        ("plain words from the upstream\nsecond line", "text/plain", "plain words from the upstream"),
    ],
)
async def test_upstream_message_is_quoted(upstream: str, body: Any, ct: str, quoted: str) -> None:
    raw = body if isinstance(body, str) else json.dumps(body)
    m = manifest(upstream, tool("t", op("GET", "/status/404", fixed("body", raw), fixed("ct", ct))))
    err = error(await call(m, "t", {}))
    assert err["code"] == "NOT_FOUND"
    assert quoted in err["message"]
    assert "second" not in err["message"]


@pytest.mark.anyio
async def test_long_upstream_message_is_truncated_and_html_is_not_quoted(upstream: str) -> None:
    m = manifest(
        upstream,
        tool("long", op("GET", "/status/500", fixed("body", json.dumps({"message": "x" * 5000})))),
        tool(
            "html", op("GET", "/status/500", fixed("body", "<html>" + "y" * 500 + "</html>"), fixed("ct", "text/html"))
        ),
    )
    err = error(await call(m, "long", {}))
    assert len(err["message"]) < 450
    assert "x" * 200 in err["message"]
    assert "<html>" not in error(await call(m, "html", {}))["message"]


@pytest.mark.anyio
async def test_upstream_validation_error_names_the_argument(upstream: str) -> None:
    body = json.dumps({"error": {"message": "must be positive", "param": "page_size"}})
    m = manifest(upstream, tool("t", op("GET", "/status/400", q("page_size", arg="limit"), fixed("body", body))))
    err = error(await call(m, "t", {"limit": -1}))
    assert (err["code"], err["field"]) == ("ARGUMENT_INVALID", "limit")


@pytest.mark.anyio
async def test_failure_modes_take_precedence(upstream: str) -> None:
    modes = {
        "404": FailureMode(code="PET_NOT_FOUND", message="no pet with this id; list pets first"),
        "5XX": FailureMode(code="PETSTORE_DOWN", retryable=True),
        "default": FailureMode(code="PETSTORE_REFUSED"),
    }
    m = manifest(
        upstream,
        tool("a", op("GET", "/status/404"), failure_modes=modes),
        tool("b", op("GET", "/status/500"), failure_modes=modes),
        tool("c", op("GET", "/status/409"), failure_modes=modes),
    )
    a = error(await call(m, "a", {}))
    assert a["code"] == "PET_NOT_FOUND"
    assert a["message"].startswith("no pet with this id; list pets first (upstream said: status 404")
    b = error(await call(m, "b", {}))
    assert (b["code"], b["retryable"]) == ("PETSTORE_DOWN", True)
    assert error(await call(m, "c", {}))["code"] == "PETSTORE_REFUSED"


# ============================================================================ transport faults


@pytest.mark.anyio
async def test_read_timeout(upstream: str) -> None:
    m = manifest(upstream, tool("slow", op("GET", "/delay", fixed("s", 3))), timeout=TimeoutSpec(read=0.2))
    err = error(await call(m, "slow", {}))
    assert (err["code"], err["retryable"]) == ("UPSTREAM_TIMEOUT", True)


@pytest.mark.anyio
async def test_total_deadline(upstream: str) -> None:
    m = manifest(upstream, tool("slow", op("GET", "/delay", fixed("s", 3))), timeout=TimeoutSpec(read=10, total=0.3))
    err = error(await call(m, "slow", {}))
    assert err["code"] == "UPSTREAM_TIMEOUT"
    assert "0.3 s" in err["message"]


@pytest.mark.anyio
async def test_connection_refused() -> None:
    m = manifest(f"http://127.0.0.1:{free_port()}", tool("t", op("GET", "/echo")))
    err = error(await call(m, "t", {}))
    assert (err["code"], err["retryable"]) == ("UPSTREAM_UNAVAILABLE", True)
    assert "127.0.0.1" not in err["message"]


@pytest.mark.anyio
async def test_same_origin_redirect_is_followed_for_get(upstream: str) -> None:
    m = manifest(
        upstream,
        tool("go", op("GET", "/redirect", fixed("to", "/echo/after?z=1"))),
        auth=AuthSpec(type="query", name="key", value="${TOKEN}"),
    )
    result = await call(m, "go", {}, {"TOKEN": CANARY})
    got = seen(result)
    assert got["raw_path"] == "/echo/after"
    assert got["query"] == "z=1&key=***"  # the key travels with same-origin hops, never shown
    assert result["_meta"]["openapi2mcp/requests"][0]["url"].endswith("/echo/after?z=1&key=***")
    assert CANARY not in json.dumps(result)


@pytest.mark.anyio
async def test_cross_origin_redirect_is_refused(upstream: str) -> None:
    other = upstream.replace("127.0.0.1", "localhost") + "/echo/stolen"
    m = manifest(upstream, tool("go", op("GET", "/redirect", fixed("to", other))))
    err = error(await call(m, "go", {}))
    assert err["code"] == "UPSTREAM_ERROR"
    assert "another origin" in err["message"]


@pytest.mark.anyio
async def test_redirects_are_not_followed_for_post_nor_forever(upstream: str) -> None:
    post = op("POST", "/redirect", fixed("to", "/echo/x"), fixed("code", 307))
    m = manifest(upstream, tool("post", post), tool("loop", op("GET", "/loop")))
    err = error(await call(m, "post", {}))
    assert (err["code"], err["status"]) == ("UPSTREAM_ERROR", 307)
    assert "redirect" in err["message"]
    looped = error(await call(m, "loop", {}))
    assert (looped["code"], looped["status"]) == ("UPSTREAM_ERROR", 302)
    assert "redirected more than 3 times" in looped["message"]


@pytest.mark.anyio
@pytest.mark.parametrize("declared", ["0", "1"])
async def test_huge_body_is_refused_without_buffering(upstream: str, declared: str) -> None:
    m = manifest(
        upstream,
        tool("big", op("GET", "/huge", fixed("n", 30_000_000), fixed("length", declared))),
        max_response_bytes=200_000,
    )
    err = error(await call(m, "big", {}))
    assert err["code"] == "RESPONSE_TOO_LARGE"
    assert "200000 bytes" in err["message"]


# ----------------------------------------------------------------------------- stale keep-alive


class _DropSecondRequest:
    """A real HTTP/1.1 server on 127.0.0.1 that answers the first request of each connection with
    keep-alive, then closes that connection without answering the next one: the race of a pooled
    connection the upstream closes just as the client reuses it."""

    def __init__(self) -> None:
        self.connections = 0
        self.requests: list[str] = []

    async def handle(self, reader: Any, writer: Any) -> None:
        self.connections += 1
        try:
            for n in range(2):
                head = await reader.readuntil(b"\r\n\r\n")
                line = head.split(b"\r\n", 1)[0].decode()
                if n == 1:
                    return  # the second request on this connection: hang up without an answer
                self.requests.append(line)
                body = b'{"ok":true}'
                writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
                             b"content-length: %d\r\nconnection: keep-alive\r\n\r\n%s" % (len(body), body))
                await writer.drain()
        except Exception:
            return
        finally:
            writer.close()


@pytest.mark.anyio
async def test_a_stale_pooled_connection_is_retried_once_for_idempotent_requests() -> None:
    import asyncio

    server = _DropSecondRequest()
    listener = await asyncio.start_server(server.handle, "127.0.0.1", 0)
    port = listener.sockets[0].getsockname()[1]
    get = tool("get", op("GET", "/thing"))
    post = tool("post", op("POST", "/thing"))
    runtime = Runtime(manifest(f"http://127.0.0.1:{port}", get, post), RuntimeOptions(environ={}))
    try:
        first = await runtime.call("get", {})
        second = await runtime.call("get", {})  # reuses the connection: dropped, resent on a new one
        assert not first.is_error and not second.is_error
        assert server.requests == ["GET /thing HTTP/1.1", "GET /thing HTTP/1.1"]
        assert server.connections == 2
        failed = await runtime.call("post", {})  # a POST on the now-reused connection is never resent
        body = error_of(failed)
        assert body is not None and body["code"] == "UPSTREAM_UNAVAILABLE"
        assert server.requests.count("POST /thing HTTP/1.1") == 0
    finally:
        await runtime.aclose()
        listener.close()


# ----------------------------------------------------------------------------- transport failures (unit)


def _broken_connection(kind: type[httpx2.TransportError]) -> Any:
    def handler(request: httpx2.Request) -> httpx2.Response:
        raise kind("injected", request=request)

    return handler


def _bad_gzip(request: httpx2.Request) -> httpx2.Response:
    return httpx2.Response(200, headers={"content-encoding": "gzip", "content-type": "application/json"},
                           stream=httpx2.ByteStream(b"this is not gzip"))  # read (and decoded) by the client


@pytest.mark.anyio
@pytest.mark.parametrize(("handler", "code", "words"), [
    (_broken_connection(httpx2.ConnectTimeout), "UPSTREAM_UNAVAILABLE", "did not accept a connection in time"),
    (_broken_connection(httpx2.ConnectError), "UPSTREAM_UNAVAILABLE", "could not reach the upstream (ConnectError)"),
    (_broken_connection(httpx2.ReadTimeout), "UPSTREAM_TIMEOUT", "did not answer in time"),
    (_bad_gzip, "UPSTREAM_INVALID_RESPONSE", "could not be decoded (bad compression)"),
])
async def test_transport_failures_become_stable_errors(handler: Any, code: str, words: str) -> None:
    """`Upstream.fetch` over an injected transport: what no real server does on cue (a connect
    timeout, a body whose compression is broken) becomes its stable error, retryable or not."""
    operation = op("GET", "/thing")
    client = Upstream(manifest("http://api.test").upstream, {}, transport=httpx2.MockTransport(handler))
    try:
        with pytest.raises(ToolFailure) as failure:
            await client.fetch(operation, {}, lambda e: None, requests=[])
    finally:
        await client.aclose()
    assert failure.value.error.code == code
    assert words in failure.value.error.message
    assert failure.value.error.retryable is (code != "UPSTREAM_INVALID_RESPONSE")


@pytest.mark.anyio
async def test_a_body_with_min_properties_is_not_sent_short(upstream: str) -> None:
    """A PATCH whose body must change something (`minProperties: 1`): only the path id given is refused
    before anything is sent, naming the fields (found by the property-based tier on the petstore)."""
    body = BodySpec(media_type="application/json", required=True, properties={"name": "name", "tag": "tag"},
                    min_properties=1)
    m = manifest(upstream, tool("patch", op("PATCH", "/echo", body=body)))
    refused = error(await call(m, "patch", {}))
    assert (refused["code"], refused["field"]) == ("ARGUMENT_INVALID", "name")
    assert "give at least 1 of name, tag (the request body may not be empty)" in refused["message"]
    assert json.loads(seen(await call(m, "patch", {"tag": "x"}))["body"]) == {"tag": "x"}
    pets = compile_example("petstore").manifest.tool("pets_update")
    assert pets is not None and pets.branches[0].steps[0].operation.body is not None
    assert pets.branches[0].steps[0].operation.body.min_properties == 1


@pytest.mark.anyio
async def test_an_empty_query_value_is_sent_only_when_the_spec_allows_it(upstream: str) -> None:
    """OpenAPI's allowEmptyValue defaults to false, and validating servers refuse `?q=`: a model's ""
    is refused by name before anything is sent, unless the spec allows it (found by the property tier)."""
    allowed = ParamSpec(name="tag", location="query", arg="tag", allow_empty=True)
    m = manifest(upstream, tool("t", op("GET", "/echo", q("name"), allowed, q("ids", explode=False))))
    refused = error(await call(m, "t", {"name": ""}))
    assert (refused["code"], refused["field"]) == ("ARGUMENT_INVALID", "name")
    assert refused["message"] == "name: may not be empty (leave it out instead)"
    assert seen(await call(m, "t", {"name": "x", "tag": ""}))["query"] == "name=x&tag="
    assert seen(await call(m, "t", {"name": "y", "ids": []}))["query"] == "name=y"  # not `ids=` (RFC 6570)
    assert seen(await call(m, "t", {"name": "y", "ids": [1, 2]}))["query"] == "name=y&ids=1,2"


@pytest.mark.anyio
async def test_an_item_holding_its_delimiter_is_refused(upstream: str) -> None:
    """`ids=a%2Cb` is split after decoding by real servers: `["a,b"]` would arrive as two items."""
    m = manifest(upstream, tool("t", op("GET", "/echo", q("ids", explode=False), q("pipes", style="pipeDelimited",
                                                                                    explode=False))))
    refused = error(await call(m, "t", {"ids": ["ok", "a,b"]}))
    assert (refused["code"], refused["field"]) == ("ARGUMENT_INVALID", "ids[1]")
    assert "may not contain ','" in refused["message"]
    assert seen(await call(m, "t", {"ids": ["a", "b"], "pipes": ["x,y"]}))["query"] == "ids=a,b&pipes=x%2Cy"
    assert error(await call(m, "t", {"pipes": ["x|y"]}))["field"] == "pipes[0]"


@pytest.mark.anyio
async def test_integral_floats_are_sent_as_integers(upstream: str) -> None:
    """JSON Schema counts 1e3 as an integer, so it passes `type: integer`; `?page=1e%2B3` would not parse."""
    m = manifest(upstream, tool("t", op("GET", "/echo", q("page"), q("ratio"))))
    assert seen(await call(m, "t", {"page": 1e3, "ratio": 0.5}))["query"] == "page=1000&ratio=0.5"


@pytest.mark.anyio
async def test_whole_bodies_of_bytes_are_base64_and_structured_octet_bodies_json(upstream: str, tmp_path: Any) -> None:
    """From a spec, as compiled: the model cannot send raw bytes, so a file body is base64 in its argument (and
    says so in its schema) in any binary media type, or wherever the schema says `format: binary`; an object body
    that a spec declares as `application/octet-stream` (Docker's do) is its JSON, not an unusable tool."""

    def post(op_id: str, media: str, schema: dict[str, Any]) -> dict[str, Any]:
        body = {"required": True, "content": {media: {"schema": schema}}}
        return {"post": {"operationId": op_id, "requestBody": body, "responses": {"200": {"description": "ok"}}}}

    spec = {"openapi": "3.0.3", "info": {"title": "Bodies", "version": "1"}, "servers": [{"url": upstream}],
            "paths": {"/echo": post("image", "image/png", {"type": "string", "description": "The picture"}),
                      "/echo/a": post("notes", "text/plain", {"type": "string", "format": "binary"}),
                      "/echo/b": post("connect", "application/octet-stream", {"type": "object", "required": [
                          "Container"], "properties": {"Container": {"type": "string"}}}),
                      "/echo/c": post("text", "text/plain", {"type": "string"}),
                      "/echo/d": post("html", "text/plain", {"type": "string", "contentMediaType": "text/html"}),
                      "/echo/e": post("b64", "text/plain", {"type": "string", "contentEncoding": "base64"}),
                      "/echo/f": post("upload", "multipart/form-data", {"type": "object", "properties": {
                          "file": {"type": "string", "format": "binary"}, "note": {"type": "string", "format": "byte"},
                          "page": {"type": "string", "contentMediaType": "text/html"}}})}}
    compiled = compile_text(tmp_path, spec, all_operations=True)
    m = compiled.manifest
    image = compiled_tool(compiled, "image").input_schema["properties"]["body"]
    assert image["contentEncoding"] == "base64" and image["contentMediaType"] == "image/png"
    assert image["description"] == "The picture. The content (image/png), base64-encoded."
    got = seen(await call(m, "image", {"body": base64.b64encode(PNG).decode()}))
    assert base64.b64decode(got["body_b64"]) == PNG and got["headers"]["content-type"] == "image/png"
    got = seen(await call(m, "notes", {"body": base64.b64encode(b"\x00raw").decode()}))
    assert base64.b64decode(got["body_b64"]) == b"\x00raw"
    bad = error(await call(m, "image", {"body": "not base64!"}))
    assert bad["code"] == "ARGUMENT_INVALID" and bad["field"] == "body"
    got = seen(await call(m, "connect", {"Container": "abc"}))
    assert json.loads(got["body"]) == {"Container": "abc"}
    assert got["headers"]["content-type"] == "application/octet-stream"
    text = compiled_tool(compiled, "text").input_schema["properties"]["body"]
    assert "contentEncoding" not in text  # text stays text
    assert seen(await call(m, "text", {"body": "plain words"}))["body"] == "plain words"
    # a multipart file part is bytes by the same rule; base64 text (`format: byte`) and text parts are fields
    parts = compiled_tool(compiled, "upload").branches[0].steps[0].operation.body
    assert parts is not None and parts.binary == ["file"]
    # 3.1: text content, or a body that is already base64 text, is sent as the model wrote it
    assert seen(await call(m, "html", {"body": "<p>hi</p>"}))["body"] == "<p>hi</p>"
    assert seen(await call(m, "b64", {"body": "aGk="}))["body"] == "aGk="


@pytest.mark.anyio
async def test_a_get_rated_as_a_write_is_not_retried_without_a_key(upstream: str) -> None:
    """Specs declare writes as GET (`GET /views.publish`): at risk medium or above the overlay says it writes,
    so it is retried like a POST (never without a key), and its contract says `idempotency: none`."""
    from openapi2mcp.manifest import Branch, RetrySpec, Step, ToolSpec, changes_state
    from openapi2mcp.manifest.contract import tool_contract
    from tests.runtime_upstream import schema_for

    def get_tool(name: str, risk: Any) -> ToolSpec:
        o = op("GET", "/status/503")
        return ToolSpec(name=name, description="GET /status/503", input_schema=schema_for(o),
                        retries=RetrySpec(max_attempts=3, backoff=0.01),
                        branches=[Branch(key="default", risk=risk, steps=[Step(id="call", operation=o)])])

    read, publish = get_tool("read", "low"), get_tool("publish", "medium")
    m = manifest(upstream, read, publish)
    assert len((await call(m, "read", {}))["_meta"]["openapi2mcp/requests"]) == 3  # a read: retried
    [once] = (await call(m, "publish", {}))["_meta"]["openapi2mcp/requests"]
    assert once["status"] == 503 and "retried" not in once
    assert not changes_state(read.branches[0], read.branches[0].steps[0].operation)
    assert changes_state(publish.branches[0], publish.branches[0].steps[0].operation)
    assert tool_contract(read).wire()["idempotency"] == "safe"
    assert tool_contract(publish).wire()["idempotency"] == "none"
