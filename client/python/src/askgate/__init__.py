"""askgate: AI agents ask humans structured questions and wait for the answer.

    from askgate import Ask, Client, question

    with Client() as client:                   # ASKGATE_ADDR, ASKGATE_TOKEN
        result = client.ask(Ask("s-1", [
            question("db", "Which database?", options=["Postgres (Recommended)", "SQLite"]),
        ], timeout=300))
        print(result.answers[0].selected)

`AsyncClient` has the same methods for asyncio. Failures raise `AskgateError`, whose
`reason` is a `Reason`. `askgate.tool` is the model-facing `ask_user_question` tool;
`askgate.receipts` checks a receipt before an approved action runs.
"""

from ._async.client import AsyncClient
from ._async.runtime import AsyncAgentLease
from ._sync.client import Client
from ._sync.runtime import AgentLease
from ._errors import AskgateError, Reason
from ._model import (
    DEFAULT_REATTACH_GRACE,
    DEFAULT_RETRY_BUDGET,
    TTL_SLACK,
    Action,
    Answer,
    Approvers,
    Ask,
    AskResult,
    Event,
    custom,
    option,
    question,
    select,
    skip,
)

__version__ = "0.1.0"

__all__ = [
    "DEFAULT_REATTACH_GRACE",
    "DEFAULT_RETRY_BUDGET",
    "TTL_SLACK",
    "Action",
    "AgentLease",
    "Answer",
    "Approvers",
    "Ask",
    "AskResult",
    "AskgateError",
    "AsyncAgentLease",
    "AsyncClient",
    "Client",
    "Event",
    "Reason",
    "custom",
    "option",
    "question",
    "select",
    "skip",
]
