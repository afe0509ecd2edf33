//! Assembles the gRPC server (askgate services, health, reflection) and runs it until
//! the shutdown future completes, then drains.

use std::{future::Future, path::PathBuf, sync::Arc, time::Duration};

use anyhow::Context as _;
use askgate_proto::v1::{
    NotifyPolicy, agents_server::AgentsServer, slack_server::SlackServer,
    user_questions_server::UserQuestionsServer, webhooks_server::WebhooksServer,
};
use tokio::net::TcpListener;
use tonic::{
    service::interceptor::InterceptedService,
    transport::{Certificate, Identity, Server, ServerTlsConfig},
};
use tonic_health::ServingStatus;
use tracing::{info, warn};

use crate::{
    api::{AgentsApi, SlackApi, UserQuestionsApi, WebhooksApi, deadline, health},
    auth::{
        Authenticator, Gate,
        jwt::{JwtVerifier, KeySource},
        keys::KeyStore,
    },
    backend::{Backend, Settings, hooks::HookStore},
    dispatch::Dispatch,
    domain::{Limits, status},
    listener::{ConnectionLimits, ConnectionMetrics, InFlightLayer},
    mcp::{
        Asker, McpSettings,
        http::{McpBudget, McpLayer},
    },
    metrics::Metrics,
    origin::{OriginPolicy, PublicUrl},
    questions::{AskRate, Questions},
    slack::{Interactivity, SlackLayer},
    web::{ConsoleLayer, CorsOrigins},
    webhooks::{Hooks, WebhookConfig, slack::Slack},
};
/// Where a Redis backend's Redis is (`BackendChoice::Redis`).
pub use askgate_engines::redis_engine::RedisConfig;
use askgate_engines::{
    memory::{MemoryBackend, MemoryHookStore},
    redis_engine::{RedisBackend, redacted_url},
};

/// Aborts a background task when dropped, so it ends with `run`.
struct TaskGuard(tokio::task::JoinHandle<()>);

impl Drop for TaskGuard {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Sets the node's overall health and that of the askgate service.
async fn set_health(health: &tonic_health::server::HealthReporter, status: ServingStatus) {
    health
        .set_service_status(HEALTH_SERVICE_OVERALL, status)
        .await;
    health
        .set_service_status(
            <UserQuestionsServer<UserQuestionsApi> as tonic::server::NamedService>::NAME,
            status,
        )
        .await;
}

/// How often health re-checks the backend.
const BACKEND_CHECK_INTERVAL: Duration = Duration::from_secs(1);

/// Health follows the backend: NOT_SERVING while it is unreachable (new asks then get
/// UNAVAILABLE from the backend itself), SERVING again when it is back, until the node
/// drains.
async fn follow_backend_health(
    backend: Arc<dyn Backend>,
    health: tonic_health::server::HealthReporter,
    draining: tokio::sync::watch::Receiver<bool>,
) {
    let mut serving = true;
    loop {
        tokio::time::sleep(BACKEND_CHECK_INTERVAL).await;
        if *draining.borrow() {
            return;
        }
        let healthy = backend.healthy().await;
        if healthy == serving || *draining.borrow() {
            continue;
        }
        serving = healthy;
        let status = match healthy {
            true => ServingStatus::Serving,
            false => ServingStatus::NotServing,
        };
        match healthy {
            true => info!("backend reachable again: SERVING"),
            false => warn!("backend unreachable: NOT_SERVING"),
        }
        set_health(&health, status).await;
    }
}

/// Re-reads credentials on SIGHUP; open connections and streams are untouched.
fn reload_on_sighup(auth: Arc<Authenticator>) -> Option<TaskGuard> {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let mut hangups = match signal(SignalKind::hangup()) {
            Ok(hangups) => hangups,
            Err(e) => {
                warn!("cannot listen for SIGHUP, credentials will not reload: {e}");
                return None;
            }
        };
        Some(TaskGuard(tokio::spawn(async move {
            while hangups.recv().await.is_some() {
                if let Err(e) = auth.reload() {
                    tracing::error!("reload failed, keeping the previous credentials: {e:#}");
                }
            }
        })))
    }
    #[cfg(not(unix))]
    {
        let _ = auth;
        None
    }
}

