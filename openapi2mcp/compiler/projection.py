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

import jmespath
from jmespath.exceptions import JMESPathError

from openapi2mcp.compiler.schemas import schema_types
from openapi2mcp.errors import did_you_mean

ANY: dict[str, Any] = {}


class ProjectionError(Exception):
    def __init__(self, message: str, hint: str | None = None) -> None:
        self.hint = hint
        super().__init__(message)


def parse(expression: str) -> dict[str, Any]:
    try:
        ast: dict[str, Any] = jmespath.compile(expression).parsed
    except JMESPathError as e:
        raise ProjectionError(
            f"invalid JMESPath expression {expression!r}: {str(e).splitlines()[0]}",
            hint="see https://jmespath.org/specification.html; e.g. items[*].{id: id, name: name}",
        ) from None
    except RecursionError:  # the parser recurses per nesting level
        raise _too_deep(expression) from None
    if _nesting(ast) > MAX_EXPRESSION_NESTING:  # inference and evaluation recurse per level too
        raise _too_deep(expression)
    return ast


MAX_EXPRESSION_NESTING = 64


def _too_deep(expression: str) -> ProjectionError:
    shown = expression if len(expression) <= 60 else expression[:57] + "..."
    return ProjectionError(
        f"JMESPath expression {shown!r} nests more than {MAX_EXPRESSION_NESTING} levels deep",
        hint="split it, or select fewer levels at once",
    )


def _nesting(ast: dict[str, Any]) -> int:
    deepest = 0
    stack = [(ast, 1)]
    while stack:
        node, depth = stack.pop()
        deepest = max(deepest, depth)
        if depth > MAX_EXPRESSION_NESTING:
            break
        stack.extend((c, depth + 1) for c in node.get("children", ()) if isinstance(c, dict))
    return deepest


def project_schema(
    expression: str, base: dict[str, Any] | None, *, what: str = "`select`", context: bool = False
) -> dict[str, Any] | None:
    """The JSON Schema of `expression` applied to data of schema `base` (None: unknown shape).

    `what` names the expression in messages. `context=True` means `base` is a chain's
    `{inputs, steps}` context: messages then name the path (`steps.order`) that lacks a field.
    """
    ast = parse(expression)
    if base is None:
        return None
    defs = base.get("$defs", {})
    result = _Infer(defs, expression, what, context).node(ast, base)
    if defs and "$ref" in repr(result):
        result = {**result, "$defs": defs}
    return result


def root_references(expression: str) -> list[tuple[str, ...]]:
    """The field paths an expression reads from its root, e.g. [("steps", "order"), ("inputs", "id")].

    Only names looked up on the root count (not fields of projected items); a path holds the
    leading run of plain fields (`steps.items[*].id` -> ("steps", "items")).
    """
    found: list[tuple[str, ...]] = []
    _refs(parse(expression), True, found)
    return found


# nodes whose first child reads the current value and the others read what the first one gives
_LEFT_ONLY = {
    "subexpression", "projection", "filter_projection", "value_projection", "flatten", "index_expression", "pipe",
}


def _refs(ast: dict[str, Any], at_root: bool, found: list[tuple[str, ...]]) -> None:
    kind = ast.get("type")
    children = [c for c in ast.get("children", []) if isinstance(c, dict)]
    if kind == "field":
        if at_root:
            found.append((ast["value"],))
        return
    if kind == "subexpression":
        path = _leading_fields(ast)
        if at_root and path:
            found.append(path)
        at_root = at_root and not path
    if kind in _LEFT_ONLY:
        if children:
            _refs(children[0], at_root, found)
            for child in children[1:]:
                _refs(child, False, found)
        return
    if kind == "expref":
        return
    for child in children:
        _refs(child, at_root, found)


def _leading_fields(ast: dict[str, Any]) -> tuple[str, ...]:
    out: list[str] = []
    for child in ast.get("children", []):
        if child.get("type") == "field":
            out.append(child["value"])
            continue
        if child.get("type") in ("projection", "index_expression", "filter_projection", "flatten"):
            inner = child.get("children", [{}])[0]
            while inner.get("type") in ("projection", "index_expression", "filter_projection", "flatten"):
                inner = inner.get("children", [{}])[0]
            if inner.get("type") == "field":
                out.append(inner["value"])
            elif inner.get("type") == "subexpression":
                out.extend(_leading_fields(inner))
        break
    return tuple(out)


