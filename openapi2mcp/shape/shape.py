"""Result shaping: an upstream body becomes the structured content a client sees.

Per tool, in this order (`ResponseSpec`):

1. `select`    - a JMESPath projection of the body (trim what the model does not need);
2. `wrap`      - a non-object value becomes `{wrap: value}` (structured content is an object on
                 2025-11-25 sessions; the compiler makes `outputSchema` match);
3. `max_items` - lists of results are cut to this many items;
4. `max_bytes` - the serialised result is fitted under the cap: the largest lists are cut
                 first, then long strings are shortened; the result is always valid JSON;
5. validation  - against the tool's `outputSchema` (`ResponseSpec.validate`):
   * tolerant (default): a result that does not fit is repaired (`repair`): each value that
     does not fit is left out of the structured content, set to null where the key is required,
     or converted when that loses nothing ("42" for an integer). The text content keeps the
     upstream's values unchanged, and the `Repair`s go into `_meta` and a notice (result.py);
   * strict: a lying upstream becomes an UPSTREAM_INVALID_RESPONSE error (validated before
     fitting, formats included), never a client-side validation crash;
   * off: there is no outputSchema; nothing is checked.

Cuts never add keys to the structured content (an `additionalProperties: false` schema would
reject them): they are reported as `Cut`s, which `result.py` puts into `_meta` and into a
second text block.

The JSON Schema and JMESPath helpers shared with argument validation live here too.
"""

from __future__ import annotations

import copy
import json
import math
import re
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Final, Literal

import jmespath
import jmespath.exceptions
from jsonschema import ValidationError
from jsonschema.exceptions import best_match
from jsonschema.protocols import Validator

from openapi2mcp.errors import ErrorCode, ToolFailure
from openapi2mcp.manifest import ResponseSpec, compile_schema

# ----------------------------------------------------------------------------- JSON helpers


def dumps(value: Any) -> str:
    """The compact JSON spelling used for text content and for byte caps."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def json_size(value: Any) -> int:
    return _size(dumps(value))


def _size(text: str) -> int:
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


# ----------------------------------------------------------------------------- JMESPath


@lru_cache(maxsize=2048)
def compile_expression(expr: str) -> Any:
    """Compile once; raises jmespath.exceptions.JMESPathError on a bad expression."""
    return jmespath.compile(expr)


def search(expr: str, data: Any) -> Any:
    """Evaluate; a type error over upstream data means the upstream broke the tool's assumptions."""
    try:
        return compile_expression(expr).search(data)
    except jmespath.exceptions.JMESPathError as e:
        raise ToolFailure.of(
            ErrorCode.UPSTREAM_INVALID_RESPONSE,
            f"the upstream response does not have the shape this tool expects ({expr!r}: {clip(str(e), 120)})",
        ) from None


def truthy(value: Any) -> bool:
    """JMESPath truthiness: null, false and empty strings/lists/objects are false; 0 is true."""
    return not (value is None or value is False or value in ("", [], {}))


# ----------------------------------------------------------------------------- JSON Schema

MAX_NULL_ROUNDS: Final = 8


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
        union = _union_types(error.validator_value)  # every branch is of another JSON type
        if union:
            return f"expected {union}, got {json_type(error.instance)}"
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


