"""What `init` knows about each operation: the spec's own words plus the arguments a model would see.

Two sources, each for what it is good at:

* the loaded document (an OpenAPI 3.x tree with internal `#/...` refs) for what the compiler does
  not keep: tags, summaries, deprecation, response headers, the success response's schema, the
  security requirements;
* the raw conversion (`compile_manifest(..., all_operations=True)`, one tool per operation) for
  the arguments exactly as the compiler names them (sanitised names, `body_<name>` for a body
  property that collides with a parameter, auth parameters removed), the operation id the
  compiler resolves (`operationId`, or `"METHOD /path"` for a missing or duplicate one) and the
  size of each raw tool, the baseline of the summary.

So the draft never guesses an argument name the compiler would not accept.
"""

from __future__ import annotations

import json
import re
import unicodedata
from dataclasses import dataclass, field
from typing import Any

from openapi2mcp.manifest import Manifest, ToolSpec

JSON_MEDIA = re.compile(r"^application/([\w.+-]*\+)?json\b|^application/[\w.+-]*json", re.I)
HTTP_METHODS = ("get", "put", "post", "delete", "options", "head", "patch", "trace")


@dataclass
class Arg:
    """One argument of an operation as the model sees it 1:1."""

    name: str  # the argument name (what `params`, `when` and `units` are keyed by)
    wire: str  # the spec's name
    location: str  # path, query, header, cookie or body
    required: bool
    schema: dict[str, Any]


@dataclass
class Op:
    """One operation of the spec, with what the draft needs to know about it."""

    ref: str  # what `operation:` says: the compiler's id for it
    method: str  # upper case
    path: str
    tags: list[str]
    summary: str  # one line, may be empty
    description: str
    deprecated: bool
    args: dict[str, Arg]
    response: dict[str, Any] | None  # the success response's JSON schema, refs resolved at the top
    response_headers: list[str]  # of the success response, as written
    raw_bytes: int  # its raw tool's definition, as JSON
    security_optional: bool  # a call without credentials is allowed (`security: []` or `{}` listed)
    words: list[str] = field(default_factory=list)  # operationId, summary and static path words, lower case

    @property
    def key(self) -> str:
        return f"{self.method} {self.path}"

    def required_args(self) -> set[str]:
        return {a.name for a in self.args.values() if a.required}


class Resolver:
    """Follows the document's internal `$ref`s (the loader bundled every external file in)."""

    def __init__(self, document: dict[str, Any]) -> None:
        self.document = document

    def resolve(self, node: Any, limit: int = 20) -> Any:
        seen = 0
        while isinstance(node, dict) and isinstance(node.get("$ref"), str) and seen < limit:
            node = self._target(node["$ref"])
            seen += 1
        return node

    def _target(self, ref: str) -> Any:
        if not ref.startswith("#"):
            return None
        node: Any = self.document
        for part in ref[1:].lstrip("/").split("/") if ref not in ("#", "#/") else []:
            part = part.replace("~1", "/").replace("~0", "~")
            if isinstance(node, dict):
                node = node.get(part)
            elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
                node = node[int(part)]
            else:
                return None
        return node

    def variants(self, schema: Any, depth: int = 0) -> list[dict[str, Any]]:
        """The schema and the members it combines (allOf, anyOf, oneOf), refs resolved, nulls left out."""
        schema = self.resolve(schema)
        if not isinstance(schema, dict) or depth > 8:
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


def read_ops(document: dict[str, Any], raw: Manifest) -> tuple[list[Op], list[tuple[str, str]]]:
    """Every operation the compiler knows, in spec order, and those of the document it skipped
    (`(METHOD /path, why)`): a path item it could not read."""
    resolver = Resolver(document)
    by_key: dict[str, ToolSpec] = {}
    for tool in raw.tools:
        op = tool.branches[0].steps[0].operation
        by_key[f"{op.method} {op.path}"] = tool
    global_security = document.get("security")
    ops: list[Op] = []
    skipped: list[tuple[str, str]] = []
    paths = document.get("paths") if isinstance(document.get("paths"), dict) else {}
    assert isinstance(paths, dict)
    for path, item in paths.items():
        item = resolver.resolve(item)
        if not isinstance(item, dict):
            continue
        for method in HTTP_METHODS:
            node = item.get(method)
            if not isinstance(node, dict):
                continue
            key = f"{method.upper()} {path}"
            found = by_key.get(key)
            if found is None:
                skipped.append((key, "the compiler skipped it (see `openapi2mcp inspect --warnings`)"))
                continue
            ops.append(_op(resolver, key, node, found, global_security))
    return ops, skipped


