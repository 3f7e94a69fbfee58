"""The load stage: a spec file or URL in, one self-contained OpenAPI 3.x document out."""

from __future__ import annotations

from openapi2mcp.loader.load import LoadedSpec, load_spec
from openapi2mcp.loader.reader import FETCH_DEADLINE
from openapi2mcp.loader.untrusted import MAX_NESTING, NUMBER_HINT, check_document, number_problem

__all__ = [
    "FETCH_DEADLINE",
    "MAX_NESTING",
    "NUMBER_HINT",
    "LoadedSpec",
    "check_document",
    "load_spec",
    "number_problem",
]