def drop_nulls(validator: Validator, arguments: dict[str, Any]) -> tuple[dict[str, Any], set[str]]:
    """`null` for an argument whose schema does not take null means "not given" (models send null for
    optional arguments), at any depth of an object argument; returns the arguments without those
    keys, and their paths. Where the schema takes null it stays: inside an object argument it is sent
    as JSON null (a top-level argument given as null is not sent: upstream.py sends no null values).
    Used on tool arguments before they are checked (runtime.py).
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


def first_error(validator: Validator, instance: Any) -> ValidationError | None:
    error: ValidationError | None = best_match(validator.iter_errors(instance))
    return error


# ----------------------------------------------------------------------------- repairs

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
        fixes.append(_Fix(path, "replace", _union_types(error.validator_value) or "one of the documented shapes",
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


def _union_types(members: Any) -> str:
    names: list[str] = []
    for member in members if isinstance(members, list) else []:
        t = member.get("type") if isinstance(member, dict) else None
        for name in t if isinstance(t, list) else [t] if isinstance(t, str) else []:
            if name != "null" and name not in names:
                names.append(name)
    return " or ".join(names)


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


# ----------------------------------------------------------------------------- cuts


@dataclass(frozen=True)
class Cut:
    """One place where the result was shortened, and why."""

    path: str  # where in the structured content ("" = the whole result, "*" = every string)
    reason: str  # "max_items" | "max_bytes"
    kept: int
    total: int
    unit: str  # "items" | "bytes" | "characters"
    resumable: bool = False  # a paged list: the items left out come with the next cursor

    def meta(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "path": self.path,
            "reason": self.reason,
            "kept": self.kept,
            "total": self.total,
            "unit": self.unit,
        }
        if self.resumable:
            out["resume"] = "next_cursor"
        return out

    def sentence(self) -> str:
        if self.path == "*":
            return f"strings longer than {self.kept} characters were shortened (the longest had {self.total})"
        where = self.path or "the result"
        if self.resumable:
            return f"{where}: {self.kept} of {self.total} {self.unit} returned, {self.total - self.kept} deferred"
        return f"{where}: {self.kept} of {self.total} {self.unit} kept, {self.total - self.kept} dropped"


def notice(cuts: Iterable[Cut]) -> str:
    """The text block that tells the model a result is partial and how to get the rest."""
    cuts = list(cuts)
    reasons = sorted({c.reason for c in cuts})
    text = "Note: this result was cut (" + ", ".join(reasons) + " limit): " + "; ".join(c.sentence() for c in cuts)
    if all(c.resumable for c in cuts):
        return text + ". Nothing is lost: call again with cursor = next_cursor to get the deferred items."
    if any(c.resumable for c in cuts):
        text += ". Deferred items come with cursor = next_cursor"
    return text + ". Ask for less (filters, a smaller page or limit, fewer fields) to see the rest."


@dataclass(frozen=True)
class Shaped:
    """What a successful call returns: structured content (or None) and its text form.

    The text is the compact JSON of the structured content, except for a repaired result: then
    it is the upstream's own values (fitted under the same cap), and `repairs` says what differs.
    """

    structured: dict[str, Any] | None
    text: str
    cuts: tuple[Cut, ...] = ()
    repairs: tuple[Repair, ...] = ()


def _lists(value: Any, path: tuple[str | int, ...] = ()) -> Iterator[tuple[tuple[str | int, ...], list[Any]]]:
    """Lists of results: arrays reachable through object properties, not arrays inside items."""
    if isinstance(value, list):
        yield path, value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _lists(item, (*path, key))


def _replace(value: Any, path: tuple[str | int, ...], new: Any) -> Any:
    """A copy of `value` with the node at `path` replaced (only the spine is copied)."""
    if not path:
        return new
    head, rest = path[0], path[1:]
    if isinstance(value, dict):
        return {**value, head: _replace(value[head], rest, new)}
    copy = list(value)
    copy[head] = _replace(copy[head], rest, new)  # type: ignore[index]
    return copy


def cut_items(value: Any, max_items: int | None) -> tuple[Any, list[Cut]]:
    if max_items is None:
        return value, []
    cuts: list[Cut] = []
    for path, items in list(_lists(value)):
        if len(items) > max_items:
            value = _replace(value, path, items[:max_items])
            cuts.append(Cut(error_path(path), "max_items", max_items, len(items), "items"))
    return value, cuts


def _fit_lists(value: Any, limit: int) -> tuple[Any, list[Cut]]:
    """Cut the largest lists until the value fits (or every list is down to one item)."""
    cuts: list[Cut] = []
    done: set[tuple[str | int, ...]] = set()
    while (whole := json_size(value)) > limit:
        candidates = [(json_size(v), p, v) for p, v in _lists(value) if p not in done and len(v) > 1]
        if not candidates:
            break
        size, path, items = max(candidates, key=lambda c: c[0])
        done.add(path)
        budget = limit - (whole - size)
        keep, used = 0, 2  # "[]"
        for item in items:
            used += json_size(item) + (1 if keep else 0)
            if used > budget:
                break
            keep += 1
        keep = max(keep, 1)
        value = _replace(value, path, items[:keep])
        cuts.append(Cut(error_path(path), "max_bytes", keep, len(items), "items"))
    return value, cuts


def _map_strings(value: Any, fn: Callable[[str], str]) -> Any:
    if isinstance(value, str):
        return fn(value)
    if isinstance(value, list):
        return [_map_strings(v, fn) for v in value]
    if isinstance(value, dict):
        return {k: _map_strings(v, fn) for k, v in value.items()}
    return value


def _longest_string(value: Any) -> int:
    if isinstance(value, str):
        return len(value)
    if isinstance(value, list):
        return max((_longest_string(v) for v in value), default=0)
    if isinstance(value, dict):
        return max((_longest_string(v) for v in value.values()), default=0)
    return 0


def _shorten(length: int) -> Callable[[str], str]:
    return lambda s: s if len(s) <= length else s[:length] + "…"


def _fit_strings(value: Any, limit: int) -> tuple[Any, list[Cut]]:
    longest = _longest_string(value)
    if json_size(value) <= limit or longest == 0:
        return value, []
    lo, hi = 0, longest  # find the longest string length that still fits
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if json_size(_map_strings(value, _shorten(mid))) <= limit:
            lo = mid
        else:
            hi = mid - 1
    return _map_strings(value, _shorten(lo)), [Cut("*", "max_bytes", lo, longest, "characters")]


def fit(value: Any, limit: int) -> tuple[Any, str, list[Cut]]:
    """Fit a JSON value under `limit` serialised bytes, or raise RESPONSE_TOO_LARGE.

    Returns the value, its compact JSON text (measured, so it is never serialised twice) and the cuts.
    """
    text = dumps(value)
    if _size(text) <= limit:
        return value, text, []
    value, cuts = _fit_lists(value, limit)
    value, more = _fit_strings(value, limit)
    cuts += more
    text = dumps(value)
    if _size(text) > limit:
        raise _too_large(limit)
    return value, text, cuts


def _too_large(limit: int) -> ToolFailure:
    return ToolFailure.of(
        ErrorCode.RESPONSE_TOO_LARGE,
        f"the result does not fit in this tool's limit of {limit} bytes even when shortened; "
        "ask for less (filters, a smaller page or limit, fewer fields)",
    )


# ----------------------------------------------------------------------------- the shaper


class Shaper:
    """One per tool (or branch): the response spec plus the output-schema validator, compiled once."""

    def __init__(self, spec: ResponseSpec, output_schema: Mapping[str, Any] | None, *, check: bool = False) -> None:
        self.spec = spec
        self.schema = output_schema
        self.check = check
        self.validator = None
        if output_schema is not None and spec.validate_ != "off":
            # strict checks the spec's own formats too (the cheap ones, see compile_schema)
            self.validator = compile_schema(output_schema, check=check, formats=spec.validate_ == "strict")
        if spec.select:
            compile_expression(spec.select)

    @property
    def tolerant(self) -> bool:
        """Results that do not fit are repaired (the default), not refused."""
        return self.validator is not None and self.spec.validate_ == "tolerant"

    def with_response(self, spec: ResponseSpec, output_schema: Mapping[str, Any] | None = None) -> Shaper:
        """The same output contract (its validator, compiled once per tool) under another ResponseSpec;
        a new one for a branch with its own schema or another `validate` mode."""
        if output_schema is not None or spec.validate_ != self.spec.validate_:
            return Shaper(spec, output_schema if output_schema is not None else self.schema, check=self.check)
        other = copy.copy(self)
        other.spec = spec
        if spec.select:
            compile_expression(spec.select)
        return other

    def json(self, body: Any) -> Shaped:
        value = search(self.spec.select, body) if self.spec.select else body
        structured = self._wrap(value)
        structured, cuts = cut_items(structured, self.spec.max_items)
        if self.tolerant:
            return self._tolerant(structured, cuts)
        self._check(structured)
        return self._finish(structured, cuts)

    def text(self, text: str, media_type: str) -> Shaped:
        """A text/* body: text content; wrapped into structured content only for an outputSchema."""
        if self.validator is None:
            return _cap_text(text, self.spec.max_bytes)
        structured = {self.spec.wrap or "text": text}
        if self.validator.is_valid(structured):
            return self._finish(structured, [])
        if self.tolerant:  # the model reads the text as sent; the structured content holds what fits
            shown = _cap_text(text, self.spec.max_bytes)
            return self._tolerant(structured if self.spec.wrap else text, list(shown.cuts), shown.text,
                                  got=media_type or "text")
        raise ToolFailure.of(
            ErrorCode.UPSTREAM_INVALID_RESPONSE,
            f"the upstream sent {media_type or 'text'} where the documented JSON was expected: {clip(text, 120)!r}",
        )

    def page(self, items: list[Any], total: int | None, cursor_at: Callable[[int], str | None]) -> Shaped:
        """One call of a paginated tool: {items, next_cursor, has_more[, total]}, within `max_bytes`.

        `cursor_at(k)` is the cursor that resumes at items[k] (k == len(items): after the last).
        When `max_bytes` forces the list shorter, next_cursor moves back to the first item left
        out, so nothing is lost; the cursor itself is never shortened. Its length is known only
        once the cut is: the items' budget shrinks by what the whole result is over, until it fits.
        Items that drift from the schema are repaired like any result (tolerant); the repaired
        structured content and the text as sent both stay under the cap.
        """
        extra = {"total": total} if total is not None else {}
        after = cursor_at(len(items))
        whole: dict[str, Any] = {"items": items, **extra}
        if not self.tolerant:
            self._check({"items": items, "next_cursor": after, "has_more": after is not None, **extra})
        limit = self.spec.max_bytes
        budget: int | None = None  # first the whole page, then a budget for the items
        for _ in range(10):
            fitted: dict[str, Any]
            cuts: list[Cut]
            if budget is None:
                fitted, cuts = whole, []
            else:
                try:
                    fitted, _, cuts = fit(whole, max(budget, 2))
                except ToolFailure:
                    raise _too_large(limit) from None
            kept = fitted["items"]
            cursor = after if len(kept) == len(items) else cursor_at(len(kept))
            structured = {"items": kept, "next_cursor": cursor, "has_more": cursor is not None, **fitted}
            text = dumps(structured)
            shown, repairs = structured, tuple[Repair, ...]()
            if self.tolerant and self.validator is not None and not self.validator.is_valid(structured):
                shown, found = self._repair(structured)
                repairs = tuple(found)
            size = max(_size(text), json_size(shown) if repairs else 0)
            if size <= limit:
                if cuts and not self.tolerant and self.validator is not None and not self.validator.is_valid(shown):
                    raise _too_large(limit)  # shortening broke the contract: refuse honestly
                marked = tuple(
                    Cut(c.path, c.reason, c.kept, c.total, c.unit, resumable=True) if c.path == "items" else c
                    for c in cuts
                )
                return Shaped(shown, text, marked, repairs)
            if budget is None:
                # a cut resumes inside the list, with a cursor like the one of its last item (not
                # `after`, which may be far shorter or null): the items get what it and the keys leave
                probe = cursor_at(len(items) - 1) if items else after
                keys = dumps({"items": [], "next_cursor": probe, "has_more": probe is not None, **extra})
                budget = limit - (_size(keys) - json_size({"items": [], **extra}))
            else:
                budget -= size - limit
        raise _too_large(limit)

    def empty(self, status: int) -> Shaped:
        """No body (204, HEAD): `{"status": N}`, or `{}` when only that fits the outputSchema."""
        for candidate in ({"status": status}, {}):
            if self.validator is None or self.validator.is_valid(candidate):
                return Shaped(candidate, dumps(candidate))
        if self.tolerant:  # documented keys come back as null; nothing else is known
            return self._tolerant({}, [], dumps({"status": status}), got=f"no content (HTTP {status})")
        raise ToolFailure.of(
            ErrorCode.UPSTREAM_INVALID_RESPONSE,
            f"the upstream answered {status} with no content, but the documented schema expects data "
            "(the request itself succeeded; do not repeat it)",
            status=status,
        )

    def placeholder(self, media_type: str) -> Shaped | None:
        """Tolerant structured content for a binary body where JSON was documented (None: not tolerant)."""
        if not self.tolerant:
            return None
        return self._tolerant({}, [], "", got=media_type or "binary data")

    # -------------------------------------------------------------- internals

    def _wrap(self, value: Any) -> Any:
        if self.spec.wrap:
            return {self.spec.wrap: value}
        if isinstance(value, dict):
            return value
        if self.validator is None:  # no contract: still give clients an object
            return {"result": value}
        if self.tolerant:  # repaired at the top level; the text keeps the value
            return value
        raise ToolFailure.of(
            ErrorCode.UPSTREAM_INVALID_RESPONSE,
            f"the upstream response does not match the documented schema at the top level: "
            f"expected object, got {json_type(value)}",
        )

    def _check(self, structured: dict[str, Any]) -> None:
        if self.validator is None:
            return
        error = first_error(self.validator, structured)
        if error is not None:
            error = cause(error)
            where = error_path(error.absolute_path) or "the top level"
            raise ToolFailure.of(
                ErrorCode.UPSTREAM_INVALID_RESPONSE,
                f"the upstream response does not match the documented schema at {where}: {describe_error(error)}",
            )

    def _finish(self, structured: dict[str, Any], cuts: list[Cut]) -> Shaped:
        fitted, text, more = fit(structured, self.spec.max_bytes)
        if more and self.validator is not None and not self.validator.is_valid(fitted):
            raise _too_large(self.spec.max_bytes)  # shortening broke the contract: refuse honestly
        return Shaped(fitted, text, tuple(cuts + more))

    def _tolerant(self, value: Any, cuts: list[Cut], text: str | None = None, *, got: str | None = None) -> Shaped:
        """Fit, then repair what does not fit the schema; the text shows the fitted upstream value.

        `text` replaces that text (a text/* or empty body) and `got` says what was sent at the top
        level instead of the documented JSON. Both texts and the structured content hold `max_bytes`.
        """
        assert self.validator is not None
        limit = self.spec.max_bytes
        for _ in range(4):
            fitted, fitted_text, more = fit(value, limit)
            if got is None and isinstance(fitted, dict) and self.validator.is_valid(fitted):
                return Shaped(fitted, fitted_text, tuple(cuts + more))
            repaired, repairs = self._repair(fitted)
            if got is not None:
                repairs = [Repair("", "JSON", got, "removed"), *(r for r in repairs if r.path)]
            size = json_size(repaired)
            if size <= self.spec.max_bytes:
                return Shaped(repaired, fitted_text if text is None else text, tuple(cuts + more), tuple(repairs))
            limit = _shrunk(limit, size, self.spec.max_bytes)  # the repairs made it longer (nulls for missing keys)
            if limit < 256:
                break
        raise _too_large(self.spec.max_bytes)

    def _repair(self, value: Any) -> tuple[dict[str, Any], list[Repair]]:
        assert self.validator is not None
        try:
            return repair(self.validator, value)
        except Unrepairable as e:
            raise ToolFailure.of(
                ErrorCode.UPSTREAM_INVALID_RESPONSE,
                f"the upstream response does not match the documented schema {e} (the outputSchema was not "
                "compiled for repairs: recompile the Manifest, or refuse such results with response.validate: "
                "strict)",
            ) from None


def _shrunk(limit: int, size: int, cap: int) -> int:
    """The next budget for the upstream's value when its repaired form (`size`) is over `cap`: what
    grew grows alike, so scale down, with a little room."""
    return min(limit - 64, int(limit * cap / size) - 64)


def _cap_text(text: str, limit: int) -> Shaped:
    if _size(text) <= limit:
        return Shaped(None, text)
    data = text.encode()
    kept = data[:limit].decode("utf-8", "ignore")
    return Shaped(None, kept, (Cut("", "max_bytes", len(kept.encode()), len(data), "bytes"),))
