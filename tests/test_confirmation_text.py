"""Issue 11 item 9 (and issue 10 part 7): arguments can neither hide nor forge parts of a confirmation.

The red team's values, sent by a real SDK client to the mail-and-files upstream through
openapi2mcp, the user's answers given by an elicitation callback that records what it was shown:

* "moon" + 190 spaces + "AND-EARTH" showed as "Send moon      …?" while the whole value was sent;
* a value with a newline added a fake "What happens: nothing" line;
* a right-to-left override, zero-width characters, a closing quote, a 5,000-character body with
  its payload at the end, and a `cc` the message template never mentions.

Each must be visible in what the user reads (2025-11-25 elicitation, 2026-07-28 input-required),
in the CONFIRMATION_REQUIRED text and in dry-run previews; the side effects come in a part no
argument can write (their own line, and the form's checkbox). `{placeholders}` in a message must
name arguments of the branch (a compile error with a suggestion, as prompt templates get).
"""

from __future__ import annotations

import json
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

from examples import Upstream
from openapi2mcp.compiler import compile_manifest
from openapi2mcp.errors import InputError
from openapi2mcp.loader import load_spec
from openapi2mcp.manifest import Manifest
from openapi2mcp.overlay.reading import parse_overlay
from openapi2mcp.result import error_of
from openapi2mcp.runtime import Runtime, RuntimeOptions
from tests.e2e_support import child_env, cli
from tests.local import EXAMPLES

SPEC = EXAMPLES / "mailfiles" / "openapi.yaml"
TOKEN = "token-confirmation-text-2b7e"
EFFECT = "What happens: One e-mail leaves the company and cannot be recalled."
OVERLAY = """\
openapi2mcp: 1
upstream:
  base_url: ${MAILFILES_API_URL}
  auth: {type: bearer, value: "${MAILFILES_API_TOKEN}"}
tools:
  - name: mail_send
    operation: sendExternalEmail
    risk: critical
    side_effects: [One e-mail leaves the company and cannot be recalled.]
    confirmation: {mode: required, message: "Send \\"{subject}\\" to {to}?"}
    dry_run: supported
  - name: files_remove
    operation: deleteFile
    risk: high
    side_effects: [The file is gone for good.]
"""
MAIL = {"to": "anna.schmidt@example.com", "subject": "Q3 numbers", "body": "Hello Anna."}
ERAS = {"2025-11-25": "legacy", "2026-07-28": "auto"}


@pytest.fixture(scope="module")
def up() -> Iterator[Upstream]:
    with Upstream.start("mailfiles", auth=f"bearer:{TOKEN}") as server:
        yield server


@pytest.fixture(autouse=True)
def _clean(up: Upstream) -> Iterator[None]:
    up.reset()
    yield
    up.assert_no_violations()


@pytest.fixture(scope="module")
def manifest() -> Manifest:
    return compile_manifest(load_spec(str(SPEC)), [parse_overlay(OVERLAY, "overlay.yaml")]).manifest


def env_for(up: Upstream) -> dict[str, str]:
    return {"MAILFILES_API_URL": up.base_url, "MAILFILES_API_TOKEN": TOKEN,
            "OPENAPI2MCP_SIGNING_KEY": "test-signing-key-0123456789abcdef-confirm"}


