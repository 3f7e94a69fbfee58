"""Who is calling: the caller of one MCP request, as the runtime's policies see it.

The transport establishes the caller (HTTP: the verified bearer token; stdio: the local user) and
the runtime hands it to everything that decides or records: permissions, confirmation state
bound to the caller, rate limits, the audit log. Runtime-side module: imports nothing heavy.

Permissions are OAuth scopes. A tool's `permissions` must all be among the caller's scopes for
the caller to see it in tools/list or call it; a tool it may not use is answered exactly like an
unknown tool (nothing tells the caller the tool exists). A tool with `step_up: true` also needs
its step-up scope (`step_up_scope`, default `<first permission>:step-up`); over HTTP a call
without it is answered 403 `insufficient_scope` naming the scopes to ask for (auth.py).

"None" and "all" are never the same spelling: an empty scope list grants no scope, only `*`
grants every scope, and a tool or resource without permissions needs no scope (it is open to
every authenticated caller). A resource inherits the policy of every tool on its operation
(`resource_policy`), so reading it is never a way around a tool.
"""

from __future__ import annotations

import getpass
import hashlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from openapi2mcp.manifest import RISK_ORDER, Branch, OperationSpec, ParamSpec, ResourceSpec, ToolSpec

SCOPES_VAR: Final = "OPENAPI2MCP_SCOPES"
STEP_UP_SUFFIX: Final = ":step-up"

# Inbound headers that are never forwarded upstream, allowlisted or not: credentials, the
# MCP transport's own headers, and headers the HTTP client sets itself.
NEVER_FORWARDED: Final = frozenset({
    "authorization", "proxy-authorization", "cookie", "set-cookie", "host", "content-length",
    "content-type", "content-encoding", "transfer-encoding", "connection", "keep-alive", "te", "trailer",
    "upgrade", "expect", "accept", "accept-encoding", "origin", "referer", "forwarded", "x-forwarded-for",
    "x-forwarded-host", "x-forwarded-proto", "x-real-ip", "mcp-session-id", "mcp-protocol-version",
    "last-event-id", "www-authenticate", "idempotency-key", "user-agent",
})


@dataclass(frozen=True)
class Caller:
    """One caller: a stable id (token subject / client id / local user), its scopes, the transport."""

    id: str
    scopes: frozenset[str] = field(default_factory=frozenset)
    transport: Literal["stdio", "http", "memory"] = "memory"
    all_scopes: bool = False  # local trusted caller: every permission (stdio default)

    def allows(self, permissions: list[str] | tuple[str, ...]) -> bool:
        """True when the caller holds every permission the tool declares."""
        return self.all_scopes or all(p in self.scopes for p in permissions)

    def describe(self) -> str:
        """`every scope`, `no scope` or `the scopes a b` (start-up lines)."""
        if self.all_scopes:
            return "every scope"
        return f"the scopes {' '.join(sorted(self.scopes))}" if self.scopes else "no scope"

    def missing(self, scopes: Iterable[str]) -> list[str]:
        """The scopes of `scopes` this caller does not hold, in order."""
        return [] if self.all_scopes else [s for s in scopes if s not in self.scopes]


def parse_scopes(text: str | Iterable[str]) -> frozenset[str] | None:
    """`"notes:read tasks:write"` (spaces or commas) or a list -> the scopes; None: `*`, every scope.

    Empty (`""`, `[]`) is no scope at all, never every scope: only `*` grants everything, so
    "every scope" is always written down. `*` beside other scopes is refused as ambiguous
    (ValueError). The caller decides what an absent setting means.
    """
    words = text.replace(",", " ").split() if isinstance(text, str) else [w for s in text for w in s.split()]
    if "*" in words:
        if len(set(words)) > 1:
            raise ValueError(f"'*' (every scope) cannot be combined with other scopes: {' '.join(words)!r}")
        return None
    return frozenset(words)


def local_caller(
    transport: Literal["stdio", "memory", "http"] = "stdio", scopes: Iterable[str] | None = None
) -> Caller:
    """The local user: trusted with every permission unless `scopes` (e.g. `--scopes`) restricts it."""
    try:
        user = getpass.getuser()
    except Exception:  # no user name in some containers
        user = "local"
    if scopes is None:
        return Caller(id=f"local:{user}", transport=transport, all_scopes=True)
    return Caller(id=f"local:{user}", scopes=frozenset(scopes), transport=transport)


def token_subject(token: str) -> str:
    """A stable, non-secret id for a static token without a subject (never the token itself)."""
    return "token:" + hashlib.sha256(token.encode()).hexdigest()[:12]


def caller_of_token(access_token: Any) -> Caller:
    """The caller an SDK `AccessToken` (or auth.GrantedToken) stands for."""
    subject = getattr(access_token, "subject", None) or getattr(access_token, "client_id", None) or "unknown"
    scopes = frozenset(str(s) for s in getattr(access_token, "scopes", None) or [])
    return Caller(id=str(subject), scopes=scopes, transport="http",
                  all_scopes=bool(getattr(access_token, "all_scopes", False)))