/// Everything `run` needs; built from the command line by `cli`, or directly by tests.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    pub limits: Limits,
    /// The sizes, limits and windows of the state, on either engine.
    pub settings: Settings,
    /// Longest an Ask waits when its caller set no deadline or a longer one.
    pub max_wait: Duration,
    /// How long shutdown waits for calls and connections to finish.
    pub drain_timeout: Duration,
    /// HTTP/2 PING interval, so dead peers (and their Asks) are noticed.
    pub keepalive_interval: Duration,
    /// How long a PING may go unanswered before the connection is closed.
    pub keepalive_timeout: Duration,
    /// HTTP/2 stream limit and flow-control windows.
    pub http2: Http2Limits,
    /// Connections at once, and how long one may idle (`--max-connections`,
    /// `--idle-timeout`); its TCP keepalive is `keepalive_interval`.
    pub connections: ConnectionLimits,
    /// Largest request message accepted.
    pub max_message_bytes: usize,
    /// Interval of the heartbeats on an agent's Attach stream.
    pub agent_heartbeat: Duration,
    /// How callers authenticate.
    pub auth: AuthConfig,
    /// Server TLS (and mTLS); plaintext when `None`.
    pub tls: Option<TlsConfig>,
    /// Asks a tenant may start per second (sustained); bursts up to `ask_burst`.
    pub ask_rate: u32,
    pub ask_burst: u32,
    /// Label metrics by tenant (more series; off by default).
    pub metrics_tenant_labels: bool,
    /// Who may scrape the metrics listener.
    pub metrics_auth: MetricsAuth,
    /// Where state lives: this process (default) or Redis, shared by several nodes.
    pub backend: BackendChoice,
    /// Which other origins' web pages may call the API over gRPC-Web
    /// (`--allowed-origin`).
    pub cors: CorsOrigins,
    /// The URL this node is reached by from outside (`--public-url`): its host is
    /// accepted on a loopback listener, its origin from browsers.
    pub public_url: Option<PublicUrl>,
    /// Serve the browser console at `/console/`.
    pub console: bool,
    /// Serve MCP over streamable HTTP at `/mcp`.
    pub mcp: bool,
    /// Longest one MCP tool call waits before it returns "still waiting".
    pub mcp_max_wait: Option<Duration>,
    /// MCP sessions this node holds at once, over all tenants.
    pub max_mcp_sessions: usize,
    /// Webhook delivery: retries, timeouts, per-tenant caps, private addresses.
    pub webhooks: WebhookConfig,
    /// The reminder schedule of asks that set none (all zero: none).
    pub default_notify: NotifyPolicy,
    /// Slack's Web API (`--slack-api-url`).
    pub slack_api_url: String,
    /// The key that seals tenants' secrets (`--secret-key-file`). Without it: a random
    /// key per process on the memory engine, and no Slack apps on Redis.
    pub secret_key_file: Option<PathBuf>,
}

/// HTTP/2 limits of every connection (`--http2-*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Http2Limits {
    /// Streams (calls) open at once on one connection; each blocked Ask holds one.
    pub max_concurrent_streams: u32,
    /// Initial flow-control window of a stream, in bytes.
    pub stream_window: u32,
    /// Flow-control window of a connection, in bytes.
    pub connection_window: u32,
}

impl Default for Http2Limits {
    /// Room for the 100,000 blocked Asks a node is sized for on a single connection,
    /// and windows large enough that a request of `--max-message-bytes` (4 MiB) or a
    /// burst of many small ones is not held up waiting for WINDOW_UPDATEs. A window is
    /// credit, not a buffer: memory is only used by data actually in flight.
    fn default() -> Self {
        Self {
            max_concurrent_streams: 100_000,
            stream_window: 1024 * 1024,
            connection_window: 16 * 1024 * 1024,
        }
    }
}

