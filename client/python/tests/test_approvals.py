"""Approvals against a real `askgate serve` (docs/approvals.md): a receipt verified
with the server's published keys for its tenant, a tampered action, another tenant,
another server's key, an expired receipt and a decision other than approved refused;
a receipt consumed once; default answers on expiry; the channels an ask allows."""

from __future__ import annotations

import json
import os
import threading
import time
import urllib.request
from pathlib import Path
from typing import Iterator

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from askgate import Action, Approvers, Ask, AskgateError, Client, Reason, custom, question, select
from askgate.receipts import ReceiptError, answers_digest, verify_receipt
from conftest import Server, eventually

DEPLOY = Action.of("deploy", {"service": "api", "env": "prod", "replicas": 3})


def key_file(directory: Path, name: str) -> str:
    pem = Ed25519PrivateKey.generate().private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    path = directory / name
    path.write_bytes(pem)
    os.chmod(path, 0o600)
    return str(path)


@pytest.fixture
def signing(tmp_path: Path) -> Iterator[Server]:
    running = Server("--receipt-key-file", key_file(tmp_path, "a.pem"), "--receipt-ttl", "1s")
    yield running
    running.stop()


def jwks(server: Server) -> dict:
    with urllib.request.urlopen(f"{server.addr}/.well-known/jwks.json", timeout=10) as response:
        return json.load(response)


def answered(server: Server, ask: Ask, label: str, channel: str | None = None):  # type: ignore[no-untyped-def]
    """Asks on a thread and answers it with `label` once it is pending."""
    outcome: dict = {}

    def call() -> None:
        with Client(server.addr) as agent:
            try:
                outcome["result"] = agent.ask(ask)
            except AskgateError as error:
                outcome["error"] = error

    thread = threading.Thread(target=call)
    thread.start()
    with Client(server.addr, channel=channel) as ui:
        pending = eventually("the ask", lambda: ui.list_pending(ask.session_id))
        ui.answer(ask.session_id, pending[0].rpc_id, [select(ask.questions[0].id, label)])
    thread.join(timeout=20)
    return outcome


def ship(**extra) -> Ask:  # type: ignore[no-untyped-def]
    return Ask(
        "s",
        [question("go", "Deploy api to prod?", options=["Approve", "Reject"])],
        hold=True,
        action=DEPLOY,
        **extra,
    )


def test_a_receipt_binds_the_answer_to_the_action(signing: Server, tmp_path: Path) -> None:
    result = answered(signing, ship(), "Approve")["result"]
    assert result.resolution == "ANSWERED"
    assert result.approvers == [result.resolved_by]
    keys = jwks(signing)
    respelt = Action("deploy", '{ "replicas": 3, "env": "prod", "service": "api" }')
    claims = verify_receipt(result.receipt, keys, respelt, tenant="default")
    assert claims["rpc_id"] == result.rpc_id == claims["jti"]
    assert claims["resolution"] == "ANSWERED"
    assert claims["decision"] == "approved"
    assert claims["asked_by"] == "anonymous"
    with pytest.raises(ReceiptError) as other_tenant:
        verify_receipt(result.receipt, keys, DEPLOY, tenant="acme")
    assert other_tenant.value.kind == "wrong_tenant"
    from askgate.v1 import askgate_pb2 as pb

    assert claims["answers_digest"] == answers_digest([pb.QuestionAnswer(id="go", selected=["Approve"])])

    tampered = Action.of("deploy", {"service": "api", "env": "prod", "replicas": 30})
    with pytest.raises(ReceiptError) as wrong:
        verify_receipt(result.receipt, keys, tampered, tenant="default")
    assert wrong.value.kind == "wrong_action"

    stranger = Server("--receipt-key-file", key_file(tmp_path, "b.pem"))
    try:
        with pytest.raises(ReceiptError) as unknown:
            verify_receipt(result.receipt, jwks(stranger), DEPLOY, tenant="default")
        assert unknown.value.kind == "unknown_key"
        # The stranger's key under the signer's kid: the signature fails.
        forged = jwks(stranger)
        forged["keys"][0]["kid"] = keys["keys"][0]["kid"]
        with pytest.raises(ReceiptError) as bad:
            verify_receipt(result.receipt, forged, DEPLOY, tenant="default")
        assert bad.value.kind == "bad_signature"
    finally:
        stranger.stop()

    # Valid for a second (--receipt-ttl 1s; timestamps are whole seconds).
    time.sleep(2.1)
    with pytest.raises(ReceiptError) as expired:
        verify_receipt(result.receipt, keys, DEPLOY, tenant="default", leeway=0)
    assert expired.value.kind == "expired"


