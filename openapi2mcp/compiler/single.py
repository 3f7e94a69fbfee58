"""One operation -> one tool: an overlay tool with `operation`, and the raw (1:1) tools.

compile_use is the step every operation of an overlay tool goes through (an action or a variant
too, branches.py): find the operation, take its arguments (arguments.py) as `params` says, and
make its result plan — paged (paging.py), projected by `select`, or the success response as it is
(responses.py). A raw tool is an operation as the spec writes it, with size budgets instead of an
author's curation.
"""

from __future__ import annotations

from openapi2mcp.compiler.arguments import apply_param_defs, operation_args, operation_spec
from openapi2mcp.compiler.contract import adjust_use
from openapi2mcp.compiler.descriptions import (
    RAW_DESCRIPTION_LIMIT,
    default_risk,
    op_description,
    op_title,
)
from openapi2mcp.compiler.model import Context, Operation, Use, input_schema
from openapi2mcp.compiler.operations import require_operation
from openapi2mcp.compiler.paging import paginate, paging_sentence
from openapi2mcp.compiler.responses import (
    OUTPUT_DEPTH_RAW,
    OUTPUT_DEPTH_TOOL,
    output_contract,
    output_kind,
    output_schema,
    projected_output,
    response_def_of,
    response_spec,
)
from openapi2mcp.compiler.toolspec import ToolDraft, overlay_tool_spec, raw_tool_spec
from openapi2mcp.manifest import Branch, ResponseSpec, Risk, Step, ToolSpec
from openapi2mcp.overlay import KeyPath, OverlayFile, PaginationDef, ParamDef, ResponseDef, ToolDef, ToolOverlay

# Raw (1:1) tools get a size budget per schema (about bytes, see schemas.limit_size): a Kubernetes
# create call's body alone is ~200 KB inlined. Overlay tools are curated: no budget.
RAW_INPUT_BUDGET = 16_000
RAW_OUTPUT_BUDGET = 8_000


def compile_use(
    ctx: Context,
    ref: str,
    params: dict[str, ParamDef],
    risk: Risk | None,
    response_def: ResponseDef | None,
    pagination_def: PaginationDef | None,
    doc: OverlayFile,
    at: KeyPath,
) -> Use:
    """Compile one operation with its `params`, `response` and `pagination` overrides."""
    op = require_operation(ctx, ref, doc, (*at, "operation"))
    args = apply_param_defs(ctx, op, operation_args(ctx, op), params, doc, at)
    response = response_spec(response_def)
    use = Use(op=op, args=args, operation=operation_spec(ctx, op, args), output_schema=None,
              output_kind=output_kind(ctx, op), response=response, risk=risk or default_risk(op.method))
    # the output schema is the response's, projected by `select` or remade by paging: converted once
    if pagination_def is not None:
        return paginate(ctx, use, pagination_def, doc, (*at, "pagination"), at)
    if response.select:
        use.output_schema, use.response = projected_output(ctx, op, response, doc, (*at, "response", "select"))
    else:
        use.output_schema, wrap = output_schema(ctx, op, OUTPUT_DEPTH_TOOL)
        use.response = response.model_copy(update={"wrap": wrap})
    use.output_schema = output_contract(ctx, use.output_schema, response)
    return use


def operation_tool(ctx: Context, tdef: ToolDef, overlay: ToolOverlay, doc: OverlayFile, at: KeyPath) -> ToolSpec:
    """An overlay tool with `operation`: one call."""
    assert tdef.operation is not None
    use = compile_use(ctx, tdef.operation, tdef.params, tdef.risk, response_def_of(overlay, tdef.response),
                      tdef.pagination, doc, at)
    use, extra = adjust_use(ctx, use, tdef, None, doc, at)
    op, risk = use.op, use.risk
    draft = ToolDraft(
        name=tdef.name,
        title=op_title(op),
        description=tdef.description or op_description(op, limit=None),
        input_schema=use.input_schema(),
        output_schema=use.output_schema,
        calls=[(op.method, risk)],
        branches=[Branch(key="default", steps=[Step(id="call", operation=use.operation)],
                         risk=risk, side_effects=list(tdef.side_effects), pagination=use.pagination)],
        response=use.response,
        risk=risk,
        args=use.args,
        tail="\n" + paging_sentence(use.pagination) if use.pagination is not None else "",
    )
    return overlay_tool_spec(draft, tdef, {"default": extra}, doc, at)


def raw_tool(ctx: Context, op: Operation, name: str, response: ResponseSpec) -> ToolSpec:
    """One operation as a tool of its own; `response` is the overlay's `defaults.response` (no `select`)."""
    args = operation_args(ctx, op)
    risk = default_risk(op.method)
    schema, wrap = output_schema(ctx, op, OUTPUT_DEPTH_RAW)
    schema = output_contract(ctx, schema, response)
    if schema is not None:
        schema = ctx.converter.limit_size(schema, RAW_OUTPUT_BUDGET)
    draft = ToolDraft(
        name=name,
        title=op_title(op),
        description=op_description(op, limit=RAW_DESCRIPTION_LIMIT),
        input_schema=ctx.converter.limit_size(input_schema(args), RAW_INPUT_BUDGET),
        output_schema=schema,
        calls=[(op.method, risk)],
        branches=[Branch(key="default", steps=[Step(id="call", operation=operation_spec(ctx, op, args))], risk=risk)],
        response=response.model_copy(update={"wrap": wrap}),
        risk=risk,
        args=args,
    )
    tags = op.node.get("tags")
    return raw_tool_spec(draft, category=(tags or [None])[0] if isinstance(tags, list) else None)
