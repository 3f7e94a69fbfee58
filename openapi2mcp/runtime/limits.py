"""Rate limits: token buckets per server and per tool, optionally per caller.

A call takes one token from every bucket that applies to it: the server's (overlay
`upstream.rate_limit`, or `serve --rate-limit`) and the tool's own (`rate_limit` on the tool).
A resource read takes one from the server's and from those of every tool on its operation.
When any of them is empty the call is refused at once, before anything is sent upstream, with
the time until every bucket has a token again (`RATE_LIMITED`, retryable, `retryAfter`). Tokens
are taken only when all buckets have one, so a refused call costs nothing.

A bucket of `rate` tokens a second and size `burst` allows `burst` calls at once and `rate`
calls a second on average. `per_caller: true` gives each caller (the token's subject, or the
local user) its own bucket instead of one shared by everyone.

Why not a library: `limits` has fixed and sliding windows but no token bucket with a burst, and
`aiolimiter` is a leaky bucket whose `acquire()` waits for capacity; a server must refuse at
once and say how long to wait. The bucket is a few lines of arithmetic, exact, and tested with a
fake clock. Where the buckets live is the runtime's `State` (state.py): in the process by
default (replicas then limit each on its own: N replicas allow N times the rate), or in Redis
with `--state`, where one Lua script takes from all of a call's buckets at once and every
replica counts against the same buckets. A store that cannot be reached refuses the call
(STATE_UNAVAILABLE, retryable): a limit that cannot be counted is not applied as N limits.

Run-time module: imports only the Manifest types and the state.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from openapi2mcp.manifest import RateLimitSpec, describe_rate
from openapi2mcp.runtime.state import MAX_BUCKETS, Bucket, MemoryState, State


@dataclass(frozen=True)
class Refusal:
    """A call over a limit: which limit (`"server"` or the tool name), and seconds to wait."""

    limit: str
    spec: RateLimitSpec
    retry_after: float

    def message(self) -> str:
        whose = "this server's" if self.limit == "server" else f"{self.limit}'s"
        shared = "per caller" if self.spec.per_caller else "shared by all callers"
        return (f"rate limited: {whose} limit is {describe_rate(self.spec)} (burst {self.spec.burst}, {shared}); "
                f"retry in {self.retry_after:g} s")


class RateLimiter:
    """The buckets of one runtime: the server's and each tool's, shared or per caller, kept in `state`."""

    def __init__(
        self,
        server: RateLimitSpec | None,
        tools: Mapping[str, RateLimitSpec],
        *,
        state: State | None = None,
        clock: Callable[[], float] = time.monotonic,
        max_caller_buckets: int = MAX_BUCKETS,
    ) -> None:
        self.server = server
        self.tools = dict(tools)
        self.state: State = state if state is not None else MemoryState(clock=clock, max_buckets=max_caller_buckets)

    @property
    def active(self) -> bool:
        return self.server is not None or bool(self.tools)

    async def admit(self, tool: str | Sequence[str], caller: str) -> Refusal | None:
        """Take a token from each bucket of this call, or take none and say how long to wait.

        `tool` is the tool called, or the tools whose buckets a resource read counts against
        (every tool on the resource's operation, docs/access.md); the server's bucket applies to both.
        No bucket applies: the state is not asked (a call without limits never needs it).
        """
        tools = [tool] if isinstance(tool, str) else list(tool)
        limits = [("server", "", self.server), *((t, t, self.tools.get(t)) for t in tools)]
        applied = [(name, spec, Bucket(_bucket_key(key, spec, caller), spec.rate, spec.burst))
                   for name, key, spec in limits if spec is not None]
        if not applied:
            return None
        waits = await self.state.take([bucket for _, _, bucket in applied])
        if waits is None:
            return None
        worst = max(range(len(applied)), key=lambda i: waits[i])
        name, spec, _ = applied[worst]
        return Refusal(name, spec, math.ceil(waits[worst] * 1000) / 1000)


def _bucket_key(tool_key: str, spec: RateLimitSpec, caller: str) -> str:
    """`tool` ("" is the server's: a tool may be named "server") and, per caller, whose: JSON, never ambiguous."""
    return json.dumps([tool_key, caller if spec.per_caller else ""], separators=(",", ":"))
