"""The draft as YAML with comments (ruamel.yaml's round-trip emitter), byte for byte the same for
the same spec: nothing in it depends on the time, the machine or the order of a set."""

from __future__ import annotations

import io
import re
import textwrap
from dataclasses import dataclass
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.scalarstring import DoubleQuotedScalarString, FoldedScalarString

from openapi2mcp.authoring.setup import Setup
from openapi2mcp.authoring.tools import Tool, Use

WIDTH = 110
WRAP = 96
DEFAULT_MAX_BYTES = 24_000


@dataclass
class NotExposed:
    """An operation no drafted tool uses, and why."""

    ref: str
    key: str  # METHOD /path
    reason: str
    group: str  # the heading it is listed under


_CONTROL = re.compile(r"[\x00-\x1f\x7f]+")


def _clean(text: str) -> str:
    """One comment line: no line breaks or control characters."""
    return _CONTROL.sub(" ", text).strip()


def _lines(*texts: str) -> str:
    """Comment lines of at most about WRAP characters (ruamel adds the `# ` and the indent)."""
    out: list[str] = []
    for text in texts:
        out.extend(textwrap.wrap(_clean(text), WRAP, break_long_words=False, break_on_hyphens=False) or [""])
    return "\n".join(out)


def _flow(data: dict[str, Any]) -> CommentedMap:
    m = CommentedMap(data)
    m.fa.set_flow_style()
    return m


def _flow_list(items: list[Any]) -> CommentedSeq:
    s = CommentedSeq(items)
    s.fa.set_flow_style()
    return s


def flow_line(key: str, data: dict[str, Any]) -> str:
    """`key: {a: 1, b: x}` on one line, exactly as the draft writes it (lint's fixes quote init's blocks)."""
    yaml = YAML()
    yaml.width = 10_000
    out = io.StringIO()
    yaml.dump(CommentedMap({key: _flow(data)}), out)
    return out.getvalue().strip()


def _text(value: str) -> str:
    return FoldedScalarString(value) if len(value) > 90 and "\n" not in value and "  " not in value else value


def _use_map(use: Use, tool: Tool, indent: int, single: bool, m: CommentedMap | None = None) -> CommentedMap:
    """The keys of one operation use (a single tool's own, added to `m`, or an action's or a variant's)."""
    m = CommentedMap() if m is None else m
    if tool.dispatch == "variants" and use.when:
        m["when"] = _flow_list(list(use.when))
    if not single:
        m["operation"] = use.op.ref
        m.yaml_add_eol_comment(_clean(f"{use.op.key}: {use.placed.why}"), "operation")
        if use.description:
            m["description"] = _text(use.description)
    if not tool.forbidden:
        m["risk"] = use.risk
        m.yaml_add_eol_comment(_clean(use.risk_why), "risk")
    if use.side_effects:
        m["side_effects"] = CommentedSeq(use.side_effects)
        m.yaml_add_eol_comment("drafted from the summary: say what changes, for whom", "side_effects")
    if use.dry_run is not None:
        m["dry_run"] = _flow(use.dry_run)
        m.yaml_add_eol_comment(_clean(use.contract_why.get("dry_run", "")), "dry_run")
    if use.idempotent:
        m["idempotent"] = True
        m.yaml_add_eol_comment(_clean(use.contract_why.get("idempotent", "")), "idempotent")
    if use.params:
        params = CommentedMap()
        for name in sorted(use.params):
            params[name] = _flow(use.params[name])
            if name in use.param_why:
                params.yaml_add_eol_comment(_clean(use.param_why[name]), name)
        m["params"] = params
    if use.paging is not None:
        m["pagination"] = _flow(use.paging.block)
        m.yaml_add_eol_comment(_clean(use.paging_why), "pagination")
    if use.shape.select:
        response = CommentedMap()
        response["select"] = _text(use.shape.select)
        m["response"] = response
        m.yaml_set_comment_before_after_key("response", before=_lines(use.shape.why), indent=indent)
    return m


