"""The tool contract on the wire (seed 002): `_meta["openapi2mcp/contract"]` of every listed tool.

Derived from the Manifest's ToolSpec when a tool is listed, never stored: the Manifest stays the
one source of truth (its hash and older Manifests are untouched) and the contract can say what
the serving flags change (`--auto-approve`, `--state`, `--audit-log`, `--rate-limit`:
`ContractContext`). `inspect`, `docs` and the size counters use the same function with the
Manifest's own context, so what they show is what a client gets from a server started without
those flags.

Every key is always present (null or empty when it does not apply), so a client reads the
contract without knowing its defaults. A collapsed tool (actions or variants) also lists each
branch's own contract under `actions` (by action value) or `variants` (in the order they are
tried); the tool-level values are then the most cautious over its branches, and a branch's
failure modes are the tool's plus the branch's own `failureModes`. docs/contract.md has the
meaning of each key; `openapi2mcp schema contract` prints the JSON Schema (`contract_json_schema`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field

from openapi2mcp.errors import ErrorCode
from openapi2mcp.manifest.failures import KINDS_OF_STATUS, status_outcome
from openapi2mcp.manifest.model import (
    IDEMPOTENT_METHODS,
    RISK_ORDER,
    SAFE_METHODS,
    Branch,
    FailureMode,
    Risk,
    ToolSpec,
)
from openapi2mcp.manifest.policy import changes_state, needs_confirmation, step_up_scope

CONTRACT_KEY: Final = "openapi2mcp/contract"
CONTRACT_VERSION: Final = 1

Confirmation = Literal["none", "required", "autoApproved"]
Idempotency = Literal["safe", "idempotent", "keyed", "none"]
DryRun = Literal["none", "supported", "required"]

# The most cautious value first wins when a collapsed tool's branches differ.
_CONFIRMATION_ORDER: Final = ("none", "autoApproved", "required")
_IDEMPOTENCY_ORDER: Final = ("safe", "idempotent", "keyed", "none")
_DRY_RUN_ORDER: Final = ("none", "supported", "required")

# What any call can end with, whatever the tool: the argument check, the transport, the result.
_EVERY_CALL: Final[dict[str, bool]] = {
    ErrorCode.ARGUMENT_INVALID: False,  # checked against inputSchema before anything is sent
    ErrorCode.CONFIGURATION_ERROR: False,  # the server lacks a setting (a secret, a paging style)
    ErrorCode.INTERNAL_ERROR: False,
    ErrorCode.RESPONSE_TOO_LARGE: False,
    ErrorCode.UPSTREAM_INVALID_RESPONSE: False,  # the body does not decode or does not fit the schema
    ErrorCode.UPSTREAM_TIMEOUT: True,
    ErrorCode.UPSTREAM_UNAVAILABLE: True,
}


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)


# Error code -> retryable: true when repeating the same call later can succeed (the error body's
# own `retryable` and `retryAfter` say so for one call), false when it cannot.
Failures = dict[str, bool]
_FAILURES_DOC: Final = ("Error code -> retryable: every `code` an isError result of this tool can carry; true when "
                        "repeating the same call later can succeed (the error body's own `retryable` and `retryAfter` "
                        "say so for one call).")


class BranchContract(_Model):
    """What one action or variant of a collapsed tool does (the keys that differ between branches)."""

    risk: Risk
    autonomous: bool = Field(description="An agent may run it without a person's approval (risk low or medium "
                             "and no confirmation).")
    confirmation: Confirmation
    side_effects: list[str] = Field(alias="sideEffects")
    idempotency: Idempotency
    dry_run: DryRun = Field(alias="dryRun")
    failure_modes: Failures = Field(alias="failureModes", description="Besides the tool's failureModes: what only "
                                    "this branch can return (error code -> retryable).")


class VariantContract(BranchContract):
    """A variant: taken when every argument of `when` is given (the first that matches; [] = otherwise)."""

    when: list[str]


class ToolContract(_Model):
    """`_meta["openapi2mcp/contract"]` of a listed tool: its whole contract, before any call."""

    v: Literal[1] = Field(CONTRACT_VERSION, description="The contract format; a new version adds keys only.")
    category: str | None = Field(description="The business area (overlay `category`).")
    risk: Risk = Field(description="low | medium | high | critical (forbidden tools are never listed).")
    autonomous: bool = Field(description="An agent may run it without a person's approval: risk low or medium "
                             "and no confirmation.")
    confirmation: Confirmation = Field(description="What the server does before a real call: none, required (it "
                                       "asks the user by elicitation), autoApproved (it would ask, but runs with "
                                       "--auto-approve for this risk).")
    step_up: str | None = Field(alias="stepUp", description="The extra scope a caller's token needs (null: none).")
    permissions: list[str] = Field(description="Scopes a caller needs to see and call it ([]: none).")
    side_effects: list[str] = Field(alias="sideEffects", description="State changes beyond the result.")
    idempotency: Idempotency = Field(description="safe: changes nothing; idempotent: repeating has the same "
                                     "effect; keyed: the server sends an idempotency key, a retry is not a "
                                     "second effect; none: a repeat may act twice.")
    dry_run: DryRun = Field(alias="dryRun", description="supported: `dryRun: true` previews the call; required: "
                            "a real call needs the `dryRunToken` of such a preview.")
    audit_event: str | None = Field(alias="auditEvent", description="The event name of its audit log lines.")
    failure_modes: Failures = Field(alias="failureModes", description=_FAILURES_DOC)
    actions: dict[str, BranchContract] | None = Field(
        None, description="Per value of the `action` argument (only for tools with actions).")
    variants: list[VariantContract] | None = Field(
        None, description="Per variant, in the order they are tried (only for tools with variants).")

    def wire(self) -> dict[str, Any]:
        """The JSON a client gets: every key, except `actions`/`variants` on a tool without them."""
        return self.model_dump(mode="json", by_alias=True, exclude_none=False,
                               exclude={k for k in ("actions", "variants") if getattr(self, k) is None})


@dataclass(frozen=True)
class ContractContext:
    """What the serving flags add to the Manifest's contract (the defaults: a server without flags)."""

    auto_approve: frozenset[str] = field(default_factory=frozenset)  # --auto-approve
    shared_state: bool = False  # --state: confirmations, tokens, limits and keyed writes need the store
    audited: bool = False  # --audit-log: a call whose line cannot be written fails
    server_limit: bool = False  # --rate-limit or the overlay's upstream.rate_limit


