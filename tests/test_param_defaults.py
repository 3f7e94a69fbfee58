"""An overlay `default` on a parameter the spec requires: the model may leave it out, the server sends it.

Found on Chroma (`database: {default: default_database}` on its required path parameter): single
tools, actions and variants must agree. A default makes the argument optional (unless the overlay
also says `required: true`), the branch's `requires` never lists it, each branch sends its own
default (never another branch's, also when the branches' defaults differ and the merged input
schema can show none), and on the wire the parameter stays required. Real upstream on 127.0.0.1
(the echo app of tests/runtime_upstream.py), the SDK client in memory.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from mcp import Client

from openapi2mcp.manifest import Manifest
from openapi2mcp.result import error_of
from openapi2mcp.runtime import Runtime, RuntimeOptions
from tests.helpers import compile_text
from tests.runtime_upstream import upstream_server  # noqa: F401  (the `upstream` fixture)

SPEC = """
openapi: 3.0.3
info: {title: Things, version: "1"}
servers: [{url: "http://127.0.0.1:9"}]
paths:
  /echo/db/{database}/things:
    get:
      operationId: listThings
      parameters:
        - {name: database, in: path, required: true, schema: {type: string}}
        - {name: kind, in: query, required: true, schema: {type: string}}
      responses: {"200": {description: ok, content: {application/json: {schema: {type: object}}}}}
    post:
      operationId: createThing
      parameters:
        - {name: database, in: path, required: true, schema: {type: string}}
      requestBody:
        required: true
        content:
          application/json:
            schema:
              type: object
              required: [name, colour]
              properties:
                name: {type: string}
                colour: {type: string}
      responses: {"200": {description: ok, content: {application/json: {schema: {type: object}}}}}
  /echo/db/{database}/things/{id}:
    get:
      operationId: getThing
      parameters:
        - {name: database, in: path, required: true, schema: {type: string}}
        - {name: id, in: path, required: true, schema: {type: string}}
      responses: {"200": {description: ok, content: {application/json: {schema: {type: object}}}}}
"""

OVERLAY = """
openapi2mcp: 1
tools:
  - name: things_list
    operation: listThings
    params:
      database: {default: main}
      kind: {default: all}
  - name: things_find
    variants:
      - when: [id]
        operation: getThing
        params: {database: {default: main}}
      - operation: listThings
        params: {database: {default: archive}, kind: {default: all}}
  - name: things_manage
    actions:
      get: {operation: getThing, params: {database: {default: main}}}
      list: {operation: listThings, params: {database: {default: main}}}
      create:
        operation: createThing
        params: {database: {default: main}, colour: {default: red}}
  - name: things_strict
    operation: listThings
    params:
      database: {default: main, required: true}
"""


@pytest.fixture(scope="module")
def compiled(tmp_path_factory: pytest.TempPathFactory, upstream: str) -> Manifest:
    c = compile_text(tmp_path_factory.mktemp("defaults"), SPEC, OVERLAY)
    return c.manifest.model_copy(update={"upstream": c.manifest.upstream.model_copy(
        update={"base_url": upstream})}).sealed()


def sent(result: Any) -> dict[str, Any]:
    """What reached the echo upstream: {path, query, body}."""
    assert not result.is_error, result.content[0].text
    echo = result.structured_content
    return {"path": echo["path"], "query": echo["query"], "body": json.loads(echo["body"]) if echo["body"] else None}


def test_a_default_makes_a_spec_required_argument_optional_everywhere(compiled: Manifest) -> None:
    single = tool_schema(compiled, "things_list")
    assert "database" not in single.get("required", []) and single["properties"]["database"]["default"] == "main"
    for name in ("things_find", "things_manage"):
        spec = compiled.tool(name)
        assert spec is not None
        assert "database" not in spec.input_schema.get("required", []), spec.input_schema
        for branch in spec.branches:
            assert "database" not in branch.requires, (name, branch.key, branch.requires)
            assert branch.defaults["database"] in ("main", "archive")
            wire = next(p for p in branch.steps[0].operation.params if p.name == "database")
            assert wire.required  # still required on the wire: the default is always sent
    manage = compiled.tool("things_manage")
    assert manage is not None
    assert {b.key: b.requires for b in manage.branches} == {"get": ["id"], "list": ["kind"], "create": ["name"]}
    assert "Requires database" not in manage.description
    assert tool_schema(compiled, "things_strict")["required"] == ["database", "kind"]  # required: true wins


def tool_schema(m: Manifest, name: str) -> dict[str, Any]:
    spec = m.tool(name)
    assert spec is not None
    return spec.input_schema


@pytest.mark.anyio
async def test_each_branch_sends_its_own_default(compiled: Manifest) -> None:
    runtime = Runtime(compiled, RuntimeOptions(environ={}))
    try:
        async with Client(runtime.build_server()) as client:  # type: ignore[arg-type]
            # the variants disagree (main / archive): the merged schema shows no default, each branch sends its own
            find = compiled.tool("things_find")
            assert find is not None and "default" not in find.input_schema["properties"]["database"]
            assert sent(await client.call_tool("things_find", {}))["path"] == "/echo/db/archive/things"
            assert sent(await client.call_tool("things_find", {}))["query"] == "kind=all"
            assert sent(await client.call_tool("things_find", {"id": "7"}))["path"] == "/echo/db/main/things/7"
            assert sent(await client.call_tool("things_find", {"database": "x", "id": "7"}))["path"] == \
                "/echo/db/x/things/7"
            # a default is never taken for a variant's `when`
            assert sent(await client.call_tool("things_find", {"database": None}))["path"] == \
                "/echo/db/archive/things"
            assert sent(await client.call_tool("things_list", {}))["path"] == "/echo/db/main/things"
            assert sent(await client.call_tool("things_manage", {"action": "get", "id": "3"}))["path"] == \
                "/echo/db/main/things/3"
            created = sent(await client.call_tool("things_manage", {"action": "create", "name": "n"}))
            assert created == {"path": "/echo/db/main/things", "query": "", "body": {"name": "n", "colour": "red"}}
            # an action's default is not another's: `list` has no default for `kind`, and says so by name
            refused = await client.call_tool("things_manage", {"action": "list"})
            error = error_of(refused)
            assert error is not None and error["field"] == "kind", refused.content
            assert error["message"] == "action 'list' needs kind", error
    finally:
        await runtime.aclose()
