"""Telemetry: OpenTelemetry traces exported over OTLP/HTTP, Prometheus metrics scraped by Prometheus.

Traces: `openapi2mcp serve` in a subprocess exports to an OTLP/HTTP receiver started here (an
HTTP server that decodes the protobuf export requests with opentelemetry-proto); a chain call
gives one tool span with one child span per upstream request, the caller's traceparent is the
parent and reaches the upstream (which records it), and the audit line's traceId is the trace's.

Metrics: a real Prometheus (Debian's package, unpacked by .ci/prometheus.sh into .cache/)
scrapes the server's /metrics; after a known sequence of calls its HTTP API gives the numbers.
"""

from __future__ import annotations

import gzip
import http.server
import json
import os
import secrets
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from examples import Upstream
from tests.e2e_support import EXAMPLES, HttpServer, child_env, ok

ROOT = Path(__file__).resolve().parents[1]
PETSTORE = EXAMPLES / "petstore"
TOKEN = "petstore-canary-token-" + "7f3a9c"  # the upstream credential: never in a span


# ============================================================================ an OTLP/HTTP receiver


class Receiver:
    """POST /v1/traces: OTLP/HTTP protobuf export requests, decoded into plain span dicts."""

    def __init__(self) -> None:
        from opentelemetry.proto.collector.trace.v1 import trace_service_pb2

        self.spans: list[dict[str, Any]] = []
        self.resources: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        spans, resources, lock = self.spans, self.resources, self.lock

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length", "0")))
                if self.headers.get("content-encoding") == "gzip":
                    body = gzip.decompress(body)
                request = trace_service_pb2.ExportTraceServiceRequest()
                request.ParseFromString(body)
                with lock:
                    for rs in request.resource_spans:
                        resources.append({a.key: _value(a.value) for a in rs.resource.attributes})
                        for ss in rs.scope_spans:
                            spans.extend(_span(s, ss.scope.name) for s in ss.spans)
                reply = trace_service_pb2.ExportTraceServiceResponse().SerializeToString()
                self.send_response(200 if self.path == "/v1/traces" else 404)
                self.send_header("content-type", "application/x-protobuf")
                self.send_header("content-length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def wait_for(self, count: int, timeout: float = 20) -> list[dict[str, Any]]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.lock:
                if len(self.spans) >= count:
                    return list(self.spans)
            time.sleep(0.05)
        raise AssertionError(f"{len(self.spans)} spans exported, expected {count}: {self.spans}")

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def _value(v: Any) -> Any:
    kind = v.WhichOneof("value")
    return getattr(v, kind) if kind else None


def _span(s: Any, scope: str) -> dict[str, Any]:
    from opentelemetry.proto.trace.v1 import trace_pb2

    return {
        "name": s.name, "scope": scope, "trace_id": s.trace_id.hex(), "span_id": s.span_id.hex(),
        "parent_id": s.parent_span_id.hex(), "kind": trace_pb2.Span.SpanKind.Name(s.kind),
        "attributes": {a.key: _value(a.value) for a in s.attributes},
        "status": trace_pb2.Status.StatusCode.Name(s.status.code),
        "links": [(link.trace_id.hex(), link.span_id.hex()) for link in s.links],
    }


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver()
    yield r
    r.close()


@pytest.fixture(scope="module")
def up() -> Iterator[Upstream]:
    with Upstream.start("petstore") as upstream:
        yield upstream


def tasks_overlay(tmp_path: Path) -> Path:
    """overlay-tasks.yaml with one retry of idempotent requests (so a 502 is retried, and seen twice)."""
    text = (PETSTORE / "overlay-tasks.yaml").read_text(encoding="utf-8")
    text = text.replace("  timeout: {connect: 3, read: 10, total: 30}\n",
                        "  timeout: {connect: 3, read: 10, total: 30}\n  retries: {max_attempts: 2, backoff: 0.01}\n")
    assert "retries:" in text
    path = tmp_path / "overlay.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def traceparent(trace_id: str, span_id: str) -> str:
    return f"00-{trace_id}-{span_id}-01"


# ============================================================================ traces


@pytest.mark.anyio
async def test_a_chain_call_is_one_tool_span_with_its_upstream_requests(
    up: Upstream, receiver: Receiver, tmp_path: Path
) -> None:
    up.reset()
    up.clear_faults()
    up.fault(operation="listOrderItems", status=502, times=1)  # retried: two CLIENT spans for this step
    audit = tmp_path / "audit.jsonl"
    env = {"PETSTORE_URL": up.base_url, "PETSTORE_TOKEN": TOKEN, "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url,
           "OTEL_SERVICE_NAME": "petstore-mcp-test", "OTEL_BSP_SCHEDULE_DELAY": "50"}
    args = [str(PETSTORE / "openapi.yaml"), "--overlay", str(tasks_overlay(tmp_path)), "--audit-log", str(audit)]
    meta_trace, meta_span = secrets.token_hex(16), secrets.token_hex(8)
    http_trace, http_span = secrets.token_hex(16), secrets.token_hex(8)
    with HttpServer.start(args, log_dir=tmp_path, env=env) as server:
        headers = {"traceparent": traceparent(http_trace, http_span)}
        async with (
            httpx2.AsyncClient(headers=headers, timeout=30) as http,
            Client(streamable_http_client(server.url, http_client=http)) as client,
        ):
            order = ok(await client.call_tool("orders_get_full", {"orderId": "o-1001"},
                                              meta={"traceparent": traceparent(meta_trace, meta_span)}))
            missing = await client.call_tool("orders_get_full", {"orderId": "o-9999"})  # the header's trace
        assert "tracing on" in server.stderr()
    assert order["customer"]["name"] and missing.is_error
    spans = receiver.wait_for(7)
    assert receiver.resources[0]["service.name"] == "petstore-mcp-test"

    # the first call: its parent is _meta's traceparent; the HTTP header's context is a link
    tree = [s for s in spans if s["trace_id"] == meta_trace]
    (tool,) = [s for s in tree if s["kind"] == "SPAN_KIND_SERVER"]
    assert tool["name"] == "tools/call orders_get_full" and tool["parent_id"] == meta_span
    assert tool["links"] == [(http_trace, http_span)]
    attributes = tool["attributes"]
    assert attributes["mcp.method.name"] == "tools/call" and attributes["gen_ai.tool.name"] == "orders_get_full"
    assert attributes["gen_ai.operation.name"] == "execute_tool"
    assert attributes["mcp.protocol.version"] == "2026-07-28" and attributes["network.transport"] == "tcp"
    assert attributes["openapi2mcp.outcome"] == "ok" and attributes["openapi2mcp.upstream.requests"] == 4
    assert "error.type" not in attributes and tool["status"] != "STATUS_CODE_ERROR"
    client_spans = [s for s in tree if s["kind"] == "SPAN_KIND_CLIENT"]
    assert {s["parent_id"] for s in client_spans} == {tool["span_id"]}
    assert sorted(s["name"] for s in client_spans) == [
        "GET /customers/{customerId}", "GET /orders/{orderId}", "GET /orders/{orderId}/items",
        "GET /orders/{orderId}/items"]
    items = sorted((s for s in client_spans if s["name"].endswith("/items")),
                   key=lambda s: s["attributes"].get("http.request.resend_count", 0))
    assert items[0]["attributes"]["http.response.status_code"] == 502
    assert items[0]["attributes"]["error.type"] == "502" and items[0]["status"] == "STATUS_CODE_ERROR"
    assert items[1]["attributes"]["http.request.resend_count"] == 1
    assert items[1]["attributes"]["http.response.status_code"] == 200
    get_order = next(s for s in client_spans if s["name"] == "GET /orders/{orderId}")["attributes"]
    assert get_order["http.request.method"] == "GET" and get_order["url.template"] == "/orders/{orderId}"
    assert get_order["server.address"] == "127.0.0.1" and get_order["server.port"] == int(up.base_url.rsplit(":")[-1])
    assert get_order["openapi2mcp.operation"] == "getOrder"

    # the upstream got each CLIENT span's traceparent: same trace, the span as the parent
    sent = {r["headers"].get("traceparent") for r in up.requests() if r["operation"] in
            ("getOrder", "listOrderItems", "getCustomer")}
    assert {traceparent(meta_trace, s["span_id"]) for s in client_spans} <= sent

    # the second call has no _meta trace context: the HTTP header's is its parent
    second = [s for s in spans if s["trace_id"] == http_trace]
    (failed,) = [s for s in second if s["name"] == "tools/call orders_get_full"]
    assert failed["parent_id"] == http_span and failed["attributes"]["error.type"] == "tool_error"
    assert failed["attributes"]["openapi2mcp.error.code"] == "NOT_FOUND"
    assert failed["status"] == "STATUS_CODE_ERROR"
    others = {s["attributes"]["mcp.method.name"] for s in second if s["kind"] == "SPAN_KIND_SERVER"} - {"tools/call"}
    assert others and all(s["parent_id"] == http_span for s in second if s["kind"] == "SPAN_KIND_SERVER")

    # the audit lines' traceIds are the traces'
    lines = [json.loads(line) for line in audit.read_text().splitlines()]
    results = [line for line in lines if line["phase"] == "result"]
    assert [line["traceId"] for line in results] == [meta_trace, http_trace]

    # no secret and no value from a call in any attribute
    dumped = json.dumps(spans)
    assert TOKEN not in dumped and "o-1001" not in dumped and "o-9999" not in dumped and "c-1" not in dumped


def test_without_tracing_nothing_of_opentelemetry_is_loaded(tmp_path: Path) -> None:
    """--tracing off (or auto without OTEL_*): the server loads no OpenTelemetry SDK module, nor tracing.py."""
    script = (
        "import sys, anyio\n"
        "from openapi2mcp.serving import package\n"
        "from openapi2mcp.serving.options import resolve\n"
        "from tests.helpers import compile_example\n"
        "manifest = compile_example('notes').manifest\n"
        "options = resolve({'metrics': None}, {})\n"
        "runtime = package._runtime(manifest, options, {'NOTES_API_URL': 'http://127.0.0.1:9'},"
        " package.tracer_provider(manifest, options, {}, 'x'))\n"
        "server = runtime.build_server()\n"
        "print(sorted(m for m in sys.modules if m.startswith(('opentelemetry.sdk', 'opentelemetry.exporter',"
        " 'prometheus_client', 'openapi2mcp.runtime.tracing', 'openapi2mcp.runtime.metrics'))))\n"
        "print(runtime.telemetry.enabled, runtime.upstream.observe, [type(m).__name__ for m in server.middleware])\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT,
                          env=child_env(), timeout=60)
    assert done.returncode == 0, done.stderr
    loaded, hooks = done.stdout.splitlines()
    assert loaded == "[]"
    assert hooks == "False None ['OpenTelemetryMiddleware']"  # the SDK's own, untouched: a no-op without a provider


def test_tracing_on_without_the_extra_says_what_to_install(tmp_path: Path) -> None:
    """A Python where the OpenTelemetry SDK cannot be found: `--tracing on` is a one-line error naming the extra."""
    hide = tmp_path / "hide"
    hide.mkdir()
    (hide / "sitecustomize.py").write_text(
        "import importlib.metadata as m\n_version = m.version\n"
        "def version(name):\n"
        "    if name.startswith('opentelemetry-sdk') or name.startswith('opentelemetry-exporter'):\n"
        "        raise m.PackageNotFoundError(name)\n"
        "    return _version(name)\n"
        "m.version = version\n")
    env = child_env({"PYTHONPATH": f"{hide}{os.pathsep}{ROOT}", "NOTES_API_URL": "http://127.0.0.1:9"})
    spec, overlay = EXAMPLES / "notes" / "openapi.yaml", EXAMPLES / "notes" / "overlay.yaml"
    base = [sys.executable, "-m", "openapi2mcp", "serve", str(spec), "--overlay", str(overlay), "--check"]
    on = subprocess.run([*base, "--tracing", "on"], capture_output=True, text=True, env=env, cwd=ROOT, timeout=60)
    assert on.returncode == 2 and "openapi2mcp-runtime[otel]" in on.stderr and "Traceback" not in on.stderr
    auto = subprocess.run(base, capture_output=True, text=True, cwd=ROOT, timeout=60,
                          env={**env, "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9"})
    assert auto.returncode == 0 and "the otel extra is not installed" in auto.stderr
