"""Upstreams that drift from their specs (issue 10 parts 1, 5 and the `defaults.response` merge), unit level.

* `schemas.tolerant`: the default output contract (structure and types, nulls everywhere, no assertions);
* `shape.repair` and the tolerant `Shaper`: a result that does not fit is repaired, never refused;
  the text keeps the upstream's values, `max_bytes` holds for both, `_meta` names every path;
* `response.validate: strict | off` and `defaults.response` merged key by key (compile);
* arguments as models send them: null means "not given", nullable errors name the branch meant.

The end-to-end tier (a real drifting upstream, `openapi2mcp serve`, the SDK client) is test_drift.py.
"""

from __future__ import annotations

import copy
import json
import textwrap
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from openapi2mcp.compiler import compile_manifest
from openapi2mcp.compiler.schemas import tolerant
from openapi2mcp.errors import ToolFailure
from openapi2mcp.loader import load_spec
from openapi2mcp.manifest import ResponseSpec, compile_schema
from openapi2mcp.overlay.reading import parse_overlay
from openapi2mcp.result import REPAIRS_KEY, REPAIRS_OMITTED_KEY, success
from openapi2mcp.runtime.tools import check_arguments
from openapi2mcp.shape import Repair, Shaper, drop_nulls
from openapi2mcp.shape.jsonsize import json_size
from openapi2mcp.shape.repair import Unrepairable, repair
from tests.drift.app import BODIES, EXACT, SPEC_PATH

# ----------------------------------------------------------------------------- tolerant()

STRICT: dict[str, Any] = {
    "type": "object",
    "required": ["id", "status", "tags"],
    "additionalProperties": False,
    "properties": {
        "id": {"type": "string", "format": "uuid", "pattern": "^[0-9a-f-]+$", "minLength": 36, "maxLength": 36},
        "status": {"type": "string", "enum": ["active", "retired"], "description": "Lifecycle."},
        "count": {"type": "integer", "minimum": 0, "maximum": 10, "multipleOf": 1, "exclusiveMaximum": 11},
        "kind": {"const": "record"},
        "tags": {"type": "array", "items": {"type": "string"}, "minItems": 1, "maxItems": 2, "uniqueItems": True},
        "pair": {"type": "array", "prefixItems": [{"type": "integer"}, {"type": "string"}], "items": False},
        "owner": {"anyOf": [{"$ref": "#/$defs/Owner"}, {"type": "null"}], "description": "Who owns it."},
        "meta": {"type": "object", "additionalProperties": {"type": "integer"}, "minProperties": 1,
                 "propertyNames": {"pattern": "^[a-z]+$"}},
        "either": {"anyOf": [{"type": "integer"}, {"$ref": "#/$defs/Owner"}], "not": {"type": "boolean"}},
    },
    "$defs": {"Owner": {"type": "object", "required": ["login"], "additionalProperties": False,
                        "properties": {"login": {"type": "string", "minLength": 2}}}},
}

DRIFTED: dict[str, Any] = {  # breaks every assertion of STRICT, keeps its structure and types
    "id": "not-a-uuid",
    "status": "archived",
    "count": 1000,
    "kind": "other",
    "tags": ["a", "a", "a"],
    "pair": [1, "x", "extra"],
    "owner": {"login": "a", "extra": True},
    "meta": {"UPPER": -1},
    "either": {"login": "x"},
    "undocumented": {"nested": [1, 2]},
}


