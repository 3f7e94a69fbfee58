"""MCP-side access control: bearer auth (static tokens, JWT/JWKS), permissions, step-up, rate limits,
the inbound-header allowlist (issue 5; docs/access.md).

Real servers and clients throughout: the notes example upstream counts what reaches it,
`openapi2mcp serve --transport http` runs as a subprocess (and the frozen-package runner too), the
SDK `Client` talks to it in both protocol eras with an `httpx2.AsyncClient` carrying the bearer
token, and a small Starlette app on 127.0.0.1 serves the JWKS the JWTs are checked against.
"""

from __future__ import annotations

import base64
import contextlib
import json
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx2
import jwt
import mcp_types as types
import pytest
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
from jwt.algorithms import ECAlgorithm, OKPAlgorithm, RSAAlgorithm
from mcp import Client, MCPError, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import ProtectedResourceMetadata
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from examples import Upstream
from openapi2mcp.errors import InputError
from openapi2mcp.manifest import RateLimitSpec, describe_rate, parse_rate, parse_rate_limit, parse_scopes
from openapi2mcp.runtime import AuthOptions, Runtime, RuntimeOptions, auth_config, http_app, local_caller
from openapi2mcp.runtime.access import Caller
from openapi2mcp.runtime.auth import JwtVerifier, load_static_tokens
from openapi2mcp.runtime.limits import RateLimiter
from openapi2mcp.runtime.state import MemoryState, TokenBucket
from openapi2mcp.upstream import ConfigError
from tests.e2e_support import LEGACY, MODERN, ROOT, HttpServer, child_env, cli, err, free_port, ok, running
from tests.helpers import EXAMPLES, compile_text
from tests.runtime_upstream import serve_in_thread

ERAS = (("legacy", LEGACY), ("auto", MODERN))
ACCEPT = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
# a 2026-07-28 request mirrors its method and tool name in headers (the SDK checks they match the body)
MODERN_CALL = {**ACCEPT, "MCP-Protocol-Version": MODERN, "Mcp-Method": "tools/call", "Mcp-Name": "tasks_create"}

READER = "reader-token-0123456789"  # notes:read
WRITER = "writer-token-0123456789"  # notes:read tasks:write (no step-up)
STEPPED = "stepped-token-012345678"  # notes:read tasks:write tasks:write:step-up
ADMIN = "admin-token-01234567890"  # one token per line in a second file: every scope
ENV_READER = "env-reader-token-0123456"  # from $OPENAPI2MCP_AUTH_TOKENS: tasks:read

OVERLAY = """\
openapi2mcp: 1
server: {name: notes, title: Study notes}
upstream:
  base_url: ${NOTES_API_URL:-http://127.0.0.1:8701}
  auth: {type: bearer, value: "${NOTES_API_TOKEN:-}"}
  forward_headers: [X-Tenant-Id]
tools:
  - name: notes_search
    operation: searchNotes
    permissions: [notes:read]
  - name: notes_read
    operation: readNote
    permissions: [notes:read]
    rate_limit: {rate: 1/min, burst: 2, per_caller: true}
  - name: tasks_create
    operation: createStudyTask
    risk: medium
    permissions: [tasks:write]
    step_up: true
  - name: tasks_list
    operation: listStudyTasks
    permissions: [tasks:read]
  - name: admin_run_command
    operation: runCommand
    risk: forbidden
resources:
  - uri: notes://{+path}          # reads readNote: needs what notes_read needs (notes:read)
    name: note
    operation: readNote
    mime_type: text/markdown
    response: {select: content}
"""

TOKENS_YAML = f"""\
# token -> subject and scopes
{READER}: {{subject: reader, scopes: [notes:read]}}
{WRITER}: {{subject: writer, scopes: [notes:read, tasks:write]}}
{STEPPED}: {{subject: stepped, scopes: "notes:read tasks:write tasks:write:step-up"}}
"""

READ_TOOLS = ["notes_search", "notes_read"]
ALL_TOOLS = ["notes_search", "notes_read", "tasks_create", "tasks_list"]


def task_args(label: str) -> dict[str, Any]:
    return {"title": f"{label} {time.monotonic_ns()}", "source_note": "ai-agent/mcp-basics.md"}


@contextlib.asynccontextmanager
async def client(url: str, token: str | None, mode: str, **headers: str) -> AsyncIterator[Client]:
    """The SDK client over Streamable HTTP, with `Authorization: Bearer <token>` and extra headers."""
    sent = {**headers, **({"Authorization": f"Bearer {token}"} if token else {})}
    async with (
        httpx2.AsyncClient(headers=sent, timeout=30, trust_env=False) as http,
        Client(streamable_http_client(url, http_client=http), mode=mode) as c,
    ):
        yield c


async def names(c: Client) -> list[str]:
    return [t.name for t in (await c.list_tools()).tools]


def init_message(request_id: int = 1) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "method": "initialize", "params": {
        "protocolVersion": LEGACY, "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}}


def call_message(name: str, arguments: dict[str, Any], request_id: int = 7) -> dict[str, Any]:
    """A 2026-07-28 (stateless) tools/call, as a raw HTTP client sends it."""
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": {
        "name": name, "arguments": arguments,
        "_meta": {"io.modelcontextprotocol/protocolVersion": MODERN,
                  "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "0"},
                  "io.modelcontextprotocol/clientCapabilities": {}}}}


