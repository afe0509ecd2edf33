"""Adapters that hand the `ask_user_question` tool to agent frameworks, each importing
its framework only when used (install the matching extra, e.g.
`pip install './client/python[openai-agents]'` from the repository):

- `askgate.adapters.openai_agents`: an OpenAI Agents SDK `FunctionTool`;
- `askgate.adapters.anthropic`: the Messages API tool definition and a `tool_use` handler;
- `askgate.adapters.langchain`: a LangChain / LangGraph `StructuredTool`;
- `askgate.adapters.pydantic_ai`: a Pydantic AI `Tool`;
- `askgate.adapters.claude_agent_sdk`: a Claude Agent SDK `can_use_tool` handler for
  `AskUserQuestion` (and, optionally, tool approvals).
"""
