"""Every run option of `openapi2mcp serve` and of a frozen package's command, defined once.

`OPTIONS` is the table: flag, environment variable, kind, default, help. The package's command
builds its argparse parser from it (package.py), `openapi2mcp serve` builds its typer parameters
from it (cli/app.py), and both hand the raw values they parsed to `resolve`, which reads each
unset flag's variable (the flag wins), converts, validates and returns one `RunOptions`. So both
commands accept the same flags and variables, with the same defaults, the same help and the same
one-line errors (`UsageError`, exit 2). docs/build.md's option table is `options_markdown()`
(tests/test_serve_options.py checks it).

Standard library only (and the stdlib-only openapi2mcp.runtime.options): `--help` of either
command imports nothing heavy.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from openapi2mcp.runtime import LIMIT_FLAGS, HttpLimits, is_loopback

Kind = Literal["text", "choice", "int", "float", "switch", "list"]

_TRUE: Final = ("1", "true", "yes", "on")
_FALSE: Final = ("0", "false", "no", "off")

SECTIONS: Final = {
    "serving": "serving",
    "access": "access (docs/access.md)",
    "safety": "safety (docs/safety.md)",
    "replicas": "replicas (docs/build.md#replicas-and-workers)",
    "limits": "HTTP limits (docs/access.md#http-transport-limits)",
    "telemetry": "telemetry (docs/telemetry.md)",
}


class UsageError(Exception):
    """A bad flag or variable value: printed as one line naming it, exit status 2."""


@dataclass(frozen=True)
class Option:
    """One run option: its flag, its variable, how its value is read, and what it means."""

    dest: str  # the RunOptions field (or HttpLimits field, for the limits)
    flag: str
    env: str
    kind: Kind
    help: str
    example: str  # a value unlike the default: the tests set each option through its flag and its variable
    default: Any = None  # the value when neither the flag nor the variable is given
    shown_default: str | None = None  # the default as --help and the docs say it (else str(default))
    metavar: str | None = None
    choices: tuple[str, ...] = ()
    short: str | None = None
    bounds: tuple[int, int] | None = None
    empty_is_value: bool = False  # a set but empty variable is a value, not "unset" (OPENAPI2MCP_SCOPES)
    is_path: bool = False  # the value is a file (`openapi2mcp config` makes it absolute)
    section: str = "serving"

    @property
    def default_text(self) -> str:
        if self.shown_default is not None:
            return self.shown_default
        if self.kind == "switch":
            return "off"
        return "unset" if self.default is None else str(self.default)

    def describe(self) -> str:
        """The help text both commands print (an action, which has no variable, says only what it does)."""
        if not self.env:
            return self.help
        return f"{self.help} Default: {self.default_text}. Env: {self.env}"

    def value(self, given: Any, environ: Mapping[str, str]) -> Any:
        """The typed value: the flag's when given, else the variable's, else the default."""
        if self.kind == "switch":
            if given:
                return True
            raw = environ.get(self.env, "").strip().lower()
            if raw in _TRUE:
                return True
            if raw in _FALSE or not raw:
                return False
            raise UsageError(f"{self.env}: {environ[self.env]!r} is neither on nor off "
                             "(1, true, yes, on / 0, false, no, off)")
        if self.kind == "list":
            items = [str(v) for v in given] if given else split_list(environ.get(self.env, ""))
            return [i for i in items if i] or None
        if given is not None:
            raw, where = str(given), self.flag
        else:
            raw, where = environ.get(self.env, "").strip(), self.env
            if self.env not in environ:
                return self.default
        if raw == "" and not self.empty_is_value:
            return self.default
        return self._convert(raw, where)

    def _convert(self, raw: str, where: str) -> Any:
        if self.kind == "choice":
            if raw.lower() not in self.choices:
                raise UsageError(f"{where}: {raw!r} is not one of {', '.join(self.choices)}")
            return raw.lower()
        if self.kind == "int":
            try:
                number = int(raw)
            except ValueError:
                raise UsageError(f"{where}: {raw!r} is not a whole number") from None
            if self.bounds and not self.bounds[0] <= number <= self.bounds[1]:
                raise UsageError(f"{where}: {number} is out of range ({self.bounds[0]} to {self.bounds[1]})")
            return number
        if self.kind == "float":
            try:
                return float(raw)
            except ValueError:
                raise UsageError(f"{where}: {raw!r} is not a number") from None
        return raw


def split_list(raw: str) -> list[str]:
    """A list variable's items: separated by commas and/or whitespace."""
    return raw.replace(",", " ").split()


