//! The one error type of askgate's domain. Each variant is one row of docs/protocol.md "Errors";
//! `domain::status` is the single place that turns it into a `tonic::Status`.

use std::fmt;

use askgate_proto::v1::{CancelSource, ErrorReason, Resolution};

/// One thing wrong with one field of a request, e.g. `questions[1].options[0].label`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// Path of the field in the request, in proto field names.
    pub field: String,
    /// What is wrong with it, for humans and models.
    pub description: String,
}

impl Violation {
    pub fn new(field: impl Into<String>, description: impl Into<String>) -> Self {
        Self {
            field: field.into(),
            description: description.into(),
        }
    }
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.field, self.description)
    }
}

/// Most field violations one error lists (docs/protocol.md "Errors are bounded"); the rest are
/// counted as "and N more".
pub const MAX_VIOLATIONS: usize = 8;

/// Longest piece of caller input an error message or a log line repeats, in bytes.
pub const MAX_ECHO_BYTES: usize = 64;

/// Caller input as an error or a log line repeats it: at most [`MAX_ECHO_BYTES`]
/// (escaped as Rust's `{:?}` would), then `…`. Quoted for messages, bare for logs.
#[derive(Clone, Copy)]
pub struct Echo<'a> {
    text: &'a str,
    quoted: bool,
}

/// `text`, quoted and cut for an error message: `"abc…"`.
pub fn echo(text: &str) -> Echo<'_> {
    Echo { text, quoted: true }
}

/// `text`, cut for a log field or a span.
pub fn bounded(text: &str) -> Echo<'_> {
    Echo {
        text,
        quoted: false,
    }
}

impl fmt::Display for Echo<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut out = String::with_capacity(self.text.len().min(MAX_ECHO_BYTES + 8));
        let mut cut = false;
        for c in self.text.chars() {
            let before = out.len();
            if self.quoted {
                out.extend(c.escape_debug());
            } else if c.is_control() {
                out.extend(c.escape_default());
            } else {
                out.push(c);
            }
            if out.len() > MAX_ECHO_BYTES {
                out.truncate(before);
                cut = true;
                break;
            }
        }
        let ellipsis = if cut { "…" } else { "" };
        match self.quoted {
            true => write!(f, "\"{out}\"{ellipsis}"),
            false => write!(f, "{out}{ellipsis}"),
        }
    }
}

/// Lists violations as `a: x; b: y` for the human-readable status message, at most
/// [`MAX_VIOLATIONS`] of them, then how many more there are.
struct Listed<'a>(&'a [Violation]);

impl fmt::Display for Listed<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, violation) in self.0.iter().take(MAX_VIOLATIONS).enumerate() {
            if i > 0 {
                f.write_str("; ")?;
            }
            write!(f, "{violation}")?;
        }
        if self.0.len() > MAX_VIOLATIONS {
            write!(f, "; and {} more", self.0.len() - MAX_VIOLATIONS)?;
        }
        Ok(())
    }
}

/// The text of ASK_CANCELLED: a person's cancel keeps the seed's words (agents know
/// them); approvers who disagreed did not cancel, and are not called "the user".
fn cancelled_text(reason: Option<&str>, origin: CancelSource) -> String {
    let reason = reason.map(|r| format!(": {r}")).unwrap_or_default();
    match origin {
        CancelSource::ApproversDisagreed => format!("the question was not answered{reason}"),
        CancelSource::Unspecified | CancelSource::UiClosed => {
            format!("the user cancelled the question{reason}")
        }
    }
}

/// The text of CHANNEL_NOT_ALLOWED, naming where the ask may be resolved.
fn channel_text(allowed: &[String]) -> String {
    match allowed {
        [] => "this ask holds a secret question, which no chat channel answers: answer it in \
               the console or a terminal"
            .to_owned(),
        allowed => format!(
            "this ask cannot be resolved from this channel: only from {}",
            allowed.join(", ")
        ),
    }
}

/// How a finished ask ended, for NOT_PENDING: lets a second UI tell "someone else
/// answered" from "never existed".
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settled {
    pub resolution: Resolution,
    pub resolved_by: String,
}

impl Error {
    /// NOT_PENDING for an ask the server knows nothing about (any more).
    pub fn not_pending() -> Self {
        Self::NotPending { settled: None }
    }

    /// TOO_MANY_SESSIONS: the tenant holds state in `limit` sessions already.
    pub fn too_many_sessions(limit: usize) -> Self {
        Self::TooManySessions(format!(
            "at most {limit} sessions with pending asks, subscribers or a kept history per tenant"
        ))
    }

    /// TOO_MANY_PENDING: the pending asks of the `scope` ("session" or "tenant") hold
    /// too many bytes to take this one.
    pub fn pending_bytes_full(scope: &str, limit: u64) -> Self {
        Self::TooManyPending(format!(
            "at most {limit} bytes of pending asks per {scope} \
             (--max-pending-bytes-per-{scope}): this ask does not fit"
        ))
    }

