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
//!             .option("Postgres (Recommended)", "Relational, already in the stack")
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
mod channels;
mod error;
mod events;
mod follow;
mod lease;
mod policies;
pub mod receipt;
mod retry;
pub mod tool;
mod trace;

pub use askgate_proto::v1 as proto;
use proto::{
    AnswerRequest, AnswerResponse, AskResponse, CancelRequest, CancelSource, CreateEndpointRequest,
    DeleteEndpointRequest, Delivery, Endpoint as WebhookEndpoint, ListDeliveriesRequest,
    ListEndpointsRequest, ListPendingRequest, QuestionAnswer, RedeliverRequest, Requested,
    SubscribeRequest, WhoAmIRequest, WhoAmIResponse, agents_client::AgentsClient,
    audit_client::AuditClient, email_client::EmailClient, grants_client::GrantsClient,
    ntfy_client::NtfyClient, people_client::PeopleClient, policies_client::PoliciesClient,
    receipts_client::ReceiptsClient, slack_client::SlackClient, telegram_client::TelegramClient,
    user_questions_client::UserQuestionsClient, webhooks_client::WebhooksClient,
};
use tokio::time::Instant;
use tonic::{
    metadata::{Ascii, MetadataValue},
    transport::{Certificate, Channel, ClientTlsConfig, Endpoint, Identity},
};

pub use ask::{
    Ask, DEFAULT_REATTACH_GRACE, DEFAULT_RETRY_BUDGET, QuestionBuilder, TTL_SLACK, question,
};
pub use error::{Error, Reason};
pub use events::{Event, Events};
pub use follow::{Connection, Following};
pub use lease::AgentLease;

/// A connection to askgate's `UserQuestions` service. Cheap to clone: clones share the
/// underlying HTTP/2 connection.
#[derive(Debug, Clone)]
pub struct Client {
    inner: UserQuestionsClient<Channel>,
    agents: AgentsClient<Channel>,
    webhooks: WebhooksClient<Channel>,
    slack: SlackClient<Channel>,
    telegram: TelegramClient<Channel>,
    email: EmailClient<Channel>,
    ntfy: NtfyClient<Channel>,
    audit: AuditClient<Channel>,
    receipts: ReceiptsClient<Channel>,
    people: PeopleClient<Channel>,
    policies: PoliciesClient<Channel>,
    grants: GrantsClient<Channel>,
    /// `Bearer <token>`, sent with every call.
    authorization: Option<MetadataValue<Ascii>>,
    /// The channel this client answers from (`askgate-channel`), if it names one.
    channel: Option<MetadataValue<Ascii>>,
}

/// How to reach a server that needs TLS or a credential. Its `Debug` output never
/// shows the token or the private key.
#[derive(Clone, Default)]
pub struct ConnectOptions {
    /// Bearer token (API key or JWT) sent with every call.
    pub token: Option<String>,
    /// CA certificate (PEM) to trust for the server; TLS is used for `https://`
    /// endpoints or when this is set (the public web PKI otherwise).
    pub ca_pem: Option<Vec<u8>>,
    /// Client certificate and key (PEM), for servers that require mTLS.
    pub identity: Option<(Vec<u8>, Vec<u8>)>,
}

impl std::fmt::Debug for ConnectOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let redacted = |set: bool| if set { "<redacted>" } else { "None" };
        f.debug_struct("ConnectOptions")
            .field("token", &format_args!("{}", redacted(self.token.is_some())))
            .field("ca_pem", &self.ca_pem.as_ref().map(Vec::len))
            .field(
                "identity",
                &format_args!("{}", redacted(self.identity.is_some())),
            )
            .finish()
    }
}

impl ConnectOptions {
    /// The endpoint for `endpoint` (a URL) with these TLS settings, for a channel of
    /// one's own (e.g. to the node's health service); the token is not applied.
    pub fn endpoint(&self, endpoint: String) -> Result<Endpoint, Error> {
        let tls = endpoint.starts_with("https://") || self.ca_pem.is_some();
        let mut endpoint = Endpoint::from_shared(endpoint).map_err(Error::transport)?;
        if tls {
            let mut config = ClientTlsConfig::new();
            config = match &self.ca_pem {
                Some(ca) => config.ca_certificate(Certificate::from_pem(ca)),
                None => config.with_webpki_roots(),
            };
            if let Some((cert, key)) = &self.identity {
                config = config.identity(Identity::from_pem(cert, key));
            }
            endpoint = endpoint.tls_config(config).map_err(Error::transport)?;
        }
        Ok(endpoint)
    }

