"""`openapi2mcp serve SPEC --overlay F --reload` (issue 12): each saved edit is served, a bad one is not.

Real processes throughout: the notes upstream (`examples.Upstream`), `openapi2mcp serve --reload`
over Streamable HTTP and over stdio, the SDK `Client` in both eras. The overlay (or the spec, or a
file the spec includes) is a copy in tmp_path that the test edits while the server runs; what a
client lists afterwards, the notification it got and the server's stderr are the proof. Waits
poll for the effect (never a blind sleep).
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

from examples import Upstream
from openapi2mcp.compiler import compile_manifest
from openapi2mcp.loader import load_spec
from openapi2mcp.overlay import read_overlay
from openapi2mcp.runtime import Runtime, RuntimeOptions
from openapi2mcp.testing import connect
from tests.e2e_support import LEGACY, MODERN, HttpServer, child_env, cli, no_traceback, portal, run_cli
from tests.local import EXAMPLES, ROOT

RENAMED = ("name: tasks_list\n", "name: tasks_overview\n")
BROKEN = ("name: tasks_list\n", "name: tasks list\n")  # a space: not a valid tool name


@pytest.fixture(scope="module")
def up() -> Iterator[Upstream]:
    with Upstream.start("notes") as server:
        yield server


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A copy of the notes example that the test may edit."""
    for name in ("openapi.yaml", "overlay.yaml"):
        shutil.copy(EXAMPLES / "notes" / name, tmp_path / name)
    return tmp_path


def edit(path: Path, old: str, new: str) -> None:
    """Save an edit the way editors do: a new file renamed over the old one."""
    text = path.read_text(encoding="utf-8")
    assert old in text, old
    fresh = path.with_name(path.name + ".tmp")
    fresh.write_text(text.replace(old, new, 1), encoding="utf-8")
    fresh.replace(path)


def wait_for(check: Callable[[], Any], what: str, timeout: float = 30) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def serve_args(project: Path, *extra: str) -> list[str]:
    return [str(project / "openapi.yaml"), "--overlay", str(project / "overlay.yaml"), "--reload", *extra]


class Listener:
    """A 2025-11-25 client's message handler: the notifications it received."""

    def __init__(self) -> None:
        self.notes: list[str] = []
        self._heard: anyio.Event | None = None

    async def __call__(self, message: Any) -> None:
        if isinstance(message, types.ServerNotification):
            self.notes.append(message.method)
            if self._heard is not None:
                self._heard.set()

    async def wait(self, method: str) -> None:
        with anyio.fail_after(30):
            while method not in self.notes:
                self._heard = anyio.Event()
                await self._heard.wait()


# ============================================================================ HTTP


def test_http_reload_serves_each_good_edit_and_keeps_the_last_good_version(up: Upstream, project: Path) -> None:
    overlay = project / "overlay.yaml"
    with HttpServer.start(serve_args(project), log_dir=project, env={"NOTES_API_URL": up.base_url}) as server, \
            portal() as p:
        heard = Listener()
        cm = p.wrap_async_context_manager(Client(server.url, mode="legacy", message_handler=heard))
        client = cm.__enter__()
        try:
            assert client.protocol_version == LEGACY
            assert client.server_capabilities.tools is not None
            assert client.server_capabilities.tools.list_changed is True  # declared: this server reloads

            def names() -> list[str]:
                return sorted(t.name for t in p.call(client.list_tools).tools)

            assert "tasks_list" in names()
            wait_for(lambda: "--reload: watching 2 file(s)" in server.stderr(), "the watcher")

            edit(overlay, *RENAMED)
            wait_for(lambda: "tasks_overview" in names(), "the renamed tool")
            assert "tasks_list" not in names()
            wait_for(lambda: "notifications/tools/list_changed" in heard.notes, "notifications/tools/list_changed")
            result = p.call(client.call_tool, "tasks_overview", {})
            assert not result.is_error, result

            # a bad edit: the error compile gives, printed; the last good version keeps serving
            edit(overlay, RENAMED[1], BROKEN[1])
            wait_for(lambda: "still serving the last good version" in server.stderr(), "the reload error")
            assert "tasks_overview" in names()
            compiled = run_cli("compile", str(project / "openapi.yaml"), "--overlay", str(overlay), "-o", "-")
            assert compiled.returncode == 2
            message = compiled.stderr.strip()
            assert "tool name 'tasks list' is invalid" in message and f"{overlay}:" in message
            assert message in server.stderr()  # the same located message, word for word
            no_traceback(server.stderr())

            # the fix: served again, and announced again
            before = heard.notes.count("notifications/tools/list_changed")
            edit(overlay, BROKEN[1], RENAMED[1].replace("overview", "summary"))
            wait_for(lambda: "tasks_summary" in names(), "the fixed overlay")
            wait_for(lambda: heard.notes.count("notifications/tools/list_changed") > before, "a second notification")
        finally:
            cm.__exit__(None, None, None)


