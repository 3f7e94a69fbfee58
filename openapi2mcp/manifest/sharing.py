"""Repeated schema subtrees written once in a Manifest file: `share` (the writer) and `unshare` (the reader).

A big API's tool schemas repeat the same entities again and again: Microsoft Graph's 11,422 tools
spell out 86 MB of schemas that hold 48,302 distinct nodes, GitHub's 5.7 MB hold 9,229. A file
that expands them is several times larger than it needs to be (Graph's: 204 MB against 30), and
every reader parses and keeps every copy.

So the file keeps each subtree that would be written twice or more (and is not tiny) once, in a
top-level `"shared"` list, and writes `{"$o2m": N}` where it occurs: in a tool's `input_schema`,
`output_schema` and its branches' `output_schema`, and inside later entries of the list (an entry
only refers to earlier ones, so there is no cycle and one pass in order resolves them). Reading
puts one object back everywhere it was written: a Manifest read from its file holds each
repeated subtree once in memory too.

What the file means does not change: the content hash is over the expanded payload, so a
Manifest's `content_hash` is the same written either way, and a file without `"shared"` (an older
writer's, or one with nothing worth sharing) is read as before. A document whose own schemas
contain an object that looks like a marker (`{"$o2m": ...}` alone) is written expanded.
"""

from __future__ import annotations

import json
from typing import Any, Final

SHARED_KEY: Final = "shared"
MARK: Final = "$o2m"
MIN_SIZE: Final = 96  # compact JSON bytes below which a repeated subtree is written out again (a marker is ~14)

_ENCODE = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode

# A node's structural key: ("d", ((key, part), ...)) or ("l", (part, ...)), where a part is a child
# node's id (int), a string value as it is, or ("j", its JSON) for any other scalar (True, 1 and 1.0
# differ in JSON, not as Python dict keys).
Part = int | str | tuple[str, str]


class _Nodes:
    """Every distinct dict and list under the roots, children before parents (hash-consing)."""

    def __init__(self) -> None:
        self.ids: dict[tuple[str, tuple[Any, ...]], int] = {}
        # id(obj) -> node: objects compiling already shared are walked once (the payload keeps them all alive)
        self.of_object: dict[int, int] = {}
        self.objects: list[Any] = []  # node -> one object with that structure (alive, so ids stay valid)
        self.parts: list[tuple[Any, ...]] = []
        self.sizes: list[int] = []  # compact JSON bytes, expanded (escapes not counted: a measure, not a length)
        self.children: list[list[int]] = []
        self.clash = False  # a dict that reads as a marker: the file is written expanded

    def node(self, value: dict[str, Any] | list[Any]) -> int:
        known = self.of_object.get(id(value))
        if known is not None:
            return known
        children: list[int] = []
        size = 2
        if isinstance(value, dict):
            self.clash = self.clash or (len(value) == 1 and MARK in value)
            items = []
            for k, v in value.items():
                part, bytes_ = self._part(v, children)
                items.append((k, part))
                size += len(k) + 4 + bytes_
            key: tuple[str, tuple[Any, ...]] = ("d", tuple(items))
        else:
            parts = []
            for v in value:
                part, bytes_ = self._part(v, children)
                parts.append(part)
                size += 1 + bytes_
            key = ("l", tuple(parts))
        found = self.ids.get(key)
        if found is None:
            found = self.ids[key] = len(self.objects)
            self.objects.append(value)
            self.parts.append(key[1])
            self.sizes.append(size)
            self.children.append(children)
        self.of_object[id(value)] = found
        return found

    def _part(self, value: Any, children: list[int]) -> tuple[Part, int]:
        if isinstance(value, (dict, list)):
            child = self.node(value)
            children.append(child)
            return child, self.sizes[child]
        if isinstance(value, str):
            return value, len(value) + 2
        text = _ENCODE(value)
        return ("j", text), len(text)


def _schema_slots(payload: dict[str, Any]) -> list[tuple[dict[str, Any], str]]:
    """(the dict, its key) of every schema the file may share: tools' and their branches' schemas."""
    slots: list[tuple[dict[str, Any], str]] = []
    for tool in _dicts(payload.get("tools")):  # a damaged file's odd shapes are left to the validation
        slots += [(tool, key) for key in ("input_schema", "output_schema") if isinstance(tool.get(key), dict)]
        slots += [(branch, "output_schema") for branch in _dicts(tool.get("branches"))
                  if isinstance(branch.get("output_schema"), dict)]
    return slots


def _dicts(value: Any) -> list[dict[str, Any]]:
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


