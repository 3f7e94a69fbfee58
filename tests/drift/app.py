"""A real upstream (examples' `Api` machinery: routes from the spec, every request validated) whose
answers drift from its own description (`openapi.yaml` here) in the ways of issue 10 part 1.

`BODIES` maps each operationId to the exact JSON it answers, so a test can compare what the model
receives with what the upstream sent. Responses are not validated against the spec (they are
wrong on purpose); requests are, so a test still proves openapi2mcp sent what the spec allows.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.responses import Response

from examples._upstream import Api, Call, json_response

SPEC_PATH = Path(__file__).with_name("openapi.yaml")

EXACT: dict[str, Any] = {
    "id": "5f0c6b7e-8a51-4c8e-9a57-0c1f9f0b1a2d",
    "name": "first record",
    "status": "active",
    "count": 3,
    "ratio": 0.25,
    "hash_algorithm": "sha256",
    "created": "2026-01-15T09:30:00Z",
    "tags": ["a", "b"],
    "owner": {"login": "ada", "email": "ada@example.com"},
    "reviewer": None,
    "ident": 7,
}


def _with(**changes: Any) -> dict[str, Any]:
    out = copy.deepcopy(EXACT)
    out.update(changes)
    return out


def _without(*keys: str) -> dict[str, Any]:
    return {k: v for k, v in copy.deepcopy(EXACT).items() if k not in keys}


HTML = "<html><body><h1>Down for maintenance</h1></body></html>"

BODIES: dict[str, Any] = {
    "getExact": EXACT,
    "getNulls": _with(hash_algorithm=None, owner=None, ratio=None, tags=None),
    "getMissing": _without("name", "hash_algorithm"),
    "getExtra": _with(internal={"shard": 7}, etag='W/"1"'),
    "getEnum": _with(status="archived"),
    "getFormats": _with(id="not-a-uuid", created="yesterday", name="UPPER Case, and far too long for it",
                        owner={"login": "a", "email": "nobody"}),
    "getRanges": _with(count=1000, ratio=-2.5, tags=["a", "a", "a", "a", "a"]),
    "getStrings": _with(count="42", ratio="half", name=12345, created=1768469400),
    "getShapes": _with(tags={"first": "a"}, owner="ada"),
    "getNested": _with(reviewer={"login": 42}, ident={"login": 7, "email": None}),
    "listRecords": [EXACT, _with(id="rec-2", count="9")],
}

# listPage: five records, three of which drift
PAGE_ITEMS: list[dict[str, Any]] = [
    _with(id="p-0"),
    _with(id="p-1", count="7"),
    _without("name") | {"id": "p-2"},
    _with(id="p-3", tags={"x": 1}),
    _with(id="p-4", status="unknown-yet"),
]

api: Api[Any] = Api("drift", SPEC_PATH, lambda: _State())


class _State:
    def summary(self) -> dict[str, Any]:
        return {}


def _answer(operation: str) -> Any:
    async def handler(call: Call[Any]) -> Response:
        return json_response(BODIES[operation])

    return handler


for _operation in BODIES:
    api.operation(_operation)(_answer(_operation))


@api.operation("getHtml")
async def get_html(call: Call[Any]) -> Response:
    return Response(HTML, media_type="text/html")


@api.operation("listPage")
async def list_page(call: Call[Any]) -> Response:
    offset, limit = call.query.get("offset", 0), call.query.get("limit", 2)
    return json_response({"items": PAGE_ITEMS[offset : offset + limit], "total": len(PAGE_ITEMS)})


def create_app() -> Starlette:
    """A fresh server; its answers are wrong on purpose, so they are not checked against the spec."""
    return api.create_app(validate_responses=False)
