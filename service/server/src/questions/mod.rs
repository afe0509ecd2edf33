//! The askgate use cases over a [`Backend`]: what `Ask`, `Answer`, `Cancel`,
//! `Subscribe` and `ListPending` do, independent of gRPC. Handlers call this; tests can
//! too.

mod asking;
mod granting;
mod policing;
mod quorum;
mod settling;

use self::asking::schedules_something;

use std::{
    num::NonZeroU32,
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
};

use askgate_proto::v1::{
    AbortRequest, AnswerRequest, CancelRequest, CancelSource, NotifyPolicy, QuestionAnswer,
    Requested, SubscribeRequest,
};
use governor::{DefaultKeyedRateLimiter, Quota, RateLimiter};
use tokio::time::Instant;
use uuid::Uuid;

use tokio_stream::StreamExt;
use tracing::Instrument;

use crate::{
    approvals::{Audit, Receipts, secrets},
    auth::{self, sealed::SealingKey},
    backend::{
        Attached, Backend, Budget, EventStream, Holder, RequestAbort, Scope, StateConfig,
        SubscribeOptions, events,
        hooks::HookStore,
        people::{self, Standing},
    },
    domain::{Error, Limits, NewAsk, Outcome, Resolver, SessionKey, answer, approval, validate},
    metrics::Metrics,
    telemetry,
};

pub use crate::domain::Answered;

/// A failed `Ask`, with the rpc_id when the ask got as far as being stored.
#[derive(Debug)]
pub struct AskFailure {
    pub error: Error,
    pub rpc_id: Option<String>,
    /// The receipt of the resolution of an ask with an action (docs/approvals.md).
    pub receipt: Option<String>,
}

impl From<Error> for AskFailure {
    fn from(error: Error) -> Self {
        Self {
            error,
            rpc_id: None,
            receipt: None,
        }
    }
}

/// An ask that passed [`Questions::check_ask`], ready to be stored.
pub struct CheckedAsk {
    ask: Box<NewAsk>,
    deadline: Instant,
    started: Instant,
    /// The span of its wait ([`crate::telemetry::ask_span`]); disabled when traces are
    /// not exported.
    span: tracing::Span,
}

impl CheckedAsk {
    /// Waits under `span` (an [`crate::telemetry::ask_span`]): the ask keeps its
    /// `traceparent`, and the span gets the ask's id and outcome.
    pub fn traced(mut self, span: tracing::Span) -> Self {
        if !span.is_disabled() {
            span.record("askgate.tenant", &*self.ask.key.tenant);
            self.ask.traceparent = crate::telemetry::traceparent(&span);
        }
        self.span = span;
        self
    }

    /// Asked by a credential naming `groups` (what the tenant's policy sees of it).
    pub fn with_groups(mut self, groups: &[String]) -> Self {
        self.ask.asked_groups = groups.to_vec();
        self
    }
}

/// The per-tenant Ask rate limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AskRate {
    /// Asks per second, sustained.
    pub per_second: u32,
    /// Asks allowed at once above the sustained rate.
    pub burst: u32,
}

type TenantLimiter = DefaultKeyedRateLimiter<String>;

/// The handle the gRPC layer calls. Cheap to clone.
#[derive(Clone)]
pub struct Questions {
    backend: Arc<dyn Backend>,
    limits: Arc<Limits>,
    metrics: Metrics,
    ask_rate: Arc<TenantLimiter>,
    rate_text: Arc<str>,
    draining: Arc<AtomicBool>,
    /// Webhook endpoints that count as providers (Semantics 8), when webhooks are on.
    hooks: Option<Arc<dyn HookStore>>,
    /// The reminder schedule of asks that set none.
    default_notify: Option<NotifyPolicy>,
    /// Subscribe streams one tenant may hold open, over every node.
    max_streams_per_tenant: usize,
    /// Where quorum votes are recorded, when the node keeps an audit log.
    audit: Option<Audit>,
    /// Signs the receipts of asks with an action; `None`: no receipts.
    receipts: Option<Arc<Receipts>>,
    /// Seals secret answers for the waiting call; `None`: secret questions refused.
    sealing: Option<Arc<SealingKey>>,
    /// The tenants' policies, judging asks with an action before anyone is asked.
    policies: Option<policing::Book>,
}

impl Questions {
    pub fn new(backend: Arc<dyn Backend>, limits: Limits, metrics: Metrics, rate: AskRate) -> Self {
        let per_second = NonZeroU32::new(rate.per_second).unwrap_or(NonZeroU32::MIN);
        let burst = NonZeroU32::new(rate.burst.max(rate.per_second)).unwrap_or(per_second);
        Self {
            backend,
            limits: Arc::new(limits),
            metrics,
            ask_rate: Arc::new(RateLimiter::keyed(
                Quota::per_second(per_second).allow_burst(burst),
            )),
            rate_text: format!(
                "at most {per_second} asks per second per tenant (bursts of {burst})"
            )
            .into(),
            draining: Arc::new(AtomicBool::new(false)),
            hooks: None,
            default_notify: None,
            max_streams_per_tenant: StateConfig::default().max_streams_per_tenant,
            receipts: None,
            audit: None,
            sealing: None,
            policies: None,
        }
    }

