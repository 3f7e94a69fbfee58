"""Result shaping: select, wrap, max_items, max_bytes, output-schema validation, text and empty bodies."""

from __future__ import annotations

from typing import Any

import pytest

from openapi2mcp.errors import ToolFailure
from openapi2mcp.manifest import ResponseSpec, compile_schema
from openapi2mcp.shape import Shaper, describe_error, dumps, error_path, notice, truthy
from openapi2mcp.shape.cut import fit
from openapi2mcp.shape.describe import first_error
from openapi2mcp.shape.jsonsize import json_size

ITEMS = {"items": [{"id": i, "name": f"item {i}", "tags": ["a", "b", "c"]} for i in range(50)], "total": 50}
ITEM_SCHEMA = {
    "type": "object",
    "properties": {"id": {"type": "integer"}, "name": {"type": "string"}},
    "required": ["id", "name"],
}
LIST_SCHEMA = {
    "type": "object",
    "properties": {"items": {"type": "array", "items": ITEM_SCHEMA}, "total": {"type": "integer"}},
    "required": ["items"],
    "additionalProperties": False,
}


def shaper(output_schema: dict[str, Any] | None = None, **spec: Any) -> Shaper:
    return Shaper(ResponseSpec(**spec), output_schema)


def strict(output_schema: dict[str, Any] | None = None, **spec: Any) -> Shaper:
    return Shaper(ResponseSpec(validate_="strict", **spec), output_schema)


def failure(fn: Any, *args: Any) -> dict[str, Any]:
    with pytest.raises(ToolFailure) as info:
        fn(*args)
    return info.value.error.body()


def test_plain_object_passes_through_as_compact_json() -> None:
    shaped = shaper().json({"a": 1, "b": "ü"})
    assert shaped.structured == {"a": 1, "b": "ü"}
    assert shaped.text == '{"a":1,"b":"ü"}'
    assert shaped.cuts == ()


def test_select_projects_the_body() -> None:
    shaped = shaper(select="items[?id < `2`].{id: id, name: name}").json(ITEMS)
    assert shaped.structured == {"result": [{"id": 0, "name": "item 0"}, {"id": 1, "name": "item 1"}]}


def test_wrap_non_object_values() -> None:
    assert shaper(wrap="pets").json([1, 2]).structured == {"pets": [1, 2]}
    assert shaper(wrap="count").json(3).structured == {"count": 3}
    assert shaper().json("x").structured == {"result": "x"}  # no contract: still an object


def test_non_object_without_wrap_against_a_schema_is_invalid_response() -> None:
    body = failure(strict({"type": "object"}).json, [1, 2])
    assert body["code"] == "UPSTREAM_INVALID_RESPONSE"
    assert "expected object, got array" in body["message"]


def test_max_items_cuts_lists_of_results_and_stays_valid() -> None:
    shaped = shaper(LIST_SCHEMA, max_items=5).json(ITEMS)
    assert shaped.structured is not None
    assert len(shaped.structured["items"]) == 5
    assert shaped.structured["items"][0]["tags"] == ["a", "b", "c"]  # arrays inside items are kept
    assert [c.meta() for c in shaped.cuts] == [
        {"path": "items", "reason": "max_items", "kept": 5, "total": 50, "unit": "items"}
    ]
    assert compile_schema(LIST_SCHEMA).is_valid(shaped.structured)  # no notice key was added
    text = notice(shaped.cuts)
    assert "items: 5 of 50 items kept" in text
    assert "Ask for less" in text


def test_max_items_applies_to_wrapped_top_level_lists() -> None:
    shaped = shaper(wrap="pets", max_items=2).json([1, 2, 3])
    assert shaped.structured == {"pets": [1, 2]}
    assert shaped.cuts[0].path == "pets"


def test_max_bytes_cuts_the_largest_list_to_fit() -> None:
    shaped = shaper(LIST_SCHEMA, max_bytes=1000).json(ITEMS)
    assert shaped.structured is not None
    assert json_size(shaped.structured) <= 1000
    assert len(shaped.text.encode()) <= 1000
    assert 5 < len(shaped.structured["items"]) < 50
    cut = shaped.cuts[0]
    assert (cut.path, cut.reason, cut.total) == ("items", "max_bytes", 50)
    assert cut.kept == len(shaped.structured["items"])