    fn authorization(&self) -> Result<Option<MetadataValue<Ascii>>, Error> {
        self.token
            .as_deref()
            .map(|token| {
                let mut value: MetadataValue<Ascii> =
                    format!("Bearer {token}").parse().map_err(|_| {
                        Error::from(tonic::Status::invalid_argument("the token is not ASCII"))
                    })?;
                // Shown as "Sensitive" by Debug (a derived Debug of Client included).
                value.set_sensitive(true);
                Ok(value)
            })
            .transpose()
    }
}

impl Client {
    /// Connects to `endpoint`, e.g. `http://127.0.0.1:50051`.
    pub async fn connect(endpoint: impl Into<String>) -> Result<Self, Error> {
        Self::connect_with(endpoint, ConnectOptions::default()).await
    }

    /// Connects with TLS and/or a credential.
    pub async fn connect_with(
        endpoint: impl Into<String>,
        options: ConnectOptions,
    ) -> Result<Self, Error> {
        let endpoint = endpoint.into();
        let channel = options
            .endpoint(endpoint.clone())?
            .connect()
            .await
            .map_err(|e| Error::transport(e).at(&endpoint))?;
        Ok(Self::new(channel).authorized(options.authorization()?))
    }

    /// A client for `endpoint` that connects on first use (and reconnects after a
    /// failure), so it can be made before the server is up.
    pub fn connect_lazy(endpoint: impl Into<String>) -> Result<Self, Error> {
        Self::connect_lazy_with(endpoint, ConnectOptions::default())
    }

    /// [`Client::connect_lazy`] with TLS and/or a credential.
    pub fn connect_lazy_with(
        endpoint: impl Into<String>,
        options: ConnectOptions,
    ) -> Result<Self, Error> {
        let channel = options.endpoint(endpoint.into())?.connect_lazy();
        Ok(Self::new(channel).authorized(options.authorization()?))
    }

    /// Wraps an existing channel (TLS, interceptors and timeouts are the caller's).
    pub fn new(channel: Channel) -> Self {
        Self {
            inner: UserQuestionsClient::new(channel.clone()),
            agents: AgentsClient::new(channel.clone()),
            webhooks: WebhooksClient::new(channel.clone()),
            slack: SlackClient::new(channel.clone()),
            telegram: TelegramClient::new(channel.clone()),
            email: EmailClient::new(channel.clone()),
            ntfy: NtfyClient::new(channel.clone()),
            audit: AuditClient::new(channel.clone()),
            receipts: ReceiptsClient::new(channel.clone()),
            people: PeopleClient::new(channel.clone()),
            policies: PoliciesClient::new(channel.clone()),
            grants: GrantsClient::new(channel),
            authorization: None,
            channel: None,
        }
    }

    /// The same connection, naming the channel it answers from (`tui`, `cli`, the
    /// application's own name: 1-32 characters of `[a-z0-9._-]`) in the
    /// `askgate-channel` header. The server records it with what the client resolves
    /// and matches it against an ask's `allowed_channels`; it refuses the server's own
    /// names (`console`, `slack`, `mcp`, ...).
    pub fn with_channel(mut self, channel: &str) -> Result<Self, Error> {
        let value = channel.parse().map_err(|_| {
            Error::from(tonic::Status::invalid_argument("the channel is not ASCII"))
        })?;
        self.channel = Some(value);
        Ok(self)
    }

    /// The same connection with another bearer token (API key or JWT).
    pub fn with_token(self, token: &str) -> Result<Self, Error> {
        let options = ConnectOptions {
            token: Some(token.to_owned()),
            ..Default::default()
        };
        Ok(self.authorized(options.authorization()?))
    }

    fn authorized(mut self, authorization: Option<MetadataValue<Ascii>>) -> Self {
        self.authorization = authorization;
        self
    }

    /// A request carrying this client's credential.
    fn request<T>(&self, message: T) -> tonic::Request<T> {
        let mut request = tonic::Request::new(message);
        if let Some(authorization) = &self.authorization {
            request
                .metadata_mut()
                .insert("authorization", authorization.clone());
        }
        if let Some(channel) = &self.channel {
            request
                .metadata_mut()
                .insert("askgate-channel", channel.clone());
        }
        request
    }

