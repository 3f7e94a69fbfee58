"""Run time, part: one paging contract over the API's own paging style.

The model sees `limit` and `cursor` in, `items`, `next_cursor`, `has_more` (and `total`) out,
whatever the API does: page/per_page, offset/limit, a cursor in the body or in a header, or an
RFC 8288 `Link` header. A cursor is a signed token (signing.py) that holds

    t: the tool, b: a digest of the call's other arguments, a: the upstream position
    (page number, offset, upstream cursor or next URL), n: the upstream page size,
    k: how many items of that page were already returned

so a call can stop in the middle of an upstream page (a small `limit`, or a result cut to fit
`max_bytes`) and the next call resumes exactly there: every item is returned exactly once. The
model cannot forge a position, use a cursor with other arguments or another tool, or keep one
forever. A next-page URL (an RFC 8288 `Link`, another header, or a body field) is followed only
on the upstream's own origin and under its base path, checked when it arrives and again when a
cursor brings it back; only its path and query are kept: a cursor can never point the server
somewhere else. A paging value may also go into the JSON request body (`position_path`,
`size_path`: search endpoints that are POSTs).
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final
from urllib.parse import unquote, unquote_plus, urljoin, urlsplit, urlunsplit

import httpx2

from openapi2mcp.errors import ErrorCode, ToolFailure
from openapi2mcp.manifest import (
    CURSOR_MAX_LENGTH,
    BodyField,
    BodySpec,
    OperationSpec,
    PaginationSpec,
    ParamSpec,
)
from openapi2mcp.runtime.signing import Signer, TokenError, digest
from openapi2mcp.shape import search

PURPOSE: Final = "cursor"

# One page fetched: the upstream response's headers and its decoded JSON body.
Send = Callable[[OperationSpec], Awaitable[tuple[Mapping[str, str], Any, str]]]


@dataclass(frozen=True)
class Position:
    """Where a listing stands upstream, and how many items of that page are already out."""

    at: int | str | None  # page number, offset, upstream cursor or next URL; None: the first page
    size: int | None  # the upstream page size sent (None: the API decides)
    skip: int = 0


@dataclass
class Collected:
    items: list[Any]
    resume: list[Position]  # resume[i]: the position that starts at items[i]
    next: Position | None  # after the last item; None: the listing is complete
    total: int | None = None
    pages: int = 0


def _cursor_error(message: str) -> ToolFailure:
    return ToolFailure.of(ErrorCode.CURSOR_INVALID, f"cursor: {message}", field="cursor")


class Paginator:
    """One per paginated branch of a tool."""

    def __init__(self, tool: str, spec: PaginationSpec, signer: Signer) -> None:
        self.tool = tool
        self.spec = spec
        self.signer = signer

    # ------------------------------------------------------------------ cursors

    def binding(self, arguments: Mapping[str, Any]) -> str:
        """A digest of the arguments a cursor is bound to: all but `limit` and `cursor`."""
        skip = {self.spec.limit_arg, self.spec.cursor_arg}
        return digest({k: v for k, v in arguments.items() if k not in skip and v is not None})

    def first(self) -> Position:
        s = self.spec
        size = s.page_size if s.size is not None or s.size_path else None
        if s.style == "page":
            return Position(s.first_page, size)
        if s.style == "offset":
            return Position(0, size)
        return Position(None, size)

    def encode(self, position: Position, binding: str) -> str:
        data = {"t": self.tool, "b": binding, "a": position.at, "n": position.size, "k": position.skip}
        token = self.signer.sign(PURPOSE, data, ttl=self.spec.cursor_ttl)
        if len(token) > CURSOR_MAX_LENGTH:  # the `cursor` argument could not take it back
            raise ToolFailure.of(
                ErrorCode.UPSTREAM_INVALID_RESPONSE,
                f"the upstream's position for the next page is too long to carry in a cursor ({len(token)} "
                f"characters, at most {CURSOR_MAX_LENGTH}); ask for fewer items per call or narrow the filters",
            )
        return token

    def decode(self, cursor: str | None, binding: str) -> Position:
        if cursor is None:
            return self.first()
        try:
            data = self.signer.verify(PURPOSE, cursor)
        except TokenError as e:
            if e.reason == "expired":
                minutes = max(1, self.spec.cursor_ttl // 60)
                raise _cursor_error(
                    f"this cursor has expired (cursors are valid for {minutes} minutes); "
                    "call again without cursor to start from the beginning"
                ) from None
            if e.reason == "purpose":
                raise _cursor_error(f"{e}; pass the next_cursor of a previous result") from None
            raise _cursor_error(
                "not a cursor this server issued, or it was changed; pass next_cursor exactly as returned, "
                "or omit cursor to start from the beginning"
            ) from None
        if data.get("t") != self.tool:
            raise _cursor_error(f"this cursor belongs to the tool {data.get('t')!r}; use it only there")
        if data.get("b") != binding:
            raise _cursor_error(
                "this cursor was issued for different arguments; repeat the call with the same arguments as "
                "the call that returned it (only limit may change), or omit cursor to start again"
            )
        at, size, skip = data.get("a"), data.get("n"), data.get("k")
        if not isinstance(at, int | str | None) or not isinstance(size, int | None) or not isinstance(skip, int):
            raise _cursor_error("not a cursor this server issued")
        return Position(at, size, skip)

    # ------------------------------------------------------------------ requests

    def request(self, op: OperationSpec, position: Position, base: httpx2.URL, drop: set[str]) -> OperationSpec:
        """The operation for one upstream page: paging parameters (or body fields) set, or the next URL's."""
        s = self.spec
        if s.style in ("link", "next_url") and isinstance(position.at, str):
            return link_operation(op, position.at, base, drop)
        extra: list[ParamSpec] = []
        fields: list[BodyField] = []
        if position.at is not None:
            if s.position is not None:
                extra.append(s.position.model_copy(update={"fixed": True, "value": position.at}))
            if s.position_path:
                fields.append(BodyField(path=s.position_path, value=position.at))
        if position.size is not None:
            if s.size is not None:
                extra.append(s.size.model_copy(update={"fixed": True, "value": position.size}))
            if s.size_path:
                fields.append(BodyField(path=s.size_path, value=position.size))
        update: dict[str, Any] = {"params": [*op.params, *extra]}
        if fields:
            body = op.body or BodySpec(media_type="application/json")
            update["body"] = body.model_copy(update={"fields": [*body.fields, *fields]})
        return op.model_copy(update=update)

    def _items(self, body: Any) -> list[Any]:
        items = body if self.spec.items == "@" else search(self.spec.items, body)
        if not isinstance(items, list):
            raise ToolFailure.of(
                ErrorCode.UPSTREAM_INVALID_RESPONSE,
                f"the upstream's page has no list at {self.spec.items!r} (found {type(items).__name__}); "
                "it does not match its documented schema",
            )
        return items

    def _total(self, body: Any) -> int | None:
        if not self.spec.total:
            return None
        value = search(self.spec.total, body)
        return value if isinstance(value, int) and not isinstance(value, bool) else None

    def _next(
        self, pos: Position, body: Any, headers: Mapping[str, str], url: str, items: list[Any], total: int | None,
        base: httpx2.URL, drop: set[str],
    ) -> Position | None:
        s, n = self.spec, len(items)
        if s.style in ("page", "offset"):
            if n == 0 or not isinstance(pos.at, int):
                return None
            size = pos.size or n
            if s.style == "page":
                seen, nxt = (pos.at - s.first_page) * size + n, pos.at + 1
            else:
                seen = nxt = pos.at + n
            if total is not None:
                return Position(nxt, pos.size) if seen < total else None
            return Position(nxt, pos.size) if pos.size is None or n >= pos.size else None
        if s.style == "body_cursor":
            value = search(s.next or "next_cursor", body)
            if value is None or value == "":
                return None
            if not isinstance(value, str | int) or isinstance(value, bool):
                raise ToolFailure.of(
                    ErrorCode.UPSTREAM_INVALID_RESPONSE,
                    f"the upstream's next cursor ({s.next!r}) is a {type(value).__name__}, not a string",
                )
            _not_a_url(value, f"body field {s.next or 'next_cursor'!r}", f"next: {s.next or 'next_cursor'}")
            return Position(value, pos.size)
        if s.style == "header_cursor":
            value = headers.get(s.header or "X-Next-Cursor", "").strip()
            _not_a_url(value, f"{s.header} header", f"header: {s.header}")
            return Position(value, pos.size) if value else None
        if s.style == "next_url":
            if s.header is not None:
                raw, source = headers.get(s.header), f"{s.header} header"
            else:
                raw, source = search(s.next or "next", body), f"next-page field {s.next!r}"
            if raw is None or raw == "":
                return None
            if not isinstance(raw, str):
                raise ToolFailure.of(
                    ErrorCode.UPSTREAM_INVALID_RESPONSE,
                    f"the upstream's next-page URL ({source}) is a {type(raw).__name__}, not a string",
                )
            target = raw.strip()
            if target.startswith("<") and target.endswith(">"):
                target = target[1:-1].strip()  # written like a Link target
            absolute = urljoin(url, target)  # a relative URL is relative to the page's own URL
            check_link(absolute, base, source)
            return _onward(pos, Position(path_and_query(without_query(absolute, drop)), pos.size), source)
        link = next_link(headers.get("link", ""), url)
        if link is None:
            return None
        check_link(link, base)
        return _onward(pos, Position(path_and_query(without_query(link, drop)), pos.size), "Link header")

    @staticmethod
    def _at(pos: Position, skip: int, style: str) -> Position:
        if style == "offset" and isinstance(pos.at, int):
            return Position(pos.at + skip, pos.size)
        return Position(pos.at, pos.size, skip)

    async def collect(self, send: Send, op: OperationSpec, start: Position, want: int, base: httpx2.URL,
                      drop: set[str]) -> Collected:
        """Up to `want` items from `start`: one upstream page, or (auto) pages until enough or the budget."""
        s = self.spec
        out = Collected(items=[], resume=[], next=start)
        current = start
        while out.next is not None and len(out.items) < want and out.pages < s.max_pages:
            current = out.next
            if s.style == "offset" and current.skip:
                current = self._at(current, current.skip, "offset")
            headers, body, url = await send(self.request(op, current, base, drop))
            out.pages += 1
            page = self._items(body)
            total = self._total(body)
            if total is not None:
                out.total = total
            following = self._next(current, body, headers, url, page, total, base, drop)
            available = page[current.skip:]
            room = want - len(out.items)
            for j, item in enumerate(available[:room]):
                out.items.append(item)
                out.resume.append(self._at(current, current.skip + j, s.style))
            if len(available) > room:
                out.next = self._at(current, current.skip + room, s.style)
                break
            out.next = following
            if available and not s.auto:
                break  # one upstream page per call unless the overlay asks to follow
        return out


