"""Third-party tier: Jupyter Server (PyPI `jupyter-server` 2.21.1), a file server with a token.

What it brings: a Swagger 2.0 description the server publishes itself (/api/spec.yaml, behind
the token) that does not match what the server answers (a `content` typed string that is an
array for folders, non-nullable fields that are null), patched by an OAI Overlay
(overlays/jupyter-fixes.yaml); an API key sent as `Authorization: token ...`; one path template
(`/api/contents/{path}`) whose parameter holds a whole relative path with slashes; request bodies
with a property named like the path parameter; 403 for a wrong token, 400/404/409/500 from the
file system. Served with overlays/jupyter.yaml, called over stdio and Streamable HTTP in both eras.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from anyio.from_thread import BlockingPortal
from hypothesis import given
from hypothesis import strategies as st

from tests.e2e_support import HttpServer, McpSession, err, no_traceback, ok
from tests.properties import PROFILE, Target, check, draw_call
from tests.thirdparty.lint_clean import assert_lints_clean
from tests.thirdparty.support import TRANSPORTS, Overlay, Service, User, connect, fetch_spec, server_python

OVERLAY = Overlay("jupyter")
FIXES = OVERLAY.full.parent / "jupyter-fixes.yaml"
TOKEN = "canary-jupyter-4be1f0c29a7d4e83"  # the server's token; must never reach a client or a log


# ============================================================================ fixtures


@pytest.fixture(scope="module")
def root(logs: Path) -> Path:
    """The folder the server serves, with a few files in it."""
    folder = logs / "root"
    (folder / "notes" / "2024").mkdir(parents=True)
    (folder / "notes" / "todo.md").write_text("# To do\n\n- read the MCP spec\n", encoding="utf-8")
    (folder / "notes" / "2024" / "übersicht & plan.md").write_text("Plan für 2024\n", encoding="utf-8")
    (folder / "notes" / "logo.png").write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(range(256)))
    (folder / "README.txt").write_text("Top-level readme\n", encoding="utf-8")
    return folder


@pytest.fixture(scope="module")
def jupyter(logs: Path, root: Path) -> Iterator[Service]:
    python = server_python("jupyter")
    home = logs / "jupyter-home"
    env = {f"JUPYTER_{d}_DIR": str(home / d.lower()) for d in ("RUNTIME", "DATA", "CONFIG")}

    def command(port: int) -> list[str]:
        return [
            str(python), "-m", "jupyter_server",
            "--ServerApp.ip=127.0.0.1", f"--ServerApp.port={port}", "--ServerApp.port_retries=0",
            f"--ServerApp.root_dir={root}", "--ServerApp.open_browser=False", "--ServerApp.allow_root=True",
            f"--IdentityProvider.token={TOKEN}", "--FileContentsManager.delete_to_trash=False",
        ]

    with Service.start("jupyter", command, ready="/api", log_dir=logs, env=env) as service:
        yield service


@pytest.fixture(scope="module")
def spec(jupyter: Service, logs: Path) -> Path:
    return fetch_spec(jupyter.direct + "/api/spec.yaml", logs / "jupyter.yaml", {"Authorization": f"token {TOKEN}"})


def serve_args(spec: Path, overlay: Path) -> list[str]:
    return [str(spec), "--overlay", str(FIXES), "--overlay", str(overlay), "--log-level", "info"]


@pytest.fixture(scope="module")
def served(jupyter: Service, spec: Path) -> tuple[list[str], dict[str, str]]:
    return serve_args(spec, OVERLAY.full), {"JUPYTER_URL": jupyter.url, "JUPYTER_TOKEN": TOKEN}


def test_the_overlay_passes_lint(served: tuple[list[str], dict[str, str]]) -> None:
    """openapi2mcp lint (every rule, every client profile but Gemini's) finds nothing left to fix."""
    assert_lints_clean(served[0])


@pytest.fixture(scope="module")
def http(served: tuple[list[str], dict[str, str]], logs: Path) -> Iterator[HttpServer]:
    args, env = served
    with HttpServer.start([*args, "--sse"], log_dir=logs, env=env) as server:  # --sse: 2025-11-25 elicitation
        yield server


@pytest.fixture(scope="module")
def session(
    loop: BlockingPortal,
    transport: str,
    http: HttpServer,
    served: tuple[list[str], dict[str, str]],
    user: User,
    logs: Path,
) -> Iterator[McpSession]:
    args, env = served
    s = connect(loop, transport, http=http, args=args, env=env, user=user, log_dir=logs)
    yield s
    s.close()


@pytest.fixture(scope="module")
def home(root: Path, transport: str) -> str:
    """A folder of this transport's own, for the tests that write."""
    (root / transport).mkdir()
    return transport


# ============================================================================ tests


def test_tools_list(transport: str, session: McpSession) -> None:
    assert session.protocol_version == TRANSPORTS[transport][2]
    tools = {t.name: t for t in session.list_tools()}
    assert list(tools) == OVERLAY.listed()
    manage = tools["files_manage"]
    props = manage.input_schema["properties"]
    assert set(props) == {"action", "path", "content", "new_path"}  # the bodies' own `path`s are hidden/renamed
    assert props["action"]["enum"] == ["write", "mkdir", "rename", "delete"]
    assert props["path"]["description"].startswith("The file or folder, relative to the root")
    assert manage.annotations is not None and manage.annotations.destructive_hint is True
    for name in ("files_list", "files_read"):
        assert tools[name].annotations is not None and tools[name].annotations.read_only_hint is True
        assert set(tools[name].input_schema["properties"]) == {"path"}  # type/format/content are fixed


def test_list_and_read_paths_with_slashes_and_unicode(transport: str, session: McpSession, jupyter: Service) -> None:
    top = ok(session.call("files_list", {}))  # the root: GET /api/contents, added by jupyter-fixes.yaml
    assert top["path"] == ""
    assert {(e["name"], e["type"]) for e in top["entries"]} >= {("notes", "directory"), ("README.txt", "file")}
    folder = ok(session.call("files_list", {"path": "notes/2024"}))
    [entry] = folder["entries"]
    size = len("Plan für 2024\n".encode())
    assert (entry["path"], entry["type"], entry["size"]) == ("notes/2024/übersicht & plan.md", "file", size)

    result = session.call("files_read", {"path": entry["path"]})
    text = ok(result)
    assert text["content"] == "Plan für 2024\n" and text["size"] == size
    assert result.meta is not None
    [request] = result.meta["openapi2mcp/requests"]
    # one path segment, every reserved character percent-encoded; Jupyter decodes it back
    assert request["url"].startswith(f"{jupyter.url}/api/contents/notes%2F2024%2F%C3%BCbersicht%20%26%20plan.md?")


def test_write_rename_and_read_back(transport: str, session: McpSession, home: str, root: Path) -> None:
    path = f"{home}/draft.md"
    written = ok(session.call("files_manage", {"action": "write", "path": path, "content": "# Draft\n\nfirst\n"}))
    assert written["path"] == path and written["size"] == len("# Draft\n\nfirst\n")
    assert (root / path).read_text(encoding="utf-8") == "# Draft\n\nfirst\n"
    ok(session.call("files_manage", {"action": "write", "path": path, "content": "second\n"}))  # overwrite
    assert ok(session.call("files_read", {"path": path}))["content"] == "second\n"

    ok(session.call("files_manage", {"action": "mkdir", "path": f"{home}/archive"}))
    moved = ok(session.call("files_manage", {"action": "rename", "path": path, "new_path": f"{home}/archive/d.md"}))
    assert moved["path"] == f"{home}/archive/d.md"
    assert not (root / path).exists() and (root / home / "archive" / "d.md").read_text() == "second\n"
    listed = ok(session.call("files_list", {"path": f"{home}/archive"}))
    assert [e["name"] for e in listed["entries"]] == ["d.md"]


def test_delete_asks_the_user_first(transport: str, session: McpSession, home: str, root: Path, user: User) -> None:
    path = f"{home}/old.txt"
    ok(session.call("files_manage", {"action": "write", "path": path, "content": "old\n"}))

    user.answer = "decline"
    declined = err(session.call("files_manage", {"action": "delete", "path": path}), "CONFIRMATION_DECLINED")
    assert "nothing was sent" in declined["message"] and (root / path).exists()
    assert user.asked == [user.asked[0]] and f'Delete "{path}" from the Jupyter server?' in user.asked[0]

    user.answer = "cancel"
    err(session.call("files_manage", {"action": "delete", "path": path}), "CONFIRMATION_DECLINED")
    assert (root / path).exists()

    user.answer = "accept"
    assert ok(session.call("files_manage", {"action": "delete", "path": path})) == {"status": 204}
    assert not (root / path).exists() and len(user.asked) == 3
    err(session.call("files_read", {"path": path}), "NOT_FOUND")


BAD = [
    pytest.param("files_read", {}, "path", "required argument missing", id="missing"),
    pytest.param("files_read", {"path": 7}, "path", "expected string, got integer", id="type"),
    pytest.param("files_read", {"path": ""}, "path", "must not be empty", id="empty-path-segment"),
    pytest.param("files_read", {"path": "a", "format": "base64"}, "format", "unknown argument", id="fixed-argument"),
    pytest.param("files_manage", {"action": "chmod", "path": "a"}, "action", "is not one of", id="unknown-action"),
    pytest.param("files_manage", {"action": "delete", "path": "a", "content": "x"}, "content",
                 "action 'delete' does not take content", id="argument-of-another-action"),
    pytest.param("files_manage", {"action": "rename", "path": "a"}, "new_path", "needs new_path", id="rename-needs"),
]


@pytest.mark.parametrize(("tool", "arguments", "field", "message"), BAD)
def test_bad_arguments_are_refused_before_anything_is_sent(
    transport: str, session: McpSession, jupyter: Service, tool: str, arguments: dict[str, Any], field: str,
    message: str,
) -> None:
    before = jupyter.relay.bytes_up
    body = err(session.call(tool, arguments), "ARGUMENT_INVALID")
    assert body["field"] == field and message in body["message"], body
    assert jupyter.relay.bytes_up == before  # not one byte reached Jupyter


def test_the_file_system_says_no(transport: str, session: McpSession, home: str, jupyter: Service) -> None:
    before = jupyter.relay.bytes_up
    folder = err(session.call("files_read", {"path": "notes"}), "ARGUMENT_INVALID")  # 400 bad type
    assert jupyter.relay.bytes_up > before
    assert folder["message"].startswith("That path is a folder or a binary file")
    assert "notes is a directory, not a file" in folder["message"]  # Jupyter's own words
    binary = err(session.call("files_read", {"path": "notes/logo.png"}), "ARGUMENT_INVALID")
    assert "not UTF-8 encoded" in binary["message"]
    not_a_folder = err(session.call("files_list", {"path": "README.txt"}), "ARGUMENT_INVALID")
    assert not_a_folder["message"].startswith("That path is a file, not a folder")

    ok(session.call("files_manage", {"action": "write", "path": f"{home}/a.txt", "content": "a"}))
    ok(session.call("files_manage", {"action": "write", "path": f"{home}/b.txt", "content": "b"}))
    rename = {"action": "rename", "path": f"{home}/a.txt", "new_path": f"{home}/b.txt"}
    taken = err(session.call("files_manage", rename), "CONFLICT")
    assert taken["status"] == 409 and "File already exists" in taken["message"]
    full = err(session.call("files_manage", {"action": "delete", "path": "notes"}), "ARGUMENT_INVALID")
    assert "not empty" in full["message"]
    nowhere = err(session.call("files_manage", {"action": "write", "path": "no/such/dir.txt", "content": "x"}),
                  "UPSTREAM_ERROR")  # Jupyter answers 500 for a missing parent folder
    assert nowhere["status"] == 500 and nowhere["retryable"] is False


def test_not_found(transport: str, session: McpSession) -> None:
    missing = err(session.call("files_read", {"path": "notes/none.md"}), "NOT_FOUND")
    assert missing["message"].startswith("No file at that path; list the folder")
    # Jupyter's GET 404 says application/json but its body is the plain sentence "file or directory
    # '/notes/none.md' does not exist": quoted as text (PATCH's 404 is JSON)
    assert missing["status"] == 404 and missing["retryable"] is False
    assert "(upstream said: file or directory '/notes/none.md' does not exist)" in missing["message"], missing
    gone = err(session.call("files_list", {"path": "nowhere"}), "NOT_FOUND")
    assert gone["status"] == 404
    rename = err(session.call("files_manage", {"action": "rename", "path": "nope.txt", "new_path": "c.txt"}),
                 "NOT_FOUND")
    assert rename["message"].startswith("Nothing at that path")
    assert "(upstream said: File or directory does not exist: nope.txt)" in rename["message"]


def test_upstream_down(transport: str, session: McpSession, jupyter: Service) -> None:
    with jupyter.relay.unplugged():
        down = err(session.call("files_list", {"path": "notes"}), "UPSTREAM_UNAVAILABLE")
        assert down["retryable"] is True and "status" not in down
    assert ok(session.call("files_list", {"path": "notes"}))["entries"]


def test_the_token_never_reaches_clients_or_logs(transport: str, session: McpSession, http: HttpServer) -> None:
    ok(session.call("files_read", {"path": "README.txt"}))
    for seen in session.seen:
        assert TOKEN not in seen
    log = session.stderr() if TRANSPORTS[transport][0] == "stdio" else http.stderr()
    assert "tool=files_read" in log and TOKEN not in log
    no_traceback(log)


def test_a_wrong_token_is_forbidden(jupyter: Service, spec: Path, logs: Path, loop: BlockingPortal) -> None:
    """Jupyter answers 403 (not 401) to a wrong token; over HTTP in both eras."""
    args = serve_args(spec, OVERLAY.full)
    env = {"JUPYTER_URL": jupyter.url, "JUPYTER_TOKEN": "not-the-token"}
    with HttpServer.start(args, log_dir=logs, env=env) as server:
        for mode in ("legacy", "auto"):
            s = McpSession.http(loop, server.url, mode=mode, label=f"wrong-token-{mode}")
            try:
                refused = err(s.call("files_list", {}), "FORBIDDEN")
            finally:
                s.close()
            assert refused["status"] == 403 and refused["retryable"] is False
            assert "not-the-token" not in json.dumps(refused)


# ============================================================================ drift: the spec as published


def test_drift_the_unpatched_spec_still_answers(jupyter: Service, spec: Path, logs: Path, loop: BlockingPortal) -> None:
    """Jupyter's spec as published, no OAI fixes, a tool without a `select`: what real users hit.

    Every answer carries `"hash": null, "hash_algorithm": null` (typed string), `"mimetype": null`
    for folders, and a folder's `content` is an array (typed string). Every call used to be
    UPSTREAM_INVALID_RESPONSE; now the answer comes, with the values that do not fit left out of
    structuredContent (the SDK client validates it) and named in `_meta`, and the upstream's JSON
    unchanged in the text block (issue 10 part 1).
    """
    overlay = logs / "jupyter-raw.yaml"
    raw = {
        "openapi2mcp": 1,
        "upstream": {
            "base_url": "${JUPYTER_URL}",
            "auth": {"type": "header", "name": "Authorization", "value": "token ${JUPYTER_TOKEN}"},
        },
        "tools": [{"name": "contents_get", "operation": "GET /api/contents/{path}", "params": {"hash": {"value": 0}}}],
    }
    overlay.write_text(yaml.safe_dump(raw), encoding="utf-8")
    env = {"JUPYTER_URL": jupyter.url, "JUPYTER_TOKEN": TOKEN}
    s = McpSession.stdio(loop, [str(spec), "--overlay", str(overlay)], mode="auto", label="drift", log_dir=logs,
                         env=env)
    try:
        result = s.call("contents_get", {"path": "notes", "content": 1})
    finally:
        s.close()
    assert not result.is_error, result.model_dump_json()
    structured = result.structured_content  # the SDK client validated it against the outputSchema
    assert structured is not None and structured["name"] == "notes" and structured["type"] == "directory"
    assert structured["hash_algorithm"] is None and structured["mimetype"] is None  # nulls are accepted as they are
    assert structured["content"] is None  # an array where the spec says string: left out (the key is required)
    upstream = json.loads(result.content[0].text)  # type: ignore[union-attr]
    assert sorted(e["name"] for e in upstream["content"]) == ["2024", "logo.png", "todo.md"]  # unchanged in the text
    assert result.meta is not None
    repairs = [r for v in result.meta.values() if isinstance(v, list) for r in v if isinstance(r, dict) and "path" in r]
    assert [(r["path"], r["expected"], r["got"]) for r in repairs] == [("content", "string", "array")], result.meta


# ============================================================================ property tier (last: it writes at random)


@PROFILE
@given(data=st.data())
def test_generated_arguments_hold_the_properties(generated: Target, data: st.DataObject) -> None:
    """tests/properties.py against this real server, every request checked by tests/spec_proxy.py."""
    check(generated, *draw_call(data, generated, broken=data.draw(st.booleans(), label="broken")))
