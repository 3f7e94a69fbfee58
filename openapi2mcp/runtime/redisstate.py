"""The shared state in Redis (`--state redis://...`): claims, rate-limit buckets and keyed results of all replicas.

redis-py's asyncio client, loaded only when `--state` is given (the optional extra `[redis]`).
Every operation is one atomic command or one Lua script, so that replicas never race:

* a claim is `SET key 1 NX PX ttl`: exactly one replica gets OK, and the key expires with the token;
* `take` is one script over all of the call's buckets: it reads each bucket (tokens, stamp),
  refills it from the Redis server's own clock (`TIME`: replicas' clocks do not matter), and
  takes one token from every bucket only when each has one, else returns the waits; a bucket
  expires when it would be full again (an absent bucket is a full one);
* a keyed write is `begin` (a script: the kept result, or a unique "pending" mark set NX with
  the call's deadline as its life), then `finish` (the result replaces the mark) or `abandon` (a
  script deletes the mark only if it is still this process's own).

Keys: `openapi2mcp:{<namespace>}:<kind>:<id>`, the namespace one per server and signing key
(core.py), in braces so that every key of one server hashes to one Redis Cluster slot.

Failures: a refused connection, a timeout (each operation has OP_TIMEOUT seconds), a wrong
password or a server that is loading all become `ToolFailure(STATE_UNAVAILABLE)`, retryable; the
connection pool reconnects by itself on the next operation, so recovery needs no restart. The
first failure and the recovery are logged once each, with the URL shown without its password.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Final, TypeVar

import anyio
import redis.asyncio as aioredis
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialBackoff
from redis.exceptions import RedisError

from openapi2mcp.runtime.state import Begun, Bucket, shown_url, unavailable

log = logging.getLogger("openapi2mcp.runtime")

OP_TIMEOUT: Final = 3.0  # seconds one operation may take, retries included
CONNECT_TIMEOUT: Final = 1.0
_T = TypeVar("_T")

# KEYS: the buckets; ARGV: rate and burst of each, in order. Returns {} (taken) or each bucket's wait.
TAKE: Final = """
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local tokens, waits, blocked = {}, {}, false
for i = 1, #KEYS do
  local rate, burst = tonumber(ARGV[2 * i - 1]), tonumber(ARGV[2 * i])
  local held = redis.call('HMGET', KEYS[i], 't', 's')
  local tok, stamp = tonumber(held[1]), tonumber(held[2])
  if tok == nil or stamp == nil then tok, stamp = burst, now end
  if now > stamp then tok = math.min(burst, tok + (now - stamp) * rate) end
  tokens[i] = tok
  if tok >= 1 then waits[i] = 0 else waits[i] = (1 - tok) / rate; blocked = true end
end
if blocked then
  local out = {}
  for i = 1, #KEYS do out[i] = string.format('%.6f', waits[i]) end
  return out
end
for i = 1, #KEYS do
  local rate, burst = tonumber(ARGV[2 * i - 1]), tonumber(ARGV[2 * i])
  local left = tokens[i] - 1
  redis.call('HSET', KEYS[i], 't', string.format('%.9f', left), 's', string.format('%.6f', now))
  redis.call('PEXPIRE', KEYS[i], math.ceil((burst - left) / rate * 1000) + 1000)