def test_http_reload_at_2026_07_28_publishes_on_listen_streams(up: Upstream, project: Path) -> None:
    async def scenario(url: str) -> tuple[bool | None, list[str], list[str]]:
        async with Client(url, mode="auto") as client:
            assert client.protocol_version == MODERN
            tools = client.server_capabilities.tools
            before = [t.name for t in (await client.list_tools()).tools]
            async with client.listen(tools_list_changed=True) as subscription:
                assert subscription.honored.tools_list_changed
                await anyio.to_thread.run_sync(edit, project / "overlay.yaml", *RENAMED)
                with anyio.fail_after(30):
                    event = await subscription.__anext__()
                assert type(event).__name__ == "ToolsListChanged"
            after = [t.name for t in (await client.list_tools()).tools]
            return (tools.list_changed if tools else None), before, after

    with HttpServer.start(serve_args(project), log_dir=project, env={"NOTES_API_URL": up.base_url}) as server:
        wait_for(lambda: "--reload: watching" in server.stderr(), "the watcher")
        declared, before, after = anyio.run(scenario, server.url)
    assert declared is True
    assert "tasks_list" in before and "tasks_overview" in after and "tasks_list" not in after


def test_without_reload_the_tools_list_does_not_claim_to_change(up: Upstream, project: Path) -> None:
    async def capabilities(url: str, mode: str) -> bool | None:
        async with Client(url, mode=mode) as client:
            tools = client.server_capabilities.tools
            return tools.list_changed if tools else None

    args = [str(project / "openapi.yaml"), "--overlay", str(project / "overlay.yaml")]
    with HttpServer.start(args, log_dir=project, env={"NOTES_API_URL": up.base_url}) as server:
        assert anyio.run(capabilities, server.url, "legacy") is False
        assert anyio.run(capabilities, server.url, "auto") is False


# ============================================================================ stdio


def test_stdio_reload_of_an_included_file_and_of_the_spec(up: Upstream, tmp_path: Path) -> None:
    """A multi-file spec (tests/specs/multi) served with --all-operations: editing a file it includes reloads."""
    shutil.copytree(ROOT / "tests" / "specs" / "multi", tmp_path / "multi")
    spec, included = tmp_path / "multi" / "openapi.yaml", tmp_path / "multi" / "paths" / "pet.yaml"
    errlog = tmp_path / "stdio.stderr"

    async def scenario() -> tuple[list[str], list[str]]:
        heard = Listener()
        params = StdioServerParameters(command=cli()[0], args=[*cli("serve", str(spec), "--all-operations",
                                                                    "--reload")[1:]],
                                       env=child_env(), cwd=str(ROOT))
        with errlog.open("w", encoding="utf-8") as err:
            async with Client(stdio_client(params, errlog=err), mode="legacy", message_handler=heard) as client:
                first = [t.description or "" for t in (await client.list_tools()).tools]
                await anyio.to_thread.run_sync(wait_for, lambda: "--reload: watching" in errlog.read_text(),
                                               "the watcher")
                assert f"{included}" in errlog.read_text() or "pet.yaml" in errlog.read_text()
                await anyio.to_thread.run_sync(edit, included, "  operationId: getPet\n",
                                               "  operationId: getPet\n  summary: Fetch one pet, reloaded\n")
                await heard.wait("notifications/tools/list_changed")
                second = [t.description or "" for t in (await client.list_tools()).tools]
                # a broken spec: the old tools stay
                await anyio.to_thread.run_sync(lambda: spec.write_text("openapi: 3.1.0\npaths: [\n", encoding="utf-8"))
                await anyio.to_thread.run_sync(wait_for, lambda: "still serving the last good version" in
                                               errlog.read_text(), "the reload error")
                assert [t.description or "" for t in (await client.list_tools()).tools] == second
                return first, second

    first, second = anyio.run(scenario)
    assert not any("reloaded" in d for d in first)
    assert any("Fetch one pet, reloaded" in d for d in second)
    text = errlog.read_text()
    assert f"{spec}" in text and "error:" in text
    no_traceback(text)


# ============================================================================ refused where nothing can reload


