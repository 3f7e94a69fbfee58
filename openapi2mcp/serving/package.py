"""The command of a frozen server package (what `openapi2mcp build` generates), and `serve`.

A generated package is a thin shell: `<module>/manifest.json` (the frozen Manifest),
`<module>/build.json` (provenance) and a `__main__.py` whose `main()` calls `run("<module>")`.
The logic lives here, versioned with the runtime, so a package gets runtime fixes by upgrading
openapi2mcp-runtime within its pin, and every package behaves the same way. `serve` (RunOptions
-> a running server) is also what `openapi2mcp serve` runs once it has a Manifest.

The flags and their OPENAPI2MCP_* variables are options.py's table (the same for `openapi2mcp
serve`); this parser is argparse, built from it, plus `--version` and `--info`.

Run time only: this module imports the Manifest and the runtime, never the compiler, prance or
openapi-core, and no CLI framework (`--version` and `--help` import nothing heavy).

HTTP auth is the runtime's (runtime/auth.py, docs/access.md). Serving on a non-loopback address
without auth is refused unless `--no-auth` says so explicitly. `GET /healthz` is open.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Awaitable, Callable, Coroutine, Mapping, MutableMapping, Sequence
from importlib import resources
from typing import TYPE_CHECKING, Any, NoReturn

from openapi2mcp.runtime import HttpLimits
from openapi2mcp.serving.options import CHECK, OPTIONS, SECTIONS, RunOptions, UsageError, resolve

if TYPE_CHECKING:
    from openapi2mcp.manifest import Manifest
    from openapi2mcp.runtime import AuthOptions, MetricsOptions, Runtime


Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


# ============================================================================ package data


def load_manifest(package: str) -> Manifest:
    """The package's frozen Manifest (its file hash is verified on load)."""
    from openapi2mcp.manifest import Manifest

    return Manifest.from_json(resources.files(package).joinpath("manifest.json").read_bytes(),
                              source=f"{package}/manifest.json")


def build_info(package: str) -> dict[str, Any]:
    """The package's provenance record (build.json), or {} when it has none."""
    ref = resources.files(package).joinpath("build.json")
    if not ref.is_file():
        return {}
    data = json.loads(ref.read_text(encoding="utf-8"))
    return data if isinstance(data, dict) else {}


# ============================================================================ arguments


def parser(prog: str, description: str) -> argparse.ArgumentParser:
    """The package's argparse parser: options.py's table, then `--check`, `--version` and `--info`."""
    p = argparse.ArgumentParser(
        prog=prog,
        description=description,
        epilog="Every option can also be set through its OPENAPI2MCP_* environment variable (the flag wins). "
        "--info lists the variables the upstream needs.",
    )
    groups = {key: p.add_argument_group(title) for key, title in SECTIONS.items()}
    for option in OPTIONS:
        names = [*([option.short] if option.short else []), option.flag]
        text = option.describe().replace("%", "%%")
        group = groups[option.section]
        if option.kind == "switch":
            group.add_argument(*names, dest=option.dest, action="store_true", default=False, help=text)
        else:
            group.add_argument(*names, dest=option.dest, action="append" if option.kind == "list" else "store",
                               default=None, metavar=option.metavar, help=text)
    p.add_argument(CHECK.flag, dest=CHECK.dest, action="store_true", help=CHECK.describe())
    p.add_argument("--version", action="store_true", help="Print the version and the manifest hash, and exit.")
    p.add_argument("--info", action="store_true",
                   help="Print the build record (sources, hashes, environment variables) as JSON, and exit.")
    return p


# ============================================================================ serving


RELOAD_REFUSED = ("--reload / OPENAPI2MCP_RELOAD: reloading recompiles the spec and overlays, so it works only "
                  "while authoring with `openapi2mcp serve SPEC --overlay FILE --reload`; this serves a compiled "
                  "Manifest (leave out --reload, unset OPENAPI2MCP_RELOAD)")


