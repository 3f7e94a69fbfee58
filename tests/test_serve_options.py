"""The run options, defined once (openapi2mcp/serving/options.py), mean the same in both commands.

`openapi2mcp serve` (typer, parameters generated from the table) and a frozen package's command
(argparse, built from the table) must give the same RunOptions for every option set by its flag
or by its OPENAPI2MCP_* variable, the same one-line error for a bad value, and the same --help.
Every test here is parametrised over the table: a new option is tested by adding it there.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from typer.testing import CliRunner

from examples import Upstream
from openapi2mcp.cli import app as cli_module
from openapi2mcp.manifest import Manifest
from openapi2mcp.serving import CHECK, ENV_ONLY, OPTIONS, Option, RunOptions, options_markdown, parser, run
from tests.e2e_support import child_env, cli, example_args, running
from tests.helpers import compile_example
from tests.local import ROOT, free_port

MODULE = "notes_options_mcp"
TOKEN = "options-token-0123456789abcdef"
BAD = {"int": "many", "float": "soon", "choice": "nope", "switch": "maybe"}  # a value no option of the kind takes


@pytest.fixture(scope="module")
def notes() -> Manifest:
    return compile_example("notes").manifest


@pytest.fixture(scope="module")
def package_root(notes: Manifest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A frozen package as `build` lays it out (manifest.json and build.json beside the module)."""
    root = tmp_path_factory.mktemp("options-pkg")
    module = root / MODULE
    module.mkdir()
    (module / "__init__.py").write_text("")
    (module / "manifest.json").write_text(notes.to_json())
    (module / "build.json").write_text(json.dumps({"name": "notes-options-mcp", "version": "1.0.0"}))
    return root


@pytest.fixture
def commands(package_root: Path, monkeypatch: pytest.MonkeyPatch) -> Commands:
    monkeypatch.syspath_prepend(str(package_root))
    for option in OPTIONS:  # the test's own environment must not leak in
        monkeypatch.delenv(option.env, raising=False)
    return Commands(package_root / MODULE / "manifest.json", monkeypatch)


