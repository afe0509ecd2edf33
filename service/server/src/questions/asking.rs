//! `Ask`: checking a batch, registering it (handed to a task of its own once it is
//! under way, so that a dropped call still settles it) and waiting for its outcome.

use std::{
    sync::{Arc, atomic::Ordering},
    task::Poll,
    time::{Duration, SystemTime},
};

use askgate_proto::v1::{AskRequest, AskResponse, NotifyPolicy, Resolution, Unattended};
use tokio::time::Instant;
use tracing::{Instrument, Span, debug};

use super::{AskFailure, CheckedAsk, Questions};
use crate::{
    backend::Backend,
    domain::{Error, NewAsk, Outcome, SessionKey, validate},
    metrics::Metrics,
};

impl Questions {
    /// Checks an ask before anything is stored: a node draining, an invalid batch,
    /// the tenant's rate. A refusal is counted here; what passes goes to [`Self::ask`].
    pub fn check_ask(
        &self,
        tenant: &str,
        request: AskRequest,
        deadline: Instant,
    ) -> Result<CheckedAsk, Error> {
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
        let outcome =
            outcome.map_err(|_| fail(Error::Internal("ask dropped without an outcome".into())))?;
        match outcome.resolution {
            Resolution::Answered => Ok(AskResponse {
                rpc_id,
                answers: outcome.answers,
                resolved_by: outcome.resolved_by,
            }),
            Resolution::Cancelled => Err(fail(Error::AskCancelled {
                reason: outcome.cancel_reason,
                origin: outcome.cancel_source,
            })),
            Resolution::Aborted => Err(fail(Error::AskAborted)),
            Resolution::Expired => Err(fail(Error::AskExpired)),
            Resolution::Disposed => Err(fail(Error::ShuttingDown)),
            Resolution::Unspecified => Err(fail(Error::Internal(
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
