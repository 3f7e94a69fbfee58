"""`openapi2mcp call`: the command, the person at the keyboard who confirms, and how a result is shown.

The call itself is authoring/call.py (an SDK Client in process or over Streamable HTTP). Here:
the words become a Target, confirmations are asked on the terminal (/dev/tty: the answer comes
from the person, never from piped input), and the outcome is printed: rich on a terminal, plain
text when piped, the CallToolResult's JSON with --json. Exit status: 0 ok, 1 the tool returned an
error (a declined confirmation included), 2 bad input.
"""

from __future__ import annotations

import io
import json
import os
import re
import sys
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Final, TextIO

import typer

from openapi2mcp.cli.guard import guarded

if TYPE_CHECKING:
    from rich.console import Console

    from openapi2mcp.authoring import Answer, Outcome, Question, Target

CALL_EXAMPLES: Final = """\b
Examples:
  openapi2mcp call api.yaml -O overlay.yaml notes_search keyword=mcp limit=3
  openapi2mcp call api.yaml -O overlay.yaml tasks_create title="Read the spec" source_note=ai-agent/mcp-basics.md
  openapi2mcp call api.yaml -O overlay.yaml pets_find '{"status": "available", "tags": ["dog"]}'
  echo '{"keyword": "mcp"}' | openapi2mcp call api.yaml -O overlay.yaml notes_search - --json | jq .
  openapi2mcp call api.yaml -O overlay.yaml emails_bulk_send templateId=t1 segmentId=s1 --dry-run
  openapi2mcp call --manifest manifest.json files_delete fileId=f_1 --yes
  openapi2mcp call --url http://127.0.0.1:8000/mcp --era 2025-11-25 notes_read path=inbox/todo.md

\b
Arguments (httpie's rules): key=value is typed by the tool's inputSchema (a string where the
schema takes one; numbers, booleans, null; JSON for objects; array items one per key=value, or
JSON); key:=JSON is any JSON value as written; key=@FILE a file's text, key:=@FILE its JSON; a
JSON object (or - for stdin) may come first. A tool that needs confirmation asks on the terminal
(y/N); --yes approves; with no terminal and no --yes the call is declined. docs/authoring.md.

\b
Exit status: 0 ok, 1 the tool returned an error, 2 bad input (unknown tool, bad arguments).
"""


class Era(StrEnum):
    auto = "auto"
    legacy = "2025-11-25"
    modern = "2026-07-28"


def register(app: typer.Typer) -> None:
    app.command("call", epilog=CALL_EXAMPLES, no_args_is_help=True)(call)


def call(
    words: Annotated[
        list[str] | None,
        typer.Argument(metavar="[SPEC] TOOL [JSON | - | key=value ...]", show_default=False,
                       help="The spec (unless --manifest or --url), the tool, its arguments."),
    ] = None,
    overlay: Annotated[
        list[Path] | None,
        typer.Option("--overlay", "-O", help="The tool overlay (and OAI Overlays), as for serve; repeatable."),
    ] = None,
    manifest: Annotated[
        Path | None, typer.Option("--manifest", "-m", help="Call a tool of a compiled Manifest (no spec).")
    ] = None,
    url: Annotated[
        str | None, typer.Option("--url", help="Call a running server's MCP endpoint, e.g. http://127.0.0.1:8000/mcp.")
    ] = None,
    token: Annotated[
        str | None,
        typer.Option("--token", envvar="OPENAPI2MCP_CALL_TOKEN", show_envvar=False,
                     help="With --url: the bearer token (better: $OPENAPI2MCP_CALL_TOKEN, off the command line)."),
    ] = None,
    era: Annotated[
        Era, typer.Option("--era", help="The protocol revision: auto (what the server offers), 2025-11-25 or "
                          "2026-07-28.")
    ] = Era.auto,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Approve the confirmation the tool asks for.")] = False,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Ask for the tool's dry run (dryRun: true): what it would send.")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the CallToolResult's JSON and nothing else.")] = False,
    base_url: Annotated[
        str | None, typer.Option("--base-url", help="In process: the upstream URL (as for serve).")
    ] = None,
    scopes: Annotated[
        str | None, typer.Option("--scopes", help='In process: call with only these scopes, e.g. "notes:read".')
    ] = None,
    timeout: Annotated[
        float, typer.Option("--timeout", min=1, help="Seconds one MCP request may take (a confirmation waits "
                            "for the person up to the server's limit).")
    ] = 900.0,
    strict: Annotated[bool, typer.Option("--strict", help="Validate the spec fully (as for compile).")] = False,
    allow_remote_refs: Annotated[
        list[str] | None, typer.Option("--allow-remote-refs", help="Allow $refs to this origin (as for compile).")
    ] = None,
    ref_root: Annotated[Path | None, typer.Option("--ref-root", help="Folder that file $refs may reach.")] = None,
    fetch_timeout: Annotated[
        float, typer.Option("--fetch-timeout", min=1, help="Seconds a spec given by URL may take.")
    ] = 120.0,
) -> None:
    """Call one tool as an MCP client does, and show what it gets: the result, provenance, the error body.

    In process (SPEC --overlay F, or --manifest M: the same server `serve` runs, in memory) or
    against a running server (--url, --token), in either protocol era.
    """

    def run() -> None:
        import anyio

        from openapi2mcp.authoring import call_tool

        target, name, rest = _target(list(words or []), overlay, manifest, url, token, era.value, base_url, scopes,
                                     timeout, strict, allow_remote_refs, ref_root, fetch_timeout)
        stdin = sys.stdin.read() if rest[:1] == ["-"] else None
        ask = Terminal(yes=yes)
        outcome = _reachable(target, lambda: anyio.run(lambda: call_tool(target, name, rest, ask, dry_run=dry_run,
                                                                          stdin=stdin)))
        show(outcome, as_json=as_json)
        if outcome.is_error:
            raise typer.Exit(1)

    guarded(run)


