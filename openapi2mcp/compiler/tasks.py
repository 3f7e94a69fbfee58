"""Compile stage, part: task-level tools (several operations or a chain behind one tool) and paging.

An overlay tool is one of
* `operation` — one call (compile.py);
* `actions`   — several operations picked by an `action` enum argument;
* `variants`  — several operations picked by which arguments are given (one fallback);
* `steps`     — a short chain of calls (Arazzo-shaped), later steps fed by earlier results;
and any single operation may declare `pagination`, which gives the model one paging contract
(`limit`, `cursor` -> `items`, `next_cursor`, `has_more`) whatever the API's own style.

Everything that can be checked without calling the API is checked here, with the overlay's
file, line and key: argument clashes between actions, unreachable variants, unknown step ids,
forward references, expressions naming fields the response schemas do not have. The input schema
stays one flat object (no top-level oneOf/anyOf); per-branch requirements go into the Manifest
(`Branch.requires`) and are checked by the runtime, and stated in the tool description.
"""

from __future__ import annotations

import copy
import json
import re
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import jsonschema

from openapi2mcp.compiler import bodypath
from openapi2mcp.compiler.bodypath import PathError
from openapi2mcp.compiler.compile import (
    DEFAULT_RISK,
    OUTPUT_DEPTH_TOOL,
    SENSITIVE_NAME,
    Arg,
    Context,
    Operation,
    Use,
    accept_header,
    annotation_overrides,
    apply_units,
    body_field_arg,
    check_value,
    compile_use,
    failure_modes,
    find_operation,
    op_description,
    op_title,
    operation_args,
    operation_spec,
    output_contract,
    output_kind,
    request_body,
    response_base,
    response_def_of,
    response_spec,
    success_statuses,
    tool_annotations,
    units_line,
    unknown_operation,
    wrap_output,
)
from openapi2mcp.compiler.contract import Extra, adjust_use, finish_tool
from openapi2mcp.compiler.projection import ProjectionError, parse, project_schema, root_references
from openapi2mcp.compiler.schemas import flat_object_schema, limit_depth, schema_types
from openapi2mcp.errors import InputError, Problem, did_you_mean
from openapi2mcp.manifest import (
    CURSOR_MAX_LENGTH,
    RISK_ORDER,
    BodySpec,
    Branch,
    Dispatch,
    OperationSpec,
    PaginationSpec,
    ParamSpec,
    ResponseSpec,
    Risk,
    Step,
    ToolSpec,
)
from openapi2mcp.overlay import (
    ActionDef,
    KeyPath,
    OverlayFile,
    PaginationDef,
    StepDef,
    ToolDef,
    ToolOverlay,
    VariantDef,
)

ACTION_ARG = "action"
LIMIT_ARG = "limit"
CURSOR_ARG = "cursor"
# Keywords that describe rather than constrain: two arguments that differ only in these are one.
_ANNOTATION_KEYWORDS = frozenset({"description", "title", "examples", "deprecated", "default", "$comment",
                                  "readOnly", "writeOnly"})
_EMPTY_RESULT: dict[str, Any] = {
    "type": "object",
    "properties": {"status": {"type": "integer", "description": "The upstream's HTTP status (no content)."}},
}


def task_tool(ctx: Context, tdef: ToolDef, overlay: ToolOverlay, doc: OverlayFile, at: KeyPath) -> ToolSpec:
    if tdef.actions is not None:
        return _action_tool(ctx, tdef, overlay, doc, at)
    if tdef.variants is not None:
        return _variant_tool(ctx, tdef, overlay, doc, at)
    return _chain_tool(ctx, tdef, overlay, doc, at)


# ============================================================================ pagination


_POSITION = {"page": ("page_param", "page"), "offset": ("offset_param", "offset"),
             "body_cursor": ("cursor_param", "cursor"), "header_cursor": ("cursor_param", "cursor")}
_ALLOWED_KEYS = {
    "page": {"page_param", "size_param", "first_page", "total"},
    "link": {"page_param", "size_param", "total"},
    "offset": {"offset_param", "size_param", "total"},
    "body_cursor": {"cursor_param", "size_param", "next", "total"},
    "header_cursor": {"cursor_param", "size_param", "header", "total"},
    "next_url": {"cursor_param", "size_param", "next", "header", "total"},
}
_STYLE_KEYS = ("page_param", "size_param", "offset_param", "cursor_param", "first_page", "next", "header")


