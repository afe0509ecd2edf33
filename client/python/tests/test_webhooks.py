"""The Webhooks admin calls against a real askgate, sync and asyncio, with a receiver
here that verifies each delivery with the Standard Webhooks reference library."""

from __future__ import annotations

import asyncio
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Dict, Iterator, List, Tuple

import pytest
from standardwebhooks import Webhook

from askgate import Ask, AskgateError, AsyncClient, Client, Reason, question
from askgate.v1 import askgate_pb2 as pb

from conftest import Server, eventually


@pytest.fixture
def hook_server() -> Iterator[Server]:
    server = Server("--webhook-allow-private")
    yield server
    server.stop()


class Receiver:
    """Records every POST (its headers and body) and answers 204."""

    def __init__(self) -> None:
        self.received: List[Tuple[Dict[str, str], bytes]] = []
        received = self.received

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: object) -> None:  # noqa: A002
                pass

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["content-length"]))
                received.append(({k.lower(): v for k, v in self.headers.items()}, body))
                self.send_response(204)
                self.end_headers()

        self.http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.http.server_address[1]}/hook"
        threading.Thread(target=self.http.serve_forever, daemon=True).start()


def test_endpoints_deliver_signed_events_and_are_managed(hook_server: Server) -> None:
    receiver = Receiver()
    with Client(hook_server.addr) as client:
        endpoint = client.create_endpoint(receiver.url, events=["ask.requested"], labels={"team": "infra"})
        assert endpoint.secret.startswith("whsec_")
        assert [(e.id, e.secret) for e in client.list_endpoints()] == [(endpoint.id, "")]

        # Nobody follows "s": the endpoint provides, so the ask is held for it.
        failures: List[AskgateError] = []

        def ask() -> None:
            try:
                client.ask(Ask("s", [question("q", "Deploy?")], labels={"team": "infra"}))
            except AskgateError as failure:
                failures.append(failure)

        asking = threading.Thread(target=ask, daemon=True)
        asking.start()
        eventually("the delivery", lambda: receiver.received)
        headers, body = receiver.received[0]
        event = Webhook(endpoint.secret).verify(body, headers)
        assert event["type"] == "ask.requested"
        assert event["data"]["sessionId"] == "s"

        delivered = eventually(
            "the delivery listed",
            lambda: client.list_deliveries(endpoint_id=endpoint.id, status=pb.DELIVERED),
        )
        assert delivered[0].id == headers["webhook-id"]
        client.cancel("s", event["data"]["rpcId"], "done")
        asking.join(timeout=20)
        assert [f.reason for f in failures] == [Reason.ASK_CANCELLED]

        client.delete_endpoint(endpoint.id)
        for call in (lambda: client.delete_endpoint(endpoint.id), lambda: client.redeliver("msg_missing")):
            with pytest.raises(AskgateError) as failure:
                call()
            assert failure.value.reason is Reason.NOT_FOUND
    receiver.http.shutdown()


def test_the_async_client_manages_endpoints(hook_server: Server) -> None:
    async def scenario() -> None:
        async with AsyncClient(hook_server.addr) as client:
            endpoint = await client.create_endpoint("http://127.0.0.1:9/hook", provides=False)
            assert not endpoint.provides
            assert [e.id for e in await client.list_endpoints()] == [endpoint.id]
            assert await client.list_deliveries() == []
            await client.delete_endpoint(endpoint.id)
            with pytest.raises(AskgateError) as failure:
                await client.create_endpoint("ftp://example.com/x")
            assert failure.value.reason is Reason.BAD_REQUEST

    asyncio.run(scenario())
