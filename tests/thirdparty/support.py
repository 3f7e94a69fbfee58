"""Helpers for the third-party tier (tests/thirdparty/): real REST servers we did not write.

Each server is installed by `.ci/thirdparty.sh` into a venv of its own under `.cache/thirdparty/`
and started here as a subprocess on 127.0.0.1, the way its own documentation starts it. Its
OpenAPI description is fetched from the running server (never written by hand), the curated
overlay of `overlays/` is served with `openapi2mcp serve`, and the SDK client calls the tools over
stdio and Streamable HTTP in both protocol eras.

* `server_python(name)` is the venv's interpreter, or a skip (a failure under CI=true).
* `Relay` is a TCP relay in front of a server: the MCP servers talk to the upstream through it,
  so a test can pull the plug (connection refused, as for a server that is down) and put it back
  without restarting a server that takes seconds to start.
* `Service` is one started server: its process group, its log, its real and relayed URLs.
* `Overlay` is the curated overlay a test serves (overlays/NAME.yaml) and the tools it lists.
* `User` answers the confirmations (elicitation on 2025-11-25, input-required on 2026-07-28).
"""

from __future__ import annotations

import contextlib
import os
import selectors
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import httpx2
import mcp_types as types
import pytest
import yaml
from anyio.from_thread import BlockingPortal

from tests.e2e_support import LEGACY, MODERN, HttpServer, McpSession
from tests.local import ROOT, free_port
from tests.spec_proxy import SpecProxy

if TYPE_CHECKING:
    from tests.properties import Target

OVERLAYS = ROOT / "overlays"
LOCKS = ROOT / ".ci" / "thirdparty"

# transport id -> (kind, Client mode, negotiated protocol version), as in test_e2e.py
TRANSPORTS: dict[str, tuple[str, str, str]] = {
    "stdio-2025-11-25": ("stdio", "legacy", LEGACY),
    "stdio-2026-07-28": ("stdio", "auto", MODERN),
    "http-2025-11-25": ("http", "legacy", LEGACY),
    "http-2026-07-28": ("http", "auto", MODERN),
}


def cache_dir() -> Path:
    return Path(os.environ.get("OPENAPI2MCP_THIRDPARTY_CACHE") or ROOT / ".cache" / "thirdparty")


def server_python(name: str) -> Path:
    """The interpreter of the venv `.ci/thirdparty.sh` made for `name`, or skip (fail under CI=true)."""
    venv = cache_dir() / name
    python = venv / "bin" / "python"
    marker = venv / ".installed"
    if python.exists() and marker.exists():
        return python
    message = (
        f"the third-party server {name!r} is not installed in {venv}; run .ci/thirdparty.sh {name} "
        f"(it installs the pinned versions of .ci/thirdparty/{name}.txt from PyPI)"
    )
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"CI=true requires the third-party servers: {message}", pytrace=False)
    pytest.skip(message)


# ============================================================================ a pluggable TCP relay


