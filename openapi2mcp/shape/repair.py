"""Repairs: a result that drifts from its outputSchema is made to fit, and every change is named.

Used by the tolerant shaper (`response.validate: tolerant`, the default): each value that does not
fit is left out of the structured content, set to null where the key is required, or converted
when that loses nothing ("42" for an integer); the `Repair`s go into `_meta` and a notice.
"""

from __future__ import annotations

import copy
import math
import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Literal

if TYPE_CHECKING:
    from jsonschema import ValidationError
    from jsonschema.protocols import Validator

from openapi2mcp.shape.describe import error_path, leaf_errors, type_names, union_types
from openapi2mcp.shape.jsonsize import clip, dumps, json_type

RepairAction = Literal["removed", "null", "converted"]
MAX_REPAIR_ROUNDS: Final = 8
_INTEGER = re.compile(r"-?(?:0|[1-9][0-9]{0,30})")
_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]{0,30})(?:\.[0-9]{1,30})?(?:[eE][-+]?[0-9]{1,3})?")
_INDEX = re.compile(r"\[\d+\]")


@dataclass(frozen=True)
class Repair:
    """One value of an upstream result that did not fit the outputSchema, and what became of it.

    `path` is in the structured content (`items[3].size`, "" = the whole result); `expected` is
    what the schema documents there (a JSON type, "object or array", "present"); `got` is what
    the upstream sent (a JSON type, "missing", or a media type); `action`: the value was left out
    (`removed`), set to `null` (a required key, a list item), or `converted` without loss.
    """

    path: str
    expected: str
    got: str
    action: RepairAction

    @property
    def pattern(self) -> str:
        return path_pattern(self.path)

    def meta(self) -> dict[str, str]:
        return {"path": self.path, "expected": self.expected, "got": self.got, "action": self.action}


def path_pattern(path: str) -> str:
    """A path with its list indexes as [*] (`items[*].size`): one entry for a whole list."""
    return _INDEX.sub("[*]", path)


class Unrepairable(Exception):
    """No value fits the schema at a path (a schema that is not the compiler's tolerant one)."""


@dataclass
class _Fix:
    path: tuple[str | int, ...]
    kind: Literal["replace", "null", "remove", "convert"]
    expected: str
    got: str
    value: Any = None


def repair(validator: Validator, value: Any) -> tuple[dict[str, Any], list[Repair]]:
    """A copy of `value` that `validator` accepts (an object), and what was changed to get there.

    Rounds of: validate, then fix every error at its deepest place (an anyOf/oneOf is fixed
    inside the branch the value was meant for). A value of the wrong type is converted when that
    is lossless (numeric strings for numbers, "true"/"false" for booleans, numbers for strings),
    else left out of its object or set to null in its list; a missing required key is set to
    null; an undocumented property of a closed object is left out; the root becomes an object.
    Only the containers on the changed paths are copied. Raises Unrepairable when some path
    cannot be made to fit (e.g. a required key whose schema refuses null).
    """
    work = _Copier(value)
    done: dict[tuple[str | int, ...], Repair] = {}
    tried: Counter[tuple[tuple[str | int, ...], str]] = Counter()
    for _ in range(MAX_REPAIR_ROUNDS):
        fixes: list[_Fix] = []
        for error in validator.iter_errors(work.root):
            _plan(error, fixes)
        if not fixes:
            if not isinstance(work.root, dict):  # a validator without `type: object` at the root
                raise Unrepairable("the result is not an object")
            return work.root, sorted(done.values(), key=lambda r: r.path)
        unique = {(f.path, f.kind): f for f in fixes}  # one `required` error per missing key names them all
        for fix in sorted(unique.values(), key=lambda f: len(f.path), reverse=True):  # deepest first
            tried[(fix.path, fix.kind)] += 1
            if tried[(fix.path, fix.kind)] > 2:  # removed, then required: null, refused again
                first = done.get(fix.path)
                raise Unrepairable(f"at {error_path(fix.path) or 'the top level'}: expected {fix.expected}, got "
                                   f"{first.got if first else fix.got}, and no value fits there")
            _apply(work, fix, done)
    raise Unrepairable("the result still does not fit after repairs")