def share(payload: dict[str, Any]) -> dict[str, Any]:
    """The payload as the file holds it: repeated schema subtrees in `"shared"`, markers where they were.

    `payload` is left as it is (the tools and branches that change are copied); without anything
    worth sharing it is returned as it is.
    """
    slots = _schema_slots(payload)
    nodes = _Nodes()
    roots = [nodes.node(holder[key]) for holder, key in slots]
    if nodes.clash:
        return payload
    shared = _to_share(nodes, roots)
    if not shared:
        return payload
    index: dict[int, int] = {}
    table: list[Any] = []
    for node in sorted(shared):  # children were numbered before their parents
        index[node] = len(table)
        table.append(_written(nodes, node, index))
    copies: dict[int, dict[str, Any]] = {}  # id(original tool or branch) -> its copy in the file
    out = dict(payload)
    out["tools"] = tools = []
    for tool in payload["tools"]:
        copied = copies[id(tool)] = dict(tool)
        if tool.get("branches"):
            copied["branches"] = []
            for branch in tool["branches"]:
                copied["branches"].append(copies.setdefault(id(branch), dict(branch)))
        tools.append(copied)
    for (holder, key), root in zip(slots, roots, strict=True):
        copies[id(holder)][key] = {MARK: index[root]} if root in index else _written(nodes, root, index)
    out[SHARED_KEY] = table
    return out


def _to_share(nodes: _Nodes, roots: list[int]) -> set[int]:
    """The nodes that would be written twice or more (and are not tiny), counting a shared one once.

    Parents come after their children in node order, so going down from the last node sees every
    parent of a node before the node: how often it is written is then known when it is reached.
    """
    written = [0] * len(nodes.objects)
    for root in roots:
        written[root] += 1
    shared: set[int] = set()
    for node in range(len(written) - 1, -1, -1):
        times = written[node]
        if times >= 2 and nodes.sizes[node] >= MIN_SIZE:
            shared.add(node)
            times = 1
        for child in nodes.children[node]:
            written[child] += times
    return shared


def _written(nodes: _Nodes, node: int, index: dict[int, int]) -> Any:
    """The JSON of `node` with its shared descendants as markers (itself written out)."""

    def part(p: Any, original: Any) -> Any:
        if isinstance(p, int):
            return {MARK: index[p]} if p in index else _written(nodes, p, index)
        return original

    value, parts = nodes.objects[node], nodes.parts[node]
    if isinstance(value, dict):
        return {k: part(p, value[k]) for (k, p) in parts}
    return [part(p, v) for p, v in zip(parts, value, strict=True)]


class SharingError(ValueError):
    """A `"shared"` list or a marker that cannot be resolved, or one that expands far beyond the file."""


# How far the markers may expand a file's schemas, in JSON objects and arrays, relative to the ones it
# holds: Microsoft Graph's expand about 15-fold. An entry named twice by the next, and so on, doubles
# at every step (a "billion laughs"): what walks the expanded schemas (tools/list, hashing, checks)
# would never end, so such a file is refused, as YAML alias bombs are in specs.
EXPANSION: Final = 100
EXPANSION_FLOOR: Final = 5_000_000


def unshare(data: dict[str, Any]) -> None:
    """Resolve a parsed Manifest file's markers in place and drop its `"shared"` list (none: nothing to do)."""
    table = data.pop(SHARED_KEY, None)
    if table is None:
        return
    if not isinstance(table, list):
        raise SharingError(f'"{SHARED_KEY}" is not a list')
    resolver = _Resolver(table)
    for i, entry in enumerate(table):
        table[i] = resolver.entry(i, entry)
    expanded = sum(resolver.expanded(holder, key) for holder, key in _schema_slots(data))
    if expanded > EXPANSION * resolver.held + EXPANSION_FLOOR:
        raise SharingError(f"its shared schemas expand to {expanded:,} objects and arrays from "
                           f"{resolver.held:,} (more than {EXPANSION} times): a damaged or hostile file")


class _Resolver:
    """Markers replaced by their entries, counting the objects and arrays held and what they expand to."""

    def __init__(self, table: list[Any]) -> None:
        self.table = table
        self.weights: list[int] = []  # entry -> objects and arrays it stands for, expanded
        self.held = 0  # objects and arrays in the file's schemas and entries
        self._count = 0

    def entry(self, at: int, value: Any) -> Any:
        self._count = 0
        value = self._resolved(value, at)
        self.weights.append(self._count)
        return value

    def expanded(self, holder: dict[str, Any], key: str) -> int:
        """Resolve `holder[key]` in place; what it expands to."""
        self._count = 0
        holder[key] = self._resolved(holder[key], len(self.table))
        return self._count

    def _resolved(self, value: Any, before: int) -> Any:
        """`value` with every marker replaced by its entry (only entries below `before` may be named).

        Every object and array of the file's schemas passes here once (Graph: 165,000): exact type
        checks, and a child is stored again only when it was a marker.
        """
        kind = type(value)
        if kind is dict:
            if len(value) == 1 and MARK in value:
                at = value[MARK]
                if type(at) is not int or not 0 <= at < before:
                    raise SharingError(f"{json.dumps(value)} names no earlier shared entry")
                self._count += self.weights[at]
                return self.table[at]
            self.held += 1
            self._count += 1
            for k, v in value.items():
                if type(v) is dict or type(v) is list:
                    found = self._resolved(v, before)
                    if found is not v:
                        value[k] = found
        elif kind is list:
            self.held += 1
            self._count += 1
            for i, v in enumerate(value):
                if type(v) is dict or type(v) is list:
                    found = self._resolved(v, before)
                    if found is not v:
                        value[i] = found
        return value
