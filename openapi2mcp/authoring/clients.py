"""What each MCP client refuses of a tool list, as data (`openapi2mcp lint --client NAME`).

A client that refuses one tool often refuses the whole list (Claude's API answers 400 to the
request that carries it), or drops the tool without telling the model. Each profile says what its
client is known to refuse; docs/authoring.md cites where each limit comes from. The functions here
are pure: tool definitions in, refusals out; lint turns them into located findings.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import jsonschema

from openapi2mcp.compiler import CLAUDE_CODE_LIMIT, CLIENT_NAME_PATTERN, claude_code_name

_NOT_VSCODE = re.compile(r"[^a-z0-9_-]", re.I)
_NOT_GEMINI = re.compile(r"[^A-Za-z0-9_.:-]")


def _vscode_id(server: str, tool: str) -> str:
    """VS Code's id of an MCP tool: `mcp_` + the server label (lower case, at most 13 characters) + `_` + the
    tool (characters outside [a-z0-9_-] as `_`, dots too), cut to 64 (mcpServer.ts McpTool, McpPrefixGenerator)."""
    prefix = "mcp_" + re.sub(r"[^a-z0-9_.-]+", "_", server.lower())[:13] + "_"
    return (prefix + _NOT_VSCODE.sub("_", tool)).replace(".", "_")[:64]


def _gemini_cli_name(server: str, tool: str) -> str:
    """Gemini CLI's name of an MCP tool (mcp-tool.ts `generateValidName`): `mcp_<server>_<tool>`, other characters
    as `_`, a leading `_` if it starts with neither a letter nor `_`, past 63 the middle cut out as `...`."""
    name = _NOT_GEMINI.sub("_", f"mcp_{server}_{tool}")
    if not re.match(r"[A-Za-z_]", name):
        name = "_" + name
    return name if len(name) <= 63 else name[:30] + "..." + name[-30:]


def _cursor_name(server: str, tool: str) -> str:
    return server + tool  # Cursor counts the server name and the tool name together (no separator)


# Keywords a Gemini function declaration's `parameters` Schema has (the OpenAPI 3.0 subset of
# google.ai.generativelanguage.v1beta.Schema); any other is "Unknown name ...: Cannot find field".
GEMINI_KEYWORDS = frozenset({
    "type", "format", "title", "description", "nullable", "enum", "maxItems", "minItems", "properties", "required",
    "minProperties", "maxProperties", "minLength", "maxLength", "pattern", "example", "anyOf", "propertyOrdering",
    "default", "items", "minimum", "maximum",
})
GEMINI_STRING_FORMATS = frozenset({"enum", "date-time"})


@dataclass(frozen=True)
class ClientProfile:
    """What one client accepts of a tool (None / empty: no limit known)."""

    key: str
    title: str
    name_pattern: str | None = None  # the tool name, as served, must match
    name_rule: str = ""  # the same in words, for messages
    qualified: Callable[[str, str], str] | None = None  # (server, tool) -> the name the client forms
    qualified_limit: int | None = None  # ... and the most characters it may have
    rename: Callable[[str, str], str] | None = None  # the name the client rewrites a tool to (collisions)
    top_level: frozenset[str] = frozenset()  # keywords refused at the input schema's root
    object_root: bool = False  # the root must be `type: object` with `properties`
    keywords: frozenset[str] | None = None  # the only keywords allowed in input schemas
    stripped: frozenset[str] = frozenset()  # keywords the client removes itself before sending
    string_formats: frozenset[str] | None = None  # the only `format`s a string may have
    typed_properties: bool = False  # every property must say its `type` (or anyOf)
    string_enums: bool = False  # `enum` values must be strings
    single_type: bool = False  # `type` must be one name, not a list
    arg_pattern: str | None = None  # argument (property) names must match
    meta_schema: type[Any] | None = None  # input schemas must validate against this draft's meta-schema
    max_tools: int | None = None
    refusal: str = "refuses the tool"  # what the client does with a tool it does not accept
    sources: tuple[str, ...] = field(default=())


_ANTHROPIC_NAME = CLIENT_NAME_PATTERN  # ^[a-zA-Z0-9_-]{1,64}$ (compiler/names.py)
_COMBINATORS = frozenset({"anyOf", "oneOf", "allOf"})

PROFILES: dict[str, ClientProfile] = {p.key: p for p in (
    ClientProfile(
        "claude", "Claude (Desktop, claude.ai, the Messages API)",
        name_pattern=_ANTHROPIC_NAME, name_rule="1-64 of a-z A-Z 0-9 _ -",
        top_level=_COMBINATORS, refusal="refuses the whole tool list (HTTP 400)",
    ),
    ClientProfile(
        "claude-code", "Claude Code",
        name_pattern=_ANTHROPIC_NAME, name_rule="1-64 of a-z A-Z 0-9 _ -",
        qualified=claude_code_name, qualified_limit=CLAUDE_CODE_LIMIT,
        top_level=_COMBINATORS, refusal="fails every request that carries the tool list (HTTP 400)",
    ),
    ClientProfile(
        "openai", "OpenAI (Responses and Chat Completions function tools)",
        name_pattern=r"^[a-zA-Z0-9_-]{1,64}$", name_rule="1-64 of a-z A-Z 0-9 _ -",
        top_level=_COMBINATORS | {"enum", "not"}, object_root=True, max_tools=128,
        refusal="refuses the request (invalid_function_parameters)",
    ),
    ClientProfile(
        "cursor", "Cursor",
        name_pattern=r"^[A-Za-z0-9_]+$", name_rule="letters, digits and _ only",
        qualified=_cursor_name, qualified_limit=59, refusal="filters the tool out",
    ),
    ClientProfile(
        "vscode", "VS Code (GitHub Copilot agent mode)",
        rename=_vscode_id, meta_schema=jsonschema.Draft7Validator, max_tools=128,
        refusal="omits the tool (\"has tools with invalid parameters which will be omitted\")",
    ),
    ClientProfile(
        "gemini", "Gemini CLI",
        rename=_gemini_cli_name, meta_schema=jsonschema.Draft202012Validator,
        refusal="drops the tool (\"Error discovering tool\") or fails the request",
    ),
    ClientProfile(
        "gemini-api", "Gemini API `parameters` (the OpenAPI subset)",
        name_pattern=r"^[A-Za-z_][A-Za-z0-9_.:-]{0,63}$",
        name_rule="starts with a letter or _, then up to 63 of a-z A-Z 0-9 _ . : -",
        keywords=GEMINI_KEYWORDS, stripped=frozenset({"$schema", "additionalProperties"}),
        string_formats=GEMINI_STRING_FORMATS, typed_properties=True, string_enums=True, single_type=True,
        arg_pattern=r"^[A-Za-z_][A-Za-z0-9_]{0,63}$", refusal="rejects the request (Invalid JSON payload)",
    ),
)}


def profile(key: str) -> ClientProfile:
    return PROFILES[key]


# ============================================================================ refusals


@dataclass(frozen=True)
class Refusal:
    """One thing a client refuses: the tool, the argument or schema place (a JSON pointer), what and why."""

    tool: str
    message: str
    pointer: str = ""
    arg: str | None = None
    kind: str = "schema"  # name, collision, top_level, meta_schema, argument, schema


def name_refusals(p: ClientProfile, server: str, tool: str) -> Iterator[Refusal]:
    if p.name_pattern and not re.fullmatch(p.name_pattern, tool):
        yield Refusal(tool, f"{p.title} {p.refusal}: the name {tool!r} is not {p.name_rule}", kind="name")
    if p.qualified and p.qualified_limit:
        full = p.qualified(server, tool)
        if len(full) > p.qualified_limit:
            shown = f"{full!r}, " if full != server + tool else ""
            yield Refusal(tool, f"{p.title} {p.refusal}: with the server name {server!r} the name is {shown}"
                          f"{len(full)} characters, over its limit of {p.qualified_limit}", kind="name")


def collisions(p: ClientProfile, server: str, tools: list[str]) -> Iterator[Refusal]:
    """Tools the client renames to one name: the later one shadows the first, or the client refuses both."""
    if p.rename is None:
        return
    first: dict[str, str] = {}
    for tool in tools:
        renamed = p.rename(server, tool)
        other = first.setdefault(renamed, tool)
        if other != tool:
            yield Refusal(tool, f"{p.title} names both {other!r} and {tool!r} {renamed!r}: one of them cannot be "
                          "called", kind="collision")


def schema_refusals(p: ClientProfile, schema: dict[str, Any], tool: str) -> Iterator[Refusal]:
    """What the client refuses in one tool's inputSchema."""
    for key in sorted(p.top_level & set(schema)):
        yield Refusal(tool, f"{p.title} {p.refusal}: `{key}` at the top level of the input schema", "/" + key,
                      kind="top_level")
    if p.object_root and (schema.get("type") != "object" or not isinstance(schema.get("properties"), dict)):
        yield Refusal(tool, f"{p.title} {p.refusal}: the input schema's root must be `type: object` with "
                      "`properties`", kind="top_level")
    if p.meta_schema is not None:
        meta = p.meta_schema(p.meta_schema.META_SCHEMA)
        for error in sorted(meta.iter_errors(schema), key=lambda e: list(e.absolute_path)):
            where = "/" + "/".join(str(x) for x in error.absolute_path)
            yield Refusal(tool, f"{p.title} {p.refusal}: the input schema is not valid JSON Schema "
                          f"({error.message[:160]})", where, kind="meta_schema")
    if p.arg_pattern:
        for name in schema.get("properties") or {}:
            if not re.fullmatch(p.arg_pattern, name):
                yield Refusal(tool, f"{p.title} {p.refusal}: argument name {name!r} does not match {p.arg_pattern}",
                              "/properties/" + _escape(name), arg=name, kind="argument")
    if p.keywords is not None:
        yield from _subset_refusals(p, schema, tool, "")