    /// Takes secret questions, their answers sealed with `key` (none: refused).
    pub fn with_sealing(mut self, key: Option<Arc<SealingKey>>) -> Self {
        self.sealing = key;
        self
    }

    /// Judges each ask with an action by its tenant's policies first (docs/policy.md).
    pub fn with_policies(mut self, book: policing::Book) -> Self {
        self.policies = Some(book);
        self
    }

    /// Records each quorum vote in the audit log.
    pub fn with_audit(mut self, audit: Audit) -> Self {
        self.audit = Some(audit);
        self
    }

    /// Signs a receipt for every resolution of an ask with an action.
    pub fn with_receipts(mut self, receipts: Arc<Receipts>) -> Self {
        self.receipts = Some(receipts);
        self
    }

    /// With webhooks: an ask that would fail NO_PROVIDER is held instead when one of
    /// the tenant's endpoints provides (receives `ask.requested` for it).
    pub fn with_hooks(mut self, hooks: Arc<dyn HookStore>) -> Self {
        self.hooks = Some(hooks);
        self
    }

    /// The reminder schedule of asks that set none (all zero: none).
    pub fn with_default_notify(mut self, notify: NotifyPolicy) -> Self {
        self.default_notify = Some(notify).filter(schedules_something);
        self
    }

    /// At most `max` Subscribe streams per tenant, over every node.
    pub fn with_max_streams_per_tenant(mut self, max: usize) -> Self {
        self.max_streams_per_tenant = max;
        self
    }

    /// Validates a complete answer batch against the pending ask, then claims it.
    pub async fn answer(
        &self,
        tenant: &str,
        request: AnswerRequest,
        by: &Resolver,
    ) -> Result<Answered, Error> {
        validate::session_id("session_id", &request.session_id)?;
        validate::rpc_id(&request.rpc_id)?;
        let span = telemetry::resolve_span(
            "askgate.answer",
            &request.session_id,
            &request.rpc_id,
            &by.channel,
        );
        let key = SessionKey::new(tenant, request.session_id);
        let claimed = async {
            let pending = self.backend.pending(&key, &request.rpc_id).await?;
            telemetry::link(&span, &pending.traceparent);
            may_answer(&pending, by)?;
            let standing = self.standing(tenant, &pending, by, false).await?;
            let answers = answer::normalize(&pending.questions, request.answers, &self.limits)?;
            let grant = request
                .grant
                .as_ref()
                .map(|g| self.grant_of(&key, &pending, &answers, g, by))
                .transpose()?;
            match pending.quorum.map_or(0, |q| q.count) {
                needed if needed > 1 => {
                    let voter = (by, &standing);
                    self.vote(&key, &pending, answers, voter, needed).await
                }
                _ => {
                    let outcome = Outcome {
                        on_behalf_of: standing.for_person,
                        ..self.answered(&key, &pending, answers, by)?
                    };
                    self.backend.claim(&key, &request.rpc_id, outcome).await?;
                    if let Some(grant) = &grant {
                        self.grant(grant, by).await?;
                    }
                    Ok(Answered::Resolved)
                }
            }
        }
        .instrument(span.clone())
        .await;
        telemetry::record_outcome(&span, &claimed);
        self.count_conflict(tenant, claimed)
    }

    /// Where `by` stands on `pending` ([`people::standing`]): NOT_AN_APPROVER unless
    /// its approvers name them, through a channel that tells who answered (not an ntfy
    /// topic, which anyone holding it may press). Nothing is read for a plain ask.
    async fn standing(
        &self,
        tenant: &str,
        pending: &Requested,
        by: &Resolver,
        cancelling: bool,
    ) -> Result<Standing, Error> {
        if !people::needs_person(pending) {
            return Ok(Standing::default());
        }
        let identity = askgate_channels::knows_who(&by.channel).then_some(by.subject.as_str());
        let store = self.hooks.as_deref();
        people::standing(store, tenant, pending, identity, &by.groups, cancelling).await
    }

