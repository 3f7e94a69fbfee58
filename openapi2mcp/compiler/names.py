"""Tool names every client accepts.

Claude Desktop and claude.ai refuse the whole tool list when one name fails
`^[a-zA-Z0-9_-]{1,64}$`; OpenAI-compatible APIs and several agent SDKs apply the same rule, and
Claude Code calls a tool `mcp__<server>__<tool>` and fails past 64 characters. Authors write the
seed's `domain.verb` in overlays, so the name a client sees (the *served* name) is the written
one with every `.` as `_`, unless the overlay says `server: {tool_names: as_written}`.

The written name stays in the Manifest (`ToolSpec.written_name`, when it differs) for people;
everything at run time (tools/list, tools/call, audit, errors, logs, rate-limit buckets) uses the
served name. Overlay prose that mentions a tool by its written name ("read it with notes.read")
is rewritten to the served name, so the model is never told a name that does not exist.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping
from typing import Any, TypeVar

from pydantic import BaseModel

from openapi2mcp.compiler.model import Operation
from openapi2mcp.errors import InputError, Problem
from openapi2mcp.manifest import ToolSpec
from openapi2mcp.overlay import OverlayFile, ToolOverlay

CLIENT_NAME_PATTERN = r"^[a-zA-Z0-9_-]{1,64}$"
CLIENT_NAME = re.compile(CLIENT_NAME_PATTERN)
CLAUDE_CODE_LIMIT = 64  # characters of `mcp__<server>__<tool>`
_NOT_NAME = re.compile(r"[^a-zA-Z0-9_-]")

# Overlay fields that hold prose for the model or the user: mentions of tools are rewritten there.
# Everything else (names, operations, JMESPath, fixed values, patterns) is left as written.
_PROSE_FIELDS = frozenset({"description", "instructions", "text", "message", "title", "side_effects"})

M = TypeVar("M", bound=BaseModel)


def served_name(written: str, mode: str = "safe") -> str:
    """The name clients see: `notes.search` -> `notes_search` (mode `as_written`: unchanged)."""
    return written if mode == "as_written" else written.replace(".", "_")


def served_names(overlay: ToolOverlay, doc: OverlayFile) -> dict[str, str]:
    """Written name -> served name for every overlay tool; two tools served alike are an error."""
    mode = overlay.server.tool_names
    out: dict[str, str] = {}
    first: dict[str, int] = {}  # served name -> index of the first tool served so
    problems: list[Problem] = []
    for i, tdef in enumerate(overlay.tools):
        served = served_name(tdef.name, mode)
        out[tdef.name] = served
        j = first.setdefault(served, i)
        other = overlay.tools[j].name
        if j != i and other != tdef.name:  # the same written name twice is reported as such later
            there = doc.location(("tools", j, "name"))
            line = f"{there.file}:{there.line}" if there.line else str(there.file)
            problems.append(doc.problem(
                ("tools", i, "name"),
                f"tools {other!r} ({line}) and {tdef.name!r} would both be served as {served!r} "
                "(clients see every '.' as '_')",
                hint="rename one of them, or set `server: {tool_names: as_written}` if every client of this "
                "server accepts dots",
            ))
    if problems:
        raise InputError(problems, title=f"{doc.path}: tool names collide")
    return out


def served_tool(tool: ToolSpec, renames: Mapping[str, str]) -> ToolSpec:
    """The tool under its served name, its written name kept when they differ."""
    served = renames.get(tool.name, tool.name)
    return tool if served == tool.name else tool.model_copy(update={"name": served, "written_name": tool.name})


def check_unique_names(tools: list[ToolSpec], doc: OverlayFile) -> None:
    """Two overlay tools of one name are an error at the second."""
    seen: dict[str, int] = {}
    for i, t in enumerate(tools):
        if t.name in seen:
            raise InputError(doc.problem(("tools", i, "name"), f"tool name {t.name!r} is used twice",
                                         hint="tool names must be unique"))
        seen[t.name] = i


def mention_rewriter(renames: Mapping[str, str]) -> re.Pattern[str] | None:
    """A pattern that finds whole-token mentions of the written names that change (None: none do).

    A mention stands alone: not inside a longer name, a dotted path, a URL or an e-mail address
    (`notes.read` is found in "use notes.read." and "`notes.read`", not in "notes.readme",
    "x.notes.read", "https://host/notes.read" or "notes.read/all").
    """
    changed = sorted((w for w, s in renames.items() if w != s), key=len, reverse=True)
    if not changed:
        return None
    names = "|".join(re.escape(w) for w in changed)
    return re.compile(rf"(?<![\w.@/:-])(?:{names})(?![\w/-])(?!\.\w)")


def rewrite_mentions(text: str, renames: Mapping[str, str], pattern: re.Pattern[str] | None = None) -> str:
    """`text` with every mention of a written tool name replaced by its served name."""
    pattern = pattern if pattern is not None else mention_rewriter(renames)
    if pattern is None:
        return text
    return pattern.sub(lambda m: renames[m.group(0)], text)


def with_served_mentions(overlay: ToolOverlay, renames: Mapping[str, str]) -> ToolOverlay:
    """The overlay with its prose (descriptions, instructions, messages, prompt texts) naming served tools."""
    pattern = mention_rewriter(renames)
    if pattern is None:
        return overlay
    return _rewrite_model(overlay, renames, pattern)


def _rewrite_model(model: M, renames: Mapping[str, str], pattern: re.Pattern[str]) -> M:
    update: dict[str, Any] = {}
    for field in type(model).model_fields:
        value = getattr(model, field)
        if field in _PROSE_FIELDS:
            new = _rewrite_prose(value, renames, pattern)
        else:
            new = _rewrite_nested(value, renames, pattern)
        if new is not value:
            update[field] = new
    return model.model_copy(update=update) if update else model


def _rewrite_prose(value: Any, renames: Mapping[str, str], pattern: re.Pattern[str]) -> Any:
    if isinstance(value, str):
        new = rewrite_mentions(value, renames, pattern)
        return new if new != value else value
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        items = [_rewrite_prose(v, renames, pattern) for v in value]
        return items if any(a is not b for a, b in zip(items, value, strict=True)) else value
    return _rewrite_nested(value, renames, pattern)


def _rewrite_nested(value: Any, renames: Mapping[str, str], pattern: re.Pattern[str]) -> Any:
    """Recurse into overlay models only: plain data (fixed values, schemas) is sent as written."""
    if isinstance(value, BaseModel):
        return _rewrite_model(value, renames, pattern)
    if isinstance(value, list) and any(isinstance(v, BaseModel) for v in value):
        items = [_rewrite_nested(v, renames, pattern) for v in value]
        return items if any(a is not b for a, b in zip(items, value, strict=True)) else value
    if isinstance(value, dict) and any(isinstance(v, BaseModel) for v in value.values()):
        mapped = {k: _rewrite_nested(v, renames, pattern) for k, v in value.items()}
        return mapped if any(mapped[k] is not v for k, v in value.items()) else value
    return value


# ----------------------------------------------------------------------------- raw tools and checks


def safe_name_base(text: str) -> str:
    """`text` as a client-safe name stem: runs of other characters (`.`, `/`, spaces) become one `_`."""
    return re.sub(r"_{2,}", "_", _NOT_NAME.sub("_", text)).strip("_-")


def raw_tool_names(ops: list[Operation], taken: set[str]) -> list[str]:
    """Client-safe, unique, deterministic tool names (CLIENT_NAME) for raw tools, from operation ids."""
    names = []
    used = set(taken)
    for op in ops:
        base = op.id if op.id != op.key else f"{op.method.lower()}_{op.path}"
        base = safe_name_base(base) or "operation"
        if len(base) > 64:
            base = base[:55] + "_" + hashlib.sha1(op.key.encode()).hexdigest()[:8]
        name, n = base, 2
        while name in used:
            suffix = f"_{n}"
            name, n = base[: 64 - len(suffix)] + suffix, n + 1
        used.add(name)
        names.append(name)
    return names


def claude_code_name(server: str, tool: str) -> str:
    """The name Claude Code gives a tool: `mcp__<server>__<tool>`, other characters as `_`."""
    return f"mcp__{_NOT_NAME.sub('_', server)}__{_NOT_NAME.sub('_', tool)}"


def name_warnings(server: str, tools: Iterable[str]) -> list[str]:
    """What `inspect` says about names some clients refuse (one line per problem)."""
    out = []
    for name in tools:
        if not CLIENT_NAME.match(name):
            out.append(f"tool {name!r} does not match {CLIENT_NAME_PATTERN}: Claude Desktop, claude.ai and "
                       "OpenAI-compatible clients refuse the whole tool list (drop `tool_names: as_written`)")
        full = claude_code_name(server, name)
        if len(full) > CLAUDE_CODE_LIMIT:
            out.append(f"tool {name!r}: Claude Code calls it {full!r}, {len(full)} characters, over its limit of "
                       f"{CLAUDE_CODE_LIMIT}; shorten the tool name or the server name (the key in the client's "
                       "configuration)")
    return out
