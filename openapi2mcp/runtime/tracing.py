"""OpenTelemetry traces (the `otel` extra): spans per MCP request, tool call and upstream request.

Loaded only when tracing is on (telemetry.py). The span tree of one tools/call over MCP:

    SERVER  tools/call notes_search          the MCP request; it is the tool call's span too
      CLIENT  GET /notes                     one per upstream request (each retry its own)
      CLIENT  GET /notes/{id}

Attributes follow the OpenTelemetry semantic conventions for MCP (`mcp.method.name`,
`mcp.protocol.version`, `mcp.session.id`, `jsonrpc.request.id`, `gen_ai.tool.name`,
`gen_ai.operation.name`, `error.type`, `rpc.response.status_code`, `network.transport`) and
for HTTP clients (`http.request.method`, `url.template`, `server.address`, `server.port`,
`http.response.status_code`, `http.request.resend_count`); ours are under `openapi2mcp.`.
No attribute holds a URL with its values, a query string, an argument or a header value.
docs/telemetry.md has the whole list.

Trace context: the MCP request's `params._meta.traceparent` is the parent (the conventions' rule),
else the HTTP request's `traceparent` header; with both, the header's context becomes a link.
Upstream requests carry the CLIENT span's `traceparent` (and `tracestate`; never `baggage`, which
would hand the client's data to the upstream).
"""

from __future__ import annotations

import contextlib
import importlib
import os
import sys
from collections.abc import Callable, Iterator, Mapping
from contextvars import ContextVar
from typing import Any, Final

import mcp_types as types
from mcp.shared.exceptions import MCPError
from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Link, Span, SpanKind, StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
from pydantic import ValidationError

from openapi2mcp import __version__
from openapi2mcp.errors import ToolFailure
from openapi2mcp.runtime.telemetry import CURRENT_TRACE, METHODS, CallSeen
from openapi2mcp.upstream import PROPAGATED, ConfigError, Sent

MAX_ATTRIBUTE: Final = 200  # characters of a name taken from a request

_PROPAGATOR: Final = TraceContextTextMapPropagator()  # W3C traceparent + tracestate, nothing else
# the span of the tools/call request being served, which its tool call takes as its own
_TOOL_SPAN: ContextVar[Span | None] = ContextVar("openapi2mcp_tool_span", default=None)


def _clip(value: str) -> str:
    return value if len(value) <= MAX_ATTRIBUTE else value[:MAX_ATTRIBUTE] + "…"


def _remote(carrier: Mapping[str, Any]) -> otel_context.Context | None:
    """The context a W3C traceparent carries, or None when it is absent or malformed."""
    parent = carrier.get("traceparent")
    if not isinstance(parent, str):
        return None
    state = carrier.get("tracestate")
    found = _PROPAGATOR.extract({"traceparent": parent, **({"tracestate": state} if isinstance(state, str) else {})})
    return found if trace.get_current_span(found).get_span_context().is_valid else None