def challenge(header: str) -> dict[str, str]:
    """Parse `Bearer k="v", k2="v2"` (the values we send have no escaped quotes)."""
    scheme, _, rest = header.partition(" ")
    assert scheme == "Bearer", header
    out = {}
    for part in rest.split('", '):
        key, _, value = part.partition("=")
        out[key.strip()] = value.strip().strip('"')
    return out


# ============================================================================ units: buckets, rates, tokens


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_token_bucket_burst_refill_and_wait() -> None:
    bucket = TokenBucket(rate=2.0, burst=3, now=0.0)
    for _ in range(3):
        assert bucket.wait(0.0) == 0.0
        bucket.take(0.0)
    assert bucket.wait(0.0) == pytest.approx(0.5)  # 2 tokens/s: one more in half a second
    assert bucket.wait(0.25) == pytest.approx(0.25)
    assert bucket.wait(0.5) == 0.0
    bucket.take(0.5)
    assert not bucket.full(0.5) and bucket.full(2.0)  # refills up to the burst, no further
    assert bucket.wait(100.0) == 0.0 and bucket.tokens == 3.0


@pytest.mark.anyio
async def test_rate_limiter_takes_all_or_nothing_and_per_caller() -> None:
    clock = Clock()
    limiter = RateLimiter(RateLimitSpec(rate=1.0, burst=3),
                          {"t": RateLimitSpec(rate=0.5, burst=1, per_caller=True)}, clock=clock)
    assert await limiter.admit("t", "alice") is None
    refused = await limiter.admit("t", "alice")  # alice's own bucket for t is empty
    assert refused is not None and refused.limit == "t" and refused.retry_after == pytest.approx(2.0)
    assert "t's limit is 30/min (burst 1, per caller)" in refused.message() and "retry in 2 s" in refused.message()
    assert await limiter.admit("t", "bob") is None  # bob has his own bucket; the server bucket is shared
    assert await limiter.admit("other", "carol") is None  # server bucket: 3 - alice - bob - carol = 0
    server = await limiter.admit("other", "carol")
    assert server is not None and server.limit == "server" and "this server's limit is 1/s" in server.message()
    # a refused call took nothing: after 1 s the server bucket has exactly one token again
    clock.now += 1.0
    assert await limiter.admit("t", "alice") is not None  # alice's t bucket needs 2 s; the server token stays
    assert await limiter.admit("other", "carol") is None
    assert await limiter.admit("other", "carol") is not None
    # a tool may be named "server": its bucket is its own, not the server's
    named = RateLimiter(RateLimitSpec(rate=1.0, burst=5), {"server": RateLimitSpec(rate=0.1, burst=1)}, clock=clock)
    assert await named.admit("server", "alice") is None
    refused = await named.admit("server", "alice")
    assert refused is not None and refused.retry_after == pytest.approx(10.0)


@pytest.mark.anyio
async def test_rate_limiter_forgets_full_caller_buckets() -> None:
    clock = Clock()
    limiter = RateLimiter(None, {"t": RateLimitSpec(rate=10.0, burst=1, per_caller=True)}, clock=clock,
                          max_caller_buckets=3)
    for n in range(3):
        assert await limiter.admit("t", f"c{n}") is None
    clock.now += 1.0  # all three are full again: forgotten when a fourth caller comes
    assert await limiter.admit("t", "c3") is None
    assert isinstance(limiter.state, MemoryState) and len(limiter.state.buckets) == 1


def test_rates_and_rate_limits() -> None:
    assert parse_rate("10/s") == (10.0, 10.0)
    assert parse_rate("100/min") == pytest.approx((100 / 60, 100.0))
    assert parse_rate("5000/hours") == pytest.approx((5000 / 3600, 5000.0))
    assert parse_rate(3) == (3.0, 3.0)
    for bad in ("10/ms", "fast", "0/s", "-1/s", "10/fortnight"):
        with pytest.raises(ValueError, match="invalid rate"):
            parse_rate(bad)
    spec = parse_rate_limit("100/min,burst=20,per_caller")
    assert (spec.burst, spec.per_caller, describe_rate(spec)) == (20, True, "100/min")
    assert parse_rate_limit("10/s").burst == 10  # the count is the default burst
    with pytest.raises(ValueError, match="RATE\\[,burst=N\\]"):
        parse_rate_limit("10/s,burst=many")


def test_static_tokens_from_the_environment_and_files(tmp_path: Path) -> None:
    env = {"OPENAPI2MCP_AUTH_TOKENS": f"{READER}:notes:read tasks:read, {ADMIN} , {WRITER}:*"}
    grants = load_static_tokens(env)
    assert grants[READER].scopes == {"notes:read", "tasks:read"} and not grants[READER].all_scopes
    assert grants[ADMIN].all_scopes and grants[WRITER].all_scopes
    assert grants[ADMIN].subject.startswith("token:") and ADMIN not in grants[ADMIN].subject
    assert load_static_tokens({"OPENAPI2MCP_AUTH_TOKENS": f"{READER} {ADMIN}"}).keys() == {READER, ADMIN}

    yaml_file = tmp_path / "tokens.yaml"
    yaml_file.write_text(TOKENS_YAML)
    grants = load_static_tokens({}, str(yaml_file))
    assert grants[STEPPED].subject == "stepped"
    assert grants[STEPPED].scopes == {"notes:read", "tasks:write", "tasks:write:step-up"}
    json_file = tmp_path / "tokens.json"
    json_file.write_text(json.dumps({READER: {"scopes": ["notes:read"]}, ADMIN: {"subject": "ops", "scopes": "*"}}))
    grants = load_static_tokens({"OPENAPI2MCP_AUTH_TOKENS_FILE": str(json_file)})
    assert grants[ADMIN].all_scopes and grants[READER].scopes == {"notes:read"}
    lines = tmp_path / "tokens.txt"
    lines.write_text(f"# one per line\n{ADMIN}\n\n{READER}  # a comment\n")
    assert all(g.all_scopes for g in load_static_tokens({}, str(lines)).values())

    problems = {
        "short:notes:read": "at least 16 characters",
    }
    for value, message in problems.items():
        with pytest.raises(ConfigError, match=message):
            load_static_tokens({"OPENAPI2MCP_AUTH_TOKENS": value})
    bad = tmp_path / "bad.yaml"
    bad.write_text(f"{READER}: {{subject: r}}\n")
    with pytest.raises(ConfigError, match="`scopes` is required") as info:
        load_static_tokens({}, str(bad))
    assert READER not in str(info.value)  # messages name the entry, never the token
    bad.write_text(f"{READER}: {{scopes: [a], role: admin}}\n")
    with pytest.raises(ConfigError, match="unknown key"):
        load_static_tokens({}, str(bad))
    with pytest.raises(ConfigError, match="cannot read"):
        load_static_tokens({}, str(tmp_path / "missing.yaml"))
    bad.write_text("# every token was removed\n")
    with pytest.raises(ConfigError, match="no tokens in it"):  # not: silently no auth on loopback
        load_static_tokens({}, str(bad))


