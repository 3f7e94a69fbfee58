"""Telemetry: OpenTelemetry traces exported over OTLP/HTTP, Prometheus metrics scraped by Prometheus.

Traces: `openapi2mcp serve` in a subprocess exports to an OTLP/HTTP receiver started here (an
HTTP server that decodes the protobuf export requests with opentelemetry-proto); a chain call
gives one tool span with one child span per upstream request, the caller's traceparent is the
parent and reaches the upstream (which records it), and the audit line's traceId is the trace's.

Metrics: a real Prometheus (Debian's package, unpacked by .ci/prometheus.sh into .cache/)
scrapes the server's /metrics; after a known sequence of calls its HTTP API gives the numbers.
"""

from __future__ import annotations

import contextlib
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

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from examples import Upstream
from tests.e2e_support import EXAMPLES, HttpServer, child_env, ok
from tests.runtime_upstream import free_port

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
        "runtime = package.runtime_for(manifest, options, {'NOTES_API_URL': 'http://127.0.0.1:9'},"
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


# ============================================================================ metrics, scraped by Prometheus

METRICS_TOKEN = "metrics-scrape-token-" + "5d1e8b20"


def prometheus_binary() -> Path:
    """Debian's Prometheus, unpacked by .ci/prometheus.sh (run here when .ci/run has not yet)."""
    cache = Path(os.environ.get("OPENAPI2MCP_PROMETHEUS_CACHE") or ROOT / ".cache" / "prometheus")
    binary = cache / "usr" / "bin" / "prometheus"
    if not binary.is_file():
        done = subprocess.run(["bash", str(ROOT / ".ci" / "prometheus.sh")], capture_output=True, text=True,
                              timeout=600, check=False)
        if done.returncode != 0:
            if os.environ.get("CI"):
                pytest.fail(f".ci/prometheus.sh failed:\n{done.stderr[-2000:]}")
            pytest.skip(f"Prometheus is not installed and .ci/prometheus.sh failed (apt): {done.stderr[-300:]}")
    return binary


