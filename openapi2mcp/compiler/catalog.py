"""The overlay's resources, prompts and tool result links -> Manifest entries.

Seed 001 separates what a server offers by who controls it: tools (the model calls them),
resources (the application decides what to load), prompts (templates the user picks). The
overlay names all three; this module compiles the second and third, and the `links` that tie
tool results to resources (seed 000's `evidencePaths` become `resource_link` content).

    compile_catalog(ctx, overlay, doc, tools) -> (tools with links, resources, prompts)

Checked here, every problem with file, line and a suggestion:

* a resource's operation exists and is a GET (reading must be safe; anything else is a tool),
  and the resource can honour the policy of every tool on that operation (manifest.resource_policy:
  no forbidden tool, no confirmation or required dry run, the same fixed values, no URI variable
  for a parameter a tool fixes or never sends); it gets their scopes and fixed values;
* its URI is a fixed URI or a template of `{var}` / `{+var}` (manifest.UriTemplate); every variable is
  a parameter of the operation, and every required parameter is a variable or has a fixed value;
* `response.select` fits the response schema (projection.py), and its result fits `mime_type`;
* a prompt's templates use only its declared arguments, and an embedded resource URI matches a
  declared resource;
* a tool's `links.from` fits the tool's output schema and gives what the template needs.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from openapi2mcp.compiler.arguments import check_value, operation_args, operation_spec
from openapi2mcp.compiler.media import is_json
from openapi2mcp.compiler.model import Arg, Context, Operation
from openapi2mcp.compiler.operations import require_operation
from openapi2mcp.compiler.projection import ProjectionError, project_schema
from openapi2mcp.compiler.responses import output_kind, response_base, success_response
from openapi2mcp.compiler.schemas import schema_types
from openapi2mcp.errors import InputError, Problem, did_you_mean
from openapi2mcp.manifest import (
    LinkSpec,
    PromptArgumentSpec,
    PromptMessageSpec,
    PromptSpec,
    ResourceSpec,
    ResponseSpec,
    TemplateError,
    ToolSpec,
    UriTemplate,
    placeholders,
    resource_policy,
)
from openapi2mcp.overlay import KeyPath, OverlayFile, PromptDef, ResourceDef, ToolOverlay

RESOURCE_MAX_BYTES = 1_000_000  # default cap on a resource's text (tools default to 64,000)
_TEXT_TYPES = ("application/xml", "application/yaml", "application/x-yaml", "application/javascript")


def compile_catalog(
    ctx: Context, overlay: ToolOverlay | None, doc: OverlayFile | None, tools: Sequence[ToolSpec]
) -> tuple[list[ToolSpec], list[ResourceSpec], list[PromptSpec]]:
    """Resources, prompts and tool links of the overlay; raises InputError listing every problem."""
    if overlay is None or doc is None:
        return list(tools), [], []
    problems: list[Problem] = []
    resources: list[ResourceSpec] = []
    templates: list[UriTemplate | None] = []
    for i, rdef in enumerate(overlay.resources):
        try:
            spec, template = _resource(ctx, rdef, overlay, tools, doc, ("resources", i))
        except InputError as e:
            problems.extend(e.problems)
            templates.append(None)
            continue
        resources.append(spec)
        templates.append(template)
    problems += _unique(doc, "resources", [r.name for r in overlay.resources], "resource name")
    problems += _unique(doc, "resources", [r.uri for r in overlay.resources], "resource URI", key="uri")
    by_name = {r.name: (r, t) for r, t in zip(overlay.resources, templates, strict=True) if t is not None}

    prompts: list[PromptSpec] = []
    for i, pdef in enumerate(overlay.prompts):
        try:
            prompts.append(_prompt(pdef, by_name, doc, ("prompts", i)))
        except InputError as e:
            problems.extend(e.problems)
    problems += _unique(doc, "prompts", [p.name for p in overlay.prompts], "prompt name")

    linked = list(tools)
    for i, tdef in enumerate(overlay.tools):
        if not tdef.links:
            continue
        index = next((n for n, t in enumerate(linked) if t.name == tdef.name), None)
        if index is None:
            continue
        try:
            links = [_link(link.source, link.resource, link.max, linked[index], by_name, doc,
                           ("tools", i, "links", j)) for j, link in enumerate(tdef.links)]
        except InputError as e:
            problems.extend(e.problems)
            continue
        linked[index] = linked[index].model_copy(update={"links": links})
    if problems:
        raise InputError(problems, title=f"{doc.path}: the overlay's resources, prompts or links do not fit")
    return linked, resources, prompts


def _unique(doc: OverlayFile, section: str, values: list[str], what: str, key: str = "name") -> list[Problem]:
    seen: set[str] = set()
    out = []
    for i, value in enumerate(values):
        if value in seen:
            out.append(doc.problem((section, i, key), f"{what} {value!r} is used twice",
                                   hint=f"{what}s must be unique"))
        seen.add(value)
    return out


# ============================================================================ resources


def _resource(
    ctx: Context, rdef: ResourceDef, overlay: ToolOverlay, tools: Sequence[ToolSpec], doc: OverlayFile, at: KeyPath
) -> tuple[ResourceSpec, UriTemplate]:
    try:
        template = UriTemplate.parse(rdef.uri)
    except TemplateError as e:
        raise InputError(doc.problem((*at, "uri"), f"invalid resource URI {rdef.uri!r}: {e}",
                                     hint="e.g. notes://{+path} (a path) or pets://{petId} (one segment)")) from None
    op = require_operation(ctx, rdef.operation, doc, (*at, "operation"))
    if op.method != "GET":
        raise InputError(doc.problem(
            (*at, "operation"),
            f"resource {rdef.name!r} uses {op.id!r} ({op.method} {op.path}): reading a resource must be "
            "safe, so its operation must be a GET",
            hint="expose an operation that changes data as a tool, where risk and confirmation apply",
        ))
    args = operation_args(ctx, op)
    variables = _bind_variables(op.id, args, template, rdef, doc, at)
    spec_response = _resource_response(ctx, op, rdef, doc, at)
    operation = operation_spec(ctx, op, args)
    meta: dict[str, Any] = {"openapi2mcp/operation": op.id}
    spec = ResourceSpec(
        permissions=list(rdef.permissions or []),
        name=rdef.name,
        uri=rdef.uri,
        title=rdef.title,
        description=(rdef.description or "").strip() or None,
        mime_type=spec_response[1],
        operation=operation,
        variables=variables,
        response=spec_response[0],
        meta=meta,
    )
    # a resource is no back door around a tool on the same operation: it inherits their policy
    policy = resource_policy(spec, tools)
    if policy.problems:
        raise InputError([doc.problem(
            (*at, "operation"), f"resource {rdef.name!r} reads {op.id!r}, {problem}",
            hint="a resource is read without the model or the user, so it must honour every restriction of the "
            "tools on its operation; change the tool or the resource, or leave the resource out",
        ) for problem in policy.problems])
    return spec.model_copy(update={"permissions": list(policy.scopes), "operation": policy.operation(operation)}), \
        template


def _bind_variables(
    op_id: str, args: list[Arg], template: UriTemplate, rdef: ResourceDef, doc: OverlayFile, at: KeyPath
) -> dict[str, dict[str, Any]]:
    """URI variables and fixed `params` -> the operation's arguments; the rest is hidden."""
    params = [a for a in args if a.location not in ("body", "body*")]
    by_key: dict[str, Arg] = {}
    for a in params:
        by_key.setdefault(a.wire, a)
        by_key.setdefault(a.name, a)
    problems: list[Problem] = []
    variables: dict[str, dict[str, Any]] = {}
    used: set[int] = set()
    for name in template.names:
        arg = by_key.get(name)
        if arg is None:
            hint = did_you_mean(name, sorted(by_key))
            problems.append(doc.problem(
                (*at, "uri"),
                f"URI variable {{{name}}} is not a parameter of {op_id!r}" + (f"; {hint}" if hint else ""),
                hint=f"its parameters are: {', '.join(a.wire for a in params)}" if params else "it takes no parameters",
            ))
            continue
        arg.name = name  # the call plan reads the value under the variable's name
        variables[name] = arg.schema
        used.add(id(arg))
    for key, value in rdef.params.items():
        where = (*at, "params", key)
        arg = by_key.get(key)
        if arg is None:
            hint = did_you_mean(key, sorted(by_key))
            problems.append(doc.problem(where, f"{op_id!r} has no parameter {key!r}" + (f"; {hint}" if hint else "")))
            continue
        if id(arg) in used:
            problems.append(doc.problem(where, f"{key!r} is already given by the URI variable; remove one of them"))
            continue
        try:
            check_value(arg.schema, value, "value")
        except ValueError as e:
            problems.append(doc.problem(where, str(e)))
            continue
        arg.fixed, arg.value = True, value
        used.add(id(arg))
    for a in args:
        if id(a) in used:
            continue
        if a.required:
            if a.location in ("body", "body*"):
                problems.append(doc.problem((*at, "operation"), f"{op_id!r} needs a request body; a resource "
                                            "is read with the URI alone"))
            else:
                problems.append(doc.problem(
                    (*at, "uri"),
                    f"{op_id!r} requires the {a.location} parameter {a.wire!r}: put it in the URI as "
                    f"{{{a.wire}}} or give it a fixed value under `params`",
                ))
            continue
        a.hidden = True  # optional and not given: never sent (the upstream's default applies)
    if problems:
        raise InputError(problems)
    return variables


