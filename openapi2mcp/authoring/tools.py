"""Drafted tools: each resource's reads and writes as `_find` / `_manage` tools (grouping.py), every
operation used with its risk, hidden arguments, paging, projection and units, and the reasons.

The draft is plain data (`Tool`, `Use`); writer.py turns it into YAML with comments, draft.py
compiles it and repairs what the compiler refuses.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from openapi2mcp.authoring.facts import Op, first_line, snake, split_words
from openapi2mcp.authoring.grouping import Placed, Resource
from openapi2mcp.authoring.paging import Paging, detect, paging_params
from openapi2mcp.authoring.risk import risk_of
from openapi2mcp.authoring.shaping import WRITE_LIMIT, Shape, draft_select, unit_of
from openapi2mcp.authoring.specdoc import SpecDoc

RISK_ORDER = ("low", "medium", "high", "critical", "forbidden")
_ACTION = re.compile(r"^[A-Za-z][A-Za-z0-9_.-]{0,63}$")
PAGING_ARGS = ("limit", "cursor")  # the contract's own argument names


@dataclass
class Use:
    """One operation in a drafted tool: a single tool's, an action's or a variant's."""

    placed: Placed
    label: str = ""
    when: list[str] = field(default_factory=list)
    description: str = ""
    risk: str = "low"
    risk_why: str = ""
    side_effects: list[str] = field(default_factory=list)
    params: dict[str, dict[str, Any]] = field(default_factory=dict)
    param_why: dict[str, str] = field(default_factory=dict)
    paging: Paging | None = None
    paging_why: str = ""
    shape: Shape = field(default_factory=lambda: Shape(None))
    notes: list[str] = field(default_factory=list)  # what a repair changed
    dry_run: dict[str, Any] | None = None  # the upstream's own preview switch, when it has one
    idempotent: bool = False  # the operation takes an Idempotency-Key header
    contract_why: dict[str, str] = field(default_factory=dict)  # dry_run / idempotent -> why

    @property
    def op(self) -> Op:
        return self.placed.op

    def visible_args(self) -> set[str]:
        taken = self.paging.uses if self.paging else set()
        return {n for n in self.op.args if n not in taken and not self.params.get(n, {}).get("hidden")}

    def output_fields(self) -> set[str]:
        return set(self.shape.fields)


@dataclass
class Tool:
    name: str
    resource: Resource
    dispatch: str  # single, variants or actions
    uses: list[Use]
    title: str = ""
    description: str = ""
    category: str | None = None
    why: str = ""  # how the tool was formed
    notes: list[str] = field(default_factory=list)
    forbidden: str | None = None
    units: dict[str, str] = field(default_factory=dict)
    unit_why: dict[str, str] = field(default_factory=dict)
    score: float = 0.0
    rank_why: str = ""
    read_only: bool = False  # every use only reads, some by POST: say so in the annotations
    units_off: bool = False  # the compiler refused a drafted unit it did not name: the tool keeps none
    refused_units: set[str] = field(default_factory=set)  # units the compiler refused, by name

    @property
    def risk(self) -> str:
        if self.forbidden:
            return "forbidden"
        return max((u.risk for u in self.uses), key=RISK_ORDER.index, default="low")

    @property
    def ops(self) -> list[Op]:
        return [u.op for u in self.uses]


def noun(resource: Resource) -> str:
    return resource.name.replace("_", " ")


