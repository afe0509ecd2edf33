"""askgate as an A2A agent, driven by the official A2A Python SDK (`a2a-sdk`, its gRPC
transport) against a real `askgate serve --a2a on`: the agent card, a message whose
DataPart holds the questions, the task WORKING then COMPLETED with the answers, and
the other resolutions: a human's cancel, CancelTask, expiry, nobody following; the
same message sent again (after a dropped call, after a restart) joins its ask."""

from __future__ import annotations

from contextlib import asynccontextmanager
from pathlib import Path
from typing import AsyncIterator

import grpc
import httpx
import pytest
from a2a.client import ClientCallContext, ClientConfig, create_client
from a2a.client.errors import A2AClientError
from a2a.types import (
    CancelTaskRequest,
    GetTaskRequest,
    Message,
    Part,
    Role,
    SendMessageConfiguration,
    SendMessageRequest,
    SubscribeToTaskRequest,
    TaskState,
)
from a2a.utils.errors import InvalidParamsError, TaskNotCancelableError, TaskNotFoundError
from google.protobuf import json_format, struct_pb2

from askgate_processes import Askgate

pytestmark = pytest.mark.anyio

DATABASE = {
    "questions": [
        {
            "id": "db",
            "question": "Which database should the service use?",
            "options": [{"label": "Postgres", "description": "relational"}, {"label": "SQLite"}],
        }
    ]
}


def serve(askgate: Askgate, *extra: str) -> str:
    return askgate.serve("--a2a", "on", *extra)


@asynccontextmanager
async def a2a(url: str, token: Path | None = None, streaming: bool = True) -> AsyncIterator:
    """The SDK's client, made from the agent card at `url` (gRPC preferred)."""
    config = ClientConfig(
        streaming=streaming,
        supported_protocol_bindings=["GRPC"],
        grpc_channel_factory=lambda target: grpc.aio.insecure_channel(target.split("://")[-1]),
    )
    client = await create_client(url, client_config=config)
    try:
        yield client
    finally:
        await client.close()


def context(token: Path | None) -> ClientCallContext | None:
    if token is None:
        return None
    return ClientCallContext(service_parameters={"authorization": f"Bearer {token.read_text().strip()}"})


def ask(session: str, data: dict | None = None, immediately: bool = False) -> SendMessageRequest:
    value = struct_pb2.Value()
    json_format.ParseDict(data or DATABASE, value)
    message = Message(message_id="m-" + session, context_id=session, role=Role.ROLE_USER, parts=[Part(data=value)])
    return SendMessageRequest(
        message=message, configuration=SendMessageConfiguration(return_immediately=immediately)
    )


def answers(task_or_artifact) -> dict:  # type: ignore[no-untyped-def]
    artifact = task_or_artifact.artifacts[0] if hasattr(task_or_artifact, "artifacts") else task_or_artifact
    assert artifact.artifact_id == "answers"
    return json_format.MessageToDict(artifact.parts[0].data)


async def events(client, request, token: Path | None = None) -> list:  # type: ignore[no-untyped-def]
    return [event async for event in client.send_message(request, context=context(token))]


def final(received: list):  # type: ignore[no-untyped-def]
    """The status a stream ended with: its last status update, or the task it began
    with when that had already ended."""
    last = received[-1]
    return last.task.status if last.HasField("task") else last.status_update.status


async def when_ended(client, url: str, task_id: str):  # type: ignore[no-untyped-def]
    """The task `task_id` once it has ended: followed to its end, then fetched."""
    async with a2a(url) as follower:
        [_ async for _ in follower.subscribe(SubscribeToTaskRequest(id=task_id))]
    return await client.get_task(GetTaskRequest(id=task_id))


async def test_the_agent_card_names_the_skill_and_its_input_schema(askgate: Askgate) -> None:
    url = serve(askgate)
    card = httpx.get(f"{url}/.well-known/agent-card.json", timeout=10).json()
    assert card["supportedInterfaces"][0]["protocolBinding"] == "GRPC"
    assert card["supportedInterfaces"][0]["url"] == url
    assert card["skills"][0]["id"] == "ask_user_question"
    assert card["capabilities"]["streaming"] is True
    schema = card["capabilities"]["extensions"][0]["params"]["input_schema"]
    assert schema["required"] == ["questions"]
    # Off by default.
    plain = askgate.serve()
    assert httpx.get(f"{plain}/.well-known/agent-card.json", timeout=10).status_code == 404


