"""The command of a frozen server package (what `openapi2mcp build` generates).

A generated package is a thin shell: `<module>/manifest.json` (the frozen Manifest),
`<module>/build.json` (provenance) and a `__main__.py` whose `main()` calls `run("<module>")`.
The logic lives here, versioned with the runtime, so a package gets runtime fixes by upgrading
openapi2mcp-tools within its pin, and every package behaves the same way.

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
    --log-level L            OPENAPI2MCP_LOG_LEVEL      (info)
                             OPENAPI2MCP_AUTH_TOKENS / OPENAPI2MCP_AUTH_TOKENS_FILE (secrets: env only)

HTTP auth (interim, until the safety work's MCP-side auth lands in the runtime): callers must
send `Authorization: Bearer <token>` with one of the static tokens of OPENAPI2MCP_AUTH_TOKENS
(comma-separated) or OPENAPI2MCP_AUTH_TOKENS_FILE (one per line). Serving on a non-loopback
address without tokens is refused unless `--no-auth` says so explicitly. `GET /healthz` is open.
"""

from __future__ import annotations

import argparse
import hmac
import json
import os
import sys
from collections.abc import Awaitable, Callable, Iterable, Mapping, MutableMapping, Sequence
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, NoReturn

if TYPE_CHECKING:
    from openapi2mcp.manifest import Manifest

__all__ = ["AUTH_TOKENS_FILE_VAR", "AUTH_TOKENS_VAR", "BearerAuth", "auth_tokens", "main", "run"]

ENV_PREFIX: Final = "OPENAPI2MCP_"
AUTH_TOKENS_VAR: Final = "OPENAPI2MCP_AUTH_TOKENS"
AUTH_TOKENS_FILE_VAR: Final = "OPENAPI2MCP_AUTH_TOKENS_FILE"
NO_AUTH_VAR: Final = "OPENAPI2MCP_NO_AUTH"
MIN_TOKEN_CHARS: Final = 16
OPEN_PATHS: Final = frozenset({"/healthz"})
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
        f"HTTP callers authenticate with a bearer token from ${AUTH_TOKENS_VAR} or ${AUTH_TOKENS_FILE_VAR}. "
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
    p.add_argument("--base-url", default=None, help="Override the upstream base URL (normally set by its env var).")
    p.add_argument("--log-level", default=_env(environ, "LOG_LEVEL", "info"),
                   help="Log level for stderr (default info). Env: OPENAPI2MCP_LOG_LEVEL")
    p.add_argument("--version", action="store_true", help="Print the version and the manifest hash, and exit.")
    p.add_argument("--info", action="store_true",
                   help="Print the build record (sources, hashes, environment variables) as JSON, and exit.")
    p.add_argument("--check", action="store_true",
                   help="Check the configuration (environment, auth) as for serving, and exit 0 when it is usable.")
    return p


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


# ============================================================================ auth


def auth_tokens(environ: Mapping[str, str]) -> list[str]:
    """The static bearer tokens from the environment (never from flags: they would show in `ps`)."""
    tokens = [t for t in environ.get(AUTH_TOKENS_VAR, "").replace(",", " ").split() if t]
    path = environ.get(AUTH_TOKENS_FILE_VAR, "").strip()
    if path:
        try:
            text = Path(path).read_text(encoding="utf-8")
        except OSError as e:
            raise UsageError(f"{AUTH_TOKENS_FILE_VAR}: cannot read {path}: {e.strerror}") from None
        for line in text.splitlines():
            line = line.split("#", 1)[0].strip()
            if line:
                tokens.append(line)
    weak = [t for t in tokens if len(t) < MIN_TOKEN_CHARS]
    if weak:
        raise UsageError(f"auth tokens must have at least {MIN_TOKEN_CHARS} characters ({len(weak)} too short)")
    return tokens


class BearerAuth:
    """ASGI middleware: requests need `Authorization: Bearer <one of the tokens>`; /healthz is open.

    Interim: the safety work replaces this with the runtime's own auth (scopes, JWT, protected
    resource metadata); the environment variables and `--no-auth` stay.
    """

    def __init__(self, app: ASGIApp, tokens: Iterable[str], open_paths: Iterable[str] = OPEN_PATHS) -> None:
        self.app = app
        self.tokens = [t.encode() for t in tokens]
        self.open_paths = frozenset(open_paths)

    def allowed(self, header: bytes) -> bool:
        scheme, _, token = header.partition(b" ")
        token = token.strip()
        if scheme.lower() != b"bearer" or not token:
            return False
        found = False
        for candidate in self.tokens:  # compare with every token: timing does not tell which matched
            found |= hmac.compare_digest(token, candidate)
        return found

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get("path") in self.open_paths:
            await self.app(scope, receive, send)
            return
        header = next((v for k, v in scope.get("headers", []) if k == b"authorization"), b"")
        if self.allowed(header):
            await self.app(scope, receive, send)
            return
        body = json.dumps({"error": "unauthorized", "error_description": "a valid bearer token is required"}).encode()
        await send({
            "type": "http.response.start",
            "status": 401,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                (b"www-authenticate", b'Bearer realm="mcp", error="invalid_token"'),
            ],
        })
        await send({"type": "http.response.body", "body": body})


