"""Third-party tier: the Prefect server (PyPI `prefect` 3.9.1), FastAPI on SQLite.

What it brings: an OpenAPI 3.1 description of 150 paths that the server publishes at
/api/openapi.json with a relative server URL (`/api`), pydantic's `anyOf: [X, {type: null}]` for
every optional field, operation ids like `read_variable_by_name_variables_name__name__get`,
path and body properties of the same name (`name`), upserts (a flow's create answers the
existing flow), 204 answers, 409/422/404 in FastAPI's shapes, and lists that are POSTs with the
paging fields and nested filters in the JSON body. Served with overlays/prefect.yaml, called over
stdio and Streamable HTTP in both protocol eras.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest
from anyio.from_thread import BlockingPortal
from hypothesis import given
from hypothesis import strategies as st

from tests.e2e_support import HttpServer, McpSession, err, no_traceback, ok, run_cli
from tests.properties import PROFILE, Target, check, draw_call
from tests.thirdparty.lint_clean import assert_lints_clean
from tests.thirdparty.support import TRANSPORTS, Overlay, Service, User, connect, fetch_spec, server_python

OVERLAY = Overlay("prefect")


# ============================================================================ fixtures


@pytest.fixture(scope="module")
def prefect(logs: Path) -> Iterator[Service]:
    python = server_python("prefect")
    home = logs / "prefect-home"
    home.mkdir()
    env = {
        "PREFECT_HOME": str(home),
        "PREFECT_API_DATABASE_CONNECTION_URL": f"sqlite+aiosqlite:///{home / 'prefect.db'}",
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
        "PREFECT_SERVER_UI_ENABLED": "false",
        "PREFECT_LOGGING_SERVER_LEVEL": "WARNING",
    }

    def command(port: int) -> list[str]:
        return [str(python), "-m", "prefect", "server", "start", "--host", "127.0.0.1", "--port", str(port),
                "--no-services", "--no-ui", "--analytics-off"]

    with Service.start("prefect", command, ready="/api/health", log_dir=logs, env=env, timeout=180) as service:
        yield service


@pytest.fixture(scope="module")
def spec(prefect: Service, logs: Path) -> Path:
    return fetch_spec(prefect.direct + "/api/openapi.json", logs / "prefect.json")


def env_for(prefect: Service) -> dict[str, str]:
    return {"PREFECT_API_URL": prefect.url + "/api"}


@pytest.fixture(scope="module")
def served(prefect: Service, spec: Path) -> tuple[list[str], dict[str, str]]:
    return [str(spec), "--overlay", str(OVERLAY.full), "--log-level", "info"], env_for(prefect)


def test_the_overlay_passes_lint(served: tuple[list[str], dict[str, str]]) -> None:
    """openapi2mcp lint (every rule, every client profile but Gemini's) finds nothing left to fix."""
    assert_lints_clean(served[0])


@pytest.fixture(scope="module")
def http(served: tuple[list[str], dict[str, str]], logs: Path) -> Iterator[HttpServer]:
    args, env = served
    with HttpServer.start([*args, "--sse"], log_dir=logs, env=env) as server:  # --sse: 2025-11-25 elicitation
        yield server


@pytest.fixture(scope="module")
def session(
    loop: BlockingPortal,
    transport: str,
    http: HttpServer,
    served: tuple[list[str], dict[str, str]],
    user: User,
    logs: Path,
) -> Iterator[McpSession]:
    args, env = served
    s = connect(loop, transport, http=http, args=args, env=env, user=user, log_dir=logs)
    yield s
    s.close()


@pytest.fixture(scope="module")
def tag(transport: str) -> str:
    """A name part of this transport's own, for the variables and flows its tests create."""
    return re.sub(r"[^a-z0-9]", "_", transport)


def api(prefect: Service) -> httpx2.Client:
    return httpx2.Client(base_url=prefect.direct + "/api", trust_env=False, timeout=30)


# ============================================================================ tests


def test_tools_list(transport: str, session: McpSession, http: HttpServer) -> None:
    assert session.protocol_version == TRANSPORTS[transport][2]
    tools = {t.name: t for t in session.list_tools()}
    assert list(tools) == OVERLAY.listed()
    manage = tools["variables_manage"].input_schema
    assert set(manage["properties"]) == {"action", "name", "value", "tags", "new_name"}
    assert manage["required"] == ["action", "name"]  # the API version header is the server's business
    assert manage["properties"]["name"]["maxLength"] == 255
    flows = tools["flows_manage"]
    assert flows.annotations is not None and flows.annotations.destructive_hint is True
    assert "asks the user to confirm" in (flows.description or "")
    assert http.health()["tools"] == len(tools)


def test_variables_round_trip(transport: str, session: McpSession, tag: str, prefect: Service) -> None:
    name = f"target_{tag}"
    created = ok(session.call("variables_manage", {"action": "create", "name": name, "value": "prod",
                                                   "tags": ["deploy"]}))
    assert created == {"name": name, "value": "prod", "tags": ["deploy"]}
    # a JSON object as the value; PATCH answers 204
    changed = ok(session.call("variables_manage", {"action": "update", "name": name,
                                                   "value": {"region": "eu", "replicas": 3}}))
    assert changed == {"status": 204}
    read = ok(session.call("variables_get", {"name": name}))
    assert read["value"] == {"region": "eu", "replicas": 3} and read["tags"] == ["deploy"]  # tags stayed
    assert read["updated"] >= read["created"]
    renamed = f"renamed_{tag}"
    ok(session.call("variables_manage", {"action": "update", "name": name, "new_name": renamed}))
    with api(prefect) as rest:
        assert rest.get(f"/variables/name/{renamed}").json()["value"] == {"region": "eu", "replicas": 3}
        assert rest.get(f"/variables/name/{name}").status_code == 404

    again = err(session.call("variables_manage", {"action": "create", "name": renamed, "value": 1}), "CONFLICT")
    assert again["status"] == 409 and again["message"].startswith("A variable with this name already exists")
    assert f"A variable with the name '{renamed}' already exists." in again["message"]  # Prefect's `detail`


def test_delete_asks_the_user_first(transport: str, session: McpSession, tag: str, user: User) -> None:
    name = f"old_{tag}"
    ok(session.call("variables_manage", {"action": "create", "name": name, "value": True}))
    user.answer = "decline"
    err(session.call("variables_manage", {"action": "delete", "name": name}), "CONFIRMATION_DECLINED")
    assert ok(session.call("variables_get", {"name": name}))["value"] is True
    assert user.asked == [user.asked[0]] and f'Delete the Prefect variable "{name}"?' in user.asked[0]
    user.answer = "accept"
    assert ok(session.call("variables_manage", {"action": "delete", "name": name})) == {"status": 204}
    gone = err(session.call("variables_get", {"name": name}), "NOT_FOUND")
    assert "(upstream said: Variable not found.)" in gone["message"]


def test_flows_register_read_and_delete(transport: str, session: McpSession, tag: str, user: User) -> None:
    name = f"etl-{tag}"
    flow = ok(session.call("flows_manage", {"action": "create", "name": name, "tags": ["nightly"],
                                            "labels": {"team": "data", "tier": 2}}))
    assert uuid.UUID(flow["id"]) and flow["labels"] == {"team": "data", "tier": 2}
    same = ok(session.call("flows_manage", {"action": "create", "name": name}))
    assert same["id"] == flow["id"] and same["tags"] == ["nightly"]  # Prefect's upsert: the existing flow
    read = ok(session.call("flows_get", {"id": flow["id"]}))
    assert (read["name"], read["tags"]) == (name, ["nightly"])

    assert ok(session.call("flows_manage", {"action": "delete", "id": flow["id"]})) == {"status": 204}
    assert len(user.asked) == 1 and flow["id"] in user.asked[0] and "all of its deployments and runs" in user.asked[0]
    err(session.call("flows_get", {"id": flow["id"]}), "NOT_FOUND")


BAD = [
    pytest.param("flows_get", {"id": "not-a-uuid"}, "id", "is not a 'uuid'", id="uuid-format"),
    pytest.param("flows_manage", {"action": "create", "name": "a/b"}, "name", "does not match", id="name-pattern"),
    pytest.param("flows_manage", {"action": "delete"}, "id", "action 'delete' needs id", id="action-needs"),
    pytest.param("variables_manage", {"action": "create", "name": "x" * 256, "value": 1}, "name",
                 "is too long", id="max-length"),
    pytest.param("variables_manage", {"action": "delete", "name": "x", "value": 1}, "value",
                 "action 'delete' does not take value", id="not-this-action"),
    pytest.param("variables_get", {"name": "x", "x-prefect-api-version": "0.8.4"}, "x-prefect-api-version",
                 "unknown argument", id="hidden-header"),
]


@pytest.mark.parametrize(("tool", "arguments", "field", "message"), BAD)
def test_bad_arguments_are_refused_before_anything_is_sent(
    transport: str, session: McpSession, prefect: Service, tool: str, arguments: dict[str, Any], field: str,
    message: str,
) -> None:
    before = prefect.relay.bytes_up
    body = err(session.call(tool, arguments), "ARGUMENT_INVALID")
    assert body["field"] == field and message in body["message"], body
    assert prefect.relay.bytes_up == before


def test_prefect_rejects_what_only_it_can_check(transport: str, session: McpSession, prefect: Service) -> None:
    before = prefect.relay.bytes_up
    bad = err(session.call("variables_manage", {"action": "create", "name": "Not Lower Case", "value": 1}),
              "ARGUMENT_INVALID")
    assert prefect.relay.bytes_up > before and bad["status"] == 422 and bad["retryable"] is False
    # Prefect's own words ({"exception_message", "exception_detail": [{loc, msg}]}), under the argument's name
    assert bad["field"] == "name", bad
    assert "Invalid request received: name: " in bad["message"], bad


def test_not_found(transport: str, session: McpSession) -> None:
    missing = err(session.call("variables_get", {"name": "no_such_variable"}), "NOT_FOUND")
    assert missing["status"] == 404 and missing["message"].startswith("No variable with that name")
    flow = err(session.call("flows_get", {"id": str(uuid.UUID(int=0))}), "NOT_FOUND")
    assert "(upstream said: Flow not found)" in flow["message"]
    update = err(session.call("variables_manage", {"action": "update", "name": "no_such_variable", "value": 1}),
                 "NOT_FOUND")
    assert update["status"] == 404


def test_upstream_down(transport: str, session: McpSession, prefect: Service) -> None:
    with prefect.relay.unplugged():
        down = err(session.call("variables_get", {"name": "anything"}), "UPSTREAM_UNAVAILABLE")
        assert down["retryable"] is True
    err(session.call("variables_get", {"name": "anything"}), "NOT_FOUND")  # reached again


def test_logs_stay_clean(transport: str, session: McpSession, http: HttpServer) -> None:
    err(session.call("variables_get", {"name": "anything"}), "NOT_FOUND")
    log = session.stderr() if TRANSPORTS[transport][0] == "stdio" else http.stderr()
    assert "tool=variables_get" in log
    no_traceback(log)


# ============================================================================ needs branch `paging`


@pytest.fixture(scope="module")
def listing(prefect: Service) -> str:
    """12 variables and 12 flows whose names start with `listing`, set up through Prefect's REST API."""
    with api(prefect) as rest:
        for i in range(12):
            rest.post("/variables/", json={"name": f"listing_{i:02d}", "value": i}).raise_for_status()
            rest.post("/flows/", json={"name": f"listing-{i:02d}"}).raise_for_status()
    return "listing"


def _page_all(s: McpSession, tool: str, arguments: dict[str, Any]) -> tuple[list[dict[str, Any]], int]:
    items: list[dict[str, Any]] = []
    pages = 0
    while True:
        page = ok(s.call(tool, arguments))
        pages += 1
        items += page["items"]
        if not page["has_more"]:
            return items, pages
        arguments = {**arguments, "cursor": page["next_cursor"]}
        assert pages < 10


def test_lists_page_through_post_bodies(
    prefect: Service, spec: Path, listing: str, logs: Path, loop: BlockingPortal
) -> None:
    """variables_list (offset/limit in the body) and flows_list (page/limit in the body), each with a
    flat `name_like` argument that becomes {"variables"|"flows": {"name": {"like_": ...}}}."""
    args = [str(spec), "--overlay", str(OVERLAY.full)]
    compiled = run_cli("inspect", *args, env=env_for(prefect))
    assert compiled.returncode == 0, compiled.stderr
    s = McpSession.stdio(loop, args, mode="auto", label="prefect-paging", log_dir=logs, env=env_for(prefect))
    try:
        variables, pages = _page_all(s, "variables_list", {"name_like": f"{listing}_%", "limit": 5})
        assert pages == 3 and [v["name"] for v in variables] == [f"listing_{i:02d}" for i in range(12)]
        flows, pages = _page_all(s, "flows_list", {"name_like": f"{listing}-%", "limit": 5})
        assert pages == 3 and [f["name"] for f in flows] == [f"listing-{i:02d}" for i in range(12)]
        first = ok(s.call("flows_list", {"name_like": f"{listing}-%", "limit": 5}))
        assert first["total"] == 12
    finally:
        s.close()


# ============================================================================ nullable arguments (issue 10 part 5)


def test_errors_on_nullable_arguments_describe_the_value_branch(
    transport: str, session: McpSession, prefect: Service
) -> None:
    """VariableUpdate.tags is anyOf [{type: array, items: string}, {type: null}]; FlowCreate.labels is
    anyOf [{type: object, additionalProperties: anyOf [boolean, integer, number, string]}, {type: null}].
    They used to say "tags: expected null, got array" and "labels: expected null, got object"."""
    before = prefect.relay.bytes_up
    tags = err(session.call("variables_manage", {"action": "update", "name": "x", "tags": ["ok", 1]}),
               "ARGUMENT_INVALID")
    assert tags["message"].startswith("tags[1]: expected string, got integer"), tags
    labels = err(session.call("flows_manage", {"action": "create", "name": "x", "labels": {"team": ["a"]}}),
                 "ARGUMENT_INVALID")
    assert labels["message"].startswith("labels.team: expected boolean or integer or number or string"), labels
    assert prefect.relay.bytes_up == before


# ============================================================================ property tier (last: it writes at random)


@PROFILE
@given(data=st.data())
def test_generated_arguments_hold_the_properties(generated: Target, data: st.DataObject) -> None:
    """tests/properties.py against this real server, every request checked by tests/spec_proxy.py."""
    check(generated, *draw_call(data, generated, broken=data.draw(st.booleans(), label="broken")))
