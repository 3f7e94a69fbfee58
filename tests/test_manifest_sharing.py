"""Manifest files write each repeated schema subtree once (manifest/sharing.py) and read it back as one object."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from openapi2mcp.manifest import Manifest
from openapi2mcp.manifest.model import _seal_file
from openapi2mcp.manifest.sharing import MARK, SHARED_KEY
from tests.conftest import corpus_file
from tests.helpers import compile_example, compile_text

PET = {
    "type": "object",
    "required": ["id", "name"],
    "properties": {
        "id": {"type": "string", "description": "The pet's id, as the shop gives it."},
        "name": {"type": "string", "description": "What the pet answers to."},
        "owner": {"$ref": "#/components/schemas/Owner"},
        "tags": {"type": "array", "items": {"type": "string"}},
    },
}
OWNER = {"type": "object", "properties": {"name": {"type": "string", "description": "Who feeds the pet, in full."},
                                          "phone": {"type": "string", "description": "A number to call."}}}


def shop(n: int = 4) -> dict[str, Any]:
    """A spec whose operations all return the same Pet (with the same Owner inside)."""
    pet = {"schema": {"$ref": "#/components/schemas/Pet"}}
    ok = {"200": {"description": "ok", "content": {"application/json": pet}}}
    paths = {f"/shops/{i}/pets/{{id}}": {"get": {
        "operationId": f"getPet{i}", "parameters": [{"name": "id", "in": "path", "required": True,
                                                     "schema": {"type": "string"}}], "responses": ok}}
        for i in range(n)}
    return {"openapi": "3.0.3", "info": {"title": "shop", "version": "1"}, "servers": [{"url": "https://x.example"}],
            "paths": paths, "components": {"schemas": {"Pet": PET, "Owner": OWNER}}}


def markers(value: Any) -> int:
    if isinstance(value, dict):
        return (len(value) == 1 and MARK in value) + sum(markers(v) for v in value.values())
    if isinstance(value, list):
        return sum(markers(v) for v in value)
    return 0


def test_a_repeated_schema_is_written_once_and_read_back_as_one_object(tmp_path: Path) -> None:
    m = compile_text(tmp_path, shop(), all_operations=True).manifest
    text = m.to_json()
    data = json.loads(text)
    table = data[SHARED_KEY]
    assert table and markers([t["output_schema"] for t in data["tools"]]) == len(m.tools)  # one marker per tool
    expanded = json.dumps({**m.payload(), "content_hash": m.content_hash}, indent=1, ensure_ascii=False)
    assert len(text) < len(expanded)
    loaded = Manifest.from_json(text)
    assert loaded == m and loaded.content_hash == m.content_hash == m.compute_hash()  # the hash: the content
    assert loaded.to_json() == text  # written again byte for byte
    outputs = [t.output_schema for t in loaded.tools]
    assert all(o == outputs[0] for o in outputs)
    inner = {id(o["properties"]["result"]) if "result" in o["properties"] else id(o["properties"]["owner"])
             for o in outputs if o is not None}
    assert len(inner) == 1  # the same object in every tool, as compiling had it


def test_what_is_not_repeated_or_is_tiny_is_written_where_it_is(tmp_path: Path) -> None:
    m = compile_text(tmp_path, shop(1), all_operations=True).manifest  # one tool: nothing written twice
    data = json.loads(m.to_json())
    assert SHARED_KEY not in data and markers(data["tools"]) == 0
    for name in ("notes", "petstore", "market"):  # the examples: whatever is shared, they round-trip
        example = compile_example(name).manifest
        again = Manifest.from_json(example.to_json())
        assert again == example and again.payload() == example.payload()
        for entry in json.loads(example.to_json()).get(SHARED_KEY, []):
            assert len(json.dumps(entry, separators=(",", ":"), ensure_ascii=False)) >= 96 or markers(entry)


def test_a_schema_that_looks_like_a_marker_is_written_expanded(tmp_path: Path) -> None:
    spec = shop()
    spec["paths"]["/shops/0/pets/{id}"]["get"]["parameters"].append(  # a document's own value, like a marker
        {"name": "filter", "in": "query", "schema": {"type": "object", "default": {MARK: 0}}})
    m = compile_text(tmp_path, spec, all_operations=True).manifest
    assert m.tools[0].input_schema["properties"]["filter"]["default"] == {MARK: 0}
    text = m.to_json()
    assert SHARED_KEY not in json.loads(text)
    assert Manifest.from_json(text) == m


@pytest.mark.parametrize("bad", [{MARK: 99}, {MARK: "0"}, {MARK: -1}, {MARK: True}])
def test_a_damaged_shared_list_is_a_clear_error(tmp_path: Path, bad: dict[str, Any]) -> None:
    m = compile_text(tmp_path, shop(), all_operations=True).manifest
    data = json.loads(m.to_json())
    data["tools"][1]["output_schema"] = bad
    data.pop("file_hash")  # sealed again below: the damage is in the content, not the bytes
    text = _seal_file(json.dumps(data, indent=1, ensure_ascii=False) + "\n")
    with pytest.raises(ValueError, match=r"manifest is damaged: .* names no earlier shared entry; recompile"):
        Manifest.from_json(text)
    data[SHARED_KEY][0] = {MARK: 0}  # an entry may only name earlier ones: no cycles
    data["tools"][1]["output_schema"] = {MARK: 0}
    with pytest.raises(ValueError, match="names no earlier shared entry"):
        Manifest.from_json(json.dumps(data))
    data[SHARED_KEY] = {"0": {}}
    with pytest.raises(ValueError, match='"shared" is not a list'):
        Manifest.from_json(json.dumps(data))


def test_a_shared_list_that_explodes_is_refused(tmp_path: Path) -> None:
    """Each entry naming the one before twice doubles it: 2**60 objects to walk (a "billion laughs")."""
    m = compile_text(tmp_path, shop(), all_operations=True).manifest
    data = json.loads(m.to_json())
    data.pop("file_hash")
    base = len(data[SHARED_KEY])
    bomb: list[Any] = [{"type": "string", "description": "x" * 100}]
    bomb += [{"anyOf": [{MARK: base + i}, {MARK: base + i}]} for i in range(60)]
    data[SHARED_KEY] = data[SHARED_KEY] + bomb
    data["tools"][0]["output_schema"] = {MARK: len(data[SHARED_KEY]) - 1}
    text = _seal_file(json.dumps(data, indent=1, ensure_ascii=False) + "\n")
    with pytest.raises(ValueError, match=r"is damaged: its shared schemas expand to [\d,]+ objects and arrays"):
        Manifest.from_json(text)


@pytest.mark.slow
def test_github_every_operation_round_trips_shared(corpus: Path) -> None:
    from openapi2mcp.compiler import compile_manifest
    from openapi2mcp.loader import load_spec

    m = compile_manifest(load_spec(str(corpus_file("github/api.github.com.json"))), all_operations=True).manifest
    text = m.to_json()
    expanded = json.dumps({**m.payload(), "content_hash": m.content_hash}, indent=1, ensure_ascii=False)
    assert len(text) < len(expanded) / 2  # entities such as repository and user are written once
    loaded = Manifest.from_json(text)
    assert loaded == m and loaded.content_hash == m.content_hash
