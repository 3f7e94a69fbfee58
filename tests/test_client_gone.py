"""A client that goes away ends its session quietly; it is never reported as a bug in openapi2mcp.

Real `openapi2mcp serve` processes over stdio, driven with raw JSON-RPC lines, whose client
closes stdin, closes its end of stdout (the server then gets EPIPE) or both, at every moment of a
session: before initialize, mid-handshake, idle, during a long upstream request, and while a
2025-11-25 elicitation waits for the user. The server must exit 0 with at most one line saying
the client went away, and a call in flight must still get its audit result line. Over HTTP, a
client that drops its connection mid-call leaves the server serving everyone else.

The MCP Inspector did exactly this under load (it hangs up mid-handshake at its connect timeout),
and the server printed "internal error (... TaskGroup (1 sub-exception)) ... This is a bug".
"""

from __future__ import annotations

import json
import select
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import httpx2
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from openapi2mcp.manifest import BodySpec
from openapi2mcp.runtime import client_gone
from tests.e2e_support import LEGACY, MODERN, HttpServer, child_env, cli, no_traceback
from tests.local import serve_in_thread
from tests.runtime_upstream import manifest, op, q, tool

BUG = "This is a bug in openapi2mcp"
GONE = "client went away"


# ============================================================ a slow upstream that says when it is called


class Upstream:
    """`GET /slow?s=N` answers after N seconds (or when released); `entered` is set when a request arrives."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()
        self.finished = threading.Event()

    def reset(self) -> None:
        self.entered.clear()
        self.release.clear()
        self.finished.clear()

    def app(self) -> Starlette:
        import anyio.to_thread

        async def slow(request: Request) -> JSONResponse:
            self.entered.set()
            seconds = float(request.query_params.get("s", "30"))
            await anyio.to_thread.run_sync(lambda: self.release.wait(seconds))
            self.finished.set()
            return JSONResponse({"slept": seconds})

        async def echo(request: Request) -> JSONResponse:
            return JSONResponse({"body": (await request.body()).decode()})

        return Starlette(routes=[Route("/slow", slow), Route("/echo", echo, methods=["POST"])])


@pytest.fixture(scope="module")
def upstream() -> Iterator[tuple[Upstream, str]]:
    up = Upstream()
    with serve_in_thread(up.app()) as url:
        yield up, url
    up.release.set()


@pytest.fixture(scope="module")
def manifest_file(upstream: tuple[Upstream, str], tmp_path_factory: pytest.TempPathFactory) -> Path:
    _, url = upstream
    post = tool("launch_post", op("POST", "/echo", body=BodySpec(arg="payload", media_type="application/json")),
                risk="high")
    launch = post.model_copy(update={"branches": [post.branches[0].model_copy(update={"risk": "high"})]})  # asks first
    m = manifest(
        url,
        tool("slow_get", op("GET", "/slow", q("s"))),
        launch,
    )
    path = tmp_path_factory.mktemp("gone") / "manifest.json"
    path.write_text(m.to_json(), encoding="utf-8")
    return path


# ============================================================================ a raw stdio client


def line(message: dict[str, Any]) -> bytes:
    return (json.dumps({"jsonrpc": "2.0", **message}) + "\n").encode()


def initialize(ident: int = 1, *, elicitation: bool = False) -> bytes:
    caps: dict[str, Any] = {"elicitation": {}} if elicitation else {}
    return line({"id": ident, "method": "initialize", "params": {
        "protocolVersion": LEGACY, "capabilities": caps, "clientInfo": {"name": "raw", "version": "1"}}})


INITIALIZED = line({"method": "notifications/initialized"})


def call(ident: int, name: str, arguments: dict[str, Any]) -> bytes:
    return line({"id": ident, "method": "tools/call", "params": {"name": name, "arguments": arguments}})


def modern_call(ident: int, name: str, arguments: dict[str, Any]) -> bytes:
    meta = {"io.modelcontextprotocol/protocolVersion": MODERN,
            "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "1"},
            "io.modelcontextprotocol/clientCapabilities": {}}
    return line({"id": ident, "method": "tools/call",
                 "params": {"name": name, "arguments": arguments, "_meta": meta}})


@dataclass
class Raw:
    process: subprocess.Popen[bytes]
    audit: Path
    stderr_file: Path

    def send(self, data: bytes) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(data)
        self.process.stdin.flush()

    def read(self, timeout: float = 60) -> dict[str, Any]:
        """The next message on stdout."""
        out: IO[bytes] | None = self.process.stdout
        assert out is not None
        ready, _, _ = select.select([out], [], [], timeout)
        assert ready, f"no message within {timeout} s; stderr: {self.stderr()}"
        text = out.readline()
        assert text, f"stdout closed; stderr: {self.stderr()}"
        message: dict[str, Any] = json.loads(text)
        return message

    def handshake(self, *, elicitation: bool = False) -> None:
        self.send(initialize(elicitation=elicitation))
        assert self.read()["id"] == 1
        self.send(INITIALIZED)

    def close_stdin(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()

    def close_stdout(self) -> None:
        """The client stops reading: the server's next write gets EPIPE."""
        assert self.process.stdout is not None
        self.process.stdout.close()

    def wait(self, timeout: float = 60) -> int:
        try:
            return self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            raise AssertionError(f"the server did not exit {timeout} s after its client left; stderr: "
                                 f"{self.stderr()}") from None

    def stderr(self) -> str:
        return self.stderr_file.read_text(encoding="utf-8", errors="replace")

    def audit_lines(self) -> list[dict[str, Any]]:
        if not self.audit.exists():
            return []
        return [json.loads(x) for x in self.audit.read_text(encoding="utf-8").splitlines() if x.strip()]