def _resource_response(
    ctx: Context, op: Operation, rdef: ResourceDef, doc: OverlayFile, at: KeyPath
) -> tuple[ResponseSpec, str | None]:
    """The response plan and the MIME type the resource declares (None: the upstream's)."""
    select = rdef.response.select if rdef.response else None
    max_bytes = (rdef.response.max_bytes if rdef.response and rdef.response.max_bytes else RESOURCE_MAX_BYTES)
    mime = rdef.mime_type
    if select is None:
        if mime is None:
            mime = "application/json" if output_kind(ctx, op) == "json" else _documented_media(ctx, op)
        return ResponseSpec(max_bytes=max_bytes), mime
    where = (*at, "response", "select")
    base = response_base(ctx, op)
    if base is None:
        raise InputError(doc.problem(
            where, f"`select` needs a JSON response, but {op.id!r} documents none",
            hint="remove `select`: the response body becomes the resource's content as it is",
        ))
    try:
        projected = project_schema(select, base)
    except ProjectionError as e:
        raise InputError(doc.problem(where, str(e), hint=e.hint)) from None
    kinds = schema_types(projected or {})
    if mime is None:
        mime = "text/plain" if kinds == {"string"} else "application/json"
    elif not is_json(mime) and kinds and kinds != {"string"}:
        raise InputError(doc.problem(
            where,
            f"`select` gives {'/'.join(sorted(kinds))} but mime_type {mime!r} is text: select a string field, "
            "or use mime_type application/json",
        ))
    return ResponseSpec(select=select, max_bytes=max_bytes), mime


