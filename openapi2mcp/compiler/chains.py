"""A chain behind one tool: `steps`, a short sequence of calls (Arazzo-shaped), later steps fed by earlier results.

Each step's parameters and request body are literals (checked against the operation's schemas) or
expressions over `$inputs` (the tool's arguments) and `$steps.<stepId>` (earlier results),
written as Arazzo runtime expressions and run as JMESPath (to_jmespath). Without declared
`inputs`, every `$inputs.x` that feeds an argument makes x a tool argument with that argument's
schema. Everything that can be checked without calling the API is checked here, once every step
is known: unknown step ids, forward references, expressions naming fields the response schemas
do not have, types that cannot fit what they feed (`_check`).

The state of one chain under compilation is a `_Chain`; one step's is a `_StepUnderWay`.
"""

from __future__ import annotations

import copy
import json
import re
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from openapi2mcp.compiler.arguments import check_value, is_sensitive, operation_args, request_body
from openapi2mcp.compiler.descriptions import default_risk, highest_risk, op_description, op_title
from openapi2mcp.compiler.model import Arg, Context, Operation
from openapi2mcp.compiler.operations import find_operation, unknown_operation
from openapi2mcp.compiler.projection import ProjectionError, parse, project_schema, root_references
from openapi2mcp.compiler.responses import (
    EMPTY_RESULT,
    OUTPUT_DEPTH_TOOL,
    accept_header,
    output_contract,
    output_kind,
    project,
    response_base,
    response_def_of,
    response_spec,
    success_statuses,
    wrap_output,
)
from openapi2mcp.compiler.schemas import flat_object_schema, limit_depth, schema_types
from openapi2mcp.compiler.toolspec import ToolDraft, overlay_tool_spec
from openapi2mcp.errors import InputError, Problem, did_you_mean
from openapi2mcp.manifest import BodySpec, Branch, OperationSpec, ParamSpec, Risk, Step, ToolSpec
from openapi2mcp.overlay import KeyPath, OverlayFile, StepDef, ToolDef, ToolOverlay

_EXPR_ROOTS = re.compile(r"\$(inputs|steps)\b")
_OTHER_RUNTIME = re.compile(
    r"\$(response|request|statusCode|url|method|outputs|components|workflows|sourceDescriptions)\b"
)
_SCALARS = {"string", "integer", "number", "boolean"}
_SIMPLE_INPUT = re.compile(r"^inputs\.([A-Za-z_][A-Za-z0-9_]*)$")


# ============================================================================ expressions


def is_expression(value: Any) -> bool:
    """A parameter value is an expression when it mentions $inputs or $steps."""
    return isinstance(value, str) and bool(_EXPR_ROOTS.search(value) or _OTHER_RUNTIME.search(value))


def to_jmespath(value: str) -> str:
    """`$steps.order.customerId` -> `steps.order.customerId`: `$` roots become plain fields.

    `$` inside JMESPath string literals ('...'), JSON literals (`...`) and quoted identifiers
    ("...") is left alone. Arazzo's other roots ($response, $statusCode, ...) are refused.
    """
    if "{$" in value:
        raise ValueError("embedded expressions like \"text {$inputs.x}\" are not supported; use "
                         "join('', ['text', $inputs.x]) instead")
    out: list[str] = []
    i, quote = 0, ""
    while i < len(value):
        ch = value[i]
        if quote:
            out.append(ch)
            if ch == "\\" and i + 1 < len(value):
                out.append(value[i + 1])
                i += 2
                continue
            if ch == quote:
                quote = ""
            i += 1
            continue
        if ch in "'`\"":
            quote = ch
            out.append(ch)
            i += 1
            continue
        if ch == "$":
            m = _EXPR_ROOTS.match(value, i)
            if m is None:
                other = _OTHER_RUNTIME.match(value, i)
                name = other.group(0) if other else value[i:i + 12]
                raise ValueError(f"{name} is not supported here: expressions read $inputs and $steps.<stepId>")
            out.append(m.group(1))
            i = m.end()
            continue
        out.append(ch)
        i += 1
    return "".join(out)


