"""Compile stage, part: OpenAPI Schema Objects -> self-contained JSON Schema 2020-12 for MCP.

MCP tool schemas must stand alone (no references into the spec), so references are resolved
here, lazily, per tool. Three decisions keep this fast and finite on big real specs:

* A reference is inlined unless its target takes part in a reference cycle (Tarjan's SCCs over
  the reference graph, discovered lazily). Cycle members become `$defs` entries, so a recursive
  schema (Stripe, Kubernetes, GitHub) is a finite `$ref`, never an infinite expansion.
* Because of that rule, the conversion of any reference target is context-free, so it is done
  once per (target, mode) and shared: 1,223 GitHub operations reuse the same few hundred
  converted components.
* Inputs and outputs are converted differently. Inputs keep every constraint (the server
  validates arguments before anything is sent) but lose readOnly properties. Outputs keep the
  spec's own assertions too (enum, pattern, format, bounds, additionalProperties: false; that is
  what `response.validate: strict` checks) but lose writeOnly properties and annotations the
  model does not need (default, examples, title). `tolerant()` then derives the default output
  contract from such a schema: the spec's structure and types, null accepted everywhere, none of
  the assertions real upstreams break (see docs/compile.md, "Output schemas: what the model can
  rely on"). Everywhere, `oneOf` becomes `anyOf`: overlapping branches are common in real specs
  and would make valid data fail "exactly one".

OpenAPI 3.0 specifics are translated: `nullable`, boolean `exclusiveMinimum/Maximum`,
`example` -> `examples`; OpenAPI-only keywords (discriminator, xml, externalDocs, x-*) dropped.
"""

from __future__ import annotations

import functools
import re
import warnings
from collections import deque
from collections.abc import Iterator
from typing import Any, Literal
from urllib.parse import unquote

Mode = Literal["input", "output"]

# Schemas inside each other in one converted schema (properties, items, anyOf members and inlined
# references all count). Real specs stay far below (OpenAI's deepest is 25); deeper ones would pass
# the 255 levels that pydantic (the Manifest, the MCP SDK) can serialise, with `default`s inside.
MAX_SCHEMA_NESTING = 64

# Keywords that constrain values: kept for inputs and (strict) outputs, dropped by `tolerant()`.
_VALUE_CONSTRAINTS = frozenset({
    "enum", "const", "pattern", "format", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum",
    "multipleOf", "minLength", "maxLength", "minItems", "maxItems", "uniqueItems", "minProperties",
    "maxProperties",
})
# Annotations an output schema does without (the model reads results, it does not write them).
_INPUT_ANNOTATIONS = frozenset({"default", "examples", "title", "contentEncoding", "contentMediaType"})
_SUBSCHEMA_LISTS = ("allOf", "anyOf", "prefixItems")
_SUBSCHEMA_ONE = ("items", "not", "contains", "additionalItems", "if", "then", "else", "propertyNames",
                  "unevaluatedItems", "unevaluatedProperties")
_SUBSCHEMA_MAPS = ("properties", "patternProperties", "dependentSchemas")
_MAPS_AND_DEFS = (*_SUBSCHEMA_MAPS, "$defs")
_PLAIN_KEYWORDS = frozenset({
    "type", "description", "required", "deprecated", "dependentRequired", "$comment",
}) | _VALUE_CONSTRAINTS | _INPUT_ANNOTATIONS
_DROPPED = frozenset({"discriminator", "xml", "externalDocs", "example", "nullable", "readOnly", "writeOnly",
                      "$schema", "$id", "$anchor", "$dynamicAnchor", "$dynamicRef", "$defs", "definitions"})


class SchemaError(Exception):
    """A reference that cannot be resolved (carries the JSON pointer)."""

    def __init__(self, message: str, pointer: str) -> None:
        self.pointer = pointer
        super().__init__(message)


