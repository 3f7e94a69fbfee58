"""The `openapi2mcp` command."""

from __future__ import annotations

from openapi2mcp.cli.app import main

__all__ = [
    "main",
]
