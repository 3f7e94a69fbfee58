"""The checks of the O2M1xx rules: each reads the LintContext and returns the hits it finds."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from openapi2mcp.authoring.facts import named
from openapi2mcp.authoring.lint.model import Hit
from openapi2mcp.authoring.lint.text import (
    description_problem,
    names_tell_apart,
    similar,
    stated_bounds,
)
from openapi2mcp.authoring.lint.views import BranchView, LintContext, ToolView, for_model
from openapi2mcp.authoring.paging import is_page_size, spec_paging
from openapi2mcp.authoring.risk import admin_reason, danger_reason
from openapi2mcp.authoring.writer import flow_line
from openapi2mcp.compiler import pin_warning
from openapi2mcp.manifest import RISK_ORDER, SAFE_METHODS, needs_confirmation

TOOL_MIN_WORDS = 5  # "Search notes by keyword." is four: say what comes back, or when to use it
BRANCH_MIN_WORDS = 3  # one line in the tool's list of actions
ARG_MIN_WORDS = 2  # "Repository owner" is enough; "Owner" is not
SIMILAR = 0.9  # word-level ratio above which two tool descriptions read as the same tool


def _own_description(tool: ToolView) -> str | None:
    """What the tool says about itself, before openapi2mcp adds the list of actions or the paging sentence."""
    if tool.written is not None and tool.written.description:
        return tool.written.description
    if tool.spec.dispatch != "single":
        return None  # an action or variant tool without its own words has only the generated list
    ops = tool.branches[0].operations if tool.branches else []
    return ops[0].summary if ops else None


def _names(tool: ToolView) -> list[str]:
    out = [tool.name, tool.written.name if tool.written else ""]
    for b in tool.branches:
        out += [b.key, *(o.id for o in b.operations), *(o.key for o in b.operations)]
    return out


def tool_descriptions(ctx: LintContext) -> Iterator[Hit]:
    for tool in ctx.listed:
        problem = description_problem(_own_description(tool), _names(tool), TOOL_MIN_WORDS)
        if problem:
            yield Hit(f"tool {tool.name!r} {problem}", (*tool.path, "description"), tool.name)


def branch_descriptions(ctx: LintContext) -> Iterator[Hit]:
    for tool in ctx.listed:
        for b in tool.branches:
            if b.written is None or b.branch.risk == "forbidden":
                continue
            own = b.written.description or (b.operations[0].summary if b.operations else None)
            names = [b.key, *(o.id for o in b.operations), *(o.key for o in b.operations)]
            problem = description_problem(own, names, BRANCH_MIN_WORDS)
            if problem:
                kind = "action" if tool.spec.dispatch == "action" else "variant"
                yield Hit(f"{kind} {b.key!r} of {tool.name!r} {problem}", (*b.path, "description"), tool.name)


def _arguments(tool: ToolView) -> Iterator[tuple[str, dict[str, Any]]]:
    props = tool.spec.input_schema.get("properties") or {}
    skip = tool.generated_args()
    for name, schema in props.items():
        if name not in skip and isinstance(schema, dict):
            yield name, schema


def arg_descriptions(ctx: LintContext) -> Iterator[Hit]:
    for tool in ctx.listed:
        for name, schema in _arguments(tool):
            problem = description_problem(schema.get("description"), [name], ARG_MIN_WORDS)
            if problem:
                yield Hit(f"argument {name!r} of {tool.name!r} {problem}", tool.arg_path(name), tool.name,
                          fix=f'params: {{{name}: {{description: "..."}}}} saying what it is, its format and an '
                          "example")


def _types(schema: dict[str, Any]) -> set[str]:
    t = schema.get("type")
    out = {t} if isinstance(t, str) else {x for x in t if isinstance(x, str)} if isinstance(t, list) else set()
    for sub in schema.get("anyOf") or schema.get("oneOf") or []:
        if isinstance(sub, dict):
            out |= _types(sub)
    return out - {"null"}


_SATISFIED_BY = {"maximum": ("maximum", "exclusiveMaximum", "enum", "const"),
                 "minimum": ("minimum", "exclusiveMinimum", "enum", "const"),
                 "maxLength": ("maxLength", "enum", "const", "format"), "minLength": ("minLength", "enum", "const"),
                 "maxItems": ("maxItems",), "minItems": ("minItems",)}


def _has(schema: dict[str, Any], keyword: str) -> bool:
    keys = _SATISFIED_BY.get(keyword, (keyword,))
    if any(k in schema for k in keys):
        return True
    return any(isinstance(s, dict) and _has(s, keyword) for s in schema.get("anyOf") or schema.get("oneOf") or [])


def arg_bounds(ctx: LintContext) -> Iterator[Hit]:
    for tool in ctx.listed:
        for name, schema in _arguments(tool):
            types = _types(schema)
            stated = stated_bounds(schema.get("description") or "", types)
            missing = {k: v for k, v in stated.items() if not _has(schema, k)}
            if missing:
                said = ", ".join(f"{k}: {v}" for k, v in missing.items())
                yield Hit(f"argument {name!r} of {tool.name!r}: its description states {said} but its schema does "
                          "not, so the model is not held to it", tool.arg_path(name), tool.name,
                          fix=f"params: {{{name}: {{{said}}}}}")
            elif types & {"integer", "number"} and is_page_size(name) and not _has(schema, "maximum"):
                yield Hit(f"argument {name!r} of {tool.name!r} is a page size without a maximum: the API caps it, "
                          "the model does not know where", tool.arg_path(name), tool.name,
                          fix=f"params: {{{name}: {{maximum: N}}}} with the API's cap (or use `pagination`)")


def pagination(ctx: LintContext) -> Iterator[Hit]:
    for tool in ctx.listed:
        for b in tool.branches:
            if b.branch.pagination is not None or len(b.operations) != 1 or b.branch.risk == "forbidden":
                continue
            op = b.operations[0]
            if op.method not in SAFE_METHODS and RISK_ORDER[b.branch.risk] > RISK_ORDER["low"]:
                continue  # a write that takes a `limit` is not a list
            found, _ = spec_paging(ctx.doc, op)  # init's detector: the block `openapi2mcp init` drafts
            if found is None:
                continue
            items = found.block.get("items")
            call = b.branch.steps[0].operation
            fed = {p.name for p in call.params if p.arg} | set(call.body.properties.values() if call.body else ())
            effect = (f"the model pages by hand ({found.position}), without a budget or one contract for every "
                      "list" if found.position in fed else "the model sees one page and cannot ask for the next")
            yield Hit(f"{b.label} lists ({op.key} returns {repr(items) if items else 'an array'}) and the API pages "
                      f"it ({found.why}), but the tool has no `pagination`: {effect}", (*b.path, "operation"),
                      tool.name,
                      fix=f"{flow_line('pagination', found.block)}  # as `openapi2mcp init` drafts it "
                      "(docs/task-tools.md#pagination-one-contract-for-every-api)")


def response_select(ctx: LintContext) -> Iterator[Hit]:
    cap = ctx.options.max_response_bytes
    for tool in ctx.listed:
        for b in tool.branches:
            if len(b.operations) != 1 or b.response.select or b.branch.risk == "forbidden":
                continue
            if b.branch.pagination is not None and b.branch.pagination.item_select:
                continue
            schema = ctx.doc.success(b.operations[0]).schema
            if schema is None:
                continue
            size = ctx.doc.structure_size(schema, cap)
            if size > cap:
                yield Hit(f"{b.label} returns the whole {b.operations[0].key} response, whose schema describes "
                          f"more than {cap:,} bytes of fields, without `response.select`", (*b.path, "operation"),
                          tool.name,
                          fix="add `response: {select: \"{id: id, name: name, ...}\"}` (JMESPath) keeping the fields a "
                          "model needs")


def token_budget(ctx: LintContext) -> Iterator[Hit]:
    size = ctx.listing_bytes()
    tokens = max(1, round(size / 4))
    if tokens <= ctx.options.max_tokens:
        return
    sizes = sorted(((len(json.dumps(for_model(d), ensure_ascii=False).encode()), d["name"]) for d in ctx.definitions),
                   reverse=True)[:3]
    biggest = ", ".join(f"{n} ~{max(1, round(s / 4)):,}" for s, n in sizes)
    yield Hit(f"tools/list is ~{tokens:,} tokens ({size:,} bytes / 4), over the budget of "
              f"{ctx.options.max_tokens:,}; the largest: {biggest}", ("tools",))


def similar_descriptions(ctx: LintContext) -> Iterator[Hit]:
    seen: list[tuple[ToolView, str]] = []
    for tool in ctx.listed:
        own = _own_description(tool)
        if not own or tool.written is None:
            continue
        for other, text in seen:
            ratio = similar(text, own, SIMILAR)
            if ratio is not None and not names_tell_apart(text, own, other.name, tool.name):
                there = ctx.overlay.location(other.path)
                yield Hit(f"tools {other.name!r} (line {there.line}) and {tool.name!r} have near-identical "
                          f"descriptions ({ratio:.0%} alike): a model cannot tell when to use which",
                          (*tool.path, "description"), tool.name)
                break
        seen.append((tool, own))


def _writes(b: BranchView) -> bool:
    return any(o.method not in SAFE_METHODS for o in b.operations)


def side_effects(ctx: LintContext) -> Iterator[Hit]:
    for tool in ctx.listed:
        for b in tool.branches:
            risky = RISK_ORDER[b.branch.risk]
            if risky < RISK_ORDER["medium"] or b.branch.risk == "forbidden" or not _writes(b):
                continue
            if not b.branch.side_effects and not tool.spec.side_effects:
                ops = ", ".join(o.key for o in b.operations if o.method not in SAFE_METHODS)
                yield Hit(f"{b.label} writes ({ops}, risk {b.branch.risk}) without `side_effects`: the user is asked "
                          "to confirm, and the audit log records, a change nobody described",
                          (*b.path, "side_effects") if b.written else (*tool.path, "side_effects"), tool.name)


def critical_unguarded(ctx: LintContext) -> Iterator[Hit]:
    for tool in ctx.listed:
        for b in tool.branches:
            if b.branch.risk == "critical" and not needs_confirmation(b.branch) and b.branch.dry_run is None:
                yield Hit(f"{b.label} is critical and runs without confirmation or a dry run "
                          f"(confirmation: {b.branch.confirmation})", (*b.path, "confirmation"), tool.name)


def dangerous_operations(ctx: LintContext) -> Iterator[Hit]:
    for tool in ctx.listed:
        for b in tool.branches:
            if b.branch.risk == "forbidden":
                continue
            for op in b.operations:  # init's words: what it drafts as `risk: forbidden`, or leaves out as admin
                name = named(op)
                danger = danger_reason(name)
                admin = admin_reason(name)
                why = f"{danger}: an agent may run it" if danger else f"is an {admin}" if admin else None
                if why:
                    yield Hit(f"{b.label} exposes {op.key} ({op.id}), which {why}", (*b.path, "operation"), tool.name)


def spec_pin(ctx: LintContext) -> Iterator[Hit]:
    warning = pin_warning(ctx.project.spec, ctx.overlay)
    if warning is not None:
        yield Hit(warning.message, ("spec", "sha256"), fix=warning.hint)
