"""What the MCP server itself costs per tool call: its own CPU time, under a load that is not the limit (issue 15).

    python benchmarks/server_cpu.py [--rounds 5] [--duration 4] [--concurrency 16]
                                    [--sides floor,floor-uvloop,fastmcp,ours] [--eras modern,legacy]
                                    [--profile profile.txt] [--baseline DIR] [--markdown] [--json FILE]

Needs `wrk` (Debian/Ubuntu: `apt-get install wrk`; macOS: `brew install wrk`). Every process is
separate and local (127.0.0.1):

  upstream       benchmarks/_fast_upstream.py: the example petstore's `GET /pets/{id}` answered from
                 bytes built once, on a bare asyncio protocol (uvloop when installed)
  floor          benchmarks/floor_server.py: the bare low-level mcp-SDK server forwarding `pets_get`
                 with httpx2, on what `pip install mcp` brings (asyncio loop, h11 parser)
  floor-uvloop   the same code on uvloop and httptools
  fastmcp        benchmarks/fastmcp_server.py: FastMCP.from_openapi over examples/petstore, tool
                 `getPet`, its defaults (its own venv, see _common.py)
  ours           `python -m openapi2mcp serve examples/petstore/openapi.yaml --overlay
                 examples/petstore/overlay.yaml --transport http`, tool `pets_get`
  baselineN      with `--baseline DIR` (repeatable): the same command over DIR's openapi2mcp (a
                 checkout of another commit, e.g. `git worktree add DIR main`): before/after in one run

The load: `wrk` (C, one connection and one thread per concurrent client) POSTs pre-built
JSON-RPC `tools/call` requests (benchmarks/server_cpu.lua) for `--duration` seconds:

  modern   the stateless 2026-07-28 era: no initialize, `_meta` and the routing headers
           (MCP-Protocol-Version, Mcp-Method, Mcp-Name) on every request
  legacy   the 2025-11-25 era: each client initializes a session first (outside the clock) and
           sends its Mcp-Session-Id with every call

Every answer is checked (HTTP 200, the pet's name, not an isError result); a batch with wrong
answers is reported, not counted. The main figure is the server process's own user+system CPU
time (from /proc/PID/stat, the process and its children, read before and after the batch)
divided by the calls it answered: it holds when other work shares the machine, where calls/s
does not. The upstream's CPU per call and wrk's are shown so you can see neither is the limit.
Sides and eras are interleaved, `--rounds` times (the order rotates each round); the table shows
medians. `--profile PATH` samples our server (or `--profile-side`'s) during one extra batch per
era, after the measured rounds, and writes collapsed stacks (flamegraph.pl and speedscope read
them), the era added to the name: by default with benchmarks/_cpu_sampler.py (the side runs
under it from the start; it samples CPU time, so it holds on a busy machine), or with
`--profiler py-spy` (`pip install py-spy`; wall-clock samples; PATH.svg gives a flame graph).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make the `benchmarks` package importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import _common as c

PETSTORE = c.ROOT / "examples" / "petstore"
LUA = c.BENCH / "server_cpu.lua"
PET_ID, PET_NAME = "1", "Rex"
TICK = os.sysconf("SC_CLK_TCK")
ERAS = ("modern", "legacy")
LEGACY_VERSION = "2025-11-25"


@dataclass(frozen=True)
class Side:
    key: str
    label: str
    tool: str
    argv: list[str]
    env: dict[str, str]


def sides(upstream: str, fm: c.FastMCPEnv, wanted: list[str], baselines: list[str]) -> list[Side]:
    py = sys.executable
    floor = [py, str(c.BENCH / "floor_server.py"), "--base-url", upstream]
    ours = [py, "-m", "openapi2mcp", "serve", str(PETSTORE / "openapi.yaml"), "--overlay",
            str(PETSTORE / "overlay.yaml"), "--transport", "http", "--base-url", upstream, "--log-level", "warning"]
    known = {
        "floor": Side("floor", "floor: bare SDK (asyncio, h11)", "pets_get", floor, c.our_env()),
        "floor-uvloop": Side("floor-uvloop", "floor: bare SDK (uvloop, httptools)", "pets_get",
                             [*floor, "--loop", "uvloop", "--http", "httptools"], c.our_env()),
        "ours": Side("ours", "openapi2mcp serve", "pets_get", ours, c.our_env()),
    }
    if fm.python:
        known["fastmcp"] = Side("fastmcp", "FastMCP from_openapi", "getPet",
                                [fm.python, str(c.BENCH / "fastmcp_server.py"), str(PETSTORE / "openapi.yaml"),
                                 "--base-url", upstream], c.fastmcp_env_vars())
    for i, where in enumerate(baselines):  # the same command over another checkout's openapi2mcp (before/after)
        env = {**c.our_env(), "PYTHONPATH": str(Path(where).resolve())}
        argv = [ours[0], "-P", *ours[1:]]  # -P: not the working directory's (this checkout's) package first
        key = f"baseline{i + 1}"
        known[key] = Side(key, f"openapi2mcp serve @ {Path(where).name}", "pets_get", argv, env)
        wanted = [*wanted, key]
    unknown = [k for k in wanted if k not in known and k != "fastmcp"]
    if unknown:
        sys.exit(f"server_cpu: unknown side(s) {unknown}; known: floor, floor-uvloop, fastmcp, ours")
    return [known[k] for k in wanted if k in known]


# ============================================================================ CPU of a process tree


def tree_cpu(pid: int) -> float:
    """User + system CPU seconds of `pid` and its live descendants, all threads."""
    total = 0.0
    todo = [pid]
    while todo:
        p = todo.pop()
        try:
            stat = Path(f"/proc/{p}/stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()  # after the command name, which may contain spaces
        total += (int(fields[11]) + int(fields[12])) / TICK  # utime, stime (fields 14 and 15)
        for task in Path(f"/proc/{p}/task").glob("*/children"):
            try:
                todo += [int(x) for x in task.read_text().split()]
            except OSError:
                pass
    return total


# ============================================================================ a running side


@dataclass
class Running:
    side: Side
    server: c.Server
    url: str
    sessions: list[str] = field(default_factory=list)
    sampler_out: Path | None = None  # where _cpu_sampler.py writes (--profile --profiler cpu)


def post(url: str, body: dict[str, Any], headers: dict[str, str]) -> tuple[int, dict[str, str], str]:
    data = json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method="POST", headers={
        "Content-Type": "application/json", "Accept": "application/json, text/event-stream", **headers})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, {k.lower(): v for k, v in r.headers.items()}, r.read().decode(errors="replace")
    except urllib.error.HTTPError as e:
        return e.code, {k.lower(): v for k, v in e.headers.items()}, e.read().decode(errors="replace")


def open_session(url: str) -> str:
    """A 2025-11-25 session, initialized: its Mcp-Session-Id."""
    status, headers, text = post(url, {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": LEGACY_VERSION, "capabilities": {},
        "clientInfo": {"name": "server_cpu", "version": "1.0"}}}, {})
    sid = headers.get("mcp-session-id")
    if status != 200 or not sid:
        raise RuntimeError(f"initialize: HTTP {status} {text[:200]}")
    status, _, text = post(url, {"jsonrpc": "2.0", "method": "notifications/initialized"},
                           {"Mcp-Session-Id": sid, "MCP-Protocol-Version": LEGACY_VERSION})
    if status not in (200, 202):
        raise RuntimeError(f"notifications/initialized: HTTP {status} {text[:200]}")
    return sid


def start(side: Side, timeout: float, sampler_out: Path | None = None) -> Running:
    port = c.free_port()
    argv = [*side.argv, "--port", str(port)]
    if sampler_out is not None:
        argv = [argv[0], str(c.BENCH / "_cpu_sampler.py"), str(sampler_out), *argv[1:]]
    server = c.Server(side.key, argv, env=side.env)
    url = f"http://127.0.0.1:{port}/mcp"
    deadline = time.monotonic() + timeout
    while True:
        if not server.alive():
            raise RuntimeError(f"{side.key} exited: {server.stderr_tail()}")
        try:
            open_session(url)  # a throw-away session: the server answers
            break
        except (OSError, RuntimeError) as e:
            if time.monotonic() > deadline:
                server.stop()
                raise RuntimeError(f"{side.key}: not up within {timeout:g} s ({e})") from None
            time.sleep(0.1)
    return Running(side, server, url, sampler_out=sampler_out)


# ============================================================================ one batch


@dataclass
class Batch:
    calls: int
    seconds: float
    server_cpu: float
    upstream_cpu: float
    client_cpu: float
    p50_ms: float
    errors: int
    first_error: str = ""

    @property
    def cpu_ms(self) -> float:
        return self.server_cpu / self.calls * 1000 if self.calls else float("nan")

    @property
    def rate(self) -> float:
        return self.calls / self.seconds if self.seconds else float("nan")


def arguments(side: Side) -> str:
    return json.dumps({"petId": PET_ID}, separators=(",", ":"))


def batch(run: Running, era: str, upstream: c.Server, args: argparse.Namespace, duration: float) -> Batch:
    if era == "legacy" and len(run.sessions) < args.concurrency:
        run.sessions += [open_session(run.url) for _ in range(args.concurrency - len(run.sessions))]
    n = args.concurrency
    argv = [args.wrk, "-t", str(n), "-c", str(n), "-d", f"{duration:g}s", "--timeout", "30s", "-s", str(LUA),
            run.url, "--", era, run.side.tool, arguments(run.side), PET_NAME,
            *(run.sessions if era == "legacy" else [])]
    cpu0, up0 = tree_cpu(run.server.proc.pid), tree_cpu(upstream.proc.pid)
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    _, status, usage = os.wait4(proc.pid, 0)
    cpu1, up1 = tree_cpu(run.server.proc.pid), tree_cpu(upstream.proc.pid)
    out = proc.stdout.read() if proc.stdout else ""
    err = proc.stderr.read() if proc.stderr else ""
    line = next((ln for ln in reversed(out.splitlines()) if ln.startswith("{")), None)
    if os.waitstatus_to_exitcode(status) != 0 or line is None:
        raise RuntimeError(f"wrk failed: {(err or out).strip()[-300:]}")
    r = json.loads(line)
    return Batch(calls=r["requests"], seconds=r["duration_us"] / 1e6, server_cpu=cpu1 - cpu0,
                 upstream_cpu=up1 - up0, client_cpu=usage.ru_utime + usage.ru_stime, p50_ms=r["p50_us"] / 1000,
                 errors=r["errors"] + r["http_errors"], first_error=r["first_error"])


def profile(run: Running, era: str, upstream: c.Server, args: argparse.Namespace) -> Path:
    """One extra batch of `era` with the profiler sampling the server of `run`; the profile's path."""
    target = Path(args.profile)
    path = target.with_name(f"{target.stem}-{era}{target.suffix or '.txt'}")
    if args.profiler == "cpu":  # the side runs under _cpu_sampler.py: SIGUSR1 starts, SIGUSR2 writes
        sampled = Path(str(run.sampler_out))
        sampled.unlink(missing_ok=True)
        os.kill(run.server.proc.pid, signal.SIGUSR1)
        b = batch(run, era, upstream, args, args.duration)
        os.kill(run.server.proc.pid, signal.SIGUSR2)
        for _ in range(100):
            if sampled.exists():
                break
            time.sleep(0.1)
        shutil.move(str(sampled), path)
    else:
        fmt = {".txt": "raw", ".json": "speedscope"}.get(target.suffix, "flamegraph")
        spy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
        rec = subprocess.Popen([spy, "record", "--pid", str(run.server.proc.pid), "--rate", "200", "--format", fmt,
                                "--output", str(path), "--duration", f"{args.duration + 1:g}"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        time.sleep(0.5)
        b = batch(run, era, upstream, args, args.duration)
        _, err = rec.communicate(timeout=args.duration + 60)
        if rec.returncode != 0:
            raise RuntimeError(f"py-spy failed: {err.strip()[-300:]}")
    c.progress(f"  profile of {run.side.key} ({era}, {b.calls} calls, {args.profiler}): {path}")
    return path


# ============================================================================ report


@dataclass
class Cell:
    side: Side
    era: str
    batches: list[Batch] = field(default_factory=list)
    error: str | None = None

    def good(self) -> list[Batch]:
        return [b for b in self.batches if not b.errors and b.calls]

    def med(self, fn: Any) -> float:
        return c.median([fn(b) for b in self.good()])


def report(cells: list[Cell], args: argparse.Namespace, fm: c.FastMCPEnv, loads: tuple[float, float]) -> str:
    md = args.markdown
    out = [f"\nserver CPU per tools/call over Streamable HTTP, {c.machine_line()}",
           f"load average {loads[0]:.1f} at the start, {loads[1]:.1f} at the end; concurrency {args.concurrency}; "
           f"{args.rounds} rounds of {args.duration:g} s per side and era (median); {fm.note}\n"]
    by = {(cell.side.key, cell.era): cell for cell in cells}
    rows = []
    for cell in cells:
        good = cell.good()
        calls = sum(b.calls for b in good)
        status = cell.error or (f"{sum(b.errors for b in cell.batches)} wrong answers "
                                f"({next(b.first_error for b in cell.batches if b.errors)[:60]})"
                                if any(b.errors for b in cell.batches) else "ok")
        ratios = []
        for ref in ("floor", "fastmcp"):
            base = by.get((ref, cell.era))
            ratios.append(c.ratio(cell.med(lambda b: b.cpu_ms), base.med(lambda b: b.cpu_ms))
                          if cell.side.key.startswith(("ours", "baseline")) and base else "")
        rows.append([
            cell.side.label, cell.era,
            f"{cell.med(lambda b: b.cpu_ms):.2f} ms" if good else "–",
            f"{cell.med(lambda b: b.rate):,.0f}" if good else "–",
            f"{cell.med(lambda b: b.p50_ms):.1f} ms" if good else "–",
            f"{cell.med(lambda b: b.upstream_cpu / b.calls * 1000):.3f} ms" if good else "–",
            f"{cell.med(lambda b: b.client_cpu / b.calls * 1000):.3f} ms" if good else "–",
            f"{calls:,}", *ratios, status,
        ])
    out.append(c.table(["side", "era", "server CPU/call", "calls/s", "p50", "upstream CPU/call", "wrk CPU/call",
                        "calls", "ours/floor", "ours/FastMCP", "status"], rows, markdown=md))
    out.append("\nmodern = 2026-07-28 (stateless, no session); legacy = 2025-11-25 (one session per client). "
               "CPU/call: the server process's user+system CPU time / calls answered.")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5, help="batches per side and era (median; default 5)")
    parser.add_argument("--duration", type=float, default=4.0, help="seconds per batch (default 4)")
    parser.add_argument("--concurrency", type=int, default=16, help="concurrent clients (default 16)")
    parser.add_argument("--sides", default="floor,floor-uvloop,fastmcp,ours", help="comma-separated sides")
    parser.add_argument("--eras", default="modern,legacy", help="modern (2026-07-28) and/or legacy (2025-11-25)")
    parser.add_argument("--profile", metavar="PATH", help="write py-spy profiles of our server (.svg, .txt, .json)")
    parser.add_argument("--profiler", choices=["cpu", "py-spy"], default="cpu",
                        help="cpu: benchmarks/_cpu_sampler.py, CPU-time samples (default); py-spy: wall-clock samples")
    parser.add_argument("--profile-side", default="ours", metavar="SIDE", help="the side --profile samples (ours)")
    parser.add_argument("--baseline", metavar="DIR", action="append",
                        help="also serve with the openapi2mcp of another checkout (a worktree of main); repeatable")
    parser.add_argument("--wrk", default=shutil.which("wrk") or "wrk", help="the wrk binary")
    parser.add_argument("--timeout", type=float, default=120, help="seconds a server may take to start")
    parser.add_argument("--markdown", action="store_true", help="print a Markdown table")
    parser.add_argument("--json", metavar="FILE", help="also write the raw measurements as JSON")
    c.add_fastmcp_options(parser)
    args = parser.parse_args(argv)
    if not shutil.which(args.wrk):
        sys.exit("server_cpu: needs wrk (Debian/Ubuntu: apt-get install wrk; macOS: brew install wrk), or --wrk PATH")
    eras = [e for e in args.eras.split(",") if e]
    if set(eras) - set(ERAS):
        sys.exit(f"server_cpu: --eras takes {', '.join(ERAS)}")
    wanted = [s for s in args.sides.split(",") if s]
    fm = c.fastmcp_env(args) if "fastmcp" in wanted else c.FastMCPEnv(None, "FastMCP not measured")
    c.progress(f"FastMCP: {fm.note}")
    c.check_quiet()
    load_start = os.getloadavg()[0]

    with c.servers() as running:
        upstream = c.Server("upstream", [sys.executable, str(c.BENCH / "_fast_upstream.py")], env=c.our_env())
        running.append(upstream)
        url = upstream.first_stdout_line(timeout=60)
        c.progress(f"upstream at {url}")
        chosen = sides(url, fm, wanted, args.baseline or [])
        runs: list[Running] = []
        cells: list[Cell] = []
        for side in chosen:
            try:
                sampled = (Path(tempfile.gettempdir()) / f"o2m-sampler-{os.getpid()}.txt"
                           if args.profile and args.profiler == "cpu" and side.key == args.profile_side else None)
                run = start(side, args.timeout, sampled)
            except RuntimeError as e:
                c.progress(f"  {side.key}: FAILED: {e}")
                cells += [Cell(side, era, error=str(e)[:120]) for era in eras]
                continue
            running.append(run.server)
            runs.append(run)
            for era in eras:
                cell = Cell(side, era)
                cells.append(cell)
                try:
                    batch(run, era, upstream, args, 1.0)  # warm-up: pools, caches, sessions
                except RuntimeError as e:
                    cell.error = str(e)[:120]
        cell_of = {(cell.side.key, cell.era): cell for cell in cells}
        for i in range(args.rounds):
            order = runs[i % len(runs):] + runs[:i % len(runs)] if runs else []
            for run in order:
                for era in eras:
                    cell = cell_of[(run.side.key, era)]
                    if cell.error:
                        continue
                    try:
                        b = batch(run, era, upstream, args, args.duration)
                    except RuntimeError as e:
                        cell.error = str(e)[:120]
                        continue
                    cell.batches.append(b)
                    c.progress(f"  #{i + 1} {run.side.key:<13} {era:<6} {b.cpu_ms:6.2f} ms CPU/call, "
                               f"{b.rate:7.0f} calls/s, {b.calls} calls"
                               + (f", {b.errors} wrong ({b.first_error[:100]})" if b.errors else ""))
        if args.profile:
            for run in runs:
                if run.side.key == args.profile_side:
                    for era in eras:
                        profile(run, era, upstream, args)
        load_end = os.getloadavg()[0]

    print(report(cells, args, fm, (load_start, load_end)))
    c.write_json(args.json, {
        "machine": c.machine_line(), "fastmcp": fm.note, "concurrency": args.concurrency, "rounds": args.rounds,
        "duration": args.duration, "load_average": [load_start, load_end],
        "cells": [{"side": cell.side.key, "era": cell.era, "error": cell.error,
                   "batches": [b.__dict__ for b in cell.batches]} for cell in cells],
    })
    return 0


if __name__ == "__main__":
    sys.exit(main())
