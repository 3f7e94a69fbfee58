"""The MCP server over a Manifest: tools/list, tools/call, stdio and Streamable HTTP.

`Runtime` is the core and works without MCP: `await runtime.call(name, arguments)` validates the
arguments (JSON Schema 2020-12, compiled once per tool), picks the branch (single / action /
presence), runs its steps through `upstream.Upstream`, shapes the result (`shape.Shaper`) and
returns a `CallToolResult` (`result`). `build_server()` puts it behind the SDK's low-level
`Server`; `serve_stdio`, `serve_http` and `http_app` serve it.

Policies worth knowing:

* Schemas are compiled into validators once, at start-up, but not themselves checked against the
  JSON Schema metaschema unless `check_schemas=True`: Manifests come from the compiler, and the
  check costs ~30 ms a schema (15 s for Stripe's 833). Hand-built Manifests should turn it on.

* A missing `${VAR}` in the base URL, or a missing secret (auth, credential headers), is a
  `ConfigError` before serving: a server that lists tools it cannot run hides the real problem.
  `require_secrets=False` relaxes the second case (tools are listed, calls fail with
  CONFIGURATION_ERROR naming the variable) for introspection without credentials.
* Tools with risk "forbidden" are never listed and calling one is exactly an unknown tool.
* Protocol errors (unknown tool, bad cursor) are JSON-RPC errors (-32602); everything that goes
  wrong while running a tool is an `isError` result with a stable code and a traceId. No
  exception text reaches a client: internal failures are logged (redacted) with the traceId.
* Defaults are sent when an argument is omitted: the branch's own (`Branch.defaults`, so an
  action's default is never another action's), else the input schema's top-level ones; after
  branch selection, so defaults never make a `presence` branch match, and before the branch's
  `requires` are checked.
* The safety contract (docs/safety.md) runs after the arguments are checked and before anything
  is sent: a dry run (`dryRun: true`) previews; a real call of a `dry_run: required` branch needs
  its dry-run token, then the user's confirmation when the branch needs one (policy.py: elicitation
  on 2025-11-25, an input-required result on 2026-07-28, `--auto-approve`, else
  CONFIRMATION_REQUIRED). Idempotent branches send a derived Idempotency-Key; idempotent requests
  are retried (retry.py). With an audit log every call writes one line before it answers, and a
  write is not sent when its attempt line cannot be written (audit.py).
"""

from __future__ import annotations

import contextlib
import copy
import json
import logging
import os
import re
import sys
import time
import traceback
import uuid
from collections.abc import AsyncIterator, Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

import anyio
import jmespath.exceptions
import mcp_types as types
import pydantic_core
from jsonschema import SchemaError, ValidationError
from jsonschema.protocols import Validator
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server
from mcp.server.transport_security import TransportSecuritySettings
from mcp.shared.exceptions import MCPError
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Mount, Route

from openapi2mcp import result as results
from openapi2mcp.errors import ErrorCode, ToolError, ToolFailure, did_you_mean
from openapi2mcp.manifest import (
    DRY_RUN_ARG,
    DRY_RUN_INTERNAL_ARG,
    DRY_RUN_TOKEN_ARG,
    SAFE_METHODS,
    Branch,
    Manifest,
    OperationSpec,
    RateLimitSpec,
    ResponseSpec,
    ToolSpec,
    compile_schema,
    needs_confirmation,
    step_up_scope,
)
from openapi2mcp.runtime import listing
from openapi2mcp.runtime.access import (
    Caller,
    caller_from_context,
    inbound_headers,
    local_caller,
    needs_step_up,
    visible,
)
from openapi2mcp.runtime.audit import (
    AUDIT_LOG_VAR,
    AuditError,
    AuditLog,
    Auditor,
    AuditRecord,
    redact_arguments,
    repairs_summary,
)
from openapi2mcp.runtime.limits import RateLimiter
from openapi2mcp.runtime.options import HttpLimits, is_loopback
from openapi2mcp.runtime.paginate import Paginator
from openapi2mcp.runtime.policy import (
    AUTO_APPROVE_VAR,
    Asker,
    InputRequired,
    Policy,
    argument_notes,
    describe_request,
    parse_auto_approve,
    shown_arguments,
)
from openapi2mcp.runtime.resources import Catalog
from openapi2mcp.runtime.signing import SIGNING_KEY_VAR, Signer, SigningKeyError
from openapi2mcp.runtime.stdio import client_gone, stdin_lines
from openapi2mcp.shape import (
    Shaped,
    Shaper,
    compile_expression,
    describe_error,
    drop_nulls,
    error_path,
    leaf_errors,
    search,
    truthy,
)
from openapi2mcp.upstream import (
    FORWARDED_HEADERS,
    ConfigError,
    Evaluate,
    Payload,
    Upstream,
    UpstreamResponse,
    check_json_arguments,
)

if TYPE_CHECKING:
    from openapi2mcp.runtime.auth import AuthConfig


log = logging.getLogger("openapi2mcp.runtime")

MAX_REPORTED_PROBLEMS: Final = 5
DEFAULT_MAX_BINARY_BYTES: Final = 4_000_000


def configure_logging(level: str | int = "INFO") -> None:
    """Send openapi2mcp logs to stderr (stdout belongs to the protocol on stdio), each line once.

    Our handler stays quiet for a record that a handler of the root logger prints (an application
    or a library that configured logging, e.g. `logging.basicConfig`): a record reaches both, and
    printing it twice is what `--log-level info` used to do.
    """
    logger = logging.getLogger("openapi2mcp")
    if not any(getattr(h, "_openapi2mcp", False) for h in logger.handlers):
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        handler.addFilter(_not_printed_by_root)
        handler._openapi2mcp = True  # type: ignore[attr-defined]
        logger.addHandler(handler)
    logger.setLevel(level.upper() if isinstance(level, str) else level)


