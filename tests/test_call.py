"""`openapi2mcp call` (issue 12): one tool call as a client sees it, run as a user runs it.

Every test runs the command as a subprocess against real upstreams (examples/: notes for reads and
errors, mailfiles for confirmations and dry runs), in process (SPEC --overlay, --manifest) and
against `openapi2mcp serve --transport http` (--url, --token), in both protocol eras. The person
at the keyboard is a real pseudo-terminal (pexpect): the confirmation text must appear there, and
only their `y` lets the request reach the upstream, whose own counters are the proof. Without a
terminal (a new session: no controlling tty) the call is declined. The upstream's bearer token and
the MCP token are canaries that must never be printed.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pexpect
import pytest

from examples import Upstream
from openapi2mcp.authoring import parse_arguments
from openapi2mcp.errors import InputError
from tests.e2e_support import LEGACY, MODERN, HttpServer, child_env, cli, example_args, no_traceback
from tests.local import ROOT

CANARY = "CANARY-call-upstream-5d1e77a0"  # the mail upstream's bearer token
MCP_TOKEN = "CANARY-call-mcp-token-8b2f3c41d9"  # the MCP server's token for --url
DELETE_TEXT = [
    "Allow Delete a file? (high risk)",
    'Arguments: fileId="f_abc123"',
    "What happens: The file and its download links are gone for good.",
]
BULK = ["templateId=tmpl_newsletter_q3", "segmentId=seg_active_customers"]


@pytest.fixture(scope="module")
def notes() -> Iterator[Upstream]:
    with Upstream.start("notes") as server:
        yield server


@pytest.fixture(scope="module")
def mail() -> Iterator[Upstream]:
    with Upstream.start("mailfiles", auth=f"bearer:{CANARY}") as server:
        yield server


@pytest.fixture(autouse=True)
def _fresh(request: pytest.FixtureRequest) -> None:
    for name in ("notes", "mail"):
        if name in request.fixturenames:
            request.getfixturevalue(name).reset()


def env_of(tmp_path: Path, **extra: str) -> dict[str, str]:
    """The command's environment: its own cache folder (the in-process signing key lives there)."""
    return child_env({"XDG_CACHE_HOME": str(tmp_path / "cache"), "COLUMNS": "160", **extra})


def notes_env(tmp_path: Path, up: Upstream) -> dict[str, str]:
    return env_of(tmp_path, NOTES_API_URL=up.base_url)


def mail_env(tmp_path: Path, up: Upstream) -> dict[str, str]:
    return env_of(tmp_path, MAILFILES_API_URL=up.base_url, MAILFILES_API_TOKEN=CANARY)


def run(*args: str, env: Mapping[str, str], stdin: str = "") -> subprocess.CompletedProcess[str]:
    """`openapi2mcp call ARGS` with no terminal at all (a new session, stdin a pipe), as in CI or a script."""
    done = subprocess.run(cli("call", *args), input=stdin, env=dict(env), cwd=ROOT, capture_output=True, text=True,
                          timeout=120, check=False, start_new_session=True)
    no_traceback(done.stdout + done.stderr)
    for canary in (CANARY, MCP_TOKEN):
        assert canary not in done.stdout + done.stderr, "a secret was printed"
    return done


def on_terminal(*args: str, env: Mapping[str, str]) -> pexpect.spawn:
    """`openapi2mcp call ARGS` on a real pseudo-terminal (its controlling tty): the person types the answers."""
    command = cli("call", *args)
    return pexpect.spawn(command[0], command[1:], env=dict(env), cwd=str(ROOT), encoding="utf-8", timeout=90,
                         dimensions=(50, 200))


def finish(child: pexpect.spawn) -> tuple[int, str]:
    child.expect(pexpect.EOF)
    output = child.before
    child.close()
    assert CANARY not in output and MCP_TOKEN not in output
    no_traceback(output)
    return int(child.exitstatus if child.exitstatus is not None else -1), output


# ============================================================================ results


def test_a_call_prints_structured_content_and_provenance(notes: Upstream, tmp_path: Path) -> None:
    done = run(*example_args("notes"), "notes_search", "keyword=mcp", "limit=2", env=notes_env(tmp_path, notes))
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert out.startswith("notes_search: ok  [2026-07-28, traceId ")
    assert "structuredContent:" in out and '"evidencePaths": [' in out and '"score": 0.8' in out
    assert "resource link: notes://ai-agent/mcp-basics.md" in out
    assert f"GET {notes.base_url}/notes/search?keyword=mcp&limit=2&scope=ai-agent -> 200" in out  # limit typed
    assert "\x1b[" not in out  # piped: plain text, no colour
    assert notes.count("searchNotes") == 1