    /// TOO_MANY_AGENTS: the tenant has `limit` agents attached already.
    pub fn too_many_agents(limit: usize) -> Self {
        Self::TooManyAgents(format!("at most {limit} agents attached per tenant"))
    }

    /// TOO_MANY_SUBSCRIBERS for one session's subscribers.
    pub fn too_many_subscribers(limit: usize) -> Self {
        Self::TooManySubscribers(format!("at most {limit} subscribers per session"))
    }

    /// TOO_MANY_SUBSCRIBERS for a tenant's `all_sessions` streams.
    pub fn too_many_all_sessions(limit: usize) -> Self {
        Self::TooManySubscribers(format!(
            "at most {limit} all_sessions subscriptions per tenant"
        ))
    }

    /// PERMISSION_DENIED for an Attach of an agent id whose live lease another subject
    /// of the tenant holds (docs/protocol.md "Security": a lease belongs to its subject).
    pub fn lease_held() -> Self {
        Self::PermissionDenied(
            "another subject holds this agent's lease; only it, or the admin role, may replace it"
                .into(),
        )
    }
}

/// Why an askgate operation failed. Messages are the model-facing wording of docs/protocol.md.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    #[error("ask_user_question requires at least one question")]
    EmptyQuestions,
    #[error("invalid request: {}", Listed(.0))]
    BadRequest(Vec<Violation>),
    #[error("invalid intent: {0}")]
    BadIntent(Violation),
    #[error("invalid answer batch: {}", Listed(.0))]
    BadAnswer(Vec<Violation>),
    #[error("no user-questions provider is registered")]
    NoProvider,
    #[error("another exclusive subscriber holds this session")]
    DuplicateProvider,
    #[error("human interaction requires the exact live calling agent when an agent is supplied")]
    CallerNotLive,
    #[error(
        "human interaction is unavailable while the calling agent is owned by another live agent; include the unresolved question or decision in the child agent's final result"
    )]
    DelegatedCaller,
    #[error("{}", cancelled_text(reason.as_deref(), *origin))]
    AskCancelled {
        reason: Option<String>,
        /// Who cancelled: a person, or an answering UI closing (metadata `cancel_source`).
        origin: CancelSource,
    },
    #[error("ask_user_question was aborted before the user answered")]
    AskAborted,
    #[error("no answer before the deadline")]
    AskExpired,
    /// `settled` is how and by whom the ask ended, while the server still remembers.
    #[error("no pending question with that rpc_id in this session")]
    NotPending { settled: Option<Settled> },
    #[error("this subject already answered this quorum ask")]
    AlreadyApproved,
    #[error("the asker cannot approve its own quorum ask")]
    SelfApproval,
    /// `allowed`: the only channels that may resolve it (empty: the ask holds a secret
    /// question, which no chat channel answers).
    #[error("{}", channel_text(allowed))]
    ChannelNotAllowed { allowed: Vec<String> },
    /// `approvers`: who may answer, for people ([`approval::approvers_text`]).
    ///
    /// [`approval::approvers_text`]: crate::domain::approval::approvers_text
    #[error("only {approvers} may answer this")]
    NotAnApprover { approvers: String },
    /// The tenant's policy `policy` forbids the action, for `reason` (its `@reason`).
    #[error("denied by policy {}: {reason}", echo(policy))]
    DeniedByPolicy { policy: String, reason: String },
    /// The receipt was consumed before, at `consumed_at` (RFC 3339).
    #[error("this receipt was already used")]
    ReceiptConsumed { consumed_at: String },
    /// The request_id names an ask with other questions, action or approval terms.
    #[error(
        "this request_id was used for a different ask in this session: a retry must send the same questions, action and approval terms, a new ask needs a new request_id"
    )]
    RequestIdReused,
    #[error("too many pending questions: {0}")]
    TooManyPending(String),
    #[error("too many subscribers: {0}")]
    TooManySubscribers(String),
    #[error("too many agents: {0}")]
    TooManyAgents(String),
    #[error("too many sessions: {0}")]
    TooManySessions(String),
    #[error("too many asks: {0}")]
    RateLimited(String),
    /// No webhook endpoint or delivery with that id in the caller's tenant.
    #[error("not found: {0}")]
    NotFound(String),
    /// A per-tenant webhook limit (endpoints, queued deliveries).
    #[error("too many webhooks: {0}")]
    TooManyWebhooks(String),
    /// No valid credential. The text names what is wrong with the credential itself,
    /// never anything about other tenants.
    #[error("unauthenticated: {0}")]
    Unauthenticated(String),
    #[error("permission denied: {0}")]
    PermissionDenied(String),
    #[error("the node is draining; retry with the same request_id")]
    ShuttingDown,
    /// The shared store (Redis) cannot be reached; retry.
    #[error("the backend is unavailable; retry with the same request_id: {0}")]
    BackendUnavailable(String),
    /// A fault of the server itself (a broken invariant, an unreachable store).
    #[error("internal error: {0}")]
    Internal(String),
}

