//! The values that flow between the handlers, the rules and the backends.

use std::{
    collections::HashMap,
    fmt,
    sync::Arc,
    time::{Duration, SystemTime},
};

use askgate_proto::v1::{
    AgentRef, CancelSource, NotifyPolicy, Question, QuestionAnswer, Resolution, Unattended,
};

/// Tenant of every request until authentication names one.
pub const DEFAULT_TENANT: &str = "default";

/// Who resolved an ask when no human did.
pub const RESOLVED_BY_SERVER: &str = "askgate";
/// Who resolved an ask that its own caller gave up on.
pub const RESOLVED_BY_CALLER: &str = "caller";

/// A session within a tenant: the unit of isolation, ordering and fan-out.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct SessionKey {
    pub tenant: Arc<str>,
    pub session_id: Arc<str>,
}

impl SessionKey {
    pub fn new(tenant: impl Into<Arc<str>>, session_id: impl Into<Arc<str>>) -> Self {
        Self {
            tenant: tenant.into(),
            session_id: session_id.into(),
        }
    }
}

impl fmt::Display for SessionKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.tenant, self.session_id)
    }
}

/// A validated ask, ready to be stored.
#[derive(Debug, Clone)]
pub struct NewAsk {
    pub key: SessionKey,
    pub questions: Vec<Question>,
    /// The calling agent: must be attached now with this incarnation, with no live
    /// parent (docs/protocol.md, Semantics 7).
    pub agent: Option<AgentRef>,
    pub labels: HashMap<String, String>,
    pub expires_at: Option<SystemTime>,
    /// Idempotency key within the session (Semantics 10); empty for none.
    pub request_id: String,
    /// Whether to refuse the ask when nobody follows the session (Semantics 8).
    pub if_unattended: Unattended,
    /// How long the ask stays answerable after its call went away (Semantics 10): a
    /// shared backend uses it when the node holding the call dies.
    pub reattach_grace: Duration,
    /// Reminders and escalation while pending (the ask's, or the server's default).
    pub notify: Option<NotifyPolicy>,
}

/// How a pending ask ended: delivered to the waiting `Ask` and broadcast as `resolved`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    pub resolution: Resolution,
    /// Normalised answers, for `ANSWERED` only.
    pub answers: Vec<QuestionAnswer>,
    pub resolved_by: String,
    /// The human's reason, for `CANCELLED` only.
    pub cancel_reason: Option<String>,
    /// Who cancelled, for `CANCELLED` only: a person, or an answering UI closing.
    pub cancel_source: CancelSource,
}

impl Outcome {
    pub fn answered(answers: Vec<QuestionAnswer>, by: impl Into<String>) -> Self {
        Self::new(Resolution::Answered, answers, by, None)
    }

    pub fn cancelled(reason: Option<String>, by: impl Into<String>) -> Self {
        Self::new(Resolution::Cancelled, Vec::new(), by, reason)
    }

    /// Cancelled by `source` (a person, or an answering UI closing).
    pub fn cancelled_by(
        reason: Option<String>,
        by: impl Into<String>,
        source: CancelSource,
    ) -> Self {
        Self {
            cancel_source: source,
            ..Self::cancelled(reason, by)
        }
    }

    /// The asking side gave up: its call was cancelled or its connection dropped.
    pub fn aborted() -> Self {
        Self::new(Resolution::Aborted, Vec::new(), RESOLVED_BY_CALLER, None)
    }

    /// The Ask's deadline passed.
    pub fn expired() -> Self {
        Self::new(Resolution::Expired, Vec::new(), RESOLVED_BY_SERVER, None)
    }

    /// The node shut down and nobody can reattach.
    pub fn disposed() -> Self {
        Self::new(Resolution::Disposed, Vec::new(), RESOLVED_BY_SERVER, None)
    }

    fn new(
        resolution: Resolution,
        answers: Vec<QuestionAnswer>,
        by: impl Into<String>,
        cancel_reason: Option<String>,
    ) -> Self {
        Self {
            resolution,
            answers,
            resolved_by: by.into(),
            cancel_reason,
            cancel_source: CancelSource::Unspecified,
        }
    }
}
