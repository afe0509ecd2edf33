//! Builders for an ask and its questions.

use std::time::Duration;

use tonic::metadata::{Ascii, MetadataValue};

use crate::proto::{
    AgentRef, AskRequest, Intent, PlanReview, Question, QuestionOption, Unattended, intent,
};

/// How long a dropped call leaves its question answerable for a retry, by default.
pub use askgate_contract::DEFAULT_REATTACH_GRACE;

/// How long [`crate::Client::ask`] keeps retrying while every attempt fails (the node
/// drains, the server is unreachable), unless [`Ask::retry_for`] says otherwise. The
/// ask's timeout, when it has one, bounds the retries too.
pub const DEFAULT_RETRY_BUDGET: Duration = Duration::from_secs(60);

/// Starts a question with its id (unique within the ask) and text.
pub fn question(id: &str, text: &str) -> QuestionBuilder {
    QuestionBuilder(Question {
        id: id.to_owned(),
        question: text.to_owned(),
        ..Default::default()
    })
}

/// A question under construction; converts into [`Question`].
#[derive(Debug, Clone)]
pub struct QuestionBuilder(Question);

impl QuestionBuilder {
    /// A short label shown as a chip or tab title.
    pub fn header(mut self, header: &str) -> Self {
        self.0.header = Some(header.to_owned());
        self
    }

    /// Longer context; the plan itself for a plan review.
    pub fn detail(mut self, detail: &str) -> Self {
        self.0.detail = Some(detail.to_owned());
        self
    }

    /// Adds an option with a description.
    pub fn option(mut self, label: &str, description: &str) -> Self {
        self.0.options.push(QuestionOption {
            label: label.to_owned(),
            description: Some(description.to_owned()),
        });
        self
    }

    /// Adds an option without a description.
    pub fn choice(mut self, label: &str) -> Self {
        self.0.options.push(QuestionOption {
            label: label.to_owned(),
            description: None,
        });
        self
    }

    /// Lets the human pick several options.
    pub fn multi_select(mut self) -> Self {
        self.0.multi_select = true;
        self
    }

    /// Presents the question as a review of the plan in `detail`; `approve` is the
    /// option label that means "go ahead".
    pub fn plan_review(mut self, approve: &str) -> Self {
        self.0.intent = Some(Intent {
            kind: Some(intent::Kind::PlanReview(PlanReview {
                approve: approve.to_owned(),
            })),
        });
        self
    }

    /// The answer is a secret (a one-time code): answering UIs mask it, and it reaches
    /// this ask's caller only (docs/approvals.md).
    pub fn secret(mut self) -> Self {
        self.0.secret = true;
        self
    }

    /// The finished question.
    pub fn build(self) -> Question {
        self.0
    }
}

impl From<QuestionBuilder> for Question {
    fn from(builder: QuestionBuilder) -> Self {
        builder.0
    }
}

/// How much longer than an ask's lifetime ([`Ask::ttl`]) its call waits.
pub const TTL_SLACK: Duration = Duration::from_secs(5);

/// One `Ask`: a batch of questions for a session, and how long to wait.
///
/// By default an ask carries a fresh `request_id` and a reattach grace of
/// [`DEFAULT_REATTACH_GRACE`], and [`crate::Client::ask`] retries a call that failed
/// with UNAVAILABLE or a broken connection with the same request_id: the retry joins
/// the same pending ask, or gets the human's answer if it came meanwhile. Retries stop
/// once attempts have failed for [`DEFAULT_RETRY_BUDGET`] in a row (see
/// [`Ask::retry_for`]), or at the ask's timeout.
#[derive(Debug, Clone)]
pub struct Ask {
    pub(crate) request: AskRequest,
    pub(crate) timeout: Option<Duration>,
    pub(crate) retry: bool,
    pub(crate) retry_budget: Duration,
    /// The W3C trace context the call carries (`traceparent`, `tracestate`).
    pub(crate) trace: Vec<(&'static str, MetadataValue<Ascii>)>,
}

impl Ask {
    /// An empty batch for `session_id`; add questions with [`Ask::question`].
    pub fn new(session_id: &str) -> Self {
        Self::from(AskRequest {
            session_id: session_id.to_owned(),
            ..Default::default()
        })
    }

    /// Adds a question.
    pub fn question(mut self, question: impl Into<Question>) -> Self {
        self.request.questions.push(question.into());
        self
    }

    /// How long to wait for a human (sent as the gRPC deadline, and the budget for
    /// retries). Without one the server's maximum wait applies.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// Keeps the ask pending when nobody is subscribed to the session yet, instead of
    /// failing with [`crate::Reason::NoProvider`].
    pub fn hold_unattended(mut self) -> Self {
        self.request.if_unattended = Unattended::Hold.into();
        self
    }