def test_auth_configuration_rules() -> None:
    with pytest.raises(ConfigError) as info:
        auth_config(AuthOptions(), host="0.0.0.0", environ={})
    for named in ("--auth-tokens", "OPENAPI2MCP_AUTH_TOKENS", "--jwks-url", "--no-auth", "OPENAPI2MCP_NO_AUTH"):
        assert named in str(info.value)
    assert not auth_config(AuthOptions(no_auth=True), host="0.0.0.0", environ={}).enabled
    assert not auth_config(AuthOptions(), host="127.0.0.1", environ={}).enabled  # loopback: no auth needed
    tokens = {"OPENAPI2MCP_AUTH_TOKENS": READER}
    assert auth_config(AuthOptions(), host="0.0.0.0", environ=tokens).describe() == "1 static token"
    with pytest.raises(ConfigError, match="--no-auth contradicts"):
        auth_config(AuthOptions(no_auth=True), host="0.0.0.0", environ=tokens)
    with pytest.raises(ConfigError, match="--jwks-url needs --issuer and --audience"):
        auth_config(AuthOptions(jwks_url="https://idp.example.com/jwks"), host="127.0.0.1", environ={})
    with pytest.raises(ConfigError, match="give --jwks-url too"):
        auth_config(AuthOptions(issuer="https://idp.example.com"), host="127.0.0.1", environ={})
    with pytest.raises(ConfigError, match="--jwks-url must be an http"):
        auth_config(AuthOptions(jwks_url="file:///etc/passwd", issuer="i", audience="a"), host="::1", environ={})
    config = auth_config(AuthOptions(jwks_url="https://idp.example.com/jwks", issuer="https://idp.example.com",
                                     resource_url="https://mcp.example.com/mcp"), host="0.0.0.0", environ=tokens)
    assert config.describe() == "1 static token + JWT"  # audience defaults to the resource URL
    assert config.authorization_servers == ("https://idp.example.com",)
    assert parse_scopes("notes:read, tasks:write") == frozenset({"notes:read", "tasks:write"})
    assert parse_scopes("*") is None and parse_scopes("") == frozenset() and parse_scopes([]) == frozenset()


# ============================================================================ overlay -> Manifest


SPEC = EXAMPLES / "notes" / "openapi.yaml"


def test_overlay_access_keys_compile_into_the_manifest(tmp_path: Path) -> None:
    compiled = compile_text(tmp_path, SPEC.read_text(), OVERLAY.replace(
        "  forward_headers: [X-Tenant-Id]\n", "  forward_headers: [X-Tenant-Id]\n  rate_limit: 100/min\n"))
    m = compiled.manifest
    assert m.upstream.forward_headers == ["X-Tenant-Id"]
    assert m.upstream.rate_limit == RateLimitSpec(rate=100 / 60, burst=100)
    read = m.tool("notes_read")
    create = m.tool("tasks_create")
    assert read is not None and read.rate_limit == RateLimitSpec(rate=1 / 60, burst=2, per_caller=True)
    assert create is not None and create.step_up and create.step_up_scope is None
    for bad, message in (
        ("[Authorization]", "Authorization is never forwarded"),
        ("[cookie]", "cookie is never forwarded"),
        ("[Mcp-Session-Id]", "never forwarded"),
        ("['bad header']", "is not a header name"),
        ("[X-A, x-a]", "listed twice"),
    ):
        with pytest.raises(InputError, match=message):
            compile_text(tmp_path, SPEC.read_text(), OVERLAY.replace("[X-Tenant-Id]", bad))
    keyed = OVERLAY.replace('auth: {type: bearer, value: "${NOTES_API_TOKEN:-}"}',
                            'auth: {type: header, name: X-Api-Key, value: "${KEY:-}"}')
    with pytest.raises(InputError, match=r"X-Api-Key is set by upstream\.headers or upstream\.auth"):
        compile_text(tmp_path, SPEC.read_text(), keyed.replace("[X-Tenant-Id]", "[X-Api-Key]"))
    with pytest.raises(InputError, match="invalid rate"):
        compile_text(tmp_path, SPEC.read_text(), OVERLAY.replace("rate: 1/min", "rate: 1/fortnight"))
    with pytest.raises(InputError, match="'tasks write' is not an OAuth scope"):
        compile_text(tmp_path, SPEC.read_text(), OVERLAY.replace("[tasks:write]", "[tasks write]"))


