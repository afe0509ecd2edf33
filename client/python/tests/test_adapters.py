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


def test_pydantic_ai_tool_through_an_agent_run(answered: Server) -> None:
    from pydantic_ai import Agent
    from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart, ToolReturnPart
    from pydantic_ai.models.function import AgentInfo, FunctionModel

    from askgate.adapters.pydantic_ai import ask_user_question_tool

    returned = []

    def model(messages, info: AgentInfo) -> ModelResponse:  # type: ignore[no-untyped-def]
        results = [
            part for message in messages for part in getattr(message, "parts", [])
            if isinstance(part, ToolReturnPart)
        ]
        if not results:
            assert [t.name for t in info.function_tools] == ["ask_user_question"]
            return ModelResponse(parts=[ToolCallPart(tool_name="ask_user_question", args=DATABASE)])
        returned.extend(part.content for part in results)
        return ModelResponse(parts=[TextPart("done")])

    async def scenario() -> None:
        async with AsyncClient(answered.addr) as client:
            agent = Agent(FunctionModel(model), tools=[ask_user_question_tool(client, "s")])
            result = await agent.run("Pick a database.")
            assert result.output == "done"

    asyncio.run(scenario())
    assert returned == [ANSWER]


def test_claude_agent_sdk_can_use_tool(answered: Server) -> None:
    from claude_agent_sdk import PermissionResultAllow, ToolPermissionContext

    from askgate.adapters.claude_agent_sdk import can_use_tool

    claude_input = {
        "questions": [
            {"question": "Which database?", "header": "DB", "multiSelect": False,
             "options": [{"label": "Postgres", "description": "relational"}, {"label": "SQLite", "description": ""}]},
        ]
    }

    async def scenario() -> None:
        async with AsyncClient(answered.addr) as client:
            decide = can_use_tool(client, "s", permissions=True)
            result = await decide("AskUserQuestion", claude_input, ToolPermissionContext())
            assert result == PermissionResultAllow(
                updated_input={**claude_input, "answers": {"Which database?": "Postgres"}}
            )
            approval = await decide("Bash", {"command": "ls"}, ToolPermissionContext())
            assert approval == PermissionResultAllow()  # the bot picks "Allow once"
            untouched = await can_use_tool(client, "s")("Bash", {"command": "ls"}, ToolPermissionContext())
            assert untouched == PermissionResultAllow()

    asyncio.run(scenario())