@pytest.mark.parametrize("era", [LEGACY, MODERN])
def test_json_is_the_call_tool_result_as_the_client_got_it(notes: Upstream, tmp_path: Path, era: str) -> None:
    done = run(*example_args("notes"), "notes_search", "keyword=mcp", "--json", "--era", era,
               env=notes_env(tmp_path, notes))
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)  # nothing else on stdout
    assert result["isError"] is False
    assert json.loads(result["content"][0]["text"]) == result["structuredContent"]
    assert result["structuredContent"]["total"] >= 1
    requests = result["_meta"]["openapi2mcp/requests"]
    assert requests[0]["operation"] == "searchNotes" and requests[0]["status"] == 200
    assert result["_meta"]["openapi2mcp/traceId"]


def test_a_tool_error_shows_its_body_and_exits_1(notes: Upstream, tmp_path: Path) -> None:
    done = run(*example_args("notes"), "notes_read", "path=inbox/nothing-here.md", env=notes_env(tmp_path, notes))
    assert done.returncode == 1, done.stderr
    head, message = done.stdout.splitlines()[:2]
    assert head.startswith("notes_read: error NOT_FOUND (not retryable, upstream status 404)")
    assert "No note at that path" in message
    body = json.loads(done.stdout.split("error body:\n", 1)[1].split("\nrequests:", 1)[0])
    assert body["code"] == "NOT_FOUND" and body["retryable"] is False and body["status"] == 404 and body["traceId"]
    as_json = json.loads(run(*example_args("notes"), "notes_read", "path=inbox/nothing-here.md", "--json",
                             env=notes_env(tmp_path, notes)).stdout)
    assert as_json["isError"] is True and as_json["_meta"]["openapi2mcp/error"]["code"] == "NOT_FOUND"


def test_arguments_from_json_stdin_and_items(notes: Upstream, tmp_path: Path) -> None:
    env = notes_env(tmp_path, notes)
    piped = run(*example_args("notes"), "notes_search", "-", "limit=1", "--json", env=env,
                stdin='{"keyword": "mcp", "limit": 4, "scope": "all-allowed"}')
    assert piped.returncode == 0, piped.stderr
    url = json.loads(piped.stdout)["_meta"]["openapi2mcp/requests"][0]["url"]
    assert "limit=1" in url and "scope=all-allowed" in url  # the item replaced the JSON's limit
    first = run(*example_args("notes"), "notes_search", '{"keyword": "transports"}', "--json", env=env)
    assert first.returncode == 0, first.stderr
    raw = run(*example_args("notes"), "notes_search", "keyword=mcp", 'limit:="3"', env=env)
    assert raw.returncode == 2 and "limit" in raw.stderr and "integer" in raw.stderr  # := is JSON as written


def test_a_manifest_serves_the_same_call(notes: Upstream, tmp_path: Path) -> None:
    manifest = tmp_path / "notes.json"
    compiled = subprocess.run(cli("compile", *example_args("notes"), "-o", str(manifest)), env=child_env(), cwd=ROOT,
                              capture_output=True, text=True, timeout=120, check=False)
    assert compiled.returncode == 0, compiled.stderr
    done = run("--manifest", str(manifest), "tasks_list", "status=open", "--json", env=notes_env(tmp_path, notes))
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["_meta"]["openapi2mcp/requests"][0]["url"].endswith("/tasks?status=open")


# ============================================================================ bad input


@pytest.mark.parametrize(("words", "says"), [
    (["notes_serch", "keyword=mcp"], "unknown tool 'notes_serch': did you mean 'notes_search'?"),
    (["admin_run_command"], "unknown tool 'admin_run_command'"),  # forbidden: exactly an unknown tool
    ([], "give the TOOL to call"),
    (["notes_search", "keyword=mcp", "limit=ten"], "'limit=ten': limit takes an integer, not 'ten'"),
    (["notes_search", "keywrd=mcp"], "keywrd: unknown argument, did you mean 'keyword'?"),
    (["notes_search", "keyword=m"], "keyword: 'm' is too short"),
    (["notes_search", "limit=5"], "keyword: required argument missing"),
    (["notes_search", "keyword=mcp", "limit=50"], "limit: 50 is greater than the maximum of 20"),
    (["notes_search", "mcp"], "'mcp' is not an argument"),
    (["notes_search", "keyword=mcp", "limit:=NaN"], "NaN is not JSON"),
    (["notes_search", "keyword=mcp", "--dry-run"], "notes_search has no dry run"),
    (["notes_search", "-"], "stdin is not JSON"),
])
def test_bad_input_exits_2_naming_the_problem(notes: Upstream, tmp_path: Path, words: list[str], says: str) -> None:
    done = run(*example_args("notes"), *words, env=notes_env(tmp_path, notes))
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stdout == ""
    assert done.stderr.startswith("openapi2mcp: error: ") and says in done.stderr, done.stderr
    assert notes.count("searchNotes") == 0  # refused before anything was sent


