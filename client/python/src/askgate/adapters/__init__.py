"""Adapters that hand the `ask_user_question` tool to agent frameworks, each importing
its framework only when used (install the matching extra, e.g.
`pip install 'askgate[openai-agents]'`):

- `askgate.adapters.openai_agents`: an OpenAI Agents SDK `FunctionTool`;
- `askgate.adapters.anthropic`: the Messages API tool definition and a `tool_use` handler;
- `askgate.adapters.langchain`: a LangChain / LangGraph `StructuredTool`.
"""
