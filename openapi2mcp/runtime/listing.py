"""Cursor pagination of the MCP lists a server offers: tools, resources, templates, prompts.

A cursor is opaque to clients: base64 of {offset, kind, tag}. The tag is a digest of the names the
list holds, in order (the caller's view when permissions hide some entries), so a cursor from
another list, a Manifest with other entries or another caller's view is a JSON-RPC "Invalid
cursor" (-32602), never a page of the wrong list; where the names are the same, the offset means
the same place. (Not the Manifest's content hash: `serve SPEC` does not compute one to start.)
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from collections.abc import Sequence
from typing import TypeVar

import mcp_types as types
from mcp.shared.exceptions import MCPError

T = TypeVar("T")


def view_tag(names: Sequence[str]) -> str:
    """The tag of a (possibly filtered) list: a digest of the names it shows, in order."""
    return hashlib.sha256("\0".join(names).encode()).hexdigest()[:12]


def page(items: Sequence[T], cursor: str | None, *, size: int, kind: str, tag: str) -> tuple[list[T], str | None]:
    """One page of `items` from `cursor` and the cursor of the next page (None on the last)."""
    offset = 0
    if cursor is not None:
        try:
            data = json.loads(base64.urlsafe_b64decode(cursor.encode("ascii")))
            offset = data["o"]
            valid = isinstance(offset, int) and 0 <= offset < len(items) and data["k"] == kind and data["m"] == tag
        except (ValueError, KeyError, TypeError, binascii.Error, UnicodeError):
            valid = False
        if not valid:
            raise MCPError(code=types.INVALID_PARAMS, message="Invalid cursor")
    end = offset + size
    nxt = None
    if end < len(items):
        raw = json.dumps({"o": end, "k": kind, "m": tag}, separators=(",", ":")).encode()
        nxt = base64.urlsafe_b64encode(raw).decode("ascii")
    return list(items[offset:end]), nxt