def _kind(types: set[str]) -> set[str]:
    return {"scalar" if t in _SCALARS else t for t in types if t != "null"}


class _Expr(NamedTuple):
    """An expression of a chain, checked once every step is known (against what it can see)."""

    expr: str  # JMESPath
    what: str  # for messages: "step 'customer' parameter 'customerId'"
    where: KeyPath
    step: int  # the index of the step it belongs to (len(steps) for `outputs`): it sees the steps before
    target: dict[str, Any] | None  # the schema its value must fit (None: anything)


# ============================================================================ the state of one chain


@dataclass
class _StepUnderWay:
    """One step while it compiles: its definition, its operation, its place, the operation's arguments."""

    sdef: StepDef
    op: Operation
    index: int
    where: KeyPath
    args: list[Arg]

    @property
    def label(self) -> str:
        return f"step {self.sdef.step_id!r}"


@dataclass
class _DoneStep:
    """A compiled step, as later expressions see it."""

    sdef: StepDef
    op: Operation
    output: dict[str, Any]  # what `$steps.<id>` holds, for type checks


@dataclass
class _Chain:
    """What compiling one chain collects: the tool's arguments, the expressions to check, the problems."""

    ctx: Context
    doc: OverlayFile
    problems: list[Problem] = field(default_factory=list)
    declared: dict[str, Any] | None = None  # the overlay's `inputs`; None: derived from the `$inputs.x` used
    derived: dict[str, dict[str, Any]] = field(default_factory=dict)
    derived_required: set[str] = field(default_factory=set)
    feeds: dict[str, list[Arg]] = field(default_factory=dict)  # input name -> the step arguments it feeds
    exprs: list[_Expr] = field(default_factory=list)
    done: list[_DoneStep] = field(default_factory=list)

    def input_schema(self) -> dict[str, Any]:
        if self.declared is not None:
            return self.declared
        return flat_object_schema(self.derived, [n for n in self.derived if n in self.derived_required], {})

    def tool_args(self, input_schema: dict[str, Any]) -> list[Arg]:
        """The tool's arguments (its inputs) as Args, sensitive by the rule every argument follows
        (arguments.is_sensitive: schema hints, names) or because a sensitive step argument reads them."""
        required = set(input_schema.get("required") or [])
        out = []
        for name, schema in (input_schema.get("properties") or {}).items():
            schema = schema if isinstance(schema, dict) else {}
            fed = any(a.sensitive for a in self.feeds.get(name, []))
            out.append(Arg(name=name, wire=name, location="input", schema=schema, required=name in required,
                           sensitive=fed or is_sensitive(name, schema)))
        return out


# ============================================================================ the tool


