"""Media types: which one a request body is sent in, which ones are JSON."""

from __future__ import annotations

_FORMS = {"application/x-www-form-urlencoded": 1, "multipart/form-data": 2}


def is_json(media: str) -> bool:
    """application/json or any +json type (parameters such as charset ignored)."""
    base = media.split(";")[0].strip().lower()
    return base == "application/json" or base.endswith("+json")


def reads_as_json(media: str) -> bool:
    """A documented response media type whose schema describes a JSON body: JSON, or `*/*`."""
    return is_json(media) or media.split(";")[0].strip() == "*/*"


def pick_media(media_types: list[str]) -> str:
    """The media type to send: JSON first, then URL-encoded and multipart forms, then the first other."""

    def rank(m: str) -> int:
        return 0 if is_json(m) else _FORMS.get(m.split(";")[0].strip().lower(), 3)

    return sorted(media_types, key=rank)[0]


_BINARY_PREFIXES = ("image/", "audio/", "video/", "font/")
_BINARY_TYPES = frozenset({
    "application/octet-stream", "application/pdf", "application/zip", "application/gzip", "application/x-gzip",
    "application/x-tar", "application/x-bzip2", "application/x-xz", "application/x-7z-compressed",
    "application/zstd", "application/wasm", "application/vnd.android.package-archive", "application/java-archive",
})


def sends_bytes(media: str, schema: dict[str, object]) -> bool:
    """A whole request body of raw bytes (a file upload, a tar archive): the model gives it base64.

    Binary by the schema (`format: binary`; OpenAPI 3.1's `contentMediaType` of a non-text type) in any
    media type, or a string (or schema-less) body in a binary media type. A `contentEncoding` says the
    body is already that encoding's text: it is sent as written. An object or array schema under
    `application/octet-stream` (Docker's specs declare JSON bodies so) is JSON, not bytes.
    """
    base = media.split(";")[0].strip().lower()
    if is_json(base) or base in _FORMS or "contentEncoding" in schema:
        return False
    if is_bytes(schema):
        return True
    if base not in _BINARY_TYPES and not base.startswith(_BINARY_PREFIXES):
        return False
    kind = schema.get("type")
    return kind in (None, "string") and "properties" not in schema and "items" not in schema


def is_bytes(schema: dict[str, object]) -> bool:
    """A string schema of raw bytes (a file; a multipart file part, a whole body): `format: binary`, or 3.1's
    `contentMediaType` of a non-text type without a `contentEncoding` (with one, the value is that encoding's
    text, sent as written; so is 3.0's `format: byte`, base64 text by definition)."""
    if "contentEncoding" in schema:
        return False
    content = schema.get("contentMediaType")
    return schema.get("format") == "binary" or (isinstance(content, str) and not _is_text(content))


def _is_text(media: str) -> bool:
    base = media.split(";")[0].strip().lower()
    return base.startswith("text/") or is_json(base) or base.endswith(("+xml", "/xml"))
