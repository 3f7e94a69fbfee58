"""The compile stage: a loaded spec plus overlays -> a frozen, hashed Manifest (README.md: the modules)."""

from __future__ import annotations

from openapi2mcp.compiler.compile import Compiled, compile_manifest
from openapi2mcp.compiler.names import name_warnings

__all__ = [
    "Compiled",
    "compile_manifest",
    "name_warnings",
]
