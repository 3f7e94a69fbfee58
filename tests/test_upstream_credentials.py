"""Upstream credentials obtained while serving, against a real authorization server (issue 13, 1-2).

The authorization server is oidc-provider (npm, installed by .ci/oauth-server.sh), run by
tests/oauth_server.mjs on 127.0.0.1: it authenticates clients, issues JWT access tokens for
resources (RFC 8707) with short lives, answers RFC 8693 token exchange, and reports at
/test/stats every request its token endpoint got. The REST API (tests/bearer_upstream.py, a
subprocess) verifies every bearer JWT against the server's JWKS, refuses expired or revoked ones
with 401, and keeps data per token subject. Both start once for the module.

* oauth2_client_credentials: 1,000 calls at concurrency across expiries (0 failures, one token
  request per expiry, none early); client_secret_post; a wrong secret; the token endpoint down; a
  revoked token renewed once and the read retried (a POST is not); tokens echoed back redacted.
* forward and token_exchange over `openapi2mcp serve -t http --jwks-url ...`: two callers see their
  own data only; exchanged tokens cached per caller; refused without JWT auth, located overlay errors.
"""

from __future__ import annotations

import base64
import contextlib
import itertools
import json
import os
import shutil
import subprocess
import sys
import textwrap
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from openapi2mcp.errors import InputError, ToolFailure
from openapi2mcp.testing import connect
from openapi2mcp.upstream.credentials import CALLER_TOKEN, MIN_MARGIN, CallerToken, Forward, OAuthSettings, _lifetime
from openapi2mcp.upstream.secrets import Redactor
from tests.e2e_support import HttpServer, child_env, no_traceback, run_cli, running
from tests.helpers import compile_text, write_spec
from tests.local import ROOT, free_port

IN_CI = bool(os.environ.get("CI"))
API = "http://api.test"  # the upstream's audience: tokens of 2 s
API_X = "http://api-x.test"  # the audience of exchanged tokens: 300 s (the cache is observable)
MCP_AUD = "http://mcp.test"  # the MCP server's audience: the callers' tokens
SVC_SECRET = "svc-Secret-3f9a1c7e55d2b8"
POST_SECRET = "svcpost-Secret-77aa01bc3e"
EXCH_SECRET = "exch-Secret-c1d2e3f4a5b6"
CALLERS = {"alice": "alice-Secret-0a1b2c3d4e", "bob": "bob-Secret-9f8e7d6c5b4a"}
TTL = 2
TOKEN_EXCHANGE = "urn:ietf:params:oauth:grant-type:token-exchange"


def _client(client_id: str, secret: str, grant: str, scope: str, method: str = "client_secret_basic") -> dict[str, Any]:
    return {"client_id": client_id, "client_secret": secret, "token_endpoint_auth_method": method,
            "scope": scope, "grant_types": [grant]}


AS_CONFIG: dict[str, Any] = {
    "default_resource": API,
    "resources": {API: {"scope": "read write", "ttl": TTL}, API_X: {"scope": "read write", "ttl": 300},
                  MCP_AUD: {"scope": "notes:read read write", "ttl": 300}},
    "clients": [
        _client("svc", SVC_SECRET, "client_credentials", "read write"),
        _client("svcpost", POST_SECRET, "client_credentials", "read write", "client_secret_post"),
        _client("exch", EXCH_SECRET, TOKEN_EXCHANGE, "read write"),
        *[_client(name, secret, "client_credentials", "notes:read read write") for name, secret in CALLERS.items()],
    ],
}


# ============================================================================ the servers


def _oauth_install() -> tuple[str, Path]:
    """(node, the folder holding oidc-provider's node_modules), from .ci/oauth-server.sh."""
    done = subprocess.run([str(ROOT / ".ci" / "oauth-server.sh")], capture_output=True, text=True, timeout=600,
                          check=False)
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or len(lines) < 2 or not Path(lines[-2]).is_file():
        message = f".ci/oauth-server.sh could not install oidc-provider: {done.stderr[-800:]}"
        if IN_CI:
            raise RuntimeError(message)
        pytest.skip(message)
    return lines[-2], Path(lines[-1]).parent


