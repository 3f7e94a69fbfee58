"""The safety contract of seed 002: confirmation, dry run, idempotency, retries.

The overlay says, per tool and per action or variant:

* `confirmation`: `auto` (default: required for high and critical risk), `required` or `never`,
  with an optional `message` template. `never` on a critical branch needs `acknowledge_risk: true`:
  a critical call without a human in the loop must be a decision someone wrote down.
* `dry_run`: `supported` or `required`, optionally mapped to the upstream's own preview switch
  (`upstream_param`): the tool gets a `dryRun` argument (and `dryRunToken` when required).
* `idempotent` / `idempotency`: the branch sends a key derived from tool + arguments + caller in
  a header (default `Idempotency-Key`); the operation's own parameter of that name is hidden
  from the model (the server sets it).
* `retries` (tool and upstream): attempts for idempotent requests (the runtime retries).

Two hooks: `adjust_use` (called by single.py and branches.py) rewires one compiled operation
(hides the preview switch and the key header, adds the dry-run arguments, picks the real result's
schema when the preview is another status) and `finish_tool` (called by toolspec.py for every
overlay tool) puts the resolved contract into the Manifest (Branch/ToolSpec fields), the tool
description, the annotations and the output schema (a dry run's result is a second shape, so the
schema becomes `anyOf` [real, dry-run]). Everything is checked here, with the overlay's file, line
and key; the runtime only applies what the Manifest says.
"""

from __future__ import annotations

import copy
import dataclasses
from typing import Any

from openapi2mcp.compiler.arguments import operation_spec
from openapi2mcp.compiler.model import Arg, Context, Use
from openapi2mcp.compiler.responses import OUTPUT_DEPTH_TOOL, json_schema, output_contract, response_object, wrap_output
from openapi2mcp.compiler.upstream import retry_spec
from openapi2mcp.errors import InputError, did_you_mean
from openapi2mcp.manifest import (
    DRY_RUN_ARG,
    DRY_RUN_INTERNAL_ARG,
    DRY_RUN_TOKEN_ARG,
    IDEMPOTENT_METHODS,
    RISK_ORDER,
    Branch,
    DryRunSpec,
    IdempotencySpec,
    ToolSpec,
    placeholders,
)
from openapi2mcp.overlay import ConfirmationDef, DryRunDef, KeyPath, OperationUse, OverlayFile, ToolDef


@dataclasses.dataclass
class Extra:
    """What `adjust_use` learnt that `finish_tool` needs: the native preview's response schema."""

    preview_schema: dict[str, Any] | None = None


# ============================================================================ per operation


def _dry_run_of(tdef: ToolDef, bdef: OperationUse | None) -> DryRunDef | None:
    return bdef.dry_run if bdef is not None and bdef.dry_run is not None else tdef.dry_run


def _idempotency_of(tdef: ToolDef, bdef: OperationUse | None) -> IdempotencySpec | None:
    own = bdef.idempotent if bdef is not None else None
    wanted = own if own is not None else (tdef.idempotent or tdef.idempotency is not None)
    if not wanted:
        return None
    return IdempotencySpec(header=tdef.idempotency.header) if tdef.idempotency else IdempotencySpec()