def test_tolerant_keeps_structure_and_types_and_drops_every_assertion() -> None:
    out = tolerant(STRICT)
    jsonschema.Draft202012Validator.check_schema(out)
    assert compile_schema(STRICT, formats=True).is_valid(DRIFTED) is False
    assert compile_schema(out, formats=True).is_valid(DRIFTED) is True
    text = json.dumps(out)
    for keyword in ("format", "pattern", "minLength", "maxLength", "minimum", "maximum", "multipleOf",
                    "exclusiveMaximum", "minItems", "maxItems", "uniqueItems", "minProperties", "propertyNames",
                    "const", "enum", '"not"', "additionalProperties\": false", '"items": false'):
        assert keyword not in text, keyword
    assert out["type"] == "object"  # the root is the result itself: never null
    assert out["required"] == ["id", "status", "tags"]  # kept: a missing key is repaired to null
    props = out["properties"]
    assert props["id"]["type"] == ["string", "null"]
    assert props["tags"] == {"type": ["array", "null"], "items": {"type": ["string", "null"]}}
    assert props["meta"]["additionalProperties"] == {"type": ["integer", "null"]}  # a map stays a map
    assert props["pair"]["prefixItems"] == [{"type": ["integer", "null"]}, {"type": ["string", "null"]}]
    # the enum stays readable, a `{type: null}` member says nothing more once everything takes null
    assert props["status"]["description"] == "Lifecycle. One of: active, retired."
    assert props["kind"] == {"description": "One of: record."}
    assert props["owner"] == {"$ref": "#/$defs/Owner", "description": "Who owns it."}
    assert out["$defs"]["Owner"]["type"] == ["object", "null"]
    assert [m["type"] for m in props["either"]["anyOf"][:1]] == [["integer", "null"]]
    # nulls everywhere: every property, item and member
    nulls = dict.fromkeys(props)
    assert compile_schema(out).is_valid({**nulls, "tags": [None], "pair": [None, None], "meta": {"a": None}})


def test_tolerant_shares_the_work_on_shared_subschemas_and_never_changes_its_input() -> None:
    shared = {"type": "object", "properties": {"x": {"type": "integer", "minimum": 1}}}
    schema = {"type": "object", "properties": {"a": shared, "b": shared}}
    before = copy.deepcopy(schema)
    memo: dict[int, Any] = {}
    out = tolerant(schema, memo=memo)
    assert out["properties"]["a"] is out["properties"]["b"]
    assert tolerant({"type": "object", "properties": {"c": shared}}, memo=memo)["properties"]["c"] is \
        out["properties"]["a"]
    assert schema == before


def test_compiled_output_schemas_are_tolerant_by_default_strict_or_off_on_request(tmp_path: Path) -> None:
    overlay = textwrap.dedent("""\
        openapi2mcp: 1
        upstream: {base_url: "http://127.0.0.1:9"}
        tools:
          - {name: tolerant_one, operation: getExact}
          - {name: strict_one, operation: getExact, response: {validate: strict}}
          - {name: off_one, operation: getExact, response: {validate: "off"}}
          - {name: strict_page, operation: listPage, response: {validate: strict},
             pagination: {style: offset, page_size: 2}}
          - {name: tolerant_page, operation: listPage, pagination: {style: offset, page_size: 2}}
          - {name: off_page, operation: listPage, response: {validate: "off"}, pagination: {style: offset}}
        """)
    m = compile_manifest(load_spec(str(SPEC_PATH)), [parse_overlay(overlay, "o.yaml")]).manifest
    tools = {t.name: t for t in m.tools}
    loose, strict = tools["tolerant_one"].output_schema, tools["strict_one"].output_schema
    assert loose is not None and strict is not None
    assert loose["properties"]["status"]["type"] == ["string", "null"] and "enum" not in loose["properties"]["status"]
    # strict is the spec's own: enum, format, pattern, ranges, closed objects, non-nullable fields
    assert strict["properties"]["status"]["enum"] == ["active", "retired"]
    assert strict["properties"]["id"]["format"] == "uuid"
    assert strict["properties"]["count"]["maximum"] == 100
    assert strict["additionalProperties"] is False
    assert strict["properties"]["name"]["type"] == "string"
    assert tools["strict_one"].response.validate_ == "strict"
    assert tools["off_one"].output_schema is None and tools["off_page"].output_schema is None
    strict_item = tools["strict_page"].output_schema["properties"]["items"]["items"]  # type: ignore[index]
    loose_item = tools["tolerant_page"].output_schema["properties"]["items"]["items"]  # type: ignore[index]
    assert strict_item["properties"]["count"]["maximum"] == 100
    assert loose_item["properties"]["count"]["type"] == ["integer", "null"]
    # the paging keys are this server's own: not loosened
    assert tools["tolerant_page"].output_schema["properties"]["has_more"] == {  # type: ignore[index]
        "type": "boolean", "description": "true when more items follow (next_cursor is set)."}
    # the Manifest stays small: the default mode is not written
    assert '"validate"' not in tools["tolerant_one"].model_dump_json(by_alias=True, exclude_defaults=True)


