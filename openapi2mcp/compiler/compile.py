"""The compile stage: a loaded spec plus overlays -> a frozen, hashed Manifest.

    compile_manifest(spec, overlays, all_operations=False) -> Compiled(manifest, warnings)

What happens, in order:
1. OAI Overlay documents patch the spec (overlay.apply_oai_overlays).
2. Every operation is indexed by operationId and by "METHOD /path".
3. Each overlay tool is compiled against its operation: the arguments the model sees (path,
   query, header and cookie parameters plus the request body's top-level properties, renamed,
   narrowed, fixed or hidden as the overlay says), the output schema of the success response,
   annotations from risk and method, and the call plan the runtime follows.
4. With `passthrough: true` (or `--all-operations` without an overlay) every other operation
   becomes a tool of its own, 1:1.

Anything the overlay names that does not exist is an error with file, line and a suggestion; a
problem in the spec that can be worked around is a warning with its JSON pointer.

The stage has three more parts, each importing this module's building blocks: tasks.py (actions,
variants, chains, paging), contract.py (seed 002's confirmation, dry run, idempotency) and
catalog.py (resources, prompts, result links). The names here without an underscore (Context,
Operation, Arg, Use, operation_args, operation_spec, ...) are that shared surface; outside the
stage only compile_manifest and Compiled are used.
"""

from __future__ import annotations

import copy
import hashlib
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import jsonschema

from openapi2mcp import __version__
from openapi2mcp.compiler import bodypath
from openapi2mcp.compiler.bodypath import PathError
from openapi2mcp.compiler.pin import pin_warning
from openapi2mcp.compiler.schemas import (
    SchemaConverter,
    SchemaError,
    flat_object_schema,
    has_ref,
    limit_depth,
    limit_size,
    schema_types,
    trim,
    walk_properties,
)
from openapi2mcp.errors import InputError, Problem, SpecWarning, did_you_mean
from openapi2mcp.manifest import (
    BASE_URL_VAR,
    IDEMPOTENT_METHODS,
    RISK_ORDER,
    SAFE_METHODS,
    AuthSpec,
    BodyField,
    BodySpec,
    Branch,
    FailureMode,
    Manifest,
    OperationSpec,
    PaginationSpec,
    ParamSpec,
    RateLimitSpec,
    ResponseSpec,
    RetrySpec,
    Risk,
    ServerSpec,
    SourceSpec,
    Step,
    TimeoutSpec,
    ToolSpec,
    UpstreamSpec,
)
from openapi2mcp.overlay import (
    KeyPath,
    OverlayFile,
    PaginationDef,
    ParamDef,
    RateLimitDef,
    ResponseDef,
    RetriesDef,
    ToolDef,
    ToolOverlay,
    apply_oai_overlays,
)

if TYPE_CHECKING:
    from openapi2mcp.loader import LoadedSpec

HTTP_METHODS = ("get", "put", "post", "delete", "options", "head", "patch", "trace")
DEFAULT_RISK: dict[str, Risk] = {
    "GET": "low", "HEAD": "low", "OPTIONS": "low", "TRACE": "low",
    "POST": "medium", "PUT": "medium", "PATCH": "medium", "DELETE": "high",
}
# Header parameters OpenAPI says to ignore: the HTTP layer sets them.
_IGNORED_HEADERS = frozenset({"accept", "content-type", "authorization"})
_ARG_NAME = re.compile(r"[^A-Za-z0-9_.-]+")
# Argument names that hold secrets: their values are redacted in logs and audit lines.
SENSITIVE_NAME = re.compile(r"pass(word)?|secret|token|api[-_]?key|credential", re.I)
RAW_DESCRIPTION_LIMIT = 1024
# Output schemas describe the shape of results to the model and let clients validate them.
# Deeper than this they say "an object" / "an array" without the contents: real response schemas
# are DAGs whose full expansion explodes (Stripe: 180 MB for 417 tools inlined) while the model
# needs the first levels. Overlay tools project their responses, so they get more room.
OUTPUT_DEPTH_RAW = 3
OUTPUT_DEPTH_TOOL = 3
PROJECTION_BASE_DEPTH = 12
# Raw (1:1) tools also get a size budget per schema (about bytes, see schemas.limit_size): a
# Kubernetes create call's body alone is ~200 KB inlined. Overlay tools are curated: no budget.
RAW_INPUT_BUDGET = 16_000
RAW_OUTPUT_BUDGET = 8_000


@dataclass
class Compiled:
    manifest: Manifest
    warnings: list[SpecWarning]


@dataclass
class Operation:
    """One operation of the spec, with its path-level parameters merged in."""

    id: str
    method: str  # upper case
    path: str
    pointer: str  # JSON pointer of the operation object
    node: dict[str, Any]
    params: list[tuple[dict[str, Any], str]]  # (resolved parameter object, its pointer)

    @property
    def key(self) -> str:
        return f"{self.method} {self.path}"


@dataclass
class Arg:
    """A model-visible argument under construction."""

    name: str
    wire: str
    location: str  # path | query | header | cookie | body | body* (whole body)
    schema: dict[str, Any]
    required: bool
    param: ParamSpec | None = None  # for non-body arguments
    fixed: bool = False
    value: Any = None
    hidden: bool = False
    binary: bool = False
    sensitive: bool = False
    unit: str | None = None
    path: list[str] | None = None  # a nested field of the JSON body (bodypath.py); location "body"
    container: bool = False  # hidden because nested fields of it are arguments (or paging fields)
    send_null: bool = False  # null_means: clear (the model's null is sent as JSON null)


@dataclass
class Context:
    """What compiling one spec shares: the document, its converter and operations, the warnings."""

    spec: LoadedSpec
    document: dict[str, Any]
    converter: SchemaConverter
    ops: dict[str, Operation]
    warnings: list[SpecWarning] = field(default_factory=list)
    auth_params: set[tuple[str, str]] = field(default_factory=set)  # (location, lower-case name)
    bodies: dict[str, RequestBody | None] = field(default_factory=dict)  # request_body() per operation pointer

    def warn(self, message: str, pointer: str, hint: str | None = None) -> None:
        self.warnings.append(SpecWarning(message=message, location={"pointer": pointer}, hint=hint))


# ============================================================================ entry point