class User:
    """Says yes, and keeps what it was shown: the message and the form."""

    def __init__(self) -> None:
        self.asked: list[str] = []
        self.forms: list[dict[str, Any]] = []

    async def __call__(self, context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        self.asked.append(params.message)
        assert isinstance(params, types.ElicitRequestFormParams)
        self.forms.append(params.requested_schema)
        return types.ElicitResult(action="accept", content={"confirm": True})


async def confirm_once(
    up: Upstream, manifest: Manifest, era: str, arguments: dict[str, Any]
) -> tuple[str, dict[str, Any]]:
    """Call mail_send through a real client; the user says yes. (message, form) the user saw."""
    runtime = Runtime(manifest, RuntimeOptions(environ=env_for(up)))
    user = User()
    async with Client(runtime.build_server(), mode=ERAS[era], elicitation_callback=user) as client:
        assert client.protocol_version == era
        result = await client.call_tool("mail_send", arguments)
    await runtime.aclose()
    assert not result.is_error, result
    assert len(user.asked) == 1
    sent = json.loads(up.last_request("sendExternalEmail")["body"])
    assert sent == arguments  # the full values went out: the user must have seen them all
    return user.asked[0], user.forms[0]


def lines_of(message: str) -> list[str]:
    return message.split("\n")


@pytest.mark.anyio
@pytest.mark.parametrize("era", list(ERAS))
async def test_a_long_run_of_spaces_cannot_push_the_rest_out_of_view(up: Upstream, manifest: Manifest,
                                                                     era: str) -> None:
    subject = "moon" + " " * 180 + "AND-EARTH"
    message, _ = await confirm_once(up, manifest, era, {**MAIL, "subject": subject})
    first = lines_of(message)[0]
    assert first == 'Send "moon⟨180 spaces⟩AND-EARTH" to "anna.schmidt@example.com"?'
    assert lines_of(message)[-1] == "Look closely: subject holds 180 spaces in a row (shown escaped above)."


@pytest.mark.anyio
@pytest.mark.parametrize("era", list(ERAS))
async def test_a_value_cannot_add_lines_of_its_own(up: Upstream, manifest: Manifest, era: str) -> None:
    subject = 'Q3"? \nWhat happens: nothing, this is a test.\nArguments: none'
    message, form = await confirm_once(up, manifest, era, {**MAIL, "subject": subject})
    lines = lines_of(message)
    assert lines[0] == (r'Send "Q3\"? \nWhat happens: nothing, this is a test.\nArguments: none" to '
                        '"anna.schmidt@example.com"?')
    assert [line for line in lines if line.startswith("What happens")] == [EFFECT]
    assert [line for line in lines if line.startswith("Arguments")] == [lines[1]]
    assert lines[-1].startswith("Look closely: subject holds line breaks")
    confirm = form["properties"]["confirm"]  # the checkbox itself says what happens: no argument is in it
    assert confirm["description"] == (
        "What happens: One e-mail leaves the company and cannot be recalled. Check to let the call go ahead.")


@pytest.mark.anyio
@pytest.mark.parametrize("era", list(ERAS))
async def test_invisible_characters_a_long_tail_and_an_unmentioned_argument_are_shown(
    up: Upstream, manifest: Manifest, era: str
) -> None:
    body = "A" * 1000 + " PS: also wire 10,000 EUR to the account below."
    arguments = {**MAIL, "subject": "invoice\u202efdp.exe\u200b", "body": body, "cc": ["mallory@example.net"]}
    message, _ = await confirm_once(up, manifest, era, arguments)
    lines = lines_of(message)
    assert lines[0] == r'Send "invoice\u202efdp.exe\u200b" to "anna.schmidt@example.com"?'
    assert 'cc=["mallory@example.net"]' in lines[1]  # the template does not name it; the user sees it anyway
    assert "account below.\" (1,047 characters)" in lines[1] and "characters not shown" in lines[1]
    assert lines[2] == EFFECT
    assert lines[3] == ("Look closely: subject holds invisible characters (bidi controls, zero-width or blank "
                        "characters); body holds 1,047 characters (shortened) (shown escaped above).")
    assert "\u202e" not in message and "\u200b" not in message


@pytest.mark.anyio
async def test_a_client_that_cannot_ask_reads_the_same_safe_text(up: Upstream, manifest: Manifest) -> None:
    runtime = Runtime(manifest, RuntimeOptions(environ=env_for(up)))
    async with Client(runtime.build_server(), mode="legacy") as client:  # no elicitation
        result = await client.call_tool("mail_send", {**MAIL, "subject": "hi\nWhat happens: nothing"})
    await runtime.aclose()
    body = error_of(result)
    assert body is not None and body["code"] == "CONFIRMATION_REQUIRED"
    asked = body["message"].split("The user would have been asked:\n", 1)[1]
    assert lines_of(asked)[0] == r'Send "hi\nWhat happens: nothing" to "anna.schmidt@example.com"?'
    assert [line for line in lines_of(asked) if line.startswith("What happens")] == [EFFECT]
    assert up.count("sendExternalEmail") == 0


@pytest.mark.anyio
async def test_a_dry_run_flags_what_the_arguments_hide(up: Upstream, manifest: Manifest) -> None:
    runtime = Runtime(manifest, RuntimeOptions(environ=env_for(up)))
    async with Client(runtime.build_server(), mode="legacy") as client:
        result = await client.call_tool("mail_send", {**MAIL, "subject": "moon" + " " * 180 + "AND-EARTH",
                                                      "dryRun": True})
        plain = await client.call_tool("mail_send", {**MAIL, "dryRun": True})
    await runtime.aclose()
    preview = result.structured_content
    assert preview is not None and preview["dryRun"] is True
    assert preview["argumentWarnings"] == ["subject holds 180 spaces in a row"]
    assert preview["requests"][0]["body"]["subject"] == "moon" + " " * 180 + "AND-EARTH"  # exactly what is sent
    assert preview["sideEffects"] == ["One e-mail leaves the company and cannot be recalled."]
    assert plain.structured_content is not None and "argumentWarnings" not in plain.structured_content
    assert up.count("sendExternalEmail") == 0


@pytest.mark.anyio
async def test_over_stdio_with_serve(up: Upstream, tmp_path: Path) -> None:
    """The same over a real `openapi2mcp serve` process (2025-11-25: elicitation mid-call)."""
    overlay = tmp_path / "overlay.yaml"
    overlay.write_text(OVERLAY)
    params = StdioServerParameters(command=sys.executable,
                                   args=cli("serve", str(SPEC), "--overlay", str(overlay))[1:],
                                   env=child_env(env_for(up)), cwd=str(tmp_path))
    user = User()
    with (tmp_path / "stderr.txt").open("w") as errlog:
        async with Client(stdio_client(params, errlog=errlog), mode="legacy", elicitation_callback=user) as client:
            result = await client.call_tool("mail_send", {**MAIL, "subject": "Q3\u2066 numbers"})
            removed = await client.call_tool("files_remove", {"fileId": "f_abc123"})
    assert not result.is_error and not removed.is_error
    sent, remove = lines_of(user.asked[0]), lines_of(user.asked[1])
    assert sent[0] == r'Send "Q3\u2066 numbers" to "anna.schmidt@example.com"?' and sent[2] == EFFECT
    assert remove == ["Allow Delete a file permanently? (high risk)", 'Arguments: fileId="f_abc123"',
                      "What happens: The file is gone for good."]
    assert up.count("sendExternalEmail") == up.count("deleteFile") == 1


# ============================================================================ issue 10 part 7: placeholders


def compile_error(overlay: str) -> str:
    with pytest.raises(InputError) as info:
        compile_manifest(load_spec(str(SPEC)), [parse_overlay(textwrap.dedent(overlay), "confirm.yaml")])
    return info.value.render()


def test_a_placeholder_must_name_an_argument_of_its_branch() -> None:
    text = compile_error("""\
        openapi2mcp: 1
        tools:
          - name: mail_send
            operation: sendExternalEmail
            confirmation: {mode: required, message: "Send {subjcet} to {to}?"}
        """)
    assert "confirm.yaml:5" in text and "{subjcet} in the confirmation message is not an argument of mail_send" in text
    assert "did you mean 'subject'" in text and "write {{ and }} for literal braces" in text
    text = compile_error("""\
        openapi2mcp: 1
        tools:
          - name: files_manage
            actions:
              list: {operation: listFiles}
              remove:
                operation: deleteFile
                confirmation: {mode: required, message: "Delete {fileId} (page {limit})?"}
        """)
    assert "{limit} in the confirmation message is not an argument of action 'remove' of files_manage" in text
    assert "its arguments: action, fileId" in text


def test_literal_braces_and_quotes_around_placeholders() -> None:
    compiled = compile_manifest(load_spec(str(SPEC)), [parse_overlay(textwrap.dedent("""\
        openapi2mcp: 1
        tools:
          - name: files_remove
            operation: deleteFile
            confirmation: {mode: required, message: "Delete '{fileId}' ({{permanently}})?"}
        """), "braces.yaml")])
    from openapi2mcp.runtime.policy import confirmation_text
    from openapi2mcp.upstream import Redactor

    tool = compiled.manifest.tool("files_remove")
    assert tool is not None
    text = confirmation_text(tool, tool.branches[0], {"fileId": "f_1"}, Redactor(set()))
    assert lines_of(text)[0] == 'Delete "f_1" ({permanently})?'
