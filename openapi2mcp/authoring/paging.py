"""How a list operation pages, read off its parameters, response headers and response fields.

In this order (the first that fits wins), each in a style the compiler supports
(docs/task-tools.md#pagination-one-contract-for-every-api):

1. a documented `Link` response header -> `link` (GitHub);
2. a header with the next page's URL (`Next-Page`, `X-Next-Page-Url`, ...) -> `next_url` + `header`
   (Kinto), or a next-cursor header (`X-Next-Cursor`, `X-Continuation-Token`) with a cursor
   parameter -> `header_cursor`;
3. a cursor parameter (cursor, page_token, after, starting_after, continue, marker, _token) and a
   next-cursor field in the body (next_cursor, nextPageToken, response_metadata.next_cursor,
   metadata.continue, ...) -> `body_cursor`; with `has_more` and no such field, the next cursor
   is the last item's id (Stripe, OpenAI: ``has_more && data[-1].id || `null` ``);
4. offset + limit parameters -> `offset`; page + size parameters -> `page`;
5. a next-page URL in the body (next, next_url, links.next, `@odata.nextLink`) -> `next_url` + `next`.

The list's place in the page (`items`) is the body itself when it is an array, else the array
property (`data`, `items`, `results`, ... or the only one); `total` is an integer total, count or
total_count field when the page has one. Paging parameters may also be top-level properties of
a JSON request body (a search sent as a POST: Prefect's `/flows/filter`).

The one detector: `init` drafts its block (`detect`, from the raw conversion's arguments), and
`lint` reads the same block off the spec for a list an overlay exposes without `pagination`
(`spec_paging`), so the two never disagree about how an operation pages.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Protocol

from openapi2mcp.authoring.specdoc import Arg, SpecDoc, SpecOperation

PAGE = ("page", "page_number", "pagenumber", "pageindex", "page_index", "pageno")
SIZE = ("per_page", "perpage", "page_size", "pagesize", "limit", "_limit", "size", "count", "max_results",
        "maxresults", "pagelen", "top", "$top", "max", "max_items", "maxitems", "first", "take")
OFFSET = ("offset", "skip", "$skip", "start", "start_index", "startindex", "from")
CURSOR = ("cursor", "page_token", "pagetoken", "next_page_token", "nextpagetoken", "starting_after", "after",
          "continue", "continuation_token", "continuationtoken", "marker", "_token", "next_token", "nexttoken",
          "page_cursor", "pagecursor", "next_cursor", "nextcursor", "$skiptoken", "skiptoken")
NEXT_CURSOR_FIELDS = ("next_cursor", "nextcursor", "next_page_token", "nextpagetoken", "next_token", "nexttoken",
                      "continuation_token", "continuationtoken", "continue", "cursor", "next_marker", "nextmarker",
                      "after", "end_cursor", "endcursor")
NEXT_URL_FIELDS = ("next", "next_url", "nexturl", "next_link", "nextlink", "@odata.nextlink", "next_page_url",
                   "nextpageurl", "next_page", "nextpage")
NEXT_CONTAINERS = ("response_metadata", "metadata", "meta", "pagination", "paging", "links", "_links", "page_info",
                   "pageinfo", "cursors", "page")
TOTAL_FIELDS = ("total", "total_count", "totalcount", "total_results", "totalresults", "total_items", "totalitems",
                "count", "total_size", "totalsize")
# The parameter names that alone make a GET a list (grouping.py); `count` or `from` alone do not.
LIST_HINTS = frozenset({"page", "per_page", "perpage", "page_size", "pagesize", "limit", "offset", "cursor",
                        "page_token", "pagetoken", "after", "starting_after", "continue", "_limit", "_token"})
# The property of an object response that holds its list, in order of preference.
LIST_KEYS = ("data", "items", "results", "records", "values", "value", "entries", "list", "rows", "hits",
             "elements", "objects", "nodes", "resources")
DEFAULT_PAGE_SIZE = 20
_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class Pageable(Protocol):
    """What paging is read from: init's `facts.Op`, or an operation as the spec writes it (`SpecPage`)."""

    @property
    def args(self) -> dict[str, Arg]: ...

    @property
    def response(self) -> dict[str, Any] | None: ...  # the success response's JSON schema

    @property
    def response_headers(self) -> list[str]: ...  # the success response's headers, as written