@pytest.fixture
def raw(manifest_file: Path, tmp_path: Path) -> Iterator[Raw]:
    audit = tmp_path / "audit.jsonl"
    err = tmp_path / "stderr.txt"
    with err.open("wb") as err_out:
        process = subprocess.Popen(
            cli("serve", "--manifest", str(manifest_file), "--audit-log", str(audit)),
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err_out, env=child_env(),
        )
    session = Raw(process, audit, err)
    try:
        yield session
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        for stream in (process.stdin, process.stdout):
            if stream is not None and not stream.closed:
                try:
                    stream.close()
                except BrokenPipeError:
                    pass


def leave(session: Raw, how: str) -> None:
    if how == "stdin":
        session.close_stdin()
    elif how == "stdout":
        session.close_stdout()
    else:
        session.close_stdout()
        session.close_stdin()


def quiet_exit(session: Raw) -> str:
    """The server exits 0, says nothing of a bug, prints no traceback and at most one line about the client."""
    code = session.wait()
    text = session.stderr()
    assert code == 0, f"exit {code}; stderr:\n{text}"
    assert BUG not in text and "internal error" not in text, text
    no_traceback(text)
    assert len([x for x in text.splitlines() if x.strip()]) <= 1, text
    return text


# ============================================================================ stdio: every moment, every way of leaving

# close stdin (the end of input); stop reading stdout (EPIPE at the next write, stdin left open); both
HOW = ["stdin", "stdout", "both"]


def test_before_initialize(raw: Raw) -> None:
    raw.close_stdin()
    assert quiet_exit(raw) == ""  # an ordinary end of input: nothing to say


@pytest.mark.parametrize("how", HOW)
def test_mid_handshake(raw: Raw, how: str) -> None:
    """initialize is sent and the client hangs up before reading the answer (the Inspector at its connect timeout)."""
    if how != "stdin":
        raw.close_stdout()
    raw.send(initialize())
    if how != "stdout":
        raw.close_stdin()
    text = quiet_exit(raw)
    assert text == "" or GONE in text, text


@pytest.mark.parametrize("how", HOW)
def test_idle_after_handshake(raw: Raw, how: str) -> None:
    raw.handshake()
    leave(raw, how)
    if how == "stdout":
        raw.send(line({"id": 2, "method": "tools/list"}))  # its answer meets the closed pipe
    quiet_exit(raw)


