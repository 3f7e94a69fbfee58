"""The safety contract at run time (seed 002): confirmation, dry run, idempotency keys.

Everything here decides from the Manifest (`Branch.confirmation`, `dry_run`, `idempotency`,
`risk`), the caller (access.py) and how the request can reach the user (`Asker`):

* **Confirmation** applies per branch: `auto` means required for high and critical risk. The
  ways to ask, in order: `--auto-approve RISKS` (trusted automation; recorded in the audit line);
  on 2026-07-28 a retry that carries the user's answer (`input_responses`) and the `requestState`
  this server signed; on 2025-11-25 elicitation (`elicitation/create`) when the client declared
  it and the transport has a back channel; on 2026-07-28 an input-required result (when the
  client declared elicitation). A client that can do none of these gets CONFIRMATION_REQUIRED,
  saying what the call would do; decline and cancel give CONFIRMATION_DECLINED. No upstream
  request is made before the answer.
* **Request state** (2026-07-28) is a token of signing.py (purpose `confirm`), bound to the tool,
  the branch, the arguments and the caller, valid `CONFIRM_TTL` seconds, and accepted once: the
  runtime's `State` (state.py) claims its nonce, in this process, or with `--state` in Redis for
  every replica. Any replica with the same `OPENAPI2MCP_SIGNING_KEY` accepts it, so it works
  across replicas and stateless HTTP. A state that fails any check is refused like the SDK's
  `RequestStateBoundary` refuses one: JSON-RPC -32602 "Invalid or expired requestState" (and an
  audit line). The state is signed, not encrypted; it holds digests and a nonce, nothing secret.
* **Dry-run tokens** (purpose `dry-run`): bound the same way, valid `DryRunSpec.token_ttl`, with a
  nonce. In one process a token may be used again within its life; with a shared state
  (`--state`) it is single-use across replicas, spent once the real call is confirmed.
* **Idempotency keys**: an HMAC (purpose `idempotency`) of tool, branch, arguments and caller:
  the same call gives the same key on every replica, so a retried create is one object.
"""

from __future__ import annotations

import json
import re
import secrets
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final, Literal

import anyio
import mcp_types as types
from mcp.shared.exceptions import MCPError, NoBackChannelError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from openapi2mcp.errors import ErrorCode, ToolFailure
from openapi2mcp.manifest import (
    DRY_RUN_ARG,
    DRY_RUN_INTERNAL_ARG,
    DRY_RUN_TOKEN_ARG,
    PLACEHOLDER,
    Branch,
    ToolSpec,
    needs_confirmation,
)
from openapi2mcp.runtime.access import Caller
from openapi2mcp.runtime.audit import AuditRecord, redact_arguments
from openapi2mcp.runtime.display import Shown, show, show_text
from openapi2mcp.runtime.signing import Signer, TokenError, digest
from openapi2mcp.runtime.state import MemoryState, State
from openapi2mcp.upstream import SECRET_HEADER, EncodedBody, Prepared, Redactor, is_json_media

AUTO_APPROVE_VAR: Final = "OPENAPI2MCP_AUTO_APPROVE"
APPROVABLE: Final = ("high", "critical")
CONFIRM_KEY: Final = "confirm"  # the key of the elicitation in `input_requests` / `input_responses`
CONFIRM_TTL: Final = 600  # seconds a 2026-07-28 request state stays valid
ASK_TIMEOUT: Final = 600.0  # seconds a 2025-11-25 elicitation may wait for the user
CONFIRM_SCHEMA: Final[dict[str, Any]] = {
    "type": "object",
    "properties": {
        "confirm": {"type": "boolean", "title": "Do it", "description": "Check to let the call go ahead."},
    },
    "required": ["confirm"],
}
ELICITATION: Final = types.ClientCapabilities(elicitation=types.ElicitationCapability())
_CONTROL_ARGS: Final = frozenset({DRY_RUN_ARG, DRY_RUN_TOKEN_ARG, DRY_RUN_INTERNAL_ARG})
_NOT_SECRET_HEADERS: Final = frozenset({"idempotency-key", "content-type", "accept", "user-agent"})


