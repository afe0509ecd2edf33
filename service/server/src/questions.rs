//! The askgate use cases over a [`Backend`]: what `Ask`, `Answer`, `Cancel`,
//! `Subscribe` and `ListPending` do, independent of gRPC. Handlers call this; tests can
//! too.

use std::{
    num::NonZeroU32,
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    task::Poll,
    time::{Duration, SystemTime},
};

use askgate_proto::v1::{
    AbortRequest, AnswerRequest, AskRequest, AskResponse, CancelRequest, CancelSource,
    NotifyPolicy, Requested, Resolution, SubscribeRequest, Unattended,
};
use governor::{DefaultKeyedRateLimiter, Quota, RateLimiter};
use tokio::time::Instant;
use tracing::{Instrument, Span, debug};
use uuid::Uuid;

use tokio_stream::StreamExt;

use crate::{
    auth,
    backend::{
        Attached, Backend, Budget, EventStream, Holder, RequestAbort, Scope, Settings,
        SubscribeOptions, events, hooks::HookStore,
    },
    domain::{AskError, Limits, NewAsk, Outcome, SessionKey, answer, validate},
    metrics::Metrics,
};

/// A failed `Ask`, with the rpc_id when the ask got as far as being stored.
#[derive(Debug)]
pub struct AskFailure {
    pub error: AskError,
    pub rpc_id: Option<String>,
}

impl From<AskError> for AskFailure {
    fn from(error: AskError) -> Self {
        Self {
            error,
            rpc_id: None,
        }
    }
}