def _mid_call(raw: Raw, up: Upstream, how: str, *, modern: bool) -> None:
    up.reset()
    if modern:
        raw.send(modern_call(2, "slow_get", {"s": 30}))
    else:
        raw.handshake()
        raw.send(call(2, "slow_get", {"s": 30}))
    assert up.entered.wait(30), raw.stderr()  # the upstream request is in flight
    leave(raw, how)
    if how == "stdout":
        up.release.set()  # the call ends and its answer meets the closed pipe
    quiet_exit(raw)
    up.release.set()


@pytest.mark.parametrize("modern", [False, True], ids=["2025-11-25", "2026-07-28"])
@pytest.mark.parametrize("how", HOW)
def test_mid_call_during_a_long_upstream_request(
    raw: Raw, upstream: tuple[Upstream, str], how: str, modern: bool
) -> None:
    _mid_call(raw, upstream[0], how, modern=modern)


def results_of(session: Raw, name: str) -> list[dict[str, Any]]:
    return [x for x in session.audit_lines() if x.get("phase") == "result" and x.get("tool") == name]


@pytest.mark.parametrize("how", ["stdin", "stdout", "both"])
def test_a_call_in_flight_keeps_its_audit_result_line(raw: Raw, upstream: tuple[Upstream, str], how: str) -> None:
    """Cancelled when stdin closes, finished when only stdout did: either way one result line says how it ended."""
    _mid_call(raw, upstream[0], how, modern=False)
    found = results_of(raw, "slow_get")
    assert len(found) == 1, raw.audit_lines()
    assert found[0]["outcome"] == ("ok" if how == "stdout" else "cancelled"), found[0]
    assert found[0]["requests"], found[0]  # the request that was sent is on record


@pytest.mark.parametrize("how", HOW)
def test_while_an_elicitation_is_pending(raw: Raw, how: str) -> None:
    raw.handshake(elicitation=True)
    raw.send(call(2, "launch_post", {"payload": {"go": 1}}))
    asked = raw.read()
    assert asked.get("method") == "elicitation/create", asked
    leave(raw, how)
    if how == "stdout":  # the user says yes; the call runs and its answer meets the closed pipe
        raw.send(line({"jsonrpc": "2.0", "id": asked["id"], "result": {"action": "accept",
                                                                        "content": {"confirm": True}}}))
    quiet_exit(raw)
    assert len(results_of(raw, "launch_post")) <= 1, raw.audit_lines()


# ============================================================ HTTP: a dropped connection is that client's business only


@pytest.fixture(scope="module", params=["json", "sse"])
def http(request: pytest.FixtureRequest, manifest_file: Path, tmp_path_factory: pytest.TempPathFactory
         ) -> Iterator[tuple[HttpServer, Path]]:
    folder = tmp_path_factory.mktemp(f"gone-http-{request.param}")
    audit = folder / "audit.jsonl"
    args = ["--manifest", str(manifest_file), "--audit-log", str(audit), "--log-level", "info"]
    with HttpServer.start(args + (["--sse"] if request.param == "sse" else []), log_dir=folder) as server:
        yield server, audit


HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


def open_session(server: HttpServer, *, elicitation: bool = False) -> dict[str, str]:
    """A 2025-11-25 session (initialize + initialized); the headers of its later requests."""
    answer = httpx2.post(server.url, content=initialize(elicitation=elicitation), headers=HEADERS, trust_env=False)
    answer.raise_for_status()
    headers = {**HEADERS, "Mcp-Session-Id": answer.headers["mcp-session-id"], "MCP-Protocol-Version": LEGACY}
    httpx2.post(server.url, content=INITIALIZED, headers=headers, trust_env=False).raise_for_status()
    return headers