def compile_manifest(
    spec: LoadedSpec,
    overlays: Sequence[OverlayFile] = (),
    *,
    all_operations: bool = False,
) -> Compiled:
    """Compile a spec and overlays into a sealed Manifest (raises InputError on bad input)."""
    tool_overlays = [o for o in overlays if o.tools is not None]
    if len(tool_overlays) > 1:
        raise InputError.at(
            f"more than one tool overlay given ({', '.join(o.path for o in tool_overlays)})",
            hint="merge them into one `openapi2mcp: 1` file; OAI Overlays (overlay: 1.x) may repeat",
        )
    doc_overlay = tool_overlays[0] if tool_overlays else None
    if doc_overlay is None and not all_operations:
        raise InputError.at(
            "no tool overlay given: nothing to expose",
            hint="pass --overlay FILE (an `openapi2mcp: 1` file), or --all-operations for every operation 1:1",
        )
    # OAI Overlays patch the document as written; cli.py applies them while loading (before a
    # Swagger 2.0 conversion), else they apply here, to the 3.x document
    document = spec.document if spec.patched else apply_oai_overlays(spec.document, [o for o in overlays if o.oai])
    converter = SchemaConverter(document, openapi31=spec.openapi_version.startswith("3.1"))
    ctx = Context(spec=spec, document=document, converter=converter, ops={})
    ctx.warnings.extend(w for w in [pin_warning(spec, doc_overlay)] if w)  # the overlay's `spec` pin (pin.py)
    ctx.ops = index_operations(document, ctx)
    if not ctx.ops:
        raise InputError.at("the spec has no operations under `paths`", file=spec.source, pointer="/paths")
    tool_overlay = doc_overlay.tools if doc_overlay else None
    renames: dict[str, str] = {}  # written tool name -> served name (names.py)
    if doc_overlay and tool_overlay:
        from openapi2mcp.compiler.names import served_names, with_served_mentions

        renames = served_names(tool_overlay, doc_overlay)
        tool_overlay = with_served_mentions(tool_overlay, renames)
    upstream = _upstream(ctx, tool_overlay)

    tools: list[ToolSpec] = []
    used: set[str] = set()
    if doc_overlay and tool_overlay:
        problems: list[Problem] = []
        for i, tdef in enumerate(tool_overlay.tools):
            try:
                tool = _with_access(_overlay_tool(ctx, tdef, tool_overlay, doc_overlay, ("tools", i)), tdef)
            except InputError as e:
                problems.extend(e.problems)
                continue
            tools.append(tool)
            used.update(s.operation.id for b in tool.branches for s in b.steps)
        if problems:
            raise InputError(problems, title=f"{doc_overlay.path}: the overlay does not fit the spec")
        _check_unique(tools, doc_overlay)
    if all_operations or (tool_overlay is not None and tool_overlay.passthrough):
        taken = {renames.get(t.name, t.name) for t in tools}
        ops = [op for op in _unique_ops(ctx.ops) if op.id not in used]
        raw = response_spec(response_def_of(tool_overlay)) if tool_overlay else ResponseSpec()
        raw = raw.model_copy(update={"select": None})  # a default `select` fits no 1:1 tool
        tools.extend(_raw_tool(ctx, op, name, raw) for op, name in zip(ops, _raw_names(ops, taken), strict=True))

    from openapi2mcp.compiler.catalog import (
        compile_catalog,  # resources, prompts, result links (it imports this module)
    )

    tools, resources, prompts = compile_catalog(ctx, tool_overlay, doc_overlay, tools)
    tools = [_served(t, renames) for t in tools]  # after the catalog: it finds tools by their written names
    manifest = Manifest(
        generator=f"openapi2mcp {__version__}",
        server=_server(spec, document, tool_overlay),
        upstream=upstream,
        tools=tools,
        resources=resources,
        prompts=prompts,
        sources=_sources(spec, overlays),
    ).sealed()
    return Compiled(manifest=manifest, warnings=[*spec.warnings, *ctx.warnings])


# ============================================================================ the operation index


def index_operations(document: dict[str, Any], ctx: Context) -> dict[str, Operation]:
    """operationId -> Operation and "METHOD /path" -> Operation, in spec order."""
    out: dict[str, Operation] = {}
    paths = document.get("paths") or {}
    if not isinstance(paths, dict):
        raise InputError.at("`paths` is not a mapping", pointer="/paths")
    for path, item in paths.items():
        item_ptr = "/paths/" + _escape(path)
        try:
            item = ctx.converter.resolve(item, item_ptr)
        except SchemaError as e:
            ctx.warn(f"path item skipped: {e}", item_ptr)
            continue
        if not isinstance(item, dict):
            continue
        shared = _params(ctx, item.get("parameters"), item_ptr + "/parameters")
        for method in HTTP_METHODS:
            node = item.get(method)
            if not isinstance(node, dict):
                continue
            ptr = f"{item_ptr}/{method}"
            own = _params(ctx, node.get("parameters"), ptr + "/parameters")
            merged = {(p.get("in"), p.get("name")): (p, at) for p, at in shared}
            merged.update({(p.get("in"), p.get("name")): (p, at) for p, at in own})
            op_id = node.get("operationId")
            key = f"{method.upper()} {path}"
            op = Operation(
                id=op_id if isinstance(op_id, str) and op_id.strip() else key,
                method=method.upper(), path=path, pointer=ptr, node=node, params=list(merged.values()),
            )
            if op.id in out and op.id != key:  # a duplicate operationId (the loader warns): by "METHOD /path"
                op.id = key

            out.setdefault(op.id, op)
            out.setdefault(key, op)
    return out


def _params(ctx: Context, raw: Any, pointer: str) -> list[tuple[dict[str, Any], str]]:
    out = []
    for i, p in enumerate(raw or [] if isinstance(raw, list) else []):
        at = f"{pointer}/{i}"
        try:
            p = ctx.converter.resolve(p, at)
        except SchemaError as e:
            ctx.warn(f"parameter skipped: {e}", at)
            continue
        if not isinstance(p, dict) or not isinstance(p.get("name"), str) or p.get("in") not in (
            "path", "query", "header", "cookie"
        ):
            ctx.warn("parameter skipped: it needs a string `name` and `in` of path/query/header/cookie", at)
            continue
        out.append((p, at))
    return out


def _unique_ops(ops: dict[str, Operation]) -> list[Operation]:
    seen: set[str] = set()
    out = []
    for op in ops.values():
        if op.key not in seen:
            seen.add(op.key)
            out.append(op)
    return out


def find_operation(ctx: Context, ref: str) -> Operation | None:
    op = ctx.ops.get(ref)
    if op is None:
        method, _, path = ref.strip().partition(" ")
        op = ctx.ops.get(f"{method.upper()} {path.strip()}")
    return op


# ============================================================================ tools from the overlay


@dataclass
class Use:
    """One operation as a tool, or as one branch of a tool, uses it: compiled."""

    op: Operation
    args: list[Arg]  # every argument, fixed and hidden ones included
    operation: OperationSpec
    output_schema: dict[str, Any] | None  # the result's schema (projected, wrapped)
    output_kind: str  # "json" (a schema), "empty" (no body documented) or "other"
    response: ResponseSpec
    risk: Risk
    pagination: PaginationSpec | None = None
    extra_inputs: dict[str, dict[str, Any]] = field(default_factory=dict)  # limit / cursor

    @property
    def visible(self) -> list[Arg]:
        return [a for a in self.args if not a.fixed and not a.hidden]

    def input_schema(self) -> dict[str, Any]:
        return _input_schema(self.args, self.extra_inputs)


def unknown_operation(ctx: Context, ref: str, doc: OverlayFile, where: KeyPath) -> InputError:
    ids = [k for k in ctx.ops if " " not in k] or list(ctx.ops)
    hint = did_you_mean(ref, ids)
    return InputError(doc.problem(
        where,
        f"unknown operation {ref!r}" + (f"; {hint}" if hint else ""),
        hint='use an operationId from the spec, or "METHOD /path"; `openapi2mcp inspect SPEC '
        "--all-operations` lists them",
    ))


def response_def_of(overlay: ToolOverlay, *own: ResponseDef | None) -> ResponseDef | None:
    """The `response` a tool (or branch) runs with: `own` (most specific first: a branch's, then its
    tool's) over the overlay's `defaults.response`, merged key by key, so a tool with its own
    `select` keeps the default `max_bytes`."""
    layers = [*own, overlay.defaults.response if overlay.defaults else None]
    merged: dict[str, Any] = {}
    for layer in reversed(layers):
        if layer is not None:
            merged.update(layer.model_dump(by_alias=True, exclude_unset=True))
    return ResponseDef.model_validate(merged) if any(layer is not None for layer in layers) else None


def response_spec(rdef: ResponseDef | None) -> ResponseSpec:
    """The result plan an overlay `response` asks for (the wrap key comes from the result's schema)."""
    if rdef is None:
        return ResponseSpec()
    return ResponseSpec(select=rdef.select, max_items=rdef.max_items, max_bytes=rdef.max_bytes or 64_000,
                        validate_=rdef.validate_ or "tolerant")


