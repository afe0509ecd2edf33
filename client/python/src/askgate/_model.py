"""Building a batch of questions and reading what comes back."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Sequence, Union

from .v1 import askgate_pb2 as pb

#: The W3C headers of a trace context.
TRACE_HEADERS = ("traceparent", "tracestate")


def current_trace_context() -> List[tuple[str, str]]:
    """The W3C trace context of the current OpenTelemetry context, as the global
    propagator writes it; empty without `opentelemetry-api` or a recording span."""
    try:
        from opentelemetry import propagate
    except ImportError:
        return []
    carrier: dict[str, str] = {}
    propagate.inject(carrier)
    return [(name, value) for name, value in carrier.items() if name in TRACE_HEADERS]

#: How long a question stays answerable after the asking call went away (a broken
#: connection, a restarted worker), so that a retry with the same request_id picks
#: the answer up. The Rust client's default too.
DEFAULT_REATTACH_GRACE = 10.0
#: How long `ask` keeps retrying while every attempt fails (the node drains, the server
#: is unreachable); the ask's timeout bounds it too.
DEFAULT_RETRY_BUDGET = 60.0
#: How much longer than an ask's own lifetime (`Ask.ttl`) its call waits, so that the
#: outcome (DEFAULTED or EXPIRED) reaches it. The Rust client's too.
TTL_SLACK = 5.0


def option(label: str, description: Optional[str] = None) -> pb.QuestionOption:
    """An option; end the label with " (Recommended)" to mark the one you recommend."""
    return pb.QuestionOption(label=label, description=description)


def question(
    id: str,
    text: str,
    *,
    header: Optional[str] = None,
    detail: Optional[str] = None,
    options: Iterable[pb.QuestionOption | str] = (),
    multi_select: bool = False,
    plan_review: Optional[str] = None,
    secret: bool = False,
) -> pb.Question:
    """A question (id unique within the ask). Options may be labels or `option(...)`;
    none makes a free-text question. `plan_review` names the approving option of a
    plan under review (the plan goes in `detail`). `secret`: the answer reaches this
    ask's caller only (docs/approvals.md)."""
    built = pb.Question(
        id=id,
        question=text,
        header=header,
        detail=detail,
        options=[option(o) if isinstance(o, str) else o for o in options],
        multi_select=multi_select,
        secret=secret,
    )
    if plan_review is not None:
        built.intent.plan_review.approve = plan_review
    return built


def select(id: str, *labels: str) -> pb.QuestionAnswer:
    """An answer choosing these option labels."""
    return pb.QuestionAnswer(id=id, selected=list(labels))


def custom(id: str, text: str) -> pb.QuestionAnswer:
    """An answer in the human's own words."""
    return pb.QuestionAnswer(id=id, custom=text)


def skip(id: str) -> pb.QuestionAnswer:
    """An explicit skip of one question."""
    return pb.QuestionAnswer(id=id)


@dataclass(frozen=True)
class Answer:
    """One question's answer, normalised by the server."""

    id: str
    selected: List[str]
    custom: Optional[str] = None

    @classmethod
    def of(cls, answer: pb.QuestionAnswer) -> "Answer":
        return cls(
            id=answer.id,
            selected=list(answer.selected),
            custom=answer.custom if answer.HasField("custom") else None,
        )


def answers_json(
    answers: Sequence[Union[Answer, pb.QuestionAnswer]],
    is_secret: Callable[[str], bool] = lambda _: False,
) -> List[Dict[str, Any]]:
    """The answers JSON every askgate surface writes (pinned across the SDKs by
    tests/contract/vectors.json): `{"id", "selected", "custom"?}` per answer, `custom`
    only when own words were given, or `{"id", "secret": true}` for a question
    `is_secret` names (a receipt never carries a secret, nor a hash of one)."""
    entries: List[Dict[str, Any]] = []
    for answer in answers:
        if is_secret(answer.id):
            entries.append({"id": answer.id, "secret": True})
            continue
        entry: Dict[str, Any] = {"id": answer.id, "selected": list(answer.selected)}
        if isinstance(answer, Answer):
            custom = answer.custom
        else:
            custom = answer.custom if answer.HasField("custom") else None
        if custom is not None:
            entry["custom"] = custom
        entries.append(entry)
    return entries


