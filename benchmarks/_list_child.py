"""Child process of compile_bench / tool_list_size: spec file -> the full tools/list payload.

    python benchmarks/_list_child.py MODE SPEC --result FILE [--dump FILE] [--stats]

MODE
  ours-compile  openapi2mcp: load_spec + compile_manifest(all_operations) + tool definitions, as
                `serve SPEC` compiles (no content hash: nothing before the first answer needs it;
                a checkout from before `seal=` seals, as its serve did)
  ours-runtime  the same, then the server's Runtime (argument validators, SDK Tool models) and
                every tools/list page as the server sends it
  fastmcp       FastMCP.from_openapi(openapi_spec=dict, client=httpx2 client), list_tools(),
                each tool's MCP wire form (to_mcp_tool, the same dump its server sends)
  floor         the least a converter that follows refs does: read the file (json, or PyYAML's C
                loader) and resolve its external refs with prance's RefResolver (RESOLVE_FILES:
                it walks the whole document looking for refs); no tools, nothing serialised

Each mode ends with the whole list serialised to compact JSON ({"tools": [...]}, as on the
wire), so both sides do the same work: read the file, build the tools, produce the bytes.
Runs under our venv or FastMCP's: only the standard library is imported at the top. The result
file gets {tools, bytes, phases: {name: seconds}, peak_mb: {name: MB}} or {error}.
"""

from __future__ import annotations

import argparse
import asyncio
import inspect
import json
import sys
import time
import traceback
from pathlib import Path
from typing import Any


def _hwm_mb() -> float:
    """Peak resident memory of this process so far (VmHWM), in MB."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return float("nan")


class Phases(dict[str, float]):
    """Seconds per phase, and the peak memory reached by the end of each (`peak_mb`)."""

    def __init__(self) -> None:
        super().__init__()
        self.peak_mb: dict[str, float] = {}
        self._t = time.perf_counter()

    def start(self) -> None:
        self._t = time.perf_counter()

    def done(self, name: str) -> None:
        self[name] = time.perf_counter() - self._t
        self.peak_mb[name] = _hwm_mb()
        self._t = time.perf_counter()


def compact(payload: Any) -> bytes:
    """Compact JSON, as on the wire."""
    return json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode()


def ours(spec: str, phases: Phases, *, runtime: bool) -> list[dict[str, Any]]:
    from openapi2mcp.compiler import compile_manifest
    from openapi2mcp.loader import load_spec

    phases.done("import")
    loaded = load_spec(spec)
    phases.done("load")
    unsealed = {"seal": False} if "seal" in inspect.signature(compile_manifest).parameters else {}
    manifest = compile_manifest(loaded, all_operations=True, **unsealed).manifest
    phases.done("compile")
    if not runtime:
        tools = [tool.definition() for tool in manifest.tools if tool.risk != "forbidden"]
        phases.done("list")
        return tools
    from openapi2mcp.runtime import Runtime, RuntimeOptions

    upstream = manifest.upstream.model_copy(update={"base_url": "http://127.0.0.1:9"})  # like serve --base-url
    rt = Runtime(manifest.model_copy(update={"upstream": upstream}), RuntimeOptions(environ={}, require_secrets=False))
    phases.done("runtime")
    tools = served_tools(rt)
    phases.done("list")
    return tools


def served_tools(rt: Any) -> list[dict[str, Any]]:
    """Every tools/list page of an openapi2mcp Runtime, as its server sends them, joined."""
    tools: list[dict[str, Any]] = []
    cursor = None
    while True:
        page = rt.list_tools(cursor)
        tools += page.model_dump(mode="json", by_alias=True, exclude_none=True)["tools"]
        cursor = page.next_cursor
        if cursor is None:
            return tools


def read_document(spec: str) -> Any:
    """The spec as a dict, the way a FastMCP user would load it (C YAML loader when available)."""
    text = Path(spec).read_bytes()
    if spec.endswith(".json"):
        return json.loads(text)
    import yaml

    return yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))


def fastmcp(spec: str, phases: Phases) -> list[dict[str, Any]]:
    import httpx2
    from fastmcp import FastMCP

    phases.done("import")
    document = read_document(spec)
    phases.done("load")
    servers = document.get("servers") or [{}]
    base = servers[0].get("url") or ""
    client = httpx2.AsyncClient(base_url=base if "://" in base else "http://127.0.0.1:9")
    mcp = FastMCP.from_openapi(openapi_spec=document, client=client)
    phases.done("compile")

    async def listed() -> list[dict[str, Any]]:
        tools = await mcp.list_tools()
        return [tool.to_mcp_tool(name=tool.name).model_dump(mode="json", by_alias=True, exclude_none=True)
                for tool in tools]

    out = asyncio.run(listed())
    phases.done("list")
    return out


def floor(spec: str, phases: Phases) -> None:
    from prance.util import url as prance_url
    from prance.util.resolver import RESOLVE_FILES, RefResolver

    phases.done("import")
    document = read_document(spec)
    phases.done("load")
    resolver = RefResolver(document, prance_url.absurl(str(Path(spec).resolve())), resolve_types=RESOLVE_FILES)
    resolver.resolve_references()
    phases.done("compile")


def stats(tools: list[dict[str, Any]]) -> dict[str, Any]:
    """Where the bytes are: per part of the tool definitions, and the biggest tools."""
    parts = {"inputSchema": 0, "outputSchema": 0, "description": 0}
    sizes = []
    for tool in tools:
        sizes.append((len(compact(tool)), tool.get("name")))
        for key in parts:
            if key in tool:
                parts[key] += len(compact(tool[key]))
    sizes.sort(reverse=True)
    return {"parts": parts, "largest": sizes[:3], "median_tool": sizes[len(sizes) // 2][0] if sizes else 0}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=["ours-compile", "ours-runtime", "fastmcp", "floor"])
    parser.add_argument("spec")
    parser.add_argument("--result", required=True)
    parser.add_argument("--dump", help="also write the tools/list JSON here")
    parser.add_argument("--stats", action="store_true", help="also report where the bytes are")
    args = parser.parse_args()
    phases = Phases()
    out: dict[str, Any] = {"mode": args.mode, "phases": phases, "peak_mb": phases.peak_mb}
    try:
        if args.mode == "floor":
            floor(args.spec, phases)
            out.update(tools=0, bytes=0)
            Path(args.result).write_text(json.dumps(out))
            return 0
        if args.mode == "fastmcp":
            tools = fastmcp(args.spec, phases)
        else:
            tools = ours(args.spec, phases, runtime=args.mode == "ours-runtime")
        data = compact({"tools": tools})
        phases.done("serialise")
        out.update(tools=len(tools), bytes=len(data))
        if args.dump:
            Path(args.dump).write_bytes(data)
        if args.stats:
            out["stats"] = stats(tools)
        code = 0
    except BaseException as e:  # the parent reports it; never a bare traceback only
        message = str(e).strip().splitlines()[0] if str(e).strip() else ""
        out["error"] = f"{type(e).__name__}: {message}"[:300]
        out["traceback"] = traceback.format_exc()[-4000:]
        code = 3
    Path(args.result).write_text(json.dumps(out))
    return code


if __name__ == "__main__":
    sys.exit(main())
