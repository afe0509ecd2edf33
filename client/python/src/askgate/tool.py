"""The model-facing `ask_user_question` tool: its definition (the same name,
description and JSON Schema as every askgate SDK and `askgate mcp`) and executors that
ask through askgate and return the tool result text.

    from askgate import Client
    from askgate.tool import AskUserQuestion, definition

    tool = definition()                       # {name, description, input_schema}
    executor = AskUserQuestion(Client(), "session-1")
    output = executor.run(arguments_json)     # when the model calls the tool
    model_reads = output.text                 # answers as compact JSON, or "Error: ..."
    if output.error:                          # the failure as data
        route(output.error.reason)
"""

from __future__ import annotations

import asyncio
import json
import threading
from dataclasses import dataclass
from importlib import resources
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Union

import grpc

from ._errors import AskgateError, Reason
from ._model import Action, Answer, Ask, answers_json
from .v1 import askgate_pb2 as pb

if TYPE_CHECKING:
    from ._async.client import AsyncClient
    from ._sync.client import Client

_DEFINITION: Dict[str, Any] = json.loads(
    resources.files("askgate").joinpath("ask_user_question.json").read_text(encoding="utf-8")
)

#: The tool's name, as the model sees it.
NAME: str = _DEFINITION["name"]
#: What the model reads about the tool.
DESCRIPTION: str = _DEFINITION["description"]

#: The fixed texts of these failures (docs/protocol.md "Errors").
EMPTY_QUESTIONS_TEXT = "ask_user_question requires at least one question"
ASK_ABORTED_TEXT = "ask_user_question was aborted before the user answered"
# How long an aborted synchronous run waits for its Ask to end (the abort resolves it,
# or the server refuses it on arrival).
ABORT_WAIT = 5.0


def input_schema() -> Dict[str, Any]:
    """The JSON Schema of the tool's arguments; unknown fields are refused."""
    return json.loads(json.dumps(_DEFINITION["input_schema"]))


def definition() -> Dict[str, Any]:
    """`{name, description, input_schema}` (Anthropic's tool shape; adapters reshape it)."""
    return {"name": NAME, "description": DESCRIPTION, "input_schema": input_schema()}


@dataclass(frozen=True)
class ToolError:
    """A failed call: askgate's reason and the gRPC code."""

    reason: Reason
    code: grpc.StatusCode

    @property
    def name(self) -> str:
        return self.reason.value


@dataclass(frozen=True)
class ToolOutput:
    """The text the model reads and, for a failure, the failure as data."""

    text: str
    error: Optional[ToolError] = None

    @classmethod
    def answered(cls, answers: List[Answer]) -> "ToolOutput":
        return cls(answers_text(answers))

    @classmethod
    def failed(cls, reason: Reason, code: grpc.StatusCode, message: str) -> "ToolOutput":
        return cls(f"Error: {message}", ToolError(reason, code))

    @classmethod
    def of_error(cls, error: AskgateError) -> "ToolOutput":
        return cls.failed(error.reason, error.code, error.message)


def answers_text(answers: List[Answer]) -> str:
    """The answers as the compact JSON the model receives:
    `{"answers":[{"id":"db","selected":["Postgres"]}]}` (`custom` only when given)."""
    return json.dumps({"answers": answers_json(answers)}, separators=(",", ":"), ensure_ascii=False)


_QUESTION_FIELDS = {"id", "question", "header", "options", "multi_select"}
_OPTION_FIELDS = {"label", "description"}


@dataclass(frozen=True)
class ToolAsk:
    """The model's arguments as an ask: its questions, and the action they approve
    (when they ask permission for one), which a receipt binds and the tenant's policy
    may decide."""

    questions: List[pb.Question]
    action: Optional[Action] = None


def parse_ask(arguments: Union[str, Dict[str, Any]]) -> ToolAsk:
    """The ask of the model's arguments (JSON text or a parsed object). Raises
    `ValueError` with the reason: `BAD_REQUEST` (not the schema's shape, unknown fields
    included) or `EMPTY_QUESTIONS`."""
    try:
        data = json.loads(arguments) if isinstance(arguments, str) else arguments
    except json.JSONDecodeError as e:
        raise _invalid(f"not JSON: {e}") from None
    if not isinstance(data, dict):
        raise _invalid("expected an object")
    unknown = set(data) - {"questions", "action"}
    if unknown:
        raise _unknown("", sorted(unknown)[0])
    questions = data.get("questions", [])
    if not isinstance(questions, list):
        raise _invalid("`questions` must be an array")
    if not questions:
        raise _Refusal(Reason.EMPTY_QUESTIONS, EMPTY_QUESTIONS_TEXT)
    parsed = [_question(i, q) for i, q in enumerate(questions)]
    return ToolAsk(parsed, _action(data["action"]) if "action" in data else None)


def parse_arguments(arguments: Union[str, Dict[str, Any]]) -> List[pb.Question]:
    """The questions of the model's arguments, as `parse_ask` reads them (without the
    action: use `parse_ask` to ask with it)."""
    return parse_ask(arguments).questions


def _action(data: Any) -> Action:
    if not isinstance(data, dict):
        raise _invalid("action must be an object")
    unknown = set(data) - {"name", "arguments"}
    if unknown:
        raise _unknown("action.", sorted(unknown)[0])
    if not isinstance(data.get("name"), str):
        raise _invalid("action.name must be a string")
    arguments = data.get("arguments", {})
    if not isinstance(arguments, dict):
        raise _invalid("action.arguments must be an object")
    return Action.of(data["name"], arguments)


