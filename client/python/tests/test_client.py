"""The sync client against a real askgate: the scenarios every askgate client meets."""

from __future__ import annotations

import threading
import time
from typing import List

import grpc
import pytest

from askgate import (
    Ask,
    AskgateError,
    Client,
    Event,
    Reason,
    custom,
    question,
    select,
    skip,
)
from askgate.v1 import askgate_pb2 as pb
from conftest import WAIT, Proxy, Server, eventually


def db(session: str = "s", **kwargs) -> Ask:  # type: ignore[no-untyped-def]
    return Ask(
        session,
        [question("db", "Which database?", header="Database", options=["Postgres", "SQLite"])],
        **kwargs,
    )


class Background:
    """Runs `client.ask(ask)` on a thread; `result()` returns or raises what it did."""

    def __init__(self, client: Client, ask: Ask) -> None:
        self.outcome: List[object] = []
        self.thread = threading.Thread(target=self._run, args=(client, ask), daemon=True)
        self.thread.start()

    def _run(self, client: Client, ask: Ask) -> None:
        try:
            self.outcome.append(client.ask(ask))
        except AskgateError as error:
            self.outcome.append(error)

    def result(self):  # type: ignore[no-untyped-def]
        self.thread.join(WAIT)
        assert self.outcome, "the ask did not finish"
        if isinstance(self.outcome[0], AskgateError):
            raise self.outcome[0]
        return self.outcome[0]


def pending(client: Client, session: str = "s") -> pb.Requested:
    return eventually("a pending ask", lambda: (client.list_pending(session) or [None])[0])


def test_the_reasons_are_the_protos() -> None:
    assert {r.value for r in Reason} == set(pb.ErrorReason.keys())


def test_answered_and_skipped(server: Server) -> None:
    with Client(server.addr) as client:
        call = Background(client, db(hold=True))
        ask = pending(client)
        client.answer("s", ask.rpc_id, [select("db", "Postgres")])
        result = call.result()
        assert [a.selected for a in result.answers] == [["Postgres"]]
        assert result.resolved_by == "anonymous" and result.rpc_id == ask.rpc_id

        two = Ask("s", [question("a", "A?", options=["x"]), question("b", "Your name?")], hold=True)
        call = Background(client, two)
        ask = pending(client)
        client.answer("s", ask.rpc_id, [skip("a"), custom("b", "  ada ")])
        answers = call.result().answers
        assert (answers[0].selected, answers[0].custom) == ([], None)
        assert answers[1].custom == "ada"


def test_cancelled_with_a_reason_and_not_pending_after(server: Server) -> None:
    with Client(server.addr) as client:
        # A UI follows the session, as one that answers does: the server remembers
        # how its asks ended.
        ui = client.follow("s")
        assert next(ui).synced
        call = Background(client, db())
        ask = pending(client)
        client.cancel("s", ask.rpc_id, "use the staging DB")
        with pytest.raises(AskgateError) as cancelled:
            call.result()
        assert cancelled.value.reason is Reason.ASK_CANCELLED
        assert cancelled.value.code == grpc.StatusCode.ABORTED
        assert cancelled.value.metadata["reason"] == "use the staging DB"
        with pytest.raises(AskgateError) as late:
            client.answer("s", ask.rpc_id, [select("db", "SQLite")])
        assert late.value.reason is Reason.NOT_PENDING
        assert late.value.metadata["resolution"] == "CANCELLED"
        assert late.value.metadata["resolved_by"] == "anonymous"


def test_expired_and_aborted(server: Server) -> None:
    with Client(server.addr) as client:
        with pytest.raises(AskgateError) as expired:
            client.ask(db(hold=True, timeout=0.3))
        assert expired.value.reason is Reason.ASK_EXPIRED
        call = Background(client, db(hold=True, request_id="req-1"))
        pending(client)
        client.abort("s", "req-1")
        with pytest.raises(AskgateError) as aborted:
            call.result()
        assert aborted.value.reason is Reason.ASK_ABORTED


