"""Resources and prompts at run time, and the resource links of tool results.

Seed 001: tools are called by the model, resources are loaded by the application, prompts are
picked by the user. `Catalog` serves the last two from the Manifest:

* `resources/list` (fixed URIs) and `resources/templates/list`, `prompts/list`: overlay order,
  paginated with opaque cursors (`page_size` per page, like `tools/list`);
* `resources/read`: the URI is matched against the templates (uritemplate.py), the variable
  values are checked against their parameters' schemas, and the GET goes through
  `Upstream.fetch` like a tool step: forwarding, auth, redirects, the body cap, the upstream's
  retries, the timeout, redaction, and the same status -> error mapping; then `select`, the MIME
  type and the size cap apply;
* `prompts/get`: arguments checked, `{arg}` templates filled, resources embedded by reading them;
* `links`: `resource_link` content items for a tool result (the overlay's `links`).

Resources have no `isError`: failures are JSON-RPC errors, coded per protocol era.

| what went wrong | 2025-11-25 and older | 2026-07-28 |
|---|---|---|
| no resource has this URI; a variable's value does not fit its parameter; upstream 400/404/410/422 | -32002 | -32602 |
| anything else: upstream 401/403/429/5xx, timeout, too large, invalid response | -32603 | -32603 |
| unknown prompt, unknown or missing prompt argument, embedded resource not found | -32602 | -32602 |

`error.data` carries the stable code (seed 000 shape: code, message, retryable, status,
traceId) plus the `uri`, so a host can branch on it. Nothing here imports the compiler.
"""

from __future__ import annotations

import base64
import logging
import math
import re
import time
import traceback
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from functools import cached_property
from typing import TYPE_CHECKING, Any, Final

import anyio
import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.shared.exceptions import MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from openapi2mcp import result as results
from openapi2mcp.errors import ErrorCode, ToolError, ToolFailure, did_you_mean
from openapi2mcp.manifest import (
    Manifest,
    PromptSpec,
    ResourcePolicy,
    ResourceSpec,
    TemplateError,
    ToolSpec,
    UriTemplate,
    compile_schema,
    resource_policy,
)
from openapi2mcp.runtime import listing
from openapi2mcp.runtime.access import Caller, caller_token
from openapi2mcp.runtime.audit import AuditError, Auditor, AuditRecord
from openapi2mcp.runtime.limits import RateLimiter
from openapi2mcp.runtime.telemetry import current_trace_id
from openapi2mcp.shape import compile_expression, describe_error, dumps, error_path, search
from openapi2mcp.upstream import CALLER_TOKEN, ConfigError, Payload, Upstream, is_json_media

log = logging.getLogger("openapi2mcp.resources")

RESOURCE_NOT_FOUND: Final = -32002  # 2025-11-25 and older; 2026-07-28 uses INVALID_PARAMS (-32602)
_NOT_FOUND_STATUSES: Final = frozenset({400, 404, 410, 422})
_PLACEHOLDER: Final = re.compile(r"\{\{|\}\}|\{([A-Za-z_][A-Za-z0-9_]*)\}")

if TYPE_CHECKING:  # jsonschema loads with the first validator
    from jsonschema.protocols import Validator


def not_found_code(protocol_version: str | None) -> int:
    """The `resource not found` error code of a session's protocol era."""
    return types.INVALID_PARAMS if protocol_version in MODERN_PROTOCOL_VERSIONS else RESOURCE_NOT_FOUND


def fill(template: str, arguments: Mapping[str, str]) -> str:
    """Replace `{name}` with the argument (missing: empty); `{{` and `}}` are literal braces."""

    def sub(m: re.Match[str]) -> str:
        name = m.group(1)
        if name is None:
            return m.group(0)[0]
        return arguments.get(name, "")

    return _PLACEHOLDER.sub(sub, template)


