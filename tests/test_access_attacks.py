"""Attacks on the access layer (issue 11 items 1, 2, 12, 13, 15, 18; docs/access.md, docs/security.md).

Each test tries the attack the red team found against the real thing: `openapi2mcp serve
--transport http` as a subprocess over the notes example upstream (which records every request),
the SDK `Client` and raw HTTP or raw sockets from the test. Each failed before its fix:

1. an empty scope list (`scopes: []`, `scopes: ""`, `OPENAPI2MCP_SCOPES=`, `--scopes ""`) granted
   every scope;
2. a resource over the operation of a critical, step-up, narrowed, rate-limited tool was read
   without the step-up scope, past the narrowing and past the limit;
12. half-sent requests were never timed out;
13. the Host header was reflected into the 401 challenge and the OAuth metadata;
15. the 2026-07-28 confirmation round trip spent two rate-limit tokens;
18. one caller could open sessions until the SDK's table was full.
"""

from __future__ import annotations

import contextlib
import json
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

import anyio
import httpx2
import mcp_types as types
import pytest
from mcp import Client, MCPError

from examples import Upstream
from openapi2mcp.errors import InputError
from openapi2mcp.manifest import parse_scopes
from openapi2mcp.runtime import Runtime, RuntimeOptions
from openapi2mcp.serving import local_scopes, resolve
from openapi2mcp.upstream import ConfigError
from tests.e2e_support import LEGACY, HttpServer, McpSession, err, ok, portal, run_cli
from tests.helpers import EXAMPLES, compile_text
from tests.runtime_upstream import serve_in_thread
from tests.test_access import AUDIENCE, ISSUER, Jwks, challenge, client, names

SPEC = EXAMPLES / "notes" / "openapi.yaml"
ACCEPT = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": LEGACY, "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}}

# ============================================================================ item 1: "none" is not "all"

OVERLAY_SCOPES = """\
openapi2mcp: 1
server: {name: notes, title: Study notes}
upstream: {base_url: "${NOTES_API_URL}"}
tools:
  - name: notes_search            # no permissions: open to every authenticated caller
    operation: searchNotes
  - name: notes_read
    operation: readNote
    permissions: [notes:read]
  - name: tasks_create
    operation: createStudyTask
    risk: critical
    permissions: [tasks:write]
    step_up: true
"""

EMPTY_LIST = "empty-list-token-0123456789"
EMPTY_TEXT = "empty-text-token-0123456789"
EMPTY_ENV = "empty-env-token-01234567890"
ALICE = "alice-token-0123456789abcd"  # notes:read
ALICE_TOO = "alice-second-token-012345"  # the same subject: her sessions count together
BOB = "bob-token-0123456789abcdef"  # notes:read
EVERYTHING = "star-token-0123456789abcd"  # "*": every scope, written down

TOKENS = f"""\
{EMPTY_LIST}: {{subject: nobody, scopes: []}}
{EMPTY_TEXT}: {{subject: blank, scopes: ""}}
{ALICE}: {{subject: alice, scopes: [notes:read]}}
{ALICE_TOO}: {{subject: alice, scopes: [notes:read]}}
{BOB}: {{subject: bob, scopes: [notes:read]}}
{EVERYTHING}: {{subject: root, scopes: "*"}}
"""

OPEN_ONLY = ["notes_search"]
ALL_TOOLS = ["notes_search", "notes_read", "tasks_create"]


@pytest.fixture(scope="module")
def notes_up() -> Iterator[Upstream]:
    with Upstream.start("notes") as up:
        yield up


@pytest.fixture(scope="module")
def jwks() -> Iterator[tuple[Jwks, str]]:
    keys = Jwks()
    with serve_in_thread(keys.app()) as base:
        yield keys, base + "/jwks"