def chain_tool(ctx: Context, tdef: ToolDef, overlay: ToolOverlay, doc: OverlayFile, at: KeyPath) -> ToolSpec:
    """An overlay tool with `steps`."""
    assert tdef.steps is not None
    chain = _Chain(ctx, doc)
    ids = [s.step_id for s in tdef.steps]
    for i, sid in enumerate(ids):
        if sid in ids[:i]:
            chain.problems.append(doc.problem((*at, "steps", i, "stepId"), f"step id {sid!r} is used twice"))
    chain.declared = _declared_inputs(tdef, chain, at)
    steps: list[Step] = []
    for i, sdef in enumerate(tdef.steps):
        where = (*at, "steps", i)
        op = find_operation(ctx, sdef.operation_id)
        if op is None:
            chain.problems.append(unknown_operation(ctx, sdef.operation_id, doc, (*where, "operationId")).problems[0])
            continue
        before = len(chain.problems)
        step = _step(chain, _StepUnderWay(sdef, op, i, where, operation_args(ctx, op)))
        if len(chain.problems) == before:
            steps.append(step)
            chain.done.append(_DoneStep(sdef, op, _step_value_schema(ctx, op)))
    if chain.problems:
        raise InputError(chain.problems)

    input_schema = chain.input_schema()
    output_expr, output_at = _outputs_expression(tdef, doc, at)
    # check every expression against the context it will see: inputs and the steps before it
    for check in chain.exprs:
        _check(chain, check, input_schema)
    if output_expr is not None:
        _check(chain, _Expr(output_expr, "`outputs`", output_at, len(chain.done), None), input_schema)
    if chain.problems:
        raise InputError(chain.problems)

    response = response_spec(response_def_of(overlay, tdef.response))
    raw: dict[str, Any] | None
    if output_expr is not None:
        raw = project(output_expr, _context_schema(chain.done, len(chain.done), input_schema), "`outputs`", doc,
                      output_at, context=True)
    else:
        last = chain.done[-1]
        if last.sdef.when:
            raise InputError(doc.problem(
                (*at, "outputs"), "the last step is conditional (`when`): say what the tool returns with `outputs`"))
        raw = last.output if output_kind(ctx, last.op) != "other" else None
    if response.select and raw is not None:
        raw = project(response.select, raw, "`select`", doc, (*at, "response", "select"))
    output_schema, wrap = wrap_output(limit_depth(raw, OUTPUT_DEPTH_TOOL + 1)) if raw else (None, None)
    methods = [c.op.method for c in chain.done]
    risk: Risk = tdef.risk or highest_risk([default_risk(m) for m in methods])
    flow = " -> ".join(f"{c.sdef.step_id} ({c.op.id})" for c in chain.done)
    description = (tdef.description or op_description(chain.done[0].op, limit=None)).rstrip()
    description += f"\nRuns {len(chain.done)} calls: {flow}; if one fails, the error's `step` names it."
    draft = ToolDraft(
        name=tdef.name,
        title=op_title(chain.done[0].op),
        description=description,
        input_schema=input_schema,
        output_schema=output_contract(ctx, output_schema, response),
        calls=[(m, risk) for m in methods],
        branches=[Branch(key="default", steps=steps, output=output_expr, risk=risk,
                         side_effects=list(tdef.side_effects))],
        response=response.model_copy(update={"wrap": wrap}),
        risk=risk,
        args=chain.tool_args(input_schema),
    )
    return overlay_tool_spec(draft, tdef, {}, doc, at)


def _declared_inputs(tdef: ToolDef, chain: _Chain, at: KeyPath) -> dict[str, Any] | None:
    """The overlay's `inputs`, checked: a closed object schema of valid argument names."""
    if tdef.inputs is None:
        return None
    doc, problems = chain.doc, chain.problems
    schema = copy.deepcopy(tdef.inputs)
    where = (*at, "inputs")
    if schema.get("type", "object") != "object" or not isinstance(schema.get("properties", {}), dict):
        problems.append(doc.problem(where, "`inputs` must be a JSON Schema of `type: object` with `properties`"))
        return None
    import jsonschema

    try:
        jsonschema.Draft202012Validator.check_schema(schema)
    except jsonschema.SchemaError as e:
        problems.append(doc.problem(where, f"`inputs` is not a valid JSON Schema: {e.message}"))
        return None
    for name in schema.get("properties", {}):
        if not re.fullmatch(r"[A-Za-z0-9_.-]{1,64}", name):
            problems.append(doc.problem((*where, "properties", name), f"input name {name!r} is invalid: use 1-64 "
                                        "of A-Za-z0-9_.- (and letters/digits/_ to use it as $inputs.<name>)"))
    schema["type"] = "object"
    schema.setdefault("properties", {})
    schema.setdefault("additionalProperties", False)
    return dict(schema)


# ============================================================================ one step