    /// The outcome of `answers` to `pending`, the answers to its secret questions
    /// sealed for the waiting call.
    fn answered(
        &self,
        session: &SessionKey,
        pending: &Requested,
        answers: Vec<QuestionAnswer>,
        by: &Resolver,
    ) -> Result<Outcome, Error> {
        if !approval::has_secret(&pending.questions) {
            return Ok(Outcome::answered(answers, by.clone()));
        }
        let Some(key) = &self.sealing else {
            return Err(Error::Internal(
                "this node has no --secret-key-file to seal a secret answer with".into(),
            ));
        };
        let (answers, secret) = approval::split_secret(&pending.questions, answers);
        if secret.is_empty() {
            return Ok(Outcome::answered(answers, by.clone()));
        }
        Ok(Outcome {
            sealed_answers: secrets::seal(key, session, &pending.rpc_id, &secret)?,
            answers_hmac: secrets::mac(key, &secret),
            ..Outcome::answered(answers, by.clone())
        })
    }

    fn count_conflict<T>(&self, tenant: &str, result: Result<T, Error>) -> Result<T, Error> {
        if let Err(Error::NotPending { .. }) = result {
            self.metrics.answer_conflict(tenant);
        }
        result
    }

    /// Closes the whole batch without an answer; the reason reaches the agent.
    pub async fn cancel(
        &self,
        tenant: &str,
        request: CancelRequest,
        by: &Resolver,
    ) -> Result<(), Error> {
        validate::session_id("session_id", &request.session_id)?;
        validate::rpc_id(&request.rpc_id)?;
        validate::text("reason", &request.reason, validate::MAX_CANCEL_REASON_BYTES)?;
        let reason = Some(request.reason.trim().to_owned()).filter(|r| !r.is_empty());
        let source = CancelSource::try_from(request.source)
            .map_err(|_| Error::bad_request("source", "unknown cancel source"))?;
        let span = telemetry::resolve_span(
            "askgate.cancel",
            &request.session_id,
            &request.rpc_id,
            &by.channel,
        );
        let key = SessionKey::new(tenant, request.session_id);
        let claimed = async {
            let pending = self.backend.pending(&key, &request.rpc_id).await?;
            telemetry::link(&span, &pending.traceparent);
            allowed(&pending, by)?;
            self.standing(tenant, &pending, by, true).await?;
            self.backend
                .claim(
                    &key,
                    &request.rpc_id,
                    Outcome::cancelled_by(reason, by.clone(), source),
                )
                .await
        }
        .instrument(span.clone())
        .await;
        telemetry::record_outcome(&span, &claimed);
        self.count_conflict(tenant, claimed)
    }

    /// The asking side gives up: the ask its `request_id` names resolves ABORTED at
    /// once (docs/protocol.md "Semantics" 6), whatever its reattach grace. NOT_PENDING when no
    /// such ask is pending.
    pub async fn abort(&self, tenant: &str, request: AbortRequest) -> Result<(), Error> {
        validate::session_id("session_id", &request.session_id)?;
        if request.request_id.is_empty() {
            return Err(Error::bad_request("request_id", "must not be empty"));
        }
        validate::text("request_id", &request.request_id, validate::MAX_ID_BYTES)?;
        // An abort may record an outcome for an ask not asked yet: it spends the tenant's
        // ask allowance, so that aborts of made-up request ids cannot fill the store.
        if self.ask_rate.check_key(&tenant.to_owned()).is_err() {
            return Err(Error::RateLimited(self.rate_text.to_string()));
        }
        let key = SessionKey::new(tenant, request.session_id);
        // An abort that overtook its ask (the tool gave up before the Ask arrived) is
        // recorded as that ask's outcome: the Ask then ends ABORTED at once, unseen.
        let unasked = events::resolved(&key, &Uuid::now_v7().to_string(), &Outcome::aborted());
        match self
            .backend
            .abort_request(&key, &request.request_id, unasked)
            .await?
        {
            RequestAbort::Pending(rpc_id) => {
                let claimed = self.backend.claim(&key, &rpc_id, Outcome::aborted()).await;
                self.count_conflict(tenant, claimed)
            }
            RequestAbort::Ended => Err(Error::not_pending()),
            RequestAbort::Recorded => Ok(()),
        }
    }