class SchemaConverter:
    """Converts schemas of one spec document; caches what it converts. Not thread-safe."""

    def __init__(self, document: dict[str, Any], *, openapi31: bool, description_limit: int = 400,
                 output_description_limit: int = 300) -> None:
        self.doc = document
        self.openapi31 = openapi31
        self.description_limit = description_limit
        self.output_description_limit = output_description_limit
        self._targets: dict[str, Any] = {}
        self._edges: dict[str, list[str]] = {}
        self._reachable: dict[str, list[str]] = {}  # see _reachable_cyclic
        self._cyclic: set[str] = set()
        self._scc_done: set[str] = set()
        self._memo: dict[tuple[str, Mode, int | None], dict[str, Any]] = {}
        self._expanding: set[tuple[str, Mode, int | None]] = set()  # depth-limited expansions under way
        self._def_names: dict[str, str] = {}
        self._tolerant: dict[int, tuple[Any, dict[str, Any]]] = {}  # id(strict node) -> (it, tolerant node)
        self._costs: Costs = {}  # see limit_size
        self._level = 0  # schemas inside each other in the conversion under way (see MAX_SCHEMA_NESTING)

    # ------------------------------------------------------------------ public

    def convert(self, schema: Any, mode: Mode, max_depth: int | None = None) -> dict[str, Any]:
        """A standalone JSON Schema (with `$defs` for recursive parts) for an OpenAPI schema.

        With `max_depth`, objects and arrays nested deeper than that keep their type and
        description but not their contents ("any object"); references, recursive ones included,
        are then inlined, since depth already bounds them. The returned schema may be shared with
        other results: copy before changing it.
        """
        needed: list[str] = []
        out = self._node(schema, mode, needed, max_depth)
        return {**out, "$defs": self._defs(needed, mode)} if needed else out

    def tolerant(self, schema: dict[str, Any], *, root: bool = True) -> dict[str, Any]:
        """`tolerant(schema)`, sharing the work on the subschemas converted schemas share."""
        return tolerant(schema, root=root, memo=self._tolerant)

    def limit_size(self, schema: dict[str, Any], budget: int) -> dict[str, Any]:
        """`limit_size(schema, budget)`, costing each subschema converted schemas share once."""
        return limit_size(schema, budget, costs=self._costs)

    def resolve(self, node: Any, pointer: str = "") -> Any:
        """Follow `$ref`s (internal, chained) to the node they name."""
        seen: set[str] = set()
        while isinstance(node, dict) and isinstance(node.get("$ref"), str):
            ref = node["$ref"]
            if ref in seen:
                raise SchemaError(f"reference cycle through {ref}", pointer)
            seen.add(ref)
            node = self.target(ref, pointer)
        return node

    def target(self, ref: str, pointer: str = "") -> Any:
        """The node an internal reference (#/a/b) points to."""
        if ref in self._targets:
            return self._targets[ref]
        if not ref.startswith("#"):
            raise SchemaError(f"unresolved external reference {ref!r}", pointer)
        node: Any = self.doc
        for raw in ref[1:].split("/")[1:] if ref != "#" else []:
            part = unquote(raw).replace("~1", "/").replace("~0", "~")  # RFC 6901 6: a URI fragment is decoded first
            if isinstance(node, dict) and part in node:
                node = node[part]
            elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
                node = node[int(part)]
            else:
                raise SchemaError(f"reference {ref!r} points to nothing", pointer)
        self._targets[ref] = node
        return node

    # ------------------------------------------------------------------ conversion

    def _node(self, node: Any, mode: Mode, needed: list[str], depth: int | None) -> dict[str, Any]:
        if isinstance(node, bool):  # 3.1 boolean schemas: always a dict downstream
            return {} if node else {"not": {}}
        if not isinstance(node, dict):
            return {}
        if self._level >= MAX_SCHEMA_NESTING:
            # a chain of inlined references nests without limit in few bytes of spec (and the
            # walk is recursive); the caller replaces the whole schema and warns
            raise SchemaError(f"the schema nests more than {MAX_SCHEMA_NESTING} schemas deep", "")
        self._level += 1
        try:
            ref = node.get("$ref")
            if isinstance(ref, str):
                return self._ref(node, ref, mode, needed, depth)
            return self._object(node, mode, needed, depth)
        finally:
            self._level -= 1

    def _ref(
        self, node: dict[str, Any], ref: str, mode: Mode, needed: list[str], depth: int | None
    ) -> dict[str, Any]:
        if not ref.startswith("#"):
            return {"description": f"(unresolved reference {ref})"}
        if depth is None and self._is_cyclic(ref):
            if ref not in needed:
                needed.append(ref)
            out: dict[str, Any] = {"$ref": "#/$defs/" + self._def_name(ref)}
        elif depth is not None and (ref, mode, depth) in self._expanding:
            # a cycle that never nests an object (through items or anyOf): depth cannot end it
            out = {}
        else:
            key = (ref, mode, depth)
            if key not in self._memo:
                target = self.target(ref)
                self._expanding.add(key)
                try:
                    self._memo[key] = self._node(target, mode, needed, depth)
                finally:
                    self._expanding.discard(key)
            elif depth is None:
                self._collect_needed(ref, needed)
            out = self._memo[key]
        siblings = {k: v for k, v in node.items() if k != "$ref"}
        if siblings:
            extra = self._object(siblings, mode, needed, depth)
            if extra:
                out = {**out, **extra} if "$ref" not in out else {"allOf": [out], **extra}
        return out

    def _collect_needed(self, ref: str, needed: list[str]) -> None:
        """A memoised inline conversion may reference $defs: re-collect them for this tool."""
        for r in self._reachable_cyclic(ref):
            if r not in needed:
                needed.append(r)

    def _reachable_cyclic(self, ref: str) -> list[str]:
        """The cyclic refs reachable from `ref` without passing through one (the graph is fixed: memoised)."""
        if ref not in self._reachable:
            self._reachable[ref] = self._walk_reachable_cyclic(ref)
        return self._reachable[ref]

    def _walk_reachable_cyclic(self, ref: str) -> list[str]:
        out: list[str] = []
        stack, seen = [ref], {ref}
        while stack:
            r = stack.pop()
            for nxt in self._refs_of(r):
                if nxt in seen:
                    continue
                seen.add(nxt)
                if self._is_cyclic(nxt):
                    out.append(nxt)
                else:
                    stack.append(nxt)
        return out

    def _object(self, node: dict[str, Any], mode: Mode, needed: list[str], depth: int | None) -> dict[str, Any]:
        out: dict[str, Any] = {}
        inner = None if depth is None else depth - 1  # one level down: properties, items, ...
        for key, value in node.items():
            if key in _DROPPED or key.startswith("x-"):
                continue
            if depth is not None and depth <= 0 and key in _NESTING:
                continue  # too deep: keep the type, not the contents
            if key in _SUBSCHEMA_MAPS and isinstance(value, dict):
                props = {}
                for name, sub in value.items():
                    if key == "properties" and self._hidden_in(sub, mode):
                        continue
                    props[name] = self._node(sub, mode, needed, inner)
                out[key] = props
            elif key in _SUBSCHEMA_LISTS and isinstance(value, list):
                out[key] = [self._node(s, mode, needed, depth) for s in value]
            elif key == "oneOf" and isinstance(value, list):
                out["anyOf"] = [self._node(s, mode, needed, depth) for s in value]
            elif key in _SUBSCHEMA_ONE:
                level = depth  # an array's items are as deep as the array: a list of X reads as X
                if isinstance(value, list):  # draft-04 tuple items
                    out["prefixItems"] = [self._node(s, mode, needed, depth) for s in value]
                else:
                    out[key] = self._node(value, mode, needed, level)
            elif key == "additionalProperties":
                if isinstance(value, bool):
                    if not value:
                        out[key] = False
                else:
                    out[key] = self._node(value, mode, needed, inner)
            elif key == "required" and isinstance(value, list):
                # real specs repeat names (OpenAI) or put non-strings there; 2020-12 forbids both
                out[key] = list(dict.fromkeys(v for v in value if isinstance(v, str)))
            elif key in _PLAIN_KEYWORDS:
                if mode == "output" and key in _INPUT_ANNOTATIONS:
                    continue
                if _valid_keyword(key, value):  # real specs carry `pattern: 0`, `minLength: "5"`...
                    out[key] = value
        self._fix_keywords(node, out, mode)
        if "required" in out and "properties" in out:
            hidden = [n for n, s in node.get("properties", {}).items() if self._hidden_in(s, mode)]
            if hidden:
                out["required"] = [r for r in out["required"] if r not in hidden]
        if "required" in out and not out["required"]:
            del out["required"]
        if "allOf" in out:
            # `additionalProperties: false` inside allOf members rejects the other members' properties
            out["allOf"] = [_without_closed(s) for s in out["allOf"]]
        return _inline_single_all_of(out)

    def _fix_keywords(self, node: dict[str, Any], out: dict[str, Any], mode: Mode) -> None:
        """OpenAPI 3.0 dialect -> JSON Schema 2020-12, descriptions trimmed."""
        if not self.openapi31:
            for bound, limit in (("exclusiveMinimum", "minimum"), ("exclusiveMaximum", "maximum")):
                flag = node.get(bound)
                if isinstance(flag, bool):
                    out.pop(bound, None)
                    if flag and limit in node:
                        out[bound] = node[limit]
                        out.pop(limit, None)
            if "example" in node and mode == "input" and "examples" not in out:
                out["examples"] = [node["example"]]
        if isinstance(out.get("examples"), dict):  # OpenAPI-style examples map is not JSON Schema
            del out["examples"]
        if isinstance(out.get("type"), str) and out["type"] not in _JSON_TYPES:
            del out["type"]  # e.g. Swagger's "file" that slipped through
        elif isinstance(out.get("type"), list):
            kept = [t for t in dict.fromkeys(out["type"]) if t in _JSON_TYPES]
            if kept:
                out["type"] = kept
            else:
                del out["type"]
        if mode == "input":
            _format_bounds(out)
        desc = out.get("description")
        if isinstance(desc, str):
            size = self.description_limit if mode == "input" else self.output_description_limit
            out["description"] = trim(desc, size)
        elif "description" in out:
            del out["description"]
        if node.get("nullable") is True and not self.openapi31:
            _make_nullable(out)

    def _hidden_in(self, sub: Any, mode: Mode) -> bool:
        """readOnly properties are not sent; writeOnly ones are never returned."""
        try:
            target = self.resolve(sub) if isinstance(sub, dict) and "$ref" in sub else sub
        except SchemaError:
            return False
        if not isinstance(target, dict):
            return False
        flag = "readOnly" if mode == "input" else "writeOnly"
        return bool(target.get(flag) is True or (isinstance(sub, dict) and sub.get(flag) is True))

    def _defs(self, needed: list[str], mode: Mode) -> dict[str, Any]:
        defs: dict[str, Any] = {}
        i = 0
        while i < len(needed):  # converting a def may need further defs
            ref = needed[i]
            name = self._def_name(ref)
            if name not in defs:
                key = (ref, mode, None)
                if key not in self._memo:
                    self._memo[key] = self._node(self.target(ref), mode, needed, None)
                else:
                    self._collect_needed(ref, needed)
                defs[name] = self._memo[key]
            i += 1
        return {k: defs[k] for k in sorted(defs)}

    def _def_name(self, ref: str) -> str:
        name = self._def_names.get(ref)
        if name is None:
            base = ref.rsplit("/", 1)[-1].replace("~1", "_").replace("~0", "_") or "def"
            base = "".join(c if c.isalnum() or c in "._-" else "_" for c in base)
            name, n = base, 2
            taken = set(self._def_names.values())
            while name in taken:
                name, n = f"{base}_{n}", n + 1
            self._def_names[ref] = name
        return name

    # ------------------------------------------------------------------ reference graph

    def _refs_of(self, ref: str) -> list[str]:
        """Internal references directly inside the target of `ref` (not following them)."""
        if ref not in self._edges:
            try:
                target = self.target(ref)
            except SchemaError:
                target = None
            self._edges[ref] = sorted(set(_direct_refs(target)))
        return self._edges[ref]

    def _is_cyclic(self, ref: str) -> bool:
        if ref not in self._scc_done:
            self._tarjan(ref)
        return ref in self._cyclic

    def _tarjan(self, root: str) -> None:
        """Iterative Tarjan from `root` over not-yet-classified references."""
        index: dict[str, int] = {}
        low: dict[str, int] = {}
        on_stack: set[str] = set()
        stack: list[str] = []
        counter = 0
        work: list[tuple[str, Iterator[str]]] = []

        def push(v: str) -> None:
            nonlocal counter
            index[v] = low[v] = counter
            counter += 1
            stack.append(v)
            on_stack.add(v)
            work.append((v, iter(self._refs_of(v))))

        push(root)
        while work:
            v, edges = work[-1]
            advanced = False
            for w in edges:
                if w in self._scc_done:
                    continue
                if w not in index:
                    push(w)
                    advanced = True
                    break
                if w in on_stack:
                    low[v] = min(low[v], index[w])
            if advanced:
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[v])
            if low[v] == index[v]:
                component = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    component.append(w)
                    if w == v:
                        break
                if len(component) > 1 or v in self._refs_of(v):
                    self._cyclic.update(component)
                self._scc_done.update(component)