def _step(chain: _Chain, step: _StepUnderWay) -> Step:
    """The step's call plan; its problems go to `chain.problems` (the Step is unusable when there are any)."""
    params = _parameters(chain, step)
    body = _body(chain, step)
    when = None
    if step.sdef.when is not None:
        try:
            when = to_jmespath(step.sdef.when)
        except ValueError as e:
            chain.problems.append(chain.doc.problem((*step.where, "when"), str(e)))
        else:
            chain.exprs.append(_Expr(when, f"{step.label} `when`", (*step.where, "when"), step.index, None))
    op = step.op
    operation = OperationSpec(id=op.id, method=op.method, path=op.path, params=params, body=body,
                              success=success_statuses(op), accept=accept_header(op))
    return Step(id=step.sdef.step_id, operation=operation, when=when)


def _parameters(chain: _Chain, step: _StepUnderWay) -> list[ParamSpec]:
    """The step's `parameters`: each names one parameter of the operation; every required one is given."""
    doc, op, problems = chain.doc, step.op, chain.problems
    by_wire = {(a.location, a.wire): a for a in step.args if a.location not in ("body", "body*")}
    given: dict[str, Any] = {}
    params: list[ParamSpec] = []
    for j, pdef in enumerate(step.sdef.parameters):
        pwhere = (*step.where, "parameters", j)
        matches = [a for (loc, wire), a in by_wire.items()
                   if wire == pdef.name and (pdef.in_ is None or loc == pdef.in_)]
        if not matches:
            names = sorted({w for _, w in by_wire})
            hint = did_you_mean(pdef.name, names)
            body_hint = " (body properties go into requestBody.payload)" if any(
                a.wire == pdef.name for a in step.args if a.location in ("body", "body*")) else ""
            problems.append(doc.problem(
                (*pwhere, "name"),
                f"operation {op.id!r} has no parameter {pdef.name!r}{body_hint}" + (f"; {hint}" if hint else ""),
                hint=f"its parameters: {', '.join(names)}" if names else "it takes no parameters",
            ))
            continue
        if len(matches) > 1:
            problems.append(doc.problem(pwhere, f"{pdef.name!r} is a parameter in several places; say which with `in`"))
            continue
        arg = matches[0]
        assert arg.param is not None
        given[arg.wire] = pdef.value
        try:
            expr = _feed(chain, step, arg, pdef.value, f"{step.label} parameter {pdef.name!r}", (*pwhere, "value"))
        except InputError as e:
            problems.extend(e.problems)
            continue
        fed = {"fixed": True, "value": pdef.value} if expr is None else {"expr": expr}
        params.append(arg.param.model_copy(update={**fed, "required": arg.required}))
    for a in step.args:
        if a.location not in ("body", "body*") and a.required and a.wire not in given:
            problems.append(doc.problem(
                (*step.where, "parameters"),
                f"{step.label}: {op.id!r} needs parameter {a.wire!r} ({a.location})",
                hint=f"add {{name: {a.wire}, value: $inputs.{a.name}}} or a value from an earlier step",
            ))
    return params


