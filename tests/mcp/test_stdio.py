"""`askgate mcp` driven by the official MCP Python SDK over stdio, against a real
`askgate serve`; humans are played by `askgate bot` and the CLI."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import anyio
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters

sys.path.insert(0, str(Path(__file__).parent))
from conftest import ASKGATE, WAIT, Askgate  # noqa: E402

pytestmark = pytest.mark.anyio

# The fixed tool schema (docs/protocol.md), read from the one file every askgate SDK and
# `askgate mcp` serve (service/contract/ask_user_question.json): the server must list it as it is.
DEFINITION = Path(__file__).resolve().parents[2] / "service" / "contract" / "ask_user_question.json"
FIXED_SCHEMA = json.loads(DEFINITION.read_text(encoding="utf-8"))["input_schema"]

DATABASE = {
    "questions": [
        {
            "id": "db",
            "question": "Which database should the service use?",
            "header": "Database",
            "options": [
                {"label": "Postgres", "description": "relational"},
                {"label": "SQLite"},
            ],
        }
    ]
}

# Both handshakes: the initialize handshake at its newest version, and the newest
# protocol rmcp and the SDK speak (no handshake).
MODES = ["legacy", "2026-07-28"]


def mcp_server(url: str, session: str, *extra: str) -> StdioServerParameters:
    return StdioServerParameters(
        command=ASKGATE,
        args=["mcp", "--addr", url, "--session", session, *extra],
        env={"ASKGATE_LOG": "warn"},
    )


def text(result) -> str:  # type: ignore[no-untyped-def]
    assert len(result.content) == 1, result
    return result.content[0].text


@pytest.mark.parametrize("mode", MODES)
async def test_tools_are_listed_with_the_fixed_schema_on_both_protocol_versions(
    askgate: Askgate, mode: str
) -> None:
    url = askgate.serve()
    async with Client(mcp_server(url, "s"), mode=mode) as client:
        expected = "2025-11-25" if mode == "legacy" else mode
        assert client.protocol_version == expected
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        assert sorted(tools) == ["ask_user_question", "await_user_answer"]
        assert tools["ask_user_question"].input_schema == FIXED_SCHEMA
        assert "(Recommended)" in (tools["ask_user_question"].description or "")
        assert tools["await_user_answer"].input_schema["required"] == ["ask_id"]


@pytest.mark.parametrize("mode", MODES)
async def test_a_question_reaches_the_ui_and_the_answer_comes_back_exactly(
    askgate: Askgate, mode: str
) -> None:
    url = askgate.serve()
    watch = askgate.watch(url, "team")
    askgate.spawn("bot", "--addr", url, "--session", "team", "--policy", "first")
    async with Client(mcp_server(url, "team"), mode=mode) as client:
        result = await client.call_tool("ask_user_question", DATABASE)
    assert not result.is_error
    assert text(result) == '{"answers":[{"id":"db","selected":["Postgres"]}]}'
    requested = watch.requested()
    assert requested["questions"][0]["question"] == "Which database should the service use?"
    assert watch.resolved(requested["rpc_id"])["reason"] == "ANSWERED"


async def test_a_cancel_returns_the_humans_reason(askgate: Askgate) -> None:
    url = askgate.serve()
    # Someone follows the session before the call (the bot may subscribe a moment
    # later: it then gets the pending ask in its replay).
    askgate.watch(url, "s")
    askgate.spawn(
        "bot", "--addr", url, "--session", "s", "--policy", "cancel", "--reason", "use the staging DB"
    )
    async with Client(mcp_server(url, "s")) as client:
        result = await client.call_tool("ask_user_question", DATABASE)
    assert result.is_error
    assert text(result) == "Error: the user cancelled the question: use the staging DB"


async def test_refusals_return_the_fixed_strings(askgate: Askgate) -> None:
    url = askgate.serve()
    askgate.watch(url, "attended")
    async with Client(mcp_server(url, "attended")) as attended, Client(
        mcp_server(url, "nobody-here")
    ) as unattended:
        for nothing in ({}, {"questions": []}):
            result = await attended.call_tool("ask_user_question", nothing)
            assert result.is_error
            assert text(result) == "Error: ask_user_question requires at least one question"
        result = await unattended.call_tool("ask_user_question", DATABASE)
        assert text(result) == "Error: no user-questions provider is registered"
        unknown = {"questions": [{"id": "a", "question": "Q?", "options": [{"label": "x", "value": "1"}]}]}
        result = await attended.call_tool("ask_user_question", unknown)
        assert result.is_error
        assert text(result).startswith(
            "Error: invalid arguments: questions[0].options[0].value: unknown field `value`"
        ), text(result)
        assert "at line" not in text(result), text(result)


async def test_a_client_cancellation_resolves_the_ask_aborted_at_once(askgate: Askgate) -> None:
    url = askgate.serve()
    watch = askgate.watch(url, "s")
    async with Client(mcp_server(url, "s")) as client:
        async with anyio.create_task_group() as group:
            group.start_soon(client.call_tool, "ask_user_question", DATABASE)
            requested = await anyio.to_thread.run_sync(watch.requested)
            # The SDK sends notifications/cancelled for a call whose scope is cancelled.
            group.cancel_scope.cancel()
        resolved = await anyio.to_thread.run_sync(watch.resolved, requested["rpc_id"])
    assert resolved["reason"] == "ABORTED"
    # At once: well before the 10 s reattach grace a dropped call would get.
    code, stdout, _ = askgate.run("pending", "--addr", url, "--session", "s")
    assert code == 0 and requested["rpc_id"] not in stdout


async def test_progress_notifications_arrive_while_a_call_waits(askgate: Askgate) -> None:
    url = askgate.serve()
    watch = askgate.watch(url, "s")
    progress: list[float] = []
    two = anyio.Event()

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append(value)
        if len(progress) >= 2:
            two.set()

    async def answer_after_two_notifications() -> None:
        requested = await anyio.to_thread.run_sync(watch.requested)
        with anyio.fail_after(WAIT):
            await two.wait()
        code, _, stderr = await anyio.to_thread.run_sync(
            lambda: askgate.run(
                "answer", "--addr", url, "--session", "s", "--rpc-id", requested["rpc_id"],
                "--select", "db=SQLite",
            )
        )
        assert code == 0, stderr

    async with Client(mcp_server(url, "s", "--progress-interval", "100ms")) as client:
        async with anyio.create_task_group() as group:
            group.start_soon(answer_after_two_notifications)
            result = await client.call_tool(
                "ask_user_question", DATABASE, progress_callback=on_progress
            )
    assert text(result) == '{"answers":[{"id":"db","selected":["SQLite"]}]}'
    assert len(progress) >= 2 and progress == sorted(progress), progress


async def test_a_call_past_its_max_wait_is_picked_up_by_await_user_answer(
    askgate: Askgate,
) -> None:
    url = askgate.serve()
    watch = askgate.watch(url, "s")
    async with Client(mcp_server(url, "s", "--mcp-max-wait", "300ms")) as client:
        waiting = await client.call_tool("ask_user_question", DATABASE)
        assert not waiting.is_error
        match = re.search(r"ask_id: ([0-9a-f-]+)\)", text(waiting))
        assert match and "await_user_answer" in text(waiting), text(waiting)
        ask_id = match.group(1)
        # Still pending meanwhile: a human answers between the two calls.
        requested = watch.requested()
        code, _, stderr = askgate.run(
            "answer", "--addr", url, "--session", "s", "--rpc-id", requested["rpc_id"],
            "--select", "db=Postgres",
        )
        assert code == 0, stderr
        result = await client.call_tool("await_user_answer", {"ask_id": ask_id})
        assert text(result) == '{"answers":[{"id":"db","selected":["Postgres"]}]}'
        unknown = await client.call_tool("await_user_answer", {"ask_id": "nope"})
        assert unknown.is_error


async def test_credentials_without_the_agent_role_or_of_another_tenant_are_refused(
    askgate: Askgate,
) -> None:
    keys, ui_key = askgate.keys("acme", "acme-ui", "ui")
    _, agent_key = askgate.keys("acme", "worker", "agent")
    _, other_tenant = askgate.keys("globex", "eve", "agent")
    url = askgate.serve("--auth", "keys", "--keys-file", str(keys))
    askgate.watch(url, "s", token_file=ui_key)
    askgate.spawn(
        "bot", "--addr", url, "--session", "s", "--policy", "first", "--token-file", str(ui_key)
    )
    async with Client(mcp_server(url, "s", "--token-file", str(ui_key))) as client:
        result = await client.call_tool("ask_user_question", DATABASE)
    assert result.is_error
    assert text(result) == "Error: permission denied: this call needs the agent role"
    # Another tenant's agent asks in its own tenant, where nobody follows "s".
    async with Client(mcp_server(url, "s", "--token-file", str(other_tenant))) as client:
        result = await client.call_tool("ask_user_question", DATABASE)
    assert text(result) == "Error: no user-questions provider is registered"
    # The tenant's own agent is answered.
    async with Client(mcp_server(url, "s", "--token-file", str(agent_key))) as client:
        result = await client.call_tool("ask_user_question", DATABASE)
    assert text(result) == '{"answers":[{"id":"db","selected":["Postgres"]}]}'


def test_when_the_client_goes_away_its_ask_is_aborted_after_the_grace(askgate: Askgate) -> None:
    """The client vanishes without cancelling anything (its end of stdin closes):
    `askgate mcp` exits, and askgate aborts the open ask after its reattach grace."""
    import json
    import subprocess

    url = askgate.serve()
    watch = askgate.watch(url, "s")
    server = askgate.spawn(
        "mcp", "--addr", url, "--session", "s", "--reattach-grace", "500ms", stdin=subprocess.PIPE
    )
    messages = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "raw", "version": "0"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
            "name": "ask_user_question", "arguments": DATABASE}},
    ]
    assert server.stdin is not None
    for message in messages:
        server.stdin.write(json.dumps(message) + "\n")
        server.stdin.flush()
    requested = watch.requested()
    server.stdin.close()
    assert server.wait(timeout=WAIT) == 0
    resolved = watch.resolved(requested["rpc_id"])
    assert resolved["reason"] == "ABORTED"