/// `--backend`: where askgate keeps its state. `Debug` hides a Redis password.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BackendChoice {
    /// In this process (one node).
    Memory,
    /// In Redis (one server or a Cluster), shared by every node using it; with
    /// `rediss://`, the CA in `ca_file` (PEM, read at start like every file the node
    /// reads) is trusted besides the system's roots.
    Redis {
        redis: RedisConfig,
        ca_file: Option<PathBuf>,
    },
}

impl ServerConfig {
    /// Slack: its Web API, and the key that seals apps' secrets.
    fn slack(&self) -> anyhow::Result<Slack> {
        let key = match (&self.secret_key_file, &self.backend) {
            (Some(path), _) => {
                let (key, warning) = crate::auth::sealed::SealingKey::from_file(path)
                    .with_context(|| format!("--secret-key-file {}", path.display()))?;
                if let Some(warning) = warning {
                    warn!("{warning}");
                }
                Some(Arc::new(key))
            }
            // The store dies with the process: a key of its own is as good as any.
            (None, BackendChoice::Memory) => {
                Some(Arc::new(crate::auth::sealed::SealingKey::ephemeral()?))
            }
            (None, BackendChoice::Redis { .. }) => None,
        };
        Slack::new(&self.slack_api_url, self.webhooks.timeout, key)
            .map_err(|e| anyhow::anyhow!("--slack-api-url: {e}"))
    }

    /// The engine, and the webhook store beside it (in the same Redis, shared by every
    /// node, or in this process).
    async fn backend(&self) -> anyhow::Result<(Arc<dyn Backend>, Arc<dyn HookStore>)> {
        let limits = self.webhooks.limits;
        Ok(match &self.backend {
            BackendChoice::Memory => (
                Arc::new(MemoryBackend::new(self.settings.clone())),
                Arc::new(MemoryHookStore::new(limits)),
            ),
            BackendChoice::Redis { redis, ca_file } => {
                let mut redis = redis.clone();
                if let Some(path) = ca_file {
                    redis.ca_pem = Some(std::fs::read(path).with_context(|| {
                        format!("failed to read --redis-ca-file {}", path.display())
                    })?);
                }
                let backend = RedisBackend::connect(redis.clone(), self.settings.clone())
                    .await
                    .with_context(|| {
                        format!("failed to connect to redis at {}", redacted_url(&redis.url))
                    })?;
                let hooks = backend.hook_store(limits);
                (Arc::new(backend), Arc::new(hooks))
            }
        })
    }
}

/// Who may scrape the metrics (`--metrics-token-file`, `--metrics-allow-anonymous`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MetricsAuth {
    /// Anyone who reaches the listener: only on loopback unless `allow_remote`.
    Anonymous { allow_remote: bool },
    /// Scrapers send `authorization: Bearer <the token in this file>`.
    Bearer(PathBuf),
}

/// How callers authenticate (`--auth`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AuthConfig {
    /// Every caller is anonymous, in the default tenant, with every role. Only for
    /// loopback listeners unless `allow_anonymous`.
    None { allow_anonymous: bool },
    /// API keys from a keys file (reloaded on SIGHUP).
    Keys(PathBuf),
    /// JWT bearer tokens.
    Jwt {
        key: KeySource,
        issuer: Option<String>,
        audience: Option<String>,
    },
}

/// Server TLS files (PEM). With `client_ca`, clients must present a certificate it
/// signed (mTLS).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsConfig {
    pub cert: PathBuf,
    pub key: PathBuf,
    pub client_ca: Option<PathBuf>,
}

impl AuthConfig {
    fn authenticator(&self) -> anyhow::Result<Authenticator> {
        Ok(match self {
            Self::None { .. } => Authenticator::None,
            Self::Keys(path) => Authenticator::Keys(KeyStore::load(path)?),
            Self::Jwt {
                key,
                issuer,
                audience,
            } => Authenticator::Jwt(JwtVerifier::new(key, issuer.clone(), audience.clone())?),
        })
    }
}