def test_max_bytes_shortens_long_strings_when_lists_are_not_enough() -> None:
    shaped = shaper(max_bytes=300).json({"title": "t", "body": "x" * 10_000})
    assert shaped.structured is not None
    assert json_size(shaped.structured) <= 300
    assert shaped.structured["title"] == "t"
    assert shaped.structured["body"].endswith("…")
    assert shaped.cuts[0].path == "*"
    assert "strings longer than" in notice(shaped.cuts)


def test_max_bytes_refuses_what_cannot_fit() -> None:
    many_keys = {f"k{i}": i for i in range(500)}
    body = failure(shaper(max_bytes=200).json, many_keys)
    assert body["code"] == "RESPONSE_TOO_LARGE"
    assert "200 bytes" in body["message"]


def test_max_bytes_refuses_when_shortening_would_break_the_schema() -> None:
    schema = {"type": "object", "properties": {"id": {"type": "string", "pattern": "^x+$"}}}
    body = failure(strict(schema, max_bytes=100).json, {"id": "x" * 500})
    assert body["code"] == "RESPONSE_TOO_LARGE"


def test_fit_keeps_valid_json_for_nested_lists() -> None:
    value = {"data": {"rows": [{"v": "y" * 50} for _ in range(100)]}, "next": "abc"}
    fitted, text, cuts = fit(value, 700)
    assert json_size(fitted) <= 700
    assert text == dumps(fitted)  # the text measured is the text sent
    assert fitted["next"] == "abc"
    assert cuts[0].path == "data.rows"


def test_lying_upstream_names_the_first_mismatch() -> None:
    body = dict(ITEMS)
    body["items"] = [{"id": 0, "name": "a"}, {"id": 1, "name": "b"}, {"id": 2, "name": "c"}, {"id": "x", "name": "d"}]
    error = failure(strict(LIST_SCHEMA).json, body)
    assert error["code"] == "UPSTREAM_INVALID_RESPONSE"
    assert error["message"] == (
        "the upstream response does not match the documented schema at items[3].id: expected integer, got string"
    )


def test_mismatch_message_never_dumps_a_large_instance() -> None:
    error = failure(strict({"type": "object", "properties": {"a": {"type": "string"}}}).json, {"a": ["z" * 9000]})
    assert len(error["message"]) < 200


def test_text_bodies() -> None:
    shaped = shaper().text("hello\nworld", "text/plain")
    assert (shaped.structured, shaped.text) == (None, "hello\nworld")
    capped = shaper(max_bytes=10).text("é" * 20, "text/plain")
    assert len(capped.text.encode()) <= 10
    assert capped.cuts[0].unit == "bytes"
    wrapped = shaper({"type": "object", "properties": {"csv": {"type": "string"}}}, wrap="csv").text("a,b", "text/csv")
    assert wrapped.structured == {"csv": "a,b"}


def test_text_where_json_was_documented_is_invalid_response() -> None:
    error = failure(strict(LIST_SCHEMA).text, "<html>oops</html>", "text/html")
    assert error["code"] == "UPSTREAM_INVALID_RESPONSE"
    assert "text/html" in error["message"]


def test_empty_bodies() -> None:
    assert shaper().empty(204).structured == {"status": 204}
    assert shaper({"type": "object", "additionalProperties": False}).empty(204).structured == {}
    error = failure(strict(LIST_SCHEMA).empty, 204)
    assert error["code"] == "UPSTREAM_INVALID_RESPONSE"
    assert "do not repeat it" in error["message"]


def test_helpers() -> None:
    assert error_path(["items", 3, "age"]) == "items[3].age"
    assert error_path([]) == ""
    assert [truthy(v) for v in (None, False, "", [], {}, 0, "a", [0])] == [False] * 5 + [True] * 3
    assert dumps({"a": [1, 2]}) == '{"a":[1,2]}'
    validator = compile_schema(
        {"type": "object", "properties": {"n": {"anyOf": [{"type": "integer"}, {"type": "null"}]}}}
    )
    error = first_error(validator, {"n": "x"})
    assert error is not None
    assert describe_error(error).startswith("expected ")


def test_input_formats_are_checked_when_asked() -> None:
    schema = {"type": "object", "properties": {"d": {"type": "string", "format": "date"}}}
    assert compile_schema(schema, formats=True).is_valid({"d": "2024-02-30"}) is False
    assert compile_schema(schema).is_valid({"d": "2024-02-30"}) is True


def test_expression_type_errors_over_upstream_data_are_invalid_responses() -> None:
    error = failure(shaper(select="length(count)").json, {"count": 3})
    assert error["code"] == "UPSTREAM_INVALID_RESPONSE"
    assert "length(count)" in error["message"]