async def test_a_human_answers_a_streamed_message(askgate: Askgate) -> None:
    url = serve(askgate)
    watch = askgate.watch(url, "team")
    askgate.spawn("bot", "--addr", url, "--session", "team", "--policy", "first")
    async with a2a(url) as client:
        received = await events(client, ask("team"))
    kinds = [event.WhichOneof("payload") for event in received]
    assert kinds == ["task", "artifact_update", "status_update"], received
    task = received[0].task
    assert task.status.state == TaskState.TASK_STATE_WORKING
    assert task.context_id == "team"
    assert answers(received[1].artifact_update.artifact) == {
        "answers": [{"id": "db", "selected": ["Postgres"]}]
    }
    final = received[2].status_update
    assert final.task_id == task.id
    assert final.status.state == TaskState.TASK_STATE_COMPLETED
    requested = watch.requested()
    assert requested["questions"][0]["question"] == "Which database should the service use?"
    assert watch.resolved(requested["rpc_id"])["reason"] == "ANSWERED"
    async with a2a(url) as client:
        again = await client.get_task(GetTaskRequest(id=task.id))
    assert again.status.state == TaskState.TASK_STATE_COMPLETED
    assert answers(again) == {"answers": [{"id": "db", "selected": ["Postgres"]}]}


async def test_a_blocking_message_returns_the_completed_task(askgate: Askgate) -> None:
    url = serve(askgate)
    askgate.spawn("bot", "--addr", url, "--session", "team", "--policy", "first")
    askgate.watch(url, "team")
    async with a2a(url, streaming=False) as client:
        [event] = await events(client, ask("team"))
    assert event.task.status.state == TaskState.TASK_STATE_COMPLETED
    assert answers(event.task) == {"answers": [{"id": "db", "selected": ["Postgres"]}]}


async def test_a_humans_cancel_is_canceled_with_the_reason(askgate: Askgate) -> None:
    url = serve(askgate)
    askgate.watch(url, "s")
    askgate.spawn("bot", "--addr", url, "--session", "s", "--policy", "cancel", "--reason", "use staging")
    async with a2a(url) as client:
        received = await events(client, ask("s"))
    ended = final(received)
    assert ended.state == TaskState.TASK_STATE_CANCELED
    assert ended.message.parts[0].text == "the user cancelled the question: use staging"
    assert ended.message.metadata["reason"] == "ASK_CANCELLED"


async def test_cancel_task_aborts_the_ask_and_a_subscriber_sees_it_end(askgate: Askgate) -> None:
    url = serve(askgate)
    watch = askgate.watch(url, "s")
    async with a2a(url, streaming=False) as client:
        [event] = await events(client, ask("s", immediately=True))
        task = event.task
        assert task.status.state == TaskState.TASK_STATE_WORKING
        requested = watch.requested()
        async with a2a(url) as follower:
            following = follower.subscribe(SubscribeToTaskRequest(id=task.id))
            first = await following.__anext__()
            assert first.task.status.state == TaskState.TASK_STATE_WORKING
            cancelled = await client.cancel_task(CancelTaskRequest(id=task.id))
            assert cancelled.status.state == TaskState.TASK_STATE_CANCELED
            assert cancelled.status.message.metadata["reason"] == "ASK_ABORTED"
            last = [event async for event in following][-1]
            assert last.status_update.status.state == TaskState.TASK_STATE_CANCELED
        assert watch.resolved(requested["rpc_id"])["reason"] == "ABORTED"
        with pytest.raises(TaskNotCancelableError):
            await client.cancel_task(CancelTaskRequest(id=task.id))
        with pytest.raises(TaskNotFoundError):
            await client.get_task(GetTaskRequest(id="no-such-task"))


async def test_the_same_message_sent_again_joins_its_ask(askgate: Askgate) -> None:
    """A client whose blocking call dropped before it learnt the task's id sends the
    message again: the new task joins the same ask, so the human is asked once and
    both tasks end with the one answer. The message id reused with other questions is
    another ask."""
    url = serve(askgate)
    askgate.watch(url, "s")
    rephrased = {"questions": [{**DATABASE["questions"][0], "question": "Which database, really?"}]}
    async with a2a(url, streaming=False) as client:
        sent = [
            (await events(client, ask("s", data, immediately=True)))[0].task
            for data in (DATABASE, DATABASE, rephrased)
        ]
        assert len({task.id for task in sent}) == 3
        askgate.spawn("bot", "--addr", url, "--session", "s", "--policy", "first")
        ended = [await when_ended(client, url, task.id) for task in sent]
    assert [task.status.state for task in ended] == [TaskState.TASK_STATE_COMPLETED] * 3
    first, again, other = (task.metadata["askgate.rpc_id"] for task in ended)
    assert first == again, "the message sent again joined its ask"
    assert other != first, "other questions under the same message id are another ask"
    assert answers(ended[1]) == {"answers": [{"id": "db", "selected": ["Postgres"]}]}


