"""Errors of askgate calls, routable by `Reason` (the `google.rpc.ErrorInfo` reason the
server attaches to every failure)."""

from __future__ import annotations

import enum
from urllib.parse import quote
from typing import Dict, List, Optional, Tuple

import grpc
from google.rpc import error_details_pb2

ERROR_DOMAIN = "askgate"


class Reason(str, enum.Enum):
    """The machine-routable reason of a failure: the proto's `askgate.v1.ErrorReason`
    (a test keeps this list equal to the proto's). `UNSPECIFIED`: no askgate reason (a
    transport failure, a proxy, or a reason this client does not know yet)."""

    UNSPECIFIED = "ERROR_REASON_UNSPECIFIED"
    EMPTY_QUESTIONS = "EMPTY_QUESTIONS"
    BAD_REQUEST = "BAD_REQUEST"
    BAD_INTENT = "BAD_INTENT"
    BAD_ANSWER = "BAD_ANSWER"
    NO_PROVIDER = "NO_PROVIDER"
    DUPLICATE_PROVIDER = "DUPLICATE_PROVIDER"
    CALLER_NOT_LIVE = "CALLER_NOT_LIVE"
    DELEGATED_CALLER = "DELEGATED_CALLER"
    ASK_CANCELLED = "ASK_CANCELLED"
    ASK_ABORTED = "ASK_ABORTED"
    ASK_EXPIRED = "ASK_EXPIRED"
    NOT_PENDING = "NOT_PENDING"
    TOO_MANY_PENDING = "TOO_MANY_PENDING"
    TOO_MANY_SUBSCRIBERS = "TOO_MANY_SUBSCRIBERS"
    RATE_LIMITED = "RATE_LIMITED"
    SHUTTING_DOWN = "SHUTTING_DOWN"
    BACKEND_UNAVAILABLE = "BACKEND_UNAVAILABLE"
    UNAUTHENTICATED = "UNAUTHENTICATED"
    PERMISSION_DENIED = "PERMISSION_DENIED"
    INTERNAL = "INTERNAL"
    TOO_MANY_AGENTS = "TOO_MANY_AGENTS"
    TOO_MANY_SESSIONS = "TOO_MANY_SESSIONS"
    NOT_FOUND = "NOT_FOUND"
    TOO_MANY_WEBHOOKS = "TOO_MANY_WEBHOOKS"
    ALREADY_APPROVED = "ALREADY_APPROVED"
    SELF_APPROVAL = "SELF_APPROVAL"
    CHANNEL_NOT_ALLOWED = "CHANNEL_NOT_ALLOWED"
    RECEIPT_CONSUMED = "RECEIPT_CONSUMED"
    REQUEST_ID_REUSED = "REQUEST_ID_REUSED"
    NOT_AN_APPROVER = "NOT_AN_APPROVER"
    DENIED_BY_POLICY = "DENIED_BY_POLICY"

    @classmethod
    def parse(cls, name: str) -> "Reason":
        try:
            return cls(name)
        except ValueError:
            return cls.UNSPECIFIED