def _request(ctx: Any) -> Any:
    return getattr(ctx, "request", None)


def caller_from_context(ctx: Any, local: Caller | None = None) -> Caller:
    """The caller of the request an SDK handler is serving.

    HTTP with auth: the verified bearer token (scope["user"], set by the auth middleware).
    HTTP without auth (loopback, or --no-auth): anonymous, with the local caller's scopes.
    stdio and in-memory: `local` (the local user; every scope unless --scopes restricts it).
    """
    base = local or local_caller("memory")
    request = _request(ctx)
    if request is None:
        return base
    scope = getattr(request, "scope", None)
    user = scope.get("user") if isinstance(scope, Mapping) else None
    access_token = getattr(user, "access_token", None)
    if access_token is not None:
        return caller_of_token(access_token)
    return Caller(id="anonymous", scopes=base.scopes, transport="http", all_scopes=base.all_scopes)


def step_up_scope(tool: ToolSpec) -> str | None:
    """The scope a `step_up` tool needs besides its permissions (None: no step-up)."""
    if not tool.step_up:
        return None
    if tool.step_up_scope:
        return tool.step_up_scope
    base = tool.permissions[0] if tool.permissions else tool.name
    return base + STEP_UP_SUFFIX


def visible(tool: ToolSpec, caller: Caller) -> bool:
    """May the caller see and call this tool at all (its permissions; step-up comes later)?"""
    return tool.risk != "forbidden" and caller.allows(tool.permissions)


def needs_step_up(tool: ToolSpec, caller: Caller) -> list[str]:
    """The scopes to ask for when the caller lacks the tool's step-up scope ([] when it has it).

    Per the MCP authorization spec (and RFC 6750 3.1) a challenge names the scopes the operation
    needs: the tool's permissions and its step-up scope.
    """
    extra = step_up_scope(tool)
    if extra is None or not caller.missing([extra]):
        return []
    return [*tool.permissions, extra]


def inbound_headers(ctx: Any, allow: Sequence[str]) -> dict[str, str]:
    """The allowlisted headers of the HTTP request behind an MCP call ({} on stdio, or none allowed)."""
    if not allow:
        return {}
    headers = getattr(_request(ctx), "headers", None)
    if headers is None:
        return {}
    out: dict[str, str] = {}
    for name in allow:
        if name.lower() in NEVER_FORWARDED:
            continue
        values = headers.getlist(name) if hasattr(headers, "getlist") else [headers.get(name)]
        values = [v for v in values if v is not None]
        if values:
            out[name] = ", ".join(values)
    return out


def needs_confirmation(branch: Branch) -> bool:
    """Does running this branch need the user's yes (policy.py asks)? `auto`: high and critical risk."""
    if branch.confirmation == "never":
        return False
    return branch.confirmation == "required" or RISK_ORDER[branch.risk] >= RISK_ORDER["high"]


# ============================================================================ resources inherit tool policy


_Key = tuple[str, str]  # (location, name; header names in lower case)


def _key(param: ParamSpec) -> _Key:
    return param.location, param.name.lower() if param.location == "header" else param.name


def _where(param: ParamSpec) -> str:
    return f"parameter {param.name!r} ({param.location})"


@dataclass(frozen=True)
class ResourcePolicy:
    """What a resource inherits from the tools that call its operation (docs/access.md).

    A resource is read by the application, without the model and without asking the user, so it
    must never be a way around the policy of a tool on the same operation. When several tools
    share the operation the union applies: every scope any of them needs (permissions and step-up
    scopes), a token from each of their rate-limit buckets, each value any of them fixes, and each
    narrowed argument schema. What a read cannot honour is in `problems` (phrases after "resource
    R reads OP, "): confirmation or a required dry run (a read cannot ask), a forbidden tool, two
    tools fixing one parameter differently, or a URI variable that would set a parameter a tool
    fixes or never sends. The compiler refuses such a resource; the runtime refuses a Manifest
    with one (an older compiler let it through).
    """

    scopes: tuple[str, ...] = ()
    tools: tuple[str, ...] = ()  # the tools on the operation: their rate-limit buckets apply to reads
    checks: tuple[tuple[str, dict[str, Any]], ...] = ()  # (tool, object schema over the URI variables' values)
    fixed: tuple[ParamSpec, ...] = ()  # parameters a tool fixes that the resource's plan does not send
    problems: tuple[str, ...] = ()

    def operation(self, op: OperationSpec) -> OperationSpec:
        """The resource's request plan, with the fixed values it inherits."""
        return op.model_copy(update={"params": [*op.params, *self.fixed]}) if self.fixed else op