def _subset_refusals(p: ClientProfile, node: Any, tool: str, where: str) -> Iterator[Refusal]:
    """Walk a schema the way Gemini's Schema message reads it: keywords outside the subset are unknown fields."""
    if not isinstance(node, dict):
        return
    assert p.keywords is not None
    arg = where.split("/")[2] if where.startswith("/properties/") else None
    for key in node:
        if key not in p.keywords and key not in p.stripped:
            yield Refusal(tool, f"{p.title} {p.refusal}: `{key}` is not a keyword of its schema subset",
                          f"{where}/{key}", arg=arg)
    types = node.get("type")
    if p.single_type and isinstance(types, list):
        yield Refusal(tool, f"{p.title} {p.refusal}: `type` is a list ({', '.join(map(str, types))}); it takes one "
                      "type (use `nullable: true` for null)", f"{where}/type", arg=arg)
    if p.string_enums and isinstance(node.get("enum"), list) and not all(isinstance(v, str) for v in node["enum"]):
        yield Refusal(tool, f"{p.title} {p.refusal}: `enum` values must be strings", f"{where}/enum", arg=arg)
    fmt = node.get("format")
    if p.string_formats is not None and types == "string" and fmt is not None and fmt not in p.string_formats:
        yield Refusal(tool, f"{p.title} {p.refusal}: string format {fmt!r} (it takes only "
                      f"{', '.join(sorted(p.string_formats))})", f"{where}/format", arg=arg)
    for name, sub in (node.get("properties") or {}).items():
        here = f"{where}/properties/{_escape(name)}"
        if p.typed_properties and isinstance(sub, dict) and "type" not in sub and "anyOf" not in sub:
            yield Refusal(tool, f"{p.title} skips the tool: property {name!r} has no `type`", here,
                          arg=arg or name)
        yield from _subset_refusals(p, sub, tool, here)
    if isinstance(node.get("items"), dict):
        yield from _subset_refusals(p, node["items"], tool, f"{where}/items")
    for i, sub in enumerate(node.get("anyOf") or []):
        yield from _subset_refusals(p, sub, tool, f"{where}/anyOf/{i}")


def count_refusal(p: ClientProfile, count: int) -> str | None:
    if p.max_tools is not None and count > p.max_tools:
        return f"{p.title} takes at most {p.max_tools} tools in one request; this server lists {count}"
    return None


def _escape(name: str) -> str:
    return name.replace("~", "~0").replace("/", "~1")
