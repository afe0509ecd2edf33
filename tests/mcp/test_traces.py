"""An MCP client's trace context (`params._meta.traceparent`, as OpenTelemetry's MCP
conventions carry it) makes the ask's span the tool call's child: over stdio
(`askgate mcp` carries it on to the server) and over streamable HTTP (/mcp). The
server exports to a real OTLP receiver (tests/otlp, the official protos)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from mcp import Client

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "otlp"))
from conftest import Askgate  # noqa: E402
from otlp_receiver import Receiver  # noqa: E402
from test_http import mcp_client  # noqa: E402
from test_stdio import DATABASE, mcp_server, text  # noqa: E402

pytestmark = pytest.mark.anyio

# The agents' `execute_tool` spans: one over stdio, one over HTTP.
STDIO = ("4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7")
HTTP = ("0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331")


def meta(trace: tuple[str, str]) -> dict[str, str]:
    return {"traceparent": f"00-{trace[0]}-{trace[1]}-01", "tracestate": "agent=1"}


async def test_the_tool_calls_span_is_the_asks_parent_over_stdio_and_http(askgate: Askgate) -> None:
    receiver = Receiver()
    try:
        url = askgate.serve("--otlp-endpoint", receiver.endpoint)
        # Someone follows the session before the calls (the bot may subscribe a moment
        # later: it then gets the pending ask in its replay).
        askgate.watch(url, "team")
        askgate.spawn("bot", "--addr", url, "--session", "team", "--policy", "first")
        async with Client(mcp_server(url, "team")) as client:
            over_stdio = await client.call_tool("ask_user_question", DATABASE, meta=meta(STDIO))
        async with mcp_client(url, "team") as client:
            over_http = await client.call_tool("ask_user_question", DATABASE, meta=meta(HTTP))
        for result in (over_stdio, over_http):
            assert text(result) == '{"answers":[{"id":"db","selected":["Postgres"]}]}'
        askgate.stop_serving(url)  # it exports what it holds first
        asks = {span.trace_id: span for span in receiver.named("askgate.ask")}
        assert sorted(asks) == sorted([STDIO[0], HTTP[0]]), receiver.spans
        for trace, span in (STDIO, HTTP):
            ask = asks[trace]
            assert ask.parent_span_id == span, "the tool call's child"
            assert ask.attributes["askgate.resolution"] == "ANSWERED"
            assert ask.attributes["askgate.session_id"] == "team"
            links = [a.links for a in receiver.named("askgate.answer")]
            assert [(trace, ask.span_id)] in links, "an answer links to the wait"
        receiver.assert_nowhere("Which database")
        receiver.assert_nowhere("Postgres")
    finally:
        receiver.close()
