"""Spec file -> listed tool set: wall time and peak memory, openapi2mcp vs FastMCP (issue 2).

    python benchmarks/compile_bench.py [--repeat 3] [--spec github ...] [--all] [--markdown]

Each measurement is a fresh process, started and timed by this script (wall = spawn to exit,
so interpreter start and imports count; peak memory = the child's ru_maxrss):

  ours           load_spec + compile_manifest(all operations) + the tools/list JSON
  ours+runtime   the same plus the server's Runtime (argument validators, SDK models): what a
                 server does before it can answer its first tools/list
  ours CLI       `python -m openapi2mcp inspect SPEC --all-operations --json > /dev/null`
  FastMCP        load the file (json / C YAML), FastMCP.from_openapi(openapi_spec=dict,
                 client=httpx2 client), await list_tools(), every tool's MCP wire form as JSON
  floor          load the file the same way and resolve its external refs with prance's
                 RefResolver: the least any converter that follows refs does (no tools)

Ratios are ours/FastMCP (< 1: we are faster / smaller; the goal of issue 2 is <= 0.5 for both)
and ours/floor (issue 15: <= 2 on GitHub). Specs: GitHub, Stripe, Kubernetes; --all adds OpenAI
and DigitalOcean; `--spec graph` is Microsoft Graph v1.0 (11,422 operations, fetched once from
APIs-guru's npm package into .cache/bench/apis-guru). `--baseline DIR` adds "ours" on another
checkout's openapi2mcp (e.g. `git archive main | tar -x -C /tmp/before`), interleaved with the
other sides: before and after in one run. Corpus: $OPENAPI2MCP_CORPUS or ../shared/corpus.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make the `benchmarks` package importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import _common as c

CHILD = c.BENCH / "_list_child.py"


@dataclass(frozen=True)
class Side:
    key: str
    label: str
    ours: bool


SIDES = {
    "ours": Side("ours", "ours", True),
    "runtime": Side("runtime", "ours+runtime", True),
    "cli": Side("cli", "ours CLI inspect", True),
    "fastmcp": Side("fastmcp", "FastMCP", False),
    "floor": Side("floor", "floor: json + prance resolve", False),
    "baseline": Side("baseline", "ours, --baseline checkout", False),
}
BASELINE: dict[str, str] = {}  # the --baseline checkout's folder, when given


def run_once(side: Side, spec: Path, fm: c.FastMCPEnv, timeout: float, extra: list[str] | None = None) -> c.Run:
    """One fresh process of `side` over `spec`."""
    if side.key == "cli":
        argv = [sys.executable, "-m", "openapi2mcp", "inspect", str(spec), "--all-operations", "--json"]
        run = c.run_child(argv, timeout=timeout, env=c.our_env())
        if run.returncode == 2 and run.error:  # a clean refusal is a result, not a crash
            run.error = f"refused: {run.error}"
        return run
    if side.key == "fastmcp":
        assert fm.python is not None
        argv = [fm.python, str(CHILD), "fastmcp", str(spec), *(extra or [])]
        return c.run_child(argv, timeout=timeout, env=c.fastmcp_env_vars(), result_file=True)
    if side.key == "floor":
        return c.run_child([sys.executable, str(CHILD), "floor", str(spec)], timeout=timeout, env=c.our_env(),
                           result_file=True)
    if side.key == "baseline":
        env = {**c.our_env(), "PYTHONPATH": BASELINE["dir"]}
        return c.run_child([sys.executable, str(CHILD), "ours-compile", str(spec)], timeout=timeout, env=env,
                           result_file=True)
    mode = "ours-runtime" if side.key == "runtime" else "ours-compile"
    argv = [sys.executable, str(CHILD), mode, str(spec), *(extra or [])]
    return c.run_child(argv, timeout=timeout, env=c.our_env(), result_file=True)


@dataclass
class Cell:
    """The runs of one side on one spec."""

    side: Side
    runs: list[c.Run] = field(default_factory=list)

    @property
    def ok(self) -> list[c.Run]:
        return [r for r in self.runs if r.ok]

    @property
    def failed(self) -> str | None:
        bad = [r for r in self.runs if not r.ok]
        return bad[0].error if bad else None

    def wall(self) -> float | None:
        return c.median([r.wall for r in self.ok]) if self.ok else None

    def cpu(self) -> float | None:
        return c.median([r.cpu for r in self.ok]) if self.ok else None

    def rss(self) -> float | None:
        return c.median([r.rss_mb for r in self.ok]) if self.ok else None

    def value(self, key: str) -> Any:
        for r in self.ok:
            if key in r.result:
                return r.result[key]
        return None

    def phase(self, name: str) -> float | None:
        values = [r.result["phases"][name] for r in self.ok if name in r.result.get("phases", {})]
        return c.median(values) if values else None


def measure(spec: Path, sides: list[Side], fm: c.FastMCPEnv, repeat: int, timeout: float) -> dict[str, Cell]:
    """Interleave the sides (a, b, c, a, b, c, ...) so that drift hits all of them alike."""
    spec.read_bytes()  # into the page cache: no side pays for the disk
    cells = {s.key: Cell(s) for s in sides}
    for i in range(repeat):
        for side in sides:
            cell = cells[side.key]
            if cell.failed:
                continue
            run = run_once(side, spec, fm, timeout)
            cell.runs.append(run)
            status = "ok" if run.ok else f"FAILED: {run.error}"
            c.progress(f"  {side.label:<17} #{i + 1}: {run.wall:7.2f} s wall {run.cpu:7.2f} s CPU "
                       f"{run.rss_mb:7,.0f} MB  {status}")
    return cells


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--spec", action="append", metavar="NAME",
                        help=f"one of {[s.key for s in c.SPECS]} (repeatable; default: github stripe kubernetes)")
    parser.add_argument("--all", action="store_true", help="also OpenAI and DigitalOcean")
    parser.add_argument("--sides", default="ours,runtime,cli,fastmcp,floor",
                        help="comma-separated subset of ours,runtime,cli,fastmcp,floor")
    parser.add_argument("--baseline", metavar="DIR", help="also measure `ours` with the openapi2mcp of this checkout")
    c.common_options(parser)
    args = parser.parse_args(argv)
    if args.baseline:
        BASELINE["dir"] = str(Path(args.baseline).resolve())
        args.sides += ",baseline"
    fm = c.fastmcp_env(args)
    wanted = [k.strip() for k in args.sides.split(",") if k.strip()]
    sides = [SIDES[k] for k in wanted if k in SIDES and (k != "fastmcp" or fm.available)]
    specs = c.pick_specs(args.spec, args.all)
    c.progress(f"FastMCP: {fm.note}")
    c.check_quiet()

    results: dict[str, dict[str, Cell]] = {}
    for spec, path in specs:
        c.progress(f"{spec.label}: {path}")
        results[spec.key] = measure(path, sides, fm, args.repeat, args.timeout)

    print(report(specs, results, sides, fm, args))
    c.write_json(args.json, {
        "machine": c.machine_line(), "fastmcp": fm.note, "repeat": args.repeat,
        "results": {k: {s: [r.__dict__ for r in cell.runs] for s, cell in v.items()} for k, v in results.items()},
    })
    return 0


def report(specs: list[tuple[c.Spec, Path]], results: dict[str, dict[str, Cell]], sides: list[Side],
           fm: c.FastMCPEnv, args: argparse.Namespace) -> str:
    out = [f"\nspec file -> listed tools, {c.machine_line()}",
           f"median of {args.repeat} fresh processes; wall = spawn to exit, CPU = user + system time of the "
           f"process, peak RSS = its ru_maxrss; ratio = ours / FastMCP, floor ratio = ours / floor; "
           f"FastMCP: {fm.note}\n"]
    rows = []
    notes: list[str] = []

    def note(text: str) -> int:
        if text not in notes:
            notes.append(text)
        return notes.index(text) + 1

    for spec, _ in specs:
        cells = results[spec.key]
        theirs = cells.get("fastmcp")
        base = cells.get("floor")
        for side in sides:
            cell = cells[side.key]
            wall, cpu, rss = cell.wall(), cell.cpu(), cell.rss()
            versus = side.ours and theirs is not None and theirs.ok
            rows.append([
                spec.label, side.label,
                cell.value("tools") if cell.value("tools") is not None and side.key != "floor" else "",
                c.fmt_bytes(cell.value("bytes")) if cell.value("bytes") else "",
                c.fmt_s(wall), c.fmt_s(cpu), c.fmt_mb(rss),
                c.ratio(wall, theirs.wall()) if versus and theirs else "",
                c.ratio(cpu, theirs.cpu()) if versus and theirs else "",
                c.ratio(rss, theirs.rss()) if versus and theirs else "",
                c.ratio(wall, base.wall()) if side.ours and base and base.ok else "",
                c.ratio(cpu, base.cpu()) if side.ours and base and base.ok else "",
                "ok" if not cell.failed else f"fails [{note(cell.failed[:200])}]",
            ])
    out.append(c.table(["spec", "side", "tools", "tools/list", "wall", "CPU", "peak RSS", "wall ratio", "CPU ratio",
                        "RSS ratio", "floor wall ratio", "floor CPU ratio", "status"], rows, markdown=args.markdown))
    out += [f"  [{i}] {text}" for i, text in enumerate(notes, 1)]
    phase_rows = []
    for spec, _ in specs:
        for side in sides:
            cell = results[spec.key][side.key]
            if side.key == "cli" or not cell.ok:
                continue
            names = ["import", "load", "compile", "runtime", "list", "serialise"]
            phase_rows.append([spec.label, side.label,
                               *(c.fmt_s(cell.phase(n)) if cell.phase(n) is not None else "" for n in names)])
    if phase_rows:
        out.append("\nwhere the time goes (median seconds per phase, inside the child; "
                   "compile = FastMCP.from_openapi for FastMCP, list = list_tools + wire form)\n")
        out.append(c.table(["spec", "side", "import", "load", "compile", "runtime", "list", "serialise"],
                           phase_rows, markdown=args.markdown))
    return "\n".join(out)


if __name__ == "__main__":
    sys.exit(main())
