"""Tool names every client accepts (docs/overlay.md#tool-names).

Claude Desktop and claude.ai refuse the whole tool list when one name fails
`^[a-zA-Z0-9_-]{1,64}$`; Claude Code calls a tool `mcp__<server>__<tool>` and refuses more than
64 characters. Written `domain.verb` names are served as `domain_verb`, the prose of the overlay
follows, and every run-time message names the served tool. Checked here at compile time, in the
runtime with the SDK client, end to end through `openapi2mcp serve` over stdio, and in `inspect`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
from mcp import Client, MCPError
from typer.testing import CliRunner

from examples import Upstream
from openapi2mcp.cli.app import app
from openapi2mcp.compiler import compile_manifest
from openapi2mcp.compiler.names import rewrite_mentions
from openapi2mcp.errors import InputError
from openapi2mcp.loader import load_spec
from openapi2mcp.manifest import Manifest
from openapi2mcp.overlay.reading import parse_overlay
from openapi2mcp.result import error_of
from openapi2mcp.runtime import Runtime, RuntimeOptions
from tests.e2e_support import MODERN, McpSession, ok, portal, run_cli
from tests.helpers import compile_text, tool
from tests.local import EXAMPLES

CLIENT_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")  # Claude Desktop / claude.ai / OpenAI-compatible APIs


def _op(op_id: str | None, method: str = "get") -> dict[str, Any]:
    node: dict[str, Any] = {"responses": {"200": {"description": "ok", "content": {"application/json": {
        "schema": {"type": "object", "properties": {"id": {"type": "string"}}}}}}}}
    if op_id is not None:
        node["operationId"] = op_id
    if method != "get":
        node["requestBody"] = {"content": {"application/json": {"schema": {
            "type": "object", "properties": {"q": {"type": "string"}}}}}}
    return node


SPEC = {
    "openapi": "3.0.3",
    "info": {"title": "Names", "version": "1"},
    "servers": [{"url": "https://api.example.com"}],
    "paths": {
        "/items": {"get": _op("listItems"), "post": _op("createItem", "post")},
        "/items/{id}": {
            "parameters": [{"name": "id", "in": "path", "required": True, "schema": {"type": "string"}}],
            "get": _op("getItem"),
            "delete": _op("deleteItem", "delete"),
        },
    },
}


def errors_of(tmp_path: Path, overlay: str) -> str:
    with pytest.raises(InputError) as info:
        compile_text(tmp_path, SPEC, overlay)
    return info.value.render()


# ============================================================================ compile time


def test_dots_are_served_as_underscores_and_the_written_name_is_kept(tmp_path: Path) -> None:
    c = compile_text(tmp_path, SPEC, """\
        openapi2mcp: 1
        tools:
          - {name: items.list, operation: listItems}
          - {name: items.get.one, operation: getItem}
          - {name: items_create, operation: createItem}
        """)
    m = c.manifest
    assert [t.name for t in m.tools] == ["items_list", "items_get_one", "items_create"]
    assert [t.written_name for t in m.tools] == ["items.list", "items.get.one", None]
    assert [t.definition()["name"] for t in m.tools] == ["items_list", "items_get_one", "items_create"]
    assert not any("items.list" in json.dumps(t.definition()) for t in m.tools)  # clients never see it
    assert m.tool("items.list") is None
    # the Manifest file holds the written name only where it differs, and reads back the same
    data = json.loads(m.to_json())
    assert [t.get("written_name") for t in data["tools"]] == ["items.list", "items.get.one", None]
    assert Manifest.from_json(m.to_json()) == m


def test_tools_served_alike_are_an_error_naming_both_and_their_lines(tmp_path: Path) -> None:
    msg = errors_of(tmp_path, """\
        openapi2mcp: 1
        tools:
          - {name: items.get, operation: getItem}
          - {name: items.list, operation: listItems}
          - {name: items_get, operation: deleteItem}
        """)
    assert "tool names collide (1 problem)" in msg
    assert ("overlay.yaml:5:6 at tools[2](items_get).name: tools 'items.get' (overlay.yaml:3) and 'items_get' "
            "would both be served as 'items_get'") in msg
    assert "server: {tool_names: as_written}" in msg  # the way out, for clients that accept dots
    # the same written name twice stays its own error
    assert "tool name 'items.get' is used twice" in errors_of(tmp_path, """\
        openapi2mcp: 1
        tools:
          - {name: items.get, operation: getItem}
          - {name: items.get, operation: listItems}
        """)


def test_as_written_serves_names_and_prose_unchanged(tmp_path: Path) -> None:
    c = compile_text(tmp_path, SPEC, """\
        openapi2mcp: 1
        server: {tool_names: as_written}
        tools:
          - {name: items.list, operation: listItems, description: "List; read one with items.get."}
          - {name: items.get, operation: getItem}
          - {name: items_get, operation: deleteItem}
        """)
    assert [(t.name, t.written_name) for t in c.manifest.tools] == [
        ("items.list", None), ("items.get", None), ("items_get", None)]
    assert tool(c, "items.list").description == "List; read one with items.get."


PROSE = """\
    openapi2mcp: 1
    server:
      instructions: Start with items.list, then items.get; never items.delete without asking.
    tools:
      - name: items.list
        title: List (then items.get)
        description: >-
          Lists items; read one in full with items.get. Not items.getter, x.items.get,
          https://api.example.com/items.get, items.get/all, items.get.md, mail@items.get or
          items.get-like. See `items.get`. (items.get) and items.get.
        operation: listItems
        response: {select: "{id: id}"}
      - name: items.get
        operation: getItem
        params:
          id: {description: "An id returned by items.list.", default: items.list}
        failure_modes:
          404: {code: NOT_FOUND, message: "No such item; call items.list first."}
      - name: items.delete
        operation: deleteItem
        side_effects: [Gone for good; items.list no longer shows it.]
        confirmation: {mode: required, message: "Delete {id}? items.get shows it first."}
      - name: items.manage
        actions:
          create: {operation: createItem, description: Create one (items.get reads it back).}
          remove: {operation: deleteItem}
    resources:
      - {uri: "items://{id}", name: items.get, operation: getItem, description: Same as items.get.}
    prompts:
      - name: items.review
        description: Review items with items.list.
        arguments: [{name: id, description: "The id, as items.list returns it."}]
        messages: [{text: "Read {id} with items.get, then decide."}]
    """


def test_prose_names_served_tools(tmp_path: Path) -> None:
    m = compile_text(tmp_path, SPEC, PROSE).manifest
    listing = m.tool("items_list")
    assert listing is not None and listing.title == "List (then items_get)"
    assert listing.description == (
        "Lists items; read one in full with items_get. Not items.getter, x.items.get, "
        "https://api.example.com/items.get, items.get/all, items.get.md, mail@items.get or "
        "items.get-like. See `items_get`. (items_get) and items_get.")
    assert m.server.instructions == "Start with items_list, then items_get; never items_delete without asking."
    get = m.tool("items_get")
    assert get is not None
    assert get.input_schema["properties"]["id"]["description"] == "An id returned by items_list."
    assert get.input_schema["properties"]["id"]["default"] == "items.list"  # a value, not prose
    assert get.failure_modes["404"].message == "No such item; call items_list first."
    delete = m.tool("items_delete")
    assert delete is not None and delete.side_effects == ["Gone for good; items_list no longer shows it."]
    assert delete.branches[0].confirmation_message == "Delete {id}? items_get shows it first."
    manage = m.tool("items_manage")
    assert manage is not None and "Create one (items_get reads it back)." in manage.description
    assert listing.response.select == "{id: id}"
    # resources and prompts keep their own names; their prose follows the tools
    assert [r.name for r in m.resources] == ["items.get"] and m.resources[0].description == "Same as items_get."
    prompt = m.prompts[0]
    assert prompt.name == "items.review" and prompt.description == "Review items with items_list."
    assert prompt.arguments[0].description == "The id, as items_list returns it."
    assert prompt.messages[0].text == "Read {id} with items_get, then decide."


def test_rewrite_mentions_is_whole_token_only() -> None:
    renames = {"a.b": "a_b", "a.b.c": "a_b_c", "x_y": "x_y"}
    assert rewrite_mentions("a.b, a.b.c; a.b. a.bc a.b.cd z.a.b a.b-c a.b_c /a.b:", renames) == \
        "a_b, a_b_c; a_b. a.bc a.b.cd z.a.b a.b-c a.b_c /a.b:"
    assert rewrite_mentions("a.b", {"a.b": "a.b"}) == "a.b"  # as_written: nothing changes


def test_raw_tool_names_pass_the_client_rule(tmp_path: Path) -> None:
    spec = {
        "openapi": "3.0.3",
        "info": {"title": "Raw", "version": "1"},
        "paths": {
            "/a": {"get": _op("repos/get"), "post": _op("pets.list", "post")},
            "/b": {"get": _op("items_get"), "post": _op("weird id!! (v2)", "post")},
            "/c/{x}.json": {"get": _op(None), "delete": _op("x" * 80, "delete")},
            "/d": {"get": _op("-.-")},
        },
    }
    for x in ("/c/{x}.json",):
        spec["paths"][x]["parameters"] = [{"name": "x", "in": "path", "required": True, "schema": {"type": "string"}}]
    names = [t.name for t in compile_text(tmp_path, spec, all_operations=True).manifest.tools]
    assert names[:5] == ["repos_get", "pets_list", "items_get", "weird_id_v2", "get_c_x_json"]
    assert len(names[5]) == 64 and names[6] == "operation"
    assert all(CLIENT_NAME.match(n) for n in names), names
    # passthrough: a raw name never takes a served overlay name
    c = compile_text(tmp_path, spec, """\
        openapi2mcp: 1
        passthrough: true
        tools: [{name: items.get, operation: repos/get}]
        """)
    names = [t.name for t in c.manifest.tools]
    assert names[0] == "items_get" and "items_get_2" in names and len(set(names)) == len(names)
    assert all(CLIENT_NAME.match(n) for n in names), names


# ============================================================================ run time: the served name everywhere

MAILFILES = EXAMPLES / "mailfiles"
CANARY = "canary-names-3c1d"
# The mailfiles example as an author who keeps the seed's domain.verb would write it.
SERVED = ["emails_send_external", "emails_bulk_send", "emails_campaign_status", "files_list",
          "files_create_download_link", "files_delete"]


def dotted(text: str, served: list[str]) -> str:
    """An overlay written with `domain.verb` names (and prose naming them so)."""
    for name in served:
        text = re.sub(rf"(?<![\w.]){name}(?!\w)", name.replace("_", ".", 1), text)
    return text


@pytest.fixture(scope="module")
def mail_up() -> Iterator[Upstream]:
    with Upstream.start("mailfiles", auth=f"bearer:{CANARY}") as server:
        yield server


@pytest.mark.anyio
async def test_errors_confirmations_limits_and_audit_name_the_served_tool(mail_up: Upstream, tmp_path: Path) -> None:
    text = dotted((MAILFILES / "overlay.yaml").read_text(encoding="utf-8"), SERVED)
    assert "name: files.delete" in text and "name: files.list" in text
    text = text.replace("  - name: files.list\n", "  - name: files.list\n    rate_limit: {rate: 1/min, burst: 1}\n")
    m = compile_manifest(load_spec(str(MAILFILES / "openapi.yaml")), [parse_overlay(text, "dotted.yaml")]).manifest
    assert [t.name for t in m.tools] == SERVED
    audit = tmp_path / "audit.jsonl"
    env = {"MAILFILES_API_URL": mail_up.base_url, "MAILFILES_API_TOKEN": CANARY,
           "OPENAPI2MCP_SIGNING_KEY": "names-test-key-0123456789abcdef-xyz"}
    rt = Runtime(m, RuntimeOptions(environ=env, audit_log=str(audit)))
    async with Client(rt.build_server()) as client:  # no elicitation: confirmation cannot be asked
        listed = [t.name for t in (await client.list_tools()).tools]
        delete = await client.call_tool("files_delete", {"fileId": "f_abc123"})
        first = await client.call_tool("files_list", {})
        limited = await client.call_tool("files_list", {})
        with pytest.raises(MCPError, match=r"Unknown tool: files\.list"):
            await client.call_tool("files.list", {})
    await rt.aclose()
    assert all(CLIENT_NAME.match(n) for n in listed) and "files_list" in listed
    refused = error_of(delete)
    assert refused is not None and refused["code"] == "CONFIRMATION_REQUIRED"
    assert refused["message"].startswith("files_delete needs the user's confirmation")
    assert not first.is_error
    over = error_of(limited)
    assert over is not None and over["code"] == "RATE_LIMITED" and "files_list's limit" in over["message"]
    lines = [json.loads(line) for line in audit.read_text(encoding="utf-8").splitlines()]
    assert [(line["tool"], line["outcome"], line["error"]) for line in lines if line["phase"] == "result"] == [
        ("files_delete", "denied", "CONFIRMATION_REQUIRED"), ("files_list", "ok", None),
        ("files_list", "denied", "RATE_LIMITED"), ("files.list", "denied", "UNKNOWN_TOOL"),  # as the client sent it
    ]


# ============================================================================ end to end: serve + SDK client

NOTES_SERVED = ["notes_search", "notes_read", "tasks_create", "tasks_list", "admin_run_command"]


def test_served_example_lists_only_client_safe_names(tmp_path: Path) -> None:
    """The notes example written with dotted names, served by `openapi2mcp serve` over stdio."""
    overlay = tmp_path / "overlay.yaml"
    overlay.write_text(dotted((EXAMPLES / "notes" / "overlay.yaml").read_text(encoding="utf-8"), NOTES_SERVED),
                       encoding="utf-8")
    assert "name: notes.search" in overlay.read_text(encoding="utf-8")
    audit = tmp_path / "audit.jsonl"
    with Upstream.start("notes") as up, portal() as loop:
        args = [str(EXAMPLES / "notes" / "openapi.yaml"), "--overlay", str(overlay), "--base-url", up.base_url,
                "--audit-log", str(audit)]
        session = McpSession.stdio(loop, args, mode="auto", label="names", log_dir=tmp_path)
        try:
            assert session.protocol_version == MODERN
            tools = session.list_tools()
            names = [t.name for t in tools]
            assert names == ["notes_search", "notes_read", "tasks_create", "tasks_list"]
            assert all(CLIENT_NAME.match(n) for n in names), names
            descriptions = " ".join(t.description or "" for t in tools)
            assert "with notes_read" in descriptions and "by notes_search" in descriptions
            assert "notes.read" not in descriptions and "notes.search" not in descriptions
            found = ok(session.call("notes_search", {"keyword": "mcp"}))
            assert found["results"]
            error = session.protocol_error("notes.search", {"keyword": "mcp"})
            assert error.error.message == "Unknown tool: notes.search"
            prompt = session.portal.call(session.client.get_prompt, "study.plan", {"path": "ai-agent/mcp-basics.md"})
            first = prompt.messages[0].content
            assert isinstance(first, types.TextContent) and "with tasks_create only after" in first.text
        finally:
            session.close()
    lines = [json.loads(line) for line in audit.read_text(encoding="utf-8").splitlines()]
    calls = [line for line in lines if line["event"] == "tool_call" and line["phase"] == "result"]
    assert [(line["tool"], line["outcome"]) for line in calls] == [("notes_search", "ok"), ("notes.search", "denied")]


# ============================================================================ inspect and config

LONG = """\
openapi2mcp: 1
server: {name: an-unusually-long-server-name-for-tests}
tools:
  - {name: items.list, operation: listItems}
  - {name: items.get_with_a_rather_long_descriptive_name, operation: getItem}
