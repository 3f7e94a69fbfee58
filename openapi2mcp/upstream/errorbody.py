"""What an upstream's error body says: its messages, and the tool argument they are about.

A model fixes a refused call from the upstream's own words, so they are quoted: the overall
message and the first few listed problems, each under the name of the argument it is about
(`name: Field required`), and that argument is the error's `field`. One reader over a table of
the shapes real APIs use (`_HEADS`, `_LISTS`): FastAPI/pydantic `{"detail": [{loc, msg}]}`,
Prefect `{"exception_message", "exception_detail": [{loc, msg}]}`, RFC 9457 problem details
(`title`, `detail`, `errors`, `invalid-params`), `{"error": {"message", "param"}}`,
`{"errors": [{"message"|"detail", "field"|"source": {"pointer"}}]}` (GitHub, JSON:API),
Cornice/Kinto `{"message", "details": [{location, name, description}]}`, `{"message"}`,
`{"error_description"}`, `{"error": "..."}`. A body in none of them is quoted as it is (compact
JSON, or the first line of text, also when a JSON label sits on plain text), except HTML pages.
The caller redacts and clips what is returned (failures.status_failure).

A location (`["body", "flows", 0, "name"]`, `["query", "limit"]`, `/data/name`, `data.name`) is
mapped back through the operation: query/path/header/cookie names through `ParamSpec.arg`, body
keys through `BodySpec.fields` (nested fields), `BodySpec.properties` and a whole-body argument.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final, TypeGuard

from openapi2mcp.manifest import BodySpec, OperationSpec
from openapi2mcp.shape import error_path

MAX_SHOWN: Final = 3  # listed problems quoted; the rest are counted
_TEXT_LIMIT: Final = 10_000  # bytes of a non-JSON body worth reading for its first line

Path = tuple[str | int, ...]

# The overall message, most specific first ("problem" is RFC 9457's `title: detail`).
_HEADS: Final[tuple[Path | str, ...]] = (
    ("error", "message"),
    ("exception_message",),
    "problem",
    ("message",),
    ("error_description",),
    ("error",),
    ("detail",),
    ("title",),
)

# Lists of problems: (where the list is, each item's message keys, each item's location keys).
# A key "a.b" is nested; the first list with a message wins.
_LISTS: Final[tuple[tuple[Path, tuple[str, ...], tuple[str, ...]], ...]] = (
    (("detail",), ("msg", "message"), ("loc",)),  # FastAPI, pydantic
    (("exception_detail",), ("msg", "message"), ("loc",)),  # Prefect (FastAPI's list under its own key)
    (("errors",), ("message", "detail", "msg", "reason", "description", "title", "code"),
     ("loc", "field", "param", "path", "pointer", "source.pointer", "source.parameter", "name")),
    (("invalid-params",), ("reason", "message", "detail"), ("name", "pointer")),  # RFC 9457's example
    (("invalid_params",), ("reason", "message", "detail"), ("name", "pointer")),
    (("details",), ("description", "message", "msg"), ("location+name", "loc", "field", "name")),  # Cornice
    (("error", "errors"), ("message", "reason"), ("location", "field")),  # Google APIs
    (("error", "details"), ("message", "description"), ("field", "location")),
    ((), ("message", "msg", "detail", "reason", "description"), ("loc", "field", "param", "name")),  # a bare list
)

# Where a single located error names its parameter.
_FIELDS: Final[tuple[Path, ...]] = (("error", "param"), ("error", "field"), ("param",), ("field",))

_LOCATIONS: Final = {
    "body": "body", "json": "body", "form": "body", "query": "query", "querystring": "query", "path": "path",
    "header": "header", "headers": "header", "cookie": "cookie", "cookies": "cookie",
}


@dataclass(frozen=True)
class Complaint:
    message: str  # "" when the body says nothing worth quoting
    field: str | None = None  # the tool argument the (first located) problem is about


def read_complaint(document: Any, text: str | None, media_type: str, op: OperationSpec | None) -> Complaint:
    """What the upstream said: `document` is the parsed JSON body (None when it is not JSON), `text`
    the body as text when it is short and decodable."""
    if isinstance(document, (dict, list)):
        found = _from_json(document, media_type, op)
        if found.message or found.field:
            return found
        return Complaint(_any_text(document), found.field)
    if isinstance(document, str) and document.strip():
        return Complaint(document.strip())
    if text and "html" not in media_type:
        first = next((line.strip() for line in text.splitlines() if line.strip()), "")
        return Complaint("" if first.startswith("<") else first)
    return Complaint("")


def _from_json(document: Any, media_type: str, op: OperationSpec | None) -> Complaint:
    head = next((h for h in (_head(document, path, media_type) for path in _HEADS) if h), "")
    items = _items(document)
    field = None
    shown: list[str] = []
    for text, where in items:
        argument = argument_at(op, where) if op is not None and where else None
        field = field or argument
        if text.rstrip(".") in head:  # Cornice repeats its first problem as the message
            continue
        if len(shown) < MAX_SHOWN:
            label = argument or _readable(where)
            named = label and re.match(rf"{re.escape(label)}(?![\w.\[])", text)  # Cornice: "data.title in body: .."
            shown.append(f"{label}: {text}" if label and not named else text)
    if field is None and op is not None:
        field = next((a for a in (argument_at(op, _parts(_dig(document, *p))) for p in _FIELDS) if a), None)
    listed = "; ".join(shown)
    if len(items) > MAX_SHOWN and shown:
        listed += f" (and {len(items) - MAX_SHOWN} more)"
    message = f"{head.rstrip(' .:')}: {listed}" if head and listed else head or listed
    return Complaint(message, field)


def _head(document: Any, path: Path | str, media_type: str) -> str:
    if path == "problem":  # RFC 9457: both, when the body is a problem document
        title, detail = _dig(document, "title"), _dig(document, "detail")
        is_problem = media_type == "application/problem+json" or (
            isinstance(document, dict) and ("type" in document or "status" in document))
        if not (is_problem and _text(title) and _text(detail)):
            return ""
        return f"{title.strip().rstrip('.:')}: {detail.strip()}"
    found = _dig(document, *path) if isinstance(path, tuple) else None
    return found.strip() if _text(found) else ""


def _items(document: Any) -> list[tuple[str, list[str | int]]]:
    """The listed problems of the first list that has any: (message, location parts)."""
    for path, text_keys, where_keys in _LISTS:
        listed = _dig(document, *path)
        if not isinstance(listed, list):
            continue
        out: list[tuple[str, list[str | int]]] = []
        for item in listed:
            if isinstance(item, str) and item.strip():
                out.append((item.strip(), []))
                continue
            text = next((v.strip() for v in (_key(item, k) for k in text_keys) if _text(v)), None)
            if text is not None:
                out.append((text, next((p for p in (_parts(_key(item, k)) for k in where_keys) if p), [])))
        if out:
            return out
    return []


def _key(item: Any, key: str) -> Any:
    if key == "location+name":  # Cornice: {"location": "body", "name": "data.title"}
        location, name = _dig(item, "location"), _dig(item, "name")
        return f"{location}.{name}" if _text(location) and _text(name) and location in _LOCATIONS else None
    return _dig(item, *key.split("."))


def argument_at(op: OperationSpec | None, parts: Sequence[str | int]) -> str | None:
    """The tool argument (with the path inside it) a location is about, or None when no argument feeds it."""
    if op is None or not parts:
        return None
    first = parts[0]
    location = _LOCATIONS.get(first.lower()) if isinstance(first, str) else None
    rest = list(parts[1:] if location else parts)
    if not rest:
        return op.body.arg if location == "body" and op.body is not None else None
    name = rest[0]
    if location != "body" and isinstance(name, str):
        for p in op.params:
            same = p.name == name or (p.location == "header" and p.name.lower() == name.lower())
            if p.arg and same and location in (None, p.location):
                return error_path([p.arg, *rest[1:]])
    if location in (None, "body") and op.body is not None:
        return _body_argument(op.body, rest)
    return None


def _body_argument(body: BodySpec, path: list[str | int]) -> str | None:
    for f in sorted(body.fields, key=lambda f: -len(f.path)):  # the most specific nested field
        if f.arg and path[: len(f.path)] == f.path:
            return error_path([f.arg, *path[len(f.path):]])
    for arg, prop in body.properties.items():
        if path[0] == prop:
            return error_path([arg, *path[1:]])
    return error_path([body.arg, *path]) if body.arg else None


def _parts(where: Any) -> list[str | int]:
    """A location as path parts: a loc list, a JSON pointer, or a dotted path (`items[0].name`)."""
    if isinstance(where, list):
        return [w for w in where if isinstance(w, (str, int)) and not isinstance(w, bool)]
    if not _text(where):
        return []
    text = where.strip().removeprefix("#")  # RFC 9457's pointers are URI fragments: "#/profile/color"
    if text.startswith("/"):
        return [int(p) if p.isdigit() else p.replace("~1", "/").replace("~0", "~") for p in text[1:].split("/")]
    return [int(p) if p.isdigit() else p for p in re.split(r"\.|\[(\d+)\]", text) if p]


def _readable(parts: Sequence[str | int]) -> str:
    """A location no argument feeds, for people: without the leading `body`/`query`."""
    if parts and isinstance(parts[0], str) and parts[0].lower() in _LOCATIONS:
        parts = parts[1:]
    return error_path(parts)


def _any_text(document: Any) -> str:
    """A JSON body in no known shape, quoted as compact JSON when it holds any words at all."""
    if not _has_text(document):
        return ""
    return json.dumps(document, ensure_ascii=False, separators=(",", ":"))[:2000]


def _has_text(value: Any, depth: int = 0) -> bool:
    if _text(value):
        return True
    if depth > 20:
        return False
    if isinstance(value, dict):
        return any(_has_text(v, depth + 1) for v in value.values())
    if isinstance(value, list):
        return any(_has_text(v, depth + 1) for v in value[:50])
    return False


def _text(value: Any) -> TypeGuard[str]:
    return isinstance(value, str) and bool(value.strip())


def _dig(document: Any, *path: str | int) -> Any:
    for part in path:
        if isinstance(part, int):
            if not isinstance(document, list) or len(document) <= part:
                return None
            document = document[part]
        else:
            if not isinstance(document, dict):
                return None
            document = document.get(part)
    return document
