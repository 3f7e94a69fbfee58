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