@pytest.mark.anyio
async def test_http_without_auth_uses_the_local_scopes(notes_up: Upstream, tmp_path: Path) -> None:
    """Loopback without auth: callers are anonymous, with the local user's scopes (--scopes)."""
    m = compile_text(tmp_path, SPEC.read_text(), OVERLAY).manifest
    app = http_app(Runtime(m, RuntimeOptions(environ={"NOTES_API_URL": notes_up.base_url},
                                             local=local_caller("http", parse_scopes("tasks:read")))))
    with serve_in_thread(app) as base:
        for mode, _ in ERAS:
            async with client(base + "/mcp", None, mode) as anonymous:
                assert await names(anonymous) == ["tasks_list"]
                ok(await anonymous.call_tool("tasks_list", {}))
        assert httpx2.get(base + "/.well-known/oauth-protected-resource/mcp", trust_env=False).status_code == 404


def test_tool_lists_and_cursors_are_per_caller(tmp_path: Path) -> None:
    m = compile_text(tmp_path, SPEC.read_text(), OVERLAY).manifest
    runtime = Runtime(m, RuntimeOptions(page_size=1, environ={}))
    reader = Caller(id="r", scopes=frozenset({"notes:read"}), transport="http")
    reader2 = Caller(id="r2", scopes=frozenset({"notes:read"}), transport="http")
    writer = Caller(id="w", scopes=frozenset({"tasks:write", "tasks:read"}), transport="http")
    seen, cursor = [], None
    while True:
        page = runtime.list_tools(cursor, reader)
        seen += [t.name for t in page.tools]
        cursor = page.next_cursor
        if cursor is None:
            break
    assert seen == READ_TOOLS
    first = runtime.list_tools(None, reader)
    assert first.next_cursor is not None
    assert [t.name for t in runtime.list_tools(first.next_cursor, reader2).tools] == ["notes_read"]  # same view
    with pytest.raises(MCPError, match="Invalid cursor"):
        runtime.list_tools(first.next_cursor, writer)  # another caller's view: its cursors are not valid here
    with pytest.raises(MCPError, match="Invalid cursor"):
        runtime.list_tools(first.next_cursor, local_caller("memory"))
    assert [t.name for t in runtime.list_tools(None, writer).tools] == ["tasks_create"]
    assert runtime.scopes_supported() == ["notes:read", "tasks:read", "tasks:write", "tasks:write:step-up"]
    assert runtime.step_up_challenge("tasks_create", writer) == ["tasks:write", "tasks:write:step-up"]
    assert runtime.step_up_challenge("tasks_create", reader) == []  # hidden from it: an unknown tool, no 403
    anyio.run(runtime.aclose)


# ============================================================================ HTTP: static tokens


@pytest.fixture(scope="module")
def notes_up() -> Iterator[Upstream]:
    with Upstream.start("notes") as up:
        yield up


@pytest.fixture(scope="module")
def overlay_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("overlay") / "overlay.yaml"
    path.write_text(OVERLAY)
    return path