def tool_contract(tool: ToolSpec, context: ContractContext | None = None) -> ToolContract:
    """The contract of one tool as the server serving it with `context` keeps it."""
    ctx = context or ContractContext()
    live = [b for b in tool.branches if b.risk != "forbidden"] or tool.branches
    limited = ctx.server_limit or tool.rate_limit is not None
    common = _tool_failures(tool, ctx, limited)
    own = [_branch_failures(b, ctx, limited) for b in live]
    shared = set.intersection(*(set(f) for f in own)) if own else set()
    common.update({code: own[0][code] for code in shared})
    parts = [_branch_contract(b, ctx, {k: v for k, v in f.items() if k not in shared})
             for b, f in zip(live, own, strict=True)]
    out: dict[str, Any] = {
        "category": tool.category,
        "risk": tool.risk,
        "autonomous": all(p.autonomous for p in parts),
        "confirmation": _most(_CONFIRMATION_ORDER, (p.confirmation for p in parts)),
        "stepUp": step_up_scope(tool),
        "permissions": list(tool.permissions),
        "sideEffects": list(tool.side_effects),
        "idempotency": _most(_IDEMPOTENCY_ORDER, (p.idempotency for p in parts)),
        "dryRun": _most(_DRY_RUN_ORDER, (p.dry_run for p in parts)),
        "auditEvent": tool.audit_event,
        "failureModes": _sorted(common),
    }
    if tool.dispatch == "action":
        out["actions"] = {b.key: p for b, p in zip(live, parts, strict=True)}
    elif tool.dispatch == "presence":
        out["variants"] = [VariantContract(**dict(p), when=list(b.when)) for b, p in zip(live, parts, strict=True)]
    return ToolContract.model_validate(out)


