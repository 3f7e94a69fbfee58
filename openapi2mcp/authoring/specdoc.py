"""The spec's own words about one operation, for the authoring checks.

The Manifest keeps what the runtime needs; lint also wants what the API says: the parameters the
overlay hid, the success response's schema, the summaries. The loaded document is bundled (only
internal `#/...` refs are left), so a small resolver is all it takes.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

_MAX_HOPS = 32  # a $ref chain longer than this is a cycle


def resolve(document: dict[str, Any], node: Any) -> Any:
    """`node` with internal `$ref`s followed (an unresolvable one: `{}`, the spec warned already)."""
    for _ in range(_MAX_HOPS):
        ref = node.get("$ref") if isinstance(node, dict) else None
        if not isinstance(ref, str):
            return node
        node = pointer(document, ref)
    return {}


def pointer(document: dict[str, Any], ref: str) -> Any:
    if not ref.startswith("#"):
        return {}
    node: Any = document
    for raw in ref[1:].split("/")[1:]:
        part = raw.replace("~1", "/").replace("~0", "~")
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            return {}
    return node


@dataclass(frozen=True)
class SpecOperation:
    """One operation as the spec writes it, its path-level parameters merged in, refs resolved."""

    id: str
    method: str
    path: str
    node: dict[str, Any]
    params: list[dict[str, Any]] = field(default_factory=list)

    @property
    def key(self) -> str:
        return f"{self.method} {self.path}"

    @property
    def summary(self) -> str:
        parts = [self.node.get(k) for k in ("summary", "description")]
        return "\n\n".join(p.strip() for p in parts if isinstance(p, str) and p.strip())


def find_operation(document: dict[str, Any], method: str, path: str, op_id: str) -> SpecOperation | None:
    item = resolve(document, (document.get("paths") or {}).get(path))
    node = resolve(document, item.get(method.lower())) if isinstance(item, dict) else None
    if not isinstance(node, dict):
        return None
    merged: dict[tuple[Any, Any], dict[str, Any]] = {}
    for raw in [*(item.get("parameters") or []), *(node.get("parameters") or [])]:
        p = resolve(document, raw)
        if isinstance(p, dict):
            merged[(p.get("in"), p.get("name"))] = p
    return SpecOperation(id=op_id, method=method.upper(), path=path, node=node, params=list(merged.values()))


def _responses(op: SpecOperation) -> dict[str, Any]:
    found = op.node.get("responses")
    return found if isinstance(found, dict) else {}


def success_schema(document: dict[str, Any], op: SpecOperation) -> dict[str, Any] | None:
    """The JSON schema of the first documented 2xx response (None: no JSON body documented)."""
    responses = _responses(op)
    for status in sorted(responses, key=str):
        if not str(status).startswith("2") and str(status).upper() != "2XX":
            continue
        response = resolve(document, responses[status])
        content = response.get("content") if isinstance(response, dict) else None
        for media, body in (content or {}).items():
            if "json" in str(media) and isinstance(body, dict) and isinstance(body.get("schema"), dict):
                return resolve(document, body["schema"])  # type: ignore[no-any-return]
    return None


def success_headers(document: dict[str, Any], op: SpecOperation) -> set[str]:
    """The (lower-case) names of the headers the 2xx responses document."""
    out: set[str] = set()
    responses = _responses(op)
    for status, raw in responses.items():
        response = resolve(document, raw) if str(status).startswith("2") else None
        if isinstance(response, dict) and isinstance(response.get("headers"), dict):
            out.update(str(h).lower() for h in response["headers"])
    return out


def body_properties(document: dict[str, Any], op: SpecOperation) -> dict[str, Any]:
    """The top-level properties of the JSON request body's schema ({} without one)."""
    body = resolve(document, op.node.get("requestBody"))
    content = body.get("content") if isinstance(body, dict) else None
    for media, entry in (content or {}).items():
        if "json" in str(media) and isinstance(entry, dict):
            schema = resolve(document, entry.get("schema"))
            props = schema.get("properties") if isinstance(schema, dict) else None
            return props if isinstance(props, dict) else {}
    return {}


_STRUCTURE = frozenset({"type", "properties", "items", "additionalProperties", "allOf", "anyOf", "oneOf",
                        "required", "enum", "format", "nullable", "$ref"})


def structure_size(document: dict[str, Any], schema: Any, cap: int, max_depth: int = 12) -> int:
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
                walk(pointer(document, ref), depth, seen | {ref})
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
