"""The Streamable HTTP transport: `http_app` (a Starlette app), `serve_http` (uvicorn), `transport_security`.

Around the MCP endpoint, outermost first: the Host check against DNS rebinding (httpguard.py),
the auth gate when auth is on (auth.py: bearer tokens, protected-resource metadata, step-up),
the fast path of well-formed 2026-07-28 tools/call requests (modern.py), the cap of sessions per
caller, and a whole request body before the MCP app starts. `GET /healthz`
is open. stdio never imports this module: uvicorn's server, Starlette's app and auth load only here.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator, Sequence
from typing import TYPE_CHECKING

import anyio
import uvicorn
from mcp.server.transport_security import TransportSecuritySettings
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Mount, Route

from openapi2mcp.runtime import auth as access_auth
from openapi2mcp.runtime import httpguard
from openapi2mcp.runtime.core import Runtime
from openapi2mcp.runtime.logs import configure_logging
from openapi2mcp.runtime.modern import ModernCalls
from openapi2mcp.runtime.options import HttpOptions, is_loopback, metrics_refusal
from openapi2mcp.upstream import ConfigError

if TYPE_CHECKING:
    from openapi2mcp.runtime.metrics import MetricsServer


def transport_security(
    host: str, allowed_hosts: Sequence[str] | None, allowed_origins: Sequence[str] | None
) -> TransportSecuritySettings:
    """DNS-rebinding protection: loopback is allowed by default; other binds must name their hosts.

    `allowed_hosts=["*"]` turns the Host/Origin check off explicitly (e.g. behind a proxy that
    checks Host itself).
    """
    if allowed_hosts is not None and list(allowed_hosts) == ["*"]:
        return TransportSecuritySettings(enable_dns_rebinding_protection=False)
    hosts: list[str] = []
    for h in allowed_hosts or []:
        hosts += [h] if h.endswith(":*") or ":" in h.rsplit("]", 1)[-1] else [h, f"{h}:*"]
    if is_loopback(host):
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


def http_app(runtime: Runtime, options: HttpOptions | None = None, *, log_level: str | int | None = None) -> Starlette:
    """A Starlette app: the MCP endpoint at `options.path` plus `GET /healthz`; closes `runtime` on shutdown.

    `options.auth` (auth.auth_config) protects everything but /healthz and the protected-resource
    metadata; a non-loopback host without it needs `no_auth`. `options.limits` (httpguard.py): the
    sessions per caller. A configuration that cannot be served is a ConfigError, before any app exists.
    """
    o = options or HttpOptions()
    if log_level is not None:
        configure_logging(log_level)
    security = transport_security(o.host, o.allowed_hosts, o.allowed_origins)
    config = o.auth or access_auth.AuthConfig()
    if not config.enabled and not is_loopback(o.host) and not o.no_auth:
        raise ConfigError(access_auth.needs_auth_message(o.host))
    access_auth.require_public_url(config, host_checked=security.enable_dns_rebinding_protection)
    metrics = _metrics_server(runtime, o)  # bound now: a taken port is a ConfigError, not a failed start-up
    server = runtime.build_server(stateless=o.stateless)
    mcp_app = server.streamable_http_app(
        streamable_http_path=o.path,
        json_response=o.json_response,
        stateless_http=o.stateless,
        transport_security=security,
        host=o.host,
    )

    async def healthz(request: Request) -> JSONResponse:
        return JSONResponse(await anyio.to_thread.run_sync(runtime.health))  # the first may hash the Manifest

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        try:
            if metrics is not None:
                metrics.start()
            async with server.session_manager.run():  # Mount does not run the sub-app's lifespan
                yield
        finally:
            if metrics is not None:
                metrics.stop()
            await runtime.aclose()

    manifest = runtime.manifest
    routes: list[Route | Mount] = [Route("/healthz", healthz, methods=["GET"])]
    # outermost: the Host check, before anything builds a URL from the Host (httpguard.py)
    middleware = [Middleware(httpguard.HostGuard, settings=security, open_paths=frozenset({"/healthz"}))]
    if config.enabled:
        routes += access_auth.metadata_routes(config, o.path, scopes_supported=runtime.scopes_supported(),
                                              resource_name=manifest.server.title or manifest.server.name)
        middleware += access_auth.middleware(config, mcp_path=o.path, challenge=runtime.step_up_challenge)
    # a well-formed 2026-07-28 tools/call is answered here, as the SDK would (modern.py); the rest goes on
    middleware.append(Middleware(ModernCalls, server=server, path=o.path, security=security,
                                 json_response=o.json_response, enabled=o.fast_path))
    if not o.stateless and o.limits.sessions_per_caller:  # after auth: a caller is its token's subject
        middleware.append(Middleware(httpguard.SessionCap, path=o.path, limit=o.limits.sessions_per_caller,
                                     live=httpguard.sdk_sessions(server.session_manager)))
    middleware.append(Middleware(httpguard.WholeBody))  # the MCP app never starts on half a body
    routes.append(Mount("/", app=mcp_app))
    return Starlette(routes=routes, middleware=middleware, lifespan=lifespan)


def _metrics_server(runtime: Runtime, o: HttpOptions) -> MetricsServer | None:
    """The /metrics listener of `o.metrics` (metrics.py), or None."""
    if o.metrics is None:
        return None
    if runtime.telemetry.metrics is None:
        raise ConfigError("HttpOptions(metrics=...) needs a Runtime with metrics on: RuntimeOptions(metrics=True)")
    refusal = metrics_refusal(o.metrics, no_auth=o.no_auth)
    if refusal:
        raise ConfigError(refusal)
    from openapi2mcp.runtime.metrics import MetricsServer

    return MetricsServer(runtime.telemetry.metrics.registry, o.metrics.host, o.metrics.port, o.metrics.token)


async def serve_http(
    runtime: Runtime, options: HttpOptions | None = None, *, log_level: str | int | None = None
) -> None:
    """Serve `runtime` over Streamable HTTP with uvicorn until interrupted (graceful shutdown closes it)."""
    o = options or HttpOptions()
    app = http_app(runtime, o, log_level=log_level)
    level = logging.getLevelName(log_level) if isinstance(log_level, int) else (log_level or "info")
    config = uvicorn.Config(app, host=o.host, port=o.port, log_level=str(level).lower(), lifespan="on",
                            timeout_graceful_shutdown=10, **httpguard.uvicorn_settings(o.limits))
    await uvicorn.Server(config).serve()
