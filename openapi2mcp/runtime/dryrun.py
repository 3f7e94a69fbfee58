"""The dry run (`dryRun: true`): the exact requests a real call would send, and nothing with a side effect.

Read-only steps of a chain run (later steps need their results), write steps are only shown; a
native preview (`DryRunSpec.native`) is one upstream call with the preview switch set. A
`dry_run: required` branch answers with the token its real call must carry (policy.py).
"""

from __future__ import annotations

from typing import Any

import mcp_types as types

from openapi2mcp import result as results
from openapi2mcp.errors import ToolFailure
from openapi2mcp.manifest import (
    DRY_RUN_ARG,
    DRY_RUN_INTERNAL_ARG,
    DRY_RUN_TOKEN_ARG,
    Branch,
    ResponseSpec,
    changes_state,
    needs_confirmation,
)
from openapi2mcp.runtime.admission import Plan
from openapi2mcp.runtime.policy import Policy, argument_notes, describe_request, shown_arguments
from openapi2mcp.runtime.steps import Steps, step_value
from openapi2mcp.runtime.tools import Tool
from openapi2mcp.shape import Shaper, search, truthy

DRY_RUN_MAX_BYTES = 16_000  # the least room a preview gets, whatever the tool's own max_bytes


async def dry_run(
    steps: Steps, policy: Policy, tool: Tool, branch: Branch, arguments: dict[str, Any], plan: Plan
) -> types.CallToolResult:
    """The exact request(s) a real call sends, its side effects, and the upstream's own preview.

    Nothing with a side effect is sent: read-only steps of a chain run (later steps need their
    results), write steps are only shown; a native preview (`DryRunSpec.native`) is one upstream
    call with the preview switch set, and its answer is `preview`.
    """
    spec, dry = tool.spec, branch.dry_run
    assert dry is not None
    real = {k: v for k, v in arguments.items() if k not in (DRY_RUN_ARG, DRY_RUN_TOKEN_ARG, DRY_RUN_INTERNAL_ARG)}
    context: dict[str, Any] = {"inputs": real, "steps": {}}
    multi = len(branch.steps) > 1
    shown: list[dict[str, Any]] = []
    preview: Any = None
    blind: str | None = None  # a write step that was not sent: later steps may depend on its result
    for step in branch.steps:
        if step.when and blind is None and not truthy(search(step.when, context)):
            continue
        op = step.operation

        def evaluate(expr: str) -> Any:
            return search(expr, context)

        try:
            try:
                prepared = steps.upstream.preview(op, real, evaluate, headers=plan.headers)
            except ToolFailure:
                if blind is None:
                    raise
                shown.append({"step": step.id, "operation": op.id, "method": op.method, "url": op.path,
                              "note": f"depends on the result of step {blind}, which a dry run does not send"})
                continue
            entry = {"operation": op.id, **describe_request(prepared, steps.upstream.redactor, spec.sensitive)}
            shown.append({"step": step.id, **entry} if multi else entry)
            if dry.native:  # the upstream's own preview: the same request with its switch set
                _, payload = await steps.fetch(plan, op, {**real, DRY_RUN_INTERNAL_ARG: dry.value}, evaluate)
                if payload.kind == "json":
                    preview = steps.upstream.redactor.value(payload.value)
                elif payload.kind == "text":
                    preview = steps.upstream.redactor.text(payload.value)
            elif not changes_state(branch, op) and multi:  # a read a later step needs: run it
                resp, payload = await steps.fetch(plan, op, real, evaluate, step.id)
                context["steps"][step.id] = step_value(payload, resp.status)
            else:
                blind = blind or step.id
                context["steps"][step.id] = None
        except ToolFailure as failure:
            if multi:
                failure.error.step = step.id
            raise
    if not needs_confirmation(branch):
        confirmation = "not needed"
    elif branch.risk in policy.auto_approve:
        confirmation = f"auto-approved on this server (--auto-approve {branch.risk})"
    else:
        confirmation = "the real call asks the user to confirm first"
    structured: dict[str, Any] = {
        "dryRun": True, "requests": shown, "sideEffects": list(branch.side_effects or spec.side_effects),
        "confirmation": confirmation,
    }
    if preview is not None:
        structured["preview"] = preview
    hidden = argument_notes(shown_arguments(spec, branch, real, steps.upstream.redactor))
    if hidden:  # where the requests above hold what a reader cannot see (display.py)
        structured["argumentWarnings"] = hidden
    if dry.mode == "required":
        structured["dryRunToken"], structured["expiresAt"] = policy.dry_run_token(
            spec, branch, arguments, plan.caller)
    shaped = Shaper(ResponseSpec(max_bytes=max(spec.response.max_bytes, DRY_RUN_MAX_BYTES)), None).json(structured)
    return results.success(shaped, results.meta(plan.record.trace_id, plan.record.requests))