def test_defaults_response_merges_key_by_key(tmp_path: Path) -> None:
    overlay = textwrap.dedent("""\
        openapi2mcp: 1
        upstream: {base_url: "http://127.0.0.1:9"}
        passthrough: true
        defaults:
          response: {max_bytes: 5000, validate: strict, max_items: 7}
        tools:
          - {name: own_select, operation: getExact, response: {select: "{id: id}"}}
          - {name: own_bytes, operation: getExact, response: {max_bytes: 900, validate: tolerant}}
          - name: both
            response: {max_bytes: 1200}
            actions:
              exact: {operation: getExact}
              nulls: {operation: getNulls, response: {validate: "off"}}
        """)
    m = compile_manifest(load_spec(str(SPEC_PATH)), [parse_overlay(overlay, "o.yaml")]).manifest
    tools = {t.name: t for t in m.tools}
    select = tools["own_select"].response
    assert (select.select, select.max_bytes, select.validate_, select.max_items) == ("{id: id}", 5000, "strict", 7)
    own = tools["own_bytes"].response
    assert (own.max_bytes, own.validate_, own.max_items) == (900, "tolerant", 7)
    branches = {b.key: b.response for b in tools["both"].branches}
    assert branches["exact"] is not None and branches["nulls"] is not None
    assert (branches["exact"].max_bytes, branches["exact"].validate_) == (1200, "strict")  # tool over defaults
    assert (branches["nulls"].max_bytes, branches["nulls"].validate_) == (1200, "off")  # branch over tool
    assert tools["both"].output_schema is None  # a branch without a schema: the tool has none
    raw = tools["getShapes"]  # passthrough: a 1:1 tool gets the defaults too (not a `select`)
    assert (raw.response.max_bytes, raw.response.validate_, raw.response.select) == (5000, "strict", None)
    assert raw.output_schema is not None and raw.output_schema["additionalProperties"] is False


def test_a_strict_branch_is_checked_against_its_own_schema_not_the_union(tmp_path: Path) -> None:
    overlay = textwrap.dedent("""\
        openapi2mcp: 1
        upstream: {base_url: "http://127.0.0.1:9"}
        tools:
          - name: mixed
            actions:
              one: {operation: getExact, response: {validate: strict}}
              list: {operation: listRecords}
        """)
    m = compile_manifest(load_spec(str(SPEC_PATH)), [parse_overlay(overlay, "o.yaml")]).manifest
    tool = m.tools[0]
    one, listed = tool.branches
    assert one.output_schema is not None and one.output_schema["properties"]["status"]["enum"] == ["active", "retired"]
    assert listed.output_schema is None  # a tolerant branch repairs against the tool's advertised schema


# ----------------------------------------------------------------------------- repair()

RECORD = tolerant({
    "type": "object",
    "required": ["id", "count"],
    "properties": {
        "id": {"type": "string"},
        "count": {"type": "integer"},
        "ratio": {"type": "number"},
        "ok": {"type": "boolean"},
        "tags": {"type": "array", "items": {"type": "string"}},
        "owner": {"type": "object", "required": ["login"], "properties": {"login": {"type": "string"}}},
        "ident": {"anyOf": [{"type": "integer"}, {"type": "object", "required": ["login"],
                                                     "properties": {"login": {"type": "string"}}}]},
    },
})