def adjust_use(
    ctx: Context, use: Use, tdef: ToolDef, bdef: OperationUse | None, doc: OverlayFile, at: KeyPath
) -> tuple[Use, Extra]:
    """Apply the branch's dry run and idempotency to one compiled operation (see the module doc)."""
    ddef = _dry_run_of(tdef, bdef)
    idem = _idempotency_of(tdef, bdef)
    where = at if bdef is not None and bdef.dry_run is not None else _tool_at(at)
    extra = Extra()
    if ddef is None and idem is None:
        return use, extra
    args = [dataclasses.replace(a) for a in use.args]
    internal: Arg | None = None
    hidden_header: Arg | None = None
    if ddef is not None:
        if use.pagination is not None:
            raise InputError(doc.problem((*where, "dry_run"), "a paginated tool reads: it has nothing to dry-run"))
        if ddef.upstream_param is not None:
            internal = _find_wire(args, ddef.upstream_param)
            if internal is None:
                known = sorted({a.wire for a in args})
                hint = did_you_mean(ddef.upstream_param, known)
                raise InputError(doc.problem(
                    (*where, "dry_run", "upstream_param"),
                    f"operation {use.op.id!r} has no parameter or body property {ddef.upstream_param!r}"
                    + (f"; {hint}" if hint else ""),
                    hint=f"its parameters: {', '.join(known)}" if known else None,
                ))
            if internal.fixed:
                raise InputError(doc.problem(
                    (*where, "dry_run", "upstream_param"),
                    f"{internal.wire!r} has a fixed `value` in params: the dry run sets it, remove the fixed value",
                ))
            if internal.location == "body*":
                raise InputError(doc.problem((*where, "dry_run", "upstream_param"),
                                             "the preview switch must be a parameter or a body property"))
            internal.name, internal.hidden, internal.required = DRY_RUN_INTERNAL_ARG, False, False
        clash = next((a for a in args if a.name in (DRY_RUN_ARG, DRY_RUN_TOKEN_ARG) and a.shown
                      and a is not internal), None)
        if clash is not None:
            raise InputError(doc.problem(
                (*where, "dry_run"), f"operation {use.op.id!r} has an argument {clash.name!r}, which the dry run adds",
                hint=f"map it as the upstream's preview switch (dry_run: {{upstream_param: {clash.wire}}}) or rename "
                f"it (params: {{{clash.wire}: {{rename: {clash.wire}_param}}}})",
            ))
    if idem is not None:
        hidden_header = next((a for a in args if a.location == "header" and a.wire.lower() == idem.header.lower()),
                             None)
        if hidden_header is not None:
            hidden_header.hidden = True
    operation = operation_spec(ctx, use.op, args)
    if internal is not None:
        internal.hidden = True  # in the plan (fed by the runtime on dry runs), never shown to the model
    extra_inputs = dict(use.extra_inputs)
    output_schema, response = use.output_schema, use.response
    if ddef is not None:
        extra_inputs.update(dry_run_arguments(ddef.mode))
        if ddef.upstream_param is not None:
            preview_status = ddef.preview_status or "200"
            preview, _ = _status_schema(ctx, use, preview_status)
            real_status = _other_json_status(use, preview_status)
            if real_status is not None:
                if response.select:
                    raise InputError(doc.problem(
                        (*where, "dry_run"), f"`response.select` with a preview ({preview_status}) and a result "
                        f"({real_status}) of different shapes is not supported; remove `select`",
                    ))
                real, wrap = _status_schema(ctx, use, real_status)
                output_schema, response = real, response.model_copy(update={"wrap": wrap})
            extra.preview_schema = preview
    adjusted = dataclasses.replace(use, args=args, operation=operation, extra_inputs=extra_inputs,
                                   output_schema=output_schema, response=response)
    return adjusted, extra


def _tool_at(at: KeyPath) -> KeyPath:
    """The tool's own key path when `at` points into one of its actions or variants."""
    for key in ("actions", "variants"):
        if key in at:
            return at[: at.index(key)]
    return at


def _find_wire(args: list[Arg], name: str) -> Arg | None:
    return next((a for a in args if a.wire == name), None) or next((a for a in args if a.name == name), None)


def dry_run_arguments(mode: str) -> dict[str, dict[str, Any]]:
    """The arguments a dry-run tool adds to its input schema."""
    out: dict[str, dict[str, Any]] = {
        DRY_RUN_ARG: {
            "type": "boolean", "default": False,
            "description": "true: check everything and return the exact request(s) a real call would send and "
            "its side effects, without doing it"
            + (". A real call needs the dryRunToken of such a preview." if mode == "required" else "."),
        },
    }
    if mode == "required":
        out[DRY_RUN_TOKEN_ARG] = {
            "type": "string", "minLength": 1, "maxLength": 4096,
            "description": "For the real call (dryRun false): the dryRunToken of a dry run with the same "
            "arguments. It expires; run the dry run again when refused.",
        }
    return out


def _status_schema(ctx: Context, use: Use, status: str) -> tuple[dict[str, Any] | None, str | None]:
    """The output schema (and wrap key) of one documented status's JSON body."""
    raw = json_schema(response_object(ctx, use.op, status))
    if raw is None:
        return None, None
    schema, wrap = wrap_output(ctx.convert(raw, "output", f"{use.op.pointer}/responses/{status}", OUTPUT_DEPTH_TOOL))
    return output_contract(ctx, schema, use.response), wrap


def _other_json_status(use: Use, preview: str) -> str | None:
    responses = use.op.node.get("responses")
    statuses = responses if isinstance(responses, dict) else {}
    codes = sorted(str(c) for c in statuses if str(c).startswith("2") and str(c) != preview)
    return next((c for c in codes if c.isdigit()), None)


# ============================================================================ per tool


def _confirmation_of(tdef: ToolDef, bdef: OperationUse | None) -> ConfirmationDef:
    if bdef is not None and bdef.confirmation is not None:
        return bdef.confirmation
    return tdef.confirmation or ConfirmationDef()


