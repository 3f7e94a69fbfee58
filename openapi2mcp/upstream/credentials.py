"""Credentials obtained while serving: OAuth 2.0 client credentials, the caller's token, token exchange.

`upstream.auth` types whose `Authorization: Bearer` value is not known at start-up:

* `oauth2_client_credentials` (RFC 6749 4.4): one token for this server, fetched from the token
  endpoint on first use and kept until shortly before it expires (`expires_in`, and a JWT's own
  `exp` when it is sooner). Concurrent calls wait for one request (a lock per cache key: single
  flight); a 401 from the upstream drops the token it was sent with (`invalidate`), and client.py
  sends the request once more with a new one when repeating it is safe.
* `forward`: the MCP caller's own validated bearer token (`CALLER_TOKEN`, set by the runtime
  around each call), sent only when its `aud` holds the configured `audience`.
* `token_exchange` (RFC 8693): the caller's token exchanged for one for the upstream, cached per
  caller token and audience until it (or the caller's token) expires; at most `MAX_CACHED` entries.

A token endpoint that refuses is UNAUTHORIZED with its `error` and `error_description`; one that
cannot be reached, times out or answers 429/5xx is UPSTREAM_UNAVAILABLE (retryable). Every access
token is registered with the Redactor (`remember`) before it is used, so it never comes back out.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import math
import time
from collections import OrderedDict
from collections.abc import Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Final, Protocol
from urllib.parse import quote_plus

import anyio
import httpx2

from openapi2mcp.errors import ErrorCode, ToolFailure
from openapi2mcp.manifest import RetrySpec
from openapi2mcp.upstream import retry
from openapi2mcp.upstream.response import UpstreamResponse, clip_quote, loads
from openapi2mcp.upstream.secrets import Redactor

GRANT_CLIENT_CREDENTIALS: Final = "client_credentials"
GRANT_TOKEN_EXCHANGE: Final = "urn:ietf:params:oauth:grant-type:token-exchange"
ACCESS_TOKEN_TYPE: Final = "urn:ietf:params:oauth:token-type:access_token"
DEFAULT_LIFETIME: Final = 300.0  # seconds a token without expires_in or exp is kept (a 401 renews it sooner)
MAX_MARGIN: Final = 30.0  # a token is renewed this long before it expires, or 10% of its life when shorter
MIN_MARGIN: Final = 0.5  # ... but at least this long before (a quarter of a life shorter than 2 s)
MAX_CACHED: Final = 200  # exchanged tokens kept (the least recently used dropped); within Redactor's REMEMBERED
MAX_TOKEN_RESPONSE: Final = 1_000_000  # bytes of a token endpoint's answer that are read
_TOKEN_RETRIES: Final = RetrySpec(max_attempts=2, backoff=0.2, max_backoff=1.0)


@dataclass(frozen=True)
class CallerToken:
    """The MCP caller's verified bearer token, as the runtime hands it to the upstream side."""

    token: str
    subject: str
    audience: tuple[str, ...] = ()
    expires_at: float | None = None  # epoch seconds (the JWT's exp)


# Set by the runtime around one tool call or resource read when the caller sent a verified token.
CALLER_TOKEN: ContextVar[CallerToken | None] = ContextVar("openapi2mcp_caller_token", default=None)


@dataclass(frozen=True)
class OAuthSettings:
    """The token endpoint side of `upstream.auth`, templates expanded from the environment."""

    kind: str  # oauth2_client_credentials | forward | token_exchange
    token_url: str = ""
    client_id: str = ""
    client_secret: str = ""
    scopes: tuple[str, ...] = ()
    audience: str | None = None
    resource: str | None = None
    auth_method: str = "client_secret_basic"


class Credential(Protocol):
    async def token(self, client: httpx2.AsyncClient) -> str: ...
    def invalidate(self, token: str) -> bool: ...


@dataclass
class _Entry:
    token: str
    renew_at: float  # time.monotonic()


