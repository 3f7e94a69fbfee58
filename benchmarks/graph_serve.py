"""Microsoft Graph `serve --all-operations` over stdio: spawn to the first tools/list page.

    python benchmarks/graph_serve.py [--repeat N]

The SDK's stdio_client spawns `openapi2mcp serve graph.json --all-operations` (the spec fetched once
from APIs-guru's npm package into .cache/bench/apis-guru), lists the first page, and reads the
server's own CPU time and VmHWM from /proc, as cold_start.py does.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import _common as c
from benchmarks import cold_start as cs


def once(spec: Path) -> tuple[float, float, float, int]:
    argv = [*cs.openapi2mcp_command(), "serve", str(spec), "--all-operations", "--base-url", cs.NOWHERE]
    _, peak, tools, first, cpu = asyncio.run(cs.stdio_once(argv, cs.clean_env(), "legacy", 600, every_page=False))
    return first, cpu, peak, tools


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=1)
    args = parser.parse_args()
    spec = c.fetched_spec("microsoft.com/graph.json")
    if spec is None:
        return 1
    for _ in range(args.repeat):
        first, cpu, hwm, tools = once(spec)
        print(f"first tools/list page ({tools} tools) {first:.2f} s; server CPU {cpu:.2f} s; peak {hwm:.0f} MB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