def _branch_defs(tdef: ToolDef, spec: ToolSpec) -> list[tuple[OperationUse | None, KeyPath]]:
    if tdef.actions is not None:
        return [(adef, ("actions", name)) for name, adef in tdef.actions.items()]
    if tdef.variants is not None:
        return [(vdef, ("variants", i)) for i, vdef in enumerate(tdef.variants)]
    return [(None, ()) for _ in spec.branches]


def finish_tool(
    spec: ToolSpec, tdef: ToolDef, extras: dict[str, Extra], doc: OverlayFile, at: KeyPath
) -> ToolSpec:
    """Resolve the tool's contract into the Manifest (see the module doc)."""
    branches: list[Branch] = []
    for branch, (bdef, sub) in zip(spec.branches, _branch_defs(tdef, spec), strict=True):
        conf = _confirmation_of(tdef, bdef)
        where = (*at, *sub) if bdef is not None and bdef.confirmation is not None else at
        if conf.mode == "never" and branch.risk == "critical" and not conf.acknowledge_risk:
            raise InputError(doc.problem(
                (*where, "confirmation"),
                f"{'action ' + repr(branch.key) + ' of ' if sub else ''}{spec.name} is critical: calls without the "
                "user's confirmation must be acknowledged",
                hint="confirmation: {mode: never, acknowledge_risk: true} (or `--auto-approve critical` for "
                "trusted automation, recorded in the audit log)",
            ))
        if conf.message is not None:
            _check_message(conf.message, branch, spec, doc, (*where, "confirmation", "message"))
        ddef = _dry_run_of(tdef, bdef)
        dry_run = None
        if ddef is not None:
            if spec.dispatch == "single" and len(branch.steps) > 1 and ddef.upstream_param is not None:
                raise InputError(doc.problem((*at, "dry_run", "upstream_param"),
                                             "a chain cannot map its dry run to an upstream parameter"))
            dry_run = DryRunSpec(mode=ddef.mode, native=ddef.upstream_param is not None, value=ddef.value,
                                 token_ttl=ddef.token_ttl)
        idem = _idempotency_of(tdef, bdef)
        branches.append(branch.model_copy(update={
            "confirmation": conf.mode, "confirmation_message": conf.message, "dry_run": dry_run,
            "idempotency": idem,
        }))
    retries = retry_spec(tdef.retries)
    if retries is not None and retries.max_attempts > 1:
        writes = [b for b in branches if b.idempotency is None
                  and any(s.operation.method not in IDEMPOTENT_METHODS for s in b.steps)]
        if len(writes) == len(branches):
            raise InputError(doc.problem(
                (*at, "retries"), f"{spec.name} is not idempotent: a retried request could act twice",
                hint="add `idempotent: true` (the server then sends an Idempotency-Key the upstream must honour)",
            ))
    update: dict[str, Any] = {"branches": branches, "retries": retries}  # step_up: toolspec.with_access
    live = [b for b in branches if b.risk != "forbidden"]
    with_dry_run = [b for b in live if b.dry_run is not None]
    input_schema = spec.input_schema
    if with_dry_run and spec.dispatch == "single" and len(spec.branches[0].steps) > 1:
        input_schema = copy.deepcopy(input_schema)
        mode = with_dry_run[0].dry_run.mode if with_dry_run[0].dry_run else "supported"
        input_schema.setdefault("properties", {}).update(dry_run_arguments(mode))
    props = input_schema.get("properties") or {}
    required = [b for b in with_dry_run if b.dry_run is not None and b.dry_run.mode == "required"]
    if with_dry_run and len(with_dry_run) < len(live) and DRY_RUN_ARG in props:  # say which ones take it
        input_schema = copy.deepcopy(input_schema)
        for arg, takers in ((DRY_RUN_ARG, with_dry_run), (DRY_RUN_TOKEN_ARG, required)):
            if arg in input_schema["properties"] and takers:
                held = input_schema["properties"][arg]
                held["description"] = f"{held.get('description', '')} Only for: {_keys(takers)}.".strip()
    update["input_schema"] = input_schema
    if with_dry_run and spec.output_schema is not None:
        previews = [extras[b.key].preview_schema for b in with_dry_run if b.key in extras]
        preview = previews[0] if len(previews) == 1 and previews[0] is not None else None
        update["output_schema"] = with_dry_run_result(spec.output_schema, preview)
    update["description"] = spec.description + contract_sentences(live)
    if any(b.idempotency is not None for b in live) and not (
        tdef.annotations and tdef.annotations.idempotent_hint is not None
    ):
        annotations = dict(spec.annotations)
        if not annotations.get("readOnlyHint"):
            annotations["idempotentHint"] = all(
                b.idempotency is not None or all(s.operation.method in IDEMPOTENT_METHODS for s in b.steps)
                for b in live
            )
        update["annotations"] = annotations
    return spec.model_copy(update=update)


