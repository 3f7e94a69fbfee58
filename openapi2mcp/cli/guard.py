"""How every command ends: a user's error exits 2 with its message, a bug exits 1 without a
traceback (OPENAPI2MCP_DEBUG=1 shows it), a reader that goes away (`| head`) is no error."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import NoReturn, TypeVar

import typer

T = TypeVar("T")


def fail(message: str, code: int = 2) -> NoReturn:
    typer.echo(f"openapi2mcp: {message}", err=True)
    raise typer.Exit(code)


def guarded(fn: Callable[[], T]) -> T:
    """Run a command body: user errors exit 2 with their message, bugs exit 1 without a traceback."""
    from openapi2mcp.errors import InputError
    from openapi2mcp.serving import UsageError  # stdlib only

    try:
        return fn()
    except InputError as e:
        fail("error: " + e.render())
    except UsageError as e:  # a run option's bad value: one line naming the flag or the variable
        fail(f"error: {e}")
    except typer.Exit:
        raise
    except KeyboardInterrupt:
        raise typer.Exit(130) from None
    except BrokenPipeError:  # `openapi2mcp inspect ... | head`: the reader left; not an error
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        raise typer.Exit(0) from None
    except ExceptionGroup as group:  # a task group (the stdio server's): the client may have closed its end
        from openapi2mcp.runtime import client_gone

        if client_gone(group) is None:
            return bug(group)
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        raise typer.Exit(0) from None
    except Exception as e:
        return bug(e)


def bug(e: Exception) -> NoReturn:
    from openapi2mcp.runtime import describe  # a task group's error is named by what is inside it
    from openapi2mcp.upstream import ConfigError

    if isinstance(e, ConfigError):
        fail(f"error: {e}")
    if os.environ.get("OPENAPI2MCP_DEBUG"):
        raise e
    fail(
        f"internal error ({describe(e)}). This is a bug in openapi2mcp; rerun with "
        "OPENAPI2MCP_DEBUG=1 for the traceback and report it.",
        code=1,
    )