@pytest.fixture(scope="module")
def auth_server(notes_up: Upstream, jwks: tuple[Jwks, str], tmp_path_factory: pytest.TempPathFactory) -> Iterator[
        HttpServer]:
    """Static tokens and JWTs together, short request deadlines, two sessions per caller."""
    folder = tmp_path_factory.mktemp("auth")
    (folder / "overlay.yaml").write_text(OVERLAY_SCOPES)
    (folder / "tokens.yaml").write_text(TOKENS)
    args = [str(SPEC), "--overlay", str(folder / "overlay.yaml"), "--auth-tokens", str(folder / "tokens.yaml"),
            "--jwks-url", jwks[1], "--issuer", ISSUER, "--audience", AUDIENCE, "--log-level", "info",
            "--header-timeout", "2", "--body-timeout", "2", "--max-sessions-per-caller", "2"]
    env = {"NOTES_API_URL": notes_up.base_url, "OPENAPI2MCP_AUTH_TOKENS": f"{EMPTY_ENV}:"}
    with HttpServer.start(args, log_dir=folder, env=env) as server:
        yield server


@pytest.mark.anyio
async def test_an_empty_scope_list_grants_no_scope(auth_server: HttpServer, jwks: tuple[Jwks, str],
                                                   notes_up: Upstream) -> None:
    keys, _ = jwks
    nothing = {
        "token file scopes: []": EMPTY_LIST,
        'token file scopes: ""': EMPTY_TEXT,
        "OPENAPI2MCP_AUTH_TOKENS token:": EMPTY_ENV,
        "JWT without scope or scp": keys.mint(scope=None, sub="jwt-1"),
        'JWT scope: ""': keys.mint(scope="", sub="jwt-2"),
        "JWT scp: []": keys.mint(scope=None, scp=[], sub="jwt-3"),
        'JWT scope: "*"': keys.mint(scope="*", sub="jwt-4"),  # a JWT's "*" is a scope named "*", not every scope
    }
    before = (notes_up.count("readNote"), notes_up.count("createStudyTask"))
    for label, token in nothing.items():
        async with client(auth_server.url, token, "auto") as c:
            assert await names(c) == OPEN_ONLY, label  # only the tool that needs no scope
            ok(await c.call_tool("notes_search", {"keyword": "mcp"}))
            for hidden in ("notes_read", "tasks_create"):
                with pytest.raises(MCPError) as info:
                    await c.call_tool(hidden, {"path": "ai-agent/mcp-basics.md", "title": "x",
                                               "source_note": "ai-agent/mcp-basics.md"})
                assert info.value.error.message == f"Unknown tool: {hidden}", label
    assert (notes_up.count("readNote"), notes_up.count("createStudyTask")) == before
    async with client(auth_server.url, EVERYTHING, "auto") as c:  # only "*" is every scope
        assert await names(c) == ALL_TOOLS


def test_empty_local_scopes_are_no_scope(notes_up: Upstream, tmp_path: Path) -> None:
    """`--scopes ""` and a set-but-empty OPENAPI2MCP_SCOPES (stdio, the package runner's variable)."""
    assert parse_scopes("") == frozenset() and parse_scopes([]) == frozenset() and parse_scopes(" , ") == frozenset()
    assert parse_scopes("*") is None and parse_scopes(["*"]) is None
    with pytest.raises(ValueError, match="cannot be combined"):
        parse_scopes("* notes:read")
    assert local_scopes(resolve({}, {}).scopes) is None  # unset: every scope (the local user)
    assert local_scopes(resolve({}, {"OPENAPI2MCP_SCOPES": ""}).scopes) == frozenset()
    assert local_scopes(resolve({"scopes": ""}, {"OPENAPI2MCP_SCOPES": "*"}).scopes) == frozenset()  # the flag wins
    overlay = tmp_path / "overlay.yaml"
    overlay.write_text(OVERLAY_SCOPES)
    args = [str(SPEC), "--overlay", str(overlay)]
    env = {"NOTES_API_URL": notes_up.base_url}
    with portal() as p:
        for label, extra_args, extra_env in [
            ("--scopes ''", ["--scopes", ""], {}),
            ("OPENAPI2MCP_SCOPES=", [], {"OPENAPI2MCP_SCOPES": ""}),
        ]:
            session = McpSession.stdio(p, [*args, *extra_args], mode="auto", label="scopes", log_dir=tmp_path,
                                       env={**env, **extra_env})
            try:
                assert [t.name for t in session.list_tools()] == OPEN_ONLY, label
            finally:
                session.close()
    with pytest.raises(InputError, match="a tool cannot require it"):
        compile_text(tmp_path, SPEC.read_text(), OVERLAY_SCOPES.replace("[notes:read]", "['*']"))
    bad = tmp_path / "bad.yaml"
    bad.write_text(f"{EMPTY_LIST}: {{subject: x, scopes: '* notes:read'}}\n")
    done = run_cli("serve", *args, "--transport", "http", "--auth-tokens", str(bad), "--port", "9", env=env)
    assert done.returncode == 2 and "'*' (every scope) cannot be combined with other scopes" in done.stderr