class Commands:
    """Both commands, run in-process up to the point where they would serve: what they would serve with."""

    def __init__(self, manifest: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        self.manifest = manifest
        self.monkeypatch = monkeypatch

    def _capture(self, target: str) -> list[RunOptions]:
        seen: list[RunOptions] = []

        def fake(manifest: Manifest, options: RunOptions, **_: Any) -> None:
            seen.append(options)

        self.monkeypatch.setattr(target, fake)
        return seen

    def package(self, argv: list[str], env: dict[str, str]) -> RunOptions:
        seen = self._capture("openapi2mcp.serving.package.serve")
        run(MODULE, argv, environ=env)
        assert len(seen) == 1
        return seen[0]

    def serve(self, argv: list[str], env: dict[str, str]) -> RunOptions:
        seen = self._capture("openapi2mcp.serving.serve")
        reload = "--reload" in argv or env.get("OPENAPI2MCP_RELOAD")  # serve --reload compiles a spec (test_reload.py)
        source = example_args("notes") if reload else ["--manifest", str(self.manifest)]
        result = CliRunner().invoke(cli_module.app, ["serve", *source, *argv], env=env)
        assert result.exit_code == 0, result.output
        assert len(seen) == 1
        return seen[0]

    def errors(self, argv: list[str], env: dict[str, str], capsys: pytest.CaptureFixture[str]) -> tuple[str, str]:
        """(the package's message, serve's message), each without its program name; both must exit 2."""
        with pytest.raises(SystemExit) as exited:
            run(MODULE, argv, environ=env)
        assert exited.value.code == 2
        package = capsys.readouterr().err.strip()
        result = CliRunner().invoke(cli_module.app, ["serve", "--manifest", str(self.manifest), *argv], env=env)
        assert result.exit_code == 2, result.output
        served = result.stderr.strip()
        for text in (package, served):
            assert len(text.splitlines()) == 1 and "Traceback" not in text, text
        assert package.startswith("notes-options-mcp: error: ") and served.startswith("openapi2mcp: error: ")
        return package.split(": ", 1)[1], served.split(": ", 1)[1]


def flag_argv(option: Option, value: str) -> list[str]:
    return [option.flag] if option.kind == "switch" else [option.flag, value]


def ids(options: tuple[Option, ...]) -> list[str]:
    return [o.flag for o in options]


def set_by(options: RunOptions, option: Option) -> Any:
    limits = options.http_limits
    return getattr(limits, option.dest) if hasattr(limits, option.dest) else getattr(options, option.dest)


# ============================================================================ the table


@pytest.mark.parametrize("option", OPTIONS, ids=ids(OPTIONS))
def test_flag_and_variable_give_the_same_options_in_both_commands(option: Option, commands: Commands) -> None:
    by_flag = commands.package(flag_argv(option, option.example), {})
    assert set_by(by_flag, option) != set_by(RunOptions(), option), "the example must differ from the default"
    assert commands.package([], {option.env: option.example}) == by_flag
    assert commands.serve(flag_argv(option, option.example), {}) == by_flag
    assert commands.serve([], {option.env: option.example}) == by_flag


@pytest.mark.parametrize("option", OPTIONS, ids=ids(OPTIONS))
def test_the_flag_wins_over_its_variable(option: Option, commands: Commands) -> None:
    """Given the flag, the variable is not even read: a value it could not take is ignored."""
    wrong = {option.env: BAD.get(option.kind, "ignored")}
    expected = commands.package(flag_argv(option, option.example), {})
    assert commands.package(flag_argv(option, option.example), wrong) == expected
    assert commands.serve(flag_argv(option, option.example), wrong) == expected


def test_defaults_are_the_table_and_run_options_defaults(commands: Commands) -> None:
    assert commands.package([], {}) == commands.serve([], {}) == RunOptions()
    for option in OPTIONS:
        if option.default is not None:
            assert set_by(RunOptions(), option) == option.default, option.flag


@pytest.mark.parametrize("option", [o for o in OPTIONS if o.kind in BAD], ids=ids(tuple(o for o in OPTIONS
                                                                                       if o.kind in BAD)))
def test_a_bad_value_is_the_same_one_line_error_in_both(
    option: Option, commands: Commands, capsys: pytest.CaptureFixture[str]
) -> None:
    by_env = commands.errors([], {option.env: BAD[option.kind]}, capsys)
    assert by_env[0] == by_env[1] and option.env in by_env[0], by_env
    if option.kind != "switch":  # a switch's flag takes no value
        by_flag = commands.errors([option.flag, BAD[option.kind]], {}, capsys)
        assert by_flag[0] == by_flag[1] and option.flag in by_flag[0], by_flag


@pytest.mark.parametrize(("argv", "env", "expected"), [
    (["--port", "70000"], {}, "--port: 70000 is out of range (0 to 65535)"),
    ([], {"OPENAPI2MCP_BODY_TIMEOUT": "0"}, "--body-timeout / OPENAPI2MCP_BODY_TIMEOUT: 0.0 is not a timeout"),
    ([], {"OPENAPI2MCP_TRANSPORT": "http", "OPENAPI2MCP_HOST": "0.0.0.0"},
     "serving on 0.0.0.0 (not loopback) needs the Host names clients use: set OPENAPI2MCP_ALLOWED_HOSTS"),
    (["-t", "http", "--host", "10.0.0.1"], {"OPENAPI2MCP_ALLOWED_HOSTS": " , "}, "needs the Host names clients use"),
])
def test_combinations_are_checked_alike(
    argv: list[str], env: dict[str, str], expected: str, commands: Commands, capsys: pytest.CaptureFixture[str]
) -> None:
    package, served = commands.errors(argv, env, capsys)
    assert package == served and expected in package, package


def test_empty_variables_are_unset_but_empty_scopes_are_no_scope(commands: Commands) -> None:
    empty = {o.env: "" for o in OPTIONS}
    options = commands.package([], empty)
    assert options == commands.serve([], empty) == RunOptions(scopes="")
    assert commands.package(["--allowed-host", "a", "--allowed-host", "b"], {}).allowed_hosts == ["a", "b"]
    assert commands.serve([], {"OPENAPI2MCP_ALLOWED_HOSTS": "a, b c"}).allowed_hosts == ["a", "b", "c"]


def test_help_shows_the_same_options_in_both(commands: Commands, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "300")  # argparse wraps at hyphens too
    package = parser("notes-options-mcp", "test").format_help()
    served = CliRunner().invoke(cli_module.app, ["serve", "--help"], env={"COLUMNS": "200"}).output

    def squeeze(text: str) -> str:  # both wrap (click also at hyphens): compare without whitespace
        return "".join(text.split())

    for option in (*OPTIONS, CHECK):
        for text in (package, served):
            assert option.flag in text
            assert option.short is None or re.search(rf"(?<![\w-]){option.short}\b", text), option.short
            assert squeeze(option.describe()) in squeeze(text), (option.flag, text)
    flags = set(re.findall(r"(?<![\w-])--[a-z][a-z-]+", package)) - {"--help", "--version", "--info"}
    assert flags == {o.flag for o in (*OPTIONS, CHECK)}  # nothing the table does not define


def test_every_setting_has_its_variable_and_one_definition() -> None:
    from openapi2mcp.runtime.auth import AUTH_TOKENS_VAR
    from openapi2mcp.runtime.signing import SIGNING_KEY_VAR

    for option in OPTIONS:
        assert option.env.startswith("OPENAPI2MCP_") and option.env in option.describe(), option.flag
    assert CHECK.env == ""  # an action, not a setting
    for column in ("dest", "flag", "env"):
        values = [getattr(o, column) for o in OPTIONS]
        assert len(values) == len(set(values)), column
    assert {name for name, _ in ENV_ONLY} >= {AUTH_TOKENS_VAR, SIGNING_KEY_VAR}
    fields = set(RunOptions.__dataclass_fields__) - {"http_limits"}
    limits = set(RunOptions().http_limits.__dataclass_fields__)
    assert {o.dest for o in OPTIONS} == fields | limits


def test_docs_list_the_options_from_the_table() -> None:
    text = (ROOT / "docs" / "build.md").read_text(encoding="utf-8")
    block = re.search(r"<!-- serve-options -->\n(.*?)<!-- /serve-options -->", text, re.S)
    assert block, "docs/build.md lost its <!-- serve-options --> block"
    assert block.group(1) == options_markdown(), (
        "docs/build.md's option table is stale: paste the output of "
        "`python -c 'from openapi2mcp.serving import options_markdown; print(options_markdown(), end=\"\")'`")
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "docs/build.md#run-options" in readme and "OPENAPI2MCP_MAX_CONNECTIONS" not in readme


# ============================================================================ end to end


@pytest.mark.parametrize("command", ["openapi2mcp serve", "package"])
@pytest.mark.anyio
async def test_both_commands_are_configured_by_the_environment_alone(
    command: str, package_root: Path, tmp_path: Path
) -> None:
    """OPENAPI2MCP_TRANSPORT/HOST/PORT/ALLOWED_HOSTS and the auth tokens, no flags; no server header."""
    port = free_port()
    host = "127.0.0.2"  # loopback to the kernel, not to openapi2mcp: it needs allowed hosts and auth
    base = f"http://{host}:{port}"
    argv = ([sys.executable, "-m", "openapi2mcp.serving", MODULE] if command == "package"
            else cli("serve", "--manifest", str(package_root / MODULE / "manifest.json")))
    with Upstream.start("notes") as up:
        env = child_env({"OPENAPI2MCP_TRANSPORT": "http", "OPENAPI2MCP_HOST": host, "OPENAPI2MCP_PORT": str(port),
                         "OPENAPI2MCP_ALLOWED_HOSTS": host, "OPENAPI2MCP_AUTH_TOKENS": TOKEN,
                         "NOTES_API_URL": up.base_url})
        env["PYTHONPATH"] = f"{package_root}:{env['PYTHONPATH']}"
        with running(argv, env, tmp_path / "server.log", base):
            health = httpx2.get(base + "/healthz", trust_env=False)
            assert "server" not in health.headers, health.headers
            assert httpx2.post(base + "/mcp", json={}, trust_env=False).status_code == 401
            foreign = httpx2.post(base + "/mcp", json={}, trust_env=False,
                                  headers={"Host": "evil.example", "Authorization": f"Bearer {TOKEN}"})
            assert foreign.status_code in (400, 421) and "server" not in foreign.headers  # the Host check is on
            async with (
                httpx2.AsyncClient(headers={"Authorization": f"Bearer {TOKEN}"}, timeout=30, trust_env=False) as http,
                Client(streamable_http_client(base + "/mcp", http_client=http)) as client,
            ):
                found = await client.call_tool("notes_search", {"keyword": "mcp"})
                assert not found.is_error, found
        log = (tmp_path / "server.log").read_text()
        assert f"serving 4 tool(s) at {base}/mcp (auth: 1 static token)" in log, log
        up.assert_no_violations()
