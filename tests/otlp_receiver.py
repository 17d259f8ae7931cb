"""A real OTLP/HTTP receiver on 127.0.0.1 that decodes what arrives (protobuf): traces on
``/v1/traces``, metrics on ``/v1/metrics``."""

from __future__ import annotations

import gzip
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType

from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
    ExportMetricsServiceResponse,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.metrics.v1.metrics_pb2 import Metric
from opentelemetry.proto.trace.v1.trace_pb2 import Span


class OtlpReceiver:
    """Start with ``with OtlpReceiver() as receiver``; ``receiver.endpoint`` is the traces URL."""

    def __init__(self) -> None:
        self.spans: list[Span] = []
        self.metrics: list[Metric] = []
        self.trace_bodies: list[bytes] = []
        """Each traces request as it arrived (protobuf, uncompressed)."""
        self._lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                if self.path == "/v1/metrics":
                    metrics = ExportMetricsServiceRequest()
                    metrics.ParseFromString(body)
                    with receiver._lock:
                        for resource_metrics in metrics.resource_metrics:
                            for scope_metrics in resource_metrics.scope_metrics:
                                receiver.metrics.extend(scope_metrics.metrics)
                    payload = ExportMetricsServiceResponse().SerializeToString()
                else:
                    request = ExportTraceServiceRequest()
                    request.ParseFromString(body)
                    with receiver._lock:
                        receiver.trace_bodies.append(body)
                        for resource_spans in request.resource_spans:
                            for scope_spans in resource_spans.scope_spans:
                                receiver.spans.extend(scope_spans.spans)
                    payload = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, format: str, *args: object) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def endpoint(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}/v1/traces"

    def __enter__(self) -> OtlpReceiver:
        self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)
