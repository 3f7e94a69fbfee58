"""Cold start: process start to the first complete tools/list, over stdio and Streamable HTTP (issue 6).

    python benchmarks/cold_start.py [--spec notes --spec petstore --spec github --spec github-all]
                                    [--repeat N] [--transports stdio,http] [--markdown] [--json FILE]

Four ways to serve one API, each started as a fresh process for every run:

  package    the frozen package's own console script. `openapi2mcp build SPEC --overlay F
             --name KEY-mcp --lock pins --out .cache/bench/packages/KEY-mcp`, then
             `pip install --no-deps --no-build-isolation --target .cache/bench/site-KEY-mcp` of that
             directory, run as `.cache/bench/site-KEY-mcp/bin/KEY-mcp` with PYTHONPATH=that folder:
             the script's shebang is this venv's Python and the openapi2mcp runtime it imports is
             this checkout (installed editable here), so it runs on exactly the interpreter and
             dependency versions of the other sides; only the way the tools arrive differs.
             (A real install, `pip install --find-links wheels DIR` into a fresh venv, gives the
             same code in a different folder: tests/test_build.py does that.)
  spec       `openapi2mcp serve SPEC --overlay F` (or `--all-operations`): load, compile and serve.
  manifest   `openapi2mcp serve --manifest M`, M being the package's own manifest.json (the same
             frozen Manifest the package loads, so the two differ only in their entry point).
  FastMCP    benchmarks/fastmcp_server.py under FastMCP 4.2.3's own venv: FastMCP.from_openapi on
             the same spec file. FastMCP has no overlay: it serves every operation.
  floor      `python -c "import mcp.server.lowlevel"`, spawn to exit (stdio column only): what any
             server on the mcp SDK pays before it can answer; "floor ratio" = ours / floor (issue
             15's goal for the package: <= 1.3), on wall time and on the server process's own CPU
             time (user + system, from /proc, read when the list is complete: steadier on a busy box).

`--baseline DIR` adds the package script and `serve SPEC` run on another checkout's openapi2mcp
(PYTHONPATH=DIR; e.g. `git archive main | tar -x -C /tmp/before`), interleaved with the rest:
before and after in one run.

Every side gets `--base-url http://127.0.0.1:9` (nothing listens there; no tool is called).

Cold start = from just before the process is spawned until the last page of tools/list has
arrived at a fresh mcp SDK client (2025-11-25 initialize handshake; `--mode auto` for 2026-07-28);
over stdio the first page's arrival is reported too ("first page": what a client waits for before
it can show the first tools):

  stdio  the SDK client launches the command itself (`stdio_client`, as MCP clients launch local
         servers) and sends initialize at once; the server answers when it is ready.
  http   the command gets `--transport http --port P`; the script probes the port with plain TCP
         connects every 10 ms, then lists every page through the SDK's Streamable HTTP client.

Peak RSS is the server process's VmHWM (/proc) read once the list is complete. Runs are
interleaved (every side and transport once per round) after one unrecorded warm-up run of each
(`--warmup`), so that the page cache and the bytecode cache are warm for all alike (every side
reads bytecode from .cache/bench/pycache: see with_bytecode); the table shows medians.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import os
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make the `benchmarks` package importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import _common as c

PACKAGES = c.CACHE / "packages"
NOWHERE = "http://127.0.0.1:9"  # the upstream every side is pointed at; never called
TRANSPORTS = ("stdio", "http")


@dataclass(frozen=True)
class Case:
    """One API as we serve it: a spec file plus our compile options."""

    key: str
    label: str  # the table's spec column
    api: str  # the API's name, for FastMCP's row
    spec: str  # "examples/..." (repository) or "corpus:github/..." (corpus)
    options: tuple[str, ...]  # --overlay F or --all-operations
    default: bool = True

    @property
    def big(self) -> bool:
        return self.spec.startswith(("corpus:", "fetched:"))

    @property
    def runs(self) -> int:
        """The default --repeat: 5 for the examples, 3 for corpus specs."""
        return 3 if self.big else 5

    def spec_path(self) -> Path | None:
        if self.spec.startswith("fetched:"):  # APIs-guru's npm package, cached under .cache/bench/apis-guru
            return c.fetched_spec(self.spec.removeprefix("fetched:"))
        if not self.spec.startswith("corpus:"):
            return c.ROOT / self.spec
        corpus = c.corpus_dir()
        return corpus / self.spec.removeprefix("corpus:") if corpus else None


def _example(name: str, default: bool = True) -> Case:
    overlay = f"examples/{name}/overlay.yaml"
    return Case(name, f"{name} + overlay", name, f"examples/{name}/openapi.yaml", ("--overlay", overlay), default)


GITHUB = "corpus:github/api.github.com.json"
CASES = [
    _example("notes"),
    _example("petstore"),
    _example("mailfiles", default=False),
    _example("market", default=False),
    Case("github", "GitHub + overlays/github.yaml", "GitHub", GITHUB, ("--overlay", "overlays/github.yaml")),
    Case("github-all", "GitHub `--all-operations`", "GitHub", GITHUB, ("--all-operations",)),
    # 11,422 tools, a 200 MB Manifest: on request (FastMCP takes minutes and GBs on it: add --no-fastmcp)
    Case("graph-all", "Microsoft Graph `--all-operations`", "Microsoft Graph", "fetched:microsoft.com/graph.json",
         ("--all-operations",), default=False),
]

FLOOR = "import mcp.server.lowlevel"  # what every server on the mcp SDK imports before it can answer
# ... and its peak memory, from the process itself: ru_maxrss of a child forked from this (big) script
# counts the parent's pages it started with
FLOOR_CODE = (f"{FLOOR}\nimport sys\nhwm = [ln for ln in open('/proc/self/status') if ln.startswith('VmHWM:')]\n"
              "open(sys.argv[-1], 'w').write('{\"hwm_kb\": %s}' % hwm[0].split()[1])\n")


@dataclass
class Side:
    """One command that serves a case; measured over each transport."""

    key: str  # package | spec | manifest | fastmcp | fastmcp-json
    label: str
    ours: bool
    argv: list[str]  # without the transport flags
    env: dict[str, str]
    transports: tuple[str, ...] = TRANSPORTS
    fallback_for: str | None = None  # HTTP only, measured when that side's defaults fail


@dataclass
class Slot:
    """The runs of one side over one transport."""

    case: str  # the Case key; for FastMCP the API's name (one measurement for every case on that spec)
    side: Side
    transport: str
    seconds: list[float] = field(default_factory=list)
    rss: list[float] = field(default_factory=list)
    first: list[float] = field(default_factory=list)  # stdio: seconds to the first page of tools/list
    cpu: list[float] = field(default_factory=list)  # stdio: the server's CPU seconds until the list is complete
    tools: int = 0
    error: str | None = None

    def time(self) -> float:
        return c.median(self.seconds)

    def peak(self) -> float:
        return c.median(self.rss)

    def cpu_time(self) -> float | None:
        return c.median(self.cpu) if self.cpu else None

    def first_page(self) -> float | None:
        return c.median(self.first) if self.first else None


# ============================================================================ preparing the sides


PYCACHE = c.CACHE / "pycache"


def with_bytecode(env: dict[str, str]) -> dict[str, str]:
    """Every side reads its modules' bytecode from one cache folder that the warm-up run fills.

    An installed package has its .pyc files (pip compiles them); a source checkout run with
    PYTHONDONTWRITEBYTECODE=1 (as on the machine these numbers come from) recompiles every module
    whose .pyc is stale or missing on each start. PYTHONPYCACHEPREFIX puts all sides on the same,
    installed-like footing without writing into the checkout or the venvs.
    """
    env = {k: v for k, v in env.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = str(PYCACHE)
    return env


def clean_env(**extra: str) -> dict[str, str]:
    """Our children's environment, without any OPENAPI2MCP_* setting of the caller (auth tokens...)."""
    env = {k: v for k, v in c.our_env().items() if not k.startswith("OPENAPI2MCP_")}
    env.update(extra)
    return with_bytecode(env)


