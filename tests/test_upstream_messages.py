"""The upstream's own words reach the model: every common error-body shape is quoted, and its
locations name the tool's arguments (`field`), through renames, nested body fields and whole bodies.

Before, a FastAPI/Prefect 422 became "the upstream rejected the request ... Check the arguments."
with no message and no field, and Jupyter's 404 (plain text labelled application/json) quoted
nothing. A real upstream on 127.0.0.1 answers each shape as real servers do; the spec and overlay
are compiled as a user's would be; the SDK client calls in memory.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from mcp import Client
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from openapi2mcp.manifest import AuthSpec, Manifest
from openapi2mcp.result import error_of
from openapi2mcp.runtime import Runtime, RuntimeOptions
from openapi2mcp.upstream.errorbody import read_complaint
from tests.helpers import compile_text
from tests.local import serve_in_thread

TOKEN = "s3cr3t-token-in-an-error-9f2e"

# What real servers send (captured shapes; Prefect 3, FastAPI/pydantic 2, RFC 9457's own examples,
# JSON:API, Kinto/Cornice, Jupyter Server's GET 404, Stripe/OpenAI, GitHub).
BODIES: dict[str, tuple[int, str, Any]] = {
    "prefect": (422, "application/json", {
        "exception_message": "Invalid request received.",
        "exception_detail": [
            {"loc": ["body", "flows", "name", "like_"], "msg": "Input should be a valid string", "type": "string_type"},
            {"loc": ["body", "name"], "msg": "Field required", "type": "missing"},
            {"loc": ["body", "limit"], "msg": "Input should be less than or equal to 200", "type": "less_than_equal"},
            {"loc": ["body", "offset"], "msg": "Input should be greater than or equal to 0", "type": "x"},
        ],
        "request_body": {"name": None},
    }),
    "fastapi": (422, "application/json", {
        "detail": [{"type": "less_than_equal", "loc": ["query", "limit"], "msg": "Input should be less than or "
                    "equal to 100", "input": "500", "ctx": {"le": 100}}],
    }),
    "fastapi_path": (422, "application/json", {
        "detail": [{"type": "uuid_parsing", "loc": ["path", "thing_id"], "msg": "Input should be a valid UUID"}],
    }),
    "problem": (422, "application/problem+json", {
        "type": "https://example.net/validation-error", "title": "Your request is not valid.", "status": 422,
        "errors": [{"detail": "must be a positive integer", "pointer": "#/age"},
                   {"detail": "must be 'green', 'red' or 'blue'", "pointer": "#/profile/color"}],
    }),
    "invalid_params": (400, "application/problem+json", {
        "type": "https://example.net/validation-error", "title": "Your request parameters didn't validate.",
        "invalid-params": [{"name": "age", "reason": "must be a positive integer"}],
    }),
    "problem_detail": (403, "application/problem+json", {
        "type": "https://example.com/probs/out-of-credit", "title": "You do not have enough credit.",
        "detail": "Your current balance is 30, but that costs 50.", "instance": "/account/12345/msgs/abc",
    }),
    "jsonapi": (422, "application/vnd.api+json", {
        "errors": [{"status": "422", "source": {"pointer": "/data/attributes/firstName"},
                    "title": "Invalid Attribute", "detail": "First name must contain at least two characters."}],
    }),
    "kinto": (400, "application/json", {
        "code": 400, "errno": 107, "error": "Invalid parameters",
        "message": "data.title in body: 42 is not of type 'string'",
        "details": [{"location": "body", "name": "data.title",
                     "description": "data.title in body: 42 is not of type 'string'"}],
    }),
    "github": (422, "application/json", {
        "message": "Validation Failed",
        "errors": [{"resource": "Issue", "code": "missing_field", "field": "title"}],
        "documentation_url": "https://docs.github.com/rest/issues/issues#create-an-issue",
    }),
    "stripe": (400, "application/json", {
        "error": {"type": "invalid_request_error", "message": "Invalid integer: abc", "param": "age"},
    }),
    "jupyter": (404, "application/json", "file or directory '/notes/none.md' does not exist\n"),
    "odd_json": (400, "application/json", {"oops": {"why": "the widget is upside down"}}),
    "leaky_text": (401, "application/json", f"bad token {TOKEN}, try again"),
    "html": (502, "text/html", "<html><body><h1>502 Bad Gateway</h1></body></html>"),
}


def make_app() -> Starlette:
    async def fail(request: Request) -> Response:
        status, media_type, body = BODIES[request.path_params["shape"]]
        text = body if isinstance(body, str) else json.dumps(body)
        return Response(text, status_code=status, media_type=media_type)

    return Starlette(routes=[Route("/fail/{shape}", fail, methods=["GET", "POST"])])


SPEC = """
openapi: 3.0.3
info: {title: Failing, version: "1"}
servers: [{url: "http://127.0.0.1:9"}]
paths:
  /fail/prefect:
    post:
      operationId: filterFlows
      requestBody:
        content:
          application/json:
            schema:
              type: object
              properties:
                name: {type: string}
                limit: {type: integer}
                offset: {type: integer}
                flows:
                  type: object
                  properties:
                    name: {type: object, properties: {like_: {type: string}}}
      responses: {"200": {description: ok}}
  /fail/{shape}:
    get:
      operationId: getFailing
      parameters:
        - {name: shape, in: path, required: true, schema: {type: string}}
        - {name: limit, in: query, schema: {type: integer}}
        - {name: thing_id, in: query, schema: {type: string}}
      responses: {"200": {description: ok}}
    post:
      operationId: postFailing
      parameters:
        - {name: shape, in: path, required: true, schema: {type: string}}
      requestBody:
        content:
          application/json:
            schema:
              type: object
              properties:
                age: {type: integer}
                title: {type: string}
                profile: {type: object, properties: {color: {type: string}}}
                data: {type: object}
      responses: {"200": {description: ok}}
