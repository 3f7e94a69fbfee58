"""Issue 11 items 8 and 14: the audit trail survives cancelled calls and planted files.

Item 8: a call the client cancels (`notifications/cancelled` from the SDK client, or the HTTP
response stream dropped) while a slow upstream holds its request still gets its result line,
outcome `cancelled`, listing the request that was sent. Before the fix `CancelledError` (not an
`Exception`) went past every handler and the trail showed an attempt and nothing else. Real
processes throughout: the mail-and-files upstream (a delay fault holds the request), `openapi2mcp
serve` over stdio and Streamable HTTP, the SDK `Client` in both protocol eras.

Item 14: `--audit-log` (and `OPENAPI2MCP_AUDIT_LOG`, for `serve` and for a frozen package)
refuses a symlink planted at its path, refuses files others own or hard-link, creates the file
0600 and tightens a wider pre-existing one (with a warning).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

from examples import Upstream
from tests.e2e_support import HttpServer, child_env, cli, no_traceback, run_cli
from tests.local import EXAMPLES

SPEC = EXAMPLES / "mailfiles" / "openapi.yaml"
CANARY = "CANARY-audit-hardening-51c0"
OVERLAY = """\
openapi2mcp: 1
upstream:
  base_url: ${MAILFILES_API_URL}
  auth: {type: bearer, value: "${MAILFILES_API_TOKEN}"}
  timeout: {connect: 5, read: 120, total: 180}
tools:
  - name: links_create
    operation: createDownloadLink
    idempotent: true
  - name: files_list
    operation: listFiles
resources:
  - uri: files://{fileId}
    name: file
    operation: getFile
