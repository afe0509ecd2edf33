//! When and how often the client tries again: on failures that say nothing about the
//! request itself (the server is draining or unreachable, the connection broke), with
//! exponential backoff and jitter.

use std::time::Duration;

use backon::{BackoffBuilder, ExponentialBuilder};
use tonic::Code;

use crate::{Error, Reason};

/// First and longest pause between attempts.
const MIN_DELAY: Duration = Duration::from_millis(100);
const MAX_DELAY: Duration = Duration::from_secs(5);

/// Pauses between attempts; endless (callers bound retries by their deadline).
pub(crate) fn backoff() -> impl Iterator<Item = Duration> {
    ExponentialBuilder::default()
        .with_min_delay(MIN_DELAY)
        .with_max_delay(MAX_DELAY)
        .with_jitter()
        .without_max_times()
        .build()
}

/// A failure worth retrying with the same request: the node is draining, the server
/// is unreachable, or the connection broke (no askgate reason at all).
pub(crate) fn is_retryable(error: &Error) -> bool {
    match error.reason() {
        Reason::ShuttingDown | Reason::BackendUnavailable => true,
        Reason::Unspecified => matches!(error.code(), Code::Unavailable | Code::Unknown),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use tonic::Status;

    use super::*;

    #[test]
    fn only_transport_failures_and_draining_are_retried() {
        assert!(is_retryable(
            &Status::unavailable("connection refused").into()
        ));
        assert!(is_retryable(&Status::unknown("h2 protocol error").into()));
        assert!(!is_retryable(&Status::invalid_argument("bad").into()));
        assert!(!is_retryable(&Status::not_found("gone").into()));
    }

    #[test]
    fn backoff_grows_to_its_cap() {
        let delays: Vec<Duration> = backoff().take(12).collect();
        assert!(delays.iter().all(|d| *d <= MAX_DELAY * 2), "{delays:?}");
        assert!(delays[11] >= MAX_DELAY, "{delays:?}");
    }
}
