"""Result shaping: an upstream body becomes the structured content a client sees.

See README.md in this folder for the steps and where each lives.
"""

from __future__ import annotations

from openapi2mcp.shape.cut import notice
from openapi2mcp.shape.describe import describe_error, error_path, leaf_errors
from openapi2mcp.shape.expressions import compile_expression, search, truthy
from openapi2mcp.shape.jsonsize import dumps
from openapi2mcp.shape.nulls import drop_nulls
from openapi2mcp.shape.repair import Repair, path_pattern, repair_notice
from openapi2mcp.shape.shaper import Shaped, Shaper

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