def parse_auto_approve(text: str | Iterable[str] | None) -> frozenset[str]:
    """`high` / `high,critical` / `none` -> the risks whose confirmation is skipped (ValueError otherwise)."""
    if text is None:
        return frozenset()
    words = text.replace(",", " ").split() if isinstance(text, str) else [w for s in text for w in s.split(",")]
    words = [w.strip().lower() for w in words if w.strip()]
    if words in ([], ["none"]):
        return frozenset()
    bad = [w for w in words if w not in APPROVABLE]
    if bad:
        raise ValueError(
            f"--auto-approve takes {' and/or '.join(APPROVABLE)} (comma-separated), not {', '.join(bad)}"
            + (": forbidden tools are never callable" if "forbidden" in bad else "")
        )
    return frozenset(words)


def binding_arguments(arguments: Mapping[str, Any]) -> dict[str, Any]:
    """The arguments a token or key is bound to: without the dry-run controls and nulls."""
    return {k: v for k, v in arguments.items() if k not in _CONTROL_ARGS and v is not None}


# ============================================================================ how to reach the user


class InputRequired(Exception):
    """The call's answer is an input-required result (raised by `Runtime.call`, returned by the handler)."""

    def __init__(self, result: types.InputRequiredResult) -> None:
        self.result = result
        super().__init__("input required")


@dataclass(frozen=True)
class Asker:
    """How one tools/call request can reach its user (built from the SDK context by `from_context`)."""

    modern: bool = False  # 2026-07-28: input-required results instead of server-to-client requests
    can_elicit: bool = False  # the client declared the elicitation capability
    elicit: Callable[[str, dict[str, Any]], Awaitable[types.ElicitResult]] | None = None  # 2025-11-25
    input_responses: Mapping[str, Any] | None = None
    request_state: str | None = None
    stateless: bool = False  # stateless HTTP: no 2025-11-25 session to send a request in

    @classmethod
    def from_context(cls, ctx: Any, params: types.CallToolRequestParams, *, stateless: bool = False) -> Asker:
        session = getattr(ctx, "session", None)
        try:
            can = bool(session is not None and session.check_client_capability(ELICITATION))
        except Exception:
            can = False
        modern = getattr(ctx, "protocol_version", None) in MODERN_PROTOCOL_VERSIONS
        elicit = None
        if can and not modern and session is not None:
            request_id = getattr(ctx, "request_id", None)

            async def elicit(message: str, schema: dict[str, Any]) -> types.ElicitResult:
                result: types.ElicitResult = await session.elicit_form(message, schema, related_request_id=request_id)
                return result

        return cls(modern=modern, can_elicit=can, elicit=elicit, input_responses=params.input_responses,
                   request_state=params.request_state, stateless=stateless)


Answer = Literal["accept", "decline", "cancel"]


def _answer_of(response: Any) -> Answer:
    if isinstance(response, Mapping):
        action, content = response.get("action"), response.get("content")
    else:
        action, content = getattr(response, "action", None), getattr(response, "content", None)
    if action == "accept":
        return "accept" if isinstance(content, Mapping) and content.get(CONFIRM_KEY) is True else "decline"
    return "cancel" if action == "cancel" else "decline"


def invalid_state() -> MCPError:
    """The refusal of a request state (the SDK's RequestStateBoundary wording)."""
    return MCPError(code=types.INVALID_PARAMS, message="Invalid or expired requestState",
                    data={"reason": "invalid_request_state"})


# ============================================================================ the policy


