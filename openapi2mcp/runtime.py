"""The MCP server over a Manifest: tools/list, tools/call, stdio and Streamable HTTP.

`Runtime` is the core and works without MCP: `await runtime.call(name, arguments)` validates the
arguments (JSON Schema 2020-12, compiled once per tool), picks the branch (single / action /
presence), runs its steps through `upstream.Upstream`, shapes the result (`shape.Shaper`) and
returns a `CallToolResult` (`result`). `build_server()` puts it behind the SDK's low-level
`Server`; `serve_stdio`, `serve_http` and `http_app` serve it.

Policies worth knowing:

* Schemas are compiled into validators once, at start-up, but not themselves checked against the
  JSON Schema metaschema unless `check_schemas=True`: Manifests come from the compiler, and the
  check costs ~30 ms a schema (15 s for Stripe's 833). Hand-built Manifests should turn it on.

* A missing `${VAR}` in the base URL, or a missing secret (auth, credential headers), is a
  `ConfigError` before serving: a server that lists tools it cannot run hides the real problem.
  `require_secrets=False` relaxes the second case (tools are listed, calls fail with
  CONFIGURATION_ERROR naming the variable) for introspection without credentials.
* Tools with risk "forbidden" are never listed and calling one is exactly an unknown tool.
* Protocol errors (unknown tool, bad cursor) are JSON-RPC errors (-32602); everything that goes
  wrong while running a tool is an `isError` result with a stable code and a traceId. No
  exception text reaches a client: internal failures are logged (redacted) with the traceId.
* Top-level `default`s of the input schema are sent when an argument is omitted (after branch
  selection, so defaults never make a `presence` branch match).
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import copy
import json
import logging
import os
import re
import sys
import time
import traceback
import uuid
from collections.abc import AsyncIterator, Mapping
from typing import Any, Final

import anyio
import jmespath.exceptions
import mcp_types as types
from jsonschema import SchemaError, ValidationError
from jsonschema.protocols import Validator
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server
from mcp.server.transport_security import TransportSecuritySettings
from mcp.shared.exceptions import MCPError
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Mount, Route

from openapi2mcp import result as results
from openapi2mcp.access import Caller, caller_from_context
from openapi2mcp.errors import ErrorCode, ToolFailure, did_you_mean
from openapi2mcp.manifest import Branch, Manifest, OperationSpec, ToolSpec
from openapi2mcp.paginate import Paginator
from openapi2mcp.resources import Catalog
from openapi2mcp.shape import (
    Shaped,
    Shaper,
    compile_expression,
    compile_schema,
    describe_error,
    error_path,
    search,
    truthy,
)
from openapi2mcp.signing import SIGNING_KEY_VAR, Signer, SigningKeyError
from openapi2mcp.upstream import ConfigError, Payload, Upstream, UpstreamResponse, decode

__all__ = ["ConfigError", "Runtime", "configure_logging", "http_app", "serve_http", "serve_stdio"]

log = logging.getLogger("openapi2mcp.runtime")

MAX_REPORTED_PROBLEMS: Final = 5
DEFAULT_MAX_BINARY_BYTES: Final = 4_000_000
_LOOPBACK: Final = ("127.0.0.1", "localhost", "::1")


def configure_logging(level: str | int = "INFO") -> None:
    """Send openapi2mcp logs to stderr (stdout belongs to the protocol on stdio)."""
    logger = logging.getLogger("openapi2mcp")
    if not any(getattr(h, "_openapi2mcp", False) for h in logger.handlers):
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        handler._openapi2mcp = True  # type: ignore[attr-defined]
        logger.addHandler(handler)
    logger.setLevel(level.upper() if isinstance(level, str) else level)


def _invalid(message: str, field: str | None = None) -> ToolFailure:
    return ToolFailure.of(ErrorCode.ARGUMENT_INVALID, message, field=field)


# ============================================================================ per-tool state


class _Tool:
    """A callable tool: its spec plus everything compiled once at start-up."""

    def __init__(self, spec: ToolSpec, signer: Signer, *, check: bool) -> None:
        self.spec = spec
        try:
            # `check`: validate the schemas themselves against the metaschema (see compile_schema)
            self.arguments = compile_schema(spec.input_schema, formats=True, check=check)
            self.shaper = Shaper(spec.response, spec.output_schema, check=check)
            self.shapers = {
                b.key: Shaper(b.response, spec.output_schema, check=check) for b in spec.branches if b.response
            }
            self.pagers = {b.key: Paginator(spec.name, b.pagination, signer) for b in spec.branches if b.pagination}
            for expr in _expressions(spec):
                compile_expression(expr)
            self.definition = types.Tool.model_validate(spec.definition())
        except SchemaError as e:
            raise ConfigError(f"tool {spec.name}: invalid JSON Schema: {e.message}") from None
        except jmespath.exceptions.JMESPathError as e:
            raise ConfigError(f"tool {spec.name}: invalid JMESPath expression: {e}") from None
        except ValueError as e:  # pydantic: a definition MCP clients would reject
            raise ConfigError(f"tool {spec.name}: invalid tool definition: {e}") from None
        if not spec.branches:
            raise ConfigError(f"tool {spec.name}: no branches to run")
        self.branches = [b for b in spec.branches if b.risk != "forbidden"]

    def shaper_of(self, branch: Branch) -> Shaper:
        return self.shapers.get(branch.key, self.shaper)


def _expressions(spec: ToolSpec) -> list[str]:
    found: list[str] = []
    for branch in spec.branches:
        found += [branch.output] if branch.output else []
        found += [branch.response.select] if branch.response and branch.response.select else []
        paging = branch.pagination
        if paging is not None:
            found += [e for e in (paging.items, paging.next, paging.total, paging.item_select) if e and e != "@"]
        for step in branch.steps:
            found += [step.when] if step.when else []
            found += [p.expr for p in step.operation.params if p.expr]
            body = step.operation.body
            if body is not None:
                found += [body.expr] if body.expr else []
                found += list(body.exprs.values())
    return found


# ============================================================================ argument checks


def _problems(error: ValidationError) -> list[tuple[str, str]]:
    """(field, reason) pairs for one schema error; required/unknown are named precisely."""
    where = error_path(error.absolute_path)

    def at(name: str) -> str:
        return f"{where}.{name}" if where else name

    instance = error.instance
    if error.validator == "required" and isinstance(instance, dict):
        required = error.validator_value if isinstance(error.validator_value, list) else []
        missing = [r for r in required if r not in instance]
        return [(at(m), "required argument missing") for m in missing]
    if error.validator == "additionalProperties" and isinstance(instance, dict):
        schema = error.schema if isinstance(error.schema, dict) else {}
        known = list(schema.get("properties", {}))
        patterns = list(schema.get("patternProperties", {}))
        extras = [k for k in instance if k not in known and not any(re.search(p, k) for p in patterns)]
        out = []
        for extra in extras:
            hint = did_you_mean(extra, known)
            out.append((at(extra), "unknown argument" + (f", {hint}" if hint else "")))
        return out or [(where, describe_error(error))]
    return [(where, describe_error(error))]


def check_arguments(validator: Validator, arguments: Mapping[str, Any]) -> None:
    """Raise ARGUMENT_INVALID naming every problem (bounded), `field` = the first one's path."""
    by_field: dict[str, str] = {}
    for error in validator.iter_errors(arguments):
        for field, reason in _problems(error):
            by_field.setdefault(field, reason)  # one reason per field keeps the message short
    if not by_field:
        return
    problems = sorted(by_field.items())
    shown = problems[:MAX_REPORTED_PROBLEMS]
    message = "; ".join(f"{field}: {reason}" if field else reason for field, reason in shown)
    if len(problems) > len(shown):
        message += f" (and {len(problems) - len(shown)} more)"
    raise _invalid(message, shown[0][0] or None)


