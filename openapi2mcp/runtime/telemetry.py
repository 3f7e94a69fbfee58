"""Telemetry of a Runtime: OpenTelemetry traces and Prometheus metrics, each off unless asked for.

`Telemetry` is what the rest of the runtime sees; it has three hooks, and none is installed when
both are off (`enabled` False), so a call then costs what it cost before:

* `middleware()`: the SDK server middleware around every MCP request (server.py installs it):
  a SERVER span (tracing.py) and the request-duration histogram (metrics.py);
* `call(...)`: around one tool call (calls.py): the tool's span (the tools/call request's span
  when the call came over MCP, else an `execute_tool` span of its own), then the call metrics
  from what the call's audit record says (outcome, error code, confirmation, requests) and from
  its result (repairs, cuts);
* `observe`: `Upstream.observe` (upstream/observe.py), around every upstream request: a CLIENT
  span whose W3C trace context goes upstream as `traceparent`, and the upstream metrics.

This module imports neither OpenTelemetry nor prometheus_client: tracing.py and metrics.py load
only when their part is on (docs/telemetry.md). `CURRENT_TRACE` is the trace id of the request
or call being served, for the log lines and the resource reads' audit lines.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Collection, Iterator, Mapping
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

import mcp_types as types
from mcp.shared.exceptions import MCPError
from pydantic import ValidationError

from openapi2mcp.errors import ToolFailure
from openapi2mcp.upstream import Observe, Sent

if TYPE_CHECKING:
    from openapi2mcp.runtime.audit import AuditRecord
    from openapi2mcp.runtime.metrics import Metrics
    from openapi2mcp.runtime.tracing import Tracing

# the methods of the MCP specification (the conventions' list, and the 2026-07-28 additions):
# another method's name is an attribute, never a span name or a metric label (an unbounded set)
METHODS: Final = frozenset({
    "completion/complete", "elicitation/create", "initialize", "logging/setLevel", "notifications/cancelled",
    "notifications/initialized", "notifications/message", "notifications/progress",
    "notifications/roots/list_changed", "ping", "prompts/get", "prompts/list", "resources/list",
    "resources/read", "resources/subscribe", "resources/templates/list", "resources/unsubscribe", "roots/list",
    "sampling/createMessage", "tools/call", "tools/list", "server/discover", "subscriptions/listen",
})
CURRENT_TRACE: ContextVar[str | None] = ContextVar("openapi2mcp_trace_id", default=None)


def current_trace_id() -> str | None:
    """The trace id of the MCP request or tool call being served (None outside one)."""
    return CURRENT_TRACE.get()


def tracing_installed() -> bool:
    """Whether the otel extra (the OpenTelemetry SDK and its OTLP/HTTP exporter) is installed; imports nothing."""
    from importlib import metadata

    try:
        metadata.version("opentelemetry-sdk")
        metadata.version("opentelemetry-exporter-otlp-proto-http")
    except metadata.PackageNotFoundError:
        return False
    return True


@dataclass
class CallSeen:
    """One tool call as telemetry sees it: calls.py hands over its audit record and its result."""

    name: str
    started: float
    trace_id: str | None = None  # the span's trace id when tracing is on
    record: AuditRecord | None = None
    result: types.CallToolResult | None = None
    answered_from_state: bool = False  # a 2026-07-28 retry carrying the answer to a confirmation


def is_tool_error(result: Any) -> bool:
    """An isError tool result, as a handler returns it (the model) or as a middleware may see it (its dict)."""
    if isinstance(result, types.CallToolResult):
        return bool(result.is_error)
    return isinstance(result, Mapping) and result.get("isError") is True


class Telemetry:
    """One per Runtime: the tracing half (an OpenTelemetry TracerProvider given) and the metrics half."""

    def __init__(self, *, tracer_provider: Any = None, metrics: bool = False, targets: Collection[str] = (),
                 redact: Callable[[str], str] = str) -> None:
        """`targets`: the tool and prompt names (low-cardinality names in span names and metric labels);
        `redact`: scrubs the upstream's secrets from a value before it becomes an attribute."""
        self.tracing: Tracing | None = None
        self.metrics: Metrics | None = None
        known = frozenset(targets)
        if tracer_provider is not None:
            from openapi2mcp.runtime.tracing import Tracing

            self.tracing = Tracing(tracer_provider, known, redact)
        if metrics:
            from openapi2mcp.runtime.metrics import Metrics

            self.metrics = Metrics(known)
        self.enabled = self.tracing is not None or self.metrics is not None

    # ------------------------------------------------------------------ MCP requests

    def middleware(self) -> Any:
        """The SDK `ServerMiddleware` for every MCP request (None when telemetry is off)."""
        if not self.enabled:
            return None
        tracing, metrics = self.tracing, self.metrics

        async def middleware(ctx: Any, call_next: Any) -> Any:
            started = time.perf_counter()
            error: str | None = None
            try:
                result = await (tracing.serve(ctx, call_next) if tracing else call_next(ctx))
                if is_tool_error(result):
                    error = "tool_error"
                return result
            except MCPError as e:
                error = str(e.error.code)
                raise
            except ValidationError:
                error = str(types.INVALID_PARAMS)
                raise
            except Exception:
                error = "_OTHER"
                raise
            finally:
                if metrics is not None:
                    metrics.request(ctx.method, error, time.perf_counter() - started)

        return middleware

    # ------------------------------------------------------------------ tool calls

    @contextlib.contextmanager
    def call(self, name: str, *, answered_from_state: bool = False) -> Iterator[CallSeen]:
        """Around one tool call: its span while it runs, its metrics when it ends."""
        seen = CallSeen(name=name, started=time.perf_counter(), answered_from_state=answered_from_state)
        tool = self.tracing.tool(name) if self.tracing else contextlib.nullcontext(None)
        with tool as span:
            if span is not None and self.tracing is not None:
                seen.trace_id = self.tracing.trace_id(span)
            try:
                yield seen
            finally:
                if span is not None and self.tracing is not None:
                    self.tracing.tool_ended(span, seen)
                if self.metrics is not None:
                    self.metrics.call(seen, time.perf_counter() - seen.started)

    # ------------------------------------------------------------------ upstream requests

    @property
    def observe(self) -> Observe | None:
        """The `Upstream.observe` hook (None when telemetry is off)."""
        return self._observe if self.enabled else None

    @contextlib.contextmanager
    def _observe(self, sent: Sent) -> Iterator[None]:
        started = time.perf_counter()
        error: str | None = None
        span = self.tracing.upstream(sent) if self.tracing else contextlib.nullcontext()
        try:
            with span:
                yield
        except ToolFailure as failure:  # no answer (timeout, unreachable) or one too large
            error = failure.error.code
            raise
        except BaseException:  # cancelled mid-request
            error = "cancelled"
            raise
        finally:
            if self.metrics is not None:
                self.metrics.upstream(sent, error, time.perf_counter() - started)
