//! The one place where a domain error becomes a `tonic::Status`: the code of DESIGN.md
//! "Errors", `google.rpc.ErrorInfo { reason, domain: "askgate" }` with the session and
//! rpc ids, and `google.rpc.BadRequest` field violations for validation failures.

use std::collections::HashMap;

use tonic::{Code, Status};
use tonic_types::{ErrorDetails, FieldViolation, StatusExt};
use tracing::error;

use crate::domain::AskError;

/// The `ErrorInfo.domain` of every askgate error.
pub const ERROR_DOMAIN: &str = "askgate";

/// The gRPC code of each failure.
pub fn code(error: &AskError) -> Code {
    match error {
        AskError::EmptyQuestions
        | AskError::BadRequest(_)
        | AskError::BadIntent(_)
        | AskError::BadAnswer(_) => Code::InvalidArgument,
        AskError::NoProvider | AskError::CallerNotLive | AskError::DelegatedCaller => {
            Code::FailedPrecondition
        }
        AskError::DuplicateProvider => Code::AlreadyExists,
        AskError::AskCancelled { .. } => Code::Aborted,
        AskError::AskAborted => Code::Cancelled,
        AskError::AskExpired => Code::DeadlineExceeded,
        AskError::NotPending { .. } => Code::NotFound,
        AskError::TooManyPending(_)
        | AskError::TooManySubscribers(_)
        | AskError::RateLimited(_) => Code::ResourceExhausted,
        AskError::Unauthenticated(_) => Code::Unauthenticated,
        AskError::PermissionDenied(_) => Code::PermissionDenied,
        AskError::ShuttingDown | AskError::BackendUnavailable(_) => Code::Unavailable,
        AskError::Internal(_) => Code::Internal,
    }
}

/// Builds the status for `error`, naming the session and rpc where known.
pub fn to_status(error: &AskError, session_id: &str, rpc_id: Option<&str>) -> Status {
    let code = code(error);
    if code == Code::Internal {
        error!(%error, session_id, rpc_id, "internal error");
    }
    let mut metadata = HashMap::new();
    if !session_id.is_empty() {
        metadata.insert("session_id".to_owned(), session_id.to_owned());
    }
    if let Some(rpc_id) = rpc_id.filter(|id| !id.is_empty()) {
        metadata.insert("rpc_id".to_owned(), rpc_id.to_owned());
    }
    match error {
        AskError::NotPending {
            settled: Some(settled),
        } => {
            let resolution = settled.resolution.as_str_name().to_owned();
            metadata.insert("resolution".to_owned(), resolution);
            metadata.insert("resolved_by".to_owned(), settled.resolved_by.clone());
        }
        AskError::AskCancelled {
            reason: Some(reason),
        } => {
            metadata.insert("reason".to_owned(), reason.clone());
        }
        _ => {}
    }
    let mut details = ErrorDetails::with_error_info(error.reason(), ERROR_DOMAIN, metadata);
    let violations: Vec<FieldViolation> = error
        .violations()
        .iter()
        .map(|v| FieldViolation::new(&v.field, &v.description))
        .collect();
    if !violations.is_empty() {
        details.set_bad_request(violations);
    }
    Status::with_error_details(code, error.to_string(), details)
}

/// tonic refuses a request larger than the decoding limit with OUT_OF_RANGE and no
/// ErrorInfo before any handler runs. This response map (mounted as a tower layer)
/// turns that refusal into askgate's BAD_REQUEST, so oversize input is routable like
/// every other failure.
pub fn map_oversize_request(
    response: http::Response<tonic::body::Body>,
) -> http::Response<tonic::body::Body> {
    const OUT_OF_RANGE: &str = "11";
    const TONIC_TOO_LARGE: &str = "decoded message length too large";
    if response.headers().get("grpc-status").map(|v| v.as_bytes()) != Some(OUT_OF_RANGE.as_bytes())
    {
        return response;
    }
    let Some(status) = Status::from_header_map(response.headers()) else {
        return response;
    };
    if !status.message().contains(TONIC_TOO_LARGE) {
        return response;
    }
    let description = status
        .message()
        .split_once(": ")
        .map_or(status.message(), |(_, detail)| detail);
    let error = AskError::bad_request(
        "request",
        format!("the request message is too large ({description})"),
    );
    to_status(&error, "", None).into_http()
}

#[cfg(test)]
mod tests {
    use askgate_proto::v1::Resolution;

    use super::*;
    use crate::domain::Violation;

    #[test]
    fn every_reason_gets_its_documented_code() {
        let table = [
            (AskError::EmptyQuestions, Code::InvalidArgument),
            (AskError::bad_request("f", "x"), Code::InvalidArgument),
            (
                AskError::BadIntent(Violation::new("f", "x")),
                Code::InvalidArgument,
            ),
            (AskError::BadAnswer(vec![]), Code::InvalidArgument),
            (AskError::NoProvider, Code::FailedPrecondition),
            (AskError::DuplicateProvider, Code::AlreadyExists),
            (AskError::CallerNotLive, Code::FailedPrecondition),
            (AskError::DelegatedCaller, Code::FailedPrecondition),
            (AskError::AskCancelled { reason: None }, Code::Aborted),
            (AskError::AskAborted, Code::Cancelled),
            (AskError::AskExpired, Code::DeadlineExceeded),
            (AskError::not_pending(), Code::NotFound),
            (
                AskError::TooManyPending("x".into()),
                Code::ResourceExhausted,
            ),
            (AskError::ShuttingDown, Code::Unavailable),
            (AskError::BackendUnavailable("x".into()), Code::Unavailable),
            (
                AskError::TooManySubscribers("x".into()),
                Code::ResourceExhausted,
            ),
            (AskError::RateLimited("x".into()), Code::ResourceExhausted),
            (AskError::Unauthenticated("x".into()), Code::Unauthenticated),
            (
                AskError::PermissionDenied("x".into()),
                Code::PermissionDenied,
            ),
        ];
        for (error, expected) in table {
            let status = to_status(&error, "s", Some("r"));
            assert_eq!(status.code(), expected, "{error:?}");
            let details = status.get_error_details();
            let info = details.error_info().expect("ErrorInfo");
            assert_eq!(info.reason, error.reason());
            assert_eq!(info.domain, ERROR_DOMAIN);
            assert_eq!(info.metadata["session_id"], "s");
            assert_eq!(info.metadata["rpc_id"], "r");
        }
    }

    #[test]
    fn validation_failures_carry_field_violations() {
        let error = AskError::BadAnswer(vec![Violation::new("answers[0].id", "unknown")]);
        let details = to_status(&error, "s", None).get_error_details();
        let bad = details.bad_request().expect("BadRequest");
        assert_eq!(bad.field_violations[0].field, "answers[0].id");
        assert!(
            !details
                .error_info()
                .expect("info")
                .metadata
                .contains_key("rpc_id")
        );
    }

    #[test]
    fn not_pending_names_the_remembered_resolution() {
        let error = AskError::NotPending {
            settled: Some(crate::domain::Settled {
                resolution: Resolution::Cancelled,
                resolved_by: "ana".into(),
            }),
        };
        let details = to_status(&error, "s", Some("r")).get_error_details();
        let metadata = &details.error_info().expect("info").metadata;
        assert_eq!(metadata["resolution"], "CANCELLED");
        assert_eq!(metadata["resolved_by"], "ana");
    }
}