def output_contract(ctx: Context, schema: dict[str, Any] | None, response: ResponseSpec) -> dict[str, Any] | None:
    """The outputSchema a tool advertises for a (strict, wrapped) result schema under `response.validate`:
    tolerant (default) derives what real data keeps (schemas.tolerant), strict is the spec's own, off none."""
    if schema is None or response.validate_ == "off":
        return None
    return ctx.converter.tolerant(schema) if response.validate_ == "tolerant" else schema


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
    op = find_operation(ctx, ref)
    if op is None:
        raise unknown_operation(ctx, ref, doc, (*at, "operation"))
    args = operation_args(ctx, op)
    args = _apply_param_defs(ctx, op, args, params, doc, at)
    chosen: Risk = risk or DEFAULT_RISK.get(op.method, "medium")
    response = response_spec(response_def)
    use = Use(op=op, args=args, operation=operation_spec(ctx, op, args), output_schema=None,
              output_kind=output_kind(ctx, op), response=response, risk=chosen)
    # the output schema is the response's, projected by `select` or remade by paging: converted once
    if pagination_def is not None:
        from openapi2mcp.compiler.tasks import paginate

        return paginate(ctx, use, pagination_def, doc, (*at, "pagination"), at)
    if response.select:
        use.output_schema, use.response = _projected_output(ctx, op, response, doc, (*at, "response", "select"))
    else:
        use.output_schema, wrap = _output_schema(ctx, op, OUTPUT_DEPTH_TOOL)
        use.response = response.model_copy(update={"wrap": wrap})
    use.output_schema = output_contract(ctx, use.output_schema, response)
    return use


def _overlay_tool(
    ctx: Context, tdef: ToolDef, overlay: ToolOverlay, doc: OverlayFile, at: KeyPath
) -> ToolSpec:
    if tdef.operation is None:
        from openapi2mcp.compiler.tasks import task_tool

        return task_tool(ctx, tdef, overlay, doc, at)
    from openapi2mcp.compiler.contract import adjust_use, finish_tool  # confirmation, dry run, idempotency (seed 002)

    use = compile_use(ctx, tdef.operation, tdef.params, tdef.risk, response_def_of(overlay, tdef.response),
                      tdef.pagination, doc, at)
    use, extra = adjust_use(ctx, use, tdef, None, doc, at)
    op, risk = use.op, use.risk
    input_schema = use.input_schema()
    units = dict(tdef.units)
    output_schema = apply_units(input_schema, use.output_schema, units, doc, (*at, "units"))
    description = tdef.description or op_description(op, limit=None)
    description += units_line(units, use.args)
    if use.pagination is not None:
        from openapi2mcp.compiler.tasks import paging_sentence

        description += "\n" + paging_sentence(use.pagination)
    annotations = tool_annotations([(op.method, risk)], tdef.title, annotation_overrides(tdef))
    return finish_tool(ToolSpec(
        name=tdef.name,
        title=tdef.title or op_title(op),
        description=description.strip(),
        input_schema=input_schema,
        output_schema=output_schema,
        annotations=annotations,
        dispatch="single",
        branches=[Branch(key="default", steps=[Step(id="call", operation=use.operation)],
                         risk=risk, side_effects=list(tdef.side_effects), pagination=use.pagination)],
        response=use.response.model_copy(update={"units": units}),
        failure_modes=failure_modes(tdef),
        risk=risk,
        category=tdef.category,
        permissions=list(tdef.permissions),
        side_effects=list(tdef.side_effects),
        audit_event=tdef.audit_event,
        sensitive=sorted(a.name for a in use.args if a.sensitive and not a.fixed and not a.hidden),
    ), tdef, {"default": extra}, doc, at)


def annotation_overrides(tdef: ToolDef) -> dict[str, Any]:
    """The hints the overlay sets itself; they win over the derived ones."""
    return tdef.annotations.model_dump(by_alias=True, exclude_none=True) if tdef.annotations else {}


def failure_modes(tdef: ToolDef) -> dict[str, FailureMode]:
    return {k: FailureMode(code=v.code, message=v.message, retryable=v.retryable)
            for k, v in tdef.failure_modes.items()}


def units_line(units: dict[str, str], args: Iterable[Arg]) -> str:
    """The tool description's unit summary: `units` plus the `unit` of each argument, once each."""
    merged = dict(units)
    for a in args:
        if a.unit and not a.fixed and not a.hidden:
            merged.setdefault(a.name, a.unit)
    if not merged:
        return ""
    return "\nUnits: " + "; ".join(f"{k} = {v}" for k, v in merged.items()) + "."


def _apply_param_defs(
    ctx: Context, op: Operation, args: list[Arg], params: dict[str, ParamDef], doc: OverlayFile, at: KeyPath
) -> list[Arg]:
    """Rename, narrow, fix or hide arguments as the overlay's `params` say."""
    by_wire = {a.wire: a for a in args}
    by_name = {a.name: a for a in args}
    problems: list[Problem] = []
    named: list[Arg] = []  # the arguments `params` names (a container named here stays an argument)
    for key, pdef in params.items():
        where = (*at, "params", key)
        try:
            if any(bodypath.is_body_path(t) and t not in by_wire and t not in by_name for t in (key, pdef.rename)):
                arg, model_name = _match_body_field(ctx, op, args, key, pdef)  # an exact parameter name wins
            else:
                arg, model_name = _match_param(key, pdef, by_wire, by_name)
        except PathError as e:
            problems.append(doc.problem(where, f"operation {op.id!r}: {e}", hint=e.hint))
            continue
        except ValueError as e:
            problems.append(doc.problem(where, str(e)))
            continue
        if arg is None:
            known = sorted({*by_name, *by_wire})
            hint = did_you_mean(key if not pdef.rename else pdef.rename, known)
            problems.append(doc.problem(
                where, f"operation {op.id!r} has no parameter or body property {key!r}"
                + (f" (nor {pdef.rename!r})" if pdef.rename else "") + (f"; {hint}" if hint else ""),
                hint=f"its arguments are: {', '.join(known)}" if known else "it takes no arguments",
            ))
            continue
        if arg.path is not None and any(a is arg for a in named):
            problems.append(doc.problem(where, f"{arg.wire} is already named by another key of `params`"))
            continue
        named.append(arg)
        try:
            _apply_param_def(arg, model_name, pdef)
            if pdef.null_means == "clear":
                _null_clears(ctx, op, arg)
        except ValueError as e:
            problems.append(doc.problem(where, str(e)))
    if problems:
        raise InputError(problems)
    hide_containers(args, keep=named)
    names: dict[str, Arg] = {}
    for a in args:
        if a.fixed or a.hidden:
            continue
        if a.name in names:
            raise InputError(doc.problem(
                (*at, "params"), f"two arguments would be called {a.name!r} ({names[a.name].wire} and {a.wire})",
                hint="rename one of them with `rename`",
            ))
        names[a.name] = a
    return args