impl TlsConfig {
    fn server_config(&self) -> anyhow::Result<ServerTlsConfig> {
        let read = |path: &PathBuf| {
            std::fs::read(path).with_context(|| format!("failed to read {}", path.display()))
        };
        if let Some(warning) = crate::auth::secret::loose_permissions(&self.key) {
            warn!("{warning}");
        }
        let mut tls = ServerTlsConfig::new()
            .identity(Identity::from_pem(read(&self.cert)?, read(&self.key)?));
        if let Some(ca) = &self.client_ca {
            tls = tls.client_ca_root(Certificate::from_pem(read(ca)?));
        }
        Ok(tls)
    }
}

impl Default for ServerConfig {
    fn default() -> Self {
        Self {
            limits: Limits::default(),
            settings: Settings::default(),
            max_wait: Duration::from_secs(3600),
            drain_timeout: Duration::from_secs(5),
            keepalive_interval: Duration::from_secs(20),
            keepalive_timeout: Duration::from_secs(10),
            http2: Http2Limits::default(),
            connections: ConnectionLimits::default(),
            max_message_bytes: 4 * 1024 * 1024,
            agent_heartbeat: Duration::from_secs(10),
            auth: AuthConfig::None {
                allow_anonymous: false,
            },
            tls: None,
            ask_rate: 1000,
            ask_burst: 2000,
            metrics_tenant_labels: false,
            metrics_auth: MetricsAuth::Anonymous {
                allow_remote: false,
            },
            backend: BackendChoice::Memory,
            cors: CorsOrigins::SameOrigin,
            public_url: None,
            console: true,
            mcp: true,
            mcp_max_wait: None,
            max_mcp_sessions: 4096,
            webhooks: WebhookConfig::default(),
            slack_api_url: crate::webhooks::slack::api::DEFAULT_API_URL.to_owned(),
            secret_key_file: None,
            default_notify: NotifyPolicy::default(),
        }
    }
}

fn reflection() -> tonic_reflection::server::Builder<'static> {
    tonic_reflection::server::Builder::configure()
        .register_encoded_file_descriptor_set(askgate_proto::FILE_DESCRIPTOR_SET)
        .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
}

/// The health service names the node reports.
const HEALTH_SERVICE_OVERALL: &str = "";

/// Serves askgate on `listener` until `shutdown` completes, then drains: health goes
/// NOT_SERVING, new asks are refused SHUTTING_DOWN, pending asks resolve DISPOSED, the
/// service ends every subscription itself, and calls still open after
/// `drain_timeout` are abandoned with a warning.
pub async fn run(
    listener: TcpListener,
    config: ServerConfig,
    shutdown: impl Future<Output = ()> + Send,
) -> anyhow::Result<()> {
    run_with_metrics(listener, None, config, shutdown).await
}