async def test_a_message_sent_again_after_a_restart_gets_the_answer(askgate: Askgate) -> None:
    """The node that took the message restarts (SQLite): the same message sent to the
    node that comes back joins the ask the human saw before, and gets its answer."""
    store = ("--backend", "sqlite", "--data-dir", str(askgate.dir / "data"))
    url = serve(askgate, *store)
    before = askgate.watch(url, "s").requested
    async with a2a(url, streaming=False) as client:
        await events(client, ask("s", immediately=True))
    asked = before()
    askgate.stop_serving(url)
    url = serve(askgate, *store)
    askgate.watch(url, "s")
    async with a2a(url, streaming=False) as client:
        [sent] = await events(client, ask("s", immediately=True))
        askgate.spawn("bot", "--addr", url, "--session", "s", "--policy", "first")
        ended = await when_ended(client, url, sent.task.id)
    assert ended.status.state == TaskState.TASK_STATE_COMPLETED, ended
    assert ended.metadata["askgate.rpc_id"] == asked["rpc_id"]
    assert answers(ended) == {"answers": [{"id": "db", "selected": ["Postgres"]}]}


async def test_expiry_and_nobody_following_fail_with_the_reason(askgate: Askgate) -> None:
    url = serve(askgate, "--max-wait", "1s")
    askgate.watch(url, "quiet")
    async with a2a(url) as client:
        expired = final(await events(client, ask("quiet")))
        alone = final(await events(client, ask("nobody-here")))
    assert expired.state == TaskState.TASK_STATE_FAILED
    assert expired.message.metadata["reason"] == "ASK_EXPIRED"
    assert alone.state == TaskState.TASK_STATE_FAILED
    assert alone.message.metadata["reason"] == "NO_PROVIDER"
    assert alone.message.parts[0].text == "no user-questions provider is registered"


async def test_a_message_that_is_not_the_tools_input_is_invalid_params(askgate: Askgate) -> None:
    url = serve(askgate)
    async with a2a(url) as client:
        with pytest.raises(InvalidParamsError, match="questions"):
            await events(client, ask("s", {"questions": [{"id": "q"}]}))
        with pytest.raises(InvalidParamsError, match="at least one question"):
            await events(client, ask("s", {"questions": []}))
        text_only = SendMessageRequest(
            message=Message(message_id="m", role=Role.ROLE_USER, parts=[Part(text="hello")])
        )
        with pytest.raises(InvalidParamsError, match="DataPart"):
            await events(client, text_only)


async def test_credentials_are_askgates_with_the_agent_role(askgate: Askgate) -> None:
    keys, ui_key = askgate.keys("acme", "acme-ui", "ui")
    _, agent_key = askgate.keys("acme", "worker", "agent")
    _, other_tenant = askgate.keys("globex", "eve", "agent")
    url = serve(askgate, "--auth", "keys", "--keys-file", str(keys))
    card = httpx.get(f"{url}/.well-known/agent-card.json", timeout=10).json()
    assert "bearer" in card["securitySchemes"]
    askgate.watch(url, "s", token_file=ui_key)
    askgate.spawn("bot", "--addr", url, "--session", "s", "--policy", "first", "--token-file", str(ui_key))
    async with a2a(url) as client:
        with pytest.raises(A2AClientError, match="PERMISSION_DENIED"):
            await events(client, ask("s"), ui_key)
        with pytest.raises(A2AClientError, match="UNAUTHENTICATED"):
            await events(client, ask("s"))
        received = await events(client, ask("s"), agent_key)
        task_id = received[0].task.id
        assert final(received).state == TaskState.TASK_STATE_COMPLETED
        # Another tenant's agent does not see the task.
        with pytest.raises(TaskNotFoundError):
            await client.get_task(GetTaskRequest(id=task_id), context=context(other_tenant))