# ============================================================================ item 13: no Host reflection


def test_the_host_header_is_never_reflected(auth_server: HttpServer, notes_up: Upstream, tmp_path: Path) -> None:
    evil = "evil.example:4444"
    for method, path in (("POST", "/mcp"), ("GET", "/.well-known/oauth-protected-resource/mcp"),
                         ("GET", "/.well-known/oauth-protected-resource")):
        answer = httpx2.request(method, auth_server.base + path, json=INIT if method == "POST" else None,
                                headers={**ACCEPT, "Host": evil}, trust_env=False)
        assert answer.status_code == 421, (path, answer.status_code, answer.text)
        assert "evil" not in answer.text and "evil" not in json.dumps(dict(answer.headers)), path
    assert httpx2.get(auth_server.base + "/healthz", headers={"Host": evil}, trust_env=False).status_code == 200
    # an allowed Host still names this server
    answer = httpx2.post(auth_server.url, json=INIT, headers=ACCEPT, trust_env=False)
    assert answer.status_code == 401
    metadata = challenge(answer.headers["www-authenticate"])["resource_metadata"]
    assert metadata == f"{auth_server.base}/.well-known/oauth-protected-resource/mcp"

    # with the Host check off, the public URL must be configured, and is all that is named
    tokens = tmp_path / "tokens.yaml"
    tokens.write_text(TOKENS)
    overlay = tmp_path / "overlay.yaml"
    overlay.write_text(OVERLAY_SCOPES)
    args = [str(SPEC), "--overlay", str(overlay), "--auth-tokens", str(tokens), "--allowed-host", "*"]
    env = {"NOTES_API_URL": notes_up.base_url}
    refused = run_cli("serve", *args, "--transport", "http", "--port", "9", env=env)
    assert refused.returncode == 2 and "set --resource-url" in refused.stderr, refused.stderr
    public = "https://mcp.example.com/mcp"
    with HttpServer.start([*args, "--resource-url", public], log_dir=tmp_path, env=env) as server:
        answer = httpx2.post(server.url, json=INIT, headers={**ACCEPT, "Host": evil}, trust_env=False)
        assert answer.status_code == 401 and "evil" not in answer.headers["www-authenticate"]
        assert challenge(answer.headers["www-authenticate"])["resource_metadata"] == \
            "https://mcp.example.com/.well-known/oauth-protected-resource/mcp"
        document = httpx2.get(server.base + "/.well-known/oauth-protected-resource/mcp", headers={"Host": evil},
                              trust_env=False).json()
        assert document["resource"] == public


# ============================================================================ item 18: sessions per caller


def _open_session(url: str, token: str | None) -> httpx2.Response:
    headers = {**ACCEPT, **({"Authorization": f"Bearer {token}"} if token else {})}
    return httpx2.post(url, json=INIT, headers=headers, trust_env=False)


def _too_many(answer: httpx2.Response) -> None:
    assert answer.status_code == 429, (answer.status_code, answer.text)
    error = answer.json()["error"]
    assert error["data"] == {"reason": "too_many_sessions", "limit": 2}
    assert "too many open sessions" in error["message"] and "DELETE" in error["message"]


