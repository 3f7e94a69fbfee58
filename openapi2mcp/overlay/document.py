"""`OverlayFile`: one overlay as read, with its model, its plain data and the place of every key.

The overlay stage's output: the compiler reports a problem in an overlay through
`OverlayFile.problem(path, ...)`, which names the file, the line and column of the deepest key
known on `path`, and the dotted key (`tools[2](notes_search).params.limit`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from openapi2mcp.errors import Location, Problem
from openapi2mcp.overlay.model import OaiOverlay, ToolOverlay

Position = tuple[int, int]  # 1-based line, column
KeyPath = tuple[str | int, ...]


@dataclass
class OverlayFile:
    """One `--overlay` document, parsed and validated, with the positions of its keys."""

    path: str
    sha256: str
    positions: dict[KeyPath, Position] = field(repr=False)
    data: Any = field(default=None, repr=False)  # the plain document, for messages
    tools: ToolOverlay | None = None
    oai: OaiOverlay | None = None

    @property
    def kind(self) -> str:
        if self.tools is not None:
            return "openapi2mcp overlay 1"
        assert self.oai is not None
        return f"oai overlay {self.oai.overlay}"

    def location(self, path: KeyPath) -> Location:
        """File, line and dotted key of the deepest known key on `path`."""
        line = col = None
        for n in range(len(path), -1, -1):
            pos = self.positions.get(tuple(path[:n]))
            if pos:
                line, col = pos
                break
        return Location(file=self.path, line=line, column=col, pointer=format_path(path, self) or None)

    def problem(self, path: KeyPath, message: str, hint: str | None = None) -> Problem:
        return Problem(message=message, location=self.location(path), hint=hint)


def format_path(path: KeyPath, doc: OverlayFile | None = None) -> str:
    """tools[2].params.limit, with the tool's name when known: tools[2](notes_search).params.limit"""
    out = ""
    for i, part in enumerate(path):
        if isinstance(part, int):
            out += f"[{part}]"
            name = _tool_name(doc, path[:i], part) if path[:i] in (("tools",), ("resources",), ("prompts",)) else None
            out += f"({name})" if name else ""
        else:
            out += ("." if out else "") + part
    return out


def _tool_name(doc: OverlayFile | None, section: KeyPath, index: int) -> str | None:
    tools = doc.data.get(str(section[0])) if doc and isinstance(doc.data, dict) else None
    if isinstance(tools, list) and index < len(tools) and isinstance(tools[index], dict):
        name = tools[index].get("name")
        return name if isinstance(name, str) else None
    return None
