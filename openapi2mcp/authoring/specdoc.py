"""The spec's own words about its operations: the one reader of the document for init, lint and diff.

The Manifest keeps what the runtime needs; the authoring commands also want what the API says:
tags, summaries, deprecation, the parameters an overlay hid, the success response's schema and
headers, the arguments (parameters and JSON body properties). The loaded document is bundled (only internal `#/...`
refs are left; Swagger 2.0 is converted to OpenAPI 3.0), so following refs is all it takes.

`SpecDoc` never raises on what a real spec gets wrong: a dangling ref reads as nothing (the
loader warned already), a chain of refs that comes back on itself ends after `MAX_HOPS`, a schema
that contains itself is looked into `MAX_DEPTH` levels deep and counted once per path, YAML's
integer status keys (`200:`) read as strings.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

MAX_HOPS = 32  # a $ref chain longer than this is a cycle
MAX_DEPTH = 8  # levels of allOf/anyOf/oneOf looked into
HTTP_METHODS = ("get", "put", "post", "delete", "options", "head", "patch", "trace")  # a path item's order


def is_json(media: str) -> bool:
    """A media type whose schema describes a JSON body, as the compiler reads it: application/json, any
    `+json` type, or `*/*` (what a converted Swagger 2.0 `produces: ["*/*"]` gives: Kubernetes)."""
    base = media.split(";")[0].strip().lower()
    return base in ("application/json", "*/*") or base.endswith("+json")


@dataclass
class Arg:
    """One argument of an operation: init's as the raw conversion names it (facts.py), lint's as the spec does."""

    name: str  # the argument name (what `params`, `when` and `units` are keyed by)
    wire: str  # the spec's name
    location: str  # path, query, header, cookie or body
    required: bool
    schema: dict[str, Any]


@dataclass(frozen=True)
class SpecOperation:
    """One operation as the spec writes it, its path-level parameters merged in, refs resolved."""

    id: str  # the compiler's id when the caller knows it, else the operationId (or "METHOD /path")
    method: str  # upper case
    path: str
    node: dict[str, Any]
    params: list[dict[str, Any]] = field(default_factory=list)

    @property
    def key(self) -> str:
        return f"{self.method} {self.path}"

    @property
    def summary(self) -> str:
        """The summary and the description, as one text (what a tool without words of its own says)."""
        parts = [self.node.get(k) for k in ("summary", "description")]
        return "\n\n".join(p.strip() for p in parts if isinstance(p, str) and p.strip())


@dataclass(frozen=True)
class Success:
    """The main success response (200, else the lowest 2xx): its status, JSON schema and headers."""

    status: str | None
    schema: dict[str, Any] | None  # refs resolved at the top; None: no JSON body documented
    headers: list[str] = field(default_factory=list)  # as the spec spells them


class SpecDoc:
    """A loaded (bundled, OpenAPI 3.x) document, its internal `$ref`s followed."""

    def __init__(self, document: dict[str, Any]) -> None:
        self.document = document

    # ------------------------------------------------------------------ refs and schemas

    def pointer(self, ref: str) -> Any:
        """What an internal ref points at (None: nothing, or not an internal ref)."""
        if not ref.startswith("#"):
            return None
        node: Any = self.document
        for raw in ref[1:].split("/")[1:]:
            part = raw.replace("~1", "/").replace("~0", "~")
            if isinstance(node, dict) and part in node:
                node = node[part]
            elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
                node = node[int(part)]
            else:
                return None
        return node

    def resolve(self, node: Any) -> Any:
        """`node` with its `$ref`s followed (None: a dangling ref, or a chain that comes back on itself)."""
        for _ in range(MAX_HOPS):
            ref = node.get("$ref") if isinstance(node, dict) else None
            if not isinstance(ref, str):
                return node
            node = self.pointer(ref)
        return None

    def variants(self, schema: Any, depth: int = 0) -> list[dict[str, Any]]:
        """The schema and the members it combines (allOf, anyOf, oneOf), refs resolved, nulls left out."""
        schema = self.resolve(schema)
        if not isinstance(schema, dict) or depth > MAX_DEPTH:
            return []
        out = [schema]
        for key in ("allOf", "anyOf", "oneOf"):
            for member in schema.get(key) or []:
                out.extend(self.variants(member, depth + 1))
        return [s for s in out if s.get("type") != "null"]

    def properties(self, schema: Any) -> dict[str, dict[str, Any]]:
        """Every property the schema (or a member it combines) declares, first declaration wins."""
        out: dict[str, dict[str, Any]] = {}
        for member in self.variants(schema):
            props = member.get("properties")
            if isinstance(props, dict):
                for name, sub in props.items():
                    resolved = self.resolve(sub)
                    if isinstance(name, str) and isinstance(resolved, dict):
                        out.setdefault(name, resolved)
        return out

    def types(self, schema: Any) -> set[str]:
        """The JSON types a schema allows (through refs and combinations); empty when it does not say."""
        out: set[str] = set()
        for member in self.variants(schema):
            kind = member.get("type")
            if isinstance(kind, str):
                out.add(kind)
            elif isinstance(kind, list):
                out.update(k for k in kind if isinstance(k, str))
            elif "properties" in member:
                out.add("object")
            elif "items" in member:
                out.add("array")
        out.discard("null")
        return out

    def items(self, schema: Any) -> dict[str, Any] | None:
        """The item schema of an array schema."""
        for member in self.variants(schema):
            if "items" in member:
                item = self.resolve(member["items"])
                return item if isinstance(item, dict) else None
        return None

    # ------------------------------------------------------------------ operations

    def operations(self) -> Iterator[SpecOperation]:
        """Every operation of the document, in spec order (paths, then a path item's methods in HTTP_METHODS order)."""
        paths = self.document.get("paths")
        for path, raw in (paths if isinstance(paths, dict) else {}).items():
            item = self.resolve(raw)
            if not isinstance(item, dict):
                continue
            for method in HTTP_METHODS:
                node = self.resolve(item.get(method))
                if isinstance(node, dict):
                    op_id = node.get("operationId")
                    key = f"{method.upper()} {path}"
                    yield self._operation(str(op_id) if isinstance(op_id, str) else key, method, str(path), item, node)

    def operation(self, method: str, path: str, op_id: str) -> SpecOperation | None:
        """The operation at `METHOD path` (None: the document has none there)."""
        paths = self.document.get("paths")
        item = self.resolve(paths.get(path)) if isinstance(paths, dict) else None
        node = self.resolve(item.get(method.lower())) if isinstance(item, dict) else None
        if not isinstance(item, dict) or not isinstance(node, dict):
            return None
        return self._operation(op_id, method, path, item, node)

    def _operation(self, op_id: str, method: str, path: str, item: dict[str, Any],
                   node: dict[str, Any]) -> SpecOperation:
        merged: dict[tuple[Any, Any], dict[str, Any]] = {}
        for raw in [*(item.get("parameters") or []), *(node.get("parameters") or [])]:
            p = self.resolve(raw)
            if isinstance(p, dict):
                merged[(p.get("in"), p.get("name"))] = p  # the operation's own overrides the path's
        return SpecOperation(id=op_id, method=method.upper(), path=path, node=node, params=list(merged.values()))

    def success(self, op: SpecOperation) -> Success:
        """The main success response as the compiler picks it: 200, else the lowest other 2xx whose response
        resolves; its JSON schema and headers."""
        responses = op.node.get("responses")
        if not isinstance(responses, dict):
            return Success(None, None)
        codes: dict[str, Any] = {}
        for c in responses:
            codes.setdefault(str(c), c)  # YAML keys `200:` as an integer
        for status in sorted((c for c in codes if c.startswith("2")), key=lambda c: (c != "200", c)):
            response = self.resolve(responses[codes[status]])
            if isinstance(response, dict):
                headers = [h for h in (response.get("headers") or {}) if isinstance(h, str)]
                return Success(status, self._json_schema(response), headers)
        return Success(None, None)

    def _json_schema(self, holder: dict[str, Any]) -> dict[str, Any] | None:
        """The schema of a response's or request body's first JSON media type (None: none documented)."""
        content = holder.get("content")
        for media, entry in (content if isinstance(content, dict) else {}).items():
            if is_json(str(media)) and isinstance(entry, dict):
                schema = self.resolve(entry.get("schema"))
                return schema if isinstance(schema, dict) else None
        return None

    def arguments(self, op: SpecOperation) -> dict[str, Arg]:
        """The operation's parameters and its JSON body's top-level properties, by the spec's names."""
        out: dict[str, Arg] = {}
        for p in op.params:
            name, schema = p.get("name"), self.resolve(p.get("schema"))
            if isinstance(name, str) and isinstance(p.get("in"), str):
                out.setdefault(name, Arg(name, name, str(p["in"]), p.get("required") is True,
                                         schema if isinstance(schema, dict) else {}))
        body = self.resolve(op.node.get("requestBody"))
        schema = self._json_schema(body) if isinstance(body, dict) else None
        listed = schema.get("required") if schema is not None else None
        required = {r for r in listed if isinstance(r, str)} if isinstance(listed, list) else set()
        for name, sub in self.properties(schema).items():
            out.setdefault(name, Arg(name, name, "body", name in required, sub))
        return out

    # ------------------------------------------------------------------ sizes

    def structure_size(self, schema: Any, cap: int, max_depth: int = 12) -> int:
        """Bytes of the schema's structure (types, properties, items; no prose, examples or defaults), its refs
        inlined: how much data a response of this schema carries. Counting stops past `cap`."""
        total = 0

        def walk(node: Any, depth: int, seen: frozenset[str]) -> None:
            nonlocal total
            if total > cap or depth > max_depth:
                return
            if isinstance(node, list):
                for item in node:
                    walk(item, depth, seen)
                return
            if not isinstance(node, dict):
                total += len(json.dumps(node, default=str))
                return
            ref = node.get("$ref")
            if isinstance(ref, str):
                if ref not in seen:  # a recursive schema counts once per path
                    target = self.pointer(ref)
                    walk({} if target is None else target, depth, seen | {ref})
                return
            for key, value in node.items():
                if key not in _STRUCTURE:
                    continue
                if key == "properties" and isinstance(value, dict):
                    for name, sub in value.items():
                        total += len(name) + 4
                        walk(sub, depth + 1, seen)
                else:
                    total += len(key) + 4
                    walk(value, depth + (key in ("items", "additionalProperties")), seen)

        walk(schema, 0, frozenset())
        return total


_STRUCTURE = frozenset({"type", "properties", "items", "additionalProperties", "allOf", "anyOf", "oneOf",
                        "required", "enum", "format", "nullable", "$ref"})