def test_refusals_carry_their_reason_and_violations(server: Server) -> None:
    with Client(server.addr) as client:
        for ask, reason in [
            (Ask("s", []), Reason.EMPTY_QUESTIONS),
            (Ask("bad session!", [question("", "?")]), Reason.BAD_REQUEST),
            (db("nobody"), Reason.NO_PROVIDER),
            (db(hold=True, agent=("ghost", "1")), Reason.CALLER_NOT_LIVE),
        ]:
            with pytest.raises(AskgateError) as refused:
                client.ask(ask)
            assert refused.value.reason is reason, refused.value
        with pytest.raises(AskgateError) as bad:
            client.ask(Ask("bad session!", [question("", "?")]))
        assert [f for f, _ in bad.value.violations] == ["session_id", "questions[0].id"]
        plan = question("p", "Ship?", options=["Approve", "Revise"], plan_review="Ship it", detail="1.")
        with pytest.raises(AskgateError) as intent:
            client.ask(Ask("s", [plan], hold=True))
        assert intent.value.reason is Reason.BAD_INTENT


def test_a_cut_connection_reattaches_and_gets_the_answer_given_meanwhile(server: Server) -> None:
    proxy = Proxy(server.addr)
    try:
        with Client(proxy.addr) as agent, Client(server.addr) as human:
            call = Background(agent, db(hold=True))
            ask = pending(human)
            proxy.cut()
            human.answer("s", ask.rpc_id, [select("db", "SQLite")])
            result = call.result()
            assert result.rpc_id == ask.rpc_id
            assert result.answers[0].selected == ["SQLite"]
    finally:
        proxy.close()


def test_follow_resumes_after_a_cut_and_resets_after_an_unknown_cursor(server: Server) -> None:
    proxy = Proxy(server.addr)
    try:
        with Client(proxy.addr) as ui, Client(server.addr) as agent:
            events = ui.follow("s")
            assert next(events).synced
            first = Background(agent, db(hold=True))
            requested = next(events)
            assert requested.requested is not None
            proxy.cut()
            second = Background(agent, db(hold=True))
            # Resumed from the cursor: the missed `requested`, then `synced{resumed}`.
            seen: List[Event] = []
            while not any(e.synced for e in seen):
                seen.append(next(events))
            assert seen[-1].resumed, seen
            ids = [e.requested.rpc_id for e in seen if e.requested]
            assert len(ids) == 1 and requested.requested.rpc_id not in ids, seen
            for ask in agent.list_pending("s"):
                agent.cancel("s", ask.rpc_id)
            for call in (first, second):
                with pytest.raises(AskgateError):
                    call.result()
        with Client(server.addr) as ui:
            stale = ui.follow("s", after="0-1")
            assert next(stale).reset
    finally:
        proxy.close()


def test_an_attached_agent_asks_and_detaching_aborts(server: Server) -> None:
    with Client(server.addr) as client:
        with client.attach("planner") as lease:
            call = Background(client, db(hold=True, agent=("planner", lease.incarnation)))
            pending(client)
        with pytest.raises(AskgateError) as aborted:
            call.result()
        assert aborted.value.reason is Reason.ASK_ABORTED


def test_retries_stop_at_the_retry_budget() -> None:
    closed = __import__("socket").socket()
    closed.bind(("127.0.0.1", 0))
    addr = f"http://127.0.0.1:{closed.getsockname()[1]}"
    closed.close()
    with Client(addr) as client:
        started = time.monotonic()
        with pytest.raises(AskgateError) as unreachable:
            client.ask(db(retry_for=0.5))
        assert unreachable.value.code == grpc.StatusCode.UNAVAILABLE
        assert time.monotonic() - started < WAIT


def test_the_token_never_shows() -> None:
    client = Client("http://127.0.0.1:1", token="agk_secret")
    assert "agk_secret" not in repr(client)
    client.close()
