"""The sync client beyond the shared scenarios (test_scenarios.py): its reasons, its
retry budget, its secrecy."""

from __future__ import annotations

import asyncio
import socket
import time

import grpc
import pytest

from askgate import Ask, AskgateError, AsyncClient, Client, Reason, question
from askgate.v1 import askgate_pb2 as pb
from conftest import WAIT, Server


def test_the_reasons_are_the_protos() -> None:
    assert {r.value for r in Reason} == set(pb.ErrorReason.keys())


def test_retries_stop_at_the_retry_budget() -> None:
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    addr = f"http://127.0.0.1:{closed.getsockname()[1]}"
    closed.close()
    with Client(addr) as client:
        started = time.monotonic()
        with pytest.raises(AskgateError) as unreachable:
            client.ask(Ask("s", [question("db", "Which?", options=["a"])], retry_for=0.5))
        assert unreachable.value.code == grpc.StatusCode.UNAVAILABLE
        assert time.monotonic() - started < WAIT
        # A person is told where it looked, and what to check.
        hint = f"cannot reach askgate at {addr}: is `askgate serve` running there?"
        assert unreachable.value.hint == hint
        assert hint in str(unreachable.value)


def test_no_provider_keeps_its_text_and_hints_at_the_next_step(server: Server) -> None:
    with Client(server.addr) as client:
        with pytest.raises(AskgateError) as refused:
            client.ask(Ask("team-a/review", [question("db", "Which?", options=["a"])]))
    error = refused.value
    assert error.reason is Reason.NO_PROVIDER
    assert error.message == "no user-questions provider is registered", "the seed's text"
    assert error.hint == (
        "nobody follows session team-a/review: start `askgate answer --session team-a/review` "
        f"(or open the console at {server.addr}/console/#/sessions/team-a/review) first, or ask "
        "with hold=True to wait until someone does"
    )
    assert str(error).endswith(f"(hint: {error.hint})")


def test_the_token_never_shows() -> None:
    client = Client("http://127.0.0.1:1", token="agk_secret")
    assert "agk_secret" not in repr(client)
    client.close()


def test_an_attach_stream_that_ends_before_its_lease_is_an_askgate_error() -> None:
    """No askgate server ends Attach without a lease; a gRPC server that does (a proxy
    cutting in, a broken peer) gets the same error from the sync client as from the
    asyncio one."""
    from concurrent.futures import ThreadPoolExecutor

    from askgate.v1 import askgate_pb2_grpc as rpc

    class EndsAtOnce(rpc.AgentsServicer):
        def Attach(self, request, context):  # type: ignore[no-untyped-def]
            return iter(())

    server = grpc.server(ThreadPoolExecutor(max_workers=2))
    rpc.add_AgentsServicer_to_server(EndsAtOnce(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        with Client(f"http://127.0.0.1:{port}") as client:
            with pytest.raises(AskgateError) as ended:
                with client.attach("planner"):
                    pass
            assert ended.value.reason is Reason.INTERNAL
            assert "Attach ended before its lease" in str(ended.value)

            async def the_same_with_asyncio() -> AskgateError:
                async with AsyncClient(f"http://127.0.0.1:{port}") as aio:
                    with pytest.raises(AskgateError) as raised:
                        async with aio.attach("planner"):
                            pass
                    return raised.value

            assert asyncio.run(the_same_with_asyncio()).reason is Reason.INTERNAL
    finally:
        server.stop(0)
