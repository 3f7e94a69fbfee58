"""tools/list size of a raw (every operation) conversion: openapi2mcp vs FastMCP.

    python benchmarks/tool_list_size.py [--spec github ...] [--dump DIR] [--markdown]

For each spec, one fresh process per side (the same children as compile_bench.py) produces the
complete tools/list payload as compact JSON ({"tools": [...]}, what goes over the wire, all pages
joined); this script reports its size, how much of it is input schemas, output schemas and
descriptions, and the biggest single tool. Sizes are deterministic, so one run each.
Default specs: GitHub, Stripe, OpenAI, Kubernetes (docs/compile.md quotes these numbers).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make the `benchmarks` package importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import _common as c
from benchmarks.compile_bench import SIDES, run_once

DEFAULT = ["github", "stripe", "openai", "kubernetes"]


def share(result: dict[str, Any], part: str) -> str:
    stats = result.get("stats")
    if not stats or not result.get("bytes"):
        return "–"
    return f"{stats['parts'][part] / result['bytes']:.0%}"


def largest(result: dict[str, Any]) -> str:
    stats = result.get("stats")
    if not stats or not stats["largest"]:
        return "–"
    size, name = stats["largest"][0]
    return f"{c.fmt_bytes(size)} ({name})"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--spec", action="append", metavar="NAME",
                        help=f"one of {[s.key for s in c.SPECS]} (repeatable; default: {' '.join(DEFAULT)})")
    parser.add_argument("--dump", metavar="DIR", help="also write each tools/list JSON into DIR")
    parser.add_argument("--timeout", type=float, default=600, help="seconds before a child is killed")
    parser.add_argument("--markdown", action="store_true", help="print a Markdown table")
    parser.add_argument("--json", metavar="FILE", help="also write the raw results as JSON")
    c.add_fastmcp_options(parser)
    args = parser.parse_args(argv)
    fm = c.fastmcp_env(args)
    c.progress(f"FastMCP: {fm.note}")
    sides = [SIDES["ours"], *([SIDES["fastmcp"]] if fm.available else [])]
    specs = c.pick_specs(args.spec or DEFAULT, False)
    dump = Path(args.dump) if args.dump else None
    if dump:
        dump.mkdir(parents=True, exist_ok=True)

    results: dict[str, dict[str, c.Run]] = {}
    for spec, path in specs:
        results[spec.key] = {}
        for side in sides:
            extra = ["--stats", *(["--dump", str(dump / f"{spec.key}.{side.key}.json")] if dump else [])]
            run = run_once(side, path, fm, args.timeout, extra)
            results[spec.key][side.key] = run
            c.progress(f"  {spec.label:<26} {side.label:<8} {c.fmt_bytes(run.result.get('bytes'))}"
                       + ("" if run.ok else f"  FAILED: {run.error}"))

    rows = []
    notes: list[str] = []
    for spec, _ in specs:
        ours = results[spec.key]["ours"]
        theirs = results[spec.key].get("fastmcp")
        row: list[Any] = [spec.label]
        for run in (ours, theirs):
            if run is None:
                row += ["", "not measured", "", ""]
            elif not run.ok:
                notes.append(str(run.error)[:200])
                row += ["", f"fails [{len(notes)}]", "", ""]
            else:
                r = run.result
                row += [r["tools"], c.fmt_bytes(r["bytes"]), share(r, "outputSchema"), largest(r)]
        ok = theirs is not None and theirs.ok and ours.ok
        row.insert(5, c.ratio(ours.result.get("bytes"), theirs.result.get("bytes")) if ok and theirs else "")
        rows.append(row)
    print(f"\ntools/list size, every operation as a tool (compact JSON, all pages); {c.machine_line()}; "
          f"FastMCP: {fm.note}\n")
    print(c.table(["spec", "ours tools", "ours tools/list", "ours outputSchema", "ours largest tool", "ratio",
                   "FastMCP tools", "FastMCP tools/list", "FastMCP outputSchema", "FastMCP largest tool"],
                  rows, markdown=args.markdown, left=1))
    for i, text in enumerate(notes, 1):
        print(f"  [{i}] {text}")
    c.write_json(args.json, {k: {s: r.__dict__ for s, r in v.items()} for k, v in results.items()})
    return 0


if __name__ == "__main__":
    sys.exit(main())