_NESTING = frozenset({"properties", "patternProperties", "additionalProperties", "items", "prefixItems",
                      "additionalItems", "contains", "unevaluatedItems", "unevaluatedProperties", "required"})
_JSON_TYPES = frozenset({"string", "number", "integer", "boolean", "array", "object", "null"})


def ref_free_text(schema: Any) -> str | None:
    """A key that only equal JSON data shares (its repr: 5x cheaper than json.dumps on small data), for
    data whose conversion does not depend on where it stands: it refers to nothing (None: it may, or it
    holds something other than JSON data)."""
    text = repr(schema)
    return None if "'$ref'" in text or " at 0x" in text else text


def schema_types(schema: dict[str, Any]) -> set[str]:
    """The JSON types a schema names, without "null" (empty when it names none)."""
    t = schema.get("type")
    if isinstance(t, str):
        return {t}
    if isinstance(t, list):
        return {x for x in t if isinstance(x, str)} - {"null"}
    return set()


def has_ref(schema: Any) -> bool:
    """Whether a schema refers to a `$defs` entry anywhere (then it needs the root's `$defs` to stand alone)."""
    if isinstance(schema, dict):
        return "$ref" in schema or any(has_ref(v) for v in schema.values())
    if isinstance(schema, list):
        return any(has_ref(v) for v in schema)
    return False