def body_field_arg(ctx: Context, op: Operation, args: list[Arg], text: str) -> Arg:
    """The argument of the body field `body.a.b` (bodypath.py): a top-level property's own, or a new one.

    A new (nested) argument is appended to `args`, named after its keys (`a_b`); raises PathError
    (a ValueError with a hint) when the operation's body has no such field.
    """
    path = bodypath.parse(text)
    rbody = request_body(ctx, op)
    if rbody is None:
        raise bodypath.PathError(f"{text}: the operation takes no request body")
    if len(path) == 1:
        top = next((a for a in args if a.location == "body" and a.path is None and a.wire == path[0]), None)
        if top is not None:
            return top
    for a in args:
        if a.path == path:
            return a
    if not _is_json_body(rbody.media):
        if len(path) == 1:
            fields = sorted(a.wire for a in args if a.location == "body" and a.path is None)
            hint = did_you_mean(path[0], fields)
            raise bodypath.PathError(
                f"{text}: the request body has no field {path[0]!r}" + (f"; {hint}" if hint else ""),
                hint=f"its fields: {', '.join(fields)}" if fields else None,
            )
        raise bodypath.PathError(
            f"{text}: a nested body field needs a JSON request body; this operation sends {rbody.media}",
            hint="name a form field by its own name (a top-level property), without body.",
        )
    schema = convert(ctx, rbody.schema, "input", op.pointer + "/requestBody")
    found = bodypath.resolve(schema, path, required=rbody.required)
    arg = Arg(name=_arg_name(bodypath.default_name(path)), wire=bodypath.show(path), location="body",
              schema=found.schema, required=found.required, path=path,
              sensitive=_is_sensitive(path[-1], found.schema))
    args.append(arg)
    return arg


def hide_containers(args: list[Arg], keep: Iterable[Arg] = ()) -> None:
    """A top-level body argument (or the whole body) holding nested-field arguments is not one itself.

    Unless `params` names it (`keep`): then both are arguments and the runtime merges them.
    """
    kept = {id(a) for a in keep}
    tops = {a.path[0] for a in args if a.path}
    for a in args:
        if id(a) in kept or a.fixed:
            continue
        if (a.location == "body" and a.path is None and a.wire in tops) or (a.location == "body*" and tops):
            a.hidden = a.container = True


def _match_body_field(
    ctx: Context, op: Operation, args: list[Arg], key: str, pdef: ParamDef
) -> tuple[Arg | None, str]:
    """`body.a.b: {...}` or `x: {rename: body.a.b}`: a (nested) body field; (None, key) when neither is a path."""
    for text, other in ((key, pdef.rename), (pdef.rename, key)):
        if text is not None and bodypath.is_body_path(text):
            arg = body_field_arg(ctx, op, args, text)
            return arg, other if other is not None else arg.name
    return None, key


def _match_param(
    key: str, pdef: ParamDef, by_wire: dict[str, Arg], by_name: dict[str, Arg]
) -> tuple[Arg | None, str]:
    """Find the argument a `params` key means; returns it and the name the model will see.

    The name the model sees wins over a spec name: a path parameter `path` and a body property
    `path` (served as `body_path`) are `path` and `body_path` here, as in the input schema.
    """
    found = by_name.get(key) or by_wire.get(key)
    if pdef.rename is None:
        return found, found.name if found else key
    other = by_name.get(pdef.rename) or by_wire.get(pdef.rename)
    if found and not other:
        return found, pdef.rename  # q_limit: {rename: limit}
    if other and not found:
        return other, key  # limit: {rename: q_limit}
    if found and other:
        if found is other:  # `_sort: {rename: sort}` where `_sort` is already served as `sort`
            return found, found.name
        raise ValueError(f"both {key!r} and {pdef.rename!r} are parameters of this operation: rename is ambiguous")
    return None, key


def _apply_param_def(arg: Arg, model_name: str, pdef: ParamDef) -> None:
    if not re.fullmatch(r"[A-Za-z0-9_.-]{1,64}", model_name):
        raise ValueError(f"argument name {model_name!r} is invalid: use 1-64 of A-Za-z0-9_.-")
    arg.name = model_name
    arg.sensitive = arg.sensitive or pdef.sensitive
    if pdef.has("value"):
        arg.fixed, arg.value = True, pdef.value
        check_value(arg.schema, pdef.value, "value")
        return
    if pdef.hidden:
        if arg.required:
            raise ValueError(f"{arg.wire!r} is required by the spec: it cannot be hidden; give it a fixed `value`")
        arg.hidden = True
        return
    base = arg.schema
    schema = dict(base)
    for kw, val in pdef.schema_keywords().items():
        _check_keyword(kw, val, base)
        schema[kw] = val
    if "enum" in pdef.model_fields_set and pdef.enum is not None:
        for v in pdef.enum:
            check_value(base, v, "enum value")
    if pdef.description is not None:
        schema["description"] = pdef.description
    if pdef.unit:
        schema["description"] = (schema.get("description", "") + f" Unit: {pdef.unit}.").strip()
        arg.unit = pdef.unit
    if pdef.required is not None:
        if arg.required and not pdef.required and "default" not in schema:
            raise ValueError(f"{arg.wire!r} is required by the spec; making it optional needs a `default`")
        arg.required = pdef.required
    elif "default" in pdef.schema_keywords():  # the server sends the default: the model need not give it
        arg.required = False
    if "default" in schema:
        check_value(schema, schema["default"], "default")
    arg.schema = schema


def _null_clears(ctx: Context, op: Operation, arg: Arg) -> None:
    """`null_means: clear`: the model's null is sent as JSON null, where one can be sent and the spec takes it."""
    if arg.fixed or arg.hidden:
        raise ValueError("`null_means: clear` is for an argument the model gives; this one is fixed or hidden")
    if arg.location != "body":
        where = "the whole request body" if arg.location == "body*" else f"a {arg.location} parameter"
        raise ValueError(f"`null_means: clear` needs a property of a JSON request body; {arg.wire!r} is {where}, "
                         "where null cannot be sent (leave null meaning not given)")
    rbody = request_body(ctx, op)
    if rbody is None or not _is_json_body(rbody.media):
        raise ValueError(f"`null_means: clear` needs a JSON request body; {op.id!r} sends "
                         f"{rbody.media if rbody else 'none'}, where null cannot be written")
    if not _takes_null(arg.schema):
        shown = "/".join(sorted(schema_types(arg.schema))) or "its schema"
        raise ValueError(f"`null_means: clear`: the spec's schema of {arg.wire!r} does not take null ({shown}), so the "
                         "upstream would refuse it; fix the spec (nullable: true, or type: [..., 'null']) with an OAI "
                         "Overlay, or leave null meaning not given")
    arg.send_null = True
    described = arg.schema.get("description", "")
    arg.schema = {**arg.schema, "description": f"{described} null clears it (sent as null); leave it out to keep "
                  "it.".strip()}


def _takes_null(schema: dict[str, Any]) -> bool:
    if not has_ref(schema):
        return bool(jsonschema.Draft202012Validator(schema).is_valid(None))
    t = schema.get("type")  # a recursive schema: its own level says it
    branches = [b for key in ("anyOf", "oneOf") for b in schema.get(key) or [] if isinstance(b, dict)]
    return (isinstance(t, list) and "null" in t) or any(b.get("type") == "null" for b in branches)


_KEYWORD_TYPES = {
    "minimum": ("number", "integer"), "maximum": ("number", "integer"), "exclusiveMinimum": ("number", "integer"),
    "exclusiveMaximum": ("number", "integer"), "multipleOf": ("number", "integer"),
    "minLength": ("string",), "maxLength": ("string",), "pattern": ("string",), "format": ("string",),
    "minItems": ("array",), "maxItems": ("array",),
}


def _check_keyword(kw: str, value: Any, schema: dict[str, Any]) -> None:
    wanted = _KEYWORD_TYPES.get(kw)
    types = schema_types(schema)
    if wanted and types and not types & set(wanted):
        raise ValueError(
            f"`{kw}` applies to {'/'.join(wanted)} values, but this parameter is {'/'.join(sorted(types))}"
        )




def check_value(schema: dict[str, Any], value: Any, what: str) -> None:
    if has_ref(schema):
        return  # recursive parts need the root's $defs; the runtime validates these anyway
    errors = sorted(jsonschema.Draft202012Validator(schema).iter_errors(value), key=lambda e: e.path)
    if errors:
        raise ValueError(f"{what} {value!r} does not fit the parameter's schema: {errors[0].message}")