@dataclass(frozen=True)
class Action:
    """What an approval is for: a tool or operation and its exact arguments (any JSON
    value, or a JSON text in `arguments_json`), and the answers that approve it
    (`approving_answers`; by default the first option of the first question). Numbers
    in the arguments must be exact in a double (I-JSON): send larger integers and
    finer decimals as strings."""

    name: str
    arguments_json: str
    approving_answers: Sequence[pb.QuestionAnswer] = ()

    @classmethod
    def of(
        cls, name: str, arguments: object, approving_answers: Sequence[pb.QuestionAnswer] = ()
    ) -> "Action":
        """An action from its arguments as a JSON value."""
        import json

        return cls(name, json.dumps(arguments), tuple(approving_answers))


@dataclass(frozen=True)
class Approvers:
    """Who alone may answer an ask: `subjects` (credential subjects or channel
    identities: `"ana"`, `"slack:T1/U2"`, `"telegram:42"`, `"email:ana@example.org"`)
    and `groups` (a credential's groups). With `cancel_too`, only they may cancel it
    too. Anyone else gets NOT_AN_APPROVER."""

    subjects: Sequence[str] = ()
    groups: Sequence[str] = ()
    cancel_too: bool = False


@dataclass(frozen=True)
class AskResult:
    """A resolved ask: its rpc_id, one answer per question in question order, who
    answered, how (`"ANSWERED"`, or `"DEFAULTED"` when its lifetime ended and its
    default answers apply: never reported as answered, or `"ALLOWED_BY_POLICY"` when
    the tenant's policy allowed its action and nobody was asked), every approver, and for an ask
    with an action the server's signed receipt (see `askgate.receipts`)."""

    rpc_id: str
    answers: List[Answer]
    resolved_by: str
    resolution: str = "ANSWERED"
    approvers: List[str] = field(default_factory=list)
    receipt: str = ""


@dataclass
class Ask:
    """One Ask: a batch of questions for a session, and how to wait for it.

    By default it carries a fresh `request_id` and a reattach grace, and the client
    retries a call that failed because the node drained or the server was unreachable,
    with the same request_id: the retry joins the same pending ask, or gets the human's
    answer if it came meanwhile."""

    session_id: str
    questions: Sequence[pb.Question]
    timeout: Optional[float] = None
    hold: bool = False
    agent: Optional[tuple[str, str]] = None
    request_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    reattach_grace: float = DEFAULT_REATTACH_GRACE
    labels: Mapping[str, str] = field(default_factory=dict)
    retry: bool = True
    retry_for: float = DEFAULT_RETRY_BUDGET
    #: Reminders and escalation while pending (`pb.NotifyPolicy`, milliseconds); None:
    #: the server's default.
    notify: Optional[pb.NotifyPolicy] = None
    #: The action the answer approves, bound to the resolution by a receipt.
    action: Optional[Action] = None
    #: Resolve only when this many (2 to 10) distinct subjects gave the same answers.
    quorum: Optional[int] = None
    #: What the ask resolves with (as DEFAULTED) when its lifetime ends unanswered.
    default_answers: Sequence[pb.QuestionAnswer] = ()
    #: The only channels that may resolve it (e.g. "console", "tui"); empty: any.
    allowed_channels: Sequence[str] = ()
    #: The ask's own lifetime in seconds from registration; the call waits a little
    #: beyond it (`TTL_SLACK`).
    ttl: Optional[float] = None
    #: Only these people may answer it; anyone else gets NOT_AN_APPROVER.
    approvers: Optional[Approvers] = None
    #: What happens while it stays unanswered (`pb.EscalationStep`s, in time order):
    #: each widens or replaces who may answer and notifies more channel connections.
    escalation: Sequence[pb.EscalationStep] = ()
    #: The W3C trace context of the caller's span (`traceparent`, and `tracestate`):
    #: the ask's span on the server (the human's wait) becomes its child. Unset: the
    #: current OpenTelemetry context, when `opentelemetry-api` is installed (the
    #: `opentelemetry` extra).
    traceparent: Optional[str] = None
    tracestate: Optional[str] = None

    def trace_metadata(self) -> List[tuple[str, str]]:
        """The call's trace context headers: the ones given, else the current
        OpenTelemetry context's (never its baggage)."""
        if self.traceparent:
            given = [("traceparent", self.traceparent)]
            return given + ([("tracestate", self.tracestate)] if self.tracestate else [])
        return current_trace_context()

    def wait(self) -> Optional[float]:
        """How long the call waits: its timeout, stretched past the ask's lifetime."""
        if self.ttl is None:
            return self.timeout
        lifetime = self.ttl + TTL_SLACK
        return lifetime if self.timeout is None else max(self.timeout, lifetime)

    def request(self) -> pb.AskRequest:
        request = pb.AskRequest(
            session_id=self.session_id,
            questions=list(self.questions),
            request_id=self.request_id,
            reattach_grace_ms=int(self.reattach_grace * 1000),
            labels=dict(self.labels),
            if_unattended=pb.HOLD if self.hold else pb.FAIL,
        )
        if self.agent is not None:
            request.agent.agent_id, request.agent.incarnation = self.agent
        if self.notify is not None:
            request.notify.CopyFrom(self.notify)
        if self.action is not None:
            request.action.name = self.action.name
            request.action.arguments_json = self.action.arguments_json
            request.action.approving_answers.extend(self.action.approving_answers)
        if self.quorum is not None:
            request.quorum.count = self.quorum
        request.default_answers.extend(self.default_answers)
        request.allowed_channels.extend(self.allowed_channels)
        if self.ttl is not None:
            request.ttl_ms = int(self.ttl * 1000)
        if self.approvers is not None:
            request.approvers.subjects.extend(self.approvers.subjects)
            request.approvers.groups.extend(self.approvers.groups)
            request.approvers.cancel_too = self.approvers.cancel_too
        request.escalation.extend(self.escalation)
        return request