@dataclass
class _Cache:
    """Tokens by key, each renewed by one request at a time (single flight per key), bounded."""

    size: int
    entries: OrderedDict[str, _Entry] = field(default_factory=OrderedDict)
    locks: dict[str, anyio.Lock] = field(default_factory=dict)

    def fresh(self, key: str, redactor: Redactor) -> str | None:
        entry = self.entries.get(key)
        if entry is None or time.monotonic() >= entry.renew_at:
            return None
        self.entries.move_to_end(key)
        redactor.remember(entry.token)  # still in use: kept among the redacted secrets
        return entry.token

    def lock(self, key: str) -> anyio.Lock:
        found = self.locks.get(key)
        if found is None:
            found = self.locks[key] = anyio.Lock()
        return found

    def put(self, key: str, entry: _Entry) -> None:
        self.entries[key] = entry
        self.entries.move_to_end(key)
        while len(self.entries) > self.size:
            old, _ = self.entries.popitem(last=False)
            lock = self.locks.get(old)
            if lock is not None and not lock.locked():
                del self.locks[old]

    def drop(self, key: str, token: str) -> bool:
        """Forget `token` under `key` unless a newer one replaced it already (True: it was dropped)."""
        entry = self.entries.get(key)
        if entry is None or entry.token != token:
            return False
        del self.entries[key]
        return True


class TokenEndpoint:
    """Sends token requests (client authentication, form, retries) and reads the answers."""

    def __init__(self, settings: OAuthSettings, redactor: Redactor, retries: RetrySpec | None) -> None:
        self.settings = settings
        self.redactor = redactor
        self.retries = retries or _TOKEN_RETRIES

    async def request(self, client: httpx2.AsyncClient, form: dict[str, str]) -> tuple[str, float]:
        """(access token, seconds until it must be renewed) for `form`; ToolFailure when there is none."""
        s = self.settings
        headers = {"Accept": "application/json"}
        form = {k: v for k, v in form.items() if v}
        if s.auth_method == "client_secret_post":
            form.update(client_id=s.client_id, client_secret=s.client_secret)
        else:  # RFC 6749 2.3.1: each part form-encoded, then Basic
            pair = f"{quote_plus(s.client_id)}:{quote_plus(s.client_secret)}"
            headers["Authorization"] = "Basic " + base64.b64encode(pair.encode()).decode()

        async def attempt() -> UpstreamResponse:
            started = time.monotonic()
            try:
                response = await client.send(client.build_request("POST", s.token_url, data=form, headers=headers),
                                             stream=True)
                try:
                    body = await _read_capped(response)
                finally:
                    await response.aclose()
            except httpx2.TransportError as e:
                raise self._unavailable(f"could not be reached ({type(e).__name__})") from None
            if body is None:
                raise ToolFailure.of(ErrorCode.UPSTREAM_INVALID_RESPONSE,
                                     f"{self._where()} answered with more than {MAX_TOKEN_RESPONSE} bytes; not read",
                                     status=response.status_code)
            return UpstreamResponse(
                status=response.status_code, reason=response.reason_phrase, headers=response.headers,
                body=body, method="POST", url=self.redactor.text(s.token_url), operation="token",
                elapsed_ms=int((time.monotonic() - started) * 1000),
            )

        resp = await retry.send(attempt, retry.plan("POST", keyed=True, tool=None, upstream=self.retries))
        return self._read(resp)

    def _where(self) -> str:
        return f"the token endpoint {clip_quote(self.redactor.text(self.settings.token_url), 120)}"

    def _unavailable(self, what: str, status: int | None = None) -> ToolFailure:
        return ToolFailure.of(ErrorCode.UPSTREAM_UNAVAILABLE,
                              f"{self._where()} {what}; nothing was sent to the upstream; retry later",
                              retryable=True, status=status)

    def _read(self, resp: UpstreamResponse) -> tuple[str, float]:
        try:
            body = loads(resp.body) if resp.body else None
        except Exception:
            body = None
        said = _oauth_error(body) or clip_quote(self.redactor.text(resp.body.decode("utf-8", "replace")), 200)
        said = self.redactor.text(said)
        if resp.status == 429 or resp.status >= 500:
            raise self._unavailable(f"answered {resp.status}" + (f": {said}" if said else ""), resp.status)
        if not 200 <= resp.status < 300:
            raise ToolFailure.of(
                ErrorCode.UNAUTHORIZED,
                f"{self._where()} refused to issue a token (HTTP {resp.status}" + (f": {said})" if said else ")")
                + "; check upstream.auth (client_id, client_secret, scopes, audience) and the variables it names",
                status=resp.status,
            )
        token = body.get("access_token") if isinstance(body, dict) else None
        kind = str(body.get("token_type", "bearer")) if isinstance(body, dict) else ""
        if not isinstance(token, str) or not token.strip() or kind.lower() != "bearer":
            raise ToolFailure.of(
                ErrorCode.UPSTREAM_INVALID_RESPONSE,
                f"{self._where()} answered {resp.status} without a bearer access_token"
                + (f" (token_type {clip_quote(self.redactor.text(kind), 40)!r})" if token else ""),
                status=resp.status,
            )
        token = token.strip()
        self.redactor.remember(token)
        assert isinstance(body, dict)
        return token, _lifetime(body.get("expires_in"), token)