def make_use(p: Placed, resource: Resource, doc: SpecDoc) -> Use:
    op = p.op
    risk, risk_why = risk_of(op, p.kind, resource.words, p.read)
    use = Use(placed=p, description=op.summary or f"{p.kind.replace('_', ' ')} {noun(resource)}",
              risk=risk, risk_why=risk_why)
    for a in op.args.values():
        if a.required:
            continue
        if a.location in ("header", "cookie"):
            use.params[a.name] = {"hidden": True}
            use.param_why[a.name] = f"an optional {a.location} parameter; unhide it if a model needs it"
        elif a.schema.get("deprecated") is True:
            use.params[a.name] = {"hidden": True}
            use.param_why[a.name] = "deprecated in the spec"
    if p.read and p.listing:
        use.paging, use.paging_why = detect(op, doc)
        if use.paging is not None:
            _clear_paging_names(use)
    if p.read:
        if use.paging is not None:
            use.shape = draft_select(use.paging.item_schema, doc, one=False)
            if use.shape.select:
                use.shape.why = "applied to each item: " + use.shape.why
        elif not p.listing:
            use.shape = draft_select(op.response, doc, one=True)
        else:
            use.shape = Shape(None, why="a list without paging: returned whole (max_bytes cuts it)")
            if paging_params(op):
                use.notes.append(f"not paged: {use.paging_why}; add `pagination` by hand if it pages "
                                 "(docs/task-tools.md#pagination-one-contract-for-every-api)")
    else:
        use.shape = draft_select(op.response, doc, one=False, limit=WRITE_LIMIT)
        use.side_effects = [side_effect(p, resource)]
        _contract(use)
    return use


DRY_RUN_NAMES = frozenset({"dryrun", "dry_run", "dry-run", "validate_only", "validateonly", "preview"})


def _contract(use: Use) -> None:
    """The upstream's own dry run (a boolean `dryRun`-like argument) and idempotency key header."""
    for a in use.op.args.values():
        if a.required:
            continue
        if a.wire.lower() in DRY_RUN_NAMES and a.schema.get("type") == "boolean" and "." not in a.name:
            mode = "required" if use.risk == "critical" else "supported"
            use.dry_run = {"mode": mode, "upstream_param": a.wire}
            use.params.pop(a.name, None)
            use.contract_why["dry_run"] = (f"the operation's own `{a.wire}` previews the call"
                                           + ("; a critical call needs a preview first" if mode == "required" else ""))
        elif a.location == "header" and a.wire.lower() == "idempotency-key":
            use.idempotent = True
            use.params.pop(a.name, None)
            use.contract_why["idempotent"] = "the operation takes an Idempotency-Key: retries are safe with one"


def _clear_paging_names(use: Use) -> None:
    """Arguments called `limit` or `cursor` that the paging does not take over would clash with
    the contract's own: hide them (optional) or give up the paging (required)."""
    assert use.paging is not None
    for name in PAGING_ARGS:
        arg = use.op.args.get(name)
        if arg is None or name in use.paging.uses:
            continue
        if arg.required:
            use.paging_why = f"not paged: the operation's own required `{name}` would clash with the paging contract"
            use.paging = None
            return
        use.params[name] = {"hidden": True}
        use.param_why[name] = f"clashes with the paging contract's `{name}`"
    for name in use.paging.uses:
        use.params.pop(name, None)


def side_effect(p: Placed, resource: Resource) -> str:
    """A drafted sentence from the kind and the summary ("Create an issue" -> "Creates an issue.")."""
    words = p.op.summary.rstrip(".").split(" ", 1)
    verbs = ("create", "add", "update", "change", "edit", "modify", "replace", "set", "delete", "remove", "destroy")
    rest = words[1] if len(words) == 2 and words[0].lower() in verbs else ""
    thing = rest or f"an item of {noun(resource)}"
    if p.kind == "create":
        return f"Creates {thing}."
    if p.kind in ("update", "post"):
        return f"Changes {thing}."
    if p.kind == "replace":
        return f"Replaces {thing}."
    if p.kind == "delete":
        return f"Deletes {thing}; this cannot be undone."
    if p.kind == "delete_all":
        return f"Deletes every matching item of {noun(resource)}; this cannot be undone."
    return (p.op.summary.rstrip(".") + "." if p.op.summary else f"Runs {p.kind!r} on {noun(resource)}.")


def action_name(text: str) -> str:
    name = snake(text)[:56] or "call"  # room for a `_NNN` suffix within 64
    return name if _ACTION.match(name) else "do_" + name


