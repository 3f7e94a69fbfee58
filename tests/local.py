"""This machine: the checkout, the real-world spec corpus, free ports and ASGI apps served in a thread.

Shared by the tests and the benchmarks (`benchmarks/_common.py` imports it), so it imports only
the standard library at the top; uvicorn is imported when an app is served.
"""

from __future__ import annotations

import contextlib
import os
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"


def corpus_dir() -> Path | None:
    """$OPENAPI2MCP_CORPUS, else ../shared/corpus beside the repository, else the copy that
    .ci/fetch-corpus.sh unpacks into .cache/corpus (None when none is there)."""
    env = os.environ.get("OPENAPI2MCP_CORPUS")
    candidates = [Path(env)] if env else []
    candidates += [ROOT.parent / "shared" / "corpus", ROOT / ".cache" / "corpus"]
    for c in candidates:
        if c.is_dir():
            return c.resolve()
    return None


def free_port() -> int:
    """A TCP port of 127.0.0.1 that nothing listens on right now (for a server in another process)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def serve_in_thread(app: Any, port: int | None = None, *, timeout: float = 10.0, lifespan: str = "on") -> Iterator[str]:
    """Run an ASGI app (lifespan on) with uvicorn on 127.0.0.1 in a daemon thread; yields its base URL.

    The socket is bound here and handed to uvicorn, so no other process can take the port
    between choosing and listening on it.
    """
    import uvicorn

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port or 0))
    port = int(sock.getsockname()[1])
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="error", lifespan=lifespan))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + timeout
        while not server.started:
            if time.monotonic() > deadline or not thread.is_alive():
                raise RuntimeError(f"the test server on 127.0.0.1:{port} did not start")
            time.sleep(0.02)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout)
        sock.close()
