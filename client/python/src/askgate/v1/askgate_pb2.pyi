import datetime

from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Unattended(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    FAIL: _ClassVar[Unattended]
    HOLD: _ClassVar[Unattended]

class Resolution(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    RESOLUTION_UNSPECIFIED: _ClassVar[Resolution]
    ANSWERED: _ClassVar[Resolution]
    CANCELLED: _ClassVar[Resolution]
    ABORTED: _ClassVar[Resolution]
    EXPIRED: _ClassVar[Resolution]
    DISPOSED: _ClassVar[Resolution]
    DEFAULTED: _ClassVar[Resolution]
    ALLOWED_BY_POLICY: _ClassVar[Resolution]

class ErrorReason(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    ERROR_REASON_UNSPECIFIED: _ClassVar[ErrorReason]
    EMPTY_QUESTIONS: _ClassVar[ErrorReason]
    BAD_REQUEST: _ClassVar[ErrorReason]
    BAD_INTENT: _ClassVar[ErrorReason]
    BAD_ANSWER: _ClassVar[ErrorReason]
    NO_PROVIDER: _ClassVar[ErrorReason]
    DUPLICATE_PROVIDER: _ClassVar[ErrorReason]
    CALLER_NOT_LIVE: _ClassVar[ErrorReason]
    DELEGATED_CALLER: _ClassVar[ErrorReason]
    ASK_CANCELLED: _ClassVar[ErrorReason]
    ASK_ABORTED: _ClassVar[ErrorReason]
    ASK_EXPIRED: _ClassVar[ErrorReason]
    NOT_PENDING: _ClassVar[ErrorReason]
    TOO_MANY_PENDING: _ClassVar[ErrorReason]
    TOO_MANY_SUBSCRIBERS: _ClassVar[ErrorReason]
    RATE_LIMITED: _ClassVar[ErrorReason]
    SHUTTING_DOWN: _ClassVar[ErrorReason]
    BACKEND_UNAVAILABLE: _ClassVar[ErrorReason]
    UNAUTHENTICATED: _ClassVar[ErrorReason]
    PERMISSION_DENIED: _ClassVar[ErrorReason]
    INTERNAL: _ClassVar[ErrorReason]
    TOO_MANY_AGENTS: _ClassVar[ErrorReason]
    TOO_MANY_SESSIONS: _ClassVar[ErrorReason]
    NOT_FOUND: _ClassVar[ErrorReason]
    TOO_MANY_WEBHOOKS: _ClassVar[ErrorReason]
    ALREADY_APPROVED: _ClassVar[ErrorReason]
    SELF_APPROVAL: _ClassVar[ErrorReason]
    CHANNEL_NOT_ALLOWED: _ClassVar[ErrorReason]
    RECEIPT_CONSUMED: _ClassVar[ErrorReason]
    REQUEST_ID_REUSED: _ClassVar[ErrorReason]
    NOT_AN_APPROVER: _ClassVar[ErrorReason]
    DENIED_BY_POLICY: _ClassVar[ErrorReason]

class CancelSource(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    CANCEL_SOURCE_UNSPECIFIED: _ClassVar[CancelSource]
    UI_CLOSED: _ClassVar[CancelSource]
    APPROVERS_DISAGREED: _ClassVar[CancelSource]

class DeliveryStatus(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    DELIVERY_STATUS_UNSPECIFIED: _ClassVar[DeliveryStatus]
    PENDING: _ClassVar[DeliveryStatus]
    DELIVERED: _ClassVar[DeliveryStatus]
    FAILED: _ClassVar[DeliveryStatus]
FAIL: Unattended
HOLD: Unattended
RESOLUTION_UNSPECIFIED: Resolution
ANSWERED: Resolution
CANCELLED: Resolution
ABORTED: Resolution
EXPIRED: Resolution
DISPOSED: Resolution
DEFAULTED: Resolution
ALLOWED_BY_POLICY: Resolution
ERROR_REASON_UNSPECIFIED: ErrorReason
EMPTY_QUESTIONS: ErrorReason
BAD_REQUEST: ErrorReason
BAD_INTENT: ErrorReason
BAD_ANSWER: ErrorReason
NO_PROVIDER: ErrorReason
DUPLICATE_PROVIDER: ErrorReason
CALLER_NOT_LIVE: ErrorReason
DELEGATED_CALLER: ErrorReason
ASK_CANCELLED: ErrorReason
ASK_ABORTED: ErrorReason
ASK_EXPIRED: ErrorReason
NOT_PENDING: ErrorReason
TOO_MANY_PENDING: ErrorReason
TOO_MANY_SUBSCRIBERS: ErrorReason
RATE_LIMITED: ErrorReason
SHUTTING_DOWN: ErrorReason
BACKEND_UNAVAILABLE: ErrorReason
UNAUTHENTICATED: ErrorReason
PERMISSION_DENIED: ErrorReason
INTERNAL: ErrorReason
TOO_MANY_AGENTS: ErrorReason
TOO_MANY_SESSIONS: ErrorReason
NOT_FOUND: ErrorReason
TOO_MANY_WEBHOOKS: ErrorReason
ALREADY_APPROVED: ErrorReason
SELF_APPROVAL: ErrorReason
CHANNEL_NOT_ALLOWED: ErrorReason
RECEIPT_CONSUMED: ErrorReason
REQUEST_ID_REUSED: ErrorReason
NOT_AN_APPROVER: ErrorReason
DENIED_BY_POLICY: ErrorReason
CANCEL_SOURCE_UNSPECIFIED: CancelSource
UI_CLOSED: CancelSource
APPROVERS_DISAGREED: CancelSource
DELIVERY_STATUS_UNSPECIFIED: DeliveryStatus
PENDING: DeliveryStatus
DELIVERED: DeliveryStatus
FAILED: DeliveryStatus

class PutPoliciesRequest(_message.Message):
    __slots__ = ("text", "mode", "schema")
    TEXT_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    SCHEMA_FIELD_NUMBER: _ClassVar[int]
    text: str
    mode: str
    schema: str
    def __init__(self, text: _Optional[str] = ..., mode: _Optional[str] = ..., schema: _Optional[str] = ...) -> None: ...

class GetPoliciesRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class Grant(_message.Message):
    __slots__ = ("id", "scope", "session_id", "agent_id", "action_name", "action_digest", "match_json", "granted_by", "rpc_id", "created_at", "expires_at")
    ID_FIELD_NUMBER: _ClassVar[int]
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    AGENT_ID_FIELD_NUMBER: _ClassVar[int]
    ACTION_NAME_FIELD_NUMBER: _ClassVar[int]
    ACTION_DIGEST_FIELD_NUMBER: _ClassVar[int]
    MATCH_JSON_FIELD_NUMBER: _ClassVar[int]
    GRANTED_BY_FIELD_NUMBER: _ClassVar[int]
    RPC_ID_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    EXPIRES_AT_FIELD_NUMBER: _ClassVar[int]
    id: str
    scope: str
    session_id: str
    agent_id: str
    action_name: str
    action_digest: str
    match_json: str
    granted_by: str
    rpc_id: str
    created_at: _timestamp_pb2.Timestamp
    expires_at: _timestamp_pb2.Timestamp
    def __init__(self, id: _Optional[str] = ..., scope: _Optional[str] = ..., session_id: _Optional[str] = ..., agent_id: _Optional[str] = ..., action_name: _Optional[str] = ..., action_digest: _Optional[str] = ..., match_json: _Optional[str] = ..., granted_by: _Optional[str] = ..., rpc_id: _Optional[str] = ..., created_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., expires_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class ListGrantsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListGrantsResponse(_message.Message):
    __slots__ = ("grants",)
    GRANTS_FIELD_NUMBER: _ClassVar[int]
    grants: _containers.RepeatedCompositeFieldContainer[Grant]
    def __init__(self, grants: _Optional[_Iterable[_Union[Grant, _Mapping]]] = ...) -> None: ...

class RevokeGrantRequest(_message.Message):
    __slots__ = ("id",)
    ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    def __init__(self, id: _Optional[str] = ...) -> None: ...

class RevokeGrantResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class PolicySet(_message.Message):
    __slots__ = ("text", "mode", "schema", "version", "updated_at", "policy_ids")
    TEXT_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    SCHEMA_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    UPDATED_AT_FIELD_NUMBER: _ClassVar[int]
    POLICY_IDS_FIELD_NUMBER: _ClassVar[int]
    text: str
    mode: str
    schema: str
    version: int
    updated_at: _timestamp_pb2.Timestamp
    policy_ids: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, text: _Optional[str] = ..., mode: _Optional[str] = ..., schema: _Optional[str] = ..., version: _Optional[int] = ..., updated_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., policy_ids: _Optional[_Iterable[str]] = ...) -> None: ...

class TestPoliciesRequest(_message.Message):
    __slots__ = ("ask", "subject", "groups", "text", "schema")
    ASK_FIELD_NUMBER: _ClassVar[int]
    SUBJECT_FIELD_NUMBER: _ClassVar[int]
    GROUPS_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    SCHEMA_FIELD_NUMBER: _ClassVar[int]
    ask: AskRequest
    subject: str
    groups: _containers.RepeatedScalarFieldContainer[str]
    text: str
    schema: str
    def __init__(self, ask: _Optional[_Union[AskRequest, _Mapping]] = ..., subject: _Optional[str] = ..., groups: _Optional[_Iterable[str]] = ..., text: _Optional[str] = ..., schema: _Optional[str] = ...) -> None: ...

class TestPoliciesResponse(_message.Message):
    __slots__ = ("decision", "policy_ids", "reasons", "fill")
    DECISION_FIELD_NUMBER: _ClassVar[int]
    POLICY_IDS_FIELD_NUMBER: _ClassVar[int]
    REASONS_FIELD_NUMBER: _ClassVar[int]
    FILL_FIELD_NUMBER: _ClassVar[int]
    decision: str
    policy_ids: _containers.RepeatedScalarFieldContainer[str]
    reasons: _containers.RepeatedScalarFieldContainer[str]
    fill: PolicyFill
    def __init__(self, decision: _Optional[str] = ..., policy_ids: _Optional[_Iterable[str]] = ..., reasons: _Optional[_Iterable[str]] = ..., fill: _Optional[_Union[PolicyFill, _Mapping]] = ...) -> None: ...

class PolicyFill(_message.Message):
    __slots__ = ("approvers", "quorum", "ttl_ms", "default_option")
    APPROVERS_FIELD_NUMBER: _ClassVar[int]
    QUORUM_FIELD_NUMBER: _ClassVar[int]
    TTL_MS_FIELD_NUMBER: _ClassVar[int]
    DEFAULT_OPTION_FIELD_NUMBER: _ClassVar[int]
    approvers: Approvers
    quorum: int
    ttl_ms: int
    default_option: str
    def __init__(self, approvers: _Optional[_Union[Approvers, _Mapping]] = ..., quorum: _Optional[int] = ..., ttl_ms: _Optional[int] = ..., default_option: _Optional[str] = ...) -> None: ...

class PolicyDecision(_message.Message):
    __slots__ = ("decision", "policy_id", "reason", "shadow")
    DECISION_FIELD_NUMBER: _ClassVar[int]
    POLICY_ID_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    SHADOW_FIELD_NUMBER: _ClassVar[int]
    decision: str
    policy_id: str
    reason: str
    shadow: bool
    def __init__(self, decision: _Optional[str] = ..., policy_id: _Optional[str] = ..., reason: _Optional[str] = ..., shadow: _Optional[bool] = ...) -> None: ...

class GetAuditHeadRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class AuditHead(_message.Message):
    __slots__ = ("tenant", "seq", "hash", "at", "jws")
    TENANT_FIELD_NUMBER: _ClassVar[int]
    SEQ_FIELD_NUMBER: _ClassVar[int]
    HASH_FIELD_NUMBER: _ClassVar[int]
    AT_FIELD_NUMBER: _ClassVar[int]
    JWS_FIELD_NUMBER: _ClassVar[int]
    tenant: str
    seq: int
    hash: str
    at: str
    jws: str
    def __init__(self, tenant: _Optional[str] = ..., seq: _Optional[int] = ..., hash: _Optional[str] = ..., at: _Optional[str] = ..., jws: _Optional[str] = ...) -> None: ...

class StartLinkRequest(_message.Message):
    __slots__ = ("email",)
    EMAIL_FIELD_NUMBER: _ClassVar[int]
    email: str
    def __init__(self, email: _Optional[str] = ...) -> None: ...

class LinkCode(_message.Message):
    __slots__ = ("code", "expires_at")
    CODE_FIELD_NUMBER: _ClassVar[int]
    EXPIRES_AT_FIELD_NUMBER: _ClassVar[int]
    code: str
    expires_at: _timestamp_pb2.Timestamp
    def __init__(self, code: _Optional[str] = ..., expires_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class Person(_message.Message):
    __slots__ = ("id", "display_name", "groups", "identities", "delegate")
    ID_FIELD_NUMBER: _ClassVar[int]
    DISPLAY_NAME_FIELD_NUMBER: _ClassVar[int]
    GROUPS_FIELD_NUMBER: _ClassVar[int]
    IDENTITIES_FIELD_NUMBER: _ClassVar[int]
    DELEGATE_FIELD_NUMBER: _ClassVar[int]
    id: str
    display_name: str
    groups: _containers.RepeatedScalarFieldContainer[str]
    identities: _containers.RepeatedCompositeFieldContainer[Identity]
    delegate: Delegate
    def __init__(self, id: _Optional[str] = ..., display_name: _Optional[str] = ..., groups: _Optional[_Iterable[str]] = ..., identities: _Optional[_Iterable[_Union[Identity, _Mapping]]] = ..., delegate: _Optional[_Union[Delegate, _Mapping]] = ...) -> None: ...

class Identity(_message.Message):
    __slots__ = ("kind", "value")
    KIND_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    kind: str
    value: str
    def __init__(self, kind: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...

class Delegate(_message.Message):
    __slots__ = ("to_person", "until")
    TO_PERSON_FIELD_NUMBER: _ClassVar[int]
    UNTIL_FIELD_NUMBER: _ClassVar[int]
    to_person: str
    until: _timestamp_pb2.Timestamp
    def __init__(self, to_person: _Optional[str] = ..., until: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class ListPeopleRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListPeopleResponse(_message.Message):
    __slots__ = ("people",)
    PEOPLE_FIELD_NUMBER: _ClassVar[int]
    people: _containers.RepeatedCompositeFieldContainer[Person]
    def __init__(self, people: _Optional[_Iterable[_Union[Person, _Mapping]]] = ...) -> None: ...

class DeletePersonRequest(_message.Message):
    __slots__ = ("id",)
    ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    def __init__(self, id: _Optional[str] = ...) -> None: ...

class DeletePersonResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ConsumeReceiptRequest(_message.Message):
    __slots__ = ("receipt",)
    RECEIPT_FIELD_NUMBER: _ClassVar[int]
    receipt: str
    def __init__(self, receipt: _Optional[str] = ...) -> None: ...

class ConsumeReceiptResponse(_message.Message):
    __slots__ = ("decision", "consumed_at")
    DECISION_FIELD_NUMBER: _ClassVar[int]
    CONSUMED_AT_FIELD_NUMBER: _ClassVar[int]
    decision: str
    consumed_at: _timestamp_pb2.Timestamp
    def __init__(self, decision: _Optional[str] = ..., consumed_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class ExportAuditRequest(_message.Message):
    __slots__ = ("after_seq", "limit")
    AFTER_SEQ_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    after_seq: int
    limit: int
    def __init__(self, after_seq: _Optional[int] = ..., limit: _Optional[int] = ...) -> None: ...

class AuditRecord(_message.Message):
    __slots__ = ("seq", "prev_hash", "hash", "body_json")
    SEQ_FIELD_NUMBER: _ClassVar[int]
    PREV_HASH_FIELD_NUMBER: _ClassVar[int]
    HASH_FIELD_NUMBER: _ClassVar[int]
    BODY_JSON_FIELD_NUMBER: _ClassVar[int]
    seq: int
    prev_hash: str
    hash: str
    body_json: str
    def __init__(self, seq: _Optional[int] = ..., prev_hash: _Optional[str] = ..., hash: _Optional[str] = ..., body_json: _Optional[str] = ...) -> None: ...

class Question(_message.Message):
    __slots__ = ("id", "question", "header", "detail", "options", "multi_select", "intent", "secret")
    ID_FIELD_NUMBER: _ClassVar[int]
    QUESTION_FIELD_NUMBER: _ClassVar[int]
    HEADER_FIELD_NUMBER: _ClassVar[int]
    DETAIL_FIELD_NUMBER: _ClassVar[int]
    OPTIONS_FIELD_NUMBER: _ClassVar[int]
    MULTI_SELECT_FIELD_NUMBER: _ClassVar[int]
    INTENT_FIELD_NUMBER: _ClassVar[int]
    SECRET_FIELD_NUMBER: _ClassVar[int]
    id: str
    question: str
    header: str
    detail: str
    options: _containers.RepeatedCompositeFieldContainer[QuestionOption]
    multi_select: bool
    intent: Intent
    secret: bool
    def __init__(self, id: _Optional[str] = ..., question: _Optional[str] = ..., header: _Optional[str] = ..., detail: _Optional[str] = ..., options: _Optional[_Iterable[_Union[QuestionOption, _Mapping]]] = ..., multi_select: _Optional[bool] = ..., intent: _Optional[_Union[Intent, _Mapping]] = ..., secret: _Optional[bool] = ...) -> None: ...

class QuestionOption(_message.Message):
    __slots__ = ("label", "description")
    LABEL_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    label: str
    description: str
    def __init__(self, label: _Optional[str] = ..., description: _Optional[str] = ...) -> None: ...

class Intent(_message.Message):
    __slots__ = ("plan_review",)
    PLAN_REVIEW_FIELD_NUMBER: _ClassVar[int]
    plan_review: PlanReview
    def __init__(self, plan_review: _Optional[_Union[PlanReview, _Mapping]] = ...) -> None: ...

class PlanReview(_message.Message):
    __slots__ = ("approve",)
    APPROVE_FIELD_NUMBER: _ClassVar[int]
    approve: str
    def __init__(self, approve: _Optional[str] = ...) -> None: ...

class AgentRef(_message.Message):
    __slots__ = ("agent_id", "incarnation")
    AGENT_ID_FIELD_NUMBER: _ClassVar[int]
    INCARNATION_FIELD_NUMBER: _ClassVar[int]
    agent_id: str
    incarnation: str
    def __init__(self, agent_id: _Optional[str] = ..., incarnation: _Optional[str] = ...) -> None: ...

class QuestionAnswer(_message.Message):
    __slots__ = ("id", "selected", "custom")
    ID_FIELD_NUMBER: _ClassVar[int]
    SELECTED_FIELD_NUMBER: _ClassVar[int]
    CUSTOM_FIELD_NUMBER: _ClassVar[int]
    id: str
    selected: _containers.RepeatedScalarFieldContainer[str]
    custom: str
    def __init__(self, id: _Optional[str] = ..., selected: _Optional[_Iterable[str]] = ..., custom: _Optional[str] = ...) -> None: ...

class AskRequest(_message.Message):
    __slots__ = ("session_id", "questions", "agent", "request_id", "if_unattended", "reattach_grace_ms", "labels", "notify", "action", "quorum", "default_answers", "allowed_channels", "ttl_ms", "approvers", "escalation")
    class LabelsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    QUESTIONS_FIELD_NUMBER: _ClassVar[int]
    AGENT_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    IF_UNATTENDED_FIELD_NUMBER: _ClassVar[int]
    REATTACH_GRACE_MS_FIELD_NUMBER: _ClassVar[int]
    LABELS_FIELD_NUMBER: _ClassVar[int]
    NOTIFY_FIELD_NUMBER: _ClassVar[int]
    ACTION_FIELD_NUMBER: _ClassVar[int]
    QUORUM_FIELD_NUMBER: _ClassVar[int]
    DEFAULT_ANSWERS_FIELD_NUMBER: _ClassVar[int]
    ALLOWED_CHANNELS_FIELD_NUMBER: _ClassVar[int]
    TTL_MS_FIELD_NUMBER: _ClassVar[int]
    APPROVERS_FIELD_NUMBER: _ClassVar[int]
    ESCALATION_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    questions: _containers.RepeatedCompositeFieldContainer[Question]
    agent: AgentRef
    request_id: str
    if_unattended: Unattended
    reattach_grace_ms: int
    labels: _containers.ScalarMap[str, str]
    notify: NotifyPolicy
    action: Action
    quorum: Quorum
    default_answers: _containers.RepeatedCompositeFieldContainer[QuestionAnswer]
    allowed_channels: _containers.RepeatedScalarFieldContainer[str]
    ttl_ms: int
    approvers: Approvers
    escalation: _containers.RepeatedCompositeFieldContainer[EscalationStep]
    def __init__(self, session_id: _Optional[str] = ..., questions: _Optional[_Iterable[_Union[Question, _Mapping]]] = ..., agent: _Optional[_Union[AgentRef, _Mapping]] = ..., request_id: _Optional[str] = ..., if_unattended: _Optional[_Union[Unattended, str]] = ..., reattach_grace_ms: _Optional[int] = ..., labels: _Optional[_Mapping[str, str]] = ..., notify: _Optional[_Union[NotifyPolicy, _Mapping]] = ..., action: _Optional[_Union[Action, _Mapping]] = ..., quorum: _Optional[_Union[Quorum, _Mapping]] = ..., default_answers: _Optional[_Iterable[_Union[QuestionAnswer, _Mapping]]] = ..., allowed_channels: _Optional[_Iterable[str]] = ..., ttl_ms: _Optional[int] = ..., approvers: _Optional[_Union[Approvers, _Mapping]] = ..., escalation: _Optional[_Iterable[_Union[EscalationStep, _Mapping]]] = ...) -> None: ...

class EscalationStep(_message.Message):
    __slots__ = ("after_ms", "approvers", "replace", "notify_channels")
    AFTER_MS_FIELD_NUMBER: _ClassVar[int]
    APPROVERS_FIELD_NUMBER: _ClassVar[int]
    REPLACE_FIELD_NUMBER: _ClassVar[int]
    NOTIFY_CHANNELS_FIELD_NUMBER: _ClassVar[int]
    after_ms: int
    approvers: Approvers
    replace: bool
    notify_channels: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, after_ms: _Optional[int] = ..., approvers: _Optional[_Union[Approvers, _Mapping]] = ..., replace: _Optional[bool] = ..., notify_channels: _Optional[_Iterable[str]] = ...) -> None: ...

class Approvers(_message.Message):
    __slots__ = ("subjects", "groups", "cancel_too")
    SUBJECTS_FIELD_NUMBER: _ClassVar[int]
    GROUPS_FIELD_NUMBER: _ClassVar[int]
    CANCEL_TOO_FIELD_NUMBER: _ClassVar[int]
    subjects: _containers.RepeatedScalarFieldContainer[str]
    groups: _containers.RepeatedScalarFieldContainer[str]
    cancel_too: bool
    def __init__(self, subjects: _Optional[_Iterable[str]] = ..., groups: _Optional[_Iterable[str]] = ..., cancel_too: _Optional[bool] = ...) -> None: ...

class Action(_message.Message):
    __slots__ = ("name", "arguments_json", "approving_answers")
    NAME_FIELD_NUMBER: _ClassVar[int]
    ARGUMENTS_JSON_FIELD_NUMBER: _ClassVar[int]
    APPROVING_ANSWERS_FIELD_NUMBER: _ClassVar[int]
    name: str
    arguments_json: str
    approving_answers: _containers.RepeatedCompositeFieldContainer[QuestionAnswer]
    def __init__(self, name: _Optional[str] = ..., arguments_json: _Optional[str] = ..., approving_answers: _Optional[_Iterable[_Union[QuestionAnswer, _Mapping]]] = ...) -> None: ...

class Quorum(_message.Message):
    __slots__ = ("count",)
    COUNT_FIELD_NUMBER: _ClassVar[int]
    count: int
    def __init__(self, count: _Optional[int] = ...) -> None: ...

class NotifyPolicy(_message.Message):
    __slots__ = ("remind_after_ms", "remind_every_ms", "max_reminders", "escalate_after_ms")
    REMIND_AFTER_MS_FIELD_NUMBER: _ClassVar[int]
    REMIND_EVERY_MS_FIELD_NUMBER: _ClassVar[int]
    MAX_REMINDERS_FIELD_NUMBER: _ClassVar[int]
    ESCALATE_AFTER_MS_FIELD_NUMBER: _ClassVar[int]
    remind_after_ms: int
    remind_every_ms: int
    max_reminders: int
    escalate_after_ms: int
    def __init__(self, remind_after_ms: _Optional[int] = ..., remind_every_ms: _Optional[int] = ..., max_reminders: _Optional[int] = ..., escalate_after_ms: _Optional[int] = ...) -> None: ...

class AskResponse(_message.Message):
    __slots__ = ("rpc_id", "answers", "resolved_by", "receipt", "approvers", "resolution")
    RPC_ID_FIELD_NUMBER: _ClassVar[int]
    ANSWERS_FIELD_NUMBER: _ClassVar[int]
    RESOLVED_BY_FIELD_NUMBER: _ClassVar[int]
    RECEIPT_FIELD_NUMBER: _ClassVar[int]
    APPROVERS_FIELD_NUMBER: _ClassVar[int]
    RESOLUTION_FIELD_NUMBER: _ClassVar[int]
    rpc_id: str
    answers: _containers.RepeatedCompositeFieldContainer[QuestionAnswer]
    resolved_by: str
    receipt: str
    approvers: _containers.RepeatedScalarFieldContainer[str]
    resolution: Resolution
    def __init__(self, rpc_id: _Optional[str] = ..., answers: _Optional[_Iterable[_Union[QuestionAnswer, _Mapping]]] = ..., resolved_by: _Optional[str] = ..., receipt: _Optional[str] = ..., approvers: _Optional[_Iterable[str]] = ..., resolution: _Optional[_Union[Resolution, str]] = ...) -> None: ...

class SubscribeRequest(_message.Message):
    __slots__ = ("session_id", "all_sessions", "after", "exclusive")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    ALL_SESSIONS_FIELD_NUMBER: _ClassVar[int]
    AFTER_FIELD_NUMBER: _ClassVar[int]
    EXCLUSIVE_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    all_sessions: bool
    after: str
    exclusive: bool
    def __init__(self, session_id: _Optional[str] = ..., all_sessions: _Optional[bool] = ..., after: _Optional[str] = ..., exclusive: _Optional[bool] = ...) -> None: ...

class WhoAmIRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class WhoAmIResponse(_message.Message):
    __slots__ = ("tenant", "subject", "roles", "sessions", "every_session", "expires_at", "groups")
    TENANT_FIELD_NUMBER: _ClassVar[int]
    SUBJECT_FIELD_NUMBER: _ClassVar[int]
    ROLES_FIELD_NUMBER: _ClassVar[int]
    SESSIONS_FIELD_NUMBER: _ClassVar[int]
    EVERY_SESSION_FIELD_NUMBER: _ClassVar[int]
    EXPIRES_AT_FIELD_NUMBER: _ClassVar[int]
    GROUPS_FIELD_NUMBER: _ClassVar[int]
    tenant: str
    subject: str
    roles: _containers.RepeatedScalarFieldContainer[str]
    sessions: _containers.RepeatedScalarFieldContainer[str]
    every_session: bool
    expires_at: _timestamp_pb2.Timestamp
    groups: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, tenant: _Optional[str] = ..., subject: _Optional[str] = ..., roles: _Optional[_Iterable[str]] = ..., sessions: _Optional[_Iterable[str]] = ..., every_session: _Optional[bool] = ..., expires_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., groups: _Optional[_Iterable[str]] = ...) -> None: ...

class SubscribeResponse(_message.Message):
    __slots__ = ("cursor", "requested", "resolved", "synced", "reset", "reminder", "escalated", "approval")
    CURSOR_FIELD_NUMBER: _ClassVar[int]
    REQUESTED_FIELD_NUMBER: _ClassVar[int]
    RESOLVED_FIELD_NUMBER: _ClassVar[int]
    SYNCED_FIELD_NUMBER: _ClassVar[int]
    RESET_FIELD_NUMBER: _ClassVar[int]
    REMINDER_FIELD_NUMBER: _ClassVar[int]
    ESCALATED_FIELD_NUMBER: _ClassVar[int]
    APPROVAL_FIELD_NUMBER: _ClassVar[int]
    cursor: str
    requested: Requested
    resolved: Resolved
    synced: Synced
    reset: Reset
    reminder: Reminder
    escalated: Escalated
    approval: Approval
    def __init__(self, cursor: _Optional[str] = ..., requested: _Optional[_Union[Requested, _Mapping]] = ..., resolved: _Optional[_Union[Resolved, _Mapping]] = ..., synced: _Optional[_Union[Synced, _Mapping]] = ..., reset: _Optional[_Union[Reset, _Mapping]] = ..., reminder: _Optional[_Union[Reminder, _Mapping]] = ..., escalated: _Optional[_Union[Escalated, _Mapping]] = ..., approval: _Optional[_Union[Approval, _Mapping]] = ...) -> None: ...

class Approval(_message.Message):
    __slots__ = ("rpc_id", "session_id", "subject", "count", "needed", "approved_at")
    RPC_ID_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    SUBJECT_FIELD_NUMBER: _ClassVar[int]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    NEEDED_FIELD_NUMBER: _ClassVar[int]
    APPROVED_AT_FIELD_NUMBER: _ClassVar[int]
    rpc_id: str
    session_id: str
    subject: str
    count: int
    needed: int
    approved_at: _timestamp_pb2.Timestamp
    def __init__(self, rpc_id: _Optional[str] = ..., session_id: _Optional[str] = ..., subject: _Optional[str] = ..., count: _Optional[int] = ..., needed: _Optional[int] = ..., approved_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class Requested(_message.Message):
    __slots__ = ("rpc_id", "session_id", "questions", "agent", "labels", "requested_at", "expires_at", "notify", "action", "quorum", "allowed_channels", "action_digest", "default_answers", "asked_by", "traceparent", "approvers", "escalation", "policy")
    class LabelsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    RPC_ID_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    QUESTIONS_FIELD_NUMBER: _ClassVar[int]
    AGENT_FIELD_NUMBER: _ClassVar[int]
    LABELS_FIELD_NUMBER: _ClassVar[int]
    REQUESTED_AT_FIELD_NUMBER: _ClassVar[int]
    EXPIRES_AT_FIELD_NUMBER: _ClassVar[int]
    NOTIFY_FIELD_NUMBER: _ClassVar[int]
    ACTION_FIELD_NUMBER: _ClassVar[int]
    QUORUM_FIELD_NUMBER: _ClassVar[int]
    ALLOWED_CHANNELS_FIELD_NUMBER: _ClassVar[int]
    ACTION_DIGEST_FIELD_NUMBER: _ClassVar[int]
    DEFAULT_ANSWERS_FIELD_NUMBER: _ClassVar[int]
    ASKED_BY_FIELD_NUMBER: _ClassVar[int]
    TRACEPARENT_FIELD_NUMBER: _ClassVar[int]
    APPROVERS_FIELD_NUMBER: _ClassVar[int]
    ESCALATION_FIELD_NUMBER: _ClassVar[int]
    POLICY_FIELD_NUMBER: _ClassVar[int]
    rpc_id: str
    session_id: str
    questions: _containers.RepeatedCompositeFieldContainer[Question]
    agent: AgentRef
    labels: _containers.ScalarMap[str, str]
    requested_at: _timestamp_pb2.Timestamp
    expires_at: _timestamp_pb2.Timestamp
    notify: NotifyPolicy
    action: Action
    quorum: Quorum
    allowed_channels: _containers.RepeatedScalarFieldContainer[str]
    action_digest: str
    default_answers: _containers.RepeatedCompositeFieldContainer[QuestionAnswer]
    asked_by: str
    traceparent: str
    approvers: Approvers
    escalation: _containers.RepeatedCompositeFieldContainer[EscalationStep]
    policy: PolicyDecision
    def __init__(self, rpc_id: _Optional[str] = ..., session_id: _Optional[str] = ..., questions: _Optional[_Iterable[_Union[Question, _Mapping]]] = ..., agent: _Optional[_Union[AgentRef, _Mapping]] = ..., labels: _Optional[_Mapping[str, str]] = ..., requested_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., expires_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., notify: _Optional[_Union[NotifyPolicy, _Mapping]] = ..., action: _Optional[_Union[Action, _Mapping]] = ..., quorum: _Optional[_Union[Quorum, _Mapping]] = ..., allowed_channels: _Optional[_Iterable[str]] = ..., action_digest: _Optional[str] = ..., default_answers: _Optional[_Iterable[_Union[QuestionAnswer, _Mapping]]] = ..., asked_by: _Optional[str] = ..., traceparent: _Optional[str] = ..., approvers: _Optional[_Union[Approvers, _Mapping]] = ..., escalation: _Optional[_Iterable[_Union[EscalationStep, _Mapping]]] = ..., policy: _Optional[_Union[PolicyDecision, _Mapping]] = ...) -> None: ...

class Reminder(_message.Message):
    __slots__ = ("rpc_id", "session_id", "count", "sent_at")
    RPC_ID_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    SENT_AT_FIELD_NUMBER: _ClassVar[int]
    rpc_id: str
    session_id: str
    count: int
    sent_at: _timestamp_pb2.Timestamp
    def __init__(self, rpc_id: _Optional[str] = ..., session_id: _Optional[str] = ..., count: _Optional[int] = ..., sent_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class Escalated(_message.Message):
    __slots__ = ("rpc_id", "session_id", "sent_at", "step")
    RPC_ID_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    SENT_AT_FIELD_NUMBER: _ClassVar[int]
    STEP_FIELD_NUMBER: _ClassVar[int]
    rpc_id: str
    session_id: str
    sent_at: _timestamp_pb2.Timestamp
    step: int
    def __init__(self, rpc_id: _Optional[str] = ..., session_id: _Optional[str] = ..., sent_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., step: _Optional[int] = ...) -> None: ...

class Resolved(_message.Message):
    __slots__ = ("rpc_id", "session_id", "reason", "answers", "resolved_by", "resolved_at", "cancel_reason", "cancel_source", "approvers", "channel", "sealed_answers", "answers_hmac", "on_behalf_of")
    RPC_ID_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    ANSWERS_FIELD_NUMBER: _ClassVar[int]
    RESOLVED_BY_FIELD_NUMBER: _ClassVar[int]
    RESOLVED_AT_FIELD_NUMBER: _ClassVar[int]
    CANCEL_REASON_FIELD_NUMBER: _ClassVar[int]
    CANCEL_SOURCE_FIELD_NUMBER: _ClassVar[int]
    APPROVERS_FIELD_NUMBER: _ClassVar[int]
    CHANNEL_FIELD_NUMBER: _ClassVar[int]
    SEALED_ANSWERS_FIELD_NUMBER: _ClassVar[int]
    ANSWERS_HMAC_FIELD_NUMBER: _ClassVar[int]
    ON_BEHALF_OF_FIELD_NUMBER: _ClassVar[int]
    rpc_id: str
    session_id: str
    reason: Resolution
    answers: _containers.RepeatedCompositeFieldContainer[QuestionAnswer]
    resolved_by: str
    resolved_at: _timestamp_pb2.Timestamp
    cancel_reason: str
    cancel_source: CancelSource
    approvers: _containers.RepeatedScalarFieldContainer[str]
    channel: str
    sealed_answers: str
    answers_hmac: str
    on_behalf_of: str
    def __init__(self, rpc_id: _Optional[str] = ..., session_id: _Optional[str] = ..., reason: _Optional[_Union[Resolution, str]] = ..., answers: _Optional[_Iterable[_Union[QuestionAnswer, _Mapping]]] = ..., resolved_by: _Optional[str] = ..., resolved_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., cancel_reason: _Optional[str] = ..., cancel_source: _Optional[_Union[CancelSource, str]] = ..., approvers: _Optional[_Iterable[str]] = ..., channel: _Optional[str] = ..., sealed_answers: _Optional[str] = ..., answers_hmac: _Optional[str] = ..., on_behalf_of: _Optional[str] = ...) -> None: ...

class Synced(_message.Message):
    __slots__ = ("resumed",)
    RESUMED_FIELD_NUMBER: _ClassVar[int]
    resumed: bool
    def __init__(self, resumed: _Optional[bool] = ...) -> None: ...

class Reset(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class AnswerRequest(_message.Message):
    __slots__ = ("session_id", "rpc_id", "answers", "grant")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    RPC_ID_FIELD_NUMBER: _ClassVar[int]
    ANSWERS_FIELD_NUMBER: _ClassVar[int]
    GRANT_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    rpc_id: str
    answers: _containers.RepeatedCompositeFieldContainer[QuestionAnswer]
    grant: GrantRequest
    def __init__(self, session_id: _Optional[str] = ..., rpc_id: _Optional[str] = ..., answers: _Optional[_Iterable[_Union[QuestionAnswer, _Mapping]]] = ..., grant: _Optional[_Union[GrantRequest, _Mapping]] = ...) -> None: ...

class GrantRequest(_message.Message):
    __slots__ = ("scope", "ttl_ms", "match_json")
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    TTL_MS_FIELD_NUMBER: _ClassVar[int]
    MATCH_JSON_FIELD_NUMBER: _ClassVar[int]
    scope: str
    ttl_ms: int
    match_json: str
    def __init__(self, scope: _Optional[str] = ..., ttl_ms: _Optional[int] = ..., match_json: _Optional[str] = ...) -> None: ...

class AnswerResponse(_message.Message):
    __slots__ = ("votes", "needed")
    VOTES_FIELD_NUMBER: _ClassVar[int]
    NEEDED_FIELD_NUMBER: _ClassVar[int]
    votes: int
    needed: int
    def __init__(self, votes: _Optional[int] = ..., needed: _Optional[int] = ...) -> None: ...

class CancelRequest(_message.Message):
    __slots__ = ("session_id", "rpc_id", "reason", "source")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    RPC_ID_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    rpc_id: str
    reason: str
    source: CancelSource
    def __init__(self, session_id: _Optional[str] = ..., rpc_id: _Optional[str] = ..., reason: _Optional[str] = ..., source: _Optional[_Union[CancelSource, str]] = ...) -> None: ...

class CancelResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class AbortRequest(_message.Message):
    __slots__ = ("session_id", "request_id")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    request_id: str
    def __init__(self, session_id: _Optional[str] = ..., request_id: _Optional[str] = ...) -> None: ...

class AbortResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListPendingRequest(_message.Message):
    __slots__ = ("session_id",)
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    def __init__(self, session_id: _Optional[str] = ...) -> None: ...

class ListPendingResponse(_message.Message):
    __slots__ = ("pending",)
    PENDING_FIELD_NUMBER: _ClassVar[int]
    pending: _containers.RepeatedCompositeFieldContainer[Requested]
    def __init__(self, pending: _Optional[_Iterable[_Union[Requested, _Mapping]]] = ...) -> None: ...

class AttachRequest(_message.Message):
    __slots__ = ("agent_id", "parent_agent_id")
    AGENT_ID_FIELD_NUMBER: _ClassVar[int]
    PARENT_AGENT_ID_FIELD_NUMBER: _ClassVar[int]
    agent_id: str
    parent_agent_id: str
    def __init__(self, agent_id: _Optional[str] = ..., parent_agent_id: _Optional[str] = ...) -> None: ...

class AttachResponse(_message.Message):
    __slots__ = ("lease", "heartbeat")
    LEASE_FIELD_NUMBER: _ClassVar[int]
    HEARTBEAT_FIELD_NUMBER: _ClassVar[int]
    lease: Lease
    heartbeat: Heartbeat
    def __init__(self, lease: _Optional[_Union[Lease, _Mapping]] = ..., heartbeat: _Optional[_Union[Heartbeat, _Mapping]] = ...) -> None: ...

class Lease(_message.Message):
    __slots__ = ("incarnation",)
    INCARNATION_FIELD_NUMBER: _ClassVar[int]
    incarnation: str
    def __init__(self, incarnation: _Optional[str] = ...) -> None: ...

class Heartbeat(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class CreateEndpointRequest(_message.Message):
    __slots__ = ("url", "events", "description", "labels", "provides")
    class LabelsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    URL_FIELD_NUMBER: _ClassVar[int]
    EVENTS_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    LABELS_FIELD_NUMBER: _ClassVar[int]
    PROVIDES_FIELD_NUMBER: _ClassVar[int]
    url: str
    events: _containers.RepeatedScalarFieldContainer[str]
    description: str
    labels: _containers.ScalarMap[str, str]
    provides: bool
    def __init__(self, url: _Optional[str] = ..., events: _Optional[_Iterable[str]] = ..., description: _Optional[str] = ..., labels: _Optional[_Mapping[str, str]] = ..., provides: _Optional[bool] = ...) -> None: ...

class Endpoint(_message.Message):
    __slots__ = ("id", "url", "events", "description", "labels", "secret", "provides", "created_at")
    class LabelsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    ID_FIELD_NUMBER: _ClassVar[int]
    URL_FIELD_NUMBER: _ClassVar[int]
    EVENTS_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    LABELS_FIELD_NUMBER: _ClassVar[int]
    SECRET_FIELD_NUMBER: _ClassVar[int]
    PROVIDES_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    id: str
    url: str
    events: _containers.RepeatedScalarFieldContainer[str]
    description: str
    labels: _containers.ScalarMap[str, str]
    secret: str
    provides: bool
    created_at: _timestamp_pb2.Timestamp
    def __init__(self, id: _Optional[str] = ..., url: _Optional[str] = ..., events: _Optional[_Iterable[str]] = ..., description: _Optional[str] = ..., labels: _Optional[_Mapping[str, str]] = ..., secret: _Optional[str] = ..., provides: _Optional[bool] = ..., created_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class ListEndpointsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListEndpointsResponse(_message.Message):
    __slots__ = ("endpoints",)
    ENDPOINTS_FIELD_NUMBER: _ClassVar[int]
    endpoints: _containers.RepeatedCompositeFieldContainer[Endpoint]
    def __init__(self, endpoints: _Optional[_Iterable[_Union[Endpoint, _Mapping]]] = ...) -> None: ...

class DeleteEndpointRequest(_message.Message):
    __slots__ = ("id",)
    ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    def __init__(self, id: _Optional[str] = ...) -> None: ...

class DeleteEndpointResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class Delivery(_message.Message):
    __slots__ = ("id", "endpoint_id", "event_type", "rpc_id", "status", "attempts", "last_error", "next_attempt_at", "session_id", "created_at", "last_attempt_at")
    ID_FIELD_NUMBER: _ClassVar[int]
    ENDPOINT_ID_FIELD_NUMBER: _ClassVar[int]
    EVENT_TYPE_FIELD_NUMBER: _ClassVar[int]
    RPC_ID_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    LAST_ERROR_FIELD_NUMBER: _ClassVar[int]
    NEXT_ATTEMPT_AT_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    LAST_ATTEMPT_AT_FIELD_NUMBER: _ClassVar[int]
    id: str
    endpoint_id: str
    event_type: str
    rpc_id: str
    status: DeliveryStatus
    attempts: int
    last_error: str
    next_attempt_at: _timestamp_pb2.Timestamp
    session_id: str
    created_at: _timestamp_pb2.Timestamp
    last_attempt_at: _timestamp_pb2.Timestamp
    def __init__(self, id: _Optional[str] = ..., endpoint_id: _Optional[str] = ..., event_type: _Optional[str] = ..., rpc_id: _Optional[str] = ..., status: _Optional[_Union[DeliveryStatus, str]] = ..., attempts: _Optional[int] = ..., last_error: _Optional[str] = ..., next_attempt_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., session_id: _Optional[str] = ..., created_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., last_attempt_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class ListDeliveriesRequest(_message.Message):
    __slots__ = ("endpoint_id", "status", "limit")
    ENDPOINT_ID_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    endpoint_id: str
    status: DeliveryStatus
    limit: int
    def __init__(self, endpoint_id: _Optional[str] = ..., status: _Optional[_Union[DeliveryStatus, str]] = ..., limit: _Optional[int] = ...) -> None: ...

class ListDeliveriesResponse(_message.Message):
    __slots__ = ("deliveries",)
    DELIVERIES_FIELD_NUMBER: _ClassVar[int]
    deliveries: _containers.RepeatedCompositeFieldContainer[Delivery]
    def __init__(self, deliveries: _Optional[_Iterable[_Union[Delivery, _Mapping]]] = ...) -> None: ...

class RedeliverRequest(_message.Message):
    __slots__ = ("id",)
    ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    def __init__(self, id: _Optional[str] = ...) -> None: ...

class ConnectSlackRequest(_message.Message):
    __slots__ = ("bot_token", "signing_secret", "channel", "labels", "session_prefix", "description", "provides")
    class LabelsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    BOT_TOKEN_FIELD_NUMBER: _ClassVar[int]
    SIGNING_SECRET_FIELD_NUMBER: _ClassVar[int]
    CHANNEL_FIELD_NUMBER: _ClassVar[int]
    LABELS_FIELD_NUMBER: _ClassVar[int]
    SESSION_PREFIX_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    PROVIDES_FIELD_NUMBER: _ClassVar[int]
    bot_token: str
    signing_secret: str
    channel: str
    labels: _containers.ScalarMap[str, str]
    session_prefix: str
    description: str
    provides: bool
    def __init__(self, bot_token: _Optional[str] = ..., signing_secret: _Optional[str] = ..., channel: _Optional[str] = ..., labels: _Optional[_Mapping[str, str]] = ..., session_prefix: _Optional[str] = ..., description: _Optional[str] = ..., provides: _Optional[bool] = ...) -> None: ...

class SlackApp(_message.Message):
    __slots__ = ("id", "team_id", "channel", "labels", "session_prefix", "description", "provides", "created_at")
    class LabelsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    ID_FIELD_NUMBER: _ClassVar[int]
    TEAM_ID_FIELD_NUMBER: _ClassVar[int]
    CHANNEL_FIELD_NUMBER: _ClassVar[int]
    LABELS_FIELD_NUMBER: _ClassVar[int]
    SESSION_PREFIX_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    PROVIDES_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    id: str
    team_id: str
    channel: str
    labels: _containers.ScalarMap[str, str]
    session_prefix: str
    description: str
    provides: bool
    created_at: _timestamp_pb2.Timestamp
    def __init__(self, id: _Optional[str] = ..., team_id: _Optional[str] = ..., channel: _Optional[str] = ..., labels: _Optional[_Mapping[str, str]] = ..., session_prefix: _Optional[str] = ..., description: _Optional[str] = ..., provides: _Optional[bool] = ..., created_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class ListSlackAppsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListSlackAppsResponse(_message.Message):
    __slots__ = ("apps",)
    APPS_FIELD_NUMBER: _ClassVar[int]
    apps: _containers.RepeatedCompositeFieldContainer[SlackApp]
    def __init__(self, apps: _Optional[_Iterable[_Union[SlackApp, _Mapping]]] = ...) -> None: ...

class DisconnectSlackRequest(_message.Message):
    __slots__ = ("id",)
    ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    def __init__(self, id: _Optional[str] = ...) -> None: ...

class DisconnectSlackResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ConnectTelegramRequest(_message.Message):
    __slots__ = ("bot_token", "chat_id", "labels", "session_prefix", "description", "provides")
    class LabelsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    BOT_TOKEN_FIELD_NUMBER: _ClassVar[int]
    CHAT_ID_FIELD_NUMBER: _ClassVar[int]
    LABELS_FIELD_NUMBER: _ClassVar[int]
    SESSION_PREFIX_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    PROVIDES_FIELD_NUMBER: _ClassVar[int]
    bot_token: str
    chat_id: str
    labels: _containers.ScalarMap[str, str]
    session_prefix: str
    description: str
    provides: bool
    def __init__(self, bot_token: _Optional[str] = ..., chat_id: _Optional[str] = ..., labels: _Optional[_Mapping[str, str]] = ..., session_prefix: _Optional[str] = ..., description: _Optional[str] = ..., provides: _Optional[bool] = ...) -> None: ...

class TelegramBot(_message.Message):
    __slots__ = ("id", "bot_user_id", "bot_username", "chat_id", "labels", "session_prefix", "description", "provides", "created_at")
    class LabelsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    ID_FIELD_NUMBER: _ClassVar[int]
    BOT_USER_ID_FIELD_NUMBER: _ClassVar[int]
    BOT_USERNAME_FIELD_NUMBER: _ClassVar[int]
    CHAT_ID_FIELD_NUMBER: _ClassVar[int]
    LABELS_FIELD_NUMBER: _ClassVar[int]
    SESSION_PREFIX_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    PROVIDES_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    id: str
    bot_user_id: int
    bot_username: str
    chat_id: str
    labels: _containers.ScalarMap[str, str]
    session_prefix: str
    description: str
    provides: bool
    created_at: _timestamp_pb2.Timestamp
    def __init__(self, id: _Optional[str] = ..., bot_user_id: _Optional[int] = ..., bot_username: _Optional[str] = ..., chat_id: _Optional[str] = ..., labels: _Optional[_Mapping[str, str]] = ..., session_prefix: _Optional[str] = ..., description: _Optional[str] = ..., provides: _Optional[bool] = ..., created_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class ListTelegramBotsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListTelegramBotsResponse(_message.Message):
    __slots__ = ("bots",)
    BOTS_FIELD_NUMBER: _ClassVar[int]
    bots: _containers.RepeatedCompositeFieldContainer[TelegramBot]
    def __init__(self, bots: _Optional[_Iterable[_Union[TelegramBot, _Mapping]]] = ...) -> None: ...

class DisconnectTelegramRequest(_message.Message):
    __slots__ = ("id",)
    ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    def __init__(self, id: _Optional[str] = ...) -> None: ...

class DisconnectTelegramResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ConnectEmailRequest(_message.Message):
    __slots__ = ("to", "labels", "session_prefix", "description", "provides")
    class LabelsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    TO_FIELD_NUMBER: _ClassVar[int]
    LABELS_FIELD_NUMBER: _ClassVar[int]
    SESSION_PREFIX_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    PROVIDES_FIELD_NUMBER: _ClassVar[int]
    to: _containers.RepeatedScalarFieldContainer[str]
    labels: _containers.ScalarMap[str, str]
    session_prefix: str
    description: str
    provides: bool
    def __init__(self, to: _Optional[_Iterable[str]] = ..., labels: _Optional[_Mapping[str, str]] = ..., session_prefix: _Optional[str] = ..., description: _Optional[str] = ..., provides: _Optional[bool] = ...) -> None: ...

class EmailRoute(_message.Message):
    __slots__ = ("id", "to", "labels", "session_prefix", "description", "provides", "created_at")
    class LabelsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    ID_FIELD_NUMBER: _ClassVar[int]
    TO_FIELD_NUMBER: _ClassVar[int]
    LABELS_FIELD_NUMBER: _ClassVar[int]
    SESSION_PREFIX_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    PROVIDES_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    id: str
    to: _containers.RepeatedScalarFieldContainer[str]
    labels: _containers.ScalarMap[str, str]
    session_prefix: str
    description: str
    provides: bool
    created_at: _timestamp_pb2.Timestamp
    def __init__(self, id: _Optional[str] = ..., to: _Optional[_Iterable[str]] = ..., labels: _Optional[_Mapping[str, str]] = ..., session_prefix: _Optional[str] = ..., description: _Optional[str] = ..., provides: _Optional[bool] = ..., created_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class ListEmailRoutesRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListEmailRoutesResponse(_message.Message):
    __slots__ = ("routes",)
    ROUTES_FIELD_NUMBER: _ClassVar[int]
    routes: _containers.RepeatedCompositeFieldContainer[EmailRoute]
    def __init__(self, routes: _Optional[_Iterable[_Union[EmailRoute, _Mapping]]] = ...) -> None: ...

class DisconnectEmailRequest(_message.Message):
    __slots__ = ("id",)
    ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    def __init__(self, id: _Optional[str] = ...) -> None: ...

class DisconnectEmailResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ConnectNtfyRequest(_message.Message):
    __slots__ = ("server_url", "topic", "token", "labels", "session_prefix", "description", "provides")
    class LabelsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    SERVER_URL_FIELD_NUMBER: _ClassVar[int]
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    LABELS_FIELD_NUMBER: _ClassVar[int]
    SESSION_PREFIX_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    PROVIDES_FIELD_NUMBER: _ClassVar[int]
    server_url: str
    topic: str
    token: str
    labels: _containers.ScalarMap[str, str]
    session_prefix: str
    description: str
    provides: bool
    def __init__(self, server_url: _Optional[str] = ..., topic: _Optional[str] = ..., token: _Optional[str] = ..., labels: _Optional[_Mapping[str, str]] = ..., session_prefix: _Optional[str] = ..., description: _Optional[str] = ..., provides: _Optional[bool] = ...) -> None: ...

class NtfyTopic(_message.Message):
    __slots__ = ("id", "server_url", "topic", "has_token", "labels", "session_prefix", "description", "provides", "created_at")
    class LabelsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    ID_FIELD_NUMBER: _ClassVar[int]
    SERVER_URL_FIELD_NUMBER: _ClassVar[int]
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    HAS_TOKEN_FIELD_NUMBER: _ClassVar[int]
    LABELS_FIELD_NUMBER: _ClassVar[int]
    SESSION_PREFIX_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    PROVIDES_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    id: str
    server_url: str
    topic: str
    has_token: bool
    labels: _containers.ScalarMap[str, str]
    session_prefix: str
    description: str
    provides: bool
    created_at: _timestamp_pb2.Timestamp
    def __init__(self, id: _Optional[str] = ..., server_url: _Optional[str] = ..., topic: _Optional[str] = ..., has_token: _Optional[bool] = ..., labels: _Optional[_Mapping[str, str]] = ..., session_prefix: _Optional[str] = ..., description: _Optional[str] = ..., provides: _Optional[bool] = ..., created_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class ListNtfyTopicsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListNtfyTopicsResponse(_message.Message):
    __slots__ = ("topics",)
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    topics: _containers.RepeatedCompositeFieldContainer[NtfyTopic]
    def __init__(self, topics: _Optional[_Iterable[_Union[NtfyTopic, _Mapping]]] = ...) -> None: ...

class DisconnectNtfyRequest(_message.Message):
    __slots__ = ("id",)
    ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    def __init__(self, id: _Optional[str] = ...) -> None: ...

class DisconnectNtfyResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...
