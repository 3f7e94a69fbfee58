"""compile_schema's compiled check (manifest/schema.py) answers exactly as jsonschema does.

Every input and output schema of the example overlays, against values made to fit them and to
break them (hypothesis-jsonschema, then mutated) and arbitrary JSON; plus the corners where
Python and JSON Schema disagree (True is not 1, 1.0 is an integer, a bool is no number).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis_jsonschema import from_schema
from jsonschema import Draft202012Validator, FormatChecker

from openapi2mcp.manifest import compile_schema
from tests.helpers import compile_example

pytestmark = pytest.mark.filterwarnings("ignore::hypothesis.errors.NonInteractiveExampleWarning")

OVERLAYS = [("notes", "overlay.yaml"), ("petstore", "overlay.yaml"), ("petstore", "overlay-tasks.yaml"),
            ("market", "overlay.yaml"), ("mailfiles", "overlay.yaml")]


def _schemas() -> list[tuple[str, dict[str, Any]]]:
    found: dict[str, tuple[str, dict[str, Any]]] = {}  # each schema once
    for name, overlay in OVERLAYS:
        for tool in compile_example(name, overlay=overlay).manifest.tools:
            for kind, schema in (("input", tool.input_schema), ("output", tool.output_schema)):
                if schema:
                    found.setdefault(json.dumps(schema, sort_keys=True), (f"{name}/{tool.name}/{kind}", schema))
    return list(found.values())


SCHEMAS = _schemas()
JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 200) | st.floats(allow_nan=False, allow_infinity=False)
    | st.sampled_from([0.0, 1.0, 3.0, -1.5]) | st.text(max_size=70),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(
        st.sampled_from(["id", "name", "petId", "status", "items", "tags", "age", "x", "category", "parent"])
        | st.text(max_size=5), inner, max_size=5),
    max_leaves=12,
)


def _mutate(value: Any, data: st.DataObject) -> Any:
    """`value` with one part replaced by arbitrary JSON (or unchanged)."""
    if isinstance(value, dict) and value and data.draw(st.booleans()):
        key = data.draw(st.sampled_from(sorted(value)))
        return {**value, key: _mutate(value[key], data)}
    if isinstance(value, list) and value and data.draw(st.booleans()):
        i = data.draw(st.integers(0, len(value) - 1))
        return [*value[:i], _mutate(value[i], data), *value[i + 1:]]
    return data.draw(JSON) if data.draw(st.booleans()) else value


def _agree(schema: dict[str, Any], value: Any, formats: bool) -> None:
    checker = FormatChecker(["date", "email", "uuid", "ipv4", "ipv6"]) if formats else None
    fast = compile_schema(schema, formats=formats)
    if formats:  # compile_schema's own format list (date-time too, with rfc3339-validator)
        checker = fast.format_checker
    plain = Draft202012Validator(schema, format_checker=checker)
    assert fast.is_valid(value) is plain.is_valid(value), value
    assert (not list(fast.iter_errors(value))) is plain.is_valid(value), value


@pytest.mark.parametrize(("where", "schema"), SCHEMAS, ids=[w for w, _ in SCHEMAS])
@settings(max_examples=8, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_the_compiled_check_agrees_with_jsonschema(where: str, schema: dict[str, Any], data: st.DataObject) -> None:
    fitting = data.draw(from_schema(schema) | JSON)
    value = _mutate(fitting, data)
    formats = data.draw(st.booleans())
    _agree(schema, fitting, formats)
    _agree(schema, value, formats)


@pytest.mark.parametrize(("schema", "value", "valid"), [
    ({"enum": [1, "a"]}, True, False),  # True is not 1
    ({"enum": [True]}, 1, False),
    ({"const": [1, {"a": 1.0}]}, [1.0, {"a": 1}], True),  # 1 and 1.0 are one number
    ({"type": "integer"}, 1.0, True),
    ({"type": "integer"}, True, False),
    ({"type": "number"}, False, False),
    ({"type": ["string", "null"], "minLength": 2}, None, True),
    ({"minLength": 2}, "é", False),  # code points, not bytes
    ({"maxLength": 1}, "é", True),
    ({"minimum": 0}, True, True),  # a bool is no number: minimum does not apply
    ({"exclusiveMaximum": 3}, 3, False),
    ({"type": "object", "properties": {"a": {"type": "string"}}, "additionalProperties": False}, {"b": 1}, False),
    ({"properties": {"a": {"type": "string"}}, "additionalProperties": {"type": "integer"}}, {"a": "x", "b": 2}, True),
    ({"required": ["a"]}, [1], True),  # required applies to objects only
    ({"items": {"type": "integer"}, "maxItems": 2}, [1, 2, 3], False),
    ({"items": False}, [], True),
    ({"pattern": "^a"}, "ba", False),  # a keyword it does not compile: jsonschema answers for that subschema
    ({"properties": {"a": {"pattern": "^a", "type": "string"}}}, {"a": "ab"}, True),
    ({"$defs": {"x": {"type": "string"}}, "properties": {"a": {"$ref": "#/$defs/x"}}}, {"a": 1}, False),
    ({"format": "email"}, "nope", True),  # without formats, format is an annotation
    ({"minimum": "zero"}, 1, None),  # not a valid schema: whatever jsonschema does
])
def test_corners_agree_with_jsonschema(schema: dict[str, Any], value: Any, valid: bool | None) -> None:
    try:
        expected = Draft202012Validator(schema).is_valid(value)
    except TypeError:
        with pytest.raises(TypeError):
            compile_schema(schema).is_valid(value)
        return
    assert compile_schema(schema).is_valid(value) is expected
    if valid is not None:
        assert expected is valid
