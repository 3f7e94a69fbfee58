"""The command of a frozen server package (what `openapi2mcp build` generates).

A generated package is a thin shell: `<module>/manifest.json` (the frozen Manifest),
`<module>/build.json` (provenance) and a `__main__.py` whose `main()` calls `run("<module>")`.
The logic lives here, versioned with the runtime, so a package gets runtime fixes by upgrading
openapi2mcp-tools within its pin, and every package behaves the same way. `serve` (the run flags
as `RunOptions` -> a running server) is also what `openapi2mcp serve` runs once it has a Manifest.

Run time only: this module imports the Manifest and the runtime, never the compiler, prance or
openapi-core, and no CLI framework (argparse; `--version` and `--help` import nothing heavy).

Every flag has an environment variable (the flag wins), so a container is configured through
the environment alone:

    --transport stdio|http   OPENAPI2MCP_TRANSPORT      (stdio)
    --host H                 OPENAPI2MCP_HOST           (127.0.0.1)
    --port P                 OPENAPI2MCP_PORT           (8000)
    --path /mcp              OPENAPI2MCP_PATH           (/mcp)
    --stateless              OPENAPI2MCP_STATELESS      (false)
    --allowed-host H         OPENAPI2MCP_ALLOWED_HOSTS  (comma-separated)
    --allowed-origin O       OPENAPI2MCP_ALLOWED_ORIGINS
    --no-auth                OPENAPI2MCP_NO_AUTH        (false)
    --auth-tokens FILE       OPENAPI2MCP_AUTH_TOKENS_FILE
    --jwks-url URL           OPENAPI2MCP_JWKS_URL
    --issuer ISS             OPENAPI2MCP_ISSUER
    --audience AUD           OPENAPI2MCP_AUDIENCE
    --auth-server URL        OPENAPI2MCP_AUTH_SERVER
    --resource-url URL       OPENAPI2MCP_RESOURCE_URL
    --scopes "S1 S2"         OPENAPI2MCP_SCOPES         (every scope when unset; "" is none, "*" all)
    --rate-limit 10/s        OPENAPI2MCP_RATE_LIMIT
    --auto-approve RISKS     OPENAPI2MCP_AUTO_APPROVE   (none; high, critical or high,critical)
    --audit-log PATH|-       OPENAPI2MCP_AUDIT_LOG      (off; one JSON line per call, docs/safety.md)
    --sse                    OPENAPI2MCP_SSE            (false; HTTP answers as SSE: 2025-11-25 elicitation)
    --header-timeout S       OPENAPI2MCP_HEADER_TIMEOUT (10; HTTP: seconds for a request's headers, then 408)
    --body-timeout S         OPENAPI2MCP_BODY_TIMEOUT   (30; HTTP: seconds for its body, then 408)
    --keep-alive-timeout S   OPENAPI2MCP_KEEP_ALIVE_TIMEOUT (5; HTTP: idle keep-alive connections)
    --max-connections N      OPENAPI2MCP_MAX_CONNECTIONS (1000; HTTP: 503 past it; 0: no cap)
    --max-sessions-per-caller N  OPENAPI2MCP_MAX_SESSIONS_PER_CALLER (64; HTTP: 429 past it; 0: no cap)
    --log-level L            OPENAPI2MCP_LOG_LEVEL      (info)
                             OPENAPI2MCP_AUTH_TOKENS    (secrets: env only)

HTTP auth is the runtime's (openapi2mcp/auth.py, docs/access.md): static bearer tokens with
scopes from OPENAPI2MCP_AUTH_TOKENS (comma-separated `token` or `token:scope1 scope2`) or the
tokens file, and/or JWTs checked against a JWKS. Serving on a non-loopback address without auth
is refused unless `--no-auth` says so explicitly. `GET /healthz` is open.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Awaitable, Callable, Mapping, MutableMapping, Sequence
from dataclasses import dataclass
from importlib import resources
from typing import TYPE_CHECKING, Any, Final, NoReturn

from openapi2mcp.runtime import ENV_PREFIX, LIMIT_FLAGS, HttpLimits

if TYPE_CHECKING:
    from openapi2mcp.manifest import Manifest
    from openapi2mcp.runtime import AuthOptions


AUTH_TOKENS_VAR: Final = "OPENAPI2MCP_AUTH_TOKENS"  # the same names as openapi2mcp.auth (no import here)
AUTH_TOKENS_FILE_VAR: Final = "OPENAPI2MCP_AUTH_TOKENS_FILE"
NO_AUTH_VAR: Final = "OPENAPI2MCP_NO_AUTH"
_LOOPBACK: Final = ("127.0.0.1", "localhost", "::1")
_TRUE: Final = ("1", "true", "yes", "on")

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


class UsageError(Exception):
    """Bad configuration: printed as one line, exit status 2."""


# ============================================================================ package data


def load_manifest(package: str) -> Manifest:
    """The package's frozen Manifest (its content hash is verified on load)."""
    from openapi2mcp.manifest import Manifest

    return Manifest.from_json(resources.files(package).joinpath("manifest.json").read_bytes())