def paginate(ctx: Context, use: Use, pdef: PaginationDef, doc: OverlayFile, at: KeyPath, use_at: KeyPath) -> Use:
    """Give a list operation the uniform paging contract; the API's paging parameters disappear."""
    op = use.op
    problems: list[Problem] = []
    for key in _STYLE_KEYS:
        if key in pdef.model_fields_set and key not in _ALLOWED_KEYS[pdef.style]:
            problems.append(doc.problem((*at, key), f"`{key}` does not apply to pagination style {pdef.style!r}"))
    if pdef.style == "next_url" and (pdef.header is None) == (pdef.next is None):
        problems.append(doc.problem(
            at, "style next_url needs exactly one of `header` (the response header holding the next page's URL) "
            "and `next` (the JMESPath of the URL in the body)",
            hint="e.g. {style: next_url, header: Next-Page} or {style: next_url, next: links.next}",
        ))
    wire_args = {a.wire: a for a in use.args if a.location not in ("body", "body*")}
    named = {a.name: a for a in use.args if a.location not in ("body", "body*")}
    body_props = {a.wire: a for a in use.args if a.location == "body" and a.path is None}

    def find(key: str, default: str, *, needed: bool) -> Arg | None:
        explicit = getattr(pdef, key)
        name = explicit or default
        try:
            if bodypath.is_body_path(name) and name not in wire_args and name not in named:
                arg: Arg | None = body_field_arg(ctx, op, use.args, name)
            else:  # a parameter of the operation, else a top-level property of its body
                arg = wire_args.get(name) or named.get(name) or body_props.get(name)
        except PathError as e:
            problems.append(doc.problem((*at, key), f"operation {op.id!r}: {e}", hint=e.hint))
            return None
        if arg is None and (explicit or needed):
            hint = did_you_mean(name, [*wire_args, *named, *body_props])
            known = [*sorted(wire_args), *(f"body.{p}" for p in sorted(body_props))]
            problems.append(doc.problem(
                (*at, key) if explicit else (*at, "style"),
                f"operation {op.id!r} has no parameter {name!r} for `{key}`" + (f"; {hint}" if hint else ""),
                hint=f"its parameters and body fields: {', '.join(known)}" if known else None,
            ))
            return None
        if arg is not None and arg.fixed:
            problems.append(doc.problem(
                (*use_at, "params", arg.name),
                f"{arg.wire!r} is a paging parameter ({key}): the server sets it, do not fix its value",
                hint="set pagination.page_size for the page size",
            ))
        return arg

    position: Arg | None = None
    link_page: Arg | None = None  # link style: hidden, the Link header says where page 2 is
    if pdef.style in _POSITION:
        key, default = _POSITION[pdef.style]
        position = find(key, default, needed=True)
    elif pdef.style == "link":
        link_page = find("page_param", "page", needed=False)
    elif pdef.cursor_param is not None:  # next_url: the parameter the URL carries the position in
        link_page = find("cursor_param", pdef.cursor_param, needed=True)
    size = find("size_param", "per_page" if pdef.style in ("page", "link") else "limit",
                needed="size_param" in pdef.model_fields_set)
    for arg in (position, size, link_page):
        if arg is not None:
            arg.hidden = True
            if arg.location in ("body", "body*"):
                _hide_container(use.args, arg)

    page_size = _page_size(pdef, size, doc, at, problems)
    for arg in use.args:
        if not arg.fixed and not arg.hidden and arg.name in (LIMIT_ARG, CURSOR_ARG):
            problems.append(doc.problem(
                (*use_at, "params"),
                f"argument {arg.name!r} of {op.id!r} clashes with the paging argument `{arg.name}` every paginated "
                "tool has",
                hint=f"hide it (params: {{{arg.wire}: {{hidden: true}}}}) or rename it "
                f"(params: {{{arg.wire}: {{rename: {arg.wire}_param}}}})",
            ))
    response_def = use.response
    if response_def.max_items is not None:
        problems.append(doc.problem(
            (*use_at, "response", "max_items"),
            "`response.max_items` does not apply to a paginated tool: `limit` (at most pagination.max_items) "
            "says how many items a call returns",
        ))
    base = response_base(ctx, op)
    if base is None:
        problems.append(doc.problem(at, f"pagination needs a JSON response schema; {op.id!r} documents none"))
    if problems:
        raise InputError(problems)
    assert base is not None

    items_expr = pdef.items or ("@" if schema_types(base) == {"array"} else "items")
    if pdef.items is None and items_expr == "items" and "items" not in (base.get("properties") or {}):
        props = sorted(base.get("properties") or {})
        lists = [p for p in props if schema_types((base.get("properties") or {})[p]) == {"array"}]
        raise InputError(doc.problem(
            at, f"where is the list in {op.id!r}'s response? set `pagination.items`",
            hint=f"array fields: {', '.join(lists)}" if lists else f"fields: {', '.join(props)}",
        ))
    items_schema = _project(items_expr, base, "`pagination.items`", doc, (*at, "items"))
    if schema_types(items_schema) - {"array"}:
        raise InputError(doc.problem((*at, "items"), f"`pagination.items` ({items_expr!r}) is not a list"))
    item = items_schema.get("items") if isinstance(items_schema.get("items"), dict) else {}
    assert isinstance(item, dict)
    if base.get("$defs") and "$defs" not in item:
        item = {**item, "$defs": base["$defs"]}
    total_schema = _project(pdef.total, base, "`pagination.total`", doc, (*at, "total")) if pdef.total else None
    next_expr = None
    if pdef.style == "body_cursor" or (pdef.style == "next_url" and pdef.next is not None):
        next_expr = pdef.next or "next_cursor"
        _project(next_expr, base, "`pagination.next`", doc, (*at, "next"))
    select = response_def.select
    item_out = _project(select, item, "`select`", doc, (*use_at, "response", "select")) if select else item
    defs = item_out.pop("$defs", None) if isinstance(item_out, dict) else None
    item_out = limit_depth(item_out, OUTPUT_DEPTH_TOOL + 1) if item_out else {}
    if response_def.validate_ == "tolerant":  # the upstream's parts of the page; the paging keys are ours
        item_out, defs, total_schema = _tolerant_page_parts(ctx, item_out, defs, total_schema)

    properties: dict[str, Any] = {
        "items": {"type": "array", "items": item_out, "description": "The items of this call, in order."},
        "next_cursor": {"type": ["string", "null"],
                        "description": "Pass as `cursor` (with the same other arguments) to get the next items; "
                        "null when there are no more."},
        "has_more": {"type": "boolean", "description": "true when more items follow (next_cursor is set)."},
    }
    if total_schema is not None:
        properties["total"] = {**total_schema, "description": "Total number of items over all pages, as the API "
                               "reports it."}
    output: dict[str, Any] = {"type": "object", "properties": properties,
                              "required": ["items", "next_cursor", "has_more"]}
    if defs and "$ref" in json.dumps(item_out):
        output["$defs"] = defs

    default_limit = min(page_size, pdef.max_items)
    header = None
    if pdef.style == "header_cursor":
        header = pdef.header or "X-Next-Cursor"
    elif pdef.style == "next_url":
        header = pdef.header
    spec = PaginationSpec(
        style=pdef.style,
        position=_param_of(position),
        size=_param_of(size),
        position_path=_path_of(position),
        size_path=_path_of(size),
        first_page=pdef.first_page,
        items=items_expr,
        next=next_expr,
        header=header,
        total=pdef.total,
        item_select=select,
        page_size=page_size,
        max_items=pdef.max_items,
        max_pages=pdef.max_pages,
        auto=pdef.auto,
        cursor_ttl=pdef.cursor_ttl,
    )
    extra = {
        LIMIT_ARG: {
            "type": "integer", "minimum": 1, "maximum": pdef.max_items, "default": default_limit,
            "description": f"How many items to return, 1 to {pdef.max_items} (default {default_limit}).",
        },
        CURSOR_ARG: {
            "type": "string", "minLength": 1, "maxLength": CURSOR_MAX_LENGTH,
            "description": "To continue a listing: the next_cursor of the previous result (keep the other "
            "arguments the same). Omit to start from the beginning.",
        },
    }
    operation = operation_spec(ctx, op, use.args)
    rbody = request_body(ctx, op)
    if (spec.position_path or spec.size_path) and operation.body is None and rbody is not None:
        operation = operation.model_copy(update={"body": BodySpec(media_type=rbody.media)})  # paging fields go in
    return Use(
        op=op, args=use.args, operation=operation,
        output_schema=None if response_def.validate_ == "off" else output,
        output_kind="json", response=ResponseSpec(max_bytes=response_def.max_bytes, validate_=response_def.validate_),
        risk=use.risk,
        pagination=spec, extra_inputs=extra,
    )