def _check_message(message: str, branch: Branch, spec: ToolSpec, doc: OverlayFile, where: KeyPath) -> None:
    """Every `{name}` of a confirmation message is an argument of its branch (as prompts are checked)."""
    names = branch.accepts if branch.accepts is not None else list(spec.input_schema.get("properties", {}))
    names = [n for n in names if n not in (DRY_RUN_ARG, DRY_RUN_TOKEN_ARG)]
    problems = []
    for name in placeholders(message):
        if name in names:
            continue
        hint = did_you_mean(name, names)
        kind = {"action": "action", "presence": "variant"}.get(spec.dispatch)
        which = f"{kind} {branch.key!r} of {spec.name}" if kind else spec.name
        problems.append(doc.problem(
            where, f"{{{name}}} in the confirmation message is not an argument of {which}"
            + (f"; {hint}" if hint else ""),
            hint=(f"its arguments: {', '.join(sorted(names))}" if names else "it takes no arguments")
            + "; write {{ and }} for literal braces",
        ))
    if problems:
        raise InputError(problems)


def contract_sentences(branches: list[Branch]) -> str:
    """What the model must know to call the tool: who confirms, and the dry-run-token flow."""
    confirmed = [b for b in branches if b.confirmation == "required"
                 or (b.confirmation == "auto" and RISK_ORDER[b.risk] >= RISK_ORDER["high"])]
    out = ""
    multi = len(branches) > 1
    if confirmed:
        which = f" ({', '.join(b.key for b in confirmed)})" if multi and len(confirmed) < len(branches) else ""
        out += f"\nThe server asks the user to confirm each real call{which} before anything is sent."
    dry = [b for b in branches if b.dry_run is not None]
    if dry:
        required = [b for b in dry if b.dry_run is not None and b.dry_run.mode == "required"]
        which = f" ({_keys(dry)} only)" if multi and len(dry) < len(branches) else ""
        out += f"\nDry run{which}: call with dryRun: true to see exactly what would be sent, without doing it."
        if required:
            which = f" ({', '.join(b.key for b in required)})" if multi and len(required) < len(branches) else ""
            out += (f" Required{which}: the real call (dryRun false) must pass the dryRunToken of a dry run with the "
                    "same arguments.")
    return out


def _keys(branches: list[Branch]) -> str:
    return ", ".join(b.key for b in branches)


def with_dry_run_result(real: dict[str, Any], preview: dict[str, Any] | None) -> dict[str, Any]:
    """The output schema of a dry-run tool: the real result, or the dry-run result."""
    defs: dict[str, Any] = dict(real.get("$defs", {}))
    body = {k: v for k, v in real.items() if k != "$defs"}
    preview_body: dict[str, Any] = {}
    if preview is not None:
        defs.update(preview.get("$defs", {}))
        preview_body = {k: v for k, v in preview.items() if k != "$defs"}
    out: dict[str, Any] = {"type": "object", "anyOf": [body, dry_run_result_schema(preview_body)]}
    if defs:
        out["$defs"] = {k: defs[k] for k in sorted(defs)}
    return out


def dry_run_result_schema(preview: dict[str, Any]) -> dict[str, Any]:
    request = {
        "type": "object",
        "properties": {
            "step": {"type": "string"}, "operation": {"type": "string"}, "method": {"type": "string"},
            "url": {"type": "string"}, "headers": {"type": "object", "additionalProperties": {"type": "string"}},
            "body": {"description": "JSON bodies as JSON, text as text, binary as a size note."},
            "note": {"type": "string"},
        },
        "required": ["method", "url"],
    }
    properties: dict[str, Any] = {
        "dryRun": {"const": True, "description": "This is a preview: nothing was changed."},
        "requests": {"type": "array", "items": request,
                     "description": "The exact requests a real call sends (secrets shown as ***)."},
        "sideEffects": {"type": "array", "items": {"type": "string"}},
        "confirmation": {"type": "string", "description": "Whether the real call asks the user first."},
        "argumentWarnings": {"type": "array", "items": {"type": "string"},
                             "description": "Arguments holding what a reader cannot see (invisible characters, "
                             "long runs of spaces, line breaks)."},
    }
    if preview:
        properties["preview"] = {**preview, "description": "The upstream's own preview of the call."}
    else:
        properties["preview"] = {"description": "The upstream's own preview, when it has one."}
    properties["dryRunToken"] = {"type": "string", "description": "Pass as dryRunToken to make the real call."}
    properties["expiresAt"] = {"type": "string", "format": "date-time"}
    return {"type": "object", "properties": properties, "required": ["dryRun", "requests", "sideEffects"]}