def openapi2mcp_command() -> list[str]:
    """The `openapi2mcp` console script beside this Python (what a user runs), else `python -m openapi2mcp`."""
    script = Path(sys.executable).with_name("openapi2mcp")
    return [str(script)] if script.is_file() else [sys.executable, "-m", "openapi2mcp"]


@dataclass
class Package:
    name: str
    script: Path
    site: Path
    manifest: Path
    build_s: float
    install_s: float


def _ensure_build_backend(timeout: float) -> None:
    """The package's build backend (hatchling) in this venv: `--no-build-isolation` builds with what is here."""
    if importlib.util.find_spec("hatchling") is None:
        run = c.run_child([sys.executable, "-m", "pip", "install", "--quiet", "hatchling"], timeout=timeout,
                          env=clean_env())
        if not run.ok:
            raise RuntimeError(f"pip install hatchling (the packages' build backend) failed: {run.error}")


def build_and_install(case: Case, spec: Path, timeout: float) -> Package:
    """`openapi2mcp build` into .cache/bench/packages/NAME, then a --target install into .cache/bench/site-NAME."""
    name = f"{case.key}-mcp"
    out, site = PACKAGES / name, c.CACHE / f"site-{name}"
    out.parent.mkdir(parents=True, exist_ok=True)
    build = c.run_child([*openapi2mcp_command(), "build", str(spec), *case.options, "--name", name,
                         "--lock", "pins", "--out", str(out)], timeout=timeout, env=clean_env())
    if not build.ok:
        raise RuntimeError(f"openapi2mcp build failed: {build.error}")
    shutil.rmtree(site, ignore_errors=True)
    _ensure_build_backend(timeout)
    install = c.run_child([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation",
                           "--no-compile", "--target", str(site), str(out)], timeout=timeout, env=clean_env())
    if not install.ok:
        raise RuntimeError(f"pip install --target failed: {install.error}")
    module = name.replace("-", "_")
    return Package(name, site / "bin" / name, site, out / "src" / module / "manifest.json", build.wall, install.wall)


