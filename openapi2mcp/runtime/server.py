"""The MCP server: the SDK's low-level `Server` with thin handlers over a Runtime, for any transport.

tools/list and tools/call learn the caller from the request context (access.py: the token's
scopes over HTTP, the local user otherwise); a call sees only the overlay's
`upstream.forward_headers` of the inbound request (FORWARDED_HEADERS) and, for `upstream.auth`
forward / token_exchange, the caller's verified JWT (CALLER_TOKEN). resources/* and prompts/*
are installed by resources.py when the overlay defines some.
"""

from __future__ import annotations

import logging
import traceback
from typing import TYPE_CHECKING, Any

import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.shared.exceptions import MCPError

from openapi2mcp.runtime.access import caller_from_context, caller_token, inbound_headers
from openapi2mcp.runtime.changes import AnnouncingServer
from openapi2mcp.runtime.policy import Asker, InputRequired
from openapi2mcp.upstream import CALLER_TOKEN, FORWARDED_HEADERS

if TYPE_CHECKING:
    from openapi2mcp.runtime.core import Runtime

log = logging.getLogger("openapi2mcp.runtime")


def build_server(runtime: Runtime, *, stateless: bool = False) -> Server[Any]:
    """The SDK low-level server over `runtime`: handlers are thin; `Runtime.list_tools`/`call` do the work.

    `stateless`: served over stateless HTTP, where a 2025-11-25 client has no session to be asked in.
    """

    async def on_list_tools(ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        try:
            return runtime.list_tools(params.cursor if params else None, caller_from_context(ctx, runtime.local))
        except MCPError:
            raise
        except Exception:
            log.error("tools/list failed:\n%s", traceback.format_exc())
            raise MCPError(code=types.INTERNAL_ERROR, message="internal error; see the server log") from None

    async def on_call_tool(
        ctx: Any, params: types.CallToolRequestParams
    ) -> types.CallToolResult | types.InputRequiredResult:
        # reads ctx.request, ctx.session.check_client_capability, ctx.protocol_version and ctx.request_id
        # only: modern.py's fast path calls it with a CallContext that has just these (keep them in step)
        caller = caller_from_context(ctx, runtime.local)
        # only the overlay's upstream.forward_headers of the inbound request reach the upstream
        forwarded = FORWARDED_HEADERS.set(inbound_headers(ctx, runtime.manifest.upstream.forward_headers) or None)
        token = CALLER_TOKEN.set(caller_token(ctx))  # upstream.auth forward / token_exchange
        try:
            return await runtime.call(params.name, params.arguments, caller=caller,
                                      asker=Asker.from_context(ctx, params, stateless=stateless))
        except InputRequired as needed:  # 2026-07-28: the client asks the user and calls again
            return needed.result
        finally:
            CALLER_TOKEN.reset(token)
            FORWARDED_HEADERS.reset(forwarded)

    server = runtime.manifest.server
    changes = runtime.changes  # serve --reload: listChanged declared, subscriptions/listen served (changes.py)
    mcp_server = (AnnouncingServer if changes is not None else Server)(
        server.name,
        version=server.version,
        title=server.title,
        instructions=server.instructions,
        on_list_tools=on_list_tools,
        on_call_tool=on_call_tool,
        get_tool_input_schema=runtime.input_schema,
    )
    if changes is None:
        runtime.catalog.install(mcp_server)  # resources/*, prompts/*: only when the overlay defines some
    else:  # a reload may add the first resource or prompt, and replaces the catalog: each request finds it
        runtime.catalog.install(mcp_server, current=lambda: runtime.catalog)
        changes.install(mcp_server)
    observed = runtime.telemetry.middleware()  # a span and metrics per MCP request (telemetry.py)
    if observed is not None:
        if runtime.telemetry.tracing is not None:  # our SERVER span replaces the SDK's (one span per request)
            mcp_server.middleware = [m for m in mcp_server.middleware if type(m).__name__ != "OpenTelemetryMiddleware"]
        mcp_server.middleware.append(observed)
    return mcp_server