def resource_policy(resource: ResourceSpec, tools: Iterable[ToolSpec]) -> ResourcePolicy:
    """The union of the policies of every tool whose steps call the resource's operation."""
    op = resource.operation
    own = {_key(p): p for p in op.params}
    scopes = list(resource.permissions)
    names: list[str] = []
    checks: list[tuple[str, dict[str, Any]]] = []
    fixed: dict[_Key, tuple[str, ParamSpec]] = {}
    problems: list[str] = []
    for tool in tools:
        uses = [(b, s) for b in tool.branches for s in b.steps if s.operation.id == op.id]
        if not uses:
            continue
        names.append(tool.name)
        scopes += tool.permissions
        extra = step_up_scope(tool)
        scopes += [extra] if extra else []
        if tool.risk == "forbidden":
            problems.append(f"which tool {tool.name!r} marks forbidden")
            continue
        narrowed: dict[str, list[Any]] = {}
        for branch, step in uses:
            what = tool.name if len(tool.branches) == 1 else f"{tool.name} ({branch.key})"
            problems += _branch_problems(branch, what)
            sent = {_key(p): p for p in step.operation.params}
            paging = branch.pagination
            for p in (paging.position, paging.size) if paging else ():
                if p is not None:  # the pager sets these; the model only moves through pages
                    sent.setdefault(_key(p), p.model_copy(update={"arg": p.arg or p.name}))
            for key, theirs in sent.items():
                mine = own.get(key)
                if theirs.fixed:
                    problems += _fixed_problems(tool.name, theirs, mine, fixed)
                elif theirs.arg is not None and mine is not None:
                    allowed = _properties(tool).get(theirs.arg)
                    if allowed is None:
                        continue
                    if mine.arg is not None:
                        narrowed.setdefault(mine.arg, []).append(allowed)
                    elif mine.fixed and not _fits(mine.value, allowed, tool):
                        problems.append(f"which tool {what!r} allows only some values of {_where(mine)}; the "
                                        f"resource's fixed value {mine.value!r} is not one of them")
            for key, mine in own.items():
                if mine.arg is not None and key not in sent:
                    problems.append(f"which tool {what!r} never sends {_where(mine)}, but the URI variable "
                                    f"{{{mine.arg}}} would let a reader set it")
        if narrowed:
            properties = {v: s[0] if len(s) == 1 else {"allOf": s} for v, s in narrowed.items()}
            check: dict[str, Any] = {"type": "object", "properties": properties}
            if "$defs" in tool.input_schema:
                check["$defs"] = tool.input_schema["$defs"]
            checks.append((tool.name, check))
    return ResourcePolicy(
        scopes=tuple(dict.fromkeys(scopes)), tools=tuple(names), checks=tuple(checks),
        fixed=tuple(p for _, p in fixed.values()), problems=tuple(dict.fromkeys(problems)),
    )


def _branch_problems(branch: Branch, what: str) -> list[str]:
    out = []
    if branch.risk == "forbidden":
        out.append(f"which tool {what!r} marks forbidden")
    if needs_confirmation(branch):
        out.append(f"which tool {what!r} runs only after the user confirms ({branch.risk} risk); a resource "
                   "read cannot ask anyone")
    if branch.dry_run is not None and branch.dry_run.mode == "required":
        out.append(f"which tool {what!r} runs only after a dry run; a resource read cannot preview")
    return out


def _fixed_problems(
    tool: str, theirs: ParamSpec, mine: ParamSpec | None, inherited: dict[_Key, tuple[str, ParamSpec]]
) -> list[str]:
    """A parameter the tool fixes: the resource sends the same value, or inherits it."""
    fixes = f"which tool {tool!r} fixes {_where(theirs)} to {theirs.value!r}"
    if mine is None:
        earlier = inherited.get(_key(theirs))
        if earlier is None:
            inherited[_key(theirs)] = (tool, theirs)
        elif earlier[1].value != theirs.value:
            return [f"{fixes}, but tool {earlier[0]!r} fixes it to {earlier[1].value!r}; a resource cannot "
                    "send both"]
        return []
    if mine.fixed:
        return [] if mine.value == theirs.value else [f"{fixes}, but the resource fixes it to {mine.value!r}"]
    if mine.arg is not None:
        return [f"{fixes}, but the URI variable {{{mine.arg}}} would let a reader choose it"]
    return []


def _properties(tool: ToolSpec) -> dict[str, Any]:
    properties = tool.input_schema.get("properties")
    return properties if isinstance(properties, dict) else {}


def _fits(value: Any, schema: dict[str, Any], tool: ToolSpec) -> bool:
    from openapi2mcp.shape import compile_schema  # jsonschema: only when a resource fixes what a tool narrows

    root = {**schema, "$defs": tool.input_schema["$defs"]} if "$defs" in tool.input_schema else schema
    return compile_schema(root, formats=True).is_valid(value)