class Policy:
    """One per Runtime: the signer (shared key across replicas), the auto-approved risks, the state of spent tokens."""

    def __init__(self, signer: Signer, auto_approve: Iterable[str] = (), *, redactor: Redactor | None = None,
                 state: State | None = None) -> None:
        self.signer = signer
        self.auto_approve = frozenset(auto_approve)
        self.redactor = redactor or Redactor(set())
        self.state: State = state if state is not None else MemoryState()  # spent request states (and tokens)

    # -------------------------------------------------------------- bindings

    def _binding(self, tool: ToolSpec, branch: Branch, arguments: Mapping[str, Any], caller: Caller) -> dict[str, str]:
        return {"t": tool.name, "b": branch.key, "a": digest(binding_arguments(arguments)), "c": digest(caller.id)}

    def idempotency_key(self, tool: ToolSpec, branch: Branch, arguments: Mapping[str, Any], caller: Caller) -> str:
        data = {"t": tool.name, "b": branch.key, "a": binding_arguments(arguments), "c": caller.id}
        return "o2m-" + self.signer.keyed_digest("idempotency", data)[:40]

    # -------------------------------------------------------------- dry run

    def dry_run_token(
        self, tool: ToolSpec, branch: Branch, arguments: Mapping[str, Any], caller: Caller
    ) -> tuple[str, str]:
        """A token for the real call, and when it expires (RFC 3339)."""
        ttl = self._dry_run_ttl(branch)
        data = {**self._binding(tool, branch, arguments, caller), "n": secrets.token_urlsafe(12)}
        token = self.signer.sign("dry-run", data, ttl=ttl)
        expires = datetime.fromtimestamp(int(self.signer.clock() + ttl), UTC).isoformat().replace("+00:00", "Z")
        return token, expires

    @staticmethod
    def _dry_run_ttl(branch: Branch) -> int:
        return branch.dry_run.token_ttl if branch.dry_run else 900

    def check_dry_run(
        self, tool: ToolSpec, branch: Branch, arguments: Mapping[str, Any], caller: Caller
    ) -> dict[str, Any]:
        """A real call of a `dry_run: required` branch: its token's data, or DRY_RUN_REQUIRED unless it matches."""
        token = arguments.get(DRY_RUN_TOKEN_ARG)
        first = f"call {tool.name} with dryRun: true and these arguments first, then pass its dryRunToken"
        if not isinstance(token, str) or not token:
            raise _dry_run_required(f"{tool.name} must be previewed before it runs: {first}")
        try:
            data = self.signer.verify("dry-run", token)
        except TokenError as e:
            why = {"expired": "the dryRunToken has expired", "purpose": "that is not a dryRunToken"}.get(
                e.reason, "the dryRunToken was altered or was not issued by this server")
            raise _dry_run_required(f"{why}: {first}") from None
        expected = self._binding(tool, branch, arguments, caller)
        for key, what in (("t", "another tool"), ("b", "another action"), ("a", "other arguments"),
                          ("c", "another caller")):
            if data.get(key) != expected[key]:
                raise _dry_run_required(f"the dryRunToken was issued for {what}: {first}")
        return data

    async def spend_dry_run(self, tool: ToolSpec, branch: Branch, data: Mapping[str, Any], *, claim: bool) -> None:
        """With a shared state a dry-run token is used once (across replicas): DRY_RUN_REQUIRED the second time.

        `claim=False` only looks (before the user is asked: a spent token is refused without asking);
        `claim=True` spends it, atomically, once the call may go ahead.
        """
        if not self.state.shared:
            return  # one process: reusable within its life, as documented (docs/safety.md)
        nonce = data.get("n")
        ident = nonce if isinstance(nonce, str) else digest(dict(data))  # a token from before nonces
        if claim:
            fresh = await self.state.claim("dry-run", ident, self._dry_run_ttl(branch))
        else:
            fresh = not await self.state.claimed("dry-run", ident)
        if not fresh:
            raise _dry_run_required(
                f"that dryRunToken was already used for a real call (each one is good for one call): call "
                f"{tool.name} with dryRun: true and these arguments again, then pass its new dryRunToken")

    # -------------------------------------------------------------- confirmation

    async def confirm(
        self,
        tool: ToolSpec,
        branch: Branch,
        arguments: Mapping[str, Any],
        caller: Caller,
        asker: Asker | None,
        record: AuditRecord,
    ) -> None:
        """Return when the call may go ahead; raise ToolFailure, InputRequired or MCPError otherwise."""
        if not needs_confirmation(branch):
            record.confirmation = "not_required"
            return None
        if branch.risk in self.auto_approve:
            record.confirmation = "auto_approved"
            return None
        asker = asker or Asker()
        message = confirmation_text(tool, branch, arguments, self.redactor)
        if asker.request_state is not None:
            answer = await self._answer_from_state(tool, branch, arguments, caller, asker)
            record.confirmation = {"accept": "confirmed", "decline": "declined", "cancel": "cancelled"}.get(answer)
            return self._settle(answer, tool)
        if asker.modern and asker.can_elicit:
            record.confirmation = "requested"
            state = self.signer.sign("confirm", {**self._binding(tool, branch, arguments, caller),
                                                 "n": secrets.token_urlsafe(12)}, ttl=CONFIRM_TTL)
            request = types.ElicitRequest(params=types.ElicitRequestFormParams(
                message=message, requested_schema=confirm_schema(tool, branch)))
            raise InputRequired(types.InputRequiredResult(input_requests={CONFIRM_KEY: request}, request_state=state))
        if asker.elicit is not None:
            record.confirmation = "requested"
            try:
                with anyio.move_on_after(ASK_TIMEOUT):
                    response = await asker.elicit(message, confirm_schema(tool, branch))
                    answer = _answer_of(response)
                    record.confirmation = {"accept": "confirmed", "decline": "declined"}.get(answer, "cancelled")
                    return self._settle(answer, tool)
                record.confirmation = "timeout"
                return self._settle("cancel", tool)
            except NoBackChannelError:
                pass  # e.g. 2025-11-25 over HTTP with JSON responses: no way to send the request
        record.confirmation = "unavailable"
        raise _confirmation_required(tool, branch, asker, message)

    async def _answer_from_state(
        self, tool: ToolSpec, branch: Branch, arguments: Mapping[str, Any], caller: Caller, asker: Asker
    ) -> Answer:
        assert asker.request_state is not None
        try:
            data = self.signer.verify("confirm", asker.request_state)
        except TokenError:
            raise invalid_state() from None
        expected = self._binding(tool, branch, arguments, caller)
        nonce = data.get("n")
        if any(data.get(k) != v for k, v in expected.items()) or not isinstance(nonce, str):
            raise invalid_state()
        responses = asker.input_responses or {}
        if CONFIRM_KEY not in responses:
            raise invalid_state()
        if not await self.state.claim("confirm", nonce, CONFIRM_TTL):
            raise invalid_state()  # one answer, one call (this process, or every replica with --state)
        return _answer_of(responses[CONFIRM_KEY])

    @staticmethod
    def _settle(answer: Answer, tool: ToolSpec) -> None:
        if answer == "accept":
            return
        what = "declined" if answer == "decline" else "did not confirm"
        raise ToolFailure.of(
            ErrorCode.CONFIRMATION_DECLINED,
            f"the user {what} {tool.name}; nothing was sent. Do not retry unless the user asks for it again.",
        )


