"""tools/call from start to end: one call's checks, gates, requests, result and audit line.

`Calls.call` finds the tool as the caller sees it (an unknown or invisible tool is a JSON-RPC
error, -32602), admits the call (admission.py), checks the arguments and picks the branch
(tools.py), gates it (the safety contract), runs it under the call's deadline (steps.py, or
dryrun.py) and turns every failure into an `isError` result with a stable code and a traceId:
no exception text reaches a client (internal failures are logged, redacted, with the traceId).
With an audit log every call writes one line before it answers (audit.py).
"""

from __future__ import annotations

import contextlib
import json
import logging
import time
import traceback
import uuid
from collections.abc import Mapping
from typing import Any, Final

import anyio
import mcp_types as types
import pydantic_core
from mcp.shared.exceptions import MCPError

from openapi2mcp import result as results
from openapi2mcp.errors import ErrorCode, ToolError, ToolFailure
from openapi2mcp.manifest import Branch
from openapi2mcp.runtime.access import Caller, needs_step_up, visible
from openapi2mcp.runtime.admission import Admission, Pending, Plan
from openapi2mcp.runtime.audit import AuditError, Auditor, AuditRecord, redact_arguments, repairs_summary
from openapi2mcp.runtime.dryrun import dry_run
from openapi2mcp.runtime.policy import Asker, InputRequired
from openapi2mcp.runtime.state import KeyedResults
from openapi2mcp.runtime.steps import Steps
from openapi2mcp.runtime.telemetry import CURRENT_TRACE, CallSeen, Telemetry
from openapi2mcp.runtime.tools import Tool, check_arguments, choose_branch
from openapi2mcp.runtime.views import Views
from openapi2mcp.shape import drop_nulls
from openapi2mcp.upstream import Redactor

log = logging.getLogger("openapi2mcp.runtime")

_DENIALS: Final = frozenset({
    ErrorCode.CONFIRMATION_REQUIRED, ErrorCode.DRY_RUN_REQUIRED, ErrorCode.PERMISSION_DENIED,
})


def _audit_failed(trace: str, *, sent: bool) -> ToolError:
    what = ("the request was sent, but its outcome cannot be recorded: check before repeating it" if sent
            else "the write was not sent")
    return ToolError(code=ErrorCode.AUDIT_FAILED, message=f"the audit log cannot be written; {what}",
                     traceId=trace)


