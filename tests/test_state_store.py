"""The State seam (openapi2mcp/runtime/state.py, redisstate.py) against a real redis-server.

Two `RedisState`s on one namespace are two replicas: what one claims or takes the other sees.
The store is Debian's redis-server (tests/redis_support.py, .ci/redis.sh), with a password; it
is stopped and started again to see a store that goes away fail closed and come back without a
new client. `MemoryState` is checked for the same contract where it keeps one (claims, buckets).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from openapi2mcp.errors import ErrorCode, ToolFailure
from openapi2mcp.manifest import RateLimitSpec
from openapi2mcp.runtime.limits import RateLimiter
from openapi2mcp.runtime.redisstate import RedisState
from openapi2mcp.runtime.state import Bucket, MemoryState, StateError, check_url, shown_url
from tests.redis_support import PASSWORD, RedisServer, redis_server

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
def redis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    with redis_server(tmp_path_factory.mktemp("redis")) as server:
        yield server


@pytest.fixture
def replicas(redis: RedisServer) -> tuple[RedisState, RedisState]:
    redis.command("FLUSHALL")
    return RedisState(redis.url, "test-ns"), RedisState(redis.url, "test-ns")


async def close(*states: RedisState) -> None:
    for state in states:
        await state.aclose()


def test_the_url_is_checked_and_shown_without_its_password() -> None:
    url = f"rediss://user:{PASSWORD}@cache.example.com:6380/2"
    assert shown_url(url) == "rediss://cache.example.com:6380/2"
    assert check_url(url) == url
    assert check_url("unix:///run/redis.sock") == "unix:///run/redis.sock"
    for bad, says in [("http://cache:6379", "the state store is Redis"), ("cache:6379", "the state store is Redis"),
                      (f"redis://:{PASSWORD}@:6379/0", "names no host"),
                      (f"redis://:{PASSWORD}@cache:63x9/0", "is not a URL"),
                      (f"redis://:{PASSWORD}@cache:6379/zero", "the database is a number")]:
        with pytest.raises(StateError) as refused:
            check_url(bad)
        assert says in str(refused.value) and PASSWORD not in str(refused.value), (bad, str(refused.value))


async def test_a_claim_is_won_once_across_replicas_and_expires_with_the_token(
    replicas: tuple[RedisState, RedisState],
) -> None:
    a, b = replicas
    wins: list[bool] = []

    async def claim(state: RedisState) -> None:
        wins.append(await state.claim("confirm", "nonce-1", 0.5))

    async with anyio.create_task_group() as tg:  # 40 at once, half on each replica
        for n in range(40):
            tg.start_soon(claim, (a, b)[n % 2])
    assert wins.count(True) == 1 and len(wins) == 40
    assert await b.claimed("confirm", "nonce-1") and not await b.claimed("dry-run", "nonce-1")  # kinds apart
    await anyio.sleep(0.7)  # the claim's life is the token's: then the key is gone
    assert not await a.claimed("confirm", "nonce-1")
    await close(a, b)


async def test_buckets_are_shared_and_taken_all_or_nothing(replicas: tuple[RedisState, RedisState]) -> None:
    a, b = replicas
    server, tool = Bucket("server", rate=0.01, burst=3), Bucket("tool", rate=0.01, burst=1)
    assert await a.take([server, tool]) is None  # both had a token
    waits = await b.take([server, tool])  # the tool's bucket is empty on every replica
    assert waits is not None and waits[0] == 0.0 and waits[1] == pytest.approx(100.0, abs=1.0)
    assert await b.take([server]) is None  # the refused call took nothing from the server's bucket
    assert await a.take([server]) is None
    refused = await b.take([server])
    assert refused is not None and refused[0] == pytest.approx(100.0, abs=1.0)
    fast = Bucket("fast", rate=20.0, burst=1)  # refilled by the Redis server's own clock
    assert await a.take([fast]) is None and await b.take([fast]) is not None
    await anyio.sleep(0.08)
    assert await b.take([fast]) is None
    await close(a, b)


async def test_rate_limiter_over_redis_counts_every_replica(replicas: tuple[RedisState, RedisState]) -> None:
    a, b = replicas
    spec = RateLimitSpec(rate=20 / 60, burst=20)
    limiters = [RateLimiter(spec, {}, state=a), RateLimiter(spec, {}, state=b)]
    outcomes = []
    for n in range(30):
        outcomes.append(await limiters[n % 2].admit("notes_search", f"caller-{n}"))
    assert [o is None for o in outcomes].count(True) == 20
    refusal = next(o for o in outcomes if o is not None)
    assert refusal.limit == "server" and 0 < refusal.retry_after <= 3.0
    assert "this server's limit is 20/min (burst 20, shared by all callers)" in refusal.message()
    await close(a, b)


async def test_a_keyed_write_runs_once_and_its_result_is_kept(replicas: tuple[RedisState, RedisState]) -> None:
    a, b = replicas
    assert await a.begin("key-1", 5) == ("run", None)
    assert await b.begin("key-1", 5) == ("busy", None)  # running on a: b waits for it
    await a.finish("key-1", '{"content": []}', 60)
    assert await b.begin("key-1", 5) == ("done", '{"content": []}')
    assert await a.begin("key-2", 5) == ("run", None)
    await b.abandon("key-2")  # not b's mark: nothing happens
    assert await b.begin("key-2", 5) == ("busy", None)
    await a.abandon("key-2")  # the write failed on a: a retry runs it again
    assert await b.begin("key-2", 5) == ("run", None)
    await close(a, b)


async def test_a_store_that_goes_away_fails_closed_and_comes_back(tmp_path: Path) -> None:
    with redis_server(tmp_path) as server:
        state = RedisState(server.url, "outage")
        assert await state.claim("confirm", "before", 60)
        server.stop()
        for operation in (state.claim("confirm", "during", 60), state.take([Bucket("b", 1.0, 1)]), state.ping()):
            with pytest.raises(ToolFailure) as down:
                await operation
            error = down.value.error
            assert error.code == ErrorCode.STATE_UNAVAILABLE and error.retryable and error.retry_after == 1.0
            assert PASSWORD not in error.message and f"redis://127.0.0.1:{server.port}/0" in error.message
            assert "nothing was sent" in error.message
        assert not state.healthy
        server.start_again()
        assert await state.claim("confirm", "after", 60)  # the same client: its pool reconnects by itself
        assert state.healthy
        await state.aclose()


async def test_a_wrong_password_is_unavailable_and_never_shown(redis: RedisServer) -> None:
    state = RedisState(f"redis://:not-{PASSWORD}@127.0.0.1:{redis.port}/0", "wrong")
    with pytest.raises(ToolFailure) as refused:
        await state.ping()
    assert refused.value.error.code == ErrorCode.STATE_UNAVAILABLE
    assert PASSWORD not in refused.value.error.message and "not-" not in refused.value.error.message
    await state.aclose()


async def test_rediss_tls_with_a_password(tmp_path: Path) -> None:
    """`rediss://` with the CA in the URL's ssl_ca_certs; a store whose certificate is not trusted is unavailable."""
    with redis_server(tmp_path, tls=True) as server:
        state = RedisState(server.url, "tls")
        assert await state.claim("confirm", "over-tls", 60) and not await state.claim("confirm", "over-tls", 60)
        await state.aclose()
        untrusted = RedisState(server.url.split("?", 1)[0], "tls")  # the system's CAs: not this one
        with pytest.raises(ToolFailure) as refused:
            await untrusted.ping()
        assert refused.value.error.code == ErrorCode.STATE_UNAVAILABLE and PASSWORD not in refused.value.error.message
        assert "certificate" in refused.value.error.message.lower()
        await untrusted.aclose()


async def test_memory_state_keeps_claims_and_buckets_for_one_process() -> None:
    now = [100.0]
    memory = MemoryState(clock=lambda: now[0])
    assert await memory.claim("confirm", "n", 10) and not await memory.claim("confirm", "n", 10)
    assert await memory.claimed("confirm", "n")
    now[0] += 11
    assert not await memory.claimed("confirm", "n") and await memory.claim("confirm", "n", 10)
    assert await memory.take([Bucket("x", 1.0, 1)]) is None
    assert await memory.take([Bucket("x", 1.0, 1)]) == [pytest.approx(1.0)]
    assert await memory.begin("k", 5) == ("run", None) and await memory.begin("k", 5) == ("run", None)  # no cache
    assert not memory.shared
