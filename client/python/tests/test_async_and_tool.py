"""The asyncio client and the model-facing tool against a real askgate."""

from __future__ import annotations

import asyncio
import json
import subprocess
import threading

import grpc
import pytest

from askgate import Ask, AskgateError, AsyncClient, Client, Reason, question, select
from askgate.tool import AskUserQuestion, AsyncAskUserQuestion, definition, input_schema
from conftest import ASKGATE, Server, eventually

DATABASE = {
    "questions": [
        {"id": "db", "question": "Which database?", "options": [{"label": "Postgres"}, {"label": "SQLite"}]}
    ]
}


def test_the_async_client_asks_follows_and_answers(server: Server) -> None:
    async def scenario() -> None:
        async with AsyncClient(server.addr) as client:
            events = client.follow("s")
            first = await events.__anext__()
            assert first.synced
            call = asyncio.ensure_future(
                client.ask(Ask("s", [question("db", "Which?", options=["Postgres"])]))
            )
            requested = (await events.__anext__()).requested
            assert requested is not None
            await client.answer("s", requested.rpc_id, [select("db", "Postgres")])
            result = await call
            assert result.answers[0].selected == ["Postgres"]
            with pytest.raises(AskgateError) as late:
                await client.cancel("s", requested.rpc_id)
            assert late.value.reason is Reason.NOT_PENDING
            async with client.attach("planner") as lease:
                assert lease.incarnation
            await events.aclose()

    asyncio.run(scenario())


# What the description tells the model about asking well: the same sentences as the
# Rust SDK's and the TypeScript SDK's tests pin in service/contract/ask_user_question.json.
GUIDANCE = (
    "Ask everything you need in one call.",
    "Keep each question short and specific.",
    "Prefer options (2 to 4, each with a short description of what it means) over open "
    "questions; the user can always answer in their own words instead.",
    'To recommend an option, put it first and end its label with " (Recommended)"',
)


def test_the_tool_description_tells_the_model_how_to_ask() -> None:
    for sentence in GUIDANCE:
        assert sentence in definition()["description"], sentence


