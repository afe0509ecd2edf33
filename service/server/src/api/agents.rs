//! `askgate.v1.Agents`: the agent liveness lease. `Attach` answers with a `Lease`, then
//! heartbeats while the caller holds the stream; when the stream ends (the runtime went
//! away, a newer attach replaced it, or the node drains) the lease ends and the agent's
//! pending asks are ABORTED.

use std::{
    future::Future as _,
    pin::Pin,
    task::{Context, Poll},
    time::Duration,
};

use askgate_proto::v1::{
    AttachRequest, AttachResponse, Heartbeat, Lease, agents_server::Agents, attach_response,
};
use tokio::{
    sync::{oneshot, watch},
    time::{Interval, MissedTickBehavior},
};
use tokio_stream::{Stream, wrappers::WatchStream};
use tonic::{Request, Response, Status};
use tracing::{Instrument, Span, debug, instrument};

use super::UntilLapsed;
use crate::{auth::Gate, domain::status};
use crate::{
    auth::{Action, Role},
    backend::Holder,
    domain::bounded,
    questions::Questions,
};

/// The `askgate.v1.Agents` service.
pub struct AgentsApi {
    questions: Questions,
    gate: Gate,
    heartbeat: Duration,
    draining: watch::Receiver<bool>,
}

impl AgentsApi {
    pub fn new(
        questions: Questions,
        gate: Gate,
        heartbeat: Duration,
        draining: watch::Receiver<bool>,
    ) -> Self {
        Self {
            questions,
            gate,
            heartbeat,
            draining,
        }
    }
}

type AttachStream = Pin<Box<dyn Stream<Item = Result<AttachResponse, Status>> + Send>>;

#[tonic::async_trait]
impl Agents for AgentsApi {
    type AttachStream = AttachStream;

    #[instrument(name = "Attach", skip_all, fields(tenant, agent_id = %bounded(&request.get_ref().agent_id), incarnation))]
    async fn attach(
        &self,
        request: Request<AttachRequest>,
    ) -> Result<Response<Self::AttachStream>, Status> {
        let _timer = self.gate.timer("Attach");
        let caller = self.gate.admit(&request, Action::Attach, "")?;
        let request = request.into_inner();
        let attached = self
            .questions
            .attach(
                &caller.tenant,
                &request.agent_id,
                &request.parent_agent_id,
                &Holder {
                    subject: caller.sub.clone(),
                    may_take_over: caller.roles.contains(&Role::Admin),
                },
            )
            .await
            .map_err(|e| status::to_status(&e, "", None))?;
        Span::current().record("incarnation", attached.incarnation.as_str());
        debug!(parent = %bounded(&request.parent_agent_id), "agent attached");
        let mut heartbeat =
            tokio::time::interval_at(tokio::time::Instant::now() + self.heartbeat, self.heartbeat);
        heartbeat.set_missed_tick_behavior(MissedTickBehavior::Delay);
        let lease = LeaseStream {
            lease: Some(Lease {
                incarnation: attached.incarnation.clone(),
            }),
            heartbeat,
            superseded: attached.superseded,
            draining: WatchStream::new(self.draining.clone()),
            detach: Some(Detach {
                questions: self.questions.clone(),
                tenant: caller.tenant.to_string(),
                agent_id: request.agent_id,
                incarnation: attached.incarnation,
                span: Span::current(),
            }),
        };
        let lapsed = self.gate.lapsed(&caller).map(Instrument::in_current_span);
        Ok(Response::new(Box::pin(UntilLapsed::new(lease, lapsed))))
    }
}

/// The Attach response stream: the lease, then heartbeats until the lease ends.
struct LeaseStream {
    lease: Option<Lease>,
    heartbeat: Interval,
    superseded: oneshot::Receiver<()>,
    draining: WatchStream<bool>,
    detach: Option<Detach>,
}

impl Stream for LeaseStream {
    type Item = Result<AttachResponse, Status>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        if let Some(lease) = self.lease.take() {
            return Poll::Ready(Some(Ok(AttachResponse {
                msg: Some(attach_response::Msg::Lease(lease)),
            })));
        }
        // Replaced by a newer attach (or the registry went away): the lease is over.
        if Pin::new(&mut self.superseded).poll(cx).is_ready() {
            return Poll::Ready(None);
        }
        loop {
            match Pin::new(&mut self.draining).poll_next(cx) {
                Poll::Ready(Some(false)) => continue,
                Poll::Ready(Some(true) | None) => return Poll::Ready(None),
                Poll::Pending => break,
            }
        }
        match self.heartbeat.poll_tick(cx) {
            Poll::Ready(_) => Poll::Ready(Some(Ok(AttachResponse {
                msg: Some(attach_response::Msg::Heartbeat(Heartbeat {})),
            }))),
            Poll::Pending => Poll::Pending,
        }
    }
}

impl Drop for LeaseStream {
    fn drop(&mut self) {
        if let Some(detach) = self.detach.take() {
            detach.spawn();
        }
    }
}

/// Ends a lease once its stream is gone.
struct Detach {
    questions: Questions,
    tenant: String,
    agent_id: String,
    incarnation: String,
    span: Span,
}

impl Detach {
    fn spawn(self) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let span = self.span.clone();
        runtime.spawn(
            async move {
                self.questions
                    .detach(&self.tenant, &self.agent_id, &self.incarnation)
                    .await;
                debug!("agent lease ended");
            }
            .instrument(span),
        );
    }
}
