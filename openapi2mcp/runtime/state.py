"""The state a call may share with other server processes: claims, rate-limit buckets, keyed results.

Three things outlive one call and, with several replicas, must be the same for all of them:

* **claims**: a confirmation's request state and (with a shared store) a dry-run token are used
  once: `claim(kind, id, ttl)` is true for the first caller only, for `ttl` seconds (the token's
  life, after which the token itself is refused);
* **rate-limit buckets**: `take(buckets)` takes one token from every bucket or none, and says how
  long each empty one needs (limits.py decides which buckets a call counts against);
* **keyed results**: the result of an idempotent write, under its idempotency key, so that a
  retried create returns the first result instead of running again (`KeyedResults`).

`MemoryState` is one process's state, exactly what a server without `--state` always had:
claims and buckets in dictionaries, and no keyed results (the upstream's own handling of the
Idempotency-Key is what makes a retry one object). `RedisState` (redisstate.py, loaded only
for `--state redis://...`) keeps all three in Redis, with atomic commands and Lua scripts, so
that every replica sees the same. When the store cannot be reached, an operation raises
`ToolFailure(STATE_UNAVAILABLE)` (retryable): a call that needs shared state fails closed and
sends nothing; calls that need none go on. The store's URL may hold a password: `shown_url`
is the only form that is logged or shown.

Run-time module: the standard library, the errors module and (for the results) the MCP types.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final, Literal, Protocol
from urllib.parse import urlsplit, urlunsplit

import anyio
import mcp_types as types

from openapi2mcp.errors import ErrorCode, ToolFailure

STATE_URL_VAR: Final = "OPENAPI2MCP_STATE_URL"
SCHEMES: Final = ("redis", "rediss", "unix")
MAX_CLAIMS: Final = 10_000  # a process's claims are pruned of expired ones past this many
MAX_BUCKETS: Final = 10_000  # ... and its per-caller buckets of full ones
RESULT_TTL: Final = 86_400.0  # seconds a keyed write's result is kept (Stripe keeps idempotency keys 24 h)
REPLAY_KEY: Final = "openapi2mcp/idempotentReplay"  # _meta of a result returned from the store


class StateError(ValueError):
    """A `--state` URL that cannot be used (the message never holds its password)."""


@dataclass(frozen=True)
class Bucket:
    """One token bucket a call takes from: its key (which limit, whose), `rate` tokens a second, size `burst`."""

    key: str
    rate: float
    burst: int


Begun = tuple[Literal["run", "done", "busy"], str | None]
"""What `begin` found under a key: ("run", None) the caller runs it; ("done", result JSON); ("busy", None)."""


class State(Protocol):
    """What the runtime keeps beyond one call (claims, buckets, keyed results); see the module docstring."""

    shared: bool  # across processes: then dry-run tokens are single-use and keyed results are kept

    def describe(self) -> str:
        """Where the state lives, as the logs and /healthz say it (never a password)."""
        ...

    async def claim(self, kind: str, ident: str, ttl: float) -> bool:
        """True for the first claim of (`kind`, `ident`) within `ttl` seconds, False after."""
        ...

    async def claimed(self, kind: str, ident: str) -> bool:
        """Whether (`kind`, `ident`) is claimed now (a look, not a claim: `claim` decides)."""
        ...

    async def take(self, buckets: Sequence[Bucket]) -> list[float] | None:
        """One token from each bucket (None), or none and each bucket's wait in seconds (0.0: it has one)."""
        ...

    async def begin(self, key: str, ttl: float) -> Begun:
        """Start the keyed write `key`, unless it ran (its result) or runs elsewhere; the mark lasts `ttl` s."""
        ...

    async def finish(self, key: str, result: str, ttl: float) -> None:
        """Keep the result (JSON) of the keyed write this process began, for `ttl` seconds."""
        ...

    async def abandon(self, key: str) -> None:
        """The keyed write this process began failed: a retry may run it again."""
        ...

    async def ping(self) -> None:
        """Reach the store (ToolFailure STATE_UNAVAILABLE when it cannot be reached)."""
        ...

    async def aclose(self) -> None: ...


# ============================================================================ one process


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


