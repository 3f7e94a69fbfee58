"""Result shaping: an upstream body becomes the structured content a client sees."""

from __future__ import annotations

from openapi2mcp.shape.shape import (
    Repair,
    Shaped,
    Shaper,
    compile_expression,
    describe_error,
    drop_nulls,
    dumps,
    error_path,
    leaf_errors,
    notice,
    path_pattern,
    repair_notice,
    search,
    truthy,
)

__all__ = [
    "Repair",
    "Shaped",
    "Shaper",
    "compile_expression",
    "describe_error",
    "drop_nulls",
    "dumps",
    "error_path",
    "leaf_errors",
    "notice",
    "path_pattern",
    "repair_notice",
    "search",
    "truthy",
]
