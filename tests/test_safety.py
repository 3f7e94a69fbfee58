"""Issue 5, the safety contract of seed 002: confirmation, dry run, idempotency, retries, audit log.

Everything runs against the real mail-and-files upstream (`examples.Upstream.start("mailfiles")`)
through a real MCP client (the SDK `Client`, in memory and over `openapi2mcp serve --transport
http`), in both protocol eras. The upstream's own counters (`up.domain()`, `up.count(...)`) are
the proof of what happened: no unconfirmed, declined, forbidden or un-previewed call reached it,
and a retried idempotent create made one object. A canary secret is the upstream's bearer token;
it must never show in a result, an error, a dry-run preview or an audit line.
"""

from __future__ import annotations

import base64
import json
import textwrap
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client, MCPError

from examples import Upstream
from openapi2mcp.compiler import compile_manifest
from openapi2mcp.errors import InputError
from openapi2mcp.loader import load_spec
from openapi2mcp.manifest import Manifest
from openapi2mcp.overlay import read_overlay
from openapi2mcp.overlay.reading import parse_overlay
from openapi2mcp.result import error_of
from openapi2mcp.runtime import Runtime, RuntimeOptions
from openapi2mcp.runtime.access import Caller
from openapi2mcp.runtime.policy import Asker, InputRequired, parse_auto_approve
from openapi2mcp.runtime.signing import Signer
from openapi2mcp.upstream import ConfigError
from tests.e2e_support import HttpServer

ROOT = Path(__file__).resolve().parents[1]
SPEC = ROOT / "examples" / "mailfiles" / "openapi.yaml"
OVERLAY = ROOT / "examples" / "mailfiles" / "overlay.yaml"
CANARY = "CANARY-mailfiles-7f3a91c2"
KEY = "test-signing-key-0123456789abcdef-safety"
MAIL = {"to": "anna.schmidt@example.com", "subject": "Q3 numbers", "body": "Hello Anna, the numbers are attached."}
BULK = {"templateId": "tmpl_newsletter_q3", "segmentId": "seg_active_customers"}


def days_ahead(days: int) -> str:
    """An expiresAt the upstream accepts (in the future, at most 90 days ahead)."""
    moment = datetime.now(UTC).replace(hour=23, minute=59, second=0, microsecond=0) + timedelta(days=days)
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


LINK = {"fileId": "f_abc123", "expiresAt": days_ahead(30)}


# ============================================================================ fixtures and helpers


@pytest.fixture(scope="module")
def up() -> Iterator[Upstream]:
    with Upstream.start("mailfiles", auth=f"bearer:{CANARY}") as server:
        yield server


@pytest.fixture(autouse=True)
def _clean(up: Upstream) -> Iterator[None]:
    up.reset()
    up.clear_faults()
    yield
    up.clear_faults()
    up.assert_no_violations()


@pytest.fixture(scope="module")
def manifest() -> Manifest:
    return compile_manifest(load_spec(str(SPEC)), [read_overlay(OVERLAY)]).manifest


def env_for(up: Upstream, **extra: str) -> dict[str, str]:
    return {"MAILFILES_API_URL": up.base_url, "MAILFILES_API_TOKEN": CANARY, "OPENAPI2MCP_SIGNING_KEY": KEY, **extra}


def runtime_for(up: Upstream, m: Manifest, audit: Path | str | None = None, **opts: Any) -> Runtime:
    return Runtime(m, RuntimeOptions(environ=env_for(up), audit_log=str(audit) if audit is not None else None, **opts))


def audit_lines(path: Path, phase: str | None = "result") -> list[dict[str, Any]]:
    lines = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    return [line for line in lines if phase is None or line["phase"] == phase]


def err(result: types.CallToolResult) -> dict[str, Any]:
    body = error_of(result)
    assert result.is_error and body is not None, result.model_dump_json()
    return body


def ok(result: types.CallToolResult) -> dict[str, Any]:
    assert not result.is_error, result.model_dump_json()
    assert isinstance(result.structured_content, dict)
    return result.structured_content


