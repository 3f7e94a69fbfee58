"""Configuring the upstream as a new user meets it: the base URL and credentials from the environment.

One meaning for the base URL: `--base-url`, $OPENAPI2MCP_BASE_URL and `upstream.base_url` are all
"the URL requests are sent to", whether the spec came from a file or a URL and whether its server
is relative (issue 10, part 6). A real upstream on 127.0.0.1 serves its API under /api and a spec
whose server is the relative "/api" (as FastAPI apps behind a prefix do); openapi2mcp serves it
over stdio to the SDK client.

Raw mode against a spec that declares no security scheme (Swagger 2.0's `securityDefinitions: {}`)
still takes credentials from the environment, and a 401 without one says what to set (part 7).
"""

from __future__ import annotations

import base64
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from openapi2mcp.manifest import UpstreamSpec
from openapi2mcp.result import error_of
from openapi2mcp.runtime import Runtime, RuntimeOptions
from openapi2mcp.upstream import ConfigError, relative_server_notice
from openapi2mcp.upstream.settings import base_url, resolve_settings
from tests.e2e_support import McpSession, no_traceback, ok, portal, run_cli
from tests.helpers import compile_text
from tests.local import serve_in_thread

SPEC = {
    "openapi": "3.1.0",
    "info": {"title": "Prefixed", "version": "1"},
    "servers": [{"url": "/api"}],
    "paths": {
        "/items": {
            "get": {
                "operationId": "listItems",
                "responses": {"200": {"description": "ok", "content": {"application/json": {"schema": {
                    "type": "object", "properties": {"items": {"type": "array", "items": {"type": "string"}},
                                                     "path": {"type": "string"}}}}}}},
            }
        }
    },
}


async def _items(request: Request) -> JSONResponse:
    return JSONResponse({"items": ["a", "b"], "path": request.url.path})


async def _spec(request: Request) -> JSONResponse:
    return JSONResponse(SPEC)


USER, PASSWORD, TOKEN = "svc", "s3cret-pw", "tok-0123456789"


async def _private(request: Request) -> JSONResponse:
    """Basic or bearer, as a real server behind a spec that declares neither."""
    given = request.headers.get("authorization", "")
    basic = "Basic " + base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
    if given not in (basic, f"Bearer {TOKEN}"):
        return JSONResponse({"detail": "Please authenticate yourself."}, status_code=401,
                            headers={"WWW-Authenticate": "Basic realm=x"})
    return JSONResponse({"items": [given.split()[0]], "path": request.url.path})


@pytest.fixture(scope="module")
def upstream() -> Iterator[str]:
    app = Starlette(routes=[Route("/api/items", _items), Route("/api/openapi.json", _spec),
                            Route("/private/items", _private)])
    with serve_in_thread(app) as url:
        yield url


@pytest.fixture(scope="module")
def spec_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("base-url") / "openapi.yaml"
    path.write_text(yaml.safe_dump(SPEC))
    return path


def _list_items(args: list[str], log_dir: Path, env: dict[str, str] | None = None) -> tuple[dict, str]:
    with portal() as p:
        session = McpSession.stdio(p, args, mode="legacy", label="base-url", log_dir=log_dir, env=env)
        try:
            [tool] = session.list_tools()
            got = ok(session.call(tool.name, {}))
        finally:
            session.close()
        assert session.errlog is not None
        return got, session.errlog.read_text()


@pytest.mark.parametrize("how", ["flag", "env"])
def test_flag_and_variable_are_the_url_requests_go_to(upstream: str, spec_file: Path, tmp_path: Path,
                                                      how: str) -> None:
    """The same value means the same thing either way: nothing is joined to it (once `/api` was joined
    to the variable's value but not to the flag's)."""
    args = [str(spec_file), "--all-operations", "--strict"]  # --strict: a relative server is a valid spec
    if how == "flag":
        got, stderr = _list_items([*args, "--base-url", upstream + "/api"], tmp_path)
    else:
        got, stderr = _list_items(args, tmp_path, env={"OPENAPI2MCP_BASE_URL": upstream + "/api"})
    assert got == {"items": ["a", "b"], "path": "/api/items"}
    assert "note:" not in stderr