@dataclass(frozen=True)
class SpecPage:
    """A `Pageable` read straight off the spec (lint: the overlay's tool has no raw conversion beside it)."""

    args: dict[str, Arg]
    response: dict[str, Any] | None
    response_headers: list[str]


@dataclass
class Paging:
    """The drafted `pagination` block, why it was chosen, and the item schema `select` applies to."""

    block: dict[str, Any]
    why: str
    item_schema: dict[str, Any] | None
    uses: set[str] = field(default_factory=set)  # the argument names the paging takes over
    position: str | None = None  # the argument saying where a page starts (page, offset, cursor), if any


def jmes_field(name: str) -> str:
    """A field name as a JMESPath identifier (quoted when it is not a bare identifier)."""
    return name if _IDENT.match(name) else '"' + name.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _find(args: dict[str, Arg], names: tuple[str, ...], kinds: tuple[str, ...] = ("query", "body")) -> Arg | None:
    wanted = {n: i for i, n in enumerate(names)}
    found = [a for a in args.values() if a.location in kinds and a.wire.lower() in wanted and "." not in a.name]
    found.sort(key=lambda a: (wanted[a.wire.lower()], a.location != "query"))
    return found[0] if found else None


def _ref(arg: Arg) -> str:
    """How a paging key names an argument: the spec's name (a body property by its top-level name)."""
    return arg.wire


def is_page_size(name: str) -> bool:
    """Is an argument of this name a page size (`limit`, `per_page`, `pageSize`, `$top`, ...)?"""
    return name.lower() in SIZE


def list_key(schema: dict[str, object], doc: SpecDoc) -> str | None:
    """The property of an object response that holds its list (`data`, `items`, the only array...)."""
    props = doc.properties(schema)
    arrays = [n for n, s in props.items() if "array" in doc.types(s)]
    for name in LIST_KEYS:
        if name in arrays:
            return name
    objects = [n for n in arrays if "object" in doc.types(doc.items(props[n]) or {})]
    return objects[0] if len(objects) == 1 else (arrays[0] if len(arrays) == 1 else None)


def spec_paging(doc: SpecDoc, op: SpecOperation) -> tuple[Paging | None, str]:
    """`detect` for an operation as the spec writes it (its parameters and body properties by their names)."""
    success = doc.success(op)
    return detect(SpecPage(doc.arguments(op), success.schema, success.headers), doc)


