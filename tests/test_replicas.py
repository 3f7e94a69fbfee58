"""Replicas behind a load balancer: two `openapi2mcp serve` processes with one signing key (issue 6).

The 2026-07-28 protocol is stateless, so a deployment may send each request of one conversation
to another replica. What a replica hands out must then be accepted by the others:

* a confirmation: the input-required result of `emails_send_external` (mailfiles, critical)
  carries a `requestState` signed with `OPENAPI2MCP_SIGNING_KEY`; the user's answer may come back
  to another replica, which sends the e-mail exactly once. The state stays bound to its
  arguments there, and a process with another key refuses it;
* a pagination cursor (petstore, `overlay-tasks.yaml`): pages fetched alternately from the two
  replicas give every item exactly once, in order; a process with another key refuses it.

Everything is real: the example upstream (one per API, shared by all processes), three
`python -m openapi2mcp serve --transport http --stateless` processes per API (A and B with the
shared key, a third with another key), started once per module and polled on /healthz, and the
SDK `mcp.Client` over Streamable HTTP in its default mode (which negotiates 2026-07-28). The
input-required round trip is driven by hand (`allow_input_required=True`) so that its two legs
can go to different processes.
"""

from __future__ import annotations

import contextlib
import json
import signal
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2
import mcp_types as types
import pytest
from mcp import Client, MCPError
from mcp.client.session import ClientRequestContext

from examples import Upstream
from tests.e2e_support import EXAMPLES, MODERN, HttpServer, err, no_traceback, ok

pytestmark = pytest.mark.anyio

SHARED_KEY = "replicas-shared-signing-key-" + "0123456789" * 3
OTHER_KEY = "replicas-another-signing-key-" + "9876543210" * 3
MAIL_TOKEN = "replicas-mailfiles-upstream-token"
PET_TOKEN = "replicas-petstore-upstream-token"
MAIL = {"to": "anna.schmidt@example.com", "subject": "Q3 numbers", "body": "Hello Anna, the numbers are attached."}
YES = {"confirm": types.ElicitResult(action="accept", content={"confirm": True})}


@dataclass
class Replicas:
    """One upstream; A and B share a signing key, `foreign` has another one."""

    up: Upstream
    a: HttpServer
    b: HttpServer
    foreign: HttpServer
    audit: dict[str, Path]

    @property
    def servers(self) -> dict[str, HttpServer]:
        return {"a": self.a, "b": self.b, "foreign": self.foreign}

    def audit_lines(self, name: str) -> list[dict[str, Any]]:
        """The `result` lines of one process's audit log."""
        path = self.audit[name]
        lines = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()] if path.exists() else []
        return [line for line in lines if line["phase"] == "result"]


@contextlib.contextmanager
def replicas(
    example: str, overlay: Path, upstream_env: dict[str, str], log_dir: Path, up: Upstream
) -> Iterator[Replicas]:
    """Start A, B (shared key) and a third process (another key) in parallel; stop them with SIGTERM."""
    spec = EXAMPLES / example / "openapi.yaml"
    keys = {"a": SHARED_KEY, "b": SHARED_KEY, "foreign": OTHER_KEY}
    audit = {name: log_dir / f"audit-{name}.jsonl" for name in keys}

    def start(name: str) -> HttpServer:
        args = [str(spec), "--overlay", str(overlay), "--stateless", "--audit-log", str(audit[name])]
        return HttpServer.start(args, log_dir=log_dir, env={**upstream_env, "OPENAPI2MCP_SIGNING_KEY": keys[name]})

    with ThreadPoolExecutor(len(keys)) as pool:
        futures = {name: pool.submit(start, name) for name in keys}
    started: dict[str, HttpServer] = {}
    failures: list[BaseException] = []
    for name, future in futures.items():
        try:
            started[name] = future.result()
        except Exception as e:  # collect every failure, stop what did start
            failures.append(e)
    try:
        if failures:
            raise failures[0]
        for server in started.values():
            assert server.health()["status"] == "ok", server.health()
        yield Replicas(up, started["a"], started["b"], started["foreign"], audit)
    finally:
        with ThreadPoolExecutor(max(len(started), 1)) as pool:  # all at once: a second each
            stopping = {name: pool.submit(server.stop, signal.SIGTERM, 10) for name, server in started.items()}
        statuses = {}
        for name, server in started.items():
            try:
                statuses[name] = stopping[name].result()
            finally:
                server.stop(signal.SIGKILL)  # only if it is still running
    for name, server in started.items():  # a clean shutdown: no traceback, exit on the signal
        no_traceback(server.stderr())
        assert statuses[name] in (0, -signal.SIGTERM, 128 + signal.SIGTERM), (name, statuses[name], server.stderr())