def _tolerant_page_parts(
    ctx: Context, item: dict[str, Any], defs: dict[str, Any] | None, total: dict[str, Any] | None
) -> tuple[dict[str, Any], dict[str, Any] | None, dict[str, Any] | None]:
    """The tolerant contract (schemas.tolerant) of a page's item, its $defs and its total."""
    tolerant = ctx.converter.tolerant
    return (tolerant(item, root=False), {k: tolerant(v, root=False) for k, v in defs.items()} if defs else defs,
            tolerant(total, root=False) if total is not None else None)


def _page_size(
    pdef: PaginationDef, size: Arg | None, doc: OverlayFile, at: KeyPath, problems: list[Problem]
) -> int:
    schema = _not_null(size.schema) if size is not None else {}
    maximum = schema.get("maximum") if isinstance(schema.get("maximum"), int) else None
    default = schema.get("default") if isinstance(schema.get("default"), int) else None
    page_size = pdef.page_size or default or min(20, maximum or 20)
    if maximum is not None and page_size > maximum:
        problems.append(doc.problem(
            (*at, "page_size"), f"page_size {page_size} is above the API's maximum page size of {maximum}"))
    if pdef.page_size is not None and size is None:
        problems.append(doc.problem(
            (*at, "page_size"), "page_size needs a page-size parameter (`size_param`); this operation has none"))
    return page_size


def _not_null(schema: dict[str, Any]) -> dict[str, Any]:
    """The X of a nullable `anyOf: [X, {type: null}]` (OpenAPI 3.1 generators write optional fields so)."""
    members = [m for m in schema.get("anyOf") or [] if isinstance(m, dict) and m.get("type") != "null"]
    return {**members[0], **{k: v for k, v in schema.items() if k != "anyOf"}} if len(members) == 1 else schema


def _param_of(arg: Arg | None) -> ParamSpec | None:
    if arg is None or arg.param is None:
        return None
    return arg.param.model_copy(update={"arg": None, "required": False})


def _path_of(arg: Arg | None) -> list[str]:
    """Where a paging value goes in the JSON request body ([] for a parameter)."""
    if arg is None or arg.location not in ("body", "body*"):
        return []
    return list(arg.path) if arg.path is not None else [arg.wire]


def _hide_container(args: list[Arg], field_arg: Arg) -> None:
    """The server sets a paging field of the body: the argument that would hold it is not one."""
    path = _path_of(field_arg)
    for a in args:
        if a is not field_arg and ((a.location == "body" and a.path is None and len(path) > 1 and a.wire == path[0])
                                   or a.location == "body*"):
            a.hidden = a.container = True


def paging_sentence(p: PaginationSpec) -> str:
    default = min(p.page_size, p.max_items)
    return (
        f"Paged: returns up to `limit` items (default {default}, at most {p.max_items}); when has_more is true, "
        "call again with the same arguments and cursor = next_cursor."
    )


def _project(
    expr: str, base: dict[str, Any], what: str, doc: OverlayFile, where: KeyPath, *, context: bool = False
) -> dict[str, Any]:
    """The schema of `expr`'s result over `base` (over a chain's {inputs, steps} with `context`)."""
    try:
        out = project_schema(expr, base, what=what, context=context)
    except ProjectionError as e:
        raise InputError(doc.problem(where, str(e), hint=e.hint)) from None
    return out or {}


# ============================================================================ merging branches


@dataclass
class _BranchUse:
    key: str
    label: str  # "action 'create'" / "variant 'getPet'"
    use: Use
    at: KeyPath
    description: str
    side_effects: list[str]


def _strip_annotations(schema: Any) -> Any:
    """The part of a schema that decides what is valid, with `null` allowed or not alike.

    Nullability is ignored because the runtime treats a null argument as one not given.
    """
    if isinstance(schema, dict):
        out = {k: _strip_annotations(v) for k, v in schema.items() if k not in _ANNOTATION_KEYWORDS}
        t = out.get("type")
        if isinstance(t, list) and "null" in t:
            rest = [x for x in t if x != "null"]
            out["type"] = rest[0] if len(rest) == 1 else rest
        any_of = out.get("anyOf")
        if isinstance(any_of, list) and {"type": "null"} in any_of:
            rest_s = [x for x in any_of if x != {"type": "null"}]
            out = {**{k: v for k, v in out.items() if k != "anyOf"}, **(rest_s[0] if len(rest_s) == 1 else
                                                                       {"anyOf": rest_s})}
        return out
    if isinstance(schema, list):
        return [_strip_annotations(v) for v in schema]
    return schema


def _nullable(schema: dict[str, Any]) -> bool:
    t = schema.get("type")
    return (isinstance(t, list) and "null" in t) or {"type": "null"} in (schema.get("anyOf") or [])