"""

OVERLAY = """
openapi2mcp: 1
upstream:
  auth: {type: bearer, value: "${FAIL_TOKEN}"}
tools:
  - name: flows_filter
    operation: filterFlows
    params:
      name: {rename: flow_name}
      name_like: {rename: body.flows.name.like_}
  - name: failing_get
    operation: getFailing
    params:
      limit: {rename: max_items}
  - name: failing_post
    operation: postFailing
    params:
      age: {rename: age_years}
"""


@pytest.fixture(scope="module")
def failing(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Manifest]:
    with serve_in_thread(make_app()) as url:
        c = compile_text(tmp_path_factory.mktemp("messages"), SPEC, OVERLAY)
        yield c.manifest.model_copy(update={"upstream": c.manifest.upstream.model_copy(
            update={"base_url": url, "auth": AuthSpec(type="bearer", value="${FAIL_TOKEN}")})}).sealed()


async def failure(m: Manifest, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    runtime = Runtime(m, RuntimeOptions(environ={"FAIL_TOKEN": TOKEN}))
    try:
        async with Client(runtime.build_server()) as client:  # type: ignore[arg-type]
            result = await client.call_tool(name, arguments)
    finally:
        await runtime.aclose()
    error = error_of(result)
    assert result.is_error and error is not None, result
    return error


@pytest.mark.anyio
@pytest.mark.parametrize(("name", "arguments", "code", "quoted", "field"), [
    pytest.param("flows_filter", {"flow_name": "x", "name_like": "y"}, "ARGUMENT_INVALID",
                 "Invalid request received: name_like: Input should be a valid string; flow_name: Field required; "
                 "limit: Input should be less than or equal to 200 (and 1 more)", "name_like", id="prefect"),
    pytest.param("failing_get", {"shape": "fastapi", "max_items": 500}, "ARGUMENT_INVALID",
                 "max_items: Input should be less than or equal to 100", "max_items", id="fastapi-query-renamed"),
    pytest.param("failing_get", {"shape": "fastapi_path"}, "ARGUMENT_INVALID",
                 "thing_id: Input should be a valid UUID", None, id="fastapi-location-no-argument-feeds"),
    pytest.param("failing_post", {"shape": "problem", "age_years": -1}, "ARGUMENT_INVALID",
                 "Your request is not valid: age_years: must be a positive integer; profile.color: must be "
                 "'green', 'red' or 'blue'", "age_years", id="rfc9457-errors"),
    pytest.param("failing_post", {"shape": "invalid_params"}, "ARGUMENT_INVALID",
                 "Your request parameters didn't validate: age_years: must be a positive integer", "age_years",
                 id="rfc9457-invalid-params"),
    pytest.param("failing_post", {"shape": "problem_detail"}, "FORBIDDEN",
                 "You do not have enough credit: Your current balance is 30, but that costs 50.", None,
                 id="rfc9457-title-detail"),
    pytest.param("failing_post", {"shape": "jsonapi", "data": {"attributes": {"firstName": "J"}}},
                 "ARGUMENT_INVALID", "data.attributes.firstName: First name must contain at least two characters.",
                 "data.attributes.firstName", id="json-api"),
    pytest.param("failing_post", {"shape": "kinto", "data": {"title": 42}}, "ARGUMENT_INVALID",
                 "data.title in body: 42 is not of type 'string'", "data.title", id="kinto-cornice"),
    pytest.param("failing_post", {"shape": "github"}, "ARGUMENT_INVALID", "Validation Failed: title: missing_field",
                 "title", id="github"),
    pytest.param("failing_post", {"shape": "stripe", "age_years": 1}, "ARGUMENT_INVALID", "Invalid integer: abc",
                 "age_years", id="stripe-error-param"),
    pytest.param("failing_get", {"shape": "jupyter"}, "NOT_FOUND",
                 "file or directory '/notes/none.md' does not exist", None, id="text-labelled-json"),
    pytest.param("failing_get", {"shape": "odd_json"}, "ARGUMENT_INVALID",
                 '{"oops":{"why":"the widget is upside down"}}', None, id="unknown-json-shape"),
])
async def test_the_upstream_error_is_quoted_and_names_the_argument(
    failing: Manifest, name: str, arguments: dict[str, Any], code: str, quoted: str, field: str | None
) -> None:
    error = await failure(failing, name, arguments)
    assert error["code"] == code, error
    assert quoted in error["message"], error["message"]
    assert error.get("field") == field, error


@pytest.mark.anyio
async def test_quoted_text_is_redacted_and_html_is_not_quoted(failing: Manifest) -> None:
    leaky = await failure(failing, "failing_get", {"shape": "leaky_text"})
    assert TOKEN not in json.dumps(leaky) and "bad token ***" in leaky["message"], leaky
    html = await failure(failing, "failing_get", {"shape": "html"})
    assert "<" not in html["message"] and "returned 502" in html["message"], html


def test_the_reader_never_invents_a_field() -> None:
    """Locations that no argument feeds name no field; the words are still quoted."""
    said = read_complaint({"detail": [{"loc": ["body", "nope"], "msg": "extra"}]}, None, "application/json", None)
    assert (said.message, said.field) == ("nope: extra", None)
    assert read_complaint(None, "   \n", "application/json", None).message == ""
    assert read_complaint({}, None, "application/json", None).message == ""
    assert read_complaint({"detail": "Not Found"}, None, "application/json", None).message == "Not Found"