# ============================================================================ Link headers


_LINK = re.compile(r'<([^>]*)>((?:\s*;\s*[^;,"=\s]+\s*(?:=\s*(?:"(?:[^"\\]|\\.)*"|[^;,]*))?)*)')
_PARAM = re.compile(r';\s*([^;=\s]+)\s*(?:=\s*(?:"((?:[^"\\]|\\.)*)"|([^;,]*)))?')


def next_link(header: str, request_url: str) -> str | None:
    """The absolute URL of rel="next" in an RFC 8288 Link header (relative URLs resolved)."""
    for m in _LINK.finditer(header):
        target, params = m.group(1).strip(), m.group(2)
        for p in _PARAM.finditer(params):
            if p.group(1).lower() == "rel":
                rels = (p.group(2) if p.group(2) is not None else p.group(3) or "").lower().split()
                if "next" in rels:
                    return str(urljoin(request_url, target))
    return None


def _origin(scheme: str, host: str, port: int | None) -> tuple[str, str, int | None]:
    return (scheme.lower(), host.lower(), port or {"http": 80, "https": 443}.get(scheme.lower()))


def _onward(current: Position, following: Position, source: str) -> Position:
    """A next page that is the page itself would make a listing that never ends."""
    if current.at is not None and following.at == current.at:
        raise ToolFailure.of(
            ErrorCode.UPSTREAM_INVALID_RESPONSE,
            f"the upstream's {source} points the next page to the page itself; the listing cannot go on",
        )
    return following


