"""The floor of benchmarks/server_cpu.py: the bare low-level mcp-SDK server forwarding one tool with httpx2.

    python benchmarks/floor_server.py --base-url URL --port P [--loop asyncio|uvloop] [--http h11|httptools]

What a careful hand-written server on the same SDK does for `pets_get(petId)` and nothing more:
the SDK's `Server` with `on_list_tools`/`on_call_tool`, the arguments checked by a jsonschema
validator built once, one pooled `httpx2.AsyncClient` GET /pets/{petId}, the JSON body as
structuredContent and as text; `get_tool_input_schema` set (without it the SDK lists the tools
on every 2026-07-28 call to check Mcp-Param headers). Stateful Streamable HTTP with JSON
responses (the SDK's `streamable_http_app`), served by uvicorn. `--loop`/`--http` default to
what `pip install mcp` brings (asyncio and h11: uvicorn without its `standard` extra); uvloop and
httptools measure the same code on the faster loop and parser. Imports nothing from openapi2mcp.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

import httpx2
import jsonschema
import mcp_types as types
import uvicorn
from mcp.server.lowlevel import Server
from mcp.shared.exceptions import MCPError

INPUT: dict[str, Any] = {
    "type": "object",
    "properties": {"petId": {"type": "string", "minLength": 1}},
    "required": ["petId"],
    "additionalProperties": False,
}
TOOL = types.Tool(name="pets_get", description="One pet by its id.", input_schema=INPUT)
VALIDATOR = jsonschema.Draft202012Validator(INPUT)


def build(base_url: str) -> Server[Any]:
    http = httpx2.AsyncClient(base_url=base_url, timeout=30, trust_env=False)

    async def list_tools(ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[TOOL])

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        if params.name != TOOL.name:
            raise MCPError(code=types.INVALID_PARAMS, message=f"Unknown tool: {params.name}")
        args = params.arguments or {}
        error = next(VALIDATOR.iter_errors(args), None)
        if error is not None:
            return types.CallToolResult(content=[types.TextContent(type="text", text=error.message)], is_error=True)
        response = await http.get(f"/pets/{args['petId']}")
        if response.status_code != 200:
            text = f"upstream answered {response.status_code}"
            return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=True)
        data = response.json()
        return types.CallToolResult(content=[types.TextContent(type="text", text=json.dumps(data))],
                                    structured_content=data)

    return Server("floor", version="1.0", on_list_tools=list_tools, on_call_tool=call_tool,
                  get_tool_input_schema=lambda name: INPUT if name == TOOL.name else None)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base-url", required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--loop", choices=["asyncio", "uvloop"], default="asyncio")
    parser.add_argument("--http", choices=["h11", "httptools"], default="h11")
    args = parser.parse_args()
    app = build(args.base_url).streamable_http_app(streamable_http_path="/mcp", json_response=True,
                                                   host="127.0.0.1")
    uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="warning", loop=args.loop, http=args.http)
    return 0


if __name__ == "__main__":
    sys.exit(main())
