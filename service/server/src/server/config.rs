//! What a node is made of, as its operator chose it: [`ServerConfig`], nested by
//! owner (the engine's Redis, webhooks, limits), each default written once in the
//! `Default` of the type that owns it; the command line takes its defaults from here.

use std::{path::PathBuf, sync::Arc, time::Duration};

use anyhow::Context as _;
use askgate_engines::{
    memory::{MemoryAuditStore, MemoryBackend, MemoryHookStore},
    redis_engine::{RedisBackend, RedisConfig, redacted_url},
    sqlite::SqliteEngine,
};
use askgate_proto::v1::NotifyPolicy;
use tonic::transport::{Certificate, Identity, ServerTlsConfig};
use tracing::{info, warn};

use crate::{
    auth::{
        Authenticator,
        jwt::{JwtVerifier, KeySource},
        keys::KeyStore,
        sealed::SealingKey,
    },
    backend::{Backend, StateConfig, audit::AuditStore, hooks::HookStore},
    channels::{Channels, Setup, delivery::WebhookConfig},
    domain::Limits,
    listener::ConnectionLimits,
    mcp::McpConfig,
    origin::PublicUrl,
    questions::AskRate,
    web::CorsOrigins,
};

/// The channels' own settings (`--slack-api-url`, `--smtp-url`, ...), owned by the
/// channels' crate.
pub use crate::channels::ChannelConfig;

/// Everything `run` needs; built from the command line by `cli`, or directly by tests.
/// Each part is owned by a type of its own, whose `Default` is the part's defaults
/// (and the flags'); `ServerConfig::default()` is `askgate serve` without flags.
#[derive(Debug, Clone, PartialEq)]
pub struct ServerConfig {
    /// The size of what one request may hold.
    pub limits: Limits,
    /// The sizes, limits and windows of the state, on either engine.
    pub settings: StateConfig,
    /// How asks wait, how fast a tenant may start them, and what reminds of them.
    pub asks: AskConfig,
    /// Connections, HTTP/2, message sizes and shutdown.
    pub transport: TransportConfig,
    /// How callers authenticate.
    pub auth: AuthConfig,
    /// Server TLS (and mTLS); plaintext when `None`.
    pub tls: Option<TlsConfig>,
    /// What the metrics listener serves, and to whom.
    pub metrics: MetricsConfig,
    /// Where state lives: SQLite in a data directory (default), this process, or
    /// Redis, shared by several nodes.
    pub backend: BackendChoice,
    /// The HTTP side of the port: browsers' origins, the console, the public URL.
    pub http: HttpConfig,
    /// MCP over streamable HTTP at `/mcp`.
    pub mcp: McpServing,
    /// Serve the A2A protocol: its gRPC service and the agent card.
    pub a2a: bool,
    /// Webhook delivery: retries, timeouts, per-tenant caps, private addresses.
    pub webhooks: WebhookConfig,
    /// Where the chat and mail channels send.
    pub channels: ChannelConfig,
    /// The keys of sealed secrets and receipts, and how long proof is kept.
    pub approvals: ApprovalConfig,
}

/// How asks wait and how fast they may come.
#[derive(Debug, Clone, PartialEq)]
pub struct AskConfig {
    /// Longest an Ask waits when its caller set no deadline or a longer one.
    pub max_wait: Duration,
    /// Asks a tenant may start per second (sustained), and at once above it.
    pub rate: AskRate,
    /// The reminder schedule of asks that set none (all zero: none).
    pub default_notify: NotifyPolicy,
    /// Interval of the heartbeats on an agent's Attach stream.
    pub agent_heartbeat: Duration,
}

impl Default for AskConfig {
    fn default() -> Self {
        Self {
            max_wait: Duration::from_secs(3600),
            rate: AskRate {
                per_second: 1000,
                burst: 2000,
            },
            default_notify: NotifyPolicy::default(),
            agent_heartbeat: Duration::from_secs(10),
        }
    }
}

/// Connections, HTTP/2 and messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TransportConfig {
    /// Largest request message accepted.
    pub max_message_bytes: usize,
    /// HTTP/2 PING interval, so dead peers (and their Asks) are noticed; a
    /// connection's TCP keepalive too.
    pub keepalive_interval: Duration,
    /// How long a PING may go unanswered before the connection is closed.
    pub keepalive_timeout: Duration,
    /// HTTP/2 stream limit and flow-control windows.
    pub http2: Http2Limits,
    /// Connections at once, and how long one may idle (`--max-connections`,
    /// `--idle-timeout`); their TCP keepalive is `keepalive_interval`.
    pub connections: ConnectionLimits,
    /// How long shutdown waits for calls and connections to finish.
    pub drain_timeout: Duration,
}

impl Default for TransportConfig {
    fn default() -> Self {
        Self {
            max_message_bytes: 4 * 1024 * 1024,
            keepalive_interval: Duration::from_secs(20),
            keepalive_timeout: Duration::from_secs(10),
            http2: Http2Limits::default(),
            connections: ConnectionLimits::default(),
            drain_timeout: Duration::from_secs(5),
        }
    }
}