class Tracing:
    """The spans of one Runtime, through one TracerProvider."""

    def __init__(self, provider: Any, targets: frozenset[str], redact: Callable[[str], str]) -> None:
        self.tracer = provider.get_tracer("openapi2mcp", __version__)
        self.targets = targets
        self.redact = redact

    @staticmethod
    def trace_id(span: Span) -> str | None:
        context = span.get_span_context()
        return trace.format_trace_id(context.trace_id) if context.is_valid else None

    # ------------------------------------------------------------------ MCP requests

    async def serve(self, ctx: Any, call_next: Any) -> Any:
        """Run one MCP request inside its SERVER span."""
        method = ctx.method if isinstance(ctx.method, str) else ""
        params = ctx.params if isinstance(ctx.params, Mapping) else {}
        name = params.get("name") if method in ("tools/call", "prompts/get") else None
        name = _clip(name) if isinstance(name, str) else None
        attributes: dict[str, Any] = {"mcp.method.name": _clip(method)}
        if ctx.protocol_version:
            attributes["mcp.protocol.version"] = str(ctx.protocol_version)
        if ctx.request_id is not None:
            attributes["jsonrpc.request.id"] = _clip(str(ctx.request_id))
        if method == "tools/call":
            attributes["gen_ai.operation.name"] = "execute_tool"
            if name is not None:
                attributes["gen_ai.tool.name"] = name
        elif method == "prompts/get" and name is not None:
            attributes["gen_ai.prompt.name"] = name
        elif method.startswith("resources/") and isinstance(params.get("uri"), str):
            attributes["mcp.resource.uri"] = _clip(self.redact(params["uri"].split("?", 1)[0]))
        request = ctx.request
        headers = getattr(request, "headers", None)
        from_http = None
        if headers is not None:
            attributes.update(_http_attributes(request))
            from_http = _remote(headers)
        else:
            attributes["network.transport"] = "pipe"
        from_meta = _remote(ctx.meta) if isinstance(ctx.meta, Mapping) else None
        parent = from_meta or from_http or otel_context.Context()  # no remote parent: a trace of its own
        links = [Link(trace.get_current_span(from_http).get_span_context())] if from_meta and from_http else None
        target = name if name is not None and name in self.targets else None
        span_name = (method if method in METHODS else "_OTHER") + (f" {target}" if target else "")
        with self.tracer.start_as_current_span(span_name, context=parent, kind=SpanKind.SERVER, links=links,
                                               attributes=attributes, record_exception=False,
                                               set_status_on_exception=False) as span:
            traced = CURRENT_TRACE.set(self.trace_id(span))
            tool = _TOOL_SPAN.set(span if method == "tools/call" else None)
            try:
                return await call_next(ctx)
            except MCPError as e:
                code = str(e.error.code)
                span.set_attributes({"error.type": code, "rpc.response.status_code": code})
                span.set_status(StatusCode.ERROR, e.error.message[:MAX_ATTRIBUTE])
                raise
            except ValidationError:
                code = str(types.INVALID_PARAMS)
                span.set_attributes({"error.type": code, "rpc.response.status_code": code})
                span.set_status(StatusCode.ERROR, "invalid request parameters")
                raise
            except Exception as e:
                span.set_attribute("error.type", type(e).__qualname__)
                span.set_status(StatusCode.ERROR)
                raise
            finally:
                _TOOL_SPAN.reset(tool)
                CURRENT_TRACE.reset(traced)

    # ------------------------------------------------------------------ tool calls

    @contextlib.contextmanager
    def tool(self, name: str) -> Iterator[Span]:
        """The tool call's span: the tools/call request's when it came over MCP, else one of its own."""
        outer = _TOOL_SPAN.get()
        if outer is not None:
            token = _TOOL_SPAN.set(None)  # one call per request
            try:
                yield outer
            finally:
                _TOOL_SPAN.reset(token)
            return
        shown = name if name in self.targets else _clip(name)
        with self.tracer.start_as_current_span(
            f"execute_tool {name}" if name in self.targets else "execute_tool", kind=SpanKind.INTERNAL,
            attributes={"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": shown},
            record_exception=False, set_status_on_exception=False,
        ) as span:
            traced = CURRENT_TRACE.set(self.trace_id(span))
            try:
                yield span
            finally:
                CURRENT_TRACE.reset(traced)

    def tool_ended(self, span: Span, seen: CallSeen) -> None:
        """What the call's record and result say, on its span."""
        record = seen.record
        if record is None:
            return
        attributes: dict[str, Any] = {"openapi2mcp.outcome": record.outcome or "error",
                                      "openapi2mcp.upstream.requests": len(record.requests)}
        for key, value in (("openapi2mcp.error.code", record.error), ("openapi2mcp.branch", record.branch),
                           ("openapi2mcp.risk", record.risk), ("openapi2mcp.confirmation", record.confirmation)):
            if value:
                attributes[key] = value
        if record.dry_run:
            attributes["openapi2mcp.dry_run"] = True
        span.set_attributes(attributes)
        if seen.result is not None and seen.result.is_error:
            span.set_attribute("error.type", "tool_error")  # the conventions' value for isError results
            span.set_status(StatusCode.ERROR, record.error or "tool_error")

    # ------------------------------------------------------------------ upstream requests

    @contextlib.contextmanager
    def upstream(self, sent: Sent) -> Iterator[None]:
        """A CLIENT span around one upstream request; its traceparent goes on the request."""
        attributes: dict[str, Any] = {
            "http.request.method": sent.method, "url.template": sent.route, "url.scheme": sent.scheme,
            "server.address": sent.host, "openapi2mcp.operation": sent.operation,
        }
        if sent.port is not None:
            attributes["server.port"] = sent.port
        if sent.resend:
            attributes["http.request.resend_count"] = sent.resend
        with self.tracer.start_as_current_span(f"{sent.method} {sent.route}", kind=SpanKind.CLIENT,
                                               attributes=attributes, record_exception=False,
                                               set_status_on_exception=False) as span:
            carrier: dict[str, str] = {}
            _PROPAGATOR.inject(carrier)  # the current context: this span
            token = PROPAGATED.set(carrier)
            try:
                yield
            except ToolFailure as failure:
                span.set_attribute("error.type", failure.error.code)
                span.set_status(StatusCode.ERROR, failure.error.code)
                raise
            except BaseException:
                span.set_attribute("error.type", "cancelled")
                raise
            finally:
                PROPAGATED.reset(token)
                if sent.status is not None:
                    span.set_attribute("http.response.status_code", sent.status)
                    if sent.status >= 400:  # an error for an HTTP client
                        span.set_attribute("error.type", str(sent.status))
                        span.set_status(StatusCode.ERROR)