def serve(
    manifest: Manifest, options: RunOptions, *, prog: str, environ: Mapping[str, str] | None = None,
    check: bool = False, beside: Callable[[Runtime], Coroutine[Any, Any, None]] | None = None,
) -> None:
    """Check the configuration and serve `manifest` until interrupted (`check`: only check it).

    Configuration problems raise ConfigError (exit 2) before anything is served: the upstream
    variables (Runtime), the safety and access flags, and for HTTP the allowed hosts and the auth.
    `beside` runs next to the server for as long as it serves, with its Runtime: the reload loop of
    `openapi2mcp serve --reload` (authoring/reload.py), which only the compile side can give, so
    `options.reload` without it (a frozen package, `serve --manifest`) is refused.
    """
    import gc

    # The Manifest lives as long as the server (a big spec's is millions of objects): frozen, the cyclic
    # collector no longer walks it on every full pass, which cost seconds at start-up and pauses later.
    gc.freeze()
    import anyio

    if options.reload and beside is None:
        raise UsageError(RELOAD_REFUSED)

    from openapi2mcp.manifest import BASE_URL_VAR
    from openapi2mcp.runtime import configure_logging
    from openapi2mcp.upstream import ConfigError, relative_server_notice

    env = os.environ if environ is None else environ
    try:
        configure_logging(options.log_level, options.log_format)
    except ValueError as e:  # Unknown level: 'LOUD'
        raise ConfigError(f"--log-level: {e}") from None
    if options.base_url:  # the flag and the variable are one setting; the flag wins
        env = {**env, BASE_URL_VAR: options.base_url}
    http = options.transport == "http"
    env = _workers_key(options, env, prog)
    metrics = _metrics(options, env)
    provider = tracer_provider(manifest, options, env, prog)
    runtime = runtime_for(manifest, options, env, provider)  # resolves the upstream settings: a missing variable raises
    if http:
        from openapi2mcp.runtime import auth_config, require_public_url, transport_security

        security = transport_security(options.host, options.allowed_hosts, options.allowed_origins)  # a non-loopback
        auth = auth_config(auth_options(options), host=options.host, environ=env)  # ... bind needs hosts and auth
        require_public_url(auth, host_checked=security.enable_dns_rebinding_protection)
    if manifest.upstream.auth.per_caller:
        from openapi2mcp.runtime import per_caller_refusal

        refusal = per_caller_refusal(manifest.upstream.auth.type, http=http, auth=auth if http else None)
        if refusal:
            raise ConfigError(refusal)
    _check_workers(options, runtime)
    notice = relative_server_notice(manifest.upstream, runtime.upstream.settings.base_url)
    if notice:
        say(prog, f"note: {notice}", options)
    listed = len(runtime.tool_names)
    reached = anyio.run(_reach_state, runtime, check)  # the store's first answer (its client closes again)
    try:
        if check:
            runtime.check_tools()  # serving builds each definition when first listed
            anyio.run(_check_credential, runtime)  # oauth2_client_credentials: a wrong secret shows now, not later
            say(prog, f"configuration ok ({listed} tool(s), transport {options.transport}"
                f"{', state ' + runtime.state.describe() if runtime.state.shared else ''})", options)
            return
        if reached:
            say(prog, f"note: {reached}", options)
        if not http:
            from openapi2mcp.runtime import serve_stdio

            anyio.run(_alongside, serve_stdio(runtime), beside, runtime)
            return
        shared = f"; state: {runtime.state.describe()}" if runtime.state.shared else ""
        workers = f" with {options.workers} workers" if options.workers > 1 else ""
        anonymous = "" if auth.enabled else "; anonymous callers have " + runtime.local.describe()
        say(prog, f"serving {listed} tool(s) at http://{_bracket(options.host)}:{options.port}{options.path}{workers} "
            f"(auth: {auth.describe()}{anonymous}{shared})"
            + (f"; metrics at http://{_bracket(metrics.host)}:{metrics.port}/metrics" if metrics else "")
            + ("; tracing on" if provider is not None else ""), options)
        if options.workers > 1:
            anyio.run(runtime.aclose)  # each worker builds its own (workers.py)
            from openapi2mcp.serving.workers import serve_workers

            serve_workers(manifest, options, env)
            return
        app = http_app_for(runtime, options, env, metrics)
        anyio.run(_alongside, _serve_uvicorn(app, options.host, options.port, options.log_level, options.http_limits,
                                             json_logs=options.log_format == "json"), beside, runtime,
                  backend_options=fast_loop())
    finally:
        if provider is not None:
            provider.shutdown()  # the spans still batched are exported


