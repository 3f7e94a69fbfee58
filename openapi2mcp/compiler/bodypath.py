"""Compile stage, part: fields of a JSON request body named by a path (`body.flows.name.like_`).

The overlay names a field of the request body, at any depth, as `body.<field>[.<field>...]`:
in `params` (a flat argument that feeds the field, or a fixed value for it) and in `pagination`
(`offset_param: body.offset`, `cursor_param: body.page.after`). A field whose name holds a dot
is quoted: `body."odata.filter".x`.

A path is checked against the body's (converted, input-mode) JSON Schema one key at a time,
through `$ref`, `allOf` and `anyOf`/`oneOf` (the nullable `anyOf: [X, {type: null}]` wrappers
of OpenAPI 3.1 generators among them), with a did-you-mean for a misspelt key. The leaf's
schema, description and bounds included, becomes the argument's schema. Pure functions over
schemas: arguments.py turns the result into an argument.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from openapi2mcp.compiler.schemas import has_ref, schema_types
from openapi2mcp.errors import did_you_mean

PREFIX = "body."


class PathError(ValueError):
    """A body path that is malformed or names nothing in the body's schema."""

    def __init__(self, message: str, hint: str | None = None) -> None:
        self.hint = hint
        super().__init__(message)


def is_body_path(text: str | None) -> bool:
    return isinstance(text, str) and text.startswith(PREFIX) and len(text) > len(PREFIX)


def parse(text: str) -> list[str]:
    """`body.a."b.c".d` -> ["a", "b.c", "d"]."""
    rest = text[len(PREFIX):]
    out: list[str] = []
    i = 0
    while True:
        if rest.startswith('"', i):
            end = rest.find('"', i + 1)
            if end < 0:
                raise PathError(f"{text!r}: a quoted field name is not closed")
            key, i = rest[i + 1:end], end + 1
            if i < len(rest) and rest[i] != ".":
                raise PathError(f"{text!r}: expected '.' after the quoted field name {key!r}")
        else:
            end = rest.find(".", i)
            key = rest[i:] if end < 0 else rest[i:end]
            i = len(rest) if end < 0 else end
        if not key:
            raise PathError(f"{text!r} has an empty field name", hint="write body.<field>.<field>, e.g. body.page.size")
        out.append(key)
        if i >= len(rest):
            return out
        i += 1  # the dot


def show(path: list[str]) -> str:
    """The path as the overlay writes it."""
    return PREFIX + ".".join(f'"{k}"' if "." in k or '"' in k or not k else k for k in path)


@dataclass
class _Object:
    """What one level of a body schema says about its fields (allOf merged, union members joined)."""

    properties: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    required: set[str] = field(default_factory=set)
    additional: list[dict[str, Any]] = field(default_factory=list)  # additionalProperties schemas (a map)
    types: set[str] = field(default_factory=set)
    constrained: bool = False  # it names properties (or types): a key it lacks is a mistake


def _deref(schema: Any, defs: dict[str, Any]) -> dict[str, Any]:
    seen = 0
    while isinstance(schema, dict) and isinstance(schema.get("$ref"), str) and seen < 50:
        target = defs.get(schema["$ref"].rsplit("/", 1)[-1], {})
        schema = {**target, **{k: v for k, v in schema.items() if k != "$ref"}}
        seen += 1
    return schema if isinstance(schema, dict) else {}


def _collect(schema: Any, defs: dict[str, Any], out: _Object, seen: set[str], *, all_of: bool = True) -> None:
    ref = schema.get("$ref") if isinstance(schema, dict) else None
    if isinstance(ref, str):
        if ref in seen:
            return  # each definition is looked into once (Pet: oneOf [Cat], Cat: allOf [Pet])
        seen.add(ref)
    s = _deref(schema, defs)
    types = schema_types(s)
    if s.get("type") == "null":
        return  # the null member of a nullable wrapper
    out.types |= types
    props = s.get("properties")
    if isinstance(props, dict):
        out.constrained = True
        for key, sub in props.items():
            if isinstance(sub, dict):
                out.properties.setdefault(key, []).append(sub)
    if all_of:
        out.required |= {r for r in s.get("required") or [] if isinstance(r, str)}
    extra = s.get("additionalProperties")
    if isinstance(extra, dict):
        out.additional.append(extra)
    elif extra is True:
        out.additional.append({})
    elif extra is False:
        out.constrained = True  # a closed object: only its properties
    for part in s.get("allOf") or []:
        _collect(part, defs, out, seen, all_of=all_of)
    for key in ("anyOf", "oneOf"):
        for part in s.get(key) or []:
            _collect(part, defs, out, seen, all_of=False)  # a member's requirements are not the object's


@dataclass(frozen=True)
class Field:
    schema: dict[str, Any]  # the leaf's JSON Schema (with the body's $defs when it refers to them)
    required: bool  # every key on the way is required


def resolve(body: dict[str, Any], path: list[str], *, required: bool) -> Field:
    """The schema of the field at `path` in the body schema `body`; PathError when it has none."""
    defs = body.get("$defs") if isinstance(body.get("$defs"), dict) else {}
    assert isinstance(defs, dict)
    node: dict[str, Any] = body
    for i, key in enumerate(path):
        here = show(path[:i]) if i else "the request body"
        level = _Object()
        _collect(node, defs, level, set())
        if level.types and "object" not in level.types:
            raise PathError(
                f"{show(path[:i + 1])}: {here} is {'/'.join(sorted(level.types))}, not an object; it has no fields",
                hint="a body path names fields of objects only",
            )
        if key in level.properties:
            subs = level.properties[key]
            node = subs[0] if len(subs) == 1 else {"allOf": subs}
            required = required and key in level.required
        elif level.additional:
            node, required = level.additional[0], False
        elif level.constrained:
            known = sorted(level.properties)
            hint = did_you_mean(key, known)
            raise PathError(
                f"{show(path[:i + 1])}: {here} has no field {key!r}" + (f"; {hint}" if hint else ""),
                hint=f"its fields: {', '.join(known[:40])}" if known else f"{here} declares no fields",
            )
        else:
            node, required = {}, False  # a free-form object: nothing to check against
    leaf = {k: v for k, v in node.items() if k != "$defs"}
    if defs and has_ref(leaf):
        leaf["$defs"] = defs
    return Field(schema=leaf, required=required)


def default_name(path: list[str]) -> str:
    """The argument name of a nested field nobody renamed: its keys joined by `_`."""
    return "_".join(path)
