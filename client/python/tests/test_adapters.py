"""Each adapter through its framework's own tool object, against a real askgate with
`askgate bot` answering: what the framework hands back to the model."""

from __future__ import annotations

import asyncio
import json
import subprocess
from typing import Iterator

import pytest

from askgate import AsyncClient, Client
from conftest import ASKGATE, Server, eventually

ANSWER = '{"answers":[{"id":"db","selected":["Postgres"]}]}'
DATABASE = {
    "questions": [
        {"id": "db", "question": "Which database?", "options": [{"label": "Postgres"}, {"label": "SQLite"}]}
    ]
}


@pytest.fixture
def answered(server: Server) -> Iterator[Server]:
    """The server, with `askgate bot` answering session "s" (once it follows it)."""
    bot = subprocess.Popen(
        [ASKGATE, "bot", "--addr", server.addr, "--session", "s", "--policy", "first"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    from askgate import Ask, AskgateError, Reason, question

    def following() -> bool:
        with Client(server.addr) as client:
            try:
                client.ask(Ask("s", [question("probe", "Ready?", options=["yes"])], timeout=5))
                return True
            except AskgateError as error:
                if error.reason is Reason.NO_PROVIDER:
                    return False
                raise

    eventually("the bot to follow the session", following)
    yield server
    bot.kill()
    bot.wait()


def test_openai_agents_function_tool(answered: Server) -> None:
    from agents import FunctionTool
    from agents.tool_context import ToolContext

    from askgate.adapters.openai_agents import ask_user_question_tool

    async def scenario() -> None:
        async with AsyncClient(answered.addr) as client:
            tool = ask_user_question_tool(client, "s")
            assert isinstance(tool, FunctionTool) and tool.name == "ask_user_question"
            arguments = json.dumps(DATABASE)
            context = ToolContext(
                context=None, tool_name=tool.name, tool_call_id="call_1", tool_arguments=arguments
            )
            assert await tool.on_invoke_tool(context, arguments) == ANSWER
            empty = await tool.on_invoke_tool(context, "{}")
            assert empty == "Error: ask_user_question requires at least one question"

    asyncio.run(scenario())


def test_anthropic_tool_use(answered: Server) -> None:
    from anthropic.types import ToolUseBlock

    from askgate.adapters.anthropic import AskUserQuestionHandler, tool_param

    assert tool_param()["name"] == "ask_user_question"
    with Client(answered.addr) as client:
        handler = AskUserQuestionHandler(client, "s")
        block = ToolUseBlock(id="toolu_1", name="ask_user_question", input=DATABASE, type="tool_use")
        assert handler.handle(block) == {"type": "tool_result", "tool_use_id": "toolu_1", "content": ANSWER}
        refused = handler.handle(
            ToolUseBlock(id="toolu_2", name="ask_user_question", input={}, type="tool_use")
        )
        assert refused["is_error"] is True


def test_langchain_structured_tool(answered: Server) -> None:
    from langchain_core.tools import BaseTool

    from askgate.adapters.langchain import ask_user_question_tool

    async def scenario() -> None:
        async with AsyncClient(answered.addr) as async_client:
            with Client(answered.addr) as client:
                tool = ask_user_question_tool(client, "s", async_client=async_client)
                assert isinstance(tool, BaseTool) and tool.name == "ask_user_question"
                assert tool.invoke(DATABASE) == ANSWER
                assert await tool.ainvoke(DATABASE) == ANSWER

    asyncio.run(scenario())
