"""Compile stage, part: the output schema of a JMESPath projection (`response.select`).

The model is told the shape of what it gets back, so a projection's result schema is inferred
from the expression and the spec's response schema, by walking the JMESPath syntax tree (the
`jmespath` library parses; nothing is evaluated). A field the response schema cannot contain is
a compile error with a suggestion, not a silently-null result at run time.

JMESPath yields null for a missing field, so a field that is not `required` in the response
schema may be null in the result; the inferred schema says so.
"""

from __future__ import annotations

from typing import Any

from openapi2mcp.errors import did_you_mean

ANY: dict[str, Any] = {}


class ProjectionError(Exception):
    def __init__(self, message: str, hint: str | None = None) -> None:
        self.hint = hint
        super().__init__(message)


def parse(expression: str) -> dict[str, Any]:
    import jmespath
    from jmespath.exceptions import JMESPathError

    try:
        ast: dict[str, Any] = jmespath.compile(expression).parsed
    except JMESPathError as e:
        raise ProjectionError(
            f"invalid JMESPath expression {expression!r}: {str(e).splitlines()[0]}",
            hint="see https://jmespath.org/specification.html; e.g. items[*].{id: id, name: name}",
        ) from None
    return ast


def project_schema(expression: str, base: dict[str, Any] | None) -> dict[str, Any] | None:
    """The JSON Schema of `expression` applied to data of schema `base` (None: unknown shape)."""
    ast = parse(expression)
    if base is None:
        return None
    defs = base.get("$defs", {})
    result = _Infer(defs, expression).node(ast, base)
    if defs and "$ref" in repr(result):
        result = {**result, "$defs": defs}
    return result