async def _read_capped(response: httpx2.Response) -> bytes | None:
    """The body, or None past MAX_TOKEN_RESPONSE (a token answer is a few KB; never buffer a flood)."""
    chunks: list[bytes] = []
    total = 0
    async for chunk in response.aiter_bytes():
        total += len(chunk)
        if total > MAX_TOKEN_RESPONSE:
            return None
        chunks.append(chunk)
    return b"".join(chunks)


def _oauth_error(body: Any) -> str:
    """`error: error_description` of an RFC 6749 5.2 error answer ("" when it is not one)."""
    if not isinstance(body, dict) or not isinstance(body.get("error"), str):
        return ""
    description = body.get("error_description")
    text = body["error"] + (f": {description}" if isinstance(description, str) and description else "")
    return clip_quote(text, 300)


def _lifetime(expires_in: Any, token: str) -> float:
    """Seconds from now to renew the token at: its life (expires_in, or the JWT's exp when sooner)
    less a margin (10% of it, at most MAX_MARGIN, at least MIN_MARGIN)."""
    life = float(expires_in) if isinstance(expires_in, int | float) and not isinstance(expires_in, bool) \
        and math.isfinite(expires_in) and expires_in > 0 else None
    exp = jwt_claims(token).get("exp")
    if isinstance(exp, int | float) and not isinstance(exp, bool) and math.isfinite(exp):
        left = float(exp) - time.time()
        life = left if life is None else min(life, left)
    if life is None:
        life = DEFAULT_LIFETIME
    # 10% of its life (at most MAX_MARGIN), and at least half a second (a quarter of a shorter life):
    # a request that took the token just before is still answered before the token expires
    return max(0.0, life - min(MAX_MARGIN, max(life * 0.1, min(MIN_MARGIN, life * 0.25))))


def jwt_claims(token: str) -> Mapping[str, Any]:
    """The claims of a JWT, unverified ({} when `token` is not one): only its expiry is read."""
    parts = token.split(".")
    if len(parts) != 3:
        return {}
    try:
        data = json.loads(base64.urlsafe_b64decode(parts[1] + "=" * (-len(parts[1]) % 4)))
    except (ValueError, binascii.Error):
        return {}
    return data if isinstance(data, dict) else {}