@pytest.fixture(scope="module")
def mail(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Replicas]:
    with Upstream.start("mailfiles", auth=f"bearer:{MAIL_TOKEN}") as up:
        env = {"MAILFILES_API_URL": up.base_url, "MAILFILES_API_TOKEN": MAIL_TOKEN}
        overlay = EXAMPLES / "mailfiles" / "overlay.yaml"
        with replicas("mailfiles", overlay, env, tmp_path_factory.mktemp("mail-replicas"), up) as group:
            yield group
        up.assert_no_violations()


@pytest.fixture(scope="module")
def pets(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Replicas]:
    with Upstream.start("petstore", auth=f"bearer:{PET_TOKEN}") as up:
        env = {"PETSTORE_URL": up.base_url, "PETSTORE_TOKEN": PET_TOKEN}
        overlay = EXAMPLES / "petstore" / "overlay-tasks.yaml"
        with replicas("petstore", overlay, env, tmp_path_factory.mktemp("pet-replicas"), up) as group:
            yield group
        up.assert_no_violations()


class User:
    """An elicitation callback that records being asked; here the test answers by hand instead."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    async def __call__(self, context: ClientRequestContext, params: types.ElicitRequestParams) -> types.ElicitResult:
        self.asked.append(params.message)
        return types.ElicitResult(action="decline")


@contextlib.asynccontextmanager
async def clients(group: Replicas, user: User) -> Any:
    """One SDK client per process, default mode (2026-07-28), declaring elicitation."""
    async with contextlib.AsyncExitStack() as stack:
        connected = {}
        for name, server in group.servers.items():
            client = await stack.enter_async_context(Client(server.url, elicitation_callback=user))
            assert client.protocol_version == MODERN, (name, client.protocol_version)
            connected[name] = client
        yield connected


# ============================================================================ confirmation


async def test_a_confirmation_asked_on_one_replica_is_answered_on_the_other(mail: Replicas) -> None:
    up = mail.up
    up.reset()
    user = User()
    async with clients(mail, user) as c:
        # A asks: an input-required result, nothing sent yet
        first = await c["a"].session.call_tool("emails_send_external", MAIL, allow_input_required=True)
        assert isinstance(first, types.InputRequiredResult), first
        assert list(first.input_requests or {}) == ["confirm"] and first.request_state
        request = (first.input_requests or {})["confirm"]
        assert isinstance(request, types.ElicitRequest) and "Q3 numbers" in request.params.message
        state = first.request_state
        assert up.domain()["emails_sent"] == 0

        # the state replayed on B with other arguments (another recipient): refused, nothing sent
        other = {**MAIL, "to": "someone.else@example.com"}
        with pytest.raises(MCPError) as refused:
            await c["b"].session.call_tool(
                "emails_send_external", other, input_responses=YES, request_state=state, allow_input_required=True
            )
        assert (refused.value.code, refused.value.error.message) == (-32602, "Invalid or expired requestState")
        assert refused.value.error.data == {"reason": "invalid_request_state"}

        # a process with another key: refused, nothing sent
        with pytest.raises(MCPError) as foreign:
            await c["foreign"].session.call_tool(
                "emails_send_external", MAIL, input_responses=YES, request_state=state, allow_input_required=True
            )
        assert (foreign.value.code, foreign.value.error.message) == (-32602, "Invalid or expired requestState")
        assert up.domain()["emails_sent"] == 0 and up.count("sendExternalEmail") == 0

        # B completes what A asked: the e-mail goes out, once
        done = await c["b"].session.call_tool(
            "emails_send_external", MAIL, input_responses=YES, request_state=state, allow_input_required=True
        )
        assert isinstance(done, types.CallToolResult), done
        assert ok(done)["status"] == "queued"
        assert up.domain()["emails_sent"] == 1 and up.domain()["sent_to"] == [MAIL["to"]]

        # the answered state again on B: one answer, one call
        with pytest.raises(MCPError) as again:
            await c["b"].session.call_tool(
                "emails_send_external", MAIL, input_responses=YES, request_state=state, allow_input_required=True
            )
        assert again.value.code == -32602

        # a "yes" without the state is no answer: A asks again, still nothing more sent
        forged = await c["a"].session.call_tool(
            "emails_send_external", MAIL, input_responses=YES, allow_input_required=True
        )
        assert isinstance(forged, types.InputRequiredResult)
    assert user.asked == []  # every round trip here was driven by hand
    assert up.domain()["emails_sent"] == 1 and up.count("sendExternalEmail") == 1

    # each process audited its own leg
    def outcomes(name: str) -> list[tuple[str, str | None, str | None]]:
        return [
            (line["outcome"], line["confirmation"], line["error"])
            for line in mail.audit_lines(name)
            if line["tool"] == "emails_send_external"
        ]

    assert outcomes("a") == [("input_required", "requested", None)] * 2
    assert outcomes("b") == [
        ("denied", None, "REQUEST_STATE_INVALID"),
        ("ok", "confirmed", None),
        ("denied", None, "REQUEST_STATE_INVALID"),
    ]
    assert outcomes("foreign") == [("denied", None, "REQUEST_STATE_INVALID")]


async def test_without_a_way_to_ask_no_replica_sends(mail: Replicas) -> None:
    """A client without elicitation gets CONFIRMATION_REQUIRED from every replica."""
    up = mail.up
    up.reset()
    for server in (mail.a, mail.b):
        async with Client(server.url) as plain:
            assert plain.protocol_version == MODERN
            assert err(await plain.call_tool("emails_send_external", MAIL), "CONFIRMATION_REQUIRED")
    assert up.count("sendExternalEmail") == 0


# ============================================================================ cursors


def upstream_ids(up: Upstream) -> list[Any]:
    """Every pet id in the upstream's own order, asked of the upstream directly (not through openapi2mcp)."""
    response = httpx2.get(
        up.base_url + "/pets-offset",
        params={"offset": 0, "limit": 50},
        headers={"Authorization": f"Bearer {PET_TOKEN}"},
        trust_env=False,
        timeout=10,
    )
    response.raise_for_status()
    body = response.json()
    assert body["total"] == len(body["items"]), body  # all of them on one page
    return [pet["id"] for pet in body["items"]]


