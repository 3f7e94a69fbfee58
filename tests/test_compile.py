"""The compile stage: spec + overlay -> Manifest. Assertions are on what a client will see."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import jsonschema
import pytest

from openapi2mcp.compiler import compile_manifest
from openapi2mcp.errors import InputError
from openapi2mcp.loader import load_spec
from openapi2mcp.manifest import Manifest
from openapi2mcp.overlay.reading import parse_overlay
from tests.conftest import corpus_file
from tests.helpers import compile_example, compile_text, tool, write_spec

NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")  # what Claude Desktop, claude.ai and OpenAI-compatible APIs accept


def errors_of(tmp_path: Path, spec: dict | str, overlay: str) -> str:
    with pytest.raises(InputError) as info:
        compile_text(tmp_path, spec, overlay)
    return str(info.value)


MINI = {
    "openapi": "3.0.3",
    "info": {"title": "Mini API", "version": "2.1"},
    "servers": [{"url": "https://api.example.com/{version}", "variables": {"version": {"default": "v1"}}}],
    "paths": {
        "/items/{itemId}": {
            "parameters": [{"name": "itemId", "in": "path", "required": True, "schema": {"type": "string"}}],
            "get": {
                "operationId": "getItem",
                "summary": "Get an item",
                "parameters": [
                    {"name": "q_limit", "in": "query", "schema": {"type": "integer", "minimum": 1}},
                    {"name": "format", "in": "query", "schema": {"type": "string", "enum": ["json", "xml"]}},
                    {"name": "filter[status]", "in": "query", "schema": {"type": "string"}},
                    {"name": "Accept", "in": "header", "schema": {"type": "string"}},
                ],
                "responses": {
                    "200": {
                        "description": "ok",
                        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Item"}}},
                    }
                },
            },
            "put": {
                "operationId": "putItem",
                "requestBody": {
                    "required": True,
                    "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Item"}}},
                },
                "responses": {"200": {"description": "ok"}},
            },
        },
        "/items": {
            "get": {
                "responses": {
                    "200": {
                        "description": "list",
                        "content": {
                            "application/json": {
                                "schema": {"type": "array", "items": {"$ref": "#/components/schemas/Item"}}
                            }
                        },
                    }
                }
            },
            "post": {
                "operationId": "bulk",
                "requestBody": {
                    "content": {
                        "application/json": {"schema": {"type": "array", "items": {"type": "string"}}}
                    }
                },
                "responses": {"204": {"description": "done"}},
            },
        },
    },
    "components": {
        "schemas": {
            "Item": {
                "type": "object",
                "required": ["id", "name"],
                "properties": {
                    "id": {"type": "string", "readOnly": True},
                    "itemId": {"type": "string", "description": "collides with the path parameter"},
                    "name": {"type": "string", "nullable": True, "maxLength": 10},
                    "secret": {"type": "string", "writeOnly": True},
                    "kind": {"type": "string", "enum": ["a", "b"]},
                    "parent": {"$ref": "#/components/schemas/Item"},
                    "size": {"type": "number", "minimum": 0, "exclusiveMinimum": True},
                },
            }
        }
    },
}


# ----------------------------------------------------------------------------- raw (1:1) tools


def test_all_operations_names_schemas_and_plans(tmp_path: Path) -> None:
    c = compile_text(tmp_path, MINI, all_operations=True)
    names = [t.name for t in c.manifest.tools]
    assert names == ["getItem", "putItem", "get_items", "bulk"]
    get = tool(c, "getItem")
    props = get.input_schema["properties"]
    # path-level parameters merge in; Accept is the HTTP layer's; bracketed names become valid names
    assert list(props) == ["itemId", "q_limit", "format", "filter_status"]
    assert get.input_schema["required"] == ["itemId"]
    assert get.input_schema["additionalProperties"] is False
    plan = get.branches[0].steps[0].operation
    assert (plan.method, plan.path) == ("GET", "/items/{itemId}")
    assert [(p.name, p.arg) for p in plan.params][-1] == ("filter[status]", "filter_status")
    # output: readOnly kept, writeOnly dropped, recursion as $defs, oneOf/constraints relaxed
    out = get.output_schema
    assert "secret" not in out["properties"]
    assert out["properties"]["name"]["type"] == ["string", "null"]
    assert "maxLength" not in out["properties"]["name"]
    assert "One of: a, b." in out["properties"]["kind"]["description"]
    # server URL variables take their defaults ($OPENAPI2MCP_BASE_URL overrides any base URL at run time)
    assert c.manifest.upstream.base_url == "https://api.example.com/v1"
    assert c.manifest.upstream.spec_server is None


def test_request_body_is_flattened_without_collisions(tmp_path: Path) -> None:
    put = tool(compile_text(tmp_path, MINI, all_operations=True), "putItem")
    props = put.input_schema["properties"]
    assert "id" not in props  # readOnly: never sent
    assert "secret" in props  # writeOnly: sent
    assert "body_itemId" in props and props["itemId"]["type"] == "string"
    assert props["size"]["exclusiveMinimum"] == 0 and "minimum" not in props["size"]
    assert props["name"]["type"] == ["string", "null"] and props["name"]["maxLength"] == 10
    # the recursive parent is a finite $ref into the root's $defs
    assert props["parent"] == {"$ref": "#/$defs/Item"}
    assert "Item" in put.input_schema["$defs"]
    jsonschema.Draft202012Validator.check_schema(put.input_schema)
    jsonschema.validate({"itemId": "1", "name": "x", "parent": {"name": "y", "parent": {"name": None}}},
                        put.input_schema)
    body = put.branches[0].steps[0].operation.body
    assert body is not None and body.media_type == "application/json" and body.required
    assert body.properties["body_itemId"] == "itemId"


def test_params_keys_mean_the_argument_the_model_sees(tmp_path: Path) -> None:
    """putItem has a path parameter and a body property both called itemId (the body's is body_itemId).

    Found with Jupyter Server's PUT/PATCH /api/contents/{path}, whose bodies have a `path` too: the
    overlay's `path` settings landed on the body property while the model saw the path parameter.
    """
    c = compile_text(tmp_path, MINI, """\
        openapi2mcp: 1
        tools:
          - name: items.put
            operation: putItem
            params:
              itemId: {description: "The item to replace."}
              body_itemId: {hidden: true}
        """)
    props = tool(c, "items_put").input_schema["properties"]
    assert props["itemId"]["description"] == "The item to replace."
    assert "body_itemId" not in props
    renamed = compile_text(tmp_path, MINI, """\
        openapi2mcp: 1
        tools:
          - {name: items.put, operation: putItem, params: {new_id: {rename: body_itemId}}}
        """)
    props = tool(renamed, "items_put").input_schema["properties"]
    assert {"itemId", "new_id"} <= set(props) and "body_itemId" not in props
    # a rename to the name the argument is already served as (Kinto's `_sort` is served as `sort`)
    same = compile_text(tmp_path, MINI, """\
        openapi2mcp: 1
        tools:
          - {name: items.get, operation: getItem, params: {"filter[status]": {rename: filter_status}}}
        """)
    assert "filter_status" in tool(same, "items_get").input_schema["properties"]


def test_non_object_body_is_one_argument_and_arrays_are_wrapped(tmp_path: Path) -> None:
    c = compile_text(tmp_path, MINI, all_operations=True)
    bulk = tool(c, "bulk")
    assert bulk.input_schema["properties"]["body"] == {"type": "array", "items": {"type": "string"}}
    assert bulk.branches[0].steps[0].operation.body.arg == "body"
    listing = tool(c, "get_items")
    assert listing.output_schema["type"] == "object"
    assert listing.output_schema["required"] == ["items"]
    assert listing.response.wrap == "items"


def test_mcp_schema_rules_hold_for_every_example(tmp_path: Path) -> None:
    for example in ("notes", "market", "petstore", "mailfiles"):
        c = compile_example(example, all_operations=True, overlay=None)
        for t in c.manifest.tools:
            d = t.definition()
            assert NAME.match(d["name"]), d["name"]
            assert d["inputSchema"]["type"] == "object"
            assert not {"oneOf", "anyOf", "allOf", "not"} & set(d["inputSchema"]), d["name"]
            jsonschema.Draft202012Validator.check_schema(d["inputSchema"])
            if "outputSchema" in d:
                assert d["outputSchema"]["type"] == "object"
                jsonschema.Draft202012Validator.check_schema(d["outputSchema"])
            assert set(d["annotations"]) >= {"readOnlyHint", "openWorldHint"}


def test_annotations_follow_method_and_risk() -> None:
    c = compile_example("petstore")
    assert tool(c, "pets_get").annotations == {"title": "Get a pet", "readOnlyHint": True, "openWorldHint": True}
    delete = tool(c, "pets_delete").annotations
    assert delete["readOnlyHint"] is False and delete["destructiveHint"] is True and delete["idempotentHint"] is True
    create = tool(c, "pets_create").annotations
    assert create["destructiveHint"] is False and create["idempotentHint"] is False


# ----------------------------------------------------------------------------- overlay tools


def test_overlay_renames_fixes_hides_and_narrows(tmp_path: Path) -> None:
    c = compile_text(tmp_path, MINI, """\
        openapi2mcp: 1
        tools:
          - name: items_get
            operation: getItem
            params:
              limit: {rename: q_limit, maximum: 20, default: 5}
              format: {value: json}
              filter_status: {hidden: true}
              itemId: {description: The item's id., pattern: "^[a-z]+$"}
        """)
    t = tool(c, "items_get")
    props = t.input_schema["properties"]
    assert list(props) == ["itemId", "limit"]
    assert props["limit"] == {"type": "integer", "minimum": 1, "maximum": 20, "default": 5}
    assert props["itemId"]["description"] == "The item's id."
    params = {p.name: p for p in t.branches[0].steps[0].operation.params}
    assert params["q_limit"].arg == "limit"
    assert params["format"].fixed and params["format"].value == "json" and params["format"].arg is None
    assert "filter[status]" not in params


def test_rename_written_the_other_way_round(tmp_path: Path) -> None:
    c = compile_text(tmp_path, MINI, """\
        openapi2mcp: 1
        tools:
          - {name: items_get, operation: getItem, params: {q_limit: {rename: limit}}}
        """)
    assert "limit" in tool(c, "items_get").input_schema["properties"]


def test_operation_by_method_and_path_and_units(tmp_path: Path) -> None:
    c = compile_text(tmp_path, MINI, """\
        openapi2mcp: 1
        tools:
          - name: items_list
            operation: get /items
            units: {size: cm}
        """)
    t = tool(c, "items_list")
    assert t.branches[0].steps[0].operation.id == "GET /items"
    size = t.output_schema["properties"]["items"]["items"]["properties"]["size"]
    assert size["description"].endswith("Unit: cm.")
    assert "Units: size = cm." in t.description


def test_units_reach_arguments_and_only_their_own_tool(tmp_path: Path) -> None:
    c = compile_text(tmp_path, MINI, """\
        openapi2mcp: 1
        tools:
          - {name: items_list, operation: get /items, units: {size: cm}}
          - {name: items_all, operation: get /items}
          - {name: items_put, operation: putItem, units: {size: cm}}
        """)

    def size(name: str) -> dict:
        return tool(c, name).output_schema["properties"]["items"]["items"]["properties"]["size"]

    assert size("items_list")["description"].endswith("Unit: cm.")
    assert "cm" not in size("items_all").get("description", "")  # converted schemas are shared between tools
    put = tool(c, "items_put")
    assert put.input_schema["properties"]["size"]["description"] == "Unit: cm."
    assert "Units: size = cm." in put.description


def test_unknown_operation_suggests(tmp_path: Path) -> None:
    msg = errors_of(tmp_path, MINI, """\
        openapi2mcp: 1
        tools:
          - name: items_get
            operation: getItm
        """)
    assert "overlay.yaml:4:5 at tools[0](items_get).operation: " in msg
    assert "unknown operation 'getItm'; did you mean 'getItem'?" in msg


def test_unknown_param_lists_what_exists(tmp_path: Path) -> None:
    msg = errors_of(tmp_path, MINI, """\
        openapi2mcp: 1
        tools:
          - name: items_get
            operation: getItem
            params:
              limt: {maximum: 3}
        """)
    assert "overlay.yaml:6:7 at tools[0](items_get).params.limt" in msg
    assert "operation 'getItem' has no parameter or body property 'limt'" in msg
    assert "its arguments are: filter[status], filter_status, format, itemId, q_limit" in msg


def test_param_settings_must_fit_the_spec(tmp_path: Path) -> None:
    msg = errors_of(tmp_path, MINI, """\
        openapi2mcp: 1
        tools:
          - name: items_get
            operation: getItem
            params:
              q_limit: {minLength: 2}
              format: {value: yaml}
              itemId: {hidden: true}
          - name: items_put
            operation: putItem
            params:
              kind: {default: c}
        """)
    assert "`minLength` applies to string values, but this parameter is integer" in msg
    assert "value 'yaml' does not fit the parameter's schema: 'yaml' is not one of ['json', 'xml']" in msg
    assert "'itemId' is required by the spec: it cannot be hidden" in msg
    assert "default 'c' does not fit" in msg


def test_projection_field_must_exist_and_shapes_the_output(tmp_path: Path) -> None:
    msg = errors_of(tmp_path, MINI, """\
        openapi2mcp: 1
        tools:
          - name: items_get
            operation: getItem
            response: {select: "{id: id, nme: nme}"}
        """)
    assert "`select` names field 'nme', which the response schema does not have; did you mean 'name'?" in msg
    c = compile_text(tmp_path, MINI, """\
        openapi2mcp: 1
        tools:
          - name: items_list
            operation: GET /items
            response: {select: "[*].{id: id, kind: kind}", max_items: 5, validate: strict}
          - name: items_tolerant
            operation: GET /items
            response: {select: "[*].{id: id, kind: kind}"}
        """)
    t = tool(c, "items_list")
    assert t.response.wrap == "items" and t.response.max_items == 5
    item = t.output_schema["properties"]["items"]["items"]
    assert item["required"] == ["id", "kind"]
    assert item["properties"]["id"]["type"] == "string"
    assert item["properties"]["kind"]["type"] == ["string", "null"]  # not required upstream
    tolerant = tool(c, "items_tolerant").output_schema["properties"]["items"]["items"]
    assert tolerant["required"] == ["id", "kind"]  # the keys are always there (null when the upstream drops one)
    assert tolerant["properties"]["id"]["type"] == ["string", "null"]


def test_duplicate_tool_names_and_two_tool_overlays(tmp_path: Path) -> None:
    msg = errors_of(tmp_path, MINI, """\
        openapi2mcp: 1
        tools:
          - {name: a.b, operation: getItem}
          - {name: a.b, operation: putItem}
        """)
    assert "tool name 'a.b' is used twice" in msg
    spec = load_spec(str(write_spec(tmp_path, MINI)))
    one = parse_overlay("openapi2mcp: 1\ntools: [{name: a.b, operation: getItem}]\n", "one.yaml")
    two = parse_overlay("openapi2mcp: 1\ntools: [{name: c.d, operation: putItem}]\n", "two.yaml")
    with pytest.raises(InputError, match=r"more than one tool overlay given \(one.yaml, two.yaml\)"):
        compile_manifest(spec, [one, two])


def test_unit_for_nothing_is_an_error(tmp_path: Path) -> None:
    msg = errors_of(tmp_path, MINI, """\
        openapi2mcp: 1
        tools:
          - {name: a.b, operation: getItem, units: {sise: cm}}
        """)
    assert "unit for 'sise', but no argument or result field has that name; did you mean 'size'?" in msg


def test_forbidden_tools_are_compiled_but_passthrough_skips_used_operations(tmp_path: Path) -> None:
    c = compile_text(tmp_path, MINI, """\
        openapi2mcp: 1
        passthrough: true
        tools:
          - {name: items_get, operation: getItem}
          - {name: items_bulk, operation: bulk, risk: forbidden}
        """)
    names = [t.name for t in c.manifest.tools]
    assert names == ["items_get", "items_bulk", "putItem", "get_items"]
    assert tool(c, "items_bulk").risk == "forbidden"


def test_no_overlay_and_no_all_operations_is_refused(tmp_path: Path) -> None:
    with pytest.raises(InputError) as info:
        compile_text(tmp_path, MINI)
    assert "--all-operations" in str(info.value)


def test_a_broken_request_body_is_one_warning(tmp_path: Path) -> None:
    """The arguments and the call plan both read the body: it is resolved, and reported, once."""
    spec = {
        "openapi": "3.0.3",
        "info": {"title": "t", "version": "1"},
        "servers": [{"url": "https://api.example.com"}],
        "paths": {"/x": {"post": {
            "operationId": "make",
            "requestBody": {"$ref": "#/components/requestBodies/Missing"},
            "responses": {"200": {"description": "ok"}},
        }}},
    }
    c = compile_text(tmp_path, spec, all_operations=True)
    assert [(w.location.pointer, w.message) for w in c.warnings] == [(
        "/paths/~1x/post/requestBody",
        "request body ignored: reference '#/components/requestBodies/Missing' points to nothing",
    )]
    assert tool(c, "make").branches[0].steps[0].operation.body is None


def test_long_colliding_parameter_names_stay_unique_and_valid(tmp_path: Path) -> None:
    long = "x" * 70  # two parameters whose names are the same once cut to 64 characters
    spec = {
        "openapi": "3.0.3",
        "info": {"title": "t", "version": "1"},
        "paths": {"/x": {"get": {
            "operationId": "get",
            "parameters": [{"name": long, "in": "query", "schema": {"type": "string"}},
                           {"name": long + "y", "in": "header", "schema": {"type": "string"}}],
            "responses": {"200": {"description": "ok"}},
        }}},
    }
    names = list(tool(compile_text(tmp_path, spec, all_operations=True), "get").input_schema["properties"])
    assert names == ["x" * 64, "x" * 62 + "_2"]


def test_cycles_that_never_nest_an_object_are_cut(tmp_path: Path) -> None:
    """A schema recursive through `items` and `anyOf` only (Vercel's): depth alone cannot stop it."""
    spec = {
        "openapi": "3.0.3",
        "info": {"title": "t", "version": "1"},
        "paths": {"/x": {"get": {
            "operationId": "get",
            "responses": {"200": {"description": "ok", "content": {"application/json": {"schema": {
                "type": "object", "properties": {"v": {"$ref": "#/components/schemas/Value"}}}}}}},
        }}},
        "components": {"schemas": {"Value": {"anyOf": [
            {"type": "string"}, {"type": "array", "items": {"$ref": "#/components/schemas/Value"}}]}}},
    }
    out = tool(compile_text(tmp_path, spec, all_operations=True), "get").output_schema
    jsonschema.Draft202012Validator.check_schema(out)
    jsonschema.validate({"v": ["a", ["b", ["c"]]]}, out)


def test_broken_keyword_values_and_boolean_schemas_do_not_break_tool_schemas(tmp_path: Path) -> None:
    """Seen in real specs (api.video's `pattern: 0`, Vercel's `true` property schemas)."""
    spec = {
        "openapi": "3.1.0",
        "info": {"title": "t", "version": "1"},
        "paths": {"/x": {"post": {
            "operationId": "make",
            "requestBody": {"required": True, "content": {"application/json": {"schema": {
                "type": "object",
                "required": ["code", 7, "code"],
                "properties": {
                    "code": {"type": "string", "pattern": 0, "minLength": "2", "maxLength": 5},
                    "anything": True,
                    "kind": {"type": ["string", "file"]},
                },
            }}}},
            "responses": {"200": {"description": "ok"}},
        }}},
    }
    t = tool(compile_text(tmp_path, spec, all_operations=True), "make")
    jsonschema.Draft202012Validator.check_schema(t.input_schema)
    props = t.input_schema["properties"]
    assert props["code"] == {"type": "string", "maxLength": 5}
    assert props["anything"] == {}
    assert props["kind"] == {"type": ["string"]}
    assert t.input_schema["required"] == ["code"]


# ----------------------------------------------------------------------------- the Manifest


def test_raw_tools_name_their_secrets_as_overlay_tools_do(tmp_path: Path) -> None:
    """The one rule of arguments.sensitive_names holds for 1:1 tools too: a raw DELETE asks for confirmation,
    whose text shows each argument, and a secret must show as *** there (raw tools used to list none)."""
    spec = {
        "openapi": "3.0.3", "info": {"title": "t", "version": "1"}, "servers": [{"url": "https://x.example"}],
        "paths": {"/keys/{id}": {"delete": {"operationId": "revokeKey", "parameters": [
            {"name": "id", "in": "path", "required": True, "schema": {"type": "string"}},
            {"name": "X-Api-Key", "in": "header", "schema": {"type": "string"}},
            {"name": "pin", "in": "query", "schema": {"type": "string", "format": "password"}},
        ], "responses": {"204": {"description": "gone"}}}}},
    }
    revoke = tool(compile_text(tmp_path, spec, all_operations=True), "revokeKey")
    assert revoke.sensitive == ["X-Api-Key", "pin"]


def test_manifest_is_deterministic_and_hashed() -> None:
    a = compile_example("petstore").manifest.to_json()
    b = compile_example("petstore").manifest.to_json()
    assert a == b
    m = Manifest.from_json(a)
    assert m.content_hash == m.compute_hash()
    assert [s.kind for s in m.sources] == ["openapi 3.0.3", "openapi2mcp overlay 1"]
    damaged = json.loads(a)
    damaged["tools"][0]["description"] = "tampered"
    with pytest.raises(ValueError, match="does not match its file_hash"):
        Manifest.from_json(json.dumps(damaged))
    del damaged["file_hash"]  # an older file (no file hash): the canonical content_hash catches it
    with pytest.raises(ValueError, match="does not match its content_hash"):
        Manifest.from_json(json.dumps(damaged))


def test_manifest_hash_ignores_default_values() -> None:
    """A Manifest spelling out defaults (or missing fields a later version adds) still verifies."""
    m = compile_example("notes").manifest
    data = json.loads(m.to_json())
    del data["file_hash"]  # a file from before the file hash (with one, any other spelling is refused)
    assert "links" not in data["tools"][-1]  # defaults are not written
    data["tools"][-1]["links"] = []  # ... but spelling one out changes nothing
    data["upstream"]["verify_tls"] = True
    assert Manifest.from_json(json.dumps(data)).content_hash == m.content_hash


def test_manifest_hash_is_the_canonical_json_of_the_model_dump() -> None:
    """The fast hash (schemas as they are, the parsed file on load) is the digest of the pydantic dump."""
    from openapi2mcp.manifest.model import _canonical_chunks

    for name in ("petstore", "notes", "market"):
        m = compile_example(name).manifest
        full = hashlib.sha256("".join(_canonical_chunks(m._dumped_payload(), 0)).encode()).hexdigest()
        assert m.content_hash == "sha256:" + full
        assert m.payload() == m._dumped_payload()
        assert Manifest.from_json(m.to_json()).content_hash == m.content_hash


def test_file_hash_is_the_sha256_of_the_file_with_its_value_blank(tmp_path: Path) -> None:
    """A sealed Manifest file ends with `file_hash`: the sha256 of its own bytes with that value empty."""
    m = compile_example("notes").manifest
    text = m.to_json()
    assert text == m.to_json()  # deterministic, like the content hash
    match = re.search(r',\n "file_hash": "(sha256:[0-9a-f]{64})"\n}\n\Z', text)
    assert match, text[-200:]
    blank = text[: match.start(1)] + text[match.end(1):]
    assert match.group(1) == "sha256:" + hashlib.sha256(blank.encode()).hexdigest()
    data = json.loads(text)
    assert data["content_hash"] == m.content_hash == m.compute_hash()  # the content hash is unchanged
    path = tmp_path / "m.json"
    path.write_bytes(text.encode())
    loaded = Manifest.read(path)
    assert loaded == m and loaded.content_hash == m.content_hash
    assert loaded.to_json() == text  # round trip, byte for byte
    assert Manifest.from_json(text).content_hash == m.content_hash  # str or bytes


@pytest.mark.parametrize("threaded", [False, True])
def test_a_file_with_a_file_hash_is_refused_when_any_byte_changes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, threaded: bool
) -> None:
    if threaded:  # a big file is hashed by a thread beside the parse: the same verdicts
        monkeypatch.setattr("openapi2mcp.manifest.model._HASH_BESIDE", 0)
    m = compile_example("notes").manifest
    assert Manifest.from_json(m.to_json()) == m
    raw = m.to_json().encode()
    path = tmp_path / "notes.json"
    # one byte of a description changed: still valid JSON, still a valid Manifest
    i = raw.index(b'"description": "') + len(b'"description": "')
    flipped = raw[:i] + bytes([raw[i] ^ 0x20]) + raw[i + 1:]
    assert json.loads(flipped) != json.loads(raw)
    reindented = (json.dumps(json.loads(raw), indent=2, ensure_ascii=False) + "\n").encode()
    crlf = raw.replace(b"\n", b"\r\n")
    hash_edited = raw[:-8] + (b"0" if raw[-8:-7] != b"0" else b"1") + raw[-7:]
    for damaged in (flipped, reindented, crlf, hash_edited):
        path.write_bytes(damaged)
        with pytest.raises(ValueError, match=r"manifest .*notes\.json does not match its file_hash.*"
                                             r"recompile it with `openapi2mcp compile`"):
            Manifest.read(path)
    # a file hash that is not the last member as written (moved up by a rewrite) is refused too
    data = json.loads(raw)
    moved = {"file_hash": data.pop("file_hash"), **data}
    path.write_text(json.dumps(moved, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    with pytest.raises(ValueError, match="does not match its file_hash"):
        Manifest.read(path)


def test_a_sealed_file_loads_the_values_json_loads_gives() -> None:
    """Odd values round-trip through a sealed file; what pydantic-core's parser refuses goes to json.loads."""
    from openapi2mcp.manifest.model import _seal_file

    m = compile_example("notes").manifest
    odd = {"big": 123456789012345678901234567890, "floats": [0.1, -0.0, 2.5e-300, 1.7976931348623157e308],
           "text": "é ✓ \u2028 \"q\" \\ \n"}
    first = m.tools[0].model_copy(update={"meta": {**m.tools[0].meta, "x-odd": odd}})
    sealed = m.model_copy(update={"tools": [first, *m.tools[1:]]}).sealed()
    text = sealed.to_json()
    loaded = Manifest.from_json(text)
    assert loaded == sealed and loaded.tools[0].meta["x-odd"] == odd
    assert repr(loaded.tools[0].meta["x-odd"]) == repr(json.loads(text)["tools"][0]["meta"]["x-odd"])
    assert loaded.to_json() == text
    # JSON pydantic-core refuses (a lone surrogate escape) goes to json.loads, and still verifies
    lone = _seal_file(text[: text.index('"file_hash"')].rstrip().rstrip(",").replace(
        '"description": "', '"description": "\\ud800', 1) + "\n}\n")
    assert Manifest.from_json(lone).tools[0].description.startswith("\ud800")
    # a sealed file that is no Manifest: pydantic's error, titled as the Manifest
    bad = json.loads(text)
    bad["tools"][0]["risk"] = "extreme"
    bad.pop("file_hash")
    with pytest.raises(ValueError, match=r"validation error for Manifest\ntools\.0\.risk"):
        Manifest.from_json(_seal_file(json.dumps(bad, indent=1, ensure_ascii=False) + "\n"))


def test_an_old_manifest_with_only_the_canonical_hash_still_loads(tmp_path: Path) -> None:
    """A file from before the file hash: indented JSON ending with the canonical `content_hash`."""
    m = compile_example("market").manifest
    old = json.dumps({**m.payload(), "content_hash": m.compute_hash()}, indent=1, ensure_ascii=False) + "\n"
    assert "file_hash" not in old
    path = tmp_path / "old.json"
    path.write_text(old, encoding="utf-8")
    loaded = Manifest.read(path)
    assert loaded == m and loaded.content_hash == m.content_hash
    # any spelling of it verifies (the canonical hash is over the content) ...
    path.write_text(json.dumps(json.loads(old)), encoding="utf-8")
    assert Manifest.read(path).content_hash == m.content_hash
    # ... and written again it carries a file hash
    assert '"file_hash": "sha256:' in loaded.to_json()
    tampered = json.loads(old)
    tampered["server"]["name"] = "other"
    path.write_text(json.dumps(tampered), encoding="utf-8")
    with pytest.raises(ValueError, match=r"old\.json content does not match its content_hash"):
        Manifest.read(path)


def test_an_unsealed_manifest_has_no_file_hash() -> None:
    m = compile_example("notes").manifest.model_copy(update={"content_hash": ""})
    text = m.to_json()
    assert "file_hash" not in json.loads(text)
    assert Manifest.from_json(text).content_hash == ""


def test_compiling_and_loading_leave_the_garbage_collector_on() -> None:
    import gc

    assert gc.isenabled()
    Manifest.from_json(compile_example("notes").manifest.to_json())
    assert gc.isenabled()


def test_what_a_compile_makes_is_not_left_for_the_next_young_collection() -> None:
    # the next collection would walk all of it (a big spec: millions of containers) and move it up
    import gc

    manifest = compile_example("notes").manifest
    young = {id(o) for o in gc.get_objects(generation=0)}
    assert id(manifest) not in young and id(manifest.tools[0].input_schema) not in young


def test_compiling_while_serving_leaves_what_the_server_froze_frozen() -> None:
    import gc

    served = [{"the": "served Manifest"}]
    gc.freeze()  # as serving.serve does with its Manifest
    try:
        frozen = gc.get_freeze_count()
        compile_example("notes")
        # still frozen (frozen objects may have been freed since, none added), not back in a generation
        assert 0 < gc.get_freeze_count() <= frozen
        assert not any(o is served for o in gc.get_objects())
    finally:
        gc.unfreeze()


def test_manifest_loading_does_not_import_the_compiler() -> None:
    import subprocess
    import sys

    manifest = compile_example("notes").manifest.to_json()
    code = (
        "import sys; from openapi2mcp.manifest import Manifest; Manifest.from_json(sys.stdin.read()); "
        "from openapi2mcp.runtime import Runtime, http_app, serve_stdio; "
        "bad = [m for m in sys.modules if m.split('.')[0] in ('prance', 'openapi_core', 'openapi_spec_validator')"
        " or '.'.join(m.split('.')[:2]) in ('openapi2mcp.compiler', 'openapi2mcp.loader', 'openapi2mcp.overlay')];"
        " print(bad)"
    )
    out = subprocess.run([sys.executable, "-c", code], input=manifest, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_secrets_are_templates_not_values(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NOTES_API_TOKEN", "canary-secret-123")
    m = compile_example("notes").manifest
    assert "canary-secret-123" not in m.to_json()
    assert m.upstream.auth.value == "${NOTES_API_TOKEN:-}"


# ----------------------------------------------------------------------------- the corpus


CORPUS_SPECS = [
    "github/api.github.com.json",
    "stripe/spec3.json",
    "stripe/spec3.yaml",
    "openai/openapi.yaml",
    "kubernetes/swagger-kubernetes-client-python-8.0.0b1.json",
    "digitalocean/specification/DigitalOcean-public.v2.yaml",
    "apis-guru/slack.com.json",
    "apis-guru/docker.com_engine.json",
    "apis-guru/spotify.com.json",
]


@pytest.mark.slow
@pytest.mark.parametrize("rel", CORPUS_SPECS)
def test_corpus_compiles_in_all_operations_mode(corpus: Path, rel: str) -> None:
    from openapi2mcp.compiler import compile_manifest
    from openapi2mcp.loader import load_spec

    path = corpus_file(rel)
    c = compile_manifest(load_spec(str(path)), all_operations=True)
    names = [t.name for t in c.manifest.tools]
    assert len(names) == len(set(names))
    for t in c.manifest.tools:
        assert NAME.match(t.name)
        assert t.input_schema["type"] == "object"
        assert not {"oneOf", "anyOf", "allOf"} & set(t.input_schema)
        if t.output_schema is not None:
            assert t.output_schema["type"] == "object"
    if rel.startswith("github"):
        assert len(names) == 1223


@pytest.mark.slow
def test_corpus_tool_schemas_are_valid_json_schema(corpus: Path) -> None:
    from openapi2mcp.compiler import compile_manifest
    from openapi2mcp.loader import load_spec

    for rel in ("stripe/spec3.json", "kubernetes/swagger-kubernetes-client-python-8.0.0b1.json"):
        c = compile_manifest(load_spec(str(corpus_file(rel))), all_operations=True)
        for t in c.manifest.tools[::7]:
            jsonschema.Draft202012Validator.check_schema(t.input_schema)
            if t.output_schema:
                jsonschema.Draft202012Validator.check_schema(t.output_schema)


def test_integer_formats_become_bounds_of_arguments(tmp_path: Path) -> None:
    """A server enforces int32 (found on Chroma by the property tier); JSON Schema validators do not."""
    spec = {
        "openapi": "3.0.3", "info": {"title": "t", "version": "1"}, "servers": [{"url": "https://x.example"}],
        "paths": {"/n": {"get": {"operationId": "getN", "parameters": [
            {"name": "a", "in": "query", "schema": {"type": "integer", "format": "int32"}},
            {"name": "b", "in": "query", "schema": {"type": "integer", "format": "uint32", "maximum": 10}},
            {"name": "c", "in": "query", "schema": {"type": "string", "format": "int32"}},
        ], "responses": {"200": {"description": "ok", "content": {"application/json": {"schema": {
            "type": "object", "properties": {"n": {"type": "integer", "format": "int32"}}}}}}}}}},
    }
    get = tool(compile_text(tmp_path, spec, all_operations=True), "getN")
    props = get.input_schema["properties"]
    assert (props["a"]["minimum"], props["a"]["maximum"]) == (-(2**31), 2**31 - 1)
    assert (props["b"]["minimum"], props["b"]["maximum"]) == (0, 10)  # the spec's own bound is tighter
    assert "maximum" not in props["c"]  # not an integer
    assert "maximum" not in get.output_schema["properties"]["n"]  # results are not held to it


def test_manifest_files_parse_as_json_loads_does() -> None:
    """pydantic-core's parser reads Manifest files; what it refuses goes to json.loads, as before."""
    from openapi2mcp.manifest.model import _parse

    for raw in (b'{"a": 1, "a": 2}', b"123456789012345678901234567890", b"[0.1, -0.0, 1e400, 2.50]",
                b'"\\ud800"', '{"é": "\\u00e9"}'.encode(), '{"a": 1}'.encode("utf-16")):
        assert repr(_parse(raw)) == repr(json.loads(raw)), raw
    assert _parse(b'{"a": 1} x') is None
    assert _parse(b"") is None