# ============================================================================ raw tools (1:1)


def _raw_tool(ctx: Context, op: Operation, name: str, response: ResponseSpec) -> ToolSpec:
    """One operation as a tool of its own; `response` is the overlay's `defaults.response` (no `select`)."""
    args = operation_args(ctx, op)
    risk: Risk = DEFAULT_RISK.get(op.method, "medium")
    output_schema, wrap = _output_schema(ctx, op, OUTPUT_DEPTH_RAW)
    output_schema = output_contract(ctx, output_schema, response)
    if output_schema is not None:
        output_schema = limit_size(output_schema, RAW_OUTPUT_BUDGET)
    return ToolSpec(
        name=name,
        title=op_title(op),
        description=op_description(op, limit=RAW_DESCRIPTION_LIMIT),
        input_schema=limit_size(_input_schema(args), RAW_INPUT_BUDGET),
        output_schema=output_schema,
        annotations=tool_annotations([(op.method, risk)], None, {}),
        branches=[Branch(key="default", steps=[Step(id="call", operation=operation_spec(ctx, op, args))], risk=risk)],
        response=response.model_copy(update={"wrap": wrap}),
        risk=risk,
        category=(op.node.get("tags") or [None])[0] if isinstance(op.node.get("tags"), list) else None,
    )


def _served(tool: ToolSpec, renames: dict[str, str]) -> ToolSpec:
    """The tool under its served name, its written name kept when they differ."""
    served = renames.get(tool.name, tool.name)
    return tool if served == tool.name else tool.model_copy(update={"name": served, "written_name": tool.name})


def _raw_names(ops: list[Operation], taken: set[str]) -> list[str]:
    """Client-safe, unique, deterministic tool names (names.CLIENT_NAME) from operation ids."""
    from openapi2mcp.compiler.names import safe_name_base

    names = []
    used = set(taken)
    for op in ops:
        base = op.id if op.id != op.key else f"{op.method.lower()}_{op.path}"
        base = safe_name_base(base) or "operation"
        if len(base) > 64:
            base = base[:55] + "_" + hashlib.sha1(op.key.encode()).hexdigest()[:8]
        name, n = base, 2
        while name in used:
            suffix = f"_{n}"
            name, n = base[: 64 - len(suffix)] + suffix, n + 1
        used.add(name)
        names.append(name)
    return names


def _check_unique(tools: list[ToolSpec], doc: OverlayFile) -> None:
    seen: dict[str, int] = {}
    for i, t in enumerate(tools):
        if t.name in seen:
            raise InputError(doc.problem(("tools", i, "name"), f"tool name {t.name!r} is used twice",
                                         hint="tool names must be unique"))
        seen[t.name] = i


# ============================================================================ arguments of an operation


def operation_args(ctx: Context, op: Operation) -> list[Arg]:
    """Every argument an operation takes, as the model would see it 1:1."""
    args: list[Arg] = []
    for p, at in op.params:
        loc, wire = p["in"], p["name"]
        if loc == "header" and wire.lower() in _IGNORED_HEADERS:
            continue
        if (loc, wire.lower()) in ctx.auth_params:
            continue  # the upstream auth supplies it
        schema, content_type = _param_schema(ctx, p, at)
        style = p.get("style") or ("form" if loc in ("query", "cookie") else "simple")
        explode = p.get("explode", style == "form")
        desc = p.get("description")
        if isinstance(desc, str) and desc.strip() and "description" not in schema:
            schema = {**schema, "description": _short(desc, 600)}
        if p.get("deprecated") is True:
            schema = {**schema, "deprecated": True}
        if "example" in p and "examples" not in schema and not isinstance(p["example"], dict | list):
            schema = {**schema, "examples": [p["example"]]}
        required = loc == "path" or p.get("required") is True
        schema = _needs_an_item(schema, required)
        spec = ParamSpec(name=wire, location=loc, style=str(style), explode=bool(explode),
                         allow_reserved=p.get("allowReserved") is True, required=required,
                         allow_empty=loc == "query" and p.get("allowEmptyValue") is True,
                         content_type=content_type)
        args.append(Arg(name=_arg_name(wire), wire=wire, location=loc, schema=schema, required=required,
                        param=spec, sensitive=_is_sensitive(wire, schema)))
    args.extend(_body_args(ctx, op, {a.name for a in args}))
    return _dedupe_names(args)


def _needs_an_item(schema: dict[str, Any], required: bool) -> dict[str, Any]:
    """A required array parameter needs an item: an empty list is not sent at all (RFC 6570), and
    the model should know that from the schema rather than from an error."""
    if required and schema_types(schema) == {"array"} and not schema.get("minItems"):
        return {**schema, "minItems": 1}
    return schema


def _param_schema(ctx: Context, p: dict[str, Any], at: str) -> tuple[dict[str, Any], str | None]:
    if "schema" in p:
        return convert(ctx, p["schema"], "input", at + "/schema"), None
    content = p.get("content")
    if isinstance(content, dict) and content:
        media, mt = next(iter(content.items()))
        schema = mt.get("schema") if isinstance(mt, dict) else None
        return convert(ctx, schema or {}, "input", at + "/content"), str(media)
    return {"type": "string"}, None


def convert(
    ctx: Context, schema: Any, mode: str, pointer: str, max_depth: int | None = None
) -> dict[str, Any]:
    try:
        return ctx.converter.convert(schema, "input" if mode == "input" else "output", max_depth)
    except SchemaError as e:
        ctx.warn(f"schema replaced by 'any value': {e}", e.pointer or pointer)
        return {}


@dataclass
class RequestBody:
    media: str
    schema: Any  # the raw OpenAPI schema of that media type
    required: bool
    description: str | None
    encoding: dict[str, Any]


def request_body(ctx: Context, op: Operation) -> RequestBody | None:
    """The request body in the media type we will send (JSON first, then forms, then others).

    Resolved once per operation: the arguments, the call plan and a chain step all read it, and a
    broken body must be reported once.
    """
    if op.pointer not in ctx.bodies:
        ctx.bodies[op.pointer] = _resolve_request_body(ctx, op)
    return ctx.bodies[op.pointer]


def _resolve_request_body(ctx: Context, op: Operation) -> RequestBody | None:
    raw = op.node.get("requestBody")
    if raw is None:
        return None
    at = op.pointer + "/requestBody"
    try:
        body = ctx.converter.resolve(raw, at)
    except SchemaError as e:
        ctx.warn(f"request body ignored: {e}", at)
        return None
    content = body.get("content") if isinstance(body, dict) else None
    if not isinstance(content, dict) or not content:
        return None
    media = _pick_media(list(content))
    mt = content.get(media) if isinstance(content.get(media), dict) else {}
    assert isinstance(mt, dict)
    desc = body.get("description")
    encoding = mt.get("encoding") if isinstance(mt.get("encoding"), dict) else {}
    assert isinstance(encoding, dict)
    return RequestBody(media=media, schema=mt.get("schema", {}), required=body.get("required") is True,
                       description=desc if isinstance(desc, str) and desc.strip() else None,
                       encoding=encoding)