def flat_object_schema(properties: dict[str, Any], required: list[str], defs: dict[str, Any]) -> dict[str, Any]:
    """A tool's input schema: one closed object (no top-level oneOf/anyOf), $defs sorted at the root."""
    out: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        out["required"] = required
    out["additionalProperties"] = False
    if defs:
        out["$defs"] = {k: defs[k] for k in sorted(defs)}
    return out


def _direct_refs(node: Any) -> Iterator[str]:
    stack = [node]
    while stack:
        n = stack.pop()
        if isinstance(n, dict):
            ref = n.get("$ref")
            if isinstance(ref, str) and ref.startswith("#"):
                yield ref
            for k, v in n.items():
                if k in ("example", "examples", "default", "enum", "const") or k.startswith("x-"):
                    continue
                if isinstance(v, dict | list):
                    stack.append(v)
        elif isinstance(n, list):
            stack.extend(v for v in n if isinstance(v, dict | list))


# OpenAPI's integer formats are ranges a server enforces (a 32-bit field refuses 2**31); JSON Schema
# validators do not know them, so arguments get them as bounds (the model sees them too).
_FORMAT_RANGES: dict[str, tuple[int, int]] = {
    "int8": (-(2**7), 2**7 - 1), "int16": (-(2**15), 2**15 - 1), "int32": (-(2**31), 2**31 - 1),
    "int64": (-(2**63), 2**63 - 1), "uint8": (0, 2**8 - 1), "uint16": (0, 2**16 - 1), "uint32": (0, 2**32 - 1),
    "uint64": (0, 2**64 - 1),
}


