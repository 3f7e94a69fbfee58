"""Bundling: the content of the files and URLs a spec's external `$ref`s point to, moved into it.

prance's `RefResolver` brings the reference graph (discovery result -> cycle detection ->
topological resolution -> application), in the spirit of its TRANSLATE_EXTERNAL method: a
schema from another file moves into `components/schemas` and the ref becomes internal (which
keeps recursive schemas across files finite); operations, parameters, responses and examples
from other files are inlined where they are used. Internal `#/...` refs are kept: the compiler
resolves them lazily per operation with cycle detection.

`Bundler` overrides five of prance's private hooks (hence the pin `prance<27` in pyproject.toml)
for what the stock resolver gets wrong or slow here:

- `_discover_refs`: prance parses every file with pure-Python ruamel.yaml, 16 of the 20 s
  DigitalOcean (2,850 files) took; our reader (reader.py) parses each file once with libyaml and
  enforces the policy. Refs like `#/x` inside an included file mean *that* file; stock prance
  skips them as "internal" and leaves them dangling in the bundle. Only string `$ref`s count.
- `_resolve_targets`: prance's own, wrapped to keep the resolved targets for the moved schemas.
- `_translate_value`: stock prance files every external ref, operations included, under
  `components/schemas`, named after the file name alone (collisions across folders); here a
  schema gets a readable, unique component name and everything else is inlined.
- `_unroll_recursive`: a cycle ends in a ref to its component (prance would unroll or raise).
- `_apply_to_spec`: a component defined by a ref (`schemas: {Pet: {$ref: pet.yaml}}`) gets the
  file's content in its own place.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from functools import partial
from typing import Any
from urllib.parse import urlsplit

from prance.util.resolver import RESOLVE_FILES, RESOLVE_HTTP, TRANSLATE_EXTERNAL, RefResolver

from openapi2mcp.errors import InputError, Location
from openapi2mcp.loader.reader import Reader, Where, is_url, ref_error
from openapi2mcp.loader.refs import KIND_RANK, OTHER, SCHEMA, is_local, iter_refs, site_kind
from openapi2mcp.loader.tree import JsonPath, copy_json, follow, json_pointer, pointer_parts

_Key = tuple[str, tuple[str, ...]]  # (resource: absolute path or URL, JSON pointer parts)


class Bundler(RefResolver):  # type: ignore[misc]  # prance is untyped
    """prance's resolver with our discovery, reader, and translation of external refs.

    prance calls, in `resolve_references`: `_discover_refs` (overridden: our reader and policy,
    string refs only, refs local to included files resolved in those files), then
    `_resolve_targets` (prance's topological resolution; it calls `_translate_value` for each
    resolved ref and `_unroll_recursive` for each back edge of a cycle, both overridden), then
    `_apply_to_spec` (overridden: a component defined by a ref keeps its place).
    """

    def __init__(self, document: dict[str, Any], reader: Reader, *, swagger2: bool) -> None:
        types = RESOLVE_FILES | RESOLVE_HTTP  # the policy of what may be read is the reader's
        super().__init__({}, None, resolve_types=types, resolve_method=TRANSLATE_EXTERNAL)
        self.specs = document  # ours to change: no copy of a big document
        self._reader = reader
        self._swagger2 = swagger2
        self._kinds: dict[_Key, str] = {}
        self._canonical: dict[_Key, JsonPath] = {}  # ref target -> the component it defines
        self._names: dict[_Key, str] = {}  # schema target -> generated component name
        self._origin: dict[_Key, tuple[Where, bool]] = {}  # where first referred to, and if softly
        self._resolved: dict[_Key, Any] = {}
        try:
            self._taken: set[str] = set(follow(document, self._schema_prefix()))
        except (LookupError, TypeError):
            self._taken = set()

    def bundle(self) -> dict[str, Any]:
        self.resolve_references()
        if self._names:
            self._schema_section().update((name, self._resolved[key]) for key, name in self._names.items())
        bundled: dict[str, Any] = copy_json(self.specs)  # inlined objects are shared: make a tree
        return bundled

    # -- discovery

    def _discover_refs(self, base_url: Any, spec: Any) -> tuple[list[Any], dict[_Key, Any], dict[_Key, Any], Any]:
        """Sites are (path, key, soft, None) and edges (path, key, soft): prance passes the third
        item through to our hooks as the "url" it does not need here."""
        root = self._reader.root
        components = _component_paths(spec, self._swagger2)
        sites: list[tuple[JsonPath, _Key, bool, None]] = []
        for path, ref, soft in iter_refs(spec, root=True):
            key = None if is_local(ref) else self._key(root, (), path, ref, soft)
            if key is None:
                continue
            if key[0] == root:  # "openapi.yaml#/x" in openapi.yaml itself
                follow(spec, map(str, path))["$ref"] = "#" + json_pointer(key[1])
                continue
            sites.append((path, key, soft, None))
            self._origin.setdefault(key, (self._site(root, (), path), soft))
            if path in components:
                self._canonical.setdefault(key, path)
        targets, edges, failed = self._discover_targets([key for _, key, _, _ in sites])
        sites = _without_failed(sites, failed)
        edges = {key: _without_failed(found, failed) for key, found in edges.items()}
        self._classify(sites, edges)
        return sites, targets, edges, self._find_back_edges(targets, edges)

    def _discover_targets(self, start: list[_Key]) -> tuple[dict[_Key, Any], dict[_Key, Any], dict[_Key, InputError]]:
        """Read every target, breadth first; soft targets that cannot be read are set aside."""
        targets: dict[_Key, Any] = {}
        edges: dict[_Key, list[tuple[JsonPath, _Key, bool]]] = {}
        failed: dict[_Key, InputError] = {}
        queue = list(reversed(dict.fromkeys(start)))
        seen = set(queue)
        while queue:
            key = queue.pop()
            origin, soft_target = self._origin[key]
            try:
                raw = targets[key] = self._value(key, origin)
            except InputError as exc:
                if not soft_target:
                    raise
                failed[key] = exc
                continue
            edges[key] = []
            for path, ref, soft in iter_refs(raw, root=False):
                dep = self._key(key[0], key[1], path, ref, soft or soft_target)
                if dep is None:
                    continue
                if dep[0] == self._reader.root:  # back into the root document: a local ref there
                    node = raw if not path else follow(raw, map(str, path))
                    node["$ref"] = "#" + json_pointer(dep[1])
                    continue
                edges[key].append((path, dep, soft or soft_target))
                self._origin.setdefault(dep, (self._site(key[0], key[1], path), soft or soft_target))
                if dep not in seen:
                    seen.add(dep)
                    queue.append(dep)
        return targets, edges, failed

    def _key(self, resource: str, fragment: tuple[str, ...], path: JsonPath, ref: str, soft: bool) -> _Key | None:
        """The target of a ref; None for a soft ref that may not or cannot be followed."""
        try:
            target, pointer = self._reader.resolve(resource, ref, self._site(resource, fragment, path))
        except InputError:
            if soft:
                return None
            raise
        return target, pointer_parts(pointer)

    def _site(self, resource: str, fragment: tuple[str, ...], path: JsonPath) -> Callable[[], Location]:
        return partial(self._location, resource, fragment, path)

    def _location(self, resource: str, fragment: tuple[str, ...], path: JsonPath) -> Location:
        return Location(file=self._reader.display(resource), pointer=json_pointer((*fragment, *path)) + "/$ref")

    def _value(self, key: _Key, origin: Where) -> Any:
        """A private copy of a ref's target (prance's resolution writes into it)."""
        document = self._reader.load(key[0], origin)
        try:
            return copy_json(follow(document, key[1]))
        except LookupError as exc:
            ref = f"{self._reader.display(key[0])}#{json_pointer(key[1])}"
            raise ref_error(f"$ref target {ref!r} not found: {exc}", origin) from None

    def _classify(self, sites: list[tuple[JsonPath, _Key, bool, None]], edges: dict[_Key, Any]) -> None:
        """The kind of each target: the highest of the places refs to it stand (a fixed point)."""
        work: list[_Key] = []
        for path, key, _, _ in sites:
            if self._upgrade(key, site_kind(OTHER, path)):
                work.append(key)
        while work:
            key = work.pop()
            for path, dep, _ in edges.get(key, ()):
                if self._upgrade(dep, site_kind(self._kinds[key], path)):
                    work.append(dep)

    def _upgrade(self, key: _Key, kind: str) -> bool:
        if key in self._kinds and KIND_RANK[self._kinds[key]] >= KIND_RANK[kind]:
            return False
        self._kinds[key] = kind
        return True

    # -- resolution hooks

    def _resolve_targets(self, targets: Any, edges: Any, back_edges: Any) -> dict[_Key, Any]:
        self._resolved = super()._resolve_targets(targets, edges, back_edges)
        return self._resolved

    def _translate_value(self, ref_key: _Key, ref_url: Any, resolved_value: Any) -> Any:
        if ref_key in self._canonical:
            return {"$ref": "#" + json_pointer(self._canonical[ref_key])}
        if self._kinds.get(ref_key) == SCHEMA:
            return {"$ref": "#" + json_pointer((*self._schema_prefix(), self._name(ref_key)))}
        return resolved_value  # inlined: operations, parameters, responses, examples...

    def _unroll_recursive(self, rk: _Key, raw: Any, recursive_sites: Any, resolved: Any) -> Any:
        """A cycle ends in a ref to the component (prance would unroll it or raise)."""
        changes: dict[JsonPath, Any] = {}
        for path, dep, _ in recursive_sites:
            if dep not in self._canonical and self._kinds.get(dep) != SCHEMA:
                raise ref_error(
                    "recursive $ref outside a schema (an object that includes itself)",
                    self._site(rk[0], rk[1], path),
                    hint="only schemas may be recursive",
                )
            changes[path] = self._translate_value(dep, None, None)
        return self._apply_changes(raw, changes)

    def _apply_to_spec(self, sites: Any, resolved: Any) -> None:
        changes: dict[JsonPath, Any] = {}
        for path, key, url, _ in sites:
            if self._canonical.get(key) == path:
                changes[path] = resolved[key]  # the component itself: its content goes here
            else:
                changes[path] = self._translate_value(key, url, resolved[key])
        self.specs = self._apply_changes(self.specs, changes)

    # -- names of moved schemas

    def _schema_prefix(self) -> tuple[str, ...]:
        return ("definitions",) if self._swagger2 else ("components", "schemas")

    def _schema_section(self) -> dict[str, Any]:
        node = self.specs
        for key in self._schema_prefix():
            if not isinstance(node.get(key), dict):
                node[key] = {}
            node = node[key]
        return node

    def _name(self, key: _Key) -> str:
        """A stable, readable component name: the last pointer key or the file name, qualified by
        its folders only when that name is taken."""
        if key in self._names:
            return self._names[key]
        resource, fragment = key
        where = urlsplit(resource).path if is_url(resource) else self._reader.display(resource)
        parts = [p for p in re.split(r"[/\\]", where) if p and p != ".."]
        if parts:
            parts[-1] = os.path.splitext(parts[-1])[0]
        parts += fragment
        words = [re.sub(r"[^A-Za-z0-9._-]+", "_", p).strip("_") or "x" for p in parts] or ["schema"]
        candidates = ["_".join(words[-n:]) for n in range(1, len(words) + 1)]
        name = next((c for c in candidates if c not in self._taken), None)
        if name is None:
            name = next(f"{candidates[0]}_{i}" for i in range(2, 10**6) if f"{candidates[0]}_{i}" not in self._taken)
        self._taken.add(name)
        self._names[key] = name
        return name


def _without_failed(refs: list[Any], failed: dict[_Key, InputError]) -> list[Any]:
    """Drop soft refs to targets that could not be read; a hard ref to one fails with its error."""
    kept = []
    for ref in refs:
        if ref[1] in failed:
            if not ref[2]:
                raise failed[ref[1]]
            continue
        kept.append(ref)
    return kept


def _component_paths(document: dict[str, Any], swagger2: bool) -> set[JsonPath]:
    """Where a ref *defines* a reusable component (components/schemas/Pet: {$ref: pet.yaml})."""
    if swagger2:
        sections = {s: document.get(s) for s in ("definitions", "parameters", "responses")}
        return {(s, name) for s, items in sections.items() if isinstance(items, dict) for name in items}
    components = document.get("components")
    if not isinstance(components, dict):
        return set()
    return {("components", s, name) for s, items in components.items() if isinstance(items, dict) for name in items}
