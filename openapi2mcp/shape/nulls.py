"""Null arguments: a model's `null` for an argument whose schema does not take null means "not given"."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from jsonschema.protocols import Validator

from openapi2mcp.shape.describe import error_path, leaf_errors

MAX_NULL_ROUNDS: Final = 8


def drop_nulls(validator: Validator, arguments: dict[str, Any]) -> tuple[dict[str, Any], set[str]]:
    """`null` for an argument whose schema does not take null means "not given" (models send null for
    optional arguments), at any depth of an object argument; returns the arguments without those
    keys, and their paths. Where the schema takes null it stays: inside an object argument it is sent
    as JSON null (a top-level argument given as null is not sent: upstream/request.py sends no null values).
    Used on tool arguments before they are checked (runtime/calls.py).
    """
    if not _has_null(arguments):
        return arguments, set()
    dropped: dict[tuple[str | int, ...], None] = {}
    for _ in range(MAX_NULL_ROUNDS):  # a null inside an anyOf branch shows once the branch is chosen
        found = [tuple(leaf.absolute_path) for error in validator.iter_errors(arguments)
                 for leaf in leaf_errors(error)
                 if leaf.instance is None and leaf.absolute_path and isinstance(leaf.absolute_path[-1], str)]
        found = [path for path in dict.fromkeys(found) if path not in dropped]
        if not found:
            break
        for path in found:
            arguments = _without(arguments, path)
            dropped[path] = None
    return arguments, {error_path(path) for path in dropped}


def _has_null(value: Any) -> bool:
    if isinstance(value, dict):
        return any(v is None or _has_null(v) for v in value.values())
    if isinstance(value, list):
        return any(_has_null(v) for v in value)
    return False


def _without(value: Any, path: tuple[str | int, ...]) -> Any:
    """A copy of `value` without the key at `path` (only the containers on the path are copied)."""
    head, rest = path[0], path[1:]
    if not rest:
        return {k: v for k, v in value.items() if k != head} if isinstance(value, dict) else value
    try:
        inner = value[head]
    except (KeyError, IndexError, TypeError):
        return value
    if isinstance(value, dict):
        return {**value, head: _without(inner, rest)}
    out = list(value)
    out[int(head)] = _without(inner, rest)
    return out