def _http_auth(host: str, no_auth: bool, environ: Mapping[str, str]) -> list[str]:
    tokens = auth_tokens(environ)
    if tokens or no_auth or host in _LOOPBACK:
        return tokens
    raise UsageError(
        f"serving on {host} (not loopback) needs auth: set {AUTH_TOKENS_VAR} (comma-separated tokens of at "
        f"least {MIN_TOKEN_CHARS} characters) or {AUTH_TOKENS_FILE_VAR}, or pass --no-auth "
        f"({NO_AUTH_VAR}=1) to serve without"
    )


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
        from openapi2mcp.upstream import ConfigError

        if isinstance(e, ConfigError):
            _fail(prog, f"error: {e}", 2)
        if env.get("OPENAPI2MCP_DEBUG"):
            raise
        _fail(prog, f"internal error ({type(e).__name__}: {e}); rerun with OPENAPI2MCP_DEBUG=1 for the traceback", 1)


def _run(package: str, prog: str, info: dict[str, Any], args: argparse.Namespace, env: Mapping[str, str]) -> None:
    if args.version:
        print(f"{prog} {info.get('version', '?')} (openapi2mcp {info.get('openapi2mcp', '?')}, "
              f"manifest {info.get('manifest', {}).get('content_hash', '?')})")
        return
    manifest = load_manifest(package)
    if args.base_url:
        upstream = manifest.upstream.model_copy(update={"base_url": args.base_url})
        manifest = manifest.model_copy(update={"upstream": upstream})
    if args.info:
        out = dict(info)
        out["environment_set"] = sorted(v["name"] for v in info.get("environment", []) if v["name"] in env)
        sys.stdout.write(json.dumps(out, indent=2, ensure_ascii=False) + "\n")
        return

    from openapi2mcp.runtime import Runtime, configure_logging, http_app, transport_security

    configure_logging(args.log_level)
    port = _port(args, env)
    hosts = args.allowed_host if args.allowed_host is not None else _env_list(env, "ALLOWED_HOSTS")
    origins = args.allowed_origin if args.allowed_origin is not None else _env_list(env, "ALLOWED_ORIGINS")
    listed = len([t for t in manifest.tools if t.risk != "forbidden"])
    if args.transport == "http" and args.host not in _LOOPBACK and not hosts:
        raise UsageError(
            f"serving on {args.host} (not loopback) needs the Host names clients use: set OPENAPI2MCP_ALLOWED_HOSTS "
            "(comma-separated, e.g. mcp.example.com,localhost) or pass --allowed-host ('*' turns the check off)"
        )
    if args.check:
        import anyio

        runtime = Runtime(manifest, environ=env)  # resolves the upstream settings: a missing variable raises
        anyio.run(runtime.aclose)
        if args.transport == "http":
            transport_security(args.host, hosts or None, origins or None)
            _http_auth(args.host, args.no_auth, env)
        print(f"{prog}: configuration ok ({listed} tool(s), transport {args.transport})",
              file=sys.stderr)
        return

    import anyio

    if args.transport == "stdio":
        from openapi2mcp.runtime import serve_stdio

        anyio.run(lambda: serve_stdio(manifest))
        return

    tokens = _http_auth(args.host, args.no_auth, env)
    app: ASGIApp = http_app(manifest, host=args.host, path=args.path, stateless=args.stateless,
                            allowed_hosts=hosts or None, allowed_origins=origins or None)
    if tokens:
        app = BearerAuth(app, tokens)
    where = f"[{args.host}]" if ":" in args.host else args.host
    print(f"{prog}: serving {listed} tool(s) at http://{where}:{port}{args.path} "
          f"(auth: {'bearer token' if tokens else 'none'})", file=sys.stderr)
    anyio.run(lambda: _serve_uvicorn(app, args.host, port, args.log_level))


async def _serve_uvicorn(app: ASGIApp, host: str, port: int, log_level: str) -> None:
    import uvicorn

    config = uvicorn.Config(app, host=host, port=port, log_level=log_level.lower(), lifespan="on",
                            timeout_graceful_shutdown=10, server_header=False)
    await uvicorn.Server(config).serve()


def main(package: str | None = None) -> None:
    """`python -m openapi2mcp.package_runner PACKAGE [flags]`, or a generated package's entry point."""
    if package is None:
        if len(sys.argv) < 2:
            _fail("openapi2mcp.package_runner", "usage: python -m openapi2mcp.package_runner PACKAGE [flags]", 2)
        package, argv = sys.argv[1], sys.argv[2:]
        run(package, argv)
        return
    run(package)


if __name__ == "__main__":
    main()