def test_a_cancelled_asks_receipt_is_in_the_error(signing: Server) -> None:
    outcome: dict = {}

    def call() -> None:
        with Client(signing.addr) as agent:
            try:
                agent.ask(ship())
            except AskgateError as error:
                outcome["error"] = error

    thread = threading.Thread(target=call)
    thread.start()
    with Client(signing.addr) as ui:
        pending = eventually("the ask", lambda: ui.list_pending("s"))
        ui.cancel("s", pending[0].rpc_id, "not today")
    thread.join(timeout=20)
    error = outcome["error"]
    assert error.reason is Reason.ASK_CANCELLED
    with pytest.raises(ReceiptError) as refused:
        verify_receipt(error.metadata["receipt"], jwks(signing), DEPLOY, tenant="default")
    assert refused.value.kind == "not_approved"
    assert refused.value.claims is not None
    assert refused.value.claims["decision"] == "cancelled"
    claims = verify_receipt(error.metadata["receipt"], jwks(signing), DEPLOY, tenant="default", any_decision=True)
    assert claims["resolution"] == "CANCELLED"


def test_default_answers_apply_when_nobody_answers(signing: Server) -> None:
    with Client(signing.addr) as agent:
        result = agent.ask(ship(default_answers=[select("go", "Reject")], ttl=0.3))
        assert result.resolution == "DEFAULTED"
        assert result.resolved_by == "askgate:default"
        assert [a.selected for a in result.answers] == [["Reject"]]
        claims = verify_receipt(result.receipt, jwks(signing), DEPLOY, tenant="default", any_decision=True)
        assert (claims["resolution"], claims["decision"]) == ("DEFAULTED", "defaulted")
        with pytest.raises(AskgateError) as expired:
            agent.ask(ship(ttl=0.3))
        assert expired.value.reason is Reason.ASK_EXPIRED


def test_only_the_approving_answer_approves_and_a_receipt_runs_once(signing: Server) -> None:
    keys = jwks(signing)
    rejected = answered(signing, ship(), "Reject")["result"]
    with pytest.raises(ReceiptError) as refused:
        verify_receipt(rejected.receipt, keys, DEPLOY, tenant="default")
    assert refused.value.kind == "not_approved"
    assert refused.value.claims is not None and refused.value.claims["decision"] == "rejected"

    approved = answered(signing, ship(), "Approve")["result"]
    with Client(signing.addr) as executor:
        claims = executor.check_receipt(approved.receipt, keys, DEPLOY, tenant="default")
        assert claims["decision"] == "approved"
        with pytest.raises(AskgateError) as replayed:
            executor.check_receipt(approved.receipt, keys, DEPLOY, tenant="default")
        assert replayed.value.reason is Reason.RECEIPT_CONSUMED
        assert "consumed_at" in replayed.value.metadata
        with pytest.raises(ReceiptError):
            executor.check_receipt(rejected.receipt, keys, DEPLOY, tenant="default")