class Relay:
    """127.0.0.1:PORT -> 127.0.0.1:target, byte for byte, in one thread; `unplug()` takes it down.

    Unplugged, nothing listens on PORT (connections are refused) and open connections are cut:
    what a client sees when the server is down. `plug()` listens on the same port again.
    """

    def __init__(self, target_port: int) -> None:
        self.target = ("127.0.0.1", target_port)
        self.port = free_port()
        self._lock = threading.Lock()
        self._selector = selectors.DefaultSelector()
        self._listener: socket.socket | None = None
        self._pairs: dict[socket.socket, socket.socket] = {}
        self._stop = False
        self._clients: set[socket.socket] = set()
        self.bytes_up = 0  # bytes relayed towards the server: unchanged means nothing was sent
        self._wake_r, self._wake_w = socket.socketpair()
        self._selector.register(self._wake_r, selectors.EVENT_READ, "wake")
        self.plug()
        self._thread = threading.Thread(target=self._run, name=f"relay-{self.port}", daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def plug(self) -> None:
        with self._lock:
            if self._listener is not None:
                return
            listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            listener.bind(("127.0.0.1", self.port))
            listener.listen(64)
            listener.setblocking(False)
            self._listener = listener
            self._selector.register(listener, selectors.EVENT_READ, "accept")
        self._wake()

    def unplug(self) -> None:
        with self._lock:
            if self._listener is not None:
                self._selector.unregister(self._listener)
                self._listener.close()
                self._listener = None
            for sock in list(self._pairs):
                self._drop(sock)
        self._wake()

    @contextlib.contextmanager
    def unplugged(self) -> Iterator[None]:
        self.unplug()
        try:
            yield
        finally:
            self.plug()

    def close(self) -> None:
        self._stop = True
        self.unplug()
        self._thread.join(5)

    def _wake(self) -> None:
        with contextlib.suppress(OSError):
            self._wake_w.send(b"x")

    def _drop(self, sock: socket.socket) -> None:
        other = self._pairs.pop(sock, None)
        for s in (sock, other):
            if s is None:
                continue
            self._pairs.pop(s, None)
            self._clients.discard(s)
            with contextlib.suppress(KeyError, ValueError):
                self._selector.unregister(s)
            s.close()

    def _run(self) -> None:
        while not self._stop:
            for key, _ in self._selector.select(timeout=0.5):
                with self._lock:
                    if key.data == "wake":
                        self._wake_r.recv(4096)
                    elif key.data == "accept" and key.fileobj is self._listener:
                        self._accept()
                    elif key.fileobj in self._pairs:
                        self._pump(key.fileobj)  # type: ignore[arg-type]

    def _accept(self) -> None:
        assert self._listener is not None
        try:
            client, _ = self._listener.accept()
        except BlockingIOError:
            return
        try:
            upstream = socket.create_connection(self.target, timeout=5)
        except OSError:
            client.close()  # the server behind is gone: so is this connection
            return
        self._clients.add(client)
        for a, b in ((client, upstream), (upstream, client)):
            a.setblocking(True)
            self._pairs[a] = b
            self._selector.register(a, selectors.EVENT_READ, "pump")

    def _pump(self, sock: socket.socket) -> None:
        try:
            data = sock.recv(65536)
            if data:
                self._pairs[sock].sendall(data)
                if sock in self._clients:
                    self.bytes_up += len(data)
                return
        except OSError:
            pass
        self._drop(sock)


# ============================================================================ a started server


class Service:
    """A third-party server in its own process group on 127.0.0.1, reached through a `Relay`."""

    def __init__(self, name: str, process: subprocess.Popen[bytes], port: int, log: Path) -> None:
        self.name = name
        self.process = process
        self.port = port
        self.log = log
        self.relay = Relay(port)

    @property
    def direct(self) -> str:
        """The server's own address (for the test's setup requests)."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def url(self) -> str:
        """The address the MCP servers use (through the relay)."""
        return self.relay.url

    @classmethod
    def start(
        cls,
        name: str,
        command: Callable[[int], Sequence[str]],
        *,
        ready: str,
        log_dir: Path,
        env: Mapping[str, str] | None = None,
        cwd: Path | None = None,
        timeout: float = 120,
    ) -> Service:
        """Run `command(port)` and wait until GET `ready` (a path) answers 200."""
        port = free_port()
        log = log_dir / f"{name}-{port}.log"
        child_env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAPI2MCP_", "PYTHON"))}
        child_env.update(env or {})
        with log.open("wb") as out:
            process = subprocess.Popen(
                list(command(port)),
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=child_env,
                cwd=cwd or log_dir,
                start_new_session=True,  # its own process group: stop() ends any workers it starts
            )
        service = cls(name, process, port, log)
        deadline = time.monotonic() + timeout
        while True:
            if process.poll() is not None:
                service.stop()
                raise RuntimeError(f"{name} exited with {process.returncode} before it was ready:\n{service.tail()}")
            try:
                if httpx2.get(service.direct + ready, timeout=2.0, trust_env=False).status_code == 200:
                    return service
            except httpx2.TransportError:
                pass
            if time.monotonic() > deadline:
                service.stop()
                raise RuntimeError(f"{name} did not answer GET {ready} within {timeout} s:\n{service.tail()}")
            time.sleep(0.1)

    def tail(self, lines: int = 40) -> str:
        return "\n".join(self.log.read_text(encoding="utf-8", errors="replace").splitlines()[-lines:])

    def stop(self) -> None:
        self.relay.close()
        if self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(15)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()

    def __enter__(self) -> Service:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def fetch_spec(url: str, dest: Path, headers: Mapping[str, str] | None = None) -> Path:
    """Save the OpenAPI description a running server publishes."""
    response = httpx2.get(url, headers=dict(headers or {}), timeout=30.0, trust_env=False)
    response.raise_for_status()
    dest.write_bytes(response.content)
    return dest


# ============================================================================ overlays


class Overlay:
    """The curated overlay of `overlays/NAME.yaml`, as the tests serve it."""

    def __init__(self, name: str) -> None:
        self.full = OVERLAYS / f"{name}.yaml"

    def data(self) -> dict[str, Any]:
        data: dict[str, Any] = yaml.safe_load(self.full.read_text(encoding="utf-8"))
        return data

    def listed(self) -> list[str]:
        """The tool names a client lists, in overlay order."""
        return [t["name"] for t in self.data()["tools"] if t.get("risk") != "forbidden"]


# ============================================================================ the user behind the client


class User:
    """Answers each confirmation as told (`answer`), and remembers what was asked."""

    def __init__(self) -> None:
        self.answer = "accept"
        self.asked: list[str] = []

    def reset(self) -> None:
        self.answer = "accept"
        self.asked.clear()

    async def __call__(self, ctx: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        self.asked.append(params.message)
        if self.answer == "accept":
            return types.ElicitResult(action="accept", content={"confirm": True})
        return types.ElicitResult(action=self.answer)  # type: ignore[arg-type]


def connect(
    loop: BlockingPortal,
    transport: str,
    *,
    http: HttpServer,
    args: Sequence[str],
    env: Mapping[str, str],
    user: User,
    log_dir: Path,
) -> McpSession:
    """One SDK client session over `transport`: to the module's HTTP server, or a stdio process."""
    kind, mode, _ = TRANSPORTS[transport]
    if kind == "http":
        return McpSession.http(loop, http.url, mode=mode, label=transport, elicitation_callback=user)
    return McpSession.stdio(
        loop, list(args), mode=mode, label=transport, log_dir=log_dir, env=env, elicitation_callback=user
    )


# ============================================================================ the property tier


@contextlib.contextmanager
def generated_target(args: list[str], env: Mapping[str, str]) -> Iterator[Target]:
    """`serve ARGS` (a spec and its overlays) compiled as the CLI does, in memory, with the server
    behind a proxy that checks every request against the spec the tools were compiled from."""
    from openapi2mcp.compiler import compile_manifest
    from openapi2mcp.loader import load_spec
    from openapi2mcp.overlay import apply_oai_overlays, read_overlay
    from openapi2mcp.upstream.settings import base_url
    from tests.properties import served_in_memory  # hypothesis: loaded by the tests that use it

    spec = args[0]
    docs = [read_overlay(Path(args[i + 1])) for i, a in enumerate(args) if a == "--overlay"]
    oai = [d for d in docs if d.oai is not None]
    loaded = load_spec(spec, patch=(lambda d: apply_oai_overlays(d, oai)) if oai else None)
    manifest = compile_manifest(loaded, docs).manifest
    url = urlsplit(base_url(manifest.upstream, env)[0])
    with SpecProxy.start(loaded.document, target=f"{url.scheme}://{url.netloc}", base_path=url.path) as proxy:
        environ = {**env, "OPENAPI2MCP_BASE_URL": proxy.url + url.path}
        with served_in_memory(manifest.server.name, manifest, environ, lambda: proxy.violations) as target:
            yield target
