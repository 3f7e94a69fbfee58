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
once and say how long to wait. The bucket below is a few lines of arithmetic on a monotonic
clock, exact, and tested with a fake clock. Buckets live in the process: replicas limit each
on its own (N replicas allow N times the rate; divide the rate, or limit at the gateway).

Run-time module: imports only the Manifest types.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from openapi2mcp.manifest import RateLimitSpec, describe_rate

MAX_CALLER_BUCKETS: Final = 10_000


class TokenBucket:
    """`burst` tokens at most, refilled continuously at `rate` tokens a second."""

    __slots__ = ("burst", "rate", "stamp", "tokens")

    def __init__(self, rate: float, burst: int, now: float) -> None:
        self.rate = rate
        self.burst = float(burst)
        self.tokens = float(burst)
        self.stamp = now

    def _refill(self, now: float) -> None:
        if now > self.stamp:
            self.tokens = min(self.burst, self.tokens + (now - self.stamp) * self.rate)
            self.stamp = now

    def wait(self, now: float) -> float:
        """Seconds until one token is there (0.0: now)."""
        self._refill(now)
        return 0.0 if self.tokens >= 1.0 else (1.0 - self.tokens) / self.rate

    def take(self, now: float) -> None:
        self._refill(now)
        self.tokens -= 1.0

    def full(self, now: float) -> bool:
        self._refill(now)
        return self.tokens >= self.burst


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
    """The buckets of one runtime: the server's and each tool's, shared or per caller."""

    def __init__(
        self,
        server: RateLimitSpec | None,
        tools: Mapping[str, RateLimitSpec],
        *,
        clock: Callable[[], float] = time.monotonic,
        max_caller_buckets: int = MAX_CALLER_BUCKETS,
    ) -> None:
        self.server = server
        self.tools = dict(tools)
        self.clock = clock
        self.max_caller_buckets = max_caller_buckets
        self._buckets: dict[tuple[str, str], TokenBucket] = {}

    @property
    def active(self) -> bool:
        return self.server is not None or bool(self.tools)

    def _bucket(self, tool: str, spec: RateLimitSpec, caller: str, now: float) -> TokenBucket:
        key = (tool, caller if spec.per_caller else "")  # tool "" is the server's (a tool may be named "server")
        bucket = self._buckets.get(key)
        if bucket is None:
            if spec.per_caller and len(self._buckets) >= self.max_caller_buckets:
                self._prune(now)
            bucket = self._buckets[key] = TokenBucket(spec.rate, spec.burst, now)
        return bucket

    def _prune(self, now: float) -> None:
        """Forget full buckets: a full bucket is the same as a new one."""
        for key in [k for k, b in self._buckets.items() if b.full(now)]:
            del self._buckets[key]

    def admit(self, tool: str | Sequence[str], caller: str) -> Refusal | None:
        """Take a token from each bucket of this call, or take none and say how long to wait.

        `tool` is the tool called, or the tools whose buckets a resource read counts against
        (every tool on the resource's operation, docs/access.md); the server's bucket applies to both.
        """
        tools = [tool] if isinstance(tool, str) else list(tool)
        limits = [("server", "", self.server), *((t, t, self.tools.get(t)) for t in tools)]
        now = self.clock()
        buckets = [(name, spec, self._bucket(key, spec, caller, now)) for name, key, spec in limits if spec is not None]
        worst: Refusal | None = None
        for name, spec, bucket in buckets:
            wait = bucket.wait(now)
            if wait > 0 and (worst is None or wait > worst.retry_after):
                worst = Refusal(name, spec, math.ceil(wait * 1000) / 1000)
        if worst is not None:
            return worst
        for _, _, bucket in buckets:
            bucket.take(now)
        return None
