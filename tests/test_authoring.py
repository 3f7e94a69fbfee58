"""What `init`, `lint` and `diff` share: the one reader of the spec's own words (authoring/specdoc.py).

Real documents through the real loader (a Swagger 2.0 spec converted as every command reads it);
a hand-made document only for what no loader lets through (a ref chain that comes back on itself).
"""

from __future__ import annotations

from pathlib import Path

from openapi2mcp.authoring.specdoc import SpecDoc
from openapi2mcp.loader import load_spec

SWAGGER = """\
swagger: "2.0"
info: {title: Things, version: "1"}
host: things.example
paths:
  /things:
    parameters:
      - {name: page, in: query, type: integer, description: the path's}
      - {name: tag, in: query, type: string}
    get:
      operationId: listThings
      summary: List things
      description: A page of things.
      parameters:
        - {name: page, in: query, type: integer, description: the operation's}
        - {name: per_page, in: query, type: integer, maximum: 50}
      responses:
        202: {description: queued}
        200:
          description: One page.
          headers: {Link: {type: string}, X-Total-Count: {type: integer}}
          schema: {$ref: "#/definitions/Page"}
    post:
      operationId: createThing
      parameters:
        - {name: body, in: body, schema: {$ref: "#/definitions/Thing"}}
      responses:
        201: {description: made, schema: {$ref: "#/definitions/Thing"}}
  /things/{id}/export:
    post:
      operationId: exportThing
      produces: ["*/*"]
      parameters:
        - {name: id, in: path, required: true, type: string}
      responses:
        202: {description: queued, schema: {type: object, properties: {job: {type: string}}}}
        201: {description: exported, schema: {$ref: "#/definitions/Thing"}}
definitions:
  Page:
    type: object
    properties:
      items: {type: array, items: {$ref: "#/definitions/Thing"}}
  Thing:
    type: object
    properties:
      id: {type: string}
      name: {type: string}
      parent: {$ref: "#/definitions/Thing"}
"""


def _doc(tmp_path: Path) -> SpecDoc:
    spec = tmp_path / "swagger.yaml"
    spec.write_text(SWAGGER, encoding="utf-8")
    return SpecDoc(load_spec(str(spec)).document)


def test_a_converted_swagger_document_reads_like_a_3x_one(tmp_path: Path) -> None:
    doc = _doc(tmp_path)
    ops = {o.key: o for o in doc.operations()}
    assert list(ops) == ["GET /things", "POST /things", "POST /things/{id}/export"]  # spec order, the path item's methods in HTTP order
    listing = ops["GET /things"]
    assert listing.id == "listThings" and listing.summary == "List things\n\nA page of things."
    params = {p["name"]: p for p in listing.params}  # the path's parameters merged in, the operation's win
    assert set(params) == {"page", "tag", "per_page"} and params["page"]["description"] == "the operation's"
    success = doc.success(listing)  # YAML's integer keys; 200 before the 202 written first
    assert success.status == "200" and success.headers == ["Link", "X-Total-Count"]
    assert success.schema is not None and set(doc.properties(success.schema)) == {"items"}
    assert set(doc.properties(doc.items(doc.properties(success.schema)["items"]))) == {"id", "name", "parent"}
    create = ops["POST /things"]
    assert set(doc.body_properties(create)) == {"id", "name", "parent"}  # the body parameter, converted
    assert doc.success(create).status == "201" and doc.success(create).schema is not None
    export = doc.success(ops["POST /things/{id}/export"])  # as the compiler reads it: the lowest 2xx, `*/*` is JSON
    assert export.status == "201" and export.schema is not None and "name" in doc.properties(export.schema)
    assert doc.operation("get", "/things", "listThings") == listing
    assert doc.operation("delete", "/things", "x") is None and doc.operation("get", "/nope", "x") is None


def test_cycles_and_dangling_refs_read_as_nothing(tmp_path: Path) -> None:
    doc = _doc(tmp_path)
    thing = doc.resolve({"$ref": "#/components/schemas/Thing"})
    assert 0 < doc.structure_size(thing, cap=100_000) < 1_000  # a schema that contains itself, counted once per path
    assert doc.resolve({"$ref": "#/components/schemas/Nothing"}) is None
    assert doc.resolve({"$ref": "other.yaml#/Thing"}) is None  # bundled documents have internal refs only
    loop = SpecDoc({"components": {"schemas": {"A": {"$ref": "#/components/schemas/B"},
                                               "B": {"$ref": "#/components/schemas/A"}}}})
    assert loop.resolve({"$ref": "#/components/schemas/A"}) is None
    assert loop.variants({"$ref": "#/components/schemas/A"}) == [] and loop.types({"allOf": [{"$ref": "#/x"}]}) == set()
    deep: dict[str, object] = {"type": "object"}
    for _ in range(50):  # combinations nested past MAX_DEPTH stop being looked into
        deep = {"allOf": [deep]}
    assert loop.types(deep) == set()
