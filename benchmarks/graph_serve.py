"""Microsoft Graph `serve --all-operations` over stdio: spawn to the first tools/list page.

    python benchmarks/graph_serve.py [--repeat N]

The SDK's stdio_client spawns `openapi2mcp serve graph.json --all-operations` (the spec fetched once
from APIs-guru's npm package into .cache/bench/apis-guru), lists the first page, and reads the
server's own CPU time and VmHWM from /proc, as cold_start.py does.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import _common as c
from benchmarks import cold_start as cs


async def once(spec: Path) -> tuple[float, float, float, int]:
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters, stdio_client

    argv = [*cs.openapi2mcp_command(), "serve", str(spec), "--all-operations", "--base-url", cs.NOWHERE]
    params = StdioServerParameters(command=argv[0], args=argv[1:], env=cs.clean_env(), cwd=str(c.ROOT))
    before = set(cs._children(os.getpid()))
    started = time.perf_counter()
    async with Client(stdio_client(params), mode="legacy") as client:
        page = await client.list_tools()
        first = time.perf_counter() - started
        server = next(p for p in cs._children(os.getpid()) if p not in before)
        return first, c.cpu_seconds(server), c.vmhwm_mb(server), len(page.tools)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=1)
    args = parser.parse_args()
    spec = c.fetched_spec("microsoft.com/graph.json")
    if spec is None:
        return 1
    for _ in range(args.repeat):
        first, cpu, hwm, tools = asyncio.run(once(spec))
        print(f"first tools/list page ({tools} tools) {first:.2f} s; server CPU {cpu:.2f} s; peak {hwm:.0f} MB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