def _target(words: list[str], overlay: list[Path] | None, manifest: Path | None, url: str | None,
            token: str | None, era: str, base_url: str | None, scopes: str | None, timeout: float, strict: bool,
            allow_remote_refs: list[str] | None, ref_root: Path | None,
            fetch_timeout: float) -> tuple[Target, str, list[str]]:
    """(Target, tool name, argument words) from the command line; InputError when the sources clash."""
    from openapi2mcp.authoring import Target
    from openapi2mcp.errors import InputError

    chosen = [what for what, given in (("--manifest", manifest), ("--url", url)) if given]
    if len(chosen) > 1 or (chosen and overlay):
        raise InputError.at("give one of SPEC --overlay F, --manifest M or --url U",
                            hint="they name three different servers to call")
    in_process = url is None
    if token and in_process:
        raise InputError.at("--token is for --url (a running server); in process the call is the local user's")
    if not in_process and (base_url or scopes):
        raise InputError.at("--base-url and --scopes are for a call in process; a running server has its own")
    if chosen:
        name, rest = (words[0] if words else ""), words[1:]
    else:
        if not words:
            raise InputError.at("give SPEC --overlay FILE TOOL (or --manifest M TOOL, or --url U TOOL)")
        name, rest = (words[1] if len(words) > 1 else ""), words[2:]
    environ = dict(os.environ)
    if base_url:
        from openapi2mcp.manifest import BASE_URL_VAR

        environ[BASE_URL_VAR] = base_url
    allowed = _scopes(scopes)
    if url is not None:
        return Target(url=url, token=token, era=era, timeout=timeout), name, rest
    if manifest is not None:
        from openapi2mcp.manifest import Manifest

        try:
            m = Manifest.read(manifest)
        except FileNotFoundError:
            raise InputError.at(f"manifest not found: {manifest}") from None
        except ValueError as e:
            raise InputError.at(f"{manifest}: not a usable manifest: {str(e).splitlines()[0]}") from None
    else:
        from openapi2mcp.authoring import LoadOptions, load_project

        options = LoadOptions(allow_remote_refs=tuple(allow_remote_refs or ()),
                              ref_root=str(ref_root) if ref_root else None, fetch_timeout=fetch_timeout, strict=strict)
        m = load_project(words[0], list(overlay or []), options).manifest
    return Target(manifest=m, era=era, environ=environ, scopes=allowed, timeout=timeout), name, rest


def _scopes(text: str | None) -> frozenset[str] | None:
    if text is None:
        return None
    from openapi2mcp.serving import local_scopes
    from openapi2mcp.upstream import ConfigError

    try:
        return local_scopes(text)
    except ConfigError as e:
        from openapi2mcp.errors import InputError

        raise InputError.at(str(e).replace("/ OPENAPI2MCP_SCOPES", "")) from None


def _reachable(target: Any, body: Any) -> Outcome:
    """Run the call; a server that cannot be reached (or refuses the token) is bad input, said in one line."""
    import httpx2
    from mcp import MCPError

    from openapi2mcp.errors import InputError
    from openapi2mcp.runtime import leaves

    try:
        outcome: Outcome = body()
        return outcome
    except BaseException as e:
        if isinstance(e, InputError | KeyboardInterrupt | typer.Exit):
            raise
        found = leaves(e) if isinstance(e, BaseExceptionGroup) else [e]
        for leaf in found:
            if isinstance(leaf, InputError):
                raise leaf from None
            if isinstance(leaf, httpx2.HTTPStatusError):
                status = leaf.response.status_code
                why = {401: "needs a valid bearer token (--token or $OPENAPI2MCP_CALL_TOKEN)",
                       403: "refused this token", 404: "has no MCP endpoint there"}.get(status, "refused the request")
                raise InputError.at(f"{target.url}: the server {why} (HTTP {status})") from None
            if isinstance(leaf, httpx2.TransportError):
                raise InputError.at(f"{target.url}: cannot reach the server ({type(leaf).__name__}: {leaf})",
                                    hint="is `openapi2mcp serve --transport http` running there?") from None
            if isinstance(leaf, MCPError):
                raise InputError.at(f"the server refused the call: {leaf.error.message} "
                                    f"(JSON-RPC {leaf.code})") from None
        raise


