"""`ask_user_question` as an OpenAI Agents SDK function tool.

    from agents import Agent
    from askgate import AsyncClient
    from askgate.adapters.openai_agents import ask_user_question_tool

    agent = Agent(name="planner", tools=[ask_user_question_tool(AsyncClient(), "session-1")])
"""

from __future__ import annotations

from typing import Any, Optional

from agents import FunctionTool
from agents.tool_context import ToolContext

from .._async.client import AsyncClient
from ..tool import DESCRIPTION, NAME, AsyncAskUserQuestion, input_schema


def ask_user_question_tool(
    client: AsyncClient, session_id: str, *, timeout: Optional[float] = None
) -> FunctionTool:
    """A `FunctionTool` whose calls ask through askgate in `session_id`; the model gets
    the tool result text (the answers as compact JSON, or `Error: ...`). A run
    cancelled while it waits resolves the ask ABORTED."""
    executor = AsyncAskUserQuestion(client, session_id, timeout=timeout)

    async def invoke(context: ToolContext[Any], arguments: str) -> str:
        return (await executor.run(arguments)).text

    return FunctionTool(
        name=NAME,
        description=DESCRIPTION,
        params_json_schema=input_schema(),
        on_invoke_tool=invoke,
        # Optional fields (header, options, multi_select) do not fit strict mode.
        strict_json_schema=False,
    )