def _format_bounds(out: dict[str, Any]) -> None:
    fmt = out.get("format")
    found = _FORMAT_RANGES.get(fmt) if isinstance(fmt, str) else None
    if found is None or "integer" not in schema_types(out):
        return
    low, high = found
    for key, bound, tighter in (("minimum", low, max), ("maximum", high, min)):
        given = out.get(key)
        out[key] = tighter(given, bound) if isinstance(given, int | float) and not isinstance(given, bool) else bound


def _make_nullable(out: dict[str, Any]) -> None:
    t = out.get("type")
    if isinstance(t, str):
        out["type"] = [t, "null"]
    elif isinstance(t, list):
        if "null" not in t:
            out["type"] = [*t, "null"]
    elif any(k in out for k in ("allOf", "anyOf", "$ref")):
        inner = dict(out)
        out.clear()
        out["anyOf"] = [inner, {"type": "null"}]
        return
    if "enum" in out and None not in out["enum"]:
        out["enum"] = [*out["enum"], None]


# ----------------------------------------------------------------------------- tolerant output schemas

# Assertions real upstreams break (a new enum value, a longer string, a date without the time, an
# extra property, ...): the tolerant contract leaves them all out. Structure stays.
_DRIFTING = _VALUE_CONSTRAINTS | frozenset({
    "not", "if", "then", "else", "contains", "minContains", "maxContains", "propertyNames",
    "dependentRequired", "dependentSchemas", "unevaluatedItems", "unevaluatedProperties",
})
_ENUM_DOC_VALUES = 12  # longer enums are not spelt out in the description
_ENUM_DOC_CHARS = 200


def tolerant(
    schema: dict[str, Any], *, root: bool = True, memo: dict[int, tuple[Any, dict[str, Any]]] | None = None
) -> dict[str, Any]:
    """The default output contract derived from a (strict) output schema: what a model can rely on.

    The structure and types of the spec stay (properties, items, `required`, anyOf/allOf, `$defs`);
    every subschema but the root also accepts null; and none of the assertions real data breaks
    remain (`_DRIFTING`: enum, const, format, pattern, numeric and length ranges, min/maxItems,
    uniqueItems, `additionalProperties: false`, closed tuples, not/if/then/else, ...). An enum
    stays readable in the description ("One of: a, b."). `required` stays: the runtime repairs a
    result that leaves a required key out by setting it to null, so a model can rely on the key
    being there. The root is the result object itself (structured content is never null).

    A new schema is returned; `memo` (id -> (node, result)) shares the work on shared subschemas.
    """
    out: dict[str, Any] = _tolerant_node(schema, {} if memo is None else memo, nullable=not root)
    return out