def test_one_caller_cannot_fill_the_session_table(auth_server: HttpServer) -> None:
    url = auth_server.url
    opened = [_open_session(url, ALICE), _open_session(url, ALICE_TOO)]  # one subject, two tokens
    assert [a.status_code for a in opened] == [200, 200]
    _too_many(_open_session(url, ALICE))
    _too_many(_open_session(url, ALICE_TOO))
    assert _open_session(url, BOB).status_code == 200  # another caller is not locked out
    # ending a session frees its slot
    sid = opened[0].headers["mcp-session-id"]
    ended = httpx2.delete(url, headers={"Authorization": f"Bearer {ALICE}", "Mcp-Session-Id": sid,
                                        "MCP-Protocol-Version": LEGACY}, trust_env=False)
    assert ended.status_code < 300
    assert _open_session(url, ALICE).status_code == 200
    _too_many(_open_session(url, ALICE))
    # requests in a session and sessionless (2026-07-28) requests are not counted
    headers = {**ACCEPT, "Authorization": f"Bearer {ALICE}", "Mcp-Session-Id": opened[1].headers["mcp-session-id"],
               "MCP-Protocol-Version": LEGACY}
    listed = httpx2.post(url, json={"jsonrpc": "2.0", "id": 2, "method": "tools/list"}, headers=headers,
                         trust_env=False)
    assert listed.status_code == 200 and "notes_read" in listed.text
    assert "refused a new MCP session for caller alice" in auth_server.stderr()


# ============================================================================ item 12: unfinished requests


def _drain(sock: socket.socket, until: float) -> bytes:
    """What the server sends until it closes the connection (or `until` passes)."""
    sock.settimeout(max(0.1, until - time.monotonic()))
    data = b""
    try:
        while chunk := sock.recv(4096):
            data += chunk
    except TimeoutError:
        data += b"<still open>"
    return data


def test_unfinished_requests_are_timed_out(auth_server: HttpServer) -> None:
    """100 half-sent requests, no token needed (and some with one): each gets 408 and is closed.

    Also the second request on a kept-alive connection, and a client dripping a byte at a time.
    """
    host = f"Host: 127.0.0.1:{auth_server.port}\r\n".encode()
    with_body = (b"POST /mcp HTTP/1.1\r\n" + host + b"Content-Type: application/json\r\n"
                 b"Accept: application/json, text/event-stream\r\nAuthorization: Bearer " + EVERYTHING.encode() +
                 b"\r\nContent-Length: 1000\r\n\r\n{\"jsonrpc\": ")
    openings = [b"POST /mcp HTTP/1.1\r\n" + host] * 40 + [b"GET /healthz HTT"] * 20 + [b""] * 20 + [with_body] * 20
    sockets = []
    for opening in openings:
        sock = socket.create_connection(("127.0.0.1", auth_server.port))
        sock.sendall(opening)
        sockets.append(sock)
    kept = socket.create_connection(("127.0.0.1", auth_server.port))  # the second request on a kept-alive one
    kept.sendall(b"GET /healthz HTTP/1.1\r\n" + host + b"\r\n")
    first = b""
    while b"}" not in first:
        first += kept.recv(4096)
    assert first.startswith(b"HTTP/1.1 200 ")
    kept.sendall(b"GET /healthz HTTP/1.1\r\n")
    sockets.append(kept)
    drip = socket.create_connection(("127.0.0.1", auth_server.port))  # a byte at a time does not extend it
    drip.sendall(b"POST /mcp HTTP/1.1\r\nX-Drip: ")  # a well-formed start (a parser refuses garbage sooner)
    deadline = time.monotonic() + 60
    dripped = b""
    drip.settimeout(0.25)
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError):  # the server may have closed it already
            drip.sendall(b"a")
        try:
            dripped = drip.recv(4096)
            break
        except TimeoutError:
            continue
        except OSError:
            break
    assert dripped.startswith(b"HTTP/1.1 408 "), dripped
    answers = [_drain(sock, deadline) for sock in sockets]
    for sock in [*sockets, drip]:
        sock.close()
    assert all(a.startswith(b"HTTP/1.1 408 Request Timeout") and a.endswith(b"in time\n") for a in answers), \
        {a[:40] for a in answers}
    assert auth_server.health()["status"] == "ok"
    stderr = auth_server.stderr()
    assert "because the request's headers did not arrive within 2 s" in stderr
    assert "because the request's body did not arrive within 2 s" in stderr
    assert "Traceback" not in stderr