class AuthServer:
    def __init__(self, url: str) -> None:
        self.url = url
        self.token_url = url + "/token"

    def requests(self, client_id: str | None = None) -> list[dict[str, Any]]:
        seen = httpx2.get(self.url + "/test/stats", timeout=5, trust_env=False).json()["requests"]
        return [r for r in seen if client_id is None or r.get("client_id") == client_id]


@pytest.fixture(scope="module")
def auth_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AuthServer]:
    node, folder = _oauth_install()
    # beside node_modules: ESM resolves packages from the script's folder (a copy per run: runs may overlap)
    script = folder / f"oauth_server-{os.getpid()}.mjs"
    shutil.copyfile(ROOT / "tests" / "oauth_server.mjs", script)
    work = tmp_path_factory.mktemp("oauth")
    port = free_port()
    config = work / "config.json"
    config.write_text(json.dumps({**AS_CONFIG, "port": port}))
    url = f"http://127.0.0.1:{port}"
    try:
        with running([node, str(script), str(config)], child_env(), work / "oauth.log", url):
            yield AuthServer(url)
    finally:
        script.unlink(missing_ok=True)


class Api:
    def __init__(self, url: str) -> None:
        self.url = url

    def stats(self) -> dict[str, Any]:
        data: dict[str, Any] = httpx2.get(self.url + "/test/stats", timeout=5, trust_env=False).json()
        return data

    def revoke(self, jti: str) -> None:
        httpx2.post(self.url + "/test/revoke", json={"jti": jti}, timeout=5, trust_env=False).raise_for_status()


@pytest.fixture(scope="module")
def api(auth_server: AuthServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Api]:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    command = [sys.executable, "-m", "tests.bearer_upstream", str(port), auth_server.url, auth_server.url + "/jwks",
               ",".join([API, API_X, MCP_AUD])]
    with running(command, child_env(), tmp_path_factory.mktemp("api") / "api.log", url):
        yield Api(url)