def test_reload_is_refused_for_a_manifest_and_in_a_frozen_package(tmp_path: Path) -> None:
    manifest = tmp_path / "m.json"
    assert run_cli("compile", str(EXAMPLES / "notes" / "openapi.yaml"), "--overlay",
                   str(EXAMPLES / "notes" / "overlay.yaml"), "-o", str(manifest)).returncode == 0
    refused = run_cli("serve", "--manifest", str(manifest), "--reload")
    assert refused.returncode == 2 and "--reload recompiles the spec" in refused.stderr, refused.stderr
    by_env = run_cli("serve", "--manifest", str(manifest), env={"OPENAPI2MCP_RELOAD": "1"})
    assert by_env.returncode == 2 and "OPENAPI2MCP_RELOAD" in by_env.stderr, by_env.stderr

    module = tmp_path / "notes_reload_mcp"
    module.mkdir()
    (module / "__init__.py").write_text("")
    (module / "manifest.json").write_text(manifest.read_text())
    import subprocess

    for extra, env in ((["--reload"], {}), ([], {"OPENAPI2MCP_RELOAD": "yes"})):
        done = subprocess.run([cli()[0], "-m", "openapi2mcp.serving", "notes_reload_mcp", *extra], cwd=tmp_path,
                              env=child_env({"PYTHONPATH": f"{tmp_path}:{ROOT}", **env}), capture_output=True,
                              text=True, timeout=60, check=False)
        assert done.returncode == 2, done.stderr
        assert "--reload / OPENAPI2MCP_RELOAD: reloading recompiles the spec" in done.stderr
        assert len(done.stderr.strip().splitlines()) == 1
        no_traceback(done.stderr)


# ============================================================================ the Runtime, in process


def test_runtime_reload_swaps_in_place_and_announces_on_a_2025_11_25_session(up: Upstream, tmp_path: Path) -> None:
    spec = load_spec(str(EXAMPLES / "notes" / "openapi.yaml"))
    first = compile_manifest(spec, [read_overlay(EXAMPLES / "notes" / "overlay.yaml")]).manifest
    renamed = tmp_path / "overlay.yaml"
    renamed.write_text((EXAMPLES / "notes" / "overlay.yaml").read_text().replace(*RENAMED))
    second = compile_manifest(spec, [read_overlay(renamed)]).manifest
    no_resources = tmp_path / "bare.yaml"
    text = (EXAMPLES / "notes" / "overlay.yaml").read_text()
    links = text[text.index("    links:"):text.index("  - name: notes_read")]
    no_resources.write_text(text[:text.index("\nresources:")].replace(links, "") + "\n")  # and no links to them
    third = compile_manifest(spec, [read_overlay(no_resources)]).manifest

    async def scenario() -> None:
        runtime = Runtime(first, RuntimeOptions(environ={"NOTES_API_URL": up.base_url}, list_changed=True))
        heard = Listener()
        async with connect(runtime, mode="legacy", message_handler=heard) as client:
            assert client.server_capabilities.tools.list_changed is True  # type: ignore[union-attr]
            assert "tasks_list" in [t.name for t in (await client.list_tools()).tools]  # the session is under way
            assert runtime.reload(first) == set()  # the same Manifest: nothing changed
            assert runtime.reload(second) == {"tools"}
            assert await runtime.announce({"tools"}) == 1
            names = [t.name for t in (await client.list_tools()).tools]
            assert "tasks_overview" in names and "tasks_list" not in names
            assert not (await client.call_tool("tasks_overview", {})).is_error
            await heard.wait("notifications/tools/list_changed")
            assert len((await client.list_resources()).resources) == 1  # notes://index
            assert {"resources", "prompts"} <= runtime.reload(third)
            assert (await client.list_resources()).resources == []  # the catalog was replaced under the server
        await runtime.aclose()

    anyio.run(scenario)


def test_a_reload_that_cannot_be_served_leaves_the_runtime_as_it_was(up: Upstream, tmp_path: Path) -> None:
    from openapi2mcp.upstream import ConfigError

    spec = load_spec(str(EXAMPLES / "notes" / "openapi.yaml"))
    first = compile_manifest(spec, [read_overlay(EXAMPLES / "notes" / "overlay.yaml")]).manifest
    needs = tmp_path / "overlay.yaml"
    needs.write_text((EXAMPLES / "notes" / "overlay.yaml").read_text().replace(
        'value: "${NOTES_API_TOKEN:-}"', 'value: "${NOTES_RELOAD_SECRET}"'))
    second = compile_manifest(spec, [read_overlay(needs)]).manifest
    runtime = Runtime(first, RuntimeOptions(environ={"NOTES_API_URL": up.base_url}, list_changed=True))
    with pytest.raises(ConfigError, match="NOTES_RELOAD_SECRET"):
        runtime.reload(second)
    assert runtime.manifest is first and "tasks_list" in runtime.tool_names
    anyio.run(runtime.aclose)
