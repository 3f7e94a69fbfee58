"""A `response.select` draft from the success schema, and units from names and descriptions.

`select` keeps what a model needs to pick and cite an object: identifiers, names and titles,
status and state, amounts, timestamps and URLs (for a single object also its description or
body text), at most 12 fields of a list item, 18 of one object and 6 of what a write returns. A
nested object that names a person or a parent (`user`, `owner`, `customer`, ...) gives its
`login`/`name`/`id` (`user: user.login`); a nested list of objects is cut to the names of its
items (`labels: labels[*].name`) or left out, and so is everything else. A small object (at most
8 fields, none of them an object or a list of objects) is returned whole. An envelope with one
object in it (`{"data": {...}}`) is looked into, and so are containers (`metadata`, `status`,
`spec`, `attributes`, ...): Kubernetes' `metadata.name`, JSON:API's `attributes.title`.

Units come from the field and argument names (`_ms`, `_seconds`, `_bytes`, `_pct`, `_cents`,
...) and from their descriptions ("in milliseconds", "seconds since the Unix epoch", "smallest
currency unit"); an amount beside a `currency` field is in that currency.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from openapi2mcp.authoring.facts import split_words
from openapi2mcp.authoring.paging import jmes_field
from openapi2mcp.authoring.specdoc import SpecDoc

ID_NAMES = ("id", "uuid", "uid", "key", "slug", "number", "sha", "name", "namespace", "login", "username", "title",
            "full_name", "display_name", "email", "path", "filename")
STATUS_NAMES = ("status", "state", "phase", "state_reason", "type", "kind", "draft", "archived", "private",
                "visibility", "enabled", "active", "conclusion", "livemode", "paid", "merged", "deleted")
AMOUNT_WORDS = ("amount", "price", "total", "balance", "cost", "fee", "subtotal", "quantity", "currency", "size",
                "count")
TIME_WORDS = ("created", "updated", "modified", "deleted", "closed", "merged", "started", "completed", "finished",
              "expires", "due", "date", "time", "timestamp", "pushed", "last")
URL_NAMES = ("url", "html_url", "web_url", "href", "link", "permalink", "uri", "hosted_invoice_url")
TEXT_NAMES = ("description", "summary", "body", "message", "text", "content", "comment", "notes")
PARENT_NAMES = ("user", "owner", "author", "creator", "assignee", "customer", "account", "repository", "repo",
                "organization", "org", "project", "parent", "sender", "actor", "committer", "team", "subscription",
                "invoice", "product", "plan", "price")
NAME_KEYS = ("login", "name", "full_name", "title", "id")
CONTAINER_NAMES = ("metadata", "meta", "status", "spec", "attributes", "properties", "info", "details", "summary")
SCALAR_LISTS = ("tags", "labels", "topics", "roles", "scopes", "emails", "names")
OBJECT_LISTS = ("labels", "tags", "assignees", "topics", "reviewers", "members", "categories", "roles", "teams")
SMALL = 8
LIST_LIMIT = 12
ONE_LIMIT = 18
WRITE_LIMIT = 6  # what a write returns: enough to confirm it and find the object again


@dataclass
class Shape:
    """A drafted projection: the expression, what it keeps (output key -> field schema) and why."""

    select: str | None
    fields: dict[str, dict[str, Any]] = field(default_factory=dict)
    why: str = ""


def _rank(name: str, schema: dict[str, Any], doc: SpecDoc, one: bool) -> int | None:
    """Where a scalar field goes (lower first), or None when a draft leaves it out."""
    low = name.lower()
    words = split_words(name)
    if low in ("id", "uuid", "number", "key", "sha"):
        return 0
    if low in ID_NAMES or (low.endswith(("_id", "_number")) and low != "node_id" and len(words) <= 3):
        return 1
    if low in STATUS_NAMES:
        return 2
    if low in URL_NAMES:
        return 5
    if (words and words[-1] in ("at", "on", "date", "time", "timestamp")) or (words and words[0] in TIME_WORDS
                                                                           and _is_time(schema, doc)):
        return 4
    if words and (words[-1] in AMOUNT_WORDS or words[0] in ("amount", "total")):
        return 3
    if one and low in TEXT_NAMES:
        return 6
    return None


def _is_time(schema: dict[str, Any], doc: SpecDoc) -> bool:
    fmt = str(schema.get("format", "")).lower()
    text = str(schema.get("description", "")).lower()
    return fmt in ("date-time", "date", "unix-time") or "timestamp" in text or "epoch" in text or "time at" in text


def draft_select(schema: dict[str, Any] | None, doc: SpecDoc, one: bool, limit: int | None = None) -> Shape:
    """The select for one object (`one`) or for each item of a list, of at most `limit` fields."""
    if schema is None:
        return Shape(None, why="no JSON object schema to project")
    prefix, props = "", doc.properties(schema)
    if not props:
        return Shape(None, why="the response schema lists no fields")
    objects = [n for n, s in props.items() if doc.types(s) == {"object"} and doc.properties(s)]
    if len(props) <= 2 and len(objects) == 1 and len(doc.properties(props[objects[0]])) > len(props):
        prefix, props = jmes_field(objects[0]) + ".", doc.properties(props[objects[0]])  # {"data": {...}}
    nested = [n for n, s in props.items() if _has_fields(s, doc)]
    if len(props) <= SMALL and not nested and not prefix:
        return Shape(None, fields=dict(props), why=f"the object is small ({len(props)} fields): returned whole")
    ranked = _candidates(props, prefix, doc, one)
    taken = {r[2] for r in ranked}
    for order, (name, sub) in enumerate(props.items()):  # Kubernetes' metadata.name, JSON:API's attributes.title
        if name.lower() in CONTAINER_NAMES and doc.types(sub) == {"object"}:
            inner = _candidates(doc.properties(sub), f"{prefix}{jmes_field(name)}.", doc, one, base=order)
            for rank, sub_order, key, path, leaf in inner[:6]:
                key = key if key not in taken else f"{name}_{key}"
                taken.add(key)
                ranked.append((rank, sub_order, key, path, leaf))
    if len(ranked) < 2:
        return Shape(None, fields=dict(props), why="too few identifying fields to choose from: returned whole")
    ranked.sort(key=lambda r: (r[0], r[1]))
    chosen = ranked[: limit or (ONE_LIMIT if one else LIST_LIMIT)]
    expression = "{" + ", ".join(f"{jmes_field(key)}: {path}" for _, _, key, path, _ in chosen) + "}"
    return Shape(expression, fields={key: sub for _, _, key, _, sub in chosen},
                 why=f"{len(chosen)} fields kept of {len(props)} (ids, names, status, amounts, times, URLs); "
                     "the rest left out")


def _has_fields(schema: dict[str, Any], doc: SpecDoc) -> bool:
    """An object, or a list of objects, with fields of its own: what makes a result large."""
    types = doc.types(schema)
    if types == {"object"}:
        return bool(doc.properties(schema))
    if types == {"array"}:
        return bool(doc.properties(doc.items(schema) or {}))
    return False


Candidate = tuple[int, float, str, str, dict[str, Any]]  # (rank, order, output key, expression, schema)


def _candidates(props: dict[str, dict[str, Any]], prefix: str, doc: SpecDoc, one: bool,
                base: float | None = None) -> list[Candidate]:
    out: list[Candidate] = []
    nested = 0
    for i, (name, sub) in enumerate(props.items()):
        order = i if base is None else base + i / 1000  # a container's fields stand where it stands
        types = doc.types(sub)
        path = prefix + jmes_field(name)
        if types and types <= {"string", "integer", "number", "boolean"}:
            rank = _rank(name, sub, doc, one)
            if rank is not None:
                out.append((rank, order, name, path, sub))
        elif types == {"object"} and name.lower() in PARENT_NAMES and nested < 3:
            inner = doc.properties(sub)
            key = next((k for k in NAME_KEYS if k in inner and doc.types(inner[k]) <= {"string", "integer"}),
                       None)
            if key is not None:
                nested += 1
                out.append((1, order, name, f"{path}.{jmes_field(key)}", inner[key]))
        elif types == {"array"}:
            item = doc.items(sub) or {}
            item_types = doc.types(item)
            if item_types and item_types <= {"string", "integer"} and name.lower() in SCALAR_LISTS:
                out.append((3, order, name, path, sub))
            elif item_types == {"object"} and nested < 3 and name.lower() in OBJECT_LISTS:
                inner = doc.properties(item)
                key = next((k for k in NAME_KEYS if k in inner), None)
                if key is not None:
                    nested += 1
                    out.append((3, order, name, f"{path}[*].{jmes_field(key)}", {"type": "array"}))
    out.sort(key=lambda r: (r[0], r[1]))
    return out


_NAME_UNITS = (
    (re.compile(r"(_|^)(ms|millis|milliseconds)$|[a-z](Ms|Millis|Milliseconds)$"), "milliseconds"),
    (re.compile(r"(_|^)(seconds|secs|sec)$|[a-z](Seconds|Secs)$"), "seconds"),
    (re.compile(r"(_|^)(minutes|mins)$|[a-z]Minutes$"), "minutes"),
    (re.compile(r"(_|^)hours$|[a-z]Hours$"), "hours"),
    (re.compile(r"(_|^)days$|[a-z]Days$"), "days"),
    (re.compile(r"(_|^)bytes$|[a-z]Bytes$"), "bytes"),
    (re.compile(r"(_|^)(kb|kib)$|[a-z](Kb|KB|KiB)$"), "kilobytes"),
    (re.compile(r"(_|^)(mb|mib)$|[a-z](Mb|MB|MiB)$"), "megabytes"),
    (re.compile(r"(_|^)(gb|gib)$|[a-z](Gb|GB|GiB)$"), "gigabytes"),
    (re.compile(r"(_|^)(pct|percent|percentage)$|[a-z](Pct|Percent|Percentage)$"), "percent"),
    (re.compile(r"(_|^)cents$|[a-z]Cents$"), "cents"),
)
_TEXT_UNITS = (
    (re.compile(r"\b(in|as|of) milliseconds\b|\bmilliseconds since\b", re.I), "milliseconds"),
    (re.compile(r"\bseconds since (the )?(unix )?epoch\b|\bunix (epoch|timestamp|time)\b", re.I),
     "seconds since the Unix epoch"),
    (re.compile(r"\b(in|as|of) seconds\b", re.I), "seconds"),
    (re.compile(r"\b(in|as|of) bytes\b", re.I), "bytes"),
    (re.compile(r"\bsmallest currency unit\b|\bin cents\b|\bminor (currency )?units?\b", re.I),
     "the smallest unit of the currency (e.g. cents)"),
)


def unit_of(name: str, schema: dict[str, Any], siblings: set[str]) -> tuple[str, str] | None:
    """(unit, why) for one field or argument, or None."""
    types = schema.get("type")
    numeric = types in ("integer", "number") or (isinstance(types, list) and {"integer", "number"} & set(types))
    if not numeric:
        return None
    for pattern, unit in _NAME_UNITS:
        if pattern.search(name):
            return unit, f"the name {name!r}"
    text = str(schema.get("description") or "")
    for pattern, unit in _TEXT_UNITS:
        if pattern.search(text):
            if unit.startswith("the smallest") and "currency" in siblings:
                unit = "the smallest unit of `currency` (e.g. cents)"
            return unit, f"its description says {pattern.search(text).group(0)!r}"  # type: ignore[union-attr]
    words = split_words(name)
    if words and words[-1] in ("amount", "price", "balance", "total", "cost", "fee") and "currency" in siblings:
        return "in the currency of `currency`", "an amount beside a currency field"
    return None