def test_request_headers_are_capped(auth_server: HttpServer) -> None:
    """A request line and headers past 16 KiB are answered 400 and the connection closed; 8 KiB pass."""
    host = f"Host: 127.0.0.1:{auth_server.port}\r\n".encode()
    for size, status in ((8 * 1024, b"200"), (17 * 1024, b"400")):
        with socket.create_connection(("127.0.0.1", auth_server.port)) as sock:
            sock.sendall(b"GET /healthz HTTP/1.1\r\n" + host + b"Connection: close\r\nX-Filler: " + b"a" * size
                         + b"\r\n\r\n")
            answer = _drain(sock, time.monotonic() + 5)
        assert answer.startswith(b"HTTP/1.1 " + status), (size, answer[:80])
        if status == b"400":
            assert not answer.endswith(b"<still open>")  # closed
    assert auth_server.health()["status"] == "ok"


@pytest.mark.anyio
async def test_connections_are_capped(notes_up: Upstream, tmp_path: Path) -> None:
    overlay = tmp_path / "overlay.yaml"
    overlay.write_text(OVERLAY_SCOPES)
    args = [str(SPEC), "--overlay", str(overlay), "--max-connections", "20", "--header-timeout", "120"]
    with HttpServer.start(args, log_dir=tmp_path, env={"NOTES_API_URL": notes_up.base_url}) as server:
        idle = [socket.create_connection(("127.0.0.1", server.port)) for _ in range(25)]
        try:
            full = httpx2.get(server.base + "/healthz", trust_env=False)
            assert full.status_code == 503
        finally:
            for sock in idle:
                sock.close()
        for _ in range(600):  # the server notices the closed connections
            if httpx2.get(server.base + "/healthz", trust_env=False).status_code == 200:
                break
            await anyio.sleep(0.05)
        async with client(server.url, None, "auto") as c:
            assert await names(c) == ALL_TOOLS
        assert "Exceeded concurrency limit" in server.stderr()


# ============================================================================ item 15: one round trip, one token

OVERLAY_LIMITED = """\
openapi2mcp: 1
server: {name: notes}
upstream: {base_url: "${NOTES_API_URL}"}
tools:
  - name: tasks_create
    operation: createStudyTask
    risk: high                                   # the user confirms
    rate_limit: {rate: 1/h, burst: 1, per_caller: true}
  - name: notes_read
    operation: readNote
    rate_limit: {rate: 1/h, burst: 1}
"""