def _body_args(ctx: Context, op: Operation, taken: set[str]) -> list[Arg]:
    body = request_body(ctx, op)
    if body is None:
        return []
    media, required = body.media, body.required
    schema = convert(ctx, body.schema, "input", op.pointer + "/requestBody")
    props = _object_properties(schema)
    form = media in ("application/x-www-form-urlencoded", "multipart/form-data")
    if props is None or not props[0]:
        if form and props is not None:
            return []  # an empty form
        if body.description and "description" not in schema:
            schema = {**schema, "description": _short(body.description, 600)}
        return [Arg(name="body", wire=media, location="body*", schema=schema, required=required)]
    properties, required_props, defs = props
    args = []
    for name, sub in properties.items():
        arg_name = _arg_name(name)
        if arg_name in taken:
            arg_name = _arg_name("body_" + name)
        binary = media == "multipart/form-data" and _is_binary(sub)
        if binary:
            sub = {"type": "string", "contentEncoding": "base64",
                   "description": (sub.get("description", "") + " File content, base64-encoded.").strip()}
        if defs and has_ref(sub):
            sub = {**sub, "$defs": defs}
        args.append(Arg(name=arg_name, wire=name, location="body", schema=sub,
                        required=required and name in required_props, binary=binary,
                        sensitive=_is_sensitive(name, sub)))
    return args


def _object_properties(schema: dict[str, Any]) -> tuple[dict[str, Any], set[str], dict[str, Any]] | None:
    """Top-level properties of an object body (allOf merged), or None when it is not one."""
    defs = schema.get("$defs", {})
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/"):  # a recursive body: its root is a $def
        schema = defs.get(ref.removeprefix("#/$defs/"), {})
    parts = [schema]
    if "allOf" in schema and not schema.get("properties"):
        parts = [p for p in schema["allOf"] if isinstance(p, dict)]
    properties: dict[str, Any] = {}
    required: set[str] = set()
    for part in parts:
        if "$ref" in part or "anyOf" in part or "oneOf" in part:
            return None
        types = schema_types(part)
        if types and types != {"object"}:
            return None
        if not types and "properties" not in part:
            return None
        properties.update(part.get("properties") or {})
        required.update(r for r in part.get("required") or [] if isinstance(r, str))
    if not properties and any(p.get("additionalProperties") not in (None, False) for p in parts):
        return None  # a map: keep it whole
    return properties, required, defs


def _pick_media(media_types: list[str]) -> str:
    def rank(m: str) -> int:
        base = m.split(";")[0].strip().lower()
        if base == "application/json" or base.endswith("+json"):
            return 0
        return {"application/x-www-form-urlencoded": 1, "multipart/form-data": 2}.get(base, 3)

    return sorted(media_types, key=rank)[0]


def _is_binary(schema: dict[str, Any]) -> bool:
    return schema.get("format") in ("binary", "byte") or schema.get("contentMediaType") is not None


def _is_sensitive(name: str, schema: dict[str, Any]) -> bool:
    return schema.get("format") == "password" or schema.get("writeOnly") is True or bool(SENSITIVE_NAME.search(name))


def _arg_name(wire: str) -> str:
    name = _ARG_NAME.sub("_", wire).strip("_") or "arg"
    return name[:64]


def _dedupe_names(args: list[Arg]) -> list[Arg]:
    seen: set[str] = set()
    for a in args:
        base, n = a.name, 2
        while a.name in seen:  # the suffix must survive the 64-character cut
            suffix = f"_{n}"
            a.name, n = base[: 64 - len(suffix)] + suffix, n + 1
        seen.add(a.name)
    return args


def _input_schema(args: list[Arg], extra: dict[str, dict[str, Any]] | None = None) -> dict[str, Any]:
    """One flat object schema: no top-level oneOf/anyOf (MCP clients and LLM APIs reject them)."""
    properties: dict[str, Any] = {}
    required: list[str] = []
    defs: dict[str, Any] = {}
    for a in args:
        if a.fixed or a.hidden:
            continue
        schema = a.schema
        if "$defs" in schema:
            schema = dict(schema)
            defs.update(schema.pop("$defs"))
        properties[a.name] = schema
        if a.required:
            required.append(a.name)
    properties.update(extra or {})
    return flat_object_schema(properties, required, defs)


def operation_spec(ctx: Context, op: Operation, args: list[Arg]) -> OperationSpec:
    params: list[ParamSpec] = []
    body: BodySpec | None = None
    body_props: dict[str, str] = {}
    body_fixed: dict[str, Any] = {}
    binary: list[str] = []
    for a in args:
        if a.location in ("body", "body*"):
            continue
        assert a.param is not None
        if a.hidden:
            continue
        if a.fixed:
            params.append(a.param.model_copy(update={"fixed": True, "value": a.value, "required": True}))
        else:
            # a spec-required parameter the overlay gave a default stays required on the wire: the
            # runtime fills the default in, and an empty value is refused, never sent
            required = a.required or (a.param.required and "default" in a.schema)
            params.append(a.param.model_copy(update={"arg": a.name, "required": required}))
    whole = next((a for a in args if a.location == "body*"), None)
    rbody = request_body(ctx, op)
    fields = _body_fields(args)
    nulls = [a.name for a in args if a.send_null and not a.hidden]  # null_means: clear
    if whole is not None:
        if whole.fixed:
            body = BodySpec(media_type=whole.wire, required=True, value=whole.value, fields=fields, nulls=nulls)
        elif not whole.hidden:
            body = BodySpec(media_type=whole.wire, required=whole.required, arg=whole.name, fields=fields,
                            nulls=nulls)
        elif fields:
            body = BodySpec(media_type=whole.wire, required=whole.required, fields=fields, nulls=nulls)
    elif rbody is not None:
        for a in args:
            if a.location != "body" or a.hidden or a.path is not None:
                continue
            if a.fixed:
                body_fixed[a.wire] = a.value
            else:
                body_props[a.name] = a.wire
            if a.binary:
                binary.append(a.wire)
        content_types = {
            name: str(enc["contentType"]).split(",")[0].strip()
            for name, enc in rbody.encoding.items()
            if name in binary and isinstance(enc, dict) and enc.get("contentType")
        }
        if body_props or body_fixed or fields or rbody.required:
            body = BodySpec(media_type=rbody.media, required=rbody.required,
                            properties=body_props, fixed=body_fixed, binary=binary,
                            content_types=content_types, fields=fields, min_properties=_min_properties(ctx, rbody),
                            nulls=nulls)
    return OperationSpec(id=op.id, method=op.method, path=op.path, params=params, body=body,
                         success=success_statuses(op), accept=accept_header(op))


def _min_properties(ctx: Context, rbody: RequestBody) -> int:
    """`minProperties` of a flattened body (e.g. a PATCH that must change something): the flat
    arguments cannot say it in the tool's schema, so the runtime checks it."""
    try:
        schema = ctx.converter.resolve(rbody.schema)
    except SchemaError:
        return 0
    found = schema.get("minProperties") if isinstance(schema, dict) else None
    return found if isinstance(found, int) and not isinstance(found, bool) and found > 0 else 0


def _body_fields(args: list[Arg]) -> list[BodyField]:
    """Nested body fields: the required containers hidden for them first (as `{}`), then each field."""
    out = [BodyField(path=[a.wire], value={}) for a in args
           if a.container and a.required and a.location == "body" and a.path is None]
    for a in args:
        if a.path is None or a.hidden:
            continue
        out.append(BodyField(path=a.path, value=a.value) if a.fixed else BodyField(path=a.path, arg=a.name))
    return out


# ============================================================================ responses


def success_response(ctx: Context, op: Operation) -> dict[str, Any] | None:
    """The response object of the operation's main success status (200 first, then 2xx)."""
    responses = op.node.get("responses")
    if not isinstance(responses, dict):
        return None
    ordered = sorted((str(c) for c in responses if str(c).startswith("2")), key=lambda c: (c != "200", c))
    return next((r for r in (response_object(ctx, op, c) for c in ordered) if r is not None), None)


