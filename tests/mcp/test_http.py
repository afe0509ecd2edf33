"""MCP over streamable HTTP at /mcp on `askgate serve`, driven by the official MCP
Python SDK: the same tools as `askgate mcp`, with the caller's bearer credential and
the `askgate-session` header."""

from __future__ import annotations

import re
import sys
from contextlib import asynccontextmanager
from pathlib import Path
from typing import AsyncIterator

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

sys.path.insert(0, str(Path(__file__).parent))
from conftest import Askgate  # noqa: E402
from test_stdio import DATABASE, MODES, FIXED_SCHEMA, text  # noqa: E402

pytestmark = pytest.mark.anyio


@asynccontextmanager
async def mcp_client(
    url: str, session: str | None, token: Path | None = None, mode: str = "legacy"
) -> AsyncIterator[Client]:
    headers = {}
    if session is not None:
        headers["askgate-session"] = session
    if token is not None:
        headers["authorization"] = f"Bearer {token.read_text().strip()}"
    async with httpx2.AsyncClient(headers=headers, timeout=60) as http:
        async with Client(streamable_http_client(f"{url}/mcp", http_client=http), mode=mode) as client:
            yield client


@pytest.mark.parametrize("mode", MODES)
async def test_the_tools_answer_over_http_on_both_protocol_versions(
    askgate: Askgate, mode: str
) -> None:
    url = askgate.serve()
    watch = askgate.watch(url, "team")
    askgate.spawn("bot", "--addr", url, "--session", "team", "--policy", "first")
    async with mcp_client(url, "team", mode=mode) as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        assert tools["ask_user_question"].input_schema == FIXED_SCHEMA
        result = await client.call_tool("ask_user_question", DATABASE)
    assert text(result) == '{"answers":[{"id":"db","selected":["Postgres"]}]}'
    requested = watch.requested()
    assert watch.resolved(requested["rpc_id"])["reason"] == "ANSWERED"


def post(url: str, headers: dict[str, str]) -> httpx2.Response:
    initialize = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "test", "version": "0"},
        },
    }
    return httpx2.post(
        f"{url}/mcp",
        json=initialize,
        headers={"accept": "application/json, text/event-stream", **headers},
        timeout=20,
    )


async def test_requests_are_refused_at_once_without_the_session_header_or_a_fitting_credential(
    askgate: Askgate,
) -> None:
    keys, agent = askgate.keys("acme", "worker", "agent")
    _, ui = askgate.keys("acme", "acme-ui", "ui")
    _, limited = askgate.keys("acme", "limited", "agent", sessions="team-a/*")
    url = askgate.serve("--auth", "keys", "--keys-file", str(keys))
    bearer = lambda key: {"authorization": f"Bearer {key.read_text().strip()}"}  # noqa: E731

    missing = post(url, bearer(agent))
    assert missing.status_code == 400
    assert "askgate-session" in missing.json()["error"]
    anonymous = post(url, {"askgate-session": "s"})
    assert anonymous.status_code == 401
    assert anonymous.headers["www-authenticate"] == "Bearer"
    for key, session in ((ui, "s"), (limited, "team-b/1")):
        denied = post(url, {**bearer(key), "askgate-session": session})
        assert denied.status_code == 403, denied.text
        assert "permission denied" in denied.json()["error"]
    bad = post(url, {**bearer(agent), "askgate-session": "not a session!"})
    assert bad.status_code == 400
    assert post(url, {**bearer(agent), "askgate-session": "s"}).status_code == 200


async def test_another_tenants_agent_asks_in_its_own_tenant(askgate: Askgate) -> None:
    keys, ui = askgate.keys("acme", "acme-ui", "ui")
    _, agent = askgate.keys("acme", "worker", "agent")
    _, other = askgate.keys("globex", "eve", "agent")
    url = askgate.serve("--auth", "keys", "--keys-file", str(keys))
    askgate.spawn("bot", "--addr", url, "--session", "s", "--policy", "first", "--token-file", str(ui))
    askgate.watch(url, "s", token_file=ui)
    async with mcp_client(url, "s", token=other) as client:
        result = await client.call_tool("ask_user_question", DATABASE)
    assert text(result) == "Error: no user-questions provider is registered"
    async with mcp_client(url, "s", token=agent) as client:
        result = await client.call_tool("ask_user_question", DATABASE)
    assert text(result) == '{"answers":[{"id":"db","selected":["Postgres"]}]}'


async def test_a_cancelled_call_aborts_its_ask_at_once(askgate: Askgate) -> None:
    url = askgate.serve()
    watch = askgate.watch(url, "s")
    async with mcp_client(url, "s") as client:
        async with anyio.create_task_group() as group:
            group.start_soon(client.call_tool, "ask_user_question", DATABASE)
            requested = await anyio.to_thread.run_sync(watch.requested)
            group.cancel_scope.cancel()
        resolved = await anyio.to_thread.run_sync(watch.resolved, requested["rpc_id"])
    assert resolved["reason"] == "ABORTED"


async def test_max_wait_then_await_user_answer_over_http(askgate: Askgate) -> None:
    url = askgate.serve("--mcp-max-wait", "300ms")
    watch = askgate.watch(url, "s")
    async with mcp_client(url, "s") as client:
        waiting = await client.call_tool("ask_user_question", DATABASE)
        match = re.search(r"ask_id: ([0-9a-f-]+)\)", text(waiting))
        assert match, text(waiting)
        requested = watch.requested()
        code, _, stderr = askgate.run(
            "answer", "--addr", url, "--session", "s", "--rpc-id", requested["rpc_id"],
            "--select", "db=SQLite",
        )
        assert code == 0, stderr
    # A new MCP session (a new connection) picks it up: the ask lives in the server.
    async with mcp_client(url, "s") as client:
        result = await client.call_tool("await_user_answer", {"ask_id": match.group(1)})
    assert text(result) == '{"answers":[{"id":"db","selected":["SQLite"]}]}'
    # ...but not from another session.
    async with mcp_client(url, "elsewhere") as client:
        result = await client.call_tool("await_user_answer", {"ask_id": match.group(1)})
    assert result.is_error


POLICIES = """
@id("read-only") @decision("allow")
permit(principal, action == Action::"Bash", resource)
when { context.arguments has command && context.arguments.command == "git status" };

@id("destructive") @reason("destructive commands are not run by agents")
forbid(principal, action == Action::"Bash", resource)
when { context.arguments has command && context.arguments.command like "*rm -rf*" };
"""


def permission(command: str) -> dict[str, object]:
    return {
        "questions": [
            {
                "id": "run",
                "question": f"Run `{command}`?",
                "options": [{"label": "Run"}, {"label": "Skip"}],
            }
        ],
        "action": {"name": "Bash", "arguments": {"command": command}},
    }


async def test_the_tenants_policy_decides_an_action_before_anyone_is_asked(
    askgate: Askgate,
) -> None:
    url = askgate.serve()
    policies = askgate.dir / "policies.cedar"
    policies.write_text(POLICIES)
    code, _, err = askgate.run("policy", "put", str(policies), "--addr", url)
    assert code == 0, err
    # Nobody follows the session: an ask would be NO_PROVIDER, a decided one is not.
    async with mcp_client(url, "agent") as client:
        allowed = await client.call_tool("ask_user_question", permission("git status"))
        denied = await client.call_tool("ask_user_question", permission("rm -rf /"))
    assert text(allowed) == '{"answers":[{"id":"run","selected":["Run"]}]}'
    assert text(denied) == (
        'Error: denied by policy "destructive": destructive commands are not run by agents'
    )
