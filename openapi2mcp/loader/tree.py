"""The plain JSON tree every loader module passes along: key paths, JSON pointers, copies.

A spec is parsed into dicts, lists and scalars (parse.py) and stays that way through bundling,
conversion and checks; these helpers walk and copy that data and locate findings in it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any
from urllib.parse import unquote

from openapi2mcp.errors import Location, SpecWarning

JsonPath = tuple[str | int, ...]


def json_pointer(path: Iterable[str | int]) -> str:
    """A JSON pointer ("/paths/~1pets/get") for a key path."""
    return "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in path)


def pointer_parts(fragment: str) -> tuple[str, ...]:
    """The keys of a `$ref` fragment; lenient about a missing leading slash, like prance."""
    parts = unquote(fragment).split("/")
    while parts and not parts[0]:
        parts = parts[1:]
    return tuple(p.replace("~1", "/").replace("~0", "~") for p in parts)


def follow(document: Any, parts: Iterable[str]) -> Any:
    """The value at a pointer; LookupError names the first key that is missing."""
    node = document
    done: list[str] = []
    for part in parts:
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            raise LookupError(f"no {part!r} at {json_pointer(done) or 'the top'}")
        done.append(part)
    return node


def copy_json(value: Any) -> Any:
    """A deep copy of JSON data; a json round trip is faster than copy.deepcopy (1.3x on GitHub's spec)."""
    if isinstance(value, (dict, list)):
        return json.loads(json.dumps(value))
    return value


def warn(message: str, path: JsonPath, hint: str | None = None) -> SpecWarning:
    """A warning located by the JSON pointer of `path`."""
    return SpecWarning(message=message, location=Location(pointer=json_pointer(path) or None), hint=hint)


def type_name(value: Any) -> str:
    """What a value is, for a message: "a mapping", "a list", "empty"..."""
    if value is None:
        return "empty"
    return {dict: "a mapping", list: "a list", str: "a string", bool: "a boolean"}.get(
        type(value), f"a {type(value).__name__}"
    )