def contract_json_schema() -> dict[str, Any]:
    """The JSON Schema (2020-12) of `_meta["openapi2mcp/contract"]` (`openapi2mcp schema contract`)."""
    schema = ToolContract.model_json_schema(by_alias=True, mode="serialization")
    schema["required"] = ["v", *schema["required"]]  # always sent
    for key in ("actions", "variants"):  # absent, never null, on a tool without them
        held = schema["properties"][key]
        kept = {k: v for k, v in held.items() if k not in ("anyOf", "default")}
        schema["properties"][key] = {**next(a for a in held["anyOf"] if a.get("type") != "null"), **kept}
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", **schema}


# ----------------------------------------------------------------------------- the parts


def _branch_contract(branch: Branch, ctx: ContractContext, failures: Failures) -> BranchContract:
    asks = needs_confirmation(branch)
    confirmation: Confirmation = ("autoApproved" if branch.risk in ctx.auto_approve else "required") if asks \
        else "none"
    return BranchContract(
        risk=branch.risk,
        autonomous=not asks and RISK_ORDER[branch.risk] <= RISK_ORDER["medium"],
        confirmation=confirmation,
        side_effects=list(branch.side_effects),
        idempotency=_idempotency(branch),
        dry_run=branch.dry_run.mode if branch.dry_run is not None else "none",
        failure_modes=_sorted(failures),
    )


def _idempotency(branch: Branch) -> Idempotency:
    writes = [s.operation.method.upper() for s in branch.steps if changes_state(branch, s.operation)]
    if not writes:
        return "safe"
    if branch.idempotency is not None:
        return "keyed"
    # PUT and DELETE are idempotent by HTTP's rules; a GET rated as a write (policy.changes_state) is not known to be
    return "idempotent" if all(m in IDEMPOTENT_METHODS - SAFE_METHODS for m in writes) else "none"


def _tool_failures(tool: ToolSpec, ctx: ContractContext, limited: bool) -> Failures:
    """What every call of the tool can end with: the transport, each kind of upstream status, admission."""
    found = _outcomes(tool.failure_modes) if tool.failure_modes else dict(_BUILTIN_OUTCOMES)
    if limited:
        found[ErrorCode.RATE_LIMITED] = True
    if tool.step_up:
        found[ErrorCode.PERMISSION_DENIED] = False
    if ctx.shared_state and limited:
        found[ErrorCode.STATE_UNAVAILABLE] = True
    if ctx.audited:
        found[ErrorCode.AUDIT_FAILED] = False
    return found


def _outcomes(modes: Mapping[str, FailureMode]) -> Failures:
    """Every call's failures and those of each kind of upstream status, under the overlay's `modes`."""
    found = {str(code): retry for code, retry in _EVERY_CALL.items()}
    for status in KINDS_OF_STATUS:
        code, retry = status_outcome(status, modes)
        found[code] = found.get(code, False) or retry
    return found


# Most tools map no status of their own: their part is the same for all (11,000 tools' worth in Graph).
_BUILTIN_OUTCOMES: Final = _outcomes({})


def _branch_failures(branch: Branch, ctx: ContractContext, limited: bool) -> Failures:
    """What only some branches can end with: the user's answer, a missing dry run, a stale cursor, the store."""
    found: dict[str, bool] = {}
    asks = needs_confirmation(branch) and branch.risk not in ctx.auto_approve
    if asks:
        found[ErrorCode.CONFIRMATION_REQUIRED] = False  # the client cannot ask its user
        found[ErrorCode.CONFIRMATION_DECLINED] = False
    required = branch.dry_run is not None and branch.dry_run.mode == "required"
    if required:
        found[ErrorCode.DRY_RUN_REQUIRED] = False
    if branch.pagination is not None:
        found[ErrorCode.CURSOR_INVALID] = False
    if ctx.shared_state and not limited and (asks or required or branch.idempotency is not None):
        found[ErrorCode.STATE_UNAVAILABLE] = True
    return {str(code): retry for code, retry in found.items()}


T = TypeVar("T", bound=str)


def _most(order: Sequence[str], values: Iterable[T]) -> T:
    """The most cautious of `values` by `order` (later is more cautious)."""
    return max(values, key=order.index)


def _sorted(failures: Mapping[str, bool]) -> Failures:
    return {code: failures[code] for code in sorted(failures)}