def _limit(name: str, flag: str, kind: type, text: str) -> Option:
    default = HttpLimits.__dataclass_fields__[name].default
    cap = name.startswith(("max_", "sessions"))
    return Option(name, flag, "OPENAPI2MCP_" + flag[2:].upper().replace("-", "_"), "int" if kind is int else "float",
                  f"HTTP: {text}.", example="7" if cap else "2.5" if kind is float else "9", default=default,
                  metavar="N" if cap else "S", section="limits")


OPTIONS: Final[tuple[Option, ...]] = (
    Option("transport", "--transport", "OPENAPI2MCP_TRANSPORT", "choice",
           "stdio (what desktop clients start) or http (Streamable HTTP).", example="http", default="stdio",
           choices=("stdio", "http"), metavar="stdio|http", short="-t"),
    Option("host", "--host", "OPENAPI2MCP_HOST", "text",
           "HTTP: the address to bind; a non-loopback one needs --allowed-host and auth (or --no-auth).",
           example="127.0.0.2", default="127.0.0.1", metavar="HOST"),
    Option("port", "--port", "OPENAPI2MCP_PORT", "int", "HTTP: the port to bind.", example="8123", default=8000,
           bounds=(0, 65535), metavar="PORT"),
    Option("path", "--path", "OPENAPI2MCP_PATH", "text", "HTTP: the MCP endpoint path.", example="/tools",
           default="/mcp", metavar="PATH"),
    Option("stateless", "--stateless", "OPENAPI2MCP_STATELESS", "switch",
           "HTTP: no MCP sessions, every request stands alone (for replicas behind a load balancer).", example="1"),
    Option("allowed_hosts", "--allowed-host", "OPENAPI2MCP_ALLOWED_HOSTS", "list",
           "HTTP: a Host header value clients use (repeatable; the variable is comma-separated); the DNS-rebinding "
           "check, required on a non-loopback address; '*' turns it off.", example="mcp.example.com",
           shown_default="loopback names only", metavar="HOST"),
    Option("allowed_origins", "--allowed-origin", "OPENAPI2MCP_ALLOWED_ORIGINS", "list",
           "HTTP: an Origin to accept (repeatable; the variable is comma-separated).",
           example="https://app.example.com", shown_default="http(s):// + each allowed host", metavar="ORIGIN"),
    Option("base_url", "--base-url", "OPENAPI2MCP_BASE_URL", "text",
           "The URL requests are sent to, replacing the Manifest's upstream base URL.",
           example="http://127.0.0.1:9/api", shown_default="the overlay's upstream.base_url, else the spec's server",
           metavar="URL"),
    Option("reload", "--reload", "OPENAPI2MCP_RELOAD", "switch",
           "While authoring: recompile when the spec, an overlay or a file the spec includes changes, keep serving "
           "the last good version after a bad edit, and tell clients the tools changed (`openapi2mcp serve SPEC` "
           "only: refused when serving a compiled Manifest, as a frozen package does).", example="1"),
    Option("log_level", "--log-level", "OPENAPI2MCP_LOG_LEVEL", "choice",
           "The stderr log level (info logs one line per tool call).", example="debug", default="warning",
           shown_default="warning (info in the container image)",
           choices=("debug", "info", "warning", "error", "critical"), metavar="LEVEL"),
    Option("log_format", "--log-format", "OPENAPI2MCP_LOG_FORMAT", "choice",
           "The stderr log lines: text, or json (one object a line, with the traceId of the call or request).",
           example="json", default="text", choices=("text", "json"), metavar="text|json"),
    Option("no_auth", "--no-auth", "OPENAPI2MCP_NO_AUTH", "switch",
           "HTTP: serve a non-loopback address without auth (an explicit opt-out).", example="true",
           section="access"),
    Option("auth_tokens", "--auth-tokens", "OPENAPI2MCP_AUTH_TOKENS_FILE", "text",
           "HTTP: a bearer tokens file (one token per line, or YAML/JSON token -> {subject, scopes}); tokens also "
           "come from $OPENAPI2MCP_AUTH_TOKENS.", example="/run/secrets/tokens.yaml", metavar="FILE",
           is_path=True, section="access"),
    Option("jwks_url", "--jwks-url", "OPENAPI2MCP_JWKS_URL", "text",
           "HTTP: accept JWT access tokens signed by the keys at this JWKS URL (RS256/ES256/EdDSA).",
           example="https://idp.example.com/jwks.json", metavar="URL", section="access"),
    Option("issuer", "--issuer", "OPENAPI2MCP_ISSUER", "text", "HTTP: the JWTs' required `iss`.",
           example="https://idp.example.com", metavar="ISS", section="access"),
    Option("audience", "--audience", "OPENAPI2MCP_AUDIENCE", "text", "HTTP: the JWTs' required `aud`.",
           example="https://mcp.example.com/mcp", shown_default="--resource-url", metavar="AUD", section="access"),
    Option("auth_server", "--auth-server", "OPENAPI2MCP_AUTH_SERVER", "text",
           "HTTP: the authorization server the protected-resource metadata names.",
           example="https://auth.example.com", shown_default="--issuer", metavar="URL", section="access"),
    Option("resource_url", "--resource-url", "OPENAPI2MCP_RESOURCE_URL", "text",
           "HTTP: the public URL of the MCP endpoint (set it behind a proxy).",
           example="https://mcp.example.com/mcp", shown_default="from each request's Host", metavar="URL",
           section="access"),
    Option("scopes", "--scopes", "OPENAPI2MCP_SCOPES", "text",
           "The local user's scopes (stdio, and HTTP without auth), e.g. \"notes:read tasks:write\"; \"*\" is every "
           "scope, \"\" none (the variable too: set but empty is no scope).", example="notes:read",
           shown_default="every scope", metavar="SCOPES", empty_is_value=True, section="access"),
    Option("rate_limit", "--rate-limit", "OPENAPI2MCP_RATE_LIMIT", "text",
           "The server's limit on tool calls and resource reads, e.g. 10/s or 100/min,burst=20,per_caller "
           "(replaces the overlay's upstream.rate_limit).", example="30/min", shown_default="the overlay's",
           metavar="RATE", section="access"),
    Option("auto_approve", "--auto-approve", "OPENAPI2MCP_AUTO_APPROVE", "text",
           "Trusted automation: skip the user's confirmation for these risks (high, critical or high,critical); "
           "each such call is marked in the audit log.", example="high", shown_default="none", metavar="RISKS",
           section="safety"),
    Option("audit_log", "--audit-log", "OPENAPI2MCP_AUDIT_LOG", "text",
           "One JSON line per tool call and resource read to this file ('-': stderr); a call whose line cannot be "
           "written fails closed.", example="-", shown_default="off", metavar="PATH", is_path=True, section="safety"),
    Option("sse", "--sse", "OPENAPI2MCP_SSE", "switch",
           "HTTP: answer with SSE streams instead of JSON, so that 2025-11-25 clients can be asked to confirm "
           "(elicitation) mid-call.", example="yes", section="safety"),
    Option("state", "--state", "OPENAPI2MCP_STATE_URL", "text",
           "Share single-use confirmations and dry-run tokens, rate-limit buckets and the results of idempotent "
           "writes with every replica through Redis: redis://[:password@]host[:port][/db], rediss:// for TLS, "
           "unix:///path.sock; needs OPENAPI2MCP_SIGNING_KEY and redis-py (the [redis] extra). A password in it is "
           "a secret: give it through the variable (it is never logged or shown).",
           example="redis://127.0.0.1:6379/0", shown_default="off (each process keeps its own)", metavar="URL",
           section="replicas"),
    Option("workers", "--workers", "OPENAPI2MCP_WORKERS", "int",
           "HTTP: serve with N processes on one port (the kernel spreads connections); needs --stateless (the "
           "2026-07-28 era: a session would live in one process) and, when tools confirm, dry-run or are rate "
           "limited, --state.", example="2", default=1, bounds=(1, 256), metavar="N", section="replicas"),
    *(_limit(*limit) for limit in LIMIT_FLAGS),
    Option("tracing", "--tracing", "OPENAPI2MCP_TRACING", "choice",
           "OpenTelemetry traces, exported as the OTEL_* variables say (the otel extra): auto is on when "
           "OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or OTEL_TRACES_EXPORTER is set and the "
           "extra is installed; on requires the extra.", example="off", default="auto", choices=("auto", "on", "off"),
           metavar="auto|on|off", section="telemetry"),
    Option("metrics", "--metrics", "OPENAPI2MCP_METRICS", "switch",
           "HTTP: Prometheus metrics at /metrics, on a listener of its own (--metrics-host, --metrics-port); a "
           "scrape sends $OPENAPI2MCP_METRICS_TOKEN when it is set.", example="on", section="telemetry"),
    Option("metrics_host", "--metrics-host", "OPENAPI2MCP_METRICS_HOST", "text",
           "HTTP: the address /metrics binds; a non-loopback one needs $OPENAPI2MCP_METRICS_TOKEN (or --no-auth).",
           example="0.0.0.0", default="127.0.0.1", metavar="HOST", section="telemetry"),
    Option("metrics_port", "--metrics-port", "OPENAPI2MCP_METRICS_PORT", "int", "HTTP: the port /metrics binds.",
           example="9100", default=9464, bounds=(0, 65535), metavar="PORT", section="telemetry"),
)

