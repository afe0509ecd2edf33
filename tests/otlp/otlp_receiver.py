"""An OTLP/gRPC trace receiver for the tests: the collector's TraceService from the
official protos (the `opentelemetry-proto` package), served on 127.0.0.1, keeping every
span it receives. The Python SDK's and the MCP tests export to it, askgate and the
test's own agent alike."""

from __future__ import annotations

import threading
from concurrent import futures
from dataclasses import dataclass, field
from typing import Any, Dict, List, Tuple

import grpc
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc


def _value(any_value: Any) -> Any:
    kind = any_value.WhichOneof("value")
    return getattr(any_value, kind) if kind else None


@dataclass
class Span:
    """A received span, its ids in hex."""

    service: str
    name: str
    trace_id: str
    span_id: str
    parent_span_id: str
    kind: int
    attributes: Dict[str, Any] = field(default_factory=dict)
    links: List[Tuple[str, str]] = field(default_factory=list)
    status_code: int = 0


class Receiver(trace_service_pb2_grpc.TraceServiceServicer):
    def __init__(self) -> None:
        self.spans: List[Span] = []
        self.lock = threading.Lock()
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        trace_service_pb2_grpc.add_TraceServiceServicer_to_server(self, self.server)
        port = self.server.add_insecure_port("127.0.0.1:0")
        self.endpoint = f"http://127.0.0.1:{port}"
        self.server.start()

    def Export(self, request: Any, context: Any) -> Any:  # noqa: N802 (the proto's name)
        with self.lock:
            for resource_spans in request.resource_spans:
                resource = {a.key: _value(a.value) for a in resource_spans.resource.attributes}
                for scope_spans in resource_spans.scope_spans:
                    for span in scope_spans.spans:
                        self.spans.append(
                            Span(
                                service=resource.get("service.name", ""),
                                name=span.name,
                                trace_id=span.trace_id.hex(),
                                span_id=span.span_id.hex(),
                                parent_span_id=span.parent_span_id.hex(),
                                kind=span.kind,
                                attributes={a.key: _value(a.value) for a in span.attributes},
                                links=[(l.trace_id.hex(), l.span_id.hex()) for l in span.links],
                                status_code=span.status.code,
                            )
                        )
        return trace_service_pb2.ExportTraceServiceResponse()

    def named(self, name: str) -> List[Span]:
        with self.lock:
            return [s for s in self.spans if s.name == name]

    def one(self, name: str) -> Span:
        named = self.named(name)
        assert len(named) == 1, f"one {name} span: {self.spans}"
        return named[0]

    def assert_nowhere(self, text: str) -> None:
        """No span carries `text` in its name or an attribute."""
        with self.lock:
            for span in self.spans:
                assert text not in repr(span), f"{text!r} leaked into {span}"

    def close(self) -> None:
        self.server.stop(grace=None)