def _not_a_url(value: Any, source: str, key: str) -> None:
    """A cursor style that meets a next-page URL: sending it back as a cursor would only get a 400."""
    if isinstance(value, str) and re.match(r"(?i)https?://", value):
        raise ToolFailure.of(
            ErrorCode.CONFIGURATION_ERROR,
            f"the upstream's {source} holds the next page's URL, not a cursor; this tool's overlay needs "
            f"`pagination: {{style: next_url, {key}}}` (tell the server's operator)",
        )


def _dot_segment(path: str) -> bool:
    """A `.` or `..` segment, percent-encoded or not: the server may resolve it outside the base path."""
    return any(unquote(seg) in (".", "..") for seg in re.split(r"[/\\]", path))


def check_link(url: str, base: httpx2.URL, source: str = "Link header") -> None:
    """A next-page URL must be on the upstream's origin, under its base path, without credentials.

    The same origin check as redirects (upstream/client.py): scheme, host and port; and the path stays
    under the base URL's path (no dot segments that a server would resolve out of it).
    """
    parts = urlsplit(url)
    try:
        port = parts.port
    except ValueError:
        port = -1
    same = _origin(parts.scheme, parts.hostname or "", port) == _origin(base.scheme, base.host, base.port)
    prefix = _base_path(base)
    inside = (parts.path == prefix or parts.path.startswith(prefix + "/") or not prefix) and not _dot_segment(
        parts.path)
    if not same or not inside or parts.username or parts.password or "{" in parts.path or "}" in parts.path:
        if not same:
            where = f"{parts.scheme}://{parts.hostname or ''}" + (f":{port}" if parts.port else "")
        elif not inside:
            where = f"a path outside the API ({parts.path[:120]})"
        else:
            where = "a URL with credentials or template braces in it"
        raise ToolFailure.of(
            ErrorCode.UPSTREAM_INVALID_RESPONSE,
            f"the upstream's {source} points the next page to {where}, which is not the API; not followed",
        )