def labels(uses: list[Use], resource: Resource) -> None:
    """Unique action names: the kind, told apart by the operation's own words when two share it."""
    base = [action_name(u.placed.kind) for u in uses]
    counts = {b: base.count(b) for b in base}
    seen: set[str] = set()
    generic = {"get", "list", "post", "put", "patch", "delete", "create", "update", "for", "a", "an", "the", "by"}
    for u, b in zip(uses, base, strict=True):
        name = b
        if counts[b] > 1:
            extra = [w for w in split_words(u.op.ref) if w not in resource.words and w not in generic
                     and w not in split_words(u.placed.kind)]
            if extra:
                name = action_name(f"{b}_{'_'.join(extra[:3])}")
        n = 2
        candidate = name
        while candidate in seen:
            candidate, n = f"{name}_{n}", n + 1
        seen.add(candidate)
        u.label = candidate


def variant_order(reads: list[Use]) -> tuple[list[Use], list[Use]]:
    """The reads that can be variants (their `when` set, the fallback last; empty when fewer than
    two), and those the arguments given cannot tell apart from them (each a tool of its own)."""
    lists = [u for u in reads if u.placed.listing]
    if not lists:
        return [], reads
    # the fallback: a paged list first (a count is a search that is no list), with the fewest needs
    fallback = min(lists, key=lambda u: (u.paging is None, u.placed.kind != "list", len(u.op.required_args()),
                                         len(u.op.args), len(u.op.path), u.op.path))
    fallback_args = set(fallback.op.args)
    others = [u for u in reads if u is not fallback]
    for u in others:
        u.when = sorted(u.op.required_args() - fallback_args)
    others.sort(key=lambda u: (-len(u.when), u.when, u.op.path))
    chosen: list[Use] = []
    left: list[Use] = []
    for u in others:
        # no `when` to pick it by; or it would never run, or takes an earlier one's `when` as a filter
        if not u.when or any(set(c.when) <= set(u.when) or set(c.when) & set(u.op.args) for c in chosen):
            left.append(u)
        else:
            chosen.append(u)
    fallback.when = []
    for u in left:
        u.when = []
    return ([*chosen, fallback], left) if chosen else ([], reads)


def _single(u: Use, resource: Resource, category: str | None, why: str, read_only: bool = False) -> Tool:
    """A tool of one operation, named by its label (set by `labels` when the kind is not enough)."""
    return Tool(f"{resource.name}_{u.label or action_name(u.placed.kind)}", resource, "single", [u],
                title=_title(u.op.summary) or f"{u.placed.kind.title()} {noun(resource)}", category=category,
                read_only=read_only, why=why)


def build_tools(resource: Resource, reads: list[Placed], writes: list[Placed], doc: SpecDoc) -> list[Tool]:
    tools: list[Tool] = []
    category = _category(resource)
    if reads:
        uses = [make_use(p, resource, doc) for p in reads]
        ordered, left = variant_order(uses) if len(uses) > 1 else ([], uses)
        if ordered and len(left) * 2 <= len(uses):
            for u in ordered:
                u.label = action_name(u.placed.kind)
            tools.append(Tool(
                f"{resource.name}_find", resource, "variants", ordered, title=f"Find {noun(resource)}",
                category=category, read_only=any(u.op.method != "GET" for u in ordered),
                why=f"{len(ordered)} reads of {noun(resource)}, picked by the arguments given"))
            labels(left, resource)
            for u in left:
                tools.append(_single(u, resource, category, read_only=u.op.method != "GET",
                                     why=f"a read of {noun(resource)} that its arguments do not tell apart from "
                                         "the others"))
        elif len(uses) <= 2:  # a list and a get that no argument tells apart: two tools
            labels(uses, resource)
            for u in uses:
                u.when = []
                tools.append(_single(u, resource, category, read_only=u.op.method != "GET",
                                     why=f"a read of {noun(resource)} ({u.placed.why})"))
        else:
            for u in uses:
                u.when = []
            labels(uses, resource)
            tools.append(Tool(
                f"{resource.name}_find", resource, "actions", uses, title=f"Read {noun(resource)}",
                category=category, read_only=any(u.op.method != "GET" for u in uses),
                why=f"the {len(uses)} reads of {noun(resource)}; their arguments do not tell them apart, so "
                    "`action` picks one"))
    if writes:
        uses = [make_use(p, resource, doc) for p in writes]
        if len(uses) == 1:
            tools.append(_single(uses[0], resource, category, why=f"the one write of {noun(resource)} "
                                                                     f"({uses[0].placed.why})"))
        else:
            labels(uses, resource)
            tools.append(Tool(
                f"{resource.name}_manage", resource, "actions", uses, title=f"Change {noun(resource)}",
                category=category,
                why=f"the {len(uses)} writes of {noun(resource)}, picked by `action`"))
    for t in tools:
        describe(t)
        fill_units(t)
    return tools