def test_bad_sources_and_unreachable_servers_exit_2(tmp_path: Path) -> None:
    env = env_of(tmp_path)
    both = run("--manifest", "m.json", "--url", "http://127.0.0.1:9/mcp", "tool", env=env)
    assert both.returncode == 2 and "give one of SPEC --overlay F, --manifest M or --url U" in both.stderr
    gone = run("--url", "http://127.0.0.1:9/mcp", "notes_search", env=env)
    assert gone.returncode == 2 and "cannot reach the server" in gone.stderr, gone.stderr
    missing = run("--manifest", str(tmp_path / "nope.json"), "notes_search", env=env)
    assert missing.returncode == 2 and "manifest not found" in missing.stderr


# ============================================================================ confirmation at the keyboard


@pytest.mark.parametrize("era", [LEGACY, MODERN])
def test_in_process_the_person_at_the_terminal_confirms(mail: Upstream, tmp_path: Path, era: str) -> None:
    env = mail_env(tmp_path, mail)
    child = on_terminal(*example_args("mailfiles"), "files_delete", "fileId=f_abc123", "--era", era, env=env)
    child.expect_exact("Go ahead? [y/N] ")
    shown = child.before.replace("\r\n", "\n")
    assert "\n".join(DELETE_TEXT) in shown  # the server's text, exactly, line by line
    assert mail.count("deleteFile") == 0  # nothing sent while the person reads
    child.sendline("y")
    status, output = finish(child)
    assert status == 0, output
    assert "files_delete: ok" in output and f"[{era}" in output and "confirmed at the terminal" in output
    assert mail.count("deleteFile") == 1

    child = on_terminal(*example_args("mailfiles"), "files_delete", "fileId=f_def456", "--era", era, env=env)
    child.expect_exact("Go ahead? [y/N] ")
    child.sendline("n")
    status, output = finish(child)
    assert status == 1 and "CONFIRMATION_DECLINED" in output and "declined at the terminal" in output
    assert mail.count("deleteFile") == 1  # the second file was not touched


@pytest.mark.parametrize("era", [LEGACY, MODERN])
def test_against_a_running_server_the_person_confirms(mail: Upstream, tmp_path: Path, era: str) -> None:
    """`serve --transport http` (--sse: how a 2025-11-25 client is asked mid-call), reached with --url --token."""
    args = [*example_args("mailfiles"), "--sse"]
    server_env = {"MAILFILES_API_URL": mail.base_url, "MAILFILES_API_TOKEN": CANARY,
                  "OPENAPI2MCP_AUTH_TOKENS": MCP_TOKEN}
    with HttpServer.start(args, log_dir=tmp_path, env=server_env) as server:
        env = env_of(tmp_path, OPENAPI2MCP_CALL_TOKEN=MCP_TOKEN)
        child = on_terminal("--url", server.url, "files_delete", "fileId=f_abc123", "--era", era, env=env)
        child.expect_exact("Go ahead? [y/N] ")
        assert "\n".join(DELETE_TEXT) in child.before.replace("\r\n", "\n")
        child.sendline("yes")
        status, output = finish(child)
        assert status == 0, output
        assert f"[{era}" in output and mail.count("deleteFile") == 1

        no_token = run("--url", server.url, "files_list", env=env_of(tmp_path))
        assert no_token.returncode == 2 and "needs a valid bearer token" in no_token.stderr
        listed = run("--url", server.url, "--token", MCP_TOKEN, "files_list", "--json", env=env_of(tmp_path))
        assert listed.returncode == 0 and json.loads(listed.stdout)["structuredContent"]
        assert MCP_TOKEN not in server.stderr() and CANARY not in server.stderr()


@pytest.mark.parametrize("era", [LEGACY, MODERN])
def test_no_terminal_and_no_yes_declines(mail: Upstream, tmp_path: Path, era: str) -> None:
    env = mail_env(tmp_path, mail)
    done = run(*example_args("mailfiles"), "files_delete", "fileId=f_abc123", "--era", era, env=env)
    assert done.returncode == 1
    assert "declined: there is no terminal to ask on; pass --yes to approve" in done.stderr
    assert "\n".join("  " + line for line in DELETE_TEXT) in done.stderr  # what would have been asked
    assert "CONFIRMATION_DECLINED" in done.stdout and mail.count("deleteFile") == 0
    approved = run(*example_args("mailfiles"), "files_delete", "fileId=f_abc123", "--era", era, "--yes", env=env)
    assert approved.returncode == 0, approved.stderr
    assert "confirmation approved by --yes" in approved.stderr and mail.count("deleteFile") == 1


# ============================================================================ dry run


