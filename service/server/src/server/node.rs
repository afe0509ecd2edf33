//! One node, assembled: its use cases, deliveries and background tasks
//! ([`Node::build`]), its services and HTTP layers ([`Node::serve`]), and its drain
//! ([`Node::drain`]).

use std::{future::Future, net::SocketAddr, sync::Arc, time::Duration};

use anyhow::Context as _;
use askgate_proto::v1::{
    agents_server::AgentsServer, audit_server::AuditServer, grants_server::GrantsServer,
    people_server::PeopleServer, policies_server::PoliciesServer, receipts_server::ReceiptsServer,
    user_questions_server::UserQuestionsServer,
};
use tokio::{net::TcpListener, sync::watch};
use tonic::{service::interceptor::InterceptedService, transport::Server};
use tonic_health::{ServingStatus, server::HealthReporter};
use tracing::{info, warn};

use super::{
    config::{AuthConfig, MetricsAuth, ServerConfig},
    tasks::{TaskGuard, follow_backend_health, reload_on_sighup, set_health},
};
use crate::{
    a2a::{A2aApi, A2aServiceServer, AgentCardPage},
    api::{
        AgentsApi, AuditApi, GrantsApi, PeopleApi, PoliciesApi, ReceiptsApi, UserQuestionsApi,
        deadline, health,
    },
    approvals::{Audit, Receipts},
    auth::{
        Gate,
        oidc::{SignIn, SignInRoutes},
    },
    backend::Backend,
    channels::{
        Channels,
        api::{AdminGate, Mount},
        delivery::{HookTasks, Hooks},
    },
    dispatch::Dispatch,
    domain::status,
    listener::{ConnectionLimits, ConnectionMetrics, InFlightLayer},
    mcp::{
        Asker,
        http::{McpBudget, McpLayer},
    },
    metrics::{Metrics, ScrapeToken},
    origin::OriginPolicy,
    policy::book::PolicyBook,
    questions::Questions,
    web::{AnswersLayer, Console, Jwks},
};

/// The parts of a running node that its services share and its drain stops.
pub(super) struct Node {
    metrics: Metrics,
    backend: Arc<dyn Backend>,
    hooks: Hooks,
    hook_tasks: HookTasks,
    questions: Questions,
    /// The receipts' signing keys, if the node signs receipts.
    receipts: Option<Arc<Receipts>>,
    audit: Audit,
    /// Each tenant's policies, compiled: judged by asks, changed by `Policies`.
    policies: Arc<PolicyBook>,
    _prune_task: TaskGuard,
    gate: Gate,
    /// The console's sign-in with the identity provider (`--oidc-issuer`).
    sign_in: Option<Arc<SignIn>>,
    health: HealthReporter,
    health_task: TaskGuard,
    draining: watch::Sender<bool>,
    _reload_task: Option<TaskGuard>,
}

/// The console's sign-in with the identity provider: discovered, its keys fetched, its
/// sessions sealed with the node's key (the same on every node that shares a store).
async fn start_sign_in(
    config: &ServerConfig,
    oidc: &crate::auth::oidc::OidcConfig,
    sealing: Option<Arc<crate::channels::sealed::SealingKey>>,
) -> anyhow::Result<Arc<SignIn>> {
    anyhow::ensure!(
        !matches!(config.auth, AuthConfig::None { .. }),
        "--oidc-issuer signs people in to a server that knows its callers: give --auth keys \
         or --auth jwt (with --auth none every caller is anonymous)"
    );
    let key = sealing.context(
        "--oidc-issuer on Redis needs --secret-key-file: console sessions are sealed with it, \
         and every node must open them",
    )?;
    SignIn::start(
        oidc.clone(),
        key,
        config.http.public_origin(),
        config.tls.is_some(),
    )
    .await
}