def response_object(ctx: Context, op: Operation, status: str) -> dict[str, Any] | None:
    """The resolved response object of one status (YAML may key it by an integer); None: none usable."""
    responses = op.node.get("responses")
    if not isinstance(responses, dict):
        return None
    raw = responses.get(status, responses.get(int(status)) if status.isdigit() else None)
    try:
        resp = ctx.converter.resolve(raw)
    except SchemaError:
        return None
    return resp if isinstance(resp, dict) else None


def json_schema(resp: dict[str, Any] | None) -> Any:
    """The schema of a response object's first JSON media type (None: it documents no JSON body)."""
    content = resp.get("content") if resp else None
    if not isinstance(content, dict):
        return None
    mt = next((mt for media, mt in content.items() if _is_json(str(media))), None)
    return mt.get("schema") if isinstance(mt, dict) else None


def success_statuses(op: Operation) -> list[str]:
    """The statuses the call plan accepts as success (2XX when the spec lists none)."""
    responses = op.node.get("responses")
    if not isinstance(responses, dict):
        return ["2XX"]
    codes = sorted(str(c).upper() for c in responses if str(c).startswith("2"))
    return codes or ["2XX"]


def accept_header(op: Operation) -> str | None:
    """The Accept header of the call: the documented success media types, JSON first (at most 4)."""
    responses = op.node.get("responses")
    if not isinstance(responses, dict):
        return None
    media: list[str] = []
    for code, resp in responses.items():
        if str(code).startswith("2") and isinstance(resp, dict) and isinstance(resp.get("content"), dict):
            media.extend(m for m in resp["content"] if m not in media)
    if not media:
        return None
    media.sort(key=lambda m: _pick_media([m, "zz/zz"]) != m)
    return ", ".join(media[:4])


def _response_schema(ctx: Context, op: Operation) -> Any:
    return json_schema(success_response(ctx, op))


def _is_json_body(media: str) -> bool:
    base = media.split(";")[0].strip().lower()
    return base == "application/json" or base.endswith("+json")


def _is_json(media: str) -> bool:
    return _is_json_body(media) or media.split(";")[0].strip() == "*/*"


def output_kind(ctx: Context, op: Operation) -> str:
    """json: the success response has a JSON schema; empty: it documents no body; other: anything else."""
    resp = success_response(ctx, op)
    if json_schema(resp) is not None:
        return "json"
    if resp is not None and not resp.get("content"):
        return "empty"
    return "other"


def response_base(ctx: Context, op: Operation) -> dict[str, Any] | None:
    """The success response's schema converted for projections (deep; None: not JSON)."""
    raw = _response_schema(ctx, op)
    if raw is None:
        return None
    return convert(ctx, raw, "output", op.pointer + "/responses", PROJECTION_BASE_DEPTH)


def _output_schema(ctx: Context, op: Operation, depth: int) -> tuple[dict[str, Any] | None, str | None]:
    """The outputSchema of the success response and the wrap key if it is not an object."""
    raw = _response_schema(ctx, op)
    if raw is None:
        return None, None
    schema = convert(ctx, raw, "output", op.pointer + "/responses", depth)
    return wrap_output(schema)


def wrap_output(schema: dict[str, Any]) -> tuple[dict[str, Any], str | None]:
    """Legacy MCP needs an object at the root: wrap arrays and scalars under `items`/`result`."""
    types = schema_types(schema)
    if types == {"object"} and not _may_be_null(schema):
        return schema, None
    key = "items" if types == {"array"} else "result"
    defs = schema.get("$defs")
    inner = {k: v for k, v in schema.items() if k != "$defs"}
    out: dict[str, Any] = {"type": "object", "properties": {key: inner}, "required": [key]}
    if defs:
        out["$defs"] = defs
    return out, key


def _may_be_null(schema: dict[str, Any]) -> bool:
    t = schema.get("type")
    return isinstance(t, list) and "null" in t


def _projected_output(
    ctx: Context, op: Operation, response: ResponseSpec, doc: OverlayFile, at: KeyPath
) -> tuple[dict[str, Any] | None, ResponseSpec]:
    """Output schema after a JMESPath projection (see projection.py for the inference)."""
    from openapi2mcp.compiler.projection import ProjectionError, project_schema

    assert response.select is not None
    try:
        projected = project_schema(response.select, response_base(ctx, op))
    except ProjectionError as e:
        raise InputError(doc.problem(at, str(e), hint=e.hint)) from None
    if projected is None:
        return None, response.model_copy(update={"wrap": None})
    schema, wrap = wrap_output(limit_depth(projected, OUTPUT_DEPTH_TOOL + 1))
    return schema, response.model_copy(update={"wrap": wrap})


# ============================================================================ descriptions, annotations


def op_title(op: Operation) -> str | None:
    summary = op.node.get("summary")
    return _short(summary.strip(), 120) if isinstance(summary, str) and summary.strip() else None


def op_description(op: Operation, limit: int | None) -> str:
    parts = []
    summary, desc = op.node.get("summary"), op.node.get("description")
    if isinstance(summary, str) and summary.strip():
        parts.append(summary.strip().rstrip(".") + ".")
    if isinstance(desc, str) and desc.strip() and desc.strip() != (summary or "").strip():
        parts.append(desc.strip())
    text = "\n\n".join(parts) or f"{op.method} {op.path}"
    if op.node.get("deprecated") is True:
        text = "(Deprecated.) " + text
    return _short(text, limit) if limit else text


def _short(text: str, limit: int | None) -> str:
    return trim(text, limit) if limit else text


def tool_annotations(
    calls: Sequence[tuple[str, Risk]], title: str | None, overrides: dict[str, Any]
) -> dict[str, Any]:
    """Behaviour hints derived from the (method, risk) of each call a tool may make.

    Read-only only if every call is, destructive if any is, idempotent if all are. Hints only:
    the server enforces.
    """
    read_only = all(m in SAFE_METHODS and RISK_ORDER[r] <= RISK_ORDER["medium"] for m, r in calls)
    out: dict[str, Any] = {}
    if title:
        out["title"] = title
    out["readOnlyHint"] = read_only
    if not read_only:
        out["destructiveHint"] = any(m in ("DELETE", "PUT", "PATCH") or RISK_ORDER[r] >= RISK_ORDER["high"]
                                     for m, r in calls)
        out["idempotentHint"] = all(m in IDEMPOTENT_METHODS for m, _ in calls)
    out["openWorldHint"] = True
    out.update(overrides)
    return out


def apply_units(
    input_schema: dict[str, Any], output_schema: dict[str, Any] | None, units: dict[str, str],
    doc: OverlayFile, at: KeyPath,
) -> dict[str, Any] | None:
    """Put each unit into the description of every input argument / output field it names.

    The input schema's properties are replaced in place (it is the tool's own); the output schema
    is returned as a copy when there are units, since converted schemas are shared between tools.
    """
    if not units:
        return output_schema
    output_schema = copy.deepcopy(output_schema)
    for name, unit in units.items():
        hit = False
        props = input_schema.get("properties", {})
        if name in props:
            props[name] = _with_unit(props[name], unit)
            hit = True
        if output_schema is not None:
            for prop_name, sub in list(walk_properties(output_schema)):
                if prop_name == name:
                    desc = sub.get("description", "")
                    if unit not in desc:
                        sub["description"] = (desc + f" Unit: {unit}.").strip()
                    hit = True
        if not hit:
            known = sorted({*props, *(n for n, _ in walk_properties(output_schema or {}))})
            hint = did_you_mean(name, known)
            raise InputError(doc.problem(
                (*at, name), f"unit for {name!r}, but no argument or result field has that name"
                + (f"; {hint}" if hint else ""),
            ))
    return output_schema


def _with_unit(schema: dict[str, Any], unit: str) -> dict[str, Any]:
    desc = schema.get("description", "")
    return schema if unit in desc else {**schema, "description": (desc + f" Unit: {unit}.").strip()}