def _dry_run_required(message: str) -> ToolFailure:
    return ToolFailure.of(ErrorCode.DRY_RUN_REQUIRED, message + ".", field=DRY_RUN_TOKEN_ARG)


def _confirmation_required(tool: ToolSpec, branch: Branch, asker: Asker, message: str) -> ToolFailure:
    effects = branch.side_effects or tool.side_effects
    would = "; ".join(e.rstrip(".") for e in effects) if effects else f"run {tool.name} ({branch.risk} risk)"
    if asker.stateless and not asker.modern:  # the client's capabilities are not even known here
        how = ("the server runs stateless (--stateless), so a 2025-11-25 client has no session to be asked in; "
               "a 2026-07-28 client can confirm, or the server can run without --stateless and with --sse")
    elif not asker.can_elicit:
        how = "it does not support elicitation"
    else:
        how = "this transport cannot send it a request (2025-11-25 over HTTP needs SSE responses: serve with --sse)"
    return ToolFailure.of(
        ErrorCode.CONFIRMATION_REQUIRED,
        f"{tool.name} needs the user's confirmation and this client cannot ask for it ({how}). Nothing was sent. "
        f"It would: {show_text(would, quote=False).text}. Tell the user; it can run from a client that supports "
        f"elicitation, or with the server's --auto-approve {branch.risk} for trusted automation. The user would "
        f"have been asked:\n{message}",
    )


def confirmation_text(tool: ToolSpec, branch: Branch, arguments: Mapping[str, Any], redactor: Redactor) -> str:
    """What the user is asked, in parts an argument cannot forge (display.py).

    The overlay's message (each `{argument}` shown quoted and escaped; sensitive ones as ***) or
    "Allow <tool>? (<risk> risk)"; then every argument, what happens (the overlay's side effects)
    and what the values hid. A value cannot start a line, so the lines after the first are the
    server's own; the side effects also travel in the form's `confirm` field (`confirm_schema`).
    """
    shown = shown_arguments(tool, branch, arguments, redactor)
    if branch.confirmation_message:
        lines = [fill_message(branch.confirmation_message, shown)]
    else:
        label = show_text(tool.title or tool.name, quote=False).text  # a spec's title is text from outside too
        if len(tool.branches) > 1:
            label += f" ({branch.key})"
        lines = [f"Allow {label}? ({branch.risk} risk)"]
    if shown:
        lines.append("Arguments: " + ", ".join(f"{k}={v.text}" for k, v in shown.items()))
    effects = side_effects_sentence(tool, branch)
    if effects:
        lines.append("What happens: " + effects)
    notes = argument_notes(shown)
    if notes:
        lines.append("Look closely: " + "; ".join(notes) + " (shown escaped above).")
    return "\n".join(lines)