class AskgateError(Exception):
    """A failed askgate call: its `reason`, gRPC `code`, message for humans and models,
    ErrorInfo `metadata` (e.g. `reason` of a cancel, `resolution` and `resolved_by` of
    NOT_PENDING) and BadRequest field `violations` as (field, description) pairs."""

    def __init__(
        self,
        reason: Reason,
        code: grpc.StatusCode,
        message: str,
        metadata: Optional[Dict[str, str]] = None,
        violations: Optional[List[Tuple[str, str]]] = None,
    ) -> None:
        super().__init__(f"{reason.value}: {message}")
        #: The next step for a person (e.g. how to get NO_PROVIDER's session followed),
        #: apart from `message`, which stays the text agents and models know.
        self.hint: Optional[str] = None
        self.reason = reason
        self.code = code
        self.message = message
        self.metadata: Dict[str, str] = dict(metadata or {})
        self.violations: List[Tuple[str, str]] = list(violations or [])

    def __str__(self) -> str:
        text = f"{self.reason.value}: {self.message}"
        return f"{text} (hint: {self.hint})" if self.hint else text

    @classmethod
    def from_rpc_error(
        cls, error: grpc.RpcError, addr: Optional[str] = None, session_id: Optional[str] = None
    ) -> "AskgateError":
        """The askgate error of a failed call (sync or asyncio). With the server's `addr`
        (and the ask's `session_id`) it carries a `hint` for a person where one helps."""
        failed = cls._of(error)
        failed.hint = _hint(failed, addr, session_id)
        return failed

    @classmethod
    def _of(cls, error: grpc.RpcError) -> "AskgateError":
        code: grpc.StatusCode = error.code()  # type: ignore[attr-defined]
        message: str = error.details() or ""  # type: ignore[attr-defined]
        reason, metadata, violations = Reason.UNSPECIFIED, {}, []
        status = _status_of(error)
        if status is not None:
            for detail in status.details:
                if detail.Is(error_details_pb2.ErrorInfo.DESCRIPTOR):
                    info = error_details_pb2.ErrorInfo()
                    detail.Unpack(info)
                    if info.domain == ERROR_DOMAIN:
                        reason = Reason.parse(info.reason)
                        metadata = dict(info.metadata)
                elif detail.Is(error_details_pb2.BadRequest.DESCRIPTOR):
                    bad = error_details_pb2.BadRequest()
                    detail.Unpack(bad)
                    violations = [(v.field, v.description) for v in bad.field_violations]
        if reason is Reason.UNSPECIFIED and code == grpc.StatusCode.UNAUTHENTICATED:
            reason = Reason.UNAUTHENTICATED
        if reason is Reason.UNSPECIFIED and code == grpc.StatusCode.PERMISSION_DENIED:
            reason = Reason.PERMISSION_DENIED
        return cls(reason, code, message, metadata, violations)

    @classmethod
    def local_deadline(cls) -> "AskgateError":
        return cls(Reason.ASK_EXPIRED, grpc.StatusCode.DEADLINE_EXCEEDED, "no answer before the deadline")

    @property
    def retryable(self) -> bool:
        """Whether the same request may go again (docs/protocol.md, "Retries"; the rule
        every askgate SDK applies): the node is draining (`SHUTTING_DOWN`) or cannot
        reach its store (`BACKEND_UNAVAILABLE`), or the call failed with no askgate
        reason and a code that says the transport broke (UNAVAILABLE, UNKNOWN, INTERNAL,
        CANCELLED: the server attaches a reason to every status it sends)."""
        if self.reason in (Reason.SHUTTING_DOWN, Reason.BACKEND_UNAVAILABLE):
            return True
        return self.reason is Reason.UNSPECIFIED and self.code in (
            grpc.StatusCode.UNAVAILABLE,
            grpc.StatusCode.UNKNOWN,
            grpc.StatusCode.INTERNAL,
            grpc.StatusCode.CANCELLED,
        )


def _status_of(error: grpc.RpcError):  # type: ignore[no-untyped-def]
    trailers = getattr(error, "trailing_metadata", None)
    if trailers is None:
        return None
    metadata = trailers()
    if metadata is None or not hasattr(metadata, "__iter__"):
        return None
    for key, value in metadata:
        if key == "grpc-status-details-bin":
            from google.rpc import status_pb2

            status = status_pb2.Status()
            status.ParseFromString(value)
            return status
    return None


__all__ = ["AskgateError", "Reason"]


def _hint(error: AskgateError, addr: Optional[str], session_id: Optional[str]) -> Optional[str]:
    """What a person does next after `error`, when this client can say."""
    if error.reason is Reason.NO_PROVIDER and session_id:
        console = ""
        if addr and addr.startswith(("http://", "https://")):
            page = quote(session_id, safe="/")
            console = f" (or open the console at {addr.rstrip('/')}/console/#/sessions/{page})"
        return (
            f"nobody follows session {session_id}: start `askgate answer --session {session_id}`"
            f"{console} first, or ask with hold=True to wait until someone does"
        )
    if error.reason is Reason.UNSPECIFIED and error.code == grpc.StatusCode.UNAVAILABLE and addr:
        return f"cannot reach askgate at {addr}: is `askgate serve` running there?"
    return None