def _short_json(value: Any, limit: int = 60) -> str:
    text = json.dumps(value, sort_keys=True, ensure_ascii=False)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def difference(a: Any, b: Any, path: str = "") -> str | None:
    """Where two schemas first differ, in words: `at items.type: "string" vs "integer"`."""
    where = path or "the top level"
    if isinstance(a, dict) and isinstance(b, dict):
        for key in sorted(set(a) | set(b), key=lambda k: (k != "type", k)):  # a type difference says most
            sub = f"{path}.{key}" if path else key
            if key not in a or key not in b:
                side = "second" if key not in a else "first"
                return f"`{sub}` only in the {side} ({_short_json(a.get(key, b.get(key)))})"
            found = difference(a[key], b[key], sub)
            if found:
                return found
        return None
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return f"at {where}: {len(a)} vs {len(b)} entries"
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            found = difference(x, y, f"{path}[{i}]")
            if found:
                return found
        return None
    return None if a == b else f"at {where}: {_short_json(a)} vs {_short_json(b)}"


def _merge_arguments(
    branches: list[_BranchUse], doc: OverlayFile, kind: str
) -> tuple[dict[str, Any], list[str], dict[str, Any]]:
    """The union of the branches' arguments: (properties, required by every branch, $defs).

    An argument several branches take must mean the same there (the same schema apart from
    descriptions, examples and defaults); a default survives only when all of them agree.
    """
    properties: dict[str, Any] = {}
    owners: dict[str, _BranchUse] = {}
    defaults: dict[str, list[Any]] = {}
    defs: dict[str, Any] = {}
    problems: list[Problem] = []
    required_sets: list[set[str]] = []
    for b in branches:
        schema = b.use.input_schema()
        defs.update(schema.get("$defs", {}))
        required_sets.append(set(schema.get("required", [])))
        for name, prop in schema["properties"].items():
            defaults.setdefault(name, []).append(prop.get("default", _NO_DEFAULT))
            if name not in properties:
                properties[name], owners[name] = prop, b
                continue
            if _strip_annotations(properties[name]) == _strip_annotations(prop):
                if _nullable(prop) and not _nullable(properties[name]):  # keep the permissive one
                    described = properties[name].get("description")
                    properties[name] = {**prop, "description": described} if described else prop
                continue
            first = owners[name]
            where = difference(_strip_annotations(properties[name]), _strip_annotations(prop))
            problems.append(doc.problem(
                (*b.at, "params"),
                f"argument {name!r} means different things in {first.label} and {b.label} ({where}); "
                f"a {kind} tool has one flat set of arguments",
                hint=f"rename it in one of them, e.g. params: {{{name}: {{rename: {b.key}_{name}}}}}",
            ))
    if problems:
        raise InputError(problems)
    for name, found in defaults.items():  # branches without the argument never read its default
        if "default" in properties[name] and len(set(map(repr, found))) != 1:
            properties[name] = {k: v for k, v in properties[name].items() if k != "default"}
    required = sorted(set.intersection(*required_sets)) if required_sets else []
    return properties, required, defs


class _NoDefault:
    def __repr__(self) -> str:
        return "<no default>"


_NO_DEFAULT = _NoDefault()


def merge_outputs(schemas: list[dict[str, Any] | None]) -> dict[str, Any] | None:
    """One object schema every branch's result validates against (None: some result is unknown).

    Plain object schemas merge flat: the union of properties (a property two branches type
    differently becomes anyOf), required = what every branch requires. Otherwise anyOf at the
    root, still `type: object` as MCP clients need.
    """
    if any(s is None for s in schemas) or not schemas:
        return None
    given = [s for s in schemas if s is not None]
    unique: list[dict[str, Any]] = []
    for s in given:
        if s not in unique:
            unique.append(s)
    if len(unique) == 1:
        return unique[0]
    defs: dict[str, Any] = {}
    bodies = []
    for s in unique:
        defs.update(s.get("$defs", {}))
        bodies.append({k: v for k, v in s.items() if k != "$defs"})
    plain = all(set(b) <= {"type", "properties", "required", "description", "additionalProperties", "title"}
                and b.get("type") == "object" for b in bodies)
    out: dict[str, Any]
    if plain:
        properties: dict[str, Any] = {}
        for b in bodies:
            for name, prop in (b.get("properties") or {}).items():
                if name not in properties:
                    properties[name] = prop
                elif prop != properties[name]:
                    options = properties[name]["anyOf"] if set(properties[name]) == {"anyOf"} else [properties[name]]
                    if prop not in options:
                        properties[name] = {"anyOf": [*options, prop]}
        required = set.intersection(*(set(b.get("required") or []) for b in bodies))
        out = {"type": "object", "properties": properties}
        if required:
            out["required"] = [r for r in (bodies[0].get("required") or []) if r in required]
    else:
        out = {"type": "object", "anyOf": bodies}
    if defs:
        out["$defs"] = defs
    return out


def _branch_output(use: Use) -> dict[str, Any] | None:
    if use.output_kind == "empty":
        return _EMPTY_RESULT
    return use.output_schema


def _highest(risks: list[Risk]) -> Risk:
    return max(risks, key=lambda r: RISK_ORDER[r])


def _requirements(b: _BranchUse, required_everywhere: list[str], when: list[str]) -> list[str]:
    """What this branch needs beyond what every branch needs (and, for a variant, what selects it)."""
    return [a.name for a in b.use.visible if a.required and a.name not in required_everywhere and a.name not in when]


