//! Typed client for askgate: ask humans structured questions and wait for the answer,
//! or, on the UI side, follow a session's questions and resolve them.
//!
//! ```no_run
//! use askgate_client::{Ask, Client, Event, Reason, answer, question};
//! use std::time::Duration;
//! use tokio_stream::StreamExt;
//!
//! # async fn demo() -> Result<(), askgate_client::Error> {
//! let mut client = Client::connect("http://127.0.0.1:50051").await?;
//!
//! // The UI side: follow session "s-1" and answer its questions.
//! let mut ui = client.clone();
//! let mut events = ui.subscribe_session("s-1").await?;
//! tokio::spawn(async move {
//!     while let Some(Ok(Event::Requested { requested, .. })) = events.next().await {
//!         let answers = vec![answer::select("db", ["Postgres"])];
//!         let _ = ui.answer(&requested.session_id, &requested.rpc_id, answers).await;
//!     }
//! });
//!
//! // The agent side: one call that blocks until a human resolves the batch.
//! let ask = Ask::new("s-1")
//!     .question(
//!         question("db", "Which database should the service use?")
//!             .header("Database")
//!             .option("Postgres", "Relational, already in the stack (Recommended)")
//!             .option("SQLite", "Embedded, no server to run"),
//!     )
//!     .timeout(Duration::from_secs(300));
//! match client.ask(ask).await {
//!     Ok(response) => println!("answered: {:?}", response.answers),
//!     Err(e) if e.reason() == Reason::AskCancelled => println!("declined: {}", e.message()),
//!     Err(e) => return Err(e),
//! }
//! # Ok(())
//! # }
//! ```
//!
//! Layout: [`Client`] for the calls, [`Ask`] and [`question`] to build a batch,
//! [`answer`] to build answers, [`Event`] for subscriptions, [`Error`] and [`Reason`]
//! for failures. [`proto`] re-exports the wire types.

#![warn(missing_docs)]

pub mod answer;
mod ask;
mod error;
mod events;
mod follow;
mod lease;
mod retry;
pub mod tool;

pub use askgate_proto::v1 as proto;
use proto::{
    AnswerRequest, AskResponse, CancelRequest, ListPendingRequest, QuestionAnswer, Requested,
    SubscribeRequest, agents_client::AgentsClient, user_questions_client::UserQuestionsClient,
};
use tokio::time::Instant;
use tonic::transport::{Channel, Endpoint};

pub use ask::{Ask, DEFAULT_REATTACH_GRACE, QuestionBuilder, question};
pub use error::{Error, Reason};
pub use events::{Event, Events};
pub use follow::Following;
pub use lease::AgentLease;

/// A connection to askgate's `UserQuestions` service. Cheap to clone: clones share the
/// underlying HTTP/2 connection.
#[derive(Debug, Clone)]
pub struct Client {
    inner: UserQuestionsClient<Channel>,
    agents: AgentsClient<Channel>,
}

impl Client {
    /// Connects to `endpoint`, e.g. `http://127.0.0.1:50051`.
    pub async fn connect(endpoint: impl Into<String>) -> Result<Self, Error> {
        let channel = Endpoint::from_shared(endpoint.into())
            .map_err(Error::transport)?
            .connect()
            .await
            .map_err(Error::transport)?;
        Ok(Self::new(channel))
    }

    /// A client for `endpoint` that connects on first use (and reconnects after a
    /// failure), so it can be made before the server is up.
    pub fn connect_lazy(endpoint: impl Into<String>) -> Result<Self, Error> {
        let channel = Endpoint::from_shared(endpoint.into())
            .map_err(Error::transport)?
            .connect_lazy();
        Ok(Self::new(channel))
    }

    /// Wraps an existing channel (TLS, interceptors and timeouts are the caller's).
    pub fn new(channel: Channel) -> Self {
        Self {
            inner: UserQuestionsClient::new(channel.clone()),
            agents: AgentsClient::new(channel),
        }
    }

