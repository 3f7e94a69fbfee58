"""Serving a Manifest as a process: the run options (one table for both commands), and a frozen package's command."""

from __future__ import annotations

from openapi2mcp.serving.options import (
    CHECK,
    ENV_ONLY,
    OPTIONS,
    Option,
    RunOptions,
    UsageError,
    options_markdown,
    path_flags,
    resolve,
)
from openapi2mcp.serving.package import auth_options, local_scopes, main, parser, run, serve

__all__ = [
    "CHECK",
    "ENV_ONLY",
    "OPTIONS",
    "Option",
    "RunOptions",
    "UsageError",
    "auth_options",
    "local_scopes",
    "main",
    "options_markdown",
    "parser",
    "path_flags",
    "resolve",
    "run",
    "serve",
]
