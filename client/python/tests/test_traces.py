"""Traces against a real `askgate serve` exporting over OTLP to a real receiver (the
official protos): the agent's spans, made with the OpenTelemetry SDK, the ask's wait
and the human's answer form one trace; the SDK carries the current context."""

from __future__ import annotations

import sys
import threading
from pathlib import Path
from typing import Iterator

import pytest
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

from askgate import Ask, AsyncClient, Client, question, select
from conftest import Server, eventually

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "tests" / "otlp"))
from otlp_receiver import Receiver  # noqa: E402

SERVER_KIND = 2  # SPAN_KIND_SERVER


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    running = Receiver()
    yield running
    running.close()


def agent_tracer(receiver: Receiver) -> TracerProvider:
    """The agent's own tracing, as an instrumented agent has it."""
    provider = TracerProvider(resource=Resource.create({"service.name": "planner-agent"}))
    exporter = OTLPSpanExporter(endpoint=receiver.endpoint, insecure=True)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider


def answer_when_pending(server: Server, session: str, label: str) -> threading.Thread:
    def answer() -> None:
        with Client(server.addr) as ui:
            pending = eventually("the ask", lambda: ui.list_pending(session))
            ui.answer(session, pending[0].rpc_id, [select("go", label)])

    thread = threading.Thread(target=answer)
    thread.start()
    return thread


def deploy(session: str) -> Ask:
    return Ask(session, [question("go", "Deploy the secret build?", options=["Ship it", "Hold"])], hold=True)


def assert_one_trace(receiver: Receiver, rpc_id: str) -> None:
    tool = receiver.one("execute_tool ask_user_question")
    ask = receiver.one("askgate.ask")
    assert ask.service == "askgate"
    assert (ask.trace_id, ask.parent_span_id) == (tool.trace_id, tool.span_id), "the tool call's child"
    assert receiver.one("invoke_agent planner").trace_id == tool.trace_id
    assert ask.kind == SERVER_KIND
    assert ask.attributes["askgate.rpc_id"] == rpc_id
    assert ask.attributes["askgate.resolution"] == "ANSWERED"
    assert ask.attributes["askgate.question_count"] == 1
    assert ask.attributes["askgate.wait_ms"] >= 0
    answer = receiver.one("askgate.answer")
    assert answer.links == [(ask.trace_id, ask.span_id)], "the answer links to the human's wait"
    receiver.assert_nowhere("secret build")
    receiver.assert_nowhere("Ship it")


def test_the_agents_span_the_asks_wait_and_the_answer_form_one_trace(receiver: Receiver) -> None:
    server = Server("--otlp-endpoint", receiver.endpoint)
    provider = agent_tracer(receiver)
    tracer = provider.get_tracer("planner")
    try:
        answering = answer_when_pending(server, "s", "Ship it")
        with tracer.start_as_current_span("invoke_agent planner"):
            with tracer.start_as_current_span("execute_tool ask_user_question"):
                with Client(server.addr) as agent:
                    result = agent.ask(deploy("s"))
        answering.join(timeout=20)
        assert result.answers[0].selected == ["Ship it"]
    finally:
        provider.shutdown()
        server.stop()  # SIGTERM: it exports what it holds first
    assert_one_trace(receiver, result.rpc_id)


def test_the_async_client_carries_the_context_too(receiver: Receiver) -> None:
    import asyncio

    server = Server("--otlp-endpoint", receiver.endpoint)
    provider = agent_tracer(receiver)
    tracer = provider.get_tracer("planner")

    async def agent() -> str:
        with tracer.start_as_current_span("invoke_agent planner"):
            with tracer.start_as_current_span("execute_tool ask_user_question"):
                async with AsyncClient(server.addr) as client:
                    return (await client.ask(deploy("a"))).rpc_id

    try:
        answering = answer_when_pending(server, "a", "Ship it")
        rpc_id = asyncio.run(agent())
        answering.join(timeout=20)
    finally:
        provider.shutdown()
        server.stop()
    assert_one_trace(receiver, rpc_id)


def test_a_given_traceparent_wins_over_the_current_context() -> None:
    ask = Ask("s", [], traceparent="00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", tracestate="v=1")
    assert ask.trace_metadata() == [
        ("traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"),
        ("tracestate", "v=1"),
    ]
    # No span is current: nothing to carry.
    assert Ask("s", []).trace_metadata() == []
