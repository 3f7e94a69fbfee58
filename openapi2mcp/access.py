"""Who is calling: the caller of one MCP request, as the runtime's policies see it.

The transport establishes the caller (HTTP: the verified bearer token; stdio: the local user) and
the runtime hands it to everything that decides or records: permissions, confirmation state
bound to the caller, rate limits, the audit log. Runtime-side module: imports nothing heavy.
"""

from __future__ import annotations

import getpass
from dataclasses import dataclass, field
from typing import Any, Literal


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


def local_caller(transport: Literal["stdio", "memory"] = "stdio") -> Caller:
    """The local user of a stdio server: trusted with every permission unless configured otherwise."""
    try:
        user = getpass.getuser()
    except Exception:  # no user name in some containers
        user = "local"
    return Caller(id=f"local:{user}", transport=transport, all_scopes=True)


def caller_from_context(ctx: Any) -> Caller:
    """The caller of the request an SDK handler is serving (see the HTTP auth for tokens)."""
    return local_caller("memory")
