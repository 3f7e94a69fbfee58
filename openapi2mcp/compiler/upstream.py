"""The Manifest's `server` and `upstream`: who the MCP server is, and how it reaches the REST API.

The overlay's `server` and `upstream` win; otherwise the spec says: `info` names the server,
`servers[0]` is the base URL (a relative one comes from $OPENAPI2MCP_BASE_URL at start-up), and
the first usable security scheme is the auth, its secrets from the environment. Retries and rate
limits are written the same way upstream-wide and per tool (retry_spec, rate_limit_spec).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any
from urllib.parse import urljoin

from openapi2mcp.compiler.model import Context
from openapi2mcp.compiler.schemas import SchemaError
from openapi2mcp.errors import InputError, Problem
from openapi2mcp.manifest import (
    BASE_URL_VAR,
    AuthSpec,
    RateLimitSpec,
    RetrySpec,
    ServerSpec,
    TimeoutSpec,
    UpstreamSpec,
    default_burst,
    parse_rate,
)
from openapi2mcp.overlay import AuthDef, OverlayFile, RateLimitDef, RetriesDef, ToolOverlay

if TYPE_CHECKING:
    from openapi2mcp.loader import LoadedSpec


def server_spec(spec: LoadedSpec, document: dict[str, Any], overlay: ToolOverlay | None) -> ServerSpec:
    """The MCP server's name, title, version and instructions."""
    info = document.get("info") if isinstance(document.get("info"), dict) else {}
    assert isinstance(info, dict)
    title = info.get("title") if isinstance(info.get("title"), str) else None
    sdef = overlay.server if overlay else None
    name = (sdef.name if sdef and sdef.name else None) or _slug(title or "openapi") + "-mcp"
    return ServerSpec(
        name=name,
        title=(sdef.title if sdef and sdef.title else None) or title,
        version=(sdef.version if sdef and sdef.version else None) or str(info.get("version") or "0.0.0"),
        instructions=sdef.instructions if sdef else None,
    )


def _slug(text: str) -> str:
    """A short server name from the spec title: its first words, lower case, dashed."""
    words = re.findall(r"[a-z0-9]+", text.lower().replace("'", ""))
    out = ""
    for word in words:
        if out and len(out) + len(word) + 1 > 30:
            break
        out = f"{out}-{word}" if out else word
    return out or "openapi"


def upstream_spec(ctx: Context, overlay: ToolOverlay | None, doc: OverlayFile | None = None) -> UpstreamSpec:
    """The upstream section; notes in `ctx.auth_params` the parameters its auth supplies (never arguments).

    `doc`: the overlay file, to locate a problem of `upstream.auth` (InputError).
    """
    udef = overlay.upstream if overlay else None
    base, relative = (udef.base_url, None) if udef and udef.base_url else _spec_base_url(ctx)
    auth = _overlay_auth(ctx, udef.auth, doc) if udef and udef.auth else _spec_auth(ctx)
    if auth.type in ("header", "query", "cookie") and auth.name:
        ctx.auth_params.add((auth.type, auth.name.lower()))
    if auth.type in ("bearer", "basic", "env") or auth.dynamic:
        ctx.auth_params.add(("header", "authorization"))
    timeout = TimeoutSpec()
    if udef and udef.timeout is not None:
        if isinstance(udef.timeout, float | int):
            timeout = TimeoutSpec(read=float(udef.timeout), total=max(60.0, float(udef.timeout) * 2))
        else:
            given = udef.timeout.model_dump(exclude_none=True)
            timeout = TimeoutSpec(**given)
    return UpstreamSpec(
        base_url=base,
        spec_server=relative,
        auth=auth,
        timeout=timeout,
        headers=dict(udef.headers) if udef else {},
        max_response_bytes=(udef.max_response_bytes if udef and udef.max_response_bytes else 10_000_000),
        verify_tls=udef.verify_tls if udef else True,
        retries=retry_spec(udef.retries) if udef else None,
        rate_limit=rate_limit_spec(udef.rate_limit) if udef and udef.rate_limit else None,
        forward_headers=list(udef.forward_headers) if udef else [],
    )


def _overlay_auth(ctx: Context, adef: AuthDef, doc: OverlayFile | None) -> AuthSpec:
    """The overlay's auth; oauth2_client_credentials takes the spec's clientCredentials flow as defaults."""
    given = adef.model_dump(exclude_none=True)
    if adef.type != "oauth2_client_credentials" or (adef.token_url and adef.scopes is not None):
        return AuthSpec(**given)
    flow = _client_credentials_flow(ctx)
    token_url = adef.token_url or (flow[0] if flow else None)
    if not token_url:
        at = ("upstream", "auth")
        problem = "auth type 'oauth2_client_credentials' needs token_url: the spec declares no oauth2 " \
                  "clientCredentials flow to take it from"
        hint = "add token_url: https://idp.example.com/oauth/token (or a ${VAR} template) under upstream.auth"
        raise InputError(doc.problem(at, problem, hint) if doc else Problem(message=problem, hint=hint))
    scopes = adef.scopes if adef.scopes is not None else (flow[1] if flow else [])
    return AuthSpec(**{**given, "token_url": token_url, "scopes": scopes})