def _body(chain: _Chain, step: _StepUnderWay) -> BodySpec | None:
    """The step's `requestBody`: a payload object fed property by property, one expression, or a literal."""
    doc, op, problems = chain.doc, step.op, chain.problems
    request = request_body(chain.ctx, op)
    rdef = step.sdef.request_body
    if rdef is None:
        if request is not None and request.required:
            problems.append(doc.problem(step.where, f"{step.label}: {op.id!r} needs a request body; add "
                                        "requestBody: {payload: ...}"))
        return None
    bwhere = (*step.where, "requestBody")
    if request is None:
        problems.append(doc.problem(bwhere, f"operation {op.id!r} takes no request body"))
        return None
    media = rdef.content_type or request.media
    payload = rdef.payload
    if isinstance(payload, dict) and not is_expression(payload):
        props = {a.wire: a for a in step.args if a.location == "body"}
        if not props:
            problems.append(doc.problem((*bwhere, "payload"), f"{op.id!r} takes its body whole: give one "
                                        "expression or literal as payload"))
            return None
        fixed: dict[str, Any] = {}
        computed: dict[str, str] = {}
        for key, value in payload.items():
            pwhere = (*bwhere, "payload", key)
            arg = props.get(key)
            if arg is None:
                hint = did_you_mean(key, props)
                problems.append(doc.problem(pwhere, f"{op.id!r}'s request body has no property {key!r}"
                                            + (f"; {hint}" if hint else "")))
                continue
            try:
                expr = _feed(chain, step, arg, value, f"{step.label} body property {key!r}", pwhere)
            except InputError as e:
                problems.extend(e.problems)
                continue
            if expr is None:
                fixed[key] = value
            else:
                computed[key] = expr
        missing = [a.wire for a in props.values() if a.required and a.wire not in payload]
        if missing:
            problems.append(doc.problem((*bwhere, "payload"), f"{step.label}: the body needs {', '.join(missing)}"))
        return BodySpec(media_type=media, required=request.required, fixed=fixed, exprs=computed)
    if is_expression(payload):
        try:
            expr = to_jmespath(payload)
        except ValueError as e:
            problems.append(doc.problem((*bwhere, "payload"), str(e)))
            return None
        chain.exprs.append(_Expr(expr, f"{step.label} requestBody", (*bwhere, "payload"), step.index, None))
        return BodySpec(media_type=media, required=request.required, expr=expr)
    return BodySpec(media_type=media, required=True, value=payload)


def _feed(chain: _Chain, step: _StepUnderWay, arg: Arg, value: Any, what: str, where: KeyPath) -> str | None:
    """A step parameter or body property given `value`: the JMESPath of an expression, None for a literal.

    A literal must fit the argument's schema; an expression is kept for checking against the
    steps before it, and `$inputs.x` feeding it makes x a tool argument (without `inputs`).
    """
    if not is_expression(value):
        try:
            check_value(arg.schema, value, "value")
        except ValueError as e:
            raise InputError(chain.doc.problem(where, str(e))) from None
        return None
    try:
        expr = to_jmespath(value)
        parse(expr)
    except ValueError as e:
        raise InputError(chain.doc.problem(where, str(e))) from None
    except ProjectionError as e:
        raise InputError(chain.doc.problem(where, f"{what}: {e}", hint=e.hint)) from None
    for path in root_references(expr):
        if len(path) >= 2 and path[0] == "inputs":
            chain.feeds.setdefault(path[1], []).append(arg)
    _derive_input(chain, step, expr, arg)
    chain.exprs.append(_Expr(expr, what, where, step.index, arg.schema))
    return expr


def _derive_input(chain: _Chain, step: _StepUnderWay, expr: str, arg: Arg) -> None:
    """Without declared `inputs`, `$inputs.x` feeding an argument makes x a tool argument of its schema."""
    if chain.declared is not None:
        return
    m = _SIMPLE_INPUT.match(expr.strip())
    if m is None:
        for path in root_references(expr):
            if len(path) >= 2 and path[0] == "inputs":
                chain.derived.setdefault(path[1], {})
        return
    name = m.group(1)
    if not chain.derived.get(name):
        chain.derived[name] = copy.deepcopy(arg.schema)
    if arg.required and step.sdef.when is None:
        chain.derived_required.add(name)


# ============================================================================ checking expressions


def _step_value_schema(ctx: Context, op: Operation) -> dict[str, Any]:
    """What `$steps.<id>` holds: the response body (its schema), or {status} when there is none."""
    kind = output_kind(ctx, op)
    if kind == "empty":
        return EMPTY_RESULT
    if kind == "json":
        return response_base(ctx, op) or {}
    return {}


