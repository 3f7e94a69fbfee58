"""In-process MCP sessions for tests: the SDK's own `Client`, connected to a Runtime in this process.

    from openapi2mcp.testing import connect

    async with connect(manifest, environ={"NOTES_API_URL": url}) as client:
        listed = await client.list_tools()
        result = await client.call_tool("notes_search", {"keyword": "mcp"})

No port, no subprocess: the client talks to `Runtime.build_server()` in memory, with the same
handlers (listing per scope, argument checks, confirmation, shaping) that stdio and Streamable
HTTP serve; the upstream calls are real HTTP requests. `mode` is the SDK's: "auto" (its default)
speaks 2026-07-28 directly to the server object, "legacy" runs the 2025-11-25 initialize handshake
over in-memory streams. Run time only (part of openapi2mcp-runtime): no compiler is imported.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mcp import Client

    from openapi2mcp.manifest import Manifest
    from openapi2mcp.runtime import Runtime


@contextlib.asynccontextmanager
async def connect(
    target: Manifest | Runtime,
    *,
    environ: Mapping[str, str] | None = None,
    mode: str = "auto",
    **client_options: Any,
) -> AsyncIterator[Client]:
    """A connected SDK `Client` for `target`: a Manifest (served by a Runtime made here) or your own Runtime.

    `environ` is the Runtime's environment for a Manifest (the upstream's `${VAR}`s; default
    os.environ); a Runtime you pass was configured by you and stays open afterwards, one made here
    is closed. `client_options` go to `mcp.Client` (e.g. `elicitation_callback`, `read_timeout_seconds`).
    """
    from mcp import Client

    from openapi2mcp.runtime import Runtime, RuntimeOptions

    owned = not isinstance(target, Runtime)
    runtime = target if isinstance(target, Runtime) else Runtime(target, RuntimeOptions(environ=environ))
    try:
        async with Client(runtime.build_server(), mode=mode, **client_options) as client:
            yield client
    finally:
        if owned:
            await runtime.aclose()
