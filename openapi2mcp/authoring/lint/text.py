"""The word-level heuristics of the checks: useful descriptions, bounds stated in prose, near-identical
descriptions. Words are init's (`facts.split_words`), as are paging and dangerous operations
(authoring/paging.py, authoring/risk.py)."""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable

from openapi2mcp.authoring.facts import split_words


def description_problem(text: str | None, names: Iterable[str], min_words: int) -> str | None:
    """Why `text` does not tell a model what this is (None: it does).

    Missing, shorter than `min_words`, or nothing but one of `names` again (the operationId, the
    tool or argument name, "GET /path"): a model learns nothing from "listIssues: list issues".
    """
    if text is None or not text.strip():
        return "has no description"
    said = split_words(text)
    for name in names:
        if name and said == split_words(name):
            return f"has a description that only repeats {name!r}"
    if len(said) < min_words:
        return f"has a description of {len(said)} word{'s' if len(said) != 1 else ''}"
    return None


# --------------------------------------------------------------------------- bounds stated in prose

_NUMBER = r"(\d[\d,]*(?:\.\d+)?)"
_MAX = re.compile(
    r"\b(?:max(?:imum)?|at most|up to|no more than|not more than|cannot exceed|must not exceed|limit(?:ed)? to|"
    r"maximum value(?: is)?)\b[\s:=(]*(?:of\s+|is\s+)?" + _NUMBER + r"\s*([a-z]+)?", re.I)
_MIN = re.compile(r"\b(?:min(?:imum)?|at least|no less than)\b[\s:=(]*(?:of\s+|is\s+)?" + _NUMBER + r"\s*([a-z]+)?",
                  re.I)
_RANGE = re.compile(r"\b(?:between|from)\s+" + _NUMBER + r"\s+(?:and|to)\s+" + _NUMBER + r"\s*([a-z]+)?", re.I)
_PAREN_RANGE = re.compile(r"\(\s*" + _NUMBER + r"\s*(?:to|-|–)\s*" + _NUMBER + r"\s*([a-z]+)?\s*\)", re.I)
_LENGTH_UNITS = {"character", "characters", "chars", "char", "bytes", "letters"}
_ITEM_UNITS = {"items", "item", "elements", "entries", "values", "ids", "labels", "names", "tags", "ones"}


def _num(text: str) -> int | float:
    value = float(text.replace(",", ""))
    return int(value) if value.is_integer() else value


def stated_bounds(description: str, types: set[str]) -> dict[str, int | float]:
    """The JSON Schema bounds a description states in words ("max 100", "1 to 20 characters", "at most 10
    labels"), as keywords for a value of `types` (maximum for numbers, maxLength for strings, maxItems for
    arrays); only the ones that fit the type and the unit named."""
    out: dict[str, int | float] = {}

    def put(kind: str, value: str, unit: str | None) -> None:
        keyword = _keyword(kind, (unit or "").lower(), types)
        if keyword and keyword not in out:
            out[keyword] = _num(value)

    for m in _RANGE.finditer(description):
        put("min", m.group(1), m.group(3))
        put("max", m.group(2), m.group(3))
    for m in _PAREN_RANGE.finditer(description):
        put("min", m.group(1), m.group(3))
        put("max", m.group(2), m.group(3))
    for m in _MAX.finditer(description):
        put("max", m.group(1), m.group(2))
    for m in _MIN.finditer(description):
        put("min", m.group(1), m.group(2))
    return out


def _keyword(kind: str, unit: str, types: set[str]) -> str | None:
    if unit in _LENGTH_UNITS:
        return f"{kind}Length" if "string" in types else None
    if "array" in types and (unit in _ITEM_UNITS or not unit or unit not in _LENGTH_UNITS):
        return f"{kind}Items"
    if types & {"integer", "number"} and unit not in _ITEM_UNITS:
        return "maximum" if kind == "max" else "minimum"
    return None


# --------------------------------------------------------------------------- near-identical descriptions


def similar(a: str, b: str, threshold: float) -> float | None:
    """How alike two descriptions read, word by word (difflib's ratio), when at least `threshold`; else None."""
    wa, wb = split_words(a)[:120], split_words(b)[:120]
    if not wa or not wb:
        return None
    matcher = difflib.SequenceMatcher(None, wa, wb, autojunk=False)
    if matcher.real_quick_ratio() < threshold or matcher.quick_ratio() < threshold:
        return None  # the cheap upper bounds rule most pairs out
    ratio = matcher.ratio()
    return ratio if ratio >= threshold else None


def _stem(word: str) -> str:
    return word[:-1] if len(word) > 3 and word.endswith("s") else word


def names_tell_apart(a: str, b: str, name_a: str, name_b: str) -> bool:
    """Do two alike descriptions differ exactly where their tools' names do ("Flows sorted by name" beside
    "Variables sorted by name" for flows_list and variables_list)? Then the model can tell them apart."""
    distinct = {_stem(w) for w in split_words(name_a)} ^ {_stem(w) for w in split_words(name_b)}
    differing = {_stem(w) for w in split_words(a)} ^ {_stem(w) for w in split_words(b)}
    return bool(distinct & differing)
