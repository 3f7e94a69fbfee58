"""Admission: who may call, how often, and what a call must carry before anything is sent.

In this order, before any request: the step-up scope a tool needs (access.py) and the rate limits
(limits.py) in `admit`; then, once the branch is known, the safety contract (`gate`, policy.py):
a dry run previews; a real call of a `dry_run: required` branch needs its dry-run token, then the
user's confirmation when the branch needs one; idempotent branches get their derived
Idempotency-Key. The result is a `Plan`: what the steps are sent with.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from openapi2mcp.errors import ErrorCode, ToolFailure
from openapi2mcp.manifest import DRY_RUN_ARG, Branch, ToolSpec
from openapi2mcp.runtime.access import Caller, needs_step_up
from openapi2mcp.runtime.audit import AuditRecord
from openapi2mcp.runtime.limits import RateLimiter
from openapi2mcp.runtime.policy import Asker, Policy
from openapi2mcp.runtime.tools import Tool

# what policy.confirm records after reading a valid request state (the answered retry of a confirmation)
_ANSWERED: Final = frozenset({"confirmed", "declined", "cancelled"})


@dataclass
class Pending:
    """A rate-limit charge not taken yet (a 2026-07-28 call with a request state): `due` until settled."""

    due: bool


@dataclass
class Plan:
    """One admitted call: who, which branch, the headers it sends (idempotency key), dry run or not."""

    tool: ToolSpec
    branch: Branch
    caller: Caller
    record: AuditRecord
    headers: dict[str, str]
    dry_run: bool


class Admission:
    """The gates of tools/call: step-up and rate limits (`admit`), then the safety contract (`gate`)."""

    def __init__(self, limiter: RateLimiter, policy: Policy) -> None:
        self.limiter = limiter
        self.policy = policy

    async def admit(self, tool: Tool, caller: Caller, pending: Pending | None = None) -> None:
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
            await self.charge(tool, caller)

    async def charge(self, tool: Tool, caller: Caller) -> None:
        """One token from each bucket of this call, or RATE_LIMITED (retryable, with the wait)."""
        refusal = await self.limiter.admit(tool.spec.name, caller.id)
        if refusal is not None:
            raise ToolFailure.of(ErrorCode.RATE_LIMITED, refusal.message(), retryable=True,
                                 retry_after=refusal.retry_after)

    async def gate(
        self, tool: Tool, branch: Branch, arguments: dict[str, Any], caller: Caller, asker: Asker | None,
        record: AuditRecord, pending: Pending | None = None,
    ) -> Plan:
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
            token = None
            if branch.dry_run is not None and branch.dry_run.mode == "required":
                token = self.policy.check_dry_run(spec, branch, arguments, caller)
                await self.policy.spend_dry_run(spec, branch, token, claim=False)  # spent: refused before asking
            try:
                await self.policy.confirm(spec, branch, arguments, caller, asker, record)
            finally:
                if pending is not None and pending.due and record.confirmation in _ANSWERED:
                    pending.due = False  # the state was valid and is now spent: its first leg paid for this call
            if token is not None:
                await self.policy.spend_dry_run(spec, branch, token, claim=True)  # confirmed: now it is used
        if pending is not None and pending.due:
            pending.due = False
            await self.charge(tool, caller)  # a request state that answered nothing buys nothing
        return Plan(tool=spec, branch=branch, caller=caller, record=record, headers=headers, dry_run=dry)