def build_info(package: str) -> dict[str, Any]:
    """The package's provenance record (build.json), or {} when it has none."""
    ref = resources.files(package).joinpath("build.json")
    if not ref.is_file():
        return {}
    data = json.loads(ref.read_text(encoding="utf-8"))
    return data if isinstance(data, dict) else {}


# ============================================================================ arguments


def _env(environ: Mapping[str, str], name: str, default: str) -> str:
    value = environ.get(ENV_PREFIX + name, "").strip()
    return value or default


def _env_flag(environ: Mapping[str, str], name: str) -> bool:
    return environ.get(ENV_PREFIX + name, "").strip().lower() in _TRUE


def _env_list(environ: Mapping[str, str], name: str) -> list[str]:
    raw = environ.get(ENV_PREFIX + name, "")
    return [item for item in raw.replace(",", " ").split() if item]


def parser(prog: str, description: str, environ: Mapping[str, str]) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=prog,
        description=description,
        epilog="Every flag can also be set through its OPENAPI2MCP_* environment variable (the flag wins); "
        f"HTTP callers authenticate with a bearer token from ${AUTH_TOKENS_VAR} or ${AUTH_TOKENS_FILE_VAR}, "
        "or a JWT (--jwks-url). "
        "--info lists the variables the upstream needs.",
    )
    p.add_argument("--transport", "-t", choices=["stdio", "http"], default=_env(environ, "TRANSPORT", "stdio"),
                   help="stdio (default) or http (Streamable HTTP). Env: OPENAPI2MCP_TRANSPORT")
    p.add_argument("--host", default=_env(environ, "HOST", "127.0.0.1"),
                   help="HTTP: address to bind (default 127.0.0.1). Env: OPENAPI2MCP_HOST")
    p.add_argument("--port", type=int, default=None, help="HTTP: port (default 8000). Env: OPENAPI2MCP_PORT")
    p.add_argument("--path", default=_env(environ, "PATH", "/mcp"),
                   help="HTTP: the MCP endpoint path (default /mcp). Env: OPENAPI2MCP_PATH")
    p.add_argument("--stateless", action="store_true", default=_env_flag(environ, "STATELESS"),
                   help="HTTP: no sessions, every request stands alone (for replicas). Env: OPENAPI2MCP_STATELESS")
    p.add_argument("--allowed-host", action="append", default=None, metavar="HOST",
                   help="HTTP: a Host header value to accept (repeatable). Env: OPENAPI2MCP_ALLOWED_HOSTS")
    p.add_argument("--allowed-origin", action="append", default=None, metavar="ORIGIN",
                   help="HTTP: an Origin to accept (repeatable). Env: OPENAPI2MCP_ALLOWED_ORIGINS")
    p.add_argument("--no-auth", action="store_true", default=_env_flag(environ, "NO_AUTH"),
                   help="HTTP: serve a non-loopback address without bearer-token auth. Env: OPENAPI2MCP_NO_AUTH")
    p.add_argument("--auth-tokens", default=_env(environ, "AUTH_TOKENS_FILE", "") or None, metavar="FILE",
                   help="HTTP: bearer tokens file (YAML/JSON token -> {subject, scopes}, or one per line). "
                   "Env: OPENAPI2MCP_AUTH_TOKENS_FILE")
    p.add_argument("--jwks-url", default=_env(environ, "JWKS_URL", "") or None, metavar="URL",
                   help="HTTP: accept JWTs signed by the keys at this JWKS URL. Env: OPENAPI2MCP_JWKS_URL")
    p.add_argument("--issuer", default=_env(environ, "ISSUER", "") or None,
                   help="HTTP: the JWTs' required issuer. Env: OPENAPI2MCP_ISSUER")
    p.add_argument("--audience", default=_env(environ, "AUDIENCE", "") or None,
                   help="HTTP: the JWTs' required audience (default: --resource-url). Env: OPENAPI2MCP_AUDIENCE")
    p.add_argument("--auth-server", default=_env(environ, "AUTH_SERVER", "") or None, metavar="URL",
                   help="HTTP: the authorization server named in the protected-resource metadata (default: "
                   "--issuer). Env: OPENAPI2MCP_AUTH_SERVER")
    p.add_argument("--resource-url", default=_env(environ, "RESOURCE_URL", "") or None, metavar="URL",
                   help="HTTP: the public URL of the MCP endpoint (default: from each request). "
                   "Env: OPENAPI2MCP_RESOURCE_URL")
    p.add_argument("--scopes", default=None,  # unset vs empty matters here: see local_scopes
                   help='The local user\'s scopes (stdio; HTTP without auth), e.g. "notes:read tasks:write"; '
                   '"*" is every scope (the default when unset), "" is none. Env: OPENAPI2MCP_SCOPES')
    p.add_argument("--rate-limit", default=_env(environ, "RATE_LIMIT", "") or None, metavar="RATE",
                   help="The server's limit on tool calls, e.g. 10/s or 100/min,burst=20,per_caller. "
                   "Env: OPENAPI2MCP_RATE_LIMIT")
    p.add_argument("--auto-approve", default=_env(environ, "AUTO_APPROVE", "") or None, metavar="RISKS",
                   help="Trusted automation: skip the user's confirmation for these risks (high, critical); each "
                   "such call is marked in the audit log. Env: OPENAPI2MCP_AUTO_APPROVE")
    p.add_argument("--audit-log", default=_env(environ, "AUDIT_LOG", "") or None, metavar="PATH",
                   help="One JSON line per tool call and resource read to PATH ('-': stderr); a call whose line "
                   "cannot be written fails closed. Env: OPENAPI2MCP_AUDIT_LOG")
    p.add_argument("--sse", action="store_true", default=_env_flag(environ, "SSE"),
                   help="HTTP: answer with SSE streams instead of JSON, so that 2025-11-25 clients can be asked to "
                   "confirm mid-call. Env: OPENAPI2MCP_SSE")
    limits = p.add_argument_group("HTTP limits (docs/access.md)")
    for name, flag, kind, text in LIMIT_FLAGS:
        limits.add_argument(flag, type=kind, default=None, metavar="N", dest=name,
                            help=f"{text} (default {getattr(HttpLimits, name)}). "
                            f"Env: {ENV_PREFIX}{flag[2:].upper().replace('-', '_')}")
    p.add_argument("--base-url", default=None,
                   help="The URL requests are sent to (default: the manifest's upstream base URL). "
                   "Env: OPENAPI2MCP_BASE_URL")
    p.add_argument("--log-level", default=_env(environ, "LOG_LEVEL", "info"),
                   help="Log level for stderr (default info). Env: OPENAPI2MCP_LOG_LEVEL")
    p.add_argument("--version", action="store_true", help="Print the version and the manifest hash, and exit.")
    p.add_argument("--info", action="store_true",
                   help="Print the build record (sources, hashes, environment variables) as JSON, and exit.")
    p.add_argument("--check", action="store_true",
                   help="Check the configuration (environment, auth) as for serving, and exit 0 when it is usable.")
    return p


