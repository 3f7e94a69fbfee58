"""The authoring commands init, lint and diff (docs/authoring.md), added to the `openapi2mcp` app by `register`.

Output: rich tables on a terminal, plain lines when piped, JSON (and SARIF for lint) for machines.
Exit status: 0 ok, 1 findings (lint) or breaking changes (diff), 2 bad input. Imports are lazy:
the compile side loads only when a command runs.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer

from openapi2mcp.cli.guard import fail, guarded

if TYPE_CHECKING:
    from rich.console import Console

    from openapi2mcp.authoring import DiffReport, LintReport, LoadOptions, Summary

T = TypeVar("T")


def register(app: typer.Typer) -> None:
    """Add the authoring commands (init, lint, diff) to `app`."""
    app.command("init", epilog=INIT_EXAMPLES)(init)
    app.command("lint", no_args_is_help=True)(lint)
    app.command("diff", no_args_is_help=True)(diff)


def _run(body: Callable[[], None]) -> None:
    guarded(body)


OverlayOpt = Annotated[
    list[Path] | None,
    typer.Option("--overlay", "-O", help="The tool overlay (openapi2mcp: 1), and OAI Overlays; repeatable, in order."),
]
RemoteOpt = Annotated[
    list[str] | None,
    typer.Option("--allow-remote-refs", help="Allow $refs to this origin (as for compile); repeatable, '*' for any."),
]
RefRootOpt = Annotated[Path | None, typer.Option("--ref-root", help="Folder that file $refs may reach.")]
FetchOpt = Annotated[float, typer.Option("--fetch-timeout", min=1, help="Seconds a spec given by URL may take.")]


def _load_options(remote: list[str] | None, ref_root: Path | None, fetch_timeout: float,
                  strict: bool = False) -> LoadOptions:
    from openapi2mcp.authoring import LoadOptions

    return LoadOptions(allow_remote_refs=tuple(remote or ()), ref_root=str(ref_root) if ref_root else None,
                       fetch_timeout=fetch_timeout, strict=strict)


def _console() -> Console | None:
    """A rich console when stdout is a terminal (None: plain text for pipes and files)."""
    if not sys.stdout.isatty():
        return None
    from rich.console import Console

    return Console(highlight=False)


def _write(text: str, output: Path | None) -> None:
    if output is None or str(output) == "-":
        sys.stdout.write(text if text.endswith("\n") else text + "\n")
    else:
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_text(text if text.endswith("\n") else text + "\n", encoding="utf-8")
        typer.echo(f"wrote {output}", err=True)


# ============================================================================ lint


class Format(StrEnum):
    text = "text"
    json = "json"
    sarif = "sarif"


class Client(StrEnum):
    claude = "claude"
    claude_code = "claude-code"
    openai = "openai"
    cursor = "cursor"
    vscode = "vscode"
    gemini = "gemini"
    gemini_api = "gemini-api"
    all = "all"


class FailOn(StrEnum):
    error = "error"
    warning = "warning"
    note = "note"
    never = "never"


def lint(
    spec: Annotated[str | None, typer.Argument(help="The OpenAPI document (file or URL) the overlay is for.")] = None,
    overlay: OverlayOpt = None,
    client: Annotated[
        list[Client] | None,
        typer.Option("--client", "-c", help="Also check what this client refuses; repeatable, or all."),
    ] = None,
    max_tokens: Annotated[
        int, typer.Option(min=1, help="Budget of the whole tools/list, in tokens (bytes/4).")
    ] = 16_000,
    max_response_bytes: Annotated[
        int, typer.Option(min=1, help="A response schema describing more than this, without `select`, is a finding.")
    ] = 4_000,
    server_name: Annotated[
        str | None, typer.Option(help="The server's key in the client configuration (default: server.name).")
    ] = None,
    output_format: Annotated[Format, typer.Option("--format", "-f", help="text, json or sarif.")] = Format.text,
    as_json: Annotated[bool, typer.Option("--json", help="Same as --format json.")] = False,
    output: Annotated[Path | None, typer.Option("--output", "-o", help="Write the report here ('-': stdout).")] = None,
    fail_on: Annotated[
        FailOn, typer.Option(help="Exit 1 when an unsuppressed finding is at least this severe.")
    ] = FailOn.warning,
    list_rules: Annotated[bool, typer.Option("--list-rules", help="Print the rules (id, severity, why, fix).")] = False,
    allow_remote_refs: RemoteOpt = None,
    ref_root: RefRootOpt = None,
    fetch_timeout: FetchOpt = 120.0,
) -> None:
    """Check an overlay for what makes tools hard for a model, unsafe, or refused by a client.

    Every finding has a stable rule id (O2M101 ...), a severity, the overlay's file:line and a fix.
    Suppress one in the overlay with a reason, on its line or the line above (on a tool's `- name:`
    line it covers the whole tool):

    \b
        - name: pets_list   # o2m: ignore[O2M105] -- the API returns at most 20 pets

    \b
    Examples:
        openapi2mcp lint api.json -O overlay.yaml
        openapi2mcp lint api.json -O overlay.yaml --client claude-code --client cursor
        openapi2mcp lint api.json -O overlay.yaml --format sarif -o lint.sarif   # GitHub code scanning
        openapi2mcp lint --list-rules

    Exit status: 0 no finding at --fail-on or above, 1 findings, 2 bad input.
    """

    def run() -> None:
        from openapi2mcp.authoring import RULES, LintOptions, Severity, load_project, run_lint, to_sarif

        if list_rules:
            _print_rules(RULES)
            return
        if spec is None:
            from openapi2mcp.errors import InputError

            raise InputError.at("give the SPEC the overlay is for", hint="openapi2mcp lint SPEC --overlay FILE")
        chosen = [c.value for c in client or []]
        if "all" in chosen:
            from openapi2mcp.authoring import PROFILES

            chosen = list(PROFILES)
        project = load_project(spec, list(overlay or []), _load_options(allow_remote_refs, ref_root, fetch_timeout))
        options = LintOptions(clients=tuple(dict.fromkeys(chosen)), max_tokens=max_tokens,
                              max_response_bytes=max_response_bytes, server_name=server_name)
        report = run_lint(project, options)
        fmt = Format.json if as_json else output_format
        if fmt is Format.json:
            _write(json.dumps(report.to_dict(), indent=2, ensure_ascii=False), output)
        elif fmt is Format.sarif:
            _write(json.dumps(to_sarif(report), indent=2, ensure_ascii=False), output)
        elif output is not None and str(output) != "-":
            _write(lint_text(report), output)
        else:
            console = _console()
            if console is None:
                _write(lint_text(report), None)
            else:
                _lint_rich(report, console)
        threshold = None if fail_on is FailOn.never else Severity(fail_on.value)
        if report.failed(threshold):
            raise typer.Exit(1)

    _run(run)


def lint_text(report: LintReport) -> str:
    """The plain report: one line per finding (file:line:col: id severity message), its fix, a summary."""
    lines = []
    for f in report.active:
        client = f" [{f.client}]" if f.client else ""
        lines.append(f"{f.where or report.overlay}: {f.rule.id} {f.severity.value}{client}: {f.message}")
        lines.append(f"    fix: {f.fix or f.rule.fix}")
    lines.append(_lint_summary(report))
    return "\n".join(lines)


def _lint_summary(report: LintReport) -> str:
    c = report.counts()
    parts = [f"{c['error']} error(s)", f"{c['warning']} warning(s)"] + ([f"{c['note']} note(s)"] if c["note"] else [])
    if c["suppressed"]:
        parts.append(f"{c['suppressed']} suppressed")
    clients = f"; clients: {', '.join(report.options.clients)}" if report.options.clients else ""
    return f"{report.overlay}: {report.tools} tool(s), " + ", ".join(parts) + clients


_STYLE = {"error": "bold red", "warning": "yellow", "note": "cyan"}


def _lint_rich(report: LintReport, console: Console) -> None:
    from rich.table import Table
    from rich.text import Text

    if report.active:
        table = Table(show_header=True, header_style="bold", box=None, pad_edge=False, expand=False)
        for name in ("where", "rule", "level", "finding"):
            table.add_column(name, overflow="fold")
        for f in report.active:
            finding = Text(f.message + (f" [{f.client}]" if f.client else ""))
            finding.append(f"\nfix: {f.fix or f.rule.fix}", style="dim")
            table.add_row(f.where or report.overlay, f.rule.id, Text(f.severity.value, style=_STYLE[f.severity.value]),
                          finding)
        console.print(table)
    worst = max((f.severity.rank for f in report.active), default=-1)
    style = "bold red" if worst >= 2 else "yellow" if worst == 1 else "green"
    console.print(Text(_lint_summary(report), style=style))


def _print_rules(rules: Any) -> None:
    for r in rules:
        scope = " (with --client)" if r.clients else ""
        typer.echo(f"{r.id} {r.name} [{r.severity.value}]{scope}\n    why: {r.why}\n    fix: {r.fix}")


# ============================================================================ diff


class DiffFailOn(StrEnum):
    breaking = "breaking"
    any = "any"
    never = "never"


def diff(
    old: Annotated[str, typer.Argument(help="The spec the overlay was written for (or a compiled Manifest).")],
    new: Annotated[str, typer.Argument(help="The new spec (or a Manifest, when OLD is one).")],
    overlay: OverlayOpt = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
    fail_on: Annotated[
        DiffFailOn, typer.Option(help="Exit 1 on breaking changes (default), on any change, or never.")
    ] = DiffFailOn.breaking,
    show_unchanged: Annotated[bool, typer.Option("--show-unchanged", help="List unchanged tools too.")] = False,
    allow_remote_refs: RemoteOpt = None,
    ref_root: RefRootOpt = None,
    fetch_timeout: FetchOpt = 120.0,
) -> None:
    """What a new version of the spec does to the served tools: unchanged, compatible or breaking, and why.

    Both specs are compiled with the same overlays. Breaking: a tool or action gone, an overlay
    entry that no longer resolves, a new required argument, a type narrowed, an enum value
    removed, a tighter bound, an output field removed or retyped, risk, confirmation, dry run or
    permissions changed. Two Manifests (`openapi2mcp compile -o`) compare the same way.

    \b
    Examples:
        openapi2mcp diff api-v1.json api-v2.json -O overlay.yaml
        openapi2mcp diff api-v1.json api-v2.json -O overlay.yaml --json
        openapi2mcp diff old.manifest.json new.manifest.json
        openapi2mcp diff api-v1.json api-v2.json -O overlay.yaml --fail-on breaking   # in CI

    Exit status: 0 nothing at --fail-on, 1 breaking changes (or any, with --fail-on any), 2 bad input.
    """

    def run() -> None:
        from openapi2mcp.authoring import diff_manifests, diff_specs, is_manifest, read_manifest
        from openapi2mcp.errors import InputError

        manifests = [is_manifest(old), is_manifest(new)]
        if any(manifests):
            if not all(manifests):
                raise InputError.at("give two specs (with --overlay) or two Manifests, not one of each",
                                    hint=f"{old if manifests[0] else new} is a Manifest")
            if overlay:
                raise InputError.at("two Manifests are compared as they are: --overlay does not apply",
                                    hint="compare the specs with --overlay instead, or leave --overlay out")
            report = diff_manifests(read_manifest(old), read_manifest(new), old, new)
        else:
            report = diff_specs(old, new, [str(p) for p in overlay or []],
                                _load_options(allow_remote_refs, ref_root, fetch_timeout))
        if as_json:
            _write(json.dumps(report.to_dict(), indent=2, ensure_ascii=False), None)
        else:
            console = _console()
            if console is None:
                _write(diff_text(report, show_unchanged), None)
            else:
                _diff_rich(report, console, show_unchanged)
        if (fail_on is DiffFailOn.breaking and report.status == "breaking") or (
            fail_on is DiffFailOn.any and report.status != "unchanged"
        ):
            raise typer.Exit(1)

    _run(run)


def _short(sha: str) -> str:
    return sha.removeprefix("sha256:")[:12]


def diff_text(report: DiffReport, show_unchanged: bool = False) -> str:
    lines = [f"{report.old.label} (sha256 {_short(report.old.sha256)}) -> {report.new.label} "
             f"(sha256 {_short(report.new.sha256)})"]
    unchanged = []
    for t in report.tools:
        if t.status == "unchanged" and not show_unchanged:
            unchanged.append(t.name)
            continue
        lines.append(f"{t.status:<10}  {t.name}" + (f"  ({t.location})" if t.location else ""))
        lines += [f"    - {c}" for c in t.changes]
    for p in report.problems:
        lines.append(f"breaking    {p.location}: {p.message}")
    lines.append(_diff_summary(report) + (f" (unchanged: {', '.join(unchanged)})" if unchanged else ""))
    if report.pin:
        lines.append(f"pin: {report.pin}")
    return "\n".join(lines)


def _diff_summary(report: DiffReport) -> str:
    c = report.counts()
    problems = f", {len(report.problems)} overlay problem(s)" if report.problems else ""
    return (f"{len(report.tools)} tool(s): {c['breaking']} breaking, {c['compatible']} compatible, "
            f"{c['unchanged']} unchanged{problems}")


def _diff_rich(report: DiffReport, console: Console, show_unchanged: bool) -> None:
    from rich.table import Table
    from rich.text import Text

    style = {"breaking": "bold red", "compatible": "yellow", "unchanged": "green"}
    console.print(Text(f"{report.old.label} (sha256 {_short(report.old.sha256)}) → {report.new.label} "
                       f"(sha256 {_short(report.new.sha256)})", style="bold"))
    table = Table(show_header=True, header_style="bold", box=None, pad_edge=False)
    for name in ("status", "tool", "changes"):
        table.add_column(name, overflow="fold")
    for t in report.tools:
        if t.status == "unchanged" and not show_unchanged:
            continue
        changes = Text("\n".join(str(c) for c in t.changes))
        label = Text(t.name) + (Text(f"\n{t.location}", style="dim") if t.location else Text(""))
        table.add_row(Text(t.status, style=style[t.status]), label, changes)
    for p in report.problems:
        table.add_row(Text("breaking", style=style["breaking"]), Text(str(p.location), style="dim"), p.message)
    if table.row_count:
        console.print(table)
    console.print(Text(_diff_summary(report), style=style[report.status]))
    if report.pin:
        console.print(Text(f"pin: {report.pin}", style="cyan"))


# ============================================================================ init


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
        from openapi2mcp.compiler import load_with_overlays

        target = None if output == "-" else Path(output)
        if target is not None and target.exists() and not force:
            fail(f"error: {target} exists; pass --force to replace it, or -o to write another file")
        if target is not None and target.is_dir():
            fail(f"error: {target} is a folder; give a file name, e.g. -o {target / 'overlay.yaml'}")
        loaded = load_with_overlays(spec, options=_load_options(allow_remote_refs, ref_root, fetch_timeout, strict))
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