def _with_defaults(schema: Mapping[str, Any], arguments: dict[str, Any]) -> dict[str, Any]:
    properties = schema.get("properties")
    if not isinstance(properties, dict):
        return arguments
    out = dict(arguments)
    for name, prop in properties.items():
        if name not in out and isinstance(prop, dict) and "default" in prop:
            out[name] = copy.deepcopy(prop["default"])
    return out


def _present(arguments: Mapping[str, Any], name: str) -> bool:
    return arguments.get(name) is not None


def choose_branch(tool: _Tool, arguments: Mapping[str, Any]) -> Branch:
    """Dispatch: single, action (by `action_arg`), presence (first `when` all given)."""
    spec = tool.spec
    if not tool.branches:
        raise _invalid(f"{spec.name} cannot be called: every way to run it is forbidden")
    if spec.dispatch == "action":
        keys = ", ".join(b.key for b in tool.branches)
        action = arguments.get(spec.action_arg)
        if action is None:
            raise _invalid(f"{spec.action_arg}: required argument missing (one of: {keys})", spec.action_arg)
        branch = next((b for b in tool.branches if b.key == action), None)
        if branch is None:
            raise _invalid(f"{spec.action_arg}: unknown action {action!r} (one of: {keys})", spec.action_arg)
        label = f"action {branch.key!r}"
    elif spec.dispatch == "presence":
        branch = next((b for b in tool.branches if b.when and all(_present(arguments, w) for w in b.when)), None)
        branch = branch or next((b for b in tool.branches if not b.when), None)
        if branch is None:
            options = " or ".join("+".join(b.when) for b in tool.branches)
            raise _invalid(f"give {options}")
        given = ", ".join(branch.when)
        label = f"{branch.key} (chosen because {given} {'is' if len(branch.when) == 1 else 'are'} given)" \
            if branch.when else f"this call ({branch.key})"
    else:
        branch = tool.branches[0]
        label = "this call"
    if branch.accepts is not None:
        extra = [k for k, v in arguments.items() if v is not None and k not in branch.accepts]
        if extra:
            takes = ", ".join(a for a in branch.accepts if a != spec.action_arg) or "no other arguments"
            raise _invalid(f"{label} does not take {', '.join(extra)} (it takes: {takes})", extra[0])
    missing = [name for name in branch.requires if not _present(arguments, name)]
    if missing:
        raise _invalid(f"{label} needs {', '.join(missing)}", missing[0])
    return branch


