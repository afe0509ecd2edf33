"""The asyncio client: the same methods as `Client`, awaitable."""

from __future__ import annotations

import asyncio
import time
from contextlib import asynccontextmanager
from typing import AsyncIterator, List, Mapping, Optional, Sequence, Tuple

import grpc
import grpc.aio

from ._connection import Retries, Target, backoff
from ._errors import AskgateError, Reason
from ._model import Answer, Ask, AskResult, Event, endpoint_request, slack_request
from .v1 import askgate_pb2 as pb
from .v1 import askgate_pb2_grpc as rpc


class AsyncClient:
    """`Client` for asyncio. It may be made anywhere (at module level, before
    `asyncio.run`); its channel is opened in the event loop that first uses it, and
    the client belongs to that loop from then on: using it from another loop while
    that one is open raises `RuntimeError` (make one client per loop). Once that loop
    is closed (`asyncio.run` returned), the next loop to use the client opens a new
    channel. `await client.close()` (or `async with`) when done."""

    def __init__(
        self,
        addr: Optional[str] = None,
        *,
        token: Optional[str] = None,
        ca_pem: Optional[bytes] = None,
        client_cert: Optional[Tuple[bytes, bytes]] = None,
    ) -> None:
        self._target = Target.resolve(addr, token, ca_pem, client_cert)
        self._bound: Optional[_Bound] = None

    def _stubs(self) -> "_Bound":
        """The channel and stubs of the running loop (opened on first use)."""
        loop = asyncio.get_running_loop()
        bound = self._bound
        if bound is not None and bound.loop is not loop:
            if not bound.loop.is_closed():
                raise RuntimeError(
                    "this askgate AsyncClient belongs to the event loop that first used it, "
                    "which is still open: make one AsyncClient per event loop"
                )
            bound = None
        if bound is None:
            bound = self._bound = _Bound(loop, self._target.channel(grpc.aio))
        return bound

    @property
    def _questions(self) -> rpc.UserQuestionsStub:
        return self._stubs().questions

    @property
    def _agents(self) -> rpc.AgentsStub:
        return self._stubs().agents

    @property
    def _webhooks(self) -> rpc.WebhooksStub:
        return self._stubs().webhooks

    @property
    def _slack(self) -> rpc.SlackStub:
        return self._stubs().slack

    async def __aenter__(self) -> "AsyncClient":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        bound = self._bound
        if bound is None or bound.loop.is_closed():
            self._bound = None
            return
        if bound.loop is not asyncio.get_running_loop():
            raise RuntimeError("close this askgate AsyncClient in the event loop that used it")
        self._bound = None
        await bound.channel.close()

    def __repr__(self) -> str:
        return f"AsyncClient({self._target!r})"

    async def ask(self, ask: Ask) -> AskResult:
        """As `Client.ask`. Cancelling the task drops the call: the ask stays answerable
        for its reattach grace (use `abort` to resolve it at once)."""
        retries = Retries(ask.timeout, ask.retry, ask.retry_for)
        request = ask.request()
        while True:
            attempt = time.monotonic()
            try:
                response = await self._questions.Ask(
                    request, timeout=retries.timeout(), metadata=self._target.metadata()
                )
                return AskResult(
                    rpc_id=response.rpc_id,
                    answers=[Answer.of(a) for a in response.answers],
                    resolved_by=response.resolved_by,
                )
            except grpc.aio.AioRpcError as failure:
                error = AskgateError.from_rpc_error(failure)
            await asyncio.sleep(retries.pause(attempt, error))

    async def abort(self, session_id: str, request_id: str) -> None:
        await self._call(self._questions.Abort, pb.AbortRequest(session_id=session_id, request_id=request_id))

    async def answer(self, session_id: str, rpc_id: str, answers: Sequence[pb.QuestionAnswer]) -> None:
        request = pb.AnswerRequest(session_id=session_id, rpc_id=rpc_id, answers=list(answers))
        await self._call(self._questions.Answer, request)

    async def cancel(self, session_id: str, rpc_id: str, reason: str = "") -> None:
        request = pb.CancelRequest(session_id=session_id, rpc_id=rpc_id, reason=reason)
        await self._call(self._questions.Cancel, request)

    async def list_pending(self, session_id: str) -> List[pb.Requested]:
        response = await self._call(
            self._questions.ListPending, pb.ListPendingRequest(session_id=session_id)
        )
        return list(response.pending)

    async def create_endpoint(
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
        return await self._call(self._webhooks.CreateEndpoint, request)

    async def list_endpoints(self) -> List[pb.Endpoint]:
        """The tenant's webhook endpoints, oldest first, without their secrets."""
        response = await self._call(self._webhooks.ListEndpoints, pb.ListEndpointsRequest())
        return list(response.endpoints)

    async def delete_endpoint(self, endpoint_id: str) -> None:
        """Removes a webhook endpoint (`NOT_FOUND` when the tenant has none by that id)."""
        await self._call(self._webhooks.DeleteEndpoint, pb.DeleteEndpointRequest(id=endpoint_id))

    async def list_deliveries(
        self, *, endpoint_id: str = "", status: "pb.DeliveryStatus.ValueType" = pb.DELIVERY_STATUS_UNSPECIFIED, limit: int = 0
    ) -> List[pb.Delivery]:
        """Webhook deliveries, newest first, of one endpoint and status (`pb.PENDING`,
        `pb.DELIVERED`, `pb.FAILED`) if given."""
        request = pb.ListDeliveriesRequest(endpoint_id=endpoint_id, status=status, limit=limit)
        response = await self._call(self._webhooks.ListDeliveries, request)
        return list(response.deliveries)

    async def redeliver(self, delivery_id: str) -> pb.Delivery:
        """Sends a webhook delivery again, with the same `webhook-id`."""
        return await self._call(self._webhooks.Redeliver, pb.RedeliverRequest(id=delivery_id))

    async def who_am_i(self) -> pb.WhoAmIResponse:
        """Who the credential names (`tenant`, `subject`, `roles`) and which sessions it
        may see (`every_session`, or the `sessions` patterns); any role may ask."""
        return await self._call(self._questions.WhoAmI, pb.WhoAmIRequest())

    async def connect_slack(
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
        return await self._call(self._slack.ConnectSlack, request)

    async def list_slack_apps(self) -> List[pb.SlackApp]:
        """The tenant's Slack apps, oldest first."""
        response = await self._call(self._slack.ListSlackApps, pb.ListSlackAppsRequest())
        return list(response.apps)

    async def disconnect_slack(self, app_id: str) -> None:
        """Disconnects a Slack app (`NOT_FOUND` when the tenant has none by that id)."""
        await self._call(self._slack.DisconnectSlack, pb.DisconnectSlackRequest(id=app_id))

    async def follow(
        self,
        session_id: Optional[str] = None,
        *,
        all_sessions: bool = False,
        after: Optional[str] = None,
        exclusive: bool = False,
    ) -> AsyncIterator[Event]:
        """As `Client.follow`, an async iterator."""
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
                async for message in self._questions.Subscribe(request, metadata=self._target.metadata()):
                    if message.cursor:
                        cursor = message.cursor
                    delays = backoff()
                    event = Event.of(message)
                    if event is not None:
                        yield event
                return
            except grpc.aio.AioRpcError as failure:
                error = AskgateError.from_rpc_error(failure)
                if not error.retryable:
                    raise error from None
            await asyncio.sleep(next(delays))

    @asynccontextmanager
    async def attach(self, agent_id: str, parent_agent_id: str = "") -> AsyncIterator["AsyncAgentLease"]:
        """As `Client.attach`, an async context manager."""
        request = pb.AttachRequest(agent_id=agent_id, parent_agent_id=parent_agent_id)
        stream = self._agents.Attach(request, metadata=self._target.metadata())
        try:
            first = await stream.read()
        except grpc.aio.AioRpcError as failure:
            raise AskgateError.from_rpc_error(failure) from None
        if first is grpc.aio.EOF:
            raise AskgateError(Reason.INTERNAL, grpc.StatusCode.INTERNAL, "Attach ended before its lease")
        lease = AsyncAgentLease(first.lease.incarnation, stream)
        try:
            yield lease
        finally:
            stream.cancel()
            lease._reader.cancel()

    async def _call(self, method, request):  # type: ignore[no-untyped-def]
        try:
            return await method(request, metadata=self._target.metadata())
        except grpc.aio.AioRpcError as failure:
            raise AskgateError.from_rpc_error(failure) from None


class _Bound:
    """An `AsyncClient`'s channel and stubs, in the event loop they belong to."""

    def __init__(self, loop: asyncio.AbstractEventLoop, channel: grpc.aio.Channel) -> None:
        self.loop = loop
        self.channel = channel
        self.questions = rpc.UserQuestionsStub(channel)
        self.agents = rpc.AgentsStub(channel)
        self.webhooks = rpc.WebhooksStub(channel)
        self.slack = rpc.SlackStub(channel)


class AsyncAgentLease:
    """A held `Agents.Attach` stream; `ended` is set when the server ends the lease."""

    def __init__(self, incarnation: str, stream) -> None:  # type: ignore[no-untyped-def]
        self.incarnation = incarnation
        self.ended = asyncio.Event()
        self.error: Optional[AskgateError] = None
        self._reader = asyncio.ensure_future(self._read(stream))

    async def _read(self, stream) -> None:  # type: ignore[no-untyped-def]
        try:
            async for _heartbeat in stream:
                pass
        except grpc.aio.AioRpcError as failure:
            if failure.code() != grpc.StatusCode.CANCELLED:
                self.error = AskgateError.from_rpc_error(failure)
        except asyncio.CancelledError:
            pass
        finally:
            self.ended.set()