class ClientCredentials:
    """`oauth2_client_credentials`: this server's own token, one request per expiry."""

    def __init__(self, endpoint: TokenEndpoint) -> None:
        self.endpoint = endpoint
        self.cache = _Cache(size=1)

    async def token(self, client: httpx2.AsyncClient) -> str:
        found = self.cache.fresh("", self.endpoint.redactor)
        if found is not None:
            return found
        async with self.cache.lock(""):
            found = self.cache.fresh("", self.endpoint.redactor)  # another call renewed it while this one waited
            if found is not None:
                return found
            s = self.endpoint.settings
            token, life = await self.endpoint.request(client, {
                "grant_type": GRANT_CLIENT_CREDENTIALS, "scope": " ".join(s.scopes),
                "audience": s.audience or "", "resource": s.resource or "",
            })
            self.cache.put("", _Entry(token, time.monotonic() + life))
            return token

    def invalidate(self, token: str) -> bool:
        return self.cache.drop("", token)


def _caller(needed: str) -> CallerToken:
    caller = CALLER_TOKEN.get()
    if caller is None:
        raise ToolFailure.of(
            ErrorCode.UNAUTHORIZED,
            f"upstream.auth is {needed}: the upstream is called with the MCP caller's bearer token, and this "
            "call has none (a caller authenticated by a JWT over HTTP is needed; stdio and static tokens have none)",
        )
    return caller


class Forward:
    """`forward`: the caller's validated bearer token, when its audience includes `audience`."""

    def __init__(self, settings: OAuthSettings, redactor: Redactor) -> None:
        self.settings = settings
        self.redactor = redactor

    async def token(self, client: httpx2.AsyncClient) -> str:
        caller = _caller("forward")
        wanted = self.settings.audience
        if wanted not in caller.audience:
            raise ToolFailure.of(
                ErrorCode.UNAUTHORIZED,
                f"the caller's token is not for the upstream: its audience ({', '.join(caller.audience) or 'none'}) "
                f"does not include {wanted!r}, so it is not forwarded; ask the authorization server for a token "
                "with that audience too, or use upstream.auth type token_exchange",
            )
        self.redactor.remember(caller.token)
        return caller.token

    def invalidate(self, token: str) -> bool:
        return False  # the caller's token is the caller's: nothing here can renew it


class TokenExchange:
    """`token_exchange`: the caller's token exchanged (RFC 8693) for one for the upstream's audience."""

    def __init__(self, endpoint: TokenEndpoint) -> None:
        self.endpoint = endpoint
        self.cache = _Cache(size=MAX_CACHED)

    def _key(self, caller: CallerToken) -> str:
        s = self.endpoint.settings
        # the caller's token itself (a new token of the same subject may carry other scopes), and the audience
        return hashlib.sha256(f"{caller.token}\0{s.audience}\0{s.resource}".encode()).hexdigest()

    async def token(self, client: httpx2.AsyncClient) -> str:
        caller = _caller("token_exchange")
        self.endpoint.redactor.remember(caller.token)
        key = self._key(caller)
        found = self.cache.fresh(key, self.endpoint.redactor)
        if found is not None:
            return found
        async with self.cache.lock(key):
            found = self.cache.fresh(key, self.endpoint.redactor)
            if found is not None:
                return found
            s = self.endpoint.settings
            token, life = await self.endpoint.request(client, {
                "grant_type": GRANT_TOKEN_EXCHANGE, "subject_token": caller.token,
                "subject_token_type": ACCESS_TOKEN_TYPE, "scope": " ".join(s.scopes),
                "audience": s.audience or "", "resource": s.resource or "",
            })
            if caller.expires_at is not None:  # never past the caller's own token
                life = min(life, caller.expires_at - time.time())
            self.cache.put(key, _Entry(token, time.monotonic() + life))
            return token

    def invalidate(self, token: str) -> bool:
        caller = CALLER_TOKEN.get()
        return caller is not None and self.cache.drop(self._key(caller), token)


def credential(settings: OAuthSettings | None, redactor: Redactor, retries: RetrySpec | None) -> Credential | None:
    """The credential of `upstream.auth` obtained while serving (None: a static one, or none)."""
    if settings is None:
        return None
    if settings.kind == "forward":
        return Forward(settings, redactor)
    endpoint = TokenEndpoint(settings, redactor, retries)
    return TokenExchange(endpoint) if settings.kind == "token_exchange" else ClientCredentials(endpoint)
