"""End to end: a real example upstream, the real `openapi2mcp serve` command, the mcp SDK client.

The example REST APIs (`examples.Upstream`) run on 127.0.0.1 and validate every request they get
against their OpenAPI description (openapi-core); each test ends by asserting that no request
the spec would reject reached them. `openapi2mcp serve` runs as a subprocess exactly as a user
starts it. The SDK `Client` talks to it over four transports, and every tool-level test runs on
each of them:

    stdio-2025-11-25   stdio, initialize handshake          (Client mode="legacy")
    stdio-2026-07-28   stdio, stateless revision            (Client default mode)
    http-2025-11-25    Streamable HTTP, initialize handshake
    http-2026-07-28    Streamable HTTP, stateless revision

Upstreams, HTTP servers and client sessions are started once per module (per transport for the
sessions); failures are made on purpose with the upstream's fault injection. Both upstreams
require a bearer token (a canary) that the server gets from the environment variable the overlay
names, and which must never show up in anything a client or a log reader sees.
"""

from __future__ import annotations

import contextlib
import json
import queue
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote

import httpx2
import jsonschema
import mcp_types as types
import pytest
import yaml
from anyio.from_thread import BlockingPortal

from examples import Upstream, UpstreamViolationError
from openapi2mcp.manifest import CONTRACT_KEY, contract_json_schema
from tests.e2e_support import (
    EXAMPLES,
    LEGACY,
    MODERN,
    ROOT,
    HttpServer,
    McpSession,
    child_env,
    cli,
    err,
    example_args,
    jsonrpc_lines,
    no_traceback,
    ok,
    portal,
    run_cli,
)
from tests.helpers import compile_example

NOTES_CANARY = "canary-notes-5f3a9c1e77d04b2a"
PET_CANARY = "canary-pets-b71d04aa0c9e4f61"
NOTES_ENV = {"NOTES_API_TOKEN": NOTES_CANARY}
CONTRACT_SCHEMA = jsonschema.Draft202012Validator(contract_json_schema())
PET_ENV = {"PETSTORE_TOKEN": PET_CANARY}

# transport id -> (kind, Client mode, negotiated protocol version)
TRANSPORTS: dict[str, tuple[str, str, str]] = {
    "stdio-2025-11-25": ("stdio", "legacy", LEGACY),
    "stdio-2026-07-28": ("stdio", "auto", MODERN),
    "http-2025-11-25": ("http", "legacy", LEGACY),
    "http-2026-07-28": ("http", "auto", MODERN),
}
STDIO = [t for t, (kind, _, _) in TRANSPORTS.items() if kind == "stdio"]


def overlay_tools(name: str) -> tuple[list[str], list[str]]:
    """(listed tool names in overlay order, forbidden tool names) of an example's overlay."""
    data = yaml.safe_load((EXAMPLES / name / "overlay.yaml").read_text(encoding="utf-8"))
    listed = [t["name"] for t in data["tools"] if t.get("risk") != "forbidden"]
    forbidden = [t["name"] for t in data["tools"] if t.get("risk") == "forbidden"]
    return listed, forbidden


def last_seq(up: Upstream) -> int:
    """The sequence number of the last request the upstream recorded (0 if none)."""
    return max((r["seq"] for r in up.requests()), default=0)


def sent_since(up: Upstream, seq: int) -> list[dict[str, Any]]:
    """The requests the upstream recorded after `last_seq` returned `seq`."""
    return [r for r in up.requests() if r["seq"] > seq]


def serve_args(name: str, up: Upstream, *extra: str) -> list[str]:
    return [*example_args(name), "--base-url", up.base_url, "--log-level", "debug", *extra]


# ============================================================================ fixtures


@pytest.fixture(scope="module")
def logs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("e2e-logs")


@pytest.fixture(scope="module")
def loop() -> Iterator[BlockingPortal]:
    with portal() as p:
        yield p


@pytest.fixture(scope="module")
def notes_up() -> Iterator[Upstream]:
    with Upstream.start("notes", auth=f"bearer:{NOTES_CANARY}") as up:
        yield up


@pytest.fixture(scope="module")
def pet_up() -> Iterator[Upstream]:
    with Upstream.start("petstore", auth=f"bearer:{PET_CANARY}") as up:
        yield up


@pytest.fixture(autouse=True)
def upstreams_stay_valid(request: pytest.FixtureRequest) -> Iterator[None]:
    """After every test: no leftover faults, and no request the spec rejects reached an upstream."""
    yield
    for name in ("notes_up", "pet_up"):
        if name not in request.fixturenames:
            continue
        up: Upstream = request.getfixturevalue(name)
        up.clear_faults()
        try:
            up.assert_no_violations()
        except UpstreamViolationError:
            up.reset()  # report once, do not fail every later test for it
            raise


@dataclass
class Stack:
    """The module's long-lived parts: HTTP servers for both examples and what `inspect` promised."""

    notes_http: HttpServer
    pet_http: HttpServer
    inspected: dict[str, list[dict[str, Any]]]