def say(prog: str, text: str, options: RunOptions) -> None:
    """A line for the operator on stderr: `prog: text`, or a JSON log line with --log-format json."""
    if options.log_format != "json":
        print(f"{prog}: {text}", file=sys.stderr)
        return
    import logging

    from openapi2mcp.runtime import JsonFormatter

    record = logging.makeLogRecord({"name": "openapi2mcp.serving", "levelname": "INFO", "levelno": logging.INFO,
                                    "msg": text})
    print(JsonFormatter().format(record), file=sys.stderr)


def _bracket(host: str) -> str:
    return f"[{host}]" if ":" in host else host


# the standard variables that say where traces go: with one of them set, --tracing auto is on
OTEL_EXPORT_VARS = ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_TRACES_EXPORTER")


def tracer_provider(manifest: Manifest, options: RunOptions, env: Mapping[str, str], prog: str) -> Any:
    """The TracerProvider `--tracing` asks for (None: no tracing), configured by the OTEL_* variables.

    auto: on when an OTEL_* variable says where traces go and the otel extra is installed (without
    the extra, a note says what to install, and nothing of OpenTelemetry is loaded); on: the extra
    is required; off, or OTEL_SDK_DISABLED=true: no tracing.
    """
    from openapi2mcp.runtime import tracing_installed
    from openapi2mcp.upstream import ConfigError

    configured = [v for v in OTEL_EXPORT_VARS if env.get(v)]
    if options.tracing == "off" or (options.tracing == "auto" and not configured):
        return None
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return None
    if not tracing_installed():
        install = "pip install 'openapi2mcp-runtime[otel]' (or 'openapi2mcp-tools[otel]'; packages: build --with otel)"
        if options.tracing == "on":
            raise ConfigError(f"--tracing on / OPENAPI2MCP_TRACING: the otel extra is not installed: {install}")
        say(prog, f"note: {configured[0]} is set, but the otel extra is not installed, so nothing is traced: "
            f"{install}", options)
        return None
    from openapi2mcp.runtime import provider_from_environment

    return provider_from_environment(manifest.server.name, manifest.server.version)


def _metrics(options: RunOptions, env: Mapping[str, str]) -> MetricsOptions | None:
    """Where /metrics is served (None: metrics are off); a configuration it refuses is a ConfigError."""
    from openapi2mcp.runtime import MetricsOptions, metrics_refusal
    from openapi2mcp.upstream import ConfigError

    if not options.metrics:
        return None
    if options.transport != "http":
        raise ConfigError("--metrics / OPENAPI2MCP_METRICS: /metrics is served with the HTTP transport; add "
                          "--transport http (a stdio server has no listener to scrape)")
    token = env.get(METRICS_TOKEN_VAR, "").strip() or None
    if token is not None and len(token) < 16:
        raise ConfigError(f"{METRICS_TOKEN_VAR}: a token needs 16 characters or more")
    metrics = MetricsOptions(host=options.metrics_host, port=options.metrics_port, token=token)
    refusal = metrics_refusal(metrics, no_auth=options.no_auth)
    if refusal:
        raise ConfigError(refusal)
    return metrics


METRICS_TOKEN_VAR = "OPENAPI2MCP_METRICS_TOKEN"


def http_app_for(runtime: Runtime, options: RunOptions, env: Mapping[str, str],
                 metrics: MetricsOptions | None = None) -> ASGIApp:
    """The Streamable HTTP app the run options describe (one process, or each worker of --workers)."""
    from openapi2mcp.runtime import HttpOptions, auth_config, http_app

    auth = auth_config(auth_options(options), host=options.host, environ=env)
    app: ASGIApp = http_app(runtime, HttpOptions(
        host=options.host, port=options.port, path=options.path, stateless=options.stateless,
        allowed_hosts=options.allowed_hosts, allowed_origins=options.allowed_origins, auth=auth,
        no_auth=options.no_auth, json_response=not options.sse, limits=options.http_limits,
        metrics=metrics))
    return app


