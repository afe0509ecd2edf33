//! Errors of askgate calls, routable by [`Reason`] (the `google.rpc.ErrorInfo` reason
//! the server attaches to every failure).

use std::{collections::HashMap, fmt, str::FromStr};

use tonic::{Code, Status};
use tonic_types::StatusExt;

/// The machine-routable reason of a failure (DESIGN.md "Errors").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Reason {
    /// The ask had no question.
    EmptyQuestions,
    /// A request field is invalid; see [`Error::violations`].
    BadRequest,
    /// A question's intent breaks a rule.
    BadIntent,
    /// The answer batch is invalid; the ask stays pending.
    BadAnswer,
    /// Nobody is subscribed to the session.
    NoProvider,
    /// Another exclusive subscriber holds the session.
    DuplicateProvider,
    /// The calling agent is not attached with that incarnation.
    CallerNotLive,
    /// The calling agent is owned by another live agent.
    DelegatedCaller,
    /// A human cancelled the batch; the reason is in [`Error::metadata`] `reason`.
    AskCancelled,
    /// The ask was aborted before a human answered.
    AskAborted,
    /// No answer before the deadline.
    AskExpired,
    /// No pending ask with that rpc_id in that session (resolved already, or never
    /// there); [`Error::metadata`] `resolution` says how it ended when known.
    NotPending,
    /// A limit on pending asks was reached.
    TooManyPending,
    /// A limit on subscribers per session was reached.
    TooManySubscribers,
    /// The tenant's ask rate limit was reached; retry later.
    RateLimited,
    /// The node is draining; retry with the same request_id.
    ShuttingDown,
    /// The node cannot reach its shared store (Redis); retry with the same request_id.
    BackendUnavailable,
    /// No valid credential.
    Unauthenticated,
    /// The credential may not do this.
    PermissionDenied,
    /// The server failed.
    Internal,
    /// No askgate reason: a transport failure, a proxy, or a reason this client does
    /// not know yet. [`Error::code`] still tells the gRPC code.
    Unknown,
}

impl Reason {
    /// The wire name, e.g. `"NOT_PENDING"`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::EmptyQuestions => "EMPTY_QUESTIONS",
            Self::BadRequest => "BAD_REQUEST",
            Self::BadIntent => "BAD_INTENT",
            Self::BadAnswer => "BAD_ANSWER",
            Self::NoProvider => "NO_PROVIDER",
            Self::DuplicateProvider => "DUPLICATE_PROVIDER",
            Self::CallerNotLive => "CALLER_NOT_LIVE",
            Self::DelegatedCaller => "DELEGATED_CALLER",
            Self::AskCancelled => "ASK_CANCELLED",
            Self::AskAborted => "ASK_ABORTED",
            Self::AskExpired => "ASK_EXPIRED",
            Self::NotPending => "NOT_PENDING",
            Self::TooManyPending => "TOO_MANY_PENDING",
            Self::TooManySubscribers => "TOO_MANY_SUBSCRIBERS",
            Self::RateLimited => "RATE_LIMITED",
            Self::ShuttingDown => "SHUTTING_DOWN",
            Self::BackendUnavailable => "BACKEND_UNAVAILABLE",
            Self::Unauthenticated => "UNAUTHENTICATED",
            Self::PermissionDenied => "PERMISSION_DENIED",
            Self::Internal => "INTERNAL",
            Self::Unknown => "UNKNOWN",
        }
    }
}

impl FromStr for Reason {
    type Err = ();

