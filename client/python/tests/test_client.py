"""The sync client beyond the shared scenarios (test_scenarios.py): its reasons, its
retry budget, its secrecy."""

from __future__ import annotations

import socket
import time

import grpc
import pytest

from askgate import Ask, AskgateError, Client, Reason, question
from askgate.v1 import askgate_pb2 as pb
from conftest import WAIT


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


def test_the_token_never_shows() -> None:
    client = Client("http://127.0.0.1:1", token="agk_secret")
    assert "agk_secret" not in repr(client)
    client.close()