"""


def test_inspect_warns_about_names_clients_refuse(tmp_path: Path) -> None:
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps(SPEC), encoding="utf-8")
    overlay = tmp_path / "overlay.yaml"
    overlay.write_text(LONG, encoding="utf-8")
    long_name = "mcp__an-unusually-long-server-name-for-tests__items_get_with_a_rather_long_descriptive_name"
    for extra in ([], ["--json"]):
        proc = run_cli("inspect", str(spec), "--overlay", str(overlay), *extra)
        assert proc.returncode == 0, proc.stderr
        assert (f"warning: tool 'items_get_with_a_rather_long_descriptive_name': Claude Code calls it "
                f"'{long_name}', {len(long_name)} characters, over its limit of 64") in proc.stderr
        assert "items_list'" not in proc.stderr  # mcp__...__items_list is short enough
        if extra:
            assert [t["name"] for t in json.loads(proc.stdout)] == [
                "items_list", "items_get_with_a_rather_long_descriptive_name"]
        else:
            assert "items_list (written items.list)" in proc.stdout
    overlay.write_text("openapi2mcp: 1\nserver: {tool_names: as_written}\n"
                       "tools: [{name: items.list, operation: listItems}]\n", encoding="utf-8")
    proc = run_cli("inspect", str(spec), "--overlay", str(overlay), "--json")
    assert proc.returncode == 0 and json.loads(proc.stdout)[0]["name"] == "items.list"
    assert "tool 'items.list' does not match ^[a-zA-Z0-9_-]{1,64}$" in proc.stderr
    proc = run_cli("inspect", *[str(EXAMPLES / "notes" / p) for p in ("openapi.yaml",)],
                   "--overlay", str(EXAMPLES / "notes" / "overlay.yaml"), "--json")
    assert proc.returncode == 0 and proc.stderr == ""  # the examples pass every client's rule


def test_config_writes_absolute_paths(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "api").mkdir()
    for name in ("spec.yaml", "overlay.yaml", "manifest.json"):
        (tmp_path / "api" / name).write_text("x", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    runner = CliRunner()
    out = runner.invoke(app, ["config", "claude", "--name", "n", "--command", ".venv/bin/openapi2mcp serve",
                              "--", "api/spec.yaml", "--overlay", "api/overlay.yaml", "-O=api/extra.yaml",
                              "--audit-log", "-", "--log-level", "info", "--base-url", "http://127.0.0.1:1"])
    assert out.exit_code == 0, out.output
    entry = json.loads(out.stdout)["mcpServers"]["n"]
    root = str(tmp_path)
    assert entry["command"] == f"{root}/.venv/bin/openapi2mcp"
    assert entry["args"] == ["serve", f"{root}/api/spec.yaml", "--overlay", f"{root}/api/overlay.yaml",
                             f"-O={root}/api/extra.yaml", "--audit-log", "-", "--log-level", "info",
                             "--base-url", "http://127.0.0.1:1"]
    out = runner.invoke(app, ["config", "vscode", "--name", "n", "--command",
                              "openapi2mcp serve --manifest api/manifest.json"])
    assert json.loads(out.stdout)["servers"]["n"] == {
        "type": "stdio", "command": "openapi2mcp", "args": ["serve", "--manifest", f"{root}/api/manifest.json"]}


def test_readme_lists_every_built_in_error_code() -> None:
    from openapi2mcp.upstream.failures import STATUS_ERRORS

    readme = " ".join((EXAMPLES.parent / "README.md").read_text(encoding="utf-8").split())
    overlay_doc = " ".join((EXAMPLES.parent / "docs" / "overlay.md").read_text(encoding="utf-8").split())
    for status, (code, _, _) in STATUS_ERRORS.items():
        for doc in (readme, overlay_doc):
            assert re.search(rf"\b{status}\b[^.;]*?`{code}`", doc), (status, code)

