"""`openapi2mcp diff`: what a spec upgrade does to the served tools.

Both specs are compiled with the same overlays; the two Manifests are compared tool by tool
(schemadiff.py for the schemas, the safety contract branch by branch). An overlay entry that no
longer resolves against the new spec (an operation gone, a parameter renamed, an OAI Overlay
target that matches nothing) is reported on its tool as breaking, with the compiler's located
message, and the rest of the overlay is compiled without it so every other tool is still compared.
Two Manifests (`compile` output) can be compared directly too.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from openapi2mcp.authoring.schemadiff import Change, schema_changes
from openapi2mcp.compiler import (
    LoadOptions,
    compile_files,
    compile_manifest,
    load_with_overlays,
    read_overlays,
    served_name,
)
from openapi2mcp.errors import InputError, Problem
from openapi2mcp.loader import LoadedSpec
from openapi2mcp.manifest import Branch, Manifest, ToolSpec, needs_confirmation
from openapi2mcp.overlay import KeyPath, OverlayFile

Status = Literal["unchanged", "compatible", "breaking"]
_ORDER: dict[str, int] = {"unchanged": 0, "compatible": 1, "breaking": 2}
_SECTION = re.compile(r"^(tools|resources|prompts)\[(\d+)\]")
_MAX_RETRIES = 8


@dataclass
class ToolDiff:
    name: str
    status: Status
    changes: list[Change] = field(default_factory=list)
    location: str | None = None  # the overlay's file:line of the tool

    def to_dict(self) -> dict[str, Any]:
        return {"tool": self.name, "status": self.status, "location": self.location,
                "changes": [c.to_dict() for c in self.changes]}


@dataclass
class Side:
    label: str  # the spec or Manifest as given
    sha256: str  # the spec's (loader) hash, or the Manifest's content hash


@dataclass
class DiffReport:
    old: Side
    new: Side
    tools: list[ToolDiff]
    problems: list[Problem] = field(default_factory=list)  # overlay entries that no longer resolve, not a tool's
    pin: str | None = None  # what the overlay's spec pin says about the two

    @property
    def status(self) -> Status:
        worst: Status = "breaking" if self.problems else "unchanged"
        for t in self.tools:
            if _ORDER[t.status] > _ORDER[worst]:
                worst = t.status
        return worst

    def counts(self) -> dict[str, int]:
        out = dict.fromkeys(_ORDER, 0)
        for t in self.tools:
            out[t.status] += 1
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "old": {"source": self.old.label, "sha256": self.old.sha256},
            "new": {"source": self.new.label, "sha256": self.new.sha256},
            "status": self.status, "summary": self.counts(),
            "tools": [t.to_dict() for t in self.tools],
            "problems": [{"message": p.message, "location": str(p.location), "hint": p.hint} for p in self.problems],
            "pin": self.pin,
        }


# ============================================================================ entry points


def is_manifest(path: str) -> bool:
    """Is `path` a Manifest file (compile's output) rather than a spec?"""
    p = Path(path)
    if "://" in path or p.suffix.lower() != ".json" or not p.is_file():
        return False
    try:
        with p.open("rb") as handle:
            head = handle.read(4096).decode("utf-8", "replace")
    except OSError:
        return False
    return bool(re.search(r'"format"\s*:\s*\d', head)) and '"openapi"' not in head and '"swagger"' not in head


def read_manifest(path: str) -> Manifest:
    try:
        return Manifest.read(path)
    except FileNotFoundError:
        raise InputError.at(f"manifest not found: {path}") from None
    except ValueError as e:
        raise InputError.at(f"not a usable manifest: {str(e).splitlines()[0]}", file=path,
                            hint="give a Manifest written by `openapi2mcp compile -o FILE`, or a spec") from None


def diff_manifests(old: Manifest, new: Manifest, old_label: str = "old", new_label: str = "new") -> DiffReport:
    return DiffReport(old=Side(old_label, old.content_hash), new=Side(new_label, new.content_hash),
                      tools=compare_tools(old, new))


def diff_specs(old_spec: str, new_spec: str, overlay_paths: list[str],
               options: LoadOptions = LoadOptions()) -> DiffReport:
    """Compile both specs with the overlays and compare; the overlays must fit the old spec (else InputError)."""
    overlays = read_overlays(overlay_paths)
    old_files = compile_files(old_spec, overlays, all_operations=not any(o.tools for o in overlays), options=options)
    old_loaded, old = old_files.spec, old_files.manifest
    new_loaded, overlays, problems = _load_new(new_spec, overlays, options)
    new, dropped, more = _compile_new(new_loaded, overlays)
    problems += more
    tool_overlay = next((o for o in overlays if o.tools is not None), None)
    diffs = {t.name: t for t in compare_tools(old, new)}
    for name, why in dropped.items():  # tools whose overlay entry no longer resolves: breaking, with the reason
        entry = diffs.setdefault(name, ToolDiff(name, "breaking"))
        entry.status = "breaking"
        entry.changes = [Change("breaking", "overlay", why)]
    if tool_overlay is not None:
        _locate(list(diffs.values()), tool_overlay)
    order: dict[str, int] = {}  # each name's first place, old tools then new (a dict: Graph's diff has 23,000)
    for name in [t.name for t in old.tools] + [t.name for t in new.tools]:
        order.setdefault(name, len(order))
    tools = sorted(diffs.values(), key=lambda d: order.get(d.name, len(order)))
    return DiffReport(old=Side(old_spec, old_loaded.sha256), new=Side(new_spec, new_loaded.sha256), tools=tools,
                      problems=problems, pin=_pin(tool_overlay, old_loaded.sha256, new_loaded.sha256))


def _load_new(spec: str, overlays: list[OverlayFile],
              options: LoadOptions) -> tuple[LoadedSpec, list[OverlayFile], list[Problem]]:
    """The new spec, patched by the OAI Overlays that still apply; those whose actions no longer match are
    reported (their problems) and left out."""
    problems: list[Problem] = []
    for _ in range(len(overlays) + 1):
        try:
            return load_with_overlays(spec, overlays, options), overlays, problems
        except InputError as e:
            bad = {p.location.file for p in e.problems} & {o.path for o in overlays if o.oai is not None}
            if not bad:
                raise
            problems += [p for p in e.problems if p.location.file in bad]
            overlays = [o for o in overlays if o.path not in bad]
    raise AssertionError("unreachable")


def _compile_new(loaded: LoadedSpec, overlays: list[OverlayFile]) -> tuple[Manifest, dict[str, str], list[Problem]]:
    """Compile, leaving out the overlay entries that no longer resolve: (manifest, dropped tool -> why, other
    problems). An entry is a tool, resource or prompt; problems elsewhere in the overlay stop the diff."""
    dropped: dict[str, str] = {}
    others: list[Problem] = []
    tool_overlay = next((o for o in overlays if o.tools is not None), None)
    current = tool_overlay
    for _ in range(_MAX_RETRIES):
        docs = [o for o in overlays if o is not tool_overlay] + ([current] if current is not None else [])
        try:
            manifest = compile_manifest(loaded, docs, all_operations=tool_overlay is None).manifest
            return manifest, dropped, others
        except InputError as e:
            if current is None:
                raise
            drop: dict[str, set[int]] = {}
            for p in e.problems:
                m = _SECTION.match(p.location.pointer or "")
                if p.location.file != current.path or m is None:
                    raise
                section, index = m.group(1), int(m.group(2))
                drop.setdefault(section, set()).add(index)
                text = f"the overlay no longer resolves: {p.message} ({_where(p)})"
                if section == "tools":
                    assert current.tools is not None
                    tdef = current.tools.tools[index]
                    name = served_name(tdef.name, current.tools.server.tool_names)
                    dropped[name] = dropped.get(name, text)
                else:
                    others.append(p)
            current = without(current, drop)
    raise InputError.at("the overlay does not compile against the new spec", hint="run `openapi2mcp compile` on it")


def without(doc: OverlayFile, drop: dict[str, set[int]]) -> OverlayFile:
    """The tool overlay without some of its tools, resources or prompts, every other key keeping its line."""
    assert doc.tools is not None
    remap = {s: {old: new for new, old in enumerate(i for i in range(len(getattr(doc.tools, s))) if i not in gone)}
             for s, gone in drop.items()}
    positions: dict[KeyPath, tuple[int, int]] = {}
    for key, pos in doc.positions.items():
        if len(key) > 1 and key[0] in remap and isinstance(key[1], int):
            if key[1] not in remap[str(key[0])]:
                continue
            key = (key[0], remap[str(key[0])][key[1]], *key[2:])
        positions[key] = pos
    data = dict(doc.data) if isinstance(doc.data, dict) else {}
    update: dict[str, Any] = {}
    for section, gone in drop.items():
        update[section] = [x for i, x in enumerate(getattr(doc.tools, section)) if i not in gone]
        if isinstance(data.get(section), list):
            data[section] = [x for i, x in enumerate(data[section]) if i not in gone]
    return OverlayFile(path=doc.path, sha256=doc.sha256, positions=positions, data=data,
                       tools=doc.tools.model_copy(update=update))


def _where(p: Problem) -> str:
    loc = p.location
    return f"{loc.file}:{loc.line}" if loc.line else str(loc)


def _locate(diffs: list[ToolDiff], doc: OverlayFile) -> None:
    assert doc.tools is not None
    index = {served_name(t.name, doc.tools.server.tool_names): i for i, t in enumerate(doc.tools.tools)}
    for d in diffs:
        if d.name in index:
            where = doc.location(("tools", index[d.name]))
            d.location = f"{where.file}:{where.line}" if where.line else where.file


def _pin(doc: OverlayFile | None, old: str, new: str) -> str | None:
    pin = doc.tools.spec if doc is not None and doc.tools is not None else None
    if pin is None or old == new:
        return None
    if pin.sha256 == new:
        return "the overlay already pins the new spec"
    if pin.sha256 == old:
        return f'the overlay pins the old spec; after the review set spec: {{sha256: "{new}"}}'
    return f"the overlay pins neither spec (sha256 {pin.sha256})"


# ============================================================================ tools


def compare_tools(old: Manifest, new: Manifest) -> list[ToolDiff]:
    out = []
    new_tools = {t.name: t for t in new.tools}
    old_names = {t.name for t in old.tools}
    for o in old.tools:
        n = new_tools.get(o.name)
        if n is None:
            ops = ", ".join(sorted({s.operation.id for b in o.branches for s in b.steps}))
            out.append(ToolDiff(o.name, "breaking", [Change("breaking", "tool", f"gone (its operation {ops} is "
                                                            "gone)")]))
        else:
            out.append(compare_tool(o, n))
    for n in new.tools:
        if n.name not in old_names:
            out.append(ToolDiff(n.name, "compatible", [Change("compatible", "tool", "new tool")]))
    return out


def compare_tool(o: ToolSpec, n: ToolSpec) -> ToolDiff:
    changes: list[Change] = []
    if o.risk != n.risk:
        changes.append(Change("breaking", "risk", f"{o.risk} → {n.risk}"))
    if o.risk == "forbidden" or n.risk == "forbidden":
        return _result(o, n, changes)
    changes += schema_changes(o.input_schema, n.input_schema, "input")
    changes += schema_changes(o.output_schema, n.output_schema, "output")
    changes += _branch_changes(o, n)
    for key, label in (("permissions", "permissions"), ("step_up", "step-up"), ("step_up_scope", "step-up scope")):
        before, after = getattr(o, key), getattr(n, key)
        if before != after:
            changes.append(Change("breaking", label, f"{before} → {after}"))
    changes += _annotation_changes(o.annotations, n.annotations)
    for key in ("description", "title", "side_effects", "failure_modes"):
        if getattr(o, key) != getattr(n, key):
            changes.append(Change("compatible", key.replace("_", " "), "changed"))
    return _result(o, n, changes)


def _result(o: ToolSpec, n: ToolSpec, changes: list[Change]) -> ToolDiff:
    if not changes and _plan(o) != _plan(n):
        changes.append(Change("compatible", "call plan", "what the server sends upstream changed (the model's "
                              "contract did not)"))
    status: Status = ("breaking" if any(c.severity == "breaking" for c in changes)
                      else "compatible" if changes else "unchanged")
    return ToolDiff(n.name, status, changes)


def _plan(t: ToolSpec) -> str:
    return json.dumps(t.model_dump(mode="json", by_alias=True), sort_keys=True)


def _branch_changes(o: ToolSpec, n: ToolSpec) -> list[Change]:
    out: list[Change] = []
    multi = o.dispatch != "single" or n.dispatch != "single"
    kind = {"action": "action", "presence": "variant"}.get(n.dispatch, "branch")
    ob, nb = {b.key: b for b in o.branches}, {b.key: b for b in n.branches}
    for key, before in ob.items():
        after = nb.get(key)
        where = f"{kind} {key!r}" if multi else ""
        if after is None:
            out.append(Change("breaking", where or "tool", "gone"))
            continue
        out += _contract_changes(before, after, where)
    for key in nb:
        if key not in ob:
            out.append(Change("compatible", f"{kind} {key!r}", "new"))
    return out


def _contract_changes(o: Branch, n: Branch, where: str) -> list[Change]:
    out = []
    if o.risk != n.risk and where:
        out.append(Change("breaking", f"{where} risk", f"{o.risk} → {n.risk}"))
    asks_o, asks_n = needs_confirmation(o), needs_confirmation(n)
    if asks_o != asks_n:
        out.append(Change("breaking", f"{where} confirmation".strip(), "the user is now asked first" if asks_n
                          else "the user is no longer asked first"))
    dry_o = o.dry_run.mode if o.dry_run else None
    dry_n = n.dry_run.mode if n.dry_run else None
    if dry_o != dry_n:
        out.append(Change("breaking", f"{where} dry run".strip(), f"{dry_o or 'none'} → {dry_n or 'none'}"))
    calls_o = [f"{s.operation.method} {s.operation.path}" for s in o.steps]
    calls_n = [f"{s.operation.method} {s.operation.path}" for s in n.steps]
    if calls_o != calls_n:
        out.append(Change("compatible", f"{where} calls".strip(), f"{', '.join(calls_o)} → {', '.join(calls_n)}"))
    return out


def _annotation_changes(o: dict[str, Any], n: dict[str, Any]) -> list[Change]:
    """readOnlyHint true -> false and destructiveHint false -> true change what clients run without asking."""
    out = []
    if o.get("readOnlyHint") is True and n.get("readOnlyHint") is not True:
        out.append(Change("breaking", "annotations", "no longer read-only (clients that run read-only tools "
                          "unasked will ask)"))
    if o.get("destructiveHint") is not True and n.get("destructiveHint") is True:
        out.append(Change("breaking", "annotations", "now destructive"))
    if not out and {k: v for k, v in o.items() if k != "title"} != {k: v for k, v in n.items() if k != "title"}:
        out.append(Change("compatible", "annotations", "changed"))
    return out