def _finish_multi(
    tdef: ToolDef,
    doc: OverlayFile,
    at: KeyPath,
    branches: list[_BranchUse],
    specs: list[Branch],
    input_schema: dict[str, Any],
    description: str,
    dispatch: Dispatch,
) -> ToolSpec:
    live = [(b, s) for b, s in zip(branches, specs, strict=True) if s.risk != "forbidden"]
    output_schema = merge_outputs([_branch_output(b.use) for b, _ in live]) if live else None
    if output_schema is not None:  # a strict branch is checked against its own schema, not the union
        specs = [s.model_copy(update={"output_schema": _branch_output(b.use)})
                 if s.response and s.response.validate_ == "strict" and _branch_output(b.use) != output_schema else s
                 for b, s in zip(branches, specs, strict=True)]
    units = dict(tdef.units)
    output_schema = apply_units(input_schema, output_schema, units, doc, (*at, "units"))
    description += units_line(units, [a for b, _ in live for a in b.use.args])
    risk: Risk = _highest([s.risk for _, s in live]) if live else "forbidden"
    annotations = tool_annotations([(b.use.op.method, s.risk) for b, s in live], tdef.title,
                                   annotation_overrides(tdef))
    side_effects = list(tdef.side_effects)
    for _, s in live:
        side_effects += [e for e in s.side_effects if e not in side_effects]
    return ToolSpec(
        name=tdef.name,
        title=tdef.title,
        description=description.strip(),
        input_schema=input_schema,
        output_schema=output_schema,
        annotations=annotations,
        dispatch=dispatch,
        action_arg=ACTION_ARG,
        branches=specs,
        response=ResponseSpec(max_bytes=max((s.response.max_bytes for s in specs if s.response), default=64_000),
                              units=units),
        failure_modes=failure_modes(tdef),
        risk=risk,
        category=tdef.category,
        permissions=list(tdef.permissions),
        side_effects=side_effects,
        audit_event=tdef.audit_event,
        sensitive=sorted({a.name for b in branches for a in b.use.args if a.sensitive and not a.fixed}),
    )


def _one_line(text: str) -> str:
    text = " ".join(text.split())
    first = re.split(r"(?<=[.!?])\s", text, maxsplit=1)[0]
    return first if len(first) <= 160 else first[:157] + "..."


def _branch_description(own: str | None, op: Operation) -> str:
    if own:
        return " ".join(own.split())
    return _one_line(op_description(op, limit=None))


def _compile_branch(
    ctx: Context, tdef: ToolDef, bdef: ActionDef | VariantDef, overlay: ToolOverlay, doc: OverlayFile, at: KeyPath
) -> tuple[Use, Extra]:
    """One action or variant: its operation compiled (its `response`, else the tool's), then its contract."""
    response_def = response_def_of(overlay, bdef.response, tdef.response)
    use = compile_use(ctx, bdef.operation, bdef.params, bdef.risk, response_def, bdef.pagination, doc, at)
    return adjust_use(ctx, use, tdef, bdef, doc, at)


# ============================================================================ actions


def _action_tool(ctx: Context, tdef: ToolDef, overlay: ToolOverlay, doc: OverlayFile, at: KeyPath) -> ToolSpec:
    assert tdef.actions is not None
    branches: list[_BranchUse] = []
    problems: list[Problem] = []
    extras: dict[str, Extra] = {}
    for name, adef in tdef.actions.items():
        where = (*at, "actions", name)
        try:
            use, extras[name] = _compile_branch(ctx, tdef, adef, overlay, doc, where)
        except InputError as e:
            problems.extend(e.problems)
            continue
        if any(a.name == ACTION_ARG for a in use.visible):
            problems.append(doc.problem(
                (*where, "params"), f"operation {use.op.id!r} has an argument called {ACTION_ARG!r}, which is "
                "the argument that picks the action", hint=f"rename it: params: {{{ACTION_ARG}: {{rename: "
                f"{name}_{ACTION_ARG}}}}}",
            ))
            continue
        branches.append(_BranchUse(name, f"action {name!r}", use, where,
                                   _branch_description(adef.description, use.op), list(adef.side_effects)))
    if problems:
        raise InputError(problems)
    live = [b for b in branches if b.use.risk != "forbidden"]
    properties, required_all, defs = _merge_arguments(live, doc, "collapsed")
    names = [b.key for b in live]
    action_schema: dict[str, Any] = {
        "type": "string", "enum": names,
        "description": "What to do: " + ", ".join(names) + " (see the tool description for each action's "
        "arguments).",
    }
    input_schema = flat_object_schema({ACTION_ARG: action_schema, **properties}, [ACTION_ARG, *required_all], defs)
    lines: list[str] = []
    specs: list[Branch] = []
    for b in branches:
        needs = _requirements(b, required_all, [])
        accepts = [ACTION_ARG, *(a.name for a in b.use.visible), *b.use.extra_inputs]
        specs.append(_branch_spec(b, requires=needs, accepts=accepts))
        if b.use.risk == "forbidden":
            continue
        line = f"- {b.key}: {b.description}"
        line += f" Requires {', '.join(needs)}." if needs else ""
        line += f" Risk: {b.use.risk}." if RISK_ORDER[b.use.risk] >= RISK_ORDER["high"] else ""
        line += f" {paging_sentence(b.use.pagination)}" if b.use.pagination else ""
        lines.append(line)
    intro = tdef.description or f"{len(live)} operations in one tool."
    description = intro.rstrip() + f"\nSet `{ACTION_ARG}` to one of:\n" + "\n".join(lines)
    if required_all:
        description += f"\nEvery action needs {', '.join(required_all)}."
    return finish_tool(_finish_multi(tdef, doc, at, branches, specs, input_schema, description, "action"), tdef,
                       extras, doc, at)


def _branch_spec(b: _BranchUse, *, requires: list[str], accepts: list[str], when: list[str] | None = None) -> Branch:
    use = b.use
    properties = use.input_schema()["properties"]
    return Branch(
        key=b.key,
        when=when or [],
        requires=requires,
        accepts=sorted(set(accepts)),
        defaults={k: p["default"] for k, p in properties.items() if isinstance(p, dict) and "default" in p},
        steps=[Step(id="call", operation=use.operation)],
        response=use.response,
        pagination=use.pagination,
        risk=use.risk,
        side_effects=b.side_effects,
        description=b.description,
    )


# ============================================================================ variants