def our_sides(case: Case, spec: Path, pkg: Package | None, baseline: str | None = None) -> list[Side]:
    """The package's script, serve from the spec, serve from the package's Manifest (the spec side only
    when the package could not be built); with `baseline`, the package and spec sides on that checkout too."""
    serve = [*openapi2mcp_command(), "serve"]
    how = "--all-operations" if "--all-operations" in case.options else "--overlay F"
    from_spec = Side("spec", f"`serve SPEC {how}`", True,
                     [*serve, str(spec), *case.options, "--base-url", NOWHERE], clean_env())
    # -P: `-m` would put the working directory (this checkout) before PYTHONPATH on sys.path
    base_spec = Side("spec-base", f"`serve SPEC {how}` (baseline)", True,
                     [sys.executable, "-P", "-m", "openapi2mcp", "serve", str(spec), *case.options,
                      "--base-url", NOWHERE],
                     clean_env(PYTHONPATH=baseline or ""))
    if pkg is None:
        return [from_spec, *([base_spec] if baseline else [])]
    package = Side("package", f"package script `{pkg.name}`", True, [str(pkg.script), "--base-url", NOWHERE],
                   clean_env(PYTHONPATH=str(pkg.site)))
    base_package = Side("package-base", f"package script `{pkg.name}` (baseline)", True, package.argv,
                        clean_env(PYTHONPATH=os.pathsep.join([str(pkg.site), baseline or ""])))
    return [
        package,
        *([base_package] if baseline else []),
        from_spec,
        *([base_spec] if baseline else []),
        Side("manifest", "`serve --manifest M`", True,
             [*serve, "--manifest", str(pkg.manifest), "--base-url", NOWHERE], clean_env()),
    ]


def fastmcp_sides(fm: c.FastMCPEnv, spec: Path) -> list[Side]:
    if not fm.python:
        return []
    argv = [fm.python, str(c.BENCH / "fastmcp_server.py"), str(spec), "--base-url", NOWHERE]
    env = with_bytecode(c.fastmcp_env_vars())
    return [
        Side("fastmcp", "FastMCP `from_openapi` (every operation)", False, argv, env),
        Side("fastmcp-json", "FastMCP `from_openapi`, `json_response=True`", False, [*argv, "--json-response"],
             env, transports=("http",), fallback_for="fastmcp"),
    ]


def floor_side() -> Side:
    return Side("floor", f'floor: `python -c "{FLOOR}"` (spawn to exit)', False, [sys.executable, "-c", FLOOR_CODE],
                clean_env(), transports=("stdio",))


def transport_argv(side: Side, transport: str, port: int | None = None) -> list[str]:
    if side.ours:
        return side.argv if transport == "stdio" else [*side.argv, "--transport", "http", "--port", str(port)]
    return [*side.argv, "--transport", transport, *(["--port", str(port)] if port else [])]


# ============================================================================ one cold start


def _children(pid: int) -> list[int]:
    """The live child processes of `pid` (from /proc)."""
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()
        if int(fields[1]) == pid:
            out.append(int(entry.name))
    return out