    /// Asks on behalf of an attached agent (see `Agents.Attach`).
    pub fn agent(mut self, agent_id: &str, incarnation: &str) -> Self {
        self.request.agent = Some(AgentRef {
            agent_id: agent_id.to_owned(),
            incarnation: incarnation.to_owned(),
        });
        self
    }

    /// The idempotency key (a fresh one is set by default): a call with the same
    /// session and request_id joins the same ask or gets its recorded outcome.
    pub fn request_id(mut self, request_id: &str) -> Self {
        self.request.request_id = request_id.to_owned();
        self
    }

    /// How long the question stays answerable when this call is dropped, for a retry
    /// to pick the answer up; zero resolves it ABORTED at once.
    pub fn reattach_grace(mut self, grace: Duration) -> Self {
        self.request.reattach_grace_ms = grace.as_millis().try_into().unwrap_or(u32::MAX);
        self
    }

    /// Makes one attempt only: no retry on UNAVAILABLE or a broken connection.
    pub fn no_retry(mut self) -> Self {
        self.retry = false;
        self
    }

    /// How long to keep retrying while every attempt fails (default
    /// [`DEFAULT_RETRY_BUDGET`]). The clock starts at the first failure and starts
    /// again after an attempt that reached a server and waited there; the last
    /// failure is returned when it runs out.
    pub fn retry_for(mut self, budget: Duration) -> Self {
        self.retry_budget = budget;
        self
    }

    /// A label shown to the UIs along with the questions.
    pub fn label(mut self, key: &str, value: &str) -> Self {
        self.request.labels.insert(key.to_owned(), value.to_owned());
        self
    }

    /// Reminders and escalation while the batch is pending: the first reminder after
    /// `remind_after`, then one every `remind_every` (zero: only the first), at most
    /// `max_reminders` (0: no limit); one escalation after `escalate_after` (zero:
    /// never). Each interval is zero or at least a second.
    pub fn notify(
        mut self,
        remind_after: Duration,
        remind_every: Duration,
        max_reminders: u32,
        escalate_after: Duration,
    ) -> Self {
        let ms = |d: Duration| u32::try_from(d.as_millis()).unwrap_or(u32::MAX);
        self.request.notify = Some(crate::proto::NotifyPolicy {
            remind_after_ms: ms(remind_after),
            remind_every_ms: ms(remind_every),
            max_reminders,
            escalate_after_ms: ms(escalate_after),
        });
        self
    }

    /// The action the answer approves: shown to the human and, when the server signs
    /// receipts, bound to the resolution by [`AskResponse::receipt`]
    /// (`crate::receipt::verify_receipt` checks it before the action runs). Its
    /// arguments must be I-JSON: numbers past 2^53, or that a double does not hold
    /// exactly, go as strings. The first option of the first question approves it
    /// unless [`Self::approving_answers`] says otherwise.
    ///
    /// [`AskResponse::receipt`]: crate::proto::AskResponse::receipt
    pub fn action(mut self, name: &str, arguments_json: &str) -> Self {
        let approving = self
            .request
            .action
            .take()
            .map(|a| a.approving_answers)
            .unwrap_or_default();
        self.request.action = Some(Box::new(crate::proto::Action {
            name: name.to_owned(),
            arguments_json: arguments_json.to_owned(),
            approving_answers: approving,
        }));
        self
    }

    /// The answers that approve the action (for each question they name, exactly that
    /// answer): a receipt says `approved` only for them. Call after [`Self::action`].
    pub fn approving_answers(mut self, answers: Vec<crate::proto::QuestionAnswer>) -> Self {
        if let Some(action) = &mut self.request.action {
            action.approving_answers = answers;
        }
        self
    }

    /// Resolve only when `count` (2 to 10) distinct subjects gave the same answers.
    pub fn quorum(mut self, count: u32) -> Self {
        self.request.quorum = Some(crate::proto::Quorum { count });
        self
    }

    /// What the ask resolves with (as DEFAULTED, never ANSWERED) when its lifetime
    /// ends unanswered: a complete answer batch.
    pub fn default_answers(mut self, answers: Vec<crate::proto::QuestionAnswer>) -> Self {
        self.request.default_answers = answers;
        self
    }

    /// Only these channels (e.g. `console`, `tui`) may resolve the ask.
    pub fn allowed_channels<S: Into<String>>(
        mut self,
        channels: impl IntoIterator<Item = S>,
    ) -> Self {
        self.request.allowed_channels = channels.into_iter().map(Into::into).collect();
        self
    }

