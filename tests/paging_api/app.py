"""The paging-styles API (openapi.yaml beside this file), served under /v1 with the examples' machinery.

Every request is recorded and validated against the spec by openapi-core (examples/_upstream.py);
a request the spec rejects is answered 400 and recorded as a violation, so a test that ends with
`up.assert_no_violations()` proves every page was asked for exactly as the spec says.

    with serve() as up:         # an examples.Upstream on a free port of 127.0.0.1
        up.base_url + "/v1"     # the API's base URL (the spec's servers entry)
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any
from urllib.parse import quote

from starlette.responses import Response
from starlette.types import ASGIApp, Receive, Scope, Send

from examples._upstream import Api, ApiError, Call, Upstream, json_response

SPEC_PATH = Path(__file__).with_name("openapi.yaml")
PREFIX = "/v1"

RECORDS: list[dict[str, Any]] = [
    {"id": f"r-{i:02d}", "title": f"Record {i} {'alpha' if i % 3 == 0 else 'beta'}",
     "status": "open" if i % 4 else "closed"}
    for i in range(1, 24)
]
FLOWS: list[dict[str, Any]] = [
    {"id": f"f-{i:02d}", "name": name, "tags": tags}
    for i, (name, tags) in enumerate([
        ("etl-daily", ["prod", "etl"]), ("etl-hourly", ["prod", "etl"]), ("marvin", ["ai"]),
        ("sad-Marvin", ["ai", "test"]), ("marvin-robot", ["ai", "prod"]), ("report", ["prod"]),
        ("cleanup", []), ("backup", ["prod", "ops"]), ("etl-weekly", ["etl"]), ("sync-crm", ["prod", "crm"]),
        ("etl-backfill", ["etl", "ops"]), ("notify", ["ops"]), ("etl-monthly", ["prod", "etl"]),
    ], 1)
]


class State:
    def summary(self) -> dict[str, Any]:
        return {"records": len(RECORDS), "flows": len(FLOWS)}


api: Api[State] = Api("paging", SPEC_PATH, State)


def _token(data: dict[str, Any]) -> str:
    """Standard base64 (with + / =), so the next URL must reach the API exactly as written."""
    return base64.b64encode(json.dumps(data, separators=(",", ":")).encode()).decode()


def _untoken(token: str | None, **expected: Any) -> int:
    if token is None:
        return 0
    try:
        data = json.loads(base64.b64decode(token, validate=True))
        offset = data["o"]
        assert isinstance(offset, int) and offset >= 0
    except Exception:
        raise ApiError(400, "INVALID_TOKEN", f"the token is malformed: {token[:40]!r}", field="_token") from None
    for key, value in expected.items():
        if data.get(key) != value:
            raise ApiError(400, "INVALID_TOKEN", f"the token was issued for another {key}", field="_token")
    return offset


def _records(status: str | None = None, text: str | None = None) -> list[dict[str, Any]]:
    return [r for r in RECORDS
            if (status is None or r["status"] == status) and (text is None or text.casefold() in r["title"].casefold())]


@api.operation("listRecords")
async def list_records(call: Call[State]) -> Response:
    q = call.query
    status, limit, pad, detail = q.get("status"), q["_limit"], q.get("pad", 0), q.get("detail", 0)
    offset = _untoken(q.get("_token"), s=status)
    rows = _records(status)
    headers = {"Total-Records": str(len(rows))}
    end = offset + limit
    if end < len(rows):
        token = _token({"o": end, "s": status, "p": "x" * pad})
        url = f"{call.base_url}{PREFIX}/records?_limit={limit}&_token={quote(token, safe='')}"
        url += f"&status={status}" if status else ""
        url += f"&detail={detail}" if detail else ""
        headers["Next-Page"] = url
    page = [{**r, "note": "n" * detail} if detail else r for r in rows[offset:end]]
    return json_response({"data": page}, headers=headers)


@api.operation("listRecordsOData")
async def list_records_odata(call: Call[State]) -> Response:
    top = call.query.get("$top", 10)
    skip = int(call.query.get("$skiptoken", "0"))
    body: dict[str, Any] = {"value": RECORDS[skip:skip + top], "@odata.count": len(RECORDS)}
    if skip + top < len(RECORDS):
        body["@odata.nextLink"] = f"{call.base_url}{PREFIX}/odata/records?$top={top}&$skiptoken={skip + top}"
    return json_response(body)


@api.operation("listRecordsRelative")
async def list_records_relative(call: Call[State]) -> Response:
    q = call.query
    page, per_page, form = q["page"], q["per_page"], q["form"]
    start = (page - 1) * per_page
    query = f"page={page + 1}&per_page={per_page}&form={form}"
    nxt = None
    if start + per_page < len(RECORDS):
        nxt = {
            "absolute": f"{call.base_url}{PREFIX}/relative/records?{query}",
            "path": f"{PREFIX}/relative/records?{query}",
            "query": f"?{query}",
            "segment": f"records?{query}",
        }[form]
    return json_response({"results": RECORDS[start:start + per_page], "meta": {"next_url": nxt}})


@api.operation("filterFlows")
async def filter_flows(call: Call[State]) -> Response:
    body = call.body or {}
    flt = body.get("flows") or {}
    name = flt.get("name") or {}
    tags = (flt.get("tags") or {}).get("all_")
    rows = [f for f in FLOWS
            if (name.get("like_") is None or name["like_"].casefold() in f["name"].casefold())
            and (name.get("any_") is None or f["name"] in name["any_"])
            and (tags is None or set(tags) <= set(f["tags"]))]
    rows.sort(key=lambda f: f["name"], reverse=body.get("sort") == "NAME_DESC")
    offset, limit = body.get("offset", 0), body.get("limit") or 20
    return json_response(rows[offset:offset + limit])


@api.operation("searchRecords")
async def search_records(call: Call[State]) -> Response:
    body = call.body
    query = body.get("query") or {}
    page = body["page"]
    rows = _records(query.get("status"), query.get("text"))
    offset = int(base64.urlsafe_b64decode(page["after"]).decode()) if "after" in page else 0
    end = offset + page["size"]
    nxt = base64.urlsafe_b64encode(str(end).encode()).decode() if end < len(rows) else None
    return json_response({"hits": rows[offset:end], "page": {"next": nxt}})


class _UnderV1:
    """Serve the spec's paths under /v1 (the API's base path): /v1/records is the spec's /records."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            raw = scope.get("raw_path") or scope["path"].encode()
            if raw.startswith(PREFIX.encode() + b"/"):
                scope = {**scope, "path": scope["path"][len(PREFIX):], "raw_path": raw[len(PREFIX):]}
            elif not raw.startswith((b"/__admin/", b"/openapi.")):
                await json_response({"error": {"code": "NOT_FOUND", "message": "outside /v1"}}, 404)(
                    scope, receive, send)
                return
        await self.app(scope, receive, send)


def serve(auth: str | None = None) -> Upstream:
    """The API on a free port of 127.0.0.1 (a thread of this process); stop it with `with` or `.stop()`.

    `auth`: the credential it requires, e.g. "bearer:TOKEN" (see examples.AuthRequirement).
    """
    app = _UnderV1(api.create_app(auth=auth))
    return Upstream.serve(app, name="paging", spec_path=SPEC_PATH)  # type: ignore[arg-type]
