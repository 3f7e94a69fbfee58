"""The example upstream REST APIs: every endpoint, the spec validation, faults, auth, subprocess mode.

Each example runs on a free 127.0.0.1 port through ``Upstream.start`` and is called with httpx2
directly. Valid requests must leave no OpenAPI violations behind; invalid ones must be recorded.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest
import yaml

from examples import EXAMPLES, AuthRequirement, Upstream, UpstreamViolationError, load_spec
from examples._upstream import Api, ApiError, Call, json_response
from tests.local import ROOT

PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
)


# ---------------------------------------------------------------------------------------------
# fixtures


@pytest.fixture(scope="module")
def servers() -> Iterator[dict[str, Upstream]]:
    started = {name: Upstream.start(name) for name in EXAMPLES}
    try:
        yield started
    finally:
        for up in started.values():
            up.stop()


def _use(servers: dict[str, Upstream], name: str) -> Iterator[Upstream]:
    up = servers[name]
    up.reset()
    yield up


@pytest.fixture
def petstore(servers: dict[str, Upstream]) -> Iterator[Upstream]:
    yield from _use(servers, "petstore")


@pytest.fixture
def notes(servers: dict[str, Upstream]) -> Iterator[Upstream]:
    yield from _use(servers, "notes")


@pytest.fixture
def market(servers: dict[str, Upstream]) -> Iterator[Upstream]:
    yield from _use(servers, "market")


@pytest.fixture
def mailfiles(servers: dict[str, Upstream]) -> Iterator[Upstream]:
    yield from _use(servers, "mailfiles")


def client(up: Upstream, **kwargs: Any) -> httpx2.Client:
    return httpx2.Client(base_url=up.base_url, trust_env=False, timeout=10.0, **kwargs)


def operation_ids(up: Upstream) -> set[str]:
    spec = load_spec(up.spec_path)
    return {
        op["operationId"]
        for item in spec["paths"].values()
        for method, op in item.items()
        if method in ("get", "put", "post", "delete", "patch")
    }


def violation_errors(up: Upstream) -> list[str]:
    return [v["error"] for v in up.violations()]


# ---------------------------------------------------------------------------------------------
# the specs


@pytest.mark.parametrize("name", EXAMPLES)
def test_spec_is_valid_openapi_with_complete_operations(name: str) -> None:
    from openapi_spec_validator import validate

    from examples import spec_path_of

    spec = yaml.safe_load(spec_path_of(name).read_text(encoding="utf-8"))
    validate(spec)
    assert spec["openapi"].startswith(("3.0.", "3.1."))
    seen: set[str] = set()
    for path, item in spec["paths"].items():
        for method, op in item.items():
            if method == "parameters":
                continue
            assert op["operationId"] not in seen, f"{method} {path}"
            seen.add(op["operationId"])
            assert op.get("summary") or op.get("description"), f"{op['operationId']} needs a description"
            responses = op["responses"]
            if op.get("parameters") or item.get("parameters") or op.get("requestBody"):
                assert "400" in responses, f"{op['operationId']} must declare the 400 it can answer"


def test_served_spec_points_at_the_running_server(petstore: Upstream) -> None:
    with client(petstore) as c:
        text = c.get("/openapi.yaml").text
        as_json = c.get("/openapi.json").json()
    served = yaml.safe_load(text)
    assert served["servers"][0]["url"] == petstore.base_url
    assert as_json["paths"].keys() == served["paths"].keys()
    assert petstore.spec_url == petstore.base_url + "/openapi.yaml"
    assert petstore.state()["requests"] == []  # spec and admin requests are not recorded


# ---------------------------------------------------------------------------------------------
# petstore: serialisation


def test_list_pets_every_parameter_style(petstore: Upstream) -> None:
    with client(petstore, cookies={"session": "s-1"}) as c:
        r = c.get(
            "/pets",
            params=[
                ("tags", "dog"),
                ("tags", "large"),
                ("ids", "1,5,7"),
                ("filter[color]", "black"),
                ("filter[minAge]", "2"),
                ("sort", "-age"),
                ("per_page", "5"),
            ],
            headers={"X-Request-ID": "req-42"},
        )
    assert r.status_code == 200, r.text
    body = r.json()
    assert [p["name"] for p in body["items"]] == ["Max"]
    assert body["total"] == 1 and body["per_page"] == 5
    assert r.headers["x-request-id"] == "req-42"
    assert r.headers["x-session-seen"] == "yes"
    assert r.headers["x-total-count"] == "1"
    record = petstore.last_request("listPets")
    assert (
        record["query"]
        == "tags=dog&tags=large&ids=1%2C5%2C7&filter%5Bcolor%5D=black&filter%5BminAge%5D=2&sort=-age&per_page=5"
    )
    assert record["headers"]["x-request-id"] == "req-42"
    assert record["headers"]["cookie"] == "session=s-1"
    petstore.assert_no_violations()


def test_list_pets_paging_and_deprecated_limit(petstore: Upstream) -> None:
    with client(petstore) as c:
        first = c.get("/pets", params={"page": 1, "per_page": 5}).json()
        third = c.get("/pets", params={"page": 3, "per_page": 5}).json()
        legacy = c.get("/pets", params={"limit": 3}).json()
        both = c.get("/pets", params={"limit": 3, "per_page": 4}).json()
        sold = c.get("/pets", params={"status": "sold"}).json()
    assert first["total"] == 12 and len(first["items"]) == 5
    assert [p["id"] for p in third["items"]] == ["11", "12"]
    assert len(legacy["items"]) == 3 and legacy["per_page"] == 3
    assert both["per_page"] == 4
    assert {p["name"] for p in sold["items"]} == {"Bubbles", "Bella"}
    petstore.assert_no_violations()


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("limit=0", "limit"),
        ("per_page=abc", "per_page"),
        ("status=lost", "status"),
        ("filter%5Bcolour%5D=red", "colour"),
        ("filter%5BminAge%5D=-1", "minAge"),
        ("sort=price", "sort"),
        ("bogus=1", "unknown query parameter 'bogus'"),
    ],
)
def test_list_pets_records_violations(petstore: Upstream, query: str, expected: str) -> None:
    with client(petstore) as c:
        r = c.get("/pets?" + query)
    assert r.status_code == 400
    assert r.json()["error"]["code"] == "REQUEST_INVALID"
    (violation,) = petstore.violations()
    assert violation["kind"] == "request"
    assert violation["operation"] == "listPets"
    assert violation["query"] == query
    assert expected in violation["error"]
    with pytest.raises(UpstreamViolationError, match="listPets"):
        petstore.assert_no_violations()


@pytest.mark.parametrize(
    ("raw", "pet_id"),
    [("..%2Fadmin", "../admin"), ("a%2Fb", "a/b"), ("x%3Fy", "x?y"), ("%23frag", "#frag"), ("%E7%8C%AB", "猫")],
)
def test_pet_id_is_exactly_one_path_segment(petstore: Upstream, raw: str, pet_id: str) -> None:
    with client(petstore) as c:
        r = c.get(f"/pets/{raw}")
    assert r.status_code == 404
    assert r.json()["error"] == {"code": "NOT_FOUND", "message": f"pet {pet_id!r} not found", "field": "petId"}
    record = petstore.last_request()
    assert record["path"] == f"/pets/{raw}"
    assert record["operation"] == "getPet"
    assert record["path_params"] == {"petId": pet_id}
    petstore.assert_no_violations()


def test_unencoded_slash_does_not_reach_get_pet(petstore: Upstream) -> None:
    with client(petstore) as c:
        r = c.get("/pets/a/b")
        admin = c.get("/pets/../admin")  # the client removes the dot segment: /admin
        wrong_method = c.post("/pets-offset")
    assert r.status_code == 404 and admin.status_code == 404 and wrong_method.status_code == 405
    kinds = [(v["kind"], v["path"]) for v in petstore.violations()]
    assert kinds == [("route", "/pets/a/b"), ("route", "/admin"), ("route", "/pets-offset")]
    assert petstore.count("getPet") == 0


def test_pet_crud(petstore: Upstream) -> None:
    with client(petstore) as c:
        r = c.post(
            "/pets",
            json={
                "name": "Fido",
                "tag": "dog",
                "age": 2,
                "categoryId": 3,
                "birthday": "2024-05-01",
                "tags": ["dog", "small"],
            },
        )
        assert r.status_code == 201, r.text
        pet = r.json()
        assert pet["id"] == "13" and r.headers["location"] == "/pets/13"
        assert pet["category"] == {
            "id": 3,
            "name": "Dogs",
            "parent": {"id": 2, "name": "Mammals", "parent": {"id": 1, "name": "Animals"}},
        }
        assert "categoryId" not in pet  # writeOnly

        assert c.post("/pets", json={"name": "fido"}).json()["error"]["code"] == "DUPLICATE_NAME"
        assert c.post("/pets", json={"name": "Odd", "categoryId": 99}).status_code == 422
        assert c.get("/pets/13").json()["name"] == "Fido"

        r = c.put("/pets/13", json={"name": "Fido II", "age": 3})
        assert r.status_code == 200 and "tag" not in r.json() and r.json()["status"] == "available"

        patch_headers = {"content-type": "application/merge-patch+json"}
        r = c.patch("/pets/13", content=json.dumps({"tag": "hound", "weight_kg": 12.5}), headers=patch_headers)
        assert r.json()["tag"] == "hound" and r.json()["weight_kg"] == 12.5
        r = c.patch("/pets/13", content=json.dumps({"tag": None}), headers=patch_headers)
        assert r.status_code == 200 and "tag" not in r.json()
        r = c.patch("/pets/3", content=json.dumps({"status": "available"}), headers=patch_headers)
        assert r.status_code == 422 and r.json()["error"]["code"] == "INVALID_TRANSITION"

        assert c.delete("/pets/13").status_code == 204
        assert c.get("/pets/13").status_code == 404
    assert petstore.domain() == {"pets": 12, "created": 1, "deleted": 1, "photos": 0}
    petstore.assert_no_violations()


def test_pet_body_violations(petstore: Upstream) -> None:
    with client(petstore) as c:
        assert c.post("/pets", json={"id": "99", "name": "X"}).status_code == 400  # readOnly id
        assert c.post("/pets", json={"age": 2}).status_code == 400  # name required
        assert c.post("/pets", json={"name": "Y", "age": -1}).status_code == 400  # minimum 0
        assert c.patch("/pets/1", json={"tag": "x"}).status_code == 400  # must be merge-patch+json
        assert (
            c.patch("/pets/1", content=b"{}", headers={"content-type": "application/merge-patch+json"}).status_code
            == 400
        )
    errors = violation_errors(petstore)
    assert len(errors) == 5
    assert "read-only" in errors[0] and "'name' is a required property" in errors[1]
    assert "application/json" in errors[3]
    assert petstore.domain()["created"] == 0


def test_photo_multipart_upload_and_binary_download(petstore: Upstream) -> None:
    with client(petstore) as c:
        placeholder = c.get("/pets/2/photo")
        assert placeholder.headers["content-type"] == "image/png" and placeholder.content.startswith(b"\x89PNG")
        r = c.post("/pets/2/photo", files={"file": ("cat.png", PNG, "image/png")}, data={"caption": "Mittens"})
        assert r.status_code == 201, r.text
        assert r.json()["sizeBytes"] == len(PNG) and r.json()["caption"] == "Mittens"
        assert c.get("/pets/2/photo").content == PNG
        bad = c.post("/pets/2/photo", files={"file": ("x.txt", b"hello", "text/plain")})
        assert bad.status_code == 422 and bad.json()["error"]["code"] == "UNSUPPORTED_IMAGE"
        assert c.post("/pets/99/photo", files={"file": ("cat.png", PNG, "image/png")}).status_code == 404
    record = petstore.requests("uploadPetPhoto")[0]
    assert record["headers"]["content-type"].startswith("multipart/form-data; boundary=")
    petstore.assert_no_violations()
    with client(petstore) as c:
        assert c.post("/pets/2/photo", data={"caption": "no file"}).status_code == 400
    assert len(petstore.violations()) == 1


def test_form_search_text_notes_and_health(petstore: Upstream) -> None:
    with client(petstore) as c:
        r = c.post("/pets/search-form", data={"tags": ["cat", "calm"], "min_age": "3"})
        assert [p["name"] for p in r.json()["items"]] == ["Luna", "Shadow"]
        assert petstore.last_request()["body"] == "tags=cat&tags=calm&min_age=3"
        notes = c.get("/pets/1/notes")
        assert notes.headers["content-type"].startswith("text/plain") and "红色的球" in notes.text
        assert c.get("/health").json()["status"] == "ok"
    petstore.assert_no_violations()


def _walk(fetch: Any) -> list[str]:
    ids: list[str] = []
    for _ in range(20):
        items, more = fetch()
        ids += [p["id"] for p in items]
        if not more:
            return ids
    raise AssertionError("pagination did not end")


def test_four_pagination_styles_cover_all_pets(petstore: Upstream) -> None:
    everything = [str(i) for i in range(1, 13)]
    with client(petstore) as c:
        offset = {"offset": 0}

        def by_offset() -> tuple[list[Any], bool]:
            page = c.get("/pets-offset", params={"offset": offset["offset"], "limit": 5}).json()
            offset["offset"] += page["limit"]
            return page["items"], offset["offset"] < page["total"]

        cursor: dict[str, str | None] = {"cursor": None}

        def by_cursor() -> tuple[list[Any], bool]:
            params = {"limit": 5} | ({"cursor": cursor["cursor"]} if cursor["cursor"] else {})
            page = c.get("/pets-cursor", params=params).json()
            cursor["cursor"] = page["next_cursor"]
            return page["items"], page["next_cursor"] is not None

        link = {"url": "/pets-linked?per_page=5"}

        def by_link() -> tuple[list[Any], bool]:
            r = c.get(link["url"])
            nxt = r.links.get("next")
            if nxt:
                link["url"] = nxt["url"]
            return r.json(), nxt is not None

        header = {"cursor": None}

        def by_header() -> tuple[list[Any], bool]:
            r = c.get("/pets-header-cursor", params={"cursor": header["cursor"]} if header["cursor"] else {})
            header["cursor"] = r.headers.get("x-next-cursor")
            return r.json(), header["cursor"] is not None

        assert _walk(by_offset) == everything
        assert _walk(by_cursor) == everything
        assert _walk(by_link) == everything
        assert _walk(by_header) == everything

        last = c.get("/pets-linked", params={"page": 3, "per_page": 5})
        assert set(last.links) == {"first", "prev", "last"}
        assert last.links["first"]["url"].startswith(petstore.base_url)

        bad = c.get("/pets-cursor", params={"cursor": "garbage!"})
        assert bad.status_code == 400 and bad.json()["error"]["code"] == "INVALID_CURSOR"
        first_available = c.get("/pets-cursor", params={"limit": 2, "status": "available"}).json()
        mismatched = c.get("/pets-cursor", params={"cursor": first_available["next_cursor"], "status": "sold"})
        assert mismatched.json()["error"]["code"] == "INVALID_CURSOR"
    petstore.assert_no_violations()


def test_categories_orders_and_customers_chain(petstore: Upstream) -> None:
    with client(petstore) as c:
        assert c.get("/categories/4").json()["parent"]["parent"] == {"id": 1, "name": "Animals"}
        tree = c.get("/categories-tree").json()
        assert tree[0]["children"][0]["children"][0]["name"] == "Dogs"
        order = c.get("/orders/o-1003").json()
        customer = c.get(f"/customers/{order['customerId']}").json()
        items = c.get(f"/orders/{order['id']}/items").json()
        assert customer["name"] == "Anna Schmidt"
        assert [i["id"] for i in items] == order["itemIds"]
        assert order["totalCents"] == sum(i["quantity"] * i["unitPriceCents"] for i in items)
        assert c.get("/orders/o-9").status_code == 404
        assert c.get("/customers/c-9").status_code == 404
        assert c.get("/categories/9").status_code == 404
    petstore.assert_no_violations()
    with client(petstore) as c:
        assert c.get("/orders/1003").status_code == 400  # pattern ^o-[0-9]+$
    assert len(petstore.violations()) == 1


def test_every_petstore_operation_is_reachable(petstore: Upstream) -> None:
    with client(petstore) as c:
        merge = {"content-type": "application/merge-patch+json"}
        calls = [
            c.get("/pets"),
            c.post("/pets", json={"name": "Zed"}),
            c.post("/pets/search-form", data={"name": "e"}),
            c.get("/pets/1"),
            c.put("/pets/13", json={"name": "Zed"}),
            c.patch("/pets/13", content=b'{"age": 1}', headers=merge),
            c.delete("/pets/13"),
            c.post("/pets/1/photo", files={"file": ("a.png", PNG, "image/png")}),
            c.get("/pets/1/photo"),
            c.get("/pets/1/notes"),
            c.get("/pets-offset"),
            c.get("/pets-cursor"),
            c.get("/pets-linked"),
            c.get("/pets-header-cursor"),
            c.get("/categories/1"),
            c.get("/categories-tree"),
            c.get("/orders/o-1001"),
            c.get("/orders/o-1001/items"),
            c.get("/customers/c-2"),
            c.get("/health"),
        ]
    assert all(r.status_code < 300 for r in calls), [(r.request.url, r.status_code) for r in calls]
    assert set(petstore.counters()) == operation_ids(petstore)
    petstore.assert_no_violations()


# ---------------------------------------------------------------------------------------------
# faults


def test_fault_status_then_recovery(petstore: Upstream) -> None:
    stored = petstore.fault(operation="getPet", status=503, times=2)
    assert stored["remaining"] == 2
    with client(petstore) as c:
        first, second, third = (c.get("/pets/1") for _ in range(3))
    assert [first.status_code, second.status_code, third.status_code] == [503, 503, 200]
    assert first.headers["retry-after"] == "1"
    assert first.json()["error"]["code"] == "UNAVAILABLE"
    state = petstore.state()
    assert state["faults"][0]["remaining"] == 0
    assert [r["fault"] for r in state["requests"]] == ["status", "status", None]
    assert state["counters"]["getPet"] == 3
    petstore.assert_no_violations()


def test_fault_rate_limit_with_body_and_headers(petstore: Upstream) -> None:
    petstore.fault(
        path_prefix="/pets",
        method="GET",
        status=429,
        headers={"Retry-After": "7"},
        body={"error": {"code": "RATE_LIMITED", "message": "slow down"}},
    )
    petstore.fault(operation="getHealth", status=500, body="<html>oops</html>", content_type="text/html")
    with client(petstore) as c:
        limited = c.get("/pets-offset")
        health = c.get("/health")
    assert limited.status_code == 429 and limited.headers["retry-after"] == "7"
    assert limited.json()["error"]["message"] == "slow down"
    assert health.status_code == 500 and health.headers["content-type"].startswith("text/html")
    petstore.assert_no_violations()  # injected answers are not the example's fault


def test_fault_matching_skip_and_query(petstore: Upstream) -> None:
    petstore.fault(operation="listPetsOffset", query_contains="offset=5", status=502, times=None)
    petstore.fault(operation="getPet", skip=1, status=504)
    with client(petstore) as c:
        assert c.get("/pets-offset", params={"offset": 0}).status_code == 200
        assert c.get("/pets-offset", params={"offset": 5}).status_code == 502
        assert c.get("/pets-offset", params={"offset": 5}).status_code == 502
        assert c.get("/pets/1").status_code == 200
        assert c.get("/pets/1").status_code == 504
        assert c.get("/pets/1").status_code == 200
    petstore.clear_faults()
    with client(petstore) as c:
        assert c.get("/pets-offset", params={"offset": 5}).status_code == 200
    petstore.assert_no_violations()


def test_fault_delay(petstore: Upstream) -> None:
    petstore.fault(operation="getPet", delay=0.3)
    with client(petstore) as c:
        started = time.perf_counter()
        r = c.get("/pets/1")
        elapsed = time.perf_counter() - started
        petstore.fault(operation="getPet", delay=0.5)
        with pytest.raises(httpx2.ReadTimeout):
            c.get("/pets/1", timeout=0.1)
    assert r.status_code == 200 and elapsed >= 0.3
    petstore.assert_no_violations()


def test_fault_close_and_truncate_drop_the_connection(petstore: Upstream) -> None:
    petstore.fault(operation="getPet", kind="close")
    petstore.fault(operation="listPets", kind="truncate")
    with client(petstore) as c:
        with pytest.raises(httpx2.RemoteProtocolError):
            c.get("/pets/1")
        with pytest.raises(httpx2.RemoteProtocolError):
            c.get("/pets")
        assert c.get("/pets/1").status_code == 200  # the server is fine afterwards
    assert [r["fault"] for r in petstore.requests()] == ["close", "truncate", None]
    petstore.assert_no_violations()


def test_fault_lie_huge_binary_redirect(petstore: Upstream) -> None:
    petstore.fault(operation="getPet", kind="lie")
    petstore.fault(operation="listPets", kind="huge", size=2_000_000)
    petstore.fault(operation="listPetsOffset", kind="huge", size=1_000_000, stream=True)
    petstore.fault(operation="getCustomer", kind="binary", size=300)
    petstore.fault(operation="getOrder", kind="redirect")
    with client(petstore) as c:
        lie = c.get("/pets/1")
        huge = c.get("/pets")
        streamed = c.get("/pets-offset")
        binary = c.get("/customers/c-1")
        redirect = c.get("/orders/o-1001")
    assert lie.status_code == 200 and "name" not in lie.json()
    assert int(huge.headers["content-length"]) >= 1_900_000 and isinstance(huge.json()["items"], list)
    assert "content-length" not in streamed.headers and len(streamed.content) >= 900_000
    assert binary.headers["content-type"] == "application/octet-stream" and len(binary.content) == 300
    assert redirect.status_code == 302 and redirect.headers["location"] == "http://127.0.0.1:9/evil"
    petstore.assert_no_violations()  # deliberate lies are not the example's fault


def test_bad_fault_is_refused(petstore: Upstream) -> None:
    with pytest.raises(ValueError, match="unknown fault kind"):
        petstore.fault(operation="getPet", kind="explode")
    with pytest.raises(ValueError, match="unknown fault keys"):
        petstore.fault(operation="getPet", statuss=500)


# ---------------------------------------------------------------------------------------------
# the machinery itself


class _Nothing:
    def summary(self) -> dict[str, Any]:
        return {}


def test_response_violations_and_crashes_are_recorded(tmp_path: Path) -> None:
    spec = tmp_path / "openapi.yaml"
    spec.write_text(
        yaml.safe_dump(
            {
                "openapi": "3.1.0",
                "info": {"title": "broken", "version": "1"},
                "paths": {
                    "/thing": {
                        "get": {
                            "operationId": "getThing",
                            "responses": {
                                "200": {
                                    "description": "ok",
                                    "content": {
                                        "application/json": {
                                            "schema": {
                                                "type": "object",
                                                "required": ["id"],
                                                "properties": {"id": {"type": "integer"}},
                                            }
                                        }
                                    },
                                }
                            },
                        }
                    },
                    "/crash": {"get": {"operationId": "crash", "responses": {"200": {"description": "ok"}}}},
                    "/teapot": {"get": {"operationId": "teapot", "responses": {"200": {"description": "ok"}}}},
                },
            }
        )
    )
    api: Api[_Nothing] = Api("broken", spec, _Nothing)

    @api.operation("getThing")
    async def get_thing(call: Call[_Nothing]) -> Any:
        return json_response({"id": "not-an-integer"})

    @api.operation("crash")
    async def crash(call: Call[_Nothing]) -> Any:
        raise RuntimeError("boom")

    @api.operation("teapot")
    async def teapot(call: Call[_Nothing]) -> Any:
        raise ApiError(418, "TEAPOT", "undeclared status")

    with Upstream.serve(api.create_app(), name="broken", spec_path=spec) as up, client(up) as c:
        assert c.get("/thing").json() == {"id": "not-an-integer"}
        assert c.get("/crash").status_code == 500
        assert c.get("/teapot").status_code == 418
        kinds = [(v["kind"], v["operation"]) for v in up.violations()]
        assert kinds == [("response", "getThing"), ("server_error", "crash"), ("response", "teapot")]
        assert "boom" in up.violations()[1]["error"]


def test_handlers_must_match_the_spec(tmp_path: Path) -> None:
    spec = tmp_path / "openapi.yaml"
    spec.write_text(
        "openapi: 3.1.0\ninfo: {title: t, version: '1'}\n"
        "paths:\n  /a:\n    get:\n      operationId: a\n      responses: {'200': {description: ok}}\n"
    )
    api: Api[_Nothing] = Api("t", spec, _Nothing)

    @api.operation("b")
    async def b(call: Call[_Nothing]) -> Any:
        return json_response({})

    with pytest.raises(ValueError, match=r"without handler \['a'\], unknown \['b'\]"):
        api.create_app()


def test_start_serves_and_stop_is_clean() -> None:
    up = Upstream.start("market")
    assert up.running
    with client(up) as c:
        assert c.get("/market/stocks").status_code == 200
    up.stop()
    assert not up.running
    with pytest.raises(httpx2.TransportError):
        httpx2.get(up.base_url + "/market/stocks", timeout=2)
    with pytest.raises(httpx2.ConnectError), httpx2.Client(trust_env=False) as c:
        c.get(up.base_url + "/market/stocks")


# ---------------------------------------------------------------------------------------------
# upstream auth


@pytest.mark.parametrize(
    ("auth", "good", "bad"),
    [
        (
            "bearer:s3cret",
            {"headers": {"Authorization": "Bearer s3cret"}},
            {"headers": {"Authorization": "Bearer nope"}},
        ),
        (AuthRequirement.basic("alice", "pw"), {"auth": ("alice", "pw")}, {"auth": ("alice", "wrong")}),
        ("header:X-API-Key:k-1", {"headers": {"X-API-Key": "k-1"}}, {"headers": {"X-API-Key": "k-2"}}),
        ("query:api_key:k-1", {"params": {"api_key": "k-1"}}, {"params": {"api_key": "k-2"}}),
        ("cookie:sid:c-1", {"cookies": {"sid": "c-1"}}, {"cookies": {"sid": "c-2"}}),
    ],
)
def test_upstream_auth(auth: Any, good: dict[str, Any], bad: dict[str, Any]) -> None:
    with Upstream.start("petstore", auth=auth) as up:
        with client(up) as c:
            missing = c.get("/pets/1")
            assert missing.status_code == 401
            assert missing.json()["error"]["code"] == "UNAUTHORIZED"
            assert c.get("/health").status_code == 200  # security: []
        with client(up, **bad) as c:
            assert c.get("/pets/1").status_code == 401
        with client(up, **good) as c:
            assert c.get("/pets/1").status_code == 200, c.get("/pets/1").text
        state = up.state()
        assert state["auth"]["accepted"] == 1 and state["auth"]["rejected"] == 2
        assert [r["auth"]["ok"] for r in state["requests"] if r["auth"]] == [False, False, True]
        assert state["requests"][-1]["auth"]["presented"] is not None
        up.assert_no_violations()


def test_bearer_auth_challenge_and_runtime_switch(notes: Upstream) -> None:
    notes.set_auth("bearer:t0k")
    try:
        with client(notes) as c:
            r = c.get("/notes/search", params={"keyword": "MCP"})
            assert r.status_code == 401 and r.headers["www-authenticate"].startswith("Bearer")
            ok = c.get("/notes/search", params={"keyword": "MCP"}, headers={"Authorization": "Bearer t0k"})
            assert ok.status_code == 200
        assert notes.last_request()["headers"]["authorization"] == "Bearer t0k"
    finally:
        notes.set_auth(None)
    with client(notes) as c:
        assert c.get("/notes/search", params={"keyword": "MCP"}).status_code == 200


def test_auth_requirement_parsing() -> None:
    assert AuthRequirement.parse("basic:u:p:q") == AuthRequirement("basic", "p:q", "u")
    assert AuthRequirement.parse("header:X-Key:v") == AuthRequirement.api_key_header("v", "X-Key")
    with pytest.raises(ValueError, match="bad auth"):
        AuthRequirement.parse("token")


# ---------------------------------------------------------------------------------------------
# subprocess mode


def test_spawn_runs_a_separate_process() -> None:
    with Upstream.spawn("notes", auth="bearer:abc", validate_responses=False) as up:
        assert up.pid is not None and up.running
        with client(up, headers={"Authorization": "Bearer abc"}) as c:
            r = c.get("/notes/content", params={"path": "ai-agent/mcp-basics.md"})
        assert r.status_code == 200 and r.json()["evidencePaths"] == ["ai-agent/mcp-basics.md"]
        assert up.count("readNote") == 1
        up.assert_no_violations()
        process = up._process
    assert process is not None and process.poll() is not None  # the subprocess has exited
    assert not up.running


def test_module_cli_help() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "examples", "--help"], cwd=ROOT, capture_output=True, text=True, timeout=30, check=True
    )
    assert "petstore" in result.stdout and "--auth" in result.stdout


# ---------------------------------------------------------------------------------------------
# notes


def test_search_notes(notes: Upstream) -> None:
    with client(notes) as c:
        r = c.get("/notes/search", params={"keyword": "错误"})
        body = r.json()
        assert body["results"][0]["path"] == "ai-agent/error-handling.md"
        assert body["evidencePaths"] == [h["path"] for h in body["results"]]
        assert body["scope"] == "ai-agent"
        narrow = c.get("/notes/search", params={"keyword": "OpenAPI"}).json()
        wide = c.get("/notes/search", params={"keyword": "OpenAPI", "scope": "all-allowed", "limit": 1}).json()
        private = c.get("/notes/search", params={"keyword": "diary", "scope": "all-allowed"}).json()
    assert narrow["total"] == 0
    assert wide["total"] >= 1 and len(wide["results"]) == 1
    assert wide["results"][0]["path"] == "study/openapi-basics.md"
    assert private["total"] == 0
    assert all(0 <= h["score"] <= 1 for h in body["results"])
    notes.assert_no_violations()


@pytest.mark.parametrize(
    "params",
    [
        {"keyword": "a"},
        {"keyword": "x" * 81},
        {"keyword": "mcp", "limit": 21},
        {"keyword": "mcp", "scope": "everything"},
        {},
    ],
)
def test_search_notes_violations(notes: Upstream, params: dict[str, Any]) -> None:
    with client(notes) as c:
        assert c.get("/notes/search", params=params).status_code == 400
    assert len(notes.violations()) == 1


def test_read_note_list_notes_and_tasks(notes: Upstream) -> None:
    with client(notes) as c:
        note = c.get("/notes/content", params={"path": "ai-agent/mcp-basics.md"})
        assert note.json()["title"].startswith("MCP 基础")
        assert notes.last_request()["query"] == "path=ai-agent%2Fmcp-basics.md"
        assert c.get("/notes/content", params={"path": "private/diary-2026-11.md"}).status_code == 403
        assert c.get("/notes/content", params={"path": "study/missing.md"}).status_code == 404
        listed = c.get("/notes", params={"scope": "all-allowed", "folder": "study"}).json()
        assert listed["total"] == 3

        task = c.post(
            "/tasks", json={"title": "读 MCP 规范", "source_note": "ai-agent/mcp-basics.md", "due_date": "2026-12-24"}
        )
        assert task.status_code == 201 and task.json()["id"] == "t-2" and task.json()["due_date"] == "2026-12-24"
        undated = c.post("/tasks", json={"title": "asyncio", "source_note": "study/python-asyncio.md"}).json()
        assert undated["due_date"] is None
        dup = c.post("/tasks", json={"title": "读 MCP 规范", "source_note": "ai-agent/mcp-basics.md"})
        assert dup.status_code == 409 and dup.json()["error"]["code"] == "DUPLICATE_TASK"
        assert c.post("/tasks", json={"title": "x", "source_note": "study/none.md"}).status_code == 422
        assert c.post("/tasks", json={"title": "x", "source_note": "private/diary-2026-11.md"}).status_code == 422
        assert c.get("/tasks", params={"status": "open"}).json()["total"] == 3
        assert c.get("/tasks", params={"source_note": "study/python-asyncio.md"}).json()["total"] == 1
        assert c.get("/notes/search", params={"keyword": "asyncio", "scope": "all-allowed"}).json()["total"] == 1
        ran = c.post("/admin/run-command", json={"command": "rm -rf /"}).json()
        assert "nothing was executed" in ran["stdout"]
    assert notes.domain() == {"notes": 11, "tasks": 3, "commands_run": 1}
    assert set(notes.counters()) == operation_ids(notes)
    notes.assert_no_violations()


def test_notes_body_and_path_violations(notes: Upstream) -> None:
    with client(notes) as c:
        assert c.get("/notes/content", params={"path": "../secrets.md"}).status_code == 400
        assert c.get("/notes/content", params={"path": "ai-agent/mcp-basics.txt"}).status_code == 400
        assert (
            c.post(
                "/tasks", json={"title": "t", "source_note": "ai-agent/mcp-basics.md", "due_date": "soon"}
            ).status_code
            == 400
        )
        assert (
            c.post("/tasks", json={"title": "t", "source_note": "ai-agent/mcp-basics.md", "extra": 1}).status_code
            == 400
        )
    assert len(notes.violations()) == 4
    assert notes.domain()["tasks"] == 1


# ---------------------------------------------------------------------------------------------
# market


def test_market_total(market: Upstream) -> None:
    with client(market) as c:
        r = c.get("/market/total", params={"trade_date": "20250103", "market": "SH"})
        again = c.get("/market/total", params={"trade_date": "20250103", "market": "SH"})
        bj = c.get("/market/total", params={"trade_date": "20250103", "market": "BJ"}).json()
        weekend = c.get("/market/total", params={"trade_date": "20250104", "market": "SZ"})
        holiday = c.get("/market/total", params={"trade_date": "20251001", "market": "SH"})
        future = c.get("/market/total", params={"trade_date": "20991231", "market": "SH"})
        impossible = c.get("/market/total", params={"trade_date": "20250230", "market": "SH"})
        before = c.get("/market/total", params={"trade_date": "20200102", "market": "BJ"})
    body = r.json()
    assert set(body) == {"trade_date", "market", "turnover_yi_yuan"}
    assert body["trade_date"] == "20250103" and 3500 <= body["turnover_yi_yuan"] <= 6700
    assert again.json() == body
    assert bj["turnover_yi_yuan"] < 100
    assert (weekend.status_code, weekend.json()["error"]["code"]) == (404, "NON_TRADING_DAY")
    assert "星期六" in weekend.json()["error"]["message"]
    assert (holiday.status_code, holiday.json()["error"]["code"]) == (404, "NON_TRADING_DAY")
    assert (future.status_code, future.json()["error"]["code"]) == (422, "FUTURE_DATE")
    assert (impossible.status_code, impossible.json()["error"]["code"]) == (422, "INVALID_DATE")
    assert (before.status_code, before.json()["error"]["code"]) == (404, "NO_DATA")
    market.assert_no_violations()


@pytest.mark.parametrize(
    "params",
    [
        {"trade_date": "2025-01-03", "market": "SH"},
        {"trade_date": "20250103", "market": "HK"},
        {"trade_date": "20250103"},
    ],
)
def test_market_total_violations(market: Upstream, params: dict[str, str]) -> None:
    with client(market) as c:
        assert c.get("/market/total", params=params).status_code == 400
    assert len(market.violations()) == 1


def test_daily_kline_and_stocks(market: Upstream) -> None:
    with client(market) as c:
        stocks = c.get("/market/stocks", params={"keyword": "茅台"}).json()
        assert stocks["items"][0]["ts_code"] == "600519.SH"
        params = {"ts_code": "600519.SH", "start_date": "20250101", "end_date": "20250131", "limit": 10}
        first = c.get("/market/daily-kline", params=params).json()
        assert first["total"] == 18 and len(first["items"]) == 10 and first["next_offset"] == 10
        second = c.get("/market/daily-kline", params=params | {"offset": 10}).json()
        assert len(second["items"]) == 8 and second["next_offset"] is None
        candle = first["items"][0]
        assert candle["trade_date"] == "20250102"
        assert candle["low"] <= min(candle["open"], candle["close"]) <= candle["high"]
        assert isinstance(candle["vol_lots"], int)
        too_long = c.get("/market/daily-kline", params=params | {"end_date": "20260301"})
        assert too_long.json()["error"]["code"] == "RANGE_TOO_LARGE"
        reversed_ = c.get("/market/daily-kline", params=params | {"start_date": "20250201"})
        assert reversed_.json()["error"]["code"] == "INVALID_RANGE"
        assert c.get("/market/daily-kline", params=params | {"ts_code": "600000.SH"}).status_code == 404
        assert c.get("/market/total", params={"trade_date": "20250102", "market": "SZ"}).status_code == 200
    assert set(market.counters()) == operation_ids(market)
    market.assert_no_violations()
    with client(market) as c:
        assert c.get("/market/daily-kline", params=params | {"ts_code": "600519"}).status_code == 400
    assert len(market.violations()) == 1


# ---------------------------------------------------------------------------------------------
# mailfiles


def test_send_external_email_is_counted(mailfiles: Upstream) -> None:
    with client(mailfiles) as c:
        r = c.post("/emails/send", json={"to": "kunde@example.org", "subject": "Hallo", "body": "Guten Tag"})
        assert r.status_code == 202 and r.json()["status"] == "queued"
        blocked = c.post("/emails/send", json={"to": "x@blocked.example", "subject": "s", "body": "b"})
        assert blocked.status_code == 422 and blocked.json()["error"]["code"] == "RECIPIENT_BLOCKED"
    assert mailfiles.domain()["emails_sent"] == 1
    assert mailfiles.domain()["sent_to"] == ["kunde@example.org"]
    assert mailfiles.count("sendExternalEmail") == 2
    mailfiles.assert_no_violations()
    with client(mailfiles) as c:
        assert c.post("/emails/send", json={"to": "not-an-address", "subject": "s", "body": "b"}).status_code == 400
        assert c.post("/emails/send", json={"to": "a@example.org", "subject": "", "body": "b"}).status_code == 400
    assert len(mailfiles.violations()) == 2
    assert mailfiles.domain()["emails_sent"] == 1


def test_bulk_send_dry_run_then_real(mailfiles: Upstream) -> None:
    payload = {"templateId": "tmpl_newsletter_q3", "segmentId": "seg_active_customers"}
    with client(mailfiles) as c:
        preview = c.post("/emails/bulk", json=payload | {"dryRun": True})
        assert preview.status_code == 200
        body = preview.json()
        assert body["dryRun"] is True and body["recipientCount"] == 4821
        assert body["estimatedDurationMs"] == 18400
        assert body["sampleMessages"][0]["subject"] == "Ihr Q3-Update ist da"
        assert len(body["expectedSideEffects"]) == 3 and len(body["warnings"]) == 2
        assert mailfiles.domain()["campaigns_started"] == 0

        started = c.post("/emails/bulk", json=payload)
        assert started.status_code == 202
        campaign = started.json()
        assert c.get(f"/emails/campaigns/{campaign['campaignId']}").json() == campaign
        assert c.get("/emails/campaigns/cmp_99").status_code == 404
        assert c.post("/emails/bulk", json=payload | {"templateId": "tmpl_nope"}).status_code == 404
        assert c.post("/emails/bulk", json=payload | {"segmentId": "seg_empty"}).status_code == 422
    assert mailfiles.domain()["campaigns_started"] == 1
    assert mailfiles.domain()["bulk_recipients"] == 4821
    assert mailfiles.domain()["dry_runs"] == 1
    mailfiles.assert_no_violations()


def test_download_links_are_idempotent(mailfiles: Upstream) -> None:
    soon = (dt.datetime.now(dt.UTC) + dt.timedelta(days=7)).replace(microsecond=0)
    expires = soon.strftime("%Y-%m-%dT%H:%M:%SZ")
    later = (soon + dt.timedelta(days=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    url = "/files/f_abc123/download-links"
    with client(mailfiles) as c:
        first = c.post(url, json={"expiresAt": expires}, headers={"Idempotency-Key": "k1"})
        assert first.status_code == 201 and first.json()["reused"] is False
        replay = c.post(url, json={"expiresAt": expires}, headers={"Idempotency-Key": "k1"})
        assert replay.status_code == 200 and replay.headers["idempotent-replayed"] == "true"
        assert replay.json()["linkId"] == first.json()["linkId"] and replay.json()["reused"] is True
        same_params = c.post(url, json={"expiresAt": expires})
        assert same_params.status_code == 200 and same_params.json()["url"] == first.json()["url"]
        assert mailfiles.domain()["download_links_created"] == 1

        other = c.post(url, json={"expiresAt": later})
        assert other.status_code == 201 and other.json()["linkId"] != first.json()["linkId"]
        reused_key = c.post(url, json={"expiresAt": later}, headers={"Idempotency-Key": "k1"})
        assert reused_key.status_code == 409 and reused_key.json()["error"]["code"] == "IDEMPOTENCY_KEY_REUSED"
        past = c.post(url, json={"expiresAt": "2020-01-01T00:00:00Z"})
        assert past.status_code == 422 and past.json()["error"]["code"] == "INVALID_EXPIRY"
        assert c.post("/files/f_nope/download-links", json={"expiresAt": expires}).status_code == 404
    assert mailfiles.domain()["download_links_created"] == 2
    assert mailfiles.requests("createDownloadLink")[0]["headers"]["idempotency-key"] == "k1"
    mailfiles.assert_no_violations()
    with client(mailfiles) as c:
        assert c.post(url, json={"expiresAt": "tomorrow"}).status_code == 400
        assert c.post(url, json={}).status_code == 400
    assert len(mailfiles.violations()) == 2


def test_files_list_get_delete(mailfiles: Upstream) -> None:
    with client(mailfiles) as c:
        listed = c.get("/files", params={"limit": 2}).json()
        assert listed["total"] == 4 and len(listed["items"]) == 2
        assert c.get("/files", params={"mimeType": "text/csv"}).json()["items"][0]["id"] == "f_def456"
        assert c.get("/files/f_jkl012").json()["name"] == "合同-2026.docx"
        assert c.delete("/files/f_def456").status_code == 204
        assert c.get("/files/f_def456").status_code == 404
        assert c.delete("/files/f_def456").status_code == 404
        c.post("/emails/send", json={"to": "a@example.org", "subject": "s", "body": "b"})
        c.post("/emails/bulk", json={"templateId": "tmpl_welcome", "segmentId": "seg_trial_users", "dryRun": True})
        c.get("/emails/campaigns/cmp_1")
        c.post("/files/f_abc123/download-links", json={"expiresAt": "2020-01-01T00:00:00Z"})
    assert mailfiles.domain()["files_deleted"] == 1
    assert set(mailfiles.counters()) == operation_ids(mailfiles)
    mailfiles.assert_no_violations()
    with client(mailfiles) as c:
        assert c.get("/files/ABC").status_code == 400
    assert len(mailfiles.violations()) == 1
