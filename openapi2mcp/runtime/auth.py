"""MCP-side auth for the Streamable HTTP transport: who may call, with which scopes.

Two ways to hand out bearer tokens (both may be configured at once; static tokens are tried first):

* **static tokens**, for small setups: `--auth-tokens FILE` / `$OPENAPI2MCP_AUTH_TOKENS_FILE` (YAML or
  JSON mapping `token -> {subject, scopes}`, or one token per line = every scope) and
  `$OPENAPI2MCP_AUTH_TOKENS` (comma-separated `token` or `token:scope1 scope2`). Tokens have 16+
  characters, are compared in constant time (against SHA-256 digests, every entry every time) and
  are never logged.
* **JWTs** from an OAuth authorization server: `--jwks-url URL --issuer ISS --audience AUD`.
  Signatures are checked with the server's keys (PyJWT's `PyJWKClient`: the key set is cached for
  5 minutes, an unknown `kid` refetches it, at most once per cooldown), RS256 / ES256 / EdDSA only; `exp`,
  `iss`, `aud` and `sub` are required. Scopes come from `scope` (space-separated) or `scp`.

The SDK's pieces do the standard parts: `TokenVerifier` (the protocol both verifiers implement),
`BearerAuthBackend` + Starlette's `AuthenticationMiddleware` (scope["user"], which also binds an MCP
session to the credential that opened it), `AuthContextMiddleware`, and the RFC 9728
`ProtectedResourceMetadata` model. `AuthGate` (below) replaces the SDK's `RequireAuthMiddleware`
because two things need more than it does: the resource URL may come from each request (one
build serves any host name), and a `tools/call` of a step-up tool must be answered with an HTTP
403 `insufficient_scope` challenge, which needs a look at the JSON-RPC body before the MCP app
sees it.

Unauthenticated requests get 401 with `WWW-Authenticate: Bearer resource_metadata="<PRM URL>"`;
`/healthz` and the metadata document (`/.well-known/oauth-protected-resource[/mcp]`) stay open.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping, MutableMapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final
from urllib.parse import urlsplit

import anyio.to_thread
from mcp.server.auth.middleware.auth_context import AuthContextMiddleware
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser, BearerAuthBackend
from mcp.server.auth.provider import AccessToken, TokenVerifier
from mcp.shared.auth import ProtectedResourceMetadata
from starlette.datastructures import URL
from starlette.middleware import Middleware
from starlette.middleware.authentication import AuthenticationMiddleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from openapi2mcp.manifest import parse_scopes
from openapi2mcp.runtime.access import Caller, caller_of_token, token_subject
from openapi2mcp.runtime.options import AuthOptions, is_loopback
from openapi2mcp.upstream import ConfigError

log = logging.getLogger("openapi2mcp.auth")

AUTH_TOKENS_VAR: Final = "OPENAPI2MCP_AUTH_TOKENS"
AUTH_TOKENS_FILE_VAR: Final = "OPENAPI2MCP_AUTH_TOKENS_FILE"
NO_AUTH_VAR: Final = "OPENAPI2MCP_NO_AUTH"
MIN_TOKEN_CHARS: Final = 16
JWT_ALGORITHMS: Final = ("RS256", "ES256", "EdDSA")
JWT_LEEWAY: Final = 30.0  # seconds of clock skew accepted on exp / nbf / iat
PRM_PREFIX: Final = "/.well-known/oauth-protected-resource"
MAX_PEEK_BYTES: Final = 4 * 1024 * 1024  # the SDK's own request body limit; larger bodies are its to refuse

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


# ============================================================================ tokens


class GrantedToken(AccessToken):
    """An `AccessToken` that may stand for every scope (static tokens given without scopes)."""

    all_scopes: bool = False


@dataclass(frozen=True)
class TokenGrant:
    """What one static token allows: a subject (for logs, limits and session binding) and scopes."""

    subject: str
    scopes: frozenset[str] = frozenset()
    all_scopes: bool = False


class StaticTokenVerifier:
    """`TokenVerifier` over a fixed set of tokens; only their SHA-256 digests are kept."""

    def __init__(self, grants: Mapping[str, TokenGrant]) -> None:
        self._entries = [(hashlib.sha256(t.encode()).digest(), g) for t, g in grants.items()]

    def __len__(self) -> int:
        return len(self._entries)

    async def verify_token(self, token: str) -> AccessToken | None:
        digest = hashlib.sha256(token.encode()).digest()
        found: TokenGrant | None = None
        for candidate, grant in self._entries:  # every entry, every time: timing does not tell which matched
            if hmac.compare_digest(digest, candidate) and found is None:
                found = grant
        if found is None:
            return None
        return GrantedToken(token="***", client_id=found.subject, subject=found.subject,
                            scopes=sorted(found.scopes), all_scopes=found.all_scopes)


def _grant_for_entry(token: str, value: Any, where: str) -> TokenGrant:
    if isinstance(value, str | list) or value is None:
        value = {"scopes": value}
    if not isinstance(value, dict):
        raise ConfigError(f"{where}: expected {{subject, scopes}} or a list of scopes")
    unknown = sorted(set(value) - {"subject", "scopes"})
    if unknown:
        raise ConfigError(f"{where}: unknown key(s) {', '.join(unknown)} (allowed: subject, scopes)")
    if "scopes" not in value or value["scopes"] is None:
        raise ConfigError(f"{where}: `scopes` is required (a list of scopes, or \"*\" for every scope)")
    raw = value["scopes"]
    if not (isinstance(raw, str) or (isinstance(raw, list) and all(isinstance(s, str) for s in raw))):
        raise ConfigError(f"{where}: `scopes` must be a list of strings or a space-separated string")
    try:
        scopes = parse_scopes(raw)  # [] and "" are no scope at all; only "*" is every scope
    except ValueError as e:
        raise ConfigError(f"{where}: {e}") from None
    subject = value.get("subject")
    if subject is not None and not isinstance(subject, str):
        raise ConfigError(f"{where}: `subject` must be a string")
    return TokenGrant(subject=subject or token_subject(token), scopes=scopes or frozenset(),
                      all_scopes=scopes is None)


def _parse_token_file(text: str, path: str) -> dict[str, TokenGrant]:
    import yaml  # only a token file needs it: loaded when one is read (start-up time of other deployments)

    try:
        data: Any = yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except yaml.YAMLError:
        data = None  # not YAML: one token per line
    grants: dict[str, TokenGrant] = {}
    if isinstance(data, dict):
        for n, (token, value) in enumerate(data.items(), 1):
            if not isinstance(token, str):
                raise ConfigError(f"{path}: entry {n}: the token must be a string (quote it)")
            grants[token] = _grant_for_entry(token, value, f"{path}: entry {n}")
        return grants
    if isinstance(data, list):
        lines = [str(t) for t in data]
    else:
        lines = [line.split("#", 1)[0].strip() for line in text.splitlines()]
    for token in [t for t in lines if t]:
        if token in grants:
            raise ConfigError(f"{path}: the same token is listed twice")
        grants[token] = TokenGrant(subject=token_subject(token), all_scopes=True)
    return grants


def load_static_tokens(environ: Mapping[str, str], tokens_file: str | None = None) -> dict[str, TokenGrant]:
    """The static tokens of `$OPENAPI2MCP_AUTH_TOKENS` and the token file (flag, else its variable).

    Environment entries are comma-separated: `token` (every scope) or `token:scope1 scope2`.
    Tokens come from the environment or a file, never from a flag (it would show in `ps`).
    """
    grants: dict[str, TokenGrant] = {}
    for n, entry in enumerate(e.strip() for e in environ.get(AUTH_TOKENS_VAR, "").split(",")):
        if not entry:
            continue
        token, sep, scopes = entry.partition(":")
        if not sep:  # bare tokens; whitespace separates them too (the interim format)
            for bare in token.split():
                grants[bare] = TokenGrant(subject=token_subject(bare), all_scopes=True)
            continue
        token = token.strip()
        if not token:
            raise ConfigError(f"{AUTH_TOKENS_VAR}: entry {n + 1} has scopes but no token")
        try:
            parsed = parse_scopes(scopes)  # `token:` is a token with no scope; `token:*` has every scope
        except ValueError as e:
            raise ConfigError(f"{AUTH_TOKENS_VAR}: entry {n + 1}: {e}") from None
        grants[token] = TokenGrant(subject=token_subject(token), scopes=parsed or frozenset(),
                                   all_scopes=parsed is None)
    path = tokens_file or environ.get(AUTH_TOKENS_FILE_VAR, "").strip()
    if path:
        try:
            text = Path(path).read_text(encoding="utf-8")
        except OSError as e:
            raise ConfigError(f"auth tokens file {path}: cannot read it: {e.strerror}") from None
        from_file = _parse_token_file(text, path)
        if not from_file:  # asked for auth and got none: never serve without it by accident
            raise ConfigError(f"auth tokens file {path}: no tokens in it")
        for token, grant in from_file.items():
            if token in grants:
                raise ConfigError(f"{path}: a token is also in {AUTH_TOKENS_VAR}")
            grants[token] = grant
    weak = [t for t in grants if len(t) < MIN_TOKEN_CHARS]
    if weak:
        raise ConfigError(f"auth tokens must have at least {MIN_TOKEN_CHARS} characters ({len(weak)} too short)")
    return grants


class JwtVerifier:
    """`TokenVerifier` for JWT access tokens signed by keys from a JWKS URL."""

    def __init__(
        self,
        jwks_url: str,
        *,
        issuer: str,
        audience: str | Sequence[str],
        algorithms: Sequence[str] = JWT_ALGORITHMS,
        leeway: float = JWT_LEEWAY,
        cache_seconds: float = 300,
        refetch_cooldown: float = 10,
        timeout: float = 10,
    ) -> None:
        import jwt  # PyJWT: only JWT deployments load it

        self.issuer = issuer
        self.audience = [audience] if isinstance(audience, str) else list(audience)
        self.algorithms = list(algorithms)
        self.leeway = leeway
        self._jwt = jwt
        # The key set is cached (`lifespan`), not each key forever (`cache_keys` is an LRU without
        # expiry): a key the IdP removes from its JWKS stops verifying within `cache_seconds`.
        self._jwks = jwt.PyJWKClient(jwks_url, cache_keys=False, cache_jwk_set=True, lifespan=cache_seconds,
                                     cooldown_duration=refetch_cooldown, timeout=timeout)

    async def verify_token(self, token: str) -> AccessToken | None:
        jwt = self._jwt
        try:
            alg = jwt.get_unverified_header(token).get("alg")
            if alg not in self.algorithms:
                log.info("bearer JWT refused: algorithm %r is not accepted", alg)
                return None
            key = await anyio.to_thread.run_sync(self._jwks.get_signing_key_from_jwt, token)
            claims = jwt.decode(
                token, key, algorithms=self.algorithms, audience=self.audience, issuer=self.issuer,
                leeway=self.leeway, options={"require": ["exp", "iss", "aud", "sub"]},
            )
        except jwt.PyJWKClientConnectionError as e:
            log.warning("bearer JWT refused: the JWKS could not be fetched (%s)", e)
            return None
        except (jwt.PyJWTError, ValueError, TypeError) as e:
            log.info("bearer JWT refused: %s", _reason(e))
            return None
        subject = str(claims["sub"])
        client = claims.get("client_id") or claims.get("azp") or subject
        return AccessToken(token="***", client_id=str(client), subject=subject, scopes=_claim_scopes(claims),
                           expires_at=int(claims["exp"]), claims={"iss": claims["iss"], "aud": claims["aud"]})


def _reason(error: Exception) -> str:
    """Why a JWT was refused, without any part of the token."""
    text = str(error).split("\n", 1)[0][:200]
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


def _claim_scopes(claims: Mapping[str, Any]) -> list[str]:
    """The scopes a JWT grants: `scope` when present (even empty), else `scp`; neither is no scope.

    `*` in a JWT is just a scope named `*` (no tool may require it): every-scope grants exist only
    in this server's own configuration.
    """
    raw = claims["scope"] if "scope" in claims else claims.get("scp")
    if isinstance(raw, str):
        return raw.split()
    if isinstance(raw, list):
        return [str(s) for s in raw if isinstance(s, str)]
    return []


class ChainVerifier:
    """Try verifiers in order (static tokens, then JWT); the first that accepts wins."""

    def __init__(self, verifiers: Sequence[TokenVerifier]) -> None:
        self.verifiers = list(verifiers)

    async def verify_token(self, token: str) -> AccessToken | None:
        for verifier in self.verifiers:
            found = await verifier.verify_token(token)
            if found is not None:
                return found
        return None


# ============================================================================ configuration


@dataclass(frozen=True)
class AuthConfig:
    """How the HTTP transport authenticates callers. `verifier=None`: no auth."""

    verifier: TokenVerifier | None = None
    authorization_servers: tuple[str, ...] = ()
    resource_url: str | None = None  # the MCP endpoint's public URL; None: from each request's Host
    kinds: tuple[str, ...] = ()  # "2 static tokens", "JWT": for the start-up line
    open_paths: frozenset[str] = field(default_factory=lambda: frozenset({"/healthz"}))

    @property
    def enabled(self) -> bool:
        return self.verifier is not None

    def describe(self) -> str:
        return " + ".join(self.kinds) if self.kinds else "none"

    @property
    def jwt(self) -> bool:
        """Callers may present JWTs (the tokens `upstream.auth` forward and token_exchange pass on)."""
        return "JWT" in self.kinds or "custom verifier" in self.kinds


def per_caller_refusal(upstream_auth: str, *, http: bool, auth: AuthConfig | None) -> str | None:
    """Why `upstream.auth` forward / token_exchange cannot be served this way (None: it can)."""
    if http and auth is not None and auth.jwt:
        return None
    how = ("the HTTP transport authenticates no caller by a JWT" if http else
           "stdio has no caller token")
    return (f"upstream.auth is {upstream_auth}: each call reaches the upstream with the MCP caller's bearer token, "
            f"and {how}. Serve with --transport http and JWT auth (--jwks-url URL --issuer ISS --audience AUD), "
            "or give upstream.auth a credential of this server's own (e.g. type: oauth2_client_credentials)")


def needs_auth_message(host: str) -> str:
    return (
        f"serving on {host} (not loopback) needs auth: bearer tokens (--auth-tokens FILE, or "
        f"{AUTH_TOKENS_VAR} / {AUTH_TOKENS_FILE_VAR}), or JWTs (--jwks-url URL --issuer ISS --audience AUD); "
        f"or pass --no-auth ({NO_AUTH_VAR}=1) to serve without"
    )


def _http_url(value: str, flag: str) -> str:
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ConfigError(f"{flag} must be an http(s) URL, got {value!r}")
    return value


def auth_config(
    options: AuthOptions, *, host: str, environ: Mapping[str, str], verifier: TokenVerifier | None = None
) -> AuthConfig:
    """Check the auth options and build the verifier; ConfigError names the flag to fix.

    `verifier` adds a custom TokenVerifier (tried after static tokens and before JWTs).
    """
    grants = load_static_tokens(environ, options.tokens_file)
    verifiers: list[TokenVerifier] = []
    kinds: list[str] = []
    servers: list[str] = []
    if grants:
        verifiers.append(StaticTokenVerifier(grants))
        kinds.append(f"{len(grants)} static token{'s' if len(grants) != 1 else ''}")
    if verifier is not None:
        verifiers.append(verifier)
        kinds.append("custom verifier")
    resource = _http_url(options.resource_url, "--resource-url") if options.resource_url else None
    if options.jwks_url:
        _http_url(options.jwks_url, "--jwks-url")
        audience = options.audience or resource
        missing = [f for f, v in (("--issuer", options.issuer), ("--audience", audience)) if not v]
        if missing:
            raise ConfigError(f"--jwks-url needs {' and '.join(missing)} (the token issuer and this server's audience)")
        assert options.issuer is not None and audience is not None
        verifiers.append(JwtVerifier(options.jwks_url, issuer=options.issuer, audience=audience))
        kinds.append("JWT")
        servers.append(options.issuer)
    elif options.issuer or options.audience:
        raise ConfigError("--issuer and --audience check JWTs: give --jwks-url too")
    if options.auth_server:
        servers = [_http_url(options.auth_server, "--auth-server")]
    if options.no_auth and verifiers:
        raise ConfigError("--no-auth contradicts the auth settings given (tokens or --jwks-url): pick one")
    if not verifiers:
        if not is_loopback(host) and not options.no_auth:
            raise ConfigError(needs_auth_message(host))
        return AuthConfig()
    combined: TokenVerifier = verifiers[0] if len(verifiers) == 1 else ChainVerifier(verifiers)
    return AuthConfig(verifier=combined, authorization_servers=tuple(servers), resource_url=resource,
                      kinds=tuple(kinds))


def require_public_url(config: AuthConfig, *, host_checked: bool) -> None:
    """With auth on and the Host check off (`--allowed-host '*'`), the public URL must be configured.

    The 401 challenge and the protected-resource metadata name this server's URL; they are built
    from `--resource-url`, else from a Host the DNS-rebinding check allowed, never from any Host.
    """
    if config.enabled and not host_checked and not config.resource_url:
        raise ConfigError(
            "--allowed-host '*' turns the Host check off, so the Host header cannot name this server in its 401 "
            "challenge and its OAuth metadata: set --resource-url (OPENAPI2MCP_RESOURCE_URL) to the public URL of "
            "the MCP endpoint, or list the host names with --allowed-host"
        )


# ============================================================================ HTTP: metadata, middleware


def metadata_path(mcp_path: str) -> str:
    """RFC 9728 3.1: the metadata of https://host/mcp is at https://host/.well-known/oauth-protected-resource/mcp."""
    return PRM_PREFIX + ("" if mcp_path in ("", "/") else mcp_path)