CHECK: Final = Option("check", "--check", "", "switch",
                      "Check the configuration (upstream variables, auth, hosts) as for serving, and exit: 0 when it "
                      "is usable, 2 with the problem.", example="")
"""`--check`, an action of both commands: not a setting, so it has no variable."""

ENV_ONLY: Final = (
    ("OPENAPI2MCP_AUTH_TOKENS", "secret: comma-separated bearer tokens (16+ characters) HTTP callers send: `token` "
     "(every scope) or `token:scope1 scope2`"),
    ("OPENAPI2MCP_SIGNING_KEY", "secret, 32+ characters: signs cursors, confirmations and dry-run tokens; replicas "
     "must share it (default: random per process)"),
    ("OPENAPI2MCP_METRICS_TOKEN", "secret, 16+ characters: a scrape of /metrics must send it as a bearer token "
     "(default: none on loopback; a non-loopback --metrics-host needs it)"),
    ("OPENAPI2MCP_DEBUG", "set: an internal error prints its traceback"),
)
"""Variables without a flag: secrets never go on a command line."""


@dataclass(frozen=True)
class RunOptions:
    """The run options `openapi2mcp serve` and a package's command share: one meaning, wired in one place.

    The fields are the `dest`s of OPTIONS (the HTTP limits gathered in `http_limits`); `resolve`
    makes one from parsed flags and the environment.
    """

    transport: str = "stdio"
    host: str = "127.0.0.1"
    port: int = 8000
    path: str = "/mcp"
    stateless: bool = False
    allowed_hosts: list[str] | None = None
    allowed_origins: list[str] | None = None
    base_url: str | None = None
    log_level: str = "warning"
    log_format: str = "text"  # text | json (runtime/logs.py)
    no_auth: bool = False
    auth_tokens: str | None = None  # the tokens file
    jwks_url: str | None = None
    issuer: str | None = None
    audience: str | None = None
    auth_server: str | None = None
    resource_url: str | None = None
    scopes: str | None = None  # the local user's (stdio; HTTP without auth); None: every scope
    rate_limit: str | None = None  # the server's, replacing the overlay's upstream.rate_limit
    auto_approve: str | None = None
    audit_log: str | None = None
    sse: bool = False  # HTTP: SSE answers, so 2025-11-25 clients can be asked mid-call
    reload: bool = False  # serve SPEC --reload: recompile on edits (the compile side watches; see docs/authoring.md)
    state: str | None = None  # the shared state store's URL (a secret when it holds a password)
    workers: int = 1  # HTTP: processes on one port
    http_limits: HttpLimits = field(default_factory=HttpLimits)
    tracing: str = "auto"  # auto | on | off (docs/telemetry.md)
    metrics: bool = False
    metrics_host: str = "127.0.0.1"
    metrics_port: int = 9464


