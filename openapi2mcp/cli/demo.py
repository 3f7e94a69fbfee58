"""`openapi2mcp demo`: the whole product on a bundled example, on this machine, in a few seconds.

1. starts the bundled Study Notes REST API (seed 000) on 127.0.0.1,
2. compiles its OpenAPI description with its curated overlay,
3. serves the tools over Streamable HTTP on 127.0.0.1,
4. connects the official MCP Python SDK client and shows tools/list and a few real calls,
   failures included,
5. with `--serve`, keeps serving and prints how to connect your own MCP client.

Nothing leaves 127.0.0.1.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import typer

EXAMPLE = "notes"


def examples_package() -> ModuleType:
    """The example APIs: shipped in the wheel as openapi2mcp._examples, or examples/ in a checkout."""
    try:
        from openapi2mcp import _examples  # type: ignore[attr-defined]

        return _examples  # type: ignore[no-any-return]
    except ImportError:
        pass
    root = Path(__file__).resolve().parents[2]
    if (root / "examples" / "__init__.py").exists():
        sys.path.insert(0, str(root))
        import examples

        return examples
    raise RuntimeError("the bundled examples are missing from this installation")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@contextlib.contextmanager
def _serving(app: Any, port: int) -> Iterator[str]:
    """Run an ASGI app with uvicorn in a thread on 127.0.0.1:port until the block ends."""
    import uvicorn

    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="error", lifespan="on"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 15
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError(f"the MCP server did not start on 127.0.0.1:{port}")
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        server.should_exit = True
        thread.join(10)


def _say(text: str = "") -> None:
    typer.echo(text)


def _short(value: Any, width: int = 300) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= width else text[: width - 1] + "…"


def run_demo(*, serve: bool = False, port: int = 8000) -> None:
    import anyio

    from openapi2mcp.compiler import compile_manifest
    from openapi2mcp.loader import load_spec
    from openapi2mcp.manifest import BASE_URL_VAR
    from openapi2mcp.overlay import read_overlay
    from openapi2mcp.runtime import Runtime, RuntimeOptions, http_app

    ex = examples_package()
    spec_path = Path(ex.spec_path_of(EXAMPLE))
    overlay_path = spec_path.parent / "overlay.yaml"
    _say("openapi2mcp demo: the bundled Study Notes API (seed 000); nothing leaves 127.0.0.1\n")
    with ex.Upstream.start(EXAMPLE) as upstream:
        _say(f"1. REST API     {upstream.base_url}  ({spec_path.name}, a real Starlette server)")
        spec = load_spec(str(spec_path))
        compiled = compile_manifest(spec, [read_overlay(overlay_path)])
        raw = compile_manifest(spec, [], all_operations=True).manifest
        manifest = compiled.manifest
        manifest = manifest.model_copy(
            update={"upstream": manifest.upstream.model_copy(update={"base_url": upstream.base_url})}
        )
        listed = [t.definition() for t in manifest.tools if t.risk != "forbidden"]
        raw_size = len(json.dumps({"tools": [t.definition() for t in raw.tools]}).encode())
        size = len(json.dumps({"tools": listed}).encode())
        _say(f"2. Compiled     {len(listed)} task-level tools from {len(raw.tools)} operations with "
             f"{overlay_path.name}; tools/list {size:,} bytes (1:1 conversion: {raw_size:,})")
        mcp_port = port if serve else _free_port()
        # the demo's upstream is the one it started, whatever $OPENAPI2MCP_BASE_URL says
        env = {k: v for k, v in os.environ.items() if k != BASE_URL_VAR}
        with _serving(http_app(Runtime(manifest, RuntimeOptions(environ=env))), mcp_port) as url:
            _say(f"3. MCP server   {url}  (Streamable HTTP; stdio with `openapi2mcp serve`)")
            anyio.run(_tour, url)
            if serve:
                _instructions(url, spec_path, overlay_path, upstream.base_url)
                with contextlib.suppress(KeyboardInterrupt):
                    while True:
                        time.sleep(1)
                _say("\nstopped.")
                return
        _say("\nNext: `openapi2mcp demo --serve` keeps it running for your own MCP client;")
        _say(f"      `openapi2mcp inspect {_rel(spec_path)} --overlay {_rel(overlay_path)}` shows the tools;")
        _say("      README.md has the overlay format.")


async def _tour(url: str) -> None:
    from mcp import Client, MCPError

    from openapi2mcp.result import error_of

    async with Client(url) as client:
        _say(f"4. Connected    the MCP Python SDK client, protocol {client.protocol_version}\n")
        listing = await client.list_tools()
        _say("tools/list")
        for t in listing.tools:
            args = ", ".join(
                name + ("*" if name in t.input_schema.get("required", []) else "")
                for name in t.input_schema.get("properties", {})
            )
            hints = t.annotations.model_dump(exclude_none=True, by_alias=True) if t.annotations else {}
            kind = "read-only" if hints.get("readOnlyHint") else "writes"
            _say(f"  {t.name:<14} {kind:<9} ({args})")
        _say("  (* = required; admin_run_command is `risk: forbidden`: not listed, not callable)\n")

        calls: list[tuple[str, dict[str, Any], str]] = [
            ("notes_search", {"keyword": "MCP", "limit": 2}, "a search, projected by response.select"),
            ("notes_read", {"path": "ai-agent/mcp-basics.md"}, "read the first hit"),
            ("tasks_create", {"title": "Review MCP basics", "source_note": "ai-agent/mcp-basics.md"}, "a write"),
            ("notes_read", {"path": "private/diary-2026-11.md"}, "the upstream says 403: a stable error code"),
            ("notes_search", {"keyword": "x", "limit": 50}, "bad arguments never reach the API"),
        ]
        for name, arguments, why in calls:
            _say(f"tools/call {name} {_short(arguments)}   # {why}")
            result = await client.call_tool(name, arguments)
            if result.is_error:
                err = error_of(result) or {}
                _say(f"  -> isError {err.get('code')}: {err.get('message')}")
            else:
                _say("  -> " + textwrap.shorten(_short(result.structured_content, 2000), 300, placeholder=" …"))
        _say('tools/call admin_run_command {"command": "rm -rf /"}   # a forbidden tool')
        try:
            await client.call_tool("admin_run_command", {"command": "rm -rf /"})
            _say("  -> (unexpectedly answered)")
        except MCPError as e:
            _say(f"  -> JSON-RPC error {e.code}: {e.error.message}")


def _instructions(url: str, spec: Path, overlay: Path, upstream: str) -> None:
    _say(f"""
Serving until Ctrl-C. Connect an MCP client to {url}, for example:
  npx @modelcontextprotocol/inspector --cli {url} --transport http --method tools/list
  VS Code (.vscode/mcp.json):  {{"servers": {{"notes": {{"type": "http", "url": "{url}"}}}}}}
Or run it over stdio against this REST API (it lives as long as this demo):
  NOTES_API_URL={upstream} openapi2mcp serve {_rel(spec)} --overlay {_rel(overlay)}""")


def _rel(path: Path) -> str:
    with contextlib.suppress(ValueError):
        return str(path.relative_to(Path.cwd()))
    return str(path)
