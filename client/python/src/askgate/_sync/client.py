# Generated from askgate/_async/client.py by scripts/generate_sync.py: do not edit.
"""The client: written once, for asyncio; `askgate._sync.client` is generated from it
(`scripts/generate.sh`, with unasync), so the two cannot drift. What differs between
them is in each package's `runtime.py`."""

from __future__ import annotations

import time
from contextlib import contextmanager
from typing import Any, Iterator, Dict, List, Mapping, Optional, Sequence, Tuple

import grpc

from .._connection import Retries, Target, backoff
from .._errors import AskgateError, Reason
from .._model import Action, Answer, Ask, AskResult, Event, endpoint_request, slack_request
from ..v1 import askgate_pb2 as pb
from ..v1 import askgate_pb2_grpc as rpc
from .runtime import CLIENT_DOC, AgentLease, Channel, RpcError, first, sleep


class Client:
    __doc__ = CLIENT_DOC

    def __init__(
        self,
        addr: Optional[str] = None,
        *,
        token: Optional[str] = None,
        ca_pem: Optional[bytes] = None,
        client_cert: Optional[Tuple[bytes, bytes]] = None,
        channel: Optional[str] = None,
    ) -> None:
        self._target = Target.resolve(addr, token, ca_pem, client_cert, channel)
        self._channel = Channel(self._target)

    @property
    def _questions(self) -> rpc.UserQuestionsStub:
        return self._channel.stubs().questions

    @property
    def _agents(self) -> rpc.AgentsStub:
        return self._channel.stubs().agents

    @property
    def _webhooks(self) -> rpc.WebhooksStub:
        return self._channel.stubs().webhooks

    @property
    def _slack(self) -> rpc.SlackStub:
        return self._channel.stubs().slack

    @property
    def _receipts(self) -> rpc.ReceiptsStub:
        return self._channel.stubs().receipts

    @property
    def _people(self) -> rpc.PeopleStub:
        return self._channel.stubs().people

    @property
    def _policies(self) -> rpc.PoliciesStub:
        return self._channel.stubs().policies

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._channel.close()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._target!r})"

    def ask(self, ask: Ask) -> AskResult:
        """Asks a batch and waits until a human resolves it. Raises `AskgateError`
        (`ASK_CANCELLED` with the human's `metadata["reason"]`, `ASK_EXPIRED`, …).

        A call that fails because the node drains or the server is unreachable is tried
        again with backoff and the same request_id, within the ask's timeout and its
        retry budget: the retry joins the pending ask, or gets the answer given
        meanwhile. A call given up on (its task cancelled) leaves the ask answerable for
        its reattach grace; `abort` resolves it at once."""
        retries = Retries(ask.wait(), ask.retry, ask.retry_for)
        request = ask.request()
        # The caller's trace context as the call starts: every attempt carries it.
        metadata = self._target.metadata() + ask.trace_metadata()
        while True:
            attempt = time.monotonic()
            try:
                response = self._questions.Ask(request, timeout=retries.timeout(), metadata=metadata)
                return AskResult(
                    rpc_id=response.rpc_id,
                    answers=[Answer.of(a) for a in response.answers],
                    resolved_by=response.resolved_by,
                    resolution=pb.Resolution.Name(response.resolution or pb.ANSWERED),
                    approvers=list(response.approvers),
                    receipt=response.receipt,
                )
            except RpcError as failure:
                error = AskgateError.from_rpc_error(failure, self._target.addr, ask.session_id)
            sleep(retries.pause(attempt, error))

    def abort(self, session_id: str, request_id: str) -> None:
        """Gives up on an ask this side made with `request_id`: it resolves ABORTED at
        once, whatever its reattach grace."""
        self._call(self._questions.Abort, pb.AbortRequest(session_id=session_id, request_id=request_id))

    def answer(self, session_id: str, rpc_id: str, answers: Sequence[pb.QuestionAnswer]) -> None:
        """Answers a pending ask with a complete batch (see `select`, `custom`, `skip`).
        A lost race raises `NOT_PENDING`."""
        request = pb.AnswerRequest(session_id=session_id, rpc_id=rpc_id, answers=list(answers))
        self._call(self._questions.Answer, request)

    def cancel(self, session_id: str, rpc_id: str, reason: str = "") -> None:
        """Closes a pending ask without an answer; `reason` reaches the agent."""
        request = pb.CancelRequest(session_id=session_id, rpc_id=rpc_id, reason=reason)
        self._call(self._questions.Cancel, request)

    def list_pending(self, session_id: str) -> List[pb.Requested]:
        """The pending asks of a session, oldest first."""
        response = self._call(
            self._questions.ListPending, pb.ListPendingRequest(session_id=session_id)
        )
        return list(response.pending)

    def create_endpoint(
        self,
        url: str,
        *,
        events: Sequence[str] = (),
        description: str = "",
        labels: Optional[Mapping[str, str]] = None,
        provides: Optional[bool] = None,
    ) -> pb.Endpoint:
        """Registers a webhook endpoint of the caller's tenant (admin credential). The
        returned `askgate.v1.Endpoint` holds its signing secret (`whsec_...`), shown this
        once. `events`: `ask.requested`, `ask.resolved`, `ask.reminder`,
        `ask.escalated` (none: all); `labels`: only asks carrying all of them;
        `provides`: whether it counts as following the sessions (default: when it gets
        `ask.requested`)."""
        request = endpoint_request(url, events, description, labels, provides)
        return self._call(self._webhooks.CreateEndpoint, request)

    def list_endpoints(self) -> List[pb.Endpoint]:
        """The tenant's webhook endpoints, oldest first, without their secrets."""
        response = self._call(self._webhooks.ListEndpoints, pb.ListEndpointsRequest())
        return list(response.endpoints)

    def delete_endpoint(self, endpoint_id: str) -> None:
        """Removes a webhook endpoint (`NOT_FOUND` when the tenant has none by that id)."""
        self._call(self._webhooks.DeleteEndpoint, pb.DeleteEndpointRequest(id=endpoint_id))

    def list_deliveries(
        self, *, endpoint_id: str = "", status: "pb.DeliveryStatus.ValueType" = pb.DELIVERY_STATUS_UNSPECIFIED, limit: int = 0
    ) -> List[pb.Delivery]:
        """Webhook deliveries, newest first, of one endpoint and status (`pb.PENDING`,
        `pb.DELIVERED`, `pb.FAILED`) if given."""
        request = pb.ListDeliveriesRequest(endpoint_id=endpoint_id, status=status, limit=limit)
        response = self._call(self._webhooks.ListDeliveries, request)
        return list(response.deliveries)

    def redeliver(self, delivery_id: str) -> pb.Delivery:
        """Sends a webhook delivery again, with the same `webhook-id`."""
        return self._call(self._webhooks.Redeliver, pb.RedeliverRequest(id=delivery_id))

    def put_person(self, person: pb.Person) -> pb.Person:
        """Adds a person of the caller's tenant (admin credential), or replaces the one
        with that id: their identities (`pb.Identity(kind="slack", value="T1/U2")`, kinds
        subject, slack, telegram, email) count as them on every channel, their groups
        as an ask's approvers name them. `BAD_REQUEST` when an identity is another
        person's."""
        return self._call(self._people.PutPerson, person)

    def list_people(self) -> List[pb.Person]:
        """The tenant's people, by id."""
        response = self._call(self._people.ListPeople, pb.ListPeopleRequest())
        return list(response.people)

    def delete_person(self, person_id: str) -> None:
        """Removes a person (`NOT_FOUND` when the tenant has none by that id)."""
        self._call(self._people.DeletePerson, pb.DeletePersonRequest(id=person_id))

    def start_link(self, email: str = "") -> pb.LinkCode:
        """A one-time code that links a channel identity to the caller's own person:
        sent as `/link CODE` to one of the tenant's Telegram bots in a private chat, or as
        the `/link CODE` slash command to one of its Slack apps, it adds that account.
        Good once, for 10 minutes. With `email`, the code is mailed
        to that address inside a link instead (the returned code is empty), which adds
        the address once confirmed on its page; the server needs its email settings."""
        return self._call(self._people.StartLink, pb.StartLinkRequest(email=email))

    def put_policies(self, text: str, *, schema: str = "", mode: str = "enforce") -> pb.PolicySet:
        """Replaces the tenant's policy set (admin credential; docs/policy.md): Cedar
        policies, validated against `schema` (the tenant's Cedar schema) when there is
        one, in `mode` `"enforce"` or `"shadow"` (decide and record, but always ask).
        `BAD_REQUEST` with Cedar's message when they do not parse or fit; the stored set
        then stays as it was."""
        request = pb.PutPoliciesRequest(text=text, schema=schema, mode=mode)
        return self._call(self._policies.PutPolicies, request)

    def get_policies(self) -> pb.PolicySet:
        """The tenant's policy set (`version` 0 when it has none)."""
        return self._call(self._policies.GetPolicies, pb.GetPoliciesRequest())

    def test_policies(
        self,
        ask: Ask,
        *,
        subject: str = "",
        groups: Sequence[str] = (),
        text: str = "",
        schema: str = "",
    ) -> pb.TestPoliciesResponse:
        """What the tenant's policies (or the candidate `text` and `schema`) decide about
        `ask`, asked by the caller (or `subject` with `groups`), without asking anyone or
        recording anything: `decision` is allow, deny, ask, no_match or not_judged."""
        request = pb.TestPoliciesRequest(
            ask=ask.request(), subject=subject, groups=list(groups), text=text, schema=schema
        )
        return self._call(self._policies.TestPolicies, request)

    def who_am_i(self) -> pb.WhoAmIResponse:
        """Who the credential names (`tenant`, `subject`, `roles`) and which sessions it
        may see (`every_session`, or the `sessions` patterns); any role may ask."""
        return self._call(self._questions.WhoAmI, pb.WhoAmIRequest())

    def consume_receipt(self, receipt: str) -> pb.ConsumeReceiptResponse:
        """Uses up a receipt (agent or admin credential of its tenant): the first call
        returns its `decision`, every later one raises `AskgateError` with
        `Reason.RECEIPT_CONSUMED`. An executor that consumes before it runs the action
        runs it once, however often the receipt is replayed. It checks neither the
        action nor the decision: `askgate.receipts.verify_receipt` does, and
        `check_receipt` does both."""
        request = pb.ConsumeReceiptRequest(receipt=receipt.strip())
        return self._call(self._receipts.ConsumeReceipt, request)

    def check_receipt(
        self,
        receipt: str,
        jwks: Mapping[str, Any],
        action: Action,
        *,
        tenant: str,
    ) -> Dict[str, Any]:
        """The executor's whole check before it runs `action` for `tenant`: the receipt
        verified (signed by a key of `jwks`, not expired, of this tenant, bound to this
        action, deciding `approved`: `askgate.receipts.verify_receipt`, which raises
        `ReceiptError` otherwise), then consumed on the server (`AskgateError` with
        `Reason.RECEIPT_CONSUMED` when it was used before). Returns the claims. Needs
        the `receipts` extra."""
        from ..receipts import verify_receipt

        claims = verify_receipt(receipt, jwks, action, tenant=tenant)
        self.consume_receipt(receipt)
        return claims

    def connect_slack(
        self,
        bot_token: str,
        signing_secret: str,
        channel: str,
        *,
        session_prefix: str = "",
        labels: Optional[Mapping[str, str]] = None,
        description: str = "",
        provides: Optional[bool] = None,
    ) -> pb.SlackApp:
        """Connects a Slack app of the caller's tenant (admin credential): its questions
        (of `session_prefix` and `labels`) are posted to `channel` and answered there.
        The server checks `bot_token` with Slack first; the secrets are never returned."""
        request = slack_request(bot_token, signing_secret, channel, session_prefix, labels, description, provides)
        return self._call(self._slack.ConnectSlack, request)

    def list_slack_apps(self) -> List[pb.SlackApp]:
        """The tenant's Slack apps, oldest first."""
        response = self._call(self._slack.ListSlackApps, pb.ListSlackAppsRequest())
        return list(response.apps)

    def disconnect_slack(self, app_id: str) -> None:
        """Disconnects a Slack app (`NOT_FOUND` when the tenant has none by that id)."""
        self._call(self._slack.DisconnectSlack, pb.DisconnectSlackRequest(id=app_id))

    def follow(
        self,
        session_id: Optional[str] = None,
        *,
        all_sessions: bool = False,
        after: Optional[str] = None,
        exclusive: bool = False,
    ) -> Iterator[Event]:
        """Follows a session (or every session of the tenant): pending asks, `synced`,
        then live events. Across connection failures it reconnects with backoff and
        resumes from the last cursor, so nothing is missed or repeated while the server
        holds the cursor; otherwise the stream carries a `reset` event and a fresh
        snapshot. Refusals (bad credential, bad session) raise `AskgateError`."""
        cursor = after
        delays = backoff()
        while True:
            request = pb.SubscribeRequest(
                session_id=session_id or "",
                all_sessions=all_sessions,
                after=cursor or "",
                exclusive=exclusive,
            )
            try:
                for message in self._questions.Subscribe(request, metadata=self._target.metadata()):
                    if message.cursor:
                        cursor = message.cursor
                    delays = backoff()
                    event = Event.of(message)
                    if event is not None:
                        yield event
                return
            except RpcError as failure:
                error = AskgateError.from_rpc_error(failure, self._target.addr)
                if not error.retryable:
                    raise error from None
            sleep(next(delays))

    @contextmanager
    def attach(self, agent_id: str, parent_agent_id: str = "") -> Iterator["AgentLease"]:
        """Holds the agent's liveness lease while the block runs: asks made with
        `Ask(agent=(agent_id, lease.incarnation))` are accepted; leaving the block
        detaches the agent (its pending asks are ABORTED)."""
        request = pb.AttachRequest(agent_id=agent_id, parent_agent_id=parent_agent_id)
        stream = self._agents.Attach(request, metadata=self._target.metadata())
        try:
            lease = first(stream)
        except RpcError as failure:
            raise AskgateError.from_rpc_error(failure, self._target.addr) from None
        if lease is None:
            raise AskgateError(Reason.INTERNAL, grpc.StatusCode.INTERNAL, "Attach ended before its lease")
        held = AgentLease(lease.lease.incarnation, stream)
        try:
            yield held
        finally:
            held._stop()

    def _call(self, method, request):  # type: ignore[no-untyped-def]
        try:
            return method(request, metadata=self._target.metadata())
        except RpcError as failure:
            raise AskgateError.from_rpc_error(failure, self._target.addr) from None