def _limit_values(args: argparse.Namespace, environ: Mapping[str, str]) -> HttpLimits:
    """The HTTP limits from the flags, else their variables, else the defaults."""
    values: dict[str, float | int] = {}
    for name, flag, kind, _ in LIMIT_FLAGS:
        given = getattr(args, name)
        if given is None:
            var = flag[2:].upper().replace("-", "_")
            raw = _env(environ, var, "")
            try:
                given = kind(raw) if raw else None
            except ValueError:
                raise UsageError(f"{ENV_PREFIX}{var} must be a number, not {raw!r}") from None
        if given is not None:
            values[name] = given
    try:
        return HttpLimits(**values)  # type: ignore[arg-type]
    except ValueError as e:
        raise UsageError(str(e)) from None


def _port(args: argparse.Namespace, environ: Mapping[str, str]) -> int:
    if args.port is not None:
        return int(args.port)
    raw = _env(environ, "PORT", "8000")
    try:
        port = int(raw)
    except ValueError:
        raise UsageError(f"OPENAPI2MCP_PORT must be a port number, not {raw!r}") from None
    if not 0 <= port <= 65535:
        raise UsageError(f"port {port} is out of range")
    return port


# ============================================================================ serving


@dataclass(frozen=True)
class RunOptions:
    """The run flags `openapi2mcp serve` and a package's command share: one meaning, wired in one place."""

    auth: AuthOptions  # HTTP: static tokens, JWTs, --no-auth
    transport: str = "stdio"
    host: str = "127.0.0.1"
    port: int = 8000
    path: str = "/mcp"
    stateless: bool = False
    allowed_hosts: list[str] | None = None
    allowed_origins: list[str] | None = None
    base_url: str | None = None
    log_level: str = "info"
    scopes: str | None = None  # the local user's (stdio; HTTP without auth)
    rate_limit: str | None = None  # the server's, replacing the overlay's upstream.rate_limit
    auto_approve: str | None = None
    audit_log: str | None = None
    sse: bool = False  # HTTP: SSE answers, so 2025-11-25 clients can be asked mid-call
    http_limits: HttpLimits | None = None  # HTTP: deadlines, connection and session caps (None: the defaults)