/// Refuses to serve anonymous callers off loopback unless told to.
pub(super) fn refuse_anonymous_off_loopback(
    auth: &AuthConfig,
    local_addr: SocketAddr,
) -> anyhow::Result<()> {
    let AuthConfig::None { allow_anonymous } = *auth else {
        return Ok(());
    };
    if local_addr.ip().is_loopback() {
        return Ok(());
    }
    anyhow::ensure!(
        allow_anonymous,
        "refusing to serve without authentication on {local_addr}: use --auth keys or \
         --auth jwt, or --allow-anonymous to accept anonymous callers from the network"
    );
    warn!(%local_addr, "serving WITHOUT authentication on a non-loopback address (--allow-anonymous)");
    Ok(())
}

impl Node {
    /// The engine, the webhook runtime, the use cases and the background tasks; health
    /// reports SERVING once they are up.
    pub(super) async fn build(config: &ServerConfig) -> anyhow::Result<Self> {
        let auth = Arc::new(config.auth.authenticator().await?);
        let metrics = Metrics::new(config.metrics.tenant_labels);
        let (backend, hook_store, audit_store, sealing) = config.backend().await?;
        let audit = Audit::new(audit_store);
        if config.webhooks.allow_private {
            warn!(
                "webhook endpoints may be on loopback and private addresses (--webhook-allow-private)"
            );
        }
        let (hooks, hook_tasks) = Hooks::start(
            hook_store,
            backend.clone(),
            config.webhooks.clone(),
            config.limits.clone(),
            Arc::new(crate::telemetry::ChannelObserver::new(metrics.clone())),
            config.channels(sealing.clone())?,
            audit.clone(),
        );
        // The audit log's upkeep: records past retention dropped, and admin changes'
        // records a node left unappended taken in.
        let prune_task = TaskGuard(tokio::spawn({
            let prune = audit
                .clone()
                .prune_every_hour(config.approvals.audit_retention);
            let drain = audit.clone().drain_every(hooks.store().clone());
            async move {
                tokio::join!(prune, drain);
            }
        }));
        let policies = Arc::new(PolicyBook::new(hooks.store().clone()));
        let mut questions = Questions::new(
            backend.clone(),
            config.limits.clone(),
            metrics.clone(),
            config.asks.rate,
        )
        .with_hooks(hooks.store().clone())
        .with_default_notify(config.asks.default_notify)
        .with_max_streams_per_tenant(config.settings.max_streams_per_tenant)
        .with_audit(audit.clone())
        .with_sealing(sealing.clone())
        .with_policies(policies.clone());
        let receipts = match config.approvals.receipt_key_files.is_empty() {
            true => None,
            false => Some(Arc::new(Receipts::from_files(
                &config.approvals.receipt_key_files,
                config.approvals.receipt_ttl,
            )?)),
        };
        if let Some(receipts) = &receipts {
            info!(kid = receipts.kid(), "signing receipts");
            questions = questions.with_receipts(receipts.clone());
        }
        let sign_in = match &config.http.oidc {
            Some(oidc) => Some(start_sign_in(config, oidc, sealing).await?),
            None => None,
        };
        let mut gate = Gate::new(auth.clone(), metrics.clone());
        if let Some(sign_in) = &sign_in {
            gate = gate.with_sessions(sign_in.sessions());
        }
        let (draining, watching) = watch::channel(false);
        let health = HealthReporter::new();
        let health_task = TaskGuard(tokio::spawn(follow_backend_health(
            backend.clone(),
            health.clone(),
            watching,
        )));
        set_health(&health, ServingStatus::Serving).await;
        Ok(Self {
            _reload_task: reload_on_sighup(auth),
            metrics,
            backend,
            hooks,
            hook_tasks,
            questions,
            receipts,
            audit,
            policies,
            _prune_task: prune_task,
            gate,
            sign_in,
            health,
            health_task,
            draining,
        })
    }

