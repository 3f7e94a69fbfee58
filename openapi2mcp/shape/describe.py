"""Schema errors described: the field, and a short reason, of the branch a value was meant for.

Shared by argument checks (the runtime) and result validation (the shaper): `leaf_errors` looks
into an anyOf/oneOf for the branch the value was meant for, `describe_error` says what is wrong
in a few words (never a dump of a large value).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # jsonschema is imported by the first validator (manifest.compile_schema), not at start-up
    from jsonschema import ValidationError
    from jsonschema.protocols import Validator

from openapi2mcp.shape.jsonsize import clip, dumps, json_type


def error_path(parts: Iterable[str | int]) -> str:
    """`items[3].age` for ["items", 3, "age"]; "" for the root."""
    out = ""
    for part in parts:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


def leaf_errors(error: ValidationError) -> list[ValidationError]:
    """The errors that say what is wrong. For an anyOf/oneOf: those of the branch the value was
    meant for, recursively (`anyOf: [X, {type: null}]` given an object: X's errors, each naming
    its nested field, never "expected null"); branches of another JSON type are not meant. An
    anyOf whose every branch is of another type stays itself."""
    if error.validator in ("anyOf", "oneOf") and error.context:
        branches = _branch_errors(error)
        if branches:
            meant = min(branches, key=lambda i: (-_documented(error, i, branches[i]), len(branches[i]), i))
            return [leaf for sub in branches[meant] for leaf in leaf_errors(sub)]
    return [error]


def cause(error: ValidationError) -> ValidationError:
    """The deepest of `leaf_errors`: one error to report, its `absolute_path` the nested field."""
    return max(leaf_errors(error), key=lambda e: len(e.absolute_path))


def _branch_errors(error: ValidationError) -> dict[int, list[ValidationError]]:
    """An anyOf/oneOf error's sub-errors per branch, without the branches of another JSON type."""
    depth = len(error.absolute_path)
    out: dict[int, list[ValidationError]] = {}
    for sub in error.context or ():
        if sub.relative_schema_path:
            out.setdefault(int(sub.relative_schema_path[0]), []).append(sub)
    return {i: errs for i, errs in out.items()
            if not any(e.validator == "type" and len(e.absolute_path) == depth for e in errs)}


def _documented(error: ValidationError, branch: int, errors: list[ValidationError]) -> int:
    """How many of an object's keys branch `branch` of an anyOf/oneOf documents: the branch a value
    was meant for names its keys (a result that lost a few required keys is still the result, not
    a dry-run preview). Fewest errors decide between equals, then the order."""
    if not isinstance(error.instance, dict):
        return 0
    depth = len(error.absolute_path)
    schemas = [e.schema for e in errors if len(e.absolute_path) == depth]  # a $ref branch: its target
    members = error.validator_value if isinstance(error.validator_value, list) else []
    if branch < len(members):
        schemas.append(members[branch])
    names: set[str] = set()
    for schema in schemas:
        if isinstance(schema, dict):
            for part in [schema, *(schema.get("allOf") or [])]:
                if isinstance(part, dict) and isinstance(part.get("properties"), dict):
                    names.update(part["properties"])
    return len(names & set(error.instance))


def describe_error(error: ValidationError) -> str:
    """A short reason for one schema error, never a dump of a large instance."""
    if error.context:  # anyOf / oneOf: the branch the value was meant for says more
        deeper = cause(error)
        if deeper is not error:
            return describe_error(deeper)
        union = union_types(error.validator_value)  # every branch is of another JSON type
        if union:
            return f"expected {union}, got {json_type(error.instance)}"
        from jsonschema.exceptions import best_match

        best = best_match(error.context)
        if best is not None:
            return describe_error(best)
    if error.validator == "type":
        return f"expected {type_names(error.validator_value)}, got {json_type(error.instance)}"
    message, value = error.message, repr(error.instance)
    if len(value) > 40 and message.startswith(value):  # jsonschema starts with the whole value: keep the reason
        message = _short_value(error.instance) + message[len(value):]
    return clip(message)


def _short_value(value: Any) -> str:
    """A long value as a message can quote it: its start and its size."""
    if isinstance(value, str):
        return f"{value[:24]!r}… ({len(value)} characters)"
    if isinstance(value, list | dict):
        return f"{clip(dumps(value), 24)} ({len(value)} {'items' if isinstance(value, list) else 'keys'})"
    return clip(repr(value), 40)


def type_names(expected: Any) -> str:
    """`string` for "string" or ["string", "null"] (null goes without saying), `integer or string`."""
    names = [str(t) for t in expected] if isinstance(expected, list) else [str(expected)]
    shown = [t for t in names if t != "null"] or names
    return " or ".join(shown)


def first_error(validator: Validator, instance: Any) -> ValidationError | None:
    from jsonschema.exceptions import best_match

    error: ValidationError | None = best_match(validator.iter_errors(instance))
    return error


def union_types(members: Any) -> str:
    names: list[str] = []
    for member in members if isinstance(members, list) else []:
        t = member.get("type") if isinstance(member, dict) else None
        for name in t if isinstance(t, list) else [t] if isinstance(t, str) else []:
            if name != "null" and name not in names:
                names.append(name)
    return " or ".join(names)