def _plan(error: ValidationError, fixes: list[_Fix]) -> None:
    path = tuple(error.absolute_path)
    kind, instance = error.validator, error.instance
    if kind in ("anyOf", "oneOf") and error.context:
        leaves = leaf_errors(error)
        if leaves != [error]:
            for leaf in leaves:
                _plan(leaf, fixes)
            return
        fixes.append(_Fix(path, "replace", union_types(error.validator_value) or "one of the documented shapes",
                          json_type(instance)))
    elif kind == "required" and isinstance(instance, dict) and isinstance(error.validator_value, list):
        props = error.schema.get("properties") if isinstance(error.schema, dict) else None
        for key in error.validator_value:
            if key not in instance:
                documented: Any = props.get(key) if isinstance(props, dict) else None
                documented = type_names(documented["type"]) if isinstance(documented, dict) and "type" in documented \
                    else "a value"
                fixes.append(_Fix((*path, key), "null", documented, "missing"))
    elif kind in ("additionalProperties", "unevaluatedProperties") and isinstance(instance, dict):
        schema = error.schema if isinstance(error.schema, dict) else {}
        known = schema.get("properties") or {}
        patterns = list(schema.get("patternProperties") or {})
        for key, item in instance.items():
            if key not in known and not any(re.search(p, key) for p in patterns):
                fixes.append(_Fix((*path, key), "remove", "no such property", json_type(item)))
    elif kind == "type":
        expected = type_names(error.validator_value)
        converted = _lossless(instance, error.validator_value)
        if converted is not _NOTHING:
            fixes.append(_Fix(path, "convert", expected, json_type(instance), converted))
        else:
            fixes.append(_Fix(path, "replace", expected, json_type(instance)))
    else:  # enum, format, pattern, a bound...: only schemas other than the tolerant one assert these
        fixes.append(_Fix(path, "replace", f"{kind} {clip(dumps(error.validator_value), 60)}", json_type(instance)))


class _Nothing:
    pass


_NOTHING: Final = _Nothing()


def _lossless(value: Any, expected: Any) -> Any:
    """`value` as one of the `expected` JSON types when nothing is lost ("42" -> 42), else _NOTHING."""
    types = set(expected) if isinstance(expected, list) else {expected}
    if isinstance(value, str):
        text = value  # canonical spellings only: " 7" or "07" would lose something
        if "integer" in types and _INTEGER.fullmatch(text):
            return int(text)
        if "number" in types and _NUMBER.fullmatch(text):
            number = float(text)
            if math.isfinite(number):
                return int(text) if _INTEGER.fullmatch(text) else number
        if "boolean" in types and text in ("true", "false"):
            return text == "true"
    elif isinstance(value, int | float) and not isinstance(value, bool) and "string" in types:
        return dumps(value)
    return _NOTHING


class _Copier:
    """The value under repair: containers are copied once, when a fix first changes them."""

    def __init__(self, root: Any) -> None:
        self.root = root
        self._owned: set[int] = set()

    def _own(self, node: Any) -> Any:
        if isinstance(node, dict | list) and id(node) not in self._owned:
            node = copy.copy(node)
            self._owned.add(id(node))
        return node

    def parent(self, path: tuple[str | int, ...]) -> Any:
        """The container holding `path`'s last step (copied), or None when the path is gone."""
        self.root = node = self._own(self.root)
        for step in path[:-1]:
            try:
                child = node[step]
            except (KeyError, IndexError, TypeError):
                return None
            owned = self._own(child)
            if owned is not child:
                node[step] = owned
            node = owned
        return node


def _apply(work: _Copier, fix: _Fix, done: dict[tuple[str | int, ...], Repair]) -> None:
    def record(action: RepairAction) -> None:
        first = done.get(fix.path)  # left out first, then required: one repair, set to null
        got = first.got if first is not None else fix.got
        expected = first.expected if first is not None else fix.expected
        done[fix.path] = Repair(error_path(fix.path), expected, got, action)

    if not fix.path:
        work.root = {}  # structured content is an object: the required keys come back as null
        record("removed")
        return
    parent, key = work.parent(fix.path), fix.path[-1]
    if isinstance(parent, dict) and isinstance(key, str):
        if fix.kind == "convert":
            parent[key] = fix.value
            record("converted")
        elif fix.kind == "null":
            parent[key] = None
            record("null")
        elif key in parent:
            del parent[key]
            record("removed")
    elif isinstance(parent, list) and isinstance(key, int) and key < len(parent):
        parent[key] = fix.value if fix.kind == "convert" else None  # keeps the indexes of the text
        record("converted" if fix.kind == "convert" else "null")


def repair_notice(repairs: Iterable[Repair], limit: int = 8) -> str:
    """The text block that tells the model which values of the structured content are not the upstream's."""
    groups: Counter[tuple[str, str, str, str]] = Counter((r.pattern, r.expected, r.got, r.action) for r in repairs)
    parts = []
    for (pattern, expected, got, action), n in list(groups.items())[:limit]:
        what = {"removed": "left out", "null": "set to null", "converted": "converted"}[action]
        parts.append(f"{pattern or 'the whole result'}: expected {expected}, got {got}"
                     + (f" ({n} times, {what})" if n > 1 else f" ({what})"))
    more = f"; and {len(groups) - limit} more" if len(groups) > limit else ""
    total = sum(groups.values())
    return (f"Note: {total} value{'s' if total != 1 else ''} of this result do{'es' if total == 1 else ''} not "
            "match the tool's documented output schema. The text above shows what the upstream sent; in the "
            "structured content they are left out, set to null or converted: " + "; ".join(parts) + more + ".")