/// An ask that passed [`Questions::check_ask`], ready to be stored.
pub struct CheckedAsk {
    ask: Box<NewAsk>,
    deadline: Instant,
    started: Instant,
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
            max_streams_per_tenant: Settings::default().max_streams_per_tenant,
        }
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

    /// Checks an ask before anything is stored: a node draining, an invalid batch,
    /// the tenant's rate. A refusal is counted here; what passes goes to [`Self::ask`].
    pub fn check_ask(
        &self,
        tenant: &str,
        request: AskRequest,
        deadline: Instant,
    ) -> Result<CheckedAsk, AskError> {
        let started = Instant::now();
        let checked = self.new_ask(tenant, request, deadline);
        if let Err(error) = &checked {
            self.metrics.ask_finished(tenant, error.reason(), None);
        }
        Ok(CheckedAsk {
            ask: Box::new(checked?),
            deadline,
            started,
        })
    }

    fn new_ask(
        &self,
        tenant: &str,
        request: AskRequest,
        deadline: Instant,
    ) -> Result<NewAsk, AskError> {
        if self.draining.load(Ordering::Acquire) {
            return Err(AskError::ShuttingDown);
        }
        validate::ask(&request, &self.limits)?;
        if self.ask_rate.check_key(&tenant.to_owned()).is_err() {
            return Err(AskError::RateLimited(self.rate_text.to_string()));
        }
        let if_unattended = request.if_unattended();
        let remaining = deadline.saturating_duration_since(Instant::now());
        Ok(NewAsk {
            key: SessionKey::new(tenant, request.session_id),
            questions: request.questions,
            agent: request.agent,
            labels: request.labels,
            expires_at: SystemTime::now().checked_add(remaining),
            request_id: request.request_id,
            if_unattended,
            reattach_grace: Duration::from_millis(request.reattach_grace_ms.into()),
            notify: request
                .notify
                .or(self.default_notify)
                .filter(schedules_something),
        })
    }

    /// Registers a checked batch and waits until it is resolved or its deadline
    /// passes.
    ///
    /// A node keeps one of these futures per pending ask, so its size is memory per
    /// ask: the request was taken apart by [`Self::check_ask`] and is handed to the
    /// backend from its box, and nothing here holds a copy of it.
    pub async fn ask(&self, checked: CheckedAsk) -> Result<AskResponse, AskFailure> {
        let CheckedAsk {
            ask,
            deadline,
            started,
        } = checked;
        let tenant = ask.key.tenant.clone();
        let result = self.register_and_wait(ask, deadline).await;
        let (outcome, waited) = match &result {
            Ok(_) => ("ANSWERED", Some(started.elapsed())),
            Err(AskFailure {
                error: AskError::AskCancelled { .. },
                ..
            }) => ("CANCELLED", Some(started.elapsed())),
            Err(AskFailure {
                error: AskError::AskExpired,
                ..
            }) => ("EXPIRED", None),
            Err(failure) => (failure.error.reason(), None),
        };
        self.metrics.ask_finished(&tenant, outcome, waited);
        result
    }

    async fn register_and_wait(
        &self,
        ask: Box<NewAsk>,
        deadline: Instant,
    ) -> Result<AskResponse, AskFailure> {
        let remaining = deadline.saturating_duration_since(Instant::now());
        let abort = SettleOnDrop {
            backend: Some(self.backend.clone()),
            metrics: self.metrics.clone(),
            key: ask.key.clone(),
            rpc_id: String::new(),
            expired_from: deadline
                .checked_sub((remaining / 4).min(DEADLINE_SLACK))
                .unwrap_or(deadline),
            reattach_grace: ask.reattach_grace,
        };
        let (registered, mut abort) = self.register(ask, abort).await?;
        Span::current().record("rpc_id", abort.rpc_id.as_str());
        debug!("ask registered");

        let mut outcome_rx = registered.outcome;
        let outcome = tokio::select! {
            outcome = &mut outcome_rx => outcome,
            () = tokio::time::sleep_until(deadline) => {
                // Expire it unless a resolution won meanwhile; either way the winner's
                // outcome arrives on the channel.
                let _ = self.backend.claim(&abort.key, &abort.rpc_id, Outcome::expired()).await;
                outcome_rx.await
            }
        };
        let rpc_id = abort.disarm();
        let fail = |error| AskFailure {
            error,
            rpc_id: Some(rpc_id.clone()),
        };
        let outcome = outcome
            .map_err(|_| fail(AskError::Internal("ask dropped without an outcome".into())))?;
        match outcome.resolution {
            Resolution::Answered => Ok(AskResponse {
                rpc_id,
                answers: outcome.answers,
                resolved_by: outcome.resolved_by,
            }),
            Resolution::Cancelled => Err(fail(AskError::AskCancelled {
                reason: outcome.cancel_reason,
                origin: outcome.cancel_source,
            })),
            Resolution::Aborted => Err(fail(AskError::AskAborted)),
            Resolution::Expired => Err(fail(AskError::AskExpired)),
            Resolution::Disposed => Err(fail(AskError::ShuttingDown)),
            Resolution::Unspecified => Err(fail(AskError::Internal(
                "ask resolved without a resolution".into(),
            ))),
        }
    }

    /// Registers `ask`; `settle` (its rpc_id still empty) then settles it if the call is
    /// dropped. A call can be dropped while its registration is in flight, after the
    /// ask was stored and announced (a subscriber, even the caller, may see it before
    /// this node sees the backend's reply): registration that does not finish at once
    /// goes on on a task of its own, and a call dropped meanwhile hands `settle` to that
    /// task, so the ask is settled as for any dropped call instead of staying pending
    /// with nobody waiting.
    async fn register(
        &self,
        ask: Box<NewAsk>,
        mut settle: SettleOnDrop,
    ) -> Result<(crate::backend::Registered, SettleOnDrop), AskFailure> {
        let backend = self.backend.clone();
        let providers = self
            .hooks
            .clone()
            .filter(|_| ask.if_unattended == Unattended::Fail);
        let mut registering = Box::pin(async move {
            let Some(hooks) = providers else {
                return backend.register(*ask).await;
            };
            // Semantics 8 with webhooks: nobody follows the session, but a webhook
            // will carry the ask to someone.
            let held = NewAsk {
                if_unattended: Unattended::Hold,
                ..NewAsk::clone(&ask)
            };
            match backend.register(*ask).await {
                Err(AskError::NoProvider)
                    if hooks
                        .provides(&held.key.tenant, &held.key.session_id, &held.labels)
                        .await =>
                {
                    backend.register(held).await
                }
                other => other,
            }
        });
        // The memory backend finishes in one poll: no task for it.
        let result =
            match std::future::poll_fn(|cx| Poll::Ready(registering.as_mut().poll(cx))).await {
                Poll::Ready(result) => result,
                Poll::Pending => {
                    let mut handover = Handover {
                        task: Some(tokio::spawn(registering.in_current_span())),
                        settle: Some(settle),
                    };
                    let joined = handover.task.as_mut().expect("just set").await;
                    handover.task = None;
                    settle = handover.settle.take().expect("just set");
                    joined.unwrap_or_else(|e| {
                        Err(AskError::Internal(format!("registration failed: {e}")))
                    })
                }
            };
        match result {
            Ok(registered) => {
                let rpc_id = registered.rpc_id.clone();
                Ok((registered, settle.of(rpc_id)))
            }
            Err(error) => {
                settle.disarm();
                Err(error.into())
            }
        }
    }

    /// Validates a complete answer batch against the pending ask, then claims it.
    pub async fn answer(
        &self,
        tenant: &str,
        request: AnswerRequest,
        by: &str,
    ) -> Result<(), AskError> {
        validate::session_id("session_id", &request.session_id)?;
        validate::rpc_id(&request.rpc_id)?;
        let key = SessionKey::new(tenant, request.session_id);
        let claimed = async {
            let questions = self.backend.questions(&key, &request.rpc_id).await?;
            let answers = answer::normalize(&questions, request.answers, &self.limits)?;
            self.backend
                .claim(&key, &request.rpc_id, Outcome::answered(answers, by))
                .await
        }
        .await;
        self.count_conflict(tenant, claimed)
    }

    fn count_conflict(&self, tenant: &str, result: Result<(), AskError>) -> Result<(), AskError> {
        if let Err(AskError::NotPending { .. }) = result {
            self.metrics.answer_conflict(tenant);
        }
        result
    }

    /// Closes the whole batch without an answer; the reason reaches the agent.
    pub async fn cancel(
        &self,
        tenant: &str,
        request: CancelRequest,
        by: &str,
    ) -> Result<(), AskError> {
        validate::session_id("session_id", &request.session_id)?;
        validate::rpc_id(&request.rpc_id)?;
        validate::text("reason", &request.reason, validate::MAX_CANCEL_REASON_BYTES)?;
        let reason = Some(request.reason.trim().to_owned()).filter(|r| !r.is_empty());
        let source = CancelSource::try_from(request.source)
            .map_err(|_| AskError::bad_request("source", "unknown cancel source"))?;
        let key = SessionKey::new(tenant, request.session_id);
        let claimed = self
            .backend
            .claim(
                &key,
                &request.rpc_id,
                Outcome::cancelled_by(reason, by, source),
            )
            .await;
        self.count_conflict(tenant, claimed)
    }

    /// The asking side gives up: the ask its `request_id` names resolves ABORTED at
    /// once (docs/protocol.md "Semantics" 6), whatever its reattach grace. NOT_PENDING when no
    /// such ask is pending.
    pub async fn abort(&self, tenant: &str, request: AbortRequest) -> Result<(), AskError> {
        validate::session_id("session_id", &request.session_id)?;
        if request.request_id.is_empty() {
            return Err(AskError::bad_request("request_id", "must not be empty"));
        }
        validate::text("request_id", &request.request_id, validate::MAX_ID_BYTES)?;
        // An abort may record an outcome for an ask not asked yet: it spends the tenant's
        // ask allowance, so that aborts of made-up request ids cannot fill the store.
        if self.ask_rate.check_key(&tenant.to_owned()).is_err() {
            return Err(AskError::RateLimited(self.rate_text.to_string()));
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
            RequestAbort::Ended => Err(AskError::not_pending()),
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
    ) -> Result<EventStream, AskError> {
        if self.draining.load(Ordering::Acquire) {
            return Err(AskError::ShuttingDown);
        }
        let scope = if request.all_sessions {
            if !request.session_id.is_empty() {
                return Err(AskError::bad_request(
                    "session_id",
                    "must be empty when all_sessions is set",
                ));
            }
            if request.exclusive {
                return Err(AskError::bad_request(
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
        // The stream holds its unit of the tenant's budget until it is dropped.
        let events: EventStream = Box::pin(events.map(move |item| {
            let _held = &hold;
            item
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
    ) -> Result<Vec<Requested>, AskError> {
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
    ) -> Result<Attached, AskError> {
        if self.draining.load(Ordering::Acquire) {
            return Err(AskError::ShuttingDown);
        }
        validate::agent_id("agent_id", agent_id)?;
        if !parent_agent_id.is_empty() {
            validate::agent_id("parent_agent_id", parent_agent_id)?;
            if parent_agent_id == agent_id {
                return Err(AskError::bad_request(
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

/// Whether a reminder schedule sends anything.
fn schedules_something(notify: &NotifyPolicy) -> bool {
    notify.remind_after_ms > 0 || notify.escalate_after_ms > 0
}

/// A registration in flight on its own task, with what settles the ask should the call
/// be dropped before the registration finishes.
struct Handover {
    task: Option<tokio::task::JoinHandle<Result<crate::backend::Registered, AskError>>>,
    settle: Option<SettleOnDrop>,
}

impl Drop for Handover {
    fn drop(&mut self) {
        let (Some(task), Some(mut settle)) = (self.task.take(), self.settle.take()) else {
            return;
        };
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            settle.disarm();
            return;
        };
        runtime.spawn(
            async move {
                match task.await {
                    // Settled as any dropped call: its Drop does it.
                    Ok(Ok(registered)) => drop(settle.of(registered.rpc_id)),
                    _ => {
                        settle.disarm();
                    }
                }
            }
            .in_current_span(),
        );
    }
}

/// A caller's own deadline fires before the server's: its clock started before the
/// request was sent, the server's when the request arrived. A call dropped this close
/// to its deadline (at most a quarter of its whole wait) was dropped by the deadline,
/// so its ask resolves EXPIRED rather than ABORTED.
const DEADLINE_SLACK: Duration = Duration::from_millis(500);

/// Resolves the ask when the waiting `Ask` future is dropped before it has an outcome
/// (tonic drops it when the caller cancels or its connection goes away): `EXPIRED` when
/// the drop came with the caller's deadline; otherwise `ABORTED`, at once or, with a
/// reattach grace, once the grace has passed with no call reattached (Semantics 10).
struct SettleOnDrop {
    backend: Option<Arc<dyn Backend>>,
    metrics: Metrics,
    key: SessionKey,
    rpc_id: String,
    expired_from: Instant,
    reattach_grace: Duration,
}

impl SettleOnDrop {
    /// Settles the ask `rpc_id` (once registered).
    fn of(mut self, rpc_id: String) -> Self {
        self.rpc_id = rpc_id;
        self
    }

    /// The call has its outcome: nothing to settle when it drops. Hands back the
    /// rpc_id.
    fn disarm(&mut self) -> String {
        self.backend = None;
        std::mem::take(&mut self.rpc_id)
    }
}

impl Drop for SettleOnDrop {
    fn drop(&mut self) {
        let Some(backend) = self.backend.take() else {
            return;
        };
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let key = self.key.clone();
        let rpc_id = std::mem::take(&mut self.rpc_id);
        let expired = Instant::now() >= self.expired_from;
        let grace = self.reattach_grace;
        let outcome = match expired {
            true => "EXPIRED",
            false => "DROPPED",
        };
        self.metrics.ask_finished(&self.key.tenant, outcome, None);
        runtime.spawn(
            async move {
                let result = match (expired, grace.is_zero()) {
                    (true, _) => backend.claim(&key, &rpc_id, Outcome::expired()).await,
                    (false, true) => backend.claim(&key, &rpc_id, Outcome::aborted()).await,
                    (false, false) => {
                        debug!(%rpc_id, ?grace, "the caller dropped its ask; waiting for a reattach");
                        tokio::time::sleep(grace).await;
                        backend.abandon(&key, &rpc_id).await
                    }
                };
                if result.is_ok() {
                    debug!(%rpc_id, expired, "the caller's dropped ask is settled");
                }
            }
            .in_current_span(),
        );
    }
}

#[cfg(test)]
mod tests {
    use askgate_engines::memory::MemoryBackend;
    use askgate_proto::v1::{Question, QuestionOption, subscribe_response::Event};
    use async_trait::async_trait;
    use tokio::sync::Semaphore;
    use tokio_stream::StreamExt;

    use super::*;
    use crate::backend::{Registered, Settings, Stats};

    /// The memory backend, except that a registration, once the ask is stored and
    /// announced, waits for a permit before it returns: the window in which a Redis
    /// node has published `requested` but not yet read the script's reply.
    struct SlowRegistration {
        inner: MemoryBackend,
        permits: Arc<Semaphore>,
    }

    #[async_trait]
    impl Backend for SlowRegistration {
        async fn hold(
            &self,
            tenant: &str,
            budget: Budget,
            max: usize,
        ) -> Result<crate::backend::BudgetHold, AskError> {
            self.inner.hold(tenant, budget, max).await
        }
        async fn register(&self, ask: NewAsk) -> Result<Registered, AskError> {
            let registered = self.inner.register(ask).await;
            let _permit = self.permits.acquire().await.expect("open");
            registered
        }
        async fn questions(
            &self,
            key: &SessionKey,
            rpc_id: &str,
        ) -> Result<Vec<Question>, AskError> {
            self.inner.questions(key, rpc_id).await
        }
        async fn claim(
            &self,
            key: &SessionKey,
            rpc_id: &str,
            outcome: Outcome,
        ) -> Result<(), AskError> {
            self.inner.claim(key, rpc_id, outcome).await
        }
        async fn abandon(&self, key: &SessionKey, rpc_id: &str) -> Result<(), AskError> {
            self.inner.abandon(key, rpc_id).await
        }
        async fn subscribe(
            &self,
            scope: Scope,
            options: SubscribeOptions,
        ) -> Result<EventStream, AskError> {
            self.inner.subscribe(scope, options).await
        }
        async fn list_pending(&self, key: &SessionKey) -> Result<Vec<Requested>, AskError> {
            self.inner.list_pending(key).await
        }
        async fn abort_request(
            &self,
            key: &SessionKey,
            request_id: &str,
            resolved: askgate_proto::v1::Resolved,
        ) -> Result<crate::backend::RequestAbort, AskError> {
            self.inner.abort_request(key, request_id, resolved).await
        }
        async fn notify(
            &self,
            key: &SessionKey,
            rpc_id: &str,
            notice: askgate_proto::v1::subscribe_response::Event,
        ) -> Result<Option<crate::backend::Noticed>, AskError> {
            self.inner.notify(key, rpc_id, notice).await
        }
        fn set_tap(&self, tap: crate::backend::Tap) {
            self.inner.set_tap(tap);
        }
        async fn attach(
            &self,
            tenant: &str,
            agent_id: &str,
            parent: &str,
            holder: &Holder,
        ) -> Result<Attached, AskError> {
            self.inner.attach(tenant, agent_id, parent, holder).await
        }
        async fn detach(&self, tenant: &str, agent_id: &str, incarnation: &str) {
            self.inner.detach(tenant, agent_id, incarnation).await
        }
        async fn healthy(&self) -> bool {
            self.inner.healthy().await
        }
        async fn stats(&self) -> Stats {
            self.inner.stats().await
        }
        async fn dispose_all(&self) {
            self.inner.dispose_all().await
        }
    }

    async fn next(events: &mut EventStream) -> Event {
        tokio::time::timeout(Duration::from_secs(10), events.next())
            .await
            .expect("an event within 10s")
            .expect("the stream goes on")
            .expect("no error")
            .event
            .clone()
            .expect("an event")
    }

    #[tokio::test]
    async fn a_call_dropped_while_its_registration_is_in_flight_leaves_no_ask_pending() {
        let permits = Arc::new(Semaphore::new(0));
        let backend = Arc::new(SlowRegistration {
            inner: MemoryBackend::new(Settings::default()),
            permits: permits.clone(),
        });
        let questions = Questions::new(
            backend.clone(),
            Limits::default(),
            Metrics::new(false),
            AskRate {
                per_second: 100,
                burst: 100,
            },
        );
        let mut events = questions
            .subscribe(
                "t",
                None,
                SubscribeRequest {
                    session_id: "s".into(),
                    ..Default::default()
                },
            )
            .await
            .expect("subscribe");
        assert!(matches!(next(&mut events).await, Event::Synced(_)));

        let request = AskRequest {
            session_id: "s".into(),
            questions: vec![Question {
                id: "q".into(),
                question: "Go?".into(),
                options: vec![QuestionOption {
                    label: "yes".into(),
                    description: None,
                }],
                ..Default::default()
            }],
            ..Default::default()
        };
        let checked = questions
            .check_ask("t", request, Instant::now() + Duration::from_secs(60))
            .expect("a valid ask");
        let asking = questions.clone();
        let call = tokio::spawn(async move { asking.ask(checked).await });
        let Event::Requested(requested) = next(&mut events).await else {
            panic!("expected requested");
        };

        // The caller goes away before its node has seen the registration finish.
        call.abort();
        let _ = call.await;
        permits.add_permits(1);

        let Event::Resolved(resolved) = next(&mut events).await else {
            panic!("expected resolved");
        };
        assert_eq!(resolved.rpc_id, requested.rpc_id);
        assert_eq!(resolved.reason(), Resolution::Aborted);
        let key = SessionKey::new("t", "s".to_owned());
        assert!(backend.list_pending(&key).await.expect("list").is_empty());
    }
}