def serve(
    manifest: Manifest, options: RunOptions, *, prog: str, environ: Mapping[str, str] | None = None,
    check: bool = False,
) -> None:
    """Check the configuration and serve `manifest` until interrupted (`check`: only check it).

    Configuration problems raise ConfigError (exit 2) before anything is served: the upstream
    variables (Runtime), the safety and access flags, and for HTTP the allowed hosts and the auth.
    """
    import anyio

    from openapi2mcp.manifest import BASE_URL_VAR, parse_rate_limit
    from openapi2mcp.runtime import Runtime, RuntimeOptions, configure_logging, local_caller
    from openapi2mcp.upstream import ConfigError, relative_server_notice

    env = os.environ if environ is None else environ
    try:
        configure_logging(options.log_level)
    except ValueError as e:  # Unknown level: 'LOUD'
        raise ConfigError(f"--log-level: {e}") from None
    if options.base_url:  # the flag and the variable are one setting; the flag wins
        env = {**env, BASE_URL_VAR: options.base_url}
    try:
        limit = parse_rate_limit(options.rate_limit) if options.rate_limit else None
    except ValueError as e:
        raise ConfigError(f"--rate-limit / OPENAPI2MCP_RATE_LIMIT: {e}") from None
    http = options.transport == "http"
    local = local_caller("http" if http else "stdio", local_scopes(options.scopes, env))
    runtime = Runtime(manifest, RuntimeOptions(  # resolves the upstream settings: a missing variable raises
        environ=env, local=local, rate_limit=limit, auto_approve=options.auto_approve, audit_log=options.audit_log))
    if http:
        from openapi2mcp.runtime import HttpOptions, auth_config, http_app, require_public_url, transport_security

        limits = options.http_limits or HttpLimits()
        security = transport_security(options.host, options.allowed_hosts, options.allowed_origins)  # a non-loopback
        auth = auth_config(options.auth, host=options.host, environ=env)  # ... bind needs its hosts and auth
        require_public_url(auth, host_checked=security.enable_dns_rebinding_protection)
    notice = relative_server_notice(manifest.upstream, runtime.upstream.settings.base_url)
    if notice:
        print(f"{prog}: note: {notice}", file=sys.stderr)
    listed = len(runtime.tool_names)
    if check:
        anyio.run(runtime.aclose)
        print(f"{prog}: configuration ok ({listed} tool(s), transport {options.transport})", file=sys.stderr)
        return
    if not http:
        from openapi2mcp.runtime import serve_stdio

        anyio.run(lambda: serve_stdio(runtime))
        return
    app: ASGIApp = http_app(runtime, HttpOptions(
        host=options.host, port=options.port, path=options.path, stateless=options.stateless,
        allowed_hosts=options.allowed_hosts, allowed_origins=options.allowed_origins, auth=auth,
        no_auth=options.auth.no_auth, json_response=not options.sse, limits=limits))
    where = f"[{options.host}]" if ":" in options.host else options.host
    print(f"{prog}: serving {listed} tool(s) at http://{where}:{options.port}{options.path} "
          f"(auth: {auth.describe()}{'' if auth.enabled else '; anonymous callers have ' + local.describe()})",
          file=sys.stderr)
    anyio.run(lambda: _serve_uvicorn(app, options.host, options.port, options.log_level, limits))


def local_scopes(flag: str | None, environ: Mapping[str, str]) -> frozenset[str] | None:
    """The local user's scopes: `--scopes`, else OPENAPI2MCP_SCOPES; None (every scope) only when neither is set.

    Set but empty (`--scopes ""`, `OPENAPI2MCP_SCOPES=`) is no scope at all, never every scope:
    only `*` is. (Other OPENAPI2MCP_* variables treat empty as unset; this one must not, since
    "unset" grants everything.)
    """
    from openapi2mcp.manifest import parse_scopes
    from openapi2mcp.runtime import SCOPES_VAR
    from openapi2mcp.upstream import ConfigError

    text = flag if flag is not None else environ.get(SCOPES_VAR)
    if text is None:
        return None
    try:
        return parse_scopes(text)
    except ValueError as e:
        raise ConfigError(f"--scopes / {SCOPES_VAR}: {e}") from None


