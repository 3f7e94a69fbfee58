"""The options of a Runtime and of its HTTP transport: typed, frozen, with the defaults of `openapi2mcp serve`.

Standard library only (the types named under TYPE_CHECKING are not imported), so that the CLIs
take their defaults without importing the MCP SDK, uvicorn or the runtime itself.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    import httpx2

    from openapi2mcp.manifest import RateLimitSpec
    from openapi2mcp.runtime.access import Caller
    from openapi2mcp.runtime.audit import AuditLog
    from openapi2mcp.runtime.auth import AuthConfig
    from openapi2mcp.runtime.signing import Signer
    from openapi2mcp.runtime.state import State


ENV_PREFIX: Final = "OPENAPI2MCP_"
LOOPBACK: Final = ("127.0.0.1", "localhost", "::1")  # binds only this machine reaches


def is_loopback(host: str) -> bool:
    """Whether binding `host` serves this machine only ("" too: the server's own default bind)."""
    return host in LOOPBACK or host == ""
DEFAULT_MAX_BINARY_BYTES: Final = 4_000_000


@dataclass(frozen=True)
class RuntimeOptions:
    """How a Runtime serves its Manifest; flags here win over the OPENAPI2MCP_* variables of `environ`."""

    environ: Mapping[str, str] | None = None  # ${VAR}s, secrets and OPENAPI2MCP_* come from here (None: os.environ)
    page_size: int = 100  # tools/list and resources/list pages
    require_secrets: bool = True  # False: a missing secret fails the calls that need it, not the start-up
    max_binary_bytes: int = DEFAULT_MAX_BINARY_BYTES  # a larger binary result is RESPONSE_TOO_LARGE
    signer: Signer | None = None  # cursors, idempotency keys, dry-run tokens (None: OPENAPI2MCP_SIGNING_KEY)
    check_schemas: bool = False  # check each schema against the metaschema (hand-built Manifests)
    local: Caller | None = None  # the caller without a token (None: the local user, every scope)
    rate_limit: RateLimitSpec | None = None  # replaces the overlay's upstream.rate_limit
    auto_approve: str | Iterable[str] | None = None  # risks confirmed without asking (None: OPENAPI2MCP_AUTO_APPROVE)
    audit_log: AuditLog | str | None = None  # a path, "-" (stderr) or a log (None: OPENAPI2MCP_AUDIT_LOG)
    upstream_transport: httpx2.AsyncBaseTransport | None = None  # what sends upstream requests (None: the network)
    list_changed: bool = False  # serve --reload: declare listChanged, announce Runtime.reload (changes.py)
    state: State | str | None = None  # shared state: redis://... or a State (None: OPENAPI2MCP_STATE_URL, else memory)
    # telemetry (telemetry.py, docs/telemetry.md): an OpenTelemetry TracerProvider to trace through
    # (None: no tracing; `serve` makes one from the OTEL_* variables), and Prometheus metrics
    tracer_provider: Any = None
    metrics: bool = False


@dataclass(frozen=True)
class HttpLimits:
    """The HTTP transport's limits (httpguard.py applies them; docs/access.md has the table).

    Here, not in httpguard, so that the CLIs take their defaults without importing uvicorn.
    """

    header_timeout: float = 10.0  # seconds for a request's line and headers
    body_timeout: float = 30.0  # seconds for its body, after the headers
    keep_alive_timeout: int = 5  # seconds an idle keep-alive connection stays open (uvicorn's default)
    max_connections: int = 1000  # open connections (uvicorn limit_concurrency: 503 past it); 0: no cap
    sessions_per_caller: int = 64  # open MCP sessions per caller (429 past it); 0: no cap

    def __post_init__(self) -> None:
        for name, flag, kind, _ in LIMIT_FLAGS:
            value, where = getattr(self, name), f"{flag} / {ENV_PREFIX}{flag[2:].upper().replace('-', '_')}"
            if kind is int and name.startswith(("max_", "sessions")):
                if value < 0:
                    raise ValueError(f"{where}: {value} is not a cap; give 0 (no cap) or more")
            elif not (value > 0 and math.isfinite(value)):
                raise ValueError(f"{where}: {value} is not a timeout; give a number of seconds above 0")


# HttpLimits field, flag (its variable: OPENAPI2MCP_ + the flag in capitals), type, help
LIMIT_FLAGS: Final = (
    ("header_timeout", "--header-timeout", float, "seconds a request's line and headers may take"),
    ("body_timeout", "--body-timeout", float, "seconds a request's body may take after its headers"),
    ("keep_alive_timeout", "--keep-alive-timeout", int, "seconds an idle keep-alive connection stays open"),
    ("max_connections", "--max-connections", int, "open connections; more get 503 (0: no cap)"),
    ("sessions_per_caller", "--max-sessions-per-caller", int,
     "open MCP sessions per token subject or client address; more get 429 (0: no cap)"),
)


@dataclass(frozen=True)
class AuthOptions:
    """The auth flags of `serve` and of a frozen package (each package flag has an env variable);
    auth.auth_config turns them into an AuthConfig."""

    tokens_file: str | None = None
    jwks_url: str | None = None
    issuer: str | None = None
    audience: str | None = None
    auth_server: str | None = None
    resource_url: str | None = None
    no_auth: bool = False


@dataclass(frozen=True)
class MetricsOptions:
    """Where /metrics is served (metrics.MetricsServer): a listener of its own, loopback by default."""

    host: str = "127.0.0.1"
    port: int = 9464  # OpenTelemetry's and many exporters' Prometheus port
    token: str | None = None  # when set, a scrape must send it as a bearer token (OPENAPI2MCP_METRICS_TOKEN)


def metrics_refusal(metrics: MetricsOptions, *, no_auth: bool) -> str | None:
    """Why /metrics cannot be served so (None: it can): off loopback it needs a token, or --no-auth said so."""
    if is_loopback(metrics.host) or metrics.token or no_auth:
        return None
    return (f"serving /metrics on {metrics.host} (not loopback) needs a token: set OPENAPI2MCP_METRICS_TOKEN "
            "(Prometheus sends it with `authorization: {credentials_file: ...}`), bind --metrics-host 127.0.0.1, or "
            "pass --no-auth to serve it open")


@dataclass(frozen=True)
class HttpOptions:
    """How the Streamable HTTP transport serves a Runtime (http.py)."""

    host: str = "127.0.0.1"
    port: int = 8000  # serve_http only
    path: str = "/mcp"
    stateless: bool = False  # no MCP session: every request stands alone
    json_response: bool = True  # False: SSE answers, so 2025-11-25 clients can be asked mid-call
    allowed_hosts: Sequence[str] | None = None  # Host header values; needed off loopback ("*": no check)
    allowed_origins: Sequence[str] | None = None  # None: the allowed hosts over http and https
    auth: AuthConfig | None = None  # auth.auth_config; None: no auth, which off loopback needs `no_auth`
    no_auth: bool = False
    limits: HttpLimits = HttpLimits()
    metrics: MetricsOptions | None = None  # serve /metrics (needs RuntimeOptions(metrics=True))
    fast_path: bool = True  # False: every request through the SDK's own HTTP entry (modern.py; tests compare both)