    /// Asks a batch of questions and waits until a human resolves it, the ask's
    /// timeout passes ([`Reason::AskExpired`]) or the server gives up.
    ///
    /// A call that fails with UNAVAILABLE (the node drains, the server is unreachable)
    /// or a broken connection is retried with backoff and the same request_id, within
    /// the timeout: the retry joins the pending ask, or gets the human's answer if it
    /// came meanwhile (see [`Ask`]).
    ///
    /// The timeout travels as the gRPC deadline, which the server honours itself
    /// (subscribers see the ask resolved `EXPIRED`). This side's clock starts first, so
    /// the local deadline usually fires a moment before the server's answer arrives;
    /// it is reported as [`Reason::AskExpired`] all the same.
    pub async fn ask(&mut self, ask: Ask) -> Result<AskResponse, Error> {
        let deadline = ask.timeout.map(|t| Instant::now() + t);
        let mut delays = retry::backoff();
        loop {
            let mut request = tonic::Request::new(ask.request.clone());
            if let Some(deadline) = deadline {
                let remaining = deadline.saturating_duration_since(Instant::now());
                if remaining.is_zero() {
                    return Err(Error::local_deadline());
                }
                request.set_timeout(remaining);
            }
            let error = match self.inner.ask(request).await {
                Ok(response) => return Ok(response.into_inner()),
                Err(status) if deadline.is_some() && error::is_local_timeout(&status) => {
                    return Err(Error::local_deadline());
                }
                Err(status) => Error::from(status),
            };
            if !ask.retry || !retry::is_retryable(&error) {
                return Err(error);
            }
            let mut pause = delays.next().unwrap_or_default();
            if let Some(deadline) = deadline {
                pause = pause.min(deadline.saturating_duration_since(Instant::now()));
            }
            tokio::time::sleep(pause).await;
        }
    }

    /// Follows a session (or all sessions) across connection failures: reconnects with
    /// backoff and resumes from the last cursor, so no event is missed or repeated
    /// while the server holds the cursor (otherwise the stream carries
    /// [`Event::Reset`] and a fresh snapshot, as a plain subscription would).
    pub fn follow(&self, request: SubscribeRequest) -> Following {
        follow::start(self.clone(), request)
    }

    /// Follows one session: pending asks are replayed, then [`Event::Synced`], then
    /// live events.
    pub async fn subscribe_session(&mut self, session_id: &str) -> Result<Events, Error> {
        self.subscribe(SubscribeRequest {
            session_id: session_id.to_owned(),
            ..Default::default()
        })
        .await
    }

    /// Follows every session of the caller's tenant.
    pub async fn subscribe_all(&mut self) -> Result<Events, Error> {
        self.subscribe(SubscribeRequest {
            all_sessions: true,
            ..Default::default()
        })
        .await
    }

    /// Subscribes with every option of the wire request (`after` to resume,
    /// `exclusive`).
    pub async fn subscribe(&mut self, request: SubscribeRequest) -> Result<Events, Error> {
        let stream = self.inner.subscribe(request).await?.into_inner();
        Ok(Events::new(stream))
    }

    /// Subscribes and returns the wire messages as they arrive, for callers that
    /// forward them (proxies, JSON printers).
    pub async fn subscribe_raw(
        &mut self,
        request: SubscribeRequest,
    ) -> Result<tonic::Streaming<proto::SubscribeResponse>, Error> {
        Ok(self.inner.subscribe(request).await?.into_inner())
    }

    /// Answers a pending ask with a complete batch: one entry per question, built with
    /// [`answer`]. A lost race gets [`Reason::NotPending`].
    pub async fn answer(
        &mut self,
        session_id: &str,
        rpc_id: &str,
        answers: Vec<QuestionAnswer>,
    ) -> Result<(), Error> {
        self.inner
            .answer(AnswerRequest {
                session_id: session_id.to_owned(),
                rpc_id: rpc_id.to_owned(),
                answers,
            })
            .await?;
        Ok(())
    }

    /// Closes a pending ask without an answer; `reason` (may be empty) reaches the
    /// agent in its [`Reason::AskCancelled`] error.
    pub async fn cancel(
        &mut self,
        session_id: &str,
        rpc_id: &str,
        reason: &str,
    ) -> Result<(), Error> {
        self.inner
            .cancel(CancelRequest {
                session_id: session_id.to_owned(),
                rpc_id: rpc_id.to_owned(),
                reason: reason.to_owned(),
            })
            .await?;
        Ok(())
    }

    /// Attaches an agent runtime: the agent is live (may ask, as
    /// [`Ask::agent`] with the lease's incarnation) while the returned lease is held.
    /// `parent_agent_id` names the agent that owns this one, if any: while the parent
    /// is attached, this agent may not ask (DELEGATED_CALLER).
    pub async fn attach(
        &mut self,
        agent_id: &str,
        parent_agent_id: &str,
    ) -> Result<AgentLease, Error> {
        let stream = self
            .agents
            .attach(proto::AttachRequest {
                agent_id: agent_id.to_owned(),
                parent_agent_id: parent_agent_id.to_owned(),
            })
            .await?
            .into_inner();
        AgentLease::start(stream).await
    }

    /// The pending asks of a session, oldest first.
    pub async fn list_pending(&mut self, session_id: &str) -> Result<Vec<Requested>, Error> {
        let response = self
            .inner
            .list_pending(ListPendingRequest {
                session_id: session_id.to_owned(),
            })
            .await?;
        Ok(response.into_inner().pending)
    }
}