def send_raw(server: HttpServer, body: bytes, headers: dict[str, str], *, whole: bool = True) -> socket.socket:
    """A POST on a connection of its own, which the test then drops (`whole=False`: half the body)."""
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=30)
    head = "".join(f"{k}: {v}\r\n" for k, v in {**headers, "Content-Length": str(len(body))}.items())
    sock.sendall(f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\n{head}\r\n".encode()
                 + (body if whole else body[: len(body) // 2]))
    return sock


def drop(sock: socket.socket) -> None:
    """Hang up hard (RST), as a killed client does."""
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
    sock.close()


def still_serving(server: HttpServer, upstream: Upstream) -> None:
    """Another client is served in full, and the server said nothing of a bug."""
    upstream.release.set()
    headers = open_session(server)
    answer = httpx2.post(server.url, content=call(9, "slow_get", {"s": 0}), headers=headers, trust_env=False)
    assert answer.status_code == 200, answer.text
    assert '"isError":false' in answer.text.replace(" ", ""), answer.text
    assert server.health()["status"] == "ok"
    text = server.stderr()
    assert BUG not in text and "Exception in ASGI application" not in text, text
    no_traceback(text)


@pytest.mark.parametrize("moment", ["half_a_request", "mid_handshake", "mid_call", "elicitation_pending"])
def test_http_client_drops_its_connection(
    http: tuple[HttpServer, Path], upstream: tuple[Upstream, str], moment: str
) -> None:
    server, audit = http
    up, _ = upstream
    up.reset()
    if moment == "half_a_request":
        drop(send_raw(server, initialize(), HEADERS, whole=False))
    elif moment == "mid_handshake":
        drop(send_raw(server, initialize(), HEADERS))
    elif moment == "mid_call":
        sock = send_raw(server, call(2, "slow_get", {"s": 30}), open_session(server))
        assert up.entered.wait(30), server.stderr()
        drop(sock)
    else:
        sock = send_raw(server, call(2, "launch_post", {"payload": {"go": 1}}), open_session(server, elicitation=True))
        if "--sse" not in server.process.args:  # type: ignore[operator]
            drop(sock)  # JSON answers cannot carry the request: CONFIRMATION_REQUIRED, whoever reads it
        else:
            seen = b""
            while b"elicitation/create" not in seen:  # the question is out; no one will answer it
                chunk = sock.recv(65536)
                assert chunk, seen
                seen += chunk
            drop(sock)
    still_serving(server, up)
    if moment == "mid_call":  # a disconnection is not a cancellation (Streamable HTTP): the call finishes
        assert up.finished.wait(30)
        deadline = time.monotonic() + 30
        while not any(x.get("arguments") == {"s": 30} and x.get("phase") == "result" for x in _lines(audit)):
            assert time.monotonic() < deadline, _lines(audit)
            time.sleep(0.05)


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines() if x.strip()] if path.exists() else []


# ============================================================================ only the client-went-away family is quiet


def test_client_gone_is_every_error_of_the_family_and_nothing_else() -> None:
    import anyio

    assert client_gone(BrokenPipeError()) == "it stopped reading the server's output (broken pipe)"
    assert client_gone(ExceptionGroup("tg", [ExceptionGroup("inner", [BrokenPipeError()]),
                                             anyio.ClosedResourceError()]))
    assert client_gone(ConnectionResetError()) and client_gone(anyio.BrokenResourceError())
    assert client_gone(ExceptionGroup("tg", [anyio.EndOfStream()]))
    assert client_gone(ExceptionGroup("tg", [BrokenPipeError(), KeyError("k")])) is None  # a bug stays a bug
    assert client_gone(KeyError("k")) is None
    assert client_gone(OSError("disk full")) is None


def test_a_bug_inside_a_task_group_is_still_a_bug_and_named(capsys: pytest.CaptureFixture[str],
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    import typer

    from openapi2mcp.cli.app import _guarded

    def fails() -> None:
        raise ExceptionGroup("unhandled errors in a TaskGroup", [KeyError("tool_x")])

    monkeypatch.delenv("OPENAPI2MCP_DEBUG", raising=False)
    with pytest.raises(typer.Exit) as exit_:
        _guarded(fails)
    assert exit_.value.exit_code == 1
    text = capsys.readouterr().err
    assert "internal error (KeyError: 'tool_x')" in text and BUG in text, text
    monkeypatch.setenv("OPENAPI2MCP_DEBUG", "1")  # the traceback, for the report
    with pytest.raises(ExceptionGroup):
        _guarded(fails)
