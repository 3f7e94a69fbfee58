"""The tool contract on the wire (seed 002): `_meta["openapi2mcp/contract"]` of every listed tool.

What each tool's contract says (risk, autonomy, confirmation, step-up, permissions, side effects,
idempotency, dry run, audit event, failure modes, per action and variant), that the serving flags
change it, that the SDK client gets it in both protocol eras, and that it tells the truth: every
error a real call returns (against the real mail-and-files upstream) is one of the tool's
failure modes, with the same retryable flag. stdio and Streamable HTTP are covered by
tests/test_e2e.py (test_handshake_and_deterministic_tool_list).
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import jsonschema
import mcp_types as types
import pytest

from examples import Upstream
from openapi2mcp.manifest import CONTRACT_KEY, ContractContext, Manifest, contract_json_schema, tool_contract
from openapi2mcp.result import error_of
from openapi2mcp.runtime import Runtime, RuntimeOptions
from openapi2mcp.testing import connect
from tests.e2e_support import cli, example_args
from tests.helpers import compile_example, compile_text
from tests.local import ROOT

CANARY = "CANARY-contract-5b1e"
KEY = "test-signing-key-0123456789abcdef-contract"
SCHEMA = jsonschema.Draft202012Validator(contract_json_schema())
MAIL = {"to": "anna.schmidt@example.com", "subject": "Q3 numbers", "body": "Hello Anna, the numbers are attached."}


@pytest.fixture(scope="module")
def mailfiles() -> Manifest:
    return compile_example("mailfiles").manifest


@pytest.fixture(scope="module")
def up() -> Iterator[Upstream]:
    with Upstream.start("mailfiles", auth=f"bearer:{CANARY}") as server:
        yield server


def env_for(up: Upstream) -> dict[str, str]:
    return {"MAILFILES_API_URL": up.base_url, "MAILFILES_API_TOKEN": CANARY, "OPENAPI2MCP_SIGNING_KEY": KEY}


def contract(m: Manifest, name: str, context: ContractContext | None = None) -> dict[str, Any]:
    tool = m.tool(name)
    assert tool is not None
    wire = tool.definition(context)["_meta"][CONTRACT_KEY]
    SCHEMA.validate(wire)
    assert wire == tool_contract(tool, context).wire()
    return wire  # type: ignore[no-any-return]


def failures_of(wire: dict[str, Any], branch: str | None = None) -> dict[str, bool]:
    """What a call of the tool (of this action) can return: the tool's failure modes and the action's own."""
    own = wire["actions"][branch]["failureModes"] if branch else {}
    return {**wire["failureModes"], **own}


# ============================================================================ what a contract says


def test_a_critical_tool_says_everything_before_any_call(mailfiles: Manifest) -> None:
    c = contract(mailfiles, "emails_send_external")
    assert c["v"] == 1
    assert (c["category"], c["risk"], c["autonomous"], c["confirmation"]) == ("communication", "critical", False,
                                                                              "required")
    assert c["permissions"] == ["emails:send"] and c["stepUp"] is None
    assert c["sideEffects"] and c["auditEvent"] == "email.external.sent"
    assert c["idempotency"] == "none" and c["dryRun"] == "none"
    modes = c["failureModes"]
    assert modes["CONFIRMATION_REQUIRED"] is False and modes["CONFIRMATION_DECLINED"] is False
    assert modes["RATE_LIMITED"] is True and modes["UPSTREAM_TIMEOUT"] is True  # the upstream's 429, a slow answer
    assert modes["UPSTREAM_ERROR"] is True and modes["NOT_FOUND"] is False  # 502-504 are retryable, 404 is not
    for absent in ("DRY_RUN_REQUIRED", "CURSOR_INVALID", "STATE_UNAVAILABLE", "AUDIT_FAILED", "PERMISSION_DENIED"):
        assert absent not in modes, absent  # nothing this server can return for this tool
    assert list(modes) == sorted(modes)  # deterministic
    assert "actions" not in c and "variants" not in c


def test_each_safety_field_follows_the_manifest(mailfiles: Manifest) -> None:
    bulk = contract(mailfiles, "emails_bulk_send")
    assert bulk["dryRun"] == "required" and bulk["failureModes"]["DRY_RUN_REQUIRED"] is False
    link = contract(mailfiles, "files_create_download_link")
    assert (link["risk"], link["autonomous"], link["idempotency"], link["confirmation"]) == ("medium", True, "keyed",
                                                                                            "none")
    listed = contract(mailfiles, "files_list")
    assert (listed["autonomous"], listed["idempotency"], listed["sideEffects"]) == (True, "safe", [])
    assert listed["failureModes"]["CURSOR_INVALID"] is False  # a paginated tool takes cursors
    delete = contract(mailfiles, "files_delete")
    assert (delete["risk"], delete["confirmation"], delete["autonomous"], delete["idempotency"]) == (
        "high", "required", False, "idempotent")


def test_collapsed_tools_carry_each_action_and_variant() -> None:
    m = compile_example("petstore", overlay="overlay-tasks.yaml").manifest
    manage = contract(m, "pets_manage")
    assert set(manage["actions"]) == {"create", "update", "delete"}
    # the tool-level values are the most cautious of its actions
    assert (manage["risk"], manage["autonomous"], manage["confirmation"]) == ("high", False, "required")
    assert manage["actions"]["create"]["autonomous"] and manage["actions"]["create"]["confirmation"] == "none"
    delete = manage["actions"]["delete"]
    assert (delete["risk"], delete["confirmation"], delete["autonomous"]) == ("high", "required", False)
    # no repetition: what every action can return is said once, what only `delete` can return is its own
    assert "CONFIRMATION_DECLINED" in delete["failureModes"] and "CONFIRMATION_DECLINED" not in manage["failureModes"]
    assert "NOT_FOUND" in manage["failureModes"] and "NOT_FOUND" not in delete["failureModes"]
    assert manage["actions"]["create"]["failureModes"] == {}
    assert manage["auditEvent"] == "pets.managed"
    find = contract(m, "pets_find")
    assert [v["when"] for v in find["variants"]] == [["petId"], []]  # in the order they are tried
    assert "CURSOR_INVALID" in find["variants"][1]["failureModes"] and not find["variants"][0]["failureModes"]


def test_overlay_failure_modes_replace_the_codes_they_map(tmp_path: Path) -> None:
    overlay = """
        openapi2mcp: 1
        tools:
          - name: campaign_status
            operation: getCampaign
            failure_modes:
              404: {code: CAMPAIGN_UNKNOWN, message: No such campaign.}
              5XX: {code: MAIL_DOWN, retryable: true}
              429: {code: SLOW_DOWN}
    """
    spec = (ROOT / "examples" / "mailfiles" / "openapi.yaml").read_text(encoding="utf-8")
    m = compile_text(tmp_path, spec, overlay).manifest
    modes = contract(m, "campaign_status")["failureModes"]
    assert modes["CAMPAIGN_UNKNOWN"] is False and modes["MAIL_DOWN"] is True
    assert modes["SLOW_DOWN"] is True  # no retryable given: the status's own (429 is worth retrying)
    assert "NOT_FOUND" not in modes and "RATE_LIMITED" not in modes  # every status that gave them is mapped
    assert modes["UPSTREAM_ERROR"] is False  # a redirect or a 402 still gives it, and those are not retryable


def test_serving_flags_change_the_contract(mailfiles: Manifest) -> None:
    flagged = ContractContext(auto_approve=frozenset({"critical"}), audited=True, shared_state=True)
    send = contract(mailfiles, "emails_send_external", flagged)
    assert send["confirmation"] == "autoApproved" and send["autonomous"] is False  # critical is never autonomous
    assert "CONFIRMATION_REQUIRED" not in send["failureModes"]  # the server does not ask
    assert send["failureModes"]["AUDIT_FAILED"] is False
    assert "STATE_UNAVAILABLE" not in send["failureModes"]  # nothing of it is kept in the store
    link = contract(mailfiles, "files_create_download_link", flagged)
    assert link["failureModes"]["STATE_UNAVAILABLE"] is True  # its keyed result is
    limited = contract(mailfiles, "files_list", ContractContext(shared_state=True, server_limit=True))
    assert limited["failureModes"]["STATE_UNAVAILABLE"] is True  # the buckets are shared
    assert "STATE_UNAVAILABLE" not in contract(mailfiles, "files_list", ContractContext(shared_state=True))[
        "failureModes"]


# ============================================================================ on the wire, and true


@pytest.mark.parametrize("mode", ["legacy", "auto"])  # 2025-11-25 and 2026-07-28
def test_the_sdk_client_gets_the_served_contract(mode: str, mailfiles: Manifest, up: Upstream, tmp_path: Path
                                                 ) -> None:
    options = RuntimeOptions(environ=env_for(up), auto_approve="critical", audit_log=str(tmp_path / "audit.log"),
                             rate_limit=None)

    async def main() -> list[types.Tool]:
        runtime = Runtime(mailfiles, options)
        try:
            async with connect(runtime, mode=mode) as client:
                return (await client.list_tools()).tools
        finally:
            await runtime.aclose()

    tools = anyio.run(main)
    assert [t.name for t in tools] == [t.name for t in mailfiles.tools if t.risk != "forbidden"]
    context = ContractContext(auto_approve=frozenset({"critical"}), audited=True)
    for tool in tools:
        got = (tool.meta or {})[CONTRACT_KEY]
        SCHEMA.validate(got)
        assert got == contract(mailfiles, tool.name, context)
    sent = next(t for t in tools if t.name == "emails_send_external")
    assert (sent.meta or {})[CONTRACT_KEY]["confirmation"] == "autoApproved"


def test_every_error_a_call_returns_is_one_of_its_failure_modes(mailfiles: Manifest, up: Upstream) -> None:
    """Real calls, real failures: each code, and its retryable flag, was promised by the contract."""
    calls: list[tuple[str, dict[str, Any], dict[str, Any] | None]] = [
        ("emails_send_external", MAIL, None),  # this client cannot confirm: CONFIRMATION_REQUIRED
        ("emails_bulk_send", {"templateId": "tmpl_newsletter_q3", "segmentId": "seg_active_customers"}, None),
        ("emails_campaign_status", {"campaignId": "cmp_999999"}, None),  # NOT_FOUND
        ("files_list", {"cursor": "not-a-cursor"}, None),  # CURSOR_INVALID
        ("files_list", {"limit": "many"}, None),  # ARGUMENT_INVALID
        ("files_list", {}, {"operation": "listFiles", "status": 503, "times": 3, "headers": {"Retry-After": "0"}}),
        ("files_list", {}, {"operation": "listFiles", "status": 429, "times": 3, "headers": {"Retry-After": "0"}}),
        ("files_list", {}, {"operation": "listFiles", "status": 500, "times": 3}),
    ]
    seen: list[str] = []

    async def main() -> None:
        runtime = Runtime(mailfiles, RuntimeOptions(environ=env_for(up)))
        try:
            async with connect(runtime) as client:
                listed = {t.name: (t.meta or {})[CONTRACT_KEY] for t in (await client.list_tools()).tools}
                for name, arguments, fault in calls:
                    up.reset()
                    up.clear_faults()
                    if fault:
                        up.fault(**fault)
                    result = await client.call_tool(name, arguments)
                    body = error_of(result)
                    assert result.is_error and body is not None, (name, arguments, result.model_dump_json())
                    modes = failures_of(listed[name])
                    assert body["code"] in modes, (name, body)
                    assert not body["retryable"] or modes[body["code"]], (name, body)
                    seen.append(body["code"])
        finally:
            up.clear_faults()
            await runtime.aclose()

    anyio.run(main)
    assert seen == ["CONFIRMATION_REQUIRED", "DRY_RUN_REQUIRED", "NOT_FOUND", "CURSOR_INVALID", "ARGUMENT_INVALID",
                    "UPSTREAM_ERROR", "RATE_LIMITED", "UPSTREAM_ERROR"]


# ============================================================================ the CLI


def test_schema_contract_prints_the_published_schema() -> None:
    proc = subprocess.run(cli("schema", "contract"), capture_output=True, text=True, cwd=ROOT, check=False)
    assert proc.returncode == 0, proc.stderr
    printed = json.loads(proc.stdout)
    assert printed == contract_json_schema()
    jsonschema.Draft202012Validator.check_schema(printed)
    assert printed["required"][0] == "v" and "actions" not in printed["required"]


def test_inspect_shows_the_contract(mailfiles: Manifest) -> None:
    proc = subprocess.run(cli("inspect", *example_args("mailfiles"), "--json"), capture_output=True, text=True,
                          cwd=ROOT, check=False)
    assert proc.returncode == 0, proc.stderr
    for definition in json.loads(proc.stdout):
        assert definition["_meta"][CONTRACT_KEY] == contract(mailfiles, definition["name"])
    text = subprocess.run(cli("inspect", *example_args("mailfiles")), capture_output=True, text=True, cwd=ROOT,
                          check=False).stdout
    line = next(ln for ln in text.splitlines() if ln.strip().startswith("emails_bulk_send"))
    assert "critical" in line and "confirm" in line and "dry-run required" in line
    assert "side effects:" in text and "autonomous" in text