def _inspect(name: str) -> list[dict[str, Any]]:
    proc = run_cli("inspect", *example_args(name), "--json")
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)  # type: ignore[no-any-return]


@pytest.fixture(scope="module")
def stack(notes_up: Upstream, pet_up: Upstream, logs: Path) -> Iterator[Stack]:
    """Started concurrently: each part is a cold interpreter start."""
    with ThreadPoolExecutor(max_workers=4) as pool:
        notes_http = pool.submit(HttpServer.start, serve_args("notes", notes_up), log_dir=logs, env=NOTES_ENV)
        pet_http = pool.submit(HttpServer.start, serve_args("petstore", pet_up), log_dir=logs, env=PET_ENV)
        inspected = {name: pool.submit(_inspect, name) for name in ("notes", "petstore")}
        parts = Stack(notes_http.result(), pet_http.result(), {k: f.result() for k, f in inspected.items()})
    with parts.notes_http, parts.pet_http:
        yield parts


@pytest.fixture(scope="module")
def notes_http(stack: Stack) -> HttpServer:
    return stack.notes_http


@pytest.fixture(scope="module")
def pet_http(stack: Stack) -> HttpServer:
    return stack.pet_http


@pytest.fixture(scope="module")
def inspected(stack: Stack) -> dict[str, list[dict[str, Any]]]:
    return stack.inspected