def test_the_tool_definition_is_the_servers() -> None:
    """The same name, description and schema as the Rust SDK and `askgate mcp`."""
    server = subprocess.Popen(
        [ASKGATE, "mcp", "--session", "s"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert server.stdin and server.stdout
    for message in (
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
    ):
        server.stdin.write(json.dumps(message) + "\n")
        server.stdin.flush()
    server.stdout.readline()
    tools = json.loads(server.stdout.readline())["result"]["tools"]
    server.stdin.close()
    server.wait(timeout=20)
    rust = next(t for t in tools if t["name"] == "ask_user_question")
    ours = definition()
    assert (ours["name"], ours["description"], ours["input_schema"]) == (
        rust["name"], rust["description"], rust["inputSchema"],
    )
    assert input_schema()["additionalProperties"] is False


def test_the_tool_returns_the_fixed_texts(server: Server) -> None:
    with Client(server.addr) as client:
        ui = client.follow("s")
        assert next(ui).synced
        tool = AskUserQuestion(client, "s")

        def human() -> None:
            ask = eventually("a pending ask", lambda: (client.list_pending("s") or [None])[0])
            client.answer("s", ask.rpc_id, [select("db", "Postgres")])

        threading.Thread(target=human, daemon=True).start()
        assert tool(json.dumps(DATABASE)) == '{"answers":[{"id":"db","selected":["Postgres"]}]}'
        for nothing in ("{}", '{"questions": []}'):
            output = tool.run(nothing)
            assert output.text == "Error: ask_user_question requires at least one question"
            assert output.error is not None and output.error.reason is Reason.EMPTY_QUESTIONS
        unknown = tool.run({"questions": [{"id": "a", "question": "Q?", "options": [{"label": "x", "value": 1}]}]})
        assert unknown.text.startswith(
            "Error: invalid arguments: questions[0].options[0].value: unknown field `value`"
        ), unknown.text
        assert AskUserQuestion(client, "nobody").run(DATABASE).text == (
            "Error: no user-questions provider is registered"
        )

        abort = threading.Event()
        aborter = threading.Thread(
            target=lambda: (eventually("pending", lambda: client.list_pending("s")), abort.set()),
            daemon=True,
        )
        aborter.start()
        output = tool.run(DATABASE, abort=abort)
        assert output.text == "Error: ask_user_question was aborted before the user answered"
        assert output.error is not None and output.error.code == grpc.StatusCode.CANCELLED
        assert client.list_pending("s") == [], "aborted at once, not after the grace"


def test_the_tools_action_becomes_the_asks_action(server: Server) -> None:
    with Client(server.addr) as client:
        ui = client.follow("s")
        assert next(ui).synced
        tool = AskUserQuestion(client, "s")
        seen = []

        def human() -> None:
            ask = eventually("a pending ask", lambda: (client.list_pending("s") or [None])[0])
            seen.append(ask)
            client.answer("s", ask.rpc_id, [select("run", "Run")])

        threading.Thread(target=human, daemon=True).start()
        arguments = {
            "questions": [
                {"id": "run", "question": "Run it?", "options": [{"label": "Run"}, {"label": "Skip"}]}
            ],
            "action": {"name": "Bash", "arguments": {"command": "make test"}},
        }
        assert tool(json.dumps(arguments)) == '{"answers":[{"id":"run","selected":["Run"]}]}'
        assert seen[0].action.name == "Bash"
        assert json.loads(seen[0].action.arguments_json) == {"command": "make test"}
        refused = tool.run({**arguments, "action": {"tool": "Bash"}})
        assert refused.text.startswith("Error: invalid arguments: action.tool: unknown field"), refused.text


def test_the_async_tool_aborts_on_its_event(server: Server) -> None:
    async def scenario() -> None:
        async with AsyncClient(server.addr) as client:
            events = client.follow("s")
            await events.__anext__()
            abort = asyncio.Event()
            run = asyncio.ensure_future(AsyncAskUserQuestion(client, "s").run(DATABASE, abort))
            assert (await events.__anext__()).requested is not None
            abort.set()
            output = await run
            assert output.error is not None and output.error.reason is Reason.ASK_ABORTED
            assert await client.list_pending("s") == []
            await events.aclose()

    asyncio.run(scenario())


def test_an_async_client_made_outside_an_event_loop_serves_each_asyncio_run(server: Server) -> None:
    # Made at module level, as in docs/python.md: the channel opens in the loop that
    # first uses it, and a later asyncio.run (a new loop) gets a channel of its own.
    client = AsyncClient(server.addr)
    for _ in range(2):
        who = asyncio.run(client.who_am_i())
        assert who.tenant
    asyncio.run(client.close())


def test_an_async_client_used_from_a_second_open_loop_says_so(server: Server) -> None:
    client = AsyncClient(server.addr)
    first = asyncio.new_event_loop()
    try:
        first.run_until_complete(client.who_am_i())
        with pytest.raises(RuntimeError, match="one AsyncClient per event loop"):
            asyncio.run(client.who_am_i())
        first.run_until_complete(client.close())
    finally:
        first.close()


def test_the_docs_openai_agents_snippet_runs_as_written(server: Server) -> None:
    """docs/python.md builds the tool with `AsyncClient()` at module level; each run
    (asyncio.run, as Runner.run_sync does) calls it in a loop of its own."""
    from pathlib import Path
    import os
    import re

    from agents.tool_context import ToolContext

    docs = (Path(__file__).resolve().parents[3] / "docs" / "python.md").read_text(encoding="utf-8")
    snippet = next(
        block
        for block in re.findall(r"```python\n(.*?)```", docs, re.S)
        if "ask_user_question_tool(AsyncClient()" in block
    )
    os.environ["ASKGATE_ADDR"] = server.addr
    try:
        scope: dict = {}
        exec(compile(snippet, "docs/python.md", "exec"), scope)
    finally:
        del os.environ["ASKGATE_ADDR"]
    tool = scope["agent"].tools[0]
    arguments = json.dumps({"questions": [{"id": "q", "question": "Ready?", "options": [{"label": "yes"}]}]})
    context = ToolContext(context=None, tool_name=tool.name, tool_call_id="call_1", tool_arguments=arguments)
    bot = subprocess.Popen(
        [ASKGATE, "bot", "--addr", server.addr, "--session", "team-a/review", "--policy", "first"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        eventually("the bot to follow the session", lambda: following(server.addr, "team-a/review"))
        for _ in range(2):
            assert asyncio.run(tool.on_invoke_tool(context, arguments)) == '{"answers":[{"id":"q","selected":["yes"]}]}'
    finally:
        bot.kill()
        bot.wait()


def following(addr: str, session: str) -> bool:
    """A probe ask: NO_PROVIDER until someone follows `session`, then answered."""
    with Client(addr) as client:
        try:
            client.ask(Ask(session, [question("probe", "Ready?", options=["yes"])], timeout=5))
            return True
        except AskgateError as error:
            if error.reason is Reason.NO_PROVIDER:
                return False
            raise


class Follower:
    """Follows a session in a thread of its own; its events in a queue."""

    def __init__(self, addr: str, session: str) -> None:
        import queue

        self.client = Client(addr)
        self.events: "queue.Queue" = queue.Queue()
        self.thread = threading.Thread(target=self._run, args=(session,), daemon=True)
        self.thread.start()
        assert self.next().synced

    def _run(self, session: str) -> None:
        try:
            for event in self.client.follow(session):
                self.events.put(event)
        except Exception:  # the client closed under it
            pass

    def next(self):  # type: ignore[no-untyped-def]
        from conftest import WAIT

        return self.events.get(timeout=WAIT)

    def close(self) -> None:
        self.client.close()


ABORTED = "Error: ask_user_question was aborted before the user answered"


@pytest.mark.parametrize("when", ["before", "during", "after"])
def test_an_aborted_tool_run_leaves_nothing_answerable(server: Server, when: str) -> None:
    follower = Follower(server.addr, "s")
    try:
        with Client(server.addr) as client:
            abort = threading.Event()
            if when == "before":
                abort.set()
            elif when == "during":
                threading.Thread(target=abort.set).start()
            else:

                def once_pending() -> None:
                    assert follower.next().requested is not None
                    abort.set()

                threading.Thread(target=once_pending).start()
            output = AskUserQuestion(client, "s").run(DATABASE, abort=abort)
            assert output.text == ABORTED
            assert client.list_pending("s") == [], f"{when}: pending after the tool said ASK_ABORTED"
    finally:
        follower.close()


@pytest.mark.parametrize("when", ["before", "during", "after"])
def test_an_aborted_async_tool_run_leaves_nothing_answerable(server: Server, when: str) -> None:
    follower = Follower(server.addr, "s")

    async def scenario() -> None:
        async with AsyncClient(server.addr) as client:
            abort = asyncio.Event()
            if when == "before":
                abort.set()
            elif when == "during":
                asyncio.get_running_loop().call_soon(abort.set)
            else:

                async def once_pending() -> None:
                    event = await asyncio.get_running_loop().run_in_executor(None, follower.next)
                    assert event.requested is not None
                    abort.set()

                asyncio.ensure_future(once_pending())
            output = await AsyncAskUserQuestion(client, "s").run(DATABASE, abort=abort)
            assert output.text == ABORTED
            assert await client.list_pending("s") == [], f"{when}: pending after the tool said ASK_ABORTED"

    try:
        asyncio.run(scenario())
    finally:
        follower.close()
