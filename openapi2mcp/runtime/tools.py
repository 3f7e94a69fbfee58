"""The compiled tool: its schemas, argument checks, defaults and the choice of branch.

A `Tool` is a `ToolSpec` plus everything compiled once at start-up (the argument validator, the
shapers, the pagers, every JMESPath expression checked). Per call, in this order:
`check_arguments` (JSON Schema 2020-12, every problem named, bounded), then `choose_branch`
(single / action / presence), which fills in the branch's defaults after the choice (a default
never makes a `presence` branch match) and before what the branch needs is checked.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Collection, Mapping
from functools import cached_property
from typing import TYPE_CHECKING, Any, Final

import jmespath.exceptions
import mcp_types as types

from openapi2mcp.errors import ErrorCode, ToolError, ToolFailure, did_you_mean
from openapi2mcp.manifest import Branch, ContractContext, Manifest, ToolSpec, compile_schema
from openapi2mcp.runtime.paginate import Paginator
from openapi2mcp.runtime.signing import Signer
from openapi2mcp.shape import Shaper, compile_expression, describe_error, drop_nulls, error_path, leaf_errors
from openapi2mcp.upstream import ConfigError, check_json_arguments

if TYPE_CHECKING:  # jsonschema loads with the first validator, at the first call (not needed to list tools)
    from jsonschema import ValidationError
    from jsonschema.protocols import Validator

MAX_REPORTED_PROBLEMS: Final = 5


def invalid(message: str, field: str | None = None) -> ToolFailure:
    return ToolFailure.of(ErrorCode.ARGUMENT_INVALID, message, field=field)


class Tool:
    """A callable tool: its spec plus everything compiled once at start-up.

    Its definition (what tools/list shows, with the contract) is built when first listed: most of
    a big API's tools are never listed by a given server process, and building all of them was most of
    the start-up (Microsoft Graph: 1.6 s for 11,422 tools). `check` builds it now, as `Runtime.check` does.
    """

    def __init__(self, spec: ToolSpec, signer: Signer, *, check: bool, contract: ContractContext | None = None) -> None:
        self.spec = spec
        self.contract = contract
        schema_error: type[Exception] = _Unchecked  # only a schema check raises jsonschema's SchemaError
        try:
            # `check`: validate the schemas themselves against the metaschema now (see compile_schema)
            if check:
                from jsonschema import SchemaError

                schema_error = SchemaError
                self.__dict__["arguments"] = compile_schema(spec.input_schema, formats=True, check=True)
            self.shaper = Shaper(spec.response, spec.output_schema, check=check)
            self.shapers = {b.key: self.shaper.with_response(b.response or spec.response, b.output_schema)
                            for b in spec.branches if b.response or b.output_schema}
            self.pagers = {b.key: Paginator(spec.name, b.pagination, signer) for b in spec.branches if b.pagination}
            for expr in _expressions(spec):
                compile_expression(expr)
        except schema_error as e:
            raise ConfigError(f"tool {spec.name}: invalid JSON Schema: {getattr(e, 'message', e)}") from None
        except jmespath.exceptions.JMESPathError as e:
            raise ConfigError(f"tool {spec.name}: invalid JMESPath expression: {e}") from None
        if not spec.branches:
            raise ConfigError(f"tool {spec.name}: no branches to run")
        self.branches = [b for b in spec.branches if b.risk != "forbidden"]
        if check:
            _ = self.definition
        elif spec.annotations:  # the one part of a definition a valid ToolSpec may still get wrong: told now
            try:
                types.ToolAnnotations.model_validate(spec.annotations)
            except ValueError as e:
                raise ConfigError(f"tool {spec.name}: invalid tool definition: {e}") from None

    @cached_property
    def definition(self) -> types.Tool:
        """The tool as tools/list shows it, its contract in `_meta`; a ConfigError when MCP clients would reject it."""
        try:
            return types.Tool.model_validate(self.spec.definition(self.contract))
        except ValueError as e:  # pydantic: a definition MCP clients would reject
            raise ConfigError(f"tool {self.spec.name}: invalid tool definition: {e}") from None

    @cached_property
    def arguments(self) -> Validator:
        """The argument validator, built by the tool's first call."""
        return compile_schema(self.spec.input_schema, formats=True)

    def shaper_of(self, branch: Branch) -> Shaper:
        return self.shapers.get(branch.key, self.shaper)


