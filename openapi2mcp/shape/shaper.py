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

The steps live beside this module: expressions.py (select), cut.py (max_items, max_bytes),
repair.py (tolerant validation), describe.py (strict validation's message).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any

from openapi2mcp.errors import ErrorCode, ToolFailure
from openapi2mcp.manifest import ResponseSpec, compile_schema
from openapi2mcp.shape.cut import Cut, cut_items, fit, too_large
from openapi2mcp.shape.describe import cause, describe_error, error_path, first_error
from openapi2mcp.shape.expressions import compile_expression, search
from openapi2mcp.shape.jsonsize import clip, dumps, json_size, json_type, utf8_size
from openapi2mcp.shape.repair import Repair, Unrepairable, repair

if TYPE_CHECKING:
    from jsonschema.protocols import Validator


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


class Shaper:
    """One per tool (or branch): the response spec plus the output-schema validator, compiled once."""

    def __init__(self, spec: ResponseSpec, output_schema: Mapping[str, Any] | None, *, check: bool = False) -> None:
        self.spec = spec
        self.schema = output_schema
        self.check = check
        self.validates = output_schema is not None and spec.validate_ != "off"
        if self.validates and check:  # a schema error is a start-up error
            self.__dict__["validator"] = self._compiled()
        if spec.select:
            compile_expression(spec.select)

    @cached_property
    def validator(self) -> Validator | None:
        """The output-schema validator, built by the first result (jsonschema loads then, not at start-up)."""
        return self._compiled() if self.validates else None

    def _compiled(self) -> Validator:
        # strict checks the spec's own formats too (the cheap ones, see compile_schema)
        assert self.schema is not None
        return compile_schema(self.schema, check=self.check, formats=self.spec.validate_ == "strict")

    @property
    def tolerant(self) -> bool:
        """Results that do not fit are repaired (the default), not refused."""
        return self.validates and self.spec.validate_ == "tolerant"

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
                    raise too_large(limit) from None
            kept = fitted["items"]
            cursor = after if len(kept) == len(items) else cursor_at(len(kept))
            structured = {"items": kept, "next_cursor": cursor, "has_more": cursor is not None, **fitted}
            text = dumps(structured)
            shown, repairs = structured, tuple[Repair, ...]()
            if self.tolerant and self.validator is not None and not self.validator.is_valid(structured):
                shown, found = self._repair(structured)
                repairs = tuple(found)
            size = max(utf8_size(text), json_size(shown) if repairs else 0)
            if size <= limit:
                if cuts and not self.tolerant and self.validator is not None and not self.validator.is_valid(shown):
                    raise too_large(limit)  # shortening broke the contract: refuse honestly
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
                budget = limit - (utf8_size(keys) - json_size({"items": [], **extra}))
            else:
                budget -= size - limit
        raise too_large(limit)

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
            raise too_large(self.spec.max_bytes)  # shortening broke the contract: refuse honestly
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
        raise too_large(self.spec.max_bytes)

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
    if utf8_size(text) <= limit:
        return Shaped(None, text)
    data = text.encode()
    kept = data[:limit].decode("utf-8", "ignore")
    return Shaped(None, kept, (Cut("", "max_bytes", len(kept.encode()), len(data), "bytes"),))
