"""The compile stage: a loaded spec plus overlays -> a frozen, hashed Manifest."""

from __future__ import annotations

from openapi2mcp.compiler.compile import Compiled, compile_manifest
from openapi2mcp.compiler.names import name_warnings
from openapi2mcp.compiler.pin import pin_warning

__all__ = [
    "Compiled",
    "compile_manifest",
    "name_warnings",
    "pin_warning",
]
