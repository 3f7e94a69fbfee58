"""A client that went away, told from a bug: what both transports and the CLIs make of an error.

A client may go away at any moment: close stdin (the end of input, the normal way to stop a
stdio server), stop reading stdout (the server's next write gets EPIPE), reset its connection,
or die. None of that is a fault of this server, so it ends the session quietly; anything else
still escapes as a bug, named by what is inside its exception group (`describe`).
"""

from __future__ import annotations

from typing import Final

import anyio

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