def _base_path(base: httpx2.URL) -> str:
    """The base URL's path as sent (still percent-encoded), without the trailing slash."""
    return base.raw_path.split(b"?")[0].decode("ascii").rstrip("/")


def path_and_query(url: str) -> str:
    """What a cursor keeps of a checked next-page URL: its path and query (the origin is the upstream's)."""
    parts = urlsplit(url)
    return urlunsplit(("", "", parts.path or "/", parts.query, ""))


def without_query(url: str, drop: set[str]) -> str:
    """The URL without the query parameters named in `drop` (the API key: a cursor is readable).

    The others stay exactly as written.
    """
    if not drop:
        return url
    parts = urlsplit(url)
    kept = [p for p in parts.query.split("&") if p and unquote_plus(p.split("=", 1)[0]) not in drop]
    return urlunsplit(parts._replace(query="&".join(kept)))


def link_operation(op: OperationSpec, url: str, base: httpx2.URL, drop: set[str]) -> OperationSpec:
    """A GET of the next-page URL: the operation's headers and cookies, the URL's path and query.

    `url` comes from a cursor (a path and query; older cursors held the whole URL): it is put on
    the upstream's origin and checked again before anything is sent.
    """
    host = f"[{base.host}]" if ":" in base.host else base.host
    origin = f"{base.scheme}://{host}" + (f":{base.port}" if base.port else "")
    url = urljoin(origin + "/", url)
    check_link(url, base)
    parts = urlsplit(url)
    prefix = _base_path(base)
    path = parts.path[len(prefix):] if prefix else parts.path
    # the query exactly as the upstream wrote it (decoding and re-encoding could change a token)
    query = "&".join(p for p in parts.query.split("&") if p and unquote_plus(p.split("=", 1)[0]) not in drop)
    kept = [p for p in op.params if p.location in ("header", "cookie")]
    return op.model_copy(update={"method": "GET", "path": path or "/", "params": kept, "body": None,
                                 "query": query or None})