class MemoryState:
    """The state of one process (no `--state`): what each server always kept for itself."""

    shared = False

    def __init__(self, *, clock: Callable[[], float] = time.monotonic, max_buckets: int = MAX_BUCKETS) -> None:
        self.clock = clock  # monotonic: the buckets'; claims use the same clock for their expiry
        self.max_buckets = max_buckets
        self.buckets: dict[str, TokenBucket] = {}
        self._claims: dict[str, float] = {}  # kind:ident -> expiry

    def describe(self) -> str:
        return "this process"

    async def claim(self, kind: str, ident: str, ttl: float) -> bool:
        now = self.clock()
        if len(self._claims) > MAX_CLAIMS:
            self._claims = {k: x for k, x in self._claims.items() if x > now}
        key = f"{kind}:{ident}"
        if self._claims.get(key, 0.0) > now:
            return False
        self._claims[key] = now + ttl
        return True

    async def claimed(self, kind: str, ident: str) -> bool:
        return self._claims.get(f"{kind}:{ident}", 0.0) > self.clock()

    async def take(self, buckets: Sequence[Bucket]) -> list[float] | None:
        now = self.clock()
        found = [self._bucket(b, now) for b in buckets]
        waits = [bucket.wait(now) for bucket in found]
        if any(w > 0 for w in waits):
            return waits
        for bucket in found:
            bucket.take(now)
        return None

    def _bucket(self, spec: Bucket, now: float) -> TokenBucket:
        bucket = self.buckets.get(spec.key)
        if bucket is None:
            if len(self.buckets) >= self.max_buckets:
                for key in [k for k, b in self.buckets.items() if b.full(now)]:
                    del self.buckets[key]  # a full bucket is the same as a new one
            bucket = self.buckets[spec.key] = TokenBucket(spec.rate, spec.burst, now)
        return bucket

    async def begin(self, key: str, ttl: float) -> Begun:
        return ("run", None)  # one process keeps no results: the upstream honours the key, as before

    async def finish(self, key: str, result: str, ttl: float) -> None:
        return None

    async def abandon(self, key: str) -> None:
        return None

    async def ping(self) -> None:
        return None

    async def aclose(self) -> None:
        return None


# ============================================================================ the store's URL


def shown_url(url: str) -> str:
    """The URL without its user and password (`rediss://host:6380/0`): the only form logged or shown."""
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        port = parts.port
    except ValueError:
        return "(an unreadable URL)"
    if ":" in host:
        host = f"[{host}]"
    netloc = host + (f":{port}" if port else "")
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


def check_url(url: str) -> str:
    """The URL of `--state` / OPENAPI2MCP_STATE_URL if it can be used, else StateError (naming no secret)."""
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError for a port that is not a number
    except ValueError:
        raise StateError(f"{shown_url(url)} is not a URL (redis://host:6379/0)") from None
    if parts.scheme not in SCHEMES:
        raise StateError(f"{parts.scheme or 'a URL without a scheme'}: the state store is Redis: give "
                         "redis://[:password@]host[:port][/db], rediss:// for TLS, or unix:///path/redis.sock")
    if parts.scheme != "unix" and not parts.hostname:
        raise StateError(f"{shown_url(url)} names no host (redis://host:6379/0)")
    db = parts.path.lstrip("/")
    if parts.scheme != "unix" and db and not db.isdigit():
        raise StateError(f"{shown_url(url)}: the database is a number (redis://host:6379/0), not {db!r}")
    return url


def open_state(url: str, namespace: str) -> State:
    """The shared state at `url` (Redis; redis-py's asyncio client), under `namespace` (one per server)."""
    check_url(url)
    try:
        from openapi2mcp.runtime.redisstate import RedisState
    except ImportError:
        raise StateError("--state needs redis-py: pip install 'openapi2mcp-tools[redis]' (a built package: "
                         "'openapi2mcp-runtime[redis]', or build it with --with redis)") from None
    return RedisState(url, namespace)


def unavailable(where: str, why: str) -> ToolFailure:
    """The failure of a call that needs the shared state when the store cannot be reached (retryable)."""
    return ToolFailure.of(
        ErrorCode.STATE_UNAVAILABLE,
        f"the shared state store ({where}) cannot be reached ({why}); nothing was sent. This call needs it "
        "(a rate limit, a confirmation, a dry-run token or an idempotent write shared by every replica); "
        "retry in a moment",
        retryable=True,
        retry_after=1.0,
    )


# ============================================================================ keyed results


class KeyedResults:
    """A retried idempotent write returns the first result (with a shared state; see `State.begin`)."""

    def __init__(self, state: State, *, poll: float = 0.05) -> None:
        self.state = state
        self.poll = poll

    async def first(self, key: str, deadline: float) -> types.CallToolResult | None:
        """The kept result of `key`, or None when this call is to run it (it then calls `keep` or `drop`).

        A write of the same key still running elsewhere is waited for, up to `deadline` seconds.
        """
        waited = 0.0
        pause = self.poll
        while True:
            what, data = await self.state.begin(key, deadline + 5.0)
            if what == "run":
                return None
            if what == "done" and data is not None:
                try:
                    result = types.CallToolResult.model_validate_json(data)
                except ValueError:
                    return None  # not ours (another version's): run it; the upstream sees the same key
                result.meta = {**(result.meta or {}), REPLAY_KEY: True}
                return result
            if waited >= deadline:
                raise ToolFailure.of(
                    ErrorCode.UPSTREAM_TIMEOUT,
                    f"the same call (same arguments, same idempotency key) has been running on another replica for "
                    f"{waited:.0f} s; retry later to get its result",
                    retryable=True,
                )
            await anyio.sleep(pause)
            waited += pause
            pause = min(pause * 2, 0.5)

    async def keep(self, key: str, result: types.CallToolResult) -> None:
        """Keep a successful result for RESULT_TTL; one that cannot be encoded is not kept (the key is freed)."""
        try:
            data = result.model_dump_json(by_alias=True, exclude_none=True)
        except ValueError:
            await self.state.abandon(key)
            return
        await self.state.finish(key, data, RESULT_TTL)

    async def drop(self, key: str) -> None:
        await self.state.abandon(key)
