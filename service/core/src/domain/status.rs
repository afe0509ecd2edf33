//! The one place where a domain error becomes a `tonic::Status`: the code of docs/protocol.md
//! "Errors", `google.rpc.ErrorInfo { reason, domain: "askgate" }` with the session and
//! rpc ids, and `google.rpc.BadRequest` field violations for validation failures.

use std::collections::HashMap;

use askgate_proto::v1::CancelSource;
use tonic::{Code, Status};
use tonic_types::{ErrorDetails, FieldViolation, StatusExt};
use tracing::error;

use crate::domain::{Error, bounded, error::MAX_VIOLATIONS, validate};

/// The `ErrorInfo.domain` of every askgate error.
pub const ERROR_DOMAIN: &str = "askgate";

/// The gRPC code of each failure.
pub fn code(error: &Error) -> Code {
    match error {
        Error::EmptyQuestions
        | Error::BadRequest(_)
        | Error::BadIntent(_)
        | Error::BadAnswer(_) => Code::InvalidArgument,
        Error::NoProvider
        | Error::CallerNotLive
        | Error::DelegatedCaller
        | Error::ReceiptConsumed { .. } => Code::FailedPrecondition,
        Error::DuplicateProvider | Error::AlreadyApproved | Error::RequestIdReused => {
            Code::AlreadyExists
        }
        Error::AskCancelled { .. } => Code::Aborted,
        Error::AskAborted => Code::Cancelled,
        Error::AskExpired => Code::DeadlineExceeded,
        Error::NotPending { .. } | Error::NotFound(_) => Code::NotFound,
        Error::TooManyPending(_)
        | Error::TooManyWebhooks(_)
        | Error::TooManySubscribers(_)
        | Error::TooManyAgents(_)
        | Error::TooManySessions(_)
        | Error::RateLimited(_) => Code::ResourceExhausted,
        Error::Unauthenticated(_) => Code::Unauthenticated,
        Error::PermissionDenied(_)
        | Error::SelfApproval
        | Error::ChannelNotAllowed { .. }
        | Error::NotAnApprover { .. }
        | Error::DeniedByPolicy { .. } => Code::PermissionDenied,
        Error::ShuttingDown | Error::BackendUnavailable(_) => Code::Unavailable,
        Error::Internal(_) => Code::Internal,
    }
}

/// Bounds of what one status carries (docs/protocol.md "Errors are bounded": the message and
/// the details together stay under 4 KiB whatever the input, far below the 8-16 KiB
/// header limits of common gRPC clients). The domain already echoes at most
/// [`MAX_ECHO_BYTES`](crate::domain::error::MAX_ECHO_BYTES) of any input; these are
/// the backstops.
const MAX_MESSAGE_BYTES: usize = 512;
const MAX_FIELD_BYTES: usize = 64;
const MAX_DESCRIPTION_BYTES: usize = 120;
/// An identifier or subject in ErrorInfo metadata.
const MAX_METADATA_ID_BYTES: usize = 128;
/// The human's cancel reason, which the agent is meant to read (validated to at most
/// this much already).
const MAX_METADATA_REASON_BYTES: usize = crate::domain::validate::MAX_CANCEL_REASON_BYTES;

/// A receipt of a failed ask (it lists no approvers, so it is far smaller).
const MAX_METADATA_RECEIPT_BYTES: usize = 2048;