def fixed(value: Any, schema: dict[str, Any] = RECORD) -> tuple[dict[str, Any], list[dict[str, str]]]:
    before = copy.deepcopy(value)
    out, repairs = repair(compile_schema(schema), value)
    assert compile_schema(schema).is_valid(out)
    assert value == before  # the upstream's value (the text content) is never changed
    return out, [r.meta() for r in repairs]


@pytest.mark.parametrize(
    ("value", "expected", "repairs"),
    [
        ({"id": "a", "count": "42"}, {"id": "a", "count": 42},
         [{"path": "count", "expected": "integer", "got": "string", "action": "converted"}]),
        ({"id": 7, "count": 1, "ratio": "0.5", "ok": "true"}, {"id": "7", "count": 1, "ratio": 0.5, "ok": True},
         [{"path": "id", "expected": "string", "got": "integer", "action": "converted"},
          {"path": "ok", "expected": "boolean", "got": "string", "action": "converted"},
          {"path": "ratio", "expected": "number", "got": "string", "action": "converted"}]),
        ({"id": "a", "count": "forty-two"}, {"id": "a", "count": None},  # required: null, never a guess
         [{"path": "count", "expected": "integer", "got": "string", "action": "null"}]),
        ({"id": "a", "count": " 7"}, {"id": "a", "count": None},  # not canonical: not converted
         [{"path": "count", "expected": "integer", "got": "string", "action": "null"}]),
        ({"id": "a", "count": "1e999"}, {"id": "a", "count": None},  # not finite
         [{"path": "count", "expected": "integer", "got": "string", "action": "null"}]),
        ({"id": "a", "count": 1, "ratio": "half"}, {"id": "a", "count": 1},  # optional: left out
         [{"path": "ratio", "expected": "number", "got": "string", "action": "removed"}]),
        ({"count": 1}, {"count": 1, "id": None},
         [{"path": "id", "expected": "string", "got": "missing", "action": "null"}]),
        ({"id": "a", "count": 1, "tags": {"x": 1}}, {"id": "a", "count": 1},
         [{"path": "tags", "expected": "array", "got": "object", "action": "removed"}]),
        ({"id": "a", "count": 1, "tags": ["x", 5, {"y": 1}]}, {"id": "a", "count": 1, "tags": ["x", "5", None]},
         [{"path": "tags[1]", "expected": "string", "got": "integer", "action": "converted"},
          {"path": "tags[2]", "expected": "string", "got": "object", "action": "null"}]),  # indexes kept
        ({"id": "a", "count": 1, "owner": "ada"}, {"id": "a", "count": 1},
         [{"path": "owner", "expected": "object", "got": "string", "action": "removed"}]),
        ({"id": "a", "count": 1, "owner": {}}, {"id": "a", "count": 1, "owner": {"login": None}},
         [{"path": "owner.login", "expected": "string", "got": "missing", "action": "null"}]),
        # a union: repaired inside the branch the value was meant for (the object one)
        ({"id": "a", "count": 1, "ident": {"login": 5}}, {"id": "a", "count": 1, "ident": {"login": "5"}},
         [{"path": "ident.login", "expected": "string", "got": "integer", "action": "converted"}]),
        ({"id": "a", "count": 1, "ident": [1]}, {"id": "a", "count": 1},
         [{"path": "ident", "expected": "integer or object", "got": "array", "action": "removed"}]),
        ([{"id": "a"}], {"id": None, "count": None},  # an array where the object was documented
         [{"path": "", "expected": "object", "got": "array", "action": "removed"},
          {"path": "count", "expected": "integer", "got": "missing", "action": "null"},
          {"path": "id", "expected": "string", "got": "missing", "action": "null"}]),
        ({"id": None, "count": None, "extra": {"anything": [1]}},  # nulls and extra keys fit already
         {"id": None, "count": None, "extra": {"anything": [1]}}, []),
    ],
)
def test_repair(value: Any, expected: dict[str, Any], repairs: list[dict[str, str]]) -> None:
    assert fixed(value) == (expected, repairs)


