"""The one place a ToolSpec is made.

Each kind of tool compiles a ToolDraft — single.py (one operation, and raw 1:1 tools),
branches.py (actions, variants), chains.py (steps) — and this module turns it into the Manifest's
ToolSpec. Every tool names its secret arguments by one rule (arguments.sensitive_names: the
`sensitive` list the runtime redacts in logs, audit lines, confirmations and dry runs). An overlay
tool then gets what every overlay tool gets, in this order: the overlay's
title, category, permissions, side effects, audit event and failure modes; its `units` in the
schemas and the description; the annotations its calls imply (overlay hints win); the safety
contract (contract.finish_tool: confirmation, dry run, idempotency, retries); and its access
(rate limit, step-up).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from openapi2mcp.compiler.arguments import sensitive_names
from openapi2mcp.compiler.contract import Extra, finish_tool
from openapi2mcp.compiler.descriptions import annotation_overrides, apply_units, tool_annotations, units_line
from openapi2mcp.compiler.model import Arg
from openapi2mcp.compiler.upstream import rate_limit_spec
from openapi2mcp.manifest import Branch, Dispatch, FailureMode, ResponseSpec, Risk, ToolSpec
from openapi2mcp.overlay import KeyPath, OverlayFile, ToolDef


@dataclass
class ToolDraft:
    """A tool as its kind compiles it, before the overlay's own fields are added."""

    name: str
    title: str | None  # the title when the overlay gives none (the operation's summary)
    description: str  # without the units line
    input_schema: dict[str, Any]
    output_schema: dict[str, Any] | None
    calls: list[tuple[str, Risk]]  # (method, risk) of every call it may make: the annotations
    branches: list[Branch]
    response: ResponseSpec
    risk: Risk
    args: list[Arg]  # the tool's arguments (fixed and hidden ones too): `sensitive`, the units line
    dispatch: Dispatch = "single"
    side_effects: list[str] | None = None  # None: the overlay's
    tail: str = ""  # what the description says after the units line (a paged tool's paging sentence)


def overlay_tool_spec(draft: ToolDraft, tdef: ToolDef, extras: dict[str, Extra], doc: OverlayFile,
                      at: KeyPath) -> ToolSpec:
    """An overlay tool (see the module doc); `extras` per branch key are what contract.adjust_use found."""
    units = dict(tdef.units)
    output_schema = apply_units(draft.input_schema, draft.output_schema, units, doc, (*at, "units"))
    spec = _tool_spec(
        draft,
        title=tdef.title or draft.title,
        description=draft.description + units_line(units, draft.args) + draft.tail,
        output_schema=output_schema,
        annotations=tool_annotations(draft.calls, tdef.title, annotation_overrides(tdef)),
        response=draft.response.model_copy(update={"units": units}),
        failure_modes={k: FailureMode(code=v.code, message=v.message, retryable=v.retryable)
                       for k, v in tdef.failure_modes.items()},
        category=tdef.category,
        permissions=list(tdef.permissions),
        side_effects=draft.side_effects if draft.side_effects is not None else list(tdef.side_effects),
        audit_event=tdef.audit_event,
    )
    return _with_access(finish_tool(spec, tdef, extras, doc, at), tdef)


def raw_tool_spec(draft: ToolDraft, category: str | None) -> ToolSpec:
    """A raw (1:1) tool: the operation's own words, annotations from its method alone."""
    return _tool_spec(draft, title=draft.title, description=draft.description, output_schema=draft.output_schema,
                      annotations=tool_annotations(draft.calls, None, {}), response=draft.response,
                      category=category)


def _tool_spec(
    draft: ToolDraft, *, title: str | None, description: str, output_schema: dict[str, Any] | None,
    annotations: dict[str, Any], response: ResponseSpec, category: str | None,
    failure_modes: dict[str, FailureMode] | None = None, permissions: list[str] | None = None,
    side_effects: list[str] | None = None, audit_event: str | None = None,
) -> ToolSpec:
    return ToolSpec(
        name=draft.name,
        title=title,
        description=description.strip(),
        input_schema=draft.input_schema,
        output_schema=output_schema,
        annotations=annotations,
        dispatch=draft.dispatch,
        branches=draft.branches,
        response=response,
        failure_modes=failure_modes or {},
        risk=draft.risk,
        category=category,
        permissions=permissions or [],
        side_effects=side_effects or [],
        audit_event=audit_event,
        sensitive=sensitive_names(draft.args),  # the one rule, for every kind of tool
    )


def _with_access(tool: ToolSpec, tdef: ToolDef) -> ToolSpec:
    """The access fields of the contract (the runtime's access and limits): rate limit and step-up."""
    update: dict[str, Any] = {}
    if tdef.rate_limit is not None:
        update["rate_limit"] = rate_limit_spec(tdef.rate_limit)
    if tdef.step_up:
        update.update(step_up=True, step_up_scope=tdef.step_up_scope)
    return tool.model_copy(update=update) if update else tool
