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

from openapi2mcp.manifest import (
    NEVER_FORWARDED,
    ToolSpec,
    step_up_scope,
)
from openapi2mcp.upstream import CallerToken

SCOPES_VAR: Final = "OPENAPI2MCP_SCOPES"


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


def caller_token(ctx: Any) -> CallerToken | None:
    """The bearer token of the request an SDK handler serves, when a JWT verified it (else None).

    For `upstream.auth` forward and token_exchange. Static tokens are this server's own secrets and
    never leave it; a JWT's `aud` (kept by auth.JwtVerifier) decides whether it may be forwarded.
    """
    request = _request(ctx)
    scope = getattr(request, "scope", None)
    user = scope.get("user") if isinstance(scope, Mapping) else None
    access_token = getattr(user, "access_token", None)
    claims = getattr(access_token, "claims", None)
    if not isinstance(claims, Mapping) or "iss" not in claims:
        return None
    scheme, _, raw = str(request.headers.get("authorization", "")).strip().partition(" ")
    if scheme.lower() != "bearer" or not raw.strip():
        return None
    aud = claims.get("aud")
    audience = (aud,) if isinstance(aud, str) else tuple(str(a) for a in aud) if isinstance(aud, list) else ()
    expires = getattr(access_token, "expires_at", None)
    return CallerToken(token=raw.strip(), subject=str(getattr(access_token, "subject", "") or ""),
                       audience=audience, expires_at=float(expires) if expires else None)


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


# ============================================================================ resources inherit tool policy