def test_the_flag_wins_over_the_variable(upstream: str, spec_file: Path, tmp_path: Path) -> None:
    got, _ = _list_items([str(spec_file), "--all-operations", "--base-url", upstream + "/api"], tmp_path,
                         env={"OPENAPI2MCP_BASE_URL": "http://127.0.0.1:9/nowhere"})
    assert got["path"] == "/api/items"


def test_a_spec_fetched_by_url_resolves_its_relative_server(upstream: str, tmp_path: Path) -> None:
    got, _ = _list_items([upstream + "/api/openapi.json", "--all-operations"], tmp_path)
    assert got["path"] == "/api/items"


def test_a_base_url_without_the_relative_server_path_gets_a_hint(upstream: str, spec_file: Path,
                                                                 tmp_path: Path) -> None:
    """`--base-url http://host:port` for a spec whose server is "/api": requests go to /items, as asked,
    and start-up says how to send them under /api."""
    with portal() as p:
        session = McpSession.stdio(p, [str(spec_file), "--all-operations", "--base-url", upstream], mode="legacy",
                                   label="hint", log_dir=tmp_path)
        try:
            [tool] = session.list_tools()
            result = session.call(tool.name, {})
        finally:
            session.close()
    assert result.is_error  # 404 from the upstream: /items is not served
    assert session.errlog is not None
    stderr = session.errlog.read_text()
    assert "note: the spec's server is '/api' (relative)" in stderr
    assert f"--base-url {upstream}/api" in stderr


def test_no_base_url_for_a_relative_server_names_the_fix(spec_file: Path) -> None:
    done = run_cli("serve", str(spec_file), "--all-operations", timeout=60)
    no_traceback(done.stderr)
    assert done.returncode == 2, done.stderr
    assert "the upstream API's URL is not known: the spec's server URL is relative ('/api')" in done.stderr
    assert "--base-url URL or set OPENAPI2MCP_BASE_URL" in done.stderr
    assert "http://127.0.0.1:8000/api" in done.stderr


def test_inspect_says_where_the_base_url_comes_from(spec_file: Path) -> None:
    done = run_cli("inspect", str(spec_file), "--all-operations", "--strict", timeout=60)
    assert done.returncode == 0, done.stderr
    assert "the spec's server is relative, '/api'" in done.stdout
    assert "warning" not in (done.stdout + done.stderr).lower()


def test_precedence_variable_then_overlay_then_spec() -> None:
    spec = UpstreamSpec(base_url="${API_URL:-https://api.example.com/v1}")
    assert base_url(spec, {}) == ("https://api.example.com/v1", spec.base_url)
    assert base_url(spec, {"API_URL": "http://a"})[0] == "http://a"
    assert base_url(spec, {"API_URL": "http://a", "OPENAPI2MCP_BASE_URL": "http://b"})[0] == "http://b"
    assert base_url(spec, {"OPENAPI2MCP_BASE_URL": "  "})[0] == "https://api.example.com/v1"  # empty = unset
    old = UpstreamSpec(base_url="${OPENAPI2MCP_BASE_URL:-https://old.example.com}")  # Manifests of earlier versions
    assert base_url(old, {})[0] == "https://old.example.com"
    assert base_url(old, {"OPENAPI2MCP_BASE_URL": "http://c"})[0] == "http://c"
    with pytest.raises(ConfigError, match="the spec names no server"):
        resolve_settings(UpstreamSpec(base_url="${OPENAPI2MCP_BASE_URL}"), {})


