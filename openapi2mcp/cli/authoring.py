"""The authoring commands: `openapi2mcp init` (lint and diff join it). app.py adds them with
`register(app)`; each reads its input, calls openapi2mcp.authoring and prints what came out: a
table on a terminal, plain lines when piped, JSON with `--json`.

Exit status: 0 ok, 1 findings (and bugs in openapi2mcp, as every command), 2 bad input.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from openapi2mcp.cli.guard import fail, guarded

if TYPE_CHECKING:
    from openapi2mcp.authoring import Summary

INIT_EXAMPLES = """\b
Examples:
  openapi2mcp init openapi.yaml                          # writes overlay.yaml
  openapi2mcp init https://api.example.com/openapi.json -o api.yaml --max-tools 12
  openapi2mcp init spec.json -o - > overlay.yaml         # the YAML on stdout, the summary on stderr
  openapi2mcp init spec.json -o overlay.yaml --force --json
  openapi2mcp inspect spec.json --overlay overlay.yaml   # then: the tools as a client sees them

\b
The draft compiles as is. Every operation is used by a tool or listed at the end under "not
exposed" with the reason; comments say how each guess was made. See docs/authoring.md.
"""


def register(app: typer.Typer) -> None:
    app.command("init", epilog=INIT_EXAMPLES)(init)


def init(
    spec: Annotated[
        str, typer.Argument(help="OpenAPI 3.0/3.1 or Swagger 2.0 document: a file path or an http(s) URL.")
    ],
    output: Annotated[
        str, typer.Option("--output", "-o", help="Where to write the draft overlay ('-': stdout).")
    ] = "overlay.yaml",
    max_tools: Annotated[
        int, typer.Option("--max-tools", min=1, max=200, help="At most this many tools are exposed (the others' "
                          "operations are listed as not exposed), chosen by the ranking of docs/authoring.md.")
    ] = 30,
    force: Annotated[bool, typer.Option("--force", "-f", help="Replace the output file if it exists.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the summary as JSON (on stdout).")] = False,
    strict: Annotated[bool, typer.Option("--strict", help="Validate the spec fully; spec warnings become errors.")
                      ] = False,
    allow_remote_refs: Annotated[
        list[str] | None, typer.Option("--allow-remote-refs", help="Allow $refs (and redirects) to this origin; "
                                       "repeatable, '*' for any (as for inspect).")
    ] = None,
    ref_root: Annotated[
        Path | None,
        typer.Option("--ref-root", help="Folder that file $refs may reach (default: the spec's own folder)."),
    ] = None,
    fetch_timeout: Annotated[
        float, typer.Option("--fetch-timeout", min=1, help="Seconds a spec given by URL may take to fetch.")
    ] = 120.0,
) -> None:
    """Draft a curated overlay for SPEC: task-level tools grouped by resource, paging, auth, risk, select.

    The draft compiles as is (inspect, compile and serve take it); a person then edits it.
    """

    def run() -> None:
        from openapi2mcp.authoring import draft_overlay
        from openapi2mcp.loader import load_spec

        target = None if output == "-" else Path(output)
        if target is not None and target.exists() and not force:
            fail(f"error: {target} exists; pass --force to replace it, or -o to write another file")
        if target is not None and target.is_dir():
            fail(f"error: {target} is a folder; give a file name, e.g. -o {target / 'overlay.yaml'}")
        allow: bool | list[str] = True if allow_remote_refs and "*" in allow_remote_refs else list(
            allow_remote_refs or [])
        loaded = load_spec(spec, allow_remote_refs=allow or False, strict=strict, ref_root=ref_root,
                           fetch_deadline=fetch_timeout)
        draft = draft_overlay(loaded, max_tools=max_tools, name=target.name if target else "overlay.yaml")
        if target is None:
            sys.stdout.write(draft.text)
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(draft.text, encoding="utf-8")
        where = "stdout" if target is None else str(target)
        if as_json:
            text = json.dumps({"output": where, **draft.summary.as_dict()}, indent=2, ensure_ascii=False) + "\n"
            (sys.stderr if target is None else sys.stdout).write(text)
            return
        stream = sys.stderr if target is None else sys.stdout
        if stream.isatty():
            _print_rich(draft.summary, where, spec, stream)
        else:
            stream.write(_plain(draft.summary, where, spec))

    guarded(run)


def _lines(s: Summary, where: str) -> list[str]:
    return [
        f"wrote {where}: {s.tools} tool(s) use {s.covered} of {s.operations} operations"
        + (f", {s.forbidden} forbidden" if s.forbidden else "") + f", {s.not_exposed} not exposed",
        f"tools/list: {s.listed_bytes:,} bytes, ~{s.listed_tokens:,} tokens; the raw conversion: "
        f"{s.raw_bytes:,} bytes, ~{s.raw_tokens:,} tokens ({s.ratio:g}x)",
    ]


def _next(where: str, spec: str) -> str:
    overlay = where if where != "stdout" else "overlay.yaml"
    return f"next: review {overlay}, then `openapi2mcp inspect {spec} --overlay {overlay}`"


def _plain(s: Summary, where: str, spec: str) -> str:
    width = max((len(r["name"]) for r in s.rows), default=4)
    rows = [f"  {r['name']:<{width}}  {r['risk']:<8}  {r['operations']:>3} op(s)  {r['bytes']:>8,} B" for r in s.rows]
    return "\n".join([*_lines(s, where), *rows, _next(where, spec)]) + "\n"


def _print_rich(s: Summary, where: str, spec: str, stream: Any) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console(file=stream, highlight=False)
    head, size = _lines(s, where)
    console.print(f"[bold]{head}[/bold]")
    console.print(size)
    table = Table(show_edge=False, pad_edge=False, box=None, header_style="bold")
    for column, justify in (("tool", "left"), ("risk", "left"), ("operations", "right"), ("bytes", "right"),
                            ("~tokens", "right")):
        table.add_column(column, justify=justify)  # type: ignore[arg-type]
    colours = {"low": "green", "medium": "yellow", "high": "red", "critical": "bold red"}
    for r in s.rows:
        table.add_row(r["name"], f"[{colours.get(r['risk'], 'white')}]{r['risk']}[/]", str(r["operations"]),
                      f"{r['bytes']:,}", f"{max(1, round(r['bytes'] / 4)):,}")
    console.print(table)
    console.print(_next(where, spec))