async def stdio_once(argv: list[str], env: dict[str, str], mode: str, limit: float,
                     *, every_page: bool = True) -> tuple[float, float, int, float, float]:
    """(seconds, peak RSS MB, tools, seconds to the first page, server CPU seconds): the SDK client launches
    the server and lists every page (`every_page=False`: only the first; RSS and CPU are then read there)."""
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters, stdio_client

    params = StdioServerParameters(command=argv[0], args=argv[1:], env=env, cwd=str(c.ROOT))
    with tempfile.TemporaryFile("w+") as errlog:
        before = set(_children(os.getpid()))
        started = time.perf_counter()
        try:
            async with asyncio.timeout(limit), Client(stdio_client(params, errlog=errlog), mode=mode) as client:
                page = await client.list_tools()
                first = time.perf_counter() - started
                more = page.next_cursor if every_page else None
                tools = list(page.tools) + (await c.tool_pages(client, more) if more else [])
                seconds = time.perf_counter() - started
                spawned = [p for p in _children(os.getpid()) if p not in before]  # the server, still running
                rss = c.vmhwm_mb(spawned[0]) if len(spawned) == 1 else float("nan")
                cpu = c.cpu_seconds(spawned[0]) if len(spawned) == 1 else float("nan")
        except Exception as e:
            errlog.seek(0)
            tail = " | ".join(ln.strip() for ln in errlog.read().strip().splitlines()[-3:])
            leaf = c.exception_leaves(e)[0]
            raise RuntimeError(f"{type(leaf).__name__}: {leaf}" + (f" (stderr: {tail})" if tail else "")) from None
    return seconds, rss, len(tools), first, cpu


async def http_once(side: Side, mode: str, limit: float) -> tuple[float, float, int]:
    """(seconds, peak RSS MB, tools): start the server on a free port, wait for the port, list every page."""
    port = c.free_port()
    with c.Server(side.key, transport_argv(side, "http", port), env=side.env) as server:
        seconds, tools = await c.wait_ready(server, f"http://127.0.0.1:{port}/mcp", mode, limit)
        return seconds, server.peak_rss_mb(), len(tools)


def measure(slot: Slot, mode: str, limit: float, *, record: bool = True) -> None:
    """One cold start of the slot's side over its transport; a failure marks the slot failed for good."""
    side = slot.side
    first = cpu = None
    try:
        if side.key == "floor":
            run = c.run_child(side.argv, timeout=limit, env=side.env, result_file=True)
            if not run.ok:
                raise RuntimeError(run.error)
            seconds, rss, tools, cpu = run.wall, run.result.get("hwm_kb", float("nan")) / 1024, 0, run.cpu
        elif slot.transport == "stdio":
            seconds, rss, tools, first, cpu = asyncio.run(stdio_once(transport_argv(side, "stdio"), side.env, mode,
                                                                limit))
        else:
            seconds, rss, tools = asyncio.run(http_once(side, mode, limit))
    except Exception as e:
        slot.error = str(e)[:400] or type(e).__name__
        c.progress(f"  {slot.case:<10} {side.key:<12} {slot.transport:<5} FAILED: {slot.error}")
        return
    tag = "warm-up" if not record else f"#{len(slot.seconds) + 1}"
    c.progress(f"  {slot.case:<10} {side.key:<12} {slot.transport:<5} {tag:>7}: {seconds:6.2f} s, "
               f"{rss:5.0f} MB, {tools} tools")
    if record:
        slot.seconds.append(seconds)
        slot.rss.append(rss)
        slot.tools = tools
        if first is not None:
            slot.first.append(first)
        if cpu is not None:
            slot.cpu.append(cpu)


# ============================================================================ the run