def _tolerant_node(node: Any, memo: dict[int, tuple[Any, dict[str, Any]]], *, nullable: bool = True) -> Any:
    if not isinstance(node, dict):
        return {} if node is False else node  # `items: false` (a closed tuple) is an assertion too
    if nullable:
        hit = memo.get(id(node))
        if hit is not None and hit[0] is node:
            return hit[1]
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key in _DRIFTING or (key in ("additionalProperties", "items") and value is False):
            continue
        if key in ("properties", "patternProperties", "$defs") and isinstance(value, dict):
            out[key] = {name: _tolerant_node(sub, memo) for name, sub in value.items()}
        elif key in ("items", "additionalProperties") and isinstance(value, dict):
            out[key] = _tolerant_node(value, memo)
        elif key in ("anyOf", "oneOf", "allOf", "prefixItems") and isinstance(value, list):
            parts = [_tolerant_node(sub, memo) for sub in value]
            if key in ("anyOf", "oneOf"):
                # every member accepts null now: a `{type: null}` member says nothing more
                kept = [p for p in parts if not _only_null(p)]
                parts = kept or parts
                key = "anyOf"
            out[key] = parts
        else:
            out[key] = value
    documented = _enum_sentence(node)
    if documented:
        out["description"] = (str(out.get("description") or "") + " " + documented).strip()
    if nullable:
        t = out.get("type")
        if isinstance(t, str) and t != "null":
            out["type"] = [t, "null"]
        elif isinstance(t, list) and "null" not in t:
            out["type"] = [*t, "null"]
    out = _inline_single_all_of(_single_any_of(out))
    if nullable:
        memo[id(node)] = (node, out)
    return out


def _only_null(schema: Any) -> bool:
    return isinstance(schema, dict) and schema.get("type") in ("null", ["null"]) and \
        not (set(schema) - {"type", "description"})


def _enum_sentence(node: dict[str, Any]) -> str | None:
    """`One of: a, b.` for a short enum (or a const), so the values stay visible to the model."""
    values = node.get("enum") if isinstance(node.get("enum"), list) else [node["const"]] if "const" in node else None
    if not values or len(values) > _ENUM_DOC_VALUES:
        return None
    text = ", ".join(str(v) for v in values if v is not None)
    return f"One of: {text}." if text and len(text) <= _ENUM_DOC_CHARS else None


def _single_any_of(out: dict[str, Any]) -> dict[str, Any]:
    """`anyOf: [X]` (a nullable X once its null member is gone) -> X, with the outer annotations."""
    parts = out.get("anyOf")
    if not (isinstance(parts, list) and len(parts) == 1 and isinstance(parts[0], dict)):
        return out
    inner, rest = parts[0], {k: v for k, v in out.items() if k != "anyOf"}
    if set(inner) & set(rest) - {"description", "deprecated"}:
        return out
    return {**inner, **rest}


_NON_NEGATIVE = frozenset({"minLength", "maxLength", "minItems", "maxItems", "minProperties", "maxProperties"})
_NUMBERS = frozenset({"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"})


def _valid_keyword(key: str, value: Any) -> bool:
    """Whether a keyword's value is what JSON Schema allows; invalid ones are dropped, since a
    schema the metaschema rejects breaks validators and clients (a shape, not a contract)."""
    if key in _NON_NEGATIVE:
        return isinstance(value, int) and not isinstance(value, bool) and value >= 0
    if key in _NUMBERS:
        return isinstance(value, int | float) and not isinstance(value, bool)
    if key == "multipleOf":
        return isinstance(value, int | float) and not isinstance(value, bool) and value > 0
    if key == "pattern":
        return isinstance(value, str) and _valid_pattern(value)
    if key in ("format", "description", "title", "$comment", "contentEncoding", "contentMediaType"):
        return isinstance(value, str)
    if key in ("enum", "examples"):
        return isinstance(value, list)
    if key in ("uniqueItems", "deprecated"):
        return isinstance(value, bool)
    if key == "type":
        names = value if isinstance(value, list) else [value]
        return bool(names) and all(isinstance(n, str) for n in names)
    if key == "dependentRequired":
        return isinstance(value, dict) and all(isinstance(v, list) for v in value.values())
    return True


