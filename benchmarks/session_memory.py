"""Memory per idle MCP session over Streamable HTTP: openapi2mcp vs FastMCP (issue 15).

    python benchmarks/session_memory.py [--sessions 1000] [--repeat 3] [--markdown] [--json FILE]

Each server serves the petstore example (ours: `openapi2mcp serve examples/petstore/openapi.yaml
--overlay examples/petstore/overlay.yaml --transport http`, FastMCP: benchmarks/fastmcp_server.py
on the same spec, under its own venv), pointed at an upstream that is never called. The script
opens sessions the way a client does on the 2025-11-25 protocol (initialize, then
notifications/initialized, each a raw HTTP POST with the session's Mcp-Session-Id) and keeps
them: it never sends DELETE, so each one stays open and idle on the server.

Measured from /proc, on the server process alone: its resident set (VmRSS) after one warm-up
session (everything imported and built), then after N more sessions; per session = the
difference / N. The sessions are opened by a pool of 16 concurrent workers (plain httpx2, no SDK
client: the load generator's own memory and CPU are not the server's). Every server runs
`--repeat` times, alternating, on a fresh process; the table shows medians. Ours raises its
per-caller session cap for the run (`--max-sessions-per-caller 0`: every session here is the
same anonymous local caller, and the default cap of 64 would refuse the rest).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make the `benchmarks` package importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import _common as c

SPEC = c.ROOT / "examples" / "petstore" / "openapi.yaml"
OVERLAY = c.ROOT / "examples" / "petstore" / "overlay.yaml"
NOWHERE = "http://127.0.0.1:9"
PROTOCOL = "2025-11-25"
WORKERS = 16


@dataclass
class Side:
    key: str
    label: str
    argv: list[str]  # without the port
    env: dict[str, str]


@dataclass
class Result:
    side: Side
    base_mb: list[float] = field(default_factory=list)  # VmRSS after the warm-up session
    per_session_kb: list[float] = field(default_factory=list)
    total_mb: list[float] = field(default_factory=list)  # VmRSS with every session open
    seconds: list[float] = field(default_factory=list)  # to open them
    error: str | None = None


def vmrss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def sides(fm: c.FastMCPEnv) -> list[Side]:
    ours = Side("ours", "openapi2mcp serve (2025-11-25 sessions)",
                [*_openapi2mcp(), "serve", str(SPEC), "--overlay", str(OVERLAY), "--base-url", NOWHERE,
                 "--transport", "http", "--max-sessions-per-caller", "0", "--port"], c.our_env())
    out = [ours]
    if fm.python:
        out.append(Side("fastmcp", "FastMCP from_openapi",
                        [fm.python, str(c.BENCH / "fastmcp_server.py"), str(SPEC), "--base-url", NOWHERE,
                         "--transport", "http", "--port"], c.fastmcp_env_vars()))
    return out


def _openapi2mcp() -> list[str]:
    script = Path(sys.executable).with_name("openapi2mcp")
    return [str(script)] if script.is_file() else [sys.executable, "-m", "openapi2mcp"]


def _initialize(n: int) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": n, "method": "initialize",
            "params": {"protocolVersion": PROTOCOL, "capabilities": {},
                       "clientInfo": {"name": "session-memory-bench", "version": "1"}}}


async def open_sessions(url: str, count: int) -> list[str]:
    """Open `count` sessions (initialize + notifications/initialized) and return their ids; nothing is closed."""
    import httpx2

    headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    ids: list[str] = []
    todo = iter(range(count))
    async with httpx2.AsyncClient(timeout=60, limits=httpx2.Limits(max_connections=WORKERS)) as client:

        async def worker() -> None:
            for n in todo:
                r = await client.post(url, json=_initialize(n), headers=headers)
                session = r.headers.get("mcp-session-id")
                if r.status_code != 200 or not session or "serverInfo" not in r.text:
                    raise RuntimeError(f"initialize #{n}: HTTP {r.status_code} {r.text[:200]!r}")
                done = await client.post(url, json={"jsonrpc": "2.0", "method": "notifications/initialized"},
                                         headers={**headers, "Mcp-Session-Id": session,
                                                  "Mcp-Protocol-Version": PROTOCOL})
                if done.status_code not in (200, 202):
                    raise RuntimeError(f"notifications/initialized #{n}: HTTP {done.status_code}")
                ids.append(session)

        await asyncio.gather(*(worker() for _ in range(WORKERS)))
    return ids


async def wait_port(server: c.Server, port: int, limit: float) -> None:
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        if not server.alive():
            raise RuntimeError(f"{server.name} exited: {server.stderr_tail()}")
        try:
            _, writer = await asyncio.open_connection("127.0.0.1", port)
        except OSError:
            await asyncio.sleep(0.05)
            continue
        writer.close()
        return
    raise RuntimeError(f"{server.name}: port {port} not open after {limit:g} s")


def measure(side: Side, sessions: int, limit: float) -> tuple[float, float, float, float]:
    """(base MB, per-session kB, total MB, seconds to open them) on a fresh server process."""
    port = c.free_port()
    with c.Server(side.key, [*side.argv, str(port)], env=side.env) as server:
        url = f"http://127.0.0.1:{port}/mcp"
        asyncio.run(wait_port(server, port, limit))
        asyncio.run(open_sessions(url, 1))  # warm-up: the first session imports and builds what sessions need
        time.sleep(0.5)
        base = vmrss_mb(server.proc.pid)
        started = time.perf_counter()
        asyncio.run(open_sessions(url, sessions))
        seconds = time.perf_counter() - started
        time.sleep(0.5)  # let the server finish its bookkeeping of the last ones
        total = vmrss_mb(server.proc.pid)
        return base, (total - base) * 1024 / sessions, total, seconds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sessions", type=int, default=1000, help="sessions to open and keep (default 1000)")
    c.common_options(parser)
    args = parser.parse_args(argv)
    fm = c.fastmcp_env(args)
    c.progress(f"FastMCP: {fm.note}")
    c.check_quiet()
    results = [Result(s) for s in sides(fm)]
    for i in range(args.repeat):
        for res in results:
            if res.error:
                continue
            try:
                base, per, total, seconds = measure(res.side, args.sessions, args.timeout)
            except Exception as e:
                res.error = str(e)[:300] or type(e).__name__
                c.progress(f"  {res.side.key:<8} #{i + 1}: FAILED {res.error}")
                continue
            res.base_mb.append(base)
            res.per_session_kb.append(per)
            res.total_mb.append(total)
            res.seconds.append(seconds)
            c.progress(f"  {res.side.key:<8} #{i + 1}: base {base:.0f} MB, {args.sessions} sessions -> {total:.0f} MB "
                       f"({per:.1f} kB each), opened in {seconds:.1f} s")
    print(report(results, args, fm))
    c.write_json(args.json, {"machine": c.machine_line(), "fastmcp": fm.note, "sessions": args.sessions,
                             "results": [{"side": r.side.key, "base_mb": r.base_mb, "per_session_kb": r.per_session_kb,
                                          "total_mb": r.total_mb, "seconds": r.seconds, "error": r.error}
                                         for r in results]})
    return 0


def report(results: list[Result], args: argparse.Namespace, fm: c.FastMCPEnv) -> str:
    theirs = next((r for r in results if r.side.key == "fastmcp" and r.per_session_kb), None)
    rows = []
    for r in results:
        if not r.per_session_kb:
            rows.append([r.side.label, "", "", "", "", "", f"fails: {r.error}"])
            continue
        per, total = c.median(r.per_session_kb), c.median(r.total_mb)
        versus = r.side.key != "fastmcp" and theirs is not None
        rows.append([r.side.label, c.fmt_mb(c.median(r.base_mb)), f"{per:,.1f} kB",
                     f"{(total - c.median(r.base_mb)):,.0f} MB", c.fmt_mb(total),
                     c.ratio(per, c.median(theirs.per_session_kb)) if versus and theirs else "", "ok"])
    head = ["server", "RSS, 1 session", "per idle session", f"{args.sessions:,} sessions add", "RSS with them",
            "per-session ratio", "status"]
    return "\n".join([
        f"\nidle 2025-11-25 sessions over Streamable HTTP, kept open; {c.machine_line()}; {fm.note}",
        f"median of {args.repeat} fresh server processes; RSS = VmRSS of the server process; "
        "ratio = ours / FastMCP\n",
        c.table(head, rows, markdown=args.markdown)])


if __name__ == "__main__":
    sys.exit(main())