def detect(op: Pageable, doc: SpecDoc) -> tuple[Paging | None, str]:
    """The paging of a list operation, or (None, why not)."""
    body = op.response
    if body is None:
        return None, "no JSON response to page through"
    items, item_schema = _items(body, doc)
    if items is None:
        return None, "the response holds no list"
    headers = {h.lower(): h for h in op.response_headers}
    size = _find(op.args, SIZE)
    page = _find(op.args, PAGE)
    offset = _find(op.args, OFFSET)
    cursor = _find(op.args, CURSOR)
    total = _total(body, doc) if items else None
    base: dict[str, Any] = {}
    if items:
        base["items"] = items
    uses: set[str] = set()

    def finish(block: dict[str, Any], why: str, *taken: Arg | None) -> tuple[Paging | None, str]:
        columns = _columns(body, doc, items)
        if columns:
            return None, (f"{why}, but the response holds lists side by side ({', '.join(f'`{c}`' for c in columns)}),"
                          " the columns of one table: paging one would drop the others")
        for a in (size, *taken):
            if a is not None:
                uses.add(a.name)
        if size is not None:
            block["page_size"] = _page_size(size)
            block["max_items"] = max(100, block["page_size"])
        position = next((a.name for a in taken if a is not None), None)
        return Paging({**block, **base}, why, item_schema, uses, position), why

    if "link" in headers:
        block: dict[str, Any] = {"style": "link"}
        if size is not None and size.wire != "per_page":
            block["size_param"] = _ref(size)
        if page is not None and page.wire != "page":
            block["page_param"] = _ref(page)
        if size is None and page is None:
            return None, "a Link header, but no page or page-size parameter to start from"
        return finish(block, "the response has a `Link` header (RFC 8288 rel=next)", page)
    url_header = next((h for low, h in headers.items() if "next" in low and any(w in low for w in ("page", "url",
                       "link")) and "cursor" not in low and "token" not in low), None)
    if url_header is not None:
        block = {"style": "next_url", "header": url_header}
        if size is not None:
            block["size_param"] = _ref(size)
        if cursor is not None:
            block["cursor_param"] = _ref(cursor)
        return finish(block, f"the `{url_header}` response header holds the next page's URL", cursor)
    cursor_header = next((h for low, h in headers.items() if ("next" in low or "continuation" in low)
                          and ("cursor" in low or "token" in low)), None)
    if cursor_header is not None and cursor is not None:
        block = {"style": "header_cursor", "header": cursor_header, "cursor_param": _ref(cursor)}
        if size is not None:
            block["size_param"] = _ref(size)
        return finish(block, f"the `{cursor_header}` response header holds the next cursor", cursor)
    if cursor is not None:
        found = _next_cursor(body, doc)
        if found is None and items and _has_more(body, doc):
            item_id = "id" in doc.properties(item_schema or {})
            last_id = "last_id" in doc.properties(body)
            if last_id:
                found = "has_more && last_id || `null`"
            elif item_id:
                found = f"has_more && {items}[-1].id || `null`"
        if found is not None:
            block = {"style": "body_cursor", "cursor_param": _ref(cursor), "next": found}
            if size is not None:
                block["size_param"] = _ref(size)
            return finish(block, f"the `{cursor.wire}` parameter takes the cursor that `{found}` gives", cursor)
    if offset is not None and size is not None:
        block = {"style": "offset"}
        if offset.wire != "offset":
            block["offset_param"] = _ref(offset)
        if size.wire != "limit":
            block["size_param"] = _ref(size)
        if total:
            block["total"] = total
        return finish(block, f"`{offset.wire}` and `{size.wire}` parameters", offset)
    if page is not None:
        block = {"style": "page"}
        if page.wire != "page":
            block["page_param"] = _ref(page)
        if size is not None and size.wire != "per_page":
            block["size_param"] = _ref(size)
        if size is None:
            return None, f"a `{page.wire}` parameter but no page size to tell a full page"
        if total:
            block["total"] = total
        return finish(block, f"`{page.wire}` and `{size.wire}` parameters", page)
    next_url = _next_url(body, doc)
    if next_url is not None:
        block = {"style": "next_url", "next": next_url}
        if size is not None:
            block["size_param"] = _ref(size)
        return finish(block, f"the body's `{next_url}` holds the next page's URL")
    seen = paging_params(op)
    if seen:
        return None, (f"{', '.join(f'`{n}`' for n in seen)} look like paging, but neither a next-page header nor a "
                      "next-page field is documented")
    return None, "no paging parameters or next-page fields found"


def paging_params(op: Pageable) -> list[str]:
    """The operation's parameters that look like paging ones (spec names)."""
    names = set(PAGE) | set(SIZE) | set(OFFSET) | set(CURSOR)
    return [a.wire for a in op.args.values() if a.location in ("query", "body") and a.wire.lower() in names]