def test_repair_handles_schemas_that_were_not_made_tolerant() -> None:
    closed = {"type": "object", "additionalProperties": False, "required": ["a"],
              "properties": {"a": {"type": ["string", "null"], "enum": ["x", None]}, "b": {"type": "integer"}}}
    out, repairs = fixed({"a": "y", "b": None, "c": 1}, closed)
    assert out == {"a": None}
    assert {r["path"]: r["action"] for r in repairs} == {"a": "null", "b": "removed", "c": "removed"}
    refused = {"type": "object", "required": ["a"], "properties": {"a": {"type": "integer"}}}
    with pytest.raises(Unrepairable, match="at a: expected integer, got string"):
        repair(compile_schema(refused), {"a": "x"})  # a required key that takes no null: no fit exists


def test_repair_copies_only_what_it_changes() -> None:
    items = [{"id": str(i), "count": i, "tags": ["t"] * 3} for i in range(2000)]
    items[1500]["count"] = "oops"
    body = {"items": items}
    schema = tolerant({"type": "object", "properties": {"items": {"type": "array", "items": RECORD}}})
    out, repairs = repair(compile_schema(schema), body)
    assert [r.path for r in repairs] == ["items[1500].count"]
    assert out["items"][1499] is items[1499] and out["items"][1500] is not items[1500]
    assert items[1500]["count"] == "oops"


# ----------------------------------------------------------------------------- the tolerant Shaper

def shaper(schema: dict[str, Any], **spec: Any) -> Shaper:
    return Shaper(ResponseSpec(**spec), schema)


def test_a_repaired_result_keeps_the_upstream_values_in_the_text() -> None:
    shaped = shaper(RECORD).json({"id": "a", "count": "3", "tags": {"x": 1}})
    assert shaped.structured == {"id": "a", "count": 3}
    assert json.loads(shaped.text) == {"id": "a", "count": "3", "tags": {"x": 1}}
    assert [r.path for r in shaped.repairs] == ["count", "tags"]
    result = success(shaped, {"openapi2mcp/traceId": "t"})
    assert result.structured_content == {"id": "a", "count": 3}
    assert result.meta is not None and result.meta[REPAIRS_KEY] == [r.meta() for r in shaped.repairs]
    notice = result.content[-1].text  # type: ignore[union-attr]
    assert notice.startswith("Note: 2 values of this result do not match the tool's documented output schema")
    assert "count: expected integer, got string (converted)" in notice
    assert "tags: expected array, got object (left out)" in notice


def test_a_result_that_fits_is_not_touched() -> None:
    shaped = shaper(RECORD).json({"id": None, "count": 1, "more": "x"})
    assert (shaped.structured, shaped.repairs) == ({"id": None, "count": 1, "more": "x"}, ())
    assert success(shaped, {}).meta == {}


def test_max_bytes_holds_for_the_text_and_the_repaired_structured_content() -> None:
    # every item lacks a required key with a long name: the repaired form is longer than the upstream's
    schema = tolerant({"type": "object", "properties": {"items": {"type": "array", "items": {
        "type": "object", "required": ["a_rather_long_required_key_name"], "properties": {"n": {"type": "integer"}},
    }}}})
    body = {"items": [{"n": i} for i in range(400)]}
    shaped = shaper(schema, max_bytes=4000).json(body)
    assert shaped.structured is not None
    assert json_size(shaped.structured) <= 4000 and len(shaped.text.encode()) <= 4000
    kept = len(shaped.structured["items"])
    assert 10 < kept < 400 and len(json.loads(shaped.text)["items"]) == kept  # the same items in both
    assert shaped.cuts[0].path == "items" and shaped.cuts[0].kept == kept
    assert len(shaped.repairs) == kept


