"""The `openapi2mcp` command.

    openapi2mcp inspect SPEC [--overlay FILE ...] [--all-operations] [--json]
    openapi2mcp compile SPEC [--overlay FILE ...] [--all-operations] -o manifest.json
    openapi2mcp serve   SPEC [--overlay FILE ...] [--transport stdio|http] [--host H] [--port P]
    openapi2mcp serve   --manifest manifest.json [...]
    openapi2mcp demo
    openapi2mcp schema  overlay|manifest|contract
    openapi2mcp init    SPEC [-o overlay.yaml] [--max-tools N] [--json]
    openapi2mcp lint    SPEC --overlay FILE [--client NAME ...] [--format text|json|sarif]
    openapi2mcp diff    OLD_SPEC NEW_SPEC --overlay FILE [--fail-on breaking]   (or two Manifests)
    openapi2mcp call    SPEC --overlay FILE TOOL [JSON | key=value ...]   (or --manifest, --url)
    openapi2mcp --version

Exit codes: 0 ok, 2 bad input (spec, overlay, configuration), 1 a bug in openapi2mcp.
Imports are lazy: `serve --manifest` never loads the compiler, prance or openapi-core.
"""

from __future__ import annotations

import json
import os
import sys
from enum import StrEnum
from inspect import Parameter, Signature, signature
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from openapi2mcp.cli.authoring import register as register_authoring
from openapi2mcp.cli.call import register as register_call
from openapi2mcp.cli.guard import fail as _fail
from openapi2mcp.cli.guard import guarded as _guarded
from openapi2mcp.serving import CHECK, OPTIONS, Option, path_flags, resolve  # stdlib only

if TYPE_CHECKING:
    from openapi2mcp.authoring import Reloader
    from openapi2mcp.compiler import Compiled, Unexposed
    from openapi2mcp.manifest import Manifest