    /// Asks a batch of questions and waits until a human resolves it, the ask's
    /// timeout passes ([`Reason::AskExpired`]) or the server gives up.
    ///
    /// A call that fails with UNAVAILABLE (the node drains, the server is unreachable)
    /// or a broken connection is retried with backoff and the same request_id, within
    /// the timeout and the retry budget ([`Ask::retry_for`]): the retry joins the
    /// pending ask, or gets the human's answer if it came meanwhile (see [`Ask`]).
    ///
    /// A node of the in-memory backend keeps its asks in its process: when it
    /// restarts they are gone. A retry that reaches the new process within the budget
    /// asks again (a new rpc_id; the human sees the question again); otherwise the
    /// call fails with the last error.
    ///
    /// The timeout travels as the gRPC deadline, which the server honours itself
    /// (subscribers see the ask resolved `EXPIRED`). This side's clock starts first, so
    /// the local deadline usually fires a moment before the server's answer arrives;
    /// it is reported as [`Reason::AskExpired`] all the same.
    pub async fn ask(&mut self, ask: Ask) -> Result<AskResponse, Error> {
        let deadline = ask.wait().map(|t| Instant::now() + t);
        let mut delays = retry::backoff();
        let mut failing = retry::Streak::new(ask.retry_budget);
        loop {
            let attempt = Instant::now();
            let mut request = self.request(ask.request.clone());
            trace::carry(&ask.trace, request.metadata_mut());
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
            if !ask.retry || !error.retryable() || failing.exhausted(attempt, &error) {
                return Err(error.with_session_hint(&ask.request.session_id));
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
        let stream = self
            .inner
            .subscribe(self.request(request))
            .await?
            .into_inner();
        Ok(Events::new(stream))
    }

    /// Subscribes and returns the wire messages as they arrive, for callers that
    /// forward them (proxies, JSON printers).
    pub async fn subscribe_raw(
        &mut self,
        request: SubscribeRequest,
    ) -> Result<tonic::Streaming<proto::SubscribeResponse>, Error> {
        Ok(self
            .inner
            .subscribe(self.request(request))
            .await?
            .into_inner())
    }

    /// Answers a pending ask with a complete batch: one entry per question, built with
    /// [`answer`]. A lost race gets [`Reason::NotPending`].
    pub async fn answer(
        &mut self,
        session_id: &str,
        rpc_id: &str,
        answers: Vec<QuestionAnswer>,
    ) -> Result<(), Error> {
        self.answer_counted(session_id, rpc_id, answers).await?;
        Ok(())
    }

    /// [`Client::answer`], telling what the answer did: on a quorum ask that needs
    /// more approvers it is a vote, and the response counts the `votes` so far of the
    /// `needed` (both 0 when the answer resolved the ask).
    pub async fn answer_counted(
        &mut self,
        session_id: &str,
        rpc_id: &str,
        answers: Vec<QuestionAnswer>,
    ) -> Result<AnswerResponse, Error> {
        let request = self.request(AnswerRequest {
            session_id: session_id.to_owned(),
            rpc_id: rpc_id.to_owned(),
            answers,
            grant: None,
        });
        Ok(self.inner.answer(request).await?.into_inner())
    }

    /// Closes a pending ask without an answer; `reason` (may be empty) reaches the
    /// agent in its [`Reason::AskCancelled`] error.
    pub async fn cancel(
        &mut self,
        session_id: &str,
        rpc_id: &str,
        reason: &str,
    ) -> Result<(), Error> {
        self.cancel_from(session_id, rpc_id, reason, CancelSource::Unspecified)
            .await
    }

    /// [`Client::cancel`] by `source`: [`CancelSource::UiClosed`] when an answering UI
    /// closes with the batch still pending (nobody decided), so that the agent can tell
    /// it from a person's cancel (`cancel_source` in the error's metadata).
    pub async fn cancel_from(
        &mut self,
        session_id: &str,
        rpc_id: &str,
        reason: &str,
        source: CancelSource,
    ) -> Result<(), Error> {
        let request = self.request(CancelRequest {
            session_id: session_id.to_owned(),
            rpc_id: rpc_id.to_owned(),
            reason: reason.to_owned(),
            source: source.into(),
        });
        self.inner.cancel(request).await?;
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
        let request = self.request(proto::AttachRequest {
            agent_id: agent_id.to_owned(),
            parent_agent_id: parent_agent_id.to_owned(),
        });
        let stream = self.agents.attach(request).await?.into_inner();
        AgentLease::start(stream).await
    }

    /// Gives up on an ask this side made with `request_id` (every [`Ask`] has one):
    /// it resolves ABORTED at once, whatever its reattach grace. A call of this
    /// client still waiting on it gets [`Reason::AskAborted`]; [`Reason::NotPending`]
    /// when no such ask is pending.
    pub async fn abort(&mut self, session_id: &str, request_id: &str) -> Result<(), Error> {
        let request = self.request(proto::AbortRequest {
            session_id: session_id.to_owned(),
            request_id: request_id.to_owned(),
        });
        self.inner.abort(request).await?;
        Ok(())
    }

    /// The pending asks of a session, oldest first.
    pub async fn list_pending(&mut self, session_id: &str) -> Result<Vec<Requested>, Error> {
        let request = self.request(ListPendingRequest {
            session_id: session_id.to_owned(),
        });
        let response = self.inner.list_pending(request).await?;
        Ok(response.into_inner().pending)
    }

    /// Who the client's credential names (tenant, subject, roles) and which sessions
    /// it may see; any role may ask.
    pub async fn who_am_i(&mut self) -> Result<WhoAmIResponse, Error> {
        let request = self.request(WhoAmIRequest {});
        Ok(self.inner.who_am_i(request).await?.into_inner())
    }

    /// Registers a webhook endpoint of the caller's tenant (admin role). The returned
    /// endpoint holds its signing secret (`whsec_…`), shown this once.
    pub async fn create_endpoint(
        &mut self,
        endpoint: CreateEndpointRequest,
    ) -> Result<WebhookEndpoint, Error> {
        let request = self.request(endpoint);
        Ok(self.webhooks.create_endpoint(request).await?.into_inner())
    }

    /// The tenant's webhook endpoints, oldest first, without their secrets.
    pub async fn list_endpoints(&mut self) -> Result<Vec<WebhookEndpoint>, Error> {
        let request = self.request(ListEndpointsRequest {});
        Ok(self
            .webhooks
            .list_endpoints(request)
            .await?
            .into_inner()
            .endpoints)
    }

    /// Removes a webhook endpoint; [`Reason::NotFound`] when the tenant has none by
    /// that id.
    pub async fn delete_endpoint(&mut self, id: &str) -> Result<(), Error> {
        let request = self.request(DeleteEndpointRequest { id: id.to_owned() });
        self.webhooks.delete_endpoint(request).await?;
        Ok(())
    }

    /// Webhook deliveries, newest first (filters and limit in `filter`).
    pub async fn list_deliveries(
        &mut self,
        filter: ListDeliveriesRequest,
    ) -> Result<Vec<Delivery>, Error> {
        let request = self.request(filter);
        Ok(self
            .webhooks
            .list_deliveries(request)
            .await?
            .into_inner()
            .deliveries)
    }

    /// Sends a webhook delivery again, with the same `webhook-id`.
    pub async fn redeliver(&mut self, id: &str) -> Result<Delivery, Error> {
        let request = self.request(RedeliverRequest { id: id.to_owned() });
        Ok(self.webhooks.redeliver(request).await?.into_inner())
    }

    /// The tenant's audit log after `after_seq`, oldest first, at most `limit` records
    /// (0: all): a stream of hash-chained records (admin role; docs/approvals.md).
    pub async fn export_audit(
        &mut self,
        after_seq: u64,
        limit: u32,
    ) -> Result<tonic::Streaming<proto::AuditRecord>, Error> {
        let request = self.request(proto::ExportAuditRequest { after_seq, limit });
        Ok(self.audit.export_audit(request).await?.into_inner())
    }

    /// The tenant's audit head: its last record, signed with the receipt key (admin
    /// role). Taken after an export's last record, it proves the export's end.
    pub async fn audit_head(&mut self) -> Result<proto::AuditHead, Error> {
        let request = self.request(proto::GetAuditHeadRequest {});
        Ok(self.audit.get_audit_head(request).await?.into_inner())
    }

    /// Uses up a receipt (agent or admin role, the receipt's own tenant): the first
    /// call returns its decision, every later one fails `RECEIPT_CONSUMED`. An
    /// executor that consumes before it runs the action runs it once, however often
    /// the receipt is replayed. It does not check the action or the decision:
    /// [`receipt::verify_receipt`] does.
    pub async fn consume_receipt(
        &mut self,
        receipt: &str,
    ) -> Result<proto::ConsumeReceiptResponse, Error> {
        let request = self.request(proto::ConsumeReceiptRequest {
            receipt: receipt.trim().to_owned(),
        });
        Ok(self.receipts.consume_receipt(request).await?.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn debug_output_never_shows_the_token() {
        const TOKEN: &str = "agk_0123456789abcdef";
        let options = ConnectOptions {
            token: Some(TOKEN.into()),
            identity: Some((b"cert".to_vec(), b"PRIVATE KEY".to_vec())),
            ..Default::default()
        };
        let shown = format!("{options:?}");
        assert!(
            !shown.contains(TOKEN) && !shown.contains("PRIVATE"),
            "{shown}"
        );
        let client = Client::connect_lazy_with("http://127.0.0.1:1", options).expect("client");
        let shown = format!("{client:?}");
        assert!(!shown.contains(TOKEN), "{shown}");
        let shown = format!("{:?}", client.with_token(TOKEN).expect("token"));
        assert!(!shown.contains(TOKEN), "{shown}");
    }
}