    /// Prometheus metrics on `listener`, scraped with the token of `auth` (if any).
    pub(super) fn serve_metrics(
        &self,
        listener: Option<TcpListener>,
        auth: &MetricsAuth,
    ) -> anyhow::Result<Option<TaskGuard>> {
        let Some(listener) = listener else {
            return Ok(None);
        };
        let addr = listener
            .local_addr()
            .context("failed to read the metrics address")?;
        let token = scrape_token(auth)?;
        // The CLI refuses this first (exit 64); a library caller is refused here.
        anyhow::ensure!(
            token.is_some()
                || addr.ip().is_loopback()
                || *auth == MetricsAuth::Anonymous { allow_remote: true },
            "refusing to serve metrics on {addr} without --metrics-token-file"
        );
        info!(%addr, authenticated = token.is_some(), "metrics listening");
        Ok(Some(TaskGuard(tokio::spawn(crate::metrics::serve(
            listener,
            self.metrics.clone(),
            self.backend.clone(),
            token,
        )))))
    }

    /// The gRPC services behind one dispatch: health, reflection, and askgate's
    /// services, which authenticate in an interceptor, from the headers, before a
    /// request's message is decoded.
    fn services(&self, config: &ServerConfig) -> anyhow::Result<Dispatch> {
        let draining = self.draining.subscribe();
        let reflection_v1 = reflection()
            .build_v1()
            .context("failed to build the reflection service")?;
        let reflection_v1alpha = reflection()
            .build_v1alpha()
            .context("failed to build the reflection service")?;
        let gate = &self.gate;
        let authenticate = {
            let gate = gate.clone();
            move |request| gate.authenticate(request)
        };
        let limit = config.transport.max_message_bytes;
        let agents = AgentsApi::new(
            self.questions.clone(),
            gate.clone(),
            config.asks.agent_heartbeat,
            draining.clone(),
        );
        let audit = AuditApi::new(self.audit.clone(), gate.clone(), self.receipts.clone());
        let receipts = ReceiptsApi::new(
            self.audit.clone(),
            gate.clone(),
            self.receipts.clone(),
            config.settings.request_retention,
        );
        let questions =
            UserQuestionsApi::new(self.questions.clone(), gate.clone(), config.asks.max_wait);
        let people = PeopleApi::new(gate.clone(), self.hooks.clone());
        let policies = PoliciesApi::new(
            gate.clone(),
            self.hooks.store().clone(),
            self.policies.clone(),
            self.audit.clone(),
        );
        let grants = GrantsApi::new(
            gate.clone(),
            self.hooks.store().clone(),
            self.audit.clone(),
            self.policies.clone(),
        );
        let mut dispatch = Dispatch::default();
        if config.a2a {
            let a2a = A2aApi::new(self.questions.clone(), gate.clone(), config.asks.max_wait);
            dispatch = dispatch.serve(InterceptedService::new(
                A2aServiceServer::new(a2a).max_decoding_message_size(limit),
                authenticate.clone(),
            ));
        }
        let dispatch = dispatch
            .serve(health::service(self.health.clone(), draining))
            .serve(reflection_v1)
            .serve(reflection_v1alpha)
            .serve(InterceptedService::new(
                UserQuestionsServer::new(questions).max_decoding_message_size(limit),
                authenticate.clone(),
            ))
            .serve(InterceptedService::new(
                AgentsServer::new(agents).max_decoding_message_size(limit),
                authenticate.clone(),
            ))
            .serve(InterceptedService::new(
                AuditServer::new(audit).max_decoding_message_size(limit),
                authenticate.clone(),
            ))
            .serve(InterceptedService::new(
                ReceiptsServer::new(receipts).max_decoding_message_size(limit),
                authenticate.clone(),
            ))
            .serve(InterceptedService::new(
                PeopleServer::new(people).max_decoding_message_size(limit),
                authenticate.clone(),
            ))
            .serve(InterceptedService::new(
                PoliciesServer::new(policies).max_decoding_message_size(limit),
                authenticate.clone(),
            ))
            .serve(InterceptedService::new(
                GrantsServer::new(grants).max_decoding_message_size(limit),
                authenticate.clone(),
            ));
        // Every channel's admin service (Webhooks, Slack, Telegram, Email, Ntfy, ...).
        let gate: Arc<dyn AdminGate> = Arc::new(gate.clone());
        let on = Authenticated {
            dispatch,
            authenticate,
        };
        Ok(Channels::mount(on, &self.hooks, &gate, limit).dispatch)
    }

