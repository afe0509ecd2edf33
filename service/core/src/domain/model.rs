//! The values that flow between the handlers, the rules and the backends.

use std::{
    collections::HashMap,
    fmt,
    sync::Arc,
    time::{Duration, SystemTime},
};

use askgate_proto::v1::{
    Action, AgentRef, Approvers, CancelSource, EscalationStep, NotifyPolicy, PolicyDecision,
    Question, QuestionAnswer, Resolution, Unattended,
};

/// Tenant of every request until authentication names one.
pub const DEFAULT_TENANT: &str = "default";

/// Who resolved an ask when no human did.
pub const RESOLVED_BY_SERVER: &str = "askgate";
/// Who resolved an ask that its own caller gave up on.
pub const RESOLVED_BY_CALLER: &str = "caller";
/// Who resolved an ask whose lifetime ended with default answers.
pub const RESOLVED_BY_DEFAULT: &str = "askgate:default";

/// The channel of the resolutions the server makes itself (expiry, defaults, shutdown).
pub const SERVER_CHANNEL: &str = "askgate";
/// The channel of a gRPC call that names none.
pub const GRPC_CHANNEL: &str = "grpc";
/// The channel of the browser console (every gRPC-Web call).
pub const CONSOLE_CHANNEL: &str = "console";
/// The channel of MCP tool calls.
pub const MCP_CHANNEL: &str = "mcp";
/// The channel of Slack's clicks and forms.
pub const SLACK_CHANNEL: &str = "slack";
/// Answers given in a Telegram chat.
pub const TELEGRAM_CHANNEL: &str = "telegram";
/// Answers given through an email's links.
pub const EMAIL_CHANNEL: &str = "email";
/// Answers given through an ntfy push's actions.
pub const NTFY_CHANNEL: &str = "ntfy";

/// Who resolves an ask, and through which channel (docs/approvals.md): the
/// credential's subject, and `console`, `slack`, `mcp`, a client's own name, ...
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolver {
    pub subject: String,
    pub channel: String,
    /// The groups the answering credential names (what an ask's approvers may name;
    /// none for a chat's person).
    pub groups: Vec<String>,
}

/// A subject answering through the gRPC API, naming no channel.
impl From<&str> for Resolver {
    fn from(subject: &str) -> Self {
        Self::new(subject, GRPC_CHANNEL)
    }
}

impl Resolver {
    pub fn new(subject: impl Into<String>, channel: impl Into<String>) -> Self {
        Self {
            subject: subject.into(),
            channel: channel.into(),
            groups: Vec::new(),
        }
    }

    /// The resolver, a member of `groups`.
    pub fn in_groups(self, groups: Vec<String>) -> Self {
        Self { groups, ..self }
    }
}

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
    /// What the ask approves, if anything, with its digest.
    pub action: Option<Box<Action>>,
    pub action_digest: String,
    /// Distinct subjects whose answers it needs (0: the first answer resolves it).
    pub quorum: u32,
    /// What it resolves with, DEFAULTED, when its lifetime ends (normalised).
    pub default_answers: Vec<QuestionAnswer>,
    /// The only channels that may resolve it (empty: every channel).
    pub allowed_channels: Vec<String>,
    /// Who may answer it (None: whoever may answer the session).
    pub approvers: Option<Box<Approvers>>,
    /// Its escalation steps, in order.
    pub escalation: Vec<EscalationStep>,
    /// The subject of the credential that asked.
    pub asked_by: String,
    /// Its groups (what the tenant's policy sees of it).
    pub asked_groups: Vec<String>,
    /// The ask set its own lifetime (`ttl_ms`): a policy's `@ttl` leaves it.
    pub own_ttl: bool,
    /// The W3C `traceparent` of the ask's span (empty when traces are not exported).
    pub traceparent: String,
    /// What the tenant's policy decided about it, when it had an action to decide.
    pub policy: Option<Box<PolicyDecision>>,
}

impl NewAsk {
    /// An ask of `questions` with no options: no agent, labels, deadline, request_id,
    /// grace, schedule or approval rules; held when nobody follows the session.
    pub fn new(key: SessionKey, questions: Vec<Question>) -> Self {
        Self {
            key,
            questions,
            agent: None,
            labels: HashMap::new(),
            expires_at: None,
            request_id: String::new(),
            if_unattended: Unattended::Hold,
            reattach_grace: Duration::ZERO,
            notify: None,
            action: None,
            action_digest: String::new(),
            quorum: 0,
            default_answers: Vec::new(),
            allowed_channels: Vec::new(),
            approvers: None,
            escalation: Vec::new(),
            asked_by: String::new(),
            asked_groups: Vec::new(),
            own_ttl: false,
            traceparent: String::new(),
            policy: None,
        }
    }

