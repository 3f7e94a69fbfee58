"""TODO docstring."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    pass


ENV_PREFIX: Final = "OPENAPI2MCP_"
LOOPBACK: Final = frozenset({"127.0.0.1", "localhost", "::1"})


def is_loopback(host: str) -> bool:
    """An address only this machine reaches ("" too: the SDK's own default binds loopback)."""
    return host in LOOPBACK or host == ""


@dataclass(frozen=True)
class HttpLimits:
    """The HTTP transport's limits (openapi2mcp.httpguard applies them; docs/access.md has the table).

    Here, not in httpguard, so that the CLIs take their defaults without importing uvicorn.
    """

    header_timeout: float = 10.0  # seconds for a request's line and headers
    body_timeout: float = 30.0  # seconds for its body, after the headers
    keep_alive_timeout: int = 5  # seconds an idle keep-alive connection stays open (uvicorn's default)
    max_connections: int = 1000  # open connections (uvicorn limit_concurrency: 503 past it); 0: no cap
    sessions_per_caller: int = 64  # open MCP sessions per caller (429 past it); 0: no cap

    def __post_init__(self) -> None:
        for name, flag, kind, _ in LIMIT_FLAGS:
            value, where = getattr(self, name), f"{flag} / {ENV_PREFIX}{flag[2:].upper().replace('-', '_')}"
            if kind is int and name.startswith(("max_", "sessions")):
                if value < 0:
                    raise ValueError(f"{where}: {value} is not a cap; give 0 (no cap) or more")
            elif not (value > 0 and math.isfinite(value)):
                raise ValueError(f"{where}: {value} is not a timeout; give a number of seconds above 0")


# HttpLimits field, flag (its variable: OPENAPI2MCP_ + the flag in capitals), type, help
LIMIT_FLAGS: Final = (
    ("header_timeout", "--header-timeout", float, "seconds a request's line and headers may take"),
    ("body_timeout", "--body-timeout", float, "seconds a request's body may take after its headers"),
    ("keep_alive_timeout", "--keep-alive-timeout", int, "seconds an idle keep-alive connection stays open"),
    ("max_connections", "--max-connections", int, "open connections; more get 503 (0: no cap)"),
    ("sessions_per_caller", "--max-sessions-per-caller", int,
     "open MCP sessions per token subject or client address; more get 429 (0: no cap)"),
)