class _Infer:
    def __init__(self, defs: dict[str, Any], expression: str, what: str = "`select`", context: bool = False) -> None:
        self.defs = defs
        self.expression = expression
        self.what = what
        self.context = context
        self.trail: list[str] = []
        self.open_refs: list[str] = []  # the refs `field` is looking into, outermost first

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
        saved, self.trail = self.trail, []
        try:
            for child in ast["children"]:
                schema = self.node(child, schema)
                self.trail.append(child["value"] if child["type"] == "field" else "…")
        finally:
            self.trail = saved
        return schema

    def n_pipe(self, ast: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
        left = self.node(ast["children"][0], schema)
        right = self.node(ast["children"][1], _not_null(left))
        # most expressions on null give null (a field, a projection, a multi-select)
        return _nullable(right) if _may_be_null(self.deref(left)) and ast["children"][1]["type"] != "literal" \
            else right

    def n_index_expression(self, ast: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
        return self.n_subexpression(ast, schema)

    def n_index(self, ast: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
        return _nullable(self.items(schema))

    def n_slice(self, ast: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
        return _or_null(_array(self.items(schema)), self.deref(schema))

    def n_projection(self, ast: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
        left = self.node(ast["children"][0], schema)
        item = self.items(left)
        out = _or_null(_array(_not_null(self.node(ast["children"][1], item))), self.deref(left))
        return _nullable(out) if self.maybe_not_array(left) else out

    def n_filter_projection(self, ast: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
        left = self.node(ast["children"][0], schema)
        item = self.items(left)
        self.node(ast["children"][2], item)  # checks the field names in the condition
        return _or_null(_array(_not_null(self.node(ast["children"][1], item))), self.deref(left))

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
        if "array" in schema_types(inner_d):
            return _array(self.items(inner_d))
        return _array(inner)

    def n_multi_select_dict(self, ast: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
        props: dict[str, Any] = {}
        inner = _not_null(schema) if schema else schema
        for pair in ast["children"]:
            props[pair["value"]] = self.node(pair["children"][0], inner)
        return _or_null({"type": "object", "properties": props, "required": list(props)}, self.deref(schema))

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
        """The schema of `name` in objects of `schema`; null too when the object itself may be null."""
        ref = schema.get("$ref")
        if isinstance(ref, str):
            self.open_refs.append(ref)
        try:
            found = self._field(schema, name)
        finally:
            if isinstance(ref, str):
                self.open_refs.pop()
        return _nullable(found) if _may_be_null(self.deref(schema)) else found

    def _field(self, schema: dict[str, Any], name: str) -> dict[str, Any]:
        s = self.deref(schema)
        if not s:
            return ANY
        for key in ("anyOf", "oneOf", "allOf"):
            if key in s and isinstance(s[key], list):
                found = [self.field(p, name) for p in s[key] if self._has_field(p, name, set(self.open_refs))]
                if not found and not self._open(s):
                    self._missing(name, s)
                if not found:
                    return ANY
                if key == "allOf":
                    return found[0] if len(found) == 1 else _nullable({"anyOf": found})
                found = [f for i, f in enumerate(found) if f not in found[:i]]
                merged = found[0] if len(found) == 1 else {"anyOf": found}
                # a branch without the field (an array, another object) gives null
                return _nullable(merged) if len(found) < len(s[key]) else merged
        props = s.get("properties")
        if isinstance(props, dict) and name in props:
            value = props[name]
            required = name in (s.get("required") or [])
            return value if required else _nullable(value)
        if isinstance(s.get("additionalProperties"), dict):
            return _nullable(s["additionalProperties"])
        if props is not None and not self._open(s):
            self._missing(name, s)
        types = schema_types(s)
        if types and "object" not in types:
            raise ProjectionError(
                f"{self.what} asks for field {name!r} of a {'/'.join(sorted(types))} value in {self.expression!r}",
                hint="project arrays with [*] (e.g. items[*].name) before naming fields",
            )
        return ANY

    def _has_field(self, schema: Any, name: str, seen: set[str]) -> bool:
        """Whether `schema` or one of its union members names `name`. Each ref is looked into once:
        a polymorphic base and its subtypes refer to each other (Pet: oneOf [Cat], Cat: allOf [Pet])."""
        if not self._first_visit(schema, seen):
            return False
        s = self.deref(schema)
        props = s.get("properties")
        if isinstance(props, dict) and name in props:
            return True
        return any(self._has_field(p, name, seen) for k in ("anyOf", "oneOf", "allOf") for p in s.get(k) or [])

    def _all_props(self, schema: Any, seen: set[str]) -> set[str]:
        """The property names of `schema` and its union members (each ref looked into once)."""
        if not self._first_visit(schema, seen):
            return set()
        s = self.deref(schema)
        out = set((s.get("properties") or {}).keys())
        for key in ("anyOf", "oneOf", "allOf"):
            for part in s.get(key) or []:
                out |= self._all_props(part, seen)
        return out

    @staticmethod
    def _first_visit(schema: Any, seen: set[str]) -> bool:
        ref = schema.get("$ref") if isinstance(schema, dict) else None
        if not isinstance(ref, str):
            return True
        if ref in seen:
            return False
        seen.add(ref)
        return True

    def _open(self, s: dict[str, Any]) -> bool:
        return isinstance(s.get("additionalProperties"), dict) or bool(s.get("patternProperties"))

    def _missing(self, name: str, s: dict[str, Any]) -> None:
        known = sorted(self._all_props(s, set(self.open_refs)))
        hint = did_you_mean(name, known)
        owner = "the response schema"
        if self.context:
            owner = f"`{'.'.join(self.trail)}`" if self.trail else "the chain (only $inputs and $steps exist)"
        raise ProjectionError(
            f"{self.what} names field {name!r}, which {owner} does not have" + (f"; {hint}" if hint else ""),
            hint=f"fields here: {', '.join(known[:30])}" if known else None,
        )

    def items(self, schema: dict[str, Any]) -> dict[str, Any]:
        s = self.deref(schema)
        if not s:
            return ANY
        types = schema_types(s)
        if types and "array" not in types:
            raise ProjectionError(
                f"{self.what} in {self.expression!r} indexes or projects a {'/'.join(sorted(types))} value as an array",
                hint="use [*] or [0] only on array fields",
            )
        for key in ("anyOf", "oneOf"):
            if isinstance(s.get(key), list):
                parts = [self.deref(p) for p in s[key]]
                arrays = [p for p in parts if "array" in schema_types(p) or not schema_types(p)]
                if not arrays:
                    return self.items(parts[0]) if parts else ANY  # raises: none is an array
                found: list[dict[str, Any]] = []
                for part in arrays:
                    item = part.get("items")
                    found.append(item if isinstance(item, dict) else ANY)
                return ANY if ANY in found else (found[0] if len(found) == 1 else {"anyOf": found})
        items = s.get("items")
        return items if isinstance(items, dict) else ANY

    def maybe_not_array(self, schema: dict[str, Any]) -> bool:
        """A union with a non-array member: projecting it may give null."""
        s = self.deref(schema)
        for key in ("anyOf", "oneOf"):
            if isinstance(s.get(key), list):
                return any(schema_types(self.deref(p)) and "array" not in schema_types(self.deref(p)) for p in s[key])
        return False


def _or_null(result: dict[str, Any], source: dict[str, Any]) -> dict[str, Any]:
    """JMESPath gives null for a projection or multi-select of null: say so when `source` may be null."""
    return _nullable(result) if _may_be_null(source) else result


def _may_be_null(schema: dict[str, Any]) -> bool:
    t = schema.get("type")
    if isinstance(t, list) and "null" in t:
        return True
    return any(isinstance(x, dict) and x.get("type") == "null" for x in schema.get("anyOf") or [])


def _array(items: dict[str, Any]) -> dict[str, Any]:
    return {"type": "array", "items": items} if items else {"type": "array"}


def _nullable(schema: dict[str, Any]) -> dict[str, Any]:
    if not schema:
        return schema
    if "const" in schema:
        return {"anyOf": [schema, {"type": "null"}]}
    if isinstance(schema.get("enum"), list) and None not in schema["enum"]:
        schema = {**schema, "enum": [*schema["enum"], None]}  # output schemas keep the spec's enums
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