class _Resource:
    """A resource spec plus its parsed template, compiled validators and inherited tool policy."""

    def __init__(self, spec: ResourceSpec, tools: Sequence[ToolSpec] = ()) -> None:
        self.policy: ResourcePolicy = resource_policy(spec, tools)
        if self.policy.problems:
            raise ConfigError(
                f"resource {spec.name}: reads {spec.operation.id!r}, " + "; and ".join(self.policy.problems)
                + ". A resource may not be a way around a tool's policy: remove it (recompiling the overlay "
                "says where)"
            )
        spec = spec.model_copy(update={"operation": self.policy.operation(spec.operation)})
        self.spec = spec
        try:
            self.template = UriTemplate.parse(spec.uri)
        except TemplateError as e:
            raise ConfigError(f"resource {spec.name}: invalid URI template: {e}") from None
        if sorted(self.template.names) != sorted(spec.variables):
            raise ConfigError(f"resource {spec.name}: the URI's variables do not match `variables`")
        properties: dict[str, Any] = {}
        defs: dict[str, Any] = {}
        for name, schema in spec.variables.items():
            schema = dict(schema)
            defs.update(schema.pop("$defs", {}))
            properties[name] = schema
        root: dict[str, Any] = {"type": "object", "properties": properties, "required": list(properties)}
        if defs:
            root["$defs"] = defs
        self.schema = root
        try:
            if spec.response.select:
                compile_expression(spec.response.select)
        except Exception as e:
            raise ConfigError(f"resource {spec.name}: {e}") from None

    @cached_property
    def validators(self) -> list[tuple[str, Validator]]:
        """The variables' validator, then the narrowed argument schemas of the tools on the same operation
        (access.resource_policy), by tool name; built by the first read (jsonschema loads then)."""
        return [("", compile_schema(self.schema, formats=True)),
                *((tool, compile_schema(schema, formats=True)) for tool, schema in self.policy.checks)]

    def arguments(self, values: Mapping[str, str]) -> dict[str, Any]:
        """The URI's values as operation arguments (converted to the parameters' types), or ARGUMENT_INVALID."""
        out = {name: coerce_variable(text, self.spec.variables.get(name, {})) for name, text in values.items()}
        for tool, validator in self.validators:
            for error in validator.iter_errors(out):
                where = error_path(error.absolute_path)
                reason = describe_error(error) + (f" (as tool {tool} requires)" if tool else "")
                raise ToolFailure.of(ErrorCode.ARGUMENT_INVALID, f"{where}: {reason}" if where else reason,
                                     field=where or None)
        return out