# ============================================================================ the runtime


class Runtime:
    """One per Manifest: owns the upstream client and the compiled validators."""

    def __init__(
        self,
        manifest: Manifest,
        *,
        environ: Mapping[str, str] | None = None,
        page_size: int = 100,
        require_secrets: bool = True,
        max_binary_bytes: int = DEFAULT_MAX_BINARY_BYTES,
        signer: Signer | None = None,
        check_schemas: bool = False,
    ) -> None:
        if page_size < 1:
            raise ConfigError("page_size must be at least 1")
        self.manifest = manifest
        self.page_size = page_size
        self.max_binary_bytes = max_binary_bytes
        env = os.environ if environ is None else environ
        self.upstream = Upstream(manifest.upstream, env, require_secrets=require_secrets)
        try:
            self.signer = signer or Signer.from_environ(env)
        except SigningKeyError as e:
            raise ConfigError(str(e)) from None
        self._tools: dict[str, _Tool] = {}
        for spec in manifest.tools:
            if spec.risk == "forbidden":
                continue
            if spec.name in self._tools:
                raise ConfigError(f"tool {spec.name}: defined twice")
            self._tools[spec.name] = _Tool(spec, self.signer, check=check_schemas)
        if self.signer.generated and any(t.pagers for t in self._tools.values()):
            log.warning(
                "cursors are signed with a key generated at start-up: they stop working after a restart and are "
                "refused by other replicas; set %s to share one key", SIGNING_KEY_VAR,
            )
        self._listed = [t.definition for t in self._tools.values()]
        self._cursor_tag = (manifest.content_hash or "unsealed")[-12:]
        self.catalog = Catalog(manifest, self.upstream, page_size=page_size, max_binary_bytes=max_binary_bytes)

    # ------------------------------------------------------------------ tools/list

    @property
    def tool_names(self) -> list[str]:
        return list(self._tools)

    def input_schema(self, name: str) -> Mapping[str, Any] | None:
        tool = self._tools.get(name)
        return tool.spec.input_schema if tool else None

    def list_tools(self, cursor: str | None = None) -> types.ListToolsResult:
        offset = self._offset(cursor)
        end = offset + self.page_size
        nxt = self._cursor(end) if end < len(self._listed) else None
        return types.ListToolsResult(tools=self._listed[offset:end], next_cursor=nxt)

    def _cursor(self, offset: int) -> str:
        raw = json.dumps({"o": offset, "m": self._cursor_tag}, separators=(",", ":")).encode()
        return base64.urlsafe_b64encode(raw).decode("ascii")

    def _offset(self, cursor: str | None) -> int:
        if cursor is None:
            return 0
        try:
            data = json.loads(base64.urlsafe_b64decode(cursor.encode("ascii")))
            offset = data["o"]
            valid = isinstance(offset, int) and 0 <= offset < len(self._listed) and data["m"] == self._cursor_tag
        except (ValueError, KeyError, TypeError, binascii.Error, UnicodeError):
            valid = False
        if not valid:
            raise MCPError(code=types.INVALID_PARAMS, message="Invalid cursor")
        return int(offset)

    # ------------------------------------------------------------------ tools/call

    async def call(
        self,
        name: str,
        arguments: Mapping[str, Any] | None,
        *,
        trace_id: str | None = None,
        caller: Caller | None = None,
    ) -> types.CallToolResult:
        """Run one tool call. Unknown (or forbidden) tools raise MCPError(-32602); all else is a result."""
        tool = self._tools.get(name)
        if tool is None:
            raise MCPError(code=types.INVALID_PARAMS, message=f"Unknown tool: {name}")
        trace = trace_id or uuid.uuid4().hex
        requests: list[dict[str, Any]] = []
        started = time.monotonic()
        outcome = "ok"
        try:
            out = await self._run(tool, dict(arguments or {}), trace, requests)
        except ToolFailure as failure:
            error = failure.error.model_copy(
                update={"trace_id": trace, "message": self.upstream.redactor.text(failure.error.message)}
            )
            outcome = error.code
            out = results.failure(error, results.meta(trace, requests))
        except Exception:
            outcome = ErrorCode.INTERNAL_ERROR
            log.error(
                "tool %s failed, traceId %s:\n%s",
                name,
                trace,
                self.upstream.redactor.text(traceback.format_exc()),
            )
            out = results.failure(results.internal_error(trace), results.meta(trace, requests))
        log.info(
            "tool=%s traceId=%s outcome=%s requests=%d ms=%d",
            name,
            trace,
            outcome,
            len(requests),
            int((time.monotonic() - started) * 1000),
        )
        return out

    async def _run(
        self, tool: _Tool, arguments: dict[str, Any], trace: str, requests: list[dict[str, Any]]
    ) -> types.CallToolResult:
        if log.isEnabledFor(logging.DEBUG):
            shown = {k: "***" if k in tool.spec.sensitive else v for k, v in arguments.items()}
            log.debug(
                "tool=%s traceId=%s arguments=%s",
                tool.spec.name,
                trace,
                self.upstream.redactor.text(json.dumps(shown, default=str)[:2000]),
            )
        check_arguments(tool.arguments, arguments)
        branch = choose_branch(tool, arguments)
        arguments = _with_defaults(tool.spec.input_schema, arguments)
        try:
            with anyio.fail_after(self.manifest.upstream.timeout.total):
                if branch.key in tool.pagers:
                    shaped = await self._run_pages(tool, branch, arguments, requests)
                    return self._paged_result(tool, shaped, results.meta(trace, requests))
                payload, last = await self._run_steps(tool, branch, arguments, requests)
        except TimeoutError:
            raise ToolFailure.of(
                ErrorCode.UPSTREAM_TIMEOUT,
                f"the call did not finish within {self.manifest.upstream.timeout.total:g} s; retry later "
                "(a write may or may not have taken effect)",
                retryable=True,
            ) from None
        return self._result(tool, branch, payload, last, results.meta(trace, requests))

    async def _run_pages(
        self, tool: _Tool, branch: Branch, arguments: dict[str, Any], requests: list[dict[str, Any]]
    ) -> Shaped:
        """A paginated branch: collect up to `limit` items from the cursor's position, sign the next one."""
        pager = tool.pagers[branch.key]
        paging = pager.spec
        binding = pager.binding(arguments)
        cursor = arguments.get(paging.cursor_arg)
        start = pager.decode(cursor if isinstance(cursor, str) else None, binding)
        limit = arguments.get(paging.limit_arg)
        want = limit if isinstance(limit, int) and limit > 0 else min(paging.page_size, paging.max_items)
        failure_modes = tool.spec.failure_modes

        async def send(op: OperationSpec) -> tuple[Mapping[str, str], Any, str]:
            resp = await self.upstream.send(op, arguments, lambda e: None)
            requests.append(resp.provenance())
            if not resp.ok:
                raise self.upstream.failure(resp, op, failure_modes)
            payload = decode(resp)
            if payload.kind != "json":
                raise ToolFailure.of(
                    ErrorCode.UPSTREAM_INVALID_RESPONSE,
                    f"the upstream sent {payload.media_type or 'no content'} where a JSON page was expected",
                    status=resp.status,
                )
            return resp.headers, self.upstream.redactor.value(payload.value), resp.url

        settings = self.upstream.settings
        drop = {settings.query_auth[0]} if settings.query_auth else set()
        got = await pager.collect(send, branch.steps[0].operation, start, want, settings.base_url, drop)
        items = [search(paging.item_select, item) for item in got.items] if paging.item_select else got.items

        def cursor_at(k: int) -> str | None:
            position = got.resume[k] if k < len(got.resume) else got.next
            return pager.encode(position, binding) if position is not None else None

        return tool.shaper_of(branch).page(items, got.total, cursor_at)

    async def _run_steps(
        self, tool: _Tool, branch: Branch, arguments: dict[str, Any], requests: list[dict[str, Any]]
    ) -> tuple[Payload, UpstreamResponse | None]:
        context: dict[str, Any] = {"inputs": arguments, "steps": {}}
        multi = len(branch.steps) > 1
        payload: Payload | None = None
        last: UpstreamResponse | None = None
        for step in branch.steps:
            if step.when and not truthy(search(step.when, context)):
                continue
            try:
                resp = await self.upstream.send(step.operation, arguments, lambda e: search(e, context))
                requests.append(resp.provenance(step.id if multi else None))
                if not resp.ok:
                    raise self.upstream.failure(resp, step.operation, tool.spec.failure_modes)
                payload = decode(resp)
            except ToolFailure as failure:
                if multi:
                    failure.error.step = step.id
                raise
            last = resp
            context["steps"][step.id] = _step_value(payload, resp.status)
        if branch.output:
            return Payload("json", search(branch.output, context), "application/json"), last
        if payload is None:
            raise _invalid("nothing to do: no step of this tool applies to these arguments")
        return payload, last

    def _paged_result(self, tool: _Tool, shaped: Shaped, meta: dict[str, Any]) -> types.CallToolResult:
        links = getattr(self, "catalog", None)
        if links is None:
            return results.success(shaped, meta)
        return results.success(shaped, meta, links=links.links(tool.spec, shaped.structured))

    def _result(
        self, tool: _Tool, branch: Branch, payload: Payload, last: UpstreamResponse | None, meta: dict[str, Any]
    ) -> types.CallToolResult:
        shaper, redact = tool.shaper_of(branch), self.upstream.redactor
        if payload.kind == "binary":
            if tool.spec.output_schema is not None:
                raise ToolFailure.of(
                    ErrorCode.UPSTREAM_INVALID_RESPONSE,
                    f"the upstream sent {payload.media_type or 'binary data'} where the documented JSON was expected",
                )
            uri = last.url if last else f"openapi2mcp:{tool.spec.name}"
            return results.binary(payload.raw, payload.media_type, uri, meta, cap=self.max_binary_bytes)
        if payload.kind == "empty":
            shaped = shaper.empty(last.status if last else 204)
        elif payload.kind == "text":
            shaped = shaper.text(redact.text(payload.value), payload.media_type)
        else:
            shaped = shaper.json(redact.value(payload.value))
        return results.success(shaped, meta, links=self.catalog.links(tool.spec, shaped.structured))

    # ------------------------------------------------------------------ MCP

    def build_server(self) -> Server[Any]:
        """The SDK low-level server: handlers are thin; `list_tools`/`call` do the work."""

        async def on_list_tools(ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
            try:
                return self.list_tools(params.cursor if params else None)
            except MCPError:
                raise
            except Exception:
                log.error("tools/list failed:\n%s", traceback.format_exc())
                raise MCPError(code=types.INTERNAL_ERROR, message="internal error; see the server log") from None

        async def on_call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
            return await self.call(params.name, params.arguments, caller=caller_from_context(ctx))

        server = self.manifest.server
        mcp_server = Server(
            server.name,
            version=server.version,
            title=server.title,
            instructions=server.instructions,
            on_list_tools=on_list_tools,
            on_call_tool=on_call_tool,
            get_tool_input_schema=self.input_schema,
        )
        self.catalog.install(mcp_server)  # resources/*, prompts/*: only when the overlay defines some
        return mcp_server

    def health(self) -> dict[str, Any]:
        return {"status": "ok", "tools": len(self._listed), "manifest": self.manifest.content_hash}

    async def aclose(self) -> None:
        await self.upstream.aclose()


def _step_value(payload: Payload, status: int) -> Any:
    """What later steps' expressions see of a step: JSON, text, {"status"} when empty."""
    if payload.kind in ("json", "text"):
        return payload.value
    if payload.kind == "empty":
        return {"status": status}
    return None


# ============================================================================ serving


async def serve_stdio(
    manifest: Manifest, *, log_level: str | int | None = None, runtime: Runtime | None = None, **opts: Any
) -> None:
    """Serve over stdin/stdout (logs go to stderr; the SDK points fd 1 at stderr while serving)."""
    if log_level is not None:
        configure_logging(log_level)
    runtime = runtime or Runtime(manifest, **opts)
    server = runtime.build_server()
    try:
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())
    finally:
        await runtime.aclose()


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
    if host in _LOOPBACK or host == "":
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
    **opts: Any,
) -> Starlette:
    """A Starlette app: the MCP endpoint at `path` plus `GET /healthz`; closes the client on shutdown.

    Takes the options of `serve_http` (`port` is unused here); the rest go to `Runtime`.
    """
    if log_level is not None:
        configure_logging(log_level)
    security = transport_security(host, allowed_hosts, allowed_origins)
    runtime = runtime or Runtime(manifest, **opts)
    server = runtime.build_server()
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

    return Starlette(
        routes=[Route("/healthz", healthz, methods=["GET"]), Mount("/", app=mcp_app)],
        lifespan=lifespan,
    )


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
    **opts: Any,
) -> None:
    """Serve Streamable HTTP with uvicorn until interrupted (graceful shutdown closes the client)."""
    import uvicorn  # only the HTTP transport needs it

    app = http_app(
        manifest,
        log_level=log_level,
        host=host,
        path=path,
        stateless=stateless,
        json_response=json_response,
        allowed_hosts=allowed_hosts,
        allowed_origins=allowed_origins,
        **opts,
    )
    level = logging.getLevelName(log_level) if isinstance(log_level, int) else (log_level or "info")
    config = uvicorn.Config(
        app, host=host, port=port, log_level=str(level).lower(), lifespan="on", timeout_graceful_shutdown=10
    )
    await uvicorn.Server(config).serve()
