"""`ask_user_question` for Anthropic's Messages API tool use.

    import anthropic
    from askgate import Client
    from askgate.adapters.anthropic import AskUserQuestionHandler, tool_param

    handler = AskUserQuestionHandler(Client(), "session-1")
    message = anthropic.Anthropic().messages.create(..., tools=[tool_param()])
    results = [handler.handle(block) for block in message.content if block.type == "tool_use"
               and block.name == handler.name]
    # send `results` back as the next user message's content
"""

from __future__ import annotations

import json
from typing import Any, Dict, Optional

from anthropic.types import ToolParam, ToolResultBlockParam, ToolUseBlock

from .._async.client import AsyncClient
from .._sync.client import Client
from ..tool import NAME, AskUserQuestion, AsyncAskUserQuestion, ToolOutput, definition


def tool_param() -> ToolParam:
    """The tool definition for `messages.create(tools=[...])`."""
    return definition()  # type: ignore[return-value]


def _result(block: ToolUseBlock, output: ToolOutput) -> ToolResultBlockParam:
    result: Dict[str, Any] = {"type": "tool_result", "tool_use_id": block.id, "content": output.text}
    if output.error is not None:
        result["is_error"] = True
    return result  # type: ignore[return-value]


class AskUserQuestionHandler:
    """Answers `ask_user_question` tool_use blocks through askgate (sync client)."""

    name = NAME

    def __init__(self, client: Client, session_id: str, *, timeout: Optional[float] = None) -> None:
        self._executor = AskUserQuestion(client, session_id, timeout=timeout)

    def handle(self, block: ToolUseBlock) -> ToolResultBlockParam:
        return _result(block, self._executor.run(json.dumps(block.input)))


class AsyncAskUserQuestionHandler:
    """As `AskUserQuestionHandler`, with an `AsyncClient`."""

    name = NAME

    def __init__(self, client: AsyncClient, session_id: str, *, timeout: Optional[float] = None) -> None:
        self._executor = AsyncAskUserQuestion(client, session_id, timeout=timeout)

    async def handle(self, block: ToolUseBlock) -> ToolResultBlockParam:
        return _result(block, await self._executor.run(json.dumps(block.input)))