def _items(body: dict[str, Any], doc: SpecDoc) -> tuple[str | None, dict[str, Any] | None]:
    """('' for a bare array | the list's JMESPath | None, the item schema)."""
    if "array" in doc.types(body):
        return "", doc.items(body)
    key = list_key(body, doc)
    if key is None:
        return None, None
    return jmes_field(key), doc.items(doc.properties(body)[key])


def _columns(body: dict[str, Any], doc: SpecDoc, items: str) -> list[str]:
    """The arrays of data beside a list that no LIST_KEYS name marks as the page's (Chroma's `get` answers
    `{ids: [...], documents: [...], metadatas: [...]}`): paging one of them would drop the others. Arrays of
    enum values (`available_statuses`) are vocabularies, not columns."""
    if not items or items in LIST_KEYS:
        return []
    arrays = [n for n, s in doc.properties(body).items() if "array" in doc.types(s)
              and not isinstance((doc.items(s) or {}).get("enum"), list)]
    return arrays if len(arrays) > 1 else []


def _scalar(schema: dict[str, Any], doc: SpecDoc, kinds: set[str]) -> bool:
    types = doc.types(schema)
    return bool(types) and types <= kinds


def _fields(body: dict[str, Any], doc: SpecDoc) -> list[tuple[str, dict[str, Any], str]]:
    """(JMESPath, schema, lower-case leaf name) of the top-level fields and those of known containers."""
    out = []
    for name, schema in doc.properties(body).items():
        out.append((jmes_field(name), schema, name.lower()))
        if name.lower() in NEXT_CONTAINERS and "object" in doc.types(schema):
            for sub, sub_schema in doc.properties(schema).items():
                out.append((f"{jmes_field(name)}.{jmes_field(sub)}", sub_schema, sub.lower()))
                if sub.lower() == "next" and "object" in doc.types(sub_schema):  # _links.next.href
                    for leaf, leaf_schema in doc.properties(sub_schema).items():
                        out.append((f"{jmes_field(name)}.next.{jmes_field(leaf)}", leaf_schema, f"next.{leaf.lower()}"))
    return out


def _is_url(schema: dict[str, Any], name: str) -> bool:
    text = f"{schema.get('format', '')} {schema.get('description', '')} {name}".lower()
    return "uri" in text or "url" in text or "link" in text or name.endswith(".href")


def _next_cursor(body: dict[str, Any], doc: SpecDoc) -> str | None:
    for path, schema, leaf in _fields(body, doc):
        if leaf in NEXT_CURSOR_FIELDS and _scalar(schema, doc, {"string", "integer"}) and not (
            _is_url(schema, leaf) and leaf != "cursor"
        ):
            return path
    return None


def _next_url(body: dict[str, Any], doc: SpecDoc) -> str | None:
    for path, schema, leaf in _fields(body, doc):
        name = leaf.split(".")[-1]
        if (leaf in NEXT_URL_FIELDS or leaf == "next.href") and _scalar(schema, doc, {"string"}) and (
            name != "next" or _is_url(schema, "") or "." in path
        ):
            return path
    return None


def _has_more(body: dict[str, Any], doc: SpecDoc) -> bool:
    props = doc.properties(body)
    return any(n.lower() in ("has_more", "hasmore") and _scalar(s, doc, {"boolean"}) for n, s in props.items())


def _total(body: dict[str, Any], doc: SpecDoc) -> str | None:
    for path, schema, leaf in _fields(body, doc):
        if leaf in TOTAL_FIELDS and _scalar(schema, doc, {"integer"}):
            return path
    return None


def _page_size(size: Arg) -> int:
    """The spec's default page size, within its bounds, else 20 (or the maximum when smaller)."""
    schema = size.schema
    maximum = schema.get("maximum")
    default = schema.get("default")
    value = default if isinstance(default, int) and not isinstance(default, bool) and default > 0 else DEFAULT_PAGE_SIZE
    if isinstance(maximum, int | float) and not isinstance(maximum, bool) and value > maximum:
        value = int(maximum)
    return max(1, min(value, 100))