@pytest.fixture(scope="module", params=list(TRANSPORTS))
def transport(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(scope="module")
def sessions(
    loop: BlockingPortal, transport: str, notes_up: Upstream, pet_up: Upstream, stack: Stack, logs: Path
) -> Iterator[tuple[McpSession, McpSession]]:
    """One client session per example over `transport` (stdio ones are started concurrently)."""
    kind, mode, _ = TRANSPORTS[transport]

    def connect(server: HttpServer, args: list[str], env: dict[str, str]) -> McpSession:
        if kind == "http":
            return McpSession.http(loop, server.url, mode=mode, label=transport)
        return McpSession.stdio(loop, args, mode=mode, label=transport, log_dir=logs, env=env)

    with ThreadPoolExecutor(max_workers=2) as pool:
        notes = pool.submit(connect, stack.notes_http, serve_args("notes", notes_up), NOTES_ENV)
        pet = pool.submit(connect, stack.pet_http, serve_args("petstore", pet_up), PET_ENV)
        pair = (notes.result(), pet.result())
    yield pair
    for session in pair:
        session.close()


@pytest.fixture(scope="module")
def notes(sessions: tuple[McpSession, McpSession]) -> McpSession:
    return sessions[0]


@pytest.fixture(scope="module")
def pet(sessions: tuple[McpSession, McpSession]) -> McpSession:
    return sessions[1]


@pytest.fixture(scope="module")
def notes_manifest(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, subprocess.CompletedProcess[str]]:
    """`openapi2mcp compile` of the notes example: (the Manifest file, the finished command)."""
    path = tmp_path_factory.mktemp("manifest") / "notes.manifest.json"
    proc = run_cli("compile", *example_args("notes"), "-o", str(path))
    assert proc.returncode == 0, proc.stderr
    return path, proc


def tool_of(session: McpSession, name: str) -> types.Tool:
    tools = {t.name: t for t in session.list_tools()}
    return tools[name]


def conforms(session: McpSession, tool: str, structured: Any) -> None:
    schema = tool_of(session, tool).output_schema
    assert schema is not None, f"{tool} has no outputSchema"
    jsonschema.Draft202012Validator(schema).validate(structured)


# ============================================================================ tools/list


def test_handshake_and_deterministic_tool_list(
    transport: str, notes: McpSession, pet: McpSession, inspected: dict[str, list[dict[str, Any]]]
) -> None:
    assert notes.protocol_version == pet.protocol_version == TRANSPORTS[transport][2]
    for session, example in ((notes, "notes"), (pet, "petstore")):
        listed, forbidden = overlay_tools(example)
        first = session.list_tools()
        assert [t.name for t in first] == listed  # the overlay's names, in the overlay's order
        assert not set(forbidden) & {t.name for t in first}
        again = session.list_tools()
        assert [t.model_dump(by_alias=True) for t in again] == [t.model_dump(by_alias=True) for t in first]
        by_name = {d["name"]: d for d in inspected[example]}
        for tool in first:
            assert tool.input_schema["type"] == "object"
            assert tool.output_schema is None or tool.output_schema["type"] == "object"
            assert tool.annotations is not None and tool.annotations.read_only_hint is not None
            # exactly what `openapi2mcp inspect --json` promised
            assert tool.input_schema == by_name[tool.name]["inputSchema"]
            assert tool.output_schema == by_name[tool.name].get("outputSchema")
            assert tool.description == by_name[tool.name].get("description")
            # the tool contract (seed 002) reaches the client through the SDK, valid and as inspected
            contract = (tool.meta or {})[CONTRACT_KEY]
            CONTRACT_SCHEMA.validate(contract)
            assert contract == by_name[tool.name]["_meta"][CONTRACT_KEY]
    assert "admin_run_command" in overlay_tools("notes")[1]
    contracts = {t.name: (t.meta or {})[CONTRACT_KEY] for t in pet.list_tools()}
    assert contracts["pets_delete"]["confirmation"] == "required" and not contracts["pets_delete"]["autonomous"]
    assert contracts["pets_list"]["autonomous"] and contracts["pets_list"]["idempotency"] == "safe"
    assert "CONFIRMATION_DECLINED" in contracts["pets_delete"]["failureModes"]
    assert "CONFIRMATION_DECLINED" not in contracts["pets_list"]["failureModes"]


# ============================================================================ successful calls


def test_notes_calls_return_structured_results(transport: str, notes: McpSession, notes_up: Upstream) -> None:
    found = ok(notes.call("notes_search", {"keyword": "mcp"}))
    conforms(notes, "notes_search", found)
    assert found["total"] >= 1 and found["results"]
    assert found["evidencePaths"] == [r["path"] for r in found["results"]]
    sent = notes_up.last_request("searchNotes")
    assert sent["query"] == "keyword=mcp&limit=5&scope=ai-agent"  # defaults are sent explicitly
    assert sent["headers"]["authorization"] == f"Bearer {NOTES_CANARY}"  # the secret from the environment

    path = found["results"][0]["path"]
    note = ok(notes.call("notes_read", {"path": path}))
    conforms(notes, "notes_read", note)
    assert note["path"] == path and note["evidencePaths"] == [path] and note["content"]
    assert notes_up.last_request("readNote")["query"] == "path=" + quote(path, safe="")

    title = f"Review MCP basics over {transport}"
    task = ok(notes.call("tasks_create", {"title": title, "source_note": path, "due_date": "2026-12-24"}))
    conforms(notes, "tasks_create", task)
    assert (task["title"], task["source_note"], task["status"], task["due_date"]) == (title, path, "open", "2026-12-24")
    listed = ok(notes.call("tasks_list", {"source_note": path}))
    conforms(notes, "tasks_list", listed)
    assert task in listed["items"] and {t["source_note"] for t in listed["items"]} == {path}


def test_provenance_meta_names_the_upstream_request(transport: str, pet: McpSession, pet_up: Upstream) -> None:
    result = pet.call("pets_get", {"petId": "1"})
    rex = ok(result)
    conforms(pet, "pets_get", rex)
    assert (rex["id"], rex["name"]) == ("1", "Rex")
    assert result.meta is not None
    assert len(result.meta["openapi2mcp/traceId"]) >= 16
    [request] = result.meta["openapi2mcp/requests"]
    assert (request["operation"], request["method"], request["status"]) == ("getPet", "GET", 200)
    assert request["url"] == f"{pet_up.base_url}/pets/1"


def test_petstore_calls_cover_json_text_and_binary(transport: str, pet: McpSession, pet_up: Upstream) -> None:
    page = ok(pet.call("pets_list", {"status": "available", "per_page": 2}))
    conforms(pet, "pets_list", page)
    assert len(page["items"]) == 2 and page["total"] > 2 and page["page"] == 1
    assert "per_page=2" in pet_up.last_request("listPets")["query"]

    tree = ok(pet.call("categories_tree"))
    conforms(pet, "categories_tree", tree)

    notes = pet.call("pets_notes", {"petId": "1"})  # text/plain: text content, no structured result
    assert not notes.is_error and notes.structured_content is None
    assert isinstance(notes.content[0], types.TextContent) and "Loves long walks." in notes.content[0].text

    photo = pet.call("pets_photo", {"petId": "1"})  # image/png: an image block plus a description
    assert not photo.is_error
    image, described = photo.content
    assert isinstance(image, types.ImageContent) and image.mime_type == "image/png" and image.data
    assert isinstance(described, types.TextContent) and described.text.startswith("binary result: image/png")


# ============================================================================ every error code


UPSTREAM_FAILURES = [
    pytest.param(
        "pets_get",
        {"petId": "1"},
        {
            "operation": "getPet",
            "status": 400,
            "body": {"error": {"code": "BAD", "message": "petId looks odd", "field": "petId"}},
        },
        "ARGUMENT_INVALID",
        {"retryable": False, "status": 400, "field": "petId"},
        "petId looks odd",
        id="400-argument-invalid",
    ),
    pytest.param(
        "pets_create",
        {"name": "Nemo", "categoryId": 999},
        None,  # the real upstream answers 422 UNKNOWN_CATEGORY
        "ARGUMENT_INVALID",
        {"retryable": False, "status": 422, "field": "categoryId"},
        "no category 999",
        id="422-argument-invalid",
    ),
    pytest.param(
        "pets_get",
        {"petId": "does-not-exist"},
        None,
        "NOT_FOUND",
        {"retryable": False, "status": 404},
        "No pet with that id; list pets to find one. (upstream said: pet 'does-not-exist' not found)",
        id="404-not-found-overlay-message",
    ),
    pytest.param(
        "pets_create",
        {"name": "rex"},  # names are unique, case-insensitively
        None,
        "CONFLICT",
        {"retryable": False, "status": 409},
        "a pet named 'Rex' already exists (id 1)",
        id="409-conflict",
    ),
    pytest.param(
        "pets_get",
        {"petId": "1"},
        {
            "operation": "getPet",
            "status": 429,
            "headers": {"Retry-After": "7"},
            "body": {"error": {"code": "RATE_LIMITED", "message": "slow down, 10 requests per minute"}},
        },
        "RATE_LIMITED",
        {"retryable": True, "status": 429, "retryAfter": 7},
        "slow down, 10 requests per minute",
        id="429-rate-limited",
    ),
    pytest.param(
        "pets_get",
        {"petId": "1"},
        {"operation": "getPet", "status": 503},
        "UPSTREAM_ERROR",
        {"retryable": True, "status": 503},
        "injected fault: HTTP 503",
        id="503-upstream-error-retryable",
    ),
    pytest.param(
        "pets_list",
        {},
        {"operation": "listPets", "status": 500, "body": {"message": "database on fire"}},
        "UPSTREAM_ERROR",
        {"retryable": False, "status": 500},
        "database on fire",
        id="500-upstream-error",
    ),
]


@pytest.mark.parametrize(("tool", "arguments", "fault", "code", "fields", "quoted"), UPSTREAM_FAILURES)
def test_upstream_failures_map_to_stable_codes(
    transport: str,
    pet: McpSession,
    pet_up: Upstream,
    tool: str,
    arguments: dict[str, Any],
    fault: dict[str, Any] | None,
    code: str,
    fields: dict[str, Any],
    quoted: str,
) -> None:
    if fault:
        pet_up.fault(**fault)
    before = last_seq(pet_up)
    body = err(pet.call(tool, arguments), code)
    assert {k: body.get(k) for k in fields} == fields
    assert quoted in body["message"]
    assert len(sent_since(pet_up, before)) == 1  # exactly one request, never retried on its own
    if fault:
        assert pet_up.last_request()["fault"] == fault.get("kind", "status")
    assert not pet.call("pets_get", {"petId": "1"}).is_error  # the session is fine afterwards


def test_a_lying_upstream_is_repaired_not_refused(transport: str, pet: McpSession, pet_up: Upstream) -> None:
    # every way of drifting, and strict/off, are in the drift tier (tests/test_drift.py)
    pet_up.fault(operation="getPet", kind="lie")  # {"unexpected": ..., "items": "not-a-list"}: no id, no name
    result = pet.call("pets_get", {"petId": "1"})  # the SDK client checked it against the outputSchema
    assert not result.is_error and result.structured_content is not None
    assert (result.structured_content["id"], result.structured_content["name"]) == (None, None)
    assert isinstance(result.content[0], types.TextContent)
    assert json.loads(result.content[0].text)["unexpected"] == "this body does not match the response schema"
    assert result.meta is not None
    repaired = {(r["path"], r["got"]) for r in result.meta["openapi2mcp/repairs"]}
    assert repaired >= {("id", "missing"), ("name", "missing")}


def test_unauthorized_when_the_upstream_refuses_the_token(transport: str, pet: McpSession, pet_up: Upstream) -> None:
    pet_up.set_auth("bearer:rotated-token-the-server-does-not-have")
    try:
        body = err(pet.call("pets_get", {"petId": "1"}), "UNAUTHORIZED")
    finally:
        pet_up.set_auth(f"bearer:{PET_CANARY}")
    assert (body["retryable"], body["status"]) == (False, 401)
    assert "changing arguments will not help" in body["message"]
    assert pet_up.last_request("getPet")["auth"] == {
        "required": "bearer",
        "presented": f"Bearer {PET_CANARY}",
        "ok": False,
    }


def test_overlay_failure_modes_take_precedence(transport: str, notes: McpSession, notes_up: Upstream) -> None:
    forbidden = err(notes.call("notes_read", {"path": "private/diary-2026-11.md"}), "FORBIDDEN")
    assert forbidden["message"].startswith("That note is in a folder an agent may not read; pick another note.")
    assert forbidden["status"] == 403

    missing = err(notes.call("notes_read", {"path": "ai-agent/no-such-note.md"}), "NOT_FOUND")
    assert missing["message"].startswith("No note at that path; search first and use a returned path.")

    unknown_note = {"title": "Study a ghost", "source_note": "ai-agent/ghost.md"}
    invalid = err(notes.call("tasks_create", unknown_note), "ARGUMENT_INVALID")  # upstream 422
    assert invalid["message"].startswith("The source note does not exist or may not be used.")
    assert invalid["status"] == 422

    task = {"title": f"Read about transports ({transport})", "source_note": "ai-agent/transports.md"}
    ok(notes.call("tasks_create", task))
    duplicate = err(notes.call("tasks_create", task), "CONFLICT")
    assert duplicate["message"].startswith(
        "An open task with this title already exists for that note; do not create it again."
    )
    assert "(upstream said: open task" in duplicate["message"]  # the upstream's own words, quoted
    assert duplicate["retryable"] is False


BAD_ARGUMENTS = [
    pytest.param({"keyword": "a"}, "keyword", "keyword: 'a' is too short", id="too-short"),
    pytest.param({"keyword": "mcp", "limit": 50}, "limit", "limit: 50 is greater than the maximum of 20", id="max"),
    pytest.param({"keyword": "mcp", "limit": "5"}, "limit", "limit: expected integer, got string", id="type"),
    pytest.param({}, "keyword", "keyword: required argument missing", id="missing"),
    pytest.param({"keyword": "mcp", "scope": "private"}, "scope", "scope: 'private' is not one of", id="enum"),
    pytest.param(
        {"kewyord": "mcp"},
        "kewyord",
        "kewyord: unknown argument, did you mean 'keyword'?; keyword: required argument missing",
        id="typo",
    ),
]


@pytest.mark.parametrize(("arguments", "field", "message"), BAD_ARGUMENTS)
def test_bad_arguments_are_refused_before_anything_is_sent(
    transport: str, notes: McpSession, notes_up: Upstream, arguments: dict[str, Any], field: str, message: str
) -> None:
    before = last_seq(notes_up)
    body = err(notes.call("notes_search", arguments), "ARGUMENT_INVALID")
    assert body["field"] == field
    assert message in body["message"]
    assert body["retryable"] is False
    assert sent_since(notes_up, before) == []


def test_unknown_and_forbidden_tools_are_the_same_protocol_error(
    transport: str, notes: McpSession, notes_up: Upstream
) -> None:
    unknown = notes.protocol_error("notes.delete_everything", {"path": "ai-agent/mcp-basics.md"})
    forbidden = notes.protocol_error("admin_run_command", {"command": "rm -rf /"})
    assert unknown.code == forbidden.code == types.INVALID_PARAMS
    assert unknown.error.message == "Unknown tool: notes.delete_everything"
    assert forbidden.error.message == "Unknown tool: admin_run_command"  # indistinguishable from unknown
    assert forbidden.error.data == unknown.error.data
    assert notes_up.count("runCommand") == 0
    assert notes_up.domain()["commands_run"] == 0


# ============================================================================ path injection


ATTACKS = ["../admin", "a/b", "x?y=1", "#frag", "%2e%2e", "../../notes/search?keyword=x", "..", "a b/../c"]


@pytest.mark.parametrize("pet_id", ATTACKS)
def test_path_parameters_stay_one_segment(transport: str, pet: McpSession, pet_up: Upstream, pet_id: str) -> None:
    before = last_seq(pet_up)
    err(pet.call("pets_get", {"petId": pet_id}), "NOT_FOUND")
    new = sent_since(pet_up, before)
    assert [r["operation"] for r in new] == ["getPet"]  # one request, and to the route it was meant for
    raw = new[0]["path"]
    segment = raw.removeprefix("/pets/")
    assert raw == "/pets/" + segment and "/" not in segment and "?" not in segment and "#" not in segment
    assert unquote(segment) == pet_id
    assert new[0]["path_params"] == {"petId": pet_id}
    assert new[0]["query"] == ""


# ============================================================================ secrets and logs


def test_the_secret_never_reaches_clients_or_logs(
    transport: str,
    notes: McpSession,
    pet: McpSession,
    notes_up: Upstream,
    pet_up: Upstream,
    notes_http: HttpServer,
    pet_http: HttpServer,
) -> None:
    # Exercise the paths that could echo a credential: success, upstream 401 with a challenge,
    # an upstream error message, a bad argument. Earlier tests of this transport count too.
    ok(notes.call("notes_search", {"keyword": "agent"}))
    pet_up.fault(operation="getPet", status=400, body={"error": {"message": f"token {PET_CANARY} is weird"}})
    echoed = err(pet.call("pets_get", {"petId": "1"}), "ARGUMENT_INVALID")
    assert PET_CANARY not in echoed["message"] and "***" in echoed["message"]  # redacted, not dropped
    notes_up.set_auth("bearer:another-token")
    try:
        err(notes.call("notes_search", {"keyword": "agent"}), "UNAUTHORIZED")
    finally:
        notes_up.set_auth(f"bearer:{NOTES_CANARY}")
    assert notes_up.last_request("searchNotes")["headers"]["authorization"] == f"Bearer {NOTES_CANARY}"

    for session in (notes, pet):
        assert session.seen, "nothing was recorded"
        for seen in session.seen:
            assert NOTES_CANARY not in seen and PET_CANARY not in seen
    if TRANSPORTS[transport][0] == "stdio":
        logs = [notes.stderr(), pet.stderr()]
    else:
        logs = [notes_http.stderr(), pet_http.stderr()]
    for log in logs:
        assert "traceId=" in log  # debug logging was on and went to stderr
        assert NOTES_CANARY not in log and PET_CANARY not in log
        no_traceback(log)


@pytest.mark.parametrize("transport", STDIO, indirect=True)
def test_stdio_stdout_carries_only_json_rpc(transport: str, notes: McpSession, pet: McpSession) -> None:
    # a success, a tool error and a protocol error, on top of everything this session did before
    ok(notes.call("notes_search", {"keyword": "mcp"}))
    ok(pet.call("pets_get", {"petId": "1"}))  # each session logs a call even when this test runs alone
    err(notes.call("notes_search", {"keyword": "x"}), "ARGUMENT_INVALID")
    notes.protocol_error("nope")
    for session in (notes, pet):
        assert session.stdout_copy is not None
        messages = jsonrpc_lines(session.stdout_copy.read_text(encoding="utf-8"))
        assert len(messages) >= len(session.seen)
        assert "tool=" in session.stderr()  # the logs went to stderr instead


def test_stdio_raw_protocol_and_malformed_input(notes_up: Upstream) -> None:
    """Line by line over a pipe, as any stdio client: junk is skipped, bad requests get JSON-RPC errors."""
    proc = subprocess.Popen(
        cli("serve", *serve_args("notes", notes_up)),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=child_env(NOTES_ENV),
        cwd=ROOT,
        text=True,
        encoding="utf-8",
    )
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    lines: queue.Queue[str] = queue.Queue()
    stderr: list[str] = []
    readers = [
        threading.Thread(target=lambda: [lines.put(line) for line in proc.stdout], daemon=True),  # type: ignore[union-attr]
        threading.Thread(target=lambda: stderr.extend(proc.stderr), daemon=True),  # type: ignore[union-attr]
    ]
    for reader in readers:
        reader.start()

    def send(message: dict[str, Any] | str) -> None:
        proc.stdin.write((message if isinstance(message, str) else json.dumps(message)) + "\n")  # type: ignore[union-attr]
        proc.stdin.flush()  # type: ignore[union-attr]

    def answer(request_id: int) -> dict[str, Any]:
        message = json.loads(lines.get(timeout=30))
        assert message.get("id") == request_id, message
        return message  # type: ignore[no-any-return]

    def request(request_id: int, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        send({"jsonrpc": "2.0", "id": request_id, "method": method, **({"params": params} if params else {})})
        return answer(request_id)

    try:
        send("this is not JSON")
        send('{"jsonrpc": "2.0", "id": 99, "method": ')
        init = request(
            1,
            "initialize",
            {"protocolVersion": LEGACY, "capabilities": {}, "clientInfo": {"name": "raw-e2e", "version": "0"}},
        )
        assert init["result"]["protocolVersion"] == LEGACY
        assert init["result"]["serverInfo"]["name"] == "notes"
        send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        listed = request(2, "tools/list")
        assert [t["name"] for t in listed["result"]["tools"]] == overlay_tools("notes")[0]
        assert request(3, "tools/call", {"name": "nope", "arguments": {}})["error"]["code"] == -32602
        assert request(4, "bogus/method")["error"]["code"] == -32601
        assert request(5, "tools/call", {"arguments": {}})["error"]["code"] == -32602
        assert request(6, "tools/list", {"cursor": "not-a-cursor"})["error"]["code"] == -32602
        called = request(7, "tools/call", {"name": "notes_search", "arguments": {"keyword": "mcp"}})
        assert called["result"]["isError"] is False and called["result"]["structuredContent"]["total"] >= 1
        assert lines.empty()  # the junk lines produced nothing on stdout
    finally:
        proc.stdin.close()
        proc.wait(15)
        for reader in readers:
            reader.join(5)
    assert proc.returncode == 0
    assert lines.empty()  # and nothing after the last answer either
    no_traceback("".join(stderr))


# ============================================================================ HTTP specifics


def _initialize(http: httpx2.Client, url: str, **headers: str) -> httpx2.Response:
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": LEGACY, "capabilities": {}, "clientInfo": {"name": "raw-e2e", "version": "0"}},
    }
    return http.post(url, json=body, headers={"Accept": "application/json, text/event-stream", **headers})


def test_http_health_and_dns_rebinding_protection(notes_http: HttpServer) -> None:
    health = notes_http.health()
    assert health["status"] == "ok" and health["tools"] == len(overlay_tools("notes")[0])
    # `serve SPEC` starts without hashing what it compiled: /healthz hashes it when first asked, the same hash
    assert health["manifest"] == compile_example("notes").manifest.content_hash
    with httpx2.Client(trust_env=False, timeout=10) as http:
        good = _initialize(http, notes_http.url)
        assert good.status_code == 200 and good.headers["content-type"].startswith("application/json")
        assert good.json()["result"]["serverInfo"]["name"] == "notes"
        assert _initialize(http, notes_http.url, Host="evil.example").status_code == 421
        assert _initialize(http, notes_http.url, Host=f"evil.example:{notes_http.port}").status_code == 421
        assert _initialize(http, notes_http.url, Origin="http://evil.example").status_code == 403
        assert _initialize(http, notes_http.url, Origin=f"http://localhost:{notes_http.port}").status_code == 200


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_http_graceful_shutdown(
    sig: signal.Signals,
    notes_up: Upstream,
    notes_manifest: tuple[Path, subprocess.CompletedProcess[str]],
    logs: Path,
    loop: BlockingPortal,
) -> None:
    args = ["--manifest", str(notes_manifest[0]), "--base-url", notes_up.base_url, "--log-level", "info"]
    server = HttpServer.start(args, log_dir=logs, env=NOTES_ENV)
    try:
        session = McpSession.http(loop, server.url, mode="legacy", label="shutdown")
        ok(session.call("notes_search", {"keyword": "mcp"}))  # leaves a pooled upstream connection open
        session.close()
        started = time.monotonic()
        status = server.stop(sig, timeout=15)
        assert time.monotonic() - started < 10
    finally:
        server.stop(signal.SIGKILL)
    assert status in (0, -sig, 128 + sig), status
    stderr = server.stderr()
    no_traceback(stderr)
    assert "Application shutdown complete" in stderr


# ============================================================================ --manifest and --stateless


def test_compiled_manifest_served_stateless(
    notes_up: Upstream,
    notes_manifest: tuple[Path, subprocess.CompletedProcess[str]],
    logs: Path,
    loop: BlockingPortal,
    inspected: dict[str, list[dict[str, Any]]],
) -> None:
    manifest, compiled = notes_manifest
    content_hash = json.loads(manifest.read_text(encoding="utf-8"))["content_hash"]
    assert f"wrote {manifest}" in compiled.stderr and content_hash in compiled.stderr

    args = ["--manifest", str(manifest), "--base-url", notes_up.base_url]
    with HttpServer.start([*args, "--stateless"], log_dir=logs, env=NOTES_ENV) as server:
        assert server.health()["manifest"] == content_hash
        with httpx2.Client(trust_env=False, timeout=10) as http:
            response = _initialize(http, server.url)
            assert response.status_code == 200 and "mcp-session-id" not in response.headers
        for mode, protocol in (("legacy", LEGACY), ("auto", MODERN)):
            session = McpSession.http(loop, server.url, mode=mode, label=f"stateless-{mode}")
            try:
                assert session.protocol_version == protocol
                tools = session.list_tools()
                assert [t.name for t in tools] == [d["name"] for d in inspected["notes"]]
                assert [t.input_schema for t in tools] == [d["inputSchema"] for d in inspected["notes"]]
                assert ok(session.call("notes_search", {"keyword": "mcp"}))["total"] >= 1
                forbidden = err(session.call("notes_read", {"path": "private/diary-2026-11.md"}), "FORBIDDEN")
                assert forbidden["message"].startswith("That note is in a folder an agent may not read")
                assert session.protocol_error("admin_run_command").code == types.INVALID_PARAMS
            finally:
                session.close()

    stdio = McpSession.stdio(loop, args, mode="legacy", label="manifest-stdio", log_dir=logs, env=NOTES_ENV)
    try:
        assert [t.name for t in stdio.list_tools()] == overlay_tools("notes")[0]
        assert ok(stdio.call("notes_search", {"keyword": "tool"}))["total"] >= 1
    finally:
        stdio.close()


# ============================================================================ timeouts, outages, overlay codes


def test_timeout_failure_mode_override_and_unavailable(loop: BlockingPortal, logs: Path, tmp_path: Path) -> None:
    """A tight timeout and an overlay that re-maps 503, against an upstream that is then stopped."""
    overlay = yaml.safe_load((EXAMPLES / "petstore" / "overlay.yaml").read_text(encoding="utf-8"))
    overlay["upstream"]["timeout"] = {"connect": 2, "read": 0.75, "total": 10}  # seconds
    get = next(t for t in overlay["tools"] if t["name"] == "pets_get")
    get["failure_modes"][503] = {
        "code": "MAINTENANCE",
        "message": "The pet store is down for maintenance; try again in a few minutes.",
        "retryable": True,
    }
    path = tmp_path / "tight.overlay.yaml"
    path.write_text(yaml.safe_dump(overlay, sort_keys=False, allow_unicode=True), encoding="utf-8")

    with contextlib.ExitStack() as stack:
        up = stack.enter_context(Upstream.start("petstore"))
        args = [*example_args("petstore", path), "--base-url", up.base_url]
        server = stack.enter_context(HttpServer.start(args, log_dir=logs))
        sessions = [
            McpSession.http(loop, server.url, mode="legacy", label="tight-http-legacy"),
            McpSession.http(loop, server.url, mode="auto", label="tight-http-modern"),
            McpSession.stdio(loop, args, mode="auto", label="tight-stdio", log_dir=logs),
        ]
        for session in sessions:
            stack.callback(session.close)

        for session in sessions:
            ok(session.call("pets_get", {"petId": "2"}))
            up.fault(operation="getPet", kind="delay", delay=2.0)
            started = time.monotonic()
            slow = err(session.call("pets_get", {"petId": "2"}), "UPSTREAM_TIMEOUT")
            assert time.monotonic() - started < 1.9  # the read timeout ended the call, not the upstream
            assert slow["retryable"] is True

            up.fault(operation="getPet", status=503)
            down = err(session.call("pets_get", {"petId": "2"}), "MAINTENANCE")
            assert down["message"].startswith("The pet store is down for maintenance")
            assert (down["retryable"], down["status"]) == (True, 503)
        up.assert_no_violations()

        up.stop()  # the upstream goes away; the MCP server keeps running
        for session in sessions:
            gone = err(session.call("pets_get", {"petId": "2"}), "UPSTREAM_UNAVAILABLE")
            assert gone["retryable"] is True and "status" not in gone
            assert gone["message"].endswith("; retry later")
        no_traceback(server.stderr())


# ============================================================================ bad input to the CLI


def _write(tmp: Path, name: str, text: str) -> str:
    (tmp / name).write_text(text, encoding="utf-8")
    return str(tmp / name)


def _overlay_variant(tmp: Path, name: str, old: str, new: str) -> str:
    text = (EXAMPLES / "notes" / "overlay.yaml").read_text(encoding="utf-8")
    assert old in text
    return _write(tmp, name, text.replace(old, new))


NOTES_SPEC = str(EXAMPLES / "notes" / "openapi.yaml")

# id -> (arguments (a callable of the scratch folder), text stderr must contain)
BAD_INPUT: dict[str, tuple[Callable[[Path], list[str]], str]] = {
    "broken-yaml": (
        lambda t: ["serve", _write(t, "broken.yaml", 'openapi: 3.0.3\ninfo: {title: x, version: "1"\npaths: {}\n')],
        "broken.yaml:3:1: invalid YAML",
    ),
    "not-openapi": (
        lambda t: ["serve", _write(t, "plain.yaml", "hello: world\n"), "--all-operations"],
        "plain.yaml: not an OpenAPI document",
    ),
    "missing-spec": (lambda t: ["serve", str(t / "nowhere.yaml"), "--all-operations"], "nowhere.yaml: file not found"),
    "overlay-unknown-operation": (
        lambda t: [
            "serve",
            NOTES_SPEC,
            "--overlay",
            _overlay_variant(t, "op.yaml", "operation: searchNotes", "operation: serchNotes"),
        ],
        "unknown operation 'serchNotes'; did you mean 'searchNotes'?",
    ),
    "overlay-key-typo": (
        lambda t: [
            "serve",
            NOTES_SPEC,
            "--overlay",
            _overlay_variant(t, "key.yaml", "    audit_event: notes.searched", "    audit_evnt: notes.searched"),
        ],
        "unknown key 'audit_evnt' in tools[0](notes_search); did you mean 'audit_event'?",
    ),
    "missing-base-url-variable": (
        lambda t: [
            "serve",
            NOTES_SPEC,
            "--overlay",
            _overlay_variant(t, "url.yaml", "${NOTES_API_URL:-http://127.0.0.1:8701}", "${NOTES_E2E_URL}"),
        ],
        "environment variable NOTES_E2E_URL is not set; upstream.base_url needs it",
    ),
    "missing-secret-variable": (
        lambda t: [
            "serve",
            NOTES_SPEC,
            "--overlay",
            _overlay_variant(t, "secret.yaml", "${NOTES_API_TOKEN:-}", "${NOTES_E2E_TOKEN}"),
        ],
        "environment variable NOTES_E2E_TOKEN is not set; upstream.auth.value needs it",
    ),
    "missing-secret-variable-http": (
        lambda t: [
            "serve",
            NOTES_SPEC,
            "--overlay",
            _overlay_variant(t, "secret-http.yaml", "${NOTES_API_TOKEN:-}", "${NOTES_E2E_TOKEN}"),
            "--transport",
            "http",
            "--port",
            "9",
        ],
        "environment variable NOTES_E2E_TOKEN is not set; upstream.auth.value needs it",
    ),
    "missing-manifest": (lambda t: ["serve", "--manifest", str(t / "none.json")], "manifest not found"),
    "bad-manifest": (
        lambda t: ["serve", "--manifest", _write(t, "bad.json", '{"tools": 1}')],
        "bad.json: not a usable manifest",
    ),
}


@pytest.fixture(scope="module")
def bad_input_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, subprocess.CompletedProcess[str]]:
    """Every bad-input command, run concurrently once (each is a cold interpreter start)."""
    scratch = tmp_path_factory.mktemp("bad-input")
    commands = {case: build(scratch) for case, (build, _) in BAD_INPUT.items()}
    with ThreadPoolExecutor(max_workers=4) as pool:
        futures = {case: pool.submit(run_cli, *args, timeout=120) for case, args in commands.items()}
        return {case: future.result() for case, future in futures.items()}


@pytest.mark.parametrize("case", list(BAD_INPUT))
def test_bad_input_exits_2_with_one_paragraph(
    case: str, bad_input_runs: dict[str, subprocess.CompletedProcess[str]]
) -> None:
    proc = bad_input_runs[case]
    expected = BAD_INPUT[case][1]
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    assert proc.stdout == ""  # nothing on stdout: on stdio it would corrupt the protocol
    message = proc.stderr.strip()
    no_traceback(message)
    assert expected in message, message
    assert message.startswith("openapi2mcp: "), message
    assert "\n\n" not in message and len(message.splitlines()) <= 12, message  # one short paragraph


def test_http_configuration_error_does_not_claim_to_serve(
    bad_input_runs: dict[str, subprocess.CompletedProcess[str]],
) -> None:
    assert "serving" not in bad_input_runs["missing-secret-variable-http"].stderr