    /// Only these people may answer: credential subjects or channel identities
    /// (`ana`, `slack:T1/U2`, `telegram:42`, `email:ana@example.org`), with the
    /// members of any [`Self::approver_groups`]. Anyone else gets `NOT_AN_APPROVER`.
    pub fn approvers<S: Into<String>>(mut self, subjects: impl IntoIterator<Item = S>) -> Self {
        self.approvers_mut().subjects = subjects.into_iter().map(Into::into).collect();
        self
    }

    /// Members of these groups (a credential's groups claim, an API key's groups) may
    /// answer too.
    pub fn approver_groups<S: Into<String>>(mut self, groups: impl IntoIterator<Item = S>) -> Self {
        self.approvers_mut().groups = groups.into_iter().map(Into::into).collect();
        self
    }

    /// Only the approvers may cancel the ask too (by default anyone who may answer
    /// the session may).
    pub fn approvers_cancel_too(mut self) -> Self {
        self.approvers_mut().cancel_too = true;
        self
    }

    /// One more escalation step: `after` the ask's registration, with the ask still
    /// pending, `approvers` (subjects, and `group:NAME` for groups) join the ask's (or
    /// replace them, with `replace`) and the channel connections `notify` (ids such as
    /// `sl_…`) are sent the ask. Steps go in the order of their times.
    pub fn escalate<S: AsRef<str>, N: Into<String>>(
        mut self,
        after: Duration,
        approvers: impl IntoIterator<Item = S>,
        replace: bool,
        notify: impl IntoIterator<Item = N>,
    ) -> Self {
        let mut named = crate::proto::Approvers::default();
        for name in approvers {
            match name.as_ref().strip_prefix("group:") {
                Some(group) => named.groups.push(group.to_owned()),
                None => named.subjects.push(name.as_ref().to_owned()),
            }
        }
        let names_anyone = !named.subjects.is_empty() || !named.groups.is_empty();
        self.request.escalation.push(crate::proto::EscalationStep {
            after_ms: u64::try_from(after.as_millis()).unwrap_or(u64::MAX),
            approvers: names_anyone.then_some(named),
            replace,
            notify_channels: notify.into_iter().map(Into::into).collect(),
        });
        self
    }

    fn approvers_mut(&mut self) -> &mut crate::proto::Approvers {
        self.request.approvers.get_or_insert_with(Default::default)
    }

    /// The ask's own lifetime from registration; the call waits a little beyond it
    /// ([`TTL_SLACK`]) so that the outcome (DEFAULTED or EXPIRED) reaches it.
    pub fn ttl(mut self, ttl: Duration) -> Self {
        self.request.ttl_ms = u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX);
        self
    }

    /// How long the call waits: its timeout, stretched past the ask's lifetime when it
    /// has one.
    pub(crate) fn wait(&self) -> Option<Duration> {
        let lifetime = match self.request.ttl_ms {
            0 => None,
            ms => Some(Duration::from_millis(ms).saturating_add(TTL_SLACK)),
        };
        match (self.timeout, lifetime) {
            (Some(timeout), Some(lifetime)) => Some(timeout.max(lifetime)),
            (timeout, lifetime) => timeout.or(lifetime),
        }
    }

    /// Makes the ask's span on the server (the human's wait, when it exports traces) a
    /// child of the caller's span: the W3C `traceparent` (and `tracestate`, when not
    /// empty) the call carries. A value that cannot be a header value is left out. Without it, and
    /// with the `opentelemetry` feature, the call carries the current OpenTelemetry
    /// context through the global propagator.
    pub fn trace_context(mut self, traceparent: &str, tracestate: &str) -> Self {
        self.trace.clear();
        for (name, value) in [("traceparent", traceparent), ("tracestate", tracestate)] {
            if let Ok(value) = MetadataValue::try_from(value)
                && !value.is_empty()
            {
                self.trace.push((name, value));
            }
        }
        self
    }

    /// The wire request, for callers that need fields the builder does not cover.
    pub fn request_mut(&mut self) -> &mut AskRequest {
        &mut self.request
    }
}

impl From<AskRequest> for Ask {
    /// Wraps a wire request, filling in a request_id and the default reattach grace
    /// where it has none.
    fn from(mut request: AskRequest) -> Self {
        if request.request_id.is_empty() {
            request.request_id = uuid::Uuid::now_v7().to_string();
        }
        if request.reattach_grace_ms == 0 {
            request.reattach_grace_ms = DEFAULT_REATTACH_GRACE.as_millis() as u32;
        }
        Self {
            request,
            timeout: None,
            retry: true,
            retry_budget: DEFAULT_RETRY_BUDGET,
            trace: Vec::new(),
        }
    }
}