def _not_printed_by_root(record: logging.LogRecord) -> bool:
    if not logging.getLogger("openapi2mcp").propagate:
        return True
    return not any(record.levelno >= h.level for h in logging.getLogger().handlers)


def _invalid(message: str, field: str | None = None) -> ToolFailure:
    return ToolFailure.of(ErrorCode.ARGUMENT_INVALID, message, field=field)


# ============================================================================ per-tool state


class _Tool:
    """A callable tool: its spec plus everything compiled once at start-up."""

    def __init__(self, spec: ToolSpec, signer: Signer, *, check: bool) -> None:
        self.spec = spec
        try:
            # `check`: validate the schemas themselves against the metaschema (see compile_schema)
            self.arguments = compile_schema(spec.input_schema, formats=True, check=check)
            self.shaper = Shaper(spec.response, spec.output_schema, check=check)
            self.shapers = {b.key: self.shaper.with_response(b.response or spec.response, b.output_schema)
                            for b in spec.branches if b.response or b.output_schema}
            self.pagers = {b.key: Paginator(spec.name, b.pagination, signer) for b in spec.branches if b.pagination}
            for expr in _expressions(spec):
                compile_expression(expr)
            self.definition = types.Tool.model_validate(spec.definition())
        except SchemaError as e:
            raise ConfigError(f"tool {spec.name}: invalid JSON Schema: {e.message}") from None
        except jmespath.exceptions.JMESPathError as e:
            raise ConfigError(f"tool {spec.name}: invalid JMESPath expression: {e}") from None
        except ValueError as e:  # pydantic: a definition MCP clients would reject
            raise ConfigError(f"tool {spec.name}: invalid tool definition: {e}") from None
        if not spec.branches:
            raise ConfigError(f"tool {spec.name}: no branches to run")
        self.branches = [b for b in spec.branches if b.risk != "forbidden"]

    def shaper_of(self, branch: Branch) -> Shaper:
        return self.shapers.get(branch.key, self.shaper)


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


# ============================================================================ argument checks


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
    raise _invalid(message, shown[0][0])


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


def choose_branch(tool: _Tool, arguments: Mapping[str, Any]) -> tuple[Branch, dict[str, Any]]:
    """Dispatch: single, action (by `action_arg`), presence (first `when` all given); the branch and the
    arguments with its defaults, filled in after the choice (a default never makes a `when` match) and
    before what the branch needs is checked (an argument with a default is never missing)."""
    spec = tool.spec
    if not tool.branches:
        raise _invalid(f"{spec.name} cannot be called: every way to run it is forbidden")
    if spec.dispatch == "action":
        keys = ", ".join(b.key for b in tool.branches)
        action = arguments.get(spec.action_arg)
        if action is None:
            raise _invalid(f"{spec.action_arg}: required argument missing (one of: {keys})", spec.action_arg)
        branch = next((b for b in tool.branches if b.key == action), None)
        if branch is None:
            raise _invalid(f"{spec.action_arg}: unknown action {action!r} (one of: {keys})", spec.action_arg)
        label = f"action {branch.key!r}"
    elif spec.dispatch == "presence":
        branch = next((b for b in tool.branches if b.when and all(_present(arguments, w) for w in b.when)), None)
        branch = branch or next((b for b in tool.branches if not b.when), None)
        if branch is None:
            options = " or ".join("+".join(b.when) for b in tool.branches)
            raise _invalid(f"give {options}")
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
            raise _invalid(f"{label} does not take {', '.join(extra)} (it takes: {takes})", extra[0])
    arguments = _with_defaults(spec.input_schema, branch, arguments)
    missing = [name for name in branch.requires if not _present(arguments, name)]
    if missing:
        raise _invalid(f"{label} needs {', '.join(missing)}", missing[0])
    return branch, arguments


# ============================================================================ the runtime


_DENIALS: Final = frozenset({
    ErrorCode.CONFIRMATION_REQUIRED, ErrorCode.DRY_RUN_REQUIRED, ErrorCode.PERMISSION_DENIED,
})


# what policy.confirm records after reading a valid request state (the answered retry of a confirmation)
_ANSWERED: Final = frozenset({"confirmed", "declined", "cancelled"})


@dataclass
class _Pending:
    """A rate-limit charge not taken yet (a 2026-07-28 call with a request state): `due` until settled."""

    due: bool


@dataclass
class _Plan:
    """One admitted call: who, which branch, the headers it sends (idempotency key), dry run or not."""

    tool: ToolSpec
    branch: Branch
    caller: Caller
    record: AuditRecord
    headers: dict[str, str]
    dry_run: bool


def _audit_failed(trace: str, *, sent: bool) -> ToolError:
    what = ("the request was sent, but its outcome cannot be recorded: check before repeating it" if sent
            else "the write was not sent")
    return ToolError(code=ErrorCode.AUDIT_FAILED, message=f"the audit log cannot be written; {what}",
                     traceId=trace)