"""
ERAS = {"2025-11-25": "legacy", "2026-07-28": "auto"}


def days_ahead(days: int) -> str:
    from datetime import UTC, datetime, timedelta

    moment = datetime.now(UTC).replace(hour=23, minute=59, second=0, microsecond=0) + timedelta(days=days)
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


LINK = {"fileId": "f_abc123", "expiresAt": days_ahead(30)}


@pytest.fixture(scope="module")
def up() -> Iterator[Upstream]:
    with Upstream.start("mailfiles", auth=f"bearer:{CANARY}") as server:
        yield server


@pytest.fixture(autouse=True)
def _clean(up: Upstream) -> Iterator[None]:
    up.reset()
    up.clear_faults()
    yield
    up.clear_faults()


@pytest.fixture
def overlay(tmp_path: Path) -> Path:
    path = tmp_path / "overlay.yaml"
    path.write_text(OVERLAY)
    return path


def env_for(up: Upstream) -> dict[str, str]:
    return {"MAILFILES_API_URL": up.base_url, "MAILFILES_API_TOKEN": CANARY,
            "OPENAPI2MCP_SIGNING_KEY": "test-signing-key-0123456789abcdef-audit"}


def result_lines(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    lines = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    return [line for line in lines if line["phase"] == "result"]


async def wait_for(check: Callable[[], bool], what: str, limit: float = 60) -> None:
    """Poll until `check()` holds (a generous bound, not a speed assertion)."""
    deadline = time.monotonic() + limit
    while not await anyio.to_thread.run_sync(check):
        assert time.monotonic() < deadline, f"gave up waiting for {what}"
        await anyio.sleep(0.05)


async def cancel_once_sent(up: Upstream, run: Callable[[], Any], operation: str) -> None:
    """Start `run()` (a client call) and cancel it once the upstream holds the request."""
    before = len(up.requests(operation))
    with anyio.CancelScope() as scope:
        async with anyio.create_task_group() as tg:

            async def watch() -> None:
                await wait_for(lambda: len(up.requests(operation)) > before, f"{operation} to reach the upstream")
                scope.cancel()  # the SDK client sends notifications/cancelled (or drops the POST at 2026-07-28)

            tg.start_soon(watch)
            await run()
            pytest.fail("the call answered although the upstream was holding it")


def assert_cancelled_line(path: Path, name: str, operation: str) -> dict[str, Any]:
    lines = [line for line in result_lines(path) if line.get("tool", line.get("resource")) == name]
    assert len(lines) == 1, lines
    line = lines[0]
    assert line["outcome"] == "cancelled" and line["error"] is None, line
    assert line["requests"] == [{"operation": operation, "method": line["requests"][0]["method"], "status": None,
                                 "cancelled": True}], line
    return line


async def then_still_serves(client: Client, audit: Path) -> None:
    """The session goes on: the next call works and is audited as usual."""
    result = await client.call_tool("files_list", {})
    assert not result.is_error, result
    assert any(line.get("tool") == "files_list" and line["outcome"] == "ok" for line in result_lines(audit))


# ============================================================================ item 8: cancelled calls


@pytest.mark.anyio
@pytest.mark.parametrize("era", list(ERAS))
async def test_a_cancelled_write_over_stdio_gets_its_result_line(up: Upstream, overlay: Path, tmp_path: Path,
                                                                  era: str) -> None:
    audit = tmp_path / "audit.jsonl"
    up.fault(operation="createDownloadLink", kind="delay", delay=60)
    params = StdioServerParameters(
        command=sys.executable, args=cli("serve", str(SPEC), "--overlay", str(overlay), "--audit-log", str(audit))[1:],
        env=child_env(env_for(up)), cwd=str(tmp_path),
    )
    with (tmp_path / "stderr.txt").open("w") as errlog:
        async with Client(stdio_client(params, errlog=errlog), mode=ERAS[era]) as client:
            assert client.protocol_version == era
            await cancel_once_sent(up, lambda: client.call_tool("links_create", LINK), "createDownloadLink")
            await wait_for(lambda: bool(result_lines(audit)), "the result line")
            line = assert_cancelled_line(audit, "links_create", "createDownloadLink")
            attempts = [x for x in map(json.loads, audit.read_text().splitlines()) if x["phase"] == "attempt"]
            assert [x["traceId"] for x in attempts] == [line["traceId"]]  # the attempt line has its result
            assert line["idempotencyKey"].startswith("o2m-") and line["caller"]["transport"] == "stdio"
            await then_still_serves(client, audit)
    no_traceback((tmp_path / "stderr.txt").read_text())
    assert CANARY not in audit.read_text()


@pytest.mark.anyio
@pytest.mark.parametrize("era", list(ERAS))
async def test_a_cancelled_read_over_stdio_gets_its_result_line(up: Upstream, overlay: Path, tmp_path: Path,
                                                                 era: str) -> None:
    """Reads too (no attempt line, but a request was sent), tools and resources alike."""
    audit = tmp_path / "audit.jsonl"
    up.fault(operation="listFiles", kind="delay", delay=60)
    up.fault(operation="getFile", kind="delay", delay=60)
    params = StdioServerParameters(
        command=sys.executable, args=cli("serve", str(SPEC), "--overlay", str(overlay), "--audit-log", str(audit))[1:],
        env=child_env(env_for(up)), cwd=str(tmp_path),
    )
    with (tmp_path / "stderr.txt").open("w") as errlog:
        async with Client(stdio_client(params, errlog=errlog), mode=ERAS[era]) as client:
            await cancel_once_sent(up, lambda: client.call_tool("files_list", {}), "listFiles")
            await wait_for(lambda: len(result_lines(audit)) == 1, "the tool's result line")
            assert_cancelled_line(audit, "files_list", "listFiles")
            await cancel_once_sent(up, lambda: client.read_resource("files://f_abc123"), "getFile")
            await wait_for(lambda: len(result_lines(audit)) == 2, "the resource's result line")
            line = result_lines(audit)[1]
            assert (line["event"], line["resource"], line["outcome"]) == ("resource_read", "files://f_abc123",
                                                                          "cancelled")
            assert line["requests"] == [{"operation": "getFile", "method": "GET", "status": None, "cancelled": True}]
            await then_still_serves(client, audit)


@pytest.mark.anyio
@pytest.mark.parametrize(("era", "flag"), [("2025-11-25", None), ("2025-11-25", "--sse"), ("2026-07-28", "--sse")])
async def test_a_cancelled_call_over_http_gets_its_result_line(up: Upstream, overlay: Path, tmp_path: Path,
                                                                era: str, flag: str | None) -> None:
    """2025-11-25: the client POSTs notifications/cancelled; 2026-07-28: it drops the call's SSE stream."""
    audit = tmp_path / "audit.jsonl"
    up.fault(operation="createDownloadLink", kind="delay", delay=60)
    args = [str(SPEC), "--overlay", str(overlay), "--audit-log", str(audit), *([flag] if flag else [])]
    with HttpServer.start(args, log_dir=tmp_path, env=env_for(up)) as server:
        async with Client(server.url, mode=ERAS[era]) as client:
            assert client.protocol_version == era
            await cancel_once_sent(up, lambda: client.call_tool("links_create", LINK), "createDownloadLink")
            await wait_for(lambda: bool(result_lines(audit)), "the result line")
            line = assert_cancelled_line(audit, "links_create", "createDownloadLink")
            assert line["caller"]["transport"] == "http"
            await then_still_serves(client, audit)
        no_traceback(server.stderr())