class Yes:
    def __init__(self) -> None:
        self.asked = 0

    async def __call__(self, ctx: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        self.asked += 1
        return types.ElicitResult(action="accept", content={"confirm": True})


@pytest.mark.anyio
async def test_a_confirmed_call_is_charged_once(notes_up: Upstream, tmp_path: Path) -> None:
    overlay = tmp_path / "overlay.yaml"
    overlay.write_text(OVERLAY_LIMITED)
    audit = tmp_path / "audit.jsonl"
    args = [str(SPEC), "--overlay", str(overlay), "--audit-log", str(audit), "--max-sessions-per-caller", "2"]
    before = notes_up.count("createStudyTask")
    task = {"title": f"confirmed once {time.monotonic_ns()}", "source_note": "ai-agent/mcp-basics.md"}
    with HttpServer.start(args, log_dir=tmp_path, env={"NOTES_API_URL": notes_up.base_url}) as server:
        user = Yes()
        async with Client(server.url, mode="auto", elicitation_callback=user) as c:
            assert c.protocol_version == "2026-07-28"
            ok(await c.call_tool("tasks_create", task))  # input required, the user says yes, the retry runs
            assert user.asked == 1
            # the limit still holds: the next call is refused at its first leg, before anyone is asked
            again = err(await c.call_tool("tasks_create", {**task, "title": task["title"] + " 2"}), "RATE_LIMITED")
            assert "tasks_create's limit is 1/h" in again["message"] and user.asked == 1
            # a request state buys nothing where it answers nothing: charged as any call
            ok(await c.call_tool("notes_read", {"path": "ai-agent/mcp-basics.md"}))
            yes = {"confirm": types.ElicitResult(action="accept", content={"confirm": True})}
            forged = await c.session.call_tool("notes_read", {"path": "ai-agent/mcp-basics.md"}, input_responses=yes,
                                               request_state="forged", allow_input_required=True)
            assert isinstance(forged, types.CallToolResult)
            err(forged, "RATE_LIMITED")
        # sessions: without auth a caller is its address (2 here); 2026-07-28 requests have none
        opened = [_open_session(server.url, None) for _ in range(2)]
        assert [a.status_code for a in opened] == [200, 200]
        _too_many(_open_session(server.url, None))
    assert notes_up.count("createStudyTask") == before + 1
    lines = [json.loads(line) for line in audit.read_text().splitlines()]
    assert [(x["tool"], x["outcome"], x["error"]) for x in lines if x["phase"] == "result"] == [
        ("tasks_create", "input_required", None),
        ("tasks_create", "ok", None),
        ("tasks_create", "denied", "RATE_LIMITED"),
        ("notes_read", "ok", None),
        ("notes_read", "denied", "RATE_LIMITED"),
    ]


# ============================================================================ item 2: resources inherit tool policy

OVERLAY_RESOURCES = r"""
openapi2mcp: 1
server: {name: notes}
upstream: {base_url: "${NOTES_API_URL}"}
tools:
  - name: notes_read_study          # critical, step-up, narrowed, rate-limited
    operation: readNote
    risk: critical
    permissions: [notes:read]
    step_up: true
    confirmation: {mode: never, acknowledge_risk: true}
    params:
      path: {pattern: '^study/[a-z-]+\.md$'}
    rate_limit: {rate: 1/h, burst: 2, per_caller: true}
  - name: notes_list
    operation: listNotes
    permissions: [notes:list]
    params:
      scope: {value: ai-agent}      # fixed: every list is of the ai-agent folder
      folder: {enum: [ai-agent]}
resources:
  - {uri: 'notes://{+path}', name: note, operation: readNote, mime_type: text/markdown, response: {select: content}}
  - {uri: 'folders://{folder}', name: folder, operation: listNotes}
prompts:
  - name: study_plan
    arguments: [{name: path, required: true}]
    messages:
      - {text: 'Plan from {path}', resource: 'notes://{path}'}
"""

READER = "reader-token-0123456789ab"  # notes:read (what the tool needs, without the step-up)
STEPPED = "stepped-token-0123456789a"  # notes:read notes:read:step-up
LISTER = "lister-token-0123456789ab"  # notes:list


@pytest.fixture(scope="module")
def resource_server(notes_up: Upstream, tmp_path_factory: pytest.TempPathFactory) -> Iterator[HttpServer]:
    folder = tmp_path_factory.mktemp("resources")
    (folder / "overlay.yaml").write_text(OVERLAY_RESOURCES)
    (folder / "tokens.yaml").write_text(
        f"{READER}: {{subject: reader, scopes: [notes:read]}}\n"
        f"{STEPPED}: {{subject: stepped, scopes: [notes:read, 'notes:read:step-up']}}\n"
        f"{LISTER}: {{subject: lister, scopes: [notes:list]}}\n")
    args = [str(SPEC), "--overlay", str(folder / "overlay.yaml"), "--auth-tokens", str(folder / "tokens.yaml")]
    with HttpServer.start(args, log_dir=folder, env={"NOTES_API_URL": notes_up.base_url}) as server:
        yield server


async def _read_refused(c: Client, uri: str) -> MCPError:
    with pytest.raises(MCPError) as info:
        await c.read_resource(uri)
    return info.value


@pytest.mark.anyio
async def test_resources_inherit_the_policy_of_their_tools(resource_server: HttpServer, notes_up: Upstream) -> None:
    url, mode = resource_server.url, "auto"
    study = "notes://study/python-asyncio.md"
    reads = notes_up.count("readNote")
    async with client(url, READER, mode) as reader:  # without the step-up scope the resource is not there
        assert [t.name for t in (await reader.list_resource_templates()).resource_templates] == []
        assert (await reader.list_prompts()).prompts == []  # nor the prompt that embeds it
        refused = await _read_refused(reader, study)
        assert "no resource has this URI" in refused.error.message
    assert notes_up.count("readNote") == reads
    async with client(url, STEPPED, mode) as stepped:
        assert [t.name for t in (await stepped.list_resource_templates()).resource_templates] == ["note"]
        # the tool's pattern holds (the refused read takes a token, as a refused call does)
        narrowed = await _read_refused(stepped, "notes://ai-agent/mcp-basics.md")
        assert "as tool notes_read_study requires" in narrowed.error.message
        assert notes_up.count("readNote") == reads
        first = await stepped.read_resource(study)
        assert "asyncio" in first.contents[0].text.lower()  # type: ignore[union-attr]
        # the tool's limit (burst 2, per caller) counts resource reads and tool calls together
        err(await stepped.call_tool("notes_read_study", {"path": "study/python-asyncio.md"}), "RATE_LIMITED")
        limited = await _read_refused(stepped, study)
        assert limited.code == types.INTERNAL_ERROR and "RATE_LIMITED" in limited.error.message
        assert "notes_read_study's limit is 1/h (burst 2, per caller)" in limited.error.message
    assert notes_up.count("readNote") == reads + 1
    lists = notes_up.count("listNotes")
    async with client(url, LISTER, mode) as lister:
        read = await lister.read_resource("folders://ai-agent")
        assert "ai-agent/" in read.contents[0].text  # type: ignore[union-attr]
        sent = parse_qs(notes_up.last_request("listNotes")["query"])
        assert sent == {"scope": ["ai-agent"], "folder": ["ai-agent"]}  # the tool's fixed value is sent
        narrowed = await _read_refused(lister, "folders://study")  # the tool's enum holds
        assert "as tool notes_list requires" in narrowed.error.message
    assert notes_up.count("listNotes") == lists + 1


RESOURCE_REFUSALS = [
    (  # the red team's case: a critical tool asks the user; a read cannot
        "  - {name: t, operation: readNote, risk: critical, permissions: [notes:read], step_up: true,\n"
        "     params: {path: {pattern: '^[a-z]{1,8}$'}}}\n"
        "resources:\n  - {uri: 'notes://{+path}', name: note, operation: readNote}",
        "resource 'note' reads 'readNote', which tool 't' runs only after the user confirms (critical risk); "
        "a resource read cannot ask anyone",
    ),
    (
        "  - {name: t, operation: readNote, confirmation: required}\n"
        "resources:\n  - {uri: 'notes://{+path}', name: note, operation: readNote}",
        "which tool 't' runs only after the user confirms (low risk)",
    ),
    (
        "  - {name: t, operation: listNotes, dry_run: required}\n"
        "resources:\n  - {uri: 'notes://all', name: idx, operation: listNotes}",
        "which tool 't' runs only after a dry run; a resource read cannot preview",
    ),
    (
        "  - {name: t, operation: listNotes, params: {scope: {value: ai-agent}}}\n"
        "resources:\n  - {uri: 'notes://{scope}', name: idx, operation: listNotes}",
        "which tool 't' fixes parameter 'scope' (query) to 'ai-agent', but the URI variable {scope} would let a "
        "reader choose it",
    ),
    (
        "  - {name: t, operation: listNotes, params: {scope: {value: ai-agent}}}\n"
        "resources:\n  - {uri: 'notes://all', name: idx, operation: listNotes, params: {scope: all-allowed}}",
        "fixes parameter 'scope' (query) to 'ai-agent', but the resource fixes it to 'all-allowed'",
    ),
    (
        "  - {name: t, operation: listNotes, params: {scope: {value: ai-agent}}}\n"
        "  - {name: u, operation: listNotes, params: {scope: {value: all-allowed}}}\n"
        "resources:\n  - {uri: 'notes://all', name: idx, operation: listNotes}",
        "which tool 'u' fixes parameter 'scope' (query) to 'all-allowed', but tool 't' fixes it to 'ai-agent'",
    ),
    (
        "  - {name: t, operation: listNotes, params: {folder: {hidden: true}}}\n"
        "resources:\n  - {uri: 'notes://{folder}', name: idx, operation: listNotes}",
        "which tool 't' never sends parameter 'folder' (query), but the URI variable {folder} would let a "
        "reader set it",
    ),
    (
        "  - {name: t, operation: listNotes, params: {scope: {enum: [ai-agent]}}}\n"
        "resources:\n  - {uri: 'notes://all', name: idx, operation: listNotes, params: {scope: all-allowed}}",
        "the resource's fixed value 'all-allowed' is not one of them",
    ),
]


@pytest.mark.parametrize(("tools", "expected"), RESOURCE_REFUSALS)
def test_a_resource_that_cannot_inherit_is_refused(tmp_path: Path, tools: str, expected: str) -> None:
    text = "openapi2mcp: 1\nupstream: {base_url: 'http://127.0.0.1:9'}\ntools:\n" + tools + "\n"
    with pytest.raises(InputError) as info:
        compile_text(tmp_path, SPEC.read_text(), text)
    assert expected in str(info.value), str(info.value)
    assert "must honour every restriction of the tools on its operation" in str(info.value)


def test_serve_refuses_the_red_teams_resource_and_an_old_manifest_with_it(tmp_path: Path) -> None:
    tools, expected = RESOURCE_REFUSALS[0]
    overlay = tmp_path / "overlay.yaml"
    overlay.write_text("openapi2mcp: 1\nupstream: {base_url: 'http://127.0.0.1:9'}\ntools:\n" + tools + "\n")
    done = run_cli("serve", str(SPEC), "--overlay", str(overlay))
    assert done.returncode == 2 and expected in done.stderr, done.stderr
    # a Manifest an older compiler let through: the runtime refuses it too
    safe = tools.replace("risk: critical, ", "").replace("step_up: true,", "")
    m = compile_text(tmp_path, SPEC.read_text(), "openapi2mcp: 1\nupstream: {base_url: 'http://127.0.0.1:9'}\n"
                     "tools:\n" + safe + "\n").manifest
    tool = m.tools[0]
    risky = tool.model_copy(update={"risk": "critical", "branches": [
        b.model_copy(update={"risk": "critical"}) for b in tool.branches]})
    old = m.model_copy(update={"tools": [risky], "content_hash": ""})
    with pytest.raises(ConfigError, match="a resource read cannot ask anyone"):
        Runtime(old, RuntimeOptions(environ={}))
    path = tmp_path / "manifest.json"
    path.write_text(old.to_json())
    done = run_cli("serve", "--manifest", str(path))
    assert done.returncode == 2 and "resource note: reads 'readNote', which tool 't' runs only after" in done.stderr
    assert "Traceback" not in done.stderr


def test_http_limit_settings(tmp_path: Path) -> None:
    """The flags and variables of the HTTP limits, and the errors for values that are no limit."""
    from openapi2mcp.runtime import HttpLimits
    from openapi2mcp.serving import UsageError, parser, resolve

    def limits(argv: list[str], env: dict[str, str]) -> HttpLimits:
        return resolve(vars(parser("pkg", "test").parse_args(argv)), env).http_limits

    assert limits(["--header-timeout", "3"], {"OPENAPI2MCP_MAX_SESSIONS_PER_CALLER": "5",
                                              "OPENAPI2MCP_HEADER_TIMEOUT": "9"}) == \
        HttpLimits(header_timeout=3, sessions_per_caller=5)  # the flag wins over its variable
    assert limits([], {}) == HttpLimits()
    with pytest.raises(UsageError, match="OPENAPI2MCP_BODY_TIMEOUT: 'soon' is not a number"):
        limits([], {"OPENAPI2MCP_BODY_TIMEOUT": "soon"})
    with pytest.raises(UsageError, match=r"--body-timeout / OPENAPI2MCP_BODY_TIMEOUT: 0\.0 is not a timeout"):
        limits(["--body-timeout", "0"], {})
    with pytest.raises(UsageError, match="--max-connections / OPENAPI2MCP_MAX_CONNECTIONS: -1 is not a cap"):
        limits(["--max-connections", "-1"], {})
    overlay = tmp_path / "overlay.yaml"
    overlay.write_text(OVERLAY_SCOPES)
    done = run_cli("serve", str(SPEC), "--overlay", str(overlay), "--header-timeout", "nan",
                   env={"NOTES_API_URL": "http://127.0.0.1:9"})
    assert done.returncode == 2 and "--header-timeout / OPENAPI2MCP_HEADER_TIMEOUT: nan is not a timeout" in \
        done.stderr, done.stderr