def test_the_async_client_checks_and_consumes_once(signing: Server) -> None:
    import asyncio

    from askgate import AsyncClient

    approved = answered(signing, ship(), "Approve")["result"]
    keys = jwks(signing)

    async def scenario() -> None:
        async with AsyncClient(signing.addr) as executor:
            claims = await executor.check_receipt(approved.receipt, keys, DEPLOY, tenant="default")
            assert claims["decision"] == "approved"
            with pytest.raises(AskgateError) as replayed:
                await executor.consume_receipt(approved.receipt)
            assert replayed.value.reason is Reason.RECEIPT_CONSUMED

    asyncio.run(scenario())


def test_numbers_a_double_would_change_have_no_digest(server: Server) -> None:
    from askgate.receipts import action_digest

    for arguments in ('{"user_id": 1234567890123456789}', '{"amount": 0.1000000000000000000001}'):
        with pytest.raises(ReceiptError) as inexact:
            action_digest(Action("pay", arguments))
        assert inexact.value.kind == "inexact"
        with Client(server.addr) as agent, pytest.raises(AskgateError) as refused:
            agent.ask(Ask("s", [question("go", "Go?", options=["yes"])], action=Action("pay", arguments)))
        assert refused.value.reason is Reason.BAD_REQUEST
        assert refused.value.violations[0][0] == "action.arguments_json"
    assert action_digest(Action("pay", '{"user_id": "1234567890123456789", "amount": 0.1}'))


def test_only_the_allowed_channels_resolve_an_ask(server: Server) -> None:
    ask = Ask("s", [question("go", "Go?", options=["yes"])], hold=True, allowed_channels=["tui"])
    outcome: dict = {}

    def call() -> None:
        with Client(server.addr) as agent:
            outcome["result"] = agent.ask(ask)

    thread = threading.Thread(target=call)
    thread.start()
    with Client(server.addr, channel="ops") as ops, Client(server.addr, channel="tui") as tui:
        pending = eventually("the ask", lambda: ops.list_pending("s"))
        with pytest.raises(AskgateError) as refused:
            ops.answer("s", pending[0].rpc_id, [select("go", "yes")])
        assert refused.value.reason is Reason.CHANNEL_NOT_ALLOWED
        tui.answer("s", pending[0].rpc_id, [select("go", "yes")])
    thread.join(timeout=20)
    assert outcome["result"].answers[0].selected == ["yes"]


def test_only_the_approvers_answer_an_ask(server: Server) -> None:
    theirs = Ask("s", [question("go", "Go?", options=["yes"])], hold=True, approvers=Approvers(subjects=["ana"]))
    mine = Ask("s", [question("go", "Go?", options=["yes"])], hold=True, approvers=Approvers(subjects=["Anonymous"]))
    outcome: dict = {}

    def call(ask: Ask, key: str) -> None:
        with Client(server.addr) as agent:
            try:
                outcome[key] = agent.ask(ask)
            except AskgateError as error:
                outcome[key] = error

    with Client(server.addr) as ui:
        thread = threading.Thread(target=call, args=(theirs, "theirs"))
        thread.start()
        pending = eventually("the ask", lambda: ui.list_pending("s"))
        assert list(pending[0].approvers.subjects) == ["ana"]
        with pytest.raises(AskgateError) as refused:
            ui.answer("s", pending[0].rpc_id, [select("go", "yes")])
        assert refused.value.reason is Reason.NOT_AN_APPROVER
        assert refused.value.metadata["approvers"] == "ana"
        ui.cancel("s", pending[0].rpc_id, "not mine")
        thread.join(timeout=20)
        assert outcome["theirs"].reason is Reason.ASK_CANCELLED

        thread = threading.Thread(target=call, args=(mine, "mine"))
        thread.start()
        pending = eventually("the ask", lambda: ui.list_pending("s"))
        ui.answer("s", pending[0].rpc_id, [select("go", "yes")])
        thread.join(timeout=20)
        assert outcome["mine"].resolved_by == "anonymous"