def _variant_tool(ctx: Context, tdef: ToolDef, overlay: ToolOverlay, doc: OverlayFile, at: KeyPath) -> ToolSpec:
    assert tdef.variants is not None
    branches: list[_BranchUse] = []
    problems: list[Problem] = []
    fallbacks = [i for i, v in enumerate(tdef.variants) if not v.when]
    if len(fallbacks) != 1:
        problems.append(doc.problem(
            (*at, "variants"),
            "exactly one variant must have no `when` (the fallback, taken when no other matches); "
            f"this tool has {len(fallbacks)}",
            hint="give every variant but the last a `when: [argument, ...]` list",
        ))
    elif fallbacks[0] != len(tdef.variants) - 1:
        later = len(tdef.variants) - 1 - fallbacks[0]
        problems.append(doc.problem(
            (*at, "variants", fallbacks[0] + 1),
            f"variant {fallbacks[0] + 2} can never run: the fallback variant {fallbacks[0] + 1} (no `when`) comes "
            f"before it{' and ' + str(later - 1) + ' more' if later > 1 else ''}",
            hint="variants are tried in order; put the fallback last",
        ))
    seen_keys: set[str] = set()
    extras: dict[str, Extra] = {}
    for i, vdef in enumerate(tdef.variants):
        where = (*at, "variants", i)
        try:
            use, extra = _compile_branch(ctx, tdef, vdef, overlay, doc, where)
        except InputError as e:
            problems.extend(e.problems)
            continue
        key = vdef.name or use.op.id
        extras[key] = extra
        if key in seen_keys:
            problems.append(doc.problem((*where, "name"), f"two variants are called {key!r}",
                                        hint="give them distinct `name`s"))
        seen_keys.add(key)
        visible = {a.name for a in use.visible} | set(use.extra_inputs)
        for w in vdef.when:
            if w not in visible:
                hint = did_you_mean(w, visible)
                problems.append(doc.problem(
                    (*where, "when"),
                    f"`when` names {w!r}, which is not an argument of {use.op.id!r}" + (f"; {hint}" if hint else ""),
                    hint=f"its arguments: {', '.join(sorted(visible))}" if visible else None,
                ))
        branches.append(_BranchUse(key, f"variant {key!r}", use, where,
                                   _branch_description(vdef.description, use.op), list(vdef.side_effects)))
    for j, vj in enumerate(tdef.variants):
        for i in range(j):
            vi = tdef.variants[i]
            if vi.when and vj.when and set(vi.when) <= set(vj.when):
                given = ", ".join(vi.when)
                problems.append(doc.problem(
                    (*at, "variants", j, "when"),
                    f"variant {j + 1} (when: [{', '.join(vj.when)}]) can never run: variant {i + 1} "
                    f"(when: [{given}]) is taken whenever {given} {'is' if len(vi.when) == 1 else 'are'} given",
                    hint="variants are tried in order: put the more specific one first",
                ))
                break
    if problems:
        raise InputError(problems)
    live = [b for b in branches if b.use.risk != "forbidden"]
    properties, required_all, defs = _merge_arguments(live, doc, "presence-dispatched")
    # an argument that selects a variant cannot be required everywhere
    whens = {w for v in tdef.variants for w in v.when}
    required_all = [r for r in required_all if r not in whens]
    input_schema = flat_object_schema(properties, required_all, defs)
    lines: list[str] = []
    specs: list[Branch] = []
    for b, vdef in zip(branches, tdef.variants, strict=True):
        needs = _requirements(b, required_all, vdef.when)
        accepts = [*(a.name for a in b.use.visible), *b.use.extra_inputs]
        specs.append(_branch_spec(b, requires=needs, accepts=accepts, when=list(vdef.when)))
        if b.use.risk == "forbidden":
            continue
        cond = (" and ".join(vdef.when) + (" given" if len(vdef.when) == 1 else " all given")) if vdef.when \
            else "otherwise"
        line = f"- {cond}: {b.description}"
        line += f" Also requires {', '.join(needs)}." if needs else ""
        others = sorted(set(accepts) - set(vdef.when))
        line += f" Takes {', '.join(others)}." if others and len(lines) < 10 else ""
        line += f" {paging_sentence(b.use.pagination)}" if b.use.pagination else ""
        lines.append(line)
    intro = tdef.description or "Several operations in one tool."
    description = intro.rstrip() + "\nWhat runs depends on the arguments given (first match):\n" + "\n".join(lines)
    return finish_tool(_finish_multi(tdef, doc, at, branches, specs, input_schema, description, "presence"), tdef,
                       extras, doc, at)


# ============================================================================ chains (Arazzo-shaped)

_EXPR_ROOTS = re.compile(r"\$(inputs|steps)\b")
_OTHER_RUNTIME = re.compile(
    r"\$(response|request|statusCode|url|method|outputs|components|workflows|sourceDescriptions)\b"
)


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


_SCALARS = {"string", "integer", "number", "boolean"}
_SIMPLE_INPUT = re.compile(r"^inputs\.([A-Za-z_][A-Za-z0-9_]*)$")


def _kind(types: set[str]) -> set[str]:
    return {"scalar" if t in _SCALARS else t for t in types if t != "null"}


@dataclass
class _ChainStep:
    sdef: StepDef
    op: Operation
    use_output: dict[str, Any]  # what `$steps.<id>` holds, for type checks


class _Expr(NamedTuple):
    """An expression of a chain, checked once every step is known (against what it can see)."""

    expr: str  # JMESPath
    what: str  # for messages: "step 'customer' parameter 'customerId'"
    where: KeyPath
    step: int  # the index of the step it belongs to (len(steps) for `outputs`): it sees the steps before
    target: dict[str, Any] | None  # the schema its value must fit (None: anything)