class _Unchecked(Exception):
    """Never raised: what Tool() catches instead of SchemaError when the schemas are not checked."""


def _expressions(spec: ToolSpec) -> list[str]:
    found: list[str] = []
    for branch in spec.branches:
        found += [branch.output] if branch.output else []
        found += [branch.response.select] if branch.response and branch.response.select else []
        paging = branch.pagination
        if paging is not None:
            found += [e for e in (paging.items, paging.next, paging.total, paging.item_select) if e and e != "@"]
        for step in branch.steps:
            found += [step.when] if step.when else []
            found += [p.expr for p in step.operation.params if p.expr]
            body = step.operation.body
            if body is not None:
                found += [body.expr] if body.expr else []
                found += list(body.exprs.values())
    return found


def compile_tools(
    manifest: Manifest, signer: Signer, *, check: bool, contract: ContractContext | None = None
) -> dict[str, Tool]:
    """The callable tools of a Manifest by name (a forbidden tool is never one); a name twice is a ConfigError."""
    tools: dict[str, Tool] = {}
    for spec in manifest.tools:
        if spec.risk == "forbidden":
            continue
        if spec.name in tools:
            raise ConfigError(f"tool {spec.name}: defined twice")
        tools[spec.name] = Tool(spec, signer, check=check, contract=contract)
    return tools


def _problems(error: ValidationError) -> list[tuple[str | None, str]]:
    """(field, reason) pairs for one schema error; required/unknown are named precisely.

    An anyOf/oneOf error is described by the branch the value was meant for (shape.leaf_errors):
    `flows.name.like_: expected string, got integer`, not `flows: expected null, got object`.
    The field is None only for a problem of the arguments as a whole (not an object).
    """
    leaves = leaf_errors(error)
    if leaves != [error]:
        return [problem for leaf in leaves for problem in _problems(leaf)]
    where = error_path(error.absolute_path) or (None if not error.absolute_path else "")

    def at(name: str) -> str:
        return f"{where}.{name}" if where else name

    instance = error.instance
    if error.validator == "required" and isinstance(instance, dict):
        required = error.validator_value if isinstance(error.validator_value, list) else []
        missing = [r for r in required if r not in instance]
        return [(at(m), "required argument missing") for m in missing]
    if error.validator == "additionalProperties" and isinstance(instance, dict):
        schema = error.schema if isinstance(error.schema, dict) else {}
        known = list(schema.get("properties", {}))
        patterns = list(schema.get("patternProperties", {}))
        extras = [k for k in instance if k not in known and not any(re.search(p, k) for p in patterns)]
        out: list[tuple[str | None, str]] = []
        listed = ", ".join(known[:12]) + (", ..." if len(known) > 12 else "")
        for extra in extras:
            hint = did_you_mean(extra, known) if extra else None
            named = "" if extra and extra.isprintable() and extra.strip() == extra else f" {extra!r}"
            valid = f" (valid: {listed})" if known and not hint else ""
            out.append((at(extra), f"unknown argument{named}" + (f", {hint}" if hint else valid)))
        return out or [(where, describe_error(error))]
    return [(where, describe_error(error))]


def check_arguments(validator: Validator, arguments: Mapping[str, Any], nulled: Collection[str] = ()) -> None:
    """Raise ARGUMENT_INVALID naming every problem (bounded), `field` = the first one's path.

    `nulled`: the fields `shape.drop_nulls` took out (a required one was given as null).
    """
    check_json_arguments(arguments)  # NaN passes every range check: refused before the schema is asked
    by_field: dict[str | None, str] = {}
    for error in validator.iter_errors(arguments):
        for field, reason in _problems(error):
            if field in nulled and reason == "required argument missing":
                reason = "required, got null"
            by_field.setdefault(field, reason)  # one reason per field keeps the message short
    if not by_field:
        return
    problems = sorted(by_field.items(), key=lambda p: (p[0] is not None, p[0] or ""))
    shown = problems[:MAX_REPORTED_PROBLEMS]
    message = "; ".join(f"{field}: {reason}" if field else reason for field, reason in shown)
    if len(problems) > len(shown):
        message += f" (and {len(problems) - len(shown)} more)"
    raise invalid(message, shown[0][0])


