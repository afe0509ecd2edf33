"""`ask_user_question` as a LangChain / LangGraph tool.

    from askgate import AsyncClient, Client
    from askgate.adapters.langchain import ask_user_question_tool

    tool = ask_user_question_tool(Client(), "session-1", async_client=AsyncClient())
    llm.bind_tools([tool]); ToolNode([tool])      # LangGraph
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional

from langchain_core.tools import StructuredTool

from .._async.client import AsyncClient
from .._sync.client import Client
from ..tool import DESCRIPTION, NAME, AskUserQuestion, AsyncAskUserQuestion, input_schema


def ask_user_question_tool(
    client: Client,
    session_id: str,
    *,
    async_client: Optional[AsyncClient] = None,
    timeout: Optional[float] = None,
) -> StructuredTool:
    """A `StructuredTool` whose calls ask through askgate in `session_id` (`invoke`
    with `client`, `ainvoke` with `async_client` when given); the result is the tool
    result text."""
    sync = AskUserQuestion(client, session_id, timeout=timeout)
    concurrent = (
        AsyncAskUserQuestion(async_client, session_id, timeout=timeout) if async_client else None
    )

    def ask(questions: List[Dict[str, Any]]) -> str:
        return sync.run({"questions": questions}).text

    async def aask(questions: List[Dict[str, Any]]) -> str:
        if concurrent is None:
            raise RuntimeError("ask_user_question_tool(async_client=...) is needed for ainvoke")
        return (await concurrent.run({"questions": questions})).text

    return StructuredTool.from_function(
        func=ask,
        coroutine=aask,
        name=NAME,
        description=DESCRIPTION,
        args_schema=input_schema(),
        infer_schema=False,
    )