# ============================================================================ server, upstream, sources


def _server(spec: LoadedSpec, document: dict[str, Any], overlay: ToolOverlay | None) -> ServerSpec:
    info = document.get("info") if isinstance(document.get("info"), dict) else {}
    assert isinstance(info, dict)
    title = info.get("title") if isinstance(info.get("title"), str) else None
    sdef = overlay.server if overlay else None
    name = (sdef.name if sdef and sdef.name else None) or _slug(title or "openapi") + "-mcp"
    return ServerSpec(
        name=name,
        title=(sdef.title if sdef and sdef.title else None) or title,
        version=(sdef.version if sdef and sdef.version else None) or str(info.get("version") or "0.0.0"),
        instructions=sdef.instructions if sdef else None,
    )


def _slug(text: str) -> str:
    """A short server name from the spec title: its first words, lower case, dashed."""
    words = re.findall(r"[a-z0-9]+", text.lower().replace("'", ""))
    out = ""
    for word in words:
        if out and len(out) + len(word) + 1 > 30:
            break
        out = f"{out}-{word}" if out else word
    return out or "openapi"


def _upstream(ctx: Context, overlay: ToolOverlay | None) -> UpstreamSpec:
    udef = overlay.upstream if overlay else None
    base, relative = (udef.base_url, None) if udef and udef.base_url else _spec_base_url(ctx)
    auth = AuthSpec(**udef.auth.model_dump()) if udef and udef.auth else _spec_auth(ctx)
    if auth.type in ("header", "query", "cookie") and auth.name:
        ctx.auth_params.add((auth.type, auth.name.lower()))
    if auth.type in ("bearer", "basic", "env"):
        ctx.auth_params.add(("header", "authorization"))
    timeout = TimeoutSpec()
    if udef and udef.timeout is not None:
        if isinstance(udef.timeout, float | int):
            timeout = TimeoutSpec(read=float(udef.timeout), total=max(60.0, float(udef.timeout) * 2))
        else:
            given = udef.timeout.model_dump(exclude_none=True)
            timeout = TimeoutSpec(**given)
    return UpstreamSpec(
        base_url=base,
        spec_server=relative,
        auth=auth,
        timeout=timeout,
        headers=dict(udef.headers) if udef else {},
        max_response_bytes=(udef.max_response_bytes if udef and udef.max_response_bytes else 10_000_000),
        verify_tls=udef.verify_tls if udef else True,
        retries=retry_spec(udef.retries) if udef else None,
        rate_limit=_rate_limit(udef.rate_limit) if udef and udef.rate_limit else None,
        forward_headers=list(udef.forward_headers) if udef else [],
    )


def retry_spec(rdef: RetriesDef | None) -> RetrySpec | None:
    """`retries` of the overlay (upstream-wide or per tool) as the Manifest holds it."""
    return RetrySpec(**rdef.model_dump(exclude_none=True)) if rdef is not None else None


def _rate_limit(rdef: RateLimitDef) -> RateLimitSpec:
    from openapi2mcp.manifest import default_burst, parse_rate

    rate, count = parse_rate(rdef.rate)
    return RateLimitSpec(rate=rate, burst=rdef.burst or default_burst(count), per_caller=rdef.per_caller)


def _with_access(tool: ToolSpec, tdef: ToolDef) -> ToolSpec:
    """The access fields of the contract (access.py, limits.py): rate limit and step-up."""
    update: dict[str, Any] = {}
    if tdef.rate_limit is not None:
        update["rate_limit"] = _rate_limit(tdef.rate_limit)
    if tdef.step_up:
        update.update(step_up=True, step_up_scope=tdef.step_up_scope)
    return tool.model_copy(update=update) if update else tool


def _spec_base_url(ctx: Context) -> tuple[str, str | None]:
    """servers[0] with its variables at their defaults, and the server when it is relative.

    A relative server ("/api", or none at all, which OpenAPI reads as "/") is resolved against
    the spec's URL when it was fetched; from a file it cannot be, so the base URL is then
    $OPENAPI2MCP_BASE_URL, required at start-up (a valid spec, so not a warning: the message at
    start-up names the relative server). $OPENAPI2MCP_BASE_URL overrides any base URL at run time.
    """
    servers = ctx.document.get("servers")
    url = None
    if isinstance(servers, list) and servers and isinstance(servers[0], dict):
        server = servers[0]
        url = str(server.get("url") or "")
        variables = server.get("variables") if isinstance(server.get("variables"), dict) else {}
        assert isinstance(variables, dict)
        for var, spec in variables.items():
            default = spec.get("default") if isinstance(spec, dict) else None
            url = url.replace("{" + var + "}", str(default or ""))
    if url and not re.match(r"^https?://", url) and re.match(r"^https?://", ctx.spec.source):
        from urllib.parse import urljoin

        url = urljoin(ctx.spec.source, url)
    if url and re.match(r"^https?://", url):
        return url.rstrip("/").replace("$", "$$"), None
    return "${" + BASE_URL_VAR + "}", url or "/"


def _spec_auth(ctx: Context) -> AuthSpec:
    """Without an overlay, authenticate as the spec's first security scheme says, secrets from env.

    The secret comes from OPENAPI2MCP_TOKEN (or OPENAPI2MCP_USERNAME/PASSWORD for basic); when
    unset, no credentials are sent, so public APIs work without configuration.
    """
    components = ctx.document.get("components") if isinstance(ctx.document.get("components"), dict) else {}
    assert isinstance(components, dict)
    schemes = components.get("securitySchemes") if isinstance(components.get("securitySchemes"), dict) else {}
    assert isinstance(schemes, dict)
    order: list[str] = []
    for req in ctx.document.get("security") or []:
        if isinstance(req, dict):
            order.extend(k for k in req if k not in order)
    order.extend(k for k in schemes if k not in order)
    for name in order:
        try:
            scheme = ctx.converter.resolve(schemes.get(name))
        except SchemaError:
            continue
        if not isinstance(scheme, dict):
            continue
        kind = scheme.get("type")
        if kind == "http" and str(scheme.get("scheme", "")).lower() == "bearer":
            return AuthSpec(type="bearer", value="${OPENAPI2MCP_TOKEN:-}")
        if kind == "http" and str(scheme.get("scheme", "")).lower() == "basic":
            return AuthSpec(type="basic", username="${OPENAPI2MCP_USERNAME:-}", password="${OPENAPI2MCP_PASSWORD:-}")
        if kind == "apiKey" and scheme.get("in") in ("header", "query", "cookie") and scheme.get("name"):
            return AuthSpec(type=scheme["in"], name=str(scheme["name"]), value="${OPENAPI2MCP_TOKEN:-}")
        if kind in ("oauth2", "openIdConnect"):
            return AuthSpec(type="bearer", value="${OPENAPI2MCP_TOKEN:-}")
    # no usable scheme (Swagger 2.0's `securityDefinitions: {}` is common even for APIs that want
    # one): the same variables still give credentials, chosen at start-up by which ones are set
    return AuthSpec(type="env")


def _sources(spec: LoadedSpec, overlays: Iterable[OverlayFile]) -> list[SourceSpec]:
    kind = ("swagger " if spec.original_version.startswith("2") else "openapi ") + spec.original_version
    out = [SourceSpec(name=_basename(spec.source), sha256=spec.sha256, kind=kind)]
    out.extend(SourceSpec(name=_basename(o.path), sha256=o.sha256, kind=o.kind) for o in overlays)
    return out


def _basename(source: str) -> str:
    return source.rstrip("/").rsplit("/", 1)[-1] or source


def _escape(part: str) -> str:
    return part.replace("~", "~0").replace("/", "~1")