class Runtime:
    """One per Manifest: owns the upstream client and the compiled validators."""

    def __init__(
        self,
        manifest: Manifest,
        *,
        environ: Mapping[str, str] | None = None,
        page_size: int = 100,
        require_secrets: bool = True,
        max_binary_bytes: int = DEFAULT_MAX_BINARY_BYTES,
        signer: Signer | None = None,
        check_schemas: bool = False,
        local: Caller | None = None,
        rate_limit: RateLimitSpec | None = None,
        auto_approve: str | Iterable[str] | None = None,
        audit_log: AuditLog | str | None = None,
    ) -> None:
        if page_size < 1:
            raise ConfigError("page_size must be at least 1")
        self.manifest = manifest
        self.page_size = page_size
        self.max_binary_bytes = max_binary_bytes
        env = os.environ if environ is None else environ
        self.upstream = Upstream(manifest.upstream, env, require_secrets=require_secrets)
        try:
            self.signer = signer or Signer.from_environ(env)
        except SigningKeyError as e:
            raise ConfigError(str(e)) from None
        self._tools: dict[str, _Tool] = {}
        for spec in manifest.tools:
            if spec.risk == "forbidden":
                continue
            if spec.name in self._tools:
                raise ConfigError(f"tool {spec.name}: defined twice")
            self._tools[spec.name] = _Tool(spec, self.signer, check=check_schemas)
        if self.signer.generated and any(t.pagers for t in self._tools.values()):
            log.warning(
                "cursors are signed with a key generated at start-up: they stop working after a restart and are "
                "refused by other replicas; set %s to share one key", SIGNING_KEY_VAR,
            )
        self._cursor_tag = (manifest.content_hash or "unsealed")[-12:]
        # access (access.py, limits.py): the caller without a token, the per-scope-set lists, the buckets
        self.local = local or local_caller("memory")
        self._views: dict[tuple[bool, frozenset[str]], tuple[list[types.Tool], str]] = {}
        self.limiter = RateLimiter(rate_limit or manifest.upstream.rate_limit,
                                   {t.name: t.rate_limit for t in manifest.tools if t.rate_limit})
        self.catalog = Catalog(manifest, self.upstream, page_size=page_size, max_binary_bytes=max_binary_bytes)
        self.catalog.limiter = self.limiter  # resource reads count against their tools' limits
        self.repairs: dict[str, int] = {}  # tool -> repaired values so far (drifting upstreams, see _drifted)
        self._drift_logged: set[tuple[str, str, str, str]] = set()
        self._init_safety(env, auto_approve, audit_log)

    def _init_safety(self, env: Mapping[str, str], auto_approve: str | Iterable[str] | None,
                     audit_log: AuditLog | str | None) -> None:
        """Confirmation, dry run, idempotency (policy.py) and the audit log (audit.py); flags win over env."""
        try:
            approved = parse_auto_approve(auto_approve if auto_approve is not None else env.get(AUTO_APPROVE_VAR))
        except ValueError as e:
            raise ConfigError(str(e)) from None
        self.policy = Policy(self.signer, approved, redactor=self.upstream.redactor)
        target = audit_log if audit_log is not None else (env.get(AUDIT_LOG_VAR) or None)
        try:
            log_target = AuditLog(target) if isinstance(target, str) else target
        except AuditError as e:
            raise ConfigError(f"{e} (--audit-log / {AUDIT_LOG_VAR})") from None
        self.auditor = Auditor(log_target)
        self.catalog.auditor = self.auditor
        self.catalog.caller_of = lambda ctx: caller_from_context(ctx, self.local)
        if approved:
            log.warning("auto-approving the confirmation of %s-risk calls (--auto-approve); each is audited",
                        " and ".join(sorted(approved)))
        signed = [b for t in self._tools.values() for b in t.branches
                  if b.idempotency is not None or (b.dry_run is not None and b.dry_run.mode == "required")]
        if self.signer.generated and signed:
            log.warning(
                "idempotency keys and dry-run tokens use a key generated at start-up: after a restart, or on another "
                "replica, a retried create is a new object and a dry run must be repeated; set %s", SIGNING_KEY_VAR,
            )

    # ------------------------------------------------------------------ tools/list

    @property
    def tool_names(self) -> list[str]:
        return list(self._tools)

    def input_schema(self, name: str) -> Mapping[str, Any] | None:
        tool = self._tools.get(name)
        return tool.spec.input_schema if tool else None

    def list_tools(self, cursor: str | None = None, caller: Caller | None = None) -> types.ListToolsResult:
        """One page of the tools the caller may use; a cursor is valid for callers with the same view."""
        listed, tag = self._view(caller or self.local)
        tools, nxt = listing.page(listed, cursor, size=self.page_size, kind="tools", tag=tag)
        return types.ListToolsResult(tools=tools, next_cursor=nxt)

    def _view(self, caller: Caller) -> tuple[list[types.Tool], str]:
        """The tools a caller's scopes allow, and the cursor tag of that list (cached per scope set)."""
        key = (caller.all_scopes, caller.scopes)
        view = self._views.get(key)
        if view is None:
            listed = [t.definition for t in self._tools.values() if visible(t.spec, caller)]
            tag = listing.view_tag(self._cursor_tag, [t.name for t in listed], len(self._tools))
            if len(self._views) >= 256:
                self._views.clear()
            view = self._views[key] = (listed, tag)
        return view

    # ------------------------------------------------------------------ tools/call

    async def call(
        self,
        name: str,
        arguments: Mapping[str, Any] | None,
        *,
        trace_id: str | None = None,
        caller: Caller | None = None,
        asker: Asker | None = None,
    ) -> types.CallToolResult:
        """Run one tool call. Unknown (or forbidden) tools raise MCPError(-32602); all else is a result.

        A tool the caller lacks the permissions for is exactly an unknown tool (access.py).
        `asker` says how to reach the user for a confirmation (policy.Asker; None: no way, so a
        call that needs one gets CONFIRMATION_REQUIRED). On 2026-07-28 the answer may be an
        input-required result: then `policy.InputRequired` is raised and the MCP handler returns it.
        With an audit log, every call writes its line before it returns or raises (audit.py).
        """
        tool = self._tools.get(name)
        caller = caller or self.local
        trace = trace_id or uuid.uuid4().hex
        record = self._audit_record(name, tool, arguments, caller, trace)
        if tool is None or not visible(tool.spec, caller):
            self._audit_denial(record, "UNKNOWN_TOOL")
            raise MCPError(code=types.INVALID_PARAMS, message=f"Unknown tool: {name}")
        # 2026-07-28: a retry carrying a request state is charged at the gate, unless it is the
        # answered retry of a confirmation whose first leg was charged (one round trip, one token)
        pending = _Pending(due=asker is not None and asker.request_state is not None)
        try:
            return await self._call(tool, name, arguments, record, caller, asker, pending)
        finally:
            if pending.due:  # refused before its gate: charged like any call, when a token is there
                self.limiter.admit(name, caller.id)

    async def _call(
        self, tool: _Tool, name: str, arguments: Mapping[str, Any] | None, record: AuditRecord, caller: Caller,
        asker: Asker | None, pending: _Pending,
    ) -> types.CallToolResult:
        trace = record.trace_id
        requests: list[dict[str, Any]] = record.requests
        started = time.monotonic()
        outcome = "ok"
        try:
            self._admit(tool, caller, pending)
            out = await self._run(tool, dict(arguments or {}), record, caller=caller, asker=asker, pending=pending)
        except InputRequired:
            self._audit_denial(record, None, "input_required")
            raise
        except anyio.get_cancelled_exc_class():  # not an Exception: the client cancelled or went away
            log.info("tool=%s traceId=%s outcome=cancelled requests=%d", name, trace, len(requests))
            self.auditor.cancelled(record)
            raise
        except MCPError as e:  # a refused request state (policy.invalid_state)
            invalid = isinstance(e.error.data, dict) and e.error.data.get("reason") == "invalid_request_state"
            self._audit_denial(record, "REQUEST_STATE_INVALID" if invalid else f"JSONRPC_{e.code}")
            raise
        except AuditError as e:  # the attempt line could not be written: the write was not sent
            log.error("tool %s traceId %s: %s; the call is refused", name, trace, e)
            outcome = ErrorCode.AUDIT_FAILED
            out = results.failure(_audit_failed(trace, sent=False), results.meta(trace, requests))
        except ToolFailure as failure:
            error = failure.error.model_copy(
                update={"trace_id": trace, "message": self.upstream.redactor.text(failure.error.message)}
            )
            outcome = error.code
            out = results.failure(error, results.meta(trace, requests))
        except Exception:
            outcome = ErrorCode.INTERNAL_ERROR
            log.error(
                "tool %s failed, traceId %s:\n%s",
                name,
                trace,
                self.upstream.redactor.text(traceback.format_exc()),
            )
            out = results.failure(results.internal_error(trace), results.meta(trace, requests))
        if not _sendable(out):  # the audit line never says ok for a result the client cannot get
            log.error("tool %s traceId %s: the result cannot be encoded as an MCP message", name, trace)
            outcome = ErrorCode.INTERNAL_ERROR
            out = results.failure(results.internal_error(trace), results.meta(trace, requests))
        repairs = (out.meta or {}).get(results.REPAIRS_KEY) if not out.is_error else None
        if repairs:
            self._drifted(name, record, repairs, (out.meta or {}).get(results.REPAIRS_OMITTED_KEY, 0))
        log.info(
            "tool=%s traceId=%s outcome=%s requests=%d ms=%d%s",
            name,
            trace,
            outcome,
            len(requests),
            int((time.monotonic() - started) * 1000),
            f" repairs={record.repairs['count']}" if record.repairs else "",
        )
        return self._audit_result(record, out, outcome)

    def _drifted(self, name: str, record: AuditRecord, repairs: list[dict[str, Any]], omitted: int) -> None:
        """A repaired result: counted per tool (health, audit line); each new drift logged once."""
        self.repairs[name] = self.repairs.get(name, 0) + len(repairs) + omitted
        record.repairs = repairs_summary(repairs, omitted)
        for entry in record.repairs["paths"]:
            key = (name, entry["path"], entry["expected"], entry["got"])
            if key in self._drift_logged:
                continue
            if len(self._drift_logged) >= 10_000:  # bounded: a very odd upstream cannot grow it forever
                self._drift_logged.clear()
            self._drift_logged.add(key)
            log.warning(
                "tool %s: the upstream's response does not match its documented schema at %s (expected %s, got %s); "
                "repaired: %s structuredContent, kept in the text (logged once; every repair is in _meta and the "
                "audit line)", name, entry["path"] or "the top level", entry["expected"], entry["got"],
                {"removed": "left out of", "null": "null in", "converted": "converted in"}[entry["action"]],
            )

    def _admit(self, tool: _Tool, caller: Caller, pending: _Pending | None = None) -> None:
        """Step-up scope and rate limits, before anything else: a refused call sends nothing upstream.

        A `pending` charge (a call with a request state) is left to the gate.
        """
        needed = needs_step_up(tool.spec, caller)
        if needed:  # HTTP answers 403 before the call gets here (auth.AuthGate); stdio and in-memory land here
            if pending is not None:
                pending.due = False  # refused before rate limiting: no token, as for any call
            raise ToolFailure.of(
                ErrorCode.PERMISSION_DENIED,
                f"{tool.spec.name} needs step-up authorization: the scope {needed[-1]}, which this caller lacks",
            )
        if pending is None or not pending.due:
            self._charge(tool, caller)

    def _charge(self, tool: _Tool, caller: Caller) -> None:
        """One token from each bucket of this call, or RATE_LIMITED (retryable, with the wait)."""
        refusal = self.limiter.admit(tool.spec.name, caller.id)
        if refusal is not None:
            raise ToolFailure.of(ErrorCode.RATE_LIMITED, refusal.message(), retryable=True,
                                 retry_after=refusal.retry_after)

    def step_up_challenge(self, name: str, caller: Caller, arguments: Any = None) -> list[str]:
        """For the HTTP auth gate: the scopes to ask for before this caller may call `name` ([]: none).

        Tools the caller may not see give [] so that the call is answered as an unknown tool. A
        refusal (the gate's HTTP 403) never reaches `call`, so its audit line is written here.
        """
        tool = self._tools.get(name)
        if tool is None or not visible(tool.spec, caller):
            return []
        needed = needs_step_up(tool.spec, caller)
        if needed:
            args = arguments if isinstance(arguments, dict) else None
            record = self._audit_record(name, tool, args, caller, uuid.uuid4().hex)
            with contextlib.suppress(MCPError):  # refused either way; an audit failure is logged
                self._audit_denial(record, ErrorCode.PERMISSION_DENIED)
        return needed

    def scopes_supported(self) -> list[str]:
        """Every scope the tools use (permissions and step-up scopes), for the protected-resource metadata."""
        found: set[str] = set()
        for tool in self._tools.values():
            found.update(tool.spec.permissions)
            extra = step_up_scope(tool.spec)
            if extra:
                found.add(extra)
        return sorted(found)

    async def _run(
        self, tool: _Tool, arguments: dict[str, Any], record: AuditRecord, *, caller: Caller, asker: Asker | None,
        pending: _Pending | None = None,
    ) -> types.CallToolResult:
        trace = record.trace_id
        if log.isEnabledFor(logging.DEBUG):
            shown = {k: "***" if k in tool.spec.sensitive else v for k, v in arguments.items()}
            log.debug(
                "tool=%s traceId=%s arguments=%s",
                tool.spec.name,
                trace,
                self.upstream.redactor.text(json.dumps(shown, default=str)[:2000]),
            )
        arguments, nulled = drop_nulls(tool.arguments, arguments)
        check_arguments(tool.arguments, arguments, nulled)
        branch, arguments = choose_branch(tool, arguments)
        plan = await self._gate(tool, branch, arguments, caller, asker, record, pending)  # before the deadline
        try:
            with anyio.fail_after(self.manifest.upstream.timeout.total):
                if plan.dry_run:
                    return await self._dry_run(tool, branch, arguments, plan)
                if branch.key in tool.pagers:
                    shaped = await self._run_pages(tool, branch, arguments, plan)
                    return self._success(tool, shaped, results.meta(trace, record.requests))
                payload, last = await self._run_steps(tool, branch, arguments, plan)
        except TimeoutError:
            raise ToolFailure.of(
                ErrorCode.UPSTREAM_TIMEOUT,
                f"the call did not finish within {self.manifest.upstream.timeout.total:g} s; retry later "
                "(a write may or may not have taken effect)",
                retryable=True,
            ) from None
        return self._result(tool, branch, payload, last, results.meta(trace, record.requests))

    async def _run_pages(self, tool: _Tool, branch: Branch, arguments: dict[str, Any], plan: _Plan) -> Shaped:
        """A paginated branch: collect up to `limit` items from the cursor's position, sign the next one."""
        pager = tool.pagers[branch.key]
        paging = pager.spec
        binding = pager.binding(arguments)
        cursor = arguments.get(paging.cursor_arg)
        start = pager.decode(cursor if isinstance(cursor, str) else None, binding)
        limit = arguments.get(paging.limit_arg)
        want = limit if isinstance(limit, int) and limit > 0 else min(paging.page_size, paging.max_items)

        async def send(op: OperationSpec) -> tuple[Mapping[str, str], Any, str]:
            resp, payload = await self._fetch(plan, op, arguments, lambda e: None)
            if payload.kind != "json":
                raise ToolFailure.of(
                    ErrorCode.UPSTREAM_INVALID_RESPONSE,
                    f"the upstream sent {payload.media_type or 'no content'} where a JSON page was expected",
                    status=resp.status,
                )
            return resp.headers, self.upstream.redactor.value(payload.value), resp.url

        settings = self.upstream.settings
        drop = {settings.query_auth[0]} if settings.query_auth else set()
        got = await pager.collect(send, branch.steps[0].operation, start, want, settings.base_url, drop)
        items = [search(paging.item_select, item) for item in got.items] if paging.item_select else got.items

        def cursor_at(k: int) -> str | None:
            position = got.resume[k] if k < len(got.resume) else got.next
            if position is None:
                return None
            if self.upstream.redactor.found(str(position.at)):  # a cursor is signed, not encrypted: readable
                raise ToolFailure.of(
                    ErrorCode.UPSTREAM_INVALID_RESPONSE,
                    "the upstream's next-page position holds a credential this server sends upstream (it echoes "
                    "the request); it cannot go into a cursor",
                )
            return pager.encode(position, binding)

        return tool.shaper_of(branch).page(items, got.total, cursor_at)

    async def _run_steps(
        self, tool: _Tool, branch: Branch, arguments: dict[str, Any], plan: _Plan
    ) -> tuple[Payload, UpstreamResponse | None]:
        context: dict[str, Any] = {"inputs": arguments, "steps": {}}
        multi = len(branch.steps) > 1
        payload: Payload | None = None
        last: UpstreamResponse | None = None
        for step in branch.steps:
            if step.when and not truthy(search(step.when, context)):
                continue
            try:
                resp, payload = await self._fetch(plan, step.operation, arguments, lambda e: search(e, context),
                                                  step.id if multi else None)
            except ToolFailure as failure:
                if multi:
                    failure.error.step = step.id
                raise
            last = resp
            context["steps"][step.id] = _step_value(payload, resp.status)
        if branch.output:
            return Payload("json", search(branch.output, context), "application/json"), last
        if payload is None:
            raise _invalid("nothing to do: no step of this tool applies to these arguments")
        return payload, last

    # ------------------------------------------------------------------ safety (policy.py, audit.py, retry.py)

    async def _gate(
        self, tool: _Tool, branch: Branch, arguments: dict[str, Any], caller: Caller, asker: Asker | None,
        record: AuditRecord, pending: _Pending | None = None,
    ) -> _Plan:
        """Dry run or real call; a real one needs its dry-run token and the confirmation first (policy.py).

        `pending`: the rate-limit charge of a call with a request state, settled here (see `call`).
        """
        spec = tool.spec
        record.branch, record.risk = branch.key, branch.risk
        dry = branch.dry_run is not None and arguments.get(DRY_RUN_ARG) is True
        record.dry_run = dry
        headers: dict[str, str] = {}
        if branch.idempotency is not None:
            key = self.policy.idempotency_key(spec, branch, arguments, caller)
            headers[branch.idempotency.header] = record.idempotency_key = key
        if dry:
            record.confirmation = "not_required"  # a dry run changes nothing; the real call is confirmed
        else:
            if branch.dry_run is not None and branch.dry_run.mode == "required":
                self.policy.check_dry_run(spec, branch, arguments, caller)
            try:
                await self.policy.confirm(spec, branch, arguments, caller, asker, record)
            finally:
                if pending is not None and pending.due and record.confirmation in _ANSWERED:
                    pending.due = False  # the state was valid and is now spent: its first leg paid for this call
        if pending is not None and pending.due:
            pending.due = False
            self._charge(tool, caller)  # a request state that answered nothing buys nothing
        return _Plan(tool=spec, branch=branch, caller=caller, record=record, headers=headers, dry_run=dry)

    async def _fetch(
        self, plan: _Plan, op: OperationSpec, arguments: Mapping[str, Any], evaluate: Evaluate, step: str | None = None
    ) -> tuple[UpstreamResponse, Payload]:
        """One upstream request of this call (`Upstream.fetch`), after the audit attempt line of a write."""
        if op.method.upper() not in SAFE_METHODS and not plan.dry_run:
            self.auditor.attempt(plan.record)  # AuditError: not sent
        return await self.upstream.fetch(op, arguments, evaluate, requests=plan.record.requests, headers=plan.headers,
                                         retries=plan.tool.retries, failure_modes=plan.tool.failure_modes, step=step)

    async def _dry_run(
        self, tool: _Tool, branch: Branch, arguments: dict[str, Any], plan: _Plan
    ) -> types.CallToolResult:
        """The exact request(s) a real call sends, its side effects, and the upstream's own preview.

        Nothing with a side effect is sent: read-only steps of a chain run (later steps need their
        results), write steps are only shown; a native preview (`DryRunSpec.native`) is one upstream
        call with the preview switch set, and its answer is `preview`.
        """
        spec, dry = tool.spec, branch.dry_run
        assert dry is not None
        real = {k: v for k, v in arguments.items() if k not in (DRY_RUN_ARG, DRY_RUN_TOKEN_ARG, DRY_RUN_INTERNAL_ARG)}
        context: dict[str, Any] = {"inputs": real, "steps": {}}
        multi = len(branch.steps) > 1
        shown: list[dict[str, Any]] = []
        preview: Any = None
        blind: str | None = None  # a write step that was not sent: later steps may depend on its result
        for step in branch.steps:
            if step.when and blind is None and not truthy(search(step.when, context)):
                continue
            op = step.operation

            def evaluate(expr: str) -> Any:
                return search(expr, context)

            try:
                try:
                    prepared = self.upstream.preview(op, real, evaluate, headers=plan.headers)
                except ToolFailure:
                    if blind is None:
                        raise
                    shown.append({"step": step.id, "operation": op.id, "method": op.method, "url": op.path,
                                  "note": f"depends on the result of step {blind}, which a dry run does not send"})
                    continue
                entry = {"operation": op.id, **describe_request(prepared, self.upstream.redactor, spec.sensitive)}
                shown.append({"step": step.id, **entry} if multi else entry)
                if dry.native:  # the upstream's own preview: the same request with its switch set
                    _, payload = await self._fetch(plan, op, {**real, DRY_RUN_INTERNAL_ARG: dry.value}, evaluate)
                    if payload.kind == "json":
                        preview = self.upstream.redactor.value(payload.value)
                    elif payload.kind == "text":
                        preview = self.upstream.redactor.text(payload.value)
                elif op.method.upper() in SAFE_METHODS and multi:  # a read a later step needs: run it
                    resp, payload = await self._fetch(plan, op, real, evaluate, step.id)
                    context["steps"][step.id] = _step_value(payload, resp.status)
                else:
                    blind = blind or step.id
                    context["steps"][step.id] = None
            except ToolFailure as failure:
                if multi:
                    failure.error.step = step.id
                raise
        if not needs_confirmation(branch):
            confirmation = "not needed"
        elif branch.risk in self.policy.auto_approve:
            confirmation = f"auto-approved on this server (--auto-approve {branch.risk})"
        else:
            confirmation = "the real call asks the user to confirm first"
        structured: dict[str, Any] = {
            "dryRun": True, "requests": shown, "sideEffects": list(branch.side_effects or spec.side_effects),
            "confirmation": confirmation,
        }
        if preview is not None:
            structured["preview"] = preview
        hidden = argument_notes(shown_arguments(spec, branch, real, self.upstream.redactor))
        if hidden:  # where the requests above hold what a reader cannot see (display.py)
            structured["argumentWarnings"] = hidden
        if dry.mode == "required":
            structured["dryRunToken"], structured["expiresAt"] = self.policy.dry_run_token(
                spec, branch, arguments, plan.caller)
        shaped = Shaper(ResponseSpec(max_bytes=max(spec.response.max_bytes, 16_000)), None).json(structured)
        return results.success(shaped, results.meta(plan.record.trace_id, plan.record.requests))

    def _audit_record(
        self, name: str, tool: _Tool | None, arguments: Mapping[str, Any] | None, caller: Caller, trace: str
    ) -> AuditRecord:
        spec = tool.spec if tool is not None else None
        shown = name if len(name) <= 200 else name[:200] + "…"
        args = redact_arguments(dict(arguments or {}), spec.sensitive if spec else (), self.upstream.redactor.text) \
            if self.auditor.enabled else {}
        return AuditRecord(event="tool_call", trace_id=trace, caller={"id": caller.id, "transport": caller.transport},
                           name=shown, arguments=args, risk=spec.risk if spec else None,
                           audit_event=spec.audit_event if spec else None)

    def _audit_denial(self, record: AuditRecord, code: str | None, outcome: str = "denied") -> None:
        """The line of a call that ends in a protocol answer (unknown tool, input required, bad state)."""
        try:
            self.auditor.result(record, outcome, code)
        except AuditError as e:
            log.error("traceId %s: %s", record.trace_id, e)
            raise MCPError(code=types.INTERNAL_ERROR, message=f"the audit log cannot be written; traceId "
                           f"{record.trace_id}") from None

    def _audit_result(self, record: AuditRecord, out: types.CallToolResult, code: str) -> types.CallToolResult:
        """Write the call's result line; when that fails the client gets AUDIT_FAILED, not the result."""
        if not self.auditor.enabled:
            return out
        if not out.is_error:
            outcome, error = ("dry_run" if record.dry_run else "ok"), None
        else:
            error = code
            no_requests = not any("status" in r for r in record.requests)
            if code == ErrorCode.CONFIRMATION_DECLINED:
                outcome = "declined"
            elif code in _DENIALS or (code == ErrorCode.RATE_LIMITED and no_requests):
                outcome = "denied"
            else:
                outcome = "error"
        try:
            self.auditor.result(record, outcome, error)
        except AuditError as e:
            log.error("tool %s traceId %s: %s; the result is withheld", record.name, record.trace_id, e)
            sent = any("status" in r for r in record.requests) or record.attempted
            return results.failure(_audit_failed(record.trace_id, sent=sent), results.meta(record.trace_id, []))
        return out

    def _success(self, tool: _Tool, shaped: Shaped, meta: dict[str, Any]) -> types.CallToolResult:
        return results.success(shaped, meta, links=self.catalog.links(tool.spec, shaped.structured))

    def _result(
        self, tool: _Tool, branch: Branch, payload: Payload, last: UpstreamResponse | None, meta: dict[str, Any]
    ) -> types.CallToolResult:
        shaper, redact = tool.shaper_of(branch), self.upstream.redactor
        if payload.kind == "binary":
            repaired = shaper.placeholder(payload.media_type) if tool.spec.output_schema is not None else None
            if tool.spec.output_schema is not None and repaired is None:
                raise ToolFailure.of(
                    ErrorCode.UPSTREAM_INVALID_RESPONSE,
                    f"the upstream sent {payload.media_type or 'binary data'} where the documented JSON was expected",
                )
            uri = last.url if last else f"openapi2mcp:{tool.spec.name}"
            return results.binary(payload.raw, payload.media_type, uri, meta, cap=self.max_binary_bytes,
                                  repaired=repaired)
        if payload.kind == "empty":
            shaped = shaper.empty(last.status if last else 204)
        elif payload.kind == "text":
            shaped = shaper.text(redact.text(payload.value), payload.media_type)
        else:
            shaped = shaper.json(redact.value(payload.value))
        return self._success(tool, shaped, meta)

    # ------------------------------------------------------------------ MCP

    def build_server(self, *, stateless: bool = False) -> Server[Any]:
        """The SDK low-level server: handlers are thin; `list_tools`/`call` do the work.

        `stateless`: served over stateless HTTP, where a 2025-11-25 client has no session to be asked in.
        """

        async def on_list_tools(ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
            try:
                return self.list_tools(params.cursor if params else None, caller_from_context(ctx, self.local))
            except MCPError:
                raise
            except Exception:
                log.error("tools/list failed:\n%s", traceback.format_exc())
                raise MCPError(code=types.INTERNAL_ERROR, message="internal error; see the server log") from None

        async def on_call_tool(
            ctx: Any, params: types.CallToolRequestParams
        ) -> types.CallToolResult | types.InputRequiredResult:
            caller = caller_from_context(ctx, self.local)
            # only the overlay's upstream.forward_headers of the inbound request reach the upstream
            forwarded = FORWARDED_HEADERS.set(inbound_headers(ctx, self.manifest.upstream.forward_headers) or None)
            try:
                return await self.call(params.name, params.arguments, caller=caller,
                                       asker=Asker.from_context(ctx, params, stateless=stateless))
            except InputRequired as needed:  # 2026-07-28: the client asks the user and calls again
                return needed.result
            finally:
                FORWARDED_HEADERS.reset(forwarded)

        server = self.manifest.server
        mcp_server = Server(
            server.name,
            version=server.version,
            title=server.title,
            instructions=server.instructions,
            on_list_tools=on_list_tools,
            on_call_tool=on_call_tool,
            get_tool_input_schema=self.input_schema,
        )
        self.catalog.install(mcp_server)  # resources/*, prompts/*: only when the overlay defines some
        return mcp_server

    def health(self) -> dict[str, Any]:
        out: dict[str, Any] = {"status": "ok", "tools": len(self._tools), "manifest": self.manifest.content_hash}
        if self.repairs:  # values of upstream responses that did not fit the documented schema, per tool
            out["repairs"] = dict(self.repairs)
        return out

    async def aclose(self) -> None:
        await self.upstream.aclose()
        self.auditor.close()


def _sendable(out: types.CallToolResult) -> bool:
    """Whether the SDK can serialise the result (it stops at 255 levels of nesting; text is always fine)."""
    if out.structured_content is None:
        return True
    try:
        pydantic_core.to_json(out.structured_content)
    except (ValueError, TypeError):  # PydanticSerializationError is a ValueError
        return False
    return True


def _step_value(payload: Payload, status: int) -> Any:
    """What later steps' expressions see of a step: JSON, text, {"status"} when empty."""
    if payload.kind in ("json", "text"):
        return payload.value
    if payload.kind == "empty":
        return {"status": status}
    return None


# ============================================================================ serving


async def serve_stdio(
    manifest: Manifest, *, log_level: str | int | None = None, runtime: Runtime | None = None, **opts: Any
) -> None:
    """Serve over stdin/stdout (logs go to stderr; the SDK points fd 1 at stderr while serving).

    The session ends when the client closes stdin, and also, quietly, when it goes away in any
    other way (stdout closed: EPIPE; see stdio.py): one log line, no error. Calls in flight are
    cancelled (their audit lines say so).
    """
    if log_level is not None:
        configure_logging(log_level)
    runtime = runtime or Runtime(manifest, **opts)
    server = runtime.build_server()
    try:
        async with stdin_lines() as lines, stdio_server(stdin=lines) as (read, write):  # type: ignore[arg-type]
            await server.run(read, write, server.create_initialization_options())
    except Exception as e:  # the transport's task group wraps what its reader and writer raise
        why = client_gone(e)
        if why is None:
            raise
        log.warning("the client went away: %s; the session is over", why)
    finally:
        await runtime.aclose()


def transport_security(
    host: str, allowed_hosts: list[str] | None, allowed_origins: list[str] | None
) -> TransportSecuritySettings:
    """DNS-rebinding protection: loopback is allowed by default; other binds must name their hosts.

    `allowed_hosts=["*"]` turns the Host/Origin check off explicitly (e.g. behind a proxy that
    checks Host itself).
    """
    if allowed_hosts == ["*"]:
        return TransportSecuritySettings(enable_dns_rebinding_protection=False)
    hosts: list[str] = []
    for h in allowed_hosts or []:
        hosts += [h] if h.endswith(":*") or ":" in h.rsplit("]", 1)[-1] else [h, f"{h}:*"]
    if is_loopback(host):
        hosts += ["127.0.0.1:*", "localhost:*", "[::1]:*"]
    elif not hosts:
        raise ConfigError(
            f"serving on {host} (not loopback) needs allowed_hosts: the Host header values clients use, "
            "e.g. mcp.example.com or mcp.example.com:8000 ('*' turns the DNS-rebinding check off)"
        )
    if allowed_origins is None:
        origins = [f"{scheme}://{h}" for h in hosts for scheme in ("http", "https")]
    else:
        origins = list(allowed_origins)
    return TransportSecuritySettings(enable_dns_rebinding_protection=True, allowed_hosts=hosts, allowed_origins=origins)


def http_app(
    manifest: Manifest,
    *,
    host: str = "127.0.0.1",
    path: str = "/mcp",
    stateless: bool = False,
    json_response: bool = True,
    allowed_hosts: list[str] | None = None,
    allowed_origins: list[str] | None = None,
    runtime: Runtime | None = None,
    port: int | None = None,
    log_level: str | int | None = None,
    auth: AuthConfig | None = None,
    no_auth: bool = False,
    limits: HttpLimits | None = None,
    **opts: Any,
) -> Starlette:
    """A Starlette app: the MCP endpoint at `path` plus `GET /healthz`; closes the client on shutdown.

    Takes the options of `serve_http` (`port` is unused here); the rest go to `Runtime`. `auth`
    (auth.auth_config) protects everything but /healthz and the protected-resource metadata; a
    non-loopback `host` without it needs `no_auth=True`. `limits` (httpguard.py): the sessions per caller.
    """
    from openapi2mcp.runtime import auth as access_auth  # the HTTP transport's auth; stdio never loads it
    from openapi2mcp.runtime import httpguard

    if log_level is not None:
        configure_logging(log_level)
    security = transport_security(host, allowed_hosts, allowed_origins)
    config = auth or access_auth.AuthConfig()
    if not config.enabled and not is_loopback(host) and not no_auth:
        raise ConfigError(access_auth.needs_auth_message(host))
    access_auth.require_public_url(config, host_checked=security.enable_dns_rebinding_protection)
    limits = limits or HttpLimits()
    runtime = runtime or Runtime(manifest, **opts)
    server = runtime.build_server(stateless=stateless)
    mcp_app = server.streamable_http_app(
        streamable_http_path=path,
        json_response=json_response,
        stateless_http=stateless,
        transport_security=security,
        host=host,
    )

    async def healthz(request: Request) -> JSONResponse:
        return JSONResponse(runtime.health())

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        try:
            async with server.session_manager.run():  # Mount does not run the sub-app's lifespan
                yield
        finally:
            await runtime.aclose()

    routes: list[Route | Mount] = [Route("/healthz", healthz, methods=["GET"])]
    # outermost: the Host check, before anything builds a URL from the Host (httpguard.py)
    middleware = [Middleware(httpguard.HostGuard, settings=security, open_paths=frozenset({"/healthz"}))]
    if config.enabled:
        routes += access_auth.metadata_routes(config, path, scopes_supported=runtime.scopes_supported(),
                                              resource_name=manifest.server.title or manifest.server.name)
        middleware += access_auth.middleware(config, mcp_path=path, challenge=runtime.step_up_challenge)
    if not stateless and limits.sessions_per_caller:  # after auth: a caller is its token's subject
        middleware.append(Middleware(httpguard.SessionCap, path=path, limit=limits.sessions_per_caller,
                                     live=httpguard.sdk_sessions(server.session_manager)))
    middleware.append(Middleware(httpguard.WholeBody))  # the MCP app never starts on half a body
    routes.append(Mount("/", app=mcp_app))
    return Starlette(routes=routes, middleware=middleware, lifespan=lifespan)


async def serve_http(
    manifest: Manifest,
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    path: str = "/mcp",
    stateless: bool = False,
    json_response: bool = True,
    allowed_hosts: list[str] | None = None,
    allowed_origins: list[str] | None = None,
    log_level: str | int | None = None,
    limits: HttpLimits | None = None,
    **opts: Any,
) -> None:
    """Serve Streamable HTTP with uvicorn until interrupted (graceful shutdown closes the client)."""
    import uvicorn  # only the HTTP transport needs it

    from openapi2mcp.runtime.httpguard import uvicorn_settings
    from openapi2mcp.runtime.options import HttpLimits

    limits = limits or HttpLimits()

    app = http_app(
        manifest,
        log_level=log_level,
        host=host,
        path=path,
        stateless=stateless,
        json_response=json_response,
        allowed_hosts=allowed_hosts,
        allowed_origins=allowed_origins,
        limits=limits,
        **opts,
    )
    level = logging.getLevelName(log_level) if isinstance(log_level, int) else (log_level or "info")
    config = uvicorn.Config(app, host=host, port=port, log_level=str(level).lower(), lifespan="on",
                            timeout_graceful_shutdown=10, **uvicorn_settings(limits))
    await uvicorn.Server(config).serve()