_LIMITS: Final = frozenset(f.name for f in dataclasses.fields(HttpLimits))


def resolve(given: Mapping[str, Any], environ: Mapping[str, str]) -> RunOptions:
    """RunOptions from the parsed flags (`dest` -> raw value; None, False or absent: not given) and the environment."""
    values: dict[str, Any] = {}
    limits: dict[str, Any] = {}
    for option in OPTIONS:
        (limits if option.dest in _LIMITS else values)[option.dest] = option.value(given.get(option.dest), environ)
    try:
        values["http_limits"] = HttpLimits(**limits)
    except ValueError as e:
        raise UsageError(str(e)) from None
    options = RunOptions(**values)
    if options.transport == "http" and not is_loopback(options.host) and not options.allowed_hosts:
        raise UsageError(
            f"serving on {options.host} (not loopback) needs the Host names clients use: set "
            "OPENAPI2MCP_ALLOWED_HOSTS (comma-separated, e.g. mcp.example.com,localhost) or pass --allowed-host "
            "('*' turns the check off)"
        )
    return options


def path_flags() -> frozenset[str]:
    """The flags whose value is a file."""
    return frozenset(o.flag for o in OPTIONS if o.is_path)


def options_markdown(options: Sequence[Option] = OPTIONS) -> str:
    """The option table of docs/build.md and of a package's README: flag, variable, default, meaning."""
    rows = ["| flag | variable | default | meaning |", "|---|---|---|---|"]
    for o in options:
        flag = f"`{o.flag}{' ' + o.metavar if o.metavar else ''}`" + (f", `{o.short}`" if o.short else "")
        rows.append(f"| {_md(flag)} | `{o.env}` | {_md(o.default_text)} | {_md(o.help)} |")
    rows += [f"| — | `{name}` | — | {_md(text)} |" for name, text in ENV_ONLY]
    return "\n".join(rows) + "\n"


def _md(text: str) -> str:
    return text.replace("|", "\\|")  # a table cell: GitHub splits cells at a bare | even inside `code`
