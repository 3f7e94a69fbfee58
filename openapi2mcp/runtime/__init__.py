"""The MCP server over a Manifest: tools/list, tools/call, resources, prompts; stdio and Streamable HTTP."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from openapi2mcp.runtime.options import (
    ENV_PREFIX,
    LIMIT_FLAGS,
    LOOPBACK,
    AuthOptions,
    HttpLimits,
    HttpOptions,
    MetricsOptions,
    RuntimeOptions,
    is_loopback,
    metrics_refusal,
)

if TYPE_CHECKING:
    from openapi2mcp.runtime.access import SCOPES_VAR, local_caller
    from openapi2mcp.runtime.auth import auth_config, per_caller_refusal, require_public_url
    from openapi2mcp.runtime.core import Runtime
    from openapi2mcp.runtime.gone import client_gone, describe, leaves
    from openapi2mcp.runtime.http import http_app, serve_http, transport_security
    from openapi2mcp.runtime.httpguard import GuardedH11, GuardedHttp, uvicorn_settings
    from openapi2mcp.runtime.logs import JsonFormatter, configure_logging
    from openapi2mcp.runtime.signing import SIGNING_KEY_VAR
    from openapi2mcp.runtime.state import STATE_URL_VAR
    from openapi2mcp.runtime.stdio import serve_stdio
    from openapi2mcp.runtime.telemetry import current_trace_id, tracing_installed
    from openapi2mcp.runtime.tools import argument_error
    from openapi2mcp.runtime.tracing import provider_from_environment

# The server and its transports load on first use (start-up time): the CLI reads the option
# defaults above without importing the MCP SDK, and stdio never loads the HTTP transport.
_LAZY = {
    "SCOPES_VAR": "openapi2mcp.runtime.access",
    "local_caller": "openapi2mcp.runtime.access",
    "auth_config": "openapi2mcp.runtime.auth",
    "require_public_url": "openapi2mcp.runtime.auth",
    "per_caller_refusal": "openapi2mcp.runtime.auth",
    "Runtime": "openapi2mcp.runtime.core",
    "configure_logging": "openapi2mcp.runtime.logs",
    "SIGNING_KEY_VAR": "openapi2mcp.runtime.signing",
    "STATE_URL_VAR": "openapi2mcp.runtime.state",
    "JsonFormatter": "openapi2mcp.runtime.logs",
    "http_app": "openapi2mcp.runtime.http",
    "serve_http": "openapi2mcp.runtime.http",
    "serve_stdio": "openapi2mcp.runtime.stdio",
    "transport_security": "openapi2mcp.runtime.http",
    "uvicorn_settings": "openapi2mcp.runtime.httpguard",
    "GuardedH11": "openapi2mcp.runtime.httpguard",
    "GuardedHttp": "openapi2mcp.runtime.httpguard",
    "client_gone": "openapi2mcp.runtime.gone",
    "describe": "openapi2mcp.runtime.gone",
    "leaves": "openapi2mcp.runtime.gone",
    "argument_error": "openapi2mcp.runtime.tools",
    "current_trace_id": "openapi2mcp.runtime.telemetry",
    "tracing_installed": "openapi2mcp.runtime.telemetry",
    "provider_from_environment": "openapi2mcp.runtime.tracing",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(__import__(module, fromlist=[name]), name)  # the import statement's path: -X importtime sees it
    globals()[name] = value
    return value


__all__ = [
    "ENV_PREFIX",
    "LIMIT_FLAGS",
    "LOOPBACK",
    "SCOPES_VAR",
    "SIGNING_KEY_VAR",
    "STATE_URL_VAR",
    "AuthOptions",
    "GuardedH11",
    "GuardedHttp",
    "HttpLimits",
    "HttpOptions",
    "JsonFormatter",
    "MetricsOptions",
    "Runtime",
    "RuntimeOptions",
    "argument_error",
    "auth_config",
    "client_gone",
    "configure_logging",
    "current_trace_id",
    "describe",
    "http_app",
    "is_loopback",
    "leaves",
    "local_caller",
    "metrics_refusal",
    "per_caller_refusal",
    "provider_from_environment",
    "require_public_url",
    "serve_http",
    "serve_stdio",
    "tracing_installed",
    "transport_security",
    "uvicorn_settings",
]