class _Infer:
    def __init__(self, defs: dict[str, Any], expression: str) -> None:
        self.defs = defs
        self.expression = expression

    def deref(self, schema: Any) -> dict[str, Any]:
        seen = 0
        while isinstance(schema, dict) and isinstance(schema.get("$ref"), str) and seen < 50:
            name = schema["$ref"].rsplit("/", 1)[-1]
            schema = {**self.defs.get(name, {}), **{k: v for k, v in schema.items() if k != "$ref"}}
            seen += 1
        return schema if isinstance(schema, dict) else {}

    def node(self, ast: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
        kind = ast["type"]
        handler = getattr(self, "n_" + kind, None)
        if handler is None:
            return ANY
        result: dict[str, Any] = handler(ast, schema)
        return result

    # ------------------------------------------------------------------ node kinds

    def n_current(self, ast: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
        return schema

    n_identity = n_current

    def n_field(self, ast: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
        return self.field(schema, ast["value"])

    def n_subexpression(self, ast: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
        for child in ast["children"]:
            schema = self.node(child, schema)
        return schema

    def n_pipe(self, ast: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
        left = self.node(ast["children"][0], schema)
        return self.node(ast["children"][1], _not_null(left))

    def n_index_expression(self, ast: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
        return self.n_subexpression(ast, schema)

    def n_index(self, ast: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
        return _nullable(self.items(schema))

    def n_slice(self, ast: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
        return _array(self.items(schema))

    def n_projection(self, ast: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
        left = self.node(ast["children"][0], schema)
        item = self.items(left)
        return _array(_not_null(self.node(ast["children"][1], item)))

    def n_filter_projection(self, ast: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
        left = self.node(ast["children"][0], schema)
        item = self.items(left)
        self.node(ast["children"][2], item)  # checks the field names in the condition
        return _array(_not_null(self.node(ast["children"][1], item)))

    def n_value_projection(self, ast: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
        left = self.deref(self.node(ast["children"][0], schema))
        values = [self.deref(v) for v in (left.get("properties") or {}).values()]
        extra = left.get("additionalProperties")
        if isinstance(extra, dict):
            values.append(extra)
        item = values[0] if len(values) == 1 else ({"anyOf": values} if values else ANY)
        return _array(_not_null(self.node(ast["children"][1], item)))

    def n_flatten(self, ast: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
        inner = self.items(self.node(ast["children"][0], schema))
        inner_d = self.deref(inner)
        if "array" in _types(inner_d):
            return _array(self.items(inner_d))
        return _array(inner)

    def n_multi_select_dict(self, ast: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
        props: dict[str, Any] = {}
        for pair in ast["children"]:
            props[pair["value"]] = self.node(pair["children"][0], schema)
        return {"type": "object", "properties": props, "required": list(props)}

    def n_multi_select_list(self, ast: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
        items = [self.node(child, schema) for child in ast["children"]]
        return {"type": "array", "prefixItems": items, "items": False} if items else {"type": "array"}

    def n_literal(self, ast: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
        return {"const": ast["value"]}

    def n_comparator(self, ast: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
        for child in ast["children"]:
            self.node(child, schema)
        return {"type": ["boolean", "null"]}

    def n_and_expression(self, ast: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
        for child in ast["children"]:
            self.node(child, schema)
        return ANY

    n_or_expression = n_and_expression

    def n_not_expression(self, ast: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
        self.node(ast["children"][0], schema)
        return {"type": "boolean"}

    def n_function_expression(self, ast: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
        args = [self.node(c, schema) for c in ast["children"] if c["type"] != "expref"]
        name = ast["value"]
        if name in ("length",):
            return {"type": "integer"}
        if name in ("keys",):
            return {"type": "array", "items": {"type": "string"}}
        if name in ("contains", "starts_with", "ends_with"):
            return {"type": "boolean"}
        if name in ("to_string", "join", "type"):
            return {"type": "string"}
        if name in ("sum", "avg", "abs", "ceil", "floor", "to_number"):
            return {"type": ["number", "null"]}
        if name in ("sort", "sort_by", "reverse") and args:
            return args[0]
        if name in ("max_by", "min_by") and args:
            return _nullable(self.items(args[0]))
        if name in ("values",):
            return {"type": "array"}
        return ANY

    # ------------------------------------------------------------------ schema helpers

    def field(self, schema: dict[str, Any], name: str) -> dict[str, Any]:
        s = self.deref(schema)
        if not s:
            return ANY
        for key in ("anyOf", "oneOf", "allOf"):
            if key in s and isinstance(s[key], list):
                found = [self.field(part, name) for part in s[key] if self._has_field(part, name)]
                if not found and not self._open(s):
                    self._missing(name, s)
                if not found:
                    return ANY
                return found[0] if len(found) == 1 else _nullable({"anyOf": found})
        props = s.get("properties")
        if isinstance(props, dict) and name in props:
            value = props[name]
            required = name in (s.get("required") or [])
            return value if required else _nullable(value)
        if isinstance(s.get("additionalProperties"), dict):
            return _nullable(s["additionalProperties"])
        if props is not None and not self._open(s):
            self._missing(name, s)
        types = _types(s)
        if types and "object" not in types:
            raise ProjectionError(
                f"`select` asks for field {name!r} of a {'/'.join(sorted(types))} value in {self.expression!r}",
                hint="project arrays with [*] (e.g. items[*].name) before naming fields",
            )
        return ANY

    def _has_field(self, schema: Any, name: str) -> bool:
        s = self.deref(schema)
        props = s.get("properties")
        if isinstance(props, dict) and name in props:
            return True
        return any(self._has_field(p, name) for k in ("anyOf", "oneOf", "allOf") for p in s.get(k) or [])

    def _open(self, s: dict[str, Any]) -> bool:
        return isinstance(s.get("additionalProperties"), dict) or bool(s.get("patternProperties"))

    def _missing(self, name: str, s: dict[str, Any]) -> None:
        known = sorted(_all_props(self, s))
        hint = did_you_mean(name, known)
        raise ProjectionError(
            f"`select` names field {name!r}, which the response schema does not have"
            + (f"; {hint}" if hint else ""),
            hint=f"fields here: {', '.join(known[:30])}" if known else None,
        )

    def items(self, schema: dict[str, Any]) -> dict[str, Any]:
        s = self.deref(schema)
        if not s:
            return ANY
        types = _types(s)
        if types and "array" not in types:
            raise ProjectionError(
                f"`select` in {self.expression!r} indexes or projects a {'/'.join(sorted(types))} value as an array",
                hint="use [*] or [0] only on array fields",
            )
        items = s.get("items")
        return items if isinstance(items, dict) else ANY


def _all_props(infer: _Infer, s: dict[str, Any]) -> set[str]:
    out = set((s.get("properties") or {}).keys())
    for key in ("anyOf", "oneOf", "allOf"):
        for part in s.get(key) or []:
            out |= _all_props(infer, infer.deref(part))
    return out


def _types(schema: dict[str, Any]) -> set[str]:
    t = schema.get("type")
    if isinstance(t, str):
        return {t}
    if isinstance(t, list):
        return {x for x in t if isinstance(x, str)} - {"null"}
    return set()


def _array(items: dict[str, Any]) -> dict[str, Any]:
    return {"type": "array", "items": items} if items else {"type": "array"}


def _nullable(schema: dict[str, Any]) -> dict[str, Any]:
    if not schema:
        return schema
    t = schema.get("type")
    if isinstance(t, str):
        return {**schema, "type": [t, "null"]} if t != "null" else schema
    if isinstance(t, list):
        return schema if "null" in t else {**schema, "type": [*t, "null"]}
    return {"anyOf": [schema, {"type": "null"}]}


def _not_null(schema: dict[str, Any]) -> dict[str, Any]:
    """Projections drop null results: the items of a projection are never null."""
    t = schema.get("type")
    if isinstance(t, list) and "null" in t:
        rest = [x for x in t if x != "null"]
        return {**schema, "type": rest[0] if len(rest) == 1 else rest}
    any_of = schema.get("anyOf")
    if isinstance(any_of, list) and len(schema) == 1:
        rest_s = [s for s in any_of if s != {"type": "null"}]
        if len(rest_s) == 1:
            return dict(rest_s[0])
    return schema
