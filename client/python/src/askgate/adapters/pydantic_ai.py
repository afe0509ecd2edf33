"""`ask_user_question` as a Pydantic AI tool.

    from pydantic_ai import Agent
    from askgate import AsyncClient
    from askgate.adapters.pydantic_ai import ask_user_question_tool

    agent = Agent("openai:gpt-5", tools=[ask_user_question_tool(AsyncClient(), "session-1")])
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional

from pydantic_ai import Tool

from .._async.client import AsyncClient
from ..tool import DESCRIPTION, NAME, AsyncAskUserQuestion, input_schema


def ask_user_question_tool(
    client: AsyncClient, session_id: str, *, timeout: Optional[float] = None
) -> Tool[Any]:
    """A `Tool` whose calls ask through askgate in `session_id`; the model gets the tool
    result text."""
    executor = AsyncAskUserQuestion(client, session_id, timeout=timeout)

    async def ask_user_question(questions: List[Dict[str, Any]]) -> str:
        return (await executor.run({"questions": questions})).text

    return Tool.from_schema(ask_user_question, name=NAME, description=DESCRIPTION, json_schema=input_schema())