/// The metrics listener (`--metrics-*`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetricsConfig {
    /// Label metrics by tenant (more series; off by default).
    pub tenant_labels: bool,
    /// Who may scrape.
    pub auth: MetricsAuth,
}

impl Default for MetricsConfig {
    fn default() -> Self {
        Self {
            tenant_labels: false,
            auth: MetricsAuth::Anonymous {
                allow_remote: false,
            },
        }
    }
}

/// The HTTP side of the port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpConfig {
    /// Which other origins' web pages may call the API over gRPC-Web
    /// (`--allowed-origin`).
    pub cors: CorsOrigins,
    /// The URL this node is reached by from outside (`--public-url`): its host is
    /// accepted on a loopback listener, its origin from browsers, and the channels'
    /// links point to it.
    pub public_url: Option<PublicUrl>,
    /// Serve the browser console at `/console/`.
    pub console: bool,
    /// Sign in to the console with the company's identity provider (`--oidc-*`).
    pub oidc: Option<crate::auth::oidc::OidcConfig>,
}

impl HttpConfig {
    /// The `--public-url`'s origin (`scheme://host[:port]`), if there is one.
    pub fn public_origin(&self) -> Option<String> {
        self.public_url.as_ref().map(|u| u.origin().to_owned())
    }
}

impl Default for HttpConfig {
    fn default() -> Self {
        Self {
            cors: CorsOrigins::SameOrigin,
            public_url: None,
            console: true,
            oidc: None,
        }
    }
}

/// MCP at `/mcp`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct McpServing {
    /// Serve it.
    pub enabled: bool,
    /// MCP sessions this node holds at once, over all tenants.
    pub max_sessions: usize,
    /// How its tool asks (the longest one call waits before "still waiting", ...).
    pub tool: McpConfig,
}

impl Default for McpServing {
    fn default() -> Self {
        Self {
            enabled: true,
            max_sessions: 4096,
            tool: McpConfig::default(),
        }
    }
}

/// The keys behind what askgate proves and hides, and how long proof is kept.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApprovalConfig {
    /// The key that seals tenants' secrets (`--secret-key-file`). Without it: a random
    /// key per process on the memory engine, one kept in the data directory on sqlite,
    /// and no Slack apps on Redis.
    pub secret_key_file: Option<PathBuf>,
    /// The Ed25519 keys (PKCS#8 PEM) that sign receipts (`--receipt-key-file`): the
    /// first signs, all are published. Empty: no receipts.
    pub receipt_key_files: Vec<PathBuf>,
    /// How long a receipt stays valid (`--receipt-ttl`).
    pub receipt_ttl: Duration,
    /// How long audit records are kept (`--audit-retention`).
    pub audit_retention: Duration,
}

impl Default for ApprovalConfig {
    fn default() -> Self {
        Self {
            secret_key_file: None,
            receipt_key_files: Vec::new(),
            receipt_ttl: crate::approvals::DEFAULT_RECEIPT_TTL,
            audit_retention: crate::approvals::audit::DEFAULT_RETENTION,
        }
    }
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
    /// In this process, written through to a SQLite store in `data_dir` (one node):
    /// what it acknowledged survives a crash.
    Sqlite { data_dir: PathBuf },
    /// In this process (one node), gone at a restart.
    Memory,
    /// In Redis (one server or a Cluster), shared by every node using it; with
    /// `rediss://`, the CA in `ca_file` (PEM, read at start like every file the node
    /// reads) is trusted besides the system's roots.
    Redis {
        redis: RedisConfig,
        ca_file: Option<PathBuf>,
    },
}

/// The data directory of `--backend sqlite` unless `--data-dir` names another.
pub const DEFAULT_DATA_DIR: &str = "askgate-data";

impl Default for BackendChoice {
    /// The durable default: SQLite in `askgate-data` under the working directory.
    fn default() -> Self {
        Self::Sqlite {
            data_dir: PathBuf::from(DEFAULT_DATA_DIR),
        }
    }
}

/// A node's stores: the engine, the webhook store and the audit log, side by side,
/// and the key that seals what they keep of tenants' secrets.
pub(super) type Stores = (
    Arc<dyn Backend>,
    Arc<dyn HookStore>,
    Arc<dyn AuditStore>,
    Option<Arc<SealingKey>>,
);

/// With `--backend sqlite` and no `--secret-key-file`: the key that seals Slack apps'
/// secrets and secret answers, in the data directory.
pub const KEY_FILE: &str = "secret.key";