def test_many_repairs_are_listed_up_to_a_bound() -> None:
    repairs = tuple(Repair(f"items[{i}].n", "integer", "string", "removed") for i in range(150))
    shaped = shaper(RECORD).json({"id": "a", "count": 1})
    meta = success(type(shaped)(shaped.structured, shaped.text, (), repairs), {}).meta
    assert meta is not None and len(meta[REPAIRS_KEY]) == 100 and meta[REPAIRS_OMITTED_KEY] == 50
    assert "items[*].n: expected integer, got string (150 times, left out)" in \
        success(type(shaped)(shaped.structured, shaped.text, (), repairs), {}).content[-1].text  # type: ignore[union-attr]


def test_a_page_whose_items_drift_is_repaired_and_still_resumable() -> None:
    page_schema = {"type": "object", "required": ["items", "next_cursor", "has_more"], "properties": {
        "items": {"type": "array", "items": RECORD}, "next_cursor": {"type": ["string", "null"]},
        "has_more": {"type": "boolean"}}}
    items = [{"id": str(i), "count": str(i)} for i in range(6)]
    shaped = shaper(page_schema).page(items, None, lambda k: f"c{k}" if k < 10 else None)
    assert shaped.structured is not None
    assert [i["count"] for i in shaped.structured["items"]] == list(range(6))
    assert json.loads(shaped.text)["items"] == items
    assert (shaped.structured["next_cursor"], shaped.structured["has_more"]) == ("c6", True)
    assert [r.path for r in shaped.repairs] == [f"items[{i}].count" for i in range(6)]


def test_text_and_empty_bodies_where_json_was_documented() -> None:
    shaped = shaper(RECORD).text("<html>down</html>", "text/html")
    assert shaped.structured == {"id": None, "count": None}
    assert shaped.text == "<html>down</html>"  # what the upstream sent, as is
    assert shaped.repairs[0] == Repair("", "JSON", "text/html", "removed")
    empty = shaper(RECORD).empty(204)
    assert empty.structured == {"id": None, "count": None} and json.loads(empty.text) == {"status": 204}
    assert empty.repairs[0].got == "no content (HTTP 204)"


def test_strict_refuses_what_tolerant_repairs_and_checks_formats() -> None:
    schema = {"type": "object", "properties": {"when": {"type": "string", "format": "date-time"}}}
    with pytest.raises(ToolFailure) as info:
        shaper(schema, validate_="strict").json({"when": "yesterday"})
    assert info.value.error.message == (
        "the upstream response does not match the documented schema at when: 'yesterday' is not a 'date-time'")
    assert shaper(schema).json({"when": "yesterday"}).structured == {"when": "yesterday"}  # a format: no assertion
    unchecked = shaper(schema, validate_="off").json([1])
    assert unchecked.structured == {"result": [1]}


# ----------------------------------------------------------------------------- arguments

FLOWS_ARGS = {
    "type": "object",
    "additionalProperties": False,
    "required": ["name"],
    "properties": {
        "name": {"type": "string"},
        "note": {"type": "string"},
        "clear_me": {"type": ["string", "null"]},
        "concurrency_limit": {"anyOf": [{"type": "integer", "minimum": 1}, {"type": "null"}]},
        "flows": {"anyOf": [
            {"type": "object", "additionalProperties": False, "properties": {
                "name": {"anyOf": [
                    {"type": "object", "additionalProperties": False,
                     "properties": {"like_": {"type": "string"}, "any_": {"type": "array"}}},
                    {"type": "null"}]},
                "limit": {"type": "integer"}}},
            {"type": "null"}]},
        "tags": {"type": "array", "items": {"type": "string"}},
    },
}


def problems(arguments: dict[str, Any]) -> str | None:
    validator = compile_schema(FLOWS_ARGS)
    given, nulled = drop_nulls(validator, arguments)
    try:
        check_arguments(validator, given, nulled)
    except ToolFailure as e:
        return e.error.message
    return None


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"name": "x", "flows": {"name": {"like_": 5}}}, "flows.name.like_: expected string, got integer"),
        ({"name": "x", "concurrency_limit": -3}, "concurrency_limit: -3 is less than the minimum of 1"),
        ({"name": "x", "concurrency_limit": "3"}, "concurrency_limit: expected integer, got string"),
        ({"name": "x", "flows": {"nme": {}}}, "flows.nme: unknown argument, did you mean 'name'?"),
        ({"name": "x", "flows": {"limit": "7", "name": {"like_": []}}},
         "flows.limit: expected integer, got string; flows.name.like_: expected string, got array"),
        ({"name": None}, "name: required, got null"),
        ({"name": "x", "tags": [None]}, "tags[0]: expected string, got null"),  # an item is not an argument
    ],
)
def test_argument_errors_describe_the_branch_meant(arguments: dict[str, Any], message: str) -> None:
    assert problems(arguments) == message