@pytest.fixture(scope="module")
def static_server(notes_up: Upstream, overlay_file: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[
        HttpServer]:
    """`serve --transport http` with a YAML token file and a token from the environment."""
    folder = tmp_path_factory.mktemp("static")
    tokens = folder / "tokens.yaml"
    tokens.write_text(TOKENS_YAML)
    args = [str(SPEC), "--overlay", str(overlay_file), "--auth-tokens", str(tokens),
            "--auth-server", "https://auth.example.com", "--log-level", "info"]
    env = {"NOTES_API_URL": notes_up.base_url, "OPENAPI2MCP_AUTH_TOKENS": f"{ENV_READER}:tasks:read",
           "OPENAPI2MCP_AUDIT_LOG": str(folder / "audit.jsonl")}
    with HttpServer.start(args, log_dir=folder, env=env) as server:
        yield server
    logs = server.stderr()
    for secret in (READER, WRITER, STEPPED, ENV_READER):
        assert secret not in logs  # tokens are never logged


def test_http_requires_a_token_and_publishes_resource_metadata(static_server: HttpServer) -> None:
    base, url = static_server.base, static_server.url
    assert httpx2.get(base + "/healthz", trust_env=False).json()["status"] == "ok"  # /healthz stays open
    missing = httpx2.post(url, json=init_message(), headers=ACCEPT, trust_env=False)
    assert missing.status_code == 401
    params = challenge(missing.headers["www-authenticate"])
    assert params == {"resource_metadata": f"{base}/.well-known/oauth-protected-resource/mcp"}
    assert missing.json()["error"] == "invalid_token"
    wrong = httpx2.post(url, json=init_message(), headers={**ACCEPT, "Authorization": "Bearer " + READER[::-1]},
                        trust_env=False)
    assert wrong.status_code == 401
    assert challenge(wrong.headers["www-authenticate"])["error"] == "invalid_token"
    basic = httpx2.post(url, json=init_message(), headers={**ACCEPT, "Authorization": "Basic " + READER},
                        trust_env=False)
    assert basic.status_code == 401
    for path in ("/.well-known/oauth-protected-resource/mcp", "/.well-known/oauth-protected-resource"):
        document = httpx2.get(base + path, trust_env=False)
        assert document.status_code == 200, path
        prm = ProtectedResourceMetadata.model_validate(document.json())  # what SDK clients parse it with
        assert str(prm.resource) == url
        assert [str(s) for s in prm.authorization_servers] == ["https://auth.example.com"]
        assert prm.scopes_supported == ["notes:read", "tasks:read", "tasks:write", "tasks:write:step-up"]
        assert prm.bearer_methods_supported == ["header"]
    good = httpx2.post(url, json=init_message(), headers={**ACCEPT, "Authorization": f"Bearer {READER}"},
                       trust_env=False)
    assert good.status_code == 200 and good.json()["result"]["protocolVersion"] == LEGACY


@pytest.mark.anyio
@pytest.mark.parametrize(("mode", "protocol"), ERAS)
async def test_http_scopes_decide_what_a_caller_sees_and_calls(
    static_server: HttpServer, notes_up: Upstream, mode: str, protocol: str
) -> None:
    url = static_server.url
    before = notes_up.count("createStudyTask")
    async with client(url, READER, mode) as reader:
        assert reader.protocol_version == protocol
        assert await names(reader) == READ_TOOLS
        ok(await reader.call_tool("notes_search", {"keyword": "mcp"}))
        refusals = []
        for name in ("tasks_create", "admin_run_command", "no.such_tool"):
            with pytest.raises(MCPError) as info:
                await reader.call_tool(name, task_args("reader"))
            refusals.append((info.value.code, info.value.error.message.replace(name, "<tool>")))
        # a tool the caller may not use is refused exactly like an unknown (or forbidden) one
        assert refusals == [(types.INVALID_PARAMS, "Unknown tool: <tool>")] * 3
    async with client(url, ENV_READER, mode) as env_reader:  # the token from $OPENAPI2MCP_AUTH_TOKENS
        assert await names(env_reader) == ["tasks_list"]
    async with client(url, STEPPED, mode) as stepped:
        assert await names(stepped) == [*READ_TOOLS, "tasks_create"]
        ok(await stepped.call_tool("tasks_create", task_args("stepped")))
    assert notes_up.count("createStudyTask") == before + 1  # only the stepped-up call reached the upstream


@pytest.mark.anyio
@pytest.mark.parametrize(("mode", "protocol"), ERAS)
async def test_resources_need_the_permissions_of_their_operation(
    static_server: HttpServer, notes_up: Upstream, mode: str, protocol: str
) -> None:
    url, uri = static_server.url, "notes://ai-agent/mcp-basics.md"
    before = notes_up.count("readNote")
    async with client(url, READER, mode) as reader:  # notes:read, like the notes_read tool
        templates = (await reader.list_resource_templates()).resource_templates
        assert [t.uri_template for t in templates] == ["notes://{+path}"]
        read = await reader.read_resource(uri)
        assert "MCP" in read.contents[0].text  # type: ignore[union-attr]
    async with client(url, ENV_READER, mode) as other:  # tasks:read only: the resource is not there
        assert (await other.list_resource_templates()).resource_templates == []
        with pytest.raises(MCPError) as info:
            await other.read_resource(uri)
        assert "no resource has this URI" in info.value.error.message
        assert "notes://" not in info.value.error.message.split("serves:")[-1]  # nor does it name the hidden one
    assert notes_up.count("readNote") == before + 1  # the refused read never reached the upstream


@pytest.mark.anyio
@pytest.mark.parametrize(("mode", "protocol"), ERAS)
async def test_step_up_is_a_403_scope_challenge(
    static_server: HttpServer, notes_up: Upstream, mode: str, protocol: str
) -> None:
    url = static_server.url
    before = notes_up.count("createStudyTask")
    async with client(url, WRITER, mode) as writer:
        assert await names(writer) == [*READ_TOOLS, "tasks_create"]  # listed: it may ask for the step-up
        with pytest.raises(MCPError) as info:
            await writer.call_tool("tasks_create", task_args("writer"))
        assert info.value.code == -32001
        assert "insufficient_scope" in info.value.error.message
        assert "tasks:write:step-up" in info.value.error.message
        ok(await writer.call_tool("notes_search", {"keyword": "mcp"}))  # the session goes on
    async with httpx2.AsyncClient(trust_env=False) as http:
        raw = await http.post(url, json=call_message("tasks_create", task_args("raw")),
                              headers={**MODERN_CALL, "Authorization": f"Bearer {WRITER}"})
        assert raw.status_code == 403
        params = challenge(raw.headers["www-authenticate"])
        assert params["error"] == "insufficient_scope"
        assert params["scope"] == "tasks:write tasks:write:step-up"
        assert params["resource_metadata"] == f"{static_server.base}/.well-known/oauth-protected-resource/mcp"
        body = raw.json()
        assert body["id"] == 7 and body["error"]["data"] == {"error": "insufficient_scope",
                                                             "scope": "tasks:write tasks:write:step-up"}
        hidden = await http.post(url, json=call_message("tasks_create", task_args("raw")),
                                 headers={**MODERN_CALL, "Authorization": f"Bearer {READER}"})
        # no 403 for a tool the caller may not see: just "unknown tool" (INVALID_PARAMS, which the
        # 2026-07-28 transport sends with HTTP 400)
        assert hidden.status_code == 400 and "www-authenticate" not in hidden.headers
        assert hidden.json()["error"]["message"] == "Unknown tool: tasks_create"
    assert notes_up.count("createStudyTask") == before
    # the 403 never reaches the MCP handler, but the refusal is audited like any other denial
    audit = [json.loads(line) for line in (static_server.stdout_path.parent / "audit.jsonl").read_text().splitlines()]
    denied = [a for a in audit if a.get("tool") == "tasks_create" and a["caller"]["id"] == "writer"]
    assert len(denied) >= 2 and all((a["outcome"], a["error"]) == ("denied", "PERMISSION_DENIED") for a in denied)
    assert {a["arguments"]["title"].split()[0] for a in denied} == {"writer", "raw"}


@pytest.mark.anyio
@pytest.mark.parametrize(("mode", "protocol"), ERAS)
async def test_only_allowlisted_inbound_headers_reach_the_upstream(
    static_server: HttpServer, notes_up: Upstream, mode: str, protocol: str
) -> None:
    tenant = f"tenant-{mode}"
    async with client(static_server.url, READER, mode, **{
        "X-Tenant-Id": tenant, "Cookie": "session=mcp-cookie", "X-Other": "not-allowlisted",
        "Proxy-Authorization": "Basic c2VjcmV0",
    }) as reader:
        ok(await reader.call_tool("notes_search", {"keyword": "agent"}))
    sent = notes_up.last_request("searchNotes")["headers"]
    assert sent["x-tenant-id"] == tenant
    for never in ("authorization", "cookie", "x-other", "proxy-authorization", "mcp-session-id",
                  "mcp-protocol-version"):
        assert never not in sent, (never, sent)
    assert READER not in json.dumps(sent)


@pytest.mark.anyio
async def test_rate_limits_refuse_without_calling_the_upstream(static_server: HttpServer, notes_up: Upstream) -> None:
    url = static_server.url
    before = notes_up.count("readNote")
    path = {"path": "ai-agent/mcp-basics.md"}
    async with client(url, STEPPED, "legacy") as stepped:
        ok(await stepped.call_tool("notes_read", path))
        ok(await stepped.call_tool("notes_read", path))
        limited = err(await stepped.call_tool("notes_read", path), "RATE_LIMITED")
        assert limited["retryable"] is True
        assert 0 < limited["retryAfter"] <= 60
        assert "notes_read's limit is 1/min (burst 2, per caller)" in limited["message"]
        ok(await stepped.call_tool("notes_search", {"keyword": "mcp"}))  # other tools are not limited
    async with client(url, WRITER, "auto") as writer:  # per caller: the writer has its own bucket
        ok(await writer.call_tool("notes_read", path))  # (the reader's went on the `note` resource: same limit)
    assert notes_up.count("readNote") == before + 3  # the refused call made no request


# ============================================================================ HTTP: JWT against a JWKS


ISSUER = "https://idp.example.com"
AUDIENCE = "https://mcp.example.com/mcp"


class Jwks:
    """Signing keys (RSA, EC P-256, Ed25519) and a JWKS endpoint on 127.0.0.1 that counts fetches."""

    def __init__(self) -> None:
        self.rsa = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.ec = ec.generate_private_key(ec.SECP256R1())
        self.ed = ed25519.Ed25519PrivateKey.generate()
        self.keys = [
            {**RSAAlgorithm.to_jwk(self.rsa.public_key(), as_dict=True), "kid": "rsa-1", "alg": "RS256", "use": "sig"},
            {**ECAlgorithm.to_jwk(self.ec.public_key(), as_dict=True), "kid": "ec-1", "alg": "ES256", "use": "sig"},
            {**OKPAlgorithm.to_jwk(self.ed.public_key(), as_dict=True), "kid": "ed-1", "alg": "EdDSA", "use": "sig"},
        ]
        self.fetches = 0

    def app(self) -> Starlette:
        async def jwks(request: Request) -> JSONResponse:
            self.fetches += 1
            return JSONResponse({"keys": self.keys})

        return Starlette(routes=[Route("/jwks", jwks)])

    def mint(self, alg: str = "RS256", kid: str | None = None, key: Any = None, **claims: Any) -> str:
        now = int(time.time())
        body = {"iss": ISSUER, "aud": AUDIENCE, "sub": "alice", "iat": now, "exp": now + 300,
                "scope": "notes:read"} | claims
        body = {k: v for k, v in body.items() if v is not None}
        signer: Any = key or {"RS256": self.rsa, "ES256": self.ec, "EdDSA": self.ed}[alg]
        default_kid = {"RS256": "rsa-1", "ES256": "ec-1", "EdDSA": "ed-1"}.get(alg, "rsa-1")
        return jwt.encode(body, signer, algorithm=alg, headers={"kid": kid or default_kid})


def unsigned(**claims: Any) -> str:
    def part(data: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(data).encode()).rstrip(b"=").decode()

    now = int(time.time())
    body = {"iss": ISSUER, "aud": AUDIENCE, "sub": "mallory", "exp": now + 300, "scope": "notes:read"} | claims
    return f"{part({'alg': 'none', 'typ': 'JWT', 'kid': 'rsa-1'})}.{part(body)}."


@pytest.fixture(scope="module")
def jwks() -> Iterator[tuple[Jwks, str]]:
    keys = Jwks()
    with serve_in_thread(keys.app()) as base:
        yield keys, base + "/jwks"


@pytest.fixture(scope="module")
def jwt_server(notes_up: Upstream, overlay_file: Path, jwks: tuple[Jwks, str],
               tmp_path_factory: pytest.TempPathFactory) -> Iterator[HttpServer]:
    folder = tmp_path_factory.mktemp("jwt")
    args = [str(SPEC), "--overlay", str(overlay_file), "--jwks-url", jwks[1], "--issuer", ISSUER,
            "--audience", AUDIENCE, "--log-level", "info"]
    with HttpServer.start(args, log_dir=folder, env={"NOTES_API_URL": notes_up.base_url}) as server:
        yield server


@pytest.mark.anyio
async def test_jwt_bearer_tokens_are_verified_against_the_jwks(
    jwt_server: HttpServer, jwks: tuple[Jwks, str], notes_up: Upstream
) -> None:
    keys, _ = jwks
    url = jwt_server.url
    for (mode, protocol), alg in zip([*ERAS, ERAS[0]], ("RS256", "ES256", "EdDSA"), strict=True):
        async with client(url, keys.mint(alg), mode) as c:
            assert c.protocol_version == protocol
            assert await names(c) == READ_TOOLS, alg
    listed_with_scp = keys.mint(scope=None, scp=["tasks:read", "notes:read"])
    async with client(url, listed_with_scp, "auto") as c:
        assert await names(c) == [*READ_TOOLS, "tasks_list"]  # scopes from `scp` (a list) work too

    now = int(time.time())
    other_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    refused = {
        "expired": keys.mint(exp=now - 120, iat=now - 600),
        "wrong audience": keys.mint(aud="https://other.example.com/mcp"),
        "wrong issuer": keys.mint(iss="https://evil.example.com"),
        "no subject": keys.mint(sub=None),
        "not yet valid": keys.mint(nbf=now + 600),
        "unknown key": keys.mint(kid="rsa-2", key=other_key),
        "signed by another key with a known kid": keys.mint(key=other_key),
        "HS256": keys.mint(alg="HS256", key="a-shared-secret-of-32-bytes-long!"),
        "alg none": unsigned(),
        "garbage": "not.a.jwt",
    }
    async with httpx2.AsyncClient(trust_env=False) as http:
        for label, token in refused.items():
            answer = await http.post(url, json=init_message(), headers={**ACCEPT, "Authorization": f"Bearer {token}"})
            assert answer.status_code == 401, label
            assert challenge(answer.headers["www-authenticate"])["error"] == "invalid_token", label
        document = (await http.get(jwt_server.base + "/.well-known/oauth-protected-resource/mcp")).json()
        assert document["authorization_servers"] == [ISSUER]  # --auth-server defaults to the issuer

        # step-up with JWT scopes: 403 naming the scope, then accepted with it
        before = notes_up.count("createStudyTask")
        writer = keys.mint(scope="notes:read tasks:write")
        answer = await http.post(url, json=call_message("tasks_create", task_args("jwt")),
                                 headers={**MODERN_CALL, "Authorization": f"Bearer {writer}"})
        assert answer.status_code == 403
        assert challenge(answer.headers["www-authenticate"])["scope"] == "tasks:write tasks:write:step-up"
        assert notes_up.count("createStudyTask") == before
    stepped = keys.mint(scope="notes:read tasks:write tasks:write:step-up")
    async with client(url, stepped, "legacy") as c:
        ok(await c.call_tool("tasks_create", task_args("jwt stepped")))
    assert notes_up.count("createStudyTask") == before + 1
    logs = jwt_server.stderr()
    assert "bearer JWT refused: ExpiredSignatureError" in logs
    assert "InvalidAudienceError" in logs and "InvalidIssuerError" in logs
    for token in [*refused.values(), writer, stepped]:
        assert token not in logs


@pytest.mark.anyio
async def test_jwks_is_cached_and_refetched_for_an_unknown_kid(jwks: tuple[Jwks, str]) -> None:
    keys, url = jwks
    verifier = JwtVerifier(url, issuer=ISSUER, audience=AUDIENCE, refetch_cooldown=0)
    start = keys.fetches
    for _ in range(3):
        assert await verifier.verify_token(keys.mint()) is not None
    assert keys.fetches == start + 1  # cached
    rotated = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    keys.keys.append({**RSAAlgorithm.to_jwk(rotated.public_key(), as_dict=True), "kid": "rsa-2", "alg": "RS256"})
    try:
        token = await verifier.verify_token(keys.mint(kid="rsa-2", key=rotated, scope="a b", client_id="app"))
        assert token is not None and token.scopes == ["a", "b"] and token.subject == "alice"
        assert token.client_id == "app" and token.token == "***"
        assert keys.fetches == start + 2  # the unknown kid fetched the key set again, once
    finally:
        keys.keys.pop()
    # a key removed from the JWKS stops verifying once the cached set expires (no per-key cache forever)
    short = JwtVerifier(url, issuer=ISSUER, audience=AUDIENCE, refetch_cooldown=0, cache_seconds=0.5)
    assert await short.verify_token(keys.mint(alg="ES256")) is not None
    removed = keys.keys.pop(1)
    try:
        await anyio.sleep(0.6)
        assert await short.verify_token(keys.mint(alg="ES256")) is None
    finally:
        keys.keys.insert(1, removed)
    slow = JwtVerifier("http://127.0.0.1:9/jwks", issuer=ISSUER, audience=AUDIENCE, timeout=2)
    assert await slow.verify_token(keys.mint()) is None  # an unreachable JWKS refuses, it does not crash


# ============================================================================ binding, stdio, the frozen package


def test_non_loopback_http_without_auth_is_refused(overlay_file: Path, tmp_path: Path) -> None:
    args = [*cli("serve", str(SPEC), "--overlay", str(overlay_file), "--transport", "http", "--host", "0.0.0.0",
                 "--allowed-host", "mcp.example.com", "--port", str(free_port()))]
    done = subprocess.run(args, env=child_env(), cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert "serving on 0.0.0.0 (not loopback) needs auth" in done.stderr
    for flag in ("--auth-tokens", "--jwks-url", "--no-auth"):
        assert flag in done.stderr
    assert "Traceback" not in done.stderr
    # an explicit --no-auth serves (checked through loopback, with the Host it allows)
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    command = cli("serve", str(SPEC), "--overlay", str(overlay_file), "--transport", "http", "--host", "0.0.0.0",
                  "--allowed-host", "127.0.0.1", "--port", str(port), "--no-auth")
    with running(command, child_env(), tmp_path / "no-auth.log", base):
        answer = httpx2.post(base + "/mcp", json=init_message(), headers=ACCEPT, trust_env=False)
        assert answer.status_code == 200
    assert "(auth: none; anonymous callers have every scope)" in (tmp_path / "no-auth.log").read_text()


@pytest.mark.anyio
async def test_stdio_scopes_and_the_server_rate_limit(notes_up: Upstream, overlay_file: Path, tmp_path: Path) -> None:
    """stdio: the local user's scopes (--scopes) and a server-wide --rate-limit."""
    params = StdioServerParameters(
        command=sys.executable,
        args=[*cli("serve", str(SPEC), "--overlay", str(overlay_file), "--scopes", "notes:read tasks:write",
                   "--rate-limit", "2/min")[1:]],
        env=child_env({"NOTES_API_URL": notes_up.base_url}), cwd=str(ROOT),
    )
    before_search, before_create = notes_up.count("searchNotes"), notes_up.count("createStudyTask")
    with (tmp_path / "stderr.log").open("w") as errlog:
        async with Client(stdio_client(params, errlog=errlog)) as c:
            assert await names(c) == [*READ_TOOLS, "tasks_create"]  # not tasks_list: no tasks:read
            with pytest.raises(MCPError, match=r"Unknown tool: tasks_list"):
                await c.call_tool("tasks_list", {})
            denied = err(await c.call_tool("tasks_create", task_args("stdio")), "PERMISSION_DENIED")
            assert "tasks:write:step-up" in denied["message"]  # stdio has no 403: a tool error instead
            ok(await c.call_tool("notes_search", {"keyword": "mcp"}))
            ok(await c.call_tool("notes_read", {"path": "ai-agent/mcp-basics.md"}))
            limited = err(await c.call_tool("notes_search", {"keyword": "mcp"}), "RATE_LIMITED")
            assert "this server's limit is 2/min" in limited["message"] and limited["retryAfter"] > 0
    # refusals (unknown tool, step-up) take no token; the third call over 2/min made no request
    assert notes_up.count("searchNotes") == before_search + 1
    assert notes_up.count("createStudyTask") == before_create


@pytest.fixture(scope="module")
def package_dir(overlay_file: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A frozen package as `build` lays it out (manifest.json beside the module), importable from a folder."""
    root = tmp_path_factory.mktemp("pkg")
    module = root / "notes_access_mcp"
    module.mkdir()
    (module / "__init__.py").write_text("")
    m = compile_text(root, SPEC.read_text(), OVERLAY).manifest
    (module / "manifest.json").write_text(m.to_json())
    (module / "build.json").write_text(json.dumps({"name": "notes-access-mcp", "version": "1.0.0"}))
    return root


def runner(package_dir: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "openapi2mcp.serving", "notes_access_mcp", *args]


def runner_env(package_dir: Path, extra: dict[str, str]) -> dict[str, str]:
    env = child_env(extra)
    env["PYTHONPATH"] = f"{package_dir}:{env['PYTHONPATH']}"
    return env


def test_package_runner_refuses_non_loopback_without_auth(package_dir: Path) -> None:
    check = [*runner(package_dir, "--transport", "http", "--host", "0.0.0.0", "--allowed-host", "x.example", "--check")]
    done = subprocess.run(check, env=runner_env(package_dir, {}), capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "OPENAPI2MCP_AUTH_TOKENS" in done.stderr and "--no-auth" in done.stderr
    done = subprocess.run(check, env=runner_env(package_dir, {"OPENAPI2MCP_AUTH_TOKENS": f"{READER}:notes:read"}),
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    done = subprocess.run(check, env=runner_env(package_dir, {"OPENAPI2MCP_NO_AUTH": "1"}),
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    done = subprocess.run([*check, "--rate-limit", "fast"], env=runner_env(package_dir, {"OPENAPI2MCP_NO_AUTH": "1"}),
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "invalid rate 'fast'" in done.stderr


@pytest.mark.anyio
async def test_package_runner_serves_with_the_same_auth(package_dir: Path, notes_up: Upstream, tmp_path: Path) -> None:
    port = free_port()
    tokens = tmp_path / "tokens.yaml"
    tokens.write_text(TOKENS_YAML)
    env = runner_env(package_dir, {"NOTES_API_URL": notes_up.base_url, "OPENAPI2MCP_AUTH_TOKENS_FILE": str(tokens),
                                   "OPENAPI2MCP_PORT": str(port), "OPENAPI2MCP_TRANSPORT": "http"})
    log = tmp_path / "runner.log"
    base = f"http://127.0.0.1:{port}"
    with running(runner(package_dir), env, log, base):
        assert httpx2.post(base + "/mcp", json=init_message(), headers=ACCEPT, trust_env=False).status_code == 401
        async with client(base + "/mcp", READER, "auto") as reader:
            assert await names(reader) == READ_TOOLS
        async with client(base + "/mcp", WRITER, "legacy") as writer:
            with pytest.raises(MCPError, match="insufficient_scope"):
                await writer.call_tool("tasks_create", task_args("runner"))
    text = log.read_text()
    assert "(auth: 3 static tokens)" in text and READER not in text
