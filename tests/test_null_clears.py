"""`null_means: clear`: a model's null sent as JSON null, to clear a field (the PATCH `{"due_date": null}`).

By default a top-level null means "not given" (models send null for arguments they do not use),
so no null ever reached an upstream. The overlay author can opt in per parameter; the compiler
refuses the opt-in, with file:line, where null cannot be sent (query/path/header parameters, a
form body, the whole body, fixed or hidden values) or where the spec's schema does not take it.
A real upstream on 127.0.0.1 (the echo app) receives exactly what is sent; the tools are served
by `openapi2mcp serve` over stdio and called with the SDK client.
"""

from __future__ import annotations

import json
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from openapi2mcp.errors import InputError
from tests.e2e_support import McpSession, ok, portal
from tests.helpers import compile_text, write_spec
from tests.runtime_upstream import upstream_server  # noqa: F401  (the `upstream` fixture)

SPEC = """
openapi: 3.0.3
info: {title: Tasks, version: "1"}
servers: [{url: "http://127.0.0.1:9/echo"}]
paths:
  /tasks/{id}:
    patch:
      operationId: updateTask
      parameters:
        - {name: id, in: path, required: true, schema: {type: string}}
        - {name: trace, in: query, schema: {type: string, nullable: true}}
      requestBody:
        content:
          application/json:
            schema:
              type: object
              minProperties: 1
              properties:
                title: {type: string}
                due_date: {type: string, format: date, nullable: true}
                assignee: {type: string, nullable: true}
                meta:
                  type: object
                  properties:
                    colour: {type: string, nullable: true}
                    size: {type: integer}
      responses: {"200": {description: ok, content: {application/json: {schema: {type: object}}}}}
  /forms:
    post:
      operationId: postForm
      requestBody:
        content:
          application/x-www-form-urlencoded:
            schema:
              type: object
              properties:
                note: {type: string, nullable: true}
      responses: {"200": {description: ok}}
"""

OVERLAY = """
openapi2mcp: 1
tools:
  - name: tasks_update
    operation: updateTask
    params:
      due_date: {null_means: clear}
      colour: {rename: body.meta.colour, null_means: clear}
  - name: tasks_reassign
    operation: updateTask
    params:
      assignee: {default: nobody}
      due_date: {null_means: clear, default: "2026-01-01"}
"""


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory, upstream: str) -> tuple[Path, Path]:
    folder = tmp_path_factory.mktemp("nulls")
    spec = write_spec(folder, SPEC.replace("http://127.0.0.1:9/echo", upstream + "/echo"))
    overlay = folder / "overlay.yaml"
    overlay.write_text(textwrap.dedent(OVERLAY), encoding="utf-8")
    return spec, overlay


@pytest.fixture(scope="module")
def session(files: tuple[Path, Path], tmp_path_factory: pytest.TempPathFactory) -> Iterator[McpSession]:
    spec, overlay = files
    with portal() as loop:
        s = McpSession.stdio(loop, [str(spec), "--overlay", str(overlay)], mode="legacy", label="nulls",
                             log_dir=tmp_path_factory.mktemp("nulls-logs"))
        yield s
        s.close()


def body_sent(session: McpSession, arguments: dict[str, Any]) -> Any:
    echo = ok(session.call("tasks_update", {"id": "t1", **arguments}))
    return json.loads(echo["body"]) if echo["body"] else None


def test_null_clears_only_where_the_overlay_says(session: McpSession) -> None:
    # opted in: the model's null is sent as JSON null, at the top level and in a nested field
    assert body_sent(session, {"due_date": None}) == {"due_date": None}
    assert body_sent(session, {"colour": None, "title": "x"}) == {"title": "x", "meta": {"colour": None}}
    # a value is sent as before; leaving it out sends nothing
    assert body_sent(session, {"due_date": "2026-12-24"}) == {"due_date": "2026-12-24"}
    assert body_sent(session, {"title": "x"}) == {"title": "x"}
    # not opted in: null is "not given", also where the spec's schema takes null (assignee)
    assert body_sent(session, {"title": "x", "assignee": None, "trace": None}) == {"title": "x"}
    echo = ok(session.call("tasks_update", {"id": "t1", "title": "x", "trace": None}))
    assert echo["query"] == ""


def test_a_default_fills_a_null_that_means_not_given_never_one_that_clears(session: McpSession) -> None:
    def sent(arguments: dict[str, Any]) -> Any:
        return json.loads(ok(session.call("tasks_reassign", {"id": "t1", **arguments}))["body"])

    assert sent({}) == {"assignee": "nobody", "due_date": "2026-01-01"}
    assert sent({"assignee": None, "due_date": None}) == {"assignee": "nobody", "due_date": None}


def test_the_model_is_told(session: McpSession) -> None:
    [tool] = [t for t in session.list_tools() if t.name == "tasks_update"]
    due = tool.input_schema["properties"]["due_date"]
    assert "null clears it" in due["description"] and "null" in due["type"]
    assert "null clears it" not in tool.input_schema["properties"]["assignee"].get("description", "")


@pytest.mark.parametrize(("params", "says"), [
    ("trace: {null_means: clear}", "'trace' is a query parameter, where null cannot be sent"),
    ("id: {null_means: clear}", "'id' is a path parameter, where null cannot be sent"),
    ("title: {null_means: clear}", "the spec's schema of 'title' does not take null (string)"),
    ("size: {rename: body.meta.size, null_means: clear}", "of 'body.meta.size' does not take null (integer)"),
    ("due_date: {null_means: clear, value: '2026-01-01'}", "this one is fixed or hidden"),
    ("due_date: {null_means: clear, hidden: true}", "this one is fixed or hidden"),
    ("due_date: {null_means: maybe}", "'maybe'"),
])
def test_where_null_cannot_be_sent_the_opt_in_is_refused_with_its_line(tmp_path: Path, params: str,
                                                                        says: str) -> None:
    overlay = f"""
    openapi2mcp: 1
    tools:
      - name: tasks_update
        operation: updateTask
        params:
          {params}
    """
    with pytest.raises(InputError) as refused:
        compile_text(tmp_path, SPEC, overlay)
    text = refused.value.render()
    assert says in text, text
    assert "overlay.yaml:7:" in text, text  # the line of the parameter


def test_a_form_body_cannot_carry_null(tmp_path: Path) -> None:
    overlay = """
    openapi2mcp: 1
    tools:
      - name: forms_post
        operation: postForm
        params:
          note: {null_means: clear}
    """
    with pytest.raises(InputError) as refused:
        compile_text(tmp_path, SPEC, overlay)
    assert "needs a JSON request body; 'postForm' sends application/x-www-form-urlencoded" in refused.value.render()


def test_the_default_stays_null_means_not_given(tmp_path: Path) -> None:
    c = compile_text(tmp_path, SPEC, "openapi2mcp: 1\ntools:\n  - {name: tasks_update, operation: updateTask}\n")
    tool = c.manifest.tool("tasks_update")
    assert tool is not None
    body = tool.branches[0].steps[0].operation.body
    assert body is not None and body.nulls == []
    assert "nulls" not in json.loads(c.manifest.to_json())["tools"][0]["branches"][0]["steps"][0]["operation"]["body"]