def _http_attributes(request: Any) -> dict[str, Any]:
    """The transport attributes of an MCP request that came over HTTP."""
    out: dict[str, Any] = {"network.transport": "tcp", "network.protocol.name": "http"}
    scope = getattr(request, "scope", None) or {}
    version = scope.get("http_version")
    if isinstance(version, str):
        out["network.protocol.version"] = version
    session = request.headers.get("mcp-session-id")
    if session:
        out["mcp.session.id"] = _clip(session)
    client = scope.get("client")
    if isinstance(client, (tuple, list)) and len(client) == 2:
        out["client.address"], out["client.port"] = str(client[0]), int(client[1])
    return out


# ============================================================================ the provider of `serve`


def provider_from_environment(service_name: str, service_version: str | None = None) -> Any:
    """A TracerProvider configured by the standard OTEL_* variables of the process.

    OTEL_SERVICE_NAME / OTEL_RESOURCE_ATTRIBUTES name the service (default: the server's name),
    OTEL_TRACES_SAMPLER(_ARG) sample, OTEL_BSP_* batch, OTEL_TRACES_EXPORTER picks the exporters
    (otlp, the default; console, to stderr; none) and OTEL_EXPORTER_OTLP_(TRACES_)* configure
    OTLP: endpoint, headers, timeout, compression, certificates, protocol (http/protobuf; grpc
    when opentelemetry-exporter-otlp-proto-grpc is installed). A value it cannot use is a ConfigError.
    """
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter, SpanExporter

    resource = Resource.create()
    if str(resource.attributes.get("service.name", "")).startswith("unknown_service"):
        extra = {"service.name": service_name, **({"service.version": service_version} if service_version else {})}
        resource = Resource.create(extra)
    provider = TracerProvider(resource=resource)
    exporters: list[SpanExporter] = []
    for name in [n.strip().lower() for n in os.environ.get("OTEL_TRACES_EXPORTER", "otlp").split(",") if n.strip()]:
        if name == "otlp":
            exporters.append(_otlp_exporter())
        elif name == "console":
            exporters.append(ConsoleSpanExporter(out=sys.stderr))  # stdout is the protocol's on stdio
        elif name != "none":
            raise ConfigError(f"OTEL_TRACES_EXPORTER: {name!r} is not an exporter this server has (otlp, console, "
                              "none)")
    for exporter in exporters:
        provider.add_span_processor(BatchSpanProcessor(exporter))
    return provider


def _otlp_exporter() -> Any:
    protocol = (os.environ.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL") or os.environ.get("OTEL_EXPORTER_OTLP_PROTOCOL")
                or "http/protobuf").strip().lower()
    if protocol == "http/protobuf":
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        return OTLPSpanExporter()
    if protocol == "grpc":
        try:  # not in the otel extra (grpcio is large); used when installed
            grpc = importlib.import_module("opentelemetry.exporter.otlp.proto.grpc.trace_exporter")
        except ImportError:
            raise ConfigError("OTEL_EXPORTER_OTLP_PROTOCOL=grpc needs opentelemetry-exporter-otlp-proto-grpc "
                              "(pip install it beside the otel extra), or use http/protobuf") from None
        return grpc.OTLPSpanExporter()
    raise ConfigError(f"OTEL_EXPORTER_OTLP_PROTOCOL: {protocol!r} is not supported (http/protobuf, or grpc with "
                      "opentelemetry-exporter-otlp-proto-grpc installed)")