/// `text` cut to at most `max` bytes on a character boundary, with `…` when cut.
fn cut(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let mut end = max.saturating_sub('…'.len_utf8());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

/// Builds the status for `error`, naming the session and rpc where known. An invalid
/// session_id or rpc_id is left out of the metadata rather than copied.
pub fn to_status(error: &Error, session_id: &str, rpc_id: Option<&str>) -> Status {
    to_status_with_receipt(error, session_id, rpc_id, None)
}

/// [`to_status`] for a failed Ask of an ask with an action: the receipt of its
/// resolution (docs/approvals.md) in the metadata key `receipt`.
pub fn to_status_with_receipt(
    error: &Error,
    session_id: &str,
    rpc_id: Option<&str>,
    receipt: Option<&str>,
) -> Status {
    let code = code(error);
    if code == Code::Internal {
        error!(%error, session_id = %bounded(session_id), rpc_id = rpc_id.map(bounded).map(tracing::field::display), "internal error");
    }
    let mut metadata = HashMap::new();
    if !session_id.is_empty() && validate::session_id("session_id", session_id).is_ok() {
        metadata.insert("session_id".to_owned(), session_id.to_owned());
    }
    if let Some(rpc_id) = rpc_id.filter(|id| validate::rpc_id(id).is_ok()) {
        metadata.insert("rpc_id".to_owned(), rpc_id.to_owned());
    }
    match error {
        Error::NotPending {
            settled: Some(settled),
        } => {
            let resolution = settled.resolution.as_str_name().to_owned();
            metadata.insert("resolution".to_owned(), resolution);
            metadata.insert(
                "resolved_by".to_owned(),
                cut(&settled.resolved_by, MAX_METADATA_ID_BYTES),
            );
        }
        Error::NotAnApprover { approvers } => {
            metadata.insert("approvers".to_owned(), approvers.clone());
        }
        Error::DeniedByPolicy { policy, reason } => {
            metadata.insert("policy".to_owned(), cut(policy, MAX_METADATA_ID_BYTES));
            metadata.insert("reason".to_owned(), cut(reason, MAX_METADATA_REASON_BYTES));
        }
        Error::ReceiptConsumed { consumed_at } => {
            metadata.insert(
                "consumed_at".to_owned(),
                cut(consumed_at, MAX_METADATA_ID_BYTES),
            );
        }
        Error::AskCancelled { reason, origin } => {
            if let Some(reason) = reason {
                metadata.insert("reason".to_owned(), cut(reason, MAX_METADATA_REASON_BYTES));
            }
            // Only a UI closing says so: a person's cancel keeps the metadata it had.
            if *origin != CancelSource::Unspecified {
                metadata.insert("cancel_source".to_owned(), origin.as_str_name().to_owned());
            }
        }
        _ => {}
    }
    if let Some(receipt) = receipt.filter(|r| r.len() <= MAX_METADATA_RECEIPT_BYTES) {
        metadata.insert("receipt".to_owned(), receipt.to_owned());
    }
    let mut details = ErrorDetails::with_error_info(error.reason(), ERROR_DOMAIN, metadata);
    let violations: Vec<FieldViolation> = error
        .violations()
        .iter()
        .take(MAX_VIOLATIONS)
        .map(|v| {
            FieldViolation::new(
                cut(&v.field, MAX_FIELD_BYTES),
                cut(&v.description, MAX_DESCRIPTION_BYTES),
            )
        })
        .collect();
    if !violations.is_empty() {
        details.set_bad_request(violations);
    }
    Status::with_error_details(code, cut(&error.to_string(), MAX_MESSAGE_BYTES), details)
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
    let error = Error::bad_request(
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
            (Error::EmptyQuestions, Code::InvalidArgument),
            (Error::bad_request("f", "x"), Code::InvalidArgument),
            (
                Error::BadIntent(Violation::new("f", "x")),
                Code::InvalidArgument,
            ),
            (Error::BadAnswer(vec![]), Code::InvalidArgument),
            (Error::NoProvider, Code::FailedPrecondition),
            (Error::DuplicateProvider, Code::AlreadyExists),
            (Error::CallerNotLive, Code::FailedPrecondition),
            (Error::DelegatedCaller, Code::FailedPrecondition),
            (
                Error::AskCancelled {
                    reason: None,
                    origin: CancelSource::Unspecified,
                },
                Code::Aborted,
            ),
            (Error::AskAborted, Code::Cancelled),
            (Error::AskExpired, Code::DeadlineExceeded),
            (Error::not_pending(), Code::NotFound),
            (Error::TooManyPending("x".into()), Code::ResourceExhausted),
            (Error::ShuttingDown, Code::Unavailable),
            (Error::BackendUnavailable("x".into()), Code::Unavailable),
            (
                Error::TooManySubscribers("x".into()),
                Code::ResourceExhausted,
            ),
            (Error::RateLimited("x".into()), Code::ResourceExhausted),
            (Error::TooManyAgents("x".into()), Code::ResourceExhausted),
            (Error::TooManySessions("x".into()), Code::ResourceExhausted),
            (Error::NotFound("x".into()), Code::NotFound),
            (Error::TooManyWebhooks("x".into()), Code::ResourceExhausted),
            (Error::Internal("x".into()), Code::Internal),
            (Error::Unauthenticated("x".into()), Code::Unauthenticated),
            (Error::PermissionDenied("x".into()), Code::PermissionDenied),
            (Error::AlreadyApproved, Code::AlreadyExists),
            (Error::RequestIdReused, Code::AlreadyExists),
            (Error::SelfApproval, Code::PermissionDenied),
            (
                Error::ChannelNotAllowed {
                    allowed: Vec::new(),
                },
                Code::PermissionDenied,
            ),
            (
                Error::ReceiptConsumed {
                    consumed_at: String::new(),
                },
                Code::FailedPrecondition,
            ),
            (
                Error::NotAnApprover {
                    approvers: "ana".into(),
                },
                Code::PermissionDenied,
            ),
            (
                Error::DeniedByPolicy {
                    policy: "prod-freeze".into(),
                    reason: "prod is frozen".into(),
                },
                Code::PermissionDenied,
            ),
        ];
        // Every reason of the proto's ErrorReason is produced by some error, and no
        // error produces one that is not there.
        let produced: std::collections::BTreeSet<_> =
            table.iter().map(|(e, _)| e.error_reason()).collect();
        let listed: std::collections::BTreeSet<_> = askgate_proto::v1::ErrorReason::all().collect();
        assert_eq!(produced, listed);
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
        let error = Error::BadAnswer(vec![Violation::new("answers[0].id", "unknown")]);
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

    /// The budget holds for the worst the backstops allow: every violation, field,
    /// description and metadata value at its cap.
    #[test]
    fn the_largest_possible_status_stays_under_4_kib() {
        let mega = "é".repeat(512 * 1024);
        let violations = (0..100).map(|_| Violation::new(&mega, &mega)).collect();
        let cases = [
            Error::BadAnswer(violations),
            Error::AskCancelled {
                reason: Some(mega.clone()),
                origin: CancelSource::UiClosed,
            },
            Error::NotPending {
                settled: Some(crate::domain::Settled {
                    resolution: Resolution::Answered,
                    resolved_by: mega.clone(),
                }),
            },
        ];
        let valid_id = "r".repeat(validate::MAX_ID_BYTES);
        let valid_session = "s".repeat(validate::MAX_SESSION_ID_CHARS);
        for error in cases {
            for (session, rpc) in [(&mega, &mega), (&valid_session, &valid_id)] {
                let status = to_status(&error, session, Some(rpc));
                let wire = status.message().len() + status.details().len().div_ceil(3) * 4;
                assert!(
                    wire < 4096,
                    "{}: {wire} bytes ({} message, {} details)",
                    error.reason(),
                    status.message().len(),
                    status.details().len()
                );
            }
        }
    }

    #[test]
    fn not_pending_names_the_remembered_resolution() {
        let error = Error::NotPending {
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

    mod properties {
        use askgate_proto::v1::{AskRequest, Question, QuestionOption};
        use proptest::{collection::vec, option, prelude::*};

        use super::*;
        use crate::domain::Limits;

        /// Any text, long ones and control characters included.
        fn text() -> impl Strategy<Value = String> {
            prop_oneof![
                "\\PC{0,12}",
                "[ a\t]{0,3}",
                (any::<char>(), 0usize..3000).prop_map(|(c, n)| c.to_string().repeat(n)),
            ]
        }

        fn request() -> impl Strategy<Value = AskRequest> {
            let option = (text(), option::of(text()))
                .prop_map(|(label, description)| QuestionOption { label, description });
            let question = (
                text(),
                text(),
                option::of(text()),
                vec(option, 0..40),
                any::<bool>(),
            )
                .prop_map(|(id, question, header, options, multi_select)| Question {
                    id,
                    question,
                    header,
                    options,
                    multi_select,
                    ..Default::default()
                });
            (
                text(),
                vec(question, 0..40),
                text(),
                vec((text(), text()), 0..40),
            )
                .prop_map(|(session_id, questions, request_id, labels)| AskRequest {
                    session_id,
                    questions,
                    request_id,
                    labels: labels.into_iter().collect(),
                    ..Default::default()
                })
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(128))]

            /// Whatever the request: validation does not panic, and the error it
            /// gives stays under 4 KiB on the wire (docs/protocol.md "Errors are bounded").
            #[test]
            fn validation_errors_are_bounded(request in request(), rpc_id in text()) {
                if let Err(error) = crate::domain::validate::ask(&request, &Limits::default()) {
                    let status = to_status(&error, &request.session_id, Some(&rpc_id));
                    let wire = status.message().len() + status.details().len().div_ceil(3) * 4;
                    prop_assert!(wire < 4096, "{wire} bytes");
                    prop_assert_eq!(status.code(), Code::InvalidArgument);
                }
            }
        }
    }
}