@dataclass
class _ChainInputs:
    """What compiling a chain's steps collects: the tool's arguments and the expressions to check."""

    doc: OverlayFile
    declared: dict[str, Any] | None  # the overlay's `inputs`; None: derived from the `$inputs.x` used
    derived: dict[str, dict[str, Any]] = field(default_factory=dict)
    derived_required: set[str] = field(default_factory=set)
    exprs: list[_Expr] = field(default_factory=list)

    def input_schema(self) -> dict[str, Any]:
        if self.declared is not None:
            return self.declared
        return flat_object_schema(self.derived, [n for n in self.derived if n in self.derived_required], {})

    def feed(self, arg: Arg, value: Any, sdef: StepDef, index: int, what: str, where: KeyPath) -> str | None:
        """A step parameter or body property given `value`: the JMESPath of an expression, None for a literal.

        A literal must fit the argument's schema; an expression is kept for checking against the
        steps before it, and `$inputs.x` feeding it makes x a tool argument (without `inputs`).
        """
        if not is_expression(value):
            try:
                check_value(arg.schema, value, "value")
            except ValueError as e:
                raise InputError(self.doc.problem(where, str(e))) from None
            return None
        try:
            expr = to_jmespath(value)
            parse(expr)
        except ValueError as e:
            raise InputError(self.doc.problem(where, str(e))) from None
        except ProjectionError as e:
            raise InputError(self.doc.problem(where, f"{what}: {e}", hint=e.hint)) from None
        self._derive_input(expr, arg, sdef)
        self.exprs.append(_Expr(expr, what, where, index, arg.schema))
        return expr

    def _derive_input(self, expr: str, arg: Arg, sdef: StepDef) -> None:
        """Without declared `inputs`, `$inputs.x` feeding an argument makes x a tool argument of its schema."""
        if self.declared is not None:
            return
        m = _SIMPLE_INPUT.match(expr.strip())
        if m is None:
            for path in root_references(expr):
                if len(path) >= 2 and path[0] == "inputs":
                    self.derived.setdefault(path[1], {})
            return
        name = m.group(1)
        if not self.derived.get(name):
            self.derived[name] = copy.deepcopy(arg.schema)
        if arg.required and sdef.when is None:
            self.derived_required.add(name)


def _chain_tool(ctx: Context, tdef: ToolDef, overlay: ToolOverlay, doc: OverlayFile, at: KeyPath) -> ToolSpec:
    assert tdef.steps is not None
    problems: list[Problem] = []
    ids = [s.step_id for s in tdef.steps]
    for i, sid in enumerate(ids):
        if sid in ids[:i]:
            problems.append(doc.problem((*at, "steps", i, "stepId"), f"step id {sid!r} is used twice"))
    inputs = _ChainInputs(doc, _declared_inputs(tdef, doc, at, problems))
    chain: list[_ChainStep] = []
    steps: list[Step] = []
    for i, sdef in enumerate(tdef.steps):
        where = (*at, "steps", i)
        op = find_operation(ctx, sdef.operation_id)
        if op is None:
            problems.append(unknown_operation(ctx, sdef.operation_id, doc, (*where, "operationId")).problems[0])
            continue
        try:
            step = _chain_step(ctx, inputs, sdef, op, i, where)
        except InputError as e:
            problems.extend(e.problems)
            continue
        steps.append(step)
        chain.append(_ChainStep(sdef, op, _step_value_schema(ctx, op)))
    if problems:
        raise InputError(problems)

    input_schema = inputs.input_schema()
    output_expr, output_at = _outputs_expression(tdef, doc, at)
    # check every expression against the context it will see: inputs and the steps before it
    for check in inputs.exprs:
        _check_expression(check, chain, input_schema, doc, problems)
    if output_expr is not None:
        _check_expression(_Expr(output_expr, "`outputs`", output_at, len(chain), None), chain, input_schema, doc,
                          problems)
    if problems:
        raise InputError(problems)

    response = response_spec(response_def_of(overlay, tdef.response))
    raw: dict[str, Any] | None
    if output_expr is not None:
        raw = _project(output_expr, _context_schema(chain, len(chain), input_schema), "`outputs`", doc, output_at,
                       context=True)
    else:
        last = chain[-1]
        if last.sdef.when:
            raise InputError(doc.problem(
                (*at, "outputs"), "the last step is conditional (`when`): say what the tool returns with `outputs`"))
        raw = last.use_output if output_kind(ctx, last.op) != "other" else None
    if response.select and raw is not None:
        raw = _project(response.select, raw, "`select`", doc, (*at, "response", "select"))
    output_schema, wrap = wrap_output(limit_depth(raw, OUTPUT_DEPTH_TOOL + 1)) if raw else (None, None)
    output_schema = output_contract(ctx, output_schema, response)
    units = dict(tdef.units)
    output_schema = apply_units(input_schema, output_schema, units, doc, (*at, "units"))
    methods = [(c.op.method, DEFAULT_RISK.get(c.op.method, "medium")) for c in chain]
    risk: Risk = tdef.risk or _highest([r for _, r in methods])
    annotations = tool_annotations([(m, risk) for m, _ in methods], tdef.title, annotation_overrides(tdef))
    flow = " -> ".join(f"{c.sdef.step_id} ({c.op.id})" for c in chain)
    description = (tdef.description or op_description(chain[0].op, limit=None)).rstrip()
    description += f"\nRuns {len(chain)} calls: {flow}; if one fails, the error's `step` names it."
    description += units_line(units, [])
    branch = Branch(key="default", steps=steps, output=output_expr, risk=risk,
                    side_effects=list(tdef.side_effects))
    return finish_tool(ToolSpec(
        name=tdef.name,
        title=tdef.title or op_title(chain[0].op),
        description=description.strip(),
        input_schema=input_schema,
        output_schema=output_schema,
        annotations=annotations,
        dispatch="single",
        branches=[branch],
        response=response.model_copy(update={"wrap": wrap, "units": units}),
        failure_modes=failure_modes(tdef),
        risk=risk,
        category=tdef.category,
        permissions=list(tdef.permissions),
        side_effects=list(tdef.side_effects),
        audit_event=tdef.audit_event,
        sensitive=sorted(n for n in input_schema.get("properties", {}) if SENSITIVE_NAME.search(n)),
    ), tdef, {}, doc, at)