@dataclass
class Group:
    """The cases on one spec file, and FastMCP on that file (measured once for all of them)."""

    spec: Path
    cases: list[Case]
    packages: dict[str, Package] = field(default_factory=dict)
    slots: list[Slot] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def plan(args: argparse.Namespace, fm: c.FastMCPEnv) -> list[Group]:
    known = {k.key: k for k in CASES}
    unknown = [k for k in args.spec or [] if k not in known]
    if unknown:
        sys.exit(f"cold_start: unknown --spec {unknown}; known: {sorted(known)}")
    chosen = [known[k] for k in args.spec] if args.spec else [k for k in CASES if k.default]
    groups: dict[Path, Group] = {}
    for case in chosen:
        spec = case.spec_path()
        if spec is None or not spec.is_file():
            c.progress(f"note: {case.key}: {spec or case.spec} not found (no corpus?), skipped")
            continue
        groups.setdefault(spec, Group(spec, [])).cases.append(case)
    for group in groups.values():
        for case in group.cases:
            c.progress(f"{case.key}: openapi2mcp build + pip install --target ...")
            pkg: Package | None = None
            try:
                pkg = build_and_install(case, group.spec, max(args.timeout, 600))
            except RuntimeError as e:
                group.notes.append(f"{case.key}: {e}")
                c.progress(f"  {e}")
            else:
                group.packages[case.key] = pkg
                c.progress(f"  {pkg.name}: built in {pkg.build_s:.1f} s, installed in {pkg.install_s:.1f} s, "
                           f"manifest.json {c.fmt_bytes(pkg.manifest.stat().st_size)}")
            sides = our_sides(case, group.spec, pkg, str(Path(args.baseline).resolve()) if args.baseline else None)
            group.slots += [Slot(case.key, side, t) for side in sides for t in args.transports if t in side.transports]
        group.slots += [Slot(group.cases[0].api, side, t) for side in fastmcp_sides(fm, group.spec)
                        for t in args.transports if t in side.transports]
        if "stdio" in args.transports:
            group.slots.append(Slot("floor", floor_side(), "stdio"))
    return list(groups.values())


def fallback_needed(group: Group, slot: Slot) -> bool:
    """A fallback side runs only when the side it stands in for has failed on that transport."""
    if slot.side.fallback_for is None:
        return True
    return any(s.side.key == slot.side.fallback_for and s.transport == slot.transport and s.error
               for s in group.slots)


def run(groups: list[Group], args: argparse.Namespace) -> None:
    for group in groups:
        repeat = args.repeat or max(case.runs for case in group.cases)
        limit = max(args.timeout, 600) if any(case.big for case in group.cases) else args.timeout
        c.progress(f"{group.spec.name}: {args.warmup} warm-up + {repeat} runs per side and transport")
        for _ in range(args.warmup):
            for slot in group.slots:
                if not slot.error and fallback_needed(group, slot):
                    measure(slot, args.mode, limit, record=False)
        for _ in range(repeat):
            for slot in group.slots:
                if not slot.error and fallback_needed(group, slot):
                    measure(slot, args.mode, limit)


# ============================================================================ report


def _ref(group: Group, transport: str) -> Slot | None:
    """FastMCP's slot to compare with: its defaults when they work, else its JSON-response fallback."""
    theirs = [s for s in group.slots if not s.side.ours and s.side.key != "floor" and s.transport == transport
              and s.seconds]
    return theirs[0] if theirs else None


def _pair(values: list[str]) -> str:
    return " / ".join(values) if any(v not in ("", "–") for v in values) else ""


