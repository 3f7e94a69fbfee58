"""JSON as results carry it: the compact spelling, its size in UTF-8 bytes, the names of its types."""

from __future__ import annotations

import json
from typing import Any


def dumps(value: Any) -> str:
    """The compact JSON spelling used for text content and for byte caps."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def json_size(value: Any) -> int:
    return utf8_size(dumps(value))


def utf8_size(text: str) -> int:
    """UTF-8 bytes of `text` (no copy when it is ASCII: `isascii` is O(1) in CPython)."""
    return len(text) if text.isascii() else len(text.encode())


def json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def clip(text: str, limit: int = 200) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"