def _client_credentials_flow(ctx: Context) -> tuple[str, list[str]] | None:
    """(tokenUrl, scopes) of the spec's first oauth2 scheme with a clientCredentials flow (Swagger 2.0's
    `application` flow arrives converted); relative token URLs are resolved against the spec's URL."""
    for scheme in _security_schemes(ctx):
        flows = scheme.get("flows") if scheme.get("type") == "oauth2" else None
        flow = flows.get("clientCredentials") if isinstance(flows, dict) else None
        url = flow.get("tokenUrl") if isinstance(flow, dict) else None
        if isinstance(url, str) and url.strip():
            assert isinstance(flow, dict)
            scopes = flow.get("scopes") if isinstance(flow.get("scopes"), dict) else {}
            assert isinstance(scopes, dict)
            url = url.strip()
            if not re.match(r"^https?://", url) and re.match(r"^https?://", ctx.spec.source):
                url = urljoin(ctx.spec.source, url)
            return url.replace("$", "$$"), [str(s) for s in scopes]
    return None


def retry_spec(rdef: RetriesDef | None) -> RetrySpec | None:
    """`retries` of the overlay (upstream-wide or per tool) as the Manifest holds it."""
    return RetrySpec(**rdef.model_dump(exclude_none=True)) if rdef is not None else None


def rate_limit_spec(rdef: RateLimitDef) -> RateLimitSpec:
    """`rate_limit` of the overlay (upstream-wide or per tool): a token bucket."""
    rate, count = parse_rate(rdef.rate)
    return RateLimitSpec(rate=rate, burst=rdef.burst or default_burst(count), per_caller=rdef.per_caller)


def _spec_base_url(ctx: Context) -> tuple[str, str | None]:
    """servers[0] with its variables at their defaults, and the server when it is relative.

    A relative server ("/api", or none at all, which OpenAPI reads as "/") is resolved against
    the spec's URL when it was fetched; from a file it cannot be, so the base URL is then
    $OPENAPI2MCP_BASE_URL, required at start-up (a valid spec, so not a warning: the message at
    start-up names the relative server). $OPENAPI2MCP_BASE_URL overrides any base URL at run time.
    """
    servers = ctx.document.get("servers")
    url = None
    if isinstance(servers, list) and servers and isinstance(servers[0], dict):
        server = servers[0]
        url = str(server.get("url") or "")
        variables = server.get("variables") if isinstance(server.get("variables"), dict) else {}
        assert isinstance(variables, dict)
        for var, spec in variables.items():
            default = spec.get("default") if isinstance(spec, dict) else None
            url = url.replace("{" + var + "}", str(default or ""))
    if url and not re.match(r"^https?://", url) and re.match(r"^https?://", ctx.spec.source):
        url = urljoin(ctx.spec.source, url)
    if url and re.match(r"^https?://", url):
        return url.rstrip("/").replace("$", "$$"), None
    return "${" + BASE_URL_VAR + "}", url or "/"


def _spec_auth(ctx: Context) -> AuthSpec:
    """Without an overlay, authenticate as the spec's first security scheme says, secrets from env.

    The secret comes from OPENAPI2MCP_TOKEN (or OPENAPI2MCP_USERNAME/PASSWORD for basic); when
    unset, no credentials are sent, so public APIs work without configuration.
    """
    for scheme in _security_schemes(ctx):
        kind = scheme.get("type")
        if kind == "http" and str(scheme.get("scheme", "")).lower() == "bearer":
            return AuthSpec(type="bearer", value="${OPENAPI2MCP_TOKEN:-}")
        if kind == "http" and str(scheme.get("scheme", "")).lower() == "basic":
            return AuthSpec(type="basic", username="${OPENAPI2MCP_USERNAME:-}", password="${OPENAPI2MCP_PASSWORD:-}")
        if kind == "apiKey" and scheme.get("in") in ("header", "query", "cookie") and scheme.get("name"):
            return AuthSpec(type=scheme["in"], name=str(scheme["name"]), value="${OPENAPI2MCP_TOKEN:-}")
        if kind in ("oauth2", "openIdConnect"):
            return AuthSpec(type="bearer", value="${OPENAPI2MCP_TOKEN:-}")
    # no usable scheme (Swagger 2.0's `securityDefinitions: {}` is common even for APIs that want
    # one): the same variables still give credentials, chosen at start-up by which ones are set
    return AuthSpec(type="env")


def _security_schemes(ctx: Context) -> Iterator[dict[str, Any]]:
    """The spec's security schemes, those its top-level `security` names first."""
    components = ctx.document.get("components") if isinstance(ctx.document.get("components"), dict) else {}
    assert isinstance(components, dict)
    schemes = components.get("securitySchemes") if isinstance(components.get("securitySchemes"), dict) else {}
    assert isinstance(schemes, dict)
    order: list[str] = []
    for req in ctx.document.get("security") or []:
        if isinstance(req, dict):
            order.extend(k for k in req if k not in order)
    order.extend(k for k in schemes if k not in order)
    for name in order:
        try:
            scheme = ctx.converter.resolve(schemes.get(name))
        except SchemaError:
            continue
        if isinstance(scheme, dict):
            yield scheme
