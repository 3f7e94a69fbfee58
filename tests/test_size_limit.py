"""The raw tools' schema size limiter (compiler/schemas.py `limit_size`): bounded, and never stricter."""

from __future__ import annotations

import json
import random
from typing import Any

import jsonschema

from openapi2mcp.compiler.schemas import limit_size

DESCRIPTION = "A property of the entity, described at the length real specs describe theirs." * 2
LEAF = {"anyOf": [{"type": "string", "enum": ["a", "b"], "description": "x" * 80}, {"type": "null"}],
        "description": DESCRIPTION}


def wide(properties: int = 300, args: int = 40) -> dict[str, Any]:
    """Microsoft Graph's shape: arguments of objects of entities with hundreds of described properties."""
    entity = {"type": "object", "description": "an entity", "properties": {f"p{i}": LEAF for i in range(properties)}}
    return {"type": "object", "required": ["arg0"], "properties": {
        f"arg{i}": {"type": "object", "properties": {f"q{j}": entity for j in range(5)}} for i in range(args)}}


def size(schema: dict[str, Any]) -> int:
    return len(json.dumps(schema))


def test_a_schema_within_budget_is_the_same_object() -> None:
    small = {"type": "object", "properties": {"a": {"type": "string"}}}
    assert limit_size(small, 16_000) is small


def test_wide_objects_at_the_edge_stay_near_the_budget() -> None:
    """The frontier of a breadth-first copy holds every child of the last level spelt out: 60,000 here.
    Stubs past twice the budget are left out where that only loosens the schema."""
    schema = wide()
    assert size(schema) > 17_000_000
    for budget in (2_000, 16_000):
        limited = limit_size(schema, budget)
        assert size(limited) <= 4 * budget, (budget, size(limited))
        assert set(limited["properties"]) == set(schema["properties"])  # every argument stays
        assert limited["required"] == ["arg0"]


def test_what_is_left_out_is_not_required_nor_closed() -> None:
    entity = {"type": "object", "required": ["p7"], "properties": {f"p{i}": LEAF for i in range(400)}}
    closed = {**entity, "additionalProperties": False}
    typed_rest = {**entity, "additionalProperties": {"type": "integer"}}
    schema = {"type": "object", "properties": {"open": entity, "closed": closed, "typed": typed_rest}}
    limited = limit_size(schema, 2_000)
    kept = {name: set(limited["properties"][name]["properties"]) for name in ("open", "closed", "typed")}
    assert "p7" in kept["open"] and len(kept["open"]) < 400  # optional ones went; the required one stays
    assert len(kept["closed"]) == len(kept["typed"]) == 400  # leaving one out would refuse (or retype) it


def test_not_and_if_are_kept_whole() -> None:
    """A looser subschema under `not` (or `if`) would make the whole stricter."""
    forbidden = {"type": "object", "properties": {f"k{i}": LEAF for i in range(200)}, "required": ["k1"]}
    schema = {"type": "object", "properties": {f"a{i}": {"type": "object", "properties": {
        "x": {"not": forbidden}, "y": {"if": forbidden, "then": {"type": "object"}}}} for i in range(30)}}
    limited = limit_size(schema, 2_000)
    assert size(limited) < size(schema)
    spelt = [a.get("properties", {}) for a in limited["properties"].values()]
    nots = [p["x"]["not"] for p in spelt if "not" in p.get("x", {})]
    ifs = [p["y"]["if"] for p in spelt if "if" in p.get("y", {})]
    assert nots and ifs  # the first arguments are spelt out to their `not` and `if` (a stub has neither: looser)
    assert all(n == forbidden for n in nots) and all(i == forbidden for i in ifs)


def _instance(schema: dict[str, Any], rng: random.Random, depth: int = 0) -> Any:
    """A value the (generated) schema accepts."""
    if "anyOf" in schema:
        return _instance(rng.choice(schema["anyOf"]), rng, depth + 1)
    kind = schema.get("type")
    if "enum" in schema:
        return rng.choice(schema["enum"])
    if kind == "object":
        props = schema.get("properties", {})
        names = [n for n in props if n in schema.get("required", []) or rng.random() < 0.5]
        return {n: _instance(props[n], rng, depth + 1) for n in names}
    if kind == "array":
        return [_instance(schema["items"], rng, depth + 1) for _ in range(rng.randint(0, 2))]
    return {"string": "s", "integer": 3, "null": None, "boolean": True}.get(kind or "string", "s")


def test_the_copy_accepts_everything_the_original_does() -> None:
    rng = random.Random(15)
    item = {"type": "object", "properties": {f"f{i}": LEAF for i in range(50)}, "required": ["f0"]}
    schema = {"type": "object", "required": ["arg0"], "properties": {
        f"arg{i}": {"type": "object", "properties": {"list": {"type": "array", "items": item},
                                                      "one": item, "n": {"type": "integer"}}} for i in range(30)}}
    limited = limit_size(schema, 3_000)
    assert size(limited) < size(schema) / 5
    check, original = jsonschema.Draft202012Validator(limited), jsonschema.Draft202012Validator(schema)
    for _ in range(100):
        value = _instance(schema, rng)
        assert original.is_valid(value)
        assert check.is_valid(value), value
    assert not check.is_valid({"arg0": {"n": "not a number"}})  # the shallow parts still type-check