    /// MCP over streamable HTTP at `/mcp`, unless turned off.
    fn mcp(&self, config: &ServerConfig) -> Option<McpLayer> {
        config.mcp.enabled.then(|| {
            McpLayer::new(
                Asker::Local {
                    questions: self.questions.clone(),
                    max_wait: config.asks.max_wait,
                },
                config.mcp.tool.clone(),
                self.gate.clone(),
                config.transport.max_message_bytes,
                self.backend.clone(),
                McpBudget {
                    per_tenant: config.settings.max_mcp_sessions_per_tenant,
                    per_node: config.mcp.max_sessions,
                },
                &self.metrics,
            )
        })
    }

    /// Serves every entry of the node on `listener` until `stop` completes: gRPC (and
    /// gRPC-Web), the console, MCP and Slack's interactivity, behind the origin policy.
    pub(super) fn serve<S: Future<Output = ()>>(
        &self,
        listener: TcpListener,
        local_addr: SocketAddr,
        config: &ServerConfig,
        stop: S,
    ) -> anyhow::Result<impl Future<Output = Result<(), tonic::transport::Error>> + use<S>> {
        let incoming = crate::listener::incoming(
            listener,
            ConnectionLimits {
                tcp_keepalive: config.transport.keepalive_interval,
                ..config.transport.connections
            },
            ConnectionMetrics {
                open: self.metrics.connections().clone(),
                refused: self.metrics.refused_connections().clone(),
            },
        );
        let origin_policy = OriginPolicy::new(
            local_addr.ip().is_loopback(),
            config.http.public_url.clone(),
            config.http.cors.clone(),
        );
        // The channels' inbound endpoints (Slack's clicks and forms, Telegram's updates,
        // the pages of signed links, ...) answer through the questions use case.
        let questions: askgate_channels::resolve::Questions = Arc::new(self.questions.clone());
        let ingresses = self.hooks.channels().ingresses(&self.hooks, &questions);
        Ok(transport(config)?
            // A request in flight keeps its connection from being idle.
            .layer(InFlightLayer)
            // Every HTTP entry: who may name this node as Host, which pages may call it.
            // First, so that nothing reads a refused request's body.
            .layer(AnswersLayer(origin_policy))
            // Browsers: CORS answers preflights for other origins' pages (none by
            // default), the console's files are served beside the API, and gRPC-Web is
            // translated.
            .layer(tower::util::option_layer(config.http.cors.layer()))
            // The console's sign-in with the identity provider, before its files.
            .layer(tower::util::option_layer(self.sign_in.clone().map(
                |sign_in| crate::ingress::IngressLayer::new(vec![Arc::new(SignInRoutes(sign_in))]),
            )))
            .layer(tower::util::option_layer(
                config.http.console.then_some(AnswersLayer(Console)),
            ))
            // MCP over streamable HTTP at /mcp, beside the console.
            .layer(tower::util::option_layer(self.mcp(config)))
            // The A2A agent card (with --a2a on; a 404 that says so otherwise).
            .layer(AnswersLayer(AgentCardPage::new(
                config.a2a,
                config.http.public_origin(),
                config.tls.is_some(),
                !matches!(config.auth, AuthConfig::None { .. }),
            )))
            // The receipts' public keys.
            .layer(AnswersLayer(Jwks::new(
                self.receipts.as_ref().map(|r| r.published().to_owned()),
            )))
            // The channels' inbound endpoints, each verifying what it reads.
            .layer(crate::ingress::IngressLayer::new(ingresses))
            // gRPC-Web calls are the console's channel: marked before translation (with
            // the sign-in, a console session is instead).
            .layer(tower::util::option_layer(self.sign_in.is_none().then(
                || tower::util::MapRequestLayer::new(crate::api::mark_browser),
            )))
            .layer(tonic_web::GrpcWebLayer::new())
            .layer(tower::util::MapRequestLayer::new(deadline::stamp_arrival))
            .layer(tower::util::MapResponseLayer::new(
                status::map_oversize_request,
            ))
            .serve_with_incoming_shutdown(self.services(config)?, incoming, stop))
    }

