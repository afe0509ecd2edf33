//! `Ask`: checking a batch, registering it (handed to a task of its own once it is
//! under way, so that a dropped call still settles it) and waiting for its outcome.

use std::{
    sync::{Arc, atomic::Ordering},
    task::Poll,
    time::{Duration, SystemTime},
};

use askgate_contract::{digest::action_digest, receipt::approving_answers};
use askgate_proto::v1::{AskRequest, AskResponse, NotifyPolicy, Unattended};
use tokio::{sync::oneshot, time::Instant};
use tracing::{Instrument, Span, debug};

use super::{
    AskFailure, CheckedAsk, Questions,
    policing::{self, Policed},
    settling::Terms,
};
use crate::{
    backend::Backend,
    domain::{Error, NewAsk, Outcome, SessionKey, Violation, answer, approval, validate},
    metrics::Metrics,
};

impl Questions {
    /// Checks an ask before anything is stored: a node draining, an invalid batch,
    /// the tenant's rate. A refusal is counted here; what passes goes to [`Self::ask`].
    /// `subject` is the asking credential's (it may not approve its own quorum ask).
    pub fn check_ask(
        &self,
        tenant: &str,
        subject: &str,
        request: AskRequest,
        deadline: Instant,
    ) -> Result<CheckedAsk, Error> {
        let started = Instant::now();
        // The ask's own lifetime, when it sets one, shortens the call's.
        let deadline = match request.ttl_ms {
            0 => deadline,
            ttl => deadline.min(started + Duration::from_millis(ttl)),
        };
        let checked = self.new_ask(tenant, subject, request, deadline);
        if let Err(error) = &checked {
            self.metrics.ask_finished(tenant, error.reason(), None);
        }
        Ok(CheckedAsk {
            ask: Box::new(checked?),
            deadline,
            started,
            span: Span::none(),
        })
    }

    fn new_ask(
        &self,
        tenant: &str,
        subject: &str,
        request: AskRequest,
        deadline: Instant,
    ) -> Result<NewAsk, Error> {
        if self.draining.load(Ordering::Acquire) {
            return Err(Error::ShuttingDown);
        }
        validate::ask(&request, &self.limits)?;
        if self.ask_rate.check_key(&tenant.to_owned()).is_err() {
            return Err(Error::RateLimited(self.rate_text.to_string()));
        }
        let if_unattended = request.if_unattended();
        let remaining = deadline.saturating_duration_since(Instant::now());
        // A secret answer travels sealed: a node with no key to seal it with (Redis
        // without --secret-key-file) cannot take one.
        if let Some(i) = request.questions.iter().position(|q| q.secret)
            && self.sealing.is_none()
        {
            return Err(Error::bad_request(
                format!("questions[{i}].secret"),
                "this server takes no secret questions: on Redis every node needs the same \
                 --secret-key-file to seal their answers with",
            ));
        }
        let default_answers = match request.default_answers.is_empty() {
            true => Vec::new(),
            false => answer::normalize(&request.questions, request.default_answers, &self.limits)
                .map_err(|e| match e {
                Error::BadAnswer(violations) => Error::BadRequest(
                    violations
                        .into_iter()
                        .map(|v| {
                            let field = v.field.replacen("answers", "default_answers", 1);
                            Violation::new(field, v.description)
                        })
                        .collect(),
                ),
                other => other,
            })?,
        };
        let (action, action_digest) = match request.action {
            Some(mut action) => {
                let digest = action_digest(&action.name, &action.arguments_json)
                    .map_err(|e| Error::bad_request("action.arguments_json", e.to_string()))?;
                let named = !action.approving_answers.is_empty();
                let approving = approving_answers(&action, &request.questions);
                action.approving_answers = approval::approving_answers(
                    &request.questions,
                    approving,
                    named,
                    &self.limits,
                )?;
                (Some(action), digest)
            }
            None => (None, String::new()),
        };
        Ok(NewAsk {
            key: SessionKey::new(tenant, request.session_id),
            questions: compact(request.questions),
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
            action,
            action_digest,
            quorum: request.quorum.map_or(0, |q| q.count),
            default_answers,
            allowed_channels: request.allowed_channels,
            // Approvers naming nobody are no approvers: anyone may answer, as unset.
            approvers: request
                .approvers
                .filter(|a| !a.subjects.is_empty() || !a.groups.is_empty()),
            escalation: request.escalation,
            asked_by: subject.to_owned(),
            asked_groups: Vec::new(),
            own_ttl: request.ttl_ms > 0,
            traceparent: String::new(),
            policy: None,
        })
    }