async def _check_credential(runtime: Runtime) -> None:
    """`--check`: ask the token endpoint for this server's own token (the caller-bound kinds need a caller)."""
    from openapi2mcp.errors import ToolFailure
    from openapi2mcp.upstream import ConfigError

    upstream = runtime.upstream
    try:
        if upstream.credential is not None and not upstream.spec.auth.per_caller and not upstream.settings.missing:
            await upstream.credential.token(upstream.client)
    except ToolFailure as failure:
        raise ConfigError(f"upstream.auth: {failure.error.message}") from None
    finally:
        await runtime.aclose()


async def _alongside(main: Awaitable[None], beside: Callable[[Runtime], Coroutine[Any, Any, None]] | None,
                     runtime: Runtime) -> None:
    """Serve (`main`), with `beside(runtime)` running next to it until the server stops."""
    if beside is None:
        await main
        return
    import anyio

    async with anyio.create_task_group() as group:
        group.start_soon(beside, runtime)
        await main
        group.cancel_scope.cancel()


async def _reach_state(runtime: Runtime, check: bool) -> str | None:
    """Ask a shared state store once: `--check` fails when it cannot answer; serving starts anyway (and says so)."""
    from openapi2mcp.errors import ToolFailure
    from openapi2mcp.upstream import ConfigError

    if not runtime.state.shared:
        return None
    try:
        await runtime.check_state()
    except ToolFailure as e:
        if check:
            raise ConfigError(f"--state / OPENAPI2MCP_STATE_URL: {e.error.message.split('; nothing', 1)[0]}") from None
        return (f"the state store {runtime.state.describe()} does not answer yet: calls that need shared state fail "
                "with STATE_UNAVAILABLE (retryable) until it does")
    finally:
        await runtime.state.aclose()  # its connections belong to this event loop, not the server's
    return None


def _workers_key(options: RunOptions, env: Mapping[str, str], prog: str) -> Mapping[str, str]:
    """`--workers N` without a signing key (and without --state, which needs one): one key for this run's workers."""
    import secrets

    from openapi2mcp.runtime import SIGNING_KEY_VAR

    if options.workers == 1 or env.get(SIGNING_KEY_VAR) or options.state:
        return env
    print(f"{prog}: note: {SIGNING_KEY_VAR} is not set: the {options.workers} workers share a key made for this run "
          "(cursors and tokens do not survive a restart)", file=sys.stderr)
    return {**env, SIGNING_KEY_VAR: secrets.token_urlsafe(32)}


def _check_workers(options: RunOptions, runtime: Runtime) -> None:
    """`--workers N`: HTTP, stateless, and a shared state when anything would otherwise be per worker."""
    from openapi2mcp.manifest import needs_confirmation
    from openapi2mcp.upstream import ConfigError

    if options.workers == 1:
        return
    if options.reload:
        raise ConfigError(f"--workers {options.workers} cannot --reload: the workers would each serve the Manifest "
                          "they started with; author with one process, then serve with workers")
    if options.metrics:
        raise ConfigError(f"--workers {options.workers} cannot --metrics: each worker would count its own calls "
                          "behind one port; scrape one process per replica instead (docs/telemetry.md)")
    if options.transport != "http":
        raise ConfigError(f"--workers {options.workers} serves Streamable HTTP: add --transport http (stdio is one "
                          "process per client)")
    if not options.stateless:
        raise ConfigError(
            f"--workers {options.workers} needs --stateless: a 2025-11-25 session lives in the worker that opened it, "
            "and the kernel hands each new connection to any worker. For sessions, run one worker per replica "
            "behind a load balancer that keeps a session on its replica (sticky on Mcp-Session-Id)")
    if runtime.state.shared:
        return
    branches = [(t, b) for t in runtime.manifest.tools if t.risk != "forbidden" for b in t.branches]
    needs = []
    if runtime.limiter.active:
        needs.append("rate limits (each worker would allow the full rate)")
    if any(needs_confirmation(b) and b.risk not in runtime.policy.auto_approve for _, b in branches):
        needs.append("confirmations (an answered one could be replayed to another worker)")
    if any(b.dry_run is not None and b.dry_run.mode == "required" for _, b in branches):
        needs.append("required dry runs")
    if needs:
        raise ConfigError(f"--workers {options.workers} without --state: {', '.join(needs)} would be per worker; "
                          "give --state redis://host:6379/0 (OPENAPI2MCP_STATE_URL), or serve one worker")


