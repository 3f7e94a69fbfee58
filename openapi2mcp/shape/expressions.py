"""JMESPath: expressions compiled once, evaluated over upstream data without crashing on its shape."""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import jmespath
import jmespath.exceptions

from openapi2mcp.errors import ErrorCode, ToolFailure
from openapi2mcp.shape.jsonsize import clip


@lru_cache(maxsize=2048)
def compile_expression(expr: str) -> Any:
    """Compile once; raises jmespath.exceptions.JMESPathError on a bad expression."""
    return jmespath.compile(expr)


def search(expr: str, data: Any) -> Any:
    """Evaluate; a type error over upstream data means the upstream broke the tool's assumptions."""
    try:
        return compile_expression(expr).search(data)
    except jmespath.exceptions.JMESPathError as e:
        raise ToolFailure.of(
            ErrorCode.UPSTREAM_INVALID_RESPONSE,
            f"the upstream response does not have the shape this tool expects ({expr!r}: {clip(str(e), 120)})",
        ) from None


def truthy(value: Any) -> bool:
    """JMESPath truthiness: null, false and empty strings/lists/objects are false; 0 is true."""
    return not (value is None or value is False or value in ("", [], {}))