# ============================================================================ confirmation


_CONTROL: Final = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def safe(text: str) -> str:
    """Text for a terminal: control characters (escape sequences) shown as \\uXXXX, line breaks kept.

    openapi2mcp's own confirmation texts never hold any (runtime/display.py escapes values); a
    server reached with --url might send some, which must not move the cursor or recolour the screen.
    """
    return _CONTROL.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


class Terminal:
    """The person at the keyboard, asked on the controlling terminal (/dev/tty), or --yes.

    The question is the server's text, exactly (control characters escaped), then `Go ahead? [y/N]`;
    only y or yes approves. No terminal (a pipeline without one, CI) and no --yes: declined.
    """

    def __init__(self, *, yes: bool, tty: str = "/dev/tty") -> None:
        self.yes = yes
        self.tty = tty

    async def __call__(self, question: Question) -> Answer:
        import anyio.to_thread

        from openapi2mcp.authoring import Answer

        if question.field is None:
            detail = f" (open {question.url})" if question.url else ""
            _note(f"the server asks for input this command cannot give{detail}:\n{safe(question.message)}")
            return Answer(False, "the server asked for a form this command cannot fill")
        if self.yes:
            _note(f"confirmation approved by --yes:\n{_indent(safe(question.message))}")
            return Answer(True, "approved by --yes")
        return await anyio.to_thread.run_sync(self._ask, question)

    def _ask(self, question: Question) -> Answer:
        from openapi2mcp.authoring import Answer

        try:  # as getpass opens it: read and write, never becoming our controlling terminal
            terminal = io.TextIOWrapper(io.FileIO(os.open(self.tty, os.O_RDWR | os.O_NOCTTY), "w+"),
                                        encoding="utf-8", errors="replace")
        except OSError:
            _note(f"the server asks to confirm:\n{_indent(safe(question.message))}\n"
                  "declined: there is no terminal to ask on; pass --yes to approve")
            return Answer(False, "no terminal to ask on")
        with terminal:
            terminal.write(f"{safe(question.message)}\nGo ahead? [y/N] ")
            terminal.flush()
            reply = terminal.readline().strip().lower()
        if reply in ("y", "yes"):
            return Answer(True, "confirmed at the terminal")
        _note("declined at the terminal: nothing was sent")
        return Answer(False, "declined at the terminal")


def _note(text: str) -> None:
    sys.stderr.write(f"openapi2mcp: {text}\n")
    sys.stderr.flush()


def _indent(text: str) -> str:
    return "\n".join("  " + line for line in text.splitlines())


# ============================================================================ the outcome


def show(outcome: Outcome, *, as_json: bool = False, out: TextIO | None = None) -> None:
    """Print the outcome: the result's JSON, rich panels on a terminal, or plain text."""
    stream = out or sys.stdout
    wire = outcome.result.model_dump(mode="json", by_alias=True, exclude_none=True)
    if as_json:
        stream.write(json.dumps(wire, indent=2, ensure_ascii=False) + "\n")
    elif stream.isatty():
        from rich.console import Console

        _rich(outcome, wire, Console(file=stream, highlight=False))
    else:
        stream.write(plain(outcome, wire))
    _hint_dry_run(outcome)