class Calls:
    """Every tools/call of one Runtime; `repairs` counts the repaired values per tool (health)."""

    def __init__(self, views: Views, admission: Admission, steps: Steps, auditor: Auditor, redactor: Redactor, *,
                 deadline: float, results: KeyedResults | None = None, telemetry: Telemetry | None = None) -> None:
        self.deadline = deadline  # seconds a call may take (TimeoutSpec.total)
        self.results = results  # --state: keyed writes' first results, for their retries (state.py)
        self.telemetry = telemetry or Telemetry()
        self.views = views
        self.admission = admission
        self.steps = steps
        self.auditor = auditor
        self.redactor = redactor
        self.repairs: dict[str, int] = {}  # tool -> repaired values so far (drifting upstreams, see _drifted)
        self._drift_logged: set[tuple[str, str, str, str]] = set()

    async def call(
        self,
        name: str,
        arguments: Mapping[str, Any] | None,
        *,
        caller: Caller,
        trace_id: str | None = None,
        asker: Asker | None = None,
    ) -> types.CallToolResult:
        """Run one tool call. Unknown (or forbidden) tools raise MCPError(-32602); all else is a result.

        A tool the caller lacks the permissions for is exactly an unknown tool (access.py).
        `asker` says how to reach the user for a confirmation (policy.Asker; None: no way, so a
        call that needs one gets CONFIRMATION_REQUIRED). On 2026-07-28 the answer may be an
        input-required result: then `policy.InputRequired` is raised and the MCP handler returns it.
        With an audit log, every call writes its line before it returns or raises (audit.py).
        """
        answered = asker is not None and asker.request_state is not None
        if not self.telemetry.enabled:
            return await self._serve(name, arguments, caller, trace_id, asker, None)
        with self.telemetry.call(name, answered_from_state=answered) as seen:  # a span, metrics (telemetry.py)
            seen.result = await self._serve(name, arguments, caller, trace_id or seen.trace_id, asker, seen)
            return seen.result

    async def _serve(
        self, name: str, arguments: Mapping[str, Any] | None, caller: Caller, trace_id: str | None,
        asker: Asker | None, seen: CallSeen | None,
    ) -> types.CallToolResult:
        tool = self.views.tools.get(name)
        trace = trace_id or uuid.uuid4().hex
        record = self._audit_record(name, tool, arguments, caller, trace)
        if seen is not None:
            seen.record = record
        traced = CURRENT_TRACE.set(trace)  # the log lines of this call carry it
        try:
            if tool is None or not visible(tool.spec, caller):
                self._audit_denial(record, "UNKNOWN_TOOL")
                raise MCPError(code=types.INVALID_PARAMS, message=f"Unknown tool: {name}")
            # 2026-07-28: a retry carrying a request state is charged at the gate, unless it is the
            # answered retry of a confirmation whose first leg was charged (one round trip, one token)
            pending = Pending(due=asker is not None and asker.request_state is not None)
            try:
                return await self._call(tool, name, arguments, record, caller, asker, pending)
            finally:
                if pending.due:  # refused before its gate: charged like any call, when a token is there
                    with anyio.CancelScope(shield=True), contextlib.suppress(ToolFailure):  # a store that is down
                        await self.admission.limiter.admit(name, caller.id)
        finally:
            CURRENT_TRACE.reset(traced)

    async def _call(
        self, tool: Tool, name: str, arguments: Mapping[str, Any] | None, record: AuditRecord, caller: Caller,
        asker: Asker | None, pending: Pending,
    ) -> types.CallToolResult:
        trace = record.trace_id
        requests: list[dict[str, Any]] = record.requests
        started = time.monotonic()
        outcome = "ok"
        try:
            await self.admission.admit(tool, caller, pending)
            out = await self._run(tool, dict(arguments or {}), record, caller=caller, asker=asker, pending=pending)
        except InputRequired:
            self._audit_denial(record, None, "input_required")
            raise
        except anyio.get_cancelled_exc_class():  # not an Exception: the client cancelled or went away
            log.info("tool=%s traceId=%s outcome=cancelled requests=%d", name, trace, len(requests))
            record.outcome = "cancelled"
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
                update={"trace_id": trace, "message": self.redactor.text(failure.error.message)}
            )
            outcome = error.code
            out = results.failure(error, results.meta(trace, requests))
        except Exception:
            outcome = ErrorCode.INTERNAL_ERROR
            log.error(
                "tool %s failed, traceId %s:\n%s",
                name,
                trace,
                self.redactor.text(traceback.format_exc()),
            )
            out = results.failure(results.internal_error(trace), results.meta(trace, requests))
        if not sendable(out):  # the audit line never says ok for a result the client cannot get
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

    def step_up_challenge(self, name: str, caller: Caller, arguments: Any = None) -> list[str]:
        """For the HTTP auth gate: the scopes to ask for before this caller may call `name` ([]: none).

        Tools the caller may not see give [] so that the call is answered as an unknown tool. A
        refusal (the gate's HTTP 403) never reaches `call`, so its audit line is written here.
        """
        tool = self.views.tools.get(name)
        if tool is None or not visible(tool.spec, caller):
            return []
        needed = needs_step_up(tool.spec, caller)
        if needed:
            args = arguments if isinstance(arguments, dict) else None
            record = self._audit_record(name, tool, args, caller, uuid.uuid4().hex)
            with contextlib.suppress(MCPError):  # refused either way; an audit failure is logged
                self._audit_denial(record, ErrorCode.PERMISSION_DENIED)
        return needed

    async def _run(
        self, tool: Tool, arguments: dict[str, Any], record: AuditRecord, *, caller: Caller, asker: Asker | None,
        pending: Pending | None = None,
    ) -> types.CallToolResult:
        trace = record.trace_id
        if log.isEnabledFor(logging.DEBUG):
            shown = {k: "***" if k in tool.spec.sensitive else v for k, v in arguments.items()}
            log.debug(
                "tool=%s traceId=%s arguments=%s",
                tool.spec.name,
                trace,
                self.redactor.text(json.dumps(shown, default=str)[:2000]),
            )
        arguments, nulled = drop_nulls(tool.arguments, arguments)
        check_arguments(tool.arguments, arguments, nulled)
        branch, arguments = choose_branch(tool, arguments)
        plan = await self.admission.gate(tool, branch, arguments, caller, asker, record, pending)  # before the deadline
        key = record.idempotency_key if self.results is not None and not plan.dry_run else None
        if key is None:
            return await self._send(tool, branch, arguments, plan)
        assert self.results is not None
        first = await self.results.first(key, self.deadline)  # a retried keyed write: its first result
        if first is not None:
            first.meta = {**(first.meta or {}), results.TRACE_KEY: trace}
            record.replayed = True
            return first
        try:
            out = await self._send(tool, branch, arguments, plan)
        except BaseException:
            with anyio.CancelScope(shield=True), contextlib.suppress(ToolFailure):
                await self.results.drop(key)  # failed: a retry runs it again
            raise
        try:
            await (self.results.drop(key) if out.is_error else self.results.keep(key, out))
        except ToolFailure as e:  # the store went away after the write: the result still goes to the client
            log.warning("tool %s traceId %s: the result could not be kept for retries (%s)", tool.spec.name, trace,
                        e.error.message)
        return out

    async def _send(self, tool: Tool, branch: Branch, arguments: dict[str, Any], plan: Plan) -> types.CallToolResult:
        """The dry run, the pages or the steps of an admitted call, under the call's deadline."""
        record = plan.record
        try:
            with anyio.fail_after(self.deadline):
                if plan.dry_run:
                    return await dry_run(self.steps, self.admission.policy, tool, branch, arguments, plan)
                if branch.key in tool.pagers:
                    shaped = await self.steps.run_pages(tool, branch, arguments, plan)
                    return self.steps.success(tool, shaped, results.meta(record.trace_id, record.requests))
                payload, last = await self.steps.run_steps(tool, branch, arguments, plan)
        except TimeoutError:
            raise ToolFailure.of(
                ErrorCode.UPSTREAM_TIMEOUT,
                f"the call did not finish within {self.deadline:g} s; retry later "
                "(a write may or may not have taken effect)",
                retryable=True,
            ) from None
        return self.steps.result(tool, branch, payload, last, results.meta(record.trace_id, record.requests))

    def _audit_record(
        self, name: str, tool: Tool | None, arguments: Mapping[str, Any] | None, caller: Caller, trace: str
    ) -> AuditRecord:
        spec = tool.spec if tool is not None else None
        shown = name if len(name) <= 200 else name[:200] + "…"
        args = redact_arguments(dict(arguments or {}), spec.sensitive if spec else (), self.redactor.text) \
            if self.auditor.enabled else {}
        return AuditRecord(event="tool_call", trace_id=trace, caller={"id": caller.id, "transport": caller.transport},
                           name=shown, arguments=args, risk=spec.risk if spec else None,
                           audit_event=spec.audit_event if spec else None)

    def _audit_denial(self, record: AuditRecord, code: str | None, outcome: str = "denied") -> None:
        """The line of a call that ends in a protocol answer (unknown tool, input required, bad state)."""
        record.outcome, record.error = outcome, code
        try:
            self.auditor.result(record, outcome, code)
        except AuditError as e:
            log.error("traceId %s: %s", record.trace_id, e)
            raise MCPError(code=types.INTERNAL_ERROR, message=f"the audit log cannot be written; traceId "
                           f"{record.trace_id}") from None

    def _audit_result(self, record: AuditRecord, out: types.CallToolResult, code: str) -> types.CallToolResult:
        """Write the call's result line; when that fails the client gets AUDIT_FAILED, not the result."""
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
        record.outcome, record.error = outcome, error  # telemetry reads them too
        if not self.auditor.enabled:
            return out
        try:
            self.auditor.result(record, outcome, error)
        except AuditError as e:
            log.error("tool %s traceId %s: %s; the result is withheld", record.name, record.trace_id, e)
            sent = any("status" in r for r in record.requests) or record.attempted
            record.outcome, record.error = "error", ErrorCode.AUDIT_FAILED
            return results.failure(_audit_failed(record.trace_id, sent=sent), results.meta(record.trace_id, []))
        return out


def sendable(out: types.CallToolResult) -> bool:
    """Whether the SDK can serialise the result (it stops at 255 levels of nesting; text is always fine)."""
    if out.structured_content is None:
        return True
    try:
        pydantic_core.to_json(out.structured_content)
    except (ValueError, TypeError):  # PydanticSerializationError is a ValueError
        return False
    return True