def _origin(scope: Scope) -> str:
    url = URL(scope=scope)
    return f"{url.scheme}://{url.netloc}"


def _resource(config: AuthConfig, scope: Scope, mcp_path: str) -> str:
    return config.resource_url or _origin(scope) + mcp_path


def _metadata_url(config: AuthConfig, scope: Scope, mcp_path: str) -> str:
    if config.resource_url:
        parts = urlsplit(config.resource_url)
        return f"{parts.scheme}://{parts.netloc}{metadata_path(parts.path)}"
    return _origin(scope) + metadata_path(mcp_path)


def metadata_routes(
    config: AuthConfig, mcp_path: str, *, scopes_supported: Iterable[str], resource_name: str | None
) -> list[Route]:
    """GET `/.well-known/oauth-protected-resource[<path>]`: the RFC 9728 document (open, CORS)."""
    scopes = sorted(set(scopes_supported))

    async def handle(request: Request) -> Response:
        if request.method == "OPTIONS":
            return Response(status_code=204, headers=_CORS)
        document: dict[str, Any] = {
            "resource": _resource(config, request.scope, mcp_path),
            "bearer_methods_supported": ["header"],
        }
        if config.authorization_servers:
            document["authorization_servers"] = list(config.authorization_servers)
        if scopes:
            document["scopes_supported"] = scopes
        if resource_name:
            document["resource_name"] = resource_name
        if config.authorization_servers:  # checked against the SDK's model (clients parse it with it)
            document = ProtectedResourceMetadata.model_validate(document).model_dump(mode="json", exclude_none=True)
        return JSONResponse(document, headers={"Cache-Control": "public, max-age=3600", **_CORS})

    paths = [metadata_path(mcp_path), PRM_PREFIX]
    if config.resource_url:
        paths.insert(0, metadata_path(urlsplit(config.resource_url).path))
    return [Route(p, handle, methods=["GET", "OPTIONS"]) for p in dict.fromkeys(paths)]


