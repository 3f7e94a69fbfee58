"""Authoring: from a spec to a curated overlay (`openapi2mcp init`; lint and diff join it later).

Used from outside only through these names; the modules are private to the package.
"""

from __future__ import annotations

from openapi2mcp.authoring.draft import DEFAULT_MAX_TOOLS, Draft, Summary, draft_overlay

__all__ = [
    "DEFAULT_MAX_TOOLS",
    "Draft",
    "Summary",
    "draft_overlay",
]