class User:
    """The person behind the client: answers each elicitation as told, remembers what was asked."""

    def __init__(self, action: str = "accept", confirm: bool = True) -> None:
        self.action, self.confirm = action, confirm
        self.asked: list[str] = []

    async def __call__(self, ctx: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        self.asked.append(params.message)
        if self.action == "accept":
            return types.ElicitResult(action="accept", content={"confirm": self.confirm})
        return types.ElicitResult(action=self.action)  # type: ignore[arg-type]


def mode_of(era: str) -> str:
    return "legacy" if era == "2025-11-25" else "auto"


ERAS = ["2025-11-25", "2026-07-28"]


def compile_with(text: str) -> Manifest:
    """The mailfiles spec with an inline tool overlay."""
    overlay = "openapi2mcp: 1\nupstream: {base_url: '${MAILFILES_API_URL}', auth: {type: bearer, " \
              "value: '${MAILFILES_API_TOKEN}'}}\n" + textwrap.dedent(text)
    return compile_manifest(load_spec(str(SPEC)), [parse_overlay(overlay, "safety.yaml")]).manifest


def compile_error(text: str) -> str:
    with pytest.raises(InputError) as info:
        compile_with(text)
    return info.value.render()


# ============================================================================ the contract in the Manifest


def test_the_overlay_contract_is_in_the_manifest(manifest: Manifest) -> None:
    send = manifest.tool("emails_send_external")
    bulk = manifest.tool("emails_bulk_send")
    link = manifest.tool("files_create_download_link")
    delete = manifest.tool("files_delete")
    assert send and bulk and link and delete
    assert (send.risk, send.branches[0].confirmation) == ("critical", "required")
    assert send.branches[0].confirmation_message and "{subject}" in send.branches[0].confirmation_message
    assert "body" in send.sensitive  # overlay `sensitive: true`
    assert delete.branches[0].confirmation == "auto" and delete.risk == "high"  # auto: required from risk
    # annotations always say what the tool does; the server enforces anyway
    assert send.annotations["destructiveHint"] is True and send.annotations["readOnlyHint"] is False
    assert delete.annotations["destructiveHint"] is True
    assert link.annotations["idempotentHint"] is True and link.annotations["destructiveHint"] is False
    # dry run: the upstream's own `dryRun` body property became the preview switch, hidden from the model
    dry = bulk.branches[0].dry_run
    assert dry is not None and (dry.mode, dry.native, dry.value) == ("required", True, True)
    props = bulk.input_schema["properties"]
    assert props["dryRun"]["type"] == "boolean" and props["dryRunToken"]["type"] == "string"
    body = bulk.branches[0].steps[0].operation.body
    assert body is not None and body.properties["$dryRun"] == "dryRun"
    # the real result (202 Campaign) or the dry-run result with the upstream's preview (200 BulkPreview)
    assert bulk.output_schema is not None
    real, preview = bulk.output_schema["anyOf"]
    assert "campaignId" in real["properties"]
    assert "recipientCount" in preview["properties"]["preview"]["properties"]
    # idempotency: the server sets the key; the model never sees the header parameter
    assert link.branches[0].idempotency is not None and link.branches[0].idempotency.header == "Idempotency-Key"
    assert "Idempotency_Key" not in link.input_schema["properties"]
    assert manifest.upstream.retries is not None and manifest.upstream.retries.max_attempts == 3
    # what the model reads
    assert "asks the user to confirm" in send.description
    assert "dryRunToken" in bulk.description


def test_overlay_mistakes_are_named() -> None:
    never = compile_error("""
        tools:
          - {name: emails_send, operation: sendExternalEmail, risk: critical, confirmation: never}
    """)
    assert "critical" in never and "acknowledge_risk: true" in never and "safety.yaml:5:" in never
    acknowledged = compile_with("""
        tools:
          - name: emails_send
            operation: sendExternalEmail
            risk: critical
            confirmation: {mode: never, acknowledge_risk: true}
    """).tool("emails_send")
    assert acknowledged is not None and acknowledged.branches[0].confirmation == "never"
    typo = compile_error("""
        tools:
          - {name: emails_bulk, operation: bulkSendEmails, dry_run: {mode: required, upstream_param: dryrun}}
    """)
    assert "no parameter or body property 'dryrun'; did you mean 'dryRun'?" in typo
    clash = compile_error("""
        tools:
          - {name: emails_bulk, operation: bulkSendEmails, dry_run: supported}
    """)
    assert "has an argument 'dryRun', which the dry run adds" in clash and "upstream_param: dryRun" in clash
    retried = compile_error("""
        tools:
          - {name: emails_send, operation: sendExternalEmail, retries: {max_attempts: 3}}
    """)
    assert "not idempotent" in retried and "idempotent: true" in retried
    bad_mode = compile_error("""
        tools:
          - {name: emails_send, operation: sendExternalEmail, confirmation: sometimes}
    """)
    assert "confirmation.mode: 'sometimes' is not one of auto, required, never" in bad_mode


def test_auto_approve_values() -> None:
    assert parse_auto_approve("high") == {"high"}
    assert parse_auto_approve("high, critical") == {"high", "critical"}
    assert parse_auto_approve("none") == frozenset() == parse_auto_approve(None)
    with pytest.raises(ValueError, match="forbidden tools are never callable"):
        parse_auto_approve("forbidden")
    with pytest.raises(ValueError, match="high and/or critical"):
        parse_auto_approve("medium")


# ============================================================================ confirmation


@pytest.mark.anyio
@pytest.mark.parametrize("answer", ["accept", "decline", "cancel", "accept-unchecked"])
async def test_elicitation_on_2025_11_25(
    up: Upstream, manifest: Manifest, tmp_path: Path, answer: str
) -> None:
    audit = tmp_path / "audit.jsonl"
    rt = runtime_for(up, manifest, audit)
    user = User("accept", confirm=False) if answer == "accept-unchecked" else User(answer)
    async with Client(rt.build_server(), mode="legacy", elicitation_callback=user) as client:
        result = await client.call_tool("emails_send_external", MAIL)
    await rt.aclose()
    assert user.asked == [  # values quoted (the template's own quotes not doubled), every argument listed
        'Send the e-mail "Q3 numbers" to "anna.schmidt@example.com"? It leaves the company and cannot be recalled.\n'
        'Arguments: to="anna.schmidt@example.com", subject="Q3 numbers", body=***\n'
        "What happens: One e-mail leaves the company and cannot be recalled. An audit event "
        "email.external.sent is recorded."
    ]
    line = audit_lines(audit)[-1]
    if answer == "accept":
        assert ok(result)["status"] == "queued"
        assert up.domain()["emails_sent"] == 1
        assert (line["outcome"], line["confirmation"]) == ("ok", "confirmed")
        assert [a["phase"] for a in audit_lines(audit, None)] == ["attempt", "result"]
        return
    body = err(result)
    assert body["code"] == "CONFIRMATION_DECLINED" and body["retryable"] is False
    assert "nothing was sent" in body["message"]
    assert up.domain()["emails_sent"] == 0 and up.count("sendExternalEmail") == 0
    expected = {"decline": "declined", "cancel": "cancelled", "accept-unchecked": "declined"}[answer]
    assert (line["outcome"], line["confirmation"], line["error"]) == ("declined", expected, "CONFIRMATION_DECLINED")
    assert line["arguments"]["body"] == "***" and line["requests"] == []


@pytest.mark.anyio
@pytest.mark.parametrize("answer", ["accept", "decline", "cancel"])
async def test_input_required_on_2026_07_28(up: Upstream, manifest: Manifest, tmp_path: Path, answer: str) -> None:
    """The SDK client drives the multi round trip: input-required result, the user's answer, the retry."""
    audit = tmp_path / "audit.jsonl"
    rt = runtime_for(up, manifest, audit)
    user = User(answer)
    async with Client(rt.build_server(), mode="auto", elicitation_callback=user) as client:
        assert client.protocol_version == "2026-07-28"
        result = await client.call_tool("files_delete", {"fileId": "f_def456"})
    await rt.aclose()
    assert len(user.asked) == 1 and "Allow Delete a file? (high risk)" in user.asked[0]
    assert 'fileId="f_def456"' in user.asked[0] and "gone for good" in user.asked[0]
    first, second = audit_lines(audit)  # two tools/call requests, two lines, one trace each
    assert (first["outcome"], first["confirmation"]) == ("input_required", "requested")
    if answer == "accept":
        assert ok(result) == {"status": 204}
        assert up.domain()["files_deleted"] == 1
        assert (second["outcome"], second["confirmation"]) == ("ok", "confirmed")
    else:
        assert err(result)["code"] == "CONFIRMATION_DECLINED"
        assert up.count("deleteFile") == 0
        assert second["outcome"] == "declined"


@pytest.mark.anyio
async def test_request_state_is_bound_to_tool_arguments_and_caller(
    up: Upstream, manifest: Manifest, tmp_path: Path
) -> None:
    audit = tmp_path / "audit.jsonl"
    rt = runtime_for(up, manifest, audit)
    yes = {"confirm": types.ElicitResult(action="accept", content={"confirm": True})}
    async with Client(rt.build_server(), mode="auto", elicitation_callback=User()) as client:
        first = await client.session.call_tool("emails_send_external", MAIL, allow_input_required=True)
        assert isinstance(first, types.InputRequiredResult) and first.request_state
        assert list(first.input_requests or {}) == ["confirm"]
        # the same state with other arguments (another recipient): refused, nothing sent
        other = {**MAIL, "to": "someone.else@example.com"}
        with pytest.raises(MCPError) as refused:
            await client.session.call_tool("emails_send_external", other, input_responses=yes,
                                           request_state=first.request_state, allow_input_required=True)
        assert (refused.value.code, refused.value.error.message) == (-32602, "Invalid or expired requestState")
        # another tool: refused too
        with pytest.raises(MCPError):
            await client.session.call_tool("files_delete", {"fileId": "f_abc123"}, input_responses=yes,
                                           request_state=first.request_state, allow_input_required=True)
        # a forged "yes" without the state is not an answer: the user is asked (again)
        forged = await client.session.call_tool("emails_send_external", MAIL, input_responses=yes,
                                                allow_input_required=True)
        assert isinstance(forged, types.InputRequiredResult)
        assert up.count("sendExternalEmail") == 0 and up.count("deleteFile") == 0
        # the right arguments with the state: sent, once
        done = await client.session.call_tool("emails_send_external", MAIL, input_responses=yes,
                                              request_state=first.request_state, allow_input_required=True)
        assert isinstance(done, types.CallToolResult) and ok(done)["status"] == "queued"
        # replaying the answered state: refused (one answer, one call)
        with pytest.raises(MCPError):
            await client.session.call_tool("emails_send_external", MAIL, input_responses=yes,
                                           request_state=first.request_state, allow_input_required=True)
        tampered = first.request_state[:-3] + ("AAA" if not first.request_state.endswith("AAA") else "BBB")
        with pytest.raises(MCPError):
            await client.session.call_tool("emails_send_external", MAIL, input_responses=yes,
                                           request_state=tampered, allow_input_required=True)
    assert up.domain()["emails_sent"] == 1
    # another caller cannot use a state minted for this one; another replica with the same key can
    fresh = await client_state(rt, "emails_send_external", MAIL)
    stranger = Caller(id="mallory", transport="http", all_scopes=True)
    asked = Asker(modern=True, can_elicit=True, input_responses=yes, request_state=fresh)
    with pytest.raises(MCPError):
        await rt.call("emails_send_external", MAIL, caller=stranger, asker=asked)
    replica = runtime_for(up, manifest)
    assert ok(await replica.call("emails_send_external", MAIL, asker=asked))["status"] == "queued"
    await replica.aclose()
    await rt.aclose()
    assert up.domain()["emails_sent"] == 2
    outcomes = [(line["outcome"], line["error"]) for line in audit_lines(audit)]
    assert outcomes.count(("denied", "REQUEST_STATE_INVALID")) == 5
    assert outcomes.count(("ok", None)) == 1


async def client_state(rt: Runtime, name: str, arguments: dict[str, Any]) -> str:
    """The request state of an input-required answer, as a 2026-07-28 client would get it."""
    with pytest.raises(InputRequired) as needed:
        await rt.call(name, arguments, asker=Asker(modern=True, can_elicit=True))
    state = needed.value.result.request_state
    assert state is not None
    return state


@pytest.mark.anyio
@pytest.mark.parametrize("era", ERAS)
async def test_a_client_without_elicitation_gets_confirmation_required(
    up: Upstream, manifest: Manifest, tmp_path: Path, era: str
) -> None:
    audit = tmp_path / "audit.jsonl"
    rt = runtime_for(up, manifest, audit)
    async with Client(rt.build_server(), mode=mode_of(era)) as client:  # no elicitation callback
        send = err(await client.call_tool("emails_send_external", MAIL))
        delete = err(await client.call_tool("files_delete", {"fileId": "f_abc123"}))
        listed = await client.call_tool("files_list", {})  # low risk: no confirmation
    await rt.aclose()
    assert send["code"] == delete["code"] == "CONFIRMATION_REQUIRED"
    assert "It would: One e-mail leaves the company and cannot be recalled; An audit event" in send["message"]
    assert 'The user would have been asked:\nSend the e-mail "Q3 numbers" to "anna.schmidt' in send["message"]
    assert "Nothing was sent" in send["message"] and "--auto-approve critical" in send["message"]
    assert "The file and its download links are gone for good" in delete["message"]
    assert ok(listed)["total"] == 4
    assert up.count("sendExternalEmail") == up.count("deleteFile") == 0
    lines = audit_lines(audit)
    assert [(line["tool"], line["outcome"], line["confirmation"]) for line in lines] == [
        ("emails_send_external", "denied", "unavailable"),
        ("files_delete", "denied", "unavailable"),
        ("files_list", "ok", "not_required"),
    ]


@pytest.mark.anyio
async def test_auto_approve_high_is_recorded(up: Upstream, manifest: Manifest, tmp_path: Path) -> None:
    audit = tmp_path / "audit.jsonl"
    rt = runtime_for(up, manifest, audit, auto_approve="high")
    async with Client(rt.build_server(), mode="legacy") as client:  # nobody to ask
        assert ok(await client.call_tool("files_delete", {"fileId": "f_ghi789"})) == {"status": 204}
        assert err(await client.call_tool("emails_send_external", MAIL))["code"] == "CONFIRMATION_REQUIRED"
    await rt.aclose()
    assert up.domain()["files_deleted"] == 1 and up.domain()["emails_sent"] == 0
    deleted, refused = audit_lines(audit)
    assert (deleted["confirmation"], deleted["outcome"], deleted["risk"]) == ("auto_approved", "ok", "high")
    assert refused["confirmation"] == "unavailable"  # critical is not auto-approved by `high`
    # the environment variable does the same for the package runner and `serve`
    by_env = Runtime(manifest, RuntimeOptions(environ=env_for(up, OPENAPI2MCP_AUTO_APPROVE="high,critical")))
    assert by_env.policy.auto_approve == {"high", "critical"}
    await by_env.aclose()
    with pytest.raises(ConfigError, match="high and/or critical"):
        Runtime(manifest, RuntimeOptions(environ=env_for(up, OPENAPI2MCP_AUTO_APPROVE="everything")))


@pytest.mark.anyio
async def test_confirmation_applies_per_action_and_forbidden_is_unknown(up: Upstream, tmp_path: Path) -> None:
    m = compile_with("""
        tools:
          - name: files_manage
            actions:
              list: {operation: listFiles}
              link: {operation: createDownloadLink, idempotent: true}
              remove:
                operation: deleteFile
                risk: high
                side_effects: [The file is gone.]
                confirmation: {mode: required, message: "Really delete {fileId}?"}
          - name: emails_send_external
            operation: sendExternalEmail
            risk: forbidden
    """)
    tool = m.tool("files_manage")
    assert tool is not None and [b.confirmation for b in tool.branches] == ["auto", "auto", "required"]
    assert "(remove)" in tool.description  # only that action asks
    audit = tmp_path / "audit.jsonl"
    rt = runtime_for(up, m, audit)
    user = User("decline")
    async with Client(rt.build_server(), mode="legacy", elicitation_callback=user) as client:
        assert "emails_send_external" not in [t.name for t in (await client.list_tools()).tools]
        assert ok(await client.call_tool("files_manage", {"action": "list"}))["total"] == 4
        linked = ok(await client.call_tool("files_manage", {"action": "link", **LINK}))
        assert linked["fileId"] == "f_abc123"
        declined = err(await client.call_tool("files_manage", {"action": "remove", "fileId": "f_abc123"}))
        with pytest.raises(MCPError) as unknown:
            await client.call_tool("emails_send_external", MAIL)
    await rt.aclose()
    assert user.asked == ['Really delete "f_abc123"?\nArguments: action="remove", fileId="f_abc123"\n'
                          "What happens: The file is gone."]
    assert declined["code"] == "CONFIRMATION_DECLINED"
    assert unknown.value.error.message == "Unknown tool: emails_send_external"
    assert up.count("deleteFile") == 0 and up.count("sendExternalEmail") == 0
    lines = audit_lines(audit)
    assert [(line["branch"], line["outcome"]) for line in lines] == [
        ("list", "ok"), ("link", "ok"), ("remove", "declined"), (None, "denied"),
    ]
    assert lines[-1]["error"] == "UNKNOWN_TOOL" and lines[-1]["tool"] == "emails_send_external"


# ============================================================================ dry run


@pytest.mark.anyio
@pytest.mark.parametrize("era", ERAS)
async def test_dry_run_required_with_the_upstreams_own_preview(
    up: Upstream, manifest: Manifest, tmp_path: Path, era: str
) -> None:
    audit = tmp_path / "audit.jsonl"
    rt = runtime_for(up, manifest, audit)
    user = User()
    async with Client(rt.build_server(), mode=mode_of(era), elicitation_callback=user) as client:
        # a real call without a preview: refused before anyone is asked, nothing sent
        missing = err(await client.call_tool("emails_bulk_send", BULK))
        assert missing["code"] == "DRY_RUN_REQUIRED" and missing["field"] == "dryRunToken"
        assert "with dryRun: true" in missing["message"]
        assert up.count("bulkSendEmails") == 0 and user.asked == []
        # the dry run: no confirmation, the upstream's own preview (its dryRun), no campaign
        preview = ok(await client.call_tool("emails_bulk_send", {**BULK, "dryRun": True}))
        assert user.asked == []
        assert up.domain()["dry_runs"] == 1 and up.domain()["campaigns_started"] == 0
        sent = json.loads(up.last_request("bulkSendEmails")["body"])
        assert sent == {**BULK, "dryRun": True}
        assert preview["dryRun"] is True and preview["preview"]["recipientCount"] == 4821
        assert preview["preview"]["expectedSideEffects"][0] == "4821 externe E-Mails werden versendet."
        assert preview["sideEffects"] == ["Thousands of external e-mails are sent to the segment.",
                                          "The campaign's status becomes 'sent'."]
        assert preview["confirmation"] == "the real call asks the user to confirm first"
        (request,) = preview["requests"]
        assert request["method"] == "POST" and request["url"] == f"{up.base_url}/emails/bulk"
        assert request["body"] == BULK  # what the real call sends: without the preview switch
        assert request["headers"]["Authorization"] == "***"
        token = preview["dryRunToken"]
        # tampered, other arguments, expired: refused with the reason; nothing sent
        forged = token[:-4] + ("AAAA" if not token.endswith("AAAA") else "BBBB")
        altered = err(await client.call_tool("emails_bulk_send", {**BULK, "dryRunToken": forged}))
        assert altered["code"] == "DRY_RUN_REQUIRED" and "altered" in altered["message"]
        other = {**BULK, "segmentId": "seg_trial_users", "dryRunToken": token}
        assert "other arguments" in err(await client.call_tool("emails_bulk_send", other))["message"]
        assert up.domain()["campaigns_started"] == 0 and user.asked == []
        # the real call with the token: the user confirms, then the campaign starts
        started = ok(await client.call_tool("emails_bulk_send", {**BULK, "dryRunToken": token}))
        assert started["status"] == "sending" and started["recipientCount"] == 4821
        assert len(user.asked) == 1
    await rt.aclose()
    assert up.domain()["campaigns_started"] == 1
    lines = [line for line in audit_lines(audit) if line["outcome"] != "input_required"]  # 2026-07-28's extra leg
    assert [line["outcome"] for line in lines] == ["denied", "dry_run", "denied", "denied", "ok"]
    assert lines[1]["dryRun"] is True and lines[1]["requests"][0]["status"] == 200
    assert lines[-1]["arguments"]["dryRunToken"] == "***"


@pytest.mark.anyio
async def test_dry_run_tokens_expire_and_work_across_replicas(up: Upstream, manifest: Manifest) -> None:
    issuer = runtime_for(up, manifest, auto_approve="critical")
    token = ok(await issuer.call("emails_bulk_send", {**BULK, "dryRun": True}))["dryRunToken"]
    later = Signer(KEY.encode(), clock=lambda: time.time() + 901)  # token_ttl is 900 s
    expired = runtime_for(up, manifest, auto_approve="critical", signer=later)
    body = err(await expired.call("emails_bulk_send", {**BULK, "dryRunToken": token}))
    assert body["code"] == "DRY_RUN_REQUIRED" and "expired" in body["message"]
    other_key = Runtime(manifest, RuntimeOptions(
        environ={**env_for(up), "OPENAPI2MCP_SIGNING_KEY": "another-key-" + "x" * 30}, auto_approve="critical"))
    assert "altered" in err(await other_key.call("emails_bulk_send", {**BULK, "dryRunToken": token}))["message"]
    stranger = Caller(id="someone-else", transport="http", all_scopes=True)
    refused = err(await issuer.call("emails_bulk_send", {**BULK, "dryRunToken": token}, caller=stranger))
    assert "another caller" in refused["message"]
    assert up.domain()["campaigns_started"] == 0
    replica = runtime_for(up, manifest, auto_approve="critical")  # same key: another replica
    assert ok(await replica.call("emails_bulk_send", {**BULK, "dryRunToken": token}))["status"] == "sending"
    assert up.domain()["campaigns_started"] == 1
    for rt in (issuer, expired, other_key, replica):
        await rt.aclose()


@pytest.mark.anyio
async def test_dry_run_without_a_native_preview_sends_nothing(up: Upstream, tmp_path: Path) -> None:
    m = compile_with("""
        tools:
          - name: emails_send_external
            operation: sendExternalEmail
            risk: critical
            side_effects: [One e-mail leaves the company.]
            dry_run: supported
            params: {body: {sensitive: true}}
          - name: files_create_download_link
            operation: createDownloadLink
            idempotent: true
            dry_run: supported
    """)
    rt = runtime_for(up, m, tmp_path / "audit.jsonl")
    async with Client(rt.build_server(), mode="auto") as client:  # no elicitation: the dry run needs none
        preview = ok(await client.call_tool("emails_send_external", {**MAIL, "dryRun": True}))
        link = ok(await client.call_tool("files_create_download_link", {**LINK, "dryRun": True}))
        real = err(await client.call_tool("emails_send_external", MAIL))  # the real call still needs the user
    await rt.aclose()
    assert up.counters() == {} or sum(up.counters().values()) == 0  # not one request reached the upstream
    assert real["code"] == "CONFIRMATION_REQUIRED"
    (request,) = preview["requests"]
    assert request["body"] == {"to": MAIL["to"], "subject": MAIL["subject"], "body": "***"}  # sensitive
    assert "preview" not in preview and "dryRunToken" not in preview  # supported, not required
    (create,) = link["requests"]
    key = create["headers"]["Idempotency-Key"]  # the exact request: the key the real call will send
    assert key.startswith("o2m-") and create["url"].endswith("/files/f_abc123/download-links")


@pytest.mark.anyio
async def test_a_dry_run_of_some_actions_is_offered_for_those_only(up: Upstream, tmp_path: Path) -> None:
    m = compile_with("""
        tools:
          - name: files_manage
            actions:
              list: {operation: listFiles}
              link: {operation: createDownloadLink, idempotent: true, dry_run: supported}
              remove: {operation: deleteFile, risk: high, dry_run: required}
    """)
    tool = m.tool("files_manage")
    assert tool is not None
    assert "Dry run (link, remove only): call with dryRun: true" in tool.description
    assert "Required (remove): the real call" in tool.description
    props = tool.input_schema["properties"]
    assert props["dryRun"]["description"].endswith("Only for: link, remove.")
    assert props["dryRunToken"]["description"].endswith("Only for: remove.")
    rt = runtime_for(up, m, tmp_path / "audit.jsonl")
    refused = err(await rt.call("files_manage", {"action": "list", "dryRun": True}))
    await rt.aclose()
    assert refused["code"] == "ARGUMENT_INVALID" and refused["field"] == "dryRun"
    assert sum(up.counters().values()) == 0


@pytest.mark.anyio
async def test_a_chain_dry_run_reads_but_does_not_write(up: Upstream) -> None:
    m = compile_with("""
        tools:
          - name: files_share
            description: Check a file exists, then create its download link.
            idempotent: true
            dry_run: supported
            steps:
              - stepId: file
                operationId: getFile
                parameters: [{name: fileId, in: path, value: $inputs.fileId}]
              - stepId: link
                operationId: createDownloadLink
                parameters: [{name: fileId, in: path, value: $steps.file.id}]
                requestBody: {payload: {expiresAt: $inputs.expiresAt}}
    """)
    tool = m.tool("files_share")
    assert tool is not None and "dryRun" in tool.input_schema["properties"]
    rt = runtime_for(up, m)
    preview = ok(await rt.call("files_share", {**LINK, "dryRun": True}))
    assert up.count("getFile") == 1 and up.count("createDownloadLink") == 0  # the read ran, the write did not
    read, write = preview["requests"]
    assert (read["step"], read["method"], write["step"], write["method"]) == ("file", "GET", "link", "POST")
    assert write["url"].endswith("/files/f_abc123/download-links") and write["body"] == {"expiresAt": LINK["expiresAt"]}
    assert write["headers"]["Idempotency-Key"].startswith("o2m-")
    missing = err(await rt.call("files_share", {**LINK, "fileId": "f_nothere", "dryRun": True}))
    assert (missing["code"], missing["step"]) == ("NOT_FOUND", "file")  # a dry run validates everything
    real = ok(await rt.call("files_share", LINK))
    assert real["linkId"] == "dl_1" and up.domain()["download_links_created"] == 1
    assert up.last_request("createDownloadLink")["headers"]["idempotency-key"] == write["headers"]["Idempotency-Key"]
    await rt.aclose()


# ============================================================================ idempotency and retries


@pytest.mark.anyio
@pytest.mark.parametrize("fault", [
    {"kind": "close", "after": True},  # the upstream created the link, the answer was lost
    {"kind": "status", "status": 503, "headers": {"Retry-After": "0"}},  # refused first, then fine
])
async def test_a_retried_idempotent_create_makes_one_object(
    up: Upstream, manifest: Manifest, tmp_path: Path, fault: dict[str, Any]
) -> None:
    audit = tmp_path / "audit.jsonl"
    rt = runtime_for(up, manifest, audit)
    up.fault(operation="createDownloadLink", **fault)
    async with Client(rt.build_server(), mode="auto") as client:
        first = ok(await client.call_tool("files_create_download_link", LINK))
        again = ok(await client.call_tool("files_create_download_link", LINK))  # the agent repeats itself
    await rt.aclose()
    assert up.domain()["download_links_created"] == 1
    assert first["linkId"] == again["linkId"] == "dl_1"
    sent = up.requests("createDownloadLink")
    assert len(sent) == 3  # the failed attempt, its retry, the repeated call
    keys = {r["headers"]["idempotency-key"] for r in sent}
    assert len(keys) == 1 and next(iter(keys)).startswith("o2m-")
    line = audit_lines(audit)[0]
    assert line["idempotencyKey"] == next(iter(keys))
    assert [r.get("retried", False) for r in line["requests"]] == [True, False]
    # another replica with the same key sends the same Idempotency-Key: still one object
    replica = runtime_for(up, manifest)
    assert ok(await replica.call("files_create_download_link", LINK))["linkId"] == "dl_1"
    await replica.aclose()
    assert up.domain()["download_links_created"] == 1


@pytest.mark.anyio
async def test_retries_only_for_idempotent_requests_within_the_deadline(up: Upstream, manifest: Manifest) -> None:
    rt = runtime_for(up, manifest, auto_approve="critical")
    # a plain POST is never retried: the e-mail might have gone out
    up.fault(operation="sendExternalEmail", kind="close", after=True)
    lost = err(await rt.call("emails_send_external", MAIL))
    assert lost["code"] == "UPSTREAM_UNAVAILABLE" and up.count("sendExternalEmail") == 1
    assert up.domain()["emails_sent"] == 1  # it was sent once; the server did not send it twice
    # a GET is retried (the overlay's upstream.retries: 3 attempts), honouring Retry-After
    up.fault(operation="getCampaign", status=503, times=2, headers={"Retry-After": "0"})
    missing = err(await rt.call("emails_campaign_status", {"campaignId": "cmp_1"}))
    assert missing["code"] == "NOT_FOUND" and up.count("getCampaign") == 3
    # a Retry-After beyond max_retry_after (30 s) is not waited for: the error carries it
    up.fault(operation="getCampaign", status=429, headers={"Retry-After": "120"})
    started = time.monotonic()
    limited = err(await rt.call("emails_campaign_status", {"campaignId": "cmp_1"}))
    assert limited["code"] == "RATE_LIMITED" and limited["retryAfter"] == 120 and limited["retryable"] is True
    assert time.monotonic() - started < 5
    # the call's deadline bounds the waits: total 2 s, Retry-After 5 s -> no retry started
    short = manifest.model_copy(update={"upstream": manifest.upstream.model_copy(update={
        "timeout": manifest.upstream.timeout.model_copy(update={"total": 2.0})})})
    quick = runtime_for(up, short)
    up.clear_faults()
    up.fault(operation="getCampaign", status=503, headers={"Retry-After": "5"})
    started = time.monotonic()
    assert err(await quick.call("emails_campaign_status", {"campaignId": "cmp_1"}))["code"] == "UPSTREAM_ERROR"
    assert time.monotonic() - started < 2
    await quick.aclose()
    await rt.aclose()


# ============================================================================ audit log and secrets


@pytest.mark.anyio
async def test_the_canary_secret_never_leaks(up: Upstream, manifest: Manifest, tmp_path: Path) -> None:
    audit = tmp_path / "audit.jsonl"
    rt = runtime_for(up, manifest, audit)
    seen: list[str] = []
    async with Client(rt.build_server(), mode="auto", elicitation_callback=User()) as client:
        calls: list[tuple[str, dict[str, Any]]] = [
            ("emails_bulk_send", {**BULK, "dryRun": True}),
            ("emails_send_external", {**MAIL, "body": f"the password is {CANARY}"}),  # a secret in an argument
            ("files_create_download_link", LINK),
            ("files_create_download_link", {**LINK, "fileId": "f_nope"}),  # 404
            ("emails_send_external", {**MAIL, "to": "x@blocked.example"}),  # 422 with the upstream's message
            ("emails_bulk_send", {**BULK, "dryRunToken": "not-a-token"}),
        ]
        for name, arguments in calls:
            result = await client.call_tool(name, arguments)
            seen.append(result.model_dump_json(by_alias=True))
        up.fault(operation="getCampaign", status=500, body={"error": {"message": f"token {CANARY} invalid"}})
        seen.append((await client.call_tool("emails_campaign_status", {"campaignId": "cmp_9"})).model_dump_json())
        seen.append(json.dumps((await client.read_resource("files://f_abc123")).model_dump(mode="json")))
    await rt.aclose()
    everything = "\n".join(seen) + audit.read_text(encoding="utf-8")
    assert CANARY not in everything
    assert base64.b64encode(CANARY.encode()).decode() not in everything
    assert up.last_request("getFile")["headers"]["authorization"] == f"Bearer {CANARY}"  # it was sent upstream
    assert '"Authorization":"***"' in seen[0]
    answered = [line for line in audit_lines(audit) if line["outcome"] != "input_required"]
    assert len(answered) == len(calls) + 2  # the tool calls and the resource read
    read = audit_lines(audit)[-1]
    assert (read["event"], read["resource"], read["outcome"]) == ("resource_read", "files://f_abc123", "ok")


@pytest.mark.anyio
async def test_exactly_one_audit_line_per_call_under_200_concurrent_calls(
    up: Upstream, manifest: Manifest, tmp_path: Path
) -> None:
    audit = tmp_path / "audit.jsonl"
    rt = runtime_for(up, manifest, audit, auto_approve="high")
    kinds = ["list", "link", "delete-missing", "send-refused", "dry-run", "unknown", "bad-args", "status"]
    traces: list[str] = []

    async def one(i: int) -> None:
        kind, trace = kinds[i % len(kinds)], f"trace-{i:03d}"
        traces.append(trace)
        calls: dict[str, tuple[str, dict[str, Any]]] = {
            "list": ("files_list", {"limit": 2}),
            "link": ("files_create_download_link", {**LINK, "expiresAt": days_ahead(1 + i // 8)}),
            "delete-missing": ("files_delete", {"fileId": f"f_gone{i}"}),  # auto-approved; 404
            "send-refused": ("emails_send_external", MAIL),  # nobody to ask
            "dry-run": ("emails_bulk_send", {**BULK, "dryRun": True}),
            "unknown": ("emails.delete_everything", {}),
            "bad-args": ("files_list", {"limit": 1000}),
            "status": ("emails_campaign_status", {"campaignId": "cmp_1"}),  # 404
        }
        name, arguments = calls[kind]
        try:
            await rt.call(name, arguments, trace_id=trace)
        except MCPError:
            assert kind == "unknown"

    async with anyio.create_task_group() as tg:
        for i in range(200):
            tg.start_soon(one, i)
    await rt.aclose()
    lines = audit_lines(audit, None)  # every line parses: no two writes interleaved
    results = [line for line in lines if line["phase"] == "result"]
    assert len(results) == 200 and sorted(line["traceId"] for line in results) == sorted(traces)
    attempts = [line for line in lines if line["phase"] == "attempt"]
    # an attempt line precedes each call that sent a write: the links and the (auto-approved) deletes
    assert len(attempts) == 25 + 25 and {a["tool"] for a in attempts} == {"files_create_download_link", "files_delete"}
    assert up.count("createDownloadLink") == 25 and up.count("deleteFile") == 25
    assert up.count("sendExternalEmail") == 0
    outcomes: dict[str, int] = {}
    for line in results:
        outcomes[line["outcome"]] = outcomes.get(line["outcome"], 0) + 1
    # ok: list, link; error: a missing file, bad arguments, a missing campaign; denied: no one to
    # confirm the e-mail, the unknown tool
    assert outcomes == {"ok": 50, "error": 75, "denied": 50, "dry_run": 25}


@pytest.mark.anyio
async def test_a_failing_audit_target_fails_the_call_closed(up: Upstream, manifest: Manifest, tmp_path: Path) -> None:
    # a target that cannot be opened: the server does not start
    for target in ("/dev/null/audit.jsonl", "/proc/openapi2mcp-audit.jsonl"):
        with pytest.raises(ConfigError, match="cannot open the audit log"):
            runtime_for(up, manifest, target)
    # a target that stops taking lines (a full disk): writes are not sent, results are withheld
    full = runtime_for(up, manifest, "/dev/full")
    refused = err(await full.call("files_create_download_link", LINK))
    assert refused["code"] == "AUDIT_FAILED" and "the write was not sent" in refused["message"]
    assert up.count("createDownloadLink") == 0
    withheld = err(await full.call("files_list", {}))
    assert withheld["code"] == "AUDIT_FAILED" and "structuredContent" not in withheld
    with pytest.raises(MCPError):  # an unknown tool stays a protocol error, and is still refused
        await full.call("emails.nope", {})
    await full.aclose()
    # a log that was closed under the server: the same
    audit = tmp_path / "audit.jsonl"
    closed = runtime_for(up, manifest, audit, auto_approve="high")
    assert ok(await closed.call("files_list", {}))["total"] == 4
    closed.auditor.close()
    assert err(await closed.call("files_delete", {"fileId": "f_abc123"}))["code"] == "AUDIT_FAILED"
    assert up.count("deleteFile") == 0 and up.domain()["files"] == 4
    await closed.aclose()
    assert len(audit_lines(audit)) == 1


@pytest.mark.anyio
async def test_an_argument_with_a_lone_surrogate_is_still_audited(
    up: Upstream, manifest: Manifest, tmp_path: Path
) -> None:
    """JSON allows "\\ud800" in a string, UTF-8 does not: the line escapes it rather than failing the call."""
    audit = tmp_path / "audit.jsonl"
    rt = runtime_for(up, manifest, audit)
    mail = {**MAIL, "subject": "Q3 \ud800"}
    with pytest.raises(InputRequired):  # the request state binds a digest of these arguments
        await rt.call("emails_send_external", mail, asker=Asker(modern=True, can_elicit=True))
    refused = err(await rt.call("emails_send_external", mail))
    await rt.aclose()
    assert refused["code"] == "CONFIRMATION_REQUIRED" and up.count("sendExternalEmail") == 0
    asked, denied = audit_lines(audit)
    assert (asked["outcome"], denied["outcome"]) == ("input_required", "denied")
    assert asked["arguments"]["subject"] == denied["arguments"]["subject"] == "Q3 \ud800"


# ============================================================================ over HTTP: openapi2mcp serve


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("era", "flag"), [("2025-11-25", "--sse"), ("2026-07-28", None), ("2026-07-28", "--stateless")]
)
async def test_over_http_with_serve(up: Upstream, tmp_path: Path, era: str, flag: str | None) -> None:
    """`openapi2mcp serve --transport http --audit-log --auto-approve high`.

    2025-11-25 elicits mid-call, which needs SSE answers (`--sse`); 2026-07-28 confirms with an
    input-required result and a retry, which works on stateless HTTP too (every request stands alone).
    """
    audit = tmp_path / "audit.jsonl"
    args = [str(SPEC), "--overlay", str(OVERLAY), "--audit-log", str(audit), "--auto-approve", "high"]
    args += [flag] if flag else []
    env = env_for(up)
    with HttpServer.start(args, log_dir=tmp_path, env=env) as server:
        user = User()
        async with Client(server.url, mode=mode_of(era), elicitation_callback=user) as client:
            assert client.protocol_version == era
            sent = ok(await client.call_tool("emails_send_external", MAIL))  # critical: the user confirms
            preview = ok(await client.call_tool("emails_bulk_send", {**BULK, "dryRun": True}))
            started = ok(await client.call_tool("emails_bulk_send", {**BULK, "dryRunToken": preview["dryRunToken"]}))
            deleted = ok(await client.call_tool("files_delete", {"fileId": "f_jkl012"}))  # high: auto-approved
        async with Client(server.url, mode=mode_of(era)) as plain:  # a client that cannot ask
            refused = err(await plain.call_tool("emails_send_external", MAIL))
        stderr = server.stderr()
    assert sent["status"] == "queued" and started["status"] == "sending" and deleted == {"status": 204}
    assert refused["code"] == "CONFIRMATION_REQUIRED"
    assert len(user.asked) == 2  # the e-mail and the campaign; not the auto-approved delete
    assert up.domain()["emails_sent"] == 1 and up.domain()["campaigns_started"] == 1
    lines = audit_lines(audit)
    if era == "2026-07-28":  # each confirmation is one more tools/call request (the input-required leg)
        assert [line["outcome"] for line in lines].count("input_required") == 2
    lines = [line for line in lines if line["outcome"] != "input_required"]
    assert [(line["tool"], line["outcome"], line["confirmation"]) for line in lines] == [
        ("emails_send_external", "ok", "confirmed"),
        ("emails_bulk_send", "dry_run", "not_required"),
        ("emails_bulk_send", "ok", "confirmed"),
        ("files_delete", "ok", "auto_approved"),
        ("emails_send_external", "denied", "unavailable"),
    ]
    assert {line["caller"]["transport"] for line in lines} == {"http"}
    assert CANARY not in audit.read_text(encoding="utf-8") and CANARY not in stderr
    assert "auto-approving the confirmation of high-risk calls" in stderr


@pytest.mark.anyio
async def test_2025_11_25_over_json_http_cannot_elicit(up: Upstream, tmp_path: Path) -> None:
    """Without --sse the server answers each POST with one JSON body: no way to send elicitation/create."""
    with HttpServer.start([str(SPEC), "--overlay", str(OVERLAY)], log_dir=tmp_path, env=env_for(up)) as server:
        user = User()
        async with Client(server.url, mode="legacy", elicitation_callback=user) as client:
            refused = err(await client.call_tool("files_delete", {"fileId": "f_abc123"}))
    assert refused["code"] == "CONFIRMATION_REQUIRED" and "needs SSE responses" in refused["message"]
    assert user.asked == [] and up.count("deleteFile") == 0


@pytest.mark.anyio
@pytest.mark.parametrize("sse", [False, True])
async def test_2025_11_25_over_stateless_http_is_told_the_real_reason(up: Upstream, tmp_path: Path, sse: bool) -> None:
    """A client that declared elicitation is not told it lacks elicitation: stateless HTTP keeps no session."""
    args = [str(SPEC), "--overlay", str(OVERLAY), "--stateless", *(["--sse"] if sse else [])]
    with HttpServer.start(args, log_dir=tmp_path, env=env_for(up)) as server:
        user = User()
        async with Client(server.url, mode="legacy", elicitation_callback=user) as client:
            refused = err(await client.call_tool("files_delete", {"fileId": "f_abc123"}))
    assert refused["code"] == "CONFIRMATION_REQUIRED"
    assert "does not support elicitation" not in refused["message"]
    assert "the server runs stateless (--stateless)" in refused["message"]
    assert user.asked == [] and up.count("deleteFile") == 0


def test_audit_log_flag_errors(tmp_path: Path) -> None:
    from tests.e2e_support import example_args, run_cli

    bad = run_cli("serve", *example_args("mailfiles"), "--audit-log", "/dev/null/x.jsonl")
    assert bad.returncode == 2 and "cannot open the audit log /dev/null/x.jsonl" in bad.stderr
    approve = run_cli("serve", *example_args("mailfiles"), "--auto-approve", "forbidden")
    assert approve.returncode == 2 and "forbidden tools are never callable" in approve.stderr
