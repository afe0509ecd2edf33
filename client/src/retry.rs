//! When and how often the client tries again: on failures that say nothing about the
//! request itself (the server is draining or unreachable, the connection broke), with
//! exponential backoff and jitter.

use std::time::Duration;

use backon::{BackoffBuilder, ExponentialBuilder};

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

/// An attempt that failed after waiting at least this long at a server had reached it
/// (the ask was pending there): the failures before it are not part of the streak.
const REACHED_A_SERVER: Duration = Duration::from_secs(1);

/// Consecutive failed attempts, against a retry budget.
pub(crate) struct Streak {
    budget: Duration,
    since: Option<tokio::time::Instant>,
}

impl Streak {
    pub(crate) fn new(budget: Duration) -> Self {
        Self {
            budget,
            since: None,
        }
    }

    /// Records a retryable failure of the attempt that started at `attempt`; true
    /// when the streak has lasted the whole budget and retrying should stop.
    pub(crate) fn exhausted(&mut self, attempt: tokio::time::Instant, error: &Error) -> bool {
        let now = tokio::time::Instant::now();
        // A server answered after the ask had waited there: the calls before were
        // not failing in a row with this one. Transport failures never count as
        // reached (a connect can hang a long time).
        let answered = error.reason() != Reason::Unspecified;
        if answered && now.duration_since(attempt) >= REACHED_A_SERVER {
            self.since = Some(now);
        }
        let since = *self.since.get_or_insert(attempt);
        now.duration_since(since) >= self.budget
    }
}

#[cfg(test)]
mod tests {
    use tonic::Status;

    use super::*;

    #[test]
    fn only_transport_failures_and_draining_are_retried() {
        assert!(Error::from(Status::unavailable("connection refused")).retryable());
        assert!(Error::from(Status::unknown("h2 protocol error")).retryable());
        assert!(Error::from(Status::cancelled("operation was canceled")).retryable());
        assert!(!Error::from(Status::invalid_argument("bad")).retryable());
        assert!(!Error::from(Status::not_found("gone")).retryable());
    }

    #[tokio::test(start_paused = true)]
    async fn a_streak_of_failures_ends_at_the_budget_and_a_long_wait_starts_it_again() {
        use tokio::time::{Instant, advance};
        let unreachable: Error = Status::unavailable("connection refused").into();
        let mut streak = Streak::new(Duration::from_secs(10));
        let first = Instant::now();
        assert!(!streak.exhausted(first, &unreachable));
        advance(Duration::from_secs(6)).await;
        assert!(!streak.exhausted(Instant::now(), &unreachable));
        advance(Duration::from_secs(5)).await;
        assert!(
            streak.exhausted(Instant::now(), &unreachable),
            "11 s failing in a row"
        );

        // A draining node answering after the ask waited there a minute: a new streak.
        let mut streak = Streak::new(Duration::from_secs(10));
        let first = Instant::now();
        assert!(!streak.exhausted(first, &unreachable));
        let waited = Instant::now();
        advance(Duration::from_secs(60)).await;
        let draining: Error = <Status as tonic_types::StatusExt>::with_error_details(
            tonic::Code::Unavailable,
            "draining",
            tonic_types::ErrorDetails::with_error_info(
                "SHUTTING_DOWN",
                "askgate",
                std::collections::HashMap::new(),
            ),
        )
        .into();
        assert!(!streak.exhausted(waited, &draining));
        // ...but a transport failure that took as long does not reset it.
        let mut streak = Streak::new(Duration::from_secs(10));
        assert!(!streak.exhausted(Instant::now(), &unreachable));
        let hung = Instant::now();
        advance(Duration::from_secs(30)).await;
        assert!(streak.exhausted(hung, &unreachable));
    }

    #[test]
    fn backoff_grows_to_its_cap() {
        let delays: Vec<Duration> = backoff().take(12).collect();
        assert!(delays.iter().all(|d| *d <= MAX_DELAY * 2), "{delays:?}");
        assert!(delays[11] >= MAX_DELAY, "{delays:?}");
    }
}