impl Error {
    /// The `google.rpc.ErrorInfo` reason: the machine-routable name of the failure,
    /// one of the proto's `ErrorReason` values.
    pub fn error_reason(&self) -> ErrorReason {
        match self {
            Self::EmptyQuestions => ErrorReason::EmptyQuestions,
            Self::BadRequest(_) => ErrorReason::BadRequest,
            Self::BadIntent(_) => ErrorReason::BadIntent,
            Self::BadAnswer(_) => ErrorReason::BadAnswer,
            Self::NoProvider => ErrorReason::NoProvider,
            Self::DuplicateProvider => ErrorReason::DuplicateProvider,
            Self::CallerNotLive => ErrorReason::CallerNotLive,
            Self::DelegatedCaller => ErrorReason::DelegatedCaller,
            Self::AskCancelled { .. } => ErrorReason::AskCancelled,
            Self::AskAborted => ErrorReason::AskAborted,
            Self::AskExpired => ErrorReason::AskExpired,
            Self::NotPending { .. } => ErrorReason::NotPending,
            Self::AlreadyApproved => ErrorReason::AlreadyApproved,
            Self::SelfApproval => ErrorReason::SelfApproval,
            Self::ChannelNotAllowed { .. } => ErrorReason::ChannelNotAllowed,
            Self::NotAnApprover { .. } => ErrorReason::NotAnApprover,
            Self::DeniedByPolicy { .. } => ErrorReason::DeniedByPolicy,
            Self::ReceiptConsumed { .. } => ErrorReason::ReceiptConsumed,
            Self::RequestIdReused => ErrorReason::RequestIdReused,
            Self::TooManyPending(_) => ErrorReason::TooManyPending,
            Self::TooManySubscribers(_) => ErrorReason::TooManySubscribers,
            Self::TooManyAgents(_) => ErrorReason::TooManyAgents,
            Self::TooManySessions(_) => ErrorReason::TooManySessions,
            Self::RateLimited(_) => ErrorReason::RateLimited,
            Self::NotFound(_) => ErrorReason::NotFound,
            Self::TooManyWebhooks(_) => ErrorReason::TooManyWebhooks,
            Self::Unauthenticated(_) => ErrorReason::Unauthenticated,
            Self::PermissionDenied(_) => ErrorReason::PermissionDenied,
            Self::ShuttingDown => ErrorReason::ShuttingDown,
            Self::BackendUnavailable(_) => ErrorReason::BackendUnavailable,
            Self::Internal(_) => ErrorReason::Internal,
        }
    }

    /// The reason's wire name, e.g. `NOT_PENDING`.
    pub fn reason(&self) -> &'static str {
        self.error_reason().as_str_name()
    }

    /// A request error about a single field.
    pub fn bad_request(field: impl Into<String>, description: impl Into<String>) -> Self {
        Self::BadRequest(vec![Violation::new(field, description)])
    }

    /// Field violations, for `google.rpc.BadRequest`.
    pub fn violations(&self) -> &[Violation] {
        match self {
            Self::BadRequest(v) | Self::BadAnswer(v) => v,
            Self::BadIntent(v) => std::slice::from_ref(v),
            _ => &[],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cancelled_message_carries_the_reason_when_given() {
        let with = Error::AskCancelled {
            reason: Some("wrong branch".into()),
            origin: CancelSource::Unspecified,
        };
        assert_eq!(
            with.to_string(),
            "the user cancelled the question: wrong branch"
        );
        let without = Error::AskCancelled {
            reason: None,
            origin: CancelSource::Unspecified,
        };
        assert_eq!(without.to_string(), "the user cancelled the question");
    }

    #[test]
    fn violations_are_listed_per_field() {
        let err = Error::BadRequest(vec![
            Violation::new("session_id", "must not be empty"),
            Violation::new("questions[0].id", "must not be empty"),
        ]);
        assert_eq!(
            err.to_string(),
            "invalid request: session_id: must not be empty; questions[0].id: must not be empty"
        );
        assert_eq!(err.violations().len(), 2);
    }

    #[test]
    fn the_message_lists_the_first_violations_then_counts_the_rest() {
        let many = (0..20)
            .map(|i| Violation::new(format!("f{i}"), "bad"))
            .collect();
        let text = Error::BadRequest(many).to_string();
        assert!(text.ends_with("f7: bad; and 12 more"), "{text}");
        assert!(!text.contains("f8"), "{text}");
    }

    #[test]
    fn echoed_input_is_cut_and_escaped() {
        assert_eq!(echo("id").to_string(), "\"id\"");
        let long = "é".repeat(100);
        let shown = echo(&long).to_string();
        assert!(
            shown.ends_with("\"…") && shown.len() <= MAX_ECHO_BYTES + 5,
            "{shown}"
        );
        assert_eq!(echo("a\nb").to_string(), "\"a\\nb\"");
        assert_eq!(bounded("s-1").to_string(), "s-1");
        assert_eq!(bounded("a\u{1b}[2J").to_string(), "a\\u{1b}[2J");
        assert!(bounded(&"x".repeat(1 << 20)).to_string().len() <= MAX_ECHO_BYTES + 3);
    }
}
