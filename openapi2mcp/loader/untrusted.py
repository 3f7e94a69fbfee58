"""Limits every untrusted document is held to: spec files, the files they include, overlays.

A spec (and an overlay) may come from anyone, and the later stages walk, copy and serialise
what it holds. These checks run on the parsed data of each document, whatever reader produced it
(libyaml and `json` in loader/parse.py, ruamel.yaml in overlay/reading.py), so the rule is the same everywhere:

* **Nesting**: at most `MAX_NESTING` lists and mappings inside each other. Real specs stay under
  30 (the deepest points of GitHub, OpenAI, DigitalOcean and Stripe are 21 to 23). Deeper data
  breaks recursive code further down (copy, JSON encoders, pydantic's serialiser stops at 255
  levels, so a Manifest holding it cannot be written or sent), and a tool schema nested that deep
  is of no use to a model.
* **YAML aliases**: an alias makes one object appear in several places (or inside itself). An
  alias that contains itself is refused, and so is a document whose aliases would expand it far
  beyond its own size (a "billion laughs": 1 KB that becomes gigabytes when walked or copied).
* **Numbers**: integers of more than `MAX_INT_DIGITS` digits (Python refuses to convert longer
  ones to and from text) and numbers that are not finite (`1e999`, NaN, Infinity: not JSON) are
  refused with their place, by each reader (see `number_problem`).
"""

from __future__ import annotations

import math
import sys
from collections.abc import Iterable, Iterator
from typing import Any, Final

from openapi2mcp.errors import InputError

MAX_NESTING: Final = 100  # lists and mappings inside each other
MAX_INT_DIGITS: Final = 4300  # Python's default limit for int <-> str (sys.int_info)
ALIAS_GROWTH: Final = 20  # how much aliases may expand a document, relative to its size in bytes
ALIAS_FLOOR: Final = 10_000_000  # ... but small documents may always expand this far
NUMBER_HINT: Final = "write the value as a string (in quotes), or remove it"


def number_problem(literal: str) -> str | None:
    """What is wrong with a number as written in a document (None: nothing)."""
    if len(literal) < 300 and literal.lstrip("+-").isdigit():
        return None  # the common case, cheaply: a short integer
    digits = sum(c.isdigit() for c in literal)
    if digits > _int_digits() and not any(c in literal for c in ".eE"):
        return f"an integer of {digits:,} digits (at most {_int_digits():,} are accepted)"
    try:
        value = float(literal)
    except ValueError:  # YAML's own spellings
        value = math.inf if literal.lower().lstrip("+-") in (".inf", ".nan") else 0.0
    if not math.isfinite(value):
        shown = literal if len(literal) <= 40 else literal[:20] + "…" + literal[-10:]
        return f"{shown} is not a finite number (JSON has no NaN or Infinity)"
    return None


def _int_digits() -> int:
    limit = sys.get_int_max_str_digits()
    return min(limit, MAX_INT_DIGITS) if limit else MAX_INT_DIGITS


def check_document(document: Any, *, size: int, file: str, aliases: bool = True) -> bool:
    """Refuse nesting past MAX_NESTING, alias cycles and alias bombs (InputError naming `file`).

    `size` is the document's length in bytes or characters; `aliases=False` for data that cannot
    share parts (what `json` parses), which skips that check. Returns True when containers are
    shared (YAML aliases): the caller must then copy the data into a tree before changing it.
    """
    if not isinstance(document, (dict, list)):
        return False
    shared, deep = _walk(document, aliases)
    if deep:
        raise _too_deep(document, file)
    if not shared:
        return False
    try:
        weight, height = _expanded(document, limit=ALIAS_GROWTH * size + ALIAS_FLOOR)
    except _AliasCycle:
        raise InputError.at(
            "a YAML alias refers to an object that contains it (a cycle)",
            file=file,
            hint="use a $ref for a recursive schema, not a YAML anchor",
        ) from None
    if weight < 0:
        raise InputError.at(
            "YAML aliases expand this document far beyond its size (an alias bomb?)",
            file=file,
            hint="use $ref instead of YAML anchors for repeated parts",
        )
    if height > MAX_NESTING:
        raise _too_deep(document, file, through_aliases=True)
    return True