_CORS: Final = {"Access-Control-Allow-Origin": "*", "Access-Control-Allow-Methods": "GET, OPTIONS"}


def middleware(config: AuthConfig, *, mcp_path: str, challenge: StepUpCheck | None) -> list[Middleware]:
    """The middleware stack of an authenticated HTTP app (outermost first)."""
    assert config.verifier is not None
    open_paths = {*config.open_paths, metadata_path(mcp_path), PRM_PREFIX}
    if config.resource_url:
        open_paths.add(metadata_path(urlsplit(config.resource_url).path))
    return [
        Middleware(AuthenticationMiddleware, backend=BearerAuthBackend(config.verifier)),
        Middleware(AuthContextMiddleware),
        Middleware(AuthGate, config=config, mcp_path=mcp_path, open_paths=frozenset(open_paths), challenge=challenge),
    ]


# (tool name, caller, arguments) -> the scopes to ask for ([]: fine). The runtime audits a refusal.
StepUpCheck = Callable[[str, Caller, Any], list[str]]


def _quoted(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _challenge(params: Sequence[tuple[str, str]]) -> bytes:
    return ("Bearer " + ", ".join(f"{k}={_quoted(v)}" for k, v in params)).encode()


class AuthGate:
    """Require an authenticated caller on everything but the open paths; step-up challenges on tools/call.

    401 `invalid_token` (no or a bad token) with the metadata URL; 403 `insufficient_scope` with the
    scopes to request when a `tools/call` names a step-up tool the token lacks the scope for. The
    403 body is a JSON-RPC error for the call, so a client without OAuth support shows a clear error.
    """

    def __init__(
        self,
        app: ASGIApp,
        *,
        config: AuthConfig,
        mcp_path: str,
        open_paths: frozenset[str],
        challenge: StepUpCheck | None = None,
        max_peek_bytes: int = MAX_PEEK_BYTES,
    ) -> None:
        self.app = app
        self.config = config
        self.mcp_path = mcp_path
        self.open_paths = open_paths
        self.challenge = challenge
        self.max_peek_bytes = max_peek_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get("path") in self.open_paths:
            await self.app(scope, receive, send)
            return
        user = scope.get("user")
        if not isinstance(user, AuthenticatedUser):
            presented = any(k == b"authorization" for k, _ in scope.get("headers", []))
            await self._unauthorized(scope, send, presented)
            return
        if scope.get("method") == "POST" and self.challenge is not None:
            body, receive = await _peek(receive, self.max_peek_bytes)
            if body is not None:
                caller = caller_of_token(user.access_token)
                for request_id, name, arguments in _tool_calls(body):
                    needed = self.challenge(name, caller, arguments)
                    if needed:
                        await self._insufficient(scope, send, request_id, name, needed)
                        return
        await self.app(scope, receive, send)

    async def _unauthorized(self, scope: Scope, send: Send, presented: bool) -> None:
        params = [("resource_metadata", _metadata_url(self.config, scope, self.mcp_path))]
        description = "a valid bearer token is required"
        if presented:
            description = "the bearer token is invalid, expired or not for this server"
            params = [("error", "invalid_token"), ("error_description", description), *params]
        body = {"error": "invalid_token", "error_description": description}
        await _respond(send, 401, body, _challenge(params))

    async def _insufficient(self, scope: Scope, send: Send, request_id: Any, tool: str, needed: list[str]) -> None:
        wanted = " ".join(needed)
        description = f"{tool} needs step-up authorization: a token with the scope(s) {wanted}"
        params = [("error", "insufficient_scope"), ("scope", wanted),
                  ("resource_metadata", _metadata_url(self.config, scope, self.mcp_path)),
                  ("error_description", description)]
        log.info("tools/call %s refused: step-up scope missing (403 insufficient_scope)", tool)
        body = {"jsonrpc": "2.0", "id": request_id, "error": {
            "code": -32001, "message": f"insufficient_scope: {description}",
            "data": {"error": "insufficient_scope", "scope": wanted}}}
        await _respond(send, 403, body, _challenge(params))


async def _respond(send: Send, status: int, body: Any, challenge: bytes) -> None:
    data = json.dumps(body).encode()
    await send({"type": "http.response.start", "status": status, "headers": [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(data)).encode()),
        (b"www-authenticate", challenge),
        (b"cache-control", b"no-store"),
    ]})
    await send({"type": "http.response.body", "body": data})