@pytest.mark.anyio
async def test_a_dropped_json_answer_at_2026_07_28_still_gets_the_calls_line(up: Upstream, overlay: Path,
                                                                            tmp_path: Path) -> None:
    """With JSON answers (no --sse) the SDK does not watch the connection: the call runs to its end
    although nobody reads the answer, and its line says what happened (the link was created)."""
    audit = tmp_path / "audit.jsonl"
    up.fault(operation="createDownloadLink", kind="delay", delay=3)
    # a link of its own: the upstream still finishes the earlier tests' cancelled creates of LINK (after their
    # 60 s delay), and an existing link is answered 200, not 201
    link = {**LINK, "expiresAt": days_ahead(29)}
    with HttpServer.start([str(SPEC), "--overlay", str(overlay), "--audit-log", str(audit)], log_dir=tmp_path,
                          env=env_for(up)) as server:
        async with Client(server.url, mode="auto") as client:
            await cancel_once_sent(up, lambda: client.call_tool("links_create", link), "createDownloadLink")
            await wait_for(lambda: bool(result_lines(audit)), "the result line")
    [line] = result_lines(audit)
    assert (line["tool"], line["outcome"], line["requests"][0]["status"]) == ("links_create", "ok", 201)


def test_a_client_that_stops_reading_ends_serve_quietly(overlay: Path, tmp_path: Path, up: Upstream) -> None:
    """The client closes its end of the server's stdout (an Inspector giving up): the next answer
    cannot be written. Before, that was "internal error (ExceptionGroup ...) This is a bug", exit 1."""
    hello = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "gone", "version": "1"}}}
    process = subprocess.Popen(cli("serve", str(SPEC), "--overlay", str(overlay)), env=child_env(env_for(up)),
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert process.stdin is not None and process.stdout is not None and process.stderr is not None
    process.stdin.write((json.dumps(hello) + "\n").encode())
    process.stdin.flush()
    assert json.loads(process.stdout.readline())["id"] == 1
    process.stdout.close()  # the client stops reading
    for message in ({"jsonrpc": "2.0", "method": "notifications/initialized"},
                    {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}):
        process.stdin.write((json.dumps(message) + "\n").encode())
    process.stdin.close()
    stderr = process.stderr.read().decode()  # until the server exits
    assert process.wait(timeout=60) == 0, stderr
    assert "internal error" not in stderr and "Traceback" not in stderr, stderr


# ============================================================================ item 14: the file


def test_a_symlink_planted_at_the_audit_path_is_refused(overlay: Path, tmp_path: Path, up: Upstream) -> None:
    """Before the fix the log followed the link: here it would have created (and then appended to) `victim`."""
    victim = tmp_path / "victim.txt"
    link = tmp_path / "audit.jsonl"
    link.symlink_to(victim)
    for args, env in (
        (["--audit-log", str(link)], {}),
        ([], {"OPENAPI2MCP_AUDIT_LOG": str(link)}),
    ):
        done = run_cli("serve", str(SPEC), "--overlay", str(overlay), *args, env={**env_for(up), **env})
        no_traceback(done.stderr)
        assert done.returncode == 2 and "is a symbolic link, which is refused" in done.stderr, done.stderr
        assert not victim.exists()


def test_the_audit_log_is_created_private_and_a_wider_one_is_tightened(overlay: Path, tmp_path: Path,
                                                                         up: Upstream) -> None:
    fresh = tmp_path / "fresh.jsonl"
    done = run_cli("serve", str(SPEC), "--overlay", str(overlay), "--audit-log", str(fresh),
                   env={**env_for(up)})
    assert done.returncode == 0, done.stderr
    assert (fresh.stat().st_mode & 0o777) == 0o600
    wide = tmp_path / "wide.jsonl"
    wide.write_text('{"earlier": "line"}\n')
    wide.chmod(0o644)
    env = {**env_for(up), "OPENAPI2MCP_AUDIT_LOG": str(wide)}
    done = run_cli("serve", str(SPEC), "--overlay", str(overlay), env=env)
    assert done.returncode == 0, done.stderr
    assert (wide.stat().st_mode & 0o777) == 0o600
    assert "could be read by others (mode 0644); its mode is now 0600" in done.stderr
    assert wide.read_text() == '{"earlier": "line"}\n'  # appended to, never truncated


def test_audit_files_others_could_reach_are_refused(overlay: Path, tmp_path: Path, up: Upstream) -> None:
    target = tmp_path / "real.jsonl"
    target.write_text("")
    hard = tmp_path / "hard.jsonl"
    os.link(target, hard)
    done = run_cli("serve", str(SPEC), "--overlay", str(overlay), "--audit-log", str(hard), env=env_for(up))
    assert done.returncode == 2 and "other hard link" in done.stderr, done.stderr
    if os.geteuid() == 0:  # only root can give a file away
        foreign = tmp_path / "foreign.jsonl"
        foreign.write_text("")
        os.chown(foreign, 65534, 65534)
        done = run_cli("serve", str(SPEC), "--overlay", str(overlay), "--audit-log", str(foreign), env=env_for(up))
        assert done.returncode == 2 and "belongs to another user (uid 65534)" in done.stderr, done.stderr


def test_a_frozen_package_refuses_a_planted_symlink_from_the_environment(overlay: Path, tmp_path: Path,
                                                                        up: Upstream) -> None:
    from openapi2mcp.compiler import compile_manifest
    from openapi2mcp.loader import load_spec
    from openapi2mcp.overlay import read_overlay

    module = tmp_path / "pkg" / "mailfiles_audit_mcp"
    module.mkdir(parents=True)
    (module / "__init__.py").write_text("")
    manifest = compile_manifest(load_spec(str(SPEC)), [read_overlay(overlay)]).manifest
    (module / "manifest.json").write_text(manifest.to_json())
    (module / "build.json").write_text(json.dumps({"name": "mailfiles-audit-mcp", "version": "1.0.0"}))
    link = tmp_path / "audit.jsonl"
    link.symlink_to(tmp_path / "victim.txt")
    env = child_env({**env_for(up), "OPENAPI2MCP_AUDIT_LOG": str(link)})
    env["PYTHONPATH"] = f"{tmp_path / 'pkg'}:{env['PYTHONPATH']}"
    command = [sys.executable, "-m", "openapi2mcp.serving", "mailfiles_audit_mcp", "--check"]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 2 and "is a symbolic link, which is refused" in done.stderr, done.stderr
    assert not (tmp_path / "victim.txt").exists()
    link.unlink()
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert (link.stat().st_mode & 0o777) == 0o600