def spec(api: Api, auth_server: AuthServer, *, flow: bool = True) -> dict[str, Any]:
    """The ledger API; its oauth2 clientCredentials flow gives token_url and scopes their defaults."""
    ok = {"200": {"description": "ok", "content": {"application/json": {"schema": {"type": "object"}}}}}
    body = {"required": True, "content": {"application/json": {"schema": {
        "type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}}}}
    document: dict[str, Any] = {
        "openapi": "3.0.3", "info": {"title": "Ledger", "version": "1"}, "servers": [{"url": api.url}],
        "paths": {
            "/items": {"get": {"operationId": "listItems", "responses": ok},
                       "post": {"operationId": "addItem", "requestBody": body, "responses": ok}},
            "/items/{id}": {"put": {"operationId": "putItem", "requestBody": body, "responses": ok, "parameters": [
                {"name": "id", "in": "path", "required": True, "schema": {"type": "string"}}]}},
            "/whoami": {"get": {"operationId": "whoami", "responses": ok}},
        },
    }
    if flow:
        document["components"] = {"securitySchemes": {"cc": {"type": "oauth2", "flows": {"clientCredentials": {
            "tokenUrl": auth_server.token_url, "scopes": {"read": "read items", "write": "change items"}}}}}}
        document["security"] = [{"cc": ["read"]}]
    return document


def overlay(auth: str) -> str:
    return f"""
        openapi2mcp: 1
        upstream:
          auth: {auth}
        tools:
          - {{name: list_items, operation: listItems, description: The caller's items.}}
          - {{name: add_item, operation: addItem, description: Add an item., risk: low}}
          - {{name: put_item, operation: putItem, description: Put an item., risk: low}}
          - {{name: whoami, operation: whoami, description: Who the upstream thinks is calling.}}
        """


CC_AUTH = "{type: oauth2_client_credentials, client_id: svc, client_secret: '${LEDGER_SECRET}', resource: " + API + "}"


def result_json(result: Any) -> dict[str, Any]:
    text = result.content[0].text if result.content else "{}"
    data: dict[str, Any] = result.structured_content if result.structured_content is not None else json.loads(text)
    return data


def secret_forms(secret: str) -> list[str]:
    """A secret and the encodings it could leak in (Basic auth pairs included)."""
    pairs = [f"svc:{secret}", f"svcpost:{secret}", f"exch:{secret}"]
    return [secret, *(base64.b64encode(p.encode()).decode() for p in pairs),
            base64.b64encode(secret.encode()).decode().rstrip("=")]


def assert_no_secret(text: str, *secrets: str) -> None:
    for secret in secrets:
        for form in secret_forms(secret):
            assert form not in text, f"a secret ({secret[:4]}…) leaked"


# ============================================================================ client credentials


def test_spec_flow_gives_token_url_and_scopes_and_the_manifest_holds_no_secret(
    tmp_path: Path, api: Api, auth_server: AuthServer
) -> None:
    compiled = compile_text(tmp_path, spec(api, auth_server), overlay(CC_AUTH))
    auth = compiled.manifest.upstream.auth
    assert (auth.type, auth.token_url, auth.scopes, auth.client_secret) == (
        "oauth2_client_credentials", auth_server.token_url, ["read", "write"], "${LEDGER_SECRET}")
    explicit = compile_text(tmp_path, spec(api, auth_server), overlay(
        "{type: oauth2_client_credentials, client_id: svc, client_secret: '${S}', token_url: 'https://idp.example/t',"
        " scopes: read}"))
    assert (explicit.manifest.upstream.auth.token_url, explicit.manifest.upstream.auth.scopes) == (
        "https://idp.example/t", ["read"])


def test_thousand_calls_across_expiries_one_token_request_per_expiry(
    tmp_path: Path, api: Api, auth_server: AuthServer
) -> None:
    manifest = compile_text(tmp_path, spec(api, auth_server), overlay(CC_AUTH)).manifest
    before = len(auth_server.requests("svc"))
    refused_before = len(api.stats()["refused"])
    failures: list[str] = []
    owners: set[str] = set()

    async def main() -> float:
        async with connect(manifest, environ={"LEDGER_SECRET": SVC_SECRET}) as client:
            started = time.monotonic()
            calls = iter(range(1000))

            async def worker() -> None:
                for _ in calls:
                    result = await client.call_tool("list_items", {})
                    if result.is_error:
                        failures.append(result.content[0].text)
                    else:
                        owners.add(result_json(result)["owner"])

            # 20 at a time, and the run spans several token lives: 1,000 calls within 3.5 lifetimes
            async with anyio.create_task_group() as tg:
                for _ in range(20):
                    tg.start_soon(worker)
            while time.monotonic() - started < 3.5 * TTL:  # a fast machine: more calls until 3 expiries passed
                result = await client.call_tool("list_items", {})
                if result.is_error:
                    failures.append(result.content[0].text)
                await anyio.sleep(0.05)
            return time.monotonic() - started

    took = anyio.run(main)
    issued = [r for r in auth_server.requests("svc")[before:] if r["grant_type"] == "client_credentials"]
    used = {jti for jti, info in api.stats()["tokens"].items() if info["sub"] == "svc"}
    refused = api.stats()["refused"][refused_before:]
    ahead = sorted(p["exp"] * 1000 - c["at_ms"] for p, c in itertools.pairwise(issued))
    print(f"\n1000+ calls in {took:.1f} s: {len(failures)} failures, {len(refused)} expired in flight (renewed, "
          f"sent again), {len(issued)} token requests "
          f"over {took / TTL:.1f} token lifetimes of {TTL} s (whole-second exp: each lives 1-2 s); "
          f"renewed {ahead[0]:.0f}-{ahead[-1]:.0f} ms before the previous token's exp" if ahead else "")
    assert failures == [] and owners == {"svc"}
    # The API has no leeway: on a machine too busy to send a request within the renewal margin, the
    # token expires on the way; the 401 renews it once and the read goes again (never a failure).
    # Nothing else is ever refused, and only a few times.
    assert all(r.startswith("ExpiredSignatureError") for r in refused) and len(refused) <= 10, refused
    assert all(r["status"] == 200 for r in issued)
    assert {r["jti"] for r in issued} <= used  # every token requested was used
    assert len(issued) >= 3
    # one request per expiry, none early: each token was asked for only once the previous one was
    # within its renewal margin (credentials.MIN_MARGIN for a life this short) of expiring
    for previous, current in itertools.pairwise(issued):
        assert current["at_ms"] >= previous["exp"] * 1000 - 1000 * MIN_MARGIN - 150, (previous, current)


def test_client_secret_post_and_an_echoed_token_is_redacted(tmp_path: Path, api: Api, auth_server: AuthServer) -> None:
    auth = "{type: oauth2_client_credentials, client_id: svcpost, client_secret: '${LEDGER_SECRET}', " \
           "auth_method: client_secret_post}"
    manifest = compile_text(tmp_path, spec(api, auth_server), overlay(auth)).manifest

    async def main() -> Any:
        async with connect(manifest, environ={"LEDGER_SECRET": POST_SECRET}) as client:
            return await client.call_tool("whoami", {})

    result = anyio.run(main)
    assert not result.is_error, result.content
    echoed = result_json(result)
    assert echoed["sub"] == "svcpost"  # the default resource: the spec's scopes, the server's default audience
    assert echoed["authorization"] == "Bearer ***"  # the access token is a secret like any other
    assert_no_secret(json.dumps(echoed), POST_SECRET)


def test_wrong_client_secret_is_unauthorized_with_the_servers_words_and_no_secret(
    tmp_path: Path, api: Api, auth_server: AuthServer, caplog: pytest.LogCaptureFixture
) -> None:
    manifest = compile_text(tmp_path, spec(api, auth_server), overlay(CC_AUTH)).manifest
    wrong = "not-the-Secret-5e6f7a8b9c"

    async def main() -> Any:
        async with connect(manifest, environ={"LEDGER_SECRET": wrong}) as client:
            return await client.call_tool("list_items", {})

    result = anyio.run(main)
    error = result_json(result)["error"] if "error" in result_json(result) else result_json(result)
    assert result.is_error and error["code"] == "UNAUTHORIZED", error
    assert "invalid_client" in error["message"] and "client authentication failed" in error["message"]
    assert "token endpoint" in error["message"] and error.get("retryable") is not True
    assert_no_secret(json.dumps(error) + caplog.text, wrong)


def test_token_endpoint_down_is_upstream_unavailable_and_retryable(tmp_path: Path, api: Api,
                                                                   auth_server: AuthServer) -> None:
    down = f"http://127.0.0.1:{free_port()}/token"  # nothing listens there
    auth = f"{{type: oauth2_client_credentials, client_id: svc, client_secret: '${{S}}', token_url: {down}}}"
    manifest = compile_text(tmp_path, spec(api, auth_server), overlay(auth)).manifest

    async def main() -> Any:
        async with connect(manifest, environ={"S": SVC_SECRET}) as client:
            return await client.call_tool("list_items", {})

    result = anyio.run(main)
    error = _error(result)
    assert error["code"] == "UPSTREAM_UNAVAILABLE" and error["retryable"] is True, error
    assert "token endpoint" in error["message"] and "could not be reached" in error["message"]
    assert_no_secret(json.dumps(error), SVC_SECRET)


def _error(result: Any) -> dict[str, Any]:
    assert result.is_error, result.content
    data = result_json(result)
    found: dict[str, Any] = data.get("error", data)
    return found


def test_a_revoked_token_is_renewed_once_and_a_read_retried_but_not_a_post(
    tmp_path: Path, api: Api, auth_server: AuthServer
) -> None:
    # tokens for API_X live 300 s: no renewal here is an expiry
    manifest = compile_text(tmp_path, spec(api, auth_server), overlay(CC_AUTH.replace(API, API_X))).manifest

    def last_token() -> str:
        tokens = api.stats()["tokens"]
        return [j for j, t in tokens.items() if t["sub"] == "svc" and t["aud"] == API_X][-1]  # the newest in use

    async def main() -> None:
        async with connect(manifest, environ={"LEDGER_SECRET": SVC_SECRET}) as client:
            assert not (await client.call_tool("list_items", {})).is_error
            # a read: the 401 drops the token, one new one is fetched, the read is sent again
            api.revoke(await anyio.to_thread.run_sync(last_token))
            asked, refused = len(auth_server.requests("svc")), len(api.stats()["refused"])
            read = await client.call_tool("list_items", {})
            assert not read.is_error, read.content
            assert len(auth_server.requests("svc")) == asked + 1
            assert len(api.stats()["refused"]) == refused + 1
            # an idempotent PUT is sent again the same way
            api.revoke(last_token())
            put = await client.call_tool("put_item", {"id": "7", "name": "seven"})
            assert not put.is_error, put.content
            assert len(auth_server.requests("svc")) == asked + 2
            # a POST is not repeated: it may have taken effect; the error says the credential was refused
            api.revoke(last_token())
            post = await client.call_tool("add_item", {"name": "once"})
            answer = _error(post)
            assert answer["code"] == "UNAUTHORIZED" and "refused the server's OAuth token" in answer["message"]
            assert len(auth_server.requests("svc")) == asked + 2
            assert len(api.stats()["refused"]) == refused + 3

    anyio.run(main)


def test_overlay_errors_are_located_with_a_fix(tmp_path: Path, api: Api, auth_server: AuthServer) -> None:
    literal = "{type: oauth2_client_credentials, client_id: svc, client_secret: hunter2-literal}"
    with pytest.raises(InputError) as caught:
        compile_text(tmp_path, spec(api, auth_server), overlay(literal))
    text = str(caught.value) + json.dumps([p.model_dump() for p in caught.value.problems], default=str)
    assert "overlay.yaml" in text and "upstream.auth" in text and "${CLIENT_SECRET}" in text
    assert "hunter2-literal" not in str(caught.value)
    no_flow = "{type: oauth2_client_credentials, client_id: svc, client_secret: '${S}'}"
    with pytest.raises(InputError) as caught:
        compile_text(tmp_path, spec(api, auth_server, flow=False), overlay(no_flow))
    problem = caught.value.problems[0]
    assert "token_url" in problem.message and "clientCredentials" in problem.message and problem.hint
    assert problem.location and problem.location.line and problem.location.file == "overlay.yaml", problem
    with pytest.raises(InputError, match=r"forward.*needs audience"):
        compile_text(tmp_path, spec(api, auth_server), overlay("{type: forward}"))


def test_plain_http_token_url_off_loopback_is_refused(tmp_path: Path, api: Api, auth_server: AuthServer) -> None:
    auth = "{type: oauth2_client_credentials, client_id: svc, client_secret: '${S}', token_url: http://idp.example/t}"
    manifest = compile_text(tmp_path, spec(api, auth_server), overlay(auth)).manifest
    path = tmp_path / "manifest.json"
    path.write_text(manifest.model_dump_json())
    done = run_cli("serve", "--manifest", str(path), "--check", env={"S": SVC_SECRET})
    assert done.returncode != 0 and "token_url must be https" in done.stderr, done.stderr
    no_traceback(done.stderr)


# ============================================================================ per-user access


def caller_token(auth_server: AuthServer, name: str) -> str:
    answer = httpx2.post(auth_server.token_url, auth=(name, CALLERS[name]), trust_env=False, timeout=10,
                         data={"grant_type": "client_credentials", "resource": MCP_AUD, "scope": "notes:read"})
    answer.raise_for_status()
    token: str = answer.json()["access_token"]
    return token


@contextlib.asynccontextmanager
async def mcp_client(url: str, token: str) -> AsyncIterator[Client]:
    async with (
        httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=30, trust_env=False) as http,
        Client(streamable_http_client(url, http_client=http)) as c,
    ):
        yield c


def serve_args(tmp_path: Path, api: Api, auth_server: AuthServer, auth: str) -> list[str]:
    spec_file = write_spec(tmp_path, spec(api, auth_server))
    overlay_file = tmp_path / "overlay.yaml"
    overlay_file.write_text(textwrap.dedent(overlay(auth)))
    return [str(spec_file), "--overlay", str(overlay_file), "--jwks-url", auth_server.url + "/jwks",
            "--issuer", auth_server.url, "--audience", MCP_AUD]


def two_callers(url: str, auth_server: AuthServer, calls: int = 3) -> dict[str, list[dict[str, Any]]]:
    """alice adds an item, then each caller lists `calls` times at once: what each one saw."""
    tokens = {name: caller_token(auth_server, name) for name in CALLERS}

    async def main() -> dict[str, list[dict[str, Any]]]:
        seen: dict[str, list[dict[str, Any]]] = {}
        async with mcp_client(url, tokens["alice"]) as alice:
            added = await alice.call_tool("add_item", {"name": "alice-only"})
            assert not added.is_error, added.content
        for name, token in tokens.items():
            async with mcp_client(url, token) as client:

                async def list_once(client: Client = client, name: str = name) -> None:
                    listed = await client.call_tool("list_items", {})
                    assert not listed.is_error, listed.content
                    seen.setdefault(name, []).append(result_json(listed))

                async with anyio.create_task_group() as tg:  # at once: one exchange serves them all
                    for _ in range(calls):
                        tg.start_soon(list_once)
        return seen

    return anyio.run(main)


def test_token_exchange_each_caller_sees_only_its_own_data_and_tokens_are_cached(
    tmp_path: Path, api: Api, auth_server: AuthServer
) -> None:
    auth = "{type: token_exchange, token_url: " + auth_server.token_url + \
           ", client_id: exch, client_secret: '${EXCH_SECRET}', audience: " + API_X + ", scopes: read write}"
    before = len(auth_server.requests("exch"))
    with HttpServer.start(serve_args(tmp_path, api, auth_server, auth), log_dir=tmp_path,
                          env={"EXCH_SECRET": EXCH_SECRET}) as server:
        seen = two_callers(server.url, auth_server, calls=8)
        log = server.stderr()
    assert {s["owner"] for s in seen["alice"]} == {"alice"}
    assert {s["owner"] for s in seen["bob"]} == {"bob"}
    assert any(i["name"] == "alice-only" for i in seen["alice"][0]["items"])
    assert all(not any(i["name"] == "alice-only" for i in s["items"]) for s in seen["bob"])
    exchanges = auth_server.requests("exch")[before:]
    # alice: one exchange for the add and her eight lists at once (one token, cached); bob: one for his eight
    assert [(e["grant_type"], e["sub"], e["aud"]) for e in exchanges] == [
        (TOKEN_EXCHANGE, "alice", API_X), (TOKEN_EXCHANGE, "bob", API_X)]
    used = {t["sub"] for j, t in api.stats()["tokens"].items() if t["aud"] == API_X}
    assert used >= {"alice", "bob"}
    assert_no_secret(log, EXCH_SECRET)
    no_traceback(log)


def test_forward_sends_the_callers_own_token(tmp_path: Path, api: Api, auth_server: AuthServer) -> None:
    static = "static-caller-token-" + "k" * 16  # a static token next to the JWTs: never forwarded
    with HttpServer.start(serve_args(tmp_path, api, auth_server, "{type: forward, audience: " + MCP_AUD + "}"),
                          log_dir=tmp_path, env={"OPENAPI2MCP_AUTH_TOKENS": static}) as server:
        seen = two_callers(server.url, auth_server, calls=2)

        async def as_static() -> Any:
            async with mcp_client(server.url, static) as client:
                return await client.call_tool("list_items", {})

        refused = _error(anyio.run(as_static))
        log = server.stderr()
    assert refused["code"] == "UNAUTHORIZED" and "this call has none" in refused["message"], refused
    assert static not in json.dumps(api.stats())
    assert seen["alice"][0]["owner"] == "alice" and seen["bob"][0]["owner"] == "bob"
    assert not any(i["name"] == "alice-only" for i in seen["bob"][0]["items"])
    no_traceback(log)


def test_forward_refuses_without_a_caller_token_or_for_another_audience() -> None:
    forward = Forward(OAuthSettings(kind="forward", audience=API), Redactor(set()))

    async def main() -> None:
        async with httpx2.AsyncClient() as http:
            with pytest.raises(ToolFailure) as caught:
                await forward.token(http)
            assert caught.value.error.code == "UNAUTHORIZED" and "this call has none" in caught.value.error.message
            CALLER_TOKEN.set(CallerToken(token="caller-token-" + "x" * 20, subject="alice", audience=(MCP_AUD,)))
            with pytest.raises(ToolFailure) as caught:
                await forward.token(http)
            assert caught.value.error.code == "UNAUTHORIZED"
            assert f"does not include {API!r}" in caught.value.error.message
            assert "caller-token-" not in caught.value.error.message

    anyio.run(main)


@pytest.mark.parametrize("kind", ["forward", "token_exchange"])
def test_per_caller_auth_needs_jwt_callers_at_start_up(tmp_path: Path, api: Api, auth_server: AuthServer,
                                                       kind: str) -> None:
    auth = "{type: forward, audience: " + MCP_AUD + "}" if kind == "forward" else \
        "{type: token_exchange, token_url: " + auth_server.token_url + ", client_id: exch, client_secret: '${S}'}"
    args = serve_args(tmp_path, api, auth_server, auth)[:3]  # without --jwks-url ...
    done = run_cli("serve", *args, "--check", env={"S": EXCH_SECRET})
    assert done.returncode != 0, done.stderr
    assert f"upstream.auth is {kind}" in done.stderr and "--jwks-url" in done.stderr, done.stderr
    no_traceback(done.stderr)


def test_init_drafts_client_credentials_and_the_draft_serves(tmp_path: Path, api: Api,
                                                             auth_server: AuthServer) -> None:
    from openapi2mcp.loader import load_spec
    from openapi2mcp.overlay import read_overlay

    spec_file = write_spec(tmp_path, spec(api, auth_server))
    draft = tmp_path / "draft.yaml"
    done = run_cli("init", str(spec_file), "-o", str(draft))
    assert done.returncode == 0, done.stderr
    import yaml

    assert yaml.safe_load(draft.read_text())["upstream"]["auth"] == {
        "type": "oauth2_client_credentials", "client_id": "${LEDGER_CLIENT_ID}",
        "client_secret": "${LEDGER_CLIENT_SECRET}"}  # token_url and scopes: the flow's
    from openapi2mcp.compiler import compile_manifest

    manifest = compile_manifest(load_spec(str(spec_file)), [read_overlay(draft)]).manifest
    assert manifest.upstream.auth.token_url == auth_server.token_url  # the flow's, by default
    listed = next(t.name for t in manifest.tools if not t.input_schema.get("required"))  # the list of items

    async def main() -> Any:
        env = {"LEDGER_CLIENT_ID": "svc", "LEDGER_CLIENT_SECRET": SVC_SECRET, "OPENAPI2MCP_BASE_URL": api.url}
        async with connect(manifest, environ=env) as client:
            return await client.call_tool(listed, {})

    result = anyio.run(main)
    assert not result.is_error, result.content


def test_build_carries_the_oauth_config_as_templates_and_documents_its_variables(
    tmp_path: Path, api: Api, auth_server: AuthServer
) -> None:
    spec_file = write_spec(tmp_path, spec(api, auth_server))
    overlay_file = tmp_path / "overlay.yaml"
    overlay_file.write_text(textwrap.dedent(overlay(
        "{type: oauth2_client_credentials, client_id: '${LEDGER_CLIENT_ID}', client_secret: '${LEDGER_SECRET}'}")))
    done = run_cli("build", str(spec_file), "--overlay", str(overlay_file), "-o", str(tmp_path / "pkg"),
                   env={"LEDGER_SECRET": SVC_SECRET}, timeout=300)
    assert done.returncode == 0, done.stderr
    packaged = json.loads(next((tmp_path / "pkg" / "src").glob("*/manifest.json")).read_text())
    assert packaged["upstream"]["auth"]["client_secret"] == "${LEDGER_SECRET}"
    assert packaged["upstream"]["auth"]["token_url"] == auth_server.token_url
    readme = (tmp_path / "pkg" / "README.md").read_text()
    assert "| `LEDGER_SECRET` | yes | yes |" in readme and "client-credentials token from" in readme
    registry = json.loads((tmp_path / "pkg" / "server.json").read_text())
    inputs = {v["name"]: v for p in registry["packages"] for v in p.get("environmentVariables", [])}
    assert inputs["LEDGER_SECRET"]["isSecret"] is True
    for file in (tmp_path / "pkg").rglob("*"):
        if file.is_file() and file.suffix in (".json", ".md", ".yaml", ".toml", ".txt", ""):
            assert_no_secret(file.read_text(errors="replace"), SVC_SECRET)


def test_serve_check_asks_the_token_endpoint(tmp_path: Path, api: Api, auth_server: AuthServer) -> None:
    args = serve_args(tmp_path, api, auth_server, CC_AUTH)[:3]
    good = run_cli("serve", *args, "--check", env={"LEDGER_SECRET": SVC_SECRET})
    assert good.returncode == 0 and "configuration ok" in good.stderr, good.stderr
    wrong = "wrong-Secret-a1b2c3d4e5f6"
    bad = run_cli("serve", *args, "--check", env={"LEDGER_SECRET": wrong})
    assert bad.returncode != 0 and "invalid_client" in bad.stderr and "refused to issue a token" in bad.stderr
    assert_no_secret(bad.stderr + bad.stdout, wrong)
    no_traceback(bad.stderr)


def test_renewal_time_of_a_token() -> None:
    def jwt_with_exp(exp: float) -> str:
        part = base64.urlsafe_b64encode(json.dumps({"exp": exp}).encode()).decode().rstrip("=")
        return f"eyJhbGciOiJSUzI1NiJ9.{part}.c2ln"

    assert _lifetime(3600, "opaque-token") == 3600 - 30  # 10%, at most 30 s
    assert _lifetime(100, "opaque-token") == 90
    assert _lifetime(2, "opaque-token") == 1.5  # at least half a second
    assert _lifetime(1, "opaque-token") == 0.75  # a quarter of a life shorter than 2 s
    assert _lifetime(None, "opaque-token") == 300 - 30  # no expires_in: DEFAULT_LIFETIME
    soon = _lifetime(3600, jwt_with_exp(time.time() + 60))  # the JWT's exp comes first
    assert 53 < soon <= 54
    assert _lifetime(3600, jwt_with_exp(time.time() - 5)) == 0  # already expired: renewed on the next call