def tool_map(tool: Tool, indent: int) -> CommentedMap:
    """One tool; `indent` is the column of its keys."""
    m = CommentedMap()
    m["name"] = tool.name
    if tool.forbidden:
        m["operation"] = tool.uses[0].op.ref
        m.yaml_add_eol_comment(_clean(tool.uses[0].op.key), "operation")
        m["risk"] = "forbidden"
        m.yaml_add_eol_comment(_clean(tool.forbidden), "risk")
        return m
    if tool.title:
        m["title"] = tool.title
    if tool.description:
        m["description"] = _text(tool.description)
        m.yaml_set_comment_before_after_key("description", before="drafted: say what it is for and when to use it",
                                            indent=indent)
    if tool.category:
        m["category"] = tool.category
    if tool.read_only:
        m["annotations"] = _flow({"readOnlyHint": True})
        m.yaml_add_eol_comment("every operation only reads, although not all are GETs", "annotations")
    if tool.units:
        units = CommentedMap()
        for name in sorted(tool.units):
            units[name] = tool.units[name]
            units.yaml_add_eol_comment(_clean(tool.unit_why[name]), name)
        m["units"] = units
    if tool.dispatch == "single":
        use = tool.uses[0]
        m["operation"] = use.op.ref
        m.yaml_add_eol_comment(_clean(use.op.key), "operation")
        return _use_map(use, tool, indent, single=True, m=m)
    branches: CommentedMap | CommentedSeq
    if tool.dispatch == "actions":
        branches = CommentedMap()
        for use in tool.uses:
            branches[use.label] = _use_map(use, tool, indent + 4, single=False)
            if use.notes:
                branches.yaml_set_comment_before_after_key(use.label, before=_lines(*use.notes), indent=indent + 2)
        m["actions"] = branches
    else:
        branches = CommentedSeq()
        for i, use in enumerate(tool.uses):
            branches.append(_use_map(use, tool, indent + 4, single=False))
            head = [f"{use.label}: taken when {', '.join(use.when)} given" if use.when else
                    f"{use.label}: the fallback, when no other variant's arguments are given", *use.notes]
            branches.yaml_set_comment_before_after_key(i, before=_lines(*head), indent=indent + 2)
        m["variants"] = branches
    return m


def render(setup: Setup, tools: list[Tool], forbidden: list[Tool], hidden: list[NotExposed], header: list[str],
           sha256: str) -> str:
    """The draft; `sha256` is the spec's (the loader's hash), written as the overlay's spec pin."""
    yaml = YAML()
    yaml.width = WIDTH
    yaml.indent(mapping=2, sequence=4, offset=2)
    root = CommentedMap()
    root["openapi2mcp"] = 1
    root["spec"] = _flow({"sha256": DoubleQuotedScalarString(sha256)})
    root.yaml_set_comment_before_after_key("spec", before=_lines(
        "the spec this was drafted from: when it changes, compile warns (--strict refuses) and lint reports "
        "O2M112; see what changed with `openapi2mcp diff`, then update the hash (docs/overlay.md#the-spec-pin)"),
        indent=0)
    server = CommentedMap(setup.server)
    if "instructions" in server:
        server["instructions"] = _text(server["instructions"])
    root["server"] = server
    root.yaml_set_comment_before_after_key("server", before="\n" + _lines(setup.notes.get("server", "")), indent=0)
    upstream = CommentedMap()
    for key, value in setup.upstream.items():
        upstream[key] = _flow(value) if isinstance(value, dict) else value
        if key in setup.notes:
            upstream.yaml_add_eol_comment(_clean(setup.notes[key]), key)
    root["upstream"] = upstream
    root.yaml_set_comment_before_after_key(
        "upstream", before="\n" + _lines("where calls go, and the credentials (from the environment)",
                                          *([setup.notes["no_auth"]] if "no_auth" in setup.notes else [])), indent=0)
    root["defaults"] = CommentedMap({"response": _flow({"max_bytes": DEFAULT_MAX_BYTES})})
    root.yaml_set_comment_before_after_key(
        "defaults", before="\nevery result is cut to this many bytes (the cut is stated); raise it per tool", indent=0)
    seq = CommentedSeq()
    for i, tool in enumerate([*tools, *forbidden]):
        seq.append(tool_map(tool, indent=4))
        if tool.forbidden:
            head = ["forbidden: never listed, never callable (so `passthrough: true` cannot expose it either)"]
        else:
            own = tool.uses[0].notes if tool.dispatch == "single" else []  # a branch's are written at the branch
            head = [f"{'=' * 16} {tool.name} (rank {i + 1})", tool.rank_why, tool.why, *tool.notes, *own]
        seq.yaml_set_comment_before_after_key(i, before=_lines(*head), indent=2)
    root["tools"] = seq
    root.yaml_set_comment_before_after_key("tools", before="\n", indent=0)
    out = io.StringIO()
    yaml.dump(root, out)
    text = out.getvalue()
    lines = [("# " + _CONTROL.sub(" ", h)).rstrip() if h else "#" for h in header]
    return "\n".join(lines) + "\n" + text + not_exposed_block(hidden)


def not_exposed_block(hidden: list[NotExposed]) -> str:
    if not hidden:
        return ""
    out = ["", f"# {'=' * 20} not exposed: {len(hidden)} operation(s)",
           "# No tool uses these. To expose one, add a tool (or an action) with its `operation`.", "#"]
    groups: dict[str, list[NotExposed]] = {}
    for h in hidden:
        groups.setdefault(h.group, []).append(h)
    for group, items in groups.items():
        out.append(f"# {_clean(group)} ({len(items)}):")
        width = min(60, max(len(h.ref) for h in items))
        for h in items:
            out.append(_clean(f"#   {h.ref:<{width}}  {h.key}  -- {h.reason}"))
        out.append("#")
    return "\n".join(out) + "\n"
