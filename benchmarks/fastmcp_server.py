"""A FastMCP `from_openapi` server, the competitor in runtime_bench.py and cold_start.py.

    .cache/bench/fastmcp-venv/bin/python benchmarks/fastmcp_server.py SPEC --base-url URL --port P
        [--transport http|stdio] [--stateless] [--json-response] [--all-operations]

The plain, documented use of FastMCP 4.2.3: load the spec file, FastMCP.from_openapi(openapi_spec=
dict, client=httpx2.AsyncClient(base_url=URL)), run(transport="http") (or "stdio"). Every
operation becomes a tool named by its operationId (FastMCP's default route map). Runs under
FastMCP's venv; imports nothing from openapi2mcp.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make the `benchmarks` package importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._list_child import read_document  # standard library only, like this script


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("spec")
    parser.add_argument("--base-url", required=True, help="the upstream REST API")
    parser.add_argument("--transport", choices=["http", "stdio"], default="http")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--stateless", action="store_true")
    parser.add_argument("--json-response", action="store_true", help="JSON instead of SSE-framed responses")
    parser.add_argument("--all-operations", action="store_true", help="accepted for symmetry (always all)")
    args = parser.parse_args()

    import httpx2
    from fastmcp import FastMCP

    document = read_document(args.spec)  # the same way as benchmarks/_list_child.py's fastmcp mode
    client = httpx2.AsyncClient(base_url=args.base_url, timeout=30)
    mcp = FastMCP.from_openapi(openapi_spec=document, client=client, name=document.get("info", {}).get("title", "api"))
    if args.transport == "stdio":
        mcp.run(transport="stdio", show_banner=False, log_level="WARNING")
        return 0
    mcp.run(
        transport="http",
        host=args.host,
        port=args.port,
        stateless_http=args.stateless,
        json_response=args.json_response or None,
        show_banner=False,
        log_level="WARNING",
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