@contextlib.contextmanager
def prometheus(target: str, tmp_path: Path) -> Iterator[str]:
    """A Prometheus server scraping `target` (host:port) every second with the metrics token; its URL."""
    binary = prometheus_binary()
    (tmp_path / "token").write_text(METRICS_TOKEN)
    config = tmp_path / "prometheus.yml"
    config.write_text(
        "global: {scrape_interval: 1s, scrape_timeout: 1s}\n"
        "scrape_configs:\n"
        "  - job_name: openapi2mcp\n"
        f"    authorization: {{credentials_file: {tmp_path / 'token'}}}\n"
        f"    static_configs: [{{targets: ['{target}']}}]\n")
    port = free_port()
    log = (tmp_path / "prometheus.log").open("w")
    process = subprocess.Popen([str(binary), f"--config.file={config}", f"--storage.tsdb.path={tmp_path / 'tsdb'}",
                                f"--web.listen-address=127.0.0.1:{port}"], stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            with contextlib.suppress(httpx2.TransportError):
                if httpx2.get(url + "/-/ready", timeout=1, trust_env=False).status_code == 200:
                    break
            assert process.poll() is None and time.monotonic() < deadline, (tmp_path / "prometheus.log").read_text()
            time.sleep(0.1)
        yield url
    finally:
        process.terminate()
        process.wait(15)
        log.close()


def query(url: str, promql: str) -> dict[tuple[tuple[str, str], ...], float]:
    """An instant query: labels (without __name__, job, instance) -> value."""
    answer = httpx2.get(url + "/api/v1/query", params={"query": promql}, timeout=5, trust_env=False).json()
    assert answer["status"] == "success", answer
    drop = {"__name__", "job", "instance"}
    return {tuple(sorted((k, v) for k, v in r["metric"].items() if k not in drop)): float(r["value"][1])
            for r in answer["data"]["result"]}


def metrics_overlay(tmp_path: Path) -> Path:
    """The petstore overlay with pets_list cut to 2 items (a cut result on every call)."""
    text = (PETSTORE / "overlay.yaml").read_text(encoding="utf-8")
    select = '      select: "{items: items[*].{id: id, name: name, status: status, tag: tag, age: age}, page: page, ' \
             'total: total}"\n'
    assert select in text
    path = tmp_path / "overlay.yaml"
    path.write_text(text.replace(select, select + "      max_items: 2\n"), encoding="utf-8")
    return path


class Decline:
    """The user: says no to every confirmation."""

    def __init__(self) -> None:
        self.asked = 0

    async def __call__(self, ctx: Any, params: Any) -> Any:
        import mcp_types as types

        self.asked += 1
        return types.ElicitResult(action="decline")


async def known_sequence(url: str, user: Decline, up: Upstream) -> list[Any]:
    """ok, error, confirmation declined, repaired, cut, rate limited (a burst of 5: the 6th charge)."""
    async with Client(url, mode="auto", elicitation_callback=user) as client:
        ok(await client.call_tool("pets_get", {"petId": "1"}))
        missing = await client.call_tool("pets_get", {"petId": "no-such-pet"})
        declined = await client.call_tool("pets_delete", {"petId": "2"})  # asked (input required), declined
        up.fault(kind="lie", operation="getPet")
        repaired = await client.call_tool("pets_get", {"petId": "1"})  # ok, 2 values repaired
        cut = await client.call_tool("pets_list", {})  # ok, cut to 2 items
        limited = await client.call_tool("pets_get", {"petId": "1"})
    return [missing, declined, repaired, cut, limited]


def test_prometheus_scrapes_the_numbers_of_a_known_sequence(up: Upstream, tmp_path: Path) -> None:
    up.reset()
    up.clear_faults()
    port = free_port()
    args = [str(PETSTORE / "openapi.yaml"), "--overlay", str(metrics_overlay(tmp_path)), "--metrics",
            "--metrics-port", str(port), "--rate-limit", "1/h,burst=5"]
    env = {"PETSTORE_URL": up.base_url, "PETSTORE_TOKEN": TOKEN, "OPENAPI2MCP_METRICS_TOKEN": METRICS_TOKEN}
    with HttpServer.start(args, log_dir=tmp_path, env=env) as server, \
            prometheus(f"127.0.0.1:{port}", tmp_path) as prom:
        assert f"metrics at http://127.0.0.1:{port}/metrics" in server.stderr()
        metrics = f"http://127.0.0.1:{port}/metrics"
        assert httpx2.get(metrics, trust_env=False).status_code == 401  # the token is required
        wrong = httpx2.get(metrics, headers={"Authorization": "Bearer " + "x" * 30}, trust_env=False)
        assert wrong.status_code == 401
        assert httpx2.get(metrics.replace("/metrics", "/mcp"), trust_env=False).status_code == 404
        user = Decline()
        missing, declined, repaired, cut, limited = anyio.run(known_sequence, server.url, user, up)
        assert missing.is_error and declined.is_error and limited.is_error and user.asked == 1
        assert (repaired.meta or {}).get("openapi2mcp/repairs") and (cut.meta or {}).get("openapi2mcp/truncated")
        deadline = time.monotonic() + 30
        while not query(prom, "openapi2mcp_rate_limited_calls_total") and time.monotonic() < deadline:
            time.sleep(0.25)  # until a scrape after the last call
        time.sleep(1.5)  # one more scrape: every series of the last calls is in

        assert query(prom, 'up{job="openapi2mcp"}') == {(): 1.0}
        assert query(prom, "openapi2mcp_tool_calls_total") == {
            (("outcome", "ok"), ("tool", "pets_get")): 2.0,
            (("code", "NOT_FOUND"), ("outcome", "error"), ("tool", "pets_get")): 1.0,
            (("outcome", "input_required"), ("tool", "pets_delete")): 1.0,
            (("code", "CONFIRMATION_DECLINED"), ("outcome", "declined"), ("tool", "pets_delete")): 1.0,
            (("outcome", "ok"), ("tool", "pets_list")): 1.0,
            (("code", "RATE_LIMITED"), ("outcome", "denied"), ("tool", "pets_get")): 1.0,
        }
        assert query(prom, "sum(openapi2mcp_tool_call_duration_seconds_count)") == {(): 7.0}
        assert query(prom, "openapi2mcp_confirmations_asked_total") == {(("tool", "pets_delete"),): 1.0}
        assert query(prom, "openapi2mcp_confirmations_answered_total") == {
            (("answer", "declined"), ("tool", "pets_delete")): 1.0}
        assert query(prom, "openapi2mcp_rate_limited_calls_total") == {(("by", "server"), ("tool", "pets_get")): 1.0}
        assert query(prom, "openapi2mcp_response_repairs_total") == {(("tool", "pets_get"),): 2.0}
        assert query(prom, "openapi2mcp_results_cut_total") == {(("reason", "max_items"), ("tool", "pets_list")): 1.0}
        assert query(prom, "openapi2mcp_upstream_requests_total") == {
            (("method", "GET"), ("operation", "getPet"), ("status", "200")): 2.0,
            (("method", "GET"), ("operation", "getPet"), ("status", "404")): 1.0,
            (("method", "GET"), ("operation", "listPets"), ("status", "200")): 1.0,
        }
        assert query(prom, "sum(openapi2mcp_upstream_request_duration_seconds_count)") == {(): 4.0}
        tools_call = query(prom, 'sum by (error) (openapi2mcp_mcp_request_duration_seconds_count'
                                 '{method="tools/call"})')
        assert tools_call == {(): 4.0, (("error", "tool_error"),): 3.0}  # 7 requests: 2 for the confirmation
        assert query(prom, "process_resident_memory_bytes")  # the process collectors are there too
    assert up.count("deletePet") == 0


# ============================================================================ JSON logs


@pytest.mark.anyio
async def test_json_logs_carry_the_trace_id(up: Upstream, tmp_path: Path) -> None:
    """--log-format json: every stderr line is a JSON object (uvicorn's and the start-up line too); the
    lines of a call carry its traceId, which with tracing on is the trace's."""
    args = [str(PETSTORE / "openapi.yaml"), "--overlay", str(PETSTORE / "overlay.yaml"), "--log-format", "json",
            "--log-level", "info"]
    with HttpServer.start(args, log_dir=tmp_path, env={"PETSTORE_URL": up.base_url}) as server:
        async with Client(server.url, mode="auto") as client:
            found = ok(await client.call_tool("pets_get", {"petId": "1"}))
            missing = await client.call_tool("pets_get", {"petId": "no-such-pet"})
    assert found["id"] == "1" and missing.is_error
    lines = [json.loads(line) for line in server.stderr().splitlines() if line.strip()]  # each line parses
    assert {"time", "level", "logger", "message"} <= set(lines[0])
    assert any(line["message"].startswith("serving ") for line in lines)
    assert any(line["logger"].startswith("uvicorn") for line in lines)
    calls = [line for line in lines if line["message"].startswith("tool=pets_get")]
    assert len(calls) == 2
    for line in calls:
        assert f"traceId={line['traceId']} " in line["message"]
    assert calls[1]["traceId"] == (missing.meta or {})["openapi2mcp/traceId"]