def _parts(outcome: Outcome, wire: dict[str, Any]) -> tuple[str, list[str], list[str], list[str]]:
    """(headline, text blocks other than the JSON mirror, other content, provenance lines)."""
    from openapi2mcp.result import ERROR_KEY, REQUESTS_KEY, TRACE_KEY, error_of

    result = outcome.result
    meta = result.meta or {}
    trace = meta.get(TRACE_KEY)
    body = error_of(result) or {}
    if result.is_error:
        code = body.get("code", "error")
        facts = ["retryable" if body.get("retryable") else "not retryable"]
        facts += [f"field {body['field']}"] if body.get("field") else []
        facts += [f"upstream status {body['status']}"] if body.get("status") else []
        head = f"{outcome.tool}: error {code} ({', '.join(facts)})"
    else:
        head = f"{outcome.tool}: ok" + (" (dry run)" if _dry(outcome) else "")
    head += f"  [{outcome.protocol_version}" + (f", traceId {trace}]" if trace else "]")
    mirror = json.dumps(result.structured_content, ensure_ascii=False, separators=(",", ":")) \
        if result.structured_content is not None else None
    texts, others = [], []
    for block in wire.get("content") or []:
        kind = block.get("type")
        if kind == "text":
            text = block.get("text", "")
            if text == mirror or (result.is_error and _same_json(text, meta.get(ERROR_KEY))):
                continue
            if result.structured_content is not None and _same_json(text, result.structured_content):
                continue
            texts.append(text)
        elif kind == "resource_link":
            others.append(f"resource link: {block.get('uri')}" + (f" ({block['title']})" if block.get("title") else ""))
        elif kind in ("image", "audio"):
            others.append(f"{kind}: {block.get('mimeType')}, {len(block.get('data', '')) * 3 // 4:,} bytes")
        elif kind == "resource":
            resource = block.get("resource") or {}
            others.append(f"embedded resource: {resource.get('uri')} ({resource.get('mimeType')})")
        else:
            others.append(f"{kind} content")
    provenance = []
    for request in meta.get(REQUESTS_KEY) or []:
        if isinstance(request, dict):
            status = request.get("status")
            line = f"{request.get('method')} {request.get('url')} -> {status if status is not None else '-'}"
            line += f", {request['ms']} ms" if "ms" in request else ""
            line += " (retried)" if request.get("retried") else ""
            provenance.append(line)
    for key, label in (("openapi2mcp/truncated", "cut"), ("openapi2mcp/repairs", "repaired")):
        if meta.get(key):
            provenance.append(f"{label}: {json.dumps(meta[key], ensure_ascii=False)}")
    return head, texts, others, provenance


def _same_json(text: str, value: Any) -> bool:
    try:
        return value is not None and json.loads(text) == value
    except ValueError:
        return False


def _dry(outcome: Outcome) -> bool:
    content = outcome.result.structured_content
    return isinstance(content, dict) and content.get("dryRun") is True


def plain(outcome: Outcome, wire: dict[str, Any]) -> str:
    """The outcome as plain text (no colour), for pipes and files."""
    from openapi2mcp.result import error_of

    head, texts, others, provenance = _parts(outcome, wire)
    lines = [head]
    body = error_of(outcome.result)
    if outcome.result.is_error:
        message = (body or {}).get("message") or next(iter(texts), "")
        lines += [f"  {safe(message)}", "error body:", _json_block(body if body is not None else wire.get("content"))]
        texts = [t for t in texts if t != message]
    elif outcome.result.structured_content is not None:
        lines += ["structuredContent:", _json_block(outcome.result.structured_content)]
    if texts:
        lines += ["text:", *(_indent(safe(t)) for t in texts)]
    lines += others
    if provenance:
        lines += ["requests:", *(f"  {safe(p)}" for p in provenance)]
    lines += [f"confirmation: {answer.why}" for _, answer in outcome.asked]
    return "\n".join(lines) + "\n"


def _json_block(value: Any) -> str:
    return _indent(json.dumps(value, indent=2, ensure_ascii=False))


def _rich(outcome: Outcome, wire: dict[str, Any], console: Console) -> None:
    from rich.json import JSON
    from rich.panel import Panel
    from rich.text import Text

    from openapi2mcp.result import error_of

    head, texts, others, provenance = _parts(outcome, wire)
    failed = bool(outcome.result.is_error)
    style = "red" if failed else "green"
    console.print(Text(safe(head), style=f"bold {style}"))
    body = error_of(outcome.result)
    if failed:
        message = (body or {}).get("message") or next(iter(texts), "")
        console.print(Text("  " + safe(message), style="red"))
        console.print(Panel(JSON.from_data(body if body is not None else wire.get("content")), title="error body",
                            title_align="left", border_style="red", expand=False))
        texts = [t for t in texts if t != message]
    elif outcome.result.structured_content is not None:
        console.print(Panel(JSON.from_data(outcome.result.structured_content), title="structuredContent",
                            title_align="left", border_style=style, expand=False))
    for text in texts:
        console.print(Panel(Text(safe(text)), title="text", title_align="left", expand=False))
    for line in others:
        console.print(Text(safe(line), style="cyan"))
    for line in provenance:
        console.print(Text("  " + safe(line), style="dim"))
    for _, answer in outcome.asked:
        console.print(Text(f"confirmation: {answer.why}", style="yellow"))


def _hint_dry_run(outcome: Outcome) -> None:
    content = outcome.result.structured_content
    if isinstance(content, dict) and isinstance(content.get("dryRunToken"), str):
        until = f" (valid until {content['expiresAt']})" if content.get("expiresAt") else ""
        _note(f"dry run: to send it, call again without --dry-run and with the same arguments plus "
              f"dryRunToken={content['dryRunToken']}{until}")
