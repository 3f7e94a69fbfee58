"""What `init`, `lint` and `diff` share: the one reader of the spec's own words (authoring/specdoc.py).

Real documents through the real loader (a Swagger 2.0 spec converted as every command reads it);
a hand-made document only for what no loader lets through (a ref chain that comes back on itself).
"""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import pytest
import yaml

from openapi2mcp.authoring import LintOptions, draft_overlay, load_project, run_lint
from openapi2mcp.authoring.paging import spec_paging
from openapi2mcp.authoring.specdoc import SpecDoc
from openapi2mcp.loader import load_spec
from tests.conftest import corpus_file
from tests.local import EXAMPLES, ROOT

THIRDPARTY = ROOT / "tests" / "specs" / "thirdparty"

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
    # spec order, a path item's methods in HTTP order
    assert list(ops) == ["GET /things", "POST /things", "POST /things/{id}/export"]
    listing = ops["GET /things"]
    assert listing.id == "listThings" and listing.summary == "List things\n\nA page of things."
    params = {p["name"]: p for p in listing.params}  # the path's parameters merged in, the operation's win
    assert set(params) == {"page", "tag", "per_page"} and params["page"]["description"] == "the operation's"
    success = doc.success(listing)  # YAML's integer keys; 200 before the 202 written first
    assert success.status == "200" and success.headers == ["Link", "X-Total-Count"]
    assert success.schema is not None and set(doc.properties(success.schema)) == {"items"}
    assert set(doc.properties(doc.items(doc.properties(success.schema)["items"]))) == {"id", "name", "parent"}
    create = ops["POST /things"]
    args = doc.arguments(create)  # the path's parameters, and the body parameter's properties by their names
    assert {a.name: a.location for a in args.values()} == {"page": "query", "tag": "query", "id": "body",
                                                           "name": "body", "parent": "body"}
    assert {a.name: a.location for a in doc.arguments(listing).values()} == {"page": "query", "tag": "query",
                                                                             "per_page": "query"}
    assert doc.arguments(listing)["per_page"].schema == {"type": "integer", "maximum": 50}
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


# ============================================================================ one paging detector


def _paged_by_init(text: str) -> tuple[dict[str, dict[str, Any]], set[str]]:
    """From a draft: operation -> the `pagination` block init drafted, and every read it exposes."""
    paged: dict[str, dict[str, Any]] = {}
    reads: set[str] = set()
    for tool in yaml.safe_load(text)["tools"]:
        branches = [tool] if "operation" in tool else [*(tool.get("actions") or {}).values(), *(tool.get("variants")
                                                                                                or [])]
        for b in branches:
            if b.get("risk", tool.get("risk")) == "low":
                reads.add(b["operation"])
            if "pagination" in b:
                paged[b["operation"]] = b["pagination"]
    return paged, reads


SPECS = [*(str(p.relative_to(ROOT)) for p in sorted(EXAMPLES.glob("*/openapi.yaml"))),
         *(str(p.relative_to(ROOT)) for p in sorted(THIRDPARTY.glob("*.[jy]*[ln]"))),
         "corpus:apis-guru/slack.com.json", "corpus:apis-guru/spotify.com.json"]


def _spec(name: str) -> Path:
    return corpus_file(name.removeprefix("corpus:")) if name.startswith("corpus:") else ROOT / name


@pytest.mark.parametrize("name", [*SPECS, pytest.param("corpus:github/api.github.com.json", marks=pytest.mark.slow),
                                  pytest.param("corpus:stripe/spec3.json", marks=pytest.mark.slow)])
def test_lint_asks_for_exactly_the_pagination_init_drafts(name: str, tmp_path: Path) -> None:
    """Every read init drafted, exposed without `pagination`: lint flags exactly the ones init paged (link,
    page, offset, body and header cursors among them), and its fix is init's block, key for key."""
    spec = _spec(name)
    draft = draft_overlay(load_spec(str(spec)), name="draft.yaml")
    paged, reads = _paged_by_init(draft.text)
    bare = tmp_path / "bare.yaml"
    tools = [{"name": f"t{i}", "operation": op, "risk": "low"} for i, op in enumerate(sorted(reads))]
    bare.write_text(yaml.safe_dump({"openapi2mcp": 1, "upstream": {"base_url": "http://127.0.0.1:1"},
                                    "tools": tools}), encoding="utf-8")
    report = run_lint(load_project(str(spec), [str(bare)]), LintOptions())
    asked = {}
    for f in report.active:
        if f.rule.id == "O2M105":
            asked[tools[int(str(f.tool)[1:])]["operation"]] = yaml.safe_load(f.fix or "")["pagination"]  # YAML as is
    assert asked == paged


@pytest.mark.parametrize("name", [*SPECS, pytest.param("corpus:stripe/spec3.yaml", marks=pytest.mark.slow)])
def test_a_draft_passes_the_rules_init_and_lint_share(name: str, tmp_path: Path) -> None:
    """Lint judges a fresh draft by init's own detectors: no list left unpaged that init would page (O2M105),
    nothing init would forbid or leave out as administrative exposed (O2M111: Stripe's `terminal/readers` are card
    readers, not shells), the pin holds (O2M112), no error at all."""
    spec = _spec(name)
    draft = tmp_path / "draft.yaml"
    draft.write_text(draft_overlay(load_spec(str(spec)), name=draft.name).text, encoding="utf-8")
    report = run_lint(load_project(str(spec), [str(draft)]), LintOptions())
    shared = [f for f in report.active if f.rule.id in ("O2M105", "O2M111", "O2M112") or f.severity == "error"]
    assert shared == [], [f"{f.rule.id} {f.message}" for f in shared]


def test_lists_side_by_side_are_columns_not_a_page(tmp_path: Path) -> None:
    chroma = SpecDoc(load_spec(str(THIRDPARTY / "chroma.json")).document)
    get = next(o for o in chroma.operations() if o.path.endswith("/{collection_id}/get"))
    found, why = spec_paging(chroma, get)  # {ids: [...], documents: [...], metadatas: [...]}, offset and limit
    assert found is None and "side by side" in why and "`ids`" in why and "`metadatas`" in why
    spec = tmp_path / "runs.yaml"
    spec.write_text(textwrap.dedent("""\
        openapi: 3.0.3
        info: {title: Runs, version: "1"}
        paths:
          /runs:
            get:
              operationId: listRuns
              parameters:
                - {name: offset, in: query, schema: {type: integer}}
                - {name: limit, in: query, schema: {type: integer, default: 50, maximum: 200}}
              responses:
                "200":
                  description: A page of runs.
                  content:
                    application/json:
                      schema:
                        type: object
                        properties:
                          runs: {type: array, items: {type: object, properties: {id: {type: string}}}}
                          available_statuses: {type: array, items: {type: string, enum: [queued, done]}}
        """), encoding="utf-8")
    doc = SpecDoc(load_spec(str(spec)).document)
    found, _ = spec_paging(doc, next(doc.operations()))  # a vocabulary of enum values is no column
    assert found is not None and found.block == {"style": "offset", "page_size": 50, "max_items": 100,
                                                 "items": "runs"}
    assert found.position == "offset" and found.uses == {"offset", "limit"}