class _Refusal(ValueError):
    def __init__(self, reason: Reason, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message


def _invalid(why: str) -> _Refusal:
    return _Refusal(Reason.BAD_REQUEST, f"invalid arguments: {why}")


def _unknown(at: str, name: str) -> _Refusal:
    """A field the schema does not define, named by its path (as every askgate SDK does)."""
    return _invalid(f"{at}{name}: unknown field `{name}`")


def _question(i: int, data: Any) -> pb.Question:
    if not isinstance(data, dict):
        raise _invalid(f"questions[{i}] must be an object")
    unknown = set(data) - _QUESTION_FIELDS
    if unknown:
        raise _unknown(f"questions[{i}].", sorted(unknown)[0])
    for required in ("id", "question"):
        if not isinstance(data.get(required), str):
            raise _invalid(f"questions[{i}].{required} must be a string")
    options = data.get("options", [])
    if not isinstance(options, list):
        raise _invalid(f"questions[{i}].options must be an array")
    built = []
    for j, opt in enumerate(options):
        if not isinstance(opt, dict) or not isinstance(opt.get("label"), str):
            raise _invalid(f"questions[{i}].options[{j}] needs a string label")
        unknown = set(opt) - _OPTION_FIELDS
        if unknown:
            raise _unknown(f"questions[{i}].options[{j}].", sorted(unknown)[0])
        description = opt.get("description")
        if description is not None and not isinstance(description, str):
            raise _invalid(f"questions[{i}].options[{j}].description must be a string")
        built.append(pb.QuestionOption(label=opt["label"], description=description))
    header = data.get("header")
    if header is not None and not isinstance(header, str):
        raise _invalid(f"questions[{i}].header must be a string")
    multi = data.get("multi_select", False)
    if not isinstance(multi, bool):
        raise _invalid(f"questions[{i}].multi_select must be a boolean")
    return pb.Question(
        id=data["id"], question=data["question"], header=header, options=built, multi_select=multi
    )


def _prepare(session_id: str, arguments: Union[str, Dict[str, Any]], timeout: Optional[float]) -> Union[Ask, ToolOutput]:
    try:
        asked = parse_ask(arguments)
    except _Refusal as refused:
        return ToolOutput.failed(refused.reason, grpc.StatusCode.INVALID_ARGUMENT, refused.message)
    return Ask(session_id, asked.questions, timeout=timeout, action=asked.action)


class AskUserQuestion:
    """Executes `ask_user_question` calls for one session with a `Client`."""

    def __init__(self, client: "Client", session_id: str, *, timeout: Optional[float] = None) -> None:
        self.client, self.session_id, self.timeout = client, session_id, timeout

    def run(
        self,
        arguments: Union[str, Dict[str, Any]],
        abort: Optional[threading.Event] = None,
    ) -> ToolOutput:
        """Asks and waits. Setting `abort` (the agent's turn was interrupted) resolves the
        ask ABORTED at once and gives the fixed aborted text."""
        prepared = _prepare(self.session_id, arguments, self.timeout)
        if isinstance(prepared, ToolOutput):
            return prepared
        if abort is not None and abort.is_set():
            return _aborted()
        outcome: List[ToolOutput] = []
        done = threading.Event()

        def call() -> None:
            try:
                result = self.client.ask(prepared)
                outcome.append(ToolOutput.answered(result.answers))
            except AskgateError as error:
                outcome.append(ToolOutput.of_error(error))
            finally:
                done.set()

        threading.Thread(target=call, daemon=True).start()
        while not done.wait(0.05):
            if abort is not None and abort.is_set():
                # Resolves the pending ask, or (when the abort overtakes the Ask) makes the
                # server refuse it on arrival; the call then ends at once, and is waited
                # for, so no question outlives the aborted text.
                _quietly(lambda: self.client.abort(self.session_id, prepared.request_id))
                done.wait(ABORT_WAIT)
                return _aborted()
        return outcome[0]

    def __call__(self, arguments: Union[str, Dict[str, Any]]) -> str:
        return self.run(arguments).text


class AsyncAskUserQuestion:
    """Executes `ask_user_question` calls for one session with an `AsyncClient`.
    Cancelling the task (or setting `abort`) resolves the ask ABORTED at once."""

    def __init__(self, client: "AsyncClient", session_id: str, *, timeout: Optional[float] = None) -> None:
        self.client, self.session_id, self.timeout = client, session_id, timeout

    async def run(
        self,
        arguments: Union[str, Dict[str, Any]],
        abort: Optional[asyncio.Event] = None,
    ) -> ToolOutput:
        prepared = _prepare(self.session_id, arguments, self.timeout)
        if isinstance(prepared, ToolOutput):
            return prepared
        if abort is not None and abort.is_set():
            return _aborted()
        call = asyncio.ensure_future(self.client.ask(prepared))
        waits = [call]
        aborted = asyncio.ensure_future(abort.wait()) if abort is not None else None
        if aborted is not None:
            waits.append(aborted)  # type: ignore[arg-type]
        try:
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            call.cancel()
            await self._abort(prepared.request_id)
            raise
        finally:
            if aborted is not None:
                aborted.cancel()
        if call.done():
            try:
                return ToolOutput.answered(call.result().answers)
            except AskgateError as error:
                return ToolOutput.of_error(error)
        call.cancel()
        await self._abort(prepared.request_id)
        return _aborted()

    async def _abort(self, request_id: str) -> None:
        try:
            await asyncio.shield(self.client.abort(self.session_id, request_id))
        except AskgateError:
            pass


def _aborted() -> ToolOutput:
    return ToolOutput.failed(Reason.ASK_ABORTED, grpc.StatusCode.CANCELLED, ASK_ABORTED_TEXT)


def _quietly(action) -> None:  # type: ignore[no-untyped-def]
    try:
        action()
    except AskgateError:
        pass
