"""Pagination: one paging contract for the model, whatever the API's own style.

A list operation with `pagination` loses its paging parameters (page, offset, cursor, page size:
the server sets them) and gains `limit` and `cursor`; its result becomes
`{items, next_cursor, has_more[, total]}`. The PaginationSpec tells the runtime how the API pages
(page, offset, body_cursor, header_cursor, link, next_url) and where the values go (a parameter, or
a field of a POST's JSON body); docs/task-tools.md has the styles.
"""

from __future__ import annotations

import json
from typing import Any

from openapi2mcp.compiler import bodypath
from openapi2mcp.compiler.arguments import body_field_arg, operation_spec, request_body
from openapi2mcp.compiler.bodypath import PathError
from openapi2mcp.compiler.model import Arg, Context, Use
from openapi2mcp.compiler.responses import OUTPUT_DEPTH_TOOL, project, response_base
from openapi2mcp.compiler.schemas import limit_depth, schema_types
from openapi2mcp.errors import InputError, Problem, did_you_mean
from openapi2mcp.manifest import CURSOR_MAX_LENGTH, BodySpec, PaginationSpec, ParamSpec, ResponseSpec
from openapi2mcp.overlay import KeyPath, OverlayFile, PaginationDef

LIMIT_ARG = "limit"
CURSOR_ARG = "cursor"

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
    items_schema = project(items_expr, base, "`pagination.items`", doc, (*at, "items"))
    if schema_types(items_schema) - {"array"}:
        raise InputError(doc.problem((*at, "items"), f"`pagination.items` ({items_expr!r}) is not a list"))
    item = items_schema.get("items") if isinstance(items_schema.get("items"), dict) else {}
    assert isinstance(item, dict)
    if base.get("$defs") and "$defs" not in item:
        item = {**item, "$defs": base["$defs"]}
    total_schema = project(pdef.total, base, "`pagination.total`", doc, (*at, "total")) if pdef.total else None
    next_expr = None
    if pdef.style == "body_cursor" or (pdef.style == "next_url" and pdef.next is not None):
        next_expr = pdef.next or "next_cursor"
        project(next_expr, base, "`pagination.next`", doc, (*at, "next"))
    select = response_def.select
    item_out = project(select, item, "`select`", doc, (*use_at, "response", "select")) if select else item
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
