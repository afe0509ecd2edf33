//! Errors of askgate calls, routable by [`Reason`] (the `google.rpc.ErrorInfo` reason
//! the server attaches to every failure).

use std::collections::HashMap;

use tonic::{Code, Status};
use tonic_types::StatusExt;

/// The machine-routable reason of a failure: the proto's `askgate.v1.ErrorReason`, so
/// the server and every client share one list. [`Reason::Unspecified`] stands for no
/// askgate reason (a transport failure, a proxy, or a reason this client does not know
/// yet); [`Error::code`] still tells the gRPC code. `Display` and `FromStr` use the
/// wire names (`NOT_PENDING`).
pub use askgate_proto::v1::ErrorReason as Reason;

/// A failed askgate call.
#[derive(Debug, thiserror::Error)]
#[error(
    "{reason} ({code:?}): {message}{hint}",
    code = status.code(),
    message = status.message(),
    hint = hint.as_deref().map(|h| format!(" (hint: {h})")).unwrap_or_default()
)]
pub struct Error {
    status: Status,
    reason: Reason,
    metadata: HashMap<String, String>,
    violations: Vec<(String, String)>,
    hint: Option<String>,
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
            hint: None,
        }
    }

    pub(crate) fn transport(error: impl std::error::Error + Send + Sync + 'static) -> Self {
        Status::from_error(Box::new(error)).into()
    }

    /// The next step for a person (how to get a NO_PROVIDER session followed), apart
    /// from [`Error::message`], which stays the text agents and models know. Shown at
    /// the end of `Display`.
    pub fn hint(&self) -> Option<&str> {
        self.hint.as_deref()
    }

    /// This error with NO_PROVIDER's hint for an ask in `session_id`.
    pub(crate) fn with_session_hint(mut self, session_id: &str) -> Self {
        if self.reason == Reason::NoProvider && !session_id.is_empty() {
            self.hint = Some(format!(
                "nobody follows session {session_id}: start `askgate answer --session \
                 {session_id}` (or open the session in the console) first, or ask with \
                 Ask::hold_unattended to wait until someone does"
            ));
        }
        self
    }

    /// Whether the call never reached an askgate server: UNAVAILABLE with no askgate
    /// reason (nothing listens, the name does not resolve, TLS failed, the connection
    /// broke).
    pub fn is_unreachable(&self) -> bool {
        self.reason == Reason::Unspecified && self.code() == Code::Unavailable
    }

    /// This error, if the server at `target` was unreachable, said as a person needs
    /// it: the address, every cause (tonic's own message is only "tcp connect error"),
    /// and whether `askgate serve` runs there. Any other error is returned as it is.
    pub fn at(self, target: &str) -> Self {
        if !self.is_unreachable() {
            return self;
        }
        let mut causes = vec![self.status.message().to_owned()];
        let mut source = std::error::Error::source(&self.status);
        while let Some(cause) = source {
            let text = cause.to_string();
            if !causes.iter().any(|known| known.contains(&text)) {
                causes.push(text);
            }
            source = cause.source();
        }
        causes.retain(|c| !c.is_empty() && c != "transport error");
        Status::unavailable(format!(
            "cannot reach askgate at {target} ({}): is `askgate serve` running there?",
            causes.join(": ")
        ))
        .into()
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

    /// Every `ErrorInfo` metadata entry the server sent (`resolved_by` of a
    /// [`Reason::NotPending`] among them), in no particular order.
    pub fn metadata_entries(&self) -> impl Iterator<Item = (&str, &str)> {
        self.metadata.iter().map(|(k, v)| (k.as_str(), v.as_str()))
    }

    /// `(field, description)` pairs of a [`Reason::BadRequest`] or
    /// [`Reason::BadAnswer`].
    pub fn violations(&self) -> &[(String, String)] {
        &self.violations
    }

    /// Whether the same request may go again (docs/protocol.md, "Retries"; every
    /// askgate SDK applies this one rule, checked against tests/scenarios/scenarios.json):
    /// the node is draining (SHUTTING_DOWN) or cannot reach its store
    /// (BACKEND_UNAVAILABLE), or the call failed with no askgate reason and a code that
    /// says the transport broke: UNAVAILABLE (unreachable, connection refused or reset),
    /// UNKNOWN and INTERNAL (an HTTP/2 stream reset or protocol error, a proxy's), or
    /// CANCELLED (a connection that closes under a queued call surfaces as hyper's
    /// "operation was canceled"). The server attaches a reason to every status it sends,
    /// so none of these is a refusal; the ask's local deadline is told apart before this.
    /// [`Client::ask`] retries these itself, within its retry budget.
    ///
    /// [`Client::ask`]: crate::Client::ask
    pub fn retryable(&self) -> bool {
        match self.reason() {
            Reason::ShuttingDown | Reason::BackendUnavailable => true,
            Reason::Unspecified => matches!(
                self.code(),
                Code::Unavailable | Code::Unknown | Code::Internal | Code::Cancelled
            ),
            _ => false,
        }
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
                info.reason.parse().unwrap_or(Reason::Unspecified),
                info.metadata.clone(),
            ),
            _ => match status.code() {
                Code::Unauthenticated => (Reason::Unauthenticated, HashMap::new()),
                Code::PermissionDenied => (Reason::PermissionDenied, HashMap::new()),
                _ => (Reason::Unspecified, HashMap::new()),
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
            hint: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_reason_of_the_proto_round_trips_through_its_wire_name() {
        let all: Vec<Reason> = Reason::all().collect();
        assert!(all.len() >= 22, "{all:?}");
        for reason in all {
            let name = reason.to_string();
            assert_eq!(name.parse::<Reason>(), Ok(reason));
        }
        assert!("NOPE".parse::<Reason>().is_err());
        assert!("ERROR_REASON_UNSPECIFIED".parse::<Reason>().is_err());
    }

    #[test]
    fn a_status_without_error_info_is_unknown() {
        let error = Error::from(Status::unavailable("connection refused"));
        assert_eq!(error.reason(), Reason::Unspecified);
        assert_eq!(error.code(), Code::Unavailable);
    }
}
