"""Traces in tests: a minimal OTLP/HTTP receiver (processes started with OTEL_EXPORTER_OTLP_ENDPOINT pointing at
it send their spans here, protobuf as the SDK's exporter sends them, and the test reads them back as dicts),
tracing to memory in the test's own process, and a daphne to send requests through."""

from __future__ import annotations

import gzip
import socket
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest, ExportTraceServiceResponse
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from support.ops import tracing

ROOT = Path(__file__).resolve().parents[1]


def _value(v):
    kind = v.WhichOneof("value")
    if kind == "array_value":
        return tuple(_value(x) for x in v.array_value.values)
    return getattr(v, kind) if kind else None


class Receiver:
    def __init__(self):
        self.spans: list[dict] = []
        self._lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                request = ExportTraceServiceRequest.FromString(body)
                receiver._take(request)
                answer = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.endpoint = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, args=(0.02,), daemon=True).start()

    def _take(self, request) -> None:
        out = []
        for resource_spans in request.resource_spans:
            resource = {a.key: _value(a.value) for a in resource_spans.resource.attributes}
            for scope_spans in resource_spans.scope_spans:
                for s in scope_spans.spans:
                    out.append({
                        "name": s.name, "trace_id": s.trace_id.hex(), "span_id": s.span_id.hex(),
                        "parent_id": s.parent_span_id.hex(), "start": s.start_time_unix_nano,
                        "end": s.end_time_unix_nano, "kind": s.kind, "scope": scope_spans.scope.name,
                        "attributes": {a.key: _value(a.value) for a in s.attributes},
                        "links": [{"trace_id": link.trace_id.hex(), "span_id": link.span_id.hex()} for link in s.links],
                        "service": resource.get("service.name"), "status": s.status.code,
                    })
        with self._lock:
            self.spans.extend(out)

    def wait_for(self, predicate, timeout: float = 20.0) -> list[dict]:
        """The spans once predicate(spans) holds; fails the test with what came when it does not in time."""
        deadline = time.monotonic() + timeout
        while True:
            with self._lock:
                spans = list(self.spans)
            if predicate(spans):
                return spans
            if time.monotonic() > deadline:
                raise AssertionError(f"spans not received in {timeout} s; got: {[s['name'] for s in spans]}")
            time.sleep(0.1)

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def traced_here():
    """This test process traces too, to memory (the SDK's in-memory exporter); off again after the test."""
    exporter = InMemorySpanExporter()
    tracing.setup(exporter=exporter, instrument=False)
    yield exporter
    tracing.shutdown()


def start_daphne(env: dict, log_path) -> tuple[subprocess.Popen, int]:
    """A daphne serving the site on a free port with `env`, once it accepts connections; (process, port)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with open(log_path, "wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port),
                                 "agentsite.asgi:application"], cwd=ROOT, env=env, stdout=out, stderr=out)
    deadline = time.monotonic() + 30
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return proc, port
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                pytest.fail(f"daphne did not start: {Path(log_path).read_text()[-3000:]}")
            time.sleep(0.1)