    /// `sessions`: the caller's session patterns when its credential is limited to some
    /// sessions. An `all_sessions` subscription of such a caller carries only the events
    /// of the sessions they match, and does not make the tenant's sessions attended.
    pub async fn subscribe(
        &self,
        tenant: &str,
        sessions: Option<&[String]>,
        request: SubscribeRequest,
    ) -> Result<EventStream, Error> {
        if self.draining.load(Ordering::Acquire) {
            return Err(Error::ShuttingDown);
        }
        let scope = if request.all_sessions {
            if !request.session_id.is_empty() {
                return Err(Error::bad_request(
                    "session_id",
                    "must be empty when all_sessions is set",
                ));
            }
            if request.exclusive {
                return Err(Error::bad_request(
                    "exclusive",
                    "an exclusive subscription holds one session; it cannot be all_sessions",
                ));
            }
            Scope::Tenant(tenant.into())
        } else {
            validate::session_id("session_id", &request.session_id)?;
            Scope::Session(SessionKey::new(tenant, request.session_id))
        };
        validate::text("after", &request.after, validate::MAX_ID_BYTES)?;
        let patterns = match scope {
            Scope::Tenant(_) => sessions.map(<[String]>::to_vec),
            Scope::Session(_) => None,
        };
        let options = SubscribeOptions {
            after: Some(request.after).filter(|a| !a.is_empty()),
            exclusive: request.exclusive,
            passive: patterns.is_some(),
        };
        let hold = self
            .backend
            .hold(tenant, Budget::Streams, self.max_streams_per_tenant)
            .await?;
        let events = self.backend.subscribe(scope, options).await?;
        // The stream holds its unit of the tenant's budget until it is dropped, and no
        // event leaves it with sealed secret answers.
        let events: EventStream = Box::pin(events.map(move |item| {
            let _held = &hold;
            item.map(events::handed_out)
        }));
        Ok(match patterns {
            None => events,
            Some(patterns) => Box::pin(events.filter(move |item| {
                match item {
                    Ok(message) => events::session_of(message)
                        .is_none_or(|session| patterns.iter().any(|p| auth::matches(p, session))),
                    Err(_) => true,
                }
            })),
        })
    }

    pub async fn list_pending(
        &self,
        tenant: &str,
        session_id: String,
    ) -> Result<Vec<Requested>, Error> {
        validate::session_id("session_id", &session_id)?;
        self.backend
            .list_pending(&SessionKey::new(tenant, session_id))
            .await
    }

    /// Starts an agent lease (Agents.Attach).
    pub async fn attach(
        &self,
        tenant: &str,
        agent_id: &str,
        parent_agent_id: &str,
        holder: &Holder,
    ) -> Result<Attached, Error> {
        if self.draining.load(Ordering::Acquire) {
            return Err(Error::ShuttingDown);
        }
        validate::agent_id("agent_id", agent_id)?;
        if !parent_agent_id.is_empty() {
            validate::agent_id("parent_agent_id", parent_agent_id)?;
            if parent_agent_id == agent_id {
                return Err(Error::bad_request(
                    "parent_agent_id",
                    "an agent cannot be its own parent",
                ));
            }
        }
        self.backend
            .attach(tenant, agent_id, parent_agent_id, holder)
            .await
    }

    /// Ends an agent lease; its pending asks are ABORTED.
    pub async fn detach(&self, tenant: &str, agent_id: &str, incarnation: &str) {
        self.backend.detach(tenant, agent_id, incarnation).await;
    }

    /// Shutdown: refuse new asks and subscriptions, resolve pending asks `DISPOSED`, end
    /// every subscription.
    pub async fn shut_down(&self) {
        self.draining.store(true, Ordering::Release);
        self.backend.dispose_all().await;
    }
}

/// CHANNEL_NOT_ALLOWED unless `by`'s channel may resolve `pending`
/// ([`approval::may_resolve`]).
fn allowed(pending: &Requested, by: &Resolver) -> Result<(), Error> {
    match approval::may_resolve(pending, &by.channel) {
        true => Ok(()),
        false => Err(Error::ChannelNotAllowed {
            allowed: pending.allowed_channels.clone(),
        }),
    }
}

/// CHANNEL_NOT_ALLOWED unless `by`'s channel may answer `pending`
/// ([`approval::may_answer`]: no chat channel answers a secret question).
fn may_answer(pending: &Requested, by: &Resolver) -> Result<(), Error> {
    allowed(pending, by)?;
    match approval::may_answer(pending, &by.channel, askgate_channels::is_chat(&by.channel)) {
        true => Ok(()),
        // Allowed, but a chat channel and a secret question.
        false => Err(Error::ChannelNotAllowed {
            allowed: Vec::new(),
        }),
    }
}

#[cfg(test)]
mod tests;

/// The inbound endpoints of the channels (Slack, Telegram, mailed links) answer
/// through this use case, checked as every other answer is.
#[async_trait::async_trait]
impl askgate_channels::resolve::Resolutions for Questions {
    async fn answer(
        &self,
        tenant: &str,
        request: AnswerRequest,
        by: &Resolver,
    ) -> Result<Answered, Error> {
        Questions::answer(self, tenant, request, by).await
    }

    async fn cancel(
        &self,
        tenant: &str,
        request: CancelRequest,
        by: &Resolver,
    ) -> Result<(), Error> {
        Questions::cancel(self, tenant, request, by).await
    }

    async fn list_pending(
        &self,
        tenant: &str,
        session_id: String,
    ) -> Result<Vec<Requested>, Error> {
        Questions::list_pending(self, tenant, session_id).await
    }
}