    /// What makes a retry the same ask (docs/protocol.md, Semantics 10): its questions,
    /// the digest of its action, and its approval terms (quorum, default answers,
    /// allowed channels, approvers: an answer given under one quorum must never come
    /// back to a call that asked for a larger one, nor one given by anyone to a call
    /// that named its approvers). A request_id already known in the session
    /// with another fingerprint is REQUEST_ID_REUSED.
    pub fn fingerprint(&self) -> Fingerprint {
        use prost::Message as _;
        use sha2::{Digest as _, Sha256};
        // Every list counted and every part length-delimited, in a fixed order: no two
        // asks share the bytes.
        let mut bytes = Vec::with_capacity(256);
        let count = |n: usize, bytes: &mut Vec<u8>| prost::encoding::encode_varint(n as u64, bytes);
        count(self.questions.len(), &mut bytes);
        for question in &self.questions {
            let _ = question.encode_length_delimited(&mut bytes);
        }
        for part in [self.action_digest.as_bytes(), &self.quorum.to_be_bytes()] {
            count(part.len(), &mut bytes);
            bytes.extend_from_slice(part);
        }
        count(self.default_answers.len(), &mut bytes);
        for answer in &self.default_answers {
            let _ = answer.encode_length_delimited(&mut bytes);
        }
        count(self.allowed_channels.len(), &mut bytes);
        for channel in &self.allowed_channels {
            count(channel.len(), &mut bytes);
            bytes.extend_from_slice(channel.as_bytes());
        }
        // Approvers and escalation steps, each tagged and only when there are any: the
        // bytes of an ask without them stay what they were, so a request_id recorded
        // before they existed still matches.
        if let Some(approvers) = &self.approvers {
            bytes.push(1);
            let _ = approvers.encode_length_delimited(&mut bytes);
        }
        if !self.escalation.is_empty() {
            bytes.push(2);
            count(self.escalation.len(), &mut bytes);
            for step in &self.escalation {
                let _ = step.encode_length_delimited(&mut bytes);
            }
        }
        let digest = Sha256::digest(&bytes);
        let mut fingerprint = [0; 16];
        fingerprint.copy_from_slice(&digest[..16]);
        Fingerprint(fingerprint)
    }
}

/// The first 16 bytes of a SHA-256 over an ask's questions, action digest and approval
/// terms ([`NewAsk::fingerprint`]): stored with its request_id, so that the id names one
/// ask only.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Fingerprint(pub [u8; 16]);

impl Fingerprint {
    /// Lowercase hex, as a store without binary values keeps it.
    pub fn to_hex(self) -> String {
        hex::encode(self.0)
    }

    /// From [`Self::to_hex`]'s form; None for anything else.
    pub fn from_hex(text: &str) -> Option<Self> {
        let mut bytes = [0; 16];
        hex::decode_to_slice(text, &mut bytes).ok()?;
        Some(Self(bytes))
    }

    /// Whether a retry with this fingerprint is the ask recorded with `recorded`. A
    /// record without one (kept by an older askgate, or an abort that overtook its
    /// ask) matches any.
    pub fn matches(self, recorded: Option<Self>) -> bool {
        recorded.is_none_or(|recorded| recorded == self)
    }
}

/// How a pending ask ended: delivered to the waiting `Ask` and broadcast as `resolved`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    pub resolution: Resolution,
    /// Normalised answers, for `ANSWERED` and `DEFAULTED` only.
    pub answers: Vec<QuestionAnswer>,
    pub resolved_by: String,
    /// The human's reason, for `CANCELLED` only.
    pub cancel_reason: Option<String>,
    /// Who cancelled, for `CANCELLED` only: a person, or an answering UI closing.
    pub cancel_source: CancelSource,
    /// The subjects whose answers resolved it: the answerer, or a quorum's approvers.
    pub approvers: Vec<String>,
    /// Where the resolution came from ([`SERVER_CHANNEL`] for the server's own).
    pub channel: String,
    /// The answers to secret questions, sealed with the server's key (empty when it
    /// has none): for the waiting call only, never in an event handed out.
    pub sealed_answers: String,
    /// The MAC of those answers, for the audit record (empty without them).
    pub answers_hmac: String,
    /// The person (their id) the answerer stood in for while a delegation held.
    pub on_behalf_of: Option<String>,
}

impl Outcome {
    pub fn answered(answers: Vec<QuestionAnswer>, by: impl Into<Resolver>) -> Self {
        let by = by.into();
        Self {
            approvers: vec![by.subject.clone()],
            channel: by.channel.clone(),
            ..Self::new(Resolution::Answered, answers, &by.subject, None)
        }
    }

    pub fn cancelled(reason: Option<String>, by: impl Into<Resolver>) -> Self {
        let by = by.into();
        Self {
            channel: by.channel.clone(),
            ..Self::new(Resolution::Cancelled, Vec::new(), &by.subject, reason)
        }
    }

    /// Cancelled by `source` (a person, or an answering UI closing).
    pub fn cancelled_by(
        reason: Option<String>,
        by: impl Into<Resolver>,
        source: CancelSource,
    ) -> Self {
        Self {
            cancel_source: source,
            ..Self::cancelled(reason, by)
        }
    }

    /// The ask's lifetime ended: with its default answers, DEFAULTED; without, EXPIRED.
    pub fn on_expiry(default_answers: &[QuestionAnswer]) -> Self {
        match default_answers.is_empty() {
            true => Self::expired(),
            false => Self::new(
                Resolution::Defaulted,
                default_answers.to_vec(),
                RESOLVED_BY_DEFAULT,
                None,
            ),
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
            approvers: Vec::new(),
            channel: SERVER_CHANNEL.to_owned(),
            sealed_answers: String::new(),
            answers_hmac: String::new(),
            on_behalf_of: None,
        }
    }
}

/// What an accepted answer did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answered {
    /// It resolved the ask (the first valid resolution wins).
    Resolved,
    /// It was a vote on a quorum ask that needs more: `votes` of `needed` so far.
    Voted { votes: u32, needed: u32 },
}