def test_null_means_not_given_unless_the_schema_takes_null() -> None:
    validator = compile_schema(FLOWS_ARGS)
    arguments = {"name": "x", "note": None, "clear_me": None, "concurrency_limit": None,
                 "flows": {"name": {"like_": None, "any_": None}, "limit": None}}
    given, nulled = drop_nulls(validator, arguments)
    # clear_me and concurrency_limit take null (a PATCH that clears a field): null stays a value
    assert given == {"name": "x", "clear_me": None, "concurrency_limit": None, "flows": {"name": {}}}
    assert nulled == {"note", "flows.name.like_", "flows.name.any_", "flows.limit"}
    check_arguments(validator, given, nulled)
    assert arguments["flows"]["name"] == {"like_": None, "any_": None}  # the caller's dict is not changed


def test_the_drift_upstream_bodies_differ_from_the_exact_one() -> None:
    # a guard for test_drift.py: each case really drifts (or is the exact one)
    assert BODIES["getExact"] == EXACT
    assert all(body != EXACT for op, body in BODIES.items() if op != "getExact")


def test_the_notes_example_keeps_its_default_max_bytes_where_tools_select() -> None:
    # README's overlay: `defaults.response: {max_bytes: 16000}` and tools with their own `select`
    from openapi2mcp.overlay import read_overlay
    from tests.local import EXAMPLES

    m = compile_manifest(load_spec(str(EXAMPLES / "notes" / "openapi.yaml")),
                         [read_overlay(EXAMPLES / "notes" / "overlay.yaml")]).manifest
    selecting = [t for t in m.tools if t.response.select]
    assert selecting and {t.response.max_bytes for t in m.tools} == {16000}


def test_a_union_is_repaired_in_the_branch_that_documents_the_value() -> None:
    from openapi2mcp.compiler.contract import with_dry_run_result

    # a dry-run tool's result is the real one or the preview: a real one that lost most of its
    # required keys is still the real one (it names the real keys), never a half-made preview
    real = tolerant({"type": "object", "required": ["a", "b", "c", "d", "e"], "properties": {
        "a": {"type": "string"}, "b": {"type": "string"}, "c": {"type": "string"}, "d": {"type": "string"},
        "e": {"type": "string"}, "n": {"type": "integer"}}})
    schema = with_dry_run_result(real, None)
    out, repairs = fixed({"a": "x", "n": "many"}, schema)
    assert out == {"a": "x", "b": None, "c": None, "d": None, "e": None}
    assert "dryRun" not in out and [r["path"] for r in repairs] == ["b", "c", "d", "e", "n"]
    name = {"name": {"type": "string"}}
    pets = tolerant({"anyOf": [
        {"type": "object", "required": ["name"], "properties": {**name, "meow": {"type": "integer"}}},
        {"type": "object", "required": ["name"], "properties": {**name, "bark": {"type": "integer"}}},
    ]})
    wrapped = {"type": "object", "properties": {"pet": pets}}
    # fewer errors as a cat (only `name`), but the keys say dog: repaired as a dog
    assert fixed({"pet": {"bark": "loud", "name": 5}}, wrapped) == (
        {"pet": {"name": "5"}}, [_r("pet.bark", "integer", "string", "removed"),
                                 _r("pet.name", "string", "integer", "converted")])


def _r(path: str, expected: str, got: str, action: str) -> dict[str, str]:
    return {"path": path, "expected": expected, "got": got, "action": action}
