"""How a tool's JSON schemas changed between two versions, seen from the side that uses them.

An input schema is a promise about which calls are accepted: a change that refuses a call the old
schema accepted is breaking (an argument removed or newly required, a type narrowed, an enum value
removed, a bound tightened, a pattern or format added). An output schema is a promise about what
comes back: a change that returns what an old reader does not expect is breaking (a field removed,
retyped, maybe missing or null now). Everything else that differs is compatible.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Literal

Severity = Literal["breaking", "compatible"]
Direction = Literal["input", "output"]
_MAX_DEPTH = 12
# bound keyword -> True when a larger value accepts more
_BOUNDS = {"maximum": True, "exclusiveMaximum": True, "maxLength": True, "maxItems": True, "maxProperties": True,
           "minimum": False, "exclusiveMinimum": False, "minLength": False, "minItems": False,
           "minProperties": False}


@dataclass(frozen=True)
class Change:
    severity: Severity
    where: str  # "argument 'state'", "output field 'items[].title'", "risk", "action 'merge'"
    message: str

    def __str__(self) -> str:
        return f"{self.where}: {self.message}" if self.where else self.message

    def to_dict(self) -> dict[str, str]:
        return {"severity": self.severity, "where": self.where, "message": self.message}


def schema_changes(old: dict[str, Any] | None, new: dict[str, Any] | None, direction: Direction) -> list[Change]:
    """The changes from `old` to `new` (a tool's inputSchema or outputSchema)."""
    if old is None and new is None:
        return []
    if old is None:
        return [Change("compatible", "output", "the tool now declares an output schema")]
    if new is None:
        return [Change("breaking", "output", "the tool no longer declares an output schema (structured results "
                       "are no longer promised)")]
    out: list[Change] = []
    _Walk(old, new, direction, out).compare(old, new, (), 0)
    return out


@dataclass
class _Walk:
    old_root: dict[str, Any]
    new_root: dict[str, Any]
    direction: Direction
    out: list[Change]

    def label(self, path: tuple[str, ...]) -> str:
        if not path:
            return "arguments" if self.direction == "input" else "output"
        dotted = ".".join(path).replace(".[]", "[]")
        return f"argument {dotted!r}" if self.direction == "input" else f"output field {dotted!r}"

    def add(self, severity: Severity, path: tuple[str, ...], message: str) -> None:
        self.out.append(Change(severity, self.label(path), message))

    def compare(self, old: Any, new: Any, path: tuple[str, ...], depth: int) -> None:
        if depth > _MAX_DEPTH:
            return
        o, o_null = _core(old, self.old_root)
        n, n_null = _core(new, self.new_root)
        self.types(o, n, o_null, n_null, path)
        self.enums(o, n, path)
        if self.direction == "input":
            self.bounds(o, n, path)
            self.text_constraints(o, n, path)
        if path and o.get("description") != n.get("description"):
            self.add("compatible", path, "description changed")
        if o.get("default") != n.get("default") and self.direction == "input":
            self.add("compatible", path, f"default {o.get('default')!r} → {n.get('default')!r}")
        self.properties(o, n, path, depth)
        if isinstance(o.get("items"), dict) and isinstance(n.get("items"), dict):
            self.compare(o["items"], n["items"], (*path, "[]"), depth + 1)

    def types(self, o: dict[str, Any], n: dict[str, Any], o_null: bool, n_null: bool, path: tuple[str, ...]) -> None:
        to, tn = _types(o, o_null), _types(n, n_null)
        if to == tn:
            return
        shown = f"type {_fmt(to)} → {_fmt(tn)}"
        if self.direction == "input":
            narrowed = tn is not None and (to is None or not to <= tn)
        else:
            narrowed = to is not None and (tn is None or not tn <= to)
        if narrowed and self.direction == "output" and to is not None and tn is not None and tn - to == {"null"}:
            self.add("breaking", path, "may now be null")
        else:
            self.add("breaking" if narrowed else "compatible", path, shown)

    def enums(self, o: dict[str, Any], n: dict[str, Any], path: tuple[str, ...]) -> None:
        eo, en = _enum(o), _enum(n)
        if eo == en:
            return
        if self.direction == "input":
            if en is not None and eo is None:
                self.add("breaking", path, f"now limited to {_values(en)}")
            elif en is not None and eo is not None and eo - en:
                self.add("breaking", path, f"enum value{'s' if len(eo - en) > 1 else ''} removed: {_values(eo - en)}")
            if en is not None and eo is not None and en - eo:
                self.add("compatible", path, f"enum value{'s' if len(en - eo) > 1 else ''} added: {_values(en - eo)}")
            if en is None and eo is not None:
                self.add("compatible", path, "no longer limited to an enum")
        else:
            if en is not None and (eo is None or en - eo):
                self.add("compatible", path, f"now limited to {_values(en)}" if eo is None
                         else f"may now also be {_values(en - eo)}")
            if eo is not None and (en is None or eo - en):
                self.add("compatible", path, "no longer limited to an enum" if en is None
                         else f"no longer {_values(eo - en)}")

    def bounds(self, o: dict[str, Any], n: dict[str, Any], path: tuple[str, ...]) -> None:
        for key, larger_accepts in _BOUNDS.items():
            vo, vn = o.get(key), n.get(key)
            if vo == vn or isinstance(vo, bool) or isinstance(vn, bool):
                continue
            if vn is None:
                self.add("compatible", path, f"{key} {vo} removed")
            elif vo is None:
                self.add("breaking", path, f"new {key} {vn}")
            elif isinstance(vo, int | float) and isinstance(vn, int | float):
                tighter = vn < vo if larger_accepts else vn > vo
                self.add("breaking" if tighter else "compatible", path, f"{key} {vo} → {vn}")

    def text_constraints(self, o: dict[str, Any], n: dict[str, Any], path: tuple[str, ...]) -> None:
        for key in ("pattern", "format", "const"):
            vo, vn = o.get(key), n.get(key)
            if vo == vn:
                continue
            if vn is None:
                self.add("compatible", path, f"{key} {vo!r} removed")
            else:
                self.add("breaking", path, f"{key} {vo!r} → {vn!r}" if vo is not None else f"new {key} {vn!r}")

    def properties(self, o: dict[str, Any], n: dict[str, Any], path: tuple[str, ...], depth: int) -> None:
        po, pn = o.get("properties"), n.get("properties")
        if not isinstance(po, dict) or not isinstance(pn, dict):
            return
        ro, rn = set(o.get("required") or []), set(n.get("required") or [])
        for key in po:
            here = (*path, key)
            if key not in pn:
                what = "removed (calls that pass it are refused)" if self.direction == "input" else "removed"
                self.add("breaking", here, what)
                continue
            if self.direction == "input" and key in rn and key not in ro:
                self.add("breaking", here, "now required")
            elif self.direction == "input" and key in ro and key not in rn:
                self.add("compatible", here, "now optional")
            elif self.direction == "output" and key in ro and key not in rn:
                self.add("breaking", here, "may now be missing")
            self.compare(po[key], pn[key], here, depth + 1)
        for key in pn:
            if key in po:
                continue
            if self.direction == "input":
                required = key in rn
                self.add("breaking" if required else "compatible", (*path, key),
                         "new required argument" if required else "new optional argument")
            else:
                self.add("compatible", (*path, key), "new field")


def _core(schema: Any, root: dict[str, Any]) -> tuple[dict[str, Any], bool]:
    """The schema with local $refs followed and a nullable wrapper (anyOf [X, null]) taken off, and whether
    null is allowed."""
    nullable = False
    for _ in range(16):
        if not isinstance(schema, dict):
            return {}, nullable
        ref = schema.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/"):
            node: Any = root
            for part in ref[2:].split("/"):
                node = node.get(part.replace("~1", "/").replace("~0", "~"), {}) if isinstance(node, dict) else {}
            schema = node
            continue
        branches = schema.get("anyOf") or schema.get("oneOf")
        if isinstance(branches, list):
            real = [b for b in branches if not (isinstance(b, dict) and b.get("type") == "null")]
            if len(real) == 1 and len(real) < len(branches):
                nullable = True
                schema = {**{k: v for k, v in schema.items() if k not in ("anyOf", "oneOf")}, **real[0]}
                continue
        return schema, nullable or schema.get("nullable") is True
    return {}, nullable


def _types(schema: dict[str, Any], nullable: bool) -> frozenset[str] | None:
    """The JSON types a schema admits (None: any); integer counts as a kind of number."""
    raw = schema.get("type")
    if raw is None:
        branches = schema.get("anyOf") or schema.get("oneOf")
        if not isinstance(branches, list):
            return None
        found: set[str] = set()
        for b in branches:
            t = _types(b, False) if isinstance(b, dict) else None
            if t is None:
                return None
            found |= t
    else:
        found = {raw} if isinstance(raw, str) else {t for t in raw if isinstance(t, str)}
    if nullable:
        found.add("null")
    if "number" in found:
        found.add("integer")
    return frozenset(found)


def _enum(schema: dict[str, Any]) -> frozenset[str] | None:
    values = schema.get("enum")
    if not isinstance(values, list):
        return None if "const" not in schema else frozenset({json.dumps(schema["const"], sort_keys=True)})
    return frozenset(json.dumps(v, sort_keys=True) for v in values)


def _values(values: frozenset[str]) -> str:
    return ", ".join(sorted(values))


def _fmt(types: frozenset[str] | None) -> str:
    if types is None:
        return "any"
    shown = sorted(types - {"integer"} if "number" in types else types)
    return " | ".join(shown)