def _documented_media(ctx: Context, op: Operation) -> str | None:
    resp = success_response(ctx, op)
    content = resp.get("content") if resp else None
    if isinstance(content, dict) and len(content) == 1:
        media = str(next(iter(content)))
        return None if "*" in media else media
    return None


# ============================================================================ prompts


def _check_template(text: str, declared: list[str], doc: OverlayFile, where: KeyPath) -> list[Problem]:
    problems = []
    for name in placeholders(text):
        if name in declared:
            continue
        hint = did_you_mean(name, declared)
        problems.append(doc.problem(
            where, f"{{{name}}} is not an argument of this prompt" + (f"; {hint}" if hint else ""),
            hint=(f"declared arguments: {', '.join(declared)}" if declared else "declare it under `arguments`")
            + "; write {{ and }} for literal braces",
        ))
    return problems


def _prompt(
    pdef: PromptDef, resources: dict[str, tuple[ResourceDef, UriTemplate]], doc: OverlayFile, at: KeyPath
) -> PromptSpec:
    declared = [a.name for a in pdef.arguments]
    problems: list[Problem] = []
    seen: set[str] = set()
    for j, a in enumerate(pdef.arguments):
        if a.name in seen:
            problems.append(doc.problem((*at, "arguments", j, "name"), f"argument {a.name!r} is declared twice"))
        seen.add(a.name)
    messages: list[PromptMessageSpec] = []
    for j, mdef in enumerate(pdef.messages):
        where = (*at, "messages", j)
        if mdef.text is not None:
            problems += _check_template(mdef.text, declared, doc, (*where, "text"))
        target: str | None = None
        bound: dict[str, str] = {}
        if mdef.resource is not None:
            found = _check_template(mdef.resource, declared, doc, (*where, "resource"))
            problems += found
            if not found:
                try:
                    target, bound = _match_resource(mdef.resource, resources)
                except ValueError as e:
                    problems.append(doc.problem((*where, "resource"), str(e)))
        messages.append(PromptMessageSpec(role=mdef.role, text=mdef.text, resource=target, resource_args=bound,
                                          embed=mdef.embed))
    if problems:
        raise InputError(problems)
    return PromptSpec(
        name=pdef.name,
        title=pdef.title,
        description=(pdef.description or "").strip() or None,
        arguments=[PromptArgumentSpec(name=a.name, title=a.title, description=a.description, required=a.required)
                   for a in pdef.arguments],
        messages=messages,
        permissions=list(pdef.permissions),
    )