def argument_error(schema: Mapping[str, Any], arguments: dict[str, Any]) -> ToolError | None:
    """What this server answers to `arguments` for a tool of this input schema before anything runs: the
    ARGUMENT_INVALID error naming each problem by field, or None. For clients (`openapi2mcp call`); a
    schema that is no valid JSON Schema (another server's) is not checked here: the server will say."""
    from jsonschema import SchemaError

    try:
        validator = compile_schema(schema, formats=True)
        kept, nulled = drop_nulls(validator, arguments)
        check_arguments(validator, kept, nulled)
    except ToolFailure as e:
        return e.error
    except SchemaError:
        return None
    return None


def _with_defaults(schema: Mapping[str, Any], branch: Branch, arguments: Mapping[str, Any]) -> dict[str, Any]:
    """The arguments with the defaults of what is not given: the branch's own, else the input schema's
    top-level ones (a Manifest from before `Branch.defaults`, and single tools) that the branch takes.
    A null is not given, unless the argument's null is sent (`null_means: clear`, BodySpec.nulls)."""
    clears = {a for step in branch.steps if step.operation.body for a in step.operation.body.nulls}
    out = dict(arguments)
    given = {k for k, v in out.items() if v is not None or k in clears}
    for name, value in branch.defaults.items():
        if name not in given:
            out[name] = copy.deepcopy(value)
            given.add(name)
    properties = schema.get("properties")
    for name, prop in (properties.items() if isinstance(properties, dict) else ()):
        if name not in given and isinstance(prop, dict) and "default" in prop and (
                branch.accepts is None or name in branch.accepts):
            out[name] = copy.deepcopy(prop["default"])
    return out


def _present(arguments: Mapping[str, Any], name: str) -> bool:
    return arguments.get(name) is not None


def choose_branch(tool: Tool, arguments: Mapping[str, Any]) -> tuple[Branch, dict[str, Any]]:
    """Dispatch: single, action (by `action_arg`), presence (first `when` all given); the branch and the
    arguments with its defaults, filled in after the choice (a default never makes a `when` match) and
    before what the branch needs is checked (an argument with a default is never missing)."""
    spec = tool.spec
    if not tool.branches:
        raise invalid(f"{spec.name} cannot be called: every way to run it is forbidden")
    if spec.dispatch == "action":
        keys = ", ".join(b.key for b in tool.branches)
        action = arguments.get(spec.action_arg)
        if action is None:
            raise invalid(f"{spec.action_arg}: required argument missing (one of: {keys})", spec.action_arg)
        branch = next((b for b in tool.branches if b.key == action), None)
        if branch is None:
            raise invalid(f"{spec.action_arg}: unknown action {action!r} (one of: {keys})", spec.action_arg)
        label = f"action {branch.key!r}"
    elif spec.dispatch == "presence":
        branch = next((b for b in tool.branches if b.when and all(_present(arguments, w) for w in b.when)), None)
        branch = branch or next((b for b in tool.branches if not b.when), None)
        if branch is None:
            options = " or ".join("+".join(b.when) for b in tool.branches)
            raise invalid(f"give {options}")
        given = ", ".join(branch.when)
        label = f"{branch.key} (chosen because {given} {'is' if len(branch.when) == 1 else 'are'} given)" \
            if branch.when else f"this call ({branch.key})"
    else:
        branch = tool.branches[0]
        label = "this call"
    if branch.accepts is not None:
        extra = [k for k, v in arguments.items() if v is not None and k not in branch.accepts]
        if extra:
            takes = ", ".join(a for a in branch.accepts if a != spec.action_arg) or "no other arguments"
            raise invalid(f"{label} does not take {', '.join(extra)} (it takes: {takes})", extra[0])
    arguments = _with_defaults(spec.input_schema, branch, arguments)
    missing = [name for name in branch.requires if not _present(arguments, name)]
    if missing:
        raise invalid(f"{label} needs {', '.join(missing)}", missing[0])
    return branch, arguments
