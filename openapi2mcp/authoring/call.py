"""`openapi2mcp call`: one tool call exactly as an MCP client makes it, without writing a client.

    target: a Manifest served in process (openapi2mcp.testing.connect: the SDK Client in memory)
            or a running server's URL (the SDK's Streamable HTTP client, with a bearer token)
      -> tools/list (every page): the tool, or InputError with a did-you-mean
      -> the arguments from the words (callargs.py), typed by its inputSchema
      -> the schema check the server makes (runtime.argument_error): InputError naming each field
      -> --dry-run: dryRun: true, for a tool whose schema has it
      -> tools/call; a confirmation the server asks for goes to `confirm` (the person at the keyboard):
         2025-11-25 an elicitation/create in the middle of the call, 2026-07-28 an input-required
         result the SDK Client answers and retries (both reach the Client's elicitation callback)
      -> Outcome: the CallToolResult as the client got it, and what was asked

Nothing here prints: cli/call.py shows the outcome. The bearer token only goes into the
Authorization header; the upstream's secrets stay in the Runtime (and out of results: docs/safety.md).
"""

from __future__ import annotations

import contextlib
import os
import secrets
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import mcp_types as types

from openapi2mcp.authoring.callargs import parse_arguments
from openapi2mcp.errors import InputError, did_you_mean
from openapi2mcp.manifest import DRY_RUN_ARG

if TYPE_CHECKING:
    from mcp import Client

    from openapi2mcp.manifest import Manifest

SIGNING_KEY_VAR: Final = "OPENAPI2MCP_SIGNING_KEY"  # runtime/signing.py's: the key of tokens and states
ERAS: Final = {"auto": "auto", "2025-11-25": "legacy", "2026-07-28": "2026-07-28"}  # --era -> the SDK Client's mode


@dataclass(frozen=True)
class Target:
    """Where the call goes: a Manifest served here, or the MCP endpoint of a running server."""

    manifest: Manifest | None = None
    url: str | None = None
    token: str | None = None  # the bearer token for `url` (only ever sent in the Authorization header)
    era: str = "auto"
    environ: Mapping[str, str] | None = None  # the in-process Runtime's ${VAR}s (None: os.environ)
    scopes: frozenset[str] | None = None  # the in-process caller's scopes (None: every scope)
    timeout: float | None = None  # seconds one MCP request may take


@dataclass(frozen=True)
class Question:
    """A confirmation the server asked for: its text, exactly, and whether this command can answer it."""

    message: str
    field: str | None  # the one boolean field to set (openapi2mcp's `confirm`); None: a form this cannot fill
    mode: str = "form"
    url: str | None = None


@dataclass(frozen=True)
class Answer:
    accept: bool
    why: str  # "confirmed at the terminal", "--yes", "declined at the terminal", "no terminal", ...


Confirm = Callable[[Question], Awaitable[Answer]]


@dataclass
class Outcome:
    """One call as the client saw it."""

    tool: str
    arguments: dict[str, Any]
    result: types.CallToolResult
    protocol_version: str
    asked: list[tuple[Question, Answer]] = field(default_factory=list)

    @property
    def is_error(self) -> bool:
        return bool(self.result.is_error)


