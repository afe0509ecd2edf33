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

pub use askgate_proto::v1 as proto;
use proto::{
    AnswerRequest, AskResponse, CancelRequest, ListPendingRequest, QuestionAnswer, Requested,
    SubscribeRequest, user_questions_client::UserQuestionsClient,
};
use tonic::transport::{Channel, Endpoint};

pub use ask::{Ask, QuestionBuilder, question};
pub use error::{Error, Reason};
pub use events::{Event, Events};

/// A connection to askgate's `UserQuestions` service. Cheap to clone: clones share the
/// underlying HTTP/2 connection.
#[derive(Debug, Clone)]
pub struct Client {
    inner: UserQuestionsClient<Channel>,
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

    /// Wraps an existing channel (TLS, interceptors and timeouts are the caller's).
    pub fn new(channel: Channel) -> Self {
        Self {
            inner: UserQuestionsClient::new(channel),
        }
    }

    /// Asks a batch of questions and waits until a human resolves it, the ask's
    /// timeout passes ([`Reason::AskExpired`]) or the server gives up.
    ///
    /// The timeout travels as the gRPC deadline, which the server honours itself
    /// (subscribers see the ask resolved `EXPIRED`). This side's clock starts first, so
    /// the local deadline usually fires a moment before the server's answer arrives;
    /// it is reported as [`Reason::AskExpired`] all the same.
    pub async fn ask(&mut self, ask: Ask) -> Result<AskResponse, Error> {
        let has_deadline = ask.has_timeout();
        match self.inner.ask(ask.into_request()).await {
            Ok(response) => Ok(response.into_inner()),
            Err(status) if has_deadline && error::is_local_timeout(&status) => {
                Err(Error::local_deadline())
            }
            Err(status) => Err(status.into()),
        }
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
