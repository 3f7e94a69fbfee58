"""What came back: the response, its body decoded (JSON, text, bytes, nothing), safely.

JSON nested deeper than MAX_JSON_DEPTH is refused before it is parsed (`json_depth_exceeds`, at
C speed); NaN and Infinity become null; lone surrogates become U+FFFD; a body's charset is the
one declared, UTF-8 when none. `clip_quote` and `retry_after` read what failures quote and wait for.
"""

from __future__ import annotations

import codecs
import email.utils
import itertools
import json
import operator
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Final, Literal

import httpx2

from openapi2mcp.errors import ErrorCode, ToolFailure

QUOTE_LIMIT: Final = 300


@dataclass(frozen=True)
class UpstreamResponse:
    status: int
    reason: str
    headers: httpx2.Headers
    body: bytes
    method: str
    url: str  # redacted
    operation: str
    elapsed_ms: int

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300

    @property
    def media_type(self) -> str:
        return self.headers.get("content-type", "").split(";")[0].strip().lower()

    @property
    def charset(self) -> str | None:
        m = re.search(r"charset=\"?([\w.:-]+)", self.headers.get("content-type", ""), re.I)
        return m.group(1) if m else None

    def provenance(self, step: str | None = None) -> dict[str, Any]:
        out: dict[str, Any] = {"operation": self.operation, "method": self.method, "url": self.url}
        out["status"] = self.status
        out["ms"] = self.elapsed_ms
        if step is not None:
            out["step"] = step
        return out


@dataclass(frozen=True)
class Payload:
    """A decoded body: JSON value, text, bytes, or nothing."""

    kind: Literal["json", "text", "binary", "empty"]
    value: Any
    media_type: str = ""
    raw: bytes = field(default=b"", repr=False)


_TEXT_TYPES: Final = frozenset(
    {
        "application/xml",
        "application/yaml",
        "application/x-yaml",
        "application/javascript",
        "application/graphql",
        # text by another name: decoded, and scrubbed of secrets like any text (not refused as binary)
        "application/x-ndjson",
        "application/ndjson",
        "application/jsonl",
        "application/x-jsonlines",
        "application/json-seq",
        "application/x-www-form-urlencoded",
        "application/csv",
        "application/sql",
    }
)


def _is_text(mt: str) -> bool:
    return mt.startswith("text/") or mt in _TEXT_TYPES or mt.endswith(("+xml", "+yaml", "+json-seq"))


# A lone surrogate: valid JSON ("\ud83d" of an emoji cut in half, as UTF-16 string APIs do), no valid
# Unicode. It would fail every later step (UTF-8 encoding for sizes, URLs, the MCP response), so
# decoding replaces it with U+FFFD, as invalid UTF-8 in a text body is replaced.
_SURROGATE: Final = re.compile(rb"\\u[dD][89a-fA-F]|\xed[\xa0-\xbf]")

# Deeper upstream JSON is refused: the MCP SDK serialises at most 255 levels (a result wraps the
# body in a few), and every walk over a result recurses. Real APIs stay far below (GitHub: ~10).
MAX_JSON_DEPTH: Final = 128
_NOT_BRACKETS: Final = bytes(b for b in range(256) if b not in b'"[]{}')
_DEPTH_STEPS: Final = bytes.maketrans(b"[{]}", b"\x02\x02\x00\x00")


class JsonTooDeep(ValueError):
    """Upstream JSON nested deeper than MAX_JSON_DEPTH."""


def _brackets(body: bytes) -> bytes:
    """The brackets of a JSON text that are not inside strings, in order (C-speed byte operations)."""
    if b"\\" in body:
        body = body.replace(b"\\\\", b"").replace(b'\\"', b"")  # escaped quotes end no string
    kept = body.translate(None, _NOT_BRACKETS).replace(b'""', b"")  # strings without brackets vanish
    return re.sub(rb'"[^"]*"', b"", kept) if b'"' in kept else kept