@dataclass(frozen=True)
class Event:
    """One event of a subscription, with its cursor. Exactly one of `requested`,
    `resolved`, `reminder` (a pending ask is due a reminder), `escalated` (it went
    unanswered past its escalation time) is set, or `synced` (the replay is over;
    `resumed` says whether it resumed from the cursor) or `reset` (drop what you hold:
    a fresh snapshot follows)."""

    cursor: str
    requested: Optional[pb.Requested] = None
    resolved: Optional[pb.Resolved] = None
    synced: bool = False
    resumed: bool = False
    reset: bool = False
    reminder: Optional[pb.Reminder] = None
    escalated: Optional[pb.Escalated] = None
    #: A quorum ask recorded one more approver; it stays pending.
    approval: Optional[pb.Approval] = None

    @classmethod
    def of(cls, message: pb.SubscribeResponse) -> Optional["Event"]:
        """The event of a message; None for a kind this client does not know yet."""
        kind = message.WhichOneof("event")
        if kind == "requested":
            return cls(message.cursor, requested=message.requested)
        if kind == "resolved":
            return cls(message.cursor, resolved=message.resolved)
        if kind == "synced":
            return cls(message.cursor, synced=True, resumed=message.synced.resumed)
        if kind == "reset":
            return cls(message.cursor, reset=True)
        if kind == "reminder":
            return cls(message.cursor, reminder=message.reminder)
        if kind == "escalated":
            return cls(message.cursor, escalated=message.escalated)
        if kind == "approval":
            return cls(message.cursor, approval=message.approval)
        return None


def slack_request(
    bot_token: str,
    signing_secret: str,
    channel: str,
    session_prefix: str = "",
    labels: Optional[Mapping[str, str]] = None,
    description: str = "",
    provides: Optional[bool] = None,
) -> pb.ConnectSlackRequest:
    """A `ConnectSlackRequest` (see `Client.connect_slack`)."""
    request = pb.ConnectSlackRequest(
        bot_token=bot_token,
        signing_secret=signing_secret,
        channel=channel,
        session_prefix=session_prefix,
        labels=dict(labels or {}),
        description=description,
    )
    if provides is not None:
        request.provides = provides
    return request


def endpoint_request(
    url: str,
    events: Sequence[str] = (),
    description: str = "",
    labels: Optional[Mapping[str, str]] = None,
    provides: Optional[bool] = None,
) -> pb.CreateEndpointRequest:
    """A `CreateEndpointRequest` (see `Client.create_endpoint`)."""
    request = pb.CreateEndpointRequest(
        url=url, events=list(events), description=description, labels=dict(labels or {})
    )
    if provides is not None:
        request.provides = provides
    return request