impl ServerConfig {
    /// The key that seals tenants' secrets (Slack apps') and secret answers: the
    /// `--secret-key-file`, else one of the node's own where its store does not
    /// outlive it or lives beside it; none on Redis without the flag (every node must
    /// open what another sealed).
    fn sealing_key(&self) -> anyhow::Result<Option<Arc<SealingKey>>> {
        Ok(match (&self.approvals.secret_key_file, &self.backend) {
            (Some(path), _) => {
                let (key, warning) = SealingKey::from_file(path)
                    .with_context(|| format!("--secret-key-file {}", path.display()))?;
                if let Some(warning) = warning {
                    warn!("{warning}");
                }
                Some(Arc::new(key))
            }
            // The store dies with the process: a key of its own is as good as any.
            (None, BackendChoice::Memory) => Some(Arc::new(SealingKey::ephemeral()?)),
            // The store outlives the process: so must the key, kept beside it.
            (None, BackendChoice::Sqlite { data_dir }) => {
                let path = data_dir.join(KEY_FILE);
                let (key, made) = SealingKey::kept_in(&path)
                    .with_context(|| format!("the sealing key {}", path.display()))?;
                // Said once, when it is made: nothing is wrong, there is one more file
                // to back up.
                if made {
                    info!(
                        "made the sealing key {} (Slack apps' secrets and secret answers are \
                         sealed with it): back it up with the data directory, or pass \
                         --secret-key-file (docs/operations.md)",
                        path.display()
                    );
                }
                Some(Arc::new(key))
            }
            (None, BackendChoice::Redis { .. }) => None,
        })
    }

    /// The channels the node sends through, built from their settings.
    pub(super) fn channels(&self, key: Option<Arc<SealingKey>>) -> anyhow::Result<Channels> {
        Channels::build(&Setup {
            config: &self.channels,
            timeout: self.webhooks.timeout,
            key,
            public: self.http.public_url.as_ref().map(PublicUrl::origin),
        })
    }

    /// The engine, and the webhook store beside it (in the same Redis, shared by every
    /// node, or in this process).
    pub(super) async fn backend(&self) -> anyhow::Result<Stores> {
        let limits = self.webhooks.limits;
        Ok(match &self.backend {
            BackendChoice::Sqlite { data_dir } => {
                let engine = SqliteEngine::open(data_dir, self.settings.clone(), limits)
                    .await
                    .with_context(|| format!("--data-dir {}", data_dir.display()))?;
                let key_file = data_dir.join(KEY_FILE);
                if self.approvals.secret_key_file.is_none()
                    && engine.has_key()
                    && !key_file.exists()
                {
                    anyhow::bail!(
                        "--data-dir {}: {KEY_FILE} is missing, and the store holds what was \
                         sealed with it: restore it from the backup of the data directory (or \
                         pass it with --secret-key-file); a new key would not open those \
                         secrets",
                        data_dir.display()
                    );
                }
                let sealing = self.sealing_key()?;
                if let Some(key) = &sealing {
                    engine
                        .bind_key(&key.check())
                        .await
                        .with_context(|| format!("--data-dir {}", data_dir.display()))?;
                }
                let audit = engine.audit_store();
                let (backend, hooks) = engine.into_parts();
                (Arc::new(backend), Arc::new(hooks), audit, sealing)
            }
            BackendChoice::Memory => {
                let audit = Arc::new(MemoryAuditStore::new(
                    askgate_engines::memory::AUDIT_RECORDS_PER_TENANT,
                    self.settings.max_audit_bytes_per_tenant,
                ));
                let hooks = MemoryHookStore::new(limits).with_audit(audit.clone());
                (
                    Arc::new(MemoryBackend::new(self.settings.clone())),
                    Arc::new(hooks),
                    audit,
                    self.sealing_key()?,
                )
            }
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
                let audit = backend.audit_store();
                (
                    Arc::new(backend),
                    Arc::new(hooks),
                    Arc::new(audit),
                    self.sealing_key()?,
                )
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
        /// The claim naming the caller's groups (`--jwt-groups-claim`).
        groups_claim: String,
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
    pub(super) async fn authenticator(&self) -> anyhow::Result<Authenticator> {
        Ok(match self {
            Self::None { .. } => Authenticator::None,
            Self::Keys(path) => Authenticator::Keys(KeyStore::load(path)?),
            Self::Jwt {
                key,
                issuer,
                audience,
                groups_claim,
            } => Authenticator::Jwt(
                JwtVerifier::start(key, issuer.clone(), audience.clone())
                    .await?
                    .with_groups_claim(groups_claim),
            ),
        })
    }
}

impl TlsConfig {
    pub(super) fn server_config(&self) -> anyhow::Result<ServerTlsConfig> {
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
            settings: StateConfig::default(),
            asks: AskConfig::default(),
            transport: TransportConfig::default(),
            auth: AuthConfig::None {
                allow_anonymous: false,
            },
            tls: None,
            metrics: MetricsConfig::default(),
            backend: BackendChoice::default(),
            http: HttpConfig::default(),
            mcp: McpServing::default(),
            a2a: false,
            webhooks: WebhookConfig::default(),
            channels: ChannelConfig::default(),
            approvals: ApprovalConfig::default(),
        }
    }
}
