"""Cuts: a result is fitted under `max_items` and `max_bytes`, and stays valid JSON.

The largest lists are cut first, then long strings are shortened (`fit`). Cuts never add keys to
the structured content: they are reported as `Cut`s, which result.py puts into `_meta` and a notice.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from openapi2mcp.errors import ErrorCode, ToolFailure
from openapi2mcp.shape.describe import error_path
from openapi2mcp.shape.jsonsize import dumps, json_size, utf8_size


@dataclass(frozen=True)
class Cut:
    """One place where the result was shortened, and why."""

    path: str  # where in the structured content ("" = the whole result, "*" = every string)
    reason: str  # "max_items" | "max_bytes"
    kept: int
    total: int
    unit: str  # "items" | "bytes" | "characters"
    resumable: bool = False  # a paged list: the items left out come with the next cursor

    def meta(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "path": self.path,
            "reason": self.reason,
            "kept": self.kept,
            "total": self.total,
            "unit": self.unit,
        }
        if self.resumable:
            out["resume"] = "next_cursor"
        return out

    def sentence(self) -> str:
        if self.path == "*":
            return f"strings longer than {self.kept} characters were shortened (the longest had {self.total})"
        where = self.path or "the result"
        if self.resumable:
            return f"{where}: {self.kept} of {self.total} {self.unit} returned, {self.total - self.kept} deferred"
        return f"{where}: {self.kept} of {self.total} {self.unit} kept, {self.total - self.kept} dropped"


def notice(cuts: Iterable[Cut]) -> str:
    """The text block that tells the model a result is partial and how to get the rest."""
    cuts = list(cuts)
    reasons = sorted({c.reason for c in cuts})
    text = "Note: this result was cut (" + ", ".join(reasons) + " limit): " + "; ".join(c.sentence() for c in cuts)
    if all(c.resumable for c in cuts):
        return text + ". Nothing is lost: call again with cursor = next_cursor to get the deferred items."
    if any(c.resumable for c in cuts):
        text += ". Deferred items come with cursor = next_cursor"
    return text + ". Ask for less (filters, a smaller page or limit, fewer fields) to see the rest."


def _lists(value: Any, path: tuple[str | int, ...] = ()) -> Iterator[tuple[tuple[str | int, ...], list[Any]]]:
    """Lists of results: arrays reachable through object properties, not arrays inside items."""
    if isinstance(value, list):
        yield path, value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _lists(item, (*path, key))


def _replace(value: Any, path: tuple[str | int, ...], new: Any) -> Any:
    """A copy of `value` with the node at `path` replaced (only the spine is copied)."""
    if not path:
        return new
    head, rest = path[0], path[1:]
    if isinstance(value, dict):
        return {**value, head: _replace(value[head], rest, new)}
    copy = list(value)
    copy[head] = _replace(copy[head], rest, new)  # type: ignore[index]
    return copy


def cut_items(value: Any, max_items: int | None) -> tuple[Any, list[Cut]]:
    if max_items is None:
        return value, []
    cuts: list[Cut] = []
    for path, items in list(_lists(value)):
        if len(items) > max_items:
            value = _replace(value, path, items[:max_items])
            cuts.append(Cut(error_path(path), "max_items", max_items, len(items), "items"))
    return value, cuts


def _fit_lists(value: Any, limit: int) -> tuple[Any, list[Cut]]:
    """Cut the largest lists until the value fits (or every list is down to one item)."""
    cuts: list[Cut] = []
    done: set[tuple[str | int, ...]] = set()
    while (whole := json_size(value)) > limit:
        candidates = [(json_size(v), p, v) for p, v in _lists(value) if p not in done and len(v) > 1]
        if not candidates:
            break
        size, path, items = max(candidates, key=lambda c: c[0])
        done.add(path)
        budget = limit - (whole - size)
        keep, used = 0, 2  # "[]"
        for item in items:
            used += json_size(item) + (1 if keep else 0)
            if used > budget:
                break
            keep += 1
        keep = max(keep, 1)
        value = _replace(value, path, items[:keep])
        cuts.append(Cut(error_path(path), "max_bytes", keep, len(items), "items"))
    return value, cuts


def _map_strings(value: Any, fn: Callable[[str], str]) -> Any:
    if isinstance(value, str):
        return fn(value)
    if isinstance(value, list):
        return [_map_strings(v, fn) for v in value]
    if isinstance(value, dict):
        return {k: _map_strings(v, fn) for k, v in value.items()}
    return value


def _longest_string(value: Any) -> int:
    if isinstance(value, str):
        return len(value)
    if isinstance(value, list):
        return max((_longest_string(v) for v in value), default=0)
    if isinstance(value, dict):
        return max((_longest_string(v) for v in value.values()), default=0)
    return 0


def _shorten(length: int) -> Callable[[str], str]:
    return lambda s: s if len(s) <= length else s[:length] + "…"


def _fit_strings(value: Any, limit: int) -> tuple[Any, list[Cut]]:
    longest = _longest_string(value)
    if json_size(value) <= limit or longest == 0:
        return value, []
    lo, hi = 0, longest  # find the longest string length that still fits
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if json_size(_map_strings(value, _shorten(mid))) <= limit:
            lo = mid
        else:
            hi = mid - 1
    return _map_strings(value, _shorten(lo)), [Cut("*", "max_bytes", lo, longest, "characters")]


def fit(value: Any, limit: int) -> tuple[Any, str, list[Cut]]:
    """Fit a JSON value under `limit` serialised bytes, or raise RESPONSE_TOO_LARGE.

    Returns the value, its compact JSON text (measured, so it is never serialised twice) and the cuts.
    """
    text = dumps(value)
    if utf8_size(text) <= limit:
        return value, text, []
    value, cuts = _fit_lists(value, limit)
    value, more = _fit_strings(value, limit)
    cuts += more
    text = dumps(value)
    if utf8_size(text) > limit:
        raise too_large(limit)
    return value, text, cuts


def too_large(limit: int) -> ToolFailure:
    return ToolFailure.of(
        ErrorCode.RESPONSE_TOO_LARGE,
        f"the result does not fit in this tool's limit of {limit} bytes even when shortened; "
        "ask for less (filters, a smaller page or limit, fewer fields)",
    )
