"""Prometheus metrics (`--metrics`): what the calls did, counted per tool, and the /metrics listener.

Loaded only when metrics are on (telemetry.py). Every metric is in the Runtime's own registry
(with the process, platform and GC collectors), served by `MetricsServer` on a listener of its
own (docs/telemetry.md says why: a scrape port that is not the MCP port, loopback by default,
a bearer token when set). Label values are bounded: a tool or prompt name the server does not
have is `_unknown`, an MCP method outside the specification `_OTHER`, so a client cannot grow
the series without end.
"""

from __future__ import annotations

import hmac
import socket
import threading
from collections.abc import Callable, Iterable
from socketserver import ThreadingMixIn
from typing import Any, Final
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Histogram,
    gc_collector,
    make_wsgi_app,
    platform_collector,
    process_collector,
)

from openapi2mcp.errors import ErrorCode
from openapi2mcp.result import CUTS_KEY
from openapi2mcp.runtime.telemetry import METHODS, CallSeen
from openapi2mcp.upstream import ConfigError, Sent

UNKNOWN: Final = "_unknown"
# seconds: from a cached read to the default 60 s deadline of a call
BUCKETS: Final = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
_ANSWERS: Final = {"confirmed": "approved", "declined": "declined", "cancelled": "cancelled", "timeout": "timeout"}


class Metrics:
    """The counters and histograms of one Runtime."""

    def __init__(self, targets: Iterable[str]) -> None:
        self.targets = frozenset(targets)
        self.registry = r = CollectorRegistry()
        process_collector.ProcessCollector(registry=r)
        platform_collector.PlatformCollector(registry=r)
        gc_collector.GCCollector(registry=r)
        self.calls = Counter("openapi2mcp_tool_calls", "Tool calls, by tool, outcome and error code.",
                             ["tool", "outcome", "code"], registry=r)
        self.call_seconds = Histogram("openapi2mcp_tool_call_duration_seconds",
                                      "Time from a tool call's arrival to its result.", ["tool", "outcome"],
                                      buckets=BUCKETS, registry=r)
        self.upstream_responses = Counter(
            "openapi2mcp_upstream_requests", "Upstream requests (each retry counted), by operation, method and HTTP "
            "status (or the error code when no answer came).", ["operation", "method", "status"], registry=r)
        self.upstream_seconds = Histogram("openapi2mcp_upstream_request_duration_seconds",
                                          "Time of one upstream request, its body read.", ["operation", "method"],
                                          buckets=BUCKETS, registry=r)
        self.asked = Counter("openapi2mcp_confirmations_asked", "Confirmations the user was asked for.", ["tool"],
                             registry=r)
        self.answered = Counter("openapi2mcp_confirmations_answered",
                                "Answers to confirmations: approved, declined, cancelled, timeout.",
                                ["tool", "answer"], registry=r)
        self.auto_approved = Counter("openapi2mcp_confirmations_auto_approved",
                                     "Calls that needed a confirmation and were approved by --auto-approve.",
                                     ["tool"], registry=r)
        self.rate_limited = Counter("openapi2mcp_rate_limited_calls",
                                    "Calls refused as RATE_LIMITED: by this server's limits or by the upstream (429).",
                                    ["tool", "by"], registry=r)
        self.repairs = Counter("openapi2mcp_response_repairs",
                               "Values of upstream responses repaired to fit the documented schema.", ["tool"],
                               registry=r)
        self.cuts = Counter("openapi2mcp_results_cut", "Results cut to fit max_items or max_bytes, by reason.",
                            ["tool", "reason"], registry=r)
        self.requests = Histogram("openapi2mcp_mcp_request_duration_seconds",
                                  "MCP requests and notifications, by method and error type (JSON-RPC code, "
                                  "tool_error, or empty).", ["method", "error"], buckets=BUCKETS, registry=r)

    def _tool(self, name: str) -> str:
        return name if name in self.targets else UNKNOWN

    def request(self, method: Any, error: str | None, seconds: float) -> None:
        self.requests.labels(method if method in METHODS else "_OTHER", error or "").observe(seconds)

    def call(self, seen: CallSeen, seconds: float) -> None:
        record = seen.record
        tool = self._tool(seen.name)
        outcome = (record.outcome if record else None) or "error"
        code = (record.error if record else None) or ""
        self.calls.labels(tool, outcome, code).inc()
        self.call_seconds.labels(tool, outcome).observe(seconds)
        if record is None:
            return
        confirmation = record.confirmation
        if confirmation == "requested" or (confirmation in _ANSWERS and not seen.answered_from_state):
            self.asked.labels(tool).inc()  # asked now (the answer of a 2026-07-28 retry was asked for before)
        if confirmation in _ANSWERS:
            self.answered.labels(tool, _ANSWERS[confirmation]).inc()
        elif confirmation == "auto_approved":
            self.auto_approved.labels(tool).inc()
        if code == ErrorCode.RATE_LIMITED:
            answered = any(r.get("status") == 429 for r in record.requests)
            self.rate_limited.labels(tool, "upstream" if answered else "server").inc()
        if record.repairs:
            self.repairs.labels(tool).inc(record.repairs["count"])
        meta = (seen.result.meta if seen.result is not None else None) or {}
        for reason in sorted({str(c.get("reason")) for c in meta.get(CUTS_KEY) or ()}):
            self.cuts.labels(tool, reason).inc()

    def upstream(self, sent: Sent, error: str | None, seconds: float) -> None:
        status = str(sent.status) if sent.status is not None else (error or "none")
        self.upstream_responses.labels(sent.operation, sent.method, status).inc()
        self.upstream_seconds.labels(sent.operation, sent.method).observe(seconds)