def test_a_persons_groups_make_them_an_approver(server: Server) -> None:
    from askgate.v1 import askgate_pb2 as pb

    ask = Ask("people", [question("go", "Go?", options=["yes"])], hold=True, approvers=Approvers(groups=["ops"]))
    outcome: dict = {}

    def call() -> None:
        with Client(server.addr) as agent:
            outcome["result"] = agent.ask(ask)

    with Client(server.addr) as admin:
        me = pb.Person(id="me", groups=["ops"], identities=[pb.Identity(kind="subject", value="anonymous")])
        assert admin.put_person(me).identities[0].value == "anonymous"
        thread = threading.Thread(target=call)
        thread.start()
        pending = eventually("the ask", lambda: admin.list_pending("people"))
        admin.answer("people", pending[0].rpc_id, [select("go", "yes")])
        thread.join(timeout=20)
        assert outcome["result"].resolved_by == "anonymous"
        assert [p.id for p in admin.list_people()] == ["me"]
        admin.delete_person("me")
        with pytest.raises(AskgateError) as gone:
            admin.delete_person("me")
        assert gone.value.reason is Reason.NOT_FOUND


def test_a_secret_answer_reaches_the_asker_only(server: Server) -> None:
    secret = "zq7731-python-secret"
    ask = Ask(
        "s",
        [
            question("code", "The one-time code?", secret=True),
            question("go", "Rotate the key?", options=["yes", "no"]),
        ],
        hold=True,
    )
    outcome: dict = {}

    def call() -> None:
        with Client(server.addr) as agent:
            outcome["result"] = agent.ask(ask)

    with Client(server.addr) as ui:
        events = ui.follow("s")
        assert next(events).synced
        thread = threading.Thread(target=call)
        thread.start()
        requested = next(events).requested
        assert requested is not None and requested.questions[0].secret
        ui.answer("s", requested.rpc_id, [custom("code", secret), select("go", "yes")])
        resolved = next(e.resolved for e in events if e.resolved is not None)
        thread.join(timeout=20)
    # The follower gets the other answers only; the asker gets them all, in order.
    assert [a.id for a in resolved.answers] == ["go"]
    assert secret not in str(resolved) and not resolved.sealed_answers
    result = outcome["result"]
    assert [a.id for a in result.answers] == ["code", "go"]
    assert result.answers[0].custom == secret


POLICIES = """
@id("staging") @decision("allow")
permit(principal, action == Action::"deploy", resource)
when { context.arguments has env && context.arguments.env == "staging" };

@id("prod-freeze") @reason("prod is frozen until Monday")
forbid(principal, action == Action::"deploy", resource)
when { context.arguments has env && context.arguments.env == "prod" };
"""


def test_the_tenants_policy_allows_and_denies_before_anyone_is_asked(signing: Server) -> None:
    with Client(signing.addr) as client:
        stored = client.put_policies(POLICIES)
        assert (stored.version, list(stored.policy_ids)) == (1, ["staging", "prod-freeze"])
        staging = Action.of("deploy", {"service": "api", "env": "staging"})
        verdict = client.test_policies(Ask("s", [question("go", "Deploy?", options=["Approve", "Reject"])], action=staging))
        assert (verdict.decision, list(verdict.policy_ids)) == ("allow", ["staging"])
        # Nobody follows the session and the ask is not held: only the policy answers.
        ask = Ask("s", [question("go", "Deploy api to staging?", options=["Approve", "Reject"])], action=staging)
        result = client.ask(ask)
        assert result.resolution == "ALLOWED_BY_POLICY"
        assert result.approvers == ["policy:staging"]
        claims = verify_receipt(result.receipt, jwks(signing), staging, tenant="default")
        assert claims["decision"] == "approved"
        with pytest.raises(AskgateError) as denied:
            client.ask(ship())
        assert denied.value.reason is Reason.DENIED_BY_POLICY
        assert denied.value.metadata["policy"] == "prod-freeze"
        assert denied.value.metadata["reason"] == "prod is frozen until Monday"
        with pytest.raises(AskgateError) as refused:
            client.put_policies("permit(principal, action, resource);")
        assert refused.value.reason is Reason.BAD_REQUEST
        assert client.get_policies().version == 1