def coerce_variable(text: str, schema: Mapping[str, Any]) -> Any:
    """A URI variable is text; give the operation the type its parameter declares."""
    kinds = schema.get("type")
    kinds = [kinds] if isinstance(kinds, str) else kinds if isinstance(kinds, list) else []
    if "integer" in kinds and re.fullmatch(r"[+-]?\d+", text):
        return int(text)
    if "number" in kinds and re.fullmatch(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?", text):
        number = float(text)
        return number if math.isfinite(number) else text  # 1e999 is no number JSON can carry: refused as text
    if "boolean" in kinds and text in ("true", "false"):
        return text == "true"
    return text


class Catalog:
    """The resources and prompts of one Manifest, served over one `Upstream`."""

    def __init__(
        self, manifest: Manifest, upstream: Upstream, *, page_size: int = 100, max_binary_bytes: int = 4_000_000
    ) -> None:
        self.manifest = manifest
        self.upstream = upstream
        self.page_size = page_size
        self.max_binary_bytes = max_binary_bytes
        self._resources: dict[str, _Resource] = {}
        for spec in manifest.resources:
            if spec.name in self._resources:
                raise ConfigError(f"resource {spec.name}: defined twice")
            self._resources[spec.name] = _Resource(spec, manifest.tools)
        self._prompts: dict[str, PromptSpec] = {}
        self._prompt_scopes: dict[str, list[str]] = {}  # its permissions and those of the resources it names
        for prompt in manifest.prompts:
            if prompt.name in self._prompts:
                raise ConfigError(f"prompt {prompt.name}: defined twice")
            scopes = list(prompt.permissions)
            for message in prompt.messages:
                if message.resource is not None and message.resource not in self._resources:
                    raise ConfigError(f"prompt {prompt.name}: embeds the unknown resource {message.resource}")
                if message.resource is not None:
                    scopes += self._resources[message.resource].policy.scopes
            self._prompts[prompt.name] = prompt
            self._prompt_scopes[prompt.name] = list(dict.fromkeys(scopes))
        for tool in manifest.tools:
            for link in tool.links:
                res = self._resources.get(link.resource)
                if res is None or not res.template.is_template:
                    raise ConfigError(f"tool {tool.name}: links to {link.resource!r}, which is no resource template")
                compile_expression(link.source)
        fixed = [r for r in self._resources.values() if not r.template.is_template]
        templated = [r for r in self._resources.values() if r.template.is_template]
        self._listed_resources = [types.Resource.model_validate(r.spec.definition()) for r in fixed]
        self._listed_templates = [types.ResourceTemplate.model_validate(r.spec.definition()) for r in templated]
        self._listed_prompts = [types.Prompt.model_validate(p.definition()) for p in self._prompts.values()]
        self.auditor = Auditor(None)  # the runtime's audit log: one line per read (audit.py)
        self.limiter = RateLimiter(None, {})  # the runtime's buckets: a read takes from its tools' (limits.py)
        self.caller_of: Callable[[Any], Caller] | None = None  # the caller of an SDK request (access.py)

    @property
    def has_resources(self) -> bool:
        return bool(self._resources)

    @property
    def has_prompts(self) -> bool:
        return bool(self._prompts)

    # ------------------------------------------------------------------ lists

    def list_resources(self, cursor: str | None = None, caller: Caller | None = None) -> types.ListResourcesResult:
        page, nxt = self._page("resources", self._listed_resources, cursor, caller)
        return types.ListResourcesResult(resources=page, next_cursor=nxt)

    def list_resource_templates(
        self, cursor: str | None = None, caller: Caller | None = None
    ) -> types.ListResourceTemplatesResult:
        page, nxt = self._page("templates", self._listed_templates, cursor, caller)
        return types.ListResourceTemplatesResult(resource_templates=page, next_cursor=nxt)

    def list_prompts(self, cursor: str | None = None, caller: Caller | None = None) -> types.ListPromptsResult:
        page, nxt = self._page("prompts", self._listed_prompts, cursor, caller)
        return types.ListPromptsResult(prompts=page, next_cursor=nxt)

    def _allowed(self, kind: str, name: str, caller: Caller | None) -> bool:
        """A caller sees and uses only what its scopes allow (no caller: the local, trusted one)."""
        if caller is None:
            return True
        if kind == "prompts":
            return caller.allows(self._prompt_scopes[name])
        return caller.allows(self._resources[name].policy.scopes)

    def _page(
        self, kind: str, items: Sequence[Any], cursor: str | None, caller: Caller | None
    ) -> tuple[list[Any], str | None]:
        visible = [i for i in items if self._allowed(kind, i.name, caller)]
        tag = listing.view_tag([i.name for i in visible])  # the cursor names its kind too
        return listing.page(visible, cursor, size=self.page_size, kind=kind, tag=tag)

    # ------------------------------------------------------------------ resources/read

    def find(self, uri: str) -> tuple[_Resource, dict[str, str]] | None:
        """The first resource (overlay order) whose URI or template matches, with the decoded values."""
        for res in self._resources.values():
            try:
                values = res.template.match(uri)
            except UnicodeDecodeError:
                continue  # %-escapes that are not UTF-8 name nothing here
            if values is not None:
                return res, values
        return None

    async def read(
        self, uri: str, *, protocol_version: str | None = None, caller: Caller | None = None
    ) -> types.ReadResourceResult:
        """Read one resource through the upstream; MCPError (coded for the era) when that fails."""
        trace = current_trace_id() or uuid.uuid4().hex  # the request's trace id when tracing is on
        who = {"id": caller.id, "transport": caller.transport} if caller else {"id": "unknown"}
        record = AuditRecord(event="resource_read", trace_id=trace, caller=who,
                             name=self.upstream.redactor.text(uri)[:300])
        requests: list[dict[str, Any]] = record.requests
        started = time.monotonic()
        outcome = "ok"
        try:
            contents = await self._read(uri, requests, caller)
        except anyio.get_cancelled_exc_class():  # not an Exception: the client cancelled or went away
            outcome = "cancelled"
            raise
        except ToolFailure as failure:
            error = failure.error.model_copy(
                update={"trace_id": trace, "message": self.upstream.redactor.text(failure.error.message)}
            )
            outcome = error.code
            raise self._error(uri, error, protocol_version) from None
        except Exception:
            outcome = ErrorCode.INTERNAL_ERROR
            log.error("resource %s failed, traceId %s:\n%s", uri, trace,
                      self.upstream.redactor.text(traceback.format_exc()))
            raise MCPError(
                code=types.INTERNAL_ERROR, message=f"internal error; see the server log, traceId {trace}",
                data={"uri": uri, "code": ErrorCode.INTERNAL_ERROR, "traceId": trace},
            ) from None
        finally:
            log.info("resource=%s traceId=%s outcome=%s requests=%d ms=%d", self.upstream.redactor.text(uri)[:300],
                     trace, outcome, len(requests), int((time.monotonic() - started) * 1000))
            try:  # fail closed: no content is returned that the audit log does not show
                if outcome == "cancelled":
                    self.auditor.cancelled(record)  # never raises: the cancellation goes on
                else:
                    self.auditor.result(record, "ok" if outcome == "ok" else "error",
                                        None if outcome == "ok" else outcome)
            except AuditError as e:
                log.error("resource %s traceId %s: %s", uri, trace, e)
                raise MCPError(code=types.INTERNAL_ERROR, message=f"the audit log cannot be written; traceId {trace}",
                               data={"uri": uri, "code": ErrorCode.AUDIT_FAILED, "traceId": trace}) from None
        return types.ReadResourceResult(contents=[contents], meta=results.meta(trace, requests))

    async def _read(
        self, uri: str, requests: list[dict[str, Any]], caller: Caller | None
    ) -> types.TextResourceContents | types.BlobResourceContents:
        found = self.find(uri)
        if found is None or not self._allowed("resources", found[0].spec.name, caller):
            raise ToolFailure.of(ErrorCode.NOT_FOUND, self._no_match(uri, caller))  # hidden == absent
        res, values = found
        refusal = await self.limiter.admit(res.policy.tools, caller.id if caller else "")  # the tools' limits too
        if refusal is not None:
            raise ToolFailure.of(ErrorCode.RATE_LIMITED, refusal.message(), retryable=True,
                                 retry_after=refusal.retry_after)
        arguments = res.arguments(values)
        operation = res.spec.operation
        total = self.manifest.upstream.timeout.total
        try:
            with anyio.fail_after(total):
                _, payload = await self.upstream.fetch(operation, arguments, _no_expressions, requests=requests)
        except TimeoutError:
            raise ToolFailure.of(
                ErrorCode.UPSTREAM_TIMEOUT, f"the read did not finish within {total:g} s; retry later", retryable=True
            ) from None
        return self._contents(res, uri, payload)

    def _no_match(self, uri: str, caller: Caller | None) -> str:
        known = [r.template.text for r in self._resources.values() if self._allowed("resources", r.spec.name, caller)]
        hint = did_you_mean(uri, known)
        return f"no resource has this URI{f'; {hint}' if hint else ''} (this server serves: {', '.join(known)})"

    def _contents(
        self, res: _Resource, uri: str, payload: Payload
    ) -> types.TextResourceContents | types.BlobResourceContents:
        spec, redact = res.spec, self.upstream.redactor
        mime = spec.mime_type
        if spec.response.select and payload.kind != "json":
            raise ToolFailure.of(
                ErrorCode.UPSTREAM_INVALID_RESPONSE,
                f"the upstream sent {payload.media_type or payload.kind} where the documented JSON was expected",
            )
        if payload.kind == "binary":
            if len(payload.raw) > self.max_binary_bytes:
                raise _too_large(len(payload.raw), self.max_binary_bytes)
            return types.BlobResourceContents(
                uri=uri, mime_type=mime or payload.media_type or "application/octet-stream",
                blob=base64.b64encode(payload.raw).decode("ascii"),
            )
        if payload.kind == "json":
            value = search(spec.response.select, payload.value) if spec.response.select else payload.value
            if value is None and spec.response.select:
                raise ToolFailure.of(
                    ErrorCode.UPSTREAM_INVALID_RESPONSE,
                    f"the upstream response has nothing at `{spec.response.select}`",
                )
            value = redact.value(value)
            text = value if isinstance(value, str) and not is_json_media(mime or "") else dumps(value)
            mime = mime or "application/json"
        elif payload.kind == "text":
            text = redact.text(payload.value)
            mime = mime or payload.media_type or "text/plain"
        else:
            text = ""
        size = len(text.encode())
        if size > spec.response.max_bytes:
            raise _too_large(size, spec.response.max_bytes)
        return types.TextResourceContents(uri=uri, mime_type=mime, text=text)

    def _error(self, uri: str, error: ToolError, protocol_version: str | None) -> MCPError:
        data = {"uri": uri, **error.body()}
        data.pop("field", None)
        if error.code in (ErrorCode.NOT_FOUND, ErrorCode.ARGUMENT_INVALID) or error.status in _NOT_FOUND_STATUSES:
            return MCPError(
                code=not_found_code(protocol_version), message=f"Resource not found: {uri}: {error.message}", data=data
            )
        return MCPError(code=types.INTERNAL_ERROR, message=f"Could not read {uri}: {error.code}: {error.message}",
                        data=data)

    # ------------------------------------------------------------------ links in tool results

    def links(self, tool: ToolSpec, structured: Any) -> list[types.ResourceLink]:
        """`resource_link` items for a tool's structured result, per the tool's `links` (deduplicated)."""
        if not tool.links or structured is None:
            return []
        out: list[types.ResourceLink] = []
        seen: set[str] = set()
        for link in tool.links:
            res = self._resources[link.resource]
            found = search(link.source, structured)
            count = 0
            for item in found if isinstance(found, list) else [found]:
                values = _values(item, res.template.names)
                if values is None:
                    continue
                try:
                    res.arguments(values)
                except ToolFailure:
                    continue  # a value the resource would refuse: no dead link
                uri = res.template.expand(values)
                if uri in seen:
                    continue
                seen.add(uri)
                name = values[res.template.names[0]] if len(values) == 1 else uri
                out.append(types.ResourceLink(name=name, uri=uri, title=res.spec.title, mime_type=res.spec.mime_type))
                count += 1
                if count >= link.max:
                    break
        return out

    # ------------------------------------------------------------------ prompts/get

    async def get_prompt(
        self, name: str, arguments: Mapping[str, str] | None, *, protocol_version: str | None = None,
        caller: Caller | None = None,
    ) -> types.GetPromptResult:
        prompt = self._prompts.get(name)
        if prompt is None or not self._allowed("prompts", name, caller):
            raise MCPError(code=types.INVALID_PARAMS, message=f"Unknown prompt: {name}")
        given = {k: v for k, v in (arguments or {}).items() if v is not None}
        declared = [a.name for a in prompt.arguments]
        for key in given:
            if key not in declared:
                hint = did_you_mean(key, declared)
                raise MCPError(code=types.INVALID_PARAMS, message=f"prompt {name} has no argument {key!r}"
                               + (f"; {hint}" if hint else f" (arguments: {', '.join(declared) or 'none'})"))
        missing = [a.name for a in prompt.arguments if a.required and not given.get(a.name)]
        if missing:
            raise MCPError(code=types.INVALID_PARAMS,
                           message=f"prompt {name} needs the argument{'s' if len(missing) > 1 else ''} "
                           + ", ".join(missing))
        messages: list[types.PromptMessage] = []
        for m in prompt.messages:
            if m.text is not None:
                messages.append(types.PromptMessage(role=m.role, content=types.TextContent(text=fill(m.text, given))))
            if m.resource is None:
                continue
            res = self._resources[m.resource]
            values = {var: fill(t, given) for var, t in m.resource_args.items()}
            if any(v == "" for v in values.values()):
                continue  # it needs an optional argument that was not given
            uri = res.template.expand(values)
            if not m.embed:
                link = types.ResourceLink(name=res.spec.name, uri=uri, title=res.spec.title,
                                          mime_type=res.spec.mime_type)
                messages.append(types.PromptMessage(role=m.role, content=link))
                continue
            try:
                read = await self.read(uri, protocol_version=protocol_version, caller=caller)
            except MCPError as e:
                code = types.INVALID_PARAMS if e.code in (RESOURCE_NOT_FOUND, types.INVALID_PARAMS) else e.code
                raise MCPError(code=code, message=f"prompt {name}: {e.message}", data=e.data) from None
            embedded = types.EmbeddedResource(resource=read.contents[0])
            messages.append(types.PromptMessage(role=m.role, content=embedded))
        return types.GetPromptResult(description=prompt.description, messages=messages)

    # ------------------------------------------------------------------ MCP

    def install(self, server: Server[Any], current: Callable[[], Catalog] | None = None) -> None:
        """Register the handlers: the SDK declares the resources/prompts capabilities from them.

        `current` (serve --reload): each request asks it for the catalog to serve, and every handler
        is registered, so that a reload can replace the catalog and add the first resource or prompt.
        """
        def through(handler: Callable[[Catalog, Any, Any], Awaitable[Any]]) -> Handler:
            async def run(ctx: Any, params: Any) -> Any:
                return await handler(current() if current else self, ctx, params)
            return run

        if self.has_resources or current:
            server.add_request_handler(
                "resources/list", types.PaginatedRequestParams,
                _guard("resources/list", through(Catalog._on_list_resources)),
            )
            server.add_request_handler(
                "resources/templates/list", types.PaginatedRequestParams,
                _guard("resources/templates/list", through(Catalog._on_list_templates)),
            )
            server.add_request_handler("resources/read", types.ReadResourceRequestParams,
                                       _guard("resources/read", through(Catalog._on_read)))
        if self.has_prompts or current:
            server.add_request_handler(
                "prompts/list", types.PaginatedRequestParams,
                _guard("prompts/list", through(Catalog._on_list_prompts)),
            )
            server.add_request_handler("prompts/get", types.GetPromptRequestParams,
                                       _guard("prompts/get", through(Catalog._on_get_prompt)))

    async def _on_list_resources(self, ctx: Any, params: types.PaginatedRequestParams | None) -> Any:
        return self.list_resources(params.cursor if params else None, self._caller(ctx))

    async def _on_list_templates(self, ctx: Any, params: types.PaginatedRequestParams | None) -> Any:
        return self.list_resource_templates(params.cursor if params else None, self._caller(ctx))

    async def _on_list_prompts(self, ctx: Any, params: types.PaginatedRequestParams | None) -> Any:
        return self.list_prompts(params.cursor if params else None, self._caller(ctx))

    def _caller(self, ctx: Any) -> Caller | None:
        return self.caller_of(ctx) if self.caller_of else None

    async def _on_read(self, ctx: Any, params: types.ReadResourceRequestParams) -> Any:
        token = CALLER_TOKEN.set(caller_token(ctx))  # upstream.auth forward / token_exchange
        try:
            return await self.read(params.uri, protocol_version=getattr(ctx, "protocol_version", None),
                                   caller=self._caller(ctx))
        finally:
            CALLER_TOKEN.reset(token)

    async def _on_get_prompt(self, ctx: Any, params: types.GetPromptRequestParams) -> Any:
        return await self.get_prompt(params.name, params.arguments,
                                     protocol_version=getattr(ctx, "protocol_version", None),
                                     caller=self._caller(ctx))


Handler = Callable[[Any, Any], Any]


def _guard(method: str, handler: Handler) -> Handler:
    """MCPError passes; anything else is logged and becomes a bare internal error (no leaked text)."""

    async def run(ctx: Any, params: Any) -> Any:
        try:
            return await handler(ctx, params)
        except MCPError:
            raise
        except Exception:
            log.error("%s failed:\n%s", method, traceback.format_exc())
            raise MCPError(code=types.INTERNAL_ERROR, message="internal error; see the server log") from None

    return run


def _no_expressions(expression: str) -> Any:
    return None  # a resource's plan has no chain expressions


def _values(item: Any, names: list[str]) -> dict[str, str] | None:
    """One link's variable values: a scalar for a one-variable template, or an object by name."""
    if isinstance(item, dict):
        found = {n: item.get(n) for n in names}
        if any(not isinstance(v, str | int | float) or isinstance(v, bool) for v in found.values()):
            return None
        return {n: str(v) for n, v in found.items()}
    if len(names) == 1 and isinstance(item, str | int | float) and not isinstance(item, bool) and str(item):
        return {names[0]: str(item)}
    return None


def _too_large(size: int, cap: int) -> ToolFailure:
    return ToolFailure.of(
        ErrorCode.RESPONSE_TOO_LARGE, f"the resource is {size} bytes; this server returns resources up to {cap} bytes"
    )