end
return {}
"""

# KEYS[1]: the keyed write; ARGV: this process's mark, its life in ms. Returns the value found, or false.
BEGIN: Final = """
local found = redis.call('GET', KEYS[1])
if found then return found end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return false
"""

# KEYS[1]: the keyed write; ARGV[1]: this process's mark. Deletes it only if it is still the mark.
ABANDON: Final = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""

_PENDING: Final = "pending:"
_RESULT: Final = "result:"


class RedisState:
    """The state of every replica that shares this Redis and namespace (`State`, state.py)."""

    shared = True

    def __init__(self, url: str, namespace: str) -> None:
        self.url = url
        self.where = shown_url(url)
        self.prefix = f"openapi2mcp:{{{namespace}}}:"
        self._client: aioredis.Redis | None = None
        self._scripts: dict[str, Any] = {}
        self._marks: dict[str, str] = {}  # keyed writes this process began -> its mark
        self._down: str | None = None  # why the store was last unreachable (None: it answers)

    def describe(self) -> str:
        return self.where

    @property
    def healthy(self) -> bool:
        return self._down is None

    def _redis(self) -> aioredis.Redis:
        """The client, made on first use inside the serving event loop (its connections belong to that loop)."""
        if self._client is None:
            self._client = aioredis.Redis.from_url(
                self.url, decode_responses=True, socket_connect_timeout=CONNECT_TIMEOUT, socket_timeout=OP_TIMEOUT,
                retry=Retry(ExponentialBackoff(cap=0.2, base=0.02), retries=2), health_check_interval=15,
                client_name="openapi2mcp",
            )
            self._scripts = {name: self._client.register_script(text)
                             for name, text in (("take", TAKE), ("begin", BEGIN), ("abandon", ABANDON))}
        return self._client

    async def _run(self, op: Callable[[aioredis.Redis], Awaitable[_T]]) -> _T:
        """One operation under OP_TIMEOUT; a store that cannot answer is STATE_UNAVAILABLE."""
        try:
            client = self._redis()
            with anyio.fail_after(OP_TIMEOUT):
                value = await op(client)
        except (RedisError, OSError, TimeoutError) as e:
            why = self._reason(e)
            if self._down is None:
                log.warning("state store %s unreachable (%s): calls that need shared state fail with "
                            "STATE_UNAVAILABLE until it answers again", self.where, why)
            self._down = why
            raise unavailable(self.where, why) from None
        if self._down is not None:
            log.warning("state store %s answers again (after: %s)", self.where, self._down)
            self._down = None
        return value

    def _reason(self, error: BaseException) -> str:
        if isinstance(error, TimeoutError) and not str(error):
            return f"no answer within {OP_TIMEOUT:g} s"
        text = f"{type(error).__name__}: {error}" if str(error) else type(error).__name__
        password = _password(self.url)
        if password:
            text = text.replace(password, "***")
        return text[:300]

    def _key(self, kind: str, ident: str) -> str:
        return f"{self.prefix}{kind}:{ident}"

    async def claim(self, kind: str, ident: str, ttl: float) -> bool:
        key, ms = self._key(kind, ident), max(1, int(ttl * 1000))
        return bool(await self._run(lambda r: r.set(key, "1", nx=True, px=ms)))

    async def claimed(self, kind: str, ident: str) -> bool:
        key = self._key(kind, ident)
        return bool(await self._run(lambda r: r.exists(key)))

    async def take(self, buckets: Sequence[Bucket]) -> list[float] | None:
        if not buckets:
            return None
        keys = [self._key("rate", b.key) for b in buckets]
        args: list[str] = []
        for b in buckets:
            args += [repr(float(b.rate)), str(int(b.burst))]
        found = await self._run(lambda r: self._scripts["take"](keys=keys, args=args))
        return [float(w) for w in found] if found else None

    async def begin(self, key: str, ttl: float) -> Begun:
        mark = _PENDING + secrets.token_urlsafe(12)
        full = self._key("result", key)
        found = await self._run(lambda r: self._scripts["begin"](keys=[full], args=[mark, int(ttl * 1000)]))
        if not found:
            self._marks[key] = mark
            return ("run", None)
        if isinstance(found, str) and found.startswith(_RESULT):
            return ("done", found[len(_RESULT):])
        return ("busy", None)

    async def finish(self, key: str, result: str, ttl: float) -> None:
        self._marks.pop(key, None)
        full, ms = self._key("result", key), int(ttl * 1000)
        await self._run(lambda r: r.set(full, _RESULT + result, px=ms))

    async def abandon(self, key: str) -> None:
        mark = self._marks.pop(key, None)
        if mark is None:
            return
        full = self._key("result", key)
        await self._run(lambda r: self._scripts["abandon"](keys=[full], args=[mark]))

    async def ping(self) -> None:
        await self._run(lambda r: r.ping())

    async def aclose(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            try:
                await client.aclose()
            except (RedisError, OSError):
                pass


def _password(url: str) -> str | None:
    from urllib.parse import unquote, urlsplit

    try:
        password = urlsplit(url).password
    except ValueError:
        return None
    return unquote(password) if password else None
