"""Tool-call latency and calls/s over Streamable HTTP: openapi2mcp vs FastMCP (issue 3).

    python benchmarks/runtime_bench.py [--repeat 3] [--calls 400] [--concurrency 1,32]
                                       [--modes legacy,auto]

Every process is separate and local (127.0.0.1):

  upstream   `python -m examples petstore --port 0 --no-response-validation` (Starlette; it still
             validates each request against its spec, the same cost for every side)
  ours       `python -m openapi2mcp serve examples/petstore/openapi.yaml --overlay
             examples/petstore/overlay.yaml --transport http --port P --base-url UPSTREAM`
             (and with --stateless); tool `pets_get`
  FastMCP    benchmarks/fastmcp_server.py: FastMCP.from_openapi over the same spec and upstream,
             run(transport="http") with its defaults (and stateless_http); tool `getPet`
  direct     httpx2.AsyncClient GET UPSTREAM/pets/1: the floor every MCP call stands on

The client is the mcp SDK `Client` (Streamable HTTP, one session per concurrent worker, the
session set up and the tool list fetched before timing starts). Each call is getPet(petId="1")
and must return the pet. Latency p50/p95 per call, calls/s = calls / wall time of the batch,
"added" = MCP p50 minus direct p50 at the same concurrency. Medians over --repeat batches.

Cold start (process start to the first complete tools/list) is benchmarks/cold_start.py.

All of it runs on one machine: client, MCP server and upstream share its cores, so calls/s is
a whole-system figure; the ratios between sides are what carries over.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make the `benchmarks` package importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import _common as c

PETSTORE = c.ROOT / "examples" / "petstore"
SPEC = PETSTORE / "openapi.yaml"
OVERLAY = PETSTORE / "overlay.yaml"
PET_ID = "1"


@dataclass(frozen=True)
class Config:
    """One way of serving the petstore over MCP."""

    key: str
    label: str
    ours: bool
    tool: str  # the name of getPet on this side
    argv: Callable[[str, int], list[str]]  # (upstream URL, port) -> command line
    env: Callable[[], dict[str, str]]


def our_serve(*extra: str) -> Callable[[str, int], list[str]]:
    def argv(upstream: str, port: int) -> list[str]:
        return [sys.executable, "-m", "openapi2mcp", "serve", *extra, "--transport", "http",
                "--port", str(port), "--base-url", upstream]

    return argv


def fastmcp_serve(python: str, spec: Path, *extra: str) -> Callable[[str, int], list[str]]:
    def argv(upstream: str, port: int) -> list[str]:
        return [python, str(c.BENCH / "fastmcp_server.py"), str(spec), "--base-url", upstream,
                "--port", str(port), *extra]

    return argv


def configs(fm: c.FastMCPEnv) -> list[Config]:
    spec_args = (str(SPEC), "--overlay", str(OVERLAY))
    out = [
        Config("ours", "ours", True, "pets_get", our_serve(*spec_args), c.our_env),
        Config("ours-stateless", "ours --stateless", True, "pets_get", our_serve(*spec_args, "--stateless"),
               c.our_env),
    ]
    if fm.python:
        out += [
            Config("fastmcp", "FastMCP", False, "getPet", fastmcp_serve(fm.python, SPEC), c.fastmcp_env_vars),
            Config("fastmcp-stateless", "FastMCP stateless", False, "getPet",
                   fastmcp_serve(fm.python, SPEC, "--stateless"), c.fastmcp_env_vars),
        ]
    return out


# ============================================================================ the client side


@dataclass
class Batch:
    latencies: list[float]  # seconds per successful call
    wall: float
    errors: int
    first_error: str | None = None

    @property
    def calls_per_s(self) -> float:
        return len(self.latencies) / self.wall if self.wall else float("nan")


def _split(total: int, workers: int) -> list[int]:
    return [total // workers + (1 if i < total % workers else 0) for i in range(workers)]


async def timed_batch(calls: list[Callable[[], Awaitable[str]]], total: int, limit: float | None) -> Batch:
    """`total` calls spread over concurrent workers, one per entry of `calls`, within `limit` seconds;
    each call returns "" when its answer is right, else why not. Latency counts right answers only."""
    latencies: list[float] = []
    problems: list[str] = []

    async def worker(call: Callable[[], Awaitable[str]], n: int) -> None:
        for _ in range(n):
            t = time.perf_counter()
            try:
                why = await call()
            except Exception as e:
                why = f"{type(e).__name__}: {e}"
            if why:
                problems.append(why)
            else:
                latencies.append(time.perf_counter() - t)

    started = time.perf_counter()
    async with asyncio.timeout(limit):
        await asyncio.gather(*(worker(call, n) for call, n in zip(calls, _split(total, len(calls)), strict=True)))
    return Batch(latencies, time.perf_counter() - started, len(problems), problems[0] if problems else None)


async def mcp_batch(url: str, mode: str, tool: str, concurrency: int, calls: int, per_call: float) -> Batch:
    """`calls` tool calls spread over `concurrency` sessions (set up before the clock starts)."""
    from contextlib import AsyncExitStack

    from mcp import Client

    def get_pet(client: Any) -> Callable[[], Awaitable[str]]:
        async def call() -> str:
            result = await client.call_tool(tool, {"petId": PET_ID})
            right = not result.is_error and _pet_id(result) == PET_ID
            return "" if right else f"unexpected result: {str(result)[:200]}"

        return call

    async with AsyncExitStack() as stack:
        workers = []
        for _ in range(concurrency):
            client = await stack.enter_async_context(Client(url, mode=mode, read_timeout_seconds=per_call))
            await client.list_tools()  # the SDK fetches output schemas once per session anyway
            workers.append(get_pet(client))
        return await timed_batch(workers, calls, limit=per_call * max(1, calls // concurrency))


def _pet_id(result: Any) -> Any:
    data = result.structured_content or {}
    if "id" not in data and isinstance(data.get("result"), dict):  # FastMCP wraps when it must
        data = data["result"]
    return data.get("id")


async def direct_batch(upstream: str, concurrency: int, calls: int, per_call: float) -> Batch:
    """The same request straight to the upstream with httpx2 (one pooled client)."""
    import httpx2

    limits = httpx2.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx2.AsyncClient(base_url=upstream, timeout=per_call, limits=limits, trust_env=False) as http:
        await http.get(f"/pets/{PET_ID}")  # connect before timing

        async def get_pet() -> str:
            r = await http.get(f"/pets/{PET_ID}")
            return "" if r.status_code == 200 and r.json().get("id") == PET_ID else f"HTTP {r.status_code}"

        return await timed_batch([get_pet] * concurrency, calls, limit=None)


# ============================================================================ measurements


@dataclass
class Load:
    """Batches of one side at one concurrency (and one client mode)."""

    label: str
    ours: bool | None  # None: the direct baseline
    mode: str
    concurrency: int
    batches: list[Batch] = field(default_factory=list)
    rss_mb: float = float("nan")
    error: str | None = None

    def stat(self, fn: Callable[[Batch], float]) -> float:
        good = [b for b in self.batches if b.latencies]
        return c.median([fn(b) for b in good]) if good else float("nan")

    def p50(self) -> float:
        return self.stat(lambda b: c.percentile(b.latencies, 50)) * 1000

    def p95(self) -> float:
        return self.stat(lambda b: c.percentile(b.latencies, 95)) * 1000

    def rate(self) -> float:
        return self.stat(lambda b: b.calls_per_s)

    def errors(self) -> int:
        return sum(b.errors for b in self.batches)


def start_upstream() -> c.Server:
    up = c.Server("upstream", [sys.executable, "-m", "examples", "petstore", "--port", "0",
                               "--no-response-validation"], env=c.our_env())
    try:
        up.url = up.first_stdout_line(timeout=60)
    except Exception:
        up.stop()
        raise
    return up


def calls_for(args: argparse.Namespace, concurrency: int) -> int:
    return max(args.calls, concurrency * 20)


def _batch_line(label: str, mode: str, concurrency: int, i: int, batch: Batch) -> str:
    return (f"  {label:<18} {mode:<6} c={concurrency:<3} #{i + 1}: "
            f"p50 {c.percentile(batch.latencies, 50) * 1000:6.2f} ms, {batch.calls_per_s:7.1f} calls/s"
            + (f", {batch.errors} errors ({batch.first_error})" if batch.errors else ""))


def run_loads(cfgs: list[Config], upstream: str, args: argparse.Namespace, modes: list[str],
              levels: list[int]) -> list[Load]:
    """Start every server, then run the batches round-robin (direct, ours, FastMCP, ..., repeat).

    Interleaving spreads whatever else the machine is doing evenly over the sides; an idle
    server costs nothing while another one is measured.
    """
    direct = [Load("direct httpx2", None, "-", n) for n in levels]
    sides: list[tuple[Config, str, c.Server | None, list[Load]]] = []
    with c.servers() as running:
        for cfg in cfgs:
            loads = [Load(cfg.label, cfg.ours, m, n) for m in modes for n in levels]
            port = c.free_port()
            url = f"http://127.0.0.1:{port}/mcp"
            server = c.Server(cfg.key, cfg.argv(upstream, port), env=cfg.env())
            running.append(server)
            try:
                _, tools = asyncio.run(c.wait_ready(server, url, modes[0], args.timeout))
                names = [t.name for t in tools]
                if cfg.tool not in names:
                    raise RuntimeError(f"no tool {cfg.tool!r} in tools/list ({names[:8]}...)")
                for mode in modes:
                    asyncio.run(mcp_batch(url, mode, cfg.tool, 4, 40, args.timeout))  # warm-up
            except Exception as e:
                for load in loads:
                    load.error = str(e)[:300]
                c.progress(f"  {cfg.label}: FAILED: {e}")
                sides.append((cfg, url, None, loads))
                continue
            sides.append((cfg, url, server, loads))
        asyncio.run(direct_batch(upstream, 4, 40, args.timeout))  # warm-up
        for i in range(args.repeat):
            for load in direct:
                batch = asyncio.run(direct_batch(upstream, load.concurrency, calls_for(args, load.concurrency),
                                                 args.timeout))
                load.batches.append(batch)
                c.progress(_batch_line(load.label, "-", load.concurrency, i, batch))
            for cfg, url, server, loads in sides:
                for load in loads:
                    if load.error or server is None:
                        continue
                    try:
                        batch = asyncio.run(mcp_batch(url, load.mode, cfg.tool, load.concurrency,
                                                      calls_for(args, load.concurrency), args.timeout))
                    except Exception as e:
                        load.error = f"{type(e).__name__}: {e}"[:300]
                        c.progress(f"  {cfg.label} {load.mode} c={load.concurrency}: FAILED: {load.error}")
                        continue
                    load.batches.append(batch)
                    c.progress(_batch_line(cfg.label, load.mode, load.concurrency, i, batch))
        for _, _, server, loads in sides:
            for load in loads:
                load.rss_mb = server.peak_rss_mb() if server else float("nan")
    return [*direct, *(ld for *_, loads in sides for ld in loads)]


# ============================================================================ report


def report(loads: list[Load], fm: c.FastMCPEnv, args: argparse.Namespace) -> str:
    md = args.markdown
    out = [f"\ntools/call getPet over Streamable HTTP, {c.machine_line()}",
           f"median of {args.repeat} batches of >= {args.calls} calls; ratio = ours / FastMCP "
           f"(latency: < 1 is faster; calls/s: > 1 is faster); FastMCP: {fm.note}\n"]
    direct = {ld.concurrency: ld for ld in loads if ld.ours is None}
    theirs = {(ld.label.replace("FastMCP", "").strip(), ld.mode, ld.concurrency): ld
              for ld in loads if ld.ours is False}
    rows = []
    for ld in loads:
        base = direct.get(ld.concurrency)
        vs = None
        if ld.ours:
            vs = theirs.get(("stateless" if "stateless" in ld.label else "", ld.mode, ld.concurrency))
            if vs is None or vs.error:
                vs = theirs.get(("", ld.mode, ld.concurrency))
        added = ld.p50() - base.p50() if base and ld.ours is not None else float("nan")
        rows.append([
            ld.label, ld.mode, ld.concurrency,
            c.fmt_ms(ld.p50()), c.fmt_ms(ld.p95()), f"{ld.rate():,.0f}" if ld.rate() == ld.rate() else "–",
            c.fmt_ms(added) if added == added else "",
            c.fmt_mb(ld.rss_mb) if ld.ours is not None else "",
            c.ratio(ld.p50(), vs.p50()) if vs else "", c.ratio(ld.rate(), vs.rate()) if vs else "",
            f"{ld.errors()} errors" if ld.errors() else (f"fails: {ld.error[:60]}" if ld.error else "ok"),
        ])
    out.append(c.table(["side", "client", "conc.", "p50", "p95", "calls/s", "added p50", "server RSS",
                        "p50 ratio", "calls/s ratio", "status"], rows, markdown=md))
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=400, help="calls per batch (at least 20 per worker)")
    parser.add_argument("--concurrency", default="1,32", help="comma-separated worker counts (default 1,32)")
    parser.add_argument("--modes", default="legacy",
                        help="client modes: legacy (2025-11-25 handshake) and/or auto (2026-07-28 when offered)")
    parser.add_argument("--only", help="comma-separated config keys: ours,ours-stateless,fastmcp,fastmcp-stateless")
    c.common_options(parser, timeout=120)
    args = parser.parse_args(argv)
    levels = [int(x) for x in args.concurrency.split(",") if x.strip()]
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    fm = c.fastmcp_env(args)
    c.progress(f"FastMCP: {fm.note}")
    c.check_quiet()

    with c.servers() as running:
        upstream = start_upstream()
        running.append(upstream)
        url = upstream.url
        c.progress(f"upstream petstore at {url}")
        only = set(args.only.split(",")) if args.only else None
        loads = run_loads([cfg for cfg in configs(fm) if only is None or cfg.key in only], url, args, modes,
                          levels)

    print(report(loads, fm, args))
    c.write_json(args.json, {
        "machine": c.machine_line(), "fastmcp": fm.note, "repeat": args.repeat, "calls": args.calls,
        "loads": [{"label": ld.label, "mode": ld.mode, "concurrency": ld.concurrency, "p50_ms": ld.p50(),
                   "p95_ms": ld.p95(), "calls_per_s": ld.rate(), "rss_mb": ld.rss_mb, "errors": ld.errors(),
                   "error": ld.error} for ld in loads],
    })
    return 0


if __name__ == "__main__":
    sys.exit(main())
