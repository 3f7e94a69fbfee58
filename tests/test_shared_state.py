"""Replicas that share state through Redis (`serve --state`, issue 13.4): three processes, one truth.

tests/test_replicas.py shows what a shared signing key gives two replicas (a state, a token or a
cursor from one is accepted by the other). With `--state redis://...` the replicas also share
what must happen only once or only so often:

* a confirmation's request state, answered on B, is refused when replayed on C (one answer, one
  call, across replicas, where without `--state` each process would accept it once);
* a dry-run token from A is used for the real call on B and refused on C (single-use);
* a retried idempotent create on another replica returns the first result without a second
  upstream request;
* a global `--rate-limit 20/min` holds across the three: of 45 calls spread over them, 20 succeed;
* cursors from one replica page on the others (a cursor is not single-use: a page read twice is
  a read);
* Redis stopped mid-run: calls that need the shared state fail closed with STATE_UNAVAILABLE
  (retryable, nothing sent), plain reads go on; Redis started again: the same processes recover
  by themselves (the recovery time is printed);
* `serve --workers 2` serves one port with two processes that share the signing key and the state.

Everything is real: Debian's redis-server (tests/redis_support.py) with a password, the example
upstreams, `python -m openapi2mcp serve --transport http --stateless` processes configured by
environment (the state URL with its password is a secret: it never appears in their output),
and the SDK `mcp.Client` over Streamable HTTP (2026-07-28, the stateless era).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import anyio
import httpx2
import mcp_types as types
import pytest
from mcp import Client, MCPError

from examples import Upstream
from tests.e2e_support import EXAMPLES, MODERN, HttpServer, err, no_traceback, ok
from tests.redis_support import PASSWORD, RedisServer, redis_server

pytestmark = pytest.mark.anyio

KEY = "shared-state-signing-key-" + "0123456789" * 3
MAIL_TOKEN = "shared-state-mailfiles-token"
PET_TOKEN = "shared-state-petstore-token"
MAIL = {"to": "anna.schmidt@example.com", "subject": "Q3 numbers", "body": "Hello Anna, the numbers are attached."}
BULK = {"templateId": "tmpl_newsletter_q3", "segmentId": "seg_active_customers"}
YES = {"confirm": types.ElicitResult(action="accept", content={"confirm": True})}
NAMES = ("a", "b", "c")


def days_ahead(days: int) -> str:
    moment = datetime.now(UTC).replace(hour=23, minute=59, second=0, microsecond=0) + timedelta(days=days)
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class Group:
    """One upstream, three replicas sharing a signing key and a Redis."""

    up: Upstream
    servers: dict[str, HttpServer]
    redis: RedisServer
    audit: dict[str, Path]

    def audit_lines(self, name: str, tool: str) -> list[dict[str, Any]]:
        path = self.audit[name]
        lines = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()] if path.exists() else []
        return [line for line in lines if line["phase"] == "result" and line["tool"] == tool]


@contextlib.contextmanager
def replicas(example: str, overlay: Path, env: dict[str, str], log_dir: Path, up: Upstream,
             redis: RedisServer) -> Iterator[Group]:
    """A, B and C: the same key, the same state URL (by environment: it holds the password)."""
    spec = EXAMPLES / example / "openapi.yaml"
    audit = {name: log_dir / f"audit-{name}.jsonl" for name in NAMES}
    shared = {**env, "OPENAPI2MCP_SIGNING_KEY": KEY, "OPENAPI2MCP_STATE_URL": redis.url,
              "OPENAPI2MCP_LOG_LEVEL": "info"}

    def start(name: str) -> HttpServer:
        args = [str(spec), "--overlay", str(overlay), "--stateless", "--audit-log", str(audit[name])]
        return HttpServer.start(args, log_dir=log_dir, env=shared)

    with ThreadPoolExecutor(len(NAMES)) as pool:
        futures = {name: pool.submit(start, name) for name in NAMES}
    started = {name: f.result() for name, f in futures.items() if f.exception() is None}
    try:
        for future in futures.values():
            if future.exception() is not None:
                raise future.exception()  # type: ignore[misc]
        yield Group(up, started, redis, audit)
    finally:
        with ThreadPoolExecutor(max(len(started), 1)) as pool:
            statuses = dict(zip(started, pool.map(lambda s: s.stop(signal.SIGTERM, 15), started.values()), strict=True))
        for name, server in started.items():
            text = server.stderr() + server.stdout_path.read_text(errors="replace")
            no_traceback(text)
            assert PASSWORD not in text, f"{name} showed the state store's password"
            assert statuses[name] in (0, -signal.SIGTERM, 128 + signal.SIGTERM), (name, statuses[name], text)


@pytest.fixture(scope="module")
def redis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    with redis_server(tmp_path_factory.mktemp("redis")) as server:
        yield server


@pytest.fixture(scope="module")
def mail(redis: RedisServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Group]:
    with Upstream.start("mailfiles", auth=f"bearer:{MAIL_TOKEN}") as up:
        env = {"MAILFILES_API_URL": up.base_url, "MAILFILES_API_TOKEN": MAIL_TOKEN}
        overlay = EXAMPLES / "mailfiles" / "overlay.yaml"
        with replicas("mailfiles", overlay, env, tmp_path_factory.mktemp("mail"), up, redis) as group:
            yield group
        up.assert_no_violations()


@pytest.fixture(scope="module")
def pets(redis: RedisServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Group]:
    with Upstream.start("petstore", auth=f"bearer:{PET_TOKEN}") as up:
        env = {"PETSTORE_URL": up.base_url, "PETSTORE_TOKEN": PET_TOKEN, "OPENAPI2MCP_RATE_LIMIT": "20/min"}
        overlay = EXAMPLES / "petstore" / "overlay-tasks.yaml"
        with replicas("petstore", overlay, env, tmp_path_factory.mktemp("pets"), up, redis) as group:
            yield group
        up.assert_no_violations()


@contextlib.asynccontextmanager
async def clients(group: Group, *, elicit: bool = True) -> Any:
    """One SDK client per replica (2026-07-28), declaring elicitation; the round trips are driven by hand."""

    async def never(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        raise AssertionError("the test answers by hand")

    async with contextlib.AsyncExitStack() as stack:
        connected = {}
        for name, server in group.servers.items():
            client = await stack.enter_async_context(Client(server.url, elicitation_callback=never if elicit else None))
            assert client.protocol_version == MODERN
            connected[name] = client
        yield connected


# ============================================================================ once across replicas


async def test_a_confirmation_answered_on_one_replica_is_refused_on_a_third(mail: Group) -> None:
    up = mail.up
    up.reset()
    mail.redis.command("FLUSHALL")
    async with clients(mail) as c:
        first = await c["a"].session.call_tool("emails_send_external", MAIL, allow_input_required=True)
        assert isinstance(first, types.InputRequiredResult) and first.request_state
        state = first.request_state
        done = await c["b"].session.call_tool("emails_send_external", MAIL, input_responses=YES,
                                              request_state=state, allow_input_required=True)
        assert isinstance(done, types.CallToolResult) and ok(done)["status"] == "queued"
        assert up.count("sendExternalEmail") == 1
        # the same answered state on C, within its ten minutes: refused, nothing sent again
        with pytest.raises(MCPError) as replay:
            await c["c"].session.call_tool("emails_send_external", MAIL, input_responses=YES,
                                           request_state=state, allow_input_required=True)
        assert (replay.value.code, replay.value.error.message) == (-32602, "Invalid or expired requestState")
        # ... and on A, which issued it
        with pytest.raises(MCPError):
            await c["a"].session.call_tool("emails_send_external", MAIL, input_responses=YES,
                                           request_state=state, allow_input_required=True)
    assert up.count("sendExternalEmail") == 1 and up.domain()["emails_sent"] == 1
    assert [(x["outcome"], x["error"]) for x in mail.audit_lines("c", "emails_send_external")] == [
        ("denied", "REQUEST_STATE_INVALID")]


async def test_a_dry_run_token_is_used_once_across_replicas(mail: Group) -> None:
    up = mail.up
    up.reset()
    mail.redis.command("FLUSHALL")
    async with clients(mail) as c:
        preview = ok(await c["a"].call_tool("emails_bulk_send", {**BULK, "dryRun": True}))
        token = preview["dryRunToken"]
        real = {**BULK, "dryRunToken": token}
        asked = await c["b"].session.call_tool("emails_bulk_send", real, allow_input_required=True)
        assert isinstance(asked, types.InputRequiredResult)
        started = await c["b"].session.call_tool("emails_bulk_send", real, input_responses=YES,
                                                 request_state=asked.request_state, allow_input_required=True)
        assert isinstance(started, types.CallToolResult) and ok(started)["status"] == "sending"
        # the token again, on C: refused before the user is asked (no input-required result)
        again = await c["c"].session.call_tool("emails_bulk_send", real, allow_input_required=True)
        assert isinstance(again, types.CallToolResult)
        refused = err(again, "DRY_RUN_REQUIRED")
        assert "already used" in refused["message"] and refused["field"] == "dryRunToken"
        # a new preview gives a new token, good for one more call
        fresh = ok(await c["c"].call_tool("emails_bulk_send", {**BULK, "dryRun": True}))["dryRunToken"]
        assert fresh != token
    assert up.domain()["campaigns_started"] == 1 and up.domain()["dry_runs"] == 2


async def test_a_retried_create_on_another_replica_returns_the_first_result(mail: Group) -> None:
    up = mail.up
    up.reset()
    mail.redis.command("FLUSHALL")
    link = {"fileId": "f_abc123", "expiresAt": days_ahead(30)}
    async with clients(mail) as c:
        first = await c["a"].call_tool("files_create_download_link", link)
        created = ok(first)
        retried = await c["b"].call_tool("files_create_download_link", link)
        assert ok(retried) == created
        assert (retried.meta or {}).get("openapi2mcp/idempotentReplay") is True
        assert (retried.meta or {})["openapi2mcp/traceId"] != (first.meta or {})["openapi2mcp/traceId"]
        assert up.count("createDownloadLink") == 1  # the retry sent nothing
        other = ok(await c["c"].call_tool("files_create_download_link", {**link, "expiresAt": days_ahead(31)}))
        assert other["url"] != created["url"] and up.count("createDownloadLink") == 2
    (line,) = mail.audit_lines("b", "files_create_download_link")
    assert line["outcome"] == "ok" and line["replayed"] is True and line["requests"] == []


# ============================================================================ limits and cursors


async def test_a_global_limit_holds_across_three_replicas(pets: Group) -> None:
    """--rate-limit 20/min (burst 20) on each of three replicas: 20 calls succeed in all, not 60."""
    pets.up.reset()
    pets.redis.command("FLUSHALL")
    async with clients(pets, elicit=False) as c:
        outcomes: list[types.CallToolResult] = []
        started = time.monotonic()

        async def call(name: str) -> None:
            outcomes.append(await c[name].call_tool("pages_offset", {"limit": 3}))

        async with anyio.create_task_group() as tg:
            for n in range(45):
                tg.start_soon(call, NAMES[n % 3])
        elapsed = time.monotonic() - started
    succeeded = [o for o in outcomes if not o.is_error]
    refused = [err(o, "RATE_LIMITED") for o in outcomes if o.is_error]
    print(f"\n20/min across 3 replicas: {len(succeeded)} of 45 calls succeeded in {elapsed:.2f} s")
    # a token comes back every 3 s: exactly 20 unless the burst itself took that long
    assert 20 <= len(succeeded) <= 20 + int(elapsed / 3), (len(succeeded), elapsed)
    assert len(refused) == 45 - len(succeeded)
    assert all(r["retryable"] and 0 < r["retryAfter"] <= 3.0 for r in refused), refused[:2]
    assert "this server's limit is 20/min (burst 20, shared by all callers)" in refused[0]["message"]
    assert pets.up.count("listPetsOffset") + pets.up.count("listPets") >= len(succeeded)


async def test_cursors_from_one_replica_page_on_the_others(pets: Group) -> None:
    pets.up.reset()
    pets.redis.command("FLUSHALL")
    async with clients(pets, elicit=False) as c:
        first = ok(await c["a"].call_tool("pages_offset", {"limit": 3}))
        cursor = first["next_cursor"]
        second = ok(await c["b"].call_tool("pages_offset", {"limit": 3, "cursor": cursor}))
        again = ok(await c["c"].call_tool("pages_offset", {"limit": 3, "cursor": cursor}))
        assert second["items"] == again["items"] and second["items"][0] not in first["items"]  # (cursors carry
        # their expiry, so the next cursors may differ by a second)
        third = ok(await c["c"].call_tool("pages_offset", {"limit": 3, "cursor": second["next_cursor"]}))
        ids = [item["id"] for page in (first, second, third) for item in page["items"]]
        assert len(ids) == len(set(ids)) == 9


# ============================================================================ the store goes away


async def test_redis_stopped_and_started_again_mid_run(mail: Group) -> None:
    up = mail.up
    up.reset()
    mail.redis.command("FLUSHALL")
    link = {"fileId": "f_abc123", "expiresAt": days_ahead(40)}
    async with clients(mail) as c:
        asked = await c["a"].session.call_tool("emails_send_external", MAIL, allow_input_required=True)
        assert isinstance(asked, types.InputRequiredResult)
        mail.redis.stop()
        # a plain read needs no shared state: it goes on
        assert ok(await c["a"].call_tool("files_list", {}))["items"]
        # an idempotent write needs the shared results, an answer needs its claim: both fail closed
        down = err(await c["b"].call_tool("files_create_download_link", link), "STATE_UNAVAILABLE")
        assert down["retryable"] is True and down["retryAfter"] == 1.0 and "nothing was sent" in down["message"]
        assert PASSWORD not in down["message"] and f"127.0.0.1:{mail.redis.port}/0" in down["message"]
        answer = await c["c"].session.call_tool("emails_send_external", MAIL, input_responses=YES,
                                                request_state=asked.request_state, allow_input_required=True)
        assert isinstance(answer, types.CallToolResult)
        err(answer, "STATE_UNAVAILABLE")
        assert up.count("createDownloadLink") == 0 and up.count("sendExternalEmail") == 0
        health = httpx2.get(mail.servers["b"].base + "/healthz", timeout=5, trust_env=False).json()
        assert health["status"] == "ok" and health["state"]["reachable"] is False  # the probe stays green
        assert PASSWORD not in json.dumps(health)

        mail.redis.start_again()  # the same port, an empty store
        back = time.monotonic()
        attempts = 0
        while True:
            attempts += 1
            result = await c["b"].call_tool("files_create_download_link", link)
            if not result.is_error:
                break
            err(result, "STATE_UNAVAILABLE")
            assert time.monotonic() - back < 30, "no recovery within 30 s"
            await anyio.sleep(0.05)
        recovered = time.monotonic() - back
        print(f"\nrecovered {recovered * 1000:.0f} ms after Redis answered again, at attempt {attempts}")
        assert attempts == 1  # the next call after Redis is back works: the pool reconnects by itself
        done = await c["c"].session.call_tool("emails_send_external", MAIL, input_responses=YES,
                                              request_state=asked.request_state, allow_input_required=True)
        assert isinstance(done, types.CallToolResult) and ok(done)["status"] == "queued"
    assert up.count("createDownloadLink") == 1 and up.count("sendExternalEmail") == 1
    for name in ("b", "c"):
        log = mail.servers[name].stderr()
        assert "unreachable" in log and "answers again" in log, log[-2000:]
    codes = [line["error"] for line in mail.audit_lines("b", "files_create_download_link")]
    assert codes[-2:] == ["STATE_UNAVAILABLE", None]  # this test's two calls on B


# ============================================================================ one host, several workers


def children(pid: int) -> list[int]:
    """The worker processes of `pid` (multiprocessing's spawned children; not its resource tracker)."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
                command = Path(f"/proc/{entry}/cmdline").read_bytes()
            except OSError:  # it ended meanwhile
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid and b"spawn_main" in command:
                found.append(int(entry))
    return found


def test_workers_serve_one_port_and_share_the_state(redis: RedisServer, tmp_path: Path) -> None:
    redis.command("FLUSHALL")
    with Upstream.start("petstore", auth=f"bearer:{PET_TOKEN}") as up:
        env = {"PETSTORE_URL": up.base_url, "PETSTORE_TOKEN": PET_TOKEN, "OPENAPI2MCP_RATE_LIMIT": "6/min",
               "OPENAPI2MCP_SIGNING_KEY": KEY}
        args = [str(EXAMPLES / "petstore" / "openapi.yaml"), "--overlay", str(EXAMPLES / "petstore" /
                "overlay-tasks.yaml"), "--stateless", "--workers", "2", "--state", redis.url]  # the flag, this time
        server = HttpServer.start(args, log_dir=tmp_path, env=env)
        try:
            deadline = time.monotonic() + 30
            while len(children(server.process.pid)) < 2:
                assert time.monotonic() < deadline, children(server.process.pid)
                time.sleep(0.1)
            workers = children(server.process.pid)
            environ = dict(item.split(b"=", 1) for item in Path(f"/proc/{workers[0]}/environ").read_bytes().split(
                b"\0") if b"=" in item)
            run_file = Path(environ[b"_OPENAPI2MCP_WORKER"].decode())  # what the workers read: no password in it
            assert run_file.stat().st_mode & 0o077 == 0 or run_file.parent.stat().st_mode & 0o077 == 0
            assert PASSWORD.encode() not in run_file.read_bytes() and environ[b"OPENAPI2MCP_STATE_URL"] == \
                redis.url.encode()

            async def page_through() -> list[types.CallToolResult]:
                out = []
                cursor = None
                for _ in range(8):  # a client (a connection) per call: any worker may answer
                    async with Client(server.url) as client:
                        result = await client.call_tool("pages_offset", {"limit": 3, **({"cursor": cursor}
                                                                                      if cursor else {})})
                    out.append(result)
                    if result.is_error:
                        continue
                    cursor = ok(result).get("next_cursor")
                return out

            results = anyio.run(page_through)
            assert [r.is_error for r in results] == [False] * 6 + [True] * 2  # 6/min for both workers together
            err(results[-1], "RATE_LIMITED")

            os.kill(workers[0], signal.SIGKILL)  # one worker dies: the other serves, a new one is started
            assert httpx2.get(server.base + "/healthz", timeout=5, trust_env=False).status_code == 200
            deadline = time.monotonic() + 30
            while len(children(server.process.pid)) < 2 or workers[0] in children(server.process.pid):
                assert time.monotonic() < deadline, children(server.process.pid)
                time.sleep(0.1)
        finally:
            status = server.stop(signal.SIGTERM, 20)
        text = server.stderr()
        no_traceback(text)
        assert "with 2 workers" in text and PASSWORD not in text
        assert status in (0, -signal.SIGTERM), (status, text[-2000:])
        assert children(server.process.pid) == []