@functools.lru_cache(maxsize=4096)  # specs repeat their patterns (and the warnings filter is slow to set)
def _valid_pattern(pattern: str) -> bool:
    try:
        with warnings.catch_warnings():  # "possible nested set" FutureWarnings are not our users' business
            warnings.simplefilter("ignore")
            re.compile(pattern)
    except re.error:
        return False
    return True


def _inline_single_all_of(out: dict[str, Any]) -> dict[str, Any]:
    """`allOf: [X]` with siblings (the OpenAPI 3.0 way to describe a $ref) -> X merged in."""
    parts = out.get("allOf")
    if not (isinstance(parts, list) and len(parts) == 1 and isinstance(parts[0], dict)):
        return out
    inner = parts[0]
    rest = {k: v for k, v in out.items() if k != "allOf"}
    clash = set(inner) & set(rest) - {"description", "default", "examples", "title", "deprecated"}
    if clash or "$ref" in inner:
        return out
    return {**inner, **rest}  # the outer description and default win


def _without_closed(schema: Any) -> Any:
    if isinstance(schema, dict) and schema.get("additionalProperties") is False:
        return {k: v for k, v in schema.items() if k != "additionalProperties"}
    return schema


def trim(text: str, limit: int) -> str:
    """Shorten text to `limit` characters, at a sentence end when one is near."""
    text = text.strip()
    if len(text) <= limit:
        return text
    cut = text[: limit - 1]
    stop = max(cut.rfind(". "), cut.rfind("\n"))
    if stop > limit // 2:
        cut = cut[: stop + 1]
    return cut.rstrip() + "…"


def limit_depth(schema: Any, depth: int) -> Any:
    """A copy of a converted schema whose objects nested deeper than `depth` lose their contents.

    The same rule as `convert(max_depth=...)`, for schemas built from parts (projections).
    """
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if depth <= 0 and key in _NESTING:
            continue
        if key in ("properties", "patternProperties") and isinstance(value, dict):
            out[key] = {k: limit_depth(v, depth - 1) for k, v in value.items()}
        elif key == "additionalProperties":
            out[key] = limit_depth(value, depth - 1)
        elif key in ("items", "not", "contains") or key in ("if", "then", "else"):
            out[key] = limit_depth(value, depth)
        elif key in ("allOf", "anyOf", "oneOf", "prefixItems") and isinstance(value, list):
            out[key] = [limit_depth(v, depth) for v in value]
        else:
            out[key] = value
    return out


# What limit_size and _cost do with a keyword's value (one dict lookup per key: these loops visit
# every node of every tool schema, millions on the biggest specs)
_MAP, _LIST, _ONE = 1, 2, 3
_CHILDREN: dict[str, int] = {
    **dict.fromkeys(_MAPS_AND_DEFS, _MAP),
    **dict.fromkeys(("allOf", "anyOf", "oneOf", "prefixItems"), _LIST),
    **dict.fromkeys((*_SUBSCHEMA_ONE, "additionalProperties"), _ONE),
}


def limit_size(schema: dict[str, Any], budget: int, *, costs: Costs | None = None) -> dict[str, Any]:
    """A copy of `schema` of about `budget` bytes at most, spelt out shallowest first.

    Real request bodies can be enormous when inlined (a Kubernetes StatefulSet is ~200 KB of
    schema). Breadth-first, every argument and the first levels of each stay exact; once the
    budget is spent the subschemas still waiting are stubs: their type, format, enum or const
    and `$ref`, with their description while twice the budget is not spent, but no nested or
    composite parts. Past that, an optional property of an object open to other properties is
    left out (it is still accepted, unchecked); what cannot go (arguments, required properties,
    items, branches) stays a bare stub. So the server still type-checks the shallow parts, the
    upstream validates the rest, and the copy stays near the budget however wide the objects at
    its edge (Microsoft Graph's entities have hundreds of properties each). The copy only ever
    accepts more than the original. A schema within budget is returned unchanged (the same
    object). `costs` carries the cost of subschemas across calls (the converter's results share them).
    """
    if _cost(schema, {} if costs is None else costs) <= budget:
        return schema
    root: dict[str, Any] = {}
    queue: deque[_Pending] = deque([(schema, root, None, "")])
    spent, twice = 0, 2 * budget
    pop, put = queue.popleft, queue.append  # (the loop runs for every node of the copies: locals, inlined)
    while queue:
        src, dst, owner, name = pop()
        if spent > budget:
            if owner is not None and spent > twice:
                del owner[name]
                continue
            spent += _stub(src, dst, describe=spent <= twice)
            continue
        spent += _node_cost(src)
        for key, value in src.items():
            if spent > budget and key in _NESTING:
                continue
            kind = None if key in _WHOLE else _CHILDREN.get(key)
            if kind == _MAP and isinstance(value, dict):
                copied: dict[str, Any] = {}
                dst[key] = copied
                droppable = key == "properties" and dst is not root and _open(src)
                required = set(src.get("required") or ()) if droppable else set()
                for prop, sub in value.items():
                    if isinstance(sub, dict):
                        copy: dict[str, Any] = {}
                        copied[prop] = copy
                        put((sub, copy, copied if droppable and prop not in required else None, prop))
                    else:
                        copied[prop] = sub
            elif kind == _LIST and isinstance(value, list):
                dst[key] = [_enqueue(sub, queue) for sub in value]
            elif kind == _ONE:
                dst[key] = _enqueue(value, queue)
            else:
                dst[key] = value
    return root