def test_the_hint_only_when_the_path_is_left_out() -> None:
    spec = UpstreamSpec(base_url="${OPENAPI2MCP_BASE_URL}", spec_server="/api/v2/")
    settings = resolve_settings(spec, {"OPENAPI2MCP_BASE_URL": "https://h.example/prefix/api/v2"})
    assert relative_server_notice(spec, settings.base_url) is None
    settings = resolve_settings(spec, {"OPENAPI2MCP_BASE_URL": "https://h.example"})
    assert "use --base-url https://h.example/api/v2" in (relative_server_notice(spec, settings.base_url) or "")
    assert relative_server_notice(UpstreamSpec(base_url="${OPENAPI2MCP_BASE_URL}", spec_server="/"),
                                  settings.base_url) is None


# ============================================================================ credentials from the environment


def _swagger(url: str, security: dict[str, Any]) -> dict[str, Any]:
    return {
        "swagger": "2.0", "info": {"title": "Private", "version": "1"}, "host": url.split("//")[1],
        "schemes": ["http"], "basePath": "/private", "securityDefinitions": security,
        **({"security": [{k: []} for k in security]} if security else {}),
        "paths": {"/items": {"get": {"operationId": "listItems", "produces": ["application/json"],
                                     "responses": {"200": {"description": "ok"}}}}},
    }


@pytest.mark.anyio
@pytest.mark.parametrize(("env", "scheme"), [
    ({"OPENAPI2MCP_USERNAME": USER, "OPENAPI2MCP_PASSWORD": PASSWORD}, "Basic"),
    ({"OPENAPI2MCP_TOKEN": TOKEN}, "Bearer"),
])
async def test_raw_mode_without_a_declared_scheme_takes_credentials_from_the_environment(
    upstream: str, tmp_path: Path, env: dict[str, str], scheme: str
) -> None:
    m = compile_text(tmp_path, _swagger(upstream, {}), all_operations=True).manifest
    runtime = Runtime(m, RuntimeOptions(environ=env))
    result = await runtime.call("listItems", {})
    await runtime.aclose()
    assert not result.is_error, result
    assert result.structured_content == {"items": [scheme], "path": "/private/items"}


@pytest.mark.anyio
async def test_a_401_without_a_credential_says_what_to_set(upstream: str, tmp_path: Path) -> None:
    m = compile_text(tmp_path, _swagger(upstream, {}), all_operations=True).manifest
    runtime = Runtime(m, RuntimeOptions(environ={}))
    body = error_of(await runtime.call("listItems", {}))
    assert body is not None and body["code"] == "UNAUTHORIZED"
    assert "the spec declares no security scheme; set OPENAPI2MCP_TOKEN" in body["message"]
    assert "Please authenticate yourself" in body["message"]  # the upstream's own words are kept
    with pytest.raises(ConfigError, match="both OPENAPI2MCP_TOKEN and OPENAPI2MCP_USERNAME"):
        Runtime(m, RuntimeOptions(environ={"OPENAPI2MCP_TOKEN": TOKEN, "OPENAPI2MCP_USERNAME": USER}))
    # a declared scheme whose optional variable is not set: the variable is named
    declared = _swagger(upstream, {"basic": {"type": "basic"}})
    m = compile_text(tmp_path, declared, all_operations=True).manifest
    runtime = Runtime(m, RuntimeOptions(environ={}))
    body = error_of(await runtime.call("listItems", {}))
    assert body is not None and body["code"] == "UNAUTHORIZED"
    assert "No credential was sent: OPENAPI2MCP_USERNAME and OPENAPI2MCP_PASSWORD are not set." in body["message"]
    # with credentials, a 401 is about them, as before
    env = {"OPENAPI2MCP_USERNAME": USER, "OPENAPI2MCP_PASSWORD": "wrong-password"}
    runtime = Runtime(m, RuntimeOptions(environ=env))
    body = error_of(await runtime.call("listItems", {}))
    await runtime.aclose()
    assert body is not None and "refused the server's credentials" in body["message"]