    /// The drain: health stops following the backend and reports NOT_SERVING (and only
    /// then do health watches learn of the drain, delivering that status before they
    /// end); new asks are refused, pending ones resolve DISPOSED, and the drain's
    /// events reach the webhook store before the node goes (on Redis another node
    /// delivers them).
    pub(super) async fn drain(self, timeout: Duration) {
        drop(self.health_task);
        set_health(&self.health, ServingStatus::NotServing).await;
        let _ = self.draining.send(true);
        self.questions.shut_down().await;
        self.hooks.flush(timeout).await;
        drop(self.hook_tasks);
    }
}

/// The HTTP server's transport: TLS, HTTP/1.1 beside HTTP/2 (gRPC-Web), keepalive and
/// the HTTP/2 limits.
fn transport(config: &ServerConfig) -> anyhow::Result<Server> {
    let mut server = Server::builder();
    if let Some(tls) = &config.tls {
        server = server
            .tls_config(tls.server_config()?)
            .context("invalid TLS configuration")?;
    }
    Ok(server
        .accept_http1(true)
        .http2_keepalive_interval(Some(config.transport.keepalive_interval))
        .http2_keepalive_timeout(Some(config.transport.keepalive_timeout))
        .max_concurrent_streams(Some(config.transport.http2.max_concurrent_streams))
        .initial_stream_window_size(Some(config.transport.http2.stream_window))
        .initial_connection_window_size(Some(config.transport.http2.connection_window)))
}

/// The token scrapers must send, read from the file `--metrics-token-file` names.
fn scrape_token(auth: &MetricsAuth) -> anyhow::Result<Option<ScrapeToken>> {
    let MetricsAuth::Bearer(path) = auth else {
        return Ok(None);
    };
    let (token, warning) =
        crate::auth::secret::read_file(path).context("failed to read --metrics-token-file")?;
    if let Some(warning) = warning {
        warn!("{warning}");
    }
    anyhow::ensure!(!token.is_empty(), "{} is empty", path.display());
    Ok(Some(ScrapeToken::new(&token)))
}

fn reflection() -> tonic_reflection::server::Builder<'static> {
    tonic_reflection::server::Builder::configure()
        .register_encoded_file_descriptor_set(askgate_proto::FILE_DESCRIPTOR_SET)
        .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
}

/// The node's gRPC services, each authenticated before its message is read: where the
/// channels mount their admin services.
struct Authenticated<F> {
    dispatch: Dispatch,
    authenticate: F,
}

impl<F> Mount for Authenticated<F>
where
    F: tonic::service::Interceptor + Clone + Send + Sync + 'static,
{
    fn mount<S>(self, service: S) -> Self
    where
        S: tonic::codegen::Service<
                http::Request<tonic::body::Body>,
                Response = http::Response<tonic::body::Body>,
                Error = std::convert::Infallible,
            > + tonic::server::NamedService
            + Clone
            + Send
            + Sync
            + 'static,
        S::Future: Send + 'static,
    {
        let service = InterceptedService::new(service, self.authenticate.clone());
        Self {
            dispatch: self.dispatch.serve(service),
            authenticate: self.authenticate,
        }
    }
}
