"""Serving a Manifest as a process: the run options, and the command of a frozen package."""

from __future__ import annotations

from openapi2mcp.serving.package import RunOptions, main, run, serve

__all__ = [
    "RunOptions",
    "main",
    "run",
    "serve",
]
