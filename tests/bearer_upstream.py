"""A REST API that really checks bearer tokens: JWTs verified against an authorization server's JWKS.

    python -m tests.bearer_upstream PORT ISSUER JWKS_URL AUDIENCE[,AUDIENCE...]

Started as a subprocess by tests/test_upstream_credentials.py, on 127.0.0.1. Every request needs
`Authorization: Bearer <JWT>` signed by the issuer's keys (PyJWT's PyJWKClient), with `iss`, an
`aud` among the accepted ones, and an unexpired `exp` (no leeway): anything else is 401 with
`WWW-Authenticate`. The data is per token subject (`sub`): each caller sees its own items.

    GET  /items            the subject's items: {"owner": sub, "items": [...]}
    GET  /whoami           the subject and the Authorization header it was sent (an echo: redaction)
    POST /items            add one (not idempotent)
    PUT  /items/{id}       put one (idempotent)
    POST /test/revoke      {"jti": ...}: that token is refused from now on (the 401-renewal test)
    GET  /test/stats       per token (jti): uses, subject, audience; refused requests and why
    GET  /healthz
"""

from __future__ import annotations

import sys
import threading
from collections import Counter
from typing import Any

import jwt
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route


def app(issuer: str, jwks_url: str, audiences: list[str]) -> Starlette:
    keys = jwt.PyJWKClient(jwks_url, cache_jwk_set=True, lifespan=300)
    lock = threading.Lock()
    items: dict[str, list[dict[str, Any]]] = {}
    uses: Counter[str] = Counter()
    tokens: dict[str, dict[str, Any]] = {}
    refused: list[str] = []
    revoked: set[str] = set()
    known: dict[Any, Any] = {}  # signing keys by kid (the JWKS is read once per new kid)

    def caller(request: Request) -> dict[str, Any] | JSONResponse:
        scheme, _, token = request.headers.get("authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not token:
            return _refuse(refused, lock, "no bearer token")
        try:
            kid = jwt.get_unverified_header(token).get("kid")
            key = known.get(kid) or known.setdefault(kid, keys.get_signing_key_from_jwt(token))
            claims: dict[str, Any] = jwt.decode(token, key, algorithms=["RS256"], issuer=issuer, audience=audiences,
                                                options={"require": ["exp", "iss", "aud", "sub", "jti"]})
        except jwt.PyJWTError as e:
            return _refuse(refused, lock, f"{type(e).__name__}: {e}")
        if claims["jti"] in revoked:
            return _refuse(refused, lock, "the token was revoked")
        with lock:
            uses[claims["jti"]] += 1
            tokens[claims["jti"]] = {"sub": claims["sub"], "aud": claims["aud"], "exp": claims["exp"]}
        return claims

    async def list_items(request: Request) -> JSONResponse:
        who = caller(request)
        if isinstance(who, JSONResponse):
            return who
        return JSONResponse({"owner": who["sub"], "items": items.get(who["sub"], [])})

    async def whoami(request: Request) -> JSONResponse:
        who = caller(request)
        if isinstance(who, JSONResponse):
            return who
        return JSONResponse({"sub": who["sub"], "authorization": request.headers["authorization"]})

    async def add_item(request: Request) -> JSONResponse:
        who = caller(request)
        if isinstance(who, JSONResponse):
            return who
        body = await request.json()
        item = {"id": str(len(items.get(who["sub"], [])) + 1), "name": str(body.get("name", ""))}
        items.setdefault(who["sub"], []).append(item)
        return JSONResponse(item, status_code=201)

    async def put_item(request: Request) -> JSONResponse:
        who = caller(request)
        if isinstance(who, JSONResponse):
            return who
        body = await request.json()
        item = {"id": request.path_params["id"], "name": str(body.get("name", ""))}
        mine = items.setdefault(who["sub"], [])
        mine[:] = [i for i in mine if i["id"] != item["id"]] + [item]
        return JSONResponse(item)

    async def revoke(request: Request) -> JSONResponse:
        revoked.add(str((await request.json())["jti"]))
        return JSONResponse({"revoked": len(revoked)})

    async def stats(_: Request) -> JSONResponse:
        with lock:
            return JSONResponse({"uses": dict(uses), "tokens": tokens, "refused": list(refused)})

    async def healthz(_: Request) -> JSONResponse:
        return JSONResponse({"ok": True})

    return Starlette(routes=[
        Route("/items", list_items, methods=["GET"]), Route("/items", add_item, methods=["POST"]),
        Route("/whoami", whoami), Route("/items/{id}", put_item, methods=["PUT"]),
        Route("/test/revoke", revoke, methods=["POST"]),
        Route("/test/stats", stats), Route("/healthz", healthz),
    ])


def _refuse(refused: list[str], lock: threading.Lock, why: str) -> JSONResponse:
    with lock:
        refused.append(why)
    return JSONResponse({"error": "invalid_token", "error_description": why}, status_code=401,
                        headers={"WWW-Authenticate": 'Bearer error="invalid_token"'})


if __name__ == "__main__":
    port, issuer, jwks_url, audiences = sys.argv[1:5]
    uvicorn.run(app(issuer, jwks_url, audiences.split(",")), host="127.0.0.1", port=int(port), log_level="warning")