def json_depth_exceeds(body: bytes) -> bool:
    """Whether the JSON text `body` nests arrays/objects deeper than MAX_JSON_DEPTH, without parsing it.

    Each pass deletes the innermost pairs, one or two levels (`[]` then `{}`), so a text that
    empties in n passes is between n and 2n deep; only in between is the depth counted exactly.
    """
    if body.count(b"[") + body.count(b"{") <= MAX_JSON_DEPTH:
        return False
    brackets = rest = _brackets(body)
    passes = 0
    while rest:
        shorter = rest.replace(b"[]", b"").replace(b"{}", b"")
        if len(shorter) == len(rest):
            break  # unbalanced: not JSON, which parsing reports
        rest, passes = shorter, passes + 1
        if passes > MAX_JSON_DEPTH:
            return True
    if 2 * passes <= MAX_JSON_DEPTH:
        return False
    # depth at each bracket = 2 * (opening brackets so far) - (brackets so far)
    deepest: int = max(map(operator.sub, itertools.accumulate(brackets.translate(_DEPTH_STEPS)), itertools.count(1)))
    return deepest > MAX_JSON_DEPTH


def _no_constant(name: str) -> None:
    """NaN and ±Infinity are not JSON; Python and JavaScript servers write them. They become null."""


def loads(body: bytes) -> Any:
    if json_depth_exceeds(body):
        raise JsonTooDeep(f"nested deeper than {MAX_JSON_DEPTH} levels")
    try:
        value = json.loads(body, parse_constant=_no_constant)
    except RecursionError:  # pragma: no cover - the depth check comes first
        raise JsonTooDeep(f"nested deeper than {MAX_JSON_DEPTH} levels") from None
    return _whole_characters(value) if _SURROGATE.search(body) else value


def _whole_characters(value: Any) -> Any:
    if isinstance(value, str):
        return value.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    if isinstance(value, list):
        return [_whole_characters(v) for v in value]
    if isinstance(value, dict):
        return {_whole_characters(k): _whole_characters(v) for k, v in value.items()}
    return value


def _json_payload(resp: UpstreamResponse, media_type: str) -> Payload:
    try:
        return Payload("json", loads(resp.body), media_type)
    except JsonTooDeep:
        raise ToolFailure.of(
            ErrorCode.UPSTREAM_INVALID_RESPONSE,
            f"the upstream sent JSON nested deeper than {MAX_JSON_DEPTH} levels ({len(resp.body)} bytes), more "
            "than this server passes on; ask for less (fewer fields, no expansion of nested objects)",
            status=resp.status,
        ) from None


def _text(resp: UpstreamResponse) -> str:
    """The body as text in its declared charset (UTF-8 when none); an unknown one is an upstream fault."""
    charset = resp.charset or "utf-8"
    try:
        codecs.lookup(charset)
    except LookupError:
        try:
            return resp.body.decode("utf-8")
        except UnicodeDecodeError:
            raise ToolFailure.of(
                ErrorCode.UPSTREAM_INVALID_RESPONSE,
                f"the upstream declared the character set {clip_quote(charset, 60)!r} ({resp.media_type}), "
                "which this server does not know, and the body is not UTF-8",
                status=resp.status,
            ) from None
    return resp.body.decode(charset, "replace")


def decode(resp: UpstreamResponse) -> Payload:
    mt = resp.media_type
    if not resp.body or resp.method == "HEAD":
        return Payload("empty", None, mt)
    if is_json_media(mt):
        try:
            return _json_payload(resp, mt)
        except ValueError:
            raise ToolFailure.of(
                ErrorCode.UPSTREAM_INVALID_RESPONSE,
                f"the upstream sent invalid JSON ({mt}, {len(resp.body)} bytes)",
                status=resp.status,
            ) from None
    if _is_text(mt):
        return Payload("text", _text(resp), mt)
    if not mt:  # undeclared: JSON if it parses, text if it decodes, else bytes
        try:
            return _json_payload(resp, "application/json")
        except ValueError:
            pass
        try:
            return Payload("text", resp.body.decode("utf-8"), "text/plain")
        except UnicodeDecodeError:
            return Payload("binary", resp.body, "application/octet-stream", resp.body)
    return Payload("binary", resp.body, mt, resp.body)


def is_json_media(media_type: str) -> bool:
    mt = media_type.split(";")[0].strip().lower()
    return mt == "application/json" or mt.endswith("+json")


def clip_quote(text: str, limit: int = QUOTE_LIMIT) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def retry_after(headers: httpx2.Headers) -> float | None:
    value = headers.get("retry-after", "").strip()
    if not value:
        return None
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, round((when - datetime.now(UTC)).total_seconds(), 1))
