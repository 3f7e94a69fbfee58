"""The compile stage: a loaded spec plus overlays -> a frozen, hashed Manifest (README.md: the modules)."""

from __future__ import annotations

from openapi2mcp.compiler.compile import Compiled, Unexposed, compile_manifest
from openapi2mcp.compiler.files import CompiledFiles, LoadOptions, compile_files, load_with_overlays, read_overlays
from openapi2mcp.compiler.names import (
    CLAUDE_CODE_LIMIT,
    CLIENT_NAME_PATTERN,
    claude_code_name,
    name_warnings,
    served_name,
)
from openapi2mcp.compiler.pin import pin_warning

__all__ = [
    "CLAUDE_CODE_LIMIT",
    "CLIENT_NAME_PATTERN",
    "Compiled",
    "CompiledFiles",
    "LoadOptions",
    "Unexposed",
    "claude_code_name",
    "compile_files",
    "compile_manifest",
    "load_with_overlays",
    "name_warnings",
    "pin_warning",
    "read_overlays",
    "served_name",
]