def _context_schema(done: list[_DoneStep], upto: int, inputs: dict[str, Any]) -> dict[str, Any]:
    """The schema of what an expression of step `upto` reads: {inputs, steps: {<id>: result}} of the steps before."""
    defs: dict[str, Any] = dict(inputs.get("$defs", {}))
    steps: dict[str, Any] = {}
    required: list[str] = []
    for c in done[:upto]:
        schema = c.output
        if "$defs" in schema:
            defs.update(schema["$defs"])
            schema = {k: v for k, v in schema.items() if k != "$defs"}
        steps[c.sdef.step_id] = schema
        if c.sdef.when is None:
            required.append(c.sdef.step_id)
    ins = {k: v for k, v in inputs.items() if k != "$defs"}
    out: dict[str, Any] = {
        "type": "object",
        "properties": {
            "inputs": ins,
            "steps": {"type": "object", "properties": steps, "required": required, "additionalProperties": False},
        },
        "required": ["inputs", "steps"],
        "additionalProperties": False,
    }
    if defs:
        out["$defs"] = defs
    return out


def _check(chain: _Chain, check: _Expr, inputs: dict[str, Any]) -> None:
    """Step references must exist and come earlier; fields must exist; types must fit the target."""
    expr, what, where, index, target = check
    doc, problems = chain.doc, chain.problems
    ids = [c.sdef.step_id for c in chain.done]
    try:
        refs = root_references(expr)
    except ProjectionError as e:
        problems.append(doc.problem(where, str(e), hint=e.hint))
        return
    for path in refs:
        if path[0] not in ("inputs", "steps"):
            problems.append(doc.problem(
                where, f"{what} reads {path[0]!r}; expressions start with $inputs or $steps.<stepId>",
                hint=f"did you mean $steps.{'.'.join(path)} or $inputs.{path[0]}?",
            ))
            return
        if path[0] == "steps" and len(path) >= 2:
            sid = path[1]
            if sid not in ids:
                hint = did_you_mean(sid, ids)
                problems.append(doc.problem(where, f"{what} refers to step {sid!r}, which does not exist"
                                            + (f"; {hint}" if hint else ""), hint=f"steps: {', '.join(ids)}"))
                return
            position = ids.index(sid)
            if position == index:
                problems.append(doc.problem(where, f"{what} refers to its own step {sid!r}"))
                return
            if position > index:
                problems.append(doc.problem(
                    where, f"{what} refers to step {sid!r}, which runs later (forward reference)",
                    hint="a step can use the inputs and the results of the steps before it; reorder the steps",
                ))
                return
    context = _context_schema(chain.done, index, inputs)
    try:
        result = project_schema(expr, context, what=what, context=True) or {}
    except ProjectionError as e:
        problems.append(doc.problem(where, str(e), hint=e.hint))
        return
    if target is not None:
        got, want = _kind(schema_types(result)), _kind(schema_types(target))
        if got and want and not got & want:
            problems.append(doc.problem(
                where, f"{what} takes {'/'.join(sorted(want))} values, but {expr!r} gives {'/'.join(sorted(got))}"))


# ============================================================================ outputs


def _outputs_expression(tdef: ToolDef, doc: OverlayFile, at: KeyPath) -> tuple[str | None, KeyPath]:
    """`outputs` as one JMESPath expression (an object of expressions and literals, or one expression)."""
    outputs = tdef.outputs
    where = (*at, "outputs")
    if outputs is None:
        return None, where
    try:
        if isinstance(outputs, str):
            return to_jmespath(outputs), where
        if not outputs:
            raise InputError(doc.problem(where, "`outputs` is empty"))
        parts = []
        for key, value in outputs.items():
            parts.append(f"{json.dumps(key)}: {to_jmespath(value) if is_expression(value) else _literal(value)}")
    except ValueError as e:
        raise InputError(doc.problem(where, str(e))) from None
    return "{" + ", ".join(parts) + "}", where


def _literal(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False).replace("`", "\\`")
    return f"`{text}`"