    /// Registers a checked batch and waits until it is resolved or its deadline
    /// passes.
    ///
    /// A node keeps one of these futures per pending ask, so its size is memory per
    /// ask: the request was taken apart by [`Self::check_ask`] and is handed to the
    /// backend from its box, nothing here holds a copy of it, and the wait, once the
    /// ask is registered, holds only what settles it (the registration's state is
    /// gone by then).
    pub async fn ask(&self, checked: CheckedAsk) -> Result<AskResponse, AskFailure> {
        let CheckedAsk {
            mut ask,
            mut deadline,
            started,
            span,
        } = checked;
        let mut unfinished = Unfinished(Some(&span));
        // Boxed: only asks with an action are judged, and the future of every other
        // ask (one per pending ask) stays as small as it was.
        let policed = match ask.action.is_some() && self.policies.is_some() {
            true => {
                let lifetime = policing::Lifetime {
                    deadline: &mut deadline,
                    started,
                };
                Box::pin(self.police(&mut ask, lifetime)).await
            }
            false => Policed::Ask,
        };
        let result = match policed {
            Policed::Decided(result) => (result, ask.key.tenant.clone()),
            Policed::Ask if span.is_disabled() => {
                self.register_and_wait(ask, deadline, &span).await
            }
            Policed::Ask => {
                self.register_and_wait(ask, deadline, &span)
                    .instrument(span.clone())
                    .await
            }
        };
        unfinished.0 = None;
        let (result, tenant) = result;
        let (outcome, waited) = match &result {
            Ok(response) => (response.resolution().as_str_name(), Some(started.elapsed())),
            Err(AskFailure {
                error: Error::AskCancelled { .. },
                ..
            }) => ("CANCELLED", Some(started.elapsed())),
            Err(AskFailure {
                error: Error::AskExpired,
                ..
            }) => ("EXPIRED", None),
            Err(failure) => (failure.error.reason(), None),
        };
        self.metrics.ask_finished(&tenant, outcome, waited);
        if !span.is_disabled() {
            traced_outcome(&span, &result, started);
        }
        result
    }

    /// The ask's outcome, and its tenant.
    async fn register_and_wait(
        &self,
        ask: Box<NewAsk>,
        deadline: Instant,
        span: &Span,
    ) -> (Result<AskResponse, AskFailure>, Arc<str>) {
        let tenant = ask.key.tenant.clone();
        let (mut outcome_rx, settle) = match self.registered(ask, deadline, span).await {
            Ok(registered) => registered,
            Err(failure) => return (Err(failure), tenant),
        };
        let outcome = self.wait(&mut outcome_rx, deadline, &settle).await;
        (self.finish(outcome, settle.settled(), span), tenant)
    }

    /// Registers `ask`: the channel its outcome comes on, and what settles it should
    /// the call be dropped (with its terms, when it has any).
    async fn registered(
        &self,
        ask: Box<NewAsk>,
        deadline: Instant,
        span: &Span,
    ) -> Result<(oneshot::Receiver<Box<Outcome>>, SettleOnDrop), AskFailure> {
        let remaining = deadline.saturating_duration_since(Instant::now());
        let terms = Terms::of(&ask);
        let settle = SettleOnDrop {
            backend: Some(self.backend.clone()),
            metrics: self.metrics.clone(),
            key: ask.key.clone(),
            rpc_id: String::new(),
            expired_from: deadline
                .checked_sub((remaining / 4).min(DEADLINE_SLACK))
                .unwrap_or(deadline),
            reattach_grace: ask.reattach_grace,
            terms,
        };
        let (registered, settle) = self.register(ask, settle).await?;
        // The call's own span (the log's), whose lines want the rpc_id too.
        Span::current().record("rpc_id", settle.rpc_id.as_str());
        span.record("askgate.rpc_id", settle.rpc_id.as_str());
        debug!("ask registered");
        Ok((registered.outcome, settle))
    }

