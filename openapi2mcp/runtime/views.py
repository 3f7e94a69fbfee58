"""tools/list per caller: the tools a caller's scopes let it see, in pages (access.py decides `visible`).

A tool the caller may not see does not exist for it: it is not listed, and calling it is an
unknown tool (calls.py). Lists are cached per scope set; a cursor is valid for callers with the
same view only (listing.view_tag).
"""

from __future__ import annotations

from collections.abc import Mapping

import mcp_types as types

from openapi2mcp.manifest import step_up_scope
from openapi2mcp.runtime import listing
from openapi2mcp.runtime.access import Caller, visible
from openapi2mcp.runtime.tools import Tool

MAX_VIEWS = 256  # scope sets whose lists are kept; a server with more starts over


class Views:
    """The listed tools per scope set, and one page of them."""

    def __init__(self, tools: Mapping[str, Tool], page_size: int) -> None:
        self.tools = tools
        self.page_size = page_size
        self._views: dict[tuple[bool, frozenset[str]], tuple[list[Tool], str]] = {}

    def page(self, cursor: str | None, caller: Caller) -> types.ListToolsResult:
        """One page of the tools the caller may use; a cursor is valid for callers with the same view."""
        listed, tag = self._view(caller)
        tools, nxt = listing.page(listed, cursor, size=self.page_size, kind="tools", tag=tag)
        return types.ListToolsResult(tools=[t.definition for t in tools], next_cursor=nxt)  # built when first listed

    def _view(self, caller: Caller) -> tuple[list[Tool], str]:
        """The tools a caller's scopes allow, and the cursor tag of that list (cached per scope set)."""
        key = (caller.all_scopes, caller.scopes)
        view = self._views.get(key)
        if view is None:
            listed = [t for t in self.tools.values() if visible(t.spec, caller)]
            tag = listing.view_tag([t.spec.name for t in listed])
            if len(self._views) >= MAX_VIEWS:
                self._views.clear()
            view = self._views[key] = (listed, tag)
        return view

    def scopes_supported(self) -> list[str]:
        """Every scope the tools use (permissions and step-up scopes), for the protected-resource metadata."""
        found: set[str] = set()
        for tool in self.tools.values():
            found.update(tool.spec.permissions)
            extra = step_up_scope(tool.spec)
            if extra:
                found.add(extra)
        return sorted(found)
