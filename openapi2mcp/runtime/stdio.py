"""The stdio transport: `serve_stdio`, and the reading of stdin it needs.

The session ends when the client closes stdin, and also, quietly, when it goes away in any other
way (gone.py). Why stdin is read here and not by the SDK: `mcp.server.stdio` reads stdin in a
worker thread that cannot be cancelled, so a client that closes stdout but keeps stdin open leaves
the server blocked in that read forever, with no one to answer. Here a daemon thread reads the raw descriptor
(`os.read`: no buffer lock for interpreter shutdown to wait on) and hands over whole lines; when
the session ends, the thread is abandoned where it blocks and the process can exit.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from collections.abc import AsyncIterator
from typing import Final

import anyio
import anyio.from_thread
import anyio.lowlevel
from anyio.streams.memory import MemoryObjectReceiveStream
from mcp.server.stdio import stdio_server

from openapi2mcp.runtime.core import Runtime
from openapi2mcp.runtime.gone import client_gone
from openapi2mcp.runtime.logs import configure_logging

log = logging.getLogger("openapi2mcp.runtime")

_READ_SIZE: Final = 65536


@contextlib.asynccontextmanager
async def stdin_lines(fd: int = 0) -> AsyncIterator[MemoryObjectReceiveStream[str]]:
    """The lines of stdin (UTF-8, bad bytes replaced, as the SDK reads them), for `stdio_server(stdin=...)`.

    Read by a daemon thread from a private duplicate of the descriptor, so that leaving the
    context never waits for a read that may never return.
    """
    source = os.dup(fd)
    null = os.open(os.devnull, os.O_RDONLY)  # while serving, whatever else reads fd 0 gets EOF, not the wire
    os.dup2(null, fd)
    os.close(null)
    send, receive = anyio.create_memory_object_stream[str](0)
    token = anyio.lowlevel.current_token()

    def pump() -> None:
        buffered = bytearray()
        try:
            while chunk := os.read(source, _READ_SIZE):
                buffered += chunk
                if b"\n" not in chunk:
                    continue
                *lines, rest = bytes(buffered).split(b"\n")
                buffered = bytearray(rest)
                for line in lines:
                    anyio.from_thread.run(send.send, line.decode("utf-8", "replace") + "\n", token=token)
            if buffered:
                anyio.from_thread.run(send.send, buffered.decode("utf-8", "replace"), token=token)
        except Exception:  # the session is over (stream closed, loop gone), or stdin failed: nothing to tell
            pass
        finally:  # the end of input (or of the session)
            with contextlib.suppress(Exception):
                anyio.from_thread.run_sync(send.close, token=token)

    threading.Thread(target=pump, name="openapi2mcp-stdin", daemon=True).start()
    try:
        yield receive
    finally:
        receive.close()
        os.dup2(source, fd)  # a reader thread blocked in os.read stays there; `source` stays open under it


async def serve_stdio(runtime: Runtime, *, log_level: str | int | None = None) -> None:
    """Serve `runtime` over stdin/stdout until the client leaves, then close it (logs go to stderr;
    the SDK points fd 1 at stderr while serving).

    The session ends when the client closes stdin, and also, quietly, when it goes away in any
    other way (stdout closed: EPIPE; see gone.py): one log line, no error. Calls in flight are
    cancelled (their audit lines say so).
    """
    if log_level is not None:
        configure_logging(log_level)
    server = runtime.build_server()
    try:
        async with stdin_lines() as lines, stdio_server(stdin=lines) as (read, write):  # type: ignore[arg-type]
            await server.run(read, write, server.create_initialization_options())
    except Exception as e:  # the transport's task group wraps what its reader and writer raise
        why = client_gone(e)
        if why is None:
            raise
        log.warning("the client went away: %s; the session is over", why)
    finally:
        await runtime.aclose()