/// [`run`], also serving Prometheus metrics on `metrics_listener`.
pub async fn run_with_metrics(
    listener: TcpListener,
    metrics_listener: Option<TcpListener>,
    config: ServerConfig,
    shutdown: impl Future<Output = ()> + Send,
) -> anyhow::Result<()> {
    let local_addr = listener
        .local_addr()
        .context("failed to read the listen address")?;
    let auth = Arc::new(config.auth.authenticator()?);
    if let AuthConfig::None { allow_anonymous } = config.auth {
        if !local_addr.ip().is_loopback() && !allow_anonymous {
            anyhow::bail!(
                "refusing to serve without authentication on {local_addr}: use --auth keys or \
                 --auth jwt, or --allow-anonymous to accept anonymous callers from the network"
            );
        }
        if !local_addr.ip().is_loopback() {
            warn!(%local_addr, "serving WITHOUT authentication on a non-loopback address (--allow-anonymous)");
        }
    }
    let metrics = Metrics::new(config.metrics_tenant_labels);
    let (backend, hook_store) = config.backend().await?;
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
        metrics.clone(),
        config.slack()?,
    );
    let questions = Questions::new(
        backend.clone(),
        config.limits.clone(),
        metrics.clone(),
        AskRate {
            per_second: config.ask_rate,
            burst: config.ask_burst,
        },
    )
    .with_hooks(hooks.store().clone())
    .with_default_notify(config.default_notify)
    .with_max_streams_per_tenant(config.settings.max_streams_per_tenant);
    let gate = Gate::new(auth.clone(), metrics.clone());
    let mcp = config.mcp.then(|| {
        McpLayer::new(
            Asker::Local {
                questions: questions.clone(),
                max_wait: config.max_wait,
            },
            McpSettings {
                max_wait: config.mcp_max_wait,
                ..McpSettings::default()
            },
            gate.clone(),
            config.max_message_bytes,
            backend.clone(),
            McpBudget {
                per_tenant: config.settings.max_mcp_sessions_per_tenant,
                per_node: config.max_mcp_sessions,
            },
            &metrics,
        )
    });
    let _metrics_task = match metrics_listener {
        Some(listener) => {
            let addr = listener
                .local_addr()
                .context("failed to read the metrics address")?;
            let token = match &config.metrics_auth {
                MetricsAuth::Anonymous { .. } => None,
                MetricsAuth::Bearer(path) => {
                    let (token, warning) = crate::auth::secret::read_file(path)
                        .context("failed to read --metrics-token-file")?;
                    if let Some(warning) = warning {
                        warn!("{warning}");
                    }
                    anyhow::ensure!(!token.is_empty(), "{} is empty", path.display());
                    Some(crate::metrics::ScrapeToken::new(&token))
                }
            };
            // The CLI refuses this first (exit 64); a library caller is refused here.
            anyhow::ensure!(
                token.is_some()
                    || addr.ip().is_loopback()
                    || config.metrics_auth == MetricsAuth::Anonymous { allow_remote: true },
                "refusing to serve metrics on {addr} without --metrics-token-file"
            );
            info!(%addr, authenticated = token.is_some(), "metrics listening");
            Some(TaskGuard(tokio::spawn(crate::metrics::serve(
                listener,
                metrics.clone(),
                backend.clone(),
                token,
            ))))
        }
        None => None,
    };
    let _reload_task = reload_on_sighup(auth.clone());
    let (draining_tx, draining_rx) = tokio::sync::watch::channel(false);
    let health = tonic_health::server::HealthReporter::new();
    let health_task = TaskGuard(tokio::spawn(follow_backend_health(
        backend.clone(),
        health.clone(),
        draining_rx.clone(),
    )));

    let health_service = health::service(health.clone(), draining_rx.clone());
    set_health(&health, ServingStatus::Serving).await;

    let reflection_v1 = reflection()
        .build_v1()
        .context("failed to build the reflection service")?;
    let reflection_v1alpha = reflection()
        .build_v1alpha()
        .context("failed to build the reflection service")?;

    // Both askgate services authenticate in an interceptor, from the headers, before
    // a request's message is decoded.
    let authenticate = {
        let gate = gate.clone();
        move |request| gate.authenticate(request)
    };
    let agents = InterceptedService::new(
        AgentsServer::new(AgentsApi::new(
            questions.clone(),
            gate.clone(),
            config.agent_heartbeat,
            draining_rx.clone(),
        ))
        .max_decoding_message_size(config.max_message_bytes),
        authenticate.clone(),
    );
    let webhooks = InterceptedService::new(
        WebhooksServer::new(WebhooksApi::new(hooks.clone(), gate.clone()))
            .max_decoding_message_size(config.max_message_bytes),
        authenticate.clone(),
    );
    let slack = InterceptedService::new(
        SlackServer::new(SlackApi::new(hooks.clone(), gate.clone()))
            .max_decoding_message_size(config.max_message_bytes),
        authenticate.clone(),
    );
    let user_questions = InterceptedService::new(
        UserQuestionsServer::new(UserQuestionsApi::new(
            questions.clone(),
            gate,
            config.max_wait,
        ))
        .max_decoding_message_size(config.max_message_bytes),
        authenticate,
    );

    let services = Dispatch::default()
        .serve(health_service)
        .serve(reflection_v1)
        .serve(reflection_v1alpha)
        .serve(user_questions)
        .serve(agents)
        .serve(webhooks)
        .serve(slack);

    let incoming = crate::listener::incoming(
        listener,
        ConnectionLimits {
            tcp_keepalive: config.keepalive_interval,
            ..config.connections
        },
        ConnectionMetrics {
            open: metrics.connections().clone(),
            refused: metrics.refused_connections().clone(),
        },
    );
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let mut builder = Server::builder();
    if let Some(tls) = &config.tls {
        builder = builder
            .tls_config(tls.server_config()?)
            .context("invalid TLS configuration")?;
    }
    let origin_policy = OriginPolicy::new(
        local_addr.ip().is_loopback(),
        config.public_url.clone(),
        config.cors.clone(),
    );
    let server = builder
        // A request in flight keeps its connection from being idle.
        .layer(InFlightLayer)
        // Every HTTP entry: who may name this node as Host, which pages may call it.
        // First, so that nothing reads a refused request's body.
        .layer(origin_policy)
        // gRPC-Web (browsers) on the same listener: HTTP/1.1 is accepted beside HTTP/2,
        // and the gRPC-Web layer translates its calls for the same services.
        .accept_http1(true)
        .http2_keepalive_interval(Some(config.keepalive_interval))
        .http2_keepalive_timeout(Some(config.keepalive_timeout))
        .max_concurrent_streams(Some(config.http2.max_concurrent_streams))
        .initial_stream_window_size(Some(config.http2.stream_window))
        .initial_connection_window_size(Some(config.http2.connection_window))
        // Browsers: CORS answers preflights for other origins' pages (none by default),
        // the console's files are served beside the API, and gRPC-Web is translated.
        .layer(tower::util::option_layer(config.cors.layer()))
        .layer(tower::util::option_layer(
            config.console.then_some(ConsoleLayer),
        ))
        // MCP over streamable HTTP at /mcp, beside the console.
        .layer(tower::util::option_layer(mcp))
        // Slack's clicks and forms, each verified against its app's signing secret.
        .layer(SlackLayer::new(Interactivity::new(
            hooks.clone(),
            questions.clone(),
        )))
        .layer(tonic_web::GrpcWebLayer::new())
        .layer(tower::util::MapRequestLayer::new(deadline::stamp_arrival))
        .layer(tower::util::MapResponseLayer::new(
            status::map_oversize_request,
        ))
        .serve_with_incoming_shutdown(services, incoming, async {
            let _ = stop_rx.await;
        });
    let mut server = std::pin::pin!(server);
    let scheme = if config.tls.is_some() {
        "https"
    } else {
        "http"
    };
    let url_or_off = |on: bool, path: &str| match on {
        true => format!("{scheme}://{local_addr}{path}"),
        false => "off".to_owned(),
    };
    info!(
        %local_addr,
        console = %url_or_off(config.console, "/console/"),
        mcp = %url_or_off(config.mcp, "/mcp"),
        "askgate listening"
    );

    tokio::select! {
        result = &mut server => return result.context("the gRPC server failed"),
        () = shutdown => {}
    }
    info!("shutting down: draining");
    // Health stops following the backend, reports NOT_SERVING, and only then do the
    // health watches learn of the drain (they deliver that status before ending).
    drop(health_task);
    set_health(&health, ServingStatus::NotServing).await;
    let _ = draining_tx.send(true);
    questions.shut_down().await;
    // The events of the drain (asks resolved DISPOSED) reach the webhook store before
    // the node goes; on Redis another node delivers them.
    hooks.flush(config.drain_timeout).await;
    drop(hook_tasks);
    let _ = stop_tx.send(());
    match tokio::time::timeout(config.drain_timeout, server).await {
        Ok(result) => result.context("the gRPC server failed while draining")?,
        Err(_) => warn!(
            timeout = ?config.drain_timeout,
            "drain timed out; closing the remaining connections"
        ),
    }
    info!("askgate stopped");
    Ok(())
}
