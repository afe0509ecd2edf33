"""A Claude Agent SDK `can_use_tool` handler that routes Claude's `AskUserQuestion`
(and, optionally, its tool-permission prompts) through askgate, so that a remote human
answers them.

    from claude_agent_sdk import ClaudeAgentOptions, query
    from askgate import AsyncClient
    from askgate.adapters.claude_agent_sdk import can_use_tool

    options = ClaudeAgentOptions(can_use_tool=can_use_tool(AsyncClient(), "session-1"))

The answers go back the way Claude expects them: the tool's input plus `answers`, keyed
by question text (the chosen labels joined with ", ", then the human's own words). A
cancel denies the tool with the human's reason.
"""

from __future__ import annotations

from typing import Any, Awaitable, Callable, Dict, List, Optional, Union

from claude_agent_sdk import PermissionResultAllow, PermissionResultDeny, ToolPermissionContext

from .._async.client import AsyncClient
from .._errors import AskgateError, Reason
from .._model import Answer, Ask, option, question

PermissionResult = Union[PermissionResultAllow, PermissionResultDeny]
CanUseTool = Callable[[str, Dict[str, Any], ToolPermissionContext], Awaitable[PermissionResult]]

ALLOW_ONCE = "Allow once"
DENY = "Deny"


def can_use_tool(
    client: AsyncClient,
    session_id: str,
    *,
    permissions: bool = False,
    timeout: Optional[float] = None,
) -> CanUseTool:
    """The callback. With `permissions`, other tools' approvals are asked too ("Allow
    once" / "Deny", the tool input as detail); without, they are allowed as Claude's own
    permission settings decide (the callback only runs for tools that need asking)."""

    async def decide(tool_name: str, tool_input: Dict[str, Any], context: ToolPermissionContext) -> PermissionResult:
        if tool_name == "AskUserQuestion":
            return await _ask_user_question(client, session_id, tool_input, timeout)
        if not permissions:
            return PermissionResultAllow()
        return await _approve(client, session_id, tool_name, tool_input, timeout)

    return decide


async def _ask_user_question(
    client: AsyncClient, session_id: str, tool_input: Dict[str, Any], timeout: Optional[float]
) -> PermissionResult:
    questions = tool_input.get("questions") or []
    ask = Ask(
        session_id,
        [
            question(
                f"q{i + 1}",
                q["question"],
                header=q.get("header") or None,
                options=[option(o["label"], o.get("description") or None) for o in q.get("options", [])],
                multi_select=bool(q.get("multiSelect")),
            )
            for i, q in enumerate(questions)
        ],
        timeout=timeout,
        labels={"source": "claude-agent-sdk"},
    )
    try:
        result = await client.ask(ask)
    except AskgateError as error:
        return _denied(error)
    answers: Dict[str, str] = {}
    for answer, asked in zip(result.answers, questions):
        text = _joined(answer)
        if text:
            answers[asked["question"]] = text
    return PermissionResultAllow(updated_input={**tool_input, "answers": answers})


async def _approve(
    client: AsyncClient, session_id: str, tool_name: str, tool_input: Dict[str, Any], timeout: Optional[float]
) -> PermissionResult:
    import json

    ask = Ask(
        session_id,
        [
            question(
                "permission",
                f"Allow Claude to use {tool_name}?",
                header="Permission",
                detail=json.dumps(tool_input, indent=2)[: 60 * 1024],
                options=[ALLOW_ONCE, DENY],
            )
        ],
        timeout=timeout,
        labels={"source": "claude-agent-sdk", "tool": tool_name},
    )
    try:
        result = await client.ask(ask)
    except AskgateError as error:
        return _denied(error)
    answer = result.answers[0]
    if ALLOW_ONCE in answer.selected:
        return PermissionResultAllow()
    return PermissionResultDeny(message=answer.custom or f"{result.resolved_by} denied it through askgate")


def _joined(answer: Answer) -> str:
    parts: List[str] = list(answer.selected)
    if answer.custom:
        parts.append(answer.custom)
    return ", ".join(parts)


def _denied(error: AskgateError) -> PermissionResultDeny:
    if error.reason is Reason.ASK_CANCELLED:
        reason = error.metadata.get("reason")
        message = f"The user cancelled the question: {reason}" if reason else "The user cancelled the question"
        return PermissionResultDeny(message=message)
    return PermissionResultDeny(message=f"Error: {error.message}")