def _children(node: dict[str, Any] | list[Any]) -> Iterable[Any]:
    return node.values() if isinstance(node, dict) else node


def _walk(document: Any, aliases: bool) -> tuple[bool, bool]:
    """(containers are shared, nesting passes MAX_NESTING), level by level.

    A container reached again is not walked again, so each level holds its shallowest
    containers: exact for trees; with shared parts `_expanded` measures the real nesting.
    (Level lists and comprehensions: 2.5x faster than a stack of (node, depth) on GitHub's spec.)
    """
    level, depth, shared = [document], 1, False
    seen: set[int] = set()
    while level:
        if depth > MAX_NESTING:
            return shared, True
        if aliases:
            fresh = {id(n): n for n in level if id(n) not in seen}
            seen.update(fresh)
            shared = shared or len(fresh) < len(level)
            level = list(fresh.values())
        below: list[Any] = []
        for node in level:
            below.extend([c for c in (node.values() if isinstance(node, dict) else node) if isinstance(c, _CONTAINERS)])
        level, depth = below, depth + 1
    return shared, False


_CONTAINERS = (dict, list)


class _AliasCycle(Exception):
    pass


def _expanded(document: Any, *, limit: int) -> tuple[int, int]:
    """(size written out, nesting) of a document with shared parts; size -1 past `limit`. Linear."""
    weight: dict[int, tuple[int, int]] = {}
    on_path = {id(document)}
    stack: list[tuple[Any, Iterator[Any]]] = [(document, iter(_children(document)))]
    while stack:
        node, pending = stack[-1]
        for child in pending:
            if isinstance(child, (dict, list)) and id(child) not in weight:
                if id(child) in on_path:
                    raise _AliasCycle
                on_path.add(id(child))
                stack.append((child, iter(_children(child))))
                break
        else:
            stack.pop()
            on_path.discard(id(node))
            total, height = 1 + (sum(len(str(k)) for k in node) if isinstance(node, dict) else 0), 1
            for child in _children(node):
                if isinstance(child, (dict, list)):
                    w, h = weight[id(child)]
                    total, height = total + w, max(height, h + 1)
                else:
                    total += len(child) if isinstance(child, str) else 1
            if total > limit:
                return -1, height
            weight[id(node)] = (total, height)
    return weight[id(document)]


def _too_deep(document: Any, file: str, *, through_aliases: bool = False) -> InputError:
    path, node = _deep_path(document)
    line = getattr(getattr(node, "lc", None), "line", None)  # ruamel keeps where each container starts
    shown = "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in path[:8])
    more = "/…" if len(path) > 8 else ""
    how = " (through YAML aliases)" if through_aliases else ""
    return InputError.at(
        f"the data is nested more than {MAX_NESTING} levels deep{how}, at {shown}{more}",
        file=file,
        line=line + 1 if isinstance(line, int) else None,
        hint="flatten the structure (move deep inline schemas into components and refer to them with $ref)",
    )


def _deep_path(document: Any) -> tuple[list[str | int], Any]:
    """The keys down to the first container nested past MAX_NESTING (for the error message)."""
    stack: list[tuple[Any, list[str | int]]] = [(document, [])]
    seen: set[tuple[int, int]] = set()  # (container, depth): a shared part is searched once per depth
    while stack:
        node, path = stack.pop()
        if len(path) >= MAX_NESTING:
            return path, node
        if (id(node), len(path)) in seen:
            continue
        seen.add((id(node), len(path)))
        items = node.items() if isinstance(node, dict) else enumerate(node)
        stack.extend((v, [*path, k]) for k, v in items if isinstance(v, (dict, list)))
    return [], document