async def call_tool(target: Target, name: str | None, words: Sequence[str], confirm: Confirm, *,
                    dry_run: bool = False, stdin: str | None = None) -> Outcome:
    """List, check and call one tool; InputError for an unknown tool or arguments its schema refuses."""
    from openapi2mcp.runtime import argument_error

    asked: list[tuple[Question, Answer]] = []

    async def elicit(ctx: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        question = _question(params)
        answer = await confirm(question)
        asked.append((question, answer))
        if not answer.accept or question.field is None:
            return types.ElicitResult(action="decline")
        return types.ElicitResult(action="accept", content={question.field: True})

    async with _session(target, elicit) as client:
        tools = await _list(client)
        tool = _find(tools, name)
        schema = dict(tool.input_schema or {})
        arguments = parse_arguments(words, schema, stdin=stdin)
        if dry_run:
            if DRY_RUN_ARG not in (schema.get("properties") or {}):
                raise InputError.at(f"{tool.name} has no dry run (its inputSchema has no {DRY_RUN_ARG} argument)",
                                    hint="leave out --dry-run; docs/safety.md says which tools have one")
            arguments[DRY_RUN_ARG] = True
        refused = argument_error(schema, arguments)
        if refused is not None:
            raise InputError.at(f"{tool.name}: the arguments do not fit its inputSchema: {refused.message}",
                                hint=_argument_hint(schema))
        result = await client.call_tool(tool.name, arguments)
        return Outcome(tool.name, arguments, result, client.protocol_version, asked)


@contextlib.asynccontextmanager
async def _session(target: Target, elicit: Any) -> AsyncIterator[Client]:
    from mcp import Client

    mode = ERAS[target.era]
    if target.manifest is not None:
        from openapi2mcp.runtime import Runtime, RuntimeOptions, local_caller
        from openapi2mcp.testing import connect

        environ = dict(os.environ if target.environ is None else target.environ)
        environ.setdefault(SIGNING_KEY_VAR, call_key())
        runtime = Runtime(target.manifest, RuntimeOptions(environ=environ, local=local_caller("memory", target.scopes)))
        try:
            async with connect(runtime, mode=mode, elicitation_callback=elicit,
                               read_timeout_seconds=target.timeout) as client:
                yield client
        finally:
            await runtime.aclose()
        return
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    assert target.url is not None
    headers = {"Authorization": f"Bearer {target.token}"} if target.token else None
    refused: list[int] = []

    async def watch(response: Any) -> None:  # the SDK reports a 401 as a bare -32603: name it ourselves
        if response.status_code in (401, 403):
            refused.append(response.status_code)

    try:
        async with create_mcp_http_client(headers=headers) as http:
            http.event_hooks["response"].append(watch)
            async with Client(streamable_http_client(target.url, http_client=http), mode=mode,
                              elicitation_callback=elicit, read_timeout_seconds=target.timeout) as client:
                yield client
    except Exception:
        if refused:
            why = ("needs a valid bearer token (--token or $OPENAPI2MCP_CALL_TOKEN)" if refused[0] == 401
                   else "refused this token (HTTP 403: it lacks a scope the server needs)")
            raise InputError.at(f"{target.url}: the server {why} (HTTP {refused[0]})") from None
        raise


def call_key(home: Path | None = None) -> str:
    """The signing key of calls in process, kept per user (0600) so that one `call --dry-run`'s token, or a
    list cursor, still holds in the next `call`: each is its own process. OPENAPI2MCP_SIGNING_KEY wins."""
    base = home or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    path = base / "openapi2mcp" / "call-signing-key"
    try:
        key = path.read_text(encoding="ascii").strip()
        if len(key) >= 32:
            return key
    except (OSError, UnicodeDecodeError):
        pass
    key = secrets.token_urlsafe(32)
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "w", encoding="ascii") as out:
            out.write(key + "\n")
    except OSError:  # a read-only home: this call's tokens hold only for this call
        pass
    return key


async def _list(client: Client) -> list[types.Tool]:
    tools: list[types.Tool] = []
    cursor: str | None = None
    for _ in range(1000):  # a server whose cursors never end cannot keep us here
        page = await client.list_tools(cursor=cursor)
        tools += page.tools
        cursor = page.next_cursor
        if not cursor:
            break
    return tools


def _find(tools: list[types.Tool], name: str | None) -> types.Tool:
    names = [t.name for t in tools]
    listed = ", ".join(names[:30]) + (f", ... ({len(names)} in all)" if len(names) > 30 else "")
    if not name:
        raise InputError.at("give the TOOL to call", hint=f"one of: {listed}" if names else "the server lists none")
    for tool in tools:
        if tool.name == name:
            return tool
    close = did_you_mean(name, names)
    raise InputError.at(f"unknown tool {name!r}" + (f": {close}" if close else ""),
                        hint=f"the tools: {listed}" if names else "the server lists no tools")


def _argument_hint(schema: Mapping[str, Any]) -> str:
    props = schema.get("properties") or {}
    required = set(schema.get("required") or [])
    if not props:
        return "this tool takes no arguments"
    listed = ", ".join(k + ("*" if k in required else "") for k in props)
    return f"its arguments (* required): {listed}; openapi2mcp inspect shows their schemas"


def _question(params: types.ElicitRequestParams) -> Question:
    """What the server asks, and the one boolean a yes sets (openapi2mcp asks `confirm`)."""
    if isinstance(params, types.ElicitRequestURLParams):
        return Question(params.message, None, mode="url", url=params.url)
    schema = params.requested_schema if isinstance(params, types.ElicitRequestFormParams) else {}
    props = (schema or {}).get("properties") or {}
    booleans = [k for k, v in props.items() if isinstance(v, dict) and v.get("type") == "boolean"]
    single = booleans[0] if len(props) == 1 and len(booleans) == 1 else None
    return Question(params.message, single)