    /// The outcome, once it comes: when the deadline passes first, the ask is expired
    /// (or given its default answers) unless a resolution won meanwhile; either way
    /// the winner's outcome arrives on the channel.
    async fn wait(
        &self,
        outcome: &mut oneshot::Receiver<Box<Outcome>>,
        deadline: Instant,
        settle: &SettleOnDrop,
    ) -> Result<Outcome, oneshot::error::RecvError> {
        match tokio::time::timeout_at(deadline, &mut *outcome).await {
            Ok(outcome) => outcome.map(|o| *o),
            Err(_) => {
                let default_answers = settle.terms.as_ref().map(|t| &t.default_answers[..]);
                let expired = Outcome::on_expiry(default_answers.unwrap_or_default());
                let _ = self
                    .backend
                    .claim(&settle.key, &settle.rpc_id, expired)
                    .await;
                outcome.await.map(|o| *o)
            }
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
                Err(Error::NoProvider)
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
        let result = match std::future::poll_fn(|cx| Poll::Ready(registering.as_mut().poll(cx)))
            .await
        {
            Poll::Ready(result) => result,
            Poll::Pending => {
                let mut handover = Handover {
                    task: Some(tokio::spawn(registering.in_current_span())),
                    settle: Some(settle),
                };
                let joined = handover.task.as_mut().expect("just set").await;
                handover.task = None;
                settle = handover.settle.take().expect("just set");
                joined.unwrap_or_else(|e| Err(Error::Internal(format!("registration failed: {e}"))))
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
}

/// Records how an ask ended on its span: its resolution (or the refusal's reason, an
/// error) and how long it waited.
fn traced_outcome(span: &Span, result: &Result<AskResponse, AskFailure>, started: Instant) {
    let (resolution, error) = match result {
        Ok(response) => (response.resolution().as_str_name(), false),
        Err(failure) => match &failure.error {
            Error::AskCancelled { .. } => ("CANCELLED", false),
            Error::AskExpired => ("EXPIRED", false),
            Error::AskAborted => ("ABORTED", false),
            other => (other.reason(), true),
        },
    };
    span.record("askgate.resolution", resolution);
    span.record(
        "askgate.wait_ms",
        i64::try_from(started.elapsed().as_millis()).unwrap_or(i64::MAX),
    );
    if error {
        span.record("otel.status_code", "error");
    }
}

/// Marks an ask's span DROPPED when its call goes away before the ask has an outcome
/// (the ask is then settled as [`SettleOnDrop`] says).
struct Unfinished<'a>(Option<&'a Span>);

impl Drop for Unfinished<'_> {
    fn drop(&mut self) {
        if let Some(span) = self.0.filter(|span| !span.is_disabled()) {
            span.record("askgate.resolution", "DROPPED");
        }
    }
}

/// `questions` holding no spare room: decoding grows a list four entries at a time
/// (a one-question batch held room for four, 600 bytes), and an ask's questions are
/// kept for as long as it waits.
fn compact(mut questions: Vec<askgate_proto::v1::Question>) -> Vec<askgate_proto::v1::Question> {
    questions.shrink_to_fit();
    for question in &mut questions {
        question.options.shrink_to_fit();
    }
    questions
}

/// Whether a reminder schedule sends anything.
pub(super) fn schedules_something(notify: &NotifyPolicy) -> bool {
    notify.remind_after_ms > 0 || notify.escalate_after_ms > 0
}

/// A registration in flight on its own task, with what settles the ask should the call
/// be dropped before the registration finishes.
struct Handover {
    task: Option<tokio::task::JoinHandle<Result<crate::backend::Registered, Error>>>,
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
pub(super) struct SettleOnDrop {
    backend: Option<Arc<dyn Backend>>,
    metrics: Metrics,
    key: SessionKey,
    rpc_id: String,
    expired_from: Instant,
    reattach_grace: Duration,
    /// The ask's approval terms (none for a plain ask): its default answers are what
    /// it resolves with when it expires (none: EXPIRED).
    terms: Option<Box<Terms>>,
}

impl SettleOnDrop {
    /// Settles the ask `rpc_id` (once registered).
    fn of(mut self, rpc_id: String) -> Self {
        self.rpc_id = rpc_id;
        self
    }

    /// The call has its outcome: nothing to settle when it drops. Hands back the
    /// rpc_id.
    /// What the reply to the outcome needs (its terms, session and rpc_id), the ask
    /// no longer settled on drop: the outcome came.
    fn settled(mut self) -> (Option<Box<Terms>>, SessionKey, String) {
        let terms = self.terms.take();
        let key = self.key.clone();
        (terms, key, self.disarm())
    }

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
        let default_answers = self.terms.as_ref().map(|t| &t.default_answers[..]);
        let on_expiry = Outcome::on_expiry(default_answers.unwrap_or_default());
        let outcome = match expired {
            true => "EXPIRED",
            false => "DROPPED",
        };
        self.metrics.ask_finished(&self.key.tenant, outcome, None);
        runtime.spawn(
            async move {
                let result = match (expired, grace.is_zero()) {
                    (true, _) => backend.claim(&key, &rpc_id, on_expiry).await,
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