def _declared_inputs(tdef: ToolDef, doc: OverlayFile, at: KeyPath, problems: list[Problem]) -> dict[str, Any] | None:
    if tdef.inputs is None:
        return None
    schema = copy.deepcopy(tdef.inputs)
    where = (*at, "inputs")
    if schema.get("type", "object") != "object" or not isinstance(schema.get("properties", {}), dict):
        problems.append(doc.problem(where, "`inputs` must be a JSON Schema of `type: object` with `properties`"))
        return None
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


def _chain_step(ctx: Context, inputs: _ChainInputs, sdef: StepDef, op: Operation, index: int, where: KeyPath) -> Step:
    doc = inputs.doc
    problems: list[Problem] = []
    args = operation_args(ctx, op)
    params_by_wire = {(a.location, a.wire): a for a in args if a.location not in ("body", "body*")}
    body_args = [a for a in args if a.location in ("body", "body*")]
    given: dict[str, Any] = {}
    params: list[ParamSpec] = []
    for j, pdef in enumerate(sdef.parameters):
        pwhere = (*where, "parameters", j)
        matches = [a for (loc, wire), a in params_by_wire.items()
                   if wire == pdef.name and (pdef.in_ is None or loc == pdef.in_)]
        if not matches:
            names = sorted({w for _, w in params_by_wire})
            hint = did_you_mean(pdef.name, names)
            body_hint = " (body properties go into requestBody.payload)" if any(
                a.wire == pdef.name for a in body_args) else ""
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
            expr = inputs.feed(arg, pdef.value, sdef, index, f"step {sdef.step_id!r} parameter {pdef.name!r}",
                               (*pwhere, "value"))
        except InputError as e:
            problems.extend(e.problems)
            continue
        fed = {"fixed": True, "value": pdef.value} if expr is None else {"expr": expr}
        params.append(arg.param.model_copy(update={**fed, "required": arg.required}))
    for a in args:
        if a.location not in ("body", "body*") and a.required and a.wire not in given:
            problems.append(doc.problem(
                (*where, "parameters"),
                f"step {sdef.step_id!r}: {op.id!r} needs parameter {a.wire!r} ({a.location})",
                hint=f"add {{name: {a.wire}, value: $inputs.{a.name}}} or a value from an earlier step",
            ))
    body = _chain_body(ctx, inputs, sdef, op, index, where, body_args, problems)
    when = None
    if sdef.when is not None:
        try:
            when = to_jmespath(sdef.when)
        except ValueError as e:
            problems.append(doc.problem((*where, "when"), str(e)))
        else:
            inputs.exprs.append(_Expr(when, f"step {sdef.step_id!r} `when`", (*where, "when"), index, None))
    if problems:
        raise InputError(problems)
    operation = OperationSpec(id=op.id, method=op.method, path=op.path, params=params, body=body,
                              success=success_statuses(op), accept=accept_header(op))
    return Step(id=sdef.step_id, operation=operation, when=when)


def _chain_body(
    ctx: Context,
    inputs: _ChainInputs,
    sdef: StepDef,
    op: Operation,
    index: int,
    where: KeyPath,
    body_args: list[Arg],
    problems: list[Problem],
) -> BodySpec | None:
    doc = inputs.doc
    request = request_body(ctx, op)
    rdef = sdef.request_body
    if rdef is None:
        if request is not None and request.required:
            problems.append(doc.problem(where, f"step {sdef.step_id!r}: {op.id!r} needs a request body; add "
                                        "requestBody: {payload: ...}"))
        return None
    bwhere = (*where, "requestBody")
    if request is None:
        problems.append(doc.problem(bwhere, f"operation {op.id!r} takes no request body"))
        return None
    media = rdef.content_type or request.media
    payload = rdef.payload
    if isinstance(payload, dict) and not is_expression(payload):
        props = {a.wire: a for a in body_args if a.location == "body"}
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
                expr = inputs.feed(arg, value, sdef, index, f"step {sdef.step_id!r} body property {key!r}", pwhere)
            except InputError as e:
                problems.extend(e.problems)
                continue
            if expr is None:
                fixed[key] = value
            else:
                computed[key] = expr
        missing = [a.wire for a in props.values() if a.required and a.wire not in payload]
        if missing:
            problems.append(doc.problem((*bwhere, "payload"), f"step {sdef.step_id!r}: the body needs "
                                        f"{', '.join(missing)}"))
        return BodySpec(media_type=media, required=request.required, fixed=fixed, exprs=computed)
    if is_expression(payload):
        try:
            expr = to_jmespath(payload)
        except ValueError as e:
            problems.append(doc.problem((*bwhere, "payload"), str(e)))
            return None
        inputs.exprs.append(_Expr(expr, f"step {sdef.step_id!r} requestBody", (*bwhere, "payload"), index, None))
        return BodySpec(media_type=media, required=request.required, expr=expr)
    return BodySpec(media_type=media, required=True, value=payload)


def _step_value_schema(ctx: Context, op: Operation) -> dict[str, Any]:
    """What `$steps.<id>` holds: the response body (its schema), or {status} when there is none."""
    kind = output_kind(ctx, op)
    if kind == "empty":
        return _EMPTY_RESULT
    if kind == "json":
        return response_base(ctx, op) or {}
    return {}


def _context_schema(chain: list[_ChainStep], upto: int, inputs: dict[str, Any]) -> dict[str, Any]:
    defs: dict[str, Any] = dict(inputs.get("$defs", {}))
    steps: dict[str, Any] = {}
    required: list[str] = []
    for c in chain[:upto]:
        schema = c.use_output
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


def _check_expression(
    check: _Expr, chain: list[_ChainStep], inputs: dict[str, Any], doc: OverlayFile, problems: list[Problem]
) -> None:
    """Step references must exist and come earlier; fields must exist; types must fit the target."""
    expr, what, where, index, target = check
    ids = [c.sdef.step_id for c in chain]
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
    context = _context_schema(chain, index, inputs)
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


def _outputs_expression(tdef: ToolDef, doc: OverlayFile, at: KeyPath) -> tuple[str | None, KeyPath]:
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
