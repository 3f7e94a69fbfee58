"""Finding a document's `$ref`s, and what each stands for (a schema, a map of schemas, or other).

* `has_external_refs` is the fast path: a regex over the text finds `$ref` keys whose value does
  not start with `#`; when there are none (GitHub, Stripe, OpenAI, Kubernetes, Microsoft Graph)
  nothing is bundled.
* `iter_refs` yields only `$ref`s with string values. prance 26.7's own iterator takes *every*
  key named `$ref` as a reference, including the schema property named `$ref` in Kubernetes'
  `JSONSchemaProps.properties` (its value is a schema, a dict, which urlparse cannot take: stock
  prance fails with "'dict' object has no attribute 'decode'"). Here a property named `$ref`
  stays a property.
* `site_kind` tells from where a ref stands what its target is; bundle.py moves schemas into
  `components/schemas` and inlines everything else.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from openapi2mcp.loader.tree import JsonPath

# Maps whose keys are names (of properties, responses, media types...), not keywords: `default`
# there is a response code, and a `$ref` *name* with a schema as its value is a property (k8s).
_NAME_MAPS = frozenset({
    "properties", "patternProperties", "definitions", "$defs", "dependentSchemas", "paths", "webhooks",
    "responses", "parameters", "schemas", "requestBodies", "headers", "examples", "links", "callbacks",
    "securitySchemes", "securityDefinitions", "pathItems", "content", "encoding", "variables", "scopes",
})  # fmt: skip
_SCHEMA_MAPS = frozenset({"properties", "patternProperties", "definitions", "$defs", "dependentSchemas", "schemas"})
_LITERALS = frozenset({"example", "default", "enum", "const"})  # data: a `$ref` in there is only "soft"
# a `$ref` key (after a quote, a space, `{`, `[`, `,` or the start: not the end of a path such as
# Microsoft Graph's `/owners/$ref`) whose value does not start with `#`
# (checked behind the literal: a look-behind in front of it would be tried at every position, 0.3-0.5 s)
_EXTERNAL_REF_HINT = re.compile(r"""\$ref(?<![^\s{\[,'"]\$ref)['"]?\s*+:\s*+(?!['"]?#)""")
_EXTERNAL_REF_HINT_BYTES = re.compile(_EXTERNAL_REF_HINT.pattern.encode())


def is_local(ref: str) -> bool:
    return ref.startswith("#") or not ref


def iter_refs(node: Any, *, root: bool) -> Iterator[tuple[JsonPath, str, bool]]:
    """(path, ref, soft) of each string `$ref`, in document order.

    `soft` refs stand in example/default/enum data: by the spec they are text, but split specs
    (DigitalOcean) keep examples in files; they are followed when they can be, kept otherwise.
    The siblings of a ref that will be replaced are not searched (only local refs of the root
    document stay in place).
    """
    stack: list[tuple[JsonPath, Any, bool, bool]] = [((), node, False, False)]
    while stack:
        path, value, names, soft = stack.pop()
        if isinstance(value, dict):
            ref = value.get("$ref")
            if isinstance(ref, str):  # in a name map too: `properties: {$ref: file}` refers to the map
                yield path, ref, soft
                if not (root and is_local(ref)):
                    continue
            items = [
                ((*path, key), item, not names and key in _NAME_MAPS, soft or (not names and _is_literal(key, item)))
                for key, item in value.items()
                if isinstance(item, (dict, list))
            ]
            stack.extend(reversed(items))
        elif isinstance(value, list):
            stack.extend(
                ((*path, i), item, False, soft)
                for i, item in reversed(list(enumerate(value)))
                if isinstance(item, (dict, list))
            )


def _is_literal(key: str, value: Any) -> bool:
    return key in _LITERALS or (key == "examples" and isinstance(value, list))


def has_external_refs(text: str | bytes, document: dict[str, Any]) -> bool:
    """The fast path: a C-speed regex over the text (or its UTF-8 bytes) rules most specs out, a walk
    confirms the rest."""
    hint = _EXTERNAL_REF_HINT.search(text) if isinstance(text, str) else _EXTERNAL_REF_HINT_BYTES.search(text)
    if not hint:
        return False
    return any(not is_local(ref) for _, ref, _ in iter_refs(document, root=True))


# What a ref target is, by where refs to it stand: a schema moves to components/schemas; a map of
# schemas (`properties: {$ref: ...}`) and anything else is inlined where it is used.
OTHER, SCHEMA_MAP, SCHEMA = "other", "schema map", "schema"
KIND_RANK = {OTHER: 0, SCHEMA_MAP: 1, SCHEMA: 2}


def site_kind(container: str, path: JsonPath) -> str:
    """The kind of what a `$ref` at `path` inside an object of kind `container` stands for."""
    kind, expect_name = container, container == SCHEMA_MAP
    for key in path:
        if expect_name:  # a property/response/... name, never a keyword
            expect_name = False
            kind = SCHEMA if kind == SCHEMA_MAP else kind
        elif isinstance(key, int):
            continue  # allOf/0, parameters/0
        elif key in _LITERALS or (kind == SCHEMA and key == "examples"):
            return OTHER  # data
        elif kind == SCHEMA:
            if key in _SCHEMA_MAPS:
                kind, expect_name = SCHEMA_MAP, True
        elif key == "schema":
            kind = SCHEMA
        elif key in ("schemas", "definitions", "$defs"):
            kind, expect_name = SCHEMA_MAP, True
        else:
            expect_name = key in _NAME_MAPS
    return kind
