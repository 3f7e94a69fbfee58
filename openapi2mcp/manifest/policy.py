"""What a Manifest's access fields mean: scopes, step-up, confirmation, and what a resource inherits.

Both sides read these rules: the compiler refuses a resource that could bypass a tool's policy
(compiler/catalog.py), the runtime enforces them per call (runtime/access.py, runtime/policy.py,
runtime/resources.py). "None" and "all" are never the same spelling: an empty scope list grants
no scope, only `*` grants every scope (docs/access.md).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Final

from openapi2mcp.manifest.model import (
    RISK_ORDER,
    SAFE_METHODS,
    Branch,
    OperationSpec,
    ParamSpec,
    ResourceSpec,
    ToolSpec,
)

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


def step_up_scope(tool: ToolSpec) -> str | None:
    """The scope a `step_up` tool needs besides its permissions (None: no step-up)."""
    if not tool.step_up:
        return None
    if tool.step_up_scope:
        return tool.step_up_scope
    base = tool.permissions[0] if tool.permissions else tool.name
    return base + STEP_UP_SUFFIX


def changes_state(branch: Branch, op: OperationSpec) -> bool:
    """Whether a request of `branch` may change something: a method that is not safe, or the one operation of a
    branch the overlay rates medium or above (seed 002's medium creates state; specs do declare writes as GET,
    `GET /views.publish`; a chain's risk is that of its writes, so its GET steps stay reads). Such a request gets
    its audit attempt line first, is never run by a dry run and is retried only with a key."""
    if op.method.upper() not in SAFE_METHODS:
        return True
    return len(branch.steps) == 1 and RISK_ORDER[branch.risk] >= RISK_ORDER["medium"]


def needs_confirmation(branch: Branch) -> bool:
    """Does running this branch need the user's yes (policy.py asks)? `auto`: high and critical risk."""
    if branch.confirmation == "never":
        return False
    return branch.confirmation == "required" or RISK_ORDER[branch.risk] >= RISK_ORDER["high"]


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
    from openapi2mcp.manifest.schema import compile_schema  # jsonschema: only when a resource fixes what a tool narrows

    root = {**schema, "$defs": tool.input_schema["$defs"]} if "$defs" in tool.input_schema else schema
    return compile_schema(root, formats=True).is_valid(value)