    fn from_str(s: &str) -> Result<Self, ()> {
        const ALL: [Reason; 20] = [
            Reason::EmptyQuestions,
            Reason::BadRequest,
            Reason::BadIntent,
            Reason::BadAnswer,
            Reason::NoProvider,
            Reason::DuplicateProvider,
            Reason::CallerNotLive,
            Reason::DelegatedCaller,
            Reason::AskCancelled,
            Reason::AskAborted,
            Reason::AskExpired,
            Reason::NotPending,
            Reason::TooManyPending,
            Reason::TooManySubscribers,
            Reason::RateLimited,
            Reason::ShuttingDown,
            Reason::BackendUnavailable,
            Reason::Unauthenticated,
            Reason::PermissionDenied,
            Reason::Internal,
        ];
        ALL.into_iter().find(|r| r.as_str() == s).ok_or(())
    }
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A failed askgate call.
#[derive(Debug, thiserror::Error)]
#[error("{reason} ({code:?}): {message}", code = status.code(), message = status.message())]
pub struct Error {
    status: Status,
    reason: Reason,
    metadata: HashMap<String, String>,
    violations: Vec<(String, String)>,
}

/// tonic's channel enforces the request's `grpc-timeout` itself and reports its expiry
/// as CANCELLED "Timeout expired", with no askgate ErrorInfo.
pub(crate) fn is_local_timeout(status: &Status) -> bool {
    status.code() == Code::Cancelled
        && status.message() == "Timeout expired"
        && status.get_error_details().error_info().is_none()
}

impl Error {
    /// The ask's own deadline passed on this side.
    pub(crate) fn local_deadline() -> Self {
        Self {
            status: Status::deadline_exceeded("no answer before the deadline"),
            reason: Reason::AskExpired,
            metadata: HashMap::new(),
            violations: Vec::new(),
        }
    }

    pub(crate) fn transport(error: impl std::error::Error + Send + Sync + 'static) -> Self {
        Status::from_error(Box::new(error)).into()
    }

    /// What went wrong, by name.
    pub fn reason(&self) -> Reason {
        self.reason
    }

    /// The gRPC code.
    pub fn code(&self) -> Code {
        self.status.code()
    }

    /// The message for humans and models.
    pub fn message(&self) -> &str {
        self.status.message()
    }

    /// `ErrorInfo` metadata: `session_id`, `rpc_id` where known, `reason` of a
    /// cancellation, `resolution` of a [`Reason::NotPending`].
    pub fn metadata(&self, key: &str) -> Option<&str> {
        self.metadata.get(key).map(String::as_str)
    }

    /// `(field, description)` pairs of a [`Reason::BadRequest`] or
    /// [`Reason::BadAnswer`].
    pub fn violations(&self) -> &[(String, String)] {
        &self.violations
    }

    /// The status as received.
    pub fn status(&self) -> &Status {
        &self.status
    }
}

impl From<Status> for Error {
    fn from(status: Status) -> Self {
        let details = status.get_error_details();
        let (reason, metadata) = match details.error_info() {
            Some(info) if info.domain == "askgate" => (
                info.reason.parse().unwrap_or(Reason::Unknown),
                info.metadata.clone(),
            ),
            _ => match status.code() {
                Code::Unauthenticated => (Reason::Unauthenticated, HashMap::new()),
                Code::PermissionDenied => (Reason::PermissionDenied, HashMap::new()),
                _ => (Reason::Unknown, HashMap::new()),
            },
        };
        let violations = details
            .bad_request()
            .map(|b| {
                b.field_violations
                    .iter()
                    .map(|v| (v.field.clone(), v.description.clone()))
                    .collect()
            })
            .unwrap_or_default();
        Self {
            status,
            reason,
            metadata,
            violations,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_reason_round_trips_through_its_name() {
        for name in [
            "EMPTY_QUESTIONS",
            "BAD_REQUEST",
            "BAD_INTENT",
            "BAD_ANSWER",
            "NO_PROVIDER",
            "DUPLICATE_PROVIDER",
            "CALLER_NOT_LIVE",
            "DELEGATED_CALLER",
            "ASK_CANCELLED",
            "ASK_ABORTED",
            "ASK_EXPIRED",
            "NOT_PENDING",
            "TOO_MANY_PENDING",
            "TOO_MANY_SUBSCRIBERS",
            "RATE_LIMITED",
            "SHUTTING_DOWN",
            "BACKEND_UNAVAILABLE",
            "UNAUTHENTICATED",
            "PERMISSION_DENIED",
            "INTERNAL",
        ] {
            let reason: Reason = name.parse().expect(name);
            assert_eq!(reason.as_str(), name);
        }
        assert!("NOPE".parse::<Reason>().is_err());
    }

    #[test]
    fn a_status_without_error_info_is_unknown() {
        let error = Error::from(Status::unavailable("connection refused"));
        assert_eq!(error.reason(), Reason::Unknown);
        assert_eq!(error.code(), Code::Unavailable);
    }
}