def _match_resource(uri: str, resources: dict[str, tuple[ResourceDef, UriTemplate]]) -> tuple[str, dict[str, str]]:
    """Which declared resource a prompt's URI (with `{arg}` placeholders) reads, and each variable's template."""
    hits: list[tuple[str, dict[str, str]]] = []
    for name, (_rdef, template) in resources.items():
        if not template.is_template:
            if uri == template.text:
                hits.append((name, {}))
            continue
        bound = template.match_raw(uri)
        if bound is not None:
            hits.append((name, bound))
    if len(hits) > 1:
        raise ValueError(f"{uri!r} matches several resources ({', '.join(n for n, _ in hits)}); make the URIs distinct")
    if not hits:
        known = [t.text for _r, t in resources.values()]
        hint = did_you_mean(uri, known)
        raise ValueError(
            f"{uri!r} matches no declared resource" + (f"; {hint}" if hint else "")
            + (f" (resources: {', '.join(known)})" if known and not hint else "")
        )
    return hits[0]


# ============================================================================ links from tool results


def _link(
    source: str, resource: str, limit: int, tool: ToolSpec, resources: dict[str, tuple[ResourceDef, UriTemplate]],
    doc: OverlayFile, at: KeyPath,
) -> LinkSpec:
    if resource not in resources:
        hint = did_you_mean(resource, list(resources))
        raise InputError(doc.problem(
            (*at, "resource"), f"no resource named {resource!r}" + (f"; {hint}" if hint else ""),
            hint=f"resources: {', '.join(resources)}" if resources else "declare it under `resources`",
        ))
    template = resources[resource][1]
    if not template.is_template:
        raise InputError(doc.problem(
            (*at, "resource"), f"resource {resource!r} has a fixed URI; links fill a resource template's variables",
        ))
    try:
        projected = project_schema(source, tool.output_schema)
    except ProjectionError as e:
        raise InputError(doc.problem((*at, "from"), f"{e} (over the result of {tool.name})", hint=e.hint)) from None
    if projected is not None:
        problem = _link_shape(projected, template.names)
        if problem:
            raise InputError(doc.problem((*at, "from"), f"`from` {source!r} gives {problem}"))
    return LinkSpec(source=source, resource=resource, max=limit)


def _link_shape(schema: dict[str, Any], names: list[str]) -> str | None:
    """Why values of this schema cannot fill the template's variables (None: they can, or may)."""
    kinds = schema_types(schema)
    item = schema
    if kinds == {"array"}:
        items = schema.get("items")
        item = items if isinstance(items, dict) else {}
        kinds = schema_types(item)
    if not kinds:
        return None
    if len(names) == 1 and kinds <= {"string", "integer", "number"}:
        return None
    if kinds == {"object"}:
        props = item.get("properties")
        if not isinstance(props, dict):
            return None
        missing = [n for n in names if n not in props]
        if not missing:
            return None
        return f"objects without {', '.join(missing)} (the template needs {', '.join(names)})"
    need = "a string" if len(names) == 1 else f"objects with {', '.join(names)}"
    return f"{'/'.join(sorted(kinds))} values; each link needs {need} (or a list of them)"
