"""Result shaping: an upstream body becomes the structured content a client sees.

Per tool, in this order (`ResponseSpec`):

1. `select`    - a JMESPath projection of the body (trim what the model does not need);
2. `wrap`      - a non-object value becomes `{wrap: value}` (structured content is an object on
                 2025-11-25 sessions; the compiler makes `outputSchema` match);
3. `max_items` - lists of results are cut to this many items;
4. validation  - against the tool's `outputSchema`, so a lying upstream becomes an
                 UPSTREAM_INVALID_RESPONSE error instead of a client-side validation crash;
5. `max_bytes` - the serialised result is fitted under the cap: the largest lists are cut
                 first, then long strings are shortened; the result is always valid JSON.

Cuts never add keys to the structured content (an `additionalProperties: false` schema would
reject them): they are reported as `Cut`s, which `result.py` puts into `_meta` and into a
second text block.

The JSON Schema and JMESPath helpers shared with argument validation live here too.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import jmespath
import jmespath.exceptions
from jsonschema import Draft202012Validator, FormatChecker, ValidationError
from jsonschema.exceptions import best_match
from jsonschema.protocols import Validator
from jsonschema.validators import validator_for

from openapi2mcp.errors import ErrorCode, ToolFailure
from openapi2mcp.manifest import ResponseSpec

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

# Cheap, dependency-free format checks only (date-time uses rfc3339-validator when present).
_FORMATS = ("date", "date-time", "email", "uuid", "ipv4", "ipv6")


def compile_schema(schema: Mapping[str, Any], *, formats: bool = False, check: bool = False) -> Validator:
    """A validator compiled once (Draft 2020-12 unless the schema says otherwise).

    `check=True` validates the schema itself against its metaschema (raising
    jsonschema.SchemaError). The runtime does not by default: Manifest schemas come from the
    compiler (tested to produce valid schemas) and the Manifest's hash proves them unchanged, while
    checking costs ~30 ms per schema (15 s at start-up for Stripe's 833 schemas).
    """
    cls = validator_for(schema, default=Draft202012Validator)
    if check:
        cls.check_schema(dict(schema))
    checker = FormatChecker(_FORMATS) if formats else None
    return cls(schema, format_checker=checker)


def error_path(parts: Iterable[str | int]) -> str:
    """`items[3].age` for ["items", 3, "age"]; "" for the root."""
    out = ""
    for part in parts:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


def describe_error(error: ValidationError) -> str:
    """A short reason for one schema error, never a dump of a large instance."""
    if error.context:  # anyOf / oneOf: the most relevant branch says more
        deeper = best_match(error.context)
        if deeper is not None:
            return describe_error(deeper)
    if error.validator == "type":
        expected = error.validator_value
        names = " or ".join(expected) if isinstance(expected, list) else str(expected)
        return f"expected {names}, got {json_type(error.instance)}"
    return clip(error.message)


def first_error(validator: Validator, instance: Any) -> ValidationError | None:
    error: ValidationError | None = best_match(validator.iter_errors(instance))
    return error


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
    """What a successful call returns: structured content (or None) and its text form."""

    structured: dict[str, Any] | None
    text: str
    cuts: tuple[Cut, ...] = ()


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
    """One per tool: the response spec plus the output-schema validator, compiled once."""

    def __init__(self, spec: ResponseSpec, output_schema: Mapping[str, Any] | None, *, check: bool = False) -> None:
        self.spec = spec
        self.validator = compile_schema(output_schema, check=check) if output_schema is not None else None
        if spec.select:
            compile_expression(spec.select)

    def with_response(self, spec: ResponseSpec) -> Shaper:
        """The same output contract (its validator, compiled once per tool) under another ResponseSpec."""
        other = copy.copy(self)
        other.spec = spec
        if spec.select:
            compile_expression(spec.select)
        return other

    def json(self, body: Any) -> Shaped:
        value = search(self.spec.select, body) if self.spec.select else body
        structured = self._wrap(value)
        structured, cuts = cut_items(structured, self.spec.max_items)
        self._check(structured)
        return self._finish(structured, cuts)

    def text(self, text: str, media_type: str) -> Shaped:
        """A text/* body: text content; wrapped into structured content only for an outputSchema."""
        if self.validator is None:
            return _cap_text(text, self.spec.max_bytes)
        structured = {self.spec.wrap or "text": text}
        if not self.validator.is_valid(structured):
            raise ToolFailure.of(
                ErrorCode.UPSTREAM_INVALID_RESPONSE,
                f"the upstream sent {media_type or 'text'} where the documented JSON was expected: {clip(text, 120)!r}",
            )
        return self._finish(structured, [])

    def page(self, items: list[Any], total: int | None, cursor_at: Callable[[int], str | None]) -> Shaped:
        """One call of a paginated tool: {items, next_cursor, has_more[, total]}, within `max_bytes`.

        `cursor_at(k)` is the cursor that resumes at items[k] (k == len(items): after the last).
        When `max_bytes` forces the list shorter, next_cursor moves back to the first item left
        out, so nothing is lost; the cursor itself is never shortened. Its length is known only
        once the cut is: the items' budget shrinks by what the whole result is over, until it fits.
        """
        extra = {"total": total} if total is not None else {}
        after = cursor_at(len(items))
        whole = {"items": items, "next_cursor": after, "has_more": after is not None, **extra}
        self._check(whole)
        limit = self.spec.max_bytes
        text = dumps(whole)
        if _size(text) <= limit:
            return Shaped(whole, text)
        # A cut resumes inside the list, with a cursor like the one of its last item (not `after`,
        # which may be far shorter or null): the items get what that cursor and the keys leave.
        probe = cursor_at(len(items) - 1) if items else after
        keys = dumps({"items": [], "next_cursor": probe, "has_more": probe is not None, **extra})
        budget = limit - (_size(keys) - json_size({"items": [], **extra}))
        for _ in range(8):  # each round the budget falls by the excess; a cursor's length barely varies
            try:
                fitted, _, cuts = fit({"items": items, **extra}, max(budget, 2))
            except ToolFailure:
                raise _too_large(limit) from None
            kept = fitted["items"]
            cursor = after if len(kept) == len(items) else cursor_at(len(kept))
            structured = {"items": kept, "next_cursor": cursor, "has_more": cursor is not None, **fitted}
            text = dumps(structured)
            excess = _size(text) - limit
            if excess <= 0:
                break
            budget -= excess
        else:
            raise _too_large(limit)
        if cuts and self.validator is not None and not self.validator.is_valid(structured):
            raise _too_large(limit)  # shortening broke the contract: refuse honestly
        marked = tuple(
            Cut(c.path, c.reason, c.kept, c.total, c.unit, resumable=True) if c.path == "items" else c for c in cuts
        )
        return Shaped(structured, text, marked)

    def empty(self, status: int) -> Shaped:
        """No body (204, HEAD): `{"status": N}`, or `{}` when only that fits the outputSchema."""
        for candidate in ({"status": status}, {}):
            if self.validator is None or self.validator.is_valid(candidate):
                return Shaped(candidate, dumps(candidate))
        raise ToolFailure.of(
            ErrorCode.UPSTREAM_INVALID_RESPONSE,
            f"the upstream answered {status} with no content, but the documented schema expects data "
            "(the request itself succeeded; do not repeat it)",
            status=status,
        )

    # -------------------------------------------------------------- internals

    def _wrap(self, value: Any) -> dict[str, Any]:
        if self.spec.wrap:
            return {self.spec.wrap: value}
        if isinstance(value, dict):
            return value
        if self.validator is None:  # no contract: still give clients an object
            return {"result": value}
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


def _cap_text(text: str, limit: int) -> Shaped:
    if _size(text) <= limit:
        return Shaped(None, text)
    data = text.encode()
    kept = data[:limit].decode("utf-8", "ignore")
    return Shaped(None, kept, (Cut("", "max_bytes", len(kept.encode()), len(data), "bytes"),))