async def _peek(receive: Receive, limit: int) -> tuple[bytes | None, Receive]:
    """Read the request body (up to `limit`) and give back a `receive` that replays it."""
    messages: list[Message] = []
    size = 0
    complete = False
    while True:
        message = await receive()
        messages.append(message)
        if message.get("type") != "http.request":
            break
        size += len(message.get("body", b""))
        if not message.get("more_body", False):
            complete = True
            break
        if size > limit:
            break

    async def replay() -> Message:
        return messages.pop(0) if messages else await receive()

    body = b"".join(m.get("body", b"") for m in messages if m.get("type") == "http.request") if complete else None
    return body, replay


def _tool_calls(body: bytes) -> list[tuple[Any, str, Any]]:
    """(id, tool name, arguments) of each `tools/call` request in a JSON-RPC body (a message or a batch)."""
    try:
        data = json.loads(body)
    except (ValueError, RecursionError):  # not JSON (or nested past the parser): the MCP app answers it
        return []
    out: list[tuple[Any, str, Any]] = []
    for message in data if isinstance(data, list) else [data]:
        if isinstance(message, dict) and message.get("method") == "tools/call":
            params = message.get("params")
            if isinstance(params, dict) and isinstance(params.get("name"), str):
                out.append((message.get("id"), params["name"], params.get("arguments")))
    return out