def report(groups: list[Group], fm: c.FastMCPEnv, args: argparse.Namespace) -> str:
    transports = [t for t in TRANSPORTS if t in args.transports]
    head = ["spec", "side", "tools"]
    for t in transports:
        head += [f"{t} cold start", f"{t} peak RSS"]
    names = "/".join(transports)
    head += [f"time ratio ({names})", f"RSS ratio ({names})"]
    if "stdio" in transports:
        head += ["stdio first page", "stdio server CPU", "floor ratio (stdio wall / CPU)"]
    rows: list[list[Any]] = []
    footnotes: list[str] = []
    for group in groups:
        refs = {t: _ref(group, t) for t in transports}
        floor = next((s for s in group.slots if s.side.key == "floor" and s.seconds), None)
        by_side: dict[tuple[str, str], dict[str, Slot]] = {}
        for slot in group.slots:
            by_side.setdefault((slot.case, slot.side.key), {})[slot.transport] = slot
        for (case_key, _), slots in by_side.items():
            first = next(iter(slots.values()))
            side = first.side
            if side.fallback_for and not any(s.seconds or s.error for s in slots.values()):
                continue
            case = next((k for k in group.cases if k.key == case_key), None) if side.ours else None
            spec = case.label if case else ("any" if side.key == "floor" else group.cases[0].api)
            row: list[Any] = [spec, side.label, max((s.tools for s in slots.values()), default=0) or ""]
            times, sizes = [], []
            for t in transports:
                cell = slots.get(t)
                if cell is None:
                    row += ["", ""]
                    times.append("")
                    sizes.append("")
                    continue
                if cell.error and not cell.seconds:
                    footnotes.append(cell.error)
                    row += [f"fails{_sup(len(footnotes))}", ""]
                else:
                    row += [c.fmt_s(cell.time()), c.fmt_mb(cell.peak())]
                ref = refs[t]
                ok = side.ours and ref is not None and cell.seconds
                times.append(c.ratio(cell.time(), ref.time()) if ok and ref else "")
                sizes.append(c.ratio(cell.peak(), ref.peak()) if ok and ref else "")
            row += [_pair(times), _pair(sizes)]
            if "stdio" in transports:
                stdio = slots.get("stdio")
                first_page = stdio.first_page() if stdio else None
                cpu = stdio.cpu_time() if stdio else None
                versus = side.ours and floor is not None and stdio is not None and bool(stdio.seconds)
                row += [c.fmt_s(first_page) if first_page is not None else "",
                        c.fmt_s(cpu) if cpu is not None else "",
                        _pair([c.ratio(stdio.time(), floor.time()),
                               c.ratio(cpu, floor.cpu_time())]) if versus and stdio and floor else ""]
            rows.append(row)
    out = [f"\ncold start: process start -> complete tools/list (all pages) at a fresh mcp SDK client "
           f"({'2025-11-25 handshake' if args.mode == 'legacy' else 'mode ' + args.mode}); "
           f"median of {args.repeat or '5 (examples) / 3 (GitHub)'} runs; {c.machine_line()}; {fm.note}",
           "peak RSS = the server process's VmHWM at that point; ratio = ours / FastMCP on the same spec and "
           "transport (< 1 is better); FastMCP has no overlay and serves every operation\n",
           c.table(head, rows, markdown=args.markdown)]
    out.append("")  # a line right below a Markdown table would become one of its rows
    for i, note in enumerate(footnotes, 1):
        out.append(f"{_sup(i)} {note}")
    for group in groups:
        for case in group.cases:
            pkg = group.packages.get(case.key)
            if pkg:
                out.append(f"package {pkg.name}: `openapi2mcp build` {pkg.build_s:.1f} s, `pip install --target` "
                           f"{pkg.install_s:.1f} s, manifest.json {c.fmt_bytes(pkg.manifest.stat().st_size)}")
        out += group.notes
    return "\n".join(out)


def _sup(n: int) -> str:
    return "".join("⁰¹²³⁴⁵⁶⁷⁸⁹"[int(d)] for d in str(n))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--spec", action="append", metavar="NAME",
                        help="a case to measure (repeatable): " + ", ".join(
                            k.key + ("" if k.default else " (not by default)") for k in CASES))
    parser.add_argument("--transports", default="stdio,http", help="comma-separated: stdio, http (default both)")
    parser.add_argument("--mode", default="legacy", choices=["legacy", "auto"],
                        help="client mode: legacy (2025-11-25 initialize, default) or auto (2026-07-28 when offered)")
    parser.add_argument("--warmup", type=int, default=1,
                        help="unrecorded runs per side and transport first (default 1)")
    parser.add_argument("--repeat", type=int, default=0,
                        help="runs per side and transport (median; default 5 for the examples, 3 for GitHub)")
    parser.add_argument("--timeout", type=float, default=120,
                        help="seconds for one cold start (default 120; at least 600 for GitHub)")
    parser.add_argument("--baseline", metavar="DIR",
                        help="also run the package and `serve SPEC` on the openapi2mcp of this checkout")
    parser.add_argument("--markdown", action="store_true", help="print a Markdown table")
    parser.add_argument("--json", metavar="FILE", help="also write the raw measurements as JSON")
    c.add_fastmcp_options(parser)
    args = parser.parse_args(argv)
    args.transports = [t.strip() for t in args.transports.split(",") if t.strip() in TRANSPORTS]
    fm = c.fastmcp_env(args)
    c.progress(f"FastMCP: {fm.note}")
    c.check_quiet()
    groups = plan(args, fm)
    run(groups, args)
    print(report(groups, fm, args))
    c.write_json(args.json, {
        "machine": c.machine_line(), "fastmcp": fm.note, "mode": args.mode,
        "runs": [{"case": s.case, "side": s.side.key, "label": s.side.label, "transport": s.transport,
                  "argv": transport_argv(s.side, s.transport, 0), "seconds": s.seconds, "rss_mb": s.rss,
                  "tools": s.tools, "error": s.error} for g in groups for s in g.slots],
        "packages": [{"name": p.name, "build_s": p.build_s, "install_s": p.install_s,
                      "manifest_bytes": p.manifest.stat().st_size} for g in groups for p in g.packages.values()],
    })
    return 0


if __name__ == "__main__":
    sys.exit(main())