# ============================================================================ /metrics


class _Server(ThreadingMixIn, WSGIServer):
    daemon_threads = True


class _Quiet(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass  # scrapes every few seconds would drown the log


class MetricsServer:
    """GET /metrics on a listener of its own, in a thread (a busy event loop still answers scrapes).

    With a `token`, a scrape must send `Authorization: Bearer <token>` (Prometheus:
    `authorization: {credentials_file: ...}`); anything else is 401.
    """

    def __init__(self, registry: CollectorRegistry, host: str, port: int, token: str | None) -> None:
        app = make_wsgi_app(registry)
        expected = f"Bearer {token}".encode() if token else None

        def guarded(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
            if environ.get("PATH_INFO") != "/metrics":
                start_response("404 Not Found", [("Content-Type", "text/plain")])
                return [b"not found: the metrics are at /metrics\n"]
            given = environ.get("HTTP_AUTHORIZATION", "").encode("latin-1", "replace")
            if expected is not None and not hmac.compare_digest(given, expected):
                start_response("401 Unauthorized", [("Content-Type", "text/plain"),
                                                     ("WWW-Authenticate", 'Bearer realm="metrics"')])
                return [b"unauthorized: send the metrics token as a bearer token\n"]
            return app(environ, start_response)  # type: ignore[no-any-return]

        server_class = type("_Server6", (_Server,), {"address_family": socket.AF_INET6}) if ":" in host else _Server
        try:
            self.httpd: WSGIServer = make_server(host, port, guarded, server_class=server_class, handler_class=_Quiet)
        except OSError as e:
            raise ConfigError(f"cannot serve the metrics on {host}:{port} ({e.strerror or e}); choose another "
                              "--metrics-port / OPENAPI2MCP_METRICS_PORT") from None
        self.port: int = int(self.httpd.server_address[1])
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self.httpd.serve_forever, name="openapi2mcp-metrics", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        if self._thread is not None:
            self.httpd.shutdown()
            self._thread.join(timeout=5)
            self._thread = None
        self.httpd.server_close()