def describe(tool: Tool) -> None:
    """The tool's description from its operations' summaries (the compiler adds one line per branch)."""
    uses = tool.uses
    if tool.dispatch == "single":
        tool.description = _about(uses[0].op, uses[0].placed.kind, tool.resource)
    elif tool.dispatch == "variants":
        fallback, by_id = uses[-1], uses[:-1]
        tool.description = f"{fallback.op.summary.rstrip('.') or 'List ' + noun(tool.resource)}. " + " ".join(
            f"With {', '.join(u.when)}: {_lower_first(u.op.summary.rstrip('.')) or 'the ' + u.placed.kind}."
            for u in by_id)
    else:
        verb = "Read" if all(u.placed.read for u in uses) else "Change"
        tool.description = f"{verb} {noun(tool.resource)}: {', '.join(u.label for u in uses)}."


def forbidden_tool(p: Placed, resource: Resource, why: str) -> Tool:
    use = Use(placed=p, description=p.op.summary, risk="forbidden", risk_why=why)
    return Tool(f"{resource.name}_{action_name(p.kind)}", resource, "single", [use], category=_category(resource),
                forbidden=why, why=why)


def fill_units(tool: Tool) -> None:
    """Units of the tool's visible arguments and kept output fields, each name once."""
    tool.units.clear()
    tool.unit_why.clear()
    if tool.units_off:
        return
    for u in tool.uses:
        names: list[tuple[str, dict[str, Any], set[str]]] = []
        visible = u.visible_args()
        siblings = set(u.op.args)
        names.extend((n, a.schema, siblings) for n, a in u.op.args.items() if n in visible)
        outputs = set(u.shape.fields)
        names.extend((n, s, outputs) for n, s in u.shape.fields.items())
        for name, schema, near in names:
            if name in tool.units or name in tool.refused_units:
                continue
            found = unit_of(name, schema, near)
            if found is not None:
                tool.units[name], tool.unit_why[name] = found


def _category(resource: Resource) -> str | None:
    tags = [t for p in resource.placed for t in p.op.tags]
    if tags:
        return snake(tags[0])[:40] or None
    words = resource.name.split("_")
    return words[0] if words and words[0] else None


def _lower_first(text: str) -> str:
    return text if text[:2].isupper() else text[:1].lower() + text[1:]  # "URL of ..." stays


def _title(summary: str) -> str:
    text = summary.rstrip(".")
    return text if len(text) <= 60 else text[:57].rsplit(" ", 1)[0] + "..."


def _about(op: Op, kind: str, resource: Resource) -> str:
    """A single tool's description: the summary, and the description's first sentence if it adds to it."""
    more = first_line(op.description, 240)
    summary = op.summary.rstrip(".")
    if not summary:
        return more or f"{kind.replace('_', ' ').capitalize()} {noun(resource)}: {op.key}."
    if more and more.rstrip(".").lower() != summary.lower() and not more.lower().startswith(summary.lower()):
        return f"{summary}. {more}"
    return summary + "."
