"""Several operations behind one tool: `actions` (an `action` enum picks one) and `variants` (which
arguments are given picks one; one fallback).

Every branch is one operation compiled as a single tool's is (single.compile_use, then its own
confirmation, dry run and idempotency, contract.py). The tool's input schema stays one flat object
(no top-level oneOf/anyOf): the union of the branches' arguments, each meaning the same wherever
it appears; what a branch needs beyond that goes into the Manifest (`Branch.requires`), checked
by the runtime and stated in the tool description. Unreachable variants, clashing arguments and
an argument called `action` are errors with the overlay's file, line and key.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from openapi2mcp.compiler.contract import Extra, adjust_use
from openapi2mcp.compiler.descriptions import branch_description, highest_risk
from openapi2mcp.compiler.model import Context, Use
from openapi2mcp.compiler.paging import paging_sentence
from openapi2mcp.compiler.responses import EMPTY_RESULT, response_def_of
from openapi2mcp.compiler.schemas import flat_object_schema
from openapi2mcp.compiler.single import compile_use
from openapi2mcp.compiler.toolspec import ToolDraft, overlay_tool_spec
from openapi2mcp.errors import InputError, Problem, did_you_mean
from openapi2mcp.manifest import RISK_ORDER, Branch, Dispatch, ResponseSpec, Step, ToolSpec
from openapi2mcp.overlay import ActionDef, KeyPath, OverlayFile, ToolDef, ToolOverlay, VariantDef

ACTION_ARG = "action"  # ToolSpec.action_arg's default: where the runtime reads the action
# Keywords that describe rather than constrain: two arguments that differ only in these are one.
_ANNOTATION_KEYWORDS = frozenset({"description", "title", "examples", "deprecated", "default", "$comment",
                                  "readOnly", "writeOnly"})


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
        return EMPTY_RESULT
    return use.output_schema


def _requirements(b: _BranchUse, required_everywhere: list[str], when: list[str]) -> list[str]:
    """What this branch needs beyond what every branch needs (and, for a variant, what selects it)."""
    return [a.name for a in b.use.visible if a.required and a.name not in required_everywhere and a.name not in when]


def _multi_tool(
    tdef: ToolDef,
    doc: OverlayFile,
    at: KeyPath,
    branches: list[_BranchUse],
    specs: list[Branch],
    extras: dict[str, Extra],
    input_schema: dict[str, Any],
    description: str,
    dispatch: Dispatch,
) -> ToolSpec:
    """The tool of several branches: one result schema over the branches that can run, the highest risk."""
    live = [(b, s) for b, s in zip(branches, specs, strict=True) if s.risk != "forbidden"]
    output_schema = merge_outputs([_branch_output(b.use) for b, _ in live]) if live else None
    if output_schema is not None:  # a strict branch is checked against its own schema, not the union
        specs = [s.model_copy(update={"output_schema": _branch_output(b.use)})
                 if s.response and s.response.validate_ == "strict" and _branch_output(b.use) != output_schema else s
                 for b, s in zip(branches, specs, strict=True)]
    side_effects = list(tdef.side_effects)
    for _, s in live:
        side_effects += [e for e in s.side_effects if e not in side_effects]
    draft = ToolDraft(
        name=tdef.name,
        title=None,
        description=description,
        input_schema=input_schema,
        output_schema=output_schema,
        calls=[(b.use.op.method, s.risk) for b, s in live],
        branches=specs,
        response=ResponseSpec(max_bytes=max((s.response.max_bytes for s in specs if s.response), default=64_000)),
        risk=highest_risk([s.risk for _, s in live]) if live else "forbidden",
        args=[a for b, _ in live for a in b.use.args],
        dispatch=dispatch,
        side_effects=side_effects,
    )
    return overlay_tool_spec(draft, tdef, extras, doc, at)


def _compile_branch(
    ctx: Context, tdef: ToolDef, bdef: ActionDef | VariantDef, overlay: ToolOverlay, doc: OverlayFile, at: KeyPath
) -> tuple[Use, Extra]:
    """One action or variant: its operation compiled (its `response`, else the tool's), then its contract."""
    response_def = response_def_of(overlay, bdef.response, tdef.response)
    use = compile_use(ctx, bdef.operation, bdef.params, bdef.risk, response_def, bdef.pagination, doc, at)
    return adjust_use(ctx, use, tdef, bdef, doc, at)


# ============================================================================ actions


def action_tool(ctx: Context, tdef: ToolDef, overlay: ToolOverlay, doc: OverlayFile, at: KeyPath) -> ToolSpec:
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
                                   branch_description(adef.description, use.op), list(adef.side_effects)))
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
    return _multi_tool(tdef, doc, at, branches, specs, extras, input_schema, description, "action")


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


def variant_tool(ctx: Context, tdef: ToolDef, overlay: ToolOverlay, doc: OverlayFile, at: KeyPath) -> ToolSpec:
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
                                   branch_description(vdef.description, use.op), list(vdef.side_effects)))
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
    return _multi_tool(tdef, doc, at, branches, specs, extras, input_schema, description, "presence")