def _op(resolver: Resolver, key: str, node: dict[str, Any], tool: ToolSpec, global_security: Any) -> Op:
    spec = tool.branches[0].steps[0].operation
    props = tool.input_schema.get("properties") or {}
    required = set(tool.input_schema.get("required") or [])
    args: dict[str, Arg] = {}
    for p in spec.params:
        if p.arg and p.arg in props:
            args[p.arg] = Arg(p.arg, p.name, p.location, p.arg in required or p.required, props[p.arg])
    if spec.body is not None:
        for arg, prop in spec.body.properties.items():
            if arg in props:
                args[arg] = Arg(arg, prop, "body", arg in required, props[arg])
        if spec.body.arg and spec.body.arg in props:
            args[spec.body.arg] = Arg(spec.body.arg, spec.body.arg, "body", spec.body.arg in required,
                                      props[spec.body.arg])
    for name, schema in props.items():  # anything else the raw tool takes (nested or fixed forms)
        args.setdefault(name, Arg(name, name, "body", name in required, schema))
    response, headers = _success(resolver, node)
    security = node.get("security", global_security)
    optional = not security or any(isinstance(r, dict) and not r for r in security)
    summary = first_line(node.get("summary")) or first_line(node.get("description"))
    tags = [t for t in node.get("tags") or [] if isinstance(t, str) and t.strip()]
    method, _, path = key.partition(" ")
    op_id = str(node["operationId"]) if isinstance(node.get("operationId"), str) else ""
    statics = [s for s in path.split("/") if s and "{" not in s]
    return Op(
        ref=spec.id, method=method, path=path, tags=tags, summary=summary,
        description=str(node.get("description") or ""), deprecated=node.get("deprecated") is True,
        args=args, response=response, response_headers=headers,
        raw_bytes=len(json.dumps(tool.definition(), ensure_ascii=False).encode()),
        security_optional=optional,
        words=split_words(" ".join([op_id, summary, *statics])),
    )


def _success(resolver: Resolver, node: dict[str, Any]) -> tuple[dict[str, Any] | None, list[str]]:
    """The JSON schema and the headers of the main success response (200, else the first 2xx)."""
    responses = node.get("responses") if isinstance(node.get("responses"), dict) else {}
    assert isinstance(responses, dict)
    codes = [str(c) for c in responses]
    chosen = "200" if "200" in codes else next((c for c in codes if c.startswith("2") or c.upper() == "2XX"), None)
    if chosen is None:
        return None, []
    response = resolver.resolve(responses.get(chosen) if chosen in responses else responses.get(int(chosen)))
    if not isinstance(response, dict):
        return None, []
    headers = [h for h in (response.get("headers") or {}) if isinstance(h, str)]
    content = response.get("content") if isinstance(response.get("content"), dict) else {}
    assert isinstance(content, dict)
    for media, mt in content.items():
        if JSON_MEDIA.match(str(media)) and isinstance(mt, dict):
            schema = resolver.resolve(mt.get("schema"))
            return (schema if isinstance(schema, dict) else None), headers
    return None, headers


def first_line(text: Any, limit: int = 160) -> str:
    """The first sentence or line of a text, without Markdown links, at most `limit` characters."""
    if not isinstance(text, str):
        return ""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text.strip())
    first = text.split("\n\n", 1)[0].replace("\n", " ").strip()
    first = re.split(r"(?<=[.!?])\s", first, maxsplit=1)[0]
    first = re.sub(r"\s+", " ", first)
    return first if len(first) <= limit else first[: limit - 3].rsplit(" ", 1)[0] + "..."


_WORD = re.compile(r"[A-Z]+\d*(?=[A-Z][a-z])|[A-Z]?[a-z0-9]+|[A-Z0-9]+")


def ascii_fold(text: str) -> str:
    """Letters without their accents (`Ünïcode` -> `Unicode`), others dropped: names are ASCII."""
    return unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")


def split_words(text: str) -> list[str]:
    """Words of identifiers and prose, lower case: `listPetsByID`, `list-pets_by.id` -> list, pets, by,
    id; `v1beta1` and `k8s` stay whole."""
    return [w.lower() for w in _WORD.findall(ascii_fold(text))]


def snake(text: str) -> str:
    """An identifier in snake_case from any spelling ('postMessage' -> 'post_message')."""
    return "_".join(split_words(text))
