"""What telemetry costs per tool call: tracing off / on, metrics off / on (docs/telemetry.md).

    python benchmarks/telemetry_overhead.py [--calls 300] [--rounds 7] [--upstream canned|example] [--markdown]

A Runtime over examples/petstore/overlay.yaml called through the mcp SDK's in-memory Client (so
the MCP request span of the middleware is in it), tool `pets_get`. The upstream answers with
`--upstream canned` (the default) a canned pet from an httpx2.MockTransport in this process:
the overhead is tens of microseconds, and the real example upstream on a shared machine varies
by milliseconds from call to call, which would bury it; `--upstream example` uses the petstore
example server on 127.0.0.1 instead (the whole call, with the noise).
Configurations, each a fresh Runtime:

  off            no tracer provider, no metrics: no hook is installed
  tracing        an SDK TracerProvider, BatchSpanProcessor, an exporter that drops the spans
                 (the cost of making spans and handing them to the batcher)
  tracing+otlp   ... exporting over OTLP/HTTP to a receiver in this process's child (what serve
                 does with OTEL_EXPORTER_OTLP_ENDPOINT; the export runs on the batcher's thread)
  metrics        Prometheus metrics on (no scrape)
  both           tracing+otlp and metrics

The configurations run interleaved, `--rounds` times `--calls` sequential calls each, so drift
of the machine spreads over all of them; per-call latency is the median over all calls of a
configuration, the overhead its difference to `off`. CPU is the process's CPU time per call (all threads: the
batcher's export thread too), which the machine's other load disturbs less than wall time.
"""

from __future__ import annotations

import argparse
import contextlib
import http.server
import statistics
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make the `benchmarks` package importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import anyio
from mcp import Client

from benchmarks import _common as c

PETSTORE = c.ROOT / "examples" / "petstore"


@contextlib.contextmanager
def otlp_sink() -> Iterator[str]:
    """An OTLP/HTTP endpoint that accepts every export (and reads its body): its URL."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("content-length", "0")))
            self.send_response(200)
            self.send_header("content-length", "0")
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1/traces"
    finally:
        server.shutdown()


def providers(endpoint: str) -> dict[str, Callable[[], Any]]:
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

    class Drop(SpanExporter):
        def export(self, spans: Any) -> SpanExportResult:
            return SpanExportResult.SUCCESS

    def dropping() -> Any:
        p = TracerProvider()
        p.add_span_processor(BatchSpanProcessor(Drop()))
        return p

    def otlp() -> Any:
        p = TracerProvider()
        p.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=endpoint)))
        return p

    return {"tracing": dropping, "otlp": otlp}


PET = {"id": "1", "name": "Rex", "status": "available", "tag": "dog", "age": 3}


def canned(request: Any) -> Any:
    import httpx2

    return httpx2.Response(200, json=PET)


async def batch(runtime: Any, calls: int, cpu: list[float]) -> list[float]:
    times: list[float] = []
    async with Client(runtime.build_server(), mode="auto") as client:
        await client.call_tool("pets_get", {"petId": "1"})  # warm: connection pool, caches
        before = time.process_time()
        for _ in range(calls):
            started = time.perf_counter()
            result = await client.call_tool("pets_get", {"petId": "1"})
            times.append(time.perf_counter() - started)
            assert not result.is_error, result
        cpu.append((time.process_time() - before) / calls)
    await runtime.aclose()
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--upstream", choices=("canned", "example"), default="canned")
    parser.add_argument("--markdown", action="store_true")
    args = parser.parse_args()

    from examples import Upstream
    from openapi2mcp import compile_manifest, load_spec, read_overlay
    from openapi2mcp.runtime import Runtime, RuntimeOptions

    manifest = compile_manifest(load_spec(str(PETSTORE / "openapi.yaml")),
                                [read_overlay(PETSTORE / "overlay.yaml")]).manifest
    import httpx2

    with contextlib.ExitStack() as stack:
        endpoint = stack.enter_context(otlp_sink())
        if args.upstream == "example":
            env, transport = {"PETSTORE_URL": stack.enter_context(Upstream.start("petstore")).base_url}, None
        else:
            env, transport = {"PETSTORE_URL": "http://127.0.0.1:9"}, httpx2.MockTransport(canned)
        made = providers(endpoint)
        configs: dict[str, Callable[[], RuntimeOptions]] = {
            "off": lambda: RuntimeOptions(),
            "tracing": lambda: RuntimeOptions(tracer_provider=made["tracing"]()),
            "tracing+otlp": lambda: RuntimeOptions(tracer_provider=made["otlp"]()),
            "metrics": lambda: RuntimeOptions(metrics=True),
            "both": lambda: RuntimeOptions(tracer_provider=made["otlp"](), metrics=True),
        }
        samples: dict[str, list[float]] = {k: [] for k in configs}
        cpus: dict[str, list[float]] = {k: [] for k in configs}
        for _ in range(args.rounds):
            for key, options in configs.items():
                o = options()
                runtime = Runtime(manifest, RuntimeOptions(environ=env, tracer_provider=o.tracer_provider,
                                                           metrics=o.metrics, upstream_transport=transport))
                samples[key] += anyio.run(batch, runtime, args.calls, cpus[key])
                if o.tracer_provider is not None:
                    o.tracer_provider.shutdown()
    base, base_cpu = statistics.median(samples["off"]), statistics.median(cpus["off"])
    rows = [(k, statistics.median(v), statistics.quantiles(v, n=20)[18], statistics.median(cpus[k]))
            for k, v in samples.items()]
    if args.markdown:
        print("| configuration | p50 per call | p95 | overhead (p50) | CPU per call | overhead (CPU) |")
        print("|---|---|---|---|---|---|")
        for key, p50, p95, cpu in rows:
            print(f"| {key} | {p50 * 1e6:.0f} µs | {p95 * 1e6:.0f} µs | {(p50 - base) * 1e6:+.0f} µs | "
                  f"{cpu * 1e6:.0f} µs | {(cpu - base_cpu) * 1e6:+.0f} µs |")
    else:
        for key, p50, p95, cpu in rows:
            print(f"{key:14} p50 {p50 * 1e6:7.0f} µs  p95 {p95 * 1e6:7.0f} µs  overhead {(p50 - base) * 1e6:+6.0f} µs"
                  f"  CPU {cpu * 1e6:6.0f} µs ({(cpu - base_cpu) * 1e6:+.0f})")
    print(f"({args.rounds} rounds x {args.calls} calls per configuration, upstream {args.upstream}; "
          f"Python {sys.version.split()[0]})")


if __name__ == "__main__":
    main()