def runtime_for(manifest: Manifest, options: RunOptions, env: Mapping[str, str], provider: Any = None) -> Runtime:
    """The Runtime the run options describe (the one place serving constructs it)."""
    from openapi2mcp.manifest import parse_rate_limit
    from openapi2mcp.runtime import Runtime, RuntimeOptions, local_caller
    from openapi2mcp.upstream import ConfigError

    try:
        limit = parse_rate_limit(options.rate_limit) if options.rate_limit else None
    except ValueError as e:
        raise ConfigError(f"--rate-limit / OPENAPI2MCP_RATE_LIMIT: {e}") from None
    local = local_caller("http" if options.transport == "http" else "stdio", local_scopes(options.scopes))
    return Runtime(manifest, RuntimeOptions(environ=env, local=local, rate_limit=limit,
                                            auto_approve=options.auto_approve, audit_log=options.audit_log,
                                            list_changed=options.reload, state=options.state,
                                            tracer_provider=provider, metrics=options.metrics))


def auth_options(options: RunOptions) -> AuthOptions:
    """The runtime's auth settings from the run options."""
    from openapi2mcp.runtime import AuthOptions

    return AuthOptions(tokens_file=options.auth_tokens, jwks_url=options.jwks_url, issuer=options.issuer,
                       audience=options.audience, auth_server=options.auth_server,
                       resource_url=options.resource_url, no_auth=options.no_auth)


def local_scopes(text: str | None) -> frozenset[str] | None:
    """The local user's scopes from `--scopes` / OPENAPI2MCP_SCOPES (RunOptions.scopes); None: every scope.

    Set but empty is no scope at all, never every scope: only `*` is (options.py keeps an empty
    OPENAPI2MCP_SCOPES as a value, where other variables treat empty as unset, since "unset"
    grants everything).
    """
    from openapi2mcp.manifest import parse_scopes
    from openapi2mcp.runtime import SCOPES_VAR
    from openapi2mcp.upstream import ConfigError

    if text is None:
        return None
    try:
        return parse_scopes(text)
    except ValueError as e:
        raise ConfigError(f"--scopes / {SCOPES_VAR}: {e}") from None


def fast_loop() -> dict[str, Any]:
    """anyio's asyncio options for serving HTTP: uvloop (libuv, in C) when it is installed, as uvicorn's
    loop="auto" would pick; it runs the same code with a fraction of asyncio's own cost per request."""
    try:
        import uvloop  # noqa: F401  (a dependency on Linux and macOS; absent on Windows)
    except ImportError:
        return {}
    return {"use_uvloop": True}


async def _serve_uvicorn(app: ASGIApp, host: str, port: int, log_level: str, limits: HttpLimits, *,
                         json_logs: bool = False) -> None:
    import uvicorn
    from uvicorn.config import LOGGING_CONFIG

    from openapi2mcp.runtime import uvicorn_settings

    config = uvicorn.Config(app, host=host, port=port, log_level=log_level.lower(), lifespan="on",
                            timeout_graceful_shutdown=10, server_header=False, **uvicorn_settings(limits),
                            log_config=None if json_logs else LOGGING_CONFIG)  # JSON: our handler stays
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
    args = parser(prog, f"MCP server for {title} (generated by openapi2mcp).").parse_args(argv)
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
    serve(manifest, resolve(vars(args), env), prog=prog, environ=env, check=args.check)


def main(package: str | None = None) -> None:
    """`python -m openapi2mcp.serving PACKAGE [flags]`, or a generated package's entry point."""
    if package is None:
        if len(sys.argv) < 2:
            _fail("openapi2mcp.serving", "usage: python -m openapi2mcp.serving PACKAGE [flags]", 2)
        package, argv = sys.argv[1], sys.argv[2:]
        run(package, argv)
        return
    run(package)
