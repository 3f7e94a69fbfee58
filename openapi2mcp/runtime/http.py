"""The Streamable HTTP transport: `http_app` (a Starlette app), `serve_http` (uvicorn), `transport_security`.

Around the MCP endpoint, outermost first: the Host check against DNS rebinding (httpguard.py),
the auth gate when auth is on (auth.py: bearer tokens, protected-resource metadata, step-up),
the cap of sessions per caller, and a whole request body before the MCP app starts. `GET /healthz`
is open. stdio never imports this module: uvicorn's server, Starlette's app and auth load only here.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator
from typing import Any, Final

import uvicorn
from mcp.server.transport_security import TransportSecuritySettings
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Mount, Route

from openapi2mcp.manifest import Manifest
from openapi2mcp.runtime import auth as access_auth
from openapi2mcp.runtime import httpguard
from openapi2mcp.runtime.core import Runtime
from openapi2mcp.runtime.logs import configure_logging
from openapi2mcp.runtime.options import HttpLimits
from openapi2mcp.upstream import ConfigError

LOOPBACK: Final = ("127.0.0.1", "localhost", "::1")


def transport_security(
    host: str, allowed_hosts: list[str] | None, allowed_origins: list[str] | None
) -> TransportSecuritySettings:
    """DNS-rebinding protection: loopback is allowed by default; other binds must name their hosts.

    `allowed_hosts=["*"]` turns the Host/Origin check off explicitly (e.g. behind a proxy that
    checks Host itself).
    """
    if allowed_hosts == ["*"]:
        return TransportSecuritySettings(enable_dns_rebinding_protection=False)
    hosts: list[str] = []
    for h in allowed_hosts or []:
        hosts += [h] if h.endswith(":*") or ":" in h.rsplit("]", 1)[-1] else [h, f"{h}:*"]
    if host in LOOPBACK or host == "":
        hosts += ["127.0.0.1:*", "localhost:*", "[::1]:*"]
    elif not hosts:
        raise ConfigError(
            f"serving on {host} (not loopback) needs allowed_hosts: the Host header values clients use, "
            "e.g. mcp.example.com or mcp.example.com:8000 ('*' turns the DNS-rebinding check off)"
        )
    if allowed_origins is None:
        origins = [f"{scheme}://{h}" for h in hosts for scheme in ("http", "https")]
    else:
        origins = list(allowed_origins)
    return TransportSecuritySettings(enable_dns_rebinding_protection=True, allowed_hosts=hosts, allowed_origins=origins)


def http_app(
    manifest: Manifest,
    *,
    host: str = "127.0.0.1",
    path: str = "/mcp",
    stateless: bool = False,
    json_response: bool = True,
    allowed_hosts: list[str] | None = None,
    allowed_origins: list[str] | None = None,
    runtime: Runtime | None = None,
    port: int | None = None,
    log_level: str | int | None = None,
    auth: access_auth.AuthConfig | None = None,
    no_auth: bool = False,
    limits: HttpLimits | None = None,
    **opts: Any,
) -> Starlette:
    """A Starlette app: the MCP endpoint at `path` plus `GET /healthz`; closes the client on shutdown.

    Takes the options of `serve_http` (`port` is unused here); the rest go to `Runtime`. `auth`
    (auth.auth_config) protects everything but /healthz and the protected-resource metadata; a
    non-loopback `host` without it needs `no_auth=True`. `limits` (httpguard.py): the sessions per caller.
    """
    if log_level is not None:
        configure_logging(log_level)
    security = transport_security(host, allowed_hosts, allowed_origins)
    config = auth or access_auth.AuthConfig()
    if not config.enabled and host not in LOOPBACK and host != "" and not no_auth:
        raise ConfigError(access_auth.needs_auth_message(host))
    access_auth.require_public_url(config, host_checked=security.enable_dns_rebinding_protection)
    limits = limits or HttpLimits()
    runtime = runtime or Runtime(manifest, **opts)
    server = runtime.build_server(stateless=stateless)
    mcp_app = server.streamable_http_app(
        streamable_http_path=path,
        json_response=json_response,
        stateless_http=stateless,
        transport_security=security,
        host=host,
    )

    async def healthz(request: Request) -> JSONResponse:
        return JSONResponse(runtime.health())

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        try:
            async with server.session_manager.run():  # Mount does not run the sub-app's lifespan
                yield
        finally:
            await runtime.aclose()

    routes: list[Route | Mount] = [Route("/healthz", healthz, methods=["GET"])]
    # outermost: the Host check, before anything builds a URL from the Host (httpguard.py)
    middleware = [Middleware(httpguard.HostGuard, settings=security, open_paths=frozenset({"/healthz"}))]
    if config.enabled:
        routes += access_auth.metadata_routes(config, path, scopes_supported=runtime.scopes_supported(),
                                              resource_name=manifest.server.title or manifest.server.name)
        middleware += access_auth.middleware(config, mcp_path=path, challenge=runtime.step_up_challenge)
    if not stateless and limits.sessions_per_caller:  # after auth: a caller is its token's subject
        middleware.append(Middleware(httpguard.SessionCap, path=path, limit=limits.sessions_per_caller,
                                     live=httpguard.sdk_sessions(server.session_manager)))
    middleware.append(Middleware(httpguard.WholeBody))  # the MCP app never starts on half a body
    routes.append(Mount("/", app=mcp_app))
    return Starlette(routes=routes, middleware=middleware, lifespan=lifespan)


async def serve_http(
    manifest: Manifest,
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    path: str = "/mcp",
    stateless: bool = False,
    json_response: bool = True,
    allowed_hosts: list[str] | None = None,
    allowed_origins: list[str] | None = None,
    log_level: str | int | None = None,
    limits: HttpLimits | None = None,
    **opts: Any,
) -> None:
    """Serve Streamable HTTP with uvicorn until interrupted (graceful shutdown closes the client)."""
    limits = limits or HttpLimits()

    app = http_app(
        manifest,
        log_level=log_level,
        host=host,
        path=path,
        stateless=stateless,
        json_response=json_response,
        allowed_hosts=allowed_hosts,
        allowed_origins=allowed_origins,
        limits=limits,
        **opts,
    )
    level = logging.getLevelName(log_level) if isinstance(log_level, int) else (log_level or "info")
    config = uvicorn.Config(app, host=host, port=port, log_level=str(level).lower(), lifespan="on",
                            timeout_graceful_shutdown=10, **httpguard.uvicorn_settings(limits))
    await uvicorn.Server(config).serve()