def shown_arguments(
    tool: ToolSpec, branch: Branch, arguments: Mapping[str, Any], redactor: Redactor
) -> dict[str, Shown]:
    """Each argument the branch takes as the user reads it (display.py); secrets, sensitive ones as ***."""
    out: dict[str, Shown] = {}
    for name, value in binding_arguments(arguments).items():
        if branch.accepts is not None and name not in branch.accepts:
            continue  # another action's default: not sent
        if name in tool.sensitive:
            out[name] = Shown("***")
        else:
            out[name] = show(redactor.text(value) if isinstance(value, str) else redactor.value(value))
    return out


def argument_notes(shown: Mapping[str, Shown]) -> list[str]:
    """What the arguments hide, one note per argument ("target holds 200 spaces in a row")."""
    return [f"{k} holds {', '.join(v.notes)}" for k, v in shown.items() if v.notes]


_FILL = re.compile("([\"'\u201c\u2018\u00ab]?)(" + PLACEHOLDER.pattern + ")([\"'\u201d\u2019\u00bb]?)")
_QUOTE_PAIRS: Final = frozenset({('"', '"'), ("'", "'"), ("\u201c", "\u201d"), ("\u2018", "\u2019"),
                                 ("\u00ab", "\u00bb")})


def fill_message(template: str, shown: Mapping[str, Shown]) -> str:
    """The overlay's message with `{name}` replaced by the shown value; `{{`/`}}` are braces.

    The value brings its own quotes, so quotes the template puts around a placeholder
    (`"{subject}"`) are dropped rather than doubled.
    """

    def sub(m: re.Match[str]) -> str:
        left, token, name, right = m.group(1), m.group(2), m.group(3), m.group(4)
        if name is None:
            return left + token[0] + right
        value = shown.get(name)
        text = value.text if value is not None else "(not given)"
        return text if (left, right) in _QUOTE_PAIRS else left + text + right

    return _FILL.sub(sub, template)


def side_effects_sentence(tool: ToolSpec, branch: Branch) -> str:
    effects = branch.side_effects or tool.side_effects
    return " ".join(e if e.endswith(".") else e + "." for e in (" ".join(e.split()) for e in effects))


def confirm_schema(tool: ToolSpec, branch: Branch) -> dict[str, Any]:
    """The form the user answers: one checkbox, which itself says what happens (no argument is in it)."""
    effects = side_effects_sentence(tool, branch)
    field = {**CONFIRM_SCHEMA["properties"][CONFIRM_KEY]}
    if effects:
        field["description"] = f"What happens: {effects} Check to let the call go ahead."
    return {**CONFIRM_SCHEMA, "properties": {CONFIRM_KEY: field}}


# ============================================================================ dry-run previews


def describe_request(prepared: Prepared, redactor: Redactor, sensitive: Iterable[str] = ()) -> dict[str, Any]:
    """A request as a dry run shows it: method, URL, headers and body, with every secret as ***."""
    headers = {}
    for name, value in prepared.headers.items():
        secret = SECRET_HEADER.search(name) and name.lower() not in _NOT_SECRET_HEADERS
        headers[name] = "***" if secret else redactor.text(value)
    out: dict[str, Any] = {"method": prepared.method, "url": prepared.shown, "headers": headers}
    if prepared.body is not None:
        out["body"] = _body(prepared.body, redactor, set(sensitive))
    return out


def _body(body: EncodedBody, redactor: Redactor, sensitive: set[str]) -> Any:
    if body.content is not None:
        media = body.content_type or ""
        if is_json_media(media):
            try:
                value = json.loads(body.content)
            except ValueError:
                return f"({len(body.content)} bytes)"
            if isinstance(value, dict):
                return redact_arguments(value, sensitive, redactor.text, cut=False)
            return redactor.value(value)
        try:
            return redactor.text(body.content.decode("utf-8"))
        except UnicodeDecodeError:
            return f"({len(body.content)} bytes of {media or 'binary data'})"
    out: dict[str, Any] = {}
    if body.data:
        out["fields"] = redact_arguments(body.data, sensitive, redactor.text, cut=False)
    if body.files:
        out["files"] = [{"name": name, "filename": part[0], "contentType": part[2], "bytes": len(part[1])}
                        for name, part in body.files]
    return out