app = typer.Typer(
    name="openapi2mcp",
    help="Turn an OpenAPI description plus a curated overlay into a few safe, task-level MCP tools.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)


def _print_version(value: bool) -> None:
    if value:
        from openapi2mcp import __version__

        typer.echo(f"openapi2mcp {__version__}")
        raise typer.Exit(0)


@app.callback()
def _main(
    version: Annotated[
        bool, typer.Option("--version", "-V", callback=_print_version, is_eager=True,
                           help="Print the version and exit.")
    ] = False,
) -> None:
    """Turn an OpenAPI description plus a curated overlay into a few safe, task-level MCP tools."""


SpecArg = Annotated[str, typer.Argument(help="OpenAPI 3.0/3.1 or Swagger 2.0 document: a file path or an http(s) URL.")]
OverlayOpt = Annotated[
    list[Path] | None,
    typer.Option("--overlay", "-O", help="A tool overlay (openapi2mcp: 1) or an OAI Overlay; repeatable, in order."),
]
AllOpsOpt = Annotated[
    bool, typer.Option("--all-operations", help="Expose every operation as its own tool (no overlay needed).")
]
StrictOpt = Annotated[bool, typer.Option("--strict", help="Validate the spec fully; spec warnings become errors.")]
RemoteOpt = Annotated[
    list[str] | None,
    typer.Option("--allow-remote-refs", help="Allow $refs (and redirects) to this origin (https://host:port), "
                 "host:port or host (every port); repeatable, '*' for any. Default: the spec's own origin only."),
]
FetchTimeoutOpt = Annotated[
    float,
    typer.Option("--fetch-timeout", envvar="OPENAPI2MCP_FETCH_TIMEOUT", show_envvar=False, min=1,
                 help="Seconds a spec given by URL may take to fetch, its remote $refs included."),
]
FETCH_TIMEOUT = 120.0  # = load.FETCH_DEADLINE (not imported here: the CLI starts without the loader)
RefRootOpt = Annotated[
    Path | None,
    typer.Option("--ref-root", help="Folder that file $refs may reach (default: the spec's own folder)."),
]


# ============================================================================ error handling


def _compile(
    spec: str,
    overlays: list[Path] | None,
    all_operations: bool,
    strict: bool,
    remote: list[str] | None,
    quiet: bool = False,
    ref_root: Path | None = None,
    fetch_timeout: float = FETCH_TIMEOUT,
    seal: bool = True,
) -> Compiled:
    return _build(spec, overlays, all_operations, strict, remote, quiet, ref_root, fetch_timeout, seal)[0]


def _build(
    spec: str,
    overlays: list[Path] | None,
    all_operations: bool,
    strict: bool,
    remote: list[str] | None,
    quiet: bool = False,
    ref_root: Path | None = None,
    fetch_timeout: float = FETCH_TIMEOUT,
    seal: bool = True,
) -> tuple[Compiled, list[str]]:
    """The compiled spec and overlays, and the local files they were made from (what `serve --reload` watches)."""
    from openapi2mcp.compiler import LoadOptions, compile_files

    options = LoadOptions(allow_remote_refs=tuple(remote or ()), ref_root=ref_root, fetch_timeout=fetch_timeout,
                          strict=strict)
    made = compile_files(spec, overlays or [], all_operations=all_operations, options=options, seal=seal)
    compiled = made.compiled
    if compiled.warnings and not quiet:
        _print_warnings(compiled)
    return compiled, [*made.spec.files, *(str(p) for p in overlays or [])]


def _print_warnings(compiled: Compiled, limit: int = 10) -> None:
    warnings = compiled.warnings
    typer.echo(f"openapi2mcp: {len(warnings)} spec warning(s):", err=True)
    for w in warnings[:limit]:
        typer.echo(f"  warning: {w}", err=True)
    if len(warnings) > limit:
        typer.echo(f"  ... and {len(warnings) - limit} more (openapi2mcp inspect --warnings lists all)", err=True)


# ============================================================================ inspect / compile


@app.command()
def inspect(
    spec: SpecArg,
    overlay: OverlayOpt = None,
    all_operations: AllOpsOpt = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the tools/list JSON and nothing else.")] = False,
    warnings: Annotated[bool, typer.Option("--warnings", help="List every spec warning.")] = False,
    strict: StrictOpt = False,
    allow_remote_refs: RemoteOpt = None,
    ref_root: RefRootOpt = None,
    fetch_timeout: FetchTimeoutOpt = FETCH_TIMEOUT,
) -> None:
    """Show the tools exactly as an MCP client will see them, with their size."""

    def run() -> None:
        compiled = _compile(spec, overlay, all_operations, strict, allow_remote_refs, quiet=True, ref_root=ref_root,
                            fetch_timeout=fetch_timeout)
        listed = [t for t in compiled.manifest.tools if t.risk != "forbidden"]
        definitions = [t.definition() for t in listed]
        _warn_names(compiled.manifest.server.name, [t.name for t in listed])
        if as_json:
            sys.stdout.write(json.dumps(definitions, indent=2, ensure_ascii=False) + "\n")
            return
        _print_inspect(compiled, definitions)
        if compiled.warnings:
            if warnings:
                for w in compiled.warnings:
                    typer.echo(f"warning: {w}")
            else:
                typer.echo(f"{len(compiled.warnings)} spec warning(s); --warnings lists them")

    _guarded(run)


def _upstream_line(m: Manifest) -> str:
    if m.upstream.spec_server is None:
        return m.upstream.base_url
    return (f"{m.upstream.base_url} (the spec's server is relative, {m.upstream.spec_server!r}: "
            "give the URL with --base-url or OPENAPI2MCP_BASE_URL)")


def _print_inspect(compiled: Compiled, definitions: list[dict[str, Any]]) -> None:
    from openapi2mcp.manifest import CONTRACT_KEY

    m = compiled.manifest
    rows = []
    total = 0
    for tool, d in zip([t for t in m.tools if t.risk != "forbidden"], definitions, strict=True):
        size = len(json.dumps(d, ensure_ascii=False).encode())
        total += size
        ops = ", ".join(f"{s.operation.method} {s.operation.path}" for b in tool.branches for s in b.steps)
        name = tool.name + (f" (written {tool.written_name})" if tool.written_name else "")
        rows.append((name, tool.risk, _essentials(d), ops, size, d["_meta"][CONTRACT_KEY]["sideEffects"]))
    hidden = len(m.tools) - len(definitions)
    typer.echo(f"{m.server.name} {m.server.version}: {len(definitions)} tool(s)"
               + (f" (+{hidden} forbidden, not listed)" if hidden else "")
               + f", upstream {_upstream_line(m)}")
    width = max((len(r[0]) for r in rows), default=4)
    gist = max((len(r[2]) for r in rows), default=4)
    for name, risk, essentials, ops, size, effects in rows:
        typer.echo(f"  {name:<{width}}  {risk:<8}  {essentials:<{gist}}  {size:>8,} B  ~{_tokens(size):>7,} tok  {ops}")
        if effects:
            typer.echo(f"  {'':<{width}}  side effects: {'; '.join(e.rstrip('.') for e in effects)}")
    listing = json.dumps({"tools": definitions}, ensure_ascii=False).encode()
    typer.echo(f"tools/list: {len(listing):,} bytes, ~{_tokens(len(listing)):,} tokens "
               f"(estimate: bytes/4); manifest {m.content_hash[:19]}")
    if m.resources:
        typer.echo(f"{len(m.resources)} resource(s):")
        for r in m.resources:
            kind = "template" if r.is_template else "resource"
            op = f"{r.operation.method} {r.operation.path}"
            typer.echo(f"  {r.uri}  ({kind} {r.name}, {op}" + (f", needs {' '.join(r.permissions)}" if r.permissions
                                                                else "") + ")")
    if m.prompts:
        typer.echo(f"{len(m.prompts)} prompt(s):")
        for p in m.prompts:
            args = ", ".join(a.name + ("*" if a.required else "") for a in p.arguments)
            typer.echo(f"  {p.name}({args})" + (f"  {p.title}" if p.title else ""))


def _essentials(definition: dict[str, Any]) -> str:
    """The contract in a few words: who approves a call (autonomous / confirm / auto-approved), the dry run."""
    from openapi2mcp.manifest import CONTRACT_KEY

    contract = definition["_meta"][CONTRACT_KEY]
    actions = contract.get("actions") or {}

    def which(key: str, value: str) -> str:  # " (merge)": the actions it applies to, when not all
        keys = [a for a, c in actions.items() if c[key] == value]
        return f" ({', '.join(keys)})" if actions and len(keys) < len(actions) else ""

    confirm = contract["confirmation"]
    words = ["autonomous" if contract["autonomous"] else {"required": "confirm", "autoApproved": "auto-approved",
                                                          "none": "not autonomous"}[confirm] + which("confirmation",
                                                                                                    confirm)]
    if contract["dryRun"] != "none":
        words.append(f"dry-run {contract['dryRun']}" + which("dryRun", contract["dryRun"]))
    if contract["stepUp"]:
        words.append("step-up")
    return ", ".join(words)


def _warn_names(server: str, tools: list[str], limit: int = 10) -> None:
    """Names some clients refuse, on stderr (also with --json, whose stdout is the tools array only)."""
    from openapi2mcp.compiler import name_warnings

    lines = name_warnings(server, tools)
    for line in lines[:limit]:
        typer.echo(f"openapi2mcp: warning: {line}", err=True)
    if len(lines) > limit:
        typer.echo(f"openapi2mcp: ... and {len(lines) - limit} more tool name warning(s)", err=True)


def _tokens(size: int) -> int:
    return max(1, round(size / 4))


@app.command("compile")
def compile_cmd(
    spec: SpecArg,
    output: Annotated[Path, typer.Option("--output", "-o", help="Where to write the Manifest JSON.")],
    overlay: OverlayOpt = None,
    all_operations: AllOpsOpt = False,
    strict: StrictOpt = False,
    allow_remote_refs: RemoteOpt = None,
    ref_root: RefRootOpt = None,
    fetch_timeout: FetchTimeoutOpt = FETCH_TIMEOUT,
) -> None:
    """Compile SPEC and overlays into a frozen, hashed Manifest (what `serve --manifest` runs)."""

    def run() -> None:
        compiled = _compile(spec, overlay, all_operations, strict, allow_remote_refs, ref_root=ref_root,
                            fetch_timeout=fetch_timeout)
        text = compiled.manifest.to_json()
        if str(output) == "-":
            sys.stdout.write(text)
            return
        output.parent.mkdir(parents=True, exist_ok=True)
        data = text.encode()
        output.write_bytes(data)  # as bytes: the file hash is over them (write_text would turn \n into \r\n on Windows)
        m = compiled.manifest
        typer.echo(f"wrote {output}: {len(m.tools)} tool(s), {len(data):,} bytes, {m.content_hash}",
                   err=True)

    _guarded(run)


# ============================================================================ serve / demo


def _serve_inputs(
    spec: Annotated[str | None, typer.Argument(help="OpenAPI document (file or URL); or use --manifest.")] = None,
    overlay: OverlayOpt = None,
    manifest: Annotated[
        Path | None, typer.Option("--manifest", "-m", help="Serve a compiled Manifest (no spec parsing).")
    ] = None,
    all_operations: AllOpsOpt = False,
    strict: StrictOpt = False,
    allow_remote_refs: RemoteOpt = None,
    ref_root: RefRootOpt = None,
    fetch_timeout: FetchTimeoutOpt = FETCH_TIMEOUT,
) -> None:
    """The parameters of `serve` that say what to serve; the run options follow from options.py's table."""


def _run_parameter(option: Option) -> Parameter:
    """One run option as a typer parameter: its raw value goes to `resolve`, like the package's argparse flag."""
    names = (option.flag, *([option.short] if option.short else ()))
    kind: Any
    if option.kind == "switch":
        kind, info = bool, typer.Option(*names, help=option.describe(), show_default=False)
    else:
        kind = list[str] | None if option.kind == "list" else str | None
        info = typer.Option(*names, help=option.describe(), metavar=option.metavar, show_default=False)
    default = False if option.kind == "switch" else None
    return Parameter(option.dest, Parameter.KEYWORD_ONLY, default=default,
                             annotation=Annotated[kind, info])


SERVE_EXAMPLES = """\b
Examples:
  openapi2mcp serve api.yaml --overlay overlay.yaml                     # stdio, for a desktop client
  openapi2mcp serve api.yaml --overlay overlay.yaml --transport http --port 8000
  openapi2mcp serve --manifest manifest.json --transport http --sse
  openapi2mcp serve api.yaml --overlay overlay.yaml --reload            # while authoring: every save is served

\b
--reload recompiles when the spec, an overlay or a file the spec includes is saved; a bad edit
prints compile's error and the last good version keeps serving; clients are sent
notifications/tools/list_changed (docs/authoring.md#serve---reload).
"""


def serve(**given: Any) -> None:
    """Serve the tools over MCP (stdio by default, or Streamable HTTP) and forward calls upstream."""
    inputs = {name: given.pop(name) for name in _SERVE_INPUTS.parameters}
    check = bool(given.pop(CHECK.dest))

    def run() -> None:
        options = resolve(given, os.environ)  # bad flags and variables fail before any spec is read
        from openapi2mcp.serving import serve as serve_manifest

        if not options.reload:
            serve_manifest(_compiled_or_read(**inputs, seal=False)[0], options, prog="openapi2mcp", check=check)
            return
        reloader = _reloader(**inputs)
        serve_manifest(reloader.first(), options, prog="openapi2mcp", check=check, beside=reloader.run)

    _guarded(run)


_SERVE_INPUTS = signature(_serve_inputs, eval_str=True)
serve.__signature__ = Signature([  # type: ignore[attr-defined]  # what typer reads
    *(p.replace(kind=Parameter.KEYWORD_ONLY) for p in _SERVE_INPUTS.parameters.values()),
    *(_run_parameter(option) for option in (*OPTIONS, CHECK)),
])
app.command(epilog=SERVE_EXAMPLES)(serve)


def _compiled_or_read(
    spec: str | None,
    overlay: list[Path] | None,
    manifest: Path | None,
    all_operations: bool,
    strict: bool,
    allow_remote_refs: list[str] | None,
    ref_root: Path | None,
    fetch_timeout: float = FETCH_TIMEOUT,
    *,
    seal: bool = True,
) -> tuple[Manifest, list[Unexposed] | None]:
    """The Manifest (compiled, or read with --manifest) and the operations it leaves out (None: not known).

    `seal=False`: a compiled one without its content hash (serving needs none to start: compile_manifest)."""
    from openapi2mcp.manifest import Manifest

    if manifest is not None:
        if spec or overlay:
            _fail("give either SPEC (with --overlay) or --manifest, not both")
        try:
            return Manifest.read(manifest), None
        except FileNotFoundError:
            _fail(f"manifest not found: {manifest}")
        except ValueError as e:
            _fail(f"{manifest}: not a usable manifest: {str(e).splitlines()[0]}")
    if not spec:
        _fail("give a SPEC (with --overlay or --all-operations), or --manifest FILE")
    compiled = _compile(spec, overlay, all_operations, strict, allow_remote_refs, ref_root=ref_root,
                        fetch_timeout=fetch_timeout, seal=seal)
    return compiled.manifest, compiled.unexposed


def _reloader(
    spec: str | None,
    overlay: list[Path] | None,
    manifest: Path | None,
    all_operations: bool,
    strict: bool,
    allow_remote_refs: list[str] | None,
    ref_root: Path | None,
    fetch_timeout: float = FETCH_TIMEOUT,
) -> Reloader:
    """`serve --reload`: the loop that recompiles SPEC and its overlays as they are edited (authoring/reload.py)."""
    from openapi2mcp.authoring import Reloader

    if manifest is not None or not spec:
        _fail("error: --reload recompiles the spec and its overlays as you edit them: give SPEC --overlay FILE "
              "(a compiled --manifest does not change; leave out --reload or unset OPENAPI2MCP_RELOAD)")
    first = True

    def rebuild() -> tuple[Manifest, list[str]]:
        nonlocal first
        compiled, files = _build(spec, overlay, all_operations, strict, allow_remote_refs, quiet=not first,
                                 ref_root=ref_root, fetch_timeout=fetch_timeout)
        first = False
        return compiled.manifest, files

    return Reloader(rebuild)


@app.command()
def demo(
    serve_it: Annotated[
        bool, typer.Option("--serve", help="Keep serving over HTTP after the tour (for your own MCP client).")
    ] = False,
    port: Annotated[int, typer.Option(help="With --serve: the MCP HTTP port.")] = 8000,
) -> None:
    """Start a bundled example REST API on 127.0.0.1, serve it through openapi2mcp, and call it."""
    from openapi2mcp.cli.demo import run_demo

    _guarded(lambda: run_demo(serve=serve_it, port=port))


# ============================================================================ schema


@app.command()
def schema(
    which: Annotated[str, typer.Argument(help="overlay (the tool overlay format), manifest, or contract (a listed "
                                         "tool's _meta[\"openapi2mcp/contract\"]).")] = "overlay",
) -> None:
    """Print a JSON Schema: the overlay format (for editors), the Manifest, or the tool contract.

    Examples:

        openapi2mcp schema overlay > overlay.schema.json

        openapi2mcp schema contract   # what every tools/list entry carries in _meta (docs/contract.md)
    """
    if which == "overlay":
        from openapi2mcp.overlay import overlay_json_schema

        data = overlay_json_schema()
    elif which == "manifest":
        from openapi2mcp.manifest import Manifest

        data = Manifest.model_json_schema(by_alias=True)
    elif which == "contract":
        from openapi2mcp.manifest import contract_json_schema

        data = contract_json_schema()
    else:
        _fail(f"unknown schema {which!r}: use overlay, manifest or contract")
    sys.stdout.write(json.dumps(data, indent=2, ensure_ascii=False) + "\n")


# ============================================================================ build / config


class LockChoice(StrEnum):
    auto = "auto"
    uv = "uv"
    pins = "pins"


class ClientChoice(StrEnum):
    claude = "claude"
    vscode = "vscode"
    cursor = "cursor"


@app.command()
def build(
    spec: Annotated[str | None, typer.Argument(help="OpenAPI document (file or URL); or use --manifest.")] = None,
    overlay: OverlayOpt = None,
    manifest: Annotated[
        Path | None, typer.Option("--manifest", "-m", help="Build from a compiled Manifest (no spec parsing).")
    ] = None,
    out: Annotated[Path | None, typer.Option("--out", "-o", help="The package directory (default: dist/NAME).")] = None,
    name: Annotated[
        str | None, typer.Option(help="Package, command and image name (default: the server name + '-mcp').")
    ] = None,
    version: Annotated[
        str | None, typer.Option("--version", help="Package version (default: the API's version).")
    ] = None,
    base_image: Annotated[str, typer.Option(help="The Dockerfile's base image.")] = "python:3.12-slim",
    runtime_wheel: Annotated[
        Path | None,
        typer.Option(help="The openapi2mcp-runtime wheel to ship (default: written from this openapi2mcp's "
                     "run-time modules)."),
    ] = None,
    lock: Annotated[
        LockChoice,
        typer.Option(help="requirements.lock: uv (hashes, needs uv and the index), pins (installed versions), "
                     "auto (uv when installed)."),
    ] = LockChoice.auto,
    with_extras: Annotated[
        list[str] | None,
        typer.Option("--with", help="An extra of openapi2mcp-runtime to install: redis (redis-py for --state, and "
                     "k8s/redis/), otel (OpenTelemetry traces, docs/telemetry.md); repeatable."),
    ] = None,
    mcp_name: Annotated[
        str | None,
        typer.Option(help="The MCP Registry name (io.github.USER/NAME or com.example/NAME) in server.json, the "
                     "README's mcp-name and the image label (default: the anonymous test namespace)."),
    ] = None,
    image: Annotated[
        str | None,
        typer.Option(help="The image repository server.json lists, e.g. ghcr.io/acme/notes-mcp (tag: the version; "
                     "default: the package name)."),
    ] = None,
    remote_url: Annotated[
        str | None, typer.Option(help="A deployed Streamable HTTP endpoint server.json lists too (https://...).")
    ] = None,
    all_operations: AllOpsOpt = False,
    strict: StrictOpt = False,
    allow_remote_refs: RemoteOpt = None,
    ref_root: RefRootOpt = None,
    fetch_timeout: FetchTimeoutOpt = FETCH_TIMEOUT,
) -> None:
    """Freeze the tools into a server package: pyproject, Manifest, lock, Dockerfile, k8s/, server.json (build.md)."""

    def run() -> None:
        import time

        from openapi2mcp.build import build_package, default_name, package_name

        started = time.monotonic()
        from openapi2mcp.authoring import catalog_files

        m, unexposed = _compiled_or_read(spec, overlay, manifest, all_operations, strict, allow_remote_refs, ref_root,
                                         fetch_timeout)
        target = out or Path("dist") / (package_name(name) if name else default_name(m))
        result = build_package(m, target, name=name, version=version, base_image=base_image,
                               runtime_wheel_file=runtime_wheel, lock=lock.value, extras=with_extras or (),
                               mcp_name=mcp_name, image=image, remote_url=remote_url,
                               catalog=catalog_files(m, unexposed))
        for w in result.warnings:
            typer.echo(f"openapi2mcp: warning: {w}", err=True)
        typer.echo(f"wrote {target}: {result.name} {result.version}, {len(result.files)} files, "
                   f"lock: {result.lock_method}, {time.monotonic() - started:.1f} s", err=True)
        venv = f".venv-{result.name}"  # its own environment: openapi2mcp-runtime and -tools hold the same files
        typer.echo(f"  python -m venv {venv} && {venv}/bin/pip install --find-links {target}/wheels {target} && "
                   f"{venv}/bin/{result.name} --help\n"
                   f"  docker build -t {result.name}:{result.version} {target}", err=True)

    _guarded(run)


@app.command()
def config(
    client: Annotated[ClientChoice, typer.Argument(help="claude (Claude Desktop), vscode or cursor.")],
    args: Annotated[
        list[str] | None, typer.Argument(help="More arguments for --command (after --).", show_default=False)
    ] = None,
    name: Annotated[str | None, typer.Option(help="The server's key in the client configuration.")] = None,
    command: Annotated[
        str | None, typer.Option(help="stdio: the command that starts the server (split like a shell).")
    ] = None,
    url: Annotated[str | None, typer.Option(help="HTTP: the MCP endpoint, e.g. https://mcp.example.com/mcp.")] = None,
    env: Annotated[
        list[str] | None, typer.Option("--env", "-e", help="stdio: KEY=VALUE for the server (repeatable).")
    ] = None,
    header: Annotated[list[str] | None, typer.Option(help="HTTP: KEY=VALUE header (repeatable).")] = None,
    token_env: Annotated[
        str | None, typer.Option(help="HTTP: the bearer token comes from this variable (or a prompt in VS Code).")
    ] = None,
    package: Annotated[
        Path | None, typer.Option(help="A package made by `openapi2mcp build`: its name, command and variables.")
    ] = None,
) -> None:
    """Print the JSON a client needs to start or reach the server (Claude Desktop, VS Code, Cursor)."""

    def run() -> None:
        import shlex

        from openapi2mcp.build import client_config, package_client_defaults

        key: str | None = None
        cmd: str | None = None
        variables: dict[str, str] = {}
        if package is not None:
            key, cmd, variables = package_client_defaults(package)
        words = shlex.split(command) if command else ([cmd] if cmd and not url else [])
        words = _absolute_paths(words + list(args or []))
        server = name or key
        if not server:
            _fail("give --name (the server's key in the client configuration) or --package")
        env_map = {**(variables if not url else {}), **_pairs(env, "--env")}
        data = client_config(client.value, server, command=words, env=env_map, url=url,
                             headers=_pairs(header, "--header"), token_env=token_env)
        sys.stdout.write(json.dumps(data, indent=2, ensure_ascii=False) + "\n")

    _guarded(run)


# Options of `openapi2mcp serve` (and of built packages) whose value is a file or folder.
_PATH_OPTIONS = frozenset({"--overlay", "-O", "--manifest", "-m", "--ref-root"}) | path_flags()


def _absolute_paths(words: list[str]) -> list[str]:
    """The command with its file paths absolute: a client starts the server in a folder of its own choosing.

    Made absolute: the values of the path options (`--overlay F`, `--manifest=F`, ...), a command
    given by a relative path (`.venv/bin/openapi2mcp`), and any other argument that names an
    existing file or folder here (the SPEC). URLs, `-` and bare command names stay as they are.
    """
    out: list[str] = []
    path_value = False
    for i, word in enumerate(words):
        option, eq, value = word.partition("=")
        if path_value:
            word = _absolute(word)
        elif eq and option in _PATH_OPTIONS:
            word = f"{option}={_absolute(value)}"
        elif i == 0:
            word = _absolute(word) if "/" in word or os.sep in word else word
        elif not word.startswith("-") and Path(word).exists():
            word = _absolute(word)
        path_value = not path_value and word in _PATH_OPTIONS
        out.append(word)
    return out


def _absolute(path: str) -> str:
    if not path or path == "-" or "://" in path or path.startswith("$"):
        return path  # stderr, a URL, a variable the client expands
    return os.path.abspath(os.path.expanduser(path))


def _pairs(items: list[str] | None, flag: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep or not key:
            _fail(f"{flag} {item!r}: expected KEY=VALUE")
        out[key] = value
    return out


register_authoring(app)  # init, lint, diff (cli/authoring.py)
register_call(app)  # call (cli/call.py)


def main() -> None:
    app()


if __name__ == "__main__":
    main()
