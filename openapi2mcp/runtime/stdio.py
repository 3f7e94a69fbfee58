"""The stdio transport's edges: reading stdin, and telling a client that left from a bug.

A client may go away at any moment: close stdin (the end of input, the normal way to stop a
stdio server), stop reading stdout (the server's next write gets EPIPE), or die. None of that is
a fault of this server, so it ends the session quietly; anything else still escapes as a bug.

Why stdin is read here and not by the SDK: `mcp.server.stdio` reads stdin in a worker thread that
cannot be cancelled, so a client that closes stdout but keeps stdin open leaves the server blocked
in that read forever, with no one to answer. Here a daemon thread reads the raw descriptor
(`os.read`: no buffer lock for interpreter shutdown to wait on) and hands over whole lines; when
the session ends, the thread is abandoned where it blocks and the process can exit.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import AsyncIterator
from typing import Final

import anyio
import anyio.from_thread
import anyio.lowlevel
from anyio.streams.memory import MemoryObjectReceiveStream

_READ_SIZE: Final = 65536

# What a transport raises when its peer is gone: the pipe or socket broke (EPIPE, ECONNRESET,
# ECONNABORTED), or a stream of the SDK was closed under a writer or reader because of it.
_GONE: Final = (ConnectionError, anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream)


def leaves(error: BaseException) -> list[BaseException]:
    """The exceptions inside an exception group (anyio task groups wrap what their tasks raise)."""
    if isinstance(error, BaseExceptionGroup):
        return [leaf for inner in error.exceptions for leaf in leaves(inner)]
    return [error]


def client_gone(error: BaseException) -> str | None:
    """Why the client is gone when `error` says only that (every exception in a group), else None."""
    found = leaves(error)
    if not found or not all(isinstance(e, _GONE) for e in found):
        return None
    if any(isinstance(e, BrokenPipeError) for e in found):
        return "it stopped reading the server's output (broken pipe)"
    if any(isinstance(e, ConnectionError) for e in found):
        return f"its connection was reset ({type(found[0]).__name__})"
    return "its streams closed mid-session"


def describe(error: BaseException, limit: int = 3) -> str:
    """`Type: message` of an error, or of the errors inside a group (not "unhandled errors in a TaskGroup")."""
    found = leaves(error) or [error]
    text = "; ".join(f"{type(e).__name__}: {e}" for e in found[:limit])
    return text + (f" (and {len(found) - limit} more)" if len(found) > limit else "")


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