# (the subschema, its copy, the map holding the copy if it may be left out, its name there)
_Pending = tuple[dict[str, Any], dict[str, Any], dict[str, Any] | None, str]


def _open(node: dict[str, Any]) -> bool:
    """Whether an object schema takes any value of a property it does not name (leaving one out loosens it)."""
    anything: tuple[Any, ...] = (True, {})
    return (node.get("additionalProperties", True) in anything and node.get("unevaluatedProperties", True) in anything
            and not node.get("patternProperties"))


def _enqueue(sub: Any, queue: deque[_Pending]) -> Any:
    if not isinstance(sub, dict):
        return sub
    copy: dict[str, Any] = {}
    queue.append((sub, copy, None, ""))
    return copy


# Kept whole: a looser stub under `not` or `if` would make the schema stricter, not looser.
_WHOLE = frozenset({"not", "if"})
# What a stub at the edge of a size-limited schema keeps: cheap and never stricter than the original.
_STUB_KEYWORDS = ("type", "format", "const", "$ref")
_STUB_ENUM_COST = 200


def _stub(src: dict[str, Any], dst: dict[str, Any], *, describe: bool) -> int:
    """Fill `dst` with the stub of `src`; returns what it costs."""
    for key in _STUB_KEYWORDS:
        if key in src:
            dst[key] = src[key]
    if "enum" in src and len(str(src["enum"])) <= _STUB_ENUM_COST:
        dst["enum"] = src["enum"]
    if describe and isinstance(src.get("description"), str):
        dst["description"] = src["description"]
    return _node_cost(dst)


def _node_cost(node: dict[str, Any]) -> int:
    """Roughly the bytes this subschema adds by itself (its text dominates)."""
    cost = 24 + len(str(node.get("description", "")))
    if "enum" in node:
        cost += len(str(node["enum"]))
    return cost


# id(subschema) -> (it, its cost): the subschema is held so that its id is not reused
Costs = dict[int, tuple[Any, int]]


def _cost(node: dict[str, Any], costs: Costs) -> int:
    """The whole schema's cost, shared parts counted each time they occur, each costed once.

    Recursive (3x faster than a stack of pending nodes): converted schemas nest at most
    MAX_SCHEMA_NESTING schemas deep.
    """
    key = id(node)
    hit = costs.get(key)
    if hit is not None:
        return hit[1]
    costs[key] = (node, 0)  # while its parts are costed: a (never expected) cycle back to it counts 0
    total = _node_cost(node)
    for word, value in node.items():
        kind = _CHILDREN.get(word)
        if kind == _MAP and isinstance(value, dict):
            total += sum([_cost(v, costs) for v in value.values() if isinstance(v, dict)])
        elif kind == _LIST and isinstance(value, list):
            total += sum([_cost(v, costs) for v in value if isinstance(v, dict)])
        elif kind == _ONE and isinstance(value, dict):
            total += _cost(value, costs)
    costs[key] = (node, total)
    return total


def walk_properties(schema: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """(name, property schema) for every named property at any depth (for units)."""
    stack: list[Any] = [schema]
    seen: set[int] = set()
    while stack:
        node = stack.pop()
        if not isinstance(node, dict) or id(node) in seen:
            continue
        seen.add(id(node))
        props = node.get("properties")
        if isinstance(props, dict):
            for name, sub in props.items():
                if isinstance(sub, dict):
                    yield name, sub
                    stack.append(sub)
        for key in ("items", "additionalProperties", "not"):
            if isinstance(node.get(key), dict):
                stack.append(node[key])
        for key in ("allOf", "anyOf", "oneOf", "prefixItems"):
            if isinstance(node.get(key), list):
                stack.extend(node[key])
        if isinstance(node.get("$defs"), dict):
            stack.extend(node["$defs"].values())
