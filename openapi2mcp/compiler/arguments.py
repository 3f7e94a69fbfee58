"""An operation's arguments: what the model gives, and the call plan that sends it.

* operation_args: every argument 1:1 — path, query, header and cookie parameters (not the ones
  the upstream auth supplies, nor Accept/Content-Type/Authorization) and the request body's
  top-level properties (a body that is not an object is one argument, `body`).
* apply_param_defs: the overlay's `params` rename, narrow, document, default, fix or hide them;
  `body.a.b` keys make nested body fields arguments (bodypath.py); `null_means: clear` lets the
  model's null through as JSON null where the spec takes it.
* operation_spec: the call plan the runtime follows (ParamSpec, BodySpec) for those arguments.
* sensitive_names: the one rule for which arguments are secrets (redacted in logs and audit).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from openapi2mcp.compiler import bodypath
from openapi2mcp.compiler.bodypath import PathError
from openapi2mcp.compiler.media import is_bytes, is_json, pick_media, sends_bytes
from openapi2mcp.compiler.model import Arg, Context, Operation, ParamArg, RequestBody
from openapi2mcp.compiler.responses import accept_header, success_statuses
from openapi2mcp.compiler.schemas import SchemaError, has_ref, ref_free_text, schema_types, trim
from openapi2mcp.errors import InputError, Problem, did_you_mean
from openapi2mcp.manifest import BodyField, BodySpec, OperationSpec, ParamSpec
from openapi2mcp.overlay import KeyPath, OverlayFile, ParamDef

# Header parameters OpenAPI says to ignore: the HTTP layer sets them.
_IGNORED_HEADERS = frozenset({"accept", "content-type", "authorization"})
_ARG_NAME = re.compile(r"[^A-Za-z0-9_.-]+")
# Argument names that hold secrets: their values are redacted in logs and audit lines.
_SENSITIVE_NAME = re.compile(r"pass(word)?|secret|token|api[-_]?key|credential", re.I)
_FORMS = ("application/x-www-form-urlencoded", "multipart/form-data")


# ============================================================================ an operation's arguments, 1:1


def operation_args(ctx: Context, op: Operation) -> list[Arg]:
    """Every argument an operation takes, as the model would see it 1:1."""
    args: list[Arg] = []
    for p, at in op.params:
        loc, wire = p["in"], p["name"]
        if loc == "header" and wire.lower() in _IGNORED_HEADERS:
            continue
        if (loc, wire.lower()) in ctx.auth_params:
            continue  # the upstream auth supplies it
        made = _param_arg(ctx, p, at)
        args.append(Arg(name=made.name, wire=wire, location=loc, schema=made.schema, required=made.required,
                        param=made.spec, sensitive=made.sensitive))
    args.extend(_body_args(ctx, op, {a.name for a in args}))
    return _dedupe_names(args)


def _param_arg(ctx: Context, p: dict[str, Any], at: str) -> ParamArg:
    """A parameter object as an argument: the same wherever it is used (a component, a path's parameter),
    and for every object of the same text when it refers to nothing, so it is made once (Microsoft Graph:
    48,000 parameters, 27,000 objects, fewer texts); when converting it warned, each use warns at its own
    place, as before."""
    key = ref_free_text(p) or id(p)
    made = ctx.param_args.get(key)
    if made is not None and (made.param is p or isinstance(key, str)):
        return made
    warned = len(ctx.warnings)
    loc, wire = p["in"], p["name"]
    schema, content_type = _param_schema(ctx, p, at)
    style = p.get("style") or ("form" if loc in ("query", "cookie") else "simple")
    explode = p.get("explode", style == "form")
    desc = p.get("description")
    if isinstance(desc, str) and desc.strip() and "description" not in schema:
        schema = {**schema, "description": trim(desc, 600)}
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
    made = ParamArg(p, _arg_name(wire), schema, required, spec, is_sensitive(wire, schema))
    if len(ctx.warnings) == warned:
        ctx.param_args[key] = made
    return made


def _needs_an_item(schema: dict[str, Any], required: bool) -> dict[str, Any]:
    """A required array parameter needs an item: an empty list is not sent at all (RFC 6570), and
    the model should know that from the schema rather than from an error."""
    if required and schema_types(schema) == {"array"} and not schema.get("minItems"):
        return {**schema, "minItems": 1}
    return schema


def _param_schema(ctx: Context, p: dict[str, Any], at: str) -> tuple[dict[str, Any], str | None]:
    if "schema" in p:
        return ctx.convert(p["schema"], "input", at + "/schema"), None
    content = p.get("content")
    if isinstance(content, dict) and content:
        media, mt = next(iter(content.items()))
        schema = mt.get("schema") if isinstance(mt, dict) else None
        return ctx.convert(schema or {}, "input", at + "/content"), str(media)
    return {"type": "string"}, None


def is_sensitive(name: str, schema: dict[str, Any]) -> bool:
    """An argument holds a secret: its schema says so (format password, writeOnly) or its name does."""
    return schema.get("format") == "password" or schema.get("writeOnly") is True or bool(_SENSITIVE_NAME.search(name))


def sensitive_names(args: Iterable[Arg]) -> list[str]:
    """The arguments of a tool whose values are redacted in logs and audit lines: the sensitive ones
    the model gives (a fixed or hidden argument is never in the arguments)."""
    return sorted({a.name for a in args if a.sensitive and a.shown})


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


# ============================================================================ request bodies


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
    media = pick_media(list(content))
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
    schema = ctx.convert(body.schema, "input", op.pointer + "/requestBody")
    props = _object_properties(schema)
    form = media in _FORMS
    if props is None or not props[0]:
        if form and props is not None:
            return []  # an empty form
        if body.description and "description" not in schema:
            schema = {**schema, "description": trim(body.description, 600)}
        if sends_bytes(media, schema):  # a model cannot send raw bytes: it sends base64, the server decodes
            said, base = str(schema.get("description", "")).strip(), media.split(";")[0].strip()
            said += "." if said and not said.endswith((".", "!", "?")) else ""
            schema = {"type": "string", "contentEncoding": "base64", "contentMediaType": base,
                      "description": f"{said} The content ({base}), base64-encoded.".strip()}
            return [Arg(name="body", wire=media, location="body*", schema=schema, required=required, binary=True)]
        return [Arg(name="body", wire=media, location="body*", schema=schema, required=required)]
    properties, required_props, defs = props
    args = []
    for name, sub in properties.items():
        arg_name = _arg_name(name)
        if arg_name in taken:
            arg_name = _arg_name("body_" + name)
        binary = media == "multipart/form-data" and is_bytes(sub)
        if binary:
            sub = {"type": "string", "contentEncoding": "base64",
                   "description": (sub.get("description", "") + " File content, base64-encoded.").strip()}
        if defs and has_ref(sub):
            sub = {**sub, "$defs": defs}
        args.append(Arg(name=arg_name, wire=name, location="body", schema=sub,
                        required=required and name in required_props, binary=binary,
                        sensitive=is_sensitive(name, sub)))
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


# ============================================================================ the overlay's `params`


def apply_param_defs(
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
        if not a.shown:
            continue
        if a.name in names:
            raise InputError(doc.problem(
                (*at, "params"), f"two arguments would be called {a.name!r} ({names[a.name].wire} and {a.wire})",
                hint="rename one of them with `rename`",
            ))
        names[a.name] = a
    return args


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
    if not arg.shown:
        raise ValueError("`null_means: clear` is for an argument the model gives; this one is fixed or hidden")
    if arg.location != "body":
        where = "the whole request body" if arg.location == "body*" else f"a {arg.location} parameter"
        raise ValueError(f"`null_means: clear` needs a property of a JSON request body; {arg.wire!r} is {where}, "
                         "where null cannot be sent (leave null meaning not given)")
    rbody = request_body(ctx, op)
    if rbody is None or not is_json(rbody.media):
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
        import jsonschema  # overlay features only: not loaded to compile a spec as it is

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
    """A value the overlay gives (fixed, enum, default) fits the argument's schema, else ValueError."""
    if has_ref(schema):
        return  # recursive parts need the root's $defs; the runtime validates these anyway
    import jsonschema

    errors = sorted(jsonschema.Draft202012Validator(schema).iter_errors(value), key=lambda e: e.path)
    if errors:
        raise ValueError(f"{what} {value!r} does not fit the parameter's schema: {errors[0].message}")


# ============================================================================ nested body fields


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
    if not is_json(rbody.media):
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
    schema = ctx.convert(rbody.schema, "input", op.pointer + "/requestBody")
    found = bodypath.resolve(schema, path, required=rbody.required)
    arg = Arg(name=_arg_name(bodypath.default_name(path)), wire=bodypath.show(path), location="body",
              schema=found.schema, required=found.required, path=path,
              sensitive=is_sensitive(path[-1], found.schema))
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


# ============================================================================ the call plan


def operation_spec(ctx: Context, op: Operation, args: list[Arg]) -> OperationSpec:
    """The call plan of one operation with these arguments: what goes where, fixed values included."""
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
            params.append(_fed_param(ctx, a.param, a.name, required))
    whole = next((a for a in args if a.location == "body*"), None)
    rbody = request_body(ctx, op)
    fields = _body_fields(args)
    nulls = [a.name for a in args if a.send_null and not a.hidden]  # null_means: clear
    if whole is not None:
        if whole.fixed:
            body = BodySpec(media_type=whole.wire, required=True, value=whole.value, fields=fields, nulls=nulls)
        elif not whole.hidden:
            body = BodySpec(media_type=whole.wire, required=whole.required, arg=whole.name, fields=fields,
                            nulls=nulls, base64=whole.binary)
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


def _fed_param(ctx: Context, param: ParamSpec, arg: str, required: bool) -> ParamSpec:
    """`param` fed by the argument `arg`: one (frozen) copy per parameter, name and `required`, which the
    operations sharing a parameter object share (arguments._param_arg)."""
    key = (id(param), arg, required)
    made = ctx.fed_params.get(key)
    if made is None or made[0] is not param:
        made = ctx.fed_params[key] = (param, param.model_copy(update={"arg": arg, "required": required}))
    return made[1]


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