@pytest.mark.parametrize(
    ("tool", "arguments"),
    [
        ("pages_offset", {"limit": 3}),  # 3 of the upstream's pages of 4: resumes mid-page
        ("pages_body_cursor", {}),  # the upstream's cursor inside ours
        ("pages_header_cursor", {"limit": 5}),
    ],
)
async def test_pages_alternate_between_replicas(pets: Replicas, tool: str, arguments: dict[str, Any]) -> None:
    up = pets.up
    up.reset()
    expected = upstream_ids(up)
    assert len(expected) > 8, expected  # enough for several pages
    seen: list[Any] = []
    served_by: list[str] = []
    async with clients(pets, User()) as c:
        cursor: str | None = None
        while True:
            name = "ab"[len(served_by) % 2]  # page 1 on A, page 2 on B, page 3 on A, ...
            page = ok(await c[name].call_tool(tool, {**arguments, **({"cursor": cursor} if cursor else {})}))
            served_by.append(name)
            seen += [item["id"] for item in page["items"]]
            cursor = page.get("next_cursor")
            assert page["has_more"] is (cursor is not None), page
            if cursor is None:
                break
            assert len(served_by) < 20, served_by
        assert seen == expected  # every item exactly once, in order
        assert "b" in served_by and len(served_by) >= 3, served_by

        # a cursor from A, taken to a process with another key: refused, naming the argument
        first = ok(await c["a"].call_tool(tool, arguments))
        refused = err(
            await c["foreign"].call_tool(tool, {**arguments, "cursor": first["next_cursor"]}), "CURSOR_INVALID"
        )
        assert refused["field"] == "cursor" and refused["message"].startswith("cursor:"), refused
        assert refused["retryable"] is False
        # ... while B continues it
        assert ok(await c["b"].call_tool(tool, {**arguments, "cursor": first["next_cursor"]}))["items"]