def test_dry_run_then_the_real_call_with_its_token(mail: Upstream, tmp_path: Path) -> None:
    env = mail_env(tmp_path, mail)
    preview = run(*example_args("mailfiles"), "emails_bulk_send", *BULK, "--dry-run", "--json", env=env)
    assert preview.returncode == 0, preview.stderr
    content: dict[str, Any] = json.loads(preview.stdout)["structuredContent"]
    assert content["dryRun"] is True and content["preview"]["recipientCount"] > 0
    assert content["requests"][0]["headers"]["Authorization"] == "***"
    assert "dryRunToken=" + content["dryRunToken"] in preview.stderr  # how to send it for real
    assert mail.count("bulkSendEmails") == 1  # the preview: the upstream's own dryRun switch

    without = run(*example_args("mailfiles"), "emails_bulk_send", *BULK, "--yes", env=env)
    assert without.returncode == 1 and "DRY_RUN_REQUIRED" in without.stdout and mail.count("bulkSendEmails") == 1
    sent = run(*example_args("mailfiles"), "emails_bulk_send", *BULK, f"dryRunToken={content['dryRunToken']}",
               "--yes", env=env)  # another process: the in-process key is kept per user
    assert sent.returncode == 0, sent.stdout + sent.stderr
    assert "emails_bulk_send: ok" in sent.stdout and mail.count("bulkSendEmails") == 2  # the preview and the send


# ============================================================================ the argument rules


SCHEMA = {
    "type": "object",
    "properties": {
        "zip": {"type": "string"}, "limit": {"type": "integer"}, "ratio": {"type": "number"},
        "on": {"type": "boolean"}, "tags": {"type": "array", "items": {"type": "integer"}},
        "filter": {"type": "object"}, "maybe": {"type": ["integer", "null"]}, "kind": {"enum": [1, 2]},
        "ref": {"$ref": "#/$defs/Count"}, "either": {"anyOf": [{"type": "integer"}, {"type": "boolean"}]},
    },
    "$defs": {"Count": {"type": "integer"}},
}


@pytest.mark.parametrize(("words", "expected"), [
    (["zip=01234"], {"zip": "01234"}),  # a string stays a string
    (["limit=10", "ratio=2.5", "on=yes"], {"limit": 10, "ratio": 2.5, "on": True}),
    (["tags=1", "tags=2"], {"tags": [1, 2]}),
    (["tags=[3, 4]"], {"tags": [3, 4]}),
    (['filter={"a": [1]}'], {"filter": {"a": [1]}}),
    (["maybe=null", "kind=2", "ref=7", "either=false"], {"maybe": None, "kind": 2, "ref": 7, "either": False}),
    (["zip:=5", 'limit:="x"', "other=text"], {"zip": 5, "limit": "x", "other": "text"}),
    (["a\\=b=c", "zip=\\@home"], {"a=b": "c", "zip": "@home"}),
    (['{"limit": 1, "zip": "z"}', "limit=2"], {"limit": 2, "zip": "z"}),
])
def test_key_value_items_are_typed_by_the_schema(words: list[str], expected: dict[str, Any]) -> None:
    assert parse_arguments(words, SCHEMA) == expected


def test_files_and_stdin_as_values(tmp_path: Path) -> None:
    (tmp_path / "body.txt").write_text("line one\nline two\n")
    (tmp_path / "filter.json").write_text('{"x": true}')
    got = parse_arguments([f"zip=@{tmp_path / 'body.txt'}", f"filter:=@{tmp_path / 'filter.json'}"], SCHEMA)
    assert got == {"zip": "line one\nline two\n", "filter": {"x": True}}
    assert parse_arguments(["-", "on=off"], SCHEMA, stdin='{"limit": 3}') == {"limit": 3, "on": False}


@pytest.mark.parametrize(("words", "says"), [
    (["limit=1.5"], "limit takes an integer"),
    (["on=maybe"], "on takes a boolean"),
    (["tags=x"], "an item of tags takes an integer"),
    (["limit=1", "limit=2"], "limit is given twice"),
    (["=x"], "is not an argument"),
    (["ratio:=Infinity"], "Infinity is not JSON"),
    (['["not", "an object"]'], "is not an argument"),
    (["zip=@/no/such/file"], "no file '/no/such/file'"),
])
def test_bad_items_are_named(words: list[str], says: str) -> None:
    with pytest.raises(InputError, match=None) as raised:
        parse_arguments(words, SCHEMA)
    assert says in str(raised.value)


def test_version() -> None:
    from openapi2mcp import __version__

    for flag in ("--version", "-V"):
        done = subprocess.run(cli(flag), env=child_env(), cwd=ROOT, capture_output=True, text=True, timeout=60,
                              check=True)
        assert done.stdout == f"openapi2mcp {__version__}\n"