async def _serve_uvicorn(app: ASGIApp, host: str, port: int, log_level: str, limits: HttpLimits) -> None:
    import uvicorn

    from openapi2mcp.runtime import uvicorn_settings

    config = uvicorn.Config(app, host=host, port=port, log_level=log_level.lower(), lifespan="on",
                            timeout_graceful_shutdown=10, server_header=False, **uvicorn_settings(limits))
    await uvicorn.Server(config).serve()


# ============================================================================ main


def _fail(prog: str, message: str, code: int) -> NoReturn:
    print(f"{prog}: {message}", file=sys.stderr)
    raise SystemExit(code)


def run(package: str, argv: Sequence[str] | None = None, environ: Mapping[str, str] | None = None) -> None:
    """Parse the flags and serve the package's Manifest (the generated console script calls this)."""
    env = os.environ if environ is None else environ
    info = build_info(package)
    prog = str(info.get("name") or package.replace("_", "-"))
    title = (info.get("server") or {}).get("title") or prog
    args = parser(prog, f"MCP server for {title} (generated by openapi2mcp).", env).parse_args(argv)
    try:
        _run(package, prog, info, args, env)
    except KeyboardInterrupt:
        raise SystemExit(130) from None
    except UsageError as e:
        _fail(prog, f"error: {e}", 2)
    except SystemExit:
        raise
    except Exception as e:
        from openapi2mcp.runtime import describe, leaves
        from openapi2mcp.upstream import ConfigError

        if isinstance(e, ConfigError):
            _fail(prog, f"error: {e}", 2)
        if all(isinstance(x, BrokenPipeError) for x in leaves(e)):  # `--info | head`: the reader left
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            raise SystemExit(0) from None
        if env.get("OPENAPI2MCP_DEBUG"):
            raise
        _fail(prog, f"internal error ({describe(e)}); rerun with OPENAPI2MCP_DEBUG=1 for the traceback", 1)


def _run(package: str, prog: str, info: dict[str, Any], args: argparse.Namespace, env: Mapping[str, str]) -> None:
    if args.version:
        print(f"{prog} {info.get('version', '?')} (openapi2mcp {info.get('openapi2mcp', '?')}, "
              f"manifest {info.get('manifest', {}).get('content_hash', '?')})")
        return
    manifest = load_manifest(package)
    if args.info:
        out = dict(info)
        out["environment_set"] = sorted(v["name"] for v in info.get("environment", []) if v["name"] in env)
        sys.stdout.write(json.dumps(out, indent=2, ensure_ascii=False) + "\n")
        return
    hosts = args.allowed_host if args.allowed_host is not None else _env_list(env, "ALLOWED_HOSTS")
    origins = args.allowed_origin if args.allowed_origin is not None else _env_list(env, "ALLOWED_ORIGINS")
    if args.transport == "http" and args.host not in _LOOPBACK and not hosts:
        raise UsageError(
            f"serving on {args.host} (not loopback) needs the Host names clients use: set OPENAPI2MCP_ALLOWED_HOSTS "
            "(comma-separated, e.g. mcp.example.com,localhost) or pass --allowed-host ('*' turns the check off)"
        )
    from openapi2mcp.runtime import AuthOptions

    limits = _limit_values(args, env)
    auth = AuthOptions(tokens_file=args.auth_tokens, jwks_url=args.jwks_url, issuer=args.issuer,
                       audience=args.audience, auth_server=args.auth_server, resource_url=args.resource_url,
                       no_auth=args.no_auth)
    options = RunOptions(auth=auth, transport=args.transport, host=args.host, port=_port(args, env), path=args.path,
                         stateless=args.stateless, allowed_hosts=hosts or None, allowed_origins=origins or None,
                         base_url=args.base_url, log_level=args.log_level, scopes=args.scopes,
                         rate_limit=args.rate_limit, auto_approve=args.auto_approve, audit_log=args.audit_log,
                         sse=args.sse, http_limits=limits)
    serve(manifest, options, prog=prog, environ=env, check=args.check)


def main(package: str | None = None) -> None:
    """`python -m openapi2mcp.serving PACKAGE [flags]`, or a generated package's entry point."""
    if package is None:
        if len(sys.argv) < 2:
            _fail("openapi2mcp.serving", "usage: python -m openapi2mcp.serving PACKAGE [flags]", 2)
        package, argv = sys.argv[1], sys.argv[2:]
        run(package, argv)
        return
    run(package)
